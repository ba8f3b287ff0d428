"""Which kernel a forward of a few rows should run on a model's blocks: every layer projection of a GGUF (and the
head) at each row count, on the matvec kernels (a pass over the blocks every 8 rows: the decode tier's), on tiles
(each weight dequantised into a matmul's tile), on integer dot products where the library has them (VNNI: "int8",
the plan's trees and prefill there) and on a bf16 copy (made here up to 1 GB; the plan keeps one only without VNNI);
the best of `--rounds` interleaved rounds, ms for all the projections together. The plan's tiers
(`engine/fast/plan.py`: `BATCH_MATVEC_ROWS`, `FLOAT_COPY_MAX`) come from this table.

    PYTHONPATH=. nice .venv/bin/python -m bench.bench_tiers [--model PATH.gguf] [--rows 1 8 16 22 27 32 48]
        [--rounds 5] [--threads 2] [--head]

`--head`: the output head alone (the plan never copies it).

Not part of `make test`.
"""

from __future__ import annotations

import argparse
import time

import torch

from spd_lsp.engine.decoding.backends import attached
from spd_lsp.engine.fast.backend import held_blocks, on_blocks
from spd_lsp.engine.fast.plan import Choice
from spd_lsp.engine.kernels import build as kernel_library
from spd_lsp.engine.model import load_model

COPY_MAX = 1_000_000_000  # bytes of a bf16 copy this bench still makes (a model of blocks' `float_copy_bytes`)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=None, help="a .gguf file (default: the bundled model)")
    parser.add_argument("--rows", type=int, nargs="+", default=[1, 8, 16, 22, 27, 32, 48])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--head", action="store_true", help="the output head alone")
    args = parser.parse_args(argv)
    loaded = load_model(args.model, compile=False)
    backend = attached(loaded.model)
    backend.prepare()
    torch.set_num_threads(args.threads)
    kernels: dict[str, list] = {"matvec": [], "tiles": []}
    if "int8-dot" in kernel_library.features():  # integer dot products on the blocks (VNNI)
        kernels["int8"] = []
    if backend.plan.facts.float_copy_bytes <= COPY_MAX:  # a large model's copy would take minutes and GBs
        kernels["bf16 copy"] = []
    projections = [backend.lm.output] if args.head else [*backend.lm.projections()[:-1], backend.lm.output]
    for projection in projections:
        held = held_blocks(projection.prefill) or held_blocks(projection.decode)
        if held is None:
            continue
        for name, kernel in (("matvec", "matvec"), ("tiles", "tiles"), ("int8", "int8"), ("bf16 copy", "onednn")):
            if name in kernels:
                kernels[name].append(on_blocks(held, Choice(name, kernel), bf16_dot=backend._bf16_dot))
    print(f"{loaded.name}: {len(kernels['matvec'])} projections, {args.threads} threads; the plan's batch tier: "
          f"{backend.info['serving']['gate_up']['batch']} up to {backend.lm.tiers.batch_rows} rows")
    print("| rows | " + " | ".join(kernels) + " |\n| ---: |" + " ---: |" * len(kernels))
    for rows in args.rows:
        xs = [torch.randn(rows, linear.in_features, dtype=torch.bfloat16) for linear in kernels["matvec"]]
        best = {name: float("inf") for name in kernels}
        for _ in range(args.rounds):
            for name, linears in kernels.items():
                started = time.perf_counter()
                for linear, x in zip(linears, xs):
                    linear.mm(x)
                best[name] = min(best[name], time.perf_counter() - started)
        print(f"| {rows} | " + " | ".join(f"{best[name] * 1e3:.0f}" for name in kernels) + " |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
