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

// Box-Muller pair j (abi/tlrt_rng.h): outputs 2j and 2j + 1 share the draws of counters key + 2j
// (u1, the radius) and key + 2j + 1 (u2, the angle); 2j takes the cosine, 2j + 1 the sine.
TLRT_HD void normal_pair(uint64_t key, uint64_t j, float mean, float stddev, float& z0,
                         float& z1) {
  const uint64_t x = key + 2 * j;
  const uint32_t r1 = (uint32_t)splitmix64(x);
  const uint32_t r2 = (uint32_t)splitmix64(x + 1);
  const float u1 = (float)((r1 >> 8) + 1u) * 5.9604644775390625e-8f;  // (0, 1]
  const float u2 = (float)(r2 >> 8) * 5.9604644775390625e-8f;         // [0, 1)
  // log_f(u1) and sincos2pi_f(u2) without their special-case selects, which cannot fire for
  // u1 in [2^-24, 1] and u2 in [0, 1): the same bits (tests/unit/test_shared_math.cpp checks
  // both over every possible u1 and u2), ~15 fewer instructions per pair.
  const float l1 = math::detail::log_core(u1, 0.0f);
#if defined(__CUDA_ARCH__)
  const float radius = __fsqrt_rn(-2.0f * l1);
#else
  const float radius = __builtin_sqrtf(-2.0f * l1);
#endif
  float s, c;
  math::detail::sincos2pi_nonneg(u2, s, c);
  z0 = num::fma(stddev, radius * c, mean);
  z1 = num::fma(stddev, radius * s, mean);
}

// Output i alone (its whole pair is computed; the bulk paths call normal_pair directly).
TLRT_HD float normal(uint64_t key, uint64_t i, float mean, float stddev) {
  float z0, z1;
  normal_pair(key, i >> 1, mean, stddev, z0, z1);
  return (i & 1) ? z1 : z0;
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
