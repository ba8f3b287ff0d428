"""One Serve replica: the model once, and the engine daemon's batching scheduler over it.

A replica is the engine of `spd_lsp.remote` without its sockets: it takes the `complete`
frames the ingress forwards, reads them exactly as the engine daemon does (options, token ids,
the document's inline n-grams over the replica's own read-only base store) and decodes them on
the daemon's continuous-batching scheduler, which keeps one prompt cache per affinity key;
requests of the same document are routed here (`deployment.py`) and reuse it. A request
cancelled by its caller (`DeploymentResponse.cancel()`) is cancelled at the next step.
"""

from __future__ import annotations

import asyncio
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ray import serve

from spd_lsp.api import DecodeResult, ModelSpec
from spd_lsp.remote import protocol


@dataclass(frozen=True)
class ReplicaSettings:
    """What each replica loads (a GPU replica's device is `cuda`: Ray sets CUDA_VISIBLE_DEVICES to its own GPU), plus a
    read-only base store."""

    model: ModelSpec = ModelSpec()
    base_store: str | None = None  # the team's base n-gram store on the serving machine
    max_batch: int = 32  # superposed requests decoded together on one replica


@dataclass(frozen=True)
class Answer:
    """A decode result, or why the request was refused, and the replica that handled it."""

    result: DecodeResult | None
    replica: str  # the replica's actor name (`ray.get_actor(replica, namespace="serve")`)
    refusal: tuple[str, str] | None = None  # (protocol error code, message) of a bad request


class EngineReplica:
    def __init__(self, settings: ReplicaSettings):
        from spd_lsp.engine.loading import load_local
        from spd_lsp.remote.server import EngineServer, Listener

        loaded = load_local(settings.model)
        self.name = serve.get_replica_context().replica_id.to_full_id_str()
        self.info = {**loaded.info, "replica": self.name}
        # Never listens: the daemon's request reading, stores and scheduler, with the rules of a
        # remote engine (no client stores by path; the document's n-grams come inline).
        remote = Listener(port=0, token=secrets.token_urlsafe(32))
        base = Path(settings.base_store) if settings.base_store else None
        self.engine = EngineServer(loaded.engine, self.info, remote, base_store=base, max_batch=settings.max_batch)

    async def complete(self, frame: dict[str, Any]) -> Answer:
        """Decode one `complete` frame (see `spd_lsp.remote.protocol`)."""
        try:
            job = self.engine.job(frame)  # the daemon's own reading of a frame
        except protocol.ProtocolError as exc:
            return Answer(None, self.name, (exc.code, str(exc)))
        decoding = asyncio.wrap_future(self.engine.scheduler.submit(job))
        try:
            result = await asyncio.shield(decoding)
        except asyncio.CancelledError:
            job.cancel()  # leaves the batch at its next step
            decoding.add_done_callback(_discard)
            raise
        except (ValueError, TypeError) as exc:
            return Answer(None, self.name, (protocol.BAD_REQUEST, f"{type(exc).__name__}: {exc}"))
        return Answer(result, self.name)

    def describe(self) -> dict[str, Any]:
        """The model's description and its tokenizer as plain values, for the ingress's hello and `tokenizer` op."""
        return {"info": self.info, "tokenizer": self.engine.tokenizer_description()}  # the daemon's wire form

    def __del__(self) -> None:
        engine = getattr(self, "engine", None)
        if engine is not None:
            engine.close()


def _discard(decoding: asyncio.Future) -> None:
    """Collect a cancelled decode's outcome (its `Cancelled`) so that nothing logs it as lost."""
    if not decoding.cancelled():
        decoding.exception()
