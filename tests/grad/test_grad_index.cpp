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
// The tape's index-buffer variants (section below): values and gradients bit for bit those of
// the host-list variants, cross_entropy_ibuf with bad labels, the tape keeping its index buffer.
#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "harness.hpp"
#include "index_buffers.hpp"

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

// ---- the tape's index-buffer variants ---------------------------------------------------------
// tlrt_tape_gather_vec_ibuf, _gather_rows_ibuf, _scatter_add_ibuf, _scatter_add_rows_ibuf and
// tlrt_tape_cross_entropy_ibuf against their host-list counterparts: forward values and every
// leaf gradient BIT FOR BIT equal for the same entries (an entry that is not an index taken as an
// out-of-range one), int32 and int64 index buffers, on each device. The index buffer's handle is
// freed right after recording (the tape holds its own reference), and handles return to their
// count once the tape is reset. tlrt_index_faults counts the entries that are not an index at
// recording; cross_entropy_ibuf counts one per label outside [0, classes), forward and backward
// together, gives that sample a loss term of 0 (the mean still divides by batch) and a logits
// gradient row of exactly 0.

const uint64_t k60 = uint64_t{1} << 60;

struct TLeaf {
  std::vector<uint64_t> dims;
  std::vector<float> data;
};

struct TapeResult {
  bool ok = false;
  std::vector<float> value;
  std::vector<std::vector<float>> grads;  // one per leaf
};

using Rec = std::function<tlrt_status(tlrt_tape *, const std::vector<uint64_t> &, uint64_t *)>;

// Records the leaves (all requiring gradients) and the graph on a fresh tape of dev, runs the
// backward (seeded with `seed`, or from the scalar output when seed is empty) and reads the value
// and the leaf gradients. After a reset, no handle of the run may remain.
TapeResult run_tape(tlrt_device dev, const std::vector<TLeaf> &leaves, const Rec &rec,
                    const std::vector<float> &seed, const std::string &what) {
  TapeResult r;
  tlrt_tape *t = nullptr;
  TH_OK(tlrt_tape_new(dev, &t));
  if (t == nullptr) return r;
  const uint64_t handles0 = th::stats(dev).live_handles;
  std::vector<uint64_t> ids;
  bool ok = true;
  for (const TLeaf &l : leaves) {
    Buf b(th::upload(l.data, dev));
    uint64_t id = 0;
    ok = ok && tlrt_tape_leaf(t, b.get(), l.dims.data(), (uint32_t)l.dims.size(), true, &id) ==
                   TLRT_OK;
    ids.push_back(id);
  }
  uint64_t out = 0;
  ok = ok && rec(t, ids, &out) == TLRT_OK;
  TH_CHECK_MSG(ok, "%s: recording failed: %s", what.c_str(), tlrt_last_error());
  if (ok) {
    tlrt_status s;
    if (seed.empty()) {
      s = tlrt_tape_backward(t, out);
    } else {
      Buf sb(th::upload(seed, dev));
      s = tlrt_tape_backward_seed(t, out, sb.get());
    }
    TH_CHECK_MSG(s == TLRT_OK, "%s: backward failed: %s", what.c_str(), tlrt_last_error());
    ok = s == TLRT_OK;
  }
  if (ok) {
    Buf v;
    TH_OK(tlrt_tape_value(t, out, v.out()));
    r.value = th::download(v.get());
    for (uint64_t id : ids) {
      Buf g;
      TH_OK(tlrt_tape_grad(t, id, g.out()));
      r.grads.push_back(th::download(g.get()));
    }
    r.ok = true;
  }
  TH_OK(tlrt_tape_reset(t));
  TH_CHECK_MSG(th::stats(dev).live_handles == handles0,
               "%s: %llu handles live after the reset, %llu before the run", what.c_str(),
               (unsigned long long)th::stats(dev).live_handles, (unsigned long long)handles0);
  tlrt_tape_free(t);
  return r;
}

