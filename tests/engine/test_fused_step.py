"""The whole plain decode step in one C++ call (spd_lsp/engine/fast/fused.py, engine/kernels/step.cpp): built for
real with the machine's compiler; its logits and the keys/values it writes are the eager fast path's bit for bit (the same row
kernels in the same order) for 1 to 8 rows, across attention chunks, with Qwen2's q/k/v biases and a head size of 128,
with the head as Q8_0 blocks or int8 rows;
where it serves, the step's graph is not compiled for the shapes it takes; what it cannot serve says why; bad input is
refused with its reason; the GIL is free while it runs."""

from __future__ import annotations

import sys
import threading
import time

from dataclasses import replace

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

from spd_lsp.engine import fast
from spd_lsp.engine.decoding.lm import ModelRunner
from spd_lsp.engine.fast import fused
from spd_lsp.engine.kernels import build as kernels
from tests.tiny_models import tiny_tokenizer

pytestmark = pytest.mark.skipif(not kernels.bf16_dot(), reason="no AVX-512 BF16 on this CPU")

SHAPES = {  # head sizes the kernel takes (64, 128); the bundled model's grouping (3 query heads a key/value head)
    "llama-64": dict(hidden_size=192, intermediate_size=256, num_attention_heads=3, num_key_value_heads=1, head_dim=64),
    "llama-128": dict(hidden_size=256, intermediate_size=384, num_attention_heads=4, num_key_value_heads=2, head_dim=128),
    "qwen2-64": dict(hidden_size=192, intermediate_size=256, num_attention_heads=3, num_key_value_heads=1),
}


def _model(shape: str) -> torch.nn.Module:
    torch.manual_seed(0)
    vocab = len(tiny_tokenizer())
    if shape.startswith("qwen2"):
        model = Qwen2ForCausalLM(Qwen2Config(vocab_size=vocab, num_hidden_layers=2, **SHAPES[shape]))
        for layer in model.model.layers:  # transformers initialises them to zeros: make them count
            for projection in (layer.self_attn.q_proj, layer.self_attn.k_proj, layer.self_attn.v_proj):
                torch.nn.init.normal_(projection.bias, std=0.5)
    else:
        model = LlamaForCausalLM(LlamaConfig(vocab_size=vocab, num_hidden_layers=2, **SHAPES[shape]))
    return model.eval().to(torch.bfloat16)


def as_q8(backend: object) -> None:
    """The backend's plan and sources as if the model's head were a GGUF's Q8_0 blocks (of its own float head)."""
    from tests.engine.test_matvec import q8_blocks

    blocks = q8_blocks(backend.lm.head)
    backend.plan = backend.plan.with_facts(head="q8_0")
    backend.sources = replace(backend.sources, head_blocks=lambda: blocks)


def _runner(shape: str, *, fused_on: bool, head: str = "int8") -> tuple[ModelRunner, object]:
    """The tiny model on the fast path with int4 projections and the int8 head (or, `head="q8"`, its weight as Q8_0
    blocks, as a GGUF holds the bundled model's) on our kernels (`prepare`, as the compile thread runs it), the fused
    step made or not."""
    model = _model(shape)
    backend = fast.build(model, compile=False, quantize="int4", head="int8", left_out=() if fused_on else ("fused-step",))
    if head == "q8":
        as_q8(backend)
    backend.prepare()
    fast.attach(model, backend)
    return ModelRunner(model, torch.device("cpu")), backend


@pytest.fixture(scope="module")
def built() -> None:
    assert kernels.build() and "bf16-dot" in kernels.features(), kernels.reason()


