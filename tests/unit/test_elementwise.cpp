// Known answers for every op of abi/tlrt_elementwise.h on the CPU backend.
//
// Exact ops are compared bit for bit (NaN payloads aside, which the header leaves unspecified)
// with the IEEE binary32 result computed here in plain float arithmetic (this file is compiled
// with -ffp-contract=off like the library): add/sub/mul/div/scale; axpy against std::fmaf; sqrt
// against std::sqrt(float); inv against 1.0f / x; the max/min/relu/clamp/abs/neg and backward
// semantics against small reference functions written from the header text.
//
// Shared-math ops are compared with a float64 reference computed here with <cmath> double
// functions. Tolerances used by this test (deliberately looser than the library's measured
// bounds, which tests/unit/test_shared_math.cpp checks over all 2^32 inputs):
//   exp, log, sigmoid, tanh, softplus, safe_log, silu ... 4 ulp(ref)
//   gelu ................................................ 8 ulp(ref)
//   *_bwd (exp, sigmoid, tanh, softplus, gelu, safe_log, silu)
//        ............................................... |y - ref| <= 8 ulp(ref) + 1e-7 * |g|
// where ulp(ref) is the spacing of float32 at ref (2^-149 for subnormal results, 2^104 at and
// beyond FLT_MAX, an infinite result counting as +-2^128). The absolute term of the *_bwd bound
// covers the cancellation the documented float formulas have by design (1 - t*t near |t| = 1,
// s * (1 - s) near s = 1). safe_log is checked end to end against the double reference with
// 4 ulp(ref) + 2^-22 (log(s) near s = 1 magnifies the one rounding of s = softplus + eps), and
// as the documented composition log(softplus(x) + (float)eps) within 4 ulp.
// Inputs: seeded random vectors (th::Rng::vec and th::Rng::bits) and th::edge_values(), all pairs
// of edge values for the binary ops; empty and size-1 buffers for every op.
#include <algorithm>
#include <cfloat>
#include <functional>
#include <string>
#include <vector>

#include "harness.hpp"

namespace {

using UnaryFn = std::function<tlrt_status(const tlrt_buffer *, tlrt_buffer **)>;
using BinaryFn = std::function<tlrt_status(const tlrt_buffer *, const tlrt_buffer *, tlrt_buffer **)>;

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// ---- running ops ------------------------------------------------------------------------------

std::vector<float> run1(const UnaryFn &f, const std::vector<float> &x) {
  tlrt_buffer *bx = th::upload(x), *y = nullptr;
  const tlrt_status s = f(bx, &y);
  TH_CHECK_MSG(s == TLRT_OK, "op failed: %s", tlrt_last_error());
  std::vector<float> out = y ? th::download(y) : std::vector<float>();
  tlrt_buffer_free(bx);
  tlrt_buffer_free(y);
  TH_CHECK(out.size() == x.size());
  return out;
}

std::vector<float> run2(const BinaryFn &f, const std::vector<float> &a,
                        const std::vector<float> &b) {
  tlrt_buffer *ba = th::upload(a), *bb = th::upload(b), *y = nullptr;
  const tlrt_status s = f(ba, bb, &y);
  TH_CHECK_MSG(s == TLRT_OK, "op failed: %s", tlrt_last_error());
  std::vector<float> out = y ? th::download(y) : std::vector<float>();
  tlrt_buffer_free(ba);
  tlrt_buffer_free(bb);
  tlrt_buffer_free(y);
  TH_CHECK(out.size() == a.size());
  return out;
}

// ---- inputs -----------------------------------------------------------------------------------

// Unary inputs: edge values, random values in [lo, hi], random bit patterns.
std::vector<float> unary_inputs(uint64_t salt, float lo = -8.0f, float hi = 8.0f) {
  th::Rng rng(salt);
  std::vector<float> v = th::edge_values();
  const std::vector<float> r = rng.vec(2048, lo, hi), bits = rng.bits(2048);
  v.insert(v.end(), r.begin(), r.end());
  v.insert(v.end(), bits.begin(), bits.end());
  return v;
}

// Binary inputs: all pairs of edge values, then random pairs (values and bit patterns).
void binary_inputs(uint64_t salt, std::vector<float> &a, std::vector<float> &b) {
  const std::vector<float> e = th::edge_values();
  a.clear();
  b.clear();
  for (float x : e)
    for (float y : e) {
      a.push_back(x);
      b.push_back(y);
    }
  th::Rng rng(salt);
  const std::vector<float> ra = rng.vec(2048), rb = rng.vec(2048);
  const std::vector<float> ba = rng.bits(2048), bb = rng.bits(2048);
  a.insert(a.end(), ra.begin(), ra.end());
  b.insert(b.end(), rb.begin(), rb.end());
  a.insert(a.end(), ba.begin(), ba.end());
  b.insert(b.end(), bb.begin(), bb.end());
  // Equal pairs (ties), random values against their negation and against edges.
  for (size_t i = 0; i < 256; ++i) {
    a.push_back(ra[i]);
    b.push_back(ra[i]);
    a.push_back(ra[i]);
    b.push_back(-ra[i]);
    a.push_back(e[i % e.size()]);
    b.push_back(rb[i]);
  }
}

// ---- comparison -------------------------------------------------------------------------------

// Exact ops: every element equal bit for bit (both NaN counts as equal: payloads unspecified).
void expect_exact(const char *op, const std::vector<float> &in0, const std::vector<float> *in1,
                  const std::vector<float> &got, const std::function<float(size_t)> &ref,
                  bool nan_payload_exact = false) {
  int bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const float want = ref(i);
    const bool ok = nan_payload_exact ? th::bits_of(got[i]) == th::bits_of(want)
                                      : th::same_bits(got[i], want);
    if (!ok && bad++ < 8) {
      if (in1)
        TH_CHECK_MSG(false, "%s(%a [0x%08x], %a [0x%08x]) = %a [0x%08x], expected %a [0x%08x]", op,
                     in0[i], th::bits_of(in0[i]), (*in1)[i], th::bits_of((*in1)[i]), got[i],
                     th::bits_of(got[i]), want, th::bits_of(want));
      else
        TH_CHECK_MSG(false, "%s(%a [0x%08x]) = %a [0x%08x], expected %a [0x%08x]", op, in0[i],
                     th::bits_of(in0[i]), got[i], th::bits_of(got[i]), want, th::bits_of(want));
    }
  }
  TH_CHECK_MSG(bad == 0, "%s: %d of %zu elements differ", op, bad, got.size());
}

