// Bad input for every exported entry point (abi/torchlean_rt.map): NULL pointers, size mismatches,
// overflowing sizes, released buffers, unavailable or malformed devices, mixed devices (with a
// GPU only) and scalar domain errors. For each failing call it checks
//   - the exact status code the header documents,
//   - that every out-parameter was set to NULL / 0 (they are pre-filled with a non-NULL sentinel),
//   - that tlrt_last_error() names the function and the offending argument as spelled in the
//     header ("tlrt_add" ... "argument b"),
// and at the end that every byte and handle the test created is gone (telemetry back to start).
// tests/abi/check_bad_input_coverage.py checks that every exported symbol is exercised here.
#include <cfloat>

#include "bad_input.hpp"
#include "tlrt_testing.h"

namespace {

// ---- devices ---------------------------------------------------------------------------------

// Devices that are not devices at all: bits above 23 set, an unknown kind, a CPU ordinal != 0.
const tlrt_device kMalformed[] = {
    (tlrt_device)0x05000000u,                       // bits 24..31 set, kind 0, ordinal 0
    (tlrt_device)3u,                                // the CPU with ordinal 3
    TLRT_DEVICE_CUDA(0) | (tlrt_device)0x01000000u, // kind 1 plus a stray high bit
    (tlrt_device)(2u << 16),                        // kind 2 (unknown)
    (tlrt_device)(0xFFu << 16),                     // kind 255
    (tlrt_device)0xFFFFFFFFu,
};

// A CUDA device this process cannot use and the status asking for it must give, from
// tlrt_runtime_status(): a CPU-only build -> BACKEND_UNAVAILABLE; CUDA without a GPU -> NO_DEVICE;
// CUDA with GPUs -> an ordinal beyond the device count -> NO_DEVICE.
struct AbsentCuda {
  tlrt_device device;
  tlrt_status status;
};

std::vector<AbsentCuda> absent_cuda() {
  const uint32_t rs = tlrt_runtime_status();
  if (rs == TLRT_RUNTIME_CPU_ONLY)
    return {{TLRT_DEVICE_CUDA(0), TLRT_ERR_BACKEND_UNAVAILABLE},
            {TLRT_DEVICE_CUDA(5), TLRT_ERR_BACKEND_UNAVAILABLE}};
  if (rs == TLRT_RUNTIME_CUDA_NO_DEVICE)
    return {{TLRT_DEVICE_CUDA(0), TLRT_ERR_NO_DEVICE}, {TLRT_DEVICE_CUDA(1), TLRT_ERR_NO_DEVICE}};
  uint32_t count = 0;
  TH_OK(tlrt_device_count(TLRT_DEVICE_KIND_CUDA, &count));
  return {{TLRT_DEVICE_CUDA(count), TLRT_ERR_NO_DEVICE}};
}

// One entry point that takes a device argument; `call` may write a buffer through out (NULL for
// the ones that have no out-parameter).
struct DeviceCall {
  const char *fn;
  bool has_out;
  std::function<tlrt_status(tlrt_device, tlrt_buffer **)> call;
};

std::vector<DeviceCall> device_calls(const Fixture &f) {
  static const float fdata[2] = {1.0f, 2.0f};
  static const double ddata[2] = {1.0, 2.0};
  static const uint8_t bytes[8] = {0, 0, 0x80, 0x3f, 0, 0, 0, 0x40};
  tlrt_buffer *src = f.a;
  return {
      {"tlrt_buffer_from_f32", true,
       [](tlrt_device d, tlrt_buffer **o) { return tlrt_buffer_from_f32(d, fdata, 2, o); }},
      {"tlrt_buffer_from_f64", true,
       [](tlrt_device d, tlrt_buffer **o) { return tlrt_buffer_from_f64(d, ddata, 2, o); }},
      {"tlrt_buffer_from_bytes", true,
       [](tlrt_device d, tlrt_buffer **o) { return tlrt_buffer_from_bytes(d, bytes, 8, o); }},
      {"tlrt_buffer_zeros", true,
       [](tlrt_device d, tlrt_buffer **o) { return tlrt_buffer_zeros(d, 2, o); }},
      {"tlrt_buffer_full", true,
       [](tlrt_device d, tlrt_buffer **o) { return tlrt_buffer_full(d, 2, 1.5, o); }},
      {"tlrt_buffer_to_device", true,
       [src](tlrt_device d, tlrt_buffer **o) { return tlrt_buffer_to_device(src, d, o); }},
      {"tlrt_rand_uniform", true,
       [](tlrt_device d, tlrt_buffer **o) { return tlrt_rand_uniform(d, 2, 7, o); }},
      {"tlrt_rand_normal", true,
       [](tlrt_device d, tlrt_buffer **o) { return tlrt_rand_normal(d, 2, 0.0, 1.0, 7, o); }},
      {"tlrt_bernoulli_mask", true,
       [](tlrt_device d, tlrt_buffer **o) { return tlrt_bernoulli_mask(d, 2, 0.5, 7, o); }},
      {"tlrt_synchronize", false,
       [](tlrt_device d, tlrt_buffer **) { return tlrt_synchronize(d); }},
      {"tlrt_allocator_trim", false,
       [](tlrt_device d, tlrt_buffer **) { return tlrt_allocator_trim(d); }},
      {"tlrt_allocator_stats_get", false,
       [](tlrt_device d, tlrt_buffer **) {
         tlrt_allocator_stats s;
         std::memset(&s, 0, sizeof s);
         s.struct_size = sizeof s;
         return tlrt_allocator_stats_get(d, &s);
       }},
  };
}

void check_devices(const Fixture &f) {
  for (const DeviceCall &c : device_calls(f)) {
    for (tlrt_device d : kMalformed) {
      tlrt_buffer *out = kSentinel;
      char what[160];
      std::snprintf(what, sizeof what, "%s(device = 0x%08x)", c.fn, d);
      expect_fail(__LINE__, what, c.call(d, &out), TLRT_ERR_INVALID_ARGUMENT, c.fn, {"device"});
      if (c.has_out) CLEARED(out);
    }
    for (const AbsentCuda &ac : absent_cuda()) {
      tlrt_buffer *out = kSentinel;
      char what[160];
      std::snprintf(what, sizeof what, "%s(device = cuda:%u)", c.fn, TLRT_DEVICE_ORDINAL(ac.device));
      expect_fail(__LINE__, what, c.call(ac.device, &out), ac.status, c.fn, {"device"});
      if (c.has_out) CLEARED(out);
    }
    // The CPU works for every one of them.
    tlrt_buffer *out = nullptr;
    TH_CHECK_MSG(c.call(TLRT_DEVICE_CPU, &out) == TLRT_OK, "%s(cpu) failed: %s", c.fn,
                 tlrt_last_error());
    if (c.has_out) {
      TH_CHECK(out != nullptr);
      tlrt_buffer_free(out);
    }
  }
}

// ---- runtime entry points ---------------------------------------------------------------------

void check_runtime() {
  // Infallible functions: no bad input exists; they must answer sensibly for any value.
  TH_CHECK(tlrt_abi_version() == TLRT_ABI_VERSION);
  TH_CHECK(tlrt_build_info() != nullptr);
  const uint32_t rs = tlrt_runtime_status();
  TH_CHECK(rs == TLRT_RUNTIME_CPU_ONLY || rs == TLRT_RUNTIME_CUDA_READY ||
           rs == TLRT_RUNTIME_CUDA_NO_DEVICE);
#if !TLRT_HAVE_CUDA
  TH_CHECK(rs == TLRT_RUNTIME_CPU_ONLY);
#endif
  for (int code : {-1, 11, 99, 102, 199, 206, 899, 901, 12345, INT32_MIN, INT32_MAX}) {
    const char *s = tlrt_status_string((tlrt_status)code);
    TH_CHECK_MSG(s != nullptr && std::strcmp(s, "TLRT_UNKNOWN_STATUS") == 0,
                 "tlrt_status_string(%d) = %s", code, s ? s : "(null)");
  }
  TH_CHECK(std::strcmp(tlrt_status_string(TLRT_ERR_RELEASED), "TLRT_ERR_RELEASED") == 0);
  // Any bool in, the previous value out; restore the initial value afterwards.
  const bool initial = tlrt_get_deterministic();
  TH_CHECK(tlrt_set_deterministic(!initial) == initial);
  TH_CHECK(tlrt_get_deterministic() == !initial);
  TH_CHECK(tlrt_set_deterministic(initial) == !initial);
  // Any thread count in (above 1024 taken as 1024, 0 the default), the previous count out.
  const uint32_t threads = tlrt_get_num_threads();
  TH_CHECK(threads >= 1 && threads <= 1024);
  TH_CHECK(tlrt_set_num_threads(UINT32_MAX) == threads);
  TH_CHECK(tlrt_get_num_threads() == 1024);
  TH_CHECK(tlrt_set_num_threads(0) == 1024);
  TH_CHECK(tlrt_get_num_threads() == threads);
  // The fault-injection hook has no bad input: any count arms it, 0 disarms and reports.
  TH_CHECK(tlrt_debug_fail_nth_allocation(UINT64_MAX) == 0);
  TH_CHECK(tlrt_debug_fail_nth_allocation(0) == UINT64_MAX);
  TH_CHECK(tlrt_debug_fail_nth_allocation(0) == 0);

  // tlrt_last_error: successful calls do not clear it; a failure replaces it.
  TH_STATUS(tlrt_device_count(TLRT_DEVICE_KIND_CPU, nullptr), TLRT_ERR_NULL_ARGUMENT);
  const std::string first = tlrt_last_error();
  uint32_t n = 0;
  TH_OK(tlrt_device_count(TLRT_DEVICE_KIND_CPU, &n));
  TH_CHECK(first == tlrt_last_error());
  TH_CHECK(n == 1);

  // tlrt_device_count: NULL count, unknown kinds (count set to 0).
  BAD(tlrt_device_count(TLRT_DEVICE_KIND_CUDA, nullptr), TLRT_ERR_NULL_ARGUMENT,
      "tlrt_device_count", "count");
  for (uint32_t kind : {2u, 3u, 0xFFu, 0x100u, 0xFFFFFFFFu}) {
    uint32_t count = 0xDEADBEEF;
    BAD(tlrt_device_count(kind, &count), TLRT_ERR_INVALID_ARGUMENT, "tlrt_device_count", "kind");
    TH_CHECK_MSG(count == 0, "tlrt_device_count(kind %u): count = %u, expected 0", kind, count);
  }

  // tlrt_allocator_stats_get: NULL, struct_size too small; the device cases are in check_devices.
  BAD(tlrt_allocator_stats_get(TLRT_DEVICE_CPU, nullptr), TLRT_ERR_NULL_ARGUMENT,
      "tlrt_allocator_stats_get", "stats");
  for (uint64_t size : {uint64_t{0}, uint64_t{1}, uint64_t{8}, uint64_t{15}}) {
    tlrt_allocator_stats s;
    std::memset(&s, 0xAB, sizeof s);
    s.struct_size = size;
    BAD(tlrt_allocator_stats_get(TLRT_DEVICE_CPU, &s), TLRT_ERR_INVALID_ARGUMENT,
        "tlrt_allocator_stats_get", "stats");
    TH_CHECK(s.struct_size == size);  // nothing beyond struct_size written
    TH_CHECK(s.live_bytes == 0xABABABABABABABABull);
  }
  // Exactly the first two fields is enough; only they are written.
  {
    tlrt_allocator_stats s;
    std::memset(&s, 0xAB, sizeof s);
    s.struct_size = 16;
    TH_OK(tlrt_allocator_stats_get(TLRT_DEVICE_CPU, &s));
    TH_CHECK(s.struct_size == 16);
    TH_CHECK(s.peak_bytes == 0xABABABABABABABABull);
  }
}

// ---- buffer creation -------------------------------------------------------------------------

void check_creation() {
  const float fdata[3] = {1.0f, 2.0f, 3.0f};
  const double ddata[3] = {1.0, 2.0, 3.0};
  const uint8_t bytes[12] = {0};

  // NULL out.
  BAD(tlrt_buffer_from_f32(TLRT_DEVICE_CPU, fdata, 3, nullptr), TLRT_ERR_NULL_ARGUMENT,
      "tlrt_buffer_from_f32", "out");
  BAD(tlrt_buffer_from_f64(TLRT_DEVICE_CPU, ddata, 3, nullptr), TLRT_ERR_NULL_ARGUMENT,
      "tlrt_buffer_from_f64", "out");
  BAD(tlrt_buffer_from_bytes(TLRT_DEVICE_CPU, bytes, 12, nullptr), TLRT_ERR_NULL_ARGUMENT,
      "tlrt_buffer_from_bytes", "out");
  BAD(tlrt_buffer_zeros(TLRT_DEVICE_CPU, 3, nullptr), TLRT_ERR_NULL_ARGUMENT,
      "tlrt_buffer_zeros", "out");
  BAD(tlrt_buffer_full(TLRT_DEVICE_CPU, 3, 1.0, nullptr), TLRT_ERR_NULL_ARGUMENT,
      "tlrt_buffer_full", "out");

  // NULL host data with n > 0 (n == 0 with NULL data is fine).
  tlrt_buffer *out = kSentinel;
  BAD(tlrt_buffer_from_f32(TLRT_DEVICE_CPU, nullptr, 3, &out), TLRT_ERR_NULL_ARGUMENT,
      "tlrt_buffer_from_f32", "data");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_buffer_from_f64(TLRT_DEVICE_CPU, nullptr, 1, &out), TLRT_ERR_NULL_ARGUMENT,
      "tlrt_buffer_from_f64", "data");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_buffer_from_bytes(TLRT_DEVICE_CPU, nullptr, 4, &out), TLRT_ERR_NULL_ARGUMENT,
      "tlrt_buffer_from_bytes", "bytes");
  CLEARED(out);
  out = nullptr;
  TH_OK(tlrt_buffer_from_f32(TLRT_DEVICE_CPU, nullptr, 0, &out));
  TH_CHECK(out != nullptr);
  tlrt_buffer_free(out);
  out = nullptr;
  TH_OK(tlrt_buffer_from_f64(TLRT_DEVICE_CPU, nullptr, 0, &out));
  TH_CHECK(out != nullptr);
  tlrt_buffer_free(out);
  out = nullptr;
  TH_OK(tlrt_buffer_from_bytes(TLRT_DEVICE_CPU, nullptr, 0, &out));
  TH_CHECK(out != nullptr);
  tlrt_buffer_free(out);

  // Overflowing element counts: TLRT_MAX_ELEMENTS + 1 and UINT64_MAX (data is never read).
  for (uint64_t n : {kTooMany, UINT64_MAX, UINT64_MAX / 4 + 1}) {
    out = kSentinel;
    BAD(tlrt_buffer_from_f32(TLRT_DEVICE_CPU, fdata, n, &out), TLRT_ERR_OVERFLOW,
        "tlrt_buffer_from_f32", "n");
    CLEARED(out);
    out = kSentinel;
    BAD(tlrt_buffer_from_f64(TLRT_DEVICE_CPU, ddata, n, &out), TLRT_ERR_OVERFLOW,
        "tlrt_buffer_from_f64", "n");
    CLEARED(out);
    out = kSentinel;
    BAD(tlrt_buffer_zeros(TLRT_DEVICE_CPU, n, &out), TLRT_ERR_OVERFLOW, "tlrt_buffer_zeros", "n");
    CLEARED(out);
    out = kSentinel;
    BAD(tlrt_buffer_full(TLRT_DEVICE_CPU, n, 2.0, &out), TLRT_ERR_OVERFLOW, "tlrt_buffer_full",
        "n");
    CLEARED(out);
  }
  // from_bytes: nbytes / 4 beyond TLRT_MAX_ELEMENTS (multiples of 4) -> overflow; not a multiple
  // of 4 -> shape. UINT64_MAX is both; the header does not rank the two, so either is accepted.
  for (uint64_t nbytes : {4 * kTooMany, UINT64_MAX - 3}) {
    out = kSentinel;
    BAD(tlrt_buffer_from_bytes(TLRT_DEVICE_CPU, bytes, nbytes, &out), TLRT_ERR_OVERFLOW,
        "tlrt_buffer_from_bytes", "nbytes");
    CLEARED(out);
  }
  for (uint64_t nbytes : {uint64_t{1}, uint64_t{2}, uint64_t{3}, uint64_t{5}, uint64_t{11}}) {
    out = kSentinel;
    BAD(tlrt_buffer_from_bytes(TLRT_DEVICE_CPU, bytes, nbytes, &out), TLRT_ERR_SHAPE,
        "tlrt_buffer_from_bytes", "nbytes");
    CLEARED(out);
  }
  out = kSentinel;
  expect_either(__LINE__, "tlrt_buffer_from_bytes(nbytes = UINT64_MAX)",
                tlrt_buffer_from_bytes(TLRT_DEVICE_CPU, bytes, UINT64_MAX, &out), TLRT_ERR_SHAPE,
                TLRT_ERR_OVERFLOW, "tlrt_buffer_from_bytes");
  CLEARED(out);

  // The largest count is representable but not allocatable: out of memory, nothing leaks.
  out = kSentinel;
  BAD(tlrt_buffer_zeros(TLRT_DEVICE_CPU, TLRT_MAX_ELEMENTS, &out), TLRT_ERR_OUT_OF_MEMORY,
      "tlrt_buffer_zeros");
  CLEARED(out);
}

