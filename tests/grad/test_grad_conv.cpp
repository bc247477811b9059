// Suite 'grad': tlrt_conv_bwd and tlrt_convtranspose_bwd (d_kernel, d_bias, d_input) against
// central finite differences of the scalar loss L = <r, y> = sum_i r[i] y[i], y the forward of the
// same geometry, r = grad_out uniform in [-1, 1). Seeded problems: 1-D, 2-D with groups, stride,
// padding and dilation, 3-D, the 1 x 1 direct path, and transposed 1-D and 2-D (stride 2, groups).
// Every component of every gradient is checked. The forward is linear in each of kernel, bias and
// input, so a central difference has no truncation error:
// (1) Float64 forward straight from the header's DEFINITIONS (tests/conv_ref.hpp's term
//     enumeration), h = 1: D is exact up to float64 rounding (tolerance 2^-40 sum|r y| plus the
//     library kernel's bound 2 (T + 1) u S on the gradient element). This checks that the
//     backward differentiates the definitions.
// (2) Float32 forward: the library's own tlrt_conv_fwd / tlrt_convtranspose_fwd on the CPU (and
//     on CUDA(0) when usable), inputs multiples of 2^-12 in [-1, 1] and h = 2^-4 so that v +- h is
//     exact. Outputs that do not depend on the perturbed value are the same bits in both runs
//     (deterministic backends) and cancel; for the others the forward's rounding enters as
//     sum |r_i| (B+_i + B-_i) / (2h), B the header bound 2 (T + 1) u S of output i, plus the
//     kernel's own bound. This checks that the backward differentiates the forward the library
//     actually computes, on each backend.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "conv_ref.hpp"
#include "harness.hpp"

