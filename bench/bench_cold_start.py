"""Cold start: a fresh process to the model loaded, and to the first drafts of `spd-lsp --stdio`.

Each round starts, in fresh subprocesses and interleaved:

- load: `python -c "import torch; from spd_lsp.engine.loading import load_local; load_local(ModelSpec())"` as the
  server's loader runs it (the bundled model, its dequantised cache and the compile cache present, the decode
  step compiling in the background); process start -> `load_local` returned, split into interpreter start,
  `import torch`, `import spd_lsp.engine.loading`, `load_model` (the model's `loadSeconds`) and the engine's
  set-up (`LocalEngine`: token table, warm-up);
- lsp: the real `spd-lsp --stdio` (no workspace folder: no store to index) through an LSP client: process start ->
  `initialize` answered -> the first `textDocument/inlineCompletion` on a real file (~500 tokens of this
  repository's sources before the cursor) answered with drafts; that request waits behind the model's load.

`--evict` drops the model's files (its dequantised cache: weights, int4/int8 copies, tokenizer) from the page cache
before every start (`posix_fadvise(DONTNEED)`): a start after a reboot, where they come from the disk.

`--against REV` also runs an older commit's `spd_lsp` (`git archive` into a temporary directory), interleaved
with this checkout's, and prints new / old per figure. Medians over the rounds, with the load average before and
after (`uptime`): the machine is shared, compare ratios within one run.

    PYTHONPATH=. nice -n 5 .venv/bin/python -m bench.bench_cold_start [--rounds 5] [--against main] [--no-lsp] [--evict]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from lsprotocol import types as lsp
from pygls.lsp.client import LanguageClient

REPO = Path(__file__).resolve().parent.parent
TIMEOUT_S = 300
FILE = REPO / "spd_lsp" / "session" / "session.py"  # a real file; the cursor after its first ~2,000 characters
PREFIX_CHARS = 2000

# The child of a load round: perf_counter is CLOCK_MONOTONIC on Linux, one clock for parent and child.
LOAD_CHILD = """
import json, os, time
started = time.perf_counter()
import torch
torch_s = time.perf_counter()
from spd_lsp.engine.loading import load_local
imported = time.perf_counter()
try:
    from spd_lsp.api import ModelSpec
except ImportError:  # a revision before ModelSpec (--against)
    loaded = load_local(None)
else:
    loaded = load_local(ModelSpec())
done = time.perf_counter()
print(json.dumps({"child": started, "torch": torch_s - started, "import loading": imported - torch_s,
                  "load_model": loaded.info["loadSeconds"], "engine": done - imported - loaded.info["loadSeconds"],
                  "done": done}), flush=True)
os._exit(0)  # not waiting for the background compile (a daemon thread killed at exit aborts the interpreter)
"""


def checkout_of(rev: str, into: Path) -> Path:
    """`rev`'s spd_lsp and ngram_db, unpacked under `into` (an import root for PYTHONPATH)."""
    archive = subprocess.run(["git", "-C", str(REPO), "archive", rev, "spd_lsp", "ngram_db"], check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def env_for(root: Path, store: Path) -> dict[str, str]:
    """`root` first on the path; the stores under `store`; the model and compile caches stay the user's."""
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")]),
            "SPD_LSP_CACHE": str(store), "XDG_RUNTIME_DIR": str(store)}


def model_files() -> list[Path]:
    from spd_lsp.engine.model import local_directory, resolve_source

    directory = local_directory(resolve_source(None))
    return sorted(directory.glob("*.safetensors")) + [directory / "tokenizer.json"]


def evict(files: list[Path]) -> None:
    """`files` out of the page cache (where no process maps them): the next start reads them from the disk."""
    for path in files:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fdatasync(fd)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def load_round(root: Path, store: Path) -> dict[str, float]:
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", LOAD_CHILD], cwd=root, env=env_for(root, store), check=True,
                          capture_output=True, text=True, timeout=TIMEOUT_S)
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    return {"interpreter": figures["child"] - started, "torch": figures["torch"],
            "import loading": figures["import loading"], "load_model": figures["load_model"],
            "engine": figures["engine"], "total": figures["done"] - started}