// Every element bit for bit.
void expect_bits(const std::vector<float> &got, const std::vector<float> &want,
                 const std::string &what) {
  ++th::checks();
  if (got.size() != want.size()) {
    th::report(__FILE__, __LINE__, what + ": " + std::to_string(got.size()) +
                                       " elements, expected " + std::to_string(want.size()));
    return;
  }
  for (size_t i = 0; i < got.size(); ++i)
    if (th::bits_of(got[i]) != th::bits_of(want[i])) {
      th::report(__FILE__, __LINE__, what + ": element " + std::to_string(i) + " is " +
                                         th::hex(got[i]) + ", expected " + th::hex(want[i]));
      return;
    }
}

void expect_same_run(const TapeResult &got, const TapeResult &want, const std::string &what) {
  TH_CHECK_MSG(got.ok && want.ok, "%s: a run failed", what.c_str());
  if (!got.ok || !want.ok) return;
  expect_bits(got.value, want.value, what + " value");
  TH_CHECK(got.grads.size() == want.grads.size());
  for (size_t i = 0; i < got.grads.size() && i < want.grads.size(); ++i)
    expect_bits(got.grads[i], want.grads[i], what + " gradient of leaf " + std::to_string(i));
}

Buf ibuf(tlrt_device dev, const std::vector<int64_t> &v, bool i32) {
  return th::index_buffer(dev, v, i32);
}
using th::host_list_of;
using th::not_an_index;
uint64_t faults(tlrt_device dev, bool reset) { return th::index_faults(dev, reset); }

// A list with a hot target (row 0), uniform entries, out-of-range entries, 2^60 - 1 (int64) and
// entries that are not an index (negative; int64 >= 2^60).
std::vector<int64_t> make_ilist(uint64_t k, uint64_t bound, bool i32, uint64_t salt) {
  th::Rng rng(salt);
  std::vector<int64_t> idx(k);
  for (uint64_t j = 0; j < k; ++j) {
    const uint64_t r = rng.gen() % 20;
    if (r < 2)
      idx[j] = (int64_t)(bound + rng.gen() % 5);
    else if (r == 2)
      idx[j] = i32 ? INT32_MAX : (int64_t)(k60 - 1);
    else if (r == 3)
      idx[j] = -1;
    else if (r == 4)
      idx[j] = i32 ? INT32_MIN : (rng.gen() & 1 ? INT64_MIN : (int64_t)k60);
    else if (r < 12)
      idx[j] = 0;
    else
      idx[j] = (int64_t)(rng.gen() % bound);
  }
  return idx;
}

const char *dev_name(tlrt_device dev) { return dev == TLRT_DEVICE_CPU ? "cpu" : "cuda"; }

