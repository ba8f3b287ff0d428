"""The GGUF's weight types as the layouts our kernels read (`layouts.blocks.Blocks`), converted exactly: no
dequantisation, no requantisation. Q4_0 and Q4_1 become "q4" (Q4_0's minimum is -8 d, exact in fp16); Q8_0 "q8".

`blocks(raw, type, shape)` converts one tensor's bytes as the file holds them ([N, bytes a row]); `SUPPORTED` are the
types it takes (gguf's `GGMLQuantizationType` values).
"""

from __future__ import annotations

import numpy as np
import torch

from spd_lsp.engine.fast.layouts.blocks import BLOCK, Blocks

Q4_0, Q4_1, Q8_0 = 2, 3, 8
SUPPORTED = frozenset({Q4_0, Q4_1, Q8_0})
NAMES = {Q4_0: "q4_0", Q4_1: "q4_1", Q8_0: "q8_0"}


class UnsupportedType(ValueError):
    """A GGUF weight type no layout here takes (the message names it and those that are)."""


def blocks(raw: np.ndarray, kind: int, shape: tuple[int, ...]) -> Blocks:
    """One tensor's raw bytes [N, bytes a row] as `Blocks` of `shape` [N, K]."""
    n, k = shape[0], shape[-1]
    if kind == Q4_1:
        grouped = np.ascontiguousarray(raw).reshape(n, k // BLOCK, 20)
        codes, d, m = grouped[..., 4:], _halves(grouped[..., 0:2]), _halves(grouped[..., 2:4])
        return Blocks("q4", (torch.from_numpy(codes.reshape(n, k // 2).copy()), d, m), BLOCK, NAMES[kind])
    if kind == Q4_0:
        grouped = np.ascontiguousarray(raw).reshape(n, k // BLOCK, 18)
        d = _halves(grouped[..., 0:2])
        return Blocks("q4", (torch.from_numpy(grouped[..., 2:].reshape(n, k // 2).copy()), d, (-8 * d.float()).half()),
                      BLOCK, NAMES[kind])
    if kind == Q8_0:
        grouped = np.ascontiguousarray(raw).reshape(n, k // BLOCK, 34)
        codes = torch.from_numpy(grouped[..., 2:].copy().view(np.int8).reshape(n, k))
        return Blocks("q8", (codes, _halves(grouped[..., 0:2])), BLOCK, NAMES[kind])
    from gguf import GGMLQuantizationType

    try:
        name = GGMLQuantizationType(kind).name
    except ValueError:
        name = f"type {kind}"
    raise UnsupportedType(f"GGUF weight type {name} (supported: F32, F16, BF16, "
                          f"{', '.join(NAMES[t].upper() for t in sorted(SUPPORTED))})")


def _halves(raw: np.ndarray) -> torch.Tensor:
    """fp16 values stored as two bytes each ([..., 2] uint8) as a torch fp16 tensor [...]."""
    return torch.from_numpy(np.ascontiguousarray(raw).view(np.float16)[..., 0].copy())
