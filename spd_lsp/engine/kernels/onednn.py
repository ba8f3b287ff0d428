"""The float projections' weights packed once in oneDNN's blocked layout (`PackedWeight`), where that is faster.

`F.linear` on a plain bf16 weight has oneDNN reorder the weight on every call. On a CPU without AMX (AMD EPYC with
AVX-512 BF16) the packed weights took, for the bundled model's 120 projections, 0.73x the plain ones' time at 1 row,
0.56-0.74x at 8-32 rows (verification's trees), 0.81x at 96 and 1.10x at 512 alone, a whole 500-token prefill 0.98x,
with the same numbers bit for bit (`bench/bench_packed.py`; docs/performance-step.md, round 10). With AMX (Intel Xeon)
round 8 found no gain in requests and different numbers at 512-1,024 rows, so there the weights stay plain. The
packed weight replaces the plain one (no more memory); the compile thread packs them (`FastBackend.prepare`).

Compiled graphs call it through the custom op `spd::onednn_linear` (inductor has no lowering for an opaque oneDNN
tensor): the op takes the weight's index in this module's registry.
"""

from __future__ import annotations

import itertools
import weakref

import torch

_WEIGHTS: weakref.WeakValueDictionary[int, PackedWeight] = weakref.WeakValueDictionary()  # by index: freed with the model
_INDICES = itertools.count()


def bf16_available() -> bool:
    """oneDNN with bf16 matmuls is in this torch, on this CPU."""
    return torch.backends.mkldnn.is_available() and bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())


@torch.library.custom_op("spd::onednn_linear", mutates_args=())
def linear(x: torch.Tensor, index: int) -> torch.Tensor:
    """x @ weight.T of the packed weight at `index` of the registry."""
    return torch.ops.mkldnn._linear_pointwise(x, _WEIGHTS[index].packed, None, "none", [], "")


@linear.register_fake
def _(x: torch.Tensor, index: int) -> torch.Tensor:
    return x.new_empty(*x.shape[:-1], _WEIGHTS[index].out_features)


class PackedWeight:
    """A plain [N, K] weight packed for batches of about `rows` rows (any number of rows is computed exactly)."""

    def __init__(self, weight: torch.Tensor, *, rows: int = 16) -> None:
        self.out_features, self.in_features = weight.shape
        self.dtype = weight.dtype
        self.packed = torch.ops.mkldnn._reorder_linear_weight(weight.detach(), rows)
        self.index = next(_INDICES)
        _WEIGHTS[self.index] = self

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        if torch.compiler.is_compiling():  # a graph's call of the op; eager calls skip it (its first call imports dynamo)
            return linear(x, self.index)
        return torch.ops.mkldnn._linear_pointwise(x, self.packed, None, "none", [], "")

    def nbytes(self) -> int:
        return self.out_features * self.in_features * self.dtype.itemsize
