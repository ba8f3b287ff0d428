"""N-gram store figures: indexing throughput, disk use, lookup latency, save latency, base weight.

    .venv/bin/python bench/bench_ngram.py [--work DIR] [--reuse]
    .venv/bin/python bench/bench_ngram.py --engine ray [--shards 4] [--workers 1 2]

Builds a store from the Python standard library plus numpy's sources (>= 10M
tokens of the real SmolLM2 tokenizer), then times what the decoder and the
editor do with it. Prints Markdown tables.

With --engine ray: the distributed build (ngram_db/distributed.py) of the standard
library's top-level modules with 1 and 2 workers against the single-process indexer
(tokens/s, shuffle bytes per token, bytes per n-gram per shard, records that differ),
then lookup latency over the S shards against the unsharded store, interleaved.
"""

from __future__ import annotations

import argparse
import math
import random
import shutil
import statistics
import sysconfig
import tempfile
import time
from pathlib import Path

import numpy as np

from ngram_db.indexer import IndexOptions, Indexer
from ngram_db.layered import LayeredNgrams
from ngram_db.store import NgramStore

SPD_WEIGHTS = {2: 0.01, 3: 0.04, 4: 0.15, 5: 0.18, 6: 0.12}
CANDIDATES = 9


def site_packages() -> Path:
    return Path(sysconfig.get_paths()["purelib"])


def corpus_roots() -> list[Path]:
    return [Path(sysconfig.get_paths()["stdlib"]), site_packages() / "numpy"]


def build(store_path: Path, roots: list[Path], tokenizer, identity, exclude: list[str]) -> tuple[NgramStore, float]:
    def encode_batch(texts: list[str]) -> list[list[int]]:
        return tokenizer(texts, add_special_tokens=False)["input_ids"]

    store = NgramStore.open(store_path, identity)
    indexer = Indexer(store, lambda text: encode_batch([text])[0], roots, IndexOptions(exclude=exclude),
                      encode_batch=encode_batch)
    report = indexer.index(progress=True)
    return store, report.tokens / report.seconds


def sample_steps(sequences: list[list[int]], k: int, steps: int, rng: random.Random) -> list[tuple[list, list]]:
    """Decode-step queries: k contexts (draft prefixes) with 9 candidates each, true next token first."""
    flat = [t for s in sequences for t in s]
    queries = []
    for _ in range(steps):
        contexts, candidates = [], []
        for _ in range(k):
            seq = rng.choice(sequences)
            i = rng.randrange(8, len(seq))
            contexts.append(seq[i - 8 : i])
            candidates.append([seq[i]] + [rng.choice(flat) for _ in range(CANDIDATES - 1)])
        queries.append((contexts, candidates))
    return queries


def time_lookups(source, queries) -> tuple[float, float, float, float]:
    """(p50, p99) of wall time, then of this thread's CPU time, in µs: on a shared
    machine the wall-clock tail is mostly time spent descheduled."""
    wall, cpu = time_lookups_raw(source, queries)
    return tuple(sorted(d)[int(len(d) * q)] * 1e6 for d in (wall, cpu) for q in (0.5, 0.99))  # type: ignore[return-value]


def save_latency(store: NgramStore, tokenizer, work: Path) -> list[float]:
    """Edit one line of a 1,000-line file and update the store, as a save does."""
    root = work / "save"
    root.mkdir(exist_ok=True)
    source = (Path(sysconfig.get_paths()["stdlib"]) / "argparse.py").read_text().splitlines()
    lines = (source * 3)[:1000]
    path = root / "big.py"
    path.write_text("\n".join(lines))
    indexer = Indexer(store, lambda text: tokenizer(text, add_special_tokens=False)["input_ids"], [root])
    indexer.update_path(path)
    timings = []
    for i in range(20):
        lines[500] = f"    value_{i} = compute({i})"
        path.write_text("\n".join(lines))
        start = time.perf_counter()
        indexer.update_path(path)
        timings.append(time.perf_counter() - start)
    return timings


