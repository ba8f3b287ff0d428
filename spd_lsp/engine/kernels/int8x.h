// The decode matvec on int8 activations for CPUs with AVX2 but no AVX-512 BF16 (most laptops, AMD Zen 2/3, older
// Intel): blocks.cpp's `blocks_matvec` takes it there for every `Blocks` kind it serves (Q4_0, Q4_1 and Q4_K's 4-bit
// codes, and the 8-bit ones of Q8_0, Q5_0, Q5_1, IQ4_NL, Q5_K, Q6_K and IQ4_XS), where the portable kernel multiplies
// fp32 weights by fp32 x. As llama.cpp's AVX2 `ggml_vec_dot_q4_1_q8_1` / `q8_0_q8_0` compute it: x quantised once a
// call to int8 in blocks of 32 along K (dx = max|x| / 127 a block, codes round(x / dx), half to even), each group's
// codes dotted with x's codes by `vpmaddubsw` (unsigned bytes times signed bytes, adjacent pairs summed into 16 bits:
// at most 2 * 128 * 127, never saturating) and `vpmaddwd` (into 32 bits: exact), then the group's scale times x's
// block scale applied in fp32; each group's minimum times x's exact fp32 sum over the group. The 8-bit codes are
// signed: |q| times x's codes with q's sign (`vpsignb`), as llama.cpp does.
//
// So the result differs from the float products by x's rounding alone: |error| <= sum_k |scale_g q_k| dx_b / 2 (b:
// k's block of 32), plus fp32's rounding (tests/engine/test_blocks_int8.py checks it on the AVX2 build).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "blocks.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__) && \
    !(defined(__AVX512F__) && defined(__AVX512BF16__) && defined(__AVX512BW__) && defined(__AVX512VL__))
#define SPD_AVX2_INT8 1
#include <immintrin.h>

namespace spd_kernels {
namespace int8x {

constexpr int64_t BLOCK = 32;  // x's values a scale
constexpr int64_t ROWS = 4;  // rows of x a pass keeps in registers (more are done in passes of this many)

// x's rows [M, K] quantised: the codes in two orders, each block's scale and each group's exact sum.
struct QuantisedX {
  std::vector<int8_t> natural;  // [M, K]: the 8-bit kernel's order
  std::vector<int8_t> paired;  // [M, K]: per two blocks A, B (64 values): A 0..15, B 0..15, A 16..31, B 16..31, the
                               // order of two 4-bit groups' 32 bytes split into low and high nibbles
  std::vector<float> dx;  // [M, K / 32]
  std::vector<float> sums;  // [M, K / G]: x's fp32 sum over each group of G (the minima's term)
  int64_t K = 0, blocks = 0, groups = 0;
};

// The int8 path serves these blocks: 4-bit codes in whole pairs of groups, 8-bit codes in groups of 16 or 32.
inline bool serves(const Blocks& b) { return b.four_bit() ? b.K % 64 == 0 : b.K % BLOCK == 0; }

inline float horizontal_sum(__m256 v) {
  const __m128 four = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  const __m128 two = _mm_add_ps(four, _mm_movehl_ps(four, four));
  return _mm_cvtss_f32(_mm_add_ss(two, _mm_movehdup_ps(two)));
}

// x [M, K] fp32 into q (groups of G for the sums; `paired` only for 4-bit blocks).
inline void quantise(QuantisedX& q, const float* x, int64_t M, int64_t K, int64_t G, bool paired) {
  q.K = K, q.blocks = K / BLOCK, q.groups = K / G;
  q.natural.resize(M * K);
  q.dx.resize(M * q.blocks);
  q.sums.resize(M * q.groups);
  if (paired) q.paired.resize(M * K);
  const __m256 magnitude = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);  // undoes the packs' lane interleave
  for (int64_t m = 0; m < M; ++m) {
    for (int64_t c = 0; c < q.blocks; ++c) {
      const float* src = x + m * K + c * BLOCK;
      __m256 v[4];
      for (int i = 0; i < 4; ++i) v[i] = _mm256_loadu_ps(src + 8 * i);
      const __m256 top = _mm256_max_ps(_mm256_max_ps(_mm256_and_ps(v[0], magnitude), _mm256_and_ps(v[1], magnitude)),
                                       _mm256_max_ps(_mm256_and_ps(v[2], magnitude), _mm256_and_ps(v[3], magnitude)));
      __m128 t = _mm_max_ps(_mm256_castps256_ps128(top), _mm256_extractf128_ps(top, 1));
      t = _mm_max_ps(t, _mm_movehl_ps(t, t));
      const float amax = _mm_cvtss_f32(_mm_max_ss(t, _mm_movehdup_ps(t)));
      const float inverse = amax > 0.f ? 127.f / amax : 0.f;
      q.dx[m * q.blocks + c] = amax / 127.f;
      const __m256 by = _mm256_set1_ps(inverse);
      __m256i i32[4];
      for (int i = 0; i < 4; ++i) i32[i] = _mm256_cvtps_epi32(_mm256_mul_ps(v[i], by));  // half to even
      const __m256i i16 = _mm256_packs_epi32(i32[0], i32[1]), j16 = _mm256_packs_epi32(i32[2], i32[3]);
      const __m256i codes = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(i16, j16), order);
      int8_t* out = q.natural.data() + m * K + c * BLOCK;
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), codes);
      if (paired) {  // block c is the (c % 2)th of its pair: its low half at 16 (c % 2), its high half 32 on
        int8_t* at = q.paired.data() + m * K + (c / 2) * 64 + (c % 2) * 16;
        std::memcpy(at, out, 16);
        std::memcpy(at + 32, out + 16, 16);
      }
    }
    for (int64_t g = 0; g < q.groups; ++g) {
      float s = 0.f;
      for (int64_t j = 0; j < G; ++j) s += x[m * K + g * G + j];
      q.sums[m * q.groups + g] = s;
    }
  }
}

