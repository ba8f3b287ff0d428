"""An in-memory NgramSource: the plain-dict definition of p_ngram, for tests and tiny corpora."""

from __future__ import annotations

from collections import Counter
from typing import Sequence

from ngram_db.store import DEFAULT_ORDERS


class MemoryNgrams:
    """Counts held in Counters; exact, but not meant for large corpora."""

    def __init__(self, grams: Counter[tuple[int, ...]], orders: Sequence[int]) -> None:
        self.orders = tuple(orders)
        self._grams = grams
        self._totals: Counter[tuple[int, ...]] = Counter()
        for gram, count in grams.items():
            self._totals[gram[:-1]] += count

    @classmethod
    def from_sequences(cls, sequences: Sequence[Sequence[int]],
                       orders: Sequence[int] = DEFAULT_ORDERS) -> "MemoryNgrams":
        grams: Counter[tuple[int, ...]] = Counter()
        for tokens in sequences:
            tokens = list(tokens)
            for n in orders:
                grams.update(tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1))
        return cls(grams, orders)

    def count(self, gram: Sequence[int]) -> int:
        return self._grams[tuple(gram)]

    def p_ngram(self, contexts: Sequence[Sequence[int]], candidates: Sequence[Sequence[int]],
                weights: dict[int, float]) -> list[list[float]]:
        rows = []
        for context, cands in zip(contexts, candidates):
            context = list(context)
            row = [0.0] * len(cands)
            for n in self.orders:
                if n - 1 > len(context) or weights.get(n, 0.0) <= 0.0:
                    continue
                ctx = tuple(context[len(context) - n + 1 :])
                total = self._totals[ctx]
                if total:
                    for i, token in enumerate(cands):
                        row[i] += weights[n] * self._grams[ctx + (token,)] / total
            rows.append(row)
        return rows
