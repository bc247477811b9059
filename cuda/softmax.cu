// CUDA backend, softmax, log-softmax and the hard-masked row softmax with their backwards: the
// DEFINITIONS of abi/tlrt_softmax.h with the formulas of core/numerics/row_ops.hpp and THE TREE
// of core/numerics/reduce_tree.hpp, bit for bit the CPU's (-fmad=false; no atomics; the library
// stream; grids capped at 2^31 - 1 blocks, kernels loop). History: docs/kernels/softmax.md.
//
// Work per element: forward one maximum, one subtraction, one exp, one addition (the tree) and
// one division (log-softmax: a second subtraction, one log per row); backward two multiplies and
// two additions (log-softmax: one exp, one fma, one addition). Bytes per element up to 65536
// columns: 8 forward (x read, y written), 12 masked (the mask read too) and backward (y, g read).
// Kernels by cols (cuda/kernels/softmax.cuh unless noted):
//  - cols <= 32, seg_fwd / seg_bwd: a segment of W = pow2_at_least(cols) lanes per row, lane j =
//    element j, so a warp reads 32 / W rows as one contiguous run; 4 rows per thread at once. The
//    sum is red::small<W> by shuffles, the maximum integer-key shuffles (row::dev::seg_max),
//    log-softmax one log per lane (seg_logs).
//  - 32 < cols <= 128 forward, warp_fwd: one warp per row, 2 or 4 values per lane, 4 or 2 rows
//    per warp at once (8 loads in flight per thread).
//  - up to 8192 forward and 4096 backward, group_fwd / group_bwd (this file): a group of NT = 32
//    .. 256 threads holds a row in registers (row::dev::Layout: thread T the tree's lanes T + NT k,
//    warp accesses of 128 contiguous bytes, up to 32 loads in flight); per row the maximum (xor
//    shuffles, one shared-memory exchange when NT > 32), the lanes' folds in the tree's order, the
//    halving (registers, shared memory after one barrier, shuffles), the outputs from registers.
//    Rows that fill the layout (256 .. 8192 columns) take a FULL form without bounds tests. These
//    kernels are issue-bound: 55-90 instructions per element (the exp, the division, the maximum).
//  - 8192 < cols <= 65536 forward, split_fwd (cuda/common/split_row.cuh): the row in the registers
//    of Q groups of 256 threads, x read once: up to 16384 columns one 512-thread block (masked: a
//    cluster of 2 blocks), up to 32768 a cluster of 4 blocks of 2 chunks, up to 65536 a cluster of
//    4 blocks of 4 chunks (masked: 8 of 2, as 64 x and mask values need more than 128 registers).
//    Clusters need compute capability 9; without them rows over 16384 take the chunk passes.
//  - 4096 < cols <= 8192 backward, block_row_bwd: one 256-thread block per row reads it twice
//    (sums, then outputs); the grid keeps ~24 MB of rows in flight, so the second read hits L2.
//  - longer rows: chunk passes, one block per (row, chunk of 4096): chunk maxima and sums of e
//    finished by reduce_axis, then the outputs (e recomputed): 16 bytes per element forward (28
//    masked), 20 backward (16 log-softmax).
// Last measured: bench/results/2026-11-27-h100-s17-softmax.md

#include "core/backend/index.hpp"
#include "core/backend/memory.hpp"
#include "core/backend/reduce.hpp"
#include "core/backend/softmax.hpp"
#include "cuda/common/launch.cuh"
#include "cuda/kernels/cross_entropy.cuh"
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
using row::dev::NoRow;
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

