// Suite 'grad': tlrt_softmax_bwd, tlrt_log_softmax_bwd and the hard-masked softmax's backward
// (tlrt_softmax_bwd on its output, as abi/tlrt_softmax.h prescribes) against central finite
// differences of the scalar loss L(x) = <w, f(x)> = sum_j w[j] f(x)[j], per row, for seeded random
// rows x (cols 1 .. 300) and weights w. Runs on the CPU always and on CUDA(0) when usable.
// The kernel under test is given y = f(x) (the library's forward output) and g = w, and must return
// dL/dx. Two independent checks:
//
// (1) Float64 forward. D[i] = (L64(x + h e_i) - L64(x - h e_i)) / (2h), with L64 a float64
//     evaluation of the header's definition (max, exp, sum, divide; masked entries skipped) and
//     h = 2^-14. Truncation h^2 / 6 * M3 (M3 below) and the double rounding of the two losses
//     (8 * 2^-52 * sum|w_j f_j| / 2h) are added to the tolerance; both are tiny, so |dx - D| is
//     essentially the kernel's own float32 error plus the effect of the
//     float32 y it is given. Bounds (u = 2^-24; first order, each term a count of roundings of the
//     quantity it multiplies; the forward's accuracy is the one tests/unit/test_softmax.cpp
//     asserts):
//       softmax:      E(y_j) = u y_j (|x_j - m| + 23 + log(cols) + 5);
//                     |dx_i - D_i| <= u y_i (3 |w_i - dot| + 25 S) + E(y_i) |w_i - dot|
//                                     + y_i sum_j |w_j| E(y_j),          S = sum_j |w_j y_j|;
//       log-softmax:  E(y_j) = u (2 |x_j - m| + 3 log(s) + log(cols) + 26);
//                     |dx_i - D_i| <= u (2 |dx_i| + p_i (2 |sw| + 24 sum|w|)) + p_i |sw| E(y_i)
//                     * 1.1, p_i = exp(y_i), sw = sum_j w_j;
//     a sample passes within 2x that bound (+1e-37).
// (2) Float32 forward (the library's own tlrt_softmax / tlrt_log_softmax / masked softmax on the
//     perturbed rows, all 2 * cols of them in one call; x a multiple of 2^-12 in [-4, 4), h = 2^-6,
//     so x +- h is exact). D[i] as above from the float32 outputs, summed in double. Bound:
//       truncation  h^2 / 6 * M3 with M3 = max|w| * (1/8 + 1) for softmax (third derivative of the
//                   logistic p(1-p)(1-6p+6p^2) <= 1/8 in magnitude for y_i; y_j * p(6p^2 - 6p + 1)
//                   <= y_j for j != i, and sum_j y_j <= 1), M3 = 0.1 * sum|w| for log-softmax
//                   (|p(1-p)(1-2p)| <= 0.0963 for every component);
//       rounding    sum_j |w_j| (E(y_j(x + h e_i)) + E(y_j(x - h e_i))) / (2h), E as in (1);
//       kernel      the bound of (1).
//     A sample passes within 2x the sum. This checks that the backward kernels differentiate the
//     forward the library actually computes.
// Also: blocked entries of the masked softmax have exactly zero finite differences and a +-0
// gradient; an all-blocked row has zero gradient everywhere.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "harness.hpp"

