// Device code of the FAST attention path (cuda/attention.cu picks it when the determinism switch
// is off): a FlashAttention-2 forward whose two products (S = Q K^T and O += P V) run on the
// tensor cores through WMMA (m16n16k8, precision::tf32, float accumulators; sm_80+), with
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
// allow_tf32 (one product): ~1.8x those TFLOP/s. Measured: (pending GPU run).
#pragma once

#include "cuda/attention_kernels.cuh"
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
      const unsigned rows = min(16u, p.n - iw);
      float *ob = out + base + (uint64_t)iw * p.d;
      if (p.vec) {
        const unsigned d4 = p.d / 4;
        for (unsigned e = lane; e < rows * d4; e += 32) {
          const unsigned rr = e / d4, c = e % d4;
          st4(ob + (uint64_t)rr * p.d + 4 * c, ld4(qw + rr * SD + 4 * c));
        }
      } else {
        for (unsigned e = lane; e < rows * p.d; e += 32) {
          const unsigned rr = e / p.d, c = e % p.d;
          ob[(uint64_t)rr * p.d + c] = qw[rr * SD + c];
        }
      }
      // The padding columns d .. DP - 1 of Q must stay zero for the next problem.
      if (!EXACT)
        for (unsigned e = lane; e < 16 * (DP - p.d); e += 32)
          qw[(e / (DP - p.d)) * SD + p.d + e % (DP - p.d)] = 0.0f;
    }
  }
#endif
}

// The fast forward's launch, or false (nothing launched) where it does not apply: d == 0 or
// d > 128, or too little shared memory per block (the caller runs the exact kernels then).
template <class L>
bool fwd_tc_plan(L &launch, const Problem &p, bool split, const float *q, const float *k,
                 const float *v, float *out, float *lse) {
  if (p.d == 0 || p.d > 128) return false;
  const KP kp = kernel_view(p, aligned16(q) && aligned16(k) && aligned16(v) && aligned16(out));
  const unsigned dp = p.d <= 32 ? 32 : p.d <= 64 ? 64 : 128;
  const bool exact = dp == p.d;
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
  using T = std::true_type;
  using F = std::false_type;
  auto by_flags = [&](auto dpc) {
    if (split)
      return exact ? go(dpc, T{}, T{}) : go(dpc, T{}, F{});
    return exact ? go(dpc, F{}, T{}) : go(dpc, F{}, F{});
  };
  switch (dp) {
    case 32: return by_flags(std::integral_constant<unsigned, 32>());
    case 64: return by_flags(std::integral_constant<unsigned, 64>());
    default: return by_flags(std::integral_constant<unsigned, 128>());
  }
}

}  // namespace attn_kernels
}  // namespace cuda
}  // namespace tlrt