namespace {

using cref::Geo;
using th::Buf;

const double kU = std::ldexp(1.0, -24);

std::vector<float> quantized(uint64_t n, uint64_t salt) {
  std::vector<float> v = th::make(th::Dist::Uniform, n, salt);
  for (float &x : v) x = std::ldexp(std::round(std::ldexp(x, 12)), -12);
  return v;
}

tlrt_status fwd(tlrt_device dev, const Geo &g, const std::vector<float> &w,
                const std::vector<float> &b, const std::vector<float> &x, std::vector<float> *y) {
  Buf W(th::upload(w, dev)), B(th::upload(b, dev)), X(th::upload(x, dev)), Y;
  const tlrt_status s =
      g.transposed
          ? tlrt_convtranspose_fwd(W.get(), B.get(), X.get(), g.batch, g.in_c, g.out_c,
                                   g.in.data(), g.rank(), g.k.data(), g.s.data(), g.p.data(),
                                   g.d.data(), g.groups, Y.out())
          : tlrt_conv_fwd(W.get(), B.get(), X.get(), g.batch, g.in_c, g.out_c, g.in.data(),
                          g.rank(), g.k.data(), g.s.data(), g.p.data(), g.d.data(), g.groups,
                          Y.out());
  if (s == TLRT_OK) *y = th::download(Y.get());
  return s;
}

// Float64 loss <r, y> from the definitions.
double loss64(const Geo &g, const std::vector<double> &w, const std::vector<double> &b,
              const std::vector<double> &x, const std::vector<float> &r, double *absum) {
  std::vector<double> y(r.size(), 0.0);
  cref::for_terms(g, [&](uint64_t yi, uint64_t wi, uint64_t xi) {
    if (yi != cref::kPad && xi != cref::kPad) y[yi] += w[wi] * x[xi];
  });
  const uint64_t sp = cref::prod(cref::out_extents(g));
  double L = 0, A = 0;
  for (uint64_t i = 0; i < y.size(); ++i) {
    y[i] += b[(i / sp) % g.out_c];
    L += r[i] * y[i];
    A += std::fabs(r[i] * y[i]);
  }
  *absum = A;
  return L;
}

struct Stats {
  uint64_t checked = 0;
  double worst = 0;  // largest |D - grad| / tolerance
};

void compare(const std::string &what, uint64_t idx, double D, float got, double tol, Stats &st) {
  const double err = std::fabs(D - (double)got);
  const double ratio = tol > 0 ? err / tol : (err == 0 ? 0 : INFINITY);
  st.worst = std::max(st.worst, ratio);
  ++st.checked;
  TH_CHECK_MSG(ratio <= 1.0, "%s[%llu]: finite difference %.12g, backward %.9g, tolerance %.3g",
               what.c_str(), (unsigned long long)idx, D, (double)got, tol);
}

void problem(const std::string &name, const Geo &g, uint64_t salt, Stats &st) {
  const std::vector<float> w = quantized(cref::kernel_elems(g), salt * 5 + 1);
  const std::vector<float> b = quantized(g.out_c, salt * 5 + 2);
  const std::vector<float> x = quantized(cref::input_elems(g), salt * 5 + 3);
  const std::vector<float> r = th::make(th::Dist::Uniform, cref::output_elems(g), salt * 5 + 4);
  // Reference gradient bounds (the kernel's error on each element).
  const cref::Ref rw = cref::grad_kernel(g, x, r), rb = cref::grad_bias(g, r),
                  rx = cref::grad_input(g, w, r);
  auto kbound = [&](const cref::Ref &R, uint64_t i) {
    return 2.0 * (double)(R.terms[i] + 1) * kU * R.abs[i] + 1e-30;
  };
  std::vector<tlrt_device> devs{TLRT_DEVICE_CPU};
  if (th::cuda_ready()) devs.push_back(TLRT_DEVICE_CUDA(0));
  for (tlrt_device dev : devs) {
    const std::string dn = dev == TLRT_DEVICE_CPU ? " cpu" : " cuda";
    Buf W(th::upload(w, dev)), X(th::upload(x, dev)), R(th::upload(r, dev)), DW, DB, DX;
    const tlrt_status s =
        g.transposed
            ? tlrt_convtranspose_bwd(W.get(), X.get(), R.get(), g.batch, g.in_c, g.out_c,
                                     g.in.data(), g.rank(), g.k.data(), g.s.data(), g.p.data(),
                                     g.d.data(), g.groups, DW.out(), DB.out(), DX.out())
            : tlrt_conv_bwd(W.get(), X.get(), R.get(), g.batch, g.in_c, g.out_c, g.in.data(),
                            g.rank(), g.k.data(), g.s.data(), g.p.data(), g.d.data(), g.groups,
                            DW.out(), DB.out(), DX.out());
    TH_CHECK_MSG(s == TLRT_OK, "%s%s backward: %s", name.c_str(), dn.c_str(), tlrt_last_error());
    if (s != TLRT_OK) continue;
    const std::vector<float> gw = th::download(DW.get()), gb = th::download(DB.get()),
                             gx = th::download(DX.get());
    // The float32 loss bound: outputs whose bits changed, sum |r| (B+ + B-) / 2h.
    auto fd32 = [&](int which, uint64_t i, double *tol) {
      const double h = 1.0 / 16;
      std::vector<float> v[3] = {w, b, x};
      std::vector<float> yp, ym;
      v[which][i] += (float)h;
      const cref::Ref rp = cref::forward(g, v[0], v[1], v[2]);
      TH_OK(fwd(dev, g, v[0], v[1], v[2], &yp));
      v[which][i] -= (float)(2 * h);
      const cref::Ref rm = cref::forward(g, v[0], v[1], v[2]);
      TH_OK(fwd(dev, g, v[0], v[1], v[2], &ym));
      double D = 0, T = 0;
      for (size_t k = 0; k < yp.size() && k < ym.size(); ++k) {
        if (th::same_bits(yp[k], ym[k])) continue;
        D += (double)r[k] * ((double)yp[k] - (double)ym[k]);
        T += std::fabs(r[k]) * 2.0 * kU *
             ((double)(rp.terms[k] + 1) * rp.abs[k] + (double)(rm.terms[k] + 1) * rm.abs[k]);
      }
      *tol = T / (2 * h);
      return D / (2 * h);
    };
    const std::vector<float> *got[3] = {&gw, &gb, &gx};
    const cref::Ref *ref[3] = {&rw, &rb, &rx};
    const char *nm[3] = {" d_kernel", " d_bias", " d_input"};
    for (int which = 0; which < 3; ++which) {
      const std::vector<float> &G = *got[which];
      TH_CHECK_MSG(G.size() == ref[which]->v.size(), "%s%s%s: %zu elements", name.c_str(),
                   dn.c_str(), nm[which], G.size());
      if (G.size() != ref[which]->v.size()) continue;
      for (uint64_t i = 0; i < G.size(); ++i) {
        double tol = 0;
        const double D32 = fd32(which, i, &tol);
        compare(name + dn + nm[which] + " (float32 forward)", i, D32, G[i],
                tol + kbound(*ref[which], i), st);
        if (dev != TLRT_DEVICE_CPU) continue;
        // (1) float64 forward from the definitions, h = 1.
        std::vector<double> v[3] = {std::vector<double>(w.begin(), w.end()),
                                    std::vector<double>(b.begin(), b.end()),
                                    std::vector<double>(x.begin(), x.end())};
        double Ap, Am;
        v[which][i] += 1.0;
        const double Lp = loss64(g, v[0], v[1], v[2], r, &Ap);
        v[which][i] -= 2.0;
        const double Lm = loss64(g, v[0], v[1], v[2], r, &Am);
        const double D64 = (Lp - Lm) / 2.0;
        compare(name + dn + nm[which] + " (float64 forward)", i, D64, G[i],
                std::ldexp(Ap + Am, -40) + kbound(*ref[which], i), st);
      }
    }
  }
}

Geo make(bool tr, uint64_t batch, uint64_t in_c, uint64_t out_c, uint64_t groups,
         std::vector<uint64_t> in, std::vector<uint64_t> k, std::vector<uint64_t> s,
         std::vector<uint64_t> p, std::vector<uint64_t> d) {
  Geo g;
  g.transposed = tr;
  g.batch = batch;
  g.in_c = in_c;
  g.out_c = out_c;
  g.groups = groups;
  g.in = in;
  g.k = k;
  g.s = s;
  g.p = p;
  g.d = d;
  return g;
}

}  // namespace

