"""Where stores live by default: the user's cache, one store per workspace root."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Sequence

from platformdirs import user_cache_path


def _private_dir(path: Path) -> Path:
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(path, 0o700)
    return path


def stores_dir() -> Path:
    """The owner-only directory holding every store (SPD_LSP_CACHE overrides it, e.g. in tests)."""
    override = os.environ.get("SPD_LSP_CACHE")
    root = Path(override) if override else user_cache_path("spd-lsp", appauthor=False)
    return _private_dir(root / "ngrams")


def default_store_path(root: Path) -> Path:
    """A store directory keyed by the resolved workspace root (readable name + hash)."""
    resolved = Path(root).expanduser().resolve()
    digest = hashlib.sha256(str(resolved).encode("utf-8", "surrogateescape")).hexdigest()[:16]
    return stores_dir() / f"{resolved.name or 'root'}-{digest}"


def base_store_path() -> Path:
    """The shared read-only base store (`spd-lsp index --base`)."""
    return stores_dir() / "base"


def broad_root(root: Path) -> str | None:
    """Why `root` is too broad to index unasked (the filesystem root, a home directory
    or a directory above it), or None for an ordinary project folder."""
    resolved = Path(root).expanduser().resolve()
    home = Path.home().resolve()
    if resolved == Path(resolved.anchor):
        return f"{resolved} is the filesystem root"
    if resolved == home:
        return f"{resolved} is your home directory"
    if home.is_relative_to(resolved):
        return f"{resolved} contains your home directory"
    return None


def explicit_store_path(value: str, roots: Sequence[Path]) -> Path:
    """The store directory an `ngrams.db` setting names, or ValueError saying why not.

    It must be absolute (or start with ~): a relative path would follow the server's
    working directory. It may not be a workspace folder or above one (the store
    would be written into the user's project); inside one only where a store
    already is (built there on purpose with `spd-lsp index --db`).
    """
    path = Path(value).expanduser()
    if not path.is_absolute():
        raise ValueError(f"ngrams.db {value!r} is a relative path; give an absolute one (or start it with ~)")
    path = path.resolve()
    for root in (Path(r).expanduser().resolve() for r in roots):
        if root.is_relative_to(path):
            raise ValueError(f"ngrams.db {value!r} is the workspace folder {root} or above it; "
                             f"choose a directory of its own outside the project")
        if path.is_relative_to(root) and not (path / "data.mdb").exists():
            raise ValueError(f"ngrams.db {value!r} is inside the workspace folder {root}; choose a directory "
                             f"outside it, or build the store there first with `spd-lsp index --db {path}`")
    return path
