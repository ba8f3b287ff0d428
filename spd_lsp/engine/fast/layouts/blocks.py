"""The GGUF's own blocks as tensors, with no kernel: what `ours.py` (and AMX) compute on.

- `Q4Rows`: Q4_1 blocks of 32 along K: codes [N, K / 2] uint8 (byte j of a block: element j in the low nibble, j + 16
  in the high one, the GGUF's order), scales and minima [N, K / 32] fp16; w = scale * q + min.
- `Q8Blocks`: Q8_0 blocks: codes [N, K] int8, scales [N, K / 32] fp16; w = scale * q.
- `Int8Rows`: int8 rows with one scale each (a requantisation of float weights: the `int8` head).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch

BLOCK = 32


class Q4Rows(NamedTuple):
    codes: torch.Tensor
    scales: torch.Tensor
    mins: torch.Tensor

    def dequantised(self) -> torch.Tensor:
        """W [N, K] fp32."""
        n, half = self.codes.shape
        codes = self.codes.view(n, half * 2 // BLOCK, BLOCK // 2)
        q = torch.cat([codes & 15, codes >> 4], dim=-1).float()
        return (q * self.scales.float()[..., None] + self.mins.float()[..., None]).view(n, half * 2)

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
