// The decode step's int4, int8 and Q8_0 row kernels (matvec.cpp's ops and step.cpp's fused step share them): see
// matvec.cpp for the layouts and the arithmetic.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "blocks.h"

#if defined(__AVX512F__) && defined(__AVX512BF16__) && defined(__AVX512BW__) && defined(__AVX512VL__)
#define SPD_MATVEC 1
#include <immintrin.h>
#endif

namespace spd_kernels {

constexpr int64_t BLOCK = 32;
constexpr int64_t MAX_ROWS = 8;  // rows of x a pass keeps in registers (more are done in passes of this many)
constexpr int64_t AHEAD = 8;  // output rows ahead whose weights a one-row pass prefetches


inline float bf16_to_float(c10::BFloat16 v) { return static_cast<float>(v); }

// x's rows laid out as the int4 loop reads them: per pair of blocks p, `lo` holds elements 0..15 of both blocks and
// `hi` elements 16..31 (bf16), matching the widened bytes; `sums` the blocks' sums of x, padded to 16 with zeros.
struct Activations {
  std::vector<c10::BFloat16> lo, hi;
  std::vector<float> sums;
  int64_t pairs, groups_padded;
};

// x's rows [rows, K] into `a`, reusing its buffers (a step arranges each layer's inputs into the same ones).
inline void arrange_into(Activations& a, const c10::BFloat16* x, int64_t rows, int64_t K) {
  a.pairs = K / (2 * BLOCK);
  const int64_t groups = K / BLOCK;
  a.groups_padded = (groups + 15) / 16 * 16;
  a.lo.resize(rows * a.pairs * 32);
  a.hi.resize(rows * a.pairs * 32);
  a.sums.assign(rows * a.groups_padded, 0.f);
  for (int64_t m = 0; m < rows; ++m) {
    const c10::BFloat16* row = x + m * K;
    for (int64_t p = 0; p < a.pairs; ++p) {
      c10::BFloat16* lo = a.lo.data() + (m * a.pairs + p) * 32;
      c10::BFloat16* hi = a.hi.data() + (m * a.pairs + p) * 32;
      for (int64_t half = 0; half < 2; ++half) {
        const c10::BFloat16* block = row + (2 * p + half) * BLOCK;
        std::memcpy(lo + half * 16, block, 16 * sizeof(c10::BFloat16));
        std::memcpy(hi + half * 16, block + 16, 16 * sizeof(c10::BFloat16));
      }
    }
    for (int64_t g = 0; g < groups; ++g) {
      float s = 0.f;
      for (int64_t j = 0; j < BLOCK; ++j) s += bf16_to_float(row[g * BLOCK + j]);
      a.sums[m * a.groups_padded + g] = s;
    }
  }
}

inline Activations arrange(const c10::BFloat16* x, int64_t rows, int64_t K) {
  Activations a;
  arrange_into(a, x, rows, K);
  return a;
}

#ifdef SPD_MATVEC

// The live lanes of 16 groups from g on, of `groups` (all 16 but at the end).
inline __mmask16 groups_from(int64_t g, int64_t groups) {
  return groups - g >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << (groups - g)) - 1);
}

// One output row's `groups` fp16 scales as fp32 into d (64-byte aligned, room for whole zmm).
inline void widen_scales(const c10::Half* ds, int64_t groups, float* d) {
  for (int64_t g = 0; g < groups; g += 16)
    _mm512_store_ps(d + g, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(groups_from(g, groups), ds + g)));
}

// A row's scales and minima for the int4 kernels, widened to fp32 arrays (64-byte aligned, room for whole zmm):
// `HalfScales`, the GGUF's Q4_0/Q4_1 fp16 ones; `BlockScales`, any 4-bit `Blocks` (Q4_K's two levels).
struct HalfScales {
  const c10::Half* scales;
  const c10::Half* mins;
  void widen(int64_t n, int64_t groups, float* d, float* mn) const {
    widen_scales(scales + n * groups, groups, d);
    widen_scales(mins + n * groups, groups, mn);
  }
  const void* ahead(int64_t n, int64_t groups) const { return scales + n * groups; }
};

// The super-scales of 16 consecutive groups from group g (fp16, a super-scale for each `per_super` groups: 8 or 16).
inline __m512 supers_of(const c10::Half* d, int64_t g, int64_t per_super, int64_t supers) {
  const int64_t u = g / per_super;
  if (per_super == 16) return _mm512_set1_ps(static_cast<float>(d[u]));
  const __mmask8 live = supers - u >= 2 ? 0x3 : 0x1;
  const __m128 two = _mm_cvtph_ps(_mm_maskz_loadu_epi16(live, d + u));
  const __m512i index = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
  return _mm512_permutexvar_ps(index, _mm512_castps128_ps512(two));
}

// 16 8-bit values from p (those of `live`) as fp32.
inline __m512 bytes_as_floats(const void* p, __mmask16 live, bool is_signed) {
  const __m128i bytes = _mm_maskz_loadu_epi8(live, p);
  return _mm512_cvtepi32_ps(is_signed ? _mm512_cvtepi8_epi32(bytes) : _mm512_cvtepu8_epi32(bytes));
}

