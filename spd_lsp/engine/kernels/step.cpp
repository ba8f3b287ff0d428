// A whole decode step of a decoder the fast path covers (Llama, Qwen2, Qwen3, Gemma-3) in one call on the CPU:
//   spd::decode_step(model, x, column, keys, values) -> logits
// model: a `spd.StepModel`, built piece by piece from a FastLM (engine/fast/fused.py): per layer its norms (bf16,
// or Gemma's 1 + weight in fp32), q/k/v biases, q/k norms, each projection as segments of the GGUF's blocks of any kind
// (blocks.h: a Q4_K_M file's q/k/v is Q4_K, Q4_K and Q6_K), the head likewise (or int8 rows), the rotary tables;
// x [M, 1, H] bf16 (one input embedding a row, M <= 8, superposed or not), every row at position `column`; keys,
// values: per layer the cache's buffers [M, kv heads, S, D] bf16, whose column `column` the step writes and whose
// columns up to it (a sliding layer: its last `window`) it attends to. Out [M, 1, V] bf16.
//
// Why: the compiled step (inductor's graph of ~330 calls behind dynamo's guards) spent ~4 ms of a ~10 ms step outside
// the bytes it must read (dynamo's cache lookup, the graph's wrapper and small kernels, allocations, and an OpenMP
// region per call, each ending in a barrier). Here the step is ONE parallel region: the threads take the work of each
// phase (a projection's output rows, the attention's column chunks) from a shared counter (so a core slowed by
// another job takes less), meet at one barrier per phase, and recompute what is cheaper to repeat than to share (a
// row's norm, the projections' arranged input, the attention's join) each for itself.
//
// Numbers: those of the eager fast path with our kernels (FastLM.forward on the matvec kernels, decode_attention, the
// pointwise ops): the same row functions in the same order, so the same logits bit for bit on Llama/Qwen2 and Q4_0/
// Q4_1/Q8_0 blocks (tests/engine/test_fused_step.py); Gemma's GeGLU and norms as the tensor ops round them.
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>
#include <torch/custom_class.h>
#include <torch/library.h>

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "attention.h"
#include "blocks.h"
#include "matvec.h"
#include "pointwise.h"

