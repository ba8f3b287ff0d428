"""A model straight from a GGUF file: its config and tokenizer from the metadata (`engine/gguf`), its weights as the
file's own blocks (`layouts.blocks.Blocks`, converted exactly), never dequantised to a float copy on disk or in
memory (norms and other small tensors excepted: they are float in the file).

`load(path, dtype)` gives a `GGUFLM`: transformers' causal LM in shape as far as the engine asks (`config`,
`generation_config`, `get_input_embeddings`, `model.layers`, `forward` through the attached fast backend), holding a
`FastLM` (`lm`) whose projections start on torch's own ops (`BlocksTorch`) until the backend applies its plan.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from spd_lsp.engine.decoding.backends import attached
from spd_lsp.engine.fast.arch import Arch, arch_of
from spd_lsp.engine.fast.layouts import Linear
from spd_lsp.engine.fast.layouts.blocks import Blocks
from spd_lsp.engine.fast.layouts.dense import BlocksTorch, Dense
from spd_lsp.engine.fast.model import Block, FastLM, Projection
from spd_lsp.engine.gguf.file import GGUFFile

log = logging.getLogger(__name__)

# The fast path's fused projections and the GGUF tensors (of block `blk.{i}.`) each is made of, in row order.
FUSED = {"qkv": ("attn_q", "attn_k", "attn_v"), "out": ("attn_output",), "gate_up": ("ffn_gate", "ffn_up"),
         "down": ("ffn_down",)}


class Joined(Linear):
    """Projections held in different layouts, computed apart and joined along the outputs (a Q4_K_M file's q/k in
    Q4_K and v in Q6_K)."""

    kernel = "joined"

    def __init__(self, parts: list[Linear]) -> None:
        self.parts = parts
        self.out_features = sum(p.out_features for p in parts)
        self.in_features = parts[0].in_features
        self.layout = "+".join(dict.fromkeys(p.layout for p in parts))
        self.kernel = "+".join(dict.fromkeys(p.kernel for p in parts))

    def mm(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([part.mm(x) for part in self.parts], dim=-1)

    def tensors(self) -> tuple[torch.Tensor, ...]:
        return tuple(t for part in self.parts for t in part.tensors())


class BlockEmbedding(torch.nn.Module):
    """The token embedding as the GGUF's blocks (or a float tensor): the rows looked up are dequantised as they are
    read, in the model's dtype, times `scale` (Gemma-3's sqrt(hidden), as transformers scales it)."""

    def __init__(self, weights: Blocks | torch.Tensor, dtype: torch.dtype, scale: float | None) -> None:
        super().__init__()
        self.weights, self.dtype = weights, dtype
        self.num_embeddings, self.embedding_dim = weights.shape
        self.scale = None if scale is None else torch.tensor(scale, dtype=dtype)
        self.kernel = False  # our kernel library's row lookup (the backend turns it on once loaded)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        flat = ids.reshape(-1)
        if isinstance(self.weights, torch.Tensor):
            rows = self.weights[flat].to(self.dtype)
        elif self.kernel:
            from spd_lsp.engine.kernels import blocks

            rows = blocks.dequantize(self.weights.kind, list(self.weights.parts), self.weights.group, flat).to(self.dtype)
        else:
            rows = self.weights.rows(flat).dequantised().to(self.dtype)
        rows = rows.view(*ids.shape, self.embedding_dim)
        return rows if self.scale is None else rows * self.scale

    def tensors(self) -> tuple[torch.Tensor, ...]:
        return (self.weights,) if isinstance(self.weights, torch.Tensor) else tuple(self.weights.parts)


class _Layers(torch.nn.Module):
    """`model.layers` as the engine counts and hooks them (the forward is FastLM's: these never run)."""

    def __init__(self, count: int) -> None:
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Module() for _ in range(count))


class GGUFLM(torch.nn.Module):
    """A GGUF's model as the engine takes a transformers causal LM; its forward is the attached fast backend's."""

    def __init__(self, config: Any, generation_config: Any, lm: FastLM, embedding: BlockEmbedding, path: Path,
                 types: dict[str, list[str]]) -> None:
        super().__init__()
        self.config, self.generation_config = config, generation_config
        self.lm = lm
        self.embedding = embedding
        self.model = _Layers(config.num_hidden_layers)
        self.path = path
        self.types = types  # per fused projection (and "head", "embedding"), the GGUF types it holds, by layer

    def get_input_embeddings(self) -> BlockEmbedding:
        return self.embedding

    @property
    def dtype(self) -> torch.dtype:
        return self.lm.dtype

    @property
    def device(self) -> torch.device:
        return self.lm.device

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        backend = attached(self)
        if backend is None:
            raise RuntimeError("a GGUFLM runs on the fast backend attached to it (engine/fast/__init__.py: attach)")
        return backend(*args, **kwargs)


