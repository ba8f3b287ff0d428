"""The decode step's int4 projections and Q8_0 / int8 head on our CPU kernels (spd_lsp/engine/kernels/matvec.py, matvec.cpp):
built for real with the machine's compiler, checked against the weights' own numbers in fp32, the GGUF's rows taken
as its blocks are, bad input refused clearly, and a model moved onto them in `prepare` stepping as before, eager and
compiled as one graph."""

from __future__ import annotations

import threading

import pytest
import torch

from spd_lsp.engine import fast
from spd_lsp.engine.decoding.lm import ModelRunner
from spd_lsp.engine.fast import q4
from spd_lsp.engine.fast.layouts.blocks import Int8Rows, Q8Blocks
from spd_lsp.engine.kernels import build as kernels
from spd_lsp.engine.kernels import matvec
from tests.q4_support import random_rows
from tests.tiny_models import tiny_model

pytestmark = pytest.mark.skipif(not kernels.bf16_dot(), reason="no AVX-512 BF16 on this CPU")


@pytest.fixture(scope="module")
def built() -> None:
    assert kernels.build() and "bf16-dot" in kernels.features(), kernels.reason()


def _within_output_rounding(got: torch.Tensor, x: torch.Tensor, weight: torch.Tensor) -> bool:
    """got (bf16) is x @ weight.T (fp32) rounded to bf16 (half an ulp: 2^-9 of the value), but for fp32 sums' own
    error: ~1e-7 of the sum of |x| |w| (measured; 2^-20 allowed)."""
    want = x.float() @ weight.T
    return bool(((got.float() - want).abs() <= want.abs() * 2**-8 + 2**-20 * (x.float().abs() @ weight.abs().T)).all())


@pytest.mark.parametrize("n, k", [(960, 576), (17, 576), (576, 1536), (5, 64), (7, 640)])
@pytest.mark.parametrize("m", [1, 3, 8, 11])
def test_int4_rows_give_the_blocks_own_numbers(built, n, k, m) -> None:
    rows = random_rows(n, k, seed=n + k + m)
    x = torch.randn(m, k, generator=torch.Generator().manual_seed(m)).bfloat16()
    got = matvec.int4_matvec(x, *rows)
    assert got.shape == (m, n) and got.dtype == torch.bfloat16
    assert _within_output_rounding(got, x, rows.dequantised())


@pytest.mark.parametrize("m", [1, 3, 8, 9])
def test_int8_rows_give_their_scaled_codes(built, m) -> None:
    torch.manual_seed(m)
    head = Int8Rows.of(torch.randn(1000, 576, dtype=torch.bfloat16))
    x = torch.randn(m, 576).bfloat16()
    weight = head.dequantised()
    assert _within_output_rounding(matvec.int8_matvec(x, head.codes, head.scales), x, weight)


def q8_blocks(weight: torch.Tensor):
    """`weight` [N, K] quantised to Q8_0 as the GGUF's writer does it (gguf.quants): `Q8Blocks`."""
    from gguf import GGMLQuantizationType
    from gguf.quants import quantize

    from spd_lsp.engine.fast.q8 import unpack_q8_0

    codes, scales = unpack_q8_0(quantize(weight.float().numpy(), GGMLQuantizationType.Q8_0))
    return Q8Blocks(codes.contiguous(), scales.half().contiguous())


@pytest.mark.parametrize("n, k", [(1000, 576), (7, 96), (33, 1536)])
@pytest.mark.parametrize("m", [1, 3, 8, 9])
def test_q8_rows_give_the_blocks_own_numbers(built, n, k, m) -> None:
    """The GGUF's Q8_0 blocks as they are (a scale per 32 codes): within the output's rounding of x @ (d q).T, where
    the int8 rows requantised from the same weights (a scale per row) err several times more."""
    torch.manual_seed(n + m)
    weight = torch.randn(n, k) * torch.rand(n, k).mul(4).add(0.1)  # blocks of different ranges: scales that differ
    blocks = q8_blocks(weight)
    x = torch.randn(m, k).bfloat16()
    got = matvec.q8_matvec(x, blocks.codes, blocks.scales)
    assert got.shape == (m, n) and got.dtype == torch.bfloat16
    exact = blocks.dequantised()
    assert _within_output_rounding(got, x, exact)
    rows = Int8Rows.of(exact.bfloat16())
    requantised = matvec.int8_matvec(x, rows.codes, rows.scales).float()
    want = x.float() @ exact.T
    assert (got.float() - want).abs().mean() < (requantised - want).abs().mean() / 2