namespace {

using namespace spd_kernels;

// Output rows a thread takes from the counter at a time: a projection's (32 rows: 9-24 KB of codes), the head's.
constexpr int64_t ROWS = 32;
constexpr int64_t HEAD_ROWS = 512;
enum Role { QKV = 0, OUT = 1, GATE_UP = 2, DOWN = 3, HEAD = 4 };

// One projection's weights: segments of blocks stacked along the outputs (rows [start, start + N) each), or int8 rows
// with a scale each (the head of `outputWeights: int8`).
struct Projection {
  std::vector<Blocks> segments;
  std::vector<int64_t> starts;
  int64_t N = 0, K = 0;
  bool four = false, eight = false;  // some segment is on the 4-bit / 8-bit float kernels: which inputs it needs
  bool nibble = false, natural = false;  // some segment is a 4-bit / 8-bit K-quant on int8 activations (matvec.h)
  const int8_t* int8_codes = nullptr;
  const bf16* int8_scales = nullptr;
};

struct Layer {
  const bf16* attn_norm = nullptr;  // Llama's norms (bf16) ...
  const float* attn_norm_f = nullptr;  // ... or Gemma's (1 + weight, fp32)
  const bf16* mlp_norm = nullptr;
  const float* mlp_norm_f = nullptr;
  const bf16* q_norm = nullptr;
  const float* q_norm_f = nullptr;
  const bf16* k_norm = nullptr;
  const float* k_norm_f = nullptr;
  const float* post_attn_f = nullptr;  // Gemma-3's norms of the attention's and the MLP's outputs
  const float* post_mlp_f = nullptr;
  const bf16* qkv_bias = nullptr;  // Qwen2's; null: none
  bool sliding = false;
  int64_t rope = 0;
  Projection proj[4];
};

// A projection's input as its kernels read it: arranged for the 4-bit kernel, and in fp32 with its groups' sums.
struct Inputs {
  Activations a;
  std::vector<float> xf, xs;
#ifdef SPD_INT8_DOT
  QuantisedX q;
#endif
};

// What one thread keeps for itself through a step (each thread recomputes these rather than wait for them).
struct Scratch {
  std::vector<bf16> x, h, attn, tmp;  // the residual stream, a norm of it, the attention's joined output: [M, width]
  std::vector<float> joined, scores;
  Inputs in;
};

// out = bf16(fp32 norm of x * w) for Gemma's norms (transformers' Gemma3RMSNorm: fp32 throughout, cast at the end).
inline void norm_row_f(const bf16* x, const float* w, bf16* out, int64_t width, float eps) {
  float total = 0.f;
  for (int64_t i = 0; i < width; ++i) {
    const float v = static_cast<float>(x[i]);
    total += v * v;
  }
  const float r = 1.f / std::sqrt(total / width + eps);
  for (int64_t i = 0; i < width; ++i) out[i] = bf16(static_cast<float>(x[i]) * r * w[i]);
}

inline void norm_any(const bf16* x, const bf16* w, const float* wf, bf16* out, int64_t width, float eps) {
  if (wf != nullptr)
    norm_row_f(x, wf, out, width, eps);
  else
    norm_row(x, w, out, width, eps);
}

// out = bf16(bf16(gelu_tanh(gate)) * up): F.gelu(gate, approximate="tanh") * up on bf16 tensors.
inline void gelu_mul_row(const bf16* gate, const bf16* up, bf16* out, int64_t width) {
  constexpr float kAlpha = 0.7978845608028654f;  // sqrt(2 / pi)
  for (int64_t i = 0; i < width; ++i) {
    const float g = static_cast<float>(gate[i]);
    const float act = static_cast<float>(bf16(0.5f * g * (1.f + std::tanh(kAlpha * (g + 0.044715f * g * g * g)))));
    out[i] = bf16(act * static_cast<float>(up[i]));
  }
}

void prepare_inputs(Inputs& in, const Projection& p, const bf16* x, int64_t M) {
  const int64_t K = p.K;
  if (p.four) arrange_into(in.a, x, M, K);
#ifdef SPD_INT8_DOT
  if (p.nibble || p.natural) quantise_into(in.q, x, M, K, p.nibble, p.natural);
#endif
  if (p.eight || p.int8_codes != nullptr) {
    int64_t G = 32;  // the 8-bit segments of one projection share their group
    for (const Blocks& b : p.segments)
      if (!b.four_bit()) G = b.G;
    const int64_t groups = K / G;
    in.xf.resize(M * K);
    in.xs.assign(M * groups, 0.f);
    for (int64_t i = 0; i < M * K; ++i) in.xf[i] = static_cast<float>(x[i]);
    for (int64_t m = 0; m < M; ++m)
      for (int64_t k = 0; k < K; ++k) in.xs[m * groups + k / G] += in.xf[m * K + k];
  }
}

#ifdef SPD_MATVEC
// Output rows [n0, n1) of `p` (any of its segments) for the M rows of `in`, into out [M, p.N].
void rows(const Projection& p, const Inputs& in, int64_t M, int64_t n0, int64_t n1, bf16* out) {
  if (p.int8_codes != nullptr) {
    in_passes<Int8>(M, in.xf.data(), p.int8_codes, p.int8_scales, p.K, p.N, n0, n1, out);
    return;
  }
  for (size_t i = 0; i < p.segments.size(); ++i) {
    const Blocks& b = p.segments[i];
    const int64_t start = p.starts[i], a0 = std::max(n0, start), a1 = std::min(n1, start + b.N);
    if (a0 >= a1) continue;
#ifdef SPD_INT8_DOT
    if (int8_dot_serves(b)) {
      in_passes<Int8Dots>(M, in.q, b, a0 - start, a1 - start, out + start, p.N);
      continue;
    }
#endif
    if (b.four_bit()) {
      in_passes<Int4>(M, in.a, b.codes4, BlockScales{&b}, b.K, p.N, a0 - start, a1 - start, out + start);
    } else {
      for (int64_t m0 = 0; m0 < M; m0 += MAX_ROWS) {
        switch (std::min<int64_t>(M - m0, MAX_ROWS)) {
          case 1: Q8Block<1>::run(m0, in.xf.data(), in.xs.data(), b, a0 - start, a1 - start, out + start, p.N); break;
          case 2: Q8Block<2>::run(m0, in.xf.data(), in.xs.data(), b, a0 - start, a1 - start, out + start, p.N); break;
          case 3: Q8Block<3>::run(m0, in.xf.data(), in.xs.data(), b, a0 - start, a1 - start, out + start, p.N); break;
          case 4: Q8Block<4>::run(m0, in.xf.data(), in.xs.data(), b, a0 - start, a1 - start, out + start, p.N); break;
          case 5: Q8Block<5>::run(m0, in.xf.data(), in.xs.data(), b, a0 - start, a1 - start, out + start, p.N); break;
          case 6: Q8Block<6>::run(m0, in.xf.data(), in.xs.data(), b, a0 - start, a1 - start, out + start, p.N); break;
          case 7: Q8Block<7>::run(m0, in.xf.data(), in.xs.data(), b, a0 - start, a1 - start, out + start, p.N); break;
          default: Q8Block<8>::run(m0, in.xf.data(), in.xs.data(), b, a0 - start, a1 - start, out + start, p.N); break;
        }
      }
    }
  }
}
#endif

class Model : public torch::CustomClassHolder {
 public:
  // sizes: [layers, hidden, heads, kv heads, head dim, intermediate, window (0: none), activation (0: SiLU, 1: tanh
  // GELU)]; numbers: [eps, attention scale]; tables: [cos, sin] [P, D] bf16 of each rotary table.
  Model(std::vector<int64_t> sizes, std::vector<double> numbers, std::vector<at::Tensor> tables)
      : tables_(std::move(tables)) {
    TORCH_CHECK(sizes.size() == 8 && numbers.size() == 2, "spd.StepModel: 8 sizes and 2 numbers");
    layers_ = sizes[0], hidden_ = sizes[1], heads_ = sizes[2], kv_heads_ = sizes[3], dim_ = sizes[4];
    intermediate_ = sizes[5], window_ = sizes[6], activation_ = sizes[7];
    eps_ = static_cast<float>(numbers[0]), scale_ = static_cast<float>(numbers[1]);
    TORCH_CHECK(heads_ > 0 && kv_heads_ > 0 && heads_ % kv_heads_ == 0, "spd.StepModel: heads a multiple of kv heads");
    TORCH_CHECK(dim_ == 64 || dim_ == 128 || dim_ == 256, "spd.StepModel: a head dim of 64, 128 or 256, not ", dim_);
    TORCH_CHECK(!tables_.empty() && tables_.size() % 2 == 0, "spd.StepModel: cos and sin tables in pairs");
    for (const at::Tensor& t : tables_)
      TORCH_CHECK(t.scalar_type() == at::kBFloat16 && t.dim() == 2 && t.size(1) == dim_ && t.is_contiguous() &&
                      t.size(0) == tables_[0].size(0),
                  "spd.StepModel: rotary tables [P, ", dim_, "] bf16");
    positions_ = tables_[0].size(0);
    layers.resize(layers_);
#ifndef SPD_MATVEC
    TORCH_CHECK(false, "spd.StepModel: built without AVX-512 BF16");
#endif
  }

