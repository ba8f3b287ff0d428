// A prompt's causal attention on the CPU: spd::causal_attention(q, k, v, offset, scale, visible, amx).
//
// q [B, H * G, T, D] bf16 (G query heads share a key/value head), k, v [B, H, S, D] bf16 (the cache's keys and values,
// any strides but the head dim's); query t sits at position offset + t and attends to key columns 0..offset + t, and
// where `visible` [B or 1, 1, T, >= offset + T] bool is given, only to those of them it marks (a verification tree: a
// node sees the prompt and its ancestors). A query that sees nothing gets zeros.
// Out [B, T, H * G * D] bf16: the layout the output projection reads, no transpose after.
//
// Why: SDPA's CPU flash kernel ran a 512-token prompt's attention at ~50 GFLOP/s (5.7-6.5 ms a layer, 30% of the
// prefill) on a CPU that does ~4x that in bf16 dot products. Here keys are packed once per head so that one AVX-512
// BF16 dot product (vdpbf16ps) yields 2 dims of 16 keys' scores, values so that one yields 2 keys of 16 dims; each
// tile of query rows shares every load; the softmax is online per span of 64 keys (flash attention), exp in fp32,
// the probabilities rounded to bf16 before the values' product, as SDPA's bf16 kernel does. (Round 13: a softmax step
// per 16 keys spent as much as the dot products, most of it in horizontal reductions and rescales.) Work is split over
// (row, head, tile), tiles of short and long reach paired so that two threads get even shares of the causal triangle.
// Built only where the CPU has AVX-512 BF16 (build.py); elsewhere the op refuses and SDPA serves (model.py).
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/cpu/vec/vec.h>
#include <ATen/ops/empty.h>
#include <c10/util/BFloat16.h>
#include <torch/library.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#if defined(__AVX512F__) && defined(__AVX512BF16__) && defined(__AVX512BW__) && defined(CPU_CAPABILITY_AVX512)
#define SPD_PREFILL 1
#include <immintrin.h>
#if defined(__AMX_TILE__) && defined(__AMX_BF16__)
#define SPD_PREFILL_AMX 1
#include <cstdlib>

#include "amx.h"
#endif
#endif

namespace {

#ifdef SPD_PREFILL

constexpr int64_t KEYS = 16;  // keys per block: one zmm of fp32 scores

constexpr int SPAN = 4;  // blocks per softmax step
constexpr int64_t PACK_BLOCKS = 8;  // blocks a packing task takes (128 keys)
// Query rows per tile: as many as registers hold (their accumulators, scores and the shared load: 31 of 32 zmm).
template <int ND>
constexpr int TILE_ROWS = ND == 4 ? 6 : 3;
constexpr int AMX_ROWS = 16;  // query rows a tile on AMX (`tile_amx`): one tile's rows
using Vec = at::vec::Vectorized<float>;
static_assert(Vec::size() == 16, "an AVX-512 build");

inline __m512 exp16(__m512 x) { return static_cast<__m512>(Vec(x).exp_u20()); }

inline uint32_t pair_of(const c10::BFloat16* p) {
  uint32_t out;
  std::memcpy(&out, p, sizeof(out));
  return out;
}

// One head's keys as blocks of 16: block b, dim pair j -> 16 keys x (dim 2j, dim 2j + 1), 32 bf16 (zero past S).
// A key's dim pairs are 32-bit words: one gather per pair j collects its word from the block's 16 keys.
// Blocks b0..b1 - 1 of them (out: the head's first block).
void pack_keys(const c10::BFloat16* k, int64_t kss, int64_t S, int64_t D, int64_t b0, int64_t b1, c10::BFloat16* out) {
  const int64_t pairs = D / 2;
  const __m512i rows = _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                                          _mm512_set1_epi32(static_cast<int>(kss / 2)));  // kss is even: D is
  for (int64_t b = b0; b < b1; ++b) {
    const int64_t live = std::max<int64_t>(0, std::min<int64_t>(KEYS, S - b * KEYS));  // 0: a block past S (AMX pads)
    const __mmask16 keys = static_cast<__mmask16>(live == KEYS ? 0xFFFF : (1u << live) - 1);
    const int* base = reinterpret_cast<const int*>(k + b * KEYS * kss);
    for (int64_t j = 0; j < pairs; ++j)
      _mm512_storeu_si512(out + (b * pairs + j) * 2 * KEYS,
                          _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), keys, rows, base + j, 4));
  }
}

