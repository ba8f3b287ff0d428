"""The GGUF's own Q8_0 output rows for decode steps (`build(head="q8")`): the same numbers as its blocks, no
requantisation. Measured and not the default: pinned against transformers' forward its top drafts matched at
82.0 % of 300 positions against the int8 rows' 82.7 %, at the same step time (alternating runs), and at one
end-to-end test's position it left 2 verified drafts where the rows leave 3 (docs/performance-step.md).

A Q8_0 block holds 32 weights of one row: an fp16 scale d and 32 int8 codes q; the weight is d * q. The kernels
have no int8 matmul with a scale per block (`_weight_int8pack_mm` takes one per row, and a scale per row is a
requantisation: `int8.py`), so a code is split in two nibbles, q = 16 * hi + lo with hi in -8..7 and lo in 0..15,
and the head runs as two int4 matmuls of the same group size (`int4.py`): hi with scale 16d and zero 0, lo with
scale d and zero 8d, whose sum is d * q up to the rounding of d to the kernels' scale dtype.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from spd_lsp.engine.fast.int4 import Int4Weight
from spd_lsp.engine.fast.q4 import BLOCK, Groups

BLOCK_BYTES = 2 + BLOCK


def unpack_q8_0(raw: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
    """One tensor's Q8_0 bytes [N, K / 32 * 34] (gguf's `ReaderTensor.data`): codes [N, K] int8, scales [N, K / 32]
    float32."""
    n = raw.shape[0]
    blocks = np.ascontiguousarray(raw).reshape(n, -1, BLOCK_BYTES)
    d = blocks[..., 0:2].copy().view(np.float16)[..., 0].astype(np.float32)
    codes = blocks[..., 2:].copy().view(np.int8).reshape(n, -1)
    return torch.from_numpy(codes), torch.from_numpy(d)


def halves(codes: torch.Tensor, scales: torch.Tensor) -> tuple[Groups, Groups]:
    """int8 codes [N, K] with a scale per block as two int4 `Groups` whose weights sum to scale * code."""
    q = codes.to(torch.int32)
    hi = torch.div(q, 16, rounding_mode="floor")  # -8..7
    lo = q - 16 * hi  # 0..15
    return (Groups(hi + 8, 16 * scales, torch.zeros_like(scales)),  # (hi + 8 - 8) * 16d
            Groups(lo, scales, 8 * scales))  # (lo - 8) * d + 8d


class Q8Head(torch.nn.Module):
    """The output projection [V, H] as the GGUF's Q8_0 blocks: two int4 matmuls (`halves`), summed."""

    def __init__(self, high: Int4Weight, low: Int4Weight) -> None:
        super().__init__()
        self.high, self.low = high, low
        self.out_features, self.in_features = high.out_features, high.in_features

    @classmethod
    def of(cls, codes: torch.Tensor, scales: torch.Tensor, *, dtype: torch.dtype) -> "Q8Head":
        high, low = halves(codes, scales)
        cpu = torch.device("cpu")
        return cls(Int4Weight.of(high, dtype=dtype, device=cpu), Int4Weight.of(low, dtype=dtype, device=cpu))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.high(x) + self.low(x)

    def nbytes(self) -> int:
        return self.high.nbytes() + self.low.nbytes()

    def state(self) -> dict[str, torch.Tensor]:
        return {**self.high.state("high"), **self.low.state("low")}

    @classmethod
    def from_state(cls, state: dict[str, torch.Tensor]) -> "Q8Head":
        def half(name: str) -> Int4Weight:
            weight, scales = state[f"{name}.weight"], state[f"{name}.scales_and_zeros"]
            return Int4Weight(weight, scales, in_features=scales.shape[0] * BLOCK)

        return cls(half("high"), half("low"))


def gguf_head_blocks(path: Path) -> tuple[torch.Tensor, torch.Tensor] | None:
    """The GGUF's output projection as Q8_0 codes and scales (`unpack_q8_0`): its `output.weight`, else the tied
    `token_embd.weight`; None where that is not Q8_0."""
    import gguf

    tensors = {t.name: t for t in gguf.GGUFReader(path).tensors}
    tensor = tensors.get("output.weight") or tensors.get("token_embd.weight")
    if tensor is None or tensor.tensor_type != gguf.GGMLQuantizationType.Q8_0:
        return None
    return unpack_q8_0(tensor.data)
