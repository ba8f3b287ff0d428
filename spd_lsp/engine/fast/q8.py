"""The GGUF's own Q8_0 output blocks: a Q8_0 block holds 32 weights of one row, an fp16 scale d and 32 int8 codes q;
the weight is d * q. Read as they are (`layouts.blocks.Q8Blocks`): on our matvec kernel (`Q8Matvec`) and AMX's tiles
(`Q8Amx`) the model's exact numbers; on ATen as two int4 halves (`layouts.aten.Q8Halves`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from spd_lsp.engine.fast.layouts.blocks import BLOCK

BLOCK_BYTES = 2 + BLOCK


def unpack_q8_0(raw: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
    """One tensor's Q8_0 bytes [N, K / 32 * 34] (gguf's `ReaderTensor.data`): codes [N, K] int8, scales [N, K / 32]
    float32."""
    n = raw.shape[0]
    blocks = np.ascontiguousarray(raw).reshape(n, -1, BLOCK_BYTES)
    d = blocks[..., 0:2].copy().view(np.float16)[..., 0].astype(np.float32)
    codes = blocks[..., 2:].copy().view(np.int8).reshape(n, -1)
    return torch.from_numpy(codes), torch.from_numpy(d)


def gguf_head_blocks(path: Path) -> tuple[torch.Tensor, torch.Tensor] | None:
    """The GGUF's output projection as Q8_0 codes and scales (`unpack_q8_0`): its `output.weight`, else the tied
    `token_embd.weight`; None where that is not Q8_0."""
    import gguf

    tensors = {t.name: t for t in gguf.GGUFReader(path).tensors}
    tensor = tensors.get("output.weight") or tensors.get("token_embd.weight")
    if tensor is None or tensor.tensor_type != gguf.GGMLQuantizationType.Q8_0:
        return None
    return unpack_q8_0(tensor.data)
