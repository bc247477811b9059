// The fast attention FORWARD (Precision::SplitTf32 with SPLIT = true: float32-grade "3xTF32";
// Precision::Tf32 with SPLIT = false: one TF32 product; sm_80+, 1 <= d <= 128, where the shared
// memory fits): FlashAttention-2 on mma.sync m16n8k8 TF32 (cuda/common/mma_tf32.cuh) with every
// operand and accumulator in register fragments. tests/unit/test_attention_mma_emu.cpp runs this
// source on the CPU emulator against float64 and the header's bounds.
//
// split_kv_kernel (pre-pass, once per call): K and V of every (problem, key tile) into dense
// "fragment-ordered" planes in global scratch (put_pair), so that a lane's B fragment (big and
// small) is one 16-byte shared load and no warp splits what it reads. Reads 8 bh n d bytes,
// writes 16 bh n d (SPLIT; 8 without): (32, 1024, 64) ~50 MB.
// fwd_mma_kernel<DP, SPLIT, NW = 8>: one block of 8 warps per (problem, 128 query rows); warp w
// owns rows 16 w .. 16 w + 15 end to end. DP = d rounded up to 32, 64 or 128 (zero padding); key
// tiles of KT = 64 keys (32 at DP = 128). Each tile's planes arrive by 16-byte cp.async into a
// double-buffered pair of plane buffers (tile j + 1 in flight while j is computed; one barrier
// per tile). Q: the lane's A fragments loaded once (kept split at DP <= 64; float32 at DP = 128,
// split per k-step when used). S = Q K^T: KT / 8 C fragments per warp, DP / 8 k-steps, 3 mma each
// (1 without SPLIT; the small terms first). Scores exactly the header's s(i, j) per fragment
// element (masks read into registers before the products, so their latency hides); the online
// softmax on the C fragments (row maxima over a quad by __shfl_xor 1, 2; p and the rescale alpha by
// attn::exp_ex2; l kept per lane, summed over the quad at the end). O += P V: P's C fragments are
// the A fragments (c_as_a, the contraction permuted), split in registers. End: out = O / l
// (__fdiv_rn), lse = m + log_f(l); l == 0: out 0, lse -inf.
// FQ (the form the library runs at DP = 64 and 128 with SPLIT): plane entries in register order
// (put_pair FR: the 16-byte load lands as the two B register pairs, no moves), P split by
// mma::split_hw, fixed-round plane copies, paired mask loads on in-range tiles. The base form (FQ
// false) runs at DP = 32 and on the TF32 path; MmaForm::base instantiates it everywhere for the
// emulation test, which checks that both forms give the same bits.
// With causal and mask_fill = -inf a block stops at its diagonal and a warp leaves out the tiles
// whose first key is past its last row; blocks with most tiles start first. No atomics: the same
// bits run to run. Work per 64-key tile and warp (DP = 64, SPLIT): 384 mma, 128 LDS.128, 32 exp;
// 4 n^2 d useful FLOPs per problem (three tensor products each with SPLIT). Shared memory: DP = 32
// 74 KB, 64 138 KB, 128 133 KB (SPLIT; 38 / 70 / 67 KB without): one block per SM, ~250 registers;
// 99 KB devices fit DP = 32 with SPLIT and every DP without; elsewhere the plan declines.
// Last measured: bench/results/2026-11-29-h200-attention-views.md
#pragma once

#include "cuda/kernels/attention.cuh"
#include "cuda/common/mma_tf32.cuh"

