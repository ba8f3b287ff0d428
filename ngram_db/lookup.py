"""One decode step's p_ngram from context records, whatever holds them.

`get(key)` returns a context record (see summary.py) or None: the one LMDB read
transaction of a store, or one transaction per shard of a sharded store.
"""

from __future__ import annotations

import struct
from typing import Callable, Sequence

from ngram_db import summary

CONTEXT = b"X"  # the key prefix of context records (store.py's table)

Get = Callable[[bytes], "bytes | memoryview | None"]


def p_ngram_rows(get: Get, orders: Sequence[int], contexts: Sequence[Sequence[int]],
                 candidates: Sequence[Sequence[int]], weights: dict[int, float]) -> list[list[float]]:
    """Rows of p_ngram: one read per (draft, order) at most.

    Higher orders stop at the first unseen context, and a candidate unseen at
    order n is not looked up at higher orders (its longer n-grams cannot exist).
    """
    longest = orders[-1] - 1
    per_order = [(weights.get(n, 0.0), CONTEXT + bytes((n,)), 4 * (n - 1)) for n in orders]
    words_of, parse, count_in = summary.words_of, summary.parse, summary.count_in
    rows: list[list[float]] = []
    seen_records: dict[bytes, tuple | None] = {}  # drafts of one step often share their last tokens
    for context, cands in zip(contexts, candidates):
        row = [0.0] * len(cands)
        rows.append(row)
        tail = list(context[-longest:])
        packed = struct.pack(f">{len(tail)}I", *tail)
        live = range(len(cands))
        for lam, prefix, width in per_order:
            if width > len(packed) or not live:
                break
            if lam <= 0.0:
                continue
            key = prefix + packed[len(packed) - width:]
            if key not in seen_records:
                raw = get(key)
                words = None if raw is None else words_of(raw)
                seen_records[key] = None if words is None else (words, *parse(words))
            record = seen_records[key]
            if record is None:
                break
            words, total, distinct, top = record
            scale, complete, seen = lam / total, distinct == len(top), []
            for i in live:
                count = top.get(cands[i])
                if count is None:
                    if complete:
                        continue
                    count = count_in(words, cands[i])
                    if not count:
                        continue
                row[i] += scale * count
                seen.append(i)
            live = seen
    return rows
