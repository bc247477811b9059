// Suite 'grad': tlrt_selective_scan_diag_bwd and tlrt_selective_scan_diag_var_bwd (dA, dB, dX, dH0)
// against central finite differences of the scalar loss L = <w, out> = sum_tj w[t, j] out[t, j],
// out the scan's forward, for seeded random problems (T = 1 .. 200 across the 64-step chunk
// boundaries, D = 3; A in [-1, 1) or [0.9, 1.02), B, X, h0, w uniform in [-1, 1)). The kernel gets
// dY = w and the library forward's own out. Runs on the CPU always and on CUDA(0) when usable.
//
// D = (L64(v + h) - L64(v - h)) / (2h) for every element of A, B, X and h0, L64 a float64
// sequential evaluation of the recurrence, h = 2^-12. Tolerance per component, twice the sum of:
//  - the kernel's float32 evaluation, the bound of abi/tlrt_scan.h (asserted by
//    tests/unit/test_scan.cpp): g_{m+1} |coefficient| G_t per step (dX, dH0, diag_var's dA and
//    dB) or g_{M+1+24} sum_t |...| G_t for diag's sums, G_t = sum_{s >= t} |A_{t+1}..A_s| |w_s|;
//  - dA only: the float32 out it reads for h_{t-1}, off by at most g_{n(t-1)} H_{t-1} (the
//    forward's bound), times G_t;
//  - the finite difference: truncation h^2 / 6 * M3 with M3 estimated as 4x the largest |f'''| of
//    a float64 third difference (step 2^-7) at v and v +- h (zero for B, X, h0: L is linear in
//    each), and the double rounding of the two losses (8 * 2^-52 * sum|w out| / 2h).
#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "harness.hpp"

