"""The LMDB n-gram store: exact counts of a set of files, kept live under edits.

Tables are key prefixes in LMDB's main database (named databases would need the
writer lock just to be opened, and readers must never wait for a writer):
  X  order byte + n-1 big-endian u32 ids -> the context's record: total, distinct,
     top-N, and (when there are more than N) every continuation with its exact
     count (see summary.py). One get answers a lookup; one record per context
     instead of one entry per n-gram halves the B-tree the indexer must update.
  F  path -> msgpack [path, content hash, size, mtime, token count]
  T  path -> the file's token ids (u32), so its contribution can be subtracted exactly
  M  schema version, orders, N, tokenizer identity, totals
Counts never cross file boundaries. Every write is one transaction.
"""

from __future__ import annotations

import hashlib
import itertools
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Literal, Sequence

import lmdb
import msgpack
import numpy as np

from ngram_db import envs, summary
from ngram_db.counting import OrderCounts, as_tokens, count_ngrams, decode_key, encode_keys, run_starts
from ngram_db.lookup import CONTEXT, p_ngram_rows
from ngram_db.errors import StoreCorruptError, StoreError, StoreReadOnlyError, TokenizerMismatchError
from ngram_db.source import TokenizerId

SCHEMA_VERSION = 2
DEFAULT_ORDERS = (2, 3, 4, 5, 6)
DEFAULT_TOP_N = 16
_MAX_PATH_KEY = 480  # LMDB keys stop at 511 bytes
FILE, TOKENS, META = b"F", b"T", b"M"


@dataclass(frozen=True)
class FileRecord:
    path: str
    content_hash: str
    size: int
    mtime: float
    tokens: np.ndarray  # uint32


@dataclass(frozen=True)
class FileInfo:
    """A file record without its tokens (cheap to list)."""

    path: str
    content_hash: str
    size: int
    mtime: float
    token_count: int


@dataclass(frozen=True)
class FileChange:
    """One file's new state for `NgramStore.apply`; tokens=None removes the file."""

    path: str
    tokens: Sequence[int] | np.ndarray | None
    content_hash: str = ""
    size: int = 0
    mtime: float = 0.0


@dataclass(frozen=True)
class StoreStats:
    files: int
    tokens: int
    contexts: int
    bytes: int
    ngrams: int = 0  # distinct n-grams over all orders


def _path_key(path: str) -> bytes:
    raw = path.encode("utf-8", "surrogateescape")
    return raw if len(raw) <= _MAX_PATH_KEY else b"\0" + hashlib.sha256(raw).digest()


def _scan(txn: lmdb.Transaction, prefix: bytes) -> Iterator[tuple[bytes, bytes]]:
    """Every (key, value) whose key starts with `prefix`, in key order."""
    cursor = txn.cursor()
    if cursor.set_range(prefix):
        for key, value in cursor:
            if not key.startswith(prefix):
                break
            yield key, value


def _get_many(txn: lmdb.Transaction, keys: np.ndarray, key_list: list[bytes]) -> tuple[np.ndarray, list[bytes]]:
    """Positions in the sorted `keys` of those present, and their values (one C loop)."""
    with txn.cursor() as cursor:
        found = cursor.getmulti(key_list)
    present = np.frombuffer(b"".join([key for key, _ in found]), dtype=keys.dtype)
    return np.searchsorted(keys, present), [value for _, value in found]


def _put_or_delete(txn: lmdb.Transaction, keys: list[bytes], values: list[bytes], alive: np.ndarray) -> None:
    live = alive.tolist()
    with txn.cursor() as cursor:
        cursor.putmulti(list(zip(itertools.compress(keys, live), itertools.compress(values, live))))
    if not alive.all():
        for key in itertools.compress(keys, (~alive).tolist()):
            txn.delete(key)