def test_bad_input_is_refused_with_its_reason(built) -> None:
    rows = random_rows(8, 128, seed=1)
    with pytest.raises(RuntimeError, match="bf16"):
        matvec.int4_matvec(torch.randn(1, 128), *rows)
    with pytest.raises(RuntimeError, match=r"x \[M, 128\]"):
        matvec.int4_matvec(torch.randn(1, 64).bfloat16(), *rows)
    with pytest.raises(RuntimeError, match="fp16"):
        matvec.int4_matvec(torch.randn(1, 128).bfloat16(), rows.codes, rows.scales.float(), rows.mins)
    with pytest.raises(RuntimeError, match="multiple of 64"):
        odd = random_rows(8, 96, seed=2)
        matvec.int4_matvec(torch.randn(1, 96).bfloat16(), *odd)
    assert not matvec.takes_int4(96) and matvec.takes_int4(576)
    head = Int8Rows.of(torch.randn(16, 64))
    with pytest.raises(RuntimeError, match="bf16"):
        matvec.int8_matvec(torch.randn(1, 64).bfloat16(), head.codes, head.scales)  # fp32 scales
    blocks = q8_blocks(torch.randn(16, 64))
    with pytest.raises(RuntimeError, match=r"scales \[N, K / 32\] fp16"):
        matvec.q8_matvec(torch.randn(1, 64).bfloat16(), blocks.codes, blocks.scales.float())
    with pytest.raises(RuntimeError, match=r"x \[M, 64\]"):
        matvec.q8_matvec(torch.randn(1, 96).bfloat16(), blocks.codes, blocks.scales)


def test_the_gguf_s_rows_are_its_q4_1_blocks(tmp_path) -> None:
    """`store.gguf_rows` (the blocks' bytes as they are) and `q4_1_layers` (unpacked, the ATen kernel's groups) hold
    the same weights, fused the same way, q/k rows unpermuted alike."""
    from spd_lsp.engine.fast.q4 import q4_1_layers
    from spd_lsp.engine.fast.store import gguf_rows
    from spd_lsp.engine.model import bundled_gguf, load_model

    config = load_model(None, "cpu", fast=False).model.config
    from spd_lsp.engine.fast.store import rows_file

    rows, groups = gguf_rows(bundled_gguf(), config, directory=tmp_path), q4_1_layers(bundled_gguf(), config)
    kept = gguf_rows(tmp_path / "not-read.gguf", config, directory=tmp_path)  # a later start: the kept copy
    assert rows_file(tmp_path).is_file()
    assert all(torch.equal(a, b) for x, y in zip(rows, kept) for name in x for a, b in zip(x[name], y[name]))
    assert len(rows) == len(groups) == config.num_hidden_layers
    for layer in (0, len(rows) - 1):
        fused = q4.fused(groups[layer])
        assert set(rows[layer]) == set(fused) == set(q4.FUSED)
        for name, joined in fused.items():
            assert torch.equal(rows[layer][name].dequantised(), joined.dequantised())


def _tiny_bf16(*, matvec_on: bool) -> tuple[ModelRunner, object]:
    loaded = tiny_model("llama")
    loaded.model.to(torch.bfloat16)
    backend = fast.build(loaded.model, compile=False, quantize="int4", head="int8",
                         left_out=() if matvec_on else ("matvec",))
    backend.prepare()  # what the compile thread does before the step's first compile
    fast.attach(loaded.model, backend)
    return ModelRunner(loaded.model, loaded.device), backend