namespace {

using th::Buf;

const double kU = std::ldexp(1.0, -24);
const uint64_t kL = TLRT_SCAN_CHUNK;
double gamma_n(double n) { return n * kU / (1 - n * kU); }

struct Problem {
  uint64_t T, D;
  bool var;
  std::vector<double> A, B, X, h0;  // float32 values, perturbed in float64 by the differences
  std::vector<float> w;
  double a(uint64_t t, uint64_t j) const { return var ? A[t * D + j] : A[j]; }
  double b(uint64_t t, uint64_t j) const { return var ? B[t * D + j] : B[j]; }
};

double loss(const Problem &p, double *mag = nullptr) {
  double L = 0, m = 0;
  for (uint64_t j = 0; j < p.D; ++j) {
    double h = p.h0[j];
    for (uint64_t t = 0; t < p.T; ++t) {
      h = p.a(t, j) * h + p.b(t, j) * p.X[t * p.D + j];
      L += p.w[t * p.D + j] * h;
      m += std::fabs(p.w[t * p.D + j] * h);
    }
  }
  if (mag) *mag = m;
  return L;
}

std::vector<float> f32(const std::vector<double> &v) { return std::vector<float>(v.begin(), v.end()); }

struct Worst {
  double r[4] = {0, 0, 0, 0};
};

void check(const Problem &p, tlrt_device dev, Worst &worst, const std::string &tag) {
  const uint64_t T = p.T, D = p.D, C = (T + kL - 1) / kL;
  Buf a(th::upload(f32(p.A), dev)), b(th::upload(f32(p.B), dev)), x(th::upload(f32(p.X), dev)),
      hb(th::upload(f32(p.h0), dev)), w(th::upload(p.w, dev)), out, dA, dB, dX, dH;
  if (p.var) {
    TH_OK(tlrt_selective_scan_diag_var_fwd(a.get(), b.get(), x.get(), hb.get(), T, D, out.out()));
    TH_OK(tlrt_selective_scan_diag_var_bwd(a.get(), b.get(), x.get(), hb.get(), out.get(), w.get(),
                                           T, D, dA.out(), dB.out(), dX.out(), dH.out()));
  } else {
    TH_OK(tlrt_selective_scan_diag_fwd(a.get(), b.get(), x.get(), hb.get(), T, D, out.out()));
    TH_OK(tlrt_selective_scan_diag_bwd(a.get(), b.get(), x.get(), hb.get(), out.get(), w.get(), T,
                                       D, dA.out(), dB.out(), dX.out(), dH.out()));
  }
  if (!dH.get()) return;
  const std::vector<float> ov = th::download(out.get());
  const std::vector<float> got[4] = {th::download(dA.get()), th::download(dB.get()),
                                     th::download(dX.get()), th::download(dH.get())};
  // Magnitudes: H_t (forward), G_t (adjoint), per channel.
  std::vector<double> H(T * D), G(T * D);
  for (uint64_t j = 0; j < D; ++j) {
    double m = std::fabs(p.h0[j]);
    for (uint64_t t = 0; t < T; ++t) {
      m = std::fabs(p.a(t, j)) * m + std::fabs(p.b(t, j) * p.X[t * D + j]);
      H[t * D + j] = m;
    }
    double g = 0;
    for (uint64_t t = T; t-- > 0;) {
      g = std::fabs(p.w[t * D + j]) + (t + 1 < T ? std::fabs(p.a(t + 1, j)) : 0.0) * g;
      G[t * D + j] = g;
    }
  }
  const double M = 2.0 * kL + 1 + (kL + 1) * (double)(C - 1);
  auto m_of = [&](uint64_t t) { return 2.0 * kL + 1 + (kL + 1) * (double)(C - 1 - t / kL); };
  auto n_of = [&](uint64_t t) { return 2.0 * kL + 1 + (kL + 1) * (double)(t / kL); };
  auto hprev = [&](uint64_t t, uint64_t j) { return t == 0 ? p.h0[j] : (double)ov[(t - 1) * D + j]; };
  auto hprev_err = [&](uint64_t t, uint64_t j) {
    return t == 0 ? 0.0 : gamma_n(n_of(t - 1)) * H[(t - 1) * D + j];
  };
  // Kernel bound for component `which` (0 dA, 1 dB, 2 dX, 3 dH0), element i.
  auto kernel_tol = [&](int which, uint64_t i) {
    if (which == 3) return gamma_n(M + 1) * std::fabs(p.a(0, i)) * G[i];
    if (which == 2) {
      const uint64_t t = i / D, j = i % D;
      return gamma_n(m_of(t) + 1) * std::fabs(p.b(t, j)) * G[i];
    }
    if (p.var) {
      const uint64_t t = i / D, j = i % D;
      const double c = which == 0 ? std::fabs(hprev(t, j)) : std::fabs(p.X[i]);
      return gamma_n(m_of(t) + 1) * c * G[i] + (which == 0 ? hprev_err(t, j) * G[i] : 0.0);
    }
    double s = 0, e = 0;
    for (uint64_t t = 0; t < T; ++t) {
      s += (which == 0 ? std::fabs(hprev(t, i)) : std::fabs(p.X[t * D + i])) * G[t * D + i];
      if (which == 0) e += hprev_err(t, i) * G[t * D + i];
    }
    return gamma_n(M + 1 + 24) * s + e;
  };
  const double h = std::ldexp(1.0, -12), h3 = std::ldexp(1.0, -7);
  Problem q = p;
  std::vector<double> *params[4] = {&q.A, &q.B, &q.X, &q.h0};
  const char *names[4] = {"dA", "dB", "dX", "dH0"};
  for (int which = 0; which < 4; ++which) {
    std::vector<double> &v = *params[which];
    TH_CHECK_MSG(got[which].size() == v.size(), "%s %s: %zu values, expected %zu", tag.c_str(),
                 names[which], got[which].size(), v.size());
    if (got[which].size() != v.size()) continue;
    // dX is the gradient with respect to X; params[2] is X. (dB, dA likewise.)
    for (uint64_t i = 0; i < v.size(); ++i) {
      const double v0 = v[i];
      auto f = [&](double s) {
        v[i] = v0 + s;
        const double r = loss(q);
        v[i] = v0;
        return r;
      };
      double mag = 0;
      v[i] = v0 + h;
      const double lp = loss(q, &mag);
      v[i] = v0;
      const double D1 = (lp - f(-h)) / (2 * h);
      double m3 = 0;
      if (which == 0)  // L is linear in B, X and h0
        for (double c : {-h, 0.0, h})
          m3 = std::max(m3, std::fabs((f(c + 2 * h3) - 2 * f(c + h3) + 2 * f(c - h3) -
                                       f(c - 2 * h3)) /
                                      (2 * h3 * h3 * h3)));
      const double fd = h * h / 6 * 4 * m3 + 8 * std::ldexp(mag, -52) / (2 * h);
      const double tol = 2 * (kernel_tol(which, i) + fd) + 1e-30;
      const double err = std::fabs(got[which][i] - D1);
      ++th::checks();
      if (!(err <= tol)) {
        char buf[256];
        std::snprintf(buf, sizeof buf, "%s %s[%llu]: kernel %.9g, finite difference %.9g, error %.3g > tol %.3g",
                      tag.c_str(), names[which], (unsigned long long)i, (double)got[which][i], D1,
                      err, tol);
        th::report(__FILE__, __LINE__, buf);
      }
      worst.r[which] = std::max(worst.r[which], err / tol);
    }
  }
}

Problem make(uint64_t T, uint64_t D, bool var, float alo, float ahi, uint64_t salt) {
  th::Rng rng(salt);
  Problem p;
  p.T = T;
  p.D = D;
  p.var = var;
  const uint64_t na = var ? T * D : D;
  auto dv = [](const std::vector<float> &v) { return std::vector<double>(v.begin(), v.end()); };
  p.A = dv(rng.vec(na, alo, ahi));
  p.B = dv(rng.vec(na, -1, 1));
  p.X = dv(rng.vec(T * D, -1, 1));
  p.h0 = dv(rng.vec(D, -1, 1));
  p.w = rng.vec(T * D, -1, 1);
  return p;
}

}  // namespace

int main() {
  std::vector<tlrt_device> devs = {TLRT_DEVICE_CPU};
  if (th::cuda_ready()) devs.push_back(TLRT_DEVICE_CUDA(0));
  const uint64_t Ts[] = {1, 2, 5, 63, 64, 65, 130, 200};
  for (tlrt_device dev : devs) {
    Worst w;
    uint64_t salt = 300;
    for (bool var : {false, true})
      for (uint64_t T : Ts)
        for (int range = 0; range < 2; ++range) {
          const float alo = range == 0 ? -1.0f : 0.9f, ahi = range == 0 ? 1.0f : 1.02f;
          const Problem p = make(T, 3, var, alo, ahi, salt++);
          const std::string tag = std::string(dev == TLRT_DEVICE_CPU ? "cpu " : "cuda ") +
                                  (var ? "var" : "diag") + " T=" + std::to_string(T) +
                                  (range ? " A~1" : " A~U(-1,1)");
          check(p, dev, w, tag);
        }
    std::printf("%s: largest error / tolerance: dA %.3g, dB %.3g, dX %.3g, dH0 %.3g\n",
                dev == TLRT_DEVICE_CPU ? "cpu" : "cuda", w.r[0], w.r[1], w.r[2], w.r[3]);
  }
  return th::finish("test_grad_scan");
}
