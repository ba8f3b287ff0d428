"""The shared engine's `status` says what is true now."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from spd_lsp.address import parse
from spd_lsp.remote import protocol
from spd_lsp.remote.client import Connection
from tests.engine_support import engine_env
from tests.remote.test_engine_faults import TEXT, _unix_engine


def test_the_status_says_a_compile_that_finished_after_the_start(tmp_path: Path) -> None:
    """Defect (issue 46): the engine served a copy of its model's info taken at its start, so its status (and every
    hello) said "compiled": false for good, after the background compile had finished (the storm bench's samples)."""
    socket_path = Path(f"/tmp/spd-status-{os.getpid()}.sock")
    env = engine_env(tmp_path, SPD_LSP_ENGINE_LOADER="tests.engine_support:compiling_loaded")
    process = _unix_engine(socket_path, env, stdout=subprocess.DEVNULL, timeout=120)
    try:
        connection = Connection(parse(f"unix:{socket_path}"))
        _, future = connection.request({"op": protocol.STATUS})
        assert future.result(timeout=30)["status"]["model"]["compiled"] is False
        _, future = connection.request(protocol.complete_request(0, {"prefix": TEXT, "options": {"max_tokens": 3}}))
        assert future.result(timeout=60)["op"] == protocol.RESULT
        _, future = connection.request({"op": protocol.STATUS})
        assert future.result(timeout=30)["status"]["model"]["compiled"] is True
        connection.close()
    finally:
        process.kill()
        process.wait(30)
        socket_path.unlink(missing_ok=True)


def test_a_front_end_s_status_says_the_engine_as_it_is_now(tmp_path: Path) -> None:
    """Defect: a front end's `spd.status` showed the engine as its connection's hello found it, so a compile (or the
    fast plan) that finished later was never shown (`bench_first_start` waited on it for good)."""
    from spd_lsp.remote.client import INFO_MAX_AGE_S, RemoteEngine

    socket_path = Path(f"/tmp/spd-status-front-{os.getpid()}.sock")
    env = engine_env(tmp_path, SPD_LSP_ENGINE_LOADER="tests.engine_support:compiling_loaded")
    process = _unix_engine(socket_path, env, stdout=subprocess.DEVNULL, timeout=120)
    try:
        address = parse(f"unix:{socket_path}")
        connection = Connection(address)
        engine = RemoteEngine(lambda *, restart: Connection(address), tokenizer=None, local=True,
                              connection=connection)
        assert engine.link()["engineInfo"]["compiled"] is False
        _, future = connection.request(protocol.complete_request(0, {"prefix": TEXT, "options": {"max_tokens": 3}}))
        assert future.result(timeout=60)["op"] == protocol.RESULT
        time.sleep(INFO_MAX_AGE_S)  # asked again at most this often
        assert engine.link()["engineInfo"]["compiled"] is True
        connection.close()
        assert engine.link()["engineInfo"]["compiled"] is True  # gone: the last one known
    finally:
        process.kill()
        process.wait(30)
        socket_path.unlink(missing_ok=True)
