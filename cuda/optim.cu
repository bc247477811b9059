// CUDA backend, fused optimizer steps, in place: sgd_kernel<MOMENTUM, FIRST> and adam_kernel, the
// per-element definitions of core/numerics/optim_ops.hpp (abi/tlrt_optim.h) bit for bit (built
// with -fmad=false; sqrt and division are __fsqrt_rn / __fdiv_rn, every fma explicit). One launch
// per call on the library stream; no allocation, no synchronisation; the scalars come from core.
// Strategy: the chunked streaming loop of cuda/common/chunked.cuh (256 threads, kIlp = 2 float4
// vectors per stream per thread: Adam has 8 loads in flight), one block per chunk, a scalar tail
// for n % 4. Payloads are 256-byte aligned pool blocks (checked). The flags (momentum, first
// step, nesterov, weight decay) are template parameters or uniform branches.
// Bytes per element (Adam is ~12 flops, one sqrt and two divisions: far below the compute roof):
//   SGD, no momentum:          p, g read; p written                      12 B
//   SGD, momentum, step 1:     p, g read; p, buf written                 16 B
//   SGD, momentum, step > 1:   p, g, buf read; p, buf written            20 B
//   Adam / AdamW:              p, g, m, v read; p, m, v written          28 B
// Last measured: bench/results/2026-11-22-h100-optim.md
#include <vector>

#include "core/backend/memory.hpp"
#include "core/backend/optim.hpp"
#include "core/numerics/select_ops.hpp"
#include "cuda/common/chunked.cuh"
#include "cuda/common/launch.cuh"

