// RNG entry points.
#include "abi/tlrt_rng.h"
#include "core/backend/rng.hpp"
#include "core/buffer.hpp"
#include "core/error.hpp"

using namespace tlrt;

namespace {

tlrt_status generate(const char *fn, tlrt_device device, uint64_t n, uint64_t key, rng::Kind kind,
                     float p0, float p1, tlrt_buffer **out) {
  return guarded(fn, [&] {
    clear_out(out, "out");
    Dev dev = resolve_device(device, "device");
    Owned b = new_buffer(dev, n);
    if (n != 0) TLRT_DISPATCH(dev, generate, dev.ordinal, kind, b->data, n, key, p0, p1);
    *out = b.release();
  });
}

}  // namespace

extern "C" {

TLRT_API tlrt_status tlrt_rand_uniform(tlrt_device device, uint64_t n, uint64_t key,
                                       tlrt_buffer **out) {
  return generate(__func__, device, n, key, rng::Kind::Uniform, 0.0f, 0.0f, out);
}

TLRT_API tlrt_status tlrt_rand_normal(tlrt_device device, uint64_t n, double mean, double std,
                                      uint64_t key, tlrt_buffer **out) {
  if (out) *out = nullptr;
  float m = 0.0f, s = 0.0f;
  tlrt_status st = guarded(__func__, [&] {
    clear_out(out, "out");
    m = host_scalar(mean, "mean");
    s = host_scalar(std, "std");
    // The sign is checked on the float32 value: a negative std that rounds to -0 is accepted.
    if (s < 0.0f) fail(TLRT_ERR_INVALID_ARGUMENT, "argument std = %g must be >= 0", std);
  });
  if (st != TLRT_OK) return st;
  return generate(__func__, device, n, key, rng::Kind::Normal, m, s, out);
}

TLRT_API tlrt_status tlrt_bernoulli_mask(tlrt_device device, uint64_t n, double keep_prob,
                                         uint64_t key, tlrt_buffer **out) {
  if (out) *out = nullptr;
  float p = 0.0f;
  tlrt_status st = guarded(__func__, [&] {
    clear_out(out, "out");
    p = host_scalar(keep_prob, "keep_prob");
  });
  if (st != TLRT_OK) return st;
  return generate(__func__, device, n, key, rng::Kind::Bernoulli, p, 0.0f, out);
}

}  // extern "C"
