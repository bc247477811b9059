// Device kernels of tlrt_clip_grad_norm (abi/tlrt_optim.h; launched by cuda/optim.cu) in the plain
// subset that tests/emu/cuda_emu.hpp runs on the CPU (tests/unit/test_select_emu.cpp compares
// them there bit for bit with the CPU backend). Three launches whatever the number of buffers:
//  - clip_sums_kernel: one warp per chunk of 4096 elements of any buffer (its buffer found by a
//    binary search of the table of (pointer, size, first chunk)); lane w holds the tree's lanes
//    32 g + w (g = 0..7) in double registers, the halving h = 128, 64, 32 in registers and
//    h = 16 .. 1 by shuffles: clip::'s chunk value (core/numerics/select_ops.hpp), the CPU's bit
//    for bit (squares of float32 are exact in double; explicit __dadd_rn).
//  - clip_finish_kernel: one block of 256; thread t folds chunk values t, t + 256, ... in order,
//    the halving in shared memory; norm = f32(sqrt(S)) and the coefficient (to device scratch).
//  - clip_scale_kernel: reads the coefficient on the device and returns at once when it is 1
//    (x * 1 == x: nothing to write); else one block per chunk (grid-stride) scales in place.
#pragma once

#include <cstdint>

#include "core/numerics/select_ops.hpp"
#include "cuda/kernels/chunk_table.cuh"

namespace tlrt {
namespace cuda {
namespace clip_kernels {

constexpr unsigned kThreads = 256;

struct Entry {
  float *p;
  uint64_t n;
  uint64_t chunk0;  // index of the buffer's first chunk among all chunks
};

__global__ void __launch_bounds__(kThreads)
    clip_sums_kernel(const Entry *__restrict tab, uint64_t count, uint64_t nchunks,
                     double *__restrict part) {
  const unsigned w = threadIdx.x & 31u;
  for (uint64_t c = (uint64_t)blockIdx.x * (kThreads / 32) + threadIdx.x / 32; c < nchunks;
       c += (uint64_t)gridDim.x * (kThreads / 32)) {
    const Entry e = tab[chunk_table::find(tab, count, c)];
    const uint64_t e0 = (c - e.chunk0) * clip::kChunk;
    const uint64_t len = e.n - e0 < clip::kChunk ? e.n - e0 : clip::kChunk;
    const float *x = e.p + e0;
    double a[8];
#pragma unroll
    for (unsigned g = 0; g < 8; ++g) a[g] = 0.0;
    if (len == clip::kChunk) {
#pragma unroll 4
      for (unsigned r = 0; r < 16; ++r)
#pragma unroll
        for (unsigned g = 0; g < 8; ++g)
          a[g] = __dadd_rn(a[g], clip::sq(__ldg(x + r * 256 + g * 32 + w)));
    } else {
      for (unsigned r = 0; r < 16; ++r)
#pragma unroll
        for (unsigned g = 0; g < 8; ++g) {
          const uint64_t i = r * 256 + g * 32 + w;
          if (i < len) a[g] = __dadd_rn(a[g], clip::sq(__ldg(x + i)));
        }
    }
#pragma unroll
    for (unsigned g = 0; g < 4; ++g) a[g] = __dadd_rn(a[g], a[g + 4]);  // h = 128
    a[0] = __dadd_rn(a[0], a[2]);                                         // h = 64
    a[1] = __dadd_rn(a[1], a[3]);
    double v = __dadd_rn(a[0], a[1]);  // h = 32
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
    clip_scale_kernel(const Entry *__restrict tab, uint64_t count, uint64_t nchunks,
                      const float *__restrict coef) {
  const float f = *coef;
  if (f == 1.0f) return;
  for (uint64_t c = blockIdx.x; c < nchunks; c += gridDim.x) {
    const Entry e = tab[chunk_table::find(tab, count, c)];
    const uint64_t e0 = (c - e.chunk0) * clip::kChunk;
    const uint64_t len = e.n - e0 < clip::kChunk ? e.n - e0 : clip::kChunk;
    float *x = e.p + e0;
#pragma unroll 4
    for (uint64_t i = threadIdx.x; i < len; i += kThreads) x[i] = __fmul_rn(x[i], f);
  }
}

}  // namespace clip_kernels
}  // namespace cuda
}  // namespace tlrt
