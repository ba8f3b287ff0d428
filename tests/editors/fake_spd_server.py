"""A stand-in for `spd-lsp --stdio` with fixed, predictable drafts.

The editor tests drive real clients (Neovim, vscode-jsonrpc) against it so the
client side can be checked without the model. It speaks the same contract as the
real server: `textDocument/inlineCompletion` returns `k` items whose range starts
at the word under the cursor (like a healed prefix), each with an `spd.accept`
command; `textDocument/completion` answers with the real server's own item builder
(`spd_lsp.lsp.handlers.completion_items`); `spd.status` also reports what the server saw
(settings, acceptances).

`--drafts '["...", ...]'` replaces the "<word><suffix>" drafts by fixed continuations;
`--reindent N` answers, on a line holding only whitespace, an edit of the whole line
that re-indents the draft to N spaces (as the real server normalises indentation).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from typing import Any

from lsprotocol import types
from pygls.lsp.server import LanguageServer

from spd_lsp.cursor import index_of, units
from spd_lsp.fit.edits import LineEdit
from spd_lsp.lsp.handlers import completion_items
from spd_lsp.session.report import summary

SUFFIXES = ["_alpha(x)", "_beta(y, z)", "_gamma()", "_delta", "_epsilon", "_zeta"]
MULTILINE_SUFFIX = "_block():\n    return 42"


class FakeSpdServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__("fake-spd-lsp", "0.0.1")
        self.settings: dict[str, Any] = {"k": 3}
        self.config_changes = 0
        self.accepted: list[Any] = []
        self.requests = 0
        self.completions = 0
        self.cancelled = 0
        self.indexed = 0
        self.delay_s = 0.0  # --delay-ms: think time per request, to test cancellation
        self.drafts: list[str] | None = None  # --drafts
        self.reindent: int | None = None  # --reindent
        self.shown: list[Any] = []  # textDocument/didShowCompletion params
        self.partly: list[Any] = []  # textDocument/didPartiallyAcceptCompletion params
        self.ready = False


def plain(value: Any) -> Any:
    """pygls hands a custom notification's params over as named tuples; as JSON values."""
    if hasattr(value, "_asdict"):
        return {key: plain(item) for key, item in value._asdict().items()}
    return [plain(item) for item in value] if isinstance(value, (list, tuple)) else value


def push_status(ls: "FakeSpdServer", state: str) -> None:
    """The real server's `spd/didChangeStatus` (spd_lsp.session.readiness)."""
    ls.protocol.notify("spd/didChangeStatus", {"state": state, "message": state, "kind": "Normal",
                                              "busy": state != "ready", "model": {"name": "fake-model", "device": "cpu", "engineKind": "shared"}})


server = FakeSpdServer()


def _word_start(line: str, col: int) -> int:
    start = col
    while start > 0 and (line[start - 1].isalnum() or line[start - 1] == "_"):
        start -= 1
    return start


@server.feature(types.INITIALIZE)
def initialize(ls: FakeSpdServer, params: types.InitializeParams) -> None:
    ls.settings.update(params.initialization_options or {})


@server.feature(types.INITIALIZED)
def initialized(ls: FakeSpdServer, params: types.InitializedParams) -> None:
    push_status(ls, "warming")


@server.feature("textDocument/didShowCompletion")
def did_show(ls: FakeSpdServer, params: Any) -> None:
    ls.shown.append(plain(params))


@server.feature("textDocument/didPartiallyAcceptCompletion")
def did_partially_accept(ls: FakeSpdServer, params: Any) -> None:
    ls.partly.append(plain(params))


@server.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)
def did_change_configuration(ls: FakeSpdServer, params: types.DidChangeConfigurationParams) -> None:
    ls.settings.update((params.settings or {}).get("spd", {}))
    ls.config_changes += 1


def _encoding(ls: FakeSpdServer) -> str:
    encoding = ls.workspace.position_encoding or types.PositionEncodingKind.Utf16
    return str(getattr(encoding, "value", encoding))


def _before(ls: FakeSpdServer, uri: str, pos: types.Position) -> str:
    """The cursor's line up to the cursor."""
    doc = ls.workspace.get_text_document(uri)
    line = doc.lines[pos.line].rstrip("\r\n") if pos.line < len(doc.lines) else ""
    return line[: index_of(line, pos.character, _encoding(ls))]


def _edits(ls: FakeSpdServer, before: str, pos: types.Position) -> list[LineEdit]:
    """k edits of the cursor's line up to the cursor, as the real server makes them."""
    drafts = ls.drafts if ls.drafts is not None else ([MULTILINE_SUFFIX] if ls.settings.get("multiline") else []) + SUFFIXES
    reindent = ls.reindent is not None and not before.strip()
    return [
        LineEdit(pos.line, pos.character, " " * ls.reindent + draft.lstrip() if reindent else before + draft, draft, rank)
        for rank, draft in enumerate(drafts[: int(ls.settings.get("k", 3))])
    ]


