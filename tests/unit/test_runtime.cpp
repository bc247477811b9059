// Runtime entry points: versions, build info, status strings, devices, determinism switch.
#include <thread>

#include "harness.hpp"

int main() {
  TH_CHECK(tlrt_abi_version() == TLRT_ABI_VERSION);
  TH_CHECK((tlrt_abi_version() >> 16) == TLRT_ABI_VERSION_MAJOR);
  const char *info = tlrt_build_info();
  TH_CHECK(info != nullptr && std::strstr(info, "backends: cpu") != nullptr);
  std::printf("build info: %s\n", info);

  TH_CHECK(std::strcmp(tlrt_status_string(TLRT_OK), "TLRT_OK") == 0);
  TH_CHECK(std::strcmp(tlrt_status_string(TLRT_ERR_SHAPE), "TLRT_ERR_SHAPE") == 0);
  TH_CHECK(std::strcmp(tlrt_status_string((tlrt_status)12345), "TLRT_UNKNOWN_STATUS") == 0);

  uint32_t n = 99;
  TH_OK(tlrt_device_count(TLRT_DEVICE_KIND_CPU, &n));
  TH_CHECK(n == 1);
  TH_OK(tlrt_device_count(TLRT_DEVICE_KIND_CUDA, &n));
  const uint32_t rs = tlrt_runtime_status();
#if TLRT_HAVE_CUDA
  TH_CHECK(rs == (n > 0 ? TLRT_RUNTIME_CUDA_READY : TLRT_RUNTIME_CUDA_NO_DEVICE));
#else
  TH_CHECK(rs == TLRT_RUNTIME_CPU_ONLY && n == 0);
  TH_STATUS(tlrt_synchronize(TLRT_DEVICE_CUDA(0)), TLRT_ERR_BACKEND_UNAVAILABLE);
#endif
  TH_STATUS(tlrt_device_count(7, &n), TLRT_ERR_INVALID_ARGUMENT);
  TH_CHECK(n == 0);
  TH_CHECK(std::strstr(tlrt_last_error(), "tlrt_device_count") != nullptr);
  TH_OK(tlrt_synchronize(TLRT_DEVICE_CPU));

  // tlrt_last_error: one pointer per thread, valid while the thread lives; a success leaves the
  // text, a failure rewrites it in place (so the pointer taken before a failing call reads that
  // call's message, whatever order a caller's arguments are evaluated in); long messages are
  // truncated, not overflowed.
  const char *const msg = tlrt_last_error();
  TH_CHECK(std::strstr(msg, "tlrt_device_count") != nullptr);
  TH_OK(tlrt_synchronize(TLRT_DEVICE_CPU));
  TH_CHECK(tlrt_last_error() == msg && std::strstr(msg, "tlrt_device_count") != nullptr);
  tlrt_buffer *none = nullptr;
  TH_STATUS(tlrt_buffer_from_f32(TLRT_DEVICE_CPU, nullptr, 4, &none), TLRT_ERR_NULL_ARGUMENT);
  TH_CHECK(tlrt_last_error() == msg && std::strncmp(msg, "tlrt_buffer_from_f32: ", 22) == 0);
  TH_STATUS(tlrt_add(nullptr, nullptr, &none), TLRT_ERR_NULL_ARGUMENT);
  TH_CHECK(tlrt_last_error() == msg && std::strncmp(msg, "tlrt_add: ", 10) == 0);

  // Determinism: TORCHLEAN_RT_DETERMINISTIC sets the initial value; meson runs this test with
  // several values and TLRT_EXPECT_DETERMINISTIC says what the first read must give (unset: off).
  const char *expect = std::getenv("TLRT_EXPECT_DETERMINISTIC");
  const bool initial = tlrt_get_deterministic();
  TH_CHECK_MSG(initial == (expect != nullptr && std::strcmp(expect, "1") == 0),
               "initial deterministic flag %d with TORCHLEAN_RT_DETERMINISTIC=%s", (int)initial,
               std::getenv("TORCHLEAN_RT_DETERMINISTIC") ? std::getenv("TORCHLEAN_RT_DETERMINISTIC")
                                                         : "(unset)");
  TH_CHECK(tlrt_set_deterministic(true) == initial);
  TH_CHECK(tlrt_get_deterministic());
  TH_CHECK(tlrt_set_deterministic(false) == true);
  TH_CHECK(!tlrt_get_deterministic());

  // Telemetry starts empty and the CPU has no pool.
  tlrt_allocator_stats s = th::stats();
  TH_CHECK(s.struct_size == sizeof s && s.live_bytes == 0 && s.live_handles == 0);
  TH_CHECK(s.pooled_bytes == 0);
  TH_OK(tlrt_allocator_trim(TLRT_DEVICE_CPU));

  // tlrt_last_error on a fresh thread: "" first, then the first failure's text at the same
  // address (storage that grew on the first message would have moved).
  bool same = false, empty_first = false, named = false;
  std::thread t([&] {
    const char *p = tlrt_last_error();
    empty_first = p[0] == '\0';
    uint32_t count = 0;
    tlrt_device_count(7, &count);
    same = tlrt_last_error() == p;
    named = std::strncmp(p, "tlrt_device_count: ", 19) == 0;
  });
  t.join();
  TH_CHECK(empty_first && same && named);
  return th::finish("test_runtime");
}
