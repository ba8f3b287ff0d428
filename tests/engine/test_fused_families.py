"""The fused decode step (engine/kernels/step.cpp) beyond Llama on one layout: each family (Llama, Qwen2, Qwen3,
Gemma-3) read from a GGUF whose projections mix layouts (q and gate/up in Q4_0, k/v and down in Q8_0, as a Q4_K_M
file mixes Q4_K and Q6_K), against the eager fast path on the same kernels: the same logits (bit for bit where both
run the same row functions; Gemma's GeGLU and fp32 norms within bf16's rounding), the same keys and values, across
a Gemma sliding window."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from gguf import GGMLQuantizationType as T
from transformers import (Gemma3ForCausalLM, Gemma3TextConfig, LlamaConfig, LlamaForCausalLM, Qwen2Config,
                          Qwen2ForCausalLM, Qwen3Config, Qwen3ForCausalLM)

from spd_lsp.engine.decoding.lm import ModelRunner
from spd_lsp.engine.fast import assemble, attach, gguf_model
from spd_lsp.engine.kernels import build as kernels
from tests.engine.test_gguf_model import _normal
from tests.gguf_support import write_gguf

pytestmark = pytest.mark.skipif(not kernels.bf16_dot(), reason="no AVX-512 BF16 on this CPU")
SHAPE = dict(vocab_size=49152, hidden_size=128, intermediate_size=256, num_hidden_layers=2)
FAMILIES = {
    "llama": lambda: LlamaForCausalLM(LlamaConfig(**SHAPE, num_attention_heads=2, num_key_value_heads=1)),
    "qwen2": lambda: Qwen2ForCausalLM(Qwen2Config(**SHAPE, num_attention_heads=2, num_key_value_heads=1)),
    "qwen3": lambda: Qwen3ForCausalLM(Qwen3Config(**SHAPE, num_attention_heads=4, num_key_value_heads=2,
                                                  head_dim=64)),
    "gemma3": lambda: Gemma3ForCausalLM(Gemma3TextConfig(**SHAPE, num_attention_heads=2, num_key_value_heads=1,
                                                         head_dim=256, query_pre_attn_scalar=256, sliding_window=6)),
}


def _mixed(name: str) -> T:
    return T.Q8_0 if any(part in name for part in ("attn_k", "attn_v", "ffn_down", "token_embd")) else T.Q4_0


def _runner(path: Path, *, fused: bool) -> tuple[ModelRunner, object]:
    model, _ = gguf_model.load(path, torch.bfloat16)
    backend = assemble.build(model, compile=False, left_out=() if fused else ("fused-step",))
    backend.prepare()
    attach(model, backend)
    return ModelRunner(model, torch.device("cpu")), backend


@pytest.fixture(scope="module")
def built() -> None:
    assert kernels.build() and "bf16-dot" in kernels.features(), kernels.reason()


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("rows", [1, 3])
@torch.inference_mode()
def test_the_fused_step_answers_as_the_eager_path(built, family: str, rows: int, tmp_path: Path) -> None:
    torch.manual_seed(0)
    path = write_gguf(_normal(FAMILIES[family]()), tmp_path / f"{family}.gguf", quantize=_mixed)
    ours, backend = _runner(path, fused=True)
    eager, plain = _runner(path, fused=False)
    assert backend.plan.step == "fused" and backend.fused is not None, backend.plan.why
    assert plain.fused is None
    assert backend.info["serving"]["qkv"]["decode"] == "q4_0+q8_0 on matvec"
    ids = [5 + (37 * i) % 3000 for i in range(9)]
    for runner in (ours, eager):
        runner.prefill(ids)
    caches = [r.cache if rows == 1 else r.fork(rows) for r in (ours, eager)]
    exact = family != "gemma3"
    for step in range(4):  # past Gemma's window of 6 from the third step on
        embeds = ours.embed(torch.tensor([[100 + step]] * rows))
        before = backend.steps
        got, want = (r.forward(cache, embeds=embeds) for r, cache in zip((ours, eager), caches))
        assert backend.steps == before + 1
        if exact:
            assert torch.equal(got, want), (got - want).abs().max()
        else:
            assert (got - want).abs().max() <= 0.05 * want.abs().max() and torch.equal(got.argmax(-1), want.argmax(-1))
    for a, b in zip(*(cache.layers for cache in caches)):
        assert a.length == b.length == len(ids) + 4
        if exact:
            assert torch.equal(a.keys, b.keys) and torch.equal(a.values, b.values)


@pytest.mark.integration
@pytest.mark.parametrize("rows", [1, 3])
@torch.inference_mode()
def test_the_fused_step_on_a_q4_k_m_file_answers_as_the_eager_path(built, rows: int, tmp_path: Path) -> None:
    """llama.cpp's own Q4_K_M (Q4_K, Q6_K attn_v / ffn_down / head): the K-quants' kernels (on int8 activations where
    the library has AVX-512 VNNI) in the fused step and in the eager path, the same logits bit for bit."""
    import subprocess

    from tests.engine.test_formats import llama_quantize

    quantize = llama_quantize()
    if quantize is None:
        pytest.skip("llama.cpp's llama-quantize is not built in ~/.cache/spd-lsp/llamacpp/*/bin")
    torch.manual_seed(0)
    shape = dict(SHAPE, hidden_size=256, intermediate_size=512)
    model = LlamaForCausalLM(LlamaConfig(**shape, num_attention_heads=2, num_key_value_heads=1))
    source = write_gguf(_normal(model), tmp_path / "f32.gguf")
    path = tmp_path / "q4_k_m.gguf"
    done = subprocess.run([str(quantize), str(source), str(path), "Q4_K_M", "2"], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    ours, backend = _runner(path, fused=True)
    eager, _ = _runner(path, fused=False)
    assert backend.plan.step == "fused" and backend.fused is not None, backend.plan.why
    decoding = {name: serving["decode"] for name, serving in backend.info["serving"].items()}
    assert "q4_k" in decoding["qkv"] and any("q6_k" in name for name in decoding.values()), decoding
    ids = [5 + (37 * i) % 3000 for i in range(9)]
    for runner in (ours, eager):
        runner.prefill(ids)
    caches = [r.cache if rows == 1 else r.fork(rows) for r in (ours, eager)]
    for step in range(3):
        embeds = ours.embed(torch.tensor([[100 + step]] * rows))
        got, want = (r.forward(cache, embeds=embeds) for r, cache in zip((ours, eager), caches))
        assert torch.equal(got, want), (got - want).abs().max()