// Spacing of float32 at |r| (double): 2^-149 below the normal range, 2^104 from FLT_MAX up.
double ulp_f32(double r) {
  const double a = std::fabs(r);
  if (a < std::ldexp(1.0, -126)) return std::ldexp(1.0, -149);
  if (a >= (double)FLT_MAX) return std::ldexp(1.0, 104);
  int e;
  std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
  return std::ldexp(1.0, e - 24);
}

// Clamp to +-2^128 so that an infinite float result and a reference beyond the float range
// compare as numbers.
double clamp_range(double v) {
  const double big = std::ldexp(1.0, 128);
  return v > big ? big : (v < -big ? -big : v);
}

// |y - ref| in ulp(ref), or infinity if the NaN-ness differs. NaN vs NaN is 0.
double ulp_error(float y, double ref) {
  if (std::isnan(ref) || std::isnan(y)) return std::isnan(ref) && std::isnan(y) ? 0.0 : INFINITY;
  const double r = clamp_range(ref), v = clamp_range((double)y);
  if (v == r) return 0.0;
  return std::fabs(v - r) / ulp_f32(r);
}

struct Worst {
  double err = 0.0;
  size_t at = 0;
};

// Shared-math unary ops: every element within max_ulp of the float64 reference.
void expect_ulp(const char *op, const std::vector<float> &x, const std::vector<float> &got,
                const std::function<double(float)> &ref, double max_ulp) {
  Worst w;
  int bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double r = ref(x[i]);
    const double e = ulp_error(got[i], r);
    if (!(e <= w.err)) w = {e, i};
    if (!(e <= max_ulp) && bad++ < 8)
      TH_CHECK_MSG(false, "%s(%a) = %a, reference %.17g: %.3g ulp > %g", op, x[i], got[i], r, e,
                   max_ulp);
  }
  TH_CHECK_MSG(bad == 0, "%s: %d of %zu elements beyond %g ulp", op, bad, got.size(), max_ulp);
  if (!got.empty())
    std::printf("  %-12s max error %.3f ulp (at x = %a)\n", op, w.err, x[w.at]);
}

// Shared-math backward ops: |y - ref| <= 8 ulp(ref) + 1e-7 |g| (see the file comment).
void expect_bwd(const char *op, const std::vector<float> &x, const std::vector<float> &g,
                const std::vector<float> &got, const std::function<double(float)> &dref,
                double ulps = 8.0, double rel_g = 1e-7) {
  int bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double r = (double)g[i] * dref(x[i]);
    bool ok;
    if (std::isnan(r) || std::isnan(got[i])) {
      ok = std::isnan(r) && std::isnan(got[i]);
    } else {
      const double rc = clamp_range(r), v = clamp_range((double)got[i]);
      ok = v == rc || std::fabs(v - rc) <= ulps * ulp_f32(rc) + rel_g * std::fabs((double)g[i]);
    }
    if (!ok && bad++ < 8)
      TH_CHECK_MSG(false, "%s(x = %a, g = %a) = %a, reference %.17g", op, x[i], g[i], got[i], r);
  }
  TH_CHECK_MSG(bad == 0, "%s: %d of %zu elements beyond tolerance", op, bad, got.size());
}

// ---- reference semantics written from the header -----------------------------------------------

bool neg_zero(float x) { return x == 0.0f && std::signbit(x); }

// IEEE 754-2019 maximum / minimum: NaN if either is NaN; -0 < +0.
float ref_max(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return NAN;
  if (a == b) return (neg_zero(a) && neg_zero(b)) ? -0.0f : (a == 0.0f ? 0.0f : a);
  return a > b ? a : b;
}
float ref_min(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return NAN;
  if (a == b) return (neg_zero(a) || neg_zero(b)) ? (a == 0.0f ? -0.0f : a) : a;
  return a < b ? a : b;
}

// ---- exact ops --------------------------------------------------------------------------------

void check_exact_binary() {
  std::vector<float> a, b;
  binary_inputs(21, a, b);
  struct Op {
    const char *name;
    BinaryFn fn;
    std::function<float(float, float)> ref;
  };
  const std::vector<Op> ops = {
      {"add", tlrt_add, [](float x, float y) { return x + y; }},
      {"sub", tlrt_sub, [](float x, float y) { return x - y; }},
      {"mul", tlrt_mul, [](float x, float y) { return x * y; }},
      {"div", tlrt_div, [](float x, float y) { return x / y; }},
      {"max", tlrt_max, ref_max},
      {"min", tlrt_min, ref_min},
      {"log_bwd", tlrt_log_bwd, [](float x, float g) { return g / x; }},
      {"inv_bwd", tlrt_inv_bwd, [](float x, float g) { return -(g / x) / x; }},
      {"relu_bwd", tlrt_relu_bwd,
       [](float x, float g) { return std::isnan(x) ? NAN : (x > 0.0f ? g : 0.0f); }},
      {"sqrt_bwd", tlrt_sqrt_bwd,
       [](float x, float g) {
         return std::isnan(x) ? NAN : (x > 0.0f ? g / (2.0f * std::sqrt(x)) : 0.0f);
       }},
  };
  for (const Op &op : ops) {
    const std::vector<float> y = run2(op.fn, a, b);
    expect_exact(op.name, a, &b, y, [&](size_t i) { return op.ref(a[i], b[i]); });
  }
  // axpy: fma((float)c, b, a), one rounding, for several c (rounded once to float32).
  for (double c : {0.5, 0.1, -3.0, 1.0 + std::ldexp(1.0, -12), 1e-45, -0x1.fffffefffffffp127, 0.0,
                   -0.0}) {
    const float cf = (float)c;
    const std::vector<float> y =
        run2([c](const tlrt_buffer *p, const tlrt_buffer *q, tlrt_buffer **o) {
               return tlrt_axpy(p, q, c, o);
             }, a, b);
    expect_exact("axpy", a, &b, y, [&](size_t i) { return std::fmaf(cf, b[i], a[i]); });
  }
  // The host-scalar rule: NaN, an infinity, or a value that rounds to +-inf in float32 is refused.
  for (double c : {(double)NAN, (double)INFINITY, -(double)INFINITY, 1e40, -1e40}) {
    tlrt_buffer *ba = th::upload(a), *bb = th::upload(b), *y = nullptr;
    TH_STATUS(tlrt_axpy(ba, bb, c, &y), TLRT_ERR_INVALID_ARGUMENT);
    TH_CHECK(y == nullptr);
    tlrt_buffer_free(ba);
    tlrt_buffer_free(bb);
  }
}

