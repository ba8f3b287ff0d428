"""Does the fast path's int4 decode change what users see? Its drafts against transformers' bf16 forward's.

Both engines answer the same held-out positions (the test split of PyPI packages' sources, never this repo;
line starts and mid-line positions, prefixes fitted as the server fits them), with the server's default
options (SPD k=3, verification, no n-grams: the model is what differs). Reported: the share of positions whose
top draft is identical (issue 21's target: >= 95 % of >= 300) and P@1 of each with the paired bootstrap
interval of the difference (target: it contains 0). Progress and the running figures print every 25
positions, so a run cut short still says how far it got; --out keeps every position's drafts.
--pair hf,fast-bf16 is the control: the fast path with float weights, so the same numbers in other kernels'
summation order, against transformers' (how often near-ties alone flip the top draft); --pair hf,hf#2 two
engines of the same kind (what the measure gives for identical models).

--pair takes more than two names: the first is the reference and every other one is compared with it, and, for each
two others, the share of positions at which each agrees with the reference is compared, paired. `hf-fp32` is
transformers' forward in fp32 on the cached weights, which are the GGUF's blocks dequantised exactly: the model's
own numbers, and today's drafts on a CPU without native bf16 (`pick_dtype`). So `--pair hf-fp32,hf,int8-head+kernel`
asks whether the fast path's drafts are further from the model's than transformers' bf16 drafts are.

    .venv/bin/python -m evaluation.int4_agreement [--positions 300] [--pair hf,int4] [--out int4.json] [--as-served]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import platformdirs

from evaluation.compare import paired
from evaluation.corpus import DEFAULT_PACKAGES, fetch_packages, split_files
from evaluation.positions import sample_positions
from evaluation.run import complete, fitted
from spd_lsp.api import DecodeOptions
from spd_lsp.engine.decoding import lm
from spd_lsp.engine.local import LocalEngine
from spd_lsp.engine.model import load_model

KINDS = ("line_start", "mid_line")


def summary(rows: list[dict], names: list[str]) -> str:
    """Each engine after the first against the first; then, for two others, their agreement with it compared."""
    reference, others = names[0], names[1:]
    parts = [pair_summary(rows, reference, other) for other in others]
    for i, a in enumerate(others):
        for b in others[i + 1:]:
            agree_a = [float(r[a][:1] == r[reference][:1]) for r in rows]
            agree_b = [float(r[b][:1] == r[reference][:1]) for r in rows]
            text = f"top draft identical to {reference}'s: {b} - {a} "
            parts.append(text + (f"{paired(agree_b, agree_a)} (95 % paired bootstrap)" if len(rows) >= 2 else
                                 f"{sum(agree_b) - sum(agree_a):+.0f}"))
    return "\n  ".join(parts)


def pair_summary(rows: list[dict], a: str, b: str) -> str:
    same = sum(r[a][:1] == r[b][:1] for r in rows)
    p_a, p_b = [float(r[f"exact_{a}"]) for r in rows], [float(r[f"exact_{b}"]) for r in rows]
    text = (f"{len(rows)} positions, {a} against {b}: top draft identical at {same / len(rows):.1%}; "
            f"P@1 {a} {sum(p_a) / len(rows):.1%}, {b} {sum(p_b) / len(rows):.1%}")
    if len(rows) >= 2:
        text += f"; P@1 {b} - {a} {paired(p_b, p_a)} (95 % paired bootstrap)"
    return text


def engine(name: str, *, left_out: tuple[str, ...] = ()) -> LocalEngine:
    """hf: transformers' forward (bf16 here); hf-fp32: the same in fp32 (the GGUF's exact numbers); fast-bf16: the fast
    path on the float weights; int4: the default load;
    int8-head: int4 with the output projection as int8 rows; q8-head: as the GGUF's Q8_0 blocks. The fast ones run eager (no compile mid-run). A suffix
    `#n` makes another engine of the same kind (`hf,hf#2`: how often one kind disagrees with itself); `+kernel` (an
    int4 kind) has its decode steps on our CPU kernels (attention; where the CPU has AVX-512 BF16, the int4
    projections and int8 head too: `matvec.py`), as the compiled step does (`int8-head+kernel`: what the server runs);
    `~group` after it leaves a kernel group out (`plan.KERNELS`: `q8-head+kernel~int8`, the plan without integer dot
    products)."""
    name = name.partition("#")[0]
    name, _, without = name.partition("~")
    name, kernel, _ = name.partition("+kernel")
    if kernel:
        from spd_lsp.engine import fast

        one = engine(name, left_out=tuple(without.split("~")) if without else ())
        backend = fast.attached(one.loaded.model)
        backend.prepare()  # as the server's compile thread does: the float layers packed (where it packs), the kernel
        if not backend.kernel:
            raise SystemExit(f"the attention kernel did not build: {backend.state}")
        print(f"{name}+kernel: {backend.weights}", flush=True)
        return one
    if name == "hf":
        return LocalEngine(load_model(fast=False))
    if name == "hf-fp32":
        return LocalEngine(load_model(fast=False, dtype="float32"))
    if name == "fast-bf16":
        from spd_lsp.engine import fast

        loaded = load_model(fast=False)
        fast.attach(loaded.model, fast.build(loaded.model, compile=False))
        return LocalEngine(loaded)
    loaded = load_model(compile=False, head={"int8-head": "int8", "q8-head": "q8"}.get(name, "float"), kernels=left_out)
    if not (loaded.fast and loaded.fast.get("fastPlan", {}).get("projections", {}).get("qkv", {}).get("decode") in
            ("q4_1 on matvec", "int4 (ATen-packed) on aten")):
        raise SystemExit(f"the default model did not load with int4 decode weights: {loaded.fast}")
    return LocalEngine(loaded)


PINNED_CHUNK = 4096  # a pinned engine's prefill chunk: a fitted prompt (1,024 tokens on the CPU) runs as one forward


def pin(one: LocalEngine, threads: int) -> LocalEngine:
    """The engine's numbers made independent of the machine's load: `threads` torch threads for every forward
    (the server drops to one under CPU pressure) and prefill chunks of a fixed size (the server times them), since
    either changes the summation order, and so, at near-ties, the drafts. Two engines of the same kind disagreed
    at 3 of 100 positions without this (load 4-10), two of them where one request had taken 8-10 s."""
    lm.cpu_pressure = lambda: None
    one.runner.threads = threads
    one.runner.chunk_seconds, one.runner.chunk_tokens = None, PINNED_CHUNK
    return one


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--positions", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workdir", type=Path, default=Path(platformdirs.user_cache_dir("spd-lsp")) / "eval")
    parser.add_argument("--pair", default="hf,int4", help="the engines, the reference first: hf, hf-fp32, fast-bf16, int4, int8-head or q8-head, an int4 kind "
                             "with +kernel (default hf,int4)")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--as-served", action="store_true",
                        help="threads and prefill chunks as the server picks them by load (default: pinned, `pin`)")
    parser.add_argument("--threads", type=int, default=2, help="torch threads of pinned engines")
    args = parser.parse_args(argv)
    names = args.pair.split(",")
    if len(names) < 2 or len(set(names)) != len(names):
        parser.error(f"--pair needs two or more different engines, got {args.pair!r}")
    root = fetch_packages(DEFAULT_PACKAGES, args.workdir / "corpus").resolve()
    engines_by_name = {name: engine(name) for name in names}
    if not args.as_served:
        for one in engines_by_name.values():
            pin(one, args.threads)
    positions = fitted(sample_positions(split_files(root).test, args.positions, args.seed, kinds=KINDS),
                       engines_by_name[names[0]].tokenizer)
    print(f"{len(positions)} test positions of {', '.join(DEFAULT_PACKAGES)}; {', '.join(names[1:])} against "
          f"{names[0]}", flush=True)
    options = DecodeOptions()
    rows: list[dict] = []
    started = time.perf_counter()
    for i, position in enumerate(positions):
        engines = list(engines_by_name.items())
        engines = engines[i % len(engines):] + engines[:i % len(engines)]  # each engine first in turn
        row: dict = {"path": str(position.path.relative_to(root)), "kind": position.kind, "target": position.target}
        for name, one in engines:
            score = complete(one, position, options)
            row[name], row[f"exact_{name}"], row[f"ms_{name}"] = score.drafts, score.exact_at_1, score.total_ms
        rows.append(row)
        if (i + 1) % 25 == 0 or i + 1 == len(positions):
            print(f"[{time.perf_counter() - started:.0f} s] {summary(rows, names)}", flush=True)
            if args.out:
                args.out.write_text(json.dumps({"summary": summary(rows, names), "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
