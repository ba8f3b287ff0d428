"""The decode step's int4 projections and int8 head on our kernels (spd_lsp/engine/kernels/matvec.py) against ATen's
(`_weight_int4pack_mm_for_cpu`, `_weight_int8pack_mm`), on the bundled model's own weights, in one run.

Per round, each variant runs all 30 layers' four fused projections (120 calls, as a step makes them) and the
28 MB head, for 1, 3 and 8 rows, the variants alternating; the table gives the medians of the rounds, the paired
ratio ours / ATen's, and the bytes a pass reads per second (compare with `bench_step`'s memory copy).

Then one row on our int4 kernel with 1 and 2 threads, from memory (the 30 layers, as a step reads them) against
from cache (layer 0 again and again): where the two differ the kernel waits on memory (round 15: 5.5-6 against 9.5 GB/s
on one thread before its prefetch, docs/performance-step.md).

    PYTHONPATH=. .venv/bin/python -m bench.bench_matvec [--rounds 9] [--threads 2]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from spd_lsp.engine.fast import q4
from spd_lsp.engine.fast.layouts.blocks import Int8Rows
from spd_lsp.engine.kernels import build as kernels
from spd_lsp.engine.kernels import matvec
from spd_lsp.engine.fast.store import gguf_int4, gguf_rows
from spd_lsp.engine.model import bundled_gguf, load_model


def timed(run, repeats: int) -> float:
    """Median ms of `repeats` calls of `run`."""
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        run()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    if not (kernels.build() and "bf16-dot" in kernels.features()):
        raise SystemExit(f"our kernels are not built here: {kernels.reason() or 'no AVX-512 BF16'}")
    model = load_model(None, "cpu", fast=False).model
    config, dtype = model.config, torch.bfloat16
    packed = gguf_int4(bundled_gguf(), config, dtype=dtype, device=torch.device("cpu"), directory=None)
    rows = gguf_rows(bundled_gguf(), config, directory=None)
    head = Int8Rows.of(model.get_output_embeddings().weight.detach().to(dtype))
    layer_bytes = sum(sum(t.numel() * t.element_size() for t in r) for layer in rows for r in layer.values())
    head_bytes = sum(t.numel() * t.element_size() for t in head)
    widths = {name: packed[0][name].in_features for name in q4.FUSED}

    def layers(on_ours: bool, x: dict[str, torch.Tensor]) -> None:
        for ours, theirs in zip(rows, packed):
            for name in q4.FUSED:
                matvec.int4_matvec(x[name], *ours[name]) if on_ours else theirs[name](x[name])

    def output(on_ours: bool, x: torch.Tensor) -> None:
        matvec.int8_matvec(x, head.codes, head.scales) if on_ours else torch._weight_int8pack_mm(x, head.codes, head.scales)

    print(f"{args.threads} threads; layers {layer_bytes / 1e6:.0f} MB (our rows), head {head_bytes / 1e6:.0f} MB; "
          f"{args.rounds} rounds x {args.repeats} calls, medians")
    print(f"{'rows':>4} {'part':<7} {'ATen ms':>8} {'ours ms':>8} {'ours/ATen':>9} {'ours GB/s':>9}")
    with torch.inference_mode():
        for m in (1, 3, 8):
            x = {name: torch.randn(m, k, dtype=dtype) for name, k in widths.items()}
            xh = torch.randn(m, config.hidden_size, dtype=dtype)
            for part, run, nbytes in (("layers", lambda o: layers(o, x), layer_bytes),
                                      ("head", lambda o: output(o, xh), head_bytes)):
                run(True), run(False)  # warm
                theirs, ours, ratios = [], [], []
                for _ in range(args.rounds):
                    a, b = timed(lambda: run(False), args.repeats), timed(lambda: run(True), args.repeats)
                    theirs.append(a), ours.append(b), ratios.append(b / a)
                mine = statistics.median(ours)
                print(f"{m:>4} {part:<7} {statistics.median(theirs):>8.2f} {mine:>8.2f} {statistics.median(ratios):>9.2f} "
                      f"{nbytes / mine / 1e6:>9.1f}", flush=True)
        streaming(rows, widths, layer_bytes, args)
    return 0


def streaming(rows: list, widths: dict[str, int], layer_bytes: int, args: argparse.Namespace) -> None:
    """Our int4 kernel for one row, 1 and 2 threads: the 30 layers as a step reads them (66 MB, from memory) against
    one layer's projections again and again (from cache): where the two differ, the kernel waits on memory."""
    first_bytes = sum(sum(t.numel() * t.element_size() for t in r) for r in rows[0].values())
    x = {name: torch.randn(1, k, dtype=torch.bfloat16) for name, k in widths.items()}
    print("\none row, our int4 kernel: GB/s from memory (the 30 layers) and from cache (layer 0 again)")
    for threads in (1, 2):
        torch.set_num_threads(threads)
        memory, cache = [], []
        for _ in range(args.rounds):
            memory.append(timed(lambda: [matvec.int4_matvec(x[n], *layer[n]) for layer in rows for n in q4.FUSED], args.repeats))
            cache.append(timed(lambda: [matvec.int4_matvec(x[n], *rows[0][n]) for n in q4.FUSED], args.repeats * 10))
        print(f"{threads} thread{'s' if threads > 1 else ''}: {layer_bytes / statistics.median(memory) / 1e6:.1f} GB/s "
              f"from memory, {first_bytes / statistics.median(cache) / 1e6:.1f} GB/s from cache", flush=True)
    torch.set_num_threads(args.threads)


if __name__ == "__main__":
    raise SystemExit(main())
