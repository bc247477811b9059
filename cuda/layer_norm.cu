// CUDA backend, fused layer normalisation and RMS norm (below), forward and backward: the
// DEFINITIONS of abi/tlrt_layer_norm.h with the formulas of core/numerics/row_ops.hpp and THE TREE
// of core/numerics/reduce_tree.hpp, bit for bit the CPU's (-fmad=false; correctly rounded division,
// square root and reciprocal; no atomics on data: the finish's tickets count on counters; the
// library stream; grids capped at 2^31 - 1 blocks, kernels loop). History:
// docs/kernels/layer_norm.md.
//
// Work per element: forward two additions (the sums), two subtractions, two multiplies and an fma;
// backward about ten operations (d, xhat, the two row sums, dx, the column folds of dgamma and
// dbeta). Bytes: forward 8 per element (x read, y written) + 8 per row; backward 12 (dy and x
// read, dx written) + the partials. FORWARD (cuda/kernels/layer_norm.cuh unless noted):
//  - cols <= 32, seg_fwd: a segment of W = pow2_at_least(cols) lanes per row (lane j = element j,
//    warps read runs of rows), both sums red::small<W> by shuffles.
//  - up to 8192, group_fwd (this file): a group of NT = 32 .. 256 threads holds the row in
//    registers (row::dev::Layout, as the softmax kernels): S(x) -> mean, S((x - mean)^2) ->
//    inv_std, then y from registers.
//  - 8192 < cols <= 65536, split_fwd (cuda/common/split_row.cuh): the row in the registers of one
//    512-thread block (up to 16384) or of a cluster of 4 blocks of 256 threads (2 chunks each up
//    to 32768, 4 up to 65536). Clusters need compute capability 9; without them rows over 16384
//    take the chunk passes.
//  - longer rows: chunk passes (one block per (row, chunk of 4096), reduce_axis finishing the
//    tree), then y: 16 bytes per element.
// BACKWARD, cols <= 4096: dx and the first levels of the column tree of dgamma / dbeta in ONE pass
// over dy and x: fused_seg_bwd (cols <= 32), fused_group_bwd (33..512, rows in registers; at
// 257..512 its lane accumulators in shared memory), fused_pipe_bwd (513..4096: dy and x through a
// 2-stage cp.async ring of 64 KiB, 3 blocks per SM; the register kernel where it does not fit).
// They write (nc, S, cols) partials, 2 rows cols / (16 G) floats for G lanes per block, which the
// wide finish (a programmatic dependent launch, one ticket per column tile) reduces to dgamma and
// dbeta; columns of more than 2^20 rows take reduce_axis instead. Where those nc * S blocks would
// not give every SM two (split_bwd_pays), the
// SPLIT form instead: group_dx (a group per row, all rows in parallel, 12 bytes per element) and
// the column tree by lane_fold (below; 8 more).
// BACKWARD, cols > 4096: dx by block_row_dx up to 8192 columns (one block per row: the sums, then
// dx with the row from L2), longer rows by chunk_reduce, reduce_axis and chunk_map; dgamma and
// dbeta by lane_fold (one thread per (chunk of rows, lane, column): dy and x read once more) and
// reduce_axis: about 20 bytes per element.
// Last measured: bench/results/2026-11-29-h200-layer-norm-split.md
//
// RMS NORM (cuda/kernels/rms_norm.cuh; history in docs/kernels/layer_norm.md, "RMS norm").
// Work per element: forward one square and one addition (the sum), two
// multiplies; backward about eight operations (d, xhat, the row sum, dx; the column fold).
// FORWARD, 8 bytes per element (x read, y written) + 4 per row: segments up to 32 columns
// (seg_fwd), the row in the registers of a group of 32 .. 256 threads up to 8192 (group_fwd, the
// layer norm's layouts, one tree sum S(x * x) instead of two); longer rows by the chunk passes
// (chunk_reduce of x * x, reduce_axis, inv_kernel, chunk_map: 12 bytes per element).
// BACKWARD: dx by seg_bwd / group_bwd (dy and x in registers, one tree sum S(d * xhat): 12
// bytes per element) or the chunk passes beyond 8192 columns (16); dgamma (when asked for) by
// col_partials, a second read of dy and x (8 bytes per element): a block per (32-column tile,
// 4096-row chunk, lane set of 8) folds its 32 lanes over their 16 rows and halves them
// (tile_halving), and reduce_axis finishes the lane sets and the chunks from (nc, 8, cols)
// partials. About 20 bytes per element in all, against the layer norm's fused 12.25.
#include "core/backend/layer_norm.hpp"
#include "core/backend/memory.hpp"
#include "core/backend/reduce.hpp"
#include "cuda/common/launch.cuh"
#include "cuda/kernels/layer_norm.cuh"
#include "cuda/kernels/rms_norm.cuh"

