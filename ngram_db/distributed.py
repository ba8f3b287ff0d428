"""The distributed base build: Ray Data counts n-grams of many sources into exact shards.

    read     sources are read, hashed and tokenized in parallel; token ids go to a
             content-addressed cache (<root>/cache/tokens/<hash>.u32), so a rerun, or a
             build interrupted midway, never tokenizes an unchanged source again
    count    batches of sources are counted per order with counting.count_ngrams and cut
             by the shard of each context (shards.split_counts: the CRC-32 the readers use);
             a batch yields one row per shard holding its sorted partial counts as arrays
    shuffle  rows are grouped by shard (Ray Data's groupby: the shuffle), then summed
             exactly (counting.merge_counts) and written as one normal store per shard
    publish  the manifest (every source by content hash) is written and `current` swapped

A rerun whose sources all have the manifest's content hashes publishes nothing. Ray is
imported only here, and only when a build runs (the `ray` extra). The tokenizer comes
as a picklable factory of a batch encoder, called on the workers (cache it there).
Every task is retried by Ray when its worker dies; each is idempotent (atomic cache
files, a shard directory is rewritten from scratch).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import msgpack
import numpy as np

from ngram_db.counting import count_ngrams, merge_counts
from ngram_db.indexer import EncodeBatch, IndexOptions, SourceWalker, read_source
from ngram_db.source import TokenizerId
from ngram_db.shards import Manifest, current_build, new_build, publish, split_counts, write_shard
from ngram_db.store import DEFAULT_ORDERS, DEFAULT_TOP_N

FAULT_ENV = "SPD_NGRAM_FAULT_ONCE"  # a marker path: the first read task that finds it missing dies
TASKS_PER_WORKER = 4  # enough tasks that 2 workers stay busy however sizes fall


@dataclass(frozen=True)
class BuildReport:
    build: Path | None  # None: the sources are unchanged, nothing was published
    files: int
    tokenized: int  # sources tokenized by this run (the others came from the cache)
    tokens: int
    shuffle_bytes: int  # partial-count rows handed to the shuffle
    shard_bytes: int
    ngrams: int
    seconds: float
    stage_seconds: dict[str, float]


def cache_dir(root: Path, identity: TokenizerId) -> Path:
    """Token ids by content hash, per tokenizer (another vocabulary never reads them)."""
    return Path(root) / "cache" / "tokens" / identity.fingerprint[:24]


def _chunks(sizes: Sequence[int], target: int, minimum: int) -> list[slice]:
    """Consecutive runs of items of about `target` total size, and at least `minimum` runs."""
    target = max(1, min(target, sum(sizes) // max(minimum, 1)))
    runs, start, total = [], 0, 0
    for i, size in enumerate(sizes):
        total += size
        if total >= target:
            runs.append(slice(start, i + 1))
            start, total = i + 1, 0
    if start < len(sizes):
        runs.append(slice(start, len(sizes)))
    return runs


def _read_sources(batch: dict, *, cache: str, max_file_bytes: int, make_encoder: Callable[[], EncodeBatch],
                  fault_once: str | None, secret_filter: bool = True) -> dict:
    """Read, hash and (unless cached) tokenize one batch of sources (secret lines emptied, `read_source`)."""
    loaded = [item for item in (read_source(Path(p), max_file_bytes, secret_filter=secret_filter)
                                for p in batch["paths"][0]) if item is not None]
    missing = list({item.content_hash: item for item in loaded
                    if not os.path.exists(os.path.join(cache, f"{item.content_hash}.u32"))}.values())
    tokenized = {id(item) for item in missing}  # a content met twice is tokenized once
    if missing:
        for item, ids in zip(missing, make_encoder()([item.text for item in missing])):
            target = os.path.join(cache, f"{item.content_hash}.u32")
            temporary = f"{target}.{os.getpid()}.tmp"
            np.asarray(ids, dtype="<u4").tofile(temporary)
            os.replace(temporary, target)  # a killed task never leaves half a file
    if fault_once and not os.path.exists(fault_once):
        Path(fault_once).touch()
        os._exit(1)  # fault injection: the worker process dies mid-task; Ray retries the task
    return {"path": np.array([i.path for i in loaded], dtype=object),
            "hash": np.array([i.content_hash for i in loaded], dtype=object),
            "size": np.array([i.size for i in loaded], dtype=np.int64),
            "tokens": np.array([os.path.getsize(os.path.join(cache, f"{i.content_hash}.u32")) // 4 for i in loaded],
                               dtype=np.int64),
            "tokenized": np.array([id(i) in tokenized for i in loaded], dtype=bool),
            "secret_lines": np.array([",".join(map(str, i.secret_lines)) for i in loaded], dtype=object)}


def _count_sources(batch: dict, *, cache: str, orders: Sequence[int], shards: int) -> dict:
    """Partial counts of one batch of sources, cut by shard: one row per shard whose `part`
    holds, per order, the sorted distinct n-grams and their counts (u32 arrays)."""
    sequences = [np.fromfile(os.path.join(cache, f"{h}.u32"), dtype="<u4").astype(np.uint32)
                 for h in batch["hashes"][0]]
    parts: list[dict[int, list[bytes]]] = [{} for _ in range(shards)]
    for n, counted in count_ngrams(sequences, orders).items():
        for index, piece in enumerate(split_counts(counted, shards)):
            if len(piece):  # a batch holds < 2**32 tokens: its counts fit u32
                parts[index][n] = [piece.grams.astype("<u4").tobytes(), piece.counts.astype("<u4").tobytes()]
    chosen = [index for index in range(shards) if parts[index]]
    return {"shard": np.array(chosen, dtype=np.int32),
            "part": np.array([msgpack.packb(parts[index]) for index in chosen], dtype=object)}


def _merge_and_write(rows: dict, *, build: str, identity: TokenizerId, orders: Sequence[int], top_n: int,
                     shards: int) -> dict:
    """Sum one shard's partial counts exactly and write the shard."""
    index = int(rows["shard"][0])
    pieces: dict[int, list[tuple[bytes, bytes]]] = {n: [] for n in orders}
    for part in rows["part"]:
        for n, (grams, counts) in msgpack.unpackb(part, strict_map_key=False).items():
            pieces[n].append((grams, counts))
    counts = [merge_counts(n, np.frombuffer(b"".join(g for g, _ in pieces[n]), dtype="<u4").reshape(-1, n),
                           np.frombuffer(b"".join(c for _, c in pieces[n]), dtype="<u4").astype(np.int64))
              for n in orders]
    figures = write_shard(Path(build), index, shards, identity, counts, orders=orders, top_n=top_n)
    return {name: np.array([value]) for name, value in figures.items()}


