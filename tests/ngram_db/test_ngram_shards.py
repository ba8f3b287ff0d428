"""Exact shards of an n-gram store: routing, equality with one store, the atomic swap,
and the distributed (Ray Data) build."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import threading
import zlib
from pathlib import Path

import numpy as np
import pytest

from ngram_db.counting import encode_keys
from ngram_db.errors import StoreError, TokenizerMismatchError
from ngram_db.indexer import IndexOptions, Indexer
from ngram_db.layered import LayeredNgrams
from ngram_db.lookup import CONTEXT
from ngram_db.source import TokenizerId
from ngram_db.shards import (CURRENT, BUILDS, ShardedStore, build_from_sequences, current_build, open_readonly,
                             shard_of, shards_of)
from ngram_db.store import FileChange, NgramStore

from tests.ngram_support import BYTES, encode

WEIGHTS = {2: 0.01, 3: 0.04, 4: 0.15, 5: 0.18, 6: 0.12}


def corpus(seed: int, files: int = 40, vocabulary: int = 30) -> list[list[int]]:
    """Token sequences with repeats (contexts with more than 16 continuations too)."""
    rng = random.Random(seed)
    return [[rng.randrange(vocabulary) for _ in range(rng.randrange(0, 400))] for _ in range(files)]


def single_store(path: Path, sequences) -> NgramStore:
    store = NgramStore.open(path, BYTES)
    store.apply([FileChange(f"f{i}", tokens) for i, tokens in enumerate(sequences)])
    return store


def queries(sequences, k: int, steps: int, seed: int):
    rng = random.Random(seed)
    out = []
    for _ in range(steps):
        contexts, candidates = [], []
        for _ in range(k):
            seq = rng.choice([s for s in sequences if len(s) > 8])
            i = rng.randrange(1, len(seq))
            contexts.append(seq[max(0, i - rng.randrange(1, 9)) : i] if rng.random() < 0.9 else [99, 98, 97])
            candidates.append([seq[i]] + [rng.randrange(40) for _ in range(8)])
        out.append((contexts, candidates))
    return out


def test_the_vectorised_shard_hash_is_zlibs_crc32_of_the_context_key():
    rng = np.random.default_rng(0)
    for order in (2, 3, 6):
        contexts = rng.integers(0, 2**32 - 1, size=(500, order - 1), dtype=np.uint64).astype(np.uint32)
        keys = encode_keys(CONTEXT, order, contexts)
        for count in (1, 2, 5, 7):
            assert shards_of(order, contexts, count).tolist() == [shard_of(k.tobytes(), count) for k in keys]
    assert shard_of(b"X\x02\x00\x00\x00\x01", 5) == zlib.crc32(b"X\x02\x00\x00\x00\x01") % 5  # stable, not hash()


@pytest.mark.parametrize("shards", [1, 2, 5])
def test_in_process_shards_hold_the_single_store_records_each_in_its_shard(tmp_path, shards):
    sequences = corpus(1)
    with single_store(tmp_path / "one", sequences) as one, \
            ShardedStore(_built(tmp_path / "sharded", sequences, shards), BYTES) as sharded:
        assert sorted(sharded.records()) == list(one.records())
        snapshot = sharded._snapshot
        for index, store in enumerate(snapshot.stores):
            meta = store.meta()
            assert (meta["shard_index"], meta["shard_count"], meta["tokenizer_fingerprint"]) == (
                index, shards, BYTES.fingerprint)
            assert all(shard_of(key, shards) == index for key, _ in store.records())


def _built(root: Path, sequences, shards: int) -> Path:
    build_from_sequences(root, sequences, BYTES, shards=shards)
    return root


@pytest.mark.parametrize("shards", [1, 4])
def test_sharded_p_ngram_and_counts_equal_the_unsharded_store(tmp_path, shards):
    sequences = corpus(2, vocabulary=12)
    with single_store(tmp_path / "one", sequences) as one, \
            ShardedStore(_built(tmp_path / "sharded", sequences, shards), BYTES) as sharded:
        for k in (3, 8):
            for contexts, candidates in queries(sequences, k, 60, seed=k):
                assert sharded.p_ngram(contexts, candidates, WEIGHTS) == one.p_ngram(contexts, candidates, WEIGHTS)
        for gram in ([1, 2], [3, 4, 5], [0, 1, 2, 3, 4, 5], [77, 1]):
            assert sharded.count(gram) == one.count(gram)
        workspace = single_store(tmp_path / "ws", corpus(3, vocabulary=12))
        with workspace:
            contexts, candidates = queries(sequences, 3, 1, seed=9)[0]
            layered = LayeredNgrams([(workspace, 0.7), (sharded, 0.3)]).p_ngram(contexts, candidates, WEIGHTS)
            assert layered == LayeredNgrams([(workspace, 0.7), (one, 0.3)]).p_ngram(contexts, candidates, WEIGHTS)


def test_a_decode_step_opens_at_most_one_read_transaction_per_shard(tmp_path, monkeypatch):
    sequences = corpus(4, vocabulary=8)
    with ShardedStore(_built(tmp_path / "sharded", sequences, 3), BYTES) as sharded:
        opened = []
        for store in sharded._snapshot.stores:
            original = store.read_transaction
            monkeypatch.setattr(store, "read_transaction",
                                lambda *, buffers=False, _o=original, _s=store: opened.append(_s) or _o(buffers=buffers))
        contexts, candidates = queries(sequences, 8, 1, seed=5)[0]
        sharded.p_ngram(contexts, candidates, WEIGHTS)
        assert 1 <= len(opened) <= 3 and len(set(map(id, opened))) == len(opened)


def test_a_new_build_is_swapped_in_while_readers_run(tmp_path):
    """Readers on other threads never fail, and the step after `current` moves reads the new build."""
    root = tmp_path / "sharded"
    old, new = [[1, 2, 3, 1, 2, 4]], [[1, 2, 5, 1, 2, 5, 1, 2, 5]]
    build_from_sequences(root, old, BYTES, shards=2)
    errors: list[BaseException] = []
    stop = threading.Event()
    with ShardedStore(root, BYTES) as sharded:
        def read() -> None:
            while not stop.is_set():
                try:
                    row = sharded.p_ngram([[1, 2]], [[3, 4, 5]], {3: 1.0})[0]
                    assert row in ([0.5, 0.5, 0.0], [0.0, 0.0, 1.0]), row
                except BaseException as error:  # noqa: BLE001 - collected for the assertion
                    errors.append(error)
                    return
        readers = [threading.Thread(target=read) for _ in range(3)]
        for thread in readers:
            thread.start()
        builds = []
        for i in range(6):
            builds.append(build_from_sequences(root, new if i % 2 == 0 else old, BYTES, shards=2 + i % 2))
            assert sharded.p_ngram([[1, 2]], [[3, 4, 5]], {3: 1.0})[0] == ([0.0, 0.0, 1.0] if i % 2 == 0
                                                                          else [0.5, 0.5, 0.0])
        stop.set()
        for thread in readers:
            thread.join(30)
        assert errors == []
        assert sharded.manifest.shard_count == 3
    assert current_build(root) == builds[-1]
    assert sorted(p.name for p in (root / BUILDS).iterdir()) == sorted(b.name for b in builds[-2:])
    assert os.readlink(root / CURRENT).startswith(BUILDS + "/")


def test_a_broken_new_build_keeps_the_old_one_answering(tmp_path):
    root = tmp_path / "sharded"
    build_from_sequences(root, [[1, 2, 3]], BYTES, shards=2)
    with ShardedStore(root, BYTES) as sharded:
        broken = build_from_sequences(root, [[1, 2, 4]], BYTES, shards=2)
        (broken / "manifest.json").chmod(0o600)
        (broken / "manifest.json").write_text("{not json")
        assert sharded.p_ngram([[1, 2]], [[3, 4]], {3: 1.0}) == [[1.0, 0.0]]


def test_open_errors_say_what_to_do(tmp_path):
    root = tmp_path / "sharded"
    build_from_sequences(root, [[1, 2, 3]], BYTES, shards=2)
    with pytest.raises(TokenizerMismatchError, match="rebuild"):
        ShardedStore(root, TokenizerId("other", "other-v1"))
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / CURRENT).symlink_to("builds/none")
    with pytest.raises(StoreError, match="spd-lsp index --base --engine ray"):
        ShardedStore(tmp_path / "empty", BYTES)
    assert isinstance(open_readonly(root, BYTES), ShardedStore)
    single_store(tmp_path / "plain", [[1, 2, 3]]).close()
    plain = open_readonly(tmp_path / "plain", BYTES)
    assert isinstance(plain, NgramStore) and plain.readonly
    plain.close()


# ---- the distributed build (Ray Data, a local 2-CPU cluster) -------------------------------


def byte_encoder():
    """The tests' tokenizer factory (runs on the Ray workers)."""
    return lambda texts: [encode(text) for text in texts]