// ---- downloads, size, device, copies, lifetime --------------------------------------------------

void check_downloads(const Fixture &f) {
  float fdst[8];
  double ddst[8];
  uint8_t bdst[32];

  // NULL buffer.
  BAD(tlrt_buffer_to_f32(nullptr, fdst, 4), TLRT_ERR_NULL_ARGUMENT, "tlrt_buffer_to_f32", "buffer");
  BAD(tlrt_buffer_to_f64(nullptr, ddst, 4), TLRT_ERR_NULL_ARGUMENT, "tlrt_buffer_to_f64", "buffer");
  BAD(tlrt_buffer_to_bytes(nullptr, bdst, 16), TLRT_ERR_NULL_ARGUMENT, "tlrt_buffer_to_bytes",
      "buffer");
  // NULL dst with the right n > 0; NULL dst with n == 0 on an empty buffer is fine.
  BAD(tlrt_buffer_to_f32(f.a, nullptr, 4), TLRT_ERR_NULL_ARGUMENT, "tlrt_buffer_to_f32", "dst");
  BAD(tlrt_buffer_to_f64(f.a, nullptr, 4), TLRT_ERR_NULL_ARGUMENT, "tlrt_buffer_to_f64", "dst");
  BAD(tlrt_buffer_to_bytes(f.a, nullptr, 16), TLRT_ERR_NULL_ARGUMENT, "tlrt_buffer_to_bytes",
      "dst");
  TH_OK(tlrt_buffer_to_f32(f.empty, nullptr, 0));
  TH_OK(tlrt_buffer_to_f64(f.empty, nullptr, 0));
  TH_OK(tlrt_buffer_to_bytes(f.empty, nullptr, 0));
  // Released buffer.
  BAD(tlrt_buffer_to_f32(f.released, fdst, 4), TLRT_ERR_RELEASED, "tlrt_buffer_to_f32", "buffer");
  BAD(tlrt_buffer_to_f64(f.released, ddst, 4), TLRT_ERR_RELEASED, "tlrt_buffer_to_f64", "buffer");
  BAD(tlrt_buffer_to_bytes(f.released, bdst, 16), TLRT_ERR_RELEASED, "tlrt_buffer_to_bytes",
      "buffer");
  // n != size (f.a has 4 elements), including overflowing counts; nothing is written.
  for (uint64_t n : {uint64_t{0}, uint64_t{3}, uint64_t{5}, kTooMany, UINT64_MAX}) {
    for (float &v : fdst) v = 42.0f;
    BAD(tlrt_buffer_to_f32(f.a, fdst, n), TLRT_ERR_SHAPE, "tlrt_buffer_to_f32", "n");
    BAD(tlrt_buffer_to_f64(f.a, ddst, n), TLRT_ERR_SHAPE, "tlrt_buffer_to_f64", "n");
    TH_CHECK(fdst[0] == 42.0f && fdst[7] == 42.0f);
  }
  BAD(tlrt_buffer_to_f32(f.empty, fdst, 1), TLRT_ERR_SHAPE, "tlrt_buffer_to_f32", "n");
  // nbytes != 4 * size, multiples of 4 or not.
  for (uint64_t nbytes : {uint64_t{0}, uint64_t{12}, uint64_t{15}, uint64_t{17}, uint64_t{18},
                          uint64_t{19}, uint64_t{20}, 4 * kTooMany, UINT64_MAX, UINT64_MAX - 3}) {
    BAD(tlrt_buffer_to_bytes(f.a, bdst, nbytes), TLRT_ERR_SHAPE, "tlrt_buffer_to_bytes", "nbytes");
  }
  BAD(tlrt_buffer_to_bytes(f.empty, bdst, 3), TLRT_ERR_SHAPE, "tlrt_buffer_to_bytes", "nbytes");
  // The right sizes work.
  TH_OK(tlrt_buffer_to_f32(f.a, fdst, 4));
  TH_OK(tlrt_buffer_to_f64(f.a, ddst, 4));
  TH_OK(tlrt_buffer_to_bytes(f.a, bdst, 16));
}

