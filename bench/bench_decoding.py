"""Time per request of every decoding method, on the same prefixes, in one run.

Settings: the paper's (15-token prefix, 10 new tokens) and a realistic code one
(about 1,500 prefix tokens from a standard-library module). Each method runs with
the prompt KV cache warm (what a typing user gets from the server); the cold
prefill is printed separately. Every method generates exactly --max-tokens tokens
(no stop at end of line, no healing) so the work compared is the same.

    .venv/bin/python bench/bench_decoding.py [--repeats 3] [--int8] [--model SPEC]
"""

from __future__ import annotations

import argparse
import inspect
import statistics
import time

import torch

from spd_lsp.decoding.types import DecodeOptions
from spd_lsp.engine import Engine
from spd_lsp.model import load_model

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


def code_prefix(engine: Engine, tokens: int) -> str:
    import argparse as source_module

    ids = engine.encode(inspect.getsource(source_module))[:tokens]
    return engine.tokenizer.decode(ids)


def paper_prefix(engine: Engine) -> str:
    text = "The history of the city begins in the early nineteenth century, when a small group of settlers arrived"
    return engine.tokenizer.decode(engine.encode(text)[:15])


def time_method(engine: Engine, prefix: str, method: str, k: int, max_tokens: int, repeats: int) -> tuple[float, float]:
    options = DecodeOptions(method=method, k=k, max_tokens=max_tokens, stop_at_newline=False, heal=False, seed=0)
    engine.complete(prefix, options)  # warm the prompt cache and kernels for this shape
    totals, steps = [], []
    for _ in range(repeats):
        result = engine.complete(prefix, options)
        totals.append(result.timings.total_s)
        steps.append(result.timings.per_step_ms)
    return statistics.median(totals), statistics.median(steps)


def cold_prefill(engine: Engine, prefix: str) -> float:
    engine.runner.rewind(0)
    started = time.perf_counter()
    engine.runner.prefill(engine.encode(prefix))
    return time.perf_counter() - started


def weight_bytes(model: torch.nn.Module) -> int:
    return sum(p.numel() * p.element_size() for p in model.parameters())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=10)
    parser.add_argument("--code-tokens", type=int, default=1500)
    parser.add_argument("--model")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--int8", action="store_true")
    args = parser.parse_args()

    started = time.perf_counter()
    loaded = load_model(args.model, args.device, quantize="int8" if args.int8 else None)
    engine = Engine(loaded)
    print(f"model {loaded.name} on {loaded.device} ({loaded.dtype}{', int8 linears' if args.int8 else ''}), "
          f"torch threads {torch.get_num_threads()}; ready in {time.perf_counter() - started:.2f} s "
          f"(weights {loaded.load_s:.2f} s, engine set-up and warm-up the rest)")
    for label, prefix in (("paper: 15-token prefix", paper_prefix(engine)), (f"code: {args.code_tokens}-token prefix", code_prefix(engine, args.code_tokens))):
        print(f"\n## {label}, {args.max_tokens} new tokens; cold prefill {cold_prefill(engine, prefix) * 1000:.0f} ms")
        rows = [(name, *time_method(engine, prefix, method, k, args.max_tokens, args.repeats)) for name, method, k in METHODS]
        greedy = rows[0][1]
        spd = {name: t for name, t, _ in rows if name.startswith("SPD")}
        print(f"| method | ms / request | ms / step | x greedy | x SPD same k |")
        print("| --- | ---: | ---: | ---: | ---: |")
        for name, total, step in rows:
            k = name.split("k=")[1].split()[0] if "k=" in name else None
            versus = f"{total / spd[f'SPD k={k}']:.2f}" if k else "-"
            print(f"| {name} | {total * 1000:.0f} | {step:.1f} | {total / greedy:.2f} | {versus} |")
        step_s = rows[0][2] / 1000
        if step_s and not args.int8:
            print(f"greedy step reads {weight_bytes(loaded.model) / 1e6:.0f} MB of weights: "
                  f"{weight_bytes(loaded.model) / step_s / 1e9:.1f} GB/s effective")


if __name__ == "__main__":
    main()
