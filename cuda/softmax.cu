// CUDA backend, softmax, log-softmax and the hard-masked row softmax, with backward kernels: the
// definitions of abi/tlrt_softmax.h with the formulas of core/numerics/row_ops.hpp and THE TREE of
// core/numerics/reduce_tree.hpp, bit for bit the CPU's. Built with -fmad=false; exp / log are the
// shared tlrt::math functions, divisions __fdiv_rn; no atomics; everything on the library stream.
//
// Three strategies, chosen by cols (all grid sizes capped at 2^31 - 1 blocks, kernels loop past
// it):
//
// seg_fwd / seg_bwd (cols <= 32; cuda/softmax_kernels.cuh): a segment of W = pow2_at_least(cols)
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
// log was not the only gap (softmax's division costs as much). Measured: (pending GPU run).
//
// warp_fwd (32 < cols <= 128 forward; cuda/softmax_kernels.cuh): one warp per row, K = 2 or 4
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
// unchanged (its per-element division is the cost). Measured: (pending GPU run).
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
// block_row_fwd / block_row_bwd (8192 < cols <= 16384 forward, not masked; 4096 < cols <= 8192
// backward; the limits and why: kBlockRowFwdMaxCols below;
// cuda/softmax_kernels.cuh): one 256-thread block per row and every pass in ONE kernel. Thread T
// is the tree's lane T of every chunk; the block walks the row: the maximum (16 loads in flight
// per thread, order-free), the sum of e two chunks at a time (32 loads in flight; both chunks'
// lanes halved with one barrier; chunk values in shared memory, then one more halving over them:
// the tree's next level), then the outputs (16 loads issued before their stores). The grid holds
// about 24 MB of rows in flight (row::dev::block_row_grid: 2 blocks per SM at 16384 columns, 1 at
// 65536), so the second and third reads of a row come from L2: DRAM traffic is the nominal
// 8 bytes per element (12 masked and backward). Registers: 56-92 (fwd), 64-77 (bwd), no spills.
// Before (2026-11-22): three kernels + two reduce_axis launches, x read three times from DRAM
// (16 bytes per element): 0.37-0.41 of copy bandwidth, 2.1x PyTorch. PREDICTION: ~0.75-0.85 of
// copy bandwidth at (4096, 16384) (L2 re-reads at ~2x DRAM bandwidth; one row per block leaves a
// few percent idle at each row's barriers), ~0.7 at (1024, 65536) (33 MB of rows in flight:
// some L2 misses). Measured (H100, 2026-11-24, bench/results/2026-11-24-h100-softmax-fused.md):
// 0.50 / 0.53 at (4096, 16384) (softmax / log-softmax; chunk passes 0.37 / 0.41), but 0.23 /
// 0.24 at (1024, 65536): one 8-warp block per SM, too few loads in flight.
// NOW (2026-11-24, session 7) split_fwd (8192 < cols <= 65536 forward, all three kinds;
// cuda/split_row.cuh, cuda/softmax_kernels.cuh): the row in REGISTERS, read once: Q groups of 256
// threads, group q holding chunks q + Q j (j < NCL), thread T the tree's lane T of each (16 values
// per chunk). Up to 16384 columns one block of Q * 256 threads (default Q = 2, NCL = 2: 512
// threads, 32 values, 61-64 registers with __launch_bounds__(512, 2): 2 rows and 32 warps per SM);
// above, a thread-block CLUSTER of Q blocks of 256 threads (sm_90; the groups exchange the max
// words and chunk values through distributed shared memory: mapa + ld.shared::cluster, and
// barrier.cluster; one cluster per row): 16384 < cols <= 32768 Q = 4, NCL = 2 (69-80 registers, 3
// blocks per SM), up to 65536 Q = 4, NCL = 4 (64 values per thread, 119-128 registers: 2 blocks per
// SM; masked Q = 8, NCL = 2). Per row: max (one word per warp, one group-wide barrier), exp folded
// in the tree's order, each chunk's halving in its block (one block barrier), chunk values in
// shared memory (one group-wide barrier), the tree's next level over the Q * NCL chunk values in
// every thread, the outputs from registers. Same operations, same order, same bits as the stub and
// the passes below. Bytes: 8 per element (masked 12), against block_row_fwd's three reads of x (two
// from L2) and the chunk passes' 16. PREDICTION: like group_fwd at 8192 columns (0.95, x read once)
// less the per-row barriers with 2 rows per SM: ~0.85 of copy bandwidth at (4096, 16384) (softmax
// 0.357 -> ~0.21 ms, log-softmax 0.336 -> ~0.21, masked 0.80 -> ~0.34), ~0.75-0.8 at (1024, 65536)
// (66 clusters of 4 in flight, 1024 rows in ~16 waves: 0.479 -> ~0.23 ms, log-softmax 0.439 ->
// ~0.23).
// Measured: (pending GPU run). Schedules by TLRT_SOFTMAX_LONG_VARIANT (read per call): cols <=
// 16384: 0 block Q = 2 NCL = 2 (default), 1 block Q = 1 NCL = 4 (256 threads, 128 registers), 2
// block Q = 4 NCL = 1 (1024 threads, 40-64 registers, 1 row per SM), 3 cluster Q = 4 NCL = 1
// (256-thread blocks, 32-56 registers), 4 cluster Q = 2 NCL = 2; up to 32768: 0 cluster Q = 4 NCL =
// 2, 1 cluster Q = 2 NCL = 4; up to 65536: 0 cluster Q = 4 NCL = 4 (masked: Q = 8 NCL = 2), 1
// cluster Q = 8 NCL = 2, 2 cluster Q = 4 NCL = 4 (masked too: spills 80 bytes); 9: the paths below
// (block_row_fwd up to 16384 unmasked, else the chunk passes).
// Longer rows (cols > 65536, or TLRT_SOFTMAX_LONG_VARIANT=9): block_row_fwd as above up to 16384
// unmasked columns; else the chunk-parallel passes below, one 256-thread block per (row, chunk
// of 4096): chunk maxima -> reduce_axis (Max) -> row maxima; chunk sums of e -> reduce_axis -> row
// sums; then one pass writing the outputs (recomputing e). 16 bytes per element forward, 12 + 4
// backward.
#include <cstdlib>

