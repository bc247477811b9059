// Device code of the layer-norm kernels that the CPU emulator test
// (tests/unit/test_layer_norm_emu.cpp) runs bit for bit against the CPU backend: the fused backward
// (cols <= 4096) and its finish, the short-row forward, and the long-row kernels (split_fwd,
// block_row_dx). cuda/layer_norm.cu explains the strategies and their costs.
//
// THE COLUMN TREE of dgamma / dbeta (abi/tlrt_layer_norm.h, row::col_lanes): for each column,
// chunk k of 4096 rows has 256 lanes; lane t folds rows 4096 k + t + 256 r (r = 0..15) in order;
// the lanes are halved (h = 128, 64, ..., 1); the chunk values are reduced by the tree again.
// The fused backward's blocks own G lanes of one chunk, t0 + S g (g < G, S = 256 / G), so the
// steps h = 128 .. S pair lanes of one block: group g (NT threads, the row in registers as in the
// forward) walks its lane's 16 rows in order, computing dx (the row sums S(d), S(d * xhat) by the
// tree) and folding dy * xhat and dy into per-column lane accumulators; then the block halves its
// G lane values per column and writes partial (k, t0) of an (nc, S, cols) array, which the finish
// reduces (the halving over S, then the chunk level). Only who computes what depends on the
// schedule, never the order of operations.
// Last measured: bench/results/2026-11-29-h200-layer-norm-split.md
#pragma once

#include <cstdint>

#include "core/numerics/reduce_tree.hpp"
#include "core/numerics/row_ops.hpp"
#include "cuda/common/pdl.cuh"
#ifndef TLRT_CUDA_EMULATION
#include "cuda/common/cp_async.cuh"
#endif
#include "cuda/common/split_row.cuh"
#include "cuda/kernels/reduce.cuh"

