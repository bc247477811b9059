// Row kernels shared by the softmax and layer-norm families (abi/tlrt_softmax.h,
// abi/tlrt_layer_norm.h).
//
// Part 1 (host and device): the per-element formulas. Both backends call exactly these functions,
// so the CPU stub and the CUDA kernels perform the same IEEE binary32 operations in the same order
// (g++ -ffp-contract=off, nvcc -fmad=false; divisions, square roots and reciprocals are the
// correctly rounded IEEE operations on both sides; exp and log are tlrt::math's shared float32
// functions; the one fused multiply-add of each family is written as num::fma). Every sum over a
// row or a column is THE TREE of core/numerics/reduce_tree.hpp; the row maximum is order-free
// (ew::max_f is commutative and associative, -0 < +0 included; only the payload of a NaN could
// depend on the order, and payloads are unspecified), so each backend may take it in any order.
//
// Part 2 (nvcc; also the CPU emulator, tests/emu/cuda_emu.hpp): the building blocks of the CUDA
// row kernels (cuda/softmax.cu, cuda/layer_norm.cu): the lane layout of a row held in registers by
// a group of threads, the group-wide tree sum and maximum, the short-row segments, and the
// long-row passes (chunk-parallel kernels, one block per row).
#pragma once

#include <cstdint>

#include "core/numerics/elementwise_ops.hpp"
#include "core/numerics/hd.hpp"
#include "core/numerics/reduce_tree.hpp"
#include "core/numerics/shared_math.hpp"

