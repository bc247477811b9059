// CUDA backend, fused layer normalisation, forward and backward.
#include "core/backend/layer_norm.hpp"

namespace tlrt {
namespace cuda {}  // namespace cuda
}  // namespace tlrt
