"""Left-padded key/value caches: several requests' rows in one batch cache, their pads masked.

Shared by the engine's batch (`engine.batcher`) and the joint prefill of several prompt caches
(`lm.prefill_together`).
"""

from __future__ import annotations

from typing import Any

import torch
from transformers import DynamicCache

KeyValues = list[tuple[torch.Tensor, torch.Tensor]]  # per layer: keys, values [rows, heads, length, dim]


def plain_cache(cache: Any) -> bool:
    """A cache the batch can slice: every layer a full (not sliding) key/value layer."""
    return full_layers(cache) and all(getattr(layer, "keys", None) is not None for layer in cache.layers)


def full_layers(cache: Any) -> bool:
    """Every layer of `cache` a full (not sliding) key/value layer, maybe still empty."""
    layers = getattr(cache, "layers", None)
    return bool(layers) and all(type(layer).__name__ == "DynamicLayer" or getattr(layer, "plain", False)
                                for layer in layers)


def key_values(cache: DynamicCache) -> KeyValues:
    """A plain cache's key/values per layer (the tensors themselves, not copies)."""
    return [(layer.keys, layer.values) for layer in cache.layers]


def padded_cache(rows: list[KeyValues], width: int) -> DynamicCache:
    """One cache of several requests' key/values per layer, each left-padded to `width` positions."""
    return DynamicCache(ddp_cache_data=[
        (left_padded([row[layer][0] for row in rows], width), left_padded([row[layer][1] for row in rows], width))
        for layer in range(len(rows[0]))
    ])


def left_padded(tensors: list[torch.Tensor], width: int) -> torch.Tensor:
    """Tensors [rows, heads, length, dim] one after another along rows, each left-padded to `width`
    positions with zeros (finite: a masked position must not turn its attention weights to NaN)."""
    first = tensors[0]
    out = first.new_zeros(sum(t.shape[0] for t in tensors), first.shape[1], width, first.shape[3])
    start = 0
    for tensor in tensors:
        out[start : start + tensor.shape[0], :, width - tensor.shape[2] :] = tensor
        start += tensor.shape[0]
    return out


def left_padded_mask(lengths: torch.Tensor, width: int) -> torch.Tensor:
    """[rows, width]: 1 on each row's last `lengths[row]` positions, 0 on its pads before."""
    return (torch.arange(width)[None, :] >= (width - lengths)[:, None]).long()
