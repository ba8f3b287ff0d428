"""`multiline: "auto"`: where a draft may span lines (the cursor starts an empty block) and where it ends."""

from __future__ import annotations

import pytest

from spd_lsp.cursor import Cursor
from spd_lsp.fit.blocks import Block, block_end, block_start
from spd_lsp.fit.edits import Fit, finalize
from spd_lsp.session.session import starts_block
from spd_lsp.settings import Settings


def at(document: str) -> Cursor:
    """The document with the cursor at its `|`."""
    return Cursor(document.replace("|", ""), document.index("|"))


@pytest.mark.parametrize(("document", "language", "expected"), [
    ("def f(x):|\n\ndef g():\n    pass\n", "python", Block(0, closed=False)),  # opens a block
    ("class A:\n    def f(self):  # the body next|\n", "python", Block(4, closed=False)),  # after a comment
    ("def f(a,\n      b):|\n", "python", Block(0, closed=False)),  # a header over two lines: its first line's
    ("    def f(a,\n          b):\n        |\n", "python", Block(4, closed=False)),
    ("def f(x):\n    |\n\nx = 1\n", "python", Block(0, closed=False)),  # an empty line of its empty body
    ("for x in y:\n\n        |\n", "python", Block(0, closed=False)),  # blank lines between
    ("function f(x) {|\n}\n", "javascript", Block(0, closed=True)),  # the closer is there already
    ("if (x) {\n    |\n", "javascript", Block(0, closed=False)),
    ("fn main() {|", "rust", Block(0, closed=False)),  # at the end of the document
])
def test_the_cursor_starts_an_empty_block(document: str, language: str, expected: Block) -> None:
    assert block_start(at(document), language, "#" if language == "python" else "//") == expected


@pytest.mark.parametrize(("document", "language"), [
    ("def f(x):|\n    return x\n", "python"),  # the body is written
    ("def f(x):\n    |\n    return x\n", "python"),
    ("def f(x):\n|\n", "python"),  # not inside the block: not indented
    ("x = compute(a,|\n", "python"),  # a bracket's continuation, not a block
    ("x = 1|\n", "python"),
    ("d = {1: 2}|\n", "python"),
    ("    return x  # note:|\n", "python"),  # the colon is in a comment
    ("s = 'a:'|\n", "python"),
    ("d = {'key':|\n", "python"),  # a dict's key
    ("xs = values[1:|\n", "python"),  # a slice
    ("f = sorted(xs, key=lambda x:|\n", "python"),  # a lambda in a call
    ("def f(x):| pass\n", "python"),  # text after the cursor
    ("label:|\n", "javascript"),  # ':' opens no block outside Python
    ("x = {|}\n", "javascript"),
])
def test_elsewhere_a_draft_stays_on_its_line(document: str, language: str) -> None:
    assert block_start(at(document), language, "#" if language == "python" else "//") is None


def test_auto_decides_per_request_and_widens_the_token_budget() -> None:
    auto = Settings(multiline="auto", max_tokens=10, multiline_max_tokens=40)
    block, line = at("def f(x):|\n"), at("x = |\n")
    assert starts_block(auto, block, "file:///a.py") and not starts_block(auto, line, "file:///a.py")
    assert not starts_block(Settings(), block, "file:///a.py")  # multiline false
    options = auto.decode_options(block=True)
    assert (options.stop_at_newline, options.max_tokens) == (False, 40)
    assert (auto.decode_options().stop_at_newline, auto.decode_options().max_tokens) == (True, 10)
    assert (Settings(multiline=True).decode_options().stop_at_newline, Settings(multiline=True).decode_options().max_tokens) == (
        False, 10)


def test_a_draft_ends_where_its_block_ends() -> None:
    body = "\n    y = x + 1\n    return y"
    assert block_end(body + "\n\ndef g():\n    pass", Block(0)) == body
    assert block_end(body + "\nprint(f(1))\n", Block(0)) == body
    assert block_end("\n  return x;\n}\nf(1);", Block(0, closed=True)) == "\n  return x;"
    assert block_end("\n  return x;\n}\nf(1);", Block(0, closed=False)) == "\n  return x;\n}"  # nothing closes it yet
    assert block_end("\n  return x;\n} else {\n  y();", Block(0, closed=False)) == "\n  return x;"  # opens another
    assert block_end("\n    if x:\n        return 1\n\n    return 2\n", Block(0)) == "\n    if x:\n        return 1\n\n    return 2"


def fitted(document: str, drafts: list[str], language: str = "python", k: int = 3) -> list[str]:
    return finalize(drafts, Fit(at(document), language, multiline=True), k)


def test_fitted_drafts_never_break_the_code_after_the_block() -> None:
    document = "class Shop:\n    def total(self):|\n\n    def add(self, item):\n        self.items.append(item)\n"
    assert fitted(document, [
        "\n        return sum(self.items)\n\n    def add(self, item):\n        pass",  # the block's end: the rest cut
        "\n        return (sum(self.items)\n",  # an open bracket at the end of a later line: nothing of it
        "\n        x = 1\n      y = 2\n",  # an inconsistent dedent: Python's parser rejects it, the first line stays
    ]) == ["\n        return sum(self.items)", "\n        x = 1"]
    body = "def f(x):\n    |\n\nx = 1\n"
    assert fitted(body, ["if x:\n        return 1\n    return 2\nprint(2)"]) == ["if x:\n        return 1\n    return 2"]
    assert fitted(body, ["if x:\n    return 1\n"]) == ["if x:"]  # the body's own body must be indented


def test_the_k_drafts_stay_distinct_after_the_cut() -> None:
    document = "def f(x):|\n\ny = 2\n"
    drafts = ["\n    return x\n\nz = 1", "\n    return x\n", "\n    return x  \n\n", "\n    return 2 * x\n"]
    assert fitted(document, drafts) == ["\n    return x", "\n    return 2 * x"]  # equal once cut: one


def test_braces_cut_at_the_closer_and_keep_it_only_where_the_text_after_has_none() -> None:
    assert fitted("function f(x) {|\n}\n", ["\n  const y = x + 1;\n  return y;\n}\nf(2);\n"], "javascript") == [
        "\n  const y = x + 1;\n  return y;"]
    assert fitted("function f(x) {|\n", ["\n  return x;\n}\nf(2);\n"], "javascript") == ["\n  return x;\n}"]


def test_tab_indented_blocks_are_checked_as_strictly() -> None:
    """Seen in the accept-safety suite: a body of a comment alone, or a header without its body, in a file
    indented with tabs (the syntax check's reference body was indented with spaces, so it checked nothing)."""
    document = "def f(items):\n\tfor item in items:\n\t\tif item:|\n\treturn items\n"
    assert fitted(document, ["\n\t\t\t# the pattern\n\t\t\t# matches\n\treturn 1"]) == []
    assert fitted(document, ["\n\t\t\tfor name in item:\n\treturn 1"]) == []
    assert fitted(document, ["\n\t\t\tyield item\n\treturn 1"]) == ["\n\t\t\tyield item"]
