"""The front end's side: `RemoteEngine`, the session's `spd_lsp.api.EngineLike` over the engine protocol.

A request waits for its answer in short slices so the session's cancellation reaches
the engine as `cancel`. If the connection dies the request is retried once on a fresh
connection (in "auto" mode that restarts the daemon); if that fails too, or the answer
takes longer than the timeout, it answers no drafts: a completion never hangs.

On the same machine the engine reads the front end's stores by path (read-only). A
remote engine cannot: it gets the prompt's own tokens as document n-grams (mixed with
its base store), and the drafts it returns are re-ranked here with the local workspace
store (`rerank`).
"""

from __future__ import annotations

import itertools
import logging
import socket
import ssl
import threading
import time
from concurrent.futures import Future
from dataclasses import replace
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any, Callable

from ngram_db import NgramSource
from ngram_db.guarded import GuardedNgrams
from ngram_db.layered import LayeredNgrams
from spd_lsp.api import CancelCheck, Cancelled, DecodeOptions, DecodeRequest, DecodeResult, Draft, Timings, never_cancelled
from spd_lsp.remote import protocol
from spd_lsp.address import Address

log = logging.getLogger(__name__)
REQUEST_TIMEOUT_S = 30.0
CONNECT_TIMEOUT_S = 10.0
POLL_S = 0.02
INFO_TIMEOUT_S = 2.0  # `spd.status`'s wait for the engine's current model info
INFO_MAX_AGE_S = 2.0  # asked again at most this often (a status reads it twice; the compile's progress polls it)
DOCUMENT_WEIGHT = 0.5  # the prompt's own n-grams against the team's base store
RERANK_WEIGHT = 1.0  # nats per unit of mean local p_ngram over a draft's tokens
RERANK_SPAN = 5


class EngineGone(ConnectionError):
    """The engine closed the connection or could not be reached."""


class EngineStarting(EngineGone):
    """The engine is (re)starting and did not answer within the connect wait: no drafts this time,
    and no retry (the retry would wait on the same load)."""


class Connection:
    """One authenticated connection; a reader thread routes answers to the waiting requests."""

    def __init__(self, address: Address, *, token: str | None = None, cafile: str | None = None,
                 timeout: float = CONNECT_TIMEOUT_S) -> None:
        self.address = address
        self._pending: dict[int, Future] = {}
        self._lock = threading.Lock()
        self._send_lock = threading.Lock()
        self._ids = itertools.count(1)
        self.sock = _connect(address, cafile=cafile, timeout=timeout)
        try:
            protocol.send(self.sock, protocol.hello(token))
            reply = protocol.receive(self.sock)
        except (OSError, EOFError, protocol.FrameError) as exc:
            self.sock.close()
            raise EngineGone(f"engine at {address} did not answer hello: {exc}") from exc
        if reply.get("op") != protocol.HELLO or not reply.get("ok"):
            self.sock.close()
            raise PermissionError(f"engine at {address} refused us: {reply.get('code')}: {reply.get('message')}")
        self.info: dict[str, Any] = reply.get("engine") or {}
        self.sock.settimeout(None)
        self.alive = True
        self._reader = threading.Thread(target=self._read, name="spd-engine-client", daemon=True)
        self._reader.start()

    def request(self, message: dict[str, Any]) -> tuple[int, Future]:
        """Send `message` with a fresh id; the future gets the answer frame (or EngineGone)."""
        request_id = next(self._ids)
        future: Future = Future()
        with self._lock:
            if not self.alive:
                raise EngineGone("connection closed")
            self._pending[request_id] = future
        self.send({**message, "id": request_id})
        return request_id, future

    def send(self, message: dict[str, Any]) -> None:
        try:
            with self._send_lock:
                protocol.send(self.sock, message)
        except OSError as exc:
            self._fail(EngineGone(f"engine connection lost: {exc}"))
            raise EngineGone(str(exc)) from exc

    def _read(self) -> None:
        try:
            while True:
                message = protocol.receive(self.sock)
                with self._lock:
                    future = self._pending.pop(message.get("id"), None) if message.get("id") is not None else None
                if future is not None:
                    future.set_result(message)
                elif message.get("op") == protocol.ERROR:
                    log.warning("engine: %s: %s", message.get("code"), message.get("message"))
        except (OSError, EOFError, protocol.FrameError) as exc:
            self._fail(EngineGone(f"engine connection lost: {exc}"))

    def _fail(self, error: Exception) -> None:
        with self._lock:
            self.alive = False
            pending, self._pending = self._pending, {}
        for future in pending.values():
            if not future.done():
                future.set_exception(error)

    def close(self) -> None:
        self._fail(EngineGone("closed"))
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()


