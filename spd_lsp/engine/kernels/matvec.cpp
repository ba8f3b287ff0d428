// The decode step's weight-only matmuls on the CPU, for a few rows of activations (a decode step's 1 to 8):
//   spd::int4_matvec(x, codes, scales, mins): x [M, K] bf16 @ W.T, W [N, K] as Q4_1 blocks of 32 along K
//     (codes [N, K / 2] uint8: byte j of a block holds element j in its low nibble, element j + 16 in its high one,
//     the GGUF's own order; scales, mins [N, K / 32] fp16; w = scale * q + min, the GGUF's own numbers);
//   spd::int8_matvec(x, codes, scales): x [M, K] bf16 @ W.T, W [N, K] as int8 rows with a scale each (fast/layouts/blocks.py: Int8Rows);
//   spd::q8_matvec(x, codes, scales): x [M, K] bf16 @ W.T, W [N, K] as the GGUF's Q8_0 blocks (codes [N, K] int8,
//     scales [N, K / 32] fp16; w = scale * q: the model's own numbers, q8.py).
// Out [M, N] bf16, accumulated in fp32.
//
// Why: ATen's `_weight_int4pack_mm_for_cpu` read the bundled model's 30 layers at ~13.6 GB/s (4.9 ms a step) and
// `_weight_int8pack_mm` the 28 MB head at ~9 GB/s (3.0 ms) on a machine that reads ~25 GB/s (matvec.py).
//
// int4: two blocks (64 weights, 32 bytes) at a time. Their bytes widen to 16 bits and each nibble becomes the bf16
// number 128 + q by OR-ing it into 0x4300 (128.0: its 7 mantissa bits count 1 each), so that one AVX-512 BF16
// dot product (vdpbf16ps) multiplies 32 of them by 32 activations exactly, summing in fp32. The 128 * sum(x) this
// adds is taken off with the min's term: sum_k x_k w_k = sum_blocks scale * dot(x, 128 + q) + (min - 128 * scale) *
// sum(x of the block). Built only where the CPU has AVX-512 BF16 (build.py); elsewhere ATen's kernels serve.
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>
#include <torch/library.h>

#include <cstring>
#include <vector>

#include "matvec.h"

