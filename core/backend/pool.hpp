// Backend interface: pooling (max, average, smooth max), forward and backward. Defined by
// stub/pool.cpp and cuda/pool.cu. Both walk windows with the shared per-window arithmetic of
// core/numerics/pool_ops.hpp (same cells, same order, same float32 operations), so results agree
// bit for bit; neither uses atomics, so the determinism switch changes nothing. Core has validated
// the geometry (core/conv_geometry.hpp) and handled the empty cases: here g.nc >= 1, every
// g.in[d] >= 1 and every g.out[d] >= 1, every window holds at least one real cell, x / dx have
// g.in_elems elements and y / dy g.out_elems. Inputs and outputs are on device `dev` and do not
// alias. Scratch is the backend's own (CUDA: the stream-ordered pool); nothing synchronises.
#pragma once

#include <cstdint>

#include "core/conv_geometry.hpp"

#define TLRT_POOL_BACKEND_API                                                                 \
  /* y = max over each window's real cells (first max / first NaN rule). */                   \
  void maxpool_fwd(int dev, const ConvGeometry &g, const float *x, float *y);                 \
  /* dx[i] = sum, over the windows whose first maximum is cell i (output order), of dy. */    \
  void maxpool_bwd(int dev, const ConvGeometry &g, const float *x, const float *dy,           \
                   float *dx);                                                                \
  /* y = (row-major sum of the real cells) / divisor (window size or real-cell count). */     \
  void avgpool_fwd(int dev, const ConvGeometry &g, const float *x, bool count_include_pad,    \
                   float *y);                                                                 \
  /* dx[i] = sum, over the windows containing cell i (output order), of dy / divisor. */      \
  void avgpool_bwd(int dev, const ConvGeometry &g, const float *dy, bool count_include_pad,   \
                   float *dx);                                                                \
  /* y = pivot + log(S) / beta per window (beta != 0, finite, already float32). */            \
  void smooth_maxpool_fwd(int dev, const ConvGeometry &g, const float *x, float beta,         \
                          float *y);                                                          \
  /* dx[i] = sum over windows w containing i (output order) of dy[w] * (e / S_w). */          \
  void smooth_maxpool_bwd(int dev, const ConvGeometry &g, const float *x, const float *dy,    \
                          float beta, float *dx);

namespace tlrt {
namespace stub {
TLRT_POOL_BACKEND_API
}
namespace cuda {
TLRT_POOL_BACKEND_API
}
}  // namespace tlrt