  // norms: [attn, mlp, q, k, post attention, post MLP, q/k/v bias] (empty: none; fp32 norms: Gemma's); options:
  // [sliding, rotary table].
  void add_layer(int64_t index, std::vector<at::Tensor> norms, std::vector<int64_t> options) {
    TORCH_CHECK(index >= 0 && index < layers_ && norms.size() == 7 && options.size() == 2,
                "spd.StepModel.add_layer: a layer index, 7 norms and biases, 2 options");
    Layer& L = layers[index];
    keep(norms);
    norm_of(norms[0], hidden_, "attn_norm", L.attn_norm, L.attn_norm_f);
    norm_of(norms[1], hidden_, "mlp_norm", L.mlp_norm, L.mlp_norm_f);
    norm_of(norms[2], dim_, "q_norm", L.q_norm, L.q_norm_f);
    norm_of(norms[3], dim_, "k_norm", L.k_norm, L.k_norm_f);
    const bf16* unused = nullptr;
    norm_of(norms[4], hidden_, "post_attn_norm", unused, L.post_attn_f);
    norm_of(norms[5], hidden_, "post_mlp_norm", unused, L.post_mlp_f);
    TORCH_CHECK(unused == nullptr, "spd.StepModel: the post norms are Gemma's (fp32)");
    if (norms[6].numel() > 0) {
      TORCH_CHECK(norms[6].scalar_type() == at::kBFloat16 && norms[6].numel() == (heads_ + 2 * kv_heads_) * dim_ &&
                      norms[6].is_contiguous(), "spd.StepModel: q/k/v bias bf16");
      L.qkv_bias = norms[6].const_data_ptr<bf16>();
    }
    L.sliding = options[0] != 0;
    L.rope = options[1];
    TORCH_CHECK(L.rope >= 0 && 2 * L.rope + 1 < static_cast<int64_t>(tables_.size()), "spd.StepModel: rotary table ",
                L.rope);
    TORCH_CHECK(!L.sliding || window_ > 0, "spd.StepModel: a sliding layer without a window");
  }

