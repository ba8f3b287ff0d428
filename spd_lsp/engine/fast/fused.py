"""The whole plain decode step in one C++ call (`engine/kernels/step.cpp`), assembled from a `FastLM` whose plan says
`step: "fused"`: every projection's decode `Linear` on the matvec kernels (the GGUF's blocks of any kind, as segments
where a projection joins several: a Q4_K_M file's q/k in Q4_K and v in Q6_K) and the head likewise (or int8 rows). It
replaces the step graph for plain steps of the decode tier: no dynamo guards, no graph wrapper, one OpenMP region a
step instead of ~300. Its logits are the eager fast path's, bit for bit where the eager path runs the same row
kernels in the same order (Llama/Qwen2 on Q4_0/Q4_1/Q8_0 blocks)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from spd_lsp.engine.fast.layouts import Linear
from spd_lsp.engine.fast.layouts.ours import BlocksMatvec, Int8Matvec, Q4Matvec, Q8Matvec
from spd_lsp.engine.kernels import step

if TYPE_CHECKING:
    from spd_lsp.engine.fast.model import FastLM

ROLES = ("qkv", "out", "gate_up", "down")
HEAD = 4


def segments(linear: Linear) -> list[tuple[str, list[torch.Tensor], int]]:
    """(kind, tensors, group) of each segment of a decode `Linear`, in output order; ValueError where it is not on our
    matvec kernels."""
    from spd_lsp.engine.fast.gguf_model import Joined

    if isinstance(linear, Joined):
        return [segment for part in linear.parts for segment in segments(part)]
    if isinstance(linear, Q4Matvec):
        return [("q4", list(linear.rows), 32)]
    if isinstance(linear, Q8Matvec):
        return [("q8", list(linear.blocks), 32)]
    if isinstance(linear, BlocksMatvec):
        return [(linear.weights.kind, list(linear.weights.parts), linear.weights.group)]
    if isinstance(linear, Int8Matvec):
        return [("int8", list(linear.rows), 0)]
    raise ValueError(f"a projection on {linear.name}, not on the matvec kernels")


def build(lm: "FastLM") -> torch.ScriptObject:
    """The kernel's `spd.StepModel` on `lm`'s decode weights (views, no copies but the rotary tables in bf16)."""
    arch = lm.arch
    tables = [t.to(torch.bfloat16).contiguous() for pair in lm.tables for t in pair]
    intermediate = lm.blocks[0].down.decode.in_features
    sizes = [lm.layers, arch.hidden, arch.heads, arch.kv_heads, arch.head_dim, intermediate, arch.window or 0,
             1 if arch.activation == "gelu_tanh" else 0]
    model = step.step_model(sizes, [float(arch.eps), float(arch.scale)], tables)
    empty = lm.norm.new_empty(0)

    def given(tensor: torch.Tensor | None) -> torch.Tensor:
        return empty if tensor is None else tensor.contiguous()

    for index, block in enumerate(lm.blocks):
        norms = [block.attn_norm, block.mlp_norm, block.q_norm, block.k_norm, block.post_attn_norm,
                 block.post_mlp_norm, block.qkv.bias]
        model.add_layer(index, [given(t) for t in norms], [int(arch.sliding[index]), arch.rope_of[index]])
        for role, name in enumerate(ROLES):
            for kind, parts, group in segments(getattr(block, name).decode):
                model.add_segment(index, role, kind, parts, group)
    for kind, parts, group in segments(lm.output.decode):
        model.add_segment(-1, HEAD, kind, parts, group)
    model.set_final_norm(lm.norm.contiguous())
    return model


def run(model: torch.ScriptObject, x: torch.Tensor, column: int, keys: list[torch.Tensor],
        values: list[torch.Tensor]) -> torch.Tensor:
    """Logits [B, 1, V] of x [B, 1, H] at position `column` of every row, its keys/values written there."""
    return step.decode_step(model, x, column, keys, values)
