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
