// The split-TF32 attention BACKWARD on Hopper (Precision::SplitTf32, compute capability 9.0,
// 32 < d <= 128, every mask kind): FlashAttention-2's dk/dv and dq kernels with their products on
// sm_90a wgmma in 3xTF32 (small(a) big(b) + big(a) small(b) + big(a) big(b)), the softmax in
// float32 with attn::exp_ex2. Not the ORDER OF OPERATIONS: the header's split-TF32 bound; no
// atomics, every sum in a fixed order: the same bits run to run. Compiled for sm_90a alone
// (meson.build builds this file apart when gpu_arch names 90); cuda/attention.cu dispatches to it.
//
// planes_kernel (pre-pass, once per call): wgmma reads only K-major TF32 operands and every input
// enters products over two indices, so for each 64-row tile of each problem it writes the shared-
// memory images (cuda/common/wgmma_tf32.cuh's layout) of q, dout, k, v as rows (64 x DP, K-major
// over d) and of q, dout, k transposed (DP x 64, rows in inv_perm's order: a C fragment's columns
// as an A fragment's), big and small parts: 14 bh n' DP floats written (DP = 64 or 128, d zero-
// padded; n' = n rounded up to 64), q, dout, k, v read once. bits_kernel (a mask with mask_fill =
// -inf): per 64 x 64 tile one exclusion word per thread of each kernel (n'^2 / 16 words a mask).
// dkdv_kernel: a block of two warpgroups per (problem, 64 keys) loops over the query steps (from
// the diagonal when skipping); dq_kernel: the same per (problem, 64 queries) over the key steps (to
// the diagonal). In each, a "P group" computes S (S^T) from the images and P = exp(s - lse) in its
// accumulators and hands P to a "dS group" through shared memory; the dS group computes dP (dP^T),
// dS = P (dP - D) and the products with P or dS as the register A operand (split by split_a): dkdv
// dK += dS^T Q and dV += P^T dout (Geo::kDV: the P group's at DP = 64, halved between the groups at
// DP = 128), dq dQ += dS K. Each group refills its own images by cp.async once its last product
// over them is done; the hand-over buffer has a "full" and an "empty" barrier, so the P group runs
// up to a step ahead and each group's arithmetic hides under the other's products. At DP = 128
// the streamed side moves in 32-row steps, the P group holds its resident operand (K in dkdv, Q in
// dq) in registers, and dq's dS group holds dout's big fragments (prod_rows_big_reg).
// Work: 14 n^2 d useful FLOPs per problem (S and dP in both kernels), three tensor products each;
// per 64 x 64 tile pair at DP = 64 dkdv issues 96 m64n64k8 and dq 72. Bytes: every block reads
// the other side's images of each step from L2 (dkdv 8 per tile, dq 6), its own 4 once.
// Shared memory: dkdv 209 / 205 KB, dq 177 / 169 KB (DP = 64 / 128), + 17 KB with a mask tile: one
// block (8 warps) per SM; 255 registers at DP = 128, no spill.
// Last measured: bench/results/2026-11-29-h200-attention-views.md
#include <cstdint>

#include "core/backend/attention.hpp"
#include "core/numerics/shared_math.hpp"
#include "cuda/sm90a/attention.cuh"
#include "cuda/common/cp_async.cuh"
#include "cuda/common/launch.cuh"
#include "cuda/common/mma_tf32.cuh"
#include "cuda/common/pdl.cuh"
#include "cuda/common/wgmma_tf32.cuh"

