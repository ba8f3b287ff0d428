"""The secret filter's cost on indexing throughput (issue 24, item 2; target <= 10 %).

Indexes a real corpus (installed packages' sources) into fresh LMDB stores with the
bundled model's tokenizer, the filter on and off in turns, and prints files, tokens/s
of each and the cost; with --recall also how many lines detect-secrets flags when it
scans every line (no gate) and how many of those the gate missed.

    PYTHONPATH=$PWD .venv/bin/python -m bench.bench_secret_filter            # pygls, lsprotocol, cattrs, requests, urllib3, pathspec
    PYTHONPATH=$PWD .venv/bin/python -m bench.bench_secret_filter --recall --repeats 3 DIR ...
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import ngram_db.secrets as secrets
from ngram_db.indexer import IndexOptions, Indexer
from ngram_db.store import NgramStore

PACKAGES = ("pygls", "lsprotocol", "cattrs", "requests", "urllib3", "pathspec")


def _corpus(dirs: list[str]) -> list[Path]:
    if dirs:
        return [Path(d).resolve() for d in dirs]
    import importlib

    return [Path(importlib.import_module(name).__file__).parent for name in PACKAGES]


def _index(roots: list[Path], tokenizer: object, *, secret_filter: bool) -> tuple[float, int, int, int]:
    from spd_lsp.engine.model import encode_texts, tokenizer_identity

    where = Path(tempfile.mkdtemp(prefix="spd-bench-secrets-"))
    try:
        with NgramStore.open(where / "store", tokenizer_identity(tokenizer)) as store:
            indexer = Indexer(store, lambda text: encode_texts(tokenizer, [text])[0], roots,
                              IndexOptions(secret_filter=secret_filter, max_files=10**6, max_total_bytes=10**10),
                              encode_batch=lambda texts: encode_texts(tokenizer, texts))
            started, cpu = time.perf_counter(), time.process_time()
            report = indexer.index()
            seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
        return seconds, cpu, report.tokens, report.files_indexed, report.secret_line_count
    finally:
        shutil.rmtree(where, ignore_errors=True)


def _recall(roots: list[Path]) -> None:
    files = [p for root in roots for p in root.rglob("*.py")]
    flagged = missed = gated = lines = 0
    started = time.perf_counter()
    for path in files:
        text = path.read_text(errors="replace")
        every = text.split("\n")
        lines += len(every)
        gated += len(secrets._gated(text))
        with secrets._lock:
            if not secrets._configured:
                secrets._configure()
            full = {n for n, line in enumerate(every, 1) if secrets._scan(every, n, line, str(path))}
        got = set(secrets.secret_lines(text, str(path)))
        flagged += len(full)
        for number in sorted(full - got):
            missed += 1
            print(f"  missed by the gate: {path}:{number}")
    seconds = time.perf_counter() - started
    print(f"recall: {lines:,} lines of {len(files)} .py files; the gate passes {gated:,} ({gated / max(lines, 1):.2%}); "
          f"detect-secrets on every line flags {flagged}, the gate missed {missed} ({seconds:.0f} s)")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dirs", nargs="*", help="source trees (default: some installed packages)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--recall", action="store_true", help="also scan every line without the gate (slow)")
    args = parser.parse_args(argv)
    from spd_lsp.engine.model import load_tokenizer

    roots = _corpus(args.dirs)
    tokenizer = load_tokenizer(None)
    secrets.secret_lines("warm = 'up'\npassword = 'x'\n")  # imports and plugin set-up once, outside the timings
    runs: dict[bool, list[float]] = {True: [], False: []}
    cpu_runs: dict[bool, list[float]] = {True: [], False: []}
    for repeat in range(args.repeats):
        for secret_filter in ((False, True) if repeat % 2 == 0 else (True, False)):  # interleaved
            seconds, cpu, tokens, files, left_out = _index(roots, tokenizer, secret_filter=secret_filter)
            runs[secret_filter].append(tokens / seconds)
            cpu_runs[secret_filter].append(tokens / cpu)
            print(f"  run {repeat + 1} filter={'on ' if secret_filter else 'off'}: {files} files, {tokens:,} tokens "
                  f"in {seconds:.2f} s ({cpu:.2f} CPU s) = {tokens / seconds:,.0f} tokens/s; "
                  f"{left_out} secret lines left out")
    print(f"corpus: {', '.join(map(str, roots))}")
    for label, rates in (("wall", runs), ("CPU", cpu_runs)):  # CPU time: what the filter costs on a loaded machine
        off, on = statistics.median(rates[False]), statistics.median(rates[True])
        print(f"median tokens per {label} second: filter off {off:,.0f}, on {on:,.0f}: cost {100 * (1 - on / off):.1f} % "
              f"(target <= 10 %)")
    if args.recall:
        _recall(roots)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
