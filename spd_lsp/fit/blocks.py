"""Multi-line drafts: where one is wanted (`multiline: "auto"`) and where it must end.

A draft may span lines where the cursor opens a block (its line ends with `:` in Python, or with
`{`) whose body is still empty, or sits on an empty line inside such a body: the user is about to
write the whole body. Elsewhere a draft stays on its line. A multi-line draft ends where its block
ends: before its first line indented no deeper than the block's opener (the code after the block
is the user's), a closing line of brackets kept only where the text after the cursor does not close
the block already.
"""

from __future__ import annotations

from dataclasses import dataclass

from spd_lsp.cursor import EOL, Cursor
from spd_lsp.fit.nesting import CLOSERS, scan, states

INDENTED_BLOCKS = frozenset({"python"})  # languages whose blocks open with a trailing ':'
CLOSING_LINE = frozenset(CLOSERS) | frozenset(";,")  # what a line that only closes the block may hold
HEADER_LINES = 20  # a block's header may span this many lines (`def f(a,` … `b):`)


@dataclass(frozen=True)
class Block:
    """Where a multi-line draft's lines may go: deeper than `base` columns; `closed`: the text after the
    cursor already holds the line that closes the block (a draft's closing line would double it)."""

    base: int
    closed: bool = True


def indentation(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))


def code_of(line: str, comment_marker: str | None) -> str:
    """The line without its trailing comment, right-stripped."""
    for index, state in enumerate(states(line, comment_marker=comment_marker)):
        if state.comment:
            return line[: index + 1 - len(comment_marker or "")].rstrip()
    return line.rstrip()


def opens_block(line: str, language: str | None, comment_marker: str | None) -> bool:
    """Whether `line` ends by opening a block: a trailing `{`, or `:` in an indentation language outside
    any bracket the line opened (not a dict's key, a slice, a lambda in a call)."""
    code = code_of(line, comment_marker)
    if not code.strip():
        return False
    ending = code[-1]
    if ending == "{":
        return True
    if ending != ":" or (language is not None and language not in INDENTED_BLOCKS):
        return False
    return not scan(code, comment_marker).owed


def _line_around(text: str, offset: int) -> tuple[int, int]:
    start = max(text.rfind("\n", 0, offset), text.rfind("\r", 0, offset)) + 1
    match = EOL.search(text, offset)
    return start, match.start() if match else len(text)


def _next_code_line(text: str, offset: int) -> str | None:
    """The first non-blank line after the line holding `offset`."""
    _, end = _line_around(text, offset)
    for line in EOL.split(text[end:])[1:]:
        if line.strip():
            return line
    return None


def _previous_code_lines(text: str, offset: int, most: int = HEADER_LINES) -> list[str]:
    """The non-blank lines before the line holding `offset`, the nearest first (at most `most`)."""
    start, _ = _line_around(text, offset)
    found: list[str] = []
    for line in reversed(EOL.split(text[max(0, start - most * 200) : start])[:-1]):
        if line.strip():
            found.append(line)
            if len(found) == most:
                break
    return found


def _header_indentation(opener: str, above: list[str], comment_marker: str | None) -> int:
    """The indentation of the statement whose last line is `opener`: a header over several lines
    (`def f(a,` … `b):`) starts where the brackets its last line closes were opened."""
    joined = code_of(opener, comment_marker)
    for line in [opener, *above]:
        if line is not opener:
            joined = code_of(line, comment_marker) + "\n" + joined
        if not scan(joined, comment_marker).unmatched:
            return indentation(line)
    return indentation(opener)


def block_start(cursor: Cursor, language: str | None, comment_marker: str | None = None) -> Block | None:
    """The empty block the cursor starts: its line opens one (nothing after the cursor), or it sits on
    an empty line deeper than the line that opens one; and no deeper line follows (the body is empty).
    None elsewhere."""
    if cursor.line_suffix.strip():
        return None
    head = cursor.line_prefix
    above = _previous_code_lines(cursor.text, cursor.offset)
    if head.strip():
        opener = head
    elif not above:
        return None
    else:
        opener, above = above[0], above[1:]
    if not opens_block(opener, language, comment_marker):
        return None
    base = _header_indentation(opener, above, comment_marker)
    if not head.strip() and len(head.expandtabs()) <= base:
        return None  # not inside the block: the user dedented, or has not indented yet
    following = _next_code_line(cursor.text, cursor.offset)
    if following is not None and indentation(following) > base:
        return None  # the body is written already
    closed = following is not None and indentation(following) == base and following.strip()[:1] in CLOSERS
    return Block(base, closed)


def within(cursor: Cursor) -> Block:
    """A multi-line draft that starts no block stays in the cursor's: its lines as deep as the cursor's line."""
    return Block(indentation(cursor.line_prefix + cursor.line_suffix) - 1)


def block_end(draft: str, block: Block) -> str:
    """`draft` up to its block's end: before the first later line indented no deeper than `block.base`
    (with that line where it only closes the block and the text after does not), trailing blanks dropped."""
    lines = draft.split("\n")
    for number, line in enumerate(lines[1:], start=1):
        if line.strip() and indentation(line) <= block.base:
            closing = not block.closed and set(line.strip()) <= CLOSING_LINE and line.strip()[0] in CLOSERS
            lines = lines[: number + 1] if closing else lines[:number]
            break
    return "\n".join(lines).rstrip()
