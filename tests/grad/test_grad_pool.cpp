// Suite 'grad': the pooling backward kernels (abi/tlrt_pool.h: tlrt_maxpool_bwd, tlrt_avgpool_bwd
// in both padding modes, tlrt_smooth_maxpool_bwd, and their 2-D names) against central finite
// differences of the scalar loss L = <w, y> = sum_o w[o] y[o], for seeded random geometries of rank
// 1, 2 and 3 (overlapping and disjoint windows, padding up to kernel / 2, batch and channels up to
// 2 and 3) with w uniform in [-1, 1). Runs on the CPU always and on CUDA(0) when usable.
//
// Max pool (piecewise linear): x is a random permutation of distinct multiples of 2^-8 in
// [-2, 2), so ties are impossible and x +- h (h = 2^-11) is exact and keeps every window's
// maximum where it is. The library's own float32 forward is then exact (a selection), and
// D = (L(x + h e_i) - L(x - h e_i)) / 2h, with L summed in float64, is exactly the sum of w over
// the windows that select x_i. The kernel's dx sums the same w in float32, in output order:
// |dx - D| <= u (m - 1) sum |w| (m = windows of the cell) plus the double rounding of the losses
// ((outputs + 8) 2^-53 sum |w y| / 2h) is asserted.
// Average pool (linear): D from a float64 evaluation of the forward (h = 2^-10; exact up to the
// double rounding of the losses, (outputs + 8) 2^-53 sum |w y| / 2h), and again from the library's
// float32 forward, whose rounding adds sum_o |w_o| E(y_o) / h with E the unit test's asserted
// bound u (|y| + (n - 1) sum |v| / D). Kernel term: u (|dx| + (m + 1) sum |w / D|).
// Smooth max pool (smooth; beta in {1, -1, 4, -0.5}): D from a float64 forward with
// h = 2^-12 / max(1, |beta|); the truncation error is estimated from D(2h) - D(h) (central
// differences: D(h) - f' ~ (D(2h) - D(h)) / 3; 2x that is allowed) plus the double rounding of
// the losses. Kernel term: the unit test's bound, u sum_w |w weight| (4 |beta| max|x| + n + 12).
// The largest error / tolerance per operation is printed.
#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "harness.hpp"

