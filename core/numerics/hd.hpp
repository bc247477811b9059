// Host/device qualifiers for code shared by the CPU stub and the CUDA backend.
// Everything in core/numerics/ is compiled by both g++ (-ffp-contract=off) and nvcc (-fmad=false),
// so the same source yields the same IEEE binary32 operations in the same order on both backends.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define TLRT_HD __host__ __device__ __forceinline__
#else
#define TLRT_HD inline __attribute__((always_inline))
#endif

namespace tlrt {
namespace num {

// Bit casts usable on host and device (memcpy is well defined and optimised away on both).
TLRT_HD uint32_t f2u(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
#endif
}

TLRT_HD float u2f(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}

// Fused multiply-add, one rounding, on both backends. On the host this is the C library's
// correctly rounded fmaf (a single instruction where the target has FMA).
TLRT_HD float fma(float a, float b, float c) {
#if defined(__CUDA_ARCH__)
  return __fmaf_rn(a, b, c);
#else
  return __builtin_fmaf(a, b, c);
#endif
}

TLRT_HD bool isnan(float x) { return x != x; }

}  // namespace num
}  // namespace tlrt
