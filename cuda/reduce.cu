// CUDA backend, reductions: the tree of core/numerics/reduce_tree.hpp, bit for bit the CPU's.
//
// Every reduction is a view (outer, m, inner) of the input, reduced along m for each of the
// outer * inner outputs (whole sum: (1, n, 1); row sums: (rows, cols, 1); column sums:
// (1, rows, cols); N-D axis sums: (prod of the leading dims, dims[axis], prod of the trailing
// dims)), in passes: a pass turns every sequence of m elements into ceil(m / 4096) chunk values
// (the tree's steps 2-3), written to scratch from the stream-ordered pool, and the next pass
// reduces those, until one value per output remains (a sequence of <= 32 elements ends it with
// small_kernel). No atomics, no host synchronisation, no copies: each pass is one launch on the
// library stream, scratch is returned to the pool in stream order right after the launch that
// reads it. A sequence of m elements takes one pass per level of the tree (1 for m <= 4096, 2 for
// m <= 2^24, ...) plus a small_kernel pass when the last level leaves 2..32 partials; each pass
// after the first reads 1/4096 of the bytes of the one before.
//
// fused_kernel_vec4 (contiguous sequences, inner == 1, m > 32, 16-byte aligned, m % 4 == 0: the
// common case): one warp per (sequence, chunk) with float4 loads (chunk_vec4: 512 contiguous bytes
// per warp load, 8 loads in flight per thread); for up to 4096 chunks per sequence and up to 65536
// sequences the warp finishing a sequence's last chunk also reduces its chunk values (the tree's
// next level), so the whole tree is ONE launch (counters, no atomics on data). Longer sequences
// take plain passes first. Bytes: 4 n read (+ 4 n / 4096 partials written and read back).
// Measured (H100, 2026-11-22, bench/results/2026-11-22-h100-reduce.md): 2^26 sum 0.91 of copy
// bandwidth (1.04x torch.sum's time; 0.86 with the separate passes, 0.77 with scalar loads);
// (65536, 1024) row sums 1.00 (0.93x torch); (1024, 65536) row sums 0.96 (1.01x).
// Tried and reverted (2026-11-24): a two-level one-launch tree for sequences over 2^24 elements
// (a counter per group of 4096 chunks, one for the groups), predicted to save the second launch
// of a 2^26 sum (0.91 -> 0.94): measured 0.87 (0.102 ms against 0.098, 1.08x torch): the 16384
// fenced atomics on 4 counters and the serial last-group reduction cost more than the launch.
//
// fused2_kernel_vec4 (cuda/kernels/reduce.cuh; ONE contiguous 16-byte aligned sequence of 2^24 <
// m <= 2^29 elements, m % 4 == 0: the whole-tensor sum / mean / max of 2^26 floats) does it again
// without what made that attempt slow: one ticket per BLOCK of 8 chunks (2048 atomics on one
// counter for 2^26, not 16384 on 4), and the block with the last ticket reduces the 16384 chunk
// values with all its 256 threads (thread t is lane t of each group of 4096: its 16 loads of up to
// 4 groups issued together from L2, one memory latency, then the halving in shared memory), not
// one warp per group walking 4096 values in 8 dependent rounds (~5 us, at the very end of the
// kernel). Bytes: 4 n read + 4 n / 4096 written and read back, as before. Where the time went
// (2026-11-22/24, 2^26 sum, 0.098 ms): pass 1 ~93 us (2048 blocks = 1.94 waves of 8 blocks per
// SM, 8 float4 loads in flight per thread: 256 KB per SM, plenty), then the second launch (launch
// gap + a 4-warp kernel reading 64 KB of partials in dependent rounds + its last warp) ~5 us.
// PREDICTION: the tail drops to ~1.5-2 us: 0.098 -> ~0.095 ms, ~0.94 of copy bandwidth, ~1.0x
// torch.sum (0.095). Not a clear win over torch: pass 1 itself runs at ~2.9 TB/s. Measured
// (H100, 2026-11-24, bench/results/2026-11-24-h100-reduce-fused.md): 0.099 ms, 0.90 of copy
// bandwidth, 1.04x torch.sum: no gain over the two launches (within noise of 0.098); kept as it
// is one launch and bitwise the same; pass 1's read rate is the limit.
// Session 7 tried a persistent per-warp stream kernel (fused2_stream_vec4: 4 blocks per SM, each
// warp's chunks v, v + W, ... as one sequence with 8 float4 loads always in flight, no wave
// boundaries; same bits). Measured (H100, 2026-11-24): 2^26 sum / mean 0.101 ms against 0.100
// for this kernel (torch.sum 0.096): no gain, so it was removed (branch ln7, commit 594c9b3 has
// it). Pass 1's read rate, not the waves or the drains, is the limit.
//
// Session 8 (2026-11-26) measured four more forms of the 2^26 whole sum, all the same tree (the
// code stayed as it is; bench/results/2026-11-26-*-s8-reduce.md): on the H200 (copy 4250 GB/s,
// torch.sum 0.0694 ms) this kernel 0.0729 ms; 2 or 4 warps per chunk, every thread's 16 row loads
// issued together 0.0819 / 0.0840; a ticket per group of 4096 chunks with block-parallel group
// reductions 0.0734; two plain launches (chunk values, then a one-block tail) 0.0712-0.0714; the
// tail as a programmatic dependent launch (griddepcontrol) 0.0774. But on the H100 the two plain
// launches took 0.106 ms against this kernel's 0.099 (torch.sum 0.095): no form is faster on
// both. Probes on the H200 (bench/sum_probe.py, since removed): the first level alone (no ticket,
// no fence) 0.0635 ms, the same as a (16384, 4096) row sum (0.0639); the finish after the last
// chunk (fences, ticket, the last block's loads) costs 7-9 us in every one-launch form: the
// chain of dependent global round trips, not the amount of work, is the cost.
//
// Session 10 measured one more form (fused2_lane_kernel, commit eda33e3): 512-thread blocks, one
// per LANE of the second level (warp r computed the lane's r-th chunk value, thread 0 folded the
// 16 and wrote one lane value), so the last block read 1024 lane values (one load per thread)
// instead of 16384 chunk values; same bits (emulator test). PREDICTED: the finish ~7.4 -> ~2 us,
// 0.099 -> ~0.094 ms. MEASURED (H100, 2026-11-27, bench/reduce.py, two A/B runs in one session):
// 0.098 / 0.097 against this kernel's 0.099 / 0.099, then 0.099 / 0.100 against 0.098 / 0.098
// (torch.sum 0.094-0.096): no difference beyond noise, so the last block's loads were not the
// cost either; removed. The 2^26 whole sum stays at ~1.03-1.05x torch.sum.
//
// Session 15 (no GPU time; emulated bit for bit by test_reduce_emu; measured in session 16): the
// finish's own instructions. The last block's 64 loads of chunk values each rebuilt a 64-bit
// index, compared it twice and reloaded a kernel parameter (~500 instructions a thread on one SM,
// after every other block is done), and its halving took 8 barriers. Now a base pointer with
// compile-time offsets and no bounds tests where the batch's four groups are whole (the 2^26
// case), and h = 16 .. 1 as warp 0's shuffles (3 barriers). PREDICTED: ~0.7 us of the 7-9 us
// finish (0.099 -> ~0.098 ms on the H100): not enough alone for torch.sum's 0.095. MEASURED
// (H100, 2026-11-27, bench/results/2026-11-27-h100-s16-reduce.md): 0.095 ms against torch.sum's
// 0.095 in the same process (1.00x, 0.94 of copy bandwidth; mean 1.01x), a run-to-run spread of
// ~1% on both sides, so not separable from the prediction's 0.7 us.
// warp_kernel (contiguous sequences that are not 16-byte aligned or not a multiple of 4 long, and
// the general gather of tlrt_reduce_from_broadcast through an index decoder): one warp per
// (sequence, chunk); lane w holds the tree's lanes t = 32 g + w (g = 0..7) in 8 registers, reads
// chunk element t + 256 r (each warp load 128 contiguous bytes; 16 loads in flight per thread),
// folds them in r order, halving h = 128, 64, 32 in registers and h = 16..1 with
// __shfl_down_sync (chunk_scalar). Bytes: 4 n read + 4 n / 4096 written per pass.
//
// cols_kernel (strided sequences, inner > 1, m > 32: column sums, inner N-D axes): one block of
// 256 threads per (outer index, chunk of 4096 rows, tile of 32 columns); warp v (0..7) lane x
// owns column tile * 32 + x and the tree's lanes t = v + 8 g (g = 0..31) of that column in 32
// registers, so every warp load reads 32 consecutive floats of one row (coalesced, 128 bytes),
// 32 independent loads in flight per thread; halving h = 128..8 in registers, h = 4, 2, 1 through
// 1 KiB of shared memory. Bytes: 4 * outer * m * inner read + 4 * outer * inner * ceil(m / 4096)
// written. Column tiles narrower than 32 (inner % 32) idle the other lanes: inner in 2..31 reads
// at a fraction of the bandwidth. Measured (H100, 2026-11-22): (65536, 1024) column sums 0.94
// of copy bandwidth (0.80x torch), column max 0.79 (0.95x); (1024, 65536) column sums 0.83
// (1.08x torch: short columns of 1024 rows, one partial chunk per block), column max 0.74 (1.21x).
//
// small_kernel (m <= 32, any inner; also the last pass over <= 32 partials): one thread per
// output, the tree as red::small (W = next power of two >= m values in registers); threads run
// across the inner index, so for inner > 1 each of the m loads is coalesced across the warp, for
// inner == 1 a warp reads 32 * m contiguous floats. Bytes: 4 * outer * m * inner read +
// 4 * outer * inner written. (Only small shapes reach it: not benchmarked.)
//
// Built with -fmad=false; additions are single IEEE operations and max is ew::max_f, as on the
// CPU, so the backends agree bit for bit (the parity suite checks every entry point).
#include <mutex>
#include <utility>

