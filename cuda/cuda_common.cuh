// Shared by the CUDA translation units: error mapping, the per-device library stream, launch
// geometry.
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <tuple>
#include <utility>

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

// kernel<<<grid, block, shmem, s>>>(args...) through cudaLaunchKernel, checking its return value:
// the same errors <<<>>> followed by check_launch (cudaGetLastError) reports, one runtime call
// fewer per launch (~0.04 us). The arguments are converted to the kernel's parameter types first,
// as <<<>>> does.
template <class... P, size_t... I>
void launch_params(const char *what, void (*kernel)(P...), dim3 grid, dim3 block, size_t shmem,
                   cudaStream_t s, std::index_sequence<I...>, std::tuple<P...> params) {
  void *ptrs[] = {static_cast<void *>(&std::get<I>(params))..., nullptr};
  check(cudaLaunchKernel(reinterpret_cast<const void *>(kernel), grid, block, ptrs, shmem, s),
        what);
}
template <class... P, class... A>
void launch(const char *what, void (*kernel)(P...), dim3 grid, dim3 block, size_t shmem,
            cudaStream_t s, A &&...args) {
  static_assert(sizeof...(P) == sizeof...(A), "launch: wrong number of kernel arguments");
  launch_params(what, kernel, grid, block, shmem, s, std::index_sequence_for<P...>{},
                std::tuple<P...>(std::forward<A>(args)...));
}

// launch(), but as a programmatic dependent launch (cuda/pdl.cuh) where the device has compute
// capability 9.0 or later: the kernel may begin while the kernel launched just before it on s
// runs, once every block of that one has called pdl_trigger(). The kernel must call pdl_wait()
// before it reads that kernel's results and before it exits. Elsewhere an ordinary launch.
// Measured (H100, 2026-11-27, against ordinary launches in the same build): the wgmma attention
// backward 2-7% faster (its planes_kernel over d_kernel, dq_kernel over dkdv_kernel's last
// wave), the layer-norm backward's finish within 0.5% (bench/results/2026-11-27-s16-ab.md).
inline bool pdl_on(int dev) { return cc_major(dev) >= 9; }
template <class... P, class... A>
void launch_dependent(int dev, const char *what, void (*kernel)(P...), dim3 grid, dim3 block,
                      size_t shmem, cudaStream_t s, A &&...args) {
  static_assert(sizeof...(P) == sizeof...(A), "launch_dependent: wrong number of arguments");
  if (!pdl_on(dev)) return launch(what, kernel, grid, block, shmem, s, std::forward<A>(args)...);
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = shmem;
  cfg.stream = s;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  check(cudaLaunchKernelEx(&cfg, kernel, static_cast<P>(std::forward<A>(args))...), what);
}

// A grid for a grid-stride loop over `items` work items with `threads` per block: enough blocks
// to fill the device several times over, never more than needed.
inline unsigned grid_for(uint64_t items, unsigned threads, int dev) {
  const uint64_t needed = (items + threads - 1) / threads;
  const uint64_t cap = (uint64_t)sm_count(dev) * 16;
  const uint64_t g = needed < cap ? needed : cap;
  return (unsigned)(g == 0 ? 1 : g);
}

// A grid with one block per `threads` work items (capped at the 2^31 - 1 block limit; kernels
// still grid-stride past it): for streaming kernels, where a fresh block per chunk keeps more loads
// in flight than a few resident blocks looping (measured: unary ops 0.89 -> see bench/results).
inline unsigned grid_all(uint64_t items, unsigned threads) {
  const uint64_t needed = (items + threads - 1) / threads;
  const uint64_t cap = 0x7FFFFFFFull;
  return (unsigned)(needed == 0 ? 1 : (needed < cap ? needed : cap));
}

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
