"""Does the idle warm-up take the snippets' prefill off the next request? Bundled model, in process.

A session with workspace snippets on (`context.snippets`, sources ["workspace"]) over a
folder; requests at places spread through one of its files, each place new (its snippets
differ, so its prompt shares nothing cached). Alternate places are first warmed as the
server does while the user is idle (`Session.warm_up` at the cursor, with the context);
prints each request's prefill tokens and times, then the medians per mode.

    nice -n 10 .venv/bin/python -m bench.bench_context_warm [--root spd_lsp] [--file session.py] [--places 8]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import Any

from spd_lsp.commands.engine_setting import load_engine
from spd_lsp.settings import parse_settings
from spd_lsp.session.session import Session


class Quiet:
    def show(self, kind: str, text: str) -> None:
        print(f"[{kind}] {text}")

    def progress(self, title: str) -> Any:
        raise AssertionError("n-grams are off")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--root", type=Path, default=Path("spd_lsp"))
    p.add_argument("--file", default="session.py")
    p.add_argument("--places", type=int, default=8)
    args = p.parse_args()
    root = args.root.resolve()
    session = Session(Quiet(), load_engine, anticipate=False)
    settings = parse_settings({"ngrams": {"enabled": False}, "context": {"snippets": True, "sources": ["workspace"]}})[0]
    session.configure(settings, roots=[root]).future.result(600)
    while session.context.workspace.index is None:
        time.sleep(0.1)
    doc = root / args.file
    text = doc.read_text()
    lines = text.splitlines()
    step = max(1, (len(lines) - 60) // args.places)
    places = [i for i in range(60, len(lines), step) if lines[i].strip()][: args.places]
    rows: dict[str, list[tuple[int, float, float]]] = {"cold": [], "warmed": []}
    for n, line in enumerate(places):
        mode = "warmed" if n % 2 else "cold"
        character = len(lines[line]) - len(lines[line].lstrip())
        warm_s = None
        if mode == "warmed":
            started = time.perf_counter()
            session.warm_up(doc.as_uri(), text, line=line, character=character).future.result(600)
            warm_s = time.perf_counter() - started
        t = session.complete(doc.as_uri(), text, line, character, "utf-16").future.result(600).timings
        snippets = session.status()["last"]["prompt"]["snippets"]
        rows[mode].append((t.prefill_tokens, 1000 * t.prefill_s, 1000 * t.total_s))
        print(f"{mode:6} line {line:4}: prefill {t.prefill_tokens:4} tokens (reused {t.reused_tokens:4}) "
              f"{1000 * t.prefill_s:6.0f} ms, request {1000 * t.total_s:6.0f} ms, snippets "
              f"{sum(s['tokens'] for s in snippets):3} tokens" + (f", warm-up {warm_s:.2f} s idle" if warm_s else ""))
    for mode, values in rows.items():
        print(f"{mode}: median prefill {statistics.median(v[0] for v in values)} tokens, "
              f"{statistics.median(v[1] for v in values):.0f} ms; request {statistics.median(v[2] for v in values):.0f} ms")
    session.close()


if __name__ == "__main__":
    main()
