"""Cross-file snippets: candidate chunks, ranked by identifier overlap, de-duplicated, fit to a budget.

Candidates come from windows of the other open documents and from recently edited
ranges (Jaccard similarity of identifier sets against the lines before the cursor,
as Copilot's neighbouring-tabs ranking does) and from the workspace's BM25 index
(`retrieval.py`). A chunk too similar to the text around the cursor is dropped: the
model would copy it back, and the text is in the prompt already.
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass, replace
from typing import Callable, Iterable, Sequence

IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
WINDOW_LINES = 12  # lines per candidate chunk
WINDOW_STRIDE = 6  # overlapping windows: a definition is rarely cut in two
QUERY_LINES = 20  # lines before the cursor that make the query
AROUND_LINES = 30  # lines before and after the cursor a chunk must not repeat
REPEATED_SHARE = 0.5  # a chunk with at least this share of its lines already around the cursor is dropped
MIN_SCORE = 0.05  # below this a chunk shares almost nothing with the query


@dataclass(frozen=True)
class Chunk:
    path: str  # workspace-relative where known, else the document's URI
    start_line: int
    text: str
    source: str  # one of `spd_lsp.settings.SOURCES`: "open", "edited", "workspace"
    score: float = 0.0

    @property
    def end_line(self) -> int:
        return self.start_line + self.text.count("\n")


def identifiers(text: str) -> frozenset[str]:
    return frozenset(IDENTIFIER.findall(text))


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    return len(a & b) / len(a | b) if a or b else 0.0


def windows(path: str, text: str, source: str, *, lines: int = WINDOW_LINES, stride: int = WINDOW_STRIDE) -> list[Chunk]:
    """Overlapping chunks of whole lines; blank-only windows are skipped."""
    rows = text.splitlines(keepends=True)
    chunks = []
    for start in range(0, max(1, len(rows) - lines + stride), stride):
        body = "".join(rows[start : start + lines])
        if body.strip():
            chunks.append(Chunk(path, start, body, source))
    return chunks


def query_text(prefix: str, *, lines: int = QUERY_LINES) -> str:
    return "".join(prefix.splitlines(keepends=True)[-lines:])


def around(text: str, offset: int, *, lines: int = AROUND_LINES) -> str:
    """The lines around a document offset: what the prompt already shows near the cursor."""
    before = text[:offset].splitlines(keepends=True)[-lines:]
    after = text[offset:].splitlines(keepends=True)[:lines]
    return "".join(before + after)


def rank_by_overlap(query: str, chunks: Iterable[Chunk]) -> list[Chunk]:
    """Chunks scored by Jaccard similarity of identifiers with the query, best first."""
    wanted = identifiers(query)
    scored = [replace(c, score=jaccard(wanted, identifiers(c.text))) for c in chunks]
    return sorted((c for c in scored if c.score >= MIN_SCORE), key=lambda c: -c.score)


def _lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip()]


def repeated_share(text: str, near_cursor: frozenset[str]) -> float:
    """The share of `text`'s non-blank lines that the text around the cursor already has (copies, not
    mere shared names: a chunk using the cursor's identifiers is the relevant kind)."""
    lines = _lines(text)
    return sum(line in near_cursor for line in lines) / len(lines) if lines else 1.0


def _overlaps(a: Chunk, b: Chunk) -> bool:
    return a.path == b.path and a.start_line < b.end_line and b.start_line < a.end_line


def select(
    ranked: Sequence[Chunk], near_cursor: str, budget: int, count_tokens: Callable[[str], int]
) -> list[Chunk]:
    """The best chunks that fit `budget` tokens: none overlapping a better one, none repeating the cursor's text."""
    seen = frozenset(_lines(near_cursor))
    chosen: list[Chunk] = []
    left = budget
    for chunk in ranked:
        if any(_overlaps(chunk, c) or chunk.text == c.text for c in chosen):
            continue
        if repeated_share(chunk.text, seen) >= REPEATED_SHARE:
            continue
        cost = count_tokens(chunk.text)
        if cost <= left:
            chosen.append(chunk)
            left -= cost
    return chosen


def merge(*rankings: Sequence[Chunk]) -> list[Chunk]:
    """Several sources' rankings as one: by score normalised within each source, best first."""
    merged = []
    for ranking in rankings:
        top = max((c.score for c in ranking), default=0.0) or 1.0
        merged += [replace(c, score=c.score / top) for c in ranking]
    return sorted(merged, key=lambda c: -c.score)


class RecentEdits:
    """A ring of the regions the user recently worked in (llama.vim's ring buffer of chunks).

    Each request reports its document and cursor line; when the cursor leaves a region,
    that region's lines (from the document's latest text) become a chunk.
    """

    def __init__(self, size: int = 16, *, region_lines: int = WINDOW_LINES) -> None:
        self.chunks: deque[Chunk] = deque(maxlen=size)
        self.region_lines = region_lines
        self._where: tuple[str, int, str] | None = None  # path, line, text of the last request

    def visit(self, path: str, line: int, text: str) -> None:
        if self._where is not None:
            last_path, last_line, last_text = self._where
            if last_path != path or abs(last_line - line) > self.region_lines:
                self._keep(last_path, last_line, last_text)
        self._where = (path, line, text)

    def _keep(self, path: str, line: int, text: str) -> None:
        start = max(0, line - self.region_lines // 2)
        body = "".join(text.splitlines(keepends=True)[start : start + self.region_lines])
        if body.strip():
            fresh = Chunk(path, start, body, "edited")
            kept = [c for c in self.chunks if not _overlaps(c, fresh)]
            self.chunks.clear()
            self.chunks.extend([*kept, fresh])
