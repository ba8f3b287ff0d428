"""The light model's float weights handed over to oneDNN's blocked layout (`engine/kernels/onednn.py`,
`layouts/dense.py`): the same numbers bit for bit, in eager forwards and in a compiled graph, the plain weights gone, and a second build refused clearly."""

from __future__ import annotations

from dataclasses import replace

import pytest
import torch
import torch.nn.functional as F
from transformers import AutoModelForCausalLM

from spd_lsp.engine import fast
from spd_lsp.engine.decoding import verify
from spd_lsp.engine.decoding.lm import ModelRunner
from spd_lsp.engine.cpu import PROFILES
from spd_lsp.engine.fast import light
from spd_lsp.engine.fast.layouts.dense import PackedDense
from spd_lsp.engine.fast.plan import resolve
from spd_lsp.engine.kernels import onednn
from tests.engine.test_fast import MODELS
from tests.engine.test_light import _saved

pytestmark = pytest.mark.skipif(
    not (torch.backends.mkldnn.is_available() and torch.ops.mkldnn._is_mkldnn_bf16_supported()),
    reason="no oneDNN bf16 on this CPU")


def _packing(backend: object) -> object:
    """`backend` with the plan it has on a CPU without AMX (where the packed weights serve; with AMX they are left to
    AMX's own bf16 matmuls): the tests pack on any CPU with oneDNN's bf16."""
    if not onednn.bf16_available():
        pytest.skip("oneDNN's bf16 is not in this torch or on this CPU")
    plan = backend.plan
    if plan.target.cpu is not None and plan.target.cpu.amx:
        backend.plan = resolve(plan.facts, replace(plan.target, cpu=PROFILES["avx512-bf16"]), left_out=plan.left_out,
                               compile=plan.compile)
    return backend


def test_where_it_packs() -> None:
    """bf16 on a CPU without AMX, where the float weights are the fast path's alone (not transformers' model's)."""
    from spd_lsp.engine.fast.plan import ModelFacts, Target

    facts = ModelFacts("llama", 64, {r: "float" for r in ("qkv", "out", "gate_up", "down")}, "float")
    for profile, packs in (("avx512-bf16", True), ("avx2", True), ("amx", False)):
        plan = resolve(facts, Target("cpu", "bfloat16", PROFILES[profile]))
        assert (plan.role("qkv").prefill.kernel == "onednn") == packs, profile
    assert resolve(facts, Target("cpu", "float32", PROFILES["avx2"])).role("qkv").prefill.kernel == "torch"
    assert resolve(facts, Target("cpu", "bfloat16", PROFILES["avx2"], onednn_bf16=False)).why["packed-weights"]
    shared = replace(facts, shared_float_weights=True)
    assert resolve(shared, Target("cpu", "bfloat16", PROFILES["avx2"])).role("qkv").prefill.kernel == "torch"
    left = resolve(facts, Target("cpu", "bfloat16", PROFILES["avx2"]), left_out=("packed-weights",))
    assert left.role("qkv").prefill.kernel == "torch"


@pytest.mark.parametrize("rows", [1, 8, 24, 500])
def test_a_packed_weight_gives_f_linear_bit_for_bit(rows) -> None:
    torch.manual_seed(rows)
    weight = torch.randn(96, 64, dtype=torch.bfloat16)
    packed = onednn.PackedWeight(weight)
    x = torch.randn(1, rows, 64, dtype=torch.bfloat16)
    assert torch.equal(packed(x), F.linear(x, weight)) and packed.nbytes() == weight.numel() * 2


def test_a_compiled_graph_calls_it_as_one_graph() -> None:
    from torch._dynamo.utils import counters

    torch._dynamo.reset()
    counters.clear()  # earlier tests' graphs (reset keeps the counters)
    weight = torch.randn(96, 64, dtype=torch.bfloat16)
    packed = onednn.PackedWeight(weight)
    compiled = torch.compile(lambda x: packed(x) * 2, fullgraph=True, dynamic=False)
    with torch.inference_mode():
        for rows in (12, 12):
            x = torch.randn(1, rows, 64, dtype=torch.bfloat16)
            assert torch.equal(compiled(x), F.linear(x, weight) * 2)
    assert counters["stats"]["unique_graphs"] == 1
    torch._dynamo.reset()


def test_the_light_model_hands_its_float_weights_over_and_answers_the_same(tmp_path) -> None:
    """Prefill, decode steps and a verification tree wider than the decode tier (the float weights' paths) of a bf16
    light model with its weights packed (by `prepare`, off the load) equal transformers' model's on plain weights; the
    light model's own weights are emptied (no second copy in memory) and building on it again says why it cannot."""
    directory = _saved(MODELS["llama"](), tmp_path)
    reference = AutoModelForCausalLM.from_pretrained(directory, dtype=torch.bfloat16).eval()
    made = light.load(directory, torch.bfloat16)
    backend = _packing(fast.build(made, compile=False))
    plain = _packing(fast.build(reference, compile=False))
    assert backend.plan.role("qkv").prefill.kernel == "onednn" and plain.plan.role("qkv").prefill.kernel == "torch"
    assert backend.info["serving"]["qkv"]["prefill"] == "bfloat16 on torch"
    backend.prepare()  # what the compile thread does before the step's first compile
    plain.prepare()
    assert backend.info["serving"]["qkv"]["prefill"] == "bfloat16 (oneDNN-blocked) on onednn"
    assert plain.info["serving"]["qkv"]["prefill"] == "bfloat16 on torch"
    assert backend.info["weightMegabytes"] == plain.info["weightMegabytes"]
    assert all(isinstance(linear, PackedDense) for p in backend.lm.projections()[:-1] for linear in p.linears())
    assert made.model.layers[0].self_attn.q_proj.weight.numel() == 0
    with pytest.raises(ValueError, match="took over"):
        fast.build(made, compile=False)
    fast.attach(made, backend)
    fast.attach(reference, plain)
    ours, theirs = ModelRunner(made, torch.device("cpu")), ModelRunner(reference, torch.device("cpu"))
    prompt = list(range(3, 40))
    assert torch.equal(ours.prefill(prompt)[0], theirs.prefill(prompt)[0])
    for token in (5, 7):
        step = [r.forward(r.cache, embeds=r.embed(torch.tensor([[token]]))) for r in (ours, theirs)]
        assert torch.equal(*step)
    drafts = [tuple(range(50, 62)), tuple(range(50, 56)) + (3,) * 4]  # 15 nodes
    got, want = (verify.packed_logits(r, r.cache, [drafts], [r.cache.get_seq_length()])[0] for r in (ours, theirs))
    assert got[1] == want[1] and all(torch.equal(a, b) for a, b in zip(got[0], want[0]))


def test_packing_while_another_thread_runs_forwards_loses_no_forward(tmp_path) -> None:
    """`prepare` in the compile thread while the serving thread prefills: every forward finds a weight (the packed
    one or the plain one) and answers the same."""
    import threading

    made = light.load(_saved(MODELS["llama"](), tmp_path), torch.bfloat16)
    backend = _packing(fast.build(made, compile=False))
    fast.attach(made, backend)
    runner = ModelRunner(made, torch.device("cpu"))
    prompt = list(range(3, 40))
    want = runner.prefill(prompt)[0]
    packer = threading.Thread(target=backend.prepare)
    got = []
    packer.start()
    while packer.is_alive() or len(got) < 3:
        runner.rewind(0)
        got.append(runner.prefill(prompt)[0])
    packer.join()
    assert all(torch.equal(g, want) for g in got) and backend.applied
