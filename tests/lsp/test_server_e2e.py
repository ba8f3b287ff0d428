"""`spd-lsp --stdio` in a subprocess with the real bundled model, driven by an LSP client."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from lsprotocol import types as lsp
from pygls.exceptions import JsonRpcRequestCancelled
from pytest_lsp import ClientServerConfig, LanguageClient

from bench.isolation import isolated_env
from spd_lsp.settings import CPU_PREFIX_TOKENS
from tests.code_samples import WALK_HEAD

pytestmark = [pytest.mark.e2e, pytest.mark.asyncio(loop_scope="module")]

ROOT = Path(__file__).resolve().parents[2]
PROGRAM = WALK_HEAD + "            "
WORKSPACE_FILE = "def frobnicate_widget(count):\n    return count * 42\n"


def server_config(tmp: Path, *extra: str) -> ClientServerConfig:
    return ClientServerConfig(
        server_command=[sys.executable, "-m", "spd_lsp.cli", "--stdio", "--clientProcessId=1", *extra],
        server_env=isolated_env(tmp),
    )


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("workspace")
    (root / "widgets.py").write_text(WORKSPACE_FILE)
    (root / "latin1.txt").write_bytes("caf\xe9 cr\xe8me\n".encode("latin-1"))
    return root


def capabilities() -> lsp.ClientCapabilities:
    return lsp.ClientCapabilities(
        window=lsp.WindowClientCapabilities(work_done_progress=True),
        general=lsp.GeneralClientCapabilities(position_encodings=[lsp.PositionEncodingKind.Utf16]),
    )


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def client(workspace: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:
    lsp_client = await server_config(tmp_path_factory.mktemp("cache")).start()
    lsp_client.initialize_result = await lsp_client.initialize_session(
        lsp.InitializeParams(
            capabilities=capabilities(),
            root_uri=workspace.as_uri(),
            workspace_folders=[lsp.WorkspaceFolder(uri=workspace.as_uri(), name="ws")],
            initialization_options={"engine": "in-process", "k": 3, "maxTokens": 10},
        )
    )
    yield lsp_client
    await lsp_client.shutdown_session()
    await lsp_client.stop()


def open_doc(client: LanguageClient, uri: str, text: str, version: int = 1) -> None:
    client.text_document_did_open(
        lsp.DidOpenTextDocumentParams(lsp.TextDocumentItem(uri=uri, language_id="python", version=version, text=text))
    )


def end_of(text: str) -> lsp.Position:
    lines = text.split("\n")
    return lsp.Position(line=len(lines) - 1, character=len(lines[-1].encode("utf-16-le")) // 2)


def inline_params(uri: str, position: lsp.Position) -> lsp.InlineCompletionParams:
    return lsp.InlineCompletionParams(
        text_document=lsp.TextDocumentIdentifier(uri=uri),
        position=position,
        context=lsp.InlineCompletionContext(trigger_kind=lsp.InlineCompletionTriggerKind.Automatic),
    )


async def inline(client: LanguageClient, uri: str, position: lsp.Position) -> list[lsp.InlineCompletionItem]:
    result = await client.text_document_inline_completion_async(inline_params(uri, position))
    assert isinstance(result, lsp.InlineCompletionList)
    return list(result.items)


async def status(client: LanguageClient) -> dict[str, Any]:
    return await client.workspace_execute_command_async(lsp.ExecuteCommandParams(command="spd.status"))


async def configure(client: LanguageClient, settings: dict[str, Any]) -> None:
    """New settings, whole (the others back to their defaults) but the engine: these tests' server stays in process."""
    settings = {"engine": "in-process", **settings}
    client.workspace_did_change_configuration(lsp.DidChangeConfigurationParams(settings={"spd": settings}))


async def test_capabilities(client: LanguageClient) -> None:
    capabilities = client.initialize_result.capabilities
    assert capabilities.inline_completion_provider is not None
    assert capabilities.completion_provider is not None
    assert capabilities.position_encoding == lsp.PositionEncodingKind.Utf16
    sync = capabilities.text_document_sync
    assert sync.change == lsp.TextDocumentSyncKind.Incremental
    assert {"spd.accept", "spd.indexWorkspace", "spd.status"} <= set(capabilities.execute_command_provider.commands)