@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("rows, prompt", [(1, 5), (1, 130), (3, 64), (8, 70)])
@pytest.mark.parametrize("head", ["q8", "int8"])
def test_the_fused_step_answers_as_the_eager_path_bit_for_bit(built, shape, rows, prompt, head) -> None:
    ours, backend = _runner(shape, fused_on=True, head=head)
    eager, plain = _runner(shape, fused_on=False, head=head)
    assert backend.lm.output.decode.name == ("q8_0 on matvec" if head == "q8" else "int8 rows on matvec")
    assert backend.plan.step == "fused" and backend.fused is not None
    assert plain.plan.why["fused-step"] == "left out by the kernels setting" and plain.fused is None
    ids = [3 + (7 * i) % 300 for i in range(prompt)]
    for runner in (ours, eager):
        runner.prefill(ids)
    caches = [r.cache if rows == 1 else r.fork(rows) for r in (ours, eager)]
    generator = torch.Generator().manual_seed(rows + prompt)
    for _ in range(3):  # consecutive steps: each reads what the last one wrote
        # superposed inputs: weighted sums of embeddings, not any one token's
        mix = torch.softmax(torch.randn(rows, 1, 3, generator=generator), dim=-1)
        tokens = torch.randint(3, 300, (rows, 1, 3), generator=generator)
        embeds = (mix[..., None] * ours.embed(tokens.view(rows, 3)).view(rows, 1, 3, -1).float()).sum(2).bfloat16()
        before = backend.steps
        got, want = (r.forward(cache, embeds=embeds) for r, cache in zip((ours, eager), caches))
        assert backend.steps == before + 1  # through the backend's step (the fused one), not transformers' forward
        assert got.shape == want.shape == (rows, backend.lm.vocab)
        assert torch.equal(got, want)
    for a, b in zip(*(cache.layers for cache in caches)):
        assert a.length == b.length == prompt + 3
        assert torch.equal(a.keys, b.keys) and torch.equal(a.values, b.values)


def test_the_step_graph_is_not_compiled_for_the_shapes_the_fused_step_takes(built, monkeypatch) -> None:
    """Where the fused step serves, the background compile skips those shapes (no minute of inductor at every start);
    9 rows, beyond the kernel, still compile."""
    monkeypatch.setenv("SPD_LSP_COMPILE", "background")
    model = _model("llama-64")
    backend = fast.build(model, compile=True, quantize="int4", head="int8")
    fast.attach(model, backend)
    runner = ModelRunner(model, torch.device("cpu"))
    runner.prefill(list(range(3, 40)))
    first = runner.forward(runner.cache, embeds=runner.embed(torch.tensor([[5]])))  # eager: prepares in the background
    runner.cache.crop(-1)
    assert backend.step_fn.wait(timeout=300)
    assert backend.fused is not None and backend.plan.step == "fused"
    assert len(backend.step_fn.skipped) == 1 and not backend.step_fn.ready
    assert backend.info["notCompiled"].startswith("the fused step serves")
    # nothing compiles, and the status says so (it said "compiles in the background" for ever: the editor's
    # compile progress never ended)
    assert backend.info["compileState"] == "otherwise" and backend.info["compileReason"].startswith("the fused step")
    again = runner.forward(runner.cache, embeds=runner.embed(torch.tensor([[5]]))).float()
    assert (again - first.float()).abs().max() <= 0.05 * first.float().abs().max()  # ATen's kernels first, then ours
    steps = backend.steps
    wide = runner.fork(9)
    runner.forward(wide, embeds=runner.embed(torch.full((9, 1), 5)))
    assert backend.steps == steps + 1
    assert backend.step_fn.wait(timeout=600) and len(backend.step_fn.ready) == 1  # 9 rows: the graph
    assert backend.info["compileState"] == "compiled"


def test_a_plan_applied_at_the_start_says_the_fused_step_serves_before_any_step(built, monkeypatch) -> None:
    """The kernel library built already: the plan is applied at the start and the step function is never called for
    plain steps; the status says the fused step serves them (not a compile "on the first step" that never comes)."""
    monkeypatch.setenv("SPD_LSP_COMPILE", "background")
    model = _model("llama-64")
    backend = fast.build(model, compile=True, quantize="int4", head="int8")
    assert backend.info["compileState"] == "background"  # before the plan: the steps' graph is still to come
    backend.start()
    assert backend.fused is not None
    assert backend.info["compileState"] == "otherwise", backend.info
    assert backend.info["compileReason"] == f"the fused step serves plain steps of up to {backend.fused_rows} rows"


