// What the model says of each token of a draft, in one pass over each position's logits:
//   spd::token_verdicts(logits [P, V] bf16/fp32, tokens [P] int64, banned [B] int64)
//     -> (logp [P] fp32, best [P] fp32, choice [P] int64, rank [P] int64)
// with logp = log_softmax over the tokens but the banned ones (at -inf), as verification's `_verdict` computes them
// with tensor ops: the token's log-probability, the best one's, its id (the first of equal maxima), and how many
// tokens the model puts above the draft's.
//
// Why: verification spent ~4 ms a request in tensor ops over [positions, 49,152] fp32 copies of the logits (a
// log-softmax, a max, a comparison and a count, each a pass over every row); here each row is read three times
// where it lies. Numbers: log-probabilities as log_softmax's, (x - max) - log(sum), summed in another order (the last
// bit may differ); ranks and choices counted on the logits, whose order the log-probabilities keep.
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/cpu/vec/functional.h>
#include <ATen/cpu/vec/vec.h>
#include <ATen/ops/empty.h>
#include <c10/util/BFloat16.h>
#include <torch/library.h>

#include <cmath>
#include <limits>
#include <tuple>
#include <vector>

namespace {

using Vec = at::vec::Vectorized<float>;

// Widened to fp32 (vectorised), the banned tokens set to -inf (a few dozen specials), then a pass each for the max (and
// its first index), the sum of exp, and the count above the draft's token.
template <typename T>
void row_verdict(const T* x, int64_t V, const int64_t* banned, int64_t B, int64_t token, float* row, float* logp,
                 float* best, int64_t* choice, int64_t* rank) {
  constexpr float NEG = -std::numeric_limits<float>::infinity();
  constexpr int64_t W = Vec::size();
  at::vec::convert(x, row, V);
  for (int64_t b = 0; b < B; ++b) row[banned[b]] = NEG;
  const auto larger = [](Vec& a, Vec& b) { return at::vec::maximum(a, b); };
  const float top = at::vec::reduce_all<float>(larger, row, V);
  int64_t at = 0;
  for (int64_t i = 0; i < V; i += W) {  // the first of equal maxima, as torch.max's index
    const int64_t n = std::min(W, V - i);
    const int live = static_cast<int>((1ull << n) - 1);
    const int hits = ~(Vec::loadu(row + i, n) == Vec(top)).zero_mask() & live;
    if (hits) {
      at = i + __builtin_ctz(static_cast<unsigned>(hits));
      break;
    }
  }
  int64_t i = 0;
  Vec total(0.f);
  const Vec shift(top);
  for (; i + W <= V; i += W) total = total + (Vec::loadu(row + i) - shift).exp();
  float sum = at::vec::vec_reduce_all<float>([](Vec& a, Vec& b) { return a + b; }, total);
  for (; i < V; ++i) sum += std::exp(row[i] - top);
  const float log_sum = std::log(sum);
  // Counted on the logits themselves: log-probabilities keep their order, and no rewriting of the arithmetic (these
  // kernels build with -fassociative-math) can make a token of the draft's own logit count as above it.
  const float own = row[token];
  const Vec mine(own);
  int64_t above = 0;
  for (int64_t j = 0; j < V; j += W) {
    const int64_t n = std::min(W, V - j);
    const int live = static_cast<int>((1ull << n) - 1);
    above += __builtin_popcount(static_cast<unsigned>(~(Vec::loadu(row + j, n) > mine).zero_mask() & live));
  }
  *logp = own == NEG ? NEG : (own - top) - log_sum;
  *best = (top - top) - log_sum;
  *choice = at;
  *rank = above;
}

std::tuple<at::Tensor, at::Tensor, at::Tensor, at::Tensor> token_verdicts(const at::Tensor& logits,
                                                                          const at::Tensor& tokens,
                                                                          const at::Tensor& banned) {
  TORCH_CHECK(logits.dim() == 2 && logits.stride(1) == 1 && logits.device().is_cpu() &&
                  (logits.scalar_type() == at::kBFloat16 || logits.scalar_type() == at::kFloat),
              "token_verdicts: logits [P, V] bf16 or fp32 on the CPU, rows contiguous");
  const int64_t P = logits.size(0), V = logits.size(1);
  TORCH_CHECK(tokens.dim() == 1 && tokens.size(0) == P && tokens.scalar_type() == at::kLong && tokens.is_contiguous(),
              "token_verdicts: tokens [", P, "] int64");
  TORCH_CHECK(banned.dim() == 1 && banned.scalar_type() == at::kLong && banned.is_contiguous(),
              "token_verdicts: banned [B] int64");
  const int64_t *tp = tokens.data_ptr<int64_t>(), *bp = banned.data_ptr<int64_t>(), B = banned.numel();
  for (int64_t p = 0; p < P; ++p) TORCH_CHECK(tp[p] >= 0 && tp[p] < V, "token_verdicts: token ", tp[p], " not in 0..", V - 1);
  for (int64_t b = 0; b < B; ++b) TORCH_CHECK(bp[b] >= 0 && bp[b] < V, "token_verdicts: banned token ", bp[b], " not in 0..", V - 1);
  at::Tensor logp = at::empty({P}, logits.options().dtype(at::kFloat)), best = at::empty({P}, logp.options());
  at::Tensor choice = at::empty({P}, tokens.options()), rank = at::empty({P}, tokens.options());
  float *lp = logp.data_ptr<float>(), *bs = best.data_ptr<float>();
  int64_t *cp = choice.data_ptr<int64_t>(), *rp = rank.data_ptr<int64_t>();
  at::parallel_for(0, P, 1, [&](int64_t p0, int64_t p1) {
    std::vector<float> row(V);
    for (int64_t p = p0; p < p1; ++p) {
      if (logits.scalar_type() == at::kBFloat16)
        row_verdict(logits.data_ptr<c10::BFloat16>() + p * logits.stride(0), V, bp, B, tp[p], row.data(), lp + p,
                    bs + p, cp + p, rp + p);
      else
        row_verdict(logits.data_ptr<float>() + p * logits.stride(0), V, bp, B, tp[p], row.data(), lp + p, bs + p,
                    cp + p, rp + p);
    }
  });
  return {logp, best, choice, rank};
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(spd, m) {
  m.def("token_verdicts(Tensor logits, Tensor tokens, Tensor banned) -> (Tensor, Tensor, Tensor, Tensor)");
}

TORCH_LIBRARY_IMPL(spd, CPU, m) { m.impl("token_verdicts", &token_verdicts); }
