// Known answers, special values, an independent bit-exact reference and the measured accuracy of
// tlrt_layer_norm_fwd / tlrt_layer_norm_bwd (abi/tlrt_layer_norm.h) on the CPU backend.
//
// The reference re-implements the header's DEFINITIONS independently: THE TREE literally (every
// chunk materialises its 256 lanes, as in tests/unit/test_reduce.cpp), applied to each row for the
// statistics and to each column's sequence (rows in order) for dgamma and dbeta, and every other
// operation as the header writes it (std::fma for the one fused multiply-add, float sqrt and
// division). Results are compared with it BIT FOR BIT over many shapes (rows and cols across the
// tree's chunk and lane boundaries: 1..70000 columns, 1..9000 rows) and input distributions.
// Accuracy: every finite result is compared with a float64 evaluation of the definitions on the
// same float32 inputs, against the first-order bounds derived next to each check; the largest
// ratio error / bound is printed (the header quotes it).
// Also: empty shapes (rows == 0, cols == 0), eps rounding, the determinism switch, no leaks.
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

float div_n(float s, uint64_t cols) { return s / (float)cols; }

struct Fwd {
  std::vector<float> y, mean, inv_std;
};
struct Bwd {
  std::vector<float> dx, dgamma, dbeta;
};

Fwd ref_fwd(const std::vector<float> &x, const std::vector<float> &gamma,
            const std::vector<float> &beta, uint64_t rows, uint64_t cols, float eps) {
  Fwd f{std::vector<float>(rows * cols), std::vector<float>(rows), std::vector<float>(rows)};
  for (uint64_t i = 0; i < rows; ++i) {
    const float *xr = x.data() + i * cols;
    const float mean = div_n(ref_tree(std::vector<float>(xr, xr + cols)), cols);
    std::vector<float> q(cols);
    for (uint64_t j = 0; j < cols; ++j) {
      const float d = xr[j] - mean;
      q[j] = d * d;
    }
    const float var = div_n(ref_tree(q), cols);
    const float is = 1.0f / std::sqrt(var + eps);
    f.mean[i] = mean;
    f.inv_std[i] = is;
    for (uint64_t j = 0; j < cols; ++j)
      f.y[i * cols + j] = std::fma((xr[j] - mean) * is, gamma[j], beta[j]);
  }
  return f;
}

Bwd ref_bwd(const std::vector<float> &dy, const std::vector<float> &x,
            const std::vector<float> &mean, const std::vector<float> &is,
            const std::vector<float> &gamma, uint64_t rows, uint64_t cols) {
  Bwd b{std::vector<float>(rows * cols), std::vector<float>(cols), std::vector<float>(cols)};
  std::vector<float> xh(rows * cols);
  for (uint64_t k = 0; k < rows * cols; ++k) xh[k] = (x[k] - mean[k / cols]) * is[k / cols];
  for (uint64_t i = 0; i < rows; ++i) {
    std::vector<float> d(cols), p(cols);
    for (uint64_t j = 0; j < cols; ++j) {
      d[j] = dy[i * cols + j] * gamma[j];
      p[j] = d[j] * xh[i * cols + j];
    }
    const float a = div_n(ref_tree(d), cols), bb = div_n(ref_tree(p), cols);
    for (uint64_t j = 0; j < cols; ++j)
      b.dx[i * cols + j] = (d[j] - (a + xh[i * cols + j] * bb)) * is[i];
  }
  for (uint64_t j = 0; j < cols; ++j) {
    std::vector<float> cg(rows), cb(rows);
    for (uint64_t i = 0; i < rows; ++i) {
      cg[i] = dy[i * cols + j] * xh[i * cols + j];
      cb[i] = dy[i * cols + j];
    }
    b.dgamma[j] = ref_tree(cg);
    b.dbeta[j] = ref_tree(cb);
  }
  return b;
}

