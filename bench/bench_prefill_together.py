"""Joining requests prefilled one by one against together (in process, the bundled model).

N editors' prompt caches (the documents of `bench_engine.py`) each lack the last few tokens of
their prompt, as when the user typed; then the N prefills run one by one (`ModelRunner.prefill`,
N forwards) or together (`prefill_together`, ONE forward), interleaved, each on fresh caches.
Prints the medians and their ratio, and the load average.

    nice .venv/bin/python -m bench.bench_prefill_together [--editors 8] [--typed 3] [--repeats 6]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

from bench.bench_engine import documents
from spd_lsp.engine.decoding.lm import ModelRunner, prefill_together
from spd_lsp.api import never_cancelled
from spd_lsp.engine.local import LocalEngine
from spd_lsp.engine.model import load_model


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--editors", type=int, default=8)
    parser.add_argument("--typed", type=int, default=3, help="tokens each prompt adds to its cache")
    parser.add_argument("--repeats", type=int, default=6)
    args = parser.parse_args()
    engine = LocalEngine(load_model())
    base = engine.runner
    prompts = [engine.encode(prefix + typed) for prefix, typed in documents(args.editors, 8)]
    print(f"prompt tokens {[len(p) for p in prompts]}; load average before: {os.getloadavg()}", flush=True)

    def cached() -> list[ModelRunner]:
        runners = [ModelRunner(base.model, base.device, chunk_tokens=base.chunk_tokens, slots=1) for _ in prompts]
        for runner, prompt in zip(runners, prompts):
            runner.prefill(prompt[: -args.typed])
        return runners

    def one_by_one(runners: list[ModelRunner]) -> None:
        for runner, prompt in zip(runners, prompts):
            runner.prefill(prompt)

    def together(runners: list[ModelRunner]) -> None:
        prefill_together(runners, prompts, [never_cancelled] * len(prompts))

    seconds: dict[str, list[float]] = {"one by one": [], "together": []}
    for repeat in range(args.repeats):
        ways = [("one by one", one_by_one), ("together", together)]
        for name, way in ways if repeat % 2 == 0 else ways[::-1]:
            runners = cached()
            started = time.perf_counter()
            way(runners)
            seconds[name].append(time.perf_counter() - started)
    medians = {name: statistics.median(values) for name, values in seconds.items()}
    for name, values in seconds.items():
        print(f"{name}: median {1000 * medians[name]:.0f} ms ({' '.join(f'{1000 * v:.0f}' for v in values)})")
    print(f"together / one by one: {medians['together'] / medians['one by one']:.2f}; "
          f"load average after: {os.getloadavg()}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
