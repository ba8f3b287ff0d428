"""Where a batch step's time goes: the batch forward against the host work around it (in process).

N editors submit superposed requests (k = 3, 10 tokens, n-grams off) to one `Batcher` over
the bundled model, each waiting for its answer before the next (the typing of
`bench_engine.py`, without the socket; the cold prefills before are not measured). Reports per step: wall time, the batch forward
(membership changes included), and the host share = 1 - forward / step; with `--profile`, the
model thread's cProfile, the functions with most time of their own.

`--forward-costs` first measures what the model's forwards alone make of SPD / batched nucleus
on this machine, whatever the scheduling: the batch forward of N rows (SPD, one row a request)
and of k*N rows (nucleus), at the benchmark's context length, and one verification forward of
N requests' prefix trees (`--nodes` tokens each, as `verify_together` runs them). A round of
10 steps for N requests costs 10 x step(N) + verification for SPD and 10 x step(kN) for
nucleus in forwards; the ratio, with verification on and off, is what SPD serves more where
forwards are all the work (the shared per-request prefill lowers it; per-row host work and
row copies, which nucleus has k times, raise it). Minimum of `--tries` forwards each.

    nice .venv/bin/python -m bench.bench_engine_step [--editors 8] [--requests 4] [--verify-rounds 0] [--profile]
    nice .venv/bin/python -m bench.bench_engine_step --forward-costs --editors 8 16 32 --requests 0
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import threading
import time
from dataclasses import dataclass

import torch
from transformers import DynamicCache
from bench.bench_engine import TYPED_CHARS, documents
from spd_lsp.api import DecodeOptions, DecodeRequest
from spd_lsp.engine.local import LocalEngine
from spd_lsp.engine.decoding.lm import ModelRunner
from spd_lsp.engine.decoding.placement import device_sync
from spd_lsp.engine.decoding.verify import packed_logits
from spd_lsp.engine.decoding.padding import key_values, padded_cache
from spd_lsp.engine.batcher import BatchJob, Batcher
from spd_lsp.engine.decoding.slots import BatchCache
from spd_lsp.engine.model import load_model

PROFILES: list[cProfile.Profile] = []


def profiled(run):
    def wrapper(self) -> None:
        profile = cProfile.Profile()
        profile.enable()
        try:
            run(self)
        finally:
            profile.disable()
            PROFILES.append(profile)
    return wrapper


def editor(scheduler: Batcher, index: int, prefix: str, typed: str, options: DecodeOptions, requests: int,
           barrier: threading.Barrier) -> None:
    scheduler.submit(BatchJob(DecodeRequest(prefix, options), affinity=f"editor{index}")).result(timeout=600)  # cold, not measured
    barrier.wait()
    for j in range(1, requests + 1):
        scheduler.submit(BatchJob(DecodeRequest(prefix + typed[: j * TYPED_CHARS], options), affinity=f"editor{index}")).result(timeout=600)


@dataclass(eq=False)
class Row:
    """A batch member as `BatchCache` sees it: `length` real positions, its prompt's key/values."""

    length: int
    prompt_rows: list
    rows: int = 1

    @property
    def state(self) -> "Row":
        return self

    def parents(self) -> list[int]:
        return list(range(self.rows))

    @classmethod
    def of(cls, prompt: list, length: int) -> "Row":
        """A row holding the first `length` positions of `prompt`'s key/values (views)."""
        return cls(length, [(keys[:, :, :length], values[:, :, :length]) for keys, values in prompt])


def forward_costs(runner: ModelRunner, editors: int, k: int, context: int, nodes: int, tries: int) -> dict[str, float]:
    """Seconds of a batch step of `editors` rows and of k * `editors` rows over `context` cached positions,
    and of one verification forward of `editors` prefix trees of about `nodes` tokens (3 rows)."""
    prompt = DynamicCache()
    runner.forward(prompt, ids=torch.randint(3, 1000, (1, context)))
    rows = key_values(prompt)

    def step(count: int) -> float:
        batch = BatchCache(runner)
        members = [Row.of(rows, context - i % 7) for i in range(count)]
        inputs = runner.embed(torch.randint(3, 1000, (count, 1)))
        times = []
        for _ in range(tries + 1):
            started = time.perf_counter()
            batch.forward(members, inputs)
            device_sync(runner.device)
            times.append(time.perf_counter() - started)
        return min(times[1:])  # the first joins

    def verify() -> float:
        per_row = nodes // 3
        trees = [[tuple(range(10 + r * per_row, 10 + (r + 1) * per_row + 1)) for r in range(3)] for _ in range(editors)]
        times = []
        for _ in range(tries):
            cache = padded_cache([rows] * editors, context)
            started = time.perf_counter()
            packed_logits(runner, cache, trees, [context] * editors)
            device_sync(runner.device)
            times.append(time.perf_counter() - started)
        return min(times)

    return {"spd": step(editors), "nucleus": step(k * editors), "verify": verify()}