void check_handles(const Fixture &f) {
  // tlrt_buffer_size: NULL buffer / NULL size / released (size cleared to 0).
  uint64_t size = 77;
  BAD(tlrt_buffer_size(nullptr, &size), TLRT_ERR_NULL_ARGUMENT, "tlrt_buffer_size", "buffer");
  TH_CHECK(size == 0);
  BAD(tlrt_buffer_size(f.a, nullptr), TLRT_ERR_NULL_ARGUMENT, "tlrt_buffer_size", "size");
  size = 77;
  BAD(tlrt_buffer_size(f.released, &size), TLRT_ERR_RELEASED, "tlrt_buffer_size", "buffer");
  TH_CHECK(size == 0);

  // tlrt_buffer_device: NULL buffer / NULL device; a released buffer still reports its device.
  tlrt_device dev = 0xDEADBEEFu;
  BAD(tlrt_buffer_device(nullptr, &dev), TLRT_ERR_NULL_ARGUMENT, "tlrt_buffer_device", "buffer");
  TH_CHECK(dev == 0);
  BAD(tlrt_buffer_device(f.a, nullptr), TLRT_ERR_NULL_ARGUMENT, "tlrt_buffer_device", "device");
  dev = 0xDEADBEEFu;
  TH_OK(tlrt_buffer_device(f.released, &dev));
  TH_CHECK(dev == TLRT_DEVICE_CPU);

  // tlrt_buffer_is_released: NULL buffer / NULL released.
  bool rel = true;
  BAD(tlrt_buffer_is_released(nullptr, &rel), TLRT_ERR_NULL_ARGUMENT, "tlrt_buffer_is_released",
      "buffer");
  TH_CHECK(!rel);
  BAD(tlrt_buffer_is_released(f.a, nullptr), TLRT_ERR_NULL_ARGUMENT, "tlrt_buffer_is_released",
      "released");
  rel = false;
  TH_OK(tlrt_buffer_is_released(f.released, &rel));
  TH_CHECK(rel);
  rel = true;
  TH_OK(tlrt_buffer_is_released(f.a, &rel));
  TH_CHECK(!rel);

  // tlrt_buffer_copy / tlrt_buffer_to_device: NULL buffer, NULL out, released buffer.
  tlrt_buffer *out = kSentinel;
  BAD(tlrt_buffer_copy(nullptr, &out), TLRT_ERR_NULL_ARGUMENT, "tlrt_buffer_copy", "buffer");
  CLEARED(out);
  BAD(tlrt_buffer_copy(f.a, nullptr), TLRT_ERR_NULL_ARGUMENT, "tlrt_buffer_copy", "out");
  out = kSentinel;
  BAD(tlrt_buffer_copy(f.released, &out), TLRT_ERR_RELEASED, "tlrt_buffer_copy", "buffer");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_buffer_to_device(nullptr, TLRT_DEVICE_CPU, &out), TLRT_ERR_NULL_ARGUMENT,
      "tlrt_buffer_to_device", "buffer");
  CLEARED(out);
  BAD(tlrt_buffer_to_device(f.a, TLRT_DEVICE_CPU, nullptr), TLRT_ERR_NULL_ARGUMENT,
      "tlrt_buffer_to_device", "out");
  out = kSentinel;
  BAD(tlrt_buffer_to_device(f.released, TLRT_DEVICE_CPU, &out), TLRT_ERR_RELEASED,
      "tlrt_buffer_to_device", "buffer");
  CLEARED(out);

  // Lifetime calls: free(NULL) is a no-op; retain(NULL) fails; retaining a released buffer works.
  tlrt_buffer_free(nullptr);
  BAD(tlrt_buffer_retain(nullptr), TLRT_ERR_NULL_ARGUMENT, "tlrt_buffer_retain", "buffer");
  TH_OK(tlrt_buffer_retain(f.released));
  tlrt_buffer_free(f.released);  // drops the extra reference only
  rel = false;
  TH_OK(tlrt_buffer_is_released(f.released, &rel));
  TH_CHECK(rel);

  // release_storage: NULL buffer (freed cleared to false), NULL freed is allowed, idempotent.
  bool freed = true;
  BAD(tlrt_buffer_release_storage(nullptr, &freed), TLRT_ERR_NULL_ARGUMENT,
      "tlrt_buffer_release_storage", "buffer");
  TH_CHECK(!freed);
  BAD(tlrt_buffer_release_storage(nullptr, nullptr), TLRT_ERR_NULL_ARGUMENT,
      "tlrt_buffer_release_storage", "buffer");
  tlrt_buffer *tmp = th::upload({1.0f, 2.0f});
  freed = false;
  TH_OK(tlrt_buffer_release_storage(tmp, &freed));
  TH_CHECK(freed);
  freed = true;
  TH_OK(tlrt_buffer_release_storage(tmp, &freed));
  TH_CHECK(!freed);
  TH_OK(tlrt_buffer_release_storage(tmp, nullptr));
  size = 77;
  BAD(tlrt_buffer_size(tmp, &size), TLRT_ERR_RELEASED, "tlrt_buffer_size", "buffer");
  TH_CHECK(size == 0);
  tlrt_buffer_free(tmp);
  // release_storage of an empty buffer: there is no payload, but the state changes all the same.
  tmp = th::upload({});
  freed = false;
  TH_OK(tlrt_buffer_release_storage(tmp, &freed));
  TH_CHECK(freed);
  BAD(tlrt_buffer_size(tmp, &size), TLRT_ERR_RELEASED, "tlrt_buffer_size", "buffer");
  tlrt_buffer_free(tmp);
}

