"""From raw drafts to edits an editor can show: cut, de-duplicate, place.

Every edit replaces the cursor's line from its start up to the cursor, so the
client can keep matching the suggestion while the user types or deletes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from spd_lsp.context import EOL, Cursor, units


def cut(draft: str, line_suffix: str, multiline: bool) -> str:
    """The part of a draft worth inserting before `line_suffix` (the rest of the line)."""
    if not multiline:
        draft = EOL.split(draft, maxsplit=1)[0]
    tail = line_suffix.strip()
    if tail and (found := draft.find(tail)) >= 0:
        draft = draft[:found]  # the rest of the line is already there
    return draft.rstrip()


def finalize(drafts: Iterable[str], line_suffix: str, multiline: bool, k: int) -> list[str]:
    """At most k distinct, non-blank cut drafts, in the engine's rank order."""
    kept: list[str] = []
    for draft in drafts:
        text = cut(draft, line_suffix, multiline)
        if text.strip() and text not in kept:
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


def line_edits(drafts: Iterable[str], cursor: Cursor, line: int, replaced: str, encoding: str) -> list[LineEdit]:
    """Edits for drafts continuing `cursor` (possibly after an applied selection).

    `replaced` is the original document text of the line up to the edit's end;
    the new text is the (edited) typed line followed by the draft.
    """
    end = units(replaced, encoding)
    typed = cursor.line_prefix
    return [LineEdit(line, end, typed + draft, draft) for draft in drafts]


@dataclass(frozen=True)
class Shown:
    """The drafts last shown for a document: while the user types into one of them,
    the rest of it is still the answer, and no decode is needed."""

    prefix_length: int
    prefix_hash: int  # of the text before the cursor; a hash keeps a 5 MB prefix out of memory
    suffix: str
    drafts: tuple[str, ...]

    @classmethod
    def of(cls, prefix: str, suffix: str, drafts: Iterable[str]) -> Shown:
        return cls(len(prefix), hash(prefix), suffix, tuple(drafts))

    def follow(self, prefix: str, suffix: str) -> list[str]:
        """What remains of the drafts that the newly typed text agrees with."""
        typed = prefix[self.prefix_length :]
        if not typed or EOL.search(typed) or suffix != self.suffix:
            return []
        if len(prefix) <= self.prefix_length or hash(prefix[: self.prefix_length]) != self.prefix_hash:
            return []
        return [d[len(typed) :] for d in self.drafts if d.startswith(typed) and d[len(typed) :].strip()]
