"""The method choice, coded once: the step state that decodes a request by its method.

`LocalEngine` runs a state alone (`stepping.run_alone`), the batcher steps many together;
both start them here. Which methods exist and which batch is `spd_lsp.api.METHOD`.
"""

from __future__ import annotations

from typing import Any

import torch

from ngram_db import NgramSource
from spd_lsp.api import METHOD, METHODS, CancelCheck, DecodeOptions, Timings
from spd_lsp.engine.decoding.baselines import BeamState, IndependentState
from spd_lsp.engine.decoding.drafts import DraftRules, Hypothesis
from spd_lsp.engine.decoding.lm import ModelRunner
from spd_lsp.engine.decoding.superposed import SuperposedState


def check_method(options: DecodeOptions) -> None:
    if options.method not in METHOD:
        raise ValueError(f"unknown decoding method {options.method!r}; expected one of {', '.join(METHODS)}")


def seeded(options: DecodeOptions, device: torch.device) -> torch.Generator | None:
    """The sampling generator of `options.seed` on the model's device (sampling runs there), or None."""
    return torch.Generator(device=device).manual_seed(options.seed) if options.seed is not None else None


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
    sample = method in ("nucleus", "nucleus_batched")
    generator = generator if generator is not None or not sample else seeded(options, logits.device)
    rows = options.k if method == "nucleus_batched" else 1
    return IndependentState(remainder, rules, options, rows, sample, generator, **progress)


def final_drafts(state: Any, runner: ModelRunner) -> list[Hypothesis]:
    """A state's drafts once it is done, verified where its method and options say so."""
    return state.final(runner) if isinstance(state, SuperposedState) else state.drafts()