  // One segment of a projection (role: 0 qkv, 1 out, 2 gate_up, 3 down, 4 the head; its rows follow the previous
  // segment's), as blocks (`kind`: blocks.h) or, for the head, "int8" rows [codes int8 [V, H], scales bf16 [V]].
  void add_segment(int64_t layer, int64_t role, std::string kind, std::vector<at::Tensor> parts, int64_t group) {
    TORCH_CHECK(role >= QKV && role <= HEAD && (role == HEAD || (layer >= 0 && layer < layers_)),
                "spd.StepModel.add_segment: role ", role, " of layer ", layer);
    Projection& p = role == HEAD ? head_ : layers[layer].proj[role];
    keep(parts);
    if (kind == "int8") {
      TORCH_CHECK(role == HEAD && p.segments.empty() && parts.size() == 2 && parts[0].scalar_type() == at::kChar &&
                      parts[0].dim() == 2 && parts[0].is_contiguous() && parts[1].scalar_type() == at::kBFloat16 &&
                      parts[1].numel() == parts[0].size(0) && parts[0].size(1) % 16 == 0,
                  "spd.StepModel: int8 rows are the head's alone: codes [V, H] int8, scales [V] bf16");
      p.int8_codes = parts[0].const_data_ptr<int8_t>();
      p.int8_scales = parts[1].const_data_ptr<bf16>();
      p.N = parts[0].size(0), p.K = parts[0].size(1);
      return;
    }
    const Blocks b = blocks_of(kind, parts, group, "spd.StepModel.add_segment");
    TORCH_CHECK(p.segments.empty() || b.K == p.K, "spd.StepModel: a projection's segments share K");
    TORCH_CHECK(!b.four_bit() || b.K % 64 == 0, "spd.StepModel: 4-bit blocks need K a multiple of 64");
    if (!b.four_bit())
      for (const Blocks& other : p.segments)
        TORCH_CHECK(other.four_bit() || other.G == b.G, "spd.StepModel: a projection's 8-bit segments share a group");
    p.starts.push_back(p.N);
    p.segments.push_back(b);
    p.N += b.N, p.K = b.K;
    bool int8_dot = false;
#ifdef SPD_INT8_DOT
    int8_dot = int8_dot_serves(b);
#endif
    p.four = p.four || (b.four_bit() && !int8_dot);
    p.eight = p.eight || (!b.four_bit() && !int8_dot);
    p.nibble = p.nibble || (b.four_bit() && int8_dot);
    p.natural = p.natural || (!b.four_bit() && int8_dot);
  }

  void set_final_norm(at::Tensor norm) {
    keep({norm});
    const bf16* w = nullptr;
    norm_of(norm, hidden_, "final norm", w, final_norm_f_);
    final_norm_ = w;
    TORCH_CHECK(final_norm_ != nullptr || final_norm_f_ != nullptr, "spd.StepModel: a final norm");
  }

  int64_t vocab() const { return head_.N; }