async def test_inline_completion_gives_k_distinct_items_with_line_ranges(client: LanguageClient) -> None:
    uri = "file:///virtual/walk.py"
    open_doc(client, uri, PROGRAM)
    position = end_of(PROGRAM)
    items = await inline(client, uri, position)
    typed = PROGRAM.split("\n")[-1]
    assert len(items) == 3 and len({item.insert_text for item in items}) == 3
    for item in items:
        assert item.range == lsp.Range(lsp.Position(position.line, 0), position)
        assert item.insert_text.startswith(typed) and item.insert_text.strip()
        assert "\n" not in item.insert_text
        assert item.command.command == "spd.accept"
    completion = await client.text_document_completion_async(
        lsp.CompletionParams(text_document=lsp.TextDocumentIdentifier(uri=uri), position=position)
    )
    # The menu twin: no textEdit; the word before the cursor (none here) plus the draft.
    assert [(c.text_edit, c.insert_text) for c in completion.items] == [(None, i.insert_text[len(typed) :]) for i in items]
    await client.workspace_execute_command_async(
        lsp.ExecuteCommandParams(command="spd.accept", arguments=items[0].command.arguments)
    )
    assert (await status(client))["accepted"] == 1


async def test_status_shows_model_engine_stores_last_request_and_drafts_by_rank(client: LanguageClient) -> None:
    uri = "file:///virtual/status.py"
    text = "def frobnicate(count):\n    total = "
    open_doc(client, uri, text)
    items = await inline(client, uri, end_of(text))
    assert len(items) >= 2
    before = await status(client)
    await client.workspace_execute_command_async(
        lsp.ExecuteCommandParams(command="spd.accept", arguments=items[1].command.arguments))
    after = await status(client)
    model = after["model"]
    assert model["device"] == "cpu" and model["dtype"] and model["name"]
    assert after["engine"] == {"kind": "in-process", "address": None, "pid": None, "connected": None, "failures": 0}
    [store] = after["stores"]
    assert store["files"] >= 1 and store["ngrams"] > 0 and store["bytes"] > 0
    last = after["last"]
    assert last["source"] == "model" and last["steps"] > 0 and last["totalMs"] >= last["prefillMs"] > 0
    offered, accepted = after["drafts"]["offered"], after["drafts"]["accepted"]
    assert len(offered) >= len(items) and all(n >= 1 for n in offered[: len(items)])
    assert accepted[1] == (before["drafts"]["accepted"] + [0, 0])[1] + 1, "the rank the accept command carries"
    lines = after["summary"].splitlines()
    assert [line.split(":", 1)[0] for line in lines] == ["Model", "Engine", "Store", "Last", "Latency", "Drafts",
                                                         "Requests", "State"]
    assert lines[0].startswith(f"Model:    {model['name']} on cpu, {model['dtype']}, ")
    assert lines[1] == "Engine:   in-process (the model runs in this server)"
    assert f"#2 {accepted[1]}/{offered[1]}" in lines[5]


async def test_unsaved_changes_are_what_is_completed(client: LanguageClient) -> None:
    uri = "file:///virtual/edit.py"
    open_doc(client, uri, "x = 1\n")
    client.text_document_did_change(
        lsp.DidChangeTextDocumentParams(
            text_document=lsp.VersionedTextDocumentIdentifier(uri=uri, version=2),
            content_changes=[
                lsp.TextDocumentContentChangePartial(
                    range=lsp.Range(lsp.Position(1, 0), lsp.Position(1, 0)),
                    text="totals_by_name = {}\ntotals_by_name = {}\ntotals_by_",
                )
            ],
        )
    )
    items = await inline(client, uri, lsp.Position(3, 10))
    assert items and all(i.insert_text.startswith("totals_by_") for i in items)
    assert any(i.insert_text.startswith("totals_by_name") for i in items)


