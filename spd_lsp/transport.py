"""Our message loop over pygls' protocol: framing from `spd_lsp.framing`, envelopes checked here.

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

from spd_lsp.framing import DEFAULT_MAX_BYTES, Frame, FrameReader

log = logging.getLogger(__name__)

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
CHUNK = 1 << 16


async def serve(
    reader: asyncio.StreamReader,
    protocol: JsonRPCProtocol,
    *,
    stop: threading.Event,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> None:
    """Read and dispatch messages until the stream ends or `stop` is set."""
    frames = FrameReader(lambda: reader.read(CHUNK), max_bytes=max_bytes)
    while not stop.is_set() and (frame := await frames.next()) is not None:
        receive(protocol, frame)


def receive(protocol: JsonRPCProtocol, frame: Frame) -> None:
    if frame.problem:
        log.warning("LSP input: %s", frame.problem)
    if frame.unparsable:
        reply_error(protocol, None, PARSE_ERROR, f"parse error: {frame.problem}")
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
    if msg_id is not None and not isinstance(msg_id, (int, str)):
        msg_id = None
    error = {"jsonrpc": "2.0", "id": msg_id, "error": {"code": code, "message": message}}  # "id": null kept
    protocol._send_data(error)  # noqa: SLF001 - pygls' writer, framing and lock


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
