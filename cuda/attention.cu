// CUDA backend, fused attention (FlashAttention-2 in float32 SIMT): the ORDER OF OPERATIONS of
// abi/tlrt_attention.h, the same IEEE operations in the same order as stub/attention.cpp (bit for
// bit). Built with -fmad=false: every fusion is an explicit __fmaf_rn (num::fma); the division is
// __fdiv_rn; exp / log are the shared float32 functions. No atomics, no n x n buffer, everything
// on the library stream, nothing synchronises. Every kernel has 128 threads seen as 16 row groups
// (ty) x 8 lanes (tx, consecutive lanes of one warp): a thread owns RM rows ty + 16 a and, of a
// 64-wide tile, the columns tx + 8 c (c < 8); of a (., DP) matrix the columns tx + 8 c' (c' <
// DP / 8). Row statistics combine the 8 lanes with __shfl_xor 1, 2, 4. Shared-memory rows are
// padded to DP + 1 (65 for tiles) floats: every access pattern below is free of bank conflicts.
// DP (the head dimension rounded up to 32, 64, 128 or 256) is a template parameter; EXACT = (d ==
// DP) fixes the dot-product loop length at compile time, otherwise it runs to the runtime d (the
// zero padding of q, k, v beyond d never enters a dot product).
//
// fwd_kernel<DP, RM>: one block per (problem, BR = 16 RM query rows; RM = 4, or 2 when DP = 256);
// Q block in shared memory; per key tile of 64: K and V tiles in shared memory, S = Q K^T in
// registers (RM x 8 per thread, fma chains over t), online softmax (running max m, sum l,
// rescale alpha), P through shared memory, acc += P V in registers (RM x DP / 8). Skips the tiles
// above the diagonal with causal and exclusion. FLOPs 4 n^2 d per problem (2 n^2 d each for S and
// PV) + ~25 n^2 for exp; bytes: q, out once, k and v once per query block (from L2).
// Shared loads per FMA: (RM + 8) / (8 RM) in S, (RM + DP / 8) / (RM DP / 8) in PV.
// d_kernel: D[i] = sum_t dout[i, t] out[i, t], one thread per row (an fma chain, as the CPU).
// dkdv_kernel<DP, RM>: one block per (problem, BK = 16 RM keys; RM = 4, 2, 1 for DP <= 64, 128,
// 256); K, V block in shared memory; per query tile of 64 (from the first tile reaching the
// diagonal when skipping): Q, dout tiles, lse, D in shared memory; S^T and dP^T (RM x 8 per
// thread), P = exp(S - lse), dS = P (dP - D); P and dS through shared memory; dv += P^T dout,
// dk += dS^T Q in registers. FLOPs 8 n^2 d (4 with dv only: no dP, no dk).
// dq_kernel<DP, RM>: one block per (problem, 16 RM query rows); Q, dout in shared memory; per key
// tile of 64: K, V tiles; S, dP, P, dS recomputed; dS through shared memory; dq += dS K. FLOPs
// 6 n^2 d. The backward thus recomputes P twice (FA2's deterministic two-kernel form).
// Measured (H100, 2026-11-22, bench/results/2026-11-22-h100-attention.md, TF32 off): forward
// 11-19 TFLOP/s (0.40-1.73x SDPA's time), backward 6-12 TFLOP/s (1.5-6.8x); SGEMM peak 51.6.
#include "core/backend/attention.hpp"
#include "core/backend/memory.hpp"
#include "cuda/cuda_common.cuh"

namespace tlrt {
namespace cuda {

namespace {

using attn::kNegInf;
using attn::Problem;

constexpr unsigned kThreads = 128;
constexpr unsigned kT = 64;  // tile width (keys in fwd / dq, queries in dk/dv)
constexpr unsigned kTP = kT + 1;
constexpr unsigned kFull = 0xffffffffu;

// Stream-ordered scratch from the pool, returned in stream order when this object dies.
class Scratch {
 public:
  Scratch(int dev, uint64_t n)
      : dev_(dev), bytes_(n * 4), p_(static_cast<float *>(alloc(dev, n * 4))) {}
  Scratch(const Scratch &) = delete;
  Scratch &operator=(const Scratch &) = delete;
  ~Scratch() { dealloc(dev_, p_, bytes_); }
  float *get() const { return p_; }

