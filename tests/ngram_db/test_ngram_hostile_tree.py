"""Hostile workspaces: links out of the root, unreadable directories, huge trees, secrets,
and a rescan asked to stop (issue 10, items 4, 15, 16, 17, 20)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ngram_db.indexer import IndexCancelled, IndexOptions, Indexer, IndexTooLargeError
from ngram_db.paths import broad_root
from ngram_db.store import NgramStore

from tests.ngram_support import BYTES, encode, store, stored_names  # noqa: F401 - store is a fixture


def test_links_whose_target_is_outside_the_root_are_never_read(tmp_path, store) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "passwd").write_text("root:x:0:0:root:/root:/bin/bash\n")
    (outside / "lib").mkdir()
    (outside / "lib" / "mod.py").write_text("secret = 1\n")
    root = tmp_path / "ws"
    (root / "app").mkdir(parents=True)
    (root / "app" / "main.py").write_text("print(1)\n")
    (root / "app" / "passwd_link.py").symlink_to(outside / "passwd")
    (root / "app" / "inner_link.py").symlink_to(root / "app" / "main.py")  # inside: fine
    (root / ".env").write_text("TOKEN=abc\n")
    (root / "env_link.py").symlink_to(root / ".env")  # inside, but to a secret: no
    indexer = Indexer(store, encode, [root])
    indexer.index()
    assert stored_names(store, root) == {"app/main.py", "app/inner_link.py"}
    assert indexer.update_path(root / "app" / "passwd_link.py") is False  # the watcher's path: same rule
    assert not indexer.is_indexable(root / "app" / "passwd_link.py")
    assert "root:x" not in "".join(map(chr, (t for p in store.files() for t in store.file_record(p).tokens)))


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads unreadable directories")
def test_an_unreadable_directory_is_skipped_with_a_log_line(tmp_path, store, caplog) -> None:
    root = tmp_path / "ws"
    (root / "locked" / "sub").mkdir(parents=True)
    (root / "locked" / "sub" / "x.py").write_text("x = 1\n")
    (root / "ok.py").write_text("y = 2\n")
    os.chmod(root / "locked", 0o000)
    try:
        Indexer(store, encode, [root]).index()
    finally:
        os.chmod(root / "locked", 0o700)
    assert stored_names(store, root) == {"ok.py"}
    assert "locked" in caplog.text


def test_an_unreadable_directory_is_skipped_even_as_root(tmp_path, store, monkeypatch, caplog) -> None:
    """The same, by making the listing and the pyvenv.cfg probe raise EACCES (root bypasses modes)."""
    root = tmp_path / "ws"
    (root / "locked" / "sub").mkdir(parents=True)
    (root / "locked" / "sub" / "x.py").write_text("x = 1\n")
    (root / "ok.py").write_text("y = 2\n")
    real_stat, real_scandir = os.stat, os.scandir
    locked = str(root / "locked")

    def stat(path, *args, **kwargs):
        if str(path).startswith(locked + os.sep):
            raise PermissionError(13, "Permission denied", str(path))
        return real_stat(path, *args, **kwargs)

    def scandir(path="."):
        if str(path).startswith(locked):
            raise PermissionError(13, "Permission denied", str(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "stat", stat)
    monkeypatch.setattr(os, "scandir", scandir)
    Indexer(store, encode, [root]).index()
    monkeypatch.undo()
    assert stored_names(store, root) == {"ok.py"}
    assert "locked" in caplog.text


def test_a_tree_over_the_caps_is_refused_before_anything_is_read(tmp_path, store) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    for i in range(30):
        (root / f"f{i}.py").write_text("x = 1\n" * 10)
    with pytest.raises(IndexTooLargeError, match="more than 20 files"):
        Indexer(store, encode, [root], IndexOptions(max_files=20)).index()
    with pytest.raises(IndexTooLargeError, match="more than 1,000 bytes"):
        Indexer(store, encode, [root], IndexOptions(max_total_bytes=1000)).index()
    assert store.stats().files == 0
    Indexer(store, encode, [root], IndexOptions(max_files=30)).index()
    assert store.stats().files == 30


def test_home_and_the_filesystem_root_are_broad_roots(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    assert "filesystem root" in broad_root(Path("/"))
    assert "home directory" in broad_root(tmp_path)
    assert broad_root(tmp_path.parent) is not None  # above home: contains it
    assert broad_root(tmp_path / "project") is None


@pytest.mark.parametrize("name", ["kubeconfig", ".kube/config", ".dockercfg", "token.txt", "api_token.txt",
                                  "client_secret.py", "my-secrets.yaml", ".pgpass", "deploy/kubeconfig.yaml"])
def test_more_secret_names_are_skipped(tmp_path, store, name) -> None:
    root = tmp_path / "ws"
    (root / name).parent.mkdir(parents=True, exist_ok=True)
    (root / name).write_text("hunter2\n")
    (root / "main.py").write_text("print(1)\n")
    Indexer(store, encode, [root]).index()
    assert stored_names(store, root) == {"main.py"}


def test_a_cancelled_index_stops_between_batches_and_removes_nothing(tmp_path, store) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    for i in range(10):
        (root / f"f{i}.py").write_text(f"value_{i} = {i}\n" * 20)
    indexer = Indexer(store, encode, [root], IndexOptions(batch_bytes=1))
    indexer.index()
    for i in range(10):
        (root / f"f{i}.py").write_text(f"changed_{i} = {i}\n" * 20)
    (root / "new.py").write_text("new = 1\n")
    batches = []
    with pytest.raises(IndexCancelled):
        indexer.index(progress=batches.append, cancelled=lambda: len(batches) >= 2)
    assert 2 <= len(batches) <= 3  # stopped at the next batch boundary
    assert store.stats().files == 10 or store.stats().files == 11  # nothing was dropped as "gone"
    assert store.verify() == []
    indexer.index()
    assert store.stats().files == 11