int main() {
  Stats st;
  problem("conv 1-D", make(false, 2, 2, 3, 1, {9}, {3}, {2}, {1}, {1}), 1, st);
  problem("conv 2-D groups dilation", make(false, 2, 4, 4, 2, {6, 5}, {2, 3}, {1, 2}, {1, 1},
                                           {2, 1}), 2, st);
  problem("conv 2-D depthwise", make(false, 1, 3, 3, 3, {5, 5}, {3, 3}, {1, 1}, {1, 1}, {1, 1}),
          3, st);
  problem("conv 3-D", make(false, 1, 2, 2, 1, {4, 3, 4}, {2, 2, 3}, {1, 1, 2}, {0, 1, 1},
                           {1, 1, 1}), 4, st);
  problem("conv 1x1 direct", make(false, 2, 3, 2, 1, {3, 4}, {1, 1}, {1, 1}, {0, 0}, {1, 1}), 5,
          st);
  problem("convtranspose 1-D groups", make(true, 2, 4, 2, 2, {5}, {3}, {2}, {1}, {1}), 6, st);
  problem("convtranspose 2-D stride 2", make(true, 1, 2, 3, 1, {3, 4}, {4, 3}, {2, 2}, {1, 0},
                                             {1, 2}), 7, st);
  std::printf("grad conv: %llu gradient components checked, worst error / tolerance %.3g\n",
              (unsigned long long)st.checked, st.worst);
  return th::finish("test_grad_conv");
}
