"""The eager forward's fused pointwise ops (spd_lsp/engine/kernels/pointwise.cpp): built for real with the machine's
compiler, each equal to the tensor ops it replaces (FastLM's norm, rotary, SiLU and residual sums in bf16) through
strided views, broadcasts and widths that are no multiple of a vector; bad input refused clearly; a bf16 model's
prefill and decode answering as on the tensor ops; and never inside a compiled graph."""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.nn.functional as F
from transformers import LlamaConfig, LlamaForCausalLM

from spd_lsp.engine import fast
from spd_lsp.engine.decoding.lm import ModelRunner
from spd_lsp.engine.kernels import build as kernels
from tests.tiny_models import bf16_fast_llama

EPS = 1e-5
ops = torch.ops.spd


@pytest.fixture(scope="module")
def built() -> None:
    assert kernels.build(), kernels.reason()


def _norm(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    h = x.float()
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + EPS)
    return weight * h.to(x.dtype)


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return x * cos + torch.cat((-x[..., half:], x[..., :half]), dim=-1) * sin


def _within_one_bit(got: torch.Tensor, want: torch.Tensor) -> None:
    """bf16 outputs equal, or one rounding apart (the sum of squares adds in another order): a relative 2^-7."""
    assert got.dtype == want.dtype == torch.bfloat16 and got.shape == want.shape
    torch.testing.assert_close(got.float(), want.float(), rtol=2 ** -7, atol=1e-6)
    assert (got == want).float().mean() > 0.99


@pytest.mark.parametrize("shape", [(1, 1, 576), (2, 7, 576), (1, 300, 100), (3, 40)])
def test_the_norms_equal_the_tensor_ops(built, shape) -> None:
    torch.manual_seed(0)
    x, y = (3 * torch.randn(shape, dtype=torch.bfloat16) for _ in range(2))
    weight = torch.randn(shape[-1], dtype=torch.bfloat16)
    _within_one_bit(ops.rms_norm(x, weight, EPS), _norm(x, weight))
    total, normed = ops.add_rms_norm(x, y, weight, EPS)
    assert torch.equal(total, x + y)
    _within_one_bit(normed, _norm(x + y, weight))


def test_the_norm_reads_strided_rows(built) -> None:
    torch.manual_seed(1)
    x = torch.randn(3, 9, 200, dtype=torch.bfloat16)
    weight = torch.randn(100, dtype=torch.bfloat16)
    for view in (x[:, :, 50:150], x[:, -1:, :100], x.transpose(0, 1)[:, :, 100:]):  # row gaps, a last row, any order
        assert not view.is_contiguous()
        assert torch.equal(ops.rms_norm(view, weight, EPS), ops.rms_norm(view.contiguous(), weight, EPS))
        _within_one_bit(ops.rms_norm(view, weight, EPS), _norm(view, weight))


@pytest.mark.parametrize("rows, width", [(1, 1536), (512, 1536), (5, 70)])
def test_silu_times_up_equals_the_tensor_ops(built, rows, width) -> None:
    torch.manual_seed(2)
    gate_up = 4 * torch.randn(1, rows, 2 * width, dtype=torch.bfloat16)
    gate, up = gate_up.chunk(2, dim=-1)
    got = ops.silu_mul(gate_up)
    assert got.shape == (1, rows, width)
    _within_one_bit(got, F.silu(gate) * up)


@pytest.mark.parametrize("rows, tokens, heads, dim", [(1, 512, 9, 64), (2, 5, 3, 64), (1, 3, 2, 128), (1, 4, 2, 20)])
def test_rotary_equals_the_tensor_ops_on_a_projection_s_view(built, rows, tokens, heads, dim) -> None:
    torch.manual_seed(3)
    fused = torch.randn(rows, tokens, (heads + 2) * dim, dtype=torch.bfloat16)  # q beside other heads' columns
    x = fused[..., dim : (heads + 1) * dim]
    positions = torch.randint(0, 8000, (rows, tokens))
    freqs = positions[..., None].float() / (10000 ** (torch.arange(0, dim, 2).float() / dim))
    table = torch.cat((freqs, freqs), dim=-1)
    cos, sin = table.cos().bfloat16(), table.sin().bfloat16()
    got = ops.rotary(x, cos, sin, heads)
    assert got.shape == (rows, tokens, heads, dim)
    want = _rotate(x.view(rows, tokens, heads, dim).transpose(1, 2), cos[:, None], sin[:, None])
    _within_one_bit(got.transpose(1, 2), want)
    broadcast = ops.rotary(x, cos[:1].expand(rows, -1, -1), sin[:1].expand(rows, -1, -1), heads)  # one row's positions
    assert torch.equal(broadcast[:1], got[:1])


