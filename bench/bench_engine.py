"""One shared engine under N concurrent editors: throughput and latency per method, and memory.

Throughput: starts `spd-lsp engine` (the bundled model) on a private Unix socket; N
simulated editors (threads, each its own connection and prompt cache) type into
their own file of this repository: each request extends the previous prefix by a few
characters, as typing does, and waits for its answer. For each N the methods run
interleaved (SPD, batched nucleus, beam; k = 3, 10 tokens, n-grams off so only the
decoding differs): requests/s over the round and p50/p95 per request. Continuous
batching decodes a superposed request as ONE row, the baselines as k rows each. With
`--rounds R` every method runs R rounds, their order rotated each round; the table gives
medians and the median of the rounds' own SPD / nucleus ratios (the rounds' ratios follow).

Memory (`--rss`): two `spd-lsp --stdio` front ends with `engine: "auto"` plus their
one engine, against two in-process servers, each after answering one completion.

    nice .venv/bin/python -m bench.bench_engine [--editors 1 2 4 8] [--requests 6] [--rounds 3] [--rss]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench.bench_server import corpus, percentile, rss_mb
from bench.isolation import isolated_env
from spd_lsp.api import DecodeOptions, DecodeRequest
from spd_lsp.remote import protocol
from spd_lsp.address import parse
from spd_lsp.remote.client import Connection

REPO = Path(__file__).resolve().parent.parent
METHODS = ("superposed", "nucleus_batched", "beam")
PREFIX_CHARS = 1200  # about 350 tokens of context per editor
TYPED_CHARS = 4  # each request extends the prefix by this much
TIMEOUT_S = 600
VERIFY: dict[str, int] = {}  # --verify-rounds, where given; else DecodeOptions' default


def start_engine(socket_path: Path, *extra: str) -> tuple[subprocess.Popen, str]:
    """The engine, with the batched nucleus registered (bench/baselines.py: the product does not offer it)."""
    env = {**os.environ, "SPD_LSP_ENGINE_LOADER": "bench.baselines:loaded"}
    process = subprocess.Popen([sys.executable, "-m", "spd_lsp.cli", "engine", "--socket", str(socket_path),
                                "--idle-timeout", "0", *extra], stdout=subprocess.PIPE, text=True, cwd=REPO, env=env)
    for line in process.stdout:
        if "listening on" in line:
            return process, line.rsplit(" ", 1)[1].strip()
    raise RuntimeError("the engine did not start")


def documents(count: int, requests: int) -> list[tuple[str, str]]:
    """Per editor: a prefix ending mid-line and the text typed after it."""
    text = corpus()
    step = (len(text) - PREFIX_CHARS - 2000) // max(count, 1)
    out = []
    for i in range(count):
        start = i * step
        end = text.find("\n", start + PREFIX_CHARS) + 9  # a few characters into a line
        out.append((text[start:end], text[end : end + TYPED_CHARS * (requests + 1)]))
    return out


def editor(where: str, index: int, method: str, prefix: str, typed: str, requests: int,
           latencies: list[float], barrier: threading.Barrier) -> None:
    connection = Connection(parse(where))
    options = DecodeOptions.of(method=method, k=3, max_tokens=10, alpha=0.0, seed=index, **VERIFY)
    affinity = f"editor{index}-{method}"

    def ask(text: str) -> None:
        _, future = connection.request(protocol.complete_request(0, DecodeRequest(text, options), affinity=affinity))
        answer = future.result(timeout=TIMEOUT_S)
        if answer["op"] != "result":
            raise RuntimeError(f"engine error: {answer}")

    try:
        ask(prefix)  # the cold prefill of this editor's document, not measured
        barrier.wait()
        for j in range(1, requests + 1):
            started = time.perf_counter()
            ask(prefix + typed[: j * TYPED_CHARS])
            latencies.append(time.perf_counter() - started)
    finally:
        connection.close()


def round_of(where: str, editors: int, method: str, requests: int) -> dict[str, float]:
    latencies: list[float] = []
    barrier = threading.Barrier(editors + 1)
    threads = [threading.Thread(target=editor, args=(where, i, method, prefix, typed, requests, latencies, barrier))
               for i, (prefix, typed) in enumerate(documents(editors, requests))]
    for thread in threads:
        thread.start()
    barrier.wait()
    started = time.perf_counter()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - started
    return {"rps": len(latencies) / wall, "p50": percentile(latencies, 0.5), "p95": percentile(latencies, 0.95),
            "n": len(latencies)}


def throughput(args: argparse.Namespace) -> str:
    directory = Path(tempfile.mkdtemp(prefix="spd-be-", dir="/tmp"))
    extra = (["--device", args.device] if args.device else []) + (["--model", args.model] if args.model else [])
    process, where = start_engine(directory / "engine.sock", *extra)
    rows = []
    try:
        for method in METHODS:  # warm-up: the kernels' first calls at every batch shape, not measured
            round_of(where, 2, method, 1)
        for editors in args.editors:
            results = interleaved(where, editors, args.requests, args.rounds)
            rows.append((editors, results))
            print(_row(editors, results), flush=True)
        status = _status(where)
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(30)
        shutil.rmtree(directory, ignore_errors=True)
    header = ("| editors | " + " | ".join(f"{m} req/s | {m} p50 | {m} p95" for m in METHODS)
              + " | SPD / nucleus req/s (each round) |\n|" + "---|" * (2 + 3 * len(METHODS)))
    return "\n".join([header] + [_row(e, r) for e, r in rows]) + f"\n\nengine: {status}"


def interleaved(where: str, editors: int, requests: int, rounds: int) -> dict[str, dict[str, float]]:
    """Each method's median over `rounds` rounds, the methods' order rotated every round (a busy machine
    slows them alike); `ratio` is the median of the rounds' own SPD / nucleus requests/s."""
    runs: dict[str, list[dict[str, float]]] = {method: [] for method in METHODS}
    for i in range(rounds):
        for method in METHODS[i % len(METHODS):] + METHODS[: i % len(METHODS)]:
            runs[method].append(round_of(where, editors, method, requests))
    ratios = [spd["rps"] / nucleus["rps"] for spd, nucleus in zip(runs["superposed"], runs["nucleus_batched"])]
    results = {method: {key: statistics.median(r[key] for r in rs) for key in rs[0]} for method, rs in runs.items()}
    results["superposed"]["ratio"] = statistics.median(ratios)
    results["superposed"]["ratios"] = ratios
    return results


