"""Cursor positions in real code, with the true rest of the line, for quality measurements."""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Position:
    path: Path
    prefix: str  # text before the cursor
    target: str  # the real rest of that line


def sample_positions(files: list[Path], count: int, seed: int = 0, prefix_chars: int = 3000) -> list[Position]:
    """Starts of indented lines, just after the indentation (the hardest case for healing)."""
    rng = random.Random(seed)
    candidates: list[Position] = []
    for path in files:
        text = path.read_text(encoding="utf-8", errors="replace")
        offset = 0
        for line in text.splitlines(keepends=True):
            stripped = line.lstrip(" ")
            indent = len(line) - len(stripped)
            rest = stripped.rstrip("\n")
            if indent and len(rest) >= 8 and not rest.startswith("#"):
                cursor = offset + indent
                candidates.append(Position(path, text[max(0, cursor - prefix_chars):cursor], rest))
            offset += len(line)
    return rng.sample(candidates, min(count, len(candidates)))


def matched_prefix(draft: str, target: str) -> int:
    """Characters of the target a user accepts before the draft goes wrong."""
    n = 0
    for a, b in zip(draft, target):
        if a != b:
            break
        n += 1
    return n