@server.feature(types.TEXT_DOCUMENT_INLINE_COMPLETION, types.InlineCompletionOptions())
async def inline_completion(ls: FakeSpdServer, params: types.InlineCompletionParams) -> types.InlineCompletionList:
    """Items from the word's start (the whole line's when re-indenting) to the cursor."""
    ls.requests += 1
    try:
        await asyncio.sleep(ls.delay_s)
    except asyncio.CancelledError:
        ls.cancelled += 1
        raise
    pos = params.position
    before = _before(ls, params.text_document.uri, pos)
    start = 0 if ls.reindent is not None and not before.strip() else _word_start(before, len(before))
    span = types.Range(types.Position(pos.line, units(before[:start], _encoding(ls))), pos)
    items = []
    for index, edit in enumerate(_edits(ls, before, pos)):
        text = edit.new_text[start:]
        command = types.Command(title="Accept", command="spd.accept", arguments=[{"draft": index, "text": text}])
        items.append(types.InlineCompletionItem(insert_text=text, range=span, command=command))
    if not ls.ready:  # the first answer settles the (fake) warm-up
        ls.ready = True
        push_status(ls, "ready")
    return types.InlineCompletionList(items=items)


@server.feature(types.TEXT_DOCUMENT_COMPLETION, types.CompletionOptions())
def completion(ls: FakeSpdServer, params: types.CompletionParams) -> types.CompletionList:
    ls.completions += 1
    uri, pos = params.text_document.uri, params.position
    before = _before(ls, uri, pos)
    return types.CompletionList(is_incomplete=True, items=completion_items(uri, before, _edits(ls, before, pos)))


@server.command("spd.accept")
def accept(ls: FakeSpdServer, *args: Any) -> None:
    ls.accepted.append(list(args))


@server.command("spd.status")
def status(ls: FakeSpdServer, *args: Any) -> dict[str, Any]:
    """The real server's shape (spd_lsp.session.session.Session.status, its `summary` by the
    real spd_lsp.session.report) plus what the fake saw."""
    fields = {
        "model": {"name": "fake-model", "device": "cpu"},
        "stores": [{"root": "/tmp/fake", "path": "/tmp/fake-store", "files": ls.indexed, "tokens": 40 * ls.indexed}],
        "pid": os.getpid(),
        "requests": ls.requests,
        "completions": ls.completions,
        "cancelled": ls.cancelled,
        "accepted": len(ls.accepted),
        "latencyMs": {"total": {"p50": 12.0, "p95": 20.0}},
        "settings": ls.settings,
        "configChanges": ls.config_changes,
        "state": {"state": "ready" if ls.ready else "warming", "message": "fake"},
        "acceptedArguments": ls.accepted,
    }
    return {**fields, "summary": summary(fields)}


@server.command("fake.seen")
def seen(ls: FakeSpdServer, *args: Any) -> dict[str, Any]:
    """What the tests of the client's events read (kept out of spd.status: its float has a height)."""
    return {"documents": sorted(ls.workspace.text_documents), "shownItems": ls.shown, "partlyAccepted": ls.partly}


@server.command("spd.indexWorkspace")
async def index_workspace(ls: FakeSpdServer, *args: Any) -> dict[str, bool]:
    token = f"spd-index-fake-{ls.indexed}-{ls.requests}-{os.urandom(4).hex()}"
    await ls.work_done_progress.create_async(token)
    ls.work_done_progress.begin(token, types.WorkDoneProgressBegin(title="Indexing workspace", percentage=0))
    changed = 3 - ls.indexed  # like the real indexer: a second run finds nothing changed
    for done in range(1, changed + 1):
        ls.work_done_progress.report(token, types.WorkDoneProgressReport(message=f"{done}/3 files", percentage=done * 33))
    ls.indexed = 3
    ls.work_done_progress.end(token, types.WorkDoneProgressEnd(message=f"{changed} files, {40 * changed} tokens in 0.0 s"))
    return {"started": True}


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--delay-ms", type=float, default=0.0)
    parser.add_argument("--drafts", type=json.loads, default=None)
    parser.add_argument("--reindent", type=int, default=None)
    args = parser.parse_args()
    server.delay_s, server.drafts, server.reindent = args.delay_ms / 1000, args.drafts, args.reindent
    server.start_io(sys.stdin.buffer, sys.stdout.buffer)