@pytest.fixture(scope="module")
def ray_cluster():
    ray = pytest.importorskip("ray")
    tests = str(Path(__file__).parents[1])
    saved = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join([tests, str(Path(tests).parent)] + ([saved] if saved else []))
    ray.init(num_cpus=2, include_dashboard=False, object_store_memory=150 * 1024 * 1024, log_to_driver=False)
    yield ray
    ray.shutdown()
    if saved is None:
        os.environ.pop("PYTHONPATH", None)
    else:
        os.environ["PYTHONPATH"] = saved


@pytest.fixture(scope="module")
def sources(tmp_path_factory) -> Path:
    """A few thousand small files (and some that are never indexed)."""
    root = tmp_path_factory.mktemp("org")
    rng = random.Random(7)
    words = ["def", "self", "return", "x", "y", "(", ")", ":", "\n    ", "import", "np", "=", "+", "1", ","]
    for i in range(2500):
        path = root / f"repo{i % 7}" / f"pkg{i % 13}" / f"m{i}.py"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(" ".join(rng.choice(words) for _ in range(rng.randrange(0, 120))))
    (root / "repo0" / ".env").write_text("TOKEN=secret\n")
    (root / "repo1" / "blob.bin").write_bytes(b"\0\1\2")
    (root / "repo2" / "copy.py").write_text((root / "repo0" / "pkg0" / "m0.py").read_text())  # a duplicate
    return root


