// CUDA backend, softmax, log-softmax and the hard-masked row softmax, with backward kernels: the
// definitions of abi/tlrt_softmax.h with the formulas of core/numerics/row_ops.hpp and THE TREE of
// core/numerics/reduce_tree.hpp, bit for bit the CPU's. Built with -fmad=false; exp / log are the
// shared tlrt::math functions, divisions __fdiv_rn; no atomics; everything on the library stream.
//
// Three strategies, chosen by cols (all grid sizes capped at 2^31 - 1 blocks, kernels loop past
// it):
//
// seg_fwd / seg_bwd (cols <= 32; cuda/kernels/softmax.cuh): a segment of W = pow2_at_least(cols)
// lanes per row, lane j holding element j: a warp reads 32 / W consecutive rows as one contiguous
// run, each thread U = 4 rows at a time (4 loads in flight, 8 backward). The sum is red::small<W>
// (the tree of <= 32 elements) evaluated across the segment by __shfl_down_sync (lane t adds lane
// t + h, h = W/2 .. 1: the same additions in the same order), the maximum by xor shuffles. Bytes:
// 8 per element forward (masked 12), 12 backward. Before (2026-11-22): one thread per row, each
// thread reading its own row (a warp load touching 32 rows, 8 times over for cols = 8; the
// per-thread exp / division chains serialised): softmax 0.28 (8 columns, 3.2x PyTorch),
// log_softmax 0.54, softmax_bwd 0.77, log_softmax_bwd 0.37 (2.8x). PREDICTION: coalesced 128-byte
// warp accesses and one element per thread: ~0.8 of copy bandwidth for all four at 8 columns,
// ~0.85 at 32 (the shuffles, 2 log2(W) per element, stay under the ~60 instructions the bandwidth
// leaves per element). Measured (H100, 2026-11-24): at 8 columns softmax 0.79, log_softmax 0.63,
// masked 0.97, softmax_bwd 1.00, log_softmax_bwd 1.00 of copy bandwidth (1.13x / 1.36x PyTorch
// forward; backward 0.50x / 1.01x). Log-softmax there evaluated log(s) in every lane for every
// one of its U = 4 rows (the lanes of a segment share s): 4 logs (~25 instructions each) per
// element. NOW (session 7, seg_logs): lane j computes only the log of row j % 4 of its segment and
// the segment's lanes 0..3 pass them round by 4 shuffles (the same log_f of the same value): 1 log
// + 4 shuffles + 3 selects per element. SASS (sm_90, static count of the kernel): seg_fwd
// log-softmax W = 8 480 -> 424 instructions (4 elements per thread), W = 4 448 -> 352.
// PREDICTION: at 8 columns 0.63 -> ~0.7 of copy bandwidth (0.282 -> ~0.25 ms, PyTorch 0.208): the
// log was not the only gap (softmax's division costs as much). Measured: not alone (no
// bench/results run between seg_logs and the next change, the integer-key seg_max below); with
// both (H100, 2026-11-24, bench/results/2026-11-24-h100-s7-softmax.md): log_softmax 0.282 ->
// 0.229 ms at (8388608, 8), 0.63 -> 0.78 of copy bandwidth (1.11x PyTorch): past the ~0.7.
// ALSO (session 7, later): the segment maximum (row::dev::seg_max) compares integer keys (2
// instructions per shuffle step instead of ew::max_f's 7 of compares and selects for NaNs and
// signed zeros; the same maximum, NaN the canonical one as before on the GPU). SASS (sm_90,
// instructions of the loop body per 4 elements a thread): W = 8 softmax 358 -> 330, log-softmax
// 398 -> 368 (about 90 -> 83 and 100 -> 92 per element, still above the ~79 warp-instruction
// slots per 32 elements that 3 TB/s at 8 bytes per element leaves an H100). PREDICTION: at 8
// columns softmax / log-softmax ~5-8% faster than after seg_logs alone.
// Measured (H100, 2026-11-24, bench/results/2026-11-24-h100-s7-softmax.md; before:
// 2026-11-24-h100-softmax-pipe.md): softmax (no seg_logs) 0.221 -> 0.210 ms at (8388608, 8), 0.81
// -> 0.85 of copy bandwidth (1.07x PyTorch): 5%, the prediction held. Log-softmax has no figure
// after seg_logs alone to compare with; both changes together: 0.282 -> 0.229 ms (above).
//
// warp_fwd (32 < cols <= 128 forward; cuda/kernels/softmax.cuh): one warp per row, K = 2 or 4
// values per lane (every slot an element; the group kernel below keeps 8 slots per thread of which
// only 2 or 4 hold elements at these widths), U = 4 or 2 rows per warp at once so that each thread
// has 8 loads in flight; the tree's halving h >= 32 in the thread, h = 16 .. 1 by shuffles: the
// group kernel's order. 32-48 registers. Before (2026-11-22): softmax 0.45, log_softmax 0.43 of
// copy bandwidth at 64 columns (2.2x PyTorch). PREDICTION: ~0.75-0.8 (5 + 5 shuffles per row, i.e.
// per 2 elements a lane at 64 columns, are the remaining cost). Measured (H100, 2026-11-24): 0.84
// / 0.73 at 64 columns (1.17x / 1.33x PyTorch), masked 0.85. NOW (session 7): log-softmax takes
// its U row logs as seg_fwd does (lane T computes log(s) of row T % U only, shuffles hand them
// round): 1 log per lane instead of U = 4 (64 columns) or 2 (128). SASS (static): 1528 -> 1264
// instructions at 64 columns (8 elements per thread), 1072 -> 896 at 128. PREDICTION: log_softmax
// at 64 columns 0.73 -> ~0.8 of copy bandwidth (0.242 -> ~0.22 ms, PyTorch 0.182). Softmax is
// unchanged (its per-element division is the cost). Measured (H100, 2026-11-24): log_softmax
// 0.242 -> 0.236 ms at (1048576, 64) (PyTorch 0.181), softmax 0.214 (PyTorch 0.183).
// Instructions per element (SASS, loop body per 8 elements a thread): softmax 650 = 81 (of them
// the warp maximum: 5 shuffle steps of 7 instructions per row, 17.5 per element; the exp ~22, the
// division ~13 with its slow-path test and reconvergence, the sum 6), log-softmax 565 = 71; with
// ~79 issue slots per element at copy bandwidth these kernels are issue-bound (loads in flight:
// 8 per thread, 32-47 registers: 5-8 blocks of 256 per SM, 40-64 KB per SM, enough). NOW: the
// integer-key seg_max: 650 -> 533 (67 per element) softmax, 565 -> 458 (57) log-softmax.
// PREDICTION: softmax 0.214 -> ~0.19 ms (0.84 -> ~0.94 of copy bandwidth, ~1.04x PyTorch),
// log-softmax 0.236 -> ~0.21 (it stays slower than softmax at fewer instructions: 47 registers,
// 5 blocks per SM, and the log at the end of each group of rows lengthen its dependency chain).
// Measured (H100, 2026-11-24, bench/results/2026-11-24-h100-s7-softmax.md): at (1048576, 64)
// softmax 0.214 -> 0.199 ms (0.90 of copy bandwidth, 1.09x PyTorch), log-softmax 0.236 -> 0.215
// (0.83, 1.19x): log-softmax about as predicted, softmax short of ~0.19 / ~0.94.
//
// group_fwd / group_bwd (32 < cols <= 8192 forward, <= 4096 backward): one group of NT threads per
// row (NT = 32 for cols <= 1024 forward / 512 backward, then 64, 128, 256 as cols doubles; a
// 256-thread block holds 256 / NT rows), the whole row in registers (at most 32 values per thread
// forward, 16 + 16 backward), so every input element is read once and every output written once:
// 8 bytes per element (softmax, log-softmax), 12 (masked: x and mask read; backward: y and g read).
// Thread T holds the tree's lanes T + NT k (row::dev::Layout): each warp access is 128 contiguous
// bytes, all of a thread's loads are issued before the first use (up to 32 in flight). Per row: the
// maximum (order-free: xor-shuffles, then one exchange through shared memory when NT > 32), the
// exponentials folded into the lanes in the tree's order (the tree's step 2), the halving (steps
// h >= NT in registers, h = NT/2..32 through shared memory after one barrier, h = 16..1 by
// shuffles; a two-chunk row adds its two chunk values, the tree's next level), then e / s (or
// (x - m) - log s) written from registers. Double-buffered shared memory: one barrier per
// reduction. Measured 2026-11-22: softmax 0.82 / 0.67, log_softmax 0.76 / 0.69 of copy bandwidth at
// 1024 / 4096 columns (1.17-1.28x PyTorch). SASS (nvdisasm, sm_90) of the 1024-column kernel: 736
// instructions for 8 elements per thread (softmax), 536 (log-softmax), i.e. 67-90 per element:
// the exp (~20, of which 6 compares / selects for its clamps and special cases) and the division
// (~10 with FCHK and its slow-path branch) plus ~15 per element of bounds tests and the
// BSSY / BSYNC reconvergence around them. At 3 TB/s and 8 bytes per element an H100 issues at most
// ~75-85 warp instructions per 32 elements, so these kernels are issue-bound, not memory-bound.
// Rows that fill the layout exactly (cols == NC * R * 256: 256, 512, 1024, 2048, 4096, 8192) now
// take a FULL instantiation without per-element bounds tests: 736 -> 616 (softmax), 536 -> 448
// (log-softmax) at 1024 columns, 1216 -> 1088 / 928 -> 808 at 4096 (the operations on the
// elements are the same). PREDICTION: instruction-bound time down by the same 12-16%: softmax
// 0.82 -> ~0.92, log_softmax 0.76 -> ~0.88 at 1024 columns; 0.67-0.69 -> ~0.75 at 4096 (there
// also one row per 256-thread block and two barriers per row). Measured (H100, 2026-11-24,
// bench/results/2026-11-24-h100-softmax-fused.md): 0.97 / 0.97 at 1024 columns (0.98x / 0.99x
// PyTorch), 0.97 / 0.97 at 4096 (0.80x / 0.83x): above the prediction.
//
// block_row_bwd (4096 < cols <= 8192 backward; the limit and why: kBlockRowBwdMaxCols below;
// cuda/kernels/softmax.cuh): one 256-thread block per row and every pass in ONE kernel. Thread T
// is the tree's lane T of every chunk; the block walks the row: the sum of the terms two chunks at
// a time (32 loads in flight; both chunks' lanes halved with one barrier; chunk values in shared
// memory, then one more halving over them: the tree's next level), then the outputs (16 loads
// issued before their stores). The grid holds about 24 MB of rows in flight
// (row::dev::block_row_grid), so the second read of a row comes from L2: DRAM traffic is the
// nominal 12 bytes per element. Registers: 64-77, no spills. Its forward twin block_row_fwd
// (8192 < cols <= 16384 unmasked, until session 7) measured 0.50 / 0.53 of copy bandwidth at
// (4096, 16384) (softmax / log-softmax; the chunk passes 0.37 / 0.41), 0.23 at (1024, 65536) (one
// 8-warp block per SM, too few loads in flight): replaced by split_fwd.
//
// split_fwd (8192 < cols <= 65536 forward, all three kinds; session 7; cuda/common/split_row.cuh,
// cuda/kernels/softmax.cuh): the row in REGISTERS, read once: Q groups of 256 threads, group q
// holding chunks q + Q j (j < NCL), thread T the tree's lane T of each (16 values per chunk). Per
// row: max (one word per warp, one group-wide barrier), exp folded in the tree's order, each
// chunk's halving in its block (one block barrier), chunk values in shared memory (one group-wide
// barrier), the tree's next level over the Q * NCL chunk values in every thread, the outputs from
// registers. Same operations, same order, same bits as the stub and the chunk passes. Bytes: 8
// per element (masked 12), against block_row_fwd's three reads of x (two from L2) and the chunk
// passes' 16. Schedules (the winners of the H100 runs of 2026-11-24; the others were removed):
//   cols <= 16384, softmax / log-softmax: one block of Q = 2 groups, NCL = 2 (512 threads, 32
//     values per thread, 61-64 registers with __launch_bounds__(512, 2): 2 rows, 32 warps per SM).
//   cols <= 16384, masked: the same split as a CLUSTER of Q = 2 blocks of 256 threads (NCL = 2;
//     3 blocks per SM): 0.317 ms against the 512-thread block's 0.438 at (4096, 16384). Why the
//     cluster form wins only for masked rows (x and mask loads: 64 per thread) was not profiled.
//   16384 < cols <= 32768: a cluster of Q = 4 blocks, NCL = 2 (69-80 registers, 3 blocks per SM).
//   32768 < cols <= 65536: a cluster of Q = 4 blocks, NCL = 4 (64 values per thread, 119-128
//     registers, 2 blocks per SM); masked Q = 8, NCL = 2 (x and mask loads of 64 values need more
//     than 128 registers).
// Clusters (sm_90: the groups exchange the max words and chunk values through distributed shared
// memory, mapa + ld.shared::cluster, and barrier.cluster; one cluster per row) are taken only on a
// device of compute capability >= 9 (split_row::split_has_clusters): without them (sm_80 / sm_89)
// masked rows up to 16384 columns take the 512-thread block and rows over 16384 the chunk passes.
// PREDICTION (before the run): ~0.85 of copy bandwidth at (4096, 16384), ~0.75-0.8 at (1024,
// 65536). Measured (H100, 2026-11-24, ms; fraction of copy bandwidth; ratio to PyTorch):
//   (4096, 16384): softmax 0.361 -> 0.190 (0.94, 0.86x), log-softmax 0.339 -> 0.190 (0.94,
//     0.91x), masked 0.805 -> 0.317 (0.85, 0.48x) (before: block_row_fwd / the chunk passes).
//   (1024, 65536): softmax 0.482 -> 0.265 (0.68, 0.72x), log-softmax 0.251 (0.71), masked 0.398
//     (0.67). Other schedules measured there (cluster Q = 8 NCL = 2 unmasked: 0.286; Q = 4 NCL = 4
//     masked: 0.449, 80 bytes of spills) were slower. (2048, 32768) was not measured.
//   Persistent clusters (as many as fit at once, each looping over rows; hypothesis: one cluster
//   per row pays a co-scheduled launch and an exit barrier per row) were tried and measured no
//   faster (2026-11-24: (1024, 65536) softmax 0.264 against 0.262 ms, masked 0.419 against 0.406;
//   (4096, 16384) masked 0.344 against 0.327): removed. Final figures of the merged tree (same
//   day): (4096, 16384) softmax 0.193 (0.88x torch), masked 0.327 (0.50x); (2048, 32768) 0.244
//   (0.74 of copy bandwidth, 0.73x), log-softmax 0.221; (1024, 65536) 0.262 (0.71x), log-softmax
//   0.231 (0.63x), masked 0.406 (0.51x).
// Longer rows (cols > 65536): the chunk-parallel passes below, one 256-thread block per (row,
// chunk of 4096): chunk maxima -> reduce_axis (Max) -> row maxima; chunk sums of e -> reduce_axis
// -> row sums; then one pass writing the outputs (recomputing e). 16 bytes per element forward,
// 12 + 4 backward.

