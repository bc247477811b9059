// The per-element definitions of the optimizer steps (abi/tlrt_optim.h, DEFINITIONS), shared by
// the CPU stub and the CUDA backend: both run these functions, compiled without contraction
// (g++ -ffp-contract=off, nvcc -fmad=false), so they agree bit for bit. Every fused multiply-add
// is an explicit num::fma; the square root and the division are the correctly rounded ones.
#pragma once

#include "core/numerics/hd.hpp"

namespace tlrt {
namespace opt {

// SGD scalars, already rounded to float32 by core (neg_lr = -f32(lr), omd = f32(1 - dampening)).
struct SgdParams {
  float neg_lr;
  float momentum;
  float omd;
  float weight_decay;
  bool first;     // step == 1: the momentum buffer is set to the gradient, not read
  bool nesterov;
};

// Adam / AdamW scalars, computed in double on the host once per call, rounded once.
struct AdamParams {
  float b1, b2, omb1, omb2;
  float neg_step_size;  // -f32(lr / (1 - beta1^step))
  float bc2_sqrt;       // f32(sqrt(1 - beta2^step))
  float eps;
  float l2;             // Adam: f32(weight_decay); 0 for AdamW
  float decay;          // AdamW: f32(-(lr * weight_decay)); 0 for Adam
};

TLRT_HD float sqrt_rn(float x) {
#if defined(__CUDA_ARCH__)
  return __fsqrt_rn(x);
#else
  return __builtin_sqrtf(x);
#endif
}

TLRT_HD float div_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}

// SGD without momentum: the new parameter.
TLRT_HD float sgd_plain(float p, float g, const SgdParams &s) {
  if (s.weight_decay != 0.0f) g = num::fma(s.weight_decay, p, g);
  return num::fma(s.neg_lr, g, p);
}

// SGD with momentum: updates *buf (read unless s.first) and returns the new parameter.
TLRT_HD float sgd_momentum(float p, float g, float *buf, const SgdParams &s) {
  if (s.weight_decay != 0.0f) g = num::fma(s.weight_decay, p, g);
  const float b = s.first ? g : num::fma(s.omd, g, s.momentum * *buf);
  *buf = b;
  const float d = s.nesterov ? num::fma(s.momentum, b, g) : b;
  return num::fma(s.neg_lr, d, p);
}

// Adam / AdamW: updates *m and *v and returns the new parameter.
TLRT_HD float adam(float p, float g, float *m, float *v, const AdamParams &a) {
  if (a.l2 != 0.0f) g = num::fma(a.l2, p, g);
  if (a.decay != 0.0f) p = num::fma(a.decay, p, p);
  const float mn = num::fma(a.omb1, g, a.b1 * *m);
  const float vn = num::fma(a.omb2, g * g, a.b2 * *v);
  *m = mn;
  *v = vn;
  const float denom = div_rn(sqrt_rn(vn), a.bc2_sqrt) + a.eps;
  return num::fma(a.neg_step_size, div_rn(mn, denom), p);
}

}  // namespace opt
}  // namespace tlrt
