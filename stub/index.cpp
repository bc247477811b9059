// CPU backend, indexing: gather and scatter-add with host index lists.
#include "core/backend/index.hpp"

namespace tlrt {
namespace stub {}  // namespace stub
}  // namespace tlrt
