"""What a membership change costs the engine's batch step: `BatchCache.forward` of 8 one-row requests
(340-420 cached positions, the bundled model) while one request leaves and another joins every
`churn` steps, against no churn.

`--against REV` runs the same steps on the `BatchCache` of an older commit too (its
spd_lsp/engine/batcher.py, from git), interleaved: e.g. 582854c, the left-padded cache rebuilt at
every membership change, before the slot buffers (engine/decoding/slots.py). Reports the third-smallest
step of 22 per run (robust to a noisy machine) and new / old.

    nice .venv/bin/python -m bench.bench_batch_churn [--against 582854c] [--reps 4]
"""

from __future__ import annotations

import argparse
import importlib.util
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
from transformers import DynamicCache

from bench.bench_engine_step import Row
from spd_lsp.engine.decoding.lm import ModelRunner
from spd_lsp.engine.decoding.padding import key_values
from spd_lsp.engine.decoding.slots import BatchCache
from spd_lsp.engine.model import load_model

REPO = Path(__file__).resolve().parent.parent
EDITORS, STEPS = 8, 24


def batch_cache_of(revision: str) -> type:
    """`BatchCache` as engine/batcher.py defined it at `revision`."""
    source = subprocess.run(["git", "show", f"{revision}:spd_lsp/engine/batcher.py"], cwd=REPO, check=True,
                            capture_output=True, text=True).stdout
    path = Path(tempfile.mkdtemp()) / f"batching_{revision}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    spec.loader.exec_module(module)
    return module.BatchCache


def step_ms(runner: ModelRunner, prompt: DynamicCache, cache_class: type, churn: int, seed: int) -> float:
    rnd = random.Random(seed)

    def member() -> Row:
        return Row.of(key_values(prompt), rnd.randint(340, 420))

    batch, members = cache_class(runner), [member() for _ in range(EDITORS)]
    inputs = runner.embed(torch.randint(3, 1000, (EDITORS, 1)))
    times = []
    for step in range(STEPS):
        if churn and step and step % churn == 0:
            members.pop(rnd.randrange(len(members)))
            members.append(member())
        started = time.perf_counter()
        batch.forward(members, inputs)
        times.append(time.perf_counter() - started)
    return 1000 * sorted(times[2:])[2]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--against", help="an older commit whose BatchCache runs too")
    parser.add_argument("--reps", type=int, default=4)
    args = parser.parse_args()
    loaded = load_model()
    runner = ModelRunner(loaded.model, loaded.device)
    prompt = DynamicCache()
    with torch.inference_mode():
        runner.forward(prompt, ids=torch.randint(3, 1000, (1, 430)))
        classes = {"new": BatchCache, **({"old": batch_cache_of(args.against)} if args.against else {})}
        print("| rep | churn | " + " | ".join(f"{name} ms a step" for name in classes) + " | new / old |\n|"
              + "---|" * (3 + len(classes)))
        for rep in range(args.reps):
            for churn in (0, 1, 3):
                ms = {name: step_ms(runner, prompt, cls, churn, seed=rep) for name, cls in classes.items()}
                ratio = f"{ms['new'] / ms['old']:.2f}" if "old" in ms else "-"
                print(f"| {rep} | {churn or 'never'} | " + " | ".join(f"{v:.1f}" for v in ms.values()) + f" | {ratio} |",
                      flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