@pytest.fixture(scope="module")
def reference(sources, tmp_path_factory) -> list[tuple[bytes, bytes]]:
    """Every record of the single-process indexer's store of `sources`."""
    with NgramStore.open(tmp_path_factory.mktemp("single") / "store", BYTES) as store:
        Indexer(store, encode, [sources], IndexOptions()).index()
        return list(store.records())


def _ray_build(root: Path, sources: Path, shards: int):
    from ngram_db.distributed import build_with_ray

    return build_with_ray(root, [sources], byte_encoder, BYTES, shards=shards, workers=2)


@pytest.mark.ray
@pytest.mark.timeout(300)
@pytest.mark.parametrize("shards", [1, 2, 5])
def test_the_ray_build_equals_the_single_process_build(ray_cluster, sources, reference, tmp_path, shards):
    report = _ray_build(tmp_path / "base", sources, shards)
    with ShardedStore(tmp_path / "base", BYTES) as sharded:
        assert sorted(sharded.records()) == reference
        manifest = sharded.manifest
        assert manifest.shard_count == shards and len(manifest.sources) == report.files == 2501
        distinct = {content for content, _, _ in manifest.sources.values()}
        assert len(distinct) <= report.tokenized <= 2501  # equal contents share one cache entry
        assert report.shuffle_bytes > 0 and report.ngrams == sum(s["ngrams"] for s in manifest.shards)


@pytest.mark.ray
@pytest.mark.timeout(300)
def test_a_killed_worker_is_retried_and_the_build_is_still_exact(ray_cluster, sources, reference, tmp_path,
                                                                 monkeypatch):
    marker = tmp_path / "worker-killed"
    monkeypatch.setenv("SPD_NGRAM_FAULT_ONCE", str(marker))
    _ray_build(tmp_path / "base", sources, 2)
    assert marker.exists()  # a worker process did die mid-task
    with ShardedStore(tmp_path / "base", BYTES) as sharded:
        assert sorted(sharded.records()) == reference


