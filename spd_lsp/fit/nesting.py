r"""Bracket nesting and string quotes of a line of code, for any language.

A deliberately small scanner: brackets `()[]{}`, the quotes `"'\``` with
backslash escapes, and a line comment marker when the language has one. It
knows nothing of grammar; `spd_lsp.fit.syntax` does that where a grammar exists.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Iterator

PAIRS = {"(": ")", "[": "]", "{": "}"}
CLOSERS = frozenset(PAIRS.values())
QUOTES = frozenset("\"'`")


@dataclass(frozen=True)
class Nesting:
    """Where a scan stands: the closers still owed (innermost last), an open string, a comment."""

    owed: tuple[str, ...] = ()
    quote: str | None = None
    comment: bool = False
    escaped: bool = False
    unmatched: int = 0  # closers that matched nothing opened in the scanned text

    @property
    def depth(self) -> int:
        return len(self.owed)

    def step(self, char: str, comment_marker: str | None, before: str) -> Nesting:
        """The state after `char`; `before` is the text scanned so far (for two-character markers).
        A line comment ends with its line (a multi-line draft's next line is code again)."""
        if self.comment:
            return replace(self, comment=False) if char == "\n" else self
        if self.quote is not None:
            if self.escaped:
                return replace(self, escaped=False)
            if char == "\\":
                return replace(self, escaped=True)
            return replace(self, quote=None) if char == self.quote else self
        if comment_marker and (before + char).endswith(comment_marker):
            return replace(self, comment=True)
        if char in QUOTES:
            return replace(self, quote=char)
        if char in PAIRS:
            return replace(self, owed=(*self.owed, PAIRS[char]))
        if char in CLOSERS:
            if self.owed and self.owed[-1] == char:
                return replace(self, owed=self.owed[:-1])
            return replace(self, unmatched=self.unmatched + 1)
        return self


def states(text: str, start: Nesting = Nesting(), comment_marker: str | None = None) -> Iterator[Nesting]:
    """The state after each character of `text`, scanning on from `start`."""
    state = start
    for index, char in enumerate(text):
        state = state.step(char, comment_marker, text[max(0, index - 2) : index])
        yield state


def scan(text: str, comment_marker: str | None = None) -> Nesting:
    """The state at the end of `text` (a line up to the cursor)."""
    state = Nesting()
    for state in states(text, state, comment_marker):
        pass
    return state
