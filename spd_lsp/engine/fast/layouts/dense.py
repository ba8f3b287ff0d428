"""Weights on torch's own kernels: `Dense` (torch's matmul on a float weight), `PackedDense` (the weight in oneDNN's
blocked layout, `engine/kernels/onednn.py`: the same numbers, no reorder a call) and `BlocksTorch` (GGUF blocks
dequantised a slice at a time, where our kernel library is not loaded)."""

from __future__ import annotations

import threading
import weakref
from typing import TYPE_CHECKING

import torch
import torch.nn.functional as F

from spd_lsp.engine.fast.layouts import Linear
from spd_lsp.engine.kernels.onednn import PackedWeight

if TYPE_CHECKING:
    from spd_lsp.engine.fast.layouts.blocks import Blocks


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


# Bytes of float copies `BlocksTorch` may keep in all: a small model's weights dequantised once run as fast as the float
# model until our kernels load (a start that builds them, or a machine without a compiler); a large one's would not fit
# beside everything else, so those are dequantised a slice at a time at every call instead (slow, memory-bound).
FLOAT_COPY_BUDGET = 1 << 30
_kept = [0]  # bytes kept so far
_kept_lock = threading.Lock()


class BlocksTorch(Linear):
    """Any GGUF layout (`layouts.blocks.Blocks`) on torch's own ops, where our kernel library is not loaded (yet, or at
    all): dequantised once into the activations' dtype and kept while `FLOAT_COPY_BUDGET` allows (`spd.status`:
    `floatCopyMegabytes`), else a slice of rows at a time (at most ~`SLICE_BYTES` of fp32) at every call."""

    kernel = "torch"
    SLICE_BYTES = 1 << 24

    def __init__(self, weights: "Blocks") -> None:
        self.weights = weights
        self.out_features, self.in_features = weights.shape
        self.layout = weights.layout
        self.copy: torch.Tensor | None = None
        self._tried = False

    def mm(self, x: torch.Tensor) -> torch.Tensor:
        copy = self.copy if self.copy is not None and self.copy.dtype == x.dtype else self._keep(x.dtype)
        if copy is not None:
            return F.linear(x, copy)
        rows = max(1, self.SLICE_BYTES // (4 * self.in_features))
        outs = [F.linear(x, self.weights.rows(slice(n0, n0 + rows)).dequantised().to(x.dtype))
                for n0 in range(0, self.out_features, rows)]
        return torch.cat(outs, dim=-1)

    def _keep(self, dtype: torch.dtype) -> torch.Tensor | None:
        if self._tried:
            return None
        self._tried = True
        size = self.out_features * self.in_features * dtype.itemsize
        with _kept_lock:
            if _kept[0] + size > FLOAT_COPY_BUDGET:
                return None
            _kept[0] += size
        self.copy = self.weights.dequantised().to(dtype)
        weakref.finalize(self, _release, size)
        return self.copy

    def tensors(self) -> tuple[torch.Tensor, ...]:
        return tuple(self.weights.parts) + ((self.copy,) if self.copy is not None else ())


def _release(size: int) -> None:
    with _kept_lock:
        _kept[0] -= size


def float_copy_bytes() -> int:
    """Bytes of float copies `BlocksTorch` keeps now."""
    return _kept[0]
