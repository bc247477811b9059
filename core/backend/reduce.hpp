// Backend interface: reductions. Defined by stub/reduce.cpp and cuda/reduce.cu.
// Both evaluate the tree of core/numerics/reduce_tree.hpp exactly (abi/tlrt_reduce.h states it),
// so they agree bit for bit. Core has validated every argument, allocated y, and handled every
// empty case: the counts passed here are >= 1. Inputs and outputs are on device `dev` and do not
// alias. Scratch memory for partial sums is the backend's own (CUDA: the stream-ordered pool of
// core/backend/memory.hpp, released in stream order; nothing synchronises).
#pragma once

#include <cstdint>

#include "core/numerics/reduce_tree.hpp"

#define TLRT_REDUCE_BACKEND_API                                                              \
  /* x is a row-major (outer, m, inner) array; for o < outer, i < inner:                     \
     y[o * inner + i] = finish(tree over j < m of x[(o * m + j) * inner + i], div).          \
     div is 1 except for the mean. */                                                        \
  void reduce_axis(int dev, red::Op op, const float *x, uint64_t outer, uint64_t m,          \
                   uint64_t inner, float div, float *y);                                     \
  /* y[q] = tree sum of plan's sequence for output q (q < plan.nq), see red::Strided. */     \
  void reduce_strided(int dev, const float *x, const red::Strided &plan, float *y);         \
  /* abi/tlrt_reduce.h's argmax / top-k over the rows of a row-major (rows, cols) matrix     \
     (rows, cols >= 1; 1 <= k <= cols): idx holds int64_t values when i64, else int32_t. */  \
  void argmax_rows(int dev, const float *x, uint64_t rows, uint64_t cols, bool i64,         \
                   void *idx);                                                              \
  void topk_rows(int dev, const float *x, uint64_t rows, uint64_t cols, uint64_t k,         \
                 bool i64, float *vals, void *idx);

namespace tlrt {
namespace stub {
TLRT_REDUCE_BACKEND_API
}
namespace cuda {
TLRT_REDUCE_BACKEND_API
}
}  // namespace tlrt
