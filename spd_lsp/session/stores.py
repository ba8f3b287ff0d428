"""The live n-gram stores of the open workspace folders.

One store per folder (the user cache by default), indexed in the background
with progress shown in the client, kept current by a watcher and by `didSave`.
A store that cannot be opened is reported once; completions then go on without
it. Every store write and every lifecycle step (opening, closing, adding
watches) runs on the one "spd-index" thread, in order: the watcher hands its
updates to that thread too, and a reconfiguration first stops the running index
at its next batch, then closes, then reopens. The model worker only reads, and
a read that fails costs that request its n-gram term, never its answer.

The store, indexer and watcher modules (numpy, lmdb, msgpack: ~22 MB of a front end's RSS) are imported when a
store is first opened: a window with no folder and no base store never loads them.
"""

from __future__ import annotations

import logging
import threading
from concurrent.futures import CancelledError, Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Protocol, Sequence

from ngram_db import NgramSource, TokenizerId
from ngram_db.errors import StoreError
from ngram_db.guarded import GuardedNgrams
from ngram_db.layered import DEFAULT_BASE_WEIGHT, LayeredNgrams
from ngram_db.paths import base_store_path, broad_root, default_store_path, explicit_store_path
from spd_lsp.settings import NgramSettings
from spd_lsp.tokens import encode_texts, tokenizer_identity
from spd_lsp.worker import KeyedWorker

if TYPE_CHECKING:
    from ngram_db.indexer import Indexer, IndexOptions, IndexProgress
    from ngram_db.shards import ShardedStore
    from ngram_db.store import NgramStore
    from ngram_db.watcher import Watcher

log = logging.getLogger(__name__)
CLOSE_TIMEOUT_S = 5.0

OnReady = Callable[[NgramSource | None], None]


class Progress(Protocol):
    def report(self, message: str, percentage: int | None = None) -> None: ...

    def end(self, message: str) -> None: ...


class Client(Protocol):
    """The editor, as the domain code talks to it (messages, $/progress); thread-safe."""

    def show(self, kind: str, text: str) -> None: ...

    def progress(self, title: str) -> Progress: ...


@dataclass(eq=False)
class RootStore:
    root: Path
    path: Path
    store: NgramStore
    indexer: Indexer
    watcher: Watcher | None = None
    indexing: bool = False
    live: bool = True  # indexed and watched (False: a broad root, only read)


