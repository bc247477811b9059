// Suite 'grad': every backward kernel of abi/tlrt_elementwise.h against a central finite
// difference of its FORWARD op computed through the library, plus the conventions the header
// states at kinks and ties, checked exactly. Runs on the CPU always and on CUDA(0) when usable.
//
// Finite difference. For seeded random x away from kinks and random g, the kernel's dx is compared
// with g * D, D = (f(x+h) - f(x-h)) / (2h), where f(x+-h) are the library's float32 outputs and D
// is evaluated in float64. The samples are constructed so that the step is exact: x is a multiple
// of 2^-12 with |x| < 128 and h is a power of two >= 2^-12, so x, x+h and x-h are all exactly
// representable in float32 (the test checks this: the represented step equals 2h). The error of
// g * D against the true g * f'(x) is then bounded by two terms:
//   truncation  |g| * h^2/6 * M3,   M3 = max |f'''| on [x-h, x+h]   (Taylor remainder of the
//               central difference; M3 is derived per op below from the closed form of f''');
//   rounding    |g| * (E(f(x+h)) + E(f(x-h))) / (2h),   E(y) = 4 * 2^-23 * |y| + A_op:
//               the float32 output differs from the true f by at most its stated accuracy
//               (<= 2.5 ulp for the shared-math ops, 0.5 ulp for sqrt/inv, 0 for the
//               piecewise-linear ops), and one ulp of y is at most 2^-23 |y|; 4 ulp covers all.
//               A_op = 4 * 2^-23 for safe_log (log of a relatively perturbed argument errs
//               absolutely), 0 otherwise.
// The kernel's own float32 evaluation of g * f'(x) adds at most 8 * 2^-23 * |dx| (a few
// roundings) + 4 * 2^-23 * |g| (the cancellation in 1 - s, 1 - t*t and gelu's absolute 1e-7).
// A sample passes when |dx - g*D| <= 2 * (truncation + rounding + kernel); the factor 2 is margin
// on bounds that are already worst case. h is chosen per op (about 1e-2 * max(1, |x|), or
// 1e-2 * |x| for the ops with a pole at 0, smaller for gelu whose f''' bound is global) so that
// the tolerance stays at a few 1e-3 of |g f'| where f' is not near zero; the test prints the
// largest error / tolerance ratio per op.
#include <algorithm>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "harness.hpp"

namespace {

constexpr double kUlp = 1.0 / 8388608.0;  // 2^-23
const double kInf = std::numeric_limits<double>::infinity();

using th::Buf;

using Fwd = std::function<tlrt_status(const tlrt_buffer *, tlrt_buffer **)>;
using Bwd = std::function<tlrt_status(const tlrt_buffer *, const tlrt_buffer *, tlrt_buffer **)>;

struct Case {
  std::string name;
  Fwd fwd;
  Bwd bwd;
  double lo, hi;             // sampling range of x
  bool log_sampling;         // |x| log-uniform in [lo, hi] with a random sign if signed
  bool is_signed;            // (log sampling) both signs
  std::vector<double> kinks; // points the sample keeps away from (|x - k| > 4h)
  double h_rel;              // h ~ h_rel * max(1, |x|) (or h_rel * |x| if pole)
  bool pole;                 // h proportional to |x| (sqrt, inv, log)
  double additive;           // A_op of the rounding bound
  std::function<double(double x, double h)> m3;  // bound of |f'''| on [x-h, x+h]
};

// Stable per-case salt for the seeded generator.
uint64_t fnv1a(const std::string &s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char ch : s) h = (h ^ ch) * 0x100000001b3ull;
  return h;
}

double pow2_floor(double v) { return std::ldexp(1.0, (int)std::floor(std::log2(v))); }

// A sample x (multiple of 2^-12) and its step h (a power of two >= 2^-12).
bool sample(th::Rng &rng, const Case &c, double *x_out, double *h_out) {
  for (int attempt = 0; attempt < 1000; ++attempt) {
    double x;
    if (c.log_sampling) {
      x = std::exp(rng.uniform((float)std::log(c.lo), (float)std::log(c.hi)));
      if (c.is_signed && (rng.gen() & 1)) x = -x;
    } else {
      x = rng.uniform((float)c.lo, (float)c.hi);
    }
    x = std::round(x * 4096.0) / 4096.0;
    const double scale = c.pole ? std::fabs(x) : std::max(1.0, std::fabs(x));
    const double h = std::max(std::ldexp(1.0, -12), pow2_floor(c.h_rel * scale));
    bool ok = !(c.pole && std::fabs(x) <= 4 * h);
    for (double k : c.kinks) ok = ok && std::fabs(x - k) > 4 * h;
    if (ok) {
      *x_out = x;
      *h_out = h;
      return true;
    }
  }
  return false;
}

