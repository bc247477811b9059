// Accuracy test for core/numerics/shared_math.hpp against float64 references.
//
// For every function: all special values (+-0, +-inf, NaNs, subnormal/normal limits, overflow /
// underflow and branch thresholds +-1 ulp) and a strided sweep over all 2^32 bit patterns; then
// the exact special results and saturation thresholds each function's comment documents (e.g.
// tanh(x) == 1 exactly for every x >= 9.01106, and not below), the ranges swept float by float
// (with the sweep stride / 4099 as step, so 1 by default).
//   TLRT_MATH_STRIDE=N   sweep stride (default 4099; 1 = exhaustive, all 2^32 inputs)
//   TLRT_UNDER_VALGRIND  if set (and TLRT_MATH_STRIDE is not), stride 1000003
//   TLRT_MATH_FUNCS=a,b  only run the named functions (e.g. exp_f,log_f); "documented" names the
//                        special-value checks
// Error: ulp = |f - ref| / ulp(float(ref)) in double (ulp of a subnormal or zero is 2^-149);
// NaN must match NaN, infinities must match exactly, and where a function documents it the sign
// of an exact zero must match. Each line also prints an FNV-1a hash of all output bit patterns so
// that builds (e.g. -O0 vs -O2) can be compared for bitwise identical results.
// Exit status: 0 if every function is within the bound stated in the header, else 1.
#include "core/numerics/shared_math.hpp"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

using tlrt::num::f2u;
using tlrt::num::u2f;

// ---- float64 references --------------------------------------------------------------------
const double kSqrt2OverPi = 0.79788456080286535588;  // sqrt(2/pi)
const double kGeluC = 0.044715;

double ref_exp(float x) { return std::exp(static_cast<double>(x)); }
double ref_log(float x) { return std::log(static_cast<double>(x)); }
double ref_log1p(float x) { return std::log1p(static_cast<double>(x)); }
double ref_tanh(float x) { return std::tanh(static_cast<double>(x)); }
double ref_sigmoid(float xf) {
  const double x = xf;
  if (x >= 0) return 1.0 / (1.0 + std::exp(-x));
  const double e = std::exp(x);
  return e / (1.0 + e);
}
double ref_softplus(float xf) {
  const double x = xf;
  return (x > 0 ? x : 0.0) + std::log1p(std::exp(-std::fabs(x)));
}
// 0.5*x*(1 + tanh(z)) == x / (1 + exp(-2z)); the second form has no cancellation in float64
// (the first one loses everything to 1 + tanh(z) ~ 0 for z < -19).
double ref_gelu(float xf) {
  const double x = xf;
  if (std::isinf(x)) return x > 0 ? x : -0.0;
  const double z = kSqrt2OverPi * (x + kGeluC * x * x * x);
  return x / (1.0 + std::exp(-2.0 * z));
}
double ref_gelu_grad(float xf) {
  const double x = xf;
  if (std::isinf(x)) return x > 0 ? 1.0 : -0.0;
  const double z = kSqrt2OverPi * (x + kGeluC * x * x * x);
  const double s = 1.0 / (1.0 + std::exp(-2.0 * z));
  const double sc = 1.0 / (1.0 + std::exp(2.0 * z));
  return s + x * s * sc * 2.0 * kSqrt2OverPi * (1.0 + 3.0 * kGeluC * x * x);
}
// silu(x) = x * sigmoid(x) = x / (1 + exp(-x)) (no cancellation in float64).
double ref_silu(float xf) {
  const double x = xf;
  if (std::isinf(x)) return x > 0 ? x : -0.0;
  return x / (1.0 + std::exp(-x));
}
// silu'(x) = s + x s (1 - s), with 1 - s = 1 / (1 + exp(x)) (no cancellation).
double ref_silu_grad(float xf) {
  const double x = xf;
  if (std::isinf(x)) return x > 0 ? 1.0 : -0.0;
  const double s = 1.0 / (1.0 + std::exp(-x));
  const double sc = 1.0 / (1.0 + std::exp(x));
  return s + x * s * sc;
}
double ref_cos2pi(float uf) {
  const double u = uf;
  if (!std::isfinite(u)) return std::nan("");
  const double f = u - std::nearbyint(u);  // exact in double
  return std::cos(2.0 * 3.14159265358979323846 * f);
}
double ref_sin2pi(float uf) {
  const double u = uf;
  if (!std::isfinite(u)) return std::nan("");
  const double f = u - std::nearbyint(u);  // exact in double; sin(2 pi u) = sin(2 pi f)
  return std::sin(2.0 * 3.14159265358979323846 * f);
}

