// Host cost of small ops, measured from C++ (no Python in the way): the median over many calls of
// the wall time per call, with one synchronisation at the end of each batch. On a CUDA build it
// also times the raw CUDA calls an op is made of (empty kernel launch, stream-ordered
// allocate + free, cudaSetDevice), so the runtime's own share can be read off. Prints a markdown
// table.   host_cost [--cuda] [--calls N]
//
// Two kinds of rows. "per call" rows time batches of N calls and one synchronisation: when the
// device is slower than the host (a queue of tiny kernels), they show the device's rate, not the
// host's. "host only" rows time batches of 32 calls WITHOUT the synchronisation that follows each
// batch (the launch queue never fills, so no call blocks): the host time of the call itself. The
// pieces of one tlrt_add + tlrt_buffer_free on CUDA (core/api_elementwise.cpp -> cuda/elementwise.cu,
// cuda/memory.cu, core/allocator.cpp, core/buffer.cpp), each timed below where it can be:
//   CUDA runtime: 1 cudaGetDevice (stream(), before the launch), 1 cudaLaunchKernel (no
//     cudaGetLastError: launch() checks its return value); the block cache makes no CUDA call
//     (before: 3 cudaGetDevice, the launch, 1 cudaGetLastError);
//   locks: the block cache's take + give (a mutex and an unordered_map lookup each), std::call_once
//     fast path (an acquire load) in state() / stream() three times;
//   atomics: allocation-failure countdown (2 loads), allocs / live / peak (2 RMW + load), handle
//     count and peak (RMW + load), refs (RMW), released (exchange), frees / live (2 RMW), handle
//     count (RMW): 8 RMW + 1 exchange, uncontended;
//   heap: new + delete of the 48-byte handle.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "torchlean_rt.h"

#if TLRT_HAVE_CUDA
#include <cuda_runtime.h>
__global__ void empty_kernel() {}
// The signature of the binary elementwise kernels (cuda/elementwise.cu), so that the raw launch
// passes the same 40 bytes of arguments as tlrt_add's.
struct Params2 {
  float p0, p1;
};
__global__ void args_kernel(const float *, const float *, float *, uint64_t, Params2) {}
#endif

namespace {

using Clock = std::chrono::steady_clock;

// Median over batches of the per-call time in microseconds.
double time_us(int calls, const std::function<void()> &body, const std::function<void()> &sync) {
  std::vector<double> per_call;
  for (int batch = 0; batch < 21; ++batch) {
    const auto t0 = Clock::now();
    for (int i = 0; i < calls; ++i) body();
    sync();
    const double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
    if (batch > 0) per_call.push_back(us / calls);  // batch 0 warms up
  }
  std::sort(per_call.begin(), per_call.end());
  return per_call[per_call.size() / 2];
}

// Median over batches of the host time per call in microseconds: batches of `calls` calls, each
// followed by an untimed sync (keep `calls` small, so that no call waits for the device).
double host_us(int calls, const std::function<void()> &body, const std::function<void()> &sync) {
  std::vector<double> per_call;
  for (int batch = 0; batch < 201; ++batch) {
    const auto t0 = Clock::now();
    for (int i = 0; i < calls; ++i) body();
    const double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
    sync();
    if (batch > 0) per_call.push_back(us / calls);
  }
  std::sort(per_call.begin(), per_call.end());
  return per_call[per_call.size() / 2];
}

void row(const char *what, double us) { std::printf("| %s | %.2f |\n", what, us); }

void must(tlrt_status s, const char *what) {
  if (s != TLRT_OK) {
    std::fprintf(stderr, "%s failed: %s: %s\n", what, tlrt_status_string(s), tlrt_last_error());
    std::exit(1);
  }
}

}  // namespace

