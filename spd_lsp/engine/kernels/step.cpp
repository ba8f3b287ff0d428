// A whole decode step of a Llama-family decoder in one call on the CPU:
//   spd::decode_step(model, x, column, keys, values) -> logits
// model: a `spd.StepModel` holding the weights (the int4 projections as the GGUF's Q4_1 rows, the head as the GGUF's
// Q8_0 blocks or int8 rows, the norms, the rotary tables as bf16); x [M, 1, H] bf16 (one input embedding a row,
// M <= 8, superposed or not), every row at position `column`; keys, values: per layer the cache's buffers
// [M, kv heads, S, D] bf16, whose column `column` the step writes and whose columns 0..column it attends to.
// Out [M, 1, V] bf16.
//
// Why: the compiled step (inductor's graph of ~330 calls behind dynamo's guards) spent ~4 ms of a ~10 ms step outside
// the bytes it must read: dynamo's cache lookup (1.4 ms), the graph's wrapper and small kernels (1.8 ms), allocations,
// and an OpenMP region per call, each ending in a barrier where one thread waits on the other (25-29 % of the serving
// thread's samples sat in libgomp's barrier; docs/performance-step.md, round 14). Here the step is ONE parallel region:
// the threads take the work of each phase (a projection's output rows, the attention's column chunks) from a shared
// counter (so a core slowed by another job takes less), meet at one barrier per phase (5 a layer), and recompute what
// is cheaper to repeat than to share (a row's norm, the int4 kernel's arranged input, the attention's join) each for
// itself.
//
// Numbers: those of the eager fast path with our kernels (FastLM.forward on int4_matvec, decode_attention, the
// pointwise ops, int8_matvec): the same row functions in the same order, so the logits are the same bit for bit
// (tests/engine/test_step_kernel.py).
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>
#include <torch/custom_class.h>
#include <torch/library.h>

#include <omp.h>

#include <algorithm>
#include <vector>

#include "attention.h"
#include "matvec.h"
#include "pointwise.h"

