"""The engine's wire protocol: length-prefixed msgpack frames (version 2).

One engine process holds the model; front ends (`spd-lsp --stdio`), benchmarks and
the Ray Serve ingress talk to it over a Unix socket or TCP (optionally TLS).

Framing
    Every message is one frame: a 4-byte big-endian unsigned length N, then N bytes
    of msgpack encoding a map (string keys; raw strings are UTF-8 `str`, binary is not
    used). N must be 1..MAX_FRAME_BYTES (16 MiB). A frame that is too long, empty,
    not msgpack, or not a map with a string `op` is a `FrameError`: the receiver
    answers an `error` frame with code `bad_frame` and closes the connection (a bad
    length cannot be resynchronised). A connection closed mid-frame is `EOFError`.

Messages (client -> engine)
    {"op": "hello", "version": 2, "token": str | None}
        Must be the first frame. Unix sockets (owner-only) accept any token; TCP
        compares the token in constant time (`spd_lsp.auth`). Answer:
        {"op": "hello", "ok": True, "version": 2, "engine": {model info}}, or
        {"op": "error", "id": None, "code": "unauthorized" | "version", "message": str}
        and the connection is closed. Any other first frame: `unauthorized`, closed.
    {"op": "complete", "id": int, "request": REQUEST, "ngrams": NGRAMS, "affinity": str}
        `affinity` (optional): whose prompt caches these are (a front end); the engine keeps `CACHE_SLOTS`
        prompt caches per affinity key, as a front end's own engine does, and routers may route by it.
        `"warm": True` (optional): prefill the prompt only (the front end's idle warm-up), answered with no
        drafts; it runs only while no other request waits, as does a request with `"background": True`
        (anticipation: the drafts after the shown one, as if accepted). An engine before them runs it as a request.
        REQUEST = `spd_lsp.api.DecodeRequest.to_dict()`, the session's request unchanged:
                  {"prefix": str, "ids": [int] | None (the prefix's tokens where the caller has them),
                   "suffix": str, "filename": str | None, "snippets": [[path, code]],
                   "language": str | None, "prompt_format": str, "options": OPTIONS, "background": bool (optional)}
                  missing fields but `prefix` take their defaults; fields the engine does not know are ignored
                  (see Compatibility).
        OPTIONS = `DecodeOptions.to_dict()`: every product option (ngram_weights keyed by order as a string)
                  and, where any is set away from its default, "experimental": {name: value} with just those;
                  missing keys take their defaults, product keys the engine does not know are ignored, an
                  experimental key it does not know is `bad_request` (see Compatibility).
        Version 1's `prompt` (with its keyword `args`) and top-level `options` are refused
        (`bad_request`, saying so).
        NGRAMS  = {"stores": [{"path": str, "weight": float}],   # opened read-only, same machine
                   "document": {"sequences": [[int]], "weight": float} | None}  # sent inline
                  or None (no n-grams). A remote engine opens its own base store when
                  started with one (`--base-store`) and mixes the inline document n-grams in;
                  the front end re-ranks the drafts with its local workspace store.
        Answer: {"op": "result", "id": int, "drafts": [DRAFT], "timings": TIMINGS, "method": str, "prompt": PROMPT,
                 "ignored": [str] (only where it ignored any: "field" or "options.field")}
                DRAFT = {"text": str, "token_ids": [int], "score": float, "finished": bool}
                TIMINGS = `Timings.to_dict()` (seconds and counts; a front end ignores keys it does not know;
                          `queue_s` and `served_s` are the engine's: its frame read to its model thread taking it
                          up, and to its answer written)
                PROMPT = `DecodeResult.prompt`: the prompt's format and token counts per part
        or      {"op": "error", "id": int, "code": CODE, "message": str}
    {"op": "cancel", "id": int}
        Cancels a running or queued `complete`; it answers `error` with code `cancelled`
        (or its result, if it finished first). No answer of its own.
    {"op": "status", "id": int}
        Answer: {"op": "status", "id": int, "status": {...}} (model, queue, batch, counts).
    {"op": "tokenizer", "id": int}
        Answer: {"op": "tokenizer", "id": int, "tokenizer": {"json": str (tokenizer.json),
        "special": {name: token}, "name_or_path": str, "add_bos_token": bool}}: front ends
        tokenize exactly as the engine, without model files of their own.

Requests on one connection may overlap (ids are the client's); answers come in any
order. Error codes: bad_frame, unauthorized, version, bad_request, cancelled,
overloaded, internal.

Compatibility (front ends and engines of different releases meet over TCP; "auto" never
meets another version: its socket is named by the version, `remote/daemon.py`)
    - A new optional field of the request, of its product options or of an answer keeps the
      version: its absence means the behaviour before it. An engine ignores request and option
      fields it does not know and names them in the answer's `ignored` (the front end logs
      them): a newer front end gets a working answer, without the new behaviour.
    - A new experimental option keeps the version too: it travels only where set, and an engine
      that does not know it answers `bad_request` naming it (an experiment never runs silently
      as another).
    - Anything else (a field removed, renamed or given another meaning or type, a new required
      field, another frame shape) raises `VERSION`: an engine refuses a hello of another
      version with `version`, which the front end reports (spd.status), never a crash.
    Engines before this rule (version 2 up to the split of the experimental options) refuse
    unknown keys with `bad_request`; `tests/remote/test_protocol_compat.py` runs this front end
    against such an engine.
"""

