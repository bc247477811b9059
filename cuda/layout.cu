// CUDA backend, layout: concatenation, slices, broadcasts, transposes and permutations.
#include "core/backend/layout.hpp"

namespace tlrt {
namespace cuda {}  // namespace cuda
}  // namespace tlrt
