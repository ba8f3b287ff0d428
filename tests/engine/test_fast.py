"""The fast path (spd_lsp/engine/fast): its forward equals transformers', its caches behave as theirs, int4 groups
are the GGUF's numbers, and the decode step compiles as one graph."""

from __future__ import annotations

import copy
import threading
import time
from typing import Any

import numpy as np
import pytest
import torch
from transformers import DynamicCache, LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

from spd_lsp.engine import fast
from spd_lsp.engine.decoding.lm import ModelRunner
from spd_lsp.engine.fast.cache import GRANULE, MIN_CAPACITY, BucketLayer, bucket, bucket_cache
from spd_lsp.engine.fast.layouts.aten import AtenInt4, Int8Aten, Q8Halves
from spd_lsp.engine.fast.layouts.blocks import Int8Rows
from spd_lsp.engine.fast.model import FastLM
from spd_lsp.engine.fast.q4 import BLOCK, Groups, quantise, unpack_q4_1, unpermute_order
from tests.tiny_models import compiling_pair, step_pair, tiny_model


def _qwen2() -> torch.nn.Module:
    torch.manual_seed(0)
    config = Qwen2Config(vocab_size=300, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2)
    model = Qwen2ForCausalLM(config).eval()
    for layer in model.model.layers:  # q/k/v biases: what Qwen2 adds to Llama
        for proj in (layer.self_attn.q_proj, layer.self_attn.k_proj, layer.self_attn.v_proj):
            torch.nn.init.normal_(proj.bias, std=0.5)
    return model


def _llama_with_biases() -> torch.nn.Module:
    """Llama's `attention_bias`: q/k/v *and* o biases (Qwen2 has no o bias)."""
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=300, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, attention_bias=True)
    model = LlamaForCausalLM(config).eval()
    for layer in model.model.layers:
        for proj in (layer.self_attn.q_proj, layer.self_attn.k_proj, layer.self_attn.v_proj, layer.self_attn.o_proj):
            torch.nn.init.normal_(proj.bias, std=0.5)
    return model


def _qwen3() -> torch.nn.Module:
    """Qwen3: q and k normed per head before the rotation (random norm weights, so that they count)."""
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(0)
    config = Qwen3Config(vocab_size=300, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, head_dim=16)
    model = Qwen3ForCausalLM(config).eval()
    for layer in model.model.layers:
        for norm in (layer.self_attn.q_norm, layer.self_attn.k_norm):
            torch.nn.init.normal_(norm.weight, mean=1.0, std=0.3)
    return model


def _gemma3(window: int = 512) -> torch.nn.Module:
    """Gemma-3: GeGLU, norms on each block's outputs, q/k norms, a scaled embedding, one sliding and one global layer
    (their own rotary bases), norms as 1 + weight (random, so that they count)."""
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig

    torch.manual_seed(0)
    config = Gemma3TextConfig(vocab_size=300, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                              num_attention_heads=4, num_key_value_heads=2, head_dim=16, sliding_window=window,
                              layer_types=["sliding_attention", "full_attention"], query_pre_attn_scalar=24)
    model = Gemma3ForCausalLM(config).eval()
    for name, parameter in model.named_parameters():
        if "norm" in name:
            torch.nn.init.normal_(parameter, std=0.3)
    return model


MODELS = {"llama": lambda: tiny_model("llama").model, "qwen2": _qwen2, "llama-biases": _llama_with_biases,
          "qwen3": _qwen3, "gemma3": _gemma3}


@pytest.mark.parametrize("family", MODELS)
@torch.inference_mode()
def test_forward_equals_transformers_on_prefill_steps_padding_and_tree_masks(family: str) -> None:
    model = MODELS[family]()
    ids = torch.randint(0, 300, (2, 9), generator=torch.Generator().manual_seed(1))
    theirs_cache, ours_cache = DynamicCache(config=model.config), bucket_cache(model.config.num_hidden_layers)
    want = model(input_ids=ids[:, :7], past_key_values=theirs_cache).logits
    lm = FastLM.of_module(copy.deepcopy(model))
    torch.testing.assert_close(lm(input_ids=ids[:, :7], past_key_values=ours_cache).logits, want, atol=1e-5, rtol=1e-4)
    embeds = model.get_input_embeddings()(ids[:, 7:8])  # a step on embeddings, as superposed decoding feeds
    want = model(inputs_embeds=embeds, past_key_values=theirs_cache).logits
    torch.testing.assert_close(lm(inputs_embeds=embeds, past_key_values=ours_cache).logits, want, atol=1e-5, rtol=1e-4)
    mask = torch.ones(2, 9, dtype=torch.long)
    mask[1, :3] = 0  # a left-padded row
    want = model(input_ids=ids, attention_mask=mask).logits
    torch.testing.assert_close(lm(input_ids=ids, attention_mask=mask).logits[:, 3:], want[:, 3:], atol=1e-5, rtol=1e-4)
    tree = torch.zeros(1, 1, 3, 3)  # a 4-D additive mask: the third token does not see the second
    tree[0, 0, 2, 1] = torch.finfo(torch.float32).min
    tree = tree + torch.triu(torch.full((3, 3), torch.finfo(torch.float32).min), diagonal=1)
    positions = torch.tensor([[0, 1, 1]])
    want = model(input_ids=ids[:1, :3], attention_mask=tree, position_ids=positions).logits
    got = lm(input_ids=ids[:1, :3], attention_mask=tree, position_ids=positions).logits
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-4)


