// CPU backend, RNG: element i from (key, i) alone, through the shared core/numerics/rng.hpp.
#include "core/backend/rng.hpp"

namespace tlrt {
namespace stub {

void generate(int, rng::Kind kind, float *out, uint64_t n, uint64_t key, float p0, float p1) {
  for (uint64_t i = 0; i < n; ++i) out[i] = rng::sample(kind, key, i, p0, p1);
}

}  // namespace stub
}  // namespace tlrt
