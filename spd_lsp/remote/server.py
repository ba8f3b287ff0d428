"""The engine daemon: one model, every front end, over a Unix socket or TCP (optionally TLS).

asyncio handles the connections; every model call runs on the batching scheduler's
one thread. A connection's first frame must be `hello`: over TCP its token is compared
in constant time (`hmac.compare_digest`, as `spd_lsp.auth`); over the owner-only Unix
socket any token is accepted. A bad frame is answered with an error and the connection
closed; the engine itself never stops for a client's mistake. Over TCP, an address that
keeps failing its handshake has its new connections closed at accept for a while
(`remote/peers.py`); over TLS that check comes before the TLS handshake, which counts as part
of the handshake (a failed one is a failure).
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import math
import os
import signal
import ssl
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ngram_db import NgramSource
from ngram_db.guarded import GuardedNgrams
from ngram_db.layered import LayeredNgrams
from ngram_db.memory import MemoryNgrams
from ngram_db.store import NgramStore
from spd_lsp.api import Cancelled, DecodeOptions
from spd_lsp.remote import protocol
from spd_lsp.remote import tokenizer as tokenizer_wire
from spd_lsp.remote.peers import FAILURES, PeerGuard
from spd_lsp.engine.batcher import BatchJob, Batcher
from spd_lsp.settings import check_options

log = logging.getLogger(__name__)
HELLO_TIMEOUT_S = 10.0  # a connection's TLS handshake, then its hello, each within this long
# The model thread holds the GIL between torch calls; the event loop must read a request's frame (and a cancel)
# without waiting the default 5 ms per hand-over (as the front end's session, `session.GIL_SWITCH_S`).
GIL_SWITCH_S = 0.001
DOCUMENT_ORDERS = (2, 3, 4, 5, 6)
MAX_DOCUMENT_TOKENS = 1 << 20
# What one client may ask of the shared engine: a request past these would hold a batch row for minutes or fail deep
# inside the model (k=-1, k=10**4), so it is refused as `bad_request` up front. The options the settings reach are
# bounded by the settings themselves (`settings.check_options`); these bound the others.
OPTION_LIMITS: dict[str, tuple[int, int]] = {
    "verify_rounds": (0, 8), "candidate_pool": (1, 512), "reset_every": (1, 2048), "verify_top": (1, 1024),
    "seed": (0, 2**63 - 1),
}


@dataclass
class Listener:
    """How clients reach the engine: a Unix socket path, or TCP (token required, TLS optional)."""

    socket_path: Path | None = None
    host: str = "127.0.0.1"
    port: int | None = None
    token: str | None = field(default=None, repr=False)
    tls: ssl.SSLContext | None = None


def snapshot(value: Any) -> Any:
    """A copy of the model's info, taken while its compile thread may write into it (`dict()` of a dict copies it in
    one step under the GIL; serializing the live dict could meet it changing size)."""
    return {key: snapshot(item) for key, item in dict(value).items()} if isinstance(value, dict) else value


class Stores:
    """N-gram stores opened read-only by path, once each; a remote client names none."""

    def __init__(self, tokenizer_id: Any, base: Path | None) -> None:
        self.tokenizer_id = tokenizer_id
        self._open: dict[str, NgramStore] = {}
        self.base = self.store(str(base)) if base is not None else None

    def store(self, path: str) -> NgramStore:
        if path not in self._open:
            self._open[path] = NgramStore.open(path, self.tokenizer_id, readonly=True)
        return self._open[path]

    def source(self, description: Any, *, local: bool) -> NgramSource | None:
        """The source a `complete` frame's `ngrams` describes (see protocol)."""
        if description is None:
            return None
        if not isinstance(description, dict):
            raise protocol.ProtocolError(protocol.BAD_REQUEST, "'ngrams' must be a map or nil")
        layers: list[tuple[NgramSource, float]] = []
        stores = description.get("stores") or []
        if stores and not local:
            raise protocol.ProtocolError(protocol.BAD_REQUEST,
                                         "a remote engine cannot read the client's stores; send 'document' instead")
        for entry in stores:
            path, weight = _entry(entry, "path", str)
            try:
                layers.append((self.store(path), weight))
            except Exception as exc:  # noqa: BLE001 - an unusable store costs its layer, said once
                raise protocol.ProtocolError(protocol.BAD_REQUEST, f"cannot open n-gram store {path}: {exc}") from exc
        document = description.get("document")
        if document is not None:
            sequences, weight = _entry(document, "sequences", list)
            if not all(isinstance(s, list) and all(isinstance(t, int) for t in s) for s in sequences) or sum(
                    map(len, sequences)) > MAX_DOCUMENT_TOKENS:
                raise protocol.ProtocolError(protocol.BAD_REQUEST, "'document.sequences' must be lists of token ids")
            if self.base is not None and not stores:
                layers.append((self.base, 1.0 - weight))
            alone = not layers  # no base store: the document's n-grams are the whole n-gram term
            layers.append((MemoryNgrams.from_sequences(sequences, orders=DOCUMENT_ORDERS), 1.0 if alone else weight))
        if not layers:
            return None
        return GuardedNgrams(layers[0][0] if len(layers) == 1 and layers[0][1] == 1.0 else LayeredNgrams(layers))

    def close(self) -> None:
        for store in self._open.values():
            store.close()


