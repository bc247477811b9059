// Device code of the long-row softmax kernels (cuda/softmax.cu explains the strategy and its
// costs): one 256-thread block per row, every pass of the row in one kernel (row::dev::block_row_*
// of core/numerics/row_ops.hpp). Kept apart so that the CPU emulator test
// (tests/unit/test_softmax_emu.cpp) runs this very source against the CPU backend bit for bit.
// The operations and their order are those of abi/tlrt_softmax.h's DEFINITIONS: the maximum
// (order-free), e = exp(x - m) summed by THE TREE (chunk values by the block's halving, then the
// tree's next level over the chunk values), then the outputs.
#pragma once

#include <cstdint>

#include "core/numerics/reduce_tree.hpp"
#include "core/numerics/row_ops.hpp"
#include "core/numerics/shared_math.hpp"

namespace tlrt {
namespace cuda {
namespace softmax_kernels {

using row::Kind;
using row::dev::block_row_map;
using row::dev::block_row_max;
using row::dev::block_row_sum;
using row::dev::kThreads;

// Rows longer than this take the one-kernel-per-row path only up to kBlockRowMaxChunks chunks.
constexpr uint64_t kBlockRowMaxCols = row::dev::kBlockRowMaxChunks * red::kChunk;

template <Kind KIND>
__global__ void __launch_bounds__(kThreads)
    block_row_fwd(const float *__restrict x, const float *__restrict mask, uint64_t rows,
                  uint64_t cols, float *__restrict y) {
  TLRT_BLOCK_ROW_SHARED(sm);
  for (uint64_t rw = blockIdx.x; rw < rows; rw += gridDim.x) {
    const float *xr = x + rw * cols;
    const float *mr = KIND == Kind::Masked ? mask + rw * cols : nullptr;
    float *yr = y + rw * cols;
    const float m = block_row_max(
        [&](uint64_t e) {
          if constexpr (KIND == Kind::Masked) return row::masked_score(xr[e], mr[e]);
          return xr[e];
        },
        cols, sm);
    float s[1];
    block_row_sum<1>(
        [&](uint64_t e, float (&v)[1]) {
          if constexpr (KIND == Kind::Masked)
            v[0] = row::masked_exp(xr[e], mr[e], m);
          else
            v[0] = row::shifted_exp(xr[e], m);
        },
        cols, sm, s);
    const float ls = KIND == Kind::LogSoftmax ? math::log_f(s[0]) : 0.0f;
    const bool none = KIND == Kind::Masked && m == row::neg_inf();
    constexpr unsigned NL = KIND == Kind::Masked ? 2 : 1;
    block_row_map<NL>(
        [&](uint64_t e, float (&v)[NL]) {
          v[0] = xr[e];
          if constexpr (KIND == Kind::Masked) v[NL - 1] = mr[e];
        },
        [&](uint64_t e, const float (&v)[NL]) {
          float out;
          if constexpr (KIND == Kind::LogSoftmax)
            out = row::log_softmax_out(v[0], m, ls);
          else if constexpr (KIND == Kind::Masked)
            out = none ? 0.0f
                       : row::masked_out(row::masked_exp(v[0], v[NL - 1], m), v[NL - 1], s[0]);
          else
            out = row::softmax_out(row::shifted_exp(v[0], m), s[0]);
          yr[e] = out;
        },
        cols);
  }
}

// softmax: dot = S(g * y), dx = y * (g - dot); log-softmax: sg = S(g), dx = g - exp(y) * sg.
template <bool LOG>
__global__ void __launch_bounds__(kThreads)
    block_row_bwd(const float *__restrict y, const float *__restrict g, uint64_t rows,
                  uint64_t cols, float *__restrict dx) {
  TLRT_BLOCK_ROW_SHARED(sm);
  for (uint64_t rw = blockIdx.x; rw < rows; rw += gridDim.x) {
    const float *yr = y + rw * cols, *gr = g + rw * cols;
    float *dr = dx + rw * cols;
    float s[1];
    block_row_sum<1>(
        [&](uint64_t e, float (&v)[1]) {
          if constexpr (LOG)
            v[0] = gr[e];
          else
            v[0] = row::softmax_bwd_term(yr[e], gr[e]);
        },
        cols, sm, s);
    block_row_map<2>(
        [&](uint64_t e, float (&v)[2]) {
          v[0] = yr[e];
          v[1] = gr[e];
        },
        [&](uint64_t e, const float (&v)[2]) {
          dr[e] = LOG ? row::log_softmax_bwd_out(v[0], v[1], s[0])
                      : row::softmax_bwd_out(v[0], v[1], s[0]);
        },
        cols);
  }
}

// ---- short rows (cols <= 32): a segment of W = pow2_at_least(cols) lanes per row ---------------
// Lane j of a segment holds element j of its row, so a warp reads 32 / W consecutive rows as one
// contiguous run (coalesced; the thread-per-row kernels read each row with its own thread, a
// stride of cols floats). The row sum is red::small<W>: lane j starts at -0 + e[j] (j < cols) or
// -0, then the halving s[t] = s[t] + s[t + h] for h = W/2 .. 1, here by __shfl_down_sync within
// the segment (lane t adds lane t + h); lane 0's value is broadcast. The maximum by xor shuffles
// (order-free). Each thread takes U rows at a time (U independent loads in flight).
constexpr unsigned kSegRows = 4;  // U

template <Kind KIND, unsigned W>
__global__ void __launch_bounds__(kThreads)
    seg_fwd(const float *__restrict x, const float *__restrict mask, uint64_t rows, unsigned cols,
            float *__restrict y) {
  using O = red::Ops<red::Op::Sum>;
  constexpr unsigned RB = kThreads / W;  // rows per block per step
  constexpr unsigned U = kSegRows;
  const unsigned j = threadIdx.x % W;
  const unsigned sub = threadIdx.x / W;
  for (uint64_t first = (uint64_t)blockIdx.x * RB * U; first < rows;
       first += (uint64_t)gridDim.x * RB * U) {
    float v[U], mk[U];
    bool ok[U];
#pragma unroll
    for (unsigned u = 0; u < U; ++u) {
      const uint64_t rw = first + (uint64_t)u * RB + sub;
      ok[u] = rw < rows && j < cols;
      v[u] = ok[u] ? x[rw * cols + j] : 0.0f;
      mk[u] = (KIND == Kind::Masked && ok[u]) ? mask[rw * cols + j] : 1.0f;
    }
#pragma unroll
    for (unsigned u = 0; u < U; ++u) {
      const bool al = KIND != Kind::Masked || row::allowed(mk[u]);
      const float m = row::dev::seg_max<W>(ok[u] && al ? v[u] : row::neg_inf());
      const float e = al ? row::shifted_exp(v[u], m) : 0.0f;
      const float s = row::dev::seg_sum<W>(ok[u] ? O::op(O::identity(), e) : O::identity());
      if (!ok[u]) continue;  // no shuffle below
      float out;
      if constexpr (KIND == Kind::LogSoftmax)
        out = row::log_softmax_out(v[u], m, math::log_f(s));
      else if constexpr (KIND == Kind::Masked)
        out = (m == row::neg_inf() || !al) ? 0.0f : row::softmax_out(e, s);
      else
        out = row::softmax_out(e, s);
      y[(first + (uint64_t)u * RB + sub) * cols + j] = out;
    }
  }
}

template <bool LOG, unsigned W>
__global__ void __launch_bounds__(kThreads)
    seg_bwd(const float *__restrict y, const float *__restrict g, uint64_t rows, unsigned cols,
            float *__restrict dx) {
  using O = red::Ops<red::Op::Sum>;
  constexpr unsigned RB = kThreads / W;
  constexpr unsigned U = kSegRows;
  const unsigned j = threadIdx.x % W;
  const unsigned sub = threadIdx.x / W;
  for (uint64_t first = (uint64_t)blockIdx.x * RB * U; first < rows;
       first += (uint64_t)gridDim.x * RB * U) {
    float yv[U], gv[U];
    bool ok[U];
#pragma unroll
    for (unsigned u = 0; u < U; ++u) {
      const uint64_t rw = first + (uint64_t)u * RB + sub;
      ok[u] = rw < rows && j < cols;
      yv[u] = ok[u] ? y[rw * cols + j] : 0.0f;
      gv[u] = ok[u] ? g[rw * cols + j] : 0.0f;
    }
#pragma unroll
    for (unsigned u = 0; u < U; ++u) {
      const float t = LOG ? gv[u] : row::softmax_bwd_term(yv[u], gv[u]);
      const float s = row::dev::seg_sum<W>(ok[u] ? O::op(O::identity(), t) : O::identity());
      if (!ok[u]) continue;
      dx[(first + (uint64_t)u * RB + sub) * cols + j] =
          LOG ? row::log_softmax_bwd_out(yv[u], gv[u], s) : row::softmax_bwd_out(yv[u], gv[u], s);
    }
  }
}

// ---- 32 < cols <= 128: one warp per row, U = 8 / K rows per warp at once -----------------------
// K = pow2_at_least(cols) / 32 values per lane: lane T holds elements T + 32 k (the tree's lanes,
// one element each: a row of <= 256 elements is one chunk whose lanes hold one element), so the
// tree is: lane value -0 + e (identity past cols), the halving steps h >= 32 inside the thread (k
// with k + h / 32; the steps h >= 32 K only combine identities and are skipped), then h = 16 .. 1
// by __shfl_down_sync and a broadcast -- row::dev::group_halving's order for NT = 32. The group
// kernel with NT = 32 keeps 8 slots per thread of which 2 or 4 hold elements at these widths and
// walks one row per warp at a time; here every slot is an element and a warp has U rows' loads in
// flight (8 per thread).
template <Kind KIND, unsigned K>
__global__ void __launch_bounds__(kThreads)
    warp_fwd(const float *__restrict x, const float *__restrict mask, uint64_t rows,
             uint64_t cols, float *__restrict y) {
  static_assert(K == 2 || K == 4, "64 or 128 columns at most");
  using O = red::Ops<red::Op::Sum>;
  constexpr unsigned U = 8 / K;
  constexpr unsigned kWarps = kThreads / 32;
  const unsigned T = threadIdx.x % 32;
  for (uint64_t first = ((uint64_t)blockIdx.x * kWarps + threadIdx.x / 32) * U; first < rows;
       first += (uint64_t)gridDim.x * kWarps * U) {  // warp-uniform
    float v[U][K];
    bool ok[U][K], al[U][K];
#pragma unroll
    for (unsigned u = 0; u < U; ++u)
#pragma unroll
      for (unsigned k = 0; k < K; ++k) {
        const uint64_t rw = first + u, e = T + 32 * k;
        ok[u][k] = rw < rows && e < cols;
        v[u][k] = ok[u][k] ? x[rw * cols + e] : 0.0f;
        al[u][k] = KIND != Kind::Masked || !ok[u][k] || row::allowed(mask[rw * cols + e]);
      }
#pragma unroll
    for (unsigned u = 0; u < U; ++u) {
      float m = row::neg_inf();
#pragma unroll
      for (unsigned k = 0; k < K; ++k)
        if (ok[u][k] && al[u][k]) m = ew::max_f(m, v[u][k]);
      m = row::dev::seg_max<32>(m);
      float e[K], a[K];
#pragma unroll
      for (unsigned k = 0; k < K; ++k) {
        e[k] = al[u][k] ? row::shifted_exp(v[u][k], m) : 0.0f;
        a[k] = ok[u][k] ? O::op(O::identity(), e[k]) : O::identity();
      }
#pragma unroll
      for (unsigned hk = K / 2; hk >= 1; hk /= 2)
#pragma unroll
        for (unsigned k = 0; k < hk; ++k) a[k] = O::op(a[k], a[k + hk]);
      const float s = row::dev::seg_sum<32>(a[0]);
      const float ls = KIND == Kind::LogSoftmax ? math::log_f(s) : 0.0f;
      const bool none = KIND == Kind::Masked && m == row::neg_inf();
#pragma unroll
      for (unsigned k = 0; k < K; ++k) {
        if (!ok[u][k]) continue;
        float out;
        if constexpr (KIND == Kind::LogSoftmax)
          out = row::log_softmax_out(v[u][k], m, ls);
        else if constexpr (KIND == Kind::Masked)
          out = (none || !al[u][k]) ? 0.0f : row::softmax_out(e[k], s);
        else
          out = row::softmax_out(e[k], s);
        y[(first + u) * cols + T + 32 * k] = out;
      }
    }
  }
}

// Launch plans. A launcher: launch(name, kernel, grid, args...) starts kernel with kThreads
// threads per block; launch.sms() is the device's multiprocessor count, launch.grid_for(items,
// per_block) the blocks for items (capped at the most a launch may have).
template <Kind KIND, class Launch>
void block_row_fwd_plan(const Launch &launch, const float *x, const float *mask, uint64_t rows,
                        uint64_t cols, float *y) {
  const uint64_t bytes = (KIND == Kind::Masked ? 8 : 4) * cols;
  launch("softmax block_row_fwd", block_row_fwd<KIND>,
         row::dev::block_row_grid(rows, bytes, launch.sms()), x, mask, rows, cols, y);
}

template <bool LOG, class Launch>
void block_row_bwd_plan(const Launch &launch, const float *y, const float *g, uint64_t rows,
                        uint64_t cols, float *dx) {
  launch("softmax block_row_bwd", block_row_bwd<LOG>,
         row::dev::block_row_grid(rows, 8 * cols, launch.sms()), y, g, rows, cols, dx);
}

// Short rows: grid of ceil(rows / (RB * U)) blocks (capped; the kernels loop).
template <Kind KIND, class Launch>
void seg_fwd_plan(const Launch &launch, const float *x, const float *mask, uint64_t rows,
                  unsigned cols, float *y) {
  row::with_segment_width(cols, [&](auto w) {
    constexpr unsigned W = decltype(w)::value;
    launch("softmax seg_fwd", seg_fwd<KIND, W>,
           launch.grid_for(rows, (uint64_t)(kThreads / W) * kSegRows), x, mask, rows, cols, y);
  });
}

template <Kind KIND, class Launch>
void warp_fwd_plan(const Launch &launch, const float *x, const float *mask, uint64_t rows,
                   uint64_t cols, float *y) {
  if (cols <= 64)
    launch("softmax warp_fwd", warp_fwd<KIND, 2>, launch.grid_for(rows, (kThreads / 32) * 4), x,
           mask, rows, cols, y);
  else
    launch("softmax warp_fwd", warp_fwd<KIND, 4>, launch.grid_for(rows, (kThreads / 32) * 2), x,
           mask, rows, cols, y);
}

template <bool LOG, class Launch>
void seg_bwd_plan(const Launch &launch, const float *y, const float *g, uint64_t rows,
                  unsigned cols, float *dx) {
  row::with_segment_width(cols, [&](auto w) {
    constexpr unsigned W = decltype(w)::value;
    launch("softmax seg_bwd", seg_bwd<LOG, W>,
           launch.grid_for(rows, (uint64_t)(kThreads / W) * kSegRows), y, g, rows, cols, dx);
  });
}

}  // namespace softmax_kernels
}  // namespace cuda
}  // namespace tlrt
