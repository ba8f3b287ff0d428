"""Continuous batching: concurrent superposed requests in one batch answer exactly what
each would alone; a request joining mid-way or cancelled mid-way disturbs no other."""

from __future__ import annotations

import threading

import pytest
import torch

from ngram_db.memory import MemoryNgrams
from spd_lsp.api import Cancelled, DecodeOptions, DecodeRequest, PromptContext
from spd_lsp.engine.local import LocalEngine
from spd_lsp.engine.batcher import BatchJob, Batcher
from bench.baselines import register as register_baselines
from tests.tiny_models import CORPUS, LLAMA_BACKENDS, tiny_model, tiny_tokenizer

register_baselines()  # nucleus_batched, the benchmarks' baseline: the engine decodes it where they run it

PREFIXES = [
    "for name in names:\n    if name",
    "def add(a, b):\n    return",
    "import os\nimport sys\nresult = os.path.join(root, name)\nclass Point:\n    def __init__(self, x",
    "class Point:\n    def",
]
OPTIONS = DecodeOptions(k=3, max_tokens=8, stop_at_newline=False)


@pytest.fixture(scope="module", params=LLAMA_BACKENDS)
def engine(request) -> LocalEngine:
    torch.set_num_threads(1)  # one thread: the same float summation order alone and batched
    return LocalEngine(tiny_model(request.param))


@pytest.fixture(scope="module")
def ngrams() -> MemoryNgrams:
    tokenizer = tiny_tokenizer()
    return MemoryNgrams.from_sequences([tokenizer.encode(t) for t in CORPUS[:4]], orders=(2, 3, 4))


def _texts(result) -> list[tuple[str, float]]:
    return [(d.text, round(d.score, 4)) for d in result.drafts]


@pytest.mark.parametrize("verify", [
    {"verify_rounds": 0}, {"verify_rounds": 1}, {"verify_rounds": 3, "verify_log_ratio": -0.5},
    {"verify_first": "keep", "verify_gate": None},
    {"verify_rounds": 1, "verify_repair": "continue", "verify_log_ratio": -0.5},  # decodes: verifies alone
])
def test_batched_answers_equal_single_answers_and_leavers_verify_in_one_forward(
        engine: LocalEngine, ngrams: MemoryNgrams, verify: dict) -> None:
    options = OPTIONS.but(**verify)
    alone = []
    for prefix in PREFIXES:
        engine.set_ngrams(ngrams)
        alone.append(_texts(engine.complete(DecodeRequest(prefix, options))))
    scheduler = Batcher(engine)
    try:  # a request that runs alone holds the model thread while the others queue: they join in one step
        blocker = scheduler.submit(BatchJob(DecodeRequest(PREFIXES[0], DecodeOptions.of(method="nucleus", k=2, max_tokens=8, seed=1))))
        jobs = [BatchJob(DecodeRequest(prefix, options), ngrams=ngrams, affinity=f"editor{i}") for i, prefix in enumerate(PREFIXES)]
        futures = [scheduler.submit(job) for job in jobs]
        blocker.result(timeout=60)
        together = [_texts(f.result(timeout=60)) for f in futures]
        counts = dict(scheduler.counts)
    finally:
        scheduler.close()
        engine.set_ngrams(None)
    assert together == alone and counts["maxBatched"] == len(PREFIXES)
    if options.verify_rounds and options.verify_repair != "continue":  # requests shared verification forwards
        assert counts["verifyRows"] >= len(PREFIXES) and counts["verifyForwards"] < counts["verifyRows"]


