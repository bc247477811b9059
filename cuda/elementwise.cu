// CUDA backend, elementwise ops.
//
// Strategy (all three kernels): 256 threads per block; a block owns chunks of kIlp * 256 float4
// vectors and each thread loads its kIlp vectors (16-byte loads, coalesced across the warp) before
// computing and storing any, so every thread keeps kIlp * 16 bytes per input in flight: streaming
// at HBM3 rates needs ~30 KB in flight per SM, and one float4 per thread (2048 resident threads)
// left unary ops at 0.89 of the copy bandwidth on the H200. One block per chunk (grid-stride only
// beyond 2^31 blocks): a capped grid of looping blocks measured no better; a scalar tail
// handles n % 4. Payloads are 256-byte aligned pool blocks. The per-element function is the
// shared definition in core/numerics/elementwise_ops.hpp, instantiated per op, compiled with
// -fmad=false so the device performs exactly the host's operations.
// Bytes: unary 8n, binary 12n, minmax_bwd 20n. The shared-math ops also cost 40-150 instructions
// per element (core/numerics/shared_math.hpp), which is above the ~60 the bandwidth roof allows
// on an H200, so those are compute-bound.
// Measured: bench/results/2026-11-22-h200-elementwise-*.md.
#include "core/backend/elementwise.hpp"
#include "cuda/common/launch.cuh"

namespace tlrt {
namespace cuda {

namespace {

constexpr unsigned kThreads = 256;
constexpr int kIlp = 4;  // float4 vectors per thread per chunk

__device__ __forceinline__ uint64_t thread_index() {
  return (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ uint64_t grid_stride() { return (uint64_t)gridDim.x * blockDim.x; }

// Visits the float4 vectors of [0, n4) in chunks of kIlp * blockDim.x per block: load(k, i) for
// every k first, then store(k, i).
template <class Load, class Store>
__device__ __forceinline__ void chunked(uint64_t n4, Load load, Store store) {
  const uint64_t chunk = (uint64_t)kIlp * blockDim.x;
  for (uint64_t base = (uint64_t)blockIdx.x * chunk + threadIdx.x; base < n4;
       base += (uint64_t)gridDim.x * chunk) {
#pragma unroll
    for (int k = 0; k < kIlp; ++k) {
      const uint64_t i = base + (uint64_t)k * blockDim.x;
      if (i < n4) load(k, i);
    }
#pragma unroll
    for (int k = 0; k < kIlp; ++k) {
      const uint64_t i = base + (uint64_t)k * blockDim.x;
      if (i < n4) store(k, i);
    }
  }
}

template <ew::Unary OP>
__global__ void __launch_bounds__(kThreads) unary_kernel(const float *__restrict x,
                                                         float *__restrict y, uint64_t n,
                                                         ew::Params p) {
  const float4 *x4 = reinterpret_cast<const float4 *>(x);
  float4 *y4 = reinterpret_cast<float4 *>(y);
  float4 v[kIlp];
  chunked(
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
  chunked(
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
  chunked(
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

// Blocks for n elements: one chunk of kIlp float4 vectors per thread, one block per chunk.
unsigned grid_of(uint64_t n) { return grid_all((n / 4 + kIlp - 1) / kIlp + 1, kThreads); }

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
  launch("unary elementwise kernel", kernel, grid_of(n), kThreads, 0, stream(dev), x, y, n, p);
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
  launch("binary elementwise kernel", kernel, grid_of(n), kThreads, 0, stream(dev), a, b, y, n,
         p);
}

void minmax_bwd(int dev, bool is_max, const float *a, const float *b, const float *g, float *da,
                float *db, uint64_t n) {
  check_aligned(a);
  check_aligned(b);
  check_aligned(g);
  check_aligned(da);
  check_aligned(db);
  launch("minmax_bwd kernel", minmax_bwd_kernel, grid_of(n), kThreads, 0, stream(dev), is_max, a,
         b, g, da, db, n);
}

}  // namespace cuda
}  // namespace tlrt
