"""Per-peer-address limits on failed handshakes, for the TCP engine.

A client that fails `FAILURES` times within `WINDOW_S` (a refused or missing hello, a frame
that does not decode, a connection that ends before its hello) has its address's new
connections closed at accept, without a read or an answer, for `BACKOFF_S`: a flood of
garbage from one address then costs the engine an accept per connection. Connections of
that address that authenticated before keep working. Unix-socket peers (owner-only) have
no address and no limit.
"""

from __future__ import annotations

import time
from collections import deque
from typing import Callable

FAILURES = 20
WINDOW_S = 10.0
BACKOFF_S = 30.0
MAX_TRACKED = 10_000  # addresses remembered at once: past it, the quiet ones are forgotten


class PeerGuard:
    def __init__(self, *, failures: int = FAILURES, window_s: float = WINDOW_S, backoff_s: float = BACKOFF_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.failures, self.window_s, self.backoff_s, self.clock = failures, window_s, backoff_s, clock
        self._recent: dict[str, deque[float]] = {}
        self._blocked: dict[str, float] = {}  # address -> until
        self.closed_at_accept = 0
        self.backoffs = 0

    def blocked(self, address: str | None) -> bool:
        """Whether a new connection from `address` is to be closed at once (counted when it is)."""
        if address is None:
            return False
        until = self._blocked.get(address)
        if until is None:
            return False
        if self.clock() >= until:
            del self._blocked[address]
            return False
        self.closed_at_accept += 1
        return True

    def failed(self, address: str | None) -> None:
        """One failed handshake (or bad frame) from `address`."""
        if address is None or self.failures <= 0:
            return
        now = self.clock()
        recent = self._recent.setdefault(address, deque())
        recent.append(now)
        while recent and recent[0] < now - self.window_s:
            recent.popleft()
        if len(recent) >= self.failures:
            self._blocked[address] = now + self.backoff_s
            self.backoffs += 1
            recent.clear()
        if len(self._recent) > MAX_TRACKED:
            self._forget(now)

    def _forget(self, now: float) -> None:
        for address in [a for a, times in self._recent.items() if not times or times[-1] < now - self.window_s]:
            del self._recent[address]

    def status(self) -> dict[str, int]:
        now = self.clock()
        return {"blockedPeers": sum(until > now for until in self._blocked.values()),
                "closedAtAccept": self.closed_at_accept, "backoffs": self.backoffs}
