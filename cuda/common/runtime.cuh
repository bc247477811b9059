// Error mapping, the per-device current stream and device queries, stream-ordered scratch and
// per-device kernel attributes for cuda/*.cu (launches and grids: cuda/common/launch.cuh).
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <mutex>

#include "core/backend/memory.hpp"
#include "core/device.hpp"
#include "core/error.hpp"

namespace tlrt {
namespace cuda {

// Throws tlrt::Error for a failed CUDA call: TLRT_ERR_OUT_OF_MEMORY for allocation failures,
// TLRT_ERR_DEVICE_LOST for sticky errors (the context is unusable), TLRT_ERR_CUDA otherwise.
void check(cudaError_t e, const char *what);

void check_launch(const char *kernel);  // the launch just made, without synchronising

// Makes `dev` current on this thread and returns its current stream, on which every launch, copy
// and library call of the op goes: the library's own stream (created on first use, with the
// device's stream-ordered memory pool configured) or the host's set by tlrt_stream_set
// (abi/tlrt_stream.h). Thread-safe; the answer cannot change while an op runs (no switch may
// overlap an op: the contract of abi/tlrt_stream.h).
cudaStream_t stream(int dev);

// Device properties, cached (no CUDA call after the first): SMs, compute capability, and the
// bytes of shared memory one block may opt in to.
int sm_count(int dev);
int cc_major(int dev);
int cc_minor(int dev);
size_t smem_optin(int dev);

// n ticket counters per device, zeroed on first use and kept for the process (cudaMalloc, outside
// the pool, which tlrt_allocator_trim can then still empty); kernels leave them at zero. `what`
// names a failed allocation. The device must be current (stream(dev) makes it so).
struct ZeroedCounters {
  std::once_flag once;
  cudaError_t error = cudaSuccess;
  unsigned *p = nullptr;
};
unsigned *zeroed_counters(ZeroedCounters &c, uint64_t n, const char *what);

// A block of the stream-ordered pool for one call, returned in stream order when this object dies
// (after the launches using it are queued): no synchronisation. Zero bytes: a null pointer.
class Scratch {
 public:
  Scratch() = default;
  Scratch(int dev, uint64_t bytes)
      : dev_(dev), bytes_(bytes), p_(bytes ? alloc(dev, bytes) : nullptr) {}
  Scratch(Scratch &&o) noexcept : dev_(o.dev_), bytes_(o.bytes_), p_(o.p_) { o.p_ = nullptr; }
  Scratch &operator=(Scratch &&o) noexcept {
    if (this != &o) {
      release();
      dev_ = o.dev_;
      bytes_ = o.bytes_;
      p_ = o.p_;
      o.p_ = nullptr;
    }
    return *this;
  }
  Scratch(const Scratch &) = delete;
  Scratch &operator=(const Scratch &) = delete;
  ~Scratch() { release(); }
  template <class T>
  T *as() const {
    return static_cast<T *>(p_);
  }

 private:
  void release() {
    if (p_ != nullptr) dealloc(dev_, p_, bytes_);
    p_ = nullptr;
  }
  int dev_ = 0;
  uint64_t bytes_ = 0;
  void *p_ = nullptr;
};

class FloatScratch : public Scratch {
 public:
  FloatScratch() = default;
  FloatScratch(int dev, uint64_t n) : Scratch(dev, n * 4) {}
  float *get() const { return as<float>(); }
};

// A kernel attribute set once per device (dev current), e.g. dynamic shared memory above 48 KiB;
// setting it again is harmless, so racing threads only repeat it.
struct SmemAllowed {
  static constexpr int kDevs = 64;
  std::atomic<bool> done[kDevs] = {};
  template <class K>
  void ensure(int dev, K kernel, size_t bytes, const char *what) {
    ensure(dev, kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes, what);
  }
  template <class K>
  void ensure(int dev, K kernel, cudaFuncAttribute attr, int value, const char *what) {
    const bool cached = dev >= 0 && dev < kDevs;
    if (cached && done[dev].load(std::memory_order_acquire)) return;
    check(cudaFuncSetAttribute(kernel, attr, value), what);
    if (cached) done[dev].store(true, std::memory_order_release);
  }
};

}  // namespace cuda
}  // namespace tlrt
