// Weights held as the GGUF's blocks (blocks.h), on any CPU the library builds for (portable C++ the compiler
// vectorises, and at::vec for the dot products):
//   spd::blocks_dequantize(kind, parts, group, rows?) -> fp32 [R, K]: the rows' weights (all rows, or those `rows`
//     names: an embedding's lookup);
//   spd::blocks_matvec(x, kind, parts, group, int8_x=True) -> [M, N]: x [M, K] (bf16 or fp32) @ W.T for a few rows:
//     a group's codes dotted with x in registers, then its scale and minimum applied (the decode tier where no kernel
//     of the layout's own serves: every CPU without AVX-512 BF16). With AVX2 (no AVX-512 BF16) x is quantised to int8
//     and the dots are integer ones (int8x.h; the K-quants likewise with AVX-512 VNNI: matvec.h); int8_x=False keeps
//     fp32 x (float products: the exact numbers, and the reference the benches compare with);
//   spd::blocks_int8(x, kind, parts, group) -> [M, N]: any number of rows on integer dot products (x quantised to int8
//     once a call, matvec.h), every kind of blocks, where the CPU has AVX-512 VNNI beside BF16 (the layers' trees and
//     batches there); elsewhere `blocks_matvec`;
//   spd::blocks_linear(x, kind, parts, group) -> [M, N]: the same for many rows: W dequantised a tile of rows at a time
//     into the activations' dtype and multiplied by ATen's matmul (oneDNN), so no float copy of W is ever kept (the
//     batch and prefill tiers).
#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>
#include <ATen/cpu/vec/functional.h>
#include <ATen/cpu/vec/vec.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/mm.h>
#include <torch/library.h>

#include <algorithm>
#include <vector>

#include "blocks.h"
#include "int8x.h"
#include "matvec.h"

