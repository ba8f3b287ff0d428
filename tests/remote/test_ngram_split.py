"""The n-gram split between front end and engine: what a `complete` frame's `ngrams` opens,
and the local re-ranking of a remote engine's drafts."""

from __future__ import annotations

from pathlib import Path

import pytest

from ngram_db.guarded import GuardedNgrams
from ngram_db.layered import LayeredNgrams
from ngram_db.memory import MemoryNgrams
from ngram_db.store import NgramStore
from spd_lsp.api import DecodeOptions, Draft
from spd_lsp.remote import protocol
from spd_lsp.remote.client import rerank, store_layers
from spd_lsp.remote.server import Stores
from tests.ngram_support import BYTES, encode

WEIGHTS = DecodeOptions().ngram_weights


@pytest.fixture()
def store(tmp_path: Path) -> NgramStore:
    with NgramStore.open(tmp_path / "ws", BYTES) as writer:
        writer.add_file("a.py", encode("return total_count\n" * 3), content_hash="h", size=1, mtime=0.0)
    opened = NgramStore.open(tmp_path / "ws", BYTES)
    yield opened
    opened.close()


def test_the_workspace_source_is_described_by_store_paths(store: NgramStore, tmp_path: Path) -> None:
    other = MemoryNgrams.from_sequences([[1, 2, 3]])
    source = GuardedNgrams(LayeredNgrams([(store, 0.7), (store, 0.3)]))
    assert store_layers(source) == [{"path": str(store.path), "weight": 0.7}, {"path": str(store.path), "weight": 0.3}]
    assert store_layers(LayeredNgrams([(store, 1.0), (other, 1.0)])) is None  # not describable: sent as nothing


def test_a_local_engine_reads_the_same_probabilities_by_path(store: NgramStore) -> None:
    stores = Stores(BYTES, None)
    try:
        opened = stores.source({"stores": [{"path": str(store.path), "weight": 1.0}]}, local=True)
        contexts, candidates = [encode("return total_")], [encode("c")]
        assert opened.p_ngram(contexts, candidates, WEIGHTS) == store.p_ngram(contexts, candidates, WEIGHTS)
        assert stores.store(str(store.path)).readonly
    finally:
        stores.close()


def test_document_ngrams_alone_are_the_whole_ngram_term() -> None:
    document = encode("value = compute_value(x)\nvalue = compute_")
    source = Stores(BYTES, None).source({"stores": [], "document": {"sequences": [document], "weight": 0.5}},
                                        local=False)
    context = encode("compute_")
    exact = MemoryNgrams.from_sequences([document]).p_ngram([context], [encode("v")], WEIGHTS)
    assert source.p_ngram([context], [encode("v")], WEIGHTS)[0] == pytest.approx(exact[0])


@pytest.mark.parametrize("bad", [{"stores": "x"}, {"stores": [{"path": 3}]}, {"document": {"sequences": "ab"}},
                                 {"document": {"sequences": [[1]], "weight": 2}}, ["stores"]])
def test_bad_ngram_descriptions_are_bad_requests(bad) -> None:
    with pytest.raises(protocol.ProtocolError) as caught:
        Stores(BYTES, None).source(bad, local=True)
    assert caught.value.code == protocol.BAD_REQUEST


def test_rerank_prefers_the_draft_the_workspace_knows(store: NgramStore) -> None:
    prompt = encode("    return ")
    unknown = Draft("zq_x", encode("zq_x"), score=-0.50)
    known = Draft("total_count", encode("total_count"), score=-0.60)
    ranked = rerank([unknown, known], store, prompt, DecodeOptions())
    assert [d.text for d in ranked] == ["total_count", "zq_x"]
    assert ranked[1].score == unknown.score  # nothing seen: no bonus
