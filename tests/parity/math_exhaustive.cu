// Host/device bitwise parity of core/numerics/shared_math.hpp over all 2^32 float inputs.
//
// For every function the device evaluates the inputs (chunked, double-buffered, copied back into
// pinned memory) while the host evaluates the same inputs with the same header on all hardware
// threads (std::thread) and compares bit patterns; any NaN equals any NaN, everything else
// (including the sign of zero) must match exactly.
//
// Build:  nvcc -std=c++17 -O2 -fmad=false -arch=sm_90 -I/work/main tests/parity/math_exhaustive.cu -o mx
//         (add -Xcompiler -ffp-contract=off if the host flags enable FMA, e.g. -Xcompiler -march=native;
//          on glibc < 2.34 add -Xcompiler -pthread)
// Run:    ./mx [stride [func,func,...]]   stride 1 (default) = exhaustive; e.g. ./mx 97 for a quick run
// Output: one line per function: "name mismatches=N first=0x... (device 0x... host 0x...)".
// Exit:   0 all identical, 1 any mismatch or CUDA error, 77 no CUDA device.
#include "core/numerics/shared_math.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

const char* const kNames[] = {"exp_f",  "log_f",  "log1p_f",     "tanh_f",   "sigmoid_f",
                              "softplus_f", "gelu_f", "gelu_grad_f", "cos2pi_f", "sin2pi_f",
                              "silu_f", "silu_grad_f"};
constexpr int kNumFns = 12;

__host__ __device__ inline float eval_fn(int fn, float x) {
  switch (fn) {
    case 0: return tlrt::math::exp_f(x);
    case 1: return tlrt::math::log_f(x);
    case 2: return tlrt::math::log1p_f(x);
    case 3: return tlrt::math::tanh_f(x);
    case 4: return tlrt::math::sigmoid_f(x);
    case 5: return tlrt::math::softplus_f(x);
    case 6: return tlrt::math::gelu_f(x);
    case 7: return tlrt::math::gelu_grad_f(x);
    case 8: return tlrt::math::cos2pi_f(x);
    case 9: return tlrt::math::sin2pi_f(x);  // both through sincos2pi_f
    case 10: return tlrt::math::silu_f(x);
    default: return tlrt::math::silu_grad_f(x);
  }
}

// Input number i of the sweep is the bit pattern i * stride (mod 2^32).
__host__ __device__ inline uint32_t input_bits(uint64_t i, uint64_t stride) {
  return static_cast<uint32_t>(i * stride);
}

__global__ void eval_kernel(int fn, uint64_t first, uint64_t count, uint64_t stride, float* out) {
  const uint64_t step = static_cast<uint64_t>(gridDim.x) * blockDim.x;
  for (uint64_t j = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; j < count; j += step) {
    out[j] = eval_fn(fn, tlrt::num::u2f(input_bits(first + j, stride)));
  }
}

bool cuda_ok(cudaError_t e, const char* what) {
  if (e == cudaSuccess) return true;
  std::fprintf(stderr, "CUDA error in %s: %s\n", what, cudaGetErrorString(e));
  return false;
}

struct Mismatch {
  uint64_t count = 0;
  uint64_t first_index = UINT64_MAX;  // sweep index of the first mismatch
  uint32_t dev_bits = 0, host_bits = 0;
};

// Compare device results dev[0..count) (sweep indices first..first+count) on nthreads threads.
Mismatch compare_chunk(int fn, uint64_t first, uint64_t count, uint64_t stride, const float* dev,
                       unsigned nthreads) {
  std::vector<Mismatch> part(nthreads);
  std::vector<std::thread> threads;
  const uint64_t per = (count + nthreads - 1) / nthreads;
  for (unsigned t = 0; t < nthreads; ++t) {
    threads.emplace_back([&, t]() {
      Mismatch m;
      const uint64_t lo = std::min<uint64_t>(count, t * per), hi = std::min<uint64_t>(count, lo + per);
      for (uint64_t j = lo; j < hi; ++j) {
        const float h = eval_fn(fn, tlrt::num::u2f(input_bits(first + j, stride)));
        const float d = dev[j];
        const uint32_t hb = tlrt::num::f2u(h), db = tlrt::num::f2u(d);
        if (hb == db || (tlrt::num::isnan(h) && tlrt::num::isnan(d))) continue;
        if (m.count++ == 0) {
          m.first_index = first + j;
          m.dev_bits = db;
          m.host_bits = hb;
        }
      }
      part[t] = m;
    });
  }
  for (auto& th : threads) th.join();
  Mismatch all;
  for (const Mismatch& m : part) {
    all.count += m.count;
    if (m.count && m.first_index < all.first_index) {
      all.first_index = m.first_index;
      all.dev_bits = m.dev_bits;
      all.host_bits = m.host_bits;
    }
  }
  return all;
}

