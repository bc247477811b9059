// The streaming loop of the elementwise and optimizer kernels: a block owns chunks of
// ILP * blockDim.x float4 vectors, and each thread issues all ILP loads of a chunk before it
// computes and stores any, so that ILP * 16 bytes per stream are in flight per thread.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/common/launch.cuh"

namespace tlrt {
namespace cuda {

// Visits the float4 vectors [0, n4): load(k, i) for every k of a chunk, then store(k, i).
template <int ILP, class Load, class Store>
__device__ __forceinline__ void chunked(uint64_t n4, Load load, Store store) {
  const uint64_t chunk = (uint64_t)ILP * blockDim.x;
  for (uint64_t base = (uint64_t)blockIdx.x * chunk + threadIdx.x; base < n4;
       base += (uint64_t)gridDim.x * chunk) {
#pragma unroll
    for (int k = 0; k < ILP; ++k) {
      const uint64_t i = base + (uint64_t)k * blockDim.x;
      if (i < n4) load(k, i);
    }
#pragma unroll
    for (int k = 0; k < ILP; ++k) {
      const uint64_t i = base + (uint64_t)k * blockDim.x;
      if (i < n4) store(k, i);
    }
  }
}

// The grid of chunked() over n floats: one block per chunk, and at least one thread for the
// scalar tail (n % 4 elements).
template <int ILP>
inline unsigned chunked_grid(uint64_t n, unsigned threads) {
  return grid_all((n / 4 + ILP - 1) / ILP + 1, threads);
}

}  // namespace cuda
}  // namespace tlrt
