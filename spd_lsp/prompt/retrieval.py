"""BM25 over chunks of the workspace's files (the `bm25s` library), for cross-file snippets.

An index is built once per set of files, off the model thread (`WorkspaceChunks`
builds it on its own thread and swaps it in whole); searching it is read-only.
Terms are identifiers and their snake/camel-case parts, lower-cased.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from pathlib import Path
from typing import Iterable, Sequence

import bm25s

from spd_lsp.prompt.snippets import IDENTIFIER, Chunk, windows
from spd_lsp.syntax import language_of

log = logging.getLogger(__name__)
_PARTS = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")
MAX_FILES = 5000
MAX_FILE_BYTES = 512 * 1024


def terms(text: str) -> list[str]:
    out = []
    for name in IDENTIFIER.findall(text):
        out.append(name.lower())
        parts = _PARTS.findall(name)
        if len(parts) > 1:
            out += [p.lower() for p in parts]
    return out


class ChunkIndex:
    """Chunks and their BM25 index; `search` ranks them against the text before the cursor."""

    def __init__(self, chunks: Sequence[Chunk]) -> None:
        self.chunks = list(chunks)
        self._bm25 = bm25s.BM25()
        if self.chunks:
            self._bm25.index([terms(c.text) or [""] for c in self.chunks], show_progress=False)

    @classmethod
    def of_files(cls, files: Iterable[tuple[str, str]]) -> ChunkIndex:
        """From (path, text) pairs."""
        return cls([chunk for path, text in files for chunk in windows(path, text, "workspace")])

    def search(self, query: str, k: int = 8) -> list[Chunk]:
        wanted = [t for t in terms(query) if t in self._bm25.vocab_dict]
        if not self.chunks or not wanted:
            return []
        found, scores = self._bm25.retrieve([wanted], k=min(k, len(self.chunks)), show_progress=False)
        return [Chunk(**{**vars(self.chunks[i]), "score": float(s)}) for i, s in zip(found[0], scores[0]) if s > 0]


def workspace_files(roots: Sequence[Path], *, exclude: Sequence[str] = ()) -> list[tuple[str, str]]:
    """(relative path, text) of the code files under `roots`, with the n-gram indexer's ignore rules."""
    from ngram_db.ignore import IgnoreRules

    rules = IgnoreRules(roots, exclude)
    found: list[tuple[str, str]] = []
    for root in rules.roots:
        for directory, dirs, names in os.walk(root):
            here = Path(directory)
            dirs[:] = [d for d in dirs if not rules.ignored(here / d, is_dir=True)]
            for name in names:
                path = here / name
                if language_of(name) is None or rules.ignored(path):
                    continue
                try:
                    if path.stat().st_size > MAX_FILE_BYTES:
                        continue
                    found.append((str(path.relative_to(root)), path.read_text(encoding="utf-8")))
                except (OSError, UnicodeDecodeError):
                    continue
                if len(found) >= MAX_FILES:
                    return found
    return found


class WorkspaceChunks:
    """The workspace's chunk index, (re)built on its own thread; `index` is None until one is ready."""

    def __init__(self) -> None:
        self.index: ChunkIndex | None = None
        self._roots: tuple[Path, ...] | None = None
        self._lock = threading.Lock()

    def ensure(self, roots: Sequence[Path], *, exclude: Sequence[str] = ()) -> None:
        """Start building for `roots` unless that is built or being built."""
        key = tuple(roots)
        with self._lock:
            if key == self._roots:
                return
            self._roots, self.index = key, None
        threading.Thread(target=self._build, args=(key, tuple(exclude)), name="spd-snippets", daemon=True).start()

    def _build(self, roots: tuple[Path, ...], exclude: tuple[str, ...]) -> None:
        try:
            index = ChunkIndex.of_files(workspace_files(roots, exclude=exclude))
        except Exception:  # noqa: BLE001 - no index only means no workspace snippets
            log.exception("the workspace snippet index could not be built")
            return
        with self._lock:
            if self._roots == roots:
                self.index = index