namespace tlrt {
namespace cuda {
namespace ln_kernels {

using row::dev::block_row_map;
using row::dev::block_row_sum;
using row::dev::Exchange;
using row::dev::kSegRows;
using row::dev::kThreads;
using row::dev::Layout;
using row::dev::row_sums;

// Lane sets per chunk for the group kernel with NT threads per row: S = NT (G = 256 / NT groups).
template <unsigned NT>
constexpr unsigned kLaneSets = NT;

// The end of a fused backward's row sequence: the block's G groups hold lane values ag / ab for
// the columns L::off(T, i) of their rows; the partial rows og / ob get, per column, the tree's
// halving over the block's lanes (h = 128 pairs g with g + G/2, ..., h = S pairs g = 0 with 1).
// G > 1: through cs ([sequence][g][column], row stride C >= cols) with one barrier; the caller
// passes a barrier before cs is reused.
template <class L>
__device__ __forceinline__ void lanes_to_partials(const float (&ag)[L::V], const float (&ab)[L::V],
                                                  unsigned T, unsigned g, uint64_t cols, float *cs,
                                                  unsigned C, float *og, float *ob) {
  constexpr unsigned G = L::kGroups;
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
    for (unsigned e = threadIdx.x; e < cols; e += kThreads) {
#pragma unroll
      for (unsigned p = 0; p < 2; ++p) {
        float v[G];
#pragma unroll
        for (unsigned j = 0; j < G; ++j) v[j] = cs[(p * G + j) * C + e];
        (p == 0 ? og : ob)[e] = red::halve<red::Op::Sum>(v);
      }
    }
  }
}

// The register kernel (33..512 columns; 513..4096 where the ring does not fit). nblk = nc * S
// items (grid-stride); item q is chunk k = q / S, lanes t0 + S g, t0 = q % S. pg, pb: (nblk, cols)
// partials. SA: the lane accumulators in thread-private shared-memory slots acc[i][threadIdx.x]
// instead of registers (the same additions; 64 registers instead of ~120, 4 blocks per SM); acc
// and cs share one array (cs is used only after the rows, once acc is back in registers).
template <unsigned NT, unsigned NC, unsigned R, bool SA = false>
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
  // Lane values of the block's G groups for every column: [sequence][g][column]; with SA the
  // same array first holds the accumulators [2][V][kThreads].
  constexpr unsigned kCs = 2 * (G > 1 ? G : 1) * (G > 1 ? C : 1);
  constexpr unsigned kAcc = SA ? 2 * L::V * kThreads : 1;
  __shared__ float csa[kCs > kAcc ? kCs : kAcc];
  float(*cs)[G > 1 ? G : 1][G > 1 ? C : 1] =
      reinterpret_cast<float(*)[G > 1 ? G : 1][G > 1 ? C : 1]>(csa);
  // SA: slot (p, i) at acc[(p * V + i) * kThreads] (without SA csa may be 2 floats: no offset).
  float *acc = SA ? csa + threadIdx.x : csa;
  Exchange<2 * kThreads * NC> ex{sh, 0};
  const unsigned T = threadIdx.x % NT;
  const unsigned g = threadIdx.x / NT;
  for (uint64_t q = blockIdx.x; q < nblk; q += gridDim.x) {
    const uint64_t k = q / S;
    const uint64_t row0 = k * red::kChunk + (q - k * S);  // group 0's row at r = 0
    float ag[L::V], ab[L::V];
#pragma unroll
    for (unsigned i = 0; i < L::V; ++i) ag[i] = ab[i] = O::identity();
    if constexpr (SA) {
#pragma unroll
      for (unsigned i = 0; i < L::V; ++i) {
        acc[i * kThreads] = O::identity();
        acc[(L::V + i) * kThreads] = O::identity();
      }
    }
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
          if constexpr (SA) {
            acc[i * kThreads] = acc[i * kThreads] + gy * xh[i];
            acc[(L::V + i) * kThreads] = acc[(L::V + i) * kThreads] + gy;
          } else {
            ag[i] = ag[i] + gy * xh[i];
            ab[i] = ab[i] + gy;
          }
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
    if constexpr (SA) {
#pragma unroll
      for (unsigned i = 0; i < L::V; ++i) {
        ag[i] = acc[i * kThreads];
        ab[i] = acc[(L::V + i) * kThreads];
      }
      __syncthreads();  // every thread's acc read before cs (the same array) is written
    }
    lanes_to_partials<L>(ag, ab, T, g, cols, &cs[0][0][0], C, og, ob);
    if constexpr (G > 1 || SA) __syncthreads();  // cs / acc are rewritten by the next q
  }
}

// dx alone, rows in parallel (the split backward, where the fused kernel's nc * S blocks would
// leave SMs idle): a group of NT threads per row as in group_fwd, the row sums and dx exactly
// fused_group_bwd's; the column tree is left to a second pass over dy and x (lane_fold).
template <unsigned NT, unsigned NC, unsigned R>
__global__ void __launch_bounds__(kThreads)
    group_dx(const float *__restrict dy, const float *__restrict x, const float *__restrict mean,
             const float *__restrict inv_std, const float *__restrict gamma, uint64_t rows,
             uint64_t cols, float n, float *__restrict dx) {
  using L = Layout<NT, NC, R>;
  __shared__ float sh[2][2 * kThreads * NC];
  Exchange<2 * kThreads * NC> ex{sh, 0};
  const unsigned T = threadIdx.x % NT;
  const uint64_t g0 = threadIdx.x / NT;
  for (uint64_t first = (uint64_t)blockIdx.x * L::kGroups; first < rows;
       first += (uint64_t)gridDim.x * L::kGroups) {  // block-uniform
    const uint64_t rw = first + g0;
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
        d[i] = row::ln_d(dy[base + e], gamma[e]);
        xh[i] = row::xhat_of(x[base + e], mu, is);
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
}

// The ring kernel (513..4096 columns): the same lanes, rows, sums and partials as fused_group_bwd
// (so the same bits), but dy and x reach the block through a cp.async ring of kRingStages stages
// in dynamic shared memory: while a group works on row r, its next row is on the way, and the
// loads never wait for a barrier. Each thread copies the elements it later reads into its own
// slots [stage][array][i][threadIdx.x] (V = 16 per array at every width), so the ring needs no
// block barrier: a thread's cp.async wait makes its data visible to it. Registers (80 at most, 3
// blocks per SM) hold the lane accumulators and the rows' (mean, inv_std); gamma is re-read from
// L1, d and xhat recomputed from shared memory where needed (the same operations, the same bits).
// The ring runs across a block's items q = blockIdx.x + j gridDim.x (one item per block, unless
// the grid is capped): the next item's first row lands during the current item's last row and
// halving, which uses the one stage that holds nothing then.
constexpr unsigned kRingStages = 2;
constexpr unsigned kPipeBlocks = 3;  // blocks per SM: a 64 KiB ring each

template <unsigned NT, unsigned R>
__host__ __device__ constexpr size_t pipe_smem_bytes() {
  return (size_t)kRingStages * 2 * (R * (256 / NT)) * kThreads * sizeof(float);
}

// Items of the ring kernel: item q is lane set t0 = q % S of chunk k = q / S: its group-0 row at
// step r is item_row0 + 256 r.
template <unsigned S>
__device__ __forceinline__ uint64_t item_row0(uint64_t q) {
  const uint64_t k = q / S;
  return k * red::kChunk + (q - k * S);
}
// Row steps of item q (block-uniform): the steps r < 16 whose group-0 row exists.
template <unsigned S>
__device__ __forceinline__ unsigned item_steps(uint64_t q, uint64_t rows) {
  const uint64_t row0 = item_row0<S>(q);
  const uint64_t left = row0 < rows ? (rows - row0 + red::kLanes - 1) / red::kLanes : 0;
  return (unsigned)(left < red::kDepth ? left : red::kDepth);
}

// Element i of thread T is at off(0, i) + T: a per-row base pointer plus a compile-time offset.
// FULL (cols == L::kMaxCols, dy and x 16-byte aligned): no bounds tests, and the copies are 16
// bytes wide and shared by the warp: lane l copies floats 4 (l % 8) .. + 3 of element 4 j + l / 8
// of the warp's 32 slots (8 copies a step instead of 32; the same slots). A lane then reads slots
// that other lanes filled, so each step passes a __syncwarp after its wait (the warp's copies have
// landed) and one before its refill (the warp's reads of that stage are done).
template <unsigned NT, unsigned R, bool FULL = false>
__global__ void __launch_bounds__(kThreads, kPipeBlocks)
    fused_pipe_bwd(const float *__restrict dy, const float *__restrict x,
                   const float *__restrict mean, const float *__restrict inv_std,
                   const float *__restrict gamma, uint64_t rows, uint64_t cols, float n,
                   uint64_t nblk, float *__restrict dx, float *__restrict pg,
                   float *__restrict pb) {
  pdl_trigger();  // fused_bwd_finish_wide may be placed while the last blocks run (it waits)
  using L = Layout<NT, 1, R>;
  using O = red::Ops<red::Op::Sum>;
  constexpr unsigned P = kRingStages;
  constexpr unsigned G = L::kGroups;
  constexpr unsigned S = red::kLanes / G;
  constexpr unsigned V = L::V;
  static_assert(S == kLaneSets<NT>, "lane sets per chunk");
  static_assert(P >= 2, "a ring of at least two stages");
  static_assert(R >= 2, "rows of more than 256 columns: V = 16 slots per thread");
  static_assert(!FULL || (V % 4 == 0 && NT % 32 == 0), "FULL: 16-byte copies by whole warps");
  __shared__ float sh[2][2 * kThreads];
  Exchange<2 * kThreads> ex{sh, 0};
  float *ring = cuda::async::dynamic_smem();
  const unsigned arr = V * kThreads;  // floats of one array (dy or x) of one stage
  const unsigned T = threadIdx.x % NT;
  const unsigned g = threadIdx.x / NT;
  // This group's row of step r of item q.
  auto row_of = [&](uint64_t q, unsigned r) {
    return item_row0<S>(q) + (uint64_t)g * S + (uint64_t)r * red::kLanes;
  };
  // The block's items in order: position p is item blockIdx.x + p gridDim.x.
  auto item_at = [&](uint64_t p) { return blockIdx.x + p * gridDim.x; };
  // The producer runs P - 1 steps ahead of the consumer over the same sequence of steps: it is at
  // step pr of the item at position p + pd (p: the consumer's). produce() issues the copies of its
  // next step into stage st and loads the step's row statistics; one commit group per step (empty
  // past the last item), so that wait<P - 1> in a consumer step means "this step has landed".
  // (Two 32-bit counters: fewer registers.)
  unsigned pd = 0, pr = 0;
  auto produce = [&](uint64_t p, unsigned st, float &m, float &s) {
    uint64_t pq = item_at(p + pd);
    while (pq < nblk && pr >= item_steps<S>(pq, rows)) {  // block-uniform; items may be empty
      ++pd;
      pq = item_at(p + pd);
      pr = 0;
    }
    bool act = false;
    uint64_t rw = 0;
    if (pq < nblk) {
      rw = row_of(pq, pr++);
      act = rw < rows;
    }
    if (act && FULL) {
      // This lane's first copy: element l / 8 of the warp's slots (T - l: the warp's first T).
      const unsigned l = threadIdx.x % 32, c = 4 * (l % 8);
      float *sdy = ring + (size_t)st * 2 * arr + (l / 8) * kThreads + (threadIdx.x - l) + c;
      float *sx = sdy + arr;
      const uint64_t go = rw * cols + NT * (l / 8) + (T - l) + c;
      const float *gdy = dy + go, *gx = x + go;
#pragma unroll
      for (unsigned j = 0; j < V / 4; ++j) {
        cuda::async::copy16(sdy + 4 * j * kThreads, gdy + 4 * j * NT, true);
        cuda::async::copy16(sx + 4 * j * kThreads, gx + 4 * j * NT, true);
      }
    } else if (act) {
      float *sdy = ring + (size_t)st * 2 * arr + threadIdx.x;
      float *sx = sdy + arr;
      const float *gdy = dy + rw * cols + T, *gx = x + rw * cols + T;
      // Past the row's end: no branch, a copy of 0 bytes (the slot is zero-filled and never
      // read; the source address stays the row's first element).
#pragma unroll
      for (unsigned i = 0; i < V; ++i) {
        const unsigned eo = L::off(0, i);
        const bool in = eo + T < cols;
        cuda::async::copy4(sdy + i * kThreads, gdy + (in ? eo : 0u), in);
        cuda::async::copy4(sx + i * kThreads, gx + (in ? eo : 0u), in);
      }
    }
    cuda::async::commit();
    m = act ? mean[rw] : 0.0f;
    s = act ? inv_std[rw] : 0.0f;
  };
  float mu[P], is[P];
#pragma unroll
  for (unsigned j = 0; j + 1 < P; ++j) produce(0, j, mu[j], is[j]);
  unsigned cst = 0;  // the consumer's stage
  for (uint64_t p = 0;; ++p, --pd) {  // (pd >= 1 at the end of an item: see below)
    const uint64_t q = item_at(p);
    if (q >= nblk) break;
    const unsigned nr = item_steps<S>(q, rows);
    float ag[V], ab[V];
#pragma unroll
    for (unsigned i = 0; i < V; ++i) ag[i] = ab[i] = O::identity();
    for (unsigned r = 0; r < nr; ++r) {
      // Stage (cst + P - 1) % P was last read in the step before, by this thread alone (FULL: by
      // its warp): free to refill (after the halving, whose cs it held, a barrier passed).
      if constexpr (FULL) __syncwarp();  // the warp's reads of the stage to refill are done
      produce(p, cst == 0 ? P - 1 : cst - 1, mu[P - 1], is[P - 1]);
      cuda::async::wait<P - 1>();  // this step's copies have landed
      if constexpr (FULL) __syncwarp();  // ... those of every lane of the warp
      const uint64_t rw = row_of(q, r);
      const bool active = rw < rows;
      const uint64_t base = active ? rw * cols : 0;
      const float m = mu[0], sd = is[0];
      const float *sdy = ring + (size_t)cst * 2 * arr + threadIdx.x;
      const float *sx = sdy + arr;
      const float *gm = gamma + T;
      // The lane fold of the column tree (dgamma: dy * xhat; dbeta: dy), row order r.
#pragma unroll
      for (unsigned i = 0; i < V; ++i) {
        if (active && (FULL || L::off(0, i) + T < cols)) {
          const float gy = sdy[i * kThreads];
          ag[i] = ag[i] + gy * row::xhat_of(sx[i * kThreads], m, sd);
          ab[i] = ab[i] + gy;
        }
      }
      float sums[2];
      row_sums<NT, 1, R, 2, FULL>(
          [&](unsigned p, unsigned i) {
            const float d = row::ln_d(sdy[i * kThreads], gm[L::off(0, i)]);
            return p == 0 ? d : d * row::xhat_of(sx[i * kThreads], m, sd);
          },
          cols, active, ex, sums);
      const float a = row::per_col(sums[0], n), b = row::per_col(sums[1], n);
      if (active) {
        float *dxr = dx + base + T;
#pragma unroll
        for (unsigned i = 0; i < V; ++i) {
          const unsigned eo = L::off(0, i);
          if (FULL || eo + T < cols)
            dxr[eo] = row::ln_bwd_out(row::ln_d(sdy[i * kThreads], gm[eo]),
                                      row::xhat_of(sx[i * kThreads], m, sd), a, b, sd);
        }
      }
#pragma unroll
      for (unsigned j = 0; j + 1 < P; ++j) {
        mu[j] = mu[j + 1];
        is[j] = is[j + 1];
      }
      cst = cst + 1 == P ? 0 : cst + 1;
    }
    float *og = pg + q * cols;
    float *ob = pb + q * cols;
    // The stage of the step just consumed holds nothing now (the other P - 1 stages hold the
    // next item's rows, landing meanwhile): it holds the halving's cs. (The producer is P - 1 >= 1
    // steps past this item's last, or this item has no steps and the producer is at a later item
    // or past the end: so pd >= 1, and the loop's --pd keeps the producer's item.)
    float *cs = ring + (size_t)(cst == 0 ? P - 1 : cst - 1) * 2 * arr;
    if constexpr (G > 1) __syncthreads();  // every thread is past its last read of that stage
    lanes_to_partials<L>(ag, ab, T, g, cols, cs, (unsigned)cols, og, ob);
    if constexpr (G > 1) __syncthreads();  // the stage is refilled by the next step
  }
  cuda::async::wait<0>();  // (only empty groups remain: nothing lands in the ring later)
}

// cols <= 32, segments (W = pow2_at_least(cols) lanes per row, lane j = column j; SG = 256 / W
// segments per block): a block owns a whole chunk (S = 1); segment g owns the tree's lanes
// t = g + SG i (i < W) and walks r = 0..15, each r the rows 4096 q + t + 256 r of its W lanes, U at
// a time (coalesced: a warp reads runs of rows). Thread (g, j) folds column j of lane i into its
// slot i. Thread j of segment 0 writes the chunk value of column j: pg, pb are (nc, cols).
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
    // Halving steps h = 128 .. SG inside the thread (slots i and i + h / SG), then h = SG/2 .. 1
    // across segments.
    cs[0][threadIdx.x] = red::halve<red::Op::Sum>(ag);
    cs[1][threadIdx.x] = red::halve<red::Op::Sum>(ab);
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

// ---- launch plan (cols <= kFusedMaxCols): a launcher as split_row.cuh's RowLaunch -------------

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

constexpr uint64_t kRegMaxCols = 256;  // 33..256 columns: fused_group_bwd
constexpr uint64_t kSaMaxCols = 512;   // 257..512: fused_group_bwd with its SA accumulators
constexpr size_t kPipeSmem = pipe_smem_bytes<64, 4>();                // every ring width: 64 KiB
constexpr size_t kPipeStaticSmem = 2 * 2 * kThreads * sizeof(float);  // fused_pipe_bwd's sh

// 513..4096 columns: the ring kernel where its ring fits the device's shared memory per block
// (launch.max_smem(): every device of compute capability 8 or later), else the register kernel.
template <class Launch>
bool fused_bwd_ring(const Launch &launch, const BwdArgs &a) {
  return a.cols > kSaMaxCols && kPipeSmem + kPipeStaticSmem <= launch.max_smem();
}

template <class Launch>
void fused_bwd_plan(const Launch &launch, const BwdArgs &a, float *pg, float *pb) {
  const uint64_t nblk = red::chunks_of(a.rows) * fused_lane_sets(a.cols);
  const unsigned grid = (unsigned)(nblk < launch.max_grid() ? nblk : launch.max_grid());
#define TLRT_LN_FUSED(NAME, KERNEL, COLS)                                                        \
  launch(NAME, KERNEL, grid, a.dy, a.x, a.mean, a.inv_std, a.gamma, a.rows, COLS, a.n, nblk, a.dx, \
         pg, pb)
#define TLRT_LN_PIPE_F(NT, R, F)                                                                 \
  launch.dyn("fused_pipe_bwd<" #NT ", " #R ", " #F ">", fused_pipe_bwd<NT, R, F>, grid,          \
             pipe_smem_bytes<NT, R>(), a.dy, a.x, a.mean, a.inv_std, a.gamma, a.rows, a.cols,    \
             a.n, nblk, a.dx, pg, pb)
  // Rows that fill the layout (1024, 2048, 4096 columns) take the FULL form where dy and x are
  // 16-byte aligned (the library's buffers always are).
  const bool vec_ok = ((reinterpret_cast<uintptr_t>(a.dy) | reinterpret_cast<uintptr_t>(a.x)) &
                       15u) == 0;
#define TLRT_LN_PIPE(NT, R)                                                                      \
  do {                                                                                           \
    if (a.cols == Layout<NT, 1, R>::kMaxCols && vec_ok) TLRT_LN_PIPE_F(NT, R, true);             \
    else TLRT_LN_PIPE_F(NT, R, false);                                                           \
  } while (0)
  if (a.cols <= 32) {
    const unsigned c32 = (unsigned)a.cols;
    red::with_small_width(a.cols, [&](auto w) {
      TLRT_LN_FUSED("fused_seg_bwd", fused_seg_bwd<decltype(w)::value>, c32);
    });
  } else if (a.cols <= kRegMaxCols) {
    TLRT_LN_FUSED("fused_group_bwd<32, 1, 1>", (fused_group_bwd<32, 1, 1>), a.cols);
  } else if (a.cols <= kSaMaxCols) {
    TLRT_LN_FUSED("fused_group_bwd<32, 1, 2, SA>", (fused_group_bwd<32, 1, 2, true>), a.cols);
  } else if (fused_bwd_ring(launch, a)) {
    if (a.cols <= 1024) TLRT_LN_PIPE(64, 4);
    else if (a.cols <= 2048) TLRT_LN_PIPE(128, 8);
    else TLRT_LN_PIPE(256, 16);
  } else if (a.cols <= 1024) {
    TLRT_LN_FUSED("fused_group_bwd<64, 1, 4>", (fused_group_bwd<64, 1, 4>), a.cols);
  } else if (a.cols <= 2048) {
    TLRT_LN_FUSED("fused_group_bwd<128, 1, 8>", (fused_group_bwd<128, 1, 8>), a.cols);
  } else {
    TLRT_LN_FUSED("fused_group_bwd<256, 1, 16>", (fused_group_bwd<256, 1, 16>), a.cols);
  }
#undef TLRT_LN_PIPE
#undef TLRT_LN_PIPE_F
#undef TLRT_LN_FUSED
}

// The split backward (group_dx, then the column tree by lane_fold: about 20 bytes per element
// against the fused 12) where the fused launch (nc * S blocks, each walking its lanes' rows in
// sequence) has fewer than two blocks per SM. Columns 33..4096 (the segment kernel of <= 32
// columns keeps its fused form).
inline bool split_bwd_pays(uint64_t rows, uint64_t cols, unsigned sms) {
  return cols > 32 && cols <= kFusedMaxCols &&
         red::chunks_of(rows) * fused_lane_sets(cols) < 2 * (uint64_t)sms;
}

template <class Launch>
void group_dx_plan(const Launch &launch, const BwdArgs &a) {
#define TLRT_LN_DX(NT, R)                                                                        \
  launch("layer_norm group_dx<" #NT ", " #R ">", group_dx<NT, 1, R>,                              \
         launch.grid_for(a.rows, Layout<NT, 1, R>::kGroups), a.dy, a.x, a.mean, a.inv_std,        \
         a.gamma, a.rows, a.cols, a.n, a.dx)
  if (a.cols <= kRegMaxCols) TLRT_LN_DX(32, 1);
  else if (a.cols <= kSaMaxCols) TLRT_LN_DX(32, 2);
  else if (a.cols <= 1024) TLRT_LN_DX(64, 4);
  else if (a.cols <= 2048) TLRT_LN_DX(128, 8);
  else TLRT_LN_DX(256, 16);
#undef TLRT_LN_DX
}

// ---- the rest of the column tree (dgamma and dbeta): the wide finish -------------------------
// The partials (nc, S, cols) of dgamma (pg) and dbeta (pb) -> dgamma, dbeta: per column, each
// chunk's S lane values are halved by the tree (a sequence of S <= 256 values, one per lane:
// leaves -0 + v, lanes >= S the identity), then the tree of the nc <= 256 chunk values (the same
// halving over 256 lanes); nc == 1: the chunk value itself; S == 1: the partials are the chunk
// values, and fused_bwd_finish_level alone does the chunk level.
// fused_bwd_finish_wide<S, NCB>: grid (cols / 32 column tiles, 2 nc); block (x, 2 k + a) computes
// chunk k of array a (0: dgamma, 1: dbeta) for its 32 columns (thread (w, l) loads lanes w + 8 i,
// i < S / 8, all issued together), writes it to cv (2, nc, cols), fences, and takes a ticket on
// counters[a * tiles + x]; the block with the last ticket reads the nc chunk values from L2 and
// halves them, writes dgamma / dbeta and puts the counter back to 0 for the next call. Register
// slots at the chunk level: NCB = 4 for nc <= 32, 32 up to 256 chunks (the same halving).
// Bytes: the partials read once (2 nc S cols floats) + the chunk values written and read back
// (2 nc cols floats each way).
constexpr uint64_t kFinishMaxChunks = 256;          // the nc level is one halving over 256 lanes
constexpr uint64_t kWideTiles = kFusedMaxCols / 32;  // column tiles of the widest fused rows
constexpr uint64_t kWideCounters = 2 * kWideTiles;   // one ticket counter per (tile, array)
constexpr uint64_t kWideNarrowChunks = 32;           // nc <= 32: NCB = 4 slots per thread

inline bool fused_bwd_finish_wide_fits(uint64_t nc, uint64_t cols) {
  return nc >= 1 && nc <= kFinishMaxChunks && cols >= 1 && cols <= kFusedMaxCols;
}
// Floats of scratch the wide forms need for the chunk values (2, nc, cols); 0: none.
inline uint64_t fused_bwd_finish_wide_scratch(uint64_t nc, unsigned S, uint64_t cols) {
  return S > 1 && nc > 1 ? 2 * nc * cols : 0;
}

// The tree's halving over 256 lanes of a 32-column tile (red_kernels::tile_halving) where thread
// (w, l) holds lanes t = w + 8 i (i < NS) of column l, leaves done, lanes t >= 8 NS the identity:
// first the steps h = 128 .. 8 NS, which pair each held lane with an empty one (+ -0).
template <unsigned NS>
__device__ __forceinline__ float halve_lanes(float (&v)[NS], float (&s8)[8][32]) {
  using O = red::Ops<red::Op::Sum>;
  constexpr unsigned kPad = 5 - red::Log2<NS>::value;
  static_assert(NS <= 32, "NS is a power of two <= 32");
#pragma unroll
  for (unsigned i = 0; i < NS; ++i)
#pragma unroll
    for (unsigned h = kPad; h != 0; --h) v[i] = O::op(v[i], O::identity());  // h = 128 .. 8 NS
  float r = O::identity();  // warp 0 gets the value
  red_kernels::tile_halving<red::Op::Sum>(v, s8, true, [&](float x) { r = x; });
  return r;
}

// The chunk level (2 <= nc <= 8 NCB chunk values, value t of this thread's column at c[t * cols],
// read through L2: other blocks of this launch may have just written them): the leaves -0 + v,
// the identity past nc, then the halving over 256 lanes. Returns the result in warp 0.
template <unsigned NCB>
__device__ __forceinline__ float chunk_level(const float *c, uint64_t cols, uint64_t nc, bool col,
                                             float (&s8)[8][32]) {
  using O = red::Ops<red::Op::Sum>;
  const unsigned w = threadIdx.x / 32;
  const float id = O::identity();
  float u[NCB];
#pragma unroll
  for (unsigned i = 0; i < NCB; ++i) {
    const uint64_t t = w + 8 * i;
    u[i] = col && t < nc ? __ldcg(c + t * cols) : id;
  }
#pragma unroll
  for (unsigned i = 0; i < NCB; ++i) u[i] = w + 8 * i < nc ? O::op(id, u[i]) : id;
  return halve_lanes<NCB>(u, s8);
}

// The chunk level alone, grid (cols / 32, 2): g, b are (nc, cols) chunk values of dgamma and
// dbeta (the partials for S == 1). nc == 1: the chunk value itself.
template <unsigned NCB>
__global__ void __launch_bounds__(kThreads)
    fused_bwd_finish_level(const float *g, const float *b, uint64_t nc, uint64_t cols,
                           float *__restrict dgamma, float *__restrict dbeta) {
  __shared__ float s8[8][32];
  const unsigned l = threadIdx.x % 32, w = threadIdx.x / 32;
  const uint64_t j = (uint64_t)blockIdx.x * 32 + l;
  const bool col = j < cols;
  float *out = blockIdx.y == 0 ? dgamma : dbeta;
  const float *c = (blockIdx.y == 0 ? g : b) + (col ? j : 0);
  if (nc == 1) {
    if (w == 0 && col) out[j] = c[0];
    return;
  }
  const float r = chunk_level<NCB>(c, cols, nc, col, s8);
  if (w == 0 && col) out[j] = r;
}

template <unsigned S, unsigned NCB>
__global__ void __launch_bounds__(kThreads)
    fused_bwd_finish_wide(const float *__restrict pg, const float *__restrict pb, uint64_t nc,
                          uint64_t cols, float *cv, unsigned *counters, float *__restrict dgamma,
                          float *__restrict dbeta) {
  pdl_wait();  // launched dependent on the ring / group kernel that writes pg and pb
  using O = red::Ops<red::Op::Sum>;
  static_assert(S >= 8 && S <= 256 && (S & (S - 1)) == 0, "lane sets");
  constexpr unsigned LW = S / 8;  // lanes per thread
  __shared__ float s8[8][32];
  __shared__ unsigned last;
  const unsigned l = threadIdx.x % 32, w = threadIdx.x / 32;
  const unsigned a = blockIdx.y & 1u;
  const uint64_t k = blockIdx.y >> 1;
  const uint64_t j = (uint64_t)blockIdx.x * 32 + l;
  const bool col = j < cols;
  const float id = O::identity();
  const float *p = (a == 0 ? pg : pb) + k * S * cols + (col ? j : 0);
  float v[LW];
#pragma unroll
  for (unsigned i = 0; i < LW; ++i) v[i] = col ? p[(uint64_t)(w + 8 * i) * cols] : id;
#pragma unroll
  for (unsigned i = 0; i < LW; ++i) v[i] = O::op(id, v[i]);  // the leaves (lane t < S)
  const float ck = halve_lanes<LW>(v, s8);                    // chunk k's value, in warp 0
  float *out = a == 0 ? dgamma : dbeta;
  if (nc == 1) {  // the chunk value is the result
    if (w == 0 && col) out[j] = ck;
    return;
  }
  float *ca = cv + a * nc * cols;  // this array's chunk values (nc, cols)
  if (w == 0 && col) ca[k * cols + j] = ck;
  if (w == 0) __threadfence();      // the value is visible device-wide before the ticket says so
  unsigned *ctr = counters + a * gridDim.x + blockIdx.x;
  __syncthreads();
  if (threadIdx.x == 0) last = atomicAdd(ctr, 1u) == (unsigned)(nc - 1);
  __syncthreads();
  if (!last) return;  // block-uniform
  __threadfence();    // the other blocks' chunk values are read after their tickets
  const float r = chunk_level<NCB>(ca + (col ? j : 0), cols, nc, col, s8);
  if (w == 0 && col) out[j] = r;
  if (threadIdx.x == 0) *ctr = 0;  // for the next call (stream order)
}

// The wide finish: counters (kWideCounters, all zero; left zero), cv:
// fused_bwd_finish_wide_scratch(nc, S, cols) floats. Needs fused_bwd_finish_wide_fits(nc, cols).
// launch.grid2(name, kernel, dim3 grid, args...) starts a kernel.
template <class Launch>
void fused_bwd_finish_wide_plan(const Launch &launch, const float *pg, const float *pb,
                                uint64_t nc, unsigned S, uint64_t cols, float *cv,
                                unsigned *counters, float *dgamma, float *dbeta) {
  const unsigned tiles = (unsigned)((cols + 31) / 32);
  const bool narrow = nc <= kWideNarrowChunks;
  auto level = [&](const float *g, const float *b) {
    if (narrow)
      launch.grid2("fused_bwd_finish_level<4>", fused_bwd_finish_level<4>, dim3(tiles, 2), g, b,
                   nc, cols, dgamma, dbeta);
    else
      launch.grid2("fused_bwd_finish_level<32>", fused_bwd_finish_level<32>, dim3(tiles, 2), g,
                   b, nc, cols, dgamma, dbeta);
  };
  if (S == 1) {  // the partials are the chunk values
    level(pg, pb);
    return;
  }
  const dim3 grid(tiles, (unsigned)(2 * nc));
#define TLRT_LN_WIDE(SV, NV)                                                                     \
  launch.grid2_dependent("fused_bwd_finish_wide<" #SV ", " #NV ">",                            \
                         fused_bwd_finish_wide<SV, NV>, grid, pg, pb, nc, cols, cv, counters,    \
                         dgamma, dbeta)
#define TLRT_LN_WIDE_S(SV)                      \
  do {                                          \
    if (narrow) TLRT_LN_WIDE(SV, 4);            \
    else TLRT_LN_WIDE(SV, 32);                  \
  } while (0)
  switch (S) {
    case 32: TLRT_LN_WIDE_S(32); break;
    case 64: TLRT_LN_WIDE_S(64); break;
    case 128: TLRT_LN_WIDE_S(128); break;
    default: TLRT_LN_WIDE_S(256); break;
  }
#undef TLRT_LN_WIDE_S
#undef TLRT_LN_WIDE
}

// ---- short rows (cols <= 32): a segment of W = pow2_at_least(cols) lanes per row ---------------
// As cuda/kernels/softmax.cuh's seg_fwd: lane j holds element j, warps read runs of rows
// (coalesced), each thread kSegRows rows at a time; both sums red::small<W> across the segment.

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
  red::with_small_width(cols, [&](auto w) {
    constexpr unsigned W = decltype(w)::value;
    launch("layer_norm seg_fwd", seg_fwd<W>,
           launch.grid_for(rows, (uint64_t)(kThreads / W) * kSegRows), x, gamma, beta, rows, cols,
           n, eps, y, mean, inv_std);
  });
}

// ---- long rows: one 256-thread block per row (row::dev::block_row_*) ---------------------------
// Backward dx: S(d) and S(d * xhat) in one pass, then dx (the row's second read from L2).

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

template <class Launch>
void block_row_dx_plan(const Launch &launch, const BwdArgs &a) {
  launch("layer_norm block_row_dx", block_row_dx,
         row::dev::block_row_grid(a.rows, 8 * a.cols, launch.sms()), a.dy, a.x, a.mean,
         a.inv_std, a.gamma, a.rows, a.cols, a.n, a.dx);
}

// ---- long rows held in registers: split_fwd (8192 < cols <= 65536) -----------------------------
// Q groups of 256 threads (one block, or a cluster of Q blocks) hold the row in registers
// (cuda/common/split_row.cuh): S(x) -> mean, S(sq_dev(x, mean)) -> inv_std, y from registers
// (gamma and beta read at the output, from L1 / L2).
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
// Clusters of Q blocks of 256 threads (split_row::split_launch_cluster).
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
  const unsigned grid = launch.grid_for(rows, 1);
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