from __future__ import annotations

import socket
import struct
from typing import Any

import msgpack

from spd_lsp.api import DecodeRequest, DecodeResult

VERSION = 2  # 2: one typed `request` (was: `prompt` with keyword `args`, and `options`)
HEADER = struct.Struct(">I")
MAX_FRAME_BYTES = 16 * 1024 * 1024

HELLO, COMPLETE, CANCEL, STATUS, RESULT, ERROR = "hello", "complete", "cancel", "status", "result", "error"
TOKENIZER = "tokenizer"
CLIENT_OPS = (HELLO, COMPLETE, CANCEL, STATUS, TOKENIZER)

BAD_FRAME = "bad_frame"
UNAUTHORIZED = "unauthorized"
WRONG_VERSION = "version"
BAD_REQUEST = "bad_request"
CANCELLED = "cancelled"
OVERLOADED = "overloaded"
INTERNAL = "internal"


class FrameError(ValueError):
    """A frame that cannot be decoded; the connection must be closed after answering it."""


class ProtocolError(ValueError):
    """A well-formed frame with bad content (`code` says which kind)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def encode(message: dict[str, Any], *, max_bytes: int = MAX_FRAME_BYTES) -> bytes:
    """One frame: header plus msgpack body."""
    body = msgpack.packb(message, use_bin_type=True)
    if len(body) > max_bytes:
        raise FrameError(f"frame of {len(body)} bytes exceeds the limit of {max_bytes}")
    return HEADER.pack(len(body)) + body


def decode_body(body: bytes) -> dict[str, Any]:
    try:
        message = msgpack.unpackb(body, raw=False, strict_map_key=True)
    except Exception as exc:  # noqa: BLE001 - msgpack raises several unrelated kinds
        raise FrameError(f"frame is not msgpack: {type(exc).__name__}: {exc}") from exc
    if not isinstance(message, dict) or not isinstance(message.get("op"), str):
        raise FrameError("frame must be a msgpack map with a string 'op'")
    return message


def check_length(length: int, *, max_bytes: int = MAX_FRAME_BYTES) -> int:
    if length == 0:
        raise FrameError("empty frame")
    if length > max_bytes:
        raise FrameError(f"frame of {length} bytes exceeds the limit of {max_bytes}")
    return length


def error(request_id: Any, code: str, message: str) -> dict[str, Any]:
    return {"op": ERROR, "id": request_id, "code": code, "message": message}


def hello(token: str | None) -> dict[str, Any]:
    return {"op": HELLO, "version": VERSION, "token": token}


def echo_id(message: dict[str, Any]) -> int | None:
    """The id to answer with: the client's, where it is one an answer can carry (an integer)."""
    value = message.get("id")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def request_id(message: dict[str, Any]) -> int:
    value = message.get("id")
    if not isinstance(value, int) or isinstance(value, bool):
        raise ProtocolError(BAD_REQUEST, f"{message['op']!r} needs an integer 'id'")
    return value


