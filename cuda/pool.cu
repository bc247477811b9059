// CUDA backend, pooling (max, average, smooth max), forward and backward: abi/tlrt_pool.h's
// definitions with core/numerics/pool_ops.hpp's per-window arithmetic, the code the CPU backend
// runs, so the results agree bit for bit (built with -fmad=false; divisions correctly rounded;
// exp / log the shared float32 functions). No atomics: the deterministic and the fast mode are one
// path. Everything runs on the library stream; the geometry travels by value as a kernel
// parameter. The history of these kernels: docs/kernels/pool.md.
// Nominal bytes: 4 (|x| + |y|) forward and average backward, 4 (2 |x| + |y|) max and smooth max
// backward. A few operations per window cell (a select, an add; exp for smooth max): every kernel
// is bound by memory traffic or instruction issue, not by arithmetic.
//
// FAST kernels (bodies in cuda/kernels/pool.cuh, run on the CPU over their whole grid by
// tests/unit/test_pool_kernels.cpp), rank 2 and 3 with a compiled configuration of the last two
// axes (k2 s2 p0, k3 s2 p1, k3 s1 p1):
//   fast_fwd_kernel  forward, one thread per 4 outputs of a row sharing their loads;
//   scatter_kernel   backward of disjoint windows (stride >= kernel), one thread per 4 / SW
//                    windows writing their whole dx slab, one float4 per row;
//   stream_kernel    max and average backward of overlapping rank-2 windows with one stride
//                    dividing 4 on both axes, except max k3 s1 p1: one thread per 4 columns of a
//                    run of rows, statistics and accumulators in registers;
//   sep_kernel       max k3 s1 p1 backward, the stream decomposition scattering each window's
//                    term into a per-thread shared-memory ring of dx rows;
//   band_kernel      max k3 s1 p1 backward where band_takes: a band of a plane staged in shared
//                    memory by cp.async, then sep's runs from there (halo rows not re-read);
//   tile_kernel      the other overlapping rank-2 backwards (smooth max among them): one block
//                    per tile, window statistics in shared memory, one gather per input cell.
// GENERIC kernels, any rank and geometry, 32- or 64-bit indices: fwd_kernel, one thread per output;
// the backward one thread per INPUT cell gathering the windows that contain it (pool::windows_of)
// in output order, the order in which the CPU backend's scatter adds them: max_arg_kernel +
// max_gather_kernel (the selected cell per window in scratch, 4 or 8 bytes per output),
// avg_gather_kernel, smooth_stats_kernel + smooth_gather_kernel (pivot and S, 8 bytes per output).
// Last measured: bench/results/2026-11-27-h100-s16-pool.md
#include "core/backend/memory.hpp"
#include "core/backend/pool.hpp"
#include "core/numerics/pool_ops.hpp"
#include "cuda/common/cp_async.cuh"
#include "cuda/common/launch.cuh"
#include "cuda/kernels/pool.cuh"

