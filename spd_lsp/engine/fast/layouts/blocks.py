"""The GGUF's own blocks as tensors, with no kernel: what `ours.py` (and AMX) compute on.

- `Q4Rows`: 4-bit groups of 32 along K: codes [N, K / 2] uint8 (byte j of a group: element j in the low nibble, j + 16
  in the high one, the order of Q4_0 / Q4_1), scales and minima [N, K / 32] fp16; w = scale * q + min.
- `Q4KRows`: Q4_K's two-level 4-bit groups of 32: codes as `Q4Rows`', 6-bit sub-scales and sub-minima [N, K / 32]
  uint8, super-block scales d and dmin [N, K / 256] fp16; w = d * sc * q - dmin * m.
- `Q8Rows`: 8-bit codes in groups of 16 or 32 with direct or two-level scales (Q8_0, Q5_x, Q5_K, Q6_K, IQ4_x).
- `Q8Blocks`: Q8_0 blocks: codes [N, K] int8, scales [N, K / 32] fp16; w = scale * q.
- `Int8Rows`: int8 rows with one scale each (a requantisation of float weights: the `int8` head).

Every field is a per-row tensor (first dimension N) or None, so rows are reordered alike (`formats.reorder_rows`).
`dequantised()` computes in the order gguf-py's dequantisation does ((d * sc) * q - dmin * m): the products of an fp16
and small integers are exact in fp32, so the results are equal to it.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch

BLOCK = 32
SUPER = 256  # the weights of a K-quant super-block


def nibbles(codes: torch.Tensor) -> torch.Tensor:
    """Packed 4-bit codes [N, K / 2] (`Q4Rows`' order) as fp32 [N, K / 32, 32]."""
    n, half = codes.shape
    grouped = codes.view(n, half * 2 // BLOCK, BLOCK // 2)
    return torch.cat([grouped & 15, grouped >> 4], dim=-1).float()


def per_group(super_values: torch.Tensor, groups: int) -> torch.Tensor:
    """[N, K / 256] super-block values as fp32 [N, groups], each repeated over its groups."""
    return super_values.float().repeat_interleave(groups // super_values.shape[1], dim=1)


class Q4Rows(NamedTuple):
    codes: torch.Tensor
    scales: torch.Tensor
    mins: torch.Tensor

    def dequantised(self) -> torch.Tensor:
        """W [N, K] fp32."""
        n, half = self.codes.shape
        return (nibbles(self.codes) * self.scales.float()[..., None] + self.mins.float()[..., None]).view(n, half * 2)

    @classmethod
    def of_blocks(cls, blocks: list[np.ndarray]) -> "Q4Rows":
        """Q4_1 blocks [N_i, K / 32, 20] (`q4.q4_1_blocks`: d, m, 16 bytes of codes), joined along the rows."""
        joined = np.concatenate(blocks) if len(blocks) > 1 else blocks[0]
        n = joined.shape[0]
        return cls(torch.from_numpy(np.ascontiguousarray(joined[..., 4:]).reshape(n, -1)),
                   torch.from_numpy(np.ascontiguousarray(joined[..., 0:2]).view(np.float16)[..., 0].copy()),
                   torch.from_numpy(np.ascontiguousarray(joined[..., 2:4]).view(np.float16)[..., 0].copy()))

    @classmethod
    def of_groups(cls, codes: torch.Tensor, scales: torch.Tensor, zeros: torch.Tensor) -> "Q4Rows":
        """int4 groups (codes [N, K] in 0..15, w = (q - 8) * scale + zero) with their scales and minima rounded to
        fp16 (the explicit `quantize: int4` of float weights)."""
        n, k = codes.shape
        grouped = codes.to(torch.uint8).view(n, k // BLOCK, 2, BLOCK // 2)
        packed = (grouped[:, :, 0] | (grouped[:, :, 1] << 4)).reshape(n, k // 2).contiguous()
        return cls(packed, scales.half().contiguous(), (zeros - 8 * scales).half().contiguous())


class Q4KRows(NamedTuple):
    """Q4_K: super-blocks of 256 along K, each 8 groups of 32. w = (d * sub_scales) * q - dmin * sub_mins."""

    codes: torch.Tensor  # [N, K / 2] uint8, `Q4Rows`' order within each group of 32
    sub_scales: torch.Tensor  # [N, K / 32] uint8 in 0..63
    sub_mins: torch.Tensor  # [N, K / 32] uint8 in 0..63
    d: torch.Tensor  # [N, K / 256] fp16
    dmin: torch.Tensor  # [N, K / 256] fp16

    def dequantised(self) -> torch.Tensor:
        """W [N, K] fp32."""
        n, groups = self.sub_scales.shape
        scales = per_group(self.d, groups) * self.sub_scales.float()
        mins = per_group(self.dmin, groups) * self.sub_mins.float()
        return (nibbles(self.codes) * scales[..., None] - mins[..., None]).view(n, groups * BLOCK)


class Q8Rows(NamedTuple):
    """Signed 8-bit codes in groups of `group` (16 or 32, = K / scales.shape[1]) along K, in one of two kinds:

    - direct (`d` is None): `scales` fp16 [N, K / group], `mins` None or fp16 [N, K / group];
      w = scales * q (+ mins). Q8_0, Q5_0 (q - 16), Q5_1 (q in 0..31, with mins), IQ4_NL (q from its table).
    - two-level (`d` fp16 [N, K / 256]): `scales` int8 sub-scales [N, K / group], `mins` None or uint8 sub-minima
      [N, K / group] with `dmin` fp16 [N, K / 256]; w = (d * scales) * q (- dmin * mins). Q5_K (q in 0..31, group
      32, sub-scales 0..63, with mins), Q6_K (q - 32, group 16, sub-scales -128..127), IQ4_XS (q from IQ4_NL's
      table, group 32, sub-scales -32..31).

    Note the signs: a direct minimum is added, a two-level one subtracted (each as its GGUF type defines it).
    """

    codes: torch.Tensor  # [N, K] int8
    scales: torch.Tensor  # [N, K / group]: fp16 (direct) or int8 (two-level)
    mins: torch.Tensor | None = None  # [N, K / group]: fp16 (direct) or uint8 (two-level); None: no minimum
    d: torch.Tensor | None = None  # [N, K / 256] fp16 (two-level); None: direct
    dmin: torch.Tensor | None = None  # [N, K / 256] fp16 where a two-level `mins` is

    @property
    def group(self) -> int:
        return self.codes.shape[1] // self.scales.shape[1]

    @property
    def two_level(self) -> bool:
        return self.d is not None

    def dequantised(self) -> torch.Tensor:
        """W [N, K] fp32."""
        n, k = self.codes.shape
        groups = self.scales.shape[1]
        scales = per_group(self.d, groups) * self.scales.float() if self.two_level else self.scales.float()
        w = self.codes.float().view(n, groups, k // groups) * scales[..., None]
        if self.mins is None:
            return w.view(n, k)
        if self.two_level:
            return (w - (per_group(self.dmin, groups) * self.mins.float())[..., None]).view(n, k)
        return (w + self.mins.float()[..., None]).view(n, k)


class Q8Blocks(NamedTuple):
    codes: torch.Tensor
    scales: torch.Tensor

    def dequantised(self) -> torch.Tensor:
        """W [N, K] fp32."""
        n, k = self.codes.shape
        return (self.codes.float().view(n, k // BLOCK, BLOCK) * self.scales.float()[..., None]).view(n, k)


class Int8Rows(NamedTuple):
    codes: torch.Tensor  # [N, K] int8
    scales: torch.Tensor  # [N], the activations' dtype

    @classmethod
    def of(cls, weight: torch.Tensor) -> "Int8Rows":
        """Symmetric per-row quantisation of a float weight [N, K] (scales in its dtype)."""
        w = weight.detach().float()
        scales = (w.abs().amax(dim=1) / 127).clamp(min=1e-12)
        codes = torch.round(w / scales[:, None]).clamp(-127, 127).to(torch.int8)
        return cls(codes.contiguous(), scales.to(weight.dtype))

    def dequantised(self) -> torch.Tensor:
        return self.codes.float() * self.scales.float()[:, None]


class Blocks(NamedTuple):
    """Any GGUF weight as one of the four kinds our kernels read (`engine/kernels/blocks.h`): `kind` "q4" (codes
    [N, K / 2], scales and mins [N, K / 32] fp16), "q4k" (codes, 6-bit sub-scales and sub-mins [N, K / 32] uint8, d
    and dmin [N, K / 256] fp16), "q8" (codes [N, K] int8, scales [N, K / group] fp16[, mins]) or "q8k" (codes, sub-scales
    [N, K / group] int8 or uint8, d [N, K / 256] fp16[, sub-mins uint8, dmin fp16]); `layout`: the GGUF type it came
    from ("q4_k", "q6_k", ...)."""

    kind: str
    parts: tuple[torch.Tensor, ...]
    group: int
    layout: str

    @property
    def shape(self) -> tuple[int, int]:
        codes = self.parts[0]
        return codes.shape[0], codes.shape[1] * (2 if self.kind in ("q4", "q4k") else 1)

    def rows(self, index: torch.Tensor | slice) -> "Blocks":
        """These rows only (every per-row tensor indexed alike)."""
        return self._replace(parts=tuple(part[index] for part in self.parts))

    def dequantised(self) -> torch.Tensor:
        """W [N, K] fp32, with torch's ops (the kernels' `blocks_dequantize` gives the same numbers)."""
        n, k = self.shape
        codes = self.parts[0]
        if self.kind in ("q4", "q4k"):
            grouped = codes.view(n, k // BLOCK, BLOCK // 2)
            q = torch.cat([grouped & 15, grouped >> 4], dim=-1).float().view(n, k // BLOCK, BLOCK)
        else:
            q = codes.float().view(n, k // self.group, self.group)
        scale, minimum = self.group_scales()
        return (q * scale[..., None] + minimum[..., None]).view(n, k)

    def group_scales(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Each group's scale and minimum [N, K / group] in fp32 (what `blocks.h` widens them to)."""
        group = BLOCK if self.kind in ("q4", "q4k") else self.group
        if self.kind in ("q4", "q8"):
            scales = self.parts[1].float()
            mins = self.parts[2].float() if len(self.parts) > 2 and self.parts[2].numel() else torch.zeros_like(scales)
            return scales, mins
        per_super = SUPER // group
        d = self.parts[2].float().repeat_interleave(per_super, dim=1)
        scales = d * self.parts[1].float()
        if len(self.parts) > 3:
            mins = -self.parts[4].float().repeat_interleave(per_super, dim=1) * self.parts[3].float()
        else:
            mins = torch.zeros_like(scales)
        return scales, mins

    def nbytes(self) -> int:
        return sum(part.numel() * part.element_size() for part in self.parts)



def blocks_of_q4(rows: Q4Rows, layout: str = "q4_1") -> Blocks:
    return Blocks("q4", tuple(rows), BLOCK, layout)


def blocks_of_q8(blocks: Q8Blocks, layout: str = "q8_0") -> Blocks:
    return Blocks("q8", tuple(blocks), BLOCK, layout)
