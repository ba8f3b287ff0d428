"""fp32 vs bf16 on the CPU: draft quality (paired, bootstrap CIs) and speed, in one process.

Both dtypes of the bundled model are loaded side by side and asked the same held-out
positions of the evaluation corpus (`evaluation`: PyPI packages split by file, a
workspace store of the indexed files), interleaved position by position so load
changes hit both alike. Quality: P@1, P@3 and accepted characters (top draft / best
of k) as means with 95% bootstrap intervals, and the paired bf16 - fp32 difference
with its interval (bf16 is "unchanged" where that interval holds 0). Speed: the
median per-request ratio bf16/fp32 of prefill, decode and total time.

    nice -n 10 .venv/bin/python bench/bench_dtype.py --per-kind 150 --samples /tmp/dtype.jsonl

Samples are appended to `--samples` as they come (a rerun resumes there); `--report`
prints the tables of the samples so far without running anything.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import platformdirs

from spd_lsp.api import DecodeOptions, DecodeRequest
from spd_lsp.engine.local import LocalEngine
from evaluation.compare import mean, paired
from evaluation.corpus import DEFAULT_PACKAGES, fetch_packages, split_files
from evaluation.metrics import score_request
from evaluation.positions import sample_positions
from evaluation.run import fitted
from evaluation.stores import workspace_store
from spd_lsp.engine.model import load_model
from spd_lsp.cursor import Cursor
from spd_lsp.fit.edits import Fit, finalize

DTYPES = ("float32", "bfloat16")
KINDS = ("line_start", "mid_line")
METRICS = {  # name: value of one request's score
    "P@1": lambda s: float(s.exact_at_1),
    "P@3": lambda s: float(s.exact_at_k),
    "chars top": lambda s: float(s.chars_best),
    "chars best": lambda s: float(s.chars_any),
}


def run_one(engine: LocalEngine, prefix: str, target: str, options: DecodeOptions) -> dict[str, Any]:
    engine.runner.rewind(0)  # every request cold: the prefill is part of what is compared
    result = engine.complete(DecodeRequest(prefix, options))
    drafts = finalize((d.text for d in result.drafts), Fit(Cursor(prefix, len(prefix))), options.k)
    t = result.timings
    score = score_request(drafts, target, 1000 * (t.total_s - t.prefill_s), 1000 * t.total_s)
    return {
        "drafts": drafts,
        "score": {name: value(score) for name, value in METRICS.items()},
        "prefill_ms": 1000 * t.prefill_s,
        "decode_ms": 1000 * (t.total_s - t.prefill_s),
        "total_ms": 1000 * t.total_s,
        "tokens": t.prefill_tokens,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--per-kind", type=int, default=150, help="test positions of each kind")
    parser.add_argument("--workdir", type=Path, default=Path(platformdirs.user_cache_dir("spd-lsp")) / "eval")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--samples", type=Path, required=True, help="JSON lines of samples: appended, resumed")
    parser.add_argument("--report", action="store_true", help="only print the tables of the samples so far")
    args = parser.parse_args()
    done = [json.loads(line) for line in args.samples.read_text().splitlines()] if args.samples.exists() else []
    if not args.report:
        done = measure(args, done)
    report(done)
    return 0


def measure(args: argparse.Namespace, done: list[dict[str, Any]]) -> list[dict[str, Any]]:
    root = fetch_packages(list(DEFAULT_PACKAGES), args.workdir / "corpus").resolve()
    split = split_files(root)
    engines = {dtype: LocalEngine(load_model(dtype=dtype)) for dtype in DTYPES}
    tokenizer = engines["float32"].tokenizer
    store = workspace_store(args.workdir / "ws-dtype", tokenizer, root, split.indexed)
    for engine in engines.values():
        engine.set_ngrams(store)
    by_kind = [fitted(sample_positions(split.test, args.per_kind, args.seed, kinds=(kind,)), tokenizer) for kind in KINDS]
    positions = [p for pair in zip(*by_kind) for p in pair]  # kinds alternate: a partial run has both
    options = replace(DecodeOptions(), method="superposed", k=3)
    samples = list(done)
    started = time.perf_counter()
    with args.samples.open("a") as out:
        for index, position in enumerate(positions[len(done) :], start=len(done)):
            order = DTYPES if index % 2 == 0 else DTYPES[::-1]  # alternate who runs first
            runs = {d: run_one(engines[d], position.prefix, position.target, options) for d in order}
            samples.append({"kind": position.kind, **runs})
            out.write(json.dumps(samples[-1]) + "\n")
            out.flush()
            if (index + 1) % 10 == 0:
                print(f"[{time.perf_counter() - started:.0f} s] {index + 1}/{len(positions)}", file=sys.stderr, flush=True)
    return samples


def report(samples: list[dict[str, Any]]) -> None:
    options = DecodeOptions()
    counts = ", ".join(f"{kind}: {sum(s['kind'] == kind for s in samples)}" for kind in KINDS)
    print(f"SPD + workspace n-grams, k=3, {options.max_tokens} tokens; {len(samples)} positions ({counts})")
    print("| kind | measure | fp32 | bf16 | bf16 - fp32 (paired) |")
    print("| --- | --- | --- | --- | --- |")
    for kind in ("all", *KINDS):
        rows = [s for s in samples if kind in ("all", s["kind"])]
        for name in METRICS:
            fp32 = [s["float32"]["score"][name] for s in rows]
            bf16 = [s["bfloat16"]["score"][name] for s in rows]
            print(f"| {kind} | {name} | {mean(fp32)} | {mean(bf16)} | {paired(bf16, fp32)} |")
    same = statistics.fmean(s["float32"]["drafts"][:1] == s["bfloat16"]["drafts"][:1] for s in samples)
    print(f"same top draft: {same:.1%}")
    print("| time | fp32 median | bf16 median | median bf16/fp32 ratio (paired) |")
    print("| --- | ---: | ---: | ---: |")
    for phase in ("prefill_ms", "decode_ms", "total_ms"):
        fp32 = [s["float32"][phase] for s in samples]
        bf16 = [s["bfloat16"][phase] for s in samples]
        ratio = statistics.median(b / f for b, f in zip(bf16, fp32) if f > 0)
        print(f"| {phase} | {statistics.median(fp32):.0f} | {statistics.median(bf16):.0f} | {ratio:.2f} |")
    print(f"prompt tokens median {statistics.median(s['float32']['tokens'] for s in samples):.0f}")


if __name__ == "__main__":
    sys.exit(main())
