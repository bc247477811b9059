// CUDA backend, selective scan: the DEFINITIONS of abi/tlrt_scan.h (chunks of L = TLRT_SCAN_CHUNK =
// 64 steps) with the step formulas of core/backend/scan.hpp (__fmul_rn / __fadd_rn: nothing can
// contract) and, for diag_bwd's sums over time, THE TREE of core/numerics/reduce_tree.hpp: bit for
// bit the CPU's (stub/scan.cpp). No host synchronisation; everything on the library stream;
// scratch from the stream-ordered pool. Grids: x over blocks of channels (consecutive threads =
// consecutive channels: every row access of a warp is one 128-byte line), y over chunks (capped at
// kMaxGridY; kernels loop over the rest). About 10 flops per element: bandwidth-bound.
// FORWARD, C = ceil(T / L) chunks:
// fwd_aggregate (C > 1): one thread per (channel, chunk c < C - 1) walks its chunk from a zero
//   state and writes the aggregate (l at the last step, P = product of A) to scratch. The loads
//   do not depend on the recurrence: kWalk = 16 steps of them are in flight together.
// carry_scan: the carry chain over chunks, k_{c+1} = l_c + P_c * k_c, C - 1 dependent steps per
//   channel; 8 warps stage the inputs through shared memory 64 steps at a time while warp 0 runs
//   the chain, so a global load round trip is paid once per 64 steps. 12 C D bytes, mostly L2.
// fwd_out: one thread per (channel, chunk) walks its chunk again and writes out = l + P * k_c.
//   T <= L runs only this kernel, with k = h0.
// fwd_chained (cuda/kernels/scan.cuh; diag, C > 1, D >= kChainedMinD): the three phases in one
//   kernel that keeps X in shared memory between its two walks; segments of 8 chunks hand their
//   carry to the next segment's block through flagged words in global memory.
// Bytes per element: diag 12 in three phases (ideal 8), 8 chained; var 28 (ideal 16).
// BACKWARD, the same phases in reverse time: bwd_aggregate (chunks c >= 1: m and Q at the chunk's
// first step; reads dY, var: A), carry_scan with BwdChain (q_{c-1} = A_{cL} * (m_c + Q_c * q_c),
// the last chunk without a carry), then the last pass, g = m + Q * q per step:
// bwd_out_var (diag_var): writes dA = h_{t-1} g, dB = X g, dX = B g per step and dH0 = A_0 g_0;
//   reads dY, A, B, X, out: 40 bytes per element with the aggregate pass (ideal 32).
// bwd_fold (diag; cuda/kernels/scan.cuh): the adjoint, dX = B g and THE TREE's lane folds of
//   h_{t-1} g and X g in one pass; reduce_axis then performs the halving and chunk levels (2
//   launches when T <= 4096, else 3; the lane level of dA and dB in one). Bytes per element:
//   bwd_aggregate 4, bwd_fold 16, lanes ~1, carries ~0.4: 21.4 (ideal 16: read dY, out, X;
//   write dX).
// Last measured: bench/results/2026-11-24-h100-scan-fused.md
#include <atomic>

#include "core/backend/memory.hpp"
#include "core/backend/reduce.hpp"
#include "core/backend/scan.hpp"
#include "core/numerics/row_ops.hpp"
#include "cuda/common/launch.cuh"
#include "cuda/kernels/scan.cuh"

