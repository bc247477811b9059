// Device code of the softmax kernels that the CPU emulator test (tests/unit/test_softmax_emu.cpp)
// runs bit for bit against the CPU backend: short rows (seg_fwd / seg_bwd, warp_fwd), long rows
// forward (split_fwd, cuda/common/split_row.cuh) and backward (block_row_bwd). cuda/softmax.cu
// explains the strategies and their costs. Every kernel performs the operations of
// abi/tlrt_softmax.h's DEFINITIONS in their order: the maximum (order-free), e = exp(x - m) summed
// by THE TREE (chunk values by the block's halving, then the tree's next level), the outputs.
// Last measured: bench/results/2026-11-27-h100-s17-softmax.md
#pragma once

#include <cstdint>
#include <type_traits>

#include "core/numerics/reduce_tree.hpp"
#include "core/numerics/row_ops.hpp"
#include "core/numerics/shared_math.hpp"
#include "cuda/common/split_row.cuh"

namespace tlrt {
namespace cuda {
namespace softmax_kernels {

using row::Kind;
using row::dev::block_row_map;
using row::dev::block_row_sum;
using row::dev::kSegRows;
using row::dev::kThreads;

// ---- long rows backward: one 256-thread block per row, every pass in one kernel ---------------

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
// contiguous run. The row sum is red::small<W> across the segment (row::dev::seg_sum), the maximum
// row::dev::seg_max. Each thread takes U = kSegRows rows at a time.

// log(s[u]) for the U rows a thread holds, where every lane of a W-lane segment holds the same
// U sums (W >= U): lane j computes the one log of row j % U and lanes 0 .. U-1 hand them round
// by shuffles (the same log_f of the same value), one log per lane instead of U. W < U: each
// lane computes its U logs. Every lane of the warp must call this.
template <unsigned W, unsigned U>
__device__ __forceinline__ void seg_logs(const float (&s)[U], float (&ls)[U]) {
  if constexpr (W >= U) {
    const unsigned j = threadIdx.x % W;
    float mine = s[0];
#pragma unroll
    for (unsigned u = 1; u < U; ++u)
      if (j % U == u) mine = s[u];
    const float lm = math::log_f(mine);
#pragma unroll
    for (unsigned u = 0; u < U; ++u) ls[u] = __shfl_sync(0xFFFFFFFFu, lm, (int)u, (int)W);
  } else {
#pragma unroll
    for (unsigned u = 0; u < U; ++u) ls[u] = math::log_f(s[u]);
  }
}

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
    float m[U], e[U], s[U];
#pragma unroll
    for (unsigned u = 0; u < U; ++u) {
      const bool al = KIND != Kind::Masked || row::allowed(mk[u]);
      m[u] = row::dev::seg_max<W>(ok[u] && al ? v[u] : row::neg_inf());
      e[u] = al ? row::shifted_exp(v[u], m[u]) : 0.0f;
      s[u] = row::dev::seg_sum<W>(ok[u] ? O::op(O::identity(), e[u]) : O::identity());
    }
    float ls[U];
    if constexpr (KIND == Kind::LogSoftmax) seg_logs<W, U>(s, ls);
#pragma unroll
    for (unsigned u = 0; u < U; ++u) {
      if (!ok[u]) continue;
      const bool al = KIND != Kind::Masked || row::allowed(mk[u]);
      float out;
      if constexpr (KIND == Kind::LogSoftmax)
        out = row::log_softmax_out(v[u], m[u], ls[u]);
      else if constexpr (KIND == Kind::Masked)
        out = (m[u] == row::neg_inf() || !al) ? 0.0f : row::softmax_out(e[u], s[u]);
      else
        out = row::softmax_out(e[u], s[u]);
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
// K = pow2_at_least(cols) / 32 values per lane: lane T holds elements T + 32 k, the tree's lanes
// (a row of <= 256 elements is one chunk whose lanes hold one element each). The tree: lane value
// -0 + e (identity past cols), the halving steps h >= 32 inside the thread (the steps h >= 32 K
// only combine identities and are skipped), then h = 16 .. 1 by shuffles: row::dev::group_halving's
// order for NT = 32, with every slot an element and 8 loads in flight per thread.
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
    auto row_max = [&](unsigned u) {  // max over the row's allowed elements (-inf: none)
      float m = row::neg_inf();
#pragma unroll
      for (unsigned k = 0; k < K; ++k)
        if (ok[u][k] && al[u][k]) m = ew::max_f(m, v[u][k]);
      return row::dev::seg_max<32>(m);
    };
    if constexpr (KIND == Kind::LogSoftmax) {
      // The U rows' sums first, then one log per lane (seg_logs), then the outputs.
      float mu[U], su[U];
#pragma unroll
      for (unsigned u = 0; u < U; ++u) {
        const float m = row_max(u);
        float a[K];
#pragma unroll
        for (unsigned k = 0; k < K; ++k)
          a[k] = ok[u][k] ? O::op(O::identity(), row::shifted_exp(v[u][k], m)) : O::identity();
        mu[u] = m;
        su[u] = row::dev::seg_sum<32>(red::halve<red::Op::Sum>(a));
      }
      float ls[U];
      seg_logs<32, U>(su, ls);  // one log per lane
#pragma unroll
      for (unsigned u = 0; u < U; ++u)
#pragma unroll
        for (unsigned k = 0; k < K; ++k)
          if (ok[u][k])
            y[(first + u) * cols + T + 32 * k] = row::log_softmax_out(v[u][k], mu[u], ls[u]);
    } else {
#pragma unroll
      for (unsigned u = 0; u < U; ++u) {
        const float m = row_max(u);
        float e[K], a[K];
#pragma unroll
        for (unsigned k = 0; k < K; ++k) {
          e[k] = al[u][k] ? row::shifted_exp(v[u][k], m) : 0.0f;
          a[k] = ok[u][k] ? O::op(O::identity(), e[k]) : O::identity();
        }
        const float s = row::dev::seg_sum<32>(red::halve<red::Op::Sum>(a));
        const bool none = KIND == Kind::Masked && m == row::neg_inf();
#pragma unroll
        for (unsigned k = 0; k < K; ++k) {
          if (!ok[u][k]) continue;
          float out;
          if constexpr (KIND == Kind::Masked)
            out = (none || !al[u][k]) ? 0.0f : row::softmax_out(e[k], s);
          else
            out = row::softmax_out(e[k], s);
          y[(first + u) * cols + T + 32 * k] = out;
        }
      }
    }
  }
}

// ---- long rows held in registers by Q groups of 256 threads (a block, or a cluster) -----------
// split_fwd (8192 < cols <= Q * NCL * 4096; layout, maximum and tree sum of split_row.cuh): every
// load of a thread is issued before the first use; per row the maximum, e folded into the lanes in
// the tree's order (r = 0..15), the tree sum, the outputs from registers.
template <Kind KIND, unsigned Q, unsigned NCL, bool CLUSTER, bool FULL>
__device__ __forceinline__ void split_fwd_body(const float *__restrict x,
                                               const float *__restrict mask, uint64_t rows,
                                               uint64_t cols, float *__restrict y) {
  using P = split_row::SplitPart<Q, NCL, CLUSTER>;
  using O = red::Ops<red::Op::Sum>;
  constexpr unsigned R = red::kDepth;
  constexpr unsigned V = NCL * R;
  using Bits = std::conditional_t<(V > 32), uint64_t, uint32_t>;
  __shared__ split_row::SplitShared<Q, NCL, CLUSTER> shared;
  split_row::SplitState<Q, NCL, CLUSTER> st(shared);
  // Element i of the thread: q 4096 + T + split_off(i), inside the row when split_off(i) < lim.
  const unsigned qT = st.q * red::kChunk + st.T;
  const unsigned lim = cols > qT ? (unsigned)cols - qT : 0u;
  for (uint64_t rw = P::first_row(); rw < rows; rw += P::row_stride()) {  // group-uniform
    const uint64_t base = rw * cols + qT;
    const float *xr = x + base;
    const float *mr = KIND == Kind::Masked ? mask + base : nullptr;
    float *yr = y + base;
    float v[V];
    Bits blocked = 0;
#pragma unroll
    for (unsigned i = 0; i < V; ++i) {
      const unsigned o = split_row::split_off<Q>(i);
      v[i] = row::neg_inf();
      if (FULL || o < lim) {
        v[i] = xr[o];
        if (KIND == Kind::Masked && !row::allowed(mr[o])) blocked |= Bits{1} << i;
      }
    }
    float m = row::neg_inf();
#pragma unroll
    for (unsigned i = 0; i < V; ++i)
      m = ew::max_f(m, ((blocked >> i) & 1u) ? row::neg_inf() : v[i]);
    m = st.max(m);
    // The tree: lane T of each of the group's chunks folds its 16 elements in order.
    float a[NCL][1];
#pragma unroll
    for (unsigned j = 0; j < NCL; ++j) a[j][0] = O::identity();
#pragma unroll
    for (unsigned i = 0; i < V; ++i) {
      if (FULL || split_row::split_off<Q>(i) < lim) {
        const float ev = ((blocked >> i) & 1u) ? 0.0f : row::shifted_exp(v[i], m);
        if (KIND != Kind::LogSoftmax) v[i] = ev;
        a[i / R][0] = O::op(a[i / R][0], ev);
      }
    }
    const float s = st.tree_sum(a);
    const float ls = KIND == Kind::LogSoftmax ? math::log_f(s) : 0.0f;
    const bool none = KIND == Kind::Masked && m == row::neg_inf();
#pragma unroll
    for (unsigned i = 0; i < V; ++i) {
      const unsigned o = split_row::split_off<Q>(i);
      if (!FULL && o >= lim) continue;
      float out;
      if constexpr (KIND == Kind::LogSoftmax)
        out = row::log_softmax_out(v[i], m, ls);
      else if constexpr (KIND == Kind::Masked)
        out = (none || ((blocked >> i) & 1u)) ? 0.0f : row::softmax_out(v[i], s);
      else
        out = row::softmax_out(v[i], s);
      yr[o] = out;
    }
  }
  st.finish();
}

// Blocks of Q * 256 threads, one row per block. (The emulator test also runs the (Q, NCL) of the
// cluster forms this way: the same body.)
template <Kind KIND, unsigned Q, unsigned NCL, bool FULL>
__global__ void __launch_bounds__(Q * kThreads, Q >= 4 ? 1 : 2)
    split_fwd(const float *__restrict x, const float *__restrict mask, uint64_t rows,
              uint64_t cols, float *__restrict y) {
  split_fwd_body<KIND, Q, NCL, false, FULL>(x, mask, rows, cols, y);
}

#if defined(TLRT_SPLIT_HAVE_CLUSTER)
// Clusters of Q blocks of 256 threads, one row per cluster (split_row::split_launch_cluster).
template <Kind KIND, unsigned Q, unsigned NCL, bool FULL>
__global__ void __launch_bounds__(kThreads, NCL == 4 ? 2 : 3)
    split_fwd_cluster(const float *__restrict x, const float *__restrict mask, uint64_t rows,
                      uint64_t cols, float *__restrict y) {
#if defined(TLRT_SPLIT_CLUSTER_CODE)
  split_fwd_body<KIND, Q, NCL, true, FULL>(x, mask, rows, cols, y);
#else
  __trap();
#endif
}
#endif

// ---- launch plans: a launcher as split_row.cuh's RowLaunch ------------------------------------
// One block of Q * 256 threads per row.
template <Kind KIND, unsigned Q, unsigned NCL, class Launch>
void split_fwd_plan(const Launch &launch, const float *x, const float *mask, uint64_t rows,
                    uint64_t cols, float *y) {
  const unsigned grid = launch.grid_for(rows, 1);
  if (cols == split_row::SplitPart<Q, NCL, false>::kMaxCols)
    launch.sized("softmax split_fwd", split_fwd<KIND, Q, NCL, true>, grid, Q * kThreads, x, mask,
                 rows, cols, y);
  else
    launch.sized("softmax split_fwd", split_fwd<KIND, Q, NCL, false>, grid, Q * kThreads, x, mask,
                 rows, cols, y);
}

template <bool LOG, class Launch>
void block_row_bwd_plan(const Launch &launch, const float *y, const float *g, uint64_t rows,
                        uint64_t cols, float *dx) {
  launch("softmax block_row_bwd", block_row_bwd<LOG>,
         row::dev::block_row_grid(rows, 8 * cols, launch.sms()), y, g, rows, cols, dx);
}

// Short rows: ceil(rows / (RB * U)) blocks (capped; the kernels loop).
template <Kind KIND, class Launch>
void seg_fwd_plan(const Launch &launch, const float *x, const float *mask, uint64_t rows,
                  unsigned cols, float *y) {
  red::with_small_width(cols, [&](auto w) {
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
  red::with_small_width(cols, [&](auto w) {
    constexpr unsigned W = decltype(w)::value;
    launch("softmax seg_bwd", seg_bwd<LOG, W>,
           launch.grid_for(rows, (uint64_t)(kThreads / W) * kSegRows), y, g, rows, cols, dx);
  });
}

}  // namespace softmax_kernels
}  // namespace cuda
}  // namespace tlrt