// ---- functions under test ------------------------------------------------------------------
float t_exp(float x) { return tlrt::math::exp_f(x); }
float t_log(float x) { return tlrt::math::log_f(x); }
float t_log1p(float x) { return tlrt::math::log1p_f(x); }
float t_tanh(float x) { return tlrt::math::tanh_f(x); }
float t_sigmoid(float x) { return tlrt::math::sigmoid_f(x); }
float t_softplus(float x) { return tlrt::math::softplus_f(x); }
float t_gelu(float x) { return tlrt::math::gelu_f(x); }
float t_gelu_grad(float x) { return tlrt::math::gelu_grad_f(x); }
float t_silu(float x) { return tlrt::math::silu_f(x); }
float t_silu_grad(float x) { return tlrt::math::silu_grad_f(x); }
float t_cos2pi(float x) { return tlrt::math::cos2pi_f(x); }
float t_sin2pi(float x) { return tlrt::math::sin2pi_f(x); }

enum class Metric { kUlp, kAbs, kUlpOrAbs };

struct Spec {
  const char* name;
  float (*fn)(float);
  double (*ref)(float);
  Metric metric;
  double max_ulp;
  double max_abs;
  bool zero_sign;  // the sign of an exactly-zero reference must be reproduced
  float abs_lo, abs_hi;  // kUlpOrAbs: window of inputs where the absolute bound may be used instead
};

const Spec kSpecs[] = {
    {"exp_f", t_exp, ref_exp, Metric::kUlp, tlrt::math::kExpMaxUlp, 0, true, 0, 0},
    {"log_f", t_log, ref_log, Metric::kUlp, tlrt::math::kLogMaxUlp, 0, true, 0, 0},
    {"log1p_f", t_log1p, ref_log1p, Metric::kUlp, tlrt::math::kLog1pMaxUlp, 0, true, 0, 0},
    {"tanh_f", t_tanh, ref_tanh, Metric::kUlp, tlrt::math::kTanhMaxUlp, 0, true, 0, 0},
    {"sigmoid_f", t_sigmoid, ref_sigmoid, Metric::kUlp, tlrt::math::kSigmoidMaxUlp, 0, true, 0, 0},
    {"softplus_f", t_softplus, ref_softplus, Metric::kUlp, tlrt::math::kSoftplusMaxUlp, 0, true, 0, 0},
    {"gelu_f", t_gelu, ref_gelu, Metric::kUlp, tlrt::math::kGeluMaxUlp, 0, true, 0, 0},
    {"gelu_grad_f", t_gelu_grad, ref_gelu_grad, Metric::kUlpOrAbs, tlrt::math::kGeluGradMaxUlp,
     tlrt::math::kGeluGradMaxAbs, false, tlrt::math::kGeluGradRootLo, tlrt::math::kGeluGradRootHi},
    {"silu_f", t_silu, ref_silu, Metric::kUlp, tlrt::math::kSiluMaxUlp, 0, true, 0, 0},
    {"silu_grad_f", t_silu_grad, ref_silu_grad, Metric::kUlpOrAbs, tlrt::math::kSiluGradMaxUlp,
     tlrt::math::kSiluGradMaxAbs, false, tlrt::math::kSiluGradRootLo, tlrt::math::kSiluGradRootHi},
    {"cos2pi_f", t_cos2pi, ref_cos2pi, Metric::kAbs, 0, tlrt::math::kCos2piMaxAbs, false, 0, 0},
    {"sin2pi_f", t_sin2pi, ref_sin2pi, Metric::kAbs, 0, tlrt::math::kSin2piMaxAbs, false, 0, 0},
};