void check_axpy_is_fused() {
  // Inputs where one fused multiply-add and a*b+c rounded twice differ.
  struct Case {
    float a, b;
    double c;
    float fused;
  };
  const float t12 = std::ldexp(1.0f, -12), t11 = std::ldexp(1.0f, -11);
  const Case cases[] = {
      // (1 + 2^-12)^2 = 1 + 2^-11 + 2^-24 rounds (tie, to even) to 1 + 2^-11: unfused gives 0.
      {-(1.0f + t11), 1.0f + t12, 1.0 + (double)t12, std::ldexp(1.0f, -24)},
      // 3 * (1 + 2^-23) = 3 + 3*2^-23 rounds to 3 + 2^-21: unfused gives 2^-21, fused 3*2^-23.
      {-3.0f, 1.0f + std::ldexp(1.0f, -23), 3.0, 3.0f * std::ldexp(1.0f, -23)},
      // (1 - 2^-12)(1 + 2^-12) = 1 - 2^-24 exactly; with a = -1: -2^-24 either way (control).
      {-1.0f, 1.0f + t12, 1.0 - (double)t12, -std::ldexp(1.0f, -24)},
  };
  for (const Case &k : cases) {
    tlrt_buffer *ba = th::upload({k.a}), *bb = th::upload({k.b}), *y = nullptr;
    TH_OK(tlrt_axpy(ba, bb, k.c, &y));
    const std::vector<float> out = th::download(y);
    const float cf = (float)k.c;
    volatile float prod = cf * k.b;  // rounded product, for the record
    const float unfused = prod + k.a;
    TH_CHECK_MSG(out.size() == 1 && th::bits_of(out[0]) == th::bits_of(k.fused),
                 "axpy(a = %a, b = %a, c = %a) = %a, expected the fused %a (unfused: %a)", k.a, k.b,
                 cf, out.empty() ? 0.0f : out[0], k.fused, unfused);
    TH_CHECK(th::bits_of(std::fmaf(cf, k.b, k.a)) == th::bits_of(k.fused));
    tlrt_buffer_free(ba);
    tlrt_buffer_free(bb);
    tlrt_buffer_free(y);
  }
  // The first two cases really do discriminate.
  TH_CHECK((float)(cases[0].c) * cases[0].b + cases[0].a != cases[0].fused);
  TH_CHECK((float)(cases[1].c) * cases[1].b + cases[1].a != cases[1].fused);
}

void check_minmax_specials() {
  struct Case {
    float a, b;
    uint32_t max_bits, min_bits;
  };
  const float nan = NAN, inf = INFINITY;
  const Case cases[] = {
      {-0.0f, 0.0f, 0x00000000u, 0x80000000u},
      {0.0f, -0.0f, 0x00000000u, 0x80000000u},
      {-0.0f, -0.0f, 0x80000000u, 0x80000000u},
      {0.0f, 0.0f, 0x00000000u, 0x00000000u},
      {-inf, inf, 0x7F800000u, 0xFF800000u},
      {1e-45f, -1e-45f, 0x00000001u, 0x80000001u},
      {1e-45f, 0.0f, 0x00000001u, 0x00000000u},
  };
  for (const Case &c : cases) {
    const std::vector<float> mx = run2(tlrt_max, {c.a}, {c.b}), mn = run2(tlrt_min, {c.a}, {c.b});
    TH_CHECK_MSG(th::bits_of(mx[0]) == c.max_bits, "max(%a, %a) = %a", c.a, c.b, mx[0]);
    TH_CHECK_MSG(th::bits_of(mn[0]) == c.min_bits, "min(%a, %a) = %a", c.a, c.b, mn[0]);
  }
  // NaN in either position wins over everything, infinities included (unlike fmaxf).
  for (float other : {1.0f, -inf, inf, 0.0f, -0.0f, nan}) {
    TH_CHECK(std::isnan(run2(tlrt_max, {nan}, {other})[0]));
    TH_CHECK(std::isnan(run2(tlrt_max, {other}, {nan})[0]));
    TH_CHECK(std::isnan(run2(tlrt_min, {nan}, {other})[0]));
    TH_CHECK(std::isnan(run2(tlrt_min, {other}, {nan})[0]));
  }
}

void check_minmax_bwd() {
  std::vector<float> a, b;
  binary_inputs(31, a, b);
  th::Rng rng(32);
  std::vector<float> g = rng.vec(a.size());
  // Some special gradients too.
  const std::vector<float> e = th::edge_values();
  for (size_t i = 0; i < g.size(); i += 7) g[i] = e[(i / 7) % e.size()];
  for (bool is_max : {true, false}) {
    tlrt_buffer *ba = th::upload(a), *bb = th::upload(b), *bg = th::upload(g);
    tlrt_buffer *da = nullptr, *db = nullptr;
    TH_OK((is_max ? tlrt_max_bwd : tlrt_min_bwd)(ba, bb, bg, &da, &db));
    const std::vector<float> ga = th::download(da), gb = th::download(db);
    TH_CHECK(ga.size() == a.size() && gb.size() == a.size());
    int bad = 0;
    for (size_t i = 0; i < ga.size() && i < gb.size(); ++i) {
      // Winner g, loser 0, tie (+0 == -0 included) 0.5 g each, a NaN operand wins (a if both).
      float wa, wb;
      if (std::isnan(a[i])) {
        wa = g[i], wb = 0.0f;
      } else if (std::isnan(b[i])) {
        wa = 0.0f, wb = g[i];
      } else if (a[i] == b[i]) {
        wa = wb = 0.5f * g[i];
      } else if ((a[i] > b[i]) == is_max) {
        wa = g[i], wb = 0.0f;
      } else {
        wa = 0.0f, wb = g[i];
      }
      if (!(th::same_bits(ga[i], wa) && th::same_bits(gb[i], wb)) && bad++ < 8)
        TH_CHECK_MSG(false, "%s_bwd(%a, %a, g = %a) = (%a, %a), expected (%a, %a)",
                     is_max ? "max" : "min", a[i], b[i], g[i], ga[i], gb[i], wa, wb);
    }
    TH_CHECK_MSG(bad == 0, "%s_bwd: %d elements differ", is_max ? "max" : "min", bad);
    for (tlrt_buffer *p : {ba, bb, bg, da, db}) tlrt_buffer_free(p);
  }
  // Explicit: ties split, signed-zero tie, NaN wins.
  for (bool is_max : {true, false}) {
    const std::vector<float> A = {1.0f, -0.0f, NAN, 2.0f, NAN}, B = {1.0f, 0.0f, 5.0f, NAN, NAN},
                             G = {3.0f, 4.0f, 6.0f, 8.0f, 10.0f};
    tlrt_buffer *ba = th::upload(A), *bb = th::upload(B), *bg = th::upload(G);
    tlrt_buffer *da = nullptr, *db = nullptr;
    TH_OK((is_max ? tlrt_max_bwd : tlrt_min_bwd)(ba, bb, bg, &da, &db));
    const std::vector<float> ga = th::download(da), gb = th::download(db);
    const std::vector<float> wa = {1.5f, 2.0f, 6.0f, 0.0f, 10.0f}, wb = {1.5f, 2.0f, 0.0f, 8.0f, 0.0f};
    for (size_t i = 0; i < 5; ++i)
      TH_CHECK_MSG(ga[i] == wa[i] && gb[i] == wb[i], "%s_bwd case %zu: (%g, %g)",
                   is_max ? "max" : "min", i, ga[i], gb[i]);
    for (tlrt_buffer *p : {ba, bb, bg, da, db}) tlrt_buffer_free(p);
  }
}