bool selected(const char* list, const char* name) {
  if (list == nullptr || *list == '\0') return true;
  const std::string l = std::string(",") + list + ",";
  return l.find(std::string(",") + name + ",") != std::string::npos;
}

}  // namespace

int main(int argc, char** argv) {
  uint64_t stride = 1;
  if (argc > 1) {
    const long long v = std::atoll(argv[1]);
    if (v < 1) {
      std::fprintf(stderr, "usage: %s [stride>=1 [func,func,...]]\n", argv[0]);
      return 1;
    }
    stride = static_cast<uint64_t>(v);
  }
  const char* only = argc > 2 ? argv[2] : nullptr;

  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
    std::printf("no CUDA device: skipped\n");
    return 77;
  }
  cudaDeviceProp prop;
  if (!cuda_ok(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties")) return 1;

  const uint64_t total = ((1ull << 32) + stride - 1) / stride;  // sweep indices 0..total-1
  const uint64_t chunk = std::min<uint64_t>(total, 1ull << 26);  // 256 MiB of results per buffer
  unsigned nthreads = std::thread::hardware_concurrency();
  if (nthreads == 0) nthreads = 1;
  std::printf("math parity: device %s, stride %llu (%llu inputs per function%s), %u host threads\n",
              prop.name, static_cast<unsigned long long>(stride), static_cast<unsigned long long>(total),
              stride == 1 ? ", exhaustive" : "", nthreads);

  float* dbuf[2] = {nullptr, nullptr};
  float* hbuf[2] = {nullptr, nullptr};
  cudaStream_t stream[2];
  for (int b = 0; b < 2; ++b) {
    if (!cuda_ok(cudaMalloc(&dbuf[b], chunk * sizeof(float)), "cudaMalloc") ||
        !cuda_ok(cudaMallocHost(&hbuf[b], chunk * sizeof(float)), "cudaMallocHost") ||
        !cuda_ok(cudaStreamCreate(&stream[b]), "cudaStreamCreate"))
      return 1;
  }
  const int block = 256;
  const int grid = prop.multiProcessorCount * 16;

  bool all_ok = true;
  for (int fn = 0; fn < kNumFns; ++fn) {
    if (!selected(only, kNames[fn])) continue;
    const auto t0 = std::chrono::steady_clock::now();
    const uint64_t nchunks = (total + chunk - 1) / chunk;
    auto launch = [&](uint64_t c) {
      const int b = static_cast<int>(c & 1);
      const uint64_t first = c * chunk, count = std::min(chunk, total - first);
      eval_kernel<<<grid, block, 0, stream[b]>>>(fn, first, count, stride, dbuf[b]);
      cudaMemcpyAsync(hbuf[b], dbuf[b], count * sizeof(float), cudaMemcpyDeviceToHost, stream[b]);
    };
    Mismatch res;
    launch(0);
    for (uint64_t c = 0; c < nchunks; ++c) {
      const int b = static_cast<int>(c & 1);
      if (c + 1 < nchunks) launch(c + 1);  // device works on the next chunk while the host compares
      if (!cuda_ok(cudaStreamSynchronize(stream[b]), "kernel/copy")) return 1;
      const uint64_t first = c * chunk, count = std::min(chunk, total - first);
      const Mismatch m = compare_chunk(fn, first, count, stride, hbuf[b], nthreads);
      if (m.count && res.count == 0) {
        res.first_index = m.first_index;
        res.dev_bits = m.dev_bits;
        res.host_bits = m.host_bits;
      }
      res.count += m.count;
    }
    if (!cuda_ok(cudaGetLastError(), "eval_kernel")) return 1;
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (res.count) {
      std::printf("%s mismatches=%llu first=0x%08x (device 0x%08x host 0x%08x) [%.1f s]\n", kNames[fn],
                  static_cast<unsigned long long>(res.count), input_bits(res.first_index, stride),
                  res.dev_bits, res.host_bits, secs);
      all_ok = false;
    } else {
      std::printf("%s mismatches=0 first=none [%.1f s]\n", kNames[fn], secs);
    }
    std::fflush(stdout);
  }
  for (int b = 0; b < 2; ++b) {
    cudaFree(dbuf[b]);
    cudaFreeHost(hbuf[b]);
    cudaStreamDestroy(stream[b]);
  }
  std::printf("%s\n", all_ok ? "PASS: host and device agree bit for bit" : "FAIL");
  return all_ok ? 0 : 1;
}
