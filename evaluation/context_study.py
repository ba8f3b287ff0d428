"""`python -m evaluation.context_study`: does context beyond the prefix help the bundled model?

The bundled SmolLM2 has no fill-in-the-middle tokens, only repository tokens. On the
study's held-out positions (evaluation/study.py: corpora, splits, cursor kinds,
metrics, paired bootstrap), each with the file's real text after the cursor, it
compares the prompt formats the server can send:

- `prefix`: the text before the cursor alone (the suffix only cuts echoes);
- `filename`: a `<filename>{path}` header (StarCoder metadata) before it;
- `snippets`: `<file_sep>`-separated chunks of the workspace's files found by BM25,
  then `<file_sep>{path}` and the prefix (StarCoder2 repository data);

and reports P@1, P@3, accepted characters, the blend rate of the shown drafts
(evaluation/blend.py), the time per decoded request with its prefill, and the tokens one
more keystroke re-prefills (the KV-cache layout). Drafts are decoded as the server
ships them (`Settings().decode_options()`: SPD with verification). Like the study,
a kind stops at --total-per-kind positions (the requests corpus has few calls in its
test split: the others fill), and --start/--stop split the indexes between processes:

    nice -n 10 .venv/bin/python -m evaluation.context_study run --split test --per-kind 100 \\
        --total-per-kind 150 --stop 50 --out evaluation/results/context-test2-a.jsonl
    nice -n 10 .venv/bin/python -m evaluation.context_study run --split test --per-kind 100 \\
        --total-per-kind 150 --start 50 --out evaluation/results/context-test2-b.jsonl
    .venv/bin/python -m evaluation.context_study report evaluation/results/context-test2-a.jsonl evaluation/results/context-test2-b.jsonl

`--configs prefix prefix-256 prefix-1024 prefix-2048` instead compares prompt budgets of the prefix alone
(`BUDGETS`; evaluation/results/context-budget.md). `run`'s latency columns do not time a budget's cold request
(a position's configurations share one engine: an equal prompt is cached); `cold` does, interleaved,
on positions with more than the largest budget's tokens before the cursor, per verification mode:

    nice -n 5 .venv/bin/python -m evaluation.context_study cold --split validation --positions 12 \\
        --budgets 256 512 1024 2048 --verify cut continue --out evaluation/results/budget-cold.jsonl
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import platformdirs

from spd_lsp.settings import VERIFY, Settings
from spd_lsp.cursor import fit_prefix
from spd_lsp.engine.decoding import lm
from spd_lsp.engine.decoding.lm import common_prefix_length
from spd_lsp.engine.decoding.threads import cpu_pressure
from spd_lsp.api import DecodeOptions, DecodeRequest, PromptContext
from spd_lsp.engine.local import LocalEngine
from evaluation import report
from evaluation.compare import paired
from evaluation.corpus import corpus_of
from evaluation.positions import Position, sample_positions
from evaluation.run import scored
from evaluation.stores import workspace_store
from evaluation.study import (
    COMPARISON_COLUMNS,
    KINDS,
    STUDY_PACKAGES,
    SUMMARY_COLUMNS,
    _done,
    _say,
    _summary_rows,
    comparisons,
    load,
    schedule,
)
from spd_lsp.engine.model import load_model
from spd_lsp.context.retrieval import ChunkIndex
from spd_lsp.context.snippets import around, identifiers, query_text, select
from spd_lsp.session.session import token_spans

PREFIX_TOKENS = 512  # the `prefix` row's budget: the CPU default until the budget study (now CPU_PREFIX_TOKENS = 1024)
# The prefix alone under other budgets (issue 21 item 4: spend a cheaper prefill on context); not run by default.
BUDGETS: dict[str, int] = {f"prefix-{tokens}": tokens for tokens in (256, 1024, 2048)}
DEFAULT_CONFIGS: dict[str, str] = {"prefix": "prefix", "filename": "filename", "snippets": "file_sep"}
CONFIGS: dict[str, str] = {**DEFAULT_CONFIGS, **dict.fromkeys(BUDGETS, "prefix")}  # name -> promptFormat
SUFFIX_CHARS = 2000


@dataclass(frozen=True)
class Case:
    """A position as the editor has it: the prefix (fitted), the text after the cursor, the file's path."""

    position: Position
    suffix: str
    path: str
    near_cursor: str  # the lines around the cursor the editor shows (never the held-out line)
    whole_prefix: str | None = None  # the text before the cursor before fitting (BUDGETS fit it again)