double ulp_of(float y) {
  const float a = std::fabs(y);
  if (a < FLT_MIN) return std::ldexp(1.0, -149);
  return std::ldexp(1.0, std::ilogb(a) - 23);
}

struct Stats {
  uint64_t n = 0;
  uint64_t fails = 0;
  uint32_t first_fail = 0;
  double max_ulp = 0;       // kUlp: all inputs; kUlpOrAbs: inputs outside the abs window
  uint32_t worst_ulp = 0;
  double max_ulp_all = 0;   // over all inputs
  double max_abs = 0;       // over all inputs
  uint32_t worst_abs = 0;
  double win_abs = 0;       // kUlpOrAbs: max abs error of window inputs over the ulp bound
  uint64_t hash = 1469598103934665603ull;
};

void check(const Spec& s, float x, Stats& st) {
  const float y = s.fn(x);
  const uint32_t yb = f2u(y);
  for (int i = 0; i < 4; ++i) {
    st.hash ^= (yb >> (8 * i)) & 0xffu;
    st.hash *= 1099511628211ull;
  }
  ++st.n;
  const double r = s.ref(x);
  bool bad = false;
  double eu = 0, ea = 0;
  if (std::isnan(r) || std::isnan(y)) {
    bad = !(std::isnan(r) && std::isnan(y));
    eu = ea = bad ? INFINITY : 0.0;
  } else {
    const float rf = static_cast<float>(r);  // round to nearest; overflows to inf
    if (std::isinf(rf) || std::isinf(y)) {
      bad = !(rf == y);
      eu = ea = bad ? INFINITY : 0.0;
    } else {
      ea = std::fabs(static_cast<double>(y) - r);
      eu = ea / ulp_of(rf);
      if (s.zero_sign && rf == 0.0f && y == 0.0f && std::signbit(rf) != std::signbit(y)) {
        bad = true;
        eu = INFINITY;
      }
    }
  }
  const uint32_t xb = f2u(x);
  switch (s.metric) {
    case Metric::kUlp:
      if (eu > st.max_ulp) st.max_ulp = eu, st.worst_ulp = xb;
      if (ea > st.max_abs) st.max_abs = ea, st.worst_abs = xb;
      bad = bad || eu > s.max_ulp;
      break;
    case Metric::kAbs:
      if (ea > st.max_abs) st.max_abs = ea, st.worst_abs = xb;
      if (eu > st.max_ulp_all) st.max_ulp_all = eu;
      bad = bad || ea > s.max_abs;
      break;
    case Metric::kUlpOrAbs: {
      if (ea > st.max_abs) st.max_abs = ea, st.worst_abs = xb;
      if (eu > st.max_ulp_all) st.max_ulp_all = eu;
      const bool in_window = x >= s.abs_lo && x <= s.abs_hi;
      if (!in_window && eu > st.max_ulp) st.max_ulp = eu, st.worst_ulp = xb;
      if (in_window && eu > s.max_ulp && ea > st.win_abs) st.win_abs = ea;
      bad = bad || (eu > s.max_ulp && !(in_window && ea <= s.max_abs));
      break;
    }
  }
  if (bad) {
    if (st.fails == 0) st.first_fail = xb;
    ++st.fails;
  }
}

void add_around(std::vector<float>& v, float x) {
  v.push_back(x);
  v.push_back(std::nextafter(x, -INFINITY));
  v.push_back(std::nextafter(x, INFINITY));
  v.push_back(-x);
  v.push_back(std::nextafter(-x, -INFINITY));
  v.push_back(std::nextafter(-x, INFINITY));
}