 private:
  int dev_;
  uint64_t bytes_;
  float *p_;
};

// Kernel-side view of the problem.
struct KP {
  unsigned n, d;
  unsigned bh;
  const float *mask;
  uint64_t mask_stride;
  float scale, fill;
  bool causal, skip;
};

__device__ __forceinline__ bool blocked(const KP &p, uint64_t b, unsigned i, unsigned j) {
  if (p.causal && j > i) return true;
  return p.mask != nullptr && p.mask[b * p.mask_stride + (uint64_t)i * p.n + j] == 0.0f;
}

// Score of (i, j); -inf past n (either index) and for excluded entries.
__device__ __forceinline__ float score_at(const KP &p, uint64_t b, unsigned i, unsigned j,
                                          float dot) {
  if (i >= p.n || j >= p.n) return kNegInf;
  return attn::score(dot, blocked(p, b, i, j), p.scale, p.fill);
}

// dst[r][t] (row stride DP + 1) = src row (r0 + r), column t; zero past n rows or d columns.
template <unsigned DP, unsigned ROWS>
__device__ __forceinline__ void load_rows(float *dst, const float *src, unsigned r0, unsigned n,
                                          unsigned d) {
  for (unsigned e = threadIdx.x; e < ROWS * DP; e += kThreads) {
    const unsigned r = e / DP, t = e % DP;
    dst[r * (DP + 1) + t] = (r0 + r < n && t < d) ? src[(uint64_t)(r0 + r) * d + t] : 0.0f;
  }
}

__device__ __forceinline__ float lane_max(float v) {
  v = attn::amax(v, __shfl_xor_sync(kFull, v, 1));
  v = attn::amax(v, __shfl_xor_sync(kFull, v, 2));
  return attn::amax(v, __shfl_xor_sync(kFull, v, 4));
}

__device__ __forceinline__ float lane_sum(float v) {
  v = v + __shfl_xor_sync(kFull, v, 1);
  v = v + __shfl_xor_sync(kFull, v, 2);
  return v + __shfl_xor_sync(kFull, v, 4);
}

// ---- forward ------------------------------------------------------------------------------------

template <unsigned DP, unsigned RM, bool EXACT>
__global__ void __launch_bounds__(kThreads)
    fwd_kernel(KP p, const float *__restrict q, const float *__restrict k,
               const float *__restrict v, float *__restrict out, float *__restrict lse) {
  constexpr unsigned BR = 16 * RM, S = DP + 1, C = DP / 8;
  extern __shared__ float sm[];
  float *qs = sm, *ks = qs + BR * S, *vs = ks + kT * S, *ps = vs + kT * S;
  const unsigned tx = threadIdx.x % 8, ty = threadIdx.x / 8;
  const unsigned dl = EXACT ? DP : p.d;
  const unsigned i0 = blockIdx.x * BR;
  for (uint64_t b = blockIdx.y; b < p.bh; b += gridDim.y) {
    const uint64_t base = b * p.n * p.d;
    __syncthreads();  // the previous problem's readers are done
    load_rows<DP, BR>(qs, q + base, i0, p.n, p.d);
    float m[RM], l[RM], acc[RM][C];
#pragma unroll
    for (unsigned a = 0; a < RM; ++a) {
      m[a] = kNegInf;
      l[a] = 0.0f;
#pragma unroll
      for (unsigned c = 0; c < C; ++c) acc[a][c] = 0.0f;
    }
    const unsigned jend = p.skip ? min(p.n, i0 + BR) : p.n;
    for (unsigned j0 = 0; j0 < jend; j0 += kT) {
      load_rows<DP, kT>(ks, k + base, j0, p.n, p.d);
      load_rows<DP, kT>(vs, v + base, j0, p.n, p.d);
      __syncthreads();
      float s[RM][8];
#pragma unroll
      for (unsigned a = 0; a < RM; ++a)
#pragma unroll
        for (unsigned c = 0; c < 8; ++c) s[a][c] = 0.0f;
#pragma unroll 4
      for (unsigned t = 0; t < dl; ++t) {
        float qv[RM], kv[8];
#pragma unroll
        for (unsigned a = 0; a < RM; ++a) qv[a] = qs[(ty + 16 * a) * S + t];
#pragma unroll
        for (unsigned c = 0; c < 8; ++c) kv[c] = ks[(tx + 8 * c) * S + t];
#pragma unroll
        for (unsigned a = 0; a < RM; ++a)
#pragma unroll
          for (unsigned c = 0; c < 8; ++c) s[a][c] = num::fma(qv[a], kv[c], s[a][c]);
      }
#pragma unroll
      for (unsigned a = 0; a < RM; ++a) {
        const unsigned i = i0 + ty + 16 * a;
        float mt = kNegInf;
#pragma unroll
        for (unsigned c = 0; c < 8; ++c) {
          s[a][c] = score_at(p, b, i, j0 + tx + 8 * c, s[a][c]);
          mt = c == 0 ? s[a][0] : attn::amax(mt, s[a][c]);
        }
        const float mn = attn::amax(m[a], lane_max(mt));
        const float alpha = mn == kNegInf ? 1.0f : math::exp_f(m[a] - mn);
        float rs = 0.0f;
#pragma unroll
        for (unsigned c = 0; c < 8; ++c) {
          const float pr = attn::prob(s[a][c], mn);
          rs = c == 0 ? pr : rs + pr;
          ps[(ty + 16 * a) * kTP + tx + 8 * c] = pr;
        }
        l[a] = l[a] * alpha + lane_sum(rs);
        m[a] = mn;
#pragma unroll
        for (unsigned c = 0; c < C; ++c) acc[a][c] = acc[a][c] * alpha;
      }
      __syncthreads();
#pragma unroll 4
      for (unsigned j = 0; j < kT; ++j) {
        float pv[RM];
#pragma unroll
        for (unsigned a = 0; a < RM; ++a) pv[a] = ps[(ty + 16 * a) * kTP + j];
#pragma unroll
        for (unsigned c = 0; c < C; ++c) {
          const float vv = vs[j * S + tx + 8 * c];
#pragma unroll
          for (unsigned a = 0; a < RM; ++a) acc[a][c] = num::fma(pv[a], vv, acc[a][c]);
        }
      }
      __syncthreads();  // before the next tile overwrites ks, vs, ps
    }
#pragma unroll
    for (unsigned a = 0; a < RM; ++a) {
      const unsigned i = i0 + ty + 16 * a;
      if (i >= p.n) continue;
      const bool none = l[a] == 0.0f;  // every key excluded (a NaN score makes l NaN)
      float *oi = out + base + (uint64_t)i * p.d;
#pragma unroll
      for (unsigned c = 0; c < C; ++c) {
        const unsigned t = tx + 8 * c;
        if (t < p.d) oi[t] = none ? 0.0f : __fdiv_rn(acc[a][c], l[a]);
      }
      if (tx == 0) lse[b * p.n + i] = none ? kNegInf : m[a] + math::log_f(l[a]);
    }
  }
}

// ---- backward -----------------------------------------------------------------------------------

__global__ void __launch_bounds__(256)
    d_kernel(const float *__restrict out, const float *__restrict dout, uint64_t rows, unsigned d,
             float *__restrict D) {
  for (uint64_t r = (uint64_t)blockIdx.x * 256 + threadIdx.x; r < rows;
       r += (uint64_t)gridDim.x * 256) {
    float acc = 0.0f;
    for (unsigned t = 0; t < d; ++t) acc = num::fma(dout[r * d + t], out[r * d + t], acc);
    D[r] = acc;
  }
}

// S^T / dP^T of a thread: rows (keys or queries) from `as` / `bs2`, columns from `bs` / `ds2`.
template <unsigned DP, unsigned RM, bool EXACT, bool DP2>
__device__ __forceinline__ void dots(const float *as, const float *bs, const float *as2,
                                     const float *bs2, unsigned dl, float (&s)[RM][8],
                                     float (&dp)[RM][8]) {
  constexpr unsigned S = DP + 1;
  const unsigned tx = threadIdx.x % 8, ty = threadIdx.x / 8;
#pragma unroll
  for (unsigned a = 0; a < RM; ++a)
#pragma unroll
    for (unsigned c = 0; c < 8; ++c) s[a][c] = dp[a][c] = 0.0f;
#pragma unroll 2
  for (unsigned t = 0; t < dl; ++t) {
    float x[RM], y[8];
#pragma unroll
    for (unsigned a = 0; a < RM; ++a) x[a] = as[(ty + 16 * a) * S + t];
#pragma unroll
    for (unsigned c = 0; c < 8; ++c) y[c] = bs[(tx + 8 * c) * S + t];
#pragma unroll
    for (unsigned a = 0; a < RM; ++a)
#pragma unroll
      for (unsigned c = 0; c < 8; ++c) s[a][c] = num::fma(x[a], y[c], s[a][c]);
    if (DP2) {
#pragma unroll
      for (unsigned a = 0; a < RM; ++a) x[a] = as2[(ty + 16 * a) * S + t];
#pragma unroll
      for (unsigned c = 0; c < 8; ++c) y[c] = bs2[(tx + 8 * c) * S + t];
#pragma unroll
      for (unsigned a = 0; a < RM; ++a)
#pragma unroll
        for (unsigned c = 0; c < 8; ++c) dp[a][c] = num::fma(x[a], y[c], dp[a][c]);
    }
  }
}

// acc[a][c'] = fma(w[row a][j], m[j][tx + 8 c'], acc) for j = 0..63 in order.
template <unsigned DP, unsigned RM>
__device__ __forceinline__ void tile_axpy(const float *w, const float *mtx,
                                          float (&acc)[RM][DP / 8]) {
  constexpr unsigned S = DP + 1, C = DP / 8;
  const unsigned tx = threadIdx.x % 8, ty = threadIdx.x / 8;
#pragma unroll 4
  for (unsigned j = 0; j < kT; ++j) {
    float wv[RM];
#pragma unroll
    for (unsigned a = 0; a < RM; ++a) wv[a] = w[(ty + 16 * a) * kTP + j];
#pragma unroll
    for (unsigned c = 0; c < C; ++c) {
      const float mv = mtx[j * S + tx + 8 * c];
#pragma unroll
      for (unsigned a = 0; a < RM; ++a) acc[a][c] = num::fma(wv[a], mv, acc[a][c]);
    }
  }
}

template <unsigned DP, unsigned RM>
__device__ __forceinline__ void store_rows(const float (&acc)[RM][DP / 8], float factor,
                                           bool scale_it, float *dst, unsigned r0, unsigned n,
                                           unsigned d) {
  const unsigned tx = threadIdx.x % 8, ty = threadIdx.x / 8;
#pragma unroll
  for (unsigned a = 0; a < RM; ++a) {
    const unsigned r = r0 + ty + 16 * a;
    if (r >= n) continue;
#pragma unroll
    for (unsigned c = 0; c < DP / 8; ++c) {
      const unsigned t = tx + 8 * c;
      if (t < d) dst[(uint64_t)r * d + t] = scale_it ? acc[a][c] * factor : acc[a][c];
    }
  }
}

// dk (if dk != nullptr) and dv (if dv != nullptr) for BK = 16 RM keys per block.
template <unsigned DP, unsigned RM, bool EXACT>
__global__ void __launch_bounds__(kThreads)
    dkdv_kernel(KP p, const float *__restrict q, const float *__restrict k,
                const float *__restrict v, const float *__restrict dout,
                const float *__restrict lse, const float *__restrict D, float *__restrict dk,
                float *__restrict dv) {
  constexpr unsigned BK = 16 * RM, S = DP + 1, C = DP / 8;
  extern __shared__ float sm[];
  float *ks = sm, *vs = ks + BK * S, *qs = vs + BK * S, *dos = qs + kT * S, *pS = dos + kT * S,
        *dS = pS + BK * kTP, *ls = dS + BK * kTP, *Ds = ls + kT;
  const unsigned tx = threadIdx.x % 8, ty = threadIdx.x / 8;
  const unsigned dl = EXACT ? DP : p.d;
  const unsigned jb = blockIdx.x * BK;
  const bool want_k = dk != nullptr;
  for (uint64_t b = blockIdx.y; b < p.bh; b += gridDim.y) {
    const uint64_t base = b * p.n * p.d;
    __syncthreads();
    load_rows<DP, BK>(ks, k + base, jb, p.n, p.d);
    load_rows<DP, BK>(vs, v + base, jb, p.n, p.d);
    float gk[RM][C], gv[RM][C];
#pragma unroll
    for (unsigned a = 0; a < RM; ++a)
#pragma unroll
      for (unsigned c = 0; c < C; ++c) gk[a][c] = gv[a][c] = 0.0f;
    for (unsigned i0 = p.skip ? jb - jb % kT : 0; i0 < p.n; i0 += kT) {
      load_rows<DP, kT>(qs, q + base, i0, p.n, p.d);
      load_rows<DP, kT>(dos, dout + base, i0, p.n, p.d);
      for (unsigned r = threadIdx.x; r < kT; r += kThreads) {
        ls[r] = i0 + r < p.n ? lse[b * p.n + i0 + r] : 0.0f;
        Ds[r] = (want_k && i0 + r < p.n) ? D[b * p.n + i0 + r] : 0.0f;
      }
      __syncthreads();
      float s[RM][8], dp[RM][8];
      if (want_k)
        dots<DP, RM, EXACT, true>(ks, qs, vs, dos, dl, s, dp);
      else
        dots<DP, RM, EXACT, false>(ks, qs, vs, dos, dl, s, dp);
#pragma unroll
      for (unsigned a = 0; a < RM; ++a)
#pragma unroll
        for (unsigned c = 0; c < 8; ++c) {
          const unsigned j = jb + ty + 16 * a, ii = tx + 8 * c;
          const float sc = score_at(p, b, i0 + ii, j, s[a][c]);
          const float pr = attn::prob(sc, ls[ii]);
          pS[(ty + 16 * a) * kTP + ii] = pr;
          if (want_k)
            dS[(ty + 16 * a) * kTP + ii] = sc == kNegInf ? 0.0f : pr * (dp[a][c] - Ds[ii]);
        }
      __syncthreads();
      tile_axpy<DP, RM>(pS, dos, gv);
      if (want_k) tile_axpy<DP, RM>(dS, qs, gk);
      __syncthreads();
    }
    if (dv) store_rows<DP, RM>(gv, 1.0f, false, dv + base, jb, p.n, p.d);
    if (want_k) store_rows<DP, RM>(gk, p.scale, true, dk + base, jb, p.n, p.d);
  }
}

// dq for 16 RM query rows per block.
template <unsigned DP, unsigned RM, bool EXACT>
__global__ void __launch_bounds__(kThreads)
    dq_kernel(KP p, const float *__restrict q, const float *__restrict k,
              const float *__restrict v, const float *__restrict dout,
              const float *__restrict lse, const float *__restrict D, float *__restrict dq) {
  constexpr unsigned BQ = 16 * RM, S = DP + 1, C = DP / 8;
  extern __shared__ float sm[];
  float *qs = sm, *dos = qs + BQ * S, *ks = dos + BQ * S, *vs = ks + kT * S, *dS = vs + kT * S;
  const unsigned tx = threadIdx.x % 8, ty = threadIdx.x / 8;
  const unsigned dl = EXACT ? DP : p.d;
  const unsigned ib = blockIdx.x * BQ;
  for (uint64_t b = blockIdx.y; b < p.bh; b += gridDim.y) {
    const uint64_t base = b * p.n * p.d;
    __syncthreads();
    load_rows<DP, BQ>(qs, q + base, ib, p.n, p.d);
    load_rows<DP, BQ>(dos, dout + base, ib, p.n, p.d);
    float L[RM], Dr[RM], g[RM][C];
#pragma unroll
    for (unsigned a = 0; a < RM; ++a) {
      const unsigned i = ib + ty + 16 * a;
      L[a] = i < p.n ? lse[b * p.n + i] : 0.0f;
      Dr[a] = i < p.n ? D[b * p.n + i] : 0.0f;
#pragma unroll
      for (unsigned c = 0; c < C; ++c) g[a][c] = 0.0f;
    }
    const unsigned jend = p.skip ? min(p.n, ib + BQ) : p.n;
    for (unsigned j0 = 0; j0 < jend; j0 += kT) {
      load_rows<DP, kT>(ks, k + base, j0, p.n, p.d);
      load_rows<DP, kT>(vs, v + base, j0, p.n, p.d);
      __syncthreads();
      float s[RM][8], dp[RM][8];
      dots<DP, RM, EXACT, true>(qs, ks, dos, vs, dl, s, dp);
#pragma unroll
      for (unsigned a = 0; a < RM; ++a)
#pragma unroll
        for (unsigned c = 0; c < 8; ++c) {
          const unsigned i = ib + ty + 16 * a, jj = tx + 8 * c;
          const float sc = score_at(p, b, i, j0 + jj, s[a][c]);
          const float pr = attn::prob(sc, L[a]);
          dS[(ty + 16 * a) * kTP + jj] = sc == kNegInf ? 0.0f : pr * (dp[a][c] - Dr[a]);
        }
      __syncthreads();
      tile_axpy<DP, RM>(dS, ks, g);
      __syncthreads();
    }
    store_rows<DP, RM>(g, p.scale, true, dq + base, ib, p.n, p.d);
  }
}

// ---- launch -------------------------------------------------------------------------------------

KP kernel_view(const Problem &p) {
  return KP{(unsigned)p.n, (unsigned)p.d, (unsigned)p.bh, p.mask, p.mask_stride, p.scale, p.fill,
            p.causal, p.causal && p.fill == kNegInf};
}

dim3 grid_of(uint64_t blocks_x, uint64_t bh) {
  return dim3((unsigned)blocks_x, (unsigned)(bh < 65535 ? bh : 65535), 1);
}

template <typename K>
void set_smem(K kernel, size_t bytes) {
  check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes),
        "attention: cudaFuncSetAttribute");
}

template <unsigned DP, unsigned RM, bool EXACT>
void fwd_launch(int dev, const Problem &p, const float *q, const float *k, const float *v,
                float *out, float *lse) {
  constexpr unsigned BR = 16 * RM;
  const size_t smem = ((BR + 2 * kT) * (DP + 1) + BR * kTP) * sizeof(float);
  auto kernel = fwd_kernel<DP, RM, EXACT>;
  set_smem(kernel, smem);
  kernel<<<grid_of((p.n + BR - 1) / BR, p.bh), kThreads, smem, stream(dev)>>>(kernel_view(p), q, k,
                                                                            v, out, lse);
  check_launch("attention fwd_kernel");
}

template <unsigned DP, unsigned RM, bool EXACT>
void bwd_launch(int dev, const Problem &p, const float *q, const float *k, const float *v,
                const float *dout, const float *lse, const float *D, float *dq, float *dk,
                float *dv) {
  constexpr unsigned B = 16 * RM;
  cudaStream_t st = stream(dev);
  const KP kp = kernel_view(p);
  const dim3 grid = grid_of((p.n + B - 1) / B, p.bh);
  if (dk || dv) {
    const size_t smem = ((2 * B + 2 * kT) * (DP + 1) + 2 * B * kTP + 2 * kT) * sizeof(float);
    auto kernel = dkdv_kernel<DP, RM, EXACT>;
    set_smem(kernel, smem);
    kernel<<<grid, kThreads, smem, st>>>(kp, q, k, v, dout, lse, D, dk, dv);
    check_launch("attention dkdv_kernel");
  }
  if (dq) {
    const size_t smem = ((2 * B + 2 * kT) * (DP + 1) + B * kTP) * sizeof(float);
    auto kernel = dq_kernel<DP, RM, EXACT>;
    set_smem(kernel, smem);
    kernel<<<grid, kThreads, smem, st>>>(kp, q, k, v, dout, lse, D, dq);
    check_launch("attention dq_kernel");
  }
}

unsigned padded_d(uint64_t d) { return d <= 32 ? 32 : d <= 64 ? 64 : d <= 128 ? 128 : 256; }

}  // namespace

