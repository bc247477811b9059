// Device code of cuda/attention.cu (the kernels and their launch plan), kept apart so that the
// CPU emulator test (tests/unit/test_attention_emu.cpp) runs the same source.
#pragma once

#include "core/backend/attention.hpp"
#ifndef TLRT_CUDA_EMULATION
#include "cuda/cp_async.cuh"
#endif

namespace tlrt {
namespace cuda {
namespace attn_kernels {

using attn::kNegInf;
using attn::Problem;

constexpr unsigned kThreads = 128;
constexpr unsigned kT = 64;  // tile width (keys in fwd / dq, queries in dk/dv)
constexpr unsigned kTP = kT + 1;
constexpr unsigned kFull = 0xffffffffu;

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
  float *sm = async::dynamic_smem();
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
  float *sm = async::dynamic_smem();
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
  float *sm = async::dynamic_smem();
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

// ---- launch plan ---------------------------------------------------------------------------------
// launch(name, kernel, grid, threads, smem_bytes, args...) starts one kernel on the stream.

inline KP kernel_view(const Problem &p) {
  return KP{(unsigned)p.n, (unsigned)p.d, (unsigned)p.bh, p.mask, p.mask_stride, p.scale, p.fill,
            p.causal, p.causal && p.fill == kNegInf};
}

inline dim3 grid_of(uint64_t blocks_x, uint64_t bh) {
  return dim3((unsigned)blocks_x, (unsigned)(bh < 65535 ? bh : 65535), 1);
}

template <unsigned DP, unsigned RM, bool EXACT, class L>
void fwd_launch(L &launch, const Problem &p, const float *q, const float *k, const float *v,
                float *out, float *lse) {
  constexpr unsigned BR = 16 * RM;
  const size_t smem = ((BR + 2 * kT) * (DP + 1) + BR * kTP) * sizeof(float);
  launch("attention fwd_kernel", fwd_kernel<DP, RM, EXACT>, grid_of((p.n + BR - 1) / BR, p.bh),
         kThreads, smem, kernel_view(p), q, k, v, out, lse);
}

template <unsigned DP, unsigned RM, bool EXACT, class L>
void bwd_launch(L &launch, const Problem &p, const float *q, const float *k, const float *v,
                const float *dout, const float *lse, const float *D, float *dq, float *dk,
                float *dv) {
  constexpr unsigned B = 16 * RM;
  const KP kp = kernel_view(p);
  const dim3 grid = grid_of((p.n + B - 1) / B, p.bh);
  if (dk || dv) {
    const size_t smem = ((2 * B + 2 * kT) * (DP + 1) + 2 * B * kTP + 2 * kT) * sizeof(float);
    launch("attention dkdv_kernel", dkdv_kernel<DP, RM, EXACT>, grid, kThreads, smem, kp, q, k, v,
           dout, lse, D, dk, dv);
  }
  if (dq) {
    const size_t smem = ((2 * B + 2 * kT) * (DP + 1) + B * kTP) * sizeof(float);
    launch("attention dq_kernel", dq_kernel<DP, RM, EXACT>, grid, kThreads, smem, kp, q, k, v, dout,
           lse, D, dq);
  }
}

inline unsigned padded_d(uint64_t d) { return d <= 32 ? 32 : d <= 64 ? 64 : d <= 128 ? 128 : 256; }

template <class L>
void fwd_plan(L &launch, const Problem &p, const float *q, const float *k, const float *v,
              float *out, float *lse) {
  const bool exact = padded_d(p.d) == p.d;
  switch (padded_d(p.d)) {
    case 32:
      return exact ? fwd_launch<32, 4, true>(launch, p, q, k, v, out, lse)
                   : fwd_launch<32, 4, false>(launch, p, q, k, v, out, lse);
    case 64:
      return exact ? fwd_launch<64, 4, true>(launch, p, q, k, v, out, lse)
                   : fwd_launch<64, 4, false>(launch, p, q, k, v, out, lse);
    case 128:
      return exact ? fwd_launch<128, 4, true>(launch, p, q, k, v, out, lse)
                   : fwd_launch<128, 4, false>(launch, p, q, k, v, out, lse);
    default:
      return exact ? fwd_launch<256, 2, true>(launch, p, q, k, v, out, lse)
                   : fwd_launch<256, 2, false>(launch, p, q, k, v, out, lse);
  }
}

// D (bh * n floats of scratch, read only when dq or dk is wanted) is computed here first.
template <class L>
void bwd_plan(L &launch, const Problem &p, const float *q, const float *k, const float *v,
              const float *out, const float *dout, const float *lse, float *D, float *dq,
              float *dk, float *dv) {
  const uint64_t rows = p.bh * p.n;
  if (dq || dk) {
    const uint64_t blocks = (rows + 255) / 256;
    launch("attention d_kernel", d_kernel, dim3((unsigned)(blocks < 65535 ? blocks : 65535)), 256u,
           size_t(0), out, dout, rows, (unsigned)p.d, D);
  }
  const bool exact = padded_d(p.d) == p.d;
#define TLRT_ATTN_BWD(DP, RM)                                                        \
  return exact ? bwd_launch<DP, RM, true>(launch, p, q, k, v, dout, lse, D, dq, dk, dv) \
               : bwd_launch<DP, RM, false>(launch, p, q, k, v, dout, lse, D, dq, dk, dv)
  switch (padded_d(p.d)) {
    case 32: TLRT_ATTN_BWD(32, 4);
    case 64: TLRT_ATTN_BWD(64, 4);
    case 128: TLRT_ATTN_BWD(128, 2);
    default: TLRT_ATTN_BWD(256, 1);
  }
#undef TLRT_ATTN_BWD
}

}  // namespace attn_kernels
}  // namespace cuda
}  // namespace tlrt
