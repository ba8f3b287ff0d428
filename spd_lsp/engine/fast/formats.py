"""One GGUF tensor's raw blocks as the fast path's layouts (`layouts/blocks.py`): the file's own numbers, no float copy.

| GGUF type                                      | layout       |
|------------------------------------------------|--------------|
| Q4_0 (min = -8 d), Q4_1                        | `Q4Rows`     |
| Q4_K (its 64-weight chunks repacked per 32)    | `Q4KRows`    |
| Q8_0, Q5_0, Q5_1, Q5_K, Q6_K, IQ4_NL, IQ4_XS   | `Q8Rows`     |
| F32, F16, BF16                                 | torch floats |

Each quantised conversion is exact: the layout's `dequantised()` equals gguf-py's `gguf.quants.dequantize` (the products
of an fp16 scale and integers of at most 13 bits are exact in fp32, and the one rounding, adding a minimum, happens in
the same order). Q4_0's min = -8 d is exact in fp16 up to |d| = 8188 (beyond, -8 d overflows: refused). Floats: F32 to
fp32, F16 to fp16 or fp32, BF16 to bf16 or fp32 are exact; to a narrower type torch rounds to nearest even.

Block layouts: llama.cpp's ggml-common.h (`block_*`) and ggml-quants.c (`dequantize_row_*`). The rows are converted
in chunks of about `CHUNK_BYTES` of blocks, so the temporaries stay small; each chunk's work is whole-array numpy.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Union

import numpy as np
import torch
from gguf import GGMLQuantizationType as T

from spd_lsp.engine.fast.layouts.blocks import BLOCK, Blocks, Q4KRows, Q4Rows, Q8Rows
from spd_lsp.engine.fast.q4 import unpermute_order

CHUNK_BYTES = 1 << 20
# IQ4_NL's (and IQ4_XS's) non-linear 4-bit values (ggml-common.h `kvalues_iq4nl`)
IQ4_VALUES = np.array([-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113], dtype=np.int8)
Q4_0_MAX_SCALE = 8188  # the largest fp16 d whose -8 d is finite in fp16

Layout = Union[Q4Rows, Q4KRows, Q8Rows, torch.Tensor]
Decode = Callable[[np.ndarray, dict[str, np.ndarray]], None]


class UnsupportedType(ValueError):
    """A GGUF weight type no layout here reads (the message names it and the supported ones)."""


@dataclass(frozen=True)
class Format:
    """How one quantised GGUF type's blocks become a layout: `decode` fills the layout's fields (name -> (numpy dtype,
    values a block)) for a chunk of blocks [rows, blocks a row, `size`]."""

    layout: type
    block: int  # weights a block
    size: int  # bytes a block
    fields: dict[str, tuple[type, int]]
    decode: Decode


# Byte-lane masks for 8 bytes at a time (uint64 "SIMD within a register": shifts and masks act on each byte alike)
LOW = np.uint64(0x0F0F0F0F0F0F0F0F)
HIGH = np.uint64(0xF0F0F0F0F0F0F0F0)
BITS_45 = np.uint64(0x3030303030303030)
ONES = np.uint64(0x0101010101010101)
_BYTES = np.arange(256, dtype=np.uint8)
# a byte's 8 bits as 8 bytes of 0 or 16 (bit b -> byte b): the fifth bits of Q5_x codes
FIFTH_BITS = (np.unpackbits(_BYTES[:, None], axis=1, bitorder="little") << 4).view(np.uint64)[:, 0]


def _iq4_pairs(shift: int) -> np.ndarray:
    """For two bytes read as a little-endian uint16: the IQ4 values of their nibbles at `shift` (0: low, 4: high), as
    two int8 in one uint16."""
    pairs = np.arange(1 << 16, dtype=np.uint16).view(np.uint8).reshape(-1, 2)
    return np.ascontiguousarray(IQ4_VALUES[(pairs >> shift) & 15]).view(np.uint16)[:, 0]


IQ4_LOW, IQ4_HIGH = _iq4_pairs(0), _iq4_pairs(4)
# IQ4_XS's scales: a byte's two nibbles as two bytes (uint16), and its four 2-bit fields, shifted to bits 4-5, as four
# bytes (uint32)
IQ4_XS_LOW = np.stack([_BYTES & 15, _BYTES >> 4], axis=1).view(np.uint16)[:, 0]
IQ4_XS_HIGH = np.stack([(_BYTES >> shift & 3) << 4 for shift in (0, 2, 4, 6)], axis=1).view(np.uint32)[:, 0]


def _items(array: np.ndarray) -> np.ndarray:
    """[..., w] (last axis contiguous) as [...] items of w bytes: copies of them run as one strided loop, not one
    loop a row (numpy's cost for small inner dimensions)."""
    as_bytes = array.view(np.uint8)
    return as_bytes.view(f"V{as_bytes.shape[-1]}")[..., 0]


def _copy(destination: np.ndarray, source: np.ndarray) -> None:
    """Copy `source`'s bytes into `destination` (each [..., w bytes], any dtypes, last axes contiguous)."""
    _items(destination)[...] = _items(source)


def _lanes(source: np.ndarray, dtype: type = np.uint64) -> np.ndarray:
    """A [..., w] uint8 view (last axis contiguous) copied contiguous as [..., w / itemsize] of `dtype`."""
    out = np.empty((*source.shape[:-1], source.shape[-1] // np.dtype(dtype).itemsize), dtype)
    _copy(out, source)
    return out


def _nibbles(packed: np.ndarray, out: np.ndarray) -> None:
    """16-byte runs of packed codes [..., 16] (byte j: element j low, j + 16 high) -> elements [..., 32] in `out`."""
    lanes = _lanes(packed)
    _copy(out[..., :16], lanes & LOW)
    _copy(out[..., 16:], (lanes >> 4) & LOW)


def _k_scales(packed: np.ndarray, sc: np.ndarray, m: np.ndarray) -> None:
    """Q4_K/Q5_K's 12 packed bytes [..., 12] -> 8 6-bit sub-scales `sc` and sub-minima `m` [..., 8] (llama.cpp
    `get_scale_min_k4`: groups 0-3 in the low 6 bits of bytes 0-3 / 4-7, groups 4-7 from the nibbles of bytes 8-11
    and the top 2 bits of bytes 0-3 / 4-7)."""
    words = _lanes(packed, np.uint32)
    low, mid, high = words[..., 0], words[..., 1], words[..., 2]
    sc, m = sc.view(np.uint32), m.view(np.uint32)
    np.bitwise_and(low, 0x3F3F3F3F, out=sc[..., 0])
    np.bitwise_and(mid, 0x3F3F3F3F, out=m[..., 0])
    np.bitwise_or(high & 0x0F0F0F0F, (low >> 2) & 0x30303030, out=sc[..., 1])
    np.bitwise_or((high >> 4) & 0x0F0F0F0F, (mid >> 2) & 0x30303030, out=m[..., 1])


def _q4_0(b: np.ndarray, out: dict[str, np.ndarray]) -> None:
    _copy(out["scales"], b[..., 0:2])
    _copy(out["codes"], b[..., 2:18])
    mins = out["scales"].astype(np.float32)
    mins *= -8
    if np.any(np.abs(mins) > 8 * Q4_0_MAX_SCALE):
        raise ValueError(f"a Q4_0 scale beyond {Q4_0_MAX_SCALE}: its minimum -8 d is not finite in fp16")
    out["mins"][...] = mins  # exact: a power of two times an fp16 within its range


def _q4_1(b: np.ndarray, out: dict[str, np.ndarray]) -> None:
    _copy(out["scales"], b[..., 0:2])
    _copy(out["mins"], b[..., 2:4])
    _copy(out["codes"], b[..., 4:20])


def _q4_k(b: np.ndarray, out: dict[str, np.ndarray]) -> None:
    lead = b.shape[:-1]
    _copy(out["d"], b[..., 0:2])
    _copy(out["dmin"], b[..., 2:4])
    _k_scales(b[..., 4:16], out["sub_scales"], out["sub_mins"])
    # 4 chunks of 32 bytes, chunk j: group 2j in the low nibbles, 2j + 1 in the high ones. In `Q4Rows`' order byte
    # i of a group holds its elements i (low) and i + 16 (high): the chunk's bytes i and i + 16 combined.
    chunks = b[..., 16:144].reshape(*lead, 4, 2, 16)
    first, second = _lanes(chunks[..., 0, :]), _lanes(chunks[..., 1, :])
    codes = out["codes"].reshape(*lead, 4, 2, 16)
    _copy(codes[..., 0, :], (first & LOW) | ((second << 4) & HIGH))
    _copy(codes[..., 1, :], ((first >> 4) & LOW) | (second & HIGH))


def _q8_0(b: np.ndarray, out: dict[str, np.ndarray]) -> None:
    _copy(out["scales"], b[..., 0:2])
    _copy(out["codes"], b[..., 2:34])


def _q5(b: np.ndarray, out: dict[str, np.ndarray], at: int) -> None:
    """Q5_0 / Q5_1's codes q in 0..31: 4 bytes of fifth bits at `at` (bit j of the little-endian uint32: element j),
    then 16 bytes of nibbles."""
    codes = out["codes"].view(np.uint8)
    _nibbles(b[..., at + 4 : at + 20], codes)
    codes.view(np.uint64).reshape(*b.shape[:-1], 4)[...] |= np.take(FIFTH_BITS, _lanes(b[..., at : at + 4], np.uint8))


def _q5_0(b: np.ndarray, out: dict[str, np.ndarray]) -> None:
    _copy(out["scales"], b[..., 0:2])
    _q5(b, out, 2)
    out["codes"].view(np.uint8)[...] -= 16  # q - 16 as int8 (uint8 arithmetic wraps to the same bytes)


def _q5_1(b: np.ndarray, out: dict[str, np.ndarray]) -> None:
    _copy(out["scales"], b[..., 0:2])
    _copy(out["mins"], b[..., 2:4])
    _q5(b, out, 4)


def _q5_k(b: np.ndarray, out: dict[str, np.ndarray]) -> None:
    lead = b.shape[:-1]
    _copy(out["d"], b[..., 0:2])
    _copy(out["dmin"], b[..., 2:4])
    _k_scales(b[..., 4:16], out["scales"], out["mins"])
    # 4 chunks of 32 bytes, chunk j: group 2j's elements in the low nibbles, 2j + 1's in the high ones
    chunks = _lanes(b[..., 48:176].reshape(*lead, 4, 32))
    codes = out["codes"].view(np.uint8).reshape(*lead, 4, 2, 32)
    _copy(codes[..., 0, :], chunks & LOW)
    _copy(codes[..., 1, :], (chunks >> 4) & LOW)
    # the fifth bits: bit i of byte l of the 32 bytes at 16 is element l of group i. Shifted as 8 planes over the
    # whole chunk (long loops), then each block's planes put in their groups' places.
    high = _lanes(b[..., 16:48])
    planes = (high.reshape(1, -1) >> np.arange(8, dtype=np.uint64)[:, None]) & ONES  # [8 (i), blocks * 4]
    planes <<= 4
    fifth = np.empty((*lead, 8, 4), np.uint64)
    _copy(fifth, np.moveaxis(planes.reshape(8, *lead, 4), 0, -2))
    codes.view(np.uint64).reshape(fifth.shape)[...] |= fifth


def _q6_k(b: np.ndarray, out: dict[str, np.ndarray]) -> None:
    lead = b.shape[:-1]
    # two halves of 128 weights, each from 64 bytes of nibbles (a, b: bytes 0-31, 32-63) and 32 of bit pairs (h):
    # elements 0-31: a low | h bits 0-1; 32-63: b low | bits 2-3; 64-95: a high | bits 4-5; 96-127: b high | 6-7
    nibbles = b[..., 0:128].reshape(*lead, 2, 2, 32)
    a, c = _lanes(nibbles[..., 0, :]), _lanes(nibbles[..., 1, :])
    h = _lanes(b[..., 128:192].reshape(*lead, 2, 32))
    codes = out["codes"].view(np.uint8).reshape(*lead, 2, 4, 32)
    _copy(codes[..., 0, :], (a & LOW) | ((h << 4) & BITS_45))
    _copy(codes[..., 1, :], (c & LOW) | ((h << 2) & BITS_45))
    _copy(codes[..., 2, :], ((a >> 4) & LOW) | (h & BITS_45))
    _copy(codes[..., 3, :], ((c >> 4) & LOW) | ((h >> 2) & BITS_45))
    out["codes"].view(np.uint8)[...] -= 32  # q - 32 as int8
    _copy(out["scales"], b[..., 192:208])
    _copy(out["d"], b[..., 208:210])


def _iq4(packed: np.ndarray, codes: np.ndarray) -> None:
    """IQ4 nibbles [..., 16] (Q4_0's order) -> their int8 values [..., 32], two bytes at a time."""
    pairs = _lanes(packed, np.uint16)
    _copy(codes[..., :16], np.take(IQ4_LOW, pairs, mode="clip"))
    _copy(codes[..., 16:], np.take(IQ4_HIGH, pairs, mode="clip"))


def _iq4_nl(b: np.ndarray, out: dict[str, np.ndarray]) -> None:
    _copy(out["scales"], b[..., 0:2])
    _iq4(b[..., 2:18], out["codes"])


def _iq4_xs(b: np.ndarray, out: dict[str, np.ndarray]) -> None:
    lead = b.shape[:-1]
    _copy(out["d"], b[..., 0:2])
    # group i's 6-bit scale: its low 4 bits are nibble i of bytes 4-7, its high 2 bits bits 2i, 2i + 1 of bytes 2-3
    scales = out["scales"].view(np.uint8)
    _copy(scales, np.take(IQ4_XS_LOW, _lanes(b[..., 4:8], np.uint8)))
    scales.view(np.uint32)[...] |= np.take(IQ4_XS_HIGH, _lanes(b[..., 2:4], np.uint8))
    scales -= 32
    _iq4(b[..., 8:136].reshape(*lead, 8, 16), out["codes"].reshape(*lead, 8, 32))


_F16, _U8, _I8 = np.float16, np.uint8, np.int8
_Q4 = {"codes": (_U8, 16), "scales": (_F16, 1), "mins": (_F16, 1)}
_DIRECT = {"codes": (_I8, 32), "scales": (_F16, 1)}
FORMATS: dict[int, Format] = {
    T.Q4_0: Format(Q4Rows, 32, 18, _Q4, _q4_0),
    T.Q4_1: Format(Q4Rows, 32, 20, _Q4, _q4_1),
    T.Q4_K: Format(Q4KRows, 256, 144, {"codes": (_U8, 128), "sub_scales": (_U8, 8), "sub_mins": (_U8, 8),
                                       "d": (_F16, 1), "dmin": (_F16, 1)}, _q4_k),
    T.Q8_0: Format(Q8Rows, 32, 34, _DIRECT, _q8_0),
    T.Q5_0: Format(Q8Rows, 32, 22, _DIRECT, _q5_0),
    T.Q5_1: Format(Q8Rows, 32, 24, {**_DIRECT, "mins": (_F16, 1)}, _q5_1),
    T.Q5_K: Format(Q8Rows, 256, 176, {"codes": (_I8, 256), "scales": (_I8, 8), "mins": (_U8, 8), "d": (_F16, 1),
                                      "dmin": (_F16, 1)}, _q5_k),
    T.Q6_K: Format(Q8Rows, 256, 210, {"codes": (_I8, 256), "scales": (_I8, 16), "d": (_F16, 1)}, _q6_k),
    T.IQ4_NL: Format(Q8Rows, 32, 18, _DIRECT, _iq4_nl),
    T.IQ4_XS: Format(Q8Rows, 256, 136, {"codes": (_I8, 256), "scales": (_I8, 8), "d": (_F16, 1)}, _iq4_xs),
}
# float types: their numpy dtype (bf16 as its bits) and torch dtype
FLOATS: dict[int, tuple[type, torch.dtype]] = {
    T.F32: (np.float32, torch.float32), T.F16: (np.float16, torch.float16), T.BF16: (np.int16, torch.bfloat16)}
SUPPORTED = tuple(T(t).name for t in (*FLOATS, *FORMATS))


def layout_of(ggml_type: int) -> type:
    """The layout `to_layout` gives for `ggml_type` (`torch.Tensor` for the float types)."""
    if ggml_type in FLOATS:
        return torch.Tensor
    return _format(ggml_type).layout


def to_layout(raw: np.ndarray, ggml_type: int, shape: tuple[int, int], *, dtype: torch.dtype | None = None) -> Layout:
    """One tensor's GGUF bytes `raw` [N, bytes a row] (`GGUFFile.raw`) of weight type `ggml_type` and torch shape
    `shape` (N, K) as its layout (the table above); float types as a tensor of `dtype` (default: the file's)."""
    n, k = shape
    if ggml_type in FLOATS:
        return _floats(raw, ggml_type, n, k, dtype)
    fmt = _format(ggml_type)
    _check(raw, fmt.block, fmt.size, n, k, T(ggml_type).name)
    blocks = k // fmt.block
    outputs = {name: np.empty((n, blocks * count), kind) for name, (kind, count) in fmt.fields.items()}
    for start, stop in _chunks(n, raw.shape[1]):
        rows = stop - start
        fmt.decode(np.asarray(raw[start:stop]).reshape(rows, blocks, fmt.size),
                   {name: out[start:stop].reshape(rows, blocks, -1) for name, out in outputs.items()})
    return fmt.layout(**{name: torch.from_numpy(out) for name, out in outputs.items()})


def _floats(raw: np.ndarray, ggml_type: int, n: int, k: int, dtype: torch.dtype | None) -> torch.Tensor:
    numpy_dtype, own = FLOATS[ggml_type]
    _check(raw, 1, np.dtype(numpy_dtype).itemsize, n, k, T(ggml_type).name)
    if dtype in (None, own):
        return torch.from_numpy(np.array(raw).view(numpy_dtype)).view(own)
    out = torch.empty((n, k), dtype=dtype)
    for start, stop in _chunks(n, raw.shape[1]):
        out[start:stop] = torch.from_numpy(np.array(raw[start:stop]).view(numpy_dtype)).view(own)
    return out


def _format(ggml_type: int) -> Format:
    fmt = FORMATS.get(ggml_type)
    if fmt is None:
        try:
            name = T(ggml_type).name
        except ValueError:
            name = "an unknown type"
        raise UnsupportedType(f"GGUF weight type {name} ({ggml_type}) is not read by the fast path; it reads "
                              f"{', '.join(SUPPORTED)}")
    return fmt


def _check(raw: np.ndarray, block: int, size: int, n: int, k: int, name: str) -> None:
    if k % block:
        raise ValueError(f"{name} holds weights in blocks of {block}: a row of {k} is not a multiple of {block}")
    if raw.dtype != np.uint8 or raw.shape != (n, k // block * size):
        raise ValueError(f"{name} bytes of shape {raw.shape} ({raw.dtype}) are not a [{n}, {k}] weight: expected "
                         f"uint8 [{n}, {k // block * size}]")


def _chunks(rows: int, row_bytes: int) -> list[tuple[int, int]]:
    """Row ranges of about `CHUNK_BYTES` of input each."""
    step = max(1, CHUNK_BYTES // max(1, row_bytes))
    return [(start, min(rows, start + step)) for start in range(0, rows, step)]


def reorder_rows(layout: Layout, order: torch.Tensor) -> Layout:
    """`layout` with its rows taken in `order` (every per-row field indexed alike; None fields stay None)."""
    if isinstance(layout, torch.Tensor):
        return layout.index_select(0, order)
    return type(layout)(*(None if field is None else field.index_select(0, order) for field in layout))


def unpermute(layout: Layout, heads: int) -> Layout:
    """A q/k projection's rows from llama.cpp's order (rotary pairs interleaved, for Llama) back to transformers'."""
    rows = layout.shape[0] if isinstance(layout, torch.Tensor) else layout[0].shape[0]
    return reorder_rows(layout, unpermute_order(rows, heads))


def blocks(raw: np.ndarray, ggml_type: int, shape: tuple[int, int]) -> Blocks:
    """One quantised tensor's bytes as the kernels' `Blocks` (`layouts/blocks.py`: "q4", "q4k", "q8" or "q8k" with
    its tensors in the kernels' order), named by its GGUF type."""
    layout = to_layout(raw, ggml_type, shape)
    name = T(ggml_type).name.lower()
    if isinstance(layout, Q4Rows):
        return Blocks("q4", tuple(layout), BLOCK, name)
    if isinstance(layout, Q4KRows):
        return Blocks("q4k", (layout.codes, layout.sub_scales, layout.d, layout.sub_mins, layout.dmin), BLOCK, name)
    if isinstance(layout, Q8Rows):
        minimum = () if layout.mins is None else ((layout.mins, layout.dmin) if layout.two_level else (layout.mins,))
        if layout.two_level:
            return Blocks("q8k", (layout.codes, layout.scales, layout.d, *minimum), layout.group, name)
        return Blocks("q8", (layout.codes, layout.scales, *minimum), layout.group, name)
    raise UnsupportedType(f"GGUF weight type {name}: a float type, not blocks")