std::vector<float> get(const tlrt_buffer *b) { return th::download(b); }

Buf up(const std::vector<float> &v, tlrt_device dev) { return Buf(th::upload(v, dev)); }

const char *dev_name(tlrt_device d) { return d == TLRT_DEVICE_CPU ? "cpu" : "cuda"; }

// Central-difference check of one backward kernel on one device.
void check_case(const Case &c, tlrt_device dev, size_t count) {
  th::Rng rng(fnv1a(c.name));
  std::vector<float> x(count), xp(count), xm(count), g(count);
  std::vector<double> h(count);
  for (size_t i = 0; i < count; ++i) {
    double xd, hd;
    if (!sample(rng, c, &xd, &hd)) {
      TH_CHECK_MSG(false, "%s: could not sample x away from the kinks", c.name.c_str());
      return;
    }
    x[i] = (float)xd;
    xp[i] = (float)(xd + hd);
    xm[i] = (float)(xd - hd);
    h[i] = hd;
    const float mag = rng.uniform(0.25f, 2.0f);
    g[i] = (rng.gen() & 1) ? -mag : mag;
  }
  Buf bx = up(x, dev), bxp = up(xp, dev), bxm = up(xm, dev), bg = up(g, dev);
  Buf fp, fm, dx;
  TH_OK(c.fwd(bxp.p, fp.out()));
  TH_OK(c.fwd(bxm.p, fm.out()));
  TH_OK(c.bwd(bx.p, bg.p, dx.out()));
  if (!fp.p || !fm.p || !dx.p) return;
  const std::vector<float> vp = get(fp.p), vm = get(fm.p), vd = get(dx.p);
  if (vp.size() != count || vm.size() != count || vd.size() != count) {
    TH_CHECK_MSG(false, "%s: wrong output sizes", c.name.c_str());
    return;
  }
  size_t bad = 0, first = 0;
  double worst = 0.0;
  for (size_t i = 0; i < count; ++i) {
    const double step = (double)xp[i] - (double)xm[i];
    TH_CHECK_MSG(step == 2 * h[i] && (double)xp[i] - (double)x[i] == h[i],
                 "%s: step at x=%.9g not exact", c.name.c_str(), (double)x[i]);
    const double D = ((double)vp[i] - (double)vm[i]) / step;
    const double gd = g[i];
    const double want = gd * D;
    const double trunc = std::fabs(gd) * h[i] * h[i] / 6.0 * c.m3(x[i], h[i]);
    const double round = std::fabs(gd) *
                         (4 * kUlp * (std::fabs((double)vp[i]) + std::fabs((double)vm[i])) +
                          2 * c.additive) / step;
    const double kern = 8 * kUlp * std::fabs((double)vd[i]) + 4 * kUlp * std::fabs(gd);
    const double tol = 2.0 * (trunc + round + kern) + 1e-37;
    const double err = std::fabs((double)vd[i] - want);
    const bool ok = std::isfinite(vd[i]) && std::isfinite(D) && err <= tol;
    if (!ok) {
      if (bad == 0) first = i;
      ++bad;
    }
    if (std::isfinite(err)) worst = std::max(worst, err / tol);
  }
  TH_CHECK_MSG(bad == 0,
               "%s on %s: %zu of %zu samples off; first x=%.9g h=%g g=%.9g: kernel dx=%.9g, "
               "g*(f(x+h)-f(x-h))/2h=%.9g (f(x+h)=%.9g, f(x-h)=%.9g)",
               c.name.c_str(), dev_name(dev), bad, count, (double)x[first], h[first],
               (double)g[first], (double)vd[first],
               (double)g[first] * ((double)vp[first] - (double)vm[first]) / (2 * h[first]),
               (double)vp[first], (double)vm[first]);
  std::printf("  %-34s %-4s %zu samples, max |error| / tolerance = %.3g\n", c.name.c_str(),
              dev_name(dev), count, worst);
}