void check_exact_unary() {
  const std::vector<float> x = unary_inputs(41);
  struct Op {
    const char *name;
    UnaryFn fn;
    std::function<float(float)> ref;
    bool payload_exact;  // abs / neg are defined on the bit pattern (NaN sign included)
  };
  const std::vector<Op> ops = {
      {"abs", tlrt_abs, [](float v) { return from_bits(th::bits_of(v) & 0x7FFFFFFFu); }, true},
      {"neg", tlrt_neg, [](float v) { return from_bits(th::bits_of(v) ^ 0x80000000u); }, true},
      {"sqrt", tlrt_sqrt, [](float v) { return std::sqrt(v); }, false},
      {"inv", tlrt_inv, [](float v) { return 1.0f / v; }, false},
      {"relu", tlrt_relu, [](float v) { return std::isnan(v) ? v : (v > 0.0f ? v : 0.0f); }, false},
  };
  for (const Op &op : ops)
    expect_exact(op.name, x, nullptr, run1(op.fn, x), [&](size_t i) { return op.ref(x[i]); },
                 op.payload_exact);
  // scale: x * (float)c, c rounded once (0x1.fffffefffffffp127, the largest double below the
  // float32 overflow threshold, rounds to FLT_MAX; 1e-50 rounds to +0).
  for (double c : {2.0, 0.1, -3.5, -0.0, 0x1.fffffefffffffp127, 1e-50, 1.0 / 3.0}) {
    const float cf = (float)c;
    const std::vector<float> y =
        run1([c](const tlrt_buffer *p, tlrt_buffer **o) { return tlrt_scale(p, c, o); }, x);
    expect_exact("scale", x, nullptr, y, [&](size_t i) { return x[i] * cf; });
  }
  // The host-scalar rule: NaN, an infinity, or a value that rounds to +-inf in float32 is refused.
  for (double c : {(double)NAN, (double)INFINITY, -(double)INFINITY, 1e40, -1e40}) {
    tlrt_buffer *bx = th::upload(x), *y = nullptr;
    TH_STATUS(tlrt_scale(bx, c, &y), TLRT_ERR_INVALID_ARGUMENT);
    TH_CHECK(y == nullptr);
    tlrt_buffer_free(bx);
  }
  // Spot values from the header.
  const float inf = INFINITY, nan = NAN;
  auto one = [](tlrt_status (*f)(const tlrt_buffer *, tlrt_buffer **), float v) {
    return run1(f, {v})[0];
  };
  TH_CHECK(th::bits_of(one(tlrt_sqrt, -0.0f)) == 0x80000000u);
  TH_CHECK(std::isnan(one(tlrt_sqrt, -1.0f)) && std::isnan(one(tlrt_sqrt, -inf)));
  TH_CHECK(one(tlrt_sqrt, inf) == inf && one(tlrt_sqrt, 4.0f) == 2.0f);
  TH_CHECK(one(tlrt_inv, 0.0f) == inf && one(tlrt_inv, -0.0f) == -inf);
  TH_CHECK(th::bits_of(one(tlrt_inv, -inf)) == 0x80000000u);
  TH_CHECK(th::bits_of(one(tlrt_relu, -0.0f)) == 0u);  // relu(-0) = +0
  TH_CHECK(th::bits_of(one(tlrt_relu, -inf)) == 0u);
  TH_CHECK(std::isnan(one(tlrt_relu, nan)) && std::isnan(one(tlrt_relu, -nan)));
  TH_CHECK(one(tlrt_relu, 1e-45f) == 1e-45f && one(tlrt_relu, inf) == inf);
  TH_CHECK(th::bits_of(one(tlrt_abs, -nan)) == (th::bits_of(-nan) & 0x7FFFFFFFu));
}

void check_clamp() {
  const std::vector<float> x = unary_inputs(51);
  struct B {
    double lo, hi;
  };
  const double inf = INFINITY;
  for (const B &b : {B{-1.0, 1.0}, B{0.1, 0.7}, B{-inf, 0.0}, B{0.0, inf}, B{-inf, inf},
                     B{2.0, -2.0} /* lo > hi */, B{3.0, 3.0}, B{-0.0, 0.0}, B{0.0, -0.0},
                     B{1e-50, 0x1.fffffefffffffp127} /* rounded once: 0 and FLT_MAX */,
                     B{-1e-45, 1e-45}}) {
    const float lo = (float)b.lo, hi = (float)b.hi;
    const std::vector<float> y = run1(
        [b](const tlrt_buffer *p, tlrt_buffer **o) { return tlrt_clamp(p, b.lo, b.hi, o); }, x);
    expect_exact("clamp", x, nullptr, y, [&](size_t i) { return ref_min(ref_max(x[i], lo), hi); });
    // The parity gaps, stated separately: NaN stays NaN; lo > hi gives hi for every number.
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (std::isnan(x[i])) {
        TH_CHECK_MSG(std::isnan(y[i]), "clamp(NaN, %g, %g) = %a", lo, hi, y[i]);
      } else if (lo > hi) {
        TH_CHECK_MSG(th::bits_of(y[i]) == th::bits_of(hi), "clamp(%a, %g, %g) = %a, expected hi",
                     x[i], lo, hi, y[i]);
      } else {
        TH_CHECK(y[i] >= lo && y[i] <= hi);
      }
    }
    // clamp_bwd: g if lo < x < hi strictly, NaN if x is NaN, else 0.
    th::Rng rng(52);
    std::vector<float> g = rng.vec(x.size());
    // Inputs exactly at the bounds get no gradient.
    std::vector<float> xb = x;
    for (size_t i = 0; i < 64 && i + 1 < xb.size(); i += 2) {
      xb[i] = lo;
      xb[i + 1] = hi;
    }
    const std::vector<float> dy = run2(
        [b](const tlrt_buffer *p, const tlrt_buffer *q, tlrt_buffer **o) {
          return tlrt_clamp_bwd(p, q, b.lo, b.hi, o);
        }, xb, g);
    expect_exact("clamp_bwd", xb, &g, dy, [&](size_t i) {
      return std::isnan(xb[i]) ? NAN : ((xb[i] > lo && xb[i] < hi) ? g[i] : 0.0f);
    });
  }
  // Infinite bounds are accepted as themselves, but a finite bound that rounds to +-inf in float32
  // is refused (the host-scalar rule: pass the infinity to mean no bound).
  for (const B &b : {B{-1e40, 1.0}, B{-1.0, 1e40}, B{1e40, -1e40}}) {
    tlrt_buffer *bx = th::upload(x), *y = nullptr;
    TH_STATUS(tlrt_clamp(bx, b.lo, b.hi, &y), TLRT_ERR_INVALID_ARGUMENT);
    TH_CHECK(y == nullptr);
    TH_STATUS(tlrt_clamp_bwd(bx, bx, b.lo, b.hi, &y), TLRT_ERR_INVALID_ARGUMENT);
    TH_CHECK(y == nullptr);
    tlrt_buffer_free(bx);
  }
}

