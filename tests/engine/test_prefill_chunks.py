"""`ModelRunner.prefill`'s own chunks: sized by time, no output head before the last, cancelled inside a forward."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import torch

from spd_lsp.api import Cancelled
from spd_lsp.engine.decoding import lm
from spd_lsp.engine.decoding.backends import attached
from spd_lsp.engine.decoding.interrupt import decoder_layers
from spd_lsp.engine.decoding.lm import MAX_CHUNK, MIN_CHUNK, MIN_LAYER_CHUNK, ModelRunner
from tests.session.test_latency import fresh_logits
from tests.tiny_models import ARCHITECTURES, tiny_model

PROMPT = [5 + i % 300 for i in range(1800)]  # 1,800 tokens: 3 chunks of MIN_CHUNK (512) and the rest


@pytest.fixture(scope="module")
def loaded() -> Any:
    return tiny_model("llama")


def test_chunks_last_about_chunk_seconds_at_the_last_chunks_speed(loaded: Any) -> None:
    runner = ModelRunner(loaded.model, loaded.device, chunk_seconds=1.0)
    runner.token_seconds = 0.001
    assert runner.timed_chunk(10_000) == 1000
    assert runner.timed_chunk(1500) == 1500 and runner.timed_chunk(1501) == 1000  # a short rest runs with its chunk
    runner.token_seconds = 1.0
    assert runner.timed_chunk(10_000) == MIN_CHUNK and runner.timed_chunk(MIN_CHUNK * 3 // 2) == MIN_CHUNK * 3 // 2
    runner.token_seconds = 1e-9
    assert runner.timed_chunk(100_000) == MAX_CHUNK
    assert ModelRunner(loaded.model, loaded.device, chunk_tokens=64).timed_chunk(10_000) is None  # fixed chunks


def test_timed_chunks_equal_one_forward_and_only_the_last_runs_the_head(loaded: Any, monkeypatch) -> None:
    runner = ModelRunner(loaded.model, loaded.device, chunk_seconds=1e-9)  # every chunk the shortest
    monkeypatch.setattr(lm.time, "perf_counter", iter(range(10_000)).__next__)  # a second per chunk: stays short
    head_rows = []
    hook = loaded.model.get_output_embeddings().register_forward_pre_hook(
        lambda module, args: head_rows.append(args[0].shape[1]))
    try:
        logits, reused = runner.prefill(PROMPT)
    finally:
        hook.remove()
    assert reused == 0 and runner.cached_ids == PROMPT and runner.cache.get_seq_length() == len(PROMPT)
    assert head_rows == [0, 0, 0, 1]  # 512 x 3, then the last 264; the head on one row, at the last
    torch.testing.assert_close(logits, fresh_logits(loaded, PROMPT), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("stop_at", [0, 1])  # the tiny model has 2 layers
def test_a_cancel_stops_a_forward_between_layers_and_keeps_the_chunks_run(loaded: Any, stop_at: int,
                                                                          monkeypatch) -> None:
    """Checked before each chunk and before each decoder layer: a keystroke in the second chunk's layer
    `stop_at` stops it there, its first layers' key/values are cut back, the first chunk stays."""
    runner = ModelRunner(loaded.model, loaded.device, chunk_seconds=1e-9)
    monkeypatch.setattr(lm.time, "perf_counter", iter(range(10_000)).__next__)
    layers = len(decoder_layers(loaded.model))
    ran = []
    for index, layer in enumerate(decoder_layers(loaded.model)):
        monkeypatch.setattr(layer, "forward", lambda *a, _f=layer.forward, _i=index, **k: ran.append(_i) or _f(*a, **k))
    checks = []

    def cancelled() -> bool:
        checks.append(len(runner.cached_ids))
        return len(checks) == (1 + layers) + 1 + stop_at + 1  # chunk 1 (its check, its layers), chunk 2's check, ...

    with pytest.raises(Cancelled):
        runner.prefill(PROMPT, cancelled)
    assert ran == list(range(layers)) + list(range(stop_at))  # stopped before layer `stop_at` of the second chunk
    assert runner.cached_ids == PROMPT[:MIN_CHUNK]
    assert [layer.get_seq_length() for layer in runner.cache.layers] == [MIN_CHUNK] * layers
    logits, reused = runner.prefill(PROMPT)  # the next request feeds only the rest
    assert reused == MIN_CHUNK
    torch.testing.assert_close(logits, fresh_logits(loaded, PROMPT), rtol=1e-4, atol=1e-4)


