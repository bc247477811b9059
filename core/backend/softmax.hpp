// Backend interface: softmax, log-softmax and the hard-masked row softmax, with backward kernels.
// Defined by stub/softmax.cpp and cuda/softmax.cu. Both evaluate the definitions of
// abi/tlrt_softmax.h with the per-element formulas of core/numerics/row_ops.hpp and the tree of
// core/numerics/reduce_tree.hpp, so they agree bit for bit. Core has validated every argument,
// allocated the output and handled the empty cases: rows >= 1 and cols >= 1 here. Inputs and
// outputs are on device `dev` and do not alias. Scratch memory (CUDA long rows) is the backend's
// own, from the stream-ordered pool; nothing synchronises.
#pragma once

#include <cstdint>

#include "core/numerics/row_ops.hpp"

#define TLRT_SOFTMAX_BACKEND_API                                                              \
  /* y = softmax (Kind::Softmax), log-softmax (Kind::LogSoftmax) or hard-masked softmax       \
     (Kind::Masked, mask: rows * cols values; NULL otherwise) of each row of the row-major    \
     (rows, cols) x. */                                                                       \
  void softmax_fwd(int dev, row::Kind kind, const float *x, const float *mask, uint64_t rows, \
                   uint64_t cols, float *y);                                                  \
  /* dx from the forward output y and the upstream gradient g: log = false: softmax's         \
     backward, log = true: log-softmax's. */                                                  \
  void softmax_bwd(int dev, bool log, const float *y, const float *g, uint64_t rows,          \
                   uint64_t cols, float *dx);                                                  \
  /* Cross-entropy forward (abi/tlrt_softmax.h): labels are rows int32 (labels64 false) or    \
     int64 values on dev; loss (1 float) = -(P / n), stats (2 rows floats) = (m, log s) per   \
     row; faulted labels are added to the index fault counter (core/backend/index.hpp).       \
     rows >= 1, cols >= 0 (cols == 0: every counted label a fault, stats -inf). */            \
  void cross_entropy_fwd(int dev, const float *x, const void *labels, bool labels64,          \
                         uint64_t rows, uint64_t cols, int64_t ignore, float *loss,           \
                         float *stats);                                                       \
  /* Cross-entropy backward: dx (rows * cols) from x, the labels, the forward's stats and the  \
     loss's gradient g (1 float on dev). rows, cols >= 1. Counts no faults. */                \
  void cross_entropy_bwd(int dev, const float *x, const void *labels, bool labels64,          \
                         const float *stats, const float *g, uint64_t rows, uint64_t cols,    \
                         int64_t ignore, float *dx);

namespace tlrt {
namespace stub {
TLRT_SOFTMAX_BACKEND_API
}
namespace cuda {
TLRT_SOFTMAX_BACKEND_API
}
}  // namespace tlrt
