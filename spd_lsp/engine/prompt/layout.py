"""Where each part of the context goes in a family's prompt, as special tokens and texts.

The cache-friendly order: what stays put while the user types (other files, the
current file's path) comes first, the prefix being typed comes last or, for
prefix-suffix-middle families, right before the suffix. Each text piece is tokenized
on its own, so a snippet has the same tokens whatever follows it and the KV cache
of the stable part survives every keystroke (`decoding/lm.py` reuses the longest
common token prefix).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

from spd_lsp.api import PromptContext
from spd_lsp.engine.prompt.formats import PromptFormat
from spd_lsp.languages import comment_marker


@dataclass(frozen=True)
class Piece:
    text: str
    special: bool = False  # a control token, placed by id, never tokenized as text
    part: str = "header"  # what it counts towards in the status: header, snippet:<path>, suffix


@dataclass
class Layout:
    before: list[Piece] = field(default_factory=list)  # stable context, then the token opening the prefix
    after: list[Piece] = field(default_factory=list)  # suffix and middle token (prefix-suffix-middle)


def _file(fmt: PromptFormat, path: str, code: str) -> list[Piece]:
    """Another file as this format's repository data has it."""
    part = f"snippet:{path}"
    if fmt.file_sep:
        return [Piece(fmt.file_sep, special=True, part=part), Piece(f"{path}\n{_ended(code)}{fmt.file_end}", part=part)]
    return []


def _ended(code: str) -> str:
    return code if code.endswith("\n") else code + "\n"


def _commented(context: PromptContext) -> list[Piece]:
    """Other files and the current path as `# path` blocks, for families without file tokens."""
    marker = comment_marker(context.language)
    if marker is None:
        return []
    pieces = [Piece(f"{marker} {path}\n{_ended(code)}", part=f"snippet:{path}") for path, code in context.snippets]
    if context.filename and pieces:
        pieces.append(Piece(f"{marker} {context.filename}\n"))
    return pieces


def _files(fmt: PromptFormat, context: PromptContext) -> list[Piece]:
    """Other files, then the opening of the current one, outside any FIM token."""
    if not fmt.file_sep or not (context.snippets or context.filename):
        return []
    pieces = [p for path, code in context.snippets for p in _file(fmt, path, code)]
    pieces.append(Piece(fmt.file_sep, special=True))
    if context.filename and not fmt.path_in_fim:
        pieces.append(Piece(f"{context.filename}\n"))
    return pieces


def layout(fmt: PromptFormat, context: PromptContext) -> Layout:
    """The pieces before and after the prefix for `fmt`."""
    if fmt.fim is None:
        if fmt.header and context.filename:
            return Layout([Piece(fmt.header, special=True), Piece(f"{context.filename}\n")])
        return Layout(_files(fmt, context))
    begin, hole, end = fmt.fim
    inside = _commented(context) if fmt.comment_files else []
    if fmt.path_in_fim and context.filename:
        inside.append(Piece(f"{context.filename}\n"))
    suffix = [Piece(context.suffix, part="suffix")] if context.suffix else []
    if fmt.suffix_first:  # Codestral: [SUFFIX]{suffix}[PREFIX]{prefix}; the prefix ends the prompt
        return Layout([Piece(hole, special=True, part="suffix"), *suffix, Piece(begin, special=True), *inside])
    before = [*_files(fmt, context), Piece(begin, special=True), *inside]
    return Layout(before, [Piece(hole, special=True, part="suffix"), *suffix, Piece(end, special=True, part="suffix")])


def encode_pieces(pieces: Sequence[Piece], encode: Callable[[str], list[int]], token_id: Callable[[str], int]) -> list[int]:
    ids: list[int] = []
    for piece in pieces:
        ids += [token_id(piece.text)] if piece.special else encode(piece.text)
    return ids


def render(pieces: Sequence[Piece]) -> str:
    """The prompt as text (special tokens by name), for tests and logs."""
    return "".join(p.text for p in pieces)