namespace {

using th::Buf;

const double kU = std::ldexp(1.0, -24);
const char *dev_name(tlrt_device d) { return d == TLRT_DEVICE_CPU ? "cpu" : "cuda"; }

struct Geo {
  uint64_t N = 1, C = 1;
  std::vector<uint64_t> in, k, s, p;
  uint32_t rank() const { return (uint32_t)in.size(); }
  std::vector<uint64_t> out() const {
    std::vector<uint64_t> o(in.size());
    for (size_t d = 0; d < in.size(); ++d)
      o[d] = in[d] + 2 * p[d] >= k[d] ? (in[d] + 2 * p[d] - k[d]) / s[d] + 1 : 0;
    return o;
  }
  static uint64_t prod(const std::vector<uint64_t> &v) {
    return std::accumulate(v.begin(), v.end(), uint64_t{1}, std::multiplies<uint64_t>());
  }
  uint64_t in_sp() const { return prod(in); }
  uint64_t out_sp() const { return prod(out()); }
};

// Real cells of window o (flat output spatial index), row-major.
std::vector<uint64_t> cells_of(const Geo &g, uint64_t o) {
  const uint32_t R = g.rank();
  const std::vector<uint64_t> out = g.out();
  std::vector<uint64_t> oc(R);
  for (int d = (int)R - 1; d >= 0; --d) {
    oc[d] = o % out[d];
    o /= out[d];
  }
  std::vector<uint64_t> cells, j(R, 0);
  for (;;) {
    bool inside = true;
    uint64_t off = 0;
    for (uint32_t d = 0; d < R; ++d) {
      const int64_t c = (int64_t)(oc[d] * g.s[d] + j[d]) - (int64_t)g.p[d];
      inside = inside && c >= 0 && c < (int64_t)g.in[d];
      off = off * g.in[d] + (uint64_t)std::max<int64_t>(c, 0);
    }
    if (inside) cells.push_back(off);
    int d = (int)R - 1;
    while (d >= 0 && ++j[d] == g.k[d]) j[d--] = 0;
    if (d < 0) break;
  }
  return cells;
}

enum class Op { Max, Avg, AvgNoPad, Smooth };
const char *op_name(Op op) {
  return op == Op::Max ? "maxpool" : op == Op::Avg ? "avgpool" : op == Op::AvgNoPad
                                                                  ? "avgpool (no pad)"
                                                                  : "smooth_maxpool";
}

tlrt_status lib_fwd(Op op, const Geo &g, const tlrt_buffer *x, double beta, tlrt_buffer **y) {
  const uint64_t *in = g.in.data(), *k = g.k.data(), *s = g.s.data(), *p = g.p.data();
  const bool two = g.rank() == 2;
  switch (op) {
    case Op::Max:
      return two ? tlrt_maxpool2d_fwd(x, g.N, g.C, in[0], in[1], k[0], k[1], s[0], s[1], p[0],
                                      p[1], y)
                 : tlrt_maxpool_fwd(x, g.N, g.C, in, g.rank(), k, s, p, y);
    case Op::Avg:
    case Op::AvgNoPad:
      return two ? tlrt_avgpool2d_fwd(x, g.N, g.C, in[0], in[1], k[0], k[1], s[0], s[1], p[0],
                                      p[1], op == Op::Avg, y)
                 : tlrt_avgpool_fwd(x, g.N, g.C, in, g.rank(), k, s, p, op == Op::Avg, y);
    case Op::Smooth:
      return two ? tlrt_smooth_maxpool2d_fwd(x, g.N, g.C, in[0], in[1], k[0], k[1], s[0], s[1],
                                             p[0], p[1], beta, y)
                 : tlrt_smooth_maxpool_fwd(x, g.N, g.C, in, g.rank(), k, s, p, beta, y);
  }
  return TLRT_ERR_INTERNAL;
}

tlrt_status lib_bwd(Op op, const Geo &g, const tlrt_buffer *x, const tlrt_buffer *dy,
                    double beta, tlrt_buffer **dx) {
  const uint64_t *in = g.in.data(), *k = g.k.data(), *s = g.s.data(), *p = g.p.data();
  const bool two = g.rank() == 2;
  switch (op) {
    case Op::Max:
      return two ? tlrt_maxpool2d_bwd(x, dy, g.N, g.C, in[0], in[1], k[0], k[1], s[0], s[1],
                                      p[0], p[1], dx)
                 : tlrt_maxpool_bwd(x, dy, g.N, g.C, in, g.rank(), k, s, p, dx);
    case Op::Avg:
    case Op::AvgNoPad:
      return two ? tlrt_avgpool2d_bwd(dy, g.N, g.C, in[0], in[1], k[0], k[1], s[0], s[1], p[0],
                                      p[1], op == Op::Avg, dx)
                 : tlrt_avgpool_bwd(dy, g.N, g.C, in, g.rank(), k, s, p, op == Op::Avg, dx);
    case Op::Smooth:
      return two ? tlrt_smooth_maxpool2d_bwd(x, dy, g.N, g.C, in[0], in[1], k[0], k[1], s[0],
                                             s[1], p[0], p[1], beta, dx)
                 : tlrt_smooth_maxpool_bwd(x, dy, g.N, g.C, in, g.rank(), k, s, p, beta, dx);
  }
  return TLRT_ERR_INTERNAL;
}

// Float64 forward of the loss <w, y> for the average and smooth max pools; *mag = sum |w y|.
double loss64(Op op, const Geo &g, const std::vector<double> &x, const std::vector<float> &w,
              double beta, double *mag) {
  const uint64_t is = g.in_sp(), os = g.out_sp();
  double L = 0, M = 0;
  for (uint64_t c = 0; c < g.N * g.C; ++c)
    for (uint64_t o = 0; o < os; ++o) {
      const std::vector<uint64_t> cells = cells_of(g, o);
      double y = 0;
      if (op == Op::Smooth) {
        double pv = x[c * is + cells[0]];
        for (uint64_t cell : cells)
          pv = beta > 0 ? std::max(pv, x[c * is + cell]) : std::min(pv, x[c * is + cell]);
        double S = 0;
        for (uint64_t cell : cells) S += std::exp(beta * (x[c * is + cell] - pv));
        y = pv + std::log(S) / beta;
      } else {
        for (uint64_t cell : cells) y += x[c * is + cell];
        y /= op == Op::Avg ? (double)Geo::prod(g.k) : (double)cells.size();
      }
      L += w[c * os + o] * y;
      M += std::fabs(w[c * os + o] * y);
    }
  if (mag) *mag = M;
  return L;
}

double loss32(Op op, const Geo &g, const std::vector<float> &x, const std::vector<float> &w,
              double beta, tlrt_device dev, double *mag = nullptr) {
  Buf bx(th::upload(x, dev)), y;
  TH_OK(lib_fwd(op, g, bx.get(), beta, y.out()));
  if (!y.get()) return NAN;
  const std::vector<float> yv = th::download(y.get());
  double L = 0, M = 0;
  for (size_t i = 0; i < yv.size(); ++i) {
    L += (double)w[i] * yv[i];
    M += std::fabs((double)w[i] * yv[i]);
  }
  if (mag) *mag = M;
  return L;
}

struct Worst {
  double v[4] = {0, 0, 0, 0};
};

void check(Op op, const Geo &g, double beta, tlrt_device dev, uint64_t salt, Worst &worst) {
  const uint64_t is = g.in_sp(), os = g.out_sp(), P = g.N * g.C;
  th::Rng rng(salt);
  std::vector<float> x(P * is);
  if (op == Op::Max) {  // distinct multiples of 2^-8 in [-2, 2)
    std::vector<int> v(1024);
    std::iota(v.begin(), v.end(), -512);
    std::shuffle(v.begin(), v.end(), rng.gen);
    for (size_t i = 0; i < x.size(); ++i) x[i] = std::ldexp((float)v[i % 1024], -8);
  } else {
    x = rng.vec(x.size(), -2.0f, 2.0f);
  }
  const std::vector<float> w = rng.vec(P * os, -1.0f, 1.0f);
  Buf bx(th::upload(x, dev)), bw(th::upload(w, dev)), dx;
  TH_OK(lib_bwd(op, g, bx.get(), bw.get(), beta, dx.out()));
  if (!dx.get()) return;
  const std::vector<float> d = th::download(dx.get());
  // Per cell: the windows containing it and sum |w| / sum |w weight| over them.
  std::vector<double> wsum(P * is, 0), wmag(P * is, 0), m(P * is, 0);
  std::vector<double> x64(x.begin(), x.end());
  double amax = 0;
  for (float v : x) amax = std::max(amax, (double)std::fabs(v));
  for (uint64_t c = 0; c < P; ++c)
    for (uint64_t o = 0; o < os; ++o) {
      const std::vector<uint64_t> cells = cells_of(g, o);
      const double D = op == Op::AvgNoPad ? (double)cells.size() : (double)Geo::prod(g.k);
      double pv = x64[c * is + cells[0]], S = 0;
      for (uint64_t cell : cells)
        pv = beta > 0 ? std::max(pv, x64[c * is + cell]) : std::min(pv, x64[c * is + cell]);
      for (uint64_t cell : cells) S += std::exp((double)(float)beta * (x64[c * is + cell] - pv));
      for (uint64_t cell : cells) {
        const double wt = op == Op::Smooth
                              ? std::exp((double)(float)beta * (x64[c * is + cell] - pv)) / S
                              : op == Op::Max ? 1.0 : 1.0 / D;
        wsum[c * is + cell] += std::fabs(w[c * os + o]);
        wmag[c * is + cell] += std::fabs(w[c * os + o] * wt);
        m[c * is + cell] += 1;
      }
    }
  const double b = (double)(float)beta;
  const int kind = (int)op;
  // Double rounding of a loss: a sum of P * os terms, each within 2^-53 (float64 forward, plus
  // exp / log within 2^-52 for smooth max): (P * os + 8) 2^-53 sum |w y| per loss.
  const double rnd = ((double)(P * os) + 8) * std::ldexp(1.0, -53);
  for (uint64_t i = 0; i < P * is; ++i) {
    double D = 0, tol = 0;
    if (op == Op::Max) {
      const double h = std::ldexp(1.0, -11);
      std::vector<float> xp = x, xm = x;
      xp[i] += (float)h;
      xm[i] -= (float)h;
      double mp = 0, mm = 0;
      D = (loss32(op, g, xp, w, beta, dev, &mp) - loss32(op, g, xm, w, beta, dev, &mm)) / (2 * h);
      tol = kU * std::max(m[i] - 1, 0.0) * wsum[i] + rnd * (mp + mm) / (2 * h) +
            1e-300;
    } else if (op == Op::Smooth) {
      const double h = std::ldexp(1.0, -12) / std::max(1.0, std::fabs(b));
      auto fd = [&](double hh) {
        std::vector<double> xp = x64, xm = x64;
        xp[i] += hh;
        xm[i] -= hh;
        double mp = 0, mm = 0;
        const double r = (loss64(op, g, xp, w, b, &mp) - loss64(op, g, xm, w, b, &mm)) / (2 * hh);
        tol += rnd * (mp + mm) / (2 * hh);
        return r;
      };
      D = fd(h);
      const double D2 = fd(2 * h);
      const double n = (double)Geo::prod(g.k);
      tol += 2 * std::fabs(D2 - D) + kU * wmag[i] * (4 * std::fabs(b) * amax + n + 12) + 1e-30;
    } else {
      const double h = std::ldexp(1.0, -10);
      std::vector<double> xp = x64, xm = x64;
      xp[i] += h;
      xm[i] -= h;
      double mp = 0, mm = 0;
      D = (loss64(op, g, xp, w, b, &mp) - loss64(op, g, xm, w, b, &mm)) / (2 * h);
      tol = kU * (std::fabs(D) + (m[i] + 1) * wmag[i]) + rnd * (mp + mm) / (2 * h) +
            1e-30;
    }
    const double e = std::fabs(d[i] - D) / tol;
    worst.v[kind] = std::max(worst.v[kind], std::isnan(e) ? 1e9 : e);
    TH_CHECK_MSG(e <= 1, "%s %s beta %g rank %u cell %llu: dx %.9g, finite difference %.9g, tol %g",
                 op_name(op), dev_name(dev), beta, g.rank(), (unsigned long long)i, (double)d[i],
                 D, tol);
  }
  // Average pool: D from the library's float32 forward too (the kernel differentiates it).
  if (op == Op::Avg || op == Op::AvgNoPad) {
    const double h = std::ldexp(1.0, -6);
    // E(y_o) <= u (|y| + (n - 1) sum |v| / D) <= u (n sum |v| / D); a generous per-output bound.
    std::vector<double> Ey(P * os, 0);
    for (uint64_t c = 0; c < P; ++c)
      for (uint64_t o = 0; o < os; ++o) {
        const std::vector<uint64_t> cells = cells_of(g, o);
        const double Dv = op == Op::AvgNoPad ? (double)cells.size() : (double)Geo::prod(g.k);
        double a = 0;
        for (uint64_t cell : cells) a += std::fabs(x[c * is + cell]) + h;
        Ey[c * os + o] = kU * (cells.size() + 1) * a / Dv * 1.01;
      }
    double eterm = 0;
    for (uint64_t o = 0; o < P * os; ++o) eterm += std::fabs(w[o]) * Ey[o];
    for (uint64_t i = 0; i < P * is; i += 1 + P * is / 17) {
      std::vector<float> xp = x, xm = x;
      xp[i] += (float)h;
      xm[i] -= (float)h;
      const double D =
          (loss32(op, g, xp, w, beta, dev) - loss32(op, g, xm, w, beta, dev)) / (2 * h);
      const double tol = 2 * eterm / (2 * h) + kU * (std::fabs(D) + (m[i] + 1) * wmag[i]) + 1e-30;
      TH_CHECK_MSG(std::fabs(d[i] - D) <= tol,
                   "%s %s (float32 forward) cell %llu: dx %.9g, finite difference %.9g, tol %g",
                   op_name(op), dev_name(dev), (unsigned long long)i, (double)d[i], D, tol);
    }
  }
}

Geo random_geo(th::Rng &rng, uint32_t R) {
  Geo g;
  g.N = 1 + rng.gen() % 2;
  g.C = 1 + rng.gen() % 3;
  for (uint32_t d = 0; d < R; ++d) {
    const uint64_t k = 1 + rng.gen() % (R == 3 ? 3 : 4);
    g.in.push_back(k + rng.gen() % (R == 3 ? 3 : 6));
    g.k.push_back(k);
    g.s.push_back(1 + rng.gen() % 3);
    g.p.push_back(rng.gen() % (k / 2 + 1));
  }
  return g;
}

}  // namespace

int main() {
  std::vector<tlrt_device> devs = {TLRT_DEVICE_CPU};
  if (th::cuda_ready()) devs.push_back(TLRT_DEVICE_CUDA(0));
  else std::printf("no usable CUDA device: CPU only\n");
  Worst worst;
  th::Rng rng(2024);
  uint64_t salt = 1;
  for (uint32_t R : {1u, 2u, 3u})
    for (int t = 0; t < (R == 3 ? 3 : 6); ++t) {
      const Geo g = random_geo(rng, R);
      for (tlrt_device dev : devs) {
        check(Op::Max, g, 1.0, dev, ++salt, worst);
        check(Op::Avg, g, 1.0, dev, ++salt, worst);
        check(Op::AvgNoPad, g, 1.0, dev, ++salt, worst);
        for (double beta : {1.0, -1.0, 4.0, -0.5}) check(Op::Smooth, g, beta, dev, ++salt, worst);
      }
    }
  std::printf("largest error / tolerance: maxpool %.3g, avgpool %.3g, avgpool (no pad) %.3g, "
              "smooth_maxpool %.3g\n",
              worst.v[0], worst.v[1], worst.v[2], worst.v[3]);
  return th::finish("test_grad_pool");
}
