"""kill -9 an indexing process at random moments: the store stays consistent and a rerun finishes it."""

from __future__ import annotations

import random
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from ngram_db.indexer import content_hash
from ngram_db.store import NgramStore

from tests.ngram_support import BYTES, assert_store_equals, encode

CHILD = textwrap.dedent("""
    import sys
    from pathlib import Path
    from ngram_db.indexer import IndexOptions, Indexer
    from ngram_db.store import NgramStore
    sys.path.insert(0, {tests!r})
    from tests.ngram_support import BYTES, encode
    with NgramStore.open({store!r}, BYTES) as store:
        print("open", flush=True)
        Indexer(store, encode, [Path({root!r})], IndexOptions(batch_bytes=6000)).index(
            progress=lambda _: print("committed", flush=True))
    print("done", flush=True)
""")


def test_kill_9_mid_indexing_leaves_a_consistent_resumable_store(tmp_path):
    rng = random.Random(7)
    root, store_path = tmp_path / "ws", tmp_path / "store"
    for i in range(150):
        words = " ".join(f"w{rng.randrange(50)}" for _ in range(rng.randrange(200, 600)))
        (root / f"d{i % 7}").mkdir(parents=True, exist_ok=True)
        (root / f"d{i % 7}" / f"f{i}.py").write_text(words + "\n")
    code = CHILD.format(tests=str(Path(__file__).parents[2]), store=str(store_path), root=str(root))
    killed_with_partial_store = 0
    for _ in range(5):
        child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
        assert child.stdout.readline().strip() == "open"
        for _ in range(rng.randrange(1, 6)):  # let a few batches commit, then kill at a random moment
            child.stdout.readline()
        time.sleep(rng.uniform(0.0, 0.01))
        child.kill()  # SIGKILL: no cleanup of any kind
        child.wait()
        child.stdout.close()
        with NgramStore.open(store_path, BYTES) as store:
            records = store.files()
            for path, info in records.items():  # every recorded file is recorded as it is on disk
                assert info.content_hash == content_hash(Path(path).read_bytes())
            assert_store_equals(store, [encode(Path(p).read_text()) for p in records])
            killed_with_partial_store += 0 < len(records) < 150
    assert killed_with_partial_store >= 3  # the kills landed mid-run
    finished = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert finished.stdout.split()[-1] == "done", finished.stderr
    with NgramStore.open(store_path, BYTES) as store:
        assert len(store.files()) == 150
        assert store.verify() == []


def test_command_line_indexer_and_server_write_the_same_store_at_once(tmp_path):
    """Another process indexes one root while this one writes files of another: both land, exactly."""
    rng = random.Random(3)
    root, store_path = tmp_path / "cli", tmp_path / "store"
    root.mkdir()
    for i in range(60):
        (root / f"c{i}.py").write_text(" ".join(f"w{rng.randrange(30)}" for _ in range(400)) + "\n")
    code = CHILD.format(tests=str(Path(__file__).parents[2]), store=str(store_path), root=str(root))
    with NgramStore.open(store_path, BYTES) as store:
        child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
        assert child.stdout.readline().strip() == "open"
        mine: dict[str, list[int]] = {}
        for i in range(40):  # the server's saves, interleaved with the child's batches
            tokens = encode(" ".join(f"w{rng.randrange(30)}" for _ in range(50)))
            mine[f"/server/s{i % 10}.py"] = tokens
            store.update_file(f"/server/s{i % 10}.py", tokens, content_hash="", size=0, mtime=0)
            assert store.p_ngram([tokens[:5]], [[tokens[5]]], {2: 1.0})[0][0] > 0  # reads meanwhile
        child.stdout.read()
        child.stdout.close()
        assert child.wait(timeout=120) == 0
        cli = {str(p): encode(p.read_text()) for p in root.iterdir()}
        assert set(store.files()) == set(mine) | set(cli)
        assert_store_equals(store, list(mine.values()) + list(cli.values()))