Fwd run_fwd(const std::vector<float> &x, const std::vector<float> &gamma,
            const std::vector<float> &beta, uint64_t rows, uint64_t cols, double eps) {
  Buf bx(th::upload(x)), bg(th::upload(gamma)), bb(th::upload(beta)), y, m, s;
  const tlrt_status st =
      tlrt_layer_norm_fwd(bx.get(), bg.get(), bb.get(), rows, cols, eps, y.out(), m.out(), s.out());
  TH_CHECK_MSG(st == TLRT_OK, "layer_norm_fwd (%llu, %llu) failed: %s", (unsigned long long)rows,
               (unsigned long long)cols, tlrt_last_error());
  if (st != TLRT_OK) return {};
  return Fwd{th::download(y.get()), th::download(m.get()), th::download(s.get())};
}

Bwd run_bwd(const std::vector<float> &dy, const std::vector<float> &x,
            const std::vector<float> &mean, const std::vector<float> &is,
            const std::vector<float> &gamma, uint64_t rows, uint64_t cols) {
  Buf bdy(th::upload(dy)), bx(th::upload(x)), bm(th::upload(mean)), bs(th::upload(is)),
      bg(th::upload(gamma)), dx, dg, db;
  const tlrt_status st = tlrt_layer_norm_bwd(bdy.get(), bx.get(), bm.get(), bs.get(), bg.get(),
                                             rows, cols, dx.out(), dg.out(), db.out());
  TH_CHECK_MSG(st == TLRT_OK, "layer_norm_bwd (%llu, %llu) failed: %s", (unsigned long long)rows,
               (unsigned long long)cols, tlrt_last_error());
  if (st != TLRT_OK) return {};
  return Bwd{th::download(dx.get()), th::download(dg.get()), th::download(db.get())};
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
  expect_all_same(got.mean, want.mean, w + " mean");
  expect_all_same(got.inv_std, want.inv_std, w + " inv_std");
}
void same_bwd(const Bwd &got, const Bwd &want, const std::string &w) {
  expect_all_same(got.dx, want.dx, w + " dx");
  expect_all_same(got.dgamma, want.dgamma, w + " dgamma");
  expect_all_same(got.dbeta, want.dbeta, w + " dbeta");
}

// ---- known answers, special values, empty shapes ------------------------------------------------

