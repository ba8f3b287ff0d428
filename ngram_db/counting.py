"""N-gram extraction and deltas as numpy arrays.

Indexing millions of tokens must cost C loops, not Python ones: every order is
counted from ONE sort of the longest windows (shorter n-grams are prefixes of
those, so each order's groups are contiguous in that order), and keys come out
already in LMDB key order (big-endian token ids sort like the tuples they encode).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

# Pads the end of every sequence so windows never cross a file boundary; it sorts
# after every real id, so padded windows end up behind real ones.
SENTINEL = np.uint32(0xFFFFFFFF)


@dataclass
class OrderCounts:
    """Distinct n-grams of one order, lexicographically sorted, with their counts (or deltas)."""

    order: int
    grams: np.ndarray  # (m, order) uint32
    counts: np.ndarray  # (m,) int64

    def __len__(self) -> int:
        return len(self.counts)


def run_starts(rows: np.ndarray) -> np.ndarray:
    """Mask of the rows (or items) of a sorted array that differ from the one before."""
    if len(rows) == 0:
        return np.zeros(0, dtype=bool)
    changed = rows[1:] != rows[:-1]
    return np.r_[True, changed.any(axis=1) if changed.ndim == 2 else changed]


def as_tokens(tokens: Sequence[int] | np.ndarray) -> np.ndarray:
    """Token ids as uint32; ids must stay below the sentinel."""
    array = np.asarray(tokens, dtype=np.int64).ravel()
    if len(array) and (array.min() < 0 or array.max() >= int(SENTINEL)):
        raise ValueError("token ids must be in [0, 2**32 - 1)")
    return array.astype(np.uint32)


def count_ngrams(
    sequences: Sequence[np.ndarray],
    orders: Sequence[int],
    weights: Sequence[int] | None = None,
) -> dict[int, OrderCounts]:
    """Weighted n-gram counts of every order over separate sequences.

    With weights (+1 for the new text of a file, -1 for its old text) the result
    is the exact delta; n-grams whose delta is zero are dropped.
    """
    longest = max(orders)
    weights = [1] * len(sequences) if weights is None else list(weights)
    pad = np.full(longest - 1, SENTINEL, dtype=np.uint32)
    parts: list[np.ndarray] = []
    window_weights: list[np.ndarray] = []
    for tokens, weight in zip(sequences, weights):
        if len(tokens) == 0 or weight == 0:
            continue
        parts += [tokens, pad]
        window_weights.append(np.full(len(tokens), weight, dtype=np.int64))
    if not parts:
        return {n: OrderCounts(n, np.zeros((0, n), np.uint32), np.zeros(0, np.int64)) for n in orders}
    flat = np.concatenate(parts)
    windows = sliding_window_view(flat, longest)
    windows = windows[windows[:, 0] != SENTINEL]  # one window per real token, in order
    weight = np.concatenate(window_weights)
    keys = _gram_keys(windows)
    if weights and all(w == 1 for w in weights):
        unique_keys, counts = np.unique(keys, return_counts=True)
        counts = counts.astype(np.int64)
    else:
        unique_keys, counts = _sum_by_key(keys, weight)
    grams = np.frombuffer(unique_keys.tobytes(), dtype=">u4").reshape(-1, longest).astype(np.uint32)
    return {n: _prefix_counts(grams, counts, n) for n in orders}


def _gram_keys(grams: np.ndarray) -> np.ndarray:
    """Rows of token ids as fixed-width keys that sort like the rows (big-endian)."""
    return np.ascontiguousarray(grams.astype(">u4")).view(f"V{4 * grams.shape[1]}").ravel()


def _sum_by_key(keys: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct keys in sorted order and the sum of the weights of each."""
    order = np.argsort(keys, kind="stable")
    sorted_keys = keys[order]
    starts = np.flatnonzero(run_starts(sorted_keys))
    return sorted_keys[starts], np.add.reduceat(weights[order], starts)


def merge_counts(order: int, grams: np.ndarray, counts: np.ndarray) -> OrderCounts:
    """Partial counts of one order (rows may repeat, in any order) summed into one
    sorted OrderCounts: the reduce side of a distributed count."""
    if len(grams) == 0:
        return OrderCounts(order, np.zeros((0, order), np.uint32), np.zeros(0, np.int64))
    unique_keys, summed = _sum_by_key(_gram_keys(grams), np.asarray(counts, dtype=np.int64))
    merged = np.frombuffer(unique_keys.tobytes(), dtype=">u4").reshape(-1, order).astype(np.uint32)
    keep = summed != 0
    return OrderCounts(order, merged[keep], summed[keep])


def _prefix_counts(grams: np.ndarray, counts: np.ndarray, order: int) -> OrderCounts:
    """Sum the sorted longest-order counts over their first `order` tokens."""
    if len(grams) == 0:
        return OrderCounts(order, np.zeros((0, order), np.uint32), np.zeros(0, np.int64))
    prefix = grams[:, :order]
    starts = np.flatnonzero(run_starts(prefix))
    summed = np.add.reduceat(counts, starts)
    keys = prefix[starts]
    keep = (keys[:, -1] != SENTINEL) & (summed != 0)
    return OrderCounts(order, np.ascontiguousarray(keys[keep]), summed[keep])


def encode_keys(table: bytes, order: int, grams: np.ndarray) -> np.ndarray:
    """LMDB keys as a fixed-width void array: a table byte, the order, then
    big-endian u32 ids (so prefix scans work and sorted grams give sorted keys)."""
    rows = len(grams)
    width = grams.shape[1] if grams.ndim == 2 else 0
    raw = np.empty((rows, 2 + 4 * width), dtype=np.uint8)
    raw[:, 0] = table[0]
    raw[:, 1] = order
    if width:
        raw[:, 2:] = np.ascontiguousarray(grams.astype(">u4")).view(np.uint8).reshape(rows, 4 * width)
    return raw.view(f"V{2 + 4 * width}").ravel()


def decode_key(key: bytes) -> tuple[int, tuple[int, ...]]:
    """Inverse of encode_keys for one key: (order, token ids)."""
    return key[1], tuple(np.frombuffer(key, dtype=">u4", offset=2).tolist())
