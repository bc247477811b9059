// Backend interface: indexing: gather and scatter-add with host index lists. Defined by stub/index.cpp and cuda/index.cu.
#pragma once

#include <cstdint>

#define TLRT_INDEX_BACKEND_API

namespace tlrt {
namespace stub {
TLRT_INDEX_BACKEND_API
}
namespace cuda {
TLRT_INDEX_BACKEND_API
}
}  // namespace tlrt
