"""LSP base-protocol framing (`Content-Length` headers, JSON bodies), read leniently and never fatally.

pygls' reader matches `Content-Length: N\\r\\n` byte for byte and trusts N, so one odd
frame leaves the server deaf for good, and a huge N kills it. This reader:

* accepts header names in any case, any blanks around the colon, LF or CRLF line ends;
* caps a body at `max_bytes`: a bigger one is skipped as it arrives, never buffered;
* recovers from a wrong length: a JSON body is self-delimiting, and a real header line
  (`Content-Length: N` ended by a newline byte) can never occur inside a JSON body (JSON
  strings cannot hold a raw newline), so the next header is a safe place to resynchronise;
* turns what cannot be read into a `Frame` the caller answers or logs, including JSON nested
  deeper than `MAX_DEPTH` (the decoder would raise `RecursionError` past Python's stack
  limit, and every later walk of the value, from pygls' structuring to a log line's repr,
  recurses too).

It knows nothing of pygls or LSP methods: bytes in, JSON values out.
"""

from __future__ import annotations

import asyncio
import json
import re
from dataclasses import dataclass
from typing import Any, Awaitable, Callable

Read = Callable[[], Awaitable[bytes]]  # the next chunk of the stream; b"" at its end

DEFAULT_MAX_BYTES = 64 * 1024 * 1024  # VS Code does not even sync files above 50 MB
MAX_HEADER_BYTES = 8192
MAX_DEPTH = 100  # arrays/objects inside each other; an LSP message needs about 10
MAX_INT_DIGITS = 4000  # int() refuses more than 4300 digits (CVE-2020-10735): the body would read as "not JSON"
STALL_S = 0.5  # a body shorter than its Content-Length is taken once the stream pauses this long
HEADER = re.compile(rb"^[ \t]*([!#$%&'*+.^_`|~0-9A-Za-z-]+)[ \t]*:(.*)$")
MARKER = re.compile(rb"content-length[ \t]*:[ \t]*[^\r\n]*\r?\n", re.IGNORECASE)
_DECODER = json.JSONDecoder()


@dataclass(frozen=True)
class Frame:
    """One unit of input: a message, or a problem (or both, when a message was recovered)."""

    message: Any = None
    problem: str | None = None  # what was wrong with the framing, for the log
    unparsable: bool = False  # a body came but held no JSON: the caller answers -32700
    refused_id: Any = None  # a JSON request refused as too deep: the caller answers -32600 to this id


class TooDeep(ValueError):
    """JSON nested deeper than MAX_DEPTH (or than the decoder's stack allows)."""

    def __init__(self, message: Any = None) -> None:
        super().__init__(f"JSON nested deeper than {MAX_DEPTH} levels")
        self.message = message  # the decoded value when the decoder managed it, else None
        self.size: int | None = None  # the bytes the body spans, where known


