// Device code of the TF32 attention path (cuda/attention.cu picks it, SPLIT = false, when
// allow_tf32 is on and the determinism switch off; the split mode is not dispatched, see the
// measurements below): a FlashAttention-2 forward and backward whose products (forward S = Q K^T, O += P V;
// backward dP, S, dv, dk, dq) run on the tensor cores through WMMA (m16n16k8, precision::tf32, float accumulators; sm_80+), with
// float32-grade accuracy by "split TF32": every product a b is big(a) big(b) + big(a) small(b) +
// small(a) big(b), big(x) = x rounded to TF32 (cvt.rna), small(x) = tf32(x - big(x)); the dropped
// small(a) small(b) and the residues below small are ~2^-22 of |a b|. With allow_tf32 (SPLIT =
// false) only big(a) big(b) is formed (the TF32 path). The online softmax (max, exp, sum, rescale)
// stays float32 SIMT code on the S tile in shared memory, with the shared tlrt::math exp / log.
// The CPU emulator test tests/unit/test_attention_tc_emu.cpp runs this very source (with a WMMA
// emulation in tests/emu/cuda_emu.hpp) against a float64 reference.
//
// fwd_tc_kernel<DP, SPLIT, EXACT>: one block of 256 threads (8 warps) per (problem, 128 query
// rows); warp w owns rows 16 w .. 16 w + 15 of the block end to end (its S strip, its softmax
// state, its O accumulators), so the only block-wide barriers are those of the K / V tiles,
// which arrive by cp.async (the same load_tile as the exact kernels; zero fill past n, padding
// columns d .. DP - 1 zero) in single buffers refilled as soon as their readers are past a barrier.
// Per 64-key tile and warp: S (16 x 64) = Q K^T as 4 accumulator fragments over DP / 8 k-steps
// (3 mma each with SPLIT), stored to the warp's rows of the S tile; the softmax lanes (two per
// row, keys h + 2 c) take scores, masks and the row max / sum there and write P in place; the
// per-row alpha goes through shared memory to the O fragments, whose element-to-row map is read
// once from a fragment loaded from a (16 x 16) "row index" matrix (WMMA's layout stays opaque);
// then O (16 x DP) += P V over 8 k-steps. At the end O / l is stored through the warp's own Q rows
// (then re-zeroed padding) to out, and lse = m + log(l) (l = 0: out 0, lse = -inf).
// With causal and mask_fill = -inf a block stops at its diagonal and a warp leaves out the tiles
// whose first key is past its last row (a skipped tile adds nothing); the blocks with most tiles
// start first. d <= 128 here (DP = 32, 64, 128: d rounded up); d > 128 and devices below sm_80
// or with too little shared memory take the exact SIMT kernels.
// Cost per 64-key tile and warp (DP = 64, SPLIT): 2 x 8 k-steps x 4 n-tiles x 3 = 192 wmma
// m16n16k8 (384 hardware m16n8k8, 2^19 MACs... of which 1/3 useful), ~480 split instructions per
// product (cvt, sub, cvt on every fragment element; the A fragment reused over 4 n-tiles), ~500
// softmax instructions, ~300 shared loads/stores. Shared memory (floats): Q 128 (DP + 4), K and V
// 64 (DP + 4) each, S 128 x 68, row index 256, alpha / l 128: DP = 64: 106 KB (two blocks per
// SM), DP = 128: 171 KB (one), DP = 32: 73 KB.
// PREDICTION (H100 SXM, TF32 off, benchmark's 4 n^2 d count; tensor-core bound at ~55% of
// mma.sync's TF32 rate, three products): ~40 TFLOP/s useful (was 14-30 SIMT):
//   fwd (32,1024,64) none ~40 TFLOP/s (~0.38x SDPA), causal ~28 (~0.21x), masked ~34 (~0.44x);
//   fwd (16,4096,64) none ~44 (~0.37x), causal ~34 (~0.22x), masked ~38 (~0.46x);
//   fwd (32,1024,128) none ~45 (~0.50x), causal ~30 (~0.28x), masked ~40 (~0.55x).
// allow_tf32 (one product): ~1.8x those TFLOP/s.
// MEASURED (H100, 2026-11-24, bench/results/2026-11-24-h100-attention-tc.md; SDPA fp32 times):
//   split TF32 fwd (32,1024,64) none 21.8 TFLOP/s (0.68x SDPA; exact kernels 22.4), causal 11.0
//   (0.54x; exact 0.42x), masked 17.2 (0.70x); (16,4096,64) 22.6 / 15.8 / 18.2; (32,1024,128)
//   24.2 / 14.0 / 18.7 (0.96x / 0.70x / 1.04x): at or below the exact SIMT kernels everywhere,
//   half the prediction or less. TF32 (one product): 33.5 / 16.8 / 23.6 TFLOP/s at (32,1024,64)
//   (0.44x / 0.36x / 0.51x SDPA), 35.1 / 22.9 / 24.8 at (16,4096,64), 36.5 / 20.7 / 26.5 at
//   (32,1024,128): 1.0-1.5x the exact kernels. The tensor cores are not the limit: each warp
//   splits its operand fragments itself (cvt, sub, cvt per element, per use) and every product
//   goes through store_matrix_sync / shared memory for the softmax; see the next steps below.
//
// Backward (after the exact D kernel: D = rowsum(dout * out), an fma chain per row):
// dkdv_tc_kernel<DP, SPLIT, EXACT>: one block of 8 warps per (problem, 128 keys; warp w: keys
// 16 w ..), K and V rows resident, looping over query tiles of T = 64 (32 for DP = 128, shared
// memory) from the one reaching the diagonal when skipping: per tile and warp dP^T = V dout^T (dk
// only) and S^T = K Q^T as accumulator fragments; P^T = exp(s - lse) and dS^T = P^T (dP^T - D)
// element-wise IN the fragments, each element's (key, query) read from row / column index
// fragments (loaded from two 16 x 16 index matrices; WMMA's layout stays opaque), lse and D of
// the tile's queries from shared memory (cp.async with the dout tile); P^T and dS^T to the warp's
// two strips, dv += P^T dout, dk += dS^T Q. A warp leaves out the tiles whose last query precedes
// its first key (skipping). dq_tc_kernel<DP, SPLIT, EXACT>: one block per (problem, 128 query
// rows), Q and dout rows resident, looping over key tiles of T: dP = dout V^T, S = Q K^T, dS
// element-wise in the fragments (lse, D of the warp's rows from shared memory), dS to the warp's
// strip, dq += dS K. Results are staged through the warp's own (no longer needed) input rows and
// copied out row-major; padding columns are re-zeroed. FLOPs 8 n^2 d (dk/dv) + 6 n^2 d (dq), as
// the exact kernels (the benchmark counts 10 n^2 d), three tensor products each with SPLIT.
// Shared memory: dq 91 / 139 / 186 KiB, dk/dv 125 / 173 / 203 KiB for DP = 32 / 64 / 128: one
// block (8 warps) per SM; registers 146-188 (dq), 167-254 (dk/dv), no spills (sm_90, ptxas).
// PREDICTION (H100, benchmark's 10 n^2 d count; one block of 8 warps per SM hides less latency
// than the forward, and every warp splits the shared B operands itself): ~22-25 TFLOP/s split:
//   bwd (32,1024,64) none ~24 TFLOP/s (~1.2x SDPA; exact 1.43x), causal ~18 (~0.8x), masked ~20
//   (~1.4x; the mask is read per fragment element from global memory);
//   bwd (16,4096,64) none ~25 (~1.25x), causal ~20 (~0.8x), masked ~21 (~1.5x);
//   bwd (32,1024,128) none ~22 (~1.8x), causal ~17 (~1.2x), masked ~20 (~2.0x);
// allow_tf32: ~1.8x those TFLOP/s (~0.65-1.0x SDPA). So the split path is NOT predicted to reach
// the issue's 0.7x backward target; the next steps would be splitting each shared K / V / Q /
// dout tile once per block into big / small tiles in shared memory (8x fewer split
// instructions), mask bits per tile instead of per-element global loads, and raw mma.sync with
// register-resident operands.
// MEASURED (H100, 2026-11-24): split TF32 bwd 15.4 / 8.9 / 11.6 TFLOP/s at (32,1024,64) none /
//   causal / masked (1.93x / 1.44x / 2.53x SDPA; exact 1.46x / 0.98x / 1.57x), 16.2 / 12.7 /
//   11.6 at (16,4096,64), 16.8 / 10.0 / 14.1 at (32,1024,128): slower than the exact kernels.
//   TF32: 24.1 / 13.8 / 16.1 at (32,1024,64) (1.23x / 0.93x / 1.82x), 26.0 / 20.0 / 15.9 at
//   (16,4096,64), 27.4 / 15.7 / 20.7 at (32,1024,128): faster than exact except masked (the
//   per-element mask loads), so a masked backward stays on the exact kernels.
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
constexpr unsigned kSS = kT + 4;    // row stride of the S / P tile (a multiple of 4 for WMMA)

