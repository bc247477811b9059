// Backend interface: layout: concatenation, slices, broadcasts, transposes and permutations. Defined by stub/layout.cpp and cuda/layout.cu.
#pragma once

#include <cstdint>

#define TLRT_LAYOUT_BACKEND_API

namespace tlrt {
namespace stub {
TLRT_LAYOUT_BACKEND_API
}
namespace cuda {
TLRT_LAYOUT_BACKEND_API
}
}  // namespace tlrt