// ---- RNG ---------------------------------------------------------------------------------------

void check_rng() {
  BAD(tlrt_rand_uniform(TLRT_DEVICE_CPU, 4, 1, nullptr), TLRT_ERR_NULL_ARGUMENT,
      "tlrt_rand_uniform", "out");
  BAD(tlrt_rand_normal(TLRT_DEVICE_CPU, 4, 0.0, 1.0, 1, nullptr), TLRT_ERR_NULL_ARGUMENT,
      "tlrt_rand_normal", "out");
  BAD(tlrt_bernoulli_mask(TLRT_DEVICE_CPU, 4, 0.5, 1, nullptr), TLRT_ERR_NULL_ARGUMENT,
      "tlrt_bernoulli_mask", "out");
  for (uint64_t n : {kTooMany, UINT64_MAX}) {
    tlrt_buffer *out = kSentinel;
    BAD(tlrt_rand_uniform(TLRT_DEVICE_CPU, n, 1, &out), TLRT_ERR_OVERFLOW, "tlrt_rand_uniform",
        "n");
    CLEARED(out);
    out = kSentinel;
    BAD(tlrt_rand_normal(TLRT_DEVICE_CPU, n, 0.0, 1.0, 1, &out), TLRT_ERR_OVERFLOW,
        "tlrt_rand_normal", "n");
    CLEARED(out);
    out = kSentinel;
    BAD(tlrt_bernoulli_mask(TLRT_DEVICE_CPU, n, 0.5, 1, &out), TLRT_ERR_OVERFLOW,
        "tlrt_bernoulli_mask", "n");
    CLEARED(out);
  }
  // Scalar domains: the host-scalar rule (abi/torchlean_rt.h) for mean, std and keep_prob (not
  // NaN, not infinite, not rounding to +-inf in float32), and std >= 0 after rounding.
  const double inf = INFINITY, nan = NAN;
  for (double mean : {nan, -nan, inf, -inf}) {
    tlrt_buffer *out = kSentinel;
    BAD(tlrt_rand_normal(TLRT_DEVICE_CPU, 4, mean, 1.0, 1, &out), TLRT_ERR_INVALID_ARGUMENT,
        "tlrt_rand_normal", "mean");
    CLEARED(out);
  }
  for (double sd : {nan, inf, -inf, -1.0, -1e-20, -(double)FLT_MIN}) {
    tlrt_buffer *out = kSentinel;
    BAD(tlrt_rand_normal(TLRT_DEVICE_CPU, 4, 0.0, sd, 1, &out), TLRT_ERR_INVALID_ARGUMENT,
        "tlrt_rand_normal", "std");
    CLEARED(out);
  }
  for (double p : {nan, -nan, inf, -inf, 1e39, -1e39}) {
    tlrt_buffer *out = kSentinel;
    BAD(tlrt_bernoulli_mask(TLRT_DEVICE_CPU, 4, p, 1, &out), TLRT_ERR_INVALID_ARGUMENT,
        "tlrt_bernoulli_mask", "keep_prob");
    CLEARED(out);
  }
  // The rule sees the double and its float32 rounding (abi/tlrt_rng.h): mean = 1e300 and
  // std = 1e300 round to +inf and are refused; std's sign is checked after rounding, so
  // std = -1e-50 and -DBL_MIN, which round to -0.0f, are accepted.
  for (auto mc : {std::make_pair(1e300, 1.0), std::make_pair(-1e300, 1.0)}) {
    tlrt_buffer *out = kSentinel;
    BAD(tlrt_rand_normal(TLRT_DEVICE_CPU, 4, mc.first, mc.second, 1, &out),
        TLRT_ERR_INVALID_ARGUMENT, "tlrt_rand_normal", "mean");
    CLEARED(out);
  }
  {
    tlrt_buffer *out = kSentinel;
    BAD(tlrt_rand_normal(TLRT_DEVICE_CPU, 4, 0.0, 1e300, 1, &out), TLRT_ERR_INVALID_ARGUMENT,
        "tlrt_rand_normal", "std");
    CLEARED(out);
  }
  for (double sd : {-1e-50, -DBL_MIN}) {
    tlrt_buffer *out = nullptr;
    TH_OK(tlrt_rand_normal(TLRT_DEVICE_CPU, 4, 0.0, sd, 1, &out));
    tlrt_buffer_free(out);
  }
  // Finite values outside [0, 1] are documented as valid for keep_prob; std = 0 is valid.
  for (double p : {-1.0, 2.0, -1e30, 1e30}) {
    tlrt_buffer *out = nullptr;
    TH_OK(tlrt_bernoulli_mask(TLRT_DEVICE_CPU, 4, p, 1, &out));
    tlrt_buffer_free(out);
  }
  tlrt_buffer *out = nullptr;
  TH_OK(tlrt_rand_normal(TLRT_DEVICE_CPU, 4, 0.0, 0.0, 1, &out));
  tlrt_buffer_free(out);
}

// ---- elementwise --------------------------------------------------------------------------------