// Row n's groups' scales and minima as fp32 (d, mn: room for groups() rounded up to 8): the fp16 kinds' converted 8 at
// a time (F16C), the two-level kinds' as `Blocks::widen` makes them.
inline void widen(const Blocks& b, int64_t n, float* d, float* mn) {
  const int64_t groups = b.groups();
  if (b.kind != Kind::Q4 && b.kind != Kind::Q8) {
    b.widen(n, d, mn);
    return;
  }
  const c10::Half* s = b.scales + n * groups;
  const c10::Half* m = b.mins != nullptr ? b.mins + n * groups : nullptr;
  int64_t g = 0;
  for (; g + 8 <= groups; g += 8) {
    _mm256_storeu_ps(d + g, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(s + g))));
    _mm256_storeu_ps(mn + g, m != nullptr ? _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(m + g)))
                                          : _mm256_setzero_ps());
  }
  for (; g < groups; ++g) {
    d[g] = _cvtsh_ss(s[g].x);
    mn[g] = m != nullptr ? _cvtsh_ss(m[g].x) : 0.f;
  }
}

// The minima's term of a row for x's row m: sum over groups of mn[g] * x's group sums.
inline float minima(const QuantisedX& q, int64_t m, const float* mn) {
  const float* xs = q.sums.data() + m * q.groups;
  __m256 acc = _mm256_setzero_ps();
  int64_t g = 0;
  for (; g + 8 <= q.groups; g += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(mn + g), _mm256_loadu_ps(xs + g), acc);
  float total = horizontal_sum(acc);
  for (; g < q.groups; ++g) total += mn[g] * xs[g];
  return total;
}

// The codes of the rows ~PREFETCH_BYTES past rows [n, n + R) on their way into L2 (whole rows: at least the next
// ones), as matvec.h's int8 kernels do.
constexpr int64_t PREFETCH_BYTES = 8192;

