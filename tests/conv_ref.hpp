// Float64 reference for the convolution family (abi/tlrt_conv.h), shared by tests/unit/test_conv.cpp,
// tests/grad/test_grad_conv.cpp and tests/parity/test_parity_conv.cpp. Written straight from the
// header's DEFINITIONS (a loop over every (image, output channel, output position, input channel,
// window offset) term), independent of the library's im2col lowering. Each result comes with the
// sum of the absolute values of its terms (S) and the number of terms (T), for the header's error
// bound 2 (T + 1) u S.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "harness.hpp"

namespace cref {

struct Geo {
  bool transposed = false;
  uint64_t batch = 1, in_c = 1, out_c = 1, groups = 1;
  std::vector<uint64_t> in, k, s, p, d;  // rank values each
  uint32_t rank() const { return (uint32_t)in.size(); }
};

// Output extents of the header's rules (0 for an empty axis).
inline std::vector<uint64_t> out_extents(const Geo &g) {
  std::vector<uint64_t> o(g.rank());
  for (uint32_t a = 0; a < g.rank(); ++a) {
    const int64_t ek = (int64_t)(g.d[a] * (g.k[a] - 1) + 1);
    const int64_t in = (int64_t)g.in[a], s = (int64_t)g.s[a], p = (int64_t)g.p[a];
    if (!g.transposed) {
      o[a] = in + 2 * p >= ek ? (uint64_t)((in + 2 * p - ek) / s + 1) : 0;
    } else {
      const int64_t v = in == 0 ? 0 : (in - 1) * s + ek - 2 * p;
      o[a] = v > 0 ? (uint64_t)v : 0;
    }
  }
  return o;
}

inline uint64_t prod(const std::vector<uint64_t> &v) {
  uint64_t r = 1;
  for (uint64_t x : v) r *= x;
  return r;
}

inline uint64_t kernel_elems(const Geo &g) {
  return (g.transposed ? g.in_c * (g.out_c / g.groups) : g.out_c * (g.in_c / g.groups)) *
         prod(g.k);
}
inline uint64_t input_elems(const Geo &g) { return g.batch * g.in_c * prod(g.in); }
inline uint64_t output_elems(const Geo &g) { return g.batch * g.out_c * prod(out_extents(g)); }

// Index of a padding cell: its value is +0 (it takes part in products, as in the library's
// im2col: 0 * inf = NaN) and it receives no gradient.
constexpr uint64_t kPad = UINT64_MAX;

// Calls f(output index, kernel index, input index) for every product term of the forward (the
// bias excluded), in the CONVOLUTION sense for g.transposed == false; for a transposed geometry the
// same terms with the roles of the convolution's input and output swapped (the adjoint).
inline void for_terms(const Geo &g, const std::function<void(uint64_t, uint64_t, uint64_t)> &f) {
  const uint32_t r = g.rank();
  // The convolution view: cin/cout channels, cin spatial = conv input extents.
  const std::vector<uint64_t> tout = out_extents(g);
  const std::vector<uint64_t> cin_sp = g.transposed ? tout : g.in;
  const std::vector<uint64_t> cout_sp = g.transposed ? g.in : tout;
  const uint64_t cin = g.transposed ? g.out_c : g.in_c, cout = g.transposed ? g.in_c : g.out_c;
  const uint64_t icg = cin / g.groups, ocg = cout / g.groups;
  const uint64_t isp = prod(cin_sp), osp = prod(cout_sp), ksz = prod(g.k);
  if (isp == 0 || osp == 0) return;
  std::vector<uint64_t> q(r), j(r);
  for (uint64_t n = 0; n < g.batch; ++n)
    for (uint64_t o = 0; o < cout; ++o) {
      const uint64_t grp = o / ocg;
      for (uint64_t qf = 0; qf < osp; ++qf) {
        uint64_t t = qf;
        for (uint32_t a = r; a-- > 0;) {
          q[a] = t % cout_sp[a];
          t /= cout_sp[a];
        }
        for (uint64_t c = 0; c < icg; ++c)
          for (uint64_t jf = 0; jf < ksz; ++jf) {
            uint64_t u = jf;
            for (uint32_t a = r; a-- > 0;) {
              j[a] = u % g.k[a];
              u /= g.k[a];
            }
            uint64_t ipos = 0;
            bool ok = true;
            for (uint32_t a = 0; a < r && ok; ++a) {
              const int64_t i = (int64_t)(q[a] * g.s[a]) - (int64_t)g.p[a] + (int64_t)(j[a] * g.d[a]);
              ok = i >= 0 && i < (int64_t)cin_sp[a];
              ipos = ipos * cin_sp[a] + (uint64_t)(ok ? i : 0);
            }
            const uint64_t conv_y = (n * cout + o) * osp + qf;
            // A padding cell of the convolution's input: kPad (value +0, receives nothing).
            const uint64_t conv_x = ok ? (n * cin + grp * icg + c) * isp + ipos : kPad;
            const uint64_t widx = (o * icg + c) * ksz + jf;
            // Transposed: its input is the convolution's output and vice versa.
            if (!g.transposed)
              f(conv_y, widx, conv_x);
            else
              f(conv_x, widx, conv_y);
          }
      }
    }
}

// A result with its error-bound ingredients.
struct Ref {
  std::vector<double> v, abs;  // value, sum of |terms|
  std::vector<uint64_t> terms;
};

inline Ref make(uint64_t n) { return Ref{std::vector<double>(n, 0.0), std::vector<double>(n, 0.0), std::vector<uint64_t>(n, 0)}; }

inline void add(Ref &r, uint64_t i, double t) {
  r.v[i] += t;
  r.abs[i] += std::fabs(t);
  r.terms[i] += 1;
}

// Forward (output of the forward function of g): bias may be empty (no bias).
inline Ref forward(const Geo &g, const std::vector<float> &w, const std::vector<float> &b,
                   const std::vector<float> &x) {
  Ref y = make(output_elems(g));
  for_terms(g, [&](uint64_t yi, uint64_t wi, uint64_t xi) {
    if (yi != kPad) add(y, yi, (double)w[wi] * (xi == kPad ? 0.0 : (double)x[xi]));
  });
  const uint64_t sp = prod(out_extents(g));
  if (!b.empty())
    for (uint64_t i = 0; i < y.v.size(); ++i) add(y, i, (double)b[(i / sp) % g.out_c]);
  return y;
}

inline Ref grad_kernel(const Geo &g, const std::vector<float> &x, const std::vector<float> &dy) {
  Ref dw = make(kernel_elems(g));
  for_terms(g, [&](uint64_t yi, uint64_t wi, uint64_t xi) {
    add(dw, wi, (yi == kPad ? 0.0 : (double)dy[yi]) * (xi == kPad ? 0.0 : (double)x[xi]));
  });
  return dw;
}

inline Ref grad_input(const Geo &g, const std::vector<float> &w, const std::vector<float> &dy) {
  Ref dx = make(input_elems(g));
  for_terms(g, [&](uint64_t yi, uint64_t wi, uint64_t xi) {
    if (xi != kPad) add(dx, xi, (double)w[wi] * (yi == kPad ? 0.0 : (double)dy[yi]));
  });
  return dx;
}

inline Ref grad_bias(const Geo &g, const std::vector<float> &dy) {
  Ref db = make(g.out_c);
  const uint64_t sp = prod(out_extents(g));
  for (uint64_t i = 0; i < dy.size(); ++i) add(db, (i / sp) % g.out_c, (double)dy[i]);
  return db;
}

// Largest |got - ref| / (2 (T + 1) u S) (the header's bound; <= 1 passes); an exact zero bound
// needs an exact result. NaN where NaN is expected counts as 0. extra_rel adds a relative term
// (TF32). *bad gets the first failing index (or SIZE_MAX).
inline double worst_ratio(const std::vector<float> &got, const Ref &r, size_t *bad,
                          double extra_rel = 0.0) {
  const double u = std::ldexp(1.0, -24);
  double worst = 0.0;
  *bad = SIZE_MAX;
  if (got.size() != r.v.size()) {
    *bad = 0;
    return INFINITY;
  }
  for (size_t i = 0; i < got.size(); ++i) {
    const double want = r.v[i];
    if (std::isnan(want) || std::isnan((double)got[i])) {
      if (!(std::isnan(want) && std::isnan((double)got[i])) && *bad == SIZE_MAX) *bad = i;
      continue;
    }
    if (std::isfinite(want) && r.abs[i] > 3.4028234663852886e38) continue;  // no bound: overflow
    if (std::isinf(want) || std::isinf((double)got[i])) {
      if ((double)got[i] != want && *bad == SIZE_MAX) *bad = i;
      if ((double)got[i] != want) worst = INFINITY;
      continue;
    }
    // Plus the absolute error of products and sums in the subnormal range.
    const double bound = (2.0 * (double)(r.terms[i] + 1) * u + extra_rel) * r.abs[i] +
                         (double)(r.terms[i] + 1) * std::ldexp(1.0, -148);
    const double err = std::fabs((double)got[i] - want);
    const double ratio = bound > 0 ? err / bound : (err == 0 ? 0.0 : INFINITY);
    if (ratio > 1.0 && *bad == SIZE_MAX) *bad = i;
    worst = std::max(worst, ratio);
  }
  return worst;
}

}  // namespace cref
