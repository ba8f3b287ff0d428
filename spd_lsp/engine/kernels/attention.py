"""The decode step's attention (`attention.cpp`): `torch.ops.spd.decode_attention`.

Why: in the compiled step, SDPA's CPU kernel took ~117 us a layer (3.5 ms of a 14 ms step: 3 query heads per key/value
head, and the masked bucket read whole) for ~0.4 MB of keys and values. The kernel reads only the live columns, splits
them in chunks over the threads, and joins the chunks' softmaxes.
"""

from __future__ import annotations

import torch


def decode_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, column: torch.Tensor, scale: float
                     ) -> torch.Tensor:
    """[B, H, G, D]: softmax(q kᵀ · scale) v over columns 0..column of k/v [B, H, S, D]."""
    return torch.ops.spd.decode_attention(q, k, v, column, scale)


def register_fakes() -> None:
    torch.library.register_fake("spd::decode_attention")(lambda q, k, v, column, scale: q.new_empty(q.shape))