@torch.inference_mode()
def test_gemma3_s_sliding_layers_see_only_their_window_as_transformers_does() -> None:
    """A window of 4 on prompts of 9: the sliding layer's queries reach back 4 positions, the global one's all; in one
    forward, in chunks on a cache, and in decode steps (the step's column given)."""
    model = _gemma3(window=4)
    ids = torch.randint(0, 300, (1, 12), generator=torch.Generator().manual_seed(3))
    want = model(input_ids=ids).logits
    lm = FastLM.of_module(copy.deepcopy(model))
    torch.testing.assert_close(lm(input_ids=ids).logits, want, atol=1e-5, rtol=1e-4)
    cache = bucket_cache(2)
    got = [lm(input_ids=ids[:, :6], past_key_values=cache).logits]
    for column in range(6, 12):
        got.append(lm(inputs_embeds=lm.embedding(ids[:, column:column + 1]), past_key_values=cache).logits)
    torch.testing.assert_close(torch.cat(got, dim=1), want, atol=1e-5, rtol=1e-4)


def test_bucket_layers_crop_copy_reorder_and_grow_as_plain_layers() -> None:
    keys = torch.randn(2, 3, 5, 4)
    theirs, ours = DynamicCache(), bucket_cache(1)
    for cache in (theirs, ours):
        cache.update(keys, keys + 1, 0)
    layer = ours.layers[0]
    assert isinstance(layer, BucketLayer) and layer.key_buffer.shape[2] == MIN_CAPACITY
    for cache in (theirs, ours):
        cache.crop(-2)
    forked = copy.deepcopy(ours)
    forked.reorder_cache(torch.tensor([1, 1, 0]))
    theirs.reorder_cache(torch.tensor([1, 1, 0]))
    more = torch.randn(3, 3, MIN_CAPACITY, 4)
    forked.update(more, more, 0)
    theirs.update(more, more, 0)
    assert forked.layers[0].key_buffer.shape[2] == bucket(3 + MIN_CAPACITY) == MIN_CAPACITY + GRANULE
    torch.testing.assert_close(forked.layers[0].keys, theirs.layers[0].keys)
    torch.testing.assert_close(forked.layers[0].values, theirs.layers[0].values)
    assert ours.get_seq_length() == 3 and torch.equal(ours.layers[0].keys, keys[:, :, :3])  # the copy left it alone
    with pytest.raises(ValueError):
        ours.crop(2)


def test_a_bucket_layer_copied_in_inference_mode_keeps_plain_buffers_of_its_capacity() -> None:
    """The compiled step guards on its buffers' kind; the runner copies caches under inference mode, where
    `copy.deepcopy` clones into inference tensors (the step made them plain again each step before)."""
    cache = bucket_cache(2)
    with torch.inference_mode():
        for index in range(2):
            cache.update(torch.randn(1, 3, 7, 4), torch.randn(1, 3, 7, 4), index)
        copied = copy.deepcopy(cache)
    for mine, theirs in zip(cache.layers, copied.layers):
        for ours, copy_ in ((mine.key_buffer, theirs.key_buffer), (mine.value_buffer, theirs.value_buffer)):
            assert not copy_.is_inference() and copy_.shape == ours.shape and copy_.data_ptr() != ours.data_ptr()
            assert torch.equal(copy_[:, :, :7], ours[:, :, :7]) and not copy_[:, :, 7:].any()
        assert theirs.length == 7 and theirs.is_initialized and theirs.dtype == mine.dtype
    copied.update(torch.ones(1, 3, 1, 4), torch.ones(1, 3, 1, 4), 0)
    assert cache.get_seq_length() == 7 and copied.layers[0].length == 8  # independent


def test_q4_1_blocks_unpack_to_gguf_s_own_dequantisation() -> None:
    from gguf import GGMLQuantizationType
    from gguf.quants import dequantize, quantize

    weights = np.random.default_rng(0).normal(size=(8, 4 * BLOCK)).astype(np.float32)
    raw = quantize(weights, GGMLQuantizationType.Q4_1)
    np.testing.assert_array_equal(unpack_q4_1(raw).dequantised().numpy(), dequantize(raw, GGMLQuantizationType.Q4_1))


def test_unpermuted_rows_undo_llama_cpp_s_rotary_permutation() -> None:
    rows, heads = 12, 2
    hf = torch.arange(rows)
    dim = rows // heads // 2
    gguf_rows = hf.view(heads, 2, dim).transpose(1, 2).reshape(rows)  # llama.cpp's convert_hf_to_gguf permute
    assert torch.equal(gguf_rows[unpermute_order(rows, heads)], hf)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