def announce(line: str) -> None:
    """One line on stdout for whoever started the engine; a full disk under its log (stdout goes
    to a file in "auto" mode) must not stop it: the socket answering is the readiness signal."""
    try:
        print(line, flush=True)
    except OSError as exc:
        log.error("could not write %r to stdout: %s; stdout is dropped from here on", line, exc)
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - the unwritten line stays out of the exit's flush


def _peer_address(writer: asyncio.StreamWriter) -> str | None:
    """The peer's IP address over TCP; None on a Unix socket (owner-only: no limits)."""
    peer = writer.get_extra_info("peername")
    return str(peer[0]) if isinstance(peer, tuple) and peer else None


def _check_limits(options: DecodeOptions) -> None:
    """Refuse options no front end sends: outside the settings' bounds or `OPTION_LIMITS`, or numbers that are not finite."""
    try:
        check_options(options)
    except ValueError as exc:
        raise protocol.ProtocolError(protocol.BAD_REQUEST, str(exc)) from exc
    for name, value in {"verify_rounds": options.verify_rounds, **options.experimental.to_dict()}.items():
        if name in OPTION_LIMITS and value is not None and not OPTION_LIMITS[name][0] <= value <= OPTION_LIMITS[name][1]:
            low, high = OPTION_LIMITS[name]
            raise protocol.ProtocolError(protocol.BAD_REQUEST, f"decode option {name}={value!r} is outside {low}..{high}")
        if isinstance(value, float) and not math.isfinite(value):
            raise protocol.ProtocolError(protocol.BAD_REQUEST, f"decode option {name}={value!r} is not finite")


def _entry(entry: Any, key: str, kind: type) -> tuple[Any, float]:
    if not isinstance(entry, dict) or not isinstance(entry.get(key), kind):
        raise protocol.ProtocolError(protocol.BAD_REQUEST, f"n-gram entry needs a {kind.__name__} {key!r}")
    weight = entry.get("weight", 1.0)
    if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not 0.0 <= weight <= 1.0:
        raise protocol.ProtocolError(protocol.BAD_REQUEST, "n-gram weights are numbers from 0 to 1")
    return entry[key], float(weight)


