"""Time per request of every decoding method, on the same prefixes, in one run.

Settings: the paper's (15-token prefix, 10 new tokens) and a realistic code one
(about 1,500 prefix tokens from a standard-library module). Each method runs with
the prompt KV cache warm (what a typing user gets from the server); the cold
prefill is printed separately. Every method generates exactly --max-tokens tokens
(no stop at end of line, no healing) so the work compared is the same.

Methods run interleaved, one request each per round (the order rotating every
round), so a slow spell of a shared machine hits all of them alike; the table
gives the fastest request (min), the median and the spread (max - min). The clock
is read after the device has run its queued work (placement.device_sync).
--placement both adds SPD and beam rows with each step's candidates kept on the
device, against the default that brings them to the CPU (decoding/placement.py),
and SPD k=3 rows with n-grams of the prefix (lookups on the CPU) in each placement.

    .venv/bin/python bench/bench_decoding.py [--repeats 5] [--device cuda] [--placement both] [--model SPEC]
"""

from __future__ import annotations

import argparse
import inspect
import statistics
import time
from dataclasses import dataclass, field

import torch

from bench.baselines import register as register_baselines
from ngram_db.memory import MemoryNgrams
from spd_lsp.engine.decoding.placement import CPU, device_sync
from spd_lsp.api import DecodeOptions, DecodeRequest
from spd_lsp.engine.local import LocalEngine
from spd_lsp.engine.model import load_model


@dataclass
class Row:
    name: str
    method: str
    k: int
    candidate_device: torch.device | None = CPU
    ngrams: bool = False  # SPD with an in-memory n-gram source built from the prefix
    totals: list[float] = field(default_factory=list)  # seconds per request
    steps: list[float] = field(default_factory=list)  # ms per forward step

    @property
    def best(self) -> float:
        return min(self.totals)


METHODS = [
    ("greedy", "greedy", 1),
    ("SPD k=3", "superposed", 3),
    ("SPD k=8", "superposed", 8),
    ("nucleus k=3 sequential", "nucleus", 3),
    ("nucleus k=8 sequential", "nucleus", 8),
    ("nucleus k=3 batched", "nucleus_batched", 3),
    ("nucleus k=8 batched", "nucleus_batched", 8),
    ("beam k=3", "beam", 3),
    ("beam k=8", "beam", 8),
]
ON_DEVICE = " (candidates on device)"


def code_prefix(engine: LocalEngine, tokens: int) -> str:
    import argparse as source_module

    ids = engine.encode(inspect.getsource(source_module))[:tokens]
    return engine.tokenizer.decode(ids)


def paper_prefix(engine: LocalEngine) -> str:
    text = "The history of the city begins in the early nineteenth century, when a small group of settlers arrived"
    return engine.tokenizer.decode(engine.encode(text)[:15])


def make_rows(placement: str) -> list[Row]:
    rows = [Row(name, method, k) for name, method, k in METHODS]
    if placement == "device":
        return [Row(r.name, r.method, r.k, None) for r in rows]
    if placement == "both":  # only SPD and beam choose among candidates
        rows += [Row(r.name + ON_DEVICE, r.method, r.k, None) for r in rows if r.method in ("superposed", "beam")]
        rows += [Row("SPD k=3 + n-grams", "superposed", 3, CPU, True),
                 Row("SPD k=3 + n-grams" + ON_DEVICE, "superposed", 3, None, True)]
    return rows


def run_once(engine: LocalEngine, prefix: str, row: Row, max_tokens: int) -> None:
    options = DecodeOptions.of(method=row.method, k=row.k, max_tokens=max_tokens, stop_at_newline=False, heal=False,
                               seed=0)
    engine.candidate_device = row.candidate_device
    engine.set_ngrams(MemoryNgrams.from_sequences([engine.encode(prefix)]) if row.ngrams else None)
    device_sync(engine.runner.device)
    started = time.perf_counter()
    result = engine.complete(DecodeRequest(prefix, options))
    device_sync(engine.runner.device)
    row.totals.append(time.perf_counter() - started)
    row.steps.append(result.timings.per_step_ms)


def time_interleaved(engine: LocalEngine, prefix: str, rows: list[Row], max_tokens: int, repeats: int) -> None:
    """One warm-up request per row (prompt cache, kernels for each shape), then `repeats` rounds."""
    for row in rows:
        run_once(engine, prefix, row, max_tokens)
        row.totals.clear()
        row.steps.clear()
    for round_ in range(repeats):
        shift = round_ % len(rows)
        for row in rows[shift:] + rows[:shift]:
            run_once(engine, prefix, row, max_tokens)


def cold_prefill(engine: LocalEngine, prefix: str) -> float:
    engine.runner.rewind(0)
    device_sync(engine.runner.device)
    started = time.perf_counter()
    engine.runner.prefill(engine.encode(prefix))
    device_sync(engine.runner.device)
    return time.perf_counter() - started


def print_table(rows: list[Row]) -> None:
    greedy = rows[0].best
    spd = {r.k: r.best for r in rows if r.method == "superposed" and r.candidate_device == CPU and not r.ngrams}
    print("| method | min ms | median ms | spread ms | ms / step (min) | x greedy (min) | x SPD same k (min) |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    for row in rows:
        versus = f"{row.best / spd[row.k]:.2f}" if row.k in spd and row.method != "greedy" else "-"
        print(f"| {row.name} | {row.best * 1000:.0f} | {statistics.median(row.totals) * 1000:.0f} | "
              f"{(max(row.totals) - row.best) * 1000:.0f} | {min(row.steps):.1f} | {row.best / greedy:.2f} | {versus} |")


def weight_bytes(model: torch.nn.Module) -> int:
    return sum(p.numel() * p.element_size() for p in model.parameters())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5, help="interleaved rounds (requests per method)")
    parser.add_argument("--max-tokens", type=int, default=10)
    parser.add_argument("--code-tokens", type=int, default=1500)
    parser.add_argument("--model")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--int8", action="store_true")
    parser.add_argument("--placement", choices=["cpu", "device", "both"], default="cpu",
                        help="where SPD/beam keep each step's candidates (both: rows for each)")
    args = parser.parse_args()
    register_baselines()  # the batched nucleus rows

    started = time.perf_counter()
    loaded = load_model(args.model, args.device, quantize="int8" if args.int8 else None)
    engine = LocalEngine(loaded)
    print(f"model {loaded.name} on {loaded.device} ({loaded.dtype}{', int8 linears' if args.int8 else ''}), "
          f"torch threads {torch.get_num_threads()}; ready in {time.perf_counter() - started:.2f} s "
          f"(weights {loaded.load_s:.2f} s, engine set-up and warm-up the rest); "
          f"{args.repeats} interleaved rounds")
    for label, prefix in (("paper: 15-token prefix", paper_prefix(engine)), (f"code: {args.code_tokens}-token prefix", code_prefix(engine, args.code_tokens))):
        print(f"\n## {label}, {args.max_tokens} new tokens; cold prefill {cold_prefill(engine, prefix) * 1000:.0f} ms")
        rows = make_rows(args.placement)
        time_interleaved(engine, prefix, rows, args.max_tokens, args.repeats)
        print_table(rows)
        step_s = min(rows[0].steps) / 1000
        if step_s and not args.int8:
            print(f"greedy step reads {weight_bytes(loaded.model) / 1e6:.0f} MB of weights: "
                  f"{weight_bytes(loaded.model) / step_s / 1e9:.1f} GB/s effective")


if __name__ == "__main__":
    main()
