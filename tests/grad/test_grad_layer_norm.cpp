// Suite 'grad': tlrt_layer_norm_bwd (dx, dgamma, dbeta) against central finite differences of the
// scalar loss L = <w, y> = sum_ij w[i, j] y[i, j], y = layer_norm(x; gamma, beta) with eps = 1e-5,
// for seeded random (rows, cols) problems (rows 1..6, cols 1..100; x uniform in [-2, 2), some rows
// offset by 10; gamma of either sign with |gamma| in [0.5, 2); beta and w uniform in [-1, 1)).
// The kernel gets dy = w, x, gamma and the library forward's mean and inv_std. Runs on the CPU
// always and on CUDA(0) when usable. u = 2^-24 below; L_c = levels of the tree over cols, L_r over
// rows (1 here).
//
// (1) Float64 forward: D = (L64(v + h) - L64(v - h)) / (2h) for every x[i, k], gamma[k], beta[k],
//     L64 a float64 evaluation of the header's definitions, h = 2^-14. Tolerance, per component,
//     twice the sum of:
//     - the kernel's float32 evaluation (the bound tests/unit/test_layer_norm.cpp asserts):
//         dx: 2u (inv_std (2|d| + 3|xhat b| + |a| + (24 L_c + 1)(mean|d| + |xhat| mean|d xhat|)) +
//         |dx|); dgamma: u (23 L_r + 3) sum_i |w xhat|;   dbeta: u 23 L_r sum_i |w|;
//     - the float32 statistics it is given: mean off by dm <= 2u (23 L_c + 1) mean|x|, inv_std off
//       by a relative r <= 2u (12 L_c + 5) + the second-order mean term; dx moves by
//       dm inv_std^2 (|b| + |xhat a|) + r (|dx| + 2 inv_std |xhat b|), each xhat by
//       r |xhat| + dm inv_std (so dgamma by sum_i |w| of that);
//     - the finite difference itself: truncation h^2 / 6 * M3 with M3 estimated as 4x the largest
//       |f'''| of a float64 third difference (step 2^-7) at v and v +- h (gamma and beta enter
//       linearly: M3 = 0), and the double rounding of the two losses (8 * 2^-52 * sum|w y| / 2h).
// (2) Float32 forward, the library's tlrt_layer_norm_fwd on gamma +- h and beta +- h (h = 2^-6, the
//     perturbed values exact): L is linear in gamma and beta, so D differs from the kernel only by
//     the forward's rounding of column k (the other columns' outputs are the same bits in both
//     runs, so they cancel exactly), sum_i |w| E(y) / h with E(y) = the unit test's asserted
//     2u (|y| + |gamma| ((12 L_c + 8) |xhat| + (23 L_c + 2) mean|x| inv_std)), plus the kernel
//     term. This checks that dgamma and dbeta differentiate the forward the library actually
//     computes.
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
  std::vector<float> x, gamma, beta, w;
  float eps;
};

// Row i of y in float64.
std::vector<double> row64(const std::vector<double> &x, const std::vector<double> &gamma,
                          const std::vector<double> &beta, double eps) {
  const size_t n = x.size();
  double s = 0;
  for (double v : x) s += v;
  const double mean = s / n;
  double q = 0;
  for (double v : x) q += (v - mean) * (v - mean);
  const double is = 1.0 / std::sqrt(q / n + eps);
  std::vector<double> y(n);
  for (size_t j = 0; j < n; ++j) y[j] = (x[j] - mean) * is * gamma[j] + beta[j];
  return y;
}

double loss_row(const Problem &p, uint64_t i, const std::vector<double> &xr,
                const std::vector<double> &g, const std::vector<double> &b, double *mag = nullptr) {
  const std::vector<double> y = row64(xr, g, b, p.eps);
  double L = 0, m = 0;
  for (uint64_t j = 0; j < p.C; ++j) {
    L += p.w[i * p.C + j] * y[j];
    m += std::fabs(p.w[i * p.C + j] * y[j]);
  }
  if (mag) *mag = m;
  return L;
}