class EngineServer:
    def __init__(self, engine: Any, info: dict[str, Any], listener: Listener, *, idle_timeout: float | None = None,
                 base_store: Path | None = None, max_batch: int = 32, standby: Any = None,
                 peer_limit: int = FAILURES) -> None:
        from spd_lsp.tokens import tokenizer_identity

        self.engine = engine
        self.info = info
        self.listener = listener
        self.idle_timeout = idle_timeout
        self.standby = standby  # remote/standby.py's Turn: its spare shows in the status
        self.scheduler = Batcher(engine, max_batch=max_batch)
        sys.setswitchinterval(min(sys.getswitchinterval(), GIL_SWITCH_S))
        self.stores = Stores(tokenizer_identity(engine.tokenizer), base_store)
        self.connections = 0
        self.counts = {"connections": 0, "refused": 0, "badFrames": 0, "requests": 0}
        self.peers = PeerGuard(failures=peer_limit)  # 0: no limit
        self._last_active = time.monotonic()
        self._running = 0
        self._stop: asyncio.Event | None = None
        self._tokenizer_wire: dict[str, Any] | None = None

    async def serve(self) -> None:
        """Until stopped or idle for `idle_timeout` seconds with no connection."""
        self._stop = asyncio.Event()
        if threading.current_thread() is threading.main_thread():  # (asyncio refuses it elsewhere: RuntimeError)
            with contextlib.suppress(ValueError, NotImplementedError, RuntimeError):  # not Unix
                asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, self.stop)  # a clean exit ends the spare
        listener = self.listener
        if listener.socket_path is not None:
            server = await asyncio.start_unix_server(self._connection, path=str(listener.socket_path))
            os.chmod(listener.socket_path, 0o600)
            where = f"unix:{listener.socket_path}"
        else:
            # TLS is started per connection (`_connection`), after the peer check: asyncio's own would complete the
            # handshake for every connection, a backing-off address's included, and never report one that failed.
            server = await asyncio.start_server(self._connection, listener.host, listener.port)
            port = server.sockets[0].getsockname()[1]
            where = f"{'tls' if listener.tls else 'tcp'}://{listener.host}:{port}"
            listener.port = port
        log.info("engine serving %s", where)
        announce(f"spd-lsp engine: listening on {where}")
        async with server:
            watcher = asyncio.create_task(self._watch_idle())
            await self._stop.wait()
            watcher.cancel()
        self.close()

    def stop(self) -> None:
        if self._stop is not None:
            self._stop.set()

    def close(self) -> None:
        self.scheduler.close()
        self.stores.close()
        if self.listener.socket_path is not None:
            self.listener.socket_path.unlink(missing_ok=True)

    async def _watch_idle(self) -> None:
        while self.idle_timeout:
            await asyncio.sleep(min(1.0, self.idle_timeout))
            idle = time.monotonic() - self._last_active
            if self.connections == 0 and self._running == 0 and idle >= self.idle_timeout:
                log.info("engine idle for %.0f s: shutting down", idle)
                self.stop()
                return

    def tokenizer_description(self) -> dict[str, Any]:
        if self._tokenizer_wire is None:
            self._tokenizer_wire = tokenizer_wire.to_wire(self.engine.tokenizer)
        return self._tokenizer_wire

    def status(self) -> dict[str, Any]:
        spare = self.standby.status() if self.standby is not None else {"standby": None}
        return {"model": snapshot(self.info), "live": self.connections, **self.counts, "peers": self.peers.status(),
                "scheduler": self.scheduler.status(), **spare}

    # -- one connection -------------------------------------------------------------------
    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = _peer_address(writer)
        if self.peers.blocked(peer):  # backing off: no read, no answer
            writer.transport.abort()
            return
        self.connections += 1
        self.counts["connections"] += 1
        self._last_active = time.monotonic()
        jobs: dict[int, BatchJob] = {}
        tasks: set[asyncio.Task] = set()
        admitted = False
        try:
            if self.listener.tls is not None:
                await writer.start_tls(self.listener.tls, ssl_handshake_timeout=HELLO_TIMEOUT_S)
            admitted = await self._admit(reader, writer)
            if admitted:
                await self._serve_frames(reader, writer, jobs, tasks)
        except (EOFError, ConnectionError, ssl.SSLError, asyncio.IncompleteReadError, TimeoutError):
            pass
        except protocol.FrameError as exc:
            self.counts["badFrames"] += 1
            admitted = False  # a bad frame counts against its address, authenticated or not
            await self._send(writer, protocol.error(None, protocol.BAD_FRAME, str(exc)))
        except Exception:  # noqa: BLE001 - one connection's failure never stops the engine
            log.exception("engine connection failed")
        finally:
            if not admitted:
                self.peers.failed(peer)
            for job in jobs.values():
                job.cancel()
            for task in tasks:
                task.cancel()
            self.connections -= 1
            self._last_active = time.monotonic()
            writer.close()
            try:
                await asyncio.wait_for(writer.wait_closed(), 2.0)
            except (Exception, asyncio.CancelledError):  # noqa: BLE001 - closing a broken socket
                pass

    async def _admit(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        try:
            message = await asyncio.wait_for(protocol.read(reader, max_bytes=64 * 1024), HELLO_TIMEOUT_S)
        except asyncio.TimeoutError:
            message = {"op": "timeout"}
        refusal = self._refusal(message)
        if refusal is not None:
            self.counts["refused"] += 1
            await self._send(writer, protocol.error(None, *refusal))
            return False
        await self._send(writer, {"op": protocol.HELLO, "ok": True, "version": protocol.VERSION, "engine": snapshot(self.info)})
        return True

    def _refusal(self, message: dict[str, Any]) -> tuple[str, str] | None:
        if message.get("op") != protocol.HELLO:
            return protocol.UNAUTHORIZED, "the first frame must be hello with the token"
        if message.get("version") != protocol.VERSION:
            return protocol.WRONG_VERSION, f"this engine speaks protocol version {protocol.VERSION}"
        expected = self.listener.token
        if expected is None:
            return None  # the owner-only Unix socket: reaching it is the proof
        given = message.get("token")
        if not isinstance(given, str) or not hmac.compare_digest(given.encode(), expected.encode()):
            return protocol.UNAUTHORIZED, "wrong or missing token"
        return None

    async def _serve_frames(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                            jobs: dict[int, BatchJob], tasks: set[asyncio.Task]) -> None:
        while True:
            message = await protocol.read(reader)
            self._last_active = time.monotonic()
            op = message["op"]
            try:
                if op == protocol.COMPLETE:
                    job_id = protocol.request_id(message)
                    job = self.job(message)
                    jobs[job_id] = job
                    ignored = protocol.ignored(message)
                    task = asyncio.create_task(self._answer(writer, job_id, job, jobs, ignored))
                    tasks.add(task)
                    task.add_done_callback(tasks.discard)
                elif op == protocol.CANCEL:
                    if (job := jobs.get(protocol.request_id(message))) is not None:
                        job.cancel()
                elif op == protocol.STATUS:
                    await self._send(writer, {"op": op, "id": protocol.echo_id(message), "status": self.status()})
                elif op == protocol.TOKENIZER:
                    await self._send(writer, {"op": op, "id": protocol.echo_id(message), "tokenizer": self.tokenizer_description()})
                else:
                    raise protocol.ProtocolError(protocol.BAD_REQUEST, f"unknown op {op!r}")
            except protocol.ProtocolError as exc:
                await self._send(writer, protocol.error(protocol.echo_id(message), exc.code, str(exc)))

    def job(self, message: dict[str, Any]) -> BatchJob:
        request = protocol.read_request(message)
        vocab = len(self.engine.table.texts)
        if request.ids is not None and any(not 0 <= i < vocab for i in request.ids):
            raise protocol.ProtocolError(protocol.BAD_REQUEST, "'request.ids' holds ids outside the vocabulary")
        _check_limits(request.options)
        local = self.listener.socket_path is not None
        ngrams = self.stores.source(message.get("ngrams"), local=local)
        affinity = message.get("affinity")
        return BatchJob(request, ngrams=ngrams, affinity=str(affinity) if affinity is not None else str(id(message)),
                        warm=message.get("warm") is True)

    async def _answer(self, writer: asyncio.StreamWriter, job_id: int, job: BatchJob, jobs: dict[int, BatchJob],
                      ignored: list[str]) -> None:
        self.counts["requests"] += 1
        self._running += 1
        try:
            result = await asyncio.wrap_future(self.scheduler.submit(job))
            result.timings.served_s = time.perf_counter() - job.started  # the frame read to its answer encoded
            answer = protocol.result(job_id, result, ignored=ignored)
        except Cancelled:
            answer = protocol.error(job_id, protocol.CANCELLED, "cancelled")
        except (ValueError, TypeError) as exc:
            answer = protocol.error(job_id, protocol.BAD_REQUEST, f"{type(exc).__name__}: {exc}")
        except Exception as exc:  # noqa: BLE001 - the request fails, the engine stays
            log.exception("engine request failed")
            answer = protocol.error(job_id, protocol.INTERNAL, f"{type(exc).__name__}: {exc}")
        finally:
            self._running -= 1
            self._last_active = time.monotonic()
            jobs.pop(job_id, None)
        await self._send(writer, answer)

    async def _send(self, writer: asyncio.StreamWriter, message: dict[str, Any]) -> None:
        try:
            writer.write(protocol.encode(message))
            await writer.drain()
        except (ConnectionError, RuntimeError, ssl.SSLError):
            pass  # the client left; its jobs are cancelled when its reader sees it
