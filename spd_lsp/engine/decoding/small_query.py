"""Attention for short masked queries (verification's prefix trees) without `repeat_kv`.

transformers' SDPA integration packs the query heads of a grouped-query model (SmolLM2:
9 query heads on 3 key/value heads) only for a single query token; a masked query of
more tokens on the CPU falls back to `repeat_kv`, which copies every layer's keys and
values once per query head of a group, at every forward. Verification runs such
forwards: ~25 tokens a request under a 4-D tree mask. Here the query heads of a group
are stacked on the query axis ([B, kv heads, group * q, D]) so each key/value head is
read where it lies: two matmuls with the scores and the softmax in float32.

One-token queries go to SDPA, which stacks a group's query heads itself when given a mask;
unmasked ones (a decode step whose rows have no padding) get an all-true mask so that it
does (`packs_one_token`): without one SDPA ran its slower `enable_gqa` path. Masked queries longer than
`MAX_QUERY` (a prompt chunk after a cached one) go to SDPA with `enable_gqa` (`packs_long_query`): its CPU
flash kernel reads grouped heads itself, where transformers hands it `repeat_kv`'s copies whenever there is a
mask. Anything else goes to transformers' SDPA unchanged: no mask (the causal prefill of an empty cache),
masks that are not [B or 1, 1, q, kv], softcapping, attention sinks,
position biases and dropout. Sliding windows need nothing: they are in the mask.
Accelerators too: SDPA's fused kernels there were not measured against this.
"""

from __future__ import annotations

from typing import Any

import torch
from transformers import AttentionInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

from spd_lsp.engine.decoding.grouped import MAX_QUERY, grouped_attention  # noqa: F401  (re-exported)

# The registered name: it holds "sdpa" so transformers checks the model supports SDPA (the fallback).
NAME = "sdpa_small_query"
UNHANDLED_KWARGS = ("softcap", "s_aux", "sinks", "position_bias")


def handles(query: torch.Tensor, key: torch.Tensor, mask: torch.Tensor | None, *, dropout: float,
            kwargs: dict[str, Any]) -> bool:
    """Whether `small_query_attention` computes this call itself (else SDPA does)."""
    return 1 < query.shape[2] <= MAX_QUERY.get(query.dtype, MAX_QUERY[torch.float32]) and _grouped_masked(
        query, key, mask, dropout=dropout, kwargs=kwargs)


def packs_long_query(query: torch.Tensor, key: torch.Tensor, mask: torch.Tensor | None, *, dropout: float,
                     kwargs: dict[str, Any]) -> bool:
    """A masked query longer than `MAX_QUERY` on grouped heads on the CPU (a prompt chunk after a cached one):
    SDPA with `enable_gqa` (its flash kernel) rather than on `repeat_kv`'s copies. A 96-token chunk after
    2,800 cached tokens: 3.3 ms a layer against 5.6 ms (repeat_kv) and 20 ms (`grouped_attention`), bf16,
    one thread; 512 after 1,536: 10.0 / 11.7 / 75 ms (fp32: 22.8 / 25.6 / 88 ms)."""
    return (query.shape[2] > MAX_QUERY.get(query.dtype, MAX_QUERY[torch.float32])
            and query.shape[1] != key.shape[1] and _grouped_masked(query, key, mask, dropout=dropout, kwargs=kwargs))


def _grouped_masked(query: torch.Tensor, key: torch.Tensor, mask: torch.Tensor | None, *, dropout: float,
                    kwargs: dict[str, Any]) -> bool:
    """A multi-token query on the CPU under one [B or 1, 1, q, kv] mask, on heads grouped evenly, nothing else."""
    q_length, heads, kv_heads = query.shape[2], query.shape[1], key.shape[1]
    return (
        query.device.type == "cpu"
        and mask is not None
        and mask.dim() == 4
        and mask.shape[1] == 1
        and mask.shape[-2:] == (q_length, key.shape[2])
        and heads % kv_heads == 0
        and not dropout
        and all(kwargs.get(name) is None for name in UNHANDLED_KWARGS)
    )


def packs_one_token(query: torch.Tensor, key: torch.Tensor, mask: torch.Tensor | None, *, dropout: float,
                    kwargs: dict[str, Any]) -> bool:
    """A one-token query on grouped heads without a mask (a decode step of unpadded rows) on the CPU.

    transformers hands SDPA such a call with `enable_gqa`, which on this CPU took 1.2x (one row) and
    2.0x (8 rows) the time of a whole decode step under its one-token path that stacks a group's
    query heads, taken only when a mask is given (`bench/bench_verify.py --attention 7`: the decode
    steps): so it gets an all-true mask, which attends exactly as none does."""
    return (
        query.device.type == "cpu"
        and query.shape[2] == 1
        and mask is None
        and query.shape[1] != key.shape[1]
        and not dropout
        and all(kwargs.get(name) is None for name in UNHANDLED_KWARGS)
    )


def small_query_attention(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                          attention_mask: torch.Tensor | None, dropout: float = 0.0, scaling: float | None = None,
                          **kwargs: Any) -> tuple[torch.Tensor, None]:
    """An `AttentionInterface` function: `grouped_attention` where it `handles` the call, else transformers' SDPA
    (a one-token query on grouped heads with an all-true mask where it has none: `packs_one_token`)."""
    if packs_one_token(query, key, attention_mask, dropout=dropout, kwargs=kwargs):
        attention_mask = torch.ones(1, 1, 1, key.shape[2], dtype=torch.bool, device=query.device)
    if packs_long_query(query, key, attention_mask, dropout=dropout, kwargs=kwargs):
        out = torch.nn.functional.scaled_dot_product_attention(query, key, value, attn_mask=attention_mask,
                                                               scale=scaling, enable_gqa=True)
        return out.transpose(1, 2).contiguous(), None
    if not handles(query, key, attention_mask, dropout=dropout, kwargs=kwargs):
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                      **kwargs)
    scale = scaling if scaling is not None else query.shape[-1] ** -0.5
    return grouped_attention(query, key, value, attention_mask, scaling=scale), None


AttentionInterface.register(NAME, small_query_attention)
AttentionMaskInterface.register(NAME, sdpa_mask)  # the masks SDPA gets, so the fallback sees them unchanged


def use_small_query_attention(model: Any) -> bool:
    """Switch a model on SDPA to `small_query_attention`; False (unchanged) where its attention does not
    go through transformers' `AttentionInterface` or is not SDPA."""
    if model.config._attn_implementation != "sdpa" or not model._can_set_attn_implementation():
        return False
    model.set_attn_implementation(NAME)
    return model.config._attn_implementation == NAME
