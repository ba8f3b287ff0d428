"""Cursor positions in real code, with the true rest of the line, for quality measurements."""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

# Characters after which a mid-line cursor is natural (the user paused after them).
_BREAKS = " .(,=[:"


@dataclass(frozen=True)
class Position:
    path: Path
    prefix: str  # text before the cursor
    target: str  # the real rest of that line
    kind: str = "line_start"  # "line_start" (after the indentation), "mid_line" or "call"
    suffix: str = ""  # text after the cursor on its line, as the editor has it (the auto-paired ")")


def _calls(rest: str) -> list[tuple[int, int]]:
    """(open, close) of the same-line parentheses of `rest` with at least 3 characters inside."""
    found, stack = [], []
    for i, char in enumerate(rest):
        if char == "(":
            stack.append(i)
        elif char == ")" and stack:
            start = stack.pop()
            if i - start > 3:
                found.append((start, i))
    return found


def _line_positions(path: Path, text: str, prefix_chars: int, rng: random.Random) -> list[Position]:
    found: list[Position] = []
    offset = 0
    for line in text.splitlines(keepends=True):
        stripped = line.lstrip(" ")
        indent = len(line) - len(stripped)
        rest = stripped.rstrip("\n")
        if indent and len(rest) >= 8 and not rest.startswith("#"):
            cursor = offset + indent
            found.append(Position(path, text[max(0, cursor - prefix_chars):cursor], rest, "line_start"))
            breaks = [i + 1 for i, c in enumerate(rest[:-4]) if c in _BREAKS and i >= 2]
            if breaks:
                cut = rng.choice(breaks)
                cursor += cut
                found.append(Position(path, text[max(0, cursor - prefix_chars):cursor], rest[cut:], "mid_line"))
            if calls := _calls(rest):
                start, end = rng.choice(calls)
                cursor = offset + indent + start + 1  # just after "(": the editor has auto-paired ")"
                found.append(Position(path, text[max(0, cursor - prefix_chars):cursor], rest[start + 1:end], "call", ")"))
        offset += len(line)
    return found


def sample_positions(
    files: list[Path], count: int, seed: int = 0, prefix_chars: int = 3000, kinds: tuple[str, ...] = ("line_start",)
) -> list[Position]:
    """`count` positions of the given kinds, drawn evenly over every candidate in `files`.

    line_start: just after an indented line's indentation (the hardest case for healing);
    mid_line: after a space or punctuation inside such a line;
    call: just after a "(" whose ")" closes on that line; the target is the arguments and the
    suffix the auto-paired ")" an editor would already show after the cursor.
    """
    rng = random.Random(seed)
    candidates = [
        position
        for path in files
        for position in _line_positions(path, path.read_text(encoding="utf-8", errors="replace"), prefix_chars, rng)
        if position.kind in kinds
    ]
    return rng.sample(candidates, min(count, len(candidates)))


def matched_prefix(draft: str, target: str) -> int:
    """Characters of the target a user accepts before the draft goes wrong."""
    n = 0
    for a, b in zip(draft, target):
        if a != b:
            break
        n += 1
    return n
