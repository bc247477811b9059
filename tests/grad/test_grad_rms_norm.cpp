// Suite 'grad': tlrt_rms_norm_bwd (dx, dgamma) against central finite differences of the scalar
// loss L = <w, y> = sum_ij w[i, j] y[i, j], y = rms_norm(x; gamma) with eps = 1e-5, for seeded
// random (rows, cols) problems (rows 1..6, cols 1..100; x uniform in [-2, 2), some rows offset by
// 10, a few rows scaled by 2^-10; gamma of either sign with |gamma| in [0.5, 2), or NULL (then
// dgamma is the unit scale's gradient); w uniform in [-1, 1)). The kernel gets dy = w, x, gamma
// and the library forward's inv_rms. Runs on the CPU always and on CUDA(0) when usable.
// u = 2^-24 below; L_c = levels of the tree over cols, L_r over rows (1 here).
//
// (1) Float64 forward: D = (L64(v + h) - L64(v - h)) / (2h) for every x[i, k] and gamma[k], L64 a
//     float64 evaluation of the header's definitions, h = 2^-14 (relative to the row's rms for x).
//     Tolerance, per component, twice the sum of:
//     - the kernel's float32 evaluation (the bound tests/unit/test_rms_norm.cpp asserts):
//         dx: 2u (|dx| + inv_rms (2|d| + 3|xhat b| + (24 L_c + 1)|xhat| mean|d xhat|));
//         dgamma: u (23 L_r + 3) sum_i |w xhat|;
//     - the float32 inv_rms it is given (relative error r <= 2u (12 L_c + 5)): dx moves by
//       r (inv_rms |d| + 3 |xhat b| inv_rms), each xhat by r |xhat| (dgamma by sum_i |w| r |xhat|);
//     - the finite difference itself: truncation h^2 / 6 * M3 with M3 estimated as 4x the largest
//       |f'''| of a float64 third difference (step 2^-7 of the same scale) at v and v +- h (gamma
//       enters linearly: M3 = 0), and the double rounding of the two losses (8 * 2^-52 *
//       sum|w y| / 2h).
// (2) Float32 forward, the library's tlrt_rms_norm_fwd on gamma +- h (h = 2^-6, the perturbed
//     values exact): L is linear in gamma, and the other columns' outputs are the same bits in both
//     runs, so D differs from the kernel only by the rounding of y = xhat * gamma in column k
//     (u |y| each: sum_i |w| u (|y+| + |y-|) / 2h) and of the float64 sums, plus the kernel term.
//     This checks that dgamma differentiates the forward the library actually computes.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "harness.hpp"