namespace {

using namespace spd_kernels;

// Tensors per layer in the list `Model` is made of (see `Model::Model`).
constexpr int64_t PER_LAYER = 15;
// Output rows a thread takes from the counter at a time: a projection's (32 rows: 9-24 KB of codes), the head's.
constexpr int64_t ROWS = 32;
constexpr int64_t HEAD_ROWS = 512;

struct Projection {
  const uint8_t* codes = nullptr;
  const c10::Half* scales = nullptr;
  const c10::Half* mins = nullptr;
  const bf16* bias = nullptr;  // Qwen2's q/k/v biases; null: none
  int64_t N = 0, K = 0;
};

struct Layer {
  const bf16* attn_norm;
  Projection qkv, out;
  const bf16* mlp_norm;
  Projection gate_up, down;
};

// What one thread keeps for itself through a step (each thread recomputes these rather than wait for them).
struct Scratch {
  std::vector<bf16> x, h, attn;  // the residual stream, a norm of it, the attention's joined output: [M, width]
  std::vector<float> xf, joined, scores;
  Activations a;  // the next projection's input as the int4 kernel reads it
};

class Model : public torch::CustomClassHolder {
 public:
  // tensors: per layer [attn_norm, qkv codes, scales, mins, qkv bias (empty: none), out codes, scales, mins, mlp_norm,
  // gate_up codes, scales, mins, down codes, scales, mins], then [final norm, head codes [V, H] int8, head scales ([V]
  // bf16: int8 rows; [V, H / 32] fp16: the GGUF's Q8_0 blocks), cos [P, D] bf16, sin [P, D] bf16]; sizes: [layers,
  // hidden, heads, kv heads, head dim, intermediate]; numbers: [eps, attention scale].
  Model(std::vector<at::Tensor> tensors, std::vector<int64_t> sizes, std::vector<double> numbers)
      : tensors_(std::move(tensors)) {
    TORCH_CHECK(sizes.size() == 6 && numbers.size() == 2, "spd.StepModel: 6 sizes and 2 numbers");
    layers_ = sizes[0], hidden_ = sizes[1], heads_ = sizes[2], kv_heads_ = sizes[3], dim_ = sizes[4];
    intermediate_ = sizes[5];
    eps_ = static_cast<float>(numbers[0]), scale_ = static_cast<float>(numbers[1]);
    TORCH_CHECK(static_cast<int64_t>(tensors_.size()) == layers_ * PER_LAYER + 5, "spd.StepModel: ",
                layers_ * PER_LAYER + 5, " tensors, not ", tensors_.size());
    TORCH_CHECK(heads_ > 0 && kv_heads_ > 0 && heads_ % kv_heads_ == 0, "spd.StepModel: heads a multiple of kv heads");
    TORCH_CHECK(dim_ == 64 || dim_ == 128, "spd.StepModel: a head dim of 64 or 128, not ", dim_);
    const int64_t qkv = (heads_ + 2 * kv_heads_) * dim_;
    for (int64_t l = 0; l < layers_; ++l) {
      const at::Tensor* t = tensors_.data() + l * PER_LAYER;
      Layer layer;
      layer.attn_norm = vector_of(t[0], hidden_, "attn_norm");
      layer.qkv = projection(t + 1, qkv, hidden_, "qkv");
      if (t[4].numel() > 0) layer.qkv.bias = vector_of(t[4], qkv, "qkv bias");
      layer.out = projection(t + 5, hidden_, heads_ * dim_, "out");
      layer.mlp_norm = vector_of(t[8], hidden_, "mlp_norm");
      layer.gate_up = projection(t + 9, 2 * intermediate_, hidden_, "gate_up");
      layer.down = projection(t + 12, hidden_, intermediate_, "down");
      layers.push_back(layer);
    }
    const at::Tensor* t = tensors_.data() + layers_ * PER_LAYER;
    final_norm_ = vector_of(t[0], hidden_, "final norm");
    TORCH_CHECK(t[1].scalar_type() == at::kChar && t[1].dim() == 2 && t[1].size(1) == hidden_ && t[1].is_contiguous(),
                "spd.StepModel: head codes [V, ", hidden_, "] int8");
    vocab_ = t[1].size(0);
    head_codes_ = t[1].const_data_ptr<int8_t>();
    if (t[2].scalar_type() == at::kHalf) {  // the GGUF's Q8_0 blocks: a scale per 32 codes
      TORCH_CHECK(t[2].numel() == vocab_ * (hidden_ / BLOCK) && t[2].is_contiguous() && hidden_ % BLOCK == 0,
                  "spd.StepModel: head block scales [", vocab_, ", ", hidden_ / BLOCK, "] fp16");
      head_blocks_ = t[2].const_data_ptr<c10::Half>();
    } else {
      head_scales_ = vector_of(t[2], vocab_, "head scales");
    }
    for (int i = 3; i < 5; ++i)
      TORCH_CHECK(t[i].scalar_type() == at::kBFloat16 && t[i].dim() == 2 && t[i].size(1) == dim_ && t[i].is_contiguous(),
                  "spd.StepModel: rotary tables [P, ", dim_, "] bf16");
    positions_ = t[3].size(0);
    cos_ = t[3].const_data_ptr<bf16>(), sin_ = t[4].const_data_ptr<bf16>();
#ifndef SPD_MATVEC
    TORCH_CHECK(false, "spd.StepModel: built without AVX-512 BF16");
#endif
  }

  int64_t vocab() const { return vocab_; }