def test_int4_matmul_equals_the_dequantised_weight(dtype: torch.dtype) -> None:
    torch.manual_seed(0)
    weight = torch.randn(96, 4 * BLOCK)
    groups = quantise(weight)
    assert (groups.dequantised() - weight).abs().max() <= groups.scales.max() / 2 + 1e-6
    scaled = Groups(groups.codes, groups.scales.to(dtype).float(), groups.zeros.to(dtype).float())  # the kernel's scales
    x = torch.randn(3, 4 * BLOCK, dtype=dtype)
    got = AtenInt4.of(groups.codes, groups.scales, groups.zeros, dtype=dtype, device=torch.device("cpu"))(x).float()
    want = x.float() @ scaled.dequantised().T
    torch.testing.assert_close(got, want, atol=0.05 if dtype == torch.bfloat16 else 1e-3, rtol=0.02)


def test_an_uncovered_family_keeps_transformers_forward() -> None:
    with pytest.raises(ValueError, match="gpt2"):
        fast.build(tiny_model("gpt2").model)


def _prefilled_pair(prompt: list[int]) -> tuple[ModelRunner, ModelRunner, Any]:
    """Runners of the tiny Llama with the fast path (eager) and without, `prompt` prefilled in both; the backend."""
    torch.set_num_threads(1)
    loaded, plain = tiny_model("llama+fast"), tiny_model("llama")
    ours, theirs = ModelRunner(loaded.model, loaded.device), ModelRunner(plain.model, plain.device)
    for runner in (ours, theirs):
        runner.prefill(prompt)
    return ours, theirs, fast.attached(loaded.model)


def test_plain_decode_steps_run_the_step_function_and_equal_transformers_steps() -> None:
    prompt = list(range(3, 40))
    ours, theirs, backend = _prefilled_pair(prompt)
    for token in (5, 6, 7):
        embeds = ours.embed(torch.tensor([[token]]))
        torch.testing.assert_close(ours.forward(ours.cache, embeds=embeds),
                                   theirs.forward(theirs.cache, embeds=theirs.embed(torch.tensor([[token]]))),
                                   atol=1e-5, rtol=1e-4)
    assert backend.steps == 3 and ours.cache.get_seq_length() == len(prompt) + 3


def _compiling_tiny_llama(monkeypatch) -> tuple[Any, Any]:
    """The tiny Llama with a fast backend that compiles on the first call (dynamo reset, its counters cleared)."""
    from torch._dynamo.utils import counters

    monkeypatch.setenv("SPD_LSP_COMPILE", "1")
    torch._dynamo.reset()
    counters.clear()
    loaded = tiny_model("llama")
    backend = fast.build(loaded.model, compile=True)
    fast.attach(loaded.model, backend)
    return loaded, backend


def test_the_decode_step_compiles_as_one_graph_and_buckets_do_not_recompile(monkeypatch) -> None:
    from torch._dynamo.utils import counters

    loaded, backend = _compiling_tiny_llama(monkeypatch)
    assert backend.info["compiled"] and backend.info["compileReason"] is None
    runner = ModelRunner(loaded.model, loaded.device)
    eager = ModelRunner(tiny_model("llama+fast").model, loaded.device)
    for r in (runner, eager):
        r.prefill(list(range(3, 20)))
    for token in range(5, 9):  # several lengths inside one bucket
        got = runner.forward(runner.cache, embeds=runner.embed(torch.tensor([[token]])))
        want = eager.forward(eager.cache, embeds=eager.embed(torch.tensor([[token]])))
        torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-3)
    assert backend.info["compiled"], backend.info["compileReason"]  # fullgraph: a graph break would have failed it
    assert backend.steps == 4 and counters["stats"]["unique_graphs"] == 1
    torch._dynamo.reset()


def test_one_graph_serves_steps_whether_their_input_is_an_inference_tensor_or_not(monkeypatch) -> None:
    """A warm request's last prompt token reaches the step as an inference tensor (the prefill runs in inference
    mode), its decode steps' superposed embeddings as plain tensors: dynamo guards on the difference. Failed before:
    two graphs (a second compile of the whole step, seconds to minutes, and its memory), where one serves both.
    The same for the cache's buffers (the bench against llama.cpp compiled the step and the tree twice each)."""
    from torch._dynamo.utils import counters

    loaded, backend = _compiling_tiny_llama(monkeypatch)
    runner = ModelRunner(loaded.model, loaded.device)
    runner.prefill(list(range(3, 20)))
    with torch.inference_mode():
        runner.forward(runner.cache, embeds=runner.embed(torch.tensor([[5]])))
    embeds = runner.embed(torch.tensor([[6]])).clone()
    assert not embeds.is_inference()
    runner.forward(runner.cache, embeds=embeds)
    # and its key/value buffers: made under inference mode (a prompt) or not (a cache copied outside it)
    with torch.inference_mode():
        copied = copy.deepcopy(runner.cache)
    runner.forward(copied, embeds=embeds)
    runner.forward(copy.deepcopy(runner.cache), embeds=embeds)
    assert backend.steps == 4 and counters["stats"]["unique_graphs"] == 1
    torch._dynamo.reset()