// Cross-entropy forward up to 8192 columns: group_fwd's log-softmax statistics (the same loads,
// maximum and tree sum), then thread 0 of each group writes the row's stats and picked value
// (cuda/kernels/cross_entropy.cuh, ce_row_out).
template <class LT, unsigned NT, unsigned NC, unsigned R, bool FULL>
__global__ void __launch_bounds__(kThreads)
    ce_group_fwd(const float *__restrict x, const LT *__restrict lab, uint64_t rows,
                 uint64_t cols, int64_t ignore, float *__restrict picked,
                 float *__restrict stats) {
  using L = Layout<NT, NC, R>;
  __shared__ float sh[2][kThreads * NC];
  Exchange<kThreads * NC> ex{sh, 0};
  const unsigned T = threadIdx.x % NT;
  const uint64_t g0 = threadIdx.x / NT;
  for (uint64_t first = (uint64_t)blockIdx.x * L::kGroups; first < rows;
       first += (uint64_t)gridDim.x * L::kGroups) {  // block-uniform
    const uint64_t rw = first + g0;
    const bool active = rw < rows;
    const uint64_t base = active ? rw * cols : 0;
    float v[L::V];
#pragma unroll
    for (unsigned i = 0; i < L::V; ++i) {
      const unsigned e = L::off(T, i);
      v[i] = row::neg_inf();
      if (active && (FULL || e < cols)) v[i] = x[base + e];
    }
    float m = row::neg_inf();
#pragma unroll
    for (unsigned i = 0; i < L::V; ++i) m = ew::max_f(m, v[i]);
    m = group_max<NT>(m, ex);
    float s[1];
    row_sums<NT, NC, R, 1, FULL>(
        [&](unsigned, unsigned i) { return row::shifted_exp(v[i], m); }, cols, active, ex, s);
    if (active && T == 0)
      ce_kernels::ce_row_out(x, lab, rw, cols, ignore, m, s[0], picked, stats);
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

// Clusters of Q blocks of 256 threads, one cluster per row (sm_90+: split_row::split_has_clusters).
template <Kind KIND, unsigned Q, unsigned NCL>
void launch_split_cluster(cudaStream_t st, const float *x, const float *mask, uint64_t rows,
                          uint64_t cols, float *y) {
  split_row::split_launch_cluster<Q, NCL>(
      "softmax split_fwd_cluster", softmax_kernels::split_fwd_cluster<KIND, Q, NCL, true>,
      softmax_kernels::split_fwd_cluster<KIND, Q, NCL, false>, rows, cols, st, x, mask, rows, cols,
      y);
}

// ---- dispatch by cols ---------------------------------------------------------------------------

template <Kind KIND, unsigned NT, unsigned NC, unsigned R>
void launch_group_fwd(cudaStream_t st, const float *x, const float *mask, uint64_t rows,
                      uint64_t cols, float *y) {
  if (cols == Layout<NT, NC, R>::kMaxCols)
    group_fwd<KIND, NT, NC, R, true>
        <<<blocks(rows, kThreads / NT), kThreads, 0, st>>>(x, mask, rows, cols, y);
  else
    group_fwd<KIND, NT, NC, R, false>
        <<<blocks(rows, kThreads / NT), kThreads, 0, st>>>(x, mask, rows, cols, y);
  check_launch("softmax group_fwd");
}

// The one-block-per-row backward up to 8192 columns; above, the chunk passes are faster.
constexpr uint64_t kBlockRowBwdMaxCols = 8192;
static_assert(kBlockRowBwdMaxCols <= row::dev::kBlockRowMaxCols, "block_row limit");

template <Kind KIND>
void fwd(int dev, const float *x, const float *mask, uint64_t rows, uint64_t cols, float *y) {
  cudaStream_t st = stream(dev);
  if (cols <= 32) {
    softmax_kernels::seg_fwd_plan<KIND>(RowLaunch{dev, st}, x, mask, rows, (unsigned)cols, y);
  } else if (cols <= 128) {
    softmax_kernels::warp_fwd_plan<KIND>(RowLaunch{dev, st}, x, mask, rows, cols, y);
  } else if (cols <= 256) {
    launch_group_fwd<KIND, 32, 1, 1>(st, x, mask, rows, cols, y);
  } else if (cols <= 512) {
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
    // One 512-thread block (Q = 2 groups of NCL = 2 chunks) per row; masked rows as a cluster of
    // two 256-thread blocks where there are clusters (the faster form for them).
    if constexpr (KIND == Kind::Masked) {
      if (split_row::split_has_clusters(dev)) {
        launch_split_cluster<KIND, 2, 2>(st, x, mask, rows, cols, y);
        return;
      }
    }
    softmax_kernels::split_fwd_plan<KIND, 2, 2>(RowLaunch{dev, st}, x, mask, rows, cols, y);
  } else if (cols <= 32768 && split_row::split_has_clusters(dev)) {
    launch_split_cluster<KIND, 4, 2>(st, x, mask, rows, cols, y);  // 4 x 256 threads per row
  } else if (cols <= 65536 && split_row::split_has_clusters(dev)) {
    if constexpr (KIND == Kind::Masked)
      launch_split_cluster<KIND, 8, 2>(st, x, mask, rows, cols, y);
    else
      launch_split_cluster<KIND, 4, 4>(st, x, mask, rows, cols, y);
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
    softmax_kernels::seg_bwd_plan<LOG>(RowLaunch{dev, st}, y, g, rows, (unsigned)cols, dx);
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
    softmax_kernels::block_row_bwd_plan<LOG>(RowLaunch{dev, st}, y, g, rows, cols, dx);
  } else {
    long_bwd<LOG>(dev, y, g, rows, cols, dx);
  }
}

// ---- cross-entropy (cuda/kernels/cross_entropy.cuh explains the kernels and their bytes) -----

template <class T>
void ce_fwd(int dev, const float *x, const T *lab, uint64_t rows, uint64_t cols, int64_t ignore,
            float *loss, float *stats) {
  namespace ck = ce_kernels;
  cudaStream_t st = stream(dev);
  const RowLaunch L{dev, st};
  FloatScratch picked(dev, rows), sum(dev, 1);
  const bool cl = split_row::split_has_clusters(dev);
  auto cluster = [&](auto q, auto ncl) {
    constexpr unsigned Q = decltype(q)::value, NCL = decltype(ncl)::value;
    split_row::split_launch_cluster<Q, NCL>("cross_entropy ce_split_cluster",
                                            ck::ce_split_cluster<T, Q, NCL, true>,
                                            ck::ce_split_cluster<T, Q, NCL, false>, rows, cols, st,
                                            x, lab, rows, cols, ignore, picked.get(), stats);
  };
  auto group = [&](auto nt, auto nc, auto r) {
    constexpr unsigned NT = decltype(nt)::value, NC = decltype(nc)::value,
                       R = decltype(r)::value;
    const unsigned grid = blocks(rows, kThreads / NT);
    if (cols == Layout<NT, NC, R>::kMaxCols)
      ce_group_fwd<T, NT, NC, R, true><<<grid, kThreads, 0, st>>>(x, lab, rows, cols, ignore,
                                                                  picked.get(), stats);
    else
      ce_group_fwd<T, NT, NC, R, false><<<grid, kThreads, 0, st>>>(x, lab, rows, cols, ignore,
                                                                   picked.get(), stats);
    check_launch("cross_entropy ce_group_fwd");
  };
  using U1 = std::integral_constant<unsigned, 1>;
  using U2 = std::integral_constant<unsigned, 2>;
  using U4 = std::integral_constant<unsigned, 4>;
  using U8 = std::integral_constant<unsigned, 8>;
  using U16 = std::integral_constant<unsigned, 16>;
  using U32 = std::integral_constant<unsigned, 32>;
  using U64 = std::integral_constant<unsigned, 64>;
  using U128 = std::integral_constant<unsigned, 128>;
  using U256 = std::integral_constant<unsigned, 256>;
  if (cols >= 1 && cols <= 256) {  // softmax's group_fwd schedule up to 8192 columns
    group(U32{}, U1{}, U1{});
  } else if (cols >= 1 && cols <= 512) {
    group(U64{}, U1{}, U2{});
  } else if (cols >= 1 && cols <= 1024) {
    group(U128{}, U1{}, U4{});
  } else if (cols >= 1 && cols <= 2048) {
    group(U256{}, U1{}, U8{});
  } else if (cols >= 1 && cols <= 4096) {
    group(U256{}, U1{}, U16{});
  } else if (cols >= 1 && cols <= 8192) {
    group(U256{}, U2{}, U16{});
  } else if (cols >= 1 && cols <= 16384) {
    ck::split_plan<T, 2, 2>(L, x, lab, rows, cols, ignore, picked.get(), stats);
  } else if (cols >= 1 && cols <= 32768 && cl) {
    cluster(U4{}, U2{});
  } else if (cols >= 1 && cols <= 65536 && cl) {
    cluster(U8{}, U2{});  // 8 blocks of 2 chunks: 32 values a thread, 3 blocks an SM
  } else {
    // Chunk passes: chunk maxima and sums of e (softmax's long-row functors), then per row.
    FloatScratch m(dev, rows), s(dev, rows);
    if (cols != 0) {
      const uint64_t nc = red::chunks_of(cols);
      FloatScratch part(dev, rows * nc);
      const unsigned grid = blocks(rows * nc, 1);
      chunk_reduce<red::Op::Max, 1>
          <<<grid, kThreads, 0, st>>>(MaxF{x, nullptr, cols}, rows, cols, nc, part.get(), nullptr);
      check_launch("cross_entropy chunk_reduce (max)");
      reduce_axis(dev, red::Op::Max, part.get(), rows, nc, 1, 1.0f, m.get());
      chunk_reduce<red::Op::Sum, 1><<<grid, kThreads, 0, st>>>(
          ExpF{x, nullptr, m.get(), cols}, rows, cols, nc, part.get(), nullptr);
      check_launch("cross_entropy chunk_reduce (sum)");
      reduce_axis(dev, red::Op::Sum, part.get(), rows, nc, 1, 1.0f, s.get());
    }
    ck::ce_pick<T><<<blocks(rows, kThreads), kThreads, 0, st>>>(
        x, lab, rows, cols, ignore, m.get(), s.get(), picked.get(), stats);
    check_launch("cross_entropy ce_pick");
  }
  reduce_axis(dev, red::Op::Sum, picked.get(), 1, rows, 1, 1.0f, sum.get());
  ck::finish_plan<T, false>(L, lab, rows, cols, ignore, sum.get(), index_fault_counter(dev), loss);
}

template <class T>
void ce_bwd(int dev, const float *x, const T *lab, const float *stats, const float *g,
            uint64_t rows, uint64_t cols, int64_t ignore, float *dx) {
  cudaStream_t st = stream(dev);
  const RowLaunch L{dev, st};
  FloatScratch c(dev, 1);
  ce_kernels::finish_plan<T, true>(L, lab, rows, cols, ignore, g, nullptr, c.get());
  ce_kernels::bwd_plan<T>(L, x, lab, stats, c.get(), rows, cols, ignore, dx);
}

}  // namespace

void cross_entropy_fwd(int dev, const float *x, const void *labels, bool labels64, uint64_t rows,
                       uint64_t cols, int64_t ignore, float *loss, float *stats) {
  if (labels64)
    ce_fwd(dev, x, static_cast<const int64_t *>(labels), rows, cols, ignore, loss, stats);
  else
    ce_fwd(dev, x, static_cast<const int32_t *>(labels), rows, cols, ignore, loss, stats);
}

void cross_entropy_bwd(int dev, const float *x, const void *labels, bool labels64,
                       const float *stats, const float *g, uint64_t rows, uint64_t cols,
                       int64_t ignore, float *dx) {
  if (labels64)
    ce_bwd(dev, x, static_cast<const int64_t *>(labels), stats, g, rows, cols, ignore, dx);
  else
    ce_bwd(dev, x, static_cast<const int32_t *>(labels), stats, g, rows, cols, ignore, dx);
}

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
