// Device code of cuda/scan.cu's backward (its top comment explains the phases and the costs): the
// chunk aggregates of the adjoint (bwd_aggregate) and diag's fused last pass (bwd_fold), kept apart
// so that the CPU emulator test (tests/unit/test_scan_emu.cpp) runs the very source nvcc compiles,
// bit for bit against the CPU backend, under several thread schedules.
#pragma once

#include <cstdint>
#ifdef TLRT_CUDA_EMULATION
#include <stdexcept>
#endif

#include "core/backend/scan.hpp"
#include "core/numerics/reduce_tree.hpp"
#ifndef TLRT_CUDA_EMULATION
#include "cuda/common/cp_async.cuh"
#endif

namespace tlrt {
namespace cuda {
namespace scan_kernels {

using scan::kChunk;

// Coefficient of channel j at step t: the (T, D) row (VAR) or the D-vector.
template <bool VAR>
__device__ __forceinline__ float coef(const float *__restrict p, uint64_t t, uint64_t D,
                                      uint64_t j) {
  return VAR ? p[t * D + j] : p[j];
}

// Aggregate (m, Q at the chunk's first step) of chunk c >= 1, walking from its last step; slot
// c - 1 of agg_m / agg_q. One thread per (channel, chunk); grid.y loops over chunks.
template <bool VAR>
__global__ void bwd_aggregate(const float *__restrict A, const float *__restrict dY, uint64_t T,
                              uint64_t D, uint64_t C, float *__restrict agg_m,
                              float *__restrict agg_q) {
  const uint64_t j = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= D) return;
  for (uint64_t c = 1 + (uint64_t)blockIdx.y; c < C; c += gridDim.y) {
    const uint64_t c0 = c * kChunk, e = scan::chunk_end(c, T);
    float m = dY[e * D + j], Q = 1.0f;
#pragma unroll 16
    for (uint64_t t = e; t-- > c0;) {
      const float an = coef<VAR>(A, t + 1, D, j);
      m = scan::bwd_step(an, m, dY[t * D + j]);
      Q = scan::mul(an, Q);
    }
    agg_m[(c - 1) * D + j] = m;
    agg_q[(c - 1) * D + j] = Q;
  }
}

// ---- bwd_fold: diag's adjoint, dX and THE TREE's lane folds in one pass ------------------------
//
// THE TREE over t (core/numerics/reduce_tree.hpp) cuts time into 4096-step tree chunks; tree lane
// L (0..255) of tree chunk k folds steps 4096 k + L + 256 r, r = 0..15, in order of r. A scan chunk
// (64 steps) lies inside one tree chunk: step t = 4096 k + 256 r + 64 w + p (p = t mod 64) is in
// scan chunk c = 64 k + 4 r + w, and is element r of lane L = 64 w + p. So the 16 scan chunks
// c = 64 k + w + 4 r (r = 0..15) of one "quarter" (k, w) hold, position by position, all the
// elements of the 64 lanes L = 64 w + p, one per chunk, in chunk order = fold order.
//
// A block owns 32 channels (one per lane of a warp: every row access is one 128-byte line) and one
// quarter (k, w); warp r walks scan chunk 64 k + w + 4 r backwards from its end exactly as the
// three-phase adjoint does (m, Q, g = m + Q q with the carry-in q from carry_scan), writes
// dX = B g, and deposits the products h_{t-1} g and X g of each step into shared memory. The warps
// move in step: after each stage of kStep positions a barrier, then every (position, product,
// channel) of the stage is folded over r = 0..15 from shared memory, in order, by one thread,
// which writes the finished lane value to the partials pa / pb ((nc, lanes, D) as before, for
// reduce_axis). The stage buffers alternate, so one barrier per stage suffices: a buffer is
// refilled only after the barrier that follows every thread's fold of it.
// The folds and products are the very operations of the former lane_fold (aa = aa + hp * g, in
// order of r, from the identity -0; a lane without elements keeps -0), so the bits do not change.
// Moves 16 bytes per element (reads dY, out, X once; writes dX once) plus 1/8 float of lane
// partials per element; 6 flops per element in the walk and products, 2 in the folds. 109
// registers, 64 KiB of shared memory (16 warps): one block per SM, the next stage's loads (24 per
// thread, ~48 KiB per SM) in flight while a stage is computed and folded. PREDICTION: streams at
// about the copy rate of the passes it replaces (bwd_out + lane_fold moved 24 bytes per element),
// so diag_bwd 0.49 -> ~0.62-0.66 of copy bandwidth at (65536, 1024), 0.42 -> ~0.52-0.55 at
// (16384, 1024) (cuda/scan.cu's top comment counts every pass).
// Measured (H100, 2026-11-24): diag_bwd 0.59 at (65536, 1024), 0.51 at (16384, 1024).
constexpr unsigned kQuarters = red::kLanes / kChunk;  // 4 scan chunks across a tree row of lanes
constexpr unsigned kFoldWarps = red::kDepth;          // 16: one warp per element of a lane
constexpr unsigned kStep = 8;                         // positions per stage
constexpr unsigned kStages = kChunk / kStep;          // 8 stages per scan chunk
constexpr unsigned kSlot = kStep * 2 * 32;            // floats per warp per stage buffer
static_assert(red::kLanes % kChunk == 0 && red::kChunk % kChunk == 0, "scan chunks tile lanes");
static_assert(kChunk % (2 * kStep) == 0, "pairs of stages tile a scan chunk");

// Warps per block for T steps: one per element r that a lane can have (fewer when T < 4096).
__host__ __device__ inline unsigned fold_warps(uint64_t T) {
  const uint64_t r = (T + red::kLanes - 1) / red::kLanes;
  return (unsigned)(r < kFoldWarps ? r : kFoldWarps);
}
// Dynamic shared memory of a block of `warps` warps: two stage buffers.
__host__ __device__ inline size_t fold_smem_bytes(unsigned warps) {
  return 2u * warps * kSlot * sizeof(float);
}

// grid: x = ceil(D / 32) channel groups, y over the nkw = nc * kQuarters quarters (capped; blocks
// loop). blockDim.x = 32 * fold_warps(T). carry: the carry-in of chunks c < C - 1 (unused when
// C == 1). lanes = row::col_lanes(T).
__global__ void __launch_bounds__(32 * kFoldWarps, 1)
    bwd_fold(const float *__restrict A, const float *__restrict B, const float *__restrict X,
             const float *__restrict h0, const float *__restrict out, const float *__restrict dY,
             const float *__restrict carry, uint64_t T, uint64_t D, uint64_t C, unsigned lanes,
             uint64_t nkw, float *__restrict dX, float *__restrict dH0, float *__restrict pa,
             float *__restrict pb) {
  float *sm = async::dynamic_smem();
  const unsigned lane = threadIdx.x % 32, r = threadIdx.x / 32;
  const uint64_t j0 = (uint64_t)blockIdx.x * 32, j = j0 + lane;
  const bool live = j < D;
  const float a = live ? A[j] : 0.0f, b = live ? B[j] : 0.0f;
  for (uint64_t kw = blockIdx.y; kw < nkw; kw += gridDim.y) {
    const uint64_t k = kw / kQuarters;
    const unsigned w = (unsigned)(kw % kQuarters);
    // T < 256: a quarter without lanes; the whole block skips it. (A quarter of the last tree
    // chunk past T still runs: its lanes exist and are written as the identity.)
    if (w * kChunk >= lanes) continue;
    const uint64_t c = k * (red::kChunk / kChunk) + w + (uint64_t)kQuarters * r;
    const bool run = live && c < C;
    // Positions p = 0 .. pe of the chunk are steps t = 64 c + p < T; every offset below is taken
    // from the chunk's last row, so a stage's addresses are one 64-bit base minus multiples of D.
    const unsigned pe = run ? (unsigned)(scan::chunk_end(c, T) - c * kChunk) : 0;
    const bool has_q = c + 1 < C, first = c == 0;
    const float q = run && has_q ? carry[c * D + j] : 0.0f;
    // Running pointers, one row (D floats) down per step from the row of position 63: the loads
    // of the next stage (dY_t, out[t - 1], X_t) and the stores of dX_t.
    const uint64_t top = run ? (c * kChunk + kChunk - 1) * D + j : 0;
    const float *ly = dY + top, *lx = X + top;
    const float *lo = out + top - D;  // out[t - 1]; read only for t >= 1
    float *sx = dX + top;
    float m = 0.0f, Q = 1.0f, g = 0.0f;
    // Inputs of stage st (positions 63 - kStep st down to 63 - kStep st - kStep + 1): dY_t,
    // h_{t-1} (out[t - 1], or h0 at t = 0) and X_t; they do not depend on the recurrence, so the
    // next stage's loads are issued before the current stage is computed.
    auto load = [&](unsigned st, float(&d)[kStep], float(&h)[kStep], float(&x)[kStep]) {
#pragma unroll
      for (unsigned s = 0; s < kStep; ++s) {
        const unsigned p = kChunk - 1 - (st * kStep + s);
        const bool ok = run && p <= pe;
        d[s] = ok ? *ly : 0.0f;
        h[s] = ok ? (first && p == 0 ? h0[j] : *lo) : 0.0f;
        x[s] = ok ? *lx : 0.0f;
        ly -= D;
        lo -= D;
        lx -= D;
      }
    };
    // One stage: compute from (cd, ch, cx) while the next stage's loads land in (nd, nh, nx).
    auto stage = [&](unsigned st, const float(&cd)[kStep], const float(&ch)[kStep],
                     const float(&cx)[kStep], float(&nd)[kStep], float(&nh)[kStep],
                     float(&nx)[kStep]) {
      if (st + 1 < kStages) load(st + 1, nd, nh, nx);
      float *buf = sm + (st & 1) * (blockDim.x / 32) * kSlot;
#pragma unroll
      for (unsigned s = 0; s < kStep; ++s) {
        const unsigned p = kChunk - 1 - (st * kStep + s);
        if (run && p <= pe) {
          if (p == pe) {
            m = cd[s];
            Q = 1.0f;
          } else {
            m = scan::bwd_step(a, m, cd[s]);
            Q = scan::mul(a, Q);
          }
          g = has_q ? scan::apply(m, Q, q) : m;
          *sx = scan::mul(b, g);
          buf[(r * kStep + s) * 64 + lane] = scan::mul(ch[s], g);
          buf[(r * kStep + s) * 64 + 32 + lane] = scan::mul(cx[s], g);
        }
        sx -= D;
      }
      __syncthreads();
      // Fold item f: channel j0 + f % 32, product f / 32 % 2 (0: h_{t-1} g into pa, 1: X g into
      // pb), position of stage slot s = f / 64; over r = 0 .. nr - 1, the chunks that have that
      // step (the elements of the lane below T).
      for (unsigned f = threadIdx.x; f < kStep * 64; f += blockDim.x) {
        const unsigned fl = f % 32, ab = f / 32 % 2, s = f / 64;
        const unsigned L = w * kChunk + (kChunk - 1 - (st * kStep + s));
        if (j0 + fl >= D || L >= lanes) continue;
        const uint64_t base = k * red::kChunk + L;
        const uint64_t left = base < T ? (T - base + red::kLanes - 1) / red::kLanes : 0;
        const unsigned nr = (unsigned)(left < kFoldWarps ? left : kFoldWarps);
        float acc = red::Ops<red::Op::Sum>::identity();
#pragma unroll
        for (unsigned rr = 0; rr < kFoldWarps; ++rr)
          if (rr < nr) acc = scan::add(acc, buf[(rr * kStep + s) * 64 + ab * 32 + fl]);
        (ab ? pb : pa)[(k * lanes + L) * D + j0 + fl] = acc;
      }
    };
    float cd[kStep], ch[kStep], cx[kStep], nd[kStep], nh[kStep], nx[kStep];
    load(0, cd, ch, cx);
#pragma unroll 1
    for (unsigned st = 0; st < kStages; st += 2) {
      stage(st, cd, ch, cx, nd, nh, nx);
      stage(st + 1, nd, nh, nx, cd, ch, cx);
    }
    // g of step 0 (chunk 0's first step, the last one walked).
    if (run && first) dH0[j] = scan::mul(a, g);
  }
}

// ---- fwd_chained: diag's forward in one pass ----------------------------------------------------
//
// The three-phase forward reads X twice (fwd_aggregate, fwd_out: 12 bytes per element, at most
// 0.67 of copy bandwidth). Here a block keeps its X on chip between the two walks: it owns 32
// channels (a channel group g) and a segment s of kSegWarps consecutive chunks, one per warp. Each
// thread copies its chunk's 64 values of X into shared memory at once (cp.async: 64 copies in
// flight per thread, no registers held) and walks them for the chunk's aggregate (l, P); warp 0
// takes the carry into the segment from the block of segment s - 1 (one flagged 64-bit word per
// channel in global memory), runs the carry chain k_{c+1} = l_c + P_c * k_c over the segment's
// chunks from shared memory and publishes the carry out of the segment; then every warp walks its
// chunk again and writes out = l + P * k_c. The operations and their order are those of
// fwd_aggregate, FwdChain and fwd_out, so the bits are the same; X is read once: 8 bytes per
// element.
// Blocks take (s, g) from a ticket counter in the order they start (ticket = s G + g), so a block
// only waits for a block that took its ticket earlier and is resident or done: no deadlock
// whatever the block scheduling.
// Cost model: the carry of a channel group moves one segment (8 chunks, 131 KB of X and out per
// group) per hop, a hop being an L2 round trip or two (~1 us: the waiting lane polls the word
// that holds value and flag together). The ~400 resident blocks (3 per SM) hold ~12 segments per
// group at D = 1024, so loads run ahead of the chain; the chain caps the rate at G x 131 KB per
// hop: ~4 TB/s at D = 1024 (G = 32), more above. Below D = 1024 the hops would dominate: the
// launcher keeps the three-phase kernels there.
// Shared memory ~67 KiB per block of 8 warps: 3 blocks (24 warps) per SM, ~190 KiB of X in flight
// per SM. 32 registers.
// PREDICTION (H100): diag_fwd (16384, 1024) 0.48 -> ~0.65, (4096, 1024) 0.50 -> ~0.55 (8 hops in
// a 20 us call), (65536, 1024) 0.54 -> ~0.7, D = 4096: 0.51-0.61 -> ~0.7 of copy bandwidth (8
// instead of 12 bytes per element; a memset and one kernel instead of three kernels). If the hop
// is much slower than 1 us, D = 1024 is chain-bound: raise kChainedMinD in cuda/scan.cu.
// Measured (H100, 2026-11-24, bench/results/2026-11-24-h100-scan-fused.md): diag_fwd (16384,
// 1024) 0.66, (4096, 1024) 0.58, (65536, 1024) 0.79, (4096, 4096) 0.77, (16384, 4096) 0.90,
// (65536, 4096) 0.93 of copy bandwidth: above the prediction everywhere (the hop is not the limit
// at D = 1024). compute-sanitizer memcheck / racecheck / initcheck / synccheck clean over
// test_parity_scan with inputs up to 1.1M elements.
constexpr unsigned kSegWarps = 8;  // chunks per segment (one warp each)

// Dynamic shared memory: the ticket (16 bytes, for alignment), l, P and k_c per chunk, then X of
// the segment ([warp][step][lane]).
__host__ __device__ inline size_t chained_smem_bytes() {
  return 16 + (3u + kChunk) * kSegWarps * 32 * sizeof(float);
}

// A carry handed from one block to another: one 64-bit word per channel, the float's bits in the
// low half and 1 in the high half once written (0 before: the launcher zeroes the words). One
// naturally aligned 64-bit store publishes value and flag together, so no fence is needed and the
// waiting lane's poll returns the value itself.
__device__ __forceinline__ void publish(unsigned long long *w, float v) {
  const unsigned long long word = (1ull << 32) | (unsigned long long)__float_as_uint(v);
#ifdef TLRT_CUDA_EMULATION
  *w = word;
#else
  *(volatile unsigned long long *)w = word;
#endif
}

__device__ __forceinline__ float await(const unsigned long long *w) {
#ifdef TLRT_CUDA_EMULATION
  if ((*w >> 32) == 0)
    throw std::runtime_error("emu: fwd_chained waits for a segment that has not run");
  return __uint_as_float((unsigned)*w);
#else
  unsigned long long word;
  while (((word = *(const volatile unsigned long long *)w) >> 32) == 0) __nanosleep(32);
  return __uint_as_float((unsigned)word);
#endif
}

// grid: G S blocks (1-D), G = ceil(D / 32), S = ceil(C / kSegWarps); blockDim 32 kSegWarps.
// ticket: one zeroed counter; seg_carry: (S - 1) D zeroed words, the carry into segment s + 1 at
// row s (publish / await).
__global__ void __launch_bounds__(32 * kSegWarps)
    fwd_chained(const float *__restrict A, const float *__restrict B, const float *__restrict X,
                const float *__restrict h0, uint64_t T, uint64_t D, uint64_t C, uint64_t G,
                unsigned *ticket, unsigned long long *seg_carry, float *__restrict out) {
  float *sm = async::dynamic_smem();
  unsigned *tk = reinterpret_cast<unsigned *>(sm);
  float *sl = sm + 4, *sp = sl + kSegWarps * 32, *sk = sp + kSegWarps * 32;
  float *xs = sk + kSegWarps * 32;
  if (threadIdx.x == 0) *tk = atomicAdd(ticket, 1u);
  __syncthreads();
  const uint64_t tick = *tk, s = tick / G, g = tick - s * G;
  const unsigned lane = threadIdx.x % 32, w = threadIdx.x / 32;
  const uint64_t j = g * 32 + lane;
  const bool live = j < D;
  const uint64_t c = s * kSegWarps + w;
  const bool run = live && c < C;
  const unsigned n = run ? (unsigned)(scan::chunk_end(c, T) - c * kChunk + 1) : 0;
  const float a = live ? A[j] : 0.0f, b = live ? B[j] : 0.0f;
  // This thread's X: xv[u] = X[(64 c + u) D + j] for u < n (zeros after).
  float *xv = xs + w * kChunk * 32 + lane;
  {
    const float *xp = X + (run ? c * kChunk * D + j : 0);
    const float *x0 = xp;  // a valid address for the copies that only write zeros
    for (unsigned u = 0; u < kChunk; ++u, xp += D)
      async::copy4(xv + u * 32, u < n ? xp : x0, u < n);
    async::commit();
    async::wait<0>();  // each thread reads only the copies it issued
  }
  // The chunk's walk from a zero state (fwd_aggregate's and fwd_out's operations); WRITE: out.
  auto walk = [&](bool write, float k) {
    float l = 0.0f, P = 0.0f;
    float *op = out + (run ? c * kChunk * D + j : 0);
#pragma unroll 16
    for (unsigned u = 0; u < n; ++u, op += D) {
      const float x = xv[u * 32];
      if (u == 0) {
        l = scan::fwd_first(b, x);
        P = a;
      } else {
        l = scan::fwd_step(a, l, b, x);
        P = scan::mul(P, a);
      }
      if (write) *op = scan::apply(l, P, k);
    }
    sl[w * 32 + lane] = l;
    sp[w * 32 + lane] = P;
  };
  walk(false, 0.0f);
  __syncthreads();
  if (w == 0) {
    float k = 0.0f;
    if (live) k = s == 0 ? h0[j] : await(seg_carry + (s - 1) * D + j);
    // FwdChain's steps over the segment's chunks: sk = carry into the chunk, then k_{c+1}.
    for (unsigned u = 0; u < kSegWarps; ++u) {
      const uint64_t cc = s * kSegWarps + u;
      if (cc >= C) break;
      sk[u * 32 + lane] = k;
      if (cc + 1 < C) k = scan::apply(sl[u * 32 + lane], sp[u * 32 + lane], k);
    }
    if (live && (s + 1) * kSegWarps < C) publish(seg_carry + s * D + j, k);
  }
  __syncthreads();
  if (run) walk(true, sk[w * 32 + lane]);
}

}  // namespace scan_kernels
}  // namespace cuda
}  // namespace tlrt
