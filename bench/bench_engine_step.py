"""Where a batch step's time goes: the batch forward against the host work around it (in process).

N editors submit superposed requests (k = 3, 10 tokens, n-grams off) to one `Scheduler` over
the bundled model, each waiting for its answer before the next (the typing of
`bench_engine.py`, without the socket; the cold prefills before are not measured). Reports per step: wall time, the batch forward
(cache rebuild included), and the host share = 1 - forward / step; with `--profile`, the
model thread's cProfile, the functions with most time of their own.

    nice .venv/bin/python -m bench.bench_engine_step [--editors 8] [--requests 4] [--verify-rounds 0] [--profile]
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import threading
import time

from bench.bench_engine import TYPED_CHARS, documents
from spd_lsp.decoding.types import DecodeOptions
from spd_lsp.engine import Engine
from spd_lsp.engined.batching import Job, Scheduler
from spd_lsp.model import load_model

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


def editor(scheduler: Scheduler, index: int, prefix: str, typed: str, options: DecodeOptions, requests: int,
           barrier: threading.Barrier) -> None:
    scheduler.submit(Job(prefix, options, affinity=f"editor{index}")).result(timeout=600)  # cold, not measured
    barrier.wait()
    for j in range(1, requests + 1):
        scheduler.submit(Job(prefix + typed[: j * TYPED_CHARS], options, affinity=f"editor{index}")).result(timeout=600)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--editors", type=int, default=8)
    parser.add_argument("--requests", type=int, default=4)
    parser.add_argument("--verify-rounds", type=int, default=None)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    verify = {} if args.verify_rounds is None else {"verify_rounds": args.verify_rounds}
    options = DecodeOptions(k=3, max_tokens=10, alpha=0.0, **verify)
    if args.profile:
        Scheduler._run = profiled(Scheduler._run)
    engine = Engine(load_model())
    print(f"load average before: {os.getloadavg()}", flush=True)
    scheduler = Scheduler(engine)
    barrier = threading.Barrier(args.editors + 1)
    threads = [threading.Thread(target=editor, args=(scheduler, i, prefix, typed, options, args.requests, barrier))
               for i, (prefix, typed) in enumerate(documents(args.editors, args.requests))]
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
          f"{1000 * wall / (args.editors * args.requests):.0f} ms a request")
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
