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
#include <string>
#include <vector>

namespace spd_kernels {

constexpr int64_t SUPER = 256;  // weights under one super-scale (q4k, q8k)
constexpr int64_t MAX_GROUPS = 1024;  // groups a row (K / G): K up to 16,384 with groups of 16

enum class Kind { Q4, Q4K, Q8, Q8K };

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
      for (int64_t g = 0; g < ng; ++g) {
        const uint8_t* b = c + g * 16;
        float* out = w + g * 32;
        const float sg = s[g], mg = m[g];
        for (int j = 0; j < 16; ++j) {
          out[j] = sg * static_cast<float>(b[j] & 15) + mg;
          out[j + 16] = sg * static_cast<float>(b[j] >> 4) + mg;
        }
      }
      return;
    }
    const int8_t* c = codes8 + n * K;
    for (int64_t g = 0; g < ng; ++g) {
      const float sg = s[g], mg = m[g];
      for (int64_t j = g * G; j < (g + 1) * G; ++j) w[j] = sg * static_cast<float>(c[j]) + mg;
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
