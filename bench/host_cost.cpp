// Host cost of small ops, measured from C++ (no Python in the way): the median over many calls of
// the wall time per call, with one synchronisation at the end of each batch. On a CUDA build it
// also times the raw CUDA calls an op is made of (empty kernel launch, stream-ordered
// allocate + free, cudaSetDevice), so the runtime's own share can be read off. Prints a markdown
// table.   host_cost [--cuda] [--calls N]
#include <algorithm>
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
    cudaStreamDestroy(s);
  }
#endif
  tlrt_buffer_free(a);
  tlrt_buffer_free(b);
  return 0;
}
