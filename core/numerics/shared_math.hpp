// Float32 transcendental functions shared bit-for-bit by the host (g++ -ffp-contract=off, never
// -ffast-math) and the CUDA backend (nvcc -fmad=false).
//
// Why this is bitwise reproducible: every function below is a fixed sequence of IEEE binary32
// basic operations (+ - * /, each correctly rounded to nearest-even on both backends), explicit
// fused multiply-adds through tlrt::num::fma (one rounding on both backends), comparisons, and
// bit manipulation through tlrt::num::f2u / u2f. No libm / CUDA math-library function is called,
// there are no lookup tables, every float->int conversion is of a small in-range integer, and
// denormals are honoured (no FTZ on either side). Division goes through detail::div_rn, which is
// __fdiv_rn on the device so it stays IEEE even if a target is built with -prec-div=false.
//
// Polynomial coefficients come from tests/unit/gen_math_coeffs.py (near-minimax fits by Lawson's
// iteratively reweighted least squares in float64, rounded to binary32 one coefficient at a time,
// lowest degree first, with the remaining ones re-fitted). Re-run it to reproduce every literal.
//
// Several functions carry intermediate values as unevaluated float pairs hi + lo (error-free
// transformations: Fast2Sum / TwoSum, and fma(a, b, -a*b) for the exact product error) so that
// the result sees a single final rounding; that is what keeps them near 0.5 ulp.
//
// Accuracy: each function's comment gives its MEASURED maximum error over all 2^32 inputs
// (tests/unit/test_shared_math.cpp with TLRT_MATH_STRIDE=1, g++ 12.2 -O2 -ffp-contract=off)
// against a float64 reference; the k*Max* bounds below are those numbers rounded up. ulp error =
// |f - ref| / ulp(float(ref)), ref the float64 value, ulp of a subnormal or zero = 2^-149. The
// test fails if a function exceeds its bound; tests/parity/math_exhaustive.cu checks that host
// and device agree bit for bit on all 2^32 inputs (it did, on an H200, for every function here).
#pragma once

#include "hd.hpp"