// One head's values as key pairs: pair p, dim d -> (key 2p, key 2p + 1), so 16 dims of a pair are 32 bf16 (zero past S).
// Pairs p0..p1 - 1 of them (out: the head's first pair).
void pack_values(const c10::BFloat16* v, int64_t vss, int64_t S, int64_t D, int64_t p0, int64_t p1,
                 c10::BFloat16* out) {
  alignas(64) static const int16_t low[32] = {0, 32, 1, 33, 2, 34, 3, 35, 4, 36, 5, 37, 6, 38, 7, 39,
                                              8, 40, 9, 41, 10, 42, 11, 43, 12, 44, 13, 45, 14, 46, 15, 47};
  const __m512i lo = _mm512_load_si512(low), hi = _mm512_add_epi16(lo, _mm512_set1_epi16(16));
  for (int64_t p = p0; p < p1; ++p) {
    const int64_t a = 2 * p, b = 2 * p + 1;
    for (int64_t d = 0; d < D; d += 32) {  // 32 dims of both keys -> 64 bf16, interleaved
      const __m512i x = a < S ? _mm512_loadu_si512(v + a * vss + d) : _mm512_setzero_si512();
      const __m512i y = b < S ? _mm512_loadu_si512(v + b * vss + d) : _mm512_setzero_si512();
      _mm512_storeu_si512(out + (p * D + d) * 2, _mm512_permutex2var_epi16(x, lo, y));
      _mm512_storeu_si512(out + (p * D + d) * 2 + 32, _mm512_permutex2var_epi16(x, hi, y));
    }
  }
}

// One query row's softmax step over a span of `span` blocks whose scaled scores are `scores` (SPAN * KEYS floats): the
// keys it sees (its reach, its mask `sees`) in probs (bf16, zeros elsewhere), its running max `top` and per-lane sums
// `sums` updated. Returns how many of the span's keys it reaches (<= 0: none, probs all zeros) and sets `factor` to
// what its accumulators so far must be scaled by (1 where its max did not move, or nothing was seen before).
inline int64_t row_span(const float* scores, int64_t reach, const bool* sees, int64_t b0, int span, float& top,
                        float* sums, c10::BFloat16* probs, float& factor) {
  constexpr float NONE = -std::numeric_limits<float>::infinity();
  const __m512i lane = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
  factor = 1.f;
  const int64_t live = std::min<int64_t>(reach - b0 * KEYS, span * KEYS);  // >= 1 for the first span
  if (live <= 0) {  // past this row's reach: it adds nothing
    std::memset(probs, 0, SPAN * KEYS * sizeof(c10::BFloat16));
    return live;
  }
  __mmask16 seen[SPAN];
  __m512 most = _mm512_set1_ps(NONE);
  for (int s = 0; s < span; ++s) {
    const int64_t here = std::max<int64_t>(0, std::min<int64_t>(live - s * KEYS, KEYS));
    seen[s] = _mm512_cmplt_epi32_mask(lane, _mm512_set1_epi32(static_cast<int>(here)));
    if (sees != nullptr)  // the mask's bytes of this block (1: attends)
      seen[s] &= _mm_test_epi8_mask(_mm_maskz_loadu_epi8(seen[s], sees + (b0 + s) * KEYS), _mm_set1_epi8(1));
    most = _mm512_mask_max_ps(most, seen[s], most, _mm512_load_ps(scores + s * KEYS));
  }
  const float m = std::max(top, _mm512_reduce_max_ps(most));
  if (m == NONE) {  // nothing seen yet: nothing to add
    std::memset(probs, 0, SPAN * KEYS * sizeof(c10::BFloat16));
    return live;
  }
  __m512 total = _mm512_load_ps(sums);
  if (m > top) {
    if (top != NONE) {  // the accumulators so far, scaled to the new max (before: they are zeros)
      factor = std::exp(top - m);
      total = _mm512_mul_ps(total, _mm512_set1_ps(factor));
    }
    top = m;
  }
  const __m512 shift = _mm512_set1_ps(m);
  for (int s = 0; s < SPAN; ++s) {
    __m512 p = _mm512_setzero_ps();
    if (s < span) p = _mm512_maskz_mov_ps(seen[s], exp16(_mm512_sub_ps(_mm512_load_ps(scores + s * KEYS), shift)));
    total = _mm512_add_ps(total, p);
    _mm256_store_si256(reinterpret_cast<__m256i*>(probs + s * KEYS), (__m256i)_mm512_cvtneps_pbh(p));
  }
  _mm512_store_ps(sums, total);
  return live;
}