class FrameReader:
    def __init__(self, read: Read, *, max_bytes: int = DEFAULT_MAX_BYTES, stall_s: float = STALL_S) -> None:
        self._read, self.max_bytes, self.stall_s = read, max_bytes, stall_s
        self._buf = bytearray()
        self._eof = False

    async def next(self) -> Frame | None:
        """The next frame; None at the end of the stream."""
        skipped = 0
        while True:
            header = await self._headers()
            if header is None:
                return Frame(problem=f"skipped {skipped} bytes at the end of the stream") if skipped else None
            length, problem, garbage = header
            skipped += garbage
            if length is not None and length > self.max_bytes:
                await self._skip(length)
                return Frame(problem=f"a message of {length} bytes is over the {self.max_bytes}-byte limit: skipped")
            try:
                frame = await (self._body(length) if length is not None else self._unsized())
            except TooDeep as exc:  # drop the body: all of it where its size is known, else to the next header
                self._take(exc.size) if exc.size is not None else self._resync(len(self._buf))
                frame = _too_deep(exc)
            if frame is None:
                continue
            notes = [p for p in (f"skipped {skipped} bytes that were not a header" if skipped else None, problem,
                                 frame.problem) if p]
            return Frame(frame.message, "; ".join(notes) or None, frame.unparsable, frame.refused_id)

    # -- the stream -------------------------------------------------------------
    async def _fill(self, timeout: float | None = None) -> bool:
        """Append the next chunk; False at the end. Raises TimeoutError when the stream pauses."""
        if self._eof:
            return False
        chunk = await (asyncio.wait_for(self._read(), timeout) if timeout else self._read())
        self._eof = not chunk
        self._buf += chunk
        return bool(chunk)

    def _take(self, n: int) -> bytes:
        data = bytes(self._buf[:n])
        del self._buf[:n]
        return data

    # -- headers ----------------------------------------------------------------
    async def _headers(self) -> tuple[int | None, str | None, int] | None:
        """(Content-Length or None if missing/invalid, its problem, bytes skipped); None at the end."""
        length: int | None = None
        problem: str | None = None
        seen = False
        skipped = 0
        while True:
            if not seen and self._buf.lstrip()[:1] in (b"{", b"["):
                return None, "a body without a header", skipped  # unframed JSON
            newline = self._buf.find(b"\n")
            if newline < 0:
                if len(self._buf) > MAX_HEADER_BYTES:
                    skipped += self._resync(len(self._buf) - 64)
                if not await self._fill():
                    return None
                continue
            line = bytes(self._buf[: newline + 1])
            if not line.strip():
                self._take(newline + 1)
                if seen:
                    return length, problem or (None if length is not None else "no Content-Length header"), skipped
                continue
            header = HEADER.match(line.rstrip(b"\r\n"))
            if header is None:
                skipped += self._resync(newline + 1)
                continue
            self._take(newline + 1)
            seen = True
            if header.group(1).lower() == b"content-length":
                length, problem = _length(header.group(2).strip())

    def _resync(self, limit: int) -> int:
        """Drop bytes up to the next Content-Length header found before `limit`; how many dropped."""
        found = MARKER.search(self._buf, 1, max(limit, 1) + MAX_HEADER_BYTES)
        cut = found.start() if found and found.start() < limit else limit
        self._take(cut)
        return cut

    # -- bodies -----------------------------------------------------------------
    async def _body(self, length: int) -> Frame:
        while len(self._buf) < length:
            try:
                if not await self._fill(self.stall_s):
                    break
            except TimeoutError:
                if (frame := self._complete_prefix(length)) is not None:
                    return frame
                if not await self._fill():
                    break
        try:
            message, problem = _loads(bytes(self._buf[:length]))
        except TooDeep as exc:
            exc.size = length
            raise
        except ValueError:
            return await self._mislabelled(length)
        self._take(length)
        return Frame(message, problem)

    def _complete_prefix(self, length: int) -> Frame | None:
        """The stream paused short of `length`: a whole JSON body already here means N was too big."""
        decoded = _decode(self._buf)
        if decoded is None or self._buf[decoded[1] :].strip():
            return None
        message, end, problem = decoded
        self._take(len(self._buf))
        return Frame(message, _join(f"Content-Length {length} exceeds the {end}-byte body", problem))

    async def _mislabelled(self, length: int) -> Frame:
        """The first `length` bytes are no JSON body: the length is off, or the body is bad."""
        decoded = _decode(self._buf[:length])
        if decoded is not None:  # N too big, and the next frame had begun
            message, end, problem = decoded
            self._take(end)
            return Frame(message, _join(f"Content-Length {length} exceeds the {end}-byte body", problem))
        bound = await self._next_marker(length)
        decoded = _decode(self._buf[:bound])
        if decoded is not None and not self._buf[decoded[1] : bound].strip():  # N too small
            message, end, problem = decoded
            self._take(bound)
            return Frame(message, _join(f"Content-Length {length} is short of the {end}-byte body", problem))
        self._take(max(length, bound))
        return Frame(problem=f"a {length}-byte body that is not JSON", unparsable=True)

    async def _next_marker(self, start: int) -> int:
        """Where the next header begins after `start` (waiting for it while bytes keep coming)."""
        while True:
            found = MARKER.search(self._buf, start)
            if found:
                return found.start()
            if len(self._buf) > self.max_bytes:
                return len(self._buf)
            try:
                if not await self._fill(self.stall_s):
                    return len(self._buf)
            except TimeoutError:
                return len(self._buf)

    async def _unsized(self) -> Frame | None:
        """No usable Content-Length: the body is the JSON value that follows."""
        while True:
            if self._buf.rstrip()[-1:] in (b"}", b"]"):
                decoded = _decode(self._buf)
                if decoded is not None:
                    message, end, problem = decoded
                    self._take(end)
                    return Frame(message, problem)
            found = MARKER.search(self._buf, 1)
            if found:  # the next frame began before this body parsed
                self._take(found.start())
                return Frame(problem=f"a {found.start()}-byte body that is not JSON", unparsable=True)
            if len(self._buf) > self.max_bytes:
                size = len(self._buf)
                self._resync(size)
                return Frame(problem=f"an unsized body over the {self.max_bytes}-byte limit: skipped")
            if not await self._fill():
                return Frame(problem="the stream ended inside a body", unparsable=True) if self._buf.strip() else None

    async def _skip(self, length: int) -> None:
        """Discard `length` bytes as they arrive, stopping early at a header (the length lied)."""
        left = length
        while True:
            found = MARKER.search(self._buf, 0, min(len(self._buf), left + MAX_HEADER_BYTES))
            if found and found.start() < left:
                self._take(found.start())
                return
            if len(self._buf) >= left:
                self._take(left)
                return
            keep = min(len(self._buf), MAX_HEADER_BYTES)  # a header may straddle two chunks
            left -= len(self._take(len(self._buf) - keep))
            if not await self._fill():
                self._buf.clear()
                return


