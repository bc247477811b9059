// Known answers, special values, an independent bit-exact reference and the measured accuracy of
// tlrt_rms_norm_fwd / tlrt_rms_norm_bwd (abi/tlrt_layer_norm.h, "RMS norm") on the CPU backend,
// with and without gamma.
//
// The reference re-implements the header's DEFINITIONS independently: THE TREE literally (every
// chunk materialises its 256 lanes), applied to each row for ms and b and to each column's
// sequence (rows in order) for dgamma, and every other operation as the header writes it (float
// sqrt and division, no fused multiply-add). Results are compared with it BIT FOR BIT over many
// shapes (1..70000 columns, 1..9000 rows, across the tree's chunk and lane boundaries) and input
// distributions (uniform, offset, wide exponents, random bit patterns, edge values).
// Accuracy: every result of the finite distributions is compared with a float64 evaluation of the
// definitions on the same float32 inputs against the bounds the header states; the largest ratio
// error / bound is printed (the header quotes it).
// Also: gamma NULL is the unit scale bit for bit (y, dx, and the dgamma it may still return),
// dgamma NULL without gamma, empty shapes, eps rounding, the determinism switch, no leaks.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "harness.hpp"

namespace {

using th::Buf;
using th::Dist;
using th::hex;

const float kInf = INFINITY;
const float kNaN = NAN;
const double kU = std::ldexp(1.0, -24);

bool big_ok() { return !th::under_valgrind(); }

// THE TREE sum of abi/tlrt_reduce.h, literally; +0 for an empty sequence.
float ref_tree(std::vector<float> v) {
  if (v.empty()) return 0.0f;
  do {
    std::vector<float> next;
    for (size_t c0 = 0; c0 < v.size(); c0 += 4096) {
      float lane[256];
      for (size_t t = 0; t < 256; ++t) {
        float a = -0.0f;
        for (size_t r = 0; r < 16; ++r) {
          const size_t i = c0 + t + 256 * r;
          if (i >= v.size()) break;
          a = a + v[i];
        }
        lane[t] = a;
      }
      for (size_t h = 128; h >= 1; h /= 2)
        for (size_t t = 0; t < h; ++t) lane[t] = lane[t] + lane[t + h];
      next.push_back(lane[0]);
    }
    v.swap(next);
  } while (v.size() > 1);
  return v[0];
}

int levels(uint64_t m) {
  int L = 1;
  while (m > 4096) {
    m = (m + 4095) / 4096;
    ++L;
  }
  return L;
}

// The tree's finish: r / n (r itself for n == 1, the same value).
float div_n(float s, uint64_t cols) { return s / (float)cols; }

struct Fwd {
  std::vector<float> y, inv_rms;
};
struct Bwd {
  std::vector<float> dx, dgamma;
};

// gamma empty: no scale.
Fwd ref_fwd(const std::vector<float> &x, const std::vector<float> &gamma, uint64_t rows,
            uint64_t cols, float eps) {
  Fwd f{std::vector<float>(rows * cols), std::vector<float>(rows)};
  for (uint64_t i = 0; i < rows; ++i) {
    const float *xr = x.data() + i * cols;
    std::vector<float> q(cols);
    for (uint64_t j = 0; j < cols; ++j) q[j] = xr[j] * xr[j];
    const float ms = div_n(ref_tree(q), cols);
    const float is = 1.0f / std::sqrt(ms + eps);
    f.inv_rms[i] = is;
    for (uint64_t j = 0; j < cols; ++j) {
      const float xh = xr[j] * is;
      f.y[i * cols + j] = gamma.empty() ? xh : xh * gamma[j];
    }
  }
  return f;
}

Bwd ref_bwd(const std::vector<float> &dy, const std::vector<float> &x,
            const std::vector<float> &gamma, const std::vector<float> &is, uint64_t rows,
            uint64_t cols) {
  Bwd b{std::vector<float>(rows * cols), std::vector<float>(cols)};
  std::vector<float> xh(rows * cols);
  for (uint64_t k = 0; k < rows * cols; ++k) xh[k] = x[k] * is[k / cols];
  for (uint64_t i = 0; i < rows; ++i) {
    std::vector<float> d(cols), p(cols);
    for (uint64_t j = 0; j < cols; ++j) {
      d[j] = gamma.empty() ? dy[i * cols + j] : dy[i * cols + j] * gamma[j];
      p[j] = d[j] * xh[i * cols + j];
    }
    const float bb = div_n(ref_tree(p), cols);
    for (uint64_t j = 0; j < cols; ++j)
      b.dx[i * cols + j] = (d[j] - xh[i * cols + j] * bb) * is[i];
  }
  for (uint64_t j = 0; j < cols; ++j) {
    std::vector<float> cg(rows);
    for (uint64_t i = 0; i < rows; ++i) cg[i] = dy[i * cols + j] * xh[i * cols + j];
    b.dgamma[j] = ref_tree(cg);
  }
  return b;
}

// gamma empty: NULL.
Fwd run_fwd(const std::vector<float> &x, const std::vector<float> &gamma, uint64_t rows,
            uint64_t cols, double eps) {
  Buf bx(th::upload(x)), bg(gamma.empty() ? nullptr : th::upload(gamma)), y, s;
  const tlrt_status st = tlrt_rms_norm_fwd(bx.get(), bg.get(), rows, cols, eps, y.out(), s.out());
  TH_CHECK_MSG(st == TLRT_OK, "rms_norm_fwd (%llu, %llu) failed: %s", (unsigned long long)rows,
               (unsigned long long)cols, tlrt_last_error());
  if (st != TLRT_OK) return {};
  return Fwd{th::download(y.get()), th::download(s.get())};
}

// gamma empty: NULL; want_dgamma false: dgamma NULL (only without gamma).
Bwd run_bwd(const std::vector<float> &dy, const std::vector<float> &x,
            const std::vector<float> &gamma, const std::vector<float> &is, uint64_t rows,
            uint64_t cols, bool want_dgamma = true) {
  Buf bdy(th::upload(dy)), bx(th::upload(x)), bg(gamma.empty() ? nullptr : th::upload(gamma)),
      bs(th::upload(is)), dx, dg;
  const tlrt_status st = tlrt_rms_norm_bwd(bdy.get(), bx.get(), bg.get(), bs.get(), rows, cols,
                                           dx.out(), want_dgamma ? dg.out() : nullptr);
  TH_CHECK_MSG(st == TLRT_OK, "rms_norm_bwd (%llu, %llu) failed: %s", (unsigned long long)rows,
               (unsigned long long)cols, tlrt_last_error());
  if (st != TLRT_OK) return {};
  return Bwd{th::download(dx.get()),
             want_dgamma ? th::download(dg.get()) : std::vector<float>()};
}

void expect_all_same(const std::vector<float> &got, const std::vector<float> &want,
                     const std::string &what) {
  ++th::checks();
  if (got.size() != want.size()) {
    th::report(__FILE__, __LINE__,
               what + ": " + std::to_string(got.size()) + " outputs, expected " +
                   std::to_string(want.size()));
    return;
  }
  for (size_t i = 0; i < got.size(); ++i)
    if (!th::same_bits(got[i], want[i])) {
      th::report(__FILE__, __LINE__,
                 what + ": element " + std::to_string(i) + " is " + hex(got[i]) + ", expected " +
                     hex(want[i]));
      return;
    }
}

void same_fwd(const Fwd &got, const Fwd &want, const std::string &w) {
  expect_all_same(got.y, want.y, w + " y");
  expect_all_same(got.inv_rms, want.inv_rms, w + " inv_rms");
}
void same_bwd(const Bwd &got, const Bwd &want, const std::string &w) {
  expect_all_same(got.dx, want.dx, w + " dx");
  expect_all_same(got.dgamma, want.dgamma, w + " dgamma");
}

// ---- known answers, special values, empty shapes ------------------------------------------------

void check_known_answers() {
  const std::vector<float> none;
  {
    // ms = (1 + 4 + 9 + 16) / 4 = 7.5 exactly; inv_rms = 1 / sqrt(7.5).
    const Fwd f = run_fwd({1.0f, 2.0f, 3.0f, 4.0f}, none, 1, 4, 0.0);
    const float is = 1.0f / std::sqrt(7.5f);
    TH_CHECK(f.inv_rms.size() == 1 && f.inv_rms[0] == is);
    expect_all_same(f.y, {1.0f * is, 2.0f * is, 3.0f * is, 4.0f * is}, "rms norm 1..4");
    const Fwd g = run_fwd({1.0f, 2.0f, 3.0f, 4.0f}, {2.0f, -1.0f, 0.5f, 0.0f}, 1, 4, 0.0);
    expect_all_same(g.y, {(1.0f * is) * 2.0f, (2.0f * is) * -1.0f, (3.0f * is) * 0.5f, 0.0f},
                    "rms norm 1..4, gamma");
  }
  {
    // eps is rounded once to float32.
    const Fwd f = run_fwd({1.0f, 2.0f, 3.0f, 4.0f}, none, 1, 4, 1e-5);
    TH_CHECK(f.inv_rms.size() == 1 && f.inv_rms[0] == 1.0f / std::sqrt(7.5f + (float)1e-5));
  }
  {
    // cols == 1, eps = 0: y = x * (1 / |x|); rows are independent.
    const Fwd f = run_fwd({4.0f, -0.25f, 3.0f}, none, 3, 1, 0.0);
    expect_all_same(f.inv_rms, {0.25f, 4.0f, 1.0f / 3.0f}, "cols == 1: inv_rms = 1 / |x|");
    expect_all_same(f.y, {1.0f, -1.0f, 3.0f * (1.0f / 3.0f)}, "cols == 1: y = x / |x|");
  }
  // An all-zero row: eps > 0 gives y = +-0 (the signs of x); eps = 0 gives inv_rms = +inf and
  // y = NaN (0 * inf).
  {
    Fwd f = run_fwd({0.0f, -0.0f, 0.0f}, {2.0f, 3.0f, 4.0f}, 1, 3, 1e-5);
    expect_all_same(f.y, {0.0f, -0.0f, 0.0f}, "zero row with eps");
    f = run_fwd({0.0f, -0.0f, 0.0f}, {2.0f, 3.0f, 4.0f}, 1, 3, 0.0);
    TH_CHECK(f.inv_rms.size() == 1 && f.inv_rms[0] == kInf);
    TH_CHECK(f.y.size() == 3 && std::isnan(f.y[0]) && std::isnan(f.y[1]) && std::isnan(f.y[2]));
  }
  // NaN in a row: the row is NaN. An infinity: ms = inf, inv_rms = +0, y = NaN at the infinity
  // and +-0 elsewhere. NaN in gamma: that column.
  {
    const Fwd f = run_fwd({1.0f, kNaN, 2.0f, 3.0f, -kInf, -4.0f, 1.0f, 2.0f, 3.0f},
                          {1.0f, 1.0f, kNaN}, 3, 3, 1e-5);
    TH_CHECK(f.y.size() == 9 && f.inv_rms.size() == 3);
    if (f.y.size() == 9 && f.inv_rms.size() == 3) {
      for (int j = 0; j < 3; ++j) TH_CHECK_MSG(std::isnan(f.y[j]), "y[%d] should be NaN", j);
      TH_CHECK(std::isnan(f.inv_rms[0]));
      TH_CHECK(th::same_bits(f.inv_rms[1], 0.0f));
      TH_CHECK(th::same_bits(f.y[3], 0.0f) && std::isnan(f.y[4]) && std::isnan(f.y[5]));
      TH_CHECK(!std::isnan(f.y[6]) && !std::isnan(f.y[7]) && std::isnan(f.y[8]));
    }
  }
  // Squares beyond the float32 range: inv_rms = +0, y = +-0.
  {
    const Fwd f = run_fwd({-3e20f, 3e20f}, {1.0f, 1.0f}, 1, 2, 1e-5);
    TH_CHECK(f.inv_rms.size() == 1 && th::same_bits(f.inv_rms[0], 0.0f));
    expect_all_same(f.y, {-0.0f, 0.0f}, "huge row");
  }
  // Backward known answers. dy = y (gamma = 1, eps = 0): y is invariant under scaling x, so the
  // gradient along x vanishes: dx ~ 0. dgamma of one row is dy * xhat.
  {
    const std::vector<float> x = {1.0f, 2.0f, 3.0f, 4.0f}, ones(4, 1.0f);
    const Fwd f = run_fwd(x, ones, 1, 4, 0.0);
    const Bwd b = run_bwd(f.y, x, ones, f.inv_rms, 1, 4);
    for (float v : b.dx) TH_CHECK_MSG(std::fabs(v) < 1e-6f, "dx = %g for dy = y", v);
    std::vector<float> want(4);
    for (int j = 0; j < 4; ++j) want[j] = f.y[j] * (x[j] * f.inv_rms[0]);
    expect_all_same(b.dgamma, want, "dgamma of one row");
    // A dy orthogonal to x passes through scaled: dx = inv_rms * d (b = 0 exactly).
    const std::vector<float> dy = {2.0f, -1.0f, 0.0f, 0.0f};
    const Bwd o = run_bwd(dy, x, ones, f.inv_rms, 1, 4);
    const float is = f.inv_rms[0];
    expect_all_same(o.dx, {2.0f * is, -1.0f * is, 0.0f, 0.0f}, "dx for dy orthogonal to x");
  }
}

// No gamma is the unit scale bit for bit; dgamma may be NULL without gamma, and is the unit
// scale's gradient when asked for.
void check_no_gamma() {
  for (uint64_t C : {1, 5, 300, 5000}) {
    const uint64_t R = 7;
    const std::vector<float> x = th::make(Dist::Edge, R * C, C), dy = th::make(Dist::Uniform, R * C, C + 1);
    const std::vector<float> ones(C, 1.0f), none;
    const Fwd a = run_fwd(x, none, R, C, 1e-6), b = run_fwd(x, ones, R, C, 1e-6);
    same_fwd(a, b, "no gamma vs ones (" + std::to_string(C) + ")");
    const Bwd da = run_bwd(dy, x, none, a.inv_rms, R, C), db = run_bwd(dy, x, ones, a.inv_rms, R, C);
    same_bwd(da, db, "no gamma vs ones (" + std::to_string(C) + ")");
    const Bwd dn = run_bwd(dy, x, none, a.inv_rms, R, C, false);
    expect_all_same(dn.dx, db.dx, "no gamma, no dgamma: dx");
  }
}

void check_empty() {
  Buf e(th::upload({})), g3(th::upload({1.0f, 2.0f, 3.0f})), y, s, dx, dg;
  // rows == 0: both empty.
  TH_OK(tlrt_rms_norm_fwd(e.get(), g3.get(), 0, 3, 1e-5, y.out(), s.out()));
  TH_CHECK(th::download(y.get()).empty() && th::download(s.get()).empty());
  TH_OK(tlrt_rms_norm_fwd(e.get(), nullptr, 0, 3, 1e-5, y.out(), s.out()));
  TH_CHECK(th::download(y.get()).empty() && th::download(s.get()).empty());
  // cols == 0: empty y, NaN inv_rms.
  for (const tlrt_buffer *g : {(const tlrt_buffer *)e.get(), (const tlrt_buffer *)nullptr}) {
    TH_OK(tlrt_rms_norm_fwd(e.get(), g, 4, 0, 1e-5, y.out(), s.out()));
    TH_CHECK(th::download(y.get()).empty());
    const std::vector<float> sv = th::download(s.get());
    TH_CHECK(sv.size() == 4);
    for (float v : sv) TH_CHECK(std::isnan(v));
  }
  // Backward, rows == 0: dgamma = +0 (with or without gamma), dx empty.
  TH_OK(tlrt_rms_norm_bwd(e.get(), e.get(), g3.get(), e.get(), 0, 3, dx.out(), dg.out()));
  TH_CHECK(th::download(dx.get()).empty());
  expect_all_same(th::download(dg.get()), {0.0f, 0.0f, 0.0f}, "dgamma over no rows");
  TH_OK(tlrt_rms_norm_bwd(e.get(), e.get(), nullptr, e.get(), 0, 3, dx.out(), dg.out()));
  expect_all_same(th::download(dg.get()), {0.0f, 0.0f, 0.0f}, "dgamma over no rows, no gamma");
  TH_OK(tlrt_rms_norm_bwd(e.get(), e.get(), nullptr, e.get(), 0, 3, dx.out(), nullptr));
  TH_CHECK(th::download(dx.get()).empty());
  // cols == 0 (rows 4): empty outputs.
  Buf s4(th::upload(std::vector<float>(4, 1.0f)));
  TH_OK(tlrt_rms_norm_bwd(e.get(), e.get(), e.get(), s4.get(), 4, 0, dx.out(), dg.out()));
  TH_CHECK(th::download(dx.get()).empty() && th::download(dg.get()).empty());
  // rows == cols == 0.
  TH_OK(tlrt_rms_norm_fwd(e.get(), e.get(), 0, 0, 0.0, y.out(), s.out()));
  TH_OK(tlrt_rms_norm_bwd(e.get(), e.get(), e.get(), e.get(), 0, 0, dx.out(), dg.out()));
  TH_CHECK(th::download(y.get()).empty() && th::download(dg.get()).empty());
}

// ---- randomized ---------------------------------------------------------------------------------

double worst_y = 0, worst_is = 0, worst_dx = 0, worst_dg = 0;

// The header's bounds against a float64 evaluation of the definitions on the float32 inputs.
void accuracy(const std::vector<float> &x, const std::vector<float> &gamma,
              const std::vector<float> &dy, uint64_t rows, uint64_t cols, float eps, const Fwd &f,
              const Bwd &b, const char *w) {
  const int L = levels(cols), Lr = levels(rows);
  const double n = (double)cols;
  auto gm = [&](uint64_t j) { return gamma.empty() ? 1.0 : (double)gamma[j]; };
  std::vector<double> xh64(rows * cols), g64(cols, 0.0), sg_abs(cols, 0.0);
  for (uint64_t i = 0; i < rows; ++i) {
    double q = 0;
    for (uint64_t j = 0; j < cols; ++j) q += (double)x[i * cols + j] * x[i * cols + j];
    const double is = 1.0 / std::sqrt(q / n + (double)eps);
    const double es = std::fabs(f.inv_rms[i] - is), bs = 2 * kU * (12 * L + 5) * is;
    worst_is = std::max(worst_is, es / bs);
    TH_CHECK_MSG(es <= bs, "%s inv_rms row %llu: error %g > %g", w, (unsigned long long)i, es, bs);
    for (uint64_t j = 0; j < cols; ++j) {
      const uint64_t k = i * cols + j;
      const double y = x[k] * is * gm(j);
      const double by = 2 * kU * (12 * L + 8) * std::fabs(y) + 1e-45;
      const double ey = std::fabs(f.y[k] - y);
      worst_y = std::max(worst_y, ey / by);
      TH_CHECK_MSG(ey <= by, "%s y[%llu, %llu]: error %g > %g", w, (unsigned long long)i,
                   (unsigned long long)j, ey, by);
    }
    // Backward, from the float32 inv_rms the forward returned.
    const double isf = f.inv_rms[i];
    double sp = 0, spa = 0;
    std::vector<double> d(cols), xr(cols);
    for (uint64_t j = 0; j < cols; ++j) {
      const uint64_t k = i * cols + j;
      xr[j] = (double)x[k] * isf;
      xh64[k] = xr[j];
      d[j] = (double)dy[k] * gm(j);
      sp += d[j] * xr[j];
      spa += std::fabs(d[j] * xr[j]);
    }
    const double bb = sp / n;
    for (uint64_t j = 0; j < cols; ++j) {
      const double dx = (d[j] - xr[j] * bb) * isf;
      const double bound = 2 * kU *
                               (isf * (2 * std::fabs(d[j]) + 3 * std::fabs(xr[j] * bb) +
                                       (24 * L + 1) * std::fabs(xr[j]) * spa / n) +
                                std::fabs(dx)) +
                           1e-45;
      const double e = std::fabs(b.dx[i * cols + j] - dx);
      worst_dx = std::max(worst_dx, e / bound);
      TH_CHECK_MSG(e <= bound, "%s dx[%llu, %llu]: error %g > %g", w, (unsigned long long)i,
                   (unsigned long long)j, e, bound);
    }
  }
  for (uint64_t i = 0; i < rows; ++i)
    for (uint64_t j = 0; j < cols; ++j) {
      const uint64_t k = i * cols + j;
      g64[j] += dy[k] * xh64[k];
      sg_abs[j] += std::fabs(dy[k] * xh64[k]);
    }
  for (uint64_t j = 0; j < cols; ++j) {
    const double eg = std::fabs(b.dgamma[j] - g64[j]),
                 bg = 2 * kU * (23 * Lr + 3) * sg_abs[j] + 1e-45;
    worst_dg = std::max(worst_dg, eg / bg);
    TH_CHECK_MSG(eg <= bg, "%s dgamma[%llu]: error %g > %g", w, (unsigned long long)j, eg, bg);
  }
}

void check_random() {
  struct Shape {
    uint64_t rows, cols;
  };
  std::vector<Shape> shapes = {
      {1, 1},    {5, 1},    {1, 2},    {3, 3},    {4, 7},    {2, 31},    {2, 32},   {2, 33},
      {3, 100},  {2, 255},  {2, 256},  {2, 257},  {2, 1000}, {2, 1024},  {2, 1025}, {1, 2049},
      {1, 4095}, {1, 4096}, {1, 4097}, {1, 8193}, {100, 5},  {255, 3},   {256, 4},  {257, 6},
      {300, 40}, {4095, 2}, {4096, 3}, {4097, 2}, {5000, 9}, {40, 1100}, {9000, 3}, {8193, 17}};
  if (big_ok()) {
    shapes.push_back({2, 70000});
    shapes.push_back({600, 2000});
    shapes.push_back({70000, 2});
  }
  uint64_t salt = 11;
  for (const Shape &sh : shapes) {
    const uint64_t R = sh.rows, C = sh.cols, n = R * C;
    for (Dist d : {Dist::Uniform, Dist::Wide, Dist::Bits, Dist::Edge, Dist::Positive}) {
      if (n > 300000 && d != Dist::Uniform) continue;
      std::vector<float> x = th::make(d, n, ++salt);
      if (d == Dist::Positive)  // offset rows: no effect on the accuracy (no mean is subtracted)
        for (uint64_t k = 0; k < n; ++k) x[k] = x[k] + (float)((k / C) % 5) * 250.0f;
      std::vector<float> gamma = th::make(Dist::Uniform, C, ++salt);
      for (auto &v : gamma) v *= 2.0f;
      if (d == Dist::Bits) gamma = th::make(Dist::Bits, C, ++salt);
      if (salt % 4 == 0) gamma.clear();  // no scale
      const float eps = (salt % 3 == 0) ? 0.0f : (float)1e-5;
      char w[96];
      std::snprintf(w, sizeof w, "(%llu, %llu) %s%s", (unsigned long long)R,
                    (unsigned long long)C, th::dist_name(d), gamma.empty() ? " no gamma" : "");
      const Fwd f = run_fwd(x, gamma, R, C, eps);
      same_fwd(f, ref_fwd(x, gamma, R, C, eps), w);
      const std::vector<float> dy =
          th::make(d == Dist::Bits ? Dist::Bits : Dist::Uniform, n, ++salt);
      if (f.inv_rms.size() != R) continue;
      const Bwd b = run_bwd(dy, x, gamma, f.inv_rms, R, C);
      same_bwd(b, ref_bwd(dy, x, gamma, f.inv_rms, R, C), w);
      // Arbitrary statistics (not x's): still the definitions, bit for bit.
      const std::vector<float> s2 = th::make(d == Dist::Bits ? d : Dist::Positive, R, ++salt);
      same_bwd(run_bwd(dy, x, gamma, s2, R, C), ref_bwd(dy, x, gamma, s2, R, C),
               std::string(w) + " (arbitrary inv_rms)");
      if ((d == Dist::Uniform || d == Dist::Positive || d == Dist::Wide) && eps > 0 &&
          b.dx.size() == n)
        accuracy(x, gamma, dy, R, C, eps, f, b, w);
    }
  }
  std::printf("accuracy against float64 (max error / asserted bound): y %.3f, inv_rms %.3f, "
              "dx %.3f, dgamma %.3f\n",
              worst_y, worst_is, worst_dx, worst_dg);
}

void check_determinism_switch() {
  const uint64_t R = 5000, C = 7;
  const std::vector<float> x = th::make(Dist::Wide, R * C, 3), g = th::make(Dist::Uniform, C, 4);
  const bool was = tlrt_get_deterministic();
  tlrt_set_deterministic(false);
  const Fwd a = run_fwd(x, g, R, C, 1e-5);
  const Bwd b = run_bwd(x, x, g, a.inv_rms, R, C);
  tlrt_set_deterministic(true);
  same_fwd(run_fwd(x, g, R, C, 1e-5), a, "switch flipped");
  same_bwd(run_bwd(x, x, g, a.inv_rms, R, C), b, "switch flipped");
  tlrt_set_deterministic(was);
}

}  // namespace

int main() {
  const tlrt_allocator_stats start = th::stats();
  check_known_answers();
  check_no_gamma();
  check_empty();
  check_random();
  check_determinism_switch();
  const tlrt_allocator_stats end = th::stats();
  TH_CHECK_MSG(end.live_bytes == start.live_bytes && end.live_handles == start.live_handles,
               "leak: %llu bytes / %llu handles at start, %llu / %llu at end",
               (unsigned long long)start.live_bytes, (unsigned long long)start.live_handles,
               (unsigned long long)end.live_bytes, (unsigned long long)end.live_handles);
  return th::finish("test_rms_norm");
}
