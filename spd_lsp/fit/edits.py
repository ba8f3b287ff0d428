"""From raw drafts to edits an editor can show: cut, de-duplicate, place.

Every edit replaces the cursor's line from its start up to the cursor, so the
client can keep matching the suggestion while the user types or deletes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator, Sequence

from ngram_db.secrets import contains_secret
from spd_lsp.cursor import EOL, Cursor, units
from spd_lsp.fit.blocks import Block, block_end, block_start, within
from spd_lsp.fit.nesting import CLOSERS, QUOTES, Nesting, scan, states
from spd_lsp.fit.syntax import SyntaxCheck
from spd_lsp.languages import comment_marker

WORD = re.compile(r"\w")
OPERATORS = frozenset("=+-*/<>!&|%^~@:.")
MAX_SYNTAX_CHECKS = 12  # per draft: each shorter cut costs one parse of the window


def glues(draft: str, suffix: str) -> bool:
    """Whether `draft` would run into the text after the cursor: `0.0sum(`, `min(L)len(`, `=` + `=`."""
    if not draft or not suffix:
        return False
    last, first = draft[-1], suffix[0]
    if first in QUOTES or WORD.match(first):
        return bool(WORD.match(last)) or last in QUOTES or last in CLOSERS
    return last in OPERATORS and first in OPERATORS


class Fit:
    """Cuts drafts to what can be inserted at one cursor without breaking the code around it.

    Mid-line (real text after the cursor) a draft ends where its own nesting
    returns to the cursor's level, never closes what the rest of the line closes,
    never glues onto the next word, and adds no syntax error where a grammar
    exists; a shorter cut is tried before a draft is dropped. At the end of a
    line that has code, a draft may not break a region that parsed; on a blank
    line it starts a statement the user goes on typing.

    `multiline` (at a line end only): a draft may go on over further lines, to its
    block's end (`spd_lsp.fit.blocks`); past its first line it ends only at a line's
    end with its brackets and strings closed, and adds no syntax error.
    """

    def __init__(self, cursor: Cursor, language: str | None = None, *, multiline: bool = False) -> None:
        self.prefix = cursor.line_prefix
        self.suffix = cursor.line_suffix
        self.marker = comment_marker(language)
        self.start = scan(self.prefix, self.marker)
        self.line_end = not self.suffix.strip()
        self.multiline = multiline and self.line_end
        opened = block_start(cursor, language, self.marker) if self.multiline else None
        self.block = opened or within(cursor)
        self.check = SyntaxCheck(language, cursor.text, cursor.offset, line_end=self.line_end,
                                 placeholder=_placeholder(opened, cursor))

    def __call__(self, draft: str) -> str:
        """The longest safe cut of `draft`; "" when none is."""
        if self.multiline:
            whole = EOL.sub("\n", draft)
            draft = block_end(whole, self.block)
            ran_out = draft == whole  # nothing after it: its last line may be cut short by the token budget
        else:
            draft, ran_out = EOL.split(draft, maxsplit=1)[0], False
        if not self.prefix.strip() or self.prefix[-1:].isspace():
            draft = draft.lstrip(" \t")  # the line's own indentation and spacing stand
        checks = 0
        for end in self._ends(draft, last_line=not ran_out):
            cut = draft[:end]
            if self.start.quote is None and glues(cut, self.suffix):
                continue
            if checks == MAX_SYNTAX_CHECKS:
                break
            checks += 1
            if not self.check.rejects(cut):
                return cut
        return ""

    def _ends(self, draft: str, *, last_line: bool = True) -> list[int]:
        """Where a cut may end, longest first: between words, and mid-line only where the
        draft's brackets and strings are back at the cursor's level; past a draft's first
        line, only at a line's end at that level (not the draft's end where `last_line` is
        false: a line the token budget may have cut short)."""
        ends = []
        first_line = len(draft.split("\n", 1)[0])
        for end, state in enumerate(self._states(draft), start=1):
            if end > first_line:
                line_end = draft[end] == "\n" if end < len(draft) else last_line
                if line_end and draft[end - 1] != "\n" and (self._level(state) or self._closes_block(state, end, draft)):
                    ends.append(end)
                continue
            if draft[end - 1] in " \t." or (end < len(draft) and WORD.match(draft[end - 1]) and WORD.match(draft[end])):
                continue  # never in a word, nor after a dot (an attribute or a number goes on)
            if self.line_end or self._level(state):
                ends.append(end)
        return ends[::-1]

    def _states(self, draft: str) -> Iterator[Nesting]:
        """The scan after each character, ending before anything the rest of the line owns."""
        for state in states(draft, self.start, self.marker):
            if not self.line_end and self._oversteps(state):
                return
            yield state

    def _oversteps(self, state: Nesting) -> bool:
        """Closes a bracket or string opened before the cursor, or comments out the rest of the line."""
        closes_string = self.start.quote is not None and state.quote is None
        return (
            state.depth < self.start.depth
            or state.unmatched > self.start.unmatched
            or closes_string
            or (state.comment and not self.start.comment)
        )

    def _closes_block(self, state: Nesting, end: int, draft: str) -> bool:
        """The draft's last line closes the bracket its block opened (kept by `block_end` where nothing
        after the cursor closes it)."""
        return end == len(draft) and not self.block.closed and state.owed == self.start.owed[:-1] and not state.quote

    def _level(self, state: Nesting) -> bool:
        return state.owed == self.start.owed and state.quote == self.start.quote and not state.escaped


def _placeholder(block: Block | None, cursor: Cursor) -> str:
    """What stands in for a block's body in the syntax check's reference (an empty body does not parse),
    indented as the opener's line is (tabs or spaces) and one level deeper."""
    if block is None:
        return ""
    head = cursor.line_prefix
    if not head.strip():
        return "pass"
    indent = head[: len(head) - len(head.lstrip(" \t"))]
    return "\n" + indent + ("\t" if "\t" in indent else "    ") + "pass"


