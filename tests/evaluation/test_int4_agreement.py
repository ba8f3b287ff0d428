"""evaluation/int4_agreement.py pins what the machine's load would otherwise change in an engine's numbers."""

from __future__ import annotations

import torch

from evaluation import int4_agreement
from spd_lsp.engine.decoding import lm
from spd_lsp.engine.local import LocalEngine
from tests.tiny_models import tiny_model


def test_a_pinned_engine_runs_fixed_threads_and_fixed_prefill_chunks(monkeypatch) -> None:
    monkeypatch.setattr(lm, "cpu_pressure", lambda: 99.0)  # an oversubscribed CPU: the server would drop to 1 thread
    engine = int4_agreement.pin(LocalEngine(tiny_model("llama")), threads=2)
    runner = engine.runner
    assert runner.chunk_seconds is None and runner.timed_chunk(500) is None  # chunks of chunk_tokens, untimed
    seen = []
    real = runner.forward

    def spy(*args, **kwargs):
        seen.append(torch.get_num_threads())
        return real(*args, **kwargs)

    monkeypatch.setattr(runner, "forward", spy)
    runner.prefill(list(range(3, 40)))
    assert seen and set(seen) == {2}
