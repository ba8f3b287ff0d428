// The decode step's attention pieces (attention.cpp's op and step.cpp's fused step share them): a chunk of key/value
// columns' scores, softmax and weighted values, and the chunks' join. See attention.cpp.
#pragma once

#include <ATen/cpu/vec/functional.h>
#include <ATen/cpu/vec/vec.h>
#include <c10/util/BFloat16.h>

#include <algorithm>
#include <cmath>
#include <limits>

#if defined(__AVX512F__) && defined(__AVX512BF16__) && defined(__AVX512BW__) && defined(CPU_CAPABILITY_AVX512)
#define SPD_DECODE_BF16 1
#include <immintrin.h>
#endif

namespace spd_kernels {

constexpr int64_t CHUNK = 64;
using Vec = at::vec::Vectorized<float>;

// exp of n floats in place (ATen's vectorised exp; the tail scalar)
inline void exp_inplace(float* x, int64_t n) {
  int64_t i = 0;
  for (; i + Vec::size() <= n; i += Vec::size()) Vec::loadu(x + i).exp_u20().store(x + i);
  for (; i < n; ++i) x[i] = std::exp(x[i]);
}

// Vec::size() floats of a key or value row, from bf16 or fp32
inline Vec load_row(const float* p) { return Vec::loadu(p); }
inline Vec load_row(const c10::BFloat16* p) {
  Vec out;
  at::vec::load_fp32_from_bf16(p, out);
  return out;
}

inline float sum_of(const Vec& x) {
  auto add = [](Vec& a, Vec& b) { return a + b; };
  return at::vec::vec_reduce_all<float>(add, x);
}

// Each query head's scores over a chunk (rows of CHUNK), in place: exp(score - max); its max and sum beside
inline void softmax_rows(float* scores, int64_t G, int64_t cols, float* maxima, float* sums) {
  for (int64_t g = 0; g < G; ++g) {
    float* p = scores + g * CHUNK;
    float m = -std::numeric_limits<float>::infinity();
    for (int64_t s = 0; s < cols; ++s) m = std::max(m, p[s]);
    for (int64_t s = 0; s < cols; ++s) p[s] -= m;
    exp_inplace(p, cols);
    float l = 0.f;
    for (int64_t s = 0; s < cols; ++s) l += p[s];
    maxima[g] = m;
    sums[g] = l;
  }
}

// One chunk of `cols` key/value rows: scores[g][s] = q[g] . key[s], their softmax (`softmax_rows`), and
// acc[g] = sum_s p[g][s] value[s]. D = NV vectors: a row's vectors stay in registers.
template <typename T, int64_t NV>
void chunk_vectorised(const float* qf, const T* keys, int64_t kss, const T* values, int64_t vss, int64_t G,
                      int64_t cols, float* scores, float* acc, float* maxima, float* sums) {
  constexpr int64_t W = Vec::size();
  for (int64_t s = 0; s < cols; ++s) {
    Vec row[NV];
    for (int64_t j = 0; j < NV; ++j) row[j] = load_row(keys + s * kss + j * W);
    for (int64_t g = 0; g < G; ++g) {
      Vec dot = row[0] * Vec::loadu(qf + g * NV * W);
      for (int64_t j = 1; j < NV; ++j) dot = at::vec::fmadd(row[j], Vec::loadu(qf + g * NV * W + j * W), dot);
      scores[g * CHUNK + s] = sum_of(dot);
    }
  }
  softmax_rows(scores, G, cols, maxima, sums);
  for (int64_t g = 0; g < G; ++g) {
    Vec total[NV];
    for (int64_t j = 0; j < NV; ++j) total[j] = Vec(0.f);
    const float* p = scores + g * CHUNK;
    for (int64_t s = 0; s < cols; ++s) {
      const Vec weight(p[s]);
      for (int64_t j = 0; j < NV; ++j) total[j] = at::vec::fmadd(weight, load_row(values + s * vss + j * W), total[j]);
    }
    for (int64_t j = 0; j < NV; ++j) total[j].store(acc + g * NV * W + j * W);
  }
}

// `chunk_vectorised` for any head size D, element by element (`row`: D floats of scratch).
template <typename T>
void chunk_scalar(const float* qf, const T* keys, int64_t kss, const T* values, int64_t vss, int64_t G, int64_t D,
                  int64_t cols, float* scores, float* row, float* acc, float* maxima, float* sums) {
  for (int64_t s = 0; s < cols; ++s) {
    const T* key = keys + s * kss;
    for (int64_t d = 0; d < D; ++d) row[d] = static_cast<float>(key[d]);
    for (int64_t g = 0; g < G; ++g) {
      const float* qg = qf + g * D;
      float dot = 0.f;
      for (int64_t d = 0; d < D; ++d) dot += qg[d] * row[d];
      scores[g * CHUNK + s] = dot;
    }
  }
  softmax_rows(scores, G, cols, maxima, sums);
  std::fill(acc, acc + G * D, 0.f);
  for (int64_t s = 0; s < cols; ++s) {
    const T* value = values + s * vss;
    for (int64_t d = 0; d < D; ++d) row[d] = static_cast<float>(value[d]);
    for (int64_t g = 0; g < G; ++g) {
      const float p = scores[g * CHUNK + s];
      float* ag = acc + g * D;
      for (int64_t d = 0; d < D; ++d) ag[d] += p * row[d];
    }
  }
}

#ifdef SPD_DECODE_BF16
// 16 vectors -> one: lane i the sum of t[i]'s lanes (a transposed reduction: 45 shuffles and adds for 16 keys, where a
// reduction per key costs ~10).
inline __m512 lane_sums(__m512* t) {
  __m512 pairs[8], quads[4];
  for (int i = 0; i < 8; ++i)
    pairs[i] = _mm512_add_ps(_mm512_unpacklo_ps(t[2 * i], t[2 * i + 1]), _mm512_unpackhi_ps(t[2 * i], t[2 * i + 1]));
  for (int i = 0; i < 4; ++i) {
    const __m512d a = _mm512_castps_pd(pairs[2 * i]), b = _mm512_castps_pd(pairs[2 * i + 1]);
    quads[i] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(a, b)), _mm512_castpd_ps(_mm512_unpackhi_pd(a, b)));
  }
  // quads[i]: per 128-bit lane L, keys 4i..4i+3's sums over lane L's elements
  const __m512 x = _mm512_add_ps(_mm512_shuffle_f32x4(quads[0], quads[1], 0x88), _mm512_shuffle_f32x4(quads[0], quads[1], 0xDD));
  const __m512 y = _mm512_add_ps(_mm512_shuffle_f32x4(quads[2], quads[3], 0x88), _mm512_shuffle_f32x4(quads[2], quads[3], 0xDD));
  return _mm512_add_ps(_mm512_shuffle_f32x4(x, y, 0x88), _mm512_shuffle_f32x4(x, y, 0xDD));
}

