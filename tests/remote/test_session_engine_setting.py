"""The session over a shared engine: changing the `engine` setting reloads, and the old
engine's connection is closed (an open one would keep the shared engine from idling out)."""

from __future__ import annotations

from spd_lsp.settings import parse_settings
from spd_lsp.api import Loaded
from spd_lsp.session.session import Session
from tests.session.test_server_session import FakeEngine, RecordingClient


class ClosableEngine(FakeEngine):
    def __init__(self) -> None:
        super().__init__(["x"])
        self.closed = False

    def close(self) -> None:
        self.closed = True


def test_a_new_engine_setting_closes_the_old_engine() -> None:
    engines: list[ClosableEngine] = []

    def loader(settings) -> Loaded:
        engines.append(ClosableEngine())
        return Loaded(engines[-1], {"engine": settings.engine}, "cpu")

    session = Session(RecordingClient(), loader=loader, anticipate=False)
    try:
        quiet = {"ngrams": {"enabled": False}}
        session.configure(parse_settings({**quiet, "engine": "auto"})[0], roots=[]).future.result(5)
        session.configure(parse_settings({**quiet, "engine": "auto", "k": 2})[0], roots=[]).future.result(5)
        assert len(engines) == 1  # k is no reason to reconnect
        session.configure(parse_settings({**quiet, "engine": "tcp://127.0.0.1:9"})[0], roots=[]).future.result(5)
        assert len(engines) == 2 and engines[0].closed and not engines[1].closed
        assert session.status()["model"] == {"engine": "tcp://127.0.0.1:9", "engineKind": "remote"}
    finally:
        session.close()
