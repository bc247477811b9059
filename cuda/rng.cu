// CUDA backend, RNG: element i depends on (key, i) alone through the shared core/numerics/rng.hpp,
// so the values equal the CPU backend's bit for bit. Bytes: 4n written. Not bandwidth-bound: the
// 64-bit SplitMix64 multiplies (emulated with 32-bit IMADs) and, for the normal, log + cos + sqrt
// per element dominate; measured in bench/results/ (uniform 0.56 of copy bandwidth, about what
// PyTorch's Philox reaches; normal 0.16).
#include "core/backend/rng.hpp"
#include "cuda/cuda_common.cuh"

namespace tlrt {
namespace cuda {

namespace {

// Each thread writes 4 consecutive elements with one 16-byte store per iteration (grid-stride over
// a grid that fills the device; the SplitMix64 64-bit multiplies make this kernel compute-bound,
// so a block per chunk buys nothing here, unlike the elementwise kernels). Scalar tail for n % 4.
__global__ void rng_kernel(rng::Kind kind, float *__restrict out, uint64_t n, uint64_t key,
                           float p0, float p1) {
  const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
  const uint64_t n4 = n / 4;
  float4 *out4 = reinterpret_cast<float4 *>(out);
  for (uint64_t v = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; v < n4; v += stride) {
    const uint64_t i = 4 * v;
    out4[v] = make_float4(rng::sample(kind, key, i, p0, p1), rng::sample(kind, key, i + 1, p0, p1),
                          rng::sample(kind, key, i + 2, p0, p1), rng::sample(kind, key, i + 3, p0, p1));
  }
  for (uint64_t i = n4 * 4 + (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
    out[i] = rng::sample(kind, key, i, p0, p1);
}

}  // namespace

void generate(int dev, rng::Kind kind, float *out, uint64_t n, uint64_t key, float p0, float p1) {
  if (((uintptr_t)out & 15u) != 0)
    fail(TLRT_ERR_INTERNAL, "rng: device pointer %p is not 16-byte aligned", (void *)out);
  cudaStream_t s = stream(dev);
  rng_kernel<<<grid_for((n + 3) / 4, 256, dev), 256, 0, s>>>(kind, out, n, key, p0, p1);
  check_launch("rng kernel");
}

}  // namespace cuda
}  // namespace tlrt
