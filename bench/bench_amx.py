"""AMX's tiles against what they replace, on the bundled model's own weights, in one run (a CPU with AMX only).

1. The 30 layers' 120 int4 projections at 1-128 rows: on AMX from the GGUF's Q4_1 rows (`amx.int4_linear`), on the bf16
   weights (`F.linear`: oneDNN, AMX as well), on our int4 matvec kernel (<= 32 rows); the head (49,152 x 576) at 3-25
   rows: AMX on the GGUF's Q8_0 blocks, bf16, our int8 matvec. The variants alternate round by round; medians.
   First a check that the AMX kernels' weights are the model's bf16 weights (x = I).
2. A prompt's attention, one layer at the bundled shapes (9 query heads on 3 key/value heads of 64 dims): a 512- and a
   2,048-token prompt, verification trees of 1, 9 and 24 nodes on 500 cached tokens; AMX (`engine/kernels/prompt.cpp`'s tile_amx)
   and AVX-512 alternate in child processes (the op's `amx` argument).

    PYTHONPATH=. .venv/bin/python -m bench.bench_amx [--rounds 5] [--threads 2]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

import torch
import torch.nn.functional as F

from bench.bench_matvec import timed as median_ms


def timed(run, repeats: int) -> float:
    """Median ms of `repeats` calls of `run` (after one)."""
    run()
    return median_ms(run, repeats)


def attention_times(repeats: int, *, use_amx: bool) -> dict[str, float]:
    """One layer's prompt attention, ms per call, on AMX's tiles or not (`use_amx`)."""
    from spd_lsp.engine.kernels import prompt as attention

    torch.manual_seed(0)
    out = {}
    for tokens in (512, 2048):
        q = torch.randn(1, 9, tokens, 64).bfloat16()
        k, v = (torch.randn(1, 3, tokens, 64).bfloat16() for _ in range(2))
        out[f"{tokens}-token prompt"] = timed(lambda: attention.causal_attention(q, k, v, 0, 0.125, amx=use_amx), repeats)
    cached = 500
    for nodes in (1, 9, 24):
        q = torch.randn(1, 9, nodes, 64).bfloat16()
        k, v = (torch.randn(1, 3, cached + nodes, 64).bfloat16() for _ in range(2))
        visible = torch.zeros(1, 1, nodes, cached + nodes, dtype=torch.bool)
        visible[..., :cached] = True
        for i in range(nodes):  # chains of 8: a node sees its ancestors
            visible[0, 0, i, cached + i // 8 * 8 : cached + i + 1] = True
        out[f"{nodes}-node tree on {cached}"] = timed(
            lambda: attention.causal_attention(q, k, v, cached, 0.125, visible, amx=use_amx), repeats)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--attention-child", choices=("on", "off"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    from spd_lsp.engine import fast
    from spd_lsp.engine.kernels import amx, matvec
    from spd_lsp.engine.kernels import build as kernels
    from spd_lsp.engine.model import bundled_gguf, load_model

    if args.attention_child:
        kernels.build()
        print(json.dumps(attention_times(args.repeats * 4, use_amx=args.attention_child == "on")))
        return 0
    if not kernels.amx_tiles():
        print("this CPU has no AMX tiles", file=sys.stderr)
        return 2
    loaded = load_model(None, "cpu", fast=False)
    backend = fast.build(loaded.model, gguf=bundled_gguf(), compile=False, head="int8")
    backend.prepare()
    lm = backend.lm
    print(f"plan: {backend.info['fastPlan']['projections']}; serving: {backend.weights}")
    block = lm.blocks[0]
    eye = torch.eye(block.qkv.decode.in_features, dtype=torch.bfloat16)
    same = (torch.equal(amx.int4_linear(eye, *block.qkv.batch.rows).T, block.qkv.prefill.weight)
            and torch.equal(amx.q8_linear(eye, *lm.output.batch.blocks).T, lm.head))
    print(f"the AMX kernels' weights are the model's bf16 weights (layer 0's q/k/v, the head): {same}")

    def projections(kind: str, rows: int):
        x = torch.randn(rows, lm.norm.numel()).bfloat16()
        wide = torch.randn(rows, block.down.decode.in_features).bfloat16()

        def run() -> None:
            for b in lm.blocks:
                for p, inputs in ((b.qkv, x), (b.out, x), (b.gate_up, x), (b.down, wide)):
                    if kind == "amx":
                        amx.int4_linear(inputs, *p.batch.rows)
                    elif kind == "bf16":
                        F.linear(inputs, p.prefill.weight)
                    else:
                        matvec.int4_matvec(inputs, *p.decode.rows)
        return run

    def head(kind: str, rows: int):
        x = torch.randn(rows, lm.norm.numel()).bfloat16()
        int8 = lm.output.decode.rows
        return {"amx": lambda: amx.q8_linear(x, *lm.output.batch.blocks), "bf16": lambda: F.linear(x, lm.head),
                "int8 matvec": lambda: matvec.int8_matvec(x, int8.codes, int8.scales)}[kind]

    cases = [(f"120 projections, {rows} rows", kind, projections(kind, rows))
             for rows in (1, 3, 8, 16, 25, 32, 64, 96, 128) for kind in ("amx", "bf16", "int4 matvec")
             if kind != "int4 matvec" or rows <= 32]
    cases += [(f"head, {rows} rows", kind, head(kind, rows)) for rows in (3, 8, 25)
              for kind in ("amx", "bf16", "int8 matvec")]
    times: dict[tuple[str, str], list[float]] = {}
    for round_ in range(args.rounds):
        for name, kind, run in cases[round_ % len(cases):] + cases[: round_ % len(cases)]:
            times.setdefault((name, kind), []).append(timed(run, args.repeats))
    print(f"\n{args.rounds} rounds, {args.threads} threads, medians (ms)\n")
    print("| what | AMX | bf16 weights | our matvec | AMX / bf16 |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name in dict.fromkeys(name for name, _, _ in cases):
        got = {kind: statistics.median(t) for (n, kind), t in times.items() if n == name}
        other = got.get("int4 matvec", got.get("int8 matvec"))
        print(f"| {name} | {got['amx']:.2f} | {got['bf16']:.2f} | {'-' if other is None else f'{other:.2f}'} | "
              f"{got['amx'] / got['bf16']:.2f}x |")

    attention: dict[tuple[str, str], list[float]] = {}
    for round_ in range(args.rounds):
        for setting in (("1", "0") if round_ % 2 == 0 else ("0", "1")):
            child = subprocess.run([sys.executable, "-m", "bench.bench_amx", "--attention-child",
                                    "on" if setting == "1" else "off", "--threads", str(args.threads), "--repeats",
                                    str(args.repeats)], capture_output=True, text=True, check=True)
            for name, ms in json.loads(child.stdout.strip().splitlines()[-1]).items():
                attention.setdefault((name, setting), []).append(ms)
    print("\n| a prompt's attention, one layer | AMX | AVX-512 | AMX / AVX-512 |")
    print("| --- | ---: | ---: | ---: |")
    for name in dict.fromkeys(name for name, _ in attention):
        on, off = (statistics.median(attention[name, s]) for s in ("1", "0"))
        print(f"| {name} | {on:.3f} ms | {off:.3f} ms | {on / off:.2f}x |")
    print(f"\nload average {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
