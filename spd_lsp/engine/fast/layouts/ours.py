"""The GGUF's blocks (`blocks.py`) on our kernels (`engine/kernels`): the decode step's matvec ops (`Q4Matvec`,
`Q8Matvec`, `Int8Matvec`: a few rows, the weights streamed once) and AMX's tiles for a few dozen rows (`Q4Amx`,
`Q8Amx`). The same numbers as the blocks (the int8 rows' own)."""

from __future__ import annotations

import torch

from spd_lsp.engine.fast.layouts import Linear
from spd_lsp.engine.fast.layouts.blocks import Blocks, Int8Rows, Q4Rows, Q8Blocks
from spd_lsp.engine.kernels import amx, blocks, matvec


class Q4Matvec(Linear):
    layout, kernel = "q4_1", "matvec"

    def __init__(self, rows: Q4Rows, *, layout: str = "q4_1") -> None:
        self.rows, self.layout = rows, layout  # Q4_0's blocks are Q4_1 rows too (min = -8 d)
        self.out_features, self.in_features = rows.codes.shape[0], rows.codes.shape[1] * 2

    def mm(self, x: torch.Tensor) -> torch.Tensor:
        return matvec.int4_matvec(x, *self.rows)

    def tensors(self) -> tuple[torch.Tensor, ...]:
        return tuple(self.rows)


class Q4Amx(Q4Matvec):
    kernel = "amx"

    def mm(self, x: torch.Tensor) -> torch.Tensor:
        return amx.int4_linear(x, *self.rows)


class Q8Matvec(Linear):
    layout, kernel = "q8_0", "matvec"

    def __init__(self, blocks: Q8Blocks, *, layout: str = "q8_0") -> None:
        self.blocks, self.layout = blocks, layout  # Q5_0 and IQ4_NL are 8-bit codes with a scale a block of 32 too
        self.out_features, self.in_features = blocks.codes.shape

    def mm(self, x: torch.Tensor) -> torch.Tensor:
        return matvec.q8_matvec(x, *self.blocks)

    def tensors(self) -> tuple[torch.Tensor, ...]:
        return tuple(self.blocks)


class Q8Amx(Q8Matvec):
    kernel = "amx"

    def mm(self, x: torch.Tensor) -> torch.Tensor:
        return amx.q8_linear(x, *self.blocks)


class Int8Matvec(Linear):
    layout, kernel = "int8 rows", "matvec"

    def __init__(self, rows: Int8Rows) -> None:
        self.rows = rows
        self.out_features, self.in_features = rows.codes.shape

    def mm(self, x: torch.Tensor) -> torch.Tensor:
        return matvec.int8_matvec(x, *self.rows)

    def tensors(self) -> tuple[torch.Tensor, ...]:
        return tuple(self.rows)


class BlocksMatvec(Linear):
    """Any GGUF layout (`Blocks`) on the portable matvec kernel: each weight row dequantised once a call, dotted with
    every row of x (the decode tier where no kernel of the layout's own serves)."""

    kernel = "matvec"

    def __init__(self, weights: Blocks) -> None:
        self.weights = weights
        self.out_features, self.in_features = weights.shape
        self.layout = weights.layout

    def mm(self, x: torch.Tensor) -> torch.Tensor:
        return blocks.matvec(x, self.weights.kind, list(self.weights.parts), self.weights.group)

    def tensors(self) -> tuple[torch.Tensor, ...]:
        return tuple(self.weights.parts)


class BlocksTiles(BlocksMatvec):
    """Any GGUF layout on ATen's matmul, dequantised a tile of rows at a time into the activations' dtype (the batch
    and prefill tiers: no float copy of the weights is kept)."""

    kernel = "tiles"

    def mm(self, x: torch.Tensor) -> torch.Tensor:
        return blocks.linear(x, self.weights.kind, list(self.weights.parts), self.weights.group)


class BlocksInt8(BlocksMatvec):
    """Any GGUF layout on integer dot products for any number of rows: x quantised to int8 once a call, W read as its
    blocks (AVX-512 VNNI beside BF16: the layers' batch tier there; no float copy of the weights is kept)."""

    kernel = "int8"

    def mm(self, x: torch.Tensor) -> torch.Tensor:
        return blocks.int8(x, self.weights.kind, list(self.weights.parts), self.weights.group)
