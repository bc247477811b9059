// The Hopper attention backward (cuda/sm90a/attention.cu, compiled for sm_90a only): the
// interface cuda/attention.cu calls. Built when the gpu_arch option names 90 (TLRT_HAVE_WGMMA);
// runs on compute capability 9.0 devices only (sm_90a code runs on no other).
#pragma once

#include <cstdint>

#include "core/backend/attention.hpp"

namespace tlrt {
namespace cuda {
namespace attn_wgmma {

// Whether the wgmma backward takes problem p (32 < d <= 128; any n, mask, causal, fill).
bool bwd_applies(const attn::Problem &p);

// Floats of scratch the backward takes: its operand planes (7 operands, big and small TF32
// parts, in tiles of 64 rows of d' = 64 (d <= 64) or 128 columns: 14 bh ceil(n / 64) 64 d') and,
// for a mask with mask_fill = -inf,
// the exclusion words (256 per 64 x 64 tile of each distinct mask: ceil(n / 64)^2 256, times bh
// unless the mask is broadcast).
uint64_t bwd_planes_floats(const attn::Problem &p);

// dq, dk, dv (any of them nullptr = not wanted) on the library stream of dev, D = rowsum(dout *
// out) already computed (read when dq or dk is wanted; may be nullptr otherwise). planes:
// bwd_planes_floats(p) floats of device scratch.
void bwd(int dev, const attn::Problem &p, const float *q, const float *k, const float *v,
         const float *dout, const float *lse, const float *D, float *planes, float *dq,
         float *dk, float *dv);

}  // namespace attn_wgmma
}  // namespace cuda
}  // namespace tlrt
