// Float64 reference of abi/tlrt_attention.h (DEFINITIONS) shared by the attention unit and grad
// tests, with the "absolute" companions A(x) the header's error bound is stated in.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "harness.hpp"

namespace attref {

struct Case {
  uint64_t bh, n, d;
  std::vector<float> mask;  // empty: none; n*n (broadcast) or bh*n*n
  float scale, fill;        // fill -inf: exclusion
  bool causal;
};

inline bool blocked(const Case &c, uint64_t b, uint64_t i, uint64_t j) {
  if (c.causal && j > i) return true;
  if (c.mask.empty()) return false;
  const uint64_t stride = c.mask.size() == c.n * c.n ? 0 : c.n * c.n;
  return c.mask[b * stride + i * c.n + j] == 0.0f;
}

struct Ref {
  std::vector<double> out, lse, dq, dk, dv;      // values
  std::vector<double> aout, alse, adq, adk, adv;  // A(x) of the header (alse: 1 + |lse|)
  std::vector<double> S;                          // S(i) per (b, i)
};

// Forward (and, with dout non-empty, backward) in float64 on the float32 inputs.
inline Ref reference(const Case &c, const std::vector<float> &q, const std::vector<float> &k,
                     const std::vector<float> &v, const std::vector<float> &dout) {
  const uint64_t n = c.n, d = c.d;
  Ref r;
  r.out.assign(c.bh * n * d, 0);
  r.aout = r.out;
  r.lse.assign(c.bh * n, 0);
  r.alse = r.lse;
  r.S = r.lse;
  const bool bwd = !dout.empty();
  if (bwd) r.dq = r.dk = r.dv = r.adq = r.adk = r.adv = r.out;
  const double sc = c.scale, fill = c.fill;
  const bool excl = std::isinf(c.fill);
  std::vector<double> s(n), P(n), dP(n), adP(n);
  std::vector<char> ex(n);
  for (uint64_t b = 0; b < c.bh; ++b) {
    const uint64_t o = b * n * d;
    for (uint64_t i = 0; i < n; ++i) {
      double smax = -INFINITY, Smag = 0;
      bool any_blocked = false;
      for (uint64_t j = 0; j < n; ++j) {
        double dot = 0, adot = 0;
        for (uint64_t t = 0; t < d; ++t) {
          dot += (double)q[o + i * d + t] * k[o + j * d + t];
          adot += std::fabs((double)q[o + i * d + t] * k[o + j * d + t]);
        }
        Smag = std::max(Smag, std::fabs(sc) * adot);
        const bool bl = blocked(c, b, i, j);
        any_blocked |= bl;
        ex[j] = bl && excl;
        s[j] = dot * sc + (bl && !excl ? fill : 0.0);
        if (!ex[j]) smax = std::max(smax, s[j]);
      }
      r.S[b * n + i] = Smag + (any_blocked && !excl ? std::fabs(fill) : 0.0);
      double l = 0;
      for (uint64_t j = 0; j < n; ++j) l += ex[j] ? 0.0 : std::exp(s[j] - smax);
      const bool none = smax == -INFINITY;
      for (uint64_t j = 0; j < n; ++j) P[j] = (ex[j] || none) ? 0.0 : std::exp(s[j] - smax) / l;
      r.lse[b * n + i] = none ? -INFINITY : smax + std::log(l);
      r.alse[b * n + i] = 1 + (none ? 0 : std::fabs(r.lse[b * n + i]));
      for (uint64_t t = 0; t < d; ++t) {
        double a = 0, aa = 0;
        for (uint64_t j = 0; j < n; ++j) {
          a += P[j] * v[o + j * d + t];
          aa += P[j] * std::fabs((double)v[o + j * d + t]);
        }
        r.out[o + i * d + t] = a;
        r.aout[o + i * d + t] = aa;
      }
      if (!bwd) continue;
      double D = 0, aD = 0;
      for (uint64_t t = 0; t < d; ++t) {
        D += (double)dout[o + i * d + t] * r.out[o + i * d + t];
        aD += std::fabs((double)dout[o + i * d + t] * r.out[o + i * d + t]);
      }
      for (uint64_t j = 0; j < n; ++j) {
        double a = 0, aa = 0;
        for (uint64_t t = 0; t < d; ++t) {
          a += (double)dout[o + i * d + t] * v[o + j * d + t];
          aa += std::fabs((double)dout[o + i * d + t] * v[o + j * d + t]);
        }
        dP[j] = a;
        adP[j] = aa + aD;
      }
      for (uint64_t j = 0; j < n; ++j) {
        const double dS = P[j] * (dP[j] - D), adS = P[j] * adP[j];
        for (uint64_t t = 0; t < d; ++t) {
          r.dq[o + i * d + t] += sc * dS * k[o + j * d + t];
          r.adq[o + i * d + t] += std::fabs(sc) * adS * std::fabs((double)k[o + j * d + t]);
          r.dk[o + j * d + t] += sc * dS * q[o + i * d + t];
          r.adk[o + j * d + t] += std::fabs(sc) * adS * std::fabs((double)q[o + i * d + t]);
          r.dv[o + j * d + t] += P[j] * dout[o + i * d + t];
          r.adv[o + j * d + t] += P[j] * std::fabs((double)dout[o + i * d + t]);
        }
      }
    }
  }
  return r;
}

// got against a float64 reference: |got - ref| <= factor * abs elementwise (abs: the reference
// with every term taken by its absolute value), infinities exactly; worst keeps the largest
// error / bound seen. Reports the first three failures; returns how many elements failed.
inline int within_bound(const std::string &what, const std::vector<float> &got,
                        const std::vector<double> &ref, const std::vector<double> &abs,
                        double factor, double &worst) {
  int bad = 0;
  for (size_t e = 0; e < got.size(); ++e) {
    if (std::isinf(ref[e])) {
      if (got[e] != ref[e] && bad++ < 3)
        TH_CHECK_MSG(false, "%s[%zu] = %s, expected %g", what.c_str(), e, th::hex(got[e]).c_str(),
                     ref[e]);
      continue;
    }
    const double err = std::fabs((double)got[e] - ref[e]), bound = factor * abs[e];
    if (bound > 0) worst = std::max(worst, err / bound);
    if (!(err <= bound) && bad++ < 3)
      TH_CHECK_MSG(false, "%s[%zu] = %s, reference %.17g, error %.3g > bound %.3g", what.c_str(),
                   e, th::hex(got[e]).c_str(), ref[e], err, bound);
  }
  return bad;
}

}  // namespace attref
