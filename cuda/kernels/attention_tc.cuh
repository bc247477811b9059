// The TF32 attention backward (Precision::Tf32, unmasked problems, d <= 128, sm_80+ where the
// shared memory fits): FlashAttention-2's two backward kernels with their products (dP, S, dv, dk,
// dq) on the tensor cores through WMMA m16n16k8 precision::tf32, one product big(a) big(b) each
// (big(x) = x rounded to TF32), float accumulators. The softmax terms are float32 SIMT code as
// the exact kernels (attn::prob with the shared exp); D = rowsum(dout * out) is the exact d_kernel.
// tests/unit/test_attention_tc_emu.cpp runs this source on the CPU emulator (with its WMMA model)
// against a float64 reference and the header's TF32 bound.
//
// dkdv_tc_kernel<DP, EXACT>: one block of 8 warps per (problem, 128 keys; warp w: keys 16 w ..),
// K and V rows resident, looping over query tiles of T = 64 (32 at DP = 128, shared memory), from
// the tile reaching the diagonal when skipping. Per tile and warp: dP^T = V dout^T (dk only) and
// S^T = K Q^T as accumulator fragments; P^T = exp(s - lse) and dS^T = P^T (dP^T - D) element-wise
// in the fragments, each element's (key, query) read from row / column index fragments (loaded
// from two 16 x 16 index matrices: WMMA's layout stays opaque), lse and D of the tile's queries
// from shared memory (cp.async with the dout tile); P^T and dS^T to the warp's two strips, then
// dv += P^T dout, dk += dS^T Q. A warp leaves out the tiles whose last query precedes its first
// key (skipping).
// dq_tc_kernel<DP, EXACT>: one block per (problem, 128 query rows), Q and dout rows resident,
// looping over key tiles of T: dP = dout V^T, S = Q K^T, dS element-wise in the fragments, dS to
// the warp's strip, dq += dS K.
// Results are staged through the warp's own (no longer needed) input rows and copied out
// row-major; padding columns are re-zeroed. FLOPs 8 n^2 d (dk/dv) + 6 n^2 d (dq), as the exact
// kernels; q, k, v, dout move once per 128-row block of the other side (from L2). Shared memory:
// dq 91 / 139 / 186 KiB, dk/dv 125 / 173 / 203 KiB for DP = 32 / 64 / 128: one block per SM;
// registers 146-188 (dq), 167-254 (dk/dv), no spills (sm_90).
// Last measured: bench/results/2026-11-27-h100-s17-attention.md
#pragma once

#include "cuda/kernels/attention.cuh"
#ifndef TLRT_CUDA_EMULATION
#include <mma.h>
#endif

