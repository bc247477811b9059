// Device code of the Adam / AdamW steps (abi/tlrt_optim.h) in the plain subset that
// tests/emu/cuda_emu.hpp runs on the CPU (tests/unit/test_optim_emu.cpp compares it there bit for
// bit with the CPU backend):
//  - adam4: the update of one float4 of param, grad, m and v, opt::adam per lane
//    (core/numerics/optim_ops.hpp, the function the CPU backend runs); adam_kernel of
//    cuda/optim.cu (tlrt_adam_step) and adam_multi_kernel both compute through it.
//  - adam_multi_kernel (tlrt_adam_step_multi): one launch for any number of tensors. Each tensor
//    is cut into chunks of kChunk = 16384 elements; a block takes a chunk (grid-stride over the
//    chunks of all tensors), finds its tensor by a binary search (cuda/kernels/chunk_table.cuh)
//    of the table of Entry (pointers, size, first chunk, weight decay: 56 bytes per tensor,
//    uploaded once per call), and streams it: each of the 256 threads loads kIlp = 2 float4 of
//    each of the four buffers (8 loads in flight) before it computes and stores them, then the
//    scalar tail (n % 4, in the tensor's last chunk). A chunk starts at a multiple of 16384
//    elements of a 256-byte aligned buffer, so its float4 accesses are aligned.
// Bytes per element: p, g, m, v read, p, m, v written: 28 (as tlrt_adam_step); per chunk the
// table's binary search reads about 8 log2(count) + 56 bytes, cached (every thread of the block
// reads the same entries).
#pragma once

#include <cstdint>

#include "core/numerics/optim_ops.hpp"
#include "cuda/kernels/chunk_table.cuh"
#include "cuda/common/vec4.cuh"

namespace tlrt {
namespace cuda {
namespace adam_kernels {

constexpr unsigned kThreads = 256;
constexpr int kIlp = 2;             // float4 vectors per buffer per thread per round
constexpr uint64_t kChunk = 16384;  // elements per block-chunk: 8 rounds of kIlp x 256 float4

struct Entry {
  float *p;
  const float *g;
  float *m;
  float *v;
  uint64_t n;       // elements, >= 1
  uint64_t chunk0;  // index of the tensor's first chunk among all chunks
  float l2, decay;  // AdamParams' per-tensor fields
};

__device__ __forceinline__ float &lane(float4 &v, int j) {
  return j == 0 ? v.x : (j == 1 ? v.y : (j == 2 ? v.z : v.w));
}

// One float4 of the Adam step: p, m, v updated in registers from g.
__device__ __forceinline__ void adam4(float4 &p, float4 &g, float4 &m, float4 &v,
                                      const opt::AdamParams &a) {
#pragma unroll
  for (int j = 0; j < 4; ++j)
    lane(p, j) = opt::adam(lane(p, j), lane(g, j), &lane(m, j), &lane(v, j), a);
}

using vec4::ld4;
using vec4::st4;

// a: the scalars common to all tensors (l2 and decay come from each tensor's entry).
__global__ void __launch_bounds__(kThreads)
    adam_multi_kernel(const Entry *__restrict tab, uint64_t count, uint64_t nchunks,
                      opt::AdamParams a) {
  for (uint64_t c = blockIdx.x; c < nchunks; c += gridDim.x) {
    const Entry e = tab[chunk_table::find(tab, count, c)];
    opt::AdamParams at = a;
    at.l2 = e.l2;
    at.decay = e.decay;
    const uint64_t e0 = (c - e.chunk0) * kChunk;
    const uint64_t len = e.n - e0 < kChunk ? e.n - e0 : kChunk;
    float *p = e.p + e0, *m = e.m + e0, *v = e.v + e0;
    const float *g = e.g + e0;
    const uint64_t n4 = len / 4;
    for (uint64_t base = threadIdx.x; base < n4; base += (uint64_t)kIlp * kThreads) {
      float4 vp[kIlp], vg[kIlp], vm[kIlp], vv[kIlp];
#pragma unroll
      for (int k = 0; k < kIlp; ++k) {
        const uint64_t i = 4 * (base + (uint64_t)k * kThreads);
        if (i < 4 * n4) {
          vp[k] = ld4(p + i);
          vg[k] = ld4(g + i);
          vm[k] = ld4(m + i);
          vv[k] = ld4(v + i);
        }
      }
#pragma unroll
      for (int k = 0; k < kIlp; ++k) {
        const uint64_t i = 4 * (base + (uint64_t)k * kThreads);
        if (i < 4 * n4) {
          adam4(vp[k], vg[k], vm[k], vv[k], at);
          st4(p + i, vp[k]);
          st4(m + i, vm[k]);
          st4(v + i, vv[k]);
        }
      }
    }
    const uint64_t i = 4 * n4 + threadIdx.x;
    if (i < len) {
      float mi = m[i], vi = v[i];
      p[i] = opt::adam(p[i], g[i], &mi, &vi, at);
      m[i] = mi;
      v[i] = vi;
    }
  }
}

}  // namespace adam_kernels
}  // namespace cuda
}  // namespace tlrt
