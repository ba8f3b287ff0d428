"""A tiny transformers model written as a GGUF the way llama.cpp's converter writes one (tensor names, metadata, Llama's
q/k rows permuted, Gemma's norms as 1 + weight), with the bundled model's tokenizer: for the tests of reading a GGUF
from its blocks (tests/engine/test_gguf_model.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

ARCHITECTURES = {"llama": "llama", "qwen2": "qwen2", "qwen3": "qwen3", "gemma3_text": "gemma3"}


def _permute(weight: np.ndarray, heads: int) -> np.ndarray:
    """llama.cpp's `permute` of a Llama q/k projection's rows (rotary halves interleaved)."""
    return weight.reshape(heads, 2, weight.shape[0] // heads // 2, *weight.shape[1:]).swapaxes(1, 2).reshape(weight.shape)


def write_gguf(model: Any, path: Path, *, quantize: Any = None) -> Path:
    """`model` (a transformers causal LM of a family the fast path covers, vocabulary of the bundled tokenizer's size)
    as a GGUF at `path`: 2-D weights in F32, or quantised to `quantize` (a gguf type gguf-py can quantise, or a function
    of the tensor's name giving one, or None for F32); norms and biases F32."""
    import gguf
    from gguf.quants import quantize as quantise

    from spd_lsp.engine.gguf.file import GGUFFile
    from spd_lsp.engine.model import bundled_gguf

    config = model.config
    arch = ARCHITECTURES[config.model_type]
    writer = gguf.GGUFWriter(str(path), arch)
    heads, kv_heads = config.num_attention_heads, config.num_key_value_heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
    writer.add_block_count(config.num_hidden_layers)
    writer.add_context_length(config.max_position_embeddings)
    writer.add_embedding_length(config.hidden_size)
    writer.add_feed_forward_length(config.intermediate_size)
    writer.add_head_count(heads)
    writer.add_head_count_kv(kv_heads)
    writer.add_key_length(head_dim)
    writer.add_value_length(head_dim)
    writer.add_layer_norm_rms_eps(config.rms_norm_eps)
    rope = (getattr(config, "rope_parameters", None) or {})
    rope = rope.get("full_attention", rope) if arch == "gemma3" else rope
    writer.add_rope_freq_base(float(rope.get("rope_theta", 10000.0)))
    if arch == "gemma3":
        writer.add_sliding_window(config.sliding_window)
    source = GGUFFile(bundled_gguf())
    for key, value in source.fields.items():  # the bundled model's tokenizer, as it is
        if key.startswith("tokenizer.ggml."):
            name = key.removeprefix("tokenizer.ggml.")
            if name == "tokens":
                writer.add_token_list(value)
            elif name == "merges":
                writer.add_token_merges(value)
            elif name == "token_type":
                writer.add_token_types(value)
            elif name == "model":
                writer.add_tokenizer_model(value)
            elif name == "pre":
                writer.add_tokenizer_pre(value)
            elif name.endswith("_token_id"):
                writer.add_uint32(key, value)
            elif isinstance(value, bool):
                writer.add_bool(key, value)

    def tensor(name: str, value: torch.Tensor, *, norm: bool = False) -> None:
        array = value.detach().float().numpy()
        if norm and arch == "gemma3":
            array = array + 1.0  # llama.cpp writes Gemma's norms as 1 + weight
        kind = quantize(name) if callable(quantize) else quantize
        if array.ndim == 2 and kind is not None and not norm:
            writer.add_tensor(name, quantise(array, gguf.GGMLQuantizationType(kind)),
                              raw_dtype=gguf.GGMLQuantizationType(kind))
        else:
            writer.add_tensor(name, np.ascontiguousarray(array, dtype=np.float32))

    tensor("token_embd.weight", model.get_input_embeddings().weight)
    tensor("output_norm.weight", model.model.norm.weight, norm=True)
    if not config.tie_word_embeddings:
        tensor("output.weight", model.get_output_embeddings().weight)
    for i, layer in enumerate(model.model.layers):
        attn, mlp = layer.self_attn, layer.mlp
        q, k = attn.q_proj.weight.detach().numpy(), attn.k_proj.weight.detach().numpy()
        if arch == "llama":
            q, k = _permute(q, heads), _permute(k, kv_heads)
        tensor(f"blk.{i}.attn_q.weight", torch.from_numpy(q))
        tensor(f"blk.{i}.attn_k.weight", torch.from_numpy(k))
        tensor(f"blk.{i}.attn_v.weight", attn.v_proj.weight)
        tensor(f"blk.{i}.attn_output.weight", attn.o_proj.weight)
        for part in ("q", "k", "v"):
            bias = getattr(attn, f"{part}_proj").bias
            if bias is not None:
                tensor(f"blk.{i}.attn_{part}.bias", bias, norm=False)
        if hasattr(attn, "q_norm"):
            tensor(f"blk.{i}.attn_q_norm.weight", attn.q_norm.weight, norm=True)
            tensor(f"blk.{i}.attn_k_norm.weight", attn.k_norm.weight, norm=True)
        tensor(f"blk.{i}.attn_norm.weight", layer.input_layernorm.weight, norm=True)
        if arch == "gemma3":
            tensor(f"blk.{i}.post_attention_norm.weight", layer.post_attention_layernorm.weight, norm=True)
            tensor(f"blk.{i}.ffn_norm.weight", layer.pre_feedforward_layernorm.weight, norm=True)
            tensor(f"blk.{i}.post_ffw_norm.weight", layer.post_feedforward_layernorm.weight, norm=True)
        else:
            tensor(f"blk.{i}.ffn_norm.weight", layer.post_attention_layernorm.weight, norm=True)
        tensor(f"blk.{i}.ffn_gate.weight", mlp.gate_proj.weight)
        tensor(f"blk.{i}.ffn_up.weight", mlp.up_proj.weight)
        tensor(f"blk.{i}.ffn_down.weight", mlp.down_proj.weight)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path