using UnaryFn = tlrt_status (*)(const tlrt_buffer *, tlrt_buffer **);
using BinaryFn = tlrt_status (*)(const tlrt_buffer *, const tlrt_buffer *, tlrt_buffer **);
using MinMaxBwdFn = tlrt_status (*)(const tlrt_buffer *, const tlrt_buffer *, const tlrt_buffer *,
                                    tlrt_buffer **, tlrt_buffer **);

struct UnaryOp {
  const char *fn;
  UnaryFn call;
};
struct BinaryOp {
  const char *fn;
  const char *arg0;  // the header's names of the two buffer arguments
  const char *arg1;
  BinaryFn call;
};

// Ops with scalar arguments are called with valid scalars here; their domains are checked below.
const UnaryOp kUnary[] = {
    {"tlrt_abs", tlrt_abs},
    {"tlrt_neg", tlrt_neg},
    {"tlrt_sqrt", tlrt_sqrt},
    {"tlrt_inv", tlrt_inv},
    {"tlrt_relu", tlrt_relu},
    {"tlrt_exp", tlrt_exp},
    {"tlrt_log", tlrt_log},
    {"tlrt_sigmoid", tlrt_sigmoid},
    {"tlrt_tanh", tlrt_tanh},
    {"tlrt_softplus", tlrt_softplus},
    {"tlrt_gelu", tlrt_gelu},
    {"tlrt_silu", tlrt_silu},
    {"tlrt_scale", [](const tlrt_buffer *x, tlrt_buffer **o) { return tlrt_scale(x, 2.0, o); }},
    {"tlrt_clamp",
     [](const tlrt_buffer *x, tlrt_buffer **o) { return tlrt_clamp(x, -1.0, 1.0, o); }},
    {"tlrt_safe_log",
     [](const tlrt_buffer *x, tlrt_buffer **o) { return tlrt_safe_log(x, 1e-6, o); }},
};

const BinaryOp kBinary[] = {
    {"tlrt_add", "a", "b", tlrt_add},
    {"tlrt_sub", "a", "b", tlrt_sub},
    {"tlrt_mul", "a", "b", tlrt_mul},
    {"tlrt_div", "a", "b", tlrt_div},
    {"tlrt_max", "a", "b", tlrt_max},
    {"tlrt_min", "a", "b", tlrt_min},
    {"tlrt_axpy", "a", "b",
     [](const tlrt_buffer *a, const tlrt_buffer *b, tlrt_buffer **o) {
       return tlrt_axpy(a, b, 0.5, o);
     }},
    {"tlrt_abs_bwd", "x", "g", tlrt_abs_bwd},
    {"tlrt_sqrt_bwd", "x", "g", tlrt_sqrt_bwd},
    {"tlrt_inv_bwd", "x", "g", tlrt_inv_bwd},
    {"tlrt_log_bwd", "x", "g", tlrt_log_bwd},
    {"tlrt_relu_bwd", "x", "g", tlrt_relu_bwd},
    {"tlrt_clamp_bwd", "x", "g",
     [](const tlrt_buffer *x, const tlrt_buffer *g, tlrt_buffer **o) {
       return tlrt_clamp_bwd(x, g, -1.0, 1.0, o);
     }},
    {"tlrt_exp_bwd", "x", "g", tlrt_exp_bwd},
    {"tlrt_sigmoid_bwd", "x", "g", tlrt_sigmoid_bwd},
    {"tlrt_tanh_bwd", "x", "g", tlrt_tanh_bwd},
    {"tlrt_softplus_bwd", "x", "g", tlrt_softplus_bwd},
    {"tlrt_gelu_bwd", "x", "g", tlrt_gelu_bwd},
    {"tlrt_silu_bwd", "x", "g", tlrt_silu_bwd},
    {"tlrt_safe_log_bwd", "x", "g",
     [](const tlrt_buffer *x, const tlrt_buffer *g, tlrt_buffer **o) {
       return tlrt_safe_log_bwd(x, g, 1e-6, o);
     }},
};

void check_unary(const UnaryOp &op, const Fixture &f) {
  tlrt_buffer *out = kSentinel;
  BAD(op.call(nullptr, &out), TLRT_ERR_NULL_ARGUMENT, op.fn, "x");
  CLEARED(out);
  BAD(op.call(f.a, nullptr), TLRT_ERR_NULL_ARGUMENT, op.fn, "out");
  out = kSentinel;
  BAD(op.call(f.released, &out), TLRT_ERR_RELEASED, op.fn, "x");
  CLEARED(out);
  // Good inputs, the empty one included, still work.
  out = nullptr;
  TH_CHECK_MSG(op.call(f.a, &out) == TLRT_OK, "%s failed: %s", op.fn, tlrt_last_error());
  expect_result(op.fn, out, 4);
  out = nullptr;
  TH_CHECK_MSG(op.call(f.empty, &out) == TLRT_OK, "%s(empty) failed: %s", op.fn, tlrt_last_error());
  expect_result(op.fn, out, 0);
}

void check_binary(const BinaryOp &op, const Fixture &f) {
  tlrt_buffer *out = kSentinel;
  BAD(op.call(nullptr, f.b, &out), TLRT_ERR_NULL_ARGUMENT, op.fn, op.arg0);
  CLEARED(out);
  out = kSentinel;
  BAD(op.call(f.a, nullptr, &out), TLRT_ERR_NULL_ARGUMENT, op.fn, op.arg1);
  CLEARED(out);
  BAD(op.call(f.a, f.b, nullptr), TLRT_ERR_NULL_ARGUMENT, op.fn, "out");
  // Size mismatch in both orders, and against an empty buffer: the message names both.
  const tlrt_buffer *pairs[][2] = {{f.a, f.short3}, {f.short3, f.a}, {f.empty, f.a}, {f.a, f.empty}};
  for (auto &p : pairs) {
    out = kSentinel;
    BAD(op.call(p[0], p[1], &out), TLRT_ERR_SHAPE, op.fn, op.arg0, op.arg1);
    CLEARED(out);
  }
  // A released buffer in each position.
  out = kSentinel;
  BAD(op.call(f.released, f.b, &out), TLRT_ERR_RELEASED, op.fn, op.arg0);
  CLEARED(out);
  out = kSentinel;
  BAD(op.call(f.a, f.released, &out), TLRT_ERR_RELEASED, op.fn, op.arg1);
  CLEARED(out);
  // Good inputs still work, the same buffer twice included.
  out = nullptr;
  TH_CHECK_MSG(op.call(f.a, f.b, &out) == TLRT_OK, "%s failed: %s", op.fn, tlrt_last_error());
  expect_result(op.fn, out, 4);
  out = nullptr;
  TH_CHECK_MSG(op.call(f.a, f.a, &out) == TLRT_OK, "%s(a, a) failed: %s", op.fn, tlrt_last_error());
  expect_result(op.fn, out, 4);
  out = nullptr;
  TH_CHECK_MSG(op.call(f.empty, f.empty, &out) == TLRT_OK, "%s(empty) failed: %s", op.fn,
               tlrt_last_error());
  expect_result(op.fn, out, 0);
}

