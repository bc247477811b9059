// Backend interface: matrix products. Defined by stub/blas.cpp and cuda/blas.cu.
// Numeric class "library" (abi/tlrt_blas.h): the backends do NOT agree bit for bit; each is
// compared with a float64 reference by the tests. Core has validated every argument, allocated c,
// and handled the empty cases: batch, m, n, p are all >= 1 here (n == 0 is a fill done by core).
// Inputs and output are on device `dev` and do not alias. The CUDA backend only gets calls whose
// m, n, p (and so every leading dimension) fit in an int (core checks); the batch may be larger
// and is split by the backend.
#pragma once

#include <cstdint>

#include "core/backend/policy.hpp"

#define TLRT_BLAS_BACKEND_API                                                                \
  /* For every batch entry q < batch: C_q = op(A_q) * op(B_q), row-major, C_q is (m, p).     \
     A_q starts at a + q * m * n: (m, n) row-major, or stored (n, m) when trans_a;           \
     B_q starts at b + q * n * p: (n, p) row-major, or stored (p, n) when trans_b;           \
     c[q * m * p + i * p + j] = sum_k A_q(i, k) B_q(k, j) in float32 arithmetic.             \
     policy.allow_tf32: CUDA may round the inputs to TF32 in tensor cores; policy.cpu_isa_cap \
     caps the CPU kernels' instruction set. */                                               \
  void bmm(int dev, const float *a, const float *b, uint64_t batch, uint64_t m, uint64_t n,  \
           uint64_t p, bool trans_a, bool trans_b, const tlrt::MatmulPolicy &policy, float *c); \
  /* A linear layer's product and bias: pre (rows, out) = x (rows, in) w^T + b, w stored      \
     (out, in), b (out) or NULL (no bias); pre(i, j) = bmm's sum (trans_b), then + b[j] in    \
     float32. rows, out >= 1; in >= 0 (in == 0: pre(i, j) = b[j], or +0). */                  \
  void linear(int dev, const float *x, const float *w, const float *b, uint64_t rows,        \
              uint64_t in, uint64_t out, const tlrt::MatmulPolicy &policy, float *pre);      \
  /* The weight and bias gradients of a linear layer from dp (rows, out), the gradient of     \
     pre: dw (out, in) = dp^T x (bmm's sum, trans_a), db (out) = the column sums of dp         \
     (reduce_axis's tree over the rows). Each of dw, db may be NULL (not computed; dw is NULL  \
     when in == 0). rows, out >= 1. */                                                         \
  void linear_wgrad(int dev, const float *dp, const float *x, uint64_t rows, uint64_t in,    \
                    uint64_t out, const tlrt::MatmulPolicy &policy, float *dw, float *db);

namespace tlrt {
namespace stub {
TLRT_BLAS_BACKEND_API

// Host-only, not mirrored (tlrt_dgemm takes host arrays and no device): c (m, p) = a (m, n) *
// b (n, p), row-major float64, the blocked kernel of bmm instantiated for double. m, n, p >= 1;
// c does not overlap a or b. The kernels use at most cpu_isa_cap.
void dgemm_host(const double *a, const double *b, uint64_t m, uint64_t n, uint64_t p,
                CpuIsa cpu_isa_cap, double *c);
}  // namespace stub
namespace cuda {
TLRT_BLAS_BACKEND_API
}
}  // namespace tlrt