def test_requests_with_other_pools_and_temperatures_select_in_one_batch_as_alone(engine: LocalEngine) -> None:
    variants = [OPTIONS.but(alpha=0.0, **v) for v in
                ({}, {"candidate_pool": 4}, {"temperature": 0.7}, {}, {"candidate_pool": 4}, {"temperature": 0.7})]
    jobs = [(PREFIXES[i % len(PREFIXES)] + " " * (i // len(PREFIXES)), o) for i, o in enumerate(variants)]
    alone = [_texts(engine.complete(DecodeRequest(prefix, options))) for prefix, options in jobs]
    scheduler = Batcher(engine)
    try:
        blocker = scheduler.submit(BatchJob(DecodeRequest(PREFIXES[0], DecodeOptions.of(method="nucleus", k=2, max_tokens=8, seed=1))))
        futures = [scheduler.submit(BatchJob(DecodeRequest(prefix, options), affinity=str(i))) for i, (prefix, options) in enumerate(jobs)]
        blocker.result(timeout=60)
        together = [_texts(f.result(timeout=60)) for f in futures]
        assert scheduler.counts["maxBatched"] == len(jobs)
    finally:
        scheduler.close()
    assert together == alone


def test_joining_and_cancelled_requests_disturb_no_other(engine: LocalEngine) -> None:
    long = DecodeOptions(k=3, max_tokens=30, stop_at_newline=False, alpha=0.0)
    expected = _texts(engine.complete(DecodeRequest(PREFIXES[0], long)))
    late_expected = _texts(engine.complete(DecodeRequest(PREFIXES[1], OPTIONS)))
    scheduler = Batcher(engine)
    try:
        victim = BatchJob(DecodeRequest(PREFIXES[2], long), affinity="victim")
        first = BatchJob(DecodeRequest(PREFIXES[0], long), affinity="first")
        scheduler.submit(victim)
        scheduler.submit(first)
        while scheduler.counts["steps"] < 3:  # both are decoding
            threading.Event().wait(0.005)
        victim.cancel()
        late = BatchJob(DecodeRequest(PREFIXES[1], OPTIONS), affinity="late")  # joins a batch already at step >= 3
        scheduler.submit(late)
        with pytest.raises(Cancelled):
            victim.future.result(timeout=60)
        assert _texts(first.future.result(timeout=60)) == expected
        assert _texts(late.future.result(timeout=60)) == late_expected
        assert scheduler.counts["cancelled"] == 1
    finally:
        scheduler.close()


class WatchedJob(BatchJob):
    """A job that notes, at every cancel check before it joins (one before each prefill chunk), the batch steps so far."""

    def __init__(self, *args, scheduler: Batcher | None = None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.scheduler, self.seen = scheduler, []

    def cancelled(self) -> bool:
        if self.scheduler is not None and self.scheduler.counts["batched"] < 2:  # the other one has joined
            self.seen.append(self.scheduler.counts["steps"])
        return super().cancelled()


def test_a_cold_prompt_is_prefilled_a_chunk_between_steps_with_its_single_answer(engine: LocalEngine) -> None:
    long = DecodeOptions(k=3, max_tokens=40, stop_at_newline=False, alpha=0.0)
    cold = "\n".join(PREFIXES * 3)
    chunk, engine.runner.chunk_tokens = engine.runner.chunk_tokens, 8
    try:
        expected = [_texts(engine.complete(DecodeRequest(PREFIXES[0], long))), _texts(engine.complete(DecodeRequest(cold, OPTIONS)))]
        assert len(engine.encode(cold)) > 5 * 8  # several chunks
        scheduler = Batcher(engine)
        try:
            first = BatchJob(DecodeRequest(PREFIXES[0], long), affinity="first")
            scheduler.submit(first)
            while scheduler.counts["steps"] < 2:  # it is decoding
                threading.Event().wait(0.005)
            joining = WatchedJob(DecodeRequest(cold, OPTIONS), affinity="cold", scheduler=scheduler)
            scheduler.submit(joining)
            got = [_texts(first.future.result(timeout=60)), _texts(joining.future.result(timeout=60))]
        finally:
            scheduler.close()
    finally:
        engine.runner.chunk_tokens = chunk
    assert got == expected
    assert len(set(joining.seen)) >= 5, joining.seen  # its 6+ chunks ran between 5+ different steps


@pytest.mark.parametrize("method", ["beam", "nucleus_batched", "greedy"])
def test_batched_baselines_keep_k_rows_and_their_answers(engine: LocalEngine, method: str) -> None:
    options = DecodeOptions.of(method=method, k=3, max_tokens=6, stop_at_newline=False, seed=11)
    alone = [_texts(engine.complete(DecodeRequest(prefix, options))) for prefix in PREFIXES]
    mixed = DecodeOptions(k=3, max_tokens=9, stop_at_newline=False, alpha=0.0)  # SPD rows in the same batch
    spd_alone = _texts(engine.complete(DecodeRequest(PREFIXES[0], mixed)))
    scheduler = Batcher(engine)
    try:
        spd = scheduler.submit(BatchJob(DecodeRequest(PREFIXES[0], mixed), affinity="spd"))
        futures = [scheduler.submit(BatchJob(DecodeRequest(p, options), affinity=str(i))) for i, p in enumerate(PREFIXES)]
        together = [_texts(f.result(timeout=60)) for f in futures]
        assert _texts(spd.result(timeout=60)) == spd_alone
    finally:
        scheduler.close()
    assert together == alone and scheduler.counts["alone"] == 0 and scheduler.counts["maxBatched"] >= 2


def test_unbatchable_requests_run_alone_with_the_same_answer(engine: LocalEngine) -> None:
    options = DecodeOptions.of(method="nucleus", k=2, max_tokens=6, stop_at_newline=False, seed=3)
    expected = _texts(engine.complete(DecodeRequest(PREFIXES[0], options)))
    scheduler = Batcher(engine)
    try:
        got = scheduler.submit(BatchJob(DecodeRequest(PREFIXES[0], options))).result(timeout=60)
    finally:
        scheduler.close()
    assert _texts(got) == expected and scheduler.counts["alone"] == 1


def test_editors_typing_join_in_one_prefill_forward_with_their_single_answers(engine: LocalEngine) -> None:
    typed = ["s:", " a + b", "))", "(self"]
    expected = [_texts(engine.complete(DecodeRequest(prefix + more, OPTIONS))) for prefix, more in zip(PREFIXES, typed)]
    scheduler = Batcher(engine)
    try:
        for i, prefix in enumerate(PREFIXES):  # each editor's first request: its prompt cache, cold
            scheduler.submit(BatchJob(DecodeRequest(prefix, OPTIONS), affinity=f"editor{i}")).result(timeout=60)
        before = scheduler.counts["prefillForwards"]
        blocker = scheduler.submit(BatchJob(DecodeRequest(PREFIXES[0], DecodeOptions.of(method="nucleus", k=2, max_tokens=8, seed=1))))
        futures = [scheduler.submit(BatchJob(DecodeRequest(prefix + more, OPTIONS), affinity=f"editor{i}"))
                   for i, (prefix, more) in enumerate(zip(PREFIXES, typed))]
        blocker.result(timeout=60)
        together = [_texts(f.result(timeout=60)) for f in futures]
        counts = dict(scheduler.counts)
    finally:
        scheduler.close()
    assert together == expected
    assert counts["maxBatched"] == len(PREFIXES) and counts["prefillForwards"] - before == 1  # all joined in ONE


def test_editor_requests_with_their_context_batch_and_answer_as_alone() -> None:
    """Issue 22: an editor's request carries its suffix, path and language (and a fill-in-the-middle
    format lays the suffix out, with its end tokens stopping drafts); such requests used to run alone.
    Now they join the batch, and answer what each would alone, prompt description included."""
    from tests.engine.test_prompt_formats import family_engine

    torch.set_num_threads(1)  # the same float summation order alone and batched
    engine = family_engine("qwen")
    requests = [DecodeRequest(prefix, OPTIONS, context=PromptContext(suffix=f"\nprint({i})\n", filename=f"pkg/m{i}.py",
                                                                     language="python"))
                for i, prefix in enumerate(PREFIXES)]
    alone = [engine.complete(request) for request in requests]
    scheduler = Batcher(engine)
    try:
        blocker = scheduler.submit(BatchJob(DecodeRequest(PREFIXES[0], DecodeOptions.of(method="nucleus", k=2, seed=1))))
        futures = [scheduler.submit(BatchJob(request, affinity=f"editor{i}")) for i, request in enumerate(requests)]
        blocker.result(timeout=60)
        together = [f.result(timeout=60) for f in futures]
        counts = dict(scheduler.counts)
    finally:
        scheduler.close()
    assert [_texts(r) for r in together] == [_texts(r) for r in alone]
    assert [r.prompt for r in together] == [r.prompt for r in alone] and alone[0].prompt["suffixTokens"] > 0
    assert counts["alone"] == 1 and counts["maxBatched"] == len(requests)  # only the sequential nucleus ran alone


def test_a_request_alone_steps_on_its_own_cache_and_answers_as_in_process(engine: LocalEngine) -> None:
    """One typist: the request steps on its runner's prompt cache (as `LocalEngine`), with the same answer; its queue
    time is carried in its timings."""
    expected = _texts(engine.complete(DecodeRequest(PREFIXES[0], OPTIONS)))
    scheduler = Batcher(engine)
    try:
        job = BatchJob(DecodeRequest(PREFIXES[0], OPTIONS), affinity="one")
        result = scheduler.submit(job).result(timeout=60)
        assert _texts(result) == expected
        assert scheduler.counts["soloSteps"] == scheduler.counts["steps"] > 0
        assert scheduler.counts["verifyForwards"] == 0  # verified once, on its own cache: never again in the batch's
        assert 0.0 <= result.timings.queue_s <= result.timings.total_s
    finally:
        scheduler.close()


def test_background_work_gives_way_to_a_request_and_still_answers_as_alone(engine: LocalEngine) -> None:
    """Anticipation (`background`) decoding alone is put back when a typed request comes; both answer as alone."""
    long = DecodeOptions(k=3, max_tokens=40, stop_at_newline=False, alpha=0.0)
    expected = [_texts(engine.complete(DecodeRequest(PREFIXES[0], long))), _texts(engine.complete(DecodeRequest(PREFIXES[1], OPTIONS)))]
    scheduler = Batcher(engine)
    try:
        ahead = BatchJob(DecodeRequest(PREFIXES[0], long, background=True), affinity="editor")
        scheduler.submit(ahead)
        while scheduler.counts["steps"] < 2:  # it is decoding
            threading.Event().wait(0.005)
        typed = BatchJob(DecodeRequest(PREFIXES[1], OPTIONS), affinity="other")
        scheduler.submit(typed)
        assert _texts(typed.future.result(timeout=60)) == expected[1]
        assert not ahead.future.done() or scheduler.counts["preempted"] == 1  # it went back while the typed one ran
        assert _texts(ahead.future.result(timeout=60)) == expected[0]
        assert scheduler.counts["preempted"] == 1
    finally:
        scheduler.close()


def test_a_warm_up_prefills_the_prompt_that_the_next_request_then_reuses(engine: LocalEngine) -> None:
    prefix = "\n".join(PREFIXES)
    scheduler = Batcher(engine)
    try:
        warm = scheduler.submit(BatchJob(DecodeRequest(prefix, OPTIONS), affinity="editor", warm=True)).result(timeout=60)
        assert warm.drafts == [] and warm.timings.prefill_tokens > 10
        assert scheduler.counts["warmed"] == 1 and scheduler.counts["steps"] == 0
        typed = scheduler.submit(BatchJob(DecodeRequest(prefix + "\n", OPTIONS), affinity="editor")).result(timeout=60)
        assert typed.timings.prefill_tokens <= 3 < typed.timings.reused_tokens
    finally:
        scheduler.close()


def test_status_says_the_bytes_the_prompt_caches_hold(engine: LocalEngine) -> None:
    scheduler = Batcher(engine)
    try:
        assert scheduler.status()["promptCacheBytes"] == 0
        scheduler.submit(BatchJob(DecodeRequest("\n".join(PREFIXES), OPTIONS), affinity="editor")).result(timeout=60)
        status = scheduler.status()
        runner = scheduler._runners["editor"]
        layers = runner.cache.layers
        held = sum(t.untyped_storage().nbytes() for layer in layers
                   for t in ((layer.key_buffer, layer.value_buffer) if hasattr(layer, "key_buffer")
                             else (layer.keys, layer.values)))
        assert status["promptCaches"] == 1 and status["promptCacheBytes"] == held > 0
    finally:
        scheduler.close()


def test_the_parked_caches_of_all_front_ends_stay_within_the_engine_s_byte_budget(engine: LocalEngine,
                                                                                   monkeypatch) -> None:
    """The least recently used front ends' parked caches go first once all of them hold more than the budget."""
    from types import SimpleNamespace

    from spd_lsp.engine import batcher

    def parked_cache(megabytes: int) -> SimpleNamespace:
        tensor = torch.zeros(megabytes * 2**20, dtype=torch.uint8)
        return SimpleNamespace(layers=[SimpleNamespace(keys=tensor, values=torch.zeros(0, dtype=torch.uint8))])

    monkeypatch.setattr(batcher, "ENGINE_PARKED_BYTES", 5 * 2**20)
    scheduler = Batcher(engine)
    try:
        first, second = scheduler._runner("first"), scheduler._runner("second")
        first.parked = [(parked_cache(2), [1, 2, 3])]
        second.parked = [(parked_cache(2), [4, 5, 6])]
        scheduler._runner("third")  # 4 MiB parked: within the budget
        assert len(first.parked) == len(second.parked) == 1
        scheduler._runner("third").parked = [(parked_cache(2), [7, 8, 9])]
        third = scheduler._runner("third")  # 6 MiB: the least recently used front end's caches go
        assert (len(first.parked), len(second.parked), len(third.parked)) == (0, 1, 1)
        assert scheduler.status()["promptCacheBytes"] == 4 * 2**20
    finally:
        scheduler.close()