def base_weight_table(base: NgramStore, tokenizer, identity, work: Path) -> list[tuple[float, float, float]]:
    """Mean log p_ngram of the true next token on held-out files of a 'workspace' package
    (hypothesis: not in the base), for several base weights."""
    files = sorted((site_packages() / "hypothesis").rglob("*.py"))
    rng = random.Random(0)
    rng.shuffle(files)
    held_out, workspace_files = files[: len(files) // 10], files[len(files) // 10 :]
    ws_root = work / "ws"
    if ws_root.exists():
        shutil.rmtree(ws_root)
    for f in workspace_files:
        target = ws_root / f.relative_to(site_packages())
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(f, target)
    workspace, _ = build(work / "ws-store", [ws_root], tokenizer, identity, [])
    sequences = [s for s in tokenizer([f.read_text() for f in held_out], add_special_tokens=False)["input_ids"]
                 if len(s) > 8]
    positions = [(s, i) for s in sequences for i in range(5, len(s))]
    positions = rng.sample(positions, min(20000, len(positions)))
    contexts = [s[i - 5 : i] for s, i in positions]
    truth = [[s[i]] for s, i in positions]
    p_ws = np.array([r[0] for r in workspace.p_ngram(contexts, truth, SPD_WEIGHTS)])
    p_base = np.array([r[0] for r in base.p_ngram(contexts, truth, SPD_WEIGHTS)])
    workspace.close()
    rows = []
    for w in (0.0, 0.1, 0.2, 0.3, 0.5, 0.7, 1.0):
        mixed = (1 - w) * p_ws + w * p_base
        rows.append((w, float(np.mean(np.log(np.maximum(mixed, 1e-6)))), float(np.mean(mixed > 0))))
    return rows


def ray_main(args: argparse.Namespace) -> None:
    import functools
    import os

    import ray

    from ngram_db.distributed import build_with_ray
    from ngram_db.shards import ShardedStore
    from spd_lsp.commands.index import _encoder_for
    from spd_lsp.engine.model import load_tokenizer
    from spd_lsp.tokens import tokenizer_identity

    tokenizer = load_tokenizer(None)
    identity = tokenizer_identity(tokenizer)
    if args.corpus == "small":
        roots, exclude = [Path(sysconfig.get_paths()["stdlib"])], ["*/"]  # the top-level modules only
    else:  # the standard library without its tests and GUI, and numpy's sources
        roots = corpus_roots()
        exclude = ["site-packages/", "test/", "tests/", "idlelib/", "tkinter/", "turtledemo/", "lib2to3/"]
    work = args.work / "ray"
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    print(f"load average before: {os.getloadavg()}")
    single, single_rate = build(work / "single", roots, tokenizer, identity, exclude)
    single_records = list(single.records())
    print(f"single-process indexer: {single.stats().tokens:,} tokens, {single_rate:,.0f} tokens/s")

    print("\n| engine | workers | build s (excl. cluster start) | cluster start s | tokens/s | tokens/s per worker "
          "| vs single-process per worker | read+tokenize s | count s | shuffle+write s | shuffle bytes / token "
          "| differing records |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path(__file__).resolve().parents[1]),
                                                             os.environ.get("PYTHONPATH")]))
    sharded_root = None
    for workers in args.workers:
        started = time.perf_counter()
        ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False)
        ray.data.DataContext.get_current().enable_progress_bars = False
        startup = time.perf_counter() - started
        for state in ("cold", "warm"):  # cold: each worker loads the tokenizer in its first task
            root = work / f"sharded-{workers}-{state}"  # a fresh root: nothing cached, everything tokenized
            report = build_with_ray(root, roots, functools.partial(_encoder_for, None), identity,
                                    shards=args.shards, workers=workers, options=IndexOptions(exclude=exclude))
            with ShardedStore(root, identity) as sharded:
                differing = len(set(sharded.records()) ^ set(single_records))
            rate = report.tokens / report.seconds
            stages = " | ".join(f"{report.stage_seconds[k]:.1f}" for k in ("read", "count", "shuffle+write"))
            print(f"| ray, {state} workers | {workers} | {report.seconds:.1f} | {startup:.1f} | {rate:,.0f} "
                  f"| {rate / workers:,.0f} | {rate / workers / single_rate:.0%} | {stages} "
                  f"| {report.shuffle_bytes / report.tokens:.0f} | {differing} |", flush=True)
            sharded_root = root
        ray.shutdown()
    print(f"load average after the builds: {os.getloadavg()}")

    with ShardedStore(sharded_root, identity) as sharded:
        print("\n| shard | contexts | distinct n-grams | data.mdb | bytes / n-gram |")
        print("|---|---|---|---|---|")
        for figure in sharded.manifest.shards:
            print(f"| {figure['shard']} | {figure['contexts']:,} | {figure['ngrams']:,} | {figure['bytes'] / 1e6:.1f} MB "
                  f"| {figure['bytes'] / max(figure['ngrams'], 1):.0f} |")
        disk = (work / "single" / "data.mdb").stat().st_size
        print(f"| unsharded | {single.stats().contexts:,} | {single.stats().ngrams:,} | {disk / 1e6:.1f} MB "
              f"| {disk / single.stats().ngrams:.0f} |")

        rng = random.Random(1)
        sample = [single.file_record(p).tokens.tolist() for p in sorted(single.files())]
        sample = [s for s in sample if len(s) > 16]
        print(f"\n| drafts k | store | p50 | p99 | p50 CPU | p99 CPU |  (S = {args.shards}, interleaved)")
        print("|---|---|---|---|---|---|")
        for k in (3, 8):
            queries = sample_steps(sample, k, 3000, rng)
            for source in (single, sharded):
                time_lookups(source, queries[:300])  # warm the page cache
            halves = {"unsharded": [], "sharded": []}
            for part in range(10):  # interleaved: both see the same load
                chunk = queries[part * 300 : (part + 1) * 300]
                for name, source in (("unsharded", single), ("sharded", sharded)):
                    halves[name].append(time_lookups_raw(source, chunk))
            for name in ("unsharded", "sharded"):
                wall = sorted(t for part in halves[name] for t in part[0])
                cpu = sorted(t for part in halves[name] for t in part[1])
                figures = " | ".join(f"{d[int(len(d) * q)] * 1e6:.0f} µs" for d in (wall, cpu) for q in (0.5, 0.99))
                print(f"| {k} | {name} | {figures} |")
    single.close()
    print(f"load average at the end: {os.getloadavg()}")


