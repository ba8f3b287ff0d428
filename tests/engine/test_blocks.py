"""Any GGUF weight type on our kernels (spd_lsp/engine/kernels/blocks.cpp, matvec.h): built for real with the machine's
compiler; every type's blocks (random bytes with sane fp16 scales, converted by formats.py) dequantised by the kernel
exactly as gguf-py dequantises them; the matvec kernels (tuned for bf16 x where the CPU has AVX-512 BF16, portable for
fp32 x everywhere) and the tile-at-a-time matmul within the output's rounding of x @ W.T; bad input refused clearly;
and the Linears the plan makes of a Q4_K_M-like projection answering as torch's ops on the same blocks."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gguf import GGMLQuantizationType as T
from gguf.quants import dequantize

from spd_lsp.engine.fast import formats
from spd_lsp.engine.fast.layouts.dense import BlocksTorch
from spd_lsp.engine.fast.layouts.ours import BlocksMatvec, BlocksTiles
from spd_lsp.engine.kernels import blocks as kernels
from spd_lsp.engine.kernels import build
from tests.engine.test_blocks_int8 import close_on_int8, served_by_int8
from tests.engine.test_formats import random_raw

TYPES = [T.Q4_0, T.Q4_1, T.Q4_K, T.Q8_0, T.Q5_0, T.Q5_1, T.Q5_K, T.Q6_K, T.IQ4_NL, T.IQ4_XS]


@pytest.fixture(scope="module")
def built() -> None:
    assert build.build() and "blocks" in build.features(), build.reason()


def _blocks(qtype: T, n: int, k: int, seed: int):
    """Random blocks of `qtype` with scales small enough that x @ W.T stays in bf16's comfortable range."""
    raw = random_raw(qtype, n, k, seed)
    weights = formats.blocks(raw, int(qtype), (n, k))
    scaled = tuple(part * 1e-4 if part.dtype == torch.float16 else part for part in weights.parts)
    return weights._replace(parts=scaled)


def _close(got: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, *, rounded_weights: bool = False) -> bool:
    """got is x @ weight.T within bf16's rounding of the output (and, for the tiles, of the weights)."""
    want = x.float() @ weight.T
    scale = x.float().abs() @ weight.abs().T
    slack = scale * (2 ** -7 if rounded_weights else 2 ** -16) + want.abs() * 2 ** -8 + 1e-30
    return bool(((got.float() - want).abs() <= slack).all())


@pytest.mark.parametrize("qtype", TYPES)
def test_the_kernel_dequantises_every_type_as_gguf_py_does(built, qtype) -> None:
    raw = random_raw(qtype, 5, 512, seed=int(qtype))
    weights = formats.blocks(raw, int(qtype), (5, 512))
    want = torch.from_numpy(dequantize(raw, qtype).astype(np.float32))
    got = kernels.dequantize(weights.kind, list(weights.parts), weights.group)
    assert torch.equal(got, want) and torch.equal(weights.dequantised(), want)
    rows = torch.tensor([4, 0, 4])
    assert torch.equal(kernels.dequantize(weights.kind, list(weights.parts), weights.group, rows), want[rows])


@pytest.mark.parametrize("qtype", TYPES)
@pytest.mark.parametrize("m", [1, 3, 8, 11])
def test_matvec_and_tiles_give_x_times_the_blocks(built, qtype, m) -> None:
    weights = _blocks(qtype, 70, 768, seed=m)
    w = weights.dequantised()
    x = torch.randn(m, 768, generator=torch.Generator().manual_seed(m))
    parts = list(weights.parts)
    for xs in (x.bfloat16(), x):  # bf16: the tuned kernels where built; fp32: the portable ones
        got = kernels.matvec(xs, weights.kind, parts, weights.group)
        assert got.shape == (m, 70) and got.dtype == xs.dtype
        if served_by_int8(weights, xs.dtype):  # on int8 x (the K-quants with VNNI, every kind on AVX2): their bound
            assert close_on_int8(got, xs, w, weights)
        else:
            assert _close(got, xs, w)
        assert _close(kernels.linear(xs, weights.kind, parts, weights.group), xs, w, rounded_weights=xs.dtype == torch.bfloat16)


def test_tiles_split_over_threads_answer_inside_inference_mode(built) -> None:
    """The tiles' threads each write their rows of the output: under the engine's inference mode too (it failed so:
    "Inplace update to inference tensor outside InferenceMode" from the threads, which did not hold the mode), and
    the same numbers with one thread or two."""
    weights = _blocks(T.Q4_1, 1000, 576, seed=7)  # rows for several threads' tiles (~227 rows a tile at K = 576)
    x = torch.randn(40, 576, generator=torch.Generator().manual_seed(7)).bfloat16()
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        with torch.inference_mode():
            got = kernels.linear(x, weights.kind, list(weights.parts), weights.group)
        torch.set_num_threads(1)
        alone = kernels.linear(x, weights.kind, list(weights.parts), weights.group)
    finally:
        torch.set_num_threads(threads)
    assert torch.equal(got, alone) and _close(got, x, weights.dequantised(), rounded_weights=True)


def test_a_joined_q4_k_m_projection_on_each_kernel_answers_as_torch_does(built) -> None:
    """q and k in Q4_K, v in Q6_K (a Q4_K_M file's attention): each Linear the plan may choose, same answers."""
    from spd_lsp.engine.fast.backend import on_blocks
    from spd_lsp.engine.fast.gguf_model import Joined
    from spd_lsp.engine.fast.plan import Choice

    held = [_blocks(T.Q4_K, 64, 512, 1), _blocks(T.Q4_K, 32, 512, 2), _blocks(T.Q6_K, 32, 512, 3)]
    x = torch.randn(4, 512).bfloat16()
    want = Joined([BlocksTorch(h) for h in held])(x).float()
    for kernel, linear_type in (("matvec", None), ("tiles", BlocksTiles)):
        linear = on_blocks(held, Choice("q4_k+q6_k", kernel), bf16_dot=build.bf16_dot())
        assert isinstance(linear, Joined) and linear.out_features == 128
        assert linear_type is None or all(isinstance(p, linear_type) for p in linear.parts)
        got = linear(x).float()
        assert (got - want).abs().max() <= 0.02 * want.abs().max()
    assert isinstance(on_blocks(held[2], Choice("q6_k", "matvec"), bf16_dot=False), BlocksMatvec)


def test_bad_input_is_refused_with_its_reason(built) -> None:
    weights = _blocks(T.Q4_K, 8, 256, 0)
    parts = list(weights.parts)
    with pytest.raises(RuntimeError, match=r"x \[M, 256\]"):
        kernels.matvec(torch.randn(1, 128), "q4k", parts, 32)
    with pytest.raises(RuntimeError, match="kind q4, q4k, q8 or q8k"):
        kernels.matvec(torch.randn(1, 256), "q3", parts, 32)
    with pytest.raises(RuntimeError, match="sub-mins and dmin"):
        kernels.matvec(torch.randn(1, 256), "q4k", parts[:3], 32)
    with pytest.raises(RuntimeError, match="d a contiguous CPU tensor"):
        kernels.matvec(torch.randn(1, 256), "q4k", [parts[0], parts[1], parts[2].float(), *parts[3:]], 32)
    with pytest.raises(RuntimeError, match="outside 0..7"):
        kernels.dequantize("q4k", parts, 32, torch.tensor([8]))