namespace {

using th::Buf;

const double kU = std::ldexp(1.0, -24);

enum class Op { Softmax, LogSoftmax, Masked };
const char *op_name(Op op) {
  return op == Op::Softmax ? "softmax" : op == Op::LogSoftmax ? "log_softmax" : "masked";
}
const char *dev_name(tlrt_device d) { return d == TLRT_DEVICE_CPU ? "cpu" : "cuda"; }

bool allowed(float m) { return !(m == 0.0f); }

// The forward in float64 (definition of the header), one row.
std::vector<double> f64(Op op, const std::vector<double> &x, const std::vector<float> &mask) {
  const size_t n = x.size();
  double m = -INFINITY;
  for (size_t j = 0; j < n; ++j)
    if (op != Op::Masked || allowed(mask[j])) m = std::max(m, x[j]);
  std::vector<double> y(n, 0.0);
  if (m == -INFINITY) return y;
  double s = 0;
  for (size_t j = 0; j < n; ++j)
    if (op != Op::Masked || allowed(mask[j])) s += std::exp(x[j] - m);
  for (size_t j = 0; j < n; ++j) {
    if (op == Op::LogSoftmax)
      y[j] = (x[j] - m) - std::log(s);
    else if (op == Op::Softmax || allowed(mask[j]))
      y[j] = std::exp(x[j] - m) / s;
  }
  return y;
}

double dot(const std::vector<double> &w, const std::vector<double> &y) {
  double s = 0;
  for (size_t j = 0; j < w.size(); ++j) s += w[j] * y[j];
  return s;
}

// The library's forward on (rows, cols) on dev.
std::vector<float> lib_fwd(Op op, tlrt_device dev, const std::vector<float> &x,
                           const std::vector<float> &mask, uint64_t rows, uint64_t cols) {
  Buf bx(th::upload(x, dev)), bm, y;
  tlrt_status s;
  if (op == Op::Softmax)
    s = tlrt_softmax(bx.get(), rows, cols, y.out());
  else if (op == Op::LogSoftmax)
    s = tlrt_log_softmax(bx.get(), rows, cols, y.out());
  else {
    bm = Buf(th::upload(mask, dev));
    s = tlrt_hard_masked_softmax_by_row(bx.get(), bm.get(), rows, cols, y.out());
  }
  TH_CHECK_MSG(s == TLRT_OK, "%s forward failed: %s", op_name(op), tlrt_last_error());
  return s == TLRT_OK ? th::download(y.get()) : std::vector<float>{};
}

std::vector<float> lib_bwd(bool log, tlrt_device dev, const std::vector<float> &y,
                           const std::vector<float> &g, uint64_t cols) {
  Buf by(th::upload(y, dev)), bg(th::upload(g, dev)), dx;
  const tlrt_status s = log ? tlrt_log_softmax_bwd(by.get(), bg.get(), 1, cols, dx.out())
                            : tlrt_softmax_bwd(by.get(), bg.get(), 1, cols, dx.out());
  TH_CHECK_MSG(s == TLRT_OK, "backward failed: %s", tlrt_last_error());
  return s == TLRT_OK ? th::download(dx.get()) : std::vector<float>{};
}

// E(y_j) of the forward (the unit test's asserted accuracy), for one float32 output row.
std::vector<double> fwd_error(Op op, const std::vector<float> &x, const std::vector<float> &mask,
                              const std::vector<float> &y) {
  const size_t n = x.size();
  double m = -INFINITY;
  for (size_t j = 0; j < n; ++j)
    if (op != Op::Masked || allowed(mask[j])) m = std::max(m, (double)x[j]);
  std::vector<double> e(n, 0.0);
  if (m == -INFINITY) return e;
  const double lc = std::log((double)n);
  for (size_t j = 0; j < n; ++j) {
    const double dm = std::fabs(x[j] - m);
    if (op == Op::LogSoftmax)
      e[j] = kU * (2 * dm + 3 * lc + lc + 26);  // log(s) <= log(cols)
    else
      e[j] = kU * std::fabs(y[j]) * 1.01 * (dm + 23 + lc + 5);
  }
  return e;
}

// The kernel-side bound of check (1), for component i.
double kernel_bound(bool log, const std::vector<float> &y, const std::vector<double> &w,
                    const std::vector<double> &ey, size_t i) {
  const size_t n = y.size();
  if (log) {
    double sw = 0, sa = 0;
    for (size_t j = 0; j < n; ++j) {
      sw += w[j];
      sa += std::fabs(w[j]);
    }
    const double p = std::exp((double)y[i]);
    const double dx = w[i] - p * sw;
    return kU * (2 * std::fabs(dx) + p * (2 * std::fabs(sw) + 24 * sa)) +
           p * std::fabs(sw) * ey[i] * 1.1;
  }
  double d = 0, S = 0, sy = 0;
  for (size_t j = 0; j < n; ++j) {
    d += w[j] * y[j];
    S += std::fabs(w[j] * y[j]);
    sy += std::fabs(w[j]) * ey[j];
  }
  return kU * y[i] * (3 * std::fabs(w[i] - d) + 25 * S) + ey[i] * std::fabs(w[i] - d) + y[i] * sy;
}

struct Worst {
  double r1 = 0, r2 = 0;
};

void check_row(Op op, tlrt_device dev, size_t cols, uint64_t salt, Worst &worst) {
  th::Rng rng(salt);
  std::vector<float> x(cols), mask(cols, 1.0f), wf(cols);
  for (auto &v : x) v = std::round(rng.uniform(-4.0f, 4.0f) * 4096.0f) / 4096.0f;
  for (auto &v : wf) v = rng.uniform(-1.0f, 1.0f);
  if (op == Op::Masked) {
    for (auto &v : mask) v = (rng.gen() % 3 == 0) ? 0.0f : 1.0f;
    if (salt % 5 == 0) std::fill(mask.begin(), mask.end(), 0.0f);  // all blocked
  }
  const std::vector<double> w(wf.begin(), wf.end());
  const bool log = op == Op::LogSoftmax;
  const std::vector<float> y = lib_fwd(op, dev, x, mask, 1, cols);
  const std::vector<float> dx = lib_bwd(log, dev, y, wf, cols);
  if (y.size() != cols || dx.size() != cols) return;
  const std::vector<double> ey = fwd_error(op, x, mask, y);
  double wmax = 0, wabs = 0;
  for (double v : w) {
    wmax = std::max(wmax, std::fabs(v));
    wabs += std::fabs(v);
  }
  // Check (2): all 2 * cols perturbed rows through the library in one call.
  const double h2 = std::ldexp(1.0, -6);
  std::vector<float> xp(2 * cols * cols), mp(2 * cols * cols);
  for (size_t i = 0; i < cols; ++i)
    for (int sgn = 0; sgn < 2; ++sgn) {
      float *row = xp.data() + (2 * i + sgn) * cols;
      std::copy(x.begin(), x.end(), row);
      row[i] = (float)((double)x[i] + (sgn == 0 ? h2 : -h2));
      std::copy(mask.begin(), mask.end(), mp.data() + (2 * i + sgn) * cols);
    }
  const std::vector<float> yp = lib_fwd(op, dev, xp, mp, 2 * cols, cols);
  if (yp.size() != xp.size()) return;
  const double m3 = log ? 0.1 * wabs : 1.125 * wmax;
  size_t bad1 = 0, bad2 = 0;
  for (size_t i = 0; i < cols; ++i) {
    // (1) float64 forward.
    const double h1 = std::ldexp(1.0, -14);
    std::vector<double> xd(x.begin(), x.end());
    xd[i] = x[i] + h1;
    const std::vector<double> fp = f64(op, xd, mask);
    xd[i] = x[i] - h1;
    const double lp = dot(w, fp), lm = dot(w, f64(op, xd, mask));
    double lmag = 0;
    for (size_t j = 0; j < cols; ++j) lmag += std::fabs(w[j] * fp[j]);
    const double D1 = (lp - lm) / (2 * h1);
    const double kb = kernel_bound(log, y, w, ey, i);
    // Truncation h^2/6 M3, double rounding of the two losses (a few 2^-52 of their magnitude each).
    const double tol1 = 2 * kb + h1 * h1 / 6 * m3 + 8 * std::ldexp(lmag, -52) / (2 * h1) + 1e-37;
    const double err1 = std::fabs((double)dx[i] - D1);
    worst.r1 = std::max(worst.r1, err1 / tol1);
    if (!(err1 <= tol1)) {
      if (bad1++ == 0)
        TH_CHECK_MSG(false,
                     "%s on %s cols %zu i %zu (float64 forward): dx %.9g, D %.9g, |err| %g > %g",
                     op_name(op), dev_name(dev), cols, i, (double)dx[i], D1, err1, tol1);
    }
    // (2) float32 forward through the library.
    const float *ypp = yp.data() + 2 * i * cols, *ypm = ypp + cols;
    double Lp = 0, Lm = 0, rnd = 0;
    const std::vector<float> xrp(xp.begin() + 2 * i * cols, xp.begin() + (2 * i + 1) * cols);
    const std::vector<float> xrm(xp.begin() + (2 * i + 1) * cols, xp.begin() + (2 * i + 2) * cols);
    const std::vector<double> ep = fwd_error(op, xrp, mask, std::vector<float>(ypp, ypp + cols));
    const std::vector<double> em = fwd_error(op, xrm, mask, std::vector<float>(ypm, ypm + cols));
    for (size_t j = 0; j < cols; ++j) {
      Lp += w[j] * ypp[j];
      Lm += w[j] * ypm[j];
      rnd += std::fabs(w[j]) * (ep[j] + em[j]);
    }
    const double D2 = (Lp - Lm) / (2 * h2);
    const double tol2 = 2 * (h2 * h2 / 6 * m3 + rnd / (2 * h2) + kb) + 1e-37;
    const double err2 = std::fabs((double)dx[i] - D2);
    worst.r2 = std::max(worst.r2, err2 / tol2);
    if (!(err2 <= tol2)) {
      if (bad2++ == 0)
        TH_CHECK_MSG(false,
                     "%s on %s cols %zu i %zu (float32 forward): dx %.9g, D %.9g, |err| %g > %g",
                     op_name(op), dev_name(dev), cols, i, (double)dx[i], D2, err2, tol2);
    }
    // Blocked entries: no dependence at all, and a zero gradient.
    if (op == Op::Masked && !allowed(mask[i])) {
      TH_CHECK_MSG(D1 == 0.0 && Lp == Lm, "masked: blocked entry %zu moves the loss", i);
      TH_CHECK_MSG(dx[i] == 0.0f, "masked: blocked entry %zu has gradient %g", i, (double)dx[i]);
    }
  }
  TH_CHECK_MSG(bad1 == 0 && bad2 == 0, "%s on %s cols %zu: %zu / %zu components off", op_name(op),
               dev_name(dev), cols, bad1, bad2);
}

void run(tlrt_device dev) {
  const size_t cols_list[] = {1, 2, 3, 5, 8, 17, 32, 33, 64, 100, 257, 300};
  for (Op op : {Op::Softmax, Op::LogSoftmax, Op::Masked}) {
    Worst worst;
    uint64_t salt = 1000 * (uint64_t)op;
    for (size_t cols : cols_list)
      for (int rep = 0; rep < 3; ++rep) check_row(op, dev, cols, ++salt, worst);
    std::printf(
        "  %-12s %-4s largest error / tolerance: float64 forward %.3f, float32 forward %.3f\n",
        op_name(op), dev_name(dev), worst.r1, worst.r2);
  }
}

}  // namespace

int main() {
  const tlrt_allocator_stats start = th::stats();
  std::printf("softmax family: backward kernels against central differences\n");
  run(TLRT_DEVICE_CPU);
  if (th::cuda_ready()) run(TLRT_DEVICE_CUDA(0));
  const tlrt_allocator_stats end = th::stats();
  TH_CHECK(end.live_bytes == start.live_bytes && end.live_handles == start.live_handles);
  return th::finish("test_grad_softmax");
}
