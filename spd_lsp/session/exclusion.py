"""Content exclusion: documents the server never completes nor reads (the `exclude` setting).

A document whose path matches one of the gitignore-style globs gets no drafts, its text goes
into no prompt (not as the prefix, not as another document's snippet, not into a warm-up) and
its file into no store. The default is the indexer's own secret-file names
(`ngram_db.ignore.SECRET_PATTERNS`: `.env*`, keys, certificates, credentials), so a secret file
the indexer already leaves out is not completed either. Patterns are matched against the path
relative to the workspace folder holding the document (else against its absolute path, where a
pattern without a slash still matches the name at any depth, as in a `.gitignore`).
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path, PurePosixPath
from typing import Sequence
from urllib.parse import unquote, urlparse
from urllib.request import url2pathname

import pathspec

from ngram_db.ignore import SECRET_PATTERNS

log = logging.getLogger(__name__)


def patterns_of(exclude: Sequence[str] | None) -> tuple[str, ...]:
    """The patterns in force: the setting's, or the secret-file names where it is unset."""
    return SECRET_PATTERNS if exclude is None else tuple(exclude)


class Exclusion:
    """Which documents are out of bounds, and the one log line per document that says why."""

    def __init__(self, exclude: Sequence[str] | None = None, roots: Sequence[Path] = ()) -> None:
        self.patterns = patterns_of(exclude)
        self.roots = sorted((Path(root) for root in roots), key=lambda root: -len(root.parts))
        self._spec = pathspec.GitIgnoreSpec.from_lines(self.patterns)
        self._told: set[str] = set()
        self._lock = threading.Lock()

    def pattern_for(self, uri: str) -> str | None:
        """The pattern that excludes the document at `uri`; None when it is not excluded (and for
        documents that are no file: an untitled buffer has no name to match)."""
        relative = _relative(uri, self.roots)
        if relative is None:
            return None
        result = self._spec.check_file(relative)
        if not result.include:
            return None
        return self.patterns[result.index] if result.index is not None else "?"

    def excludes(self, uri: str) -> bool:
        """Whether `uri` is excluded; the first time for each document, the log says which pattern excludes it."""
        pattern = self.pattern_for(uri)
        if pattern is None:
            return False
        with self._lock:
            first = uri not in self._told
            self._told.add(uri)
        if first:
            log.info("%s matches the exclude pattern %r: it is never completed nor read (setting `exclude`)",
                     unquote(uri), pattern)
        return True


def _relative(uri: str, roots: Sequence[Path]) -> str | None:
    parsed = urlparse(uri)
    if parsed.scheme != "file":
        return None
    path = Path(url2pathname(unquote(parsed.path)))
    for root in roots:  # the deepest folder first
        if path.is_relative_to(root):
            return path.relative_to(root).as_posix()
    return PurePosixPath(path.as_posix()).as_posix().lstrip("/")