std::vector<float> special_values() {
  std::vector<float> v;
  const uint32_t bits[] = {0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u,
                           0xffc00000u, 0x7f800001u, 0xff800001u, 0x7fffffffu, 0xffffffffu,
                           0x00000001u, 0x80000001u, 0x007fffffu, 0x807fffffu, 0x00800000u,
                           0x80800000u, 0x7f7fffffu, 0xff7fffffu};
  for (uint32_t b : bits) v.push_back(u2f(b));
  const float around[] = {
      1.0f, 2.0f, 0.5f, 0.25f, 0.75f, 1.0f - 0x1p-24f, 0x1p-24f, 0x1p-12f, 0x1p22f, 0x1p23f,
      0x1p24f,
      88.7228394f,   // exp overflow threshold (ln(FLT_MAX) ~ 88.72283906)
      87.3365448f,   // ln(FLT_MIN) (exp result normal/subnormal boundary)
      103.278931f,   // -ln(2^-149): exp result = smallest subnormal
      103.972084f,   // -ln(2^-150): exp rounds to 0 below
      0.34657359f,   // ln2/2 (exp reduction boundary)
      89.0f, 104.0f, 10.0f,  // clamps of exp's argument, of |x| in sigmoid/softplus and tanh
      0.70710677f, 1.41421354f, 0.29289322f, 0.41421356f,  // old log / log1p branch boundaries
      0.6666667f, 1.3333334f, 0.3333333f,                   // log reduction: m in [2/3, 4/3)
      0x1p126f, 0x1p100f,                                   // log1p: 2^-e clamp
      0.3f, 0.625f, 9.01f, 9.0110598f, 9.1f, 17.33f, 44.36f,  // tanh / sigmoid thresholds
      14.5560913f, 4.994164f, 5.4678602f, 10.7708683f, 10.8945389f, 10.9f,  // saturation points
      9.0f, 12.0f, 16.0f, 0.7518f, 8.0f, 10.5f, 11.0f,      // gelu thresholds, gelu' root
      15.0f, 16.6f, 20.0f, 100.0f, 1e10f, 1e20f, 1e30f,
      16.6771297f, 19.556345f, 24.0f, 108.650978f, 108.660309f, 110.0f, 1.27846454f};  // silu
  for (float x : around) add_around(v, x);
  return v;
}

// ---- documented exact results -------------------------------------------------------------
int g_doc_fails = 0;

void doc_fail(const char* what, float x, float y) {
  if (g_doc_fails++ < 20)
    std::printf("documented special value violated: %s at x = %a (%.9g): got %a (0x%08x)\n", what,
                x, x, y, f2u(y));
}
bool same_bits(float a, float b) { return f2u(a) == f2u(b); }

// f(x) has the bits of c for every float x from t to end (visited with the given step in bit
// patterns, end always included), and f(t - 1 ulp) does not (the threshold t is tight).
struct Threshold {
  const char* what;
  float (*f)(float);
  uint32_t t;  // bits of the threshold
  float end;   // where the function's clamp or select takes over (same sign as t)
  float c;     // the saturated result (compared bit for bit)
};

void expect_threshold(const Threshold& th, uint32_t step) {
  const uint32_t end = f2u(th.end);  // same sign as t: bit patterns grow with |x|
  const float before = u2f(th.t - 1);
  if (same_bits(th.f(before), th.c)) doc_fail(th.what, before, th.f(before));
  for (uint64_t u = th.t;; u += step) {
    const float x = u2f(static_cast<uint32_t>(std::min<uint64_t>(u, end)));
    if (!same_bits(th.f(x), th.c)) return doc_fail(th.what, x, th.f(x));
    if (u >= end) break;
  }
}

float softplus_minus_x(float x) { return tlrt::math::softplus_f(x) - x; }
float gelu_minus_x(float x) { return tlrt::math::gelu_f(x) - x; }
float silu_minus_x(float x) { return tlrt::math::silu_f(x) - x; }

