"""Weight-only int4 matmuls: `_weight_int4pack_mm_for_cpu` on the CPU, tinygemm's `_weight_int4pack_mm` on CUDA.

Both take a weight packed once at load and `scales_and_zeros` [K / group, N, 2] in the
activations' dtype, and compute x @ ((q - 8) * scale + zero).T per group.
"""

from __future__ import annotations

import torch

from spd_lsp.engine.fast.q4 import BLOCK, Groups


def supported(device: torch.device) -> bool:
    return device.type in ("cpu", "cuda")


def inner_k_tiles(k: int) -> int:
    """tinygemm's tiles along K: the largest of 8, 4, 2 with K a multiple of 16 per tile."""
    return next((tiles for tiles in (8, 4, 2) if k % (tiles * 16) == 0), 0)


class Int4Weight(torch.nn.Module):
    """A projection [N, K] held as packed int4 groups of `BLOCK`."""

    def __init__(self, groups: Groups, *, dtype: torch.dtype, device: torch.device) -> None:
        super().__init__()
        n, k = groups.codes.shape
        self.out_features, self.in_features = n, k
        self.cuda = device.type == "cuda"
        if self.cuda:  # tinygemm: two codes a byte, the even element high; unmeasured here (no GPU)
            codes = groups.codes.to(device)
            packed = ((codes[:, ::2] << 4) | codes[:, 1::2]).to(torch.uint8)
            weight = torch.ops.aten._convert_weight_to_int4pack(packed, inner_k_tiles(k))
        else:
            weight = torch.ops.aten._convert_weight_to_int4pack_for_cpu(groups.codes.contiguous(), 2)
        self.register_buffer("weight", weight)
        scales_and_zeros = torch.stack([groups.scales, groups.zeros], dim=-1).transpose(0, 1).contiguous()
        self.register_buffer("scales_and_zeros", scales_and_zeros.to(device=device, dtype=dtype))

    @staticmethod
    def packable(n: int, k: int, device: torch.device) -> bool:
        if k % BLOCK:
            return False
        return device.type == "cpu" or (device.type == "cuda" and inner_k_tiles(k) > 0 and n % 8 == 0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        flat = x.reshape(-1, shape[-1])
        if self.cuda:
            out = torch.ops.aten._weight_int4pack_mm(flat, self.weight, BLOCK, self.scales_and_zeros)
        else:
            out = torch.ops.aten._weight_int4pack_mm_for_cpu(flat, self.weight, BLOCK, self.scales_and_zeros)
        return out.reshape(*shape[:-1], self.out_features)

    def nbytes(self) -> int:
        return self.weight.numel() * self.weight.element_size() + self.scales_and_zeros.numel() * self.scales_and_zeros.element_size()
