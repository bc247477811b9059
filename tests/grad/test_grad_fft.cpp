// Suite 'grad': the spectral-convolution backward kernels of abi/tlrt_fft.h (bwd_x, bwd_wre,
// bwd_wim and the fused bwd_w) against central finite differences of the scalar loss
// L = <dy, y> = sum_{t,o} dy[t, o] y[t, o], y = spectral_conv(x; w_re, w_im), evaluated by a
// float64 direct DFT of the header's definition (imaginary parts of Z at bin 0 and, for even grid,
// bin grid/2 ignored). Seeded random problems: grid 1..17 (odd and even, so that the Nyquist bin
// is and is not kept), width 1..4, modes 1..grid/2 + 1 (the largest included). Runs on the CPU and
// on CUDA(0) when usable.
//
// L is linear in each parameter, so a central difference with h = 1/4 has no truncation error;
// D = (L(v + h) - L(v - h)) / 2h carries only the float64 rounding of the two losses,
// <= 2^-50 sum |dy y| / h. Tolerances, per component, with S the largest |D| of that gradient:
//   CPU (float64 throughout, rounded once): |g - D| <= 2^-23 |D| + 2^-30 S;
//   CUDA (cuFFT float32): |g - D| <= 2^-24 (4 log2(grid) + 4 width + 16) S, and the same bound
//   normwise, ||g - D||_2 <= that factor times ||D||_2.
// Both tolerances add F = 2^-40 * 2 sum|dy| sum|x| max|w| (the float64 rounding of the losses
// against a magnitude bound of their terms), which matters only where a gradient is zero
// altogether (the imaginary weights of grid <= 2, all bins ignoring their imaginary part).
// The fused bwd_w must equal bwd_wre and bwd_wim bit for bit on each backend.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "harness.hpp"

namespace {

using th::Buf;
using u64 = uint64_t;
const double kU = std::ldexp(1.0, -24);
const double kPi = 3.14159265358979323846;

struct Problem {
  u64 grid, width, modes;
  std::vector<float> x, wr, wi, dy;
};

// L = <dy, y> in float64, with the parameters as doubles.
double loss(const Problem &p, const std::vector<double> &x, const std::vector<double> &wr,
            const std::vector<double> &wi) {
  const u64 N = p.grid, W = p.width;
  double L = 0;
  for (u64 k = 0; k < p.modes; ++k) {
    std::vector<double> Xr(W, 0), Xi(W, 0);
    for (u64 c = 0; c < W; ++c)
      for (u64 t = 0; t < N; ++t) {
        const double a = 2 * kPi * (double)((k * t) % N) / (double)N;
        Xr[c] += x[t * W + c] * std::cos(a);
        Xi[c] -= x[t * W + c] * std::sin(a);
      }
    const bool edge = k == 0 || (N % 2 == 0 && k == N / 2);
    const double ck = edge ? 1 : 2;
    for (u64 o = 0; o < W; ++o) {
      double zr = 0, zi = 0;
      for (u64 c = 0; c < W; ++c) {
        const u64 i = (k * W + c) * W + o;
        zr += Xr[c] * wr[i] - Xi[c] * wi[i];
        zi += Xr[c] * wi[i] + Xi[c] * wr[i];
      }
      if (edge) zi = 0;
      for (u64 t = 0; t < N; ++t) {
        const double a = 2 * kPi * (double)((k * t) % N) / (double)N;
        L += p.dy[t * W + o] * ck * (zr * std::cos(a) - zi * std::sin(a)) / (double)N;
      }
    }
  }
  return L;
}

// Central differences of L in every component of one parameter (0 = x, 1 = w_re, 2 = w_im).
std::vector<double> fd(const Problem &p, int which) {
  std::vector<double> x(p.x.begin(), p.x.end()), wr(p.wr.begin(), p.wr.end()),
      wi(p.wi.begin(), p.wi.end());
  std::vector<double> &v = which == 0 ? x : which == 1 ? wr : wi;
  const double h = 0.25;
  std::vector<double> D(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    const double keep = v[i];
    v[i] = keep + h;
    const double lp = loss(p, x, wr, wi);
    v[i] = keep - h;
    const double lm = loss(p, x, wr, wi);
    v[i] = keep;
    D[i] = (lp - lm) / (2 * h);
  }
  return D;
}

double g_worst_cpu = 0, g_worst_gpu = 0;

void compare(const std::string &what, const std::vector<float> &g, const std::vector<double> &D,
             bool cuda, const Problem &p) {
  TH_CHECK_MSG(g.size() == D.size(), "%s: %zu values, expected %zu", what.c_str(), g.size(),
               D.size());
  if (g.size() != D.size()) return;
  double S = 0, num = 0, den = 0;
  for (double d : D) S = std::max(S, std::fabs(d));
  // The float64 rounding of the two losses, relative to a magnitude bound of L's terms
  // (2 sum|dy| sum|x| max|w|): matters only where the whole gradient is zero (weights of bins whose
  // imaginary part is ignored).
  double sdy = 0, sx = 0, mw = 0;
  for (float v : p.dy) sdy += std::fabs(v);
  for (float v : p.x) sx += std::fabs(v);
  for (float v : p.wr) mw = std::max(mw, (double)std::fabs(v));
  for (float v : p.wi) mw = std::max(mw, (double)std::fabs(v));
  const double floor = std::ldexp(2 * sdy * sx * mw, -40);
  const double f = kU * (4 * std::log2((double)p.grid + 1) + 4 * (double)p.width + 16);
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    const double e = std::fabs(g[i] - D[i]);
    num += e * e;
    den += D[i] * D[i];
    const double tol = (cuda ? f * S : 2 * kU * std::fabs(D[i]) + std::ldexp(S, -30)) + floor;
    if (!(e <= tol) && bad++ == 0) first = i;
    if (S > floor) (cuda ? g_worst_gpu : g_worst_cpu) = std::max(cuda ? g_worst_gpu : g_worst_cpu, e / S);
  }
  if (cuda && den > 0)
    TH_CHECK_MSG(std::sqrt(num) <= f * std::sqrt(den) + floor * std::sqrt((double)g.size()), "%s: normwise error %.3g > %.3g",
                 what.c_str(), std::sqrt(num / den), f);
  TH_CHECK_MSG(bad == 0, "%s: %zu of %zu components off; first i=%zu: %.9g vs FD %.12g",
               what.c_str(), bad, g.size(), first, bad ? g[first] : 0.0f, bad ? D[first] : 0.0);
}

