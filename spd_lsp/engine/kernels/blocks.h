// A weight [N, K] held as the GGUF's blocks, in one of four kinds every GGUF weight type converts to exactly
// (engine/fast/formats.py):
//   "q4"  : 4-bit codes, a scale and a minimum a group of 32 (Q4_0, Q4_1): w = s * q + m
//   "q4k" : 4-bit codes, 6-bit scales and minima a group of 32 under fp16 super-scales a 256 (Q4_K): w = d sc q - dmin mn
//   "q8"  : 8-bit codes, a scale (and a minimum) a group of G = 16 or 32 (Q8_0, Q5_0, Q5_1, IQ4_NL): w = s * q (+ m)
//   "q8k" : 8-bit codes, 8-bit sub-scales (and minima) a group of G under fp16 super-scales a 256 (Q5_K, Q6_K, IQ4_XS)
// 4-bit codes: [N, K / 2] bytes, byte j of a group holding element j in its low nibble and j + 16 in its high one.
// Each row's scales and minima widen to fp32 first (`widen`); every kernel then reads the codes with those.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#if defined(__AVX2__) || defined(__AVX512F__)
#include <immintrin.h>
#elif defined(__ARM_NEON)
#include <arm_neon.h>
#endif

namespace spd_kernels {

constexpr int64_t SUPER = 256;  // weights under one super-scale (q4k, q8k)
constexpr int64_t MAX_GROUPS = 1024;  // groups a row (K / G): K up to 16,384 with groups of 16

enum class Kind { Q4, Q4K, Q8, Q8K };

// A 4-bit group's 32 codes as fp32 into w: byte j holds element j (low nibble) and j + 16 (high). The nibbles are
// split in one vector register (compilers left to themselves split them byte by byte).
inline void codes_q4(const uint8_t* codes, float* w) {
#if defined(__AVX2__) || defined(__AVX512F__)
  const __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(codes));
  const __m128i mask = _mm_set1_epi8(15);
  const __m128i low = _mm_and_si128(packed, mask), high = _mm_and_si128(_mm_srli_epi16(packed, 4), mask);
#if defined(__AVX512F__)
  _mm512_storeu_ps(w, _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(low)));
  _mm512_storeu_ps(w + 16, _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(high)));
#else
  _mm256_storeu_ps(w, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(low)));
  _mm256_storeu_ps(w + 8, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(low, 8))));
  _mm256_storeu_ps(w + 16, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(high)));
  _mm256_storeu_ps(w + 24, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(high, 8))));
#endif
#elif defined(__ARM_NEON)
  const uint8x16_t packed = vld1q_u8(codes);
  const uint8x16_t halves[2] = {vandq_u8(packed, vdupq_n_u8(15)), vshrq_n_u8(packed, 4)};
  for (int h = 0; h < 2; ++h) {
    const uint16x8_t lo = vmovl_u8(vget_low_u8(halves[h])), hi = vmovl_u8(vget_high_u8(halves[h]));
    vst1q_f32(w + 16 * h, vcvtq_f32_u32(vmovl_u16(vget_low_u16(lo))));
    vst1q_f32(w + 16 * h + 4, vcvtq_f32_u32(vmovl_u16(vget_high_u16(lo))));
    vst1q_f32(w + 16 * h + 8, vcvtq_f32_u32(vmovl_u16(vget_low_u16(hi))));
    vst1q_f32(w + 16 * h + 12, vcvtq_f32_u32(vmovl_u16(vget_high_u16(hi))));
  }
#else
  for (int j = 0; j < 16; ++j) {
    w[j] = static_cast<float>(codes[j] & 15);
    w[j + 16] = static_cast<float>(codes[j] >> 4);
  }
#endif
}

// An 8-bit group's G codes (16 or 32) as fp32 into w.
template <int G>
inline void codes_q8(const int8_t* codes, float* w) {
#if defined(__AVX512F__)
  for (int j = 0; j < G; j += 16)
    _mm512_storeu_ps(w + j, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(
                                _mm_loadu_si128(reinterpret_cast<const __m128i*>(codes + j)))));
#elif defined(__AVX2__)
  for (int j = 0; j < G; j += 8)
    _mm256_storeu_ps(w + j, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(
                                _mm_loadl_epi64(reinterpret_cast<const __m128i*>(codes + j)))));
#elif defined(__ARM_NEON)
  for (int j = 0; j < G; j += 16) {
    const int8x16_t c = vld1q_s8(codes + j);
    const int16x8_t lo = vmovl_s8(vget_low_s8(c)), hi = vmovl_s8(vget_high_s8(c));
    vst1q_f32(w + j, vcvtq_f32_s32(vmovl_s16(vget_low_s16(lo))));
    vst1q_f32(w + j + 4, vcvtq_f32_s32(vmovl_s16(vget_high_s16(lo))));
    vst1q_f32(w + j + 8, vcvtq_f32_s32(vmovl_s16(vget_low_s16(hi))));
    vst1q_f32(w + j + 12, vcvtq_f32_s32(vmovl_s16(vget_high_s16(hi))));
  }
