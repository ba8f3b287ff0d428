"""What of a model's architecture the fast path's forward follows (`Arch`), read once from its (transformers) config.

Families: Llama (SmolLM2), Qwen2 (q/k/v biases), Qwen3 (q/k norms), Gemma-3 (GeGLU, norms on each block's outputs too,
q/k norms, norms as 1 + weight in fp32, a scaled embedding, sliding-window layers with their own rotary base). What a
config asks beyond these is `unsupported` (transformers' forward runs it).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

FAMILIES = ("llama", "qwen2", "qwen3", "gemma3_text")


@dataclass(frozen=True)
class Rope:
    """A rotary table's frequencies: base, and linear scaling of positions (1: none)."""

    theta: float
    factor: float = 1.0


@dataclass(frozen=True)
class Arch:
    family: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    eps: float
    activation: str  # "silu" or "gelu_tanh": the gate's, in act(gate) * up
    scale: float  # attention logits' scale
    qk_norm: bool  # q and k normed per head before the rotation (Qwen3, Gemma-3)
    sandwich: bool  # the attention's and the MLP's outputs normed before the residual sum (Gemma-3)
    gemma_norms: bool  # norms as transformers' Gemma computes them: in fp32, times (1 + weight) (held as 1 + weight)
    embedding_scale: float | None  # the input embeddings times this (Gemma-3: sqrt(hidden), in the model's dtype)
    ropes: tuple[Rope, ...]  # the rotary tables
    rope_of: tuple[int, ...]  # per layer, its table's index
    window: int | None  # a sliding layer's keys: the last `window` positions
    sliding: tuple[bool, ...]  # per layer
    max_positions: int

    @property
    def q_size(self) -> int:
        return self.heads * self.head_dim

    @property
    def kv_size(self) -> int:
        return self.kv_heads * self.head_dim


def unsupported(config: Any) -> str | None:
    """Why a model of this (transformers) config cannot run here (None: it can)."""
    try:
        arch_of(config)
    except ValueError as exc:
        return str(exc)
    return None


def _rope(parameters: dict[str, Any] | None, config: Any) -> Rope:
    parameters = parameters or {}
    kind = parameters.get("rope_type", "default")
    if kind not in ("default", "linear"):
        raise ValueError(f"rotary type {kind!r} (its frequencies change with the length)")
    theta = parameters.get("rope_theta") or getattr(config, "rope_theta", None) or 10_000.0
    return Rope(float(theta), float(parameters.get("factor", 1.0)) if kind == "linear" else 1.0)


def arch_of(config: Any) -> Arch:
    """The `Arch` of `config`; ValueError saying what the fast path does not cover."""
    family = getattr(config, "model_type", None)
    if family not in FAMILIES:
        raise ValueError(f"model family {family!r} (the fast path covers {', '.join(FAMILIES)})")
    gemma = family == "gemma3_text"
    activation = getattr(config, "hidden_activation", None) or getattr(config, "hidden_act", "silu")
    if getattr(config, "mlp_bias", False) or activation not in ("silu", "gelu_pytorch_tanh"):
        raise ValueError("an MLP other than a biasless SiLU- or tanh-GELU-gated one")
    if family == "qwen2" and getattr(config, "use_sliding_window", False):
        raise ValueError("sliding-window attention in a Qwen2 model")
    if getattr(config, "final_logit_softcapping", None) or getattr(config, "attn_logit_softcapping", None):
        raise ValueError("soft-capped logits")
    heads = config.num_attention_heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
    layers = config.num_hidden_layers
    parameters = getattr(config, "rope_parameters", None) or {}
    if gemma:
        types = tuple(getattr(config, "layer_types", None) or ["full_attention"] * layers)
        full = _rope(parameters.get("full_attention", parameters), config)
        local = parameters.get("sliding_attention") or {"rope_theta": getattr(config, "rope_local_base_freq", 10_000.0)}
        ropes = (full, _rope(local, config))
        sliding = tuple(kind == "sliding_attention" for kind in types)
        rope_of = tuple(1 if s else 0 for s in sliding)
        window = getattr(config, "sliding_window", None)
        scale = (getattr(config, "query_pre_attn_scalar", None) or head_dim) ** -0.5
    else:
        ropes, rope_of, sliding, window = (_rope(parameters, config),), (0,) * layers, (False,) * layers, None
        scale = head_dim ** -0.5
    return Arch(family=family, layers=layers, hidden=config.hidden_size, heads=heads,
                kv_heads=getattr(config, "num_key_value_heads", None) or heads, head_dim=head_dim,
                intermediate=config.intermediate_size, vocab=config.vocab_size, eps=config.rms_norm_eps,
                activation="gelu_tanh" if activation == "gelu_pytorch_tanh" else "silu", scale=scale,
                qk_norm=family in ("qwen3", "gemma3_text"), sandwich=gemma, gemma_norms=gemma,
                embedding_scale=math.sqrt(config.hidden_size) if gemma else None, ropes=ropes, rope_of=rope_of,
                window=window if any(sliding) else None, sliding=sliding,
                max_positions=max(getattr(config, "max_position_embeddings", 0) or 0, 8192))
