"""BM25 over chunks of the workspace's files (the `bm25s` library), for cross-file snippets.

An index is built off the model thread and rebuilt as files change (`WorkspaceChunks`
does both on its own thread and swaps each index in whole); searching it is read-only.
Terms are identifiers and their snake/camel-case parts, lower-cased.
"""

from __future__ import annotations

import logging
import re
import threading
from pathlib import Path
from concurrent.futures import Future
from typing import Any, Callable, Iterable, Sequence

import bm25s

from ngram_db.indexer import IndexOptions, SourceWalker
from ngram_db.watcher import Watcher
from spd_lsp.context.snippets import IDENTIFIER, Chunk, windows
from spd_lsp.worker import KeyedWorker
from spd_lsp.languages import language_of

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


def _walker(roots: Sequence[Path], exclude: Sequence[str]) -> SourceWalker:
    """The n-gram indexer's rules: what its store would not hold (secrets, noise, links out, huge or
    binary files) is never a snippet either."""
    return SourceWalker(roots, IndexOptions(max_file_bytes=MAX_FILE_BYTES, exclude=list(exclude)))


def _read(walker: SourceWalker, path: Path) -> tuple[str, str] | None:
    """(path relative to its root, text) of a code file the store would index; None otherwise."""
    root = walker.rules.root_of(path)
    if root is None or language_of(path.name) is None or (loaded := walker.load(path)) is None:
        return None
    return path.relative_to(root).as_posix(), loaded.text


def workspace_files(roots: Sequence[Path], *, exclude: Sequence[str] = ()) -> list[tuple[str, str]]:
    """(relative path, text) of the code files under `roots` that the n-gram store would index."""
    walker = _walker(roots, exclude)
    found: list[tuple[str, str]] = []
    for root in walker.roots:
        for path in walker.walk(root):
            if (file := _read(walker, path)) is not None:
                found.append(file)
                if len(found) >= MAX_FILES:
                    return found
    return found


class _ChunkFiles:
    """Every admitted file's chunks, by path; the `indexer` a `ngram_db.watcher.Watcher` keeps
    current (its roots and rules, a rescan, and single paths changed or moved)."""

    def __init__(self, roots: Sequence[Path], exclude: Sequence[str]) -> None:
        self.sources = _walker(roots, exclude)
        self.roots, self.rules = self.sources.roots, self.sources.rules
        self.key = tuple(roots)  # the roots as configured (`WorkspaceChunks` compares them)
        self.chunks: dict[str, list[Chunk]] = {}
        self.dirty = False  # changed since the last index was built from them

    def index(self, cancelled: Callable[[], bool] = lambda: False) -> None:
        """Read the whole tree again (a first build, a changed .gitignore, an event storm)."""
        files = workspace_files(self.roots, exclude=self.sources.options.exclude)
        self.chunks = {path: windows(path, text, "workspace") for path, text in files}
        self.dirty = True

    def update_path(self, path: Path) -> bool:
        """Re-read one file (or a directory's files): its chunks replace the old ones; gone or no
        longer admitted, they go. True when the chunks changed."""
        path = Path(path).parent.resolve() / Path(path).name  # the file itself may be a link: `_read` judges it
        root = self.rules.root_of(path)
        if root is None or path == root:
            return False
        if path.is_dir() and not path.is_symlink():
            return any([self.update_path(p) for p in self.sources.walk(path)])
        name = path.relative_to(root).as_posix()
        below = [n for n in self.chunks if n.startswith(name + "/")]  # a directory that is gone
        for gone in below:
            del self.chunks[gone]
        file = _read(self.sources, path)
        fresh = windows(*file, "workspace") if file is not None else None
        before = self.chunks.pop(name, None)
        if fresh is not None and (before is not None or len(self.chunks) < MAX_FILES):
            self.chunks[name] = fresh
        changed = bool(below) or fresh != before
        self.dirty |= changed
        return changed

    def move_path(self, source: Path, dest: Path) -> None:
        self.update_path(source)
        self.update_path(dest)

    def all(self) -> list[Chunk]:
        return [chunk for chunks in self.chunks.values() for chunk in chunks]


class WorkspaceChunks:
    """The workspace's chunk index, built and kept current on one thread ("spd-snippets").

    A watcher (the n-gram store's, `ngram_db.watcher`, with its debounce) and `saved` hand
    changed files to that thread, which re-reads their chunks and swaps in a new BM25 index
    whole: a request reads `index` (None until the first is ready) and never waits.
    `on_change` is told after each swap (the session warms the new snippets while idle).
    """

    def __init__(self, *, on_change: Callable[[], None] = lambda: None, debounce_s: float = 0.2) -> None:
        self.index: ChunkIndex | None = None
        self.generation = 0  # counts the swaps: a snippet choice made before one is stale
        self.on_change = on_change
        self.debounce_s = debounce_s
        self._roots: tuple[Path, ...] | None = None
        self._files: _ChunkFiles | None = None
        self._watcher: Watcher | None = None
        self._lock = threading.Lock()
        self._worker = KeyedWorker("spd-snippets")

    def ensure(self, roots: Sequence[Path], *, exclude: Sequence[str] = ()) -> None:
        """Start building for `roots` unless that is built or being built."""
        key = tuple(roots)
        with self._lock:
            if key == self._roots:
                return
            self._roots, self.index = key, None
        self._worker.submit("build", lambda cancelled: self._build(key, tuple(exclude)))

    def saved(self, path: Path) -> None:
        """A file saved in the editor: its chunks follow at once (the watcher may be late or absent)."""
        self._submit(lambda: self._files.update_path(path) if self._files is not None else None)

    def current(self) -> tuple[ChunkIndex | None, int]:
        """The index and its generation, read together."""
        with self._lock:
            return self.index, self.generation

    def _build(self, roots: tuple[Path, ...], exclude: tuple[str, ...]) -> None:
        self._stop_watching()
        files = self._files = _ChunkFiles(roots, exclude)
        if roots:
            try:  # watch before reading, so edits made while the walk runs are not lost
                self._watcher = Watcher(files, debounce_s=self.debounce_s, submit=self._submit)  # type: ignore[arg-type]
                self._watcher.start()
            except OSError as exc:
                self._watcher = None
                log.warning("not watching the workspace for snippets (%s); saves still update them", exc)
        files.index()
        self._swap()

    def _submit(self, work: Callable[[], Any]) -> Future[Any]:
        """A change, queued on the one worker; one new index follows the changes queued together."""
        future = self._worker.submit(object(), lambda cancelled: work()).future
        self._worker.submit("swap", lambda cancelled: self._swap())  # replaces a swap still queued
        return future

    def _swap(self) -> None:
        files = self._files
        if files is None or not files.dirty:
            return
        files.dirty = False
        try:
            index = ChunkIndex(files.all())
        except Exception:  # noqa: BLE001 - no index only means no workspace snippets
            log.exception("the workspace snippet index could not be built")
            return
        with self._lock:
            if self._roots != files.key:  # other roots meanwhile: their build follows
                return
            self.index, self.generation = index, self.generation + 1
        self.on_change()

    def _stop_watching(self) -> None:
        if self._watcher is not None:
            self._watcher.stop()
            self._watcher = None

    def close(self) -> None:
        self._stop_watching()
        self._worker.close(timeout=1.0)
