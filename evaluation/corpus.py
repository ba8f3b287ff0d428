"""The code the evaluation runs on: real packages from PyPI, split by file.

Files, not positions, are split, so no held-out line is ever in the workspace store.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

# Pure-Python, well-kept, and unlike this repository: each is one "workspace".
DEFAULT_PACKAGES: tuple[str, ...] = ("click==8.1.8", "rich==13.9.4", "attrs==24.3.0")


@dataclass(frozen=True)
class Split:
    indexed: list[Path]  # goes into the workspace store
    validation: list[Path]  # held out; the sweep tunes on it
    test: list[Path]  # held out; the reported figures come from it

    def held_out(self, which: str) -> list[Path]:
        """The held-out files of a study's `--split`: "validation" or "test"."""
        return self.validation if which == "validation" else self.test


@dataclass(frozen=True)
class Corpus:
    """One package's sources, fetched and split (`corpus_of`)."""

    name: str  # the package's name, without its version
    root: Path
    split: Split


def corpus_of(package: str, workdir: Path) -> Corpus:
    """`package` ("name==version") fetched into `workdir`/corpus-<name> and split, as every study reads it."""
    name = package.split("==")[0]
    root = fetch_packages([package], workdir / f"corpus-{name}").resolve()
    return Corpus(name, root, split_files(root))


def fetch_packages(packages: tuple[str, ...] | list[str], target: Path) -> Path:
    """`pip install --target` into a throw-away directory (once per directory); returns it."""
    marker = target / ".spd-eval-packages"
    wanted = "\n".join(packages)
    if marker.exists() and marker.read_text() == wanted:
        return target
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(target), *packages],
        check=True,
    )
    marker.write_text(wanted)
    return target


def python_files(root: Path) -> list[Path]:
    """Source files of the corpus, without installer metadata and vendored bytecode."""
    return sorted(
        p for p in root.rglob("*.py")
        if not any(part.endswith((".dist-info", ".egg-info")) or part in {"__pycache__", "bin"} for part in p.parts)
    )


def _bucket(path: Path, root: Path) -> float:
    digest = hashlib.sha256(str(path.relative_to(root)).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def split_files(root: Path, indexed: float = 0.6, validation: float = 0.2) -> Split:
    """A stable split by path hash: the same file lands in the same part on every machine."""
    parts: Split = Split([], [], [])
    for path in python_files(root):
        u = _bucket(path, root)
        (parts.indexed if u < indexed else parts.validation if u < indexed + validation else parts.test).append(path)
    return parts
