"""One worker thread; for each key (a document) only the newest job runs.

The engine is not thread-safe and keeps one KV cache, so every model call goes
through this single thread. Submitting a job under a key that already has one
pending or running stops the old one: a pending job's future is cancelled at
once, a running one sees `cancelled()` turn true and raises `Cancelled` at its
next decode step (or prefill chunk).

Except where the new job can use the running one's result (`keeps`): a fast
typist's next request extends the prefix being decoded, so the decode finishes
(its drafts answer the new request by type-through) even if its own requester
has meanwhile given up.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from concurrent.futures import Future
from typing import Any, Callable, Hashable, TypeVar

from spd_lsp.api import CancelCheck, Cancelled

log = logging.getLogger(__name__)
T = TypeVar("T")


Keeps = Callable[[Any, Any], bool]
"""keeps(running job's tag, new job's tag): the new job can use the running one's result."""


class Job:
    def __init__(
        self, key: Hashable, work: Callable[[CancelCheck], Any], tag: Any = None, *, background: bool = False
    ) -> None:
        self.key = key
        self.work = work
        self.tag = tag
        self.background = background
        self.future: Future[Any] = Future()
        self.kept = False  # a newer job relies on this one's result
        self._abandoned = threading.Event()
        self._stopped = threading.Event()

    def cancel(self) -> None:
        """The requester gave up: stop, unless a newer job relies on the result."""
        self._abandoned.set()
        self.future.cancel()  # succeeds only while pending; a running job stops itself

    def stop(self) -> None:
        """Nothing needs the result any more."""
        self._stopped.set()
        self.cancel()

    def cancelled(self) -> bool:
        return self._stopped.is_set() or (self._abandoned.is_set() and not self.kept)


class KeyedWorker:
    def __init__(self, name: str = "spd-model", *, background_delay_s: float = 0.0) -> None:
        """`background_delay_s`: background jobs start only once no other job has run for this
        long, so a request that follows an answer at once does not wait for speculative work."""
        self.background_delay_s = background_delay_s
        self._quiet_since = float("-inf")
        self._pending: OrderedDict[Hashable, Job] = OrderedDict()
        self._background: OrderedDict[Hashable, Job] = OrderedDict()  # run only when nothing else waits
        self._running: Job | None = None
        self._closed = False
        self._wake = threading.Condition()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def submit(
        self,
        key: Hashable,
        work: Callable[[CancelCheck], T],
        *,
        tag: Any = None,
        keeps: Keeps | None = None,
        background: bool = False,
    ) -> Job:
        """Queue `work(cancelled)`; it supersedes any job under the same key.

        A running job under the key finishes instead when `keeps(its tag, tag)`. A
        background job runs only while no other job is waiting, and any other job
        stops it unless something keeps it.
        """
        job = Job(key, work, tag, background=background)
        with self._wake:
            if self._closed:
                job.stop()
                return job
            self._supersede(key, tag, keeps)
            running = self._running
            if not background and running is not None and running.background and not running.kept:
                running.stop()
            (self._background if background else self._pending)[key] = job
            self._wake.notify()
        return job

    def cancel(self, key: Hashable, *, tag: Any = None, keeps: Keeps | None = None) -> None:
        """Stop the jobs under `key`, except a running one whose result `keeps(its tag, tag)`."""
        with self._wake:
            self._supersede(key, tag, keeps)

    def _supersede(self, key: Hashable, tag: Any, keeps: Keeps | None) -> None:
        running = self._running
        if running is not None and running.key == key:
            if keeps is not None and keeps(running.tag, tag):
                running.kept = True
            else:
                running.stop()
        for queue in (self._pending, self._background):
            if (old := queue.pop(key, None)) is not None:
                old.stop()

    def close(self, timeout: float | None = 5.0) -> None:
        with self._wake:
            self._closed = True
            for queue in (self._pending, self._background):
                for job in queue.values():
                    job.stop()
                queue.clear()
            if self._running is not None:
                self._running.stop()
            self._wake.notify()
        self._thread.join(timeout)

    def _next(self) -> Job | None:
        with self._wake:
            while not self._closed:
                quiet_for = time.monotonic() - self._quiet_since
                if self._pending or (self._background and quiet_for >= self.background_delay_s):
                    _, self._running = (self._pending or self._background).popitem(last=False)
                    return self._running
                self._wake.wait(self.background_delay_s - quiet_for if self._background else None)
            return None

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
                self._quiet_since = time.monotonic()
