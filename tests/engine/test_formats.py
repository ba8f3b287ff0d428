"""engine/fast/formats.py: every GGUF weight type's blocks as its layout, equal to gguf-py's dequantisation.

Random blocks (random bytes, the fp16 scale fields set to finite values over fp16's whole range, subnormals and
zeros included) and real tensors: the bundled model's, and, where llama.cpp's `llama-quantize` is built
(`~/.cache/spd-lsp/llamacpp/*/bin`), the bundled model requantised to Q4_K_M, Q5_K_M and a Q4_0 mix of IQ4_NL /
IQ4_XS / F16 / BF16 / F32 tensors.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch
from gguf import GGML_QUANT_SIZES
from gguf import GGMLQuantizationType as T
from gguf.quants import dequantize

from spd_lsp.engine.fast import formats
from spd_lsp.engine.fast.formats import UnsupportedType, layout_of, reorder_rows, to_layout, unpermute
from spd_lsp.engine.fast.layouts.blocks import Q4KRows, Q4Rows, Q8Rows
from spd_lsp.engine.fast.q4 import unpermute_order

# where each quantised type keeps its fp16 fields (byte offsets in a block)
FP16_FIELDS = {T.Q4_0: (0,), T.Q4_1: (0, 2), T.Q5_0: (0,), T.Q5_1: (0, 2), T.Q8_0: (0,), T.Q4_K: (0, 2),
               T.Q5_K: (0, 2), T.Q6_K: (208,), T.IQ4_NL: (0,), T.IQ4_XS: (0,)}
QUANTISED = list(FP16_FIELDS)
FLOATS = [T.F32, T.F16, T.BF16]
SHAPES = [(1, 256), (3, 512), (17, 768)]
SMALL_BLOCK_SHAPES = [(5, 96), (2, 576)]  # not whole 256-weight super-blocks: the 32-weight types only


def random_fp16(rng: np.random.Generator, shape: tuple[int, ...], *, largest: float = 60000.0) -> np.ndarray:
    """Finite fp16 values of both signs spread over fp16's range (2^-24 .. `largest`), some zeros."""
    magnitude = np.exp(rng.uniform(np.log(2.0**-24), np.log(largest), shape))
    values = (magnitude * rng.choice([-1.0, 1.0], shape)).astype(np.float16)
    values[rng.random(shape) < 0.02] = 0
    return values


