"""`python -m evaluation.study`: held-out study of verified drafts against greedy and beam.

Three corpora of different styles (each its own workspace store), three cursor kinds,
per-position records (JSON lines, resumable, index-major so a partial run is usable),
paired bootstrap intervals. Every SPD verification variant at a position is derived
from ONE plain SPD run (evaluation/run.py `verified`: the verify hook on the same prompt
cache), its time being SPD's plus the verification's:

    nice -n 10 .venv/bin/python -m evaluation.study run --split validation --per-kind 12 \\
        --out evaluation/results/validation2.jsonl --configs greedy spd spd-keep spd-cuttop spd-cut
    nice -n 10 .venv/bin/python -m evaluation.study run --split test --per-kind 100 --total-per-kind 150 \\
        --out evaluation/results/test2.jsonl --configs greedy beam-3 spd spd-keep spd-keep-repair2 spd-cuttop
    .venv/bin/python -m evaluation.study report evaluation/results/test2.jsonl --plot docs/quality_blend_by_rank.png
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

import platformdirs

from spd_lsp.api import DecodeOptions
from spd_lsp.engine.local import LocalEngine
from evaluation import report
from evaluation.compare import paired
from evaluation.corpus import corpus_of
from evaluation.metrics import RequestScore, summarise
from evaluation.positions import sample_positions
from evaluation.run import Config, evaluate, fitted
from evaluation.stores import workspace_store
from spd_lsp.engine.model import load_model

# Different styles, none used for tuning the decoder (click, rich, attrs) nor this repository:
# an HTTP client (classes, keyword calls), iterator recipes (small functional helpers, doctests)
# and a template compiler (visitors, code generation).
STUDY_PACKAGES: tuple[str, ...] = ("requests==2.32.3", "more-itertools==10.5.0", "jinja2==3.1.4")
KINDS: tuple[str, ...] = ("line_start", "mid_line", "call")
BASELINES: tuple[str, ...] = ("greedy", "beam-3")


def _verify(rounds: int, **rest: Any) -> dict[str, Any]:
    return {"verify_rounds": rounds, "verify_first": "rank", "verify_score": "mean", **rest}  # round 1's unless given


SPD_VARIANTS: dict[str, dict[str, Any]] = {
    "spd": _verify(0),
    "spd-rank": _verify(1, verify_top=None, verify_log_ratio=float("-inf"), verify_gate=None),
    "spd-cut": _verify(1),
    "spd-repair2": _verify(2),
    "spd-repair3": _verify(3),
    "spd-repair2-ratio2": _verify(2, verify_log_ratio=-2.0),
    "spd-repair2-ratio5": _verify(2, verify_log_ratio=-5.0),
    "spd-repair2-gate1": _verify(2, verify_gate=1.0),
    "spd-repair2-nogate": _verify(2, verify_gate=None),
    # SPD's top draft kept first and whole; ranks 2..k cut (or repaired), ranked by exact total, gated.
    "spd-keep": _verify(1, verify_first="keep", verify_score="total"),
    "spd-keep-repair2": _verify(2, verify_first="keep", verify_score="total"),
    "spd-keep-nogate": _verify(1, verify_first="keep", verify_score="total", verify_gate=None),
    "spd-keep-gate1": _verify(1, verify_first="keep", verify_score="total", verify_gate=1.0),
    "spd-cuttop": _verify(1, verify_first="cut", verify_score="total", last_token="step"),
    # The shipped rule with the drafts' last token from verification's forward (one superposed step fewer): its own
    # SPD run, not derived from the plain one (evaluation/run.py `_answer`).
    "spd-cuttop-tree": _verify(1, verify_first="cut", verify_score="total", last_token="tree"),
    # The shipped variant's neighbours, for tuning on the validation split.
    "spd-cuttop-repair2": _verify(2, verify_first="cut", verify_score="total"),
    "spd-cuttop-ratio2": _verify(1, verify_first="cut", verify_score="total", verify_log_ratio=-2.0),
    "spd-cuttop-ratio5": _verify(1, verify_first="cut", verify_score="total", verify_log_ratio=-5.0),
    "spd-cuttop-top3": _verify(1, verify_first="cut", verify_score="total", verify_top=3),
    "spd-cuttop-top10": _verify(1, verify_first="cut", verify_score="total", verify_top=10),
    "spd-cuttop-gate1": _verify(1, verify_first="cut", verify_score="total", verify_gate=1.0),
    "spd-cuttop-gate3": _verify(1, verify_first="cut", verify_score="total", verify_gate=3.0),
    "spd-cuttop-nogate": _verify(1, verify_first="cut", verify_score="total", verify_gate=None),
    # When verification leaves no draft: SPD's unverified top draft (round 3's behaviour) instead of nothing.
    "spd-cuttop-emptytop": _verify(1, verify_first="cut", verify_score="total", verify_empty="top"),
    # Repair by continuing: the model's choice in place of the first implausible token, then greedy decoding.
    "spd-cuttop-cont": _verify(1, verify_first="cut", verify_score="total", verify_repair="continue"),
    "spd-keep-cont": _verify(1, verify_first="keep", verify_score="total", verify_repair="continue"),
}


def registry(base: DecodeOptions) -> dict[str, Config]:
    """Every configuration the study knows, by name."""
    configs = {
        "greedy": Config("greedy", replace(base, method="greedy", k=1)),
        "beam-3": Config("beam-3", replace(base, method="beam", k=3)),
        "nucleus-3": Config("nucleus-3", base.but(method="nucleus", k=3, seed=0)),
    }
    for name, verify in SPD_VARIANTS.items():
        configs[name] = Config(name, base.but(method="superposed", k=3, **verify), "workspace")
    return configs


def _say(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def _done(out: Path) -> set[tuple[str, str, int, str]]:
    if not out.exists():
        return set()
    return {(r["corpus"], r["kind"], r["index"], r["config"]) for r in map(json.loads, out.read_text().splitlines())}


def run(args: argparse.Namespace) -> None:
    configs = [registry(DecodeOptions(max_tokens=args.max_tokens))[name] for name in args.configs]
    loaded = load_model()
    engine = LocalEngine(loaded)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    done = _done(args.out)
    stores, positions = {}, {}
    for package in args.packages:
        corpus = corpus_of(package, args.workdir)
        name, root, split = corpus.name, corpus.root, corpus.split
        stores[name] = workspace_store(args.workdir / f"ws-{name}", engine.tokenizer, root, split.indexed)
        files = split.held_out(args.split)
        for kind in args.kinds:
            sample = sample_positions(files, args.per_kind, args.seed, kinds=(kind,))
            positions[name, kind] = fitted(sample, engine.tokenizer)
    for name, kind, index in schedule(positions, args):
        sample = positions[name, kind]
        todo = [c for c in configs if (name, kind, index, c.name) not in done]
        if not todo:
            continue
        results = evaluate(engine, todo, [sample[index]], {"workspace": stores[name]}, share_spd=True)
        with args.out.open("a") as out:
            for result in results:
                record = {"corpus": name, "kind": kind, "index": index, "config": result.config.name,
                          "target": sample[index].target, **asdict(result.scores[0])}
                out.write(json.dumps(record) + "\n")
        _say(f"{name} {kind} {index + 1}/{len(sample)}")
    for store in stores.values():
        store.close()


def schedule(samples: dict[tuple[str, str], Sequence[Any]], args: argparse.Namespace) -> Iterator[tuple[str, str, int]]:
    """(corpus, kind, index) to answer, index-major: a run stopped early still covers every corpus and
    kind evenly. A kind stops at --total-per-kind positions, a corpus with few candidates of a kind
    leaving them to the others; the count starts at index 0 whatever --start, so processes that split
    the indexes (--start/--stop) take the same positions one process would."""
    taken = dict.fromkeys(KINDS, 0)
    for index in range(min(args.per_kind, args.stop or args.per_kind)):
        for (name, kind), sample in samples.items():
            if index >= len(sample) or taken[kind] >= args.total_per_kind:
                continue
            taken[kind] += 1
            if index >= args.start:
                yield name, kind, index


def load(paths: list[Path], configs: list[str] | None = None) -> dict[str, dict[tuple[str, str, int], RequestScore]]:
    """config -> (corpus, kind, index) -> score, from the records of one or more runs; with `configs`,
    those only, in that order."""
    by_config: dict[str, dict[tuple[str, str, int], RequestScore]] = {}
    fields = set(RequestScore.__dataclass_fields__)
    for line in (line for path in paths for line in path.read_text().splitlines()):
        r = json.loads(line)
        score = RequestScore(**{k: v for k, v in r.items() if k in fields})
        by_config.setdefault(r["config"], {})[(r["corpus"], r["kind"], r["index"])] = score
    return {name: by_config[name] for name in configs} if configs else by_config


METRICS: dict[str, tuple[str, Any]] = {
    # name: (statistic, per-position value)
    "P@1": ("difference", lambda s: float(s.exact_at_1)),
    "P@3": ("difference", lambda s: float(s.exact_at_k)),
    "chars best": ("ratio", lambda s: float(s.chars_any)),
    "time": ("median_ratio", lambda s: s.decode_ms),  # prefill excluded: the first method at a position pays it
}


def comparisons(scores: dict[str, dict[tuple, RequestScore]], keys: list[tuple], against: str) -> list[dict]:
    rows = []
    for name, by_key in scores.items():
        if name == against:
            continue
        row: dict[str, Any] = {"config": name, "against": against}
        for metric, (statistic, value) in METRICS.items():
            a = [value(by_key[k]) for k in keys]
            b = [value(scores[against][k]) for k in keys]
            row[metric] = str(paired(a, b, statistic))
        rows.append(row)
    return rows


def _summary_rows(scores: dict[str, dict[tuple, RequestScore]], keys: Iterable[tuple]) -> list[dict[str, Any]]:
    keys = list(keys)
    unset = {f"blend_{rank}": float("nan") for rank in (1, 2, 3)}  # ranks a method never shows
    return [{"name": name, **unset, **summarise([by_key[k] for k in keys])} for name, by_key in scores.items()]


SUMMARY_COLUMNS = [("method", "name", "str"), ("positions", "requests", "str"), ("P@1", "P@1", "pct"),
                   ("P@3", "P@k", "pct"), ("chars best", "chars_best", "num"), ("line share best", "line_share_best",
                   "pct"), ("shown", "shown", "num"), ("blend r1", "blend_1", "pct"), ("blend r2", "blend_2", "pct"),
                   ("blend r3", "blend_3", "pct"), ("decode ms", "decode_ms", "ms"), ("verify ms", "verify_ms", "ms"),
                   ("total ms", "total_ms", "ms")]
COMPARISON_COLUMNS = [("method", "config", "str"), ("vs", "against", "str"), ("ΔP@1", "P@1", "str"),
                      ("ΔP@3", "P@3", "str"), ("chars best ×", "chars best", "str"), ("time ×", "time", "str")]


def report_on(paths: list[Path], configs: list[str] | None = None, against: Sequence[str] = BASELINES) -> dict[str, Any]:
    scores = load(paths, configs)
    keys = sorted(set.intersection(*(set(v) for v in scores.values())))  # positions every config answered
    out: dict[str, Any] = {"positions": len(keys), "all": _summary_rows(scores, keys), "by_kind": {}}
    print(f"## {', '.join(p.name for p in paths)}: {len(keys)} positions answered by every configuration\n")
    print(report.simple_table(out["all"], SUMMARY_COLUMNS) + "\n")
    for kind in KINDS:
        subset = [k for k in keys if k[1] == kind]
        if subset:
            out["by_kind"][kind] = _summary_rows(scores, subset)
            print(f"### {kind} ({len(subset)} positions)\n")
            print(report.simple_table(out["by_kind"][kind], SUMMARY_COLUMNS) + "\n")
    out["paired"] = [row for base in against if base in scores for row in comparisons(scores, keys, base)]
    print("### paired differences, 95 % bootstrap intervals (all positions)\n")
    print(report.simple_table(out["paired"], COMPARISON_COLUMNS))
    return out


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m evaluation.study", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="answer positions; append one JSON line per (position, configuration)")
    r.add_argument("--split", choices=("validation", "test"), required=True)
    r.add_argument("--per-kind", type=int, default=50, help="at most this many positions per corpus and kind")
    r.add_argument("--total-per-kind", type=int, default=10**9, help="at most this many positions per kind in all")
    r.add_argument("--configs", nargs="+", default=["greedy", "beam-3", "spd", "spd-repair2"])
    r.add_argument("--packages", nargs="+", default=list(STUDY_PACKAGES))
    r.add_argument("--workdir", type=Path, default=Path(platformdirs.user_cache_dir("spd-lsp")) / "study")
    r.add_argument("--out", type=Path, required=True)
    r.add_argument("--max-tokens", type=int, default=10)
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--start", type=int, default=0, help="first position index (a second process can take the rest)")
    r.add_argument("--kinds", nargs="+", choices=KINDS, default=list(KINDS), help="only these kinds of position")
    r.add_argument("--stop", type=int, default=None, help="stop before this position index (default: --per-kind)")
    s = sub.add_parser("report", help="tables and paired intervals from a run's JSON lines")
    s.add_argument("paths", type=Path, nargs="+")
    s.add_argument("--json", type=Path, help="also write the figures here")
    s.add_argument("--plot", type=Path, help="also plot the blend rate by rank here (PNG)")
    s.add_argument("--configs", nargs="+", help="only these configurations (default: every one in the files)")
    s.add_argument("--curve", type=Path, help="also plot quality against time per request here (PNG)")
    s.add_argument("--against", nargs="+", default=list(BASELINES), help="the paired differences' baselines")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "run":
        run(args)
    else:
        out = report_on(args.paths, args.configs, args.against)
        if args.json:
            args.json.write_text(json.dumps(out, indent=1))
        if args.plot:
            report.plot_blend(out["all"], args.plot)
        if args.curve:
            report.plot_cost_curve(out["all"], args.curve)
    return 0


if __name__ == "__main__":
    sys.exit(main())