void check_tape_ibuf(tlrt_device dev, bool i32, uint64_t rows, uint64_t cols, uint64_t k,
                     uint64_t salt) {
  const std::string where = std::string(dev_name(dev)) + (i32 ? " int32" : " int64") + " (" +
                            std::to_string(rows) + ", " + std::to_string(cols) + ") k=" +
                            std::to_string(k);
  th::Rng rng(salt);
  const uint64_t n = rows * cols;
  const std::vector<float> m = rng.vec(n, -1.0f, 1.0f), m2 = rng.vec(n, -1.0f, 1.0f);
  const std::vector<float> vv = rng.vec(k, -1.0f, 1.0f), vr = rng.vec(k * cols, -1.0f, 1.0f);
  const std::vector<float> seed_k = rng.vec(k, -1.0f, 1.0f), seed_kc = rng.vec(k * cols, -1.0f, 1.0f);
  const std::vector<float> seed_n = rng.vec(n, -1.0f, 1.0f);
  // gather_vec and scatter_add read a vector flat: bound n; the row variants: bound rows.
  const std::vector<int64_t> lv = make_ilist(k, n, i32, salt + 1), lr = make_ilist(k, rows, i32, salt + 2);
  const std::vector<uint64_t> hv = host_list_of(lv), hr = host_list_of(lr);
  const uint64_t bad_v = (uint64_t)std::count_if(lv.begin(), lv.end(), not_an_index);
  const uint64_t bad_r = (uint64_t)std::count_if(lr.begin(), lr.end(), not_an_index);
  static const uint64_t dummy = 0;
  const uint64_t *phv = hv.empty() ? &dummy : hv.data(), *phr = hr.empty() ? &dummy : hr.data();
  const std::vector<uint64_t> md = {rows, cols}, vd = {k}, rd = {k, cols};

  // The ibuf recordings free their index buffer right after recording; the count of entries
  // that are not an index is checked at that point.
  auto counted = [&](uint64_t want, const char *fn) {
    const uint64_t got = faults(dev, true);
    TH_CHECK_MSG(got == want, "%s %s: tlrt_index_faults counted %llu at recording, expected %llu",
                 where.c_str(), fn, (unsigned long long)got, (unsigned long long)want);
  };
  faults(dev, true);
  // gather_vec of a (rows, cols) leaf read flat.
  const TapeResult gv_h = run_tape(dev, {{md, m}}, [&](tlrt_tape *t, const std::vector<uint64_t> &x,
                                                         uint64_t *o) {
    return tlrt_tape_gather_vec(t, x[0], phv, k, o);
  }, seed_k, where + " gather_vec");
  const TapeResult gv_i = run_tape(dev, {{md, m}}, [&](tlrt_tape *t, const std::vector<uint64_t> &x,
                                                         uint64_t *o) {
    Buf b(ibuf(dev, lv, i32));
    faults(dev, true);
    const tlrt_status s = tlrt_tape_gather_vec_ibuf(t, x[0], b.get(), o);
    counted(bad_v, "tlrt_tape_gather_vec_ibuf");
    return s;
  }, seed_k, where + " gather_vec_ibuf");
  expect_same_run(gv_i, gv_h, where + " tape gather_vec_ibuf == gather_vec");

  const TapeResult sa_h = run_tape(dev, {{md, m}, {vd, vv}}, [&](tlrt_tape *t,
                                   const std::vector<uint64_t> &x, uint64_t *o) {
    return tlrt_tape_scatter_add(t, x[0], x[1], phv, k, o);
  }, seed_n, where + " scatter_add");
  const TapeResult sa_i = run_tape(dev, {{md, m}, {vd, vv}}, [&](tlrt_tape *t,
                                   const std::vector<uint64_t> &x, uint64_t *o) {
    Buf b(ibuf(dev, lv, i32));
    faults(dev, true);
    const tlrt_status s = tlrt_tape_scatter_add_ibuf(t, x[0], x[1], b.get(), o);
    counted(bad_v, "tlrt_tape_scatter_add_ibuf");
    return s;
  }, seed_n, where + " scatter_add_ibuf");
  expect_same_run(sa_i, sa_h, where + " tape scatter_add_ibuf == scatter_add");

  const TapeResult gr_h = run_tape(dev, {{md, m}}, [&](tlrt_tape *t, const std::vector<uint64_t> &x,
                                                         uint64_t *o) {
    return tlrt_tape_gather_rows(t, x[0], phr, k, o);
  }, seed_kc, where + " gather_rows");
  const TapeResult gr_i = run_tape(dev, {{md, m}}, [&](tlrt_tape *t, const std::vector<uint64_t> &x,
                                                         uint64_t *o) {
    Buf b(ibuf(dev, lr, i32));
    faults(dev, true);
    const tlrt_status s = tlrt_tape_gather_rows_ibuf(t, x[0], b.get(), o);
    counted(bad_r, "tlrt_tape_gather_rows_ibuf");
    return s;
  }, seed_kc, where + " gather_rows_ibuf");
  expect_same_run(gr_i, gr_h, where + " tape gather_rows_ibuf == gather_rows");

  const TapeResult sr_h = run_tape(dev, {{md, m2}, {rd, vr}}, [&](tlrt_tape *t,
                                   const std::vector<uint64_t> &x, uint64_t *o) {
    return tlrt_tape_scatter_add_rows(t, x[0], x[1], phr, k, o);
  }, seed_n, where + " scatter_add_rows");
  const TapeResult sr_i = run_tape(dev, {{md, m2}, {rd, vr}}, [&](tlrt_tape *t,
                                   const std::vector<uint64_t> &x, uint64_t *o) {
    Buf b(ibuf(dev, lr, i32));
    faults(dev, true);
    const tlrt_status s = tlrt_tape_scatter_add_rows_ibuf(t, x[0], x[1], b.get(), o);
    counted(bad_r, "tlrt_tape_scatter_add_rows_ibuf");
    return s;
  }, seed_n, where + " scatter_add_rows_ibuf");
  expect_same_run(sr_i, sr_h, where + " tape scatter_add_rows_ibuf == scatter_add_rows");
  faults(dev, true);
}

