"""Workspace stores without a model: indexing with progress, saves, tokenizer switches, errors."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Callable

import pytest

from ngram_db.layered import LayeredNgrams
from ngram_db.paths import base_store_path
from ngram_db.store import NgramStore
from spd_lsp.config import NgramSettings
from spd_lsp.model import tokenizer_identity
from spd_lsp.workspace import Workspace


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


def indexed(workspace: Workspace, files: int) -> Callable[[], bool]:
    return lambda: (
        bool(workspace.status()) and not workspace.status()[0]["indexing"] and workspace.status()[0]["files"] == files
    )


def test_indexes_in_the_background_with_progress_and_counts_saves(project: Path) -> None:
    client = Recorder()
    workspace = Workspace(client)
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
    workspace = Workspace(Recorder())
    try:
        workspace.configure([project], ByteTokenizer(0), NgramSettings())
        wait_until(indexed(workspace, 1))
        path = Path(workspace.status()[0]["path"])
        workspace.configure([project], ByteTokenizer(1000), NgramSettings())
        wait_until(indexed(workspace, 1))
    finally:
        workspace.close()
    with NgramStore.open(path, tokenizer_identity(ByteTokenizer(1000)), readonly=True) as store:
        assert store.stats().files == 1


def test_disabled_ngrams_and_unusable_stores_leave_no_source(project: Path, tmp_path: Path) -> None:
    client = Recorder()
    workspace = Workspace(client)
    try:
        workspace.configure([project], ByteTokenizer(), NgramSettings(enabled=False))
        assert workspace.ngrams() is None and workspace.status() == []
        broken = tmp_path / "broken"
        broken.mkdir()
        (broken / "data.mdb").write_bytes(b"not lmdb" * 512)
        workspace.configure([project], ByteTokenizer(), NgramSettings(db=str(broken)))
        assert workspace.ngrams() is None
        assert client.messages and client.messages[0][0] == "warning" and str(broken) in client.messages[0][1]
    finally:
        workspace.close()


def test_a_base_store_is_mixed_under_the_workspace(project: Path) -> None:
    tokenizer = ByteTokenizer()
    with NgramStore.open(base_store_path(), tokenizer_identity(tokenizer)) as base:
        base.add_file("/lib/x.py", tokenizer.encode("import os\n"), content_hash="h", size=10, mtime=0.0)
    workspace = Workspace(Recorder())
    try:
        workspace.configure([project], tokenizer, NgramSettings())
        mixed = workspace.ngrams()
        assert isinstance(mixed, LayeredNgrams)
        assert [weight for _, weight in mixed.layers] == pytest.approx([0.7, 0.3])
        context, candidates = tokenizer.encode("import o"), [tokenizer.encode("s")]
        assert mixed.p_ngram([context], candidates, {2: 0.5, 3: 0.5})[0][0] > 0  # seen only in the base
    finally:
        workspace.close()
