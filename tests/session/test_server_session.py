"""The server's domain layer with a fake engine: latest-wins, cancellation, settings, errors."""

from __future__ import annotations

import re
import threading
import time
from concurrent.futures import CancelledError
from typing import Any

import pytest

from spd_lsp.settings import Settings, parse_settings
from spd_lsp.api import CancelCheck, Cancelled, DecodeRequest, DecodeResult, Draft, Loaded, Timings
from spd_lsp.worker import KeyedWorker
from spd_lsp.session.session import LOADING_TITLE, Selection, Session, Stats


class FakeTokenizer:
    def __call__(self, text: str, **_: Any) -> dict[str, list[tuple[int, int]]]:
        return {"offset_mapping": [m.span() for m in re.finditer(r"\w+|\W", text)]}

    def encode(self, text: str, **_: Any) -> list[int]:
        return [len(m.group()) for m in re.finditer(r"\w+|\W", text)]


class FakeEngine:
    """Drafts are fixed strings; each decode step takes `step_s` and honours cancellation."""

    def __init__(self, drafts: list[str], steps: int = 5, step_s: float = 0.02) -> None:
        self.tokenizer = FakeTokenizer()
        self.drafts, self.steps, self.step_s = drafts, steps, step_s
        self.prefixes: list[str] = []
        self.warmed: list[str] = []  # prefixes prefilled while idle
        self.finished = 0
        self.ngrams: Any = None

    def set_ngrams(self, ngrams: Any) -> None:
        self.ngrams = ngrams

    def complete(self, request: DecodeRequest, cancelled: CancelCheck | None = None) -> DecodeResult:
        self.prefixes.append(request.prefix)
        options = request.options
        for _ in range(self.steps):
            if cancelled and cancelled():
                raise Cancelled()
            time.sleep(self.step_s)
        self.finished += 1
        drafts = [Draft(text, [], -float(i)) for i, text in enumerate(self.drafts[: options.k])]
        return DecodeResult(drafts, Timings(total_s=self.steps * self.step_s), options.method)

    def warm(self, request: DecodeRequest, cancelled: CancelCheck | None = None) -> int:
        self.warmed.append(request.prefix)
        return 0

    def close(self) -> None:
        pass

    def link(self) -> dict[str, Any]:
        return {"address": "fake", "connected": True, "failures": 0}


class RecordingClient:
    def __init__(self) -> None:
        self.messages: list[tuple[str, str]] = []
        self.progresses: list[str] = []

    def show(self, kind: str, text: str) -> None:
        self.messages.append((kind, text))

    def progress(self, title: str) -> Any:
        assert title == LOADING_TITLE, "no workspace folders in these tests"
        self.progresses.append(title)
        return NoProgress()


class NoProgress:
    def report(self, message: str, percentage: int | None = None) -> None:
        pass

    def end(self, message: str) -> None:
        pass


def make_session(engine: FakeEngine, *, anticipate: bool = False) -> tuple[Session, RecordingClient]:
    client = RecordingClient()
    session = Session(client, loader=lambda settings: Loaded(engine, {"name": "fake"}, "cpu"), anticipate=anticipate)
    session.configure(
        Settings(ngrams=parse_settings({"ngrams": {"enabled": False}})[0].ngrams), roots=[]
    ).future.result(5)
    return session, client


@pytest.fixture
def engine() -> FakeEngine:
    return FakeEngine(["alpha()\nmore", "alpha()", "beta", "gamma"])


@pytest.fixture
def session(engine: FakeEngine) -> Any:
    session, _ = make_session(engine)
    yield session
    session.close()


TEXT = "first line\nvalue = ca"


def test_completion_cuts_dedups_and_places_edits(session: Session, engine: FakeEngine) -> None:
    result = session.complete("doc", TEXT, 1, 10, "utf-16").future.result(5)
    assert [e.draft for e in result.edits] == ["alpha()", "beta"]  # k=3, one duplicate after cutting
    assert all(e.line == 1 and e.end_character == 10 and e.new_text == "value = ca" + e.draft for e in result.edits)
    assert engine.prefixes == [TEXT]


def test_latest_request_per_document_wins(session: Session, engine: FakeEngine) -> None:
    jobs = [session.complete("doc", TEXT, 1, 10, "utf-16") for _ in range(5)]
    other = session.complete("other", TEXT, 1, 10, "utf-16")
    assert jobs[-1].future.result(5).edits and other.future.result(5).edits
    for job in jobs[:-1]:
        with pytest.raises((Cancelled, CancelledError)):
            job.future.result(5)
    assert engine.finished == 2  # the newest "doc" request and the "other" document