def print_forward_costs(runner: ModelRunner, editors: list[int], context: int, nodes: int, tries: int) -> None:
    print(f"forwards alone at {context} cached positions (min of {tries}):\n| editors | step N rows | step 3N rows | "
          f"verification of N x {nodes} nodes | SPD/nucleus in forwards, verification on | off |\n|---|---|---|---|---|---|")
    for count in editors:
        t = forward_costs(runner, count, 3, context, nodes, tries)
        on = 10 * t["nucleus"] / (10 * t["spd"] + t["verify"])
        print(f"| {count} | {1000 * t['spd']:.1f} ms | {1000 * t['nucleus']:.1f} ms | {1000 * t['verify']:.1f} ms | "
              f"{on:.2f}x | {t['nucleus'] / t['spd']:.2f}x |", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--editors", type=int, nargs="+", default=[8])
    parser.add_argument("--requests", type=int, default=4)
    parser.add_argument("--verify-rounds", type=int, default=None)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--forward-costs", action="store_true", help="first what the forwards alone make of SPD / nucleus")
    parser.add_argument("--nodes", type=int, default=25, help="prefix-tree tokens verified per request (--forward-costs)")
    parser.add_argument("--tries", type=int, default=5)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--model", default=None, help="default: the bundled one")
    args = parser.parse_args()
    verify = {} if args.verify_rounds is None else {"verify_rounds": args.verify_rounds}
    options = DecodeOptions.of(k=3, max_tokens=10, alpha=0.0, **verify)
    if args.profile:
        Batcher._run = profiled(Batcher._run)
    engine = LocalEngine(load_model(args.model, device=args.device))
    print(f"load average before: {os.getloadavg()}", flush=True)
    if args.forward_costs:
        with torch.inference_mode():
            context = len(engine.encode(documents(1, 1)[0][0]))
            print_forward_costs(engine.runner, args.editors, context, args.nodes, args.tries)
    if not args.requests:
        return 0
    editors = args.editors[0]
    scheduler = Batcher(engine)
    barrier = threading.Barrier(editors + 1)
    threads = [threading.Thread(target=editor, args=(scheduler, i, prefix, typed, options, args.requests, barrier))
               for i, (prefix, typed) in enumerate(documents(editors, args.requests))]
    for thread in threads:
        thread.start()
    barrier.wait()
    before, counts, started = dict(scheduler.seconds), dict(scheduler.counts), time.perf_counter()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - started
    steps = scheduler.counts["steps"] - counts["steps"]
    verifications = scheduler.counts["verifyForwards"] - counts["verifyForwards"]
    prefills = scheduler.counts["prefillForwards"] - counts["prefillForwards"]
    step, forward, verify, prefill = (scheduler.seconds[name] - before[name]
                                      for name in ("step", "forward", "verify", "prefill"))
    scheduler.close()
    print(f"steps {steps}: {1000 * step / steps:.1f} ms a step, forward {1000 * forward / steps:.1f} ms, "
          f"host work {1000 * (step - forward) / steps:.1f} ms = {100 * (1 - forward / step):.0f} % of step time "
          f"(max batch {scheduler.counts['maxBatched']}); of {wall:.1f} s: steps {100 * step / wall:.0f} %, "
          f"verification {100 * verify / wall:.0f} % ({verifications} forwards), "
          f"prefill {100 * prefill / wall:.0f} % ({prefills} forwards); "
          f"{1000 * wall / (editors * args.requests):.0f} ms a request")
    print(f"load average after: {os.getloadavg()}", flush=True)
    if PROFILES:
        out = io.StringIO()
        stats = pstats.Stats(PROFILES[0], stream=out)
        stats.sort_stats("tottime").print_stats(15)
        stats.sort_stats("cumulative").print_stats("spd_lsp", 25)  # the project's own functions, with callees
        print(out.getvalue())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
