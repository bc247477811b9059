// CUDA backend, pooling (max, average, smooth max), forward and backward: the definitions of
// abi/tlrt_pool.h with the per-window arithmetic of core/numerics/pool_ops.hpp, the same code the
// CPU backend runs, so results agree bit for bit. Built with -fmad=false; divisions are __fdiv_rn;
// exp / log are the shared float32 functions. No atomics anywhere (the deterministic and the fast
// mode are one path); everything on the library stream; the geometry travels as a kernel
// parameter (pool::Dims by value: no device copy of the dims, no synchronisation). Kernels are
// instantiated for rank 1, 2, 3 and "any rank" (R = 0), and for 32-bit indices when every count
// and extent fits in 31 bits (cheaper index division), else 64-bit.
//
// fwd_kernel<K> (max / average / smooth forward): one thread per output cell, grid-stride;
// consecutive threads take consecutive cells of the last axis, so a warp reads a contiguous span
// of x (stride * 32 + kernel floats) per window row: coalesced. Each input cell is read from DRAM
// about once (overlapping windows hit L1/L2). Bytes: 4 * (|x| + |y|); for (32, 64, 112, 112) k3 s2
// p1: 102.8 MB read + 25.7 MB written. Target >= 80% of copy bandwidth (H100 ~ 2.9 TB/s copy:
// ~ 55 us). FLOPs: negligible for max / average (a compare or an add per cell, ~20 integer
// instructions per output for the index decomposition); smooth max adds 2 passes over the window
// (pivot, then exp) and one log per output. Measured (H100, 2026-11-22,
// bench/results/2026-11-22-h100-pool.md): forward max 0.65-0.76 / avg 0.55-0.63 of copy bandwidth
// at (32, 64, 112, 112), 0.26-0.29 at k3 s1 (32, 256, 56, 56); backward 0.12-0.27.
//
// Backward, deterministic WITHOUT atomics in both modes: one thread per INPUT cell gathers the
// windows that contain it (pool::windows_of: per axis the output range
// [ceil((i + p - k + 1) / s), floor((i + p) / s)]), walking them in output order, so every dx cell
// sums its terms in the order the CPU backend's scatter adds them.
// max_arg_kernel + max_gather_kernel (maxpool_bwd): pass 1, one thread per output cell, writes the
//   selected cell (plane offset of the first maximum / first NaN) to stream-ordered scratch (4 or 8
//   bytes per output); pass 2 gathers dy[w] where arg[w] == cell. Bytes: |x| + |y| (idx) + 2 |y|
//   (dy, idx) * (windows per cell, from cache) + |x| (dx): ~ 2.5 |x| + 2 |y| floats for k3 s2.
// avg_gather_kernel (avgpool_bwd): dy[w] / D_w over the containing windows (D_w recomputed from
//   the window's extent when count_include_pad is false). Bytes: |y| read (cached) + |x| written.
// smooth_stats_kernel + smooth_gather_kernel (smooth_maxpool_bwd): pass 1 writes pivot and S per
//   window (8 bytes per output); pass 2 gathers dy[w] * (exp(b (x - pivot_w)) / S_w).
#include "core/backend/memory.hpp"
#include "core/backend/pool.hpp"
#include "core/numerics/pool_ops.hpp"
#include "cuda/cuda_common.cuh"

namespace tlrt {
namespace cuda {

namespace {

using pool::Dims;

constexpr unsigned kThreads = 256;

enum class Kind { Max, Avg, Smooth };

// Stream-ordered scratch from the pool, returned in stream order when this object dies.
class Scratch {
 public:
  Scratch(int dev, uint64_t bytes) : dev_(dev), bytes_(bytes), p_(alloc(dev, bytes)) {}
  Scratch(const Scratch &) = delete;
  Scratch &operator=(const Scratch &) = delete;
  ~Scratch() { dealloc(dev_, p_, bytes_); }
  template <class T>
  T *as() const {
    return static_cast<T *>(p_);
  }

