// The reduction tree of abi/tlrt_reduce.h, shared by the CPU stub and the CUDA backend.
//
// A sequence v[0..m) is cut into chunks of kChunk = kLanes * kDepth = 4096 elements. In a chunk,
// lane t (0..255) folds w[t], w[t + 256], ..., w[t + 15 * 256] in that order into an accumulator
// that starts at the identity of the operation; the 256 lane values are then combined by halving
// (h = 128, 64, ..., 1: a[t] = op(a[t], a[t + h]) for t < h). Chunk values form a new sequence,
// reduced the same way until one value remains.
//
// Facts the backends rely on (each is exact, bit for bit, except for NaN payloads, which the
// contract leaves unspecified):
//  - op(a, identity) == a for every a (-0 is the identity of IEEE addition in round-to-nearest,
//    +0 + -0 = +0; -inf is the identity of ew::max_f). So a lane without elements, and every
//    halving step h >= P where P is the smallest power of two >= the number of non-empty lanes,
//    changes nothing: an implementation may skip them. In particular a sequence of m <= 32
//    elements reduces to the halving tree over P = pow2_at_least(m) values (small() below), and a
//    sequence of length 1 reduces to its element.
//  - How the lanes are spread over threads is free as long as each lane folds its own elements in
//    order and the halving pairs (t, t + h) are combined in the stated order of h: the CUDA kernels
//    give a warp 8 lanes per thread, or a thread 32 lanes of one column; the CPU keeps 256 lanes
//    in an array (vectorised across lanes), or for wide column sums builds one lane row at a time
//    and evaluates the halving depth first (stub/reduce.cpp).
// Everything here is compiled by g++ (-ffp-contract=off) and nvcc (-fmad=false); additions are
// single IEEE operations on both sides and never contract.
#pragma once

#include <cstdint>
#include <type_traits>

#include "core/numerics/elementwise_ops.hpp"
#include "core/numerics/hd.hpp"

