"""The batch's slot cache: rows joining, leaving, widening and compacted answer what each
request's own cache answers, and a membership change copies the changed rows only."""

from __future__ import annotations

from spd_lsp.api import DecodeRequest
import copy
import threading
from dataclasses import dataclass, field

import pytest
import torch
from transformers import DynamicCache

from spd_lsp.engine.decoding.lm import ModelRunner
from spd_lsp.engine.decoding import slots
from spd_lsp.engine.decoding.slots import BatchCache
from tests.tiny_models import LLAMA_BACKENDS, tiny_model


@dataclass
class Parents:
    rows: list[int] = field(default_factory=lambda: [0])

    def parents(self) -> list[int]:
        return self.rows


@dataclass(eq=False)
class Request:
    """A batch member as `BatchCache` sees it, plus its own cache to check against."""

    length: int
    prompt_rows: list
    own: DynamicCache
    state: Parents = field(default_factory=Parents)
    rows: int = 1


@pytest.fixture(scope="module", params=LLAMA_BACKENDS)
def runner(request) -> ModelRunner:
    torch.set_num_threads(1)
    loaded = tiny_model(request.param)
    return ModelRunner(loaded.model, loaded.device, chunk_tokens=10_000)


def request(runner: ModelRunner, length: int, seed: int) -> Request:
    ids = torch.randint(3, 200, (1, length), generator=torch.Generator().manual_seed(seed))
    own = DynamicCache()
    runner.forward(own, ids=ids)
    rows = [(layer.keys.clone(), layer.values.clone()) for layer in own.layers]
    return Request(length, rows, own)


def step(runner: ModelRunner, batch: BatchCache, members: list[Request], seed: int) -> None:
    """One batch step of `members` against each one's own cache, fed the same embeddings."""
    inputs = runner.embed(torch.randint(3, 200, (sum(m.rows for m in members), 1),
                                        generator=torch.Generator().manual_seed(seed)))
    got = batch.forward(members, inputs)
    row = 0
    for member in members:
        for r in range(member.rows):
            alone = runner.forward(member.own, embeds=inputs[row : row + 1])
            torch.testing.assert_close(got[row], alone[0], rtol=1e-4, atol=1e-4)
            row += 1


def test_joining_leaving_widening_and_compacting_rows_answer_as_alone(runner, monkeypatch) -> None:
    monkeypatch.setattr(slots, "COLUMN_MARGIN", 2)  # compact soon
    batch = BatchCache(runner)
    a, b, c = request(runner, 12, 1), request(runner, 5, 2), request(runner, 20, 3)
    members = [a, b]
    for i in range(3):
        step(runner, batch, members, seed=10 + i)
    members = [b, c, a]  # c joins wider than the batch: every row gets holes
    for i in range(3):
        step(runner, batch, members, seed=20 + i)
    members = [c, a]  # b leaves: the last row (a) fills its gap
    step(runner, batch, members, seed=30)
    assert batch.order == [a, c] or batch.order == [c, a]
    d = request(runner, 3, 4)
    members = [d, a, c]
    widths = []
    for i in range(40):  # short rows among holes: the columns are compacted, more than once
        step(runner, batch, members, seed=40 + i)
        widths.append(batch.width)
        if i == 5:
            members = [d]  # the long ones leave
    assert any(later < earlier for earlier, later in zip(widths, widths[1:])), widths
    assert batch.width <= 2 * d.length + slots.COLUMN_MARGIN + 1


def test_a_request_joining_or_leaving_copies_its_own_rows_only(runner) -> None:
    batch = BatchCache(runner)
    members = [request(runner, 8 + i, i) for i in range(6)]
    step(runner, batch, members, seed=1)
    joined = batch.rows_copied
    assert joined == 6
    step(runner, batch, members[:2] + members[3:], seed=2)  # one leaves from the middle
    assert batch.rows_copied - joined == 1  # the last row moved into its place; nothing else
    late = request(runner, 30, 9)
    step(runner, batch, members[:2] + members[3:] + [late], seed=3)
    assert batch.rows_copied - joined == 2  # and the joiner's own row


def test_a_forking_request_gathers_its_rows_and_the_others_stay_exact(runner) -> None:
    batch = BatchCache(runner)
    a, b = request(runner, 7, 1), request(runner, 11, 2)
    step(runner, batch, [a, b], seed=1)
    b_caches = [copy.deepcopy(b.own) for _ in range(3)]  # each of b's three rows continues its cache
    b.state = Parents([0, 0, 0])
    inputs = runner.embed(torch.randint(3, 200, (4, 1), generator=torch.Generator().manual_seed(5)))
    got = batch.forward([a, b], inputs)
    torch.testing.assert_close(got[0], runner.forward(a.own, embeds=inputs[0:1])[0], rtol=1e-4, atol=1e-4)
    for r in range(3):
        torch.testing.assert_close(got[1 + r], runner.forward(b_caches[r], embeds=inputs[1 + r : 2 + r])[0],
                                   rtol=1e-4, atol=1e-4)
    assert b.rows == 3 and batch.rows == 4


def test_an_idle_engine_frees_its_batch_buffers(monkeypatch) -> None:
    from spd_lsp.api import DecodeOptions
    from spd_lsp.engine.local import LocalEngine
    from spd_lsp.engine import batcher as batching

    monkeypatch.setattr(batching, "IDLE_RELEASE_S", 2.0)
    scheduler = batching.Batcher(LocalEngine(tiny_model("llama")))
    try:
        # Two at once (a request alone steps on its own runner's cache, as in process: no batch buffers)
        jobs = [scheduler.submit(batching.BatchJob(DecodeRequest(prefix, DecodeOptions(k=2, max_tokens=4))))
                for prefix in ("def add(a, b):\n    return", "def sub(a, b):\n    return")]
        for job in jobs:
            job.result(timeout=60)
        assert scheduler._batch.layers  # its rows' buffers, kept for the next request
        for _ in range(1000):
            if not scheduler._batch.layers:
                break
            threading.Event().wait(0.01)
        assert not scheduler._batch.layers and scheduler._batch.cache is None
    finally:
        scheduler.close()
