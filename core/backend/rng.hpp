// Backend interface: counter-based RNG. Defined by stub/rng.cpp and cuda/rng.cu.
#pragma once

#include <cstdint>

#include "core/numerics/rng.hpp"

#define TLRT_RNG_BACKEND_API \
  void generate(int dev, rng::Kind kind, float *out, uint64_t n, uint64_t key, float p0, float p1);

namespace tlrt {
namespace stub {
TLRT_RNG_BACKEND_API
}
namespace cuda {
TLRT_RNG_BACKEND_API
}
}  // namespace tlrt
