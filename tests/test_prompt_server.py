"""The prompt's context through the real server: a setting change shows in `spd.status`, and the
next prompt holds what it asks for (the bundled model's repository format, another open file)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from lsprotocol import types as lsp

from tests.test_server_e2e import PROGRAM, capabilities, configure, end_of, inline, open_doc, server_config, status

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.asyncio(loop_scope="module")]

HELPERS = "def walk_tree(root, visit):\n    for name in sorted(root):\n        visit(root, name)\n"


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def client(tmp_path_factory: pytest.TempPathFactory) -> Any:
    root = tmp_path_factory.mktemp("workspace")
    lsp_client = await server_config(tmp_path_factory.mktemp("cache")).start()
    lsp_client.initialize_result = await lsp_client.initialize_session(
        lsp.InitializeParams(capabilities=capabilities(), root_uri=root.as_uri(),
                             workspace_folders=[lsp.WorkspaceFolder(uri=root.as_uri(), name="ws")],
                             initialization_options={"k": 2, "maxTokens": 4, "ngrams": {"index": False}})
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
