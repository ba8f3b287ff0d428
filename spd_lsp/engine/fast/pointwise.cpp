// The eager forward's pointwise work in bf16, fused: spd_pointwise::{rms_norm, add_rms_norm, silu_mul, rotary}.
//
// Why: a 512-token prefill ran ~270 small ATen ops a pass for its norms, rotary, SiLU and residuals (each reading and
// writing its tensor, the norms through fp32 copies): ~80 ms of a ~490 ms prefill on 2 threads, a sixth of it, where
// the matrix products run near the CPU's bf16 peak. Here each is one pass over its rows.
//
// Numbers: those of the tensor ops they replace (FastLM._norm, _rotate, F.silu(gate) * up) with their bf16 roundings
// in the same places; the sums of squares and exp add in another order (exp_u20, as prefill.cpp), so an output may
// differ from theirs in its last bf16 bit.
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/cpu/vec/functional.h>
#include <ATen/cpu/vec/vec.h>
#include <ATen/ops/empty.h>
#include <c10/util/BFloat16.h>
#include <torch/library.h>

#include <cmath>
#include <tuple>
#include <vector>

namespace {

using bf16 = c10::BFloat16;
using Vec = at::vec::Vectorized<float>;
using VecB = at::vec::Vectorized<bf16>;  // 2 x Vec::size() lanes
constexpr int64_t STEP = VecB::size();
constexpr int64_t GRAIN = 32768;  // elements a thread takes at least: small calls (a decode step's) stay on one

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

void check(const at::Tensor& t, const char* what) {
  TORCH_CHECK(t.device().is_cpu() && t.scalar_type() == at::kBFloat16, what, " must be a bf16 CPU tensor");
  TORCH_CHECK(t.dim() >= 1 && t.stride(-1) == 1, what, " must have a contiguous last dim");
  TORCH_CHECK(t.size(-1) > 0, what, "'s last dim must not be empty");
}

// The rows of a [..., W] tensor whose last dim is contiguous, any strides before it: row r's offset in elements.
struct Rows {
  std::vector<int64_t> sizes, strides;
  int64_t count = 1;
  explicit Rows(const at::Tensor& t) {
    for (int64_t d = 0; d + 1 < t.dim(); ++d) {
      sizes.push_back(t.size(d));
      strides.push_back(t.stride(d));
      count *= t.size(d);
    }
  }
  int64_t offset(int64_t row) const {
    int64_t out = 0;
    for (int64_t d = static_cast<int64_t>(sizes.size()) - 1; d >= 0; --d) {
      out += (row % sizes[d]) * strides[d];
      row /= sizes[d];
    }
    return out;
  }
};

// out = weight * bf16(h * rsqrt(mean(h^2) + eps)), h = fp32(x): transformers' LlamaRMSNorm.
void norm_row(const bf16* x, const bf16* w, bf16* out, int64_t width, float eps) {
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

at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps) {
  check(x, "x");
  check(weight, "weight");
  const int64_t width = x.size(-1);
  TORCH_CHECK(weight.dim() == 1 && weight.size(0) == width, "weight must be [", width, "]");
  const Rows rows(x);
  at::Tensor out = at::empty(x.sizes(), x.options());
  const bf16* xp = x.const_data_ptr<bf16>();
  const bf16* wp = weight.const_data_ptr<bf16>();
  bf16* op = out.mutable_data_ptr<bf16>();
  at::parallel_for(0, rows.count, std::max<int64_t>(1, GRAIN / width), [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row)
      norm_row(xp + rows.offset(row), wp, op + row * width, width, static_cast<float>(eps));
  });
  return out;
}

// (x + y, rms_norm(x + y)): a residual's sum and the next norm of it, in one pass over the rows.
std::tuple<at::Tensor, at::Tensor> add_rms_norm(const at::Tensor& x, const at::Tensor& y, const at::Tensor& weight,
                                                double eps) {
  check(x, "x");
  check(y, "y");
  check(weight, "weight");
  TORCH_CHECK(x.sizes() == y.sizes(), "x and y must have one shape, got ", x.sizes(), " and ", y.sizes());
  const int64_t width = x.size(-1);
  TORCH_CHECK(weight.dim() == 1 && weight.size(0) == width, "weight must be [", width, "]");
  const Rows xr(x), yr(y);
  at::Tensor sum = at::empty(x.sizes(), x.options());
  at::Tensor out = at::empty(x.sizes(), x.options());
  const bf16 *xp = x.const_data_ptr<bf16>(), *yp = y.const_data_ptr<bf16>(), *wp = weight.const_data_ptr<bf16>();
  bf16 *sp = sum.mutable_data_ptr<bf16>(), *op = out.mutable_data_ptr<bf16>();
  at::parallel_for(0, xr.count, std::max<int64_t>(1, GRAIN / width), [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      bf16* s = sp + row * width;
      const bf16 *xrow = xp + xr.offset(row), *yrow = yp + yr.offset(row);
      for (int64_t i = 0; i < width; i += STEP) {
        const int64_t n = std::min(STEP, width - i);
        auto [a, b] = load(xrow + i, n);
        auto [c, d] = load(yrow + i, n);
        store(s + i, a + c, b + d, n);
      }
      norm_row(s, wp, op + row * width, width, static_cast<float>(eps));
    }
  });
  return {sum, out};
}