namespace tlrt {
namespace cuda {
namespace attn_kernels {

// Warps per block (the kernel's NW): 8, 128 query rows sharing each K / V tile.
constexpr unsigned kMmaWarps = 8;

// fwd_mma_plan's form (the same bits): standard (what the library runs: FQ at DP = 64 and 128 with
// SPLIT), base (the base form everywhere: only the emulation test launches it, to compare bits).
enum class MmaForm : unsigned { standard, base };

template <unsigned DP, bool SPLIT, MmaForm F>
__host__ __device__ constexpr bool mma_fq_form() {
  return SPLIT && (DP == 64 || DP == 128) && F != MmaForm::base;
}

// Keys per tile: 64, or 32 for DP = 128 (shared memory).
template <unsigned DP>
__host__ __device__ constexpr unsigned mma_kt() {
  return DP == 128 ? 32 : 64;
}

// Plane entries of PW floats (4 with SPLIT, 2 without); row strides of the K planes (entries per
// key) and V planes (per key pair), conflict-free: 16-byte entries are served per quarter warp,
// 8-byte ones per half warp, so K at g SK + t needs SK = 4 mod 8 (16 bytes) or mod 16 (8 bytes),
// V at t SV + g needs SV = 2 mod 8 or 4 mod 16.
template <bool SPLIT>
__host__ __device__ constexpr unsigned mma_pw() {
  return SPLIT ? 4 : 2;
}
template <unsigned DP>
__host__ __device__ constexpr unsigned mma_k_stride() {
  return DP / 2 + 4;
}
template <unsigned DP, bool SPLIT>
__host__ __device__ constexpr unsigned mma_v_stride() {
  return SPLIT ? DP + 2 : DP + 4;
}

template <unsigned DP, bool SPLIT>
__host__ __device__ constexpr unsigned mma_plane_buf_floats() {
  return mma_pw<SPLIT>() * (mma_kt<DP>() * mma_k_stride<DP>() +
                            (mma_kt<DP>() / 2) * mma_v_stride<DP, SPLIT>());
}
template <unsigned DP, bool SPLIT>
__host__ __device__ constexpr unsigned fwd_mma_smem_floats() {
  return 2 * mma_plane_buf_floats<DP, SPLIT>();
}

// The planes in global memory, per (problem, key tile), dense: the K planes (KT rows of DP / 2
// entries) then the V planes (KT / 2 key pairs of DP entries), zeros past n and d.
template <unsigned DP, bool SPLIT>
__host__ __device__ constexpr unsigned mma_tile_plane_floats() {
  return mma_pw<SPLIT>() * mma_kt<DP>() * DP;
}

// Launch bounds of a 4-warp block: 2 blocks per SM (at most 255 registers a thread).
template <unsigned DP>
__host__ __device__ constexpr unsigned fwd_mma_min_blocks() {
  return 2;
}

// Stores the plane entry of a and b: {big(a), small(a), big(b), small(b)} with SPLIT, else
// {big(a), big(b)} (TF32 bit patterns as floats). FR (register order, SPLIT only): {big(a),
// big(b), small(a), small(b)}: the 16-byte load lands as the two B register pairs, no moves.
template <bool SPLIT, bool FR = false>
__device__ __forceinline__ void put_pair(float *dst, float a, float b) {
  if (SPLIT) {
    uint32_t ab, as, bb, bs;
    mma::split(a, ab, as);
    mma::split(b, bb, bs);
    if (FR)
      st4(dst, make_float4(__uint_as_float(ab), __uint_as_float(bb), __uint_as_float(as),
                           __uint_as_float(bs)));
    else
      st4(dst, make_float4(__uint_as_float(ab), __uint_as_float(as), __uint_as_float(bb),
                           __uint_as_float(bs)));
  } else {
    const float ab = __uint_as_float(mma::tf32(a)), bb = __uint_as_float(mma::tf32(b));
#ifdef TLRT_CUDA_EMULATION
    emu::check_aligned(dst, 8);
    dst[0] = ab;
    dst[1] = bb;
#else
    *reinterpret_cast<float2 *>(dst) = make_float2(ab, bb);
#endif
  }
}

// The B fragment of one plane entry (one 16- or 8-byte shared load): b[0] from a, b[1] from b.
template <bool SPLIT, bool FR = false>
__device__ __forceinline__ mma::SplitB get_pair(const float *src) {
  mma::SplitB b;
  if (SPLIT && FR) {
    const float4 f = ld4(src);
    b.big[0] = __float_as_uint(f.x);
    b.big[1] = __float_as_uint(f.y);
    b.small[0] = __float_as_uint(f.z);
    b.small[1] = __float_as_uint(f.w);
  } else if (SPLIT) {
    const float4 f = ld4(src);
    b.big[0] = __float_as_uint(f.x);
    b.small[0] = __float_as_uint(f.y);
    b.big[1] = __float_as_uint(f.z);
    b.small[1] = __float_as_uint(f.w);
  } else {
#ifdef TLRT_CUDA_EMULATION
    emu::check_aligned(src, 8);
    b.big[0] = __float_as_uint(src[0]);
    b.big[1] = __float_as_uint(src[1]);
#else
    const float2 f = *reinterpret_cast<const float2 *>(src);
    b.big[0] = __float_as_uint(f.x);
    b.big[1] = __float_as_uint(f.y);
#endif
    b.small[0] = b.small[1] = 0;  // not read by the one-product form
  }
  return b;
}

// The pre-pass, a thread per plane entry: K entry (row r, c4) = K[r][8 (c4 / 4) + c4 % 4] and the
// column 4 further (K as a B operand over its columns), V entry (pair pr, column c) = V[2 pr][c],
// V[2 pr + 1][c] (V as a B operand over its rows, with c_as_a's permuted contraction index).
template <unsigned DP, bool SPLIT, bool FR = false>
__global__ void __launch_bounds__(256)
    split_kv_kernel(KP p, attn::RowMap km, attn::RowMap vm, const float *__restrict k,
                    const float *__restrict v, float *__restrict planes) {
  constexpr unsigned KT = mma_kt<DP>(), PW = mma_pw<SPLIT>(), C4 = DP / 2, KE = KT * C4,
                     TE = KT * DP;  // entries per tile: KE of K, then KE of V
  const uint64_t tiles = (p.n + KT - 1) / KT, per = tiles * TE;
  for (uint64_t b = blockIdx.y; b < p.bh; b += gridDim.y) {
    const float *kb = k + km.base(b), *vb = v + vm.base(b);
    float *dst = planes + b * per * PW;
    for (uint64_t e = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; e < per;
         e += (uint64_t)gridDim.x * blockDim.x) {
      const uint64_t j0 = (e / TE) * KT;
      const unsigned r = (unsigned)(e % TE);
      float x0, x1;
      if (r < KE) {
        const uint64_t j = j0 + r / C4;
        const unsigned c4 = r % C4, col = 8 * (c4 / 4) + c4 % 4;
        const bool in = j < p.n;
        x0 = (in && col < p.d) ? kb[j * km.token + col] : 0.0f;
        x1 = (in && col + 4 < p.d) ? kb[j * km.token + col + 4] : 0.0f;
      } else {
        const unsigned rv = r - KE, c = rv % DP;
        const uint64_t j = j0 + 2 * (rv / DP);
        x0 = (j < p.n && c < p.d) ? vb[j * vm.token + c] : 0.0f;
        x1 = (j + 1 < p.n && c < p.d) ? vb[(j + 1) * vm.token + c] : 0.0f;
      }
      put_pair<SPLIT, FR>(dst + PW * e, x0, x1);
    }
  }
}

// One tile's dense planes (src) into a plane buffer at the padded strides (kpl: K planes, vpl: V
// planes) by 16-byte cp.async copies. FIXED: the same copies in fixed rounds of chunk threadIdx.x
// + r NT, whose addresses are the first round's plus constants (~4 instructions a copy, not ~13).
template <unsigned DP, bool SPLIT, unsigned NT, bool FIXED = false>
__device__ __forceinline__ void load_planes_nt(float *kpl, float *vpl, const float *src) {
  constexpr unsigned KT = mma_kt<DP>(), PW = mma_pw<SPLIT>(), SK = mma_k_stride<DP>(),
                     SV = mma_v_stride<DP, SPLIT>();
  constexpr unsigned KROW = DP / 2 * PW / 4, KCH = KT * KROW;  // 16-byte chunks: K row, K tile
  constexpr unsigned VROW = DP * PW / 4, VCH = KT / 2 * VROW;  // V pair row, V tile
  static_assert((PW * SK) % 4 == 0 && (PW * SV) % 4 == 0, "plane rows 16-byte aligned");
  static_assert(KCH % NT == 0 && VCH % NT == 0, "whole rounds of copies");
  if constexpr (FIXED && NT % KROW == 0 && NT % VROW == 0) {
    const unsigned tx = threadIdx.x;
    float *kd = kpl + (tx / KROW) * (PW * SK) + 4 * (tx % KROW);
    float *vd = vpl + (tx / VROW) * (PW * SV) + 4 * (tx % VROW);
    const float *ks = src + 4 * tx, *vs = src + 4 * KCH + 4 * tx;
#pragma unroll
    for (unsigned r = 0; r < KCH / NT; ++r)
      async::copy16(kd + r * (NT / KROW) * (PW * SK), ks + 4 * r * NT, true);
#pragma unroll
    for (unsigned r = 0; r < VCH / NT; ++r)
      async::copy16(vd + r * (NT / VROW) * (PW * SV), vs + 4 * r * NT, true);
  } else {
#pragma unroll
    for (unsigned e = threadIdx.x; e < KCH; e += NT)
      async::copy16(kpl + (e / KROW) * (PW * SK) + 4 * (e % KROW), src + 4 * e, true);
    src += 4 * KCH;
#pragma unroll
    for (unsigned e = threadIdx.x; e < VCH; e += NT)
      async::copy16(vpl + (e / VROW) * (PW * SV) + 4 * (e % VROW), src + 4 * e, true);
  }
}

// A C fragment's element e: row offset 8 (e / 2) from g, column 2t + e % 2 of its n-tile.
__device__ __forceinline__ unsigned c_row(unsigned g, unsigned e) { return g + 8 * (e / 2); }
__device__ __forceinline__ unsigned c_col(unsigned t, unsigned e) { return 2 * t + e % 2; }

// Maximum and sum over the 4 lanes of a quad (the lanes holding one C-fragment row).
__device__ __forceinline__ float quad_max(float v) {
  v = attn::amax(v, __shfl_xor_sync(kFull, v, 1));
  return attn::amax(v, __shfl_xor_sync(kFull, v, 2));
}
__device__ __forceinline__ float quad_sum(float v) {
  v = v + __shfl_xor_sync(kFull, v, 1);
  return v + __shfl_xor_sync(kFull, v, 2);
}

// ---- forward -----------------------------------------------------------------------------------

template <unsigned DP, bool SPLIT, unsigned NW, bool FQ = false>
__global__ void __launch_bounds__(32 * NW, NW == 4 ? fwd_mma_min_blocks<DP>() : 1)
    fwd_mma_kernel(KP p, attn::RowMap qm, attn::RowMap om, const float *__restrict q,
                   const float *__restrict planes, float *__restrict out, float *__restrict lse) {
#if defined(TLRT_CUDA_EMULATION) || !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 800
  constexpr unsigned KT = mma_kt<DP>(), SK = mma_k_stride<DP>(), SV = mma_v_stride<DP, SPLIT>(),
                     PW = mma_pw<SPLIT>();
  constexpr unsigned KS = DP / 8;   // k-steps of S = Q K^T; n-tiles of O
  constexpr unsigned NS = KT / 8;   // n-tiles of S; k-steps of P V
  // FQ (SPLIT only): FR plane entries; HW: P split by split_hw, fixed copies, paired mask loads.
  constexpr bool FR = SPLIT && FQ, HW = SPLIT && FQ;
  constexpr bool QPRE = DP <= 64;  // Q fragments kept split
  constexpr unsigned kMmaThreads = 32 * NW, kMmaRows = 16 * NW;
  constexpr unsigned BUF = mma_plane_buf_floats<DP, SPLIT>(),
                     TP = mma_tile_plane_floats<DP, SPLIT>();
  float *sm = async::dynamic_smem();
  const float *kpl = sm, *vpl = kpl + PW * KT * SK;
  const unsigned w = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const unsigned i0 = (p.skip ? gridDim.x - 1 - blockIdx.x : blockIdx.x) * kMmaRows;
  const unsigned iw = i0 + 16 * w;  // the warp's first row
  const unsigned jend = p.skip ? min(p.n, i0 + kMmaRows) : p.n;
  for (uint64_t b = blockIdx.y; b < p.bh; b += gridDim.y) {
    const float *qb = q + qm.base(b);
    float *ob = out + om.base(b);  // here, not in the epilogue, where the accumulators are live
    const float *mb = p.mask ? p.mask + b * p.mask_stride : nullptr;
    const float *pb = planes + b * (uint64_t)((p.n + KT - 1) / KT) * TP;
    __syncthreads();  // the previous problem's readers done
    load_planes_nt<DP, SPLIT, kMmaThreads, HW>(sm, sm + PW * KT * SK, pb);
    async::commit();
    // This lane's Q fragments (rows iw + g, iw + g + 8; columns 8 ks + t, 8 ks + t + 4).
    float qf[KS][4];
#pragma unroll
    for (unsigned ks = 0; ks < KS; ++ks)
#pragma unroll
      for (unsigned e = 0; e < 4; ++e) {
        const unsigned i = iw + g + 8 * (e % 2), c = 8 * ks + t + 4 * (e / 2);
        qf[ks][e] = (i < p.n && c < p.d) ? qb[(uint64_t)i * qm.token + c] : 0.0f;
      }
    mma::SplitA qa[QPRE ? KS : 1];
    if (QPRE)
#pragma unroll
      for (unsigned ks = 0; ks < KS; ++ks) mma::split(qf[ks], qa[QPRE ? ks : 0]);
    float m[2] = {kNegInf, kNegInf}, l[2] = {0.0f, 0.0f}, o[KS][4];
#pragma unroll
    for (unsigned nt = 0; nt < KS; ++nt)
#pragma unroll
      for (unsigned e = 0; e < 4; ++e) o[nt][e] = 0.0f;
    for (unsigned j0 = 0, jt = 0; j0 < jend; j0 += KT, ++jt) {
      const bool more = j0 + KT < jend;
      async::wait<0>();
      __syncthreads();  // tile jt's planes visible; the other buffer's readers (tile jt - 1) done
      kpl = sm + (jt % 2) * BUF;
      vpl = kpl + PW * KT * SK;
      if (more) {
        float *nk = sm + ((jt + 1) % 2) * BUF;
        load_planes_nt<DP, SPLIT, kMmaThreads, HW>(nk, nk + PW * KT * SK,
                                                   pb + (uint64_t)(jt + 1) * TP);
        async::commit();
      }
      // The warp visits the tile unless its rows are past n or (skipping) all before j0.
      const bool active = iw < p.n && !(p.skip && j0 > iw + 15);
      if (active) {
        // Mask entries first (loads in flight during the products; 1 = allowed). HW: on tiles in
        // range, n even and the mask 8-byte aligned, keys 2t, 2t + 1 of an n-tile as one float2.
        float mk[NS][4];
        const bool mpairs = HW && mb != nullptr && j0 + KT <= p.n && p.n % 2 == 0 &&
                            (reinterpret_cast<uintptr_t>(mb) & 7) == 0;
        if (mpairs) {
#pragma unroll
          for (unsigned r = 0; r < 2; ++r) {
            const unsigned i = iw + g + 8 * r;
            const float *mrow = mb + (uint64_t)(i < p.n ? i : 0) * p.n + j0 + 2 * t;
#pragma unroll
            for (unsigned nt = 0; nt < NS; ++nt) {
              float f0 = 1.0f, f1 = 1.0f;
              if (i < p.n) {
#ifdef TLRT_CUDA_EMULATION
                emu::check_aligned(mrow + 8 * nt, 8);
                f0 = mrow[8 * nt];
                f1 = mrow[8 * nt + 1];
#else
                const float2 f = *reinterpret_cast<const float2 *>(mrow + 8 * nt);
                f0 = f.x;
                f1 = f.y;
#endif
              }
              mk[nt][2 * r] = f0;
              mk[nt][2 * r + 1] = f1;
            }
          }
        } else if (mb) {
#pragma unroll
          for (unsigned nt = 0; nt < NS; ++nt)
#pragma unroll
            for (unsigned e = 0; e < 4; ++e) {
              const unsigned i = iw + c_row(g, e), j = j0 + 8 * nt + c_col(t, e);
              mk[nt][e] = (i < p.n && j < p.n) ? mb[(uint64_t)i * p.n + j] : 1.0f;
            }
        }
        float s[NS][4];
#pragma unroll
        for (unsigned nt = 0; nt < NS; ++nt)
#pragma unroll
          for (unsigned e = 0; e < 4; ++e) s[nt][e] = 0.0f;
#pragma unroll
        for (unsigned ks = 0; ks < KS; ++ks) {
          mma::SplitA a;
          if (QPRE) {
            a = qa[QPRE ? ks : 0];
          } else if (SPLIT) {
            mma::split(qf[ks], a);
          } else {
#pragma unroll
            for (unsigned e = 0; e < 4; ++e) a.big[e] = mma::tf32(qf[ks][e]);
          }
#pragma unroll
          for (unsigned nt = 0; nt < NS; ++nt)
            mma::product<SPLIT>(s[nt], a,
                                get_pair<SPLIT, FR>(kpl + PW * ((8 * nt + g) * SK + 4 * ks + t)));
        }
        // Scores by element position (out-of-range rows and keys: excluded).
        const bool plain = !mb && iw + 16 <= p.n && j0 + KT <= p.n &&
                           !(p.causal && j0 + KT - 1 > iw);
#pragma unroll
        for (unsigned nt = 0; nt < NS; ++nt)
#pragma unroll
          for (unsigned e = 0; e < 4; ++e) {
            if (plain) {
              s[nt][e] = s[nt][e] * p.scale;
            } else {
              const unsigned i = iw + c_row(g, e), j = j0 + 8 * nt + c_col(t, e);
              const bool blocked = (p.causal && j > i) || (mb != nullptr && mk[nt][e] == 0.0f);
              s[nt][e] = (i < p.n && j < p.n) ? attn::score(s[nt][e], blocked, p.scale, p.fill)
                                              : kNegInf;
            }
          }
        // Online softmax of rows g (r = 0) and g + 8 (r = 1).
        float mn[2], alpha[2], rs[2] = {0.0f, 0.0f};
#pragma unroll
        for (unsigned r = 0; r < 2; ++r) {
          float mt = s[0][2 * r];
#pragma unroll
          for (unsigned nt = 0; nt < NS; ++nt)
#pragma unroll
            for (unsigned h = 0; h < 2; ++h) mt = attn::amax(mt, s[nt][2 * r + h]);
          mn[r] = attn::amax(m[r], quad_max(mt));
          alpha[r] = mn[r] == kNegInf ? 1.0f : attn::exp_ex2(m[r] - mn[r]);
        }
#pragma unroll
        for (unsigned nt = 0; nt < NS; ++nt)
#pragma unroll
          for (unsigned e = 0; e < 4; ++e) {
            const float pr =
                s[nt][e] == kNegInf ? 0.0f : attn::exp_ex2(s[nt][e] - mn[e / 2]);
            rs[e / 2] = rs[e / 2] + pr;
            s[nt][e] = pr;
          }
#pragma unroll
        for (unsigned r = 0; r < 2; ++r) {
          l[r] = l[r] * alpha[r] + rs[r];  // this lane's part of the row sum
          m[r] = mn[r];
        }
#pragma unroll
        for (unsigned nt = 0; nt < KS; ++nt)
#pragma unroll
          for (unsigned e = 0; e < 4; ++e) o[nt][e] = o[nt][e] * alpha[e / 2];
        // O += P V: P's C fragments as A fragments (keys 2t, 2t + 1 as A-columns t, t + 4).
#pragma unroll
        for (unsigned kk = 0; kk < NS; ++kk) {
          float af[4];
          mma::c_as_a(s[kk], af);
          mma::SplitA a;
          if (HW) {
            mma::split_hw(af, a);
          } else if (SPLIT) {
            mma::split(af, a);
          } else {
#pragma unroll
            for (unsigned e = 0; e < 4; ++e) a.big[e] = mma::tf32(af[e]);
          }
#pragma unroll
          for (unsigned nt = 0; nt < KS; ++nt)
            mma::product<SPLIT>(o[nt], a,
                                get_pair<SPLIT, FR>(vpl + PW * ((4 * kk + t) * SV + 8 * nt + g)));
        }
      }
    }
    // out = O / l, lse = m + log(l) (l summed over the quad); l == 0: out 0, lse -inf.
    if (iw < p.n) {
#pragma unroll
      for (unsigned r = 0; r < 2; ++r) l[r] = quad_sum(l[r]);
#pragma unroll
      for (unsigned r = 0; r < 2; ++r) {
        const unsigned i = iw + g + 8 * r;
        if (i >= p.n) continue;
        const bool none = l[r] == 0.0f;
        if (t == 0) lse[b * p.n + i] = none ? kNegInf : m[r] + math::log_f(l[r]);
        float *row = ob + (uint64_t)i * om.token;
#pragma unroll
        for (unsigned nt = 0; nt < KS; ++nt) {
          const unsigned c = 8 * nt + 2 * t;
          const float x0 = none ? 0.0f : __fdiv_rn(o[nt][2 * r], l[r]),
                      x1 = none ? 0.0f : __fdiv_rn(o[nt][2 * r + 1], l[r]);
          if (p.vec && c < p.d) {  // d % 4 == 0, rows 16-byte aligned: c + 1 < d, 8-byte aligned
#ifdef TLRT_CUDA_EMULATION
            emu::check_aligned(row + c, 8);
            row[c] = x0;
            row[c + 1] = x1;
#else
            *reinterpret_cast<float2 *>(row + c) = make_float2(x0, x1);
#endif
          } else {
            if (c < p.d) row[c] = x0;
            if (c + 1 < p.d) row[c + 1] = x1;
          }
        }
      }
    }
  }
#endif
}

// Floats of the planes (the scratch the caller passes to fwd_mma_plan): PW KT DP per key tile,
// ceil(n / KT) tiles per problem; 0 where the plan declines (d == 0, d > 128, n == 0, bh == 0, or
// the kernel's shared memory over launch.smem_limit()), so that no scratch is taken then.
template <class L>
uint64_t fwd_mma_planes_floats(const L &launch, const Problem &p, bool split) {
  if (p.d == 0 || p.d > 128 || p.n == 0 || p.bh == 0) return 0;
  return with_tc_dp(p.d, [&](auto dpc) -> uint64_t {
    constexpr unsigned DP = decltype(dpc)::value, KT = mma_kt<DP>();
    const size_t bytes = (split ? fwd_mma_smem_floats<DP, true>()
                                : fwd_mma_smem_floats<DP, false>()) * sizeof(float);
    if (bytes > launch.smem_limit()) return 0;
    return p.bh * ((p.n + KT - 1) / KT) * KT * DP * (split ? 4 : 2);
  });
}

// The fast forward's launches (split_kv_kernel, then fwd_mma_kernel), or false (nothing launched)
// where fwd_mma_planes_floats(launch, p, split) is 0 or planes is null (the caller runs the exact
// kernels then). planes: that many floats, 16-byte aligned. F: the form (MmaForm). The operands'
// rows where qm, km, vm, om say (a geometry's views read and written in place: the same bits as
// its packed copy).
template <MmaForm F = MmaForm::standard, class L>
bool fwd_mma_plan(L &launch, const Problem &p, bool split, const float *q, attn::RowMap qm,
                  const float *k, attn::RowMap km, const float *v, attn::RowMap vm, float *out,
                  attn::RowMap om, float *lse, float *planes) {
  if (planes == nullptr || fwd_mma_planes_floats(launch, p, split) == 0) return false;
  const KP kp = kernel_view(p, aligned16(q) && aligned16(k) && aligned16(v) && aligned16(out) &&
                                   om.rows_vec4());
  const dim3 grid = grid_of(launch, (kp.n + 16 * kMmaWarps - 1) / (16 * kMmaWarps), kp.bh);
  return with_tc_dp(p.d, [&](auto dpc) {
    return with_flag(split, [&](auto splitc) {
      constexpr unsigned DP = decltype(dpc)::value, KT = mma_kt<DP>();
      constexpr bool SPLIT = decltype(splitc)::value, FQ = mma_fq_form<DP, SPLIT, F>();
      const uint64_t bx = ((uint64_t)((kp.n + KT - 1) / KT) * KT * DP + 255) / 256;
      const dim3 sgrid((unsigned)(bx < 0x7FFFFFFFull ? bx : 0x7FFFFFFFull), grid.y, 1);
      const size_t smem = fwd_mma_smem_floats<DP, SPLIT>() * sizeof(float);
      launch("attention split_kv_kernel", Kernel<split_kv_kernel<DP, SPLIT, FQ>>(), sgrid, 256u,
             (size_t)0, kp, km, vm, k, v, planes);
      launch("attention fwd_mma_kernel", Kernel<fwd_mma_kernel<DP, SPLIT, kMmaWarps, FQ>>(), grid,
             32 * kMmaWarps, smem, kp, qm, om, q, (const float *)planes, out, lse);
      return true;
    });
  });
}

// The packed problem: q, k, v, out (bh, n, d) row-major.
template <MmaForm F = MmaForm::standard, class L>
bool fwd_mma_plan(L &launch, const Problem &p, bool split, const float *q, const float *k,
                  const float *v, float *out, float *lse, float *planes) {
  const attn::RowMap m = attn::packed_rows(p.n, p.d);
  return fwd_mma_plan<F>(launch, p, split, q, m, k, m, v, m, out, m, lse, planes);
}

}  // namespace attn_kernels
}  // namespace cuda
}  // namespace tlrt