def finalize(drafts: Iterable[str], fit: Callable[[str], str], k: int) -> list[str]:
    """At most k distinct, non-blank fitted drafts, in the engine's rank order; never one that
    carries a secret (a key, token or password the model or a store brought back)."""
    kept: list[str] = []
    for draft in drafts:
        text = fit(draft)
        if text.strip() and text not in kept and not contains_secret(text):
            kept.append(text)
        if len(kept) == k:
            break
    return kept


@dataclass(frozen=True)
class LineEdit:
    """Replace characters [0, end_character) of `line` (client units) with `new_text`."""

    line: int
    end_character: int
    new_text: str
    draft: str  # the inserted continuation alone, for labels and acceptance
    rank: int = 0  # the draft's rank when it was offered (typing through may have dropped drafts above it)
    offer: int = 0  # the decode that offered it: typing through keeps it, so the client's events count once


def line_edits(
    drafts: Sequence[str], cursor: Cursor, line: int, replaced: str, encoding: str, *,
    ranks: Sequence[int] | None = None, offer: int = 0,
) -> list[LineEdit]:
    """Edits for drafts continuing `cursor` (possibly after an applied selection).

    `replaced` is the original document text of the line up to the edit's end;
    the new text is the (edited) typed line followed by the draft. `ranks`: each draft's
    rank when offered (default: its place here).
    """
    end = units(replaced, encoding)
    typed = cursor.line_prefix
    ranks = range(len(drafts)) if ranks is None else ranks
    return [LineEdit(line, end, typed + draft, draft, rank, offer) for draft, rank in zip(drafts, ranks, strict=True)]


@dataclass(frozen=True)
class Shown:
    """The drafts last shown for a document: while the user types into one of them,
    the rest of it is still the answer, and no decode is needed."""

    prefix_length: int
    prefix_hash: int  # of the text before the cursor; a hash keeps a 5 MB prefix out of memory
    suffix: str
    drafts: tuple[str, ...]
    offer: int = 0  # the id of the decode that made them

    @classmethod
    def of(cls, prefix: str, suffix: str, drafts: Iterable[str], *, offer: int = 0) -> Shown:
        return cls(len(prefix), hash(prefix), suffix, tuple(drafts), offer)

    def follow(self, prefix: str, suffix: str) -> list[str]:
        """What remains of the drafts that the newly typed text agrees with.

        Nothing typed (the same request again: a client re-asking, the completion menu
        after the ghost) is answered with the same drafts, not a second decode whose
        numerics may differ.
        """
        return [draft for _, draft in self.follow_ranked(prefix, suffix)]

    def follow_ranked(self, prefix: str, suffix: str) -> list[tuple[int, str]]:
        """`follow`, each remainder with its draft's rank among the drafts offered."""
        typed = prefix[self.prefix_length :]
        if EOL.search(typed) or suffix != self.suffix:
            return []
        if len(prefix) < self.prefix_length or hash(prefix[: self.prefix_length]) != self.prefix_hash:
            return []
        return [(rank, d[len(typed) :]) for rank, d in enumerate(self.drafts)
                if d.startswith(typed) and d[len(typed) :].strip()]