// Exact conventions of max_bwd / min_bwd: FD of max/min in each argument.
void check_minmax(bool is_max, tlrt_device dev, size_t count) {
  const char *name = is_max ? "max_bwd" : "min_bwd";
  th::Rng rng(is_max ? 11 : 12);
  std::vector<float> a(count), b(count), g(count), ap(count), am(count), bp(count), bm(count);
  for (size_t i = 0; i < count; ++i) {
    double ad, bd, h;
    do {
      ad = std::round(rng.uniform(-4.0f, 4.0f) * 4096.0) / 4096.0;
      bd = std::round(rng.uniform(-4.0f, 4.0f) * 4096.0) / 4096.0;
      h = pow2_floor(1e-2 * std::max({1.0, std::fabs(ad), std::fabs(bd)}));
    } while (std::fabs(ad - bd) <= 4 * h);
    a[i] = (float)ad;
    b[i] = (float)bd;
    ap[i] = (float)(ad + h);
    am[i] = (float)(ad - h);
    bp[i] = (float)(bd + h);
    bm[i] = (float)(bd - h);
    g[i] = rng.uniform(-2.0f, 2.0f);
  }
  auto fwd = is_max ? tlrt_max : tlrt_min;
  auto bwd = is_max ? tlrt_max_bwd : tlrt_min_bwd;
  Buf A = up(a, dev), B = up(b, dev), G = up(g, dev), AP = up(ap, dev), AM = up(am, dev),
      BP = up(bp, dev), BM = up(bm, dev);
  Buf fap, fam, fbp, fbm, da, db;
  TH_OK(fwd(AP.p, B.p, fap.out()));
  TH_OK(fwd(AM.p, B.p, fam.out()));
  TH_OK(fwd(A.p, BP.p, fbp.out()));
  TH_OK(fwd(A.p, BM.p, fbm.out()));
  TH_OK(bwd(A.p, B.p, G.p, da.out(), db.out()));
  if (!fap.p || !fam.p || !fbp.p || !fbm.p || !da.p || !db.p) return;
  const auto vap = get(fap.p), vam = get(fam.p), vbp = get(fbp.p), vbm = get(fbm.p),
             vda = get(da.p), vdb = get(db.p);
  size_t bad = 0;
  for (size_t i = 0; i < count; ++i) {
    // Away from the tie, max/min are linear in each argument: the difference quotient is
    // exactly 1 or 0, so the kernel must match g * D exactly.
    const double Da = ((double)vap[i] - (double)vam[i]) / ((double)ap[i] - (double)am[i]);
    const double Db = ((double)vbp[i] - (double)vbm[i]) / ((double)bp[i] - (double)bm[i]);
    const bool ok = (double)vda[i] == (double)g[i] * Da && (double)vdb[i] == (double)g[i] * Db &&
                    Da + Db == 1.0;
    if (!ok && bad++ == 0)
      TH_CHECK_MSG(false, "%s on %s: a=%.9g b=%.9g g=%.9g: da=%.9g db=%.9g, FD da=%.9g db=%.9g",
                   name, dev_name(dev), (double)a[i], (double)b[i], (double)g[i], (double)vda[i],
                   (double)vdb[i], g[i] * Da, g[i] * Db);
  }
  TH_CHECK_MSG(bad == 0, "%s on %s: %zu of %zu samples off", name, dev_name(dev), bad, count);
  std::printf("  %-34s %-4s %zu samples, exact match %s\n", name, dev_name(dev), count,
              bad == 0 ? "yes" : "NO");
}

// ---- conventions at kinks and ties, checked exactly ------------------------------------------

// Runs a (x, g) kernel on one element pair and returns dx (NaN on failure, reported).
float one(const Bwd &bwd, float x, float g, tlrt_device dev) {
  Buf bx = up({x}, dev), bg = up({g}, dev), out;
  TH_OK(bwd(bx.p, bg.p, out.out()));
  if (!out.p) return std::nanf("");
  const std::vector<float> v = get(out.p);
  return v.size() == 1 ? v[0] : std::nanf("");
}

