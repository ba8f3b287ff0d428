"""The whole plain decode step in one C++ call (`engine/kernels/step.cpp`), assembled from a `FastLM` whose plan says
`step: "fused"`: every projection's decode `Linear` on the matvec kernel (`Q4Matvec`) and the head's on the Q8_0 or
int8 one. It replaces the step graph for plain steps of the decode tier: no dynamo guards, no graph wrapper, one
OpenMP region a step instead of ~300. Its logits are the eager fast path's, bit for bit (the same row kernels in the
same order)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from spd_lsp.engine.fast.layouts.ours import Int8Matvec, Q4Matvec, Q8Matvec
from spd_lsp.engine.kernels import step

if TYPE_CHECKING:
    from spd_lsp.engine.fast.model import FastLM


def build(lm: "FastLM") -> torch.ScriptObject:
    """The kernel's `spd.StepModel` on `lm`'s decode weights (views, no copies but the rotary tables in bf16: 2 MB);
    ValueError where a projection's decode weights are not on our matvec kernels."""
    tensors: list[torch.Tensor] = []
    empty = lm.norm.new_empty(0)

    def rows(projection: object) -> list[torch.Tensor]:
        linear = projection.decode
        if not isinstance(linear, Q4Matvec):
            raise ValueError(f"a projection on {linear.name}, not q4_1 on matvec")
        return list(linear.rows)

    for block in lm.blocks:
        tensors.append(block.attn_norm.contiguous())
        tensors += rows(block.qkv) + [empty if block.qkv.bias is None else block.qkv.bias.contiguous()]
        tensors += rows(block.out) + [block.mlp_norm.contiguous()]
        tensors += rows(block.gate_up) + rows(block.down)
    head = lm.output.decode
    if isinstance(head, Q8Matvec):
        codes, scales = head.blocks
    elif isinstance(head, Int8Matvec):
        codes, scales = head.rows
    else:
        raise ValueError(f"a head on {head.name}, not q8_0 or int8 rows on matvec")
    tensors += [lm.norm.contiguous(), codes, scales,
                lm.cos.to(torch.bfloat16).contiguous(), lm.sin.to(torch.bfloat16).contiguous()]
    intermediate = lm.blocks[0].down.decode.in_features
    sizes = [lm.layers, lm.norm.numel(), lm.heads, lm.kv_heads, lm.head_dim, intermediate]
    return step.step_model(tensors, sizes, [float(lm.eps), lm.head_dim ** -0.5])


def run(model: torch.ScriptObject, x: torch.Tensor, column: int, keys: list[torch.Tensor],
        values: list[torch.Tensor]) -> torch.Tensor:
    """Logits [B, 1, V] of x [B, 1, H] at position `column` of every row, its keys/values written there."""
    return step.decode_step(model, x, column, keys, values)