// R <= TILE_ROWS<ND> query rows of one head (queries[r], their outputs outs[r], each seeing reach[r] keys), D = 16 * ND.
// Keys go in spans of SPAN blocks (64 keys): the scores of a span's blocks first (each key load shared by the rows),
// then one softmax step per row over the whole span (`row_span`: one running max, one rescale of the accumulators, and
// only where the max moved; the running sums stay in fp32 lanes until the end), then the values' products.
template <int ND>
void tile(const c10::BFloat16* const* queries, const int64_t* reach, const bool* const* sees, int R,
          const c10::BFloat16* keys, const c10::BFloat16* values, float scale, c10::BFloat16* const* outs) {
  constexpr int64_t D = 16 * ND, PAIRS = D / 2, WIDTH = SPAN * KEYS;
  int64_t longest = 0;
  for (int r = 0; r < R; ++r) longest = std::max(longest, reach[r]);
  const int64_t blocks = (longest + KEYS - 1) / KEYS;
  constexpr int ROWS = TILE_ROWS<ND>;
  __m512 acc[ROWS][ND];
  float top[ROWS];
  alignas(64) float sums[ROWS][KEYS];  // each row's running sum of probabilities, per lane
  for (int r = 0; r < ROWS; ++r) {
    for (int j = 0; j < ND; ++j) acc[r][j] = _mm512_setzero_ps();
    top[r] = -std::numeric_limits<float>::infinity();
    _mm512_store_ps(sums[r], _mm512_setzero_ps());
  }
  alignas(64) float scores[ROWS][WIDTH];
  alignas(64) c10::BFloat16 probs[ROWS][WIDTH];
  for (int64_t b0 = 0; b0 < blocks; b0 += SPAN) {
    const int span = static_cast<int>(std::min<int64_t>(SPAN, blocks - b0));
    for (int s = 0; s < span; ++s) {
      __m512 score[ROWS];
      for (int r = 0; r < ROWS; ++r) score[r] = _mm512_setzero_ps();
      const c10::BFloat16* kb = keys + (b0 + s) * PAIRS * 2 * KEYS;
      for (int64_t j = 0; j < PAIRS; ++j) {
        const __m512bh kk = (__m512bh)_mm512_loadu_si512(kb + j * 2 * KEYS);
        for (int r = 0; r < R; ++r)
          score[r] = _mm512_dpbf16_ps(score[r], (__m512bh)_mm512_set1_epi32(pair_of(queries[r] + 2 * j)), kk);
      }
      for (int r = 0; r < R; ++r) _mm512_store_ps(scores[r] + s * KEYS, _mm512_mul_ps(score[r], _mm512_set1_ps(scale)));
    }
    int64_t widest = 0;  // keys of this span some row sees
    for (int r = 0; r < R; ++r) {
      float factor;
      widest = std::max(widest, row_span(scores[r], reach[r], sees[r], b0, span, top[r], sums[r], probs[r], factor));
      if (factor != 1.f)
        for (int j = 0; j < ND; ++j) acc[r][j] = _mm512_mul_ps(acc[r][j], _mm512_set1_ps(factor));
    }
    const c10::BFloat16* vb = values + b0 * (KEYS / 2) * D * 2;
    for (int64_t q = 0; 2 * q < widest; ++q) {  // each value load shared by the tile's rows
      __m512bh w[ROWS];
      for (int r = 0; r < R; ++r) w[r] = (__m512bh)_mm512_set1_epi32(pair_of(probs[r] + 2 * q));
      for (int j = 0; j < ND; ++j) {
        const __m512bh vv = (__m512bh)_mm512_loadu_si512(vb + (q * D + 16 * j) * 2);
        for (int r = 0; r < R; ++r) acc[r][j] = _mm512_dpbf16_ps(acc[r][j], w[r], vv);
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    const float total = _mm512_reduce_add_ps(_mm512_load_ps(sums[r]));
    const __m512 inv = _mm512_set1_ps(total > 0.f ? 1.f / total : 0.f);  // 0: the row saw nothing
    for (int j = 0; j < ND; ++j)
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(outs[r] + 16 * j),
                          (__m256i)_mm512_cvtneps_pbh(_mm512_mul_ps(acc[r][j], inv)));
  }
}

#ifdef SPD_PREFILL_AMX
using spd_kernels::configure_tiles;
using spd_kernels::tiles_allowed;

// `tile` for up to AMX_ROWS query rows of a head of 64 dims on AMX: a span's scores are four tile products of the
// rows' queries (two A tiles: dims 0..31, 32..63) by the keys as `pack_keys` laid them out (a block's 16 dim pairs
// are a B tile); the softmax step per row as `tile`'s (`row_span`); the probabilities (bf16, two A tiles of 32 keys)
// by the values as `pack_values` laid them out (16 key pairs x 16 dims a B tile) into four fresh C tiles, added to
// each row's accumulators after its rescale. Tiles: 0-1 queries, 2-5 scores then the span's outputs, 6 probabilities,
// 7 keys or values. (A head of 128 dims takes `tile`: its outputs would need 8 C tiles.)
void tile_amx(const c10::BFloat16* const* queries, const int64_t* reach, const bool* const* sees, int R,
              const c10::BFloat16* keys, const c10::BFloat16* values, float scale, c10::BFloat16* const* outs) {
  constexpr int64_t D = 64, PAIRS = D / 2, WIDTH = SPAN * KEYS;
  alignas(64) c10::BFloat16 q[AMX_ROWS][D] = {};
  alignas(64) float scores[AMX_ROWS][WIDTH], out[AMX_ROWS][D], acc[AMX_ROWS][D] = {}, sums[AMX_ROWS][KEYS] = {};
  alignas(64) c10::BFloat16 probs[AMX_ROWS][WIDTH] = {};
  float top[AMX_ROWS];
  int64_t longest = 0;
  for (int r = 0; r < R; ++r) {
    std::memcpy(q[r], queries[r], D * sizeof(c10::BFloat16));
    top[r] = -std::numeric_limits<float>::infinity();
    longest = std::max(longest, reach[r]);
  }
  const int64_t blocks = (longest + KEYS - 1) / KEYS;
  configure_tiles();
  _tile_loadd(0, q[0], D * 2);
  _tile_loadd(1, q[0] + 32, D * 2);
  for (int64_t b0 = 0; b0 < blocks; b0 += SPAN) {
    const int span = static_cast<int>(std::min<int64_t>(SPAN, blocks - b0));
    const c10::BFloat16* kb = keys + b0 * PAIRS * 2 * KEYS;
    // the span's scores: C(block s) = Q[:, 0:32] K(s, pairs 0..15) + Q[:, 32:64] K(s, pairs 16..31)
    _tile_zero(2);
    _tile_zero(3);
    _tile_zero(4);
    _tile_zero(5);
#define SPD_SCORES(S, C)                                                  \
  if (S < span) {                                                         \
    _tile_loadd(7, kb + (S * PAIRS) * 2 * KEYS, 64);                      \
    _tile_dpbf16ps(C, 0, 7);                                              \
    _tile_loadd(7, kb + (S * PAIRS + 16) * 2 * KEYS, 64);                 \
    _tile_dpbf16ps(C, 1, 7);                                              \
    _tile_stored(C, scores[0] + S * KEYS, WIDTH * sizeof(float));         \
  }
    SPD_SCORES(0, 2)  // the tile's number must be a literal (it is the instruction's register)
    SPD_SCORES(1, 3)
    SPD_SCORES(2, 4)
    SPD_SCORES(3, 5)
#undef SPD_SCORES
    int64_t widest = 0;
    float factor[AMX_ROWS];
    for (int r = 0; r < R; ++r) {
      for (int s = 0; s < span; ++s)
        _mm512_store_ps(scores[r] + s * KEYS, _mm512_mul_ps(_mm512_load_ps(scores[r] + s * KEYS), _mm512_set1_ps(scale)));
      widest = std::max(widest, row_span(scores[r], reach[r], sees[r], b0, span, top[r], sums[r], probs[r], factor[r]));
    }
    // the span's outputs: C(dims 16t..) = P[:, keys 0..31] V(pairs 0..15, dims) + P[:, keys 32..63] V(pairs 16..31, ...)
    _tile_zero(2);
    _tile_zero(3);
    _tile_zero(4);
    _tile_zero(5);
    const c10::BFloat16* vb = values + b0 * (KEYS / 2) * D * 2;
    for (int64_t c = 0; 32 * c < widest; ++c) {
      _tile_loadd(6, probs[0] + 32 * c, WIDTH * sizeof(c10::BFloat16));
#define SPD_VALUES(T, C)                                                           \
  _tile_loadd(7, vb + (16 * c * D + 16 * T) * 2, D * 2 * sizeof(c10::BFloat16));  \
  _tile_dpbf16ps(C, 6, 7);
      SPD_VALUES(0, 2)
      SPD_VALUES(1, 3)
      SPD_VALUES(2, 4)
      SPD_VALUES(3, 5)
#undef SPD_VALUES
    }
    _tile_stored(2, out[0], D * sizeof(float));
    _tile_stored(3, out[0] + 16, D * sizeof(float));
    _tile_stored(4, out[0] + 32, D * sizeof(float));
    _tile_stored(5, out[0] + 48, D * sizeof(float));
    for (int r = 0; r < R; ++r) {
      const __m512 f = _mm512_set1_ps(factor[r]);
      for (int j = 0; j < D; j += 16)
        _mm512_store_ps(acc[r] + j, _mm512_fmadd_ps(_mm512_load_ps(acc[r] + j), f, _mm512_load_ps(out[r] + j)));
    }
  }
  _tile_release();
  for (int r = 0; r < R; ++r) {
    const float total = _mm512_reduce_add_ps(_mm512_load_ps(sums[r]));
    const __m512 inv = _mm512_set1_ps(total > 0.f ? 1.f / total : 0.f);  // 0: the row saw nothing
    for (int j = 0; j < D; j += 16)
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(outs[r] + j),
                          (__m256i)_mm512_cvtneps_pbh(_mm512_mul_ps(_mm512_load_ps(acc[r] + j), inv)));
  }
}
#endif  // SPD_PREFILL_AMX