def test_what_the_fused_step_cannot_serve_says_why(built) -> None:
    model = _model("llama-64")
    backend = fast.build(model, compile=False, quantize="int4", head="float")
    backend.prepare()
    assert backend.fused is None and backend.plan.why["fused-step"] == "a head not on the matvec kernels"
    model = _model("llama-64").float()
    backend = fast.build(model, compile=False, quantize="int4", head="int8")
    backend.prepare()
    assert backend.fused is None and backend.plan.why["fused-step"] == "float32 weights (the kernels run bf16)"
    model = _model("llama-64")
    backend = fast.build(model, compile=False, head="int8")  # float projections
    backend.prepare()
    assert backend.plan.why["fused-step"] == "projections not on the matvec kernels"


def test_bad_input_is_refused_with_its_reason(built) -> None:
    _, backend = _runner("llama-64", fused_on=True)
    model, lm = backend.fused, backend.lm
    buffers = [torch.zeros(9, 1, 256, 64, dtype=torch.bfloat16) for _ in range(lm.layers)]
    with pytest.raises(RuntimeError, match="1 to 8 rows"):
        fused.run(model, torch.zeros(9, 1, 192, dtype=torch.bfloat16), 0, buffers, buffers)
    one = [b[:1] for b in buffers]
    with pytest.raises(RuntimeError, match=r"x \[M, 1, 192\]"):
        fused.run(model, torch.zeros(1, 1, 192), 0, one, one)  # fp32
    with pytest.raises(RuntimeError, match="cache buffer"):
        fused.run(model, torch.zeros(1, 1, 192, dtype=torch.bfloat16), 256, one, one)  # past the buffer
    with pytest.raises(RuntimeError, match="one key and one value buffer a layer"):
        fused.run(model, torch.zeros(1, 1, 192, dtype=torch.bfloat16), 0, one[:1], one[:1])
    with pytest.raises(RuntimeError, match="a head dim of 64, 128 or 256"):
        torch.classes.spd.StepModel([2, 192, 3, 1, 96, 256, 0, 0], [1e-5, 0.125], [])
    empty = torch.classes.spd.StepModel([2, 192, 3, 1, 64, 256, 0, 0], [1e-5, 0.125],
                                        [torch.zeros(16, 64, dtype=torch.bfloat16)] * 2)
    with pytest.raises(RuntimeError, match="no head|not added"):
        fused.run(empty, torch.zeros(1, 1, 192, dtype=torch.bfloat16), 0, one, one)
    with pytest.raises(RuntimeError, match="kind q4, q4k, q8 or q8k"):
        empty.add_segment(0, 0, "q3", [torch.zeros(4, 4)], 32)


def test_the_gil_is_free_while_the_fused_step_runs(built) -> None:
    """A server's other threads (its LSP I/O, the next request's parsing) go on while a step runs."""
    _, backend = _runner("llama-128", fused_on=True)
    lm = backend.lm
    lm.reserve_positions(4001)  # fused.run called directly: the tables for its columns, as `step` asks for them
    buffers = [torch.zeros(8, lm.kv_heads, 4096, 128, dtype=torch.bfloat16) for _ in range(lm.layers)]
    x = torch.randn(8, 1, 256).bfloat16()
    done = threading.Event()
    seen: list[float] = []  # when the other thread ran

    def other() -> None:
        while not done.is_set():
            seen.append(time.perf_counter())

    thread = threading.Thread(target=other)
    interval = sys.getswitchinterval()
    sys.setswitchinterval(0.0002)  # a hand-over at the call's edge lasts this long, not 5 ms
    thread.start()
    try:
        windows = []
        for _ in range(20):  # steps of 8 rows on 4,001 columns; the other thread's clock readings inside one
            started = time.perf_counter()
            fused.run(backend.fused, x, 4000, buffers, buffers)
            windows.append((started, time.perf_counter()))
    finally:
        done.set()
        thread.join()
        sys.setswitchinterval(interval)
    # readings in the middle half of a step: the other thread ran Python while the step was in C++ (a step that held
    # the GIL could only have been preceded by a hand-over at its edge)
    inside = [t for start, end in windows for t in seen if start + (end - start) / 4 < t < end - (end - start) / 4]
    assert len(inside) > 0
