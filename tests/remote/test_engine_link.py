"""`spd.status` tells a dead shared engine from a live one: a real `spd-lsp engine` (tiny
model) on a Unix socket, a real session over it, then the engine killed."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from spd_lsp.api import DecodeRequest
from spd_lsp.commands.engine_setting import load_engine
from spd_lsp.session.session import Session
from spd_lsp.settings import parse_settings
from tests.engine_support import engine_env, start_engine
from tests.session.test_server_session import RecordingClient

pytestmark = [pytest.mark.timeout(120)]
TEXT = "def add(a, b):\n    return"


@pytest.fixture
def runtime() -> Path:
    root = Path(f"/tmp/spd-link-{os.getpid()}-{time.monotonic_ns()}")  # short: socket paths have 107 bytes
    root.mkdir(mode=0o700)
    yield root
    shutil.rmtree(root, ignore_errors=True)


def test_status_reports_the_engine_connected_then_not_connected_once_it_died(runtime: Path) -> None:
    socket = runtime / "engine.sock"
    process, _ = start_engine(["--socket", str(socket)], engine_env(runtime))
    session = Session(RecordingClient(), load_engine, anticipate=False)
    try:
        settings = parse_settings({"engine": f"unix:{socket}", "ngrams": {"enabled": False}, "k": 2, "maxTokens": 3})[0]
        session.configure(settings, roots=[]).future.result(60)
        assert session.complete("doc.py", TEXT, 1, 10, "utf-16").future.result(60).timings is not None
        link = session.status()["engine"]
        assert link == {"kind": "shared", "address": f"unix:{socket}", "pid": process.pid, "connected": True, "failures": 0}
        assert f"Engine:   shared (one model for every window), engine pid {process.pid}, unix:{socket} (connected)" in (
            session.status()["summary"])

        process.kill()
        process.wait()
        deadline = time.monotonic() + 10
        while session.status()["engine"]["connected"] and time.monotonic() < deadline:
            time.sleep(0.05)
        assert session.status()["engine"]["connected"] is False
        session.complete("doc.py", TEXT + " a", 1, 12, "utf-16").future.result(60)  # retried once, answered empty
        status = session.status()
        assert status["engine"]["failures"] == 1
        assert f"(NOT CONNECTED; 1 request(s) got no answer from it)" in status["summary"]
    finally:
        session.close()
        if process.poll() is None:
            process.kill()
            process.wait()


def _decoded(suggestions) -> bool:
    """Answered by a model (a request the engine could not take answers with no steps)."""
    return suggestions.timings is not None and suggestions.timings.steps > 0


def test_status_shows_the_engine_it_reconnected_to(runtime: Path) -> None:
    """Defect (issue 24, round 3): after the engine was replaced (killed, another started on its socket),
    `spd.status` kept the first engine's pid and info."""
    socket = runtime / "engine.sock"
    process, _ = start_engine(["--socket", str(socket)], engine_env(runtime))
    session = Session(RecordingClient(), load_engine, anticipate=False)
    second = None
    try:
        settings = parse_settings({"engine": f"unix:{socket}", "ngrams": {"enabled": False}, "k": 2, "maxTokens": 3})[0]
        session.configure(settings, roots=[]).future.result(60)
        assert _decoded(session.complete("doc.py", TEXT, 1, 10, "utf-16").future.result(60))
        assert session.status()["model"]["pid"] == process.pid
        process.kill()
        process.wait()
        socket.unlink(missing_ok=True)
        second, _ = start_engine(["--socket", str(socket)], engine_env(runtime))
        deadline, n = time.monotonic() + 60, 0
        while not _decoded(session.complete("doc.py", f"# {n}\n{TEXT}", 2, 10, "utf-16").future.result(60)):
            assert time.monotonic() < deadline
            time.sleep(0.2)
            n += 1
        status = session.status()
        assert status["model"]["pid"] == second.pid and status["engine"]["connected"] is True
    finally:
        session.close()
        for engine in (process, second):
            if engine is not None and engine.poll() is None:
                engine.kill()
                engine.wait()


def test_a_warm_up_prefills_in_the_engine_and_the_answer_carries_where_its_time_went(runtime: Path) -> None:
    """`RemoteEngine.warm` is the idle prefill in the shared engine (not a no-op): the next request at that place
    re-prefills a token or two; the answer's timings say the engine's queue, its whole time, and the round trip."""
    socket = runtime / "engine.sock"
    process, _ = start_engine(["--socket", str(socket)], engine_env(runtime))
    try:
        settings = parse_settings({"engine": f"unix:{socket}", "ngrams": {"enabled": False}, "k": 2, "maxTokens": 3})[0]
        loaded = load_engine(settings)
        engine = loaded.engine
        prefix = "\n".join([TEXT, "def sub(a, b):\n    return a - b", "class Point:\n    def __init__(self, x"])
        request = DecodeRequest(prefix, settings.decode_options())
        assert engine.warm(request) > 10
        result = engine.complete(DecodeRequest(prefix + ",", settings.decode_options()))
        timings = result.timings
        assert timings.prefill_tokens <= 3 < timings.reused_tokens
        assert 0.0 <= timings.queue_s <= timings.total_s <= timings.served_s <= timings.round_trip_s
        engine.close()
    finally:
        process.kill()
        process.wait()