def _case(position: Position, root: Path, spans: Any) -> Case | None:
    text = position.path.read_text(encoding="utf-8", errors="replace")
    at = text.find(position.prefix + position.target)
    if at < 0:
        return None
    cursor = at + len(position.prefix)
    line_end = text.find("\n", cursor)
    after = position.suffix + (text[line_end:line_end + SUFFIX_CHARS] if line_end >= 0 else "")
    whole = text[:cursor]  # the sample's prefix holds its last 3,000 characters only: ~730 tokens
    fitted = replace(position, prefix=fit_prefix(whole, spans, PREFIX_TOKENS))
    editor = position.prefix + after
    return Case(fitted, after, str(position.path.relative_to(root)), around(editor, len(position.prefix)), whole)


def _snippets(case: Case, index: ChunkIndex, engine: LocalEngine, budget: int) -> list[tuple[str, str]]:
    ranked = index.search(query_text(case.position.prefix), k=16)
    chosen = select(ranked, case.near_cursor, budget, lambda text: len(engine.encode(text)))
    return [(c.path, c.text) for c in chosen]


def answer(engine: LocalEngine, case: Case, config: str, options: DecodeOptions, snippets: list[tuple[str, str]]) -> dict[str, Any]:
    """One request as the server makes it, scored; with the prefill a further keystroke would add."""
    p = case.position
    if config in BUDGETS:
        p = replace(p, prefix=fit_prefix(case.whole_prefix or p.prefix, token_spans(engine.tokenizer), BUDGETS[config]))
    fmt = CONFIGS[config]
    context = PromptContext(case.suffix, case.path if config != "prefix" else None,
                            tuple(snippets) if config == "snippets" else (), "python")
    request = DecodeRequest(p.prefix, options, context=context, prompt_format=fmt)
    result = engine.complete(request)
    healed = engine.prompt(request).healed
    score = scored(engine, replace(p, suffix=case.suffix), options, result, healed=healed)  # blends on this prompt
    t = result.timings
    now = healed.prompt_ids
    typed = engine.prompt(replace(request, prefix=p.prefix + p.target[:1])).healed.prompt_ids
    return {**asdict(score), "prefill_tokens": t.prefill_tokens, "prefill_ms": 1000 * t.prefill_s,
            "prompt_tokens": len(now), "keystroke_prefill": len(typed) - common_prefix_length(now, typed),
            "prompt": result.prompt}


def _prepare(args: argparse.Namespace, tokenizer: Any, *, with_stores: bool = True) -> tuple[dict, dict, dict]:
    """Per corpus: its n-gram store and BM25 index over the indexed split; per (corpus, kind): the cases."""
    spans = token_spans(tokenizer)
    stores, indexes, cases = {}, {}, {}
    for package in args.packages:
        corpus = corpus_of(package, args.workdir)
        name, root, split = corpus.name, corpus.root, corpus.split
        if with_stores:
            stores[name] = workspace_store(args.workdir / f"ws-{name}", tokenizer, root, split.indexed)
        indexes[name] = ChunkIndex.of_files((str(f.relative_to(root)), f.read_text(encoding="utf-8", errors="replace"))
                                            for f in split.indexed)
        files = split.validation if args.split == "validation" else split.test
        for kind in KINDS:
            sample = sample_positions(files, args.per_kind, args.seed, kinds=(kind,))
            cases[name, kind] = [c for c in (_case(p, root, spans) for p in sample) if c is not None]
    return stores, indexes, cases


