"""Where the server stands, pushed to the editor: loading the model, warming up, ready, or an error.

The editor shows it (a status item, a statusline) instead of polling `spd.status`, and reads no latency
figure from a request that ran while the server was warming up: the first request after a load pays
the prompt's cold prefill (and, on a first start, more), which is no measure of typing latency. The
notification's fields follow the Copilot language server's `didChangeStatus` (`kind`, `message`,
`busy`) with the state itself and the loaded model beside them.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Callable

METHOD = "spd/didChangeStatus"
LOADING, WARMING, READY, ERROR = "loading", "warming", "ready", "error"
KINDS = {LOADING: "Normal", WARMING: "Normal", READY: "Normal", ERROR: "Error"}  # Copilot's `kind` values


@dataclass(frozen=True)
class Readiness:
    state: str
    message: str
    model: dict[str, Any] | None = None  # name and device, once loaded

    def to_dict(self) -> dict[str, Any]:
        return {"state": self.state, "message": self.message, "kind": KINDS[self.state],
                "busy": self.state in (LOADING, WARMING), "model": self.model}


class ReadinessTracker:
    """The current readiness; each change goes to `push` (from any thread, in order of the changes)."""

    def __init__(self, push: Callable[[dict[str, Any]], None]) -> None:
        self.push = push
        self._lock = threading.Lock()
        self._current = Readiness(LOADING, "starting")

    @property
    def current(self) -> Readiness:
        with self._lock:
            return self._current

    def set(self, state: str, message: str, model: dict[str, Any] | None = None) -> None:
        with self._lock:
            self._become(Readiness(state, message, model))

    def settled(self) -> None:
        """A model call finished: a server warming up is ready."""
        with self._lock:
            if self._current.state == WARMING:
                self._become(Readiness(READY, "ready", self._current.model))

    def _become(self, new: Readiness) -> None:
        if new != self._current:
            self._current = new
            self.push(new.to_dict())  # under the lock: two changes never reach the editor out of order