# -- blocking sockets (clients, tests) -----------------------------------------
def send(sock: socket.socket, message: dict[str, Any]) -> None:
    sock.sendall(encode(message))


def receive(sock: socket.socket, *, max_bytes: int = MAX_FRAME_BYTES) -> dict[str, Any]:
    """The next frame; EOFError when the peer closed (also mid-frame)."""
    length = check_length(HEADER.unpack(_exactly(sock, HEADER.size))[0], max_bytes=max_bytes)
    return decode_body(_exactly(sock, length))


def _exactly(sock: socket.socket, n: int) -> bytes:
    chunks, missing = [], n
    while missing:
        chunk = sock.recv(min(missing, 1 << 20))
        if not chunk:
            raise EOFError("connection closed")
        chunks.append(chunk)
        missing -= len(chunk)
    return b"".join(chunks)


# -- asyncio streams (the server) -----------------------------------------------
async def read(reader: Any, *, max_bytes: int = MAX_FRAME_BYTES) -> dict[str, Any]:
    """The next frame from an asyncio StreamReader; EOFError when the peer closed."""
    import asyncio

    try:
        header = await reader.readexactly(HEADER.size)
        length = check_length(HEADER.unpack(header)[0], max_bytes=max_bytes)
        body = await reader.readexactly(length)
    except asyncio.IncompleteReadError as exc:
        raise EOFError("connection closed") from exc
    return decode_body(body)


# -- the values inside frames ------------------------------------------------------
def complete_request(
    request_id: int, request: DecodeRequest | dict[str, Any], *, ngrams: dict[str, Any] | None = None,
    affinity: str | None = None, warm: bool = False,
) -> dict[str, Any]:
    """`request`: a `DecodeRequest`, or a wire form as it is (benchmarks and tests of refusals). `warm`: prefill its
    prompt only (an idle warm-up), answering no drafts."""
    wire = request if isinstance(request, dict) else request.to_dict()
    message = {"op": COMPLETE, "id": request_id, "request": wire, "ngrams": ngrams, "affinity": affinity}
    return {**message, "warm": True} if warm else message


def read_request(message: dict[str, Any]) -> DecodeRequest:
    """The `DecodeRequest` of a `complete` frame; `ProtocolError(bad_request)` for a malformed one,
    or one in version 1's form."""
    if "prompt" in message or "options" in message:
        raise ProtocolError(BAD_REQUEST, f"protocol version 1's 'prompt' and 'options' are gone: this engine speaks "
                            f"version {VERSION}, one typed 'request' (spd_lsp/remote/protocol.py)")
    try:
        return DecodeRequest.from_dict(message.get("request"))
    except (ValueError, TypeError) as exc:
        raise ProtocolError(BAD_REQUEST, str(exc)) from exc


def ignored(message: dict[str, Any]) -> list[str]:
    """The fields of a `complete` frame's request this engine does not know, and so ignored (compatibility)."""
    return DecodeRequest.ignored(message.get("request"))


def result(request_id: int, result: DecodeResult, *, ignored: list[str] | tuple[str, ...] = ()) -> dict[str, Any]:
    answer = {"op": RESULT, "id": request_id, "method": result.method, "timings": result.timings.to_dict(),
              "prompt": result.prompt,
              "drafts": [{"text": d.text, "token_ids": list(d.token_ids), "score": float(d.score),
                          "finished": bool(d.finished)} for d in result.drafts]}
    return {**answer, "ignored": list(ignored)} if ignored else answer