def test_the_step_compiles_in_the_background_and_serves_eager_until_it_is_ready(monkeypatch) -> None:
    """The CPU default: the first step of a shape runs eager and hands a twin of its inputs to the compile thread;
    once that graph is ready, steps of the shape run it (same numbers as eager); a new bucket queues another."""
    monkeypatch.setenv("SPD_LSP_COMPILE", "background")
    torch._dynamo.reset()
    loaded = tiny_model("llama")
    backend = fast.build(loaded.model, compile=True)
    assert not backend.info["compiled"] and "background" in backend.info["compileReason"]
    fast.attach(loaded.model, backend)
    runner = ModelRunner(loaded.model, loaded.device)
    eager = ModelRunner(tiny_model("llama+fast").model, loaded.device)
    for r in (runner, eager):
        r.prefill(list(range(3, 20)))

    def step(token: int) -> None:
        got = runner.forward(runner.cache, embeds=runner.embed(torch.tensor([[token]])))
        want = eager.forward(eager.cache, embeds=eager.embed(torch.tensor([[token]])))
        torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-3)

    step(5)  # eager; the compile starts
    assert backend.step_fn.calls == 0 and len(backend.step_fn.queued) == 1
    assert "compiling" in backend.info  # the shape compiling now (None until the thread takes it)
    assert backend.step_fn.wait(timeout=600), backend.info
    assert backend.info["compiled"] and backend.info["compileReason"] is None and backend.info["compileSeconds"]
    # and its thread is gone once idle (alive, its OpenMP team slowed the served steps 2x: docs/performance-step.md)
    deadline = time.monotonic() + 10
    while any(t.name == "spd-compile" for t in threading.enumerate()) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(t.name == "spd-compile" for t in threading.enumerate())
    assert backend.info["compiling"] is None and backend.info["compiledShapes"] == 1  # nothing compiles now
    for token in (6, 7, 8):
        step(token)
    assert backend.step_fn.calls == 3  # the compiled graph ran them
    runner.prefill(list(range(3, 20)) + list(range(300)))  # a longer bucket: its length is a dynamic dimension
    assert runner.cache.layers[0].key_buffer.shape[2] > 256
    runner.forward(runner.cache, embeds=runner.embed(torch.tensor([[9]])))
    assert backend.step_fn.calls == 4 and len(backend.step_fn.queued) == 1  # the same graph: nothing queued
    torch._dynamo.reset()


def test_the_int8_output_head_is_the_float_head_within_its_rounding_and_only_for_decode_steps() -> None:
    torch.manual_seed(0)
    weight = torch.randn(300, 64, dtype=torch.bfloat16)
    head = Int8Aten(Int8Rows.of(weight))
    x = torch.randn(2, 64, dtype=torch.bfloat16)
    want = x.float() @ weight.float().T
    got = head(x).float()
    assert head.rows.codes.dtype == torch.int8 and head.nbytes() < weight.numel() * 2 / 1.9
    assert (got - want).abs().max() < 0.05 * want.abs().max()  # per-row int8: close, not equal
    loaded = tiny_model("llama")
    backend = fast.build(loaded.model, compile=False, head="int8")
    assert backend.lm.output.decode.layout == "int8 rows" and backend.plan.role("head").decode.layout == "int8 rows"
    float_bytes = fast.build(tiny_model("llama").model, compile=False).lm.weight_bytes("decode")
    assert backend.lm.weight_bytes("decode") < float_bytes
    with pytest.raises(ValueError, match="head 'int2'"):
        fast.build(tiny_model("llama").model, compile=False, head="int2")


def test_q8_0_output_rows_run_as_two_int4_halves_with_the_blocks_own_numbers() -> None:
    """q = 16 hi + lo: the two int4 matmuls give x @ (d q).T up to the output's rounding, far closer than the int8
    rows' requantisation (one scale a row) of the same weights."""
    from gguf import GGMLQuantizationType
    from gguf.quants import dequantize, quantize

    from spd_lsp.engine.fast.q8 import unpack_q8_0

    rng = np.random.default_rng(0)
    weights = (rng.normal(size=(256, 4 * BLOCK)) * rng.uniform(0.1, 4, size=(256, 4 * BLOCK))).astype(np.float32)
    raw = quantize(weights, GGMLQuantizationType.Q8_0)
    codes, scales = unpack_q8_0(raw)
    exact = torch.from_numpy(dequantize(raw, GGMLQuantizationType.Q8_0))
    torch.testing.assert_close((codes.float().view(256, 4, BLOCK) * scales[..., None]).view(256, -1), exact)
    head = Q8Halves.of(codes, scales, dtype=torch.float32)
    x = torch.randn(3, 4 * BLOCK)
    want = x @ exact.T
    torch.testing.assert_close(head(x), want, atol=1e-3, rtol=1e-4)
    rows = Int8Aten(Int8Rows.of(exact.to(torch.bfloat16)))(x.to(torch.bfloat16)).float()
    half = Q8Halves.of(codes, scales, dtype=torch.bfloat16)
    ours = half(x.to(torch.bfloat16)).float()
    assert (ours - want).abs().mean() < (rows - want).abs().mean() / 2
    assert half.nbytes() <= weights.size * 1.25  # a byte a weight, and bf16 scale and zero per half and block