template <int ND>
// `use_amx`: a head of 64 dims on AMX's tiles (`tile_amx`) where the library has them and Linux allows them.
void attend(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, int64_t offset, float scale, bool use_amx,
            const c10::optional<at::Tensor>& visible, at::Tensor& out) {
  constexpr int64_t D = 16 * ND;
  const int64_t B = q.size(0), HQ = q.size(1), T = q.size(2), H = k.size(1), G = HQ / H;
  const int64_t S = offset + T;  // the keys any query reaches
#ifdef SPD_PREFILL_AMX
  const bool amx = ND == 4 && use_amx && tiles_allowed();
#else
  const bool amx = false;
#endif
  // AMX's products take 32 keys of values at a time: the packing runs to a whole span (zeros past S).
  const int64_t blocks = amx ? (S + SPAN * KEYS - 1) / (SPAN * KEYS) * SPAN : (S + KEYS - 1) / KEYS;
  const int64_t padded = blocks * KEYS;
  // Every element is written by the packing (zeros past S): no initialisation.
  std::unique_ptr<c10::BFloat16[]> kbuf(new c10::BFloat16[B * H * padded * D]), vbuf(new c10::BFloat16[B * H * padded * D]);
  c10::BFloat16* kpack = kbuf.get();
  c10::BFloat16* vpack = vbuf.get();
  const c10::BFloat16* kp = k.data_ptr<c10::BFloat16>();
  const c10::BFloat16* vp = v.data_ptr<c10::BFloat16>();
  // Packed in runs of PACK_BLOCKS blocks, not a head a thread: the bundled model's 3 key/value heads on 2 threads
  // left one thread idle for a third of the packing, most of a short query's (a verification tree's) call.
  const int64_t runs = (blocks + PACK_BLOCKS - 1) / PACK_BLOCKS;
  at::parallel_for(0, B * H * runs, 1, [&](int64_t begin, int64_t end) {
    for (int64_t item = begin; item < end; ++item) {
      const int64_t bh = item / runs, b = bh / H, h = bh % H, b0 = item % runs * PACK_BLOCKS;
      const int64_t b1 = std::min(blocks, b0 + PACK_BLOCKS);
      pack_keys(kp + b * k.stride(0) + h * k.stride(1), k.stride(2), S, D, b0, b1, kpack + bh * padded * D);
      pack_values(vp + b * v.stride(0) + h * v.stride(1), v.stride(2), S, D, b0 * KEYS / 2, b1 * KEYS / 2,
                  vpack + bh * padded * D);
    }
  });
  const int64_t per_tile = amx ? AMX_ROWS : TILE_ROWS<ND>;
  const int64_t rows = T * G, tiles = (rows + per_tile - 1) / per_tile, items = B * H * tiles;
  const c10::BFloat16* qp = q.data_ptr<c10::BFloat16>();
  const bool* mp = visible ? visible->data_ptr<bool>() : nullptr;
  const int64_t msb = visible && visible->size(0) > 1 ? visible->stride(0) : 0, mst = visible ? visible->stride(2) : 0;
  c10::BFloat16* op = out.data_ptr<c10::BFloat16>();
  at::parallel_for(0, items, 1, [&](int64_t begin, int64_t end) {
    for (int64_t item = begin; item < end; ++item) {
      const int64_t bh = item / tiles, i = item % tiles, b = bh / H, h = bh % H;
      constexpr int ROWS = std::max(AMX_ROWS, TILE_ROWS<ND>);  // room for either tile's rows
      const int64_t t0 = (i % 2 == 0 ? i / 2 : tiles - 1 - i / 2) * per_tile;  // short and long reach alternate
      const c10::BFloat16* queries[ROWS];
      c10::BFloat16* outs[ROWS];
      int64_t reach[ROWS];
      const bool* sees[ROWS];
      const int R = static_cast<int>(std::min<int64_t>(per_tile, rows - t0));
      for (int r = 0; r < R; ++r) {
        const int64_t row = t0 + r, t = row / G, g = row % G, head = h * G + g;
        queries[r] = qp + b * q.stride(0) + head * q.stride(1) + t * q.stride(2);
        outs[r] = op + (b * T + t) * HQ * D + head * D;
        reach[r] = offset + t + 1;
        sees[r] = mp != nullptr ? mp + b * msb + t * mst : nullptr;
      }
#ifdef SPD_PREFILL_AMX
      if (amx) {
        tile_amx(queries, reach, sees, R, kpack + bh * padded * D, vpack + bh * padded * D, scale, outs);
        continue;
      }
#endif
      tile<ND>(queries, reach, sees, R, kpack + bh * padded * D, vpack + bh * padded * D, scale, outs);
    }
  });
}

