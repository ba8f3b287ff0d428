"""The first warm requests after a start, while the step compiles in the background: with the compile pausing for
requests (`engine/fast/compile.py`, `serving`) and without, each in a fresh process, alternating.

A start with the compile cache warm (the bench's first process fills it), the shipped options, 512-token prefixes of
an installed package's sources (each one prefilled once, then requested again and again, as a typist's window is):
`--requests` requests one after another from the moment the model is loaded. Printed per process: the latency of
each request and when the step's graph was ready (after the requests: the process waits for its compiles); then
per variant the medians over the processes of the requests' sum, median, 90th percentile and maximum.

    PYTHONPATH=. .venv/bin/python -m bench.bench_compile_pause [--rounds 3] [--requests 24]

Not part of `make test`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time


def one_process(requests: int, *, pause: bool) -> dict:
    """This process: load, then `requests` warm requests; their latencies (ms) and when the step graph was ready."""
    started = time.perf_counter()
    from bench.bench_server import prefixes
    from bench.bench_vs_llamacpp import package_source
    from spd_lsp.api import DecodeRequest
    from spd_lsp.engine import fast
    from spd_lsp.engine.fast import compile as step_compile
    from spd_lsp.engine.local import LocalEngine
    from spd_lsp.engine.model import load_model
    from spd_lsp.settings import Settings

    if not pause:
        step_compile._yield_to_requests = lambda frame, event, arg: None  # the compile never waits
    loaded = load_model(compile=True)
    engine = LocalEngine(loaded)
    backend = fast.attached(loaded.model)
    shipped = Settings().decode_options()
    texts = prefixes(package_source("jinja2"), 512, 6, engine.tokenizer)
    loaded_s = time.perf_counter() - started
    latencies, ready_at = [], None
    for i in range(requests):
        begun = time.perf_counter()
        engine.complete(DecodeRequest(texts[i % len(texts)], shipped))
        latencies.append((time.perf_counter() - begun) * 1000)
        if ready_at is None and backend is not None and backend.step_fn.ready:
            ready_at = time.perf_counter() - started
    if backend is not None:  # an interpreter exiting under a compiling thread aborts: let it finish
        for compiled in (backend.step_fn, backend.tree_fn):
            compiled.wait(timeout=1200)
        if ready_at is None and backend.step_fn.ready:
            ready_at = time.perf_counter() - started
    return {"loaded_s": loaded_s, "latencies": latencies, "ready_s": ready_at}


def summary(latencies: list[float]) -> dict[str, float]:
    ordered = sorted(latencies)
    return {"sum": sum(latencies), "median": statistics.median(latencies),
            "p90": ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))], "max": ordered[-1]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--requests", type=int, default=24)
    parser.add_argument("--child", choices=("pause", "free"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(one_process(args.requests, pause=args.child == "pause")))
        return 0

    def run(kind: str) -> dict:
        out = subprocess.run([sys.executable, "-m", "bench.bench_compile_pause", "--child", kind, "--requests",
                              str(args.requests)], capture_output=True, text=True, check=True,
                             env={**os.environ, "SPD_LSP_COMPILE": "background"})
        return json.loads(out.stdout.strip().splitlines()[-1])

    print("filling the compile cache ...", flush=True)
    run("pause")
    results: dict[str, list[dict]] = {"pause": [], "free": []}
    for r in range(args.rounds):
        for kind in (("pause", "free") if r % 2 == 0 else ("free", "pause")):
            one = run(kind)
            results[kind].append(one)
            ready = "never" if one["ready_s"] is None else f"{one['ready_s']:.1f} s"
            print(f"round {r} {kind:>5}: load {os.getloadavg()[0]:.1f}, loaded {one['loaded_s']:.1f} s, step graph ready "
                  f"{ready}; ms " + " ".join(f"{x:.0f}" for x in one["latencies"]), flush=True)
    print()
    print(f"| the first {args.requests} warm requests, medians of {args.rounds} starts | sum ms | median ms | p90 ms | max ms |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for kind, label in (("free", "compile never waits (before)"), ("pause", "compile waits for requests")):
        rows = [summary(one["latencies"]) for one in results[kind]]
        cells = [statistics.median(row[name] for row in rows) for name in ("sum", "median", "p90", "max")]
        print(f"| {label} | " + " | ".join(f"{c:,.0f}" for c in cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
