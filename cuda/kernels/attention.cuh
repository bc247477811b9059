// The exact attention kernels (Precision::Exact, and wherever no tensor-core kernel applies):
// FlashAttention-2 in float32 SIMT, the ORDER OF OPERATIONS of abi/tlrt_attention.h with the same
// IEEE operations as stub/attention.cpp, bit for bit. Every fusion is an explicit num::fma (the
// CUDA build has -fmad=false), the division __fdiv_rn, exp / log the shared float32 functions; no
// atomics, no n x n buffer. tests/unit/test_attention_emu.cpp runs this source on the CPU emulator.
// A plan takes a launcher: launch(name, Kernel<k>(), grid, threads, smem, args...) starts kernel k,
// launch.smem_limit() is the shared memory per block (bytes), launch.max_grid_y() the grid's y cap.
//
// Problems are (batch b, query head h) of an attn::Geometry: query rows i < nq, keys j < nk of key
// / value head h / group, each operand read in place through its view (row r at base + r *
// token stride: strided, from one fused projection, padded), out and dout token-major, causal
// aligned bottom-right (j > i + nk - nq blocked). The (bh, n, d) entry points are the geometry of
// bh sequences of one head.
//
// Common: 256 threads; tiles of 64 keys (queries in dk/dv); every (., d) tile in shared memory
// row-major, rows padded to DP + 4 floats (DP: d rounded up to 32, 64, 128, 256; 64 at least in
// the backward), so the dot products read float4s along t while each fma chain still runs t = 0 ..
// d - 1. Tiles arrive by cp.async (16-byte copies when d % 4 == 0, every stride a multiple of 4
// and the tensors aligned, else 4-byte; zero fill past the rows) into single buffers refilled as
// soon as their last reader is past a barrier. A mask entry is copied by the thread that reads it
// into its own P / dS slot (no barrier). EXACT = (d == DP) fixes the loop lengths. Tiles wholly in
// range, unmasked and on or below the diagonal score as dot * scale without the per-entry tests
// (the same value). Block sizes never enter the order of operations, so the smaller-block
// variants for devices with less shared memory than sm_90 give the same bits.
//
// fwd_kernel<DP, RM>: block (problem, 32 RM query rows; RM = 4 for 64 < d <= 128, else 2); thread
// (row group g < 32, lane tx < 8): rows g + 32 a, keys tx + 8 c of a tile (the header's lane
// layout; maxima and sums by __shfl_xor 1, 2, 4). Q resident; per key tile S = Q K^T, the online
// softmax, P to shared memory, acc += P V. With skipping a block stops where its last query tile
// stops meeting key tiles, and the blocks with most tiles start first. 4 nq nk d + ~30 nq nk FLOPs
// per problem (about half with skipping); q and out move once, k and v once per query block
// (from L2; a key / value head is read by the blocks of each of its group's query heads).
// d_kernel: D[b n + i] = sum_t dout[b, i, t] out[b, i, t] over the rows of problem b where their
// row maps say (the exact kernels: all rows of out in memory order, token-major), one fma chain
// per row and thread.
// dkdv_kernel<DP, RK>: block (batch, key / value head, 16 RK keys; RK = 4, 2 at DP = 256); thread
// (key group kg < 16, query lane ql < 16). K, V resident; per step (query head of the group, query
// tile), heads ascending, tiles ascending: dP^T = V dout^T, S^T = K Q^T, P^T and dS^T to shared
// memory, dv += P^T dout, dk += dS^T Q, one accumulation through all steps: 8 nq nk d FLOPs per
// query head (4 with dv only).
// dq_kernel<DP, RQ>: block (problem, 16 RQ queries); thread (row group rg < 16, key lane kl < 16).
// Q, dout resident; per key tile dP, S, dS to shared memory, dq += dS K: 6 nq nk d FLOPs. P is
// recomputed in both (FA2's deterministic two-kernel form): 14 nq nk d against the usual 10;
// q, k, v, dout each move once per block of the other side.
// restride_kernel: copies between views and the contiguous (bh, n, d) layout of the tensor-core
// kernels (with repeated or summed heads), (R + 1) floats moved per element written.
// Registers (sm_90, ptxas): fwd 100-128 at DP <= 64 (two blocks per SM), ~220-240 at DP = 128
// (RM = 4); dkdv and dq 128 at DP = 64 (two blocks per SM), up to ~230 at DP = 128. No spills
// except fwd_kernel<128, 2, exact> (the variant of devices with less than 172 KB of shared memory
// per block, d = 128: 32 bytes).
// Last measured: bench/results/2026-11-29-h200-attention-views.md
#pragma once

#include <type_traits>

#include "core/backend/attention.hpp"
#include "cuda/common/pdl.cuh"
#include "cuda/common/vec4.cuh"
#ifndef TLRT_CUDA_EMULATION
#include "cuda/common/cp_async.cuh"
#endif