def _records_of(counted: OrderCounts, top_n: int) -> tuple[list[bytes], list[bytes]]:
    """Keys and records of the contexts of one order's sorted, positive counts."""
    n = counted.order
    contexts = counted.grams[:, : n - 1]
    is_start = run_starts(contexts)
    records, _ = summary.encode_many(int(is_start.sum()), np.cumsum(is_start) - 1,
                                     counted.grams[:, n - 1].astype(np.int64), counted.counts, top_n)
    return encode_keys(CONTEXT, n, contexts[is_start]).tolist(), records


def _clear(env: lmdb.Environment, txn: lmdb.Transaction) -> None:
    """Empty the main database (every table) inside the caller's write transaction."""
    txn.drop(env.open_db(None, txn=txn), delete=False)


def _meta(txn: lmdb.Transaction) -> dict:
    return {k[1:].decode(): msgpack.unpackb(v) for k, v in _scan(txn, META)}


def _add_meta(txn: lmdb.Transaction, **deltas: int) -> None:
    for name, delta in deltas.items():
        if delta:
            key = META + name.encode()
            txn.put(key, msgpack.packb(msgpack.unpackb(txn.get(key)) + delta))


class NgramStore:
    """Counts of n-grams (orders 2..6 by default) over the files added to it."""

    def __init__(self, shared: envs.SharedEnv, tokenizer_id: TokenizerId, orders: tuple[int, ...],
                 top_n: int, readonly: bool, lock_timeout: float) -> None:
        self._shared = shared
        self.path = shared.path
        self.tokenizer_id = tokenizer_id
        self.orders = orders
        self.top_n = top_n
        self.readonly = readonly or not shared.writable
        self.lock_timeout = lock_timeout
        self._closed = False

    @classmethod
    def open(cls, path: str | Path, tokenizer_id: TokenizerId, *, orders: Sequence[int] = DEFAULT_ORDERS,
             top_n: int = DEFAULT_TOP_N, readonly: bool = False, lock_timeout: float = 30.0,
             rebuild: Literal["no", "foreign", "always"] = "no") -> "NgramStore":
        """Open the store at `path`, creating it unless `readonly`.

        An existing store keeps the orders and N it was built with. `rebuild` empties
        it first (one write transaction: never a deleted directory under an open
        environment, readers elsewhere keep their snapshot): "always", or "foreign"
        when it counts another tokenizer's ids or has another schema.
        """
        shared = envs.acquire(Path(path), create=not readonly)
        try:
            meta = cls._read_meta(shared)
            if meta is not None and (rebuild == "always" or (rebuild == "foreign" and cls._foreign(meta, tokenizer_id))):
                meta = None
                envs.write(shared, lambda txn: _clear(shared.env, txn), lock_timeout=lock_timeout)
            if meta is None:
                if readonly or not shared.writable:
                    raise StoreError(f"n-gram store at {shared.path} was never initialised; run `spd-lsp index`")
                meta = envs.write(shared, lambda txn: cls._init_meta(txn, tokenizer_id, orders, top_n),
                                  lock_timeout=lock_timeout)
            cls._check_meta(shared.path, meta, tokenizer_id)
            return cls(shared, tokenizer_id, tuple(meta["orders"]), meta["top_n"], readonly, lock_timeout)
        except BaseException:
            envs.release(shared)
            raise

    @staticmethod
    def _read_meta(shared: envs.SharedEnv) -> dict | None:
        with envs.read(shared) as txn:
            return _meta(txn) or None

    @staticmethod
    def _init_meta(txn: lmdb.Transaction, tokenizer_id: TokenizerId, orders: Sequence[int], top_n: int) -> dict:
        existing = _meta(txn)
        if existing:  # another process initialised it first
            return existing
        if sorted(set(orders)) != list(orders) or min(orders) < 2 or max(orders) > 255 or top_n < 1:
            raise ValueError("orders must be ascending, distinct and >= 2; top_n >= 1")
        meta = {"schema": SCHEMA_VERSION, "orders": list(orders), "top_n": top_n, "tokens": 0, "files": 0,
                "contexts": 0, "ngrams": 0, "tokenizer_name": tokenizer_id.name,
                "tokenizer_fingerprint": tokenizer_id.fingerprint}
        for key, value in meta.items():
            txn.put(META + key.encode(), msgpack.packb(value))
        return meta

    @staticmethod
    def _foreign(meta: dict, tokenizer_id: TokenizerId) -> bool:
        return meta.get("schema") != SCHEMA_VERSION or meta.get("tokenizer_fingerprint") != tokenizer_id.fingerprint

    @staticmethod
    def _check_meta(path: Path, meta: dict, tokenizer_id: TokenizerId) -> None:
        if meta.get("schema") != SCHEMA_VERSION or "orders" not in meta or "tokenizer_fingerprint" not in meta:
            raise StoreCorruptError(
                f"n-gram store at {path} has schema {meta.get('schema')!r}, this version reads "
                f"{SCHEMA_VERSION}; delete that directory and run `spd-lsp index` again")
        if meta["tokenizer_fingerprint"] != tokenizer_id.fingerprint:
            raise TokenizerMismatchError(
                f"n-gram store at {path} counts tokens of {meta['tokenizer_name']!r} "
                f"(vocabulary {meta['tokenizer_fingerprint'][:12]}), not of {tokenizer_id.name!r} "
                f"(vocabulary {tokenizer_id.fingerprint[:12]}); rebuild it with `spd-lsp index`")

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            envs.release(self._shared)

    def __enter__(self) -> "NgramStore":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- writes ---------------------------------------------------------------------

    def add_file(self, path: str, tokens: Sequence[int], *, content_hash: str, size: int, mtime: float) -> None:
        """Add a file, or replace its previous contribution if it is already in the store."""
        self.apply([FileChange(path, tokens, content_hash, size, mtime)])

    update_file = add_file

    def remove_file(self, path: str) -> None:
        self.apply([FileChange(path, None)])

    def rename_file(self, old: str, new: str) -> bool:
        """Move a record (replacing any record at `new`); False when `old` is not stored."""
        def body(txn: lmdb.Transaction) -> bool:
            record = self._record(txn, old)
            if record is None:
                return False
            self._apply_in(txn, [FileChange(old, None),
                                 FileChange(new, record.tokens, record.content_hash, record.size, record.mtime)])
            return True
        return self._write(body)

    def apply(self, changes: Sequence[FileChange]) -> None:
        """Apply many file changes in ONE transaction (the indexer's batches)."""
        if changes:
            self._write(lambda txn: self._apply_in(txn, changes))

    def _write(self, body):  # type: ignore[no-untyped-def]
        if self.readonly:
            raise StoreReadOnlyError(f"n-gram store at {self.path} is open read-only")
        return envs.write(self._shared, body, lock_timeout=self.lock_timeout)

    def _apply_in(self, txn: lmdb.Transaction, changes: Sequence[FileChange]) -> None:
        final = {change.path: change for change in changes}  # the last change of a path wins
        sequences, weights, token_delta, file_delta = [], [], 0, 0
        for change in final.values():
            old = self._record(txn, change.path)
            if old is not None:
                sequences.append(old.tokens)
                weights.append(-1)
                token_delta -= len(old.tokens)
                file_delta -= 1
            key = _path_key(change.path)
            if change.tokens is None:
                txn.delete(FILE + key)
                txn.delete(TOKENS + key)
                continue
            file_delta += 1
            tokens = as_tokens(change.tokens)
            sequences.append(tokens)
            weights.append(1)
            token_delta += len(tokens)
            info = [change.path, change.content_hash, change.size, change.mtime, len(tokens)]
            txn.put(FILE + key, msgpack.packb(info))
            txn.put(TOKENS + key, tokens.astype("<u4").tobytes())
        context_delta = ngram_delta = 0
        if sequences:
            for delta in count_ngrams(sequences, self.orders, weights).values():
                if len(delta):
                    contexts, ngrams = self._apply_order(txn, delta)
                    context_delta, ngram_delta = context_delta + contexts, ngram_delta + ngrams
        _add_meta(txn, tokens=token_delta, files=file_delta, contexts=context_delta, ngrams=ngram_delta)

    def _apply_order(self, txn: lmdb.Transaction, delta: OrderCounts) -> tuple[int, int]:
        """Merge one order's count deltas into the records of the contexts they touch.

        Returns the change in the number of contexts and of distinct n-grams.
        """
        n = delta.order
        contexts = delta.grams[:, : n - 1]
        is_start = run_starts(contexts)
        group = np.cumsum(is_start) - 1
        keys = encode_keys(CONTEXT, n, contexts[is_start])
        key_list = keys.tolist()
        positions, found = _get_many(txn, keys, key_list)
        old_ctx, old_tok, old_cnt = summary.decode_many(len(keys), positions, found)
        merged = np.r_[(old_ctx << 32) | old_tok, (group << 32) | delta.grams[:, n - 1].astype(np.int64)]
        order = np.argsort(merged, kind="stable")
        merged = merged[order]
        starts = np.flatnonzero(run_starts(merged))
        counts = np.add.reduceat(np.r_[old_cnt, delta.counts][order], starts)
        if (counts < 0).any():
            raise StoreCorruptError(f"n-gram store at {self.path} has counts below its file records; rebuild it")
        alive = counts > 0
        merged, counts = merged[starts][alive], counts[alive]
        records, distinct = summary.encode_many(len(keys), merged >> 32, merged & 0xFFFFFFFF, counts, self.top_n)
        _put_or_delete(txn, key_list, records, distinct > 0)
        return int(np.count_nonzero(distinct) - len(positions)), len(counts) - len(old_tok)

    # ---- reads ----------------------------------------------------------------------

    def p_ngram(self, contexts: Sequence[Sequence[int]], candidates: Sequence[Sequence[int]],
                weights: dict[int, float]) -> list[list[float]]:
        """NgramSource: all rows in one read transaction (see lookup.p_ngram_rows)."""
        with envs.read(self._shared, buffers=True) as txn:
            return p_ngram_rows(txn.get, self.orders, contexts, candidates, weights)

    def read_transaction(self, *, buffers: bool = False):  # type: ignore[no-untyped-def]
        """A read transaction on the store (a context manager); with `buffers`, values are
        zero-copy views valid inside it."""
        return envs.read(self._shared, buffers=buffers)

    def records(self) -> Iterator[tuple[bytes, bytes]]:
        """Every context record as stored (key, value), in key order."""
        with envs.read(self._shared) as txn:
            yield from _scan(txn, CONTEXT)

    def add_counts(self, counts: Sequence[OrderCounts], *, meta: dict[str, object]) -> None:
        """Merge counts that have no file records (a shard of a distributed build) and
        record `meta` (e.g. the shard's index), in one transaction."""
        def body(txn: lmdb.Transaction) -> None:
            # Into a store without context records, sorted orders are appended in key order:
            # no lookups of existing records, and full B-tree pages.
            fresh = not any(True for _ in _scan(txn, CONTEXT))
            contexts = ngrams = 0
            for delta in sorted(counts, key=lambda c: c.order):
                if not len(delta):
                    continue
                if fresh:
                    if (delta.counts <= 0).any():
                        raise ValueError("counts added to an empty store must be positive")
                    keys, records = _records_of(delta, self.top_n)
                    with txn.cursor() as cursor:
                        cursor.putmulti(list(zip(keys, records)), append=True)
                    more_contexts, more_ngrams = len(keys), len(delta)
                else:
                    more_contexts, more_ngrams = self._apply_order(txn, delta)
                contexts, ngrams = contexts + more_contexts, ngrams + more_ngrams
            _add_meta(txn, contexts=contexts, ngrams=ngrams)
            for name, value in meta.items():
                txn.put(META + name.encode(), msgpack.packb(value))
        self._write(body)

    def meta(self) -> dict:
        """The store's metadata (schema, orders, tokenizer, totals; a shard's index and count)."""
        with envs.read(self._shared) as txn:
            return _meta(txn)

    def count(self, gram: Sequence[int]) -> int:
        """Exact count of one n-gram (its length is its order)."""
        key = encode_keys(CONTEXT, len(gram), as_tokens(gram[:-1]).reshape(1, -1))[0].tobytes()
        with envs.read(self._shared) as txn:
            value = txn.get(key)
        return 0 if value is None else summary.count_in(summary.words_of(value), int(gram[-1]))

    def summary(self, context: Sequence[int]) -> summary.Summary | None:
        """The summary of a context (its order is len(context) + 1), None if unseen."""
        key = encode_keys(CONTEXT, len(context) + 1, as_tokens(context).reshape(1, -1))[0].tobytes()
        with envs.read(self._shared) as txn:
            value = txn.get(key)
        return None if value is None else summary.decode(value)

    def iter_counts(self) -> Iterator[tuple[tuple[int, ...], int]]:
        """Every stored n-gram and its count (for checks and exports)."""
        with envs.read(self._shared) as txn:
            for key, value in _scan(txn, CONTEXT):
                context = decode_key(key)[1]
                ctx, tokens, counts = summary.decode_many(1, np.zeros(1, np.int64), [value])
                for token, count in zip(tokens.tolist(), counts.tolist()):
                    yield context + (token,), count

    def iter_summaries(self) -> Iterator[tuple[tuple[int, ...], summary.Summary]]:
        with envs.read(self._shared) as txn:
            for key, value in _scan(txn, CONTEXT):
                yield decode_key(key)[1], summary.decode(value)

    def file_record(self, path: str) -> FileRecord | None:
        with envs.read(self._shared) as txn:
            return self._record(txn, path)

    def _record(self, txn: lmdb.Transaction, path: str) -> FileRecord | None:
        key = _path_key(path)
        info = txn.get(FILE + key)
        if info is None:
            return None
        stored_path, content_hash, size, mtime, _ = msgpack.unpackb(info)
        tokens = np.frombuffer(txn.get(TOKENS + key) or b"", dtype="<u4").astype(np.uint32)
        return FileRecord(stored_path, content_hash, size, mtime, tokens)

    def file_info(self, path: str) -> FileInfo | None:
        """A file's record without its tokens."""
        with envs.read(self._shared) as txn:
            value = txn.get(FILE + _path_key(path))
        return None if value is None else FileInfo(*msgpack.unpackb(value))

    def files(self) -> dict[str, FileInfo]:
        """Every stored file's record, without tokens."""
        with envs.read(self._shared) as txn:
            return {info.path: info for info in
                    (FileInfo(*msgpack.unpackb(v)) for _, v in _scan(txn, FILE))}

    def stats(self) -> StoreStats:
        with envs.read(self._shared) as txn:
            meta = _meta(txn)
        info, stat = self._shared.env.info(), self._shared.env.stat()
        return StoreStats(meta["files"], meta["tokens"], meta["contexts"], (info["last_pgno"] + 1) * stat["psize"],
                          meta["ngrams"])

    def verify(self) -> list[str]:
        """Recount every order from the file records; describe each disagreement (empty: consistent)."""
        with envs.read(self._shared) as txn:
            sequences = [np.frombuffer(v, dtype="<u4").astype(np.uint32) for _, v in _scan(txn, TOKENS)]
            stored = dict(_scan(txn, CONTEXT))
            meta = _meta(txn)
        expected: dict[bytes, bytes] = {}
        ngrams = 0
        for counted in count_ngrams(sequences, self.orders).values():
            ngrams += len(counted)
            expected.update(zip(*_records_of(counted, self.top_n)))
        problems = [f"context {decode_key(k)}: stored {summary.decode(stored[k]) if k in stored else None}, "
                    f"expected {summary.decode(v)}" for k, v in expected.items() if stored.get(k) != v]
        problems += [f"context {decode_key(k)}: stored but not in any file" for k in stored.keys() - expected.keys()]
        totals = {"files": len(sequences), "tokens": sum(map(len, sequences)), "contexts": len(expected),
                  "ngrams": ngrams}
        problems += [f"meta {name}: stored {meta[name]}, expected {value}"
                     for name, value in totals.items() if meta[name] != value]
        return problems
