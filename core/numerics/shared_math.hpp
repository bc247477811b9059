// Float32 transcendental functions shared bit-for-bit by the host (g++ -ffp-contract=off, never
// -ffast-math) and the CUDA backend (nvcc -fmad=false).
//
// Why this is bitwise reproducible: every function below is a fixed sequence of IEEE binary32
// basic operations (+ - * and one int -> float conversion, each correctly rounded to
// nearest-even on both backends), explicit fused multiply-adds through tlrt::num::fma (one
// rounding on both backends), comparisons and selects, and integer / bit manipulation through
// tlrt::num::f2u / u2f. There is no division (quotients are a polynomial reciprocal seed, one
// Newton step and one remainder correction, all in explicit fma), no libm / CUDA math-library
// call, no lookup table, and denormals are honoured (no FTZ on either side). Nor does the result
// depend on the compiler's choices: g++ -O0, -O2 and -O3 -fno-trapping-math, the x86-64-v3 / v4
// vectorised loops of the CPU backend and clang give the same bits (compared over 16.7 M inputs
// per function), and tests/parity/math_exhaustive.cu compares host and device on all 2^32.
//
// Cost: every function is branch-free straight-line code (the main path is computed on a clamped
// argument; special results are selected at the end), so the CPU loops vectorise and no GPU warp
// diverges. SASS instructions per element on sm_90 (tests/parity/math_cost.cu): exp 21, log 34,
// log1p 44, sigmoid 39, tanh 48, softplus 56, gelu 61, gelu_grad 91, silu 53, silu_grad 68,
// cos2pi 25, sin2pi 26, sincos2pi 32 for both (the H200 bandwidth roof leaves ~60 per element for
// a unary op, ~90 for a backward op).
//
// Accuracy: ulp error = |f - ref| / ulp(float(ref)) against a float64 reference, ulp of a
// subnormal or zero = 2^-149 (tests/unit/test_shared_math.cpp; TLRT_MATH_STRIDE=1 runs all
// 2^32 inputs). Each function's comment gives its measured maximum over all 2^32 inputs; the
// k*Max* bounds below are those numbers rounded up (all within 1.25 ulp). The methods carry float
// pairs hi + lo (exact residuals by fma or Fast2Sum) only where a single rounding would cost a
// sizeable fraction of an ulp: e^r as a pair where it feeds 1 + E or a quotient, the sums of
// log, 1 + w in gelu_grad.
//
// Every literal comes from tests/unit/gen_math_coeffs.py (near-minimax polynomial fits rounded
// to binary32 coefficient by coefficient, and hi + lo splits of constants); re-run it to
// reproduce them.
#pragma once

#include "hd.hpp"

// Every function here is forced inline on the host too, so that the CPU backend's loops
// (stub/elementwise.cpp) get straight-line code they can vectorise (GCC would otherwise keep the
// larger ones out of line, compiled once for the baseline ISA). TLRT_HD already does it on the
// device.
#if defined(__CUDACC__) || !defined(__GNUC__)
#define TLRT_MATH_HD TLRT_HD
#else
#define TLRT_MATH_HD inline __attribute__((always_inline))
#endif

