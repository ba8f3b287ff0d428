"""The float projections on oneDNN's packed weights (`engine/kernels/onednn.py`) against `F.linear` on the plain ones.

The bundled model's 120 projections (bf16) at several row counts, then whole eager forwards (a 500-token prefill and
verification-sized token runs on its cache), the two kinds alternated in one process (the same weights, packed once);
prints medians, paired ratios and whether the outputs are the same bit for bit. On a CPU with AMX the server does not
pack (round 8); this bench packs anyway, to show why.

    PYTHONPATH=. .venv/bin/python -m bench.bench_packed [--rounds 9] [--threads 2]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from typing import Callable


def timed(run: Callable[[], object]) -> float:
    started = time.perf_counter()
    run()
    return (time.perf_counter() - started) * 1000.0


def paired(name: str, packed: list[float], plain: list[float]) -> str:
    ratios = sorted(a / b for a, b in zip(packed, plain))
    low, high = ratios[min(1, len(ratios) - 1)], ratios[-2 if len(ratios) > 2 else -1]
    return (f"{name:<28} packed {statistics.median(packed):7.1f} ms  plain {statistics.median(plain):7.1f} ms  "
            f"paired ratio {statistics.median(ratios):.2f} [{low:.2f}, {high:.2f}]")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rows", type=int, nargs="+", default=[1, 8, 16, 27, 32, 96, 512])
    args = parser.parse_args()

    import torch
    import torch.nn.functional as F

    from bench.bench_vs_llamacpp import package_source
    from spd_lsp.engine import fast
    from spd_lsp.engine.fast.cache import bucket_cache
    from spd_lsp.engine.kernels.onednn import PackedWeight
    from spd_lsp.engine.model import load_model

    torch.set_num_threads(args.threads)
    loaded = load_model(compile=False, head="int8")
    lm = fast.attached(loaded.model).lm
    projections = [p for b in lm.blocks for p in (b.qkv, b.out, b.gate_up, b.down)]
    packs = [PackedWeight(p.prefill.weight) for p in projections]
    amx = torch.cpu._is_amx_tile_supported()
    print(f"{loaded.name}, {loaded.dtype}, {args.threads} threads, AMX {amx} (the server packs: {not amx}), "
          f"{args.rounds} alternated rounds")

    print("\nthe 120 projections alone:")
    with torch.inference_mode():
        for rows in args.rows:
            xs = [torch.randn(1, rows, p.prefill.weight.shape[1], dtype=loaded.dtype) for p in projections]
            same = all(torch.equal(F.linear(x, p.prefill.weight), k(x)) for x, p, k in zip(xs, projections, packs))
            times: dict[bool, list[float]] = {True: [], False: []}
            for r in range(args.rounds):
                for on in ((True, False) if r % 2 else (False, True)):
                    times[on].append(timed(lambda: [k(x) if on else F.linear(x, p.prefill.weight)
                                                    for x, p, k in zip(xs, projections, packs)]))
            print(paired(f"{rows} rows (same: {same})", times[True], times[False]), flush=True)

    print("\nwhole eager forwards (the model's projections switched between the two):")
    ids = loaded.tokenizer(package_source("jinja2")[:20000])["input_ids"]
    prompt = torch.tensor([ids[:500]])
    results: dict[tuple[str, bool], list[float]] = {}
    outputs: dict[bool, list[torch.Tensor]] = {}
    with torch.inference_mode():
        for r in range(args.rounds):
            for on in ((True, False) if r % 2 else (False, True)):
                for p, k in zip(projections, packs):
                    p.packed = k if on else None
                cache = bucket_cache(lm.layers)
                got = []
                results.setdefault(("500-token prefill", on), []).append(timed(lambda: got.append(
                    lm(input_ids=prompt, past_key_values=cache, logits_to_keep=1).logits)))
                for n in (16, 24):
                    length = cache.get_seq_length()
                    run = torch.tensor([ids[500 : 500 + n]])
                    results.setdefault((f"{n} tokens on its cache", on), []).append(timed(lambda: got.append(
                        lm(input_ids=run, past_key_values=cache).logits)))
                    for layer in cache.layers:
                        layer.length = length
                outputs[on] = got
    for p in projections:
        p.packed = None
    same = all(torch.equal(a, b) for a, b in zip(outputs[True], outputs[False]))
    for name in ("500-token prefill", "16 tokens on its cache", "24 tokens on its cache"):
        print(paired(name, results[(name, True)], results[(name, False)]))
    print(f"logits the same bit for bit: {same}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
