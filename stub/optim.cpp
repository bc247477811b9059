// CPU backend, fused optimizer steps: the per-element definitions of core/numerics/optim_ops.hpp
// (abi/tlrt_optim.h) in one pass over the buffers, in place. Loops are built like
// stub/elementwise.cpp (-O3, -fno-trapping-math, clones for x86-64-v3/v4, -ffp-contract=off):
// every clone performs the same IEEE operations in the same order (the square root and division
// vectorise as the correctly rounded vsqrtps / vdivps, the fma as vfmadd), so the result does not
// depend on the clone picked. The branches on the scalars are loop-invariant (unswitched).
#include "core/backend/optim.hpp"

#include "stub/cpu_clones.hpp"

namespace tlrt {
namespace stub {

namespace {

TLRT_CPU_CLONES void sgd_plain_loop(float *__restrict p, const float *__restrict g, uint64_t n,
                                    opt::SgdParams s) {
  for (uint64_t i = 0; i < n; ++i) p[i] = opt::sgd_plain(p[i], g[i], s);
}

TLRT_CPU_CLONES void sgd_momentum_loop(float *__restrict p, const float *__restrict g,
                                       float *__restrict buf, uint64_t n, opt::SgdParams s) {
  for (uint64_t i = 0; i < n; ++i) p[i] = opt::sgd_momentum(p[i], g[i], &buf[i], s);
}

TLRT_CPU_CLONES void adam_loop(float *__restrict p, const float *__restrict g,
                               float *__restrict m, float *__restrict v, uint64_t n,
                               opt::AdamParams a) {
  for (uint64_t i = 0; i < n; ++i) p[i] = opt::adam(p[i], g[i], &m[i], &v[i], a);
}

}  // namespace

void sgd_step(int, float *p, const float *g, float *buf, uint64_t n, const opt::SgdParams &s) {
  if (buf == nullptr)
    sgd_plain_loop(p, g, n, s);
  else
    sgd_momentum_loop(p, g, buf, n, s);
}

void adam_step(int, float *p, const float *g, float *m, float *v, uint64_t n,
               const opt::AdamParams &a) {
  adam_loop(p, g, m, v, n, a);
}

}  // namespace stub
}  // namespace tlrt
