"""Which workspace paths never reach the store: VCS and dependency trees, generated
and backup files, likely secrets, and whatever nested `.gitignore` files say."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Sequence

import pathspec

SKIPPED_DIRS = frozenset({
    ".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv", "venv", ".tox", ".nox",
    ".mypy_cache", ".pytest_cache", ".ruff_cache", ".hypothesis", ".eggs", ".idea", ".vscode",
})

# Files that exist to hold credentials; indexing them would leak them into completions.
SECRET_PATTERNS = (
    ".env", ".env.*", "*.env", "*.pem", "*.key", "*.p12", "*.pfx", "*.jks", "*.keystore", "*.kdbx",
    "*.gpg", "*.asc", "*.ovpn", "id_rsa*", "id_dsa*", "id_ecdsa*", "id_ed25519*", ".ssh/", ".aws/",
    ".gnupg/", ".docker/config.json", ".netrc", ".npmrc", ".pypirc", ".git-credentials", ".htpasswd",
    "credentials", "credentials.*", "*credentials*.json", "secrets.*", "*.secret", "*.secrets",
    "service-account*.json", "*.tfvars", "*.tfstate",
    "*secret*", "token", "token.txt", "*token*.txt", "*_token", "*-token", ".kube/", "kubeconfig", "*kubeconfig*",
    ".dockercfg", ".pgpass", ".my.cnf", "*.p8", ".boto", ".s3cfg", "*password*.txt", "*passwords*",
)

# Generated, lock, backup and editor temp files: noise for a model of the user's code.
NOISE_PATTERNS = (
    "*.min.js", "*.min.css", "*.map", "*.lock", "package-lock.json", "*.pyc", "*.pyo", "*_pb2.py",
    "*.pb.go", "*.egg-info/", "*~", "*.swp", "*.swo", "*.swx", ".#*", "#*#", "4913", "*.tmp",
    "*.orig", "*.rej", ".DS_Store",
)


class IgnoreRules:
    """Decides from names alone (no reads) whether a path is out of the store."""

    def __init__(self, roots: Sequence[Path], exclude: Sequence[str] = (), include_secrets: bool = False,
                 skip: Sequence[Path] = ()) -> None:
        self.roots = [Path(r).resolve() for r in roots]
        patterns = list(NOISE_PATTERNS) + list(exclude) + ([] if include_secrets else list(SECRET_PATTERNS))
        self._builtin = pathspec.GitIgnoreSpec.from_lines(patterns)
        self._skip = [Path(p).resolve() for p in skip]
        self._gitignores: dict[Path, pathspec.GitIgnoreSpec | None] = {}
        self._lock = threading.Lock()

    def root_of(self, path: Path) -> Path | None:
        """The deepest root containing `path`."""
        matches = [root for root in self.roots if path == root or path.is_relative_to(root)]
        return max(matches, key=lambda r: len(r.parts), default=None)

    def forget_gitignores(self) -> None:
        """Drop cached .gitignore files (one of them changed)."""
        with self._lock:
            self._gitignores.clear()

    def ignored(self, path: Path, is_dir: bool = False) -> bool:
        """True if `path` or any directory above it (up to its root) is ignored."""
        root = self.root_of(path)
        if root is None or any(path == s or path.is_relative_to(s) for s in self._skip):
            return True
        parts = path.relative_to(root).parts
        return any(self._ignored_here(root, parts[: i + 1], is_dir or i < len(parts) - 1)
                   for i in range(len(parts)))

    def ignored_entry(self, root: Path, parts: tuple[str, ...], is_dir: bool) -> bool:
        """`ignored` for a walk that has already checked every parent directory."""
        if any(root.joinpath(*parts) == s for s in self._skip):
            return True
        return self._ignored_here(root, parts, is_dir)

    def _ignored_here(self, root: Path, parts: tuple[str, ...], is_dir: bool) -> bool:
        name = parts[-1]
        if is_dir and (name in SKIPPED_DIRS or os.path.exists(root.joinpath(*parts, "pyvenv.cfg"))):
            return True
        suffix = "/" if is_dir else ""
        if self._builtin.match_file("/".join(parts) + suffix):
            return True
        decision = None  # deeper .gitignore files override shallower ones, as in git
        for depth in range(len(parts)):
            spec = self._gitignore(root.joinpath(*parts[:depth]))
            if spec is not None:
                result = spec.check_file("/".join(parts[depth:]) + suffix)
                if result.include is not None:
                    decision = result.include
        return bool(decision)

    def _gitignore(self, directory: Path) -> pathspec.GitIgnoreSpec | None:
        with self._lock:
            if directory not in self._gitignores:
                try:
                    lines = (directory / ".gitignore").read_text(encoding="utf-8", errors="replace").splitlines()
                    self._gitignores[directory] = pathspec.GitIgnoreSpec.from_lines(lines)
                except OSError:
                    self._gitignores[directory] = None
            return self._gitignores[directory]
