// The attention of a one-token decode step on the CPU: spd::decode_attention(q, k, v, column, scale).
//
// q [B, H, G, D]: each row's query heads stacked per key/value head (G of them share one); k, v [B, H, S, D]:
// the cache's fixed buffers, of which columns 0..column are attended (the rest is never read). Work is split over
// (row, head, chunk of CHUNK columns), so two threads share even three heads evenly and each streams its keys and
// values once; the chunks' partial softmaxes are joined by their maxima (flash-decoding). Accumulates in fp32;
// the output in q's dtype (bf16 or fp32). Built at run time by attention.py with inductor's vector ISA flags.
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/cpu/vec/functional.h>
#include <ATen/cpu/vec/vec.h>
#include <ATen/ops/empty.h>
#include <c10/util/BFloat16.h>
#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#if defined(__AVX512F__) && defined(__AVX512BF16__) && defined(__AVX512BW__) && defined(CPU_CAPABILITY_AVX512)
#define SPD_DECODE_BF16 1
#include <immintrin.h>
#endif

namespace {

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
void softmax_rows(float* scores, int64_t G, int64_t cols, float* maxima, float* sums) {
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

template <typename T, int64_t FIXED_D>
void attend(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, int64_t n, float scale, at::Tensor& out) {
  const int64_t B = q.size(0), H = q.size(1), G = q.size(2);
  const int64_t D = FIXED_D > 0 ? FIXED_D : q.size(3);
  const int64_t chunks = (n + CHUNK - 1) / CHUNK;
  const T* qp = q.data_ptr<T>();
  const T* kp = k.data_ptr<T>();
  const T* vp = v.data_ptr<T>();
  const int64_t qsb = q.stride(0), qsh = q.stride(1), qsg = q.stride(2);
  const int64_t ksb = k.stride(0), ksh = k.stride(1), kss = k.stride(2);
  const int64_t vsb = v.stride(0), vsh = v.stride(1), vss = v.stride(2);
  const int64_t items = B * H * chunks;
  std::vector<float> maxima(items * G), sums(items * G), acc(items * G * D);
  at::parallel_for(0, items, 1, [&](int64_t begin, int64_t end) {
    std::vector<float> qf(G * D), scores(G * CHUNK), row(D);
    for (int64_t item = begin; item < end; ++item) {
      const int64_t c = item % chunks, bh = item / chunks, b = bh / H, h = bh % H;
      const int64_t s0 = c * CHUNK, cols = std::min(n, s0 + CHUNK) - s0;
      const T* keys = kp + b * ksb + h * ksh + s0 * kss;
      const T* values = vp + b * vsb + h * vsh + s0 * vss;
      float* a = acc.data() + item * G * D;
#ifdef SPD_DECODE_BF16
      if constexpr (std::is_same_v<T, c10::BFloat16> && FIXED_D > 0 && FIXED_D % 32 == 0) {
        chunk_bf16<FIXED_D / 32>(qp + b * qsb + h * qsh, qsg, scale, keys, kss, values, vss, G, cols, scores.data(), a,
                                 maxima.data() + item * G, sums.data() + item * G);
        continue;
      }
#endif
      for (int64_t g = 0; g < G; ++g)
        for (int64_t d = 0; d < D; ++d) qf[g * D + d] = static_cast<float>(qp[b * qsb + h * qsh + g * qsg + d]) * scale;
      if constexpr (FIXED_D > 0 && FIXED_D % Vec::size() == 0) {
        chunk_vectorised<T, FIXED_D / Vec::size()>(qf.data(), keys, kss, values, vss, G, cols, scores.data(), a,
                                                   maxima.data() + item * G, sums.data() + item * G);
      } else {
        chunk_scalar(qf.data(), keys, kss, values, vss, G, D, cols, scores.data(), row.data(), a,
                     maxima.data() + item * G, sums.data() + item * G);
      }
    }
  });
  T* op = out.data_ptr<T>();  // out is contiguous [B, H, G, D]
  std::vector<float> joined(D);
  for (int64_t bh = 0; bh < B * H; ++bh) {
    for (int64_t g = 0; g < G; ++g) {
      float top = -std::numeric_limits<float>::infinity();
      for (int64_t c = 0; c < chunks; ++c) top = std::max(top, maxima[(bh * chunks + c) * G + g]);
      float total = 0.f;
      std::fill(joined.begin(), joined.end(), 0.f);
      for (int64_t c = 0; c < chunks; ++c) {
        const int64_t at = (bh * chunks + c) * G + g;
        const float w = std::exp(maxima[at] - top);
        total += w * sums[at];
        const float* a = acc.data() + at * D;
        for (int64_t d = 0; d < D; ++d) joined[d] += w * a[d];
      }
      T* dst = op + (bh * G + g) * D;
      for (int64_t d = 0; d < D; ++d) dst[d] = static_cast<T>(joined[d] / total);
    }
  }
}

template <typename T>
void dispatch_d(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, int64_t n, float scale, at::Tensor& out) {
  switch (q.size(3)) {
    case 64: attend<T, 64>(q, k, v, n, scale, out); break;
    case 128: attend<T, 128>(q, k, v, n, scale, out); break;
    default: attend<T, 0>(q, k, v, n, scale, out);
  }
}

at::Tensor decode_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& column,
                            double scale) {
  TORCH_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4, "decode_attention: q [B, H, G, D], k and v [B, H, S, D]");
  TORCH_CHECK(k.sizes() == v.sizes() && k.size(0) == q.size(0) && k.size(1) == q.size(1) && k.size(3) == q.size(3),
              "decode_attention: q, k and v disagree on rows, heads or head size");
  TORCH_CHECK(q.scalar_type() == k.scalar_type() && k.scalar_type() == v.scalar_type(),
              "decode_attention: q, k and v of one dtype");
  TORCH_CHECK(q.stride(3) == 1 && k.stride(3) == 1 && v.stride(3) == 1, "decode_attention: the head dim contiguous");
  TORCH_CHECK(q.device().is_cpu() && column.numel() == 1, "decode_attention: CPU tensors, one column");
  const int64_t n = column.item<int64_t>() + 1;
  TORCH_CHECK(n >= 1 && n <= k.size(2), "decode_attention: column ", n - 1, " outside the buffer of ", k.size(2));
  at::Tensor out = at::empty({q.size(0), q.size(1), q.size(2), q.size(3)}, q.options());
  if (q.scalar_type() == at::kBFloat16) {
    dispatch_d<c10::BFloat16>(q, k, v, n, static_cast<float>(scale), out);
  } else if (q.scalar_type() == at::kFloat) {
    dispatch_d<float>(q, k, v, n, static_cast<float>(scale), out);
  } else {
    TORCH_CHECK(false, "decode_attention: bf16 or fp32, not ", q.scalar_type());
  }
  return out;
}

}  // namespace

TORCH_LIBRARY(spd, m) { m.def("decode_attention(Tensor q, Tensor k, Tensor v, Tensor column, float scale) -> Tensor"); }

TORCH_LIBRARY_IMPL(spd, CPU, m) { m.impl("decode_attention", &decode_attention); }