def test_the_bundled_gguf_s_output_rows_are_its_q8_0_blocks_and_the_engine_runs_them(tmp_path) -> None:
    """The bundled model's tied output projection is Q8_0 in its GGUF: the default (`outputWeights: "q8"`) runs those
    blocks (transformers' float head is their dequantisation, in bf16): as they are on our kernel where the CPU has
    AVX-512 BF16 (the same blocks AMX's trees read, one copy), else as two int4 halves kept beside the model cache and
    read back equal; the GGUF read from its blocks runs them whatever `outputWeights` says."""
    from spd_lsp.engine.fast.layouts.ours import Q8Amx, Q8Matvec
    from spd_lsp.engine.fast.q8 import gguf_head_blocks
    from spd_lsp.engine.fast.store import gguf_q8_head, q8_file
    from spd_lsp.engine.kernels import build as kernels
    from spd_lsp.engine.model import bundled_gguf, load_model

    codes, scales = gguf_head_blocks(bundled_gguf())
    dequantised = (codes.float().view(codes.shape[0], -1, BLOCK) * scales[..., None]).view(codes.shape)
    plain = load_model(fast=False)
    weight = plain.model.get_output_embeddings().weight.detach().float()
    assert weight.shape == dequantised.shape
    assert ((weight - dequantised).abs() <= dequantised.abs() / 256 + 1e-7).all()  # bf16's rounding of d * q
    head = gguf_q8_head(bundled_gguf(), dtype=torch.bfloat16, directory=tmp_path)
    assert q8_file(tmp_path, torch.bfloat16).is_file()
    kept = gguf_q8_head(bundled_gguf(), dtype=torch.bfloat16, directory=tmp_path)
    x = torch.randn(2, weight.shape[1], dtype=torch.bfloat16)
    assert torch.equal(head(x), kept(x))
    assert (head(x).float() - x.float() @ dequantised.T).abs().max() < 0.1
    served = load_model(compile=False)  # read from the GGUF's blocks: its own Q8_0 head
    backend = fast.attached(served.model)
    assert served.fast["fastPlan"]["projections"]["head"]["decode"] == "q8_0 on matvec", served.fast
    backend.prepare()  # the kernels loaded (where they are built, the load did it)
    ours = backend.lm.output.decode
    held = ours.blocks if isinstance(ours, Q8Matvec) else ours.weights.parts  # the tuned kernel's, or the portable one's
    assert torch.equal(held[0], codes) and torch.equal(held[1], scales.half())
    if kernels.bf16_dot():
        assert isinstance(ours, Q8Matvec)
        if isinstance(backend.lm.output.batch, Q8Amx):
            trees = backend.lm.output.batch.blocks  # one copy for decode steps and trees: the same tensors
            assert all(a.data_ptr() == b.data_ptr() for a, b in zip(trees, ours.blocks))
    got = ours(x).float()
    want = x.float() @ dequantised.T
    assert ((got - want).abs() <= want.abs() * 2**-8 + 1e-3).all()  # the blocks' own numbers, rounded to bf16
    rows = load_model(compile=False, head="int8")  # outputWeights is for models transformers loads
    assert rows.fast["serving"]["head"]["decode"] == "q8_0 on matvec", rows.fast


def test_the_int8_output_rows_are_kept_beside_the_model_cache_and_read_back_bit_for_bit(tmp_path, caplog) -> None:
    """A later start maps the int8 rows the first one made (0.2-0.3 s of requantising a start on the bundled model);
    what it reads are the same codes and scales; a damaged or mis-shaped copy is made again."""
    from spd_lsp.engine.fast.store import int8_file, int8_head

    torch.manual_seed(0)
    weight = torch.randn(300, 64, dtype=torch.bfloat16)
    want = Int8Rows.of(weight)
    made = int8_head(weight, directory=tmp_path)
    path = int8_file(tmp_path, torch.bfloat16)
    assert path.is_file() and torch.equal(made.codes, want.codes) and torch.equal(made.scales, want.scales)
    kept = int8_head(weight * 0, directory=tmp_path)  # read back, not requantised (all-zero weights would give 0 codes)
    assert torch.equal(kept.codes, want.codes) and torch.equal(kept.scales, want.scales)
    assert kept.codes.is_contiguous() and kept.scales.dtype == torch.bfloat16
    # Aligned as torch allocates: on safetensors' own (file-offset) memory the int8 kernel crashed from 4 rows up.
    assert kept.codes.data_ptr() % 64 == 0 and kept.scales.data_ptr() % 64 == 0
    for rows in range(1, 9):
        x = torch.randn(rows, 64, dtype=torch.bfloat16)
        assert torch.equal(Int8Aten(kept)(x), Int8Aten(want)(x))
    other = torch.randn(200, 64, dtype=torch.bfloat16)
    assert torch.equal(int8_head(other, directory=tmp_path).codes, Int8Rows.of(other).codes)  # another shape
    path.write_bytes(b"damaged")
    assert torch.equal(int8_head(weight, directory=tmp_path).codes, want.codes) and "ignoring" in caplog.text
    loaded = tiny_model("llama")
    backend = fast.build(loaded.model, compile=False, head="int8", cache=tmp_path)
    assert int8_file(tmp_path, loaded.model.get_output_embeddings().weight.dtype).is_file()
    assert torch.equal(backend.lm.output.decode.rows.codes,
                       Int8Rows.of(loaded.model.get_output_embeddings().weight).codes)


