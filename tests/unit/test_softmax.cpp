// Known answers, special values, an independent bit-exact reference and the measured accuracy of
// every op of abi/tlrt_softmax.h on the CPU backend.
//
// The reference below re-implements the header's DEFINITIONS independently: the row maximum from
// the header's words, THE TREE literally (every chunk materialises its 256 lanes, a fresh vector
// per level, as in tests/unit/test_reduce.cpp), exp and log through the library's own elementwise
// tlrt_exp / tlrt_log (the shared math the header names), and every other operation as the header
// writes it. Every result is compared with it BIT FOR BIT (NaN payloads aside) over many shapes
// (cols 1..70000, the chunk boundaries included) and input distributions (uniform, wide
// exponents, random bit patterns, edge values sprinkled in), with random masks.
// Accuracy: every finite result is compared with a float64 evaluation of the same formulas on the
// same float32 inputs against the first-order bounds the header states; the largest ratio
// error / bound is printed (the header quotes it).
// Also: empty shapes, identical results with the determinism switch flipped, and no leaks.
// Under valgrind (TLRT_UNDER_VALGRIND) the large shapes are skipped.
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

// ---- the reference ------------------------------------------------------------------------------

// THE TREE sum of abi/tlrt_reduce.h, literally, for v non-empty.
float ref_tree(std::vector<float> v) {
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

// IEEE 754-2019 maximum: NaN if either is NaN, -0 < +0.
float ref_max(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return kNaN;
  if (a == b) return std::signbit(a) ? b : a;
  return a > b ? a : b;
}

// The library's shared exp / log, elementwise (tlrt_exp / tlrt_log).
std::vector<float> lib_unary(tlrt_status (*f)(const tlrt_buffer *, tlrt_buffer **),
                             const std::vector<float> &v) {
  if (v.empty()) return {};
  Buf b(th::upload(v)), y;
  TH_OK(f(b.get(), y.out()));
  return th::download(y.get());
}

bool allowed(float mask) { return !(mask == 0.0f); }

enum class Op { Softmax, LogSoftmax, Masked };
const char *op_name(Op op) {
  return op == Op::Softmax ? "softmax" : op == Op::LogSoftmax ? "log_softmax" : "masked";
}

struct RowStats {
  std::vector<float> m, s;
};

// The forward of the header, for a whole (rows, cols) matrix.
std::vector<float> ref_forward(Op op, const std::vector<float> &x, const std::vector<float> &mask,
                               uint64_t rows, uint64_t cols, RowStats *stats = nullptr) {
  std::vector<float> m(rows), d(rows * cols);
  for (uint64_t i = 0; i < rows; ++i) {
    float mi = -kInf;
    for (uint64_t j = 0; j < cols; ++j) {
      const uint64_t k = i * cols + j;
      if (op == Op::Masked && !allowed(mask[k])) continue;
      mi = ref_max(mi, x[k]);
    }
    m[i] = mi;
    for (uint64_t j = 0; j < cols; ++j) d[i * cols + j] = x[i * cols + j] - mi;
  }
  std::vector<float> e = lib_unary(tlrt_exp, d);
  if (op == Op::Masked)
    for (uint64_t k = 0; k < rows * cols; ++k)
      if (!allowed(mask[k])) e[k] = 0.0f;
  std::vector<float> s(rows);
  for (uint64_t i = 0; i < rows; ++i)
    s[i] = ref_tree(std::vector<float>(e.begin() + i * cols, e.begin() + (i + 1) * cols));
  std::vector<float> y(rows * cols);
  if (op == Op::LogSoftmax) {
    const std::vector<float> ls = lib_unary(tlrt_log, s);
    for (uint64_t k = 0; k < rows * cols; ++k) y[k] = d[k] - ls[k / cols];
  } else {
    for (uint64_t k = 0; k < rows * cols; ++k) {
      const uint64_t i = k / cols;
      if (op == Op::Masked && (m[i] == -kInf || !allowed(mask[k])))
        y[k] = 0.0f;
      else
        y[k] = e[k] / s[i];
    }
  }
  if (stats) *stats = RowStats{m, s};
  return y;
}

std::vector<float> ref_backward(bool log, const std::vector<float> &y, const std::vector<float> &g,
                                uint64_t rows, uint64_t cols) {
  std::vector<float> dx(rows * cols);
  if (log) {
    const std::vector<float> ey = lib_unary(tlrt_exp, y);
    for (uint64_t i = 0; i < rows; ++i) {
      const float sg =
          ref_tree(std::vector<float>(g.begin() + i * cols, g.begin() + (i + 1) * cols));
      for (uint64_t j = 0; j < cols; ++j) {
        const uint64_t k = i * cols + j;
        dx[k] = std::fma(-ey[k], sg, g[k]);
      }
    }
  } else {
    for (uint64_t i = 0; i < rows; ++i) {
      std::vector<float> t(cols);
      for (uint64_t j = 0; j < cols; ++j) t[j] = g[i * cols + j] * y[i * cols + j];
      const float dot = ref_tree(t);
      for (uint64_t j = 0; j < cols; ++j) {
        const uint64_t k = i * cols + j;
        dx[k] = y[k] * (g[k] - dot);
      }
    }
  }
  return dx;
}

// ---- calling the library ------------------------------------------------------------------------

std::vector<float> run_forward(Op op, const std::vector<float> &x, const std::vector<float> &mask,
                               uint64_t rows, uint64_t cols) {
  Buf bx(th::upload(x)), bm, y;
  tlrt_status s;
  switch (op) {
    case Op::Softmax: s = tlrt_softmax(bx.get(), rows, cols, y.out()); break;
    case Op::LogSoftmax: s = tlrt_log_softmax(bx.get(), rows, cols, y.out()); break;
    default:
      bm = Buf(th::upload(mask));
      s = tlrt_hard_masked_softmax_by_row(bx.get(), bm.get(), rows, cols, y.out());
      break;
  }
  TH_CHECK_MSG(s == TLRT_OK, "%s (%llu, %llu) failed: %s", op_name(op), (unsigned long long)rows,
               (unsigned long long)cols, tlrt_last_error());
  return s == TLRT_OK ? th::download(y.get()) : std::vector<float>{};
}

std::vector<float> run_backward(bool log, const std::vector<float> &y, const std::vector<float> &g,
                                uint64_t rows, uint64_t cols) {
  Buf by(th::upload(y)), bg(th::upload(g)), dx;
  const tlrt_status s = log ? tlrt_log_softmax_bwd(by.get(), bg.get(), rows, cols, dx.out())
                            : tlrt_softmax_bwd(by.get(), bg.get(), rows, cols, dx.out());
  TH_CHECK_MSG(s == TLRT_OK, "%s_bwd (%llu, %llu) failed: %s", log ? "log_softmax" : "softmax",
               (unsigned long long)rows, (unsigned long long)cols, tlrt_last_error());
  return s == TLRT_OK ? th::download(dx.get()) : std::vector<float>{};
}

// loose_zero: +0 and -0 compare equal under valgrind only. Valgrind 3.19 emulates the vectorised
// vfnmadd (fma with a negated product, the CPU clones' form of log_softmax_bwd's
// fma(-exp(y), sg, g)) with the wrong sign for an exact zero result (-0 instead of IEEE's +0;
// reproduced in isolation); natively the results are compared bit for bit.
void expect_all_same(const std::vector<float> &got, const std::vector<float> &want,
                     const std::string &what, bool loose_zero = false) {
  ++th::checks();
  if (got.size() != want.size()) {
    th::report(__FILE__, __LINE__,
               what + ": " + std::to_string(got.size()) + " outputs, expected " +
                   std::to_string(want.size()));
    return;
  }
  for (size_t i = 0; i < got.size(); ++i)
    if (!th::same_bits(got[i], want[i]) &&
        !(loose_zero && th::under_valgrind() && got[i] == 0.0f && want[i] == 0.0f)) {
      th::report(__FILE__, __LINE__,
                 what + ": element " + std::to_string(i) + " is " + hex(got[i]) + ", expected " +
                     hex(want[i]));
      return;
    }
}

// ---- known answers and special values -----------------------------------------------------------

void check_known_answers() {
  const float nz = -0.0f;
  // Two equal entries: exp(0) = 1, s = 2, 1 / 2.
  expect_all_same(run_forward(Op::Softmax, {3.0f, 3.0f}, {}, 1, 2), {0.5f, 0.5f}, "softmax [3, 3]");
  expect_all_same(run_forward(Op::Softmax, {-7.0f, -7.0f, -7.0f, -7.0f}, {}, 1, 4),
                  {0.25f, 0.25f, 0.25f, 0.25f}, "softmax of four equal");
  expect_all_same(run_forward(Op::Softmax, {1.0f, 2.0f, 3.0f, 4.0f}, {}, 4, 1),
                  {1.0f, 1.0f, 1.0f, 1.0f}, "softmax cols == 1");
  expect_all_same(run_forward(Op::LogSoftmax, {1.0f, -2.0f, nz, 3e38f}, {}, 4, 1),
                  {0.0f, 0.0f, 0.0f, 0.0f}, "log_softmax cols == 1 is +0");
  {
    const std::vector<float> y = run_forward(Op::LogSoftmax, {5.0f, 5.0f}, {}, 1, 2);
    const float l2 = lib_unary(tlrt_log, {2.0f})[0];
    expect_all_same(y, {-l2, -l2}, "log_softmax [5, 5] = -log 2");
    TH_CHECK(std::fabs((double)y[0] + std::log(2.0)) < 1e-7);
  }
  // Special values (as PyTorch).
  for (Op op : {Op::Softmax, Op::LogSoftmax}) {
    const std::string w = op_name(op);
    std::vector<float> y = run_forward(op, {1.0f, kNaN, 2.0f, 0.5f, 0.25f, -1.0f}, {}, 2, 3);
    TH_CHECK_MSG(y.size() == 6 && std::isnan(y[0]) && std::isnan(y[1]) && std::isnan(y[2]) &&
                     !std::isnan(y[3]) && !std::isnan(y[4]) && !std::isnan(y[5]),
                 "%s: a NaN makes its row (only) NaN", w.c_str());
    y = run_forward(op, {1.0f, kInf, 2.0f}, {}, 1, 3);
    TH_CHECK_MSG(y.size() == 3 && std::isnan(y[0]) && std::isnan(y[1]) && std::isnan(y[2]),
                 "%s: +inf makes the row NaN", w.c_str());
    y = run_forward(op, {-kInf, -kInf, -kInf}, {}, 1, 3);
    TH_CHECK_MSG(y.size() == 3 && std::isnan(y[0]) && std::isnan(y[1]) && std::isnan(y[2]),
                 "%s: an all -inf row is NaN", w.c_str());
  }
  expect_all_same(run_forward(Op::Softmax, {-kInf, 0.0f, -kInf}, {}, 1, 3), {0.0f, 1.0f, 0.0f},
                  "softmax with -inf entries");
  expect_all_same(run_forward(Op::LogSoftmax, {-kInf, 7.0f, -kInf}, {}, 1, 3), {-kInf, 0.0f, -kInf},
                  "log_softmax with -inf entries");
  expect_all_same(run_forward(Op::Softmax, {0.0f, -200.0f}, {}, 1, 2), {1.0f, 0.0f},
                  "softmax underflow to +0");
  expect_all_same(run_forward(Op::LogSoftmax, {0.0f, -200.0f}, {}, 1, 2), {0.0f, -200.0f},
                  "log_softmax keeps finite values where softmax underflows");
  expect_all_same(run_forward(Op::Softmax, {3e38f, -3e38f}, {}, 1, 2), {1.0f, 0.0f},
                  "softmax spread beyond FLT_MAX");
  expect_all_same(run_forward(Op::LogSoftmax, {3e38f, -3e38f}, {}, 1, 2), {0.0f, -kInf},
                  "log_softmax spread beyond FLT_MAX");
  // -0 and +0 tie: m = +0, both exp(0) = 1.
  expect_all_same(run_forward(Op::Softmax, {nz, 0.0f}, {}, 1, 2), {0.5f, 0.5f}, "softmax [-0, +0]");
  // Subnormal differences: exp(tiny) = 1.
  expect_all_same(run_forward(Op::Softmax, {1e-45f, 0.0f}, {}, 1, 2), {0.5f, 0.5f},
                  "softmax of subnormals");

  // Masked: blocked entries exactly +0, NaN mask allows, -0 mask blocks, blocked NaN scores
  // ignored.
  expect_all_same(run_forward(Op::Masked, {1.0f, 2.0f, 3.0f}, {0.0f, 0.0f, 0.0f}, 1, 3),
                  {0.0f, 0.0f, 0.0f}, "masked: all blocked");
  expect_all_same(run_forward(Op::Masked, {-kInf, -kInf, 3.0f}, {1.0f, 1.0f, 0.0f}, 1, 3),
                  {0.0f, 0.0f, 0.0f}, "masked: allowed all -inf");
  expect_all_same(run_forward(Op::Masked, {kNaN, 5.0f, 5.0f}, {0.0f, 1.0f, kNaN}, 1, 3),
                  {0.0f, 0.5f, 0.5f}, "masked: blocked NaN ignored, NaN mask allows");
  expect_all_same(run_forward(Op::Masked, {9.0f, 5.0f, kInf}, {nz, -2.0f, 0.0f}, 1, 3),
                  {0.0f, 1.0f, 0.0f}, "masked: -0 blocks, negative allows, blocked +inf ignored");
  {
    const std::vector<float> y =
        run_forward(Op::Masked, {kNaN, 1.0f, 2.0f, 3.0f}, {1.0f, 1.0f, 0.0f, 1.0f}, 1, 4);
    TH_CHECK_MSG(y.size() == 4 && std::isnan(y[0]) && std::isnan(y[1]) &&
                     th::same_bits(y[2], 0.0f) && std::isnan(y[3]),
                 "masked: an allowed NaN makes the allowed entries NaN, blocked stay +0");
    const std::vector<float> z =
        run_forward(Op::Masked, {kInf, 1.0f, 2.0f}, {1.0f, 0.0f, 1.0f}, 1, 3);
    TH_CHECK_MSG(z.size() == 3 && std::isnan(z[0]) && th::same_bits(z[1], 0.0f) && std::isnan(z[2]),
                 "masked: an allowed +inf makes the allowed entries NaN, blocked stay +0");
  }
  // Unmasked rows equal tlrt_softmax bit for bit.
  {
    const std::vector<float> x = th::make(Dist::Uniform, 3 * 300, 5);
    const std::vector<float> ones(x.size(), 1.0f);
    expect_all_same(run_forward(Op::Masked, x, ones, 3, 300),
                    run_forward(Op::Softmax, x, {}, 3, 300),
                    "masked with every entry allowed == softmax");
  }

  // Backward known answers.
  expect_all_same(run_backward(false, {0.5f, 0.5f}, {1.0f, 1.0f}, 1, 2), {0.0f, 0.0f},
                  "softmax_bwd, constant g");
  expect_all_same(run_backward(false, {0.5f, 0.5f}, {1.0f, 0.0f}, 1, 2), {0.25f, -0.25f},
                  "softmax_bwd [1, 0]");
  expect_all_same(run_backward(false, {1.0f, 0.0f, 0.0f}, {2.0f, 3.0f, -1.0f}, 1, 3),
                  {0.0f, 0.0f, -0.0f}, "softmax_bwd, one-hot y");
  {
    const float half = lib_unary(tlrt_exp, {-lib_unary(tlrt_log, {2.0f})[0]})[0];
    const std::vector<float> y = {-lib_unary(tlrt_log, {2.0f})[0], -lib_unary(tlrt_log, {2.0f})[0]};
    expect_all_same(run_backward(true, y, {1.0f, 0.0f}, 1, 2),
                    {std::fma(-half, 1.0f, 1.0f), std::fma(-half, 1.0f, 0.0f)},
                    "log_softmax_bwd [1, 0]");
  }
  expect_all_same(run_backward(true, {0.0f, -kInf}, {2.0f, 3.0f}, 1, 2), {2.0f - 5.0f, 3.0f},
                  "log_softmax_bwd, y = -inf gives g");
  {
    std::vector<float> d =
        run_backward(false, {0.5f, 0.5f, 0.2f, 0.8f}, {kNaN, 1.0f, 1.0f, 2.0f}, 2, 2);
    TH_CHECK(d.size() == 4 && std::isnan(d[0]) && std::isnan(d[1]) && !std::isnan(d[2]) &&
             !std::isnan(d[3]));
    d = run_backward(false, {0.0f, 1.0f}, {kInf, 1.0f}, 1, 2);
    TH_CHECK_MSG(d.size() == 2 && std::isnan(d[0]) && std::isnan(d[1]),
                 "softmax_bwd: 0 * inf makes the row NaN");
    d = run_backward(true, {-1.0f, kNaN, -1.0f, -2.0f}, {1.0f, 1.0f, kNaN, 0.0f}, 2, 2);
    TH_CHECK(d.size() == 4 && !std::isnan(d[0]) && std::isnan(d[1]) && std::isnan(d[2]) &&
             std::isnan(d[3]));
  }
}

// ---- empty shapes ------------------------------------------------------------------------------

void check_empty() {
  Buf e(th::upload({})), y;
  for (auto rc :
       {std::make_pair(0ull, 0ull), std::make_pair(0ull, 7ull), std::make_pair(7ull, 0ull)}) {
    const uint64_t r = rc.first, c = rc.second;
    TH_OK(tlrt_softmax(e.get(), r, c, y.out()));
    TH_CHECK(th::download(y.get()).empty());
    TH_OK(tlrt_log_softmax(e.get(), r, c, y.out()));
    TH_CHECK(th::download(y.get()).empty());
    TH_OK(tlrt_hard_masked_softmax_by_row(e.get(), e.get(), r, c, y.out()));
    TH_CHECK(th::download(y.get()).empty());
    TH_OK(tlrt_softmax_bwd(e.get(), e.get(), r, c, y.out()));
    TH_CHECK(th::download(y.get()).empty());
    TH_OK(tlrt_log_softmax_bwd(e.get(), e.get(), r, c, y.out()));
    TH_CHECK(th::download(y.get()).empty());
  }
}

// ---- randomized: bitwise against the reference, accuracy against float64 ------------------------

struct Worst {
  double ratio = 0;  // max error / asserted bound
};
Worst worst_fwd[3], worst_bwd[2];

std::vector<float> random_mask(uint64_t n, uint64_t salt, int style) {
  th::Rng rng(salt);
  std::vector<float> m(n);
  for (auto &v : m) {
    const uint32_t r = (uint32_t)rng.gen();
    switch (style) {
      case 0: v = (r % 4 == 0) ? 0.0f : 1.0f; break;                      // 25% blocked
      case 1: v = (r % 8 == 0) ? 1.0f : ((r & 8) ? -0.0f : 0.0f); break;  // mostly blocked
      default: v = (r % 5 == 0) ? NAN : ((r % 5 == 1) ? 0.0f : -3.0f); break;
    }
  }
  return m;
}

void accuracy_fwd(Op op, const std::vector<float> &x, const std::vector<float> &mask, uint64_t rows,
                  uint64_t cols, const std::vector<float> &y, const char *w) {
  const int L = levels(cols);
  for (uint64_t i = 0; i < rows; ++i) {
    double m = -INFINITY;
    for (uint64_t j = 0; j < cols; ++j) {
      const uint64_t k = i * cols + j;
      if (op == Op::Masked && !allowed(mask[k])) continue;
      m = std::max(m, (double)x[k]);
    }
    if (!std::isfinite(m)) continue;
    bool finite = true;
    double s = 0;
    for (uint64_t j = 0; j < cols; ++j) {
      const uint64_t k = i * cols + j;
      if (op == Op::Masked && !allowed(mask[k])) continue;
      finite = finite && std::isfinite(x[k]);
      s += std::exp((double)x[k] - m);
    }
    if (!finite) continue;
    for (uint64_t j = 0; j < cols; ++j) {
      const uint64_t k = i * cols + j;
      if (op == Op::Masked && !allowed(mask[k])) continue;
      const double dm = std::fabs((double)x[k] - m);
      if (dm > 3.4028234663852886e38) continue;  // x - m overflows float32: -inf, checked bitwise
      double ref, bound;
      if (op == Op::LogSoftmax) {
        ref = ((double)x[k] - m) - std::log(s);
        const double err = std::fabs((double)y[k] - ref);
        bound = kU * (2 * dm + 3 * std::log(s) + std::log((double)cols) + 23 * L + 3);
        worst_fwd[(int)op].ratio = std::max(worst_fwd[(int)op].ratio, err / bound);
        TH_CHECK_MSG(err <= bound, "%s log_softmax row %llu col %llu: error %g > bound %g", w,
                     (unsigned long long)i, (unsigned long long)j, err, bound);
      } else {
        ref = std::exp((double)x[k] - m) / s;
        if (ref < 1e-30) continue;  // the subnormal range (absolute errors) is covered bitwise
        const double err = std::fabs((double)y[k] - ref);
        bound = kU * ref * (dm + 23 * L + std::log((double)cols) + 5);
        worst_fwd[(int)op].ratio = std::max(worst_fwd[(int)op].ratio, err / bound);
        TH_CHECK_MSG(err <= bound, "%s %s row %llu col %llu: error %g > bound %g", w, op_name(op),
                     (unsigned long long)i, (unsigned long long)j, err, bound);
      }
    }
  }
}

void accuracy_bwd(bool log, const std::vector<float> &y, const std::vector<float> &g, uint64_t rows,
                  uint64_t cols, const std::vector<float> &dx, const char *w) {
  const int L = levels(cols);
  for (uint64_t i = 0; i < rows; ++i) {
    double dot = 0, sg = 0, sabs_gy = 0, sabs_g = 0;
    for (uint64_t j = 0; j < cols; ++j) {
      const uint64_t k = i * cols + j;
      dot += (double)g[k] * y[k];
      sabs_gy += std::fabs((double)g[k] * y[k]);
      sg += g[k];
      sabs_g += std::fabs((double)g[k]);
    }
    for (uint64_t j = 0; j < cols; ++j) {
      const uint64_t k = i * cols + j;
      double ref, bound;
      if (log) {
        const double ey = std::exp((double)y[k]);
        ref = g[k] - ey * sg;
        bound = kU * (2 * std::fabs(ref) + ey * (2 * std::fabs(sg) + 24 * L * sabs_g)) + 1e-45;
      } else {
        ref = y[k] * ((double)g[k] - dot);
        bound = kU * y[k] * (3 * std::fabs(g[k] - dot) + (24 * L + 1) * sabs_gy) + 1e-45;
      }
      const double err = std::fabs((double)dx[k] - ref);
      worst_bwd[log].ratio = std::max(worst_bwd[log].ratio, err / bound);
      TH_CHECK_MSG(err <= bound, "%s %s_bwd row %llu col %llu: error %g > bound %g", w,
                   log ? "log_softmax" : "softmax", (unsigned long long)i, (unsigned long long)j,
                   err, bound);
    }
  }
}

void check_random() {
  struct Shape {
    uint64_t rows, cols;
  };
  std::vector<Shape> shapes = {{1, 1},    {7, 1},    {5, 2},    {3, 3},    {4, 5},    {6, 16},
                               {3, 31},   {3, 32},   {3, 33},   {2, 64},   {5, 100},  {3, 255},
                               {3, 256},  {3, 257},  {2, 511},  {2, 513},  {3, 1000}, {2, 1024},
                               {2, 1025}, {2, 2047}, {2, 2049}, {1, 4095}, {2, 4096}, {1, 4097},
                               {1, 8192}, {1, 8193}, {300, 17}, {1000, 3}};
  if (big_ok()) {
    shapes.push_back({1, 10000});
    shapes.push_back({2, 70000});
    shapes.push_back({1, (uint64_t{1} << 20) + 3});
  }
  uint64_t salt = 1;
  for (const Shape &sh : shapes) {
    const uint64_t R = sh.rows, C = sh.cols, n = R * C;
    for (Dist d : {Dist::Uniform, Dist::Wide, Dist::Bits, Dist::Edge, Dist::Positive}) {
      if (n > 200000 && d != Dist::Uniform && d != Dist::Edge) continue;
      std::vector<float> x = th::make(d, n, ++salt);
      if (d == Dist::Uniform)  // [-8, 8]
        for (auto &v : x) v *= 8.0f;
      if (d == Dist::Positive && C > 1)  // wide spreads: [-80, 0]
        for (auto &v : x) v *= -80.0f;
      char w[96];
      std::snprintf(w, sizeof w, "(%llu, %llu) %s", (unsigned long long)R, (unsigned long long)C,
                    th::dist_name(d));
      for (Op op : {Op::Softmax, Op::LogSoftmax, Op::Masked}) {
        const std::vector<float> mask =
            op == Op::Masked ? random_mask(n, salt * 3 + 1, (int)(salt % 3)) : std::vector<float>{};
        const std::vector<float> y = run_forward(op, x, mask, R, C);
        expect_all_same(y, ref_forward(op, x, mask, R, C), std::string(w) + " " + op_name(op));
        if (y.size() == n) accuracy_fwd(op, x, mask, R, C, y, w);
      }
      // Backward on a real softmax output (and on arbitrary y for the bitwise check).
      std::vector<float> g = th::make(d == Dist::Bits ? Dist::Bits : Dist::Uniform, n, ++salt);
      for (bool log : {false, true}) {
        const std::vector<float> y = run_forward(log ? Op::LogSoftmax : Op::Softmax, x, {}, R, C);
        const std::vector<float> dx = run_backward(log, y, g, R, C);
        expect_all_same(dx, ref_backward(log, y, g, R, C),
                        std::string(w) + (log ? " log_softmax_bwd" : " softmax_bwd"), log);
        bool finite = true;
        for (float v : y) finite = finite && std::isfinite(v);
        for (float v : g) finite = finite && std::isfinite(v);
        if (finite && d != Dist::Bits && d != Dist::Wide && dx.size() == n)
          accuracy_bwd(log, y, g, R, C, dx, w);
        const std::vector<float> yb = th::make(d, n, ++salt);
        expect_all_same(
            run_backward(log, yb, g, R, C), ref_backward(log, yb, g, R, C),
            std::string(w) + (log ? " log_softmax_bwd" : " softmax_bwd") + " (arbitrary y)", log);
      }
    }
  }
  std::printf("accuracy against float64 (max error / asserted bound):\n");
  for (Op op : {Op::Softmax, Op::LogSoftmax, Op::Masked})
    std::printf("  %-12s ratio %.3f\n", op_name(op), worst_fwd[(int)op].ratio);
  std::printf("  softmax_bwd  ratio %.3f\n  log_sm_bwd   ratio %.3f\n", worst_bwd[0].ratio,
              worst_bwd[1].ratio);
}

// Accuracy on ordinary data, split by |x - m| (for the header): values in [-1, 1] and [-16, 16].
void report_typical() {
  for (float scale : {1.0f, 16.0f}) {
    const uint64_t R = 64, C = 1000;
    std::vector<float> x = th::make(Dist::Uniform, R * C, 77);
    for (auto &v : x) v *= scale;
    const std::vector<float> y = run_forward(Op::Softmax, x, {}, R, C);
    const std::vector<float> l = run_forward(Op::LogSoftmax, x, {}, R, C);
    if (y.size() != R * C || l.size() != R * C) return;
    double worst_rel = 0, worst_abs = 0;
    for (uint64_t i = 0; i < R; ++i) {
      double m = -INFINITY, s = 0;
      for (uint64_t j = 0; j < C; ++j) m = std::max(m, (double)x[i * C + j]);
      for (uint64_t j = 0; j < C; ++j) s += std::exp(x[i * C + j] - m);
      for (uint64_t j = 0; j < C; ++j) {
        const uint64_t k = i * C + j;
        const double r = std::exp(x[k] - m) / s;
        worst_rel = std::max(worst_rel, std::fabs(y[k] - r) / r / kU);
        const double lr = (x[k] - m) - std::log(s);
        worst_abs = std::max(worst_abs, std::fabs(l[k] - lr) / kU);
      }
    }
    std::printf(
        "values in [-%g, %g], (64, 1000): softmax max relative error %.2f * 2^-24, "
        "log_softmax max absolute error %.2f * 2^-24\n",
        scale, scale, worst_rel, worst_abs);
  }
}

void check_determinism_switch() {
  const std::vector<float> x = th::make(Dist::Wide, 3 * 5000, 9);
  const bool was = tlrt_get_deterministic();
  tlrt_set_deterministic(false);
  const std::vector<float> a = run_forward(Op::Softmax, x, {}, 3, 5000);
  tlrt_set_deterministic(true);
  expect_all_same(run_forward(Op::Softmax, x, {}, 3, 5000), a, "softmax, switch flipped");
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
  return th::finish("test_softmax");
}
