"""Attention on CPU kernels of our own: the one-token decode step's (`attention.cpp`, `torch.ops.spd.decode_attention`)
and a prompt's causal attention (`prefill.cpp`, `torch.ops.spd_prefill.causal_attention`).

Why: in the compiled step, SDPA's CPU kernel took ~117 us a layer (3.5 ms of a 14 ms step: 3 query heads per key/value
head, 3 heads on 2 threads, and the masked bucket read whole) for ~0.4 MB of keys and values. The kernel reads only the
live columns, splits them in chunks over the threads, and joins the chunks' softmaxes (docs/performance-step.md,
round 9).

The prompt's: SDPA's CPU flash kernel ran a 512-token prompt's attention at ~50 GFLOP/s (5.7-6.5 ms a layer, ~30 % of
the prefill) in bf16; the kernel packs each head's keys and values for AVX-512 BF16 dot products (prefill.cpp).

They are built and loaded with the other kernels (`kernels.py`); where they cannot be, SDPA serves.
"""

from __future__ import annotations

from typing import NamedTuple

import torch


class Upto(NamedTuple):
    """A decode step's mask given as its column: every row attends to columns 0..column of the cache's buffers (the
    step's own key/value written there), nothing after it. `FastLM._attend` runs `decode_attention` on it."""
    column: torch.Tensor


PROMPT_ENV = "SPD_LSP_PREFILL_KERNEL"  # "0": a prompt's attention stays on SDPA


class Causal(NamedTuple):
    """A prompt chunk's mask given as the cache's length before it: query t (at position offset + t) attends to
    columns 0..offset + t, the chunk's own included (`FastLM.mask` where nothing is padded)."""
    offset: int


def _shape(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, column: torch.Tensor, scale: float) -> torch.Tensor:
    """What the op returns, for tracing: a tensor like q (contiguous)."""
    return q.new_empty(q.shape)


def decode_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, column: torch.Tensor, scale: float
                     ) -> torch.Tensor:
    """[B, H, G, D]: softmax(q kᵀ · scale) v over columns 0..column of k/v [B, H, S, D] (`build` first)."""
    return torch.ops.spd.decode_attention(q, k, v, column, scale)


def _prompt_shape(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, offset: int, scale: float,
                  visible: torch.Tensor | None = None) -> torch.Tensor:
    """What `causal_attention` returns, for tracing: [B, T, heads * D]."""
    batch, heads, tokens, dim = q.shape
    return q.new_empty(batch, tokens, heads * dim)


def causal_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, offset: int, scale: float,
                     visible: torch.Tensor | None = None) -> torch.Tensor:
    """[B, T, H * G * D]: each query t of q [B, H * G, T, D] (bf16) attends to columns 0..offset + t of k/v [B, H, S, D],
    and where `visible` [B or 1, 1, T, >= offset + T] (bool) is given only to those it marks; a query that sees nothing
    gets zeros (`kernels.build` first, with AVX-512 BF16: `kernels.matvec_ready()`)."""
    return torch.ops.spd_prefill.causal_attention(q, k, v, offset, scale, visible)