def test_a_left_padded_batch_step_takes_the_padded_step_and_matches_transformers() -> None:
    """The engine batch's rows (left padding, a position per row) run `padded_step_tensors`, with transformers'
    numbers for the rows' real positions."""
    torch.set_num_threads(1)
    loaded, plain = tiny_model("llama+fast"), tiny_model("llama")
    ours, theirs = ModelRunner(loaded.model, loaded.device), ModelRunner(plain.model, plain.device)
    rows = [list(range(3, 20)), [0, 0, 0, 0, 0] + list(range(7, 19))]  # the second row left-padded by 5
    mask = torch.tensor([[1] * 17, [0] * 5 + [1] * 12])
    positions = torch.tensor([list(range(17)), [0] * 5 + list(range(12))])
    backend = fast.attached(loaded.model)
    ours_cache, theirs_cache = backend.new_cache(), DynamicCache()
    ours.forward(ours_cache, ids=torch.tensor(rows), attention_mask=mask, position_ids=positions)
    theirs.forward(theirs_cache, ids=torch.tensor(rows), attention_mask=mask, position_ids=positions)
    before = backend.steps
    for step, token in enumerate((5, 6)):
        mask = torch.cat([mask, torch.ones(2, 1, dtype=mask.dtype)], dim=1)
        position = torch.tensor([[17 + step], [12 + step]])
        got = ours.forward(ours_cache, embeds=ours.embed(torch.tensor([[token], [token]])), attention_mask=mask,
                           position_ids=position)
        want = theirs.forward(theirs_cache, embeds=theirs.embed(torch.tensor([[token], [token]])),
                              attention_mask=mask, position_ids=position)
        torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-4)
    assert backend.steps == before + 2  # both through the fast step, not the eager forward


def test_a_background_compile_waits_while_a_request_is_served(monkeypatch) -> None:
    """Dynamo's trace and inductor's codegen are Python: sharing the GIL with them, a served request's eager steps
    took 0.3-2.2 s instead of ~0.3-0.5 s (bench/bench_compile_pause.py). While `serving`, the compile thread waits at
    its next Python call; after, it finishes. Failed before: there was nothing to wait for (no `serving`)."""
    from spd_lsp.engine.fast import compile as step_compile

    monkeypatch.setenv("SPD_LSP_COMPILE", "background")
    monkeypatch.setattr(step_compile, "PAUSE_S", 60.0)
    torch._dynamo.reset()
    loaded = tiny_model("llama")
    backend = fast.build(loaded.model, compile=True)
    fast.attach(loaded.model, backend)
    runner = ModelRunner(loaded.model, loaded.device)
    runner.prefill(list(range(3, 20)))
    before = step_compile.pauses[0]
    with step_compile.serving():
        runner.forward(runner.cache, embeds=runner.embed(torch.tensor([[5]])))  # eager; queues the compile
        assert len(backend.step_fn.queued) == 1
        deadline = time.monotonic() + 10
        while step_compile.pauses[0] == before and time.monotonic() < deadline:
            time.sleep(0.05)
        assert step_compile.pauses[0] > before  # the compile thread waited for the request
        time.sleep(1.0)
        assert not backend.step_fn.ready  # and did not go on meanwhile
    assert backend.step_fn.wait(timeout=600), backend.info
    assert backend.info["compiled"]
    torch._dynamo.reset()


def test_a_held_background_compile_starts_no_thread_until_released(monkeypatch) -> None:
    """`spd-lsp engine --standby` forks its spare after the warm-up's first step: no compile thread may be inside
    torch then (the fork's copy of its locks and OpenMP team hangs the spare). Held, the step queues its compile
    and runs eager; released, the compile thread starts."""
    from spd_lsp.engine.fast import compile as step_compile

    monkeypatch.setenv("SPD_LSP_COMPILE", "background")
    loaded = tiny_model("llama")
    backend = fast.build(loaded.model, compile=True)
    fast.attach(loaded.model, backend)
    started = []
    monkeypatch.setattr(backend.step_fn, "_compile_jobs", lambda: started.append(threading.current_thread().name))
    runner = ModelRunner(loaded.model, loaded.device)
    runner.prefill(list(range(3, 20)))
    step_compile.hold_background()
    try:
        runner.forward(runner.cache, embeds=runner.embed(torch.tensor([[5]])))
        assert len(backend.step_fn.queued) == 1 and backend.step_fn.calls == 0  # queued, ran eager
        time.sleep(0.2)
        assert not started and backend.step_fn._worker is None
    finally:
        step_compile.release_background()
    deadline = time.monotonic() + 10
    while not started and time.monotonic() < deadline:
        time.sleep(0.05)
    assert started == ["spd-compile"]
    torch._dynamo.reset()