def build_with_ray(root: Path, sources: Sequence[Path], make_encoder: Callable[[], EncodeBatch],
                   identity: TokenizerId, *, shards: int, workers: int, options: IndexOptions | None = None,
                   orders: Sequence[int] = DEFAULT_ORDERS, top_n: int = DEFAULT_TOP_N,
                   say: Callable[[str], None] = lambda line: None, progress_bars: bool = False,
                   tokens_per_batch: int = 2_000_000, rebuild: bool = False) -> BuildReport:
    """Build (or, when the sources changed or `rebuild`, rebuild) the sharded store at `root` on Ray.

    Uses the Ray cluster this process is connected to, or starts a local one with
    `workers` CPUs (and stops it afterwards).
    """
    import ray
    from ray.data import DataContext

    if shards < 1 or workers < 1:
        raise ValueError("--shards and --workers must be at least 1")
    options = options or IndexOptions()
    root = Path(root).expanduser().resolve()
    started = time.perf_counter()
    stage_seconds: dict[str, float] = {}
    cache = cache_dir(root, identity)
    cache.mkdir(mode=0o700, parents=True, exist_ok=True)
    walker = SourceWalker(sources, options, skip=[root])
    paths = [p for p in walker.candidates() if walker.admitted(p)]
    sizes = [p.stat().st_size for p in paths]
    say(f"{len(paths):,} candidate files, {sum(sizes) / 1e6:,.1f} MB")

    own_cluster = not ray.is_initialized()
    if own_cluster:
        ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False)
    context = DataContext.get_current()
    context.enable_progress_bars = progress_bars
    # Tasks, not actors: Ray Data retries a task whose worker died (max_retries -1 by default).
    remote = {"num_cpus": 1, "compute": ray.data.TaskPoolStrategy(size=workers)}
    try:
        clock = time.perf_counter()
        runs = _chunks(sizes, options.batch_bytes, workers * TASKS_PER_WORKER)
        files = []
        if runs:
            read = ray.data.from_items([{"paths": [str(p) for p in paths[run]]} for run in runs],
                                       override_num_blocks=len(runs))
            read = read.map_batches(_read_sources, batch_size=1, batch_format="numpy", fn_kwargs={
                "cache": str(cache), "max_file_bytes": options.max_file_bytes, "make_encoder": make_encoder,
                "fault_once": os.environ.get(FAULT_ENV), "secret_filter": options.secret_filter}, **remote)
            files = sorted(read.take_all(), key=lambda row: row["path"])
        tokens = sum(int(row["tokens"]) for row in files)
        tokenized = sum(bool(row["tokenized"]) for row in files)
        stage_seconds["read"] = time.perf_counter() - clock
        secret_files = [(row["path"], str(row["secret_lines"])) for row in files if row["secret_lines"]]
        if secret_files:
            say(f"left out {sum(len(lines.split(',')) for _, lines in secret_files)} line(s) that carry a secret: "
                + "; ".join(f"{path}: lines {lines}" for path, lines in secret_files[:20]))
        say(f"read: {len(files):,} files, {tokenized:,} tokenized, {len(files) - tokenized:,} from the cache, "
            f"{tokens:,} tokens in {stage_seconds['read']:.1f}s")

        manifest = Manifest(shards, list(orders), top_n, identity.name, identity.fingerprint, files=len(files),
                            tokens=tokens, sources={row["path"]: [row["hash"], int(row["size"]), int(row["tokens"])]
                                                    for row in files})
        if not rebuild and _unchanged(root, manifest):
            say(f"{root}: every source is unchanged since the published build; nothing to do")
            return BuildReport(None, len(files), tokenized, tokens, 0, 0, 0, time.perf_counter() - started,
                               stage_seconds)

        clock = time.perf_counter()
        build = new_build(root)
        hashes = [row["hash"] for row in files]  # duplicates count as often as they occur
        runs = _chunks([int(row["tokens"]) for row in files], tokens_per_batch, workers * TASKS_PER_WORKER)
        written, shuffle_bytes = [], 0
        if runs:
            counted = ray.data.from_items([{"hashes": hashes[run]} for run in runs], override_num_blocks=len(runs))
            counted = counted.map_batches(_count_sources, batch_size=1, batch_format="numpy", fn_kwargs={
                "cache": str(cache), "orders": list(orders), "shards": shards}, **remote).materialize()
            shuffle_bytes = counted.size_bytes()
            stage_seconds["count"] = time.perf_counter() - clock
            say(f"count: {shuffle_bytes / 1e6:,.1f} MB to shuffle ({shuffle_bytes / max(tokens, 1):.1f} bytes "
                f"per token) in {stage_seconds['count']:.1f}s")
            clock = time.perf_counter()
            grouped = counted.groupby("shard", num_partitions=min(shards, 200))
            written = grouped.map_groups(_merge_and_write, batch_format="numpy", fn_kwargs={
                "build": str(build), "identity": identity, "orders": list(orders), "top_n": top_n,
                "shards": shards}, **remote).take_all()
        figures = {int(row["shard"]): {name: int(value) for name, value in row.items()} for row in written}
        for index in set(range(shards)) - figures.keys():  # a shard no context hashed to
            figures[index] = write_shard(build, index, shards, identity, [], orders=orders, top_n=top_n)
        stage_seconds["shuffle+write"] = time.perf_counter() - clock
        shard_list = [figures[i] for i in range(shards)]
        say(f"shuffle+write: {shards} shards, {sum(f['ngrams'] for f in shard_list):,} n-grams, "
            f"{sum(f['bytes'] for f in shard_list) / 1e6:,.1f} MB in {stage_seconds['shuffle+write']:.1f}s")
    finally:
        if own_cluster:
            ray.shutdown()

    manifest = Manifest(**{**manifest.__dict__, "shards": shard_list, "created": time.time()})
    publish(root, build, manifest)
    _drop_unused_cache(cache, manifest)
    seconds = time.perf_counter() - started
    say(f"published {build} ({tokens / seconds:,.0f} tokens/s overall)")
    return BuildReport(build, len(files), tokenized, tokens, shuffle_bytes,
                       sum(f["bytes"] for f in shard_list), sum(f["ngrams"] for f in shard_list), seconds,
                       stage_seconds)


def _unchanged(root: Path, manifest: Manifest) -> bool:
    """The published build has these exact sources (by content hash) and settings."""
    build = current_build(root)
    if build is None:
        return False
    try:
        published = Manifest.load(build)
    except Exception:  # noqa: BLE001 - an unreadable manifest is simply rebuilt
        return False
    keys = ("shard_count", "orders", "top_n", "tokenizer_fingerprint", "sources")
    return all(getattr(published, key) == getattr(manifest, key) for key in keys)


def _drop_unused_cache(cache: Path, manifest: Manifest) -> None:
    wanted = {f"{source[0]}.u32" for source in manifest.sources.values()}
    for entry in os.scandir(cache):
        if entry.name not in wanted:
            os.unlink(entry.path)