namespace tlrt {
namespace cuda {

namespace {

using pool::Dims;
using pool::fast::Kind;
using pool::fast::kThreads;

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

// ---- fast kernels (bodies: cuda/kernels/pool.cuh) ----------------------------------------------

template <Kind K, class C, int R>
__global__ void __launch_bounds__(kThreads)
    fast_fwd_kernel(const Dims<uint32_t> m, const pool::fast::Plan p, const float *__restrict x,
                    float *__restrict y, bool include_pad, float beta) {
  const uint32_t t = blockIdx.x * kThreads + threadIdx.x;
  if (t < p.total) pool::fast::fwd_thread<K, C, R>(m, p, x, y, t, include_pad, beta);
}

// At least 3 resident blocks per SM (at most 85 registers: rank 3 max would take 102, 2 blocks).
template <Kind K, class C, int R>
__global__ void __launch_bounds__(kThreads, 3)
    scatter_kernel(const Dims<uint32_t> m, const pool::fast::Plan p, const float *__restrict x,
                   const float *__restrict dy, bool include_pad, float beta,
                   float *__restrict dx) {
  const uint32_t t = blockIdx.x * kThreads + threadIdx.x;
  if (t < p.total) pool::fast::scatter_thread<K, C, R>(m, p, x, dy, include_pad, beta, dx, t);
}

// Resident blocks per SM the stream kernel keeps (the register cap that gives): max s2 4 (64
// registers), average s1 5 (48), average s2 6 (40); the prefetch of the next window rows must not
// cost a block.
template <Kind K, class C>
constexpr int stream_blocks() {
  return K == Kind::Max ? 4 : (C::SW == 1 ? 5 : 6);
}

template <Kind K, class C>
__global__ void __launch_bounds__(kThreads, stream_blocks<K, C>())
    stream_kernel(const Dims<uint32_t> m, const pool::fast::Plan p, const float *__restrict x,
                  const float *__restrict dy, bool include_pad, float *__restrict dx) {
  static_assert(!(K == Kind::Max && pool::fast::sep_cfg<C>()), "max k3 s1 p1 is sep_kernel's");
  const uint32_t t = blockIdx.x * kThreads + threadIdx.x;
  if (t < p.stotal) pool::fast::stream_thread<K, C>(m, p, x, dy, include_pad, dx, t);
}

// Max k3 s1 p1 on the stream path where band_kernel does not take the plane (pool::fast::sep_body):
// 3 resident blocks per SM (at most 80 registers), 32 KB of shared memory per block (the threads'
// accumulator rings); VEC: float4 rows (one kernel per choice, so that the scalar body costs the
// float4 one no register).
template <class C, bool VEC>
__global__ void __launch_bounds__(kThreads, 3)
    sep_kernel(const Dims<uint32_t> m, const pool::fast::Plan p, const float *__restrict x,
               const float *__restrict dy, float *__restrict dx) {
  __shared__ float ring[pool::fast::kSepSlots * pool::fast::kSepStride];  // 32 KB
  const uint32_t t = blockIdx.x * kThreads + threadIdx.x;
  if (t < p.stotal) pool::fast::sep_body<C, VEC>(m, p, x, dy, dx, t, ring + threadIdx.x);
}

// Max k3 s1 p1 from bands staged in shared memory (pool::fast::band_stage, band_run), where
// pool::fast::band_takes says so. 5 blocks of 128 threads per SM by shared memory (at most 25 KB
// staged + 16 KB of rings).
template <class C, bool VEC>
__global__ void __launch_bounds__(pool::fast::kBandThreads, 5)
    band_kernel(const Dims<uint32_t> m, const pool::fast::BandPlan b, const float *__restrict x,
                const float *__restrict dy, float *__restrict dx) {
  float *sm = async::dynamic_smem();
  const uint32_t plane = pool::fast::fdiv(b.by_bands, blockIdx.x),
                 bi = blockIdx.x - plane * b.bands;
  pool::fast::band_stage<VEC>(
      m, b, plane, bi, x, dy, sm, threadIdx.x,
      [](float *d, const float *g) { async::copy16(d, g, true); },
      [](float *d, const float *g) { async::copy4(d, g, true); });
  async::commit();
  async::wait<0>();
  __syncthreads();
  pool::fast::band_run<C, VEC>(m, b, plane, bi, sm, dx, threadIdx.x);
}

template <Kind K, class C>
__global__ void __launch_bounds__(kThreads)
    tile_kernel(const Dims<uint32_t> m, const pool::fast::Plan p, const float *__restrict x,
                const float *__restrict dy, bool include_pad, float beta, float *__restrict dx) {
  extern __shared__ float sm[];
  const pool::fast::Tile T = pool::fast::tile_of<C>(m, p, blockIdx.x);
  for (uint32_t i = threadIdx.x; i < p.wr * p.wc; i += kThreads)
    pool::fast::tile_window<K, C>(m, p, T, x, dy, include_pad, beta, sm, i);
  __syncthreads();
  pool::fast::tile_cells<K, C>(m, p, T, x, beta, sm, threadIdx.x, dx);
}

// The fast backward of kind K when g has one (launched, true), else false.
template <Kind K>
bool fast_backward(int dev, cudaStream_t st, const ConvGeometry &g, const float *x,
                   const float *dy, bool include_pad, float beta, float *dx) {
  using pool::fast::Plan;
  return pool::fast::bwd_path(
      g, K, x, dy, dx,
      [&](auto c, auto r, uint32_t blocks, const Dims<uint32_t> &m, const Plan &p) {
        scatter_kernel<K, decltype(c), decltype(r)::value>
            <<<blocks, kThreads, 0, st>>>(m, p, x, dy, include_pad, beta, dx);
        check_launch("pool scatter_kernel");
      },
      [&](auto c, uint32_t blocks, const Dims<uint32_t> &m, const Plan &p) {
        tile_kernel<K, decltype(c)><<<blocks, kThreads, pool::fast::tile_smem_bytes<K>(p), st>>>(
            m, p, x, dy, include_pad, beta, dx);
        check_launch("pool tile_kernel");
      },
      [&](auto c, uint32_t blocks, const Dims<uint32_t> &m, const Plan &p) {
        using C = decltype(c);
        if constexpr (K == Kind::Max && pool::fast::sep_cfg<C>()) {
          const bool vec = p.vec_in && p.vec_out;
          pool::fast::BandPlan bp;
          if (pool::fast::band_takes(m, bp)) {
            const size_t smem = bp.floats * sizeof(float);
            auto kern = vec ? band_kernel<C, true> : band_kernel<C, false>;
            // 5 blocks of ~41 KB per SM: the whole unified L1 / shared memory as shared (the
            // default carveout is the driver's choice), once per kernel and device.
            static SmemAllowed carveout[2];
            carveout[vec].ensure(dev, kern, cudaFuncAttributePreferredSharedMemoryCarveout,
                                 (int)cudaSharedmemCarveoutMaxShared, "pool band_kernel: carveout");
            kern<<<bp.blocks, pool::fast::kBandThreads, smem, st>>>(m, bp, x, dy, dx);
            check_launch("pool band_kernel");
            return;
          }
          if (vec)
            sep_kernel<C, true><<<blocks, kThreads, 0, st>>>(m, p, x, dy, dx);
          else
            sep_kernel<C, false><<<blocks, kThreads, 0, st>>>(m, p, x, dy, dx);
          check_launch("pool sep_kernel");
        } else if constexpr (K != Kind::Smooth && C::SW < C::KW && 4 % C::SW == 0 &&
                             C::SW <= C::KH) {
          stream_kernel<K, decltype(c)><<<blocks, kThreads, 0, st>>>(m, p, x, dy, include_pad, dx);
          check_launch("pool stream_kernel");
        }
      });
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
  const bool fast = pool::fast::fwd_path(
      g, x, y,
      [&](auto c, auto r, uint32_t blocks, const Dims<uint32_t> &m, const pool::fast::Plan &p) {
        fast_fwd_kernel<K, decltype(c), decltype(r)::value>
            <<<blocks, kThreads, 0, st>>>(m, p, x, y, include_pad, beta);
      });
  if (!fast)
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
  if (fast_backward<Kind::Max>(dev, st, g, x, dy, false, 0.0f, dx)) return;
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
  if (fast_backward<Kind::Avg>(dev, st, g, nullptr, dy, count_include_pad, 0.0f, dx)) return;
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
  if (fast_backward<Kind::Smooth>(dev, st, g, x, dy, false, beta, dx)) return;
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
