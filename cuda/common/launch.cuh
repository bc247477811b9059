// Checked kernel launches (plain and programmatic dependent) and grid sizing for cuda/*.cu.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <tuple>
#include <utility>

#include "cuda/common/runtime.cuh"

namespace tlrt {
namespace cuda {

constexpr uint64_t kMaxGrid = 0x7FFFFFFFull;  // the largest grid.x of every supported device
constexpr unsigned kMaxGridY = 65535;         // and grid.y / grid.z

// kernel<<<grid, block, shmem, s>>>(args...), checked through cudaLaunchKernel's status (the
// errors check_launch would report, one runtime call fewer); arguments converted as <<<>>> does.
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

// launch() as a programmatic dependent launch on compute capability >= 9.0 (else ordinary): the
// kernel may begin once every block of the kernel before it on s has called pdl_trigger() (or
// exited). It must call pdl_wait() (cuda/common/pdl.cuh) before it reads that kernel's results
// and before it exits, so that its completion still implies the earlier kernel's.
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

// A grid-stride loop's grid: ceil(items / threads) blocks, at most 16 per SM.
inline unsigned grid_for(uint64_t items, unsigned threads, int dev) {
  const uint64_t needed = (items + threads - 1) / threads;
  const uint64_t cap = (uint64_t)sm_count(dev) * 16;
  const uint64_t g = needed < cap ? needed : cap;
  return (unsigned)(g == 0 ? 1 : g);
}

// ceil(items / per_block) blocks, at least 1 and at most kMaxGrid (kernels grid-stride past it).
inline unsigned blocks(uint64_t items, uint64_t per_block) {
  const uint64_t b = (items + per_block - 1) / per_block;
  return (unsigned)(b == 0 ? 1 : (b < kMaxGrid ? b : kMaxGrid));
}

// blocks() for streaming kernels, one block per `threads` items: fresh blocks keep more loads in
// flight than resident blocks looping.
inline unsigned grid_all(uint64_t items, unsigned threads) { return blocks(items, threads); }

// n blocks along grid.y, at least 1 and at most kMaxGridY (kernels loop past it).
inline unsigned blocks_y(uint64_t n) {
  return (unsigned)(n == 0 ? 1 : (n < kMaxGridY ? n : kMaxGridY));
}

}  // namespace cuda
}  // namespace tlrt