#include "core/backend/memory.hpp"
#include "core/backend/reduce.hpp"
#include "core/backend/softmax.hpp"
#include "cuda/common/launch.cuh"
#include "cuda/kernels/softmax.cuh"

namespace tlrt {
namespace cuda {

namespace {

using row::Kind;
using row::dev::chunk_map;
using row::dev::chunk_reduce;
using row::dev::Exchange;
using row::dev::group_max;
using row::dev::kThreads;
using row::dev::Layout;
using row::dev::row_sums;

// ---- one group of NT threads per row, the row in registers --------------------------------------

template <Kind KIND, unsigned NT, unsigned NC, unsigned R, bool FULL>
__global__ void __launch_bounds__(kThreads)
    group_fwd(const float *__restrict x, const float *__restrict mask, uint64_t rows, uint64_t cols,
              float *__restrict y) {
  using L = Layout<NT, NC, R>;
  static_assert(L::V <= 32, "the blocked-entry mask is one 32-bit word");
  __shared__ float sh[2][kThreads * NC];
  Exchange<kThreads * NC> ex{sh, 0};
  const unsigned T = threadIdx.x % NT;
  const uint64_t g0 = threadIdx.x / NT;
  // Block-uniform loop (every group of the block runs every barrier).
  for (uint64_t first = (uint64_t)blockIdx.x * L::kGroups; first < rows;
       first += (uint64_t)gridDim.x * L::kGroups) {
    const uint64_t rw = first + g0;
    const bool active = rw < rows;
    const uint64_t base = active ? rw * cols : 0;
    float v[L::V];
    uint32_t blocked = 0;
#pragma unroll
    for (unsigned i = 0; i < L::V; ++i) {
      const unsigned e = L::off(T, i);
      v[i] = row::neg_inf();
      if (active && (FULL || e < cols)) {
        v[i] = x[base + e];
        if (KIND == Kind::Masked && !row::allowed(mask[base + e])) blocked |= 1u << i;
      }
    }
    float m = row::neg_inf();
#pragma unroll
    for (unsigned i = 0; i < L::V; ++i)
      m = ew::max_f(m, ((blocked >> i) & 1u) ? row::neg_inf() : v[i]);
    m = group_max<NT>(m, ex);
    float s[1];
    row_sums<NT, NC, R, 1, FULL>(
        [&](unsigned, unsigned i) {
          const float e = ((blocked >> i) & 1u) ? 0.0f : row::shifted_exp(v[i], m);
          if (KIND != Kind::LogSoftmax) v[i] = e;
          return e;
        },
        cols, active, ex, s);
    if (active) {
      const float ls = KIND == Kind::LogSoftmax ? math::log_f(s[0]) : 0.0f;
      const bool none = KIND == Kind::Masked && m == row::neg_inf();
#pragma unroll
      for (unsigned i = 0; i < L::V; ++i) {
        const unsigned e = L::off(T, i);
        if (!FULL && e >= cols) continue;
        float out;
        if constexpr (KIND == Kind::LogSoftmax)
          out = row::log_softmax_out(v[i], m, ls);
        else if constexpr (KIND == Kind::Masked)
          out = (none || ((blocked >> i) & 1u)) ? 0.0f : row::softmax_out(v[i], s[0]);
        else
          out = row::softmax_out(v[i], s[0]);
        y[base + e] = out;
      }
    }
  }
}

template <bool LOG, unsigned NT, unsigned NC, unsigned R, bool FULL>
__global__ void __launch_bounds__(kThreads)
    group_bwd(const float *__restrict y, const float *__restrict g, uint64_t rows, uint64_t cols,
              float *__restrict dx) {
  using L = Layout<NT, NC, R>;
  __shared__ float sh[2][kThreads * NC];
  Exchange<kThreads * NC> ex{sh, 0};
  const unsigned T = threadIdx.x % NT;
  const uint64_t g0 = threadIdx.x / NT;
  for (uint64_t first = (uint64_t)blockIdx.x * L::kGroups; first < rows;
       first += (uint64_t)gridDim.x * L::kGroups) {
    const uint64_t rw = first + g0;
    const bool active = rw < rows;
    const uint64_t base = active ? rw * cols : 0;
    float yv[L::V], gv[L::V];
#pragma unroll
    for (unsigned i = 0; i < L::V; ++i) {
      const unsigned e = L::off(T, i);
      yv[i] = 0.0f;
      gv[i] = 0.0f;
      if (active && (FULL || e < cols)) {
        yv[i] = y[base + e];
        gv[i] = g[base + e];
      }
    }
    float s[1];
    row_sums<NT, NC, R, 1, FULL>(
        [&](unsigned, unsigned i) { return LOG ? gv[i] : row::softmax_bwd_term(yv[i], gv[i]); },
        cols, active, ex, s);
    if (active) {
#pragma unroll
      for (unsigned i = 0; i < L::V; ++i) {
        const unsigned e = L::off(T, i);
        if (FULL || e < cols)
          dx[base + e] = LOG ? row::log_softmax_bwd_out(yv[i], gv[i], s[0])
                             : row::softmax_bwd_out(yv[i], gv[i], s[0]);
      }
    }
  }
}

// ---- long rows: chunk-parallel passes -----------------------------------------------------------

struct NoRow {};

// Chunk maxima of the (masked) scores.
struct MaxF {
  const float *x, *mask;
  uint64_t cols;
  __device__ NoRow prep(uint64_t) const { return {}; }
  __device__ void operator()(NoRow, uint64_t rw, uint64_t e, float (&out)[1]) const {
    const uint64_t k = rw * cols + e;
    out[0] = mask ? row::masked_score(x[k], mask[k]) : x[k];
  }
};

// Chunk sums of e.
struct ExpF {
  const float *x, *mask, *m;
  uint64_t cols;
  __device__ float prep(uint64_t rw) const { return m[rw]; }
  __device__ void operator()(float mr, uint64_t rw, uint64_t e, float (&out)[1]) const {
    const uint64_t k = rw * cols + e;
    out[0] = mask ? row::masked_exp(x[k], mask[k], mr) : row::shifted_exp(x[k], mr);
  }
};

struct RowMS {
  float m, s, ls;
};

template <Kind KIND>
struct OutF {
  const float *x, *mask, *m, *s;
  uint64_t cols;
  __device__ RowMS prep(uint64_t rw) const {
    const float sr = s[rw];
    return RowMS{m[rw], sr, KIND == Kind::LogSoftmax ? math::log_f(sr) : 0.0f};
  }
  __device__ float operator()(const RowMS &p, uint64_t rw, uint64_t e) const {
    const uint64_t k = rw * cols + e;
    if constexpr (KIND == Kind::LogSoftmax) return row::log_softmax_out(x[k], p.m, p.ls);
    if constexpr (KIND == Kind::Masked) {
      if (p.m == row::neg_inf()) return 0.0f;
      return row::masked_out(row::masked_exp(x[k], mask[k], p.m), mask[k], p.s);
    }
    return row::softmax_out(row::shifted_exp(x[k], p.m), p.s);
  }
};

struct TermF {
  const float *y, *g;
  uint64_t cols;
  __device__ NoRow prep(uint64_t) const { return {}; }
  __device__ void operator()(NoRow, uint64_t rw, uint64_t e, float (&out)[1]) const {
    const uint64_t k = rw * cols + e;
    out[0] = row::softmax_bwd_term(y[k], g[k]);
  }
};

template <bool LOG>
struct BwdF {
  const float *y, *g, *s;
  uint64_t cols;
  __device__ float prep(uint64_t rw) const { return s[rw]; }
  __device__ float operator()(float sr, uint64_t rw, uint64_t e) const {
    const uint64_t k = rw * cols + e;
    return LOG ? row::log_softmax_bwd_out(y[k], g[k], sr) : row::softmax_bwd_out(y[k], g[k], sr);
  }
};

template <Kind KIND>
void long_fwd(int dev, const float *x, const float *mask, uint64_t rows, uint64_t cols, float *y) {
  cudaStream_t st = stream(dev);
  const uint64_t nc = red::chunks_of(cols);
  FloatScratch part(dev, rows * nc), m(dev, rows), s(dev, rows);
  const unsigned grid = blocks(rows * nc, 1);
  const float *mk = KIND == Kind::Masked ? mask : nullptr;
  chunk_reduce<red::Op::Max, 1>
      <<<grid, kThreads, 0, st>>>(MaxF{x, mk, cols}, rows, cols, nc, part.get(), nullptr);
  check_launch("softmax chunk_reduce (max)");
  reduce_axis(dev, red::Op::Max, part.get(), rows, nc, 1, 1.0f, m.get());
  chunk_reduce<red::Op::Sum, 1>
      <<<grid, kThreads, 0, st>>>(ExpF{x, mk, m.get(), cols}, rows, cols, nc, part.get(), nullptr);
  check_launch("softmax chunk_reduce (sum)");
  reduce_axis(dev, red::Op::Sum, part.get(), rows, nc, 1, 1.0f, s.get());
  chunk_map<<<grid, kThreads, 0, st>>>(OutF<KIND>{x, mk, m.get(), s.get(), cols}, rows, cols, nc,
                                       y);
  check_launch("softmax chunk_map");
}

template <bool LOG>
void long_bwd(int dev, const float *y, const float *g, uint64_t rows, uint64_t cols, float *dx) {
  cudaStream_t st = stream(dev);
  const uint64_t nc = red::chunks_of(cols);
  const unsigned grid = blocks(rows * nc, 1);
  FloatScratch s(dev, rows);
  if (LOG) {
    reduce_axis(dev, red::Op::Sum, g, rows, cols, 1, 1.0f, s.get());
  } else {
    FloatScratch part(dev, rows * nc);
    chunk_reduce<red::Op::Sum, 1>
        <<<grid, kThreads, 0, st>>>(TermF{y, g, cols}, rows, cols, nc, part.get(), nullptr);
    check_launch("softmax_bwd chunk_reduce");
    reduce_axis(dev, red::Op::Sum, part.get(), rows, nc, 1, 1.0f, s.get());
  }
  chunk_map<<<grid, kThreads, 0, st>>>(BwdF<LOG>{y, g, s.get(), cols}, rows, cols, nc, dx);
  check_launch("softmax_bwd chunk_map");
}

struct CudaLaunch {
  int dev;
  cudaStream_t st;
  unsigned sms() const { return (unsigned)sm_count(dev); }
  unsigned grid_for(uint64_t items, uint64_t per_block) const { return blocks(items, per_block); }
  template <class K, class... A>
  void operator()(const char *name, K kernel, unsigned grid, A... args) const {
    kernel<<<grid, kThreads, 0, st>>>(args...);
    check_launch(name);
  }
  template <class K, class... A>
  void sized(const char *name, K kernel, unsigned grid, unsigned threads, A... args) const {
    kernel<<<grid, threads, 0, st>>>(args...);
    check_launch(name);
  }
};

// Clusters of Q blocks of 256 threads, one cluster per row (the kernel loops past the grid's cap;
// split_row::split_launch_cluster). Only on sm_90+ (split_row::split_has_clusters).
template <Kind KIND, unsigned Q, unsigned NCL>
void launch_split_cluster(cudaStream_t st, const float *x, const float *mask, uint64_t rows,
                          uint64_t cols, float *y) {
  if (cols == split_row::SplitPart<Q, NCL, true>::kMaxCols)
    split_row::split_launch_cluster<Q>("softmax split_fwd_cluster",
                                       softmax_kernels::split_fwd_cluster<KIND, Q, NCL, true>,
                                       rows, st, x, mask, rows, cols, y);
  else
    split_row::split_launch_cluster<Q>("softmax split_fwd_cluster",
                                       softmax_kernels::split_fwd_cluster<KIND, Q, NCL, false>,
                                       rows, st, x, mask, rows, cols, y);
}

// ---- dispatch by cols ---------------------------------------------------------------------------

template <Kind KIND, unsigned NT, unsigned NC, unsigned R>
void launch_group_fwd(cudaStream_t st, const float *x, const float *mask, uint64_t rows,
                      uint64_t cols, float *y) {
  // Rows that fill the layout exactly (1024, 2048, 4096, 8192 columns...) skip the bounds tests.
  if (cols == Layout<NT, NC, R>::kMaxCols)
    group_fwd<KIND, NT, NC, R, true>
        <<<blocks(rows, kThreads / NT), kThreads, 0, st>>>(x, mask, rows, cols, y);
  else
    group_fwd<KIND, NT, NC, R, false>
        <<<blocks(rows, kThreads / NT), kThreads, 0, st>>>(x, mask, rows, cols, y);
  check_launch("softmax group_fwd");
}

// Where the one-block-per-row backward beats the chunk passes (H100, 2026-11-24, 256-thread
// blocks with ~24 MB of rows in flight): at 16384 columns 0.53 / 0.70 of copy bandwidth against
// 0.59 / 0.70, at 8192 0.74 / 0.90 (more blocks per SM): so up to 8192, longer rows the chunk
// passes.
constexpr uint64_t kBlockRowBwdMaxCols = 8192;
static_assert(kBlockRowBwdMaxCols <= softmax_kernels::kBlockRowMaxCols, "block_row limit");

template <Kind KIND>
void fwd(int dev, const float *x, const float *mask, uint64_t rows, uint64_t cols, float *y) {
  cudaStream_t st = stream(dev);
  if (cols <= 32) {
    softmax_kernels::seg_fwd_plan<KIND>(CudaLaunch{dev, st}, x, mask, rows, (unsigned)cols, y);
  } else if (cols <= 128) {
    softmax_kernels::warp_fwd_plan<KIND>(CudaLaunch{dev, st}, x, mask, rows, cols, y);
  } else if (cols <= 256) {
    launch_group_fwd<KIND, 32, 1, 1>(st, x, mask, rows, cols, y);
  } else if (cols <= 512) {  // 8 values per thread up to 2048 columns: see the header comment
    launch_group_fwd<KIND, 64, 1, 2>(st, x, mask, rows, cols, y);
  } else if (cols <= 1024) {
    launch_group_fwd<KIND, 128, 1, 4>(st, x, mask, rows, cols, y);
  } else if (cols <= 2048) {
    launch_group_fwd<KIND, 256, 1, 8>(st, x, mask, rows, cols, y);
  } else if (cols <= 4096) {
    launch_group_fwd<KIND, 256, 1, 16>(st, x, mask, rows, cols, y);
  } else if (cols <= 8192) {
    launch_group_fwd<KIND, 256, 2, 16>(st, x, mask, rows, cols, y);
  } else if (cols <= 16384) {
    // The row in registers (split_fwd): x read once, y written once. Unmasked: one 512-thread
    // block (Q = 2 groups of NCL = 2 chunks) per row; masked: the same split as a cluster of two
    // 256-thread blocks (H100: 0.317 against 0.438 ms at (4096, 16384)), a block without clusters.
    if constexpr (KIND == Kind::Masked) {
      if (split_row::split_has_clusters(dev)) {
        launch_split_cluster<KIND, 2, 2>(st, x, mask, rows, cols, y);
        return;
      }
    }
    softmax_kernels::split_fwd_plan<KIND, 2, 2>(CudaLaunch{dev, st}, x, mask, rows, cols, y);
  } else if (cols <= 32768 && split_row::split_has_clusters(dev)) {
    launch_split_cluster<KIND, 4, 2>(st, x, mask, rows, cols, y);  // 4 x 256 threads per row
  } else if (cols <= 65536 && split_row::split_has_clusters(dev)) {
    // Masked rows of 64 values per thread need more than 128 registers (x and mask loads in
    // flight): 8 blocks of 2 chunks for them.
    if constexpr (KIND == Kind::Masked)
      launch_split_cluster<KIND, 8, 2>(st, x, mask, rows, cols, y);
    else
      launch_split_cluster<KIND, 4, 4>(st, x, mask, rows, cols, y);
  } else {
    // Longer rows, and rows over 16384 columns without clusters (sm < 90): the chunk passes.
    long_fwd<KIND>(dev, x, mask, rows, cols, y);
  }
}

template <bool LOG, unsigned NT, unsigned NC, unsigned R>
void launch_group_bwd(cudaStream_t st, const float *y, const float *g, uint64_t rows, uint64_t cols,
                      float *dx) {
  if (cols == Layout<NT, NC, R>::kMaxCols)
    group_bwd<LOG, NT, NC, R, true>
        <<<blocks(rows, kThreads / NT), kThreads, 0, st>>>(y, g, rows, cols, dx);
  else
    group_bwd<LOG, NT, NC, R, false>
        <<<blocks(rows, kThreads / NT), kThreads, 0, st>>>(y, g, rows, cols, dx);
  check_launch("softmax group_bwd");
}

template <bool LOG>
void bwd(int dev, const float *y, const float *g, uint64_t rows, uint64_t cols, float *dx) {
  cudaStream_t st = stream(dev);
  if (cols <= 32) {
    softmax_kernels::seg_bwd_plan<LOG>(CudaLaunch{dev, st}, y, g, rows, (unsigned)cols, dx);
  } else if (cols <= 256) {
    launch_group_bwd<LOG, 32, 1, 1>(st, y, g, rows, cols, dx);
  } else if (cols <= 512) {
    launch_group_bwd<LOG, 32, 1, 2>(st, y, g, rows, cols, dx);
  } else if (cols <= 1024) {
    launch_group_bwd<LOG, 64, 1, 4>(st, y, g, rows, cols, dx);
  } else if (cols <= 2048) {
    launch_group_bwd<LOG, 128, 1, 8>(st, y, g, rows, cols, dx);
  } else if (cols <= 4096) {
    launch_group_bwd<LOG, 256, 1, 16>(st, y, g, rows, cols, dx);
  } else if (cols <= kBlockRowBwdMaxCols) {
    softmax_kernels::block_row_bwd_plan<LOG>(CudaLaunch{dev, st}, y, g, rows, cols, dx);
  } else {
    long_bwd<LOG>(dev, y, g, rows, cols, dx);
  }
}

}  // namespace

void softmax_fwd(int dev, row::Kind kind, const float *x, const float *mask, uint64_t rows,
                 uint64_t cols, float *y) {
  switch (kind) {
    case Kind::Softmax: fwd<Kind::Softmax>(dev, x, nullptr, rows, cols, y); break;
    case Kind::LogSoftmax: fwd<Kind::LogSoftmax>(dev, x, nullptr, rows, cols, y); break;
    case Kind::Masked: fwd<Kind::Masked>(dev, x, mask, rows, cols, y); break;
  }
}

void softmax_bwd(int dev, bool log, const float *y, const float *g, uint64_t rows, uint64_t cols,
                 float *dx) {
  if (log)
    bwd<true>(dev, y, g, rows, cols, dx);
  else
    bwd<false>(dev, y, g, rows, cols, dx);
}

}  // namespace cuda
}  // namespace tlrt
