"""Milliseconds per decode step of transformers' forward and the fast path's (spd_lsp/engine/fast), beside the
bytes-per-step floor, in one run.

Variants: `hf` (transformers' LlamaForCausalLM on a DynamicCache, the path before the fast one), `fast eager bf16`,
`fast compiled bf16`, `fast compiled int4` (the GGUF's own Q4_1 blocks), `fast eager int4`, and both int4 ones
with the output projection as int8 rows (`+int8 head`, CPU), or as the GGUF's own Q8_0 blocks (`+q8 head`); `fast
fused int4+q8 head` is the shipped CPU step (engine/fast/fused.py: the whole step in one C++ call) for 1-2 rows
(more rows: the compiled graph, whose int4 projections run on AMX where the CPU has it). Each step feeds
one input embedding per row ([rows, 1, H], what a superposed step feeds) after a prompt of --prompt tokens and
is cut back after, so every step sees the same cache; rows: 1 (greedy and SPD, any k: ONE row) and --rows
(a batch: 8 editors' rows, or a batched baseline's k). Variants run interleaved, a round of --steps steps each
per round (the order rotating), so a slow spell of the shared machine hits all alike; the table gives the median
and min of the rounds' medians. The clock is read after the device ran its queued work (placement.device_sync).

The floor: weight bytes a step reads / the memory-copy bandwidth measured in the same run (a 256 MB copy,
bytes read per second). --spd adds whole SPD k=3 requests (10 tokens, warm prompt cache: ms per step as the
request's timings count them) per variant; --complete times `spd-lsp complete` (a whole process: load, prefill,
3 drafts) with --no-fast-path and without.

    PYTHONPATH=. .venv/bin/python -m bench.bench_step [--rounds 7] [--steps 10] [--rows 8] [--device cuda] [--spd] [--complete]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
import torch

from spd_lsp.engine import fast
from spd_lsp.engine.decoding.lm import ModelRunner
from spd_lsp.engine.decoding.placement import device_sync
from spd_lsp.engine.fast.backend import CPU_INDUCTOR
from spd_lsp.engine.fast.compile import INLINE, Compiled
from spd_lsp.engine.model import load_model, resolve_source

PREFIX = "import os\n\ndef list_python_files(root):\n    \"\"\"Every .py file under root.\"\"\"\n    found = []\n"


# Inductor options tried on the CPU's compiled step (`Compiled(inductor=...)`): freezing folds the weights into the
# graph as constants (prepacked: a copy of them), max-autotune lets inductor's C++ GEMM templates compete.
INDUCTOR = {"frozen": {"freezing": True}, "autotuned": {"max_autotune": True, "max_autotune_gemm_backends": "CPP,ATEN"},
            "frozen+autotuned": {"freezing": True, "max_autotune": True, "max_autotune_gemm_backends": "CPP,ATEN"},
            # the shipped graphs (backend.CPU_INDUCTOR) leave out the generated wrapper's checks of its inputs; "checked"
            # keeps them and the Python wrapper (before round 6)
            "checked": {},
            # the shipped graphs' wrapper is C++ (cpp_wrapper); "python-wrapper": the Python one (before round 8)
            "python-wrapper": {"cpp_wrapper": False},
            # the shipped step attends on the CPU kernel (engine/kernels/attention.py); "sdpa-attention": on SDPA over the
            # masked bucket (before round 9), the same inductor options
            "sdpa-attention": {},
            # the shipped step's int4 projections and int8 head run our matvec kernels (engine/kernels/matvec.py);
            # "aten-matvec": ATen's `_weight_int4pack_mm_for_cpu` and `_weight_int8pack_mm` (before round 11)
            "aten-matvec": {}}


def inductor_options(label: str) -> dict | None:
    """A variant's inductor options: the shipped ones (`CPU_INDUCTOR`) and its label's (`INDUCTOR`); "checked": none."""
    if label == "checked":
        return None
    return {**CPU_INDUCTOR, **INDUCTOR.get(label, {})}


def rss_mb() -> float:
    """This process's resident memory, MB (what a compiled variant's constants add shows in the warm-up)."""
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


@dataclass
class Variant:
    name: str
    loaded: object  # LoadedModel
    weight_bytes: int
    rounds: dict[int, list[float]] = field(default_factory=dict)  # rows -> per round, median ms per step

    def __post_init__(self) -> None:
        self.runner = ModelRunner(self.loaded.model, self.loaded.device)


def memcpy_bandwidth(device: torch.device, megabytes: int = 256, repeats: int = 5) -> float:
    """Bytes read per second by a device copy of `megabytes` (the best of `repeats`)."""
    src = torch.empty(megabytes * 2**20, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    dst.copy_(src)
    best = float("inf")
    for _ in range(repeats):
        device_sync(device)
        started = time.perf_counter()
        dst.copy_(src)
        device_sync(device)
        best = min(best, time.perf_counter() - started)
    return src.numel() / best


def variants(args: argparse.Namespace) -> list[Variant]:
    gguf = resolve_source(args.model).path if str(resolve_source(args.model).path).endswith(".gguf") else None
    keep = {name.strip() for name in args.only.split(",")} if args.only else None
    hf = load_model(args.model, args.device, fast=False)
    made = [Variant("hf", hf, _bytes(hf.model))]  # the first: the ratios' base
    for name, int4, compiled, head in (("fast eager bf16", False, False, "float"),
                                       ("fast compiled bf16", False, True, "float"),
                                       ("fast eager int4", True, False, "float"), ("fast compiled int4", True, True, "float"),
                                       ("fast eager int4+int8 head", True, False, "int8"),
                                       ("fast compiled int4+int8 head", True, True, "int8"),
                                       ("fast fused int4+int8 head", True, False, "int8"),
                                       ("fast fused int4+q8 head", True, False, "q8"),
                                       ("fast compiled int4+q8 head", True, True, "q8"),
                                       *((f"fast compiled int4+int8 head {label}", True, True, "int8")
                                         for label in INDUCTOR)):
        if (keep is not None and name not in keep) or (head in ("int8", "q8") and args.device != "cpu"):
            continue  # the int8 head is the CPU's (outputWeights)
        loaded = load_model(args.model, args.device, fast=False)
        # int4: the GGUF's Q4_1 blocks; a model without them (gpu-check's random weights) quantised from float ones
        label = name.rpartition(" ")[2]
        # the fused step (engine/fast/fused.py) only where the variant says so: the others measure what they name
        left_out = tuple(kernel for kernel, leave in (("attention", label == "sdpa-attention"),
                                                      ("matvec", label == "aten-matvec"),
                                                      ("fused-step", "fused" not in name)) if leave)
        backend = fast.build(loaded.model, gguf=gguf if int4 else None, quantize="int4" if int4 else None,
                             compile=False, head=head, left_out=left_out)
        if "fused" in name:
            backend.prepare()  # what the compile thread does before the first step
        if compiled:  # compiled in the first call (the warm-up below), not in the background
            backend.step_fn = Compiled(backend.step_tensors, loaded.device, status=backend.info, mode=INLINE,
                                       inductor=inductor_options(label), before_compile=backend.prepare)
        fast.attach(loaded.model, backend)
        made.append(Variant(name, loaded, backend.lm.weight_bytes("decode")))
    return made


def _bytes(model: torch.nn.Module) -> int:
    return sum(p.numel() * p.element_size() for p in model.parameters())


def time_steps(variant: Variant, rows: int, steps: int) -> float:
    """Median ms of `steps` decode steps of `rows` rows on the variant's prompt cache (cut back after each)."""
    runner = variant.runner
    cache = runner.cache if rows == 1 else runner.fork(rows)
    embeds = runner.embed(torch.full((rows, 1), 42, dtype=torch.long))
    times = []
    for _ in range(steps):
        device_sync(runner.device)
        started = time.perf_counter()
        runner.forward(cache, embeds=embeds)
        times.append((time.perf_counter() - started) * 1000)
        cache.crop(-1)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--rows", type=int, default=8)
    parser.add_argument("--prompt", type=int, default=200, help="prompt tokens cached before the steps")
    parser.add_argument("--only", help="comma-separated variant names to keep (default: all)")
    parser.add_argument("--spd", action="store_true", help="also whole SPD k=3 requests per variant")
    parser.add_argument("--complete", action="store_true", help="also `spd-lsp complete` with and without the fast path")
    args = parser.parse_args(argv)
    made = variants(args)
    tokenizer = load_model(args.model, args.device, fast=False).tokenizer
    ids = tokenizer.encode(PREFIX * 20)[: args.prompt]
    started = time.perf_counter()
    for variant in made:
        before = rss_mb()
        variant.runner.prefill(ids)
        for rows in (1, args.rows):  # the first calls compile (one graph per row count)
            time_steps(variant, rows, 1)
        print(f"{variant.name}: warm-up and compiles {time.perf_counter() - started:.1f} s so far, RSS +{rss_mb() - before:.0f} MB",
              flush=True)
    print(f"warm-up and compiles: {time.perf_counter() - started:.1f} s", flush=True)
    for round_ in range(args.rounds):
        order = made[round_ % len(made):] + made[: round_ % len(made)]
        for variant in order:
            for rows in (1, args.rows):
                variant.rounds.setdefault(rows, []).append(time_steps(variant, rows, args.steps))
    bandwidth = memcpy_bandwidth(torch.device(args.device))
    print(f"memory copy: {bandwidth / 1e9:.1f} GB/s; prompt {len(ids)} tokens; {args.rounds} rounds x {args.steps} steps")
    base = {rows: statistics.median(made[0].rounds[rows]) for rows in made[0].rounds}
    print(f"{'variant':<20} {'weights MB':>10} {'floor ms':>9} " + " ".join(
        f"{f'{rows} row(s) median / min':>24} {'x hf':>6} {'x floor':>7}" for rows in base))
    for variant in made:
        floor = variant.weight_bytes / bandwidth * 1000
        cells = []
        for rows, times in variant.rounds.items():
            median = statistics.median(times)
            cells.append(f"{median:>15.1f} / {min(times):>6.1f} {median / base[rows]:>6.2f} {median / floor:>7.2f}")
        print(f"{variant.name:<20} {variant.weight_bytes / 1e6:>10.0f} {floor:>9.1f} " + " ".join(cells), flush=True)
    if args.spd:
        spd_table(made, args)
    if args.complete:
        complete_table(args)
    return 0