#else
  for (int j = 0; j < G; ++j) w[j] = static_cast<float>(codes[j]);
#endif
}

struct Blocks {
  Kind kind = Kind::Q4;
  int64_t N = 0, K = 0, G = 32;
  const uint8_t* codes4 = nullptr;  // q4, q4k: [N, K / 2]
  const int8_t* codes8 = nullptr;  // q8, q8k: [N, K]
  const c10::Half* scales = nullptr;  // q4, q8: [N, K / G]
  const c10::Half* mins = nullptr;  // q4, q8 (or none): [N, K / G]
  const uint8_t* sub_u8 = nullptr;  // q4k, q8k: [N, K / G] unsigned sub-scales ...
  const int8_t* sub_i8 = nullptr;  // ... or signed ones (Q6_K, IQ4_XS)
  const uint8_t* sub_min = nullptr;  // q4k, q8k (or none): [N, K / G]
  const c10::Half* d = nullptr;  // q4k, q8k: [N, K / 256]
  const c10::Half* dmin = nullptr;  // q4k, q8k with minima: [N, K / 256]

  int64_t groups() const { return K / G; }
  bool four_bit() const { return kind == Kind::Q4 || kind == Kind::Q4K; }

  // Row n's per-group scales and minima in fp32 (s, m: room for groups()).
  inline void widen(int64_t n, float* s, float* m) const {
    const int64_t ng = groups();
    if (kind == Kind::Q4 || kind == Kind::Q8) {
      for (int64_t g = 0; g < ng; ++g) {
        s[g] = static_cast<float>(scales[n * ng + g]);
        m[g] = mins != nullptr ? static_cast<float>(mins[n * ng + g]) : 0.f;
      }
      return;
    }
    const int64_t per_super = SUPER / G, supers = K / SUPER;
    for (int64_t u = 0; u < supers; ++u) {  // each super-scale widened once, its groups' sub-scales times it
      const float du = static_cast<float>(d[n * supers + u]);
      const float mu = sub_min != nullptr ? -static_cast<float>(dmin[n * supers + u]) : 0.f;
      const int64_t g0 = u * per_super;
      if (sub_u8 != nullptr)
        for (int64_t j = 0; j < per_super; ++j) s[g0 + j] = du * static_cast<float>(sub_u8[n * ng + g0 + j]);
      else
        for (int64_t j = 0; j < per_super; ++j) s[g0 + j] = du * static_cast<float>(sub_i8[n * ng + g0 + j]);
      if (sub_min != nullptr)
        for (int64_t j = 0; j < per_super; ++j) m[g0 + j] = mu * static_cast<float>(sub_min[n * ng + g0 + j]);
      else
        for (int64_t j = 0; j < per_super; ++j) m[g0 + j] = 0.f;
    }
  }

  // Row n's weights in fp32 (w: room for K; s, m: for groups()).
  inline void row(int64_t n, float* w, float* s, float* m) const {
    widen(n, s, m);
    const int64_t ng = groups();
    if (four_bit()) {
      const uint8_t* c = codes4 + n * (K / 2);
      for (int64_t g = 0; g < ng; ++g) codes_q4(c + g * 16, w + g * 32);
    } else if (G == 32) {
      for (int64_t g = 0; g < ng; ++g) codes_q8<32>(codes8 + n * K + g * 32, w + g * 32);
    } else {
      for (int64_t g = 0; g < ng; ++g) codes_q8<16>(codes8 + n * K + g * 16, w + g * 16);
    }
    for (int64_t g = 0; g < ng; ++g) {  // then each group's scale and minimum, a vectorised pass over w
      const float sg = s[g], mg = m[g];
      for (int64_t j = g * G; j < (g + 1) * G; ++j) w[j] = sg * w[j] + mg;
    }
  }

  // Bytes of row n's codes, scales and minima: what a matvec reads of it.
  int64_t row_bytes() const {
    const int64_t ng = groups();
    int64_t bytes = four_bit() ? K / 2 : K;
    if (kind == Kind::Q4 || kind == Kind::Q8) return bytes + ng * 2 * (mins != nullptr ? 2 : 1);
    return bytes + ng * (sub_min != nullptr ? 2 : 1) + (K / SUPER) * 2 * (sub_min != nullptr ? 2 : 1);
  }
};

// The blocks of `kind` from its tensors (see above, in order: codes, then q4/q8: scales[, mins]; q4k/q8k: sub-scales,
// d[, sub-minima, dmin]); checked, else a clear error naming `what`.
Blocks blocks_of(const std::string& kind, at::TensorList parts, int64_t group, const char* what);

}  // namespace spd_kernels