 private:
  int dev_;
  uint64_t bytes_;
  void *p_;
};

// ---- forward ------------------------------------------------------------------------------

template <Kind K, int R, class I>
__global__ void __launch_bounds__(kThreads)
    fwd_kernel(const Dims<I> m, const float *__restrict x, float *__restrict y, bool include_pad,
               float beta) {
  const I total = m.nc * m.out_sp;
  for (I t = (I)blockIdx.x * kThreads + threadIdx.x; t < total; t += (I)gridDim.x * kThreads) {
    const I c = t / m.out_sp, o = t - c * m.out_sp;
    const float *xp = x + (uint64_t)c * m.in_sp;
    float v;
    if (K == Kind::Max)
      v = pool::max_value_window<R>(m, xp, o);
    else if (K == Kind::Avg)
      v = pool::avg_window<R>(m, xp, o, include_pad);
    else {
      float pv, s;
      pool::smooth_window<R>(m, xp, o, beta, &pv, &s);
      v = pool::smooth_out(pv, s, beta);
    }
    y[t] = v;
  }
}

// ---- backward: per-output pass 1 ----------------------------------------------------------------

template <int R, class I>
__global__ void __launch_bounds__(kThreads)
    max_arg_kernel(const Dims<I> m, const float *__restrict x, I *__restrict arg) {
  const I total = m.nc * m.out_sp;
  for (I t = (I)blockIdx.x * kThreads + threadIdx.x; t < total; t += (I)gridDim.x * kThreads) {
    const I c = t / m.out_sp, o = t - c * m.out_sp;
    I a;
    pool::max_window<R>(m, x + (uint64_t)c * m.in_sp, o, &a);
    arg[t] = a;
  }
}

template <int R, class I>
__global__ void __launch_bounds__(kThreads)
    smooth_stats_kernel(const Dims<I> m, const float *__restrict x, float beta,
                        float *__restrict pivot, float *__restrict sum) {
  const I total = m.nc * m.out_sp;
  for (I t = (I)blockIdx.x * kThreads + threadIdx.x; t < total; t += (I)gridDim.x * kThreads) {
    const I c = t / m.out_sp, o = t - c * m.out_sp;
    float pv, s;
    pool::smooth_window<R>(m, x + (uint64_t)c * m.in_sp, o, beta, &pv, &s);
    pivot[t] = pv;
    sum[t] = s;
  }
}

// ---- backward: per-input gathers (output order, from +0) ----------------------------------------

template <int R, class I>
__global__ void __launch_bounds__(kThreads)
    max_gather_kernel(const Dims<I> m, const I *__restrict arg, const float *__restrict dy,
                      float *__restrict dx) {
  const I total = m.nc * m.in_sp;
  for (I t = (I)blockIdx.x * kThreads + threadIdx.x; t < total; t += (I)gridDim.x * kThreads) {
    const I c = t / m.in_sp, i = t - c * m.in_sp;
    const I *ap = arg + (uint64_t)c * m.out_sp;
    const float *gp = dy + (uint64_t)c * m.out_sp;
    I olo[pool::kMaxRank], on[pool::kMaxRank], first;
    float acc = 0.0f;
    if (pool::windows_of<R>(m, i, olo, on, &first))
      pool::walk_out<R>(m, first, on, [&](I w) {
        if (ap[w] == i) acc += gp[w];
      });
    dx[t] = acc;
  }
}

template <int R, class I>
__global__ void __launch_bounds__(kThreads)
    avg_gather_kernel(const Dims<I> m, const float *__restrict dy, bool include_pad,
                      float *__restrict dx) {
  const I total = m.nc * m.in_sp;
  for (I t = (I)blockIdx.x * kThreads + threadIdx.x; t < total; t += (I)gridDim.x * kThreads) {
    const I c = t / m.in_sp, i = t - c * m.in_sp;
    const float *gp = dy + (uint64_t)c * m.out_sp;
    I olo[pool::kMaxRank], on[pool::kMaxRank], first;
    float acc = 0.0f;
    if (pool::windows_of<R>(m, i, olo, on, &first))
      pool::walk_out<R>(m, first, on, [&](I w) {
        float d = (float)m.window;
        if (!include_pad) {
          I lo[pool::kMaxRank], n[pool::kMaxRank];
          pool::window_of<R>(m, w, lo, n);
          d = pool::avg_divisor<R>(n, m.rank, m.window, false);
        }
        acc += pool::div_rn(gp[w], d);
      });
    dx[t] = acc;
  }
}

template <int R, class I>
__global__ void __launch_bounds__(kThreads)
    smooth_gather_kernel(const Dims<I> m, const float *__restrict x, const float *__restrict dy,
                         const float *__restrict pivot, const float *__restrict sum, float beta,
                         float *__restrict dx) {
  const I total = m.nc * m.in_sp;
  for (I t = (I)blockIdx.x * kThreads + threadIdx.x; t < total; t += (I)gridDim.x * kThreads) {
    const I c = t / m.in_sp, i = t - c * m.in_sp;
    const uint64_t ob = (uint64_t)c * m.out_sp;
    const float v = x[t];
    I olo[pool::kMaxRank], on[pool::kMaxRank], first;
    float acc = 0.0f;
    if (pool::windows_of<R>(m, i, olo, on, &first))
      pool::walk_out<R>(m, first, on, [&](I w) {
        acc += pool::smooth_grad(dy[ob + w], v, pivot[ob + w], sum[ob + w], beta);
      });
    dx[t] = acc;
  }
}

// ---- dispatch -----------------------------------------------------------------------------

// Calls f(Dims<I>, integral_constant<R>) with the index type and rank instantiation for g.
template <class F>
void dispatch(const ConvGeometry &g, F &&f) {
  auto by_rank = [&](auto m) {
    switch (m.rank) {
      case 1: f(m, std::integral_constant<int, 1>{}); break;
      case 2: f(m, std::integral_constant<int, 2>{}); break;
      case 3: f(m, std::integral_constant<int, 3>{}); break;
      default: f(m, std::integral_constant<int, 0>{}); break;
    }
  };
  if (pool::fits32(g))
    by_rank(pool::make_dims<uint32_t>(g));
  else
    by_rank(pool::make_dims<uint64_t>(g));
}

template <Kind K>
void forward(int dev, const ConvGeometry &g, const float *x, bool include_pad, float beta,
             float *y) {
  cudaStream_t st = stream(dev);
  dispatch(g, [&](auto m, auto r) {
    using I = decltype(m.nc);
    fwd_kernel<K, decltype(r)::value, I>
        <<<grid_all(g.out_elems, kThreads), kThreads, 0, st>>>(m, x, y, include_pad, beta);
  });
  check_launch("pool fwd_kernel");
}

}  // namespace

void maxpool_fwd(int dev, const ConvGeometry &g, const float *x, float *y) {
  forward<Kind::Max>(dev, g, x, false, 0.0f, y);
}

void avgpool_fwd(int dev, const ConvGeometry &g, const float *x, bool count_include_pad,
                 float *y) {
  forward<Kind::Avg>(dev, g, x, count_include_pad, 0.0f, y);
}

void smooth_maxpool_fwd(int dev, const ConvGeometry &g, const float *x, float beta, float *y) {
  forward<Kind::Smooth>(dev, g, x, false, beta, y);
}

void maxpool_bwd(int dev, const ConvGeometry &g, const float *x, const float *dy, float *dx) {
  cudaStream_t st = stream(dev);
  dispatch(g, [&](auto m, auto r) {
    using I = decltype(m.nc);
    constexpr int R = decltype(r)::value;
    Scratch arg(dev, g.out_elems * sizeof(I));
    max_arg_kernel<R, I><<<grid_all(g.out_elems, kThreads), kThreads, 0, st>>>(m, x, arg.as<I>());
    check_launch("pool max_arg_kernel");
    max_gather_kernel<R, I>
        <<<grid_all(g.in_elems, kThreads), kThreads, 0, st>>>(m, arg.as<I>(), dy, dx);
    check_launch("pool max_gather_kernel");
  });
}

void avgpool_bwd(int dev, const ConvGeometry &g, const float *dy, bool count_include_pad,
                 float *dx) {
  cudaStream_t st = stream(dev);
  dispatch(g, [&](auto m, auto r) {
    using I = decltype(m.nc);
    avg_gather_kernel<decltype(r)::value, I>
        <<<grid_all(g.in_elems, kThreads), kThreads, 0, st>>>(m, dy, count_include_pad, dx);
  });
  check_launch("pool avg_gather_kernel");
}

void smooth_maxpool_bwd(int dev, const ConvGeometry &g, const float *x, const float *dy,
                        float beta, float *dx) {
  cudaStream_t st = stream(dev);
  dispatch(g, [&](auto m, auto r) {
    using I = decltype(m.nc);
    constexpr int R = decltype(r)::value;
    Scratch stats(dev, g.out_elems * 2 * sizeof(float));
    float *pv = stats.as<float>(), *sm = pv + g.out_elems;
    smooth_stats_kernel<R, I>
        <<<grid_all(g.out_elems, kThreads), kThreads, 0, st>>>(m, x, beta, pv, sm);
    check_launch("pool smooth_stats_kernel");
    smooth_gather_kernel<R, I>
        <<<grid_all(g.in_elems, kThreads), kThreads, 0, st>>>(m, x, dy, pv, sm, beta, dx);
    check_launch("pool smooth_gather_kernel");
  });
}

}  // namespace cuda
}  // namespace tlrt
