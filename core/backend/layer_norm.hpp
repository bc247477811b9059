// Backend interface: fused layer normalisation and RMS normalisation, forward and backward.
// Defined by stub/layer_norm.cpp and cuda/layer_norm.cu. Both evaluate the definitions of
// abi/tlrt_layer_norm.h with the per-element formulas of core/numerics/row_ops.hpp and the tree of
// core/numerics/reduce_tree.hpp, so they agree bit for bit. Core has validated every argument,
// allocated the outputs and handled the empty cases: rows >= 1 and cols >= 1 here. Inputs and
// outputs are on device `dev` and do not alias. Scratch memory is the backend's own (CUDA: the
// stream-ordered pool, released in stream order); nothing synchronises.
#pragma once

#include <cstdint>

#include "core/numerics/row_ops.hpp"

#define TLRT_LAYER_NORM_BACKEND_API                                                           \
  /* y (rows * cols), mean (rows), inv_std (rows) of the row-major (rows, cols) x; gamma and  \
     beta have cols values; eps already rounded to float32. */                                \
  void layer_norm_fwd(int dev, const float *x, const float *gamma, const float *beta,         \
                      uint64_t rows, uint64_t cols, float eps, float *y, float *mean,         \
                      float *inv_std);                                                        \
  /* dx (rows * cols), dgamma (cols), dbeta (cols) from dy and x (rows * cols), mean and      \
     inv_std (rows), gamma (cols). */                                                         \
  void layer_norm_bwd(int dev, const float *dy, const float *x, const float *mean,            \
                      const float *inv_std, const float *gamma, uint64_t rows, uint64_t cols, \
                      float *dx, float *dgamma, float *dbeta);                          \
  /* RMS norm: y (rows * cols) and inv_rms (rows) of the row-major (rows, cols) x; gamma has  \
     cols values, or is nullptr (no scale); eps already rounded to float32. */                \
  void rms_norm_fwd(int dev, const float *x, const float *gamma, uint64_t rows, uint64_t cols, \
                    float eps, float *y, float *inv_rms);                                     \
  /* dx (rows * cols) and dgamma (cols; nullptr: not computed) from dy and x (rows * cols),   \
     gamma (cols, or nullptr: d = dy) and inv_rms (rows). */                                   \
  void rms_norm_bwd(int dev, const float *dy, const float *x, const float *gamma,             \
                    const float *inv_rms, uint64_t rows, uint64_t cols, float *dx,            \
                    float *dgamma);

namespace tlrt {
namespace stub {
TLRT_LAYER_NORM_BACKEND_API
}
namespace cuda {
TLRT_LAYER_NORM_BACKEND_API
}
}  // namespace tlrt
