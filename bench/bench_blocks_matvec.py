"""The decode matvec of each GGUF weight type a Q4_K_M file holds (Q4_K, Q6_K, Q8_0, and the bundled model's Q4_1),
one activation row, from memory: GB/s of blocks read against a plain memory read of as many bytes in the same run.

Per type, random blocks in the shapes of a SmolLM2-1.7B layer (q/k/v [6144, 2048], down [2048, 8192]) are repeated
until they hold `--mib` MiB (well past the last-level cache), and a round calls `spd::blocks_matvec` (the kernels the
fused step runs: `engine/kernels/matvec.h`) on each in turn; the floor is `torch.sum` of an fp32 tensor of the same
bytes. The rounds alternate the types and the floor; the table gives the best and median round per type, its
bytes per weight (codes, scales and minima as the engine holds them), GB/s, and ns a thousand weights.

`--shapes bundled`: the bundled SmolLM2-135M's projections instead (q/k/v [960, 576], gate/up [3072, 576], down
[576, 1536]; the types whose blocks divide a row). `--float-x`: each type also with `int8_x=False` (its float
products: on an AVX2 build the portable fp32 kernel, with AVX-512 BF16 the bf16 ones), in the same rounds, and the
ratio float / int8 a type. `--dtype float32`: x in fp32, as the engine passes it where the CPU has no native bf16
(an AVX2 machine: run under `ATEN_CPU_CAPABILITY=avx2 DNNL_MAX_CPU_ISA=AVX2` for the AVX2 build here).

    PYTHONPATH=. nice -n 10 .venv/bin/python -m bench.bench_blocks_matvec [--threads 2] [--rounds 5] [--mib 512]
        [--clock cpu] [--types Q4_K,Q6_K] [--shapes 1.7b|bundled] [--float-x] [--dtype bfloat16|float32]

On a loaded machine `--threads 1 --clock cpu` is the steadier figure (a thread descheduled is not counted).
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import torch
from gguf import GGML_QUANT_SIZES
from gguf import GGMLQuantizationType as T

from spd_lsp.engine.fast import formats
from spd_lsp.engine.kernels import blocks as kernels
from spd_lsp.engine.kernels import build

SHAPES = {"1.7b": [(6144, 2048), (2048, 8192)], "bundled": [(960, 576), (3072, 576), (576, 1536)]}
FP16_FIELDS = {T.Q4_0: (0,), T.Q4_1: (0, 2), T.Q8_0: (0,), T.Q4_K: (0, 2), T.Q6_K: (208,), T.Q5_K: (0, 2)}
TYPES = [T.Q4_K, T.Q6_K, T.Q8_0, T.Q4_1]


def random_blocks(qtype: T, n: int, k: int, seed: int):
    """Random blocks of `qtype` [n, k] with small finite fp16 fields."""
    rng = np.random.default_rng(seed)
    block, size = GGML_QUANT_SIZES[qtype]
    raw = rng.integers(0, 256, (n, k // block, size), dtype=np.uint8)
    for at in FP16_FIELDS[qtype]:
        raw[..., at : at + 2] = rng.uniform(1e-4, 1e-3, (n, k // block, 1)).astype(np.float16).view(np.uint8)
    return formats.blocks(raw.reshape(n, -1), int(qtype), (n, k))


def working_set(qtype: T, mib: int, shapes: list[tuple[int, int]]) -> list:
    block = GGML_QUANT_SIZES[qtype][0]
    made = [random_blocks(qtype, n, k, seed) for seed, (n, k) in enumerate(shapes) if k % block == 0]
    assert made, f"{qtype.name}: no shape's rows are whole blocks of {block}"
    total, out = 0, []
    while total < mib << 20:
        for weights in made:  # copies, so that each is its own memory
            copy = weights._replace(parts=tuple(part.clone() for part in weights.parts))
            out.append(copy)
            total += copy.nbytes()
    return out


CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}


def one_round(held: list, xs: dict[int, torch.Tensor], clock, *, int8_x: bool = True) -> float:
    started = clock()
    for weights in held:
        kernels.matvec(xs[weights.shape[1]], weights.kind, list(weights.parts), weights.group, int8_x=int8_x)
    return clock() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--mib", type=int, default=512)
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="wall",
                        help="cpu: the process's CPU seconds (steadier on a loaded machine; with --threads 1)")
    parser.add_argument("--types", default=",".join(t.name for t in TYPES))
    parser.add_argument("--shapes", choices=sorted(SHAPES), default="1.7b")
    parser.add_argument("--float-x", action="store_true", help="each type also on its float products (int8_x=False)")
    parser.add_argument("--dtype", choices=["bfloat16", "float32"], default="bfloat16", help="x's dtype")
    args = parser.parse_args()
    assert build.build(), build.reason()
    torch.set_num_threads(args.threads)
    types = [T[name] for name in args.types.split(",")]
    shapes = SHAPES[args.shapes]
    xs = {k: torch.randn(1, k).to(getattr(torch, args.dtype)) for _, k in shapes}
    sets = {t.name: working_set(t, args.mib, shapes) for t in types}
    runs = [(name, True) for name in sets] + ([(name, False) for name in sets] if args.float_x else [])
    label = {(name, int8_x): name if int8_x else f"{name}-float" for name, int8_x in runs}
    floor = torch.ones((args.mib << 20) // 4)
    times: dict[str, list[float]] = {label[run]: [] for run in runs} | {"floor": []}
    clock = CLOCKS[args.clock]
    for name, int8_x in runs:
        one_round(sets[name], xs, clock, int8_x=int8_x)  # warm: pages touched, threads up
    for r in range(args.rounds):
        for name, int8_x in runs if r % 2 == 0 else runs[::-1]:  # the order alternates: each pair sees both orders
            times[label[name, int8_x]].append(one_round(sets[name], xs, clock, int8_x=int8_x))
        started = clock()
        floor.sum()
        times["floor"].append(clock() - started)
    print(f"threads {args.threads}, {args.mib} MiB a type, {args.shapes} shapes, x {args.dtype}, {args.rounds} rounds "
          f"(best / median), {args.clock} clock; library: {', '.join(sorted(build.features()))}")
    print(f"{'type':10} {'B/weight':>9} {'best ms':>8} {'median ms':>9} {'GB/s':>6} {'ns/kweight':>10} {'floor x':>8}"
          + (f" {'float/int8':>10}" if args.float_x else ""))
    floor_best = min(times["floor"])
    floor_gbs = floor.numel() * 4 / floor_best / 1e9
    for run in runs:
        held = sets[run[0]]
        nbytes = sum(w.nbytes() for w in held)
        weights = sum(w.shape[0] * w.shape[1] for w in held)
        best, median = min(times[label[run]]), statistics.median(times[label[run]])
        gbs = nbytes / best / 1e9
        versus = ""
        if args.float_x and not run[1]:  # the median of the rounds' ratios float / int8, this type
            ratios = [f / i for f, i in zip(times[label[run]], times[label[run[0], True]])]
            versus = f" {statistics.median(ratios):10.2f}"
        print(f"{label[run]:10} {nbytes / weights:9.4f} {best * 1e3:8.1f} {median * 1e3:9.1f} {gbs:6.1f} "
              f"{best / weights * 1e12:10.1f} {floor_gbs / gbs:8.2f}{versus}")
    print(f"{'floor':10} {4:9.4f} {floor_best * 1e3:8.1f} {statistics.median(times['floor']) * 1e3:9.1f} "
          f"{floor_gbs:6.1f}  (torch.sum of fp32, the same bytes a type)")


if __name__ == "__main__":
    main()
