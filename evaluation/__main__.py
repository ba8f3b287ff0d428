"""`python -m evaluation`: measure draft quality on real code; write tables, JSON and plots.

    .venv/bin/python -m evaluation                    # the default sample (PyPI packages)
    .venv/bin/python -m evaluation --sweep 24         # first tune SPD on 24 validation positions
    .venv/bin/python -m evaluation --corpus DIR --positions 2 --lsp-positions 1 --no-base  # tiny
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import statistics
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import platformdirs

from spd_lsp.api import DecodeOptions
from spd_lsp.engine.local import LocalEngine
from evaluation import report
from evaluation.corpus import DEFAULT_PACKAGES, fetch_packages, split_files
from evaluation.evaluator import PerplexityEvaluator
from evaluation.lsp import lsp_drafts
from evaluation.metrics import summarise
from evaluation.positions import Position, sample_positions
from evaluation.run import Config, ConfigResult, evaluate, fitted, standard_configs
from evaluation.stores import base_store, workspace_store
from evaluation.sweep import AXES, sweep
from spd_lsp.engine.model import load_model

KINDS = ("line_start", "mid_line")
LIFT_SHARES = (0.0, 0.25, 0.5, 1.0)
LATENCY_KS = (1, 2, 3, 5)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m evaluation", description=__doc__.split("\n")[0])
    p.add_argument("--corpus", type=Path, help="directory of Python code (default: PyPI packages fetched with pip)")
    p.add_argument("--packages", nargs="+", default=list(DEFAULT_PACKAGES), help="pip requirements of the corpus")
    p.add_argument("--workdir", type=Path, default=Path(platformdirs.user_cache_dir("spd-lsp")) / "eval",
                   help="fetched packages and stores, kept between runs")
    p.add_argument("--out", type=Path, default=Path("docs"), help="where the plots go (docs/quality.md shows them)")
    p.add_argument("--results", type=Path, default=Path("evaluation/results"), help="where quality_results.json goes")
    p.add_argument("--positions", type=int, default=30, help="test positions for the main table and the lift")
    p.add_argument("--latency-positions", type=int, default=6)
    p.add_argument("--lsp-positions", type=int, default=6, help="positions also asked through `spd-lsp --stdio`")
    p.add_argument("--sweep", type=int, default=0, metavar="N", help="tune on N validation positions first")
    p.add_argument("--no-base", action="store_true", help="skip the standard-library base store row")
    p.add_argument("--latency-ks", type=int, nargs="+", default=list(LATENCY_KS), metavar="K")
    p.add_argument("--max-tokens", type=int, default=DecodeOptions.max_tokens, help="tokens per draft")
    p.add_argument("--seed", type=int, default=0)
    return p


def _say(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def _progress(label: str):
    return lambda done, total: _say(f"{label}: {done}/{total}") if done == total or done % 10 == 0 else None


def _rows(results: list[ConfigResult]) -> list[dict[str, Any]]:
    return [{"name": r.config.name, **summarise(r.scores)} for r in results]


def _by_kind(results: list[ConfigResult], positions: list[Position]) -> dict[str, list[dict[str, Any]]]:
    out = {}
    for kind in KINDS:
        keep = [i for i, p in enumerate(positions) if p.kind == kind]
        if keep:
            out[kind] = [{"name": r.config.name, **summarise([r.scores[i] for i in keep])} for r in results]
    return out


def _sweep(engine: LocalEngine, positions: list[Position], store: Any, options: DecodeOptions) -> tuple[DecodeOptions, dict]:
    _say(f"sweep on {len(positions)} validation positions")
    options, rows = sweep(engine, positions, store, options)
    print(report.simple_table(rows, [("axis", "axis", "str"), ("value", "value", "str"), ("P@k", "P@k", "pct"),
                                     ("line share best", "line_share_best", "pct"), ("objective", "objective", "num")]))
    return options, {"rows": rows, "chosen": {axis: options.flat()[axis] for axis in AXES}}


def _latency(engine: LocalEngine, positions: list[Position], sources: dict, options: DecodeOptions, ks: list[int]) -> list:
    grid = [(m, k) for m in ("superposed", "nucleus", "beam") for k in ks]
    configs = [Config(m, options.but(method=m, k=k, seed=0), "workspace" if m == "superposed" else None)
               for m, k in grid]
    results = evaluate(engine, configs, positions, sources)
    return [{"method": m, "k": k, "decode_ms": summarise(r.scores)["decode_ms"]} for (m, k), r in zip(grid, results)]


def _lsp_check(positions: list[Position], expected: list[list[str]], options: DecodeOptions, store: Path,
               workspace: Path, cache: Path) -> dict[str, Any]:
    _say(f"through the LSP server: {len(positions)} positions")
    served = lsp_drafts(positions, options, store, workspace, cache)
    agree = statistics.mean(s == e for (s, _), e in zip(served, expected))
    print(f"LSP server vs in-process drafts identical at {agree:.0%} of {len(positions)} positions")
    return {"positions": len(positions), "identical_drafts": agree,
            "client_ms_median": statistics.median(ms for _, ms in served),
            "mismatches": [{"lsp": s, "in_process": e} for (s, _), e in zip(served, expected) if s != e]}


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    started = time.perf_counter()
    args.workdir.mkdir(parents=True, exist_ok=True)
    args.out.mkdir(parents=True, exist_ok=True)
    root = (args.corpus or fetch_packages(args.packages, args.workdir / "corpus")).resolve()
    split = split_files(root)
    _say(f"corpus {root}: {len(split.indexed)} indexed, {len(split.validation)} validation, "
         f"{len(split.test)} test files")
    loaded = load_model()
    engine = LocalEngine(loaded)
    tok = engine.tokenizer
    key = hashlib.sha256(str(root).encode()).hexdigest()[:10]  # one set of stores per corpus
    order = random.Random(args.seed).sample(split.indexed, len(split.indexed))
    stores = {share: workspace_store(args.workdir / f"ws-{key}-{int(100 * share)}", tok, root,
                                     order[: round(share * len(order))]) for share in LIFT_SHARES}
    sources: dict[str, Any] = {"workspace": stores[1.0]}
    if not args.no_base:
        _say("base store (standard library; built once)")
        sources["base"] = base_store(args.workdir / "base-stdlib", tok)
    out: dict[str, Any] = {"corpus": str(root), "packages": None if args.corpus else args.packages,
                           "files": {k: len(v) for k, v in asdict(split).items()}}

    options = DecodeOptions(max_tokens=args.max_tokens)
    if args.sweep:
        validation = fitted(sample_positions(split.validation, args.sweep, args.seed + 1, kinds=KINDS), tok)
        options, out["sweep"] = _sweep(engine, validation, stores[1.0], options)

    positions = fitted(sample_positions(split.test, args.positions, args.seed, kinds=KINDS), tok)
    configs = [c for c in standard_configs(3, options) if c.ngrams is None or c.ngrams in sources]
    _say(f"main table: {len(configs)} methods x {len(positions)} test positions")
    results = evaluate(engine, configs, positions, sources, PerplexityEvaluator(loaded.model, tok), _progress("main"))
    out["main"], out["by_kind"] = _rows(results), _by_kind(results, positions)
    print(report.results_table(out["main"]))
    report.plot_precision(out["main"], args.out / "quality_p_at_k.png")

    _say("n-gram lift")
    spd = replace(options, method="superposed", k=3)
    lift = evaluate(engine, [Config(f"{s}", spd, f"{s}") for s in LIFT_SHARES], positions,
                    {f"{share}": store for share, store in stores.items()})
    out["lift"] = [{"share": s, **summarise(r.scores)} for s, r in zip(LIFT_SHARES, lift)]
    report.plot_lift(out["lift"], args.out / "quality_ngram_lift.png")

    _say("latency vs k")
    out["latency"] = _latency(engine, positions[: args.latency_positions], sources, options, args.latency_ks)
    report.plot_latency(out["latency"], args.out / "quality_latency_vs_k.png")

    if args.lsp_positions:
        for store in stores.values():
            store.close()  # the server opens the workspace store itself
        few = positions[: args.lsp_positions]
        out["lsp"] = _lsp_check(few, results[0].drafts[: len(few)], spd, args.workdir / f"ws-{key}-100", root,
                                args.workdir / "lsp-cache")
    out["seconds"] = time.perf_counter() - started
    args.results.mkdir(parents=True, exist_ok=True)
    (args.results / "quality_results.json").write_text(json.dumps(out, indent=1, default=str))
    _say(f"done in {out['seconds']:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
