// Device code of the fused cross-entropy (abi/tlrt_softmax.h, tlrt_cross_entropy_fwd / _bwd),
// run bit for bit against the CPU backend by the CPU emulator test
// (tests/unit/test_cross_entropy_emu.cpp). cuda/softmax.cu dispatches these kernels.
//
// STRATEGY AND BYTES MOVED (x the logits, rows * cols floats; labels 4 or 8 bytes a row):
//  - forward, cols <= 8192: ce_group_fwd (cuda/softmax.cu), softmax's group_fwd schedule (a group
//    of 32 .. 256 threads per row, several rows per block) with this file's row outputs.
//  - forward, cols <= 65536 (16384 without thread-block clusters): ce_split, the row held in the
//    registers of Q groups of 256 threads (a block, or a cluster of Q blocks on sm_90:
//    cuda/common/split_row.cuh, the layout of softmax's split_fwd): every load of a thread
//    issued before the first use, the maximum (order-free), e = exp(x - m) folded in the tree's
//    lane order, THE TREE sum (chunk halving, then the chunk level), log(s) once per row; one
//    thread per row writes the stats (m, log s) and the picked log-softmax value (one extra L2
//    read of x[label]). DRAM: x read ONCE: 4 bytes per logit, + 12 (int32 labels) per row.
//  - forward, longer rows: chunk passes in cuda/softmax.cu (chunk maxima, chunk sums of e, each
//    finished by reduce_axis), then ce_pick per row: x read twice, 8 bytes per logit.
//  - the loss: the rows' picked values (4 bytes a row) summed by THE TREE (reduce_axis over one
//    row of rows values), then ce_finish, ONE block: counts the rows that are not ignored (an
//    integer sum: exact whatever the order) and the faults (one atomicAdd of the integer count
//    to the index fault counter, the fault path only), writes -(P / (float)n). No floating-point
//    atomics: bitwise deterministic, the CPU's value.
//  - backward: ce_finish<BWD> (one block) turns g and the count into the row gradient c; then
//    ce_bwd, one 256-thread block per row: the row's stats, label and c, then
//    dx = fma(-exp((x - m) - ls), c_row, j == l ? c_row : 0) for every element, float4 loads
//    and stores when the x and dx rows share their 16-byte alignment (the row head and tail
//    scalar); rows under 256 columns ce_bwd_flat, one thread per element. DRAM: x read once, dx
//    written once: 8 bytes per logit.
#pragma once

#include <cstdint>
#include <type_traits>

#include "core/numerics/reduce_tree.hpp"
#include "core/numerics/row_ops.hpp"
#include "core/numerics/shared_math.hpp"
#include "cuda/common/split_row.cuh"