#define EXPECT_ZERO(expr)                                                            \
  do {                                                                                    \
    const float v_ = (expr);                                                              \
    TH_CHECK_MSG(v_ == 0.0f, "%s = %.9g, expected 0 (" #expr ")", dev_name(dev), (double)v_); \
  } while (0)
#define EXPECT_BITS(expr, want)                                                                 \
  do {                                                                                          \
    const float v_ = (expr), w_ = (want);                                                       \
    TH_CHECK_MSG(th::same_bits(v_, w_), "%s: %s = %.9g, expected %.9g", dev_name(dev), #expr,   \
                 (double)v_, (double)w_);                                                       \
  } while (0)

void conventions(tlrt_device dev) {
  const float nan = std::nanf("");
  const Bwd relu = tlrt_relu_bwd, absb = tlrt_abs_bwd, sqrtb = tlrt_sqrt_bwd;
  for (float g : {1.5f, -2.0f, 1e30f, 3e-41f}) {
    // relu_bwd: g if x > 0, else 0 (0 included).
    EXPECT_ZERO(one(relu, 0.0f, g, dev));
    EXPECT_ZERO(one(relu, -0.0f, g, dev));
    EXPECT_ZERO(one(relu, -1e-45f, g, dev));
    EXPECT_ZERO(one(relu, -INFINITY, g, dev));
    EXPECT_BITS(one(relu, 1e-45f, g, dev), g);
    EXPECT_BITS(one(relu, 2.0f, g, dev), g);
    EXPECT_BITS(one(relu, nan, g, dev), nan);
    // abs_bwd: sign(x) * g, sign(+-0) = 0.
    EXPECT_ZERO(one(absb, 0.0f, g, dev));
    EXPECT_ZERO(one(absb, -0.0f, g, dev));
    EXPECT_BITS(one(absb, 3.0f, g, dev), g);
    EXPECT_BITS(one(absb, -1e-45f, g, dev), -g);
    EXPECT_BITS(one(absb, -INFINITY, g, dev), -g);
    EXPECT_BITS(one(absb, nan, g, dev), nan);
    // sqrt_bwd: 0 for x <= 0 (the pole at 0 reported as 0), g / (2 sqrt x) for x > 0.
    EXPECT_ZERO(one(sqrtb, 0.0f, g, dev));
    EXPECT_ZERO(one(sqrtb, -0.0f, g, dev));
    EXPECT_ZERO(one(sqrtb, -4.0f, g, dev));
    EXPECT_ZERO(one(sqrtb, -INFINITY, g, dev));
    EXPECT_BITS(one(sqrtb, 4.0f, g, dev), g / 4.0f);
    EXPECT_BITS(one(sqrtb, nan, g, dev), nan);
    // clamp_bwd: g strictly inside (lo, hi), 0 at and beyond the bounds; bounds are rounded to
    // float32 first, so x = 0.1f sits exactly on lo = 0.1.
    const double lo = 0.1, hi = 1.5;
    const Bwd clampb = [lo, hi](const tlrt_buffer *x, const tlrt_buffer *gg, tlrt_buffer **o) {
      return tlrt_clamp_bwd(x, gg, lo, hi, o);
    };
    EXPECT_ZERO(one(clampb, 0.1f, g, dev));
    EXPECT_ZERO(one(clampb, 1.5f, g, dev));
    EXPECT_ZERO(one(clampb, -3.0f, g, dev));
    EXPECT_ZERO(one(clampb, 7.0f, g, dev));
    EXPECT_BITS(one(clampb, std::nextafter(0.1f, 1.0f), g, dev), g);
    EXPECT_BITS(one(clampb, std::nextafter(1.5f, 0.0f), g, dev), g);
    EXPECT_BITS(one(clampb, nan, g, dev), nan);
    const Bwd clamp_inf = [](const tlrt_buffer *x, const tlrt_buffer *gg, tlrt_buffer **o) {
      return tlrt_clamp_bwd(x, gg, -kInf, kInf, o);
    };
    EXPECT_BITS(one(clamp_inf, 3e38f, g, dev), g);
    EXPECT_ZERO(one(clamp_inf, INFINITY, g, dev));  // at the (infinite) bound
    const Bwd clamp_pt = [](const tlrt_buffer *x, const tlrt_buffer *gg, tlrt_buffer **o) {
      return tlrt_clamp_bwd(x, gg, 2.0, 2.0, o);
    };
    EXPECT_ZERO(one(clamp_pt, 2.0f, g, dev));  // lo == hi: nothing is strictly inside
    // silu_bwd: silu'(+-0) = 1/2 exactly, silu'(+inf) = 1, silu'(-inf) = -0 (the limits).
    const Bwd silub = tlrt_silu_bwd;
    EXPECT_BITS(one(silub, 0.0f, g, dev), g * 0.5f);
    EXPECT_BITS(one(silub, -0.0f, g, dev), g * 0.5f);
    EXPECT_BITS(one(silub, INFINITY, g, dev), g);
    EXPECT_BITS(one(silub, -INFINITY, g, dev), g * -0.0f);
    EXPECT_BITS(one(silub, nan, g, dev), nan);
  }

  // max_bwd / min_bwd: ties split 0.5 g each (+0 == -0 included), NaN wins, both NaN: a wins.
  th::Rng rng(21);
  const std::vector<float> gv = {1.5f, -3.0f, 1e-45f, rng.uniform(-2, 2), 3e38f, -0.0f};
  const std::vector<std::pair<float, float>> pairs = {
      {1.25f, 1.25f}, {0.0f, -0.0f}, {-0.0f, 0.0f}, {-7.0f, -7.0f}, {INFINITY, INFINITY},
      {nan, 2.0f},    {2.0f, nan},   {nan, nan},    {nan, -INFINITY}, {5.0f, -5.0f}, {-5.0f, 5.0f}};
  for (int is_max = 0; is_max < 2; ++is_max) {
    auto bwd = is_max ? tlrt_max_bwd : tlrt_min_bwd;
    for (const auto &p : pairs) {
      for (float gg : gv) {
        Buf A = up({p.first}, dev), B = up({p.second}, dev), G = up({gg}, dev), da, db;
        TH_OK(bwd(A.p, B.p, G.p, da.out(), db.out()));
        if (!da.p || !db.p) continue;
        const float va = get(da.p)[0], vb = get(db.p)[0];
        const bool an = std::isnan(p.first), bn = std::isnan(p.second);
        float wa, wb;
        if (an || bn) {
          wa = an ? gg : 0.0f;
          wb = an ? 0.0f : gg;
        } else if (p.first == p.second) {
          wa = wb = 0.5f * gg;
        } else {
          const bool a_wins = is_max ? p.first > p.second : p.first < p.second;
          wa = a_wins ? gg : 0.0f;
          wb = a_wins ? 0.0f : gg;
        }
        // Losers get 0 (either sign accepted); everything else bit for bit.
        const bool ok_a = wa == 0.0f && !std::isnan(wa) ? va == 0.0f : th::same_bits(va, wa);
        const bool ok_b = wb == 0.0f && !std::isnan(wb) ? vb == 0.0f : th::same_bits(vb, wb);
        TH_CHECK_MSG(ok_a && ok_b, "%s on %s: a=%g b=%g g=%g gave da=%.9g db=%.9g, expected %.9g "
                     "%.9g", is_max ? "max_bwd" : "min_bwd", dev_name(dev), (double)p.first,
                     (double)p.second, (double)gg, (double)va, (double)vb, (double)wa, (double)wb);
      }
    }
  }
}

// ---- the cases ---------------------------------------------------------------------------------

std::vector<Case> cases() {
  std::vector<Case> cs;
  auto zero = [](double, double) { return 0.0; };
  // sigma'(t) <= min(1/4, e^-|t|); a = distance of [x-h, x+h] from 0.
  auto near0 = [](double x, double h) { return std::max(0.0, std::fabs(x) - h); };
  auto m3_sigmoid = [near0](double x, double h) {  // |s'''| = s' |1 - 6 s'| <= s'
    return std::min(0.25, std::exp(-near0(x, h)));
  };
  auto m3_tanh = [near0](double x, double h) {  // |t'''| = t' |6 t^2 - 2| <= 4 t' <= 4 min(1, 4 e^-2|x|)
    return 4.0 * std::min(1.0, 4.0 * std::exp(-2.0 * near0(x, h)));
  };

  cs.push_back({"abs_bwd", tlrt_abs, tlrt_abs_bwd, -4, 4, false, false, {0.0}, 1e-2, false, 0, zero});
  cs.push_back({"relu_bwd", tlrt_relu, tlrt_relu_bwd, -4, 4, false, false, {0.0}, 1e-2, false, 0, zero});
  // sqrt''' = 3/8 x^-5/2; inv''' = -6 x^-4; log''' = 2 x^-3, at the end of the interval nearest 0.
  cs.push_back({"sqrt_bwd", tlrt_sqrt, tlrt_sqrt_bwd, 0.05, 50, true, false, {}, 1e-2, true, 0,
                [](double x, double h) { return 0.375 * std::pow(x - h, -2.5); }});
  cs.push_back({"inv_bwd", tlrt_inv, tlrt_inv_bwd, 0.05, 50, true, true, {}, 1e-2, true, 0,
                [](double x, double h) { return 6.0 * std::pow(std::fabs(x) - h, -4.0); }});
  cs.push_back({"log_bwd", tlrt_log, tlrt_log_bwd, 0.05, 50, true, false, {}, 1e-2, true, 0,
                [](double x, double h) { return 2.0 * std::pow(x - h, -3.0); }});
  const std::pair<double, double> bounds[] = {{-1.0, 1.5}, {-kInf, 0.5}, {0.25, kInf}};
  for (auto b : bounds) {
    const double lo = b.first, hi = b.second;
    char nm[64];
    std::snprintf(nm, sizeof nm, "clamp_bwd(lo=%g,hi=%g)", lo, hi);
    std::vector<double> kinks;
    if (std::isfinite(lo)) kinks.push_back(lo);
    if (std::isfinite(hi)) kinks.push_back(hi);
    cs.push_back({nm,
                  [lo, hi](const tlrt_buffer *x, tlrt_buffer **o) { return tlrt_clamp(x, lo, hi, o); },
                  [lo, hi](const tlrt_buffer *x, const tlrt_buffer *g, tlrt_buffer **o) {
                    return tlrt_clamp_bwd(x, g, lo, hi, o);
                  },
                  -3, 3, false, false, kinks, 1e-2, false, 0, zero});
  }
  cs.push_back({"exp_bwd", tlrt_exp, tlrt_exp_bwd, -10, 10, false, false, {}, 1e-2, false, 0,
                [](double x, double h) { return std::exp(x + h); }});
  cs.push_back({"sigmoid_bwd", tlrt_sigmoid, tlrt_sigmoid_bwd, -10, 10, false, false, {}, 1e-2,
                false, 0, m3_sigmoid});
  cs.push_back({"tanh_bwd", tlrt_tanh, tlrt_tanh_bwd, -8, 8, false, false, {}, 1e-2, false, 0,
                m3_tanh});
  // softplus''' = s'' = s' (1 - 2 s): bounded like sigmoid'''.
  cs.push_back({"softplus_bwd", tlrt_softplus, tlrt_softplus_bwd, -10, 10, false, false, {}, 1e-2,
                false, 0, m3_sigmoid});
  // gelu''' has no simple closed-form bound: its maximum over the reals, computed numerically in
  // float64, is 0.777 (at x = -0.788); 1.0 is used. h is 5x smaller than for the others so the
  // truncation term stays small next to the tail values of gelu'.
  cs.push_back({"gelu_bwd", tlrt_gelu, tlrt_gelu_bwd, -6, 6, false, false, {}, 2e-3, false, 0,
                [](double, double) { return 1.0; }});
  // silu''' = 3 s'' + x s''' (s = sigmoid); |s''| = s' |1 - 2 s| <= s' and |s'''| <= s' (as
  // above), so |silu'''| <= (3 + |x| + h) min(1/4, e^-a).
  cs.push_back({"silu_bwd", tlrt_silu, tlrt_silu_bwd, -10, 10, false, false, {}, 1e-2, false, 0,
                [near0](double x, double h) {
                  return (3.0 + std::fabs(x) + h) * std::min(0.25, std::exp(-near0(x, h)));
                }});
  // safe_log = log(softplus(x) + eps): max |f'''| on [-8, 8] computed numerically in float64 is
  // 0.061 (eps = 0, 1e-6) and 0.118 (eps = 0.5); 0.25 is used.
  for (double eps : {0.0, 1e-6, 0.5}) {
    char nm[64];
    std::snprintf(nm, sizeof nm, "safe_log_bwd(eps=%g)", eps);
    cs.push_back({nm,
                  [eps](const tlrt_buffer *x, tlrt_buffer **o) { return tlrt_safe_log(x, eps, o); },
                  [eps](const tlrt_buffer *x, const tlrt_buffer *g, tlrt_buffer **o) {
                    return tlrt_safe_log_bwd(x, g, eps, o);
                  },
                  -8, 8, false, false, {}, 1e-2, false, 4 * kUlp,
                  [](double, double) { return 0.25; }});
  }
  return cs;
}

void run_device(tlrt_device dev) {
  const size_t count = 4000;
  std::printf("grad on %s:\n", dev_name(dev));
  for (const Case &c : cases()) check_case(c, dev, count);
  check_minmax(true, dev, count);
  check_minmax(false, dev, count);
  conventions(dev);
  TH_OK(tlrt_synchronize(dev));
}

}  // namespace

int main() {
  const uint64_t handles0 = th::stats().live_handles;
  run_device(TLRT_DEVICE_CPU);
  if (th::cuda_ready()) {
    run_device(TLRT_DEVICE_CUDA(0));
  } else {
    std::printf("grad: no usable CUDA device, CPU only\n");
  }
  TH_CHECK(th::stats().live_handles == handles0);
  TH_CHECK(th::stats().live_bytes == 0);
  return th::finish("test_grad");
}