// Any `Blocks`' row n widened, 16 groups at a time: the fp16 kinds' scales and minima converted, the two-level ones'
// sub-scales and sub-minima times their super-scales (the same fp32 products as `Blocks::widen`).
inline void widen_row(const Blocks& b, int64_t n, float* d, float* mn) {
  const int64_t groups = b.groups();
  if (b.kind == Kind::Q4 || b.kind == Kind::Q8) {
    widen_scales(b.scales + n * groups, groups, d);
    if (b.mins != nullptr)
      widen_scales(b.mins + n * groups, groups, mn);
    else
      std::fill(mn, mn + groups, 0.f);
    return;
  }
  const int64_t per_super = SUPER / b.G, supers = b.K / SUPER;
  const c10::Half* ds = b.d + n * supers;
  const c10::Half* dm = b.dmin != nullptr ? b.dmin + n * supers : nullptr;
  const bool is_signed = b.sub_i8 != nullptr;
  const void* subs = is_signed ? static_cast<const void*>(b.sub_i8 + n * groups) : b.sub_u8 + n * groups;
  for (int64_t g = 0; g < groups; g += 16) {
    const __mmask16 live = groups_from(g, groups);
    const __m512 sub = bytes_as_floats(static_cast<const int8_t*>(subs) + g, live, is_signed);
    _mm512_store_ps(d + g, _mm512_mul_ps(supers_of(ds, g, per_super, supers), sub));
    if (dm != nullptr) {
      const __m512 sub_min = bytes_as_floats(b.sub_min + n * groups + g, live, false);
      _mm512_store_ps(mn + g, _mm512_mul_ps(_mm512_sub_ps(_mm512_setzero_ps(), supers_of(dm, g, per_super, supers)), sub_min));
    } else {
      _mm512_store_ps(mn + g, _mm512_setzero_ps());
    }
  }
}

struct BlockScales {
  const Blocks* b;
  void widen(int64_t n, int64_t, float* d, float* mn) const { widen_row(*b, n, d, mn); }
  const void* ahead(int64_t n, int64_t groups) const {
    return b->kind == Kind::Q4K ? static_cast<const void*>(b->sub_u8 + n * groups) : b->scales + n * groups;
  }
};

// Output rows [n0, n1) of M (<= MAX_ROWS) activation rows starting at row m0.
template <int M, typename Scales>
void int4_rows(const Activations& a, int64_t m0, const uint8_t* codes, const Scales& sc,
               int64_t K, int64_t N, int64_t n0, int64_t n1, c10::BFloat16* out) {
  const int64_t pairs = a.pairs, groups = K / BLOCK, row_bytes = K / 2;
  const __m512i low_nibble = _mm512_set1_epi16(0x000F), bias = _mm512_set1_epi16(0x4300);
  const __m512i two = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);  // [d0 x 8, d1 x 8]
  const __m512 by128 = _mm512_set1_ps(128.f);
  alignas(64) float d[512], mn[512];  // one row's scales and minima as fp32 (K <= 16,384)
  for (int64_t n = n0; n < n1; ++n) {
    sc.widen(n, groups, d, mn);
    __m512 acc[M];
    for (int m = 0; m < M; ++m) acc[m] = _mm512_setzero_ps();
    const uint8_t* w = codes + n * row_bytes;
    for (int64_t p = 0; p < pairs; ++p) {
      const __m512i bytes = _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + p * 32)));
      const __m512i lo = _mm512_ternarylogic_epi32(bytes, low_nibble, bias, 0xEA);  // (a & b) | c
      const __m512i hi = _mm512_or_si512(_mm512_srli_epi16(bytes, 4), bias);
      double pair;
      std::memcpy(&pair, d + 2 * p, sizeof(pair));
      const __m512 scale = _mm512_permutexvar_ps(two, _mm512_castpd_ps(_mm512_set1_pd(pair)));
      for (int m = 0; m < M; ++m) {
        const int64_t at = ((m0 + m) * pairs + p) * 32;
        __m512 t = _mm512_dpbf16_ps(_mm512_setzero_ps(), (__m512bh)lo,
                                    (__m512bh)_mm512_loadu_si512(a.lo.data() + at));
        t = _mm512_dpbf16_ps(t, (__m512bh)hi, (__m512bh)_mm512_loadu_si512(a.hi.data() + at));
        acc[m] = _mm512_fmadd_ps(t, scale, acc[m]);
      }
    }
    for (int64_t g = 0; g < groups; g += 16) {
      const __mmask16 live = groups_from(g, groups);
      const __m512 minimum = _mm512_maskz_load_ps(live, mn + g);
      const __m512 weight = _mm512_fnmadd_ps(_mm512_load_ps(d + g), by128, minimum);  // min - 128 * scale
      for (int m = 0; m < M; ++m) {
        const __m512 sums = _mm512_loadu_ps(a.sums.data() + (m0 + m) * a.groups_padded + g);
        acc[m] = _mm512_fmadd_ps(_mm512_maskz_mov_ps(live, weight), sums, acc[m]);
      }
    }
    for (int m = 0; m < M; ++m) out[(m0 + m) * N + n] = c10::BFloat16(_mm512_reduce_add_ps(acc[m]));
  }
}

