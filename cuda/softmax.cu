// CUDA backend, softmax, log-softmax and the hard-masked row softmax, with backward kernels.
#include "core/backend/softmax.hpp"

namespace tlrt {
namespace cuda {}  // namespace cuda
}  // namespace tlrt