  at::Tensor step(const at::Tensor& x, int64_t column, at::TensorList keys, at::TensorList values) const {
    TORCH_CHECK(x.dim() == 3 && x.size(1) == 1 && x.size(2) == hidden_ && x.scalar_type() == at::kBFloat16 &&
                    x.is_contiguous() && x.device().is_cpu(),
                "spd::decode_step: x [M, 1, ", hidden_, "] contiguous bf16 on the CPU, not ", x.sizes());
    const int64_t M = x.size(0);
    TORCH_CHECK(M >= 1 && M <= MAX_ROWS, "spd::decode_step: 1 to ", MAX_ROWS, " rows, not ", M);
    TORCH_CHECK(static_cast<int64_t>(keys.size()) == layers_ && static_cast<int64_t>(values.size()) == layers_,
                "spd::decode_step: one key and one value buffer a layer");
    TORCH_CHECK(column >= 0 && column < positions_, "spd::decode_step: column ", column, " past the rotary tables");
    for (int64_t l = 0; l < layers_; ++l)
      for (const at::Tensor& buffer : {keys[l], values[l]})
        TORCH_CHECK(buffer.dim() == 4 && buffer.size(0) == M && buffer.size(1) == kv_heads_ && buffer.size(3) == dim_ &&
                        buffer.stride(3) == 1 && buffer.scalar_type() == at::kBFloat16 && buffer.device().is_cpu() &&
                        column < buffer.size(2),
                    "spd::decode_step: layer ", l, "'s cache buffer [", M, ", ", kv_heads_, ", > ", column, ", ", dim_,
                    "] bf16, not ", buffer.sizes());
    at::Tensor logits = at::empty({M, 1, vocab_}, x.options());
#ifdef SPD_MATVEC
    run(x.const_data_ptr<bf16>(), M, column, keys, values, logits.mutable_data_ptr<bf16>());
#endif
    return logits;
  }

 private:
  static const bf16* vector_of(const at::Tensor& t, int64_t n, const char* what) {
    TORCH_CHECK(t.scalar_type() == at::kBFloat16 && t.numel() == n && t.is_contiguous(), "spd.StepModel: ", what,
                " [", n, "] bf16");
    return t.const_data_ptr<bf16>();
  }

  static Projection projection(const at::Tensor* t, int64_t N, int64_t K, const char* what) {
    TORCH_CHECK(K % (2 * BLOCK) == 0 && K / BLOCK <= 512, "spd.StepModel: ", what, "'s K a multiple of 64");
    TORCH_CHECK(t[0].scalar_type() == at::kByte && t[0].is_contiguous() && t[0].numel() == N * K / 2,
                "spd.StepModel: ", what, " codes [", N, ", ", K / 2, "] uint8");
    for (int i = 1; i < 3; ++i)
      TORCH_CHECK(t[i].scalar_type() == at::kHalf && t[i].is_contiguous() && t[i].numel() == N * (K / BLOCK),
                  "spd.StepModel: ", what, " scales and minima [", N, ", ", K / BLOCK, "] fp16");
    Projection p;
    p.codes = t[0].const_data_ptr<uint8_t>();
    p.scales = t[1].const_data_ptr<c10::Half>();
    p.mins = t[2].const_data_ptr<c10::Half>();
    p.N = N, p.K = K;
    return p;
  }

#ifdef SPD_MATVEC
  // Output rows [n0, n1) of `p` for the M rows arranged in `a`, into out [M, p.N].
  static void rows(const Projection& p, const Activations& a, int64_t M, int64_t n0, int64_t n1, bf16* out) {
    in_passes<Int4>(M, a, p.codes, HalfScales{p.scales, p.mins}, p.K, p.N, n0, n1, out);
  }

