// Backend interface: elementwise ops. Defined by stub/elementwise.cpp and cuda/elementwise.cu.
// Inputs and outputs have n elements (n > 0), are on device `dev`, and may not alias.
#pragma once

#include <cstdint>

#include "core/numerics/elementwise_ops.hpp"

#define TLRT_ELEMENTWISE_BACKEND_API                                                        \
  void unary(int dev, ew::Unary op, const float *x, float *y, uint64_t n, ew::Params p);     \
  void binary(int dev, ew::Binary op, const float *a, const float *b, float *y, uint64_t n, \
              ew::Params p);                                                               \
  void minmax_bwd(int dev, bool is_max, const float *a, const float *b, const float *g,     \
                  float *da, float *db, uint64_t n);

namespace tlrt {
namespace stub {
TLRT_ELEMENTWISE_BACKEND_API
}
namespace cuda {
TLRT_ELEMENTWISE_BACKEND_API
}
}  // namespace tlrt
