"""The LMDB store against a brute-force recount, under random edits (real LMDB)."""

from __future__ import annotations

import subprocess
import sys
import tempfile
import textwrap

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from ngram_db import TokenizerId
from ngram_db.errors import StoreCorruptError, StoreError, StoreLockedError, StoreReadOnlyError, TokenizerMismatchError
from ngram_db.layered import LayeredNgrams
from ngram_db.memory import MemoryNgrams
from ngram_db import envs
from ngram_db.store import FileChange, NgramStore

from tests.ngram_support import BYTES, assert_store_equals

PATHS = ["/w/a.py", "/w/b.py", "/w/c.py"]
tokens = st.lists(st.integers(0, 5), max_size=40)  # tiny vocabulary: ties and shared contexts everywhere
operations = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.sampled_from(PATHS), tokens),
        st.tuples(st.just("remove"), st.sampled_from(PATHS), st.none()),
        st.tuples(st.just("rename"), st.sampled_from(PATHS), st.sampled_from(PATHS)),
        st.tuples(st.just("batch"), st.sampled_from(PATHS), st.lists(tokens, min_size=1, max_size=3)),
    ),
    max_size=25,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=operations, top_n=st.sampled_from([1, 2, 4]))
def test_random_edits_keep_counts_and_top_n_exact(ops, top_n):
    files: dict[str, list[int]] = {}
    with tempfile.TemporaryDirectory() as tmp, NgramStore.open(tmp, BYTES, top_n=top_n) as store:
        for op, path, arg in ops:
            if op == "add":
                store.update_file(path, arg, content_hash=str(hash(tuple(arg))), size=len(arg), mtime=1.0)
                files[path] = arg
            elif op == "remove":
                store.remove_file(path)
                files.pop(path, None)
            elif op == "rename":
                assert store.rename_file(path, arg) == (path in files)
                if path in files:
                    files[arg] = files.pop(path)
            else:  # several versions of one file in one transaction: the last one counts
                store.apply([FileChange(path, version) for version in arg])
                files[path] = arg[-1]
            assert_store_equals(store, files.values())
        assert store.verify() == []
        assert store.stats().files == len(files)
        assert store.stats().tokens == sum(map(len, files.values()))
        assert store.stats().ngrams == len(dict(store.iter_counts()))
        assert {p: list(store.file_record(p).tokens) for p in files} == files


@settings(max_examples=40, deadline=None)
@given(
    texts=st.lists(st.lists(st.integers(0, 6), max_size=30), min_size=1, max_size=4),
    contexts=st.lists(st.lists(st.integers(0, 6), max_size=8), min_size=1, max_size=8),
    weights=st.fixed_dictionaries({n: st.floats(0, 1) for n in (2, 3, 4, 5, 6)}),
)
def test_p_ngram_equals_the_definition(texts, contexts, weights):
    candidates = [[0, 1, 2, 3, 4, 5, 6, 7, 3] for _ in contexts]
    expected = MemoryNgrams.from_sequences(texts).p_ngram(contexts, candidates, weights)
    with tempfile.TemporaryDirectory() as tmp, NgramStore.open(tmp, BYTES, top_n=2) as store:
        for i, text in enumerate(texts):
            store.add_file(f"/f{i}", text, content_hash="", size=0, mtime=0)
        got = store.p_ngram(contexts, candidates, weights)
    assert [len(row) for row in got] == [len(row) for row in expected]
    assert sum(got, []) == pytest.approx(sum(expected, []), abs=1e-12)


def test_layered_mixes_sources_with_their_weights():
    a = MemoryNgrams.from_sequences([[1, 2, 1, 3]])
    b = MemoryNgrams.from_sequences([[1, 3, 1, 3]])
    w = {2: 1.0}
    mixed = LayeredNgrams([(a, 0.7), (b, 0.3)]).p_ngram([[1]], [[2, 3]], w)
    assert mixed[0] == pytest.approx([0.7 * 0.5, 0.7 * 0.5 + 0.3 * 1.0])


def test_tokenizer_mismatch_is_refused(tmp_path):
    NgramStore.open(tmp_path, BYTES).close()
    with pytest.raises(TokenizerMismatchError, match="utf-8 bytes.*not of 'other'.*spd-lsp index"):
        NgramStore.open(tmp_path, TokenizerId("other", "f00"))


