"""`multiline: "auto"` through the session: each request decides whether its drafts may span lines, the
engine gets the options to match, and a multi-line draft reaches the editor cut at its block's end."""

from __future__ import annotations

from typing import Any

from spd_lsp.api import DecodeRequest, DecodeResult
from spd_lsp.settings import parse_settings
from tests.session.test_server_session import FakeEngine, make_session


class RecordingEngine(FakeEngine):
    def __init__(self, drafts: list[str]) -> None:
        super().__init__(drafts, steps=1, step_s=0.0)
        self.options: list[Any] = []

    def complete(self, request: DecodeRequest, cancelled: Any = None) -> DecodeResult:
        self.options.append(request.options)
        return super().complete(request, cancelled)


BODY = "total = sum(items)\n    return total\n\ndef other():\n    pass"


def test_auto_spans_lines_in_an_empty_block_only_with_its_own_token_budget() -> None:
    engine = RecordingEngine([BODY, "total = 0", "return items"])
    session, _ = make_session(engine)
    try:
        session.configure(parse_settings({"multiline": "auto", "maxTokens": 8, "multilineMaxTokens": 40,
                                          "ngrams": {"enabled": False}})[0], roots=[]).future.result(5)
        text = "def add(items):\n    \n\nprint(add([1]))\n"
        edits = session.complete("file:///a.py", text, 1, 4, "utf-16").future.result(5).edits
        assert (engine.options[-1].stop_at_newline, engine.options[-1].max_tokens) == (False, 40)
        assert [e.draft for e in edits] == ["total = sum(items)\n    return total", "total = 0", "return items"]
        assert edits[0].new_text == "    total = sum(items)\n    return total"  # the line from its start, as ever
        elsewhere = "def add(items):\n    total = "
        session.complete("file:///b.py", elsewhere, 1, 12, "utf-16").future.result(5)
        assert (engine.options[-1].stop_at_newline, engine.options[-1].max_tokens) == (True, 8)
    finally:
        session.close()


def test_false_stays_on_one_line_even_in_an_empty_block() -> None:
    engine = RecordingEngine([BODY])
    session, _ = make_session(engine)
    try:
        session.configure(parse_settings({"multiline": False, "ngrams": {"enabled": False}})[0], roots=[]).future.result(5)
        edits = session.complete("file:///a.py", "def add(items):\n    \n", 1, 4, "utf-16").future.result(5).edits
        assert engine.options[-1].stop_at_newline is True and [e.draft for e in edits] == ["total = sum(items)"]
    finally:
        session.close()