namespace {

using namespace spd_kernels;


// The fewest output rows a thread takes (at::parallel_for splits N evenly over min(threads, N / grain) threads):
// ~32 KB of weights, so that a small projection is not split finer than handing it out costs.
int64_t grain(int64_t bytes_per_row) { return std::max<int64_t>(1, (1 << 15) / std::max<int64_t>(1, bytes_per_row)); }

void check_x(const at::Tensor& x, int64_t K, const char* op) {
  TORCH_CHECK(x.dim() == 2 && x.size(1) == K, op, ": x [M, ", K, "], not ", x.sizes());
  TORCH_CHECK(x.scalar_type() == at::kBFloat16 && x.is_contiguous() && x.device().is_cpu(), op,
              ": x a contiguous bf16 CPU tensor");
}

at::Tensor int4_matvec(const at::Tensor& x, const at::Tensor& codes, const at::Tensor& scales, const at::Tensor& mins) {
#ifdef SPD_MATVEC
  const int64_t N = codes.size(0), K = codes.size(1) * 2;
  check_x(x, K, "int4_matvec");
  TORCH_CHECK(codes.scalar_type() == at::kByte && codes.is_contiguous(), "int4_matvec: codes [N, K / 2] uint8");
  TORCH_CHECK(K % (2 * BLOCK) == 0 && K / BLOCK <= 512, "int4_matvec: K a multiple of 64 up to 16,384, not ", K);
  TORCH_CHECK(scales.scalar_type() == at::kHalf && mins.scalar_type() == at::kHalf && scales.is_contiguous() &&
                  mins.is_contiguous() && scales.numel() == N * (K / BLOCK) && mins.numel() == N * (K / BLOCK),
              "int4_matvec: scales and mins [N, K / 32] fp16");
  const int64_t M = x.size(0);
  at::Tensor out = at::empty({M, N}, x.options());
  if (M == 0 || N == 0) return out;
  const Activations a = arrange(x.data_ptr<c10::BFloat16>(), M, K);
  const uint8_t* c = codes.data_ptr<uint8_t>();
  const c10::Half* s = scales.data_ptr<c10::Half>();
  const c10::Half* z = mins.data_ptr<c10::Half>();
  c10::BFloat16* o = out.data_ptr<c10::BFloat16>();
  at::parallel_for(0, N, grain(K / 2), [&](int64_t n0, int64_t n1) {
    in_passes<Int4>(M, a, c, HalfScales{s, z}, K, N, n0, n1, o);
  });
  return out;
#else
  TORCH_CHECK(false, "int4_matvec: built without AVX-512 BF16");
#endif
}

#ifdef SPD_MATVEC
// out [M, N] = x [M, K] @ W.T for W [N, K] as int8 codes with `scales` (a row's: Int8; a block's: Q8), x read as fp32.
template <template <int> class Rows, typename Scale>
at::Tensor int8_codes(const at::Tensor& x, const at::Tensor& codes, const Scale* scales) {
  const int64_t M = x.size(0), N = codes.size(0), K = codes.size(1);
  at::Tensor out = at::empty({M, N}, x.options());
  if (M == 0 || N == 0) return out;
  std::vector<float> xf(M * K);
  const c10::BFloat16* xp = x.data_ptr<c10::BFloat16>();
  for (int64_t i = 0; i < M * K; ++i) xf[i] = static_cast<float>(xp[i]);
  const int8_t* c = codes.data_ptr<int8_t>();
  c10::BFloat16* o = out.data_ptr<c10::BFloat16>();
  at::parallel_for(0, N, grain(K), [&](int64_t n0, int64_t n1) {
    in_passes<Rows>(M, xf.data(), c, scales, K, N, n0, n1, o);
  });
  return out;
}
#endif

at::Tensor int8_matvec(const at::Tensor& x, const at::Tensor& codes, const at::Tensor& scales) {
#ifdef SPD_MATVEC
  const int64_t N = codes.size(0), K = codes.size(1);
  check_x(x, K, "int8_matvec");
  TORCH_CHECK(codes.scalar_type() == at::kChar && codes.is_contiguous() && K % 16 == 0,
              "int8_matvec: codes [N, K] int8, K a multiple of 16");
  TORCH_CHECK(scales.scalar_type() == at::kBFloat16 && scales.numel() == N && scales.is_contiguous(),
              "int8_matvec: scales [N] bf16");
  return int8_codes<Int8>(x, codes, scales.data_ptr<c10::BFloat16>());
#else
  TORCH_CHECK(false, "int8_matvec: built without AVX-512 BF16");
#endif
}

at::Tensor q8_matvec(const at::Tensor& x, const at::Tensor& codes, const at::Tensor& scales) {
#ifdef SPD_MATVEC
  const int64_t N = codes.size(0), K = codes.size(1);
  check_x(x, K, "q8_matvec");
  TORCH_CHECK(codes.scalar_type() == at::kChar && codes.dim() == 2 && codes.is_contiguous() && K % BLOCK == 0 &&
                  K / BLOCK <= 512,
              "q8_matvec: codes [N, K] int8, K a multiple of 32 up to 16,384");
  TORCH_CHECK(scales.scalar_type() == at::kHalf && scales.numel() == N * (K / BLOCK) && scales.is_contiguous(),
              "q8_matvec: scales [N, K / 32] fp16");
  return int8_codes<Q8>(x, codes, scales.data_ptr<c10::Half>());
#else
  TORCH_CHECK(false, "q8_matvec: built without AVX-512 BF16");
#endif
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(spd, m) {
  m.def("int4_matvec(Tensor x, Tensor codes, Tensor scales, Tensor mins) -> Tensor");
  m.def("int8_matvec(Tensor x, Tensor codes, Tensor scales) -> Tensor");
  m.def("q8_matvec(Tensor x, Tensor codes, Tensor scales) -> Tensor");
}

TORCH_LIBRARY_IMPL(spd, CPU, m) {
  m.impl("int4_matvec", &int4_matvec);
  m.impl("int8_matvec", &int8_matvec);
  m.impl("q8_matvec", &q8_matvec);
}