void check(const Problem &p, tlrt_device dev) {
  char name[160];
  std::snprintf(name, sizeof name, "(grid %llu, width %llu, modes %llu) on %s",
                (unsigned long long)p.grid, (unsigned long long)p.width,
                (unsigned long long)p.modes, dev == TLRT_DEVICE_CPU ? "cpu" : "cuda");
  const bool cuda = dev != TLRT_DEVICE_CPU;
  Buf x(th::upload(p.x, dev)), wr(th::upload(p.wr, dev)), wi(th::upload(p.wi, dev)),
      dy(th::upload(p.dy, dev)), dx, gr, gi, fr, fi;
  TH_OK(tlrt_spectral_conv1d_rfft_bwd_x(x.get(), wr.get(), wi.get(), dy.get(), p.grid, p.width,
                                        p.modes, dx.out()));
  TH_OK(tlrt_spectral_conv1d_rfft_bwd_wre(x.get(), wr.get(), wi.get(), dy.get(), p.grid, p.width,
                                          p.modes, gr.out()));
  TH_OK(tlrt_spectral_conv1d_rfft_bwd_wim(x.get(), wr.get(), wi.get(), dy.get(), p.grid, p.width,
                                          p.modes, gi.out()));
  TH_OK(tlrt_spectral_conv1d_rfft_bwd_w(x.get(), wr.get(), wi.get(), dy.get(), p.grid, p.width,
                                        p.modes, fr.out(), fi.out()));
  if (!dx.get() || !gr.get() || !gi.get() || !fr.get() || !fi.get()) return;
  compare(std::string("dx ") + name, th::download(dx.get()), fd(p, 0), cuda, p);
  const std::vector<float> vr = th::download(gr.get()), vi = th::download(gi.get());
  compare(std::string("dw_re ") + name, vr, fd(p, 1), cuda, p);
  compare(std::string("dw_im ") + name, vi, fd(p, 2), cuda, p);
  TH_CHECK_MSG(th::download(fr.get()) == vr && th::download(fi.get()) == vi,
               "bwd_w differs from bwd_wre / bwd_wim %s", name);
}

}  // namespace

int main() {
  std::vector<tlrt_device> devs = {TLRT_DEVICE_CPU};
  if (th::cuda_ready()) devs.push_back(TLRT_DEVICE_CUDA(0));
  th::Rng rng(77);
  u64 salt = 1;
  struct Shape {
    u64 grid, width, modes;
  };
  std::vector<Shape> shapes = {{1, 1, 1}, {1, 3, 1}, {2, 2, 2}, {2, 1, 1}, {3, 2, 2},
                               {4, 3, 3}, {8, 2, 5}, {9, 3, 5}, {9, 2, 3}, {16, 4, 9},
                               {17, 3, 9}, {12, 4, 4}, {13, 1, 7}, {10, 3, 6}};
  for (int r = 0; r < 6; ++r) {
    const u64 grid = 1 + rng.gen() % 17, width = 1 + rng.gen() % 4;
    shapes.push_back({grid, width, 1 + rng.gen() % (grid / 2 + 1)});
  }
  for (const Shape &s : shapes) {
    Problem p{s.grid, s.width, s.modes,
              th::make(th::Dist::Uniform, s.grid * s.width, salt),
              th::make(th::Dist::Uniform, s.modes * s.width * s.width, salt + 1),
              th::make(th::Dist::Uniform, s.modes * s.width * s.width, salt + 2),
              th::make(th::Dist::Uniform, s.grid * s.width, salt + 3)};
    salt += 4;
    for (tlrt_device d : devs) check(p, d);
  }
  std::printf("largest |g - FD| / max|FD|: cpu %.3g (%.2f u), cuda %.3g (%.2f u)%s\n",
              g_worst_cpu, g_worst_cpu / kU, g_worst_gpu, g_worst_gpu / kU,
              devs.size() > 1 ? "" : " (no CUDA device)");
  return th::finish("test_grad_fft");
}
