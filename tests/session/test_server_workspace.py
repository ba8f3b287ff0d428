"""WorkspaceStores stores without a model: indexing with progress, saves, tokenizer switches, errors."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any, Callable

import pytest

from ngram_db.indexer import IndexOptions
from ngram_db.layered import LayeredNgrams
from ngram_db.paths import base_store_path
from ngram_db.store import NgramStore
from ngram_db.watcher import Watcher
from spd_lsp.settings import NgramSettings
from spd_lsp.tokens import tokenizer_identity
from spd_lsp.session.stores import WorkspaceStores


class ByteTokenizer:
    """One id per UTF-8 byte, with `offset` so two instances are different vocabularies."""

    def __init__(self, offset: int = 0) -> None:
        self.offset = offset
        self.name_or_path = f"bytes+{offset}"

    def get_vocab(self) -> dict[str, int]:
        return {f"<{b}>": b + self.offset for b in range(256)}

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return [b + self.offset for b in text.encode("utf-8")]

    def __call__(self, texts: list[str], add_special_tokens: bool = False) -> dict[str, list[list[int]]]:
        return {"input_ids": [self.encode(text) for text in texts]}


class Recorder:
    def __init__(self) -> None:
        self.messages: list[tuple[str, str]] = []
        self.progress_log: list[tuple[str, str]] = []

    def show(self, kind: str, text: str) -> None:
        self.messages.append((kind, text))

    def progress(self, title: str) -> Any:
        log = self.progress_log
        log.append(("begin", title))

        class Progress:
            def report(self, message: str, percentage: int | None = None) -> None:
                log.append(("report", f"{percentage}%"))

            def end(self, message: str) -> None:
                log.append(("end", message))

        return Progress()


def wait_until(condition: Callable[[], bool], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("SPD_LSP_CACHE", str(tmp_path / "cache"))
    root = tmp_path / "project"
    root.mkdir()
    (root / "a.py").write_text("def alpha():\n    return 1\n")
    (root / "binary.bin").write_bytes(bytes(range(256)))
    return root


def indexed(workspace: WorkspaceStores, files: int) -> Callable[[], bool]:
    return lambda: (
        bool(workspace.status()) and not workspace.status()[0]["indexing"] and workspace.status()[0]["files"] == files
    )


def test_indexes_in_the_background_with_progress_and_counts_saves(project: Path) -> None:
    client = Recorder()
    workspace = WorkspaceStores(client)
    try:
        workspace.configure([project], ByteTokenizer(), NgramSettings())
        wait_until(indexed(workspace, 1))
        wait_until(lambda: client.progress_log[-1][0] == "end")
        assert client.progress_log[0] == ("begin", "spd-lsp: indexing project")
        before = workspace.status()[0]["tokens"]
        assert workspace.ngrams() is not None
        (project / "b.py").write_text("def beta():\n    return 2\n")
        workspace.saved(project / "b.py").result(10)
        assert workspace.status()[0]["tokens"] > before and workspace.status()[0]["files"] == 2
        assert workspace.saved(project.parent / "elsewhere.py") is None
    finally:
        workspace.close()


def test_another_tokenizer_rebuilds_the_store(project: Path) -> None:
    workspace = WorkspaceStores(Recorder())
    try:
        workspace.configure([project], ByteTokenizer(0), NgramSettings())
        wait_until(indexed(workspace, 1))
        path = Path(workspace.status()[0]["path"])
        workspace.configure([project], ByteTokenizer(1000), NgramSettings()).result(10)
        wait_until(indexed(workspace, 1))
    finally:
        workspace.close()
    with NgramStore.open(path, tokenizer_identity(ByteTokenizer(1000)), readonly=True) as store:
        assert store.stats().files == 1


def test_disabled_ngrams_and_unusable_stores_leave_no_source(project: Path, tmp_path: Path) -> None:
    client = Recorder()
    workspace = WorkspaceStores(client)
    try:
        workspace.configure([project], ByteTokenizer(), NgramSettings(enabled=False)).result(10)
        assert workspace.ngrams() is None and workspace.status() == []
        broken = tmp_path / "broken"
        broken.mkdir()
        (broken / "data.mdb").write_bytes(b"not lmdb" * 512)
        workspace.configure([project], ByteTokenizer(), NgramSettings(db=str(broken))).result(10)
        assert workspace.ngrams() is None
        assert client.messages and client.messages[0][0] == "warning" and str(broken) in client.messages[0][1]
    finally:
        workspace.close()


def test_a_base_store_is_mixed_under_the_workspace(project: Path) -> None:
    tokenizer = ByteTokenizer()
    with NgramStore.open(base_store_path(), tokenizer_identity(tokenizer)) as base:
        base.add_file("/lib/x.py", tokenizer.encode("import os\n"), content_hash="h", size=10, mtime=0.0)
    workspace = WorkspaceStores(Recorder())
    try:
        workspace.configure([project], tokenizer, NgramSettings()).result(10)
        mixed = workspace.ngrams().source  # guarded: a store error reads as unseen
        assert isinstance(mixed, LayeredNgrams)
        assert [weight for _, weight in mixed.layers] == pytest.approx([0.7, 0.3])
        context, candidates = tokenizer.encode("import o"), [tokenizer.encode("s")]
        assert mixed.p_ngram([context], candidates, {2: 0.5, 3: 0.5})[0][0] > 0  # seen only in the base
    finally:
        workspace.close()


class SlowTokenizer(ByteTokenizer):
    """Tokenizes slowly, so a reconfiguration lands in the middle of an index."""

    def __call__(self, texts: list[str], add_special_tokens: bool = False) -> dict[str, list[list[int]]]:
        time.sleep(0.05)
        return super().__call__(texts, add_special_tokens)


def many_files(project: Path, count: int) -> None:
    for i in range(count):
        (project / f"m{i:02d}.py").write_text(f"def f{i}():\n    return {i}\n")


def test_switching_the_tokenizer_during_the_first_index_rebuilds_without_losing_the_store(project: Path) -> None:
    many_files(project, 40)
    client = Recorder()
    workspace = WorkspaceStores(client)
    workspace.options = IndexOptions(batch_bytes=1)  # one file per batch: many stopping points
    try:
        workspace.configure([project], SlowTokenizer(0), NgramSettings())
        wait_until(lambda: bool(workspace.status()) and workspace.status()[0]["files"] >= 2)
        workspace.configure([project], SlowTokenizer(1000), NgramSettings()).result(30)
        wait_until(indexed(workspace, 41), timeout=60)
        path = Path(workspace.status()[0]["path"])
    finally:
        workspace.close()
    assert not [text for _, text in client.messages if "unusable" in text], client.messages
    with NgramStore.open(path, tokenizer_identity(ByteTokenizer(1000)), readonly=True) as store:
        assert store.stats().files == 41 and store.verify() == []


def test_every_store_write_and_lifecycle_step_runs_on_the_index_thread(project: Path, monkeypatch) -> None:
    threads: dict[str, set[str]] = {"apply": set(), "open": set(), "watch": set()}

    def recording(name: str, original: Callable) -> Callable:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            threads[name].add(threading.current_thread().name)
            return original(*args, **kwargs)
        return wrapper

    monkeypatch.setattr(NgramStore, "apply", recording("apply", NgramStore.apply))
    monkeypatch.setattr(NgramStore, "open", classmethod(recording("open", NgramStore.open.__func__)))
    monkeypatch.setattr(Watcher, "start", recording("watch", Watcher.start))
    workspace = WorkspaceStores(Recorder())
    try:
        workspace.configure([project], ByteTokenizer(), NgramSettings())
        wait_until(indexed(workspace, 1))
        (project / "watched.py").write_text("seen = 'by the watcher'\n")  # the watcher's write
        wait_until(indexed(workspace, 2))
        (project / "saved.py").write_text("saved = True\n")
        workspace.saved(project / "saved.py").result(10)  # didSave's write
        wait_until(indexed(workspace, 3))
        store = workspace._roots[0].store
    finally:
        workspace.close()
    assert threads == {"apply": {"spd-index"}, "open": {"spd-index"}, "watch": {"spd-index"}}
    assert store._closed  # close() really closed it (it used to queue the close, then cancel it)


def test_a_broad_root_is_neither_indexed_nor_watched(project: Path, monkeypatch) -> None:
    monkeypatch.setenv("HOME", str(project))
    client = Recorder()
    workspace = WorkspaceStores(client)
    try:
        workspace.configure([project], ByteTokenizer(), NgramSettings()).result(10)
        assert workspace.status() == [] and not client.progress_log
        assert "is your home directory: not indexing or watching it" in client.messages[0][1]
    finally:
        workspace.close()


def test_a_root_whose_index_failed_is_not_watched(project: Path) -> None:
    many_files(project, 5)
    client = Recorder()
    workspace = WorkspaceStores(client)
    workspace.options = IndexOptions(max_files=3)
    try:
        workspace.configure([project], ByteTokenizer(), NgramSettings()).result(10)
        wait_until(lambda: bool(client.progress_log) and client.progress_log[-1][0] == "end")
        assert workspace.status()[0]["watching"] is False and workspace.status()[0]["files"] == 0
        assert any("more than 3 files" in text for _, text in client.messages)
    finally:
        workspace.close()


@pytest.mark.parametrize("db, why", [("relative/store", "relative path"), ("{project}", "workspace folder"),
                                     ("{project}/.spd-store", "inside the workspace folder")])
def test_bad_ngrams_db_locations_are_refused(project: Path, db: str, why: str) -> None:
    client = Recorder()
    workspace = WorkspaceStores(client)
    try:
        workspace.configure([project], ByteTokenizer(), NgramSettings(db=db.format(project=project))).result(10)
        assert workspace.status() == [] and why in client.messages[0][1]
        assert not (project / "data.mdb").exists() and not (project / ".spd-store").exists()
    finally:
        workspace.close()


def test_an_explicit_store_of_another_tokenizer_is_rebuilt(project: Path, tmp_path: Path) -> None:
    client = Recorder()
    workspace = WorkspaceStores(client)
    db = str(tmp_path / "explicit")
    try:
        workspace.configure([project], ByteTokenizer(0), NgramSettings(db=db)).result(10)
        wait_until(indexed(workspace, 1))
        workspace.configure([project], ByteTokenizer(1000), NgramSettings(db=db)).result(10)
        wait_until(indexed(workspace, 1))
    finally:
        workspace.close()
    assert not client.messages, client.messages
    with NgramStore.open(db, tokenizer_identity(ByteTokenizer(1000)), readonly=True) as store:
        assert store.stats().files == 1