def random_raw(qtype: T, n: int, k: int, seed: int = 0) -> np.ndarray:
    """Random bytes of an [n, k] tensor of `qtype` [n, bytes a row], its fp16 fields finite."""
    rng = np.random.default_rng(seed)
    block, size = GGML_QUANT_SIZES[qtype]
    blocks = rng.integers(0, 256, (n, k // block, size), dtype=np.uint8)
    largest = formats.Q4_0_MAX_SCALE if qtype == T.Q4_0 else 60000.0
    for at in FP16_FIELDS[qtype]:
        blocks[..., at : at + 2] = random_fp16(rng, (n, k // block, 1), largest=largest).view(np.uint8)
    return blocks.reshape(n, -1)


def expected(raw: np.ndarray, qtype: T) -> torch.Tensor:
    return torch.from_numpy(np.array(dequantize(raw, qtype), dtype=np.float32))


def assert_equal(got: torch.Tensor, want: torch.Tensor) -> None:
    """Equal values, element by element (±0 alike; nothing here makes a NaN)."""
    assert got.dtype == want.dtype and got.shape == want.shape
    unequal = got != want
    assert not unequal.any(), f"{int(unequal.sum())} of {want.numel()} differ, first at {unequal.nonzero()[0].tolist()}"


CASES = [(qtype, shape) for qtype in QUANTISED for shape in SHAPES + SMALL_BLOCK_SHAPES
         if shape[1] % GGML_QUANT_SIZES[qtype][0] == 0]


@pytest.mark.parametrize(("qtype", "shape"), CASES,
                         ids=lambda value: value.name if isinstance(value, T) else "x".join(map(str, value)))
def test_each_quantised_type_s_layout_equals_gguf_py_s_dequantisation(qtype: T, shape: tuple[int, int]) -> None:
    n, k = shape
    raw = random_raw(qtype, n, k, seed=n * k)
    layout = to_layout(raw, qtype, shape)
    assert isinstance(layout, layout_of(qtype))
    assert_equal(layout.dequantised(), expected(raw, qtype))


# each layout's fields as its docstring says: (dtype, values a row per weight)
FIELDS = {
    T.Q4_0: {"codes": (torch.uint8, 1 / 2), "scales": (torch.float16, 1 / 32), "mins": (torch.float16, 1 / 32)},
    T.Q4_1: {"codes": (torch.uint8, 1 / 2), "scales": (torch.float16, 1 / 32), "mins": (torch.float16, 1 / 32)},
    T.Q4_K: {"codes": (torch.uint8, 1 / 2), "sub_scales": (torch.uint8, 1 / 32), "sub_mins": (torch.uint8, 1 / 32),
             "d": (torch.float16, 1 / 256), "dmin": (torch.float16, 1 / 256)},
    T.Q8_0: {"codes": (torch.int8, 1), "scales": (torch.float16, 1 / 32)},
    T.Q5_0: {"codes": (torch.int8, 1), "scales": (torch.float16, 1 / 32)},
    T.Q5_1: {"codes": (torch.int8, 1), "scales": (torch.float16, 1 / 32), "mins": (torch.float16, 1 / 32)},
    T.IQ4_NL: {"codes": (torch.int8, 1), "scales": (torch.float16, 1 / 32)},
    T.Q5_K: {"codes": (torch.int8, 1), "scales": (torch.int8, 1 / 32), "mins": (torch.uint8, 1 / 32),
             "d": (torch.float16, 1 / 256), "dmin": (torch.float16, 1 / 256)},
    T.Q6_K: {"codes": (torch.int8, 1), "scales": (torch.int8, 1 / 16), "d": (torch.float16, 1 / 256)},
    T.IQ4_XS: {"codes": (torch.int8, 1), "scales": (torch.int8, 1 / 32), "d": (torch.float16, 1 / 256)},
}
# the range of each type's codes and sub-scales (random bytes reach the ends of each)
RANGES = {T.Q8_0: [("codes", -128, 127)], T.Q5_0: [("codes", -16, 15)], T.Q5_1: [("codes", 0, 31)],
          T.IQ4_NL: [("codes", -127, 113)], T.Q4_K: [("sub_scales", 0, 63), ("sub_mins", 0, 63)],
          T.Q5_K: [("codes", 0, 31), ("scales", 0, 63), ("mins", 0, 63)],
          T.Q6_K: [("codes", -32, 31), ("scales", -128, 127)], T.IQ4_XS: [("codes", -127, 113), ("scales", -32, 31)]}


@pytest.mark.parametrize("qtype", QUANTISED, ids=lambda t: t.name)
def test_each_layout_s_fields_are_as_documented(qtype: T) -> None:
    n, k = 64, 1024
    layout = to_layout(random_raw(qtype, n, k), qtype, (n, k))
    present = {name: value for name, value in layout._asdict().items() if value is not None}
    assert set(present) == set(FIELDS[qtype])
    for name, (dtype, per_weight) in FIELDS[qtype].items():
        assert present[name].dtype == dtype, name
        assert present[name].shape == (n, int(k * per_weight)), name
        assert present[name].is_contiguous(), name
    if isinstance(layout, Q8Rows):
        assert layout.group == (16 if qtype == T.Q6_K else 32)
        assert layout.two_level == (qtype in (T.Q5_K, T.Q6_K, T.IQ4_XS))
    for name, low, high in RANGES.get(qtype, []):
        values = present[name].int()
        assert (values.min().item(), values.max().item()) == (low, high), name


def test_q4_0_is_q4rows_with_minus_8_d_as_its_minimum() -> None:
    raw = random_raw(T.Q4_0, 4, 256)
    rows = to_layout(raw, T.Q4_0, (4, 256))
    assert isinstance(rows, Q4Rows)
    assert torch.equal(rows.mins.float(), -8 * rows.scales.float())


def test_a_q4_0_scale_whose_minus_8_d_overflows_fp16_is_refused() -> None:
    raw = random_raw(T.Q4_0, 2, 64)
    raw.reshape(2, 2, 18)[1, 1, 0:2] = np.array([8192], dtype=np.float16).view(np.uint8)
    with pytest.raises(ValueError, match="Q4_0 scale beyond 8188"):
        to_layout(raw, T.Q4_0, (2, 64))


def test_q4_k_codes_are_repacked_into_q4rows_nibble_order() -> None:
    """One super-block with a known pattern: group g's element e is (g + e) % 16, so the order is visible."""
    groups = (np.arange(8)[:, None] + np.arange(32)[None, :]) % 16  # [group, element]
    qs = np.zeros((4, 32), dtype=np.uint8)  # chunk j: group 2j low, 2j + 1 high
    for j in range(4):
        qs[j] = groups[2 * j] | (groups[2 * j + 1] << 4)
    block = np.zeros(144, dtype=np.uint8)
    block[0:2] = np.array([1.0], dtype=np.float16).view(np.uint8)
    block[4:8] = 1  # sub-scales 0-3 = 1; 4-7 = 0, minima 0
    block[16:] = qs.reshape(-1)
    rows = to_layout(block[None], T.Q4_K, (1, 256))
    assert isinstance(rows, Q4KRows)
    codes = rows.codes.view(8, 16)  # group g: byte i = element i | element i + 16 << 4
    want = torch.from_numpy((groups[:, :16] | (groups[:, 16:] << 4)).astype(np.uint8))
    assert torch.equal(codes, want)


@pytest.mark.parametrize("qtype", FLOATS, ids=lambda t: t.name)
def test_float_types_come_in_their_own_dtype_exactly(qtype: T) -> None:
    n, k = 9, 40
    own = {T.F32: torch.float32, T.F16: torch.float16, T.BF16: torch.bfloat16}[qtype]
    rng = np.random.default_rng(3)
    values = torch.from_numpy(rng.standard_normal((n, k)).astype(np.float32) * 100).to(own)
    raw = values.view(torch.uint8).numpy()
    got = to_layout(raw, qtype, (n, k))
    assert got.dtype == own and got.shape == (n, k)
    assert torch.equal(got, values)
    assert_equal(to_layout(raw, qtype, (n, k), dtype=torch.float32), expected(raw, qtype))


@pytest.mark.parametrize("qtype", FLOATS, ids=lambda t: t.name)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=str)
def test_float_types_convert_to_a_requested_dtype_as_torch_rounds(qtype: T, dtype: torch.dtype) -> None:
    n, k = 40, 64
    rng = np.random.default_rng(4)
    own = {T.F32: np.float32, T.F16: np.float16, T.BF16: np.float32}[qtype]
    values = (rng.standard_normal((n, k)) * 1000).astype(own)
    if qtype == T.BF16:
        values = (values.view(np.uint32) >> 16).astype(np.uint16)
    raw = values.view(np.uint8).reshape(n, -1)
    formats_chunk = formats.CHUNK_BYTES
    try:
        formats.CHUNK_BYTES = 3 * raw.shape[1]  # several chunks
        got = to_layout(raw, qtype, (n, k), dtype=dtype)
    finally:
        formats.CHUNK_BYTES = formats_chunk
    assert got.dtype == dtype
    assert torch.equal(got, expected(raw, qtype).to(dtype))


def test_a_conversion_in_many_chunks_equals_one_in_one() -> None:
    raw = random_raw(T.Q4_K, 37, 512)
    whole = to_layout(raw, T.Q4_K, (37, 512))
    chunk = formats.CHUNK_BYTES
    try:
        formats.CHUNK_BYTES = 5 * raw.shape[1] + 1
        pieces = to_layout(raw, T.Q4_K, (37, 512))
    finally:
        formats.CHUNK_BYTES = chunk
    assert all(torch.equal(a, b) for a, b in zip(whole, pieces))


@pytest.mark.parametrize("qtype", [T.Q4_1, T.Q4_K, T.Q6_K, T.Q5_1, T.Q5_K, T.F16], ids=lambda t: t.name)
def test_reordering_rows_reorders_every_per_row_field_alike(qtype: T) -> None:
    n, k, heads = 24, 512, 3
    if qtype == T.F16:
        raw = np.random.default_rng(5).standard_normal((n, k)).astype(np.float16).view(np.uint8)
    else:
        raw = random_raw(qtype, n, k, seed=5)
    layout = to_layout(raw, qtype, (n, k))
    order = torch.from_numpy(np.random.default_rng(6).permutation(n))
    dense = layout if isinstance(layout, torch.Tensor) else layout.dequantised()
    moved = reorder_rows(layout, order)
    assert type(moved) is type(layout)
    assert torch.equal(moved if isinstance(moved, torch.Tensor) else moved.dequantised(), dense[order])
    # unpermute: the same as converting the rows in transformers' order
    back = unpermute(layout, heads)
    from_rows = to_layout(np.ascontiguousarray(raw[unpermute_order(n, heads).numpy()]), qtype, (n, k))
    if isinstance(back, torch.Tensor):
        assert torch.equal(back, from_rows)
    else:
        assert all(a is None and b is None or torch.equal(a, b) for a, b in zip(back, from_rows))


def test_an_unsupported_type_is_named_with_the_supported_ones() -> None:
    raw = np.zeros((1, 84), dtype=np.uint8)
    with pytest.raises(UnsupportedType) as caught:
        to_layout(raw, T.Q2_K, (1, 256))
    message = str(caught.value)
    assert "Q2_K" in message
    assert all(name in message for name in ("F32", "BF16", "Q4_0", "Q4_K", "Q6_K", "IQ4_XS"))
    assert isinstance(caught.value, ValueError)
    with pytest.raises(UnsupportedType, match="unknown type"):
        to_layout(raw, 999, (1, 256))
    with pytest.raises(UnsupportedType, match="Q3_K"):
        layout_of(T.Q3_K)


def test_bytes_that_are_not_the_shape_are_refused() -> None:
    raw = random_raw(T.Q8_0, 4, 64)
    with pytest.raises(ValueError, match=r"not a \[4, 96\] weight"):
        to_layout(raw, T.Q8_0, (4, 96))
    with pytest.raises(ValueError, match="a multiple of 256"):
        to_layout(np.zeros((1, 210), dtype=np.uint8), T.Q6_K, (1, 200))


# --- real GGUFs ---------------------------------------------------------------------------------------------------


def compare_every_tensor(path: Path) -> set[str]:
    """Every tensor of the GGUF at `path` converted and compared to gguf-py; the types seen."""
    from spd_lsp.engine.gguf.file import GGUFFile

    gguf_file = GGUFFile(path)
    seen = set()
    for name, info in gguf_file.tensors.items():
        raw = gguf_file.raw(name)
        shape = (raw.shape[0], info.shape[-1])
        layout = to_layout(raw, info.type, shape)
        got = layout.float() if isinstance(layout, torch.Tensor) else layout.dequantised()
        assert_equal(got, expected(np.asarray(raw), T(info.type)).reshape(shape))
        seen.add(info.type_name)
    return seen


@pytest.mark.integration
def test_the_bundled_gguf_s_tensors_equal_gguf_py_s_and_the_existing_loaders() -> None:
    from spd_lsp.engine.fast import q4, q8
    from spd_lsp.engine.gguf.file import GGUFFile
    from spd_lsp.engine.model import bundled_gguf

    assert compare_every_tensor(bundled_gguf()) == {"Q4_1", "Q8_0", "F32"}
    gguf_file = GGUFFile(bundled_gguf())
    raw = gguf_file.raw("blk.0.ffn_up.weight")
    rows = to_layout(raw, T.Q4_1, (raw.shape[0], 576))
    old = Q4Rows.of_blocks([np.asarray(raw).reshape(raw.shape[0], -1, q4.BLOCK_BYTES)])
    assert all(torch.equal(a, b) for a, b in zip(rows, old))
    head = gguf_file.raw("token_embd.weight")
    blocks = to_layout(head, T.Q8_0, (head.shape[0], 576))
    codes, scales = q8.unpack_q8_0(np.asarray(head))
    assert torch.equal(blocks.codes, codes) and torch.equal(blocks.scales.float(), scales)


def llama_quantize() -> Path | None:
    """llama.cpp's quantizer where a helper built it (the portable avx2 build first)."""
    found = sorted((Path.home() / ".cache" / "spd-lsp" / "llamacpp").glob("*/bin/llama-quantize"),
                   key=lambda path: path.parent.parent.name != "avx2")
    return found[0] if found else None


# what llama-quantize makes of the bundled model (K = 576 is not whole super-blocks: its K-quant mixes fall back to
# Q5_0 / Q5_1 / Q8_0 there), and the types each file must hold
REQUANTISED = {
    "Q4_K_M": ([], {"Q4_K", "Q6_K", "Q5_0", "Q8_0", "F32"}),
    "Q5_K_M": ([], {"Q5_K", "Q6_K", "Q5_1", "Q8_0", "F32"}),
    "Q4_0": (["--tensor-type", r"blk\.[01]\.ffn_down=iq4_xs", "--tensor-type", r"blk\.[01]\.attn_q=iq4_nl",
              "--tensor-type", r"blk\.2\.attn_k=f16", "--tensor-type", r"blk\.2\.attn_v=bf16",
              "--tensor-type", r"blk\.3\.ffn_up=f32"],
             {"Q4_0", "IQ4_NL", "IQ4_XS", "F16", "BF16", "F32", "Q8_0"}),
}


@pytest.mark.integration
@pytest.mark.parametrize("target", list(REQUANTISED))
def test_llama_cpp_s_own_quantisations_equal_gguf_py_s(target: str, tmp_path: Path) -> None:
    from spd_lsp.engine.model import bundled_gguf

    quantize = llama_quantize()
    if quantize is None:
        pytest.skip("llama.cpp's llama-quantize is not built in ~/.cache/spd-lsp/llamacpp/*/bin")
    extra, types = REQUANTISED[target]
    out = tmp_path / f"{target}.gguf"
    done = subprocess.run([str(quantize), "--allow-requantize", *extra, str(bundled_gguf()), str(out), target, "2"],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert compare_every_tensor(out) == types
