// The bf16 forward's pointwise rows (pointwise.cpp's ops and step.cpp's fused step share them): see pointwise.cpp for
// the numbers (the tensor ops' bf16 roundings in the same places).
#pragma once

#include <ATen/cpu/vec/functional.h>
#include <ATen/cpu/vec/vec.h>
#include <c10/util/BFloat16.h>

#include <algorithm>
#include <cmath>
#include <utility>

namespace spd_kernels {

using bf16 = c10::BFloat16;
using Vec = at::vec::Vectorized<float>;
using VecB = at::vec::Vectorized<bf16>;  // 2 x Vec::size() lanes
constexpr int64_t STEP = VecB::size();

inline std::pair<Vec, Vec> load(const bf16* p, int64_t n) {
  auto [a, b] = at::vec::convert_to_float<bf16>(VecB::loadu(p, static_cast<int>(n)));
  return {a, b};
}

inline void store(bf16* p, const Vec& a, const Vec& b, int64_t n) {
  at::vec::convert_from_float<bf16>(a, b).store(p, static_cast<int>(n));
}

// bf16 rounding of fp32 lanes, back in fp32: where the tensor ops' intermediate results are bf16 tensors.
inline std::pair<Vec, Vec> round(const Vec& a, const Vec& b) {
  auto [x, y] = at::vec::convert_to_float<bf16>(at::vec::convert_from_float<bf16>(a, b));
  return {x, y};
}

// out = weight * bf16(h * rsqrt(mean(h^2) + eps)), h = fp32(x): transformers' LlamaRMSNorm.
inline void norm_row(const bf16* x, const bf16* w, bf16* out, int64_t width, float eps) {
  Vec acc(0.f);
  for (int64_t i = 0; i < width; i += STEP) {
    auto [a, b] = load(x + i, std::min(STEP, width - i));  // lanes past the end load zeros
    acc = at::vec::fmadd(a, a, acc);
    acc = at::vec::fmadd(b, b, acc);
  }
  float lanes[Vec::size()], total = 0.f;
  acc.store(lanes);
  for (float lane : lanes) total += lane;
  const float r = 1.f / std::sqrt(total / width + eps);
  const Vec scale(r);
  for (int64_t i = 0; i < width; i += STEP) {
    const int64_t n = std::min(STEP, width - i);
    auto [a, b] = load(x + i, n);
    auto [ha, hb] = round(a * scale, b * scale);
    auto [wa, wb] = load(w + i, n);
    store(out + i, wa * ha, wb * hb, n);
  }
}

// sum = bf16(x + y) (a residual's sum), row by row.
inline void add_row(const bf16* x, const bf16* y, bf16* sum, int64_t width) {
  for (int64_t i = 0; i < width; i += STEP) {
    const int64_t n = std::min(STEP, width - i);
    auto [a, b] = load(x + i, n);
    auto [c, d] = load(y + i, n);
    store(sum + i, a + c, b + d, n);
  }
}

// out [width] = bf16(bf16(silu(gate)) * up), as F.silu(gate) * up on bf16 tensors.
inline void silu_mul_row(const bf16* gate, const bf16* up, bf16* out, int64_t width) {
  const Vec one(1.f);
  for (int64_t i = 0; i < width; i += STEP) {
    const int64_t n = std::min(STEP, width - i);
    auto [a, b] = load(gate + i, n);
    auto [sa, sb] = round(a / (one + a.neg().exp_u20()), b / (one + b.neg().exp_u20()));
    auto [ua, ub] = load(up + i, n);
    store(out + i, sa * ua, sb * ub, n);
  }
}

// One position's heads [heads, D] -> out [heads, D]: x * cos + rotate_half(x) * sin (cos, sin [D] bf16), each product
// rounded to bf16 before the sum, as FastLM._rotate on bf16 tensors.
inline void rotary_row(const bf16* in, const bf16* c, const bf16* s, bf16* o, int64_t heads, int64_t D) {
  const int64_t half = D / 2;
  for (int64_t i = 0; i < half; i += STEP) {  // a position's cos and sin loaded once for all heads
    const int64_t n = std::min(STEP, half - i);
    auto [c1a, c1b] = load(c + i, n);
    auto [c2a, c2b] = load(c + half + i, n);
    auto [s1a, s1b] = load(s + i, n);
    auto [s2a, s2b] = load(s + half + i, n);
    for (int64_t h = 0; h < heads; ++h) {
      auto [x1a, x1b] = load(in + h * D + i, n);
      auto [x2a, x2b] = load(in + h * D + half + i, n);
      auto [pa, pb] = round(x1a * c1a, x1b * c1b);  // first half: x1 cos - x2 sin
      auto [qa, qb] = round(x2a * s1a, x2b * s1b);
      store(o + h * D + i, pa - qa, pb - qb, n);
      auto [ra, rb] = round(x2a * c2a, x2b * c2b);  // second half: x2 cos + x1 sin
      auto [ta, tb] = round(x1a * s2a, x1b * s2b);
      store(o + h * D + half + i, ra + ta, rb + tb, n);
    }
  }
}

}  // namespace spd_kernels
