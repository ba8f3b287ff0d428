"""The live n-gram stores of the open workspace folders.

One store per folder (the user cache by default), indexed in the background
with progress shown in the client, kept current by a watcher and by `didSave`.
A store that cannot be opened is reported once; completions then go on without
it. All writes (indexing, saves) run on one "spd-index" thread so they never
race each other; the model worker only reads.
"""

from __future__ import annotations

import logging
import shutil
import threading
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, Sequence

from ngram_db import NgramSource, TokenizerId
from ngram_db.errors import StoreError, TokenizerMismatchError
from ngram_db.indexer import Indexer, IndexOptions, IndexProgress
from ngram_db.layered import DEFAULT_BASE_WEIGHT, LayeredNgrams
from ngram_db.paths import base_store_path, default_store_path
from ngram_db.store import NgramStore
from ngram_db.watcher import Watcher
from spd_lsp.config import NgramSettings
from spd_lsp.model import encode_texts, tokenizer_identity
from spd_lsp.scheduler import Scheduler

log = logging.getLogger(__name__)


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


class Workspace:
    def __init__(self, client: Client) -> None:
        self.client = client
        self._roots: list[RootStore] = []
        self._base: NgramStore | None = None
        self._key: tuple[Any, ...] | None = None
        # A daemon thread: quitting the editor must not wait for a long indexing run
        # (every batch is its own transaction, so stopping midway loses nothing).
        self._writes = Scheduler("spd-index")
        self._lock = threading.Lock()

    def configure(self, roots: Sequence[Path], tokenizer: Any, settings: NgramSettings) -> None:
        """Open (or reopen, after a tokenizer or setting change) the stores and start indexing."""
        identity = tokenizer_identity(tokenizer) if settings.enabled else None
        key = (tuple(roots), identity, settings.enabled, settings.db, settings.index, settings.exclude)
        if key == self._key:
            return
        self._close_stores()
        self._key = key
        if identity is None:
            return
        options = IndexOptions(exclude=list(settings.exclude))

        opened: list[RootStore] = []
        for root in roots:
            path = Path(settings.db).expanduser() if settings.db else default_store_path(root)
            store = self._open(path, identity, rebuild=settings.db is None)
            if store is not None:
                indexer = Indexer(store, lambda text: encode_texts(tokenizer, [text])[0], [root], options,
                                  encode_batch=lambda texts: encode_texts(tokenizer, texts))
                opened.append(RootStore(root, path, store, indexer))
        base = base_store_path()
        with self._lock:
            self._roots = opened
            self._base = self._open(base, identity, rebuild=False, readonly=True) if base.exists() else None
        if settings.index:
            for root_store in opened:
                self._watch(root_store)
                self._schedule_index(root_store)

    def _open(self, path: Path, identity: TokenizerId, rebuild: bool, readonly: bool = False) -> NgramStore | None:
        try:
            try:
                return NgramStore.open(path, identity, readonly=readonly)
            except TokenizerMismatchError:
                if not rebuild:
                    raise
                log.info("store %s was built for another tokenizer: rebuilding it", path)
                shutil.rmtree(path)
                return NgramStore.open(path, identity)
        except (StoreError, OSError) as exc:
            self.client.show("warning", f"spd-lsp: n-gram store {path} unusable, completing without it: {exc}")
            return None

    def _watch(self, root_store: RootStore) -> None:
        """Watch before indexing, so edits made while the walk runs are not lost."""
        try:
            root_store.watcher = Watcher(root_store.indexer)
            root_store.watcher.start()
        except OSError as exc:
            root_store.watcher = None
            self.client.show("warning", f"spd-lsp: cannot watch {root_store.root} ({exc}); saves still update it")

    def _schedule_index(self, root_store: RootStore) -> None:
        root_store.indexing = True  # from now: status must not say "done" before the walk starts
        self._writes.submit(("index", id(root_store)), lambda cancelled: self._index(root_store))

    def _index(self, root_store: RootStore) -> None:
        if root_store not in self._roots:
            return  # closed before its turn came
        progress = self.client.progress(f"spd-lsp: indexing {root_store.root.name}")

        def report(state: IndexProgress) -> None:
            progress.report(str(state), 100 * state.files_done // max(state.files_total, 1))

        try:
            report_ = root_store.indexer.index(progress=report)
            progress.end(f"{report_.files_indexed} files, {report_.tokens} tokens in {report_.seconds:.1f} s")
        except Exception as exc:  # noqa: BLE001 - indexing failure must not take the server down
            log.exception("indexing %s failed", root_store.root)
            progress.end(f"indexing failed: {exc}")
            self.client.show("warning", f"spd-lsp: indexing {root_store.root} failed: {exc}")
        finally:
            root_store.indexing = False

    def ngrams(self) -> NgramSource | None:
        """What the engine should read: None, one store, or a weighted mix."""
        with self._lock:
            stores, base = [r.store for r in self._roots], self._base
        if not stores:
            return base
        workspace = stores[0] if len(stores) == 1 else LayeredNgrams([(s, 1.0 / len(stores)) for s in stores])
        if base is None:
            return workspace
        return LayeredNgrams([(workspace, 1.0 - DEFAULT_BASE_WEIGHT), (base, DEFAULT_BASE_WEIGHT)])

    def saved(self, path: Path) -> Future[bool] | None:
        """Count a saved file at once (the watcher may take a moment)."""
        owner = next((r for r in self._roots if path.is_relative_to(r.root)), None)
        if owner is None:
            return None
        return self._writes.submit(("save", path), lambda cancelled: owner.indexer.update_path(path)).future

    def reindex(self) -> bool:
        for root_store in self._roots:
            self._schedule_index(root_store)
        return bool(self._roots)

    def status(self) -> list[dict[str, Any]]:
        rows = []
        for root_store in self._roots:
            stats = root_store.store.stats()
            rows.append(
                {
                    "root": str(root_store.root),
                    "path": str(root_store.path),
                    "indexing": root_store.indexing,
                    "files": stats.files,
                    "tokens": stats.tokens,
                    "contexts": stats.contexts,
                    "bytes": stats.bytes,
                }
            )
        return rows

    def _close_stores(self) -> None:
        with self._lock:
            closing, self._roots = self._roots, []
            base, self._base = self._base, None
        for root_store in closing:
            if root_store.watcher is not None:
                root_store.watcher.stop()
        # Close on the write thread, after any indexing job still using the store.
        stores = [r.store for r in closing] + ([base] if base is not None else [])
        self._writes.submit(object(), lambda cancelled: [store.close() for store in stores])

    def close(self) -> None:
        self._close_stores()
        self._writes.close()
