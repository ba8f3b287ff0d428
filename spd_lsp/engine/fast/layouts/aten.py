"""Weight-only int4 and int8 on torch's own kernels: what serves the blocks where ours cannot (not built, another
device). `AtenInt4`: `_weight_int4pack_mm_for_cpu` on the CPU, tinygemm's `_weight_int4pack_mm` on CUDA, a weight
packed once in the kernel's own layout (which depends on the torch version and the CPU's vector ISA) with
`scales_and_zeros` [K / 32, N, 2]: x @ ((q - 8) * scale + zero).T per group. `Q8Halves`: Q8_0 blocks as two such
int4 weights (ATen has no int8 matmul with a scale per block). `Int8Aten`: int8 rows on `_weight_int8pack_mm`.
"""

from __future__ import annotations

import torch

from spd_lsp.engine.fast.layouts import Linear
from spd_lsp.engine.fast.layouts.blocks import BLOCK, Int8Rows


def inner_k_tiles(k: int) -> int:
    """tinygemm's tiles along K: the largest of 8, 4, 2 with K a multiple of 16 per tile."""
    return next((tiles for tiles in (8, 4, 2) if k % (tiles * 16) == 0), 0)


class AtenInt4(Linear):
    layout = "int4 (ATen-packed)"

    def __init__(self, weight: torch.Tensor, scales_and_zeros: torch.Tensor, *, in_features: int) -> None:
        self.weight, self.scales_and_zeros = weight, scales_and_zeros
        self.out_features, self.in_features = scales_and_zeros.shape[1], in_features
        self.cuda = weight.device.type == "cuda"
        self.kernel = "tinygemm" if self.cuda else "aten"

    @classmethod
    def of(cls, codes: torch.Tensor, scales: torch.Tensor, zeros: torch.Tensor, *, dtype: torch.dtype,
           device: torch.device) -> "AtenInt4":
        """int4 groups of `BLOCK` (codes [N, K] int32 in 0..15; w = (q - 8) * scale + zero) packed for `device`."""
        n, k = codes.shape
        if device.type == "cuda":  # tinygemm: two codes a byte, the even element high; unmeasured here (no GPU)
            on = codes.to(device)
            packed = ((on[:, ::2] << 4) | on[:, 1::2]).to(torch.uint8)
            weight = torch.ops.aten._convert_weight_to_int4pack(packed, inner_k_tiles(k))
        else:
            weight = torch.ops.aten._convert_weight_to_int4pack_for_cpu(codes.contiguous(), 2)
        scales_and_zeros = torch.stack([scales, zeros], dim=-1).transpose(0, 1).contiguous()
        return cls(weight, scales_and_zeros.to(device=device, dtype=dtype), in_features=k)

    @staticmethod
    def packable(n: int, k: int, device: torch.device) -> bool:
        if k % BLOCK:
            return False
        return device.type == "cpu" or (device.type == "cuda" and inner_k_tiles(k) > 0 and n % 8 == 0)

    def mm(self, x: torch.Tensor) -> torch.Tensor:
        if self.cuda:
            return torch.ops.aten._weight_int4pack_mm(x, self.weight, BLOCK, self.scales_and_zeros)
        return torch.ops.aten._weight_int4pack_mm_for_cpu(x, self.weight, BLOCK, self.scales_and_zeros)

    def tensors(self) -> tuple[torch.Tensor, ...]:
        return (self.weight, self.scales_and_zeros)

    def state(self, prefix: str) -> dict[str, torch.Tensor]:
        return {f"{prefix}.weight": self.weight, f"{prefix}.scales_and_zeros": self.scales_and_zeros}


class Q8Halves(Linear):
    """Q8_0 blocks as two int4 matmuls of the same group size, summed: a code q = 16 * hi + lo with hi in -8..7 and
    lo in 0..15: hi with scale 16d and zero 0, lo with scale d and zero 8d (d rounded to the kernels' scale dtype)."""

    layout, kernel = "q8_0 (two int4 halves)", "aten"

    def __init__(self, high: AtenInt4, low: AtenInt4) -> None:
        self.high, self.low = high, low
        self.out_features, self.in_features = high.out_features, high.in_features

    @classmethod
    def of(cls, codes: torch.Tensor, scales: torch.Tensor, *, dtype: torch.dtype) -> "Q8Halves":
        """int8 codes [N, K] with a float scale per block of 32 [N, K / 32]."""
        q = codes.to(torch.int32)
        hi = torch.div(q, 16, rounding_mode="floor")  # -8..7
        lo = q - 16 * hi  # 0..15
        cpu = torch.device("cpu")
        return cls(AtenInt4.of(hi + 8, 16 * scales, torch.zeros_like(scales), dtype=dtype, device=cpu),
                   AtenInt4.of(lo, scales, 8 * scales, dtype=dtype, device=cpu))

    def mm(self, x: torch.Tensor) -> torch.Tensor:
        return self.high.mm(x) + self.low.mm(x)

    def tensors(self) -> tuple[torch.Tensor, ...]:
        return self.high.tensors() + self.low.tensors()

    def state(self) -> dict[str, torch.Tensor]:
        return {**self.high.state("high"), **self.low.state("low")}

    @classmethod
    def from_state(cls, state: dict[str, torch.Tensor]) -> "Q8Halves":
        def half(name: str) -> AtenInt4:
            weight, scales = state[f"{name}.weight"], state[f"{name}.scales_and_zeros"]
            return AtenInt4(weight, scales, in_features=scales.shape[0] * BLOCK)

        return cls(half("high"), half("low"))


class Int8Aten(Linear):
    layout, kernel = "int8 rows", "aten"

    def __init__(self, rows: Int8Rows) -> None:
        self.rows = rows
        self.out_features, self.in_features = rows.codes.shape

    def mm(self, x: torch.Tensor) -> torch.Tensor:
        return torch._weight_int8pack_mm(x, self.rows.codes, self.rows.scales)

    def tensors(self) -> tuple[torch.Tensor, ...]:
        return tuple(self.rows)
