"""Positions where the user is writing code that the held-out file has, the document as the editor
has it meanwhile: for the multi-line study (`evaluation.multiline`).

Four kinds, each a real place in a file with what the user writes there removed (the code after it kept):

- `open_block`: the cursor at the end of a compound statement's header (`def f(x):|`), its body removed;
- `empty_body`: the cursor on an indented empty line where that body was (`def f(x):\\n    |`);
- `line_start`: the cursor after an indented line's indentation, the rest of the line removed;
- `mid_line`: the cursor after a space or punctuation mark inside such a line, the rest of it removed.

The first two are where `multiline: "auto"` lets a draft span lines; the last two where it does not
(unless the line was its block's only one: then its rule fires there too, as it would in the editor).
The target is what was removed; the typist of the study writes its first `HORIZON_LINES` lines.
"""

from __future__ import annotations

import ast
import random
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

KINDS: tuple[str, ...] = ("open_block", "empty_body", "line_start", "mid_line")
BLOCK_KINDS: tuple[str, ...] = KINDS[:2]
HORIZON_LINES = 2  # of a block's body: what the simulated typist writes
BREAKS = " .(,=[:"  # after these a mid-line cursor is natural (evaluation/positions.py)


@dataclass(frozen=True)
class Edit:
    path: Path
    kind: str
    before: str  # the document before the cursor
    after: str  # the document after the cursor
    target: str  # what the user writes at the cursor (the code removed)
    horizon: int  # characters of `target` the typist writes (whole lines)


def _indentation(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))


def _bodies(tree: ast.AST) -> Iterator[list[ast.stmt]]:
    """Every statement block on lines of its own: bodies, `else`/`finally` blocks, handlers' bodies."""
    for node in ast.walk(tree):
        for field in ("body", "orelse", "finalbody"):
            block = getattr(node, field, None)
            if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                yield block
        if isinstance(node, ast.Try):
            yield from (handler.body for handler in node.handlers)


def block_edits(path: Path, text: str) -> Iterator[Edit]:
    lines = text.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return
    for body in _bodies(tree):
        first, last = body[0].lineno - 1, body[-1].end_lineno or body[-1].lineno  # 0-based first, 1-based end
        header = first - 1
        while header >= 0 and (not lines[header].strip() or lines[header].lstrip().startswith("#")):
            header -= 1
        if header < 0 or not lines[header].split("#")[0].rstrip().endswith(":"):
            continue  # a one-line block (`if x: y`), or a header this simple scan cannot read
        if _indentation(lines[first]) <= _indentation(lines[header]) or not lines[header].isascii():
            continue
        cursor = starts[header] + len(lines[header].rstrip("\r\n"))
        body_end = starts[last] - (1 if lines[last - 1].endswith("\n") else 0)  # before the body's last newline
        before, after = text[:cursor], text[body_end:]
        removed = text[cursor:body_end]  # "\n" + the body's lines (comments between included)
        body_lines = removed.split("\n")[1:]
        horizon = len("\n".join(body_lines[:HORIZON_LINES])) + 1
        yield Edit(path, "open_block", before, after, removed, horizon)
        indent = lines[first][: _indentation(lines[first])]
        stripped = removed[1:][len(indent):] if removed[1:].startswith(indent) else removed[1:].lstrip(" \t")
        yield Edit(path, "empty_body", before + "\n" + indent, after, stripped, horizon - 1 - len(indent))


def _line_edits(path: Path, text: str, rng: random.Random) -> Iterator[Edit]:
    offset = 0
    for line in text.splitlines(keepends=True):
        body = line.rstrip("\r\n")
        indent = _indentation(body)
        rest = body[indent:]
        if indent and len(rest) >= 8 and not rest.startswith("#") and body.isascii():
            end = offset + len(body)
            cursor = offset + indent
            yield Edit(path, "line_start", text[:cursor], text[end:], rest, len(rest))
            breaks = [i + 1 for i, c in enumerate(rest[:-4]) if c in BREAKS and i >= 2]
            if breaks:
                cut = rng.choice(breaks)
                yield Edit(path, "mid_line", text[: cursor + cut], text[end:], rest[cut:], len(rest) - cut)
        offset += len(line)


def sample_edits(files: list[Path], per_kind: int, seed: int = 0, kinds: tuple[str, ...] = KINDS) -> dict[str, list[Edit]]:
    """Up to `per_kind` edits of each kind, drawn evenly (seeded) over every candidate in `files`."""
    rng = random.Random(seed)
    pools: dict[str, list[Edit]] = {kind: [] for kind in kinds}
    for path in files:
        text = path.read_text(encoding="utf-8", errors="replace")
        for edit in (*block_edits(path, text), *_line_edits(path, text, rng)):
            if edit.kind in pools and edit.horizon > 0:
                pools[edit.kind].append(edit)
    return {kind: rng.sample(pool, min(per_kind, len(pool))) for kind, pool in pools.items()}
