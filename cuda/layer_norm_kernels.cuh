// Device code of the fused layer-norm backward (cuda/layer_norm.cu explains the strategy and its
// costs): dx and the first levels of the column tree of dgamma / dbeta in one pass over dy and x.
// Kept apart so that the CPU emulator test (tests/unit/test_layer_norm_emu.cpp) runs this very
// source against the CPU backend bit for bit.
//
// THE COLUMN TREE (abi/tlrt_layer_norm.h, row::col_lanes): for each column, chunk k of 4096 rows
// has 256 lanes; lane t folds rows 4096 k + t + 256 r (r = 0..15) in order; the lanes are halved
// (h = 128, 64, ..., 1); the chunk values are reduced by the tree again.
//
// SCHEDULE. A block owns G lanes of one chunk: lanes t0 + S g (g = 0..G-1, S = 256 / G), so the
// first log2(G) halving steps (h = 128 .. S) pair lanes of the same block. Group g of the block
// (NT threads, one row at a time, the row in registers as in the forward) walks its lane's 16 rows
// in order r = 0..15: per row it computes dx (the row sums S(d), S(d * xhat) by the tree) and
// folds dy * xhat and dy into per-column lane accumulators held in registers next to the row
// values (thread T holds the columns of its row slots, row::dev::Layout). After the 16 rows the G
// lane values of each column meet in shared memory and are halved over g (h = 128 .. S): the block
// writes the value of lane t0 after step h = S, i.e. partial (k, t0) of an (nc, S, cols) array.
// The caller reduces it with reduce_axis over S (the steps h = S/2 .. 1: the tree of a sequence of
// S <= 256 values, one per lane, is exactly that halving) and then over the nc chunks.
// Nothing in the order of operations depends on the schedule: only who computes what.
#pragma once

#include <cstdint>

#include "core/numerics/reduce_tree.hpp"
#include "core/numerics/row_ops.hpp"
#ifndef TLRT_CUDA_EMULATION
#include "cuda/cp_async.cuh"
#endif
#include "cuda/split_row.cuh"