  at::Tensor step(const at::Tensor& x, int64_t column, at::TensorList keys, at::TensorList values) const {
    TORCH_CHECK(x.dim() == 3 && x.size(1) == 1 && x.size(2) == hidden_ && x.scalar_type() == at::kBFloat16 &&
                    x.is_contiguous() && x.device().is_cpu(),
                "spd::decode_step: x [M, 1, ", hidden_, "] contiguous bf16 on the CPU, not ", x.sizes());
    const int64_t M = x.size(0);
    TORCH_CHECK(M >= 1 && M <= MAX_ROWS, "spd::decode_step: 1 to ", MAX_ROWS, " rows, not ", M);
    TORCH_CHECK(static_cast<int64_t>(keys.size()) == layers_ && static_cast<int64_t>(values.size()) == layers_,
                "spd::decode_step: one key and one value buffer a layer");
    TORCH_CHECK(column >= 0 && column < positions_, "spd::decode_step: column ", column, " past the rotary tables");
    TORCH_CHECK(head_.N > 0 && (final_norm_ != nullptr || final_norm_f_ != nullptr), "spd::decode_step: no head");
    for (int64_t l = 0; l < layers_; ++l) {
      const Layer& L = layers[l];
      TORCH_CHECK(L.attn_norm != nullptr || L.attn_norm_f != nullptr, "spd::decode_step: layer ", l, " not added");
      TORCH_CHECK(L.proj[QKV].N == (heads_ + 2 * kv_heads_) * dim_ && L.proj[OUT].N == hidden_ &&
                      L.proj[GATE_UP].N == 2 * intermediate_ && L.proj[DOWN].N == hidden_,
                  "spd::decode_step: layer ", l, "'s projections are not whole");
      for (const at::Tensor& buffer : {keys[l], values[l]})
        TORCH_CHECK(buffer.dim() == 4 && buffer.size(0) == M && buffer.size(1) == kv_heads_ && buffer.size(3) == dim_ &&
                        buffer.stride(3) == 1 && buffer.scalar_type() == at::kBFloat16 && buffer.device().is_cpu() &&
                        column < buffer.size(2),
                    "spd::decode_step: layer ", l, "'s cache buffer [", M, ", ", kv_heads_, ", > ", column, ", ", dim_,
                    "] bf16, not ", buffer.sizes());
    }
    at::Tensor logits = at::empty({M, 1, head_.N}, x.options());
#ifdef SPD_MATVEC
    run(x.const_data_ptr<bf16>(), M, column, keys, values, logits.mutable_data_ptr<bf16>());
#endif
    return logits;
  }

 private:
  void keep(const std::vector<at::Tensor>& tensors) { kept_.insert(kept_.end(), tensors.begin(), tensors.end()); }

  // A norm of `width`: bf16 (Llama's) into w, fp32 (Gemma's 1 + weight) into wf; empty: none.
  static void norm_of(const at::Tensor& t, int64_t width, const char* what, const bf16*& w, const float*& wf) {
    if (t.numel() == 0) return;
    TORCH_CHECK(t.numel() == width && t.is_contiguous() &&
                    (t.scalar_type() == at::kBFloat16 || t.scalar_type() == at::kFloat),
                "spd.StepModel: ", what, " [", width, "] bf16 or fp32");
    if (t.scalar_type() == at::kFloat)
      wf = t.const_data_ptr<float>();
    else
      w = t.const_data_ptr<bf16>();
  }

#ifdef SPD_MATVEC
  void act_mul(const bf16* gate, const bf16* up, bf16* out, int64_t width) const {
    if (activation_ == 1)
      gelu_mul_row(gate, up, out, width);
    else
      silu_mul_row(gate, up, out, width);
  }

  template <int64_t NP>
  void attend_chunk(const bf16* qb, const bf16* kb, int64_t kss, const bf16* vb, int64_t vss, int64_t G, int64_t cols,
                    float* scores, float* acc, float* maxima, float* sums) const {
    chunk_bf16<NP>(qb, dim_, scale_, kb, kss, vb, vss, G, cols, scores, acc, maxima, sums);
  }

