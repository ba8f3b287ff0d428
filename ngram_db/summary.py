"""Context records: everything the store knows about one context, in one LMDB value.

Little-endian u32 words:

    total, distinct, ntop,
    top_tokens[ntop], top_counts[ntop]          top-N: count descending, then token ascending
    all_tokens[distinct], all_counts[distinct]  only when distinct > ntop: every
                                                continuation, token ascending (bisect)

So one get answers a lookup: the top-N dict for the likely candidates, a binary
search of the exact list for the rest. Thousands of records are built or parsed
at once with numpy when indexing.
"""

from __future__ import annotations

import sys
from array import array
from bisect import bisect_left
from dataclasses import dataclass

import numpy as np

_LITTLE = sys.byteorder == "little"
HEADER = 3


@dataclass(frozen=True)
class Summary:
    total: int
    distinct: int
    top: dict[int, int]  # token -> count, in top-N order

    @property
    def complete(self) -> bool:
        """True when `top` lists every continuation, so a miss means count 0."""
        return self.distinct == len(self.top)


def words_of(value: bytes | memoryview) -> memoryview | array:
    """The record as indexable u32s, without copying where the platform allows."""
    if _LITTLE:
        return memoryview(value).cast("B").cast("I")
    words = array("I")
    words.frombytes(bytes(value))
    words.byteswap()
    return words


def parse(words: memoryview | array) -> tuple[int, int, dict[int, int]]:
    """(total, distinct, top): the lookup hot path."""
    ntop = words[2]
    return words[0], words[1], dict(zip(words[HEADER : HEADER + ntop], words[HEADER + ntop : HEADER + 2 * ntop]))


def count_in(words: memoryview | array, token: int) -> int:
    """Exact count of `token` after this context, from the full list (0 when absent)."""
    distinct, ntop = words[1], words[2]
    if distinct == ntop:
        return dict(zip(words[HEADER : HEADER + ntop], words[HEADER + ntop : HEADER + 2 * ntop])).get(token, 0)
    first = HEADER + 2 * ntop
    i = bisect_left(words, token, first, first + distinct)
    return words[i + distinct] if i < first + distinct and words[i] == token else 0


def decode(value: bytes) -> Summary:
    return Summary(*parse(words_of(value)))


def decode_many(count: int, positions: np.ndarray, values: list[bytes]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every continuation of `count` contexts, of which those at `positions` have records.

    Returns flat (ctx index, token, count) arrays.
    """
    lengths = np.fromiter(map(len, values), dtype=np.int64, count=len(values)) // 4
    words = np.frombuffer(b"".join(values), dtype="<u4").astype(np.int64)
    offsets = np.cumsum(lengths) - lengths
    distinct, ntop = words[offsets + 1], words[offsets + 2]
    tokens_at = offsets + HEADER + np.where(distinct == ntop, 0, 2 * ntop)
    counts_at = tokens_at + distinct
    within = np.arange(int(distinct.sum())) - np.repeat(np.cumsum(distinct) - distinct, distinct)
    return (np.repeat(positions, distinct), words[np.repeat(tokens_at, distinct) + within],
            words[np.repeat(counts_at, distinct) + within])


def encode_many(count: int, ctx: np.ndarray, tok: np.ndarray, cnt: np.ndarray,
                top_n: int) -> tuple[list[bytes], np.ndarray]:
    """Records of `count` contexts from their continuations, sorted by (ctx, token), counts > 0.

    Returns (records, distinct per context); a context without continuations gets
    a record with distinct 0, which the caller deletes.
    """
    distinct = np.bincount(ctx, minlength=count).astype(np.int64)
    totals = np.bincount(ctx, weights=cnt, minlength=count).astype(np.int64)  # exact below 2**53
    ntop = np.minimum(distinct, top_n)
    full = distinct > ntop
    sizes = HEADER + 2 * ntop + np.where(full, 2 * distinct, 0)
    ends = np.cumsum(sizes)
    starts = ends - sizes
    words = np.zeros(int(ends[-1]) if count else 0, dtype="<u4")
    words[starts], words[starts + 1], words[starts + 2] = totals, distinct, ntop

    within = np.arange(len(ctx)) - np.repeat(np.cumsum(distinct) - distinct, distinct)
    listed = full[ctx]
    at = starts[ctx] + HEADER + 2 * ntop[ctx] + within
    words[at[listed]], words[(at + distinct[ctx])[listed]] = tok[listed], cnt[listed]

    order = np.argsort((ctx << 32) | (0xFFFFFFFF - cnt), kind="stable")  # ties keep token order
    rank = np.empty(len(ctx), np.int64)
    rank[order] = within  # `within` is also the rank counter of each context's run in `order`
    top = rank < top_n
    at = starts[ctx] + HEADER + rank
    words[at[top]], words[(at + ntop[ctx])[top]] = tok[top], cnt[top]

    return _split(words, starts, sizes), distinct


def _split(words: np.ndarray, starts: np.ndarray, sizes: np.ndarray) -> list[bytes]:
    """Cut the concatenated records apart: records of one common size at once (a 2-D
    view), the rare long ones one by one."""
    out = np.empty(len(sizes), dtype=object)
    common = sizes <= HEADER + 2 * 32
    for size in np.unique(sizes[common]).tolist():
        chosen = np.flatnonzero(sizes == size)
        block = words[starts[chosen][:, None] + np.arange(size)]
        out[chosen] = block.view(f"V{4 * size}").ravel().tolist()
    raw = words.tobytes()
    long = np.flatnonzero(~common)
    out[long] = [raw[4 * a : 4 * (a + n)] for a, n in zip(starts[long].tolist(), sizes[long].tolist())]
    return out.tolist()
