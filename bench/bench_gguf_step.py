"""Milliseconds per decode step of our fast path on any GGUF: the shipped plan (the fused step where it serves), one
row, after a prefill of --prompt tokens; --rounds rounds of --steps steps (the first round a warm-up), the median of
each round and of the rounds. Run it from two checkouts back to back (ABAB) to compare code on one file; llama.cpp's
token on the same file: `llama-bench -m PATH -t 2 -p 0 -n 32 -d 512` (`bash scripts/install-llamacpp-tools.sh`).

    PYTHONPATH=. nice -n 10 .venv/bin/python -m bench.bench_gguf_step PATH.gguf [--threads 2] [--prompt 512]
        [--rounds 4] [--steps 16]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import torch

from spd_lsp.engine.decoding.lm import ModelRunner
from spd_lsp.engine.fast import assemble, attach, gguf_model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", type=Path)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--prompt", type=int, default=512)
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--steps", type=int, default=16)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    model, _ = gguf_model.load(args.model, torch.bfloat16)
    backend = assemble.build(model, compile=False)
    backend.prepare()
    attach(model, backend)
    runner = ModelRunner(model, torch.device("cpu"))
    print("step:", backend.plan.step, {name: s["decode"] for name, s in backend.info["serving"].items()})
    medians = []
    with torch.inference_mode():
        runner.prefill([5 + (37 * i) % 3000 for i in range(args.prompt)])
        for round_ in range(args.rounds):
            times = []
            for step in range(args.steps):
                embeds = runner.embed(torch.tensor([[100 + step]]))
                started = time.perf_counter()
                runner.forward(runner.cache, embeds=embeds)
                times.append(time.perf_counter() - started)
            if round_:
                medians.append(statistics.median(times) * 1e3)
    print("ms/step rounds", [f"{m:.1f}" for m in medians], "median", f"{statistics.median(medians):.1f}")


if __name__ == "__main__":
    main()