namespace tlrt {
namespace cuda {
namespace ln_kernels {

using row::dev::block_row_map;
using row::dev::block_row_sum;
using row::dev::Exchange;
using row::dev::kThreads;
using row::dev::Layout;
using row::dev::row_sums;

// Lane sets per chunk for the group kernel with NT threads per row: S = NT (G = 256 / NT groups).
template <unsigned NT>
constexpr unsigned kLaneSets = NT;

// The end of a fused backward's row sequence: the block's G groups hold lane values ag / ab for
// the columns L::off(T, i) of their rows; the partial rows og / ob get, per column, their sum by
// the tree's halving over the block's lanes (step h = 128 pairs g with g + G/2, ..., h = S pairs
// g = 0 with g = 1). G == 1 writes the values directly; otherwise they go through cs ([sequence]
// [g][column], 2 G kMaxCols floats) with one barrier, and the caller fences before cs is reused.
template <class L>
__device__ __forceinline__ void lanes_to_partials(const float (&ag)[L::V], const float (&ab)[L::V],
                                                  unsigned T, unsigned g, uint64_t cols, float *cs,
                                                  float *og, float *ob) {
  using O = red::Ops<red::Op::Sum>;
  constexpr unsigned G = L::kGroups, C = (unsigned)L::kMaxCols;
  if constexpr (G == 1) {
#pragma unroll
    for (unsigned i = 0; i < L::V; ++i) {
      const unsigned e = L::off(T, i);
      if (e < cols) {
        og[e] = ag[i];
        ob[e] = ab[i];
      }
    }
  } else {
#pragma unroll
    for (unsigned i = 0; i < L::V; ++i) {
      const unsigned e = L::off(T, i);
      if (e < cols) {
        cs[(0 * G + g) * C + e] = ag[i];
        cs[(1 * G + g) * C + e] = ab[i];
      }
    }
    __syncthreads();
    constexpr unsigned kSteps = G >= 8 ? 3 : G >= 4 ? 2 : 1;
    static_assert((1u << kSteps) == G, "G is 2, 4 or 8");
    for (unsigned e = threadIdx.x; e < cols; e += kThreads) {
#pragma unroll
      for (unsigned p = 0; p < 2; ++p) {
        float v[G];
#pragma unroll
        for (unsigned j = 0; j < G; ++j) v[j] = cs[(p * G + j) * C + e];
#pragma unroll
        for (unsigned step = 0; step < kSteps; ++step) {
          const unsigned h = G >> (step + 1);
#pragma unroll
          for (unsigned j = 0; j < G / 2; ++j)
            if (j < h) v[j] = O::op(v[j], v[j + h]);
        }
        (p == 0 ? og : ob)[e] = v[0];
      }
    }
  }
}

// 32 < cols <= 4096: group kernel. nblk = nc * S blocks of work (grid-stride); block q takes chunk
// k = q / S and lanes t0 + S g, t0 = q % S. pg, pb: (nblk, cols) partials (the lane value of
// lane t0 after the halving steps h >= S).
template <unsigned NT, unsigned NC, unsigned R>
__global__ void __launch_bounds__(kThreads)
    fused_group_bwd(const float *__restrict dy, const float *__restrict x,
                    const float *__restrict mean, const float *__restrict inv_std,
                    const float *__restrict gamma, uint64_t rows, uint64_t cols, float n,
                    uint64_t nblk, float *__restrict dx, float *__restrict pg,
                    float *__restrict pb) {
  using L = Layout<NT, NC, R>;
  using O = red::Ops<red::Op::Sum>;
  constexpr unsigned G = L::kGroups;
  constexpr unsigned S = red::kLanes / G;
  constexpr unsigned C = (unsigned)L::kMaxCols;
  static_assert(S == kLaneSets<NT>, "lane sets per chunk");
  __shared__ float sh[2][2 * kThreads * NC];
  // Lane values of the block's G groups for every column: [sequence][g][column].
  __shared__ float cs[2][G > 1 ? G : 1][G > 1 ? C : 1];
  Exchange<2 * kThreads * NC> ex{sh, 0};
  const unsigned T = threadIdx.x % NT;
  const unsigned g = threadIdx.x / NT;
  for (uint64_t q = blockIdx.x; q < nblk; q += gridDim.x) {
    const uint64_t k = q / S;
    const uint64_t row0 = k * red::kChunk + (q - k * S);  // group 0's row at r = 0
    float ag[L::V], ab[L::V];
#pragma unroll
    for (unsigned i = 0; i < L::V; ++i) ag[i] = ab[i] = O::identity();
    for (unsigned r = 0; r < red::kDepth; ++r) {
      const uint64_t first = row0 + (uint64_t)r * red::kLanes;
      if (first >= rows) break;  // block-uniform; later r only go further
      const uint64_t rw = first + (uint64_t)g * S;
      const bool active = rw < rows;
      const uint64_t base = active ? rw * cols : 0;
      const float mu = active ? mean[rw] : 0.0f, is = active ? inv_std[rw] : 0.0f;
      float d[L::V], xh[L::V];
#pragma unroll
      for (unsigned i = 0; i < L::V; ++i) {
        const unsigned e = L::off(T, i);
        d[i] = 0.0f;
        xh[i] = 0.0f;
        if (active && e < cols) {
          const float gy = dy[base + e];
          d[i] = row::ln_d(gy, gamma[e]);
          xh[i] = row::xhat_of(x[base + e], mu, is);
          // The lane fold of the column tree (dgamma: dy * xhat; dbeta: dy), row order r.
          ag[i] = ag[i] + gy * xh[i];
          ab[i] = ab[i] + gy;
        }
      }
      float s[2];
      row_sums<NT, NC, R, 2>([&](unsigned p, unsigned i) { return p == 0 ? d[i] : d[i] * xh[i]; },
                             cols, active, ex, s);
      const float a = row::per_col(s[0], n), b = row::per_col(s[1], n);
      if (active) {
#pragma unroll
        for (unsigned i = 0; i < L::V; ++i) {
          const unsigned e = L::off(T, i);
          if (e < cols) dx[base + e] = row::ln_bwd_out(d[i], xh[i], a, b, is);
        }
      }
    }
    float *og = pg + q * cols;
    float *ob = pb + q * cols;
    lanes_to_partials<L>(ag, ab, T, g, cols, &cs[0][0][0], og, ob);
    if constexpr (G > 1) __syncthreads();  // cs is rewritten by the next q
  }
}

// 32 < cols <= 4096, PIPELINED: the same lanes, rows, sums and partials as fused_group_bwd (so the
// same bits), but the rows of dy and x reach the block through a P-stage cp.async ring in dynamic
// shared memory instead of registers: while a group works on its row r, its rows r + 1 .. r + P - 1
// are already on the way, and the loads of a block no longer wait for its barriers. Each thread
// copies exactly the elements it later reads (4-byte copies into its own slots
// [stage][array][i][threadIdx.x]), so the ring needs no barrier: the thread's own cp.async wait
// makes its data visible to it, and a stage is refilled only after the same thread read it.
// Registers (kPipeBlocks: at most 128 with the 96 KiB rings, 80 with the shorter ones; sm_90, no
// spills): the lane accumulators (2 V) and P (mean, inv_std) pairs; gamma is re-read from L1 (as
// in fused_group_bwd: held in registers it made the compiler spill), d and xhat are recomputed
// from shared memory where needed (the same operations on the same inputs: the same bits).
// A thread's slots of one array: V, or for R == 1 only the slots i with element T + NT i < cols
// (pipe_slots), so that short rows fit deeper rings. At the end the ring's memory holds the
// block's halving over its G lanes (cs of fused_group_bwd).
template <unsigned NT, unsigned R>
__host__ __device__ inline unsigned pipe_slots(uint64_t cols) {
  constexpr unsigned V = R * (256 / NT);
  if (R > 1) return V;
  const uint64_t s = (cols + NT - 1) / NT;
  return (unsigned)(s < V ? s : V);
}
template <unsigned NT, unsigned R, unsigned P>
__host__ __device__ inline size_t pipe_smem_bytes(uint64_t cols) {
  const size_t ring = (size_t)P * 2 * pipe_slots<NT, R>(cols) * kThreads * sizeof(float);
  const size_t halving = (size_t)2 * (kThreads / NT) * (R * 256) * sizeof(float);  // cs
  return ring > halving ? ring : halving;
}

// Blocks per SM the shared memory allows (so, the register budget): rings of 16 slots per thread
// and 3 stages are 96 KiB (2 blocks), the shorter rings at most 64 KiB (3 blocks).
template <unsigned NT, unsigned R, unsigned P>
constexpr unsigned kPipeBlocks = R * (256 / NT) >= 16 && P >= 3 ? 2 : 3;

template <unsigned NT, unsigned R, unsigned P>
__global__ void __launch_bounds__(kThreads, (kPipeBlocks<NT, R, P>))
    fused_pipe_bwd(const float *__restrict dy, const float *__restrict x,
                   const float *__restrict mean, const float *__restrict inv_std,
                   const float *__restrict gamma, uint64_t rows, uint64_t cols, float n,
                   uint64_t nblk, float *__restrict dx, float *__restrict pg,
                   float *__restrict pb) {
  using L = Layout<NT, 1, R>;
  using O = red::Ops<red::Op::Sum>;
  constexpr unsigned G = L::kGroups;
  constexpr unsigned S = red::kLanes / G;
  constexpr unsigned V = L::V;
  static_assert(S == kLaneSets<NT>, "lane sets per chunk");
  static_assert(P >= 2, "a ring of at least two stages");
  __shared__ float sh[2][2 * kThreads];
  Exchange<2 * kThreads> ex{sh, 0};
  float *ring = cuda::async::dynamic_smem();
  const unsigned vs = pipe_slots<NT, R>(cols);
  const unsigned arr = vs * kThreads;  // floats of one array (dy or x) of one stage
  const unsigned T = threadIdx.x % NT;
  const unsigned g = threadIdx.x / NT;
  for (uint64_t q = blockIdx.x; q < nblk; q += gridDim.x) {
    const uint64_t k = q / S;
    const uint64_t row0 = k * red::kChunk + (q - k * S);  // group 0's row at r = 0
    // Steps r < nr of the block (block-uniform): group 0's row of step r exists.
    const uint64_t left = row0 < rows ? (rows - row0 + red::kLanes - 1) / red::kLanes : 0;
    const unsigned nr = (unsigned)(left < red::kDepth ? left : red::kDepth);
    const uint64_t grow0 = row0 + (uint64_t)g * S;  // this group's row at r = 0
    // Issues the copies of step r into stage r % P and loads its row statistics: one commit group
    // per step (empty past the end), so that wait<P - 1> in step r means "step r has landed".
    float mu[P], is[P];
    auto issue = [&](unsigned r, float &m, float &s) {
      const uint64_t rw = grow0 + (uint64_t)r * red::kLanes;
      const bool act = r < nr && rw < rows;
      if (act) {
        float *sdy = ring + (size_t)(r % P) * 2 * arr + threadIdx.x;
        float *sx = sdy + arr;
        const uint64_t base = rw * cols;
#pragma unroll
        for (unsigned i = 0; i < V; ++i) {
          const unsigned e = L::off(T, i);
          if (e < cols) {  // for R == 1: i < vs
            cuda::async::copy4(sdy + i * kThreads, dy + base + e, true);
            cuda::async::copy4(sx + i * kThreads, x + base + e, true);
          }
        }
      }
      cuda::async::commit();
      m = act ? mean[rw] : 0.0f;
      s = act ? inv_std[rw] : 0.0f;
    };
#pragma unroll
    for (unsigned j = 0; j + 1 < P; ++j) issue(j, mu[j], is[j]);
    float ag[V], ab[V];
#pragma unroll
    for (unsigned i = 0; i < V; ++i) ag[i] = ab[i] = O::identity();
    for (unsigned r = 0; r < nr; ++r) {
      // Stage (r + P - 1) % P was last read by this thread alone, in step r - 1: free to refill.
      issue(r + P - 1, mu[P - 1], is[P - 1]);
      cuda::async::wait<P - 1>();  // step r's copies have landed
      const uint64_t rw = grow0 + (uint64_t)r * red::kLanes;
      const bool active = rw < rows;
      const uint64_t base = active ? rw * cols : 0;
      const float m = mu[0], sd = is[0];
      const float *sdy = ring + (size_t)(r % P) * 2 * arr + threadIdx.x;
      const float *sx = sdy + arr;
      // The lane fold of the column tree (dgamma: dy * xhat; dbeta: dy), row order r.
#pragma unroll
      for (unsigned i = 0; i < V; ++i) {
        const unsigned e = L::off(T, i);
        if (active && e < cols) {
          const float gy = sdy[i * kThreads];
          ag[i] = ag[i] + gy * row::xhat_of(sx[i * kThreads], m, sd);
          ab[i] = ab[i] + gy;
        }
      }
      float sums[2];
      row_sums<NT, 1, R, 2>(
          [&](unsigned p, unsigned i) {
            const float d = row::ln_d(sdy[i * kThreads], gamma[L::off(T, i)]);
            return p == 0 ? d : d * row::xhat_of(sx[i * kThreads], m, sd);
          },
          cols, active, ex, sums);
      const float a = row::per_col(sums[0], n), b = row::per_col(sums[1], n);
      if (active) {
#pragma unroll
        for (unsigned i = 0; i < V; ++i) {
          const unsigned e = L::off(T, i);
          if (e < cols)
            dx[base + e] = row::ln_bwd_out(row::ln_d(sdy[i * kThreads], gamma[e]),
                                           row::xhat_of(sx[i * kThreads], m, sd), a, b, sd);
        }
      }
#pragma unroll
      for (unsigned j = 0; j + 1 < P; ++j) {
        mu[j] = mu[j + 1];
        is[j] = is[j + 1];
      }
    }
    cuda::async::wait<0>();  // (only empty groups remain: nothing lands in the ring later)
    float *og = pg + q * cols;
    float *ob = pb + q * cols;
    if constexpr (G > 1) __syncthreads();  // every thread is past its last read of the ring
    lanes_to_partials<L>(ag, ab, T, g, cols, ring, og, ob);  // the ring's memory as cs
    __syncthreads();  // the ring is refilled by the next q
  }
}

// cols <= 32, segments (W = pow2_at_least(cols) lanes per row, lane j = column j; SG = 256 / W
// segments per block): a block owns a whole chunk (S = 1); segment g owns the tree's lanes
// t = g + SG i (i < W) and walks r = 0..15, each r the rows 4096 q + t + 256 r of its W lanes, U at
// a time (loads of U rows in flight, coalesced: a warp reads runs of rows). Thread (g, j) folds
// column j of lane i into its slot i (the lane fold, in r order). Then the halving over the 256
// lanes of each column: steps h = 128 .. SG pair slots i and i + h / SG of the same thread; steps
// h = SG/2 .. 1 pair segments g and g + h through shared memory (one barrier per step). Thread j
// of segment 0 writes the chunk value of column j: pg, pb are (nc, cols), as fused_thread_bwd's.
template <unsigned W>
__global__ void __launch_bounds__(kThreads)
    fused_seg_bwd(const float *__restrict dy, const float *__restrict x,
                  const float *__restrict mean, const float *__restrict inv_std,
                  const float *__restrict gamma, uint64_t rows, unsigned cols, float n,
                  uint64_t nblk, float *__restrict dx, float *__restrict pg,
                  float *__restrict pb) {
  using O = red::Ops<red::Op::Sum>;
  constexpr unsigned SG = kThreads / W;
  constexpr unsigned U = W >= 4 ? 4 : W;  // rows per batch (divides W)
  __shared__ float cs[2][kThreads];       // [sequence][g * W + j]
  const unsigned j = threadIdx.x % W;
  const unsigned g = threadIdx.x / W;
  const bool col = j < cols;
  const float ga = col ? gamma[j] : 0.0f;
  for (uint64_t q = blockIdx.x; q < nblk; q += gridDim.x) {
    float ag[W], ab[W];
#pragma unroll
    for (unsigned i = 0; i < W; ++i) ag[i] = ab[i] = O::identity();
    for (unsigned r = 0; r < red::kDepth; ++r) {
      const uint64_t first = q * red::kChunk + (uint64_t)r * red::kLanes;
      if (first >= rows) break;  // block-uniform
#pragma unroll
      for (unsigned i0 = 0; i0 < W; i0 += U) {
        float gy[U], xv[U], mu[U], is[U];
        bool ok[U];
#pragma unroll
        for (unsigned u = 0; u < U; ++u) {
          const uint64_t rw = first + g + (uint64_t)SG * (i0 + u);
          ok[u] = rw < rows && col;
          gy[u] = ok[u] ? dy[rw * cols + j] : 0.0f;
          xv[u] = ok[u] ? x[rw * cols + j] : 0.0f;
          mu[u] = rw < rows ? mean[rw] : 0.0f;
          is[u] = rw < rows ? inv_std[rw] : 0.0f;
        }
#pragma unroll
        for (unsigned u = 0; u < U; ++u) {
          const float d = row::ln_d(gy[u], ga);
          const float xh = row::xhat_of(xv[u], mu[u], is[u]);
          if (ok[u]) {
            ag[i0 + u] = ag[i0 + u] + gy[u] * xh;
            ab[i0 + u] = ab[i0 + u] + gy[u];
          }
          const float a = row::per_col(
              row::dev::seg_sum<W>(ok[u] ? O::op(O::identity(), d) : O::identity()), n);
          const float b = row::per_col(
              row::dev::seg_sum<W>(ok[u] ? O::op(O::identity(), d * xh) : O::identity()), n);
          if (ok[u]) {
            const uint64_t rw = first + g + (uint64_t)SG * (i0 + u);
            dx[rw * cols + j] = row::ln_bwd_out(d, xh, a, b, is[u]);
          }
        }
      }
    }
    // Halving steps h = 128 .. SG inside the thread (slots i and i + h / SG).
    if constexpr (W > 1) {
      constexpr unsigned kSteps = W >= 32 ? 5 : W >= 16 ? 4 : W >= 8 ? 3 : W >= 4 ? 2 : 1;
#pragma unroll
      for (unsigned step = 0; step < kSteps; ++step)  // hi = W/2, W/4, ..., 1
#pragma unroll
        for (unsigned i = 0; i < W / 2; ++i)
          if (i < (W >> (step + 1))) {
            ag[i] = O::op(ag[i], ag[i + (W >> (step + 1))]);
            ab[i] = O::op(ab[i], ab[i + (W >> (step + 1))]);
          }
    }
    // Steps h = SG/2 .. 1 across segments.
    cs[0][threadIdx.x] = ag[0];
    cs[1][threadIdx.x] = ab[0];
    __syncthreads();
    for (unsigned h = SG / 2; h >= 1; h /= 2) {
      if (threadIdx.x < h * W) {
        cs[0][threadIdx.x] = O::op(cs[0][threadIdx.x], cs[0][threadIdx.x + h * W]);
        cs[1][threadIdx.x] = O::op(cs[1][threadIdx.x], cs[1][threadIdx.x + h * W]);
      }
      __syncthreads();
    }
    if (threadIdx.x < cols) {
      pg[q * cols + threadIdx.x] = cs[0][threadIdx.x];
      pb[q * cols + threadIdx.x] = cs[1][threadIdx.x];
    }
    __syncthreads();  // cs is rewritten by the next q
  }
}

// ---- launch plan (cols <= kFusedMaxCols) -------------------------------------------------------
// Used by cuda/layer_norm.cu and the emulator test. A launcher: launch(name, kernel, grid, args...)
// starts kernel with kThreads threads per block; launch.max_grid() is the most blocks per launch.

constexpr uint64_t kFusedMaxCols = 4096;

struct BwdArgs {
  const float *dy, *x, *mean, *inv_std, *gamma;
  uint64_t rows, cols;
  float n;  // cols rounded to float32
  float *dx;
};

// Lane sets per chunk S for this cols: the partials are (chunks_of(rows), S, cols) floats each.
inline unsigned fused_lane_sets(uint64_t cols) {
  return cols <= 32 ? 1u : cols <= 512 ? kLaneSets<32> : cols <= 1024 ? kLaneSets<64>
                         : cols <= 2048 ? kLaneSets<128> : kLaneSets<256>;
}

// Ring stages of fused_pipe_bwd: rows of 16 slots per thread (257..4096 columns) P = 3, a 96 KiB
// ring (2 blocks per SM, 2 rows per group in flight: 128 KiB per SM); up to 128 columns (<= 4
// slots) P = 6 (<= 48 KiB, 5 rows per group in flight), 129..256 columns P = 4 (<= 64 KiB).
// pipe_bytes_for: the dynamic shared memory of the ring the plan picks for cols.
inline size_t pipe_bytes_for(uint64_t cols) {
  return cols <= 128    ? pipe_smem_bytes<32, 1, 6>(cols)
         : cols <= 256  ? pipe_smem_bytes<32, 1, 4>(cols)
         : cols <= 512  ? pipe_smem_bytes<32, 2, 3>(cols)
         : cols <= 1024 ? pipe_smem_bytes<64, 4, 3>(cols)
         : cols <= 2048 ? pipe_smem_bytes<128, 8, 3>(cols)
                        : pipe_smem_bytes<256, 16, 3>(cols);
}
constexpr size_t kPipeStaticSmem = 2 * 2 * kThreads * sizeof(float);  // fused_pipe_bwd's sh

// launch.dyn(name, kernel, grid, smem_bytes, args...) starts kernel with that much dynamic shared
// memory (allowing it above 48 KiB); launch.max_smem() is the most shared memory a block may have
// (the device's opt-in limit: 227 KiB on sm_90, 163 on sm_80, 99 on sm_89). The pipelined kernel
// where its ring fits (not the 96 KiB rings on sm_89), else, or with pipelined = false, the
// register kernel fused_group_bwd (the same bits).
template <class Launch>
void fused_bwd_plan(const Launch &launch, const BwdArgs &a, float *pg, float *pb,
                    bool pipelined = true) {
  const uint64_t nblk = red::chunks_of(a.rows) * fused_lane_sets(a.cols);
  const unsigned grid = (unsigned)(nblk < launch.max_grid() ? nblk : launch.max_grid());
#define TLRT_LN_FUSED(NAME, KERNEL, COLS)                                                        \
  launch(NAME, KERNEL, grid, a.dy, a.x, a.mean, a.inv_std, a.gamma, a.rows, COLS, a.n, nblk, a.dx, \
         pg, pb)
#define TLRT_LN_PIPE(NT, R, P)                                                                   \
  launch.dyn("fused_pipe_bwd<" #NT ", " #R ", " #P ">", fused_pipe_bwd<NT, R, P>, grid,          \
             pipe_smem_bytes<NT, R, P>(a.cols), a.dy, a.x, a.mean, a.inv_std, a.gamma, a.rows,  \
             a.cols, a.n, nblk, a.dx, pg, pb)
  const unsigned c32 = (unsigned)(a.cols < 32 ? a.cols : 32);
  if (a.cols <= 32) {
    row::with_segment_width(a.cols, [&](auto w) {
      TLRT_LN_FUSED("fused_seg_bwd", fused_seg_bwd<decltype(w)::value>, c32);
    });
  } else if (pipelined && pipe_bytes_for(a.cols) + kPipeStaticSmem <= launch.max_smem()) {
    if (a.cols <= 128) TLRT_LN_PIPE(32, 1, 6);
    else if (a.cols <= 256) TLRT_LN_PIPE(32, 1, 4);
    else if (a.cols <= 512) TLRT_LN_PIPE(32, 2, 3);
    else if (a.cols <= 1024) TLRT_LN_PIPE(64, 4, 3);
    else if (a.cols <= 2048) TLRT_LN_PIPE(128, 8, 3);
    else TLRT_LN_PIPE(256, 16, 3);
  } else if (a.cols <= 256) {
    TLRT_LN_FUSED("fused_group_bwd<32, 1, 1>", (fused_group_bwd<32, 1, 1>), a.cols);
  } else if (a.cols <= 512) {
    TLRT_LN_FUSED("fused_group_bwd<32, 1, 2>", (fused_group_bwd<32, 1, 2>), a.cols);
  } else if (a.cols <= 1024) {
    TLRT_LN_FUSED("fused_group_bwd<64, 1, 4>", (fused_group_bwd<64, 1, 4>), a.cols);
  } else if (a.cols <= 2048) {
    TLRT_LN_FUSED("fused_group_bwd<128, 1, 8>", (fused_group_bwd<128, 1, 8>), a.cols);
  } else {
    TLRT_LN_FUSED("fused_group_bwd<256, 1, 16>", (fused_group_bwd<256, 1, 16>), a.cols);
  }
#undef TLRT_LN_PIPE
#undef TLRT_LN_FUSED
}

// ---- short rows (cols <= 32): a segment of W = pow2_at_least(cols) lanes per row ---------------
// As cuda/softmax_kernels.cuh's seg_fwd: lane j holds element j, warps read runs of rows
// (coalesced), each thread kSegRows rows at a time; both sums red::small<W> across the segment.
constexpr unsigned kSegRows = 4;

template <unsigned W>
__global__ void __launch_bounds__(kThreads)
    seg_fwd(const float *__restrict x, const float *__restrict gamma,
            const float *__restrict beta, uint64_t rows, unsigned cols, float n, float eps,
            float *__restrict y, float *__restrict mean, float *__restrict inv_std) {
  using O = red::Ops<red::Op::Sum>;
  constexpr unsigned RB = kThreads / W;
  constexpr unsigned U = kSegRows;
  const unsigned j = threadIdx.x % W;
  const unsigned sub = threadIdx.x / W;
  const bool col = j < cols;
  const float ga = col ? gamma[j] : 0.0f, be = col ? beta[j] : 0.0f;
  for (uint64_t first = (uint64_t)blockIdx.x * RB * U; first < rows;
       first += (uint64_t)gridDim.x * RB * U) {
    float v[U];
    bool ok[U];
#pragma unroll
    for (unsigned u = 0; u < U; ++u) {
      const uint64_t rw = first + (uint64_t)u * RB + sub;
      ok[u] = rw < rows && col;
      v[u] = ok[u] ? x[rw * cols + j] : 0.0f;
    }
#pragma unroll
    for (unsigned u = 0; u < U; ++u) {
      const float mu =
          row::per_col(row::dev::seg_sum<W>(ok[u] ? O::op(O::identity(), v[u]) : O::identity()), n);
      const float q = row::sq_dev(v[u], mu);
      const float var =
          row::per_col(row::dev::seg_sum<W>(ok[u] ? O::op(O::identity(), q) : O::identity()), n);
      const float is = row::inv_std_of(var, eps);
      if (!ok[u]) continue;  // no shuffle below
      const uint64_t rw = first + (uint64_t)u * RB + sub;
      y[rw * cols + j] = row::ln_out(row::xhat_of(v[u], mu, is), ga, be);
      if (j == 0) {
        mean[rw] = mu;
        inv_std[rw] = is;
      }
    }
  }
}

template <class Launch>
void seg_fwd_plan(const Launch &launch, const float *x, const float *gamma, const float *beta,
                  uint64_t rows, unsigned cols, float n, float eps, float *y, float *mean,
                  float *inv_std) {
  row::with_segment_width(cols, [&](auto w) {
    constexpr unsigned W = decltype(w)::value;
    launch("layer_norm seg_fwd", seg_fwd<W>,
           launch.grid_for(rows, (uint64_t)(kThreads / W) * kSegRows), x, gamma, beta, rows, cols,
           n, eps, y, mean, inv_std);
  });
}

// ---- long rows: one 256-thread block per row, all passes in one kernel -------------------------
// (row::dev::block_row_*; cols <= kBlockRowMaxCols.) Backward dx: S(d) and S(d * xhat) in one
// pass, then dx. The operations and their order are those of the DEFINITIONS (the same as the
// chunk passes they replace). (The forward's block_row_fwd gave way to split_fwd below.)

constexpr uint64_t kBlockRowMaxCols = row::dev::kBlockRowMaxChunks * red::kChunk;

__global__ void __launch_bounds__(kThreads)
    block_row_dx(const float *__restrict dy, const float *__restrict x,
                 const float *__restrict mean, const float *__restrict inv_std,
                 const float *__restrict gamma, uint64_t rows, uint64_t cols, float n,
                 float *__restrict dx) {
  TLRT_BLOCK_ROW_SHARED(sm);
  for (uint64_t rw = blockIdx.x; rw < rows; rw += gridDim.x) {
    const float *dyr = dy + rw * cols, *xr = x + rw * cols;
    float *dr = dx + rw * cols;
    const float mu = mean[rw], is = inv_std[rw];
    float s[2];
    block_row_sum<2>(
        [&](uint64_t e, float (&v)[2]) {
          const float d = row::ln_d(dyr[e], gamma[e]);
          v[0] = d;
          v[1] = d * row::xhat_of(xr[e], mu, is);
        },
        cols, sm, s);
    const float a = row::per_col(s[0], n), b = row::per_col(s[1], n);
    block_row_map<3>(
        [&](uint64_t e, float (&v)[3]) {
          v[0] = dyr[e];
          v[1] = xr[e];
          v[2] = gamma[e];
        },
        [&](uint64_t e, const float (&v)[3]) {
          dr[e] = row::ln_bwd_out(row::ln_d(v[0], v[2]), row::xhat_of(v[1], mu, is), a, b, is);
        },
        cols);
  }
}

// A launcher as above, with launch.sms() the device's multiprocessor count.
template <class Launch>
void block_row_dx_plan(const Launch &launch, const BwdArgs &a) {
  launch("layer_norm block_row_dx", block_row_dx,
         row::dev::block_row_grid(a.rows, 8 * a.cols, launch.sms()), a.dy, a.x, a.mean,
         a.inv_std, a.gamma, a.rows, a.cols, a.n, a.dx);
}

// ---- long rows held in registers: split_fwd (8192 < cols <= 65536) -----------------------------
// Q groups of 256 threads (one block, or a cluster of Q blocks) hold the row in registers
// (cuda/split_row.cuh: layout, tree sums): S(x) -> mean, S(sq_dev(x, mean)) -> inv_std, y from
// registers (gamma and beta read at the output, from L1 / L2). x is read once: 8 bytes per
// element, as the group kernels, against the old block_row_fwd's three reads of x (two from L2).
template <unsigned Q, unsigned NCL, bool CLUSTER, bool FULL>
__device__ __forceinline__ void split_fwd_body(const float *__restrict x,
                                               const float *__restrict gamma,
                                               const float *__restrict beta, uint64_t rows,
                                               uint64_t cols, float n, float eps,
                                               float *__restrict y, float *__restrict mean,
                                               float *__restrict inv_std) {
  using P = split_row::SplitPart<Q, NCL, CLUSTER>;
  using O = red::Ops<red::Op::Sum>;
  constexpr unsigned R = red::kDepth;
  constexpr unsigned V = NCL * R;
  __shared__ split_row::SplitShared<Q, NCL, CLUSTER> shared;
  split_row::SplitState<Q, NCL, CLUSTER> st(shared);
  const unsigned qT = st.q * red::kChunk + st.T;
  const unsigned lim = cols > qT ? (unsigned)cols - qT : 0u;
  const float *gr = gamma + qT, *br = beta + qT;
  for (uint64_t rw = P::first_row(); rw < rows; rw += P::row_stride()) {  // group-uniform
    const uint64_t base = rw * cols + qT;
    const float *xr = x + base;
    float *yr = y + base;
    float v[V];
#pragma unroll
    for (unsigned i = 0; i < V; ++i) {
      const unsigned o = split_row::split_off<Q>(i);
      v[i] = (FULL || o < lim) ? xr[o] : 0.0f;
    }
    float a[NCL][1];
#pragma unroll
    for (unsigned j = 0; j < NCL; ++j) a[j][0] = O::identity();
#pragma unroll
    for (unsigned i = 0; i < V; ++i)
      if (FULL || split_row::split_off<Q>(i) < lim) a[i / R][0] = O::op(a[i / R][0], v[i]);
    const float mu = row::per_col(st.tree_sum(a), n);
#pragma unroll
    for (unsigned j = 0; j < NCL; ++j) a[j][0] = O::identity();
#pragma unroll
    for (unsigned i = 0; i < V; ++i)
      if (FULL || split_row::split_off<Q>(i) < lim)
        a[i / R][0] = O::op(a[i / R][0], row::sq_dev(v[i], mu));
    const float is = row::inv_std_of(row::per_col(st.tree_sum(a), n), eps);
#pragma unroll
    for (unsigned i = 0; i < V; ++i) {
      const unsigned o = split_row::split_off<Q>(i);
      if (FULL || o < lim) yr[o] = row::ln_out(row::xhat_of(v[i], mu, is), gr[o], br[o]);
      // Keep the compiler from hoisting all gamma / beta loads above the first store (2 V more
      // live registers: spills); 8 elements' loads in flight (they hit L1 / L2).
      if (i % 8 == 7) asm volatile("" ::: "memory");
    }
    if (qT == 0) {
      mean[rw] = mu;
      inv_std[rw] = is;
    }
  }
  st.finish();
}

template <unsigned Q, unsigned NCL, bool FULL>
__global__ void __launch_bounds__(Q * kThreads, Q >= 4 ? 1 : 2)
    split_fwd(const float *__restrict x, const float *__restrict gamma,
              const float *__restrict beta, uint64_t rows, uint64_t cols, float n, float eps,
              float *__restrict y, float *__restrict mean, float *__restrict inv_std) {
  split_fwd_body<Q, NCL, false, FULL>(x, gamma, beta, rows, cols, n, eps, y, mean, inv_std);
}

#if defined(TLRT_SPLIT_HAVE_CLUSTER)
// Clusters of Q blocks of 256 threads (launched by split_row::split_launch_cluster<Q>; a body only
// for sm_90+, the host takes it only there).
template <unsigned Q, unsigned NCL, bool FULL>
__global__ void __launch_bounds__(kThreads, NCL == 4 ? 2 : 3)
    split_fwd_cluster(const float *__restrict x, const float *__restrict gamma,
                      const float *__restrict beta, uint64_t rows, uint64_t cols, float n,
                      float eps, float *__restrict y, float *__restrict mean,
                      float *__restrict inv_std) {
#if defined(TLRT_SPLIT_CLUSTER_CODE)
  split_fwd_body<Q, NCL, true, FULL>(x, gamma, beta, rows, cols, n, eps, y, mean, inv_std);
#else
  __trap();
#endif
}
#endif

// One block of Q * 256 threads per row (launch.sized(name, kernel, grid, threads, args...)).
template <unsigned Q, unsigned NCL, class Launch>
void split_fwd_plan(const Launch &launch, const float *x, const float *gamma, const float *beta,
                    uint64_t rows, uint64_t cols, float n, float eps, float *y, float *mean,
                    float *inv_std) {
  const unsigned grid = launch.grid_for(rows, 1);  // one block per row (loops past the cap)
  if (cols == split_row::SplitPart<Q, NCL, false>::kMaxCols)
    launch.sized("layer_norm split_fwd", split_fwd<Q, NCL, true>, grid, Q * kThreads, x, gamma,
                 beta, rows, cols, n, eps, y, mean, inv_std);
  else
    launch.sized("layer_norm split_fwd", split_fwd<Q, NCL, false>, grid, Q * kThreads, x, gamma,
                 beta, rows, cols, n, eps, y, mean, inv_std);
}

}  // namespace ln_kernels
}  // namespace cuda
}  // namespace tlrt
