// Backend interface: the selective scan (abi/tlrt_scan.h), forward and backward, with per-channel
// coefficients (diag) or token-dependent ones (var). Defined by stub/scan.cpp and cuda/scan.cu.
// Both evaluate the header's DEFINITIONS (chunks of TLRT_SCAN_CHUNK steps) with the step formulas
// below and, for the sums over time of scan_diag_bwd, THE TREE of core/numerics/reduce_tree.hpp,
// so they agree bit for bit. Core has validated every argument, allocated the outputs and handled
// the empty cases: T >= 1 and D >= 1 here. Inputs and outputs are on device `dev` and do not alias.
// Scratch memory is the backend's own (CUDA: the stream-ordered pool, released in stream order);
// nothing synchronises.
#pragma once

#include <cstdint>

#include "abi/tlrt_scan.h"
#include "core/numerics/hd.hpp"

#define TLRT_SCAN_BACKEND_API                                                                 \
  /* out (T, D) of h_t = A * h_{t-1} + B * X_t; A, B, h0 have D values, X is (T, D). */      \
  void scan_diag_fwd(int dev, const float *A, const float *B, const float *X, const float *h0, \
                     uint64_t T, uint64_t D, float *out);                                     \
  /* dA, dB, dH0 (D values) and dX (T, D) from the forward's inputs, its output out (T, D)    \
     and the upstream gradient dY (T, D). */                                                  \
  void scan_diag_bwd(int dev, const float *A, const float *B, const float *X, const float *h0, \
                     const float *out, const float *dY, uint64_t T, uint64_t D, float *dA,    \
                     float *dB, float *dX, float *dH0);                                       \
  /* out (T, D) of h_t = A_t * h_{t-1} + B_t * X_t; A, B, X are (T, D), h0 has D values. */   \
  void scan_var_fwd(int dev, const float *A, const float *B, const float *X, const float *h0,  \
                    uint64_t T, uint64_t D, float *out);                                      \
  /* dA, dB, dX (T, D each) and dH0 (D values) from the forward's inputs, out and dY. */      \
  void scan_var_bwd(int dev, const float *A, const float *B, const float *X, const float *h0,  \
                    const float *out, const float *dY, uint64_t T, uint64_t D, float *dA,     \
                    float *dB, float *dX, float *dH0);

namespace tlrt {

// The step formulas of the DEFINITIONS, shared by both backends. Each multiplication and addition
// is one IEEE binary32 operation (round to nearest even); on the device the _rn intrinsics make
// that explicit, so no flag can contract a product into an addition.
namespace scan {

constexpr uint64_t kChunk = TLRT_SCAN_CHUNK;

TLRT_HD float mul(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}

TLRT_HD float add(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}

// Forward: the chunk-local state from a zero start. l = B * X at a chunk's first step, then
// l = A * l + B * X.
TLRT_HD float fwd_first(float b, float x) { return mul(b, x); }
TLRT_HD float fwd_step(float a, float l, float b, float x) { return add(mul(a, l), mul(b, x)); }

// h = l + P * k: a chunk-local value (state l, product P) applied to the carry-in k. The forward's
// outputs and its carries (k_{c+1} = h at the chunk's last step) and the backward's adjoint
// (g = m + Q * q) all use it.
TLRT_HD float apply(float l, float p, float k) { return add(l, mul(p, k)); }

// Backward: the chunk-local adjoint from the chunk's end, m = A_{t+1} * m_{t+1} + dY_t (the
// chunk's last step: m = dY).
TLRT_HD float bwd_step(float a_next, float m_next, float dy) { return add(mul(a_next, m_next), dy); }

// Number of chunks of T >= 1 steps, and the last step of chunk c.
TLRT_HD uint64_t chunks(uint64_t T) { return (T + kChunk - 1) / kChunk; }
TLRT_HD uint64_t chunk_end(uint64_t c, uint64_t T) {
  const uint64_t e = (c + 1) * kChunk;
  return (e < T ? e : T) - 1;
}

}  // namespace scan

namespace stub {
TLRT_SCAN_BACKEND_API
}
namespace cuda {
TLRT_SCAN_BACKEND_API
}
}  // namespace tlrt
