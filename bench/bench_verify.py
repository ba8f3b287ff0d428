"""What verification costs: time per request of SPD with and without it, against greedy, beam and nucleus.

One code prefix (the CPU prompt budget), the prompt cache warm, every method's repeats
interleaved so a busy machine slows all of them alike; float32 and bfloat16 weights.

`--attention N` instead times single forwards under the two attentions of the SDPA model
(transformers' SDPA, which copies grouped key/values for masked queries longer than one
token, and decoding/small_query.py's small-query kernel), N interleaved repeats each, on a
~370-token prompt cache: verification's packed prefix trees (B requests x ~25 tokens),
prompt chunks of B=1 (with the kernel's query bound lifted, to show where it stops
paying) and unmasked decode steps of B=1 and 8 (SDPA's `enable_gqa` path, or its packed
one-token path under an all-true mask); then the peak RSS of each in a process
of its own.

    .venv/bin/python bench/bench_verify.py [--repeats 5] [--dtypes float32 bfloat16]
    nice .venv/bin/python bench/bench_verify.py --attention 15 --dtypes bfloat16
"""

from __future__ import annotations

import argparse
import inspect
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

import torch

from spd_lsp.settings import CPU_PREFIX_TOKENS
from spd_lsp.engine.decoding import small_query
from spd_lsp.api import DecodeOptions, DecodeRequest
from spd_lsp.engine.decoding.verify import packed_logits, prefix_tree
from spd_lsp.engine.local import LocalEngine
from spd_lsp.engine.model import SMALL_QUERY_ENV, load_model

ROUND1 = {"verify_first": "rank", "verify_score": "mean"}  # all cut, re-ranked by mean
METHODS: dict[str, dict] = {
    "greedy": {"method": "greedy", "k": 1},
    "SPD k=3": {"method": "superposed", "verify_rounds": 0},
    "SPD k=3 + verify (round 1: cut, all re-ranked)": {"method": "superposed", "verify_rounds": 1, **ROUND1},
    "SPD k=3 + verify (round 1: repair, 2 rounds)": {"method": "superposed", "verify_rounds": 2, **ROUND1},
    "SPD k=3 + verify (keep top, cut 2..k)": {"method": "superposed", "verify_rounds": 1, "verify_first": "keep"},
    "SPD k=3 + verify (keep top, repair 2..k, 2 rounds)": {"method": "superposed", "verify_rounds": 2,
                                                           "verify_first": "keep"},
    "SPD k=3 + verify (cut top, cut 2..k)": {"method": "superposed", "verify_rounds": 1, "verify_first": "cut"},
    "SPD k=3 + verify (cut top, Jacobi repair, 2 rounds)": {"method": "superposed", "verify_rounds": 2,
                                                            "verify_first": "cut"},
    "SPD k=3 + verify (cut top, repair by continuing)": {"method": "superposed", "verify_rounds": 1,
                                                         "verify_first": "cut", "verify_repair": "continue"},
    "SPD k=3 + verify (keep top, repair 2..k by continuing)": {"method": "superposed", "verify_rounds": 1,
                                                               "verify_first": "keep", "verify_repair": "continue"},
    "beam k=3": {"method": "beam"},
    "nucleus k=3 sequential": {"method": "nucleus", "seed": 0},
}


def code_prefix(engine: LocalEngine, tokens: int) -> str:
    import argparse as source_module

    source = inspect.getsource(source_module)
    cut = source.index("    def _get_values(self, action, arg_strings):")  # mid-module, inside a class
    return engine.tokenizer.decode(engine.encode(source[:cut])[-tokens:]) + "        "


def measure(engine: LocalEngine, prefix: str, repeats: int, max_tokens: int) -> dict[str, dict[str, float]]:
    options = {name: DecodeOptions.of(max_tokens=max_tokens, **{"k": 3, **o}) for name, o in METHODS.items()}
    for o in options.values():
        engine.complete(DecodeRequest(prefix, o))  # warm the prompt cache and the kernels for each shape
    runs: dict[str, list] = {name: [] for name in options}
    for _ in range(repeats):
        for name, o in options.items():
            runs[name].append(engine.complete(DecodeRequest(prefix, o)).timings)
    return {name: {"ms": 1000 * statistics.median(t.total_s for t in ts),
                   "verify_ms": 1000 * statistics.median(t.verify_s for t in ts)} for name, ts in runs.items()}


ATTENTION_PROMPT_TOKENS = 370
TREE_TOKENS = 25  # a request's packed prefix tree: three drafts
ATTENTIONS = {"sdpa": "sdpa", "small-query": small_query.NAME}