namespace tlrt {
namespace cuda {
namespace attn_kernels {

namespace wmma = nvcuda::wmma;

constexpr unsigned kTcRows = 128;   // query rows per block: 8 warps x 16

using FragA = wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major>;
using FragBc = wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::col_major>;
using FragBr = wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::row_major>;
using FragC = wmma::fragment<wmma::accumulator, 16, 16, 8, float>;

// Each element of a loaded operand fragment rounded to TF32.
template <class F>
__device__ __forceinline__ void round_frag(F &f) {
#pragma unroll
  for (int e = 0; e < F::num_elements; ++e) f.x[e] = wmma::__float_to_tf32(f.x[e]);
}

__device__ __forceinline__ unsigned lane_id() { return threadIdx.x % 32; }

// Copies a warp's 16 rows of a finished (16, DP) result, staged row-major (stride SD) at st, to
// rows r0 .. of dst (row-major, d columns; rows at or past n left out), then re-zeroes the
// staging rows' padding columns d .. DP - 1 (the staging area is an input tile's, whose padding
// the products read as zeros).
template <unsigned DP, bool EXACT>
__device__ __forceinline__ void warp_rows_out(float *st, float *dst, unsigned r0, const KP &p) {
  constexpr unsigned SD = DP + 4;
  const unsigned lane = lane_id(), rows = min(16u, p.n - r0);
  float *ob = dst + (uint64_t)r0 * p.d;
  if (p.vec) {
    const unsigned d4 = p.d / 4;
    for (unsigned e = lane; e < rows * d4; e += 32) {
      const unsigned rr = e / d4, c = e % d4;
      st4(ob + (uint64_t)rr * p.d + 4 * c, ld4(st + rr * SD + 4 * c));
    }
  } else {
    for (unsigned e = lane; e < rows * p.d; e += 32) {
      const unsigned rr = e / p.d, c = e % p.d;
      ob[(uint64_t)rr * p.d + c] = st[rr * SD + c];
    }
  }
  if (!EXACT)
    for (unsigned e = lane; e < 16 * (DP - p.d); e += 32)
      st[(e / (DP - p.d)) * SD + p.d + e % (DP - p.d)] = 0.0f;
}

// acc[nt] += A B in TF32 for a warp's 16-row strip: A (16 x KD) row-major at a (row stride lda);
// B (KD x 16 NTN) with element (kk, c) at b[c * ldb + kk] when BCOL (a row-major (16 NTN, KD) tile
// used transposed: K^T, V^T, Q^T, dout^T) or at b[kk * ldb + c] (a row-major (KD, 16 NTN) tile).
template <bool BCOL, unsigned KD, unsigned NTN>
__device__ __forceinline__ void strip_mma(FragC (&acc)[NTN], const float *a, unsigned lda,
                                          const float *b, unsigned ldb) {
#pragma unroll 1
  for (unsigned kk = 0; kk < KD; kk += 8) {
    FragA fa;
    wmma::load_matrix_sync(fa, a + kk, lda);
    round_frag(fa);
#pragma unroll
    for (unsigned nt = 0; nt < NTN; ++nt) {
      if constexpr (BCOL) {
        FragBc fb;
        wmma::load_matrix_sync(fb, b + 16 * nt * ldb + kk, ldb);
        round_frag(fb);
        wmma::mma_sync(acc[nt], fa, fb, acc[nt]);
      } else {
        FragBr fb;
        wmma::load_matrix_sync(fb, b + kk * ldb + 16 * nt, ldb);
        round_frag(fb);
        wmma::mma_sync(acc[nt], fa, fb, acc[nt]);
      }
    }
  }
}

// The (16 x 16) row / column index matrices (idx[0 .. 255] = row, idx[256 .. 511] = column), from
// which a warp reads which tile element each of its accumulator elements holds.
__device__ __forceinline__ void fill_index(float *idx) {
  for (unsigned e = threadIdx.x; e < 256; e += kThreads) {
    idx[e] = (float)(e / 16);
    idx[256 + e] = (float)(e % 16);
  }
}

// Element-wise pass over a warp's strip fragments: f(x, r, c) for every accumulator element, r
// its row in the strip (0 .. 15), c its column (16 nt + column in the fragment).
template <unsigned NTN, class F>
__device__ __forceinline__ void strip_elements(const float *idx, FragC (&fr)[NTN], F f) {
  FragC rowf, colf;
  wmma::load_matrix_sync(rowf, idx, 16, wmma::mem_row_major);
  wmma::load_matrix_sync(colf, idx + 256, 16, wmma::mem_row_major);
#pragma unroll
  for (unsigned nt = 0; nt < NTN; ++nt)
#pragma unroll
    for (int e = 0; e < FragC::num_elements; ++e)
      f(fr[nt].x[e], (unsigned)rowf.x[e], 16 * nt + (unsigned)colf.x[e], nt, e);
}

// Inner tile (keys in dq, queries in dk / dv): 64, or 32 for DP = 128 (shared memory).
template <unsigned DP>
__host__ __device__ constexpr unsigned bwd_tc_tile() {
  return DP == 128 ? 32 : 64;
}

template <unsigned DP>
__host__ __device__ constexpr unsigned dq_tc_smem_floats() {
  constexpr unsigned T = bwd_tc_tile<DP>();
  return (2 * kTcRows + 2 * T) * (DP + 4) + kTcRows * (T + 4) + 512 + 2 * kTcRows;
}

// dq for 128 query rows per block (warp w: rows 16 w ..), looping over key tiles of T: per tile
// and warp dP = dout V^T and S = Q K^T (tensor cores), dS = P (dP - D) element-wise in the
// fragments (P = exp(s - lse) from the saved lse), dS to the warp's strip, dq += dS K.
template <unsigned DP, bool EXACT>
__global__ void __launch_bounds__(kThreads, 1)
    dq_tc_kernel(KP p, const float *__restrict q, const float *__restrict k,
                 const float *__restrict v, const float *__restrict dout,
                 const float *__restrict lse, const float *__restrict D, float *__restrict dq) {
#if defined(TLRT_CUDA_EMULATION) || !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
  constexpr unsigned BR = kTcRows, SD = DP + 4, NT = DP / 16, T = bwd_tc_tile<DP>(),
                     NS = T / 16, ST = T + 4;
  float *sm = async::dynamic_smem();
  float *qs = sm, *dos = qs + BR * SD, *ks = dos + BR * SD, *vs = ks + T * SD,
        *ss = vs + T * SD, *idx = ss + BR * ST, *lw = idx + 512, *dw = lw + BR;
  const unsigned w = threadIdx.x / 32, lane = lane_id();
  const unsigned i0 = (p.skip ? gridDim.x - 1 - blockIdx.x : blockIdx.x) * BR;
  const unsigned iw = i0 + 16 * w;
  const unsigned jend = p.skip ? min(p.n, i0 + BR) : p.n;
  float *sw = ss + 16 * w * ST;
  zero_smem(sm, dq_tc_smem_floats<DP>());
  __syncthreads();
  fill_index(idx);
  for (uint64_t b = blockIdx.y; b < p.bh; b += gridDim.y) {
    const uint64_t base = b * p.n * p.d;
    const float *mb = p.mask ? p.mask + b * p.mask_stride : nullptr;
    __syncthreads();  // index matrices written; the previous problem's readers done
    load_tile<DP, BR, EXACT>(qs, q + base, i0, p.n, p.d, p.vec);
    load_tile<DP, BR, EXACT>(dos, dout + base, i0, p.n, p.d, p.vec);
    load_tile<DP, T, EXACT>(vs, v + base, 0, p.n, p.d, p.vec);
    async::commit();
    load_tile<DP, T, EXACT>(ks, k + base, 0, p.n, p.d, p.vec);
    async::commit();
    if (lane < 16) {  // the warp's rows' lse and D (read by the warp only)
      const unsigned i = iw + lane;
      lw[16 * w + lane] = i < p.n ? lse[b * p.n + i] : 0.0f;
      dw[16 * w + lane] = i < p.n ? D[b * p.n + i] : 0.0f;
    }
    __syncwarp();
    FragC g[NT];
#pragma unroll
    for (unsigned nt = 0; nt < NT; ++nt) wmma::fill_fragment(g[nt], 0.0f);
    async::wait<1>();  // Q, dout, V tile 0
    __syncthreads();
    // Loop invariant at the top: V tile j0 visible in vs; K tile j0 in flight into ks.
    for (unsigned j0 = 0; j0 < jend; j0 += T) {
      const bool more = j0 + T < jend;
      const bool active = iw < p.n && !(p.skip && j0 > iw + 15);
      FragC s[NS], dp[NS];
      if (active) {
#pragma unroll
        for (unsigned nt = 0; nt < NS; ++nt) {
          wmma::fill_fragment(dp[nt], 0.0f);
          wmma::fill_fragment(s[nt], 0.0f);
        }
        strip_mma<true, DP, NS>(dp, dos + 16 * w * SD, SD, vs, SD);
      }
      async::wait<0>();  // K tile j0
      __syncthreads();   // visible; every read of vs done
      if (more) load_tile<DP, T, EXACT>(vs, v + base, j0 + T, p.n, p.d, p.vec);
      async::commit();
      if (active) {
        strip_mma<true, DP, NS>(s, qs + 16 * w * SD, SD, ks, SD);
        const bool plain = !mb && iw + 15 < p.n && j0 + T <= p.n && !(p.causal && j0 + T - 1 > iw);
        strip_elements<NS>(idx, s, [&](float &x, unsigned r, unsigned c, unsigned nt, int e) {
          const unsigned i = iw + r, j = j0 + c;
          float sc;
          if (plain) {
            sc = x * p.scale;
          } else if (i < p.n && j < p.n) {
            const bool blocked = (p.causal && j > i) || (mb && mb[(uint64_t)i * p.n + j] == 0.0f);
            sc = attn::score(x, blocked, p.scale, p.fill);
          } else {
            sc = kNegInf;
          }
          const float pr = attn::prob(sc, lw[16 * w + r]);
          x = sc == kNegInf ? 0.0f : pr * (dp[nt].x[e] - dw[16 * w + r]);
        });
#pragma unroll
        for (unsigned nt = 0; nt < NS; ++nt)
          wmma::store_matrix_sync(sw + 16 * nt, s[nt], ST, wmma::mem_row_major);
        __syncwarp();
        strip_mma<false, T, NT>(g, sw, ST, ks, SD);
      }
      async::wait<0>();  // the next V tile
      __syncthreads();   // visible; every read of ks done
      if (more) load_tile<DP, T, EXACT>(ks, k + base, j0 + T, p.n, p.d, p.vec);
      async::commit();
    }
    if (iw < p.n) {
      float *st = qs + 16 * w * SD;  // the warp's own Q rows, no longer needed
#pragma unroll
      for (unsigned nt = 0; nt < NT; ++nt) {
#pragma unroll
        for (int e = 0; e < FragC::num_elements; ++e) g[nt].x[e] = g[nt].x[e] * p.scale;
        wmma::store_matrix_sync(st + 16 * nt, g[nt], SD, wmma::mem_row_major);
      }
      __syncwarp();
      warp_rows_out<DP, EXACT>(st, dq + base, iw, p);
    }
  }
#endif
}

template <unsigned DP>
__host__ __device__ constexpr unsigned dkdv_tc_smem_floats() {
  constexpr unsigned T = bwd_tc_tile<DP>();
  return (2 * kTcRows + 2 * T) * (DP + 4) + 2 * kTcRows * (T + 4) + 512 + 2 * T;
}

// dk and / or dv for 128 keys per block (warp w: keys 16 w ..), looping over query tiles of T:
// per tile and warp S^T = K Q^T and (for dk) dP^T = V dout^T on the tensor cores, P^T and dS^T
// element-wise in the fragments (lse and D of the tile's queries from shared memory), P^T to the
// warp's strip for dv += P^T dout, dS^T to its second strip for dk += dS^T Q.
template <unsigned DP, bool EXACT>
__global__ void __launch_bounds__(kThreads, 1)
    dkdv_tc_kernel(KP p, const float *__restrict q, const float *__restrict k,
                   const float *__restrict v, const float *__restrict dout,
                   const float *__restrict lse, const float *__restrict D, float *__restrict dk,
                   float *__restrict dv) {
#if defined(TLRT_CUDA_EMULATION) || !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
  constexpr unsigned BK = kTcRows, SD = DP + 4, NT = DP / 16, T = bwd_tc_tile<DP>(),
                     NS = T / 16, ST = T + 4;
  float *sm = async::dynamic_smem();
  float *ks = sm, *vs = ks + BK * SD, *qs = vs + BK * SD, *dos = qs + T * SD, *ss = dos + T * SD,
        *ss2 = ss + BK * ST, *idx = ss2 + BK * ST, *lq = idx + 512, *dq_ = lq + T;
  const unsigned w = threadIdx.x / 32;
  const unsigned jb = blockIdx.x * BK, jw = jb + 16 * w;
  const bool want_k = dk != nullptr, want_v = dv != nullptr;
  const unsigned ifirst = p.skip ? jb - jb % T : 0;
  float *sw = ss + 16 * w * ST, *sw2 = ss2 + 16 * w * ST;  // the warp's P^T and dS^T strips
  zero_smem(sm, dkdv_tc_smem_floats<DP>());
  __syncthreads();
  fill_index(idx);
  for (uint64_t b = blockIdx.y; b < p.bh; b += gridDim.y) {
    const uint64_t base = b * p.n * p.d;
    const float *mb = p.mask ? p.mask + b * p.mask_stride : nullptr;
    __syncthreads();  // index matrices written; the previous problem's readers done
    // lse and (for dk) D of query tile i0, zero past n.
    auto load_rows = [&](unsigned i0) {
      if (threadIdx.x < T) {
        const unsigned i = i0 + threadIdx.x;
        const bool ok = i < p.n;
        async::copy4(lq + threadIdx.x, ok ? lse + b * p.n + i : lse, ok);
        if (want_k) async::copy4(dq_ + threadIdx.x, ok ? D + b * p.n + i : D, ok);
      }
    };
    load_tile<DP, BK, EXACT>(ks, k + base, jb, p.n, p.d, p.vec);
    load_tile<DP, BK, EXACT>(vs, v + base, jb, p.n, p.d, p.vec);
    load_tile<DP, T, EXACT>(dos, dout + base, ifirst, p.n, p.d, p.vec);
    load_rows(ifirst);
    async::commit();
    load_tile<DP, T, EXACT>(qs, q + base, ifirst, p.n, p.d, p.vec);
    async::commit();
    FragC gk[NT], gv[NT];
#pragma unroll
    for (unsigned nt = 0; nt < NT; ++nt) {
      wmma::fill_fragment(gk[nt], 0.0f);
      wmma::fill_fragment(gv[nt], 0.0f);
    }
    async::wait<1>();  // K, V, dout tile, lse / D
    __syncthreads();
    // Loop invariant at the top: dout tile i0, its lse / D visible; Q tile i0 in flight.
    for (unsigned i0 = ifirst; i0 < p.n; i0 += T) {
      const bool more = i0 + T < p.n;
      // The warp visits the tile unless its keys are past n or (skipping) all after its queries.
      const bool active = jw < p.n && !(p.skip && i0 + T - 1 < jw);
      FragC st[NS], dpt[NS];
      if (active) {
#pragma unroll
        for (unsigned nt = 0; nt < NS; ++nt) {
          wmma::fill_fragment(st[nt], 0.0f);
          wmma::fill_fragment(dpt[nt], 0.0f);
        }
        if (want_k) strip_mma<true, DP, NS>(dpt, vs + 16 * w * SD, SD, dos, SD);
      }
      async::wait<0>();  // Q tile i0
      __syncthreads();
      if (active) {
        strip_mma<true, DP, NS>(st, ks + 16 * w * SD, SD, qs, SD);
        const bool plain = !mb && jw + 15 < p.n && i0 + T <= p.n && !(p.causal && jw + 15 > i0);
        // x: S^T -> P^T; dpt: dP^T -> dS^T.
        strip_elements<NS>(idx, st, [&](float &x, unsigned r, unsigned c, unsigned nt, int e) {
          const unsigned j = jw + r, i = i0 + c;
          float sc;
          if (plain) {
            sc = x * p.scale;
          } else if (i < p.n && j < p.n) {
            const bool blocked = (p.causal && j > i) || (mb && mb[(uint64_t)i * p.n + j] == 0.0f);
            sc = attn::score(x, blocked, p.scale, p.fill);
          } else {
            sc = kNegInf;
          }
          const float pr = attn::prob(sc, lq[c]);
          x = pr;
          if (want_k) dpt[nt].x[e] = sc == kNegInf ? 0.0f : pr * (dpt[nt].x[e] - dq_[c]);
        });
#pragma unroll
        for (unsigned nt = 0; nt < NS; ++nt) {
          if (want_v) wmma::store_matrix_sync(sw + 16 * nt, st[nt], ST, wmma::mem_row_major);
          if (want_k) wmma::store_matrix_sync(sw2 + 16 * nt, dpt[nt], ST, wmma::mem_row_major);
        }
        __syncwarp();
        if (want_v) strip_mma<false, T, NT>(gv, sw, ST, dos, SD);
      }
      __syncthreads();  // every read of dos, lq, dq_ done
      if (more) {
        load_tile<DP, T, EXACT>(dos, dout + base, i0 + T, p.n, p.d, p.vec);
        load_rows(i0 + T);
      }
      async::commit();
      if (active && want_k) strip_mma<false, T, NT>(gk, sw2, ST, qs, SD);
      async::wait<0>();  // the next dout tile, lse / D
      __syncthreads();   // visible; every read of qs done
      if (more) load_tile<DP, T, EXACT>(qs, q + base, i0 + T, p.n, p.d, p.vec);
      async::commit();
    }
    if (jw < p.n) {
      // Staged through the warp's own K (dk) and V (dv) rows, no longer needed.
      float *stk = ks + 16 * w * SD, *stv = vs + 16 * w * SD;
#pragma unroll
      for (unsigned nt = 0; nt < NT; ++nt) {
        if (want_k) {
#pragma unroll
          for (int e = 0; e < FragC::num_elements; ++e) gk[nt].x[e] = gk[nt].x[e] * p.scale;
          wmma::store_matrix_sync(stk + 16 * nt, gk[nt], SD, wmma::mem_row_major);
        }
        if (want_v) wmma::store_matrix_sync(stv + 16 * nt, gv[nt], SD, wmma::mem_row_major);
      }
      __syncwarp();
      if (want_k) warp_rows_out<DP, EXACT>(stk, dk + base, jw, p);
      if (want_v) warp_rows_out<DP, EXACT>(stv, dv + base, jw, p);
    }
  }
#endif
}

// The TF32 backward's launches (D, then dk / dv, then dq), or false (nothing launched) where it
// does not apply: d == 0, d > 128, or too little shared memory per block (the caller runs the
// exact kernels then). D: bh * n floats of scratch, read only when dq or dk is wanted.
// Whether bwd_tc_plan takes the problem (d in 1 .. 128, the shared memory fits).
template <class L>
bool bwd_tc_applies(const L &launch, const Problem &p) {
  if (p.d == 0 || p.d > 128) return false;
  const size_t need = with_tc_dp(p.d, [](auto dpc) -> size_t {
    constexpr unsigned DP = decltype(dpc)::value;
    return dq_tc_smem_floats<DP>() > dkdv_tc_smem_floats<DP>() ? dq_tc_smem_floats<DP>()
                                                               : dkdv_tc_smem_floats<DP>();
  });
  return need * sizeof(float) <= launch.smem_limit();
}

template <class L>
bool bwd_tc_plan(L &launch, const Problem &p, const float *q, const float *k, const float *v,
                 const float *out, const float *dout, const float *lse, float *D, float *dq,
                 float *dk, float *dv) {
  if (!bwd_tc_applies(launch, p)) return false;
  const KP kp = kernel_view(p, aligned16(q) && aligned16(k) && aligned16(v) && aligned16(dout) &&
                                   aligned16(out) && aligned16(dq) && aligned16(dk) &&
                                   aligned16(dv));
  if (dq || dk) d_plan(launch, p, out, dout, D);
  const dim3 grid = grid_of(launch, (kp.n + kTcRows - 1) / kTcRows, kp.bh);
  auto go = [&](auto dpc, auto exactc) {
    constexpr unsigned DP = decltype(dpc)::value;
    constexpr bool E = decltype(exactc)::value;
    if (dk || dv)
      launch("attention dkdv_tc_kernel", Kernel<dkdv_tc_kernel<DP, E>>(), grid, kThreads,
             dkdv_tc_smem_floats<DP>() * sizeof(float), kp, q, k, v, dout, lse,
             (const float *)D, dk, dv);
    if (dq)
      launch("attention dq_tc_kernel", Kernel<dq_tc_kernel<DP, E>>(), grid, kThreads,
             dq_tc_smem_floats<DP>() * sizeof(float), kp, q, k, v, dout, lse, (const float *)D,
             dq);
    return true;
  };
  return with_tc_dp_exact(p.d, go);
}

}  // namespace attn_kernels
}  // namespace cuda
}  // namespace tlrt
