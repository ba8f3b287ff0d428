"""The whole plain decode step of a decoder in one call (`step.cpp`): `spd.StepModel` holds views of the weights (added
layer by layer, segment by segment), `decode_step` runs a step on it. Assembled from a model by
`engine/fast/fused.py`."""

from __future__ import annotations

import torch


def step_model(sizes: list[int], numbers: list[float], tables: list[torch.Tensor]) -> torch.ScriptObject:
    """An empty model: sizes [layers, hidden, heads, kv heads, head dim, intermediate, window, activation], numbers
    [eps, attention scale], the rotary tables (cos, sin pairs)."""
    return torch.classes.spd.StepModel(sizes, numbers, tables)


def decode_step(model: torch.ScriptObject, x: torch.Tensor, column: int, keys: list[torch.Tensor],
                values: list[torch.Tensor]) -> torch.Tensor:
    """Logits [B, 1, V] of x [B, 1, H] at position `column` of every row, its keys/values written there."""
    # the overload itself: the packet's call first looks through every argument for fake script objects (~65 checks
    # a step here)
    return torch.ops.spd.decode_step.default(model, x, column, keys, values)


def register_fakes() -> None:
    """None: the step is never traced (it replaces the traced graph)."""