def encode(message: Any) -> bytes:
    """One framed message (ASCII JSON, so characters and bytes agree)."""
    body = json.dumps(message).encode("ascii")
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def _length(value: bytes) -> tuple[int | None, str | None]:
    if not value.isdigit():
        return None, f"Content-Length {value[:40]!r} is not a byte count"
    return int(value), None


def _decode(data: bytes | bytearray) -> tuple[Any, int, str | None] | None:
    """The JSON value at the start of `data`, the bytes it spans, and a note on bad UTF-8."""
    text = bytes(data).decode("utf-8", "surrogateescape")
    start = len(text) - len(text.lstrip())
    try:
        _, end = _DECODER.raw_decode(text, start)
    except RecursionError:
        raise TooDeep from None
    except ValueError:
        return None
    size = len(text[:end].encode("utf-8", "surrogateescape"))
    try:
        message, problem = _loads(bytes(data[:size]))
    except TooDeep as exc:
        exc.size = size
        raise
    return message, size, problem


def _loads(data: bytes) -> tuple[Any, str | None]:
    """The body's JSON value and a note on bad UTF-8; TooDeep past MAX_DEPTH, ValueError if not JSON."""
    try:
        try:
            message, problem = json.loads(data, parse_int=_integer), None
        except UnicodeDecodeError:
            message = json.loads(data.decode("utf-8", "replace"), parse_int=_integer)
            problem = "invalid UTF-8 in the body, replaced by U+FFFD"
    except RecursionError:
        raise TooDeep from None
    if _deeper_than(message, MAX_DEPTH):
        raise TooDeep(message)
    return message, problem


def _integer(digits: str) -> int | float:
    """A JSON integer; one too long for int() (Python's 4300-digit limit) is a float, infinite."""
    return int(digits) if len(digits) <= MAX_INT_DIGITS else float(digits)


def _deeper_than(value: Any, limit: int) -> bool:
    """Whether arrays/objects nest more than `limit` deep (iteratively: the value may be deep)."""
    stack = [(value, 1)] if isinstance(value, (dict, list)) else []
    while stack:
        node, depth = stack.pop()
        children = node.values() if isinstance(node, dict) else node
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return False


def _too_deep(exc: TooDeep) -> Frame:
    """A refused body: answered with its request's id when the decoder got as far as reading it."""
    message = exc.message
    msg_id = message.get("id") if isinstance(message, dict) and "method" in message else None
    return Frame(problem=str(exc), unparsable=msg_id is None, refused_id=msg_id)


def _join(*notes: str | None) -> str | None:
    return "; ".join(n for n in notes if n) or None
