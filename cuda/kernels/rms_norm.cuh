// Device code of the RMS-norm kernels (abi/tlrt_layer_norm.h, "RMS norm"), which the CPU emulator
// test (tests/unit/test_rms_norm_emu.cpp) runs bit for bit against the CPU backend: the short-row
// segments (cols <= 32), the row-in-registers group kernels (33..8192 columns), the functors of
// the chunk passes (longer rows) and the column partials of dgamma. cuda/layer_norm.cu explains
// the strategies and their costs and composes the long-row passes with reduce_axis.
//
// Every kernel evaluates the DEFINITIONS with the formulas of core/numerics/row_ops.hpp (row::sq,
// rms_xhat, rms_out, ln_d, rms_bwd_out, inv_std_of) and the row sums of THE TREE as the layer-norm
// kernels do (row::dev::row_sums, seg_sum, chunk_reduce): the same operations in the same order
// as stub/layer_norm.cpp. G (template): gamma given (y = xhat * gamma, d = dy * gamma) or NULL
// (y = xhat, d = dy).
//
// THE COLUMN TREE of dgamma (as the layer norm's): for each column, chunk k of 4096 rows has 256
// lanes, lane t folding rows 4096 k + t + 256 r (r = 0..15) in order; the lanes are halved
// (h = 128, ..., 1), then the chunk values reduced by the tree. col_partials: block (tile of 32
// columns, chunk k, lane set t0 < kColSets) owns the lanes t = t0 + kColSets g (g < 32), which
// only meet each other in the steps h = 128 .. kColSets; thread (w, l) folds lanes g = w + 8 i
// (i < 4) of column l and the block halves its 32 lanes (red_kernels::tile_halving); the kColSets
// values of a chunk are then a sequence whose tree (reduce_axis over kColSets) is the steps
// h = kColSets / 2 .. 1, and the chunk values are reduced by reduce_axis again.
#pragma once

#include <cstdint>

#include "core/numerics/reduce_tree.hpp"
#include "core/numerics/row_ops.hpp"
#include "cuda/kernels/reduce.cuh"

namespace tlrt {
namespace cuda {
namespace rms_kernels {

using row::dev::Exchange;
using row::dev::kSegRows;
using row::dev::kThreads;
using row::dev::Layout;
using row::dev::NoRow;
using row::dev::row_sums;

// y from xhat, d from dy: with gamma (G) or without.
template <bool G>
__device__ __forceinline__ float out_of(float xh, const float *gamma, uint64_t e) {
  if constexpr (G) return row::rms_out(xh, gamma[e]);
  return xh;
}
template <bool G>
__device__ __forceinline__ float d_of(float dy, const float *gamma, uint64_t e) {
  if constexpr (G) return row::ln_d(dy, gamma[e]);
  return dy;
}

constexpr uint64_t kGroupMaxCols = 8192;  // the row in registers up to here; chunk passes beyond

// ---- forward ------------------------------------------------------------------------------------

// cols <= 32: a segment of W = pow2_at_least(cols) lanes per row (lane j = column j), kSegRows
// rows per thread at a time; the sum by red::small<W> across the segment (seg_sum).
template <unsigned W, bool G>
__global__ void __launch_bounds__(kThreads)
    seg_fwd(const float *__restrict x, const float *__restrict gamma, uint64_t rows,
            unsigned cols, float n, float eps, float *__restrict y, float *__restrict inv_rms) {
  using O = red::Ops<red::Op::Sum>;
  constexpr unsigned RB = kThreads / W;
  constexpr unsigned U = kSegRows;
  const unsigned j = threadIdx.x % W;
  const unsigned sub = threadIdx.x / W;
  const bool col = j < cols;
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
      const float ms = row::per_col(
          row::dev::seg_sum<W>(ok[u] ? O::op(O::identity(), row::sq(v[u])) : O::identity()), n);
      const float is = row::inv_std_of(ms, eps);
      if (!ok[u]) continue;  // no shuffle below
      const uint64_t rw = first + (uint64_t)u * RB + sub;
      y[rw * cols + j] = out_of<G>(row::rms_xhat(v[u], is), gamma, j);
      if (j == 0) inv_rms[rw] = is;
    }
  }
}

// 33..8192 columns: a group of NT threads holds the row in registers (row::dev::Layout, as the
// layer norm's group_fwd): S(x * x) -> inv_rms, then y from the registers. At most 80 registers
// (3 blocks of 256 threads per SM), as group_fwd.
template <unsigned NT, unsigned NC, unsigned R, bool G>
__global__ void __launch_bounds__(kThreads, 3)
    group_fwd(const float *__restrict x, const float *__restrict gamma, uint64_t rows,
              uint64_t cols, float n, float eps, float *__restrict y,
              float *__restrict inv_rms) {
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
    float v[L::V];
#pragma unroll
    for (unsigned i = 0; i < L::V; ++i) {
      const unsigned e = L::off(T, i);
      v[i] = (active && e < cols) ? x[base + e] : 0.0f;
    }
    float s[1];
    row_sums<NT, NC, R, 1>([&](unsigned, unsigned i) { return row::sq(v[i]); }, cols, active, ex,
                           s);
    const float is = row::inv_std_of(row::per_col(s[0], n), eps);
    if (active) {
#pragma unroll
      for (unsigned i = 0; i < L::V; ++i) {
        const unsigned e = L::off(T, i);
        if (e < cols) y[base + e] = out_of<G>(row::rms_xhat(v[i], is), gamma, e);
      }
      if (T == 0) inv_rms[rw] = is;
    }
  }
}