void check_abs_bwd() {
  // sign(x) * g with sign(+-0) = 0 and sign(NaN) = NaN. Nonzero x: exactly g or -g. For x = +-0
  // and a finite g the result is 0 (its sign is not asserted: 0 * g would give -0 for g < 0 while
  // "sign(0) = 0" reads as +0; reported as a contract question). x = +-0 with an infinite or NaN g
  // (0 * inf) is likewise left open.
  std::vector<float> a, b;
  binary_inputs(61, a, b);
  const std::vector<float> y = run2(tlrt_abs_bwd, a, b);
  int bad = 0, zero_sign_minus = 0, zero_inf = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    const float x = a[i], g = b[i];
    bool ok;
    if (std::isnan(x)) {
      ok = std::isnan(y[i]);
    } else if (x > 0.0f) {
      ok = th::same_bits(y[i], g);
    } else if (x < 0.0f) {
      ok = th::same_bits(y[i], -g);
    } else if (std::isfinite(g)) {
      ok = y[i] == 0.0f;
      zero_sign_minus += ok && std::signbit(y[i]) != std::signbit(0.0f * g);
    } else {
      ok = true;
      zero_inf += !std::isnan(y[i]);
    }
    if (!ok && bad++ < 8)
      TH_CHECK_MSG(false, "abs_bwd(x = %a, g = %a) = %a", x, g, y[i]);
  }
  TH_CHECK_MSG(bad == 0, "abs_bwd: %d elements differ", bad);
  if (zero_sign_minus || zero_inf)
    std::printf("contract question: abs_bwd at x = +-0 differs from the literal 0.0f * g in %d "
                "zero signs and %d non-finite g (result not NaN)\n", zero_sign_minus, zero_inf);
}

void check_sqrt_bwd_specials() {
  const float inf = INFINITY;
  const std::vector<float> x = {0.0f, -0.0f, -1.0f, -inf, NAN, 4.0f, inf, 1e-45f};
  const std::vector<float> g = {5.0f, 5.0f, 5.0f, 5.0f, 5.0f, 5.0f, 5.0f, 1.0f};
  const std::vector<float> y = run2(tlrt_sqrt_bwd, x, g);
  for (size_t i = 0; i < 4; ++i) TH_CHECK_MSG(th::bits_of(y[i]) == 0u, "sqrt_bwd(%a) = %a", x[i], y[i]);
  TH_CHECK(std::isnan(y[4]));
  TH_CHECK(y[5] == 1.25f);
  TH_CHECK(th::bits_of(y[6]) == 0u);  // g / (2 * inf)
  TH_CHECK(y[7] == 1.0f / (2.0f * std::sqrt(1e-45f)));
  // relu_bwd: g if x > 0, NaN if x is NaN, else 0.
  const std::vector<float> r = run2(tlrt_relu_bwd, x, g);
  for (size_t i = 0; i < 4; ++i) TH_CHECK(th::bits_of(r[i]) == 0u);
  TH_CHECK(std::isnan(r[4]) && r[5] == 5.0f && r[6] == 5.0f && r[7] == 1.0f);
}

// ---- shared math ---------------------------------------------------------------------------

constexpr double kSqrt2OverPi = 0.79788456080286535588;  // sqrt(2 / pi)
constexpr double kGeluC = 0.044715;

// Stable double references.
double d_sigmoid(double x) {
  if (x >= 0) return 1.0 / (1.0 + std::exp(-x));
  const double e = std::exp(x);
  return e / (1.0 + e);
}
// s * (1 - s) without cancellation: e^-|x| / (1 + e^-|x|)^2.
double d_sigmoid_grad(double x) {
  if (std::isinf(x)) return 0.0;
  const double e = std::exp(-std::fabs(x));
  return e / ((1.0 + e) * (1.0 + e));
}
double d_softplus(double x) {
  if (std::isinf(x)) return x > 0 ? x : 0.0;
  return std::max(x, 0.0) + std::log1p(std::exp(-std::fabs(x)));
}
double d_gelu_z(double x) { return kSqrt2OverPi * (x + kGeluC * x * x * x); }
double d_gelu(double x) { return x * d_sigmoid(2.0 * d_gelu_z(x)); }
double d_gelu_grad(double x) {
  const double z2 = 2.0 * d_gelu_z(x);
  const double dz = kSqrt2OverPi * (1.0 + 3.0 * kGeluC * x * x);
  return d_sigmoid(z2) + x * d_sigmoid_grad(z2) * 2.0 * dz;
}

// silu(x) = x * sigmoid(x) (the limits at +-inf: +inf, -0); silu'(x) = s + x s (1 - s) (limits 1
// and 0).
double d_silu(double x) {
  if (std::isinf(x)) return x > 0 ? x : -0.0;
  return x * d_sigmoid(x);
}
double d_silu_grad(double x) {
  if (std::isinf(x)) return x > 0 ? 1.0 : 0.0;
  return d_sigmoid(x) + x * d_sigmoid_grad(x);
}

std::vector<float> drop_infinities(std::vector<float> v) {
  v.erase(std::remove_if(v.begin(), v.end(), [](float x) { return std::isinf(x); }), v.end());
  return v;
}