def shipped(max_tokens: int, verify: str = Settings.verify) -> DecodeOptions:
    """The server's default decoding (SPD, k = 3, n-grams, verification on) at `max_tokens`."""
    return Settings(max_tokens=max_tokens, verify=verify).decode_options()


def run(args: argparse.Namespace) -> None:
    options = shipped(args.max_tokens)
    engine = LocalEngine(load_model())
    args.out.parent.mkdir(parents=True, exist_ok=True)
    done = _done(args.out)
    stores, indexes, cases = _prepare(args, engine.tokenizer)
    for name, kind, index in schedule(cases, args):
        sample = cases[name, kind]
        todo = [c for c in args.configs if (name, kind, index, c) not in done]
        if not todo:
            continue
        engine.set_ngrams(stores[name])
        case = sample[index]
        snippets = _snippets(case, indexes[name], engine, args.snippet_tokens)
        with args.out.open("a") as out:
            for config in todo:
                record = {"corpus": name, "kind": kind, "index": index, "config": config,
                          "target": case.position.target, **answer(engine, case, config, options, snippets)}
                out.write(json.dumps(record) + "\n")
        _say(f"{name} {kind} {index + 1}/{len(sample)}")
    for store in stores.values():
        store.close()


def cold(args: argparse.Namespace) -> None:
    """Cold requests (nothing cached) per (budget, verification mode), interleaved per position, at
    `--threads` threads whatever the CPU pressure; one JSON line per request, then the medians."""
    engine = LocalEngine(load_model())
    engine.runner.slots, engine.runner.threads = 1, args.threads  # no parked prompt cache to reuse
    lm.cpu_pressure = lambda: None  # the threads asked for, whatever the load (the pressure is recorded)
    stores, _, cases = _prepare(args, engine.tokenizer)
    longest = max(args.budgets) + 16
    long_enough = [(name, c) for (name, _), sample in cases.items() for c in sample
                   if len(engine.encode(c.whole_prefix or "")) > longest][: args.positions]
    spans = token_spans(engine.tokenizer)
    arms = [(budget, mode) for budget in args.budgets for mode in args.verify]
    records = []
    with args.out.open("a") as out:
        for i, (name, case) in enumerate(long_enough):
            engine.set_ngrams(stores[name])
            for budget, mode in arms[i % len(arms):] + arms[: i % len(arms)]:  # rotated: no arm always first
                prefix = fit_prefix(case.whole_prefix or "", spans, budget)
                request = DecodeRequest(prefix, shipped(args.max_tokens, mode), context=PromptContext(
                    case.suffix, None, (), "python"), prompt_format="prefix")
                engine.runner.rewind(0)
                t = engine.complete(request).timings
                record = {"corpus": name, "position": i, "budget": budget, "verify": mode,
                          "prefill_tokens": t.prefill_tokens, "reused_tokens": t.reused_tokens,
                          "prefill_ms": 1000 * t.prefill_s, "verify_ms": 1000 * t.verify_s,
                          "total_ms": 1000 * t.total_s, "steps": t.steps, "step_ms": t.per_step_ms,
                          "threads": args.threads, "load": os.getloadavg()[0], "cpu_pressure": cpu_pressure()}
                records.append(record)
                out.write(json.dumps(record) + "\n")
            _say(f"{name} {i + 1}/{len(long_enough)}: load {os.getloadavg()[0]:.1f}")
    for store in stores.values():
        store.close()
    print(cold_table(records))


