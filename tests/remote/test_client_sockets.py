"""A connection that fails leaves no socket open behind it (each one did: a ResourceWarning when collected)."""

from __future__ import annotations

import gc
import socket
import warnings
from pathlib import Path

import pytest

from spd_lsp.address import Address
from spd_lsp.remote.client import Connection, EngineGone


def _leaks(connect) -> list[warnings.WarningMessage]:
    gc.collect()  # what earlier tests left for the collector is collected before, not counted here
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        for _ in range(3):
            with pytest.raises(EngineGone):
                connect()
        gc.collect()
    return [w for w in caught if issubclass(w.category, ResourceWarning)]


def test_a_failed_unix_connect_closes_its_socket(tmp_path: Path) -> None:
    assert not _leaks(lambda: Connection(Address("unix", path=str(tmp_path / "no-engine.sock"))))


def test_a_refused_tcp_connect_closes_its_socket() -> None:
    with socket.socket() as bound:  # bound, not listening: refused at once
        bound.bind(("127.0.0.1", 0))
        port = bound.getsockname()[1]
        assert not _leaks(lambda: Connection(Address("tcp", host="127.0.0.1", port=port)))


def test_an_engine_that_hangs_up_before_hello_leaves_no_socket(tmp_path: Path) -> None:
    path = tmp_path / "hangs-up.sock"
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(path))
        server.listen(8)

        def connect() -> None:
            try:
                Connection(Address("unix", path=str(path)), timeout=0.2)
            finally:
                while True:  # hang up on it
                    server.settimeout(0.01)
                    try:
                        server.accept()[0].close()
                    except OSError:
                        break

        assert not _leaks(connect)
