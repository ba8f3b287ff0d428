"""The eager forward's pointwise work in bf16, fused (`pointwise.cpp`): a norm, a residual's sum and the next norm,
SiLU(gate) * up, the rotary embedding. Never in a traced graph (inductor fuses those itself), so no fakes."""

from __future__ import annotations

import torch


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    return torch.ops.spd.rms_norm(x, weight, eps)


def add_rms_norm(x: torch.Tensor, y: torch.Tensor, weight: torch.Tensor, eps: float
                 ) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.ops.spd.add_rms_norm(x, y, weight, eps)


def silu_mul(gate_up: torch.Tensor) -> torch.Tensor:
    return torch.ops.spd.silu_mul(gate_up)


def rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor, heads: int) -> torch.Tensor:
    return torch.ops.spd.rotary(x, cos, sin, heads)
