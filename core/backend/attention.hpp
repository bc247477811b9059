// Backend interface: fused attention (abi/tlrt_attention.h), forward and backward. Defined by
// stub/attention.cpp and cuda/attention.cu. Core has validated every argument, allocated the
// outputs and resolved the call's precision (core/settings.hpp call_precision): with
// Precision::Exact both backends perform the same IEEE operations in the same order (the ORDER OF
// OPERATIONS of the header; tiles below), so they agree bit for bit; the CPU backend always does.
// The problem is a Geometry: batch * hq >= 1 problems of nq >= 1 query rows and nk >= 1 keys,
// 0 <= d <= 256, nq, nk and batch * hq below 2^31, hq a multiple of hkv, q / k / v read through
// strided views (rows of d contiguous floats), out and dout token-major (batch, nq, hq, d), lse
// (batch, hq, nq). The gradient views do not overlap one another nor any input. Scratch is the
// backend's own (CUDA: the stream-ordered pool); nothing synchronises.
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

// Strides (in elements) of a (batch, token, head) view whose rows of d floats are contiguous; the
// view's first element is where its pointer points.
struct View {
  uint64_t batch, token, head;
};

// The backends' problem: batch * hq attention problems (b, h); query rows i < nq of problem
// (b, h) at q + b q.batch + i q.token + h q.head, keys / values j < nk at k (v) + b k.batch +
// j k.token + (h / (hq / hkv)) k.head. mask (optional) is (nq, nk) per problem b * hq + h, with
// stride mask_stride between problems (0 = broadcast). Causal blocks j > i + nk - nq.
struct Geometry {
  uint64_t batch, hq, hkv, nq, nk, d;
  View q, k, v;
  const float *mask;     // nullptr: no mask
  uint64_t mask_stride;  // elements between the masks of consecutive problems
  float scale;
  float fill;            // finite: additive; -inf: exclusion
  bool causal;
  uint64_t group() const { return hq / hkv; }
  uint64_t problems() const { return batch * hq; }
  int64_t causal_offset() const { return (int64_t)nk - (int64_t)nq; }
};

// The backward's destinations: each nullptr (not wanted) or written through its view (dq rows
// (b, i, h), dk and dv rows (b, j, g), g < hkv).
struct Grads {
  float *dq, *dk, *dv;
  View q, k, v;
};

// Where the rows of one operand of problem b = (batch index) hq + h lie for the tensor-core
// kernels: row i at base(b) + i token floats from the operand's pointer, base(b) = (b / hq) batch
// + ((b % hq) / group) head. The packed (bh, n, d) layout is packed_rows(n, d); a geometry's view
// of `heads` heads (q, out, dout: hq; k, v: hkv, group = hq / hkv) is rows_of.
struct RowMap {
  uint64_t batch, token, head;
  uint32_t hq, group;
  // b < 2^32 (the kernels' problem counts are 32-bit): 32-bit divisions.
  TLRT_HD uint64_t base(uint64_t b) const {
    const uint32_t b32 = (uint32_t)b;
    return (uint64_t)(b32 / hq) * batch + (uint64_t)((b32 % hq) / group) * head;
  }
  // Every row start a multiple of 4 floats from the pointer (16-byte loads where it is aligned).
  TLRT_HD bool rows_vec4() const { return (batch | token | (hq > 1 ? head : 0)) % 4 == 0; }
};
inline RowMap packed_rows(uint64_t n, uint64_t d) { return RowMap{n * d, d, 0, 1, 1}; }
inline RowMap rows_of(const Geometry &g, const View &v, uint64_t heads) {
  return RowMap{v.batch, v.token, v.head, (uint32_t)g.hq, (uint32_t)(g.hq / heads)};
}
// out and dout of a geometry: (batch, nq, hq, d) token-major.
inline RowMap token_major_rows(const Geometry &g) {
  return RowMap{g.nq * g.hq * g.d, g.hq * g.d, g.d, (uint32_t)g.hq, 1};
}

// The contiguous problem of the tensor-core kernels (cuda/kernels/attention_mma.cuh,
// attention_tc.cuh, cuda/sm90a/): q, k, v, out are (bh, n, d) row-major; mask (optional) is
// (n, n) with stride mask_stride between problems (0 = broadcast, n * n = one per problem).
struct Problem {
  uint64_t bh, n, d;
  const float *mask;     // nullptr: no mask
  uint64_t mask_stride;  // elements between the masks of consecutive problems
  float scale;
  float fill;            // finite: additive; -inf: exclusion
  bool causal;
};

// With causal skipping (causal and fill == -inf), whether the query tile starting at i0 (a
// multiple of kBc) and the key tile starting at j0 are computed together: some (i, j) of them is
// not causally blocked, j0 <= i0 + 63 + nk - nq (the header's ORDER OF OPERATIONS).
TLRT_HD bool tiles_meet(uint64_t i0, uint64_t j0, int64_t causal_offset) {
  return (int64_t)j0 <= (int64_t)i0 + (int64_t)(kBc - 1) + causal_offset;
}

// The end (exclusive) of the key tiles the query tile at i0 visits: with skipping, those
// starting at or before i0 + 63 + offset (0 when none); otherwise all nk keys.
TLRT_HD uint64_t key_end(bool skip, uint64_t i0, uint64_t nk, int64_t causal_offset) {
  if (!skip) return nk;
  const int64_t e = (int64_t)i0 + (int64_t)kBc + causal_offset;
  return e <= 0 ? 0 : ((uint64_t)e < nk ? (uint64_t)e : nk);
}

// The first query tile (a multiple of kBc) that meets the key tile at j0 under skipping.
TLRT_HD uint64_t query_begin(bool skip, uint64_t j0, int64_t causal_offset) {
  if (!skip) return 0;
  const int64_t lo = (int64_t)j0 - (int64_t)(kBc - 1) - causal_offset;
  return lo <= 0 ? 0 : ((uint64_t)lo + kBc - 1) / kBc * kBc;
}

}  // namespace attn
}  // namespace tlrt

#define TLRT_ATTENTION_BACKEND_API                                                           \
  /* out (batch * nq * hq * d, token-major) and lse (batch * hq * nq) of the forward, in the  \
     header's mode `precision`; q, k, v point at their views' first elements. */             \
  void attention_fwd(int dev, const tlrt::attn::Geometry &g, const float *q, const float *k, \
                     const float *v, tlrt::Precision precision, float *out, float *lse);     \
  /* The gradients wanted by `grads` from the forward's inputs, out, lse and the upstream     \
     gradient dout (both token-major). out is read only when dq or dk is wanted               \
     (D = rowsum(dout * out)). */                                                            \
  void attention_bwd(int dev, const tlrt::attn::Geometry &g, const float *q, const float *k, \
                     const float *v, const float *out, const float *dout, const float *lse,  \
                     tlrt::Precision precision, const tlrt::attn::Grads &grads);

namespace tlrt {
namespace stub {
TLRT_ATTENTION_BACKEND_API
}
namespace cuda {
TLRT_ATTENTION_BACKEND_API
}
}  // namespace tlrt