// The special results stated in the comments of core/numerics/shared_math.hpp.
void check_documented(uint32_t step) {
  using namespace tlrt::math;
  const float inf = INFINITY, nan = NAN, tiny = 0x1p-149f;
  struct Exact {
    const char* what;
    float got, want;
  };
  const Exact exact[] = {
      {"exp(+0) = 1", exp_f(0.0f), 1.0f},
      {"exp(-0) = 1", exp_f(-0.0f), 1.0f},
      {"exp(+inf) = +inf", exp_f(inf), inf},
      {"exp(-inf) = +0", exp_f(-inf), 0.0f},
      {"exp(-103.972076) = 2^-149 (no flush)", exp_f(u2f(0xc2cff1b4u)), tiny},
      {"log(+0) = -inf", log_f(0.0f), -inf},
      {"log(-0) = -inf", log_f(-0.0f), -inf},
      {"log(+inf) = +inf", log_f(inf), inf},
      {"log(1) = +0", log_f(1.0f), 0.0f},
      {"log(2^-149) = -103.278931", log_f(tiny), -103.278931f},
      {"log1p(+0) = +0", log1p_f(0.0f), 0.0f},
      {"log1p(-0) = -0", log1p_f(-0.0f), -0.0f},
      {"log1p(-1) = -inf", log1p_f(-1.0f), -inf},
      {"log1p(+inf) = +inf", log1p_f(inf), inf},
      {"tanh(+0) = +0", tanh_f(0.0f), 0.0f},
      {"tanh(-0) = -0", tanh_f(-0.0f), -0.0f},
      {"tanh(+inf) = 1", tanh_f(inf), 1.0f},
      {"tanh(-inf) = -1", tanh_f(-inf), -1.0f},
      {"tanh(2^-149) = 2^-149", tanh_f(tiny), tiny},
      {"sigmoid(+0) = 0.5", sigmoid_f(0.0f), 0.5f},
      {"sigmoid(-0) = 0.5", sigmoid_f(-0.0f), 0.5f},
      {"sigmoid(+inf) = 1", sigmoid_f(inf), 1.0f},
      {"sigmoid(-inf) = +0", sigmoid_f(-inf), 0.0f},
      {"softplus(+0) = ln 2", softplus_f(0.0f), u2f(0x3f317218u)},
      {"softplus(-0) = ln 2", softplus_f(-0.0f), u2f(0x3f317218u)},
      {"softplus(+inf) = +inf", softplus_f(inf), inf},
      {"softplus(-inf) = +0", softplus_f(-inf), 0.0f},
      {"gelu(+0) = +0", gelu_f(0.0f), 0.0f},
      {"gelu(-0) = -0", gelu_f(-0.0f), -0.0f},
      {"gelu(+inf) = +inf", gelu_f(inf), inf},
      {"gelu(-inf) = -0", gelu_f(-inf), -0.0f},
      {"gelu_grad(+0) = 0.5", gelu_grad_f(0.0f), 0.5f},
      {"gelu_grad(-0) = 0.5", gelu_grad_f(-0.0f), 0.5f},
      {"gelu_grad(+inf) = 1", gelu_grad_f(inf), 1.0f},
      {"gelu_grad(-inf) = -0", gelu_grad_f(-inf), -0.0f},
      {"silu(+0) = +0", silu_f(0.0f), 0.0f},
      {"silu(-0) = -0", silu_f(-0.0f), -0.0f},
      {"silu(+inf) = +inf", silu_f(inf), inf},
      {"silu(-inf) = -0", silu_f(-inf), -0.0f},
      {"silu(2^-149) = +0 (2^-150 rounds to even)", silu_f(tiny), 0.0f},
      {"silu(2^-148) = 2^-149", silu_f(2 * tiny), tiny},
      {"silu_grad(+0) = 0.5", silu_grad_f(0.0f), 0.5f},
      {"silu_grad(-0) = 0.5", silu_grad_f(-0.0f), 0.5f},
      {"silu_grad(+inf) = 1", silu_grad_f(inf), 1.0f},
      {"silu_grad(-inf) = -0", silu_grad_f(-inf), -0.0f},
      {"cos2pi(0) = 1", cos2pi_f(0.0f), 1.0f},
      {"cos2pi(0.25) = -0", cos2pi_f(0.25f), -0.0f},
      {"cos2pi(0.5) = -1", cos2pi_f(0.5f), -1.0f},
      {"cos2pi(2^22 + 0.5) = -1", cos2pi_f(0x1p22f + 0.5f), -1.0f},
      {"cos2pi(2^23 + 1) = 1", cos2pi_f(0x1p23f + 1.0f), 1.0f},
      {"cos2pi(-FLT_MAX) = 1", cos2pi_f(-FLT_MAX), 1.0f},
      {"sin2pi(+0) = +0", sin2pi_f(0.0f), 0.0f},
      {"sin2pi(-0) = -0", sin2pi_f(-0.0f), -0.0f},
      {"sin2pi(0.25) = 1", sin2pi_f(0.25f), 1.0f},
      {"sin2pi(-0.25) = -1", sin2pi_f(-0.25f), -1.0f},
      {"sin2pi(0.5) = -0", sin2pi_f(0.5f), -0.0f},
      {"sin2pi(0.75) = -1", sin2pi_f(0.75f), -1.0f},
      {"sin2pi(2^22 + 0.5) = -0", sin2pi_f(0x1p22f + 0.5f), -0.0f},
      {"sin2pi(2^23 + 1) = +0", sin2pi_f(0x1p23f + 1.0f), 0.0f},
      {"sin2pi(-FLT_MAX) = -0", sin2pi_f(-FLT_MAX), -0.0f},
  };
  for (const Exact& e : exact)
    if (!same_bits(e.got, e.want)) doc_fail(e.what, 0.0f, e.got);
  // NaN results (any NaN).
  const float nan_of[] = {exp_f(nan),       log_f(nan),       log_f(-1.0f),     log_f(-inf),
                          log_f(-tiny),     log1p_f(nan),     log1p_f(-1.5f),   log1p_f(-inf),
                          tanh_f(nan),      sigmoid_f(nan),   softplus_f(nan),  gelu_f(nan),
                          gelu_grad_f(nan), silu_f(nan),    silu_grad_f(nan), cos2pi_f(nan),    cos2pi_f(inf),    cos2pi_f(-inf),
                          sin2pi_f(nan),    sin2pi_f(inf),    sin2pi_f(-inf)};
  for (float y : nan_of)
    if (!(y != y)) doc_fail("NaN expected", 0.0f, y);
  // Saturation thresholds, each tight and held all the way to where the clamps take over.
  const Threshold thresholds[] = {
      {"exp(x) = +inf for x >= 88.7228394", exp_f, 0x42b17218u, 89.0f, inf},
      {"exp(x) = +0 for x <= -103.972084", exp_f, 0xc2cff1b5u, -104.0f, 0.0f},
      {"tanh(x) = 1 for x >= 9.01105976", tanh_f, 0x41102d4du, 10.0f, 1.0f},
      {"tanh(x) = -1 for x <= -9.01105976", tanh_f, 0xc1102d4du, -10.0f, -1.0f},
      {"sigmoid(x) = 1 for x >= 17.3289719", sigmoid_f, 0x418aa1bcu, 104.0f, 1.0f},
      {"sigmoid(x) = +0 for x <= -103.972084", sigmoid_f, 0xc2cff1b5u, -104.0f, 0.0f},
      {"softplus(x) = x for x >= 14.5560913", softplus_minus_x, 0x4168e5c0u, 104.0f, 0.0f},
      {"softplus(x) = +0 for x <= -103.972084", softplus_f, 0xc2cff1b5u, -104.0f, 0.0f},
      {"gelu(x) = x for x >= 4.99416399", gelu_minus_x, 0x409fd031u, 9.0f, 0.0f},
      {"gelu(x) = -0 for x <= -10.7708683", gelu_f, 0xc12c557au, -10.9f, -0.0f},
      {"gelu_grad(x) = 1 for x >= 5.46786022", gelu_grad_f, 0x40aef8b6u, 9.0f, 1.0f},
      {"gelu_grad(x) = -0 for x <= -10.8945389", gelu_grad_f, 0xc12e5008u, -10.9f, -0.0f},
      {"silu(x) = x for x >= 16.6771297", silu_minus_x, 0x41856ac3u, 20.0f, 0.0f},
      {"silu(x) = -0 for x <= -108.660309", silu_f, 0xc2d95214u, -110.0f, -0.0f},
      {"silu_grad(x) = 1 for x >= 19.556345", silu_grad_f, 0x419c7365u, 24.0f, 1.0f},
      {"silu_grad(x) = -0 for x <= -108.650978", silu_grad_f, 0xc2d94d4du, -110.0f, -0.0f},
  };
  for (const Threshold& th : thresholds) expect_threshold(th, step);
  // The RNG (core/numerics/rng.hpp) calls the bodies of log_f and sincos2pi_f directly on its
  // draws: u1 = k * 2^-24, k in [1, 2^24] and u2 = k * 2^-24, k in [0, 2^24); the same bits as
  // the full functions for every one of them (all 2^24 + 2^24, whatever the stride).
  for (uint32_t k = 1; k <= (1u << 24); ++k) {
    const float u = static_cast<float>(k) * 0x1p-24f;
    const float full = log_f(u), body = tlrt::math::detail::log_core(u, 0.0f);
    if (!same_bits(full, body)) doc_fail("log_core(u, 0) == log_f(u) on the RNG's u1", u, body);
  }
  for (uint32_t k = 0; k < (1u << 24); ++k) {
    const float u = static_cast<float>(k) * 0x1p-24f;
    float s, c, sb, cb;
    sincos2pi_f(u, s, c);
    tlrt::math::detail::sincos2pi_nonneg(u, sb, cb);
    if (!same_bits(s, sb) || !same_bits(c, cb) || !same_bits(c, cos2pi_f(u)) ||
        !same_bits(s, sin2pi_f(u)))
      doc_fail("sincos2pi_nonneg == sincos2pi_f == cos2pi_f, sin2pi_f on the RNG's u2", u, sb);
  }
  // Beyond the clamps (a sparse look; the clamps and selects make these hold by construction).
  for (float x = 104.0f; x < 3e38f; x *= 1.37f) {
    const Exact far[] = {
        {"exp(x) = +inf beyond 104", exp_f(x), inf},
        {"exp(x) = +0 below -104", exp_f(-x), 0.0f},
        {"tanh(x) = 1 beyond 104", tanh_f(x), 1.0f},
        {"tanh(x) = -1 below -104", tanh_f(-x), -1.0f},
        {"sigmoid(x) = 1 beyond 104", sigmoid_f(x), 1.0f},
        {"sigmoid(x) = +0 below -104", sigmoid_f(-x), 0.0f},
        {"softplus(x) = x beyond 104", softplus_f(x), x},
        {"softplus(x) = +0 below -104", softplus_f(-x), 0.0f},
        {"gelu(x) = x beyond 104", gelu_f(x), x},
        {"gelu(x) = -0 below -104", gelu_f(-x), -0.0f},
        {"gelu_grad(x) = 1 beyond 104", gelu_grad_f(x), 1.0f},
        {"gelu_grad(x) = -0 below -104", gelu_grad_f(-x), -0.0f},
    };
    for (const Exact& e : far)
      if (!same_bits(e.got, e.want)) doc_fail(e.what, x, e.got);
  }
  for (float x = 110.0f; x < 3e38f; x *= 1.37f) {
    const Exact far[] = {
        {"silu(x) = x beyond 110", silu_f(x), x},
        {"silu(x) = -0 below -110", silu_f(-x), -0.0f},
        {"silu_grad(x) = 1 beyond 110", silu_grad_f(x), 1.0f},
        {"silu_grad(x) = -0 below -110", silu_grad_f(-x), -0.0f},
    };
    for (const Exact& e : far)
      if (!same_bits(e.got, e.want)) doc_fail(e.what, x, e.got);
  }
}

