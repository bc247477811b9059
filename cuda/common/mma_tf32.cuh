// Warp-level TF32 tensor-core products on register fragments (mma.sync m16n8k8, sm_80+), and the
// split of float32 values into two TF32 parts for float32-grade products ("3xTF32").
//
// Fragment layouts of mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32, for lane = 4 g + t
// (g = lane / 4 in 0..7, t = lane % 4 in 0..3):
//   A (16 x 8, row-major):  a[0] = A[g][t]    a[1] = A[g + 8][t]
//                           a[2] = A[g][t + 4] a[3] = A[g + 8][t + 4]
//   B (8 x 8, k x n):       b[0] = B[t][g]    b[1] = B[t + 4][g]
//   C, D (16 x 8):          c[0] = C[g][2t]   c[1] = C[g][2t + 1]
//                           c[2] = C[g + 8][2t] c[3] = C[g + 8][2t + 1]
// A C fragment can serve as the A operand of a following product over its column index without
// any exchange between lanes, because the contraction index may be permuted: read A-column t as
// C-column 2t and A-column t + 4 as C-column 2t + 1, i.e. a = {c[0], c[2], c[1], c[3]}, and give
// the B operand the same permutation: b[0] = B'[2t][g], b[1] = B'[2t + 1][g] (kc_perm below).
//
// Split: big(x) = x rounded to TF32 (10 mantissa bits, nearest, ties away: cvt.rna), small(x) =
// big(x - big(x)). a b ~ big(a) big(b) + big(a) small(b) + small(a) big(b): the dropped terms are
// below ~2^-21 |a b| (each small part is at most 2^-11 of its value, and the rounding of small
// loses 2^-11 of that), close to a float32 dot product. Non-finite x: big = x and small = NaN
// for an infinity (x - x); callers whose inputs may be infinite must treat that case.
//
// Emulation (TLRT_CUDA_EMULATION, tests/emu/cuda_emu.hpp): the same functions on the CPU emulator
// of the GPU; m16n8k8 gathers the warp's operands through the emulated shuffles (so all 32 lanes
// must call it together, as on the GPU) and rounds one float64 sum per element once (the tensor
// cores' internal accumulation order is not modelled: tests compare against bounds).
#pragma once

#include <cstdint>