namespace tlrt {
namespace red {

constexpr unsigned kLanes = 256;                 // lanes of a chunk
constexpr unsigned kDepth = 16;                  // elements per lane per chunk
constexpr unsigned kChunk = kLanes * kDepth;     // 4096 elements per chunk
constexpr unsigned kSmall = 32;                  // sequences this short: small()

enum class Op : uint8_t { Sum, Max };

template <Op OP>
struct Ops;

template <>
struct Ops<Op::Sum> {
  static TLRT_HD float identity() { return num::u2f(0x80000000u); }  // -0.0f
  static TLRT_HD float op(float a, float b) { return a + b; }
};

template <>
struct Ops<Op::Max> {
  static TLRT_HD float identity() { return num::u2f(0xFF800000u); }  // -inf
  static TLRT_HD float op(float a, float b) { return ew::max_f(a, b); }
};

// Number of chunks of a sequence of m elements.
TLRT_HD uint64_t chunks_of(uint64_t m) { return (m + kChunk - 1) / kChunk; }

// Smallest power of two >= n, for 1 <= n <= kLanes (1 for n <= 1).
TLRT_HD unsigned pow2_at_least(uint64_t n) {
  unsigned p = 1;
  while (p < n) p <<= 1;
  return p;
}

// log2 of a power of two W (the number of halving steps over W values).
template <unsigned W>
struct Log2 {
  static constexpr unsigned value = 1 + Log2<W / 2>::value;
};
template <>
struct Log2<1> {
  static constexpr unsigned value = 0;
};

// The halving (step 3) over W values held in an array, W a compile-time power of two: for h = W/2,
// W/4, ..., 1 in turn, s[t] = C::op(s[t], s[t + h]) for every t < h; returns s[0]. The steps are
// counted linearly so that the device compiler unrolls them fully and s stays in registers. C is
// Ops<OP>, or any type with a static op over T (the CUDA index kernels halve float4 lanes).
template <class C, unsigned W, class T>
TLRT_HD T halve_by(T (&s)[W]) {
  constexpr unsigned kSteps = Log2<W>::value;
  static_assert((1u << kSteps) == W, "W must be a power of two");
  if constexpr (W > 1) {
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
    for (unsigned step = 0; step < kSteps; ++step) {
      const unsigned h = W >> (step + 1);
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
      for (unsigned t = 0; t < W / 2; ++t)
        if (t < h) s[t] = C::op(s[t], s[t + h]);
    }
  }
  return s[0];
}
template <Op OP, unsigned W>
TLRT_HD float halve(float (&s)[W]) {
  return halve_by<Ops<OP>>(s);
}
// The same for NS sequences at once, step by step across them; sequence n's value in s[n][0].
template <Op OP, unsigned NS, unsigned W>
TLRT_HD void halve_each(float (&s)[NS][W]) {
  constexpr unsigned kSteps = Log2<W>::value;
  static_assert((1u << kSteps) == W, "W must be a power of two");
  if constexpr (W > 1) {
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
    for (unsigned step = 0; step < kSteps; ++step) {
      const unsigned h = W >> (step + 1);
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
      for (unsigned n = 0; n < NS; ++n)
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
        for (unsigned t = 0; t < W / 2; ++t)
          if (t < h) s[n][t] = Ops<OP>::op(s[n][t], s[n][t + h]);
    }
  }
}

// A whole sequence of m <= W <= kSmall elements (one chunk whose lanes hold one element each):
// lane j = op(identity, v[j]), then the halving from h = W/2 (steps with h >= the number of
// elements only combine identities).
template <Op OP, unsigned W, class Load>
TLRT_HD float small(Load load, unsigned m) {
  static_assert(W <= kSmall, "W must be a power of two <= 32");
  float s[W];
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
  for (unsigned j = 0; j < W; ++j)
    s[j] = j < m ? Ops<OP>::op(Ops<OP>::identity(), load(j)) : Ops<OP>::identity();
  return halve<OP>(s);
}

// f(std::integral_constant<unsigned, W>()) with W = pow2_at_least(m) for m <= kSmall (32 above):
// the compile-time width of small() and of the short-row kernels.
template <class F>
void with_small_width(uint64_t m, F &&f) {
  switch (pow2_at_least(m)) {
    case 1: f(std::integral_constant<unsigned, 1>()); break;
    case 2: f(std::integral_constant<unsigned, 2>()); break;
    case 4: f(std::integral_constant<unsigned, 4>()); break;
    case 8: f(std::integral_constant<unsigned, 8>()); break;
    case 16: f(std::integral_constant<unsigned, 16>()); break;
    default: f(std::integral_constant<unsigned, 32>()); break;
  }
}

// The final value of an output: r / div with one IEEE division (tlrt_reduce_mean passes the
// element count rounded to float32); div == 1 means "no division" (r / 1 == r anyway).
TLRT_HD float finish(float r, float div) {
  if (div == 1.0f) return r;
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(r, div);
#else
  return r / div;
#endif
}

// A generic gather for the adjoint of broadcasting (tlrt_reduce_from_broadcast), planned by core:
// output q (row-major over kdim[0..kr)) reduces the sequence p = 0..m-1 (row-major over
// rdim[0..rr)) of x[sum_i kq_i * kstride[i] + sum_i rp_i * rstride[i]], where kq and rp are the
// multi-indices of q and p. Strides are in elements of x.
constexpr unsigned kMaxRank = 8;
struct Strided {
  uint32_t kr, rr;
  uint64_t nq, m;  // prod(kdim) >= 1, prod(rdim) >= 1
  uint64_t kdim[kMaxRank], kstride[kMaxRank];
  uint64_t rdim[kMaxRank], rstride[kMaxRank];
};

// Offset of the element with row-major index i over dims d[0..r) with strides s.
TLRT_HD uint64_t strided_offset(uint64_t i, uint32_t r, const uint64_t *d, const uint64_t *s) {
  uint64_t off = 0;
  for (uint32_t k = r; k-- > 0;) {
    const uint64_t q = i / d[k];
    off += (i - q * d[k]) * s[k];
    i = q;
  }
  return off;
}

}  // namespace red
}  // namespace tlrt