def _row(editors: int, results: dict[str, dict[str, float]]) -> str:
    cells = [f"{r['rps']:.2f} | {1000 * r['p50']:.0f} ms | {1000 * r['p95']:.0f} ms" for r in results.values()]
    ratios = ", ".join(f"{r:.2f}" for r in results["superposed"]["ratios"])
    return f"| {editors} | " + " | ".join(cells) + f" | {results['superposed']['ratio']:.2f}x ({ratios}) |"


def _status(where: str) -> dict[str, Any]:
    connection = Connection(parse(where))
    try:
        _, future = connection.request({"op": "status"})
        return future.result(timeout=30)["status"]["scheduler"]
    finally:
        connection.close()


# -- memory ----------------------------------------------------------------------------
async def _front_end(env: dict[str, str], options: dict[str, Any], root: Path) -> tuple[Any, int]:
    from lsprotocol import types as lsp
    from pygls.lsp.client import LanguageClient

    client = LanguageClient("spd-bench-engine", "1")
    await client.start_io(sys.executable, "-m", "spd_lsp.cli", "--stdio", env=env)
    await client.initialize_async(lsp.InitializeParams(
        capabilities=lsp.ClientCapabilities(), initialization_options=options,
        workspace_folders=[lsp.WorkspaceFolder(uri=root.as_uri(), name="ws")]))
    client.initialized(lsp.InitializedParams())
    text = "import os\n\ndef walk(root):\n    for name in os.listdir(root):\n        "
    uri = "file:///bench/rss.py"
    client.text_document_did_open(lsp.DidOpenTextDocumentParams(lsp.TextDocumentItem(uri=uri, language_id="python", version=1, text=text)))
    params = lsp.InlineCompletionParams(
        text_document=lsp.TextDocumentIdentifier(uri), position=lsp.Position(4, 8),
        context=lsp.InlineCompletionContext(trigger_kind=lsp.InlineCompletionTriggerKind.Automatic))
    result = await asyncio.wait_for(client.text_document_inline_completion_async(params), TIMEOUT_S)
    assert result is not None and result.items, "no completion"
    return client, client._server.pid


async def memory() -> str:
    from lsprotocol import types as lsp

    directory = Path(tempfile.mkdtemp(prefix="spd-rss-", dir="/tmp"))
    directory.chmod(0o700)
    root = directory / "ws"
    root.mkdir()
    (root / "a.py").write_text("def walk(root):\n    return root\n")
    env = {**isolated_env(directory), "XDG_RUNTIME_DIR": str(directory)}  # fresh stores, the shared model cache
    figures = {}
    for mode in ("in-process", "auto"):
        clients = [await _front_end(env, {"engine": mode}, root) for _ in range(2)]
        await asyncio.sleep(2)
        front = [rss_mb(pid) for _, pid in clients]
        engine_pid = None
        if mode == "auto":
            status = await clients[0][0].workspace_execute_command_async(lsp.ExecuteCommandParams(command="spd.status"))
            engine_pid = status["model"]["pid"]
        engine = rss_mb(engine_pid) if engine_pid else 0.0
        figures[mode] = (front, engine)
        for client, _ in clients:
            await client.shutdown_async(None)
            client.exit(None)
            await client.stop()
        if engine_pid:
            os.kill(engine_pid, signal.SIGTERM)
    shutil.rmtree(directory, ignore_errors=True)
    one = sum(figures["in-process"][0]) / 2
    auto_total = sum(figures["auto"][0]) + figures["auto"][1]
    return (f"| set-up | front ends RSS | engine RSS | total | / one in-process server |\n|---|---|---|---|---|\n"
            f"| two in-process servers | {' + '.join(f'{m:.0f}' for m in figures['in-process'][0])} MB | - | "
            f"{sum(figures['in-process'][0]):.0f} MB | {sum(figures['in-process'][0]) / one:.2f}x |\n"
            f"| two front ends + one engine | {' + '.join(f'{m:.0f}' for m in figures['auto'][0])} MB | "
            f"{figures['auto'][1]:.0f} MB | {auto_total:.0f} MB | {auto_total / one:.2f}x |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--editors", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--requests", type=int, default=6, help="measured requests per editor and method")
    parser.add_argument("--rounds", type=int, default=1, help="rounds per method, interleaved (medians reported)")
    parser.add_argument("--device", default=None)
    parser.add_argument("--model", default=None, help="the engine's model (default: the bundled one)")
    parser.add_argument("--verify-rounds", type=int, default=None, help="SPD's verification (default: DecodeOptions')")
    parser.add_argument("--rss", action="store_true", help="also measure memory (two front ends + engine)")
    parser.add_argument("--no-throughput", action="store_true")
    args = parser.parse_args()
    if args.verify_rounds is not None:
        VERIFY["verify_rounds"] = args.verify_rounds
    print(f"load average before: {os.getloadavg()}", flush=True)
    if not args.no_throughput:
        print(throughput(args), flush=True)
    if args.rss:
        print(asyncio.run(memory()), flush=True)
    print(f"load average after: {os.getloadavg()}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
