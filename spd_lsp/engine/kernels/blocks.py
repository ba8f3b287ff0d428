"""Weights held as the GGUF's blocks on any CPU the library builds for (`blocks.cpp`): `blocks_dequantize` (rows of W
in fp32: an embedding's lookup), `blocks_matvec` (a few rows of activations: each weight row dequantised once),
`blocks_int8` (any number of rows on integer dot products, where the CPU has them), `blocks_linear` (many rows: W
dequantised a tile at a time and multiplied by ATen's matmul; no float copy kept).
A layout is given as its kind ("q4", "q4k", "q8", "q8k"), its tensors and its group (`blocks.h`)."""

from __future__ import annotations

import torch


def dequantize(kind: str, parts: list[torch.Tensor], group: int, rows: torch.Tensor | None = None) -> torch.Tensor:
    return torch.ops.spd.blocks_dequantize(kind, parts, group, rows)


def matvec(x: torch.Tensor, kind: str, parts: list[torch.Tensor], group: int, *, int8_x: bool = True) -> torch.Tensor:
    """x @ W.T; `int8_x`: x may be quantised to int8 where the library has integer dot products for the blocks (AVX2
    without AVX-512 BF16: every kind; AVX-512 VNNI: the K-quants), else fp32 (or bf16) products throughout."""
    return torch.ops.spd.blocks_matvec(x.contiguous(), kind, parts, group, int8_x)


def int8(x: torch.Tensor, kind: str, parts: list[torch.Tensor], group: int) -> torch.Tensor:
    """x @ W.T for any number of rows on integer dot products (x quantised to int8 once a call) where the library has
    them for the blocks (AVX-512 VNNI beside BF16: every kind), else `matvec`."""
    return torch.ops.spd.blocks_int8(x.contiguous(), kind, parts, group)


def linear(x: torch.Tensor, kind: str, parts: list[torch.Tensor], group: int) -> torch.Tensor:
    return torch.ops.spd.blocks_linear(x.contiguous(), kind, parts, group)


def register_fakes() -> None:
    def rows_of(kind: str, parts: list[torch.Tensor]) -> int:
        return parts[0].shape[0]

    def width(kind: str, parts: list[torch.Tensor]) -> int:
        return parts[0].shape[1] * (2 if kind in ("q4", "q4k") else 1)

    torch.library.register_fake("spd::blocks_dequantize")(
        lambda kind, parts, group, rows=None: parts[0].new_empty(
            rows.numel() if rows is not None else rows_of(kind, parts), width(kind, parts), dtype=torch.float32))
    torch.library.register_fake("spd::blocks_matvec")(
        lambda x, kind, parts, group, int8_x=True: x.new_empty(x.shape[0], rows_of(kind, parts)))
    torch.library.register_fake("spd::blocks_int8")(
        lambda x, kind, parts, group: x.new_empty(x.shape[0], rows_of(kind, parts)))
    torch.library.register_fake("spd::blocks_linear")(
        lambda x, kind, parts, group: x.new_empty(x.shape[0], rows_of(kind, parts)))
