"""`prefill_together`: several runners' prompts prefilled in shared forwards leave every runner's cache
and logits as its own `prefill` would, for rows with different cached lengths and new-token counts."""

from __future__ import annotations

import pytest
import torch

from spd_lsp.engine.decoding import lm
from spd_lsp.engine.decoding.lm import ModelRunner, prefill_together
from spd_lsp.api import Cancelled, never_cancelled
from tests.tiny_models import WITH_FAST, CORPUS, tiny_model, tiny_tokenizer

# Per row: tokens its cache holds before, tokens its prompt has (chunks of 8: the last row runs 3).
ROWS = [(10, 11), (25, 30), (3, 22), (0, 6), (17, 17)]  # the fourth starts empty (alone); the last re-runs one token


def _prompts() -> list[list[int]]:
    ids = tiny_tokenizer().encode("".join(CORPUS[:8]))
    return [ids[7 * i : 7 * i + total] for i, (_, total) in enumerate(ROWS)]


def _runners(model, prompts: list[list[int]]) -> list[ModelRunner]:
    runners = []
    for (cached, _), prompt in zip(ROWS, prompts):
        runner = ModelRunner(model.model, model.device, chunk_tokens=8, slots=1)
        if cached:
            runner.prefill(prompt[:cached])
        runners.append(runner)
    return runners


def _assert_same_caches(got: ModelRunner, want: ModelRunner) -> None:
    assert got.cached_ids == want.cached_ids
    for mine, theirs in zip(got.cache.layers, want.cache.layers):
        assert mine.keys.shape == theirs.keys.shape
        torch.testing.assert_close(mine.keys, theirs.keys, atol=1e-5, rtol=1e-4)
        torch.testing.assert_close(mine.values, theirs.values, atol=1e-5, rtol=1e-4)


@pytest.mark.parametrize("architecture", WITH_FAST)
def test_caches_and_logits_equal_separate_prefills(architecture: str) -> None:
    torch.set_num_threads(1)
    model = tiny_model(architecture)
    prompts = _prompts()
    alone, together = _runners(model, prompts), _runners(model, prompts)
    expected = [runner.prefill(prompt) for runner, prompt in zip(alone, prompts)]
    before = sum(runner.forwards for runner in together)
    got = prefill_together(together, prompts, [never_cancelled] * len(prompts))
    for (logits, reused), (want_logits, want_reused) in zip(got, expected):
        assert reused == want_reused
        torch.testing.assert_close(logits, want_logits, atol=1e-5, rtol=1e-4)
    for mine, theirs in zip(together, alone):
        _assert_same_caches(mine, theirs)
    forwards = sum(runner.forwards for runner in together) - before
    if architecture != "gemma3":  # full caches: the empty row alone, ONE forward for the first chunk of the 4
        assert forwards == 1 + 1 + 2  # cached rows, and the 19-token row's last 2 chunks alone
    else:  # sliding-window layers: every row alone, as many forwards as separate prefills
        assert forwards == sum(-(-(total - min(cached, total - 1) if cached else total) // 8) for cached, total in ROWS)


def test_a_cancelled_row_stops_alone_and_a_failed_joint_forward_goes_on_one_by_one(monkeypatch) -> None:
    torch.set_num_threads(1)
    model = tiny_model("llama")
    prompts = _prompts()
    alone, together = _runners(model, prompts), _runners(model, prompts)
    expected = [runner.prefill(prompt) for runner, prompt in zip(alone, prompts)]

    def failing(*args, **kwargs):
        raise RuntimeError("no memory for the padded batch")

    monkeypatch.setattr(lm, "_forward_rows", failing)
    cancels = [never_cancelled] * len(prompts)
    cancels[1] = lambda: True
    got = prefill_together(together, prompts, cancels)
    assert isinstance(got[1], Cancelled) and together[1].cached_ids == prompts[1][:25]  # kept what it had
    for i in (0, 2, 3, 4):
        torch.testing.assert_close(got[i][0], expected[i][0], atol=1e-5, rtol=1e-4)
        _assert_same_caches(together[i], alone[i])


def test_one_runner_twice_is_refused() -> None:
    model = tiny_model("llama")
    runner = ModelRunner(model.model, model.device)
    with pytest.raises(ValueError, match="distinct runners"):
        prefill_together([runner, runner], [[1, 2], [1, 3]], [never_cancelled] * 2)
