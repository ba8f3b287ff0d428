"""Attention of a short masked query on grouped key/value heads without copying them (`grouped_attention`): pure
torch, for the fast path's forward and for transformers' (`attention.py` registers it there)."""

from __future__ import annotations

import torch

# Longest query handled here, by dtype (others: float32's). `bench/bench_verify.py --attention` (370-token
# prompt cache, 2 cores): in bf16 a prompt chunk's whole forward took 0.91-1.00x SDPA's time at 25-128
# tokens, 0.94-0.99x at 192 and 0.97-0.98x at 256; in float32 0.98-1.01x up to 64 tokens, 1.03x at 96 and
# 1.05-1.12x above. Verification's trees (~25 tokens a request) stay well inside both.
MAX_QUERY = {torch.bfloat16: 128, torch.float16: 128, torch.float32: 64}


def grouped_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, mask: torch.Tensor, *,
                      scaling: float) -> torch.Tensor:
    """[B, q, H, D] attention output of query [B, H, q, D] on key/value [B, Hkv, kv, D] under `mask`
    [B or 1, 1, q, kv] (bool: True attends; float: added to the scores). A query row that sees nothing
    gives zeros, as SDPA does."""
    batch, heads, q_length, dim = query.shape
    kv_heads, kv_length = key.shape[1], key.shape[2]
    group = heads // kv_heads
    packed = query.reshape(batch, kv_heads, group * q_length, dim).float() * scaling  # a copy: never the caller's
    scores = torch.matmul(packed, key.float().transpose(-1, -2))  # [B, Hkv, group * q, kv]
    grouped = scores.view(batch, kv_heads, group, q_length, kv_length)
    mask = mask[:, :, None]  # [B or 1, 1, 1, q, kv]: the same mask for every head of every group
    if mask.dtype == torch.bool:
        grouped.masked_fill_(~mask, float("-inf"))
        blind = ~mask.any(dim=-1, keepdim=True)
    else:
        grouped.add_(mask)
        blind = torch.isneginf(mask).all(dim=-1, keepdim=True)
    probs = torch.softmax(scores, dim=-1)
    probs.view_as(grouped).masked_fill_(blind, 0.0)  # no branch on the data: the fast path's tree step compiles it
    out = torch.matmul(probs.to(value.dtype), value)  # [B, Hkv, group * q, D]
    return out.view(batch, heads, q_length, value.shape[-1]).transpose(1, 2).contiguous()
