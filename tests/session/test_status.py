"""`spd.status` at a glance (issue 23, item 4): the engine's link, drafts offered and accepted
by rank, store sizes, the last request's phases, and the same as readable `summary` lines."""

from __future__ import annotations

from typing import Any

from spd_lsp.api import DecodeRequest, DecodeResult, Loaded, Timings
from spd_lsp.session.report import engine_link, summary
from spd_lsp.session.session import Session
from spd_lsp.settings import parse_settings
from tests.session.test_server_session import FakeEngine, RecordingClient, make_session

TEXT = "first line\nvalue = ca"


class TimedEngine(FakeEngine):
    """Drafts with every phase timed, as the local engine reports them."""

    def complete(self, request: DecodeRequest, cancelled: Any = None) -> DecodeResult:
        result = super().complete(request, cancelled)
        timings = Timings(prefill_s=0.012, model_s=0.034, ngram_s=0.005, verify_s=0.002, total_s=0.06, steps=7,
                          prefill_tokens=40)
        return DecodeResult(result.drafts, timings, result.method)


def test_drafts_offered_count_new_drafts_by_rank_and_accepts_count_the_reported_rank() -> None:
    session, _ = make_session(FakeEngine(["alpha()", "beta", "gamma"]))
    try:
        session.complete("doc", TEXT, 1, 10, "utf-16").future.result(5)  # 3 new drafts
        session.complete("doc", TEXT + "al", 1, 12, "utf-16").future.result(5)  # typed through: none new
        session.complete("doc", TEXT + "x", 1, 11, "utf-16").future.result(5)  # 3 new drafts
        session.accepted(0)
        session.accepted(2)
        session.accepted(None)  # a client that does not say which
        status = session.status()
        assert status["drafts"] == {"offered": [2, 2, 2], "shown": [0, 0, 0], "accepted": [1, 0, 1],
                                    "partlyAccepted": [0, 0, 0]}
        assert status["accepted"] == 3 and status["typedThrough"] == 1
        assert "Drafts:   accepted/offered by rank: #1 1/2 (50%), #2 0/2 (0%), #3 1/2 (50%)" in status["summary"]
    finally:
        session.close()


def test_summary_reads_model_engine_last_request_and_counts_as_plain_lines() -> None:
    engine = TimedEngine(["alpha()", "beta"])
    session = Session(RecordingClient(), anticipate=False, loader=lambda settings: Loaded(
        engine, {"name": "tiny", "device": "cpu", "dtype": "float32", "compiled": False,
                 "compileReason": "torch.compile is off on CPU"}, "cpu"))
    try:
        session.configure(parse_settings({"engine": "in-process", "ngrams": {"enabled": False}})[0], roots=[]).future.result(5)
        session.complete("doc", TEXT, 1, 10, "utf-16").future.result(5)
        status = session.status()
        assert status["engine"] == {"kind": "in-process", "address": None, "pid": None, "connected": None,
                                    "failures": 0}
        lines = status["summary"].splitlines()
        assert lines[0] == "Model:    tiny on cpu, float32, eager (torch.compile is off on CPU)"
        assert lines[1] == "Engine:   in-process (the model runs in this server)"
        assert lines[2] == "Store:    none (no workspace folder, or n-grams off)"
        assert lines[3].startswith("Last:     ") and lines[3].endswith(
            ": prefill 12 ms (40 tokens), 7 steps 34 ms, n-grams 5 ms, verify 2 ms")
        assert lines[4].startswith("Latency:  p50 ")
        assert lines[6] == "Requests: 1 (0 answered, 0 cancelled, 0 typed through, 0 failed)"  # `answered`: the LSP layer's
        assert not any(mark in status["summary"] for mark in "{}[]"), "no raw tables"
        session.complete("doc", TEXT + "al", 1, 12, "utf-16").future.result(5)  # typed through
        typed = session.status()
        assert typed["last"]["source"] == "typedThrough" and typed["lastDecoded"] == status["last"]
        assert typed["summary"].splitlines()[3] == lines[3] + " (newer answers: typed through, no model call)"
    finally:
        session.close()


def test_summary_before_any_model_and_after_a_failed_load() -> None:
    assert summary({"model": None, "error": None}).splitlines()[0] == "Model:    not loaded yet"
    failed = summary({"model": None, "error": "spd-lsp: the model could not be loaded: no file /x.gguf"})
    assert failed.splitlines()[0] == "Model:    not loaded: spd-lsp: the model could not be loaded: no file /x.gguf"
    assert "Last:     no request yet" in failed and "Drafts:   none offered yet" in failed
    compiled = summary({"model": {"name": "m", "device": "cuda:0", "dtype": "bfloat16", "compiled": True}})
    assert compiled.splitlines()[0] == "Model:    m on cuda:0, bfloat16, compiled"


def test_store_sizes_per_folder() -> None:
    text = summary({"stores": [
        {"root": "/w/a", "files": 12, "tokens": 34567, "ngrams": 120000, "bytes": 3 * 1024 * 1024, "indexing": True,
         "watching": True},
        {"root": "/w/b", "files": 0, "tokens": 0, "ngrams": 0, "bytes": 512, "indexing": False, "watching": False},
    ]})
    assert "Store:    /w/a: 12 files, 34,567 tokens, 120,000 n-grams, 3.0 MiB (indexing, watching)" in text
    assert "Store:    /w/b: 0 files, 0 tokens, 0 n-grams, 512 bytes" in text