std::vector<double> row_x(const Problem &p, uint64_t i) {
  return std::vector<double>(p.x.begin() + i * p.C, p.x.begin() + (i + 1) * p.C);
}

struct Worst {
  double dx = 0, dg = 0, db = 0, dg32 = 0, db32 = 0;
};

void check(const Problem &p, tlrt_device dev, Worst &worst) {
  const uint64_t R = p.R, C = p.C;
  Buf bx(th::upload(p.x, dev)), bg(th::upload(p.gamma, dev)), bb(th::upload(p.beta, dev)),
      bw(th::upload(p.w, dev)), y, m, s, dx, dg, db;
  TH_OK(tlrt_layer_norm_fwd(bx.get(), bg.get(), bb.get(), R, C, p.eps, y.out(), m.out(), s.out()));
  TH_OK(tlrt_layer_norm_bwd(bw.get(), bx.get(), m.get(), s.get(), bg.get(), R, C, dx.out(),
                            dg.out(), db.out()));
  if (!dx.get()) return;
  const std::vector<float> yv = th::download(y.get()), mv = th::download(m.get()),
                           sv = th::download(s.get()), dxv = th::download(dx.get()),
                           dgv = th::download(dg.get()), dbv = th::download(db.get());
  const std::vector<double> g64(p.gamma.begin(), p.gamma.end()), b64(p.beta.begin(), p.beta.end());
  const double h = std::ldexp(1.0, -14), h3 = std::ldexp(1.0, -7);
  const int Lc = 1, Lr = 1;
  std::vector<double> dm(R), rel(R), mabs(R);
  size_t bad = 0;
  for (uint64_t i = 0; i < R; ++i) {
    const std::vector<double> xr = row_x(p, i);
    double sa = 0, s0 = 0;
    for (double v : xr) {
      sa += std::fabs(v);
      s0 += v;
    }
    mabs[i] = sa / C;
    double q = 0;
    for (double v : xr) q += (v - s0 / C) * (v - s0 / C);
    dm[i] = 2 * kU * (23 * Lc + 1) * mabs[i];
    rel[i] = 2 * kU * (12 * Lc + 5) + dm[i] * dm[i] / (2 * (q / C + p.eps));
    // The kernel's own terms, from the float32 statistics.
    const double mu = mv[i], is = sv[i];
    std::vector<double> d(C), xh(C);
    double sd = 0, sp = 0, sda = 0, spa = 0;
    for (uint64_t j = 0; j < C; ++j) {
      xh[j] = (xr[j] - mu) * is;
      d[j] = (double)p.w[i * C + j] * p.gamma[j];
      sd += d[j];
      sp += d[j] * xh[j];
      sda += std::fabs(d[j]);
      spa += std::fabs(d[j] * xh[j]);
    }
    const double a = sd / C, b = sp / C;
    for (uint64_t k = 0; k < C; ++k) {
      std::vector<double> xp = xr;
      auto f = [&](double t) {
        xp[k] = xr[k] + t;
        return loss_row(p, i, xp, g64, b64);
      };
      double mag = 0;
      xp[k] = xr[k] + h;
      const double lp = loss_row(p, i, xp, g64, b64, &mag);
      const double lm = f(-h);
      const double D = (lp - lm) / (2 * h);
      double m3 = 0;
      for (double c : {-h, 0.0, h})
        m3 =
            std::max(m3, std::fabs((f(c + 2 * h3) - 2 * f(c + h3) + 2 * f(c - h3) - f(c - 2 * h3)) /
                                   (2 * h3 * h3 * h3)));
      const double dxk = is * (d[k] - (a + xh[k] * b));
      const double kern = 2 * kU *
                          (is * (2 * std::fabs(d[k]) + 3 * std::fabs(xh[k] * b) + std::fabs(a) +
                                 (24 * Lc + 1) * (sda / C + std::fabs(xh[k]) * spa / C)) +
                           std::fabs(dxk));
      const double stat = dm[i] * is * is * (std::fabs(b) + std::fabs(xh[k] * a)) +
                          rel[i] * (std::fabs(dxk) + 2 * is * std::fabs(xh[k] * b));
      const double fd = h * h / 6 * 4 * m3 + 8 * std::ldexp(mag, -52) / (2 * h);
      const double tol = 2 * (kern + stat + fd) + 1e-37;
      const double err = std::fabs(dxv[i * C + k] - D);
      worst.dx = std::max(worst.dx, err / tol);
      if (!(err <= tol) && bad++ == 0)
        TH_CHECK_MSG(false, "(%llu, %llu) on %s: dx[%llu, %llu] = %.9g, D = %.9g, |err| %g > %g",
                     (unsigned long long)R, (unsigned long long)C, dev_name(dev),
                     (unsigned long long)i, (unsigned long long)k, (double)dxv[i * C + k], D, err,
                     tol);
    }
  }
  // dgamma, dbeta: (1) float64 forward; (2) the library's float32 forward.
  const double h2 = std::ldexp(1.0, -6);
  for (uint64_t k = 0; k < C; ++k) {
    for (int which = 0; which < 2; ++which) {  // 0: gamma, 1: beta
      std::vector<double> gp = g64, bp = b64, gm = g64, bm = b64;
      (which == 0 ? gp : bp)[k] += h;
      (which == 0 ? gm : bm)[k] -= h;
      double Lp = 0, Lm = 0, mag = 0, termabs = 0, statabs = 0;
      for (uint64_t i = 0; i < R; ++i) {
        double mg = 0;
        Lp += loss_row(p, i, row_x(p, i), gp, bp, &mg);
        Lm += loss_row(p, i, row_x(p, i), gm, bm);
        mag += mg;
        const double wk = p.w[i * C + k];
        const double xh = ((double)p.x[i * C + k] - mv[i]) * sv[i];
        termabs += std::fabs(which == 0 ? wk * xh : wk);
        statabs += std::fabs(wk) * (rel[i] * std::fabs(xh) + dm[i] * sv[i]);
      }
      const double D = (Lp - Lm) / (2 * h);
      const double kern = which == 0 ? kU * (23 * Lr + 3) * termabs : kU * 23 * Lr * termabs;
      const double tol =
          2 * (kern + (which == 0 ? statabs : 0.0) + 8 * std::ldexp(mag, -52) / (2 * h)) + 1e-37;
      const double got = which == 0 ? dgv[k] : dbv[k];
      const double err = std::fabs(got - D);
      double &wst = which == 0 ? worst.dg : worst.db;
      wst = std::max(wst, err / tol);
      if (!(err <= tol) && bad++ == 0)
        TH_CHECK_MSG(false, "(%llu, %llu) on %s: d%s[%llu] = %.9g, D = %.9g, |err| %g > %g",
                     (unsigned long long)R, (unsigned long long)C, dev_name(dev),
                     which == 0 ? "gamma" : "beta", (unsigned long long)k, got, D, err, tol);
      // (2): the library forward on gamma +- h2 / beta +- h2 (exact in float32).
      std::vector<float> g32p = p.gamma, b32p = p.beta, g32m = p.gamma, b32m = p.beta;
      (which == 0 ? g32p : b32p)[k] += (float)h2;
      (which == 0 ? g32m : b32m)[k] -= (float)h2;
      double L32[2] = {0, 0}, rnd = 0, mag32 = 0;
      for (int sgn = 0; sgn < 2; ++sgn) {
        Buf gg(th::upload(sgn == 0 ? g32p : g32m, dev)),
            bb2(th::upload(sgn == 0 ? b32p : b32m, dev)), y2, m2, s2;
        TH_OK(tlrt_layer_norm_fwd(bx.get(), gg.get(), bb2.get(), R, C, p.eps, y2.out(), m2.out(),
                                  s2.out()));
        if (!y2.get()) return;
        const std::vector<float> yy = th::download(y2.get()), mm = th::download(m2.get()),
                                 ss = th::download(s2.get());
        const std::vector<float> &gam = sgn == 0 ? g32p : g32m;
        for (uint64_t i = 0; i < R; ++i)
          for (uint64_t j = 0; j < C; ++j) {
            const double wv = p.w[i * C + j];
            L32[sgn] += wv * yy[i * C + j];
            mag32 += std::fabs(wv * yy[i * C + j]);
            if (j != k) continue;  // other columns' outputs are the same bits in both runs
            const double xh = ((double)p.x[i * C + j] - mm[i]) * ss[i];
            rnd += std::fabs(wv) * 2 * kU *
                   (std::fabs(yy[i * C + j]) +
                    std::fabs(gam[j]) * ((12 * Lc + 8 + rel[i] / kU) * std::fabs(xh) +
                                         (23 * Lc + 2) * mabs[i] * ss[i]));
          }
      }
      const double D32 = (L32[0] - L32[1]) / (2 * h2);
      const double tol32 =
          2 * (kern + rnd / (2 * h2) + 8 * std::ldexp(mag32, -52) / (2 * h2)) + 1e-37;
      const double err32 = std::fabs(got - D32);
      double &w32 = which == 0 ? worst.dg32 : worst.db32;
      w32 = std::max(w32, err32 / tol32);
      if (!(err32 <= tol32) && bad++ == 0)
        TH_CHECK_MSG(false, "(%llu, %llu) on %s: d%s[%llu] = %.9g, float32 D = %.9g, |err| %g > %g",
                     (unsigned long long)R, (unsigned long long)C, dev_name(dev),
                     which == 0 ? "gamma" : "beta", (unsigned long long)k, got, D32, err32, tol32);
    }
  }
  TH_CHECK_MSG(bad == 0, "(%llu, %llu) on %s: %zu components off", (unsigned long long)R,
               (unsigned long long)C, dev_name(dev), bad);
}

