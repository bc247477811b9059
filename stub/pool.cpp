// CPU backend, pooling: the definitions of abi/tlrt_pool.h evaluated literally with the shared
// per-window arithmetic of core/numerics/pool_ops.hpp (the CUDA backend calls the same functions).
//
// Forward: one pass over the output cells of each (batch, channel) plane, each window walked over
// its real cells in row-major order. Backward: dx is set to +0 and every window, in output order,
// adds its contribution to its cells (max: dy to the first maximum; average: dy / divisor to every
// real cell; smooth max: dy * e / S). Each dx cell thus receives its terms in output order, from
// +0: exactly the sums the CUDA backend's per-input gathers form (no atomics on either side).
// The rank is a template parameter for rank 1 and 2 (the hot cases), 0 = any rank.
#include "core/backend/pool.hpp"

#include <algorithm>
#include <type_traits>

#include "core/numerics/pool_ops.hpp"

namespace tlrt {
namespace stub {

namespace {

using pool::Dims;

template <int R, class I>
void max_fwd(const Dims<I> &m, const float *x, float *y) {
  for (I c = 0; c < m.nc; ++c) {
    const float *xp = x + c * m.in_sp;
    float *yp = y + c * m.out_sp;
    for (I o = 0; o < m.out_sp; ++o) yp[o] = pool::max_value_window<R>(m, xp, o);
  }
}

template <int R, class I>
void max_bwd(const Dims<I> &m, const float *x, const float *dy, float *dx) {
  std::fill(dx, dx + m.nc * m.in_sp, 0.0f);
  for (I c = 0; c < m.nc; ++c) {
    const float *xp = x + c * m.in_sp;
    const float *gp = dy + c * m.out_sp;
    float *dp = dx + c * m.in_sp;
    for (I o = 0; o < m.out_sp; ++o) {
      I arg;
      pool::max_window<R>(m, xp, o, &arg);
      dp[arg] += gp[o];
    }
  }
}

template <int R, class I>
void avg_fwd(const Dims<I> &m, const float *x, bool include_pad, float *y) {
  for (I c = 0; c < m.nc; ++c) {
    const float *xp = x + c * m.in_sp;
    float *yp = y + c * m.out_sp;
    for (I o = 0; o < m.out_sp; ++o) yp[o] = pool::avg_window<R>(m, xp, o, include_pad);
  }
}

template <int R, class I>
void avg_bwd(const Dims<I> &m, const float *dy, bool include_pad, float *dx) {
  std::fill(dx, dx + m.nc * m.in_sp, 0.0f);
  for (I c = 0; c < m.nc; ++c) {
    const float *gp = dy + c * m.out_sp;
    float *dp = dx + c * m.in_sp;
    for (I o = 0; o < m.out_sp; ++o) {
      I lo[pool::kMaxRank], n[pool::kMaxRank];
      const I first = pool::window_of<R>(m, o, lo, n);
      const float t = pool::div_rn(gp[o], pool::avg_divisor<R>(n, m.rank, m.window, include_pad));
      pool::walk<R>(m, first, n, [&](I off) { dp[off] += t; });
    }
  }
}

template <int R, class I>
void smooth_fwd(const Dims<I> &m, const float *x, float beta, float *y) {
  for (I c = 0; c < m.nc; ++c) {
    const float *xp = x + c * m.in_sp;
    float *yp = y + c * m.out_sp;
    for (I o = 0; o < m.out_sp; ++o) {
      float pv, s;
      pool::smooth_window<R>(m, xp, o, beta, &pv, &s);
      yp[o] = pool::smooth_out(pv, s, beta);
    }
  }
}

template <int R, class I>
void smooth_bwd(const Dims<I> &m, const float *x, const float *dy, float beta, float *dx) {
  std::fill(dx, dx + m.nc * m.in_sp, 0.0f);
  for (I c = 0; c < m.nc; ++c) {
    const float *xp = x + c * m.in_sp;
    const float *gp = dy + c * m.out_sp;
    float *dp = dx + c * m.in_sp;
    for (I o = 0; o < m.out_sp; ++o) {
      float pv, s;
      pool::smooth_window<R>(m, xp, o, beta, &pv, &s);
      I lo[pool::kMaxRank], n[pool::kMaxRank];
      const I first = pool::window_of<R>(m, o, lo, n);
      const float g = gp[o];
      pool::walk<R>(m, first, n,
                    [&](I off) { dp[off] += pool::smooth_grad(g, xp[off], pv, s, beta); });
    }
  }
}

// Calls f(m, integral_constant<R>) with m = the geometry in 32-bit indices when everything fits
// in 31 bits (cheaper index division), else 64-bit, and R = 1, 2 or 0 (any rank). The results do
// not depend on the choice.
template <class F>
void dispatch(const ConvGeometry &g, F &&f) {
  auto by_rank = [&](const auto &m) {
    if (m.rank == 1)
      f(m, std::integral_constant<int, 1>{});
    else if (m.rank == 2)
      f(m, std::integral_constant<int, 2>{});
    else
      f(m, std::integral_constant<int, 0>{});
  };
  if (pool::fits32(g))
    by_rank(pool::make_dims<uint32_t>(g));
  else
    by_rank(pool::make_dims<uint64_t>(g));
}

}  // namespace

void maxpool_fwd(int, const ConvGeometry &g, const float *x, float *y) {
  dispatch(g, [&](const auto &m, auto r) { max_fwd<decltype(r)::value>(m, x, y); });
}

void maxpool_bwd(int, const ConvGeometry &g, const float *x, const float *dy, float *dx) {
  dispatch(g, [&](const auto &m, auto r) { max_bwd<decltype(r)::value>(m, x, dy, dx); });
}

void avgpool_fwd(int, const ConvGeometry &g, const float *x, bool count_include_pad, float *y) {
  dispatch(g, [&](const auto &m, auto r) {
    avg_fwd<decltype(r)::value>(m, x, count_include_pad, y);
  });
}

void avgpool_bwd(int, const ConvGeometry &g, const float *dy, bool count_include_pad, float *dx) {
  dispatch(g, [&](const auto &m, auto r) {
    avg_bwd<decltype(r)::value>(m, dy, count_include_pad, dx);
  });
}

void smooth_maxpool_fwd(int, const ConvGeometry &g, const float *x, float beta, float *y) {
  dispatch(g, [&](const auto &m, auto r) { smooth_fwd<decltype(r)::value>(m, x, beta, y); });
}

void smooth_maxpool_bwd(int, const ConvGeometry &g, const float *x, const float *dy, float beta,
                        float *dx) {
  dispatch(g, [&](const auto &m, auto r) {
    smooth_bwd<decltype(r)::value>(m, x, dy, beta, dx);
  });
}

}  // namespace stub
}  // namespace tlrt
