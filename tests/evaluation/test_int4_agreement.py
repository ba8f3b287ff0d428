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
    assert runner.chunk_seconds is None and runner.timed_chunk(500) is None  # untimed chunks
    assert runner.next_chunk(list(range(3000)), None) == list(range(3000))  # one forward, whatever the load
    seen = []
    real = runner.forward

    def spy(*args, **kwargs):
        seen.append(torch.get_num_threads())
        return real(*args, **kwargs)

    monkeypatch.setattr(runner, "forward", spy)
    runner.prefill(list(range(3, 40)))
    assert seen and set(seen) == {2}


def test_the_summary_compares_each_engine_with_the_reference_and_their_agreement_paired() -> None:
    rows = [{"ref": [t], "b": [t], "c": [t if i % 2 else "other"], "exact_ref": i % 3 == 0, "exact_b": i % 3 == 0,
             "exact_c": False} for i, t in enumerate("abcdef")]
    text = int4_agreement.summary(rows, ["ref", "b", "c"])
    lines = text.splitlines()
    assert len(lines) == 3
    assert lines[0].startswith("6 positions, ref against b: top draft identical at 100.0%")
    assert "ref against c: top draft identical at 50.0%" in lines[1]
    assert "P@1 ref 33.3%, c 0.0%" in lines[1]
    # c agrees with the reference at 3 of 6 positions, b at 6: c - b = -0.5
    assert lines[2].strip().startswith("top draft identical to ref's: c - b -0.5")


def test_the_fp32_reference_is_transformers_forward_on_the_cached_exact_weights() -> None:
    """`hf-fp32`: transformers' own forward in fp32, whose weights are the GGUF's blocks dequantised exactly (the
    model's numbers), where `hf` is the same forward in the machine's default dtype."""
    from spd_lsp.engine.fast.q8 import gguf_head_blocks
    from spd_lsp.engine.model import bundled_gguf

    reference = int4_agreement.engine("hf-fp32")
    assert reference.loaded.dtype == torch.float32 and reference.loaded.fast is None
    codes, scales = gguf_head_blocks(bundled_gguf())
    exact = (codes.float().view(codes.shape[0], -1, 32) * scales[..., None]).view(codes.shape)
    assert torch.equal(reference.loaded.model.get_output_embeddings().weight.detach(), exact)
