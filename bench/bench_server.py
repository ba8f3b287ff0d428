"""Request latency of `spd-lsp --stdio` as an editor sees it, and the server's memory.

Starts the real server (default model) on a workspace (a copy of this
repository's Python sources by default, indexed into a throw-away store first), then measures
`textDocument/inlineCompletion` round trips for a ~1,500-token prefix:

- cold: a new document each time (no reusable KV cache);
- warm: one document, typed one character at a time (didChange + request);
  "warm, decoded" are the requests among them where the typed character did not
  follow a draft already shown (the others are answered without the model).

Each round trip is split with the server's own timings (`spd.status` -> last):
prefill, decode (model forward steps), n-gram lookups, the rest of the engine
(healing, draft bookkeeping), the session (context, tokenizer, cut/de-dup) and
the server (JSON-RPC, queueing, event loop) = client latency - session total.

    .venv/bin/python bench/bench_server.py [--cold 5] [--warm 30] [--max-prefix-tokens 2048]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import platformdirs
from lsprotocol import types as lsp
from pygls.lsp.client import LanguageClient

REPO = Path(__file__).resolve().parent.parent
TIMEOUT_S = 300  # one request; a dead server fails the run instead of hanging it


def copy_sources(target: Path) -> Path:
    """A quiet workspace: the project's Python files (the live checkout churns with builds)."""
    for package in ("spd_lsp", "ngram_db", "tests", "bench"):
        for path in (REPO / package).rglob("*.py"):
            destination = target / path.relative_to(REPO)
            destination.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, destination)
    return target


def corpus() -> str:
    """Real code to complete: the project's own sources, in a stable order."""
    files = sorted((REPO / "spd_lsp").rglob("*.py")) + sorted((REPO / "ngram_db").rglob("*.py"))
    return "\n".join(path.read_text() for path in files)


