"""The GGUF's own Q4_1 blocks as int4 groups: no dequantisation, no re-quantisation.

A Q4_1 block holds 32 weights of one output row: an fp16 scale d, an fp16 minimum m and
16 bytes of 4-bit codes q (element j < 16 in the low nibble of byte j, element j + 16 in its
high nibble); the weight is d * q + m. As an int4 group with scale d and zero point
m + 8d (the kernels' `(q - 8) * scale + zero`) these are the same numbers, up to the
rounding of d and m + 8d to the kernels' scale dtype.

llama.cpp's converter permutes the rows of q/k projections (rotary pairs interleaved);
transformers undoes that when it loads a GGUF and so do we, on whole rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

BLOCK = 32
BLOCK_BYTES = 2 + 2 + BLOCK // 2


@dataclass(frozen=True)
class Groups:
    """A weight [N, K] as 4-bit codes with per-group (of `BLOCK` along K) scale and zero: w = (q - 8) * scale + zero."""

    codes: torch.Tensor  # [N, K] int32 in 0..15
    scales: torch.Tensor  # [N, K / BLOCK] float32
    zeros: torch.Tensor  # [N, K / BLOCK] float32

    def codes_scales_zeros(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        return self.codes, self.scales, self.zeros

    def dequantised(self) -> torch.Tensor:
        n, k = self.codes.shape
        grouped = (self.codes.view(n, k // BLOCK, BLOCK).float() - 8) * self.scales[..., None] + self.zeros[..., None]
        return grouped.view(n, k)


def unpack_q4_1(raw: np.ndarray) -> Groups:
    """One tensor's Q4_1 bytes [N, K / 32 * 20] (gguf's `ReaderTensor.data`) as `Groups`."""
    n = raw.shape[0]
    blocks = np.ascontiguousarray(raw).reshape(n, -1, BLOCK_BYTES)
    d = blocks[..., 0:2].copy().view(np.float16)[..., 0].astype(np.float32)
    m = blocks[..., 2:4].copy().view(np.float16)[..., 0].astype(np.float32)
    qs = blocks[..., 4:]
    codes = np.concatenate([qs & 0x0F, qs >> 4], axis=-1).reshape(n, -1).astype(np.int32)
    return Groups(torch.from_numpy(codes), torch.from_numpy(d), torch.from_numpy(m + 8 * d))


def unpermute_order(rows: int, heads: int) -> torch.Tensor:
    """The GGUF row each transformers row of a q/k projection comes from (transformers' `_reverse_permute_weights`)."""
    dim = rows // heads // 2
    return torch.arange(rows).view(heads, dim, 2).transpose(1, 2).reshape(rows)


# transformers' Llama/Qwen2 module names -> GGUF tensor names of one block.
GGUF_NAMES = {
    "q_proj": "attn_q", "k_proj": "attn_k", "v_proj": "attn_v", "o_proj": "attn_output",
    "gate_proj": "ffn_gate", "up_proj": "ffn_up", "down_proj": "ffn_down",
}


def q4_1_blocks(path: Path, config: object) -> list[dict[str, np.ndarray]] | None:
    """Per layer, its projections' Q4_1 blocks [N, K / 32, 20] in transformers' row order; None unless every one of
    them is Q4_1."""
    import gguf

    reader = gguf.GGUFReader(path)
    tensors = {t.name: t for t in reader.tensors}
    heads, kv_heads = config.num_attention_heads, config.num_key_value_heads
    layers = []
    for index in range(config.num_hidden_layers):
        layer = {}
        for ours, theirs in GGUF_NAMES.items():
            tensor = tensors.get(f"blk.{index}.{theirs}.weight")
            if tensor is None or tensor.tensor_type != gguf.GGMLQuantizationType.Q4_1:
                return None
            raw = np.asarray(tensor.data)
            blocks = raw.reshape(raw.shape[0], -1, BLOCK_BYTES)
            if ours in ("q_proj", "k_proj") and config.model_type == "llama":
                blocks = blocks[unpermute_order(blocks.shape[0], heads if ours == "q_proj" else kv_heads).numpy()]
            layer[ours] = blocks
        layers.append(layer)
    return layers


def q4_1_layers(path: Path, config: object) -> list[dict[str, Groups]] | None:
    """Per layer, its projections as `Groups` from the GGUF's Q4_1 blocks; None unless every one of them is Q4_1."""
    layers = q4_1_blocks(path, config)
    return None if layers is None else [{name: unpack_q4_1(blocks) for name, blocks in layer.items()}
                                        for layer in layers]


# The fast path's fused projections and the transformers projections each is made of.
FUSED: dict[str, tuple[str, ...]] = {"qkv": ("q_proj", "k_proj", "v_proj"), "out": ("o_proj",),
                                     "gate_up": ("gate_proj", "up_proj"), "down": ("down_proj",)}


def fused(groups: dict[str, Groups]) -> dict[str, Groups]:
    """One layer's projections (by transformers name) joined as the fast path's fused ones (`FUSED`)."""
    return {name: Groups(*(torch.cat([getattr(groups[p], f) for p in parts]) for f in ("codes", "scales", "zeros")))
            for name, parts in FUSED.items()}


def quantise(weight: torch.Tensor) -> Groups:
    """Float weights [N, K] as asymmetric 4-bit groups of `BLOCK` (min/max per group): the explicit `quantize: int4`."""
    n, k = weight.shape
    grouped = weight.detach().float().view(n, k // BLOCK, BLOCK)
    low, high = grouped.amin(dim=-1), grouped.amax(dim=-1)
    scale = ((high - low) / 15).clamp(min=1e-8)
    codes = ((grouped - low[..., None]) / scale[..., None]).round().clamp(0, 15).to(torch.int32).view(n, k)
    return Groups(codes, scale, low + 8 * scale)
