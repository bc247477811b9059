// CUDA backend, RNG: element i depends on (key, i) alone through the shared core/numerics/rng.hpp,
// so the values equal the CPU backend's bit for bit. Bytes: 4n written, nothing read. Not
// bandwidth-bound by nature: the 64-bit SplitMix64 multiplies (emulated with 32-bit IMADs) and,
// for the normal, log + sincos + sqrt are issue-bound work. Measured in bench/results/ (H100,
// 2026-11-24: uniform 1.00 of copy bandwidth; normal 0.28, one log + cos + sqrt and two hashes per
// output, before the pair form below).
#include "core/backend/rng.hpp"
#include "cuda/common/launch.cuh"

namespace tlrt {
namespace cuda {

namespace {

// Uniform and Bernoulli: each thread writes 4 consecutive elements with one 16-byte store per
// iteration (grid-stride over a grid that fills the device). Scalar tail for n % 4.
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

// Normal, pair form of Box-Muller (abi/tlrt_rng.h): each thread makes two pairs, outputs 4v..4v+3
// from counters key + 4v .. key + 4v + 3, and writes them with one 16-byte store. Scalar tail for
// n % 4 (at most three threads, each computing its output's whole pair).
// Work (SASS, sm_90, cuobjdump -sass of this object, nvcc -O2 -fmad=false; 24 registers, no
// spills): the loop body is 230 instructions on the fast path for 4 outputs, 57.5 per output:
// per pair two SplitMix64 hashes (~20 each: 64-bit add, three shift-xors as funnel shifts and
// LOP3s, two 64x64-bit low multiplies as 4 IMADs each), the two conversions (6), log_core (~25:
// log_f's body, its special-case selects cannot fire for u1 in [2^-24, 1]), __fsqrt_rn (~10
// with its slow-path test), sincos2pi_nonneg (~26 for both results), two products and two
// fmas; plus the loop and the 16-byte store. The old kernel: ~128 per output (two hashes, a
// full log_f, a cos and a sqrt for each output), measured 0.319 ms at n = 2^26.
// PREDICTION (H100, n = 2^26): issue-bound (FMA / IMAD pipes are below half busy): scaling the
// old kernel's measured time by 57.5 / 128 gives ~0.143 ms: 0.28 -> ~0.62 of copy bandwidth,
// ~0.93x torch.randn's time (0.153 ms). The issue's 0.9 of copy bandwidth is NOT reachable with
// this contract (SplitMix64 + float32 log + sincos + correctly rounded sqrt): it would need ~40
// instructions per output, and the hash alone is 20 (the uniform, one hash per output, is at 1.0).
// Measured (H100, 2026-11-24, bench/results/2026-11-24-h100-rng-hostcost.md): 0.144 ms, 0.62 of
// copy bandwidth, 0.93x torch.randn's time, as predicted.
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
