"""The decode matvec of each GGUF weight type a Q4_K_M file holds (Q4_K, Q6_K, Q8_0, and the bundled model's Q4_1),
one activation row, from memory: GB/s of blocks read against a plain memory read of as many bytes in the same run.

Per type, random blocks in the shapes of a SmolLM2-1.7B layer (q/k/v [6144, 2048], down [2048, 8192]) are repeated
until they hold `--mib` MiB (well past the last-level cache), and a round calls `spd::blocks_matvec` (the kernels the
fused step runs: `engine/kernels/matvec.h`) on each in turn; the floor is `torch.sum` of an fp32 tensor of the same
bytes. The rounds alternate the types and the floor; the table gives the best and median round per type, its
bytes per weight (codes, scales and minima as the engine holds them), GB/s, and ns a thousand weights.

    PYTHONPATH=. nice -n 10 .venv/bin/python -m bench.bench_blocks_matvec [--threads 2] [--rounds 5] [--mib 512]
        [--clock cpu] [--types Q4_K,Q6_K]

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

SHAPES = [(6144, 2048), (2048, 8192)]
FP16_FIELDS = {T.Q4_1: (0, 2), T.Q8_0: (0,), T.Q4_K: (0, 2), T.Q6_K: (208,), T.Q5_K: (0, 2)}
TYPES = [T.Q4_K, T.Q6_K, T.Q8_0, T.Q4_1]


def random_blocks(qtype: T, n: int, k: int, seed: int):
    """Random blocks of `qtype` [n, k] with small finite fp16 fields."""
    rng = np.random.default_rng(seed)
    block, size = GGML_QUANT_SIZES[qtype]
    raw = rng.integers(0, 256, (n, k // block, size), dtype=np.uint8)
    for at in FP16_FIELDS[qtype]:
        raw[..., at : at + 2] = rng.uniform(1e-4, 1e-3, (n, k // block, 1)).astype(np.float16).view(np.uint8)
    return formats.blocks(raw.reshape(n, -1), int(qtype), (n, k))


def working_set(qtype: T, mib: int) -> list:
    made = [random_blocks(qtype, n, k, seed) for seed, (n, k) in enumerate(SHAPES)]
    total, out = 0, []
    while total < mib << 20:
        for weights in made:  # copies, so that each is its own memory
            copy = weights._replace(parts=tuple(part.clone() for part in weights.parts))
            out.append(copy)
            total += copy.nbytes()
    return out


CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}


def one_round(held: list, xs: dict[int, torch.Tensor], clock) -> float:
    started = clock()
    for weights in held:
        kernels.matvec(xs[weights.shape[1]], weights.kind, list(weights.parts), weights.group)
    return clock() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--mib", type=int, default=512)
    parser.add_argument("--clock", choices=sorted(CLOCKS), default="wall",
                        help="cpu: the process's CPU seconds (steadier on a loaded machine; with --threads 1)")
    parser.add_argument("--types", default=",".join(t.name for t in TYPES))
    args = parser.parse_args()
    assert build.build(), build.reason()
    torch.set_num_threads(args.threads)
    types = [T[name] for name in args.types.split(",")]
    xs = {k: torch.randn(1, k).bfloat16() for _, k in SHAPES}
    sets = {t.name: working_set(t, args.mib) for t in types}
    floor = torch.ones((args.mib << 20) // 4)
    times: dict[str, list[float]] = {name: [] for name in [*sets, "floor"]}
    clock = CLOCKS[args.clock]
    for name, held in sets.items():
        one_round(held, xs, clock)  # warm: pages touched, threads up
    for _ in range(args.rounds):
        for name, held in sets.items():
            times[name].append(one_round(held, xs, clock))
        started = clock()
        floor.sum()
        times["floor"].append(clock() - started)
    print(f"threads {args.threads}, {args.mib} MiB a type, {args.rounds} rounds (best / median), {args.clock} clock")
    print(f"{'type':8} {'B/weight':>9} {'best ms':>8} {'median ms':>9} {'GB/s':>6} {'ns/kweight':>10} {'floor x':>8}")
    floor_best = min(times["floor"])
    floor_gbs = floor.numel() * 4 / floor_best / 1e9
    for name, held in sets.items():
        nbytes = sum(w.nbytes() for w in held)
        weights = sum(w.shape[0] * w.shape[1] for w in held)
        best, median = min(times[name]), statistics.median(times[name])
        gbs = nbytes / best / 1e9
        print(f"{name:8} {nbytes / weights:9.4f} {best * 1e3:8.1f} {median * 1e3:9.1f} {gbs:6.1f} "
              f"{best / weights * 1e12:10.1f} {floor_gbs / gbs:8.2f}")
    print(f"{'floor':8} {4:9.4f} {floor_best * 1e3:8.1f} {statistics.median(times['floor']) * 1e3:9.1f} "
          f"{floor_gbs:6.1f}  (torch.sum of fp32, the same bytes a type)")


if __name__ == "__main__":
    main()
