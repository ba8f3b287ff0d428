"""Cold prefill and how fast a superseded prefill stops, in process, with the bundled model.

For each try: a cold request on a fresh ~`--tokens`-token prompt (prefill and total
time), then the same kind of request cancelled `--cancel-after` ms into its
prefill, timing cancel -> `Cancelled` raised (the chunked prefill checks between
chunks), and the next request's re-prefill (what the cancelled one kept).

    nice .venv/bin/python bench/bench_prefill.py [--dtype auto] [--tokens 512] [--tries 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time

from bench.bench_server import corpus
from spd_lsp.decoding.types import Cancelled, DecodeOptions
from spd_lsp.engine import Engine
from spd_lsp.model import load_model


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dtype", default="auto")
    parser.add_argument("--tokens", type=int, default=512)
    parser.add_argument("--tries", type=int, default=5)
    parser.add_argument("--cancel-after", type=float, default=150, help="ms into the prefill")
    args = parser.parse_args()
    loaded = load_model(dtype=args.dtype)
    engine = Engine(loaded)
    ids = engine.encode(corpus())
    options = DecodeOptions(k=3, max_tokens=10)
    cold, prefill, stop, kept = [], [], [], []
    for attempt in range(args.tries):
        start = 2 * attempt * args.tokens
        prompt = engine.tokenizer.decode(ids[start : start + args.tokens])
        engine.runner.rewind(0)
        result = engine.complete(prompt, options)
        cold.append(1000 * result.timings.total_s)
        prefill.append(1000 * result.timings.prefill_s)

        other = engine.tokenizer.decode(ids[start + args.tokens : start + 2 * args.tokens])
        engine.runner.rewind(0)
        flag = threading.Event()
        cancelled_at: list[float] = []
        timer = threading.Timer(args.cancel_after / 1000, lambda: (cancelled_at.append(time.perf_counter()), flag.set()))
        timer.start()
        try:
            engine.complete(other, options, flag.is_set)
        except Cancelled:
            stop.append(1000 * (time.perf_counter() - cancelled_at[0]))
        timer.cancel()
        kept.append(len(engine.runner.cached_ids))
    print(f"model {loaded.name} on {loaded.device} ({loaded.dtype}), prefill chunk {engine.runner.chunk_tokens} tokens")
    print("| measure | median | max |")
    print("| --- | ---: | ---: |")
    for name, values in ((f"cold {args.tokens}-token request", cold), ("its prefill", prefill),
                         (f"cancel -> stopped ({args.cancel_after:.0f} ms into a prefill)", stop)):
        if values:
            print(f"| {name} | {statistics.median(values):.0f} ms | {max(values):.0f} ms |")
    print(f"tokens kept in the cache by the cancelled prefill: {kept}; {len(stop)}/{args.tries} stopped mid-request")
    return 0


if __name__ == "__main__":
    sys.exit(main())
