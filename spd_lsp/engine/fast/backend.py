"""The fast path of a `ModelRunner`: `FastLM` for every forward, a compiled step for plain decode steps.

A plain decode step is one input embedding a row ([B, 1, H], superposed or not) on a bucketed cache
(`cache.py`) whose rows all hold the same positions (one request's prompt, or its forked rows): the
step writes its key/values at column `length` of the fixed buffers and attends to the whole buffer
masked past it, so its shapes are (rows, bucket) and nothing syncs with the host. Anything else
(prefill chunks, verification's trees, the batch's padded rows) runs `FastLM` eagerly on the cache it is given.
"""

from __future__ import annotations

import logging
from typing import Any

import torch
from transformers import DynamicCache

from spd_lsp.engine.fast.cache import BucketLayer, bucket_cache, bucketed
from spd_lsp.engine.fast.compile import Compiled, mark_dynamic
from spd_lsp.engine.fast.model import FastLM

log = logging.getLogger(__name__)


class FastBackend:
    def __init__(self, lm: FastLM, *, compile: bool = True, weights: str = "float") -> None:
        self.lm = lm
        self.device = lm.device
        self.weights = weights
        # What `spd.status` shows of it: one dict, kept current as the step compiles or falls back to eager.
        self.info: dict[str, Any] = {"fastPath": True, "weights": weights,
                                     "weightMegabytes": {"decode": round(lm.weight_bytes(int4=True) / 1e6, 1),
                                                         "float": round(lm.weight_bytes(int4=False) / 1e6, 1)}}
        self.step_fn = Compiled(self.step_tensors, lm.device, enabled=compile, status=self.info)
        self.steps = 0

    def new_cache(self) -> DynamicCache:
        return bucket_cache(self.lm.layers)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.lm(*args, **kwargs)

    def step_tensors(self, x: torch.Tensor, column: torch.Tensor, keys: list[torch.Tensor],
                     values: list[torch.Tensor]) -> torch.Tensor:
        """Logits [B, 1, V] of inputs x [B, 1, H] at position `column` [1] of every row, written there into `keys`/`values`
        (per layer [B, kv heads, bucket, D]); what it attends to: the columns up to `column`."""
        positions = column.expand(x.shape[0], 1)
        visible = torch.arange(keys[0].shape[2], device=x.device) <= column
        mask = visible[None, None, None, :]

        def write(index: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            keys[index].index_copy_(2, column, k)
            values[index].index_copy_(2, column, v)
            return keys[index], values[index]

        return self.lm.forward(x, positions, mask, write, last_only=True)

    @torch.inference_mode()
    def step(self, cache: Any, embeds: torch.Tensor) -> torch.Tensor | None:
        """Logits [B, 1, V] of a plain decode step on `cache`, or None where this is not one (the caller runs `lm`)."""
        if embeds.shape[1] != 1 or not bucketed(cache):
            return None
        layers: list[BucketLayer] = cache.layers
        length = layers[0].length
        if embeds.shape[0] != layers[0].key_buffer.shape[0] or any(layer.length != length for layer in layers):
            return None
        for layer in layers:
            layer.reserve(length + 1)
            for buffer in (layer.key_buffer, layer.value_buffer):
                mark_dynamic(buffer, 2)  # one compiled graph for every bucket length
        column = torch.tensor([length], device=self.device)
        logits = self.step_fn(embeds, column, [l.key_buffer for l in layers], [l.value_buffer for l in layers])
        for layer in layers:
            layer.length = length + 1
        self.steps += 1
        return logits
