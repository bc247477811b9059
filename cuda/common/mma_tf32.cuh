// Warp-level TF32 tensor-core products on register fragments (mma.sync m16n8k8, sm_80+) and the
// split of float32 values into two TF32 parts for float32-grade products ("3xTF32").
// Fragments of m16n8k8.row.col for lane = 4 g + t: A (16 x 8) a = {A[g][t], A[g + 8][t],
// A[g][t + 4], A[g + 8][t + 4]}; B (8 x 8, k x n) b = {B[t][g], B[t + 4][g]}; C, D (16 x 8)
// c = {C[g][2t], C[g][2t + 1], C[g + 8][2t], C[g + 8][2t + 1]}. A C fragment serves as the A
// operand of a following product over its column index with no exchange between lanes when the
// contraction index is permuted (c_as_a, kc_perm).
// Split: big(x) = x rounded to TF32 (nearest, ties away), small(x) = big(x - big(x)); a b ~ big(a)
// big(b) + big(a) small(b) + small(a) big(b) within ~2^-21 |a b|; infinite x: big = x, small NaN.
// Emulated (TLRT_CUDA_EMULATION), m16n8k8 gathers operands by shuffles, one float64 sum a result.
#pragma once

#include <cstdint>

namespace tlrt {
namespace cuda {
namespace mma {

#ifndef TLRT_CUDA_EMULATION

__device__ __forceinline__ uint32_t tf32(float x) {
  uint32_t r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return r;
}

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

__device__ __forceinline__ void split(float x, uint32_t &big, uint32_t &small) {
  big = tf32(x);
  small = tf32(x - __uint_as_float(big));
}

// split() as mma operands in 4 instructions instead of 9: for finite x big is exactly tf32(x), and
// small is tf32(x - big) plus 0x1000 in its low 13 bits, which the tensor cores ignore (they read
// a TF32 operand's top 19 bits; the emulator models it): the same products as split(). For mma
// operands and finite x only: NaN patterns from 0x7fffe000 wrap, so a NaN may vanish (its callers
// pass P in [0, 1], whose NaN also reaches the row sum).
__device__ __forceinline__ void split_hw(float x, uint32_t &big, uint32_t &small) {
  big = (__float_as_uint(x) + 0x1000u) & ~0x1fffu;
  small = __float_as_uint(x - __uint_as_float(big)) + 0x1000u;
}

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

// The A operand made of a C fragment: A-column t is C-column 2t, A-column t + 4 is C-column 2t + 1.
__device__ __forceinline__ void c_as_a(const float (&c)[4], float (&a)[4]) {
  a[0] = c[0];
  a[1] = c[2];
  a[2] = c[1];
  a[3] = c[3];
}

// The B operand's contraction row paired with c_as_a: b[0] is row 2t, b[1] row 2t + 1.
__device__ __forceinline__ unsigned kc_perm(unsigned t, unsigned half) { return 2 * t + half; }

}  // namespace mma
}  // namespace cuda
}  // namespace tlrt