// cross_entropy_ibuf. labels: the class of each sample, entries outside [0, classes) allowed.
void check_cross_entropy_ibuf(tlrt_device dev, bool i32, uint64_t batch, uint64_t classes,
                              const std::vector<int64_t> &labels, uint64_t salt) {
  std::string where = std::string(dev_name(dev)) + (i32 ? " int32" : " int64") +
                      " cross_entropy (" + std::to_string(batch) + ", " +
                      std::to_string(classes) + ") labels";
  for (size_t i = 0; i < labels.size() && i < 8; ++i) where += " " + std::to_string(labels[i]);
  th::Rng rng(salt);
  const std::vector<float> lg = rng.vec(batch * classes, -3.0f, 3.0f);
  const std::vector<uint64_t> dims = {batch, classes};
  std::vector<bool> bad(batch);
  uint64_t nbad = 0;
  std::vector<uint64_t> host(batch), flat(batch);
  for (uint64_t i = 0; i < batch; ++i) {
    bad[i] = labels[i] < 0 || (uint64_t)labels[i] >= classes;
    nbad += bad[i];
    host[i] = bad[i] ? 0 : (uint64_t)labels[i];
    flat[i] = bad[i] ? batch * classes : i * classes + (uint64_t)labels[i];
  }
  faults(dev, true);
  const TapeResult got = run_tape(dev, {{dims, lg}}, [&](tlrt_tape *t,
                                  const std::vector<uint64_t> &x, uint64_t *o) {
    Buf b(ibuf(dev, labels, i32));
    return tlrt_tape_cross_entropy_ibuf(t, x[0], b.get(), o);
  }, {}, where + " ibuf");
  const uint64_t counted = faults(dev, true);
  TH_CHECK_MSG(counted == nbad,
               "%s: tlrt_index_faults counted %llu over forward and backward, expected %llu",
               where.c_str(), (unsigned long long)counted, (unsigned long long)nbad);
  if (nbad == 0) {
    // Valid labels: tlrt_tape_cross_entropy, bit for bit.
    const TapeResult want = run_tape(dev, {{dims, lg}}, [&](tlrt_tape *t,
                                     const std::vector<uint64_t> &x, uint64_t *o) {
      return tlrt_tape_cross_entropy(t, x[0], host.data(), o);
    }, {}, where + " host labels");
    expect_same_run(got, want, where + ": cross_entropy_ibuf == cross_entropy");
  }
  // The recorded composition with a host list of flat indices in which a bad sample picks
  // nothing (batch * classes, out of range): bit for bit.
  const TapeResult comp = run_tape(dev, {{dims, lg}}, [&](tlrt_tape *t,
                                   const std::vector<uint64_t> &x, uint64_t *o) {
    uint64_t lsm = 0, picked = 0, mean = 0;
    tlrt_status s = tlrt_tape_log_softmax(t, x[0], &lsm);
    if (s == TLRT_OK) s = tlrt_tape_gather_vec(t, lsm, flat.data(), batch, &picked);
    if (s == TLRT_OK) s = tlrt_tape_reduce_mean(t, picked, &mean);
    if (s == TLRT_OK) s = tlrt_tape_neg(t, mean, o);
    return s;
  }, {}, where + " composition");
  expect_same_run(got, comp, where + ": cross_entropy_ibuf == -mean(gather(log_softmax))");
  if (!got.ok || got.value.size() != 1 || got.grads.size() != 1) return;
  // The loss in double: -(1 / batch) * sum over the good samples of log_softmax[i, label].
  long double sum = 0;
  for (uint64_t i = 0; i < batch; ++i) {
    if (bad[i]) continue;
    long double mx = -INFINITY, se = 0;
    for (uint64_t c = 0; c < classes; ++c) mx = std::max(mx, (long double)lg[i * classes + c]);
    for (uint64_t c = 0; c < classes; ++c) se += std::exp((long double)lg[i * classes + c] - mx);
    sum += (long double)lg[i * classes + host[i]] - mx - std::log(se);
  }
  const double want_loss = (double)(-sum / (long double)batch);
  TH_CHECK_MSG(std::fabs(got.value[0] - want_loss) <= 1e-5 * (1 + std::fabs(want_loss)),
               "%s: loss %.9g, expected %.9g (the bad samples contributing 0, divided by %llu)",
               where.c_str(), (double)got.value[0], want_loss, (unsigned long long)batch);
  // A bad sample's logits gradient is 0 in every class.
  const std::vector<float> &g = got.grads[0];
  for (uint64_t i = 0; i < batch && g.size() == batch * classes; ++i) {
    if (!bad[i]) continue;
    for (uint64_t c = 0; c < classes; ++c)
      TH_CHECK_MSG(g[i * classes + c] == 0.0f, "%s: gradient of bad sample %llu, class %llu is %s",
                   where.c_str(), (unsigned long long)i, (unsigned long long)c,
                   th::hex(g[i * classes + c]).c_str());
  }
}