#endif  // SPD_PREFILL

at::Tensor causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, int64_t offset, double scale,
                            const c10::optional<at::Tensor>& visible, bool amx) {
#ifdef SPD_PREFILL
  TORCH_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4, "causal_attention: q [B, H * G, T, D], k and v [B, H, S, D]");
  TORCH_CHECK(k.sizes() == v.sizes() && k.size(0) == q.size(0) && k.size(3) == q.size(3) && k.size(1) > 0 &&
                  q.size(1) % k.size(1) == 0,
              "causal_attention: q, k and v disagree on rows, heads or head size");
  TORCH_CHECK(q.scalar_type() == at::kBFloat16 && k.scalar_type() == at::kBFloat16 && v.scalar_type() == at::kBFloat16,
              "causal_attention: bf16 q, k and v");
  TORCH_CHECK(q.stride(3) == 1 && k.stride(3) == 1 && v.stride(3) == 1 && q.device().is_cpu(),
              "causal_attention: CPU tensors, the head dim contiguous");
  TORCH_CHECK(offset >= 0 && offset + q.size(2) <= k.size(2), "causal_attention: queries at ", offset, "..",
              offset + q.size(2) - 1, " outside the ", k.size(2), " keys");
  if (visible) {
    const at::Tensor& m = *visible;
    TORCH_CHECK(m.scalar_type() == at::kBool && m.dim() == 4 && (m.size(0) == 1 || m.size(0) == q.size(0)) &&
                    m.size(1) == 1 && m.size(2) == q.size(2) && m.size(3) >= offset + q.size(2) && m.stride(3) == 1,
                "causal_attention: visible [B or 1, 1, T, >= offset + T] bool, the columns contiguous, not ",
                m.scalar_type(), " ", m.sizes());
  }
  const int64_t D = q.size(3);
  at::Tensor out = at::empty({q.size(0), q.size(2), q.size(1) * D}, q.options());
  if (q.numel() == 0) return out;
  switch (D) {
    case 64: attend<4>(q, k, v, offset, static_cast<float>(scale), amx, visible, out); break;
    case 128: attend<8>(q, k, v, offset, static_cast<float>(scale), amx, visible, out); break;
    default: TORCH_CHECK(false, "causal_attention: head size 64 or 128, not ", D);
  }
  return out;
#else
  TORCH_CHECK(false, "causal_attention: built without AVX-512 BF16");
#endif
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(spd, m) { m.def("causal_attention(Tensor q, Tensor k, Tensor v, SymInt offset, float scale, Tensor? visible=None, bool amx=True) -> Tensor"); }

TORCH_LIBRARY_IMPL(spd, CPU, m) { m.impl("causal_attention", &causal_attention); }
