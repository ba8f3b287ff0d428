// A few dozen rows through a projection held as the GGUF's blocks, on AMX:
//   spd::amx_int4_linear(x, codes, scales, mins): W [N, K] as Q4_1 blocks of 32 along K (matvec.cpp's layout: codes
//     [N, K / 2] uint8, byte j of a block holding element j low and j + 16 high; scales, minima [N, K / 32] fp16);
//   spd::amx_q8_linear(x, codes, scales): W [N, K] as Q8_0 blocks (codes [N, K] int8, scales [N, K / 32] fp16): the
//     output head.
// x [M, K] bf16 @ W.T; out [M, N] bf16.
//
// Why: verification's tree (~10-30 tokens) ran the projections on their bf16 weights, 212 MB a tree where the int4
// blocks are 66 MB, because our int4 kernel (AVX-512 BF16 dot products) pays ~1.8 ms for every row past the first
// (docs/performance-step.md, round 14). AMX multiplies 16 x 16 tiles, so the rows cost next to nothing; what is left
// is reading the blocks and turning them into bf16 tiles once for all the rows.
//
// Numbers: each block is dequantised as the model's bf16 weights were made from the GGUF (scale * q + min in fp32, a
// product then a sum, rounded to bf16), so this is a bf16 matmul on the bf16 weights; the products sum in fp32 in the
// tiles, then round to bf16 (another order of summation than oneDNN's, so an output may differ in its last bit).
//
// Work: pairs of 16-output blocks over the threads; for each 32-wide slice of K, the two blocks' weights become two A
// tiles (16 outputs x 32 bf16, two slices at a time: `q4_1_pair`, `q8_0_pair`; a slice holds half of each of two
// blocks, the order the lookup writes them in), the rows' activations (packed once per call in the same order, VNNI
// pairs, gathered) two B tiles of 16 rows, and four tile products accumulate C[outputs][rows] in fp32 across K; the C
// tiles go out a row's 16 outputs (a gather) at a time. More than 32 rows: passes of 32.
// Built where the CPU has AMX (build.py adds -mamx-tile -mamx-bf16); elsewhere the op refuses (amx.py never calls it).
#include <ATen/Parallel.h>
#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>
#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>
#include <torch/library.h>

#include <algorithm>
#include <vector>

#include "matvec.h"  // groups_from

#if defined(__AMX_TILE__) && defined(__AMX_BF16__) && defined(SPD_MATVEC)
#define SPD_AMX 1
#include "amx.h"
#endif