namespace tlrt {
namespace math {

// ---- Accuracy bounds (read by tests/unit/test_shared_math.cpp) ---------------------------------
constexpr double kExpMaxUlp = 0.9;           // measured 0.891 (exhaustive)
constexpr double kLogMaxUlp = 0.9;           // measured 0.882
constexpr double kLog1pMaxUlp = 1.0;         // measured 0.976
constexpr double kTanhMaxUlp = 0.8;          // measured 0.778
constexpr double kSigmoidMaxUlp = 1.0;       // measured 0.977
constexpr double kSoftplusMaxUlp = 1.25;     // measured 1.244
constexpr double kGeluMaxUlp = 1.05;         // measured 1.004
// gelu_grad crosses zero at x ~ -0.75179, where no relative bound is possible: inside the window
// [kGeluGradRootLo, kGeluGradRootHi] an input passes if it meets EITHER the ulp bound or the
// absolute bound; everywhere else the ulp bound applies.
constexpr double kGeluGradMaxUlp = 1.25;     // measured 1.233 outside the window
constexpr double kGeluGradMaxAbs = 9.0e-10;  // measured 8.53e-10 (window inputs over 1.25 ulp)
constexpr float kGeluGradRootLo = -0.8f;
constexpr float kGeluGradRootHi = -0.7f;
constexpr double kSiluMaxUlp = 0.9;
// silu_grad crosses zero at x ~ -1.27846: the same two-part bound as gelu_grad's.
constexpr double kSiluGradMaxUlp = 0.9;      // outside the window
constexpr double kSiluGradMaxAbs = 5.0e-10;  // window inputs over kSiluGradMaxUlp
constexpr float kSiluGradRootLo = -1.35f;
constexpr float kSiluGradRootHi = -1.2f;
constexpr double kCos2piMaxAbs = 9.0e-8;     // measured 8.41e-8 absolute
constexpr double kSin2piMaxAbs = 9.0e-8;     // measured 8.38e-8 absolute

namespace detail {

// |x| and sign transfer through the bit pattern (exact, NaN-preserving).
TLRT_MATH_HD float abs_bits(float x) { return num::u2f(num::f2u(x) & 0x7fffffffu); }
TLRT_MATH_HD float with_sign_of(float mag, float sgn) {
  return num::u2f((num::f2u(mag) & 0x7fffffffu) | (num::f2u(sgn) & 0x80000000u));
}

// 2^n for -126 <= n <= 127 (a normal power of two, built from its bits).
TLRT_MATH_HD float pow2i(int n) { return num::u2f(static_cast<uint32_t>(n + 127) << 23); }

// ---- e^x ---------------------------------------------------------------------------------------
// Reduction: x = j*ln2 + r, j = rint(x*log2(e)) by the 1.5*2^23 shift inside one fma; the shifted
// value t = 1.5*2^23 + j also carries j in its low mantissa bits, so 2^(j+c) is built from the
// bits of t with integer operations only (exp_scale). ln2 = kLn2Hi + kLn2Lo with a 16-bit kLn2Hi:
// j*kLn2Hi is exact for |j| < 256 and x - j*kLn2Hi is exact (Sterbenz), so the only rounding of
// the reduction is that of adding the tiny -j*kLn2Lo. |r| <= ln2/2 (+ 1e-5 from rounding j).
constexpr float kLog2e = 0x1.715476p0f;
constexpr float kShift = 0x1.8p23f;        // 1.5 * 2^23: adding it rounds to an integer
constexpr float kLn2Hi = 0x1.62e4p-1f;     // 16 significant bits
constexpr float kLn2Lo = 0x1.7f7d1cp-20f;  // ln2 - kLn2Hi

// For |x| <= 170 (|j| < 256): r = x - j*ln2 (rounded once); returns the bits of t = 1.5*2^23 + j.
TLRT_MATH_HD uint32_t exp_reduce(float x, float& r) {
  const float t = num::fma(x, kLog2e, kShift);
  const float j = t - kShift;
  r = num::fma(-j, kLn2Lo, num::fma(-j, kLn2Hi, x));
  return num::f2u(t);
}
// The same for an argument given as a pair x + xl (|xl| <= ulp(x)): r = (x - j*ln2) + xl.
TLRT_MATH_HD uint32_t exp_reduce2(float x, float xl, float& r) {
  const float t = num::fma(x, kLog2e, kShift);
  const float j = t - kShift;
  r = num::fma(-j, kLn2Hi, x) + num::fma(-j, kLn2Lo, xl);
  return num::f2u(t);
}
// 2^(j + c) from tb = bits of t = 0x4b400000 + j, for -126 <= j + c <= 127. (0x4b400000 << 23 is
// 0 mod 2^32, so tb << 23 == j << 23.)
TLRT_MATH_HD float exp_scale(uint32_t tb, int c) {
  return num::u2f((tb << 23) + (static_cast<uint32_t>(c + 127) << 23));
}
// e^r = 1 + r*q(r), q(r) = 1 + r*p(r), p(r) = c2 + c3 r + ... + c6 r^4: a degree-6 near-minimax
// fit on |r| <= ln2/2 (fit error 3.2e-9 relative).
TLRT_MATH_HD float exp_p(float r) {
  float p = 0x1.6a417p-10f;
  p = num::fma(p, r, 0x1.1239cap-7f);
  p = num::fma(p, r, 0x1.5558bcp-5f);
  p = num::fma(p, r, 0x1.555492p-3f);
  return num::fma(p, r, 0x1.fffffcp-2f);
}
TLRT_MATH_HD float exp_q(float r) { return num::fma(exp_p(r), r, 1.0f); }
// e^r ~ eh + el: eh = fma(q, r, 1) rounded, el its exact residual (1 - eh is exact, Sterbenz).
// The pair is within ~0.6 * 2^-24 relative of e^(exact r) (what remains is the rounding of q and
// of r), against up to ~1.1 * 2^-24 for eh alone.
TLRT_MATH_HD void exp_pair(float r, float& eh, float& el) {
  const float q = exp_q(r);
  eh = num::fma(q, r, 1.0f);
  el = num::fma(q, r, 1.0f - eh);
}
// The same with q's rounding error ql (exact residual, 1 - q is exact) added in: the pair is then
// within ~0.25 * 2^-24 relative of e^(exact r) (only r's own rounding remains).
TLRT_MATH_HD void exp_pair_fine(float r, float& eh, float& el) {
  const float p = exp_p(r);
  const float q = num::fma(p, r, 1.0f);
  const float ql = num::fma(p, r, 1.0f - q);
  eh = num::fma(q, r, 1.0f);
  el = num::fma(ql, r, num::fma(q, r, 1.0f - eh));
}

// E = e^-|x| as the scaled pair es + esl (es rounded once, into the subnormals too), and
// 1 + E = dh + dl (dh = 1 + es rounded, dl its exact residual plus esl). |x| is clamped to 104
// (e^-104 rounds to 0), which also makes +-inf give E = 0. sigmoid_f and softplus_f both start
// with exactly this sequence, so a kernel that needs both (safe_log_bwd) computes it once.
TLRT_MATH_HD void one_plus_exp_neg_abs(float x, float& es, float& esl, float& dh, float& dl) {
  const float a = abs_bits(x);
  float r;
  const uint32_t tb = exp_reduce(-(a > 104.0f ? 104.0f : a), r);  // j in [-151, 0]
  float eh, el;
  exp_pair(r, eh, el);
  const float s = exp_scale(tb, 64);  // 2^(j + 64) is normal; times 2^-64 rounds once
  es = (eh * s) * 0x1p-64f;
  esl = (el * s) * 0x1p-64f;
  dh = 1.0f + es;
  dl = ((1.0f - dh) + es) + esl;
}

// ---- Division by a d in [1, 2] ------------------------------------------------------------------
// 1/d: a degree-3 near-minimax seed (relative error 1.7e-3) and one Newton step: error 3.1e-6.
TLRT_MATH_HD float recip12(float d) {
  float r0 = -0x1.c65286p-3f;
  r0 = num::fma(r0, d, 0x1.54bde4p0f);
  r0 = num::fma(r0, d, -0x1.783c56p1f);
  r0 = num::fma(r0, d, 0x1.6a09c2p1f);
  return num::fma(r0, num::fma(-d, r0, 1.0f), r0);
}
// (nh + nl) / (dh + dl) for dh in [1, 2], |dl| <= ulp(dh), |nl| <= ulp(nh): q = nh * (1/dh),
// then one correction by the remainder (nh - q*dh exact by fma, the low parts added to it):
// q + rem * (1/dh) is within ~1e-11 relative of the pair quotient before its final rounding, so
// the result is the correctly rounded quotient except within ~1e-4 ulp of a rounding boundary.
TLRT_MATH_HD float div12(float nh, float nl, float dh, float dl) {
  const float r = recip12(dh);
  const float q = nh * r;
  const float rem = num::fma(-q, dh, nh) + num::fma(-q, dl, nl);
  return num::fma(rem, r, q);
}

// ---- log --------------------------------------------------------------------------------------
// log1p(f) = f + f^2 * Q(f), Q of degree 8, near-minimax on |f| <= 1/3 (fit error 4.7e-9 relative
// to log1p(f)).
TLRT_MATH_HD float log_q(float f) {
  float q = -0x1.07e26ep-3f;
  q = num::fma(q, f, 0x1.1e6f88p-3f);
  q = num::fma(q, f, -0x1.f325acp-4f);
  q = num::fma(q, f, 0x1.1ed50ap-3f);
  q = num::fma(q, f, -0x1.559cd4p-3f);
  q = num::fma(q, f, 0x1.99d052p-3f);
  q = num::fma(q, f, -0x1.fffef8p-3f);
  q = num::fma(q, f, 0x1.555506p-2f);
  return num::fma(q, f, -0.5f);
}

// log(u) + ebias*ln2 for a positive normal finite u. Reduction (integer only): subtracting the
// bits of float(2/3) = 0x3f2aaaab splits u = 2^e * m with m in [2/3, 4/3), so f = m - 1 is exact
// (Sterbenz) and |f| <= 1/3. log(u) = e*ln2 + f + f^2*Q(f): a = ef*kLn2Hi is exact (|ef| < 256),
// a + f = hi + hl exactly (Fast2Sum: |a| >= 0.69 > |f|, or a = 0), and every smaller term goes
// into lo, so the only rounding of the result's size is the final one.
TLRT_MATH_HD float log_core(float u, float ebias) {
  const uint32_t iu = num::f2u(u);
  const uint32_t t = iu - 0x3f2aaaabu;
  const float f = num::u2f(iu - (t & 0xff800000u)) - 1.0f;
  const float ef = static_cast<float>(static_cast<int>(t) >> 23) + ebias;
  const float q = log_q(f);
  const float a = ef * kLn2Hi;
  const float hi = a + f;
  const float hl = f - (hi - a);
  const float lo = num::fma(f * f, q, num::fma(ef, kLn2Lo, hl));
  return hi + lo;
}
// log(uh + ul) for a positive normal finite uh and |ul| <= ulp(uh) (its rounding error, say):
// log_core's method with log1p(f + fl) ~ log1p(f) + fl*(1 - f + f^2), fl = ul/2^e (exact
// scaling; 2^-e clamped to 2^-126 when big_e, for uh >= 2^126 where fl no longer matters).
TLRT_MATH_HD float log_core_pair(float uh, float ul, bool big_e) {
  const uint32_t iu = num::f2u(uh);
  const uint32_t t = iu - 0x3f2aaaabu;
  const uint32_t eb = t & 0xff800000u;  // e << 23
  const float f = num::u2f(iu - eb) - 1.0f;
  const float ef = static_cast<float>(static_cast<int>(t) >> 23);
  const float f2 = f * f;
  const uint32_t ebc = (big_e && static_cast<int>(eb) > (126 << 23)) ? (126u << 23) : eb;
  const float fl = (ul * num::u2f(0x3f800000u - ebc)) * ((1.0f - f) + f2);
  const float q = log_q(f);
  const float a = ef * kLn2Hi;
  const float hi = a + f;
  const float hl = f - (hi - a);
  const float lo = num::fma(f2, q, fl) + num::fma(ef, kLn2Lo, hl);
  return hi + lo;
}

// ---- gelu's argument ---------------------------------------------------------------------------
// 2z = K*(x + C*x^3) = x*(K + KC*x^2) (K = 2*sqrt(2/pi), C = 0.044715) as th + tl, ~2^-44 relative:
// x^2 = x2 + x2l exactly (fma residual); g = K + KC*x^2 = gh + gl, gh rounded by one fma and its
// residual exact because kKHi (19 bits, a multiple of 2^-18) minus gh is exact (|gh| < 32);
// c2l = KC*x^2 - KCh*x2 (the low-order products); th = x*gh, tl = its fma residual + x*gl.
// gelu_grad's m = x*(K + 3KC*x^2) reuses x2, x2l and c2l (3*kKCHi is exact).
constexpr float kKHi = 0x1.98844p0f, kKLo = 0x1.33d436p-20f;       // 2*sqrt(2/pi)
constexpr float kKCHi = 0x1.2444fp-4f, kKCLo = 0x1.526c5ap-27f;    // 2*sqrt(2/pi)*0.044715
constexpr float kKC3Hi = 0x1.b66768p-3f;                           // 3 * kKCHi
TLRT_MATH_HD void gelu_arg(float x, float& x2, float& c2l, float& th, float& tl) {
  x2 = x * x;
  const float x2l = num::fma(x, x, -x2);
  c2l = num::fma(kKCHi, x2l, kKCLo * x2);
  const float gh = num::fma(kKCHi, x2, kKHi);
  const float gl = num::fma(kKCHi, x2, kKHi - gh) + (c2l + kKLo);
  th = x * gh;
  tl = num::fma(x, gl, num::fma(x, gh, -th));
}

// ---- sin and cos of 2*pi*a ---------------------------------------------------------------------
// The body of sincos2pi_f (which see) for 0 <= a <= 2^23 (+0, not -0): for such a,
// sincos2pi_f(a) gives exactly these bits (its abs, clamp, sign and inf selects change nothing),
// so callers whose argument is known to be in range (the RNG's u2 in [0, 1)) call this directly.
TLRT_MATH_HD void sincos2pi_nonneg(float a, float& s, float& c) {
  const float f = a - ((a + kShift) - kShift);
  const float w = 4.0f * f;
  const float tq = w + kShift;
  const float r = w - (tq - kShift);
  const uint32_t qb = num::f2u(tq);  // 0x4b400000 + q: the low bits are q mod 4
  const float r2 = r * r;
  float sp = -0x1.2a7638p-8f;
  sp = num::fma(sp, r2, 0x1.46496cp-4f);
  sp = num::fma(sp, r2, -0x1.4abb68p-1f);
  sp = num::fma(sp, r2, 0x1.921fb4p0f);
  float cp = -0x1.4eb112p-6f;
  cp = num::fma(cp, r2, 0x1.03b18ep-2f);
  cp = num::fma(cp, r2, -0x1.3bd3a2p0f);
  const float sv = r * sp;                  // sin(pi/2 r)
  const float cv = num::fma(cp, r2, 1.0f);  // cos(pi/2 r)
  const bool odd = (qb & 1u) != 0;
  c = num::u2f(num::f2u(odd ? sv : cv) ^ (((qb + 1u) & 2u) << 30));  // q = 1, 2 mod 4: negate
  s = num::u2f(num::f2u(odd ? cv : sv) ^ ((qb & 2u) << 30));         // q = 2, 3 mod 4: negate
}

}  // namespace detail

// e^x. Method: detail::exp_reduce (x = j*ln2 + r, |r| <= ln2/2), e^r = fma(q(r), r, 1) with the
// degree-6 polynomial of detail::exp_q, then times 2^j as two power-of-two multiplications
// (2^(j>>1) exact, 2^(j - (j>>1)) rounding once, into the subnormals or to inf). x is clamped to
// [-104, 89] first (both ends already round to 0 / overflow), which also handles +-inf.
// Measured max error (exhaustive): 0.891 ulp (x = 0xc0bb2813, -5.849); 0.858 ulp where the
// result is subnormal.
// Special cases: NaN -> NaN, +inf -> +inf, -inf -> +0, exp(+-0) = 1, x >= 88.7228394
// (0x42b17218) -> +inf, gradual underflow (subnormal results, no flush), x <= -103.972084
// (0xc2cff1b5) -> +0.
TLRT_MATH_HD float exp_f(float x) {
  float xc = x > 89.0f ? 89.0f : x;  // NaN stays NaN
  xc = xc < -104.0f ? -104.0f : xc;
  float r;
  const uint32_t tb = detail::exp_reduce(xc, r);
  const float p = num::fma(detail::exp_q(r), r, 1.0f);
  const int j = static_cast<int>(tb - 0x4b400000u);  // in [-151, 129]
  const int j1 = j >> 1;
  return (p * detail::pow2i(j1)) * detail::pow2i(j - j1);
}

// log(x). Method: subnormal x is first scaled by 2^23 (exactly; the exponent is corrected by
// -23), then detail::log_core (integer split x = 2^e * m, m in [2/3, 4/3), f = m - 1 exact,
// e*ln2 + f + f^2*Q8(f) with e*ln2_hi + f exact, one final rounding). Special results are
// selected at the end.
// Measured max error (exhaustive): 0.882 ulp (x = 0x3fa332f9, 1.275).
// Special cases: NaN -> NaN, x < 0 (incl. -inf) -> NaN, +-0 -> -inf, +inf -> +inf, log(1) = +0,
// subnormal x exact-normalised (log(2^-149) = -103.278931).
TLRT_MATH_HD float log_f(float x) {
  const bool sub = x < 0x1p-126f;
  float y = detail::log_core(sub ? x * 0x1p23f : x, sub ? -23.0f : 0.0f);
  y = x == num::u2f(0x7f800000u) ? x : y;
  y = x == 0.0f ? num::u2f(0xff800000u) : y;
  return x >= 0.0f ? y : num::u2f(0x7fc00000u);
}

// log(1 + x). Method: u = 1 + x as the exact pair uh + ul (Fast2Sum with the larger of 1 and x
// first), then detail::log_core_pair (log(uh) + ul/uh to first order); tiny x gives uh = 1,
// f = 0 and the result ul = x.
// Measured max error (exhaustive): 0.976 ulp (x = 0x3eaaafb6, 0.3334, where 1 + x just passes 4/3
// and f ~ -1/3).
// Special cases: NaN -> NaN, +-0 -> +-0, -1 -> -inf, x < -1 (incl. -inf) -> NaN, +inf -> +inf.
TLRT_MATH_HD float log1p_f(float x) {
  const float a = x > 1.0f ? x : 1.0f, b = x > 1.0f ? 1.0f : x;  // NaN goes to b
  const float uh = a + b;
  const float ul = b - (uh - a);
  float y = detail::log_core_pair(uh, ul, true);
  y = x == num::u2f(0x7f800000u) ? x : y;
  y = x == -1.0f ? num::u2f(0xff800000u) : y;
  y = x == 0.0f ? x : y;
  return x >= -1.0f ? y : num::u2f(0x7fc00000u);
}

// tanh(x). Method: a = |x|. For a < 0.3 the odd polynomial a + a^3*T(a^2) (degree 7, fit error
// 1.2e-8 relative). Otherwise tanh(a) = (1 - E)/(1 + E), E = e^(-2a) (a clamped to 10) as the
// pair eh + el scaled by 2^j (exact, E >= 2^-29), 1 - E = nh + nl and 1 + E = dh + dl with exact
// residuals (Fast2Sum with 1 first), and the quotient by detail::div12 (rounded once). Below 0.3
// the remaining error of E would be magnified by E/(1 - E) (> 1.2) and the polynomial takes over.
// Both branches are computed; a select picks one; the sign of x is copied onto the result.
// Measured max error (exhaustive): 0.778 ulp (x = 0x3f087a36, 0.533, quotient branch); 0.69 ulp
// in the polynomial branch.
// Special cases: NaN -> NaN, +-inf -> +-1, +-0 -> +-0, |x| >= 9.01105976 -> +-1 exactly, finite x
// is never NaN.
TLRT_MATH_HD float tanh_f(float x) {
  const float a = detail::abs_bits(x);
  float r;
  const uint32_t tb = detail::exp_reduce(-2.0f * (a > 10.0f ? 10.0f : a), r);  // j in [-29, 0]
  float eh, el;
  detail::exp_pair(r, eh, el);
  const float s = detail::exp_scale(tb, 0);
  eh *= s;
  el *= s;
  const float nh = 1.0f - eh;
  const float nl = ((1.0f - nh) - eh) - el;
  const float dh = 1.0f + eh;
  const float dl = ((1.0f - dh) + eh) + el;
  const float tr = detail::div12(nh, nl, dh, dl);
  const float a2 = a * a;
  float p = -0x1.9c93e2p-5f;
  p = num::fma(p, a2, 0x1.10afeap-3f);
  p = num::fma(p, a2, -0x1.55549ep-2f);
  const float tp = num::fma(a * a2, p, a);
  return detail::with_sign_of(a < 0.3f ? tp : tr, x);
}

// sigmoid(x) = 1/(1 + e^-x). Method: E = e^-|x| and 1 + E as pairs (detail::one_plus_exp_neg_abs),
// then sigmoid = 1/(1 + E) for x >= 0 and E/(1 + E) for x < 0, by detail::div12 (rounded once).
// E is scaled into the subnormals before the division (1 + E is then 1), so the subnormal tail
// is E itself rounded once, as exp_f.
// Measured max error (exhaustive): 0.977 ulp (x = 0xc2ac86e9, -86.26); 0.858 ulp where the
// result is subnormal.
// Special cases: NaN -> NaN, +inf -> 1, -inf -> +0, sigmoid(+-0) = 0.5, x >= 17.3289719 -> 1,
// x <= -103.972084 -> +0.
TLRT_MATH_HD float sigmoid_f(float x) {
  float es, esl, dh, dl;
  detail::one_plus_exp_neg_abs(x, es, esl, dh, dl);
  const bool pos = x >= 0.0f;
  return detail::div12(pos ? 1.0f : es, pos ? 0.0f : esl, dh, dl);
}

// softplus(x) = log(1 + e^x) = max(x, 0) + log(1 + e^-|x|). Method: 1 + E = dh + dl, E = e^-|x|
// (detail::one_plus_exp_neg_abs, shared with sigmoid_f), L = log(dh + dl) by
// detail::log_core_pair (dh in [1, 2]; for tiny E, f = 0 and L = dl = E), rounded once; then
// max(x, 0) + L (a second rounding only for x > 0, where ulp(L) <= ulp(result)).
// Measured max error (exhaustive): 1.244 ulp (x = 0xc1835082, -16.41, where softplus(x) ~ E ~
// 2^-23.7 inherits the ~0.6 ulp error of E's pair, plus the final rounding).
// Special cases: NaN -> NaN, +inf -> +inf, -inf -> +0, softplus(+-0) = ln 2 (0x3f317218),
// softplus(x) = x for x >= 14.5560913, gradual underflow for x < -87.34, +0 for x <= -103.972084.
TLRT_MATH_HD float softplus_f(float x) {
  float es, esl, dh, dl;
  detail::one_plus_exp_neg_abs(x, es, esl, dh, dl);
  return (x > 0.0f ? x : 0.0f) + detail::log_core_pair(dh, dl, false);
}

// GELU, tanh approximation: 0.5*x*(1 + tanh(z)), z = sqrt(2/pi)*(x + 0.044715*x^3), evaluated in
// the cancellation-free form x*sigmoid(2z). Method:
//   x < -10.9 is clamped to -10.9 (the result there, and below, rounds to -0);
//   2z = th + tl (detail::gelu_arg, ~2^-44 relative); E = e^-|2z| from the pair argument
//   (detail::exp_reduce2; |th| <= 110), unscaled eh + el times 2^j;
//   1 + E = dh + dl with E scaled (as 2^(j+64) * 2^-64; E's low part is left out of dl, where it
//   would change the result by < 0.05 ulp);
//   numerator x*(eh + el) for 2z < 0, x for 2z >= 0, as a pair (fma residual);
//   quotient by detail::div12, then times 2^j for 2z < 0 (2^(j+64) * 2^-64, one rounding: the
//   subnormal tail keeps full precision); the sign of x is copied (gelu(-0) = -0);
//   x > 9 gives x (1 - sigmoid(2z) < 2^-95 there).
// Measured max error (exhaustive, against the float64 value of the formula, computed as
// x/(1 + exp(-2z))): 1.004 ulp (x = 0xc03e9ce8, -2.978); 0.934 ulp where the result is subnormal.
// Special cases: NaN -> NaN, +-0 -> +-0, +inf -> +inf, -inf -> -0, gelu(x) = x for x >= 4.99416399,
// -0 for x <= -10.7708683 (results below 2^-150 in magnitude).
TLRT_MATH_HD float gelu_f(float x_in) {
  const float x = x_in < -10.9f ? -10.9f : x_in;  // NaN stays NaN
  float x2, c2l, th, tl;
  detail::gelu_arg(x, x2, c2l, th, tl);
  const bool neg = th < 0.0f;
  float r;
  const uint32_t tb = detail::exp_reduce2(-detail::abs_bits(th), neg ? tl : -tl, r);
  float eh, el;
  detail::exp_pair(r, eh, el);
  const float s64 = detail::exp_scale(tb, 64);  // 2^(j + 64), j >= -159
  const float es = (eh * s64) * 0x1p-64f;
  const float dh = 1.0f + es;
  const float dl = (1.0f - dh) + es;
  const float eu = neg ? eh : 1.0f, eul = neg ? el : 0.0f;
  const float nh = x * eu;
  const float nl = num::fma(x, eul, num::fma(x, eu, -nh));
  const float g = detail::div12(nh, nl, dh, dl);
  const float y = detail::with_sign_of((g * (neg ? s64 : 0x1p64f)) * 0x1p-64f, x);
  return x_in > 9.0f ? x_in : y;
}

// d/dx gelu_f: s*(1 + w), s = sigmoid(2z), w = m*(1 - s), m = x*2*sqrt(2/pi)*(1 + 3*0.044715*x^2)
// = x*(K + 3KC*x^2). Method:
//   x < -10.9 is clamped to -10.9 (the result rounds to -0 there and below);
//   2z = th + tl and m = mh + ml as pairs (detail::gelu_arg; m's K + 3KC*x^2 the same way);
//   E = e^-|2z| = eh + el (unscaled, times 2^j; detail::exp_pair_fine, since near the zero
//   crossing the result is as sensitive to E as to the final rounding), 1 + E = dh + dl;
//   A = 1/(1 + E) as the pair rr + al (recip12 plus a second Newton step, then the remainder
//   1 - rr*(dh + dl) times rr), P = (eh + el)*A as a pair (exact product residual);
//   2z < 0: s = P (times 2^j at the end), 1 - s = A;  2z >= 0: s = A, 1 - s = P*2^j;
//   w = m*(1 - s) = wh + wl; 1 + w = oh + (wl + ole), oh = 1 + wh (exact where 1 + w cancels,
//   wh in [-2, -1/2]), ole its rounding error elsewhere (Fast2Sum); s*(1 + w) =
//   fma(sh, oh, fma(sh, wl + ole, sl*oh)), rounded once (then scaled, for 2z < 0);
//   x > 9 gives 1.
// Measured max error (exhaustive, against float64 s + x*s*(1-s)*K*(1 + 3C x^2)): 1.233 ulp for
// all x outside [-0.8, -0.7] (x = 0xbf2f80e6, -0.6856, next to the window). Inside it, around the
// zero crossing x ~ -0.75179, the relative error grows as the result goes to 0, but the absolute
// error is at most 1.58e-9 there, and at most 8.53e-10 for every input whose error exceeds 1.25
// ulp. Max absolute error anywhere 1.0e-7 (a 0.5 ulp rounding of a value ~1.13).
// Special cases: NaN -> NaN, gelu_grad(+-0) = 0.5, +inf -> 1, -inf -> -0, 1 for x >= 5.46786022,
// -0 for x <= -10.8945389.
TLRT_MATH_HD float gelu_grad_f(float x_in) {
  const float x = x_in < -10.9f ? -10.9f : x_in;  // NaN stays NaN
  float x2, c2l, th, tl;
  detail::gelu_arg(x, x2, c2l, th, tl);
  const float gmh = num::fma(detail::kKC3Hi, x2, detail::kKHi);
  const float gml = num::fma(detail::kKC3Hi, x2, detail::kKHi - gmh) +
                    num::fma(3.0f, c2l, detail::kKLo);
  const float mh = x * gmh;
  const float ml = num::fma(x, gml, num::fma(x, gmh, -mh));
  const bool neg = th < 0.0f;
  float r;
  const uint32_t tb = detail::exp_reduce2(-detail::abs_bits(th), neg ? tl : -tl, r);
  float eh, el;
  detail::exp_pair_fine(r, eh, el);  // E's error matters most near the zero crossing
  const float s64 = detail::exp_scale(tb, 64);  // 2^(j + 64), j >= -159
  const float es = (eh * s64) * 0x1p-64f, esl = (el * s64) * 0x1p-64f;
  const float dh = 1.0f + es;
  const float dl = ((1.0f - dh) + es) + esl;
  float rr = detail::recip12(dh);
  rr = num::fma(rr, num::fma(-dh, rr, 1.0f), rr);                  // 1/dh to ~1e-11
  const float al = num::fma(-rr, dl, num::fma(-rr, dh, 1.0f)) * rr;  // A = rr + al
  const float ph = eh * rr;
  const float pl = num::fma(eh, rr, -ph) + num::fma(eh, al, el * rr);  // P = (eh + el) * A
  const float sh = neg ? ph : rr, sl = neg ? pl : al;
  const float sch = neg ? rr : (ph * s64) * 0x1p-64f, scl = neg ? al : 0.0f;
  const float wh = mh * sch;
  const float wl = num::fma(mh, sch, -wh) + num::fma(mh, scl, ml * sch);
  // 1 + w = oh + (wl + ole): oh is exact where 1 + w cancels (wh in [-2, -1/2], Sterbenz) and ole
  // is its rounding error elsewhere (Fast2Sum; exact for |wh| <= 1, and for wh < -2 unless oh - 1
  // crosses a binade). So s*(1 + w) is rounded once.
  const float oh = 1.0f + wh;
  const float ole = wh - (oh - 1.0f);
  const float res = num::fma(sh, oh, num::fma(sh, wl + ole, sl * oh));
  const float y = (res * (neg ? s64 : 0x1p64f)) * 0x1p-64f;
  return x_in > 9.0f ? 1.0f : y;
}

// SiLU (swish) x*sigmoid(x) = x/(1 + e^-x), as one quotient rounded once (not x times a rounded
// sigmoid, which would add a second rounding). Method, gelu_f's with 2z = x (exact, no pair):
//   x < -110 is clamped to -110 (the result rounds to -0 there and below);
//   E = e^-|x| = eh + el unscaled, times 2^j (detail::exp_reduce, |x| clamped to 110 so that j
//   >= -159; detail::exp_pair_fine: for x < 0 E's relative error passes into the result whole);
//   1 + E = dh + dl with E scaled (as 2^(j+64) * 2^-64, rounded once) and its low part;
//   numerator x*(eh + el) for x < 0 (a pair: the fma residual), x for x >= 0;
//   quotient by detail::div12, then times 2^j for x < 0 (2^(j+64) * 2^-64, one rounding: the
//   subnormal tail keeps full precision); the sign of x is copied (silu(-0) = -0);
//   x > 20 gives x (e^-20 < 2^-28: x*sigmoid(x) rounds to x there).
// Accuracy: within kSiluMaxUlp of the float64 x/(1 + exp(-x)) over all inputs; the largest
// errors are far left, where the result is x*E with E tiny and E's pair error passes into it
// whole (figures: docs/kernels/elementwise.md).
// Special cases: NaN -> NaN, +-0 -> +-0, +inf -> +inf, -inf -> -0, silu(x) = x for
// x >= 16.6771297, -0 for x <= -108.660309 (results below 2^-150 in magnitude), gradual
// underflow in between (silu(2^-149) = +0: 2^-150 rounds to even).
TLRT_MATH_HD float silu_f(float x_in) {
  const float x = x_in < -110.0f ? -110.0f : x_in;  // NaN stays NaN
  const bool neg = x < 0.0f;
  const float a = detail::abs_bits(x);
  float r;
  const uint32_t tb = detail::exp_reduce(-(a > 110.0f ? 110.0f : a), r);  // j in [-159, 0]
  float eh, el;
  detail::exp_pair_fine(r, eh, el);
  const float s64 = detail::exp_scale(tb, 64);  // 2^(j + 64), normal
  const float es = (eh * s64) * 0x1p-64f, esl = (el * s64) * 0x1p-64f;
  const float dh = 1.0f + es;
  const float dl = ((1.0f - dh) + es) + esl;
  const float eu = neg ? eh : 1.0f, eul = neg ? el : 0.0f;
  const float nh = x * eu;
  const float nl = num::fma(x, eul, num::fma(x, eu, -nh));
  const float g = detail::div12(nh, nl, dh, dl);
  const float y = detail::with_sign_of((g * (neg ? s64 : 0x1p64f)) * 0x1p-64f, x);
  return x_in > 20.0f ? x_in : y;
}

// d/dx silu_f: s*(1 + x*(1 - s)), s = sigmoid(x). Method, gelu_grad_f's with 2z = m = x:
//   x < -110 is clamped to -110 (the result rounds to -0 there and below);
//   E = e^-|x| = eh + el (unscaled, times 2^j; detail::exp_pair_fine), 1 + E = dh + dl;
//   A = 1/(1 + E) as the pair rr + al, P = (eh + el)*A as a pair;
//   x < 0: s = P (times 2^j at the end), 1 - s = A;  x >= 0: s = A, 1 - s = P*2^j (both parts);
//   w = x*(1 - s) = wh + wl; 1 + w = oh + (wl + ole) (oh exact where 1 + w cancels, wh in
//   [-2, -1/2]); s*(1 + w) = fma(sh, oh, fma(sh, wl + ole, sl*oh)), rounded once (then scaled,
//   for x < 0); x > 24 gives 1.
// Accuracy (against float64 s + x*s*(1 - s), 1 - s = 1/(1 + e^x)): within kSiluGradMaxUlp for
// all x outside [-1.35, -1.2]. Inside it, around the zero crossing x ~ -1.27846, the relative
// error grows as the result goes to 0 (the rounding of the reduced argument r, ~2^-26 of E, moves
// s by ~2.5e-9 and the result by ~0.3 of that); the absolute error stays within 1.1e-9 there,
// and within kSiluGradMaxAbs for every input over kSiluGradMaxUlp (figures:
// docs/kernels/elementwise.md).
// Special cases: NaN -> NaN, silu_grad(+-0) = 0.5, +inf -> 1, -inf -> -0, 1 for
// x >= 19.556345, -0 for x <= -108.650978.
TLRT_MATH_HD float silu_grad_f(float x_in) {
  const float x = x_in < -110.0f ? -110.0f : x_in;  // NaN stays NaN
  const bool neg = x < 0.0f;
  const float a = detail::abs_bits(x);
  float r;
  const uint32_t tb = detail::exp_reduce(-(a > 110.0f ? 110.0f : a), r);  // j in [-159, 0]
  float eh, el;
  detail::exp_pair_fine(r, eh, el);
  const float s64 = detail::exp_scale(tb, 64);  // 2^(j + 64), normal
  const float es = (eh * s64) * 0x1p-64f, esl = (el * s64) * 0x1p-64f;
  const float dh = 1.0f + es;
  const float dl = ((1.0f - dh) + es) + esl;
  float rr = detail::recip12(dh);
  rr = num::fma(rr, num::fma(-dh, rr, 1.0f), rr);                    // 1/dh to ~1e-11
  const float al = num::fma(-rr, dl, num::fma(-rr, dh, 1.0f)) * rr;  // A = rr + al
  const float ph = eh * rr;
  const float pl = num::fma(eh, rr, -ph) + num::fma(eh, al, el * rr);  // P = (eh + el) * A
  const float sh = neg ? ph : rr, sl = neg ? pl : al;
  const float sch = neg ? rr : (ph * s64) * 0x1p-64f;
  const float scl = neg ? al : (pl * s64) * 0x1p-64f;
  const float wh = x * sch;
  const float wl = num::fma(x, sch, -wh) + x * scl;
  const float oh = 1.0f + wh;
  const float ole = wh - (oh - 1.0f);
  const float res = num::fma(sh, oh, num::fma(sh, wl + ole, sl * oh));
  const float y = (res * (neg ? s64 : 0x1p64f)) * 0x1p-64f;
  return x_in > 24.0f ? 1.0f : y;
}

// cos(2*pi*u) and sin(2*pi*u), sharing one range reduction and one pair of polynomials. Meant
// for u in [0, 1) (Box-Muller, u a multiple of 2^-24) but defined for every float. Method, all
// reductions exact: a = |u| clamped to 2^23 (floats that large are integers); f = a - n, n an
// integer within 1 of a (the 1.5*2^23 shift); w = 4f; q = rint(w) by the same shift (its low bits
// give q mod 4); r = w - q in [-1/2, 1/2], so 2*pi*a = 2*pi*k + (pi/2)(q + r).
// sin(pi/2 r) = r*S(r^2) (degree 7) and cos(pi/2 r) = 1 + r^2*C(r^2) (degree 6), near-minimax
// absolute-error fits on |r| <= 1/2 (fit errors 5.0e-9 and 3.3e-8). By q mod 4 = 0, 1, 2, 3:
// cos(2 pi a) is cos, -sin, -cos, sin of (pi/2 r) and sin(2 pi a) is sin, cos, -sin, -cos (a
// select and a sign flip each); sin(2 pi u) then takes the sign of u (cos is even).
// Both results are always computed (the polynomials are shared), so sincos costs about what one
// of them does: cos2pi_f and sin2pi_f below are this function with one result unused.
// Measured max ABSOLUTE error (exhaustive over all 2^32 floats and over u = i*2^-24, i < 2^24):
// cos 8.41e-8 (x = 0x3dfff495, 0.125, where |cos| ~ 0.7 and 0.5 ulp alone is 3e-8); sin 8.38e-8
// (x = 0x3e000a13, 0.12504, the same place). Next to their zeros only the absolute bound means
// anything (no relative bound is claimed).
// Special cases: NaN / +-inf -> NaN (both); |u| >= 2^22 (integers and half-integers) exact: cos
// +-1, sin +-0; cos2pi(0.25) = -0; sin2pi(+-0) = +-0, sin2pi(0.5) = -0, sin2pi(0.25) = 1.
TLRT_MATH_HD void sincos2pi_f(float u, float& s, float& c) {
  float a = detail::abs_bits(u);
  const bool inf = a == num::u2f(0x7f800000u);
  a = a > 0x1p23f ? 0x1p23f : a;  // NaN stays NaN
  float sa, ca;
  detail::sincos2pi_nonneg(a, sa, ca);
  c = inf ? u - u : ca;
  s = inf ? u - u : num::u2f(num::f2u(sa) ^ (num::f2u(u) & 0x80000000u));  // odd in u
}

// cos(2*pi*u): sincos2pi_f's cosine (same bits).
TLRT_MATH_HD float cos2pi_f(float u) {
  float s, c;
  sincos2pi_f(u, s, c);
  return c;
}

// sin(2*pi*u): sincos2pi_f's sine (same bits).
TLRT_MATH_HD float sin2pi_f(float u) {
  float s, c;
  sincos2pi_f(u, s, c);
  return s;
}

}  // namespace math
}  // namespace tlrt
