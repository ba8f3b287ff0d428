"""Weight-only matmuls for a few rows of activations (`matvec.cpp`): a decode step's projections and head on the
GGUF's own blocks, as they are.

- `int4_matvec`: W as Q4_1 blocks (codes [N, K / 2] uint8, byte j of a block holding element j low and j + 16 high;
  scales and minima [N, K / 32] fp16; w = scale * q + min);
- `q8_matvec`: W as Q8_0 blocks (codes [N, K] int8, scales [N, K / 32] fp16; w = scale * q);
- `int8_matvec`: W as int8 rows with one bf16 scale each.

Why: ATen's `_weight_int4pack_mm_for_cpu` read the bundled model's 30 layers at ~16 GB/s and `_weight_int8pack_mm`
its head at ~14 GB/s on a machine that reads ~25-30 GB/s.
"""

from __future__ import annotations

import torch


def int4_matvec(x: torch.Tensor, codes: torch.Tensor, scales: torch.Tensor, mins: torch.Tensor) -> torch.Tensor:
    return torch.ops.spd.int4_matvec(x.contiguous(), codes, scales, mins)


def q8_matvec(x: torch.Tensor, codes: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    return torch.ops.spd.q8_matvec(x.contiguous(), codes, scales)


def int8_matvec(x: torch.Tensor, codes: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    return torch.ops.spd.int8_matvec(x.contiguous(), codes, scales)


def takes_int4(k: int) -> bool:
    """K the int4 kernel covers: whole pairs of blocks, at most 512 blocks."""
    return k % 64 == 0 and k // 32 <= 512


def register_fakes() -> None:
    torch.library.register_fake("spd::int4_matvec")(lambda x, codes, scales, mins: x.new_empty(x.shape[0], codes.shape[0]))
    torch.library.register_fake("spd::int8_matvec")(lambda x, codes, scales: x.new_empty(x.shape[0], codes.shape[0]))
    torch.library.register_fake("spd::q8_matvec")(lambda x, codes, scales: x.new_empty(x.shape[0], codes.shape[0]))