#include "core/backend/memory.hpp"
#include "core/backend/reduce.hpp"
#include "core/backend/softmax.hpp"
#include "cuda/cuda_common.cuh"
#include "cuda/softmax_kernels.cuh"

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

constexpr uint64_t kMaxGrid = 0x7FFFFFFFull;

unsigned blocks(uint64_t items, uint64_t per_block) {
  const uint64_t b = (items + per_block - 1) / per_block;
  return (unsigned)(b == 0 ? 1 : (b < kMaxGrid ? b : kMaxGrid));
}

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

// Clusters of Q blocks of 256 threads (compile-time cluster dimensions), one row per cluster.
template <Kind KIND, unsigned Q, unsigned NCL>
void launch_split_cluster(cudaStream_t st, const float *x, const float *mask,
                          uint64_t rows, uint64_t cols, float *y) {
  // One cluster per row (not persistent; the kernel loops past the grid's cap).
  const uint64_t cap = kMaxGrid / Q;
  const uint64_t clusters = rows < cap ? rows : cap;
  const unsigned grid = (unsigned)(clusters * Q);
  if (cols == split_row::SplitPart<Q, NCL, true>::kMaxCols)
    softmax_kernels::split_fwd_cluster<KIND, Q, NCL, true>
        <<<grid, kThreads, 0, st>>>(x, mask, rows, cols, y);
  else
    softmax_kernels::split_fwd_cluster<KIND, Q, NCL, false>
        <<<grid, kThreads, 0, st>>>(x, mask, rows, cols, y);
  check_launch("softmax split_fwd_cluster");
}

// Schedule of the long-row forward, read per call (the lead keeps the fastest and removes the
// switch): TLRT_SOFTMAX_LONG_VARIANT, see the top comment. Unset or unparsable: 0.
int long_variant() {
  const char *v = std::getenv("TLRT_SOFTMAX_LONG_VARIANT");
  return v && *v >= '0' && *v <= '9' ? *v - '0' : 0;
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

// Where the one-block-per-row kernels beat the chunk passes (H100, 2026-11-24, 256-thread blocks
// with ~24 MB of rows in flight): forward at 16384 columns 0.50-0.53 of copy bandwidth against
// 0.37-0.41, but at 65536 columns 0.23-0.24 against 0.37-0.41 (one block, 8 warps, per SM: too
// few loads in flight) and masked 0.30 against 0.34 at 16384; backward at 16384 0.53 / 0.70
// against 0.59 / 0.70. So: softmax / log-softmax forward up to 16384 columns, the backward up to
// 8192 (more blocks per SM there: measured 0.74 / 0.90 at (8192, 8192)), masked and longer rows
// the chunk passes.
constexpr uint64_t kBlockRowFwdMaxCols = 16384;
constexpr uint64_t kBlockRowBwdMaxCols = 8192;
static_assert(kBlockRowFwdMaxCols <= softmax_kernels::kBlockRowMaxCols, "block_row limit");

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
  } else if (cols <= 65536 && long_variant() != 9) {
    // The row in registers (split_fwd): x read once, y written once.
    const int var = long_variant();
    const CudaLaunch launch{dev, st};
    if (cols <= 16384) {
      switch (var) {
        case 1: softmax_kernels::split_fwd_plan<KIND, 1, 4>(launch, x, mask, rows, cols, y); break;
        case 2: softmax_kernels::split_fwd_plan<KIND, 4, 1>(launch, x, mask, rows, cols, y); break;
        case 3: launch_split_cluster<KIND, 4, 1>(st, x, mask, rows, cols, y); break;
        case 4: launch_split_cluster<KIND, 2, 2>(st, x, mask, rows, cols, y); break;
        default: softmax_kernels::split_fwd_plan<KIND, 2, 2>(launch, x, mask, rows, cols, y);
      }
    } else if (cols <= 32768) {
      if (var == 1)
        launch_split_cluster<KIND, 2, 4>(st, x, mask, rows, cols, y);
      else
        launch_split_cluster<KIND, 4, 2>(st, x, mask, rows, cols, y);
    } else {
      // Masked rows of 64 values per thread need more than 128 registers (x and mask loads in
      // flight): Q = 8, NCL = 2 for them unless asked (variant 2: 80 bytes of spills).
      if (var == 1 || (var != 2 && KIND == Kind::Masked))
        launch_split_cluster<KIND, 8, 2>(st, x, mask, rows, cols, y);
      else
        launch_split_cluster<KIND, 4, 4>(st, x, mask, rows, cols, y);
    }
  } else if (KIND != Kind::Masked && cols <= kBlockRowFwdMaxCols) {
    softmax_kernels::block_row_fwd_plan<KIND>(CudaLaunch{dev, st}, x, mask, rows, cols, y);
  } else {
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
