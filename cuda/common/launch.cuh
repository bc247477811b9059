// Kernel launches and grid sizing shared by the CUDA translation units: checked launches (plain
// and programmatic dependent), the grid limits, and the three grid rules (fill the device, one
// block per chunk of work, capped).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <tuple>
#include <utility>

#include "cuda/common/runtime.cuh"

namespace tlrt {
namespace cuda {

// The largest grid.x (2^31 - 1) and grid.y / grid.z (65535) of every supported device.
constexpr uint64_t kMaxGrid = 0x7FFFFFFFull;
constexpr unsigned kMaxGridY = 65535;

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

// launch(), but as a programmatic dependent launch (cuda/common/pdl.cuh) where the device has compute
// capability 9.0 or later: the kernel may begin while the kernel launched just before it on s
// runs, once every block of that one has called pdl_trigger(). The kernel must call pdl_wait()
// before it reads that kernel's results and before it exits. Elsewhere an ordinary launch.
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
// in flight than a few resident blocks looping.
inline unsigned grid_all(uint64_t items, unsigned threads) {
  const uint64_t needed = (items + threads - 1) / threads;
  return (unsigned)(needed == 0 ? 1 : (needed < kMaxGrid ? needed : kMaxGrid));
}

// ceil(items / per_block) blocks, at least 1 and at most kMaxGrid (kernels grid-stride past it).
inline unsigned blocks(uint64_t items, uint64_t per_block) {
  const uint64_t b = (items + per_block - 1) / per_block;
  return (unsigned)(b == 0 ? 1 : (b < kMaxGrid ? b : kMaxGrid));
}

}  // namespace cuda
}  // namespace tlrt
