// Long rows held in registers by Q groups of 256 threads: the groups are the quarters (halves) of
// one block, or the blocks of a thread-block cluster (sm_90, distributed shared memory). Shared by
// the softmax and layer-norm forward kernels (cuda/kernels/softmax.cuh,
// cuda/kernels/layer_norm.cuh) and, through them, by the CPU emulator tests (which run the
// one-block form: the cluster form is the same code with the groups in different blocks, reading
// the same words remotely).
//
// Layout: a row of nc <= Q * NCL chunks of 4096; group q (0..Q-1) holds chunks q + Q j (j < NCL),
// thread T of it the tree's lane T of each: elements 4096 (q + Q j) + 256 r + T, r = 0..15 (for
// fixed (j, r) a warp touches 128 contiguous bytes). Thread value index i = 16 j + r; its offset
// from the thread's base q 4096 + T is the compile-time split_off<Q>(i).
// The sum (THE TREE of core/numerics/reduce_tree.hpp): each thread folds its lanes in r order
// (the caller), split_tree_sum halves each chunk's 256 lanes (row::dev::group_halving, NT = 256,
// block barrier), stores the chunk value at cv[chunk], one group-wide barrier (cluster-wide for a
// cluster), then every thread reduces the Q * NCL chunk values by the tree's next level: lane c =
// -0 + cv[c] (a chunk past the row is the halving of identity lanes: -0, the identity), halving
// h = Q NCL / 2 .. 1 (the tree's steps h >= Q NCL only combine identities). The maximum
// (split_max) is order-free: one word per warp, a group-wide barrier, every thread folds them.
// Shared-memory reuse: the max words and the two chunk-value buffers are each rewritten only after
// a later group-wide barrier that every read of their previous contents precedes (callers
// alternate split_max and split_tree_sum, or two split_tree_sums, which use cv[0] and cv[1] in
// turn); the group_halving exchange alternates its own buffers. A cluster's blocks must end with
// split_finish (no block may leave while another reads its shared memory).
#pragma once

#include <cstdint>
#if defined(__CUDACC__) && !defined(TLRT_CUDA_EMULATION)
#include <cstdlib>
#include <utility>

#include "cuda/common/runtime.cuh"
#endif

#include "core/numerics/reduce_tree.hpp"
#include "core/numerics/row_ops.hpp"

namespace tlrt {
namespace cuda {
namespace split_row {

using row::dev::kThreads;

constexpr unsigned kSplitWarps = kThreads / 32;

// The cluster form needs sm_90 (thread-block clusters, distributed shared memory). The cluster
// kernels are declared for every architecture (no __cluster_dims__: the host launches them with a
// cluster-dimension attribute, split_launch_cluster below) and have a body only in the sm_90+
// device pass; the host takes them only on a device of compute capability >= 9
// (split_has_clusters), so an sm_80 / sm_89 build and device run the one-block form or the chunk
// passes instead (cuda/softmax.cu, cuda/layer_norm.cu).
#if defined(__CUDACC__) && !defined(TLRT_CUDA_EMULATION)
#define TLRT_SPLIT_HAVE_CLUSTER 1
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
#define TLRT_SPLIT_CLUSTER_CODE 1
#endif
#endif
#if defined(TLRT_SPLIT_CLUSTER_CODE) && defined(__CUDA_ARCH__)
__device__ __forceinline__ unsigned split_cluster_rank() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
__device__ __forceinline__ void split_cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;" ::
                   : "memory");
}
// Reads the float at the same shared-memory address as p in block `rank` of the cluster.
__device__ __forceinline__ float split_cluster_load(const float *p, unsigned rank) {
  const unsigned local = (unsigned)__cvta_generic_to_shared(p);
  unsigned remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(local), "r"(rank));
  float v;
  asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(v) : "r"(remote) : "memory");
  return v;
}
#define TLRT_SPLIT_CLUSTER_DEVICE 1
#endif

template <unsigned Q, unsigned NCL, bool CLUSTER>
struct SplitPart {
  static_assert(Q == 1 || Q == 2 || Q == 4 || Q == 8, "1, 2, 4 or 8 groups");
  static_assert(NCL == 1 || NCL == 2 || NCL == 4, "1, 2 or 4 chunks per group");
  static constexpr unsigned kChunks = Q * NCL;
  static_assert(kChunks <= 16, "at most 16 chunks (65536 columns)");
  static constexpr unsigned kBlockThreads = CLUSTER ? kThreads : Q * kThreads;
  static constexpr uint64_t kMaxCols = (uint64_t)kChunks * red::kChunk;
  __device__ __forceinline__ static unsigned group() {
#if defined(TLRT_SPLIT_CLUSTER_DEVICE)
    if constexpr (CLUSTER) return split_cluster_rank();
#endif
    return threadIdx.x / kThreads;
  }
  // Which row this block (cluster) starts with, and the stride between its rows.
  __device__ __forceinline__ static uint64_t first_row() {
    return CLUSTER ? blockIdx.x / Q : blockIdx.x;
  }
  __device__ __forceinline__ static uint64_t row_stride() {
    return CLUSTER ? gridDim.x / Q : gridDim.x;
  }
  __device__ __forceinline__ static void sync() {
#if defined(TLRT_SPLIT_CLUSTER_DEVICE)
    if constexpr (CLUSTER) {
      split_cluster_sync();
      return;
    }
#endif
    __syncthreads();
  }
  // Word i of an array whose entries group `owner` wrote (in its own block's copy, for a cluster).
  __device__ __forceinline__ static float read(const float *a, unsigned i, unsigned owner) {
#if defined(TLRT_SPLIT_CLUSTER_DEVICE)
    if constexpr (CLUSTER) return split_cluster_load(a + i, owner);
#endif
    (void)owner;
    return a[i];
  }
};


