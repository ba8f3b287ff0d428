"""Two real `spd-lsp --stdio` front ends with `engine: "auto"` share ONE engine process
(the bundled model, loaded once) and answer inline completions through it."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from lsprotocol import types as lsp
from pytest_lsp import ClientServerConfig

from bench.isolation import isolated_env
from tests.code_samples import WALK_HEAD
from tests.engine_support import wait_gone
from tests.lsp.test_server_e2e import capabilities, end_of, inline, open_doc, status

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.asyncio(loop_scope="module")]
PROGRAM = WALK_HEAD + "            "


@pytest.fixture(scope="module")
def runtime() -> Path:
    root = Path(f"/tmp/spd-e2e-{os.getpid()}-{time.monotonic_ns()}")  # short: socket paths have 107 bytes
    root.mkdir(mode=0o700)
    yield root
    shutil.rmtree(root, ignore_errors=True)


async def _front_end(tmp: Path, runtime: Path, workspace: Path) -> Any:
    env = {**isolated_env(tmp), "XDG_RUNTIME_DIR": str(runtime)}
    env.pop("SPD_LSP_ENGINE_LOADER", None)
    client = await ClientServerConfig(
        server_command=[sys.executable, "-m", "spd_lsp.cli", "--stdio", "--clientProcessId=1"], server_env=env,
    ).start()
    await client.initialize_session(lsp.InitializeParams(
        capabilities=capabilities(), root_uri=workspace.as_uri(),
        workspace_folders=[lsp.WorkspaceFolder(uri=workspace.as_uri(), name="ws")],
        initialization_options={"k": 3, "maxTokens": 10, "engine": "auto"},
    ))
    return client


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def clients(tmp_path_factory: pytest.TempPathFactory, runtime: Path) -> Any:
    workspace = tmp_path_factory.mktemp("ws")
    (workspace / "widgets.py").write_text("def frobnicate_widget(count):\n    return count * 42\n")
    front_ends = [await _front_end(tmp_path_factory.mktemp(f"fe{i}"), runtime, workspace) for i in range(2)]
    yield front_ends
    pids = set()
    for client in front_ends:
        model = (await status(client))["model"] or {}
        pids.add(model.get("pid"))
        await client.shutdown_session()
        await client.stop()
    for pid in pids - {None}:
        os.kill(pid, signal.SIGTERM)
        wait_gone(pid)


async def test_two_front_ends_complete_through_one_engine(clients: list[Any]) -> None:
    uri = "file:///virtual/walk.py"
    answers = []
    for client in clients:
        open_doc(client, uri, PROGRAM)
        answers.append(await inline(client, uri, end_of(PROGRAM)))
    typed = PROGRAM.split("\n")[-1]
    for items in answers:
        assert len(items) == 3 and all(i.insert_text.startswith(typed) and i.insert_text.strip() for i in items)
    models = [(await status(client))["model"] for client in clients]
    assert models[0]["engine"] == "auto" and models[0]["pid"] == models[1]["pid"]  # one engine
    assert all(model["pid"] != os.getpid() for model in models)


def engine_status(runtime: Path) -> dict[str, Any]:
    """The shared engine's own status (its batcher's counters), asked over its socket."""
    from spd_lsp.address import Address
    from spd_lsp.remote.client import Connection

    (sock,) = (runtime / "spd-lsp").glob("engine-*.sock")
    connection = Connection(Address("unix", path=str(sock)))
    try:
        return connection.request({"op": "status"})[1].result(timeout=30)["status"]["scheduler"]
    finally:
        connection.close()


async def test_two_typing_front_ends_share_batch_forwards(clients: list[Any], runtime: Path) -> None:
    """Both editors type at once: their requests (each with its suffix, path and language, as a real
    front end sends them) decode as rows of the same batch, none alone."""
    before = engine_status(runtime)
    lines = ["            total", "            if not", "            yield", "            for child"]
    for step, line in enumerate(lines):
        texts = [WALK_HEAD + line + "\n\nprint(walk)\n", WALK_HEAD + line + "  # editor two\n"]
        uris = [f"file:///virtual/typing{step}-{i}.py" for i in range(len(clients))]
        for client, uri, text in zip(clients, uris, texts):
            open_doc(client, uri, text)
        at = end_of(WALK_HEAD + line)
        answers = await asyncio.gather(*(inline(client, uri, at) for client, uri in zip(clients, uris)))
        assert all(answers)
    after = engine_status(runtime)
    assert after["alone"] == before["alone"]  # every request a batch member
    assert after["batched"] - before["batched"] >= 2 * len(lines)
    assert after["maxBatched"] >= 2  # two requests in one batch: their steps shared one forward
