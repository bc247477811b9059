// CUDA backend, elementwise ops.
//
// Strategy (all three kernels): grid-stride loop, 256 threads per block, each thread handles 4
// consecutive floats per iteration with 16-byte loads and stores (payloads are 256-byte aligned
// pool blocks; a scalar tail handles n % 4). The per-element function is the shared definition
// in core/numerics/elementwise_ops.hpp, instantiated per op, compiled with -fmad=false so the
// device performs exactly the host's operations.
// Bytes: unary 8n, binary 12n, minmax_bwd 20n; FLOPs are negligible next to them except for the
// shared-math ops (~20-40 per element), which still stay under the bandwidth roof on H100/H200.
// Measured: see bench/results/ (elementwise_*.md).
#include "core/backend/elementwise.hpp"
#include "cuda/cuda_common.cuh"

namespace tlrt {
namespace cuda {

namespace {

constexpr unsigned kThreads = 256;

__device__ __forceinline__ uint64_t thread_index() {
  return (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ uint64_t grid_stride() { return (uint64_t)gridDim.x * blockDim.x; }

template <ew::Unary OP>
__global__ void unary_kernel(const float *__restrict x, float *__restrict y, uint64_t n,
                             ew::Params p) {
  const uint64_t n4 = n / 4;
  const float4 *x4 = reinterpret_cast<const float4 *>(x);
  float4 *y4 = reinterpret_cast<float4 *>(y);
  for (uint64_t i = thread_index(); i < n4; i += grid_stride()) {
    float4 v = x4[i];
    v.x = ew::unary<OP>(v.x, p);
    v.y = ew::unary<OP>(v.y, p);
    v.z = ew::unary<OP>(v.z, p);
    v.w = ew::unary<OP>(v.w, p);
    y4[i] = v;
  }
  for (uint64_t i = n4 * 4 + thread_index(); i < n; i += grid_stride()) y[i] = ew::unary<OP>(x[i], p);
}

template <ew::Binary OP>
__global__ void binary_kernel(const float *__restrict a, const float *__restrict b,
                              float *__restrict y, uint64_t n, ew::Params p) {
  const uint64_t n4 = n / 4;
  const float4 *a4 = reinterpret_cast<const float4 *>(a);
  const float4 *b4 = reinterpret_cast<const float4 *>(b);
  float4 *y4 = reinterpret_cast<float4 *>(y);
  for (uint64_t i = thread_index(); i < n4; i += grid_stride()) {
    const float4 u = a4[i], v = b4[i];
    float4 r;
    r.x = ew::binary<OP>(u.x, v.x, p);
    r.y = ew::binary<OP>(u.y, v.y, p);
    r.z = ew::binary<OP>(u.z, v.z, p);
    r.w = ew::binary<OP>(u.w, v.w, p);
    y4[i] = r;
  }
  for (uint64_t i = n4 * 4 + thread_index(); i < n; i += grid_stride())
    y[i] = ew::binary<OP>(a[i], b[i], p);
}

__global__ void minmax_bwd_kernel(bool is_max, const float *__restrict a,
                                  const float *__restrict b, const float *__restrict g,
                                  float *__restrict da, float *__restrict db, uint64_t n) {
  for (uint64_t i = thread_index(); i < n; i += grid_stride())
    ew::minmax_bwd(is_max, a[i], b[i], g[i], &da[i], &db[i]);
}

void check_aligned(const void *p) {
  if (((uintptr_t)p & 15u) != 0)
    fail(TLRT_ERR_INTERNAL, "elementwise: device pointer %p is not 16-byte aligned", p);
}

}  // namespace

void unary(int dev, ew::Unary op, const float *x, float *y, uint64_t n, ew::Params p) {
  check_aligned(x);
  check_aligned(y);
  cudaStream_t s = stream(dev);
  const unsigned grid = grid_for((n + 3) / 4, kThreads, dev);
  switch (op) {
#define TLRT_CASE(name)                                                          \
  case ew::Unary::name:                                                          \
    unary_kernel<ew::Unary::name><<<grid, kThreads, 0, s>>>(x, y, n, p);         \
    break;
    TLRT_UNARY_OPS(TLRT_CASE)
#undef TLRT_CASE
  }
  check_launch("unary elementwise kernel");
}

void binary(int dev, ew::Binary op, const float *a, const float *b, float *y, uint64_t n,
            ew::Params p) {
  check_aligned(a);
  check_aligned(b);
  check_aligned(y);
  cudaStream_t s = stream(dev);
  const unsigned grid = grid_for((n + 3) / 4, kThreads, dev);
  switch (op) {
#define TLRT_CASE(name)                                                           \
  case ew::Binary::name:                                                          \
    binary_kernel<ew::Binary::name><<<grid, kThreads, 0, s>>>(a, b, y, n, p);     \
    break;
    TLRT_BINARY_OPS(TLRT_CASE)
#undef TLRT_CASE
  }
  check_launch("binary elementwise kernel");
}

void minmax_bwd(int dev, bool is_max, const float *a, const float *b, const float *g, float *da,
                float *db, uint64_t n) {
  cudaStream_t s = stream(dev);
  minmax_bwd_kernel<<<grid_for(n, kThreads, dev), kThreads, 0, s>>>(is_max, a, b, g, da, db, n);
  check_launch("minmax_bwd kernel");
}

}  // namespace cuda
}  // namespace tlrt
