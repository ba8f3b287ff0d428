"""`python -m tests.slow_close_server`: the real server over stdio whose session takes 2 s to close
(a watcher join, a store close behind a running index), to see what `shutdown` blocks."""

from __future__ import annotations

import time

from spd_lsp.lsp.handlers import build_server
from spd_lsp.api import Loaded
from spd_lsp.session.session import Session
from tests.failing_server import FailingEngine

CLOSE_S = 2.0


def slow_close(session: Session, original=Session.close) -> None:
    time.sleep(CLOSE_S)
    original(session)


if __name__ == "__main__":
    Session.close = slow_close  # type: ignore[method-assign]
    build_server(lambda settings: Loaded(FailingEngine(), {"name": "slow-close"}, "cpu")).start_io()
