// CPU backend, layout: concatenation, slices, broadcasts, transposes and permutations.
#include "core/backend/layout.hpp"

namespace tlrt {
namespace stub {}  // namespace stub
}  // namespace tlrt