void check_shared_forward() {
  std::printf("shared-math forward ops against float64:\n");
  struct Op {
    const char *name;
    UnaryFn fn;
    std::function<double(float)> ref;
    double ulps;
    float lo, hi;  // range of the random values (bit patterns are added too)
  };
  const std::vector<Op> ops = {
      {"exp", tlrt_exp, [](float x) { return std::exp((double)x); }, 4, -104.0f, 89.0f},
      {"log", tlrt_log, [](float x) { return std::log((double)x); }, 4, 0.0f, 100.0f},
      {"sigmoid", tlrt_sigmoid, [](float x) { return d_sigmoid(x); }, 4, -110.0f, 30.0f},
      {"tanh", tlrt_tanh, [](float x) { return std::tanh((double)x); }, 4, -10.0f, 10.0f},
      {"softplus", tlrt_softplus, [](float x) { return d_softplus(x); }, 4, -110.0f, 100.0f},
      {"silu", tlrt_silu, [](float x) { return d_silu(x); }, 4, -115.0f, 30.0f},
  };
  for (const Op &op : ops) {
    const std::vector<float> x = unary_inputs(71, op.lo, op.hi);
    expect_ulp(op.name, x, run1(op.fn, x), op.ref, op.ulps);
    // Also near 0 and 1, where relative accuracy matters most.
    const std::vector<float> small = th::Rng(72).vec(2048, -0.01f, 0.01f);
    expect_ulp(op.name, small, run1(op.fn, small), op.ref, op.ulps);
    const std::vector<float> near1 = th::Rng(73).vec(2048, 0.9f, 1.1f);
    expect_ulp(op.name, near1, run1(op.fn, near1), op.ref, op.ulps);
  }
  // gelu: 8 ulp everywhere but at +-inf (see check_shared_specials for the infinities).
  const std::vector<float> xg = drop_infinities(unary_inputs(74, -20.0f, 20.0f));
  expect_ulp("gelu", xg, run1(tlrt_gelu, xg), [](float x) { return d_gelu(x); }, 8);
  const std::vector<float> xg2 = th::Rng(75).vec(2048, -0.01f, 0.01f);
  expect_ulp("gelu", xg2, run1(tlrt_gelu, xg2), [](float x) { return d_gelu(x); }, 8);
}

void check_safe_log() {
  std::printf("safe_log against float64:\n");
  for (double eps : {0.0, 1e-6, 1e-3, 0.5}) {
    const float ef = (float)eps;
    const std::vector<float> x = unary_inputs(81, -120.0f, 100.0f);
    const std::vector<float> y = run1(
        [eps](const tlrt_buffer *p, tlrt_buffer **o) { return tlrt_safe_log(p, eps, o); }, x);
    const std::vector<float> sp = run1(tlrt_softplus, x);
    // Composition: log((float)(softplus(x) + (float)eps)) with the library's softplus, 4 ulp.
    std::vector<float> s(x.size());
    for (size_t i = 0; i < x.size(); ++i) s[i] = sp[i] + ef;
    expect_ulp("safe_log/log", s, y, [](float v) { return std::log((double)v); }, 4);
    // End to end: 4 ulp + 2^-22 absolute against log(softplus_d(x) + eps), where the float
    // intermediate softplus(x) + eps is a normal number (below 2^-126 it carries an absolute error
    // of up to 2^-150 and, at eps = 0, underflows to 0 for x < -103.3, so log gives -inf: the
    // composition check above covers that range).
    int bad = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      if (d_softplus(x[i]) + (double)ef < std::ldexp(1.0, -126)) continue;
      const double r = std::log(d_softplus(x[i]) + (double)ef);
      bool ok;
      if (std::isnan(r) || std::isnan(y[i]))
        ok = std::isnan(r) && std::isnan(y[i]);
      else
        ok = clamp_range(y[i]) == clamp_range(r) ||
             std::fabs(clamp_range(y[i]) - clamp_range(r)) <=
                 4 * ulp_f32(clamp_range(r)) + std::ldexp(1.0, -22);
      if (!ok && bad++ < 8)
        TH_CHECK_MSG(false, "safe_log(%a, eps %g) = %a, reference %.17g", x[i], eps, y[i], r);
    }
    TH_CHECK_MSG(bad == 0, "safe_log(eps %g): %d elements beyond tolerance", eps, bad);
    // With eps > 0, finite for every finite x.
    if (eps > 0)
      for (size_t i = 0; i < x.size(); ++i)
        if (std::isfinite(x[i])) TH_CHECK_MSG(std::isfinite(y[i]), "safe_log(%a, %g) = %a", x[i], eps, y[i]);
  }
}

