// Backend interface: fused attention (abi/tlrt_attention.h), forward and backward. Defined by
// stub/attention.cpp and cuda/attention.cu. Core has validated every argument, allocated the
// outputs and resolved the call's precision (core/settings.hpp call_precision): with
// Precision::Exact both backends perform the same IEEE operations in the same order (the ORDER OF
// OPERATIONS of the header; tiles below), so they agree bit for bit; the CPU backend always does.
// bh, n >= 1, 0 <= d <= 256, n and bh below 2^31. Inputs and outputs are on device `dev` and do
// not alias. Scratch is the backend's own (CUDA: the stream-ordered pool); nothing synchronises.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/backend/policy.hpp"
#include "core/numerics/hd.hpp"
#include "core/numerics/shared_math.hpp"

namespace tlrt {
namespace attn {

// Tiling shared by both backends (part of the order of operations).
constexpr unsigned kLanes = 8;        // lanes sharing one row: a key tile is kLanes x kCols
constexpr unsigned kCols = 8;         // keys per lane per tile
constexpr unsigned kBc = kLanes * kCols;  // keys per tile (64)
constexpr unsigned kMaxD = 256;

// ---- per-element formulas, the same on both backends --------------------------------------------
constexpr float kNegInf = -__builtin_huge_valf();

// The maximum used for the row maxima: the first operand unless the second is larger (so a NaN
// second operand is ignored; a NaN score makes its p NaN anyway).
TLRT_HD float amax(float a, float b) { return b > a ? b : a; }

// s(i, j) of the header from the fma-chain dot product; excluded scores are -inf.
TLRT_HD float score(float dot, bool blocked, float scale, float fill) {
  const float s = dot * scale;
  return blocked ? (fill == kNegInf ? kNegInf : s + fill) : s;
}

// exp(s - ref) for a non-excluded score, 0 for an excluded one (s == -inf).
TLRT_HD float prob(float s, float ref) { return s == kNegInf ? 0.0f : math::exp_f(s - ref); }

// exp(x), x <= 0 or -inf, as the hardware 2^(x log2 e): ex2.approx.ftz on the GPU (~2^-22
// relative plus the rounding of the argument; results below 2^-126 flush to +0; exp(-inf) = +0),
// 3 instructions where math::exp_f takes ~22. The softmax exp of the mma.sync forward (split TF32
// and TF32) and of the sm_90a backward, never of the bit-for-bit order of operations.
// On the host (the kernels' emulation tests) modelled as exp2 of the same argument with the same
// flush, which the header's bounds cover either way.
TLRT_HD float exp_ex2(float x) {
  const float a = x * 1.44269504088896341f;
#if defined(__CUDA_ARCH__)
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(a));
  return y;
#else
  const float y = std::exp2(a);
  return y < 0x1p-126f ? 0.0f : y;
#endif
}

// The problem: q, k, v, out are (bh, n, d) row-major; mask (optional) is (n, n) with stride
// mask_stride between problems (0 = broadcast, n * n = one per problem).
struct Problem {
  uint64_t bh, n, d;
  const float *mask;     // nullptr: no mask
  uint64_t mask_stride;  // elements between the masks of consecutive problems
  float scale;
  float fill;            // finite: additive; -inf: exclusion
  bool causal;
};

}  // namespace attn
}  // namespace tlrt

#define TLRT_ATTENTION_BACKEND_API                                                           \
  /* out (bh * n * d) and lse (bh * n) of the forward, in the header's mode `precision`. */   \
  void attention_fwd(int dev, const tlrt::attn::Problem &p, const float *q, const float *k,  \
                     const float *v, tlrt::Precision precision, float *out, float *lse);     \
  /* dq, dk, dv (each bh * n * d, any of them nullptr = not wanted) from the forward's        \
     inputs, out, lse (bh * n) and the upstream gradient dout. out is read only when dq or   \
     dk is wanted (D = rowsum(dout * out)). */                                               \
  void attention_bwd(int dev, const tlrt::attn::Problem &p, const float *q, const float *k,  \
                     const float *v, const float *out, const float *dout, const float *lse,  \
                     tlrt::Precision precision, float *dq, float *dk, float *dv);

namespace tlrt {
namespace stub {
TLRT_ATTENTION_BACKEND_API
}
namespace cuda {
TLRT_ATTENTION_BACKEND_API
}
}  // namespace tlrt