namespace tlrt {
namespace cuda {
namespace ce_kernels {

using row::Label;
using row::dev::kThreads;

// The per-row results of a forward: stats (m, log s) and the picked value (+0 unless valid).
template <class T>
__device__ __forceinline__ void ce_row_out(const float *__restrict x, const T *__restrict lab,
                                           uint64_t rw, uint64_t cols, int64_t ignore, float m,
                                           float s, float *__restrict picked,
                                           float *__restrict stats) {
  const float ls = math::log_f(s);
  stats[2 * rw] = m;
  stats[2 * rw + 1] = ls;
  const T l = lab[rw];
  picked[rw] = row::ce_label(l, cols, ignore) == Label::Valid
                   ? row::log_softmax_out(x[rw * cols + (uint64_t)l], m, ls)
                   : 0.0f;
}

// ---- forward: the row in registers (split_row layout) ------------------------------------------
template <class T, unsigned Q, unsigned NCL, bool CLUSTER, bool FULL>
__device__ __forceinline__ void ce_split_body(const float *__restrict x, const T *__restrict lab,
                                              uint64_t rows, uint64_t cols, int64_t ignore,
                                              float *__restrict picked, float *__restrict stats) {
  using P = split_row::SplitPart<Q, NCL, CLUSTER>;
  using O = red::Ops<red::Op::Sum>;
  constexpr unsigned R = red::kDepth;
  constexpr unsigned V = NCL * R;
  __shared__ split_row::SplitShared<Q, NCL, CLUSTER> shared;
  split_row::SplitState<Q, NCL, CLUSTER> st(shared);
  const unsigned qT = st.q * red::kChunk + st.T;
  const unsigned lim = cols > qT ? (unsigned)cols - qT : 0u;
  for (uint64_t rw = P::first_row(); rw < rows; rw += P::row_stride()) {  // group-uniform
    const float *xr = x + rw * cols + qT;
    float v[V];
#pragma unroll
    for (unsigned i = 0; i < V; ++i) {
      const unsigned o = split_row::split_off<Q>(i);
      v[i] = row::neg_inf();
      if (FULL || o < lim) v[i] = xr[o];
    }
    float m = row::neg_inf();
#pragma unroll
    for (unsigned i = 0; i < V; ++i) m = ew::max_f(m, v[i]);
    m = st.max(m);
    float a[NCL][1];
#pragma unroll
    for (unsigned j = 0; j < NCL; ++j) a[j][0] = O::identity();
#pragma unroll
    for (unsigned i = 0; i < V; ++i)
      if (FULL || split_row::split_off<Q>(i) < lim)
        a[i / R][0] = O::op(a[i / R][0], row::shifted_exp(v[i], m));
    const float s = st.tree_sum(a);
    if (st.q == 0 && st.T == 0) ce_row_out(x, lab, rw, cols, ignore, m, s, picked, stats);
  }
  st.finish();
}

template <class T, unsigned Q, unsigned NCL, bool FULL>
__global__ void __launch_bounds__(Q * kThreads, Q >= 4 ? 1 : 2)
    ce_split(const float *__restrict x, const T *__restrict lab, uint64_t rows, uint64_t cols,
             int64_t ignore, float *__restrict picked, float *__restrict stats) {
  ce_split_body<T, Q, NCL, false, FULL>(x, lab, rows, cols, ignore, picked, stats);
}

#if defined(TLRT_SPLIT_HAVE_CLUSTER)
template <class T, unsigned Q, unsigned NCL, bool FULL>
__global__ void __launch_bounds__(kThreads, NCL == 4 ? 2 : 3)
    ce_split_cluster(const float *__restrict x, const T *__restrict lab, uint64_t rows,
                     uint64_t cols, int64_t ignore, float *__restrict picked,
                     float *__restrict stats) {
#if defined(TLRT_SPLIT_CLUSTER_CODE)
  ce_split_body<T, Q, NCL, true, FULL>(x, lab, rows, cols, ignore, picked, stats);
#else
  __trap();
#endif
}
#endif

// ---- forward, long rows: the per-row finish of the chunk passes (m, s per row given) ----------
template <class T>
__global__ void __launch_bounds__(kThreads)
    ce_pick(const float *__restrict x, const T *__restrict lab, uint64_t rows, uint64_t cols,
            int64_t ignore, const float *__restrict m, const float *__restrict s,
            float *__restrict picked, float *__restrict stats) {
  for (uint64_t rw = (uint64_t)blockIdx.x * kThreads + threadIdx.x; rw < rows;
       rw += (uint64_t)gridDim.x * kThreads) {
    if (cols == 0) {
      stats[2 * rw] = row::neg_inf();
      stats[2 * rw + 1] = row::neg_inf();
      picked[rw] = 0.0f;
    } else {
      ce_row_out(x, lab, rw, cols, ignore, m[rw], s[rw], picked, stats);
    }
  }
}

// ---- the count, the loss, the row gradient: one block ------------------------------------------
// BWD false: loss[0] = -(sum[0] / (float)n), the faults added to *faults. BWD true:
// out[0] = c = ((-g[0]) * (float)(1 / n)) + 0 (sum = g).
template <class T, bool BWD>
__global__ void __launch_bounds__(kThreads)
    ce_finish(const T *__restrict lab, uint64_t rows, uint64_t cols, int64_t ignore,
              const float *__restrict sum, unsigned long long *faults, float *__restrict out) {
  __shared__ unsigned long long cn[kThreads], cf[kThreads];
  unsigned long long n = 0, nf = 0;
  for (uint64_t r = threadIdx.x; r < rows; r += kThreads) {
    const Label k = row::ce_label(lab[r], cols, ignore);
    n += k != Label::Ignored;
    nf += k == Label::Fault;
  }
  cn[threadIdx.x] = n;
  cf[threadIdx.x] = nf;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (unsigned i = 1; i < kThreads; ++i) {
      n += cn[i];
      nf += cf[i];
    }
    if constexpr (BWD) {
      out[0] = row::ce_row_grad(sum[0], n);
    } else {
      out[0] = row::ce_loss(sum[0], n);
      if (nf != 0) {
#if defined(__CUDA_ARCH__)
        atomicAdd(faults, nf);
#else
        *faults += nf;  // the emulator: one thread at a time
#endif
      }
    }
  }
}

// ---- backward: one block per row ---------------------------------------------------------------
template <class T>
__global__ void __launch_bounds__(kThreads)
    ce_bwd(const float *__restrict x, const T *__restrict lab, const float *__restrict stats,
           const float *__restrict cg, uint64_t rows, uint64_t cols, int64_t ignore,
           float *__restrict dx) {
  const float c = cg[0];
  const unsigned t = threadIdx.x;
  for (uint64_t rw = blockIdx.x; rw < rows; rw += gridDim.x) {
    const float m = stats[2 * rw], ls = stats[2 * rw + 1];
    const T l = lab[rw];
    const bool valid = row::ce_label(l, cols, ignore) == Label::Valid;
    const float cr = valid ? c : 0.0f;
    const uint64_t lr = valid ? (uint64_t)l : cols;  // no element is at cols
    const float *xr = x + rw * cols;
    float *dr = dx + rw * cols;
    auto one = [&](uint64_t e) { dr[e] = row::ce_bwd_out(xr[e], m, ls, cr, e == lr); };
    const uintptr_t ax = (uintptr_t)xr, ad = (uintptr_t)dr;
    if (((ax ^ ad) & 15u) != 0 || (ax & 3u) != 0) {
      for (uint64_t e = t; e < cols; e += kThreads) one(e);
      continue;
    }
    uint64_t head = ((16u - (unsigned)(ax & 15u)) & 15u) / 4u;
    if (head > cols) head = cols;
    if (t < head) one(t);
    const uint64_t n4 = (cols - head) / 4;
    const float4 *x4 = reinterpret_cast<const float4 *>(xr + head);
    float4 *d4 = reinterpret_cast<float4 *>(dr + head);
    constexpr unsigned U = 4;
    uint64_t i = t;
    auto out4 = [&](uint64_t i4, const float4 &v) {
      const uint64_t e = head + 4 * i4;
      float4 o;
      o.x = row::ce_bwd_out(v.x, m, ls, cr, e == lr);
      o.y = row::ce_bwd_out(v.y, m, ls, cr, e + 1 == lr);
      o.z = row::ce_bwd_out(v.z, m, ls, cr, e + 2 == lr);
      o.w = row::ce_bwd_out(v.w, m, ls, cr, e + 3 == lr);
      d4[i4] = o;
    };
    for (; i + (U - 1) * kThreads < n4; i += U * kThreads) {
      float4 v[U];
#pragma unroll
      for (unsigned u = 0; u < U; ++u) v[u] = x4[i + u * kThreads];
#pragma unroll
      for (unsigned u = 0; u < U; ++u) out4(i + u * kThreads, v[u]);
    }
    for (; i < n4; i += kThreads) out4(i, x4[i]);
    for (uint64_t e = head + 4 * n4 + t; e < cols; e += kThreads) one(e);
  }
}

// Short rows (cols < 256, where a block per row would idle most of its threads): one thread per
// element over the flat (rows, cols) array, its row's stats and label read per element (cached).
template <class T>
__global__ void __launch_bounds__(kThreads)
    ce_bwd_flat(const float *__restrict x, const T *__restrict lab, const float *__restrict stats,
                const float *__restrict cg, uint64_t rows, uint64_t cols, int64_t ignore,
                float *__restrict dx) {
  const float c = cg[0];
  const uint64_t n = rows * cols;
  for (uint64_t i = (uint64_t)blockIdx.x * kThreads + threadIdx.x; i < n;
       i += (uint64_t)gridDim.x * kThreads) {
    const uint64_t rw = i / cols, e = i - rw * cols;
    const T l = lab[rw];
    const bool valid = row::ce_label(l, cols, ignore) == Label::Valid;
    dx[i] = row::ce_bwd_out(x[i], stats[2 * rw], stats[2 * rw + 1], valid ? c : 0.0f,
                            valid && (uint64_t)l == e);
  }
}

// ---- launch plans (a launcher as split_row.cuh's RowLaunch) ------------------------------------
template <class T, unsigned Q, unsigned NCL, class Launch>
void split_plan(const Launch &launch, const float *x, const T *lab, uint64_t rows, uint64_t cols,
                int64_t ignore, float *picked, float *stats) {
  const unsigned grid = launch.grid_for(rows, 1);
  if (cols == split_row::SplitPart<Q, NCL, false>::kMaxCols)
    launch.sized("cross_entropy ce_split", ce_split<T, Q, NCL, true>, grid, Q * kThreads, x, lab,
                 rows, cols, ignore, picked, stats);
  else
    launch.sized("cross_entropy ce_split", ce_split<T, Q, NCL, false>, grid, Q * kThreads, x,
                 lab, rows, cols, ignore, picked, stats);
}

template <class T, bool BWD, class Launch>
void finish_plan(const Launch &launch, const T *lab, uint64_t rows, uint64_t cols, int64_t ignore,
                 const float *sum, unsigned long long *faults, float *out) {
  launch("cross_entropy ce_finish", ce_finish<T, BWD>, 1u, lab, rows, cols, ignore, sum, faults,
         out);
}

template <class T, class Launch>
void bwd_plan(const Launch &launch, const float *x, const T *lab, const float *stats,
              const float *c, uint64_t rows, uint64_t cols, int64_t ignore, float *dx) {
  if (cols < kThreads)
    launch("cross_entropy ce_bwd_flat", ce_bwd_flat<T>, launch.grid_for(rows * cols, kThreads), x,
           lab, stats, c, rows, cols, ignore, dx);
  else
    launch("cross_entropy ce_bwd", ce_bwd<T>, launch.grid_for(rows, 1), x, lab, stats, c, rows,
           cols, ignore, dx);
}

}  // namespace ce_kernels
}  // namespace cuda
}  // namespace tlrt