def test_a_cancel_in_the_first_chunk_leaves_nothing_cached(loaded: Any) -> None:
    runner = ModelRunner(loaded.model, loaded.device)
    checks = iter(range(100))
    with pytest.raises(Cancelled):
        runner.prefill(PROMPT, lambda: next(checks) == 2)  # inside the first forward
    assert runner.cached_ids == [] and (runner.cache is None or runner.cache.get_seq_length() == 0)
    torch.testing.assert_close(runner.prefill(PROMPT)[0], fresh_logits(loaded, PROMPT), rtol=1e-4, atol=1e-4)


def test_fixed_chunks_are_cancelled_between_chunks_only(loaded: Any) -> None:
    """`chunk_tokens` given (the Batcher's runners, shared forwards): no check inside a forward."""
    runner = ModelRunner(loaded.model, loaded.device, chunk_tokens=100)
    checks = []
    with pytest.raises(Cancelled):
        runner.prefill(PROMPT, lambda: checks.append(len(runner.cached_ids)) or len(checks) == 3)
    assert checks == [0, 100, 200] and runner.cached_ids == PROMPT[:200]  # 2 forwards, no check inside them


@pytest.mark.parametrize("architecture", ARCHITECTURES)
def test_every_tiny_architecture_has_layers_to_check(architecture: str) -> None:
    model = tiny_model(architecture).model
    assert ModelRunner(model, torch.device("cpu")).interruptible


# -- the fast path: its forward starts at any layer, so a cancelled chunk keeps the layers it ran --------------

@pytest.fixture(scope="module")
def fast_loaded() -> Any:
    return tiny_model("llama+fast")


@contextmanager
def layers_run(loaded: Any) -> Iterator[list[tuple[int, int]]]:
    """(layer, tokens) of every block the fast forward runs, in order."""
    ran: list[tuple[int, int]] = []
    projections = [block.qkv for block in attached(loaded.model).lm.blocks]
    for index, projection in enumerate(projections):
        def spy(x: Any, tier: str, _i: int = index, _real: Any = projection.forward) -> Any:
            ran.append((_i, x.shape[1]))
            return _real(x, tier)

        projection.forward = spy  # an instance attribute: `Projection.__call__` calls it
    try:
        yield ran
    finally:
        for projection in projections:
            del projection.forward


CHUNK = len(PROMPT) // 8  # the fast path's shortest chunks for PROMPT: 8 equal ones of at most MIN_LAYER_CHUNK


def stopped_in_second_chunk(loaded: Any, monkeypatch, stop_at: int) -> ModelRunner:
    """A fast runner whose prefill of PROMPT (chunks of CHUNK) a cancel stopped before layer `stop_at` of its
    second chunk."""
    runner = ModelRunner(loaded.model, loaded.device, layer_seconds=1e-9)  # every chunk the shortest
    monkeypatch.setattr(lm.time, "perf_counter", iter(range(10_000)).__next__)
    checks = []

    def cancelled() -> bool:
        checks.append(len(runner.cached_ids))
        return len(checks) == (1 + runner.layers) + 1 + stop_at + 1  # chunk 1 (its check, its layers), chunk 2's ...

    assert runner.timed_chunk(len(PROMPT)) == CHUNK
    with pytest.raises(Cancelled):
        runner.prefill(PROMPT, cancelled)
    assert runner.cached_ids == PROMPT[:CHUNK]
    return runner


def test_fast_chunks_are_sized_by_a_layer_s_time(fast_loaded: Any) -> None:
    runner = ModelRunner(fast_loaded.model, fast_loaded.device, layer_seconds=0.5)
    assert runner.resumable and runner.layers == 2
    runner.token_seconds = 0.001
    assert runner.timed_chunk(10_000) == 1000 and runner.timed_chunk(1000) == 1000  # 2 layers of at most 0.5 s
    assert runner.timed_chunk(1001) == 501 and runner.timed_chunk(2500) == 834  # the fewest equal chunks
    runner.token_seconds = 1.0
    assert runner.timed_chunk(10_000) == 250 and runner.timed_chunk(MIN_LAYER_CHUNK) == MIN_LAYER_CHUNK
    assert not ModelRunner(tiny_model("llama").model, fast_loaded.device).resumable  # transformers' forward


def test_a_cancelled_fast_chunk_keeps_its_layers_and_the_next_prefill_resumes_there(fast_loaded: Any,
                                                                                     monkeypatch) -> None:
    runner = stopped_in_second_chunk(fast_loaded, monkeypatch, stop_at=1)
    assert [layer.get_seq_length() for layer in runner.cache.layers] == [2 * CHUNK, CHUNK]
    with layers_run(fast_loaded) as ran:
        logits, reused = runner.prefill(PROMPT)
    assert ran == [(1, CHUNK)] + [(0, CHUNK), (1, CHUNK)] * 6  # layer 0 not run again
    assert reused == 2 * CHUNK and runner.cached_ids == PROMPT
    assert [layer.get_seq_length() for layer in runner.cache.layers] == [len(PROMPT)] * 2
    torch.testing.assert_close(logits, fresh_logits(fast_loaded, PROMPT), rtol=1e-4, atol=1e-4)


