"""Exact sharded n-gram stores: S normal stores, a context's record in shard crc32(key) % S.

A sharded store is a directory (`root`):

    current -> builds/<id>               the published build (a symlink, replaced atomically)
    builds/<id>/manifest.json            shard count, hash, orders, N, tokenizer, totals,
                                         and every source of the build by content hash
    builds/<id>/shard-00000-of-00004/    a normal LMDB store (the same record layout); its
                                         metadata names the shard index, count and tokenizer
    cache/                               the distributed build's resume cache (distributed.py)

The shard of a context is the CRC-32 (zlib's) of its LMDB key - b"X", the order
byte, the big-endian u32 ids - modulo S: stable across processes, machines and
Python versions, cheap in C for a lookup and vectorised in numpy for a build.

A published build is never written again. A new build goes to a new directory and
`current` is renamed over the old link; readers look at the link once per decode
step, open the new build then and close the old one when its last step ends.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import shutil
import threading
import time
import zlib
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np

from ngram_db.counting import OrderCounts, as_tokens, count_ngrams, encode_keys
from ngram_db.errors import StoreCorruptError, StoreError, TokenizerMismatchError
from ngram_db.lookup import CONTEXT, p_ngram_rows
from ngram_db.source import TokenizerId
from ngram_db.store import DEFAULT_ORDERS, DEFAULT_TOP_N, NgramStore

log = logging.getLogger(__name__)

HASH_NAME = "crc32"
MANIFEST, CURRENT, BUILDS = "manifest.json", "current", "builds"
FORMAT = 1


def _crc_table() -> np.ndarray:
    table = np.arange(256, dtype=np.uint32)
    for _ in range(8):
        table = np.where(table & 1, (table >> 1) ^ np.uint32(0xEDB88320), table >> 1).astype(np.uint32)
    return table


_CRC_TABLE = _crc_table()


def shard_of(key: bytes, count: int) -> int:
    """The shard holding the record of one context key."""
    return zlib.crc32(key) % count


def shards_of(order: int, contexts: np.ndarray, count: int) -> np.ndarray:
    """shard_of for many contexts of one order ((m, order-1) ids) at once: a table-driven
    CRC-32, one numpy pass per key byte."""
    keys = encode_keys(CONTEXT, order, contexts)
    raw = keys.view(np.uint8).reshape(len(keys), 2 + 4 * (order - 1))
    crc = np.full(len(keys), 0xFFFFFFFF, dtype=np.uint32)
    for column in raw.T:
        crc = _CRC_TABLE[(crc ^ column) & 0xFF] ^ (crc >> np.uint32(8))
    return ((crc ^ np.uint32(0xFFFFFFFF)) % np.uint32(count)).astype(np.int64)


def split_counts(counts: OrderCounts, count: int) -> list[OrderCounts]:
    """One order's counts cut into the S shards' parts (each still sorted)."""
    shard = shards_of(counts.order, counts.grams[:, :-1], count)
    order = np.argsort(shard, kind="stable")
    bounds = np.searchsorted(shard[order], np.arange(count + 1))
    return [OrderCounts(counts.order, counts.grams[order[a:b]], counts.counts[order[a:b]])
            for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist())]


def shard_path(build: Path, index: int, count: int) -> Path:
    return Path(build) / f"shard-{index:05d}-of-{count:05d}"


def write_shard(build: Path, index: int, count: int, identity: TokenizerId, counts: Sequence[OrderCounts], *,
                orders: Sequence[int], top_n: int) -> dict[str, int]:
    """Write one shard (a fresh normal store) from its summed counts; returns its figures.

    A retried task starts the shard over. The finished shard is made read-only.
    """
    path = shard_path(build, index, count)
    if path.exists():
        shutil.rmtree(path)
    with NgramStore.open(path, identity, orders=orders, top_n=top_n) as store:
        store.add_counts(counts, meta={"shard_index": index, "shard_count": count, "shard_hash": HASH_NAME})
        stats = store.stats()
    data = path / "data.mdb"
    with open(data, "rb") as handle:
        os.fsync(handle.fileno())
    for name in ("lock.mdb", "writer.lock"):  # a snapshot is never written: readers need no lock file
        (path / name).unlink(missing_ok=True)
    data.chmod(0o400)
    path.chmod(0o500)
    return {"shard": index, "contexts": stats.contexts, "ngrams": stats.ngrams, "bytes": data.stat().st_size}


@dataclass(frozen=True)
class Manifest:
    """What a build holds; `sources` maps each path to [content hash, size, tokens]."""

    shard_count: int
    orders: list[int]
    top_n: int
    tokenizer_name: str
    tokenizer_fingerprint: str
    files: int = 0
    tokens: int = 0
    sources: dict[str, list] = field(default_factory=dict)
    shards: list[dict] = field(default_factory=list)
    hash: str = HASH_NAME
    format: int = FORMAT
    created: float = 0.0

    def save(self, build: Path) -> None:
        temporary = Path(build) / f".{MANIFEST}.tmp"
        temporary.write_text(json.dumps(asdict(self), separators=(",", ":")))
        os.replace(temporary, Path(build) / MANIFEST)

    @classmethod
    def load(cls, build: Path) -> "Manifest":
        path = Path(build) / MANIFEST
        try:
            manifest = cls(**json.loads(path.read_text()))
        except FileNotFoundError as error:
            raise StoreError(f"sharded n-gram store build {build} has no {MANIFEST}; build it with "
                             f"`spd-lsp index --base --engine ray`") from error
        except (ValueError, TypeError) as error:
            raise StoreCorruptError(f"{path} is unreadable ({error}); build the store again") from error
        if manifest.format != FORMAT or manifest.hash != HASH_NAME:
            raise StoreCorruptError(f"{path} has format {manifest.format}/{manifest.hash}, this version reads "
                                    f"{FORMAT}/{HASH_NAME}; build the store again")
        return manifest


def is_sharded(root: Path) -> bool:
    return os.path.lexists(Path(root) / CURRENT)


def current_build(root: Path) -> Path | None:
    try:
        return Path(root) / os.readlink(Path(root) / CURRENT)
    except OSError:
        return None


def new_build(root: Path) -> Path:
    """A fresh directory for a build (nothing reads it before `publish`)."""
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    build = Path(root) / BUILDS / f"{stamp}-{secrets.token_hex(4)}"
    build.mkdir(mode=0o700, parents=True)
    os.chmod(root, 0o700)
    return build


def publish(root: Path, build: Path, manifest: Manifest) -> None:
    """Write the manifest, point `current` at `build` in one rename, and delete builds
    older than the previous one (a reader may still be finishing a step on that)."""
    root = Path(root)
    manifest.save(build)
    previous = current_build(root)
    temporary = root / f".{CURRENT}-{secrets.token_hex(4)}"
    os.symlink(os.path.relpath(build, root), temporary)
    os.replace(temporary, root / CURRENT)
    directory = os.open(root, os.O_RDONLY)
    try:
        os.fsync(directory)
    finally:
        os.close(directory)
    keep = {Path(build).name} | ({previous.name} if previous is not None else set())
    for old in (root / BUILDS).iterdir():
        if old.name not in keep:
            remove_build(old)


def remove_build(build: Path) -> None:
    for directory, _, _ in os.walk(build):
        os.chmod(directory, 0o700)
    shutil.rmtree(build, ignore_errors=True)


def build_from_sequences(root: Path, sequences: Sequence[Sequence[int] | np.ndarray], identity: TokenizerId, *,
                         shards: int, orders: Sequence[int] = DEFAULT_ORDERS, top_n: int = DEFAULT_TOP_N,
                         sources: dict[str, list] | None = None) -> Path:
    """Count in this process and publish a sharded build (small corpora, tests)."""
    tokens = [as_tokens(s) for s in sequences]
    counted = count_ngrams(tokens, orders)
    parts = {n: split_counts(counts, shards) for n, counts in counted.items()}
    build = new_build(root)
    figures = [write_shard(build, s, shards, identity, [parts[n][s] for n in orders], orders=orders, top_n=top_n)
               for s in range(shards)]
    publish(root, build, Manifest(shards, list(orders), top_n, identity.name, identity.fingerprint,
                                  files=len(tokens), tokens=sum(map(len, tokens)), sources=sources or {},
                                  shards=figures, created=time.time()))
    return build


@dataclass
class _Snapshot:
    target: str
    manifest: Manifest
    stores: list[NgramStore]
    users: int = 0
    retired: bool = False

    def close(self) -> None:
        for store in self.stores:
            store.close()


class ShardedStore:
    """One NgramSource over the published build of a sharded store.

    Each (draft, order) lookup goes to its shard; a decode step opens at most one
    read transaction per shard. A newly published build is picked up at the next step.
    """

    def __init__(self, root: Path, identity: TokenizerId) -> None:
        self.root = Path(root).expanduser().resolve()
        self.path = self.root
        self._identity = identity
        self._lock = threading.Lock()
        self._refused: str | None = None
        self._closed = False
        target = self._target()
        if target is None:
            raise StoreError(f"no published build in the sharded n-gram store at {self.root}; "
                             f"build one with `spd-lsp index --base --engine ray`")
        self._snapshot = self._open_build(target)

    @classmethod
    def open(cls, root: Path, identity: TokenizerId) -> "ShardedStore":
        return cls(root, identity)

    @property
    def manifest(self) -> Manifest:
        return self._snapshot.manifest

    @property
    def orders(self) -> tuple[int, ...]:
        return tuple(self._snapshot.manifest.orders)

    def _target(self) -> str | None:
        try:
            return os.readlink(self.root / CURRENT)
        except OSError:
            return None

    def _open_build(self, target: str) -> _Snapshot:
        build = self.root / target
        manifest = Manifest.load(build)
        if manifest.tokenizer_fingerprint != self._identity.fingerprint:
            raise TokenizerMismatchError(
                f"sharded n-gram store at {self.root} counts tokens of {manifest.tokenizer_name!r}, not of "
                f"{self._identity.name!r}; rebuild it with `spd-lsp index --base --engine ray`")
        stores: list[NgramStore] = []
        try:
            for index in range(manifest.shard_count):
                store = NgramStore.open(shard_path(build, index, manifest.shard_count), self._identity, readonly=True)
                stores.append(store)
                meta = store.meta()
                if (meta.get("shard_index"), meta.get("shard_count")) != (index, manifest.shard_count) \
                        or list(store.orders) != manifest.orders:
                    raise StoreCorruptError(f"shard {index} of {build} does not belong to its manifest")
        except BaseException:
            for store in stores:
                store.close()
            raise
        return _Snapshot(target, manifest, stores)

    def _acquire(self) -> _Snapshot:
        with self._lock:  # the link is read under the lock: a stale read must never move a reader back
            if self._closed:
                raise StoreError(f"sharded n-gram store at {self.root} is closed")
            target, snapshot = self._target(), self._snapshot
            if target is not None and target not in (snapshot.target, self._refused):
                try:
                    fresh = self._open_build(target)
                except (StoreError, OSError) as error:
                    self._refused = target  # keep answering from the old build; say so once
                    log.warning("new build %s of %s unusable, keeping %s: %s", target, self.root,
                                snapshot.target, error)
                else:
                    self._retire(snapshot)
                    self._snapshot = snapshot = fresh
            snapshot.users += 1
            return snapshot

    def _release(self, snapshot: _Snapshot) -> None:
        with self._lock:
            snapshot.users -= 1
            if snapshot.retired and snapshot.users == 0:
                snapshot.close()

    @staticmethod
    def _retire(snapshot: _Snapshot) -> None:
        snapshot.retired = True
        if snapshot.users == 0:
            snapshot.close()

    def p_ngram(self, contexts: Sequence[Sequence[int]], candidates: Sequence[Sequence[int]],
                weights: dict[int, float]) -> list[list[float]]:
        snapshot = self._acquire()
        try:
            stores, count = snapshot.stores, len(snapshot.stores)
            with ExitStack() as stack:
                txns: list = [None] * count

                def get(key: bytes):  # type: ignore[no-untyped-def]
                    index = zlib.crc32(key) % count
                    txn = txns[index]
                    if txn is None:
                        txn = txns[index] = stack.enter_context(stores[index].read_transaction(buffers=True))
                    return txn.get(key)

                return p_ngram_rows(get, snapshot.manifest.orders, contexts, candidates, weights)
        finally:
            self._release(snapshot)

    def count(self, gram: Sequence[int]) -> int:
        """Exact count of one n-gram, from its shard."""
        snapshot = self._acquire()
        try:
            key = encode_keys(CONTEXT, len(gram), as_tokens(gram[:-1]).reshape(1, -1))[0].tobytes()
            return snapshot.stores[shard_of(key, len(snapshot.stores))].count(gram)
        finally:
            self._release(snapshot)

    def records(self) -> Iterator[tuple[bytes, bytes]]:
        """Every context record of every shard (key order within a shard)."""
        snapshot = self._acquire()
        try:
            for store in snapshot.stores:
                yield from store.records()
        finally:
            self._release(snapshot)

    def close(self) -> None:
        with self._lock:
            if not self._closed:
                self._closed = True
                self._retire(self._snapshot)

    def __enter__(self) -> "ShardedStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_readonly(path: Path, identity: TokenizerId) -> NgramStore | ShardedStore:
    """A read-only store at `path`, sharded or not (the base layer)."""
    return ShardedStore(path, identity) if is_sharded(path) else NgramStore.open(path, identity, readonly=True)
