// Backend interface: fused optimizer steps, in place. Defined by stub/optim.cpp and cuda/optim.cu;
// both evaluate the per-element definitions of core/numerics/optim_ops.hpp (abi/tlrt_optim.h), so
// they agree bit for bit. Core has validated every argument and computed the float32 scalars:
// n >= 1 here, all pointers are on device `dev`, distinct, and do not overlap. Nothing is
// allocated (but CUDA's tables of buffers, for clip_grad_norm and adam_step_multi, in pool
// scratch); nothing synchronises.
#pragma once

#include <cstdint>

#include "core/numerics/optim_ops.hpp"

namespace tlrt {
namespace opt {

// One tensor of adam_step_multi: its buffers (n >= 1 elements each) and its weight decay, already
// turned into AdamParams' l2 / decay by core (the other scalars are common to all tensors).
struct AdamTensor {
  float *p;
  const float *g;
  float *m;
  float *v;
  uint64_t n;
  float l2;
  float decay;
};

}  // namespace opt
}  // namespace tlrt

#define TLRT_OPTIM_BACKEND_API                                                                \
  /* SGD over n elements: p updated from g; buf (NULL when there is no momentum) updated. */  \
  void sgd_step(int dev, float *p, const float *g, float *buf, uint64_t n,                    \
                const opt::SgdParams &s);                                                     \
  /* Adam / AdamW over n elements: p, m, v updated from g. */                                 \
  void adam_step(int dev, float *p, const float *g, float *m, float *v, uint64_t n,           \
                 const opt::AdamParams &a);                                                \
  /* Adam / AdamW over count >= 1 tensors (t: a host array): tensor k exactly as adam_step(p,  \
     g, m, v, n) with a's scalars but l2 = t[k].l2 and decay = t[k].decay. No buffer appears   \
     twice across the tensors. */                                                             \
  void adam_step_multi(int dev, const opt::AdamTensor *t, uint64_t count,                     \
                       const opt::AdamParams &a);                                             \
  /* tlrt_clip_grad_norm over count >= 1 buffers (ptrs[b], sizes[b] >= 1 elements; host      \
     arrays): norm[0] = the float32 norm, every buffer scaled in place by the coefficient.   \
     norm is a 1-element buffer on dev. */                                                  \
  void clip_grad_norm(int dev, float *const *ptrs, const uint64_t *sizes, uint64_t count,   \
                      float max_norm, float *norm);

namespace tlrt {
namespace stub {
TLRT_OPTIM_BACKEND_API
}
namespace cuda {
TLRT_OPTIM_BACKEND_API
}
}  // namespace tlrt
