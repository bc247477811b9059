// CPU backend, fused optimizer steps: the per-element definitions of core/numerics/optim_ops.hpp
// (abi/tlrt_optim.h) in one pass over the buffers, in place. Loops are built like
// stub/elementwise.cpp (-O3, -fno-trapping-math, clones for x86-64-v3/v4, -ffp-contract=off):
// every clone performs the same IEEE operations in the same order (the square root and division
// vectorise as the correctly rounded vsqrtps / vdivps, the fma as vfmadd), so the result does not
// depend on the clone picked. The branches on the scalars are loop-invariant (unswitched).
#include <cmath>
#include <vector>

#include "core/backend/optim.hpp"
#include "core/numerics/select_ops.hpp"

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

// Tensor by tensor, each adam_step's loop with its own weight decay.
void adam_step_multi(int, const opt::AdamTensor *t, uint64_t count, const opt::AdamParams &a) {
  for (uint64_t k = 0; k < count; ++k) {
    opt::AdamParams ak = a;
    ak.l2 = t[k].l2;
    ak.decay = t[k].decay;
    adam_loop(t[k].p, t[k].g, t[k].m, t[k].v, t[k].n, ak);
  }
}

namespace {

// clip::'s tree over one sequence of at most kChunk double values given by f(e).
template <class F>
double lanes_halved(uint64_t len, F f) {
  double a[clip::kLanes];
  for (unsigned t = 0; t < clip::kLanes; ++t) a[t] = 0.0;
  for (uint64_t e = 0; e < len; ++e) a[e % clip::kLanes] += f(e);
  for (unsigned h = clip::kLanes / 2; h >= 1; h >>= 1)
    for (unsigned t = 0; t < h; ++t) a[t] += a[t + h];
  return a[0];
}

}  // namespace

// clip::'s sums (core/numerics/select_ops.hpp) literally: chunk values in buffer order, then the
// lanes over the chunk values (lane t: values t, t + 256, ... in order), the halving.
void clip_grad_norm(int, float *const *ptrs, const uint64_t *sizes, uint64_t count,
                    float max_norm, float *norm) {
  std::vector<double> part;
  for (uint64_t b = 0; b < count; ++b) {
    const float *p = ptrs[b];
    for (uint64_t e0 = 0; e0 < sizes[b]; e0 += clip::kChunk) {
      const uint64_t len = sizes[b] - e0 < clip::kChunk ? sizes[b] - e0 : clip::kChunk;
      part.push_back(lanes_halved(len, [&](uint64_t e) { return clip::sq(p[e0 + e]); }));
    }
  }
  double a[clip::kLanes];
  for (unsigned t = 0; t < clip::kLanes; ++t) a[t] = 0.0;
  for (uint64_t c = 0; c < part.size(); ++c) a[c % clip::kLanes] += part[c];
  for (unsigned h = clip::kLanes / 2; h >= 1; h >>= 1)
    for (unsigned t = 0; t < h; ++t) a[t] += a[t + h];
  const float nf = (float)std::sqrt(a[0]);
  norm[0] = nf;
  const float coef = clip::coef_of(nf, max_norm);
  if (coef == 1.0f) return;
  for (uint64_t b = 0; b < count; ++b)
    for (uint64_t i = 0; i < sizes[b]; ++i) ptrs[b][i] *= coef;
}

}  // namespace stub
}  // namespace tlrt