template <int R>
inline void prefetch_rows(const void* codes, int64_t row_bytes, int64_t n, int64_t N) {
  const int64_t ahead = n + std::max<int64_t>(R, PREFETCH_BYTES / row_bytes / R * R);
  if (ahead + R > N) return;
  const char* next = static_cast<const char*>(codes) + ahead * row_bytes;
  for (int64_t line = 0; line < R * row_bytes; line += 64) _mm_prefetch(next + line, _MM_HINT_T1);
}

// Two fp32 values from p as [p0 x 4, p1 x 4].
inline __m256 two_spread(__m128 two) {
  return _mm256_permutevar8x32_ps(_mm256_castps128_ps256(two), _mm256_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1));
}

inline __m128 two_at(const float* p) { return _mm_castpd_ps(_mm_load_sd(reinterpret_cast<const double*>(p))); }

using Scales = float[MAX_GROUPS + 8];

// The pass over output rows [n0, n1) both kernels share, R rows at a time: their codes ~8 KB ahead prefetched, their
// scales widened (d: each group's, mn: its minimum), `dots(n, d, acc)` adding their groups' products into the M x R
// accumulators, then the minima's term and the outputs.
template <int M, int R, typename Dots>
void pass(const QuantisedX& q, int64_t m0, const Blocks& b, const void* codes, int64_t row_bytes, int64_t n0,
          int64_t n1, float* out, Dots dots) {
  const bool minimum = b.mins != nullptr || b.sub_min != nullptr;
  alignas(32) Scales d[R], mn[R];
  for (int64_t n = n0; n + R <= n1; n += R) {
    prefetch_rows<R>(codes, row_bytes, n, b.N);
    for (int r = 0; r < R; ++r) widen(b, n + r, d[r], mn[r]);
    __m256 acc[M][R];
    for (int m = 0; m < M; ++m)
      for (int r = 0; r < R; ++r) acc[m][r] = _mm256_setzero_ps();
    dots(n, d, acc);
    for (int m = 0; m < M; ++m)
      for (int r = 0; r < R; ++r)
        out[(m0 + m) * b.N + n + r] = horizontal_sum(acc[m][r]) + (minimum ? minima(q, m0 + m, mn[r]) : 0.f);
  }
}

// Output rows [n0, n1) of 4-bit blocks (Q4_0/Q4_1/Q4_K) for x's rows [m0, m0 + M), R weight rows at a time (their
// chains of products interleaved; x's codes loaded once for them): per two groups (32 bytes of codes), the low and
// high nibbles dotted with x's paired codes, lanes 0..3 group A's, 4..7 group B's, then in fp32 times each group's
// scale and x's block scale.
template <int M, int R>
void four_bit_rows(const QuantisedX& q, int64_t m0, const Blocks& b, int64_t n0, int64_t n1, float* out) {
  const int64_t K = b.K, pairs = K / 64, row_bytes = K / 2;
  const __m256i nibble = _mm256_set1_epi8(0x0F);
  const __m256i ones = _mm256_set1_epi16(1);
  pass<M, R>(q, m0, b, b.codes4, row_bytes, n0, n1, out, [&](int64_t n, const Scales* d, __m256 (*acc)[R]) {
    for (int64_t p = 0; p < pairs; ++p) {
      __m256i lo[R], hi[R];
      __m128 ws[R];
      for (int r = 0; r < R; ++r) {
        const __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.codes4 + (n + r) * row_bytes + p * 32));
        lo[r] = _mm256_and_si256(c, nibble);
        hi[r] = _mm256_and_si256(_mm256_srli_epi16(c, 4), nibble);
        ws[r] = two_at(d[r] + 2 * p);
      }
      for (int m = 0; m < M; ++m) {
        const int8_t* xa = q.paired.data() + (m0 + m) * K + p * 64;
        const __m256i x_lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xa));
        const __m256i x_hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xa + 32));
        const __m128 dx = two_at(q.dx.data() + (m0 + m) * q.blocks + 2 * p);
        for (int r = 0; r < R; ++r) {
          const __m256i pairs16 = _mm256_add_epi16(_mm256_maddubs_epi16(lo[r], x_lo), _mm256_maddubs_epi16(hi[r], x_hi));
          const __m256 dots = _mm256_cvtepi32_ps(_mm256_madd_epi16(pairs16, ones));
          acc[m][r] = _mm256_fmadd_ps(dots, two_spread(_mm_mul_ps(ws[r], dx)), acc[m][r]);
        }
      }
    }
  });
}