using FragA = wmma::fragment<wmma::matrix_a, 16, 16, 8, wmma::precision::tf32, wmma::row_major>;
using FragBc = wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::col_major>;
using FragBr = wmma::fragment<wmma::matrix_b, 16, 16, 8, wmma::precision::tf32, wmma::row_major>;
using FragC = wmma::fragment<wmma::accumulator, 16, 16, 8, float>;

// big <- tf32(x), small <- tf32(x - big) element-wise (x = big on entry); with !SPLIT only big.
template <bool SPLIT, class F>
__device__ __forceinline__ void split_frag(F &big, F &small) {
#pragma unroll
  for (int e = 0; e < F::num_elements; ++e) {
    const float x = big.x[e];
    const float b = wmma::__float_to_tf32(x);
    big.x[e] = b;
    if (SPLIT) small.x[e] = wmma::__float_to_tf32(x - b);
  }
}

// acc += a b in split TF32 (the two small terms first) or plain TF32.
template <bool SPLIT, class FA, class FB>
__device__ __forceinline__ void mma3(FragC &acc, const FA &ab, const FA &as, const FB &bb,
                                     const FB &bs) {
  if (SPLIT) {
    wmma::mma_sync(acc, as, bb, acc);
    wmma::mma_sync(acc, ab, bs, acc);
  }
  wmma::mma_sync(acc, ab, bb, acc);
}