def covers(path: Path) -> str | None:
    """Why the fast path cannot load the GGUF at `path` from its blocks (None: it can)."""
    try:
        return _why_not(GGUFFile(path))
    except ValueError as exc:
        return str(exc)


def _why_not(file: GGUFFile) -> str | None:
    """`covers` of a file already read."""
    from spd_lsp.engine.gguf.config import UnsupportedArchitecture, config_of

    try:
        arch_of(config_of(file))
    except (UnsupportedArchitecture, ValueError) as exc:
        return str(exc)
    unsupported = sorted({info.type_name for info in file.tensors.values() if not _supported(info.type)})
    if unsupported:
        return f"weight types {', '.join(unsupported)} (the fast path reads {', '.join(_supported_names())})"
    return None


def load(path: Path, dtype: torch.dtype, *, tokenizer_cache: Path | None = None) -> tuple[GGUFLM, Any]:
    """The model in the GGUF at `path` (dtype: of its activations and float tensors) and its tokenizer (kept in
    `tokenizer_cache`); ValueError where the fast path does not cover it (`covers`)."""
    from transformers import GenerationConfig

    from spd_lsp.engine.gguf.config import config_of
    from spd_lsp.engine.gguf.tokenizer import gguf_tokenizer

    started = time.perf_counter()
    file = GGUFFile(path)
    config = config_of(file)
    arch = arch_of(config)
    reason = _why_not(file)
    if reason is not None:
        raise ValueError(reason)
    device = torch.device("cpu")
    types: dict[str, list[str]] = {name: [] for name in (*FUSED, "head", "embedding")}

    def tensor(name: str) -> torch.Tensor:
        return _float(file, name, dtype)

    blocks: list[Block] = []
    for index in range(arch.layers):
        def named(short: str) -> str:
            return f"blk.{index}.{short}.weight"

        projections = {}
        for role, parts in FUSED.items():
            linears = [_linear(file, named(part), arch, permute=part if file.architecture == "llama" else None,
                               dtype=dtype) for part in parts]
            types[role].append("+".join(dict.fromkeys(file.tensors[named(part)].type_name for part in parts)))
            projections[role] = _joined(linears)
        qkv_bias = None
        if f"blk.{index}.attn_q.bias" in file.tensors:
            qkv_bias = torch.cat([tensor(f"blk.{index}.{part}.bias") for part in FUSED["qkv"]])
        sandwich = arch.sandwich
        blocks.append(Block(
            attn_norm=_norm(file, named("attn_norm"), arch, dtype),
            qkv=Projection(projections["qkv"], qkv_bias),
            out=Projection(projections["out"], None),
            mlp_norm=_norm(file, named("ffn_norm"), arch, dtype),
            gate_up=Projection(projections["gate_up"], None),
            down=Projection(projections["down"], None),
            q_norm=_norm(file, named("attn_q_norm"), arch, dtype) if arch.qk_norm else None,
            k_norm=_norm(file, named("attn_k_norm"), arch, dtype) if arch.qk_norm else None,
            post_attn_norm=_norm(file, named("post_attention_norm"), arch, dtype) if sandwich else None,
            post_mlp_norm=_norm(file, named("post_ffw_norm"), arch, dtype) if sandwich else None,
        ))
    head_name = "output.weight" if "output.weight" in file.tensors else "token_embd.weight"
    head = _linear(file, head_name, arch, permute=None, dtype=dtype)
    types["head"].append(file.tensors[head_name].type_name)
    types["embedding"].append(file.tensors["token_embd.weight"].type_name)
    embedding_weights = head.weights if head_name == "token_embd.weight" and isinstance(head, BlocksTorch) else \
        _weights(file, "token_embd.weight", dtype)
    embedding = BlockEmbedding(embedding_weights, dtype, arch.embedding_scale)
    lm = FastLM(arch, blocks, norm=_norm(file, "output_norm.weight", arch, dtype), output=Projection(head, None),
                embedding=embedding, dtype=dtype, device=device)
    tokenizer = gguf_tokenizer(path, tokenizer_cache, file=file)
    try:
        generation = GenerationConfig.from_model_config(config)
    except Exception:  # noqa: BLE001 - the model's config says the same tokens
        generation = GenerationConfig(bos_token_id=config.bos_token_id, eos_token_id=config.eos_token_id)
    model = GGUFLM(config, generation, lm, embedding, Path(path), types).eval()
    log.info("read %s from its blocks in %.1f s (%s)", Path(path).name, time.perf_counter() - started,
             ", ".join(f"{role} {'/'.join(sorted(set(kinds)))}" for role, kinds in types.items()))
    return model, tokenizer


