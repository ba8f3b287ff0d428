"""The server's side of issue 48 through the real `spd-lsp --stdio` with the bundled model: its pushed
status (`spd/didChangeStatus`, `$/progress` while loading), content exclusion, and the Copilot
language server's shown / partly accepted notifications counted by rank in `spd.status`."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import pytest
import pytest_asyncio
from lsprotocol import types as lsp
from pytest_lsp import ClientServerConfig, LanguageClient
from pytest_lsp.client import make_test_lsp_client

from bench.isolation import isolated_env
from tests.code_samples import WALK_HEAD
from tests.lsp.test_server_e2e import capabilities, end_of, inline, open_doc, status

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.asyncio(loop_scope="module")]

PROGRAM = WALK_HEAD + "            "
SECRET = "API_BASE = 'https://example.org'\nTIMEOUT = 3"


def recording_client() -> LanguageClient:
    client = make_test_lsp_client()
    client.statuses = []  # type: ignore[attr-defined]

    @client.feature("spd/didChangeStatus")
    def did_change_status(ls: LanguageClient, params: Any) -> None:
        ls.statuses.append(plain(params))  # type: ignore[attr-defined]

    return client


def plain(value: Any) -> Any:
    """pygls hands a custom notification's params over as named tuples; as JSON values."""
    if hasattr(value, "_asdict"):
        return {key: plain(item) for key, item in value._asdict().items()}
    return [plain(item) for item in value] if isinstance(value, list) else value


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def served(tmp_path_factory: pytest.TempPathFactory) -> Any:
    workspace = tmp_path_factory.mktemp("events")
    (workspace / "app.py").write_text("x = 1\n")
    log = workspace.parent / "server.log"
    config = ClientServerConfig(
        server_command=[sys.executable, "-m", "spd_lsp.cli", "--stdio", "--clientProcessId=1", "--log-file", str(log)],
        server_env=isolated_env(tmp_path_factory.mktemp("cache")), client_factory=recording_client,
    )
    client = await config.start()
    await client.initialize_session(
        lsp.InitializeParams(
            capabilities=capabilities(), root_uri=workspace.as_uri(),
            workspace_folders=[lsp.WorkspaceFolder(uri=workspace.as_uri(), name="ws")],
            initialization_options={"engine": "in-process", "k": 3, "maxTokens": 8, "ngrams": {"enabled": False}},
        )
    )
    yield client, workspace, log
    await client.shutdown_session()
    await client.stop()


async def until(check: Any, timeout_s: float = 300) -> None:
    async with asyncio.timeout(timeout_s):
        while not check():
            await asyncio.sleep(0.05)


async def test_status_is_pushed_loading_then_warming_up_then_ready_after_the_first_model_answer(served: Any) -> None:
    client, workspace, _ = served
    await until(lambda: any(s["state"] == "warming" for s in client.statuses))
    states = [s["state"] for s in client.statuses]
    assert states[:2] == ["loading", "warming"], states
    warming = client.statuses[1]
    assert warming["kind"] == "Normal" and warming["busy"] is True and warming["model"]["device"] == "cpu"
    # the load was also a work-done progress, begun and ended with the model's name and seconds
    loads = [values for values in client.progress_reports.values()
             if values and getattr(values[0], "title", "") == "spd-lsp: loading the model"]
    assert len(loads) == 1 and loads[0][-1].kind == "end" and loads[0][-1].message.startswith("loaded ")
    uri = (workspace / "walk.py").as_uri()
    open_doc(client, uri, PROGRAM)
    assert await inline(client, uri, end_of(PROGRAM))
    await until(lambda: client.statuses[-1]["state"] == "ready", 30)
    assert [s["state"] for s in client.statuses] == ["loading", "warming", "ready"]
    assert (await status(client))["state"]["state"] == "ready"


async def test_an_excluded_file_is_answered_empty_and_the_log_says_why_once(served: Any) -> None:
    client, workspace, log = served
    secret = (workspace / ".env.local").as_uri()
    open_doc(client, secret, SECRET)
    for _ in range(2):
        assert await inline(client, secret, end_of(SECRET)) == []
    menu = await client.text_document_completion_async(
        lsp.CompletionParams(text_document=lsp.TextDocumentIdentifier(uri=secret), position=end_of(SECRET)))
    assert list(menu.items) == []
    said = [line for line in log.read_text().splitlines() if "exclude pattern" in line]
    assert len(said) == 1 and ".env.local" in said[0] and "'.env.*'" in said[0], said
    assert (await status(client))["excluded"] == 3
    client.workspace_did_change_configuration(lsp.DidChangeConfigurationParams(
        settings={"spd": {"engine": "in-process", "k": 3, "maxTokens": 8, "ngrams": {"enabled": False}, "exclude": []}}))
    assert await inline(client, secret, end_of(SECRET)), "exclude [] completes every file"
    client.workspace_did_change_configuration(lsp.DidChangeConfigurationParams(
        settings={"spd": {"engine": "in-process", "k": 3, "maxTokens": 8, "ngrams": {"enabled": False}}}))


async def test_shown_and_partly_accepted_items_are_counted_once_by_rank(served: Any) -> None:
    client, workspace, _ = served
    uri = (workspace / "events.py").as_uri()
    text = PROGRAM.replace("            ", "        ")
    open_doc(client, uri, text)
    before = (await status(client))["drafts"]
    items = await inline(client, uri, end_of(text))
    assert len(items) >= 2
    for item in (items[0], items[0], items[1]):  # the first drawn twice (a redraw): counted once
        client.protocol.notify("textDocument/didShowCompletion", {"item": client.protocol._converter.unstructure(item)})
    client.protocol.notify("textDocument/didPartiallyAcceptCompletion",
                           {"item": client.protocol._converter.unstructure(items[1]), "acceptedLength": 3})
    client.protocol.notify("textDocument/didShowCompletion", {"item": {"insertText": "not ours"}})  # ignored
    client.protocol.notify("textDocument/didShowCompletion", {"bad": 1})  # ignored
    await client.workspace_execute_command_async(lsp.ExecuteCommandParams(
        command="spd.accept", arguments=items[1].command.arguments))
    after = (await status(client))["drafts"]

    def grew(name: str, rank: int) -> int:
        old = before.get(name) or []
        return after[name][rank] - (old[rank] if rank < len(old) else 0)

    assert [grew("shown", 0), grew("shown", 1)] == [1, 1]
    assert [grew("partlyAccepted", 0), grew("partlyAccepted", 1)] == [0, 1]
    assert [grew("accepted", 0), grew("accepted", 1)] == [0, 1]
    summary = (await status(client))["summary"]
    assert "accepted/shown by rank: #1 " in summary and "+1 partly" in summary, summary
