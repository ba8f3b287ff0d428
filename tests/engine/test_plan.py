"""The fast path's plan (spd_lsp/engine/fast/plan.py), resolved for every CPU profile users run and for CUDA without that
hardware: which layout and kernel serve each projection's tiers, which engine runs each forward, and why what is not
used is not; the `kernels` setting's names; the plan without the kernel library (before it loads, or where it cannot
be built)."""

from __future__ import annotations

import pytest

from spd_lsp.engine.cpu import PROFILES, CpuProfile, cpu_flags
from spd_lsp.engine.fast.plan import AMX_LAST_ROWS, DECODE_ROWS, KERNELS, Choice, ModelFacts, Target, left_out_of, resolve

# The bundled model as the loader sees it: the GGUF's Q4_1 projections and Q8_0 head, head size 64.
BUNDLED = ModelFacts("llama", 64, {r: "q4_1" for r in ("qkv", "out", "gate_up", "down")}, "q8_0")


def _cpu(profile: str, dtype: str = "bfloat16") -> Target:
    return Target("cpu", dtype, PROFILES[profile])


def test_amx_runs_decode_on_matvec_and_trees_on_tiles() -> None:
    plan = resolve(BUNDLED, _cpu("amx"))
    assert plan.role("qkv").decode == Choice("q4_1", "matvec") and plan.role("qkv").batch == Choice("q4_1", "amx")
    assert plan.role("head").decode == Choice("q8_0", "matvec") and plan.role("head").batch == Choice("q8_0", "amx")
    assert plan.role("qkv").prefill == Choice("bfloat16", "torch")  # AMX's own bf16 matmuls: nothing packed
    assert (plan.tiers.decode_rows, plan.tiers.batch_rows) == (2, AMX_LAST_ROWS)
    assert plan.step == "fused" and plan.prompt_attention == "ours with amx" and plan.library


def test_avx512_bf16_without_amx_packs_the_float_weights_for_trees_and_prefill() -> None:
    plan = resolve(BUNDLED, _cpu("avx512-bf16"))
    assert plan.role("down").decode == Choice("q4_1", "matvec")
    assert plan.role("down").batch == plan.role("down").prefill == Choice("bfloat16", "onednn")
    assert (plan.tiers.decode_rows, plan.tiers.batch_rows) == (DECODE_ROWS, DECODE_ROWS)
    assert plan.step == "fused" and plan.prompt_attention == "ours" and plan.why["amx"].startswith("no AMX tiles")


@pytest.mark.parametrize("profile", ["avx2", "arm64"])
def test_without_avx512_bf16_torch_s_int4_kernels_serve_and_the_step_is_a_graph(profile: str) -> None:
    plan = resolve(BUNDLED, _cpu(profile))
    assert plan.role("qkv").decode == Choice("int4 (ATen-packed)", "aten")
    assert plan.role("head").decode == Choice("q8_0 (two int4 halves)", "aten")
    assert plan.step == "compiled" and plan.attention == "ours" and plan.prompt_attention == "sdpa"
    assert plan.why["matvec"].startswith("no AVX-512 BF16") and plan.why["fused-step"]


def test_cuda_runs_tinygemm_and_torch_s_attention() -> None:
    facts = ModelFacts("llama", 64, {r: "q4_1" for r in ("qkv", "out", "gate_up", "down")}, "float")
    plan = resolve(facts, Target("cuda", "bfloat16"))
    assert plan.role("qkv").decode == Choice("int4 (ATen-packed)", "tinygemm")
    assert plan.role("head").decode == Choice("bfloat16", "torch")
    assert plan.attention == "sdpa" and plan.pointwise == "torch" and not plan.library
    assert plan.step == "compiled" and plan.why["matvec"] == "a CPU kernel (cuda runs torch's)"


def test_fp32_keeps_the_float_weights_and_says_why() -> None:
    plan = resolve(BUNDLED, _cpu("avx512-bf16", "float32"))
    assert plan.role("qkv").decode == Choice("int4 (ATen-packed)", "aten")
    assert plan.attention == "ours" and plan.pointwise == "torch"
    assert plan.why["fused-step"] == "float32 weights (the kernels run bf16)"


def test_the_kernels_setting_leaves_out_what_it_names_and_refuses_unknown_names() -> None:
    assert left_out_of("auto") == () and left_out_of(None) == ()
    assert left_out_of(["amx", "matvec", "amx"]) == ("amx", "matvec")
    with pytest.raises(ValueError, match="unknown 'avx'"):
        left_out_of(["avx"])
    plan = resolve(BUNDLED, _cpu("amx"), left_out=("amx", "fused-step", "compile"))
    assert plan.role("qkv").batch.kernel != "amx" and plan.step == "eager" and plan.prompt_attention == "ours"
    assert all(plan.why[name] == "left out by the kernels setting" for name in ("amx", "fused-step", "compile"))
    everything = resolve(BUNDLED, _cpu("amx"), left_out=tuple(KERNELS))
    assert not everything.library and everything.step == "eager"


