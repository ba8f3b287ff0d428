"""The wheel a user installs (`pip install .`, not the editable checkout) carries what the package reads at run time."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from spd_lsp.engine.kernels import build as kernels

ROOT = Path(__file__).resolve().parents[1]


def test_the_wheel_carries_the_kernel_sources(tmp_path) -> None:
    """The kernel library is compiled on the user's machine from its C++ sources: a wheel without them (the
    package data named a folder they had left) fails every build, and torch's kernels serve for good."""
    source = tmp_path / "source"  # the package's files only: a checkout's own build/ would serve stale copies
    source.mkdir()
    shutil.copy2(ROOT / "pyproject.toml", source / "pyproject.toml")
    shutil.copy2(ROOT / "README.md", source / "README.md")
    for package in ("spd_lsp", "ngram_db"):
        shutil.copytree(ROOT / package, source / package, ignore=shutil.ignore_patterns("__pycache__"))
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                           "-w", str(tmp_path / "wheel"), str(source)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    (wheel,) = (tmp_path / "wheel").glob("spd_lsp-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    wanted = {f"spd_lsp/engine/kernels/{path.name}" for path in kernels.SOURCES + kernels.HEADERS}
    assert wanted <= names, f"missing from the wheel: {sorted(wanted - names)}"