@pytest.mark.ray
@pytest.mark.timeout(300)
def test_a_rerun_skips_unchanged_sources_and_rebuilds_a_changed_one(ray_cluster, sources, tmp_path_factory):
    tree = tmp_path_factory.mktemp("tree")
    for i in range(30):
        (tree / f"f{i}.py").write_text(f"value_{i} = compute({i}) + value_{i}\n" * (i + 1))
    root = tmp_path_factory.mktemp("rerun") / "base"
    first = _ray_build(root, tree, 2)
    assert first.tokenized == 30
    again = _ray_build(root, tree, 2)
    assert again.build is None and again.tokenized == 0 and current_build(root) == first.build
    (tree / "f3.py").write_text("changed = 1\n")
    changed = _ray_build(root, tree, 2)
    assert changed.build not in (None, first.build) and changed.tokenized == 1
    with NgramStore.open(tmp_path_factory.mktemp("single") / "store", BYTES) as single, \
            ShardedStore(root, BYTES) as sharded:
        Indexer(single, encode, [tree], IndexOptions()).index()
        assert sorted(sharded.records()) == list(single.records())
        assert sharded.manifest.sources[str(tree / "f3.py")][2] == len(b"changed = 1\n")
    empty = tmp_path_factory.mktemp("empty")
    assert _ray_build(empty / "base", empty, 3).files == 0
    with ShardedStore(empty / "base", BYTES) as nothing:
        assert list(nothing.records()) == [] and nothing.p_ngram([[1, 2]], [[3]], WEIGHTS) == [[0.0]]


def test_the_ray_engine_builds_only_a_base_store(tmp_path):
    result = subprocess.run([sys.executable, "-m", "spd_lsp.cli", "index", "--engine", "ray", str(tmp_path),
                             "--db", str(tmp_path / "db")], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and "--engine ray builds a base store: pass --base" in result.stderr


@pytest.mark.ray
@pytest.mark.integration
@pytest.mark.timeout(600)
def test_index_base_engine_ray_from_the_command_line_equals_the_local_index(tmp_path):
    """The real tokenizer on the workers, a local cluster started by the command itself."""
    tree = tmp_path / "tree"
    for i in range(40):
        (tree / f"pkg{i % 4}").mkdir(parents=True, exist_ok=True)
        (tree / f"pkg{i % 4}" / f"m{i}.py").write_text(f"def f{i}(x):\n    return x * {i} + f{i - 1}(x)\n" * 5)
    command = [sys.executable, "-m", "spd_lsp.cli", "index", "--base", str(tree), "--quiet"]
    sharded = subprocess.run(command + ["--engine", "ray", "--db", str(tmp_path / "sharded"), "--shards", "3",
                                        "--workers", "2"], capture_output=True, text=True, timeout=500)
    assert sharded.returncode == 0, sharded.stderr[-3000:]
    assert "published" in sharded.stdout and "40 files" in sharded.stdout
    single = subprocess.run(command + ["--db", str(tmp_path / "single")], capture_output=True, text=True, timeout=300)
    assert single.returncode == 0, single.stderr[-3000:]
    from spd_lsp.engine.model import load_tokenizer
    from spd_lsp.tokens import tokenizer_identity

    identity = tokenizer_identity(load_tokenizer(None))
    with NgramStore.open(tmp_path / "single", identity, readonly=True) as one, \
            ShardedStore(tmp_path / "sharded", identity) as three:
        assert sorted(three.records()) == list(one.records()) and three.manifest.shard_count == 3


def test_the_shard_modules_import_neither_torch_pygls_nor_ray():
    probe = ("import sys, ngram_db.shards, ngram_db.distributed; "
             "print(sorted(m for m in ('torch', 'pygls', 'ray', 'transformers') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert result.stdout.strip() == "[]", result.stderr
