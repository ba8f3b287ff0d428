"""The multi-line study's harness (evaluation/edits.py, evaluation/multiline.py): the positions remove exactly
what the typist writes, and the typist counts keystrokes as the docstring says."""

from __future__ import annotations

import textwrap
from pathlib import Path

from evaluation.edits import block_edits, sample_edits
from evaluation.multiline import Typist, _accepts, _best, configurations, cost
from tests.session.test_server_session import FakeEngine

SOURCE = textwrap.dedent('''
    import os


    def total(values):
        """The sum."""
        result = 0
        for value in values:  # each one
            result += value
        return result


    class Box:
        def __init__(self, items):
            self.items = items
''').lstrip()


def test_each_position_is_the_file_with_the_written_code_removed(tmp_path: Path) -> None:
    path = tmp_path / "mod.py"
    path.write_text(SOURCE)
    edits = [e for kind in sample_edits([path], 100, seed=1).values() for e in kind]
    assert {e.kind for e in edits} == {"open_block", "empty_body", "line_start", "mid_line"}
    for edit in edits:
        assert edit.before + edit.target + edit.after == SOURCE, edit
        assert 0 < edit.horizon <= len(edit.target)
    blocks = list(block_edits(path, SOURCE))
    opened = [e for e in blocks if e.kind == "open_block"]
    assert sorted(e.before.splitlines()[-1].strip() for e in opened) == [
        "class Box:", "def __init__(self, items):", "def total(values):", "for value in values:  # each one"]
    [loop] = [e for e in opened if e.before.endswith("# each one")]
    assert loop.target == "\n        result += value" and loop.after.startswith("\n    return result")
    [body] = [e for e in blocks if e.kind == "empty_body" and e.before.endswith("def total(values):\n    ")]
    assert body.before.endswith("def total(values):\n    ") and body.target.startswith('"""The sum."""\n    result = 0')
    assert body.horizon == len('"""The sum."""\n    result = 0')  # its first two lines


def test_keystrokes_tab_accept_line_and_words() -> None:
    target = "\n    x = compute(a, b)\n    return x"
    assert [cost(target, i) for i in range(6)] == [1, 0, 0, 0, 0, 1]  # Enter; the indentation is the editor's
    assert list(_accepts("\n    x = compute(a, c)", target)) == [(1, 6), (2, 16), (3, 18)]  # words while they agree
    assert (1, len(target)) in list(_accepts(target, target))  # Tab
    assert (1, 23) in list(_accepts("\n    x = compute(a, b)\n    return y", target))  # the first line, with its break
    saved, spent, inserted = _best(["zzz", target], target)  # the second draft: one Alt+] and Tab
    assert (spent, inserted) == (2, len(target)) and saved == sum(cost(target, i) for i in range(len(target))) - 2
    assert _best(["q"], target) == (0, 0, 0)


def test_the_typist_writes_through_the_session_and_counts() -> None:
    settings = configurations(["single", "auto-40"])
    assert settings["single"].multiline is False and settings["auto-40"].multiline_max_tokens == 40
    edit = sample_edits_from("def total(values):\n    return sum(values)\n\n\nx = total([1])\n")
    typist = Typist(FakeEngine(["return sum(values)"], steps=1, step_s=0.0), settings["auto-40"])
    try:
        typed = typist.write(edit, "file:///study/t.py")
    finally:
        typist.close()
    assert (typed.keys, typed.keys_typing, typed.accepted, typed.requests, typed.multiline_requests) == (
        1, len("return sum(values)"), len("return sum(values)"), 1, 1)
    assert typed.first_chars == len("return sum(values)")


def sample_edits_from(source: str):  # type: ignore[no-untyped-def]
    path = Path(__file__).with_name("_multiline_sample.py")
    blocks = list(block_edits(path, source))
    return [e for e in blocks if e.kind == "empty_body"][0]


def test_sampling_is_seeded(tmp_path: Path) -> None:
    path = tmp_path / "mod.py"
    path.write_text(SOURCE)
    assert sample_edits([path], 2, seed=3) == sample_edits([path], 2, seed=3)
