// Device building blocks of THE TREE (core/numerics/reduce_tree.hpp) shared by the CUDA kernels
// (cuda/reduce.cu, cuda/index.cu, cuda/kernels/layer_norm.cuh): a warp's chunk value
// (chunk_scalar, chunk_vec4), the halving over the lanes of a 32-column tile (tile_halving), and
// the one-launch two-level whole reduction fused2_kernel_vec4, which the CPU emulator test
// (tests/unit/test_reduce_emu.cpp) runs bit for bit. cuda/reduce.cu explains the strategies.
// Last measured: bench/results/2026-11-27-h100-s16-reduce.md
#pragma once

#include <cstdint>

#include "core/numerics/reduce_tree.hpp"

namespace tlrt {
namespace cuda {
namespace red_kernels {

constexpr unsigned kThreads = 256;
constexpr unsigned kWarps = kThreads / 32;

// Partials written by other warps of the same launch: read through L2 (not the incoherent L1).
struct L2Contig {
  const float *x;
  __device__ __forceinline__ float at(uint64_t b, uint64_t e) const { return __ldcg(x + b + e); }
};

// The tree's value of the chunk [e0, e0 + len) of the sequence at b, computed by one warp; valid
// in lane 0. Lane w holds the tree's lanes t = 32 g + w (g = 0..7).
template <red::Op OP, class Src>
__device__ __forceinline__ float chunk_scalar(const Src &src, uint64_t b, uint64_t e0,
                                              uint64_t len) {
  using O = red::Ops<OP>;
  const unsigned w = threadIdx.x & 31u;
  float a[8];
#pragma unroll
  for (int g = 0; g < 8; ++g) a[g] = O::identity();
  if (len == red::kChunk) {
#pragma unroll 2
    for (unsigned r = 0; r < red::kDepth; ++r) {
#pragma unroll
      for (unsigned g = 0; g < 8; ++g)
        a[g] = O::op(a[g], src.at(b, e0 + r * red::kLanes + g * 32 + w));
    }
  } else {
    const unsigned full = (unsigned)(len / red::kLanes);  // rows of 256 present in full
#pragma unroll 2
    for (unsigned r = 0; r < full; ++r) {
#pragma unroll
      for (unsigned g = 0; g < 8; ++g)
        a[g] = O::op(a[g], src.at(b, e0 + r * red::kLanes + g * 32 + w));
    }
#pragma unroll
    for (unsigned g = 0; g < 8; ++g) {
      const uint64_t e = (uint64_t)full * red::kLanes + g * 32 + w;
      if (e < len) a[g] = O::op(a[g], src.at(b, e0 + e));
    }
  }
  // Halving: lane t = 32 g + w. h = 128, 64, 32 pair registers of one thread, h = 16 .. 1 lanes
  // of the warp (lane w < h takes lane w + h).
  float v = red::halve<OP>(a);
#pragma unroll
  for (unsigned h = 16; h >= 1; h >>= 1) v = O::op(v, __shfl_down_sync(0xFFFFFFFFu, v, h));
  return v;
}

// The same for a chunk starting 16-byte aligned with len % 4 == 0, with float4 loads. Lane w holds
// the tree's lanes t = 128 q + 4 w + j (q = 0, 1; j = 0..3) in a[4 q + j]: each warp load reads
// 512 contiguous bytes, a thread has 2 loads per row of 256 elements and 8 in flight (unroll 4).
// Halving: h = 128 pairs a[j] with a[4 + j] in the thread; h = 64 .. 4 pair lane w with lane
// w + h / 4 (shuffles); h = 2, 1 pair registers of one thread again. A float4 is either wholly
// inside a partial chunk or wholly outside; lanes past the end fold the identity, which leaves
// them unchanged bit for bit (x + -0 = x, max(x, -inf) = x).
template <red::Op OP>
__device__ __forceinline__ float chunk_vec4(const float *chunk, uint64_t len) {
  using O = red::Ops<OP>;
  const unsigned w = threadIdx.x & 31u;
  const float4 *p = reinterpret_cast<const float4 *>(chunk) + w;  // row r: p[64 r], p[64 r + 32]
  float a[8];
#pragma unroll
  for (int g = 0; g < 8; ++g) a[g] = O::identity();
  auto fold = [&](float4 lo, float4 hi) {
    a[0] = O::op(a[0], lo.x);
    a[1] = O::op(a[1], lo.y);
    a[2] = O::op(a[2], lo.z);
    a[3] = O::op(a[3], lo.w);
    a[4] = O::op(a[4], hi.x);
    a[5] = O::op(a[5], hi.y);
    a[6] = O::op(a[6], hi.z);
    a[7] = O::op(a[7], hi.w);
  };
  const unsigned full = (unsigned)(len / red::kLanes);
  if (full == red::kDepth) {
#pragma unroll 4
    for (unsigned r = 0; r < red::kDepth; ++r) fold(__ldg(p + 64 * r), __ldg(p + 64 * r + 32));
  } else {
#pragma unroll 4
    for (unsigned r = 0; r < full; ++r) fold(__ldg(p + 64 * r), __ldg(p + 64 * r + 32));
    const unsigned rest = (unsigned)(len - (uint64_t)full * red::kLanes);  // 0..252, % 4 == 0
    if (rest != 0) {
      const float4 id = make_float4(O::identity(), O::identity(), O::identity(), O::identity());
      fold(4 * w < rest ? __ldg(p + 64 * full) : id,
           128 + 4 * w < rest ? __ldg(p + 64 * full + 32) : id);
    }
  }
#pragma unroll
  for (int j = 0; j < 4; ++j) a[j] = O::op(a[j], a[4 + j]);  // h = 128
#pragma unroll
  for (unsigned d = 16; d >= 1; d >>= 1) {  // h = 64, 32, 16, 8, 4
#pragma unroll
    for (int j = 0; j < 4; ++j) a[j] = O::op(a[j], __shfl_down_sync(0xFFFFFFFFu, a[j], d));
  }
  a[0] = O::op(a[0], a[2]);  // h = 2
  a[1] = O::op(a[1], a[3]);
  return O::op(a[0], a[1]);  // h = 1
}

// THE TREE's halving over the 256 lanes of a 32-column tile in a block of 256 threads: thread
// (warp w, lane l) holds lanes t = w + 8 i (i < NS) of column l in v[i], every lane t >= 8 NS the
// identity. Steps h = 4 NS .. 8 pair slots i and i + h / 8 in registers (steps h >= 8 NS would
// only add identities), h = 4, 2, 1 pair warps through sh (one barrier). Warp 0's lanes where
// take holds call done(chunk value); the caller passes a barrier before sh is written again.
template <red::Op OP, unsigned NS, class Done>
__device__ __forceinline__ void tile_halving(float (&v)[NS], float (&sh)[8][32], bool take,
                                             Done done) {
  const unsigned l = threadIdx.x % 32, w = threadIdx.x / 32;
  sh[w][l] = red::halve<OP>(v);
  __syncthreads();
  if (w == 0 && take) {
    float a[8];
#pragma unroll
    for (unsigned u = 0; u < 8; ++u) a[u] = sh[u][l];
    done(red::halve<OP>(a));
  }
}

// ONE contiguous, 16-byte aligned sequence (m % 4 == 0) of kChunk < nc <= kChunk * kSmall chunks
// (2^24 < m <= 2^29), the whole tree in one launch: warp task k writes chunk value k (chunk_vec4)
// to partials[k]; each block takes one ticket after its writers' fences; the block with the last
// ticket reduces the nc chunk values: the tree's next level (thread t is lane t of each group of
// 4096 chunk values, its 16 loads of up to 4 groups issued together, the halving in shared
// memory) and the last level (ng <= 32 values: red::small), then resets the counter. These are
// the values of the pass-by-pass evaluation: the same tree, bit for bit.
template <red::Op OP>
__global__ void __launch_bounds__(kThreads)
    fused2_kernel_vec4(const float *__restrict x, uint64_t m, uint64_t nc, float div,
                       float *partials, unsigned *counter, float *__restrict y) {
  using O = red::Ops<OP>;
  __shared__ float sh[4][kThreads];
  __shared__ float gv[red::kSmall];
  __shared__ unsigned last;
  const unsigned w = threadIdx.x & 31u;
  for (uint64_t task = (uint64_t)blockIdx.x * kWarps + (threadIdx.x >> 5); task < nc;
       task += (uint64_t)gridDim.x * kWarps) {
    const uint64_t e0 = task * red::kChunk;
    const uint64_t len = m - e0 < red::kChunk ? m - e0 : red::kChunk;
    const float v = chunk_vec4<OP>(x + e0, len);
    if (w == 0) {
      partials[task] = v;
      __threadfence();  // visible device-wide before this block's ticket says so
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) last = atomicAdd(counter, 1u) == gridDim.x - 1 ? 1u : 0u;
  __syncthreads();
  if (last == 0) return;
  __threadfence();
  const unsigned t = threadIdx.x;
  const unsigned ng = (unsigned)red::chunks_of(nc);  // 2 .. kSmall
  // The finish is the kernel's serial tail: a base pointer plus compile-time offsets, no bounds
  // tests where the batch's four groups are whole, the steps h = 16 .. 1 as warp 0's shuffles.
  for (unsigned g0 = 0; g0 < ng; g0 += 4) {
    float a[4];
#pragma unroll
    for (unsigned j = 0; j < 4; ++j) a[j] = O::identity();
    const float *pt = partials + (uint64_t)g0 * red::kChunk + t;
    if ((uint64_t)(g0 + 4) * red::kChunk <= nc) {
#pragma unroll
      for (unsigned r = 0; r < red::kDepth; ++r)
#pragma unroll
        for (unsigned j = 0; j < 4; ++j)
          a[j] = O::op(a[j], __ldcg(pt + j * red::kChunk + r * red::kLanes));
    } else {
#pragma unroll
      for (unsigned r = 0; r < red::kDepth; ++r) {
#pragma unroll
        for (unsigned j = 0; j < 4; ++j) {
          const uint64_t i = (uint64_t)(g0 + j) * red::kChunk + r * red::kLanes + t;
          if (g0 + j < ng && i < nc) a[j] = O::op(a[j], __ldcg(partials + i));
        }
      }
    }
#pragma unroll
    for (unsigned j = 0; j < 4; ++j) sh[j][t] = a[j];
    __syncthreads();
    for (unsigned h = red::kLanes / 2; h >= 32; h >>= 1) {
      if (t < h) {
#pragma unroll
        for (unsigned j = 0; j < 4; ++j) sh[j][t] = O::op(sh[j][t], sh[j][t + h]);
      }
      __syncthreads();
    }
    if (t < 32) {  // h = 16 .. 1: lane t takes lane t + h, as in shared memory
      float v[4];
#pragma unroll
      for (unsigned j = 0; j < 4; ++j) v[j] = sh[j][t];
#pragma unroll
      for (unsigned h = 16; h >= 1; h >>= 1)
#pragma unroll
        for (unsigned j = 0; j < 4; ++j)
          v[j] = O::op(v[j], __shfl_down_sync(0xFFFFFFFFu, v[j], h));
      if (t == 0)
#pragma unroll
        for (unsigned j = 0; j < 4; ++j)
          if (g0 + j < ng) gv[g0 + j] = v[j];
    }
    __syncthreads();  // sh is rewritten by the next batch; gv read below
  }
  if (t == 0) {
    const float r = red::small<OP, red::kSmall>([&](unsigned j) { return gv[j]; }, ng);
    y[0] = red::finish(r, div);
    *counter = 0;
  }
}

}  // namespace red_kernels
}  // namespace cuda
}  // namespace tlrt
