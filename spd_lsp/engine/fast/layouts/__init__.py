"""Weight layouts behind one interface: `Linear` (x @ W.T for W [N, K] held one way and computed by one kernel).

Each class is one (layout, kernel) pair: `dense.py` (float weights: torch's matmul, oneDNN's blocked layout),
`blocks.py` (the GGUF's own blocks as tensors: 4-bit rows, Q4_K rows, 8-bit rows, Q8_0 blocks, int8 rows; no kernel;
`fast/formats.py` makes them from any common GGUF weight type), `ours.py` (those blocks on our kernels,
`engine/kernels`), `aten.py` (int4 on ATen's packed kernels, CPU and CUDA). A `Projection` of the model
(`model.py`) holds one `Linear` per forward size (decode, batch, prefill) as the plan (`plan.py`) says.
"""

from __future__ import annotations

from typing import Iterable

import torch


class Linear:
    """x [..., K] @ W.T -> [..., N] for a weight W [N, K]."""

    layout = "?"  # how W is held ("bf16", "q4_1", "q8_0", ...)
    kernel = "?"  # what computes it ("torch", "matvec", "amx", "aten", "onednn", ...)
    out_features: int
    in_features: int

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        return self.mm(x.reshape(-1, shape[-1])).reshape(*shape[:-1], self.out_features)

    def mm(self, x: torch.Tensor) -> torch.Tensor:
        """x [M, K] @ W.T -> [M, N]."""
        raise NotImplementedError

    def tensors(self) -> tuple[torch.Tensor, ...]:
        """What holds W (shared tensors count once in `nbytes`)."""
        raise NotImplementedError

    @property
    def name(self) -> str:
        return f"{self.layout} on {self.kernel}"

    def nbytes(self) -> int:
        return unique_bytes(self.tensors())


def unique_bytes(tensors: Iterable[torch.Tensor]) -> int:
    """Bytes of the distinct storages among `tensors` (views of one storage count once)."""
    seen: dict[int, int] = {}
    for tensor in tensors:
        storage = tensor.untyped_storage()
        seen[storage.data_ptr()] = storage.nbytes()
    return sum(seen.values())



