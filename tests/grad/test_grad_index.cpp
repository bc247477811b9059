// Gather and scatter-add are each other's adjoint (abi/tlrt_index.h): for an index list idx,
//   <gather_vec(v, idx), w> = <v, scatter_add(0, w, idx)>,
//   <gather_rows(M, idx), W> = <M, scatter_add_rows(0, W, idx)>,
//   <scatter_add_row(0, r, i), M> = <r, M[i, :]>,
// so scatter_add(0, w) is the gradient of v -> <gather_vec(v), w> (and the embedding backward).
// Checked in double on the CPU (and on CUDA(0) where usable), seeded, on lists with duplicates,
// hot targets (segments up to 5000 entries), out-of-range entries and 2^60 - 1:
//  - the identities: the left side is exact up to the double summation (gathers copy floats; a
//    float product is exact in double), the right side carries the float32 rounding of the tree
//    sums, so the tolerance is  g(23 D) * sum_t |v_t| * sum_{j: idx_j = t} |w_j|  (the header's
//    bound for each target's sum S_t, D = levels of the tree: 1 for segments <= 4096, 2 beyond),
//    g(k) = k u / (1 - k u), u = 2^-24, plus 1e-12 of the sum of |terms| for the double sums;
//    +0 + S_t adds no rounding;
//  - central finite differences of f(v) = <gather_vec(v), w> at a few coordinates, in double, with
//    the step taken as the difference of the actual float32 perturbed values (f is linear in v,
//    so the quotient is the exact partial derivative up to double rounding), against the
//    scatter-add's element, with the same per-target tolerance.
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "harness.hpp"