template <int M>
void int8_rows(const float* x, int64_t m0, const int8_t* codes, const c10::BFloat16* scales, int64_t K, int64_t N,
               int64_t n0, int64_t n1, c10::BFloat16* out) {
  for (int64_t n = n0; n < n1; ++n) {
    __m512 acc[M];
    for (int m = 0; m < M; ++m) acc[m] = _mm512_setzero_ps();
    const int8_t* w = codes + n * K;
    if (n + AHEAD < N)  // the row AHEAD on (past this call's too), on its way while this one computes
      for (int64_t line = 0; line < K; line += 64) _mm_prefetch(reinterpret_cast<const char*>(w + AHEAD * K + line), _MM_HINT_T0);
    for (int64_t k = 0; k < K; k += 16) {
      const __m512 q = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + k))));
      for (int m = 0; m < M; ++m) acc[m] = _mm512_fmadd_ps(q, _mm512_loadu_ps(x + (m0 + m) * K + k), acc[m]);
    }
    const float scale = static_cast<float>(scales[n]);
    for (int m = 0; m < M; ++m) out[(m0 + m) * N + n] = c10::BFloat16(scale * _mm512_reduce_add_ps(acc[m]));
  }
}

// Q8_0 rows, the GGUF's own blocks: codes [N, K] int8, an fp16 scale per block of 32 (scales [N, K / 32]), w = scale *
// q. A block's 32 products with x (fp32) sum in 16 lanes, then take the block's scale; so these are the model's exact
// numbers, where int8_rows' one scale a row is a requantisation of them.
template <int M>
void q8_rows(const float* x, int64_t m0, const int8_t* codes, const c10::Half* scales, int64_t K, int64_t N,
             int64_t n0, int64_t n1, c10::BFloat16* out) {
  const int64_t groups = K / BLOCK;
  alignas(64) float d[512];  // one row's scales as fp32 (K <= 16,384)
  for (int64_t n = n0; n < n1; ++n) {
    const int8_t* w = codes + n * K;
    if (n + AHEAD < N) {  // the row AHEAD on (past this call's too), on its way while this one computes
      for (int64_t line = 0; line < K; line += 64) _mm_prefetch(reinterpret_cast<const char*>(w + AHEAD * K + line), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(scales + (n + AHEAD) * groups), _MM_HINT_T0);
    }
    widen_scales(scales + n * groups, groups, d);
    __m512 acc[M];
    for (int m = 0; m < M; ++m) acc[m] = _mm512_setzero_ps();
    for (int64_t g = 0; g < groups; ++g) {
      const int8_t* b = w + g * BLOCK;
      const __m512 q0 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b))));
      const __m512 q1 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 16))));
      const __m512 scale = _mm512_set1_ps(d[g]);
      for (int m = 0; m < M; ++m) {
        const float* xr = x + (m0 + m) * K + g * BLOCK;
        const __m512 t = _mm512_fmadd_ps(q1, _mm512_loadu_ps(xr + 16), _mm512_mul_ps(q0, _mm512_loadu_ps(xr)));
        acc[m] = _mm512_fmadd_ps(t, scale, acc[m]);
      }
    }
    for (int m = 0; m < M; ++m) out[(m0 + m) * N + n] = c10::BFloat16(_mm512_reduce_add_ps(acc[m]));
  }
}

// Calls body(M, m0) for passes of at most MAX_ROWS rows, with M as a template argument.
template <template <int> class Rows, typename... Args>
void in_passes(int64_t rows, Args&&... args) {
  for (int64_t m0 = 0; m0 < rows; m0 += MAX_ROWS) {
    switch (std::min<int64_t>(rows - m0, MAX_ROWS)) {
      case 1: Rows<1>::run(m0, args...); break;
      case 2: Rows<2>::run(m0, args...); break;
      case 3: Rows<3>::run(m0, args...); break;
      case 4: Rows<4>::run(m0, args...); break;
      case 5: Rows<5>::run(m0, args...); break;
      case 6: Rows<6>::run(m0, args...); break;
      case 7: Rows<7>::run(m0, args...); break;
      default: Rows<8>::run(m0, args...); break;
    }
  }
}

