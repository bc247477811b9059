// Backend interface: fused optimizer steps, in place. Defined by stub/optim.cpp and cuda/optim.cu;
// both evaluate the per-element definitions of core/numerics/optim_ops.hpp (abi/tlrt_optim.h), so
// they agree bit for bit. Core has validated every argument and computed the float32 scalars:
// n >= 1 here, all pointers are on device `dev`, distinct, and do not overlap. Nothing is
// allocated; nothing synchronises.
#pragma once

#include <cstdint>

#include "core/numerics/optim_ops.hpp"

#define TLRT_OPTIM_BACKEND_API                                                                \
  /* SGD over n elements: p updated from g; buf (NULL when there is no momentum) updated. */  \
  void sgd_step(int dev, float *p, const float *g, float *buf, uint64_t n,                    \
                const opt::SgdParams &s);                                                     \
  /* Adam / AdamW over n elements: p, m, v updated from g. */                                 \
  void adam_step(int dev, float *p, const float *g, float *m, float *v, uint64_t n,           \
                 const opt::AdamParams &a);                                                \
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
