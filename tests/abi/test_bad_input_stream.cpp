// Bad input for the stream functions (abi/tlrt_stream.h): NULL pointers where the header forbids
// them (before any device check), malformed devices, CUDA devices this process cannot use
// (TLRT_ERR_BACKEND_UNAVAILABLE in a CPU-only build, TLRT_ERR_NO_DEVICE without a GPU or beyond the
// device count), the CPU (TLRT_ERR_UNSUPPORTED: it has no stream), and, with a GPU, the per-thread
// default stream given to tlrt_stream_set. For each failing call: the exact status, the
// out-parameter of tlrt_stream_get cleared to NULL (pre-filled with a sentinel), a last-error
// message naming the function and the argument. With a GPU, the good calls that need no CUDA
// handle of the test's own (tests/parity/host_stream.cu covers the rest). Nothing leaks, and the
// CPU backend keeps working.
#include "bad_input.hpp"

namespace {

void *const kStreamSentinel = reinterpret_cast<void *>(uintptr_t{0x5157});
// A non-NULL handle for calls that fail before any handle is used.
void *const kHandle = reinterpret_cast<void *>(uintptr_t{0x1000});
const char *kSet = "tlrt_stream_set";
const char *kGet = "tlrt_stream_get";
const char *kRecord = "tlrt_stream_record_event";
const char *kWait = "tlrt_stream_wait_event";
const char *kWaitLib = "tlrt_stream_wait_for_library";

const tlrt_device kMalformed[] = {
    (tlrt_device)0x05000000u,                        // bits 24..31 set
    (tlrt_device)3u,                                 // the CPU with ordinal 3
    TLRT_DEVICE_CUDA(0) | (tlrt_device)0x01000000u,  // kind 1 plus a stray high bit
    (tlrt_device)(2u << 16),                         // kind 2 (unknown)
    (tlrt_device)0xFFFFFFFFu,
};

// A CUDA device this process cannot use and the status asking for it gives.
struct Absent {
  tlrt_device device;
  tlrt_status status;
};

std::vector<Absent> absent_cuda() {
  const uint32_t rs = tlrt_runtime_status();
  if (rs == TLRT_RUNTIME_CPU_ONLY)
    return {{TLRT_DEVICE_CUDA(0), TLRT_ERR_BACKEND_UNAVAILABLE},
            {TLRT_DEVICE_CUDA(7), TLRT_ERR_BACKEND_UNAVAILABLE}};
  if (rs == TLRT_RUNTIME_CUDA_NO_DEVICE)
    return {{TLRT_DEVICE_CUDA(0), TLRT_ERR_NO_DEVICE}, {TLRT_DEVICE_CUDA(1), TLRT_ERR_NO_DEVICE}};
  uint32_t count = 0;
  TH_OK(tlrt_device_count(TLRT_DEVICE_KIND_CUDA, &count));
  return {{TLRT_DEVICE_CUDA(count), TLRT_ERR_NO_DEVICE}};
}

// tlrt_stream_get(device, &out) must fail with want and leave out NULL.
void get_fails(int line, tlrt_device device, tlrt_status want) {
  void *out = kStreamSentinel;
  char what[96];
  std::snprintf(what, sizeof what, "tlrt_stream_get(device = 0x%08x)", device);
  expect_fail(line, what, tlrt_stream_get(device, &out), want, kGet, {"device"});
  TH_CHECK_MSG(out == nullptr, "%s: cuda_stream was not cleared to NULL", what);
}

// Every function with valid pointers on a device that fails with `want`, naming "device".
void all_fail_on(int line, tlrt_device device, tlrt_status want) {
  char what[96];
  for (void *s : {static_cast<void *>(nullptr), kHandle}) {
    std::snprintf(what, sizeof what, "tlrt_stream_set(0x%08x, %p)", device, s);
    expect_fail(line, what, tlrt_stream_set(device, s), want, kSet, {"device"});
  }
  get_fails(line, device, want);
  std::snprintf(what, sizeof what, "tlrt_stream_record_event(0x%08x)", device);
  expect_fail(line, what, tlrt_stream_record_event(device, kHandle), want, kRecord, {"device"});
  std::snprintf(what, sizeof what, "tlrt_stream_wait_event(0x%08x)", device);
  expect_fail(line, what, tlrt_stream_wait_event(device, kHandle), want, kWait, {"device"});
  std::snprintf(what, sizeof what, "tlrt_stream_wait_for_library(0x%08x)", device);
  expect_fail(line, what, tlrt_stream_wait_for_library(device, kHandle), want, kWaitLib,
              {"device"});
}

void check_null_arguments() {
  // NULL comes first: whatever the device, CPU and malformed ones included.
  std::vector<tlrt_device> devices = {TLRT_DEVICE_CPU, TLRT_DEVICE_CUDA(0), TLRT_DEVICE_CUDA(9)};
  for (tlrt_device d : kMalformed) devices.push_back(d);
  for (tlrt_device d : devices) {
    BAD(tlrt_stream_get(d, nullptr), TLRT_ERR_NULL_ARGUMENT, kGet, "cuda_stream");
    BAD(tlrt_stream_record_event(d, nullptr), TLRT_ERR_NULL_ARGUMENT, kRecord, "cuda_event");
    BAD(tlrt_stream_wait_event(d, nullptr), TLRT_ERR_NULL_ARGUMENT, kWait, "cuda_event");
    BAD(tlrt_stream_wait_for_library(d, nullptr), TLRT_ERR_NULL_ARGUMENT, kWaitLib,
        "cuda_stream");
  }
}

void check_devices() {
  for (tlrt_device d : kMalformed) all_fail_on(__LINE__, d, TLRT_ERR_INVALID_ARGUMENT);
  for (const Absent &a : absent_cuda()) all_fail_on(__LINE__, a.device, a.status);
  // The CPU has no stream: every function, NULL stream for tlrt_stream_set included.
  all_fail_on(__LINE__, TLRT_DEVICE_CPU, TLRT_ERR_UNSUPPORTED);
  // The device is checked before the stream value: the per-thread stream on the CPU is about the
  // CPU, and so are the special handles.
  for (uintptr_t special :
       {uintptr_t{TLRT_CUDA_STREAM_LEGACY}, uintptr_t{TLRT_CUDA_STREAM_PER_THREAD}}) {
    void *s = reinterpret_cast<void *>(special);
    BAD(tlrt_stream_set(TLRT_DEVICE_CPU, s), TLRT_ERR_UNSUPPORTED, kSet, "device");
    BAD(tlrt_stream_wait_for_library(TLRT_DEVICE_CPU, s), TLRT_ERR_UNSUPPORTED, kWaitLib,
        "device");
    BAD(tlrt_stream_set((tlrt_device)0xFFFFFFFFu, s), TLRT_ERR_INVALID_ARGUMENT, kSet, "device");
  }
  if (tlrt_runtime_status() != TLRT_RUNTIME_CUDA_READY) {
    void *per_thread = reinterpret_cast<void *>(uintptr_t{TLRT_CUDA_STREAM_PER_THREAD});
    const tlrt_status want = tlrt_runtime_status() == TLRT_RUNTIME_CPU_ONLY
                                 ? TLRT_ERR_BACKEND_UNAVAILABLE
                                 : TLRT_ERR_NO_DEVICE;
    BAD(tlrt_stream_set(TLRT_DEVICE_CUDA(0), per_thread), want, kSet, "device");
  }
}

// With a GPU: what needs no CUDA handle of the test's own.
void check_gpu() {
  if (!th::cuda_ready()) return;
  const tlrt_device g = TLRT_DEVICE_CUDA(0);
  void *per_thread = reinterpret_cast<void *>(uintptr_t{TLRT_CUDA_STREAM_PER_THREAD});
  void *legacy = reinterpret_cast<void *>(uintptr_t{TLRT_CUDA_STREAM_LEGACY});
  void *own = nullptr;
  TH_OK(tlrt_stream_get(g, &own));
  TH_CHECK(own != nullptr && own != legacy && own != per_thread);
  // The per-thread default stream cannot be the current stream; nothing changes.
  BAD(tlrt_stream_set(g, per_thread), TLRT_ERR_UNSUPPORTED, kSet, "cuda_stream");
  void *now = nullptr;
  TH_OK(tlrt_stream_get(g, &now));
  TH_CHECK(now == own);
  // NULL and the library's own stream both mean the library's own; setting it again is a no-op.
  TH_OK(tlrt_stream_set(g, nullptr));
  TH_OK(tlrt_stream_set(g, own));
  TH_OK(tlrt_stream_get(g, &now));
  TH_CHECK(now == own);
  // The legacy default stream, and back; the host streams may wait for the library.
  TH_OK(tlrt_stream_set(g, legacy));
  TH_OK(tlrt_stream_get(g, &now));
  TH_CHECK(now == legacy);
  tlrt_buffer *x = nullptr, *y = nullptr;
  TH_OK(tlrt_buffer_full(g, 1000, 1.5, &x));
  TH_OK(tlrt_add(x, x, &y));
  TH_OK(tlrt_stream_wait_for_library(g, legacy));  // the current stream itself: nothing queued
  TH_OK(tlrt_stream_wait_for_library(g, own));
  TH_OK(tlrt_stream_wait_for_library(g, per_thread));
  TH_OK(tlrt_stream_set(g, nullptr));
  TH_OK(tlrt_stream_get(g, &now));
  TH_CHECK(now == own);
  std::vector<float> v = th::download(y);
  TH_CHECK(v.size() == 1000 && v[0] == 3.0f && v[999] == 3.0f);
  TH_OK(tlrt_stream_wait_for_library(g, legacy));
  TH_OK(tlrt_synchronize(g));
  tlrt_buffer_free(x);
  tlrt_buffer_free(y);
}

}  // namespace

int main() {
  const tlrt_allocator_stats start = th::stats();
  Fixture f = make_fixture();
  check_null_arguments();
  check_devices();
  check_gpu();
  // The CPU backend is untouched by all of the above.
  tlrt_buffer *out = nullptr;
  TH_OK(tlrt_add(f.a, f.b, &out));
  expect_result("tlrt_add", out, 4);
  free_fixture(f);
  expect_no_leaks(start);
  return th::finish("test_bad_input_stream");
}
