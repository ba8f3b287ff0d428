"""Model stepping: the only place that calls the transformer's forward.

Works with any Hugging Face causal LM whose forward takes `inputs_embeds` with a
KV cache. Inputs are built with the model's own input-embedding module, so models
that scale embeddings there (Gemma) get exactly what token ids would give them.
"""

from __future__ import annotations

import copy
import inspect
from typing import Any

import torch
from transformers import DynamicCache

from spd_lsp.decoding.placement import device_sync
from spd_lsp.decoding.types import CancelCheck, Cancelled

# Prompt tokens per prefill forward: a superseded request stops within one chunk.
CPU_PREFILL_CHUNK = 64
ACCELERATOR_PREFILL_CHUNK = 512


def common_prefix_length(a: list[int], b: list[int]) -> int:
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


def _never() -> bool:
    return False


class ModelRunner:
    """A model plus one batch-1 KV cache holding the last prompt, reused across calls.

    `cached_ids` always names exactly what the cache holds: it grows only after a
    forward succeeded, and a failed forward drops the cache.
    """

    def __init__(self, model: Any, device: torch.device, *, chunk_tokens: int | None = None):
        self.model = model
        self.device = device
        default_chunk = CPU_PREFILL_CHUNK if device.type == "cpu" else ACCELERATOR_PREFILL_CHUNK
        self.chunk_tokens = chunk_tokens or default_chunk
        self.embedding = model.get_input_embeddings()
        parameters = inspect.signature(model.forward).parameters
        self._keep_last = "logits_to_keep" in parameters
        # transformers 5 renames past_key_values to cache; accept both generations.
        self._cache_kwarg = "cache" if "cache" in parameters else "past_key_values"
        self.cache: DynamicCache | None = None
        self.cached_ids: list[int] = []

    @torch.inference_mode()
    def embed(self, ids: torch.Tensor) -> torch.Tensor:
        return self.embedding(ids.to(self.device))

    @torch.inference_mode()
    def forward(
        self, cache: DynamicCache, ids: torch.Tensor | None = None, embeds: torch.Tensor | None = None, *,
        attention_mask: torch.Tensor | None = None, position_ids: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Append ids [B, T] or embeds [B, T, H] to cache; return last-position logits [B, V] in fp32.

        `attention_mask` [B, cached + T] and `position_ids` [B, T]: rows of a left-padded batch
        (the engine's continuous batching); None for unpadded rows.
        """
        kwargs: dict[str, Any] = {self._cache_kwarg: cache, "use_cache": True}
        if attention_mask is not None:
            kwargs["attention_mask"] = attention_mask.to(self.device)
        if position_ids is not None:
            kwargs["position_ids"] = position_ids.to(self.device)
        if self._keep_last:
            kwargs["logits_to_keep"] = 1
        if ids is not None:
            out = self.model(input_ids=ids.to(self.device), **kwargs)
        else:
            out = self.model(inputs_embeds=embeds, **kwargs)
        logits = out.logits[:, -1, :].float()
        device_sync(self.device)
        return logits

    def prefill(self, prompt_ids: list[int], cancelled: CancelCheck = _never) -> tuple[torch.Tensor, int]:
        """Logits after prompt_ids, feeding only what the cache lacks; returns (logits, reused).

        The new tokens run in chunks of `chunk_tokens`; `cancelled()` is checked before
        each, and raises `Cancelled` with the chunks already run kept in the cache.
        """
        reused = common_prefix_length(self.cached_ids, prompt_ids)
        reused = min(reused, len(prompt_ids) - 1)  # at least one token must run for logits
        if reused <= 0 or not self._crop(reused):
            self.cache, reused = DynamicCache(config=self.model.config), 0
        self.cached_ids = list(prompt_ids[:reused])
        logits = None
        for start in range(reused, len(prompt_ids), self.chunk_tokens):
            if cancelled():
                raise Cancelled()
            end = min(start + self.chunk_tokens, len(prompt_ids))
            try:
                logits = self.forward(self.cache, ids=torch.tensor([prompt_ids[start:end]], dtype=torch.long))
            except BaseException:
                self.cache, self.cached_ids = None, []  # the layers may hold part of the chunk
                raise
            self.cached_ids = list(prompt_ids[:end])
        assert logits is not None
        return logits, reused

    def rewind(self, length: int) -> None:
        """Drop positions past `length` (superposed or draft tokens) so the prompt stays reusable."""
        if self._crop(length):
            self.cached_ids = self.cached_ids[:length]
        else:
            self.cache, self.cached_ids = None, []

    def fork(self, batch: int) -> DynamicCache:
        """A private copy of the prompt cache with `batch` rows, for batched baselines."""
        assert self.cache is not None
        forked = copy.deepcopy(self.cache)
        forked.batch_repeat_interleave(batch)
        return forked

    def _crop(self, length: int) -> bool:
        """Cut the cache back to `length`; False where this cache kind cannot (sliding windows, recurrent state)."""
        if self.cache is None or getattr(self.cache, "is_croppable", True) is False:
            return False
        excess = self.cache.get_seq_length() - length
        try:
            if excess > 0:
                self.cache.crop(-excess)  # negative: "remove this many", in every transformers version
        except (RuntimeError, ValueError):
            return False
        return True

    @torch.inference_mode()
    def score(self, cache: DynamicCache, ids: torch.Tensor) -> torch.Tensor:
        """Append ids [B, T] to cache; return the logits at every position [B, T, V] in fp32 (verification)."""
        out = self.model(input_ids=ids.to(self.device), **{self._cache_kwarg: cache, "use_cache": True})
        return out.logits.float()