// launch(name, kernel, grid, args...) (cuda/common/split_row.cuh's RowLaunch, or the emulator's).
// cols <= kGroupMaxCols.
template <bool G, class Launch>
void fwd_plan_g(const Launch &launch, const float *x, const float *gamma, uint64_t rows,
                uint64_t cols, float n, float eps, float *y, float *inv_rms) {
  if (cols <= 32) {
    red::with_small_width(cols, [&](auto w) {
      constexpr unsigned W = decltype(w)::value;
      launch("rms_norm seg_fwd", seg_fwd<W, G>,
             launch.grid_for(rows, (uint64_t)(kThreads / W) * kSegRows), x, gamma, rows,
             (unsigned)cols, n, eps, y, inv_rms);
    });
    return;
  }
#define TLRT_RMS_GROUP_FWD(NT, NC, R)                                                        \
  launch("rms_norm group_fwd<" #NT ", " #NC ", " #R ">", group_fwd<NT, NC, R, G>,           \
         launch.grid_for(rows, kThreads / NT), x, gamma, rows, cols, n, eps, y, inv_rms)
  if (cols <= 256) TLRT_RMS_GROUP_FWD(32, 1, 1);
  else if (cols <= 512) TLRT_RMS_GROUP_FWD(32, 1, 2);
  else if (cols <= 1024) TLRT_RMS_GROUP_FWD(32, 1, 4);
  else if (cols <= 2048) TLRT_RMS_GROUP_FWD(64, 1, 8);
  else if (cols <= 4096) TLRT_RMS_GROUP_FWD(128, 1, 16);
  else TLRT_RMS_GROUP_FWD(256, 2, 16);
#undef TLRT_RMS_GROUP_FWD
}

template <class Launch>
void fwd_plan(const Launch &launch, const float *x, const float *gamma, uint64_t rows,
              uint64_t cols, float n, float eps, float *y, float *inv_rms) {
  if (gamma != nullptr) fwd_plan_g<true>(launch, x, gamma, rows, cols, n, eps, y, inv_rms);
  else fwd_plan_g<false>(launch, x, gamma, rows, cols, n, eps, y, inv_rms);
}