void check_shared_specials() {
  const float inf = INFINITY, nan = NAN;
  auto one = [](tlrt_status (*f)(const tlrt_buffer *, tlrt_buffer **), float v) {
    return run1(f, {v})[0];
  };
  // exp
  TH_CHECK(th::bits_of(one(tlrt_exp, -inf)) == 0u);
  TH_CHECK(one(tlrt_exp, inf) == inf);
  TH_CHECK(one(tlrt_exp, 0.0f) == 1.0f && one(tlrt_exp, -0.0f) == 1.0f);
  TH_CHECK(one(tlrt_exp, 89.0f) == inf && one(tlrt_exp, -200.0f) == 0.0f);
  TH_CHECK(std::isnan(one(tlrt_exp, nan)));
  // log
  TH_CHECK(one(tlrt_log, 0.0f) == -inf && one(tlrt_log, -0.0f) == -inf);
  TH_CHECK(std::isnan(one(tlrt_log, -1.0f)) && std::isnan(one(tlrt_log, -inf)));
  TH_CHECK(std::isnan(one(tlrt_log, -1e-45f)) && std::isnan(one(tlrt_log, nan)));
  TH_CHECK(one(tlrt_log, inf) == inf);
  TH_CHECK(th::bits_of(one(tlrt_log, 1.0f)) == 0u);
  // sigmoid: finite limits
  TH_CHECK(one(tlrt_sigmoid, inf) == 1.0f && th::bits_of(one(tlrt_sigmoid, -inf)) == 0u);
  TH_CHECK(one(tlrt_sigmoid, 0.0f) == 0.5f && std::isnan(one(tlrt_sigmoid, nan)));
  TH_CHECK(one(tlrt_sigmoid, 100.0f) == 1.0f);
  // tanh: no overflow, exactly +-1 at large |x|, odd, tiny x passes through.
  for (float big : {10.0f, 20.0f, 100.0f, 1e30f, FLT_MAX, inf}) {
    TH_CHECK_MSG(one(tlrt_tanh, big) == 1.0f, "tanh(%g) = %a", big, one(tlrt_tanh, big));
    TH_CHECK_MSG(one(tlrt_tanh, -big) == -1.0f, "tanh(%g) = %a", -big, one(tlrt_tanh, -big));
  }
  TH_CHECK(th::bits_of(one(tlrt_tanh, -0.0f)) == 0x80000000u);
  TH_CHECK(th::bits_of(one(tlrt_tanh, 0.0f)) == 0u);
  TH_CHECK(ulp_error(one(tlrt_tanh, 1e-30f), std::tanh((double)1e-30f)) <= 1.0);
  TH_CHECK(ulp_error(one(tlrt_tanh, -1e-30f), std::tanh((double)-1e-30f)) <= 1.0);
  TH_CHECK(one(tlrt_tanh, 1e-45f) == 1e-45f);
  TH_CHECK(std::isnan(one(tlrt_tanh, nan)));
  // softplus
  TH_CHECK(th::bits_of(one(tlrt_softplus, -inf)) == 0u && one(tlrt_softplus, inf) == inf);
  TH_CHECK(one(tlrt_softplus, 1e30f) == 1e30f && std::isnan(one(tlrt_softplus, nan)));
  TH_CHECK(ulp_error(one(tlrt_softplus, 0.0f), std::log(2.0)) <= 4.0);
  // silu: the limits at +-inf, signed zeros kept, x itself for large x, -0 far below.
  TH_CHECK(one(tlrt_silu, inf) == inf && th::bits_of(one(tlrt_silu, -inf)) == 0x80000000u);
  TH_CHECK(th::bits_of(one(tlrt_silu, 0.0f)) == 0u);
  TH_CHECK(th::bits_of(one(tlrt_silu, -0.0f)) == 0x80000000u);
  TH_CHECK(std::isnan(one(tlrt_silu, nan)));
  for (float big : {17.0f, 20.0f, 100.0f, 1e30f, FLT_MAX})
    TH_CHECK_MSG(one(tlrt_silu, big) == big, "silu(%g) = %a", big, one(tlrt_silu, big));
  for (float neg : {-109.0f, -200.0f, -1e30f, -FLT_MAX})
    TH_CHECK_MSG(th::bits_of(one(tlrt_silu, neg)) == 0x80000000u, "silu(%g) = %a", neg,
                 one(tlrt_silu, neg));
  TH_CHECK(one(tlrt_silu, 1e-30f) == 5e-31f && one(tlrt_silu, -1e-30f) == -5e-31f);
  // gelu: tiny and finite at -10, x at +10 (within 1 ulp), +inf at +inf.
  const float gm10 = one(tlrt_gelu, -10.0f), g10 = one(tlrt_gelu, 10.0f);
  TH_CHECK_MSG(std::isfinite(gm10) && gm10 <= 0.0f && std::fabs(gm10) < 1e-30f, "gelu(-10) = %a",
               gm10);
  TH_CHECK_MSG(ulp_error(g10, 10.0) <= 1.0, "gelu(10) = %a", g10);
  TH_CHECK(ulp_error(gm10, d_gelu(-10.0)) <= 8.0);
  TH_CHECK(th::bits_of(one(tlrt_gelu, 0.0f)) == 0u && std::isnan(one(tlrt_gelu, nan)));
  TH_CHECK(one(tlrt_gelu, inf) == inf);
  // Contract question (not asserted): x * sigmoid(2z) at x = -inf is -inf * 0. The header says
  // nothing about gelu(-inf) (or gelu_bwd at +-inf); record what the library returns.
  const float gmi = one(tlrt_gelu, -inf);
  const std::vector<float> gb = run2(tlrt_gelu_bwd, {-inf, inf}, {1.0f, 1.0f});
  std::printf("contract question: gelu(-inf) = %g; gelu_bwd(-inf, 1) = %g, gelu_bwd(+inf, 1) = %g\n",
              gmi, gb[0], gb[1]);
}

void check_shared_backward() {
  struct Op {
    const char *name;
    BinaryFn fn;
    std::function<double(float)> d;  // derivative factor: the result is g * d(x)
  };
  const std::vector<Op> ops = {
      {"exp_bwd", tlrt_exp_bwd, [](float x) { return std::exp((double)x); }},
      {"sigmoid_bwd", tlrt_sigmoid_bwd, [](float x) { return d_sigmoid_grad(x); }},
      {"tanh_bwd", tlrt_tanh_bwd,
       [](float x) {
         if (std::isinf(x)) return 0.0;
         const double c = std::cosh((double)x);
         return 1.0 / (c * c);  // 1 - tanh^2 without cancellation (0 once cosh overflows)
       }},
      {"softplus_bwd", tlrt_softplus_bwd, [](float x) { return d_sigmoid(x); }},
      {"gelu_bwd", tlrt_gelu_bwd, [](float x) { return d_gelu_grad(x); }},
      {"silu_bwd", tlrt_silu_bwd, [](float x) { return d_silu_grad(x); }},
  };
  std::vector<Op> all = ops;
  for (double eps : {1e-6, 1e-3, 0.5}) {
    const float ef = (float)eps;
    all.push_back({"safe_log_bwd",
                   [eps](const tlrt_buffer *p, const tlrt_buffer *q, tlrt_buffer **o) {
                     return tlrt_safe_log_bwd(p, q, eps, o);
                   },
                   [ef](float x) { return d_sigmoid(x) / (d_softplus(x) + (double)ef); }});
  }
  const std::vector<float> edges = th::edge_values();
  for (const Op &op : all) {
    const bool gelu = std::string(op.name) == "gelu_bwd";
    // 1. Random x and g.
    th::Rng rng(91);
    for (float range : {4.0f, 20.0f}) {
      const std::vector<float> x = rng.vec(4096, -range, range), g = rng.vec(4096);
      expect_bwd(op.name, x, g, run2(op.fn, x, g), op.d);
    }
    // 2. Every edge x (infinities aside for gelu_bwd: a contract question) with |g| >= 1, so
    //    that an intermediate overflow of the documented float formula is an overflow of the
    //    result too.
    std::vector<float> x, g;
    for (float e : edges)
      for (float gv : {1.0f, -1.0f, 2.5f, -3.0f})
        if (!(gelu && std::isinf(e))) {
          x.push_back(e);
          g.push_back(gv);
        }
    expect_bwd(op.name, x, g, run2(op.fn, x, g), op.d);
    // 3. Every edge g (NaN, +-inf, +-0, subnormal, FLT_MAX) at well-conditioned x.
    x.clear();
    g.clear();
    for (float e : edges)
      for (float xv : {-3.5f, -1.25f, -0.3f, 0.2f, 0.9f, 2.7f}) {
        x.push_back(xv);
        g.push_back(e);
      }
    expect_bwd(op.name, x, g, run2(op.fn, x, g), op.d);
  }
  // safe_log_bwd with eps = 0 at moderate x (far tails give 0/0 by design of the float formula).
  const std::vector<float> x = th::Rng(92).vec(4096, -20.0f, 20.0f), g = th::Rng(93).vec(4096);
  expect_bwd("safe_log_bwd(eps=0)", x, g,
             run2([](const tlrt_buffer *p, const tlrt_buffer *q, tlrt_buffer **o) {
                    return tlrt_safe_log_bwd(p, q, 0.0, o);
                  }, x, g),
             [](float v) { return d_sigmoid(v) / d_softplus(v); });
  // Spot values: exp_bwd(0, g) = g, tanh_bwd(0, g) = g, sigmoid_bwd(0, g) = g / 4, softplus_bwd(0,
  // g) = g / 2, gelu_bwd(0, g) = g / 2, silu_bwd(0, g) = g / 2; NaN x gives NaN.
  const std::vector<float> zx = {0.0f, NAN}, zg = {3.0f, 1.0f};
  TH_CHECK(run2(tlrt_exp_bwd, zx, zg)[0] == 3.0f && std::isnan(run2(tlrt_exp_bwd, zx, zg)[1]));
  TH_CHECK(run2(tlrt_tanh_bwd, zx, zg)[0] == 3.0f && std::isnan(run2(tlrt_tanh_bwd, zx, zg)[1]));
  TH_CHECK(run2(tlrt_sigmoid_bwd, zx, zg)[0] == 0.75f);
  TH_CHECK(run2(tlrt_softplus_bwd, zx, zg)[0] == 1.5f);
  TH_CHECK(run2(tlrt_gelu_bwd, zx, zg)[0] == 1.5f && std::isnan(run2(tlrt_gelu_bwd, zx, zg)[1]));
  TH_CHECK(run2(tlrt_silu_bwd, zx, zg)[0] == 1.5f && std::isnan(run2(tlrt_silu_bwd, zx, zg)[1]));
  // silu_bwd at the infinities: the limits 1 and -0 times g; silu' = 0 at x ~ -1.27846 (a sign
  // change between neighbouring floats there).
  const std::vector<float> sb = run2(tlrt_silu_bwd, {INFINITY, -INFINITY, -1.2784f, -1.2785f},
                                     {2.0f, 2.0f, 1.0f, 1.0f});
  TH_CHECK(sb[0] == 2.0f && th::bits_of(sb[1]) == 0x80000000u);
  TH_CHECK_MSG(sb[2] > 0.0f && sb[3] < 0.0f, "silu' around its zero: %a, %a", sb[2], sb[3]);
}