def test_the_plan_without_the_library_is_what_serves_until_it_loads() -> None:
    plan = resolve(BUNDLED, _cpu("amx"))
    waiting = plan.without_library("not loaded yet")
    assert waiting.role("qkv").decode == Choice("int4 (ATen-packed)", "aten")
    assert waiting.role("qkv").batch == Choice("bfloat16", "torch") and waiting.step == "compiled"
    assert waiting.attention == "sdpa" and waiting.why["matvec"] == "kernel library not loaded: not loaded yet"
    assert not waiting.library and waiting.without_library("again") is waiting


def test_the_status_is_structured() -> None:
    status = resolve(BUNDLED, _cpu("avx512-bf16")).status()
    assert status["isa"] == "avx512-bf16" and status["engines"]["step"] == "fused"
    assert status["projections"]["head"] == {"decode": "q8_0 on matvec", "batch": "bfloat16 on torch",
                                             "prefill": "bfloat16 on torch"}
    assert status["tiers"] == {"decode": [1, 8], "batch": None, "prefill": [9, None]}


def test_the_cpu_profile_follows_torch_s_capability(tmp_path) -> None:
    flags = frozenset({"avx2", "avx512f", "avx512_bf16", "amx_tile", "amx_bf16"})
    assert CpuProfile("x86_64", "AVX512", flags).isa == "amx"
    assert CpuProfile("x86_64", "AVX2", flags).isa == "avx2"  # ATEN_CPU_CAPABILITY=avx2 on an AVX-512 CPU
    assert CpuProfile("x86_64", "AVX512", frozenset({"avx512f"})).isa == "avx512"
    assert CpuProfile("aarch64", "DEFAULT", frozenset({"asimd"})).isa == "neon"
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text("processor : 0\nflags : fpu avx2\n\nprocessor : 1\nflags : fpu avx2\n")
    assert cpu_flags(cpuinfo) == {"fpu", "avx2"}
    from spd_lsp.engine.kernels.build import profile

    assert profile().isa in ("amx", "avx512-bf16", "avx512", "avx2", "neon", "scalar")


def _without_vnni(profile: str) -> Target:
    cpu = PROFILES[profile]
    return Target("cpu", "bfloat16", CpuProfile(cpu.arch, cpu.capability, cpu.flags - {"avx512_vnni"}))


def test_a_model_of_blocks_with_vnni_and_no_amx_runs_trees_on_int8_dots_and_keeps_no_copy() -> None:
    """With VNNI beside AVX-512 BF16 (no AMX), every model of blocks runs its layers' trees and batches on the blocks'
    integer dot products (the bundled model's projections at 8 / 22 rows 18 / 48 ms against its bf16 copy's 30 / 51
    on a Xeon without AMX), its prefill on tiles (bf16 x: int8 x there moved top drafts), and no copy is kept (212 MB);
    the decode tier and the head stay as they were.
    Left out ("int8"), the copy serves as before."""
    from spd_lsp.engine.fast.plan import BATCH_MATVEC_ROWS

    small = ModelFacts("llama", 64, {r: "q4_1" for r in ("qkv", "out", "gate_up", "down")}, "q8_0",
                       from_blocks=True, float_copy_bytes=212_000_000)
    large = ModelFacts("llama", 64, {r: "q4_k" for r in ("qkv", "out", "gate_up", "down")}, "q6_k",
                       from_blocks=True, float_copy_bytes=3_200_000_000)
    for facts, layout, head in ((small, "q4_1", "q8_0"), (large, "q4_k", "q6_k")):
        plan = resolve(facts, _cpu("avx512-bf16"))
        assert plan.role("down").decode == Choice(layout, "matvec")
        assert plan.role("down").batch == Choice(layout, "int8") and plan.role("down").prefill == Choice(layout, "tiles")
        assert plan.role("head").batch == Choice(head, "matvec") and plan.role("head").prefill.kernel == "tiles"
        assert plan.tiers.batch_rows == BATCH_MATVEC_ROWS and plan.step == "fused"
        assert "integer dot products" in plan.why["packed-weights"]
    left = resolve(small, _cpu("avx512-bf16"), left_out=("int8",))
    assert left.role("down").batch == left.role("down").prefill == Choice("q4_1 (bf16 copy)", "onednn")
    assert resolve(small, _cpu("avx512-bf16")).without_library("building").role("down").batch.kernel != "int8"
    assert resolve(small, _cpu("amx")).role("down").batch.kernel == "amx"  # AMX's tiles where there are some