namespace {

constexpr int64_t BLOCK = 32;  // a Q4_1 block along K: one A tile row (32 bf16)
constexpr int64_t TILE = 16;   // outputs a tile, rows a tile
// Slices ahead whose codes are prefetched: a Q4_1 row's next 64-byte line (8, the line after it, was 8-10 % slower in
// a probe: 120 projections x 24 rows, 2 threads, 11.0 against 12.2 ms; the Q8_0 head 2.2 against 2.5)
constexpr int64_t PREFETCH = 4;

#ifdef SPD_AMX

// tmm0, tmm1: A (two output blocks' weights, 16 x 32 bf16); tmm2, tmm3: B (two row blocks' activations, 16 pairs x 16
// rows x 2); tmm4..7: C[output block][row block] (16 outputs x 16 rows fp32): `configure_tiles` (amx.h).
using spd_kernels::configure_tiles;
using spd_kernels::tiles_allowed;

// Blocks kc and kc + 1 of one output row as rows of two A tiles (32 bf16 each), their elements in the order the
// rows' B tiles hold them (`pack_rows`): `first` elements 0..15 of block kc then 0..15 of kc + 1, `second` elements
// 16..31 of each. w = bf16(scale * q + min), a product then a sum in fp32 (no fused multiply-add: the bf16 weights were
// made so). The 16 values a block can take are computed once (both blocks' in one vector of 32, the scales and minima
// broadcast from fp32 copies), then each code looks its value up (vpermw).
inline void q4_1_pair(const uint8_t* codes, const float* scales, const float* mins, c10::BFloat16* first,
                      c10::BFloat16* second) {
  const __m512 q = _mm512_set_ps(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
  // The _round forms are builtins, not vector operators, so the compiler cannot contract them into a fused
  // multiply-add. (An optimize("fp-contract=off") attribute did the same but kept this function from being inlined:
  // a call and a vzeroupper for every 64 weights.)
  constexpr int as_is = _MM_FROUND_CUR_DIRECTION;
  auto values = [&](float scale, float min) {
    return _mm512_add_round_ps(_mm512_mul_round_ps(q, _mm512_set1_ps(scale), as_is), _mm512_set1_ps(min), as_is);
  };
  const __m512 t0 = values(scales[0], mins[0]), t1 = values(scales[1], mins[1]);
  const __m512i table = (__m512i)_mm512_cvtne2ps_pbh(t1, t0);  // entries 0..15: block kc's values, 16..31: kc + 1's
  // the blocks' 32 bytes as 16-bit lanes (0..15: block kc, 16..31: kc + 1); their second block looks up entries 16..31
  const __m512i bytes = _mm512_cvtepu8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(codes)));
  const __m512i upper = _mm512_mask_set1_epi16(_mm512_setzero_si512(), 0xFFFF0000u, 16);
  const __m512i lo = _mm512_ternarylogic_epi32(bytes, _mm512_set1_epi16(0xF), upper, 0xEA);  // (a & b) | c
  const __m512i hi = _mm512_or_si512(_mm512_srli_epi16(bytes, 4), upper);
  _mm512_store_si512(first, _mm512_permutexvar_epi16(lo, table));
  _mm512_store_si512(second, _mm512_permutexvar_epi16(hi, table));
}

// Blocks kc and kc + 1 of a Q8_0 row (32 int8 codes a block, its scale d) as rows of two A tiles in `q4_1_pair`'s
// order: w = bf16(d * q) in fp32, as the model's bf16 head was made from the GGUF's Q8_0 blocks.
inline void q8_0_pair(const int8_t* codes, const float* scales, c10::BFloat16* first, c10::BFloat16* second) {
  auto values = [&](int64_t at, float scale) {
    return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(codes + at)))),
                         _mm512_set1_ps(scale));
  };
  _mm512_store_si512(first, (__m512i)_mm512_cvtne2ps_pbh(values(32, scales[1]), values(0, scales[0])));
  _mm512_store_si512(second, (__m512i)_mm512_cvtne2ps_pbh(values(48, scales[1]), values(16, scales[0])));
}

// One output row's `count` fp16 values as fp32 into `to` (matvec.h's `widen_scales` without its aligned stores past the
// end: here the rows' values lie back to back).
inline void widen(const c10::Half* from, int64_t count, float* to) {
  for (int64_t g = 0; g < count; g += 16) {
    const __mmask16 live = spd_kernels::groups_from(g, count);
    _mm512_mask_storeu_ps(to + g, live, _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(live, from + g)));
  }
}

// [0, step, 2 step, ..., 15 step]: a gather's 16 offsets.
inline __m512i strided(int step) {
  const __m512i lanes = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
  return _mm512_mullo_epi32(lanes, _mm512_set1_epi32(step));
}

