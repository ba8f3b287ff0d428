"""Left-padded key/value caches: several requests' rows in one batch cache, their pads masked.

Shared by the engine's batch (`engined.batching`) and the joint prefill of several prompt caches
(`lm.prefill_together`).
"""

from __future__ import annotations

from typing import Any

import torch
from transformers import DynamicCache

KeyValues = list[tuple[torch.Tensor, torch.Tensor]]  # per layer: keys, values [rows, heads, length, dim]


def plain_cache(cache: Any) -> bool:
    """A cache the batch can slice: every layer a full (not sliding) key/value layer."""
    layers = getattr(cache, "layers", None)
    return bool(layers) and all(
        type(layer).__name__ == "DynamicLayer" and getattr(layer, "keys", None) is not None for layer in layers
    )


def key_values(cache: DynamicCache) -> KeyValues:
    """A plain cache's key/values per layer (the tensors themselves, not copies)."""
    return [(layer.keys, layer.values) for layer in cache.layers]


def padded_cache(rows: list[KeyValues], width: int) -> DynamicCache:
    """One cache of several requests' key/values per layer, each left-padded to `width` positions."""
    layers = []
    for layer in range(len(rows[0])):
        keys = torch.cat([left_pad(row[layer][0], width) for row in rows])
        values = torch.cat([left_pad(row[layer][1], width) for row in rows])
        layers.append((keys, values))
    return DynamicCache(ddp_cache_data=layers)


def left_pad(tensor: torch.Tensor, width: int) -> torch.Tensor:
    """[rows, heads, length, dim] -> [rows, heads, width, dim], zeros before."""
    missing = width - tensor.shape[2]
    if missing == 0:
        return tensor
    pad = tensor.new_zeros(tensor.shape[0], tensor.shape[1], missing, tensor.shape[3])
    return torch.cat([pad, tensor], dim=2)


def left_padded_mask(lengths: torch.Tensor, width: int) -> torch.Tensor:
    """[rows, width]: 1 on each row's last `lengths[row]` positions, 0 on its pads before."""
    return (torch.arange(width)[None, :] >= (width - lengths)[:, None]).long()