template <unsigned DP>
__host__ __device__ constexpr unsigned fwd_tc_smem_floats() {
  return (kTcRows + 2 * kT) * (DP + 4) + kTcRows * kSS + 256 + kTcRows;
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

template <unsigned DP, bool SPLIT, bool EXACT>
__global__ void __launch_bounds__(kThreads, DP <= 64 ? 2 : 1)
    fwd_tc_kernel(KP p, const float *__restrict q, const float *__restrict k,
                  const float *__restrict v, float *__restrict out, float *__restrict lse) {
#if defined(TLRT_CUDA_EMULATION) || !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
  constexpr unsigned BR = kTcRows, SD = DP + 4, NT = DP / 16;
  float *sm = async::dynamic_smem();
  float *qs = sm, *ks = qs + BR * SD, *vs = ks + kT * SD, *ss = vs + kT * SD;
  float *rowidx = ss + BR * kSS, *rowval = rowidx + 256;
  const unsigned w = threadIdx.x / 32, lane = lane_id();
  // Softmax lanes: row r of the warp's 16, keys h + 2 c (c < 32) of a tile.
  const unsigned r = lane / 2, h = lane % 2;
  float *srow = ss + (16 * w + r) * kSS;        // this lane's row of the S / P tile
  float *sw = ss + 16 * w * kSS;                // the warp's S strip
  float *rv = rowval + 16 * w;                  // the warp's per-row alpha, then l
  const unsigned i0 = (p.skip ? gridDim.x - 1 - blockIdx.x : blockIdx.x) * BR;
  const unsigned iw = i0 + 16 * w;              // the warp's first row
  const unsigned i = iw + r;                    // this lane's softmax row
  const unsigned jend = p.skip ? min(p.n, i0 + BR) : p.n;
  zero_smem(sm, fwd_tc_smem_floats<DP>());
  __syncthreads();
  for (unsigned e = threadIdx.x; e < 256; e += kThreads) rowidx[e] = (float)(e / 16);
  __syncthreads();
  for (uint64_t b = blockIdx.y; b < p.bh; b += gridDim.y) {
    const uint64_t base = b * p.n * p.d;
    const float *mb = p.mask ? p.mask + b * p.mask_stride : nullptr;
    __syncthreads();  // the previous problem's readers done
    load_tile<DP, BR, EXACT>(qs, q + base, i0, p.n, p.d, p.vec);
    load_tile<DP, kT, EXACT>(ks, k + base, 0, p.n, p.d, p.vec);
    async::commit();
    load_tile<DP, kT, EXACT>(vs, v + base, 0, p.n, p.d, p.vec);
    async::commit();
    float m = kNegInf, l = 0.0f;  // row i's state (both lanes of the row keep it)
    FragC o[NT];
#pragma unroll
    for (unsigned nt = 0; nt < NT; ++nt) wmma::fill_fragment(o[nt], 0.0f);
    async::wait<1>();  // Q, K tile 0
    __syncthreads();
    // Loop invariant at the top: K tile j0 visible in ks; V tile j0 in flight into vs.
    for (unsigned j0 = 0; j0 < jend; j0 += kT) {
      const bool more = j0 + kT < jend;
      // The warp visits the tile unless its rows are past n or (skipping) all before j0.
      const bool active = iw < p.n && !(p.skip && j0 > iw + 15);
      if (active) {
        // This lane's blocked mask entries of the tile as bits (c: key j0 + h + 2 c).
        unsigned blk = 0;
        if (mb && i < p.n)
#pragma unroll 8
          for (unsigned c = 0; c < 32; ++c) {
            const unsigned j = j0 + h + 2 * c;
            if (j < p.n && mb[(uint64_t)i * p.n + j] == 0.0f) blk |= 1u << c;
          }
        FragC s[4];
#pragma unroll
        for (unsigned nt = 0; nt < 4; ++nt) wmma::fill_fragment(s[nt], 0.0f);
#pragma unroll 1
        for (unsigned t = 0; t < DP; t += 8) {
          FragA ab, as;
          wmma::load_matrix_sync(ab, qs + 16 * w * SD + t, SD);
          split_frag<SPLIT>(ab, as);
#pragma unroll
          for (unsigned nt = 0; nt < 4; ++nt) {
            FragBc bb, bs;
            wmma::load_matrix_sync(bb, ks + 16 * nt * SD + t, SD);
            split_frag<SPLIT>(bb, bs);
            mma3<SPLIT>(s[nt], ab, as, bb, bs);
          }
        }
#pragma unroll
        for (unsigned nt = 0; nt < 4; ++nt)
          wmma::store_matrix_sync(sw + 16 * nt, s[nt], kSS, wmma::mem_row_major);
        __syncwarp();
        // Online softmax of row i over the tile's keys (out-of-range rows / keys: excluded).
        const bool plain = !mb && iw + 15 < p.n && j0 + kT <= p.n && !(p.causal && j0 + kT - 1 > iw);
        float mt = kNegInf;
#pragma unroll
        for (unsigned c = 0; c < 32; ++c) {
          const unsigned j = j0 + h + 2 * c;
          const float dot = srow[h + 2 * c];
          float x;
          if (plain)
            x = dot * p.scale;
          else
            x = (i < p.n && j < p.n)
                    ? attn::score(dot, (p.causal && j > i) || ((blk >> c) & 1u), p.scale, p.fill)
                    : kNegInf;
          srow[h + 2 * c] = x;  // the score, in place (registers are short)
          mt = attn::amax(mt, x);
        }
        const float mn = attn::amax(m, attn::amax(mt, __shfl_xor_sync(kFull, mt, 1)));
        const float alpha = mn == kNegInf ? 1.0f : math::exp_f(m - mn);
        float rs = 0.0f;
#pragma unroll
        for (unsigned c = 0; c < 32; ++c) {
          const float pr = attn::prob(srow[h + 2 * c], mn);
          rs = rs + pr;
          srow[h + 2 * c] = pr;
        }
        rs = rs + __shfl_xor_sync(kFull, rs, 1);
        l = l * alpha + rs;
        m = mn;
        if (h == 0) rv[r] = alpha;
        __syncwarp();
        // O rows scaled by their alpha. rowf: which row of the warp's 16 each accumulator element
        // holds (the same for every fragment), loaded when needed (registers are short).
        FragC rowf;
        wmma::load_matrix_sync(rowf, rowidx, 16, wmma::mem_row_major);
#pragma unroll
        for (int e = 0; e < FragC::num_elements; ++e) {
          const float al = rv[(unsigned)rowf.x[e]];
#pragma unroll
          for (unsigned nt = 0; nt < NT; ++nt) o[nt].x[e] = o[nt].x[e] * al;
        }
      }
      async::wait<0>();  // V tile j0
      __syncthreads();   // V visible; every read of ks done
      if (more) load_tile<DP, kT, EXACT>(ks, k + base, j0 + kT, p.n, p.d, p.vec);
      async::commit();
      if (active) {
#pragma unroll 1
        for (unsigned jj = 0; jj < kT; jj += 8) {
          FragA ab, as;
          wmma::load_matrix_sync(ab, sw + jj, kSS);
          split_frag<SPLIT>(ab, as);
#pragma unroll
          for (unsigned nt = 0; nt < NT; ++nt) {
            FragBr bb, bs;
            wmma::load_matrix_sync(bb, vs + jj * SD + 16 * nt, SD);
            split_frag<SPLIT>(bb, bs);
            mma3<SPLIT>(o[nt], ab, as, bb, bs);
          }
        }
      }
      async::wait<0>();  // the next K tile
      __syncthreads();   // visible; every read of vs done
      if (more) load_tile<DP, kT, EXACT>(vs, v + base, j0 + kT, p.n, p.d, p.vec);
      async::commit();
    }
    // out = O / l, lse = m + log(l); a row with every key excluded (l == 0): out 0, lse -inf.
    if (iw < p.n) {
      if (h == 0) rv[r] = l;
      if (h == 0 && i < p.n) lse[b * p.n + i] = l == 0.0f ? kNegInf : m + math::log_f(l);
      __syncwarp();
      FragC rowf;
      wmma::load_matrix_sync(rowf, rowidx, 16, wmma::mem_row_major);
#pragma unroll
      for (int e = 0; e < FragC::num_elements; ++e) {
        const float le = rv[(unsigned)rowf.x[e]];
#pragma unroll
        for (unsigned nt = 0; nt < NT; ++nt) o[nt].x[e] = le == 0.0f ? 0.0f : o[nt].x[e] / le;
      }
      float *qw = qs + 16 * w * SD;  // the warp's own Q rows, no longer needed
#pragma unroll
      for (unsigned nt = 0; nt < NT; ++nt)
        wmma::store_matrix_sync(qw + 16 * nt, o[nt], SD, wmma::mem_row_major);
      __syncwarp();
      // Staged in the warp's Q rows, whose padding columns must stay zero for the next problem.
      warp_rows_out<DP, EXACT>(qw, out + base, iw, p);
    }
  }
#endif
}

// ---- backward ------------------------------------------------------------------------------------

// acc[nt] += A B for a warp's 16-row strip: A (16 x KD) row-major at a (row stride lda); B
// (KD x 16 NTN) with element (kk, c) at b[c * ldb + kk] when BCOL (a row-major (16 NTN, KD) tile
// used transposed: K^T, V^T, Q^T, dout^T) or at b[kk * ldb + c] (a row-major (KD, 16 NTN) tile).
template <bool SPLIT, bool BCOL, unsigned KD, unsigned NTN>
__device__ __forceinline__ void strip_mma(FragC (&acc)[NTN], const float *a, unsigned lda,
                                          const float *b, unsigned ldb) {
#pragma unroll 1
  for (unsigned kk = 0; kk < KD; kk += 8) {
    FragA ab, as;
    wmma::load_matrix_sync(ab, a + kk, lda);
    split_frag<SPLIT>(ab, as);
#pragma unroll
    for (unsigned nt = 0; nt < NTN; ++nt) {
      if constexpr (BCOL) {
        FragBc bb, bs;
        wmma::load_matrix_sync(bb, b + 16 * nt * ldb + kk, ldb);
        split_frag<SPLIT>(bb, bs);
        mma3<SPLIT>(acc[nt], ab, as, bb, bs);
      } else {
        FragBr bb, bs;
        wmma::load_matrix_sync(bb, b + kk * ldb + 16 * nt, ldb);
        split_frag<SPLIT>(bb, bs);
        mma3<SPLIT>(acc[nt], ab, as, bb, bs);
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

// Inner tile (keys in dq, queries in dk / dv) of the fast backward: 64, or 32 for DP = 128 (shared
// memory).
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
template <unsigned DP, bool SPLIT, bool EXACT>
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
        strip_mma<SPLIT, true, DP, NS>(dp, dos + 16 * w * SD, SD, vs, SD);
      }
      async::wait<0>();  // K tile j0
      __syncthreads();   // visible; every read of vs done
      if (more) load_tile<DP, T, EXACT>(vs, v + base, j0 + T, p.n, p.d, p.vec);
      async::commit();
      if (active) {
        strip_mma<SPLIT, true, DP, NS>(s, qs + 16 * w * SD, SD, ks, SD);
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
        strip_mma<SPLIT, false, T, NT>(g, sw, ST, ks, SD);
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
template <unsigned DP, bool SPLIT, bool EXACT>
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
        if (want_k) strip_mma<SPLIT, true, DP, NS>(dpt, vs + 16 * w * SD, SD, dos, SD);
      }
      async::wait<0>();  // Q tile i0
      __syncthreads();
      if (active) {
        strip_mma<SPLIT, true, DP, NS>(st, ks + 16 * w * SD, SD, qs, SD);
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
        if (want_v) strip_mma<SPLIT, false, T, NT>(gv, sw, ST, dos, SD);
      }
      __syncthreads();  // every read of dos, lq, dq_ done
      if (more) {
        load_tile<DP, T, EXACT>(dos, dout + base, i0 + T, p.n, p.d, p.vec);
        load_rows(i0 + T);
      }
      async::commit();
      if (active && want_k) strip_mma<SPLIT, false, T, NT>(gk, sw2, ST, qs, SD);
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

// The fast backward's launches (D, then dk / dv, then dq), or false (nothing launched) where it
// does not apply (as fwd_tc_plan). D: bh * n floats of scratch, read only when dq or dk is wanted.
template <class L>
bool bwd_tc_plan(L &launch, const Problem &p, bool split, const float *q, const float *k,
                 const float *v, const float *out, const float *dout, const float *lse, float *D,
                 float *dq, float *dk, float *dv) {
  if (p.d == 0 || p.d > 128) return false;
  const size_t need = with_tc_dp(p.d, [](auto dpc) -> size_t {
    constexpr unsigned DP = decltype(dpc)::value;
    return dq_tc_smem_floats<DP>() > dkdv_tc_smem_floats<DP>() ? dq_tc_smem_floats<DP>()
                                                               : dkdv_tc_smem_floats<DP>();
  });
  if (need * sizeof(float) > launch.smem_limit()) return false;
  const KP kp = kernel_view(p, aligned16(q) && aligned16(k) && aligned16(v) && aligned16(dout) &&
                                   aligned16(out) && aligned16(dq) && aligned16(dk) &&
                                   aligned16(dv));
  const uint64_t rows = p.bh * p.n;
  if (dq || dk) {
    const uint64_t blocks = (rows + 255) / 256;
    launch("attention d_kernel", d_kernel, dim3((unsigned)(blocks < 65535 ? blocks : 65535)), 256u,
           size_t(0), out, dout, rows, (unsigned)p.d, kp.vec, D);
  }
  const dim3 grid = grid_of(launch, (kp.n + kTcRows - 1) / kTcRows, kp.bh);
  auto go = [&](auto dpc, auto splitc, auto exactc) {
    constexpr unsigned DP = decltype(dpc)::value;
    constexpr bool S = decltype(splitc)::value, E = decltype(exactc)::value;
    if (dk || dv)
      launch("attention dkdv_tc_kernel", dkdv_tc_kernel<DP, S, E>, grid, kThreads,
             dkdv_tc_smem_floats<DP>() * sizeof(float), kp, q, k, v, dout, lse,
             (const float *)D, dk, dv);
    if (dq)
      launch("attention dq_tc_kernel", dq_tc_kernel<DP, S, E>, grid, kThreads,
             dq_tc_smem_floats<DP>() * sizeof(float), kp, q, k, v, dout, lse, (const float *)D,
             dq);
    return true;
  };
  return with_tc_dp_flags(p.d, split, go);
}

// The fast forward's launch, or false (nothing launched) where it does not apply: d == 0 or
// d > 128, or too little shared memory per block (the caller runs the exact kernels then).
template <class L>
bool fwd_tc_plan(L &launch, const Problem &p, bool split, const float *q, const float *k,
                 const float *v, float *out, float *lse) {
  if (p.d == 0 || p.d > 128) return false;
  const KP kp = kernel_view(p, aligned16(q) && aligned16(k) && aligned16(v) && aligned16(out));
  auto go = [&](auto dpc, auto splitc, auto exactc) {
    constexpr unsigned DP = decltype(dpc)::value;
    constexpr size_t bytes = fwd_tc_smem_floats<DP>() * sizeof(float);
    if (bytes > launch.smem_limit()) return false;
    launch("attention fwd_tc_kernel",
           fwd_tc_kernel<DP, decltype(splitc)::value, decltype(exactc)::value>,
           grid_of(launch, (kp.n + kTcRows - 1) / kTcRows, kp.bh), kThreads, bytes, kp, q, k, v,
           out, lse);
    return true;
  };
  return with_tc_dp_flags(p.d, split, go);
}

}  // namespace attn_kernels
}  // namespace cuda
}  // namespace tlrt