void check_minmax_bwd(const char *fn, MinMaxBwdFn call, const Fixture &f) {
  const tlrt_buffer *const A = f.a, *const B = f.b, *const G = f.g;
  struct Case {
    const tlrt_buffer *a, *b, *g;
    tlrt_status want;
    std::vector<const char *> args;
  };
  const std::vector<Case> cases = {
      {nullptr, B, G, TLRT_ERR_NULL_ARGUMENT, {"a"}},
      {A, nullptr, G, TLRT_ERR_NULL_ARGUMENT, {"b"}},
      {A, B, nullptr, TLRT_ERR_NULL_ARGUMENT, {"g"}},
      {f.released, B, G, TLRT_ERR_RELEASED, {"a"}},
      {A, f.released, G, TLRT_ERR_RELEASED, {"b"}},
      {A, B, f.released, TLRT_ERR_RELEASED, {"g"}},
      // Size mismatch for each pair: the message names both.
      {f.short3, B, G, TLRT_ERR_SHAPE, {"a", "b"}},
      {A, f.short3, G, TLRT_ERR_SHAPE, {"a", "b"}},
      {A, B, f.short3, TLRT_ERR_SHAPE, {"a", "g"}},
      {f.empty, f.empty, G, TLRT_ERR_SHAPE, {"a", "g"}},
  };
  for (const Case &c : cases) {
    tlrt_buffer *da = kSentinel, *db = kSentinel;
    const tlrt_status s = call(c.a, c.b, c.g, &da, &db);
    const std::string msg = tlrt_last_error();
    ++th::checks();
    if (s != c.want) {
      TH_CHECK_MSG(false, "%s returned %s, expected %s (%s)", fn, tlrt_status_string(s),
                   tlrt_status_string(c.want), msg.c_str());
      continue;
    }
    TH_CHECK_MSG(has_word(msg, fn), "%s: last error \"%s\" does not name it", fn, msg.c_str());
    for (const char *a : c.args)
      TH_CHECK_MSG(has_word(msg, std::string("argument ") + a),
                   "%s: last error \"%s\" does not name argument %s", fn, msg.c_str(), a);
    CLEARED(da);
    CLEARED(db);
  }
  // NULL da or NULL db: the other out-parameter is cleared.
  tlrt_buffer *da = kSentinel, *db = kSentinel;
  BAD(call(A, B, G, nullptr, &db), TLRT_ERR_NULL_ARGUMENT, fn, "da");
  CLEARED(db);
  da = db = kSentinel;
  BAD(call(A, B, G, &da, nullptr), TLRT_ERR_NULL_ARGUMENT, fn, "db");
  CLEARED(da);
  // Good inputs work.
  da = db = nullptr;
  TH_CHECK_MSG(call(A, B, G, &da, &db) == TLRT_OK, "%s failed: %s", fn, tlrt_last_error());
  expect_result(fn, da, 4);
  expect_result(fn, db, 4);
  da = db = nullptr;
  TH_CHECK_MSG(call(f.empty, f.empty, f.empty, &da, &db) == TLRT_OK, "%s(empty) failed", fn);
  expect_result(fn, da, 0);
  expect_result(fn, db, 0);
}

// Scalar domains of the elementwise ops: NaN clamp bounds; NaN, negative, float32-vanishing or
// float32-infinite eps.
void check_scalar_domains(const Fixture &f) {
  const double nan = NAN, inf = INFINITY;
  struct Bounds {
    double lo, hi;
    const char *arg;
  };
  for (const Bounds &b : {Bounds{nan, 1.0, "lo"}, Bounds{-1.0, nan, "hi"}, Bounds{nan, nan, "lo"},
                          Bounds{-nan, 1.0, "lo"}, Bounds{-inf, nan, "hi"}}) {
    tlrt_buffer *out = kSentinel;
    BAD(tlrt_clamp(f.a, b.lo, b.hi, &out), TLRT_ERR_INVALID_ARGUMENT, "tlrt_clamp", b.arg);
    CLEARED(out);
    out = kSentinel;
    BAD(tlrt_clamp_bwd(f.a, f.g, b.lo, b.hi, &out), TLRT_ERR_INVALID_ARGUMENT, "tlrt_clamp_bwd",
        b.arg);
    CLEARED(out);
  }
  // Infinite bounds and lo > hi are valid.
  for (const Bounds &b : {Bounds{-inf, inf, ""}, Bounds{2.0, -2.0, ""}, Bounds{inf, -inf, ""}}) {
    tlrt_buffer *out = nullptr;
    TH_OK(tlrt_clamp(f.a, b.lo, b.hi, &out));
    expect_result("tlrt_clamp", out, 4);
    out = nullptr;
    TH_OK(tlrt_clamp_bwd(f.a, f.g, b.lo, b.hi, &out));
    expect_result("tlrt_clamp_bwd", out, 4);
  }
  // NaN, negative, a positive eps that rounds to +0 in float32 (2^-150 and below), and an eps
  // whose float32 value is infinite: each would break "finite for every finite x when eps > 0".
  for (double eps : {nan, -nan, -1.0, -1e-300, -inf, 1e-300, 0x1p-150, 1e-46, inf, 1e39, 0x1p128}) {
    tlrt_buffer *out = kSentinel;
    BAD(tlrt_safe_log(f.a, eps, &out), TLRT_ERR_INVALID_ARGUMENT, "tlrt_safe_log", "eps");
    CLEARED(out);
    out = kSentinel;
    BAD(tlrt_safe_log_bwd(f.a, f.g, eps, &out), TLRT_ERR_INVALID_ARGUMENT, "tlrt_safe_log_bwd",
        "eps");
    CLEARED(out);
  }
  // 0 (plain log of softplus), the smallest positive float32 and the largest finite one.
  for (double eps : {0.0, -0.0, 0x1p-149, 1e-45, 3.4e38, (double)FLT_MAX}) {
    tlrt_buffer *out = nullptr;
    TH_OK(tlrt_safe_log(f.a, eps, &out));
    expect_result("tlrt_safe_log", out, 4);
    out = nullptr;
    TH_OK(tlrt_safe_log_bwd(f.a, f.g, eps, &out));
    expect_result("tlrt_safe_log_bwd", out, 4);
  }
  // A domain error is reported even when the buffer is fine, and a bad buffer even when the
  // scalar is fine (the two kinds of check are independent).
  tlrt_buffer *out = kSentinel;
  BAD(tlrt_clamp(nullptr, -1.0, 1.0, &out), TLRT_ERR_NULL_ARGUMENT, "tlrt_clamp", "x");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_safe_log_bwd(f.a, f.short3, 0.1, &out), TLRT_ERR_SHAPE, "tlrt_safe_log_bwd", "x", "g");
  CLEARED(out);
}

// Inputs on different devices (needs a usable GPU): one CPU and one CUDA buffer in each position.
void check_mixed_devices(const Fixture &f) {
  if (!th::cuda_ready()) {
    std::printf("no usable CUDA device: mixed-device checks skipped\n");
    return;
  }
  tlrt_buffer *c4 = nullptr;
  TH_OK(tlrt_buffer_to_device(f.a, TLRT_DEVICE_CUDA(0), &c4));
  if (c4 == nullptr) return;
  for (const BinaryOp &op : kBinary) {
    tlrt_buffer *out = kSentinel;
    BAD(op.call(f.a, c4, &out), TLRT_ERR_DEVICE_MISMATCH, op.fn, op.arg0, op.arg1);
    CLEARED(out);
    out = kSentinel;
    BAD(op.call(c4, f.b, &out), TLRT_ERR_DEVICE_MISMATCH, op.fn, op.arg0, op.arg1);
    CLEARED(out);
  }
  for (auto p : {std::make_pair("tlrt_max_bwd", (MinMaxBwdFn)tlrt_max_bwd),
                 std::make_pair("tlrt_min_bwd", (MinMaxBwdFn)tlrt_min_bwd)}) {
    tlrt_buffer *da = kSentinel, *db = kSentinel;
    BAD(p.second(f.a, c4, f.g, &da, &db), TLRT_ERR_DEVICE_MISMATCH, p.first, "a", "b");
    CLEARED(da);
    CLEARED(db);
    da = db = kSentinel;
    BAD(p.second(f.a, f.b, c4, &da, &db), TLRT_ERR_DEVICE_MISMATCH, p.first, "a", "g");
    CLEARED(da);
    CLEARED(db);
    da = db = kSentinel;
    BAD(p.second(c4, f.b, f.g, &da, &db), TLRT_ERR_DEVICE_MISMATCH, p.first, "a", "b");
    CLEARED(da);
    CLEARED(db);
  }
  tlrt_buffer_free(c4);
}

// ---- reductions ---------------------------------------------------------------------------------

using ReduceWholeFn = tlrt_status (*)(const tlrt_buffer *, tlrt_buffer **);
using ReduceMatrixFn = tlrt_status (*)(const tlrt_buffer *, uint64_t, uint64_t, tlrt_buffer **);

struct ReduceWholeOp {
  const char *fn;
  ReduceWholeFn call;
};
struct ReduceMatrixOp {
  const char *fn;
  ReduceMatrixFn call;
  int axis;  // the output has cols (axis 0) or rows (axis 1) elements
};