// Output rows [n0, n1) of 8-bit blocks (groups of 32: Q8_0, Q5_0, Q5_1, IQ4_NL, Q5_K, IQ4_XS; of 16: Q6_K) for x's
// rows [m0, m0 + M), R weight rows at a time: per 32 codes, |q| dotted with x's codes signed as q is, then in fp32
// times the group's (or the two groups') scale and x's block scale.
template <int M, int R>
void eight_bit_rows(const QuantisedX& q, int64_t m0, const Blocks& b, int64_t n0, int64_t n1, float* out) {
  const int64_t K = b.K;
  const bool sixteen = b.G == 16;
  const __m256i ones = _mm256_set1_epi16(1);
  pass<M, R>(q, m0, b, b.codes8, K, n0, n1, out, [&](int64_t n, const Scales* d, __m256 (*acc)[R]) {
    for (int64_t c = 0; c < q.blocks; ++c) {
      __m256i w[R], magnitude[R];
      __m256 ws[R];
      for (int r = 0; r < R; ++r) {
        w[r] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b.codes8 + (n + r) * K + c * BLOCK));
        magnitude[r] = _mm256_sign_epi8(w[r], w[r]);
        ws[r] = sixteen ? two_spread(two_at(d[r] + 2 * c)) : _mm256_set1_ps(d[r][c]);
      }
      for (int m = 0; m < M; ++m) {
        const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(q.natural.data() + (m0 + m) * K + c * BLOCK));
        const __m256 dx = _mm256_set1_ps(q.dx[(m0 + m) * q.blocks + c]);
        for (int r = 0; r < R; ++r) {
          const __m256i pairs16 = _mm256_maddubs_epi16(magnitude[r], _mm256_sign_epi8(x, w[r]));
          const __m256 dots = _mm256_cvtepi32_ps(_mm256_madd_epi16(pairs16, ones));
          acc[m][r] = _mm256_fmadd_ps(dots, _mm256_mul_ps(ws[r], dx), acc[m][r]);
        }
      }
    }
  });
}

template <int M, int R>
void rows_of(const QuantisedX& q, int64_t m0, const Blocks& b, int64_t n0, int64_t n1, float* out) {
  if (b.four_bit())
    four_bit_rows<M, R>(q, m0, b, n0, n1, out);
  else
    eight_bit_rows<M, R>(q, m0, b, n0, n1, out);
}

// Output rows [n0, n1) for x's rows [m0, m0 + M): two weight rows at a time for one or two rows of x (two independent
// chains), then the odd row left.
template <int M>
void rows_for(const QuantisedX& q, int64_t m0, const Blocks& b, int64_t n0, int64_t n1, float* out) {
  constexpr int R = M <= 2 ? 2 : 1;
  const int64_t whole = n0 + (n1 - n0) / R * R;
  rows_of<M, R>(q, m0, b, n0, whole, out);
  if (whole < n1) rows_of<M, 1>(q, m0, b, whole, n1, out);
}

// out [M, N] fp32 = x W^T for x's quantised rows, output rows [n0, n1).
inline void matvec(const QuantisedX& q, int64_t M, const Blocks& b, int64_t n0, int64_t n1, float* out) {
  for (int64_t m0 = 0; m0 < M; m0 += ROWS) {
    switch (std::min<int64_t>(M - m0, ROWS)) {
      case 1: rows_for<1>(q, m0, b, n0, n1, out); break;
      case 2: rows_for<2>(q, m0, b, n0, n1, out); break;
      case 3: rows_for<3>(q, m0, b, n0, n1, out); break;
      default: rows_for<4>(q, m0, b, n0, n1, out); break;
    }
  }
}

}  // namespace int8x
}  // namespace spd_kernels

#endif  // SPD_AVX2_INT8
