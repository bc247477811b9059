// The fast attention BACKWARD of cuda/attention.cu: FlashAttention-2's two-kernel form on
// warp-level TF32 tensor-core products with REGISTER fragments (cuda/mma_tf32.cuh, mma.sync
// m16n8k8), either float32-grade by three products per product (SPLIT: small parts first, then
// big x big; the default path, determinism switch off) or one TF32 product (!SPLIT: the opt-in
// TF32 path). The same source runs on the CPU emulator in
// tests/unit/test_attention_mma_bwd_emu.cpp.
//
// d_kernel (cuda/attention_kernels.cuh): D[i] = rowsum(dout * out), as the exact path.
// dkdv_mma_kernel<DP, SPLIT>: one block of 4 warps per (problem, 64 keys); warp w owns keys
//   jb + 16 w .. + 15 and holds dK and dV of them in C fragments (DP / 8 n-tiles x 4 registers
//   each: 64 registers for d = 64, 128 for d = 128). K and V rows of the block stay in shared
//   memory; query tiles of 64 (Q, dout, lse, D, and the mask tile when there is one) stream
//   through a two-stage cp.async pipeline (one stage where shared memory is short). Per tile and
//   chunk of QC queries (64 for d <= 64, 32 for d = 128: registers): S^T = K Q^T and
//   dP^T = V dout^T
//   in C fragments (A = K / V rows, B = Q / dout rows, both straight from padded row-major tiles),
//   P^T = exp(S^T - lse) and dS^T = P^T (dP^T - D) in place on the fragments (the same per-element
//   formulas as the exact path: attn::score / attn::prob), then dV += P^T dout and dK += dS^T Q
//   with the C fragments used directly as A operands (mma::c_as_a: the query index of the
//   contraction permuted, so the B operand rows are read as 2t, 2t + 1; no shuffles).
// dq_mma_kernel<DP, SPLIT>: one block of 4 warps per (problem, 64 query rows); warp w owns rows
//   ib + 16 w .. + 15 and dQ in C fragments; Q and dout rows stay in shared memory; key tiles of 64
//   (K, V, the mask tile) stream as above. Per tile: S = Q K^T, dP = dout V^T, dS = P (dP - D),
//   dQ += dS K (dS's C fragments as A operands, K rows read permuted).
// Shared tiles have rows of DP + 4 floats (DP = d rounded up to 32, 64, 128; zero columns past
// d), so every fragment read pattern (A: rows g, columns t; B: rows g, columns t; permuted B: rows
// 2t (+1), columns g) puts the 32 lanes on 32 banks; the mask tile rows are 64 + 4 floats.
// Causal with mask_fill = -inf skips whole tiles (dkdv: query tiles before the block's first key;
// dq: key tiles after the block's last row) and, per warp, query (key) chunks that lie wholly on
// the excluded side of the diagonal. Fixed order of every sum, no atomics: run-to-run
// deterministic. Values are split into TF32 parts where they are read into fragments (every warp
// splits what it reads; the split is 2 ALU operations per value: split_one).
//
// FLOPs: dkdv 8 n^2 d (4 with dv only), dq 6 n^2 d: 14 n^2 d per problem (the benchmark counts 10),
// three TF32 products each with SPLIT. Bytes: q, dout once per 64-key block from L2, k, v once per
// 64-row block; each output written once.
// Registers: the plan was dkdv DP = 64, QC = 64: dK, dV 64 + S^T, dP^T 64 + fragments ~30;
// DP = 128, QC = 32: 128 + 32 + ~30; dq DP = 64: 32 + 64 + ~30, DP = 128: 64 + 64 + ~30. ptxas
// (sm_90, CUDA 13.0, __launch_bounds__(128, 2): at most 255) gives, for DP = 32 / 64 / 128:
// split dkdv 203 / 234 / 239, dq 200 / 217 / 222; one product dkdv 168 / 200 / 225, dq 198 / 244
// / 206; no spills, no stack frame.
// Shared memory (floats): dkdv 2 * 64 (DP + 4) + stages * (2 * 64 (DP + 4) + 128 [+ 64 * 68 mask]),
// dq 2 * 64 (DP + 4) + stages * (2 * 64 (DP + 4) [+ 64 * 68 mask]). d = 64 unmasked, two stages:
// 105 KB (two blocks per SM on sm_90).
//
// PREDICTION (H100, TF32 off, SPLIT; time per call, the benchmark's 10 n^2 d FLOPs). Count per
// warp and 64-wide tile, d = 64: dkdv 768 mma.sync + ~580 LDS + ~2200 ALU (B and A splits 2 per
// value, ~25 per score for scale, exp, dS); dq 576 mma + ~1900 ALU. Assuming ~6 cycles per
// m16n8k8 TF32 mma per SM sub-partition (mma.sync at ~2/3 of the H100's dense TF32 rate), the
// tensor pipe and the issue slots are about balanced; with 8 warps per SM and ~75% of that
// realised:
//   bwd (32, 1024, 64): none ~0.45 ms (~0.62x SDPA's 0.726; target 0.508), ~48 TFLOP/s counted;
//   causal ~0.27 ms (~0.32x), masked ~0.55 ms (~0.75x: the 16 KB mask tile per block and tile
//   and the per-entry tests);
//   bwd (16, 4096, 64): none ~3.6 ms (~0.66x), causal ~1.9 ms (~0.34x), masked ~4.4 ms (~0.8x);
//   bwd (32, 1024, 128): none ~1.1 ms (~1.05x: 204 KB of shared memory, one 4-warp block per SM,
//   too few warps to hide the mma and LDS latencies), causal ~0.65 ms, masked ~1.3 ms (one stage).
//   TF32 path (one product instead of three): ~0.6x of those times.
// Measured: (pending GPU run)
#pragma once