def forwards(engine: LocalEngine, prompt: list[int]) -> dict[str, Callable[[], object]]:
    """Each measured forward, on a cache of `prompt` (row per request), cropped back after it."""
    runner = engine.runner
    runner.prefill(prompt)
    tail = engine.encode(inspect.getsource(argparse))[-3 * TREE_TOKENS:]  # any real code tokens
    rows = [tuple(tail[:9]), tuple(tail[9:18]), tuple(tail[18:28])]  # three drafts: ~25 tree nodes (all but last)
    nodes = len(prefix_tree(rows)[0])
    caches = {batch: runner.fork(batch) for batch in (1, 4, 8)}

    def cropped(cache, run: Callable[[], object]) -> Callable[[], object]:
        def once() -> object:
            try:
                return run()
            finally:
                if cache.get_seq_length() > len(prompt):
                    cache.crop(len(prompt) - cache.get_seq_length())  # negative: remove this many
        return once

    shapes = {f"verify B={b} x {nodes} tokens": cropped(
        caches[b], lambda b=b: packed_logits(runner, caches[b], [rows] * b, [len(prompt)] * b)) for b in (1, 4, 8)}
    for q in (25, 64, 96, 128, 192, 256):
        ids = torch.tensor([(tail * (q // len(tail) + 1))[:q]])
        shapes[f"prompt chunk B=1 x {q}"] = cropped(caches[1], lambda ids=ids: runner.forward(caches[1], ids=ids))
    for b in (1, 8):  # unmasked rows: SDPA's enable_gqa path against its packed one-token path (packs_one_token)
        step = torch.tensor([[tail[0]]] * b)
        shapes[f"decode step B={b} x 1"] = cropped(caches[b], lambda b=b, step=step: runner.forward(caches[b], ids=step))
    return shapes


def compare_attention(engine: LocalEngine, prompt: list[int], repeats: int, *,
                      threads: int | None) -> dict[str, dict[str, float]]:
    """Median ms of each forward under each attention, repeats interleaved (the bound lifted: every q measured);
    `threads`: torch's, else those the runner picked for the prompt (one on a contended CPU)."""
    model, shapes = engine.loaded.model, forwards(engine, prompt)
    if threads:
        torch.set_num_threads(threads)
    bound, small_query.MAX_QUERY = small_query.MAX_QUERY, dict.fromkeys(small_query.MAX_QUERY, 1 << 30)
    times: dict[str, dict[str, list[float]]] = {shape: {name: [] for name in ATTENTIONS} for shape in shapes}
    try:
        for repeat in range(repeats + 1):  # the first: warm-up, not counted
            for shape, run in shapes.items():
                for name, implementation in ATTENTIONS.items():
                    model.set_attn_implementation(implementation)
                    started = time.perf_counter()
                    run()
                    if repeat:
                        times[shape][name].append(time.perf_counter() - started)
    finally:
        small_query.MAX_QUERY = bound
        model.set_attn_implementation(small_query.NAME)
    return {shape: {name: 1000 * statistics.median(t) for name, t in row.items()} for shape, row in times.items()}


def peak_rss(dtype: str, name: str, repeats: int) -> dict[str, float]:
    """This bench's forwards in a process of its own under one attention: the peak RSS while they ran and
    the RSS after them (MB; the model's load is before the peak's start)."""
    env = {**os.environ, SMALL_QUERY_ENV: "1" if name == "small-query" else "0"}
    command = [sys.executable, __file__, "--rss-child", str(repeats), "--dtypes", dtype]
    out = subprocess.run(command, env=env, capture_output=True, text=True, check=True).stdout.split()
    return {"peak": float(out[-2]), "after": float(out[-1])}


def rss_child(dtype: str, repeats: int) -> None:
    engine = LocalEngine(load_model(dtype=dtype))
    prompt = engine.encode(code_prefix(engine, ATTENTION_PROMPT_TOKENS))
    shapes = forwards(engine, prompt)
    Path("/proc/self/clear_refs").write_text("5")  # Linux: the peak (VmHWM) restarts from the RSS now
    for _ in range(repeats):
        for run in shapes.values():
            run()
    status = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines())
    print(int(status["VmHWM"].split()[0]) / 1024, int(status["VmRSS"].split()[0]) / 1024)


def report_attention(dtype: str, repeats: int, *, threads: int | None) -> None:
    engine = LocalEngine(load_model(dtype=dtype))
    prompt = engine.encode(code_prefix(engine, ATTENTION_PROMPT_TOKENS))
    rows = compare_attention(engine, prompt, repeats, threads=threads)
    print(f"\n## {dtype}, {len(prompt)}-token prompt cache, median of {repeats} interleaved, "
          f"{torch.get_num_threads()} threads, load {os.getloadavg()[0]:.1f}\n")
    print("| forward | SDPA ms | small-query ms | small ÷ SDPA |\n| --- | ---: | ---: | ---: |")
    for shape, r in rows.items():
        print(f"| {shape} | {r['sdpa']:.1f} | {r['small-query']:.1f} | {r['small-query'] / r['sdpa']:.2f} |")
    rss = {name: peak_rss(dtype, name, repeats=3) for name in ATTENTIONS}
    print("\n| attention | peak RSS during the forwards MB | RSS after MB |\n| --- | ---: | ---: |")
    for name, r in rss.items():
        print(f"| {name} | {r['peak']:.0f} | {r['after']:.0f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--max-tokens", type=int, default=10)
    parser.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16"])
    parser.add_argument("--attention", type=int, metavar="N", help="compare the two attentions, N repeats")
    parser.add_argument("--threads", type=int, help="--attention: torch's threads (default: the runner's choice)")
    parser.add_argument("--rss-child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.rss_child is not None:
        return rss_child(args.dtypes[0], args.rss_child)
    if args.attention is not None:
        for dtype in args.dtypes:
            report_attention(dtype, args.attention, threads=args.threads)
        return
    for dtype in args.dtypes:
        engine = LocalEngine(load_model(dtype=dtype))
        rows = measure(engine, code_prefix(engine, CPU_PREFIX_TOKENS), args.repeats, args.max_tokens)
        greedy, nucleus = rows["greedy"]["ms"], rows["nucleus k=3 sequential"]["ms"]
        print(f"\n## {dtype}, {CPU_PREFIX_TOKENS}-token code prefix (cache warm), {args.max_tokens} tokens, "
              f"median of {args.repeats}\n")
        print("| method | ms / request | verify ms | × greedy | nucleus k=3 ÷ this |")
        print("| --- | ---: | ---: | ---: | ---: |")
        for name, r in rows.items():
            print(f"| {name} | {r['ms']:.0f} | {r['verify_ms']:.0f} | {r['ms'] / greedy:.2f} | {nucleus / r['ms']:.2f} |")


if __name__ == "__main__":
    main()