async def test_settings_change_without_restart(client: LanguageClient) -> None:
    uri = "file:///virtual/walk.py"
    await configure(client, {"k": 1, "maxTokens": 3, "colour": "blue"})
    try:
        items = await inline(client, uri, end_of(PROGRAM))
        assert len(items) == 1
        assert (await status(client))["settings"] == {"k": 1, "maxTokens": 3, "decoding": "superposed"}
        assert any("colour" in m.message and m.type == lsp.MessageType.Warning for m in client.messages)
    finally:
        await configure(client, {"k": 3, "maxTokens": 10})


async def test_burst_latest_wins_and_every_request_is_answered(client: LanguageClient) -> None:
    uri = "file:///virtual/walk.py"
    before = await status(client)
    burst = [client.text_document_inline_completion_async(inline_params(uri, end_of(PROGRAM))) for _ in range(5)]
    results = await asyncio.gather(*burst, return_exceptions=True)
    *superseded, last = results
    assert isinstance(last, lsp.InlineCompletionList) and len(last.items) == 3
    assert all(isinstance(r, JsonRpcRequestCancelled) for r in superseded), results
    after = await status(client)
    assert after["latencyMs"] and after["answered"] - before["answered"] == 1
    assert after["cancelled"] - before["cancelled"] == 4


async def test_cancel_request_stops_work(client: LanguageClient) -> None:
    uri = "file:///virtual/walk.py"
    await configure(client, {"maxTokens": 200, "multiline": True})
    try:
        future = client.protocol.send_request(
            lsp.TEXT_DOCUMENT_INLINE_COMPLETION, inline_params(uri, end_of(PROGRAM)), msg_id="cancel-me"
        )
        await asyncio.sleep(0.3)
        client.protocol.notify(lsp.CANCEL_REQUEST, lsp.CancelParams(id="cancel-me"))
        started = time.perf_counter()
        with pytest.raises(JsonRpcRequestCancelled):
            await asyncio.wrap_future(future)
        assert time.perf_counter() - started < 4.0  # far less than 200 decode steps
    finally:
        await configure(client, {})


async def test_saved_file_updates_the_store(client: LanguageClient, workspace: Path) -> None:
    rows = await wait_for(client, lambda s: s["stores"] and not s["stores"][0]["indexing"])
    assert rows["stores"][0]["files"] >= 1 and rows["stores"][0]["root"] == str(workspace)
    tokens = rows["stores"][0]["tokens"]
    new_file = workspace / "saved.py"
    new_file.write_text("def another_function_with_a_long_name():\n    return [1, 2, 3, 4, 5, 6, 7, 8]\n" * 3)
    client.text_document_did_save(lsp.DidSaveTextDocumentParams(lsp.TextDocumentIdentifier(uri=new_file.as_uri())))
    await wait_for(client, lambda s: s["stores"][0]["tokens"] > tokens)
    [reports] = indexing_progress(client)
    assert isinstance(reports[0], lsp.WorkDoneProgressBegin) and isinstance(reports[-1], lsp.WorkDoneProgressEnd)
    started = await client.workspace_execute_command_async(lsp.ExecuteCommandParams(command="spd.indexWorkspace"))
    assert started == {"started": True}
    await wait_for(
        client,
        lambda s: (
            len(runs := indexing_progress(client)) == 2
            and isinstance(runs[-1][-1], lsp.WorkDoneProgressEnd)
        ),
    )


def indexing_progress(client: LanguageClient) -> list[list[Any]]:
    """The reports of each indexing run (not the model's load), begun ones only (a token may be created
    before its first report)."""
    return [reports for reports in client.progress_reports.values()
            if reports and getattr(reports[0], "title", "").startswith("spd-lsp: indexing")]


