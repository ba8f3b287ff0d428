"""Our message loop over pygls' protocol: framing from `spd_lsp.lsp.framing`, envelopes checked here.

Replaces pygls' `io_.run_async` (which trusts every header and drops what it cannot
structure unanswered). Every request gets an answer: a body that is not JSON gets
-32700, an envelope that is not JSON-RPC 2.0 gets -32600, both with the request's id
when it has one. stdin is read by a thread into an asyncio stream, so stdio and TCP
share one loop.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from typing import IO, Any

from pygls.protocol import JsonRPCProtocol

from spd_lsp import auth
from spd_lsp.lsp.framing import Frame, FrameReader, encode

log = logging.getLogger(__name__)

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
CHUNK = 1 << 16
AUTH_TIMEOUT_S = 10.0  # a TCP client sends `initialize` at once; a silent one is turned away
FIRST_MAX_BYTES = 1 << 20  # before the token, nobody makes us buffer more (VS Code's initialize: ~10 kB)


def frame_reader(reader: asyncio.StreamReader, *, max_bytes: int) -> FrameReader:
    return FrameReader(lambda: reader.read(CHUNK), max_bytes=max_bytes)


async def serve_frames(frames: FrameReader, protocol: JsonRPCProtocol, *, stop: threading.Event) -> None:
    """Read and dispatch messages until the stream ends or `stop` is set."""
    while not stop.is_set() and (frame := await frames.next()) is not None:
        receive(protocol, frame)


async def authenticate(
    frames: FrameReader, token: str, *, timeout: float = AUTH_TIMEOUT_S
) -> tuple[Any, str | None]:
    """The connection's first message and why it is refused: (message without its token, None) admits."""
    try:
        frame = await asyncio.wait_for(frames.next(), timeout)
    except TimeoutError:
        return None, f"no initialize request within {timeout:g} s"
    message = frame.message if frame is not None else None
    problem = auth.check(message, token)
    return (auth.admitted(message), None) if problem is None else (message, problem)


async def turn_away(writer: asyncio.StreamWriter, first: Any, reason: str, *, code: int) -> None:
    """Tell a TCP client why it is not served (answering its first request, if it was one), then close."""
    log.warning("turned away the TCP client %s: %s", writer.get_extra_info("peername"), reason)
    msg_id = first.get("id") if isinstance(first, dict) and "method" in first else None
    show = {"jsonrpc": "2.0", "method": "window/showMessage", "params": {"type": 1, "message": f"spd-lsp: {reason}"}}
    try:
        writer.write(encode(show) + encode(error_message(msg_id, code, reason)))
        await writer.drain()
        writer.close()
        await writer.wait_closed()
    except ConnectionError as exc:
        log.info("the turned-away client had gone: %s", exc)


def receive(protocol: JsonRPCProtocol, frame: Frame) -> None:
    if frame.problem:
        log.warning("LSP input: %s", frame.problem)
    if frame.unparsable:
        reply_error(protocol, None, PARSE_ERROR, f"parse error: {frame.problem}")
    elif frame.refused_id is not None:
        reply_error(protocol, frame.refused_id, INVALID_REQUEST, f"refused: {frame.problem}")
    elif frame.problem is None or frame.message is not None:
        dispatch(protocol, frame.message)


def dispatch(protocol: JsonRPCProtocol, message: Any) -> None:
    if not isinstance(message, dict):
        reply_error(protocol, None, INVALID_REQUEST, f"a JSON-RPC message is an object, not {type(message).__name__}")
        return
    if message.get("jsonrpc") != JsonRPCProtocol.VERSION:
        log.warning("not a JSON-RPC 2.0 message: %.200s", message)
        if "method" in message and "id" in message:
            version = message.get("jsonrpc", "missing")
            reply_error(protocol, message["id"], INVALID_REQUEST, f'"jsonrpc" must be "2.0", not {version!r}')
        return
    try:
        protocol.handle_message(protocol.structure_message(message))
    except Exception:  # noqa: BLE001 - one bad message must not end the loop
        log.exception("could not handle %.200s", message)
        if "method" in message and "id" in message:
            reply_error(protocol, message["id"], INVALID_REQUEST, "the request could not be handled")


def reply_error(protocol: JsonRPCProtocol, msg_id: Any, code: int, message: str) -> None:
    protocol._send_data(error_message(msg_id, code, message))  # noqa: SLF001 - pygls' writer, framing and lock


def error_message(msg_id: Any, code: int, message: str) -> dict[str, Any]:
    if msg_id is not None and not isinstance(msg_id, (int, str)):
        msg_id = None
    return {"jsonrpc": "2.0", "id": msg_id, "error": {"code": code, "message": message}}  # "id": null kept


def stdin_stream(stdin: IO[bytes], loop: asyncio.AbstractEventLoop) -> asyncio.StreamReader:
    """An asyncio stream fed from `stdin` by a daemon thread (works for pipes, files and ttys)."""
    stream = asyncio.StreamReader(limit=CHUNK)
    fd = stdin.fileno()

    def pump() -> None:
        try:
            while chunk := _read(fd):
                loop.call_soon_threadsafe(stream.feed_data, chunk)
            loop.call_soon_threadsafe(stream.feed_eof)
        except RuntimeError:  # the loop closed: the server is exiting
            pass

    threading.Thread(target=pump, name="spd-stdin", daemon=True).start()
    return stream


def _read(fd: int) -> bytes:
    try:
        return os.read(fd, CHUNK)
    except OSError as exc:
        log.error("reading stdin failed: %s", exc)
        return b""
