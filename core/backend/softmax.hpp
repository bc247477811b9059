// Backend interface: softmax, log-softmax and the hard-masked row softmax, with backward kernels. Defined by stub/softmax.cpp and cuda/softmax.cu.
#pragma once

#include <cstdint>

#define TLRT_SOFTMAX_BACKEND_API

namespace tlrt {
namespace stub {
TLRT_SOFTMAX_BACKEND_API
}
namespace cuda {
TLRT_SOFTMAX_BACKEND_API
}
}  // namespace tlrt