int main(int argc, char **argv) {
  bool cuda = false;
  int calls = 2000;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--cuda") == 0) cuda = true;
    if (std::strcmp(argv[i], "--calls") == 0 && i + 1 < argc) calls = std::atoi(argv[++i]);
  }
  const tlrt_device dev = cuda ? TLRT_DEVICE_CUDA(0) : TLRT_DEVICE_CPU;
  std::vector<float> host(1024);
  for (size_t i = 0; i < host.size(); ++i) host[i] = 0.001f * (float)i - 0.5f;
  tlrt_buffer *a = nullptr, *b = nullptr;
  must(tlrt_buffer_from_f32(dev, host.data(), host.size(), &a), "upload");
  must(tlrt_buffer_from_f32(dev, host.data(), host.size(), &b), "upload");
  auto sync = [&] { must(tlrt_synchronize(dev), "synchronize"); };

  std::printf("host cost per call on %s (%s), median of 20 batches of %d calls\n\n",
              cuda ? "cuda:0" : "cpu", tlrt_build_info(), calls);
  std::printf("| call | us/call |\n|---|---:|\n");
  uint64_t size = 0;
  row("tlrt_buffer_size (validation + guard only)",
      time_us(calls, [&] { tlrt_buffer_size(a, &size); }, sync));
  row("tlrt_add 1024 floats + tlrt_buffer_free", time_us(calls, [&] {
        tlrt_buffer *o = nullptr;
        must(tlrt_add(a, b, &o), "add");
        tlrt_buffer_free(o);
      }, sync));
  row("tlrt_gelu 1024 floats + tlrt_buffer_free", time_us(calls, [&] {
        tlrt_buffer *o = nullptr;
        must(tlrt_gelu(a, &o), "gelu");
        tlrt_buffer_free(o);
      }, sync));
  row("tlrt_buffer_zeros 1024 + free", time_us(calls, [&] {
        tlrt_buffer *o = nullptr;
        must(tlrt_buffer_zeros(dev, 1024, &o), "zeros");
        tlrt_buffer_free(o);
      }, sync));
  // Host only (see the top comment): what the caller's thread spends per call.
  const int kHostBatch = 32;
  row("host only: tlrt_add 1024 floats + tlrt_buffer_free", host_us(kHostBatch, [&] {
        tlrt_buffer *o = nullptr;
        must(tlrt_add(a, b, &o), "add");
        tlrt_buffer_free(o);
      }, sync));
  {
    // Costs of the kinds the runtime's pieces are made of, without a CUDA call.
    auto nosync = [] {};
    row("host only: new + delete of a 48-byte handle", host_us(kHostBatch, [&] {
          volatile char *h = new char[48];
          h[0] = 1;
          delete[] h;
        }, nosync));
    std::atomic<uint64_t> counter[8];
    for (auto &c : counter) c.store(0);
    row("host only: 9 uncontended atomic RMWs", host_us(kHostBatch, [&] {
          for (auto &c : counter) c.fetch_add(1, std::memory_order_relaxed);
          counter[0].exchange(1, std::memory_order_acq_rel);
        }, nosync));
  }
#if TLRT_HAVE_CUDA
  if (cuda) {
    cudaStream_t s;
    cudaSetDevice(0);
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    auto csync = [&] { cudaStreamSynchronize(s); };
    row("raw: empty kernel launch", time_us(calls, [&] { empty_kernel<<<4, 256, 0, s>>>(); }, csync));
    row("raw: cudaMallocAsync + cudaFreeAsync (4 KiB)", time_us(calls, [&] {
          void *p = nullptr;
          cudaMallocAsync(&p, 4096, s);
          cudaFreeAsync(p, s);
        }, csync));
    row("raw: cudaSetDevice(0)", time_us(calls, [&] { cudaSetDevice(0); }, csync));
    int cur = 0;
    row("raw: cudaGetDevice", time_us(calls, [&] { cudaGetDevice(&cur); }, csync));
    row("raw: cudaGetLastError", time_us(calls, [&] { (void)cudaGetLastError(); }, csync));
    // Host only: the launch itself, the way the library made it and the way it makes it now.
    float *d = nullptr;
    cudaMalloc(&d, 3 * 4096);
    const Params2 prm{0.0f, 0.0f};
    row("host only raw: empty kernel launch", host_us(32, [&] { empty_kernel<<<4, 256, 0, s>>>(); },
                                                      csync));
    row("host only raw: add-shaped launch <<<>>> + cudaGetLastError", host_us(32, [&] {
          args_kernel<<<2, 256, 0, s>>>(d, d + 1024, d + 2048, uint64_t{1024}, prm);
          (void)cudaGetLastError();
        }, csync));
    row("host only raw: add-shaped launch, cudaLaunchKernel's status", host_us(32, [&] {
          const float *pa = d, *pb = d + 1024;
          float *py = d + 2048;
          uint64_t n = 1024;
          Params2 p = prm;
          void *args[] = {&pa, &pb, &py, &n, &p};
          (void)cudaLaunchKernel((const void *)args_kernel, dim3(2), dim3(256), args, 0, s);
        }, csync));
    row("host only raw: 3 x cudaGetDevice (an add + free made 3, now 1)", host_us(32, [&] {
          cudaGetDevice(&cur);
          cudaGetDevice(&cur);
          cudaGetDevice(&cur);
        }, csync));
    cudaFree(d);
    cudaStreamDestroy(s);
  }
#endif
  tlrt_buffer_free(a);
  tlrt_buffer_free(b);
  return 0;
}
