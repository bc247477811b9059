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
#include "cuda/common/pdl.cuh"
#ifndef TLRT_CUDA_EMULATION
#include "cuda/common/cp_async.cuh"
#endif
#include "cuda/common/split_row.cuh"

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
// [g][column], row stride C >= cols: 2 G C floats) with one barrier, and the caller fences before
// cs is reused.
template <class L>
__device__ __forceinline__ void lanes_to_partials(const float (&ag)[L::V], const float (&ab)[L::V],
                                                  unsigned T, unsigned g, uint64_t cols, float *cs,
                                                  unsigned C, float *og, float *ob) {
  using O = red::Ops<red::Op::Sum>;
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
// SA (session 10): the lane accumulators in SHARED memory instead of registers (thread-private
// slots acc[i][threadIdx.x], conflict-free; the same additions in the same order), so that the
// kernel needs ~2 V registers fewer (sm_90: 118 / 128 / 120 / 108 -> 64 at 512 / 1024 / 2048 /
// 4096 columns, no spills: 4 blocks per SM instead of 2-3, closer to the rows in flight of the
// softmax backward's group kernel, 0.99 of copy bandwidth on the same 12 bytes per element); acc
// and cs share one array (cs is used only after the rows, once acc is back in registers).
// PREDICTION: at 1024 columns like the ring kernel or better (~0.30-0.31 ms whole op on the H100).
// MEASURED (H200, 2026-11-27, bench/softmax.py, whole op with the old finish, ms, against the ring
// kernel): (131072, 512) 0.248 / 0.271, (65536, 1024) 0.313 / 0.274, (32768, 2048) 0.275 / 0.282,
// (16384, 4096) 0.301 / 0.291: better at 512 columns (where the ring holds few rows of 2 KB),
// worse at 1024 and 4096. So BwdPlan uses it at 257..512 columns only. H100 (same day, whole op
// with the wide finish, against the ring kernel): (131072, 512) 0.306 / 0.317 ms (0.88 / 0.84 of
// copy bandwidth), (65536, 1024) and (16384, 4096) unchanged (the ring kernel: 0.324 / 0.345).
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

// 256 < cols <= 4096, PIPELINED: the same lanes, rows, sums and partials as fused_group_bwd (so the
// same bits), but the rows of dy and x reach the block through a P-stage cp.async ring in dynamic
// shared memory instead of registers: while a group works on its row r, its next P - 1 rows are
// already on the way, and the loads of a block no longer wait for its barriers. Each thread
// copies exactly the elements it later reads (4-byte copies into its own slots
// [stage][array][i][threadIdx.x]), so the ring needs no barrier: the thread's own cp.async wait
// makes its data visible to it, and a stage is refilled only after the same thread read it.
// Registers (kPipeBlocks; sm_90, -Xptxas -v, no spills): P = 2 (64 KiB ring, 3 blocks per SM):
// 79-80; P = 3 (96 KiB, 2 blocks): 80-90, 86 at 4096 columns. (A variant that merged lane sets
// t0, t0 + 128 in one block at 2049..4096 columns, M = 2, needed 122-126 registers, 2 blocks per
// SM, and was never faster: 0.348 against 0.350 ms whole op at (16384, 4096), H100 2026-11-24;
// removed in session 8.) They hold the lane accumulators (2 V) and P (mean, inv_std) pairs; gamma
// is re-read from L1 (as in fused_group_bwd: held in registers it made the compiler spill), d and
// xhat are recomputed from shared memory where needed (the same operations on the same inputs:
// the same bits). A thread's slots of one array: V = 16 at every width.
// ONE RING ACROSS A BLOCK'S ITEMS: a block takes the items (lane sets) q = blockIdx.x + j
// gridDim.x, and the ring runs over the concatenation of
// their row steps: the first rows of the next item are in flight during the current item's last
// rows and halving. The halving at the end of an item uses the one stage that holds nothing then
// (the stage of the step just consumed: the other P - 1 hold the next item's rows): cs with row
// stride cols fits in it (2 G cols <= 2 V 256 floats). The library launches one block per item:
// a persistent grid of kPipeBlocks blocks per SM looping over items measured
// slower at every width (H100, 2026-11-24, kernel alone, P = 3: (65536, 1024) 0.3271 against
// 0.3240 ms, (16384, 4096) 0.3385 against 0.3358, (32768, 2048) 0.3341 / 0.3293, (65836, 1000)
// 0.3460 / 0.3368; P = 2: 0.3508 / 0.3140 at 1024 columns, 0.3646 / 0.3271 at 4096) and was
// removed; the loop stays for grids capped at launch.max_grid().
template <unsigned NT, unsigned R, unsigned P>
__host__ __device__ constexpr size_t pipe_smem_bytes() {
  return (size_t)P * 2 * (R * (256 / NT)) * kThreads * sizeof(float);
}

// Blocks per SM the shared memory allows (so, the register budget): 3 stages of 16 slots per
// thread are 96 KiB (2 blocks), 2 stages 64 KiB (3 blocks).
template <unsigned NT, unsigned R, unsigned P>
constexpr unsigned kPipeBlocks = P >= 3 ? 2 : 3;

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

// FULL: cols == L::kMaxCols (512, 1024, 2048 or 4096): no element of the layout is past the row,
// so the per-element bounds tests go (the same operations on the same elements: the same bits).
// Element i of thread T is off(0, i) + T: every access is a per-row base pointer plus a
// compile-time offset (session 15: ptxas had rebuilt the row index and both addresses for every
// copy of produce(), ~28 instructions a copy pair, ~600 of the ~1300 of a row step at 1024
// columns; see cuda/layer_norm.cu).
// FULL also asks dy and x to be 16-byte aligned: its copies are then 16 bytes wide and shared by
// the warp. A warp's 32 slots of element i hold 32 consecutive floats of its group's row, so lane
// l copies floats 4 (l % 8) .. + 3 of element 4 j + l / 8 (j < V / 4): 8 copies a step instead
// of 32. The slots and what the consumer reads from them are unchanged (the same bits); a lane
// now reads slots that other lanes filled, so each step passes a __syncwarp after its wait (the
// copies landed for the whole warp) and one before its refill (the warp's reads of that stage
// are done). Session 17 (H100, whole op): (65536, 1024) 0.318 -> 0.300 ms, (16384, 4096) 0.344
// -> 0.316, (32768, 2048) 0.328 -> 0.303 (cuda/layer_norm.cu has the why).
template <unsigned NT, unsigned R, unsigned P, bool FULL = false>
__global__ void __launch_bounds__(kThreads, (kPipeBlocks<NT, R, P>))
    fused_pipe_bwd(const float *__restrict dy, const float *__restrict x,
                   const float *__restrict mean, const float *__restrict inv_std,
                   const float *__restrict gamma, uint64_t rows, uint64_t cols, float n,
                   uint64_t nblk, float *__restrict dx, float *__restrict pg,
                   float *__restrict pb) {
  pdl_trigger();  // fused_bwd_finish_wide may be placed while the last blocks run (it waits)
  using L = Layout<NT, 1, R>;
  using O = red::Ops<red::Op::Sum>;
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

// The plan (cuda/layer_norm.cu uses the defaults). Measured on the H100 (2026-11-24,
// bench/ln_bwd_probe.cu, kernel alone; copy 0.1799 ms):
// - 33..256 columns: the register kernel fused_group_bwd ((262144, 256) 0.2898 ms against the
//   ring's 0.3029; at 64 columns 0.4753 against 0.6476: short rows are bound by the instructions
//   per row, which the ring adds to, not by loads in flight). No ring kernel for them.
// - 257..4096 columns: the ring kernel with P = 2 stages (64 KiB, 3 blocks per SM), one block
//   per item: (65536, 1024) 0.3140 ms (0.859 of copy bandwidth) against 0.3240 with P = 3 (96
//   KiB, 2 blocks per SM) and 0.3584 for the register kernel; (16384, 4096) 0.3271 against
//   0.3358 (P = 3) and 0.4814; P = 4 was slower (0.4067 / 0.56). 512 and 2048 columns were
//   timed at P = 3 only (0.3033, 0.3293): P = 2 there is the guess from 1024 and 4096 (the same
//   16 slots per thread, the same occupancy); the library's whole op measured 2 against 3 stages:
//   0.337 / 0.347 ms at 2048, 0.324 / 0.321 at 512 columns.
// - (lane sets merged in pairs at 2049..4096 columns, M = 2: 0.348 against 0.350 ms whole op at
//   (16384, 4096), within noise; never dispatched by the library, removed in session 8.)
// pipelined = false: the register kernel at every width (the probe and the emulator test).
struct BwdPlan {
  bool pipelined = true;
  unsigned stages = 2;    // 2 or 3
  bool smem_acc = true;   // 257..512 columns: the register kernel with its SA accumulators
};

constexpr uint64_t kRegMaxCols = 256;  // 33..256 columns: the register kernel
constexpr uint64_t kSaMaxCols = 512;   // 257..512 with BwdPlan::smem_acc: fused_group_bwd's SA

// The ring's dynamic shared memory for the plan's stages (the same for every ring width).
inline size_t pipe_bytes_for(const BwdPlan &plan) {
  return plan.stages >= 3 ? pipe_smem_bytes<64, 4, 3>() : pipe_smem_bytes<64, 4, 2>();
}
constexpr size_t kPipeStaticSmem = 2 * 2 * kThreads * sizeof(float);  // fused_pipe_bwd's sh

// launch.dyn(name, kernel, grid, smem_bytes, args...) starts kernel with that much dynamic shared
// memory (allowing it above 48 KiB); launch.max_smem() is the most shared memory a block may have
// (the device's opt-in limit: 227 KiB on sm_90, 163 on sm_80, 99 on sm_89: the 64 KiB rings fit
// on all of them, the 96 KiB ones not on sm_89). The pipelined kernel where the plan allows it and
// its ring fits, else the register kernel fused_group_bwd (the same bits).
template <class Launch>
bool fused_bwd_ring(const Launch &launch, const BwdArgs &a, const BwdPlan &plan) {
  return a.cols > (plan.smem_acc ? kSaMaxCols : kRegMaxCols) && plan.pipelined &&
         pipe_bytes_for(plan) + kPipeStaticSmem <= launch.max_smem();
}
template <class Launch>
void fused_bwd_plan(const Launch &launch, const BwdArgs &a, float *pg, float *pb,
                    const BwdPlan &plan = BwdPlan{}) {
  const uint64_t nblk = red::chunks_of(a.rows) * fused_lane_sets(a.cols);
  const unsigned grid = (unsigned)(nblk < launch.max_grid() ? nblk : launch.max_grid());
#define TLRT_LN_FUSED(NAME, KERNEL, COLS)                                                        \
  launch(NAME, KERNEL, grid, a.dy, a.x, a.mean, a.inv_std, a.gamma, a.rows, COLS, a.n, nblk, a.dx, \
         pg, pb)
  // The ring kernel: a block per item.
#define TLRT_LN_PIPE_F(NT, R, P, F)                                                              \
  launch.dyn("fused_pipe_bwd<" #NT ", " #R ", " #P ", " #F ">", fused_pipe_bwd<NT, R, P, F>,     \
             grid, pipe_smem_bytes<NT, R, P>(), a.dy, a.x, a.mean, a.inv_std, a.gamma, a.rows,   \
             a.cols, a.n, nblk, a.dx, pg, pb)
  // Rows that fill the layout (512, 1024, 2048, 4096 columns) take the FULL form, with its
  // 16-byte copies, where dy and x are 16-byte aligned (the library's buffers always are).
  const bool vec_ok = ((reinterpret_cast<uintptr_t>(a.dy) | reinterpret_cast<uintptr_t>(a.x)) &
                       15u) == 0;
#define TLRT_LN_PIPE(NT, R, P)                                                                   \
  do {                                                                                           \
    if (a.cols == Layout<NT, 1, R>::kMaxCols && vec_ok) TLRT_LN_PIPE_F(NT, R, P, true);          \
    else TLRT_LN_PIPE_F(NT, R, P, false);                                                        \
  } while (0)
#define TLRT_LN_PIPE_P(NT, R)                                                                    \
  do {                                                                                           \
    if (plan.stages >= 3) TLRT_LN_PIPE(NT, R, 3);                                                \
    else TLRT_LN_PIPE(NT, R, 2);                                                                 \
  } while (0)
  const unsigned c32 = (unsigned)(a.cols < 32 ? a.cols : 32);
  if (a.cols <= 32) {
    row::with_segment_width(a.cols, [&](auto w) {
      TLRT_LN_FUSED("fused_seg_bwd", fused_seg_bwd<decltype(w)::value>, c32);
    });
  } else if (fused_bwd_ring(launch, a, plan)) {
    if (a.cols <= 512) TLRT_LN_PIPE_P(32, 2);
    else if (a.cols <= 1024) TLRT_LN_PIPE_P(64, 4);
    else if (a.cols <= 2048) TLRT_LN_PIPE_P(128, 8);
    else TLRT_LN_PIPE_P(256, 16);
  } else if (a.cols <= 256) {
    TLRT_LN_FUSED("fused_group_bwd<32, 1, 1>", (fused_group_bwd<32, 1, 1>), a.cols);
  } else if (plan.smem_acc && a.cols <= kSaMaxCols) {
    TLRT_LN_FUSED("fused_group_bwd<32, 1, 2, SA>", (fused_group_bwd<32, 1, 2, true>), a.cols);
  } else if (a.cols <= 512) {
    TLRT_LN_FUSED("fused_group_bwd<32, 1, 2>", (fused_group_bwd<32, 1, 2>), a.cols);
  } else if (a.cols <= 1024) {
    TLRT_LN_FUSED("fused_group_bwd<64, 1, 4>", (fused_group_bwd<64, 1, 4>), a.cols);
  } else if (a.cols <= 2048) {
    TLRT_LN_FUSED("fused_group_bwd<128, 1, 8>", (fused_group_bwd<128, 1, 8>), a.cols);
  } else {
    TLRT_LN_FUSED("fused_group_bwd<256, 1, 16>", (fused_group_bwd<256, 1, 16>), a.cols);
  }
#undef TLRT_LN_PIPE_P
#undef TLRT_LN_PIPE
#undef TLRT_LN_PIPE_F
#undef TLRT_LN_FUSED
}

// ---- the rest of the column tree (dgamma and dbeta): the wide finish -------------------------
// The partials (nc, S, cols) of dgamma (pg) and dbeta (pb) -> dgamma, dbeta: per column, each
// chunk's S lane values are halved by the tree (a sequence of S <= 256 values, one per lane, lanes
// >= S holding the identity -0: the leaves are -0 + v, then the steps h = 128 .. S add -0, then
// h = S / 2 .. 1 pair the values), then the tree of the nc <= 256 chunk values (the same halving
// over 256 lanes); nc == 1: the chunk value itself; S == 1: the partials are the chunk values. The
// same operations in the same order as the CPU: the same bits (tests/unit/test_layer_norm_emu.cpp).
// fused_bwd_finish_wide<S, NCB>: grid (cols / 32 column tiles, 2 nc); block (x, 2 k + a) computes
// the value of chunk k of array a (0: dgamma, 1: dbeta) for its 32 columns: thread (w, l) loads
// lanes t = w + 8 i (i < S / 8, all issued together: 4-32 loads), the leaves -0 + v, the pad steps
// h = 128 .. S (+ -0), h = S / 2 .. 8 in registers, h = 4, 2, 1 across warps (halve_lanes). It
// writes the chunk value to cv (2, nc, cols), fences, and takes a ticket on
// counters[a * tiles + x]; the block with the last ticket (every chunk of the tile written) reads
// the nc chunk values from L2 (__ldcg) and halves them over 256 lanes (leaves -0 + v, the identity
// past nc), writes dgamma / dbeta and puts the counter back to 0 for the next call. nc == 1: the
// chunk value is the result (no scratch, no ticket). S == 1 (cols <= 32): the partials are the
// chunk values, and fused_bwd_finish_level alone does the chunk level (one launch, no ticket).
// Register slots at the chunk level: NCB = 4 for nc <= 32 (lanes t >= 32 are identity and stay so,
// so their steps h = 128 .. 32 are the pad additions of the held lanes: the same additions on
// every value that is not -0 + -0), NCB = 32 up to 256 chunks; the same halving either way.
// Bytes: the partials read once (2 nc S cols floats: 8 MB at (65536, 1024), 32 MB at (16384,
// 4096)) + the chunk values written and read back (2 nc cols floats each way: 128 KB at both
// shapes). Blocks: 2 nc cols / 32 (1024 at both shapes), 8 / 32 loads per thread at S = 64 / 256.
// It replaced (session 10) fused_bwd_finish, the same tree with 64 / 256 blocks (32-column tiles x
// 2 arrays) each walking nc S / 256 DEPENDENT batches of loads (4 at (65536, 1024); limited to nc
// S <= 2048), and a two-launch form of the wide finish (wide2: no ticket, the chunk level as a
// second launch); commit 0ec911d has both. PREDICTION (H100, whole op, from 0.327 / 0.348 ms with
// fused_bwd_finish; the ring kernel alone 0.314 / 0.327): the tail ~13 -> ~6 us at (65536, 1024),
// ~21 -> ~12 us at (16384, 4096): ~0.321 / ~0.339 ms; wide2 within ~1 us of wide. MEASURED (bench/
// softmax.py, each form in its own process, one build): H100 (65536, 1024) / (16384, 4096)
// fused_bwd_finish 0.327 / 0.350 ms, wide 0.324 / 0.346, wide2 0.328 / 0.347; H200 fused_bwd_finish
// 0.274 / 0.291, wide 0.269 / 0.285: 3-6 us, half the predicted gain; the 0.85 target (<= 0.314
// ms on the H100) stays missed.
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

// The tree's halving over 256 lanes of 32 columns in a block of 256 threads: thread (w, l) holds
// lanes t = w + 8 i (i < NS) of column l in v[i], leaves done; lanes t >= 8 NS are the identity.
// Steps h = 128 .. 8 NS pair each held lane with an empty one (+ -0), h = 4 NS .. 8 pair slots i
// and i + h / 8 in registers, h = 4, 2, 1 pair warps w and w + h through s8 (one barrier). The
// value of lane 0 is returned in warp 0 (the identity elsewhere); the caller passes a barrier
// before s8 is written again.
template <unsigned NS>
__device__ __forceinline__ float halve_lanes(float (&v)[NS], float (&s8)[8][32]) {
  using O = red::Ops<red::Op::Sum>;
  constexpr unsigned kPad =
      NS == 32 ? 0 : NS == 16 ? 1 : NS == 8 ? 2 : NS == 4 ? 3 : NS == 2 ? 4 : 5;
  static_assert((NS << kPad) == 32, "NS is a power of two <= 32");
  const unsigned l = threadIdx.x % 32, w = threadIdx.x / 32;
  const float id = O::identity();
#pragma unroll
  for (unsigned i = 0; i < NS; ++i)
#pragma unroll
    for (unsigned h = kPad; h != 0; --h) v[i] = O::op(v[i], id);  // h = 128 .. 8 NS
  // Steps h = 4 NS .. 8 (slots i and i + h / 8), counted linearly so that they unroll fully (a
  // loop halving its counter left the slots in local memory).
#pragma unroll
  for (unsigned step = 0; step < 5 - kPad; ++step)
#pragma unroll
    for (unsigned i = 0; i < NS / 2; ++i)
      if (i < (NS >> (step + 1))) v[i] = O::op(v[i], v[i + (NS >> (step + 1))]);
  s8[w][l] = v[0];
  __syncthreads();
  float r = id;
  if (w == 0) {  // h = 4, 2, 1 over the warps' values
    float a[8];
#pragma unroll
    for (unsigned u = 0; u < 8; ++u) a[u] = s8[u][l];
#pragma unroll
    for (unsigned step = 0; step < 3; ++step)
#pragma unroll
      for (unsigned u = 0; u < 4; ++u)
        if (u < (4u >> step)) a[u] = O::op(a[u], a[u + (4u >> step)]);
    r = a[0];
  }
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
// (cuda/common/split_row.cuh: layout, tree sums): S(x) -> mean, S(sq_dev(x, mean)) -> inv_std, y from
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