void check_known_answers() {
  const std::vector<float> one4(4, 1.0f), zero4(4, 0.0f);
  {
    // mean 2.5, var (2.25 + 0.25 + 0.25 + 2.25) / 4 = 1.25 exactly.
    const Fwd f = run_fwd({1.0f, 2.0f, 3.0f, 4.0f}, one4, zero4, 1, 4, 0.0);
    TH_CHECK(f.mean.size() == 1 && f.mean[0] == 2.5f);
    const float is = 1.0f / std::sqrt(1.25f);
    TH_CHECK(f.inv_std.size() == 1 && f.inv_std[0] == is);
    expect_all_same(f.y, {-1.5f * is, -0.5f * is, 0.5f * is, 1.5f * is}, "layer norm 1..4");
  }
  {
    // eps is rounded once to float32.
    const Fwd f = run_fwd({1.0f, 2.0f, 3.0f, 4.0f}, one4, zero4, 1, 4, 1e-5);
    TH_CHECK(f.inv_std.size() == 1 && f.inv_std[0] == 1.0f / std::sqrt(1.25f + (float)1e-5));
  }
  // A constant row: xhat = 0, y = beta; with eps = 0, inv_std = +inf and y = NaN (0 * inf).
  {
    const std::vector<float> beta = {0.5f, -2.0f, 3.0f};
    Fwd f = run_fwd({7.0f, 7.0f, 7.0f}, {2.0f, 3.0f, 4.0f}, beta, 1, 3, 1e-5);
    expect_all_same(f.y, beta, "constant row gives beta");
    f = run_fwd({7.0f, 7.0f, 7.0f}, {2.0f, 3.0f, 4.0f}, beta, 1, 3, 0.0);
    TH_CHECK(f.inv_std.size() == 1 && f.inv_std[0] == kInf);
    TH_CHECK(f.y.size() == 3 && std::isnan(f.y[0]) && std::isnan(f.y[1]) && std::isnan(f.y[2]));
    // cols == 1: y = beta.
    f = run_fwd({1.0f, -5.0f, 1e30f}, {3.0f}, {0.25f}, 3, 1, 1e-6);
    expect_all_same(f.y, {0.25f, 0.25f, 0.25f}, "cols == 1 gives beta");
    expect_all_same(f.mean, {1.0f, -5.0f, 1e30f}, "cols == 1: mean = x");
  }
  // NaN / inf in a row; NaN in gamma.
  {
    const Fwd f = run_fwd({1.0f, kNaN, 2.0f, 3.0f, kInf, 4.0f, 1.0f, 2.0f, 3.0f},
                          {1.0f, 1.0f, kNaN}, {0.0f, 0.0f, 0.0f}, 3, 3, 1e-5);
    TH_CHECK(f.y.size() == 9 && f.mean.size() == 3);
    if (f.y.size() == 9) {
      for (int j = 0; j < 6; ++j) TH_CHECK_MSG(std::isnan(f.y[j]), "y[%d] should be NaN", j);
      TH_CHECK(std::isnan(f.mean[0]) && std::isnan(f.inv_std[0]));
      TH_CHECK(f.mean[1] == kInf && std::isnan(f.inv_std[1]));
      TH_CHECK(!std::isnan(f.y[6]) && !std::isnan(f.y[7]) && std::isnan(f.y[8]));
    }
  }
  // Huge deviations: var = +inf, inv_std = +0.
  {
    const Fwd f = run_fwd({-3e20f, 3e20f}, {1.0f, 1.0f}, {0.0f, 0.0f}, 1, 2, 1e-5);
    TH_CHECK(f.inv_std.size() == 1 && th::same_bits(f.inv_std[0], 0.0f));
  }
  // Backward known answer: one row, gamma = 1: dx = is * (dy - mean(dy) - xhat mean(dy xhat)).
  {
    const Fwd f = run_fwd({1.0f, 2.0f, 3.0f, 4.0f}, one4, zero4, 1, 4, 0.0);
    const Bwd b =
        run_bwd({1.0f, 1.0f, 1.0f, 1.0f}, {1.0f, 2.0f, 3.0f, 4.0f}, f.mean, f.inv_std, one4, 1, 4);
    // A constant dy is orthogonal to everything layer norm can change: dx = 0.
    for (float v : b.dx) TH_CHECK_MSG(std::fabs(v) < 1e-6f, "dx = %g for a constant dy", v);
    expect_all_same(b.dbeta, {1.0f, 1.0f, 1.0f, 1.0f}, "dbeta of one row is dy");
    const float is = f.inv_std[0];
    expect_all_same(b.dgamma, {-1.5f * is, -0.5f * is, 0.5f * is, 1.5f * is}, "dgamma of one row");
  }
}