namespace tlrt {
namespace row {

// The three forward flavours of tlrt_softmax.h.
enum class Kind : uint8_t { Softmax, LogSoftmax, Masked };

TLRT_HD float neg_inf() { return num::u2f(0xFF800000u); }

// Correctly rounded IEEE division, square root and reciprocal (one rounding each, both backends).
TLRT_HD float div_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}
TLRT_HD float sqrt_rn(float a) {
#if defined(__CUDA_ARCH__)
  return __fsqrt_rn(a);
#else
  return __builtin_sqrtf(a);
#endif
}
TLRT_HD float rcp_rn(float a) {
#if defined(__CUDA_ARCH__)
  return __frcp_rn(a);
#else
  return 1.0f / a;
#endif
}

// ---- softmax, log-softmax, hard-masked softmax --------------------------------------------------
// Per row: m = max_j x[j]; e[j] = exp(x[j] - m); s = S(e); the outputs below.

// A mask value allows its entry unless it compares equal to zero (+0 and -0 block; NaN allows).
TLRT_HD bool allowed(float mask) { return !(mask == 0.0f); }
// The value a masked entry contributes to the row maximum: x if allowed, -inf (the identity of
// max) if blocked.
TLRT_HD float masked_score(float x, float mask) { return allowed(mask) ? x : neg_inf(); }

TLRT_HD float shifted_exp(float x, float m) { return math::exp_f(x - m); }
// The masked e[j]: exp(x[j] - m) if allowed, exactly +0 if blocked.
TLRT_HD float masked_exp(float x, float mask, float m) {
  return allowed(mask) ? math::exp_f(x - m) : 0.0f;
}
TLRT_HD float softmax_out(float e, float s) { return div_rn(e, s); }
TLRT_HD float log_softmax_out(float x, float m, float log_s) { return (x - m) - log_s; }
// Hard-masked output for a row whose maximum m is not -inf (callers write +0 for the whole row
// when it is).
TLRT_HD float masked_out(float e, float mask, float s) {
  return allowed(mask) ? div_rn(e, s) : 0.0f;
}

// Backward. softmax: dot = S(g[j] * y[j]), dx[j] = y[j] * (g[j] - dot).
TLRT_HD float softmax_bwd_term(float y, float g) { return g * y; }
TLRT_HD float softmax_bwd_out(float y, float g, float dot) { return y * (g - dot); }
// log-softmax: sg = S(g), dx[j] = g[j] - exp(y[j]) * sg as ONE fused multiply-add.
TLRT_HD float log_softmax_bwd_out(float y, float g, float sg) {
  return num::fma(-math::exp_f(y), sg, g);
}

// ---- cross-entropy (abi/tlrt_softmax.h) ---------------------------------------------------------
// Row r with label l: ignored when l == ignore (tested first), else counted; a counted label is
// valid when 0 <= l < cols, a fault otherwise. p = (x[l] - m) - log(s) for a valid row (the
// log-softmax value), +0 otherwise; loss = -(P / (float)n) (red::finish, tlrt_reduce_mean's
// division); backward c = ((-g) * (float)(1 / (double)n)) + 0, dx[j] = fma(-exp(y[j]), c_row,
// j == l ? c_row : +0) with c_row = c for a valid row and +0 for the others.
// ignore == kNoIgnore ignores nothing (core maps TLRT_CROSS_ENTROPY_NO_IGNORE to it).
enum class Label : uint8_t { Valid, Ignored, Fault };
constexpr int64_t kNoIgnore = (-0x7FFFFFFFFFFFFFFFll - 1);

template <class T>
TLRT_HD Label ce_label(T v, uint64_t cols, int64_t ignore) {
  const int64_t w = (int64_t)v;
  if (ignore != kNoIgnore && w == ignore) return Label::Ignored;
  return (w >= 0 && (uint64_t)w < cols) ? Label::Valid : Label::Fault;
}
TLRT_HD float ce_loss(float sum, uint64_t n) { return -red::finish(sum, (float)n); }
TLRT_HD float ce_row_grad(float g, uint64_t n) {
  const float k = (float)(n ? 1.0 / (double)n : 0.0);
  return (-g) * k + 0.0f;
}
TLRT_HD float ce_bwd_out(float x, float m, float ls, float c, bool at_label) {
  return log_softmax_bwd_out(log_softmax_out(x, m, ls), at_label ? c : 0.0f, c);
}

// ---- layer norm ---------------------------------------------------------------------------------
// n = (float)cols (rounded once, by the backend's host code). Per row:
//   mean = S(x) / n; var = S(sq_dev(x, mean)) / n; inv_std = 1 / sqrt(var + eps);
//   xhat = (x - mean) * inv_std; y = fma(xhat, gamma, beta).
// The divisions by n are red::finish (the one tlrt_reduce_mean uses: r / n, and r itself when
// n == 1, which is the same value).
TLRT_HD float per_col(float s, float n) { return red::finish(s, n); }
TLRT_HD float sq_dev(float x, float mean) {
  const float d = x - mean;
  return d * d;
}
TLRT_HD float inv_std_of(float var, float eps) { return rcp_rn(sqrt_rn(var + eps)); }
TLRT_HD float xhat_of(float x, float mean, float inv_std) { return (x - mean) * inv_std; }
TLRT_HD float ln_out(float xhat, float gamma, float beta) { return num::fma(xhat, gamma, beta); }
// Backward, per row: d = dy * gamma; a = S(d) / n; b = S(d * xhat) / n;
// dx = (d - (a + xhat * b)) * inv_std. Columns: dgamma = S_rows(dy * xhat), dbeta = S_rows(dy).
TLRT_HD float ln_d(float dy, float gamma) { return dy * gamma; }
TLRT_HD float ln_bwd_out(float d, float xhat, float a, float b, float inv_std) {
  return (d - (a + xhat * b)) * inv_std;
}

// ---- RMS norm (abi/tlrt_layer_norm.h) -----------------------------------------------------------
// Per row: ms = S(sq(x)) / n; inv_rms = inv_std_of(ms, eps) = 1 / sqrt(ms + eps);
// xhat = x * inv_rms; y = xhat * gamma (no gamma: y = xhat).
// Backward, per row: d = dy * gamma (no gamma: d = dy); b = S(d * xhat) / n;
// dx = (d - xhat * b) * inv_rms. Columns: dgamma = S_rows(dy * xhat).
TLRT_HD float sq(float x) { return x * x; }
TLRT_HD float rms_xhat(float x, float inv_rms) { return x * inv_rms; }
TLRT_HD float rms_out(float xhat, float gamma) { return xhat * gamma; }
TLRT_HD float rms_bwd_out(float d, float xhat, float b, float inv_rms) {
  return (d - xhat * b) * inv_rms;
}

// Lanes of the column tree of dgamma / dbeta: the rows of chunk k (rows 4096 k .. 4096 k + 4095)
// are folded lane by lane, lane t taking rows 4096 k + t + 256 r (r = 0..15) in order; the lane
// values of a chunk are then reduced by the tree (a sequence of at most 256 values, each its own
// lane: exactly the tree's halving), and the chunk values by the tree again. With a single chunk of
// rows <= 256 rows, each lane holds one row and only `rows` lanes exist (the halving over the
// other, identity lanes changes nothing).
TLRT_HD unsigned col_lanes(uint64_t rows) {
  return rows < red::kLanes ? (unsigned)rows : red::kLanes;
}

}  // namespace row
}  // namespace tlrt

