// Counter-based RNG shared by both backends (SplitMix64 over key + i; see abi/tlrt_rng.h).
#pragma once

#include "core/numerics/hd.hpp"
#include "core/numerics/shared_math.hpp"

namespace tlrt {
namespace rng {

enum class Kind : uint8_t { Uniform, Normal, Bernoulli };

TLRT_HD uint64_t splitmix64(uint64_t x) {
  uint64_t z = x + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Uniform in [0, 1): the top 24 of the low 32 bits, times 2^-24 (exact).
TLRT_HD float uniform(uint64_t key, uint64_t i) {
  const uint32_t r = (uint32_t)splitmix64(key + i);
  return (float)(r >> 8) * 5.9604644775390625e-8f;
}

// Box-Muller over counters 2i and 2i + 1; p0 = mean, p1 = std.
TLRT_HD float normal(uint64_t key, uint64_t i, float mean, float stddev) {
  const uint32_t r1 = (uint32_t)splitmix64(key + 2 * i);
  const uint32_t r2 = (uint32_t)splitmix64(key + 2 * i + 1);
  const float u1 = (float)((r1 >> 8) + 1u) * 5.9604644775390625e-8f;  // (0, 1]
  const float u2 = (float)(r2 >> 8) * 5.9604644775390625e-8f;         // [0, 1)
#if defined(__CUDA_ARCH__)
  const float radius = __fsqrt_rn(-2.0f * math::log_f(u1));
#else
  const float radius = __builtin_sqrtf(-2.0f * math::log_f(u1));
#endif
  const float z = radius * math::cos2pi_f(u2);
  return num::fma(stddev, z, mean);
}

TLRT_HD float sample(Kind kind, uint64_t key, uint64_t i, float p0, float p1) {
  switch (kind) {
    case Kind::Uniform:
      return uniform(key, i);
    case Kind::Normal:
      return normal(key, i, p0, p1);
    case Kind::Bernoulli:
    default:
      return uniform(key, i) < p0 ? 1.0f : 0.0f;
  }
}

}  // namespace rng
}  // namespace tlrt