namespace tlrt {
namespace cuda {

namespace {

using scan::kChunk;
using scan_kernels::bwd_aggregate;
using scan_kernels::coef;

// The (channel, chunk) kernels' grid: up to 256 threads along channels (a multiple of 32; blocks.x
// covers any D a device could hold), blocks.y over `nchunks` chunks.
struct Geometry {
  dim3 grid;
  unsigned threads;
};

Geometry geometry(uint64_t D, uint64_t nchunks) {
  const uint64_t w = (D + 31) / 32 * 32;
  const unsigned threads = (unsigned)(w < 256 ? w : 256);
  return {dim3(blocks(D, threads), blocks_y(nchunks), 1), threads};
}

// Walks chunk [c0, e] of channel j from a zero state: l and P after each step; WRITE: out = l +
// P * k at each step. Loads kWalk steps of inputs ahead (var: 3 kWalk loads in flight).
constexpr unsigned kWalk = 16;

template <bool VAR, bool WRITE>
__device__ __forceinline__ void walk_fwd(const float *__restrict A, const float *__restrict B,
                                         const float *__restrict X, uint64_t c0, uint64_t e,
                                         uint64_t D, uint64_t j, float k, float *__restrict out,
                                         float &l, float &P) {
  const float a0 = VAR ? 0.0f : A[j], b0 = VAR ? 0.0f : B[j];
  for (uint64_t tb = c0; tb <= e; tb += kWalk) {
    float xv[kWalk], av[kWalk], bv[kWalk];
#pragma unroll
    for (unsigned u = 0; u < kWalk; ++u) {
      const uint64_t t = tb + u;
      xv[u] = t <= e ? X[t * D + j] : 0.0f;
      av[u] = VAR ? (t <= e ? A[t * D + j] : 0.0f) : a0;
      bv[u] = VAR ? (t <= e ? B[t * D + j] : 0.0f) : b0;
    }
#pragma unroll
    for (unsigned u = 0; u < kWalk; ++u) {
      const uint64_t t = tb + u;
      if (t <= e) {
        if (t == c0) {
          l = scan::fwd_first(bv[u], xv[u]);
          P = av[u];
        } else {
          l = scan::fwd_step(av[u], l, bv[u], xv[u]);
          P = scan::mul(P, av[u]);
        }
        if (WRITE) out[t * D + j] = scan::apply(l, P, k);
      }
    }
  }
}

// Aggregate (l at the last step, P) of chunk c < C - 1 from a zero state.
template <bool VAR>
__global__ void fwd_aggregate(const float *__restrict A, const float *__restrict B,
                              const float *__restrict X, uint64_t T, uint64_t D, uint64_t C,
                              float *__restrict agg_l, float *__restrict agg_p) {
  const uint64_t j = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= D) return;
  for (uint64_t c = blockIdx.y; c + 1 < C; c += gridDim.y) {
    float l = 0.0f, P = 0.0f;
    walk_fwd<VAR, false>(A, B, X, c * kChunk, scan::chunk_end(c, T), D, j, 0.0f, nullptr, l, P);
    agg_l[c * D + j] = l;
    agg_p[c * D + j] = P;
  }
}

// carry_scan<Chain>, S steps per channel: 32 channels per block; 8 warps load kStage steps (row by
// row, 128 coalesced bytes each) into a double-buffered shared stage while warp 0 runs the chain
// over the previous stage. Chain::step performs the DEFINITIONS' carry operations in order.
constexpr unsigned kCarryLanes = 32;  // channels per block
constexpr unsigned kCarryWarps = 8;   // loader warps per block (warp 0 also runs the chain)
constexpr unsigned kStage = 64;       // chain steps per shared-memory stage

template <class Chain>
__global__ void __launch_bounds__(kCarryLanes * kCarryWarps)
    carry_scan(Chain ch, uint64_t D, uint64_t S) {
  constexpr unsigned NIN = Chain::kInputs, PER = kStage / kCarryWarps;
  __shared__ float buf[2][NIN][kStage][kCarryLanes];  // <= 48 KiB for NIN <= 3
  const unsigned lane = threadIdx.x % kCarryLanes, w = threadIdx.x / kCarryLanes;
  const uint64_t j = (uint64_t)blockIdx.x * kCarryLanes + lane;
  const bool live = j < D;
  const uint64_t stages = (S + kStage - 1) / kStage;
  float reg[NIN][PER];
  auto fetch = [&](uint64_t g) {
#pragma unroll
    for (unsigned r = 0; r < PER; ++r) {
      const uint64_t s = g * kStage + w + kCarryWarps * r;
#pragma unroll
      for (unsigned i = 0; i < NIN; ++i) reg[i][r] = live && s < S ? ch.input(i, s, j) : 0.0f;
    }
  };
  auto deposit = [&](unsigned b) {
#pragma unroll
    for (unsigned r = 0; r < PER; ++r) {
#pragma unroll
      for (unsigned i = 0; i < NIN; ++i) buf[b][i][w + kCarryWarps * r][lane] = reg[i][r];
    }
  };
  float state = live ? ch.init(j) : 0.0f;
  if (stages > 0) {
    fetch(0);
    deposit(0);
  }
  __syncthreads();
  for (uint64_t g = 0; g < stages; ++g) {
    // Loads of stage g + 1 are issued first and stay in flight while warp 0 runs stage g; the
    // buffer they go to was last read in stage g - 1, before the barrier that ended it.
    if (g + 1 < stages) fetch(g + 1);
    if (w == 0 && live) {
      const unsigned b = g & 1;
      const uint64_t n = S - g * kStage < kStage ? S - g * kStage : kStage;
#pragma unroll 16
      for (unsigned u = 0; u < n; ++u) {
        float in[NIN];
#pragma unroll
        for (unsigned i = 0; i < NIN; ++i) in[i] = buf[b][i][u][lane];
        state = ch.step(state, in, g * kStage + u, j);
      }
    }
    if (g + 1 < stages) deposit((g + 1) & 1);
    __syncthreads();
  }
}

// Forward carry-in of every chunk: carry[0] = h0, carry[c + 1] = agg_l[c] + agg_p[c] * carry[c]
// (S = C - 1 steps; step s uses chunk s's aggregate).
struct FwdChain {
  static constexpr unsigned kInputs = 2;
  const float *h0, *agg_l, *agg_p;
  float *carry;
  __device__ float input(unsigned i, uint64_t s, uint64_t j) const {
    return (i == 0 ? agg_l : agg_p)[s * D + j];
  }
  __device__ float init(uint64_t j) const {
    carry[j] = h0[j];
    return h0[j];
  }
  __device__ float step(float k, const float *in, uint64_t s, uint64_t j) const {
    k = scan::apply(in[0], in[1], k);
    carry[(s + 1) * D + j] = k;
    return k;
  }
  uint64_t D;
};

// out over chunk c with carry-in carry[c * D + j] (with one chunk, carry is h0).
template <bool VAR>
__global__ void fwd_out(const float *__restrict A, const float *__restrict B,
                        const float *__restrict X, const float *__restrict carry, uint64_t T,
                        uint64_t D, uint64_t C, float *__restrict out) {
  const uint64_t j = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= D) return;
  for (uint64_t c = blockIdx.y; c < C; c += gridDim.y) {
    float l = 0.0f, P = 0.0f;
    walk_fwd<VAR, true>(A, B, X, c * kChunk, scan::chunk_end(c, T), D, j, carry[c * D + j], out, l,
                        P);
  }
}

// diag forward with C > 1 and at least this many channels: fwd_chained (one pass, X read once);
// with fewer channel groups (32 channels each) the segment hops of its carry chain would set the
// pace (cuda/kernels/scan.cuh's cost model).
constexpr uint64_t kChainedMinD = 1024;

template <bool VAR>
void forward(int dev, const float *A, const float *B, const float *X, const float *h0, uint64_t T,
             uint64_t D, float *out) {
  cudaStream_t st = stream(dev);
  const uint64_t C = scan::chunks(T);
  if (C == 1) {
    const Geometry g = geometry(D, 1);
    fwd_out<VAR><<<g.grid, g.threads, 0, st>>>(A, B, X, h0, T, D, 1, out);
    check_launch("selective_scan fwd_out");
    return;
  }
  namespace sk = scan_kernels;
  const uint64_t G = (D + 31) / 32, S = (C + sk::kSegWarps - 1) / sk::kSegWarps;
  if (!VAR && D >= kChainedMinD && G * S < kMaxGrid) {
    // The ticket (16 bytes), then the flagged carry words of segments 1 .. S-1, all zeroed.
    const uint64_t bytes = 16 + (S - 1) * D * sizeof(unsigned long long);
    Scratch sync(dev, bytes);
    unsigned *ticket = sync.as<unsigned>();
    unsigned long long *words = reinterpret_cast<unsigned long long *>(sync.as<char>() + 16);
    check(cudaMemsetAsync(ticket, 0, bytes, st), "selective_scan fwd: cudaMemsetAsync");
    static SmemAllowed allowed;
    allowed.ensure(dev, sk::fwd_chained, sk::chained_smem_bytes(),
                   "selective_scan fwd: cudaFuncSetAttribute");
    static SmemAllowed carveout;  // all of L1 / shared memory as shared: 3 blocks of ~67 KiB
    carveout.ensure(dev, sk::fwd_chained, cudaFuncAttributePreferredSharedMemoryCarveout,
                    (int)cudaSharedmemCarveoutMaxShared, "selective_scan fwd: carveout");
    sk::fwd_chained<<<blocks(G * S, 1), 32 * sk::kSegWarps, sk::chained_smem_bytes(), st>>>(
        A, B, X, h0, T, D, C, G, ticket, words, out);
    check_launch("selective_scan fwd_chained");
    return;
  }
  FloatScratch agg_l(dev, (C - 1) * D), agg_p(dev, (C - 1) * D), carry(dev, C * D);
  const Geometry ga = geometry(D, C - 1);
  fwd_aggregate<VAR><<<ga.grid, ga.threads, 0, st>>>(A, B, X, T, D, C, agg_l.get(), agg_p.get());
  check_launch("selective_scan fwd_aggregate");
  const FwdChain fc{h0, agg_l.get(), agg_p.get(), carry.get(), D};
  carry_scan<<<blocks(D, kCarryLanes), kCarryLanes * kCarryWarps, 0, st>>>(fc, D, C - 1);
  check_launch("selective_scan fwd carry_scan");
  const Geometry go = geometry(D, C);
  fwd_out<VAR><<<go.grid, go.threads, 0, st>>>(A, B, X, carry.get(), T, D, C, out);
  check_launch("selective_scan fwd_out");
}

// Backward carry-in of chunks c < C - 1, from the last chunk down (S = C - 1 steps; step s handles
// chunk c = C - 1 - s): q_{c-1} = A_{cL} * g_{cL}, g_{cL} = m_c (s = 0) or m_c + Q_c * q_c; stored
// in carry[(c - 1) * D + j].
template <bool VAR>
struct BwdChain {
  static constexpr unsigned kInputs = 3;
  const float *A, *agg_m, *agg_q;
  float *carry;
  uint64_t D, C;
  __device__ float input(unsigned i, uint64_t s, uint64_t j) const {
    const uint64_t c = C - 1 - s;
    return i == 0 ? agg_m[(c - 1) * D + j]
                  : i == 1 ? agg_q[(c - 1) * D + j] : coef<VAR>(A, c * kChunk, D, j);
  }
  __device__ float init(uint64_t) const { return 0.0f; }
  __device__ float step(float q, const float *in, uint64_t s, uint64_t j) const {
    const float g = s == 0 ? in[0] : scan::apply(in[0], in[1], q);
    q = scan::mul(in[2], g);
    carry[(C - 2 - s) * D + j] = q;
    return q;
  }
};

// The carry-in of every chunk but the last (carry[c * D + j], c < C - 1): bwd_aggregate, then
// carry_scan with BwdChain. Empty when C == 1.
template <bool VAR>
FloatScratch carries(int dev, const float *A, const float *dY, uint64_t T, uint64_t D) {
  const uint64_t C = scan::chunks(T);
  if (C == 1) return FloatScratch();
  cudaStream_t st = stream(dev);
  FloatScratch agg_m(dev, (C - 1) * D), agg_q(dev, (C - 1) * D), carry(dev, (C - 1) * D);
  const Geometry ga = geometry(D, C - 1);
  bwd_aggregate<VAR><<<ga.grid, ga.threads, 0, st>>>(A, dY, T, D, C, agg_m.get(), agg_q.get());
  check_launch("selective_scan bwd_aggregate");
  const BwdChain<VAR> bc{A, agg_m.get(), agg_q.get(), carry.get(), D, C};
  carry_scan<<<blocks(D, kCarryLanes), kCarryLanes * kCarryWarps, 0, st>>>(bc, D, C - 1);
  check_launch("selective_scan bwd carry_scan");
  return carry;  // agg_m, agg_q go back to the pool in stream order, after carry_scan
}

// diag_var: the adjoint over chunk c (carry-in carry[c * D + j] unless c is the last chunk) and
// the per-step gradients dA, dB, dX; dH0 from chunk 0.
__global__ void bwd_out_var(const float *__restrict A, const float *__restrict B,
                            const float *__restrict X, const float *__restrict h0,
                            const float *__restrict out, const float *__restrict dY,
                            const float *__restrict carry, uint64_t T, uint64_t D, uint64_t C,
                            float *__restrict dA, float *__restrict dB, float *__restrict dX,
                            float *__restrict dH0) {
  const uint64_t j = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (j >= D) return;
  for (uint64_t c = blockIdx.y; c < C; c += gridDim.y) {
    const uint64_t c0 = c * kChunk, e = scan::chunk_end(c, T);
    const bool has_q = c + 1 < C;
    const float q = has_q ? carry[c * D + j] : 0.0f;
    float m = 0.0f, Q = 1.0f, g = 0.0f;
#pragma unroll 16
    for (uint64_t t = e + 1; t-- > c0;) {
      const uint64_t i = t * D + j;
      if (t == e) {
        m = dY[i];
        Q = 1.0f;
      } else {
        const float an = A[i + D];
        m = scan::bwd_step(an, m, dY[i]);
        Q = scan::mul(an, Q);
      }
      g = has_q ? scan::apply(m, Q, q) : m;
      const float hp = t == 0 ? h0[j] : out[i - D];
      dA[i] = scan::mul(hp, g);
      dB[i] = scan::mul(X[i], g);
      dX[i] = scan::mul(B[i], g);
    }
    if (c == 0) dH0[j] = scan::mul(A[j], g);
  }
}

}  // namespace

