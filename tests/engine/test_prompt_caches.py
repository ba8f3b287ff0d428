"""Memory the engine holds beside the weights, sized by what is in use: the parked prompt caches within a byte budget,
the rotary tables grown with the context (issue 45's resident-memory target)."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from spd_lsp.engine.decoding.backends import attached
from spd_lsp.engine.decoding.lm import CACHE_SLOTS, PARKED_BYTES, ModelRunner, cache_bytes
from spd_lsp.engine.fast import model as fast_model
from tests.tiny_models import tiny_model

# Four prompts that share nothing: each parks the one before.
PROMPTS = [[3 + (7 * i + 11 * p) % 200 for i in range(100)] for p in range(4)]


@pytest.fixture(scope="module")
def loaded() -> Any:
    return tiny_model("llama+fast")


def test_a_small_model_parks_as_many_caches_as_its_slots(loaded: Any) -> None:
    runner = ModelRunner(loaded.model, loaded.device)
    for prompt in PROMPTS:
        runner.prefill(prompt)
    assert len(runner.parked) == CACHE_SLOTS - 1
    assert sum(cache_bytes(cache) for cache, _ in runner.parked) <= PARKED_BYTES
    assert attached(loaded.model).info["parkedCaches"]["count"] == CACHE_SLOTS - 1  # what spd.status says


def test_parked_caches_stay_within_their_byte_budget_the_most_recent_kept(loaded: Any) -> None:
    probe = ModelRunner(loaded.model, loaded.device)
    probe.prefill(PROMPTS[0])
    one = cache_bytes(probe.cache)
    assert one > 0
    runner = ModelRunner(loaded.model, loaded.device, parked_bytes=one * 3 // 2)  # room for one parked cache
    for prompt in PROMPTS:
        runner.prefill(prompt)
    assert [ids for _, ids in runner.parked] == [PROMPTS[2]]  # the last prompt before the current one
    assert runner.held_bytes() == 2 * one
    assert attached(loaded.model).info["parkedCaches"] == {"count": 1, "megabytes": round(one / 1e6, 1),
                                                           "budgetMegabytes": round(one * 3 // 2 / 1e6)}
    logits, reused = runner.prefill(PROMPTS[2] + [5])  # going back to it: its cache continued, not a cold prompt
    assert reused == len(PROMPTS[2])
    runner.prefill(PROMPTS[0])  # dropped: cold again
    assert ModelRunner(loaded.model, loaded.device, parked_bytes=0).parked == []


def test_rotary_tables_start_small_and_grow_with_the_context(monkeypatch) -> None:
    """Tables sized by the positions in use: a prompt past them grows them, and its logits are transformers' own."""
    monkeypatch.setattr(fast_model, "FIRST_POSITIONS", 64)
    loaded = tiny_model("llama+fast")
    lm = attached(loaded.model).lm
    assert lm.positions == 64
    prompt = [3 + (5 * i) % 150 for i in range(300)]
    runner = ModelRunner(loaded.model, loaded.device)
    logits, _ = runner.prefill(prompt)
    assert lm.positions == 512  # the next power of two past 300
    torch.testing.assert_close(logits, _transformers(loaded, prompt), rtol=1e-4, atol=1e-4)
    step = runner.forward(runner.cache, ids=torch.tensor([[7]]))  # a decode step past it, on the grown tables
    torch.testing.assert_close(step, _transformers(loaded, prompt + [7]), rtol=1e-4, atol=1e-4)


@torch.inference_mode()
def _transformers(loaded: Any, ids: list[int]) -> torch.Tensor:
    """The last position's logits of transformers' own forward of the model (not the fast path's)."""
    return loaded.model(input_ids=torch.tensor([ids])).logits[:, -1].float()


def test_the_fused_step_reads_grown_tables(monkeypatch) -> None:
    """Decode steps past the tables' positions: they grow and the fused step (which holds them) is made again on
    them: its logits stay the eager path's, bit for bit."""
    from spd_lsp.engine.kernels import build as kernels
    from tests.engine.test_fused_step import _runner

    if not kernels.bf16_dot() or not kernels.build():
        pytest.skip("the fused step needs our kernels with AVX-512 BF16")
    monkeypatch.setattr(fast_model, "FIRST_POSITIONS", 64)
    (ours, backend), (eager, _) = _runner("llama-64", fused_on=True), _runner("llama-64", fused_on=False)
    prompt = [3 + (7 * i) % 300 for i in range(62)]
    for runner in (ours, eager):
        runner.prefill(prompt)
    first = backend.fused
    for token in (5, 6, 7, 8):  # columns 62..65: the third step is past the 64 positions
        got, want = (r.forward(r.cache, ids=torch.tensor([[token]])) for r in (ours, eager))
        assert torch.equal(got, want)
    assert backend.lm.positions == 128 and backend.fused is not first and backend.steps >= 4