const ReduceWholeOp kReduceWhole[] = {
    {"tlrt_reduce_sum", tlrt_reduce_sum},
    {"tlrt_reduce_mean", tlrt_reduce_mean},
};
const ReduceMatrixOp kReduceMatrix[] = {
    {"tlrt_reduce_sum_axis0", tlrt_reduce_sum_axis0, 0},
    {"tlrt_reduce_sum_axis1", tlrt_reduce_sum_axis1, 1},
    {"tlrt_reduce_max_axis0", tlrt_reduce_max_axis0, 0},
    {"tlrt_reduce_max_axis1", tlrt_reduce_max_axis1, 1},
};

void check_reduce_whole(const ReduceWholeOp &op, const Fixture &f) {
  tlrt_buffer *out = kSentinel;
  BAD(op.call(nullptr, &out), TLRT_ERR_NULL_ARGUMENT, op.fn, "x");
  CLEARED(out);
  BAD(op.call(f.a, nullptr), TLRT_ERR_NULL_ARGUMENT, op.fn, "out");
  out = kSentinel;
  BAD(op.call(f.released, &out), TLRT_ERR_RELEASED, op.fn, "x");
  CLEARED(out);
  // One element out, for the empty input too.
  for (const tlrt_buffer *x : {f.a, f.short3, f.empty}) {
    out = nullptr;
    TH_CHECK_MSG(op.call(x, &out) == TLRT_OK, "%s failed: %s", op.fn, tlrt_last_error());
    expect_result(op.fn, out, 1);
  }
}

void check_reduce_matrix(const ReduceMatrixOp &op, const Fixture &f) {
  const uint64_t k32 = uint64_t{1} << 32;
  tlrt_buffer *out = kSentinel;
  BAD(op.call(nullptr, 2, 2, &out), TLRT_ERR_NULL_ARGUMENT, op.fn, "x");
  CLEARED(out);
  BAD(op.call(f.a, 2, 2, nullptr), TLRT_ERR_NULL_ARGUMENT, op.fn, "out");
  out = kSentinel;
  BAD(op.call(f.released, 2, 2, &out), TLRT_ERR_RELEASED, op.fn, "x");
  CLEARED(out);
  // rows * cols != size (f.a has 4 elements, f.empty 0), products beyond 64 bits included: 2^32 *
  // 2^32 wraps to 0 in 64-bit arithmetic and must not pass as the size of the empty buffer.
  struct Shape {
    const tlrt_buffer *x;
    uint64_t rows, cols;
  };
  for (const Shape &s : {Shape{f.a, 3, 1}, Shape{f.a, 1, 3}, Shape{f.a, 2, 3}, Shape{f.a, 0, 4},
                         Shape{f.a, 4, 0}, Shape{f.a, 5, 1}, Shape{f.a, k32 + 4, 1},
                         Shape{f.a, k32, k32}, Shape{f.a, UINT64_MAX, UINT64_MAX},
                         Shape{f.empty, k32, k32}, Shape{f.empty, 1, 1}, Shape{f.short3, 3, 3}}) {
    out = kSentinel;
    BAD(op.call(s.x, s.rows, s.cols, &out), TLRT_ERR_SHAPE, op.fn, "x", "rows", "cols");
    CLEARED(out);
  }
  // An empty matrix whose output dimension exceeds TLRT_MAX_ELEMENTS: overflow, naming it.
  const uint64_t big_rows = op.axis == 1 ? kTooMany : 0, big_cols = op.axis == 0 ? kTooMany : 0;
  out = kSentinel;
  BAD(op.call(f.empty, big_rows, big_cols, &out), TLRT_ERR_OVERFLOW, op.fn,
      op.axis == 0 ? "cols" : "rows");
  CLEARED(out);
  // ... while the other axis of that size gives an empty output.
  out = nullptr;
  TH_OK(op.call(f.empty, big_cols, big_rows, &out));
  expect_result(op.fn, out, 0);
  // Good shapes, empty axes included.
  for (const Shape &s : {Shape{f.a, 2, 2}, Shape{f.a, 4, 1}, Shape{f.a, 1, 4}, Shape{f.empty, 0, 3},
                         Shape{f.empty, 3, 0}, Shape{f.empty, 0, 0}}) {
    out = nullptr;
    TH_CHECK_MSG(op.call(s.x, s.rows, s.cols, &out) == TLRT_OK, "%s(%llu, %llu) failed: %s", op.fn,
                 (unsigned long long)s.rows, (unsigned long long)s.cols, tlrt_last_error());
    expect_result(op.fn, out, op.axis == 0 ? s.cols : s.rows);
  }
}

void check_reduce_sum_axis(const Fixture &f) {
  const char *fn = "tlrt_reduce_sum_axis";
  const uint64_t k32 = uint64_t{1} << 32;
  const uint64_t d22[2] = {2, 2};
  const uint64_t d9[9] = {1, 1, 1, 1, 4, 1, 1, 1, 1};
  tlrt_buffer *out = kSentinel;
  BAD(tlrt_reduce_sum_axis(nullptr, d22, 2, 0, &out), TLRT_ERR_NULL_ARGUMENT, fn, "x");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_reduce_sum_axis(f.a, nullptr, 2, 0, &out), TLRT_ERR_NULL_ARGUMENT, fn, "dims");
  CLEARED(out);
  BAD(tlrt_reduce_sum_axis(f.a, d22, 2, 0, nullptr), TLRT_ERR_NULL_ARGUMENT, fn, "out");
  out = kSentinel;
  BAD(tlrt_reduce_sum_axis(f.released, d22, 2, 0, &out), TLRT_ERR_RELEASED, fn, "x");
  CLEARED(out);
  // rank outside 1..8.
  for (uint32_t rank : {0u, 9u, 100u, UINT32_MAX}) {
    out = kSentinel;
    BAD(tlrt_reduce_sum_axis(f.a, d9, rank, 0, &out), TLRT_ERR_INVALID_ARGUMENT, fn, "rank");
    CLEARED(out);
  }
  // axis >= rank.
  for (uint32_t axis : {2u, 3u, 8u, UINT32_MAX}) {
    out = kSentinel;
    BAD(tlrt_reduce_sum_axis(f.a, d22, 2, axis, &out), TLRT_ERR_INDEX, fn, "axis");
    CLEARED(out);
  }
  // product of dims != size (beyond 64 bits included).
  struct Dims {
    const tlrt_buffer *x;
    std::vector<uint64_t> d;
  };
  const std::vector<Dims> bad_dims = {
      {f.a, {2, 3}},       {f.a, {3}},           {f.a, {4, 2}},          {f.a, {0, 4}},
      {f.a, {k32, k32}},   {f.a, {k32 + 4}},     {f.empty, {k32, k32}},  {f.empty, {1}},
      {f.a, {2, 2, 1, 1, 1, 1, 1, 2}}, {f.short3, {1, 4}}};
  for (const Dims &s : bad_dims) {
    out = kSentinel;
    BAD(tlrt_reduce_sum_axis(s.x, s.d.data(), (uint32_t)s.d.size(), 0, &out), TLRT_ERR_SHAPE, fn,
        "x", "dims");
    CLEARED(out);
  }
  // An empty input whose output would be too large: 2^64 outputs, and TLRT_MAX_ELEMENTS + 1.
  const uint64_t huge[3] = {k32, k32, 0};
  out = kSentinel;
  BAD(tlrt_reduce_sum_axis(f.empty, huge, 3, 2, &out), TLRT_ERR_OVERFLOW, fn, "dims");
  CLEARED(out);
  const uint64_t too_many[2] = {0, kTooMany};
  out = kSentinel;
  BAD(tlrt_reduce_sum_axis(f.empty, too_many, 2, 0, &out), TLRT_ERR_OVERFLOW, fn, "dims");
  CLEARED(out);
  // Good calls: output sizes.
  struct Good {
    const tlrt_buffer *x;
    std::vector<uint64_t> d;
    uint32_t axis;
    uint64_t n;
  };
  const std::vector<Good> good = {{f.a, {4}, 0, 1},           {f.a, {2, 2}, 1, 2},
                                  {f.a, {1, 4, 1}, 1, 1},     {f.a, {1, 4, 1}, 2, 4},
                                  {f.empty, {0}, 0, 1},       {f.empty, {0, 3}, 0, 3},
                                  {f.empty, {0, 3}, 1, 0},    {f.empty, {k32, k32, 0}, 0, 0},
                                  {f.a, {1, 1, 1, 1, 4, 1, 1, 1}, 7, 4}};
  for (const Good &g : good) {
    out = nullptr;
    TH_CHECK_MSG(tlrt_reduce_sum_axis(g.x, g.d.data(), (uint32_t)g.d.size(), g.axis, &out) ==
                     TLRT_OK,
                 "%s failed: %s", fn, tlrt_last_error());
    expect_result(fn, out, g.n);
  }
}

