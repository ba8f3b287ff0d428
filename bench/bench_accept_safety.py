"""Is accepting a draft safe? The property test's measurement, as a table for README.

Starts the real `spd-lsp --stdio` (bundled model, k=3, maxTokens 8, a 256-token
prefix, no n-gram store), asks it at positions of three kinds in real sources
(see `evaluation.accept`), applies every returned item's edit and counts
broken files and glued suffixes; then times the server's fitting alone (nesting
scan + tree-sitter checks) per request, without the model.

    .venv/bin/python -m bench.bench_accept_safety [--per-kind 70] [--blocks-per-kind 40] [--seed 0]

First, with `multiline: "auto"`, positions at blocks whose body was removed (`evaluation.accept.block_cases`).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

from lsprotocol import types as lsp
from pygls.lsp.client import LanguageClient

from bench.isolation import isolated_env
from spd_lsp.cursor import Cursor, offset_of
from evaluation.accept import AUTO, SETTINGS, Case, Tally, block_cases, cases, model_ready, package_files, run
from spd_lsp.fit.edits import Fit, finalize


async def served(positions: list[Case], workspace: Path, settings: dict = SETTINGS) -> Tally:
    client = LanguageClient("spd-accept-bench", "1")
    await client.start_io(sys.executable, "-m", "spd_lsp.cli", "--stdio", env=isolated_env(workspace))
    try:
        await client.initialize_async(
            lsp.InitializeParams(
                capabilities=lsp.ClientCapabilities(),
                root_uri=workspace.as_uri(),
                initialization_options=settings,
            )
        )
        client.initialized(lsp.InitializedParams())
        await model_ready(client)
        tally = await run(client, positions, progress=Progress(len(positions)))
        await client.shutdown_async(None)
        client.exit(None)
    finally:
        await client.stop()
    return tally


class Progress:
    """New failures as they come, and the table every 10 positions (a run cut short still tells)."""

    def __init__(self, total: int) -> None:
        self.total, self.shown = total, 0

    def __call__(self, tally: Tally) -> None:
        for failure in tally.failures[self.shown :]:
            print(failure, file=sys.stderr, flush=True)
        self.shown = len(tally.failures)
        done = sum(tally.positions.values())
        if done % 10 == 0 or done == self.total:
            print(f"{done}/{self.total} positions\n{tally.table()}", file=sys.stderr, flush=True)


def fit_ms(positions: list[Case]) -> list[float]:
    """Milliseconds of fitting three drafts per request: the removed text, and it with a closer added and cut."""
    times = []
    for case in positions:
        offset = offset_of(case.text, case.line, case.character, "utf-16")
        assert offset is not None
        cursor = Cursor(case.text, offset)
        rest = cursor.line_suffix or "x = 1"
        drafts = [rest, rest + ")", rest[: len(rest) // 2]]
        started = time.perf_counter()
        finalize(drafts, Fit(cursor, "python"), 3)
        times.append(1000 * (time.perf_counter() - started))
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--per-kind", type=int, default=80)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--blocks-per-kind", type=int, default=40,
                        help='positions at blocks (open block, empty body) with multiline "auto"; 0: none')
    args = parser.parse_args()
    if args.blocks_per_kind:
        blocks = block_cases(package_files(), args.blocks_per_kind, args.seed)
        with tempfile.TemporaryDirectory() as tmp:
            started = time.perf_counter()
            tally = asyncio.run(served(blocks, Path(tmp), AUTO))
            elapsed = time.perf_counter() - started
        print(f'multiline "auto" (multilineMaxTokens {AUTO["multilineMaxTokens"]}):\n{tally.table()}')
        print(f"\n{len(blocks)} positions in {elapsed:.0f} s\n")
        for failure in tally.failures[:20]:
            print(failure)
    positions = cases(package_files(), args.per_kind, args.seed)
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        tally = asyncio.run(served(positions, Path(tmp)))
        elapsed = time.perf_counter() - started
    print(tally.table())
    print(f"\n{len(positions)} positions in {elapsed:.0f} s")
    times = sorted(fit_ms(positions))
    print(
        f"fitting (nesting + tree-sitter, 3 drafts) per request: mean {statistics.mean(times):.2f} ms, "
        f"p50 {times[len(times) // 2]:.2f} ms, p95 {times[int(0.95 * len(times))]:.2f} ms"
    )
    for failure in tally.failures[:20]:
        print(failure)


if __name__ == "__main__":
    main()