  void run(const bf16* x, int64_t M, int64_t column, at::TensorList keys, at::TensorList values, bf16* logits) const {
    const int64_t H = hidden_, D = dim_, G = heads_ / kv_heads_, I = intermediate_;
    const int64_t QKV = (heads_ + 2 * kv_heads_) * D, width = heads_ * D;
    const int64_t n = column + 1, chunks = (n + CHUNK - 1) / CHUNK, items = M * kv_heads_ * chunks;
    // Shared between the threads: each written in one phase, read after the barrier that ends it, and not written
    // again before three more barriers have passed.
    std::vector<bf16> qkv(M * QKV), q(M * width), out(M * H), gate_up(M * 2 * I), act(M * I), down(M * H);
    std::vector<float> maxima(items * G), sums(items * G), acc(items * G * D);
    const bf16* cos = cos_ + column * D;
    const bf16* sin = sin_ + column * D;
    const int threads = at::in_parallel_region() ? 1 : std::max(1, at::get_num_threads());

#pragma omp parallel num_threads(threads)
    {
      thread_local Scratch s;
      s.x.assign(x, x + M * H);
      s.h.resize(M * H);
      s.attn.resize(M * width);
      s.joined.resize(D);
      s.scores.resize(G * CHUNK);
      for (int64_t m = 0; m < M; ++m) norm_row(s.x.data() + m * H, layers[0].attn_norm, s.h.data() + m * H, H, eps_);
      for (int64_t l = 0; l < layers_; ++l) {
        const Layer& L = layers[l];
        bf16* kp = keys[l].data_ptr<bf16>();
        bf16* vp = values[l].data_ptr<bf16>();
        const int64_t ksb = keys[l].stride(0), ksh = keys[l].stride(1), kss = keys[l].stride(2);
        const int64_t vsb = values[l].stride(0), vsh = values[l].stride(1), vss = values[l].stride(2);

        // 1. q, k, v a head at a time: the head's rows, its bias, its rotation; keys and values into the cache.
        arrange_into(s.a, s.h.data(), M, H);
#pragma omp for schedule(dynamic, 1) nowait
        for (int64_t u = 0; u < heads_ + 2 * kv_heads_; ++u) {
          rows(L.qkv, s.a, M, u * D, (u + 1) * D, qkv.data());
          for (int64_t m = 0; m < M; ++m) {
            bf16* head = qkv.data() + m * QKV + u * D;
            if (L.qkv.bias != nullptr) add_row(head, L.qkv.bias + u * D, head, D);
            if (u < heads_) {
              rotary_row(head, cos, sin, q.data() + (m * heads_ + u) * D, 1, D);
            } else if (u < heads_ + kv_heads_) {
              rotary_row(head, cos, sin, kp + m * ksb + (u - heads_) * ksh + column * kss, 1, D);
            } else {
              std::copy(head, head + D, vp + m * vsb + (u - heads_ - kv_heads_) * vsh + column * vss);
            }
          }
        }
#pragma omp barrier

        // 2. attention: each (row, kv head, chunk of columns)'s partial softmax.
#pragma omp for schedule(dynamic, 1) nowait
        for (int64_t item = 0; item < items; ++item) {
          const int64_t c = item % chunks, bh = item / chunks, b = bh / kv_heads_, h = bh % kv_heads_;
          const int64_t s0 = c * CHUNK, cols = std::min(n, s0 + CHUNK) - s0;
          const bf16* qb = q.data() + (b * heads_ + h * G) * D;
          const bf16* kb = kp + b * ksb + h * ksh + s0 * kss;
          const bf16* vb = vp + b * vsb + h * vsh + s0 * vss;
          float* a = acc.data() + item * G * D;
          if (D == 64)
            chunk_bf16<2>(qb, D, scale_, kb, kss, vb, vss, G, cols, s.scores.data(), a, maxima.data() + item * G,
                          sums.data() + item * G);
          else
            chunk_bf16<4>(qb, D, scale_, kb, kss, vb, vss, G, cols, s.scores.data(), a, maxima.data() + item * G,
                          sums.data() + item * G);
        }
#pragma omp barrier

        // 3. the output projection, on the chunks joined (by each thread, for itself).
        for (int64_t bh = 0; bh < M * kv_heads_; ++bh)
          join_chunks(maxima.data() + bh * chunks * G, sums.data() + bh * chunks * G, acc.data() + bh * chunks * G * D,
                      chunks, G, D, s.joined.data(), s.attn.data() + bh * G * D);
        arrange_into(s.a, s.attn.data(), M, width);
#pragma omp for schedule(dynamic, 1) nowait
        for (int64_t n0 = 0; n0 < H; n0 += ROWS) rows(L.out, s.a, M, n0, std::min(H, n0 + ROWS), out.data());
#pragma omp barrier

        // 4. the residual's sum and the MLP's norm; gate and up, a span of both at a time, and SiLU(gate) * up.
        for (int64_t m = 0; m < M; ++m) {
          add_row(s.x.data() + m * H, out.data() + m * H, s.x.data() + m * H, H);
          norm_row(s.x.data() + m * H, L.mlp_norm, s.h.data() + m * H, H, eps_);
        }
        arrange_into(s.a, s.h.data(), M, H);
#pragma omp for schedule(dynamic, 1) nowait
        for (int64_t i0 = 0; i0 < I; i0 += ROWS) {
          const int64_t i1 = std::min(I, i0 + ROWS);
          rows(L.gate_up, s.a, M, i0, i1, gate_up.data());
          rows(L.gate_up, s.a, M, I + i0, I + i1, gate_up.data());
          for (int64_t m = 0; m < M; ++m)
            silu_mul_row(gate_up.data() + m * 2 * I + i0, gate_up.data() + m * 2 * I + I + i0, act.data() + m * I + i0,
                         i1 - i0);
        }
#pragma omp barrier

        // 5. down, then the residual's sum and the next layer's norm.
        arrange_into(s.a, act.data(), M, I);
#pragma omp for schedule(dynamic, 1) nowait
        for (int64_t n0 = 0; n0 < H; n0 += ROWS) rows(L.down, s.a, M, n0, std::min(H, n0 + ROWS), down.data());
#pragma omp barrier
        for (int64_t m = 0; m < M; ++m) {
          add_row(s.x.data() + m * H, down.data() + m * H, s.x.data() + m * H, H);
          if (l + 1 < layers_) norm_row(s.x.data() + m * H, layers[l + 1].attn_norm, s.h.data() + m * H, H, eps_);
        }
      }

      // The head: the final norm, then the int8 rows or the Q8_0 blocks.
      s.xf.resize(M * H);
      for (int64_t m = 0; m < M; ++m) {
        norm_row(s.x.data() + m * H, final_norm_, s.h.data() + m * H, H, eps_);
        for (int64_t k = 0; k < H; ++k) s.xf[m * H + k] = static_cast<float>(s.h[m * H + k]);
      }
#pragma omp for schedule(dynamic, 1)
      for (int64_t n0 = 0; n0 < vocab_; n0 += HEAD_ROWS) {
        const int64_t n1 = std::min(vocab_, n0 + HEAD_ROWS);
        if (head_blocks_ != nullptr)
          in_passes<Q8>(M, s.xf.data(), head_codes_, head_blocks_, H, vocab_, n0, n1, logits);
        else
          in_passes<Int8>(M, s.xf.data(), head_codes_, head_scales_, H, vocab_, n0, n1, logits);
      }
    }
  }
#endif