def test_a_large_model_of_blocks_without_amx_or_vnni_runs_its_trees_on_the_matvec_kernels() -> None:
    """Trees of a model of blocks with no float copy, on a CPU without AMX or VNNI: the matvec kernels up to
    BATCH_MATVEC_ROWS rows (the 1.7B Q4_K_M's verification 1.1-1.3 s on tiles, 0.37-0.57 s so); with AMX the tiles as
    before; a small model keeps its bf16 copy; prefill stays on tiles."""
    from spd_lsp.engine.fast.plan import BATCH_MATVEC_ROWS

    large = ModelFacts("llama", 64, {r: "q4_k" for r in ("qkv", "out", "gate_up", "down")}, "q6_k",
                       from_blocks=True, float_copy_bytes=3_200_000_000)
    for target in (_without_vnni("avx512-bf16"), _cpu("avx2")):
        plan = resolve(large, target)
        assert plan.role("gate_up").batch == plan.role("gate_up").decode == Choice("q4_k", "matvec"), target
        assert plan.role("head").batch == Choice("q6_k", "matvec") and plan.role("gate_up").prefill.kernel == "tiles"
        assert (plan.tiers.decode_rows, plan.tiers.batch_rows) == (DECODE_ROWS, BATCH_MATVEC_ROWS)
    plan = resolve(large, _cpu("amx"))
    assert plan.role("gate_up").batch == Choice("q4_k", "tiles") and plan.tiers.batch_rows == DECODE_ROWS
    small = ModelFacts("llama", 64, {r: "q4_1" for r in ("qkv", "out", "gate_up", "down")}, "q8_0",
                       from_blocks=True, float_copy_bytes=212_000_000)
    plan = resolve(small, _without_vnni("avx512-bf16"))
    assert plan.role("down").batch == plan.role("down").prefill == Choice("q4_1 (bf16 copy)", "onednn")
    # its head has no copy: a tree's rows on the matvec kernels (19 -> 12 ms at 22 rows), a prompt's on tiles
    assert plan.role("head").batch == Choice("q8_0", "matvec") and plan.role("head").prefill.kernel == "tiles"
    assert plan.tiers.batch_rows == BATCH_MATVEC_ROWS
    assert resolve(small, _cpu("amx")).role("head").batch.kernel == "amx"
    assert resolve(large, _without_vnni("avx512-bf16")).without_library("building").role("down").batch.kernel == "torch"


def test_trees_run_eager_beside_the_fused_step_and_for_a_large_model() -> None:
    """A graph of the trees saved nothing beside the fused step (the bundled model ~65 ms either way, +131 MB RSS; the
    1.7B Q4_K_M 228 s to compile, no faster): they run eager there, and for any model of blocks too large for a bf16
    copy; elsewhere (no AVX-512 BF16: no fused step) they still compile. The status says why."""
    large = ModelFacts("llama", 64, {r: "q4_k" for r in ("qkv", "out", "gate_up", "down")}, "q6_k",
                       from_blocks=True, float_copy_bytes=3_200_000_000)
    for profile in ("amx", "avx512-bf16", "avx2"):
        plan = resolve(large, _cpu(profile))
        assert plan.tree_step == "eager" and "3,200 MB" in plan.why["tree-compile"], profile
        assert plan.padded_step == "compiled"
    for profile in ("amx", "avx512-bf16"):
        plan = resolve(BUNDLED, _cpu(profile))
        assert plan.step == "fused" and plan.tree_step == "eager" and "fused step" in plan.why["tree-compile"]
    plan = resolve(BUNDLED, _cpu("avx2"))
    assert plan.step != "fused" and plan.tree_step == "compiled" and "tree-compile" not in plan.why
    assert resolve(large, _cpu("amx"), compile=False).tree_step == "eager"


def test_the_backend_of_a_large_model_says_why_its_trees_run_eager(tmp_path, monkeypatch) -> None:
    import torch
    from gguf import GGMLQuantizationType as T
    from transformers import LlamaConfig, LlamaForCausalLM

    from spd_lsp.engine.decoding.backends import attached
    from spd_lsp.engine.fast import plan as plan_module
    from spd_lsp.engine.model import load_model
    from tests.gguf_support import write_gguf

    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=49152, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                         num_attention_heads=4, num_key_value_heads=2)).eval()
    path = write_gguf(model, tmp_path / "tiny.gguf", quantize=int(T.Q4_0))
    monkeypatch.setenv("SPD_LSP_MODEL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(plan_module, "FLOAT_COPY_MAX", 0)  # the tiny model counts as a large one
    backend = attached(load_model(str(path), "cpu").model)
    assert backend.plan.tree_step == "eager"
    assert "runs its trees eager" in backend.info["treeStep"]["compileReason"]
    assert backend.tree_fn.compiled is None and backend.tree_fn.reason.startswith("a model this large")
