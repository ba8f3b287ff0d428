"""`python -m evaluation.multiline`: does `multiline: "auto"` beat single-line drafts? A simulated typist.

At held-out positions (`evaluation.edits`: a block's header or empty body, a line's start or middle,
with the code the user writes there removed), a typist writes the real code through the server's
own session (`spd_lsp.session.session.Session`: type-through, the prompt window, fitting; the bundled model in
process, n-grams off, the shipped decoding). At each request it takes what saves the most
keystrokes of a draft the real code starts with: all of it (Tab), its first line (accept line) or its
next words (one accept-word each), a draft below the first after one `Alt+]` per rank; else it types
the next character. Indentation after a newline costs nothing (the editor indents). It asks again after each accept, and after a keystroke
where no shown draft agrees any more and a word ends (the editor's debounce waits for a pause). Per
position and configuration:

- `keys`, `keys_typing`: keystrokes spent writing the first `HORIZON_LINES` lines, and without drafts;
- `requests`: model calls; `accepted`: characters inserted by accepting; `first_chars`: the characters
  of the real code the first request's top draft starts with (what accepting it word by word gives);
- `decode_ms`: each model call's time without its prompt's prefill (the first configuration at a
  position pays that; the order alternates), `total_ms` with it.

    nice -n 10 .venv/bin/python -m evaluation.multiline run --split validation --per-kind 40 \\
        --configs single auto-32 auto-64 --out evaluation/results/multiline-validation.jsonl
    nice -n 10 .venv/bin/python -m evaluation.multiline run --split test --per-kind 150 \\
        --configs single auto --out evaluation/results/multiline-test.jsonl
    .venv/bin/python -m evaluation.multiline report evaluation/results/multiline-test.jsonl --against single
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import platformdirs

from evaluation import report
from evaluation.compare import paired
from evaluation.corpus import corpus_of
from evaluation.edits import KINDS, Edit, sample_edits
from evaluation.positions import matched_prefix
from evaluation.study import STUDY_PACKAGES, _done, _say
from spd_lsp.api import Loaded
from spd_lsp.engine.local import LocalEngine
from spd_lsp.engine.model import load_model
from spd_lsp.fit.blocks import block_start
from spd_lsp.cursor import Cursor
from spd_lsp.session.session import Session
from spd_lsp.settings import Settings, parse_settings

WORD = re.compile(r"\w")
SEGMENT = re.compile(r"[^\w]*\w*")  # what one accept-word takes (Ctrl+Right, <M-Right>): separators, then a word
MAX_REQUESTS = 40  # per position: a typist who never accepts asks at most this often


def configurations(names: Sequence[str]) -> dict[str, Settings]:
    """`single` (today's default), `auto` (the shipped budget), `auto-<n>` (a budget of n tokens)."""
    base = parse_settings({"ngrams": {"enabled": False}})[0]
    out = {}
    for name in names:
        if name == "single":
            out[name] = replace(base, multiline=False)
        elif name == "auto":
            out[name] = replace(base, multiline="auto")
        elif name.startswith("auto-"):
            out[name] = replace(base, multiline="auto", multiline_max_tokens=int(name.removeprefix("auto-")))
        else:
            raise ValueError(f"unknown configuration {name!r}")
    return out


@dataclass
class Typed:
    keys: int = 0
    keys_typing: int = 0
    requests: int = 0
    multiline_requests: int = 0
    accepted: int = 0
    first_chars: int = 0
    decode_ms: list[float] = field(default_factory=list)
    total_ms: list[float] = field(default_factory=list)
    path: list[int] = field(default_factory=list)  # where each model call was asked (characters written)


def cost(target: str, index: int) -> int:
    """Keystrokes for the character at `index`: none for indentation after a newline (the editor's)."""
    line_head = target[target.rfind("\n", 0, index) + 1 : index + 1]
    return 0 if "\n" in target[:index] and not line_head.strip() and target[index] in " \t" else 1


def _accepts(draft: str, rest: str) -> Iterator[tuple[int, int]]:
    """(keystrokes, characters) of each way to take a start of `draft` that `rest` begins with: all of it
    (Tab), its first line with the line break (accept line), or its next words (one accept-word each)."""
    if draft and rest.startswith(draft):
        yield 1, len(draft)
    line_end = draft.find("\n", 1 if draft.startswith("\n") else 0)
    if line_end >= 0 and rest.startswith(draft[: line_end + 1]):
        yield 1, line_end + 1
    at = presses = 0
    while at < len(draft):
        end = max(SEGMENT.match(draft, at).end(), at + 1)  # type: ignore[union-attr]
        if not rest.startswith(draft[:end]):
            return
        presses, at = presses + 1, end
        yield presses, at


def _best(drafts: Sequence[str], rest: str) -> tuple[int, int, int]:
    """(keystrokes saved, keystrokes spent, characters inserted) of the best accept; saved 0 when none helps.
    A draft below the first costs one Alt+] per rank to reach."""
    best = (0, 0, 0)
    for rank, draft in enumerate(drafts):
        for presses, length in _accepts(draft, rest):
            spent = rank + presses
            saved = sum(cost(rest, i) for i in range(length)) - spent
            if saved > best[0]:
                best = (saved, spent, length)
    return best


class Typist:
    """Writes edits through one session of the given settings."""

    def __init__(self, engine: LocalEngine, settings: Settings) -> None:
        self.settings = settings
        self.session = Session(Quiet(), loader=lambda s: Loaded(engine, {"name": "bundled", "device": "cpu"}, "cpu"),
                               anticipate=False)
        self.session.configure(settings, roots=[]).future.result()

    def close(self) -> None:
        self.session.close()

    def ask(self, key: str, before: str, after: str, typed: Typed) -> list[str]:
        text = before + after
        line = before.count("\n")
        character = len(before) - (before.rfind("\n") + 1)
        block = _starts_block(self.settings, before, after)
        started = time.perf_counter()
        answer = self.session.complete(key, text, line, character, "utf-32").future.result()
        elapsed = 1000 * (time.perf_counter() - started)
        if answer.timings is not None:
            typed.requests += 1
            typed.multiline_requests += block
            typed.decode_ms.append(1000 * (answer.timings.total_s - answer.timings.prefill_s))
            typed.total_ms.append(elapsed)
        return [edit.draft for edit in answer.edits]

    def write(self, edit: Edit, key: str) -> Typed:
        typed = Typed(keys_typing=sum(cost(edit.target, i) for i in range(edit.horizon)))
        typed.path.append(0)
        shown = self.ask(key, edit.before, edit.after, typed)
        typed.first_chars = matched_prefix(shown[0], edit.target) if shown else 0
        done = 0
        while done < edit.horizon:
            rest = edit.target[done:]
            saved, spent, inserted = _best(shown, rest)
            if saved > 0:
                typed.keys += spent
                typed.accepted += inserted
                done += inserted
                shown, pause = [], True  # after an accept the editor asks at once
            else:
                typed.keys += cost(edit.target, done)
                char = edit.target[done]
                done += 1
                shown = [d[1:] for d in shown if d.startswith(char) and d[1:].strip()]  # the editor filters as you type
                word_goes_on = bool(WORD.match(char)) and done < len(edit.target) and bool(WORD.match(edit.target[done]))
                pause = not shown and not word_goes_on  # the debounce waits for the end of a word
            while done < len(edit.target) and cost(edit.target, done) == 0:
                done += 1  # the editor indents the new line
                shown = [d[1:] for d in shown if d.startswith(edit.target[done - 1]) and d[1:].strip()]
            if pause and done < edit.horizon and typed.requests < MAX_REQUESTS:
                typed.path.append(done)
                shown = self.ask(key, edit.before + edit.target[:done], edit.after, typed)
        self.session.close_document(key)
        return typed


class Quiet:
    """The editor side of the session: nothing to show (no workspace folders, no indexing)."""

    def show(self, kind: str, text: str) -> None:
        print(f"[{kind}] {text}", file=sys.stderr)

    def progress(self, title: str) -> Any:
        return self

    def report(self, message: str, percentage: int | None = None) -> None:
        pass

    def end(self, message: str) -> None:
        pass


def run(args: argparse.Namespace) -> None:
    configs = configurations(args.configs)
    engine = LocalEngine(load_model())
    typists = {name: Typist(engine, settings) for name, settings in configs.items()}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    done = _done(args.out)
    samples: dict[tuple[str, str], list[Edit]] = {}
    for package in args.packages:
        corpus = corpus_of(package, args.workdir)
        name, files = corpus.name, corpus.split.held_out(args.split)
        for kind, edits in sample_edits(files, args.per_kind, args.seed, tuple(args.kinds)).items():
            samples[name, kind] = edits
    taken = dict.fromkeys(args.kinds, 0)
    for index in range(args.per_kind):
        for (name, kind), edits in samples.items():
            if index >= len(edits) or taken[kind] >= args.total_per_kind:
                continue
            taken[kind] += 1
            names = list(configs) if index % 2 == 0 else list(configs)[::-1]  # who pays the prefill alternates
            todo = [n for n in names if (name, kind, index, n) not in done]
            if not todo:
                continue
            edit = edits[index]
            written: dict[str, Typed] = {}
            with args.out.open("a") as out:
                for config in todo:
                    typed = _shared(edit, configs[config], written) or typists[config].write(
                        edit, f"file:///study/{name}/{kind}/{index}-{config}.py")
                    written[config] = typed
                    record = {"corpus": name, "kind": kind, "index": index, "config": config,
                              "file": str(edit.path.name), "horizon": edit.horizon, **asdict(typed)}
                    out.write(json.dumps(record) + "\n")
            _say(f"{name} {kind} {index + 1}/{len(edits)}")
    for typist in typists.values():
        typist.close()


def _shared(edit: Edit, settings: Settings, written: dict[str, Typed]) -> Typed | None:
    """Another configuration's run of `edit` where this one would have asked exactly the same: no request on
    its path starts a block (single-line drafts either way); None where it must run itself."""
    for typed in written.values():
        if typed.multiline_requests == 0 and not any(
                _starts_block(settings, edit.before + edit.target[:done], edit.after) for done in typed.path):
            return typed
    return None


def _starts_block(settings: Settings, before: str, after: str) -> bool:
    return settings.multiline == "auto" and block_start(Cursor(before + after, len(before)), "python", "#") is not None


# -- report ---------------------------------------------------------------------------------------

def load(paths: Sequence[Path]) -> dict[str, dict[tuple[str, str, int], dict[str, Any]]]:
    out: dict[str, dict[tuple[str, str, int], dict[str, Any]]] = {}
    for line in (line for path in paths for line in path.read_text().splitlines()):
        record = json.loads(line)
        out.setdefault(record["config"], {})[(record["corpus"], record["kind"], record["index"])] = record
    return out


def saved(r: dict[str, Any]) -> float:
    return 1 - r["keys"] / max(1, r["keys_typing"])


def per_request(r: dict[str, Any]) -> float:
    return r["accepted"] / max(1, r["requests"])


def mean_ms(r: dict[str, Any]) -> float:
    return statistics.mean(r["decode_ms"]) if r["decode_ms"] else 0.0


METRICS: dict[str, tuple[str, Callable[[dict[str, Any]], float]]] = {
    "keystrokes saved": ("difference", saved),
    "chars accepted / request": ("ratio", per_request),
    "first request chars": ("difference", lambda r: float(r["first_chars"])),  # single's is 0 after a header
    "ms / request": ("ratio", mean_ms),
    "requests": ("ratio", lambda r: float(r["requests"])),
}


def summary(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    calls = [ms for r in records for ms in r["decode_ms"]]
    return {
        "positions": len(records),
        "keystrokes saved": statistics.mean(saved(r) for r in records),
        "chars accepted / request": sum(r["accepted"] for r in records) / max(1, sum(r["requests"] for r in records)),
        "first request chars": statistics.mean(r["first_chars"] for r in records),
        "requests": statistics.mean(r["requests"] for r in records),
        "multi-line requests": sum(r["multiline_requests"] for r in records) / max(1, sum(r["requests"] for r in records)),
        "decode ms p50": statistics.median(calls) if calls else float("nan"),
        "decode ms mean": statistics.mean(calls) if calls else float("nan"),
    }


def report_on(paths: Sequence[Path], against: str) -> dict[str, Any]:
    scores = load(paths)
    keys = sorted(set.intersection(*(set(v) for v in scores.values())))
    out: dict[str, Any] = {"positions": len(keys), "by_kind": {}, "paired": {}}
    groups = {"all": keys, **{kind: [k for k in keys if k[1] == kind] for kind in KINDS},
              "blocks": [k for k in keys if k[1] in ("open_block", "empty_body")],
              "lines": [k for k in keys if k[1] in ("line_start", "mid_line")]}
    for group, subset in groups.items():
        if not subset:
            continue
        rows = [{"config": name, **summary([by_key[k] for k in subset])} for name, by_key in scores.items()]
        out["by_kind"][group] = rows
        print(f"### {group} ({len(subset)} positions)\n")
        print(report.simple_table(rows, SUMMARY_COLUMNS) + "\n")
        paired_rows = []
        for name, by_key in scores.items():
            if name == against:
                continue
            row: dict[str, Any] = {"config": name, "against": against}
            for metric, (statistic, value) in METRICS.items():
                interval = paired([value(by_key[k]) for k in subset], [value(scores[against][k]) for k in subset], statistic)
                row[metric] = str(interval)
            paired_rows.append(row)
        out["paired"][group] = paired_rows
        print(report.simple_table(paired_rows, PAIRED_COLUMNS) + "\n")
    return out


SUMMARY_COLUMNS = [("config", "config", "str"), ("positions", "positions", "str"),
                   ("keystrokes saved", "keystrokes saved", "pct"), ("chars / request", "chars accepted / request", "num"),
                   ("1st request chars", "first request chars", "num"), ("requests", "requests", "num"),
                   ("multi-line share", "multi-line requests", "pct"), ("decode ms p50", "decode ms p50", "ms"),
                   ("decode ms mean", "decode ms mean", "ms")]
PAIRED_COLUMNS = [("config", "config", "str"), ("vs", "against", "str"), ("Δ keystrokes saved", "keystrokes saved", "str"),
                  ("chars / request ×", "chars accepted / request", "str"), ("Δ 1st request chars", "first request chars", "str"),
                  ("ms / request ×", "ms / request", "str"), ("requests ×", "requests", "str")]


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m evaluation.multiline", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="write positions; append one JSON line per (position, configuration)")
    r.add_argument("--split", choices=("validation", "test"), required=True)
    r.add_argument("--per-kind", type=int, default=50, help="at most this many positions per corpus and kind")
    r.add_argument("--total-per-kind", type=int, default=10**9, help="at most this many positions per kind in all")
    r.add_argument("--configs", nargs="+", default=["single", "auto"])
    r.add_argument("--kinds", nargs="+", choices=KINDS, default=list(KINDS))
    r.add_argument("--packages", nargs="+", default=list(STUDY_PACKAGES))
    r.add_argument("--workdir", type=Path, default=Path(platformdirs.user_cache_dir("spd-lsp")) / "study")
    r.add_argument("--out", type=Path, required=True)
    r.add_argument("--seed", type=int, default=0)
    s = sub.add_parser("report", help="tables and paired intervals from a run's JSON lines")
    s.add_argument("paths", type=Path, nargs="+")
    s.add_argument("--against", default="single")
    s.add_argument("--json", type=Path, help="also write the figures here")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "run":
        run(args)
    else:
        out = report_on(args.paths, args.against)
        if args.json:
            args.json.write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
