"""The session's side of the prompt context: suffix, path and snippets for one request, as plain values.

Snippets are chosen once per region of a document and kept while the user types
there, so the prompt's stable part, and with it the KV cache, stays the same; they
are chosen again when the cursor moves more than a region away, the set of open
documents changes, the workspace index becomes ready or follows a changed file, or
the settings change.
Runs on the model worker only.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Callable, Sequence
from urllib.parse import unquote, urlparse
from urllib.request import url2pathname

from spd_lsp.api import PromptContext
from spd_lsp.settings import Settings
from spd_lsp.cursor import Cursor, TokenSpans, fit_suffix
from spd_lsp.context.snippets import (
    WINDOW_LINES,
    RecentEdits,
    around,
    merge,
    query_text,
    rank_by_overlap,
    select,
    windows,
)
from spd_lsp.languages import language_of

REGION_LINES = WINDOW_LINES  # the cursor may move this far and keep its snippets
WORKSPACE_HITS = 16


def relative_path(uri: str, roots: Sequence[Path]) -> str:
    """A document's path relative to its workspace folder (its name where none holds it)."""
    parsed = urlparse(uri)
    if parsed.scheme != "file":
        return PurePosixPath(unquote(parsed.path)).name or uri
    path = Path(url2pathname(unquote(parsed.path)))
    for root in sorted(roots, key=lambda r: -len(r.parts)):
        if path.is_relative_to(root):
            return path.relative_to(root).as_posix()
    return path.name


@dataclass(frozen=True)
class _Chosen:
    line: int
    key: tuple[Any, ...]  # what else the choice depended on
    snippets: tuple[tuple[str, str], ...]


class ContextGatherer:
    def __init__(self, *, on_change: Callable[[], None] = lambda: None) -> None:
        """`on_change`: the workspace index changed (told on its thread), so snippet sets may have."""
        self.recent = RecentEdits()
        self.workspace: Any = None  # retrieval.WorkspaceChunks, imported when snippets are first on
        self.on_change = on_change
        self._chosen: dict[str, _Chosen] = {}

    def configure(self, settings: Settings, roots: Sequence[Path]) -> None:
        """Start (re)building the workspace index when its snippets are wanted; drop it (and its
        watcher) when they no longer are."""
        if settings.context.snippets and "workspace" in settings.context.sources:
            if self.workspace is None:
                from spd_lsp.context.retrieval import WorkspaceChunks

                self.workspace = WorkspaceChunks(on_change=self.on_change)
            self.workspace.ensure(roots, exclude=settings.ngrams.exclude)
        elif self.workspace is not None:
            unused, self.workspace = self.workspace, None
            threading.Thread(target=unused.close, name="spd-snippets-close", daemon=True).start()  # joins its watcher

    def saved(self, path: Path) -> None:
        if self.workspace is not None:
            self.workspace.saved(path)

    def close(self) -> None:
        if self.workspace is not None:
            self.workspace.close()

    def status(self) -> dict[str, Any]:
        """The workspace index as `spd.status` shows it: its chunks and how many times it was (re)built."""
        workspace = self.workspace
        index, generation = workspace.current() if workspace is not None else (None, 0)
        return {"workspaceIndex": None if workspace is None else
                {"chunks": len(index.chunks) if index is not None else None, "builds": generation}}

    def visit(self, key: str, line: int, text: str) -> None:
        self.recent.visit(key, line, text)

    def forget(self, key: str | None = None) -> None:
        if key is None:
            self._chosen.clear()
        else:
            self._chosen.pop(key, None)

    def gather(
        self,
        key: str,
        cursor: Cursor,
        line: int,
        settings: Settings,
        *,
        spans: TokenSpans,
        count_tokens: Callable[[str], int],
        roots: Sequence[Path],
        neighbours: Sequence[tuple[str, str]] = (),
    ) -> PromptContext:
        """The request's context: the suffix cut to its budget, the path (where shown), snippets, the language."""
        context = settings.context
        path = relative_path(key, roots)
        snippets: tuple[tuple[str, str], ...] = ()
        if context.snippets and context.tokens > 0:
            snippets = self._snippets(key, path, cursor, line, settings, count_tokens, roots, neighbours)
        return PromptContext(
            suffix=fit_suffix(cursor.text, spans, context.suffix_tokens, start=cursor.offset),
            filename=path if context.header or snippets else None,
            snippets=snippets,
            language=language_of(key),
        )

    def _snippets(
        self, key: str, path: str, cursor: Cursor, line: int, settings: Settings, count_tokens: Callable[[str], int],
        roots: Sequence[Path], neighbours: Sequence[tuple[str, str]],
    ) -> tuple[tuple[str, str], ...]:
        context = settings.context
        workspace = self.workspace  # once: the settings may drop it meanwhile
        index, generation = workspace.current() if workspace is not None else (None, 0)
        others = tuple(sorted(uri for uri, _ in neighbours if uri != key))
        depends = (others, generation, context)
        chosen = self._chosen.get(key)
        if chosen is not None and chosen.key == depends and abs(chosen.line - line) <= REGION_LINES:
            return chosen.snippets
        query = query_text(cursor.prefix)
        rankings = []
        if "open" in context.sources:
            rankings.append(rank_by_overlap(query, (c for uri, text in neighbours if uri != key
                                                    for c in windows(relative_path(uri, roots), text, "open"))))
        if "edited" in context.sources:
            rankings.append(rank_by_overlap(query, (c for c in self.recent.chunks if c.path != key)))
        if "workspace" in context.sources and index is not None:
            rankings.append([c for c in index.search(query, WORKSPACE_HITS) if c.path != path])
        near = around(cursor.text, cursor.offset)
        picked = select(merge(*rankings), near, context.tokens, count_tokens)
        snippets = tuple((c.path if c.source != "edited" else relative_path(c.path, roots), c.text) for c in picked)
        self._chosen[key] = _Chosen(line, depends, snippets)
        return snippets
