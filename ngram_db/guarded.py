"""An NgramSource that never fails a completion: a store error reads as "unseen".

The decoder asks for p_ngram at every step; a store that breaks mid-request (a
closed environment, a disk error, a store rebuilt underneath) must cost that
request its n-gram term, never its answer. With every candidate unseen the
language model alone ranks them.
"""

from __future__ import annotations

import logging
import threading
from typing import Sequence

import lmdb

from ngram_db.errors import StoreError
from ngram_db.source import NgramSource

log = logging.getLogger(__name__)


class GuardedNgrams:
    """Wraps a source; failed lookups answer zeros and are counted (logged once)."""

    def __init__(self, source: NgramSource) -> None:
        self.source = source
        self.failures = 0
        self._lock = threading.Lock()

    def p_ngram(self, contexts: Sequence[Sequence[int]], candidates: Sequence[Sequence[int]],
                weights: dict[int, float]) -> list[list[float]]:
        try:
            return self.source.p_ngram(contexts, candidates, weights)
        except (StoreError, lmdb.Error, OSError) as error:
            with self._lock:
                self.failures += 1
                first = self.failures == 1
            if first:
                log.warning("n-gram lookup failed (%s); completing without n-grams where it fails", error)
            return [[0.0] * len(row) for row in candidates]