def time_lookups_raw(source, queries) -> tuple[list[float], list[float]]:
    """Seconds of wall and of this thread's CPU time per decode step."""
    wall, cpu = [], []
    for contexts, candidates in queries:
        start, start_cpu = time.perf_counter(), time.thread_time()
        source.p_ngram(contexts, candidates, SPD_WEIGHTS)
        wall.append(time.perf_counter() - start)
        cpu.append(time.thread_time() - start_cpu)
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "spd-bench-ngram")
    parser.add_argument("--reuse", action="store_true", help="reuse the big store of a previous run")
    parser.add_argument("--engine", choices=["local", "ray"], default="local")
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--corpus", choices=["small", "medium"], default="small",
                        help="with --engine ray: the standard library's top-level modules (1.2M tokens), or "
                             "the standard library without tests and GUI plus numpy")
    args = parser.parse_args()
    if args.engine == "ray":
        ray_main(args)
        return
    from spd_lsp.engine.model import load_tokenizer
    from spd_lsp.tokens import tokenizer_identity

    tokenizer = load_tokenizer(None)
    identity = tokenizer_identity(tokenizer)
    args.work.mkdir(parents=True, exist_ok=True)
    store_path = args.work / "store"
    if not args.reuse and store_path.exists():
        shutil.rmtree(store_path)
    rate = math.nan
    if args.reuse and store_path.exists():
        store = NgramStore.open(store_path, identity)
    else:
        store, rate = build(store_path, corpus_roots(), tokenizer, identity, ["site-packages/"])
    stats = store.stats()
    grams = stats.ngrams
    disk = (store_path / "data.mdb").stat().st_size
    print("\n| corpus tokens | files | distinct n-grams (2..6) | contexts | store on disk | bytes / n-gram | bytes / token | indexing (tokenizer included) |")
    print("|---|---|---|---|---|---|---|---|")
    print(f"| {stats.tokens:,} | {stats.files:,} | {grams:,} | {stats.contexts:,} | {disk / 1e6:,.0f} MB "
          f"| {disk / grams:.1f} | {disk / stats.tokens:.0f} | {rate:,.0f} tokens/s |")

    rng = random.Random(1)
    sample = [store.file_record(p).tokens.tolist() for p in rng.sample(sorted(store.files()), 300)]
    sample = [s for s in sample if len(s) > 16]
    print("\n| drafts k | candidates per draft | p50 | p99 | p50 CPU | p99 CPU |")
    print("|---|---|---|---|---|---|")
    layered = LayeredNgrams([(store, 0.7), (store, 0.3)])
    for label, source, k in (("3", store, 3), ("8", store, 8), ("3, two layers", layered, 3)):
        queries = sample_steps(sample, k, 3000, rng)
        time_lookups(source, queries[:300])  # warm the page cache
        figures = " | ".join(f"{t:.0f} µs" for t in time_lookups(source, queries))
        print(f"| {label} | {CANDIDATES} | {figures} |")

    timings = save_latency(store, tokenizer, args.work)
    print(f"\nsave of a 1,000-line file -> store updated: p50 {statistics.median(timings) * 1e3:.1f} ms, "
          f"max {max(timings) * 1e3:.1f} ms (read + hash + tokenize + delta + commit; the watcher adds its "
          f"0.2 s debounce)")

    print("\n| base weight | mean log p_ngram(true next token) | tokens with n-gram support |")
    print("|---|---|---|")
    for w, loglik, covered in base_weight_table(store, tokenizer, identity, args.work):
        print(f"| {w:.1f} | {loglik:.3f} | {covered:.1%} |")
    store.close()


if __name__ == "__main__":
    main()
