// CPU backend, RNG: element i from (key, i) alone, through the shared core/numerics/rng.hpp.
#include "core/backend/rng.hpp"

namespace tlrt {
namespace stub {

void generate(int, rng::Kind kind, float *out, uint64_t n, uint64_t key, float p0, float p1) {
  if (kind == rng::Kind::Normal) {  // a pair of outputs per pair of draws; odd n: the cos alone
    for (uint64_t j = 0; j < n / 2; ++j)
      rng::normal_pair(key, j, p0, p1, out[2 * j], out[2 * j + 1]);
    if (n & 1) out[n - 1] = rng::normal(key, n - 1, p0, p1);
    return;
  }
  for (uint64_t i = 0; i < n; ++i) out[i] = rng::sample(kind, key, i, p0, p1);
}

}  // namespace stub
}  // namespace tlrt