namespace tlrt {
namespace cuda {

namespace {

constexpr unsigned kThreads = 256;
constexpr int kIlp = 2;  // float4 vectors per stream per thread per chunk (Adam: 8 loads in flight)

// The scalar tail [n / 4 * 4, n): at most 3 elements, taken by the first threads of the grid.
__device__ __forceinline__ uint64_t tail_index(uint64_t n) {
  return n / 4 * 4 + (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
}

__device__ __forceinline__ float &lane(float4 &v, int j) {
  return j == 0 ? v.x : (j == 1 ? v.y : (j == 2 ? v.z : v.w));
}

template <bool MOMENTUM, bool FIRST>
__global__ void __launch_bounds__(kThreads)
    sgd_kernel(float *__restrict p, const float *__restrict g, float *__restrict buf, uint64_t n,
               opt::SgdParams s) {
  float4 *p4 = reinterpret_cast<float4 *>(p);
  const float4 *g4 = reinterpret_cast<const float4 *>(g);
  float4 *b4 = reinterpret_cast<float4 *>(buf);
  float4 vp[kIlp], vg[kIlp], vb[kIlp];
  chunked<kIlp>(
      n / 4,
      [&](int k, uint64_t i) {
        vp[k] = p4[i];
        vg[k] = g4[i];
        if (MOMENTUM && !FIRST) vb[k] = b4[i];
      },
      [&](int k, uint64_t i) {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          float &pj = lane(vp[k], j);
          if (MOMENTUM)
            pj = opt::sgd_momentum(pj, lane(vg[k], j), &lane(vb[k], j), s);
          else
            pj = opt::sgd_plain(pj, lane(vg[k], j), s);
        }
        p4[i] = vp[k];
        if (MOMENTUM) b4[i] = vb[k];
      });
  const uint64_t i = tail_index(n);
  if (i < n) {
    if (MOMENTUM) {
      float b = FIRST ? 0.0f : buf[i];
      p[i] = opt::sgd_momentum(p[i], g[i], &b, s);
      buf[i] = b;
    } else {
      p[i] = opt::sgd_plain(p[i], g[i], s);
    }
  }
}

__global__ void __launch_bounds__(kThreads)
    adam_kernel(float *__restrict p, const float *__restrict g, float *__restrict m,
                float *__restrict v, uint64_t n, opt::AdamParams a) {
  float4 *p4 = reinterpret_cast<float4 *>(p);
  const float4 *g4 = reinterpret_cast<const float4 *>(g);
  float4 *m4 = reinterpret_cast<float4 *>(m);
  float4 *v4 = reinterpret_cast<float4 *>(v);
  float4 vp[kIlp], vg[kIlp], vm[kIlp], vv[kIlp];
  chunked<kIlp>(
      n / 4,
      [&](int k, uint64_t i) {
        vp[k] = p4[i];
        vg[k] = g4[i];
        vm[k] = m4[i];
        vv[k] = v4[i];
      },
      [&](int k, uint64_t i) {
#pragma unroll
        for (int j = 0; j < 4; ++j)
          lane(vp[k], j) =
              opt::adam(lane(vp[k], j), lane(vg[k], j), &lane(vm[k], j), &lane(vv[k], j), a);
        p4[i] = vp[k];
        m4[i] = vm[k];
        v4[i] = vv[k];
      });
  const uint64_t i = tail_index(n);
  if (i < n) {
    float mi = m[i], vi = v[i];
    p[i] = opt::adam(p[i], g[i], &mi, &vi, a);
    m[i] = mi;
    v[i] = vi;
  }
}

void check_aligned(const void *q) {
  if (((uintptr_t)q & 15u) != 0)
    fail(TLRT_ERR_INTERNAL, "optim: device pointer %p is not 16-byte aligned", q);
}

// ---- tlrt_clip_grad_norm: three launches whatever the count ------------------------------------
// A table of (pointer, size, first chunk) per buffer is uploaded through pinned staging (no host
// wait). clip_sums_kernel: one warp per chunk of 4096 elements (its buffer found by binary
// search in the table), lane w holding the tree's lanes 32 g + w in double registers, the halving
// h = 128, 64, 32 in registers and h = 16 .. 1 by shuffles: clip::'s chunk value, bit for bit the
// CPU's (squares of float32 are exact in double; -fmad=false). clip_finish_kernel: one block,
// thread t folds chunk values t, t + 256, ... in order, the halving in shared memory, then
// norm = f32(sqrt(S)) and the coefficient into scratch. clip_scale_kernel: reads the coefficient
// on the device and returns at once when it is 1 (no write: x * 1 == x), else scales every
// element (grid-stride over chunks).
struct ClipEntry {
  float *p;
  uint64_t n;
  uint64_t chunk0;  // index of the buffer's first chunk among all chunks
};

__device__ __forceinline__ uint64_t clip_find(const ClipEntry *tab, uint64_t count, uint64_t c) {
  uint64_t lo = 0, hi = count - 1;  // the last entry with chunk0 <= c
  while (lo < hi) {
    const uint64_t mid = (lo + hi + 1) / 2;
    if (tab[mid].chunk0 <= c)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

__global__ void __launch_bounds__(kThreads)
    clip_sums_kernel(const ClipEntry *__restrict tab, uint64_t count, uint64_t nchunks,
                     double *__restrict part) {
  const unsigned w = threadIdx.x & 31u;
  for (uint64_t c = (uint64_t)blockIdx.x * (kThreads / 32) + threadIdx.x / 32; c < nchunks;
       c += (uint64_t)gridDim.x * (kThreads / 32)) {
    const ClipEntry e = tab[clip_find(tab, count, c)];
    const uint64_t e0 = (c - e.chunk0) * clip::kChunk;
    const uint64_t len = e.n - e0 < clip::kChunk ? e.n - e0 : clip::kChunk;
    const float *x = e.p + e0;
    double a[8];
#pragma unroll
    for (int g = 0; g < 8; ++g) a[g] = 0.0;
    if (len == clip::kChunk) {
#pragma unroll 4
      for (unsigned r = 0; r < 16; ++r)
#pragma unroll
        for (unsigned g = 0; g < 8; ++g) a[g] = __dadd_rn(a[g], clip::sq(__ldg(x + r * 256 + g * 32 + w)));
    } else {
      for (unsigned r = 0; r < 16; ++r)
#pragma unroll
        for (unsigned g = 0; g < 8; ++g) {
          const uint64_t i = r * 256 + g * 32 + w;
          if (i < len) a[g] = __dadd_rn(a[g], clip::sq(__ldg(x + i)));
        }
    }
#pragma unroll
    for (int g = 0; g < 4; ++g) a[g] = __dadd_rn(a[g], a[g + 4]);  // h = 128
    a[0] = __dadd_rn(a[0], a[2]);                                    // h = 64
    a[1] = __dadd_rn(a[1], a[3]);
    double v = __dadd_rn(a[0], a[1]);                                // h = 32
#pragma unroll
    for (unsigned h = 16; h >= 1; h >>= 1) v = __dadd_rn(v, __shfl_down_sync(0xFFFFFFFFu, v, h));
    if (w == 0) part[c] = v;
  }
}

__global__ void __launch_bounds__(kThreads)
    clip_finish_kernel(const double *__restrict part, uint64_t nchunks, float max_norm,
                       float *__restrict norm, float *__restrict coef) {
  __shared__ double a[clip::kLanes];
  const unsigned t = threadIdx.x;
  double v = 0.0;
  for (uint64_t c = t; c < nchunks; c += clip::kLanes) v = __dadd_rn(v, part[c]);
  a[t] = v;
  __syncthreads();
  for (unsigned h = clip::kLanes / 2; h >= 1; h >>= 1) {
    if (t < h) a[t] = __dadd_rn(a[t], a[t + h]);
    __syncthreads();
  }
  if (t == 0) {
    const float nf = __double2float_rn(__dsqrt_rn(a[0]));
    norm[0] = nf;
    coef[0] = clip::coef_of(nf, max_norm);
  }
}

__global__ void __launch_bounds__(kThreads)
    clip_scale_kernel(const ClipEntry *__restrict tab, uint64_t count, uint64_t nchunks,
                      const float *__restrict coef) {
  const float f = *coef;
  if (f == 1.0f) return;
  for (uint64_t c = blockIdx.x; c < nchunks; c += gridDim.x) {
    const ClipEntry e = tab[clip_find(tab, count, c)];
    const uint64_t e0 = (c - e.chunk0) * clip::kChunk;
    const uint64_t len = e.n - e0 < clip::kChunk ? e.n - e0 : clip::kChunk;
    float *x = e.p + e0;
#pragma unroll 4
    for (uint64_t i = threadIdx.x; i < len; i += kThreads) x[i] = __fmul_rn(x[i], f);
  }
}

}  // namespace

void clip_grad_norm(int dev, float *const *ptrs, const uint64_t *sizes, uint64_t count,
                    float max_norm, float *norm) {
  cudaStream_t st = stream(dev);
  std::vector<ClipEntry> tab(count);
  uint64_t nchunks = 0;
  for (uint64_t b = 0; b < count; ++b) {
    tab[b] = ClipEntry{ptrs[b], sizes[b], nchunks};
    nchunks += (sizes[b] + clip::kChunk - 1) / clip::kChunk;
  }
  Scratch dtab(dev, count * sizeof(ClipEntry));
  Scratch part(dev, nchunks * sizeof(double));
  FloatScratch coef(dev, 1);
  upload_async(dev, dtab.as<void>(), tab.data(), count * sizeof(ClipEntry));
  clip_sums_kernel<<<blocks(nchunks, kThreads / 32), kThreads, 0, st>>>(
      dtab.as<ClipEntry>(), count, nchunks, part.as<double>());
  check_launch("clip_sums_kernel");
  clip_finish_kernel<<<1, kThreads, 0, st>>>(part.as<double>(), nchunks, max_norm, norm,
                                              coef.get());
  check_launch("clip_finish_kernel");
  clip_scale_kernel<<<blocks(nchunks, 1), kThreads, 0, st>>>(dtab.as<ClipEntry>(), count,
                                                             nchunks, coef.get());
  check_launch("clip_scale_kernel");
}

void sgd_step(int dev, float *p, const float *g, float *buf, uint64_t n, const opt::SgdParams &s) {
  check_aligned(p);
  check_aligned(g);
  if (buf) check_aligned(buf);
  cudaStream_t st = stream(dev);
  const unsigned grid = chunked_grid<kIlp>(n, kThreads);
  if (buf == nullptr)
    sgd_kernel<false, false><<<grid, kThreads, 0, st>>>(p, g, nullptr, n, s);
  else if (s.first)
    sgd_kernel<true, true><<<grid, kThreads, 0, st>>>(p, g, buf, n, s);
  else
    sgd_kernel<true, false><<<grid, kThreads, 0, st>>>(p, g, buf, n, s);
  check_launch("sgd_step kernel");
}

void adam_step(int dev, float *p, const float *g, float *m, float *v, uint64_t n,
               const opt::AdamParams &a) {
  check_aligned(p);
  check_aligned(g);
  check_aligned(m);
  check_aligned(v);
  cudaStream_t st = stream(dev);
  adam_kernel<<<chunked_grid<kIlp>(n, kThreads), kThreads, 0, st>>>(p, g, m, v, n, a);
  check_launch("adam_step kernel");
}

}  // namespace cuda
}  // namespace tlrt
