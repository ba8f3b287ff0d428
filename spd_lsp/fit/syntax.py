"""Does an insertion add a syntax error? Tree-sitter, on a window of lines around the cursor.

The grammar comes from the document's file extension; the grammars ship inside
the `tree-sitter-language-pack` wheel (< 1.0: later versions download them at
run time). Languages without a grammar get no check here (only the bracket
balance of `spd_lsp.fit.edits`).
"""

from __future__ import annotations

import ast
import logging
import warnings
from dataclasses import dataclass
from functools import cache
from typing import Any


log = logging.getLogger(__name__)

WHOLE_DOCUMENT_BYTES = 512 * 1024  # larger documents are checked on a window of lines
LINES_BEFORE = 60  # at most; the window starts at the nearest unindented line
LINES_AFTER = 15

@cache
def _parser(language: str) -> Any:
    try:
        from tree_sitter_language_pack import get_parser

        return get_parser(language)  # type: ignore[arg-type]
    except Exception:  # noqa: BLE001 - a missing grammar only means no syntax check
        log.warning("no tree-sitter grammar for %s; drafts get the bracket check only", language)
        return None


@dataclass(frozen=True)
class Errors:
    count: int  # outermost ERROR and MISSING nodes
    on_line: bool  # one of them touches the edited line


def _errors(tree: Any, line_start: int, line_end: int) -> Errors:
    count, on_line, pending = 0, False, [tree.root_node] if tree.root_node.has_error else []
    while pending:
        node = pending.pop()
        flawed = [child for child in node.children if child.has_error or child.is_missing]
        if node.is_error or node.is_missing or not flawed:  # no flawed child: a hidden MISSING token
            count += 1
            on_line = on_line or (node.start_byte <= line_end and node.end_byte >= line_start)
        else:
            pending.extend(flawed)
    return Errors(count, on_line)


def _point(text: bytes) -> tuple[int, int]:
    """Tree-sitter's (row, byte column) of the end of `text`."""
    return text.count(b"\n"), len(text) - (text.rfind(b"\n") + 1)


def _statement_around(root: Any, cursor: int, line_start: int, *, continues: bool = False) -> tuple[int, int]:
    """(start in the head, end in the tail): the top-level statements touching the cursor's line.

    A statement that ends on the cursor's line, before the cursor (`return |` at the end of
    a function), is one the insertion continues: it belongs to the statement around it; so
    does, with `continues` (an indented line), the last statement that ends above it.
    """
    start, end = 0, root.end_byte
    for child in root.children:
        if child.end_byte < line_start:
            start = child.start_byte if continues else child.end_byte
        elif child.start_byte > cursor:
            end = child.start_byte
            break
    return start, end - cursor


def _python_parses(source: bytes) -> bool:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # e.g. invalid escape sequences
            ast.parse(source)
    except (SyntaxError, ValueError):
        return False
    return True


def window(text: str, offset: int) -> tuple[int, int]:
    """Offsets of the lines around `offset` worth parsing: back to an unindented line
    (a top-level statement, at most LINES_BEFORE lines up), and LINES_AFTER lines on."""
    start = text.rfind("\n", 0, offset) + 1
    for _ in range(LINES_BEFORE):
        if start == 0:
            break
        start = text.rfind("\n", 0, start - 1) + 1
        if text[start : start + 1] not in (" ", "\t", "\n", "\r"):
            break
    end = offset
    for _ in range(LINES_AFTER + 1):
        found = text.find("\n", end)
        end = len(text) if found < 0 else found + 1
    return start, end


class SyntaxCheck:
    """Whether inserting a text at the cursor adds a syntax error to the code around it.

    The document is parsed once (a window of lines around the cursor when it is
    over WHOLE_DOCUMENT_BYTES); each insertion is an incremental re-parse.
    Mid-line (`line_end` False) an insertion may add no error, nor any on its line.
    At a line end an incomplete statement is normal while typing: there the check
    only keeps a document that had no error free of them, and a blank line (a new
    statement) is not checked. An insertion of several lines is whole code the user
    did not type: it may add no error, and in Python the statement around it must
    parse wherever it parses with `placeholder` (e.g. `pass` in an empty body) there.
    """

    def __init__(self, language: str | None, text: str, offset: int, *, line_end: bool, placeholder: str = "") -> None:
        line_head = text[text.rfind("\n", 0, offset) + 1 : offset]
        self.parser = _parser(language) if language else None
        self.blank_line = line_end and not line_head.strip()
        self.placeholder = placeholder.encode()
        self.line_end = line_end
        start, end = (0, len(text)) if len(text) <= WHOLE_DOCUMENT_BYTES else window(text, offset)
        self.head = text[start:offset].encode()
        self.tail = text[offset:end].encode()
        self.line_start = len(self.head) - len(line_head.encode())
        self.rest_of_line = len(self.tail.split(b"\n", 1)[0])
        self.language = language
        self._tree: Any = None
        self._old: Errors | None = None
        self._statement: dict[bool, tuple[int, int]] = {}  # bytes of head and tail in the cursor's statement
        self._statement_parsed: dict[bytes, bool] = {}  # with each placeholder at the cursor

    def _errors(self, tree: Any, insert: bytes) -> Errors:
        return _errors(tree, self.line_start, len(self.head) + len(insert) + self.rest_of_line)

    def rejects(self, insert: str) -> bool:
        lines = "\n" in insert
        if self.parser is None or (self.blank_line and not lines):
            return False
        if self._old is None:
            self._tree = self.parser.parse(self.head + self.tail)
            self._old = self._errors(self._tree, b"")
        old = self._old
        if self.line_end and old.count and not lines:
            return False
        inserted = insert.encode()
        tree = self._tree.copy()
        start, (rows, column) = _point(self.head), _point(inserted)
        tree.edit(
            start_byte=len(self.head),
            old_end_byte=len(self.head),
            new_end_byte=len(self.head) + len(inserted),
            start_point=start,
            old_end_point=start,
            new_end_point=(start[0] + rows, column if rows else start[1] + column),
        )
        new = self._errors(self.parser.parse(self.head + inserted + self.tail, tree), inserted)
        if new.count > old.count or (new.on_line and not old.on_line and not lines):
            return True
        return self._exact_rejects(inserted, self.placeholder if lines else b"", lines=lines)

    def _exact_rejects(self, inserted: bytes, placeholder: bytes, *, lines: bool) -> bool:
        """Python's own parser on the top-level statement around the cursor, where it parsed (with
        `placeholder` at the cursor): tree-sitter's grammar is lenient (it takes `x =` + newline + a
        string as an assignment)."""
        if self.language != "python":
            return False
        continues = lines and self.head[self.line_start : self.line_start + 1] in (b" ", b"\t")  # an indented line's
        if continues not in self._statement:
            self._statement[continues] = _statement_around(self._tree.root_node, len(self.head), self.line_start,
                                                           continues=continues)
        start, end = self._statement[continues]
        if self._statement_parsed.get(placeholder) is None:
            self._statement_parsed[placeholder] = _python_parses(self.head[start:] + placeholder + self.tail[:end])
        if not self._statement_parsed[placeholder]:
            return False
        return not _python_parses(self.head[start:] + inserted + self.tail[:end])
