"""Prefix extraction, position encodings, token budget and draft post-processing."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from spd_lsp.settings import parse_settings
from spd_lsp.cursor import Cursor, fit_prefix, fit_suffix, index_of, locate, units, with_selection
from spd_lsp.fit.edits import Shown, line_edits
from spd_lsp.context.gather import ContextGatherer, relative_path


def word_spans(text: str) -> list[tuple[int, int]]:
    """A stand-in tokenizer: every run of word characters or single other character."""
    return [m.span() for m in re.finditer(r"\w+|\W", text)]


@pytest.mark.parametrize(
    "encoding, character, expected",
    [
        ("utf-16", 5, 5),  # x = "😀": the emoji is 2 UTF-16 units
        ("utf-16", 7, 6),  # after the emoji
        ("utf-16", 6, 5),  # between its two units: back to its start
        ("utf-8", 9, 6),  # 4 bytes for the emoji
        ("utf-8", 7, 5),
        ("utf-32", 6, 6),
        ("utf-16", 999, 7),  # beyond the line: clamped to its end
    ],
)
def test_client_columns_to_code_points(encoding: str, character: int, expected: int) -> None:
    line = 'x = "😀"'
    assert index_of(line, character, encoding) == expected


def test_column_inside_a_surrogate_pair_falls_back_to_the_character_start() -> None:
    assert index_of("a😀b", 2, "utf-16") == 1
    assert index_of("a😀b", 3, "utf-8") == 1


@given(st.text(max_size=30))
def test_units_round_trip(line: str) -> None:
    for encoding in ("utf-8", "utf-16", "utf-32"):
        for index in range(len(line) + 1):
            assert index_of(line, units(line[:index], encoding), encoding) == index


def test_locate_handles_every_line_ending_and_missing_lines() -> None:
    text = "one\r\ntwo\rthree\nfour"
    cursor = locate(text, 2, 3, "utf-16")
    assert cursor is not None and cursor.line_prefix == "thr" and cursor.line_suffix == "ee"
    assert cursor.prefix == "one\r\ntwo\rthr"
    assert locate(text, 3, 4, "utf-16").line_prefix == "four"
    assert locate(text, 4, 0, "utf-16") is None
    assert locate("", 0, 0, "utf-16") == Cursor("", 0)


def test_selection_is_applied_before_the_cursor() -> None:
    text = "value = obj.na\nnext"
    cursor = locate(text, 0, 14, "utf-16")
    edited = with_selection(cursor, 12, 14, "name")
    assert edited.prefix == "value = obj.name" and edited.line_suffix == ""


def test_prefix_within_budget_is_untouched() -> None:
    assert fit_prefix("a b\nc d", word_spans, 100) == "a b\nc d"


def test_prefix_is_cut_at_a_line_start() -> None:
    prefix = "".join(f"line{i} = {i}\n" for i in range(100)) + "x = "
    kept = fit_prefix(prefix, word_spans, 40)
    assert prefix.endswith(kept) and len(word_spans(kept)) <= 40
    assert prefix[len(prefix) - len(kept) - 1] == "\n"  # starts right after a line break
    assert len(word_spans(kept)) > 40 - 8  # and drops less than one line too many


def test_a_single_overlong_line_is_cut_inside() -> None:
    prefix = "word " * 1000
    kept = fit_prefix(prefix, word_spans, 30)
    assert prefix.endswith(kept) and 0 < len(word_spans(kept)) <= 30


def test_huge_prefix_is_only_tokenized_near_the_cursor() -> None:
    seen: list[int] = []

    def spans(text: str) -> list[tuple[int, int]]:
        seen.append(len(text))
        return word_spans(text)

    prefix = "abc = 1\n" * 700_000  # ~5 MB
    kept = fit_prefix(prefix, spans, 64)
    assert kept.startswith("abc") and len(word_spans(kept)) <= 64
    assert max(seen) < 64 * 20


def test_line_edits_replace_the_typed_line_in_client_units() -> None:
    text = "s = '😀' + na\n"
    cursor = locate(text, 0, 13, "utf-16")
    [edit] = line_edits(["me"], cursor, 0, cursor.line_prefix, "utf-16")
    assert (edit.line, edit.end_character) == (0, 13)
    assert edit.new_text == "s = '😀' + name" and edit.draft == "me"
    [edit8] = line_edits(["me"], locate(text, 0, 15, "utf-8"), 0, cursor.line_prefix, "utf-8")
    assert edit8.end_character == 15


def test_typing_into_a_shown_draft_follows_it() -> None:
    shown = Shown.of("x = foo", ")", ["bar(1, 2", "baz", "bar(3"])
    assert shown.follow("x = foob", ")") == ["ar(1, 2", "az", "ar(3"]
    assert shown.follow("x = fooba", ")") == ["r(1, 2", "z", "r(3"]
    assert shown.follow("x = foobar(1", ")") == [", 2"]
    assert shown.follow("x = foobaz", ")") == []  # the draft is complete: nothing left to show
    assert shown.follow("x = foobx", ")") == []  # typed something else
    assert shown.follow("x = foo", ")") == ["bar(1, 2", "baz", "bar(3"]  # nothing typed: the same drafts
    assert shown.follow("x = foob", "") == []  # the rest of the line changed
    assert shown.follow("y = foob", ")") == []  # an edit before the cursor
    assert shown.follow("x = foo\nb", ")") == []


# -- the context beyond the prefix: the suffix window and the snippets kept per region -----------


OTHER_FILE = "".join(f"def helper_{i}(widget_count):\n    return widget_count + {i}\n\n" for i in range(30))


def test_the_suffix_is_cut_at_a_line_end_within_its_budget() -> None:
    suffix = ")\nfoo = bar(baz)\nqux = 1\n"
    assert fit_suffix(suffix, word_spans, 100) == suffix
    assert fit_suffix(suffix, word_spans, 11) == ")\nfoo = bar(baz)\n"
    assert fit_suffix("abc def ghi", word_spans, 2) == "abc "  # one long line: cut inside it
    assert fit_suffix(suffix, word_spans, 0) == ""
    document = "x = 1\n" * 100_000 + "y = f(" + suffix  # only the head after `start` is read
    assert fit_suffix(document, word_spans, 11, start=len(document) - len(suffix)) == ")\nfoo = bar(baz)\n"


def test_relative_paths_come_from_the_deepest_workspace_folder(tmp_path) -> None:
    inner = tmp_path / "pkg"
    uri = (inner / "sub" / "a.py").as_uri()
    assert relative_path(uri, [tmp_path, inner]) == "sub/a.py"
    assert relative_path(uri, []) == "a.py"
    assert relative_path("untitled:Untitled-1", []) == "Untitled-1"


def gather(gatherer: ContextGatherer, text: str, line: int, neighbours, **settings):
    cursor = Cursor(text, len(text))
    raw = {"context": {"snippets": True, "sources": ["open"], **settings}, "promptFormat": "file_sep"}
    return gatherer.gather("file:///w/main.py", cursor, line, parse_settings(raw)[0], spans=word_spans,
                           count_tokens=lambda t: len(word_spans(t)), roots=[Path("/w")], neighbours=neighbours)


def test_snippets_stay_while_typing_in_a_region_and_are_chosen_again_elsewhere() -> None:
    """Kept snippets keep the prompt's stable part, and the KV cache, across keystrokes."""
    gatherer = ContextGatherer()
    others = [("file:///w/helpers.py", OTHER_FILE)]
    first = gather(gatherer, "total = widget_count + helper_3(", 40, others)
    assert first.filename == "main.py"
    assert first.snippets and all(path == "helpers.py" for path, _ in first.snippets)
    assert sum(len(word_spans(code)) for _, code in first.snippets) <= 256
    edited = [("file:///w/helpers.py", "def unrelated():\n    pass\n")]
    assert gather(gatherer, "total = widget_count + helper_3(w", 41, edited).snippets == first.snippets
    opened = [*edited, ("file:///w/totals.py", "def total_of(widget_count, helper_3):\n    return total\n")]
    assert [p for p, _ in gather(gatherer, "total = widget_count + helper_3(wi", 42, opened).snippets] == ["totals.py"]
    moved = gather(gatherer, "total = widget_count + helper_3(", 40 + 200, edited)
    assert moved.snippets == ()  # another region: chosen again, from what the files hold now


def test_snippets_off_send_no_path_and_no_snippets() -> None:
    sent = gather(ContextGatherer(), "x = helper_1(", 3, [("file:///w/helpers.py", OTHER_FILE)], snippets=False)
    assert sent.snippets == () and sent.filename is None
