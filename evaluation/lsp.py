"""The same positions through the real server (`spd-lsp --stdio`), as an editor asks for them.

Each held-out prefix is opened as its own document (outside the workspace) with
the cursor at its end; the server's workspace store is the evaluation's store,
with background indexing off and no base store, so it sees exactly what the
in-process "SPD + workspace n-grams" row sees. Its shared engine is its own (a runtime
directory of its own, stopped at the end): an engine another process started earlier
may run under other settings (a compiled verification tree, whose numbers differ from
the eager one's in the last bits) and answer a near tie otherwise.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any, Sequence

from lsprotocol import types as lsp
from pygls.lsp.client import LanguageClient

from spd_lsp.api import DecodeOptions
from evaluation.positions import Position


def settings(options: DecodeOptions, store: Path) -> dict[str, Any]:
    return {
        "k": options.k,
        "maxTokens": options.max_tokens,
        "decoding": options.method,
        "temperature": options.temperature,
        "ngrams": {
            "alpha": options.alpha,
            "weights": {str(n): w for n, w in options.ngram_weights.items()},
            "orders": sorted(options.ngram_weights),
            "db": str(store),
            "index": False,
        },
    }


def _end(text: str) -> lsp.Position:
    lines = text.split("\n")
    return lsp.Position(len(lines) - 1, len(lines[-1].encode("utf-16-le")) // 2)


async def _status(client: LanguageClient) -> dict[str, Any]:
    return await client.workspace_execute_command_async(lsp.ExecuteCommandParams(command="spd.status"))


async def _ready(client: LanguageClient) -> None:
    """Until the model is loaded and the workspace store is open: the stores open on the index thread after the
    model (or the shared engine's connection), and a request before that is decoded without n-grams."""
    while True:
        status = await _status(client)
        if status.get("model") is not None and status.get("stores"):
            return
        await asyncio.sleep(0.2)


async def _drafts(
    positions: Sequence[Position], options: DecodeOptions, store: Path, workspace: Path, cache: Path
) -> list[tuple[list[str], float]]:
    client = LanguageClient("spd-eval", "1")
    runtime = cache.parent / "runtime"
    runtime.mkdir(mode=0o700, parents=True, exist_ok=True)
    env = {**os.environ, "SPD_LSP_CACHE": str(cache), "XDG_CACHE_HOME": str(cache.parent),
           "XDG_RUNTIME_DIR": str(runtime)}
    await client.start_io(sys.executable, "-m", "spd_lsp.cli", "--stdio", env=env)
    try:
        await client.initialize_async(lsp.InitializeParams(
            capabilities=lsp.ClientCapabilities(),
            root_uri=workspace.as_uri(),
            workspace_folders=[lsp.WorkspaceFolder(uri=workspace.as_uri(), name="workspace")],
            initialization_options=settings(options, store),
        ))
        client.initialized(lsp.InitializedParams())
        await _ready(client)
        out = []
        for index, position in enumerate(positions):
            uri = f"file:///spd-eval/held-out/{index}.py"
            client.text_document_did_open(lsp.DidOpenTextDocumentParams(
                lsp.TextDocumentItem(uri=uri, language_id="python", version=1, text=position.prefix + position.suffix)))
            started = time.perf_counter()
            answer = await client.text_document_inline_completion_async(lsp.InlineCompletionParams(
                text_document=lsp.TextDocumentIdentifier(uri), position=_end(position.prefix),
                context=lsp.InlineCompletionContext(trigger_kind=lsp.InlineCompletionTriggerKind.Invoked)))
            elapsed = 1000 * (time.perf_counter() - started)
            line_prefix = position.prefix.rsplit("\n", 1)[-1]
            items = answer.items if isinstance(answer, lsp.InlineCompletionList) else answer or []
            out.append(([str(i.insert_text).removeprefix(line_prefix) for i in items], elapsed))
            client.text_document_did_close(lsp.DidCloseTextDocumentParams(lsp.TextDocumentIdentifier(uri)))
        await client.shutdown_async(None)
        client.exit(None)
    finally:
        await client.stop()
        _stop_engines(runtime)
    return out


def _stop_engines(runtime: Path) -> None:
    """The engines (and their standby spares) started under `runtime`, told to stop."""
    for pid_file in [*runtime.rglob("engine-*.pid"), *runtime.rglob("engine-*.standby")]:
        try:
            os.kill(int(pid_file.read_text().strip()), signal.SIGTERM)
        except (OSError, ValueError):
            pass  # gone already, or a file being written


def lsp_drafts(
    positions: Sequence[Position], options: DecodeOptions, store: Path, workspace: Path, cache: Path
) -> list[tuple[list[str], float]]:
    """(drafts, client-side ms) per position, from a fresh server process."""
    return asyncio.run(_drafts(positions, options, store, workspace, cache))