async def lsp_round(root: Path, store: Path, prefix: str) -> dict[str, float]:
    started = time.perf_counter()
    client = LanguageClient("spd-bench-cold", "1")
    await client.start_io(sys.executable, "-m", "spd_lsp.cli", "--stdio", env=env_for(root, store), cwd=str(root))
    try:
        await asyncio.wait_for(client.initialize_async(lsp.InitializeParams(capabilities=lsp.ClientCapabilities())),
                               TIMEOUT_S)
        initialized = time.perf_counter()
        client.initialized(lsp.InitializedParams())
        uri = "file:///bench/cold_start.py"
        client.text_document_did_open(lsp.DidOpenTextDocumentParams(
            lsp.TextDocumentItem(uri=uri, language_id="python", version=1, text=prefix)))
        lines = prefix.split("\n")
        position = lsp.Position(line=len(lines) - 1, character=len(lines[-1]))
        params = lsp.InlineCompletionParams(
            text_document=lsp.TextDocumentIdentifier(uri), position=position,
            context=lsp.InlineCompletionContext(trigger_kind=lsp.InlineCompletionTriggerKind.Automatic))
        while True:  # answered once the model is loaded (the request waits behind the load)
            result = await asyncio.wait_for(client.text_document_inline_completion_async(params), TIMEOUT_S)
            if result and result.items:
                break
            if time.perf_counter() - started > TIMEOUT_S:
                raise TimeoutError("no drafts from the server")
            await asyncio.sleep(0.05)
        drafts = time.perf_counter()
        status = await asyncio.wait_for(client.workspace_execute_command_async(
            lsp.ExecuteCommandParams(command="spd.status")), TIMEOUT_S)
        return {"initialize": initialized - started, "load_model": status["model"]["loadSeconds"],
                "request": status["last"]["totalMs"] / 1000, "first drafts": drafts - started}
    finally:
        await client.shutdown_async(None)
        client.exit(None)
        await client.stop()


def uptime() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def table(title: str, samples: dict[str, list[dict[str, float]]]) -> None:
    versions = list(samples)
    keys = list(samples[versions[0]][0])
    head = " | ".join(f"{v} (median s)" for v in versions) + (" | new / old" if len(versions) == 2 else "")
    print(f"\n### {title}: {len(samples[versions[0]])} rounds\n\n| phase | {head} |\n|---" + " | ---:" * (
        len(versions) + (len(versions) == 2)) + " |")
    for key in keys:
        medians = [statistics.median(s[key] for s in samples[v]) for v in versions]
        ratio = f" | {medians[0] / medians[1]:.2f}" if len(medians) == 2 and medians[1] else (" | -" if len(medians) == 2 else "")
        print(f"| {key} | " + " | ".join(f"{m:.2f}" for m in medians) + ratio + " |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--against", help="an older commit (e.g. main) run interleaved with this checkout")
    parser.add_argument("--no-lsp", action="store_true", help="only the load rounds")
    parser.add_argument("--evict", action="store_true", help="the model's files dropped from the page cache before each start")
    args = parser.parse_args()
    prefix = FILE.read_text()[:PREFIX_CHARS]
    with tempfile.TemporaryDirectory(prefix="spd-bench-cold-") as tmp:
        roots = {"new": REPO}
        if args.against:
            roots["old"] = checkout_of(args.against, Path(tmp))
        store = Path(tmp) / "store"
        store.mkdir()
        print(f"load average before: {uptime()}; {args.rounds} interleaved rounds of {', '.join(roots)}"
              f"{f' (old = {args.against})' if args.against else ''}"
              f"{'; model files evicted from the page cache before each start' if args.evict else ''}", flush=True)
        loads: dict[str, list[dict[str, float]]] = {v: [] for v in roots}
        firsts: dict[str, list[dict[str, float]]] = {v: [] for v in roots}
        load_round(REPO, store)  # untimed: the caches (model, compile, page cache) as a later start finds them
        files = model_files() if args.evict else []
        for round_ in range(args.rounds):
            order = list(roots) if round_ % 2 == 0 else list(reversed(roots))
            for version in order:
                evict(files)
                loads[version].append(load_round(roots[version], store))
                if not args.no_lsp:
                    evict(files)
                    firsts[version].append(asyncio.run(lsp_round(roots[version], store, prefix)))
            print(f"round {round_ + 1}: " + ", ".join(
                f"{v} load {loads[v][-1]['total']:.2f} s" + (f" drafts {firsts[v][-1]['first drafts']:.2f} s"
                                                            if firsts[v] else "") for v in roots), flush=True)
        table("process start -> model loaded (load_local returned)", loads)
        if not args.no_lsp:
            table("spd-lsp --stdio: process start -> first drafts", firsts)
        print(f"\nload average after: {uptime()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
