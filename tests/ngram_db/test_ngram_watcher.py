"""Real file operations under a running watcher end with the store equal to a recount."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from ngram_db.indexer import Indexer
from ngram_db.store import NgramStore
from ngram_db.watcher import Watcher

from tests.ngram_support import BYTES, assert_store_equals, encode


def on_disk(root: Path) -> dict[str, list[int]]:
    return {str(p): encode(p.read_text()) for p in root.rglob("*")
            if p.is_file() and not p.name.endswith(("~", ".tmp"))}


def settle(watcher: Watcher, store: NgramStore, root: Path, timeout: float = 15.0) -> None:
    """Wait until the store records exactly the files on disk, then compare every count."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        expected = on_disk(root)
        if watcher.idle() and {p: i.token_count for p, i in store.files().items()} == {
                p: len(t) for p, t in expected.items()}:
            break
        time.sleep(0.05)
    assert_store_equals(store, on_disk(root).values())
    assert set(store.files()) == set(on_disk(root))


@pytest.fixture
def watched(tmp_path):
    root = tmp_path / "ws"
    root.mkdir()
    for name in ("a.py", "b.py", "c.py"):
        (root / name).write_text(f"# {name}\nvalue = '{name}'\n")
    with NgramStore.open(tmp_path / "store", BYTES) as store:
        indexer = Indexer(store, encode, [root])
        indexer.index()
        watcher = Watcher(indexer, debounce_s=0.05, storm_paths=200)
        watcher.start()
        try:
            yield root, store, watcher
        finally:
            watcher.stop()


def test_editor_saves_deletes_renames_and_new_directories(watched, tmp_path):
    root, store, watcher = watched
    (root / "a.py.tmp").write_text("atomic = 1\n")  # write a temp file, rename it over
    os.replace(root / "a.py.tmp", root / "a.py")
    (root / "b.py.new-41").write_text("atomic_visible_temp = 2\n")
    os.replace(root / "b.py.new-41", root / "b.py")
    settle(watcher, store, root)

    os.rename(root / "a.py", root / "a.py~")  # vim: backup by rename, write anew, drop the backup
    (root / "a.py").write_text("vim = 'saved'\n")
    (root / "a.py~").unlink()
    settle(watcher, store, root)

    (root / "b.py").unlink()
    os.rename(root / "c.py", root / "d.py")
    (root / "new" / "deep").mkdir(parents=True)
    (root / "new" / "deep" / "x.py").write_text("x = 'new dir'\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "y.py").write_text("y = 'moved in'\n")
    shutil.move(str(outside), root / "moved")
    settle(watcher, store, root)

    shutil.move(str(root / "moved"), root / "renamed")
    (root / "d.py").write_text((root / "d.py").read_text() + "more = 1\n")  # in-place append
    settle(watcher, store, root)


def test_event_storm_falls_back_to_a_rescan(watched):
    root, store, watcher = watched
    rescans = []
    original = watcher.indexer.index
    watcher.indexer.index = lambda *args, **kwargs: rescans.append(1) or original(*args, **kwargs)
    for i in range(400):  # like a `git checkout`: far more paths than storm_paths
        (root / "pkg" / f"m{i % 10}").mkdir(parents=True, exist_ok=True)
        (root / "pkg" / f"m{i % 10}" / f"f{i}.py").write_text(f"n = {i}\n")
    (root / "a.py").unlink()
    settle(watcher, store, root, timeout=30.0)
    assert rescans and store.verify() == []


def test_indexer_reads_do_not_retrigger_the_watcher(watched):
    root, store, watcher = watched
    (root / "a.py").write_text("changed = True\n")
    settle(watcher, store, root)
    calls = []
    original = watcher.indexer.update_path
    watcher.indexer.update_path = lambda path: calls.append(path) or original(path)
    watcher.indexer.index()  # reads every file
    (root / "a.py").read_text()
    time.sleep(0.5)
    assert calls == []


def test_inotify_limit_falls_back_to_polling(tmp_path, monkeypatch, caplog):
    import ngram_db.watcher as module

    class NoInotify:
        def __init__(self, *args, **kwargs):
            pass

        def schedule(self, *args, **kwargs):
            raise OSError(28, "inotify watch limit reached")

        def stop(self):
            pass

    monkeypatch.setattr(module, "Observer", NoInotify)
    root = tmp_path / "ws"
    root.mkdir()
    with NgramStore.open(tmp_path / "store", BYTES) as store:
        watcher = Watcher(Indexer(store, encode, [root]), debounce_s=0.05, poll_interval_s=0.1)
        watcher.start()
        try:
            assert watcher.polling and "polling" in caplog.text
            (root / "p.py").write_text("polled = 1\n")
            settle(watcher, store, root)
        finally:
            watcher.stop()


def test_failures_back_off_exponentially_with_one_message(tmp_path, caplog):
    from ngram_db.errors import StoreLockedError

    root = tmp_path / "ws"
    root.mkdir()
    told = []
    with NgramStore.open(tmp_path / "store", BYTES) as store:
        indexer = Indexer(store, encode, [root])
        watcher = Watcher(indexer, debounce_s=0.05, on_failure=told.append)  # not started: drive it by hand

        def locked(**kwargs):
            raise StoreLockedError("n-gram store is being written by another process")

        indexer.index = locked
        delays = []
        for _ in range(12):
            before = time.monotonic()
            watcher._apply(True, [], {})
            delays.append(watcher._rescan_at - before)
        assert watcher.failures == 12
        assert delays[0] == pytest.approx(1.0, abs=0.2)
        assert all(later >= 1.9 * earlier for earlier, later in zip(delays[:8], delays[1:9]))
        assert max(delays) <= 300.5  # capped
        assert len(told) == 1 and "another process" in told[0]
        assert caplog.text.count("updating the store failed") == 1
        indexer.index = lambda **kwargs: None  # recovers: the streak ends
        watcher._apply(True, [], {})
        assert watcher.failures == 0 and watcher.failures_total == 12


def test_stop_ends_a_running_rescan_at_its_next_batch(tmp_path):
    from ngram_db.indexer import IndexOptions

    root = tmp_path / "ws"
    root.mkdir()
    for i in range(60):
        (root / f"f{i}.py").write_text(f"value_{i} = {i}\n")
    encoded = []

    def slow_encode(text):
        encoded.append(text)
        time.sleep(0.1)
        return encode(text)

    with NgramStore.open(tmp_path / "store", BYTES) as store:
        watcher = Watcher(Indexer(store, slow_encode, [root], IndexOptions(batch_bytes=1)), debounce_s=0.01)
        watcher.start()
        try:
            watcher._schedule_rescan()
            deadline = time.monotonic() + 15
            while len(encoded) < 3:
                assert time.monotonic() < deadline, "the rescan never started"
                time.sleep(0.01)
        finally:
            watcher.stop()
        assert not watcher._thread.is_alive()
        assert len(encoded) < 30  # the rescan stopped at a batch boundary, not after all 60 files
        assert store.verify() == []