namespace tlrt {
namespace cuda {

namespace {

// dx by one block per row up to 8192 columns; above, the chunk passes are faster.
constexpr uint64_t kBlockRowBwdMaxCols = 8192;
static_assert(kBlockRowBwdMaxCols <= row::dev::kBlockRowMaxCols, "block_row limit");

using row::dev::chunk_map;
using row::dev::chunk_reduce;
using row::dev::Exchange;
using row::dev::kThreads;
using row::dev::Layout;
using row::dev::NoRow;
using row::dev::row_sums;

// ---- forward ------------------------------------------------------------------------------------

// At most 80 registers (3 blocks of 256 threads per SM): unbounded, the compiler hoists every
// gamma / beta load of the output loop (~100 registers).
template <unsigned NT, unsigned NC, unsigned R>
__global__ void __launch_bounds__(kThreads, 3)
    group_fwd(const float *__restrict x, const float *__restrict gamma,
              const float *__restrict beta, uint64_t rows, uint64_t cols, float n, float eps,
              float *__restrict y, float *__restrict mean, float *__restrict inv_std) {
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
    row_sums<NT, NC, R, 1>([&](unsigned, unsigned i) { return v[i]; }, cols, active, ex, s);
    const float mu = row::per_col(s[0], n);
    row_sums<NT, NC, R, 1>([&](unsigned, unsigned i) { return row::sq_dev(v[i], mu); }, cols,
                           active, ex, s);
    const float is = row::inv_std_of(row::per_col(s[0], n), eps);
    if (active) {
#pragma unroll
      for (unsigned i = 0; i < L::V; ++i) {
        const unsigned e = L::off(T, i);
        if (e < cols) y[base + e] = row::ln_out(row::xhat_of(v[i], mu, is), gamma[e], beta[e]);
      }
      if (T == 0) {
        mean[rw] = mu;
        inv_std[rw] = is;
      }
    }
  }
}

struct XF {
  const float *x;
  uint64_t cols;
  __device__ NoRow prep(uint64_t) const { return {}; }
  __device__ void operator()(NoRow, uint64_t rw, uint64_t e, float (&out)[1]) const {
    out[0] = x[rw * cols + e];
  }
};

struct SqF {
  const float *x, *mean;
  uint64_t cols;
  __device__ float prep(uint64_t rw) const { return mean[rw]; }
  __device__ void operator()(float mu, uint64_t rw, uint64_t e, float (&out)[1]) const {
    out[0] = row::sq_dev(x[rw * cols + e], mu);
  }
};

struct RowStat {
  float mean, inv_std;
};

struct OutF {
  const float *x, *gamma, *beta, *mean, *inv_std;
  uint64_t cols;
  __device__ RowStat prep(uint64_t rw) const { return RowStat{mean[rw], inv_std[rw]}; }
  __device__ float operator()(const RowStat &p, uint64_t rw, uint64_t e) const {
    return row::ln_out(row::xhat_of(x[rw * cols + e], p.mean, p.inv_std), gamma[e], beta[e]);
  }
};

__global__ void __launch_bounds__(kThreads)
    inv_std_kernel(const float *__restrict var, uint64_t rows, float eps,
                   float *__restrict inv_std) {
  for (uint64_t i = (uint64_t)blockIdx.x * kThreads + threadIdx.x; i < rows;
       i += (uint64_t)gridDim.x * kThreads)
    inv_std[i] = row::inv_std_of(var[i], eps);
}

void long_fwd(int dev, const float *x, const float *gamma, const float *beta, uint64_t rows,
              uint64_t cols, float n, float eps, float *y, float *mean, float *inv_std) {
  cudaStream_t st = stream(dev);
  const uint64_t nc = red::chunks_of(cols);
  const unsigned grid = blocks(rows * nc, 1);
  FloatScratch part(dev, rows * nc), var(dev, rows);
  chunk_reduce<red::Op::Sum, 1>
      <<<grid, kThreads, 0, st>>>(XF{x, cols}, rows, cols, nc, part.get(), nullptr);
  check_launch("layer_norm chunk_reduce (x)");
  reduce_axis(dev, red::Op::Sum, part.get(), rows, nc, 1, n, mean);
  chunk_reduce<red::Op::Sum, 1>
      <<<grid, kThreads, 0, st>>>(SqF{x, mean, cols}, rows, cols, nc, part.get(), nullptr);
  check_launch("layer_norm chunk_reduce (q)");
  reduce_axis(dev, red::Op::Sum, part.get(), rows, nc, 1, n, var.get());
  inv_std_kernel<<<blocks(rows, kThreads), kThreads, 0, st>>>(var.get(), rows, eps, inv_std);
  check_launch("layer_norm inv_std_kernel");
  chunk_map<<<grid, kThreads, 0, st>>>(OutF{x, gamma, beta, mean, inv_std, cols}, rows, cols, nc,
                                       y);
  check_launch("layer_norm chunk_map (y)");
}

// ---- backward: dx -------------------------------------------------------------------------------

// Long rows: S(d) and S(d * xhat) chunk by chunk, in one pass.
struct TermsF {
  const float *dy, *x, *gamma, *mean, *inv_std;
  uint64_t cols;
  __device__ RowStat prep(uint64_t rw) const { return RowStat{mean[rw], inv_std[rw]}; }
  __device__ void operator()(const RowStat &p, uint64_t rw, uint64_t e, float (&out)[2]) const {
    const uint64_t k = rw * cols + e;
    const float d = row::ln_d(dy[k], gamma[e]);
    out[0] = d;
    out[1] = d * row::xhat_of(x[k], p.mean, p.inv_std);
  }
};

struct RowBwd {
  float mean, inv_std, a, b;
};

struct DxF {
  const float *dy, *x, *gamma, *mean, *inv_std, *a, *b;
  uint64_t cols;
  __device__ RowBwd prep(uint64_t rw) const { return RowBwd{mean[rw], inv_std[rw], a[rw], b[rw]}; }
  __device__ float operator()(const RowBwd &p, uint64_t rw, uint64_t e) const {
    const uint64_t k = rw * cols + e;
    return row::ln_bwd_out(row::ln_d(dy[k], gamma[e]), row::xhat_of(x[k], p.mean, p.inv_std), p.a,
                           p.b, p.inv_std);
  }
};

void long_dx(int dev, const float *dy, const float *x, const float *mean, const float *inv_std,
             const float *gamma, uint64_t rows, uint64_t cols, float n, float *dx) {
  cudaStream_t st = stream(dev);
  const uint64_t nc = red::chunks_of(cols);
  const unsigned grid = blocks(rows * nc, 1);
  FloatScratch p0(dev, rows * nc), p1(dev, rows * nc), a(dev, rows), b(dev, rows);
  chunk_reduce<red::Op::Sum, 2><<<grid, kThreads, 0, st>>>(
      TermsF{dy, x, gamma, mean, inv_std, cols}, rows, cols, nc, p0.get(), p1.get());
  check_launch("layer_norm_bwd chunk_reduce");
  reduce_axis(dev, red::Op::Sum, p0.get(), rows, nc, 1, n, a.get());
  reduce_axis(dev, red::Op::Sum, p1.get(), rows, nc, 1, n, b.get());
  chunk_map<<<grid, kThreads, 0, st>>>(DxF{dy, x, gamma, mean, inv_std, a.get(), b.get(), cols},
                                       rows, cols, nc, dx);
  check_launch("layer_norm_bwd chunk_map (dx)");
}

// ---- backward: dgamma, dbeta --------------------------------------------------------------------

__global__ void __launch_bounds__(kThreads)
    lane_fold(const float *__restrict dy, const float *__restrict x, const float *__restrict mean,
              const float *__restrict inv_std, uint64_t rows, uint64_t cols, unsigned lanes,
              uint64_t nc, float *__restrict pg, float *__restrict pb) {
  const uint64_t total = nc * lanes * cols;
  for (uint64_t q = (uint64_t)blockIdx.x * kThreads + threadIdx.x; q < total;
       q += (uint64_t)gridDim.x * kThreads) {
    const uint64_t kt = q / cols;
    const uint64_t j = q - kt * cols;
    const uint64_t k = kt / lanes;
    const uint64_t i0 = k * red::kChunk + (kt - k * lanes);
    float ag = red::Ops<red::Op::Sum>::identity(), ab = ag;
#pragma unroll
    for (unsigned r = 0; r < red::kDepth; ++r) {
      const uint64_t i = i0 + (uint64_t)r * red::kLanes;
      if (i < rows) {
        const float g = dy[i * cols + j];
        ag = ag + g * row::xhat_of(x[i * cols + j], mean[i], inv_std[i]);
        ab = ab + g;
      }
    }
    pg[q] = ag;
    pb[q] = ab;
  }
}

void column_sums(int dev, const float *dy, const float *x, const float *mean, const float *inv_std,
                 uint64_t rows, uint64_t cols, float *dgamma, float *dbeta) {
  cudaStream_t st = stream(dev);
  const uint64_t nc = red::chunks_of(rows);
  const unsigned lanes = row::col_lanes(rows);
  const uint64_t np = nc * lanes * cols;  // <= rows * cols + 255 * cols
  FloatScratch pg(dev, np), pb(dev, np);
  lane_fold<<<blocks(np, kThreads), kThreads, 0, st>>>(dy, x, mean, inv_std, rows, cols, lanes, nc,
                                                       pg.get(), pb.get());
  check_launch("layer_norm_bwd lane_fold");
  if (nc == 1) {
    reduce_axis(dev, red::Op::Sum, pg.get(), 1, lanes, cols, 1.0f, dgamma);
    reduce_axis(dev, red::Op::Sum, pb.get(), 1, lanes, cols, 1.0f, dbeta);
    return;
  }
  FloatScratch cg(dev, nc * cols), cb(dev, nc * cols);
  reduce_axis(dev, red::Op::Sum, pg.get(), nc, lanes, cols, 1.0f, cg.get());
  reduce_axis(dev, red::Op::Sum, pb.get(), nc, lanes, cols, 1.0f, cb.get());
  reduce_axis(dev, red::Op::Sum, cg.get(), 1, nc, cols, 1.0f, dgamma);
  reduce_axis(dev, red::Op::Sum, cb.get(), 1, nc, cols, 1.0f, dbeta);
}

// ---- dispatch by cols ---------------------------------------------------------------------------

template <unsigned NT, unsigned NC, unsigned R>
void launch_group_fwd(cudaStream_t st, const float *x, const float *gamma, const float *beta,
                      uint64_t rows, uint64_t cols, float n, float eps, float *y, float *mean,
                      float *inv_std) {
  group_fwd<NT, NC, R><<<blocks(rows, kThreads / NT), kThreads, 0, st>>>(x, gamma, beta, rows, cols,
                                                                         n, eps, y, mean, inv_std);
  check_launch("layer_norm group_fwd");
}

// ---- backward, cols <= 4096: dx and the column tree's first levels in one pass ------------------

// The partials (nc, S, cols) of the fused kernels -> dgamma, dbeta: the wide finish where nc <=
// 256 (rows <= 2^20), else reduce_axis: over the S lane values of each chunk (a sequence of S <=
// 256 values, one per lane, is exactly the tree's halving; dgamma's and dbeta's partials are one
// allocation, so one launch for both), then over the nc chunk values. Ticket counters of the wide
// finish: kWideCounters per device, left zero by every launch, allocated once outside the pool.
ZeroedCounters g_finish_counters[kMaxCudaDevices];

unsigned *finish_counters(int dev) {
  return zeroed_counters(g_finish_counters[dev], ln_kernels::kWideCounters,
                         "cudaMalloc (layer norm finish counters)");
}

void fused_bwd(int dev, const ln_kernels::BwdArgs &a, float *dgamma, float *dbeta) {
  const uint64_t nc = red::chunks_of(a.rows);
  const RowLaunch launch{dev, stream(dev)};
  const unsigned S = ln_kernels::fused_lane_sets(a.cols);
  // With one chunk and one lane set the kernel's partials are the column sums themselves.
  const bool direct = nc == 1 && S == 1;
  const uint64_t np = nc * S * a.cols;
  const bool wide = !direct && ln_kernels::fused_bwd_finish_wide_fits(nc, a.cols);
  // The wide finish's chunk values share the partials' allocation (after pg, pb).
  const uint64_t ncv = wide ? ln_kernels::fused_bwd_finish_wide_scratch(nc, S, a.cols) : 0;
  unsigned *counters = wide ? finish_counters(dev) : nullptr;
  FloatScratch part;
  if (!direct) part = FloatScratch(dev, 2 * np + ncv);
  float *pg = direct ? dgamma : part.get(), *pb = direct ? dbeta : part.get() + np;
  ln_kernels::fused_bwd_plan(launch, a, pg, pb);
  if (direct) return;
  if (wide) {
    ln_kernels::fused_bwd_finish_wide_plan(launch, pg, pb, nc, S, a.cols, part.get() + 2 * np,
                                           counters, dgamma, dbeta);
    return;
  }
  if (nc == 1) {
    reduce_axis(dev, red::Op::Sum, pg, 1, S, a.cols, 1.0f, dgamma);
    reduce_axis(dev, red::Op::Sum, pb, 1, S, a.cols, 1.0f, dbeta);
    return;
  }
  FloatScratch cgb;
  const float *g = pg, *b = pb;
  if (S > 1) {
    cgb = FloatScratch(dev, 2 * nc * a.cols);
    reduce_axis(dev, red::Op::Sum, pg, 2 * nc, S, a.cols, 1.0f, cgb.get());
    g = cgb.get();
    b = cgb.get() + nc * a.cols;
  }
  reduce_axis(dev, red::Op::Sum, g, 1, nc, a.cols, 1.0f, dgamma);
  reduce_axis(dev, red::Op::Sum, b, 1, nc, a.cols, 1.0f, dbeta);
}

// ---- forward, 8192 < cols <= 65536: the row in registers (cuda/common/split_row.cuh) ---------
// Clusters of Q blocks of 256 threads, one cluster per row (sm_90+: split_row::split_has_clusters).
template <unsigned Q, unsigned NCL>
void launch_split_cluster(cudaStream_t st, const float *x, const float *gamma,
                          const float *beta, uint64_t rows, uint64_t cols, float n, float eps,
                          float *y, float *mean, float *inv_std) {
  split_row::split_launch_cluster<Q, NCL>(
      "layer_norm split_fwd_cluster", ln_kernels::split_fwd_cluster<Q, NCL, true>,
      ln_kernels::split_fwd_cluster<Q, NCL, false>, rows, cols, st, x, gamma, beta, rows, cols, n,
      eps, y, mean, inv_std);
}

// ---- RMS norm: the long-row passes (cols > rms_kernels::kGroupMaxCols) -----------------------

template <bool G>
void rms_long_fwd(int dev, const float *x, const float *gamma, uint64_t rows, uint64_t cols,
                  float n, float eps, float *y, float *inv_rms) {
  cudaStream_t st = stream(dev);
  const uint64_t nc = red::chunks_of(cols);
  const unsigned grid = blocks(rows * nc, 1);
  FloatScratch part(dev, rows * nc), ms(dev, rows);
  chunk_reduce<red::Op::Sum, 1><<<grid, kThreads, 0, st>>>(rms_kernels::SqF{x, cols}, rows, cols,
                                                           nc, part.get(), nullptr);
  check_launch("rms_norm chunk_reduce (x * x)");
  reduce_axis(dev, red::Op::Sum, part.get(), rows, nc, 1, n, ms.get());
  rms_kernels::inv_kernel<<<blocks(rows, kThreads), kThreads, 0, st>>>(ms.get(), rows, eps,
                                                                      inv_rms);
  check_launch("rms_norm inv_kernel");
  chunk_map<<<grid, kThreads, 0, st>>>(rms_kernels::OutF<G>{x, gamma, inv_rms, cols}, rows, cols,
                                       nc, y);
  check_launch("rms_norm chunk_map (y)");
}

template <bool G>
void rms_long_dx(int dev, const float *dy, const float *x, const float *gamma,
                 const float *inv_rms, uint64_t rows, uint64_t cols, float n, float *dx) {
  cudaStream_t st = stream(dev);
  const uint64_t nc = red::chunks_of(cols);
  const unsigned grid = blocks(rows * nc, 1);
  FloatScratch part(dev, rows * nc), b(dev, rows);
  chunk_reduce<red::Op::Sum, 1><<<grid, kThreads, 0, st>>>(
      rms_kernels::TermF<G>{dy, x, gamma, inv_rms, cols}, rows, cols, nc, part.get(), nullptr);
  check_launch("rms_norm_bwd chunk_reduce");
  reduce_axis(dev, red::Op::Sum, part.get(), rows, nc, 1, n, b.get());
  chunk_map<<<grid, kThreads, 0, st>>>(rms_kernels::DxF<G>{dy, x, gamma, inv_rms, b.get(), cols},
                                       rows, cols, nc, dx);
  check_launch("rms_norm_bwd chunk_map (dx)");
}

}  // namespace

void layer_norm_fwd(int dev, const float *x, const float *gamma, const float *beta, uint64_t rows,
                    uint64_t cols, float eps, float *y, float *mean, float *inv_std) {
  cudaStream_t st = stream(dev);
  const float n = static_cast<float>(cols);
#define TLRT_LN_ARGS st, x, gamma, beta, rows, cols, n, eps, y, mean, inv_std
  if (cols <= 32) {
    ln_kernels::seg_fwd_plan(RowLaunch{dev, st}, x, gamma, beta, rows, (unsigned)cols, n, eps, y,
                             mean, inv_std);
  } else if (cols <= 256) {
    launch_group_fwd<32, 1, 1>(TLRT_LN_ARGS);
  } else if (cols <= 512) {
    launch_group_fwd<32, 1, 2>(TLRT_LN_ARGS);
  } else if (cols <= 1024) {
    launch_group_fwd<32, 1, 4>(TLRT_LN_ARGS);
  } else if (cols <= 2048) {
    launch_group_fwd<64, 1, 8>(TLRT_LN_ARGS);
  } else if (cols <= 4096) {
    launch_group_fwd<128, 1, 16>(TLRT_LN_ARGS);
  } else if (cols <= 8192) {
    launch_group_fwd<256, 2, 16>(TLRT_LN_ARGS);
  } else if (cols <= 16384) {
    // The row in registers: one 512-thread block (Q = 2 groups of NCL = 2 chunks) per row.
    ln_kernels::split_fwd_plan<2, 2>(RowLaunch{dev, st}, x, gamma, beta, rows, cols, n, eps, y,
                                     mean, inv_std);
  } else if (cols <= 32768 && split_row::split_has_clusters(dev)) {
    launch_split_cluster<4, 2>(TLRT_LN_ARGS);  // a cluster of 4 x 256 threads per row
  } else if (cols <= 65536 && split_row::split_has_clusters(dev)) {
    launch_split_cluster<4, 4>(TLRT_LN_ARGS);
  } else {
    long_fwd(dev, x, gamma, beta, rows, cols, n, eps, y, mean, inv_std);
  }
#undef TLRT_LN_ARGS
}

void layer_norm_bwd(int dev, const float *dy, const float *x, const float *mean,
                    const float *inv_std, const float *gamma, uint64_t rows, uint64_t cols,
                    float *dx, float *dgamma, float *dbeta) {
  const float n = static_cast<float>(cols);
  const RowLaunch launch{dev, stream(dev)};
  if (ln_kernels::split_bwd_pays(rows, cols, launch.sms())) {
    ln_kernels::group_dx_plan(launch, ln_kernels::BwdArgs{dy, x, mean, inv_std, gamma, rows, cols,
                                                          n, dx});
    column_sums(dev, dy, x, mean, inv_std, rows, cols, dgamma, dbeta);
    return;
  }
  if (cols <= ln_kernels::kFusedMaxCols) {
    fused_bwd(dev, ln_kernels::BwdArgs{dy, x, mean, inv_std, gamma, rows, cols, n, dx}, dgamma,
              dbeta);
    return;
  }
  if (cols <= kBlockRowBwdMaxCols) {
    const ln_kernels::BwdArgs a{dy, x, mean, inv_std, gamma, rows, cols, n, dx};
    ln_kernels::block_row_dx_plan(launch, a);
  } else {
    long_dx(dev, dy, x, mean, inv_std, gamma, rows, cols, n, dx);
  }
  column_sums(dev, dy, x, mean, inv_std, rows, cols, dgamma, dbeta);
}

void rms_norm_fwd(int dev, const float *x, const float *gamma, uint64_t rows, uint64_t cols,
                  float eps, float *y, float *inv_rms) {
  const float n = static_cast<float>(cols);
  if (cols <= rms_kernels::kGroupMaxCols) {
    rms_kernels::fwd_plan(RowLaunch{dev, stream(dev)}, x, gamma, rows, cols, n, eps, y, inv_rms);
  } else if (gamma != nullptr) {
    rms_long_fwd<true>(dev, x, gamma, rows, cols, n, eps, y, inv_rms);
  } else {
    rms_long_fwd<false>(dev, x, gamma, rows, cols, n, eps, y, inv_rms);
  }
}

void rms_norm_bwd(int dev, const float *dy, const float *x, const float *gamma,
                  const float *inv_rms, uint64_t rows, uint64_t cols, float *dx, float *dgamma) {
  const float n = static_cast<float>(cols);
  const RowLaunch launch{dev, stream(dev)};
  if (cols <= rms_kernels::kGroupMaxCols) {
    rms_kernels::dx_plan(launch, dy, x, gamma, inv_rms, rows, cols, n, dx);
  } else if (gamma != nullptr) {
    rms_long_dx<true>(dev, dy, x, gamma, inv_rms, rows, cols, n, dx);
  } else {
    rms_long_dx<false>(dev, dy, x, gamma, inv_rms, rows, cols, n, dx);
  }
  if (dgamma == nullptr) return;
  // dgamma: the column partials (nc, kColSets, cols), then the tree over the kColSets lane sets
  // of each chunk and over the chunks.
  const uint64_t nc = red::chunks_of(rows);
  FloatScratch part(dev, nc * rms_kernels::kColSets * cols);
  rms_kernels::col_partials_plan(launch, dy, x, inv_rms, rows, cols, part.get());
  if (nc == 1) {
    reduce_axis(dev, red::Op::Sum, part.get(), 1, rms_kernels::kColSets, cols, 1.0f, dgamma);
    return;
  }
  FloatScratch cv(dev, nc * cols);
  reduce_axis(dev, red::Op::Sum, part.get(), nc, rms_kernels::kColSets, cols, 1.0f, cv.get());
  reduce_axis(dev, red::Op::Sum, cv.get(), 1, nc, cols, 1.0f, dgamma);
}

}  // namespace cuda
}  // namespace tlrt