void check_cross_entropy_cases(tlrt_device dev, uint64_t &salt) {
  const int64_t big = (int64_t)k60;
  for (bool i32 : {false, true}) {
    struct S {
      uint64_t batch, classes;
    };
    for (const S &s : {S{1, 1}, S{1, 5}, S{4, 5}, S{33, 10}, S{300, 7}}) {
      th::Rng rng(++salt);
      std::vector<int64_t> labels(s.batch);
      for (auto &l : labels) l = (int64_t)(rng.gen() % s.classes);
      check_cross_entropy_ibuf(dev, i32, s.batch, s.classes, labels, ++salt);
      const uint64_t mid = s.batch / 2;
      // One bad label: -1 and = classes, in the middle (where i * classes + label would name an
      // element of the previous / next row), first and last.
      for (int64_t b : {int64_t{-1}, (int64_t)s.classes}) {
        for (uint64_t at : {mid, uint64_t{0}, s.batch - 1}) {
          std::vector<int64_t> l = labels;
          l[at] = b;
          check_cross_entropy_ibuf(dev, i32, s.batch, s.classes, l, ++salt);
        }
      }
      if (s.batch >= 4) {  // several bad labels of every kind
        std::vector<int64_t> l = labels;
        l[0] = -1;
        l[1] = (int64_t)s.classes;
        l[2] = i32 ? INT32_MIN : INT64_MIN;
        l[3] = i32 ? INT32_MAX : big;
        check_cross_entropy_ibuf(dev, i32, s.batch, s.classes, l, ++salt);
      }
    }
  }
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
    struct T {
      uint64_t rows, cols, k;
    };
    for (bool i32 : {false, true}) {
      for (const T &c : {T{1, 1, 1}, T{7, 3, 40}, T{50, 4, 300}, T{1, 1024, 50}, T{300, 1, 2000},
                         T{30, 3, vg ? 3000u : 12000u}})
        check_tape_ibuf(dev, i32, c.rows, c.cols, c.k, ++salt);
    }
    check_cross_entropy_cases(dev, salt);
  }
  return th::finish("test_grad_index");
}