namespace tlrt {
namespace cuda {
namespace attn_kernels {

using attn::kNegInf;
using attn::Problem;

constexpr unsigned kThreads = 256;
constexpr unsigned kT = attn::kBc;  // 64: keys per tile (fwd, dq), queries per tile (dk/dv)
constexpr unsigned kFull = 0xffffffffu;
constexpr unsigned kPS = kT + 8;    // row stride of the forward's P tile
constexpr unsigned kGT = kT + 4;    // row stride of the dk/dv kernel's P^T and dS^T tiles
constexpr unsigned kGS = kT + 16;   // row stride of the dq kernel's dS tile

// Kernel-side view of the problem. vec: d % 4 == 0 and every tensor 16-byte aligned, so rows
// move as float4 (16-byte cp.async, float4 stores); otherwise element by element.
struct KP {
  unsigned n, d;
  unsigned bh;
  const float *mask;
  uint64_t mask_stride;
  float scale, fill;
  bool causal, skip, vec;
};

// Kernel-side view of an attn::Geometry (the exact kernels): problems y = b hq + h; q rows of
// problem y at q + b q.batch + h q.head (row stride q.token), k and v rows of its key / value head
// h / group, out and dout token-major (row stride hq d), lse and the mask per problem, D
// token-major; the gradient views likewise. coff = nk - nq (causal: j > i + coff is blocked).
// vec: d % 4 == 0, every tensor 16-byte aligned and every stride a multiple of 4, so rows move as
// float4; otherwise element by element.
struct GP {
  unsigned nq, nk, d;
  unsigned hq, hkv, group;
  unsigned batch;  // batch * hq below 2^31
  attn::View q, k, v, dq, dk, dv;
  const float *mask;
  uint64_t mask_stride;
  float scale, fill;
  int coff;  // nk - nq: within int for nq, nk below 2^31
  bool causal, skip, vec;
};

// A kernel named at compile time, as the plans hand it to their launcher: the CUDA launcher keeps
// per-kernel state by it (shared-memory attributes, set once per device), the emulator calls it.
template <auto K>
struct Kernel {
#ifdef TLRT_CUDA_EMULATION
  template <class... A>
  void operator()(A... a) const {
    K(a...);
  }
#endif
};

using vec4::ld4;
using vec4::st4;

// Component e (a constant after unrolling) of a float4.
__device__ __forceinline__ float comp(const float4 &v, unsigned e) {
  return e == 0 ? v.x : e == 1 ? v.y : e == 2 ? v.z : v.w;
}

__device__ __forceinline__ void fma4(float a, const float4 &b, float (&acc)[4]) {
  acc[0] = num::fma(a, b.x, acc[0]);
  acc[1] = num::fma(a, b.y, acc[1]);
  acc[2] = num::fma(a, b.z, acc[2]);
  acc[3] = num::fma(a, b.w, acc[3]);
}

// s += a[t] b[t] for the 4 t of one float4 step, in t order (one step of the fma chain).
__device__ __forceinline__ float dot4(const float4 &a, const float4 &b, float s) {
  s = num::fma(a.x, b.x, s);
  s = num::fma(a.y, b.y, s);
  s = num::fma(a.z, b.z, s);
  return num::fma(a.w, b.w, s);
}

// s(i, j) of the header for in-range i, j from the fma-chain dot product; m is the mask entry
// (read only when there is a mask).
__device__ __forceinline__ float score_of(const GP &p, unsigned i, unsigned j, float dot,
                                          float m) {
  // j > i + coff, in int: i, j < 2^31 so j - i cannot overflow
  const bool blocked = (p.causal && (int)j - (int)i > p.coff) || (p.mask != nullptr && m == 0.0f);
  return attn::score(dot, blocked, p.scale, p.fill);
}

// Whether the causal diagonal leaves every (i, j) with i >= i_first, j <= j_last unblocked.
__device__ __forceinline__ bool below_diagonal(const GP &p, unsigned i_first, unsigned j_last) {
  return !p.causal || (long long)j_last <= (long long)i_first + p.coff;
}

// The thread's dot products turned into scores in place. plain: the block's whole tile is in
// range, unmasked and on or below the causal diagonal, so every score is dot * scale (the value
// score_of gives there, in fewer instructions); otherwise general(a, c, dot).
template <unsigned RA, unsigned RB, class F>
__device__ __forceinline__ void score_tile(bool plain, float scale, float (&s)[RA][RB],
                                           F general) {
  if (plain) {
#pragma unroll
    for (unsigned a = 0; a < RA; ++a)
#pragma unroll
      for (unsigned c = 0; c < RB; ++c) s[a][c] = s[a][c] * scale;
  } else {
#pragma unroll
    for (unsigned a = 0; a < RA; ++a)
#pragma unroll
      for (unsigned c = 0; c < RB; ++c) s[a][c] = general(a, c, s[a][c]);
  }
}

// Zeroes the dynamic shared memory (floats, a multiple of 4): the padding columns are never
// written by the tile copies, and the products read them. A barrier must follow before any copy.
__device__ __forceinline__ void zero_smem(float *sm, unsigned floats) {
  for (unsigned e = threadIdx.x; e < floats / 4; e += kThreads)
    st4(sm + 4 * e, make_float4(0.0f, 0.0f, 0.0f, 0.0f));
}

// Issues the copies of rows r0 .. r0 + ROWS - 1 (columns 0 .. d - 1) of a matrix of n rows whose
// row r starts at src + r stride into dst (row stride DP + 4); rows past n become zeros. Columns
// d .. DP + 3 are not touched. vec: d, stride and src allow 16-byte copies.
template <unsigned DP, unsigned ROWS, bool EXACT>
__device__ __forceinline__ void load_rows(float *dst, const float *src, unsigned r0, unsigned n,
                                          unsigned d, uint64_t stride, bool vec) {
  constexpr unsigned SD = DP + 4;
  if (vec) {
    const unsigned d4 = EXACT ? DP / 4 : d / 4;
    for (unsigned e = threadIdx.x; e < ROWS * d4; e += kThreads) {
      const unsigned r = e / d4, c = e % d4;
      const bool ok = r0 + r < n;
      async::copy16(dst + r * SD + 4 * c, ok ? src + (uint64_t)(r0 + r) * stride + 4 * c : src,
                    ok);
    }
  } else {
    for (unsigned e = threadIdx.x; e < ROWS * d; e += kThreads) {
      const unsigned r = e / d, t = e % d;
      const bool ok = r0 + r < n;
      async::copy4(dst + r * SD + t, ok ? src + (uint64_t)(r0 + r) * stride + t : src, ok);
    }
  }
}

// load_rows of a row-major (n, d) matrix.
template <unsigned DP, unsigned ROWS, bool EXACT>
__device__ __forceinline__ void load_tile(float *dst, const float *src, unsigned r0, unsigned n,
                                          unsigned d, bool vec) {
  load_rows<DP, ROWS, EXACT>(dst, src, r0, n, d, d, vec);
}

// The RA x RB fma-chain dot products s[a][c] = sum_t A[ra(a), t] B[rb(c), t] (t = 0 .. d - 1 in
// order, from 0) of rows of two shared tiles with row stride DP + 4: rows a0 + sa a of A and
// b0 + sb c of B. Float4 steps, then the d % 4 tail when the length is not a constant.
template <unsigned DP, bool EXACT, unsigned RA, unsigned RB>
__device__ __forceinline__ void dots(const float *A, unsigned a0, unsigned sa, const float *B,
                                     unsigned b0, unsigned sb, unsigned d, float (&s)[RA][RB]) {
  constexpr unsigned SD = DP + 4;
  const unsigned dl = EXACT ? DP : d;
#pragma unroll
  for (unsigned a = 0; a < RA; ++a)
#pragma unroll
    for (unsigned c = 0; c < RB; ++c) s[a][c] = 0.0f;
#pragma unroll 1
  for (unsigned t = 0; t + 4 <= dl; t += 4) {
    float4 av[RA];
#pragma unroll
    for (unsigned a = 0; a < RA; ++a) av[a] = ld4(A + (a0 + sa * a) * SD + t);
#pragma unroll
    for (unsigned c = 0; c < RB; ++c) {
      const float4 bv = ld4(B + (b0 + sb * c) * SD + t);
#pragma unroll
      for (unsigned a = 0; a < RA; ++a) s[a][c] = dot4(av[a], bv, s[a][c]);
    }
  }
  if (!EXACT)
    for (unsigned t = dl & ~3u; t < dl; ++t)
#pragma unroll
      for (unsigned a = 0; a < RA; ++a)
#pragma unroll
        for (unsigned c = 0; c < RB; ++c)
          s[a][c] = num::fma(A[(a0 + sa * a) * SD + t], B[(b0 + sb * c) * SD + t], s[a][c]);
}

// acc[a][c4][e] = fma(W[w0 + sw a, j], M[j, col0 + CS c4 + e], acc) for j = 0 .. 63 in order: W
// a tile of weights (row stride WS), M a shared (64, DP) tile (row stride DP + 4).
// With PART, the rows a < a_first are left out (their acc untouched).
template <unsigned DP, unsigned RA, unsigned C4, unsigned WS, unsigned CS, bool PART = false>
__device__ __forceinline__ void tile_axpy(const float *W, unsigned w0, unsigned sw,
                                          const float *M, unsigned col0,
                                          float (&acc)[RA][C4][4], unsigned a_first = 0) {
  constexpr unsigned SD = DP + 4;
#pragma unroll 1
  for (unsigned j = 0; j < kT; j += 4) {
    float4 wv[RA];
#pragma unroll
    for (unsigned a = 0; a < RA; ++a) wv[a] = ld4(W + (w0 + sw * a) * WS + j);
#pragma unroll
    for (unsigned e = 0; e < 4; ++e)
#pragma unroll
      for (unsigned c4 = 0; c4 < C4; ++c4) {
        const float4 mv = ld4(M + (j + e) * SD + col0 + CS * c4);
#pragma unroll
        for (unsigned a = 0; a < RA; ++a)
          if (!PART || a >= a_first) fma4(comp(wv[a], e), mv, acc[a][c4]);
      }
  }
}

// dst[r, col0 + CS c4 + e] = acc[a][c4][e] * factor (factor 1: the value itself) for the rows
// r = r0 + sr a below n (row r at dst + r stride) and the columns below d.
template <unsigned RA, unsigned C4, unsigned CS>
__device__ __forceinline__ void store_rows(const float (&acc)[RA][C4][4], bool scale_it,
                                           float factor, float *dst, unsigned r0, unsigned sr,
                                           unsigned col0, unsigned n, unsigned d, uint64_t stride,
                                           bool vec) {
#pragma unroll
  for (unsigned a = 0; a < RA; ++a) {
    const unsigned r = r0 + sr * a;
    if (r >= n) continue;
    float *row = dst + (uint64_t)r * stride;
#pragma unroll
    for (unsigned c4 = 0; c4 < C4; ++c4) {
      const unsigned col = col0 + CS * c4;
      float x[4];
#pragma unroll
      for (unsigned e = 0; e < 4; ++e) x[e] = scale_it ? acc[a][c4][e] * factor : acc[a][c4][e];
      if (vec && col < d) {
        st4(row + col, make_float4(x[0], x[1], x[2], x[3]));
      } else {
#pragma unroll
        for (unsigned e = 0; e < 4; ++e)
          if (col + e < d) row[col + e] = x[e];
      }
    }
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

template <unsigned RA, unsigned C4>
__device__ __forceinline__ void zero_acc(float (&acc)[RA][C4][4]) {
#pragma unroll
  for (unsigned a = 0; a < RA; ++a)
#pragma unroll
    for (unsigned c4 = 0; c4 < C4; ++c4)
#pragma unroll
      for (unsigned e = 0; e < 4; ++e) acc[a][c4][e] = 0.0f;
}

// The backward kernels' mask entries of a tile (queries from q0, keys from k0) of a (nq, nk)
// mask mb, by the thread that reads them, into its own slots of the P^T / dS tile (row stride S):
// slot (a, c) at dst[(r + 16 a) S + col + 16 c]; T: keys along the slot rows (dk/dv), else
// queries (dq). Entries past nq or nk are not copied (never read). Nothing without a mask.
template <unsigned R, unsigned S, bool T>
__device__ __forceinline__ void copy_mask_slots(float *dst, unsigned r, unsigned col,
                                                const float *mb, unsigned nq, unsigned nk,
                                                unsigned q0, unsigned k0) {
  if (!mb) return;
#pragma unroll
  for (unsigned a = 0; a < R; ++a)
#pragma unroll
    for (unsigned c = 0; c < 4; ++c) {
      const unsigned i = T ? q0 + col + 16 * c : q0 + r + 16 * a,
                     j = T ? k0 + r + 16 * a : k0 + col + 16 * c;
      if (i < nq && j < nk)
        async::copy4(dst + (r + 16 * a) * S + col + 16 * c, mb + (uint64_t)i * nk + j, true);
    }
}

// Rows of one operand of a problem: base pointer, row count, row stride.
struct RowsOf {
  const float *p;
  unsigned n;
  uint64_t stride;
};

// The start of a problem in both backward kernels: the two resident tiles (RES rows from r0 of
// x1, x2 into t1, t2), the first streamed tile (rows s0.. of y1 into u1) and the mask entries
// (mask(), the caller's copy_mask_slots) as one cp.async group, then the first tile of y2 into
// u2 as a second group, which the kernel waits for under its first products.
template <unsigned DP, unsigned RES, bool EXACT, class M>
__device__ __forceinline__ void bwd_problem_start(const GP &p, unsigned r0, float *t1, RowsOf x1,
                                                  float *t2, RowsOf x2, unsigned s0, float *u1,
                                                  RowsOf y1, float *u2, RowsOf y2, M mask) {
  load_rows<DP, RES, EXACT>(t1, x1.p, r0, x1.n, p.d, x1.stride, p.vec);
  load_rows<DP, RES, EXACT>(t2, x2.p, r0, x2.n, p.d, x2.stride, p.vec);
  load_rows<DP, kT, EXACT>(u1, y1.p, s0, y1.n, p.d, y1.stride, p.vec);
  mask(s0);
  async::commit();
  load_rows<DP, kT, EXACT>(u2, y2.p, s0, y2.n, p.d, y2.stride, p.vec);
  async::commit();
}

// The rows of problem y = b hq + h: q (and dq's destination), k / v of its key / value head,
// dout / out (token-major), and its mask.
struct ProbRows {
  unsigned b, h, kv;
  __device__ __forceinline__ ProbRows(const GP &p, unsigned y)
      : b(y / p.hq), h(y % p.hq), kv(y % p.hq / p.group) {}
  __device__ __forceinline__ RowsOf q(const GP &p, const float *q) const {
    return RowsOf{q + (uint64_t)b * p.q.batch + (uint64_t)h * p.q.head, p.nq, p.q.token};
  }
  __device__ __forceinline__ RowsOf k(const GP &p, const float *k) const {
    return RowsOf{k + (uint64_t)b * p.k.batch + (uint64_t)kv * p.k.head, p.nk, p.k.token};
  }
  __device__ __forceinline__ RowsOf v(const GP &p, const float *v) const {
    return RowsOf{v + (uint64_t)b * p.v.batch + (uint64_t)kv * p.v.head, p.nk, p.v.token};
  }
  // out and dout: (batch, nq, hq, d).
  __device__ __forceinline__ uint64_t tok(const GP &p) const {
    return ((uint64_t)b * p.nq * p.hq + h) * p.d;
  }
  __device__ __forceinline__ const float *mask(const GP &p) const {
    return p.mask ? p.mask + (uint64_t)(b * p.hq + h) * p.mask_stride : nullptr;
  }
};

// ---- forward ------------------------------------------------------------------------------------

template <unsigned DP, unsigned RM>
__host__ __device__ constexpr unsigned fwd_smem_floats() {
  return (32 * RM + 2 * kT) * (DP + 4) + 32 * RM * kPS;
}

template <unsigned DP, unsigned RM, bool EXACT>
__global__ void __launch_bounds__(kThreads, DP * RM <= 256 ? 2 : 1)
    fwd_kernel(GP p, const float *__restrict q, const float *__restrict k,
               const float *__restrict v, float *__restrict out, float *__restrict lse) {
  constexpr unsigned BR = 32 * RM, SD = DP + 4, C4 = DP / 32;
  float *sm = async::dynamic_smem();
  float *qs = sm, *ks = qs + BR * SD, *vs = ks + kT * SD, *ps = vs + kT * SD;
  // Lane tx of row group g: rows g + 32 a; keys tx + 8 c of a tile; columns 4 tx + 32 c4 + e.
  const unsigned tx = threadIdx.x % 8, g = threadIdx.x / 8;
  // With skipping, a query tile visits the key tiles it meets, so the block visits those its last
  // query tile meets, and later blocks visit more: they start first.
  const unsigned i0 = (p.skip ? gridDim.x - 1 - blockIdx.x : blockIdx.x) * BR;
  const unsigned jend = (unsigned)attn::key_end(p.skip, i0 + BR - kT, p.nk, p.coff);
  zero_smem(sm, fwd_smem_floats<DP, RM>());
  for (unsigned y = blockIdx.y; y < p.batch * p.hq; y += gridDim.y) {
    const ProbRows pr(p, y);
    const float *kb = pr.k(p, k).p, *vb = pr.v(p, v).p, *mb = pr.mask(p);
    __syncthreads();  // zeroing, or the previous problem's readers, done
    float m[RM], l[RM], acc[RM][C4][4];
#pragma unroll
    for (unsigned a = 0; a < RM; ++a) {
      m[a] = kNegInf;
      l[a] = 0.0f;
#pragma unroll
      for (unsigned c4 = 0; c4 < C4; ++c4)
#pragma unroll
        for (unsigned e = 0; e < 4; ++e) acc[a][c4][e] = 0.0f;
    }
    if (jend > 0) {  // (block-uniform) otherwise no key tile: every row fully excluded
      load_rows<DP, BR, EXACT>(qs, pr.q(p, q).p, i0, p.nq, p.d, p.q.token, p.vec);
      load_rows<DP, kT, EXACT>(ks, kb, 0, p.nk, p.d, p.k.token, p.vec);
      async::commit();
      load_rows<DP, kT, EXACT>(vs, vb, 0, p.nk, p.d, p.v.token, p.vec);
      async::commit();
      async::wait<1>();  // Q, K tile 0
      __syncthreads();
    }
    // Loop invariant at the top: K tile j0 visible in ks; V tile j0 in flight into vs.
    for (unsigned j0 = 0; j0 < jend; j0 += kT) {
      const bool more = j0 + kT < jend;
      // Rows a < a_first belong to a query tile that does not meet this key tile (the first half
      // of a 128-row block at the last tiles of its diagonal, with skipping): they leave it out.
      // The same for the whole block. (The block's last query tile meets every tile it visits.)
      unsigned a_first = 0;
      if constexpr (RM > 2)
        if (p.skip && !attn::tiles_meet(i0, j0, p.coff)) a_first = 2;
      if (mb) {  // this thread's mask entries of the tile, into its own P slots
#pragma unroll
        for (unsigned a = 0; a < RM; ++a)
#pragma unroll
          for (unsigned c = 0; c < 8; ++c) {
            const unsigned i = i0 + g + 32 * a, j = j0 + tx + 8 * c;
            if (i < p.nq && j < p.nk)
              async::copy4(ps + (g + 32 * a) * kPS + tx + 8 * c, mb + (uint64_t)i * p.nk + j,
                           true);
          }
      }
      async::commit();
      float s[RM][8];
      dots<DP, EXACT, RM, 8>(qs, g, 32, ks, tx, 8, p.d, s);
      async::wait<0>();  // the mask entries (own) and V tile j0
      score_tile(!mb && i0 + BR <= p.nq && j0 + kT <= p.nk && below_diagonal(p, i0, j0 + kT - 1),
                 p.scale, s, [&](unsigned a, unsigned c, float dot) {
                   const unsigned i = i0 + g + 32 * a, j = j0 + tx + 8 * c;
                   const float m = mb ? ps[(g + 32 * a) * kPS + tx + 8 * c] : 1.0f;
                   return (i < p.nq && j < p.nk) ? score_of(p, i, j, dot, m) : kNegInf;
                 });
#pragma unroll
      for (unsigned a = 0; a < RM; ++a) {
        if (a < a_first) continue;
        float *prow = ps + (g + 32 * a) * kPS;
        float mt = s[a][0];
#pragma unroll
        for (unsigned c = 1; c < 8; ++c) mt = attn::amax(mt, s[a][c]);
        const float mn = attn::amax(m[a], lane_max(mt));
        const float alpha = mn == kNegInf ? 1.0f : math::exp_f(m[a] - mn);
        float rs = 0.0f;
#pragma unroll
        for (unsigned c = 0; c < 8; ++c) {
          const float pr = attn::prob(s[a][c], mn);
          rs = c == 0 ? pr : rs + pr;
          prow[tx + 8 * c] = pr;
        }
        l[a] = l[a] * alpha + lane_sum(rs);
        m[a] = mn;
#pragma unroll
        for (unsigned c4 = 0; c4 < C4; ++c4)
#pragma unroll
          for (unsigned e = 0; e < 4; ++e) acc[a][c4][e] = acc[a][c4][e] * alpha;
      }
      __syncthreads();  // P and V visible; every read of ks done
      if (more) load_rows<DP, kT, EXACT>(ks, kb, j0 + kT, p.nk, p.d, p.k.token, p.vec);
      async::commit();
      if (a_first == 0)
        tile_axpy<DP, RM, C4, kPS, 32>(ps, g, 32, vs, 4 * tx, acc);
      else
        tile_axpy<DP, RM, C4, kPS, 32, true>(ps, g, 32, vs, 4 * tx, acc, a_first);
      async::wait<0>();  // the next K tile
      __syncthreads();   // it is visible; every read of vs and ps done
      if (more) load_rows<DP, kT, EXACT>(vs, vb, j0 + kT, p.nk, p.d, p.v.token, p.vec);
      async::commit();
    }
#pragma unroll
    for (unsigned a = 0; a < RM; ++a) {
      const bool none = l[a] == 0.0f;  // every key excluded (a NaN score makes l NaN)
      const float la = l[a];
#pragma unroll
      for (unsigned c4 = 0; c4 < C4; ++c4)
#pragma unroll
        for (unsigned e = 0; e < 4; ++e)
          acc[a][c4][e] = none ? 0.0f : __fdiv_rn(acc[a][c4][e], la);
      const unsigned i = i0 + g + 32 * a;
      if (tx == 0 && i < p.nq)
        lse[(uint64_t)y * p.nq + i] = none ? kNegInf : m[a] + math::log_f(la);
    }
    store_rows<RM, C4, 32>(acc, false, 1.0f, out + pr.tok(p), i0 + g, 32, 4 * tx, p.nq, p.d,
                           (uint64_t)p.hq * p.d, p.vec);
  }
}

// ---- backward -----------------------------------------------------------------------------------

// D[r] = sum_t dout[r, t] out[r, t] (an fma chain, as the CPU), one thread per row; float4
// loads when vec (d % 4 == 0, aligned).
__global__ void __launch_bounds__(256)
    d_kernel(const float *__restrict out, attn::RowMap om, const float *__restrict dout,
             attn::RowMap dm, uint64_t n, uint64_t rows, unsigned d, bool vec,
             float *__restrict D) {
  pdl_trigger();  // the wgmma backward's bits_kernel or planes_kernel, launched next, reads no D
  for (uint64_t r = (uint64_t)blockIdx.x * 256 + threadIdx.x; r < rows;
       r += (uint64_t)gridDim.x * 256) {
    const uint64_t b = rows <= UINT32_MAX ? (uint32_t)r / (uint32_t)n : r / n, i = r - b * n;
    const float *a = dout + dm.base(b) + i * dm.token, *o = out + om.base(b) + i * om.token;
    float acc = 0.0f;
    if (vec)
      for (unsigned t = 0; t < d; t += 4) acc = dot4(ld4(a + t), ld4(o + t), acc);
    else
      for (unsigned t = 0; t < d; ++t) acc = num::fma(a[t], o[t], acc);
    D[r] = acc;
  }
}

template <unsigned DP, unsigned RK>
__host__ __device__ constexpr unsigned dkdv_smem_floats() {
  return (2 * 16 * RK + 2 * kT) * (DP + 4) + 2 * 16 * RK * kGT;
}

// dk (if dk != nullptr) and dv (if dv != nullptr) for BK = 16 RK keys per block of one key /
// value head, looping over its group's query heads ascending and, in each, over query tiles of 64
// in ascending order: one accumulation running through the (head, query tile) steps.
template <unsigned DP, unsigned RK, bool EXACT>
__global__ void __launch_bounds__(kThreads, DP * RK <= 256 ? 2 : 1)
    dkdv_kernel(GP p, const float *__restrict q, const float *__restrict k,
                const float *__restrict v, const float *__restrict dout,
                const float *__restrict lse, const float *__restrict D, float *__restrict dk,
                float *__restrict dv) {
  constexpr unsigned BK = 16 * RK, SD = DP + 4, C4 = DP / 64;
  float *sm = async::dynamic_smem();
  float *ks = sm, *vs = ks + BK * SD, *qs = vs + BK * SD, *dos = qs + kT * SD, *pT = dos + kT * SD,
        *dST = pT + BK * kGT;
  // Key group kg (fast index, so a warp's mask reads run along a row): keys kg + 16 a; query lane
  // ql: queries ql + 16 c of a tile, columns 4 ql + 64 c4 + e of dk, dv.
  const unsigned kg = threadIdx.x % 16, ql = threadIdx.x / 16;
  const unsigned jb = blockIdx.x * BK;
  const bool want_k = dk != nullptr, want_v = dv != nullptr;
  // With skipping, the first query tile meeting this block's key tile; every later one meets it.
  const unsigned ifirst = (unsigned)attn::query_begin(p.skip, jb - jb % kT, p.coff);
  const unsigned tiles = ifirst < p.nq ? (p.nq - ifirst + kT - 1) / kT : 0;  // per query head
  const unsigned steps = tiles * p.group;
  const uint64_t dstride = (uint64_t)p.hq * p.d;
  zero_smem(sm, dkdv_smem_floats<DP, RK>());
  for (unsigned y = blockIdx.y; y < p.batch * p.hkv; y += gridDim.y) {
    const unsigned b = y / p.hkv;
    const unsigned kvh = (unsigned)(y % p.hkv), h0 = kvh * p.group;
    const ProbRows p0(p, b * p.hq + h0);  // the group's first query head: its k, v rows
    const RowsOf K = p0.k(p, k), V = p0.v(p, v);
    // Query head h0 + hh of the group: its q rows, dout rows, mask.
    auto qrows = [&](unsigned hh) { return ProbRows(p, b * p.hq + h0 + hh).q(p, q); };
    auto dorows = [&](unsigned hh) {
      return RowsOf{dout + ProbRows(p, b * p.hq + h0 + hh).tok(p), p.nq, dstride};
    };
    auto maskof = [&](unsigned hh) { return ProbRows(p, b * p.hq + h0 + hh).mask(p); };
    __syncthreads();  // zeroing, or the previous problem's readers, done
    // This thread's mask entries of query tile i0 of head hh, into its own P^T slots.
    auto load_mask = [&](unsigned hh, unsigned i0) {
      copy_mask_slots<RK, kGT, true>(pT, kg, ql, maskof(hh), p.nq, p.nk, i0, jb);
    };
    float gk[RK][C4][4], gv[RK][C4][4];
    zero_acc(gk);
    zero_acc(gv);
    if (steps > 0) {  // (block-uniform) otherwise no query row: dk = dv = 0
      bwd_problem_start<DP, BK, EXACT>(p, jb, ks, K, vs, V, ifirst, dos, dorows(0), qs, qrows(0),
                                       [&](unsigned i0) { load_mask(0, i0); });
      async::wait<1>();  // K, V, dout tile, mask entries
      __syncthreads();
    }
    // Loop invariant at the top: dout tile i0 of head hh visible in dos, this thread's mask
    // entries in its P^T slots; Q tile i0 of head hh in flight into qs.
    unsigned hh = 0, i0 = ifirst;
    for (unsigned step = 0; step < steps; ++step) {
      const bool more = step + 1 < steps;
      unsigned nh = hh, ni = i0 + kT;  // the next step
      if (ni >= p.nq) {
        nh = hh + 1;
        ni = ifirst;
      }
      const uint64_t yh = b * p.hq + h0 + hh;
      const float *mb = maskof(hh);
      float L[4], Di[4];
#pragma unroll
      for (unsigned c = 0; c < 4; ++c) {
        const unsigned i = i0 + ql + 16 * c;
        L[c] = i < p.nq ? lse[yh * p.nq + i] : 0.0f;
        Di[c] = (want_k && i < p.nq) ? D[((uint64_t)b * p.nq + i) * p.hq + h0 + hh] : 0.0f;
      }
      float s[RK][4], dp[RK][4];
      if (want_k) dots<DP, EXACT, RK, 4>(vs, kg, 16, dos, ql, 16, p.d, dp);
      async::wait<0>();  // Q tile i0
      __syncthreads();
      dots<DP, EXACT, RK, 4>(ks, kg, 16, qs, ql, 16, p.d, s);
      score_tile(!mb && i0 + kT <= p.nq && jb + BK <= p.nk && below_diagonal(p, i0, jb + BK - 1),
                 p.scale, s, [&](unsigned a, unsigned c, float dot) {
                   const unsigned j = jb + kg + 16 * a, i = i0 + ql + 16 * c;
                   const float m = mb ? pT[(kg + 16 * a) * kGT + ql + 16 * c] : 1.0f;
                   return (i < p.nq && j < p.nk) ? score_of(p, i, j, dot, m) : kNegInf;
                 });
#pragma unroll
      for (unsigned a = 0; a < RK; ++a)
#pragma unroll
        for (unsigned c = 0; c < 4; ++c) {
          const unsigned at = (kg + 16 * a) * kGT + ql + 16 * c;
          const float sc = s[a][c];
          const float pr = attn::prob(sc, L[c]);
          pT[at] = pr;
          if (want_k) dST[at] = sc == kNegInf ? 0.0f : pr * (dp[a][c] - Di[c]);
        }
      __syncthreads();  // P^T, dS^T visible
      if (want_v) tile_axpy<DP, RK, C4, kGT, 64>(pT, kg, 16, dos, 4 * ql, gv);
      __syncthreads();  // every read of dos and pT done
      if (more) {
        const RowsOf DO = dorows(nh);
        load_rows<DP, kT, EXACT>(dos, DO.p, ni, DO.n, p.d, DO.stride, p.vec);
        load_mask(nh, ni);
      }
      async::commit();
      if (want_k) tile_axpy<DP, RK, C4, kGT, 64>(dST, kg, 16, qs, 4 * ql, gk);
      async::wait<0>();  // the next dout tile and mask entries
      __syncthreads();   // visible; every read of qs and dST done
      if (more) {
        const RowsOf Q = qrows(nh);
        load_rows<DP, kT, EXACT>(qs, Q.p, ni, Q.n, p.d, Q.stride, p.vec);
      }
      async::commit();
      hh = nh;
      i0 = ni;
    }
    if (want_v)
      store_rows<RK, C4, 64>(gv, false, 1.0f, dv + b * p.dv.batch + kvh * p.dv.head, jb + kg, 16,
                             4 * ql, p.nk, p.d, p.dv.token, p.vec);
    if (want_k)
      store_rows<RK, C4, 64>(gk, true, p.scale, dk + b * p.dk.batch + kvh * p.dk.head, jb + kg,
                             16, 4 * ql, p.nk, p.d, p.dk.token, p.vec);
  }
}

template <unsigned DP, unsigned RQ>
__host__ __device__ constexpr unsigned dq_smem_floats() {
  return (2 * 16 * RQ + 2 * kT) * (DP + 4) + 16 * RQ * kGS;
}

// dq for BQ = 16 RQ query rows per block, looping over key tiles of 64 in ascending order.
template <unsigned DP, unsigned RQ, bool EXACT>
__global__ void __launch_bounds__(kThreads, DP * RQ <= 256 ? 2 : 1)
    dq_kernel(GP p, const float *__restrict q, const float *__restrict k,
              const float *__restrict v, const float *__restrict dout,
              const float *__restrict lse, const float *__restrict D, float *__restrict dq) {
  constexpr unsigned BQ = 16 * RQ, SD = DP + 4, C4 = DP / 64;
  float *sm = async::dynamic_smem();
  float *qs = sm, *dos = qs + BQ * SD, *ks = dos + BQ * SD, *vs = ks + kT * SD, *dS = vs + kT * SD;
  // Row group rg: rows rg + 16 a; key lane kl (fast index): keys kl + 16 c of a tile, columns
  // 4 kl + 64 c4 + e of dq.
  const unsigned kl = threadIdx.x % 16, rg = threadIdx.x / 16;
  // With skipping, later query blocks visit more key tiles: they start first.
  const unsigned ib = (p.skip ? gridDim.x - 1 - blockIdx.x : blockIdx.x) * BQ;
  const unsigned jend = (unsigned)attn::key_end(p.skip, ib - ib % kT, p.nk, p.coff);
  const uint64_t dstride = (uint64_t)p.hq * p.d;
  zero_smem(sm, dq_smem_floats<DP, RQ>());
  for (unsigned y = blockIdx.y; y < p.batch * p.hq; y += gridDim.y) {
    const ProbRows pr(p, y);
    const float *kb = pr.k(p, k).p, *vb = pr.v(p, v).p, *mb = pr.mask(p);
    __syncthreads();  // zeroing, or the previous problem's readers, done
    // This thread's mask entries of key tile j0, into its own dS slots.
    auto load_mask = [&](unsigned j0) {
      copy_mask_slots<RQ, kGS, false>(dS, rg, kl, mb, p.nq, p.nk, ib, j0);
    };
    float L[RQ], Dr[RQ], g[RQ][C4][4];
    zero_acc(g);
#pragma unroll
    for (unsigned a = 0; a < RQ; ++a) {
      const unsigned i = ib + rg + 16 * a;
      L[a] = i < p.nq ? lse[(uint64_t)y * p.nq + i] : 0.0f;
      Dr[a] = i < p.nq ? D[((uint64_t)pr.b * p.nq + i) * p.hq + pr.h] : 0.0f;
    }
    if (jend > 0) {  // (block-uniform) otherwise no key tile: dq = 0
      bwd_problem_start<DP, BQ, EXACT>(p, ib, qs, pr.q(p, q), dos,
                                       RowsOf{dout + pr.tok(p), p.nq, dstride}, 0, vs,
                                       pr.v(p, v), ks, pr.k(p, k), load_mask);
      async::wait<1>();  // Q, dout, V tile 0, mask entries
      __syncthreads();
    }
    // Loop invariant at the top: V tile j0 visible in vs, this thread's mask entries in its dS
    // slots; K tile j0 in flight into ks.
    for (unsigned j0 = 0; j0 < jend; j0 += kT) {
      const bool more = j0 + kT < jend;
      float s[RQ][4], dp[RQ][4];
      dots<DP, EXACT, RQ, 4>(dos, rg, 16, vs, kl, 16, p.d, dp);
      async::wait<0>();  // K tile j0
      __syncthreads();   // visible; every read of vs done
      if (more) load_rows<DP, kT, EXACT>(vs, vb, j0 + kT, p.nk, p.d, p.v.token, p.vec);
      async::commit();
      dots<DP, EXACT, RQ, 4>(qs, rg, 16, ks, kl, 16, p.d, s);
      score_tile(!mb && ib + BQ <= p.nq && j0 + kT <= p.nk && below_diagonal(p, ib, j0 + kT - 1),
                 p.scale, s, [&](unsigned a, unsigned c, float dot) {
                   const unsigned i = ib + rg + 16 * a, j = j0 + kl + 16 * c;
                   const float m = mb ? dS[(rg + 16 * a) * kGS + kl + 16 * c] : 1.0f;
                   return (i < p.nq && j < p.nk) ? score_of(p, i, j, dot, m) : kNegInf;
                 });
#pragma unroll
      for (unsigned a = 0; a < RQ; ++a)
#pragma unroll
        for (unsigned c = 0; c < 4; ++c) {
          const unsigned at = (rg + 16 * a) * kGS + kl + 16 * c;
          const float sc = s[a][c];
          const float pr_ = attn::prob(sc, L[a]);
          dS[at] = sc == kNegInf ? 0.0f : pr_ * (dp[a][c] - Dr[a]);
        }
      __syncthreads();  // dS visible
      tile_axpy<DP, RQ, C4, kGS, 64>(dS, rg, 16, ks, 4 * kl, g);
      async::wait<0>();  // the next V tile
      __syncthreads();   // visible; every read of ks and dS done
      if (more) {
        load_rows<DP, kT, EXACT>(ks, kb, j0 + kT, p.nk, p.d, p.k.token, p.vec);
        load_mask(j0 + kT);
      }
      async::commit();
    }
    store_rows<RQ, C4, 64>(g, true, p.scale, dq + pr.b * p.dq.batch + pr.h * p.dq.head, ib + rg,
                           16, 4 * kl, p.nq, p.d, p.dq.token, p.vec);
  }
}

// ---- copies between views and the tensor-core kernels' contiguous layout ----------------------

// dst row (b, t, h) = the sum over r < R, ascending, of src row (b, t, (h R + r) / E) (R = 1: a
// copy, bit for bit; E > 1: each source head repeated E times; R > 1: R source heads summed, the
// first one first), for b < B, t < T, h < H; rows of d floats at b batch + t token + h head of each
// view. One thread per element, t fastest (both sides read and write rows contiguously); the
// tensor-core modes use it to pack strided views into (batch * hq, n, d) and back (gradients of
// grouped key / value heads summed). Moves (R + 1) B T H d floats.
struct Restride {
  uint64_t B, T, H, d;
  attn::View src, dst;
  unsigned R, E;
};

__global__ void __launch_bounds__(256)
    restride_kernel(Restride r, const float *__restrict src, float *__restrict dst) {
  const uint64_t rows = r.B * r.T * r.H;
  for (uint64_t e = (uint64_t)blockIdx.x * 256 + threadIdx.x; e < rows * r.d;
       e += (uint64_t)gridDim.x * 256) {
    const uint64_t t = e % r.d, row = e / r.d;
    const uint64_t h = row % r.H, tok = (row / r.H) % r.T, b = row / r.H / r.T;
    const float *from = src + b * r.src.batch + tok * r.src.token + t;
    float acc = from[(h * r.R) / r.E * r.src.head];
    for (unsigned i = 1; i < r.R; ++i) acc = acc + from[(h * r.R + i) / r.E * r.src.head];
    dst[b * r.dst.batch + tok * r.dst.token + h * r.dst.head + t] = acc;
  }
}

// ---- launch plan --------------------------------------------------------------------------------

inline bool aligned16(const void *ptr) { return ptr == nullptr || (uintptr_t)ptr % 16 == 0; }

inline KP kernel_view(const Problem &p, bool aligned) {
  return KP{(unsigned)p.n, (unsigned)p.d, (unsigned)p.bh, p.mask, p.mask_stride, p.scale, p.fill,
            p.causal, p.causal && p.fill == kNegInf, aligned && p.d % 4 == 0};
}

inline bool strides4(const attn::View &v) {
  return v.batch % 4 == 0 && v.token % 4 == 0 && v.head % 4 == 0;
}

// The exact kernels' view of a geometry (gradient views: gr, nullptr in the forward). aligned:
// every tensor pointer 16-byte aligned.
inline GP kernel_view(const attn::Geometry &g, const attn::Grads *gr, bool aligned) {
  const attn::View none{0, 0, 0};
  GP p{};
  p.nq = (unsigned)g.nq;
  p.nk = (unsigned)g.nk;
  p.d = (unsigned)g.d;
  p.hq = (unsigned)g.hq;
  p.hkv = (unsigned)g.hkv;
  p.group = (unsigned)g.group();
  p.batch = (unsigned)g.batch;
  p.q = g.q;
  p.k = g.k;
  p.v = g.v;
  p.dq = gr && gr->dq ? gr->q : none;
  p.dk = gr && gr->dk ? gr->k : none;
  p.dv = gr && gr->dv ? gr->v : none;
  p.mask = g.mask;
  p.mask_stride = g.mask_stride;
  p.scale = g.scale;
  p.fill = g.fill;
  p.coff = (int)g.causal_offset();
  p.causal = g.causal;
  p.skip = g.causal && g.fill == kNegInf;
  p.vec = aligned && g.d % 4 == 0 && strides4(p.q) && strides4(p.k) && strides4(p.v) &&
          strides4(p.dq) && strides4(p.dk) && strides4(p.dv);
  return p;
}

// Blocks along x; problems along y up to the launcher's limit (65535 on CUDA), the kernels loop
// over the rest.
template <class L>
dim3 grid_of(const L &launch, uint64_t blocks_x, uint64_t bh) {
  const uint64_t cap = launch.max_grid_y();
  return dim3((unsigned)blocks_x, (unsigned)(bh < cap ? bh : cap), 1);
}

// The plans' compile-time dispatch. with_tc_dp: f(std::integral_constant<unsigned, DP>) with DP =
// d rounded up to 32, 64 or 128 (1 <= d <= 128); with_flag: f(std::true_type) or
// f(std::false_type); with_tc_dp_exact: f(DP, exact) with exact = (d == DP). f's result is
// returned (one type for every instantiation).
template <class F>
auto with_tc_dp(uint64_t d, F &&f) {
  if (d <= 32) return f(std::integral_constant<unsigned, 32>());
  if (d <= 64) return f(std::integral_constant<unsigned, 64>());
  return f(std::integral_constant<unsigned, 128>());
}
template <class F>
auto with_flag(bool b, F &&f) {
  return b ? f(std::true_type()) : f(std::false_type());
}
template <class F>
auto with_tc_dp_exact(uint64_t d, F &&f) {
  return with_tc_dp(d, [&](auto dpc) {
    return with_flag(d == decltype(dpc)::value, [&](auto exactc) { return f(dpc, exactc); });
  });
}

// Each kernel has a variant with fewer rows per block for devices with less shared memory per
// block than sm_90's 227 KB (launch.smem_limit(); sm_80: 163 KB, sm_86/89: 99 KB).
template <unsigned DP, unsigned RM, bool EXACT, class L>
void fwd_launch(L &launch, const GP &kp, const float *q, const float *k, const float *v,
                float *out, float *lse) {
  constexpr unsigned BR = 32 * RM;
  launch("attention fwd_kernel", Kernel<fwd_kernel<DP, RM, EXACT>>(),
         grid_of(launch, (kp.nq + BR - 1) / BR, kp.batch * kp.hq), kThreads,
         fwd_smem_floats<DP, RM>() * sizeof(float), kp, q, k, v, out, lse);
}

// Forward: 64 query rows per block (RM = 2), except 128 (RM = 4) for d in 65 .. 128, where shared
// memory allows one block per SM either way and the larger block reuses each K, V tile twice as
// much (4 rows per thread for d <= 64 would need more than the 128 registers of two blocks).
template <unsigned DP, bool EXACT, class L>
void fwd_pick(L &launch, const GP &kp, const float *q, const float *k, const float *v,
              float *out, float *lse) {
  if constexpr (DP == 128)
    if (fwd_smem_floats<DP, 4>() * sizeof(float) <= launch.smem_limit())
      return fwd_launch<DP, 4, EXACT>(launch, kp, q, k, v, out, lse);
  fwd_launch<DP, 2, EXACT>(launch, kp, q, k, v, out, lse);
}

// dk / dv over blocks of keys of every (batch, key / value head); dq over blocks of query rows of
// every problem. A side without rows launches nothing.
template <unsigned DP, bool EXACT, class L>
void bwd_pick(L &launch, const GP &kp, const float *q, const float *k, const float *v,
              const float *dout, const float *lse, const float *D, float *dq, float *dk,
              float *dv) {
  constexpr unsigned R = DP == 256 ? 2 : 4;
  if ((dk || dv) && kp.nk > 0) {
    auto go = [&](auto rk) {
      constexpr unsigned RK = decltype(rk)::value;
      launch("attention dkdv_kernel", Kernel<dkdv_kernel<DP, RK, EXACT>>(),
             grid_of(launch, (kp.nk + 16 * RK - 1) / (16 * RK), kp.batch * kp.hkv), kThreads,
             dkdv_smem_floats<DP, RK>() * sizeof(float), kp, q, k, v, dout, lse, D, dk, dv);
    };
    if constexpr (DP != 256) {
      if (dkdv_smem_floats<DP, R>() * sizeof(float) > launch.smem_limit())
        go(std::integral_constant<unsigned, 2>());
      else
        go(std::integral_constant<unsigned, R>());
    } else {
      go(std::integral_constant<unsigned, R>());
    }
  }
  if (dq && kp.nq > 0)
    launch("attention dq_kernel", Kernel<dq_kernel<DP, R, EXACT>>(),
           grid_of(launch, (kp.nq + 16 * R - 1) / (16 * R), kp.batch * kp.hq), kThreads,
           dq_smem_floats<DP, R>() * sizeof(float), kp, q, k, v, dout, lse, D, dq);
}

// The head dimension rounded up to a kernel's DP (the backward's layouts need DP >= 64).
inline unsigned fwd_dp(uint64_t d) { return d <= 32 ? 32 : d <= 64 ? 64 : d <= 128 ? 128 : 256; }
inline unsigned bwd_dp(uint64_t d) { return d <= 64 ? 64 : d <= 128 ? 128 : 256; }

// The exact forward of a geometry (batch, hq >= 1; nq >= 1; nk >= 0): out (token-major) and lse.
template <class L>
void fwd_plan(L &launch, const attn::Geometry &g, const float *q, const float *k, const float *v,
              float *out, float *lse) {
  const GP kp = kernel_view(g, nullptr, aligned16(q) && aligned16(k) && aligned16(v) &&
                                            aligned16(out));
  auto go = [&](auto dpc) {
    constexpr unsigned DP = decltype(dpc)::value;
    if (g.d == DP)
      fwd_pick<DP, true>(launch, kp, q, k, v, out, lse);
    else
      fwd_pick<DP, false>(launch, kp, q, k, v, out, lse);
  };
  switch (fwd_dp(g.d)) {
    case 32: return go(std::integral_constant<unsigned, 32>());
    case 64: return go(std::integral_constant<unsigned, 64>());
    case 128: return go(std::integral_constant<unsigned, 128>());
    default: return go(std::integral_constant<unsigned, 256>());
  }
}

// The contiguous problem as a geometry: bh sequences of one head of n rows.
inline attn::Geometry geometry_of(const Problem &p) {
  attn::Geometry g{};
  g.batch = p.bh;
  g.hq = g.hkv = 1;
  g.nq = g.nk = p.n;
  g.d = p.d;
  g.q = g.k = g.v = attn::View{p.n * p.d, p.d, p.d};
  g.mask = p.mask;
  g.mask_stride = p.mask_stride;
  g.scale = p.scale;
  g.fill = p.fill;
  g.causal = p.causal;
  return g;
}

// The exact forward of a contiguous problem.
template <class L>
void fwd_plan(L &launch, const Problem &p, const float *q, const float *k, const float *v,
              float *out, float *lse) {
  fwd_plan(launch, geometry_of(p), q, k, v, out, lse);
}

// D = rowsum(dout * out) into bh n floats, D[b n + i] from row i of problem b of out and dout
// (where om and dm say; d_kernel).
template <class L>
void d_map_plan(L &launch, uint64_t bh, uint64_t n, uint64_t d, const float *out, attn::RowMap om,
                const float *dout, attn::RowMap dm, float *D) {
  const uint64_t rows = bh * n, blocks = (rows + 255) / 256;
  const bool vec = aligned16(out) && aligned16(dout) && d % 4 == 0 && om.rows_vec4() &&
                   dm.rows_vec4();
  launch("attention d_kernel", Kernel<d_kernel>(),
         dim3((unsigned)(blocks < 65535 ? blocks : 65535)), 256u, size_t(0), out, om, dout, dm, n,
         rows, (unsigned)d, vec, D);
}

// D = rowsum(dout * out) into `rows` floats, the rows of out in memory order.
template <class L>
void d_rows_plan(L &launch, uint64_t rows, uint64_t d, const float *out, const float *dout,
                 float *D) {
  const attn::RowMap m = attn::packed_rows(rows, d);
  d_map_plan(launch, 1, rows, d, out, m, dout, m, D);
}

// D of a contiguous problem: bh * n floats.
template <class L>
void d_plan(L &launch, const Problem &p, const float *out, const float *dout, float *D) {
  d_rows_plan(launch, p.bh * p.n, p.d, out, dout, D);
}

// The exact backward of a geometry: D (batch * nq * hq floats of scratch, token-major, read only
// when dq or dk is wanted) is computed here first.
template <class L>
void bwd_plan(L &launch, const attn::Geometry &g, const float *q, const float *k, const float *v,
              const float *out, const float *dout, const float *lse, float *D,
              const attn::Grads &gr) {
  const GP kp = kernel_view(g, &gr, aligned16(q) && aligned16(k) && aligned16(v) &&
                                        aligned16(dout) && aligned16(out) && aligned16(gr.dq) &&
                                        aligned16(gr.dk) && aligned16(gr.dv));
  if ((gr.dq || gr.dk) && g.nq > 0) d_rows_plan(launch, g.batch * g.nq * g.hq, g.d, out, dout, D);
  auto go = [&](auto dpc) {
    constexpr unsigned DP = decltype(dpc)::value;
    if (g.d == DP)
      bwd_pick<DP, true>(launch, kp, q, k, v, dout, lse, D, gr.dq, gr.dk, gr.dv);
    else
      bwd_pick<DP, false>(launch, kp, q, k, v, dout, lse, D, gr.dq, gr.dk, gr.dv);
  };
  switch (bwd_dp(g.d)) {
    case 64: return go(std::integral_constant<unsigned, 64>());
    case 128: return go(std::integral_constant<unsigned, 128>());
    default: return go(std::integral_constant<unsigned, 256>());
  }
}

// restride_kernel over the whole of r (nothing when it is empty).
template <class L>
void restride_plan(L &launch, const Restride &r, const float *src, float *dst) {
  const uint64_t n = r.B * r.T * r.H * r.d;
  if (n == 0) return;
  const uint64_t blocks = (n + 255) / 256;
  launch("attention restride_kernel", Kernel<restride_kernel>(),
         dim3((unsigned)(blocks < (1u << 20) ? blocks : (1u << 20))), 256u, size_t(0), r, src,
         dst);
}

}  // namespace attn_kernels
}  // namespace cuda
}  // namespace tlrt