namespace spd_kernels {

namespace {

template <typename T>
const T* data_of(const at::Tensor& t, at::ScalarType type, int64_t numel, const char* what, const char* part) {
  TORCH_CHECK(t.scalar_type() == type && t.is_contiguous() && t.device().is_cpu() && t.numel() == numel, what, ": ",
              part, " a contiguous CPU tensor of ", numel, " ", c10::toString(type), ", not ", t.scalar_type(), " ",
              t.sizes());
  return t.const_data_ptr<T>();
}

}  // namespace

Blocks blocks_of(const std::string& kind, at::TensorList parts, int64_t group, const char* what) {
  Blocks b;
  TORCH_CHECK(kind == "q4" || kind == "q4k" || kind == "q8" || kind == "q8k", what, ": kind q4, q4k, q8 or q8k, not ",
              kind);
  TORCH_CHECK(!parts.empty() && parts[0].dim() == 2, what, ": the codes first, [N, K / 2] or [N, K]");
  b.N = parts[0].size(0);
  const bool four = kind == "q4" || kind == "q4k";
  b.K = four ? parts[0].size(1) * 2 : parts[0].size(1);
  b.G = four ? 32 : group;
  TORCH_CHECK(b.G == 16 || b.G == 32, what, ": groups of 16 or 32, not ", b.G);
  TORCH_CHECK(b.K % b.G == 0 && b.K / b.G <= MAX_GROUPS, what, ": K = ", b.K, " is not whole groups of ", b.G,
              " (at most ", MAX_GROUPS, ")");
  const int64_t ng = b.N * (b.K / b.G);
  if (four)
    b.codes4 = data_of<uint8_t>(parts[0], at::kByte, b.N * b.K / 2, what, "codes");
  else
    b.codes8 = data_of<int8_t>(parts[0], at::kChar, b.N * b.K, what, "codes");
  if (kind == "q4" || kind == "q8") {
    b.kind = four ? Kind::Q4 : Kind::Q8;
    TORCH_CHECK(parts.size() == 2 || parts.size() == 3, what, ": ", kind, " takes codes, scales[, mins]");
    b.scales = data_of<c10::Half>(parts[1], at::kHalf, ng, what, "scales");
    if (parts.size() == 3 && parts[2].numel() > 0) b.mins = data_of<c10::Half>(parts[2], at::kHalf, ng, what, "mins");
    TORCH_CHECK(kind != "q4" || b.mins != nullptr, what, ": q4 takes mins");
    return b;
  }
  b.kind = four ? Kind::Q4K : Kind::Q8K;
  TORCH_CHECK(b.K % SUPER == 0, what, ": K = ", b.K, " is not whole super-blocks of ", SUPER);
  TORCH_CHECK(parts.size() == 3 || parts.size() == 5, what, ": ", kind, " takes codes, sub-scales, d[, sub-mins, dmin]");
  if (parts[1].scalar_type() == at::kChar)
    b.sub_i8 = data_of<int8_t>(parts[1], at::kChar, ng, what, "sub-scales");
  else
    b.sub_u8 = data_of<uint8_t>(parts[1], at::kByte, ng, what, "sub-scales");
  b.d = data_of<c10::Half>(parts[2], at::kHalf, b.N * (b.K / SUPER), what, "d");
  if (parts.size() == 5) {
    b.sub_min = data_of<uint8_t>(parts[3], at::kByte, ng, what, "sub-mins");
    b.dmin = data_of<c10::Half>(parts[4], at::kHalf, b.N * (b.K / SUPER), what, "dmin");
  }
  TORCH_CHECK(kind != "q4k" || b.sub_min != nullptr, what, ": q4k takes sub-mins and dmin");
  return b;
}

namespace {

// The fewest output rows a thread takes: ~32 KB of weights (a small projection is not split finer than that costs).
int64_t grain(const Blocks& b) { return std::max<int64_t>(1, (1 << 15) / std::max<int64_t>(1, b.row_bytes())); }

at::Tensor dequantize(const std::string& kind, at::TensorList parts, int64_t group, const c10::optional<at::Tensor>& rows) {
  const Blocks b = blocks_of(kind, parts, group, "blocks_dequantize");
  at::Tensor picked;
  if (rows) {
    picked = rows->to(at::kLong).contiguous();
    const int64_t* r = picked.const_data_ptr<int64_t>();
    for (int64_t i = 0; i < picked.numel(); ++i)
      TORCH_CHECK(r[i] >= 0 && r[i] < b.N, "blocks_dequantize: row ", r[i], " outside 0..", b.N - 1);
  }
  const int64_t R = rows ? picked.numel() : b.N;
  at::Tensor out = at::empty({R, b.K}, parts[0].options().dtype(at::kFloat));
  float* o = out.mutable_data_ptr<float>();
  const int64_t* r = rows ? picked.const_data_ptr<int64_t>() : nullptr;
  at::parallel_for(0, R, grain(b), [&](int64_t i0, int64_t i1) {
    std::vector<float> s(b.groups()), m(b.groups());
    for (int64_t i = i0; i < i1; ++i) b.row(r != nullptr ? r[i] : i, o + i * b.K, s.data(), m.data());
  });
  return out;
}

void check_x(const at::Tensor& x, int64_t K, const char* op) {
  TORCH_CHECK(x.dim() == 2 && x.size(1) == K && x.device().is_cpu() &&
                  (x.scalar_type() == at::kBFloat16 || x.scalar_type() == at::kFloat),
              op, ": x [M, ", K, "] bf16 or fp32 on the CPU, not ", x.scalar_type(), " ", x.sizes());
}

constexpr int64_t ROWS = 8;  // rows of x a pass over the weights takes (their accumulators stay in registers)

// out[r, n] for rows [n0, n1) of b and rows [r0, r0 + R) of xf (R <= ROWS): per group, its codes widened to fp32 once
// and scaled, fused-multiply-added into one vector accumulator a row of x (at::vec: AVX2, AVX-512, NEON), its minimum
// times the group's sum of x (xs [M, groups]) into a scalar; one horizontal sum a row at the end. No row of fp32
// weights is written. s, m: room for groups().
template <int R>
void matvec_pass(const Blocks& b, const float* xf, const float* xs, int64_t r0, int64_t n0, int64_t n1, float* s,
                 float* m, float* out, int64_t N) {
  using Vec = at::vec::Vectorized<float>;
  constexpr int V = Vec::size();
  const int64_t K = b.K, ng = b.groups(), G = b.G;
  constexpr int A = R == 1 ? std::max(1, 32 / V) : 1;  // accumulators a row: one x row alone needs several in flight
  alignas(64) float w[32];
  for (int64_t n = n0; n < n1; ++n) {
    b.widen(n, s, m);
    Vec acc[R * A];
    float low[R];
    for (int r = 0; r < R; ++r) low[r] = 0.f;
    for (int i = 0; i < R * A; ++i) acc[i] = Vec(0.f);
    for (int64_t g = 0; g < ng; ++g) {
      if (b.four_bit())
        codes_q4(b.codes4 + n * (K / 2) + g * 16, w);
      else if (G == 32)
        codes_q8<32>(b.codes8 + n * K + g * 32, w);
      else
        codes_q8<16>(b.codes8 + n * K + g * 16, w);
      const Vec sg(s[g]);
      for (int64_t v = 0; v < G; v += V) {
        const Vec wv = Vec::loadu(w + v) * sg;
        const int64_t a = (v / V) % A;
        for (int r = 0; r < R; ++r)
          acc[r * A + a] = at::vec::fmadd(wv, Vec::loadu(xf + (r0 + r) * K + g * G + v), acc[r * A + a]);
      }
      for (int r = 0; r < R; ++r) low[r] += m[g] * xs[(r0 + r) * ng + g];
    }
    for (int r = 0; r < R; ++r) {
      Vec total = acc[r * A];
      for (int a = 1; a < A; ++a) total = total + acc[r * A + a];
      out[(r0 + r) * N + n] = at::vec::vec_reduce_all<float>([](const Vec& x, const Vec& y) { return x + y; }, total)
                              + low[r];
    }
  }
}

void matvec_rows(const Blocks& b, const float* xf, const float* xs, int64_t M, int64_t n0, int64_t n1, float* s,
                 float* m, float* out, int64_t N) {
  for (int64_t r0 = 0; r0 < M; r0 += ROWS) {
    switch (std::min<int64_t>(M - r0, ROWS)) {
      case 1: matvec_pass<1>(b, xf, xs, r0, n0, n1, s, m, out, N); break;
      case 2: matvec_pass<2>(b, xf, xs, r0, n0, n1, s, m, out, N); break;
      case 3: matvec_pass<3>(b, xf, xs, r0, n0, n1, s, m, out, N); break;
      case 4: matvec_pass<4>(b, xf, xs, r0, n0, n1, s, m, out, N); break;
      case 5: matvec_pass<5>(b, xf, xs, r0, n0, n1, s, m, out, N); break;
      case 6: matvec_pass<6>(b, xf, xs, r0, n0, n1, s, m, out, N); break;
      case 7: matvec_pass<7>(b, xf, xs, r0, n0, n1, s, m, out, N); break;
      default: matvec_pass<8>(b, xf, xs, r0, n0, n1, s, m, out, N); break;
    }
  }
}

#ifdef SPD_INT8_DOT
// Output rows of W a thread's passes over x's rows keep in L2 (~256 KB of codes): every pass of MAX_ROWS rows of x
// reads them again (a 1.7B model's projections are 8 MB a thread; not measured apart from the rest of the change).
int64_t rows_in_l2(const Blocks& b) { return std::max<int64_t>(1, (1 << 18) / std::max<int64_t>(1, b.row_bytes())); }

// out [M, N] = x @ W.T on integer dot products (matvec.h: x quantised to int8 once a call), where
// `int8_dot_serves_any(b)`.
void on_int8_dots(const at::Tensor& x, const Blocks& b, c10::BFloat16* o) {
  const int64_t M = x.size(0);
  QuantisedX q;
  quantise_into(q, x.const_data_ptr<c10::BFloat16>(), M, b.K, /*nibble=*/b.four_bit(), /*natural=*/!b.four_bit());
  const int64_t chunk = rows_in_l2(b);
  at::parallel_for(0, b.N, grain(b), [&](int64_t n0, int64_t n1) {
    for (int64_t c0 = n0; c0 < n1; c0 += chunk) in_passes<Int8Dots>(M, q, b, c0, std::min(n1, c0 + chunk), o, b.N);
  });
}
#endif

#ifdef SPD_MATVEC
// The tuned kernels (AVX-512 BF16): 4-bit blocks on matvec.h's int4 rows (dot products of bf16 x and codes), 8-bit
// ones on its 8-bit group rows (fp32 x). Their weights are the blocks' own numbers, as the portable path's.
at::Tensor tuned(const at::Tensor& x, const Blocks& b, bool int8_x) {
  const int64_t M = x.size(0);
  at::Tensor out = at::empty({M, b.N}, x.options());
  if (M == 0 || b.N == 0) return out;
  c10::BFloat16* o = out.mutable_data_ptr<c10::BFloat16>();
#ifdef SPD_INT8_DOT
  if (int8_x && int8_dot_serves(b)) {  // the K-quants: x quantised to int8 once, integer dot products (matvec.h)
    on_int8_dots(x, b, o);
    return out;
  }
#endif
  if (b.four_bit()) {
    const Activations a = arrange(x.const_data_ptr<c10::BFloat16>(), M, b.K);
    const BlockScales scales{&b};
    at::parallel_for(0, b.N, grain(b), [&](int64_t n0, int64_t n1) {
      in_passes<Int4>(M, a, b.codes4, scales, b.K, b.N, n0, n1, o);
    });
    return out;
  }
  const int64_t groups = b.groups();
  std::vector<float> xf(M * b.K), xs(M * groups, 0.f);
  const c10::BFloat16* xp = x.const_data_ptr<c10::BFloat16>();
  for (int64_t i = 0; i < M * b.K; ++i) xf[i] = static_cast<float>(xp[i]);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t k = 0; k < b.K; ++k) xs[m * groups + k / b.G] += xf[m * b.K + k];
  at::parallel_for(0, b.N, grain(b), [&](int64_t n0, int64_t n1) {
    for (int64_t m0 = 0; m0 < M; m0 += MAX_ROWS) {
      const float* xm = xf.data();
      switch (std::min<int64_t>(M - m0, MAX_ROWS)) {
        case 1: Q8Block<1>::run(m0, xm, xs.data(), b, n0, n1, o, b.N); break;
        case 2: Q8Block<2>::run(m0, xm, xs.data(), b, n0, n1, o, b.N); break;
        case 3: Q8Block<3>::run(m0, xm, xs.data(), b, n0, n1, o, b.N); break;
        case 4: Q8Block<4>::run(m0, xm, xs.data(), b, n0, n1, o, b.N); break;
        case 5: Q8Block<5>::run(m0, xm, xs.data(), b, n0, n1, o, b.N); break;
        case 6: Q8Block<6>::run(m0, xm, xs.data(), b, n0, n1, o, b.N); break;
        case 7: Q8Block<7>::run(m0, xm, xs.data(), b, n0, n1, o, b.N); break;
        default: Q8Block<8>::run(m0, xm, xs.data(), b, n0, n1, o, b.N); break;
      }
    }
  });
  return out;
}
#endif

#ifdef SPD_AVX2_INT8
// x quantised to int8 once, then the rows' integer dot products (int8x.h).
void on_int8(const at::Tensor& xf, const Blocks& b, at::Tensor& out) {
  int8x::QuantisedX q;
  const int64_t M = xf.size(0);
  int8x::quantise(q, xf.const_data_ptr<float>(), M, b.K, b.G, /*paired=*/b.four_bit());
  float* o = out.mutable_data_ptr<float>();
  at::parallel_for(0, b.N, grain(b), [&](int64_t n0, int64_t n1) { int8x::matvec(q, M, b, n0, n1, o); });
}
#endif

at::Tensor matvec(const at::Tensor& x, const std::string& kind, at::TensorList parts, int64_t group, bool int8_x) {
  const Blocks b = blocks_of(kind, parts, group, "blocks_matvec");
  check_x(x, b.K, "blocks_matvec");
#ifdef SPD_MATVEC
  if (x.scalar_type() == at::kBFloat16 && x.is_contiguous() && (!b.four_bit() || b.K % 64 == 0))
    return tuned(x, b, int8_x);
#endif
  const int64_t M = x.size(0);
  const at::Tensor xf = x.to(at::kFloat).contiguous();
  at::Tensor out = at::empty({M, b.N}, x.options().dtype(at::kFloat));
#ifdef SPD_AVX2_INT8
  if (int8_x && int8x::serves(b)) {
    if (M > 0 && b.N > 0) on_int8(xf, b, out);
    return x.scalar_type() == at::kFloat ? out : out.to(x.scalar_type());
  }
#endif
  if (M > 0 && b.N > 0) {
    const float* xp = xf.const_data_ptr<float>();
    const int64_t ng = b.groups();
    std::vector<float> xs(M * ng, 0.f);  // each group's sum of x: the minima's term
    for (int64_t r = 0; r < M; ++r)
      for (int64_t k = 0; k < b.K; ++k) xs[r * ng + k / b.G] += xp[r * b.K + k];
    float* o = out.mutable_data_ptr<float>();
    at::parallel_for(0, b.N, grain(b), [&](int64_t n0, int64_t n1) {
      alignas(64) float s[MAX_GROUPS], m[MAX_GROUPS];
      matvec_rows(b, xp, xs.data(), M, n0, n1, s, m, o, b.N);
    });
  }
  return x.scalar_type() == at::kFloat ? out : out.to(x.scalar_type());
}

// x @ W.T on integer dot products for any number of rows, where the library has them for the blocks (AVX-512 VNNI
// beside BF16: `int8_dot_serves_any`); elsewhere `matvec`'s kernels.
at::Tensor int8_linear(const at::Tensor& x, const std::string& kind, at::TensorList parts, int64_t group) {
#ifdef SPD_INT8_DOT
  const Blocks b = blocks_of(kind, parts, group, "blocks_int8");
  check_x(x, b.K, "blocks_int8");
  if (x.scalar_type() == at::kBFloat16 && x.is_contiguous() && int8_dot_serves_any(b)) {
    at::Tensor out = at::empty({x.size(0), b.N}, x.options());
    if (x.size(0) > 0 && b.N > 0) on_int8_dots(x, b, out.mutable_data_ptr<c10::BFloat16>());
    return out;
  }
#endif
  return matvec(x, kind, parts, group, /*int8_x=*/true);
}

// Rows of W a thread dequantises into its own tile before each matmul (which runs on that thread alone): ~512K weights
// (2 MB in fp32; at 128K the bundled model's layers took ~6 % longer at 512 rows).
int64_t tile_rows(int64_t K) { return std::max<int64_t>(16, std::min<int64_t>(1024, (1 << 19) / K)); }

// The tiles' matmuls run in fp32 (the blocks' exact numbers, x's bf16 ones) but where AMX's bf16 matmuls serve: on a
// CPU without AMX oneDNN's fp32 matmul outran its bf16 one (measured on an Intel Xeon without AMX only:
// docs/performance.md).
#if defined(__AMX_TILE__)
constexpr bool FP32_TILES = false;
#else
constexpr bool FP32_TILES = true;
#endif

at::Tensor linear(const at::Tensor& x, const std::string& kind, at::TensorList parts, int64_t group) {
  const Blocks b = blocks_of(kind, parts, group, "blocks_linear");
  check_x(x, b.K, "blocks_linear");
  const int64_t M = x.size(0), T = tile_rows(b.K);
  const bool bf16 = x.scalar_type() == at::kBFloat16 && !FP32_TILES;  // the tiles' dtype
  const at::TensorOptions options = x.options().dtype(bf16 ? at::kBFloat16 : at::kFloat);
  at::Tensor out = at::empty({M, b.N}, options);  // x W^T, a tile's columns at a time
  if (M == 0 || b.N == 0) return out.to(x.scalar_type());
  const at::Tensor xs = x.to(options.dtype()).contiguous();
  // Each thread its own rows of W, a tile at a time: dequantised, then multiplied by ATen's matmul (single-threaded
  // inside a parallel region) into its columns of the output, so no tile crosses cores and no barrier parts a tile's
  // two steps. The caller's inference mode holds in every thread (its output is written there).
  const bool inference = c10::InferenceMode::is_enabled();
  at::parallel_for(0, b.N, T, [&](int64_t n0, int64_t n1) {
    c10::InferenceMode mode(inference);
    at::Tensor tile = at::empty({T, b.K}, options);
    std::vector<float> w(b.K), s(b.groups()), m(b.groups());
    for (int64_t t0 = n0; t0 < n1; t0 += T) {
      const int64_t rows = std::min(T, n1 - t0);
      for (int64_t i = 0; i < rows; ++i) {
        if (!bf16) {
          b.row(t0 + i, tile.mutable_data_ptr<float>() + i * b.K, s.data(), m.data());
          continue;
        }
#ifdef SPD_MATVEC
        alignas(64) float sa[MAX_GROUPS], ma[MAX_GROUPS];
        dequantise_row_bf16(b, t0 + i, sa, ma, tile.mutable_data_ptr<c10::BFloat16>() + i * b.K);
#else
        b.row(t0 + i, w.data(), s.data(), m.data());
        at::vec::convert(w.data(), tile.mutable_data_ptr<c10::BFloat16>() + i * b.K, b.K);
#endif
      }
      at::Tensor part = out.narrow(1, t0, rows);
      at::mm_out(part, xs, tile.narrow(0, 0, rows).t());
    }
  });
  return out.to(x.scalar_type());
}

}  // namespace

}  // namespace spd_kernels

TORCH_LIBRARY_FRAGMENT(spd, m) {
  m.def("blocks_dequantize(str kind, Tensor[] parts, int group, Tensor? rows=None) -> Tensor");
  m.def("blocks_matvec(Tensor x, str kind, Tensor[] parts, int group, bool int8_x=True) -> Tensor");
  m.def("blocks_linear(Tensor x, str kind, Tensor[] parts, int group) -> Tensor");
  m.def("blocks_int8(Tensor x, str kind, Tensor[] parts, int group) -> Tensor");
}

TORCH_LIBRARY_IMPL(spd, CPU, m) {
  m.impl("blocks_dequantize", &spd_kernels::dequantize);
  m.impl("blocks_matvec", &spd_kernels::matvec);
  m.impl("blocks_linear", &spd_kernels::linear);
  m.impl("blocks_int8", &spd_kernels::int8_linear);
}
