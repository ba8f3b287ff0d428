"""Forwards of a few dozen rows on the GGUF's own blocks on AMX's tiles (`amx.cpp`): `amx_int4_linear` (Q4_1 blocks)
and `amx_q8_linear` (Q8_0 blocks), each block dequantised exactly as the float weights were made, so these are the
float weights' products summed in another order."""

from __future__ import annotations

import torch


def int4_linear(x: torch.Tensor, codes: torch.Tensor, scales: torch.Tensor, mins: torch.Tensor) -> torch.Tensor:
    return torch.ops.spd.amx_int4_linear(x.contiguous(), codes, scales, mins)


def q8_linear(x: torch.Tensor, codes: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    return torch.ops.spd.amx_q8_linear(x.contiguous(), codes, scales)


def takes(n: int, k: int) -> bool:
    """Projections the kernels take: N a multiple of 16, K of 64."""
    return n % 16 == 0 and k % 64 == 0


def register_fakes() -> None:
    torch.library.register_fake("spd::amx_int4_linear")(
        lambda x, codes, scales, mins: x.new_empty(x.shape[0], codes.shape[0]))
    torch.library.register_fake("spd::amx_q8_linear")(lambda x, codes, scales: x.new_empty(x.shape[0], codes.shape[0]))
