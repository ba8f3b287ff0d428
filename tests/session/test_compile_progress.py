"""The decode step's background compile is shown as progress, ended with its seconds (the first start's minutes)."""

from __future__ import annotations

import threading
import time
from typing import Any

from spd_lsp.api import Loaded
from spd_lsp.session.compile_progress import TITLE, watch_compile
from spd_lsp.session.session import LOADING_TITLE, Session
from spd_lsp.settings import Settings, parse_settings
from tests.session.test_server_session import FakeEngine


class ProgressClient:
    """Records every progress; `ended` is set when one titled `watched` ends."""

    def __init__(self, watched: str = TITLE) -> None:
        self.log: list[tuple[str, str]] = []
        self.ended = threading.Event()
        self.watched = watched

    def show(self, kind: str, text: str) -> None:
        self.log.append(("show", text))

    def progress(self, title: str) -> Any:
        self.log.append(("begin", title))
        client = self

        class Progress:
            def report(self, message: str, percentage: int | None = None) -> None:
                client.log.append(("report", message))

            def end(self, message: str) -> None:
                client.log.append(("end", message))
                if title == client.watched:
                    client.ended.set()

        return Progress()


def compiling_info() -> dict[str, Any]:
    return {"name": "fake", "fastPath": True, "compiled": False, "compileSeconds": None, "compileState": "background",
            "compileReason": "compiling in the background: 1 row, 256 positions"}


def test_a_loaded_model_compiling_in_the_background_shows_progress_until_compiled() -> None:
    info = compiling_info()
    client = ProgressClient()
    session = Session(client, loader=lambda settings: Loaded(FakeEngine(["a"]), info, "cpu"))
    session.configure(Settings(ngrams=parse_settings({"ngrams": {"enabled": False}})[0].ngrams), roots=[]).future.result(5)
    deadline = time.monotonic() + 5
    while ("report", info["compileReason"]) not in client.log and time.monotonic() < deadline:
        time.sleep(0.01)
    assert client.log[:4] == [("begin", LOADING_TITLE), ("end", "loaded fake on ? in 0.0 s"), ("begin", TITLE),
                              ("report", "compiling in the background: 1 row, 256 positions")]
    assert not client.ended.is_set()
    info.update(compiled=True, compileState="compiled", compileReason=None, compileSeconds=73.4)  # as the compile
    # thread reports it
    assert client.ended.wait(5)
    assert client.log[-1] == ("end", "compiled in 73.4 s: decode steps run it now")
    session.close()


def test_a_failed_compile_ends_the_progress_with_its_reason_and_a_replaced_model_stops_it() -> None:
    info = compiling_info()
    client = ProgressClient()
    loaded = Loaded(FakeEngine(["a"]), info, "cpu")
    watch_compile(client, loaded, current=lambda: True, poll_s=0.01)
    info.update(compileState="eager", compileReason="compile failed: BackendCompilerFailed: no compiler")
    assert client.ended.wait(5)
    assert client.log[-1] == ("end", "decode steps run eager: compile failed: BackendCompilerFailed: no compiler")
    other = ProgressClient()
    still = [True]
    watch_compile(other, Loaded(FakeEngine(["a"]), compiling_info(), "cpu"), current=lambda: still[0], poll_s=0.01)
    still[0] = False  # the session loaded another model
    assert other.ended.wait(5) and other.log[-1][0] == "end" and "stopped watching" in other.log[-1][1]


def test_nothing_is_shown_where_nothing_compiles_in_the_background() -> None:
    client = ProgressClient()
    for info in ({"name": "fake"}, {"compiled": True, "compileReason": None, "compileSeconds": 2.0},
                 {"compiled": False, "compileState": "eager", "compileReason": "compile off"},
                 {"fastPath": False, "compiled": False, "compileReason": "transformers' forward: int8"}):
        assert watch_compile(client, Loaded(FakeEngine(["a"]), info, "cpu"), current=lambda: True) is None
    assert client.log == []


def test_a_step_served_without_a_graph_ends_the_progress_or_shows_none() -> None:
    """The fused step serves plain steps: nothing compiles, so the progress ends (it ran for ever) or never begins."""
    info = compiling_info()
    client = ProgressClient()
    watch_compile(client, Loaded(FakeEngine(["a"]), info, "cpu"), current=lambda: True, poll_s=0.01)
    info.update(compileState="otherwise", compileReason="the fused step serves plain steps of up to 8 rows")
    assert client.ended.wait(5)
    assert client.log[-1] == ("end", "nothing to compile: the fused step serves plain steps of up to 8 rows")
    served = {"compiled": False, "compileState": "otherwise", "compileReason": "the fused step serves plain steps"}
    assert watch_compile(ProgressClient(), Loaded(FakeEngine(["a"]), served, "cpu"), current=lambda: True) is None
