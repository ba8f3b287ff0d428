"""Model stepping: the only place that calls the transformer's forward.

Works with any Hugging Face causal LM whose forward takes `inputs_embeds` with a
KV cache. Inputs are built with the model's own input-embedding module, so models
that scale embeddings there (Gemma) get exactly what token ids would give them.
"""

from __future__ import annotations

import copy
import inspect
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from transformers import DynamicCache

from spd_lsp.engine.decoding.interrupt import Interrupted, decoder_layers, hook_layers, interruptible
from spd_lsp.engine.decoding.padding import full_layers, key_values, left_padded_mask, padded_cache, plain_cache
from spd_lsp.engine.decoding.placement import device_sync
from spd_lsp.api import CancelCheck, Cancelled, never_cancelled
from spd_lsp.engine.decoding.threads import cpu_pressure, intra_op_threads
from spd_lsp.engine.decoding.backends import attached

log = logging.getLogger(__name__)

# Prompt tokens per forward where forwards are shared (the Batcher's joiners between two decode
# steps, `prefill_together`) and of a runner given no `chunk_seconds`: such a chunk is the
# longest a superseded request runs on. On the CPU 96 (~90 ms at ~0.95 ms/token) took 0.92x
# the time of 64 per prompt (bf16, SDPA).
CPU_PREFILL_CHUNK = 96
ACCELERATOR_PREFILL_CHUNK = 512
# A runner's own prefill (`ModelRunner.prefill`) sizes its chunks by time instead, from the seconds per
# token its last chunk took. Short chunks cost a tax (96-token chunks: 3.4x one forward's time for 2,048
# tokens, bf16; 512-token ones 1.23x: each chunk reads all the weights again, runs its linears on fewer
# rows and its attention under a mask over the whole cache rather than causally), so the chunks are
# long, and a superseded prefill stops within one decoder layer instead (`interrupt.py`). Where the
# forward can resume at a layer (the fast path: `Interrupted`), a cancelled chunk keeps the layers it
# ran and the next prefill goes on from there (`Partial`): its chunks are the fewest equal ones whose
# layers last at most LAYER_SECONDS (the stop's latency), at least MIN_LAYER_CHUNK tokens; on this
# machine, idle, that is a whole 2,048-token bf16 prompt in one forward. Elsewhere a cancelled prefill
# keeps only the chunks it finished, so its chunks last about CHUNK_SECONDS, at least MIN_CHUNK tokens:
# shorter than the time between two keystrokes, they still make progress while the user types.
# `bench/bench_prefill.py --compare-chunks`: docs/performance.md.
CHUNK_SECONDS = 0.3
LAYER_SECONDS = 0.06
MIN_CHUNK, MAX_CHUNK = 512, 4096
MIN_LAYER_CHUNK = 256
FIRST_TOKEN_SECONDS = 0.001  # the first chunk's guess, before a forward was timed (~0.4-1 ms/token on 2 cores)
NO_LOGITS = torch.empty(0, dtype=torch.long)  # `logits_to_keep` of a chunk before the last: no output head
# Prompt caches kept: the current one and the last others (another document, another
# region of one), so going back to where the user was is not a cold request again.
# A 512-token prompt of the bundled model holds ~15 MB in bf16 (its 640-position buffers).
CACHE_SLOTS = 4
# Bytes the parked caches (not the current one) may hold together: the least recently used
# beyond it are dropped. The bundled model parks its 3 at the shipped prompt (~1,400 tokens:
# ~35 MB each); a 1.7B of 24 layers x 32 kv heads x 64 (~197 kB a position) parks one
# 512-token prompt (126 MB) and none of the shipped size: 4 of 512 tokens held ~500 MB of
# its resident memory (docs/performance.md#resident-memory).
PARKED_BYTES = 128 * 2**20
# Tokens a prompt may drop from a cache it continues (healing, backspaces) before it counts
# as another prompt: that cache is then kept and the prompt gets its own.
FEW_TOKENS = 32