// One activation row, two output rows at a time (their pair loops interleaved: two independent chains of products in
// flight), the scales of a pair of blocks widened by one permute of the row's converted scales.
template <typename Scales>
void int4_rows_one(const Activations& a, int64_t m0, const uint8_t* codes, const Scales& sc, int64_t K, int64_t N,
                   int64_t n0, int64_t n1, c10::BFloat16* out) {
  const int64_t pairs = a.pairs, groups = K / BLOCK, row_bytes = K / 2;
  const __m512i low_nibble = _mm512_set1_epi16(0x000F), bias = _mm512_set1_epi16(0x4300);
  const __m512i two = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);  // [d0 x 8, d1 x 8]
  const __m512 by128 = _mm512_set1_ps(128.f);
  alignas(64) float d[2][512], mn[2][512];
  const c10::BFloat16* xl = a.lo.data() + m0 * pairs * 32;
  const c10::BFloat16* xh = a.hi.data() + m0 * pairs * 32;
  const float* xs = a.sums.data() + m0 * a.groups_padded;
  int64_t n = n0;
  for (; n + 2 <= n1; n += 2) {
    for (int r = 0; r < 2; ++r) sc.widen(n + r, groups, d[r], mn[r]);
    __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
    const uint8_t* w0 = codes + n * row_bytes;
    const uint8_t* w1 = w0 + row_bytes;
    if (n + AHEAD + 2 <= N) {  // the rows AHEAD on (past this call's: the next call's, or the other thread's) on their way
      const char* next = reinterpret_cast<const char*>(w0 + AHEAD * row_bytes);
      for (int64_t line = 0; line < 2 * row_bytes; line += 64) _mm_prefetch(next + line, _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(sc.ahead(n + AHEAD, groups)), _MM_HINT_T0);
    }
    for (int64_t p = 0; p < pairs; ++p) {
      const __m512bh x_lo = (__m512bh)_mm512_loadu_si512(xl + p * 32), x_hi = (__m512bh)_mm512_loadu_si512(xh + p * 32);
      const __m512i b0 = _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w0 + p * 32)));
      const __m512i b1 = _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w1 + p * 32)));
      double p0, p1;
      std::memcpy(&p0, d[0] + 2 * p, sizeof(p0));
      std::memcpy(&p1, d[1] + 2 * p, sizeof(p1));
      __m512 t0 = _mm512_dpbf16_ps(_mm512_setzero_ps(), (__m512bh)_mm512_ternarylogic_epi32(b0, low_nibble, bias, 0xEA), x_lo);
      __m512 t1 = _mm512_dpbf16_ps(_mm512_setzero_ps(), (__m512bh)_mm512_ternarylogic_epi32(b1, low_nibble, bias, 0xEA), x_lo);
      t0 = _mm512_dpbf16_ps(t0, (__m512bh)_mm512_or_si512(_mm512_srli_epi16(b0, 4), bias), x_hi);
      t1 = _mm512_dpbf16_ps(t1, (__m512bh)_mm512_or_si512(_mm512_srli_epi16(b1, 4), bias), x_hi);
      acc0 = _mm512_fmadd_ps(t0, _mm512_permutexvar_ps(two, _mm512_castpd_ps(_mm512_set1_pd(p0))), acc0);
      acc1 = _mm512_fmadd_ps(t1, _mm512_permutexvar_ps(two, _mm512_castpd_ps(_mm512_set1_pd(p1))), acc1);
    }
    for (int64_t g = 0; g < groups; g += 16) {
      const __mmask16 live = groups_from(g, groups);
      const __m512 sums = _mm512_maskz_loadu_ps(live, xs + g);
      const __m512 m0v = _mm512_maskz_load_ps(live, mn[0] + g);
      const __m512 m1v = _mm512_maskz_load_ps(live, mn[1] + g);
      acc0 = _mm512_fmadd_ps(_mm512_fnmadd_ps(_mm512_load_ps(d[0] + g), by128, m0v), sums, acc0);
      acc1 = _mm512_fmadd_ps(_mm512_fnmadd_ps(_mm512_load_ps(d[1] + g), by128, m1v), sums, acc1);
    }
    out[m0 * N + n] = c10::BFloat16(_mm512_reduce_add_ps(acc0));
    out[m0 * N + n + 1] = c10::BFloat16(_mm512_reduce_add_ps(acc1));
  }
  if (n < n1) int4_rows<1>(a, m0, codes, sc, K, N, n, n1, out);
}

template <int M>
struct Int4 {
  template <typename Scales>
  static void run(int64_t m0, const Activations& a, const uint8_t* codes, const Scales& sc, int64_t K, int64_t N,
                  int64_t n0, int64_t n1, c10::BFloat16* out) {
    if constexpr (M == 1)
      int4_rows_one(a, m0, codes, sc, K, N, n0, n1, out);
    else
      int4_rows<M>(a, m0, codes, sc, K, N, n0, n1, out);
  }
};

