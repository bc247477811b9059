// CUDA backend, elementwise ops: unary_kernel<OP>, binary_kernel<OP> and minmax_bwd_kernel.
// The per-element function is the shared definition of core/numerics/elementwise_ops.hpp,
// instantiated per op and compiled with -fmad=false, so the device performs exactly the host's
// operations.
// Strategy: the chunked streaming loop of cuda/common/chunked.cuh with 256 threads and kIlp = 4
// float4 vectors per thread (64 bytes per input in flight: HBM3 needs ~30 KB in flight per SM),
// one block per chunk, then a scalar tail for n % 4. Payloads are 256-byte aligned pool blocks
// (checked: a misaligned pointer is an internal error).
// Bytes: unary 8n, binary 12n, minmax_bwd 20n; exact ops 1-3 operations per element. The shared-math
// ops cost 40-150 instructions per element (core/numerics/shared_math.hpp), above the ~60 that
// the bandwidth roof allows on an H200: those are compute-bound.
// Last measured: bench/results/2026-11-24-h100-elementwise.md
#include "core/backend/elementwise.hpp"
#include "cuda/common/chunked.cuh"

namespace tlrt {
namespace cuda {

namespace {

constexpr unsigned kThreads = 256;
constexpr int kIlp = 4;  // float4 vectors per thread per chunk

__device__ __forceinline__ uint64_t thread_index() {
  return (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ uint64_t grid_stride() { return (uint64_t)gridDim.x * blockDim.x; }

template <ew::Unary OP>
__global__ void __launch_bounds__(kThreads) unary_kernel(const float *__restrict x,
                                                         float *__restrict y, uint64_t n,
                                                         ew::Params p) {
  const float4 *x4 = reinterpret_cast<const float4 *>(x);
  float4 *y4 = reinterpret_cast<float4 *>(y);
  float4 v[kIlp];
  chunked<kIlp>(
      n / 4, [&](int k, uint64_t i) { v[k] = x4[i]; },
      [&](int k, uint64_t i) {
        float4 r;
        r.x = ew::unary<OP>(v[k].x, p);
        r.y = ew::unary<OP>(v[k].y, p);
        r.z = ew::unary<OP>(v[k].z, p);
        r.w = ew::unary<OP>(v[k].w, p);
        y4[i] = r;
      });
  for (uint64_t i = n / 4 * 4 + thread_index(); i < n; i += grid_stride())
    y[i] = ew::unary<OP>(x[i], p);
}

template <ew::Binary OP>
__global__ void __launch_bounds__(kThreads) binary_kernel(const float *__restrict a,
                                                          const float *__restrict b,
                                                          float *__restrict y, uint64_t n,
                                                          ew::Params p) {
  const float4 *a4 = reinterpret_cast<const float4 *>(a);
  const float4 *b4 = reinterpret_cast<const float4 *>(b);
  float4 *y4 = reinterpret_cast<float4 *>(y);
  float4 u[kIlp], v[kIlp];
  chunked<kIlp>(
      n / 4,
      [&](int k, uint64_t i) {
        u[k] = a4[i];
        v[k] = b4[i];
      },
      [&](int k, uint64_t i) {
        float4 r;
        r.x = ew::binary<OP>(u[k].x, v[k].x, p);
        r.y = ew::binary<OP>(u[k].y, v[k].y, p);
        r.z = ew::binary<OP>(u[k].z, v[k].z, p);
        r.w = ew::binary<OP>(u[k].w, v[k].w, p);
        y4[i] = r;
      });
  for (uint64_t i = n / 4 * 4 + thread_index(); i < n; i += grid_stride())
    y[i] = ew::binary<OP>(a[i], b[i], p);
}

__global__ void __launch_bounds__(kThreads) minmax_bwd_kernel(
    bool is_max, const float *__restrict a, const float *__restrict b, const float *__restrict g,
    float *__restrict da, float *__restrict db, uint64_t n) {
  const float4 *a4 = reinterpret_cast<const float4 *>(a);
  const float4 *b4 = reinterpret_cast<const float4 *>(b);
  const float4 *g4 = reinterpret_cast<const float4 *>(g);
  float4 *da4 = reinterpret_cast<float4 *>(da);
  float4 *db4 = reinterpret_cast<float4 *>(db);
  float4 u[kIlp], v[kIlp], w[kIlp];
  chunked<kIlp>(
      n / 4,
      [&](int k, uint64_t i) {
        u[k] = a4[i];
        v[k] = b4[i];
        w[k] = g4[i];
      },
      [&](int k, uint64_t i) {
        float4 ra, rb;
        ew::minmax_bwd(is_max, u[k].x, v[k].x, w[k].x, &ra.x, &rb.x);
        ew::minmax_bwd(is_max, u[k].y, v[k].y, w[k].y, &ra.y, &rb.y);
        ew::minmax_bwd(is_max, u[k].z, v[k].z, w[k].z, &ra.z, &rb.z);
        ew::minmax_bwd(is_max, u[k].w, v[k].w, w[k].w, &ra.w, &rb.w);
        da4[i] = ra;
        db4[i] = rb;
      });
  for (uint64_t i = n / 4 * 4 + thread_index(); i < n; i += grid_stride())
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
  void (*kernel)(const float *, float *, uint64_t, ew::Params) = nullptr;
  switch (op) {
#define TLRT_CASE(name)                          \
  case ew::Unary::name:                          \
    kernel = unary_kernel<ew::Unary::name>;      \
    break;
    TLRT_UNARY_OPS(TLRT_CASE)
#undef TLRT_CASE
  }
  if (kernel == nullptr) fail(TLRT_ERR_INTERNAL, "unary elementwise: unknown op %d", (int)op);
  launch("unary elementwise kernel", kernel, chunked_grid<kIlp>(n, kThreads), kThreads, 0,
         stream(dev), x, y, n, p);
}

void binary(int dev, ew::Binary op, const float *a, const float *b, float *y, uint64_t n,
            ew::Params p) {
  check_aligned(a);
  check_aligned(b);
  check_aligned(y);
  void (*kernel)(const float *, const float *, float *, uint64_t, ew::Params) = nullptr;
  switch (op) {
#define TLRT_CASE(name)                          \
  case ew::Binary::name:                         \
    kernel = binary_kernel<ew::Binary::name>;    \
    break;
    TLRT_BINARY_OPS(TLRT_CASE)
#undef TLRT_CASE
  }
  if (kernel == nullptr) fail(TLRT_ERR_INTERNAL, "binary elementwise: unknown op %d", (int)op);
  launch("binary elementwise kernel", kernel, chunked_grid<kIlp>(n, kThreads), kThreads, 0,
         stream(dev), a, b, y, n, p);
}

void minmax_bwd(int dev, bool is_max, const float *a, const float *b, const float *g, float *da,
                float *db, uint64_t n) {
  check_aligned(a);
  check_aligned(b);
  check_aligned(g);
  check_aligned(da);
  check_aligned(db);
  launch("minmax_bwd kernel", minmax_bwd_kernel, chunked_grid<kIlp>(n, kThreads), kThreads, 0,
         stream(dev), is_max, a, b, g, da, db, n);
}

}  // namespace cuda
}  // namespace tlrt
