"""The method choice, coded once: the step state that decodes a request by its method.

`LocalEngine` runs a state alone (`stepping.run_alone`), the batcher steps many together;
both start them here. Which methods exist and which batch is `spd_lsp.api.METHOD`: the
product's, and those a benchmark registers in its own process (`register`).
"""

from __future__ import annotations

from typing import Any, Callable

import torch

from ngram_db import NgramSource
from spd_lsp.api import METHOD, CancelCheck, DecodeOptions, Method, Timings
from spd_lsp.engine.decoding.baselines import BeamState, IndependentState
from spd_lsp.engine.decoding.drafts import DraftRules, Hypothesis
from spd_lsp.engine.decoding.lm import ModelRunner
from spd_lsp.engine.decoding.superposed import SuperposedState

# A registered method's start: (options, logits, remainder, rules, generator, progress) -> its step state, where
# progress holds the state's `cancelled`, `timings` and `logits` (stepping.Progress).
Start = Callable[[DecodeOptions, torch.Tensor, str, DraftRules, "torch.Generator | None", dict[str, Any]], Any]
_REGISTERED: dict[str, Start] = {}


def register(method: Method, start: Start) -> None:
    """A method besides the product's (a benchmark's baseline, in the benchmark's own process): the engine and the
    batcher decode it from now on; the settings never offer it."""
    METHOD[method.name] = method
    _REGISTERED[method.name] = start


def check_method(options: DecodeOptions) -> None:
    if options.method not in METHOD:
        raise ValueError(f"unknown decoding method {options.method!r}; expected one of {', '.join(METHOD)}")


def seeded(options: DecodeOptions, device: torch.device) -> torch.Generator | None:
    """The sampling generator of the options' seed on the model's device (sampling runs there), or None."""
    seed = options.experimental.seed
    return torch.Generator(device=device).manual_seed(seed) if seed is not None else None


def start_state(
    options: DecodeOptions, logits: torch.Tensor, prompt: list[int], remainder: str, rules: DraftRules,
    ngrams: NgramSource | None, *, cancelled: CancelCheck, timings: Timings, generator: torch.Generator | None = None,
) -> Any:
    """The `stepping.StepState` of a request from its prompt's last logits. Nucleus (the paper's sequential
    baseline) is ONE of its k passes: the caller runs k, sharing `generator`; the others draw theirs from the seed."""
    progress = {"cancelled": cancelled, "timings": timings, "logits": logits}
    method = options.method
    if method == "superposed":
        return SuperposedState(prompt, remainder, rules, options, ngrams, **progress)
    if method == "beam":
        return BeamState(remainder, rules, options, **progress)
    if method == "greedy":
        return IndependentState(remainder, rules, options, 1, False, None, **progress)
    generator = generator if generator is not None else seeded(options, logits.device)
    if method == "nucleus":
        return IndependentState(remainder, rules, options, 1, True, generator, **progress)
    return _REGISTERED[method](options, logits, remainder, rules, generator, progress)


def final_drafts(state: Any, runner: ModelRunner) -> list[Hypothesis]:
    """A state's drafts once it is done, verified where its method and options say so."""
    return state.final(runner) if isinstance(state, SuperposedState) else state.drafts()
