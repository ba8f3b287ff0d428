"""The decode kernels on int8 activations: the K-quants' where the library is built with AVX-512 VNNI beside BF16
(`engine/kernels/matvec.h`, feature "int8-dot"; bf16 x), every block kind's where it is built for AVX2 without AVX-512
BF16 (`engine/kernels/int8x.h`, feature "avx2-int8"; bf16 or fp32 x: test_portable_builds.py runs this module on that
build here). Both: x quantised once a call to int8 in blocks of 32 (dx = max|x| / 127), integer dot products of the
codes, each group's scale times x's block scale in fp32, the minima's term from x's exact sums.

Stated bound, checked here against gguf-py's dequantised float matmul: |ours - x W^T| <= sum_k |scale_g c_k| dx_b / 2
(x's rounding to int8; c = q - 8 for 4-bit codes on the VNNI kernels, which take them centred, else q) plus the fp32
and bf16 roundings the float kernels have. The types a build does not serve on
int8 x (with VNNI: Q4_0/Q4_1/Q8_0 and the other direct-scale types) keep their float kernels: their answers are tested
unchanged in test_blocks.py; `int8_x=False` keeps the float products on every build (checked here too)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gguf import GGMLQuantizationType as T
from gguf.quants import dequantize

from spd_lsp.engine.fast import formats
from spd_lsp.engine.kernels import blocks as kernels
from spd_lsp.engine.kernels import build
from tests.engine.test_formats import random_raw

INT8_TYPES = [T.Q4_K, T.Q5_K, T.Q6_K, T.IQ4_XS]  # those both int8 paths serve
TYPES = [T.Q4_0, T.Q4_1, T.Q8_0, T.Q5_0, T.Q5_1, T.IQ4_NL, *INT8_TYPES]  # AVX2's int8 path serves them all
BLOCK = 32


def int8_dot() -> bool:
    """The library has an int8 path: AVX-512 VNNI's (the K-quants, bf16 x) or AVX2's (every kind)."""
    return build.build() and bool({"int8-dot", "avx2-int8"} & build.features())


@pytest.fixture(scope="module", autouse=True)
def int8_built() -> None:
    """The library built (here, not at collection), with an int8 path, or these tests skip."""
    if not int8_dot():
        pytest.skip("the library has no int8 dot products (AVX-512 VNNI, or AVX2 without AVX-512 BF16) here")


def served_by_int8(weights, dtype: torch.dtype = torch.bfloat16) -> bool:
    """The blocks (and x's dtype) an int8 path takes, where the library has it: with AVX-512 VNNI the K-quants for bf16
    x; with AVX2 every kind (4-bit codes in whole pairs of groups) for bf16 or fp32 x."""
    if not int8_dot():
        return False
    if "avx2-int8" in build.features():
        return weights.kind not in ("q4", "q4k") or weights.shape[1] % 64 == 0
    return dtype == torch.bfloat16 and weights.kind in ("q4k", "q8k")


def served_or_skip(weights) -> None:
    if not served_by_int8(weights):
        pytest.skip(f"{weights.layout} keeps its float kernel on this build")


def _blocks(qtype: T, n: int, k: int, seed: int):
    """Random blocks (fp16 fields over fp16's whole range: W and x W^T stay well inside bf16's) and their bytes."""
    raw = random_raw(qtype, n, k, seed)
    return formats.blocks(raw, int(qtype), (n, k)), raw


def centred() -> bool:
    """The VNNI kernels take 4-bit codes as q - 8 (their minimum raised by 8 scales); AVX2's as they are."""
    return "int8-dot" in build.features()


def _code_part_and_minima(weights) -> tuple[torch.Tensor, torch.Tensor]:
    """W's terms as the kernels split it: scale_g * c_k [N, K] and each group's minimum [N, groups] (fp32; W = the first
    + the second; c = q - 8 for 4-bit codes where `centred`, else q). From the codes, not as W minus the minima: a
    minimum much larger than its codes' term would swamp it in fp32."""
    n, k = weights.shape
    scale, minimum = weights.group_scales()
    group = k // scale.shape[1]
    codes = weights.parts[0]
    if weights.kind in ("q4", "q4k"):
        halves = codes.view(n, k // BLOCK, BLOCK // 2)
        q = torch.cat([halves & 15, halves >> 4], dim=-1).float().view(n, k)
        if centred():
            return (q - 8) * scale.repeat_interleave(group, dim=1), minimum + 8 * scale
    else:
        q = codes.float()
    return q * scale.repeat_interleave(group, dim=1), minimum


def x_in_int8(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """x [M, K] bf16 as the kernels quantise it: codes [M, K] (fp32, integers in -127..127) and dx [M, K / 32]."""
    blocks = x.float().view(x.shape[0], -1, BLOCK)
    amax = blocks.abs().amax(dim=-1)
    # 127 / amax divided in fp32 as the kernel does (torch's `127.0 / amax` is 127 * (1 / amax): a tie's rounding
    # can then differ from the kernel's)
    inverse = torch.where(amax > 0, torch.full_like(amax, 127.0) / amax, torch.zeros_like(amax))
    codes = torch.round(blocks * inverse[..., None]).clamp(-127, 127)  # half to even, as vcvtps2dq rounds
    return codes.view_as(x).float(), amax / 127.0


def int8_bound(x: torch.Tensor, weights) -> torch.Tensor:
    """The stated bound [M, N] on |ours - x W^T| from x's rounding alone: sum_k |scale_g q_k| dx_b / 2."""
    code_part, _ = _code_part_and_minima(weights)
    _, dx = x_in_int8(x)
    return (dx.repeat_interleave(BLOCK, dim=1) / 2).double() @ code_part.abs().double().T


def close_on_int8(got: torch.Tensor, x: torch.Tensor, weight: torch.Tensor, weights) -> bool:
    """got is x @ weight.T within the int8 bound, fp32's rounding and the output's bf16 rounding."""
    want = x.double() @ weight.double().T
    scale = x.double().abs() @ weight.double().abs().T
    slack = int8_bound(x, weights) * (1 + 2 ** -10) + scale * 2 ** -16 + want.abs() * 2 ** -8 + 1e-30
    return bool(((got.double() - want).abs() <= slack).all())


@pytest.mark.parametrize("qtype", TYPES)
@pytest.mark.parametrize("m", [1, 3, 8, 11])
def test_blocks_on_int8_activations_stay_within_the_stated_bound_of_gguf_py_s_matmul(qtype, m) -> None:
    weights, raw = _blocks(qtype, 70, 768, seed=m)
    served_or_skip(weights)
    w = torch.from_numpy(np.asarray(dequantize(raw, qtype), dtype=np.float32))  # gguf-py's
    assert torch.equal(weights.dequantised(), w)
    x = torch.randn(m, 768, generator=torch.Generator().manual_seed(m)).bfloat16()
    dtypes = (torch.bfloat16, torch.float32) if "avx2-int8" in build.features() else (torch.bfloat16,)
    for dtype in dtypes:  # AVX2's path: the engine's fp32 x as well (x holds bf16's values: the same codes)
        got = kernels.matvec(x.to(dtype), weights.kind, list(weights.parts), weights.group)
        assert served_by_int8(weights, dtype) and got.shape == (m, 70) and got.dtype == dtype
        assert close_on_int8(got, x, w, weights)
    # the bound is a real one: a few percent at most of the codes' products' scale, not slack that passes anything
    code_part, _ = _code_part_and_minima(weights)
    assert (int8_bound(x, weights) <= (x.double().abs() @ code_part.double().abs().T) * 2 ** -5 + 1e-30).all()


def computes_what_it_says(got: torch.Tensor, x: torch.Tensor, weights) -> bool:
    """got equals the torch model of the int8 arithmetic (x's int8 codes, exact integer dots, scales in fp32, minima
    from x's exact sums) up to fp32 accumulation and the output's bf16 rounding (much tighter than the bound)."""
    codes, dx = x_in_int8(x)
    code_part, minimum = _code_part_and_minima(weights)
    group = x.shape[1] // minimum.shape[1]
    x_rounded = codes * dx.repeat_interleave(BLOCK, dim=1)
    sums = x.double().view(x.shape[0], -1, group).sum(dim=-1)
    want = x_rounded.double() @ code_part.double().T + sums @ minimum.double().T
    size = x_rounded.double().abs() @ code_part.double().abs().T + sums.abs() @ minimum.double().abs().T
    return bool(((got.double() - want).abs() <= want.abs() * 2 ** -8 + size * 2 ** -20).all())


@pytest.mark.parametrize("qtype", TYPES)
def test_the_int8_path_computes_what_it_says(qtype) -> None:
    """Against a torch model of the arithmetic (x's int8 codes, exact integer dots, scales in fp32, minima from x's
    exact sums): equal up to fp32 accumulation and the output's bf16 rounding (much tighter than the bound)."""
    weights, _ = _blocks(qtype, 40, 1024, seed=int(qtype))
    served_or_skip(weights)
    x = torch.randn(5, 1024, generator=torch.Generator().manual_seed(1)).bfloat16()
    assert computes_what_it_says(kernels.matvec(x, weights.kind, list(weights.parts), weights.group), x, weights)


def test_x_of_zeros_and_of_one_block_s_extremes() -> None:
    """A block of x all zeros (dx = 0) gives zero products; x's largest value maps to 127 exactly."""
    weights, _ = _blocks(T.Q6_K, 16, 256, seed=3)
    x = torch.zeros(2, 256).bfloat16()
    x[1, 40] = -3.0
    got = kernels.matvec(x, weights.kind, list(weights.parts), weights.group).float()
    want = x.float() @ weights.dequantised().T
    assert torch.equal(got[0], torch.zeros(16)) and torch.allclose(got[1], want[1], rtol=2 ** -7, atol=0)


@pytest.mark.parametrize("qtype", TYPES)
def test_int8_x_off_keeps_the_float_products(qtype) -> None:
    """`int8_x=False`: the float kernels, within the output's rounding of x W^T (far inside the int8 bound), on rows
    where x's rounding to int8 would show (x with one large value a block, so that dx is coarse for the rest)."""
    weights, raw = _blocks(qtype, 24, 512, seed=5)
    w = torch.from_numpy(np.asarray(dequantize(raw, qtype), dtype=np.float32))
    x = torch.randn(2, 512, generator=torch.Generator().manual_seed(2))
    x[:, ::BLOCK] = 60.0
    x = x.bfloat16()
    got = kernels.matvec(x, weights.kind, list(weights.parts), weights.group, int8_x=False).double()
    want = x.double() @ w.double().T
    scale = x.double().abs() @ w.double().abs().T
    assert ((got - want).abs() <= scale * 2 ** -16 + want.abs() * 2 ** -8 + 1e-30).all()


def vnni_or_skip() -> None:
    if "int8-dot" not in build.features():
        pytest.skip("blocks_int8 runs integer dot products where the library has AVX-512 VNNI beside BF16")


@pytest.mark.parametrize("qtype", TYPES)
@pytest.mark.parametrize("m", [1, 9, 22, 70])
def test_blocks_int8_takes_every_kind_and_any_rows_within_the_stated_bound(qtype, m) -> None:
    """`blocks_int8` (trees, batches and prefill with VNNI): every kind of blocks on int8 x, Q4_0/Q4_1/Q8_0 and the
    other one-level kinds too, for any number of rows (passes of 8), K = 576 (the bundled model's: a last 64 values
    past whole 128s) for those, within the same bound as the decode kernels'."""
    vnni_or_skip()
    k = 768 if qtype in INT8_TYPES else 576
    weights, raw = _blocks(qtype, 70, k, seed=m)
    w = torch.from_numpy(np.asarray(dequantize(raw, qtype), dtype=np.float32))
    x = torch.randn(m, k, generator=torch.Generator().manual_seed(m)).bfloat16()
    got = kernels.int8(x, weights.kind, list(weights.parts), weights.group)
    assert got.shape == (m, 70) and got.dtype == torch.bfloat16
    assert close_on_int8(got, x, w, weights)
    # on int8 x indeed: the float kernels' answer differs where x's rounding shows
    if m == 22:
        floats = kernels.matvec(x, weights.kind, list(weights.parts), weights.group, int8_x=False)
        assert not torch.equal(got, floats)


@pytest.mark.parametrize("qtype", [T.Q4_0, T.Q4_1, T.Q8_0, T.Q4_K])
def test_blocks_int8_computes_what_it_says_for_many_rows(qtype) -> None:
    """Against the torch model of the arithmetic, for 37 rows (passes of 8 and a last 5) and K with a last 64 values
    (4-bit one-level kinds) or none: much tighter than the bound."""
    vnni_or_skip()
    k = 1280 if qtype == T.Q4_K else 1216
    weights, _ = _blocks(qtype, 33, k, seed=int(qtype))
    x = torch.randn(37, k, generator=torch.Generator().manual_seed(3)).bfloat16()
    assert computes_what_it_says(kernels.int8(x, weights.kind, list(weights.parts), weights.group), x, weights)
