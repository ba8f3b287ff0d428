"""The engine's prefill rate as this session measures it, for the CPU's prefix budget (`Settings.prefix_budget`).

Each request's prefill of at least MIN_TOKENS new tokens is one measure: its tokens over the engine's seconds (its
`Timings`, so a shared engine's queue is not counted; an idle warm-up's time is not measured there and is left out). The rate is the median of the last WINDOW measures, so one prefill slowed by other work on the machine
does not move the budget; None until a first measure (the budget then takes its floor: a cold first request stays
short). Plain values, read by `spd.status` from any thread.
"""

from __future__ import annotations

import statistics
import threading
from collections import deque

MIN_TOKENS = 256  # a shorter prefill's fixed costs (prompt building, the first chunk's set-up) understate the rate
WINDOW = 5


class PrefillRate:
    def __init__(self) -> None:
        self._measures: deque[float] = deque(maxlen=WINDOW)
        self._lock = threading.Lock()

    def record(self, tokens: int, seconds: float) -> None:
        """One prefill of `tokens` new tokens that took `seconds`; ignored below MIN_TOKENS."""
        if tokens >= MIN_TOKENS and seconds > 0:
            with self._lock:
                self._measures.append(tokens / seconds)

    def tokens_per_s(self) -> float | None:
        with self._lock:
            return statistics.median(self._measures) if self._measures else None

    def reset(self) -> None:
        """Another model (or engine): its rate is measured anew."""
        with self._lock:
            self._measures.clear()
