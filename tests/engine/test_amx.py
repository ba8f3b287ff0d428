"""Forwards of a few dozen rows through the int4 projections on AMX (spd_lsp/engine/kernels/amx.py, amx.cpp): built for real
with the machine's compiler; the blocks dequantised exactly as the bf16 weights were made from the GGUF; products
within a bf16 matmul's rounding for any row count; bad input refused with its reason; and on a model whose float
weights are its rows' own numbers, verification-sized forwards take it (and 1-2 rows, or int4 quantised from float
weights, do not) with the float path's answers."""

from __future__ import annotations

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from spd_lsp.engine import fast
from spd_lsp.engine.fast import plan as fast_plan
from spd_lsp.engine.fast.layouts.blocks import Q4Rows as Rows, Q8Blocks
from spd_lsp.engine.fast.layouts.ours import Q4Amx
from spd_lsp.engine.fast.plan import Choice
from spd_lsp.engine.kernels import amx
from spd_lsp.engine.kernels import build as kernels
from tests.q4_support import random_rows
from tests.tiny_models import tiny_tokenizer

pytestmark = pytest.mark.skipif(not (kernels.bf16_dot() and kernels.amx_tiles()), reason="no AMX tiles on this CPU")


@pytest.fixture(scope="module")
def built() -> None:
    assert kernels.build() and "amx" in kernels.features(), kernels.reason()


def _int4(x: torch.Tensor, rows: Rows) -> torch.Tensor:
    return amx.int4_linear(x, *rows)


@pytest.mark.parametrize("n, k", [(960, 576), (576, 1536), (48, 128)])  # 48: a pair of output blocks and a lone one
def test_the_blocks_become_the_bf16_weights_the_gguf_s_dequantisation_makes(built, n, k) -> None:
    """x = I: each output is one weight, exactly (one product, no sum): the kernel's bf16 weight is scale * q + min
    in fp32 rounded to bf16, as the model's bf16 weights were made (`Rows.dequantised`: a product, then a sum)."""
    rows = random_rows(n, k, seed=n + k)
    got = _int4(torch.eye(k, dtype=torch.bfloat16), rows)
    assert torch.equal(got.T, rows.dequantised().bfloat16())


@pytest.mark.parametrize("n, k", [(96, 576), (48, 128)])
def test_the_head_s_q8_0_blocks_become_the_bf16_weights(built, n, k) -> None:
    """x = I: each output is one weight, exactly: bf16(scale * code) in fp32, as the model's bf16 head was made."""
    generator = torch.Generator().manual_seed(n + k)
    blocks = Q8Blocks(torch.randint(-127, 128, (n, k), dtype=torch.int8, generator=generator),
                      (torch.rand(n, k // 32, generator=generator) * 0.02).half())
    got = amx.q8_linear(torch.eye(k, dtype=torch.bfloat16), *blocks)
    assert torch.equal(got.T, blocks.dequantised().bfloat16())


@pytest.mark.parametrize("m", [1, 3, 16, 17, 32, 33, 64])
def test_any_row_count_gives_a_bf16_matmul_s_numbers(built, m) -> None:
    rows = random_rows(960, 576, seed=m)
    x = torch.randn(m, 576, generator=torch.Generator().manual_seed(m)).bfloat16()
    weight = rows.dequantised().bfloat16().float()
    want = x.float() @ weight.T
    got = _int4(x, rows)
    assert got.shape == (m, 960) and got.dtype == torch.bfloat16
    # rounded to bf16 once (half an ulp: 2^-9 of the value), fp32 sums in another order (2^-20 of the sum of |x| |w|)
    assert bool(((got.float() - want).abs() <= want.abs() * 2**-8 + 2**-20 * (x.float().abs() @ weight.abs().T)).all())


def test_bad_input_is_refused_with_its_reason(built) -> None:
    rows = random_rows(32, 128, seed=1)
    with pytest.raises(RuntimeError, match="contiguous bf16"):
        _int4(torch.randn(2, 128), rows)
    with pytest.raises(RuntimeError, match=r"x \[M, 128\]"):
        _int4(torch.randn(2, 64).bfloat16(), rows)
    with pytest.raises(RuntimeError, match="multiple of 16"):
        _int4(torch.randn(2, 128).bfloat16(), random_rows(40, 128, seed=2))
    with pytest.raises(RuntimeError, match="fp16"):
        _int4(torch.randn(2, 128).bfloat16(), Rows(rows.codes, rows.scales.float(), rows.mins))
    assert not amx.takes(40, 128) and not amx.takes(32, 96) and amx.takes(32, 128)


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(tiny_tokenizer()), hidden_size=192, intermediate_size=256, num_hidden_layers=2,
                         num_attention_heads=3, num_key_value_heads=1, head_dim=64)
    return LlamaForCausalLM(config).eval().to(torch.bfloat16)


def _backend(*, exact: bool, amx_on: bool = True) -> object:
    """The tiny model on int4 rows; `exact`: its float weights made the rows' own numbers first (as a GGUF's are)."""
    backend = fast.build(_model(), compile=False, quantize="int4", head="int8", left_out=() if amx_on else ("amx",))
    if exact:
        rows = backend.sources.rows()
        with torch.no_grad():
            for block, layer in zip(backend.lm.blocks, rows):
                for name in ("qkv", "out", "gate_up", "down"):
                    getattr(block, name).prefill.weight.copy_(layer[name].dequantised().bfloat16())
        backend.plan = backend.plan.with_facts(blocks_exact=True)
    backend.prepare()
    return backend


@torch.inference_mode()
def test_verification_sized_forwards_take_amx_on_the_rows_with_the_float_path_s_answers(built, monkeypatch) -> None:
    on, off = _backend(exact=True), _backend(exact=True, amx_on=False)
    assert on.plan.role("qkv").batch == Choice("q4_1", "amx") and on.lm.tiers.batch_rows == fast_plan.AMX_LAST_ROWS
    assert off.plan.why["amx"] == "left out by the kernels setting"
    calls: list[int] = []
    real = amx.int4_linear
    monkeypatch.setattr(amx, "int4_linear", lambda x, *rows: calls.append(x.shape[0]) or real(x, *rows))
    most = fast_plan.AMX_LAST_ROWS
    for tokens, takes in ((2, False), (3, True), (24, True), (most, True), (most + 1, False)):
        ids = torch.randint(3, 300, (1, tokens), generator=torch.Generator().manual_seed(tokens))
        calls.clear()
        got, want = (b.lm(input_ids=ids).logits.float() for b in (on, off))
        assert bool(calls) == takes, tokens
        if tokens > 8:  # the same bf16 weights, summed in another order
            assert (got - want).abs().max() <= 0.03 * want.abs().max()


def test_int4_quantised_from_float_weights_never_stands_in_for_them(built) -> None:
    """`quantize: "int4"` is chosen for decode steps: a prefill or a tree keeps the float weights it approximates."""
    backend = _backend(exact=False)
    assert backend.plan.why["amx"].startswith("blocks not the float weights' own numbers")
    assert not any(isinstance(block.qkv.batch, Q4Amx) for block in backend.lm.blocks)
