"""The decode step's int4 projections and int8 head on our own CPU kernels (`matvec.cpp`), where the CPU has AVX-512
BF16: `torch.ops.spd_matvec.int4_matvec` on the GGUF's Q4_1 blocks as they are (codes, fp16 scales and minima: its
own numbers, exactly), `q8_matvec` on the GGUF's Q8_0 head blocks (`q8.py`: likewise) and `int8_matvec` on the
int8 head's rows (`int8.py`).

Why: on the AMD EPYC of round 11 (2 cores, ~25-30 GB/s read), ATen's `_weight_int4pack_mm_for_cpu` read the bundled
model's 30 layers in 4.2 ms a step (~16 GB/s) and `_weight_int8pack_mm` its 28 MB head in 2.0 ms (~14 GB/s); these
kernels took 3.4 ms and 0.9-1.3 ms (a probe, alternated; `bench/bench_matvec.py` in a slower spell: 4.47 against
5.97 ms, 1.31 against 2.51; docs/performance-step.md, round 11).

The kernels are built with the others (`kernels.py`) in the compile thread, so the rows are put in place by
`FastBackend.prepare` there (`FastLM.use_matvec`): each `Int4Weight` takes its rows, then drops ATen's packed
weight (no second copy is kept); a forward meanwhile finds one of the two (`Int4Weight.forward`).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch

from spd_lsp.engine.fast import q4

ENV = "SPD_LSP_MATVEC"  # "0": keep ATen's int4/int8 kernels


class Rows(NamedTuple):
    """A projection [N, K] as Q4_1 blocks: codes [N, K / 2] uint8 (byte j of a block: element j low, j + 16 high),
    scales and minima [N, K / 32] fp16; w = scale * q + min."""
    codes: torch.Tensor
    scales: torch.Tensor
    mins: torch.Tensor

    def dequantised(self) -> torch.Tensor:
        """W [N, K] fp32."""
        n, half = self.codes.shape
        codes = self.codes.view(n, half * 2 // q4.BLOCK, q4.BLOCK // 2)
        q = torch.cat([codes & 15, codes >> 4], dim=-1).float()
        return (q * self.scales.float()[..., None] + self.mins.float()[..., None]).view(n, half * 2)


def int4(x: torch.Tensor, rows: Rows) -> torch.Tensor:
    """x [M, K] bf16 @ W.T for W given as `rows` (M <= INT4_MAX_TOKENS in the step; any M works)."""
    return torch.ops.spd_matvec.int4_matvec(x.contiguous(), rows.codes, rows.scales, rows.mins)


def q8(x: torch.Tensor, codes: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """x [M, K] bf16 @ W.T, W [N, K] as Q8_0 blocks: codes [N, K] int8, scales [N, K / 32] fp16 (w = scale * code)."""
    return torch.ops.spd_matvec.q8_matvec(x.contiguous(), codes, scales)


def int8(x: torch.Tensor, codes: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """x [M, K] bf16 @ (scales[:, None] * codes).T, codes [N, K] int8, scales [N] bf16."""
    return torch.ops.spd_matvec.int8_matvec(x.contiguous(), codes, scales)


def takes(k: int) -> bool:
    """K the int4 kernel covers: whole pairs of blocks, at most 512 blocks."""
    return k % (2 * q4.BLOCK) == 0 and k // q4.BLOCK <= 512


def of_blocks(blocks: list[np.ndarray]) -> Rows:
    """Q4_1 blocks [N, K / 32, 20] of several projections as one fused projection's `Rows` (their rows in order)."""
    joined = np.concatenate(blocks) if len(blocks) > 1 else blocks[0]
    n = joined.shape[0]
    return Rows(torch.from_numpy(np.ascontiguousarray(joined[..., 4:]).reshape(n, -1)),
                torch.from_numpy(np.ascontiguousarray(joined[..., 0:2]).view(np.float16)[..., 0].copy()),
                torch.from_numpy(np.ascontiguousarray(joined[..., 2:4]).view(np.float16)[..., 0].copy()))


def of_groups(groups: q4.Groups) -> Rows:
    """int4 `Groups` (w = (q - 8) * scale + zero) as `Rows` (w = scale * q + min): their scales and minima rounded
    to fp16 (the explicit `quantize: int4` of float weights; the GGUF's blocks take `store.gguf_rows`)."""
    n, k = groups.codes.shape
    codes = groups.codes.to(torch.uint8).view(n, k // q4.BLOCK, 2, q4.BLOCK // 2)
    packed = (codes[:, :, 0] | (codes[:, :, 1] << 4)).reshape(n, k // 2).contiguous()
    return Rows(packed, groups.scales.half().contiguous(), (groups.zeros - 8 * groups.scales).half().contiguous())


def register_fakes() -> None:
    """Shapes for tracing the ops (called once the library is loaded)."""
    torch.library.register_fake("spd_matvec::int4_matvec")(
        lambda x, codes, scales, mins: x.new_empty(x.shape[0], codes.shape[0]))
    torch.library.register_fake("spd_matvec::int8_matvec")(
        lambda x, codes, scales: x.new_empty(x.shape[0], codes.shape[0]))
    torch.library.register_fake("spd_matvec::q8_matvec")(
        lambda x, codes, scales: x.new_empty(x.shape[0], codes.shape[0]))
