"""Float weights: `Dense` (torch's matmul on the plain weight) and `PackedDense` (the weight in oneDNN's blocked layout,
`engine/kernels/onednn.py`: the same numbers, no reorder a call)."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from spd_lsp.engine.fast.layouts import Linear
from spd_lsp.engine.kernels.onednn import PackedWeight


class Dense(Linear):
    kernel = "torch"

    def __init__(self, weight: torch.Tensor) -> None:
        self.weight = weight
        self.out_features, self.in_features = weight.shape
        self.layout = str(weight.dtype).removeprefix("torch.")

    def mm(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.weight)

    def tensors(self) -> tuple[torch.Tensor, ...]:
        return (self.weight,)


class PackedDense(Linear):
    kernel = "onednn"

    def __init__(self, weight: torch.Tensor) -> None:
        self.packed = PackedWeight(weight)
        self.out_features, self.in_features = weight.shape
        self.layout = f"{str(weight.dtype).removeprefix('torch.')} (oneDNN-blocked)"

    def mm(self, x: torch.Tensor) -> torch.Tensor:
        return self.packed(x)

    def tensors(self) -> tuple[torch.Tensor, ...]:
        return ()

    def nbytes(self) -> int:
        return self.packed.nbytes()
