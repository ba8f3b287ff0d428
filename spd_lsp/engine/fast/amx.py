"""Verification's trees (and other forwards of `AMX_MIN_TOKENS` to `AMX_MAX_TOKENS` rows) through the GGUF's own blocks
on AMX (`amx.cpp`): the int4 projections (`torch.ops.spd_amx.int4_linear`, Q4_1) and the output head
(`q8_linear`, Q8_0), where the CPU has AMX's bf16 tiles.

Why: such forwards ran the projections on their bf16 weights (212 MB a pass for the bundled model) because our int4
matvec kernel pays ~1.8 ms for each row past the first; AMX's tiles take 16 rows at the cost of one, so a tree reads
the GGUF's Q4_1 blocks (66 MB) instead. Each block is dequantised exactly as the bf16 weights were made, so these are
the bf16 weights' products, summed in another order (docs/performance-step.md, round 15).

`FastLM.use_amx` (in `FastBackend.prepare`, once the kernels are built) turns it on; `SPD_LSP_AMX=0` keeps the bf16
weights for these forwards.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from spd_lsp.engine.fast.matvec import Rows

ENV = "SPD_LSP_AMX"  # "0": forwards of AMX_MIN_TOKENS to AMX_MAX_TOKENS rows keep the bf16 weights
# Rows x tokens for which a forward's projections run on AMX's int4 kernel: from AMX_MIN_TOKENS (fewer: our int4
# matvec kernel, which reads the blocks as they are, is faster for 1-2 rows) up to AMX_MAX_TOKENS (more: the bf16
# weights, whose matmuls AMX runs as well; this kernel dequantises the blocks again for every 32 rows: `bench_amx`, round
# 17, 2 threads, the 120 projections at 64 / 96 / 128 rows 21.1 / 28.5 / 37.4 ms against the bf16 weights' 28.0 / 32.2
# / 36.0).
AMX_MIN_TOKENS = 3
AMX_MAX_TOKENS = 96


def takes(weights: Rows | Q8Blocks) -> bool:
    """Projections the kernels take: N a multiple of 16, K of 64."""
    n, width = weights.codes.shape
    k = width if isinstance(weights, Q8Blocks) else 2 * width
    return n % 16 == 0 and k % 64 == 0


class Q8Blocks(NamedTuple):
    """A projection [N, K] as the GGUF's Q8_0 blocks: codes [N, K] int8, scales [N, K / 32] fp16; w = scale * code."""
    codes: torch.Tensor
    scales: torch.Tensor

    def dequantised(self) -> torch.Tensor:
        """W [N, K] fp32."""
        n, k = self.codes.shape
        return (self.codes.float().view(n, k // 32, 32) * self.scales.float()[..., None]).view(n, k)


def linear(x: torch.Tensor, weights: Rows | Q8Blocks) -> torch.Tensor:
    """x [M, K] bf16 @ W.T on AMX, W given as Q4_1 `Rows` or `Q8Blocks`."""
    if isinstance(weights, Q8Blocks):
        return torch.ops.spd_amx.q8_linear(x.contiguous(), weights.codes, weights.scales)
    return int4(x, weights)


def int4(x: torch.Tensor, rows: Rows) -> torch.Tensor:
    """x [M, K] bf16 @ W.T for W given as `rows` (the GGUF's Q4_1 blocks), on AMX."""
    return torch.ops.spd_amx.int4_linear(x.contiguous(), rows.codes, rows.scales, rows.mins)


def register_fakes() -> None:
    """Shapes for tracing the op (called once the library is loaded)."""
    torch.library.register_fake("spd_amx::int4_linear")(
        lambda x, codes, scales, mins: x.new_empty(x.shape[0], codes.shape[0]))
    torch.library.register_fake("spd_amx::q8_linear")(lambda x, codes, scales: x.new_empty(x.shape[0], codes.shape[0]))