namespace {

using th::Buf;

const double kU = std::ldexp(1.0, -24);
const char *dev_name(tlrt_device d) { return d == TLRT_DEVICE_CPU ? "cpu" : "cuda"; }

struct Problem {
  uint64_t R, C;
  std::vector<float> x, gamma, w;  // gamma empty: no scale
  float eps;
};

double gam(const std::vector<double> &g, size_t j) { return g.empty() ? 1.0 : g[j]; }

// Row i's loss in float64.
double loss_row(const Problem &p, uint64_t i, const std::vector<double> &x,
                const std::vector<double> &g, double *mag = nullptr) {
  const size_t n = x.size();
  double q = 0;
  for (double v : x) q += v * v;
  const double is = 1.0 / std::sqrt(q / n + p.eps);
  double L = 0, m = 0;
  for (size_t j = 0; j < n; ++j) {
    const double y = x[j] * is * gam(g, j);
    L += p.w[i * p.C + j] * y;
    m += std::fabs(p.w[i * p.C + j] * y);
  }
  if (mag) *mag = m;
  return L;
}

std::vector<double> row_x(const Problem &p, uint64_t i) {
  return std::vector<double>(p.x.begin() + i * p.C, p.x.begin() + (i + 1) * p.C);
}

struct Worst {
  double dx = 0, dg = 0, dg32 = 0;
};

void check(const Problem &p, tlrt_device dev, Worst &worst) {
  const uint64_t R = p.R, C = p.C;
  const bool has_g = !p.gamma.empty();
  Buf bx(th::upload(p.x, dev)), bg(has_g ? th::upload(p.gamma, dev) : nullptr),
      bw(th::upload(p.w, dev)), y, s, dx, dg;
  TH_OK(tlrt_rms_norm_fwd(bx.get(), bg.get(), R, C, p.eps, y.out(), s.out()));
  TH_OK(tlrt_rms_norm_bwd(bw.get(), bx.get(), bg.get(), s.get(), R, C, dx.out(), dg.out()));
  if (!dx.get() || !dg.get()) return;
  const std::vector<float> sv = th::download(s.get()), dxv = th::download(dx.get()),
                           dgv = th::download(dg.get());
  const std::vector<double> g64(p.gamma.begin(), p.gamma.end());
  const int Lc = 1, Lr = 1;
  const double rel = 2 * kU * (12 * Lc + 5);
  size_t bad = 0;
  for (uint64_t i = 0; i < R; ++i) {
    const std::vector<double> xr = row_x(p, i);
    double q = 0;
    for (double v : xr) q += v * v;
    const double scale = std::sqrt(q / C + p.eps);  // the row's rms: the step scales with it
    const double h = std::ldexp(1.0, -14) * scale, h3 = std::ldexp(1.0, -7) * scale;
    const double is = sv[i];
    std::vector<double> d(C), xh(C);
    double sp = 0, spa = 0;
    for (uint64_t j = 0; j < C; ++j) {
      xh[j] = xr[j] * is;
      d[j] = (double)p.w[i * C + j] * gam(g64, j);
      sp += d[j] * xh[j];
      spa += std::fabs(d[j] * xh[j]);
    }
    const double b = sp / C;
    for (uint64_t k = 0; k < C; ++k) {
      std::vector<double> xp = xr;
      auto f = [&](double t) {
        xp[k] = xr[k] + t;
        return loss_row(p, i, xp, g64);
      };
      double mag = 0;
      xp[k] = xr[k] + h;
      const double lp = loss_row(p, i, xp, g64, &mag);
      const double lm = f(-h);
      const double D = (lp - lm) / (2 * h);
      double m3 = 0;
      for (double c : {-h, 0.0, h})
        m3 =
            std::max(m3, std::fabs((f(c + 2 * h3) - 2 * f(c + h3) + 2 * f(c - h3) - f(c - 2 * h3)) /
                                   (2 * h3 * h3 * h3)));
      const double dxk = is * (d[k] - xh[k] * b);
      const double kern = 2 * kU *
                          (is * (2 * std::fabs(d[k]) + 3 * std::fabs(xh[k] * b) +
                                 (24 * Lc + 1) * std::fabs(xh[k]) * spa / C) +
                           std::fabs(dxk));
      const double stat = rel * (is * std::fabs(d[k]) + 3 * is * std::fabs(xh[k] * b));
      const double fd = h * h / 6 * 4 * m3 + 8 * std::ldexp(mag, -52) / (2 * h);
      const double tol = 2 * (kern + stat + fd) + 1e-37;
      const double err = std::fabs(dxv[i * C + k] - D);
      worst.dx = std::max(worst.dx, err / tol);
      if (!(err <= tol) && bad++ == 0)
        TH_CHECK_MSG(false, "(%llu, %llu)%s on %s: dx[%llu, %llu] = %.9g, D = %.9g, |err| %g > %g",
                     (unsigned long long)R, (unsigned long long)C, has_g ? "" : " no gamma",
                     dev_name(dev), (unsigned long long)i, (unsigned long long)k,
                     (double)dxv[i * C + k], D, err, tol);
    }
  }
  // dgamma: (1) float64 forward (with gamma = 1 where there is none: the unit scale's gradient);
  // (2) the library's float32 forward (with a gamma only).
  const double h = std::ldexp(1.0, -14), h2 = std::ldexp(1.0, -6);
  std::vector<double> gbase = has_g ? g64 : std::vector<double>(C, 1.0);
  for (uint64_t k = 0; k < C; ++k) {
    std::vector<double> gp = gbase, gm = gbase;
    gp[k] += h;
    gm[k] -= h;
    double Lp = 0, Lm = 0, mag = 0, termabs = 0, statabs = 0;
    for (uint64_t i = 0; i < R; ++i) {
      double mg = 0;
      Lp += loss_row(p, i, row_x(p, i), gp, &mg);
      Lm += loss_row(p, i, row_x(p, i), gm);
      mag += mg;
      const double wk = p.w[i * C + k];
      const double xh = (double)p.x[i * C + k] * sv[i];
      termabs += std::fabs(wk * xh);
      statabs += std::fabs(wk) * rel * std::fabs(xh);
    }
    const double D = (Lp - Lm) / (2 * h);
    const double kern = kU * (23 * Lr + 3) * termabs;
    const double tol = 2 * (kern + statabs + 8 * std::ldexp(mag, -52) / (2 * h)) + 1e-37;
    const double err = std::fabs(dgv[k] - D);
    worst.dg = std::max(worst.dg, err / tol);
    if (!(err <= tol) && bad++ == 0)
      TH_CHECK_MSG(false, "(%llu, %llu)%s on %s: dgamma[%llu] = %.9g, D = %.9g, |err| %g > %g",
                   (unsigned long long)R, (unsigned long long)C, has_g ? "" : " no gamma",
                   dev_name(dev), (unsigned long long)k, (double)dgv[k], D, err, tol);
    if (!has_g) continue;
    std::vector<float> g32p = p.gamma, g32m = p.gamma;
    g32p[k] += (float)h2;
    g32m[k] -= (float)h2;
    double L32[2] = {0, 0}, rnd = 0, mag32 = 0;
    for (int sgn = 0; sgn < 2; ++sgn) {
      Buf gg(th::upload(sgn == 0 ? g32p : g32m, dev)), y2, s2;
      TH_OK(tlrt_rms_norm_fwd(bx.get(), gg.get(), R, C, p.eps, y2.out(), s2.out()));
      if (!y2.get()) return;
      const std::vector<float> yy = th::download(y2.get());
      for (uint64_t i = 0; i < R; ++i)
        for (uint64_t j = 0; j < C; ++j) {
          const double wv = p.w[i * C + j];
          L32[sgn] += wv * yy[i * C + j];
          mag32 += std::fabs(wv * yy[i * C + j]);
          if (j == k) rnd += std::fabs(wv) * kU * std::fabs(yy[i * C + j]);
        }
    }
    const double D32 = (L32[0] - L32[1]) / (2 * h2);
    const double tol32 = 2 * (kern + rnd / (2 * h2) + 8 * std::ldexp(mag32, -52) / (2 * h2)) + 1e-37;
    const double err32 = std::fabs(dgv[k] - D32);
    worst.dg32 = std::max(worst.dg32, err32 / tol32);
    if (!(err32 <= tol32) && bad++ == 0)
      TH_CHECK_MSG(false, "(%llu, %llu) on %s: dgamma[%llu] = %.9g, float32 D = %.9g, |err| %g > %g",
                   (unsigned long long)R, (unsigned long long)C, dev_name(dev),
                   (unsigned long long)k, (double)dgv[k], D32, err32, tol32);
  }
  TH_CHECK_MSG(bad == 0, "(%llu, %llu)%s on %s: %zu components off", (unsigned long long)R,
               (unsigned long long)C, has_g ? "" : " no gamma", dev_name(dev), bad);
}

void run(tlrt_device dev) {
  struct Shape {
    uint64_t R, C;
  };
  Worst worst;
  uint64_t salt = 1;
  for (Shape sh : {Shape{1, 1}, Shape{1, 2}, Shape{3, 2}, Shape{2, 3}, Shape{4, 8}, Shape{3, 17},
                   Shape{2, 33}, Shape{5, 64}, Shape{6, 100}}) {
    for (int rep = 0; rep < 3; ++rep) {
      th::Rng rng(++salt);
      Problem p{sh.R, sh.C, {}, {}, {}, (float)1e-5};
      p.x.resize(sh.R * sh.C);
      for (uint64_t k = 0; k < p.x.size(); ++k) {
        const uint64_t r = k / sh.C;
        float v = std::round(rng.uniform(-2.0f, 2.0f) * 4096.0f) / 4096.0f;
        if (r % 3 == 2) v += 10.0f;
        if (r % 4 == 3) v *= 0x1p-10f;
        p.x[k] = v;
      }
      if (rep != 2) {  // the third repetition without gamma
        for (uint64_t j = 0; j < sh.C; ++j) {
          const float mag = std::round(rng.uniform(0.5f, 2.0f) * 4096.0f) / 4096.0f;
          p.gamma.push_back((rng.gen() & 1) ? -mag : mag);
        }
      }
      p.w = rng.vec(sh.R * sh.C, -1.0f, 1.0f);
      check(p, dev, worst);
    }
  }
  std::printf("  %-4s largest error / tolerance: float64 forward: dx %.3f, dgamma %.3f; float32 "
              "forward: dgamma %.3f\n",
              dev_name(dev), worst.dx, worst.dg, worst.dg32);
}

}  // namespace

int main() {
  const tlrt_allocator_stats start = th::stats();
  std::printf("rms norm: backward kernel against central differences\n");
  run(TLRT_DEVICE_CPU);
  if (th::cuda_ready()) run(TLRT_DEVICE_CUDA(0));
  const tlrt_allocator_stats end = th::stats();
  TH_CHECK(end.live_bytes == start.live_bytes && end.live_handles == start.live_handles);
  return th::finish("test_grad_rms_norm");
}
