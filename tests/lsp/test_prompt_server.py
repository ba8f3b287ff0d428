"""The prompt's context through the real server: a setting change shows in `spd.status`, and the
next prompt holds what it asks for (the bundled model's repository format, another open file)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from lsprotocol import types as lsp

from tests.lsp.test_server_e2e import PROGRAM, capabilities, configure, end_of, inline, open_doc, server_config, status

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.asyncio(loop_scope="module")]

HELPERS = "def walk_tree(root, visit):\n    for name in sorted(root):\n        visit(root, name)\n"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def client(tmp_path_factory: pytest.TempPathFactory) -> Any:
    root = tmp_path_factory.mktemp("workspace")
    lsp_client = await server_config(tmp_path_factory.mktemp("cache")).start()
    lsp_client.initialize_result = await lsp_client.initialize_session(
        lsp.InitializeParams(capabilities=capabilities(), root_uri=root.as_uri(),
                             workspace_folders=[lsp.WorkspaceFolder(uri=root.as_uri(), name="ws")],
                             initialization_options={"engine": "in-process", "k": 2, "maxTokens": 4, "ngrams": {"index": False}})
    )
    lsp_client.root = root
    yield lsp_client
    await lsp_client.shutdown_session()
    await lsp_client.stop()


async def test_context_settings_show_in_status_and_shape_the_next_prompt(client: Any) -> None:
    root: Path = client.root
    before = await status(client)
    assert before["context"]["promptFormat"] == "auto" and before["context"]["snippets"] is False
    await configure(client, {"k": 2, "maxTokens": 4, "promptFormat": "file_sep", "ngrams": {"index": False},
                             "context": {"snippets": True, "tokens": 128, "sources": ["open"]}})
    after = await status(client)
    assert after["context"]["promptFormat"] == "file_sep"
    assert after["context"]["snippets"] is True and after["context"]["tokens"] == 128
    assert after["context"]["sources"] == ["open"]
    main, helpers = (root / "main.py").as_uri(), (root / "helpers.py").as_uri()
    open_doc(client, helpers, HELPERS)
    open_doc(client, main, PROGRAM)
    await inline(client, main, end_of(PROGRAM))
    prompt = (await status(client))["last"]["prompt"]
    assert prompt["format"] == "file_sep"
    assert [s["path"] for s in prompt["snippets"]] == ["helpers.py"] and prompt["snippets"][0]["tokens"] > 0
    assert 0 < sum(s["tokens"] for s in prompt["snippets"]) <= 128
    assert prompt["prefixTokens"] > 0 and prompt["headerTokens"] > 0  # "<file_sep>main.py\n"


async def test_a_saved_file_reaches_the_workspace_snippets(client: Any) -> None:
    """Issue 13: the BM25 index was built once; a file saved with a new name never became a snippet."""
    root: Path = client.root
    await configure(client, {"k": 2, "maxTokens": 4, "promptFormat": "file_sep", "ngrams": {"index": False},
                             "context": {"snippets": True, "tokens": 128, "sources": ["workspace"]}})
    built = (await wait_for_builds(client, 1))["builds"]
    (root / "ranking.py").write_text("def frobnicate_rank(scores):\n    return sorted(scores, reverse=True)\n")
    client.text_document_did_save(lsp.DidSaveTextDocumentParams(
        text_document=lsp.TextDocumentIdentifier(uri=(root / "ranking.py").as_uri())))
    assert (await wait_for_builds(client, built + 1))["chunks"] > 0
    text = "scores = load_scores()\nbest = frobnicate_rank(scores)\ntop = frobnicate_"
    uri = (root / "ranked.py").as_uri()
    open_doc(client, uri, text)
    await inline(client, uri, end_of(text))
    prompt = (await status(client))["last"]["prompt"]
    assert "ranking.py" in [s["path"] for s in prompt["snippets"]]


async def wait_for_builds(client: Any, at_least: int, timeout: float = 60.0) -> dict[str, Any]:
    """The workspace index's status once it was built `at_least` times."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        index = (await status(client))["context"]["workspaceIndex"]
        if index is not None and index["builds"] >= at_least:
            return index
        assert loop.time() < deadline, f"the workspace index: {index}"
        await asyncio.sleep(0.1)