def test_cancel_stops_an_in_flight_decode(session: Session, engine: FakeEngine) -> None:
    engine.step_s = 0.2
    job = session.complete("doc", TEXT, 1, 10, "utf-16")
    while not engine.prefixes:
        time.sleep(0.01)
    started = time.perf_counter()
    session.close_document("doc")
    with pytest.raises(Cancelled):
        job.future.result(5)
    assert time.perf_counter() - started < 0.5 and engine.finished == 0


def test_settings_change_takes_effect(session: Session) -> None:
    session.configure(parse_settings({"k": 1, "ngrams": {"enabled": False}})[0])
    assert len(session.complete("doc", TEXT, 1, 10, "utf-16").future.result(5).edits) == 1


def test_nothing_sensible_gives_an_empty_answer(session: Session, engine: FakeEngine) -> None:
    assert session.complete("doc", "\n\n  ", 2, 2, "utf-16").future.result(5).edits == []
    assert session.complete("doc", TEXT, 7, 0, "utf-16").future.result(5).edits == []
    assert engine.prefixes == []


def test_selected_completion_item_extends_the_prefix(session: Session, engine: FakeEngine) -> None:
    selection = Selection(1, 8, 1, 10, "cache")
    [first, *_] = session.complete("doc", TEXT, 1, 10, "utf-16", selection).future.result(5).edits
    assert engine.prefixes == ["first line\nvalue = cache"]
    assert (first.end_character, first.new_text) == (10, "value = cachealpha()")


def test_a_missing_model_is_reported_once_and_answers_empty() -> None:
    client = RecordingClient()

    def fail(settings: Settings) -> Loaded:
        raise RuntimeError("model /nowhere.gguf not found")

    session = Session(client, loader=fail)
    try:
        for _ in range(2):
            session.configure(Settings(), roots=[]).future.result(5)
        assert session.complete("doc", TEXT, 1, 10, "utf-16").future.result(5).edits == []
        assert [kind for kind, _ in client.messages] == ["error"]
        assert "/nowhere.gguf" in client.messages[0][1]
        assert session.status()["model"] is None and "nowhere" in session.status()["error"]
        assert session.status()["state"]["state"] == "error" and "nowhere" in session.status()["state"]["message"]
    finally:
        session.close()


def test_scheduler_runs_one_job_at_a_time() -> None:
    scheduler = KeyedWorker()
    active, peak = [0], [0]
    lock = threading.Lock()

    def work(cancelled: CancelCheck) -> None:
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
        time.sleep(0.01)
        with lock:
            active[0] -= 1

    jobs = [scheduler.submit(i, work) for i in range(10)]
    for job in jobs:
        job.future.result(5)
    scheduler.close()
    assert peak[0] == 1
    assert scheduler.submit("late", work).future.cancelled()


def test_typing_into_a_draft_needs_no_decode(session: Session, engine: FakeEngine) -> None:
    session.complete("doc", TEXT, 1, 10, "utf-16").future.result(5)
    typed = session.complete("doc", TEXT + "al", 1, 12, "utf-16").future.result(5)
    assert [e.draft for e in typed.edits] == ["pha()"] and typed.timings is None
    assert typed.edits[0].new_text == "value = caalpha()" and typed.edits[0].end_character == 12
    assert len(engine.prefixes) == 1 and session.status()["typedThrough"] == 1
    session.complete("doc", TEXT + "x", 1, 11, "utf-16").future.result(5)
    assert len(engine.prefixes) == 2 and session.status()["last"]["source"] == "model"


def test_status_can_be_read_while_the_worker_records() -> None:
    stats = Stats()
    stop = threading.Event()

    def worker() -> None:
        while not stop.is_set():
            stats.record(0.01, Timings(prefill_s=0.001))

    stats.record(0.01, Timings(prefill_s=0.001))  # p50 exists before the first read, however the threads interleave
    thread = threading.Thread(target=worker)
    thread.start()
    try:
        for _ in range(300):  # each summary walks the full deque while the worker appends to it
            assert stats.summary()["latencyMs"]["total"]["p50"] is not None
    finally:
        stop.set()
        thread.join()