namespace tlrt {
namespace math {

// ---- Accuracy bounds (read by tests/unit/test_shared_math.cpp) ---------------------------------
constexpr double kExpMaxUlp = 0.8;       // measured 0.764 (subnormal results; normal 0.61)
constexpr double kLogMaxUlp = 0.9;       // measured 0.885
constexpr double kLog1pMaxUlp = 0.95;    // measured 0.903
constexpr double kTanhMaxUlp = 0.8;      // measured 0.773
constexpr double kSigmoidMaxUlp = 0.8;   // measured 0.764 (subnormal tail = exp_f)
constexpr double kSoftplusMaxUlp = 0.95; // measured 0.926
constexpr double kGeluMaxUlp = 0.85;     // measured 0.791
// gelu_grad crosses zero at x ~ -0.75179, where no relative bound is possible: inside the window
// [kGeluGradRootLo, kGeluGradRootHi] an input passes if it meets EITHER the ulp bound or the
// absolute bound; everywhere else the ulp bound applies.
constexpr double kGeluGradMaxUlp = 0.8;     // measured 0.785 outside the window
constexpr double kGeluGradMaxAbs = 4.0e-10; // measured 3.86e-10 (window inputs over 0.75 ulp)
constexpr float kGeluGradRootLo = -0.8f;
constexpr float kGeluGradRootHi = -0.7f;
constexpr double kCos2piMaxAbs = 7.5e-8;    // measured 6.75e-8 absolute

namespace detail {

// |x| and sign transfer through the bit pattern (exact, NaN-preserving).
TLRT_HD float abs_bits(float x) { return num::u2f(num::f2u(x) & 0x7fffffffu); }
TLRT_HD float with_sign_of(float mag, float sgn) {
  return num::u2f((num::f2u(mag) & 0x7fffffffu) | (num::f2u(sgn) & 0x80000000u));
}

// 2^n for -126 <= n <= 127 (a normal power of two, built from its bits).
TLRT_HD float pow2i(int n) { return num::u2f(static_cast<uint32_t>(n + 127) << 23); }

// v * 2^n for -252 <= n <= 254 as two power-of-two multiplications: the first is exact whenever
// |v| is within a few binades of 1, so the only rounding is the second one (correct gradual
// underflow into the subnormals, or overflow to inf).
TLRT_HD float scale2(float v, int n) {
  const int n1 = n / 2;
  return (v * pow2i(n1)) * pow2i(n - n1);
}

// Correctly rounded division on both backends.
TLRT_HD float div_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}

// Round to nearest integer, ties to even, exact for every float (NaN/inf pass through).
// |x| < 2^23: adding and subtracting 2^23 leaves the integer part; |x| >= 2^23 is an integer.
TLRT_HD float rint_f(float x) {
  const float a = abs_bits(x);
  if (!(a < 0x1p23f)) return x;
  return with_sign_of((a + 0x1p23f) - 0x1p23f, x);
}

// s + e == a + b exactly. fast_two_sum needs |a| >= |b| (or a == 0); two_sum has no condition.
TLRT_HD void fast_two_sum(float a, float b, float& s, float& e) {
  s = a + b;
  e = b - (s - a);
}
TLRT_HD void two_sum(float a, float b, float& s, float& e) {
  s = a + b;
  const float bb = s - a;
  e = (a - (s - bb)) + (b - bb);
}

// e^x = (eh + el) * 2^k for non-NaN x (x is clamped to [-160, 89.5] first), eh + el in
// [0.70, 1.42], |el| <= ulp(eh)/2, eh + el within ~2^-32 relative of e^(reduced x). Returns k.
//
// Range reduction: j = rint(x * log2(e)) via the 1.5*2^23 shift inside one fma, then
//   rh = x - j*ln2_hi  (one fma, EXACT: |rh| <= 0.35 is a multiple of 2^-25 or of ulp(x)),
//   rl = -j*ln2_lo     (ln2_hi = float(ln2), ln2_lo = float(ln2 - ln2_hi)),
// so x = j*ln2 + rh + rl (to ~2^-45 absolute). Polynomial: e^r = 1 + r + r^2*P(r), P of degree 5,
// near-minimax on |r| <= 0.3473 (fit error 1.0e-10 relative). 1 + rh is formed exactly as
// hi + hi_err (Fast2Sum), e^(rh+rl) = hi + [hi_err + q + rl*e^rh] with q = rh^2*P(rh), and the
// bracket (|.| < 0.07) is finally folded into eh + el by Fast2Sum.
TLRT_HD int exp_parts(float x, float& eh, float& el) {
  x = x > 89.5f ? 89.5f : x;
  x = x < -160.0f ? -160.0f : x;
  const float kLog2e = 0x1.715476p0f;
  const float kShift = 0x1.8p23f;  // 1.5 * 2^23: adding it rounds to an integer
  const float kLn2Hi = 0x1.62e43p-1f;
  const float kLn2Lo = -0x1.05c61p-29f;
  const float j = num::fma(x, kLog2e, kShift) - kShift;  // integer in [-231, 130]
  const float rh = num::fma(-j, kLn2Hi, x);               // exact
  const float rl = -j * kLn2Lo;
  float p = 0x1.9df8dcp-13f;
  p = num::fma(p, rh, 0x1.6d4cfep-10f);
  p = num::fma(p, rh, 0x1.11131p-7f);
  p = num::fma(p, rh, 0x1.5554e8p-5f);
  p = num::fma(p, rh, 0x1.555554p-3f);
  p = num::fma(p, rh, 0.5f);
  const float q = (rh * rh) * p;
  float hi, hi_err;
  fast_two_sum(1.0f, rh, hi, hi_err);
  const float tail = num::fma(rl, hi + q, hi_err + q);
  fast_two_sum(hi, tail, eh, el);
  return static_cast<int>(j);
}

// e^x rounded once for normal results; for subnormal results eh (already rounded to 24 bits) is
// rounded again by the scaling, which is why those can reach ~0.75 ulp (of 2^-149).
TLRT_HD float exp_core(float x) {
  float eh, el;
  const int k = exp_parts(x, eh, el);
  return scale2(eh, k);
}

// e^-a = eh + el (scaled, exact scaling) for 0 <= a <= 80 (so the result stays normal), together
// with 1 + e^-a = d + dl (d = 1 + eh rounded, dl its exact error plus el).
TLRT_HD void exp_neg_1p(float a, float& eh, float& el, float& d, float& dl) {
  const int k = exp_parts(-a, eh, el);
  const float s = pow2i(k);
  eh *= s;
  el *= s;
  fast_two_sum(1.0f, eh, d, dl);  // eh <= 1
  dl += el;
}

// 1/(d + dl) as h + l: correctly rounded quotient plus its fma residual (rem is exact first).
TLRT_HD void recip_pair(float d, float dl, float& h, float& l) {
  h = div_rn(1.0f, d);
  float rem = num::fma(-h, d, 1.0f);
  rem = num::fma(-h, dl, rem);
  l = rem * h;
}
// (eh + el)/(d + dl) as h + l, the same way.
TLRT_HD void ratio_pair(float eh, float el, float d, float dl, float& h, float& l) {
  h = div_rn(eh, d);
  float rem = num::fma(-h, d, eh);
  rem = rem + num::fma(-h, dl, el);
  l = div_rn(rem, d);
}

// log(2^e * (1 + f)) + extra = hi + lo (unrounded sum) for f in [sqrt(1/2)-1, sqrt(2)-1] (f exact),
// ef = e as a float, extra a small correction (|extra| << the result).
//
// log1p(f) = f + f^2*Q(f), Q of degree 9, near-minimax for (log1p(f) - f)/f^2 on [-0.2929, 0.4143]
// (fit error 7.7e-10 relative to log1p(f)). e*ln2 uses a 16-bit ln2_hi so that e*ln2_hi is exact
// for |e| <= 255; e*ln2_hi + f is formed exactly with Fast2Sum (|e*ln2_hi| >= 0.69 > |f| when
// e != 0) and all small terms go into lo (|f^2*Q| <= 0.2 |log1p f|).
TLRT_HD void log_parts(float f, float ef, float extra, float& hi, float& lo) {
  const float kLn2Hi = 0x1.62e4p-1f;     // 16 significant bits
  const float kLn2Lo = 0x1.7f7d1cp-20f;  // ln2 - kLn2Hi
  float q = 0x1.14733ep-4f;
  q = num::fma(q, f, -0x1.de01dcp-4f);
  q = num::fma(q, f, 0x1.e6c00ap-4f);
  q = num::fma(q, f, -0x1.fc28cap-4f);
  q = num::fma(q, f, 0x1.233ba2p-3f);
  q = num::fma(q, f, -0x1.555c44p-3f);
  q = num::fma(q, f, 0x1.99a476p-3f);
  q = num::fma(q, f, -0x1.000006p-2f);
  q = num::fma(q, f, 0x1.555548p-2f);
  q = num::fma(q, f, -0.5f);
  const float t = (f * f) * q;
  float s_err;
  fast_two_sum(ef * kLn2Hi, f, hi, s_err);  // ef * kLn2Hi is exact
  lo = (t + s_err) + num::fma(ef, kLn2Lo, extra);
}

// 2^e * (1 + f) = u for a positive normal u, with 1 + f in (sqrt(1/2), sqrt(2)]; f is exact.
TLRT_HD void split_log_arg(float u, float& f, float& ef) {
  const uint32_t b = num::f2u(u);
  ef = static_cast<float>(static_cast<int>(b >> 23) - 127);
  float m = num::u2f((b & 0x007fffffu) | 0x3f800000u);  // [1, 2)
  if (m > 0x1.6a09e6p0f) {  // > float(sqrt 2): use m/2 in [0.707, 1)
    m *= 0.5f;
    ef += 1.0f;
  }
  f = m - 1.0f;  // exact (Sterbenz)
}

// log1p(xh + xl) = hi + lo for finite xh > -1, |xl| <= ulp(xh)/2.
// [sqrt(1/2)-1, sqrt(2)-1] (bounds float-rounded): log_parts on f = xh, e = 0 directly.
// Elsewhere: u = 1 + xh rounded, c = (1 + xh) - u exact (Fast2Sum in the order that makes it
// exact), u = 2^e (1 + f), and log1p = log(u) + (c + xl)/u.
TLRT_HD void log1p_parts(float xh, float xl, float& hi, float& lo) {
  if (xh >= -0x1.2bec34p-2f && xh <= 0x1.a8279ap-2f) {
    const float extra = xl == 0.0f ? 0.0f : div_rn(xl, 1.0f + xh);
    log_parts(xh, 0.0f, extra, hi, lo);
    return;
  }
  float u, c;
  if (xh <= 1.0f) {
    fast_two_sum(1.0f, xh, u, c);
  } else {
    fast_two_sum(xh, 1.0f, u, c);
  }
  float f, ef;
  split_log_arg(u, f, ef);  // u >= 2^-24 is normal
  log_parts(f, ef, div_rn(c + xl, u), hi, lo);
}

// K*(x + C*x^3) = h + l (double-float, ~2^-44 relative) for |x| <= 16, given x^3 ~ x3 + x3e,
// K = 2*sqrt(2/pi) = Kh + Kl and C = Ch + Cl split constants. Operation order:
//   c3 = Ch*x3;  c3e = fma(Ch, x3, -c3) + (Ch*x3e + Cl*x3);   // C x^3 ~ c3 + c3e
//   (v, ve) = TwoSum(x, c3);  ve += c3e;                     // x + C x^3 ~ v + ve
//   h = Kh*v;    l = fma(Kh, v, -h) + (Kh*ve + Kl*v);         // K (x + C x^3) ~ h + l
TLRT_HD void k_x_plus_cx3(float x, float x3, float x3e, float Ch, float Cl, float& h, float& l) {
  const float Kh = 0x1.988454p0f, Kl = -0x1.857936p-25f;
  const float c3 = Ch * x3;
  const float c3e = num::fma(Ch, x3, -c3) + (Ch * x3e + Cl * x3);
  float v, ve;
  two_sum(x, c3, v, ve);
  ve += c3e;
  h = Kh * v;
  l = num::fma(Kh, v, -h) + (Kh * ve + Kl * v);
}

// x^3 ~ x3 + x3e:  x2 = x*x; x2e = fma(x, x, -x2); x3 = x2*x; x3e = fma(x2, x, -x3) + x2e*x.
TLRT_HD void cube_pair(float x, float& x3, float& x3e) {
  const float x2 = x * x;
  const float x2e = num::fma(x, x, -x2);
  x3 = x2 * x;
  x3e = num::fma(x2, x, -x3) + x2e * x;
}

// s = sigmoid(t) and sc = 1 - s = sigmoid(-t) as pairs, for -30 <= t <= 80:
// E = e^-|t|, 1/(1+E) and E/(1+E) by recip_pair / ratio_pair.
TLRT_HD void sigmoid_pairs(float t, float& sh, float& sl, float& sch, float& scl) {
  float eh, el, d, dl, bh, bl, mh, ml;
  exp_neg_1p(abs_bits(t), eh, el, d, dl);
  recip_pair(d, dl, bh, bl);
  ratio_pair(eh, el, d, dl, mh, ml);
  const bool pos = t >= 0.0f;
  sh = pos ? bh : mh;
  sl = pos ? bl : ml;
  sch = pos ? mh : bh;
  scl = pos ? ml : bl;
}

}  // namespace detail

// e^x. Method: detail::exp_parts (reduction by ln2 with an exact high part, degree-7 polynomial
// 1 + r + r^2*P5(r) on |r| <= ln2/2) rounded once to eh, then detail::scale2 (two power-of-two
// multiplications; the second one rounds, into the subnormals when the result is that small).
// Measured max error (exhaustive): 0.764 ulp, at a subnormal result (x = 0xc2af47cc, -87.64: the
// pair is rounded to 24 bits and then again into the subnormal); 0.61 ulp for normal results.
// Special cases: NaN -> NaN, +inf -> +inf, -inf -> +0, exp(+-0) = 1, x >= 88.7228394
// (0x42b17218) -> +inf, gradual underflow (subnormal results, no flush), x <= -103.972084
// (0xc2cff1b5) -> +0.
TLRT_HD float exp_f(float x) {
  if (num::isnan(x)) return x + x;
  return detail::exp_core(x);
}

// log(x). Method: x = 2^e * (1 + f) with 1 + f in (sqrt(1/2), sqrt(2)] (subnormal x is first
// multiplied by 2^23), then detail::log_parts (degree-11 polynomial f + f^2*Q9(f), exact
// e*ln2_hi + f, one final rounding). Measured max error (exhaustive): 0.885 ulp (x = 0x3f332b05,
// just above sqrt(1/2), where f ~ 0.41 makes the f^2*Q term largest).
// Special cases: NaN -> NaN, x < 0 (incl. -inf) -> NaN, +-0 -> -inf, +inf -> +inf, log(1) = +0,
// subnormal x exact-normalised (log(2^-149) = -103.278931).
TLRT_HD float log_f(float x) {
  if (!(x > 0.0f)) {
    if (x == 0.0f) return num::u2f(0xff800000u);  // -inf
    return num::isnan(x) ? x + x : num::u2f(0x7fc00000u);
  }
  if (x == num::u2f(0x7f800000u)) return x;
  float bias = 0.0f;
  if (x < 0x1p-126f) {  // subnormal: normalise exactly
    x *= 0x1p23f;
    bias = -23.0f;
  }
  float f, ef, hi, lo;
  detail::split_log_arg(x, f, ef);
  detail::log_parts(f, ef + bias, 0.0f, hi, lo);
  return hi + lo;
}

// log(1 + x). Method: detail::log1p_parts with xl = 0: for x in [sqrt(1/2)-1, sqrt(2)-1] the
// log_parts polynomial on f = x directly (tiny x returns x exactly); otherwise u = 1 + x with its
// exact rounding error c, log(u) + c/u. Measured max error (exhaustive): 0.903 ulp
// (x = 0xbe9726e9, -0.295, just below the direct-polynomial range).
// Special cases: NaN -> NaN, +-0 -> +-0, -1 -> -inf, x < -1 (incl. -inf) -> NaN, +inf -> +inf.
TLRT_HD float log1p_f(float x) {
  if (num::isnan(x)) return x + x;
  if (x == 0.0f) return x;  // keep the sign of zero
  if (x == num::u2f(0x7f800000u)) return x;
  if (x == -1.0f) return num::u2f(0xff800000u);
  if (x < -1.0f) return num::u2f(0x7fc00000u);
  float hi, lo;
  detail::log1p_parts(x, 0.0f, hi, lo);
  return hi + lo;
}

// tanh(x). Method: a = |x|; for a < 0.625 the odd polynomial a + a^3*T4(a^2) (degree 11,
// near-minimax, fit error 4.5e-9 relative), no cancellation near 0. For 0.625 <= a <= 9.1:
// tanh(a) = 1 - 2/(E + 1), E = e^(2a) (2a exact) as the pair eh + el from detail::exp_parts,
// E + 1 = d + dl exactly-ish, w + wl = 2/(d + dl) (rounded quotient plus fma residual), and
// 1 - w = h + hl exactly (Fast2Sum) before the single final rounding h + (hl - wl). For a > 9.1
// the result is 1 (tanh(9.02) already rounds to 1). The sign of x is copied onto the result.
// Measured max error (exhaustive): 0.773 ulp (x = 0x3f0b16c9, 0.543, polynomial branch).
// Special cases: NaN -> NaN, +-inf -> +-1, +-0 -> +-0, |x| >= 9.0109 -> +-1 exactly, finite x is
// never NaN.
TLRT_HD float tanh_f(float x) {
  if (num::isnan(x)) return x + x;
  const float a = detail::abs_bits(x);
  float r;
  if (a < 0.625f) {
    const float a2 = a * a;
    float p = -0x1.750ce2p-8f;
    p = num::fma(p, a2, 0x1.51f8cep-6f);
    p = num::fma(p, a2, -0x1.b835a4p-5f);
    p = num::fma(p, a2, 0x1.1106f6p-3f);
    p = num::fma(p, a2, -0x1.555532p-2f);
    r = num::fma(a * a2, p, a);
  } else if (a > 9.1f) {
    r = 1.0f;
  } else {
    float eh, el, d, dl;
    const int k = detail::exp_parts(a + a, eh, el);  // e^(2a) >= 3.49, k <= 27
    const float s = detail::pow2i(k);
    eh *= s;
    el *= s;
    detail::fast_two_sum(eh, 1.0f, d, dl);
    dl += el;
    const float w = detail::div_rn(2.0f, d);
    float rem = num::fma(-w, d, 2.0f);
    rem = num::fma(-w, dl, rem);
    const float wl = detail::div_rn(rem, d);  // 2/(E+1) ~ w + wl
    float h, hl;
    detail::fast_two_sum(1.0f, -w, h, hl);    // 1 - w == h + hl
    r = h + (hl - wl);
  }
  return detail::with_sign_of(r, x);
}

// sigmoid(x) = 1/(1 + e^-x). Method: E = e^-|x| as a pair (never overflows), 1 + E = d + dl, then
// for x >= 0: 1/(1+E), for -30 <= x < 0: E/(1+E), each as quotient + fma residual and rounded
// once; for x < -30: e^x rounded once (relative difference from e^x/(1+e^x) < 2^-43), which keeps
// the subnormal tail as accurate as exp_f. Measured max error (exhaustive): 0.764 ulp (x =
// 0xc2af47cc, subnormal result, same as exp_f); 0.61 ulp where the result is normal.
// Special cases: NaN -> NaN, +inf -> 1, -inf -> +0, sigmoid(+-0) = 0.5, x >= 17.3287 -> 1,
// x <= -103.972084 -> +0.
TLRT_HD float sigmoid_f(float x) {
  if (num::isnan(x)) return x + x;
  if (x < -30.0f) return detail::exp_core(x);
  const float a = detail::abs_bits(x);
  float eh, el, d, dl, h, l;
  detail::exp_neg_1p(a < 80.0f ? a : 80.0f, eh, el, d, dl);
  if (x >= 0.0f) {
    detail::recip_pair(d, dl, h, l);
  } else {
    detail::ratio_pair(eh, el, d, dl, h, l);
  }
  return h + l;
}

// softplus(x) = log(1 + e^x) = max(x, 0) + log1p(e^-|x|). Method: E = e^-|x| as a pair
// (detail::exp_neg_1p), L = log1p(E) as a pair (detail::log1p_parts), and for x > 0 the sum
// x + L by TwoSum, so the result is rounded once. |x| > 80: x for x > 0, e^x (exp_f, subnormal
// accurate) for x < 0. Measured max error (exhaustive): 0.926 ulp (x = 0xbf658d89, -0.897).
// Special cases: NaN -> NaN, +inf -> +inf, -inf -> +0, softplus(+-0) = ln 2 (0x3f317218),
// softplus(x) = x for x >= 14.556, gradual underflow for x < -87.34, +0 for x <= -103.972084.
TLRT_HD float softplus_f(float x) {
  if (num::isnan(x)) return x + x;
  const float a = detail::abs_bits(x);
  if (a > 80.0f) return x > 0.0f ? x : detail::exp_core(x);
  float eh, el, d, dl, lh, ll;
  detail::exp_neg_1p(a, eh, el, d, dl);
  detail::log1p_parts(eh, el, lh, ll);
  if (!(x > 0.0f)) return lh + ll;
  float h, e;
  detail::two_sum(x, lh, h, e);
  return h + (e + ll);
}

// GELU, tanh approximation: 0.5*x*(1 + tanh(z)), z = sqrt(2/pi)*(x + 0.044715*x^3), evaluated in
// the cancellation-free form x*sigmoid(2z). Exact float operation order:
//   x NaN -> NaN;  x == +-0 -> x;  x > 9 -> x (1 - sigmoid(2z) < 2^-95);  x < -12 -> -0
//   (x3, x3e) = detail::cube_pair(x)                         // x^3 ~ x3 + x3e
//   (th, tl)  = detail::k_x_plus_cx3(x, x3, x3e, C)          // 2z ~ th + tl, ~2^-44 relative
//   if th >= -30:
//     (sh, sl, sch, scl) = detail::sigmoid_pairs(th)         // sigmoid(+-th) as pairs
//     return fma(x, sh, x*(sl + (sh*sch)*tl))                // x*sigmoid(th + tl), one rounding
//   else (1 + e^th rounds to 1 with room to spare: sigmoid(2z) = e^(2z) to 2^-43):
//     k = detail::exp_parts(th, eh, el)                      // e^th = (eh + el) 2^k
//     return scale2(fma(x, eh, x*fma(eh, tl, el)), k)        // x e^(th+tl), one rounding
// Measured max error (exhaustive) against the float64 value of 0.5*x*(1 + tanh(z)) (computed in
// float64 as x/(1 + exp(-2z)), the same number without the cancellation): 0.791 ulp
// (x = 0xc121a35b, -10.10, subnormal result); 0.6 ulp where the result is normal.
// Special cases: NaN -> NaN, +-0 -> +-0, +inf -> +inf, -inf -> -0, gelu(x) = x for x >= 4.9941,
// -0 for x <= -10.7709 (results below 2^-150 in magnitude).
TLRT_HD float gelu_f(float x) {
  if (num::isnan(x)) return x + x;
  if (x == 0.0f) return x;
  if (x > 9.0f) return x;
  if (x < -12.0f) return -0.0f;
  float x3, x3e, th, tl;
  detail::cube_pair(x, x3, x3e);
  detail::k_x_plus_cx3(x, x3, x3e, 0x1.6e4e26p-5f, 0x1.a9003ep-30f, th, tl);
  if (th >= -30.0f) {
    float sh, sl, sch, scl;
    detail::sigmoid_pairs(th, sh, sl, sch, scl);
    return num::fma(x, sh, x * (sl + (sh * sch) * tl));
  }
  float eh, el;
  const int k = detail::exp_parts(th, eh, el);
  return detail::scale2(num::fma(x, eh, x * num::fma(eh, tl, el)), k);
}

// d/dx gelu_f: s + x*s*(1-s)*2*sqrt(2/pi)*(1 + 3*0.044715*x^2) = s*(1 + w), s = sigmoid(2z),
// w = m*(1-s), m = x*2*sqrt(2/pi)*(1 + 3*0.044715*x^2) = K*(x + 3C*x^3).
// Exact float operation order:
//   x NaN -> NaN;  x > 9 -> 1;  x < -12 -> -0 (true value ~ -e^(2z)*0.21*|x|^3 rounds to -0)
//   (x3, x3e) = cube_pair(x);  (th, tl) = k_x_plus_cx3(x, x3, x3e, C);  (mh, ml) = k_x_plus_cx3(x, x3, x3e, 3C)
//   if th >= -30:
//     (sh, sl, sch, scl) = sigmoid_pairs(th);  ds = (sh*sch)*tl;  sl += ds;  scl -= ds
//     wh = mh*sch;  wl = fma(mh, sch, -wh) + (mh*scl + ml*sch)             // w ~ wh + wl
//     (oh, ol) = TwoSum(1, wh);  ol += wl                                   // 1 + w ~ oh + ol
//     return fma(sh, oh, sh*ol + sl*oh)                                     // s*(1 + w)
//   else (s = e^(th+tl), 1 - s = 1 to 2^-43):
//     k = exp_parts(th, eh, el);  el = fma(eh, tl, el)
//     (oh, ol) = TwoSum(1, mh);  ol += ml
//     return scale2(fma(eh, oh, eh*ol + el*oh), k)
// Measured max error (exhaustive, vs float64 s + x*s*(1-s)*K*(1 + 3C x^2)): 0.785 ulp for all x
// outside [-0.8, -0.7] (x = 0xc123f9ce, -10.25, subnormal result; 0.714 ulp where |error| >
// 1e-9). Inside that window, around the zero crossing x ~ -0.75179, the relative error grows as
// the result goes to 0 (up to 8.8e4 ulp of a ~5e-9 result) but the absolute error of every input
// there above 0.75 ulp is <= 3.86e-10 (<= 1.4e-10 above 1 ulp). Max absolute error anywhere
// 6.0e-8 (a 0.5 ulp rounding of a value ~1.08).
// Special cases: NaN -> NaN, gelu_grad(+-0) = 0.5, +inf -> 1, -inf -> -0, 1 for x >= 5.4679,
// -0 for x <= -10.8945.
TLRT_HD float gelu_grad_f(float x) {
  if (num::isnan(x)) return x + x;
  if (x > 9.0f) return 1.0f;
  if (x < -12.0f) return -0.0f;
  float x3, x3e, th, tl, mh, ml, oh, ol;
  detail::cube_pair(x, x3, x3e);
  detail::k_x_plus_cx3(x, x3, x3e, 0x1.6e4e26p-5f, 0x1.a9003ep-30f, th, tl);
  detail::k_x_plus_cx3(x, x3, x3e, 0x1.12ba9ep-3f, -0x1.c13fdp-28f, mh, ml);
  if (th >= -30.0f) {
    float sh, sl, sch, scl;
    detail::sigmoid_pairs(th, sh, sl, sch, scl);
    const float ds = (sh * sch) * tl;
    sl += ds;
    scl -= ds;
    const float wh = mh * sch;
    const float wl = num::fma(mh, sch, -wh) + (mh * scl + ml * sch);
    detail::two_sum(1.0f, wh, oh, ol);
    ol += wl;
    return num::fma(sh, oh, sh * ol + sl * oh);
  }
  float eh, el;
  const int k = detail::exp_parts(th, eh, el);
  el = num::fma(eh, tl, el);
  detail::two_sum(1.0f, mh, oh, ol);
  ol += ml;
  return detail::scale2(num::fma(eh, oh, eh * ol + el * oh), k);
}

// cos(2*pi*u). Meant for u in [0, 1) (Box-Muller, u a multiple of 2^-24) but defined for every
// float. Method, all reductions exact: f = u - rint(u) in [-1/2, 1/2]; w = 4f; q = rint(w) in
// {-2..2}; r = w - q in [-1/2, 1/2], so 2*pi*u = 2*pi*n + (pi/2)*(q + r). Then
// sin(pi/2 r) = r*S3(r^2) (degree 7) and cos(pi/2 r) = 1 + r^2*C3(r^2) (degree 8), near-minimax
// absolute-error fits on |r| <= 1/2 (fit errors 5.0e-9 and 4.1e-10), and q mod 4 selects
// cos, -sin, -cos, sin. Measured max ABSOLUTE error: 6.75e-8 (exhaustive over all 2^32 floats
// and over u = i*2^-24, i < 2^24; x = 0x3e0036e6, where |cos| ~ 0.7 and 0.5 ulp alone is 3e-8).
// Special cases: NaN / +-inf -> NaN; |u| >= 2^23 (integers) -> 1; cos2pi_f(0.25) = -0.
TLRT_HD float cos2pi_f(float u) {
  if (!(detail::abs_bits(u) < num::u2f(0x7f800000u))) return u - u;  // NaN for NaN and +-inf
  const float f = u - detail::rint_f(u);
  const float w = 4.0f * f;
  const float q = detail::rint_f(w);
  const float r = w - q;
  const float r2 = r * r;
  float sp = -0x1.2a7638p-8f;
  sp = num::fma(sp, r2, 0x1.46496cp-4f);
  sp = num::fma(sp, r2, -0x1.4abb68p-1f);
  sp = num::fma(sp, r2, 0x1.921fb4p0f);
  const float sinv = r * sp;
  float cp = 0x1.d47d6p-11f;
  cp = num::fma(cp, r2, -0x1.55b146p-6f);
  cp = num::fma(cp, r2, 0x1.03c1aep-2f);
  cp = num::fma(cp, r2, -0x1.3bd3ccp0f);
  const float cosv = num::fma(cp, r2, 1.0f);
  switch (static_cast<int>(q) & 3) {
    case 0: return cosv;
    case 1: return -sinv;
    case 2: return -cosv;
    default: return sinv;
  }
}

}  // namespace math
}  // namespace tlrt