def cold_table(records: list[dict[str, Any]]) -> str:
    """Medians per (budget, mode), and the total's ratio to the first arm's at the same positions."""
    arms = sorted({(r["budget"], r["verify"]) for r in records}, key=lambda a: (a[0], VERIFY.index(a[1])))
    by = {(r["position"], r["budget"], r["verify"]): r for r in records}
    base = (512, Settings.verify) if (512, Settings.verify) in arms else arms[0]
    lines = ["| budget | verify | requests | prompt tokens | prefill ms | decode + verify ms | verify ms | total ms "
             f"| total × {base[0]} {base[1]} [95 % CI] | load |", "| ---: | --- |" + " ---: |" * 8]
    for arm in arms:
        mine = [r for r in records if (r["budget"], r["verify"]) == arm]
        pairs = [(r["total_ms"], by[r["position"], *base]["total_ms"]) for r in mine if (r["position"], *base) in by]
        ratio = paired(*zip(*pairs), "median_ratio") if len(pairs) > 1 else "-"
        m = {c: statistics.median(r[c] for r in mine) for c in ("prefill_tokens", "prefill_ms", "verify_ms", "total_ms", "load")}
        decode = statistics.median(r["total_ms"] - r["prefill_ms"] for r in mine)
        lines.append(f"| {arm[0]} | {arm[1]} | {len(mine)} | {m['prefill_tokens']:.0f} | {m['prefill_ms']:.0f} | "
                     f"{decode:.0f} | {m['verify_ms']:.0f} | {m['total_ms']:.0f} | {ratio} | {m['load']:.1f} |")
    return "\n".join(lines)


def recall(args: argparse.Namespace) -> None:
    """Without the model: how often the chosen snippets hold a name the rest of the line needs and
    the prefix lacks (what snippets could teach the model), over many positions."""
    engine = LocalEngine(load_model())
    _, indexes, cases = _prepare(args, engine.tokenizer, with_stores=False)
    rows = []
    for (name, kind), sample in cases.items():
        known = frozenset().union(*(identifiers(c.text) for c in indexes[name].chunks))
        needing = hits = anywhere = 0
        for case in sample:
            new_names = identifiers(case.position.target) - identifiers(case.position.prefix + case.suffix)
            if not new_names:
                continue
            needing += 1
            anywhere += bool(new_names & known)
            found = "".join(code for _, code in _snippets(case, indexes[name], engine, args.snippet_tokens))
            hits += bool(new_names & identifiers(found))
        rows.append({"corpus": name, "kind": kind, "positions": len(sample), "needing": needing, "hits": hits,
                     "in_workspace": anywhere})
        _say(f"{name} {kind}: {hits}/{needing} of {len(sample)} ({anywhere} somewhere in the workspace)")
    args.out.write_text(json.dumps(rows, indent=1))
    for kind in KINDS:
        needing = sum(r["needing"] for r in rows if r["kind"] == kind)
        hits = sum(r["hits"] for r in rows if r["kind"] == kind)
        total = sum(r["positions"] for r in rows if r["kind"] == kind)
        anywhere = sum(r["in_workspace"] for r in rows if r["kind"] == kind)
        print(f"{kind}: {total} positions, {needing} need a name the prefix lacks, the workspace has one for "
              f"{anywhere}, the snippets for {hits}")


EXTRA_COLUMNS = [("method", "config", "str"), ("prompt tokens", "prompt_tokens", "num"),
                 ("prefill ms", "prefill_ms", "ms"), ("total ms", "total_ms", "ms"),
                 ("re-prefill / keystroke", "keystroke_prefill", "num"), ("total ms ×", "total_ratio", "str")]


def report_on(paths: list[Path], against: str = "prefix", configs: list[str] | None = None) -> dict[str, Any]:
    scores = load(paths, configs)
    records = [json.loads(line) for path in paths for line in path.read_text().splitlines()]
    keys = sorted(set.intersection(*(set(v) for v in scores.values())))
    out: dict[str, Any] = {"positions": len(keys), "all": _summary_rows(scores, keys)}
    print(f"## {', '.join(p.name for p in paths)}: {len(keys)} positions answered by every configuration\n")
    print(report.simple_table(out["all"], SUMMARY_COLUMNS) + "\n")
    out["paired"] = comparisons(scores, keys, against)
    print(f"### paired differences against {against}, 95 % bootstrap intervals\n")
    print(report.simple_table(out["paired"], COMPARISON_COLUMNS) + "\n")
    wanted = set(keys)
    by = {(r["corpus"], r["kind"], r["index"], r["config"]): r for r in records if (r["corpus"], r["kind"], r["index"]) in wanted}
    rows = []
    for config in scores:
        mine = [by[(*k, config)] for k in keys]
        base = [by[(*k, against)]["total_ms"] for k in keys]
        rows.append({"config": config, **{c: statistics.median(r[c] for r in mine)
                                          for c in ("prompt_tokens", "prefill_ms", "total_ms", "keystroke_prefill")},
                     "total_ratio": str(paired([r["total_ms"] for r in mine], base, "median_ratio"))})
    out["latency"] = rows
    print("### latency per decoded request (medians; cold prompt: nothing cached)\n")
    print(report.simple_table(rows, EXTRA_COLUMNS))
    return out


