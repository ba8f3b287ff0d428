"""Latency work that must not change answers: chunked, cancellable prefill; the cache after failures."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from spd_lsp import model
from spd_lsp.decoding import lm
from spd_lsp.decoding.lm import ModelRunner
from spd_lsp.decoding.types import Cancelled, DecodeOptions
from spd_lsp.engine import Engine
from tests.tiny_models import tiny_model

PROMPT = list(range(5, 205))  # 200 tokens: several chunks of 64
OPTIONS = DecodeOptions(k=3, max_tokens=6, alpha=0.0)


@pytest.fixture(scope="module")
def loaded() -> Any:
    return tiny_model("llama")


def fresh_logits(loaded: Any, ids: list[int]) -> torch.Tensor:
    return ModelRunner(loaded.model, loaded.device, chunk_tokens=10_000).prefill(ids)[0]


def test_chunked_prefill_equals_one_forward(loaded: Any) -> None:
    runner = ModelRunner(loaded.model, loaded.device, chunk_tokens=64)
    logits, reused = runner.prefill(PROMPT)
    assert reused == 0
    assert runner.cached_ids == PROMPT and runner.cache.get_seq_length() == len(PROMPT)
    torch.testing.assert_close(logits, fresh_logits(loaded, PROMPT), rtol=1e-4, atol=1e-4)


def test_cancel_between_chunks_stops_and_keeps_the_chunks_run(loaded: Any) -> None:
    runner = ModelRunner(loaded.model, loaded.device, chunk_tokens=64)
    checks = []

    def cancelled() -> bool:
        checks.append(runner.cache.get_seq_length())
        return len(checks) > 2  # two chunks run, then the keystroke arrives

    with pytest.raises(Cancelled):
        runner.prefill(PROMPT, cancelled)
    assert checks == [0, 64, 128]
    assert runner.cached_ids == PROMPT[:128] and runner.cache.get_seq_length() == 128
    logits, reused = runner.prefill(PROMPT)  # the next request feeds only the rest
    assert reused == 128
    torch.testing.assert_close(logits, fresh_logits(loaded, PROMPT), rtol=1e-4, atol=1e-4)


def test_next_request_after_a_cancelled_prefill_equals_an_uncancelled_run(loaded: Any) -> None:
    prefix = "def add(a, b):\n    return a + b\n" * 12 + "for name in "
    engine = Engine(loaded)
    engine.runner.chunk_tokens = 16
    calls = iter(range(1000))
    with pytest.raises(Cancelled):
        engine.complete(prefix, OPTIONS, lambda: next(calls) >= 3)
    assert 0 < len(engine.runner.cached_ids) < len(engine.encode(prefix))
    after_cancel = engine.complete(prefix, OPTIONS)
    assert after_cancel.timings.reused_tokens == 48
    reference = Engine(loaded).complete(prefix, OPTIONS)
    assert [d.text for d in after_cancel.drafts] == [d.text for d in reference.drafts]


def test_a_failed_forward_leaves_no_belief_in_a_cache_it_lacks(loaded: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 10, item 10: `cached_ids` was recorded before the forward ran."""
    runner = ModelRunner(loaded.model, loaded.device)
    runner.prefill(PROMPT[:50])

    def out_of_memory(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("out of memory")

    with monkeypatch.context() as patch:  # the second layer fails after the first has cached its keys
        patch.setattr(loaded.model.model.layers[1], "forward", out_of_memory)
        with pytest.raises(RuntimeError):
            runner.prefill(PROMPT)
    assert len(runner.cached_ids) <= (runner.cache.get_seq_length() if runner.cache is not None else 0)
    logits, _ = runner.prefill(PROMPT)
    torch.testing.assert_close(logits, fresh_logits(loaded, PROMPT), rtol=1e-4, atol=1e-4)


def test_cuda_timings_wait_for_the_device(loaded: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 12.7: without a sync, a clock read after a CUDA forward measures kernel launches."""
    synced: list[Any] = []
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: synced.append(device))
    lm.device_sync(torch.device("cuda", 0))
    lm.device_sync(torch.device("cpu"))
    assert synced == [torch.device("cuda", 0)]
    monkeypatch.setattr(lm, "device_sync", synced.append)
    ModelRunner(loaded.model, loaded.device).prefill(PROMPT[:8])
    assert synced[1:] == [loaded.device]


@pytest.mark.parametrize(
    "flags, quantize, expected",
    [
        ({"fpu", "avx512f", "avx512_bf16"}, None, torch.bfloat16),
        ({"fpu", "amx_bf16"}, None, torch.bfloat16),
        ({"fp", "asimd", "bf16"}, None, torch.bfloat16),  # Arm
        ({"fpu", "avx2", "avx512f"}, None, torch.float32),
        ({"fpu", "avx512_bf16"}, "int8", torch.float32),  # int8 keeps its float parts in fp32
    ],
)
def test_cpu_dtype_is_bf16_where_the_cpu_has_it(
    flags: set[str], quantize: str | None, expected: torch.dtype, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(model, "cpu_flags", lambda: frozenset(flags))
    assert model.pick_dtype(torch.device("cpu"), quantize=quantize) is expected
    assert model.pick_dtype(torch.device("cpu"), "float32") is torch.float32  # the setting still forces either
    assert model.pick_dtype(torch.device("cpu"), "bfloat16") is torch.bfloat16


def test_cpu_flags_are_read_from_cpuinfo(tmp_path: Any) -> None:
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor\t: 0\nflags\t\t: fpu avx512_bf16\nvmx flags\t: ept\n\nFeatures\t: bf16 asimd\n")
    assert model.cpu_flags(cpuinfo) == {"fpu", "avx512_bf16", "bf16", "asimd"}
    assert model.cpu_flags(tmp_path / "missing") == frozenset()
