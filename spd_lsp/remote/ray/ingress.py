"""The deployment's way in: the engine daemon's TCP front, forwarding to the replicas.

`RayIngress` is `spd_lsp.remote.server.EngineServer` with its model thread replaced by the
deployment: the same hello + token (constant-time), TLS, frames, `cancel`, `status` and
`tokenizer` answers, so front ends set `engine` to its address exactly as for one engine. A
`complete` frame goes whole to the replica that owns its affinity key, which reads it as the
daemon does; a `cancel` (or the client leaving) cancels the Serve request.
"""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from spd_lsp.api import Cancelled
from spd_lsp.remote import protocol
from spd_lsp.remote import tokenizer as tokenizer_wire
from spd_lsp.remote.server import EngineServer, Listener
from spd_lsp.remote.ray.client import ServeEngine


@dataclass(eq=False)
class Forwarded:
    """A `complete` frame on its way to a replica (the scheduler's `Job`, as the front sees it)."""

    frame: dict[str, Any]
    future: Future = field(default_factory=Future)
    task: asyncio.Task | None = None
    cancelled: bool = False
    started: float = field(default_factory=time.perf_counter)  # the frame read (the answer's served_s counts from it)

    def cancel(self) -> None:
        self.cancelled = True
        if self.task is not None:
            self.task.cancel()


class Forwarder:
    """Stands in for the daemon's batching scheduler: `submit` sends the frame to the deployment."""

    def __init__(self, engine: ServeEngine):
        self.engine = engine
        self.counts = {"forwarded": 0, "running": 0, "cancelled": 0, "failed": 0}

    def submit(self, job: Forwarded) -> Future:
        job.task = asyncio.get_running_loop().create_task(self._forward(job))
        return job.future

    async def _forward(self, job: Forwarded) -> None:
        self.counts["forwarded"] += 1
        self.counts["running"] += 1
        try:
            if job.cancelled:
                raise asyncio.CancelledError
            answer = await self.engine.complete(job.frame)
        except asyncio.CancelledError:
            self.counts["cancelled"] += 1
            job.future.set_exception(Cancelled())
        except Exception as exc:  # noqa: BLE001 - the daemon's answer path turns it into an error frame
            self.counts["failed"] += 1
            job.future.set_exception(exc)
        else:
            if answer.refusal is not None:
                job.future.set_exception(protocol.ProtocolError(*answer.refusal))
            else:
                job.future.set_result(answer.result)
        finally:
            self.counts["running"] -= 1

    def status(self) -> dict[str, Any]:
        return dict(self.counts)

    def close(self) -> None:
        """Nothing to stop: the replicas belong to the deployment."""


@dataclass
class Frontdesk:
    """What the daemon's front needs of an engine when the model lives on the replicas."""

    tokenizer: Any
    runner: Any = None


class RayIngress(EngineServer):
    def __init__(self, engine: ServeEngine, described: dict[str, Any], listener: Listener,
                 *, deployment: dict[str, Any] | None = None):
        """`described`: a replica's `describe()` (its model and tokenizer)."""
        info = {**described["info"], "ray": deployment or {}}
        info.pop("replica", None)
        super().__init__(Frontdesk(tokenizer_wire.from_wire(described["tokenizer"])), info, listener)
        self.scheduler.close()  # the daemon's model thread, idle here: the replicas decode
        self.scheduler = Forwarder(engine)
        self._tokenizer_wire = described["tokenizer"]

    def job(self, message: dict[str, Any]) -> Forwarded:
        return Forwarded(message)  # read (and refused, if bad) by the replica, as the daemon reads it


@dataclass
class Background:
    """An engine front serving on its own event loop thread (tests, benchmarks); `stop()` ends both."""

    ingress: EngineServer
    loop: asyncio.AbstractEventLoop
    thread: threading.Thread

    @property
    def address(self) -> tuple[str, int]:
        return self.ingress.listener.host, self.ingress.listener.port

    def stop(self, timeout: float = 10.0) -> None:
        self.loop.call_soon_threadsafe(self.ingress.stop)
        self.thread.join(timeout)


def in_background(ingress: EngineServer, *, timeout: float = 30.0) -> Background:
    """Serve `ingress` (a `RayIngress`, or the plain daemon to compare) on a new thread; returns once
    it listens (its port is then known)."""
    loop = asyncio.new_event_loop()
    listening = threading.Event()

    async def serve() -> None:
        serving = asyncio.create_task(ingress.serve())
        while not (ingress.listener.port and ingress._stop is not None) and not serving.done():  # noqa: SLF001
            await asyncio.sleep(0.01)
        listening.set()
        await serving

    thread = threading.Thread(target=loop.run_until_complete, args=(serve(),), name="spd-ingress", daemon=True)
    thread.start()
    if not listening.wait(timeout):
        raise TimeoutError(f"the ingress did not listen within {timeout:g} s")
    return Background(ingress, loop, thread)