// `chunk_vectorised` for bf16 keys and values, D = 32 * NP: each key's scores by AVX-512 BF16 dot products (the bf16
// products exact, summed in fp32, then scaled), 16 keys' at once reduced across lanes; each value row widened to fp32
// once for all G query heads. `qb`: the query heads unscaled (bf16, head g at qb + g * qsg), `scale` applied to the
// scores.
template <int64_t NP>
void chunk_bf16(const c10::BFloat16* qb, int64_t qsg, float scale, const c10::BFloat16* keys, int64_t kss,
                const c10::BFloat16* values, int64_t vss, int64_t G, int64_t cols, float* scores, float* acc,
                float* maxima, float* sums) {
  constexpr int64_t D = 32 * NP, NV = D / 16;
  for (int64_t g = 0; g < G; ++g) {
    __m512bh qv[NP];
    for (int64_t j = 0; j < NP; ++j) qv[j] = (__m512bh)_mm512_loadu_si512(qb + g * qsg + 32 * j);
    for (int64_t s0 = 0; s0 < cols; s0 += 16) {
      __m512 t[16];
      const int64_t n = std::min<int64_t>(16, cols - s0);
      for (int64_t i = 0; i < 16; ++i) {
        t[i] = _mm512_setzero_ps();
        if (i < n)  // keys past the column are never read
          for (int64_t j = 0; j < NP; ++j)
            t[i] = _mm512_dpbf16_ps(t[i], qv[j], (__m512bh)_mm512_loadu_si512(keys + (s0 + i) * kss + 32 * j));
      }
      const __mmask16 live = static_cast<__mmask16>(n == 16 ? 0xFFFF : (1u << n) - 1);
      _mm512_mask_storeu_ps(scores + g * CHUNK + s0, live, _mm512_mul_ps(lane_sums(t), _mm512_set1_ps(scale)));
    }
  }
  softmax_rows(scores, G, cols, maxima, sums);
  constexpr int64_t MAX_G = 4;  // query heads whose accumulators stay in registers at once
  for (int64_t g0 = 0; g0 < G; g0 += MAX_G) {
    const int64_t gs = std::min<int64_t>(MAX_G, G - g0);
    __m512 total[MAX_G][NV];
    for (int64_t g = 0; g < MAX_G; ++g)
      for (int64_t j = 0; j < NV; ++j) total[g][j] = _mm512_setzero_ps();
    for (int64_t s = 0; s < cols; ++s) {
      __m512 row[NV];
      for (int64_t j = 0; j < NV; ++j) row[j] = load_row(values + s * vss + 16 * j);
      for (int64_t g = 0; g < gs; ++g) {
        const __m512 weight = _mm512_set1_ps(scores[(g0 + g) * CHUNK + s]);
        for (int64_t j = 0; j < NV; ++j) total[g][j] = _mm512_fmadd_ps(weight, row[j], total[g][j]);
      }
    }
    for (int64_t g = 0; g < gs; ++g)
      for (int64_t j = 0; j < NV; ++j) _mm512_storeu_ps(acc + (g0 + g) * D + 16 * j, total[g][j]);
  }
}
#endif  // SPD_DECODE_BF16

// One (row, key/value head)'s chunks joined by their softmax maxima (flash-decoding): for each of its G query heads,
// dst[g] = sum_c w_c acc_c[g] / sum_c w_c sums_c[g], w_c = exp(max_c - max). maxima, sums [chunks, G], acc [chunks, G,
// D]; `joined`: D floats of scratch; dst [G, D].
template <typename T>
inline void join_chunks(const float* maxima, const float* sums, const float* acc, int64_t chunks, int64_t G, int64_t D,
                        float* joined, T* dst) {
  for (int64_t g = 0; g < G; ++g) {
    float top = -std::numeric_limits<float>::infinity();
    for (int64_t c = 0; c < chunks; ++c) top = std::max(top, maxima[c * G + g]);
    float total = 0.f;
    std::fill(joined, joined + D, 0.f);
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t at = c * G + g;
      const float w = std::exp(maxima[at] - top);
      total += w * sums[at];
      const float* a = acc + at * D;
      for (int64_t d = 0; d < D; ++d) joined[d] += w * a[d];
    }
    for (int64_t d = 0; d < D; ++d) dst[g * D + d] = static_cast<T>(joined[d] / total);
  }
}

}  // namespace spd_kernels
