"""Keep a store live: filesystem events -> debounced per-path updates on one thread.

Editors save in many ways (write in place, write a temp file and rename it over,
vim's rename-to-backup-then-write); debouncing per path and then looking at the
file as it IS makes all of them one update. Only events that change content are
handled (created, modified, closed-after-write, deleted, moved), so the indexer's
own reads never trigger it. A burst of events (a `git checkout`, an unpacked
archive) turns into one reconciling rescan.

The watcher decides WHAT to write; `submit` decides WHERE: a process with other
writers (the server's saves and indexing) passes its one writer queue, so every
store write happens on one thread in order. A failed update is retried by a
rescan after an exponentially growing delay, reported once per run of failures.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from concurrent.futures import CancelledError, Future
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path
from typing import Any, Callable

from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer
from watchdog.observers.polling import PollingObserver

from ngram_db.errors import StoreError
from ngram_db.indexer import IndexCancelled, Indexer

log = logging.getLogger(__name__)

_CONTENT_EVENTS = frozenset({"created", "modified", "deleted", "moved", "closed"})
RETRY_FIRST_S = 1.0
RETRY_MAX_S = 300.0
JOIN_TIMEOUT_S = 5.0

Submit = Callable[[Callable[[], Any]], "Future[Any]"]


def run_here(work: Callable[[], Any]) -> "Future[Any]":
    """The default `submit`: write on the watcher's own thread (a process with no other writer)."""
    future: Future[Any] = Future()
    try:
        future.set_result(work())
    except BaseException as error:  # noqa: BLE001 - handed to the waiting caller
        future.set_exception(error)
    return future


