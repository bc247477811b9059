// Buffers on the CPU: uploads and downloads (f32, f64 with IEEE round-to-nearest-even, little-endian
// bytes), zeros/full, size/device, copies, reference counting, release_storage, empty and size-1
// buffers, and the allocator telemetry each of them must move by an exact amount.
#include <cfloat>
#include <vector>

#include "harness.hpp"

namespace {

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Exact bit equality (NaN payloads included: uploads and downloads copy bit for bit).
bool same_exact_bits(const std::vector<float> &a, const std::vector<float> &b) {
  if (a.size() != b.size()) return false;
  return a.empty() || std::memcmp(a.data(), b.data(), 4 * a.size()) == 0;
}

uint64_t size_of(const tlrt_buffer *b) {
  uint64_t n = UINT64_MAX;
  TH_OK(tlrt_buffer_size(b, &n));
  return n;
}

// Telemetry difference between two snapshots.
struct Delta {
  int64_t live_bytes, alloc_count, free_count, live_handles;
};
Delta delta(const tlrt_allocator_stats &from, const tlrt_allocator_stats &to) {
  return {(int64_t)(to.live_bytes - from.live_bytes), (int64_t)(to.alloc_count - from.alloc_count),
          (int64_t)(to.free_count - from.free_count),
          (int64_t)(to.live_handles - from.live_handles)};
}
#define TH_DELTA(from, to, bytes, allocs, frees, handles)                                      \
  do {                                                                                         \
    const Delta d_ = delta((from), (to));                                                      \
    TH_CHECK_MSG(d_.live_bytes == (bytes) && d_.alloc_count == (allocs) &&                     \
                     d_.free_count == (frees) && d_.live_handles == (handles),                 \
                 "telemetry moved by bytes %lld allocs %lld frees %lld handles %lld, expected " \
                 "%lld %lld %lld %lld",                                                        \
                 (long long)d_.live_bytes, (long long)d_.alloc_count, (long long)d_.free_count, \
                 (long long)d_.live_handles, (long long)(bytes), (long long)(allocs),          \
                 (long long)(frees), (long long)(handles));                                    \
  } while (0)

// Inputs: edge values and random bit patterns (every float class, NaN payloads, signalling NaNs).
std::vector<float> test_values(size_t n_random, uint64_t salt) {
  th::Rng rng(salt);
  std::vector<float> v = th::edge_values();
  for (uint32_t u : {0x7F800001u, 0xFFBFFFFFu, 0x7FC00001u, 0x00000001u, 0x807FFFFFu})
    v.push_back(from_bits(u));  // signalling NaNs, a quiet NaN with a payload, subnormals
  // Appended one by one: g++ 13's -Wstringop-overflow misreads v.insert here (a false positive
  // the GPU machine's compiler printed on every build).
  for (float f : rng.bits(n_random)) v.push_back(f);
  return v;
}

void check_f32_round_trip() {
  for (size_t n : {size_t{0}, size_t{1}, size_t{3}, size_t{1000}}) {
    std::vector<float> v = test_values(1000, 1 + n);
    v.resize(n);
    std::vector<float> host = v;
    const tlrt_allocator_stats s0 = th::stats();
    tlrt_buffer *b = nullptr;
    TH_OK(tlrt_buffer_from_f32(TLRT_DEVICE_CPU, host.data(), n, &b));
    const tlrt_allocator_stats s1 = th::stats();
    TH_DELTA(s0, s1, 4 * (int64_t)n, n ? 1 : 0, 0, 1);
    // The data was copied before the call returned: the host array may be reused at once.
    for (float &x : host) x = 12345.0f;
    TH_CHECK(size_of(b) == n);
    std::vector<float> back(n + 1, -7.0f);
    TH_OK(tlrt_buffer_to_f32(b, back.data(), n));
    TH_CHECK(back[n] == -7.0f);  // exactly n values written
    back.resize(n);
    TH_CHECK_MSG(same_exact_bits(back, v), "f32 round trip of %zu values not bit exact", n);
    // f64 download widens exactly (every float is a double); NaN stays NaN.
    std::vector<double> wide(n);
    TH_OK(tlrt_buffer_to_f64(b, wide.data(), n));
    bool ok = true;
    for (size_t i = 0; i < n; ++i)
      ok &= std::isnan(v[i]) ? std::isnan(wide[i]) : wide[i] == (double)v[i] &&
                                                          std::signbit(wide[i]) == std::signbit(v[i]);
    TH_CHECK_MSG(ok, "to_f64 does not widen %zu values exactly", n);
    tlrt_buffer_free(b);
    TH_DELTA(s1, th::stats(), -4 * (int64_t)n, 0, n ? 1 : 0, -1);
  }
}

void check_f64_rounding() {
  struct Case {
    double in;
    uint32_t out;
  };
  const double inf = INFINITY;
  const Case cases[] = {
      {0.1, 0x3DCCCCCDu},
      {-0.1, 0xBDCCCCCDu},
      {1.0, 0x3F800000u},
      {0.0, 0x00000000u},
      {-0.0, 0x80000000u},
      {1e40, 0x7F800000u},                       // beyond the float range: +inf
      {-1e40, 0xFF800000u},
      {DBL_MAX, 0x7F800000u},
      {1e-50, 0x00000000u},                      // far below the smallest subnormal: +0
      {-1e-50, 0x80000000u},                     // ... keeping its sign
      {std::ldexp(1.0, -149), 0x00000001u},      // smallest subnormal, exact
      {std::ldexp(1.0, -150), 0x00000000u},      // half of it: tie, to even (0)
      {std::ldexp(1.5, -150), 0x00000001u},      // above the tie: up
      {std::ldexp(3.0, -150), 0x00000002u},      // 1.5 subnormal ulps: tie, to even (2)
      {1e-40, 0x000116C2u},                      // a subnormal, round to nearest
      {1.0 + std::ldexp(1.0, -24), 0x3F800000u}, // tie, to even (1.0)
      {1.0 + std::ldexp(3.0, -24), 0x3F800002u}, // tie, to even (1 + 2^-22)
      {1.0 + std::ldexp(1.0, -24) + std::ldexp(1.0, -40), 0x3F800001u},  // above the tie
      {16777217.0, 0x4B800000u},                 // 2^24 + 1: tie, to even
      {16777219.0, 0x4B800002u},                 // 2^24 + 3: tie, to even
      {(double)FLT_MAX, 0x7F7FFFFFu},
      {(double)FLT_MAX + std::ldexp(1.0, 102), 0x7F7FFFFFu},  // below the overflow tie
      {(double)FLT_MAX + std::ldexp(1.0, 103), 0x7F800000u},  // the tie: to even = inf
      {inf, 0x7F800000u},
      {-inf, 0xFF800000u},
  };
  std::vector<double> in;
  for (const Case &c : cases) in.push_back(c.in);
  tlrt_buffer *b = nullptr;
  TH_OK(tlrt_buffer_from_f64(TLRT_DEVICE_CPU, in.data(), in.size(), &b));
  const std::vector<float> out = th::download(b);
  TH_CHECK(out.size() == in.size());
  for (size_t i = 0; i < out.size() && i < in.size(); ++i) {
    TH_CHECK_MSG(th::bits_of(out[i]) == cases[i].out, "from_f64(%.17g) = 0x%08x, expected 0x%08x",
                 cases[i].in, th::bits_of(out[i]), cases[i].out);
    // The compiler's conversion is IEEE round-to-nearest-even too.
    TH_CHECK(th::bits_of((float)cases[i].in) == cases[i].out);
  }
  tlrt_buffer_free(b);

  // NaN (either sign, with a payload) stays NaN.
  const double nans[] = {NAN, -NAN, std::nan("0x12345")};
  TH_OK(tlrt_buffer_from_f64(TLRT_DEVICE_CPU, nans, 3, &b));
  for (float f : th::download(b)) TH_CHECK(std::isnan(f));
  tlrt_buffer_free(b);

  // Random doubles over a wide exponent range: exactly the IEEE conversion.
  th::Rng rng(7);
  std::vector<double> d(4096);
  for (double &x : d) {
    const double m = std::uniform_real_distribution<double>(-2.0, 2.0)(rng.gen);
    x = std::ldexp(m, (int)std::uniform_int_distribution<int>(-160, 140)(rng.gen));
  }
  TH_OK(tlrt_buffer_from_f64(TLRT_DEVICE_CPU, d.data(), d.size(), &b));
  const std::vector<float> f = th::download(b);
  int bad = 0;
  for (size_t i = 0; i < d.size() && i < f.size(); ++i) bad += th::bits_of(f[i]) != th::bits_of((float)d[i]);
  TH_CHECK_MSG(bad == 0, "from_f64: %d of %zu random doubles not rounded to nearest even", bad,
               d.size());
  tlrt_buffer_free(b);

  // Size 1 and a round trip f64 -> f32 -> f64 for values that are floats already: exact.
  const double one = -2.5;
  TH_OK(tlrt_buffer_from_f64(TLRT_DEVICE_CPU, &one, 1, &b));
  double back = 0.0;
  TH_OK(tlrt_buffer_to_f64(b, &back, 1));
  TH_CHECK(back == -2.5);
  tlrt_buffer_free(b);
}

void check_bytes() {
  // Known little-endian patterns.
  const uint8_t pattern[] = {
      0x00, 0x00, 0x80, 0x3f,  // 1.0f
      0x00, 0x00, 0x00, 0xc0,  // -2.0f
      0xcd, 0xcc, 0xcc, 0x3d,  // 0.1f
      0x00, 0x00, 0x80, 0x7f,  // +inf
      0x00, 0x00, 0x80, 0xff,  // -inf
      0x01, 0x00, 0xc0, 0x7f,  // quiet NaN with payload 1
      0x01, 0x00, 0x80, 0x7f,  // signalling NaN
      0x01, 0x00, 0x00, 0x00,  // 2^-149
      0x00, 0x00, 0x00, 0x80,  // -0.0f
      0xff, 0xff, 0x7f, 0x7f,  // FLT_MAX
  };
  const uint32_t values[] = {0x3F800000u, 0xC0000000u, 0x3DCCCCCDu, 0x7F800000u, 0xFF800000u,
                             0x7FC00001u, 0x7F800001u, 0x00000001u, 0x80000000u, 0x7F7FFFFFu};
  const size_t n = sizeof values / sizeof values[0];
  // Any alignment of the bytes: upload from offsets 0..3 of a larger array.
  for (size_t off = 0; off < 4; ++off) {
    std::vector<uint8_t> raw(sizeof pattern + 8, 0xEE);
    std::memcpy(raw.data() + off, pattern, sizeof pattern);
    tlrt_buffer *b = nullptr;
    TH_OK(tlrt_buffer_from_bytes(TLRT_DEVICE_CPU, raw.data() + off, sizeof pattern, &b));
    TH_CHECK(size_of(b) == n);
    std::vector<float> f(n);
    TH_OK(tlrt_buffer_to_f32(b, f.data(), n));
    for (size_t i = 0; i < n; ++i)
      TH_CHECK_MSG(th::bits_of(f[i]) == values[i], "from_bytes[%zu] = 0x%08x, expected 0x%08x", i,
                   th::bits_of(f[i]), values[i]);
    // Download to an unaligned destination; nothing beyond nbytes is written.
    std::vector<uint8_t> out(sizeof pattern + 8, 0x5A);
    TH_OK(tlrt_buffer_to_bytes(b, out.data() + off, sizeof pattern));
    TH_CHECK(std::memcmp(out.data() + off, pattern, sizeof pattern) == 0);
    TH_CHECK(out[off + sizeof pattern] == 0x5A);
    for (size_t i = 0; i < off; ++i) TH_CHECK(out[i] == 0x5A);
    tlrt_buffer_free(b);
  }
  // from_f32 -> to_bytes gives the little-endian encoding.
  std::vector<float> f(n);
  for (size_t i = 0; i < n; ++i) f[i] = from_bits(values[i]);
  tlrt_buffer *b = th::upload(f);
  std::vector<uint8_t> out(sizeof pattern);
  TH_OK(tlrt_buffer_to_bytes(b, out.data(), out.size()));
  TH_CHECK(std::memcmp(out.data(), pattern, sizeof pattern) == 0);
  tlrt_buffer_free(b);
  // Random bytes: a bit-exact round trip; size 1; empty.
  th::Rng rng(11);
  std::vector<uint8_t> rnd(4 * 777);
  for (auto &x : rnd) x = (uint8_t)rng.gen();
  TH_OK(tlrt_buffer_from_bytes(TLRT_DEVICE_CPU, rnd.data(), rnd.size(), &b));
  TH_CHECK(size_of(b) == 777);
  std::vector<uint8_t> back(rnd.size());
  TH_OK(tlrt_buffer_to_bytes(b, back.data(), back.size()));
  TH_CHECK(back == rnd);
  tlrt_buffer_free(b);
  TH_OK(tlrt_buffer_from_bytes(TLRT_DEVICE_CPU, pattern, 4, &b));
  TH_CHECK(size_of(b) == 1);
  float one = 0.0f;
  TH_OK(tlrt_buffer_to_f32(b, &one, 1));
  TH_CHECK(one == 1.0f);
  tlrt_buffer_free(b);
  TH_OK(tlrt_buffer_from_bytes(TLRT_DEVICE_CPU, pattern, 0, &b));
  TH_CHECK(size_of(b) == 0);
  TH_OK(tlrt_buffer_to_bytes(b, out.data(), 0));
  tlrt_buffer_free(b);
}

void check_zeros_full() {
  for (uint64_t n : {uint64_t{0}, uint64_t{1}, uint64_t{1000}}) {
    const tlrt_allocator_stats s0 = th::stats();
    tlrt_buffer *b = nullptr;
    TH_OK(tlrt_buffer_zeros(TLRT_DEVICE_CPU, n, &b));
    TH_DELTA(s0, th::stats(), 4 * (int64_t)n, n ? 1 : 0, 0, 1);
    const std::vector<float> v = th::download(b);
    TH_CHECK(v.size() == n);
    bool ok = true;
    for (float x : v) ok &= th::bits_of(x) == 0u;  // +0.0f, not -0.0f
    TH_CHECK_MSG(ok, "zeros(%llu) is not all +0", (unsigned long long)n);
    tlrt_buffer_free(b);
    TH_DELTA(s0, th::stats(), 0, n ? 1 : 0, n ? 1 : 0, 0);
  }
  struct Case {
    double value;
    uint32_t bits;
  };
  const Case cases[] = {
      {1.5, 0x3FC00000u},  {0.1, 0x3DCCCCCDu},  {-0.0, 0x80000000u}, {1e300, 0x7F800000u},
      {-1e300, 0xFF800000u}, {1e-50, 0x00000000u}, {-1e-50, 0x80000000u},
      {INFINITY, 0x7F800000u}, {-INFINITY, 0xFF800000u}, {std::ldexp(1.0, -149), 0x00000001u},
      {(double)FLT_MAX + std::ldexp(1.0, 103), 0x7F800000u}, {-3.0, 0xC0400000u},
  };
  for (const Case &c : cases) {
    for (uint64_t n : {uint64_t{0}, uint64_t{1}, uint64_t{17}}) {
      tlrt_buffer *b = nullptr;
      TH_OK(tlrt_buffer_full(TLRT_DEVICE_CPU, n, c.value, &b));
      const std::vector<float> v = th::download(b);
      TH_CHECK(v.size() == n);
      bool ok = true;
      for (float x : v) ok &= th::bits_of(x) == c.bits;
      TH_CHECK_MSG(ok, "full(%llu, %g) is not 0x%08x", (unsigned long long)n, c.value, c.bits);
      tlrt_buffer_free(b);
    }
  }
  for (double nan : {(double)NAN, -(double)NAN}) {
    tlrt_buffer *b = nullptr;
    TH_OK(tlrt_buffer_full(TLRT_DEVICE_CPU, 5, nan, &b));
    for (float x : th::download(b)) TH_CHECK(std::isnan(x));
    tlrt_buffer_free(b);
  }
}

void check_size_device_copies() {
  th::Rng rng(3);
  for (size_t n : {size_t{0}, size_t{1}, size_t{513}}) {
    std::vector<float> v = rng.bits(n);
    tlrt_buffer *a = th::upload(v);
    TH_CHECK(size_of(a) == n);
    tlrt_device dev = 0xFFFFu;
    TH_OK(tlrt_buffer_device(a, &dev));
    TH_CHECK(dev == TLRT_DEVICE_CPU);

    // copy and to_device(CPU): new handles, equal bits, one payload each.
    const tlrt_allocator_stats s0 = th::stats();
    tlrt_buffer *c = nullptr, *d = nullptr;
    TH_OK(tlrt_buffer_copy(a, &c));
    TH_OK(tlrt_buffer_to_device(a, TLRT_DEVICE_CPU, &d));
    TH_DELTA(s0, th::stats(), 8 * (int64_t)n, n ? 2 : 0, 0, 2);
    TH_CHECK(c != a && d != a && c != d);
    TH_CHECK(same_exact_bits(th::download(c), v));
    TH_CHECK(same_exact_bits(th::download(d), v));
    TH_OK(tlrt_buffer_device(c, &dev));
    TH_CHECK(dev == TLRT_DEVICE_CPU);
    TH_OK(tlrt_buffer_device(d, &dev));
    TH_CHECK(dev == TLRT_DEVICE_CPU);

    // Independent: releasing and freeing the original leaves the copies intact.
    bool freed = false;
    TH_OK(tlrt_buffer_release_storage(a, &freed));
    TH_CHECK(freed);
    tlrt_buffer_free(a);
    TH_CHECK(same_exact_bits(th::download(c), v));
    TH_CHECK(same_exact_bits(th::download(d), v));
    // A copy of a copy, then release the first copy: still independent.
    tlrt_buffer *e = nullptr;
    TH_OK(tlrt_buffer_copy(c, &e));
    tlrt_buffer_free(c);
    TH_CHECK(same_exact_bits(th::download(e), v));
    tlrt_buffer_free(d);
    tlrt_buffer_free(e);
  }
}

void check_refcount_and_release() {
  const uint64_t n = 100;
  std::vector<float> v = th::Rng(5).vec(n);
  const tlrt_allocator_stats s0 = th::stats();
  tlrt_buffer *b = th::upload(v);
  const tlrt_allocator_stats s1 = th::stats();
  TH_DELTA(s0, s1, 4 * (int64_t)n, 1, 0, 1);
  TH_CHECK(s1.peak_handles >= s1.live_handles);
  TH_CHECK(s1.peak_bytes >= s1.live_bytes);

  // retain adds a reference, not a handle or a payload; free drops one.
  TH_OK(tlrt_buffer_retain(b));
  TH_OK(tlrt_buffer_retain(b));
  TH_DELTA(s1, th::stats(), 0, 0, 0, 0);
  tlrt_buffer_free(b);
  tlrt_buffer_free(b);
  TH_DELTA(s1, th::stats(), 0, 0, 0, 0);
  TH_CHECK(same_exact_bits(th::download(b), v));  // still alive with one reference
  tlrt_buffer_free(b);                             // the last one
  TH_DELTA(s1, th::stats(), -4 * (int64_t)n, 0, 1, -1);

  // release_storage frees the payload at once (live_bytes drops, free_count + 1), the handle
  // lives on; releasing again changes nothing; the final free drops only the handle.
  b = th::upload(v);
  TH_OK(tlrt_buffer_retain(b));
  const tlrt_allocator_stats s2 = th::stats();
  bool freed = false, released = true;
  TH_OK(tlrt_buffer_is_released(b, &released));
  TH_CHECK(!released);
  TH_OK(tlrt_buffer_release_storage(b, &freed));
  TH_CHECK(freed);
  const tlrt_allocator_stats s3 = th::stats();
  TH_DELTA(s2, s3, -4 * (int64_t)n, 0, 1, 0);
  TH_OK(tlrt_buffer_is_released(b, &released));
  TH_CHECK(released);
  TH_OK(tlrt_buffer_release_storage(b, &freed));
  TH_CHECK(!freed);
  TH_DELTA(s3, th::stats(), 0, 0, 0, 0);
  uint64_t size = 1;
  TH_STATUS(tlrt_buffer_size(b, &size), TLRT_ERR_RELEASED);
  tlrt_device dev = 0xFFFFu;
  TH_OK(tlrt_buffer_device(b, &dev));
  TH_CHECK(dev == TLRT_DEVICE_CPU);
  tlrt_buffer_free(b);  // one reference left: nothing changes
  TH_DELTA(s3, th::stats(), 0, 0, 0, 0);
  tlrt_buffer_free(b);  // handle gone; the payload was already counted as freed
  TH_DELTA(s3, th::stats(), 0, 0, 0, -1);
  TH_DELTA(s0, th::stats(), 0, 2, 2, 0);
}

void check_empty_buffers() {
  const tlrt_allocator_stats s0 = th::stats();
  std::vector<tlrt_buffer *> bs(8, nullptr);
  TH_OK(tlrt_buffer_from_f32(TLRT_DEVICE_CPU, nullptr, 0, &bs[0]));
  TH_OK(tlrt_buffer_from_f64(TLRT_DEVICE_CPU, nullptr, 0, &bs[1]));
  TH_OK(tlrt_buffer_from_bytes(TLRT_DEVICE_CPU, nullptr, 0, &bs[2]));
  TH_OK(tlrt_buffer_zeros(TLRT_DEVICE_CPU, 0, &bs[3]));
  TH_OK(tlrt_buffer_full(TLRT_DEVICE_CPU, 0, 3.0, &bs[4]));
  TH_OK(tlrt_buffer_copy(bs[0], &bs[5]));
  TH_OK(tlrt_buffer_to_device(bs[1], TLRT_DEVICE_CPU, &bs[6]));
  TH_OK(tlrt_rand_uniform(TLRT_DEVICE_CPU, 0, 1, &bs[7]));
  // Eight handles, no payload bytes, no payload allocations.
  TH_DELTA(s0, th::stats(), 0, 0, 0, 8);
  for (tlrt_buffer *b : bs) {
    TH_CHECK(b != nullptr);
    TH_CHECK(size_of(b) == 0);
    TH_OK(tlrt_buffer_to_f32(b, nullptr, 0));
    TH_OK(tlrt_buffer_to_f64(b, nullptr, 0));
    TH_OK(tlrt_buffer_to_bytes(b, nullptr, 0));
    float dummy[1];
    TH_STATUS(tlrt_buffer_to_f32(b, dummy, 1), TLRT_ERR_SHAPE);
  }
  // Releasing an empty buffer: the state changes, the byte counters cannot.
  bool freed = false;
  TH_OK(tlrt_buffer_release_storage(bs[3], &freed));
  TH_CHECK(freed);
  TH_DELTA(s0, th::stats(), 0, 0, 0, 8);
  uint64_t size = 1;
  TH_STATUS(tlrt_buffer_size(bs[3], &size), TLRT_ERR_RELEASED);
  TH_STATUS(tlrt_buffer_to_f32(bs[3], nullptr, 0), TLRT_ERR_RELEASED);
  for (tlrt_buffer *b : bs) tlrt_buffer_free(b);
  TH_DELTA(s0, th::stats(), 0, 0, 0, 0);
}

void check_peak() {
  // A buffer larger than anything before raises peak_bytes to exactly the new live_bytes.
  const tlrt_allocator_stats s0 = th::stats();
  const uint64_t n = uint64_t{1} << 20;
  const uint64_t bytes = 4 * n;
  tlrt_buffer *b = nullptr;
  TH_OK(tlrt_buffer_zeros(TLRT_DEVICE_CPU, n, &b));
  const tlrt_allocator_stats s1 = th::stats();
  TH_CHECK(s1.live_bytes == s0.live_bytes + bytes);
  const uint64_t expected_peak = s0.peak_bytes > s1.live_bytes ? s0.peak_bytes : s1.live_bytes;
  TH_CHECK_MSG(s1.peak_bytes == expected_peak, "peak_bytes %llu, expected %llu",
               (unsigned long long)s1.peak_bytes, (unsigned long long)expected_peak);
  tlrt_buffer_free(b);
  const tlrt_allocator_stats s2 = th::stats();
  TH_CHECK(s2.peak_bytes == s1.peak_bytes);  // the peak stays
  TH_CHECK(s2.live_bytes == s0.live_bytes);

  // peak_handles follows the largest number of live handles.
  std::vector<tlrt_buffer *> many(64);
  for (auto &h : many) TH_OK(tlrt_buffer_zeros(TLRT_DEVICE_CPU, 1, &h));
  const tlrt_allocator_stats s3 = th::stats();
  TH_CHECK(s3.live_handles == s2.live_handles + 64);
  TH_CHECK(s3.peak_handles >= s3.live_handles);
  for (auto h : many) tlrt_buffer_free(h);
  const tlrt_allocator_stats s4 = th::stats();
  TH_CHECK(s4.live_handles == s2.live_handles);
  TH_CHECK(s4.peak_handles == s3.peak_handles || s4.peak_handles > s3.peak_handles);
  TH_CHECK(s4.device_free_bytes == 0 && s4.device_total_bytes == 0);
  // The CPU pool keeps freed payloads for reuse (64 one-element blocks of 64 bytes at least)
  // until trimmed; reusing one does not allocate from the system again.
  TH_CHECK_MSG(s4.pooled_bytes >= 64 * 64, "pooled_bytes %llu after freeing 64 buffers",
               (unsigned long long)s4.pooled_bytes);
  tlrt_buffer *again = nullptr;
  TH_OK(tlrt_buffer_zeros(TLRT_DEVICE_CPU, 1, &again));
  TH_CHECK(th::stats().pooled_bytes == s4.pooled_bytes - 64);
  tlrt_buffer_free(again);
  TH_OK(tlrt_allocator_trim(TLRT_DEVICE_CPU));
  TH_CHECK(th::stats().pooled_bytes == 0);
}

}  // namespace

int main() {
  const tlrt_allocator_stats start = th::stats();
  check_f32_round_trip();
  check_f64_rounding();
  check_bytes();
  check_zeros_full();
  check_size_device_copies();
  check_refcount_and_release();
  check_empty_buffers();
  check_peak();
  const tlrt_allocator_stats end = th::stats();
  TH_CHECK(end.live_bytes == start.live_bytes && end.live_handles == start.live_handles);
  TH_CHECK(end.alloc_count - start.alloc_count == end.free_count - start.free_count);
  return th::finish("test_buffers");
}
