"""bench/gguf_models.py: a tiny shape written with the bundled tokenizer and read back with gguf-py (no llama.cpp:
CI never builds it), and the real shapes' parameter counts against the models' published sizes."""

from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np
import pytest

from bench.gguf_models import SHAPES, Shape, bundled_tokenizer_gguf, tensor_plan, tokenizer_fields, write_gguf


@pytest.fixture(scope="module")
def bundled() -> gguf.GGUFReader:
    return gguf.GGUFReader(bundled_tokenizer_gguf())


@pytest.fixture(scope="module")
def tokenizer(bundled: gguf.GGUFReader) -> list:
    return tokenizer_fields(bundled)


def value(reader: gguf.GGUFReader, key: str):
    return reader.fields[key].contents()


def test_a_tiny_llama_reads_back_with_its_shape_metadata_and_the_bundled_tokenizer(tmp_path: Path, bundled, tokenizer):
    shape = Shape("tiny", "llama", hidden=64, layers=2, heads=4, kv_heads=2, intermediate=96, context=4096,
                  rope_theta=130000.0, rms_eps=1e-5)
    reader = gguf.GGUFReader(write_gguf(shape, tmp_path / "tiny.gguf", tokenizer))

    assert value(reader, "general.architecture") == "llama"
    assert value(reader, "general.file_type") == gguf.LlamaFileType.MOSTLY_F16
    expected = {"context_length": 4096, "embedding_length": 64, "block_count": 2, "feed_forward_length": 96,
                "attention.head_count": 4, "attention.head_count_kv": 2, "rope.dimension_count": 16,
                "vocab_size": 49152}
    assert {k: value(reader, f"llama.{k}") for k in expected} == expected
    assert value(reader, "llama.rope.freq_base") == 130000.0
    assert value(reader, "llama.attention.layer_norm_rms_epsilon") == pytest.approx(1e-5)

    copied = [k for k in bundled.fields if k.startswith("tokenizer.ggml.")]
    assert len(copied) >= 10 and "tokenizer.ggml.merges" in copied
    for key in copied:
        assert reader.fields[key].types == bundled.fields[key].types, key
        assert value(reader, key) == value(bundled, key), key

    tensors = {t.name: t for t in reader.tensors}
    assert list(tensors) == [t.name for t in tensor_plan(shape, 49152)]
    assert "output.weight" not in tensors  # tied: llama.cpp reads the head from token_embd
    assert len(tensors) == 1 + 2 * 9 + 1
    embd, q, k, down = (tensors[n] for n in ("token_embd.weight", "blk.0.attn_q.weight", "blk.1.attn_k.weight",
                                             "blk.1.ffn_down.weight"))
    # GGUF lists dimensions innermost first: (input features, output features)
    assert [list(map(int, t.shape)) for t in (embd, q, k, down)] == [[64, 49152], [64, 64], [64, 32], [96, 64]]
    assert {t.tensor_type for n, t in tensors.items() if "norm" not in n} == {gguf.GGMLQuantizationType.F16}
    norm = tensors["blk.0.attn_norm.weight"]
    assert norm.tensor_type == gguf.GGMLQuantizationType.F32 and np.all(norm.data == 1.0)
    weights = np.asarray(down.data, dtype=np.float32)
    assert 0.015 < weights.std() < 0.025 and abs(weights.mean()) < 0.005


def test_a_tiny_qwen2_in_q8_0_has_its_biases_its_own_head_and_dequantises_to_its_weights(tmp_path: Path, tokenizer):
    shape = Shape("tiny-qwen", "qwen2", hidden=64, layers=1, heads=2, kv_heads=1, intermediate=128, context=32768,
                  rope_theta=1e6, rms_eps=1e-6, tied=False, qkv_bias=True, source_type="Q8_0")
    reader = gguf.GGUFReader(write_gguf(shape, tmp_path / "tiny-qwen.gguf", tokenizer, seed=3))

    assert value(reader, "general.architecture") == "qwen2"
    assert value(reader, "general.file_type") == gguf.LlamaFileType.MOSTLY_Q8_0
    assert value(reader, "qwen2.rope.freq_base") == 1e6 and value(reader, "qwen2.context_length") == 32768
    tensors = {t.name: t for t in reader.tensors}
    assert [list(map(int, tensors[f"blk.0.attn_{x}.bias"].shape)) for x in "qkv"] == [[64], [32], [32]]
    assert tensors["blk.0.attn_k.bias"].tensor_type == gguf.GGMLQuantizationType.F32
    head = tensors["output.weight"]
    assert head.tensor_type == gguf.GGMLQuantizationType.Q8_0 and list(map(int, head.shape)) == [64, 49152]
    up = tensors["blk.0.ffn_up.weight"]
    index = [t.name for t in tensor_plan(shape, 49152)].index(up.name)
    drawn = np.random.default_rng([3, index]).standard_normal((128, 64), dtype=np.float32) * 0.02
    restored = gguf.quants.dequantize(up.data, up.tensor_type)
    assert restored.shape == (128, 64)
    assert np.abs(restored - drawn).max() <= np.abs(drawn).max() / 127  # Q8_0: within a step of its absmax / 127


@pytest.mark.parametrize(("name", "published", "embedding"), [
    ("smollm2-360m", 362e6, True),  # the model card's 362M
    ("smollm2-1.7b", 1.71e9, True),  # 1.71B
    ("qwen2.5-coder-1.5b", 1.31e9, False),  # 1.31B without the embedding (its vocabulary is not ours)
    ("llama-7b", 6.98e9, False),  # Llama-3-8B's 8.03B less its 128,256-token embedding and head
])
def test_the_real_shapes_have_their_models_parameter_counts(name: str, published: float, embedding: bool) -> None:
    plan = tensor_plan(SHAPES[name], 49152)
    counted = sum(int(np.prod(t.shape)) for t in plan
                  if embedding or t.name not in ("token_embd.weight", "output.weight"))
    assert counted == pytest.approx(published, rel=0.01)


def test_a_gguf_without_a_tokenizer_is_refused_by_name(tmp_path: Path) -> None:
    path = tmp_path / "bare.gguf"
    writer = gguf.GGUFWriter(path, "llama")
    writer.add_tensor("token_embd.weight", np.zeros((4, 8), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    with pytest.raises(ValueError, match="bare.gguf has no tokenizer.ggml.tokens"):
        tokenizer_fields(gguf.GGUFReader(path))
