// CUDA row machinery shared by the softmax and layer-norm kernels (cuda/kernels/softmax.cuh,
// cuda/kernels/layer_norm.cuh; the CPU emulator tests run the one-block form): a long row held in
// registers by Q groups of 256 threads, and the host launcher of the row-kernel plans.
//
// The groups are the quarters (halves) of one block, or the blocks of a thread-block cluster
// (sm_90, distributed shared memory): the same code, the cluster form reading the same words
// remotely. Layout: a row of nc <= Q * NCL chunks of 4096; group q holds chunks q + Q j (j < NCL),
// thread T of it the tree's lane T of each: elements 4096 (q + Q j) + 256 r + T, r = 0..15 (for
// fixed (j, r) a warp touches 128 contiguous bytes). Thread value index i = 16 j + r sits at the
// compile-time offset split_off<Q>(i) from the thread's base q 4096 + T.
// The sum (THE TREE of core/numerics/reduce_tree.hpp): each thread folds its lanes in r order
// (the caller), tree_sum halves each chunk's 256 lanes (row::dev::group_halving, block barrier),
// stores the chunk value, passes one group-wide barrier (cluster-wide for a cluster), and every
// thread reduces the Q * NCL chunk values by the tree's next level (lane c = -0 + cv[c]; a chunk
// past the row is -0, the identity). The maximum is order-free: one word per warp, a group-wide
// barrier, every thread folds them. In a cluster the words live in the blocks' shared memories:
// after the cluster barrier thread i of each block loads word i remotely into a local copy (all
// loads in flight at once), a block barrier, then every thread folds the local copy (reading the
// remote words in every thread serialised them, two loads in flight per thread).
// Shared memory is rewritten only after a group-wide barrier that every read of its previous
// contents precedes (callers alternate max and tree_sum, or two tree_sums, which use cv[0] and
// cv[1] in turn; the local copies are rewritten after the next cluster barrier, which every
// block's reads of them precede). A cluster's blocks end with finish(): none may leave while
// another reads it.
#pragma once

#include <cstdint>
#if defined(__CUDACC__) && !defined(TLRT_CUDA_EMULATION)
#include <mutex>
#include <set>
#include <utility>

#include "cuda/common/launch.cuh"
#include "cuda/common/runtime.cuh"
#endif

#include "core/numerics/reduce_tree.hpp"
#include "core/numerics/row_ops.hpp"

namespace tlrt {
namespace cuda {
namespace split_row {

using row::dev::kThreads;

constexpr unsigned kSplitWarps = kThreads / 32;

// The cluster kernels are declared for every architecture (launched with a cluster-dimension
// attribute) and have a body only in the sm_90+ device pass; the host takes them only where
// split_has_clusters(dev).
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

// The shared state of a split row kernel (in a cluster each block writes only its own words).
template <unsigned Q, unsigned NCL, bool CLUSTER>
struct SplitShared {
  float smax[Q * kSplitWarps];
  float cv[2][Q * NCL];
  float ex[2][(CLUSTER ? 1 : Q) * NCL * kThreads];
  // A cluster block's local copies of the words of smax and cv (one remote load per thread).
  float lmax[CLUSTER ? Q * kSplitWarps : 1];
  float lcv[CLUSTER ? Q * NCL : 1];
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
    if constexpr (CLUSTER) {
      if (T < Q * kSplitWarps) sh.lmax[T] = P::read(sh.smax, T, T / kSplitWarps);
      __syncthreads();
#pragma unroll
      for (unsigned i = 0; i < Q * kSplitWarps; ++i) r = ew::max_f(r, sh.lmax[i]);
    } else {
#pragma unroll
      for (unsigned i = 0; i < Q * kSplitWarps; ++i) r = ew::max_f(r, sh.smax[i]);
    }
    return r;
  }

  // THE TREE sum of the row from the lane values a[j] (chunk q + Q j), in every thread.
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
    if constexpr (CLUSTER) {
      if (T < C) sh.lcv[T] = P::read(cv, T, T % Q);
      __syncthreads();
#pragma unroll
      for (unsigned k = 0; k < C; ++k) b[k] = O::op(O::identity(), sh.lcv[k]);
    } else {
#pragma unroll
      for (unsigned k = 0; k < C; ++k) b[k] = O::op(O::identity(), cv[k]);
    }
    return red::halve<red::Op::Sum>(b);
  }