def test_a_one_token_prefill_takes_the_decode_step_and_equals_transformers() -> None:
    """A warm request's prompt differs from the cache by its last token: that forward is a decode step (the compiled
    one), not an eager forward. Failed before: `FastBackend.steps` stayed 0."""
    prompt = list(range(3, 40))
    ours, theirs, backend = _prefilled_pair(prompt)
    before = backend.steps
    ours_logits, reused = ours.prefill(prompt + [41])
    theirs_logits, _ = theirs.prefill(prompt + [41])
    assert reused == len(prompt) and backend.steps == before + 1
    torch.testing.assert_close(ours_logits, theirs_logits, atol=1e-5, rtol=1e-4)
    assert ours.cache.get_seq_length() == len(prompt) + 1


def test_the_kept_int4_weights_read_back_aligned_and_equal(tmp_path) -> None:
    """A later start reads the packed int4 weights from the model's cache (not the GGUF): the same products, in torch's
    64-byte aligned memory (safetensors' own sat at 48 mod 64; the int8 kernel crashed on such memory)."""
    from safetensors.torch import save_file

    from spd_lsp.engine.fast import q4
    from spd_lsp.engine.fast.store import gguf_int4, pack, packed_file, packed_state, witness

    model = tiny_model("llama").model
    groups = [{name: q4.quantise(getattr(getattr(layer, part), name).weight)
               for part, names in (("self_attn", ("q_proj", "k_proj", "v_proj", "o_proj")),
                                   ("mlp", ("gate_proj", "up_proj", "down_proj")))
               for name in names} for layer in model.model.layers]
    packed = pack(groups, dtype=torch.float32, device=torch.device("cpu"))
    save_file({**packed_state(packed), "witness": witness(groups)}, packed_file(tmp_path, torch.float32,
                                                                               torch.device("cpu")))
    kept = gguf_int4(tmp_path / "not-read.gguf", model.config, dtype=torch.float32, device=torch.device("cpu"),
                     directory=tmp_path)
    assert kept is not None and len(kept) == len(packed)
    for want_layer, kept_layer in zip(packed, kept):
        for name, want in want_layer.items():
            got = kept_layer[name]
            assert all(buffer.data_ptr() % 64 == 0 for buffer in got.tensors())
            for rows in (1, 4, 8):
                x = torch.randn(rows, got.in_features)
                assert torch.equal(got(x), want(x))


SMALL_TREE = [(5, 6, 7, 8), (5, 6, 9), (11, 12)]  # 4 nodes: at most INT4_MAX_TOKENS, so eager (the decode weights)
TREE = [(5, 6, 7, 8, 9, 10), (5, 6, 9, 11, 12), (11, 12, 13, 14)]  # 10 nodes


@pytest.mark.parametrize("drafts, trees", [(SMALL_TREE, 0), (TREE, 1),
                                           ([tuple(range(50, 70)), tuple(range(50, 60)) + (3,) * 10], 1)])
def test_verification_trees_take_the_tree_step_and_equal_transformers(drafts, trees) -> None:
    """The packed prefix tree of the drafts runs in the tree step's graph (failed before: no tree step ran),
    but for a tree of at most INT4_MAX_TOKENS nodes; every node's logits are transformers', and the cache grows by
    the tree's nodes as transformers' does."""
    from spd_lsp.engine.decoding import verify

    prompt = list(range(3, 40))
    ours, theirs, backend = _prefilled_pair(prompt)
    got = verify.packed_logits(ours, ours.cache, [drafts], [len(prompt)])[0]
    want = verify.packed_logits(theirs, theirs.cache, [drafts], [len(prompt)])[0]
    assert backend.trees == trees and got[1] == want[1]
    for mine, reference in zip(got[0], want[0]):
        torch.testing.assert_close(mine, reference, atol=1e-5, rtol=1e-4)
    assert ours.cache.get_seq_length() == theirs.cache.get_seq_length() > len(prompt)


def test_the_tree_step_compiles_as_one_graph(monkeypatch) -> None:
    """fullgraph: a branch on the data (grouped attention's `blind.any()` before) would fail it and leave it eager. On
    the CPU a tree runs at its own width (10 then 17 nodes), not padded, in that one graph (failed before: padded to 32)."""
    from torch._dynamo.utils import counters

    from spd_lsp.engine.decoding import verify

    loaded, backend = _compiling_tiny_llama(monkeypatch)
    runner = ModelRunner(loaded.model, loaded.device)
    reference = ModelRunner(tiny_model("llama").model, loaded.device)
    prompt = list(range(3, 30))
    for r in (runner, reference):
        r.prefill(prompt)
    widths = []
    compiled = backend.tree_fn

    class Widths:  # the compiled tree step, noting each call's width
        def __getattr__(self, name):
            return getattr(compiled, name)

        def __call__(self, x, *args):
            widths.append(x.shape[1])
            return compiled(x, *args)

    monkeypatch.setattr(backend, "tree_fn", Widths())
    for drafts in (TREE, [tuple(range(50, 62)), tuple(range(50, 56)) + (3,) * 4, (11, 12, 13, 14)]):  # 10, 17 nodes
        got = verify.packed_logits(runner, runner.cache, [drafts], [len(prompt)])[0][0]
        want = verify.packed_logits(reference, reference.cache, [drafts], [len(prompt)])[0][0]
        for mine, theirs in zip(got, want):
            torch.testing.assert_close(mine, theirs, atol=1e-4, rtol=1e-3)
        for r in (runner, reference):
            r.rewind(len(prompt))
    status = backend.info["treeStep"]
    assert status["compiled"] and status["compileReason"] is None, status
    assert backend.trees == 2 and counters["stats"]["unique_graphs"] == 1 and widths == [10, 17]
    torch._dynamo.reset()