namespace {

using th::Buf;

const double u = std::ldexp(1.0, -24);
double gamma(double k) { return k * u / (1 - k * u); }

std::vector<tlrt_device> devices() {
  std::vector<tlrt_device> d = {TLRT_DEVICE_CPU};
  if (th::cuda_ready()) d.push_back(TLRT_DEVICE_CUDA(0));
  return d;
}

std::vector<uint64_t> make_list(uint64_t k, uint64_t bound, uint64_t salt) {
  th::Rng rng(salt);
  std::vector<uint64_t> idx(k);
  for (uint64_t j = 0; j < k; ++j) {
    const uint64_t r = rng.gen() % 10;
    if (r == 0)
      idx[j] = bound + rng.gen() % 5;  // out of range
    else if (r == 1)
      idx[j] = (uint64_t{1} << 60) - 1;
    else if (r < 6)
      idx[j] = 0;  // a hot target
    else
      idx[j] = rng.gen() % bound;
  }
  return idx;
}

// Per-target tolerance weights: A[t] = sum of |w_j| over idx_j == t, and the tree depth D[t].
void weights(const std::vector<uint64_t> &idx, const std::vector<float> &w, uint64_t bound,
             uint64_t cols, uint64_t c, std::vector<double> &A, std::vector<int> &D) {
  A.assign(bound, 0.0);
  std::vector<uint64_t> L(bound, 0);
  for (uint64_t j = 0; j < idx.size(); ++j)
    if (idx[j] < bound) {
      A[idx[j]] += std::fabs((double)w[j * cols + c]);
      ++L[idx[j]];
    }
  D.assign(bound, 1);
  for (uint64_t t = 0; t < bound; ++t) {
    uint64_t m = L[t];
    while (m > 4096) {
      m = (m + 4095) / 4096;
      ++D[t];
    }
  }
}

void check_vec(tlrt_device dev, uint64_t n, uint64_t k, uint64_t salt) {
  const std::string where = std::string(dev == TLRT_DEVICE_CPU ? "cpu" : "cuda") + " n=" +
                            std::to_string(n) + " k=" + std::to_string(k);
  th::Rng rng(salt);
  const std::vector<float> v = rng.vec(n, -1.0f, 1.0f), w = rng.vec(k, -1.0f, 1.0f);
  const std::vector<uint64_t> idx = make_list(k, n, salt + 1);
  Buf bv(th::upload(v, dev)), bw(th::upload(w, dev)), zero, g, s;
  TH_OK(tlrt_buffer_zeros(dev, n, zero.out()));
  TH_OK(tlrt_gather_vec(bv.get(), n, idx.data(), k, g.out()));
  TH_OK(tlrt_scatter_add(zero.get(), bw.get(), n, idx.data(), k, s.out()));
  const std::vector<float> gv = th::download(g.get()), sv = th::download(s.get());
  if (gv.size() != k || sv.size() != n) {
    TH_CHECK_MSG(false, "%s: wrong output sizes", where.c_str());
    return;
  }
  std::vector<double> A;
  std::vector<int> D;
  weights(idx, w, n, 1, 0, A, D);
  long double lhs = 0, rhs = 0, mag = 0;
  double tol = 0;
  for (uint64_t j = 0; j < k; ++j) {
    lhs += (long double)gv[j] * w[j];
    mag += std::fabs((long double)gv[j] * w[j]);
  }
  for (uint64_t t = 0; t < n; ++t) {
    rhs += (long double)v[t] * sv[t];
    mag += std::fabs((long double)v[t] * sv[t]);
    tol += gamma(23.0 * D[t]) * std::fabs((double)v[t]) * A[t];
  }
  tol += 1e-12 * (double)mag;
  const double err = std::fabs((double)(lhs - rhs));
  TH_CHECK_MSG(err <= tol, "%s: <gather(v), w> - <v, scatter(0, w)> = %g exceeds %g",
               where.c_str(), err, tol);
  // Central differences of f(v) = <gather(v), w> at a few coordinates, the hot target included.
  for (uint64_t t : {uint64_t{0}, n / 2, n - 1}) {
    auto f = [&](float vt) {
      std::vector<float> vp = v;
      vp[t] = vt;
      Buf b(th::upload(vp, dev)), gg;
      TH_OK(tlrt_gather_vec(b.get(), n, idx.data(), k, gg.out()));
      const std::vector<float> r = th::download(gg.get());
      long double acc = 0;
      for (uint64_t j = 0; j < r.size() && j < k; ++j) acc += (long double)r[j] * w[j];
      return (double)acc;
    };
    const float hi = v[t] + 0.0625f, lo = v[t] - 0.0625f;
    const double fd = (f(hi) - f(lo)) / ((double)hi - (double)lo);
    const double tol_t = gamma(23.0 * D[t]) * A[t] + 1e-9 * (A[t] + 1.0);
    TH_CHECK_MSG(std::fabs(fd - sv[t]) <= tol_t,
                 "%s: d/dv[%llu] by central differences %.17g, scatter-add %.9g (tol %g)",
                 where.c_str(), (unsigned long long)t, fd, (double)sv[t], tol_t);
  }
}

void check_rows(tlrt_device dev, uint64_t rows, uint64_t cols, uint64_t k, uint64_t salt) {
  const std::string where = std::string(dev == TLRT_DEVICE_CPU ? "cpu" : "cuda") + " (" +
                            std::to_string(rows) + ", " + std::to_string(cols) + ") k=" +
                            std::to_string(k);
  th::Rng rng(salt);
  const std::vector<float> m = rng.vec(rows * cols, -1.0f, 1.0f), w = rng.vec(k * cols, -1.0f, 1.0f);
  const std::vector<uint64_t> idx = make_list(k, rows, salt + 1);
  Buf bm(th::upload(m, dev)), bw(th::upload(w, dev)), zero, g, s;
  TH_OK(tlrt_buffer_zeros(dev, rows * cols, zero.out()));
  TH_OK(tlrt_gather_rows(bm.get(), rows, cols, idx.data(), k, g.out()));
  TH_OK(tlrt_scatter_add_rows(zero.get(), bw.get(), rows, cols, idx.data(), k, s.out()));
  const std::vector<float> gv = th::download(g.get()), sv = th::download(s.get());
  if (gv.size() != k * cols || sv.size() != rows * cols) {
    TH_CHECK_MSG(false, "%s: wrong output sizes", where.c_str());
    return;
  }
  long double lhs = 0, rhs = 0, mag = 0;
  double tol = 0;
  for (uint64_t e = 0; e < k * cols; ++e) {
    lhs += (long double)gv[e] * w[e];
    mag += std::fabs((long double)gv[e] * w[e]);
  }
  for (uint64_t c = 0; c < cols; ++c) {
    std::vector<double> A;
    std::vector<int> D;
    weights(idx, w, rows, cols, c, A, D);
    for (uint64_t t = 0; t < rows; ++t) {
      const uint64_t e = t * cols + c;
      rhs += (long double)m[e] * sv[e];
      mag += std::fabs((long double)m[e] * sv[e]);
      tol += gamma(23.0 * D[t]) * std::fabs((double)m[e]) * A[t];
    }
  }
  tol += 1e-12 * (double)mag;
  const double err = std::fabs((double)(lhs - rhs));
  TH_CHECK_MSG(err <= tol, "%s: <gather_rows(M), W> - <M, scatter_rows(0, W)> = %g exceeds %g",
               where.c_str(), err, tol);
  // One row: <scatter_add_row(0, r, i), M> = <r, M[i, :]> (exact: one addition to +0 each).
  const std::vector<float> r(w.begin(), w.begin() + cols);
  Buf br(th::upload(r, dev)), s1;
  const uint64_t i = rows / 3;
  TH_OK(tlrt_scatter_add_row(zero.get(), br.get(), rows, cols, i, s1.out()));
  const std::vector<float> s1v = th::download(s1.get());
  long double a = 0, b = 0;
  for (uint64_t e = 0; e < s1v.size(); ++e) a += (long double)s1v[e] * m[e];
  for (uint64_t c = 0; c < cols; ++c) b += (long double)r[c] * m[i * cols + c];
  TH_CHECK_MSG(a == b, "%s: <scatter_add_row(0, r, i), M> != <r, M[i]>", where.c_str());
}

}  // namespace

int main() {
  const bool vg = th::under_valgrind();
  uint64_t salt = 1;
  for (tlrt_device dev : devices()) {
    for (uint64_t n : {1, 2, 7, 100, 1000})
      for (uint64_t k : {1, 5, 300, 5000, 12000}) {
        if (vg && k > 5000) continue;
        check_vec(dev, n, k, ++salt);
      }
    check_rows(dev, 1, 1, 1, ++salt);
    check_rows(dev, 7, 3, 40, ++salt);
    check_rows(dev, 50, 64, 2000, ++salt);
    check_rows(dev, 300, 33, vg ? 2000 : 10000, ++salt);
  }
  return th::finish("test_grad_index");
}