// 8-bit codes in groups of 16 or 32 with any scales and minima (`Blocks` of kind q8 or q8k: Q8_0, Q5_x, Q6_K,
// IQ4_x), x as fp32 [M, K] with its groups' sums `xs` [M, groups] (for the minima): a group's products summed in fp32,
// then its scale; the minima's terms at the end of the row.
template <int M>
void q8_block_rows(const float* x, const float* xs, int64_t m0, const Blocks& b, int64_t n0, int64_t n1,
                   c10::BFloat16* out, int64_t stride) {
  const int64_t K = b.K, N = b.N, groups = b.groups(), G = b.G;
  const bool minima = b.mins != nullptr || b.sub_min != nullptr;
  alignas(64) float d[MAX_GROUPS], mn[MAX_GROUPS];
  for (int64_t n = n0; n < n1; ++n) {
    const int8_t* w = b.codes8 + n * K;
    if (n + AHEAD < N)
      for (int64_t line = 0; line < K; line += 64) _mm_prefetch(reinterpret_cast<const char*>(w + AHEAD * K + line), _MM_HINT_T0);
    widen_row(b, n, d, mn);
    __m512 acc[M];
    for (int m = 0; m < M; ++m) acc[m] = _mm512_setzero_ps();
    if (G == 32) {
      for (int64_t g = 0; g < groups; ++g) {
        const int8_t* c = w + g * 32;
        const __m512 q0 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(c))));
        const __m512 q1 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(c + 16))));
        const __m512 scale = _mm512_set1_ps(d[g]);
        for (int m = 0; m < M; ++m) {
          const float* xr = x + (m0 + m) * K + g * 32;
          const __m512 t = _mm512_fmadd_ps(q1, _mm512_loadu_ps(xr + 16), _mm512_mul_ps(q0, _mm512_loadu_ps(xr)));
          acc[m] = _mm512_fmadd_ps(t, scale, acc[m]);
        }
      }
    } else {  // groups of 16: a scale a zmm of codes
      for (int64_t g = 0; g < groups; ++g) {
        const __m512 q = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + g * 16))));
        const __m512 scale = _mm512_set1_ps(d[g]);
        for (int m = 0; m < M; ++m)
          acc[m] = _mm512_fmadd_ps(_mm512_mul_ps(q, _mm512_loadu_ps(x + (m0 + m) * K + g * 16)), scale, acc[m]);
      }
    }
    if (minima)
      for (int64_t g = 0; g < groups; g += 16) {
        const __mmask16 live = groups_from(g, groups);
        const __m512 minimum = _mm512_maskz_load_ps(live, mn + g);
        for (int m = 0; m < M; ++m)
          acc[m] = _mm512_fmadd_ps(minimum, _mm512_maskz_loadu_ps(live, xs + (m0 + m) * groups + g), acc[m]);
      }
    for (int m = 0; m < M; ++m) out[(m0 + m) * stride + n] = c10::BFloat16(_mm512_reduce_add_ps(acc[m]));
  }
}

// Row n of any `Blocks` dequantised into bf16 (d, mn: fp32 scratch of MAX_GROUPS, 64-byte aligned): a tile of the
// tile-at-a-time matmul (blocks.cpp `linear`), 16 weights a vector.
inline void dequantise_row_bf16(const Blocks& b, int64_t n, float* d, float* mn, c10::BFloat16* out) {
  widen_row(b, n, d, mn);
  const int64_t groups = b.groups();
  if (b.four_bit()) {
    const uint8_t* c = b.codes4 + n * (b.K / 2);
    for (int64_t g = 0; g < groups; ++g) {
      const __m512i bytes = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(c + g * 16)));
      const __m512 lo = _mm512_cvtepi32_ps(_mm512_and_si512(bytes, _mm512_set1_epi32(15)));
      const __m512 hi = _mm512_cvtepi32_ps(_mm512_srli_epi32(bytes, 4));
      const __m512 s = _mm512_set1_ps(d[g]), m = _mm512_set1_ps(mn[g]);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + g * 32), (__m256i)_mm512_cvtneps_pbh(_mm512_fmadd_ps(lo, s, m)));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + g * 32 + 16), (__m256i)_mm512_cvtneps_pbh(_mm512_fmadd_ps(hi, s, m)));
    }
    return;
  }
  const int8_t* c = b.codes8 + n * b.K;
  for (int64_t k = 0; k < b.K; k += 16) {
    const int64_t g = k / b.G;
    const __m512 q = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(c + k))));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + k),
                        (__m256i)_mm512_cvtneps_pbh(_mm512_fmadd_ps(q, _mm512_set1_ps(d[g]), _mm512_set1_ps(mn[g]))));
  }
}

// `stride`: of out's rows (the whole projection's outputs, where b is one segment of it).
template <int M>
struct Q8Block {
  static void run(int64_t m0, const float* x, const float* xs, const Blocks& b, int64_t n0, int64_t n1,
                  c10::BFloat16* out, int64_t stride) {
    q8_block_rows<M>(x, xs, m0, b, n0, n1, out, stride);
  }
};

template <int M>
struct Int8 {
  static void run(int64_t m0, const float* x, const int8_t* codes, const c10::BFloat16* scales, int64_t K, int64_t N,
                  int64_t n0, int64_t n1, c10::BFloat16* out) {
    int8_rows<M>(x, m0, codes, scales, K, N, n0, n1, out);
  }
};

template <int M>
struct Q8 {
  static void run(int64_t m0, const float* x, const int8_t* codes, const c10::Half* scales, int64_t K, int64_t N,
                  int64_t n0, int64_t n1, c10::BFloat16* out) {
    q8_rows<M>(x, m0, codes, scales, K, N, n0, n1, out);
  }
};

#if defined(__AVX512VNNI__)
#define SPD_INT8_DOT 1