def spd_table(made: list[Variant], args: argparse.Namespace) -> None:
    """Whole SPD k=3 requests (10 tokens, no stop at the line's end, the prompt cache warm) per variant, interleaved:
    the request's time and its ms per step as its timings count them (selection and n-grams outside)."""
    from spd_lsp.api import DecodeOptions, DecodeRequest
    from spd_lsp.engine.local import LocalEngine

    request = DecodeRequest(PREFIX, DecodeOptions.of(k=3, max_tokens=10, stop_at_newline=False, heal=False))
    engines = [LocalEngine(variant.loaded) for variant in made]
    for engine in engines:
        engine.complete(request)  # the prompt cached, the step compiled
    results: list[list[tuple[float, float]]] = [[] for _ in made]
    for round_ in range(args.rounds):
        for i in list(range(len(made)))[round_ % len(made):] + list(range(len(made)))[: round_ % len(made)]:
            timings = engines[i].complete(request).timings
            results[i].append((timings.total_s * 1000, timings.per_step_ms))
    print("SPD k=3 request (warm prompt):   total ms median / min   model ms per step median   x hf")
    base = statistics.median(t for t, _ in results[0])
    for variant, values in zip(made, results):
        totals, steps = [t for t, _ in values], [s for _, s in values]
        print(f"{variant.name:<20} {statistics.median(totals):>14.0f} / {min(totals):>5.0f} "
              f"{statistics.median(steps):>22.1f} {statistics.median(totals) / base:>10.2f}", flush=True)