  std::vector<at::Tensor> tensors_;  // kept alive: `layers` points into them
  std::vector<Layer> layers;
  int64_t layers_ = 0, hidden_ = 0, heads_ = 0, kv_heads_ = 0, dim_ = 0, intermediate_ = 0, vocab_ = 0, positions_ = 0;
  float eps_ = 0.f, scale_ = 0.f;
  const bf16* final_norm_ = nullptr;
  const int8_t* head_codes_ = nullptr;
  const bf16* head_scales_ = nullptr;  // int8 rows: a scale a row
  const c10::Half* head_blocks_ = nullptr;  // or the GGUF's Q8_0 blocks: a scale per 32 codes
  const bf16 *cos_ = nullptr, *sin_ = nullptr;
};

at::Tensor decode(const c10::intrusive_ptr<Model>& model, const at::Tensor& x, int64_t column, at::TensorList keys,
                  at::TensorList values) {
  return model->step(x, column, keys, values);
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(spd, m) {
  m.class_<Model>("StepModel")
      .def(torch::init<std::vector<at::Tensor>, std::vector<int64_t>, std::vector<double>>())
      .def("vocab", &Model::vocab);
  m.def("decode_step(__torch__.torch.classes.spd.StepModel model, Tensor x, int column, Tensor[] keys, Tensor[] values) -> "
        "Tensor");
}

TORCH_LIBRARY_IMPL(spd, CPU, m) { m.impl("decode_step", &decode); }
