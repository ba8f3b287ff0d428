"""What the model sees: the text before the cursor, in client position units.

LSP positions count UTF-16 code units unless UTF-8 or UTF-32 was negotiated;
Python strings index code points. All conversions live here. Lines end at
"\\n", "\\r\\n" or "\\r", as LSP defines them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Callable, Sequence

EOL = re.compile(r"\r\n|\r|\n")
# A token is rarely longer than this many characters; bounds what we tokenize.
MAX_CHARS_PER_TOKEN = 16

TokenSpans = Callable[[str], Sequence[tuple[int, int]]]
"""Character (start, end) of each token of a text, e.g. a fast tokenizer's offsets."""
Encode = Callable[[str], list[int]]
"""Token ids of a text (no special tokens)."""

# Whole lines at C speed: the biggest first, so a long skip is a few regex matches.
_SKIP = {n: re.compile(r"(?:[^\r\n]*(?:\r\n|\r|\n)){%d}" % n) for n in (4096, 64, 1)}


def char_units(char: str, encoding: str) -> int:
    """Code units of one code point in the negotiated encoding ("utf-8"/"utf-16"/"utf-32")."""
    if encoding == "utf-32":
        return 1
    if encoding == "utf-8":
        return len(char.encode("utf-8", "surrogatepass"))
    return 2 if ord(char) > 0xFFFF else 1


def units(text: str, encoding: str) -> int:
    if encoding == "utf-32" or text.isascii():
        return len(text)
    return sum(char_units(c, encoding) for c in text)


def index_of(line: str, character: int, encoding: str) -> int:
    """Code-point index of a client column, clamped to the line (LSP: past the end means the end).

    A column inside a multi-unit character (half a surrogate pair) falls back to its start.
    """
    if encoding == "utf-32" or line.isascii():
        return min(character, len(line))
    seen = 0
    for index, char in enumerate(line):
        seen += char_units(char, encoding)
        if seen > character:
            return index
    return len(line)


def skip_lines(text: str, offset: int, count: int) -> int | None:
    """Offset of the line start `count` lines after the line start `offset`; None past the end."""
    for lines, pattern in _SKIP.items():
        while count >= lines:
            match = pattern.match(text, offset)
            if match is None:
                return None
            offset, count = match.end(), count - lines
    return offset


BACK_STEPS = 64  # lines LineIndex walks back before rescanning from the start


def lines_back(text: str, offset: int, count: int) -> int:
    """Offset of the line start `count` lines before the line start `offset` (at most the first line)."""
    for _ in range(count):
        if offset == 0:
            break
        end = offset - 2 if offset >= 2 and text.startswith("\r\n", offset - 2) else offset - 1  # its EOL
        offset = max(text.rfind("\n", 0, end), text.rfind("\r", 0, end)) + 1
    return offset


def is_line_start(text: str, offset: int) -> bool:
    if offset == 0:
        return True
    if offset > len(text):
        return False
    before = text[offset - 1]
    return before == "\n" or (before == "\r" and text[offset : offset + 1] != "\n")


def eol_count(text: str, end: int) -> int:
    """Line ends in text[:end], counted at memchr speed ("\r\n" is one)."""
    count = text.count("\n", 0, end)
    if text.find("\r", 0, end) >= 0:
        count += text.count("\r", 0, end) - text.count("\r\n", 0, end)
    return count


class LineIndex:
    """Line starts of one document across its versions, found from the last one found.

    The remembered (line, offset) still holds in a new version when the offset is a
    line start with exactly `line` line ends before it: two counts at memchr speed
    check that, and only the lines between it and the cursor are scanned. Typing
    near the cursor never rescans the document (an 8 MB one took 164 ms per request).
    """

    def __init__(self) -> None:
        self.line = 0
        self.offset = 0

    def start(self, text: str, line: int) -> int | None:
        if not (is_line_start(text, self.offset) and eol_count(text, self.offset) == self.line):
            self.line, self.offset = 0, 0
        if line < self.line:  # a few lines up: step back; far up: from the start
            back = self.line - line
            self.line, self.offset = (line, lines_back(text, self.offset, back)) if back <= BACK_STEPS else (0, 0)
        offset = skip_lines(text, self.offset, line - self.line)
        if offset is not None:
            self.line, self.offset = line, offset
        return offset


def line_end(text: str, offset: int) -> int:
    match = EOL.search(text, offset)
    return match.start() if match else len(text)


def offset_of(text: str, line: int, character: int, encoding: str, lines: LineIndex | None = None) -> int | None:
    """Document offset of an LSP position; None when the line does not exist."""
    start = (lines or LineIndex()).start(text, line)
    if start is None:
        return None
    return start + index_of(text[start : line_end(text, start)], character, encoding)


