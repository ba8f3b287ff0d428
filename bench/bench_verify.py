"""What verification costs: time per request of SPD with and without it, against greedy, beam and nucleus.

One code prefix (the CPU prompt budget), the prompt cache warm, every method's repeats
interleaved so a busy machine slows all of them alike; float32 and bfloat16 weights.

    .venv/bin/python bench/bench_verify.py [--repeats 5] [--dtypes float32 bfloat16]
"""

from __future__ import annotations

import argparse
import inspect
import statistics

from spd_lsp.config import CPU_PREFIX_TOKENS
from spd_lsp.decoding.types import DecodeOptions
from spd_lsp.engine import Engine
from spd_lsp.model import load_model

ROUND1 = {"verify_first": "rank", "verify_score": "mean", "verify_packed": False}  # all cut, re-ranked by mean
METHODS: dict[str, dict] = {
    "greedy": {"method": "greedy", "k": 1},
    "SPD k=3": {"method": "superposed", "verify_rounds": 0},
    "SPD k=3 + verify (round 1: cut, all re-ranked)": {"method": "superposed", "verify_rounds": 1, **ROUND1},
    "SPD k=3 + verify (round 1: repair, 2 rounds)": {"method": "superposed", "verify_rounds": 2, **ROUND1},
    "SPD k=3 + verify (keep top, cut 2..k, batch k)": {"method": "superposed", "verify_rounds": 1,
                                                       "verify_packed": False},
    "SPD k=3 + verify (keep top, cut 2..k, packed tree)": {"method": "superposed", "verify_rounds": 1},
    "SPD k=3 + verify (keep top, repair 2..k, 2 rounds)": {"method": "superposed", "verify_rounds": 2},
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


def code_prefix(engine: Engine, tokens: int) -> str:
    import argparse as source_module

    source = inspect.getsource(source_module)
    cut = source.index("    def _get_values(self, action, arg_strings):")  # mid-module, inside a class
    return engine.tokenizer.decode(engine.encode(source[:cut])[-tokens:]) + "        "


def measure(engine: Engine, prefix: str, repeats: int, max_tokens: int) -> dict[str, dict[str, float]]:
    options = {name: DecodeOptions(max_tokens=max_tokens, **{"k": 3, **o}) for name, o in METHODS.items()}
    for o in options.values():
        engine.complete(prefix, o)  # warm the prompt cache and the kernels for each shape
    runs: dict[str, list] = {name: [] for name in options}
    for _ in range(repeats):
        for name, o in options.items():
            runs[name].append(engine.complete(prefix, o).timings)
    return {name: {"ms": 1000 * statistics.median(t.total_s for t in ts),
                   "verify_ms": 1000 * statistics.median(t.verify_s for t in ts)} for name, ts in runs.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--max-tokens", type=int, default=10)
    parser.add_argument("--dtypes", nargs="+", default=["float32", "bfloat16"])
    args = parser.parse_args()
    for dtype in args.dtypes:
        engine = Engine(load_model(dtype=dtype))
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
