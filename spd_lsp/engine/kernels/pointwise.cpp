// The eager forward's pointwise work in bf16, fused: spd::{rms_norm, add_rms_norm, silu_mul, rotary}.
//
// Why: a 512-token prefill ran ~270 small ATen ops a pass for its norms, rotary, SiLU and residuals (each reading and
// writing its tensor, the norms through fp32 copies): ~80 ms of a ~490 ms prefill on 2 threads, a sixth of it, where
// the matrix products run near the CPU's bf16 peak. Here each is one pass over its rows.
//
// Numbers: those of the tensor ops they replace (FastLM._norm, _rotate, F.silu(gate) * up) with their bf16 roundings
// in the same places; the sums of squares and exp add in another order (exp_u20, as prompt.cpp), so an output may
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

#include "pointwise.h"

namespace {

using namespace spd_kernels;
constexpr int64_t GRAIN = 32768;  // elements a thread takes at least: small calls (a decode step's) stay on one

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
      add_row(xrow, yrow, s, width);
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
  at::parallel_for(0, rows.count, std::max<int64_t>(1, GRAIN / width), [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const bf16* g = gp + rows.offset(row);
      silu_mul_row(g, g + width, op + row * width, width);
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
      rotary_row(in, c, s, op + bt * heads * D, heads, D);
    }
  });
  return out;
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(spd, m) {
  m.def("rms_norm(Tensor x, Tensor weight, float eps) -> Tensor");
  m.def("add_rms_norm(Tensor x, Tensor y, Tensor weight, float eps) -> (Tensor, Tensor)");
  m.def("silu_mul(Tensor gate_up) -> Tensor");
  m.def("rotary(Tensor x, Tensor cos, Tensor sin, int heads) -> Tensor");
}

TORCH_LIBRARY_IMPL(spd, CPU, m) {
  m.impl("rms_norm", &rms_norm);
  m.impl("add_rms_norm", &add_rms_norm);
  m.impl("silu_mul", &silu_mul);
  m.impl("rotary", &rotary);
}
