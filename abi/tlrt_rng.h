/* libtorchlean_rt: counter-based random numbers.
 *
 * Element i of every generator depends only on (key, i), through SplitMix64:
 *   x = key + i (mod 2^64);  z = x + 0x9E3779B97F4A7C15;
 *   z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9;  z = (z ^ (z >> 27)) * 0x94D049BB133111EB;
 *   sm(x) = z ^ (z >> 31);   r(x) = low 32 bits of sm(x).
 * Results are bitwise identical on the CPU and CUDA backends, for every n and in both
 * determinism modes (numeric class: exact, the normal generator included). Every generator uses
 * counter key + i for output i (the normal pairs them up, see below), so streams with keys k and
 * k + d overlap after d elements: space keys at least n apart (n + 1 for a normal of odd n; or
 * hash them first). (An odd d shifts the normal's pairing, so its values are not a shifted copy
 * of the other stream, but they reuse the same draws: overlapping all the same.)
 * Host scalars (mean, std, keep_prob) follow the host-scalar rule of torchlean_rt.h: rounded once
 * to float32; NaN, +-inf, or a finite value that rounds to +-inf in float32, is
 * TLRT_ERR_INVALID_ARGUMENT (no exception here).
 * Errors (all three): TLRT_ERR_NULL_ARGUMENT (out); TLRT_ERR_OVERFLOW (n > TLRT_MAX_ELEMENTS);
 * TLRT_ERR_INVALID_ARGUMENT (see each; malformed device); TLRT_ERR_BACKEND_UNAVAILABLE;
 * TLRT_ERR_NO_DEVICE; TLRT_ERR_OUT_OF_MEMORY; TLRT_ERR_CUDA; TLRT_ERR_DEVICE_LOST. */
#ifndef TLRT_RNG_H
#define TLRT_RNG_H

#include "tlrt_buffer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Uniform on [0, 1): out[i] = (r(key + i) >> 8) * 2^-24, exact in float32, strictly below 1.0
 * (largest value 1 - 2^-24). (Upstream rounded r / 2^32 to float32, which returns 1.0f with
 * probability 2^-25; this one never does.) */
TLRT_API tlrt_status tlrt_rand_uniform(tlrt_device device, uint64_t n, uint64_t key,
                                       tlrt_buffer **out);

/* Normal(mean, std) by the pair form of Box-Muller: outputs 2j and 2j + 1 share one pair of draws,
 *   u1 = ((r(key + 2j) >> 8) + 1) * 2^-24  in (0, 1],   u2 = (r(key + 2j + 1) >> 8) * 2^-24,
 *   R = sqrt(-2 * log(u1)),  theta = 2 pi u2,
 *   out[2j] = fma(std, R * cos(theta), mean),  out[2j + 1] = fma(std, R * sin(theta), mean);
 * for odd n the last output is the cos one of its pair. So output i uses counters key + (i & ~1)
 * and key + (i | 1), and n outputs use the counters key .. key + n - 1 (n rounded up to even).
 * Evaluated in float32 with the library's shared log and sincos (log_f, sincos2pi_f of
 * core/numerics/shared_math.hpp: log within 0.9 ulp, cos and sin within 9e-8 absolute), a
 * correctly rounded sqrt, one float32 product and the fma, so both backends produce the same
 * bits. mean and std are rounded once to float32; |z| = |R cos| or |R sin| <= 5.7682 (R is largest
 * for u1 = 2^-24: sqrt(48 ln 2)); z is within 1.5e-6 absolute of the float64 value of the same
 * formula on the same draws (tests/unit/test_rng.cpp).
 * Errors: TLRT_ERR_INVALID_ARGUMENT if mean or std breaks the host-scalar rule (NaN, +-inf, or
 * rounding to +-inf in float32: mean = 1e300 is rejected) or the rounded std is negative (so
 * std = -1e-50, which rounds to -0, is accepted). */
TLRT_API tlrt_status tlrt_rand_normal(tlrt_device device, uint64_t n, double mean, double std,
                                      uint64_t key, tlrt_buffer **out);

/* Bernoulli mask: out[i] = 1.0f if u[i] < (float)keep_prob else 0.0f, with u[i] the value
 * tlrt_rand_uniform(key) gives at i (so keep_prob <= 0 gives all zeros, keep_prob >= 1 all ones;
 * any finite keep_prob is accepted).
 * Errors: TLRT_ERR_INVALID_ARGUMENT if keep_prob is NaN or +-inf, or rounds to +-inf in float32
 * (the host-scalar rule). */
TLRT_API tlrt_status tlrt_bernoulli_mask(tlrt_device device, uint64_t n, double keep_prob,
                                         uint64_t key, tlrt_buffer **out);

#ifdef __cplusplus
}
#endif

#endif /* TLRT_RNG_H */
