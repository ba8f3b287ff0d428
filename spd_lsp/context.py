"""What the model sees: the text before the cursor, in client position units.

LSP positions count UTF-16 code units unless UTF-8 or UTF-32 was negotiated;
Python strings index code points. All conversions live here. Lines end at
"\\n", "\\r\\n" or "\\r", as LSP defines them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Sequence

EOL = re.compile(r"\r\n|\r|\n")
# A token is rarely longer than this many characters; bounds what we tokenize.
MAX_CHARS_PER_TOKEN = 16

TokenSpans = Callable[[str], Sequence[tuple[int, int]]]
"""Character (start, end) of each token of a text, e.g. a fast tokenizer's offsets."""


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


def line_start(text: str, line: int) -> int | None:
    """Offset where a line begins; None when the document has fewer lines."""
    if line == 0:
        return 0
    for number, match in enumerate(EOL.finditer(text), start=1):
        if number == line:
            return match.end()
    return None


def line_end(text: str, offset: int) -> int:
    match = EOL.search(text, offset)
    return match.start() if match else len(text)


def offset_of(text: str, line: int, character: int, encoding: str) -> int | None:
    """Document offset of an LSP position; None when the line does not exist."""
    start = line_start(text, line)
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
    def prefix(self) -> str:
        return self.text[: self.offset]


def locate(text: str, line: int, character: int, encoding: str) -> Cursor | None:
    offset = offset_of(text, line, character, encoding)
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