void check_reduce_from_broadcast(const Fixture &f) {
  const char *fn = "tlrt_reduce_from_broadcast";
  // f.a (4 elements) as the gradient of broadcasting in (2, 1) to out (2, 2): out axis 0 reads
  // input axis 0, out axis 1 is inserted; the input's size-1 axis 1 is unmapped.
  const uint64_t in21[2] = {2, 1}, out22[2] = {2, 2};
  const uint32_t map10[2] = {1, 0};
  tlrt_buffer *out = kSentinel;
  BAD(tlrt_reduce_from_broadcast(nullptr, in21, 2, out22, 2, map10, &out), TLRT_ERR_NULL_ARGUMENT,
      fn, "dout");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_reduce_from_broadcast(f.a, nullptr, 2, out22, 2, map10, &out), TLRT_ERR_NULL_ARGUMENT,
      fn, "in_dims");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_reduce_from_broadcast(f.a, in21, 2, nullptr, 2, map10, &out), TLRT_ERR_NULL_ARGUMENT,
      fn, "out_dims");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_reduce_from_broadcast(f.a, in21, 2, out22, 2, nullptr, &out), TLRT_ERR_NULL_ARGUMENT,
      fn, "axis_map");
  CLEARED(out);
  BAD(tlrt_reduce_from_broadcast(f.a, in21, 2, out22, 2, map10, nullptr), TLRT_ERR_NULL_ARGUMENT,
      fn, "out");
  out = kSentinel;
  BAD(tlrt_reduce_from_broadcast(f.released, in21, 2, out22, 2, map10, &out), TLRT_ERR_RELEASED,
      fn, "dout");
  CLEARED(out);
  // Ranks beyond 8.
  const uint64_t ones9[9] = {1, 1, 1, 1, 1, 1, 1, 1, 4};
  const uint32_t map9[9] = {0, 0, 0, 0, 0, 0, 0, 0, 0};
  out = kSentinel;
  BAD(tlrt_reduce_from_broadcast(f.a, ones9, 9, out22, 2, map10, &out), TLRT_ERR_INVALID_ARGUMENT,
      fn, "in_rank");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_reduce_from_broadcast(f.a, in21, 2, ones9, 9, map9, &out), TLRT_ERR_INVALID_ARGUMENT, fn,
      "out_rank");
  CLEARED(out);
  // An axis_map entry beyond in_rank: not an axis.
  for (uint32_t a : {3u, 9u, UINT32_MAX}) {
    const uint32_t map[2] = {1, a};
    out = kSentinel;
    BAD(tlrt_reduce_from_broadcast(f.a, in21, 2, out22, 2, map, &out), TLRT_ERR_INDEX, fn,
        "axis_map");
    CLEARED(out);
  }
  // An input axis mapped twice.
  const uint32_t map11[2] = {1, 1};
  out = kSentinel;
  BAD(tlrt_reduce_from_broadcast(f.a, in21, 2, out22, 2, map11, &out), TLRT_ERR_INVALID_ARGUMENT,
      fn, "axis_map");
  CLEARED(out);
  // A mapped input axis neither 1 nor the output's size; an unmapped input axis of size != 1.
  const uint64_t in3[1] = {3}, out4[1] = {4}, in2[1] = {2};
  const uint32_t map1[1] = {1}, map00[2] = {0, 0};
  out = kSentinel;
  BAD(tlrt_reduce_from_broadcast(f.a, in3, 1, out4, 1, map1, &out), TLRT_ERR_SHAPE, fn, "in_dims",
      "out_dims");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_reduce_from_broadcast(f.a, in2, 1, out22, 2, map00, &out), TLRT_ERR_SHAPE, fn,
      "in_dims");
  CLEARED(out);
  // prod(out_dims) != size of dout (beyond 64 bits included; rank 0 = one element).
  const uint64_t out3[1] = {3}, k32x2[2] = {uint64_t{1} << 32, uint64_t{1} << 32};
  const uint32_t map0[1] = {0};
  out = kSentinel;
  BAD(tlrt_reduce_from_broadcast(f.a, nullptr, 0, out3, 1, map0, &out), TLRT_ERR_SHAPE, fn, "dout",
      "out_dims");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_reduce_from_broadcast(f.empty, nullptr, 0, k32x2, 2, map00, &out), TLRT_ERR_SHAPE, fn,
      "dout", "out_dims");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_reduce_from_broadcast(f.a, nullptr, 0, nullptr, 0, nullptr, &out), TLRT_ERR_SHAPE, fn,
      "dout", "out_dims");
  CLEARED(out);
  // A result beyond TLRT_MAX_ELEMENTS (an empty dout, so the shapes are consistent).
  const uint64_t in_big[2] = {1, kTooMany}, out_big[2] = {0, kTooMany};
  const uint32_t map12[2] = {1, 2};
  out = kSentinel;
  BAD(tlrt_reduce_from_broadcast(f.empty, in_big, 2, out_big, 2, map12, &out), TLRT_ERR_OVERFLOW,
      fn, "in_dims");
  CLEARED(out);
  const uint64_t k40 = uint64_t{1} << 40;
  const uint64_t in_huge[3] = {1, k40, k40}, out_huge[3] = {0, k40, k40};
  const uint32_t map123[3] = {1, 2, 3};
  out = kSentinel;
  BAD(tlrt_reduce_from_broadcast(f.empty, in_huge, 3, out_huge, 3, map123, &out),
      TLRT_ERR_OVERFLOW, fn, "in_dims");
  CLEARED(out);
  // Good calls: (2, 1) <- (2, 2); scalar <- (4) with NULL input arrays at rank 0; an empty dout.
  out = nullptr;
  TH_OK(tlrt_reduce_from_broadcast(f.a, in21, 2, out22, 2, map10, &out));
  expect_result(fn, out, 2);
  out = nullptr;
  TH_OK(tlrt_reduce_from_broadcast(f.a, nullptr, 0, out4, 1, map0, &out));
  expect_result(fn, out, 1);
  const uint64_t in1[1] = {1}, out0[1] = {0};
  out = nullptr;
  TH_OK(tlrt_reduce_from_broadcast(f.empty, in1, 1, out0, 1, map1, &out));
  expect_result(fn, out, 1);
}

}  // namespace

int main() {
  const tlrt_allocator_stats start = th::stats();
  {
    Fixture f = make_fixture();
    check_runtime();
    check_devices(f);
    check_creation();
    check_downloads(f);
    check_handles(f);
    check_rng();
    for (const UnaryOp &op : kUnary) check_unary(op, f);
    for (const BinaryOp &op : kBinary) check_binary(op, f);
    check_minmax_bwd("tlrt_max_bwd", tlrt_max_bwd, f);
    check_minmax_bwd("tlrt_min_bwd", tlrt_min_bwd, f);
    check_scalar_domains(f);
    check_mixed_devices(f);
    for (const ReduceWholeOp &op : kReduceWhole) check_reduce_whole(op, f);
    for (const ReduceMatrixOp &op : kReduceMatrix) check_reduce_matrix(op, f);
    check_reduce_sum_axis(f);
    check_reduce_from_broadcast(f);
    free_fixture(f);
  }
  expect_no_leaks(start);
  return th::finish("test_bad_input");
}