// ---- backward: dx ---------------------------------------------------------------------------------

// cols <= 32: segments as seg_fwd; S(d * xhat) by seg_sum, then dx.
template <unsigned W, bool G>
__global__ void __launch_bounds__(kThreads)
    seg_bwd(const float *__restrict dy, const float *__restrict x, const float *__restrict gamma,
            const float *__restrict inv_rms, uint64_t rows, unsigned cols, float n,
            float *__restrict dx) {
  using O = red::Ops<red::Op::Sum>;
  constexpr unsigned RB = kThreads / W;
  constexpr unsigned U = kSegRows;
  const unsigned j = threadIdx.x % W;
  const unsigned sub = threadIdx.x / W;
  const bool col = j < cols;
  for (uint64_t first = (uint64_t)blockIdx.x * RB * U; first < rows;
       first += (uint64_t)gridDim.x * RB * U) {
    float gy[U], xv[U], is[U];
    bool ok[U];
#pragma unroll
    for (unsigned u = 0; u < U; ++u) {
      const uint64_t rw = first + (uint64_t)u * RB + sub;
      ok[u] = rw < rows && col;
      gy[u] = ok[u] ? dy[rw * cols + j] : 0.0f;
      xv[u] = ok[u] ? x[rw * cols + j] : 0.0f;
      is[u] = rw < rows ? inv_rms[rw] : 0.0f;
    }
#pragma unroll
    for (unsigned u = 0; u < U; ++u) {
      const float d = ok[u] ? d_of<G>(gy[u], gamma, j) : 0.0f;
      const float xh = row::rms_xhat(xv[u], is[u]);
      const float b = row::per_col(
          row::dev::seg_sum<W>(ok[u] ? O::op(O::identity(), d * xh) : O::identity()), n);
      if (!ok[u]) continue;  // no shuffle below
      const uint64_t rw = first + (uint64_t)u * RB + sub;
      dx[rw * cols + j] = row::rms_bwd_out(d, xh, b, is[u]);
    }
  }
}

// 33..8192 columns: the row's d and xhat in registers, S(d * xhat) by the group, then dx.
template <unsigned NT, unsigned NC, unsigned R, bool G>
__global__ void __launch_bounds__(kThreads)
    group_bwd(const float *__restrict dy, const float *__restrict x,
              const float *__restrict gamma, const float *__restrict inv_rms, uint64_t rows,
              uint64_t cols, float n, float *__restrict dx) {
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
    const float is = active ? inv_rms[rw] : 0.0f;
    float d[L::V], xh[L::V];
#pragma unroll
    for (unsigned i = 0; i < L::V; ++i) {
      const unsigned e = L::off(T, i);
      d[i] = 0.0f;
      xh[i] = 0.0f;
      if (active && e < cols) {
        d[i] = d_of<G>(dy[base + e], gamma, e);
        xh[i] = row::rms_xhat(x[base + e], is);
      }
    }
    float s[1];
    row_sums<NT, NC, R, 1>([&](unsigned, unsigned i) { return d[i] * xh[i]; }, cols, active, ex,
                           s);
    const float b = row::per_col(s[0], n);
    if (active) {
#pragma unroll
      for (unsigned i = 0; i < L::V; ++i) {
        const unsigned e = L::off(T, i);
        if (e < cols) dx[base + e] = row::rms_bwd_out(d[i], xh[i], b, is);
      }
    }
  }
}