namespace tlrt {
namespace cuda {
namespace mma {

#ifndef TLRT_CUDA_EMULATION

// x rounded to TF32 (bits of a float32 whose 13 low mantissa bits are zero).
__device__ __forceinline__ uint32_t tf32(float x) {
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return r;
}

// d += A B on one 16 x 8 x 8 tile (fragments as above), float32 accumulation on the tensor cores.
__device__ __forceinline__ void m16n8k8(float (&d)[4], const uint32_t (&a)[4],
                                        const uint32_t (&b)[2]) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

#else  // TLRT_CUDA_EMULATION

inline uint32_t tf32(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  if (std::isfinite(x)) u = (u + 0x1000u) & ~0x1fffu;  // nearest, ties away (sign-magnitude)
  return u;
}

inline void m16n8k8(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
  const unsigned lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  // What the tensor cores use of an operand: its top 19 bits.
  auto operand = [](float v) {
    uint32_t u;
    std::memcpy(&u, &v, 4);
    if (std::isfinite(v)) u &= ~0x1fffu;
    std::memcpy(&v, &u, 4);
    return (double)v;
  };
  double ra[2][8], rb[8][2];  // A rows g, g + 8; B columns 2t, 2t + 1
  for (unsigned k = 0; k < 8; ++k) {
    const unsigned hi = k / 4;  // k < 4: a[0] / a[1], b[0]; else a[2] / a[3], b[1]
    for (unsigned r = 0; r < 2; ++r)
      ra[r][k] = operand(__shfl_sync(~0u, __uint_as_float(a[2 * hi + r]), (int)(4 * g + k % 4)));
    for (unsigned c = 0; c < 2; ++c)
      rb[k][c] = operand(__shfl_sync(~0u, __uint_as_float(b[hi]), (int)(4 * (2 * t + c) + k % 4)));
  }
  for (unsigned r = 0; r < 2; ++r)
    for (unsigned c = 0; c < 2; ++c) {
      double s = d[2 * r + c];
      for (unsigned k = 0; k < 8; ++k) s += ra[r][k] * rb[k][c];
      d[2 * r + c] = (float)s;
    }
}

#endif  // TLRT_CUDA_EMULATION

// big and small TF32 parts of x (see the top comment).
__device__ __forceinline__ void split(float x, uint32_t &big, uint32_t &small) {
  big = tf32(x);
  small = tf32(x - __uint_as_float(big));
}

// The same split as mma operands in 4 integer / float instructions instead of 9 (att8, session
// 8). On sm_90 ptxas has no native cvt.rna.tf32.f32: each tf32() is FSETP (finite?), IADD
// 0x1000, SEL, LOP3 (the SASS of fwd_mma_kernel<128, true>), so split() is 9 instructions.
// For finite x: big = (bits(x) + 0x1000) & ~0x1fff is exactly tf32(x) (the emulator's tf32 is
// this formula), and small is returned as bits(x - big) + 0x1000 WITHOUT the mask: the tensor
// cores read a TF32 operand's top 19 bits only (the low 13 are ignored, the property CUTLASS's
// round_half_ulp_truncate conversion for its 3xTF32 relies on; tests/emu's m16n8k8 models it),
// so as an mma operand it IS tf32(x - big): the same products, the same bits as split().
// Only for mma operands (small's low bits are not zero) and only for FINITE x, or where a
// non-finite x is caught elsewhere: the integer add wraps for NaN patterns 0x7fffe000 and up
// (the GPU's canonical NaN is 0x7fffffff) into -0 / tiny values, so a NaN may vanish from the
// products. fwd_mma_kernel uses it for P = exp(s - m) only: p is in [0, 1] or NaN, and a NaN p
// also enters the row sum l, so out = O / l and lse are NaN as the header says (Q, K and V keep
// split(), whose small(inf / NaN) is NaN).
__device__ __forceinline__ void split_hw(float x, uint32_t &big, uint32_t &small) {
  big = (__float_as_uint(x) + 0x1000u) & ~0x1fffu;
  small = __float_as_uint(x - __uint_as_float(big)) + 0x1000u;
}

// A fragment of big and small parts of one operand tile.
struct SplitA {
  uint32_t big[4], small[4];
};
struct SplitB {
  uint32_t big[2], small[2];
};

__device__ __forceinline__ void split(const float (&x)[4], SplitA &s) {
#pragma unroll
  for (int i = 0; i < 4; ++i) split(x[i], s.big[i], s.small[i]);
}
// split_hw over an A fragment (att8; mma operands only, see split_hw).
__device__ __forceinline__ void split_hw(const float (&x)[4], SplitA &s) {
#pragma unroll
  for (int i = 0; i < 4; ++i) split_hw(x[i], s.big[i], s.small[i]);
}
__device__ __forceinline__ void split(const float (&x)[2], SplitB &s) {
#pragma unroll
  for (int i = 0; i < 2; ++i) split(x[i], s.big[i], s.small[i]);
}

// d += A B with float32-grade accuracy (three products, the small ones first) when SPLIT, else
// the one TF32 product big(A) big(B).
template <bool SPLIT>
__device__ __forceinline__ void product(float (&d)[4], const SplitA &a, const SplitB &b) {
  if (SPLIT) {
    m16n8k8(d, a.small, b.big);
    m16n8k8(d, a.big, b.small);
  }
  m16n8k8(d, a.big, b.big);
}

// The A operand (over the fragment's 8 columns) made of a C fragment, by the column permutation
// of the top comment: A-column t is C-column 2t, A-column t + 4 is C-column 2t + 1.
__device__ __forceinline__ void c_as_a(const float (&c)[4], float (&a)[4]) {
  a[0] = c[0];
  a[1] = c[2];
  a[2] = c[1];
  a[3] = c[3];
}

// The contraction index k of a B operand paired with c_as_a: lane t's b[0] is row kc_perm(t, 0)
// = 2t and b[1] is row kc_perm(t, 1) = 2t + 1 of the 8-row step (instead of t and t + 4).
__device__ __forceinline__ unsigned kc_perm(unsigned t, unsigned half) { return 2 * t + half; }

}  // namespace mma
}  // namespace cuda
}  // namespace tlrt
