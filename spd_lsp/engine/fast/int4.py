"""Weight-only int4 matmuls: `_weight_int4pack_mm_for_cpu` on the CPU, tinygemm's `_weight_int4pack_mm` on CUDA.

Both take a weight packed once at load and `scales_and_zeros` [K / group, N, 2] in the
activations' dtype, and compute x @ ((q - 8) * scale + zero).T per group.
"""

from __future__ import annotations

import torch

from spd_lsp.engine.fast import matvec
from spd_lsp.engine.fast.q4 import BLOCK, Groups


def supported(device: torch.device) -> bool:
    return device.type in ("cpu", "cuda")


def inner_k_tiles(k: int) -> int:
    """tinygemm's tiles along K: the largest of 8, 4, 2 with K a multiple of 16 per tile."""
    return next((tiles for tiles in (8, 4, 2) if k % (tiles * 16) == 0), 0)


# The fast path's fused projections and the transformers projections each is made of.
FUSED: dict[str, tuple[str, ...]] = {"qkv": ("q_proj", "k_proj", "v_proj"), "out": ("o_proj",),
                                     "gate_up": ("gate_proj", "up_proj"), "down": ("down_proj",)}


class Int4Weight(torch.nn.Module):
    """A projection [N, K] held as packed int4 groups of `BLOCK` (`of` packs them; the kernels' own layout), or, once
    `use_rows` has run, as Q4_1 rows for our CPU kernel (`matvec.py`)."""

    def __init__(self, weight: torch.Tensor, scales_and_zeros: torch.Tensor, *, in_features: int) -> None:
        super().__init__()
        self.out_features, self.in_features = scales_and_zeros.shape[1], in_features
        self.cuda = weight.device.type == "cuda"
        self.register_buffer("weight", weight)
        self.register_buffer("scales_and_zeros", scales_and_zeros)
        self.rows: matvec.Rows | None = None

    def use_rows(self, rows: "matvec.Rows") -> None:
        """Serve from `rows` (the same weights, [N, K]) on our kernel, and drop ATen's packed weight: the rows are set
        first, so a forward in another thread, which reads them in the other order (`forward`), finds one of the two."""
        if tuple(rows.codes.shape) != (self.out_features, self.in_features // 2):
            raise ValueError(f"rows {tuple(rows.codes.shape)} for a projection of {self.out_features} x {self.in_features}")
        self.rows = rows
        self.weight = self.scales_and_zeros = None

    @classmethod
    def of(cls, groups: Groups, *, dtype: torch.dtype, device: torch.device) -> "Int4Weight":
        n, k = groups.codes.shape
        if device.type == "cuda":  # tinygemm: two codes a byte, the even element high; unmeasured here (no GPU)
            codes = groups.codes.to(device)
            packed = ((codes[:, ::2] << 4) | codes[:, 1::2]).to(torch.uint8)
            weight = torch.ops.aten._convert_weight_to_int4pack(packed, inner_k_tiles(k))
        else:
            weight = torch.ops.aten._convert_weight_to_int4pack_for_cpu(groups.codes.contiguous(), 2)
        scales_and_zeros = torch.stack([groups.scales, groups.zeros], dim=-1).transpose(0, 1).contiguous()
        return cls(weight, scales_and_zeros.to(device=device, dtype=dtype), in_features=k)

    @staticmethod
    def packable(n: int, k: int, device: torch.device) -> bool:
        if k % BLOCK:
            return False
        return device.type == "cpu" or (device.type == "cuda" and inner_k_tiles(k) > 0 and n % 8 == 0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        flat = x.reshape(-1, shape[-1])
        weight, rows = self.weight, self.rows  # this order: `use_rows` may run meanwhile
        if rows is not None:
            return matvec.int4(flat, rows).reshape(*shape[:-1], self.out_features)
        if self.cuda:
            out = torch.ops.aten._weight_int4pack_mm(flat, weight, BLOCK, self.scales_and_zeros)
        else:
            out = torch.ops.aten._weight_int4pack_mm_for_cpu(flat, weight, BLOCK, self.scales_and_zeros)
        return out.reshape(*shape[:-1], self.out_features)

    def state(self, prefix: str) -> dict[str, torch.Tensor]:
        return {f"{prefix}.weight": self.weight, f"{prefix}.scales_and_zeros": self.scales_and_zeros}

    def nbytes(self) -> int:
        rows = self.rows
        tensors = rows if rows is not None else (self.weight, self.scales_and_zeros)
        return sum(t.numel() * t.element_size() for t in tensors)


Packed = list[dict[str, Int4Weight]]  # per layer, by fused name (FUSED)


def fused(groups: dict[str, Groups]) -> dict[str, Groups]:
    """One layer's projections (by transformers name) joined as the fast path's fused ones (`FUSED`)."""
    return {name: Groups(*(torch.cat([getattr(groups[p], f) for p in parts]) for f in ("codes", "scales", "zeros")))
            for name, parts in FUSED.items()}


def pack(layers: list[dict[str, Groups]], *, dtype: torch.dtype, device: torch.device) -> Packed:
    """Per layer, its fused projections packed (those the kernels cannot take left out: they stay float)."""
    return [{name: Int4Weight.of(joined, dtype=dtype, device=device) for name, joined in fused(groups).items()
             if Int4Weight.packable(*joined.codes.shape, device)} for groups in layers]


def packed_state(packed: Packed) -> dict[str, torch.Tensor]:
    return {k: v.contiguous() for i, layer in enumerate(packed) for name, w in layer.items()
            for k, v in w.state(f"{i}.{name}").items()}


def from_state(state: dict[str, torch.Tensor], layers: int, in_features: dict[str, int]) -> Packed:
    """`packed_state`'s tensors back as `Packed` (`in_features`: K of each fused name)."""
    return [{name: Int4Weight(state[f"{i}.{name}.weight"], state[f"{i}.{name}.scales_and_zeros"],
                              in_features=in_features[name])
             for name in FUSED if f"{i}.{name}.weight" in state} for i in range(layers)]