async def wait_for(client: LanguageClient, ready: Any, timeout: float = 20.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        current = await status(client)
        if ready(current):
            return current
        assert time.monotonic() < deadline, current
        await asyncio.sleep(0.1)


@pytest.mark.parametrize(
    "text, line, character, answered",
    [
        (PROGRAM, 99, 0, False),  # line beyond the document: nothing to complete
        (PROGRAM, 7, 500, True),  # character beyond the line: clamped
        ("", 0, 0, False),  # empty document
        ("emoji = '😀😀' + na", 0, 17, True),  # after two surrogate pairs
        ("emoji = '😀😀' + na", 0, 10, True),  # inside a surrogate pair
    ],
)
async def test_odd_positions_answer_without_error(
    client: LanguageClient, text: str, line: int, character: int, answered: bool
) -> None:
    uri = f"file:///virtual/odd-{line}-{character}.py"
    open_doc(client, uri, text)
    items = await inline(client, uri, lsp.Position(line, character))
    assert bool(items) == answered, items
    for item in items:
        assert item.range.start == lsp.Position(line, 0)


async def test_emoji_ranges_count_utf16_units(client: LanguageClient) -> None:
    uri = "file:///virtual/emoji.py"
    text = "names = ['😀', 'b']\nfor name in na"
    open_doc(client, uri, text)
    items = await inline(client, uri, end_of(text))
    assert items and all(
        i.range.end == lsp.Position(1, 14) and i.insert_text.startswith("for name in na") for i in items
    ), items


async def test_unknown_uri_and_huge_document(client: LanguageClient) -> None:
    assert await inline(client, "file:///never/opened.py", lsp.Position(0, 0)) == []
    uri = "file:///virtual/huge.py"
    text = "".join(f"value_{i} = {i}\n" for i in range(400_000)) + "value_"
    assert len(text) > 5_000_000
    open_doc(client, uri, text)
    before = await status(client)
    items = await inline(client, uri, end_of(text))
    assert items and all(i.range.start.line == 400_000 for i in items), items
    after = await status(client)
    assert after["answered"] == before["answered"] + 1  # `last` is this request's, computed by the model:
    assert after["last"]["source"] == "model" and after["last"] != before["last"]
    assert after["last"]["prefillTokens"] + after["last"]["reusedTokens"] <= CPU_PREFIX_TOKENS  # the tail within the budget


async def test_unusable_store_and_missing_model_keep_the_server_answering(
    client: LanguageClient, tmp_path: Path
) -> None:
    corrupt = tmp_path / "corrupt-store"
    corrupt.mkdir()
    (corrupt / "data.mdb").write_bytes(b"this is not an lmdb file" * 100)
    await configure(client, {"ngrams": {"db": str(corrupt)}})
    try:
        await wait_for(client, lambda s: any(str(corrupt) in m.message for m in client.messages))
        assert len(await inline(client, "file:///virtual/walk.py", end_of(PROGRAM))) == 3
        await configure(client, {"model": str(tmp_path / "missing.gguf")})
        await wait_for(client, lambda s: s["model"] is None)
        assert await inline(client, "file:///virtual/walk.py", end_of(PROGRAM)) == []
        errors = [m for m in client.messages if m.type == lsp.MessageType.Error]
        assert len(errors) == 1 and "missing.gguf" in errors[0].message
    finally:
        await configure(client, {})
    await wait_for(client, lambda s: s["model"] is not None)
    assert len(await inline(client, "file:///virtual/walk.py", end_of(PROGRAM))) == 3


async def test_workspace_folders_can_change(client: LanguageClient, workspace: Path, tmp_path: Path) -> None:
    extra = tmp_path / "extra"
    extra.mkdir()
    (extra / "more.py").write_text("print('more')\n")
    folder = lsp.WorkspaceFolder(uri=extra.as_uri(), name="extra")

    def change(added: list[lsp.WorkspaceFolder], removed: list[lsp.WorkspaceFolder]) -> None:
        client.workspace_did_change_workspace_folders(
            lsp.DidChangeWorkspaceFoldersParams(lsp.WorkspaceFoldersChangeEvent(added=added, removed=removed))
        )

    change([folder], [])
    await wait_for(client, lambda s: {r["root"] for r in s["stores"]} == {str(workspace), str(extra)})
    change([], [folder])
    await wait_for(client, lambda s: [r["root"] for r in s["stores"]] == [str(workspace)])