#include "core/backend/memory.hpp"
#include "core/backend/reduce.hpp"
#include "cuda/common/launch.cuh"
#include "cuda/kernels/reduce.cuh"

namespace tlrt {
namespace cuda {

namespace {

using red_kernels::chunk_scalar;
using red_kernels::chunk_vec4;
using red_kernels::fused2_kernel_vec4;
using red_kernels::kThreads;
using red_kernels::kWarps;
using red_kernels::L2Contig;

// Sources of warp_kernel: sequence s, element e.
struct Contig {
  const float *x;
  uint64_t m;
  __device__ __forceinline__ uint64_t base(uint64_t s) const { return s * m; }
  __device__ __forceinline__ float at(uint64_t b, uint64_t e) const { return x[b + e]; }
};

struct Gather {
  const float *x;
  red::Strided p;
  __device__ __forceinline__ uint64_t base(uint64_t s) const {
    return red::strided_offset(s, p.kr, p.kdim, p.kstride);
  }
  __device__ __forceinline__ float at(uint64_t b, uint64_t e) const {
    return x[b + red::strided_offset(e, p.rr, p.rdim, p.rstride)];
  }
};

// One pass over sequences with contiguous elements (inner == 1): one warp per (sequence, chunk).
template <red::Op OP, class Src>
__global__ void __launch_bounds__(kThreads)
    warp_kernel(Src src, uint64_t nseq, uint64_t m, uint64_t nc, float div, float *__restrict y) {
  const uint64_t tasks = nseq * nc;
  for (uint64_t task = (uint64_t)blockIdx.x * kWarps + (threadIdx.x >> 5); task < tasks;
       task += (uint64_t)gridDim.x * kWarps) {
    const uint64_t s = task / nc;
    const uint64_t e0 = (task - s * nc) * red::kChunk;
    const uint64_t len = m - e0 < red::kChunk ? m - e0 : red::kChunk;
    const float v = chunk_scalar<OP>(src, src.base(s), e0, len);
    if ((threadIdx.x & 31u) == 0) y[task] = red::finish(v, nc == 1 ? div : 1.0f);
  }
}

// Contiguous, 16-byte aligned sequences (x aligned, m % 4 == 0) of at most kChunk^2 = 2^24
// elements, the whole tree in ONE launch: one warp per (sequence, chunk) computes the chunk value
// with float4 loads; with several chunks it writes the value to partials[s * nc + k] and counts
// the chunks done in counters[s]; the warp that completes the count reduces the nc <= 4096
// partials of its sequence (the tree's next level: one chunk) and writes y[s], and resets the
// counter for the next launch. The chunk values are those of the pass-by-pass evaluation, so the
// result is the same tree, bit for bit; it saves the launches of the later passes (about 3 us
// each, 5-10% of a 2^26-element sum). With counters == NULL it is one plain pass instead (chunk
// values to y[task]), for the first pass of sequences longer than 2^24.
template <red::Op OP>
__global__ void __launch_bounds__(kThreads)
    fused_kernel_vec4(const float *__restrict x, uint64_t nseq, uint64_t m, uint64_t nc, float div,
                      float *partials, unsigned *counters, float *__restrict y) {
  const unsigned w = threadIdx.x & 31u;
  const uint64_t tasks = nseq * nc;
  for (uint64_t task = (uint64_t)blockIdx.x * kWarps + (threadIdx.x >> 5); task < tasks;
       task += (uint64_t)gridDim.x * kWarps) {
    const uint64_t s = task / nc;
    const uint64_t e0 = (task - s * nc) * red::kChunk;
    const uint64_t len = m - e0 < red::kChunk ? m - e0 : red::kChunk;
    const float v = chunk_vec4<OP>(x + s * m + e0, len);
    if (nc == 1 || counters == nullptr) {  // one chunk, or a plain pass writing chunk values
      if (w == 0) y[task] = red::finish(v, nc == 1 ? div : 1.0f);
      continue;
    }
    unsigned last = 0;
    if (w == 0) {
      partials[task] = v;
      __threadfence();  // the value is visible device-wide before the count says so
      last = atomicAdd(counters + s, 1u) == (unsigned)(nc - 1);
    }
    last = __shfl_sync(0xFFFFFFFFu, last, 0);
    if (!last) continue;
    __threadfence();
    const float r = chunk_scalar<OP>(L2Contig{partials}, s * nc, 0, nc);
    if (w == 0) {
      y[s] = red::finish(r, div);
      counters[s] = 0;
    }
  }
}

// Sums: at most 64 registers (4 blocks of 256 threads per SM), so the 512 blocks of (65536, 1024)
// column sums are one wave on a 132-SM GPU instead of 1.3. Max (selects need more registers) would
// spill at 64. It had 3 blocks per SM (80 registers), which both spilled (sm_90 -Xptxas -v: 48-byte
// stack frame, 80 / 104 bytes of spill stores / loads per thread) and left the 512 blocks of
// (65536, 1024) in 1.3 waves (the second 30% full): 0.80 of copy bandwidth against the sums' 0.95.
// Now 2 blocks per SM (96 registers, no spills): 512 blocks = 1.94 waves of 264, 64 KB of loads in
// flight per SM (32 per thread). PREDICTION: (65536, 1024) max axis0 0.80 -> ~0.9; (1024, 65536)
// 0.73 -> ~0.78 (no spills; its short columns keep the rest of the gap, as for the sums' 0.84).
// Measured (H100, 2026-11-24): (65536, 1024) 0.80 -> 0.92 (0.82x torch); (1024, 65536) 0.73 ->
// 0.81 (1.09x torch).
template <red::Op OP>
__global__ void __launch_bounds__(kThreads, OP == red::Op::Sum ? 4 : 2)
    cols_kernel(const float *__restrict x, uint64_t outer, uint64_t m, uint64_t inner, uint64_t nc,
                float div, float *__restrict y) {
  using O = red::Ops<OP>;
  __shared__ float sh[kWarps][32];
  const unsigned lx = threadIdx.x & 31u;  // column within the tile
  const unsigned v = threadIdx.x >> 5;    // owns the tree's lanes v + 8 g
  const uint64_t tiles = (inner + 31) / 32;
  const uint64_t tasks = outer * nc * tiles;
  for (uint64_t task = blockIdx.x; task < tasks; task += gridDim.x) {
    // Consecutive blocks take neighbouring column tiles of the same rows.
    const uint64_t tile = task % tiles;
    const uint64_t rest = task / tiles;
    const uint64_t k = rest % nc;
    const uint64_t o = rest / nc;
    const uint64_t c = tile * 32 + lx;
    const bool valid = c < inner;
    const uint64_t e0 = k * red::kChunk;
    const uint64_t len = m - e0 < red::kChunk ? m - e0 : red::kChunk;
    float a[32];
#pragma unroll
    for (int g = 0; g < 32; ++g) a[g] = O::identity();
    if (valid) {
      const float *col = x + (o * m + e0 + v) * inner + c;  // element e = v + 8 g + 256 r
      const uint64_t step8 = 8 * inner;
      if (len == red::kChunk) {
#pragma unroll 1
        for (unsigned r = 0; r < red::kDepth; ++r) {
          const float *p = col + (uint64_t)r * red::kLanes * inner;
#pragma unroll
          for (unsigned g = 0; g < 32; ++g) a[g] = O::op(a[g], p[g * step8]);
        }
      } else {
        // Rows of 256 present in full need no bounds checks; then the partial last row.
        const unsigned full = (unsigned)(len / red::kLanes);
#pragma unroll 1
        for (unsigned r = 0; r < full; ++r) {
          const float *p = col + (uint64_t)r * red::kLanes * inner;
#pragma unroll
          for (unsigned g = 0; g < 32; ++g) a[g] = O::op(a[g], p[g * step8]);
        }
        const float *p = col + (uint64_t)full * red::kLanes * inner;
#pragma unroll
        for (unsigned g = 0; g < 32; ++g)
          if (full * red::kLanes + v + 8 * g < len) a[g] = O::op(a[g], p[g * step8]);
      }
    }
    // Halving: lane t = v + 8 g; h = 128, 64, 32, 16, 8 pair registers of one thread.
#pragma unroll
    for (int g = 0; g < 16; ++g) a[g] = O::op(a[g], a[g + 16]);
#pragma unroll
    for (int g = 0; g < 8; ++g) a[g] = O::op(a[g], a[g + 8]);
#pragma unroll
    for (int g = 0; g < 4; ++g) a[g] = O::op(a[g], a[g + 4]);
    a[0] = O::op(a[0], a[2]);
    a[1] = O::op(a[1], a[3]);
    a[0] = O::op(a[0], a[1]);
    sh[v][lx] = a[0];
    __syncthreads();
    if (v == 0 && valid) {  // h = 4, 2, 1 over the lanes t = 0..7 of this column
      float s[kWarps];
#pragma unroll
      for (int t = 0; t < 8; ++t) s[t] = sh[t][lx];
#pragma unroll
      for (int t = 0; t < 4; ++t) s[t] = O::op(s[t], s[t + 4]);
      s[0] = O::op(s[0], s[2]);
      s[1] = O::op(s[1], s[3]);
      s[0] = O::op(s[0], s[1]);
      y[(o * nc + k) * inner + c] = red::finish(s[0], nc == 1 ? div : 1.0f);
    }
    __syncthreads();
  }
}

template <red::Op OP, unsigned W>
__global__ void __launch_bounds__(kThreads)
    small_kernel(const float *__restrict x, uint64_t outer, unsigned m, uint64_t inner, float div,
                 float *__restrict y) {
  const uint64_t n = outer * inner;
  for (uint64_t q = (uint64_t)blockIdx.x * kThreads + threadIdx.x; q < n;
       q += (uint64_t)gridDim.x * kThreads) {
    const uint64_t o = q / inner;
    const float *p = x + o * m * inner + (q - o * inner);
    const float r = red::small<OP, W>([=](unsigned j) { return p[(uint64_t)j * inner]; }, m);
    y[q] = red::finish(r, div);
  }
}

template <red::Op OP>
void launch_small(int dev, cudaStream_t s, const float *x, uint64_t outer, uint64_t m,
                  uint64_t inner, float div, float *y) {
  const unsigned grid = grid_for(outer * inner, kThreads, dev);
  const unsigned mm = (unsigned)m;
  switch (red::pow2_at_least(m)) {
    case 1: small_kernel<OP, 1><<<grid, kThreads, 0, s>>>(x, outer, mm, inner, div, y); break;
    case 2: small_kernel<OP, 2><<<grid, kThreads, 0, s>>>(x, outer, mm, inner, div, y); break;
    case 4: small_kernel<OP, 4><<<grid, kThreads, 0, s>>>(x, outer, mm, inner, div, y); break;
    case 8: small_kernel<OP, 8><<<grid, kThreads, 0, s>>>(x, outer, mm, inner, div, y); break;
    case 16: small_kernel<OP, 16><<<grid, kThreads, 0, s>>>(x, outer, mm, inner, div, y); break;
    default: small_kernel<OP, 32><<<grid, kThreads, 0, s>>>(x, outer, mm, inner, div, y); break;
  }
  check_launch("reduction small_kernel");
}

// Chunk counters of fused_kernel_vec4: kMaxFusedSeq per device, zero between launches (each
// launch's last warp per sequence resets its own), allocated once with cudaMalloc outside the
// stream-ordered pool (so that tlrt_allocator_trim can still empty the pool) and kept for the life
// of the process. More sequences than that (over 2^28 elements with chunks of 4096) take the
// pass-by-pass path, where the extra launches cost nothing measurable.
constexpr uint64_t kMaxFusedSeq = 65536;
ZeroedCounters g_counters[kMaxCudaDevices];

unsigned *chunk_counters(int dev) {
  return zeroed_counters(g_counters[dev], kMaxFusedSeq, "cudaMalloc (reduction counters)");
}

// plain: one pass, y receives outer * nc chunk values; otherwise the whole tree (nc <= kChunk and
// outer <= kMaxFusedSeq when nc > 1).
template <red::Op OP>
void fused(int dev, cudaStream_t s, const float *x, uint64_t outer, uint64_t m, uint64_t nc,
           float div, float *y, bool plain) {
  if (plain) {
    fused_kernel_vec4<OP><<<blocks(outer * nc, kWarps), kThreads, 0, s>>>(x, outer, m, nc, div,
                                                                           nullptr, nullptr, y);
    check_launch("reduction fused_kernel_vec4 (pass)");
    return;
  }
  FloatScratch part;
  if (nc > 1) part = FloatScratch(dev, outer * nc);
  unsigned *counters = nc > 1 ? chunk_counters(dev) : nullptr;
  fused_kernel_vec4<OP><<<blocks(outer * nc, kWarps), kThreads, 0, s>>>(x, outer, m, nc, div,
                                                                         part.get(), counters, y);
  check_launch("reduction fused_kernel_vec4");
}

// One contiguous sequence of kChunk < nc <= kChunk * kSmall chunks: the whole tree in one launch.
template <red::Op OP>
void fused2(int dev, cudaStream_t s, const float *x, uint64_t m, uint64_t nc, float div,
            float *y) {
  FloatScratch part(dev, nc);
  unsigned *counter = chunk_counters(dev);
  fused2_kernel_vec4<OP><<<blocks(nc, kWarps), kThreads, 0, s>>>(x, m, nc, div, part.get(),
                                                                  counter, y);
  check_launch("reduction fused2_kernel_vec4");
}

// The passes over the (outer, m, inner) view; m >= 1, outer * inner >= 1.
template <red::Op OP>
void passes(int dev, const float *x, uint64_t outer, uint64_t m, uint64_t inner, float div,
            float *y) {
  cudaStream_t s = stream(dev);
  FloatScratch held;  // the partials x points into, after the first pass
  for (;;) {
    if (m <= red::kSmall) {
      launch_small<OP>(dev, s, x, outer, m, inner, div, y);
      return;
    }
    const uint64_t nc = red::chunks_of(m);
    const bool vec4 = inner == 1 && m % 4 == 0 && ((uintptr_t)x & 15u) == 0;
    if (vec4 && outer == 1 && nc > red::kChunk &&
        nc <= (uint64_t)red::kChunk * red::kSmall) {  // two levels in one launch
      fused2<OP>(dev, s, x, m, nc, div, y);
      return;
    }
    if (vec4 && nc <= red::kChunk && (nc == 1 || outer <= kMaxFusedSeq)) {  // all in one launch
      fused<OP>(dev, s, x, outer, m, nc, div, y, false);
      return;
    }
    FloatScratch next;
    float *dst = y;
    if (nc > 1) {
      next = FloatScratch(dev, outer * nc * inner);  // <= outer * m * inner: no overflow
      dst = next.get();
    }
    if (vec4) {
      fused<OP>(dev, s, x, outer, m, nc, div, dst, true);  // one pass of chunk values
    } else if (inner == 1) {
      warp_kernel<OP, Contig><<<blocks(outer * nc, kWarps), kThreads, 0, s>>>(Contig{x, m}, outer,
                                                                                m, nc, div, dst);
      check_launch("reduction warp_kernel");
    } else {
      const uint64_t tasks = outer * nc * ((inner + 31) / 32);
      cols_kernel<OP><<<blocks(tasks, 1), kThreads, 0, s>>>(x, outer, m, inner, nc, div, dst);
      check_launch("reduction cols_kernel");
    }
    if (nc == 1) return;
    held = std::move(next);  // the previous partials go back to the pool, in stream order
    x = held.get();
    m = nc;
  }
}

}  // namespace

void reduce_axis(int dev, red::Op op, const float *x, uint64_t outer, uint64_t m, uint64_t inner,
                 float div, float *y) {
  switch (op) {
    case red::Op::Sum:
      passes<red::Op::Sum>(dev, x, outer, m, inner, div, y);
      break;
    case red::Op::Max:
      passes<red::Op::Max>(dev, x, outer, m, inner, div, y);
      break;
  }
}

void reduce_strided(int dev, const float *x, const red::Strided &p, float *y) {
  cudaStream_t s = stream(dev);
  const uint64_t nc = red::chunks_of(p.m);
  FloatScratch part;
  float *dst = y;
  if (nc > 1) {
    part = FloatScratch(dev, p.nq * nc);
    dst = part.get();
  }
  warp_kernel<red::Op::Sum, Gather><<<blocks(p.nq * nc, kWarps), kThreads, 0, s>>>(
      Gather{x, p}, p.nq, p.m, nc, 1.0f, dst);
  check_launch("reduction warp_kernel (gather)");
  if (nc > 1) passes<red::Op::Sum>(dev, dst, p.nq, nc, 1, 1.0f, y);
}

}  // namespace cuda
}  // namespace tlrt