// The weights' two layouts, as `blocks` reads them: `widen_rows` takes rows [n, n + count)'s fp16 scales (and
// minima) as fp32 into `f` (count x kinds x slices: a row's scales, then its minima), `pair` writes row n + i's slices
// kc, kc + 1 as two A tile rows.
struct Q4_1 {
  const uint8_t* codes;
  const c10::Half *scales, *mins;
  int64_t K;
  static constexpr int64_t kinds = 2;  // scales and minima
  void widen_rows(int64_t n, int64_t count, float* f) const {
    const int64_t slices = K / BLOCK;
    for (int64_t i = 0; i < count; ++i) {
      widen(scales + (n + i) * slices, slices, f + (2 * i) * slices);
      widen(mins + (n + i) * slices, slices, f + (2 * i + 1) * slices);
    }
  }
  void pair(int64_t n, int64_t i, int64_t kc, const float* f, c10::BFloat16* first, c10::BFloat16* second) const {
    const int64_t slices = K / BLOCK;
    q4_1_pair(codes + (n + i) * K / 2 + kc * 16, f + 2 * i * slices + kc, f + (2 * i + 1) * slices + kc, first, second);
  }
  const void* next(int64_t n, int64_t kc) const { return codes + n * K / 2 + kc * 16; }
};

struct Q8_0 {
  const int8_t* codes;
  const c10::Half* scales;
  int64_t K;
  static constexpr int64_t kinds = 1;
  void widen_rows(int64_t n, int64_t count, float* f) const {
    const int64_t slices = K / BLOCK;
    for (int64_t i = 0; i < count; ++i) widen(scales + (n + i) * slices, slices, f + i * slices);
  }
  void pair(int64_t n, int64_t i, int64_t kc, const float* f, c10::BFloat16* first, c10::BFloat16* second) const {
    q8_0_pair(codes + (n + i) * K + kc * BLOCK, f + i * (K / BLOCK) + kc, first, second);
  }
  const void* next(int64_t n, int64_t kc) const { return codes + n * K + kc * BLOCK; }
};

// x's rows [m0, m0 + 32) as B tiles, row block b (0, 1), slice s = kc + h (kc even): [16 pairs][16 rows][2], zeros
// past M; their elements in the A tiles' order (`q4_1_pair`): pairs 0..7 from block kc's elements 16h.., 8..15 from
// kc + 1's.
void pack_rows(const c10::BFloat16* x, int64_t M, int64_t K, int64_t m0, c10::BFloat16* packed) {
  const int64_t slices = K / BLOCK, units = K / 2;  // a row's elements as pairs (32-bit units)
  const int* src = reinterpret_cast<const int*>(x);
  int* dst = reinterpret_cast<int*>(packed);
  const __m512i rows = strided(static_cast<int>(units));
  for (int64_t b = 0; b < 2; ++b) {  // written in order, a pair's 16 rows gathered at a time (zeros past M)
    const int64_t first = m0 + b * TILE, live = std::clamp<int64_t>(M - first, 0, TILE);
    const __mmask16 mask = static_cast<__mmask16>((1u << live) - 1);
    const int* base = src + std::min(first, M - 1) * units;
    for (int64_t kc = 0; kc < slices; kc += 2)
      for (int64_t h = 0; h < 2; ++h)
        for (int64_t p = 0; p < TILE; ++p, dst += TILE) {
          const int64_t unit = kc * 16 + 8 * h + (p < 8 ? p : p + 8);
          _mm512_store_si512(dst, _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), mask, rows, base + unit, 4));
        }
  }
}