def test_a_resumed_chunk_keeps_the_tokens_the_next_prompt_still_has(fast_loaded: Any, monkeypatch) -> None:
    """The keystroke that cancelled changed the prompt inside the stopped chunk: the tokens before the change are
    kept (a token's key/values do not depend on later ones), the others dropped."""
    runner = stopped_in_second_chunk(fast_loaded, monkeypatch, stop_at=1)
    prompt = PROMPT[:300] + [9 + i % 200 for i in range(200)]
    with layers_run(fast_loaded) as ran:
        logits, _ = runner.prefill(prompt)
    assert ran == [(1, 300 - CHUNK), (0, 200), (1, 200)]
    assert [layer.get_seq_length() for layer in runner.cache.layers] == [len(prompt)] * 2
    torch.testing.assert_close(logits, fresh_logits(fast_loaded, prompt), rtol=1e-4, atol=1e-4)


def test_a_stopped_chunk_the_next_prompt_does_not_continue_is_dropped(fast_loaded: Any, monkeypatch) -> None:
    runner = stopped_in_second_chunk(fast_loaded, monkeypatch, stop_at=1)
    prompt = PROMPT[:CHUNK] + [9 + i % 200 for i in range(100)]
    with layers_run(fast_loaded) as ran:
        logits, reused = runner.prefill(prompt)
    assert ran == [(0, 100), (1, 100)] and reused == CHUNK
    torch.testing.assert_close(logits, fresh_logits(fast_loaded, prompt), rtol=1e-4, atol=1e-4)
    runner = stopped_in_second_chunk(fast_loaded, monkeypatch, stop_at=1)
    runner.rewind(CHUNK)  # anything else that uses the cache first: every layer holds `cached_ids`
    assert [layer.get_seq_length() for layer in runner.cache.layers] == [CHUNK] * 2 and runner.partial is None


def test_a_fast_chunk_cancelled_before_its_first_layer_keeps_nothing_of_it(fast_loaded: Any, monkeypatch) -> None:
    runner = stopped_in_second_chunk(fast_loaded, monkeypatch, stop_at=0)
    assert runner.partial is None and [layer.get_seq_length() for layer in runner.cache.layers] == [CHUNK] * 2


def test_the_first_chunk_of_an_empty_cache_is_resumed_too(fast_loaded: Any) -> None:
    """Stopped in its first chunk, the layers it did not reach still empty."""
    runner = ModelRunner(fast_loaded.model, fast_loaded.device, layer_seconds=100.0)  # one chunk
    checks = iter(range(100))
    with pytest.raises(Cancelled):
        runner.prefill(PROMPT, lambda: next(checks) == 2)  # the prefill's check, layer 0's, then before layer 1
    assert runner.cached_ids == [] and runner.partial is not None and runner.partial.layer == 1
    with layers_run(fast_loaded) as ran:
        logits, _ = runner.prefill(PROMPT)
    assert ran == [(1, len(PROMPT) - 1), (0, 1), (1, 1)]  # the last token runs on its own: its logits
    torch.testing.assert_close(logits, fresh_logits(fast_loaded, PROMPT), rtol=1e-4, atol=1e-4)
    with pytest.raises(Cancelled):
        runner.prefill([7] + PROMPT, lambda: next(checks) == 5)  # shares nothing: the stopped chunk is dropped
    assert runner.partial is not None
    logits, reused = runner.prefill(PROMPT[:10])
    assert reused == 0
    torch.testing.assert_close(logits, fresh_logits(fast_loaded, PROMPT[:10]), rtol=1e-4, atol=1e-4)


def test_a_resumed_chunk_cancelled_again_resumes_again(fast_loaded: Any, monkeypatch) -> None:
    runner = stopped_in_second_chunk(fast_loaded, monkeypatch, stop_at=1)
    with pytest.raises(Cancelled):
        runner.prefill(PROMPT, lambda: True)  # before the resumed chunk's layer 1 again
    assert runner.partial is not None and runner.cached_ids == PROMPT[:CHUNK]
    torch.testing.assert_close(runner.prefill(PROMPT)[0], fresh_logits(fast_loaded, PROMPT), rtol=1e-4, atol=1e-4)
