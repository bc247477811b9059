// Per-window arithmetic of the pooling family (abi/tlrt_pool.h), shared by the CPU stub and the
// CUDA backend so that both perform the same float32 operations in the same order: windows are
// walked over their REAL cells (padding is never read) in row-major order, the max rule, the
// average and the smooth-max log-sum-exp are written once here. Compiled by g++
// (-ffp-contract=off) and nvcc (-fmad=false); exp / log are the shared math of shared_math.hpp.
//
// Index type I: uint32_t when every count and extent of the call fits in 31 bits (cheaper
// division on the GPU), otherwise uint64_t; the results do not depend on it.
#pragma once

#include <cstdint>

#include "core/conv_geometry.hpp"
#include "hd.hpp"
#include "shared_math.hpp"

namespace tlrt {
namespace pool {

constexpr int kMaxRank = (int)kMaxConvRank;

// The geometry in the kernels' index type, with the row-major spatial strides; passed by value.
template <class I>
struct Dims {
  int rank;
  I nc, in_sp, out_sp, window;
  I in[kMaxRank], k[kMaxRank], s[kMaxRank], p[kMaxRank], out[kMaxRank];
  I istr[kMaxRank], ostr[kMaxRank];
};

// True when Dims<uint32_t> represents g exactly and no intermediate of the walks below exceeds
// 2^31 (in + 2 pad + kernel per axis, the element counts of x and y).
inline bool fits32(const ConvGeometry &g) {
  const uint64_t lim = uint64_t{1} << 31;
  if (g.in_elems >= lim || g.out_elems >= lim || g.window >= lim) return false;
  for (uint32_t d = 0; d < g.rank; ++d)
    if (g.in[d] + 2 * g.pad[d] + g.kernel[d] + g.stride[d] >= lim) return false;
  return true;
}

template <class I>
Dims<I> make_dims(const ConvGeometry &g) {
  Dims<I> m{};
  m.rank = (int)g.rank;
  m.nc = (I)g.nc;
  m.in_sp = (I)g.in_spatial;
  m.out_sp = (I)g.out_spatial;
  m.window = (I)g.window;
  I is = 1, os = 1;
  for (int d = m.rank - 1; d >= 0; --d) {
    m.in[d] = (I)g.in[d];
    m.k[d] = (I)g.kernel[d];
    m.s[d] = (I)g.stride[d];
    m.p[d] = (I)g.pad[d];
    m.out[d] = (I)g.out[d];
    m.istr[d] = is;
    m.ostr[d] = os;
    is *= m.in[d];
    os *= m.out[d];
  }
  return m;
}

// Max rule: v replaces the running best if it is larger, or if it is the first NaN (NaN
// propagates; the first maximum, resp. the first NaN, wins).
TLRT_HD bool max_takes(float v, float best) { return v > best || (v != v && best == best); }
TLRT_HD bool min_takes(float v, float best) { return v < best || (v != v && best == best); }

// Correctly rounded division on both backends (CUDA: explicit, whatever -prec-div says).
TLRT_HD float div_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}

// Smooth max: the summand of the window sum and the output (DEFINITIONS of abi/tlrt_pool.h).
TLRT_HD float smooth_term(float v, float pivot, float beta) {
  return math::exp_f(beta * (v - pivot));
}
TLRT_HD float smooth_out(float pivot, float s, float beta) {
  const float inf = num::u2f(0x7f800000u);
  const bool infinite = pivot == inf || pivot == -inf;
  return infinite ? pivot : pivot + div_rn(math::log_f(s), beta);
}
TLRT_HD float smooth_grad(float dy, float v, float pivot, float s, float beta) {
  return dy * div_rn(smooth_term(v, pivot, beta), s);
}

// The real cells of the window of output cell o (spatial multi-index, flat `of`): per axis the
// first real input coordinate lo[d] and the count n[d] >= 1 (core guarantees at least one real
// cell per window: 2 pad <= kernel and in >= 1). Returns the flat offset of the first real cell.
template <int R, class I>
TLRT_HD I window_of(const Dims<I> &m, I of, I *lo, I *n) {
  const int rank = R ? R : m.rank;
  I off = 0;
  for (int d = rank - 1; d >= 0; --d) {
    const I o = d == 0 ? of : of % m.out[d];
    of = d == 0 ? of : of / m.out[d];
    const I a = o * m.s[d];  // window start + pad
    const I start = a > m.p[d] ? a - m.p[d] : 0;
    const I e = a + m.k[d] - m.p[d];  // window end (exclusive), k > p so no wrap
    const I end = e < m.in[d] ? e : m.in[d];
    lo[d] = start;
    n[d] = end - start;
    off += start * m.istr[d];
  }
  return off;
}

// Calls f(offset) for every real cell of a window, row-major, offset relative to the plane.
template <int R, class I, class F>
TLRT_HD void walk(const Dims<I> &m, I first, const I *n, F &&f) {
  const int rank = R ? R : m.rank;
  if (R == 1) {
    for (I j = 0; j < n[0]; ++j) f(first + j);
  } else if (R == 2) {
    for (I a = 0; a < n[0]; ++a) {
      const I row = first + a * m.istr[0];
      for (I j = 0; j < n[1]; ++j) f(row + j);
    }
  } else {
    I c[kMaxRank];
    for (int d = 0; d < rank; ++d) c[d] = 0;
    I off = first;
    for (;;) {
      for (I j = 0; j < n[rank - 1]; ++j) f(off + j);
      int d = rank - 2;
      for (; d >= 0; --d) {
        if (++c[d] < n[d]) {
          off += m.istr[d];
          break;
        }
        off -= (n[d] - 1) * m.istr[d];
        c[d] = 0;
      }
      if (d < 0) break;
    }
  }
}

// The windows that contain input cell `iflat` (spatial flat index): per axis the first output
// coordinate olo[d] and the count on[d]; false when no window contains it (stride > kernel).
// Returns the flat output offset of the first window through *first.
template <int R, class I>
TLRT_HD bool windows_of(const Dims<I> &m, I iflat, I *olo, I *on, I *first) {
  const int rank = R ? R : m.rank;
  I off = 0;
  bool any = true;
  for (int d = rank - 1; d >= 0; --d) {
    const I i = d == 0 ? iflat : iflat % m.in[d];
    iflat = d == 0 ? iflat : iflat / m.in[d];
    const I ip = i + m.p[d];
    const I lo = ip >= m.k[d] ? (ip - m.k[d]) / m.s[d] + 1 : 0;
    I hi = ip / m.s[d];  // inclusive
    hi = hi < m.out[d] - 1 ? hi : m.out[d] - 1;
    any = any && lo <= hi;
    olo[d] = lo;
    on[d] = lo <= hi ? hi - lo + 1 : 0;
    off += lo * m.ostr[d];
  }
  *first = off;
  return any;
}

// Calls f(output offset) for every window listed by windows_of, in row-major (output) order.
template <int R, class I, class F>
TLRT_HD void walk_out(const Dims<I> &m, I first, const I *on, F &&f) {
  const int rank = R ? R : m.rank;
  I c[kMaxRank];
  for (int d = 0; d < rank; ++d) c[d] = 0;
  I off = first;
  for (;;) {
    for (I j = 0; j < on[rank - 1]; ++j) f(off + j);
    int d = rank - 2;
    for (; d >= 0; --d) {
      if (++c[d] < on[d]) {
        off += m.ostr[d];
        break;
      }
      off -= (on[d] - 1) * m.ostr[d];
      c[d] = 0;
    }
    if (d < 0) break;
  }
}

// ---- per-window results (the whole contract of the forward passes) ---------------------------

// Max pool: the value and the plane offset of the first maximum (first NaN if any).
template <int R, class I>
TLRT_HD float max_window(const Dims<I> &m, const float *xp, I of, I *arg) {
  I lo[kMaxRank], n[kMaxRank];
  const I first = window_of<R>(m, of, lo, n);
  float best = xp[first];
  I at = first;
  walk<R>(m, first, n, [&](I off) {
    const float v = xp[off];
    if (max_takes(v, best)) {
      best = v;
      at = off;
    }
  });
  *arg = at;
  return best;
}

// The same value without the position (forward only): the first maximum / first NaN is the
// same bit pattern whichever way it is found, and the select form vectorises / does not branch.
template <int R, class I>
TLRT_HD float max_value_window(const Dims<I> &m, const float *xp, I of) {
  I lo[kMaxRank], n[kMaxRank];
  const I first = window_of<R>(m, of, lo, n);
  float best = xp[first];
  walk<R>(m, first, n, [&](I off) {
    const float v = xp[off];
    best = max_takes(v, best) ? v : best;
  });
  return best;
}

// Average pool: the row-major sum of the real cells (from -0, the additive identity), divided by
// the window size (count_include_pad) or by the number of real cells.
template <int R, class I>
TLRT_HD float avg_divisor(const I *n, int rank, I window, bool include_pad) {
  if (include_pad) return (float)window;
  I c = 1;
  for (int d = 0; d < (R ? R : rank); ++d) c *= n[d];
  return (float)c;
}

template <int R, class I>
TLRT_HD float avg_window(const Dims<I> &m, const float *xp, I of, bool include_pad) {
  I lo[kMaxRank], n[kMaxRank];
  const I first = window_of<R>(m, of, lo, n);
  float s = -0.0f;
  walk<R>(m, first, n, [&](I off) { s += xp[off]; });
  return div_rn(s, avg_divisor<R>(n, m.rank, m.window, include_pad));
}

// Smooth max pool: the pivot (first max for beta > 0, first min for beta < 0, NaN if any cell is
// NaN) and the row-major sum S of exp(beta * (v - pivot)) from +0.
template <int R, class I>
TLRT_HD void smooth_window(const Dims<I> &m, const float *xp, I of, float beta, float *pivot,
                           float *sum) {
  I lo[kMaxRank], n[kMaxRank];
  const I first = window_of<R>(m, of, lo, n);
  float pv = xp[first];
  if (beta > 0.0f)
    walk<R>(m, first, n, [&](I off) {
      const float v = xp[off];
      pv = max_takes(v, pv) ? v : pv;
    });
  else
    walk<R>(m, first, n, [&](I off) {
      const float v = xp[off];
      pv = min_takes(v, pv) ? v : pv;
    });
  float s = 0.0f;
  walk<R>(m, first, n, [&](I off) { s += smooth_term(xp[off], pv, beta); });
  *pivot = pv;
  *sum = s;
}

}  // namespace pool
}  // namespace tlrt
