// CPU backend, fused layer normalisation, forward and backward.
#include "core/backend/layer_norm.hpp"

namespace tlrt {
namespace stub {}  // namespace stub
}  // namespace tlrt
