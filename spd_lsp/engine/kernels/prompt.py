"""A prompt's (or a verification tree's) causal attention (`prompt.cpp`): `torch.ops.spd.causal_attention`.

Why: SDPA's CPU flash kernel ran a 512-token prompt's attention at ~50 GFLOP/s (5.7-6.5 ms a layer, ~30 % of the
prefill) in bf16; the kernel packs each head's keys and values for AVX-512 BF16 dot products, or AMX's tiles.
"""

from __future__ import annotations

import torch


def causal_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, offset: int, scale: float,
                     visible: torch.Tensor | None = None, *, amx: bool = True) -> torch.Tensor:
    """[B, T, H * G * D]: each query t of q [B, H * G, T, D] (bf16) attends to columns 0..offset + t of k/v [B, H, S, D],
    and where `visible` [B or 1, 1, T, >= offset + T] (bool) is given only to those it marks; a query that sees nothing
    gets zeros. `amx`: a head of 64 dims on AMX's tiles where the library has them."""
    return torch.ops.spd.causal_attention(q, k, v, offset, scale, visible, amx)


def register_fakes() -> None:
    def shape(q, k, v, offset, scale, visible=None, amx=True):  # noqa: ANN001, ANN202
        batch, heads, tokens, dim = q.shape
        return q.new_empty(batch, tokens, heads * dim)

    torch.library.register_fake("spd::causal_attention")(shape)