def test_the_ops_say_what_is_wrong_with_their_inputs(built) -> None:
    x, weight = torch.randn(2, 4, 64, dtype=torch.bfloat16), torch.randn(64, dtype=torch.bfloat16)
    with pytest.raises(RuntimeError, match="x must be a bf16 CPU tensor"):
        ops.rms_norm(x.float(), weight, EPS)
    with pytest.raises(RuntimeError, match=r"weight must be \[64\]"):
        ops.rms_norm(x, weight[:32], EPS)
    with pytest.raises(RuntimeError, match="contiguous last dim"):
        ops.rms_norm(x.transpose(1, 2), weight[:4], EPS)
    with pytest.raises(RuntimeError, match="one shape"):
        ops.add_rms_norm(x, x[:1], weight, EPS)
    with pytest.raises(RuntimeError, match="even"):
        ops.silu_mul(x[..., :63])
    with pytest.raises(RuntimeError, match="last dim must not be empty"):
        ops.silu_mul(x[..., :0])
    with pytest.raises(RuntimeError, match=r"\[B, T, heads \* D\]"):
        ops.rotary(x, x[..., :20], x[..., :20], 3)
    with pytest.raises(RuntimeError, match=r"cos and sin must be \[B, T, D\]"):
        ops.rotary(x, x[:, :2, :32], x[:, :2, :32], 2)


def _bf16_backend(*, pointwise: bool) -> tuple[Any, Any]:
    model, backend = bf16_fast_llama(pointwise=pointwise)
    assert backend.info["fastPlan"]["pointwise"] == "ours"
    return model, backend


def test_a_bf16_prefill_and_an_eager_step_answer_as_on_the_tensor_ops(built) -> None:
    prompt = [(7 * i) % 50 + 3 for i in range(300)]
    answers = []
    for pointwise in (True, False):
        model, _ = _bf16_backend(pointwise=pointwise)
        runner = ModelRunner(model, torch.device("cpu"))
        first, _ = runner.prefill(prompt[:200])
        last, _ = runner.prefill(prompt)  # a chunk on the cache
        step, _ = runner.prefill(prompt + [5])  # one token on the cache: an eager decode step's shapes
        answers.append([first.float(), last.float(), step.float()])
    for got, want in zip(*answers):
        assert (got - want).abs().max() <= 0.02 * want.abs().max()
        assert torch.equal(got.argmax(-1), want.argmax(-1))


def test_a_compiled_graph_keeps_the_tensor_ops(built) -> None:
    """Inside torch.compile the forward traces the tensor ops (inductor fuses them itself), whole, no graph break, and
    without a guard on the switch (a benchmark turning it off and on would recompile the step)."""
    model, backend = _bf16_backend(pointwise=True)
    lm = backend.lm
    seen: list[str] = []

    def record(graph: torch.fx.GraphModule, _inputs):
        seen.extend(str(node.target) for node in graph.graph.nodes)
        return graph.forward

    x = lm.embedding(torch.tensor([[3, 4, 5]]))
    positions = torch.arange(3)[None]
    compiled = torch.compile(lambda x: lm.forward(x, positions, None, lambda i, k, v: (k, v)), backend=record,
                             fullgraph=True)
    with torch.inference_mode():
        got = compiled(x)
        want = lm.forward(x, positions, None, lambda i, k, v: (k, v))
    assert seen and not [target for target in seen if "spd." in target and target.split(".")[-2] in ("rms_norm", "add_rms_norm", "silu_mul", "rotary")]
    assert torch.equal(got.argmax(-1), want.argmax(-1))
    traced = len(seen)
    lm.pointwise = False  # the graph never read it, so it has no guard on it: turning it off recompiles nothing
    with torch.inference_mode():
        compiled(x)
    assert len(seen) == traced
    torch._dynamo.reset()


def test_the_pointwise_ops_can_be_left_out(built) -> None:
    config = LlamaConfig(vocab_size=64, hidden_size=64, intermediate_size=128, num_hidden_layers=1,
                         num_attention_heads=4, num_key_value_heads=2)
    backend = fast.build(LlamaForCausalLM(config).eval().to(torch.bfloat16), compile=False, left_out=("pointwise",))
    backend.prepare()
    assert backend.kernel and backend.info["fastPlan"]["pointwise"] == "torch" and not backend.lm.pointwise
