"""Several n-gram sources as one: a workspace store over a read-only base store."""

from __future__ import annotations

from typing import Sequence

from ngram_db.source import NgramSource

# The workspace speaks the user's dialect; the base (e.g. the standard library)
# only fills gaps. docs/ngram-store.md (base store and layering) has the measurement behind this.
DEFAULT_BASE_WEIGHT = 0.3


class LayeredNgrams:
    """p = sum_i w_i * p_i over (source, w_i) layers; weights are used as given."""

    def __init__(self, layers: Sequence[tuple[NgramSource, float]]) -> None:
        self.layers = [(source, weight) for source, weight in layers if weight > 0.0]

    def p_ngram(self, contexts: Sequence[Sequence[int]], candidates: Sequence[Sequence[int]],
                weights: dict[int, float]) -> list[list[float]]:
        total = [[0.0] * len(row) for row in candidates]
        for source, weight in self.layers:
            for out, row in zip(total, source.p_ngram(contexts, candidates, weights)):
                for i, p in enumerate(row):
                    out[i] += weight * p
        return total