// [..., 2I] (gate, then up) -> [..., I]: bf16(bf16(silu(gate)) * up), as F.silu(gate) * up on bf16 tensors.
at::Tensor silu_mul(const at::Tensor& gate_up) {
  check(gate_up, "gate_up");
  const int64_t width = gate_up.size(-1) / 2;
  TORCH_CHECK(gate_up.size(-1) == 2 * width, "gate_up's last dim must be even");
  const Rows rows(gate_up);
  std::vector<int64_t> shape(gate_up.sizes().begin(), gate_up.sizes().end());
  shape.back() = width;
  at::Tensor out = at::empty(shape, gate_up.options());
  const bf16* gp = gate_up.const_data_ptr<bf16>();
  bf16* op = out.mutable_data_ptr<bf16>();
  const Vec one(1.f);
  at::parallel_for(0, rows.count, std::max<int64_t>(1, GRAIN / width), [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const bf16* g = gp + rows.offset(row);
      for (int64_t i = 0; i < width; i += STEP) {
        const int64_t n = std::min(STEP, width - i);
        auto [a, b] = load(g + i, n);
        auto [sa, sb] = round(a / (one + a.neg().exp_u20()), b / (one + b.neg().exp_u20()));
        auto [ua, ub] = load(g + width + i, n);
        store(op + row * width + i, sa * ua, sb * ub, n);
      }
    }
  });
  return out;
}

// x [B, T, heads * D] (rows strided: a view of the fused projection's output), cos, sin [B, T, D] -> [B, T, heads, D]:
// x * cos + rotate_half(x) * sin, each product rounded to bf16 before the sum, as FastLM._rotate on bf16 tensors.
at::Tensor rotary(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin, int64_t heads) {
  check(x, "x");
  check(cos, "cos");
  check(sin, "sin");
  TORCH_CHECK(x.dim() == 3 && cos.dim() == 3 && sin.dim() == 3, "x, cos and sin must be [B, T, ...]");
  const int64_t B = x.size(0), T = x.size(1), D = cos.size(2), half = D / 2;
  TORCH_CHECK(heads > 0 && x.size(2) == heads * D && D % 2 == 0, "x must be [B, T, heads * D] with an even D");
  TORCH_CHECK(cos.sizes() == sin.sizes() && cos.size(0) == B && cos.size(1) == T, "cos and sin must be [B, T, D]");
  at::Tensor out = at::empty({B, T, heads, D}, x.options());
  const bf16 *xp = x.const_data_ptr<bf16>(), *cp = cos.const_data_ptr<bf16>(), *sp = sin.const_data_ptr<bf16>();
  bf16* op = out.mutable_data_ptr<bf16>();
  at::parallel_for(0, B * T, std::max<int64_t>(1, GRAIN / (heads * D)), [&](int64_t begin, int64_t end) {
    for (int64_t bt = begin; bt < end; ++bt) {
      const int64_t b = bt / T, t = bt % T;
      const bf16* c = cp + b * cos.stride(0) + t * cos.stride(1);
      const bf16* s = sp + b * sin.stride(0) + t * sin.stride(1);
      const bf16* in = xp + b * x.stride(0) + t * x.stride(1);
      bf16* o = op + bt * heads * D;
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
  });
  return out;
}

}  // namespace

TORCH_LIBRARY(spd_pointwise, m) {
  m.def("rms_norm(Tensor x, Tensor weight, float eps) -> Tensor");
  m.def("add_rms_norm(Tensor x, Tensor y, Tensor weight, float eps) -> (Tensor, Tensor)");
  m.def("silu_mul(Tensor gate_up) -> Tensor");
  m.def("rotary(Tensor x, Tensor cos, Tensor sin, int heads) -> Tensor");
}

TORCH_LIBRARY_IMPL(spd_pointwise, CPU, m) {
  m.impl("rms_norm", &rms_norm);
  m.impl("add_rms_norm", &add_rms_norm);
  m.impl("silu_mul", &silu_mul);
  m.impl("rotary", &rotary);
}
