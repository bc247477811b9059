// A sticky CUDA fault (an illegal address inside a kernel) must surface as TLRT_ERR_DEVICE_LOST
// from the library call that meets it, with a message saying the device is no longer usable, and
// nothing may hang or crash afterwards (frees included). The fault comes from a kernel of this
// test launched in the same process (the library shares the device's primary context); no
// library kernel can be made to fault from valid input. Exits 77 without a usable GPU. An alarm
// turns a hang into a failure.
#include <cuda_runtime.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstring>

#include "torchlean_rt.h"

__global__ void write_to_nowhere(float *p) { p[threadIdx.x] = 1.0f; }

static int failures = 0;
static void expect(bool ok, const char *what) {
  if (!ok) {
    ++failures;
    std::printf("FAIL %s (last error: %s)\n", what, tlrt_last_error());
  }
}

int main() {
  if (tlrt_runtime_status() != TLRT_RUNTIME_CUDA_READY) {
    std::printf("sticky_fault: skipped (no usable CUDA device)\n");
    return 77;
  }
  std::signal(SIGALRM, [](int) {
    std::printf("FAIL sticky_fault: hung for 60 s\n");
    std::_Exit(1);
  });
  alarm(60);
  tlrt_buffer *a = nullptr, *b = nullptr;
  expect(tlrt_buffer_full(TLRT_DEVICE_CUDA(0), 1024, 2.0, &a) == TLRT_OK, "full before the fault");
  expect(tlrt_synchronize(TLRT_DEVICE_CUDA(0)) == TLRT_OK, "synchronize before the fault");

  write_to_nowhere<<<1, 32>>>(reinterpret_cast<float *>(16));
  const cudaError_t e = cudaDeviceSynchronize();
  std::printf("sticky_fault: the test kernel ended with %s\n", cudaGetErrorName(e));
  expect(e != cudaSuccess, "the faulting kernel faulted");

  // The next calls that talk to the device report the lost device; queuing calls may report it
  // at once or succeed (asynchronous), but a synchronising call must report it.
  const tlrt_status s1 = tlrt_add(a, a, &b);
  expect(s1 == TLRT_OK || s1 == TLRT_ERR_DEVICE_LOST, "tlrt_add after the fault: OK or DEVICE_LOST");
  expect(s1 == TLRT_OK || b == nullptr, "failed add leaves out NULL");
  static float host[1024];
  const tlrt_status s2 = tlrt_buffer_to_f32(a, host, 1024);
  expect(s2 == TLRT_ERR_DEVICE_LOST, "download after the fault: TLRT_ERR_DEVICE_LOST");
  expect(std::strstr(tlrt_last_error(), "no longer usable") != nullptr,
         "the message says the device is no longer usable");
  expect(tlrt_synchronize(TLRT_DEVICE_CUDA(0)) == TLRT_ERR_DEVICE_LOST,
         "synchronize after the fault: TLRT_ERR_DEVICE_LOST");
  // The CPU backend keeps working.
  tlrt_buffer *c = nullptr, *d = nullptr;
  expect(tlrt_buffer_full(TLRT_DEVICE_CPU, 8, 1.5, &c) == TLRT_OK && tlrt_add(c, c, &d) == TLRT_OK,
         "the CPU backend still works");
  tlrt_buffer_free(a);
  tlrt_buffer_free(b);
  tlrt_buffer_free(c);
  tlrt_buffer_free(d);
  std::printf("sticky_fault: %s\n", failures ? "FAILED" : "ok");
  return failures ? 1 : 0;
}
