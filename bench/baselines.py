"""Baselines the benchmarks compare SPD with that the product does not offer: nucleus sampling as ONE batch of k
rows (the fair modern peer of SPD's one row; the product's nucleus is the paper's k sequential passes).

`register()` adds it to the engine's method registry in this process (`engine.decoding.methods.register`);
`loaded` is an `SPD_LSP_ENGINE_LOADER` (commands/engine.py) for an `spd-lsp engine` subprocess that decodes it too:

    SPD_LSP_ENGINE_LOADER=bench.baselines:loaded spd-lsp engine --socket ...
"""

from __future__ import annotations

from typing import Any

import torch

from spd_lsp.api import METHOD, DecodeOptions, Loaded, Method, ModelSpec
from spd_lsp.engine.decoding.baselines import IndependentState
from spd_lsp.engine.decoding.drafts import DraftRules

NUCLEUS_BATCHED = Method("nucleus_batched", batched=True)  # k samples as k rows of the batch


def _nucleus_batched(options: DecodeOptions, logits: torch.Tensor, remainder: str, rules: DraftRules,
                     generator: torch.Generator | None, progress: dict[str, Any]) -> IndependentState:
    return IndependentState(remainder, rules, options, options.k, True, generator, **progress)


def register() -> None:
    """The batched nucleus, decodable in this process (once is enough; again is harmless)."""
    if NUCLEUS_BATCHED.name not in METHOD:
        from spd_lsp.engine.decoding.methods import register as register_method

        register_method(NUCLEUS_BATCHED, _nucleus_batched)


def loaded(spec: ModelSpec) -> Loaded:
    """`spd-lsp engine`'s model, with the benchmarks' baselines registered."""
    from spd_lsp.engine.loading import load_local

    register()
    return load_local(spec)
