// Device code of the selective scan, launched by cuda/scan.cu (whose top comment gives the phases)
// and run bit for bit on the CPU by tests/unit/test_scan_emu.cpp under several thread schedules.
// bwd_aggregate: per (channel, chunk c >= 1), the adjoint's aggregate (m, Q at the chunk's first
//   step) walking back from its last step: reads dY (var: A), 3 flops per step.
// bwd_fold (diag): the adjoint, dX = B g and THE TREE's lane folds in one pass: 16 bytes (dY, out,
//   X, dX) and 8 flops per element; 64 KiB of shared memory: one block of 16 warps per SM.
// fwd_chained (diag forward): both walks and the carry chain in one kernel, X read once: 8 bytes
//   and ~10 flops per element; ~67 KiB of shared memory per block, 3 blocks per SM.
// Last measured: bench/results/2026-11-24-h100-scan-fused.md
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

// Coefficient of channel j at step t: of the (T, D) rows (VAR) or the D-vector.
template <bool VAR>
__device__ __forceinline__ float coef(const float *__restrict p, uint64_t t, uint64_t D,
                                      uint64_t j) {
  return VAR ? p[t * D + j] : p[j];
}

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

// bwd_fold. THE TREE's lane L (0..255) of tree chunk k folds steps 4096 k + L + 256 r, r = 0..15,
// in order of r. Step t = 4096 k + 256 r + 64 w + p is in scan chunk c = 64 k + 4 r + w and is
// element r of lane L = 64 w + p: the 16 scan chunks of one quarter (k, w) hold, position by
// position, the elements of lanes 64 w .. 64 w + 63 in fold order. A block owns 32 channels and a
// quarter; warp r walks chunk 64 k + w + 4 r backwards, writes dX and deposits h_{t-1} g and X g
// in shared memory; after each stage of kStep positions, a barrier, then one thread per (position,
// product, channel) folds r = 0..15 in order from -0 into pa / pb. The two stage buffers
// alternate: a buffer is refilled only after the barrier that follows every fold of it.
constexpr unsigned kQuarters = red::kLanes / kChunk;  // 4 scan chunks across a tree row of lanes
constexpr unsigned kFoldWarps = red::kDepth;          // 16: one warp per element of a lane
constexpr unsigned kStep = 8;                         // positions per stage
constexpr unsigned kStages = kChunk / kStep;          // 8 stages per scan chunk
constexpr unsigned kSlot = kStep * 2 * 32;            // floats per warp per stage buffer
static_assert(red::kLanes % kChunk == 0 && red::kChunk % kChunk == 0, "scan chunks tile lanes");
static_assert(kChunk % (2 * kStep) == 0, "pairs of stages tile a scan chunk");

__host__ __device__ inline unsigned fold_warps(uint64_t T) {  // one per element a lane can have
  const uint64_t r = (T + red::kLanes - 1) / red::kLanes;
  return (unsigned)(r < kFoldWarps ? r : kFoldWarps);
}
__host__ __device__ inline size_t fold_smem_bytes(unsigned warps) {
  return 2u * warps * kSlot * sizeof(float);
}

// grid (ceil(D / 32), nkw = nc kQuarters quarters), 32 fold_warps(T) threads; lanes = col_lanes(T).
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
    // A quarter without lanes (T < 256) is skipped; one past T writes its lanes as the identity.
    if (w * kChunk >= lanes) continue;
    const uint64_t c = k * (red::kChunk / kChunk) + w + (uint64_t)kQuarters * r;
    const bool run = live && c < C;
    const unsigned pe = run ? (unsigned)(scan::chunk_end(c, T) - c * kChunk) : 0;
    const bool has_q = c + 1 < C, first = c == 0;
    const float q = run && has_q ? carry[c * D + j] : 0.0f;
    // Positions p <= pe are steps 64 c + p < T; pointers run one row down per step from p = 63.
    const uint64_t top = run ? (c * kChunk + kChunk - 1) * D + j : 0;
    const float *ly = dY + top, *lx = X + top;
    const float *lo = out + top - D;  // out[t - 1]; read only for t >= 1
    float *sx = dX + top;
    float m = 0.0f, Q = 1.0f, g = 0.0f;
    // Stage st's inputs dY_t, h_{t-1} (h0 at t = 0) and X_t, at positions 63 - kStep st downwards.
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
      // Item f: channel j0 + f % 32, product f / 32 % 2 (pa, pb), slot s = f / 64; the nr chunks
      // r that have the step are the lane's elements below T.
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
    if (run && first) dH0[j] = scan::mul(a, g);  // g of step 0, walked last
  }
}

// fwd_chained. A block owns 32 channels (group g) and a segment s of kSegWarps chunks, one per
// warp: each thread copies its chunk of X into shared memory (cp.async) and walks it for (l, P);
// warp 0 takes the carry from segment s - 1's block, runs the chain over the segment and publishes
// its carry out; every warp then walks its chunk again, writing out. Blocks take (s, g) from a
// ticket in start order (ticket = s G + g), so a block waits only for one that started earlier: no
// deadlock. The chain moves a segment (G x 131 KB) per hop of ~1 us: ~4 TB/s at D = 1024; below
// that the hops set the pace (cuda/scan.cu's kChainedMinD).
constexpr unsigned kSegWarps = 8;  // chunks per segment (one warp each)

// Dynamic shared memory: the ticket (16 bytes), l, P, k_c per chunk, X ([warp][step][lane]).
__host__ __device__ inline size_t chained_smem_bytes() {
  return 16 + (3u + kChunk) * kSegWarps * 32 * sizeof(float);
}

// A carry between blocks: a 64-bit word per channel, the float's bits low and 1 high once written
// (zeroed by the launcher); one aligned store publishes value and flag together: no fence.
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

// G S blocks (G = ceil(D / 32), S = ceil(C / kSegWarps)); seg_carry row s: into segment s + 1.
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
    // FwdChain's steps: sk = the carry into each chunk.
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
