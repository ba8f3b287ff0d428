"""Drafts fitted to the text after the cursor: no eaten closers, no glue, no new syntax errors."""

from __future__ import annotations

import pytest

from lsprotocol import types as lsp

from spd_lsp.cursor import Cursor
from evaluation.accept import Case, Verdict, judge
from spd_lsp.fit.nesting import scan
from spd_lsp.fit.edits import Fit, finalize, glues
from spd_lsp.fit.syntax import SyntaxCheck, window
from spd_lsp.languages import language_of

BEFORE = "class Shop:\n    def report(self, m, L, values):\n"
AFTER = "\n        return None\n"


def fit(line: str, draft: str, language: str | None = "python", *, multiline: bool = False) -> str:
    """Fit `draft` at the `|` of `line`, a line inside a method body."""
    offset = len(BEFORE) + line.index("|")
    return Fit(Cursor(BEFORE + line.replace("|", "") + AFTER, offset), language, multiline=multiline)(draft)


@pytest.mark.parametrize("language", ["python", None])
@pytest.mark.parametrize(
    "line, draft, expected",
    [
        # seen defect 1: the draft's own `)` was taken for the suffix's
        ("        return sorted(|)", "self.items.values())", "self.items.values()"),
        ("        return sorted(|)", "self.items.values(), key=len) + [1]", "self.items.values(), key=len"),
        ("        c = randrange(5, m, 4|) if m > 1 else 1", ") if m > 4", ""),
        ("        c = randrange(5, m, |) if m > 1 else 1", "4) if m > 4", "4"),
        ("        return f(g(|))", "x), y)", "x"),
        ("        return [|]", "1, 2] + [3]", "1, 2"),
        ('        print("total: |")', 'done", x)', "done"),
        # seen defect 2: glued onto the next word
        ("        total = |sum(v * 1 for v in values)", "0.0", ""),
        ("        n = |len(L)", "min(L)", ""),
        ("        stack = |deque()", "[]", ""),
        ("        x = |pow(base, d, n)", "2", ""),
        ("        x = |'a'", "'b'", ""),
        ("        x |= 1", "=", ""),
        # seen defect 6: the line's indentation stands
        ("        |", " def find_highest_price(self)", "def find_highest_price(self)"),
        ("        total = |", "  sum(values)", "sum(values)"),
        # at a line end the draft stays whole
        ("        total = sum(|", "values) + 1", "values) + 1"),
        ("        total = |", "sum(values", "sum(values"),
    ],
)
def test_fit(line: str, draft: str, expected: str, language: str | None) -> None:
    assert fit(line, draft, language) == expected


@pytest.mark.parametrize(
    "line, draft, expected",
    [
        ("        return sorted(|)", "x for x in", "x"),  # `sorted(x for x in)` does not parse
        ("        total = |sum(values)", "0.0 + ", "0.0 +"),
        ("        if m > 1:| pass", " m = 1", ""),  # `if m > 1: m = 1 pass` would not parse
        ("        x = [1, 2]|", " +", ""),  # a line that parsed keeps parsing
        ("        x = [1, 2]|", " + [3]", " + [3]"),
        ("        x = f(|)", "a b", "a"),
    ],
)
def test_fit_rejects_what_the_grammar_rejects(line: str, draft: str, expected: str) -> None:
    assert fit(line, draft) == expected


def test_fit_without_a_grammar_checks_brackets_only() -> None:
    assert fit("        return sorted(|)", "x for x in", None) == "x for x in"
    assert fit("        # see f(|) here", "a)", None) == "a"


def test_glues() -> None:
    assert glues("0.0", "sum(") and glues("f(x)", "len") and glues("[]", "deque") and glues("x", "'a'")
    assert glues("a =", "= b") and not glues("a +", "b") and not glues("a", " b") and not glues("a", ")")
    assert not glues("a", "") and not glues("", "b")


def test_scan_tracks_brackets_strings_and_comments() -> None:
    state = scan('x = f(a, [1, "(]', "#")
    assert state.owed == (")", "]") and state.quote == '"'
    assert scan("x = f(a)  # (", "#").comment and scan("x = f(a)  # (", "#").owed == ()
    assert scan("  ) + g(", None).unmatched == 1 and scan(r"'\'(", None).quote == "'"