def _connect(address: Address, *, cafile: str | None, timeout: float) -> socket.socket:
    try:
        if address.kind == "unix":
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                sock.settimeout(timeout)
                sock.connect(address.path)
            except OSError:
                sock.close()  # else it lingers until collected (a ResourceWarning per failed connect)
                raise
            return sock
        sock = socket.create_connection((address.host, address.port), timeout=timeout)
        if address.kind == "tls":
            context = ssl.create_default_context(cafile=cafile)
            sock = context.wrap_socket(sock, server_hostname=address.host)
        return sock
    except OSError as exc:
        raise EngineGone(f"cannot reach the engine at {address}: {exc}") from exc


Connect = Callable[..., Connection]  # connect(restart=bool) -> a fresh connection


class RemoteEngine:
    """`EngineLike` over an engine process. Called from the session's one worker thread."""

    def __init__(self, connect: Connect, tokenizer: Any, *, local: bool, timeout: float = REQUEST_TIMEOUT_S,
                 connection: Connection | None = None, affinity: str = "") -> None:
        self.tokenizer = tokenizer
        self.local = local
        self.timeout = timeout
        self.affinity = affinity
        self.failures = 0
        self._connect = connect
        self._connection = connection
        self._address = str(connection.address) if connection is not None else None
        self._engine_info = dict(connection.info) if connection is not None else {}  # the newest hello's
        self._info_asked = time.monotonic()  # when `_engine_info` was last asked for (a hello is as new)
        self._workspace: NgramSource | None = None
        self._stores: list[dict[str, Any]] | None = None
        self._ignored: tuple[str, ...] = ()  # what the engine said it ignored last (an older engine)

    def set_ngrams(self, ngrams: NgramSource | None) -> None:
        self._workspace = ngrams
        self._stores = store_layers(ngrams) if ngrams is not None else None

    def complete(self, request: DecodeRequest, cancelled: CancelCheck | None = None) -> DecodeResult:
        cancelled = cancelled or never_cancelled
        options, ids = request.options, request.ids
        if ids is None and not self.local and options.alpha > 0.0:  # the document n-grams and the re-rank need them
            request = replace(request, ids=tuple(self.tokenizer.encode(request.prefix, add_special_tokens=False)))
            ids = request.ids
        message = protocol.complete_request(0, request, ngrams=self._ngrams(ids, options), affinity=self.affinity)
        for attempt in range(2):
            try:
                answer = self._ask(message, cancelled, restart=attempt > 0)
            except EngineStarting as exc:
                log.info("engine request answered with no drafts: %s", exc)
                break
            except EngineGone as exc:
                log.warning("engine request failed (%s)%s", exc, "; retrying once" if attempt == 0 else "")
                continue
            except FutureTimeout:
                log.warning("engine gave no answer within %.0f s; answering no drafts", self.timeout)
                self._drop()
                break
            return self._result(answer, options, ids)
        self.failures += 1
        return DecodeResult([], Timings(), options.method)

    def warm(self, request: DecodeRequest, cancelled: CancelCheck | None = None) -> int:
        """Prefill `request`'s prompt in this front end's prompt caches in the engine (the idle warm-up, as
        `LocalEngine.warm`): the engine runs it only while no other request waits (`Batcher`, background). The
        tokens prefilled; 0 where the engine is gone (a warm-up is never retried)."""
        cancelled = cancelled or never_cancelled
        message = protocol.complete_request(0, replace(request, background=True), ngrams=None, affinity=self.affinity,
                                            warm=True)
        try:
            answer = self._ask(message, cancelled, restart=False)
        except (EngineGone, FutureTimeout):
            return 0
        if answer.get("op") == protocol.ERROR:
            if answer.get("code") == protocol.CANCELLED:
                raise Cancelled()
            return 0
        return int((answer.get("timings") or {}).get("prefill_tokens", 0))

    def close(self) -> None:
        self._drop()

    def link(self) -> dict[str, Any]:
        """For `spd.status`: the engine's address, whether the connection is up now (a dead
        engine closes it at once), the requests answered empty because it was gone, and the info
        (pid, model) of the engine it reached last: a restarted one's, not the first one's."""
        connection = self._connection
        alive = connection is not None and connection.alive
        if alive and time.monotonic() - self._info_asked >= INFO_MAX_AGE_S:
            self._info_asked = time.monotonic()
            self._refresh_info(connection)
        return {"address": self._address, "connected": alive, "failures": self.failures,
                "engineInfo": self._engine_info}

    def _refresh_info(self, connection: "Connection") -> None:
        """The engine's model info as it is now (a compile finished, the fast plan applied since the hello), asked
        over `connection`; the last one known where the engine does not answer within `INFO_TIMEOUT_S`."""
        try:
            _, future = connection.request({"op": protocol.STATUS})
            model = (future.result(timeout=INFO_TIMEOUT_S).get("status") or {}).get("model")
        except Exception:  # noqa: BLE001 - gone, slow or refusing: the status shows what was known
            return
        if isinstance(model, dict) and model:
            self._engine_info = model

    def _ask(self, message: dict[str, Any], cancelled: CancelCheck, *, restart: bool) -> dict[str, Any]:
        if self._connection is None or not self._connection.alive or restart:
            self._drop()
            self._connection = self._connect(restart=restart)
            self._address = str(self._connection.address)
            self._engine_info, self._info_asked = dict(self._connection.info), time.monotonic()
        connection = self._connection
        sent = time.perf_counter()
        request_id, future = connection.request(message)
        while True:
            if cancelled():
                connection.send({"op": protocol.CANCEL, "id": request_id})
                raise Cancelled()
            try:
                answer = future.result(timeout=POLL_S)
            except FutureTimeout:
                if time.perf_counter() - sent >= self.timeout:
                    raise
                continue
            if isinstance(answer.get("timings"), dict):  # the frame sent to its answer read: the socket's share
                answer["timings"]["round_trip_s"] = time.perf_counter() - sent
            return answer

    def _drop(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    def _ngrams(self, ids: list[int] | None, options: DecodeOptions) -> dict[str, Any] | None:
        if options.alpha <= 0.0:
            return None
        if self.local:
            return {"stores": self._stores, "document": None} if self._stores else None
        return {"stores": [], "document": {"sequences": [list(ids or [])], "weight": DOCUMENT_WEIGHT}}

    def _result(self, answer: dict[str, Any], options: DecodeOptions, ids: list[int] | None) -> DecodeResult:
        if answer.get("op") == protocol.ERROR:
            code, text = answer.get("code"), answer.get("message")
            if code == protocol.CANCELLED:
                raise Cancelled()
            if code == protocol.BAD_REQUEST:
                raise ValueError(f"the engine refused the request: {text}")
            raise RuntimeError(f"the engine failed: {code}: {text}")
        ignored = tuple(map(str, answer.get("ignored") or ()))
        if ignored and ignored != self._ignored:  # said once per change, not per keystroke
            log.warning("the engine ignored what it does not know (an older engine): %s", ", ".join(ignored))
        self._ignored = ignored
        drafts = [Draft(d["text"], list(d["token_ids"]), float(d["score"]), bool(d["finished"]))
                  for d in answer["drafts"]]
        if not self.local and self._workspace is not None and options.alpha > 0.0 and drafts:
            drafts = rerank(drafts, self._workspace, ids or [], options)
        return DecodeResult(drafts, Timings.from_dict(answer.get("timings") or {}), answer.get("method", options.method),
                            answer.get("prompt") or {})


def rerank(drafts: list[Draft], ngrams: NgramSource, prompt: list[int], options: DecodeOptions) -> list[Draft]:
    """The remote engine's drafts re-ranked by the local workspace store: each draft's score gains
    RERANK_WEIGHT x its tokens' mean p_ngram (given the prompt and the draft so far)."""
    span = max(options.ngram_weights) - 1
    tail = list(prompt[-span:])
    contexts, candidates, owners = [], [], []
    for index, draft in enumerate(drafts):
        sequence = tail + list(draft.token_ids)
        for position, token in enumerate(draft.token_ids):
            contexts.append(sequence[: len(tail) + position][-span:])
            candidates.append([token])
            owners.append(index)
    if not contexts:
        return drafts
    sums, counts = [0.0] * len(drafts), [0] * len(drafts)
    for owner, row in zip(owners, ngrams.p_ngram(contexts, candidates, options.ngram_weights)):
        sums[owner] += row[0]
        counts[owner] += 1
    scores = [d.score + RERANK_WEIGHT * (sums[i] / counts[i] if counts[i] else 0.0) for i, d in enumerate(drafts)]
    order = sorted(range(len(drafts)), key=lambda i: -scores[i])  # stable: ties keep the engine's order
    return [Draft(drafts[i].text, drafts[i].token_ids, scores[i], drafts[i].finished) for i in order]


def store_layers(source: NgramSource, weight: float = 1.0) -> list[dict[str, Any]] | None:
    """The stores (path, weight) behind the workspace's source; None if it holds anything else."""
    if isinstance(source, GuardedNgrams):
        return store_layers(source.source, weight)
    if isinstance(source, LayeredNgrams):
        layers: list[dict[str, Any]] = []
        for inner, inner_weight in source.layers:
            described = store_layers(inner, weight * inner_weight)
            if described is None:
                return None
            layers += described
        return layers
    path = getattr(source, "path", None)
    return [{"path": str(path), "weight": weight}] if path is not None else None