def prefixes(text: str, tokens: int, count: int, tokenizer: Any) -> list[str]:
    """`count` different windows of about `tokens` tokens, each ending mid-line after some code."""
    offsets = tokenizer(text, return_offsets_mapping=True, add_special_tokens=False)["offset_mapping"]
    step = max(1, (len(offsets) - tokens) // max(count, 1))
    windows = []
    for i in range(count):
        start, end = offsets[i * step][0], offsets[min(i * step + tokens, len(offsets)) - 1][1]
        window = text[start:end]
        cut = window.rfind("\n", 0, len(window) - 1)
        line = window[cut + 1 :]
        windows.append(window[: cut + 1 + max(1, len(line) // 2)])  # stop halfway through a line
    return windows


def end_position(text: str) -> lsp.Position:
    lines = text.split("\n")
    return lsp.Position(len(lines) - 1, len(lines[-1].encode("utf-16-le")) // 2)


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


class Bench:
    def __init__(self, client: LanguageClient) -> None:
        self.client = client
        self.rows: dict[str, list[dict[str, float]]] = {"cold": [], "warm": [], "warm, decoded": []}

    async def command(self, name: str) -> Any:
        request = self.client.workspace_execute_command_async(lsp.ExecuteCommandParams(command=name))
        return await asyncio.wait_for(request, TIMEOUT_S)

    async def request(self, kind: str, uri: str, position: lsp.Position) -> int:
        params = lsp.InlineCompletionParams(
            text_document=lsp.TextDocumentIdentifier(uri),
            position=position,
            context=lsp.InlineCompletionContext(trigger_kind=lsp.InlineCompletionTriggerKind.Automatic),
        )
        started = time.perf_counter()
        result = await asyncio.wait_for(self.client.text_document_inline_completion_async(params), TIMEOUT_S)
        client_ms = 1000 * (time.perf_counter() - started)
        last = (await self.command("spd.status"))["last"]
        sample = {
            "client": client_ms,
            "prefill": last["prefillMs"],
            "decode": last["modelMs"],
            "ngram": last["ngramMs"],
            "engine_other": last["engineMs"] - last["prefillMs"] - last["modelMs"] - last["ngramMs"],
            "session": last["totalMs"] - last["engineMs"],
            "server": client_ms - last["totalMs"],
            "prefill_tokens": last["prefillTokens"],
            "reused_tokens": last["reusedTokens"],
        }
        self.rows[kind].append(sample)
        if kind == "warm" and last["source"] == "model":
            self.rows["warm, decoded"].append(sample)  # the typed character did not follow a shown draft
        return len(result.items) if result else 0

    def open(self, uri: str, text: str) -> None:
        self.client.text_document_did_open(
            lsp.DidOpenTextDocumentParams(lsp.TextDocumentItem(uri=uri, language_id="python", version=1, text=text))
        )

    def type_char(self, uri: str, version: int, position: lsp.Position, char: str) -> None:
        self.client.text_document_did_change(
            lsp.DidChangeTextDocumentParams(
                text_document=lsp.VersionedTextDocumentIdentifier(uri=uri, version=version),
                content_changes=[lsp.TextDocumentContentChangePartial(range=lsp.Range(position, position), text=char)],
            )
        )


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


COLUMNS = (  # (header, sample key, percentile, format)
    ("latency p50", "client", 0.50, "{:.0f} ms"),
    ("latency p95", "client", 0.95, "{:.0f} ms"),
    ("prefill p50", "prefill", 0.50, "{:.0f} ms"),
    ("decode p50", "decode", 0.50, "{:.0f} ms"),
    ("n-gram p50", "ngram", 0.50, "{:.1f} ms"),
    ("engine other p50", "engine_other", 0.50, "{:.0f} ms"),
    ("session p50", "session", 0.50, "{:.0f} ms"),
    ("server p50", "server", 0.50, "{:.0f} ms"),
    ("prefilled tokens p50", "prefill_tokens", 0.50, "{:.0f}"),
)


def table(rows: dict[str, list[dict[str, float]]]) -> str:
    lines = [
        "| requests | n | " + " | ".join(header for header, *_ in COLUMNS) + " |",
        "| --- | ---: |" + " ---: |" * len(COLUMNS),
    ]
    for kind, samples in rows.items():
        if samples:
            cells = [fmt.format(percentile([s[key] for s in samples], q)) for _, key, q, fmt in COLUMNS]
            lines.append(f"| {kind} | {len(samples)} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


async def wait_indexed(bench: Bench, timeout: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        status = await bench.command("spd.status")
        if status["model"] and status["stores"] and not any(s["indexing"] for s in status["stores"]):
            return status
        if time.monotonic() > deadline:
            raise TimeoutError(f"server not ready after {timeout} s: {status}")
        await asyncio.sleep(0.5)


async def run(args: argparse.Namespace) -> dict[str, Any]:
    from spd_lsp.model import load_tokenizer

    tokenizer = load_tokenizer(args.model)
    text = corpus()
    cold_prefixes = prefixes(text, args.prefix_tokens, args.cold + 1, tokenizer)
    cache = tempfile.mkdtemp(prefix="spd-bench-")
    root = args.root or copy_sources(Path(cache) / "workspace")
    env = {
        **os.environ,
        "SPD_LSP_CACHE": cache,  # a fresh store; the model cache stays shared
        "SPD_LSP_MODEL_CACHE": os.environ.get("SPD_LSP_MODEL_CACHE") or platformdirs.user_cache_dir("spd-lsp"),
    }
    client = LanguageClient("spd-bench", "1")
    log = ["--log-file", str(args.server_log)] if args.server_log else []
    await client.start_io(sys.executable, "-m", "spd_lsp.cli", "--stdio", *log, env=env)
    pid = client._server.pid  # the server subprocess pygls started
    options: dict[str, Any] = {"k": args.k, "maxTokens": args.max_tokens}
    if args.max_prefix_tokens:
        options["maxPrefixTokens"] = args.max_prefix_tokens
    if args.quantize:
        options["quantize"] = args.quantize
    if args.model:
        options["model"] = args.model
    if args.device:
        options["device"] = args.device
    await client.initialize_async(
        lsp.InitializeParams(
            capabilities=lsp.ClientCapabilities(),
            workspace_folders=[lsp.WorkspaceFolder(uri=root.as_uri(), name=root.name)],
            initialization_options=options,
        )
    )
    client.initialized(lsp.InitializedParams())
    bench = Bench(client)
    await wait_indexed(bench, 600)
    bench.open("file:///bench/warmup.py", cold_prefixes[-1])
    await bench.request("cold", "file:///bench/warmup.py", end_position(cold_prefixes[-1]))  # torch warm-up
    bench.rows["cold"].clear()

    for i, prefix in enumerate(cold_prefixes[: args.cold]):
        uri = f"file:///bench/cold{i}.py"
        bench.open(uri, prefix)
        await bench.request("cold", uri, end_position(prefix))

    prefix = cold_prefixes[0]
    typed = text[text.index(prefix) + len(prefix) :][: args.warm]  # what the author wrote next
    uri = "file:///bench/warm.py"
    bench.open(uri, prefix)
    position = end_position(prefix)
    await bench.request("cold", uri, position)  # the document's first request is cold
    for version, char in enumerate(typed, start=2):
        bench.type_char(uri, version, position, char)
        position = end_position(prefix + typed[: version - 1])
        await bench.request("warm", uri, position)

    final = await bench.command("spd.status")
    memory = rss_mb(pid)
    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()
    return {
        "rows": bench.rows,
        "rss_mb": memory,
        "model": final["model"],
        "stores": final["stores"],
        "settings": options,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", type=Path, help="workspace folder to index (default: a copy of this repo's sources)")
    parser.add_argument("--cold", type=int, default=5, help="cold requests (new documents)")
    parser.add_argument("--warm", type=int, default=30, help="warm requests (typed characters)")
    parser.add_argument("--prefix-tokens", type=int, default=1500)
    parser.add_argument("--max-prefix-tokens", type=int, default=None, help="server budget (default: its own)")
    parser.add_argument("--quantize", choices=["int8"], help="the server's `quantize` setting")
    parser.add_argument("--model", help="the server's `model` setting (default: the bundled model)")
    parser.add_argument("--device", help="the server's `device` setting (default: its own, auto)")
    parser.add_argument("-k", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=10)
    parser.add_argument("--json", type=Path, help="also write the raw samples here")
    parser.add_argument("--server-log", type=Path, help="the server's --log-file")
    args = parser.parse_args()
    result = asyncio.run(run(args))
    model = result["model"]
    print(f"model: {model['name']} on {model['device']} ({model['dtype']}), settings {result['settings']}")
    print(f"store: {result['stores']}")
    print(table(result["rows"]))
    print(f"server RSS after the run: {result['rss_mb']:.0f} MB; load average now {os.getloadavg()[0]:.2f}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
