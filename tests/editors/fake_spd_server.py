"""A stand-in for `spd-lsp --stdio` with fixed, predictable drafts.

The editor tests drive real clients (Neovim, vscode-jsonrpc) against it so the
client side can be checked without the model. It speaks the same contract as the
real server: `textDocument/inlineCompletion` returns `k` items whose range starts
at the word under the cursor (like a healed prefix), each with an `spd.accept`
command; `spd.status` also reports what the server saw (settings, acceptances).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from lsprotocol import types
from pygls.lsp.server import LanguageServer

SUFFIXES = ["_alpha(x)", "_beta(y, z)", "_gamma()", "_delta", "_epsilon", "_zeta"]
MULTILINE_SUFFIX = "_block():\n    return 42"


class FakeSpdServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__("fake-spd-lsp", "0.0.1")
        self.settings: dict[str, Any] = {"k": 3}
        self.config_changes = 0
        self.accepted: list[Any] = []
        self.requests = 0
        self.cancelled = 0
        self.indexed = 0
        self.delay_s = 0.0  # --delay-ms: think time per request, to test cancellation


server = FakeSpdServer()


def _word_start(line: str, col: int) -> int:
    start = col
    while start > 0 and (line[start - 1].isalnum() or line[start - 1] == "_"):
        start -= 1
    return start


@server.feature(types.INITIALIZE)
def initialize(ls: FakeSpdServer, params: types.InitializeParams) -> None:
    ls.settings.update(params.initialization_options or {})


@server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
def did_change_configuration(ls: FakeSpdServer, params: types.DidChangeConfigurationParams) -> None:
    ls.settings.update((params.settings or {}).get("spd", {}))
    ls.config_changes += 1


@server.feature(types.TEXT_DOCUMENT_INLINE_COMPLETION, types.InlineCompletionOptions())
async def inline_completion(ls: FakeSpdServer, params: types.InlineCompletionParams) -> types.InlineCompletionList:
    ls.requests += 1
    try:
        await asyncio.sleep(ls.delay_s)
    except asyncio.CancelledError:
        ls.cancelled += 1
        raise
    doc = ls.workspace.get_text_document(params.text_document.uri)
    pos = params.position
    line = doc.lines[pos.line].rstrip("\r\n") if pos.line < len(doc.lines) else ""
    start = _word_start(line, pos.character)
    word = line[start : pos.character]
    suffixes = ([MULTILINE_SUFFIX] if ls.settings.get("multiline") else []) + SUFFIXES
    items = []
    for index, suffix in enumerate(suffixes[: int(ls.settings.get("k", 3))]):
        items.append(
            types.InlineCompletionItem(
                insert_text=word + suffix,
                range=types.Range(types.Position(pos.line, start), pos),
                command=types.Command(title="Accept", command="spd.accept", arguments=[{"draft": index, "text": word + suffix}]),
            )
        )
    return types.InlineCompletionList(items=items)


@server.command("spd.accept")
def accept(ls: FakeSpdServer, *args: Any) -> None:
    ls.accepted.append(list(args))


@server.command("spd.status")
def status(ls: FakeSpdServer, *args: Any) -> dict[str, Any]:
    """The real server's shape (spd_lsp.session.Session.status) plus what the fake saw."""
    return {
        "model": {"name": "fake-model", "device": "cpu"},
        "stores": [{"root": "/tmp/fake", "files": ls.indexed}],
        "requests": ls.requests,
        "cancelled": ls.cancelled,
        "accepted": len(ls.accepted),
        "latencyMs": {"total": {"p50": 12.0, "p95": 20.0}},
        "settings": ls.settings,
        "configChanges": ls.config_changes,
        "acceptedArguments": ls.accepted,
    }


@server.command("spd.indexWorkspace")
async def index_workspace(ls: FakeSpdServer, *args: Any) -> dict[str, bool]:
    token = "spd-index-fake"
    await ls.work_done_progress.create_async(token)
    ls.work_done_progress.begin(token, types.WorkDoneProgressBegin(title="Indexing workspace", percentage=0))
    for done in range(1, 4):
        ls.work_done_progress.report(token, types.WorkDoneProgressReport(message=f"{done}/3 files", percentage=done * 33))
    ls.indexed = 3
    ls.work_done_progress.end(token, types.WorkDoneProgressEnd(message="3 files indexed"))
    return {"started": True}


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--delay-ms", type=float, default=0.0)
    server.delay_s = parser.parse_args().delay_ms / 1000
    server.start_io(sys.stdin.buffer, sys.stdout.buffer)
