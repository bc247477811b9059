// Shared by the CPU stub and the CUDA backend: the total order of argmax / top-k
// (abi/tlrt_reduce.h) and the sum-of-squares tree of tlrt_clip_grad_norm (abi/tlrt_optim.h).
#pragma once

#include <cstdint>

#include "core/numerics/hd.hpp"

namespace tlrt {
namespace sel {

// An unsigned key whose order is the order of argmax / top-k over float32 values: every NaN is
// the largest (all NaNs equal), -0 and +0 are equal, otherwise the IEEE order. Ties between equal
// keys go to the lower index (the callers').
TLRT_HD uint32_t order_key(float v) {
  uint32_t b = num::f2u(v);
  if (v != v) return 0xFFFFFFFFu;
  if ((b << 1) == 0) b = 0;  // -0 -> +0
  return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

// (ka, ia) before (kb, ib) in the output order: larger key first, then lower index.
TLRT_HD bool before(uint32_t ka, uint64_t ia, uint32_t kb, uint64_t ib) {
  return ka > kb || (ka == kb && ia < ib);
}

}  // namespace sel

namespace clip {

// The sum of squares of tlrt_clip_grad_norm: every buffer is split into chunks of kChunk
// consecutive elements (the last one possibly shorter); a chunk's value is the double sum over
// kLanes lanes, lane t folding x[t]^2, x[t + 256]^2, ... in order from +0, then the halving
// steps h = 128 .. 1 (a_t += a_{t+h}). Squares of float32 values are exact in double, so an fma
// or a separate multiply give the same bits. The chunk values, in buffer order and chunk order,
// are reduced by the same lanes and halving into S (one level, any count).
constexpr uint64_t kChunk = 4096;
constexpr unsigned kLanes = 256;

TLRT_HD double sq(float x) { return (double)x * (double)x; }

// The float32 norm and the scale from S (both backends, correctly rounded double sqrt):
//   norm = f32(sqrt(S)),  coef = f32(max_norm) / (norm + f32(1e-6)),  coef = min(coef, 1) with
//   NaN kept (torch.clamp(max=1.0)).
TLRT_HD float coef_of(float norm, float max_norm) {
#if defined(__CUDA_ARCH__)
  const float c = __fdiv_rn(max_norm, __fadd_rn(norm, 1e-6f));
#else
  const float c = max_norm / (norm + 1e-6f);
#endif
  return c > 1.0f ? 1.0f : c;  // NaN > 1 is false: NaN kept
}

}  // namespace clip
}  // namespace tlrt
