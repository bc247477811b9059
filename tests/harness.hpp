// Minimal test harness shared by the C++ test programs: checks that record and continue, a seeded
// random source whose seed is printed on failure, and buffer helpers over the public C API.
// Exit codes: 0 pass, 1 fail, 77 skip (meson's convention).
#pragma once

#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "torchlean_rt.h"

namespace th {

inline int &failures() {
  static int n = 0;
  return n;
}
inline int &checks() {
  static int n = 0;
  return n;
}

// The seed of this run: TLRT_TEST_SEED if set, else a fixed default (reproducible by default).
inline uint64_t seed() {
  static const uint64_t s = [] {
    const char *e = std::getenv("TLRT_TEST_SEED");
    return e && *e ? std::strtoull(e, nullptr, 0) : 0x5EED2026ull;
  }();
  return s;
}

inline bool under_valgrind() { return std::getenv("TLRT_UNDER_VALGRIND") != nullptr; }

inline void report(const char *file, int line, const std::string &what) {
  ++failures();
  std::fprintf(stderr, "FAIL %s:%d: %s [seed=0x%" PRIx64 "; rerun with TLRT_TEST_SEED=0x%" PRIx64
               "]\n", file, line, what.c_str(), seed(), seed());
}

#define TH_CHECK(cond)                                                 \
  do {                                                                 \
    ++th::checks();                                                    \
    if (!(cond)) th::report(__FILE__, __LINE__, "check failed: " #cond); \
  } while (0)

#define TH_CHECK_MSG(cond, ...)                                 \
  do {                                                          \
    ++th::checks();                                             \
    if (!(cond)) {                                              \
      char th_buf_[512];                                        \
      std::snprintf(th_buf_, sizeof th_buf_, __VA_ARGS__);      \
      th::report(__FILE__, __LINE__, th_buf_);                  \
    }                                                           \
  } while (0)

// Expect an exact status; on mismatch print both names and the last error.
#define TH_STATUS(call, expected)                                                             \
  do {                                                                                        \
    ++th::checks();                                                                           \
    tlrt_status th_s_ = (call);                                                               \
    if (th_s_ != (expected)) {                                                                \
      char th_buf_[768];                                                                      \
      std::snprintf(th_buf_, sizeof th_buf_, "%s returned %s, expected %s (last error: %s)", \
                    #call, tlrt_status_string(th_s_), tlrt_status_string(expected),           \
                    tlrt_last_error());                                                       \
      th::report(__FILE__, __LINE__, th_buf_);                                                \
    }                                                                                         \
  } while (0)

#define TH_OK(call) TH_STATUS(call, TLRT_OK)

inline int finish(const char *name) {
  std::printf("%s: %d checks, %d failures (seed 0x%" PRIx64 ")\n", name, checks(), failures(),
              seed());
  return failures() == 0 ? 0 : 1;
}

// Seeded random floats.
struct Rng {
  std::mt19937_64 gen;
  explicit Rng(uint64_t salt = 0) : gen(seed() ^ (salt * 0x9E3779B97F4A7C15ull)) {}
  float uniform(float lo, float hi) {
    return std::uniform_real_distribution<float>(lo, hi)(gen);
  }
  std::vector<float> vec(size_t n, float lo = -4.0f, float hi = 4.0f) {
    std::vector<float> v(n);
    for (auto &x : v) x = uniform(lo, hi);
    return v;
  }
  // Random bit patterns: every float class (NaN, inf, subnormal) appears.
  std::vector<float> bits(size_t n) {
    std::vector<float> v(n);
    for (auto &x : v) {
      uint32_t u = (uint32_t)gen();
      std::memcpy(&x, &u, 4);
    }
    return v;
  }
};

// Edge vector: the special values every op must survive.
inline std::vector<float> edge_values() {
  const float inf = INFINITY, nan = NAN;
  return {0.0f,  -0.0f, 1.0f,   -1.0f,  inf,     -inf,    nan,     -nan,
          1e-45f, -1e-45f, 1.17549435e-38f, -1.17549435e-38f, 5.877472e-39f, 3.4028235e38f,
          -3.4028235e38f, 0.5f, 2.0f, 88.72f, 88.73f, -87.3f, -103.98f, -104.0f, 20.0f, -20.0f,
          1e-7f, -1e-7f, 3.0f, -3.0f, 10.0f, -10.0f, 0.1f, -0.1f};
}

inline uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// Same value bit for bit, or both NaN (NaN payloads are unspecified by the contract).
inline bool same_bits(float a, float b) {
  return (std::isnan(a) && std::isnan(b)) || bits_of(a) == bits_of(b);
}

// A float with its bit pattern, for failure messages.
inline std::string hex(float f) {
  char b[48];
  std::snprintf(b, sizeof b, "%.9g (0x%08x)", (double)f, bits_of(f));
  return b;
}

// Seeded input distributions shared by the unit and parity tests.
enum class Dist {
  Uniform,   // [-1, 1)
  Positive,  // [0, 1)
  Wide,      // random signs and exponents 2^-30 .. 2^30: the order of additions matters
  Bits,      // random bit patterns: NaN, inf, subnormals, anything
  Edge       // [-100, 100) with a few th::edge_values() at random places
};
inline const char *dist_name(Dist d) {
  switch (d) {
    case Dist::Uniform: return "uniform";
    case Dist::Positive: return "positive";
    case Dist::Wide: return "wide";
    case Dist::Bits: return "bits";
    case Dist::Edge: return "edge";
  }
  return "?";
}

inline std::vector<float> make(Dist d, uint64_t n, uint64_t salt) {
  Rng rng(salt);
  std::vector<float> v;
  switch (d) {
    case Dist::Uniform:
      v = rng.vec(n, -1.0f, 1.0f);
      break;
    case Dist::Positive:
      v = rng.vec(n, 0.0f, 1.0f);
      break;
    case Dist::Wide:
      v.resize(n);
      for (auto &x : v) {
        const float mant = rng.uniform(1.0f, 2.0f);
        const int e = (int)(rng.gen() % 61) - 30;
        x = std::ldexp(mant, e) * ((rng.gen() & 1) ? -1.0f : 1.0f);
      }
      break;
    case Dist::Bits:
      v = rng.bits(n);
      break;
    case Dist::Edge: {
      v = rng.vec(n, -100.0f, 100.0f);
      const std::vector<float> e = edge_values();
      const uint64_t k = n / 64 + 1;
      for (uint64_t i = 0; i < k && n > 0; ++i) v[rng.gen() % n] = e[rng.gen() % e.size()];
      break;
    }
  }
  return v;
}

inline tlrt_buffer *upload(const std::vector<float> &v, tlrt_device dev = TLRT_DEVICE_CPU) {
  tlrt_buffer *b = nullptr;
  tlrt_status s = tlrt_buffer_from_f32(dev, v.data(), v.size(), &b);
  if (s != TLRT_OK) {
    report(__FILE__, __LINE__, std::string("upload failed: ") + tlrt_last_error());
    return nullptr;
  }
  return b;
}

inline std::vector<float> download(const tlrt_buffer *b) {
  uint64_t n = 0;
  if (tlrt_buffer_size(b, &n) != TLRT_OK) {
    report(__FILE__, __LINE__, std::string("size failed: ") + tlrt_last_error());
    return {};
  }
  std::vector<float> v(n);
  if (tlrt_buffer_to_f32(b, v.data(), n) != TLRT_OK)
    report(__FILE__, __LINE__, std::string("download failed: ") + tlrt_last_error());
  return v;
}

// Live bytes / handles on a device, for leak checks.
inline tlrt_allocator_stats stats(tlrt_device dev = TLRT_DEVICE_CPU) {
  tlrt_allocator_stats s;
  std::memset(&s, 0, sizeof s);
  s.struct_size = sizeof s;
  tlrt_allocator_stats_get(dev, &s);
  return s;
}

// Owning handle for tests: frees on scope exit; out() hands a fresh out-parameter slot.
struct Buf {
  tlrt_buffer *p = nullptr;
  Buf() = default;
  explicit Buf(tlrt_buffer *b) : p(b) {}
  Buf(Buf &&o) noexcept : p(o.p) { o.p = nullptr; }
  Buf &operator=(Buf &&o) noexcept {
    if (this != &o) {
      tlrt_buffer_free(p);
      p = o.p;
      o.p = nullptr;
    }
    return *this;
  }
  Buf(const Buf &) = delete;
  Buf &operator=(const Buf &) = delete;
  ~Buf() { tlrt_buffer_free(p); }
  tlrt_buffer **out() {
    tlrt_buffer_free(p);
    p = nullptr;
    return &p;
  }
  tlrt_buffer *get() const { return p; }
};

// True when a CUDA device is usable; parity tests exit 77 otherwise.
inline bool cuda_ready() { return tlrt_runtime_status() == TLRT_RUNTIME_CUDA_READY; }

}  // namespace th
