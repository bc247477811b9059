// CUDA backend, RNG: one thread per element of a grid-stride loop; element i depends on (key, i)
// alone through the shared core/numerics/rng.hpp, so the values equal the CPU backend's bit for
// bit. Bytes: 4n written; the SplitMix64 mixing (and log/cos for the normal) is cheap next to it.
#include "core/backend/rng.hpp"
#include "cuda/cuda_common.cuh"

namespace tlrt {
namespace cuda {

namespace {

__global__ void rng_kernel(rng::Kind kind, float *__restrict out, uint64_t n, uint64_t key,
                           float p0, float p1) {
  const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
  for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
    out[i] = rng::sample(kind, key, i, p0, p1);
}

}  // namespace

void generate(int dev, rng::Kind kind, float *out, uint64_t n, uint64_t key, float p0, float p1) {
  cudaStream_t s = stream(dev);
  rng_kernel<<<grid_for(n, 256, dev), 256, 0, s>>>(kind, out, n, key, p0, p1);
  check_launch("rng kernel");
}

}  // namespace cuda
}  // namespace tlrt