@dataclass(frozen=True)
class Cursor:
    """The cursor in a (possibly edited) snapshot of the document."""

    text: str
    offset: int

    @property
    def line_prefix(self) -> str:
        """What is already typed on the cursor's line."""
        start = max(self.text.rfind("\n", 0, self.offset), self.text.rfind("\r", 0, self.offset)) + 1
        return self.text[start : self.offset]

    @property
    def line_suffix(self) -> str:
        return self.text[self.offset : line_end(self.text, self.offset)]

    @property
    def line_start(self) -> int:
        return self.offset - len(self.line_prefix)

    @property
    def prefix(self) -> str:
        return self.text[: self.offset]


def locate(text: str, line: int, character: int, encoding: str, lines: LineIndex | None = None) -> Cursor | None:
    offset = offset_of(text, line, character, encoding, lines)
    return None if offset is None else Cursor(text, offset)


def with_selection(cursor: Cursor, start: int, end: int, inserted: str) -> Cursor:
    """The document as if the client's selected completion item were applied.

    `start`/`end` are document offsets of the item's range; the cursor moves to the
    end of the inserted text.
    """
    text = cursor.text[:start] + inserted + cursor.text[end:]
    return Cursor(text, start + len(inserted))


def fit_prefix(prefix: str, spans: TokenSpans, budget: int) -> str:
    """The longest tail of `prefix` within `budget` tokens that starts at a line start.

    When even the cursor's line alone is over budget, the cut falls inside it.
    """
    window_start = max(0, len(prefix) - budget * MAX_CHARS_PER_TOKEN)
    window = prefix[window_start:]
    token_spans = spans(window)
    if window_start == 0 and len(token_spans) <= budget:
        return prefix
    cut = token_spans[-budget][0] if len(token_spans) > budget else 0
    boundary = _next_line_start(window, cut)
    return window[boundary if boundary < len(window) else cut :]


def _next_line_start(text: str, offset: int) -> int:
    if offset > 0 and text[offset - 1] == "\n":
        return offset
    match = EOL.search(text, max(offset - 1, 0))
    return match.end() if match else len(text)


@dataclass(frozen=True)
class Window:
    """The prompt: the text from document offset `start` to the cursor, and its tokens."""

    start: int
    anchor: str  # the window's first characters, to see that a later request still starts there
    ids: list[int]
    inside_line: bool = False  # cut inside a line over the budget: its start is not a line start, and need not be
    budget: int = 0  # the budget it was fitted to (0: any): its start holds down to half of it, whatever the budget now


ANCHOR_CHARS = 64


def fit_window(prefix: str, encode: Encode, spans: TokenSpans, budget: int, previous: Window | None = None) -> Window:
    """The prompt for `prefix` within `budget` tokens, starting where the previous one did if it can.

    Hysteresis keeps the KV cache: the start stays put while the prompt holds between
    half and all of the budget, and when it must move it drops a quarter of the budget
    at once (`fit_prefix` to 3/4), so typing re-prefills a whole prompt about once per
    budget/4 tokens instead of on every keystroke. A new window fills the budget. The
    common case tokenizes the prompt once. The same holds on a line longer than the
    budget, whose window starts inside it. A window fitted to a smaller budget than
    today's (the CPU's budget grows once its prefill rate is measured) keeps its start
    down to half of its own budget: the larger budget applies when it next moves.
    """
    if previous is not None and still_starts(prefix, previous):
        ids = encode(prefix[previous.start :])
        floor = min(budget, previous.budget or budget) // 2 if previous.start else 0
        if floor <= len(ids) <= budget:
            return replace(previous, ids=ids)
    text = fit_prefix(prefix, spans, budget if previous is None else budget - budget // 4)
    start = len(prefix) - len(text)
    return Window(start, prefix[start : start + ANCHOR_CHARS], encode(text), not is_line_start(prefix, start), budget)


def still_starts(prefix: str, window: Window) -> bool:
    """The window's start is followed by the same characters, and is still a line start (unless it was cut inside a
    line: `Window.inside_line`)."""
    return prefix.startswith(window.anchor, window.start) and (window.inside_line or is_line_start(prefix, window.start))


def fit_suffix(text: str, spans: TokenSpans, budget: int, *, start: int = 0) -> str:
    """The longest head of `text[start:]` (the suffix) within `budget` tokens that ends at a line end.

    When even the first line is over budget, the cut falls inside it. Only the head that
    can fit is read: the cost does not grow with the document.
    """
    if budget <= 0:
        return ""
    window = text[start : start + budget * MAX_CHARS_PER_TOKEN]
    token_spans = spans(window)
    if len(token_spans) <= budget and start + len(window) == len(text):
        return window
    cut = token_spans[budget][0] if len(token_spans) > budget else len(window)
    ends = [m.end() for m in EOL.finditer(window, 0, cut)]
    return window[: ends[-1]] if ends else window[:cut]