class WorkspaceStores:
    def __init__(self, client: Client) -> None:
        self.client = client
        self.options: IndexOptions | None = None  # caps and sizes (None: the defaults); `exclude` from the settings
        self._roots: list[RootStore] = []
        self._base: NgramStore | ShardedStore | None = None
        self._key: tuple[Any, ...] | None = None
        # A daemon thread: quitting the editor must not wait for a long indexing run
        # (every batch is its own transaction, so stopping midway loses nothing).
        self._writes = KeyedWorker("spd-index")
        self._lock = threading.Lock()

    def configure(self, roots: Sequence[Path], tokenizer: Any, settings: NgramSettings, *,
                  on_ready: OnReady = lambda source: None) -> Future[None]:
        """Open (or reopen, after a tokenizer or setting change) the stores and start indexing.

        Returns at once: the work runs on the index thread, which calls `on_ready` with
        what the engine should read (None while the stores change, then the new source).
        """
        identity = tokenizer_identity(tokenizer) if settings.enabled else None
        key = (tuple(roots), identity, settings.enabled, settings.db, settings.index, settings.exclude,
               settings.secret_filter)
        if key == self._key:
            on_ready(self.ngrams())
            done: Future[None] = Future()
            done.set_result(None)
            return done
        self._key = key
        self._cancel_indexing()  # a running index stops at its next batch, so the switch comes soon
        return self._writes.submit("configure", lambda cancelled: self._configure(
            list(roots), tokenizer, identity, settings, on_ready)).future

    def _configure(self, roots: list[Path], tokenizer: Any, identity: TokenizerId | None,
                   settings: NgramSettings, on_ready: OnReady) -> None:
        on_ready(None)
        self._close_stores()  # on this thread, after any index job: nothing is using them
        if identity is None:
            return
        if not settings.secret_filter:
            log.warning("ngrams.secretFilter is off: lines that carry keys, tokens or passwords are counted into "
                        "the workspace store and can come back as completions")
            self.client.show("warning", "spd-lsp: ngrams.secretFilter is off: secrets in this workspace's files "
                                        "are indexed and can be suggested back")
        opened: list[RootStore] = []
        for root in roots:
            try:
                path = explicit_store_path(settings.db, roots) if settings.db else default_store_path(root)
            except ValueError as exc:
                self.client.show("warning", f"spd-lsp: {exc}; completing without n-grams of {root}")
                continue
            broad = broad_root(root)
            if broad:
                self.client.show("warning", f"spd-lsp: {broad}: not indexing or watching it (open a project "
                                            f"folder, or build its store on purpose: `spd-lsp index {root} "
                                            f"--allow-broad-root`)")
                if not (path / "data.mdb").exists():
                    continue
            store = self._open(path, identity, readonly=bool(broad))
            if store is not None:
                from ngram_db.indexer import Indexer, IndexOptions

                options = replace(self.options or IndexOptions(), exclude=list(settings.exclude),
                                  secret_filter=settings.secret_filter)
                indexer = Indexer(store, lambda text: encode_texts(tokenizer, [text])[0], [root], options,
                                  encode_batch=lambda texts: encode_texts(tokenizer, texts))
                opened.append(RootStore(root, path, store, indexer, live=not broad))
        base = base_store_path()
        base_store = self._open(base, identity, readonly=True) if base.exists() else None
        with self._lock:
            self._roots, self._base = opened, base_store
        on_ready(self.ngrams())
        if settings.index:
            for root_store in opened:
                if root_store.live:
                    self._watch(root_store)
                    self._schedule_index(root_store)

    def _open(self, path: Path, identity: TokenizerId, *, readonly: bool = False) -> NgramStore | ShardedStore | None:
        from ngram_db.shards import open_readonly
        from ngram_db.store import NgramStore

        try:
            # Another tokenizer's (or schema's) store is emptied in place and rebuilt, at the
            # default location and at an explicit `ngrams.db` alike.
            if readonly:
                return open_readonly(path, identity)  # a sharded base (`index --base --engine ray`) too
            return NgramStore.open(path, identity, rebuild="foreign")
        except (StoreError, OSError) as exc:
            self.client.show("warning", f"spd-lsp: n-gram store {path} unusable, completing without it: {exc}")
            return None

    def _watch(self, root_store: RootStore) -> None:
        """Watch before indexing, so edits made while the walk runs are not lost."""
        from ngram_db.watcher import Watcher

        try:
            root_store.watcher = Watcher(root_store.indexer, submit=self._submit_write,
                                         on_failure=lambda message: self.client.show("warning", f"spd-lsp: {message}"))
            root_store.watcher.start()
        except OSError as exc:
            root_store.watcher = None
            self.client.show("warning", f"spd-lsp: cannot watch {root_store.root} ({exc}); saves still update it")

    def _submit_write(self, work: Callable[[], Any]) -> Future[Any]:
        """The watcher's writes, queued behind indexing and saves on the one writer thread."""
        return self._writes.submit(object(), lambda cancelled: work()).future

    def _schedule_index(self, root_store: RootStore) -> None:
        root_store.indexing = True  # from now: status must not say "done" before the walk starts
        self._writes.submit(("index", id(root_store)), lambda cancelled: self._index(root_store, cancelled))

    def _cancel_indexing(self) -> None:
        """Stop the running index and any watcher rescan at their next batch (from any thread)."""
        for root_store in self._roots:
            self._writes.cancel(("index", id(root_store)))
            if root_store.watcher is not None:
                root_store.watcher.request_stop()

    def _index(self, root_store: RootStore, cancelled: Callable[[], bool]) -> None:
        from ngram_db.indexer import IndexCancelled, IndexTooLargeError

        if root_store not in self._roots:
            return  # closed before its turn came
        progress = self.client.progress(f"spd-lsp: indexing {root_store.root.name}")

        def report(state: IndexProgress) -> None:
            progress.report(str(state), 100 * state.files_done // max(state.files_total, 1))

        try:
            report_ = root_store.indexer.index(progress=report, cancelled=cancelled)
            left_out = f"; {report_.secret_line_count} secret line(s) left out" if report_.secret_lines else ""
            progress.end(f"{report_.files_indexed} files, {report_.tokens} tokens in {report_.seconds:.1f} s{left_out}")
            if report_.secret_lines:
                log.warning("left out %d line(s) that carry a secret: %s", report_.secret_line_count,
                            "; ".join(f"{path}: {', '.join(map(str, lines))}" for path, lines in report_.secret_lines))
        except IndexCancelled:
            progress.end("indexing stopped")
        except Exception as exc:  # noqa: BLE001 - indexing failure must not take the server down
            log.warning("indexing %s failed: %s", root_store.root, exc, exc_info=not isinstance(exc, StoreError))
            # Never watch a tree refused as too large; a store error (a full disk, a busy
            # store) keeps the watcher, whose retries catch up once the store can be written.
            refused = isinstance(exc, IndexTooLargeError) or not isinstance(exc, StoreError)
            if refused and root_store.watcher is not None:
                root_store.watcher.stop()
                root_store.watcher = None
            progress.end(f"indexing failed: {exc}")
            self.client.show("warning", f"spd-lsp: indexing {root_store.root} failed: {exc}")
        finally:
            root_store.indexing = False

    def ngrams(self) -> NgramSource | None:
        """What the engine should read: None, one store, or a weighted mix (store errors read as unseen)."""
        with self._lock:
            stores, base = [r.store for r in self._roots], self._base
        if not stores and base is None:
            return None
        if not stores:
            source: NgramSource = base
        else:
            workspace = stores[0] if len(stores) == 1 else LayeredNgrams([(s, 1.0 / len(stores)) for s in stores])
            source = workspace if base is None else LayeredNgrams(
                [(workspace, 1.0 - DEFAULT_BASE_WEIGHT), (base, DEFAULT_BASE_WEIGHT)])
        return GuardedNgrams(source)

    def saved(self, path: Path) -> Future[bool] | None:
        """Count a saved file at once (the watcher may take a moment)."""
        owner = next((r for r in self._roots if r.live and path.is_relative_to(r.root)), None)
        if owner is None:
            return None
        return self._writes.submit(("save", path), lambda cancelled: owner.indexer.update_path(path)).future

    def reindex(self) -> bool:
        live = [r for r in self._roots if r.live]
        for root_store in live:
            self._schedule_index(root_store)
        return bool(live)

    def status(self) -> list[dict[str, Any]]:
        rows = []
        with self._lock:
            roots = list(self._roots)
        for root_store in roots:
            try:
                stats = root_store.store.stats()
            except StoreError:
                continue  # closed by a reconfiguration meanwhile
            watcher = root_store.watcher
            rows.append(
                {
                    "root": str(root_store.root),
                    "path": str(root_store.path),
                    "indexing": root_store.indexing,
                    "watching": watcher is not None,
                    "watchFailures": watcher.failures_total if watcher is not None else 0,
                    "files": stats.files,
                    "tokens": stats.tokens,
                    "contexts": stats.contexts,
                    "bytes": stats.bytes,
                    "ngrams": stats.ngrams,
                }
            )
        return rows

    def _close_stores(self) -> None:
        """Stop watchers and close every store; runs on the index thread."""
        with self._lock:
            closing, self._roots = self._roots, []
            base, self._base = self._base, None
        for root_store in closing:
            if root_store.watcher is not None:
                root_store.watcher.stop()
        for store in [r.store for r in closing] + ([base] if base is not None else []):
            store.close()

    def close(self, timeout: float = CLOSE_TIMEOUT_S) -> None:
        """Stop indexing (at its next batch), close the stores on the index thread; bounded by `timeout`."""
        self._key = None
        self._cancel_indexing()
        job = self._writes.submit("close", lambda cancelled: self._close_stores())
        try:
            job.future.result(timeout)
        except (FutureTimeout, CancelledError):
            log.warning("n-gram stores still busy after %.0fs; leaving them to the process exit", timeout)
        self._writes.close(timeout=0.5)