void check_empty() {
  Buf e(th::upload({})), g3(th::upload({1.0f, 2.0f, 3.0f})), y, m, s, dx, dg, db;
  // rows == 0: everything empty.
  TH_OK(tlrt_layer_norm_fwd(e.get(), g3.get(), g3.get(), 0, 3, 1e-5, y.out(), m.out(), s.out()));
  TH_CHECK(th::download(y.get()).empty() && th::download(m.get()).empty() &&
           th::download(s.get()).empty());
  // cols == 0: empty y, NaN statistics.
  TH_OK(tlrt_layer_norm_fwd(e.get(), e.get(), e.get(), 4, 0, 1e-5, y.out(), m.out(), s.out()));
  TH_CHECK(th::download(y.get()).empty());
  const std::vector<float> mv = th::download(m.get()), sv = th::download(s.get());
  TH_CHECK(mv.size() == 4 && sv.size() == 4);
  for (size_t i = 0; i < mv.size() && i < sv.size(); ++i)
    TH_CHECK(std::isnan(mv[i]) && std::isnan(sv[i]));
  // Backward, rows == 0: dgamma = dbeta = +0.
  TH_OK(tlrt_layer_norm_bwd(e.get(), e.get(), e.get(), e.get(), g3.get(), 0, 3, dx.out(), dg.out(),
                            db.out()));
  TH_CHECK(th::download(dx.get()).empty());
  expect_all_same(th::download(dg.get()), {0.0f, 0.0f, 0.0f}, "dgamma over no rows");
  expect_all_same(th::download(db.get()), {0.0f, 0.0f, 0.0f}, "dbeta over no rows");
  // cols == 0 (rows 4): three empty outputs.
  Buf m4(th::upload(std::vector<float>(4, 1.0f)));
  TH_OK(tlrt_layer_norm_bwd(e.get(), e.get(), m4.get(), m4.get(), e.get(), 4, 0, dx.out(), dg.out(),
                            db.out()));
  TH_CHECK(th::download(dx.get()).empty() && th::download(dg.get()).empty() &&
           th::download(db.get()).empty());
  // rows == cols == 0.
  TH_OK(tlrt_layer_norm_fwd(e.get(), e.get(), e.get(), 0, 0, 0.0, y.out(), m.out(), s.out()));
  TH_OK(tlrt_layer_norm_bwd(e.get(), e.get(), e.get(), e.get(), e.get(), 0, 0, dx.out(), dg.out(),
                            db.out()));
}

// ---- randomized ---------------------------------------------------------------------------------

double worst_y = 0, worst_mean = 0, worst_is = 0, worst_dx = 0, worst_dg = 0, worst_db = 0;

