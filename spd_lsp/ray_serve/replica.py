"""One Serve replica: loads the model once and decodes one request at a time.

The `Engine` is not thread-safe and keeps one reusable prompt KV cache, so each replica owns
one decoding thread; requests of the same document are routed here (`deployment.py`) and
reuse that cache. A request cancelled by its caller (`DeploymentResponse.cancel()`) is
cancelled inside the decode loop at the next step.
"""

from __future__ import annotations

import asyncio
import functools
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from ray import serve

from spd_lsp.decoding.types import DecodeOptions, DecodeResult


@dataclass(frozen=True)
class ModelSettings:
    """What each replica loads: `spd_lsp.model.load_model`'s arguments, plus a read-only base store."""

    model: str | None = None  # bundled default, a .gguf file or a local Hugging Face directory
    device: str = "auto"  # a GPU replica gets `cuda` (Ray sets CUDA_VISIBLE_DEVICES to its own GPU)
    dtype: str = "auto"
    quantize: str | None = None
    ngram_db: str | None = None  # the team's base store on the serving machine, opened read-only


@dataclass(frozen=True)
class Answer:
    """A decode result and the replica that produced it (for logs, tests and the affinity figures)."""

    result: DecodeResult
    replica: str  # the replica's actor name (`ray.get_actor(replica, namespace="serve")`)


class EngineReplica:
    def __init__(self, settings: ModelSettings):
        from spd_lsp.engine import Engine
        from spd_lsp.model import load_model

        loaded = load_model(settings.model, settings.device, settings.dtype, settings.quantize)
        ngrams = None
        if settings.ngram_db is not None:
            from spd_lsp.complete_command import open_ngrams

            ngrams = open_ngrams(settings.ngram_db, loaded.tokenizer)
        self.engine = Engine(loaded, ngrams)
        self.name = serve.get_replica_context().replica_id.to_full_id_str()
        self.worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="spd-decode")

    async def complete(
        self, prefix: str, options: DecodeOptions, *, ids: list[int] | None = None, args: dict | None = None
    ) -> Answer:
        """`Engine.complete(prefix, options, ids=ids, **args)` on the decoding thread."""
        stop = threading.Event()
        decode = functools.partial(self.engine.complete, prefix, options, stop.is_set, ids=ids, **(args or {}))
        job = asyncio.get_running_loop().run_in_executor(self.worker, decode)
        try:
            result = await asyncio.shield(job)
        except asyncio.CancelledError:
            stop.set()  # the decode loop raises Cancelled at its next step; the thread is free again
            job.add_done_callback(_discard)
            raise
        return Answer(result, self.name)



def _discard(job: asyncio.Future) -> None:
    """Collect a cancelled decode's outcome (its `Cancelled`) so that nothing logs it as lost."""
    if not job.cancelled():
        job.exception()
