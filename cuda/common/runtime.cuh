// Shared by the CUDA translation units: error mapping, the per-device library stream and its
// device queries, stream-ordered scratch, per-device kernel attributes. Launch helpers and grid
// sizing are in cuda/common/launch.cuh.
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

// Checks the launch just made (configuration errors) without synchronising.
void check_launch(const char *kernel);

// Makes `dev` current on this thread and returns its library stream (created on first use, with
// its stream-ordered memory pool configured). Thread-safe.
cudaStream_t stream(int dev);

// Number of streaming multiprocessors of `dev` (cached; no CUDA call after the first).
int sm_count(int dev);

// Major compute capability of `dev` (cached; no CUDA call after the first).
int cc_major(int dev);

// Minor compute capability of `dev` (cached).
int cc_minor(int dev);

// The most shared memory one block of `dev` may opt in to (cudaDevAttrMaxSharedMemoryPerBlockOptin,
// bytes; cached; no CUDA call after the first).
size_t smem_optin(int dev);

// A per-device array of n unsigned counters for kernels that hand out tickets: allocated and
// zeroed on first use (cudaMalloc, outside the stream-ordered pool, so that tlrt_allocator_trim can
// still empty the pool) and kept for the life of the process; the kernels leave every counter at
// zero when they finish. `what` names it in the error of a failed allocation. The device must be
// current (stream(dev) makes it so).
struct ZeroedCounters {
  std::once_flag once;
  cudaError_t error = cudaSuccess;
  unsigned *p = nullptr;
};
unsigned *zeroed_counters(ZeroedCounters &c, uint64_t n, const char *what);

// A block of the stream-ordered pool for the duration of one call, returned to the pool in stream
// order when this object dies, which is after the launches that use it have been queued: no
// synchronisation. Zero bytes allocate nothing (the pointer is null). Movable, not copyable.
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

// The same, sized in floats.
class FloatScratch : public Scratch {
 public:
  FloatScratch() = default;
  FloatScratch(int dev, uint64_t n) : Scratch(dev, n * 4) {}
  float *get() const { return as<float>(); }
};

// A kernel attribute set once per device (with dev current), e.g. its dynamic shared memory above
// the 48 KiB default for its largest block. Setting it again is harmless, so two threads racing
// here only repeat it.
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