// The K-quants (Q4_K; Q5_K, Q6_K, IQ4_XS) in decode steps, and every kind in trees, batches and prefill
// (`blocks_int8`), on integer dot products, as llama.cpp computes them: x quantised once a call
// to int8 in blocks of 32 along K (a scale dx = max|x| / 127 a block, codes round(x / dx)), each group's codes dotted
// with x's codes by VNNI's vpdpbusd (unsigned bytes times signed bytes, 4 products summed into each 32-bit lane:
// exact), then the group's scale times x's block scale applied in fp32; the minima's term from x's exact fp32 sums.
// 4-bit codes are taken as centred (q - 8, their minimum raised by 8 times their scale): 8 scale times the difference
// of x's exact sum and its rounded one is added back, so x's rounding meets q - 8, not q (about half the error).
// So the result differs from the float products by x's rounding alone: |error| <= sum_k |scale_g * c_k| * dx_b / 2
// (c_k = q_k - 8 for 4-bit codes, q_k for 8-bit ones; b: k's block of 32), plus fp32's and the output's bf16 rounding
// (tests/engine/test_blocks_int8.py checks it).
struct QuantisedX {
  std::vector<int8_t> natural;  // [rows, K]: the 8-bit kernel's order
  std::vector<int8_t> nibble;  // [rows, K]: per 4 blocks (128 values) elements 0..15 of each (64 bytes), then 16..31
                               // of each: the order of a 4-bit row's 64 bytes split into low and high nibbles
  std::vector<int32_t> offset;  // [rows, K / 4]: -128 times each 4 codes' sum (the 8-bit kernel reads q + 128)
  std::vector<float> dx, sums;  // [rows, padded]: each block's scale, and its sum of x in fp32 (the minima's term)
  std::vector<float> drift;  // [rows, padded], 4-bit: each block's sum of x less its rounded one (dx times its codes')
  int64_t padded = 0;
};

// The int8 path serves these blocks in decode steps (the others keep their kernels there: Q4_0/Q4_1/Q8_0's decode
// numbers stay as they are).
inline bool int8_dot_serves(const Blocks& b) {
  return (b.kind == Kind::Q4K && b.K % 128 == 0) ||
         (b.kind == Kind::Q8K && b.K % 64 == 0 && (b.G == 32 || b.sub_min == nullptr));
}

// Where integer dot products serve every kind of blocks (the `blocks_int8` op: trees, batches and prefill), the
// one-level ones too: Q4_0/Q4_1 (and IQ4_NL's, Q5_0's codes as 8-bit groups of 32) on the same two kernels.
inline bool int8_dot_serves_any(const Blocks& b) {
  return int8_dot_serves(b) || (b.kind == Kind::Q4 && b.K % 64 == 0) ||
         (b.kind == Kind::Q8 && b.K % 64 == 0 && b.G == 32);
}

// x's rows [rows, K] (K a multiple of 64) into q: `nibble` for 4-bit blocks, `natural` and `offset` for 8-bit ones.
inline void quantise_into(QuantisedX& q, const c10::BFloat16* x, int64_t rows, int64_t K, bool nibble, bool natural) {
  const int64_t blocks = K / BLOCK;
  q.padded = (blocks + 15) / 16 * 16;
  q.dx.assign(rows * q.padded, 0.f);
  q.sums.assign(rows * q.padded, 0.f);
  if (nibble) {
    q.nibble.resize(rows * K);
    q.drift.assign(rows * q.padded, 0.f);
  }
  if (natural) {
    q.natural.resize(rows * K);
    q.offset.resize(rows * K / 4);
  }
  const __m512 sign = _mm512_castsi512_ps(_mm512_set1_epi32(0x7FFFFFFF));
  for (int64_t m = 0; m < rows; ++m) {
    for (int64_t g = 0; g < blocks; ++g) {
      const c10::BFloat16* src = x + m * K + g * BLOCK;
      __m512 v[2];
      for (int h = 0; h < 2; ++h)
        v[h] = _mm512_castsi512_ps(_mm512_slli_epi32(
            _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src + 16 * h))), 16));
      const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_and_ps(v[0], sign), _mm512_and_ps(v[1], sign)));
      const float inverse = amax > 0.f ? 127.f / amax : 0.f;
      q.dx[m * q.padded + g] = amax / 127.f;
      q.sums[m * q.padded + g] = _mm512_reduce_add_ps(_mm512_add_ps(v[0], v[1]));
      __m128i codes[2];
      for (int h = 0; h < 2; ++h)
        codes[h] = _mm512_cvtsepi32_epi8(_mm512_cvtps_epi32(_mm512_mul_ps(v[h], _mm512_set1_ps(inverse))));
      if (natural) {
        int8_t* out = q.natural.data() + m * K + g * BLOCK;
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out), codes[0]);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out + 16), codes[1]);
      }
      if (nibble) {  // block g is the (g % 4)th of its 128 values: its low half at 16 (g % 4), its high at 64 + that
                     // (a last 64 values: at 16 (g % 2) and 32 + that)
        const int64_t span = std::min<int64_t>(128, K - (g / 4) * 128);
        int8_t* out = q.nibble.data() + m * K + (g / 4) * 128 + (g % 4) * 16;
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out), codes[0]);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out + span / 2), codes[1]);
        const int32_t total = _mm512_reduce_add_epi32(
            _mm512_add_epi32(_mm512_cvtepi8_epi32(codes[0]), _mm512_cvtepi8_epi32(codes[1])));
        q.drift[m * q.padded + g] = q.sums[m * q.padded + g] - q.dx[m * q.padded + g] * static_cast<float>(total);
      }
    }
    if (natural)
      for (int64_t k = 0; k < K; k += 64) {
        const __m512i codes = _mm512_loadu_si512(q.natural.data() + m * K + k);
        const __m512i sums = _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(static_cast<char>(0x80)), codes);
        _mm512_storeu_si512(q.offset.data() + (m * K + k) / 4, _mm512_sub_epi32(_mm512_setzero_si512(), sums));
      }
  }
}

