// CUDA backend, fused optimizer steps, in place: sgd_kernel<MOMENTUM, FIRST> and adam_kernel, the
// per-element definitions of core/numerics/optim_ops.hpp (abi/tlrt_optim.h) bit for bit (built
// with -fmad=false; sqrt and division are __fsqrt_rn / __fdiv_rn, every fma explicit). One launch
// per call on the library stream; no allocation, no synchronisation; the scalars come from core.
// tlrt_adam_step_multi and tlrt_clip_grad_norm launch the kernels of cuda/kernels/optim.cuh and
// cuda/kernels/clip.cuh (whose comments give their strategy and bytes) over an uploaded table.
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
#include "cuda/common/chunked.cuh"
#include "cuda/common/launch.cuh"
#include "cuda/kernels/clip.cuh"
#include "cuda/kernels/optim.cuh"

namespace tlrt {
namespace cuda {

namespace {

constexpr unsigned kThreads = 256;
constexpr int kIlp = 2;  // float4 vectors per stream per thread per chunk (Adam: 8 loads in flight)

// The scalar tail [n / 4 * 4, n): at most 3 elements, taken by the first threads of the grid.
__device__ __forceinline__ uint64_t tail_index(uint64_t n) {
  return n / 4 * 4 + (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
}

using adam_kernels::lane;

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
        adam_kernels::adam4(vp[k], vg[k], vm[k], vv[k], a);
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

}  // namespace

// tlrt_clip_grad_norm: the table of (pointer, size, first chunk) goes up through pinned staging
// (no host wait), then the three kernels of cuda/kernels/clip.cuh on the library stream.
void clip_grad_norm(int dev, float *const *ptrs, const uint64_t *sizes, uint64_t count,
                    float max_norm, float *norm) {
  cudaStream_t st = stream(dev);
  std::vector<clip_kernels::Entry> tab(count);
  uint64_t nchunks = 0;
  for (uint64_t b = 0; b < count; ++b) {
    tab[b] = clip_kernels::Entry{ptrs[b], sizes[b], nchunks};
    nchunks += (sizes[b] + clip::kChunk - 1) / clip::kChunk;
  }
  Scratch dtab(dev, count * sizeof(clip_kernels::Entry));
  Scratch part(dev, nchunks * sizeof(double));
  FloatScratch coef(dev, 1);
  upload_async(dev, dtab.as<void>(), tab.data(), count * sizeof(clip_kernels::Entry));
  clip_kernels::clip_sums_kernel<<<blocks(nchunks, kThreads / 32), kThreads, 0, st>>>(
      dtab.as<clip_kernels::Entry>(), count, nchunks, part.as<double>());
  check_launch("clip_sums_kernel");
  clip_kernels::clip_finish_kernel<<<1, kThreads, 0, st>>>(part.as<double>(), nchunks, max_norm, norm,
                                              coef.get());
  check_launch("clip_finish_kernel");
  clip_kernels::clip_scale_kernel<<<blocks(nchunks, 1), kThreads, 0, st>>>(dtab.as<clip_kernels::Entry>(), count,
                                                             nchunks, coef.get());
  check_launch("clip_scale_kernel");
}

// tlrt_adam_step_multi: the table of cuda/kernels/optim.cuh goes up through pinned staging (no
// host wait), then one adam_multi_kernel over the chunks of every tensor.
void adam_step_multi(int dev, const opt::AdamTensor *t, uint64_t count, const opt::AdamParams &a) {
  cudaStream_t st = stream(dev);
  std::vector<adam_kernels::Entry> tab(count);
  uint64_t nchunks = 0;
  for (uint64_t k = 0; k < count; ++k) {
    check_aligned(t[k].p);
    check_aligned(t[k].g);
    check_aligned(t[k].m);
    check_aligned(t[k].v);
    tab[k] = adam_kernels::Entry{t[k].p, t[k].g, t[k].m, t[k].v, t[k].n, nchunks, t[k].l2,
                                 t[k].decay};
    nchunks += (t[k].n + adam_kernels::kChunk - 1) / adam_kernels::kChunk;
  }
  Scratch dtab(dev, count * sizeof(adam_kernels::Entry));
  upload_async(dev, dtab.as<void>(), tab.data(), count * sizeof(adam_kernels::Entry));
  adam_kernels::adam_multi_kernel<<<blocks(nchunks, 1), adam_kernels::kThreads, 0, st>>>(
      dtab.as<adam_kernels::Entry>(), count, nchunks, a);
  check_launch("adam_multi_kernel");
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