#include "cuda/attention_kernels.cuh"
#include "cuda/mma_tf32.cuh"

namespace tlrt {
namespace cuda {
namespace attn_kernels {
namespace mma_bwd {

constexpr unsigned kWarps = 4;
constexpr unsigned kThr = 32 * kWarps;  // threads per block
constexpr unsigned kBlk = 16 * kWarps;  // keys (dkdv) / query rows (dq) per block
constexpr unsigned kTile = 64;          // queries (dkdv) / keys (dq) per streamed tile
constexpr unsigned kMS = kTile + 4;     // row stride of the mask tile

// x split into the fragment words: big = x rounded to TF32 and small = x - big (SPLIT), or x
// rounded to TF32. small is passed as its float32 bits: the tensor cores read the top 19 bits
// of an operand (truncation, as the emulation models), so it enters the product truncated to
// TF32 instead of rounded (mma::split): an error below 2^-10 |small| <= 2^-21 |x| instead of
// 2^-22 |x|, within the split bound, for one conversion less per value.
template <bool SPLIT>
__device__ __forceinline__ void split_one(float x, uint32_t &big, uint32_t &small) {
  if (SPLIT) {
    big = mma::tf32(x);
    small = __float_as_uint(x - __uint_as_float(big));
  } else {
    big = mma::tf32(x);
    small = 0;
  }
}

// A fragment (16 x 8) of a row-major shared tile with row stride sd, from m = &M[r0][k0]:
// A[r][c] = M[r0 + r][k0 + c].
template <bool SPLIT>
__device__ __forceinline__ void load_a(const float *m, unsigned sd, mma::SplitA &a) {
  const unsigned g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
  split_one<SPLIT>(m[g * sd + t], a.big[0], a.small[0]);
  split_one<SPLIT>(m[(g + 8) * sd + t], a.big[1], a.small[1]);
  split_one<SPLIT>(m[g * sd + t + 4], a.big[2], a.small[2]);
  split_one<SPLIT>(m[(g + 8) * sd + t + 4], a.big[3], a.small[3]);
}

// B fragment (8 x 8) B[k][n] = M[n0 + n][k0 + k] (contraction along M's rows), m = &M[n0][k0].
template <bool SPLIT>
__device__ __forceinline__ void load_bt(const float *m, unsigned sd, mma::SplitB &b) {
  const unsigned g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
  split_one<SPLIT>(m[g * sd + t], b.big[0], b.small[0]);
  split_one<SPLIT>(m[g * sd + t + 4], b.big[1], b.small[1]);
}

// B fragment paired with an A operand made by mma::c_as_a: B[k][n] = M[k0 + perm(k)][n0 + n]
// with the rows read as 2t, 2t + 1 (mma::kc_perm), m = &M[k0][n0].
template <bool SPLIT>
__device__ __forceinline__ void load_bp(const float *m, unsigned sd, mma::SplitB &b) {
  const unsigned g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
  split_one<SPLIT>(m[mma::kc_perm(t, 0) * sd + g], b.big[0], b.small[0]);
  split_one<SPLIT>(m[mma::kc_perm(t, 1) * sd + g], b.big[1], b.small[1]);
}

// A operand over a C fragment's 8 columns (mma::c_as_a), split.
template <bool SPLIT>
__device__ __forceinline__ void c_to_a(const float (&c)[4], mma::SplitA &a) {
  float x[4];
  mma::c_as_a(c, x);
#pragma unroll
  for (int i = 0; i < 4; ++i) split_one<SPLIT>(x[i], a.big[i], a.small[i]);
}

__device__ __forceinline__ void zero_block_smem(float *sm, unsigned floats) {
  for (unsigned e = threadIdx.x; e < floats / 4; e += kThr)
    st4(sm + 4 * e, make_float4(0.0f, 0.0f, 0.0f, 0.0f));
}

// Copies rows r0 .. r0 + ROWS - 1 (columns < d) of a row-major (n, d) matrix into dst (row stride
// DP + 4); rows past n become zeros; columns d .. DP + 3 are not touched (zero since the start).
template <unsigned DP, unsigned ROWS>
__device__ __forceinline__ void load_rows(float *dst, const float *src, unsigned r0, unsigned n,
                                          unsigned d, bool vec) {
  constexpr unsigned SD = DP + 4;
  if (vec) {
    const unsigned d4 = d / 4;
    for (unsigned e = threadIdx.x; e < ROWS * d4; e += kThr) {
      const unsigned r = e / d4, c = e % d4;
      const bool ok = r0 + r < n;
      async::copy16(dst + r * SD + 4 * c, ok ? src + (uint64_t)(r0 + r) * d + 4 * c : src, ok);
    }
  } else {
    for (unsigned e = threadIdx.x; e < ROWS * d; e += kThr) {
      const unsigned r = e / d, c = e % d;
      const bool ok = r0 + r < n;
      async::copy4(dst + r * SD + c, ok ? src + (uint64_t)(r0 + r) * d + c : src, ok);
    }
  }
}

// 64 entries v[r0 ..] (zeros past n) into dst.
__device__ __forceinline__ void load_vec64(float *dst, const float *src, unsigned r0, unsigned n) {
  for (unsigned e = threadIdx.x; e < kTile; e += kThr) {
    const bool ok = r0 + e < n;
    async::copy4(dst + e, ok ? src + r0 + e : src, ok);
  }
}

// The 64 x 64 mask tile m[i0 + r][j0 + c] of one problem's (n, n) mask into dst (row stride
// kMS); entries out of range become zeros (never read as mask values: those scores are
// excluded by their bounds). mvec: n % 4 == 0 and the mask 16-byte aligned.
__device__ __forceinline__ void load_mask_tile(float *dst, const float *mb, unsigned i0,
                                               unsigned j0, unsigned n, bool mvec) {
  if (mvec) {
    for (unsigned e = threadIdx.x; e < kTile * (kTile / 4); e += kThr) {
      const unsigned r = e / (kTile / 4), c = 4 * (e % (kTile / 4));
      const bool ok = i0 + r < n && j0 + c < n;
      async::copy16(dst + r * kMS + c, ok ? mb + (uint64_t)(i0 + r) * n + j0 + c : mb, ok);
    }
  } else {
    for (unsigned e = threadIdx.x; e < kTile * kTile; e += kThr) {
      const unsigned r = e / kTile, c = e % kTile;
      const bool ok = i0 + r < n && j0 + c < n;
      async::copy4(dst + r * kMS + c, ok ? mb + (uint64_t)(i0 + r) * n + j0 + c : mb, ok);
    }
  }
}

// Writes the warp's 16 x DP C-fragment rows acc (rows r0 + g, r0 + g + 8, columns 8 dt + 2t + e)
// times factor into the row-major (n, d) dst, rows below n and columns below d only.
template <unsigned DP>
__device__ __forceinline__ void store_frag_rows(const float (&acc)[DP / 8][4], float factor,
                                                float *dst, unsigned r0, unsigned n, unsigned d) {
  const unsigned g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
#pragma unroll
  for (unsigned h = 0; h < 2; ++h) {
    const unsigned r = r0 + g + 8 * h;
    if (r >= n) continue;
    float *row = dst + (uint64_t)r * d;
#pragma unroll
    for (unsigned dt = 0; dt < DP / 8; ++dt)
#pragma unroll
      for (unsigned e = 0; e < 2; ++e) {
        const unsigned col = 8 * dt + 2 * t + e;
        if (col < d) row[col] = acc[dt][2 * h + e] * factor;
      }
  }
}

// Shared memory of the kernels, floats (stages: 1 or 2; mask: whether a mask tile is staged).
__host__ __device__ constexpr unsigned dkdv_stage_floats(unsigned dp, bool mask) {
  return 2 * kTile * (dp + 4) + 2 * kTile + (mask ? kTile * kMS : 0);
}
__host__ __device__ constexpr unsigned dkdv_floats(unsigned dp, bool mask, unsigned stages) {
  return 2 * kBlk * (dp + 4) + stages * dkdv_stage_floats(dp, mask);
}
__host__ __device__ constexpr unsigned dq_stage_floats(unsigned dp, bool mask) {
  return 2 * kTile * (dp + 4) + (mask ? kBlk * kMS : 0);
}
__host__ __device__ constexpr unsigned dq_floats(unsigned dp, bool mask, unsigned stages) {
  return 2 * kBlk * (dp + 4) + stages * dq_stage_floats(dp, mask);
}

// Queries per register chunk of the dk/dv kernel: S^T and dP^T of QC queries live in registers
// next to dK and dV (DP / 2 registers each).
template <unsigned DP>
__host__ __device__ constexpr unsigned dkdv_chunk() {
  return DP <= 64 ? 64 : 32;
}

// ---- dk / dv -----------------------------------------------------------------------------------

// dk (if dk != nullptr) and dv (if dv != nullptr) for 64 keys per block, looping over query tiles
// of 64 in ascending order. stages: 2 (prefetch the next tile during this one) or 1.
template <unsigned DP, bool SPLIT>
__global__ void __launch_bounds__(kThr, 2)
    dkdv_mma_kernel(KP p, unsigned stages, bool mvec, const float *__restrict q,
                    const float *__restrict k, const float *__restrict v,
                    const float *__restrict dout, const float *__restrict lse,
                    const float *__restrict D, float *__restrict dk, float *__restrict dv) {
#if defined(TLRT_CUDA_EMULATION) || !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
  constexpr unsigned SD = DP + 4, NK = DP / 8, QC = dkdv_chunk<DP>(), NQ = QC / 8;
  float *sm = async::dynamic_smem();
  float *ks = sm, *vs = ks + kBlk * SD, *st0 = vs + kBlk * SD;
  const bool want_k = dk != nullptr, want_v = dv != nullptr, masked = p.mask != nullptr;
  const unsigned stage_f = dkdv_stage_floats(DP, masked);
  const unsigned w = threadIdx.x / 32, g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
  const unsigned jb = blockIdx.x * kBlk, jw = jb + 16 * w;
  // With skipping, key j meets only the queries i >= j: the tiles from the one holding jb.
  const unsigned ifirst = p.skip ? jb - jb % kTile : 0;
  zero_block_smem(sm, dkdv_floats(DP, masked, stages));
  for (uint64_t b = blockIdx.y; b < p.bh; b += gridDim.y) {
    const uint64_t base = b * p.n * p.d;
    const float *mb = masked ? p.mask + b * p.mask_stride : nullptr;
    // Stage s of tile i0: Q rows, dout rows, lse, D, mask tile (queries i0.., keys jb..).
    auto load_stage = [&](unsigned s, unsigned i0) {
      float *qs = st0 + s * stage_f, *dos = qs + kTile * SD, *ls = dos + kTile * SD,
            *Ds = ls + kTile, *ms = Ds + kTile;
      load_rows<DP, kTile>(qs, q + base, i0, p.n, p.d, p.vec);
      load_rows<DP, kTile>(dos, dout + base, i0, p.n, p.d, p.vec);
      load_vec64(ls, lse + b * p.n, i0, p.n);
      if (want_k) load_vec64(Ds, D + b * p.n, i0, p.n);
      if (mb) load_mask_tile(ms, mb, i0, jb, p.n, mvec);
    };
    __syncthreads();  // zeroing, or the previous problem's readers, done
    load_rows<DP, kBlk>(ks, k + base, jb, p.n, p.d, p.vec);
    load_rows<DP, kBlk>(vs, v + base, jb, p.n, p.d, p.vec);
    load_stage(0, ifirst);
    async::commit();
    float gk[NK][4], gv[NK][4];
#pragma unroll
    for (unsigned dt = 0; dt < NK; ++dt)
#pragma unroll
      for (unsigned e = 0; e < 4; ++e) gk[dt][e] = gv[dt][e] = 0.0f;
    unsigned it = 0;
    for (unsigned i0 = ifirst; i0 < p.n; i0 += kTile, ++it) {
      const bool more = i0 + kTile < p.n;
      if (stages == 2) {
        if (more) load_stage((it + 1) % 2, i0 + kTile);
        async::commit();
        async::wait<1>();
      } else {
        async::wait<0>();
      }
      __syncthreads();  // tile i0 visible
      const float *qs = st0 + (it % stages) * stage_f, *dos = qs + kTile * SD,
                  *ls = dos + kTile * SD, *Ds = ls + kTile, *ms = Ds + kTile;
      // Every score of the warp's keys and this tile is dot * scale (in range, unmasked, on or
      // below the diagonal): no per-entry tests.
      const bool plain = !mb && i0 + kTile <= p.n && jw + 16 <= p.n && !(p.causal && jw + 15 > i0);
#pragma unroll 1
      for (unsigned qc = 0; qc < kTile; qc += QC) {
        if (p.skip && i0 + qc + QC <= jw) continue;  // every query before the warp's keys
        float s[NQ][4], dp[NQ][4];
#pragma unroll
        for (unsigned nt = 0; nt < NQ; ++nt)
#pragma unroll
          for (unsigned e = 0; e < 4; ++e) s[nt][e] = dp[nt][e] = 0.0f;
        // S^T = K Q^T and dP^T = V dout^T over the head dimension.
#pragma unroll 1
        for (unsigned kt = 0; kt < NK; ++kt) {
          mma::SplitA ka, va;
          load_a<SPLIT>(ks + 16 * w * SD + 8 * kt, SD, ka);
          if (want_k) load_a<SPLIT>(vs + 16 * w * SD + 8 * kt, SD, va);
#pragma unroll
          for (unsigned nt = 0; nt < NQ; ++nt) {
            mma::SplitB bq;
            load_bt<SPLIT>(qs + (qc + 8 * nt) * SD + 8 * kt, SD, bq);
            mma::product<SPLIT>(s[nt], ka, bq);
            if (want_k) {
              mma::SplitB bo;
              load_bt<SPLIT>(dos + (qc + 8 * nt) * SD + 8 * kt, SD, bo);
              mma::product<SPLIT>(dp[nt], va, bo);
            }
          }
        }
        // P^T and dS^T in place: element e of n-tile nt is key jw + g + 8 (e / 2), query
        // i0 + qc + 8 nt + 2t + e % 2.
#pragma unroll
        for (unsigned nt = 0; nt < NQ; ++nt)
#pragma unroll
          for (unsigned e = 0; e < 4; ++e) {
            const unsigned il = qc + 8 * nt + 2 * t + e % 2, jl = 16 * w + g + 8 * (e / 2);
            const unsigned i = i0 + il, j = jb + jl;
            float sc = s[nt][e] * p.scale;
            if (!plain) {
              const float m = mb ? ms[il * kMS + jl] : 1.0f;
              sc = (i < p.n && j < p.n) ? score_of(p, i, j, s[nt][e], m) : kNegInf;
            }
            const float pr = attn::prob(sc, ls[il]);
            s[nt][e] = pr;
            if (want_k) dp[nt][e] = sc == kNegInf ? 0.0f : pr * (dp[nt][e] - Ds[il]);
          }
        // dV += P^T dout, dK += dS^T Q over the chunk's queries (C fragments as A operands).
#pragma unroll
        for (unsigned nt = 0; nt < NQ; ++nt) {
          mma::SplitA pa, da;
          if (want_v) c_to_a<SPLIT>(s[nt], pa);
          if (want_k) c_to_a<SPLIT>(dp[nt], da);
#pragma unroll
          for (unsigned dt = 0; dt < NK; ++dt) {
            if (want_v) {
              mma::SplitB bo;
              load_bp<SPLIT>(dos + (qc + 8 * nt) * SD + 8 * dt, SD, bo);
              mma::product<SPLIT>(gv[dt], pa, bo);
            }
            if (want_k) {
              mma::SplitB bq;
              load_bp<SPLIT>(qs + (qc + 8 * nt) * SD + 8 * dt, SD, bq);
              mma::product<SPLIT>(gk[dt], da, bq);
            }
          }
        }
      }
      __syncthreads();  // every read of this stage done before it is refilled
      if (stages == 1 && more) {
        load_stage(0, i0 + kTile);
        async::commit();
      }
    }
    if (want_v) store_frag_rows<DP>(gv, 1.0f, dv + base, jw, p.n, p.d);
    if (want_k) store_frag_rows<DP>(gk, p.scale, dk + base, jw, p.n, p.d);
  }
#endif
}

// ---- dq ----------------------------------------------------------------------------------------

// dq for 64 query rows per block, looping over key tiles of 64 in ascending order.
template <unsigned DP, bool SPLIT>
__global__ void __launch_bounds__(kThr, 2)
    dq_mma_kernel(KP p, unsigned stages, bool mvec, const float *__restrict q,
                  const float *__restrict k, const float *__restrict v,
                  const float *__restrict dout, const float *__restrict lse,
                  const float *__restrict D, float *__restrict dq) {
#if defined(TLRT_CUDA_EMULATION) || !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
  constexpr unsigned SD = DP + 4, NK = DP / 8, NJ = kTile / 8;
  float *sm = async::dynamic_smem();
  float *qsm = sm, *dosm = qsm + kBlk * SD, *st0 = dosm + kBlk * SD;
  const bool masked = p.mask != nullptr;
  const unsigned stage_f = dq_stage_floats(DP, masked);
  const unsigned w = threadIdx.x / 32, g = threadIdx.x % 32 / 4, t = threadIdx.x % 4;
  // With skipping, later query blocks visit more key tiles: they start first.
  const unsigned ib = (p.skip ? gridDim.x - 1 - blockIdx.x : blockIdx.x) * kBlk, iw = ib + 16 * w;
  const unsigned jend = p.skip ? min(p.n, ib + kBlk) : p.n;
  zero_block_smem(sm, dq_floats(DP, masked, stages));
  for (uint64_t b = blockIdx.y; b < p.bh; b += gridDim.y) {
    const uint64_t base = b * p.n * p.d;
    const float *mb = masked ? p.mask + b * p.mask_stride : nullptr;
    auto load_stage = [&](unsigned s, unsigned j0) {
      float *ks = st0 + s * stage_f, *vs = ks + kTile * SD, *ms = vs + kTile * SD;
      load_rows<DP, kTile>(ks, k + base, j0, p.n, p.d, p.vec);
      load_rows<DP, kTile>(vs, v + base, j0, p.n, p.d, p.vec);
      if (mb) load_mask_tile(ms, mb, ib, j0, p.n, mvec);
    };
    __syncthreads();  // zeroing, or the previous problem's readers, done
    load_rows<DP, kBlk>(qsm, q + base, ib, p.n, p.d, p.vec);
    load_rows<DP, kBlk>(dosm, dout + base, ib, p.n, p.d, p.vec);
    load_stage(0, 0);
    async::commit();
    float L[2], Dr[2], gq[NK][4];
#pragma unroll
    for (unsigned h = 0; h < 2; ++h) {
      const unsigned i = iw + g + 8 * h;
      L[h] = i < p.n ? lse[b * p.n + i] : 0.0f;
      Dr[h] = i < p.n ? D[b * p.n + i] : 0.0f;
    }
#pragma unroll
    for (unsigned dt = 0; dt < NK; ++dt)
#pragma unroll
      for (unsigned e = 0; e < 4; ++e) gq[dt][e] = 0.0f;
    unsigned it = 0;
    for (unsigned j0 = 0; j0 < jend; j0 += kTile, ++it) {
      const bool more = j0 + kTile < jend;
      if (stages == 2) {
        if (more) load_stage((it + 1) % 2, j0 + kTile);
        async::commit();
        async::wait<1>();
      } else {
        async::wait<0>();
      }
      __syncthreads();  // tile j0 visible
      const float *ks = st0 + (it % stages) * stage_f, *vs = ks + kTile * SD, *ms = vs + kTile * SD;
      const bool plain =
          !mb && iw + 16 <= p.n && j0 + kTile <= p.n && !(p.causal && j0 + kTile - 1 > iw);
      // The warp's rows end before the tile starts (skipping): nothing of it is visited.
      if (!(p.skip && j0 > iw + 15)) {
        float s[NJ][4], dp[NJ][4];
#pragma unroll
        for (unsigned nt = 0; nt < NJ; ++nt)
#pragma unroll
          for (unsigned e = 0; e < 4; ++e) s[nt][e] = dp[nt][e] = 0.0f;
        // S = Q K^T and dP = dout V^T over the head dimension.
#pragma unroll 1
        for (unsigned kt = 0; kt < NK; ++kt) {
          mma::SplitA qa, oa;
          load_a<SPLIT>(qsm + 16 * w * SD + 8 * kt, SD, qa);
          load_a<SPLIT>(dosm + 16 * w * SD + 8 * kt, SD, oa);
#pragma unroll
          for (unsigned nt = 0; nt < NJ; ++nt) {
            mma::SplitB bk, bv;
            load_bt<SPLIT>(ks + 8 * nt * SD + 8 * kt, SD, bk);
            mma::product<SPLIT>(s[nt], qa, bk);
            load_bt<SPLIT>(vs + 8 * nt * SD + 8 * kt, SD, bv);
            mma::product<SPLIT>(dp[nt], oa, bv);
          }
        }
        // dS in place: element e of n-tile nt is row iw + g + 8 (e / 2), key
        // j0 + 8 nt + 2t + e % 2.
#pragma unroll
        for (unsigned nt = 0; nt < NJ; ++nt)
#pragma unroll
          for (unsigned e = 0; e < 4; ++e) {
            const unsigned il = 16 * w + g + 8 * (e / 2), jl = 8 * nt + 2 * t + e % 2;
            const unsigned i = ib + il, j = j0 + jl;
            float sc = s[nt][e] * p.scale;
            if (!plain) {
              const float m = mb ? ms[il * kMS + jl] : 1.0f;
              sc = (i < p.n && j < p.n) ? score_of(p, i, j, s[nt][e], m) : kNegInf;
            }
            const float pr = attn::prob(sc, L[e / 2]);
            s[nt][e] = sc == kNegInf ? 0.0f : pr * (dp[nt][e] - Dr[e / 2]);
          }
        // dQ += dS K over the tile's keys (dS's C fragments as A operands).
#pragma unroll
        for (unsigned nt = 0; nt < NJ; ++nt) {
          mma::SplitA da;
          c_to_a<SPLIT>(s[nt], da);
#pragma unroll
          for (unsigned dt = 0; dt < NK; ++dt) {
            mma::SplitB bk;
            load_bp<SPLIT>(ks + 8 * nt * SD + 8 * dt, SD, bk);
            mma::product<SPLIT>(gq[dt], da, bk);
          }
        }
      }
      __syncthreads();  // every read of this stage done before it is refilled
      if (stages == 1 && more) {
        load_stage(0, j0 + kTile);
        async::commit();
      }
    }
    store_frag_rows<DP>(gq, p.scale, dq + base, iw, p.n, p.d);
  }
#endif
}

// ---- launch plan -------------------------------------------------------------------------------

// The fast backward's launches (D first when dq or dk is wanted), or false with nothing launched
// where it does not apply: d == 0 or d > 128, or too little shared memory per block for one
// stage (the caller runs the exact kernels then). The caller checks for sm_80+.
template <class L>
bool bwd_mma_plan(L &launch, const Problem &p, bool split, const float *q, const float *k,
                  const float *v, const float *out, const float *dout, const float *lse,
                  float *D, float *dq, float *dk, float *dv) {
  if (p.d == 0 || p.d > 128) return false;
  const unsigned dp = p.d <= 32 ? 32 : p.d <= 64 ? 64 : 128;
  const bool masked = p.mask != nullptr;
  const size_t limit = launch.smem_limit();
  auto bytes = [&](unsigned stages) {
    const size_t a = (dk || dv) ? dkdv_floats(dp, masked, stages) : 0,
                 c = dq ? dq_floats(dp, masked, stages) : 0;
    return (a > c ? a : c) * sizeof(float);
  };
  const unsigned stages = bytes(2) <= limit ? 2 : bytes(1) <= limit ? 1 : 0;
  if (stages == 0) return false;
  const KP kp = kernel_view(p, aligned16(q) && aligned16(k) && aligned16(v) && aligned16(dout) &&
                                   aligned16(out) && aligned16(dq) && aligned16(dk) &&
                                   aligned16(dv));
  // mvec: the mask tiles move as 16-byte copies (rows of n % 4 == 0 floats, aligned).
  const bool mvec = p.n % 4 == 0 && aligned16(p.mask);
  const uint64_t rows = p.bh * p.n;
  if (dq || dk) {
    const uint64_t blocks = (rows + 255) / 256;
    launch("attention d_kernel", d_kernel, dim3((unsigned)(blocks < 65535 ? blocks : 65535)), 256u,
           size_t(0), out, dout, rows, (unsigned)p.d, kp.vec, D);
  }
  const dim3 grid = grid_of(launch, (kp.n + kBlk - 1) / kBlk, kp.bh);
  auto go = [&](auto dpc, auto splitc) {
    constexpr unsigned DP = decltype(dpc)::value;
    constexpr bool S = decltype(splitc)::value;
    if (dk || dv)
      launch("attention dkdv_mma_kernel", dkdv_mma_kernel<DP, S>, grid, kThr,
             dkdv_floats(DP, masked, stages) * sizeof(float), kp, stages, mvec, q, k, v, dout, lse,
             (const float *)D, dk, dv);
    if (dq)
      launch("attention dq_mma_kernel", dq_mma_kernel<DP, S>, grid, kThr,
             dq_floats(DP, masked, stages) * sizeof(float), kp, stages, mvec, q, k, v, dout, lse,
             (const float *)D, dq);
    return true;
  };
  using Tt = std::true_type;
  using Ff = std::false_type;
  auto by_split = [&](auto dpc) { return split ? go(dpc, Tt{}) : go(dpc, Ff{}); };
  switch (dp) {
    case 32: return by_split(std::integral_constant<unsigned, 32>());
    case 64: return by_split(std::integral_constant<unsigned, 64>());
    default: return by_split(std::integral_constant<unsigned, 128>());
  }
}

}  // namespace mma_bwd
}  // namespace attn_kernels
}  // namespace cuda
}  // namespace tlrt