// cols <= kGroupMaxCols.
template <bool G, class Launch>
void dx_plan_g(const Launch &launch, const float *dy, const float *x, const float *gamma,
               const float *inv_rms, uint64_t rows, uint64_t cols, float n, float *dx) {
  if (cols <= 32) {
    red::with_small_width(cols, [&](auto w) {
      constexpr unsigned W = decltype(w)::value;
      launch("rms_norm seg_bwd", seg_bwd<W, G>,
             launch.grid_for(rows, (uint64_t)(kThreads / W) * kSegRows), dy, x, gamma, inv_rms,
             rows, (unsigned)cols, n, dx);
    });
    return;
  }
#define TLRT_RMS_GROUP_BWD(NT, NC, R)                                                        \
  launch("rms_norm group_bwd<" #NT ", " #NC ", " #R ">", group_bwd<NT, NC, R, G>,           \
         launch.grid_for(rows, kThreads / NT), dy, x, gamma, inv_rms, rows, cols, n, dx)
  if (cols <= 256) TLRT_RMS_GROUP_BWD(32, 1, 1);
  else if (cols <= 512) TLRT_RMS_GROUP_BWD(32, 1, 2);
  else if (cols <= 1024) TLRT_RMS_GROUP_BWD(32, 1, 4);
  else if (cols <= 2048) TLRT_RMS_GROUP_BWD(64, 1, 8);
  else if (cols <= 4096) TLRT_RMS_GROUP_BWD(128, 1, 16);
  else TLRT_RMS_GROUP_BWD(256, 2, 16);
#undef TLRT_RMS_GROUP_BWD
}

template <class Launch>
void dx_plan(const Launch &launch, const float *dy, const float *x, const float *gamma,
             const float *inv_rms, uint64_t rows, uint64_t cols, float n, float *dx) {
  if (gamma != nullptr) dx_plan_g<true>(launch, dy, x, gamma, inv_rms, rows, cols, n, dx);
  else dx_plan_g<false>(launch, dy, x, gamma, inv_rms, rows, cols, n, dx);
}

// ---- long rows (cols > kGroupMaxCols): functors of row::dev::chunk_reduce / chunk_map -----------
// Forward: chunk partials of S(x * x), reduce_axis over (rows, nc, 1) with the division by n ->
// ms, inv_kernel -> inv_rms, chunk_map -> y. Backward: chunk partials of S(d * xhat), reduce_axis
// -> b, chunk_map -> dx.

struct SqF {
  const float *x;
  uint64_t cols;
  __device__ NoRow prep(uint64_t) const { return {}; }
  __device__ void operator()(NoRow, uint64_t rw, uint64_t e, float (&out)[1]) const {
    out[0] = row::sq(x[rw * cols + e]);
  }
};

template <bool G>
struct OutF {
  const float *x, *gamma, *inv_rms;
  uint64_t cols;
  __device__ float prep(uint64_t rw) const { return inv_rms[rw]; }
  __device__ float operator()(float is, uint64_t rw, uint64_t e) const {
    return out_of<G>(row::rms_xhat(x[rw * cols + e], is), gamma, e);
  }
};

template <bool G>
struct TermF {
  const float *dy, *x, *gamma, *inv_rms;
  uint64_t cols;
  __device__ float prep(uint64_t rw) const { return inv_rms[rw]; }
  __device__ void operator()(float is, uint64_t rw, uint64_t e, float (&out)[1]) const {
    const uint64_t k = rw * cols + e;
    out[0] = d_of<G>(dy[k], gamma, e) * row::rms_xhat(x[k], is);
  }
};

struct RowB {
  float is, b;
};

template <bool G>
struct DxF {
  const float *dy, *x, *gamma, *inv_rms, *b;
  uint64_t cols;
  __device__ RowB prep(uint64_t rw) const { return RowB{inv_rms[rw], b[rw]}; }
  __device__ float operator()(const RowB &p, uint64_t rw, uint64_t e) const {
    const uint64_t k = rw * cols + e;
    return row::rms_bwd_out(d_of<G>(dy[k], gamma, e), row::rms_xhat(x[k], p.is), p.b, p.is);
  }
};