// ==== Part 2: CUDA building blocks ===============================================================
#if defined(__CUDACC__) || defined(TLRT_CUDA_EMULATION)

namespace tlrt {
namespace row {
namespace dev {

constexpr unsigned kThreads = 256;  // threads per block of every row kernel

// A group of NT threads (32, 64, 128 or 256; kThreads / NT groups per block) holds one row in
// registers. Thread T (0..NT-1) holds, for each chunk c < NC of the row and each r < R, the tree's
// lanes t = T + NT k (k < K = 256 / NT), i.e. row element 4096 c + 256 r + T + NT k, at value index
// v = (c R + r) K + k. So every lane's elements are in one thread (it folds them in r order), and
// for fixed (c, r, k) a warp touches 32 consecutive floats (128-byte coalesced accesses).
// A row of cols elements fits when cols <= NC * R * 256 (with R = 16 whenever NC > 1).
template <unsigned NT, unsigned NC, unsigned R>
struct Layout {
  static_assert(NT == 32 || NT == 64 || NT == 128 || NT == 256, "NT: 32, 64, 128 or 256");
  static_assert(NC == 1 || R == 16, "multi-chunk rows hold whole chunks");
  static constexpr unsigned K = 256 / NT;
  static constexpr unsigned V = NC * R * K;
  static constexpr unsigned kGroups = kThreads / NT;
  static constexpr uint64_t kMaxCols = (uint64_t)NC * R * 256;
  __device__ __forceinline__ static unsigned off(unsigned T, unsigned v) {
    const unsigned k = v % K, r = (v / K) % R, c = v / (K * R);
    return c * red::kChunk + r * red::kLanes + T + NT * k;
  }
};

// Two shared-memory buffers used alternately by successive group reductions, so that one
// __syncthreads per reduction suffices (the reads of reduction n precede, in program order, the
// barrier of reduction n + 1, so reduction n + 2 may overwrite its buffer). Every thread of the
// block must make the same sequence of calls (the row loops of the kernels are block-uniform).
template <unsigned WORDS>
struct Exchange {
  float (*sh)[WORDS];
  unsigned buf;
  __device__ __forceinline__ float *next() {
    float *p = sh[buf];
    buf ^= 1u;
    return p;
  }
};

// Maximum over the warp (order-free) of the lanes' values m, in every lane: xor-shuffles d = 16 ..
// 1. (Shared by group_max and cuda/common/split_row.cuh's SplitState::max.)
__device__ __forceinline__ float warp_max(float m) {
#pragma unroll
  for (unsigned d = 16; d >= 1; d >>= 1) m = ew::max_f(m, __shfl_xor_sync(0xFFFFFFFFu, m, d));
  return m;
}

// Maximum over the group (order-free): in-thread value m, xor-shuffles in the warp (warp_max), then
// across the group's warps through shared memory (NT / 32 words of the group's slice). Every thread
// of the group gets the result.
template <unsigned NT, unsigned W>
__device__ __forceinline__ float group_max(float m, Exchange<W> &ex) {
  m = warp_max(m);
  if constexpr (NT > 32) {
    float *sh = ex.next() + (threadIdx.x / NT) * (NT / 32);
    const unsigned T = threadIdx.x % NT;
    if ((T & 31u) == 0) sh[T >> 5] = m;
    __syncthreads();
    float r = sh[0];
#pragma unroll
    for (unsigned w = 1; w < NT / 32; ++w) r = ew::max_f(r, sh[w]);
    m = r;
  }
  return m;
}

// The tree's halving for NS independent sequences at once. a[s][k] is the value of lane T + NT k of
// sequence s after its fold (the tree's step 2); returns, in every thread of the group, the value
// of lane 0 after the halving steps h = 128, 64, ..., 1 (step 3):
//  - h >= NT pair lanes of one thread (k with k + h / NT);
//  - h = NT / 2 .. 32 pair lanes of different warps: each thread stores its lane, and after one
//    barrier every warp of the group reads lanes w + 32 j (j < NT / 32) and halves over j;
//  - h = 16 .. 1 with __shfl_down_sync, then lane 0's value is broadcast.
// Every warp of the group performs the same operations on the same values, so all agree.
template <red::Op OP, unsigned NT, unsigned NS, unsigned W>
__device__ __forceinline__ void group_halving(float (&a)[NS][256 / NT], Exchange<W> &ex,
                                              float (&out)[NS]) {
  using O = red::Ops<OP>;
  const unsigned w = threadIdx.x & 31u;
  red::halve_each<OP>(a);
  float v[NS];
#pragma unroll
  for (unsigned s = 0; s < NS; ++s) v[s] = a[s][0];
  if constexpr (NT > 32) {
    static_assert(NS * kThreads <= W, "exchange buffer too small for the block's groups");
    float *sh = ex.next() + (threadIdx.x / NT) * (NS * NT);
    const unsigned T = threadIdx.x % NT;
#pragma unroll
    for (unsigned s = 0; s < NS; ++s) sh[s * NT + T] = v[s];
    __syncthreads();
#pragma unroll
    for (unsigned s = 0; s < NS; ++s) {
      float b[NT / 32];
#pragma unroll
      for (unsigned j = 0; j < NT / 32; ++j) b[j] = sh[s * NT + w + 32 * j];
      v[s] = red::halve<OP>(b);
    }
  }
#pragma unroll
  for (unsigned s = 0; s < NS; ++s) {
    float x = v[s];
#pragma unroll
    for (unsigned d = 16; d >= 1; d >>= 1) x = O::op(x, __shfl_down_sync(0xFFFFFFFFu, x, d));
    out[s] = __shfl_sync(0xFFFFFFFFu, x, 0);
  }
}

// The tree value of a row held in registers, for NS sequences at once: fold(s, v) is element value
// index v of sequence s (only called for elements inside the row: off(T, v) < cols). The chunk
// values of a two-chunk row are combined as the tree does it: (-0 + c0) + (-0 + c1) = c0 + c1.
// FULL: the caller guarantees cols == L::kMaxCols (no element of the layout is past the row), so
// the per-element bounds tests go.
template <unsigned NT, unsigned NC, unsigned R, unsigned NS, bool FULL = false, unsigned W,
          class Val>
__device__ __forceinline__ void row_sums(Val val, uint64_t cols, bool active, Exchange<W> &ex,
                                         float (&out)[NS]) {
  using L = Layout<NT, NC, R>;
  using O = red::Ops<red::Op::Sum>;
  const unsigned T = threadIdx.x % NT;
  float a[NS * NC][L::K];
#pragma unroll
  for (unsigned i = 0; i < NS * NC; ++i)
#pragma unroll
    for (unsigned k = 0; k < L::K; ++k) a[i][k] = O::identity();
#pragma unroll
  for (unsigned v = 0; v < L::V; ++v) {
    const unsigned k = v % L::K, c = v / (L::K * R);
    if (active && (FULL || L::off(T, v) < cols)) {
#pragma unroll
      for (unsigned s = 0; s < NS; ++s) a[s * NC + c][k] = O::op(a[s * NC + c][k], val(s, v));
    }
  }
  float r[NS * NC];
  group_halving<red::Op::Sum, NT, NS * NC>(a, ex, r);
#pragma unroll
  for (unsigned s = 0; s < NS; ++s) out[s] = NC == 1 ? r[s] : r[s * NC] + r[s * NC + 1];
}

// ---- long rows: one 256-thread block per (row, chunk of 4096 elements) --------------------------
// Thread T is the tree's lane T of the chunk: it folds elements 256 r + T (r = 0..15) in order;
// the block halves the 256 lane values (group_halving with NT = 256). Partial values go to
// part[row * nc + chunk]; the caller finishes each row with the reduction backend's reduce_axis
// over (rows, nc, 1), i.e. the tree's next levels. F: f.prep(row) -> per-row state P (loads of
// per-row statistics; NoRow when there are none); f(p, row, e, out[NS]) writes the NS values of
// element e of the row.
struct NoRow {};

template <red::Op OP, unsigned NS, class F>
__global__ void __launch_bounds__(kThreads)
    chunk_reduce(F f, uint64_t rows, uint64_t cols, uint64_t nc, float *__restrict part0,
                 float *__restrict part1) {
  using O = red::Ops<OP>;
  __shared__ float sh[2][NS * kThreads];
  Exchange<NS * kThreads> ex{sh, 0};
  const unsigned T = threadIdx.x;
  const uint64_t tasks = rows * nc;
  for (uint64_t task = blockIdx.x; task < tasks; task += gridDim.x) {
    const uint64_t rw = task / nc;
    const uint64_t e0 = (task - rw * nc) * red::kChunk;
    const uint64_t len = cols - e0 < red::kChunk ? cols - e0 : red::kChunk;
    const auto p = f.prep(rw);
    float a[NS][1];
#pragma unroll
    for (unsigned s = 0; s < NS; ++s) a[s][0] = O::identity();
#pragma unroll 4
    for (unsigned r = 0; r < red::kDepth; ++r) {
      const uint64_t e = (uint64_t)r * red::kLanes + T;
      if (e < len) {
        float v[NS];
        f(p, rw, e0 + e, v);
#pragma unroll
        for (unsigned s = 0; s < NS; ++s) a[s][0] = O::op(a[s][0], v[s]);
      }
    }
    float out[NS];
    group_halving<OP, kThreads, NS>(a, ex, out);
    if (T == 0) {
      part0[task] = out[0];
      if constexpr (NS > 1) part1[task] = out[1];
    }
  }
}

// y[row * cols + e] = f(f.prep(row), row, e) for every element, one block per (row, chunk).
template <class F>
__global__ void __launch_bounds__(kThreads)
    chunk_map(F f, uint64_t rows, uint64_t cols, uint64_t nc, float *__restrict y) {
  const uint64_t tasks = rows * nc;
  for (uint64_t task = blockIdx.x; task < tasks; task += gridDim.x) {
    const uint64_t rw = task / nc;
    const uint64_t e0 = (task - rw * nc) * red::kChunk;
    const auto p = f.prep(rw);
    float *yr = y + rw * cols;
#pragma unroll 4
    for (unsigned r = 0; r < red::kDepth; ++r) {
      const uint64_t e = e0 + (uint64_t)r * red::kLanes + threadIdx.x;
      if (e < cols) yr[e] = f(p, rw, e);
    }
  }
}

// ---- short rows: a segment of W lanes (a power of two <= 32) per row, lane j = element j -------
// red::small<W> across the segment: lane j starts at -0 + v[j] (j < cols) or -0 (the caller
// passes that), then s[t] = s[t] + s[t + h] for h = W/2 .. 1 by __shfl_down_sync within the
// segment (lane t adds lane t + h: the same additions in the same order); lane 0's value is
// broadcast to the segment. Every lane of the warp must call these. A thread of a short-row kernel
// takes kSegRows rows at a time (that many independent loads in flight).
constexpr unsigned kSegRows = 4;

template <unsigned W>
__device__ __forceinline__ float seg_sum(float v) {
#pragma unroll
  for (unsigned h = W / 2; h >= 1; h /= 2) v = v + __shfl_down_sync(0xFFFFFFFFu, v, h, (int)W);
  return W > 1 ? __shfl_sync(0xFFFFFFFFu, v, 0, (int)W) : v;
}

// Maximum over the segment (order-free), in every lane of it: ew::max_f's maximum (-0 < +0; a
// NaN if any lane holds one) taken as the integer maximum of order-preserving keys: k(v) = the
// encoding of v with its 31 low bits flipped when v is negative (signed compare: -inf < ... < -0 <
// +0 < ... < +inf), a NaN the largest key 0x7FFFFFFF, which decodes to the canonical NaN (what
// max_f's a + b gives on the GPU). Per xor step 2 instructions (SHFL, IMNMX) instead of max_f's 7
// (its NaN and signed-zero selects). Segments of 2 lanes keep max_f (one step: the key
// conversions would cost more than they save).
template <unsigned W>
__device__ __forceinline__ float seg_max(float v) {
  if constexpr (W <= 2) {
    if constexpr (W == 2) v = ew::max_f(v, __shfl_xor_sync(0xFFFFFFFFu, v, 1));
    return v;
  } else {
    const uint32_t b = num::f2u(v);
    int k = num::isnan(v) ? 0x7FFFFFFF : (int)(b ^ ((uint32_t)((int)b >> 31) >> 1));
#pragma unroll
    for (unsigned d = W / 2; d >= 1; d /= 2) {
      const int o = (int)num::f2u(__shfl_xor_sync(0xFFFFFFFFu, num::u2f((uint32_t)k), d));
      k = o > k ? o : k;
    }
    return num::u2f((uint32_t)k ^ ((uint32_t)(k >> 31) >> 1));
  }
}

// ---- long rows: one 256-thread block per row, every pass in one kernel --------------------------
// The block walks its row chunk by chunk (thread T is the tree's lane T of every chunk: it folds
// elements 4096 c + 256 r + T, r = 0..15, in order), two chunks at a time (32 independent loads
// in flight per thread), halves the lanes of both chunks with one barrier (group_halving, NT =
// 256) and keeps the chunk values in shared memory; the tree's next level over the nc <= 256
// chunk values is one more halving (lane t = -0 + chunk value t, as the tree builds it). These
// are exactly the operations of chunk_reduce followed by reduce_axis over (rows, nc, 1). A row is
// read once per pass; the caller sizes the grid so that the rows in flight stay in L2 and the
// later passes hit it.
constexpr uint64_t kBlockRowMaxChunks = 256;
constexpr uint64_t kBlockRowMaxCols = kBlockRowMaxChunks * red::kChunk;  // 2^20

// The shared state of one long-row block: the exchange buffers (reductions of up to two sequences
// of two chunks; one Exchange for the block's whole life, so that successive reductions alternate
// buffers as Exchange requires) and the chunk values of up to two sequences.
constexpr unsigned kBlockRowWords = 4 * kThreads;
struct BlockRow {
  Exchange<kBlockRowWords> ex;
  float (*cv)[kBlockRowMaxChunks];
};
#define TLRT_BLOCK_ROW_SHARED(NAME)                                  \
  __shared__ float NAME##_ex[2][::tlrt::row::dev::kBlockRowWords];   \
  __shared__ float NAME##_cv[2][::tlrt::row::dev::kBlockRowMaxChunks]; \
  ::tlrt::row::dev::BlockRow NAME{{NAME##_ex, 0}, NAME##_cv}

// out[s] = THE TREE sum over e = 0..cols-1 of val(e)[s], in every thread of the block.
// val(e, v[NS]) is called for e < cols only. Every thread of the block must call this.
template <unsigned NS, class Val>
__device__ __forceinline__ void block_row_sum(Val val, uint64_t cols, BlockRow &sm,
                                              float (&out)[NS]) {
  static_assert(NS == 1 || NS == 2, "one or two sequences");
  using O = red::Ops<red::Op::Sum>;
  const unsigned T = threadIdx.x;
  const uint64_t nc = red::chunks_of(cols);
  for (uint64_t c0 = 0; c0 < nc; c0 += 2) {
    float a[2 * NS][1];
#pragma unroll
    for (unsigned i = 0; i < 2 * NS; ++i) a[i][0] = O::identity();
    if ((c0 + 2) * red::kChunk <= cols) {
      // Both chunks full: no bounds tests, so all 32 loads of a thread are issued before the
      // first fold (the folds themselves stay in the tree's order).
      float v[2][red::kDepth][NS];
#pragma unroll
      for (unsigned h = 0; h < 2; ++h)
#pragma unroll
        for (unsigned r = 0; r < red::kDepth; ++r)
          val((c0 + h) * red::kChunk + (uint64_t)r * red::kLanes + T, v[h][r]);
#pragma unroll
      for (unsigned h = 0; h < 2; ++h)
#pragma unroll
        for (unsigned r = 0; r < red::kDepth; ++r)
#pragma unroll
          for (unsigned s = 0; s < NS; ++s) a[s * 2 + h][0] = O::op(a[s * 2 + h][0], v[h][r][s]);
    } else {
#pragma unroll
      for (unsigned h = 0; h < 2; ++h) {
        const uint64_t e0 = (c0 + h) * red::kChunk + T;
#pragma unroll
        for (unsigned r = 0; r < red::kDepth; ++r) {
          const uint64_t e = e0 + (uint64_t)r * red::kLanes;
          if (e < cols) {
            float v[NS];
            val(e, v);
#pragma unroll
            for (unsigned s = 0; s < NS; ++s) a[s * 2 + h][0] = O::op(a[s * 2 + h][0], v[s]);
          }
        }
      }
    }
    float o[2 * NS];
    group_halving<red::Op::Sum, kThreads, 2 * NS>(a, sm.ex, o);
    if (T == 0) {
#pragma unroll
      for (unsigned s = 0; s < NS; ++s) {
        sm.cv[s][c0] = o[s * 2];
        if (c0 + 1 < nc) sm.cv[s][c0 + 1] = o[s * 2 + 1];
      }
    }
  }
  __syncthreads();  // chunk values visible
  float b[NS][1];
#pragma unroll
  for (unsigned s = 0; s < NS; ++s)
    b[s][0] = T < nc ? O::op(O::identity(), sm.cv[s][T]) : O::identity();
  // (The next call writes cv only after its first halving's barrier, which follows these reads.)
  group_halving<red::Op::Sum, kThreads, NS>(b, sm.ex, out);
}

// The output pass: for every e < cols, load(e, v) reads the NL inputs of element e into v and
// store(e, v) computes and writes the output. Loads of 16 elements per thread are issued before
// their stores (the compiler may not move loads across stores it cannot prove disjoint).
template <unsigned NL, class Load, class Store>
__device__ __forceinline__ void block_row_map(Load load, Store store, uint64_t cols) {
  constexpr unsigned B = 16;
  for (uint64_t e0 = 0; e0 < cols; e0 += B * kThreads) {
    const uint64_t e = e0 + threadIdx.x;
    float v[B][NL];
    if (e0 + B * kThreads <= cols) {
#pragma unroll
      for (unsigned i = 0; i < B; ++i) load(e + i * kThreads, v[i]);
#pragma unroll
      for (unsigned i = 0; i < B; ++i) store(e + i * kThreads, v[i]);
    } else {
#pragma unroll
      for (unsigned i = 0; i < B; ++i)
        if (e + i * kThreads < cols) load(e + i * kThreads, v[i]);
#pragma unroll
      for (unsigned i = 0; i < B; ++i)
        if (e + i * kThreads < cols) store(e + i * kThreads, v[i]);
    }
  }
}

// Long-row grid: one block per row, at most enough blocks that the rows in flight (bytes_per_row
// each) fill about 24 MB of L2 (half of the H100's 50 MB: the later passes of a row must find it
// there), at least one per SM and at most 8 per SM.
inline unsigned block_row_grid(uint64_t rows, uint64_t bytes_per_row, unsigned sms) {
  uint64_t per_sm = (24ull << 20) / ((uint64_t)sms * (bytes_per_row ? bytes_per_row : 1));
  per_sm = per_sm < 1 ? 1 : per_sm > 8 ? 8 : per_sm;
  const uint64_t g = (uint64_t)sms * per_sm;
  return (unsigned)(rows < g ? rows : g);
}

}  // namespace dev
}  // namespace row
}  // namespace tlrt

#endif  // __CUDACC__ || TLRT_CUDA_EMULATION
