// CUDA backend, RNG: element i depends on (key, i) alone through core/numerics/rng.hpp, so the
// values are the CPU backend's bit for bit. Each thread writes 4 consecutive outputs per 16-byte
// store in a grid-stride loop over a device-filling grid, then a scalar tail for n % 4. Bytes: 4n
// written, nothing read.
// rng_kernel (uniform, Bernoulli): one SplitMix64 hash (~20 instructions) per output: copy speed.
// normal_kernel: Box-Muller pairs (abi/tlrt_rng.h), outputs 4v .. 4v + 3 from two pairs (a tail
// output computes its whole pair); two hashes, log, sqrt and sincos per pair: ~57 instructions
// per output, issue-bound at ~0.6 of copy bandwidth.
// Last measured: bench/results/2026-11-24-h100-rng-hostcost.md
#include "core/backend/rng.hpp"
#include "cuda/common/launch.cuh"

namespace tlrt {
namespace cuda {

namespace {

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

__global__ void normal_kernel(float *__restrict out, uint64_t n, uint64_t key, float mean,
                              float stddev) {
  const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
  const uint64_t n4 = n / 4;
  float4 *out4 = reinterpret_cast<float4 *>(out);
  for (uint64_t v = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; v < n4; v += stride) {
    float4 o;
    rng::normal_pair(key, 2 * v, mean, stddev, o.x, o.y);
    rng::normal_pair(key, 2 * v + 1, mean, stddev, o.z, o.w);
    out4[v] = o;
  }
  for (uint64_t i = n4 * 4 + (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
    out[i] = rng::normal(key, i, mean, stddev);
}

}  // namespace

void generate(int dev, rng::Kind kind, float *out, uint64_t n, uint64_t key, float p0, float p1) {
  if (((uintptr_t)out & 15u) != 0)
    fail(TLRT_ERR_INTERNAL, "rng: device pointer %p is not 16-byte aligned", (void *)out);
  cudaStream_t s = stream(dev);
  const unsigned grid = grid_for((n + 3) / 4, 256, dev);
  if (kind == rng::Kind::Normal)
    launch("rng normal kernel", normal_kernel, grid, 256, 0, s, out, n, key, p0, p1);
  else
    launch("rng kernel", rng_kernel, grid, 256, 0, s, kind, out, n, key, p0, p1);
}

}  // namespace cuda
}  // namespace tlrt
