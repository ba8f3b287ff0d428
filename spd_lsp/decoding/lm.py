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
from spd_lsp.decoding.types import CancelCheck, Cancelled, never_cancelled
from spd_lsp.model import cpu_pressure, intra_op_threads

# Prompt tokens per prefill forward: a superseded request stops within one chunk. On the
# CPU 96 (~90 ms at ~0.95 ms/token) took 0.92x the time of 64 per prompt (bf16, SDPA).
CPU_PREFILL_CHUNK = 96
ACCELERATOR_PREFILL_CHUNK = 512
# Prompt caches kept: the current one and the last others (another document, another
# region of one), so going back to where the user was is not a cold request again.
# A 512-token prompt of the bundled model holds ~12 MB in bf16.
CACHE_SLOTS = 4
# Tokens a prompt may drop from a cache it continues (healing, backspaces) before it counts
# as another prompt: that cache is then kept and the prompt gets its own.
FEW_TOKENS = 32


def common_prefix_length(a: list[int], b: list[int]) -> int:
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n



class ModelRunner:
    """A model plus batch-1 KV caches of recent prompts, reused across calls.

    `cache` is the current prompt's; up to `slots - 1` others stay parked, least
    recently used first, and a prompt continues the one it shares most with.
    `cached_ids` always names exactly what the cache holds: it grows only after a
    forward succeeded, and a failed forward drops the cache.
    """

    def __init__(
        self, model: Any, device: torch.device, *, chunk_tokens: int | None = None, slots: int = CACHE_SLOTS
    ):
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
        self.slots = max(1, slots)
        self.threads = torch.get_num_threads()  # torch's default: the CPU's cores
        self.parked: list[tuple[DynamicCache, list[int]]] = []  # least recently used first

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

    def prefill(self, prompt_ids: list[int], cancelled: CancelCheck = never_cancelled) -> tuple[torch.Tensor, int]:
        """Logits after prompt_ids, feeding only what the cache lacks; returns (logits, reused).

        The new tokens run in chunks of `chunk_tokens`; `cancelled()` is checked before
        each, and raises `Cancelled` with the chunks already run kept in the cache.
        """
        self._activate(prompt_ids)
        if self.device.type == "cpu":  # per request, in the thread that runs the forwards
            torch.set_num_threads(intra_op_threads(self.threads, cpu_pressure()))
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

    def _activate(self, prompt_ids: list[int]) -> None:
        """Make the cache that shares most with `prompt_ids` the current one.

        A prompt that drops more than `FEW_TOKENS` of that cache's tokens (another region)
        leaves it parked and starts a new cache, from a copy of the shared part when that
        is long; the least recently used cache beyond `slots` is dropped.
        """
        held = self.parked + ([(self.cache, self.cached_ids)] if self.cache is not None and self.cached_ids else [])
        if not held:
            return
        shared = [common_prefix_length(ids, prompt_ids) for _, ids in held]
        best = max(range(len(held)), key=lambda i: (shared[i], i))  # ties: the most recent
        cache, ids = held.pop(best)
        if self.slots > 1 and len(ids) - shared[best] > FEW_TOKENS:
            held.append((cache, ids))
            cache, ids = self._copy(cache, shared[best]), ids[: shared[best]]
        self.parked = held[-(self.slots - 1) :] if self.slots > 1 else []
        self.cache, self.cached_ids = cache, ids if cache is not None else []

    def _copy(self, cache: DynamicCache, length: int) -> DynamicCache | None:
        """The first `length` positions of `cache` as a new cache; None where too few to be worth it."""
        if length <= FEW_TOKENS or getattr(cache, "is_croppable", True) is False:
            return None
        copied = copy.deepcopy(cache)
        copied.crop(length - copied.get_seq_length())
        return copied

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