def cache_bytes(cache: Any) -> int:
    """Bytes a prompt cache holds: its layers' buffers (the fast path's, whole capacity) or key/value tensors."""
    total = 0
    for layer in getattr(cache, "layers", None) or ():
        for name in ("key_buffer", "value_buffer") if hasattr(layer, "key_buffer") else ("keys", "values"):
            tensor = getattr(layer, name, None)
            if isinstance(tensor, torch.Tensor):
                total += tensor.untyped_storage().nbytes()
    return total


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

    `net` is what runs every forward: the model's fast backend where `load_model` attached one
    (spd_lsp/engine/fast: our own forward, bucketed caches, a compiled decode step), else the model.
    """

    def __init__(
        self, model: Any, device: torch.device, *, chunk_tokens: int | None = None, slots: int = CACHE_SLOTS,
        chunk_seconds: float | None = CHUNK_SECONDS, layer_seconds: float = LAYER_SECONDS,
        parked_bytes: int = PARKED_BYTES,
    ):
        """`chunk_tokens`: the tokens of a shared forward (`prefill_together`, the Batcher); given, `prefill`
        runs chunks of exactly that many too. Else `prefill` runs timed chunks, cancellable inside a forward:
        of about `layer_seconds` a decoder layer where a cancelled forward resumes (the fast path), else of
        about `chunk_seconds` each (None: `chunk_tokens`' chunks, cancellable between them)."""
        self.model = model
        self.device = device
        default_chunk = CPU_PREFILL_CHUNK if device.type == "cpu" else ACCELERATOR_PREFILL_CHUNK
        self.chunk_tokens = chunk_tokens or default_chunk
        self.chunk_seconds = chunk_seconds if chunk_tokens is None else None
        self.token_seconds = FIRST_TOKEN_SECONDS  # per prompt token, as the last timed chunk ran
        self.interruptible = hook_layers(model)
        self.embedding = model.get_input_embeddings()
        self.fast = attached(model)
        self.net = self.fast or model
        self.layers = len(decoder_layers(model) or ())
        # The fast path's forward raises `Interrupted` and starts at any layer: a cancelled chunk is resumed.
        self.resumable = self.fast is not None and self.layers > 0
        self.layer_seconds = layer_seconds
        self.partial: Partial | None = None  # the chunk a cancel stopped inside its forward, to resume
        parameters = inspect.signature(model.forward).parameters if self.fast is None else {"logits_to_keep": None}
        self._keep_last = "logits_to_keep" in parameters
        # transformers 5 renames past_key_values to cache; accept both generations.
        self._cache_kwarg = "cache" if "cache" in parameters else "past_key_values"
        self.cache: DynamicCache | None = None
        self.cached_ids: list[int] = []
        self.slots = max(1, slots)
        self.threads = torch.get_num_threads()  # torch's default: the CPU's cores
        self.parked: list[tuple[DynamicCache, list[int]]] = []  # least recently used first
        self.parked_bytes = parked_bytes  # what `parked` may hold (`PARKED_BYTES`)
        self.forwards = 0  # forwards run through `forward`

    @torch.inference_mode()
    def embed(self, ids: torch.Tensor) -> torch.Tensor:
        return self.embedding(ids.to(self.device))

    @torch.inference_mode()
    def forward(
        self, cache: DynamicCache, ids: torch.Tensor | None = None, embeds: torch.Tensor | None = None, *,
        attention_mask: torch.Tensor | None = None, position_ids: torch.Tensor | None = None,
        logits: bool = True,
    ) -> torch.Tensor | None:
        """Append ids [B, T] or embeds [B, T, H] to cache; return last-position logits [B, V] in fp32.

        `attention_mask` [B, cached + T] and `position_ids` [B, T]: rows of a left-padded batch
        (the engine's continuous batching); None for unpadded rows. `logits=False`: none (the output
        head is skipped where the model takes `logits_to_keep`: a prefill chunk before the last).
        """
        self.forwards += 1
        if self.fast is not None and ids is not None and ids.shape[1] == 1 and logits:
            # One token whose logits are wanted (a warm request's last prompt token): a decode step, so the compiled
            # one, not an eager forward (a warm request's prompt phase: 16.3 against 19.5 ms, docs/performance.md).
            ids, embeds = None, self.embed(ids)
        if self.fast is not None and embeds is not None:
            stepped = self.fast.step(cache, embeds, attention_mask, position_ids)  # a decode step: the compiled one
            if stepped is not None:
                logits = stepped[:, -1, :].float()
                device_sync(self.device)
                return logits
        kwargs: dict[str, Any] = {self._cache_kwarg: cache, "use_cache": True}
        if attention_mask is not None:
            kwargs["attention_mask"] = attention_mask.to(self.device)
        if position_ids is not None:
            kwargs["position_ids"] = position_ids.to(self.device)
        if self._keep_last:
            kwargs["logits_to_keep"] = 1 if logits else NO_LOGITS
        if ids is not None:
            out = self.net(input_ids=ids.to(self.device), **kwargs)
        else:
            out = self.net(inputs_embeds=embeds, **kwargs)
        last = out.logits[:, -1, :].float() if logits else None
        device_sync(self.device)
        return last

    def prefill(self, prompt_ids: list[int], cancelled: CancelCheck = never_cancelled) -> tuple[torch.Tensor, int]:
        """Logits after prompt_ids, feeding only what the cache lacks; returns (logits, reused).

        The new tokens run in chunks (timed or `chunk_tokens`, see `__init__`); `cancelled()` is checked
        before each, and inside each forward where its chunks are timed; it raises `Cancelled` with the
        chunks already run kept in the cache, and where the forward can resume, the layers it ran of the
        chunk it stopped in (`Partial`: the next prefill goes on from there).
        """
        if self.fast is not None:
            self.fast.wait_for_plan(cancelled)  # a model too big for torch's kernels waits for ours (fast/backend.py)
        self._resume(prompt_ids, cancelled)
        reused = self.prepare(prompt_ids)
        logits = None
        while logits is None:
            if cancelled():
                raise Cancelled()
            chunk = self.next_chunk(prompt_ids, self.timed_chunk(len(prompt_ids) - len(self.cached_ids)))
            last = len(self.cached_ids) + len(chunk) == len(prompt_ids)
            started = time.perf_counter()
            with interruptible(cancelled if self.chunk_seconds is not None else never_cancelled):
                logits = self.feed(prompt_ids, chunk, lambda: self.forward(self.cache, ids=torch.tensor([chunk]),
                                                                           logits=last))
            if len(chunk) >= self.shortest_chunk:
                self.token_seconds = (time.perf_counter() - started) / len(chunk)
        return logits, reused

    @property
    def shortest_chunk(self) -> int:
        """The fewest tokens a timed chunk runs before the chunks are split (fewer: the whole rest)."""
        return MIN_LAYER_CHUNK if self.resumable else MIN_CHUNK

    def timed_chunk(self, to_go: int) -> int | None:
        """Tokens of the next chunk of `prefill` with `to_go` tokens left, at the last chunk's speed; None where
        chunks are not timed. Where a cancelled forward resumes: `to_go` in the fewest equal chunks whose layers
        last at most `layer_seconds` (at least MIN_LAYER_CHUNK tokens a chunk before they are split); elsewhere about
        `chunk_seconds`, the rest whole where it is under half a chunk more."""
        if self.chunk_seconds is None:
            return None
        seconds = self.layer_seconds * self.layers if self.resumable else self.chunk_seconds
        tokens = int(min(MAX_CHUNK, max(self.shortest_chunk, seconds / self.token_seconds)))
        if self.resumable:
            return -(-to_go // -(-to_go // tokens))  # ceil(to_go / ceil(to_go / tokens))
        return to_go if to_go <= tokens * 3 // 2 else tokens

    def prepare(self, prompt_ids: list[int]) -> int:
        """Make the cache hold the longest part of `prompt_ids` it can reuse (at least one token is left
        to run, for logits); returns that part's length, 0 where the cache starts empty."""
        self._settle()
        self._activate(prompt_ids)
        if self.device.type == "cpu":  # per request, in the thread that runs the forwards
            torch.set_num_threads(intra_op_threads(self.threads, cpu_pressure()))
        reused = common_prefix_length(self.cached_ids, prompt_ids)
        reused = min(reused, len(prompt_ids) - 1)  # at least one token must run for logits
        if reused <= 0 or not self._crop(reused):
            self.cache, reused = self.new_cache(), 0
        self.cached_ids = list(prompt_ids[:reused])
        return reused

    def new_cache(self) -> DynamicCache:
        return self.fast.new_cache() if self.fast is not None else DynamicCache(config=self.model.config)

    def next_chunk(self, prompt_ids: list[int], tokens: int | None = None) -> list[int]:
        """The prompt tokens the next forward runs: at most `tokens` (default `chunk_tokens`) after those cached."""
        start = len(self.cached_ids)
        return prompt_ids[start : start + (tokens or self.chunk_tokens)]

    def feed(self, prompt_ids: list[int], chunk: list[int], run: Callable[[], Any]) -> Any:
        """`run()`, which puts `chunk`, the next tokens of `prompt_ids`, into the cache; what it returned
        once the prompt is in, else None.

        `cached_ids` grows only once `run` succeeded; where it fails, the cache is dropped (its layers
        may hold part of the chunk), and where it was cancelled inside, cut back to `cached_ids`."""
        try:
            ran = run()
        except Interrupted as stop:
            if self.resumable and stop.layer > 0 and full_layers(self.cache):
                self.partial = Partial(self.cache, len(self.cached_ids), list(chunk), stop.layer, stop.hidden)
            elif not self._crop_layers(len(self.cached_ids)):
                self.cache, self.cached_ids = None, []
            raise
        except Cancelled:
            if not self._crop_layers(len(self.cached_ids)):
                self.cache, self.cached_ids = None, []
            raise
        except BaseException:
            self.cache, self.cached_ids = None, []
            raise
        self.cached_ids = list(prompt_ids[: len(self.cached_ids) + len(chunk)])
        return ran if len(self.cached_ids) == len(prompt_ids) else None

    def _resume(self, prompt_ids: list[int], cancelled: CancelCheck) -> None:
        """Finish the layers of the chunk a cancel stopped (`partial`) for as many of its tokens as `prompt_ids`
        still has after the cache's (causal attention: a token's key/values do not depend on later ones), at
        least one token left for the chunks after; else drop that chunk's key/values. Cancellable as a chunk is."""
        partial = self.partial
        if partial is None:
            return
        shared = 0
        if partial.cache is self.cache and self.cached_ids == prompt_ids[: partial.start]:
            shared = min(common_prefix_length(partial.ids, prompt_ids[partial.start :]),
                         len(prompt_ids) - 1 - partial.start)
        if shared <= 0:
            self._settle()
            return
        self.partial = None
        for layer in self.cache.layers[: partial.layer]:
            layer.crop(partial.start + shared - layer.get_seq_length())
        chunk, hidden = partial.ids[:shared], partial.hidden[:, :shared]
        with interruptible(cancelled):
            self.feed(prompt_ids, chunk, lambda: self.net(inputs_embeds=hidden, first_layer=partial.layer,
                                                          **{self._cache_kwarg: self.cache, "use_cache": True,
                                                             "logits_to_keep": NO_LOGITS}))

    def _settle(self) -> None:
        """Drop the key/values of a chunk a cancel stopped inside its forward (`partial`): every layer then holds
        exactly `cached_ids`."""
        partial, self.partial = self.partial, None
        if partial is None or partial.cache is not self.cache:
            return
        if not (partial.start and self._crop_layers(partial.start)):  # nothing before the chunk, or not cut
            self.cache, self.cached_ids = None, []

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
        self.parked, parked = self._within_budget(held[-(self.slots - 1) :] if self.slots > 1 else [])
        self.cache, self.cached_ids = cache, ids if cache is not None else []
        if self.fast is not None:  # `spd.status` (the fast path's info): what the last runner to switch parks
            self.fast.info["parkedCaches"] = {"count": len(self.parked), "megabytes": round(parked / 1e6, 1),
                                              "budgetMegabytes": round(self.parked_bytes / 1e6)}

    def _within_budget(self, parked: list[tuple[DynamicCache, list[int]]]
                       ) -> tuple[list[tuple[DynamicCache, list[int]]], int]:
        """The most recent of `parked` whose bytes together stay within `parked_bytes`, and those bytes."""
        kept, total = [], 0
        for entry in reversed(parked):
            size = cache_bytes(entry[0])
            if total + size > self.parked_bytes:
                break
            kept.append(entry)
            total += size
        return kept[::-1], total

    def held_bytes(self) -> int:
        """Bytes of every prompt cache this runner holds: the current one and the parked ones."""
        return sum(cache_bytes(cache) for cache in [self.cache, *(c for c, _ in self.parked)] if cache is not None)

    def _copy(self, cache: DynamicCache, length: int) -> DynamicCache | None:
        """The first `length` positions of `cache` as a new cache; None where too few to be worth it."""
        if length <= FEW_TOKENS or getattr(cache, "is_croppable", True) is False:
            return None
        copied = copy.deepcopy(cache)
        copied.crop(length - copied.get_seq_length())
        return copied

    def rewind(self, length: int) -> None:
        """Drop positions past `length` (superposed or draft tokens) so the prompt stays reusable."""
        self._settle()
        if self._crop(length):
            self.cached_ids = self.cached_ids[:length]
        else:
            self.cache, self.cached_ids = None, []

    def fork(self, batch: int) -> DynamicCache:
        """A private copy of the prompt cache with `batch` rows, for batched baselines."""
        self._settle()
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

    def _crop_layers(self, length: int) -> bool:
        """Cut every layer of a plain cache back to `length` positions, each by what it holds beyond (a forward
        stopped between layers left the first ones longer); False where the cache is not plain."""
        if self.cache is None or not plain_cache(self.cache):
            return False
        for layer in self.cache.layers:
            excess = layer.get_seq_length() - length
            if excess > 0:
                layer.crop(-excess)
        return True


@dataclass
class Partial:
    """A prefill chunk stopped inside its forward: `cache`'s layers before `layer` hold its `ids` after `start`
    positions, the others `start`; `hidden` [1, len(ids), H] is that layer's input."""

    cache: Any
    start: int
    ids: list[int]
    layer: int
    hidden: torch.Tensor


Prefilled = tuple[torch.Tensor, int] | BaseException  # a row of `prefill_together`: (logits, reused) or its error


@torch.inference_mode()
def prefill_together(
    runners: Sequence[ModelRunner], prompts: Sequence[list[int]], cancelled: Sequence[CancelCheck]
) -> list[Prefilled]:
    """`runner.prefill(prompt, cancelled)` of every row, their forwards shared: ONE forward runs the next
    chunk of every row that has one, each row its own runner's cache left-padded to the widest, its chunk
    left-padded to the longest, pads masked, its own position ids; each row's new key/values then go back
    into its own runner's cache. Per row: (its logits [1, V], the tokens its cache reused) or what it raised.

    A row whose cache starts empty or is not a plain key/value cache (sliding windows, recurrent state)
    runs alone with `prefill`, as does a last row left; where a shared forward fails, its rows go on one by one.
    Every forward runs at most `chunk_tokens` of each row: the caller bounds the rows (the tokens per call).
    """
    if len({id(r) for r in runners}) != len(runners) or len({id(r.model) for r in runners}) > 1:
        raise ValueError("prefill_together takes distinct runners of one model")
    outcomes: list[Prefilled | None] = [None] * len(runners)
    if runners and runners[0].fast is not None:  # a model waiting for our kernels (`ModelRunner.prefill`)
        runners[0].fast.wait_for_plan(lambda: all(check() for check in cancelled))
    reused = [runner.prepare(prompt) for runner, prompt in zip(runners, prompts)]

    def alone(i: int) -> None:
        try:
            outcomes[i] = runners[i].prefill(prompts[i], cancelled[i])[0], reused[i]
        except BaseException as exc:  # noqa: BLE001 - a failing row fails its request only
            outcomes[i] = exc

    rows = [i for i in range(len(runners)) if reused[i] > 0 and plain_cache(runners[i].cache)]
    for i in set(range(len(runners))) - set(rows):
        alone(i)
    while rows:
        for i in [i for i in rows if cancelled[i]()]:
            outcomes[i] = Cancelled()
        rows = [i for i in rows if outcomes[i] is None]
        if len(rows) < 2:
            break
        chunks = [runners[i].next_chunk(prompts[i]) for i in rows]
        try:
            logits, cache = _forward_rows([runners[i] for i in rows], chunks)
        except Exception:  # noqa: BLE001 - the runners' caches are untouched: the rows go on alone
            log.exception("a joint prefill forward failed; its rows run one by one")
            break
        for row, (i, chunk) in enumerate(zip(rows, chunks)):
            try:
                taken = runners[i].feed(prompts[i], chunk, lambda: _take_row(runners[i], cache, logits, row, chunk))
                if taken is not None:
                    outcomes[i] = taken, reused[i]
            except Exception as exc:  # noqa: BLE001 - its cache was dropped: this row fails alone
                outcomes[i] = exc
        rows = [i for i in rows if outcomes[i] is None]
    for i in rows:
        alone(i)
    return outcomes  # type: ignore[return-value]


def _forward_rows(runners: Sequence[ModelRunner], chunks: list[list[int]]) -> tuple[torch.Tensor, DynamicCache]:
    """ONE forward of `chunks` (1..T tokens each) after their runners' caches, left-padded and masked:
    the rows' last-token logits [B, V] and the padded cache, the new key/values in its last T positions."""
    lengths = torch.tensor([len(runner.cached_ids) for runner in runners])
    news = torch.tensor([len(chunk) for chunk in chunks])
    width, tokens = int(lengths.max()), int(news.max())
    cache = padded_cache([key_values(runner.cache) for runner in runners], width)
    ids = torch.tensor([[0] * (tokens - len(chunk)) + chunk for chunk in chunks], dtype=torch.long)
    mask = torch.cat([left_padded_mask(lengths, width), left_padded_mask(news, tokens)], dim=1)
    positions = ((lengths + news - tokens)[:, None] + torch.arange(tokens)[None, :]).clamp(min=0)
    return runners[0].forward(cache, ids=ids, attention_mask=mask, position_ids=positions), cache


def _take_row(
    runner: ModelRunner, cache: DynamicCache, logits: torch.Tensor, row: int, chunk: list[int]
) -> torch.Tensor:
    """Append the key/values of `row`'s `chunk` (the last positions of the padded `cache`, without pads) to
    the runner's cache; that row's logits [1, V]."""
    new = len(chunk)
    for index, (keys, values) in enumerate(key_values(cache)):
        runner.cache.update(keys[row : row + 1, :, -new:], values[row : row + 1, :, -new:], index)
    return logits[row : row + 1]