// ---- every op on empty and size-1 buffers -----------------------------------------------------

void check_sizes() {
  const std::vector<std::pair<const char *, UnaryFn>> unary = {
      {"abs", tlrt_abs}, {"neg", tlrt_neg}, {"sqrt", tlrt_sqrt}, {"inv", tlrt_inv},
      {"relu", tlrt_relu}, {"exp", tlrt_exp}, {"log", tlrt_log}, {"sigmoid", tlrt_sigmoid},
      {"tanh", tlrt_tanh}, {"softplus", tlrt_softplus}, {"gelu", tlrt_gelu}, {"silu", tlrt_silu},
      {"scale", [](const tlrt_buffer *p, tlrt_buffer **o) { return tlrt_scale(p, 2.0, o); }},
      {"clamp", [](const tlrt_buffer *p, tlrt_buffer **o) { return tlrt_clamp(p, -1.0, 1.0, o); }},
      {"safe_log", [](const tlrt_buffer *p, tlrt_buffer **o) { return tlrt_safe_log(p, 0.1, o); }},
  };
  const std::vector<std::pair<const char *, BinaryFn>> binary = {
      {"add", tlrt_add}, {"sub", tlrt_sub}, {"mul", tlrt_mul}, {"div", tlrt_div},
      {"max", tlrt_max}, {"min", tlrt_min}, {"abs_bwd", tlrt_abs_bwd}, {"sqrt_bwd", tlrt_sqrt_bwd},
      {"inv_bwd", tlrt_inv_bwd}, {"log_bwd", tlrt_log_bwd}, {"relu_bwd", tlrt_relu_bwd},
      {"exp_bwd", tlrt_exp_bwd}, {"sigmoid_bwd", tlrt_sigmoid_bwd}, {"tanh_bwd", tlrt_tanh_bwd},
      {"softplus_bwd", tlrt_softplus_bwd}, {"gelu_bwd", tlrt_gelu_bwd},
      {"silu_bwd", tlrt_silu_bwd},
      {"axpy", [](const tlrt_buffer *p, const tlrt_buffer *q, tlrt_buffer **o) {
         return tlrt_axpy(p, q, 0.5, o);
       }},
      {"clamp_bwd", [](const tlrt_buffer *p, const tlrt_buffer *q, tlrt_buffer **o) {
         return tlrt_clamp_bwd(p, q, -1.0, 1.0, o);
       }},
      {"safe_log_bwd", [](const tlrt_buffer *p, const tlrt_buffer *q, tlrt_buffer **o) {
         return tlrt_safe_log_bwd(p, q, 0.1, o);
       }},
  };
  for (const auto &op : unary) {
    TH_CHECK_MSG(run1(op.second, {}).empty(), "%s(empty) is not empty", op.first);
    TH_CHECK_MSG(run1(op.second, {0.75f}).size() == 1, "%s(size 1)", op.first);
  }
  for (const auto &op : binary) {
    TH_CHECK_MSG(run2(op.second, {}, {}).empty(), "%s(empty) is not empty", op.first);
    TH_CHECK_MSG(run2(op.second, {0.75f}, {-2.0f}).size() == 1, "%s(size 1)", op.first);
  }
  for (bool is_max : {true, false}) {
    tlrt_buffer *e = th::upload({}), *da = nullptr, *db = nullptr;
    TH_OK((is_max ? tlrt_max_bwd : tlrt_min_bwd)(e, e, e, &da, &db));
    TH_CHECK(th::download(da).empty() && th::download(db).empty());
    for (tlrt_buffer *p : {e, da, db}) tlrt_buffer_free(p);
  }
  // Outputs are fresh buffers: the input is untouched and a second output is a new handle.
  const std::vector<float> v = {1.0f, -2.0f, 3.0f};
  tlrt_buffer *x = th::upload(v), *y1 = nullptr, *y2 = nullptr;
  TH_OK(tlrt_neg(x, &y1));
  TH_OK(tlrt_neg(x, &y2));
  TH_CHECK(y1 != x && y2 != x && y1 != y2);
  TH_CHECK(th::download(x) == v);
  for (tlrt_buffer *p : {x, y1, y2}) tlrt_buffer_free(p);
}

}  // namespace

int main() {
  const tlrt_allocator_stats start = th::stats();
  check_exact_binary();
  check_axpy_is_fused();
  check_minmax_specials();
  check_minmax_bwd();
  check_exact_unary();
  check_clamp();
  check_abs_bwd();
  check_sqrt_bwd_specials();
  check_shared_forward();
  check_safe_log();
  check_shared_specials();
  check_shared_backward();
  check_sizes();
  const tlrt_allocator_stats end = th::stats();
  TH_CHECK(end.live_bytes == start.live_bytes && end.live_handles == start.live_handles);
  return th::finish("test_elementwise");
}
