// Backend interface: fused layer normalisation, forward and backward. Defined by stub/layer_norm.cpp and cuda/layer_norm.cu.
#pragma once

#include <cstdint>

#define TLRT_LAYER_NORM_BACKEND_API

namespace tlrt {
namespace stub {
TLRT_LAYER_NORM_BACKEND_API
}
namespace cuda {
TLRT_LAYER_NORM_BACKEND_API
}
}  // namespace tlrt