bool selected(const char* name) {
  const char* f = std::getenv("TLRT_MATH_FUNCS");
  if (f == nullptr || *f == '\0') return true;
  const std::string list = std::string(",") + f + ",";
  return list.find(std::string(",") + name + ",") != std::string::npos;
}

}  // namespace

int main() {
  uint64_t stride = 4099;
  if (std::getenv("TLRT_UNDER_VALGRIND") != nullptr) stride = 1000003;
  if (const char* e = std::getenv("TLRT_MATH_STRIDE")) {
    const long long v = std::atoll(e);
    if (v >= 1) stride = static_cast<uint64_t>(v);
  }
  // cos2pi_f's and sin2pi_f's real domain: u = i * 2^-24, i in [0, 2^24); swept with a
  // proportionally finer step.
  const uint64_t dstride = stride == 1 ? 1 : (stride + 255) / 256;
  const std::vector<float> specials = special_values();

  std::printf("shared_math: stride %llu (%s)\n", static_cast<unsigned long long>(stride),
              stride == 1 ? "exhaustive" : "strided");
  std::printf("%-12s %12s %10s %10s %12s %10s %6s %18s %s\n", "function", "inputs", "max_ulp",
              "worst", "max_abs", "worst", "bound", "hash", "result");
  bool ok = true;
  for (const Spec& s : kSpecs) {
    if (!selected(s.name)) continue;
    Stats st;
    for (float x : specials) check(s, x, st);
    for (uint64_t i = 0; i <= 0xffffffffull; i += stride) check(s, u2f(static_cast<uint32_t>(i)), st);
    if (s.fn == t_cos2pi || s.fn == t_sin2pi) {
      for (uint64_t i = 0; i < (1ull << 24); i += dstride) check(s, static_cast<float>(i) * 0x1p-24f, st);
    }
    const double bound = s.metric == Metric::kAbs ? s.max_abs : s.max_ulp;
    char ulp_col[64];
    if (s.metric == Metric::kAbs)
      std::snprintf(ulp_col, sizeof ulp_col, "%10s %10s", "-", "-");
    else
      std::snprintf(ulp_col, sizeof ulp_col, "%10.4f 0x%08x", st.max_ulp, st.worst_ulp);
    std::printf("%-12s %12llu %s %12.4g 0x%08x %6.3g %016llx %s", s.name,
                static_cast<unsigned long long>(st.n), ulp_col, st.max_abs, st.worst_abs, bound,
                static_cast<unsigned long long>(st.hash), st.fails ? "FAIL" : "ok");
    if (s.metric == Metric::kUlpOrAbs)
      std::printf("  (max_ulp: x outside [%g, %g]; inside, inputs over %.3g ulp need abs err <= %.3g:"
                  " max %.3g; max ulp anywhere %.4g)",
                  s.abs_lo, s.abs_hi, s.max_ulp, s.max_abs, st.win_abs, st.max_ulp_all);
    if (st.fails)
      std::printf("  %llu failures, first input 0x%08x", static_cast<unsigned long long>(st.fails),
                  st.first_fail);
    std::printf("\n");
    ok = ok && st.fails == 0;
  }
  if (!selected("documented")) return ok ? 0 : 1;
  check_documented(static_cast<uint32_t>(std::max<uint64_t>(1, stride / 4099)));
  std::printf("documented special values and thresholds: %s\n", g_doc_fails ? "FAIL" : "ok");
  return ok && g_doc_fails == 0 ? 0 : 1;
}
