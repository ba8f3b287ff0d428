"""Keep a store live: filesystem events -> debounced per-path updates on one thread.

Editors save in many ways (write in place, write a temp file and rename it over,
vim's rename-to-backup-then-write); debouncing per path and then looking at the
file as it IS makes all of them one update. Only events that change content are
handled (created, modified, closed-after-write, deleted, moved), so the indexer's
own reads never trigger it. A burst of events (a `git checkout`, an unpacked
archive) turns into one reconciling rescan.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from pathlib import Path

from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer
from watchdog.observers.polling import PollingObserver

from ngram_db.errors import StoreError
from ngram_db.indexer import Indexer

log = logging.getLogger(__name__)

_CONTENT_EVENTS = frozenset({"created", "modified", "deleted", "moved", "closed"})


class Watcher(FileSystemEventHandler):
    """Watches the indexer's roots; start() returns at once, stop() joins."""

    def __init__(self, indexer: Indexer, debounce_s: float = 0.2, storm_paths: int = 500,
                 poll_interval_s: float = 1.0) -> None:
        self.indexer = indexer
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

    def stop(self) -> None:
        with self._wake:
            self._stopping = True
            self._wake.notify()
        if self._observer is not None:
            self._observer.stop()
            self._observer.join()
        if self._thread.is_alive():
            self._thread.join()

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
        try:
            if rescan:
                self.indexer.index()
                return
            for dest, source in moves.items():
                self.indexer.move_path(source, dest)
            for path in paths:
                if path not in moves:  # a moved-away source may have been written again (vim)
                    self.indexer.update_path(path)
        except StoreError as error:
            log.warning("n-gram watcher: %s; will rescan", error)
            with self._wake:
                self._rescan_at = time.monotonic() + max(1.0, self.debounce_s)
        except Exception:  # noqa: BLE001 - a bad file must not stop the watcher
            log.exception("n-gram watcher: update failed; will rescan")
            with self._wake:
                self._rescan_at = time.monotonic() + max(1.0, self.debounce_s)
