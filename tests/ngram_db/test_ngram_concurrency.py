"""The store under concurrent readers and a growing map (issue 10, item 3)."""

from __future__ import annotations

from spd_lsp.api import DecodeRequest
import threading

import pytest

from ngram_db import envs
from ngram_db.errors import StoreError
from ngram_db.guarded import GuardedNgrams
from ngram_db.store import NgramStore

from tests.ngram_support import BYTES, encode, noisy_text


def test_map_growth_never_fails_a_concurrent_reader(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(envs, "INITIAL_MAP_SIZE", 1 << 16)  # force many resizes while the reader runs
    failures: list[BaseException] = []
    lookups = 0
    done = threading.Event()
    with NgramStore.open(tmp_path / "store", BYTES) as store:
        store.add_file("/w/seed.py", encode("def alpha(): return 1\n"), content_hash="h", size=1, mtime=0.0)
        context, candidates = encode("def al"), [encode("p")]

        def reader() -> None:
            nonlocal lookups
            while not done.is_set():
                try:
                    assert store.p_ngram([context], candidates, {2: 0.5, 3: 0.5})[0][0] > 0
                except BaseException as error:  # noqa: BLE001 - counted, the test reports them
                    failures.append(error)
                lookups += 1

        thread = threading.Thread(target=reader)
        thread.start()
        try:
            for i in range(60):  # each file's random-ish bytes add thousands of contexts
                store.add_file(f"/w/f{i}.py", encode(noisy_text(i, 3000)), content_hash=str(i), size=1, mtime=0.0)
        finally:
            done.set()
            thread.join(30)
        assert store._shared.env.info()["map_size"] > 1 << 16  # the map did grow
    assert lookups > 0
    assert failures == [], f"{len(failures)} of {lookups} lookups failed, first: {failures[0]!r}"


class Broken:
    def p_ngram(self, contexts, candidates, weights):
        raise StoreError("n-gram store at /x is unreadable")


def test_a_store_error_during_decoding_degrades_to_unseen_counts() -> None:
    guarded = GuardedNgrams(Broken())
    assert guarded.p_ngram([[1, 2], [3]], [[4, 5], [6]], {2: 1.0}) == [[0.0, 0.0], [0.0]]
    assert guarded.failures == 1


def test_a_store_closed_under_the_engine_still_gives_drafts(tmp_path) -> None:
    from spd_lsp.api import DecodeOptions
    from spd_lsp.engine.local import LocalEngine
    from tests.tiny_models import tiny_model

    engine = LocalEngine(tiny_model("llama"))
    store = NgramStore.open(tmp_path / "store", BYTES)
    store.add_file("/w/a.py", encode("def add(a, b):\n"), content_hash="h", size=1, mtime=0.0)
    store.close()  # what a reconfiguration does while a request is decoding
    with pytest.raises(StoreError):
        store.p_ngram([[1, 2]], [[3]], {2: 1.0})
    engine.set_ngrams(GuardedNgrams(store))
    result = engine.complete(DecodeRequest("def add(a, b):\n    return", DecodeOptions(method="superposed", k=3, alpha=0.5,
                                                                        max_tokens=4)))
    assert result.drafts and all(d.token_ids for d in result.drafts)  # an answer, not an exception