def _report(args: argparse.Namespace) -> None:
    out = report_on(args.paths, configs=args.configs)
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m evaluation.context_study", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="answer positions; append one JSON line per (position, configuration)")
    r.set_defaults(action=run)
    r.add_argument("--out", type=Path, required=True)
    r.add_argument("--split", choices=("validation", "test"), required=True)
    r.add_argument("--configs", nargs="+", default=list(DEFAULT_CONFIGS), choices=list(CONFIGS),
                   help=f"default {' '.join(DEFAULT_CONFIGS)}; the prefix under other budgets: {' '.join(BUDGETS)}")
    r.add_argument("--packages", nargs="+", default=list(STUDY_PACKAGES))
    r.add_argument("--workdir", type=Path, default=Path(platformdirs.user_cache_dir("spd-lsp")) / "study")
    for flag, default in {"--per-kind": 50, "--start": 0, "--seed": 0, "--max-tokens": 10, "--snippet-tokens": 256,
                          "--total-per-kind": 10**9}.items():
        r.add_argument(flag, type=int, default=default)
    r.add_argument("--stop", type=int, default=None, help="stop before this position index (default: --per-kind)")
    c = sub.add_parser("recall", help="without the model: do the snippets hold the names the line needs?")
    c.set_defaults(action=recall)
    c.add_argument("--out", type=Path, required=True)
    c.add_argument("--split", choices=("validation", "test"), required=True)
    c.add_argument("--packages", nargs="+", default=list(STUDY_PACKAGES))
    c.add_argument("--workdir", type=Path, default=Path(platformdirs.user_cache_dir("spd-lsp")) / "study")
    for flag, default in {"--per-kind": 150, "--seed": 0, "--snippet-tokens": 256}.items():
        c.add_argument(flag, type=int, default=default)
    t = sub.add_parser("cold", help="time cold requests per prompt budget and verification mode, interleaved")
    t.set_defaults(action=cold)
    t.add_argument("--out", type=Path, required=True)
    t.add_argument("--split", choices=("validation", "test"), default="validation")
    t.add_argument("--budgets", nargs="+", type=int, default=[256, PREFIX_TOKENS, 1024, 2048])
    t.add_argument("--verify", nargs="+", choices=VERIFY, default=[Settings.verify])
    t.add_argument("--packages", nargs="+", default=list(STUDY_PACKAGES))
    t.add_argument("--workdir", type=Path, default=Path(platformdirs.user_cache_dir("spd-lsp")) / "study")
    for flag, default in {"--positions": 12, "--per-kind": 100, "--seed": 0, "--max-tokens": 10, "--threads": 2}.items():
        t.add_argument(flag, type=int, default=default)
    u = sub.add_parser("cold-report", help="the cold requests' table from their JSON lines")
    u.set_defaults(action=lambda a: print(cold_table([json.loads(line) for p in a.paths for line in p.read_text().splitlines()])))
    u.add_argument("paths", type=Path, nargs="+")
    s = sub.add_parser("report", help="tables and paired intervals from a run's JSON lines")
    s.set_defaults(action=_report)
    s.add_argument("paths", type=Path, nargs="+")
    s.add_argument("--json", type=Path, help="also write the figures here")
    s.add_argument("--configs", nargs="+", help="only these configurations (default: every one in the files)")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    args.action(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
