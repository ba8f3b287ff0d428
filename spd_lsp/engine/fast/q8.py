"""The GGUF's own Q8_0 output rows for decode steps (`build(head="q8")`): the same numbers as its blocks, no
requantisation.

A Q8_0 block holds 32 weights of one row: an fp16 scale d and 32 int8 codes q; the weight is d * q.

- `Q8Weight`, where our CPU kernels run (bf16 on a CPU with AVX-512 BF16): the blocks as they are, on
  `spd_matvec::q8_matvec` (`matvec.h`'s `q8_rows`: a block's products summed in fp32, then its scale), in the fused
  step too. The same bytes as the int8 rows (a byte a weight) and the model's exact numbers: against transformers'
  fp32 forward its logits erred by an RMS of 0.094 where the int8 rows' erred by 0.130 and transformers' bf16 forward's
  by 0.089 (docs/performance-step.md, round 16). Until the kernel is built the float head serves.
- `Q8Head` elsewhere: ATen has no int8 matmul with a scale per block (`_weight_int8pack_mm` takes one per row, and a
  scale per row is a requantisation: `int8.py`), so a code is split in two nibbles, q = 16 * hi + lo with hi in
  -8..7 and lo in 0..15, and the head runs as two int4 matmuls of the same group size (`int4.py`): hi with scale 16d
  and zero 0, lo with scale d and zero 8d, whose sum is d * q up to the rounding of d to the kernels' scale dtype.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from spd_lsp.engine.fast import matvec
from spd_lsp.engine.fast.amx import Q8Blocks
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


class Q8Weight(torch.nn.Module):
    """The output projection [V, H] as the GGUF's Q8_0 `blocks` on our CPU kernel (`matvec.q8`) once `kernel` is set
    (`FastLM.use_matvec`, after the kernels are built); until then `weight`, the float head (the same blocks rounded
    to the model's dtype; the tied embedding itself, not a copy)."""

    def __init__(self, blocks: Q8Blocks, weight: torch.Tensor) -> None:
        super().__init__()
        self.blocks, self.weight = blocks, weight
        self.out_features, self.in_features = blocks.codes.shape
        self.kernel = False

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.kernel:
            return F.linear(x, self.weight)
        shape = x.shape
        out = matvec.q8(x.reshape(-1, shape[-1]), self.blocks.codes, self.blocks.scales)
        return out.reshape(*shape[:-1], self.out_features)

    def nbytes(self) -> int:
        return self.blocks.codes.numel() + self.blocks.scales.numel() * self.blocks.scales.element_size()


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