// Output blocks [b0, b1) (16 outputs each) for the (at most) 32 rows packed in `packed` starting at row m0.
template <typename Weights>
void blocks(const Weights& w, int64_t K, int64_t N, int64_t M, int64_t m0, const c10::BFloat16* packed, int64_t b0,
            int64_t b1, c10::BFloat16* out) {
  const int64_t slices = K / BLOCK, rows = std::min<int64_t>(2 * TILE, M - m0);
  const int64_t slice_bytes = TILE * TILE * 2 * sizeof(c10::BFloat16);
  // A tiles [buffer][output block][slice kc, kc + 1]: the next pair of slices is dequantised into one buffer while
  // the tiles load from the other
  alignas(64) c10::BFloat16 a[2][2][2][TILE * BLOCK];
  alignas(64) float c[4][TILE * TILE];
  std::vector<float> widened(2 * TILE * Weights::kinds * slices);  // the 32 rows' scales (and minima) as fp32
  auto dequantise = [&](int64_t b, int64_t pair, int64_t kc, int buffer) {
    for (int64_t j = 0; j < pair; ++j)
      for (int64_t i = 0; i < TILE; ++i) {
        const int64_t n = (b + j) * TILE + i;
        if (kc + PREFETCH < slices) _mm_prefetch(static_cast<const char*>(w.next(n, kc + PREFETCH)), _MM_HINT_T0);
        w.pair(b * TILE, j * TILE + i, kc, widened.data(), a[buffer][j][0] + i * BLOCK, a[buffer][j][1] + i * BLOCK);
      }
  };
  // a C tile [16 outputs][16 rows] to out's rows: a column (one row's 16 outputs) gathered at a time
  const __m512i column = strided(TILE);
  configure_tiles();
  for (int64_t b = b0; b < b1; b += 2) {
    const int64_t pair = std::min<int64_t>(2, b1 - b);
    w.widen_rows(b * TILE, pair * TILE, widened.data());
    // the next pair of blocks' first lines on their way (the head's 30 MB are read cold: 3.3 -> 2.9 ms)
    if (b + 2 < b1)
      for (int64_t i = 0; i < 2 * TILE; ++i)
        _mm_prefetch(static_cast<const char*>(w.next((b + 2) * TILE + i, 0)), _MM_HINT_T0);
    _tile_zero(4);
    _tile_zero(5);
    _tile_zero(6);
    _tile_zero(7);
    dequantise(b, pair, 0, 0);
    for (int64_t kc = 0; kc < slices; kc += 2) {
      const int buffer = (kc / 2) % 2;
      if (kc + 2 < slices) dequantise(b, pair, kc + 2, 1 - buffer);
      for (int64_t h = 0; h < 2; ++h) {  // rows 16..31's tiles only where there are such rows
        _tile_loadd(2, reinterpret_cast<const char*>(packed) + (kc + h) * slice_bytes, 64);
        if (rows > TILE) _tile_loadd(3, reinterpret_cast<const char*>(packed) + (slices + kc + h) * slice_bytes, 64);
        _tile_loadd(0, a[buffer][0][h], 64);
        _tile_dpbf16ps(4, 0, 2);
        if (rows > TILE) _tile_dpbf16ps(5, 0, 3);
        if (pair == 2) {
          _tile_loadd(1, a[buffer][1][h], 64);
          _tile_dpbf16ps(6, 1, 2);
          if (rows > TILE) _tile_dpbf16ps(7, 1, 3);
        }
      }
    }
    _tile_stored(4, c[0], 64);
    _tile_stored(5, c[1], 64);
    _tile_stored(6, c[2], 64);
    _tile_stored(7, c[3], 64);
    for (int64_t j = 0; j < pair; ++j)
      for (int64_t r = 0; r < rows; ++r) {
        const __m512 v = _mm512_i32gather_ps(column, c[2 * j + r / TILE] + r % TILE, 4);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + (m0 + r) * N + (b + j) * TILE),
                            (__m256i)_mm512_cvtneps_pbh(v));
      }
  }
  _tile_release();
}

#endif  // SPD_AMX

#ifdef SPD_AMX
// out [M, N] = x [M, K] @ W.T for `w` (N outputs): passes of 32 rows, output block pairs over the threads.
template <typename Weights>
at::Tensor linear(const at::Tensor& x, const Weights& w, int64_t N, int64_t K) {
  TORCH_CHECK(tiles_allowed(), "spd::amx: Linux refused this process AMX's tile state");
  const int64_t M = x.size(0);
  at::Tensor out = at::empty({M, N}, x.options());
  if (M == 0 || N == 0) return out;
  // not a std::vector: every element is written by pack_rows, and a vector's value-initialisation of c10::BFloat16
  // (an element at a time) took 13 us a call at K = 1,536
  const at::Tensor packing = at::empty({2 * (K / BLOCK) * TILE * TILE * 2}, x.options());
  c10::BFloat16* op = out.data_ptr<c10::BFloat16>();
  const int64_t pairs = (N / TILE + 1) / 2;
  for (int64_t m0 = 0; m0 < M; m0 += 2 * TILE) {
    pack_rows(x.data_ptr<c10::BFloat16>(), M, K, m0, packing.data_ptr<c10::BFloat16>());
    at::parallel_for(0, pairs, 1, [&](int64_t p0, int64_t p1) {
      blocks(w, K, N, M, m0, packing.data_ptr<c10::BFloat16>(), 2 * p0, std::min(N / TILE, 2 * p1), op);
    });
  }
  return out;
}
#endif