void run(tlrt_device dev) {
  struct Shape {
    uint64_t R, C;
  };
  Worst worst;
  uint64_t salt = 1;
  for (Shape sh : {Shape{1, 1}, Shape{1, 2}, Shape{3, 2}, Shape{2, 3}, Shape{4, 8}, Shape{3, 17},
                   Shape{2, 33}, Shape{5, 64}, Shape{6, 100}}) {
    for (int rep = 0; rep < 2; ++rep) {
      th::Rng rng(++salt);
      Problem p{sh.R, sh.C, {}, {}, {}, {}, (float)1e-5};
      p.x.resize(sh.R * sh.C);
      for (uint64_t k = 0; k < p.x.size(); ++k)
        p.x[k] = std::round(rng.uniform(-2.0f, 2.0f) * 4096.0f) / 4096.0f +
                 ((k / sh.C) % 3 == 2 ? 10.0f : 0.0f);
      for (uint64_t j = 0; j < sh.C; ++j) {
        const float mag = std::round(rng.uniform(0.5f, 2.0f) * 4096.0f) / 4096.0f;
        p.gamma.push_back((rng.gen() & 1) ? -mag : mag);
        p.beta.push_back(std::round(rng.uniform(-1.0f, 1.0f) * 4096.0f) / 4096.0f);
      }
      p.w = rng.vec(sh.R * sh.C, -1.0f, 1.0f);
      check(p, dev, worst);
    }
  }
  std::printf(
      "  %-4s largest error / tolerance: float64 forward: dx %.3f, dgamma %.3f, dbeta %.3f; "
      "float32 forward: dgamma %.3f, dbeta %.3f\n",
      dev_name(dev), worst.dx, worst.dg, worst.db, worst.dg32, worst.db32);
}

}  // namespace

int main() {
  const tlrt_allocator_stats start = th::stats();
  std::printf("layer norm: backward kernel against central differences\n");
  run(TLRT_DEVICE_CPU);
  if (th::cuda_ready()) run(TLRT_DEVICE_CUDA(0));
  const tlrt_allocator_stats end = th::stats();
  TH_CHECK(end.live_bytes == start.live_bytes && end.live_handles == start.live_handles);
  return th::finish("test_grad_layer_norm");
}