  __device__ __forceinline__ void finish() {
    if constexpr (CLUSTER) P::sync();
  }
};

#if defined(TLRT_SPLIT_HAVE_CLUSTER)
// ---- host side ----------------------------------------------------------------------------------
// Thread-block clusters: compute capability >= 9 (cached per device).
inline bool split_has_clusters(int dev) { return cc_major(dev) >= 9; }

// Clusters of Q blocks of 256 threads, one per row, grid capped (the kernels loop over rows).
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
  uint64_t clusters = rows < kMaxGrid / Q ? rows : kMaxGrid / Q;
  if (clusters == 0) clusters = 1;
  cfg.gridDim = dim3((unsigned)(clusters * Q));
  check(cudaLaunchKernelEx(&cfg, kernel, static_cast<P>(args)...), what);
}

// A FULL / partial kernel pair of the split form: FULL where the row fills the Q * NCL chunks.
template <unsigned Q, unsigned NCL, class... P, class... A>
void split_launch_cluster(const char *what, void (*full)(P...), void (*part)(P...),
                          uint64_t rows, uint64_t cols, cudaStream_t st, A... args) {
  split_launch_cluster<Q>(what, cols == SplitPart<Q, NCL, true>::kMaxCols ? full : part, rows, st,
                          args...);
}
#endif

}  // namespace split_row

#if defined(TLRT_SPLIT_HAVE_CLUSTER)
// The launcher the row-kernel plans of cuda/kernels/softmax.cuh and cuda/kernels/layer_norm.cuh
// take (the emulator tests pass their own with the same members), on the library stream of dev.
struct RowLaunch {
  int dev;
  cudaStream_t st;
  uint64_t max_grid() const { return kMaxGrid; }
  unsigned sms() const { return (unsigned)sm_count(dev); }
  size_t max_smem() const { return smem_optin(dev); }
  unsigned grid_for(uint64_t items, uint64_t per_block) const { return blocks(items, per_block); }
  template <class K, class... A>
  void operator()(const char *name, K kernel, unsigned grid, A... args) const {
    kernel<<<grid, row::dev::kThreads, 0, st>>>(args...);
    check_launch(name);
  }
  template <class K, class... A>
  void sized(const char *name, K kernel, unsigned grid, unsigned threads, A... args) const {
    kernel<<<grid, threads, 0, st>>>(args...);
    check_launch(name);
  }
  template <class K, class... A>
  void grid2(const char *name, K kernel, dim3 grid, A... args) const {
    kernel<<<grid, row::dev::kThreads, 0, st>>>(args...);
    check_launch(name);
  }
  // grid2 as a programmatic dependent launch (the kernel calls pdl_wait first).
  template <class K, class... A>
  void grid2_dependent(const char *name, K kernel, dim3 grid, A... args) const {
    launch_dependent(dev, name, kernel, grid, row::dev::kThreads, 0, st, args...);
  }
  // With smem bytes of dynamic shared memory: the kernel's limit is raised to the device's opt-in
  // maximum and shared memory preferred in the carveout, once per (kernel, device).
  template <class K, class... A>
  void dyn(const char *name, K kernel, unsigned grid, size_t smem, A... args) const {
    allow_smem(dev, reinterpret_cast<const void *>(kernel), name);
    kernel<<<grid, row::dev::kThreads, smem, st>>>(args...);
    check_launch(name);
  }
  static void allow_smem(int dev, const void *kernel, const char *name) {
    static std::mutex mu;
    static std::set<std::pair<const void *, int>> done;
    std::lock_guard<std::mutex> lock(mu);
    if (!done.insert({kernel, dev}).second) return;
    // The limit counts dynamic memory only: the opt-in maximum less the kernel's static shared
    // memory (the whole opt-in maximum is cudaErrorInvalidValue).
    const int most = (int)smem_optin(dev);
    cudaFuncAttributes fa{};
    check(cudaFuncGetAttributes(&fa, kernel), name);
    check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               most - (int)fa.sharedSizeBytes),
          name);
    check(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                               (int)cudaSharedmemCarveoutMaxShared),
          name);
  }
};
#endif

}  // namespace cuda
}  // namespace tlrt