void attention_fwd(int dev, const Problem &p, const float *q, const float *k, const float *v,
                   float *out, float *lse) {
  const bool exact = padded_d(p.d) == p.d;
  switch (padded_d(p.d)) {
    case 32:
      return exact ? fwd_launch<32, 4, true>(dev, p, q, k, v, out, lse)
                   : fwd_launch<32, 4, false>(dev, p, q, k, v, out, lse);
    case 64:
      return exact ? fwd_launch<64, 4, true>(dev, p, q, k, v, out, lse)
                   : fwd_launch<64, 4, false>(dev, p, q, k, v, out, lse);
    case 128:
      return exact ? fwd_launch<128, 4, true>(dev, p, q, k, v, out, lse)
                   : fwd_launch<128, 4, false>(dev, p, q, k, v, out, lse);
    default:
      return exact ? fwd_launch<256, 2, true>(dev, p, q, k, v, out, lse)
                   : fwd_launch<256, 2, false>(dev, p, q, k, v, out, lse);
  }
}

void attention_bwd(int dev, const Problem &p, const float *q, const float *k, const float *v,
                   const float *out, const float *dout, const float *lse, float *dq, float *dk,
                   float *dv) {
  const uint64_t rows = p.bh * p.n;
  // D is needed for dS (dq, dk) only; the dv-only path reads neither out nor D.
  Scratch D(dev, (dq || dk) ? rows : 1);
  if (dq || dk) {
    d_kernel<<<grid_for(rows, 256, dev), 256, 0, stream(dev)>>>(out, dout, rows, (unsigned)p.d,
                                                                D.get());
    check_launch("attention d_kernel");
  }
  const bool exact = padded_d(p.d) == p.d;
#define TLRT_ATTN_BWD(DP, RM)                                              \
  return exact ? bwd_launch<DP, RM, true>(dev, p, q, k, v, dout, lse, D.get(), dq, dk, dv) \
               : bwd_launch<DP, RM, false>(dev, p, q, k, v, dout, lse, D.get(), dq, dk, dv)
  switch (padded_d(p.d)) {
    case 32: TLRT_ATTN_BWD(32, 4);
    case 64: TLRT_ATTN_BWD(64, 4);
    case 128: TLRT_ATTN_BWD(128, 2);
    default: TLRT_ATTN_BWD(256, 1);
  }
#undef TLRT_ATTN_BWD
}

}  // namespace cuda
}  // namespace tlrt