void accuracy(const std::vector<float> &x, const std::vector<float> &gamma,
              const std::vector<float> &beta, const std::vector<float> &dy, uint64_t rows,
              uint64_t cols, float eps, const Fwd &f, const Bwd &b, const char *w) {
  const int L = levels(cols), Lr = levels(rows);
  const double n = (double)cols;
  std::vector<double> xh64(rows * cols);
  std::vector<double> sg_abs(cols, 0.0), sb_abs(cols, 0.0), g64(cols, 0.0), b64(cols, 0.0);
  for (uint64_t i = 0; i < rows; ++i) {
    double s = 0, sa = 0;
    for (uint64_t j = 0; j < cols; ++j) {
      s += x[i * cols + j];
      sa += std::fabs((double)x[i * cols + j]);
    }
    const double mean = s / n, mabs = sa / n;
    double q = 0;
    for (uint64_t j = 0; j < cols; ++j) q += (x[i * cols + j] - mean) * (x[i * cols + j] - mean);
    const double is = 1.0 / std::sqrt(q / n + (double)eps);
    // The mean's own error E (<= (23L + 1) u mean|x|) enters var at second order,
    // var(mean + E) = var + E^2: a relative error E^2 / (2 (var + eps)) of inv_std, which matters
    // when the spread is tiny against the offset.
    const double em2 = (23 * L + 2) * kU * mabs;
    const double rel_var = em2 * em2 / (2 * (q / n + (double)eps));
    // mean: the tree bound plus the division.
    const double em = std::fabs(f.mean[i] - mean), bm = 2 * kU * (23 * L + 1) * mabs + 1e-45;
    worst_mean = std::max(worst_mean, em / bm);
    TH_CHECK_MSG(em <= bm, "%s mean row %llu: error %g > %g", w, (unsigned long long)i, em, bm);
    // inv_std: var's relative error <= (23 L + 4) u (positive terms), halved by sqrt, plus sqrt
    // and reciprocal roundings, plus rel_var.
    const double es = std::fabs(f.inv_std[i] - is), bs = 2 * (kU * (12 * L + 5) + rel_var) * is;
    worst_is = std::max(worst_is, es / bs);
    TH_CHECK_MSG(es <= bs, "%s inv_std row %llu: error %g > %g", w, (unsigned long long)i, es, bs);
    for (uint64_t j = 0; j < cols; ++j) {
      const uint64_t k = i * cols + j;
      const double xh = (x[k] - mean) * is;
      const double y = xh * gamma[j] + beta[j];
      // y: xhat's error from inv_std ((12L + 7) u relative) and from the mean's error
      // ((23L + 1) u mean|x| absolute, times inv_std), then the fma's rounding.
      const double by =
          2 * kU *
              (std::fabs(y) + std::fabs(gamma[j]) * ((12 * L + 8 + rel_var / kU) * std::fabs(xh) +
                                                     (23 * L + 2) * mabs * is)) +
          1e-45;
      const double ey = std::fabs(f.y[k] - y);
      worst_y = std::max(worst_y, ey / by);
      TH_CHECK_MSG(ey <= by, "%s y[%llu, %llu]: error %g > %g", w, (unsigned long long)i,
                   (unsigned long long)j, ey, by);
    }
    // Backward, from the float32 statistics the forward returned.
    const double mu = f.mean[i], isf = f.inv_std[i];
    double sd = 0, sp = 0, sda = 0, spa = 0;
    std::vector<double> d(cols), xr(cols);
    for (uint64_t j = 0; j < cols; ++j) {
      const uint64_t k = i * cols + j;
      xr[j] = (x[k] - mu) * isf;
      xh64[k] = xr[j];
      d[j] = (double)dy[k] * gamma[j];
      sd += d[j];
      sp += d[j] * xr[j];
      sda += std::fabs(d[j]);
      spa += std::fabs(d[j] * xr[j]);
    }
    const double a = sd / n, bb = sp / n;
    for (uint64_t j = 0; j < cols; ++j) {
      const double dx = (d[j] - (a + xr[j] * bb)) * isf;
      const double bound =
          2 * kU *
              (isf * (2 * std::fabs(d[j]) + 3 * std::fabs(xr[j] * bb) + std::fabs(a) +
                      (24 * L + 1) * (sda / n + std::fabs(xr[j]) * spa / n)) +
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
      b64[j] += dy[k];
      sb_abs[j] += std::fabs((double)dy[k]);
    }
  for (uint64_t j = 0; j < cols; ++j) {
    const double eg = std::fabs(b.dgamma[j] - g64[j]),
                 bg = 2 * kU * (23 * Lr + 3) * sg_abs[j] + 1e-45;
    const double eb = std::fabs(b.dbeta[j] - b64[j]), bbd = 2 * kU * (23 * Lr) * sb_abs[j] + 1e-45;
    worst_dg = std::max(worst_dg, eg / bg);
    worst_db = std::max(worst_db, eb / bbd);
    TH_CHECK_MSG(eg <= bg, "%s dgamma[%llu]: error %g > %g", w, (unsigned long long)j, eg, bg);
    TH_CHECK_MSG(eb <= bbd, "%s dbeta[%llu]: error %g > %g", w, (unsigned long long)j, eb, bbd);
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
      if (d == Dist::Positive)  // offset rows: mean / spread up to 1e3
        for (uint64_t k = 0; k < n; ++k) x[k] = x[k] + (float)((k / C) % 5) * 250.0f;
      std::vector<float> gamma = th::make(Dist::Uniform, C, ++salt),
                         beta = th::make(Dist::Uniform, C, ++salt);
      for (auto &v : gamma) v *= 2.0f;
      for (auto &v : beta) v *= 2.0f;
      if (d == Dist::Bits) gamma = th::make(Dist::Bits, C, ++salt);
      const float eps = (salt % 3 == 0) ? 0.0f : (float)1e-5;
      char w[96];
      std::snprintf(w, sizeof w, "(%llu, %llu) %s", (unsigned long long)R, (unsigned long long)C,
                    th::dist_name(d));
      const Fwd f = run_fwd(x, gamma, beta, R, C, eps);
      same_fwd(f, ref_fwd(x, gamma, beta, R, C, eps), w);
      const std::vector<float> dy =
          th::make(d == Dist::Bits ? Dist::Bits : Dist::Uniform, n, ++salt);
      if (f.mean.size() != R) continue;
      const Bwd b = run_bwd(dy, x, f.mean, f.inv_std, gamma, R, C);
      same_bwd(b, ref_bwd(dy, x, f.mean, f.inv_std, gamma, R, C), w);
      // Arbitrary statistics (not x's): still the definitions, bit for bit.
      const std::vector<float> m2 = th::make(d, R, ++salt),
                               s2 = th::make(Dist::Positive, R, ++salt);
      same_bwd(run_bwd(dy, x, m2, s2, gamma, R, C), ref_bwd(dy, x, m2, s2, gamma, R, C),
               std::string(w) + " (arbitrary mean, inv_std)");
      if ((d == Dist::Uniform || d == Dist::Positive) && eps > 0 && b.dx.size() == n)
        accuracy(x, gamma, beta, dy, R, C, eps, f, b, w);
    }
  }
  std::printf(
      "accuracy against float64 (max error / asserted bound): y %.3f, mean %.3f, inv_std "
      "%.3f, dx %.3f, dgamma %.3f, dbeta %.3f\n",
      worst_y, worst_mean, worst_is, worst_dx, worst_dg, worst_db);
}

// Typical figures for the header: x uniform in [-1, 1], gamma, beta in [-2, 2], (64, 1024).
void report_typical() {
  const uint64_t R = 64, C = 1024;
  const std::vector<float> x = th::make(Dist::Uniform, R * C, 5);
  std::vector<float> gamma = th::make(Dist::Uniform, C, 6), beta = th::make(Dist::Uniform, C, 7);
  for (auto &v : gamma) v *= 2.0f;
  for (auto &v : beta) v *= 2.0f;
  const Fwd f = run_fwd(x, gamma, beta, R, C, 1e-5);
  if (f.y.size() != R * C) return;
  double wy = 0;
  for (uint64_t i = 0; i < R; ++i) {
    double s = 0;
    for (uint64_t j = 0; j < C; ++j) s += x[i * C + j];
    const double mean = s / C;
    double q = 0;
    for (uint64_t j = 0; j < C; ++j) q += (x[i * C + j] - mean) * (x[i * C + j] - mean);
    const double is = 1.0 / std::sqrt(q / C + (double)(float)1e-5);
    for (uint64_t j = 0; j < C; ++j) {
      const double xh = (x[i * C + j] - mean) * is;
      const double y = xh * gamma[j] + beta[j];
      wy = std::max(wy, std::fabs(f.y[i * C + j] - y) /
                            (kU * (std::fabs(xh * gamma[j]) + std::fabs(beta[j]))));
    }
  }
  std::printf(
      "typical (64, 1024), x in [-1, 1]: |y - y64| <= %.2f * 2^-24 * (|xhat gamma| + |beta|)\n",
      wy);
}

void check_determinism_switch() {
  const uint64_t R = 5000, C = 7;
  const std::vector<float> x = th::make(Dist::Wide, R * C, 3), g = th::make(Dist::Uniform, C, 4);
  const bool was = tlrt_get_deterministic();
  tlrt_set_deterministic(false);
  const Fwd a = run_fwd(x, g, g, R, C, 1e-5);
  const Bwd b = run_bwd(x, x, a.mean, a.inv_std, g, R, C);
  tlrt_set_deterministic(true);
  same_fwd(run_fwd(x, g, g, R, C, 1e-5), a, "switch flipped");
  same_bwd(run_bwd(x, x, a.mean, a.inv_std, g, R, C), b, "switch flipped");
  tlrt_set_deterministic(was);
}

}  // namespace

int main() {
  const tlrt_allocator_stats start = th::stats();
  check_known_answers();
  check_empty();
  check_random();
  report_typical();
  check_determinism_switch();
  const tlrt_allocator_stats end = th::stats();
  TH_CHECK_MSG(end.live_bytes == start.live_bytes && end.live_handles == start.live_handles,
               "leak: %llu bytes / %llu handles at start, %llu / %llu at end",
               (unsigned long long)start.live_bytes, (unsigned long long)start.live_handles,
               (unsigned long long)end.live_bytes, (unsigned long long)end.live_handles);
  return th::finish("test_layer_norm");
}
