// CUDA backend, indexing: gather and scatter-add with host index lists.
#include "core/backend/index.hpp"

namespace tlrt {
namespace cuda {}  // namespace cuda
}  // namespace tlrt
