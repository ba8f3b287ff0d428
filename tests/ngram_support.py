"""Shared helpers of the ngram_db tests: a byte-level tokenizer and a brute-force recount."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Iterable, Sequence

import pytest

from ngram_db import TokenizerId
from ngram_db.store import NgramStore

BYTES = TokenizerId("utf-8 bytes", "bytes-v1")
ORDERS = (2, 3, 4, 5, 6)


def encode(text: str) -> list[int]:
    """A tokenizer any test can run instantly: one id per UTF-8 byte."""
    return list(text.encode("utf-8"))


def recount(sequences: Iterable[Sequence[int]], orders: Sequence[int] = ORDERS, top_n: int = 16):
    """The store's contents computed the obvious way: (counts, summaries).

    summaries: context -> (total, distinct, [(token, count), ...] top-N by count desc, token asc).
    """
    counts: Counter[tuple[int, ...]] = Counter()
    for tokens in sequences:
        tokens = list(tokens)
        for n in orders:
            counts.update(tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1))
    followers: dict[tuple[int, ...], list[tuple[int, int]]] = {}
    for gram, count in counts.items():
        followers.setdefault(gram[:-1], []).append((gram[-1], count))
    summaries = {
        ctx: (sum(c for _, c in pairs), len(pairs), sorted(pairs, key=lambda p: (-p[1], p[0]))[:top_n])
        for ctx, pairs in followers.items()
    }
    return dict(counts), summaries


def assert_store_equals(store, sequences: Iterable[Sequence[int]]) -> None:
    """Every count and every summary in the store equals the recount of `sequences`."""
    counts, summaries = recount(sequences, store.orders, store.top_n)
    assert dict(store.iter_counts()) == counts
    stored = {ctx: (s.total, s.distinct, list(s.top.items())) for ctx, s in store.iter_summaries()}
    assert stored == summaries


def noisy_text(seed: int, length: int) -> str:
    """Printable text whose bytes barely repeat: thousands of new contexts per file."""
    return "".join(chr(33 + (seed * 7919 + j * j) % 90) for j in range(length))


def workspace_tokens(store, root: Path) -> dict[str, list[int]]:
    """The byte tokens of every file the store records, read from disk now."""
    return {p: encode(Path(p).read_text(encoding="utf-8")) for p in store.files()}


@pytest.fixture
def store(tmp_path):
    """An empty byte-token store (a fixture: import it into a test module)."""
    with NgramStore.open(tmp_path / "store", BYTES) as opened:
        yield opened


def stored_names(store, root: Path) -> set[str]:
    """The store's files, relative to `root`."""
    return {str(Path(p).relative_to(root)) for p in store.files()}
