"""A start as a user meets it: process start -> first drafts, then a typist's requests while the background work
(the kernel library's build on a first start, the decode step's and the trees' compiles) runs, until it settles.

One real `spd-lsp --stdio` window with default settings (`engine` "auto": this run's own shared engine, started by the
window and stopped at the end), the model of `--model` (default the bundled one). `--first-start`: empty model, kernel
and compile caches (a temporary `SPD_LSP_MODEL_CACHE`), as on a new machine; without it the user's caches are used
(run once before to fill them). The window opens a document (~1,500 tokens of this repository's sources, no workspace
folder) and asks for drafts at its end until they come (the request waits behind the load): the first drafts. Then a
request is made every `--interval` seconds, the cursor stepping back one character each time (the prompt cache serves
all but the last few tokens, and no shown draft answers it); each request is marked "background" where the engine's
`spd.status` just before it said a graph was compiling (the step, the padded step or a tree width: `compiling`) or the
fast plan was waiting for the kernel library, else "settled"; the run goes on for `--min-seconds` and at least
`--settled` settled requests (a request the model did not answer is not counted). Printed: the first drafts' time (and
their phases), when the background work last ran (from process start), and the median request in each state with their
ratio. Targets (issue 45): first drafts <= 5 s (bundled model) and <= 15 s (a 1.7B Q4_K_M) on a first start,
background work <= 20 s with the caches present, a request during it <= 1.2x a settled one. The medians' ratio
compares requests at different cursors (a draft of 2 steps or of 9); the paired ratio asks each request of the
background work again once settled, at the same cursor (the same prompt, steps and tree), and gives the median of the
pairs' ratios.

    PYTHONPATH=. nice .venv/bin/python -m bench.bench_first_start [--model PATH.gguf] [--first-start]
        [--interval 1.0] [--settled 10] [--min-seconds 120] [--timeout 900]

Not part of `make test`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from datetime import datetime
from typing import Any

from lsprotocol import types as lsp

from bench.bench_server import Document, inline_params, position_at
from bench.bench_windows import Window, documents, environment, stop_engine

BACK = 64  # the n-th request's cursor n % BACK characters before the document's end: a prefix no shown draft extends


def pending(model: dict[str, Any]) -> list[str]:
    """The engine's background work running now, from its `spd.status` model info: a graph compiling a shape
    (`compiling`), or the fast plan waiting for the kernel library."""
    parts = {"step": model, "paddedStep": model.get("paddedStep") or {}, "treeStep": model.get("treeStep") or {}}
    left = [f"{name} {info['compiling']}" for name, info in parts.items() if info.get("compiling")]
    if model.get("fastPlanState") not in (None, "applied"):
        left.append(f"fast plan {model.get('fastPlanState')}")
    return left


def drafts(result: Any) -> list[Any]:
    """The items of an inline completion answer (a list, a list object, or None)."""
    return list(getattr(result, "items", result) or [])


def first_start_env(env: dict[str, str]) -> tuple[dict[str, str], str]:
    """`env` with empty model, kernel and compile caches."""
    cache = tempfile.mkdtemp(prefix="spd-first-start-")
    fresh = {k: v for k, v in env.items() if k not in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")}
    return {**fresh, "SPD_LSP_MODEL_CACHE": cache, "XDG_CACHE_HOME": cache}, cache


async def run(args: argparse.Namespace) -> dict[str, Any]:
    env, _ = environment()
    if args.first_start:
        env, _ = first_start_env(env)
    options = {"model": args.model} if args.model else {}
    text, offset = documents(1)[0]
    started = time.perf_counter()
    print(f"started at {datetime.now().isoformat(timespec='milliseconds')}", file=sys.stderr, flush=True)
    window = Window(env, options)
    engine_pid = None
    rows: list[dict[str, Any]] = []
    figures: dict[str, Any] = {"model": args.model or "bundled", "firstStart": args.first_start}
    try:
        await window.client.start_io(sys.executable, "-m", "spd_lsp.cli", "--stdio", env=env)
        await window.client.initialize_async(lsp.InitializeParams(capabilities=lsp.ClientCapabilities(),
                                                                  initialization_options=options))
        window.client.initialized(lsp.InitializedParams())
        figures["initialize_s"] = time.perf_counter() - started
        document = Document(window.bench, "file:///bench/first_start.py", text)
        params = inline_params(document.uri, position_at(document.text, offset))
        while not drafts(await asyncio.wait_for(window.client.text_document_inline_completion_async(params), args.timeout)):
            await asyncio.sleep(0.05)  # no drafts yet (a request made while the model loads waits behind it)
        print(f"first drafts after {time.perf_counter() - started:.1f} s", file=sys.stderr, flush=True)
        figures["first_drafts_s"] = time.perf_counter() - started
        first = await window.status()
        figures["load_s"] = (first["model"] or {}).get("loadSeconds")
        engine_pid = (first["model"] or {}).get("pid")
        print(f"first drafts' phases: {json.dumps(first.get('last'))}", file=sys.stderr, flush=True)
        settled_at, asked = None, 0
        while (sum(row["state"] == "settled" for row in rows) < args.settled
               or time.perf_counter() - started < args.min_seconds):
            if time.perf_counter() - started > args.timeout:
                raise TimeoutError(f"not settled after {args.timeout} s: {rows[-1] if rows else None}")
            await asyncio.sleep(args.interval)
            asked += 1
            row = await ask(window, document, offset - asked % BACK, started)
            if row is None:
                continue
            if row["pending"]:
                settled_at = None
            elif settled_at is None:
                settled_at = row["at_s"]
            rows.append(row)
        # Each request made during the background work again, settled, at the same cursor: the same prompt and
        # drafts (the same steps and tree), so the pair's ratio is the background work's cost alone.
        for row in [r for r in rows if r["state"] == "background"]:
            await asyncio.sleep(args.interval)
            await window.ask(document, row["offset"] - 1)  # elsewhere first: no shown draft answers the next
            await asyncio.sleep(args.interval)
            twin = await ask(window, document, row["offset"], started)
            if twin is not None and not twin["pending"] and twin["phases"]["steps"] == row["phases"]["steps"]:
                row["settled_twin_ms"] = twin["ms"]
        figures["settled_s"] = settled_at
    finally:
        await window.stop()
        stop_engine(engine_pid)
    for state in ("background", "settled"):
        times = [row["ms"] for row in rows if row["state"] == state]
        figures[f"{state}_n"] = len(times)
        figures[f"{state}_median_ms"] = statistics.median(times) if times else None
    if figures["background_median_ms"] and figures["settled_median_ms"]:
        figures["ratio"] = figures["background_median_ms"] / figures["settled_median_ms"]
    pairs = [row["ms"] / row["settled_twin_ms"] for row in rows if row.get("settled_twin_ms")]
    figures["paired_n"] = len(pairs)
    figures["paired_ratio"] = statistics.median(pairs) if pairs else None
    return figures


async def ask(window: Window, document: Document, at: int, started: float) -> dict[str, Any] | None:
    """One request at character `at`, marked "background" where the engine's status just before it said background
    work was running; None where the model did not answer it (typed through a shown draft)."""
    before = await window.status()
    left = pending(before["model"] or {})
    ms = await window.ask(document, at)
    after = await window.status()
    decoded = after["answered"] - before["answered"] - (after["typedThrough"] - before["typedThrough"])
    if not decoded:
        print(json.dumps({"at_s": round(time.perf_counter() - started, 2), "ms": round(ms, 1), "skipped": {
            k: after[k] - before[k] for k in ("requests", "answered", "typedThrough", "cancelled")}}),
              file=sys.stderr, flush=True)
        return None
    last = after.get("last") or {}
    row = {"at_s": round(time.perf_counter() - started, 2), "ms": round(ms, 1), "offset": at,
           "state": "background" if left else "settled", "pending": left,
           "phases": {k: last.get(k) for k in ("prefillMs", "modelMs", "verifyMs", "steps")}}
    print(json.dumps(row), file=sys.stderr, flush=True)
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", help="a .gguf file (default: the bundled model)")
    parser.add_argument("--first-start", action="store_true", help="empty model, kernel and compile caches")
    parser.add_argument("--interval", type=float, default=1.0, help="seconds between typed characters")
    parser.add_argument("--settled", type=int, default=10, help="settled requests before the end")
    parser.add_argument("--min-seconds", type=float, default=120, help="the shortest run (a compile may start late)")
    parser.add_argument("--timeout", type=float, default=900)
    args = parser.parse_args()
    load = " ".join(open("/proc/loadavg").read().split()[:3])
    figures = asyncio.run(run(args))
    print(f"load average before: {load}, after: {' '.join(open('/proc/loadavg').read().split()[:3])}")
    print("\n| model | start | initialize | model load | first drafts | background settled | requests during (median) | settled "
          "(median) | ratio | paired ratio |\n| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    ratio, settled, paired = figures.get("ratio"), figures["settled_s"], figures.get("paired_ratio")
    paired_cell = f"{figures['paired_n']} × {paired:.2f}" if paired else "-"
    print(f"| {figures['model']} | {'first' if args.first_start else 'caches present'} | {figures['initialize_s']:.1f} s "
          f"| {figures['load_s']} s "
          f"| {figures['first_drafts_s']:.1f} s | {f'{settled:.1f} s' if settled is not None else 'at once'} | "
          f"{figures['background_n']} × {figures['background_median_ms'] or 0:.0f} ms | "
          f"{figures['settled_n']} × {figures['settled_median_ms']:.0f} ms | {f'{ratio:.2f}' if ratio else '-'} | "
          f"{paired_cell} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
