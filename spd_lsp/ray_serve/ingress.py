"""The Ray deployment's way in: the engine's TCP protocol (`spd_lsp.engined.protocol`), authenticated.

Front ends set `engine` to this address exactly as for a single engine: the first frame is
`hello` with the team token (compared in constant time), else `unauthorized` and the
connection is closed; then `complete` / `cancel` / `status` frames, answered in any order.
A `complete` goes to the replica that owns its affinity key (`client.affinity_key`); its
`cancel` cancels the Serve request, which stops the replica's decode loop.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import ssl
from typing import Any

from spd_lsp.decoding.types import DecodeOptions
from spd_lsp.engined import protocol
from spd_lsp.ray_serve.client import ReplicaUnavailable, ServeEngine, affinity_key

log = logging.getLogger(__name__)

HELLO_TIMEOUT_S = 10.0


class Ingress:
    def __init__(self, engine: ServeEngine, *, token: str, info: dict[str, Any] | None = None):
        self.engine = engine
        self.token = token
        self.info = info or {}
        self.served = 0

    async def start(self, host: str, port: int, *, tls: ssl.SSLContext | None = None) -> asyncio.Server:
        return await asyncio.start_server(self.connection, host, port, ssl=tls)

    async def connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername")
        link = Link(writer)
        running: dict[int, asyncio.Task] = {}
        try:
            problem = await self.admit(reader)
            if problem is not None:
                log.warning("turned away %s: %s", peer, problem[1])
                await link.send(protocol.error(None, *problem))
                return
            await link.send({"op": protocol.HELLO, "ok": True, "version": protocol.VERSION, "engine": self.info})
            while True:
                message = await protocol.read(reader)
                await self.dispatch(message, link, running)
        except protocol.FrameError as exc:
            await link.send(protocol.error(None, protocol.BAD_FRAME, str(exc)))
        except (EOFError, ConnectionError, ssl.SSLError):
            pass
        finally:
            for task in running.values():
                task.cancel()
            await link.close()

    async def admit(self, reader: asyncio.StreamReader) -> tuple[str, str] | None:
        """Why the connection's first frame does not admit it: (code, message); None when it does."""
        try:
            first = await asyncio.wait_for(protocol.read(reader), HELLO_TIMEOUT_S)
        except TimeoutError:
            return protocol.UNAUTHORIZED, f"no hello within {HELLO_TIMEOUT_S:g} s"
        if first.get("op") != protocol.HELLO:
            return protocol.UNAUTHORIZED, "the first frame must be hello with the token"
        if first.get("version") != protocol.VERSION:
            return protocol.WRONG_VERSION, f"this engine speaks version {protocol.VERSION}, not {first.get('version')!r}"
        given = first.get("token")
        if not isinstance(given, str) or not hmac.compare_digest(given.encode(), self.token.encode()):
            return protocol.UNAUTHORIZED, "wrong or missing token"
        return None

    async def dispatch(self, message: dict[str, Any], link: "Link", running: dict[int, asyncio.Task]) -> None:
        op = message["op"]
        try:
            request_id = protocol.request_id(message)
        except protocol.ProtocolError as exc:
            await link.send(protocol.error(message.get("id"), exc.code, str(exc)))
            return
        if op == protocol.COMPLETE:
            if request_id in running:
                await link.send(protocol.error(request_id, protocol.BAD_REQUEST, f"request {request_id} is already running"))
                return
            task = asyncio.create_task(self.complete(request_id, message, link))
            running[request_id] = task
            task.add_done_callback(lambda _done: running.pop(request_id, None))
        elif op == protocol.CANCEL:
            if (task := running.get(request_id)) is not None:
                task.cancel()
        elif op == protocol.STATUS:
            await link.send({"op": protocol.STATUS, "id": request_id, "status": {**self.info, "served": self.served}})
        else:
            await link.send(protocol.error(request_id, protocol.BAD_REQUEST, f"unknown op {op!r}"))

    async def complete(self, request_id: int, message: dict[str, Any], link: "Link") -> None:
        try:
            prefix, ids, args, options, key = parse_complete(message)
        except (ValueError, TypeError) as exc:
            await link.send(protocol.error(request_id, protocol.BAD_REQUEST, str(exc)))
            return
        try:
            answer = await self.engine.complete(prefix, options, key=key, ids=ids, args=args)
        except asyncio.CancelledError:
            await link.send(protocol.error(request_id, protocol.CANCELLED, "cancelled"))
            return
        except (ReplicaUnavailable, TimeoutError) as exc:
            await link.send(protocol.error(request_id, protocol.OVERLOADED, str(exc)))
            return
        except Exception as exc:  # noqa: BLE001 - one failed request must not end the connection
            log.exception("request %s failed", request_id)
            await link.send(protocol.error(request_id, protocol.INTERNAL, f"{type(exc).__name__}: {exc}"))
            return
        self.served += 1
        result = answer.result
        await link.send(protocol.result(request_id, result.drafts, result.timings.to_dict(), result.method))


def parse_complete(message: dict[str, Any]) -> tuple[str, list[int] | None, dict, DecodeOptions, str]:
    """The parts of a `complete` frame; ValueError says what is wrong."""
    prompt = message.get("prompt")
    if not isinstance(prompt, dict) or not isinstance(prompt.get("prefix"), str):
        raise ValueError("complete needs prompt.prefix, a string")
    ids = prompt.get("ids")
    if ids is not None and not (isinstance(ids, list) and all(isinstance(i, int) for i in ids)):
        raise ValueError("prompt.ids must be a list of integers")
    args = prompt.get("args") or {}
    if not isinstance(args, dict):
        raise ValueError("prompt.args must be a map")
    options = message.get("options") or {}
    if not isinstance(options, dict):
        raise ValueError("options must be a map")
    explicit = message.get("affinity")
    return prompt["prefix"], ids, args, DecodeOptions.from_dict(options), affinity_key(
        prompt["prefix"], explicit if isinstance(explicit, str) else None
    )


class Link:
    """One connection's writer: whole frames, one at a time."""

    def __init__(self, writer: asyncio.StreamWriter):
        self.writer = writer
        self.lock = asyncio.Lock()

    async def send(self, message: dict[str, Any]) -> None:
        async with self.lock:
            if self.writer.is_closing():
                return
            self.writer.write(protocol.encode(message))
            try:
                await self.writer.drain()
            except ConnectionError:
                pass

    async def close(self) -> None:
        self.writer.close()
        try:
            await self.writer.wait_closed()
        except (ConnectionError, ssl.SSLError):
            pass


def tls_context(cert: str, key: str) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    return context
