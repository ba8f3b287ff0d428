"""A transformers config from a GGUF file's metadata, for the families the fast path runs (llama, qwen2, qwen3, gemma3).

The key renames are transformers' own table (`transformers.integrations.ggml.GGUF_CONFIG_MAPPING`); what the table
does not carry is llama.cpp's (the tied head when there is no `output.weight`, Gemma-3's sliding-window pattern and
local rotary base). Made with `PretrainedConfig.from_dict`: no model class is imported (they cost a start ~1-2 s).
"""

from __future__ import annotations

from typing import Any

from spd_lsp.engine.gguf.file import GGUFFile

# Families whose GGUF metadata maps onto the fast path's config (gguf's architecture -> transformers' model type).
MODEL_TYPES = {"llama": "llama", "qwen2": "qwen2", "qwen3": "qwen3", "gemma3": "gemma3_text"}
# llama.cpp's Gemma-3: every 6th layer attends globally (the rest in a sliding window), local rotary base 10,000.
GEMMA3_GLOBAL_EVERY = 6
GEMMA3_LOCAL_ROPE_BASE = 10_000.0


class UnsupportedArchitecture(ValueError):
    """The GGUF's architecture is not one the fast path reads directly (transformers' loader may still)."""


def config_dict(file: GGUFFile) -> dict[str, Any]:
    """The config of `file` as a plain dict (what `config_of` makes a `PretrainedConfig` of)."""
    from transformers.integrations.ggml import GGUF_CONFIG_MAPPING

    architecture = file.architecture
    if architecture not in MODEL_TYPES:
        raise UnsupportedArchitecture(f"GGUF architecture {architecture!r} (the fast path reads "
                                      f"{', '.join(MODEL_TYPES)} from the file)")
    fields = file.fields
    config: dict[str, Any] = {"model_type": MODEL_TYPES[architecture]}
    for key, name in GGUF_CONFIG_MAPPING[architecture].items():
        if name is not None and f"{architecture}.{key}" in fields:
            config[name] = fields[f"{architecture}.{key}"]
    tokens = fields.get("tokenizer.ggml.tokens")
    config.setdefault("vocab_size", len(tokens) if tokens is not None else file.tensors["token_embd.weight"].shape[0])
    config["tie_word_embeddings"] = "output.weight" not in file.tensors
    for name in ("bos_token_id", "eos_token_id", "pad_token_id"):
        if f"tokenizer.ggml.{name}" in fields:
            config[name] = fields[f"tokenizer.ggml.{name}"]
    heads = config["num_attention_heads"]
    config.setdefault("num_key_value_heads", heads)
    if isinstance(config["num_key_value_heads"], list):  # per layer in some files: all alike for these families
        config["num_key_value_heads"] = max(config["num_key_value_heads"])
    key_length = fields.get(f"{architecture}.attention.key_length")
    config.setdefault("head_dim", key_length or config["hidden_size"] // heads)
    theta = config.pop("rope_theta", None) or 10_000.0
    rope: dict[str, Any] = {"rope_type": "default", "rope_theta": float(theta)}
    scaling = fields.get(f"{architecture}.rope.scaling.type")
    if scaling in ("linear",) and fields.get(f"{architecture}.rope.scaling.factor"):
        rope = {"rope_type": "linear", "rope_theta": float(theta),
                "factor": float(fields[f"{architecture}.rope.scaling.factor"])}
    elif scaling not in (None, "none"):
        rope["rope_type"] = str(scaling)  # the fast path refuses it by name (`model.unsupported`)
    config["rope_parameters"] = rope
    config["hidden_act"] = "silu"
    if architecture == "qwen2":
        config["use_sliding_window"] = False
    if architecture == "gemma3":
        layers = config["num_hidden_layers"]
        config["layer_types"] = ["full_attention" if (i + 1) % GEMMA3_GLOBAL_EVERY == 0 else "sliding_attention"
                                 for i in range(layers)]
        config["rope_parameters"] = {"full_attention": rope,
                                     "sliding_attention": {"rope_type": "default",
                                                           "rope_theta": GEMMA3_LOCAL_ROPE_BASE}}
        config["hidden_activation"] = config["hidden_act"] = "gelu_pytorch_tanh"
        config["query_pre_attn_scalar"] = config["head_dim"]
        config["final_logit_softcapping"] = None
        config["attn_logit_softcapping"] = None
    return config


def config_of(file: GGUFFile) -> Any:
    """`config_dict(file)` as a transformers `PretrainedConfig` (generic: attribute access as the model's own)."""
    from transformers.configuration_utils import PretrainedConfig

    return PretrainedConfig.from_dict(config_dict(file))