// 32 bytes from p in a zmm's low half, the high half zeros.
inline __m512i half_zmm(const void* p) {
  return _mm512_zextsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}

// The codes of the row ~PREFETCH_BYTES past row n (whole rows: at least the next one) on their way into L2. Codes
// alone: prefetching the sub-scales' and sub-minima's lines as well made the pass slower, not faster (one thread
// from memory: 8.6 against 13.4 GB/s); the hardware's prefetcher follows those small streams by itself.
constexpr int64_t PREFETCH_BYTES = 8192;

inline void prefetch_row(const Blocks& b, const void* codes, int64_t row_bytes, int64_t n) {
  const int64_t ahead = n + std::max<int64_t>(1, PREFETCH_BYTES / row_bytes);
  if (ahead >= b.N) return;
  const char* next = static_cast<const char*>(codes) + ahead * row_bytes;
  for (int64_t line = 0; line < row_bytes; line += 64) _mm_prefetch(next + line, _MM_HINT_T1);
}

// The minima's term of a row: sum over groups of mn[g] * x's block sums (groups of 32); where `d` (4-bit codes,
// centred), plus 8 d[g] times x's block drift.
template <int M>
inline void add_minima(const QuantisedX& x, int64_t m0, const float* mn, const float* d, int64_t groups, __m512* acc) {
  for (int64_t g = 0; g < groups; g += 16) {
    const __mmask16 live = groups_from(g, groups);
    const __m512 minimum = _mm512_maskz_load_ps(live, mn + g);
    for (int m = 0; m < M; ++m)
      acc[m] = _mm512_fmadd_ps(minimum, _mm512_maskz_loadu_ps(live, x.sums.data() + (m0 + m) * x.padded + g), acc[m]);
    if (d == nullptr) continue;
    const __m512 eight = _mm512_mul_ps(_mm512_set1_ps(8.f), _mm512_maskz_load_ps(live, d + g));
    for (int m = 0; m < M; ++m)
      acc[m] = _mm512_fmadd_ps(eight, _mm512_maskz_loadu_ps(live, x.drift.data() + (m0 + m) * x.padded + g), acc[m]);
  }
}

// The pass over output rows [n0, n1) both int8 kernels share: each row's codes ~8 KB ahead prefetched, its scales
// widened (d: each group's, mn: its minimum), `dots(n, d, acc)` adding its groups' products into the M accumulators,
// then the minima's term and the outputs.
template <int M, typename Dots>
void kquant_rows(const QuantisedX& x, int64_t m0, const Blocks& b, const void* codes, int64_t row_bytes, int64_t n0,
                 int64_t n1, c10::BFloat16* out, int64_t stride, Dots dots) {
  alignas(64) float d[MAX_GROUPS], mn[MAX_GROUPS];
  for (int64_t n = n0; n < n1; ++n) {
    prefetch_row(b, codes, row_bytes, n);
    widen_row(b, n, d, mn);
    __m512 acc[M];
    for (int m = 0; m < M; ++m) acc[m] = _mm512_setzero_ps();
    dots(n, d, acc);
    if (b.four_bit())
      add_minima<M>(x, m0, mn, d, b.groups(), acc);
    else if (b.sub_min != nullptr || b.mins != nullptr)
      add_minima<M>(x, m0, mn, nullptr, b.groups(), acc);
    for (int m = 0; m < M; ++m) out[(m0 + m) * stride + n] = c10::BFloat16(_mm512_reduce_add_ps(acc[m]));
  }
}