class Watcher(FileSystemEventHandler):
    """Watches the indexer's roots; start() returns at once, stop() joins (bounded)."""

    def __init__(self, indexer: Indexer, debounce_s: float = 0.2, storm_paths: int = 500,
                 poll_interval_s: float = 1.0, *, submit: Submit = run_here,
                 on_failure: Callable[[str], None] | None = None) -> None:
        self.indexer = indexer
        self.submit = submit
        self.on_failure = on_failure  # told once per run of failures
        self.failures = 0  # consecutive failed updates (0 after a success)
        self.failures_total = 0
        self.debounce_s = debounce_s
        self.storm_paths = storm_paths
        self.poll_interval_s = poll_interval_s
        self.polling = False
        self._due: dict[Path, float] = {}  # path -> when to look at it
        self._moves: dict[Path, Path] = {}  # destination -> source
        self._rescan_at: float | None = None
        self._wake = threading.Condition()
        self._stopping = False
        self._observer: Observer | PollingObserver | None = None
        self._thread = threading.Thread(target=self._run, name="spd-ngram-watcher", daemon=True)

    def start(self) -> None:
        try:
            self._observer = self._observe(Observer())
        except OSError as error:  # inotify watch or instance limit
            log.warning("n-gram watcher: inotify unavailable (%s); polling every %.1fs instead",
                        error, self.poll_interval_s)
            self.polling = True
            self._observer = self._observe(PollingObserver(timeout=self.poll_interval_s))
        self._thread.start()

    def _observe(self, observer: Observer | PollingObserver) -> Observer | PollingObserver:
        try:
            for root in self.indexer.roots:
                observer.schedule(self, str(root), recursive=True)
            observer.start()
        except BaseException:
            observer.stop()
            raise
        return observer

    def request_stop(self) -> None:
        """Ask the watcher to stop (a rescan in progress stops at its next batch); returns at once."""
        with self._wake:
            self._stopping = True
            self._wake.notify()

    def stop(self, timeout: float = JOIN_TIMEOUT_S) -> None:
        """Stop watching and wait for the watcher's thread, at most ~`timeout`."""
        self.request_stop()
        deadline = time.monotonic() + timeout
        if self._observer is not None:
            self._observer.stop()
            self._observer.join(timeout)
        if self._thread.is_alive():
            self._thread.join(max(0.0, deadline - time.monotonic()))
            if self._thread.is_alive():
                log.warning("n-gram watcher: still finishing a write after %.0fs; leaving it", timeout)

    def idle(self) -> bool:
        """Nothing is waiting to be applied (for tests and status)."""
        with self._wake:
            return not self._due and self._rescan_at is None

    # ---- event side (observer thread) -------------------------------------------------

    def on_any_event(self, event: FileSystemEvent) -> None:
        if event.event_type not in _CONTENT_EVENTS:
            return
        if event.event_type == "closed" and event.is_directory:
            return
        if event.event_type == "modified" and event.is_directory:
            return  # a child changed: the child has its own event
        paths = [Path(os.fsdecode(event.src_path))]
        if event.event_type == "moved":
            paths.append(Path(os.fsdecode(event.dest_path)))
        if any(p.name == ".gitignore" for p in paths):
            self.indexer.rules.forget_gitignores()
            self._schedule_rescan()
            return
        relevant = [p for p in paths if not self.indexer.rules.ignored(p, is_dir=event.is_directory)]
        if not relevant:
            return
        due = time.monotonic() + self.debounce_s
        with self._wake:
            for path in relevant:
                self._due[path] = due
            if len(relevant) == 2 and not event.is_directory:
                self._moves[paths[1]] = paths[0]
            if len(self._due) > self.storm_paths:
                self._due.clear()
                self._moves.clear()
                self._rescan_at = due
            self._wake.notify()

    def _schedule_rescan(self) -> None:
        with self._wake:
            self._rescan_at = time.monotonic() + self.debounce_s
            self._wake.notify()

    # ---- apply side (watcher thread) ----------------------------------------------------

    def _run(self) -> None:
        while True:
            with self._wake:
                work = self._take_due()
                while work is None and not self._stopping:
                    self._wake.wait(self._next_wait())
                    work = self._take_due()
                if self._stopping:
                    return
            self._apply(*work)

    def _next_wait(self) -> float | None:
        times = list(self._due.values()) + ([self._rescan_at] if self._rescan_at is not None else [])
        return max(0.0, min(times) - time.monotonic()) if times else None

    def _take_due(self) -> tuple[bool, list[Path], dict[Path, Path]] | None:
        """Pop what is due. Called with the condition held."""
        now = time.monotonic()
        if self._rescan_at is not None:
            if self._rescan_at > now:
                return None
            self._rescan_at = None
            return True, [], {}
        ready = [p for p, due in self._due.items() if due <= now]
        if not ready:
            return None
        for path in ready:
            del self._due[path]
        moves = {}
        for path in ready:
            source = self._moves.pop(path, None)
            if source is not None and source not in self._due:
                moves[path] = source
        return False, ready, moves

    def _apply(self, rescan: bool, paths: list[Path], moves: dict[Path, Path]) -> None:
        def write() -> None:
            if rescan:
                self.indexer.index(cancelled=lambda: self._stopping)
                return
            for dest, source in moves.items():
                self.indexer.move_path(source, dest)
            for path in paths:
                if path not in moves:  # a moved-away source may have been written again (vim)
                    self.indexer.update_path(path)

        future = self.submit(write)
        try:
            while True:
                try:
                    future.result(timeout=0.2)
                    break
                except FutureTimeout:
                    if self._stopping:
                        future.cancel()  # still queued: never runs; running: stops at its next batch
                        return
            self.failures = 0
        except (CancelledError, IndexCancelled):
            return
        except Exception as error:  # noqa: BLE001 - a bad file or a busy store must not stop the watcher
            self._failed(error)

    def _failed(self, error: Exception) -> None:
        """Retry with a full rescan after 1, 2, 4, ... 300 s; say so once per run of failures."""
        self.failures += 1
        self.failures_total += 1
        delay = min(RETRY_MAX_S, max(RETRY_FIRST_S, self.debounce_s) * 2 ** (self.failures - 1))
        if self.failures == 1:
            detail = str(error) if isinstance(error, StoreError) else f"{type(error).__name__}: {error}"
            message = f"n-gram watcher: updating the store failed ({detail}); retrying with growing delays"
            log.warning(message, exc_info=not isinstance(error, StoreError))
            if self.on_failure is not None:
                self.on_failure(message)
        else:
            log.debug("n-gram watcher: failure %d (%s); next rescan in %.0fs", self.failures, error, delay)
        with self._wake:
            self._rescan_at = time.monotonic() + delay