# -- one tensor ---------------------------------------------------------------------------------------------------

FLOATS = {0: torch.float32, 1: torch.float16, 30: torch.bfloat16}  # gguf's F32, F16, BF16


def _supported(kind: int) -> bool:
    from spd_lsp.engine.fast import formats

    return kind in FLOATS or kind in formats.FORMATS


def _supported_names() -> list[str]:
    from spd_lsp.engine.fast import formats

    return list(formats.SUPPORTED)


def _float(file: GGUFFile, name: str, dtype: torch.dtype) -> torch.Tensor:
    """A float tensor of the file (a norm, a bias) as a torch tensor of its shape, in `dtype`."""
    info = file.tensors[name]
    raw = file.raw(name)
    array = np.ascontiguousarray(raw).view(np.uint16 if info.type in (1, 30) else np.float32)
    values = torch.from_numpy(array.copy())
    if info.type == 1:
        values = values.view(torch.float16)
    elif info.type == 30:
        values = values.view(torch.bfloat16)
    return values.reshape(info.shape).to(dtype)


def _weights(file: GGUFFile, name: str, dtype: torch.dtype, *, permute: Any = None, arch: Arch | None = None
             ) -> Blocks | torch.Tensor:
    """A weight [N, K] of the file as its blocks (or a float tensor in `dtype`), q/k rows unpermuted for Llama."""
    from spd_lsp.engine.fast import formats

    info = file.tensors[name]
    if info.type in FLOATS:
        weight = _float(file, name, dtype)
    else:
        weight = formats.blocks(file.raw(name), info.type, info.shape)
    if permute in ("attn_q", "attn_k") and arch is not None:
        from spd_lsp.engine.fast.q4 import unpermute_order

        order = unpermute_order(info.shape[0], arch.heads if permute == "attn_q" else arch.kv_heads)
        weight = weight[order] if isinstance(weight, torch.Tensor) else weight.rows(order)
    return weight


def _linear(file: GGUFFile, name: str, arch: Arch, *, permute: str | None, dtype: torch.dtype) -> Linear:
    weight = _weights(file, name, dtype, permute=permute, arch=arch)
    return Dense(weight) if isinstance(weight, torch.Tensor) else BlocksTorch(weight)


def _joined(linears: list[Linear]) -> Linear:
    """One `Linear` of several along the outputs: their blocks joined where they are of one kind, else `Joined`."""
    if len(linears) == 1:
        return linears[0]
    if all(isinstance(l, Dense) for l in linears):
        return Dense(torch.cat([l.weight for l in linears]))
    if all(isinstance(l, BlocksTorch) for l in linears):
        weights = [l.weights for l in linears]
        first = weights[0]
        if all(w.kind == first.kind and w.group == first.group and len(w.parts) == len(first.parts)
               and all(a.dtype == b.dtype for a, b in zip(w.parts, first.parts)) for w in weights):
            parts = tuple(torch.cat([w.parts[i] for w in weights]) for i in range(len(first.parts)))
            return BlocksTorch(Blocks(first.kind, parts, first.group, "+".join(dict.fromkeys(w.layout for w in weights))))
    return Joined(linears)


def _norm(file: GGUFFile, name: str, arch: Arch, dtype: torch.dtype) -> torch.Tensor:
    """A norm's weight as the forward multiplies by it: Gemma's in fp32 (the file holds 1 + weight, as llama.cpp
    writes it), the others in the model's dtype."""
    return _float(file, name, torch.float32 if arch.gemma_norms else dtype)