  void run(const bf16* x, int64_t M, int64_t column, at::TensorList keys, at::TensorList values, bf16* logits) const {
    const int64_t H = hidden_, D = dim_, G = heads_ / kv_heads_, I = intermediate_;
    const int64_t QKV_N = (heads_ + 2 * kv_heads_) * D, width = heads_ * D;
    const int64_t n = column + 1;
    const int64_t first_sliding = window_ > 0 ? std::max<int64_t>(0, n - window_) : 0;
    const int64_t chunks = (n + CHUNK - 1) / CHUNK, items = M * kv_heads_ * chunks;  // the most a layer needs
    // Shared between the threads: each written in one phase, read after the barrier that ends it, and not written
    // again before three more barriers have passed.
    std::vector<bf16> qkv(M * QKV_N), q(M * width), out(M * H), gate_up(M * 2 * I), act(M * I), down(M * H);
    std::vector<float> maxima(items * G), sums(items * G), acc(items * G * D);
    const int threads = at::in_parallel_region() ? 1 : std::max(1, at::get_num_threads());

#pragma omp parallel num_threads(threads)
    {
      thread_local Scratch s;
      s.x.assign(x, x + M * H);
      s.h.resize(M * H);
      s.tmp.resize(M * std::max(H, D));
      s.attn.resize(M * width);
      s.joined.resize(D);
      s.scores.resize(G * CHUNK);
      for (int64_t m = 0; m < M; ++m)
        norm_any(s.x.data() + m * H, layers[0].attn_norm, layers[0].attn_norm_f, s.h.data() + m * H, H, eps_);
      for (int64_t l = 0; l < layers_; ++l) {
        const Layer& L = layers[l];
        bf16* kp = keys[l].data_ptr<bf16>();
        bf16* vp = values[l].data_ptr<bf16>();
        const int64_t ksb = keys[l].stride(0), ksh = keys[l].stride(1), kss = keys[l].stride(2);
        const int64_t vsb = values[l].stride(0), vsh = values[l].stride(1), vss = values[l].stride(2);
        const bf16* cos = tables_[2 * L.rope].const_data_ptr<bf16>() + column * D;
        const bf16* sin = tables_[2 * L.rope + 1].const_data_ptr<bf16>() + column * D;
        const int64_t start = L.sliding ? first_sliding : 0, span = n - start;
        const int64_t layer_chunks = (span + CHUNK - 1) / CHUNK, layer_items = M * kv_heads_ * layer_chunks;

        // 1. q, k, v a head at a time: the head's rows, its bias, its norm, its rotation; keys and values into the
        // cache.
        prepare_inputs(s.in, L.proj[QKV], s.h.data(), M);
#pragma omp for schedule(dynamic, 1) nowait
        for (int64_t u = 0; u < heads_ + 2 * kv_heads_; ++u) {
          rows(L.proj[QKV], s.in, M, u * D, (u + 1) * D, qkv.data());
          for (int64_t m = 0; m < M; ++m) {
            bf16* head = qkv.data() + m * QKV_N + u * D;
            if (L.qkv_bias != nullptr) add_row(head, L.qkv_bias + u * D, head, D);
            bf16* normed = s.tmp.data() + m * D;
            if (u < heads_ && (L.q_norm != nullptr || L.q_norm_f != nullptr)) {
              norm_any(head, L.q_norm, L.q_norm_f, normed, D, eps_);
              head = normed;
            } else if (u >= heads_ && u < heads_ + kv_heads_ && (L.k_norm != nullptr || L.k_norm_f != nullptr)) {
              norm_any(head, L.k_norm, L.k_norm_f, normed, D, eps_);
              head = normed;
            }
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

        // 2. attention: each (row, kv head, chunk of columns)'s partial softmax (a sliding layer's last `window`).
#pragma omp for schedule(dynamic, 1) nowait
        for (int64_t item = 0; item < layer_items; ++item) {
          const int64_t c = item % layer_chunks, bh = item / layer_chunks, b = bh / kv_heads_, h = bh % kv_heads_;
          const int64_t s0 = start + c * CHUNK, cols = std::min(n, s0 + CHUNK) - s0;
          const bf16* qb = q.data() + (b * heads_ + h * G) * D;
          const bf16* kb = kp + b * ksb + h * ksh + s0 * kss;
          const bf16* vb = vp + b * vsb + h * vsh + s0 * vss;
          float* a = acc.data() + item * G * D;
          float* mx = maxima.data() + item * G;
          float* sm = sums.data() + item * G;
          if (D == 64)
            attend_chunk<2>(qb, kb, kss, vb, vss, G, cols, s.scores.data(), a, mx, sm);
          else if (D == 128)
            attend_chunk<4>(qb, kb, kss, vb, vss, G, cols, s.scores.data(), a, mx, sm);
          else
            attend_chunk<8>(qb, kb, kss, vb, vss, G, cols, s.scores.data(), a, mx, sm);
        }
#pragma omp barrier

        // 3. the output projection, on the chunks joined (by each thread, for itself).
        for (int64_t bh = 0; bh < M * kv_heads_; ++bh)
          join_chunks(maxima.data() + bh * layer_chunks * G, sums.data() + bh * layer_chunks * G,
                      acc.data() + bh * layer_chunks * G * D, layer_chunks, G, D, s.joined.data(),
                      s.attn.data() + bh * G * D);
        prepare_inputs(s.in, L.proj[OUT], s.attn.data(), M);
#pragma omp for schedule(dynamic, 1) nowait
        for (int64_t n0 = 0; n0 < H; n0 += ROWS) rows(L.proj[OUT], s.in, M, n0, std::min(H, n0 + ROWS), out.data());
#pragma omp barrier

        // 4. the residual's sum (Gemma: of the output normed) and the MLP's norm; gate and up, a span of both at a
        // time, and act(gate) * up.
        for (int64_t m = 0; m < M; ++m) {
          bf16* xm = s.x.data() + m * H;
          const bf16* o = out.data() + m * H;
          if (L.post_attn_f != nullptr) {
            norm_row_f(o, L.post_attn_f, s.tmp.data() + m * H, H, eps_);
            o = s.tmp.data() + m * H;
          }
          add_row(xm, o, xm, H);
          norm_any(xm, L.mlp_norm, L.mlp_norm_f, s.h.data() + m * H, H, eps_);
        }
        prepare_inputs(s.in, L.proj[GATE_UP], s.h.data(), M);
#pragma omp for schedule(dynamic, 1) nowait
        for (int64_t i0 = 0; i0 < I; i0 += ROWS) {
          const int64_t i1 = std::min(I, i0 + ROWS);
          rows(L.proj[GATE_UP], s.in, M, i0, i1, gate_up.data());
          rows(L.proj[GATE_UP], s.in, M, I + i0, I + i1, gate_up.data());
          for (int64_t m = 0; m < M; ++m)
            act_mul(gate_up.data() + m * 2 * I + i0, gate_up.data() + m * 2 * I + I + i0, act.data() + m * I + i0,
                    i1 - i0);
        }
#pragma omp barrier

        // 5. down, then the residual's sum (Gemma: of the output normed) and the next layer's norm.
        prepare_inputs(s.in, L.proj[DOWN], act.data(), M);
#pragma omp for schedule(dynamic, 1) nowait
        for (int64_t n0 = 0; n0 < H; n0 += ROWS) rows(L.proj[DOWN], s.in, M, n0, std::min(H, n0 + ROWS), down.data());
#pragma omp barrier
        for (int64_t m = 0; m < M; ++m) {
          bf16* xm = s.x.data() + m * H;
          const bf16* d = down.data() + m * H;
          if (L.post_mlp_f != nullptr) {
            norm_row_f(d, L.post_mlp_f, s.tmp.data() + m * H, H, eps_);
            d = s.tmp.data() + m * H;
          }
          add_row(xm, d, xm, H);
          if (l + 1 < layers_)
            norm_any(xm, layers[l + 1].attn_norm, layers[l + 1].attn_norm_f, s.h.data() + m * H, H, eps_);
        }
      }

      // The head: the final norm, then its blocks (or int8 rows).
      for (int64_t m = 0; m < M; ++m) norm_any(s.x.data() + m * H, final_norm_, final_norm_f_, s.h.data() + m * H, H, eps_);
      prepare_inputs(s.in, head_, s.h.data(), M);
#pragma omp for schedule(dynamic, 1)
      for (int64_t n0 = 0; n0 < head_.N; n0 += HEAD_ROWS) rows(head_, s.in, M, n0, std::min(head_.N, n0 + HEAD_ROWS), logits);
    }
  }
#endif

  std::vector<at::Tensor> tables_, kept_;  // kept alive: the layers point into them
  std::vector<Layer> layers;
  Projection head_;
  int64_t layers_ = 0, hidden_ = 0, heads_ = 0, kv_heads_ = 0, dim_ = 0, intermediate_ = 0, window_ = 0, activation_ = 0;
  int64_t positions_ = 0;
  float eps_ = 0.f, scale_ = 0.f;
  const bf16* final_norm_ = nullptr;
  const float* final_norm_f_ = nullptr;
};

at::Tensor decode(const c10::intrusive_ptr<Model>& model, const at::Tensor& x, int64_t column, at::TensorList keys,
                  at::TensorList values) {
  return model->step(x, column, keys, values);
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(spd, m) {
  m.class_<Model>("StepModel")
      .def(torch::init<std::vector<int64_t>, std::vector<double>, std::vector<at::Tensor>>())
      .def("add_layer", &Model::add_layer)
      .def("add_segment", &Model::add_segment)
      .def("set_final_norm", &Model::set_final_norm)
      .def("vocab", &Model::vocab);
  m.def("decode_step(__torch__.torch.classes.spd.StepModel model, Tensor x, int column, Tensor[] keys, Tensor[] values) "
        "-> Tensor");
}

TORCH_LIBRARY_IMPL(spd, CPU, m) { m.impl("decode_step", &decode); }
