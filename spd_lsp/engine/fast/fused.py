"""The whole plain decode step in one call of a C++ kernel of ours on the CPU (`step.cpp`, `torch.ops.spd_step.decode`).

Where it serves: bf16 on a CPU with AVX-512 BF16 once the kernels are built, every projection on our int4 kernel (the
GGUF's Q4_1 rows) and the head on our Q8_0 kernel (the GGUF's blocks) or int8 one, a head size of 64 or 128, at most
`INT4_MAX_TOKENS` rows. There it replaces the compiled graph of the plain step (`FastBackend.step`): no dynamo guards,
no graph wrapper, one OpenMP region a step instead of ~300 (docs/performance-step.md, round 15). Its logits are the
eager fast path's, bit for bit (the same row kernels in the same order). Anything else (fp32, ATen's kernels, the
float head or the Q8_0 halves, CUDA) keeps the compiled step. `SPD_LSP_FUSED_STEP=0` turns it off.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import torch

from spd_lsp.engine.fast.int4 import Int4Weight
from spd_lsp.engine.fast.int8 import Int8Weight
from spd_lsp.engine.fast.q8 import Q8Weight

if TYPE_CHECKING:
    from spd_lsp.engine.fast.model import FastLM

ENV = "SPD_LSP_FUSED_STEP"  # "0": the compiled graph serves plain decode steps


def why_not(lm: "FastLM") -> str | None:
    """Why the fused step cannot serve `lm` (None: it can), once the kernels are built and the weights moved."""
    from spd_lsp.engine.fast import kernels

    if os.environ.get(ENV, "1") == "0":
        return f"{ENV}=0"
    if lm.device.type != "cpu" or lm.dtype != torch.bfloat16:
        return f"{lm.dtype} on {lm.device.type} (it runs bf16 on the CPU)"
    if not kernels.matvec_ready():
        return kernels.reason() or "this CPU has no AVX-512 BF16"
    if lm.head_dim not in (64, 128):
        return f"a head size of {lm.head_dim}"
    for block in lm.blocks:
        for projection in (block.qkv, block.out, block.gate_up, block.down):
            if not isinstance(projection.int4, Int4Weight) or projection.int4.rows is None:
                return "projections not on the int4 kernel"
        if block.out.bias is not None or block.gate_up.bias is not None or block.down.bias is not None:
            return "biases outside q/k/v"
    head = lm.output.int4
    if not isinstance(head, (Int8Weight, Q8Weight)) or not head.kernel:
        return "an output head other than the GGUF's Q8_0 blocks or int8 rows on our kernel"
    return None


def build(lm: "FastLM") -> torch.ScriptObject:
    """The kernel's `spd_step.Model` on `lm`'s weights (views, no copies but the rotary tables in bf16: 2 MB)."""
    tensors: list[torch.Tensor] = []
    empty = lm.norm.new_empty(0)
    for block in lm.blocks:
        tensors.append(block.attn_norm.contiguous())
        qkv = block.qkv.int4.rows
        tensors += [qkv.codes, qkv.scales, qkv.mins, empty if block.qkv.bias is None else block.qkv.bias.contiguous()]
        tensors += list(block.out.int4.rows) + [block.mlp_norm.contiguous()]
        tensors += list(block.gate_up.int4.rows) + list(block.down.int4.rows)
    head = lm.output.int4
    codes, scales = (head.blocks.codes, head.blocks.scales) if isinstance(head, Q8Weight) else (head.weight, head.scales)
    tensors += [lm.norm.contiguous(), codes, scales,
                lm.cos.to(torch.bfloat16).contiguous(), lm.sin.to(torch.bfloat16).contiguous()]
    intermediate = lm.blocks[0].down.int4.in_features
    sizes = [lm.layers, lm.norm.numel(), lm.heads, lm.kv_heads, lm.head_dim, intermediate]
    return torch.classes.spd_step.Model(tensors, sizes, [float(lm.eps), lm.head_dim ** -0.5])


def step(model: torch.ScriptObject, x: torch.Tensor, column: int, keys: list[torch.Tensor],
         values: list[torch.Tensor]) -> torch.Tensor:
    """Logits [B, 1, V] of x [B, 1, H] at position `column` of every row, its keys/values written there."""
    # the overload itself: the packet's call first looks through every argument for fake script objects (~65 checks
    # a step here)
    return torch.ops.spd_step.decode.default(model, x, column, keys, values)
