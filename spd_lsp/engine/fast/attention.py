"""The one-token decode step's attention as a CPU kernel of our own (`attention.cpp`, `torch.ops.spd.decode_attention`).

Why: in the compiled step, SDPA's CPU kernel took ~117 us a layer (3.5 ms of a 14 ms step: 3 query heads per key/value
head, 3 heads on 2 threads, and the masked bucket read whole) for ~0.4 MB of keys and values. The kernel reads only the
live columns, splits them in chunks over the threads, and joins the chunks' softmaxes (docs/performance-step.md,
round 9).

It is built and loaded with the other kernels (`kernels.py`); where it cannot be, the step keeps SDPA.
"""

from __future__ import annotations

from typing import NamedTuple

import torch


class Upto(NamedTuple):
    """A decode step's mask given as its column: every row attends to columns 0..column of the cache's buffers (the
    step's own key/value written there), nothing after it. `FastLM._attend` runs `decode_attention` on it."""
    column: torch.Tensor


def _shape(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, column: torch.Tensor, scale: float) -> torch.Tensor:
    """What the op returns, for tracing: a tensor like q (contiguous)."""
    return q.new_empty(q.shape)


def decode_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, column: torch.Tensor, scale: float
                     ) -> torch.Tensor:
    """[B, H, G, D]: softmax(q kᵀ · scale) v over columns 0..column of k/v [B, H, S, D] (`build` first)."""
    return torch.ops.spd.decode_attention(q, k, v, column, scale)