void check_tile_x(const at::Tensor& x, int64_t K, const char* op) {
  TORCH_CHECK(x.dim() == 2 && x.size(1) == K && x.scalar_type() == at::kBFloat16 && x.is_contiguous() &&
                  x.device().is_cpu(),
              op, ": x [M, ", K, "] contiguous bf16 on the CPU, not ", x.sizes());
}

at::Tensor int4_linear(const at::Tensor& x, const at::Tensor& codes, const at::Tensor& scales, const at::Tensor& mins) {
#ifdef SPD_AMX
  const int64_t N = codes.size(0), K = codes.size(1) * 2;
  check_tile_x(x, K, "int4_linear");
  TORCH_CHECK(codes.scalar_type() == at::kByte && codes.is_contiguous() && K % (2 * BLOCK) == 0 && N % TILE == 0,
              "int4_linear: codes [N, K / 2] uint8, N a multiple of 16 and K of 64");
  TORCH_CHECK(scales.scalar_type() == at::kHalf && mins.scalar_type() == at::kHalf && scales.is_contiguous() &&
                  mins.is_contiguous() && scales.numel() == N * (K / BLOCK) && mins.numel() == N * (K / BLOCK),
              "int4_linear: scales and mins [N, K / 32] fp16");
  return linear(x, Q4_1{codes.data_ptr<uint8_t>(), scales.data_ptr<c10::Half>(), mins.data_ptr<c10::Half>(), K}, N, K);
#else
  TORCH_CHECK(false, "int4_linear: built without AMX");
#endif
}

at::Tensor q8_linear(const at::Tensor& x, const at::Tensor& codes, const at::Tensor& scales) {
#ifdef SPD_AMX
  const int64_t N = codes.size(0), K = codes.size(1);
  check_tile_x(x, K, "q8_linear");
  TORCH_CHECK(codes.scalar_type() == at::kChar && codes.is_contiguous() && K % (2 * BLOCK) == 0 && N % TILE == 0,
              "q8_linear: codes [N, K] int8, N a multiple of 16 and K of 64");
  TORCH_CHECK(scales.scalar_type() == at::kHalf && scales.is_contiguous() && scales.numel() == N * (K / BLOCK),
              "q8_linear: scales [N, K / 32] fp16");
  return linear(x, Q8_0{codes.data_ptr<int8_t>(), scales.data_ptr<c10::Half>(), K}, N, K);
#else
  TORCH_CHECK(false, "q8_linear: built without AMX");
#endif
}

bool built_with_amx() {
#ifdef SPD_AMX
  return true;
#else
  return false;
#endif
}

}  // namespace

TORCH_LIBRARY_FRAGMENT(spd, m) {
  m.def("amx_int4_linear(Tensor x, Tensor codes, Tensor scales, Tensor mins) -> Tensor");
  m.def("amx_q8_linear(Tensor x, Tensor codes, Tensor scales) -> Tensor");
  m.def("amx_built() -> bool");
}

TORCH_LIBRARY_IMPL(spd, CPU, m) {
  m.impl("amx_int4_linear", &int4_linear);
  m.impl("amx_q8_linear", &q8_linear);
}
TORCH_LIBRARY_IMPL(spd, CatchAll, m) { m.impl("amx_built", &built_with_amx); }