class LinkedEngine(FakeEngine):
    def __init__(self, link: dict[str, Any]) -> None:
        super().__init__(["x"])
        self._link = link

    def link(self) -> dict[str, Any]:
        return self._link


def test_engine_kind_address_and_a_dead_connection() -> None:
    alive = engine_link("unix:/run/e.sock", LinkedEngine({"address": "unix:/run/e.sock", "connected": True, "failures": 0,
                                                          "engineInfo": {"pid": 4242}}))
    assert alive == {"kind": "shared", "address": "unix:/run/e.sock", "pid": 4242, "connected": True, "failures": 0}
    assert summary({"engine": alive}).splitlines()[1] == (
        "Engine:   shared (one model for every window), engine pid 4242, unix:/run/e.sock (connected)")
    dead = engine_link("auto", LinkedEngine({"address": "unix:/run/u/spd.sock", "connected": False, "failures": 2}))
    assert dead["kind"] == "shared" and dead["connected"] is False
    assert summary({"engine": dead}).splitlines()[1] == (
        "Engine:   shared (one model for every window), unix:/run/u/spd.sock (NOT CONNECTED; 2 request(s) got no "
        "answer from it)")
    remote = engine_link("tls://gpu.example:7000", None)  # not loaded (the connection failed)
    assert remote == {"kind": "remote", "address": "tls://gpu.example:7000", "pid": None, "connected": None,
                      "failures": 0}


def test_shown_and_partly_accepted_count_each_offered_draft_once_by_its_offered_rank() -> None:
    """`didShowCompletion` of the same draft (redrawn, typed through) counts once; a draft keeps the rank it was
    offered at while typing drops the drafts above it."""
    session, _ = make_session(FakeEngine(["alpha()", "beta", "altitude"]))
    try:
        first = session.complete("doc", TEXT, 1, 10, "utf-16").future.result(5).edits
        assert [(e.draft, e.rank) for e in first] == [("alpha()", 0), ("beta", 1), ("altitude", 2)]
        offer = first[0].offer
        typed = session.complete("doc", TEXT + "alt", 1, 13, "utf-16").future.result(5).edits  # typed through
        assert [(e.draft, e.rank, e.offer) for e in typed] == [("itude", 2, offer)]
        session.shown(offer, 0)
        session.shown(offer, 0)  # drawn again
        session.shown(offer, 2)
        session.partly_accepted(offer, 2)
        session.partly_accepted(offer, 2)  # the next word of the same draft
        again = session.complete("doc", TEXT + "x", 1, 11, "utf-16").future.result(5).edits  # a new offer
        assert again[0].offer != offer
        session.shown(again[0].offer, 0)
        session.accepted(2)
        status = session.status()
        assert status["drafts"] == {"offered": [2, 2, 2], "shown": [2, 0, 1], "accepted": [0, 0, 1],
                                    "partlyAccepted": [0, 0, 1]}
        assert ("Drafts:   accepted/shown by rank: #1 0/2 (0%), #2 0/0, #3 1/1 (100%) +1 partly; offered 2, 2, 2"
                in status["summary"])
    finally:
        session.close()


def test_the_pushed_state_goes_loading_warming_ready_and_error_on_a_failed_load() -> None:
    pushed: list[dict[str, Any]] = []
    engine = FakeEngine(["alpha()"])
    session = Session(RecordingClient(), anticipate=False, on_status=pushed.append,
                      loader=lambda settings: Loaded(engine, {"name": "tiny", "device": "cpu"}, "cpu"))
    try:
        session.configure(parse_settings({"ngrams": {"enabled": False}})[0], roots=[]).future.result(5)
        assert [p["state"] for p in pushed] == ["loading", "warming"]
        assert pushed[1]["model"] == {"name": "tiny", "device": "cpu", "engineKind": "in-process"} and pushed[1]["busy"] is True
        assert session.status()["summary"].splitlines()[-1] == "State:    warming up (the first completion prefills the prompt)"
        session.complete("doc", TEXT, 1, 10, "utf-16").future.result(5)
        session.complete("doc", TEXT + "x", 1, 11, "utf-16").future.result(5)
        assert [p["state"] for p in pushed] == ["loading", "warming", "ready"]  # once
        assert pushed[-1] == {"state": "ready", "message": "ready", "kind": "Normal", "busy": False,
                              "model": {"name": "tiny", "device": "cpu", "engineKind": "in-process"}}
    finally:
        session.close()
    pushed.clear()

    def fail(settings: Any) -> Loaded:
        raise RuntimeError("no file /x.gguf")

    session = Session(RecordingClient(), loader=fail, on_status=pushed.append)
    try:
        session.configure(parse_settings({"ngrams": {"enabled": False}})[0], roots=[]).future.result(5)
        assert [(p["state"], p["kind"]) for p in pushed] == [("loading", "Normal"), ("error", "Error")]
        assert "/x.gguf" in pushed[-1]["message"]
    finally:
        session.close()