def test_orders_and_n_come_from_the_store(tmp_path):
    NgramStore.open(tmp_path, BYTES, orders=(2, 3), top_n=3).close()
    with NgramStore.open(tmp_path, BYTES) as store:
        assert (store.orders, store.top_n) == ((2, 3), 3)


def test_corrupt_store_says_so(tmp_path):
    (tmp_path / "data.mdb").write_bytes(b"this is not lmdb" * 1000)
    with pytest.raises(StoreCorruptError, match="unreadable.*delete that directory"):
        NgramStore.open(tmp_path, BYTES)


def test_missing_store_read_only_is_a_clear_error(tmp_path):
    with pytest.raises(StoreError, match="no n-gram store.*spd-lsp index"):
        NgramStore.open(tmp_path / "none", BYTES, readonly=True)
    assert not (tmp_path / "none").exists()


def test_read_only_store_refuses_writes_but_reads(tmp_path):
    with NgramStore.open(tmp_path, BYTES) as writer:
        writer.add_file("/a", [1, 2, 3], content_hash="h", size=3, mtime=0)
        with NgramStore.open(tmp_path, BYTES, readonly=True) as reader:
            assert reader.count([1, 2]) == 1
            with pytest.raises(StoreReadOnlyError, match="read-only"):
                reader.remove_file("/a")
        assert writer.count([2, 3]) == 1  # closing the shared reader kept the writer's environment


def test_one_environment_per_path_per_process(tmp_path):
    with NgramStore.open(tmp_path, BYTES) as one, NgramStore.open(tmp_path / ".", BYTES) as two:
        assert one._shared is two._shared
        one.add_file("/a", [1, 2], content_hash="h", size=2, mtime=0)
        assert two.count([1, 2]) == 1


def test_writer_held_elsewhere_times_out_clearly(tmp_path):
    NgramStore.open(tmp_path, BYTES).close()
    holder = subprocess.Popen([sys.executable, "-c", textwrap.dedent(f"""
        import fcntl, os, sys, time
        fd = os.open({str(tmp_path / 'writer.lock')!r}, os.O_RDWR)
        fcntl.flock(fd, fcntl.LOCK_EX); os.pwrite(fd, str(os.getpid()).encode(), 0)
        print("held", flush=True); time.sleep(30)
    """)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with NgramStore.open(tmp_path, BYTES, readonly=True) as reader:  # readers are never blocked
            assert reader.stats().files == 0
        with pytest.raises(StoreLockedError, match=f"pid {holder.pid}"):
            NgramStore.open(tmp_path, BYTES, lock_timeout=0.3).add_file("/a", [1, 2], content_hash="", size=0, mtime=0)
    finally:
        holder.kill()
        holder.wait()
        holder.stdout.close()


def test_map_grows_when_full(tmp_path, monkeypatch):
    monkeypatch.setattr(envs, "INITIAL_MAP_SIZE", 256 * 1024)
    with NgramStore.open(tmp_path, BYTES) as store:
        sequence = list(range(20000))
        store.add_file("/big", sequence, content_hash="", size=0, mtime=0)
        assert store.count([100, 101, 102, 103, 104, 105]) == 1
        assert store._shared.env.info()["map_size"] > 256 * 1024


def test_rebuild_empties_a_store_in_place_while_another_handle_reads_it(tmp_path):
    other = TokenizerId("other", "other-v1")
    reader = NgramStore.open(tmp_path, BYTES)
    reader.add_file("/w/a.py", [1, 2, 3, 1, 2], content_hash="h", size=5, mtime=0.0)
    try:
        with pytest.raises(TokenizerMismatchError):
            NgramStore.open(tmp_path, other, rebuild="no")
        with NgramStore.open(tmp_path, BYTES, rebuild="foreign") as same:  # same tokenizer: kept
            assert same.stats().files == 1
        with NgramStore.open(tmp_path, other, rebuild="foreign", orders=(2, 3)) as rebuilt:
            assert rebuilt.stats().files == 0 and rebuilt.orders == (2, 3)
            rebuilt.add_file("/w/b.py", [7, 8, 9], content_hash="h", size=3, mtime=0.0)
        assert (tmp_path / "data.mdb").exists()  # the directory was never deleted
        with NgramStore.open(tmp_path, other, rebuild="always") as emptied:
            assert emptied.stats().files == 0 and emptied.verify() == []
    finally:
        reader.close()
