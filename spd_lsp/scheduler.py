"""One worker thread; for each key (a document) only the newest job runs.

The engine is not thread-safe and keeps one KV cache, so every model call goes
through this single thread. Submitting a job under a key that already has one
pending or running cancels the old one: a pending job's future is cancelled at
once, a running one sees `cancelled()` turn true and raises `Cancelled` at its
next decode step.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from concurrent.futures import Future
from typing import Any, Callable, Hashable, TypeVar

from spd_lsp.decoding.types import CancelCheck, Cancelled

log = logging.getLogger(__name__)
T = TypeVar("T")


class Job:
    def __init__(self, key: Hashable, work: Callable[[CancelCheck], Any]) -> None:
        self.key = key
        self.work = work
        self.future: Future[Any] = Future()
        self._cancelled = threading.Event()

    def cancel(self) -> None:
        self._cancelled.set()
        self.future.cancel()  # succeeds only while pending; a running job stops itself

    def cancelled(self) -> bool:
        return self._cancelled.is_set()


class Scheduler:
    def __init__(self, name: str = "spd-model") -> None:
        self._pending: OrderedDict[Hashable, Job] = OrderedDict()
        self._running: Job | None = None
        self._closed = False
        self._wake = threading.Condition()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def submit(self, key: Hashable, work: Callable[[CancelCheck], T]) -> Job:
        """Queue `work(cancelled)`; it supersedes any job under the same key."""
        job = Job(key, work)
        with self._wake:
            if self._closed:
                job.cancel()
                return job
            self.cancel(key)
            self._pending[key] = job
            self._wake.notify()
        return job

    def cancel(self, key: Hashable) -> None:
        with self._wake:
            if (old := self._pending.pop(key, None)) is not None:
                old.cancel()
            if self._running is not None and self._running.key == key:
                self._running.cancel()

    def close(self, timeout: float | None = 5.0) -> None:
        with self._wake:
            self._closed = True
            for job in self._pending.values():
                job.cancel()
            self._pending.clear()
            if self._running is not None:
                self._running.cancel()
            self._wake.notify()
        self._thread.join(timeout)

    def _next(self) -> Job | None:
        with self._wake:
            self._wake.wait_for(lambda: self._pending or self._closed)
            if self._closed:
                return None
            _, self._running = self._pending.popitem(last=False)
            return self._running

    def _loop(self) -> None:
        while (job := self._next()) is not None:
            if job.future.set_running_or_notify_cancel():
                try:
                    if job.cancelled():
                        raise Cancelled()
                    job.future.set_result(job.work(job.cancelled))
                except BaseException as exc:  # noqa: BLE001 - delivered to the waiting request
                    if not isinstance(exc, Cancelled):
                        log.exception("job %r failed", job.key)
                    job.future.set_exception(exc)
            with self._wake:
                self._running = None
