// CUDA backend, fused attention (FlashAttention-2 in float32 SIMT): the ORDER OF OPERATIONS of
// abi/tlrt_attention.h, the same IEEE operations in the same order as stub/attention.cpp (bit for
// bit). Built with -fmad=false: every fusion is an explicit __fmaf_rn (num::fma); the division is
// __fdiv_rn; exp / log are the shared float32 functions. No atomics, no n x n buffer, everything
// on the library stream, nothing synchronises. Every kernel has 128 threads seen as 16 row groups
// (ty) x 8 lanes (tx, consecutive lanes of one warp): a thread owns RM rows ty + 16 a and, of a
// 64-wide tile, the columns tx + 8 c (c < 8); of a (., DP) matrix the columns tx + 8 c' (c' <
// DP / 8). Row statistics combine the 8 lanes with __shfl_xor 1, 2, 4. Shared-memory rows are
// padded to DP + 1 (65 for tiles) floats: every access pattern below is free of bank conflicts.
// DP (the head dimension rounded up to 32, 64, 128 or 256) is a template parameter; EXACT = (d ==
// DP) fixes the dot-product loop length at compile time, otherwise it runs to the runtime d (the
// zero padding of q, k, v beyond d never enters a dot product).
//
// fwd_kernel<DP, RM>: one block per (problem, BR = 16 RM query rows; RM = 4, or 2 when DP = 256);
// Q block in shared memory; per key tile of 64: K and V tiles in shared memory, S = Q K^T in
// registers (RM x 8 per thread, fma chains over t), online softmax (running max m, sum l,
// rescale alpha), P through shared memory, acc += P V in registers (RM x DP / 8). Skips the tiles
// above the diagonal with causal and exclusion. FLOPs 4 n^2 d per problem (2 n^2 d each for S and
// PV) + ~25 n^2 for exp; bytes: q, out once, k and v once per query block (from L2).
// Shared loads per FMA: (RM + 8) / (8 RM) in S, (RM + DP / 8) / (RM DP / 8) in PV.
// d_kernel: D[i] = sum_t dout[i, t] out[i, t], one thread per row (an fma chain, as the CPU).
// dkdv_kernel<DP, RM>: one block per (problem, BK = 16 RM keys; RM = 4, 2, 1 for DP <= 64, 128,
// 256); K, V block in shared memory; per query tile of 64 (from the first tile reaching the
// diagonal when skipping): Q, dout tiles, lse, D in shared memory; S^T and dP^T (RM x 8 per
// thread), P = exp(S - lse), dS = P (dP - D); P and dS through shared memory; dv += P^T dout,
// dk += dS^T Q in registers. FLOPs 8 n^2 d (4 with dv only: no dP, no dk).
// dq_kernel<DP, RM>: one block per (problem, 16 RM query rows); Q, dout in shared memory; per key
// tile of 64: K, V tiles; S, dP, P, dS recomputed; dS through shared memory; dq += dS K. FLOPs
// 6 n^2 d. The backward thus recomputes P twice (FA2's deterministic two-kernel form).
// Measured (H100, 2026-11-22, bench/results/2026-11-22-h100-attention.md, TF32 off): forward
// 11-19 TFLOP/s (0.40-1.73x SDPA's time), backward 6-12 TFLOP/s (1.5-6.8x); SGEMM peak 51.6.
#include "cuda/attention_kernels.cuh"

#include "core/backend/attention.hpp"
#include "core/backend/memory.hpp"
#include "cuda/cuda_common.cuh"

namespace tlrt {
namespace cuda {

namespace {

// Stream-ordered scratch from the pool, returned in stream order when this object dies.
class Scratch {
 public:
  Scratch(int dev, uint64_t n)
      : dev_(dev), bytes_(n * 4), p_(static_cast<float *>(alloc(dev, n * 4))) {}
  Scratch(const Scratch &) = delete;
  Scratch &operator=(const Scratch &) = delete;
  ~Scratch() { dealloc(dev_, p_, bytes_); }
  float *get() const { return p_; }

 private:
  int dev_;
  uint64_t bytes_;
  float *p_;
};

// The launcher of the plans in cuda/attention_kernels.cuh: the library stream of `dev`.
struct Launch {
  int dev;
  size_t smem_limit() const {
    int v = 0;
    check(cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev),
          "attention: cudaDeviceGetAttribute");
    return (size_t)v;
  }
  template <class K, class... A>
  void operator()(const char *name, K kernel, dim3 grid, unsigned threads, size_t smem,
                  A... args) const {
    check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem),
          "attention: cudaFuncSetAttribute");
    kernel<<<grid, threads, smem, stream(dev)>>>(args...);
    check_launch(name);
  }
};

}  // namespace

void attention_fwd(int dev, const attn::Problem &p, const float *q, const float *k,
                   const float *v, float *out, float *lse) {
  Launch launch{dev};
  attn_kernels::fwd_plan(launch, p, q, k, v, out, lse);
}

void attention_bwd(int dev, const attn::Problem &p, const float *q, const float *k,
                   const float *v, const float *out, const float *dout, const float *lse,
                   float *dq, float *dk, float *dv) {
  // D is needed for dS (dq, dk) only; the dv-only path reads neither out nor D.
  Scratch D(dev, (dq || dk) ? p.bh * p.n : 1);
  Launch launch{dev};
  attn_kernels::bwd_plan(launch, p, q, k, v, out, dout, lse, D.get(), dq, dk, dv);
}

}  // namespace cuda
}  // namespace tlrt