@pytest.mark.parametrize("mode", ["1", "background"])
def test_a_c_plus_plus_wrapper_that_does_not_build_gives_way_to_the_python_one(monkeypatch, mode) -> None:
    """The CPU's graphs compile with inductor's C++ wrapper (`backend.CPU_INDUCTOR`); where that fails to build, the
    step compiles again with the Python wrapper rather than running eager, and `spd.status` says why (before: eager
    from the first failure on)."""
    from spd_lsp.engine.fast import compile as compiling

    monkeypatch.setenv("SPD_LSP_COMPILE", mode)
    built: list[bool] = []

    def call(self, *args):  # a compile that fails with the C++ wrapper and "builds" (runs the function) without it
        built.append(self.how["options"]["cpp_wrapper"])
        if self.how["options"]["cpp_wrapper"]:
            raise RuntimeError("CppCompileError: the wrapper did not build")
        return self.fn(*args)

    monkeypatch.setattr(compiling.LazyCompile, "__call__", call)
    backend, runner, eager = compiling_pair(list(range(3, 20)))
    for token in (5, 6, 7):
        torch.testing.assert_close(*step_pair(runner, eager, token))
        assert backend.step_fn.wait(timeout=60)
    assert built[:2] == [True, False] and not any(built[2:])
    assert backend.step_fn.active and backend.step_fn.calls >= 2, backend.info
    assert backend.info["compiled"] and backend.info["compileReason"] is None, backend.info
    assert "C++ wrapper did not build" in backend.info["compileNote"] and "Python wrapper serves" in backend.info["compileNote"]


@pytest.mark.parametrize("weights", ["fp32", "bf16", "bf16 packed"])
@torch.inference_mode()
def test_a_prompt_s_last_block_runs_on_its_tail_and_its_last_logits_stay_the_same(monkeypatch, weights) -> None:
    """`PROMPT_TAIL`: past the last block's keys and values, a prompt wanting its last logits only runs the rest of
    that block on its last positions: the same logits, on an empty cache (causal), after cached columns (`Causal`)
    and left-padded (a bool mask), within a matmul's rounding (the bundled model's: bit for bit, `PROMPT_TAIL`); the
    caches bit for bit; a short prompt untouched."""
    from spd_lsp.engine.fast import model as fast_model
    from spd_lsp.engine.fast.layouts.dense import PackedDense
    from spd_lsp.engine.kernels import onednn

    model = tiny_model("llama").model.to(torch.float32 if weights == "fp32" else torch.bfloat16)
    lm = FastLM.of_module(copy.deepcopy(model))
    if weights == "bf16 packed":
        if not onednn.bf16_available():
            pytest.skip("oneDNN's bf16 is not in this torch or on this CPU")
        for projection in lm.projections()[:-1]:
            projection.decode = projection.batch = projection.prefill = PackedDense(projection.prefill.weight)
    last = lm.blocks[-1]
    rows: list[int] = []
    down = last.down.forward
    monkeypatch.setattr(last.down, "forward", lambda x, tier: rows.append(x.shape[1]) or down(x, tier))  # its rows
    ids = torch.randint(0, 300, (2, 60), generator=torch.Generator().manual_seed(2))
    padding = torch.ones(2, 60, dtype=torch.long)
    padding[1, :9] = 0

    def run(tail: int) -> list[torch.Tensor]:
        monkeypatch.setattr(fast_model, "PROMPT_TAIL", tail)
        cache = bucket_cache(model.config.num_hidden_layers)
        outs = [lm(input_ids=ids[:, :40], past_key_values=cache, logits_to_keep=1).logits,
                lm(input_ids=ids[:, 40:], past_key_values=cache, logits_to_keep=1).logits,
                lm(input_ids=ids, attention_mask=padding, logits_to_keep=1).logits,
                lm(input_ids=ids[:, :12], logits_to_keep=1).logits]
        return outs + [layer.keys for layer in cache.layers] + [layer.values for layer in cache.layers]

    whole = run(10 ** 6)
    assert rows == [40, 20, 60, 12]
    rows.clear()
    tail = run(16)
    assert rows == [16, 16, 16, 12]  # the short prompt (12 <= 16) as before
    for got, want in zip(tail[:4], whole[:4]):  # a matmul of 16 rows may round otherwise than of 60
        torch.testing.assert_close(got, want, atol=1e-5 if weights == "fp32" else 2e-2, rtol=1e-4)
    assert all(torch.equal(got, want) for got, want in zip(tail[4:], whole[4:]))  # the caches: before the tail
    assert all(torch.equal(got.argmax(-1), want.argmax(-1)) for got, want in zip(tail[:4], whole[:4]))
    assert tail[0].shape == (2, 1, model.config.vocab_size)