def test_prepare_moves_a_bf16_model_onto_the_kernels_and_its_steps_answer_as_before(built) -> None:
    ours, backend = _tiny_bf16(matvec_on=True)
    aten, plain = _tiny_bf16(matvec_on=False)
    assert backend.info["serving"]["qkv"]["decode"] == "q4_1 on matvec"
    assert backend.info["serving"]["head"]["decode"] == "int8 rows on matvec"
    assert plain.info["serving"]["qkv"]["decode"] == "int4 (ATen-packed) on aten"
    assert plain.info["serving"]["head"]["decode"] == "int8 rows on aten"
    assert plain.plan.why["matvec"] == "left out by the kernels setting"
    projections = backend.lm.projections()
    assert all(p.decode.kernel == "matvec" for p in projections)  # ATen's copy dropped: no Linear holds it
    assert backend.lm.weight_bytes("decode") == plain.lm.weight_bytes("decode")  # the rows as big as ATen's copy
    for runner in (ours, aten):
        runner.prefill(list(range(3, 30)))
    for token in (5, 6, 7):
        got, want = (r.forward(r.cache, embeds=r.embed(torch.tensor([[token]]))).float() for r in (ours, aten))
        # the same weights up to their scales' rounding (fp16 here, bf16 in ATen's), summed in another order
        assert (got - want).abs().max() <= 0.02 * want.abs().max()
        assert torch.equal(got.argmax(-1), want.argmax(-1))


def test_moving_onto_the_kernels_while_another_thread_steps_loses_no_step(built) -> None:
    """`prepare` in the compile thread while the serving thread steps: every step finds its weights (ATen's packed
    copy or the rows)."""
    loaded = tiny_model("llama")
    loaded.model.to(torch.bfloat16)
    backend = fast.build(loaded.model, compile=False, quantize="int4", head="int8")
    fast.attach(loaded.model, backend)
    runner = ModelRunner(loaded.model, loaded.device)
    runner.prefill(list(range(3, 30)))
    embeds = runner.embed(torch.tensor([[5]]))
    want = runner.forward(runner.cache, embeds=embeds).float()  # on ATen's copy
    runner.cache.crop(-1)
    mover = threading.Thread(target=backend.prepare)
    steps = 0
    mover.start()
    while mover.is_alive() or steps < 3:
        out = runner.forward(runner.cache, embeds=embeds).float()
        runner.cache.crop(-1)
        assert (out - want).abs().max() <= 0.02 * want.abs().max()  # either copy: the same weights
        steps += 1
    mover.join()
    assert backend.info["serving"]["qkv"]["decode"] == "q4_1 on matvec"


def test_the_step_on_the_kernels_compiles_as_one_graph(built, monkeypatch) -> None:
    from torch._dynamo.utils import counters

    monkeypatch.setenv("SPD_LSP_COMPILE", "1")
    torch._dynamo.reset()
    counters.clear()
    loaded, eager_loaded = tiny_model("llama"), tiny_model("llama")
    runners = []
    for made, compiled in ((loaded, True), (eager_loaded, False)):
        made.model.to(torch.bfloat16)
        backend = fast.build(made.model, compile=compiled, quantize="int4", head="int8")
        backend.prepare()
        fast.attach(made.model, backend)
        runners.append(ModelRunner(made.model, made.device))
        runners[-1].prefill(list(range(3, 20)))
    for token in range(5, 8):
        got, want = (r.forward(r.cache, embeds=r.embed(torch.tensor([[token]]))).float() for r in runners)
        assert (got - want).abs().max() <= 0.02 * want.abs().max()
    backend = fast.attached(loaded.model)
    assert backend.info["compiled"], backend.info["compileReason"]  # fullgraph: a graph break would have failed it
    assert backend.info["serving"]["qkv"]["decode"] == "q4_1 on matvec"
    assert counters["stats"]["unique_graphs"] == 1
    torch._dynamo.reset()
