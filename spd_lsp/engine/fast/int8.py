"""Weight-only int8 for the output projection (tied embeddings, 49,152 x 576 on the bundled model: 56 MB in
bf16, nearly half of what a decode step reads): one scale per output row, `torch._weight_int8pack_mm`.

The bundled GGUF holds that matrix as Q8_0 (a scale per block of 32); one scale per row is a requantisation,
not the same numbers, so it is an explicit choice (`build(head="int8")`), measured in docs/performance-step.md.
"""

from __future__ import annotations

import torch

from spd_lsp.engine.fast import matvec


class Int8Weight(torch.nn.Module):
    """A projection [N, K] as int8 rows with a scale each (in the activations' dtype)."""

    def __init__(self, weight: torch.Tensor, scales: torch.Tensor) -> None:
        super().__init__()
        self.out_features, self.in_features = weight.shape
        self.register_buffer("weight", weight)
        self.register_buffer("scales", scales)
        # On our CPU kernel (`matvec.py`) from `FastBackend.prepare` on, where it is built and the scales are bf16.
        self.kernel = False

    @classmethod
    def of(cls, weight: torch.Tensor) -> "Int8Weight":
        """Symmetric per-row quantisation of a float weight [N, K] (scales in its dtype)."""
        w = weight.detach().float()
        scales = (w.abs().amax(dim=1) / 127).clamp(min=1e-12)
        codes = torch.round(w / scales[:, None]).clamp(-127, 127).to(torch.int8)
        return cls(codes.contiguous(), scales.to(weight.dtype))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        flat = x.reshape(-1, shape[-1])
        if self.kernel:
            out = matvec.int8(flat, self.weight, self.scales)
        else:
            out = torch._weight_int8pack_mm(flat, self.weight, self.scales)
        return out.reshape(*shape[:-1], self.out_features)

    def nbytes(self) -> int:
        return self.weight.numel() + self.scales.numel() * self.scales.element_size()