void scan_diag_fwd(int dev, const float *A, const float *B, const float *X, const float *h0,
                   uint64_t T, uint64_t D, float *out) {
  forward<false>(dev, A, B, X, h0, T, D, out);
}

void scan_var_fwd(int dev, const float *A, const float *B, const float *X, const float *h0,
                  uint64_t T, uint64_t D, float *out) {
  forward<true>(dev, A, B, X, h0, T, D, out);
}

void scan_var_bwd(int dev, const float *A, const float *B, const float *X, const float *h0,
                  const float *out, const float *dY, uint64_t T, uint64_t D, float *dA, float *dB,
                  float *dX, float *dH0) {
  const uint64_t C = scan::chunks(T);
  FloatScratch carry = carries<true>(dev, A, dY, T, D);
  const Geometry go = geometry(D, C);
  bwd_out_var<<<go.grid, go.threads, 0, stream(dev)>>>(A, B, X, h0, out, dY, carry.get(), T, D, C,
                                                       dA, dB, dX, dH0);
  check_launch("selective_scan bwd_out_var");
}

void scan_diag_bwd(int dev, const float *A, const float *B, const float *X, const float *h0,
                   const float *out, const float *dY, uint64_t T, uint64_t D, float *dA, float *dB,
                   float *dX, float *dH0) {
  namespace sk = scan_kernels;
  const uint64_t C = scan::chunks(T);
  FloatScratch carry = carries<false>(dev, A, dY, T, D);
  // THE TREE's lanes of every 4096-step tree chunk, laid out as cuda/layer_norm.cu's column sums.
  const uint64_t nc = red::chunks_of(T);
  const unsigned lanes = row::col_lanes(T);
  const uint64_t np = nc * lanes * D;  // <= T * D + 255 * D
  FloatScratch part(dev, 2 * np);      // pa (h_{t-1} g lanes), then pb (X g lanes)
  float *pa = part.get(), *pb = pa + np;
  const uint64_t nkw = nc * sk::kQuarters;
  const unsigned warps = sk::fold_warps(T);
  const int smem = (int)sk::fold_smem_bytes(warps);
  cudaStream_t st = stream(dev);  // makes dev current: the attribute is per device
  static SmemAllowed fold_allowed;
  fold_allowed.ensure(dev, sk::bwd_fold, sk::fold_smem_bytes(sk::kFoldWarps),
                      "selective_scan_diag_bwd: cudaFuncSetAttribute");
  const dim3 grid(blocks(D, 32), blocks_y(nkw), 1);
  sk::bwd_fold<<<grid, 32 * warps, smem, st>>>(A, B, X, h0, out, dY, carry.get(), T, D, C, lanes,
                                               nkw, dX, dH0, pa, pb);
  check_launch("selective_scan_diag_bwd bwd_fold");
  if (nc == 1) {
    reduce_axis(dev, red::Op::Sum, pa, 1, lanes, D, 1.0f, dA);
    reduce_axis(dev, red::Op::Sum, pb, 1, lanes, D, 1.0f, dB);
    return;
  }
  // The lane level of both sums in one launch ((2 nc, lanes, D) -> (2 nc, D): the chunk values
  // of dA, then of dB), then the chunk level of each.
  FloatScratch cab(dev, 2 * nc * D);
  reduce_axis(dev, red::Op::Sum, pa, 2 * nc, lanes, D, 1.0f, cab.get());
  reduce_axis(dev, red::Op::Sum, cab.get(), 1, nc, D, 1.0f, dA);
  reduce_axis(dev, red::Op::Sum, cab.get() + nc * D, 1, nc, D, 1.0f, dB);
}

}  // namespace cuda
}  // namespace tlrt