// inv_rms[i] = 1 / sqrt(ms[i] + eps), grid-stride.
__global__ void __launch_bounds__(kThreads)
    inv_kernel(const float *__restrict ms, uint64_t rows, float eps, float *__restrict inv_rms) {
  for (uint64_t i = (uint64_t)blockIdx.x * kThreads + threadIdx.x; i < rows;
       i += (uint64_t)gridDim.x * kThreads)
    inv_rms[i] = row::inv_std_of(ms[i], eps);
}

// ---- backward: the column partials of dgamma ----------------------------------------------------

constexpr unsigned kColSets = 8;   // lane sets per chunk (blocks per chunk and column tile)
constexpr unsigned kColSlots = 4;  // lanes per thread: 256 / (kColSets * 8 warps)
static_assert(kColSets * kColSlots * 8 == red::kLanes, "the block's lanes cover a lane set");

// Grid (x, y): block (x, y) takes column tiles c = x, x + gridDim.x, ... of 32 columns and items
// q = y, y + gridDim.y, ... < nq = nc * kColSets: chunk k = q / kColSets, lane set
// t0 = q % kColSets. Thread (w, l) folds lanes t = t0 + kColSets (w + 8 i), i < kColSlots, of
// column j = 32 c + l (rows 4096 k + t + 256 r, r = 0..15, in order: a = a + dy * xhat from -0),
// then the block halves its 32 lanes (tile_halving: slots i in registers, warps through shared
// memory). part: (nc, kColSets, cols). A warp reads 32 consecutive floats of a row per load.
__global__ void __launch_bounds__(kThreads)
    col_partials(const float *__restrict dy, const float *__restrict x,
                 const float *__restrict inv_rms, uint64_t rows, uint64_t cols, uint64_t nq,
                 float *__restrict part) {
  using O = red::Ops<red::Op::Sum>;
  __shared__ float s8[8][32];
  const unsigned l = threadIdx.x % 32, w = threadIdx.x / 32;
  const uint64_t tiles = (cols + 31) / 32;
  for (uint64_t c = blockIdx.x; c < tiles; c += gridDim.x) {   // block-uniform
    const uint64_t j = c * 32 + l;
    const bool col = j < cols;
    for (uint64_t q = blockIdx.y; q < nq; q += gridDim.y) {  // block-uniform
      const uint64_t k = q / kColSets;
      const uint64_t t0 = q - k * kColSets;
      float v[kColSlots];
#pragma unroll
      for (unsigned i = 0; i < kColSlots; ++i) {
        const uint64_t lane0 = k * red::kChunk + t0 + (uint64_t)kColSets * (w + 8 * i);
        float a = O::identity();
#pragma unroll
        for (unsigned r = 0; r < red::kDepth; ++r) {
          const uint64_t rw = lane0 + (uint64_t)r * red::kLanes;
          if (col && rw < rows) {
            const uint64_t o = rw * cols + j;
            a = O::op(a, dy[o] * row::rms_xhat(x[o], inv_rms[rw]));
          }
        }
        v[i] = a;
      }
      red_kernels::tile_halving<red::Op::Sum>(v, s8, col,
                                              [&](float r) { part[q * cols + j] = r; });
      __syncthreads();  // s8 is written again by the next item
    }
  }
}

// part: chunks_of(rows) * kColSets * cols floats. launch.grid2(name, kernel, dim3, args...).
template <class Launch>
void col_partials_plan(const Launch &launch, const float *dy, const float *x,
                       const float *inv_rms, uint64_t rows, uint64_t cols, float *part) {
  const uint64_t nq = red::chunks_of(rows) * kColSets;
  const uint64_t tiles = (cols + 31) / 32;
  const uint64_t gx = tiles < launch.max_grid() ? tiles : launch.max_grid();
  const uint64_t gy = nq < 65535 ? nq : 65535;
  launch.grid2("rms_norm col_partials", col_partials, dim3((unsigned)gx, (unsigned)gy), dy, x,
               inv_rms, rows, cols, nq, part);
}

}  // namespace rms_kernels
}  // namespace cuda
}  // namespace tlrt