namespace tlrt {
namespace cuda {
namespace attn_wgmma {

namespace {

namespace wg = wgmma;
using attn::kNegInf;

constexpr unsigned kT = 64;  // rows per block (keys in dkdv, queries in dq) and per plane tile
enum Plane : unsigned { kQr, kDr, kKr, kVr, kQt, kDt, kKt, kPlanes };

constexpr unsigned kMS = kT + 4;  // row stride (floats) of a staged mask tile

// The geometry of a head-dimension class, DP = 64 (32 < d <= 64) or 128 (64 < d <= 128): a block
// owns 64 rows and loops over the other side in steps of kS rows (a whole tile at DP = 64, half a
// tile at DP = 128, where the P group's resident operand is in registers: 128 a thread).
template <unsigned DP>
struct Geo {
  static_assert(DP == 64 || DP == 128, "the two head-dimension classes");
  static constexpr unsigned kS = DP == 64 ? 64 : 32;  // rows of the streamed side per step
  static constexpr bool kRegA = DP > 64;              // the P group's A operand in registers
  static constexpr unsigned kDV = DP == 64 ? 1 : 2;  // dkdv_kernel's DV (which group has dV)
  static constexpr unsigned kImg = kT * DP;           // floats of a plane image (64-row tile)
  static constexpr unsigned kStr = kS * DP;           // floats of a step's image in shared memory
  static constexpr unsigned kNV = kT * kS / 128;      // a thread's share of a 64 x kS product
  static constexpr unsigned kNA = DP / 2;             // a thread's share of a 64 x DP product
  static constexpr unsigned kXs = kNV * 128 + 128;    // the hand-over buffer (floats)
  static constexpr unsigned kResA = kRegA ? 0 : 2 * kImg;  // the P group's resident images
  // dkdv: [K][Q step][V][dout step][Q^T step][dout^T step][lse][D][hand-over]
  static constexpr unsigned kDkdvFloats = kResA + 2 * kStr + 2 * kImg + 6 * kStr + 2 * kS + kXs;
  // dq: [Q][K step][dout][V step][K^T step][hand-over]
  static constexpr unsigned kDqFloats = kResA + 2 * kStr + 2 * kImg + 4 * kStr + kXs;
};

struct WP {
  unsigned n, d, bh, ntiles;
  const float *mask;
  uint64_t mask_stride;
  float scale, fill;
  bool causal, skip;
  bool mask_vec;  // mask tiles by 16-byte copies (n % 4 == 0, mask 16-byte aligned)
  // The exclusion words of the mask (bits_kernel; nullptr unless masked with mask_fill = -inf),
  // and the words between two problems' (0 for a broadcast mask).
  const uint32_t *bits;
  uint64_t bits_stride;
  Rows rows;     // where each operand's rows lie
  bool rows4;    // d % 4 == 0 and every row of q, dout, k, v a multiple of 4 floats from its pointer
};

// Words of exclusion bits per 64 x 64 tile: 128 in the dkdv kernel's fragment order, then 128
// in the dq kernel's (bit e of word T: the entry thread T holds as its C fragment element e).
constexpr unsigned kBitsPerTile = 2 * 128;

// The tile row at position pos of a transposed image: within each group of 8, positions
// 0 1 2 3 4 5 6 7 hold rows 0 2 4 6 1 3 5 7 (mma_tf32.cuh's C -> A fragment order).
__device__ __forceinline__ unsigned inv_perm(unsigned pos) {
  const unsigned k = pos & 7u;
  return (pos & ~7u) | (k < 4 ? 2 * k : 2 * (k - 4) + 1);
}

// Offset (floats) of image (plane, part) of tile `tile` of problem b.
template <unsigned DP>
__device__ __forceinline__ uint64_t img_off(const WP &p, unsigned plane, unsigned part,
                                            uint64_t b, unsigned tile) {
  return (((uint64_t)(plane * 2 + part) * p.bh + b) * p.ntiles + tile) * Geo<DP>::kImg;
}

// ---- pre-pass ---------------------------------------------------------------------------------

// Block (tile, problem, operand x: q, dout, k, v): stages the operand's 64 x DP tile in shared
// memory (row stride DP + 4: a row image's 4 values are one conflict-free 16-byte load), then
// writes its row image and (q, dout, k) its transposed image, big and small parts, each thread 4
// consecutive floats of an image with one 16-byte store.
template <unsigned DP>
__global__ void __launch_bounds__(256)
    planes_kernel(WP p, const float *__restrict q, const float *__restrict dout,
                  const float *__restrict k, const float *__restrict v, float *__restrict planes) {
  pdl_trigger();  // dkdv_kernel, launched after it, waits for its completion before any read
  constexpr unsigned kImg = Geo<DP>::kImg;
  constexpr unsigned kS = DP + 4;
  __shared__ __align__(16) float s[kT * kS];
  const unsigned tile = blockIdx.x, x = blockIdx.z;
  const bool vec = p.rows4;
  auto split4 = [](float4 a, float4 &big, float4 &small) {
    uint32_t b, m;
    mma::split(a.x, b, m), big.x = __uint_as_float(b), small.x = __uint_as_float(m);
    mma::split(a.y, b, m), big.y = __uint_as_float(b), small.y = __uint_as_float(m);
    mma::split(a.z, b, m), big.z = __uint_as_float(b), small.z = __uint_as_float(m);
    mma::split(a.w, b, m), big.w = __uint_as_float(b), small.w = __uint_as_float(m);
  };
  for (uint64_t b = blockIdx.y; b < p.bh; b += gridDim.y) {
    const attn::RowMap &m = x == 0 ? p.rows.q : x == 1 ? p.rows.dout : x == 2 ? p.rows.k : p.rows.v;
    const float *X = (x == 0 ? q : x == 1 ? dout : x == 2 ? k : v) + m.base(b);
    __syncthreads();  // the previous problem's readers are done
    if (vec && reinterpret_cast<uintptr_t>(X) % 16 == 0) {
      for (unsigned e = threadIdx.x; e < kImg / 4; e += 256) {
        const unsigned r = e / (DP / 4), c = 4 * (e % (DP / 4)), row = tile * kT + r;
        *reinterpret_cast<float4 *>(&s[r * kS + c]) =
            (row < p.n && c < p.d)
                ? *reinterpret_cast<const float4 *>(X + (uint64_t)row * m.token + c)
                : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
      }
    } else {
      for (unsigned e = threadIdx.x; e < kImg; e += 256) {
        const unsigned r = e / DP, c = e % DP, row = tile * kT + r;
        s[r * kS + c] = (row < p.n && c < p.d) ? X[(uint64_t)row * m.token + c] : 0.0f;
      }
    }
    __syncthreads();
    const unsigned rowp = x, tp = x == 0 ? kQt : x == 1 ? kDt : x == 2 ? kKt : kPlanes;
    float4 *rb = reinterpret_cast<float4 *>(planes + img_off<DP>(p, rowp, 0, b, tile));
    float4 *rs = reinterpret_cast<float4 *>(planes + img_off<DP>(p, rowp, 1, b, tile));
    for (unsigned o4 = threadIdx.x; o4 < kImg / 4; o4 += 256) {
      // o = 4 o4 + k4 = ((ks * 8 + rg) * 2 + kc) * 32 + r8 * 4 + k4 (wgmma::kmajor_off, R = 64)
      const unsigned r8 = o4 & 7, kc = (o4 >> 3) & 1, rg = (o4 >> 4) & 7, ks = o4 >> 7;
      float4 big, small;
      split4(*reinterpret_cast<const float4 *>(&s[(rg * 8 + r8) * kS + ks * 8 + kc * 4]), big,
             small);
      rb[o4] = big;
      rs[o4] = small;
    }
    if (tp == kPlanes) continue;  // v: no transposed image
    float4 *tb = reinterpret_cast<float4 *>(planes + img_off<DP>(p, tp, 0, b, tile));
    float4 *ts = reinterpret_cast<float4 *>(planes + img_off<DP>(p, tp, 1, b, tile));
    for (unsigned o4 = threadIdx.x; o4 < kImg / 4; o4 += 256) {
      // o = 4 o4 + k4 = ((ks * DP / 8 + rg) * 2 + kc) * 32 + r8 * 4 + k4 (kmajor_off, R = DP)
      const unsigned r8 = o4 & 7, kc = (o4 >> 3) & 1, rg = (o4 >> 4) % (DP / 8),
                     ks = (o4 >> 4) / (DP / 8);
      const unsigned col = rg * 8 + r8, r0 = ks * 8 + kc * 4;
      const float4 a = make_float4(s[inv_perm(r0 + 0) * kS + col], s[inv_perm(r0 + 1) * kS + col],
                                   s[inv_perm(r0 + 2) * kS + col], s[inv_perm(r0 + 3) * kS + col]);
      float4 big, small;
      split4(a, big, small);
      tb[o4] = big;
      ts[o4] = small;
    }
  }
  pdl_wait();  // launched dependent on d_kernel / bits_kernel (whose results it does not read)
}

// Block (key tile, query tile, mask problem): the exclusion bits (mask entry == 0) of a 64 x 64
// tile, one 32-bit word per thread of each kernel holding its 32 scores' bits (kMasked tiles).
__global__ void __launch_bounds__(128)
    bits_kernel(WP p, unsigned mproblems, uint32_t *__restrict bits) {
  pdl_trigger();  // planes_kernel, launched after it, does not read the bits
  __shared__ float s[kT][kT + 1];
  const unsigned jt = blockIdx.x, it = blockIdx.y;
  const unsigned w = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  for (uint64_t mp = blockIdx.z; mp < mproblems; mp += gridDim.z) {
    const float *mb = p.mask + mp * p.mask_stride;
    __syncthreads();
    if (p.mask_vec && it * kT + kT <= p.n && jt * kT + kT <= p.n) {
      float4 m4[8];  // all 8 loads in flight before the stores
#pragma unroll
      for (unsigned u = 0; u < 8; ++u) {
        const unsigned e = threadIdx.x + 128 * u, r = e / (kT / 4), c = 4 * (e % (kT / 4));
        m4[u] = *reinterpret_cast<const float4 *>(mb + (uint64_t)(it * kT + r) * p.n + jt * kT + c);
      }
#pragma unroll
      for (unsigned u = 0; u < 8; ++u) {
        const unsigned e = threadIdx.x + 128 * u, r = e / (kT / 4), c = 4 * (e % (kT / 4));
        s[r][c] = m4[u].x, s[r][c + 1] = m4[u].y, s[r][c + 2] = m4[u].z, s[r][c + 3] = m4[u].w;
      }
    } else {
      for (unsigned e = threadIdx.x; e < kT * kT; e += 128) {
        const unsigned r = e / kT, c = e % kT, i = it * kT + r, j = jt * kT + c;
        s[r][c] = (i < p.n && j < p.n) ? mb[(uint64_t)i * p.n + j] : 1.0f;
      }
    }
    __syncthreads();
    uint32_t kv = 0, qv = 0;
#pragma unroll
    for (unsigned c = 0; c < 8; ++c)
#pragma unroll
      for (unsigned e = 0; e < 4; ++e) {
        // dkdv: rows = keys 16 w + g (+8), columns = queries 8 c + 2 t (+1); dq: the transpose.
        const unsigned a = 16 * w + g + 8 * (e >> 1), z = 8 * c + 2 * t + (e & 1);
        kv |= (uint32_t)(s[z][a] == 0.0f) << (4 * c + e);
        qv |= (uint32_t)(s[a][z] == 0.0f) << (4 * c + e);
      }
    uint32_t *o = bits + mp * p.bits_stride + ((uint64_t)it * p.ntiles + jt) * kBitsPerTile;
    o[threadIdx.x] = kv;
    o[128 + threadIdx.x] = qv;
  }
  pdl_wait();  // launched dependent on d_kernel (whose result it does not read)
}

// The exclusion word of this thread for tile (it, jt) of problem b; order 0: dkdv, 1: dq.
__device__ __forceinline__ uint32_t bits_at(const WP &p, uint64_t b, unsigned it, unsigned jt,
                                            unsigned order, unsigned tid) {
  return p.bits[b * p.bits_stride + ((uint64_t)it * p.ntiles + jt) * kBitsPerTile + order * 128 +
                tid];
}

// The same for a step: the tile's word at DP = 64; at DP = 128 the half that the step's 16
// fragment elements hold (step h of the tile: the word's bits 16 h .. 16 h + 15, shifted down).
template <unsigned DP>
__device__ __forceinline__ uint32_t step_bits(const WP &p, uint64_t b, unsigned it, unsigned jt,
                                              unsigned h, unsigned order, unsigned tid) {
  const uint32_t word = bits_at(p, b, it, jt, order, tid);
  if (Geo<DP>::kS == kT) return word;
  return (word >> (16 * h)) & 0xFFFFu;
}

// ---- shared pieces of the two kernels -----------------------------------------------------------

// FLOATS floats (a multiple of 512) global -> shared by the warpgroup, 16 bytes a copy.
template <unsigned FLOATS>
__device__ __forceinline__ void copy_n(float *dst, const float *src, unsigned tid) {
  static_assert(FLOATS % 512 == 0, "whole rounds of 128 x 16 bytes");
#pragma unroll
  for (unsigned i = 0; i < FLOATS / 512; ++i) {
    const unsigned o = (tid + 128 * i) * 4;
    async::copy16(dst + o, src + o, true);
  }
}

// The big and small images of the resident (plane, problem b, tile) into dst and dst + kImg.
template <unsigned DP>
__device__ __forceinline__ void copy_plane(float *dst, const WP &p, const float *planes,
                                           unsigned plane, uint64_t b, unsigned tile,
                                           unsigned tid) {
  constexpr unsigned kImg = Geo<DP>::kImg;
  copy_n<kImg>(dst, planes + img_off<DP>(p, plane, 0, b, tile), tid);
  copy_n<kImg>(dst + kImg, planes + img_off<DP>(p, plane, 1, b, tile), tid);
}

// The big and small images of step `step` into dst and dst + kStr. At DP = 128 half h of tile
// step / 2: of a row image its rows 32 h .. of every k step, stored as a 32-row image; of a
// transposed image its k steps 4 h .. 4 h + 3, contiguous.
template <unsigned DP>
__device__ __forceinline__ void copy_step(float *dst, const WP &p, const float *planes,
                                          unsigned plane, uint64_t b, unsigned step, unsigned tid) {
  using G = Geo<DP>;
  constexpr unsigned kHalves = kT / G::kS, kU = 2 * G::kS;  // kU: 16-byte units per k step
  const unsigned tile = step / kHalves, h = step % kHalves;
#pragma unroll
  for (unsigned part = 0; part < 2; ++part) {
    const float *img = planes + img_off<DP>(p, plane, part, b, tile);
    float *to = dst + part * G::kStr;
    if (plane >= kQt || kHalves == 1) {
      copy_n<G::kStr>(to, img + h * G::kStr, tid);
    } else {
#pragma unroll
      for (unsigned i = 0; i < G::kStr / 512; ++i) {
        const unsigned u = tid + 128 * i, j = u / kU, x = u % kU;
        async::copy16(to + j * 8 * G::kS + 4 * x, img + j * 8 * kT + h * 8 * G::kS + 4 * x, true);
      }
    }
  }
}

// The dout^T step image rows that one group's dV products read: all of them (HALF < 0) or half
// HALF (d rows HALF DP / 2 .. of every k step: 4 DP of its 8 DP floats), by that group alone.
template <unsigned DP, int HALF>
__device__ __forceinline__ void copy_step_t(float *dst, const WP &p, const float *planes,
                                            unsigned plane, uint64_t b, unsigned step,
                                            unsigned tid) {
  using G = Geo<DP>;
  if constexpr (HALF < 0) {
    copy_step<DP>(dst, p, planes, plane, b, step, tid);
  } else {
    constexpr unsigned kHalves = kT / G::kS;
    const unsigned tile = step / kHalves, h = step % kHalves;
#pragma unroll
    for (unsigned part = 0; part < 2; ++part) {
      const float *img = planes + img_off<DP>(p, plane, part, b, tile) + h * G::kStr;
      float *to = dst + part * G::kStr;
#pragma unroll
      for (unsigned i = 0; i < G::kStr / 1024; ++i) {
        const unsigned u = tid + 128 * i, c = u / DP, x = u % DP;  // DP units per half k step
        const unsigned o = c * 8 * DP + HALF * 4 * DP + 4 * x;
        async::copy16(to + o, img + o, true);
      }
    }
  }
}

// Descriptors of the block's images: one base (desc_lo) and a 32-bit add per operand (desc_at).
struct Smem {
  const float *base;
  uint32_t lo;
};

__device__ __forceinline__ Smem smem_of(const float *sm) {
  return Smem{sm, wg::desc_lo((uint32_t)__cvta_generic_to_shared(sm), 128)};
}

// The operand at k step `step` of an image of R rows (K-major: 8 R floats per k step).
template <unsigned R>
__device__ __forceinline__ uint64_t dsc(const Smem &m, const float *img, unsigned step) {
  return wg::desc_at(m.lo, (uint32_t)(img - m.base + step * 8 * R) * 4u, 256);
}

// acc = A B^T over the head dimension, split TF32, the small terms first. A: a resident 64-row
// image (ab / as, big / small); B: a step's kS-row image (bb / bs).
template <unsigned DP, unsigned NV>
__device__ __forceinline__ void prod_rows(const Smem &m, float (&acc)[NV], const float *ab,
                                          const float *as, const float *bb, const float *bs) {
  constexpr unsigned kS = Geo<DP>::kS;
#pragma unroll
  for (unsigned j = 0; j < DP / 8; ++j) {
    wg::ss(acc, dsc<kT>(m, as, j), dsc<kS>(m, bb, j), j > 0);
    wg::ss(acc, dsc<kT>(m, ab, j), dsc<kS>(m, bs, j), 1);
    wg::ss(acc, dsc<kT>(m, ab, j), dsc<kS>(m, bb, j), 1);
  }
}

// The same with A in registers (a[j]: the A fragment of k step j; Geo::kRegA).
template <unsigned DP, unsigned NV>
__device__ __forceinline__ void prod_rows_reg(const Smem &m, float (&acc)[NV],
                                              const uint32_t (&ab)[DP / 8][4],
                                              const uint32_t (&as)[DP / 8][4], const float *bb,
                                              const float *bs) {
  constexpr unsigned kS = Geo<DP>::kS;
#pragma unroll
  for (unsigned j = 0; j < DP / 8; ++j) {
    wg::rs(acc, as[j], dsc<kS>(m, bb, j), j > 0);
    wg::rs(acc, ab[j], dsc<kS>(m, bs, j), 1);
    wg::rs(acc, ab[j], dsc<kS>(m, bb, j), 1);
  }
}

// acc = A B^T as prod_rows (the same products in the same order: the same bits) with A's big
// part in registers and its small part an image (as).
template <unsigned DP, unsigned NV>
__device__ __forceinline__ void prod_rows_big_reg(const Smem &m, float (&acc)[NV],
                                                  const uint32_t (&ab)[DP / 8][4],
                                                  const float *as, const float *bb,
                                                  const float *bs) {
  constexpr unsigned kS = Geo<DP>::kS;
#pragma unroll
  for (unsigned j = 0; j < DP / 8; ++j) {
    wg::ss(acc, dsc<kT>(m, as, j), dsc<kS>(m, bb, j), j > 0);
    wg::rs(acc, ab[j], dsc<kS>(m, bs, j), 1);
    wg::rs(acc, ab[j], dsc<kS>(m, bb, j), 1);
  }
}

// This thread's A fragments (big; small unless !SMALL) of the 64-row resident tile `tile` of
// plane, rows 16 w + g (+8), columns 8 j + t (+4), from the plane images in global memory.
template <unsigned DP, bool SMALL = true, unsigned NS = DP / 8>
__device__ __forceinline__ void load_a(uint32_t (&ab)[DP / 8][4], uint32_t (&as)[NS][4],
                                       const WP &p, const float *planes, unsigned plane,
                                       uint64_t b, unsigned tile, unsigned w, unsigned g,
                                       unsigned t) {
  const float *ib = planes + img_off<DP>(p, plane, 0, b, tile);
  const float *is = planes + img_off<DP>(p, plane, 1, b, tile);
#pragma unroll
  for (unsigned j = 0; j < DP / 8; ++j)
#pragma unroll
    for (unsigned e = 0; e < 4; ++e) {
      const uint32_t o = wg::kmajor_off(16 * w + g + 8 * (e & 1), 8 * j + t + 4 * (e >> 1), kT);
      ab[j][e] = __float_as_uint(__ldg(ib + o));
      if constexpr (SMALL) as[j][e] = __float_as_uint(__ldg(is + o));
    }
}

// The split of a register operand (P, dS) in 3 instructions: big = x rounded to TF32 (nearest,
// ties away, finite x), small = x - big passed whole, which the tensor cores read TRUNCATED to
// TF32 (within 2^-21 |x|; the header's bound). A NaN or infinite x keeps a NaN small.
__device__ __forceinline__ void split_a(float x, uint32_t &big, uint32_t &small) {
  big = (__float_as_uint(x) + 0x1000u) & ~0x1fffu;
  small = __float_as_uint(x - __uint_as_float(big));
}

// acc (64 x DP) += X B where X (64 x kS) is held as C fragments in x (row 16 w + g (+8), column
// 8 c + 2t (+1)) and B's transposed step images tb / ts (DP rows): each 8-column step of x is an
// A fragment in the permuted order, split in registers.
template <unsigned DP, unsigned NA, unsigned NV>
__device__ __forceinline__ void prod_frag(const Smem &m, float (&acc)[NA], const float (&x)[NV],
                                          const float *tb, const float *ts) {
#pragma unroll
  for (unsigned c = 0; c < NV / 4; ++c) {
    uint32_t big[4], small[4];
    split_a(x[4 * c], big[0], small[0]);
    split_a(x[4 * c + 2], big[1], small[1]);
    split_a(x[4 * c + 1], big[2], small[2]);
    split_a(x[4 * c + 3], big[3], small[3]);
    wg::rs(acc, small, dsc<DP>(m, tb, c), 1);
    wg::rs(acc, big, dsc<DP>(m, ts, c), 1);
    wg::rs(acc, big, dsc<DP>(m, tb, c), 1);
  }
}

// The mask tile of queries i0.. (rows) and keys j0.. (columns) into mt (row stride kMS) by
// cp.async, zeros past n (out of range, never read as a mask).
template <unsigned NI, unsigned NJ>
__device__ __forceinline__ void copy_mask(float *mt, const WP &p, const float *mb, unsigned i0,
                                          unsigned j0, unsigned tid) {
  static_assert(NI <= kT && NJ <= kT, "a staged mask tile holds at most 64 x 64");
  if (p.mask_vec) {
#pragma unroll
    for (unsigned u = tid; u < NI * NJ / 4; u += 128) {
      const unsigned r = u / (NJ / 4), c = 4 * (u % (NJ / 4)), i = i0 + r, j = j0 + c;
      const bool ok = i < p.n && j < p.n;
      async::copy16(mt + r * kMS + c, ok ? mb + (uint64_t)i * p.n + j : mb, ok);
    }
  } else {
    for (unsigned u = tid; u < NI * NJ; u += 128) {
      const unsigned r = u / NJ, c = u % NJ, i = i0 + r, j = j0 + c;
      const bool ok = i < p.n && j < p.n;
      async::copy4(mt + r * kMS + c, ok ? mb + (uint64_t)i * p.n + j : mb, ok);
    }
  }
}

// The header's s(i, j) from the product on a kGeneral tile; m: the mask entry (1 without one).
__device__ __forceinline__ float score_at(const WP &p, unsigned i, unsigned j, float dot,
                                          float m) {
  if (i >= p.n || j >= p.n) return kNegInf;
  return attn::score(dot, (p.causal && j > i) || m == 0.0f, p.scale, p.fill);
}

// P = exp(s - lse) for a non-excluded score, 0 for an excluded one, the exp by attn::exp_ex2.
// PLAIN: a score that cannot be excluded (a kPlain tile, an allowed entry of a kMasked one; its
// row's lse is then finite): no test.
template <bool PLAIN = false>
__device__ __forceinline__ float prob(float s, float ref) {
  if (!PLAIN && s == kNegInf) return 0.0f;
  return attn::exp_ex2(s - ref);
}

// How a tile of queries i0 .. i0 + ni - 1 and keys j0 .. j0 + nj - 1 computes its scores.
// kPlain: wholly in range, unmasked, below the diagonal: s = dot * scale, never excluded.
// kMasked: the same but masked, with mask_fill = -inf: excluded where the exclusion bit
// (bits_kernel) is set, else s = dot * scale (no mask tile, bounds, causal or fill arithmetic).
// kGeneral: the header's s(i, j) in full (score_at), the mask from a staged mask tile.
enum Kind { kPlain, kMasked, kGeneral };
__device__ __forceinline__ Kind tile_kind(const WP &p, unsigned i0, unsigned ni, unsigned j0,
                                          unsigned nj) {
  if (i0 + ni > p.n || j0 + nj > p.n || (p.causal && j0 + nj - 1 > i0)) return kGeneral;
  if (p.mask == nullptr) return kPlain;
  return p.bits != nullptr ? kMasked : kGeneral;
}

// The index of C fragment element e's query among the thread's per-query values (lse, D), the
// queries being the fragment's columns (QCOLS: dkdv) or rows (dq).
template <bool QCOLS>
__device__ __forceinline__ constexpr unsigned qidx(unsigned e) {
  return QCOLS ? 2 * (e / 4) + (e & 1) : (e & 3) >> 1;
}

// P = exp(s scale - lse) in place of s over a kPlain tile, or a kMasked one (MASKED: 0 where bit
// e of the exclusion word exw is set).
template <bool QCOLS, bool MASKED, unsigned NR, unsigned NV>
__device__ __forceinline__ void probs(float (&s)[NV], const float (&L)[NR], float scale,
                                      uint32_t exw) {
  static_assert(NR == (QCOLS ? NV / 2 : 2), "one lse per query of the thread");
#pragma unroll
  for (unsigned e = 0; e < NV; ++e) {
    const float pr = prob<true>(s[e] * scale, L[qidx<QCOLS>(e)]);
    s[e] = MASKED && ((exw >> e) & 1u) ? 0.0f : pr;
  }
}

// dS = P (dP - D) over a tile in place of dp (P in pr); zero where bit e of ex is set (an
// excluded score; ex == 0 on every kPlain tile).
template <bool QCOLS, unsigned NR, unsigned NV>
__device__ __forceinline__ void dscores(float (&dp)[NV], const float (&pr)[NV],
                                        const float (&Dq)[NR], uint32_t ex) {
  static_assert(NR == (QCOLS ? NV / 2 : 2), "one D per query of the thread");
  if (ex == 0) {
#pragma unroll
    for (unsigned e = 0; e < NV; ++e) dp[e] = pr[e] * (dp[e] - Dq[qidx<QCOLS>(e)]);
  } else {
#pragma unroll
    for (unsigned e = 0; e < NV; ++e) {
      const float v = pr[e] * (dp[e] - Dq[qidx<QCOLS>(e)]);
      dp[e] = (ex >> e) & 1u ? 0.0f : v;
    }
  }
}

// A thread's share of a 64-row accumulator of problem b into dst (n x d, rows where dm says; none
// if NULLABLE and dst is NULL): rows r0 + 16 w + g (+8), columns c0 + 8 c + 2 t (+1) inside
// n x d, times scale if SCALE.
template <bool SCALE, bool NULLABLE, unsigned NA>
__device__ __forceinline__ void store_acc(float *dst, const attn::RowMap &dm, const WP &p,
                                          uint64_t b, unsigned r0, unsigned c0,
                                          const float (&acc)[NA], unsigned w, unsigned g,
                                          unsigned t) {
  float *db = (!NULLABLE || dst) ? dst + dm.base(b) : dst;
#pragma unroll
  for (unsigned c = 0; c < NA / 4; ++c)
#pragma unroll
    for (unsigned e = 0; e < 4; ++e) {
      const unsigned r = r0 + 16 * w + g + 8 * (e >> 1), col = c0 + 8 * c + 2 * t + (e & 1);
      if ((!NULLABLE || dst) && r < p.n && col < p.d)
        db[(uint64_t)r * dm.token + col] = SCALE ? acc[4 * c + e] * p.scale : acc[4 * c + e];
    }
}

// ---- the kernels -------------------------------------------------------------------------------
//
// The hand-over of P: the P group waits on "empty", stores P and its exclusion word, arrives at
// "full"; the dS group waits on "full", loads them, arrives at "empty" (one arrival before the
// first tile; none after the block's last). A bar.arrive orders the arriving thread's earlier
// shared accesses before the barrier's completion (the PTX memory model); compute-sanitizer
// racecheck does not model that and reports the hand-over as hazards (scripts/racecheck_arrive.cu).

// A thread's place in its warpgroup: index tid < 128, warp w < 4, lane 4 g + t.
struct Lanes {
  unsigned tid, w, g, t;
};
__device__ __forceinline__ Lanes lanes_of() {
  const unsigned tid = threadIdx.x % 128, w = tid / 32, lane = threadIdx.x % 32;
  return Lanes{tid, w, lane / 4, lane % 4};
}

// A group's start of problem b, one cp.async group: its resident operand's images (RES: kept in
// shared memory) of tile `tile`, and its streamed operand's images of step `first`.
template <unsigned DP, bool RES>
__device__ __forceinline__ void open_problem(const WP &p, const float *planes, uint64_t b,
                                             float *res, unsigned res_plane, unsigned tile,
                                             float *step, unsigned step_plane, unsigned first,
                                             unsigned tid) {
  if constexpr (RES) copy_plane<DP>(res, p, planes, res_plane, b, tile, tid);
  copy_step<DP>(step, p, planes, step_plane, b, first, tid);
  async::commit();
}

// This thread's per-query values (lse or D) of dq's rows i0 + 16 w + g + 8 h (0 past n, and
// where NULLABLE and src is null).
template <bool NULLABLE>
__device__ __forceinline__ void row_values(float (&v)[2], const WP &p, const float *src,
                                           uint64_t b, unsigned i0, unsigned w, unsigned g) {
#pragma unroll
  for (unsigned h = 0; h < 2; ++h) {
    const unsigned i = i0 + 16 * w + g + 8 * h;
    v[h] = ((!NULLABLE || src != nullptr) && i < p.n) ? src[b * p.n + i] : 0.0f;
  }
}

// Named barriers (0 is __syncthreads): 1 + group within a group, and the hand-over pair.
enum Bar : unsigned { kBarP = 1, kBarDS = 2, kBarFull = 3, kBarEmpty = 4 };

__device__ __forceinline__ void bar_sync(unsigned id, unsigned threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void bar_arrive(unsigned id, unsigned threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// This group's cp.async groups but the newest N have landed and are visible to its products.
template <unsigned N>
__device__ __forceinline__ void group_landed(unsigned bar) {
  async::wait<N>();
  wg::fence_proxy_async();
  bar_sync(bar, 128);
}

// N per-query values (lse or D) of queries i0 .. i0 + N - 1 into dst by cp.async, by the group's
// threads tid < N (zeros past n and where src is NULL).
template <unsigned N>
__device__ __forceinline__ void copy_rows(float *dst, const WP &p, const float *src, uint64_t b,
                                          unsigned i0, unsigned tid) {
  if (tid >= N) return;
  const bool ok = src != nullptr && i0 + tid < p.n;
  async::copy4(dst + tid, ok ? src + b * p.n + i0 + tid : dst /* unread */, ok);
}

// The staged per-query values (lse or D) of this thread's NQ queries 8 c + 2 t + h of a dkdv
// step (the fragment's columns), entry 2 c + h.
template <unsigned NQ>
__device__ __forceinline__ void query_values(float (&v)[NQ], const float *src, unsigned t) {
#pragma unroll
  for (unsigned c = 0; c < NQ / 2; ++c) {
    const float2 x = *reinterpret_cast<const float2 *>(src + 8 * c + 2 * t);
    v[2 * c] = x.x, v[2 * c + 1] = x.y;
  }
}

// The hand-over buffer (Geo::kXs floats): fragment element e of thread T at xs[512 (e / 4) + 4 T
// + e % 4] (16-byte stores and loads, conflict-free), its exclusion word at xs[128 NV + T].
template <unsigned NV>
__device__ __forceinline__ void put_p(float *xs, const float (&s)[NV], uint32_t ex, unsigned tid) {
#pragma unroll
  for (unsigned c = 0; c < NV / 4; ++c)
    *reinterpret_cast<float4 *>(xs + 512 * c + 4 * tid) =
        make_float4(s[4 * c], s[4 * c + 1], s[4 * c + 2], s[4 * c + 3]);
  reinterpret_cast<uint32_t *>(xs)[128 * NV + tid] = ex;
}
template <unsigned NV>
__device__ __forceinline__ uint32_t get_p(const float *xs, float (&s)[NV], unsigned tid) {
#pragma unroll
  for (unsigned c = 0; c < NV / 4; ++c) {
    const float4 v = *reinterpret_cast<const float4 *>(xs + 512 * c + 4 * tid);
    s[4 * c] = v.x, s[4 * c + 1] = v.y, s[4 * c + 2] = v.z, s[4 * c + 3] = v.w;
  }
  return reinterpret_cast<const uint32_t *>(xs)[128 * NV + tid];
}

// The P group's side of the hand-over.
template <unsigned NV>
__device__ __forceinline__ void give_p(float *xs, const float (&s)[NV], uint32_t ex,
                                       unsigned tid) {
  bar_sync(kBarEmpty, 256);
  put_p(xs, s, ex, tid);
  bar_arrive(kBarFull, 256);
}

// The dS group's side; release false on the block's last tile (no arrival pending at exit).
template <unsigned NV>
__device__ __forceinline__ uint32_t take_p(const float *xs, float (&s)[NV], unsigned tid,
                                           bool release) {
  bar_sync(kBarFull, 256);
  const uint32_t ex = get_p(xs, s, tid);
  if (release) bar_arrive(kBarEmpty, 256);
  return ex;
}

// P over a kGeneral tile of queries i0.. and keys j0.. in place of the products s, the mask from
// the staged tile mt; returns the exclusion word.
template <bool QCOLS, unsigned NR, unsigned NV>
__device__ __forceinline__ uint32_t general_probs(const WP &p, float (&s)[NV], const float (&L)[NR],
                                                  unsigned i0, unsigned j0, const float *mt,
                                                  bool masked, unsigned w, unsigned g, unsigned t) {
  uint32_t ex = 0;
#pragma unroll
  for (unsigned c = 0; c < NV / 4; ++c)
#pragma unroll
    for (unsigned e = 0; e < 4; ++e) {
      const unsigned a = 16 * w + g + 8 * (e >> 1), z = 8 * c + 2 * t + (e & 1);
      const unsigned ir = QCOLS ? z : a, jr = QCOLS ? a : z;
      const float sc = score_at(p, i0 + ir, j0 + jr, s[4 * c + e],
                                masked ? mt[ir * kMS + jr] : 1.0f);
      s[4 * c + e] = prob(sc, L[qidx<QCOLS>(4 * c + e)]);
      ex |= (uint32_t)(sc == kNegInf) << (4 * c + e);
    }
  return ex;
}

// P in place of the products s, by the tile's kind; returns the exclusion word.
template <bool QCOLS, unsigned NR, unsigned NV>
__device__ __forceinline__ uint32_t tile_probs(const WP &p, Kind kind, float (&s)[NV],
                                               const float (&L)[NR], uint32_t exw, unsigned i0,
                                               unsigned j0, const float *mt, bool masked,
                                               unsigned w, unsigned g, unsigned t) {
  if (kind == kPlain) {
    probs<QCOLS, false>(s, L, p.scale, 0u);
    return 0u;
  }
  if (kind == kMasked) {
    probs<QCOLS, true>(s, L, p.scale, exw);
    return exw;
  }
  return general_probs<QCOLS>(p, s, L, i0, j0, mt, masked, w, g, t);
}

constexpr size_t kMaskBytes = kT * kMS * sizeof(float);
static_assert(Geo<64>::kDkdvFloats * 4 + kMaskBytes <= 227 * 1024, "sm_90's shared memory");
static_assert(Geo<128>::kDkdvFloats * 4 + kMaskBytes <= 227 * 1024, "sm_90's shared memory");

// dkdv_kernel: block (key tile jt, problem), looping over the query steps. Shared memory: as
// Geo::kDkdvFloats, then the mask tile (kS queries x 64 keys) when masked.
template <unsigned DP, unsigned DV>
__global__ void __launch_bounds__(256, 1)
    dkdv_kernel(WP p, const float *__restrict planes, const float *__restrict lse,
                const float *__restrict D, float *__restrict dk, float *__restrict dv) {
  // Launched dependent on planes_kernel: its images (and through its own wait D and the bits) are
  // visible once pdl_wait returns; only then may dq_kernel, which reads the images, begin.
  pdl_wait();
  pdl_trigger();
  using G = Geo<DP>;
  // Which group computes dV += P^T dout (DV: 0 the dS group, 1 the P group, 2 the P group its
  // first DP / 2 columns and the dS group the rest). Geo::kDV picks 1 or 2.
  static_assert(DV <= 2, "dV by the dS group, the P group, or split");
  constexpr bool PV = DV != 0, SV = DV != 1;
  constexpr unsigned kNAP = DV == 1 ? G::kNA : DV == 2 ? G::kNA / 2 : 1;
  constexpr unsigned kNAS = DV == 0 ? G::kNA : DV == 2 ? G::kNA / 2 : 1;
  constexpr int kHalfP = DV == 2 ? 0 : -1, kHalfS = DV == 2 ? 1 : -1;
  constexpr unsigned kOffS = DV == 2 ? 4 * DP : 0;  // floats into each k step of dout^T
  constexpr unsigned kS = G::kS, kNV = G::kNV, kHalves = kT / kS;
  float *sm = async::dynamic_smem();
  const Smem m = smem_of(sm);
  float *kb = sm, *qb = kb + G::kResA, *vb = qb + 2 * G::kStr, *ob = vb + 2 * G::kImg;
  float *qtb = ob + 2 * G::kStr, *otb = qtb + 2 * G::kStr, *ls = otb + 2 * G::kStr, *ds = ls + kS;
  float *xs = ds + kS, *mt = xs + G::kXs;
  const auto [tid, w, g, t] = lanes_of();
  const unsigned jt = blockIdx.x, jb = jt * kT;
  const unsigned nsteps = (p.n + kS - 1) / kS;
  const unsigned first = p.skip ? jb / kS : 0;
  if (threadIdx.x < 128) {
    // P group: S^T = K Q^T, P^T.
    uint32_t ka[G::kRegA ? DP / 8 : 1][4], ksm[G::kRegA ? DP / 8 : 1][4];
    for (uint64_t b = blockIdx.y; b < p.bh; b += gridDim.y) {
      const float *mb = p.mask ? p.mask + b * p.mask_stride : nullptr;
      bar_sync(kBarP, 128);  // the previous problem's products are done
      open_problem<DP, !G::kRegA>(p, planes, b, kb, kKr, jt, qb, kQr, first, tid);
      copy_rows<kS>(ls, p, lse, b, first * kS, tid);
      if (mb && tile_kind(p, first * kS, kS, jb, kT) == kGeneral)
        copy_mask<kS, kT>(mt, p, mb, first * kS, jb, tid);
      async::commit();
      if constexpr (PV) {
        copy_step_t<DP, kHalfP>(otb, p, planes, kDt, b, first, tid);
        async::commit();
      }
      if constexpr (G::kRegA) load_a<DP>(ka, ksm, p, planes, kKr, b, jt, w, g, t);
      float gv[kNAP];
#pragma unroll
      for (unsigned e = 0; e < kNAP; ++e) gv[e] = 0.0f;
      // Loop invariant at the top: two groups in flight for step it, oldest first: the Q row
      // images (with K on entry), lse and the mask tile (PV: and a third, the dout^T images).
      for (unsigned it = first; it < nsteps; ++it) {
        const unsigned i0 = it * kS;
        const bool more = it + 1 < nsteps;
        group_landed<PV ? 2 : 1>(kBarP);
        const Kind kind = tile_kind(p, i0, kS, jb, kT);
        const uint32_t exw =
            kind == kMasked ? step_bits<DP>(p, b, it / kHalves, jt, it % kHalves, 0, tid) : 0u;
        float s[kNV];
        wg::fence();
        if constexpr (G::kRegA)
          prod_rows_reg<DP>(m, s, ka, ksm, qb, qb + G::kStr);
        else
          prod_rows<DP>(m, s, kb, kb + G::kImg, qb, qb + G::kStr);
        wg::commit();
        group_landed<PV ? 1 : 0>(kBarP);  // lse and the mask tile, under the products
        float L[kNV / 2];
        query_values(L, ls, t);
        wg::wait<0>();
        wg::reg_fence(s);
        bar_sync(kBarP, 128);  // every warp's products have read the Q images
        if (more) copy_step<DP>(qb, p, planes, kQr, b, it + 1, tid);
        async::commit();
        const uint32_t ex =
            tile_probs<true>(p, kind, s, L, exw, i0, jb, mt, mb != nullptr, w, g, t);
        bar_sync(kBarP, 128);  // every thread is past its reads of ls and mt
        if (more) {
          copy_rows<kS>(ls, p, lse, b, i0 + kS, tid);
          if (mb && tile_kind(p, i0 + kS, kS, jb, kT) == kGeneral)
            copy_mask<kS, kT>(mt, p, mb, i0 + kS, jb, tid);
        }
        async::commit();
        give_p(xs, s, ex, tid);
        if constexpr (PV) {
          group_landed<2>(kBarP);  // the dout^T images
          wg::fence();
          prod_frag<DP>(m, gv, s, otb, otb + G::kStr);
          wg::commit();
          wg::wait<0>();
          bar_sync(kBarP, 128);  // every warp's products have read the dout^T images
          if (more) copy_step_t<DP, kHalfP>(otb, p, planes, kDt, b, it + 1, tid);
          async::commit();
        }
      }
      async::wait<0>();
      if constexpr (PV) {
        wg::reg_fence(gv);
        store_acc<false, true>(dv, p.rows.dv, p, b, jb, 0, gv, w, g, t);
      }
    }
  } else {
    // dS group: dP^T = V dout^T, dS^T = P^T (dP^T - D), dV += P^T dout, dK += dS^T Q.
    bar_arrive(kBarEmpty, 256);  // the hand-over buffer starts empty
    for (uint64_t b = blockIdx.y; b < p.bh; b += gridDim.y) {
      const bool last_problem = b + gridDim.y >= p.bh;
      bar_sync(kBarDS, 128);
      open_problem<DP, true>(p, planes, b, vb, kVr, jt, ob, kDr, first, tid);
      copy_rows<kS>(ds, p, D, b, first * kS, tid);
      async::commit();
      copy_step<DP>(qtb, p, planes, kQt, b, first, tid);
      if constexpr (SV) copy_step_t<DP, kHalfS>(otb, p, planes, kDt, b, first, tid);
      async::commit();
      float gk[G::kNA], gv[kNAS];
#pragma unroll
      for (unsigned e = 0; e < G::kNA; ++e) gk[e] = 0.0f;
#pragma unroll
      for (unsigned e = 0; e < kNAS; ++e) gv[e] = 0.0f;
      // Loop invariant at the top: three groups in flight for step it, oldest first: the dout
      // row images (with V on entry), D, the Q^T and dout^T images.
      for (unsigned it = first; it < nsteps; ++it) {
        const unsigned i0 = it * kS;
        const bool more = it + 1 < nsteps;
        group_landed<2>(kBarDS);
        float dp[kNV];
        wg::fence();
        prod_rows<DP>(m, dp, vb, vb + G::kImg, ob, ob + G::kStr);
        wg::commit();
        group_landed<1>(kBarDS);  // D, under the products
        float Dq[kNV / 2];
        query_values(Dq, ds, t);
        wg::wait<0>();
        wg::reg_fence(dp);
        bar_sync(kBarDS, 128);  // every warp's products have read the dout images
        if (more) copy_step<DP>(ob, p, planes, kDr, b, it + 1, tid);
        async::commit();
        float pr[kNV];
        const uint32_t ex = take_p(xs, pr, tid, more || !last_problem);
        dscores<true>(dp, pr, Dq, ex);  // dS^T
        group_landed<1>(kBarDS);  // the Q^T, dout^T images; every thread is past its reads of ds
        if (more) copy_rows<kS>(ds, p, D, b, i0 + kS, tid);
        async::commit();
        wg::fence();
        if constexpr (SV) {
          // dV's products first, in their own group: the dout^T images are refilled as soon
          // as those are done, under dK's products.
          prod_frag<DP>(m, gv, pr, otb + kOffS, otb + G::kStr + kOffS);
          wg::commit();
          prod_frag<DP>(m, gk, dp, qtb, qtb + G::kStr);
          wg::commit();
          wg::wait<1>();
          bar_sync(kBarDS, 128);  // every warp's dV products have read the dout^T images
          if (more) copy_step_t<DP, kHalfS>(otb, p, planes, kDt, b, it + 1, tid);
        } else {
          prod_frag<DP>(m, gk, dp, qtb, qtb + G::kStr);
          wg::commit();
        }
        wg::wait<0>();
        bar_sync(kBarDS, 128);  // every warp's products have read the Q^T images
        if (more) copy_step<DP>(qtb, p, planes, kQt, b, it + 1, tid);
        async::commit();
      }
      async::wait<0>();
      wg::reg_fence(gk);
      wg::reg_fence(gv);
      store_acc<true, true>(dk, p.rows.dk, p, b, jb, 0, gk, w, g, t);
      if constexpr (SV)
        store_acc<false, true>(dv, p.rows.dv, p, b, jb, DV == 2 ? DP / 2 : 0, gv, w, g, t);
    }
  }
}

// dq_kernel: block (query tile it, problem), looping over the key steps up to the diagonal when
// skipping. Shared memory: as Geo::kDqFloats, then the mask tile (64 x kS) when masked.
template <unsigned DP>
__global__ void __launch_bounds__(256, 1)
    dq_kernel(WP p, const float *__restrict planes, const float *__restrict lse,
              const float *__restrict D, float *__restrict dq) {
  using G = Geo<DP>;
  constexpr unsigned kS = G::kS, kNV = G::kNV, kHalves = kT / kS;
  float *sm = async::dynamic_smem();
  const Smem m = smem_of(sm);
  float *qb = sm, *kb = qb + G::kResA, *ob = kb + 2 * G::kStr, *vb = ob + 2 * G::kImg;
  float *ktb = vb + 2 * G::kStr, *xs = ktb + 2 * G::kStr, *mt = xs + G::kXs;
  const auto [tid, w, g, t] = lanes_of();
  const unsigned it = blockIdx.x, i0 = it * kT;
  const unsigned nsteps = (p.n + kS - 1) / kS;
  const unsigned diag = (i0 + kT - 1) / kS;  // the step holding key i0 + 63
  const unsigned last = p.skip && diag < nsteps ? diag : nsteps - 1;
  if (threadIdx.x < 128) {
    // P group: S = Q K^T, P.
    uint32_t qa[G::kRegA ? DP / 8 : 1][4], qsm[G::kRegA ? DP / 8 : 1][4];
    for (uint64_t b = blockIdx.y; b < p.bh; b += gridDim.y) {
      const float *mb = p.mask ? p.mask + b * p.mask_stride : nullptr;
      bar_sync(kBarP, 128);
      open_problem<DP, !G::kRegA>(p, planes, b, qb, kQr, it, kb, kKr, 0, tid);
      if (mb && tile_kind(p, i0, kT, 0, kS) == kGeneral) copy_mask<kT, kS>(mt, p, mb, i0, 0, tid);
      async::commit();
      float L[2];
      row_values<false>(L, p, lse, b, i0, w, g);
      if constexpr (G::kRegA) load_a<DP>(qa, qsm, p, planes, kQr, b, it, w, g, t);
      // Loop invariant at the top: two groups in flight for step jt, oldest first: the K row
      // images (with Q on entry), the mask tile (an empty group unless needed).
      for (unsigned jt = 0; jt <= last; ++jt) {
        const unsigned j0 = jt * kS;
        const bool more = jt + 1 <= last;
        group_landed<1>(kBarP);
        const Kind kind = tile_kind(p, i0, kT, j0, kS);
        const uint32_t exw =
            kind == kMasked ? step_bits<DP>(p, b, it, jt / kHalves, jt % kHalves, 1, tid) : 0u;
        float s[kNV];
        wg::fence();
        if constexpr (G::kRegA)
          prod_rows_reg<DP>(m, s, qa, qsm, kb, kb + G::kStr);
        else
          prod_rows<DP>(m, s, qb, qb + G::kImg, kb, kb + G::kStr);
        wg::commit();
        if (kind == kGeneral && mb) group_landed<0>(kBarP);  // the mask tile, under the products
        wg::wait<0>();
        wg::reg_fence(s);
        bar_sync(kBarP, 128);  // every warp's products have read the K images
        if (more) copy_step<DP>(kb, p, planes, kKr, b, jt + 1, tid);
        async::commit();
        const uint32_t ex =
            tile_probs<false>(p, kind, s, L, exw, i0, j0, mt, mb != nullptr, w, g, t);
        bar_sync(kBarP, 128);  // every thread is past its reads of mt
        if (more && mb && tile_kind(p, i0, kT, j0 + kS, kS) == kGeneral)
          copy_mask<kT, kS>(mt, p, mb, i0, j0 + kS, tid);
        async::commit();
        give_p(xs, s, ex, tid);
      }
      async::wait<0>();
    }
  } else {
    // dS group: dP = dout V^T, dS = P (dP - D), dQ += dS K.
    bar_arrive(kBarEmpty, 256);
    for (uint64_t b = blockIdx.y; b < p.bh; b += gridDim.y) {
      const bool last_problem = b + gridDim.y >= p.bh;
      bar_sync(kBarDS, 128);
      open_problem<DP, true>(p, planes, b, ob, kDr, it, vb, kVr, 0, tid);
      copy_step<DP>(ktb, p, planes, kKt, b, 0, tid);
      async::commit();
      float Dq[2];
      row_values<true>(Dq, p, D, b, i0, w, g);
      float gq[G::kNA];
#pragma unroll
      for (unsigned e = 0; e < G::kNA; ++e) gq[e] = 0.0f;
      // At DP = 128 dout's big fragments in registers (Geo::kRegA; its small image stays).
      uint32_t oa[G::kRegA ? DP / 8 : 1][4], unused[1][4];
      if constexpr (G::kRegA) load_a<DP, false, 1>(oa, unused, p, planes, kDr, b, it, w, g, t);
      // Loop invariant at the top: two groups in flight for step jt: the V row images (with dout
      // on entry), the K^T images.
      for (unsigned jt = 0; jt <= last; ++jt) {
        const bool more = jt + 1 <= last;
        group_landed<1>(kBarDS);
        float dp[kNV];
        wg::fence();
        if constexpr (G::kRegA)
          prod_rows_big_reg<DP>(m, dp, oa, ob + G::kImg, vb, vb + G::kStr);
        else
          prod_rows<DP>(m, dp, ob, ob + G::kImg, vb, vb + G::kStr);
        wg::commit();
        wg::wait<0>();
        wg::reg_fence(dp);
        bar_sync(kBarDS, 128);  // every warp's products have read the V images
        if (more) copy_step<DP>(vb, p, planes, kVr, b, jt + 1, tid);
        async::commit();
        float pr[kNV];
        const uint32_t ex = take_p(xs, pr, tid, more || !last_problem);
        dscores<false>(dp, pr, Dq, ex);  // dS
        group_landed<1>(kBarDS);  // the K^T images
        wg::fence();
        prod_frag<DP>(m, gq, dp, ktb, ktb + G::kStr);
        wg::commit();
        wg::wait<0>();
        bar_sync(kBarDS, 128);  // every warp's products have read the K^T images
        if (more) copy_step<DP>(ktb, p, planes, kKt, b, jt + 1, tid);
        async::commit();
      }
      async::wait<0>();
      wg::reg_fence(gq);
      store_acc<true, false>(dq, p.rows.dq, p, b, i0, 0, gq, w, g, t);  // launched only for dq
    }
  }
  pdl_wait();  // launched dependent on dkdv_kernel: done only when it is
}

// 64 columns of the plane images at 32 < d <= 64, 128 at 64 < d <= 128.
unsigned padded_d(const attn::Problem &p) { return p.d <= 64 ? 64 : 128; }

uint64_t image_floats(const attn::Problem &p) {
  return 2ull * kPlanes * p.bh * ((p.n + kT - 1) / kT) * kT * padded_d(p);
}

// Mask problems with exclusion words (0: none): a mask with mask_fill = -inf. None past 65535
// tiles a side (bits_kernel's grid y): the general score path reads the mask tiles instead.
uint64_t bits_problems(const attn::Problem &p) {
  if (p.mask == nullptr || p.fill != kNegInf || (p.n + kT - 1) / kT > kMaxGridY) return 0;
  return p.mask_stride == 0 ? 1 : p.bh;
}

// The launches of one head-dimension class. after_ours: the kernel just before on st is d_kernel
// or bits_kernel, which planes_kernel may overlap (it reads neither D nor the bits); otherwise the
// caller's last kernel may have written its inputs, and it waits. dq_kernel may overlap
// dkdv_kernel's last wave (they read the same planes and write different outputs).
template <unsigned DP>
void run(int dev, cudaStream_t st, const WP &wp, const dim3 &grid, bool masked, bool after_ours,
         const float *q, const float *k, const float *v, const float *dout, const float *lse,
         const float *D, float *planes, float *dq, float *dk, float *dv) {
  static SmemAllowed dkdv_smem, dq_smem;  // with the mask tile: the most a launch asks for
  const dim3 pgrid(grid.x, grid.y, 4);
  if (after_ours)
    launch_dependent(dev, "attention (wgmma) planes_kernel", planes_kernel<DP>, pgrid, 256, 0, st,
                     wp, q, dout, k, v, planes);
  else
    launch("attention (wgmma) planes_kernel", planes_kernel<DP>, pgrid, 256, 0, st, wp, q, dout,
           k, v, planes);
  const size_t mask_bytes = masked ? kMaskBytes : 0;
  if (dk || dv) {
    auto kernel = dkdv_kernel<DP, Geo<DP>::kDV>;
    const size_t bytes = Geo<DP>::kDkdvFloats * sizeof(float);
    dkdv_smem.ensure(dev, kernel, bytes + kMaskBytes, "attention (wgmma): cudaFuncSetAttribute");
    launch_dependent(dev, "attention (wgmma) dkdv_kernel", kernel, grid, 256, bytes + mask_bytes,
                     st, wp, planes, lse, D, dk, dv);
  }
  if (dq) {
    auto kernel = dq_kernel<DP>;
    const size_t bytes = Geo<DP>::kDqFloats * sizeof(float);
    dq_smem.ensure(dev, kernel, bytes + kMaskBytes, "attention (wgmma): cudaFuncSetAttribute");
    if (dk || dv)
      launch_dependent(dev, "attention (wgmma) dq_kernel", kernel, grid, 256, bytes + mask_bytes,
                       st, wp, planes, lse, D, dq);
    else
      launch("attention (wgmma) dq_kernel", kernel, grid, 256, bytes + mask_bytes, st, wp, planes,
             lse, D, dq);
  }
}

}  // namespace

// 32 < d: the planes take 14 DP / d floats per element of q, at most 28 (896 at d = 1).
bool bwd_applies(const attn::Problem &p) { return p.d > 32 && p.d <= 128; }

uint64_t bwd_planes_floats(const attn::Problem &p) {
  const uint64_t nt = (p.n + kT - 1) / kT;
  return image_floats(p) + bits_problems(p) * nt * nt * kBitsPerTile;
}

void bwd(int dev, const attn::Problem &p, const Rows &rows, const float *q, const float *k,
         const float *v, const float *dout, const float *lse, const float *D, float *planes,
         float *dq, float *dk, float *dv) {
  cudaStream_t st = stream(dev);
  const unsigned ntiles = (unsigned)((p.n + kT - 1) / kT);
  WP wp{(unsigned)p.n, (unsigned)p.d, (unsigned)p.bh, ntiles, p.mask, p.mask_stride,
        p.scale, p.fill, p.causal, p.causal && p.fill == kNegInf,
        p.mask != nullptr && (uintptr_t)p.mask % 16 == 0 && p.n % 4 == 0, nullptr, 0, rows,
        p.d % 4 == 0 && rows.q.rows_vec4() && rows.dout.rows_vec4() && rows.k.rows_vec4() &&
            rows.v.rows_vec4()};
  const dim3 grid(ntiles, (unsigned)(p.bh < kMaxGridY ? p.bh : kMaxGridY));
  const uint64_t mproblems = bits_problems(p);
  if (mproblems != 0) {
    uint32_t *bits = reinterpret_cast<uint32_t *>(planes + image_floats(p));
    wp.bits = bits;
    wp.bits_stride = p.mask_stride == 0 ? 0 : (uint64_t)ntiles * ntiles * kBitsPerTile;
    // D != nullptr: d_kernel was launched just before (it calls pdl_trigger): the bits overlap it.
    const dim3 bgrid(ntiles, ntiles, (unsigned)(mproblems < kMaxGridY ? mproblems : kMaxGridY));
    if (D != nullptr)
      launch_dependent(dev, "attention (wgmma) bits_kernel", bits_kernel, bgrid, 128, 0, st, wp,
                       (unsigned)mproblems, bits);
    else
      launch("attention (wgmma) bits_kernel", bits_kernel, bgrid, 128, 0, st, wp,
             (unsigned)mproblems, bits);
  }
  // D != nullptr: the caller launched d_kernel just before (cuda/attention.cu).
  const bool after_ours = mproblems != 0 || D != nullptr;
  if (p.d <= 64)
    run<64>(dev, st, wp, grid, p.mask != nullptr, after_ours, q, k, v, dout, lse, D, planes, dq,
            dk, dv);
  else
    run<128>(dev, st, wp, grid, p.mask != nullptr, after_ours, q, k, v, dout, lse, D, planes, dq,
             dk, dv);
}

}  // namespace attn_wgmma
}  // namespace cuda
}  // namespace tlrt
