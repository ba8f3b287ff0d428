"""A causal LM for the fast path, built from a model directory's `config.json` and safetensors without transformers'
model classes.

`AutoModelForCausalLM` costs a start ~2 s of imports before any work (`modeling_llama` pulls `torch.distributed.tensor`,
the loss functions' `scipy.optimize`, the hub's kernels ...), although the fast path runs none of its code: `FastLM`
only reads the weights. `LightLM` holds the same weights under the same names (`model.layers[i].self_attn.q_proj`
...), so `FastLM`, `build` and every `ModelRunner` take it as they take transformers' model; its forward is the fast
backend attached to it (`decoding/backends.py`). The numbers are the same: the file's tensors cast to the dtype as
`from_pretrained` casts them, the rotary frequencies computed as transformers computes them (`test_light.py`).

`load` covers what `FastLM` covers with the default rotary type (others, sharded files or a file without every weight:
None, and transformers loads the model).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from spd_lsp.engine.decoding.backends import attached

log = logging.getLogger(__name__)

WEIGHTS = "model.safetensors"


class Linear(torch.nn.Module):
    """A projection's weight (and bias), without `torch.nn.Linear`'s random initialisation of weights to be replaced."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None = None) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(weight, requires_grad=False)
        self.bias = torch.nn.Parameter(bias, requires_grad=False) if bias is not None else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.weight, self.bias)


class Norm(torch.nn.Module):
    def __init__(self, weight: torch.Tensor) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(weight, requires_grad=False)


class Rotary(torch.nn.Module):
    """transformers' default rotary frequencies (`LlamaRotaryEmbedding.compute_default_rope_parameters`), fp32."""

    def __init__(self, config: Any) -> None:
        super().__init__()
        dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
        base = config.rope_parameters["rope_theta"]
        self.register_buffer("inv_freq", 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float) / dim)),
                             persistent=False)
        self.attention_scaling = 1.0


class Attention(torch.nn.Module):
    def __init__(self, weights: dict[str, torch.Tensor], prefix: str) -> None:
        super().__init__()
        for name in ("q_proj", "k_proj", "v_proj", "o_proj"):
            setattr(self, name, Linear(weights[f"{prefix}.{name}.weight"], weights.get(f"{prefix}.{name}.bias")))


class Mlp(torch.nn.Module):
    def __init__(self, weights: dict[str, torch.Tensor], prefix: str) -> None:
        super().__init__()
        for name in ("gate_proj", "up_proj", "down_proj"):
            setattr(self, name, Linear(weights[f"{prefix}.{name}.weight"]))


class Layer(torch.nn.Module):
    def __init__(self, weights: dict[str, torch.Tensor], prefix: str) -> None:
        super().__init__()
        self.self_attn = Attention(weights, f"{prefix}.self_attn")
        self.mlp = Mlp(weights, f"{prefix}.mlp")
        self.input_layernorm = Norm(weights[f"{prefix}.input_layernorm.weight"])
        self.post_attention_layernorm = Norm(weights[f"{prefix}.post_attention_layernorm.weight"])


class Decoder(torch.nn.Module):
    def __init__(self, config: Any, weights: dict[str, torch.Tensor]) -> None:
        super().__init__()
        self.embed_tokens = torch.nn.Embedding.from_pretrained(weights["model.embed_tokens.weight"], freeze=True)
        self.layers = torch.nn.ModuleList(Layer(weights, f"model.layers.{i}") for i in range(config.num_hidden_layers))
        self.norm = Norm(weights["model.norm.weight"])
        self.rotary_emb = Rotary(config)


class LightLM(torch.nn.Module):
    """transformers' causal LM in shape (`config`, `generation_config`, `model`, `lm_head`, the accessors the engine
    calls); its forward is the attached fast backend's, in transformers' calling convention."""

    def __init__(self, config: Any, generation_config: Any, weights: dict[str, torch.Tensor]) -> None:
        super().__init__()
        self.config, self.generation_config = config, generation_config
        self.model = Decoder(config, weights)
        head = self.model.embed_tokens.weight if config.tie_word_embeddings else weights["lm_head.weight"]
        self.lm_head = Linear(head)

    def get_input_embeddings(self) -> torch.nn.Embedding:
        return self.model.embed_tokens

    def get_output_embeddings(self) -> Linear:
        return self.lm_head

    def get_decoder(self) -> Decoder:
        return self.model

    @property
    def dtype(self) -> torch.dtype:
        return self.model.embed_tokens.weight.dtype

    @property
    def device(self) -> torch.device:
        return self.model.embed_tokens.weight.device

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        backend = attached(self)
        if backend is None:
            raise RuntimeError("a LightLM runs on the fast backend attached to it (engine/fast/__init__.py: attach)")
        return backend(*args, **kwargs)


def uncovered(saved: dict[str, Any], files: list[str]) -> str | None:
    """Why `LightLM` does not hold the model of this config.json (`saved`, as the file holds it) and these files
    (transformers loads it then), or None."""
    from transformers.configuration_utils import PretrainedConfig

    from spd_lsp.engine.fast.model import unsupported

    reason = unsupported(PretrainedConfig.from_dict(saved))
    if reason:
        return reason
    if saved.get("model_type") not in ("llama", "qwen2"):
        return f"the {saved.get('model_type')} family (it holds Llama's and Qwen2's modules)"
    # As saved, not as transformers' own config classes standardise it: a config of transformers 4 keeps
    # `rope_theta` and `rope_scaling` at its top level, which only those classes turn into `rope_parameters`.
    rope = saved.get("rope_parameters")
    if not isinstance(rope, dict) or "rope_theta" not in rope or saved.get("rope_scaling") or "rope_theta" in saved:
        return "a rotary configuration in another transformers version's form"
    if rope.get("rope_type", "default") != "default" or saved.get("partial_rotary_factor") not in (None, 1.0):
        return f"rotary type {rope.get('rope_type')!r}" + (" (partial)" if rope.get("rope_type") == "default" else "")
    if WEIGHTS not in files:
        return f"no single {WEIGHTS} (sharded or another format)"
    return None


def load(directory: Path, dtype: torch.dtype) -> LightLM | None:
    """The model in `directory` (its config.json and model.safetensors) as a `LightLM` in `dtype` on the CPU; None
    where it does not cover it (logged: transformers loads it instead)."""
    from safetensors import safe_open
    from transformers import GenerationConfig
    from transformers.configuration_utils import PretrainedConfig

    saved = json.loads((directory / "config.json").read_text())
    reason = uncovered(saved, [p.name for p in directory.iterdir()])
    if reason:
        log.info("transformers loads the model: the light loader does not cover %s", reason)
        return None
    config = PretrainedConfig.from_dict(saved)
    with safe_open(str(directory / WEIGHTS), framework="pt") as file:  # as from_pretrained: each tensor cast to dtype
        weights = {name: file.get_tensor(name).to(dtype) for name in file.keys()}
    try:
        generation = GenerationConfig.from_pretrained(str(directory), local_files_only=True)
    except OSError:  # none saved: the model's config says the same tokens
        generation = GenerationConfig.from_model_config(config)
    try:
        return LightLM(config, generation, weights).eval()
    except KeyError as missing:
        log.info("transformers loads the model: its file lacks %s", missing)
        return None