template <unsigned Q>
__device__ __forceinline__ unsigned split_off(unsigned i) {
  return Q * (i / red::kDepth) * red::kChunk + (i % red::kDepth) * red::kLanes;
}

// The shared state of a split row kernel (one per block; in a cluster each block has its copy and
// writes only its own group's words of it).
template <unsigned Q, unsigned NCL, bool CLUSTER>
struct SplitShared {
  float smax[Q * kSplitWarps];
  float cv[2][Q * NCL];
  float ex[2][(CLUSTER ? 1 : Q) * NCL * kThreads];
};

template <unsigned Q, unsigned NCL, bool CLUSTER>
struct SplitState {
  using P = SplitPart<Q, NCL, CLUSTER>;
  SplitShared<Q, NCL, CLUSTER> &sh;
  row::dev::Exchange<(CLUSTER ? 1 : Q) * NCL * kThreads> ex;
  unsigned cvbuf;
  unsigned q, T;
  __device__ __forceinline__ explicit SplitState(SplitShared<Q, NCL, CLUSTER> &s)
      : sh(s), ex{s.ex, 0}, cvbuf(0), q(P::group()), T(threadIdx.x % kThreads) {}

  // Maximum over the row (order-free) of the threads' values m, in every thread.
  __device__ __forceinline__ float max(float m) {
    m = row::dev::warp_max(m);
    if ((threadIdx.x & 31u) == 0) sh.smax[q * kSplitWarps + (threadIdx.x / 32) % kSplitWarps] = m;
    P::sync();
    float r = row::neg_inf();
#pragma unroll
    for (unsigned i = 0; i < Q * kSplitWarps; ++i)
      r = ew::max_f(r, P::read(sh.smax, i, i / kSplitWarps));
    return r;
  }

  // THE TREE sum of the row from the lane values a[j] (chunk q + Q j, after the fold), in every
  // thread.
  __device__ __forceinline__ float tree_sum(float (&a)[NCL][1]) {
    using O = red::Ops<red::Op::Sum>;
    constexpr unsigned C = Q * NCL;
    float c[NCL];
    row::dev::group_halving<red::Op::Sum, kThreads, NCL>(a, ex, c);
    float *cv = sh.cv[cvbuf];
    cvbuf ^= 1u;
    if (T == 0) {
#pragma unroll
      for (unsigned j = 0; j < NCL; ++j) cv[q + Q * j] = c[j];
    }
    P::sync();
    float b[C];
#pragma unroll
    for (unsigned k = 0; k < C; ++k) b[k] = O::op(O::identity(), P::read(cv, k, k % Q));
    // Steps h = C / 2 .. 1, counted linearly so that they unroll fully (b in registers).
    constexpr unsigned kSteps = C >= 16 ? 4 : C >= 8 ? 3 : C >= 4 ? 2 : C >= 2 ? 1 : 0;
    static_assert((1u << kSteps) == C, "a power of two");
#pragma unroll
    for (unsigned step = 0; step < kSteps; ++step) {
      const unsigned h = C >> (step + 1);
#pragma unroll
      for (unsigned k = 0; k < C / 2; ++k)
        if (k < h) b[k] = O::op(b[k], b[k + h]);
    }
    return b[0];
  }

  __device__ __forceinline__ void finish() {
    if constexpr (CLUSTER) P::sync();
  }
};

#if defined(TLRT_SPLIT_HAVE_CLUSTER)
// Host side of the cluster form: whether `dev` has thread-block clusters (compute capability >= 9;
// cached per device, no CUDA call after the first), and the launch of `kernel` as clusters of Q
// blocks of 256 threads (cudaLaunchKernelEx with the cluster-dimension attribute; grid a multiple
// of Q).
inline bool split_has_clusters(int dev) { return cc_major(dev) >= 9; }

// Launches `kernel` as clusters of Q blocks of 256 threads over `rows` rows, one cluster per row,
// grid capped at 2^31 - 1 blocks (the kernels loop). (Persistent clusters, as many as fit at once
// looping over rows, measured no faster on the H100, 2026-11-24: softmax (1024, 65536) 0.264
// against 0.262 ms, masked 0.419 against 0.406; removed.)
template <unsigned Q, class... P, class... A>
void split_launch_cluster(const char *what, void (*kernel)(P...), uint64_t rows, cudaStream_t st,
                          A... args) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(Q);
  cfg.blockDim = dim3(kThreads);
  cfg.dynamicSmemBytes = 0;
  cfg.stream = st;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = Q;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  uint64_t clusters = rows < 0x7FFFFFFFull / Q ? rows : 0x7FFFFFFFull / Q;
  if (clusters == 0) clusters = 1;
  cfg.gridDim = dim3((unsigned)(clusters * Q));
  check(cudaLaunchKernelEx(&cfg, kernel, static_cast<P>(args)...), what);
}
#endif

}  // namespace split_row
}  // namespace cuda
}  // namespace tlrt
