"""Random Q4_1 rows (`Q4Rows`) for the int4 kernels' tests (tests/engine/test_matvec.py, test_amx.py)."""

from __future__ import annotations

import torch

from spd_lsp.engine.fast.layouts.blocks import BLOCK, Q4Rows as Rows


def random_rows(n: int, k: int, seed: int) -> Rows:
    """A projection [n, k] as Q4_1 rows: random codes, scales 0.001-0.021 and minima -0.1-0 (fp16)."""
    generator = torch.Generator().manual_seed(seed)
    codes = torch.randint(0, 256, (n, k // 2), dtype=torch.uint8, generator=generator)
    scales = (torch.rand(n, k // BLOCK, generator=generator) * 0.02 + 0.001).half()
    mins = (-torch.rand(n, k // BLOCK, generator=generator) * 0.1).half()
    return Rows(codes, scales, mins)