def complete_table(args: argparse.Namespace) -> None:
    """`spd-lsp complete` as a user runs it, with and without the fast path, interleaved: wall time of the process
    and the request's own total (its timings line)."""
    command = [sys.executable, "-c", "import sys; from spd_lsp.cli import main; sys.exit(main())", "complete", "--prefix", PREFIX, "-k", "3", "--json"]
    runs: dict[str, list[tuple[float, float, float]]] = {"--no-fast-path": [], "fast path": []}
    for _ in range(3):
        for label in runs:
            started = time.perf_counter()
            out = subprocess.run(command + (["--no-fast-path"] if label == "--no-fast-path" else []),
                                 capture_output=True, text=True, check=True)
            wall = time.perf_counter() - started
            payload = json.loads(out.stdout.strip().splitlines()[-1])
            t = payload["timings"]
            runs[label].append((wall, t["total_s"] * 1000, t["model_s"] * 1000 / max(1, t["steps"])))
    for label, values in runs.items():
        walls, totals, steps = zip(*values)
        print(f"spd-lsp complete {label:<15} process {statistics.median(walls):.1f} s, request "
              f"{statistics.median(totals):.0f} ms (min {min(totals):.0f}), {statistics.median(steps):.1f} ms/step")


if __name__ == "__main__":
    raise SystemExit(main())
