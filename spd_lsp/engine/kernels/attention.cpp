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

#include "attention.h"

namespace {

using namespace spd_kernels;


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
  for (int64_t bh = 0; bh < B * H; ++bh)
    join_chunks(maxima.data() + bh * chunks * G, sums.data() + bh * chunks * G, acc.data() + bh * chunks * G * D, chunks,
                G, D, joined.data(), op + bh * G * D);
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

TORCH_LIBRARY_FRAGMENT(spd, m) { m.def("decode_attention(Tensor q, Tensor k, Tensor v, Tensor column, float scale) -> Tensor"); }

TORCH_LIBRARY_IMPL(spd, CPU, m) { m.impl("decode_attention", &decode_attention); }