// 4-bit rows [n0, n1) (of `b`, kind q4k or q4) for M rows of x from m0: per 64 bytes of codes (4 groups), their low
// and high nibbles dotted with x's codes in two vpdpbusd (lanes 4i..4i+3: group i's), then in fp32 times the 4 groups'
// scales and x's 4 block scales (one permute spreads them over the lanes); a last 64 values likewise from 32 bytes.
template <int M>
void four_bit_int8_rows(const QuantisedX& x, int64_t m0, const Blocks& b, int64_t n0, int64_t n1, c10::BFloat16* out,
                   int64_t stride) {
  const int64_t K = b.K, row_bytes = K / 2;
  const __m512i nibble = _mm512_set1_epi8(0x0F);
  const __m512i spread = _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0);
  const int64_t whole = K / 128 * 128;
  kquant_rows<M>(x, m0, b, b.codes4, row_bytes, n0, n1, out, stride, [&](int64_t n, const float* d, __m512* acc) {
    const uint8_t* w = b.codes4 + n * row_bytes;
    if (whole < K) {  // a last 64 values (2 groups): 32 bytes, lanes 0..3 group 0's, 4..7 group 1's
      const __m512i c = half_zmm(w + whole / 2);
      const __m512i lo = _mm512_and_si512(c, nibble), hi = _mm512_and_si512(_mm512_srli_epi16(c, 4), nibble);
      const __m128 ws = _mm_castpd_ps(_mm_load_sd(reinterpret_cast<const double*>(d + whole / BLOCK)));
      for (int m = 0; m < M; ++m) {
        const int8_t* xa = x.nibble.data() + (m0 + m) * K + whole;
        __m512i t = _mm512_dpbusd_epi32(_mm512_setzero_si512(), lo, half_zmm(xa));
        t = _mm512_dpbusd_epi32(t, hi, half_zmm(xa + 32));
        const __m128 two = _mm_castpd_ps(
            _mm_load_sd(reinterpret_cast<const double*>(x.dx.data() + (m0 + m) * x.padded + whole / BLOCK)));
        const __m512 s = _mm512_permutexvar_ps(spread, _mm512_castps128_ps512(_mm_mul_ps(ws, two)));
        acc[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(t), s, acc[m]);
      }
    }
    for (int64_t e = 0; e < whole; e += 128) {
      const __m512i c = _mm512_loadu_si512(w + e / 2);
      const __m512i lo = _mm512_and_si512(c, nibble), hi = _mm512_and_si512(_mm512_srli_epi16(c, 4), nibble);
      const __m128 ws = _mm_load_ps(d + e / BLOCK);
      for (int m = 0; m < M; ++m) {
        const int8_t* xa = x.nibble.data() + (m0 + m) * K + e;
        __m512i t = _mm512_dpbusd_epi32(_mm512_setzero_si512(), lo, _mm512_loadu_si512(xa));
        t = _mm512_dpbusd_epi32(t, hi, _mm512_loadu_si512(xa + 64));
        const __m128 s = _mm_mul_ps(ws, _mm_loadu_ps(x.dx.data() + (m0 + m) * x.padded + e / BLOCK));
        acc[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(t), _mm512_permutexvar_ps(spread, _mm512_castps128_ps512(s)), acc[m]);
      }
    }
  });
}

// 8-bit rows (kind q8k: Q6_K's groups of 16, Q5_K's and IQ4_XS's of 32; kind q8 in groups of 32) [n0, n1) for M rows of x: per 64
// codes, read as unsigned q + 128 and dotted with x's codes by one vpdpbusd that starts from -128 times x's sums (so
// each lane holds its 4 products of q exactly), then in fp32 times the groups' scales and x's block scales.
template <int M>
void eight_bit_int8_rows(const QuantisedX& x, int64_t m0, const Blocks& b, int64_t n0, int64_t n1, c10::BFloat16* out,
                   int64_t stride) {
  const int64_t K = b.K;
  const bool sixteen = b.G == 16;
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80));
  const __m512i spread = sixteen ? _mm512_set_epi32(3, 3, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 0, 0)
                                 : _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
  kquant_rows<M>(x, m0, b, b.codes8, K, n0, n1, out, stride, [&](int64_t n, const float* d, __m512* acc) {
    const int8_t* w = b.codes8 + n * K;
    for (int64_t e = 0; e < K; e += 64) {
      const __m512i c = _mm512_xor_si512(_mm512_loadu_si512(w + e), flip);
      // the groups' scales in the low lanes: 4 of 16 (Q6_K) or 2 of 32
      const __m128 ws = sixteen ? _mm_load_ps(d + e / 16)
                                : _mm_castpd_ps(_mm_load_sd(reinterpret_cast<const double*>(d + e / 32)));
      for (int m = 0; m < M; ++m) {
        const __m512i t = _mm512_dpbusd_epi32(_mm512_loadu_si512(x.offset.data() + ((m0 + m) * K + e) / 4), c,
                                              _mm512_loadu_si512(x.natural.data() + (m0 + m) * K + e));
        const __m128 two = _mm_castpd_ps(
            _mm_load_sd(reinterpret_cast<const double*>(x.dx.data() + (m0 + m) * x.padded + e / BLOCK)));
        const __m128 s = _mm_mul_ps(ws, sixteen ? _mm_unpacklo_ps(two, two) : two);  // [dx0, dx0, dx1, dx1] or [dx0, dx1]
        acc[m] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(t), _mm512_permutexvar_ps(spread, _mm512_castps128_ps512(s)), acc[m]);
      }
    }
  });
}

template <int M>
struct Int8Dots {
  static void run(int64_t m0, const QuantisedX& x, const Blocks& b, int64_t n0, int64_t n1, c10::BFloat16* out,
                  int64_t stride) {
    if (b.kind == Kind::Q4K || b.kind == Kind::Q4)
      four_bit_int8_rows<M>(x, m0, b, n0, n1, out, stride);
    else
      eight_bit_int8_rows<M>(x, m0, b, n0, n1, out, stride);
  }
};

#endif  // __AVX512VNNI__

#endif  // SPD_MATVEC

}  // namespace spd_kernels