def test_multiline_drafts_only_at_a_line_end() -> None:
    assert fit("        x = |", "1\n        y = 2\n", multiline=True) == "1\n        y = 2"
    assert fit("        x = f(|)", "1\n        y = 2\n", multiline=True) == "1"


def test_a_multiline_draft_that_ran_out_of_tokens_loses_its_last_line() -> None:
    """Without a newline or its block's end after it, a later line may be cut short by the token budget."""
    assert fit("        x = |", "1\n        y = compute_", multiline=True) == "1"
    assert fit("        x = |", "1\n        y = 2\n        z = (", multiline=True) == "1\n        y = 2"
    assert fit("        x = |", "1\n        y = 2\n    def other(self):", multiline=True) == "1\n        y = 2"  # block's end


def test_finalize_dedups_after_cutting_and_keeps_rank_order() -> None:
    drafts = ["a = 1\nb\n", "a = 1\nc\n", "   ", "b = 2", "c = 3", "d = 4"]
    at_end = Cursor("", 0)
    assert finalize(drafts, Fit(at_end), 3) == ["a = 1", "b = 2", "c = 3"]
    assert finalize(drafts, Fit(at_end, multiline=True), 2) == ["a = 1\nb", "a = 1\nc"]
    inside = Cursor("f()", 2)
    assert finalize(["x)", "x", "y))", ")"], Fit(inside), 3) == ["x", "y"]


def test_language_of_documents() -> None:
    assert language_of("file:///src/a%20b/shop.py") == "python"
    assert language_of("/src/app.TSX") == "tsx" and language_of("untitled:Untitled-1") is None


def test_window_starts_at_a_top_level_line() -> None:
    text = "import os\n\ndef f():\n    x = 1\n\n    y = 2\n" + "z = 3\n" * 40
    start, end = window(text, text.index("y ="))
    assert text[start:].startswith("def f():") and text[start:end].count("\n") == 4 + 15


def test_syntax_check_without_a_grammar_rejects_nothing() -> None:
    assert not SyntaxCheck("no-such-language", "f()", 2, line_end=False).rejects("a b")
    assert not SyntaxCheck(None, "f()", 2, line_end=False).rejects("a b")


def test_the_judge_sees_broken_and_glued_edits() -> None:
    """The checks themselves can fail: defects 1 and 2 as the server used to answer."""
    call = Case("inside call", "t", "x = sorted()\n", 0, len("x = sorted("))
    call_range = lsp.Range(lsp.Position(0, 0), lsp.Position(0, call.character))
    assert judge(call, call_range, "x = sorted(a.values(").broken
    assert judge(call, call_range, "x = sorted(a.values()") == Verdict(broken=False, glued=False)
    mid = Case("mid-line", "t", "total = sum(v)\n", 0, len("total = "))
    mid_range = lsp.Range(lsp.Position(0, 0), lsp.Position(0, mid.character))
    for glued in ("total = min(L)", "total = 0.0", "total = 'a'", 'total = "', "total = x"):
        assert judge(mid, mid_range, glued).glued, glued
    assert judge(mid, mid_range, "total = 1 + ") == Verdict(broken=False, glued=False)


def test_a_line_end_in_a_parsing_document_keeps_it_parsing_past_docstrings() -> None:
    """A window of lines starting inside a docstring once hid an unclosed string."""
    text = '"""Module.\n"""\n\n_MARK_C\n"""\nAbout `_MARK_C`.\n"""\n'
    offset = text.index("_MARK_C") + len("_MARK_C")
    line_end = Fit(Cursor(text, offset), "python")
    assert line_end("G = 'path_spec_d") == "G"
    assert line_end("G = 'path_spec_d'") == "G = 'path_spec_d'"


@pytest.mark.parametrize(
    "text",
    [
        "def add(a, b):\n    return ",  # the cursor at the end of the document, after a space
        "def add(a, b):\n    return \n\n\nx = 1\n",
        "import os\nvalue = ",
    ],
)
def test_a_line_end_after_a_space_at_the_end_of_a_statement_takes_a_plain_draft(text: str) -> None:
    """Seen through the TCP test: the statement around the cursor was taken to start after the
    statement that ends on the cursor's line, so `return ` + `a + b` was judged as ` a + b`."""
    offset = text.index("return ") + len("return ") if "return" in text else len(text)
    assert Fit(Cursor(text, offset), "python")("a + b") == "a + b"
