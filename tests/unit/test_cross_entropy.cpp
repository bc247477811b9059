// Fused cross-entropy (abi/tlrt_softmax.h: tlrt_cross_entropy_fwd / _bwd, and the tape node
// tlrt_tape_cross_entropy_ignore), on the CPU and, where usable, on CUDA(0):
//  - known answers: hand-computable rows (equal logits: loss log(classes); two classes), ignored
//    rows, all rows ignored -> NaN, faulted labels (counted once, by the forward, contributing 0
//    and counted in the denominator), an ignore_index inside [0, classes), int32 and int64;
//  - the definitions replayed on the host with the library's own pieces: the loss equals
//    -(tree sum of the picked log_softmax values) / n, and the gradient equals
//    fma(-exp(y), c, onehot * c) with y = tlrt_log_softmax, bit for bit;
//  - accuracy against float64 (loss and gradient) for rows of 1 .. 2^17 + 3 classes, 50257
//    included, with the header's bounds;
//  - edge values: NaN / +inf / -inf logits in valid, ignored and faulted rows, classes == 1,
//    rows == 0, classes == 0;
//  - CPU / CUDA parity, bit for bit, of loss, lse and gradient (NaN compared as NaN);
//  - central finite differences of the loss in float64 against the gradient;
//  - the tape node: value and gradient equal to the API calls, one node, ignore disabled equal
//    to tlrt_tape_cross_entropy_ibuf.
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "harness.hpp"
#include "index_buffers.hpp"

namespace {

using th::Buf;
const double u = std::ldexp(1.0, -24);
constexpr int kNone = TLRT_CROSS_ENTROPY_NO_IGNORE;

std::vector<tlrt_device> devices() {
  std::vector<tlrt_device> d = {TLRT_DEVICE_CPU};
  if (th::cuda_ready()) d.push_back(TLRT_DEVICE_CUDA(0));
  return d;
}

const char *dn(tlrt_device d) { return d == TLRT_DEVICE_CPU ? "cpu" : "cuda"; }

struct Fwd {
  bool ok = false;
  float loss = 0;
  std::vector<float> lse, dx;
};

// Forward and backward (grad g) on dev.
Fwd run(tlrt_device dev, const std::vector<float> &x, const std::vector<int64_t> &lab, bool i32,
        uint64_t rows, uint64_t classes, int ignore, float g = 1.0f) {
  Fwd r;
  Buf X(th::upload(x, dev)), L = th::index_buffer(dev, lab, i32), G(th::upload({g}, dev));
  Buf loss, lse, dx;
  tlrt_status s = tlrt_cross_entropy_fwd(X.get(), L.get(), rows, classes, ignore, loss.out(),
                                         lse.out());
  TH_CHECK_MSG(s == TLRT_OK, "%s fwd (%llu, %llu): %s", dn(dev), (unsigned long long)rows,
               (unsigned long long)classes, tlrt_last_error());
  if (s != TLRT_OK) return r;
  s = tlrt_cross_entropy_bwd(X.get(), L.get(), lse.get(), G.get(), rows, classes, ignore,
                             dx.out());
  TH_CHECK_MSG(s == TLRT_OK, "%s bwd: %s", dn(dev), tlrt_last_error());
  if (s != TLRT_OK) return r;
  const std::vector<float> lv = th::download(loss.get());
  TH_CHECK(lv.size() == 1);
  r.loss = lv.empty() ? 0.0f : lv[0];
  r.lse = th::download(lse.get());
  r.dx = th::download(dx.get());
  TH_CHECK(r.lse.size() == 2 * rows);
  TH_CHECK(r.dx.size() == rows * classes);
  r.ok = true;
  return r;
}

bool same(float a, float b) { return th::same_bits(a, b) || (std::isnan(a) && std::isnan(b)); }

// The zero gradient of an ignored or faulted row is fma(-e, +0, +0) = +0. Under memcheck the
// sign is not checked: valgrind's emulation of that fused multiply-add returns -0 (as it does
// for tlrt_log_softmax_bwd with a zero gradient); the processor returns +0, checked everywhere
// else (the CPU, sanitizer and CUDA runs).
bool plus_zero(float d) { return th::bits_of(d) == 0 || (th::under_valgrind() && d == 0.0f); }

bool is_valid(int64_t l, uint64_t classes, int ignore) {
  return !(ignore != kNone && l == ignore) && l >= 0 && (uint64_t)l < classes;
}
bool is_counted(int64_t l, int ignore) { return !(ignore != kNone && l == ignore); }

// ---- known answers ---------------------------------------------------------------------------

void known_answers(tlrt_device dev) {
  for (bool i32 : {false, true}) {
    // Equal logits: every valid row's loss is log(classes); the mean of 4 rows with one ignored
    // (label -100) and ignore = -100: log(5).
    {
      std::vector<float> x(4 * 5, 0.25f);
      const Fwd f = run(dev, x, {0, -100, 4, 2}, i32, 4, 5, -100);
      TH_CHECK_MSG(std::fabs(f.loss - std::log(5.0)) <= 4 * u * std::log(5.0),
                   "%s equal logits: %.9g, expected log 5", dn(dev), (double)f.loss);
      for (uint64_t j = 0; j < 5; ++j) {
        TH_CHECK_MSG(plus_zero(f.dx[5 + j]),
                     "%s ignored row gradient %s", dn(dev), th::hex(f.dx[5 + j]).c_str());
        // valid rows: (0.2 - onehot) / 3
        const double want = (0.2 - (j == 0 ? 1.0 : 0.0)) / 3.0;
        TH_CHECK_MSG(std::fabs(f.dx[j] - want) <= 8 * u * std::fabs(want),
                     "%s dx[0, %llu] = %.9g, expected %.9g", dn(dev), (unsigned long long)j,
                     (double)f.dx[j], want);
      }
    }
    // Two classes, logits (0, ln 3): p = (1/4, 3/4). Label 1: -log(3/4); label 0: -log(1/4).
    {
      const float l3 = (float)std::log(3.0);
      std::vector<float> x = {0.0f, l3, 0.0f, l3};
      const Fwd f = run(dev, x, {1, 0}, i32, 2, 2, kNone);
      const double want = (-std::log(0.75) - std::log(0.25)) / 2;
      TH_CHECK_MSG(std::fabs(f.loss - want) <= 1e-6, "%s two classes: %.9g, expected %.9g",
                   dn(dev), (double)f.loss, want);
      TH_CHECK_MSG(std::fabs(f.dx[0] - 0.125) <= 1e-7 && std::fabs(f.dx[1] + 0.125) <= 1e-7 &&
                       std::fabs(f.dx[2] + 0.375) <= 1e-7 && std::fabs(f.dx[3] - 0.375) <= 1e-7,
                   "%s two classes gradient %.9g %.9g %.9g %.9g", dn(dev), (double)f.dx[0],
                   (double)f.dx[1], (double)f.dx[2], (double)f.dx[3]);
    }
    // All rows ignored: NaN; gradient +0 everywhere.
    {
      std::vector<float> x = {1, 2, 3, 4, 5, 6};
      const Fwd f = run(dev, x, {7, 7}, i32, 2, 3, 7);
      TH_CHECK_MSG(std::isnan(f.loss), "%s all ignored: %.9g, expected NaN", dn(dev),
                   (double)f.loss);
      for (float d : f.dx)
        TH_CHECK_MSG(plus_zero(d), "%s all ignored dx %s", dn(dev), th::hex(d).c_str());
    }
    // ignore_index inside [0, classes): class 1 rows are ignored.
    {
      std::vector<float> x = {0, 0, 0, 5, 0, 0};
      const Fwd f = run(dev, x, {1, 0}, i32, 2, 3, 1);
      const double want = std::log1p(2 * std::exp(-5.0));  // row 1: -log(e^5 / (e^5 + 2))
      TH_CHECK_MSG(std::fabs(f.loss - want) <= 1e-8, "%s ignore 1: %.9g, expected %.9g", dn(dev),
                   (double)f.loss, want);
    }
    // Faults: labels -1, 3 (= classes) and -100 without ignore; counted once, in the
    // denominator, contributing 0, zero gradient rows.
    {
      std::vector<float> x(4 * 3, 0.0f);
      th::index_faults(dev, true);
      const Fwd f = run(dev, x, {-1, 2, 3, -100}, i32, 4, 3, kNone);
      const uint64_t nf = th::index_faults(dev, true);
      TH_CHECK_MSG(nf == 3, "%s faults counted %llu, expected 3", dn(dev),
                   (unsigned long long)nf);
      TH_CHECK_MSG(std::fabs(f.loss - std::log(3.0) / 4) <= 4e-7, "%s faults loss %.9g",
                   dn(dev), (double)f.loss);
      for (uint64_t r : {0u, 2u, 3u})
        for (uint64_t j = 0; j < 3; ++j)
          TH_CHECK_MSG(plus_zero(f.dx[r * 3 + j]), "%s fault row %llu dx %s", dn(dev),
                       (unsigned long long)r, th::hex(f.dx[r * 3 + j]).c_str());
      // The same with ignore = -100: row 3 ignored, not a fault: 2 faults, denominator 3.
      const Fwd h = run(dev, x, {-1, 2, 3, -100}, i32, 4, 3, -100);
      TH_CHECK(th::index_faults(dev, true) == 2);
      TH_CHECK_MSG(std::fabs(h.loss - std::log(3.0) / 3) <= 4e-7, "%s faults+ignore %.9g",
                   dn(dev), (double)h.loss);
    }
  }
  // int64 labels beyond the int range: faults, never ignored.
  {
    std::vector<float> x(2 * 3, 0.0f);
    th::index_faults(dev, true);
    const Fwd f = run(dev, x, {(int64_t)1 << 40, 1}, false, 2, 3, -100);
    TH_CHECK(th::index_faults(dev, true) == 1);
    TH_CHECK_MSG(std::fabs(f.loss - std::log(3.0) / 2) <= 4e-7, "%s big label %.9g", dn(dev),
                 (double)f.loss);
  }
}

// ---- the definitions, replayed with the library's pieces (bitwise) ----------------------------

void definitions(tlrt_device dev, uint64_t rows, uint64_t classes, int ignore, uint64_t salt) {
  th::Rng rng(salt);
  const std::vector<float> x = rng.vec(rows * classes, -6.0f, 6.0f);
  std::vector<int64_t> lab(rows);
  for (auto &l : lab) {
    const uint64_t k = rng.gen() % 8;
    l = k == 0 ? -100 : k == 1 ? (int64_t)classes : (int64_t)(rng.gen() % classes);
  }
  const float g = rng.uniform(0.5f, 2.0f);
  const Fwd f = run(dev, x, lab, (salt & 1) != 0, rows, classes, ignore, g);
  if (!f.ok) return;
  // y = tlrt_log_softmax on the same device.
  Buf X(th::upload(x, dev)), Y;
  TH_OK(tlrt_log_softmax(X.get(), rows, classes, Y.out()));
  const std::vector<float> y = th::download(Y.get());
  std::vector<float> picked(rows, 0.0f);
  uint64_t n = 0;
  for (uint64_t r = 0; r < rows; ++r) {
    n += is_counted(lab[r], ignore);
    if (is_valid(lab[r], classes, ignore)) picked[r] = y[r * classes + (uint64_t)lab[r]];
  }
  Buf P(th::upload(picked, dev)), S;
  TH_OK(tlrt_reduce_sum(P.get(), S.out()));
  const float sum = th::download(S.get())[0];
  const float want = -(n == 1 ? sum : sum / (float)n);
  const std::string w = std::string(dn(dev)) + " (" + std::to_string(rows) + ", " +
                        std::to_string(classes) + ") ignore " + std::to_string(ignore);
  TH_CHECK_MSG(same(f.loss, want), "%s: loss %s, replayed %s", w.c_str(), th::hex(f.loss).c_str(),
               th::hex(want).c_str());
  const float k = (float)(n ? 1.0 / (double)n : 0.0);
  const float c = (-g) * k + 0.0f;
  uint64_t bad = 0;
  // The gradient through tlrt_log_softmax_bwd of the scattered upstream gradient (the
  // composite), bit for bit.
  std::vector<float> up(rows * classes, 0.0f);
  for (uint64_t r = 0; r < rows; ++r)
    if (is_valid(lab[r], classes, ignore)) up[r * classes + (uint64_t)lab[r]] = c;
  Buf U(th::upload(up, dev)), D;
  TH_OK(tlrt_log_softmax_bwd(Y.get(), U.get(), rows, classes, D.out()));
  const std::vector<float> d = th::download(D.get());
  for (uint64_t i = 0; i < rows * classes && i < f.dx.size(); ++i)
    if (!same(f.dx[i], d[i]) && bad++ < 5)
      TH_CHECK_MSG(false, "%s: dx[%llu] %s, log_softmax_bwd %s", w.c_str(),
                   (unsigned long long)i, th::hex(f.dx[i]).c_str(), th::hex(d[i]).c_str());
  // lse: m and log s; m = the row maximum.
  for (uint64_t r = 0; r < rows; ++r) {
    float m = -INFINITY;
    for (uint64_t j = 0; j < classes; ++j) m = std::fmax(m, x[r * classes + j]);
    TH_CHECK_MSG(f.lse[2 * r] == m, "%s: lse[%llu] m %.9g, expected %.9g", w.c_str(),
                 (unsigned long long)r, (double)f.lse[2 * r], (double)m);
  }
}

// ---- accuracy against float64 -----------------------------------------------------------------

void accuracy(tlrt_device dev, uint64_t rows, uint64_t classes, float spread, uint64_t salt) {
  th::Rng rng(salt);
  const std::vector<float> x = rng.vec(rows * classes, -spread, spread);
  std::vector<int64_t> lab(rows);
  for (auto &l : lab) l = rng.gen() % 5 == 0 ? -100 : (int64_t)(rng.gen() % classes);
  const Fwd f = run(dev, x, lab, false, rows, classes, -100);
  if (!f.ok) return;
  const double L = classes <= 4096 ? 1 : 2, Lr = rows <= 4096 ? 1 : 2;
  double sum = 0, sum_abs = 0, max_err = 0;
  uint64_t n = 0;
  std::vector<double> m(rows), ls(rows);
  for (uint64_t r = 0; r < rows; ++r) {
    double mx = -INFINITY, se = 0;
    for (uint64_t j = 0; j < classes; ++j) mx = std::max(mx, (double)x[r * classes + j]);
    for (uint64_t j = 0; j < classes; ++j) se += std::exp((double)x[r * classes + j] - mx);
    m[r] = mx;
    ls[r] = std::log(se);
    if (lab[r] == -100) continue;
    ++n;
    const double xl = x[r * classes + (uint64_t)lab[r]];
    const double p = (xl - mx) - ls[r];
    sum += p;
    sum_abs += std::fabs(p);
    const double err =
        u * (2 * std::fabs(xl - mx) + 3 * ls[r] + std::log((double)classes) + 23 * L + 3);
    max_err = std::max(max_err, err);
  }
  const double want = -sum / (double)n;
  const double bound = (23 * Lr + 1) * u * sum_abs / (double)n + max_err + u * std::fabs(want);
  const std::string w = std::string(dn(dev)) + " accuracy (" + std::to_string(rows) + ", " +
                        std::to_string(classes) + ") spread " + std::to_string(spread);
  TH_CHECK_MSG(std::fabs(f.loss - want) <= bound, "%s: loss %.9g, float64 %.12g, error %.3g > %.3g",
               w.c_str(), (double)f.loss, want, std::fabs(f.loss - want), bound);
  double worst = 0;
  for (uint64_t r = 0; r < rows; ++r) {
    const bool v = lab[r] != -100;
    const double c = v ? 1.0 / (double)n : 0.0;  // dx = (softmax - onehot) / n
    for (uint64_t j = 0; j < classes; ++j) {
      const double xj = x[r * classes + j];
      const double sm = std::exp((xj - m[r]) - ls[r]);
      const double ref = c * (sm - (v && (uint64_t)lab[r] == j ? 1.0 : 0.0));
      const double b = u * std::fabs(c) *
                           (2 * std::fabs(xj - m[r]) + 3 * ls[r] + std::log((double)classes) +
                            23 * L + 6) * sm +
                       2 * u * std::fabs(ref) + 1e-45;
      const double e = std::fabs(f.dx[r * classes + j] - ref);
      worst = std::max(worst, e / b);
      if (e > b) {
        TH_CHECK_MSG(false, "%s: dx[%llu, %llu] %.9g, float64 %.12g, error %.3g > %.3g",
                     w.c_str(), (unsigned long long)r, (unsigned long long)j,
                     (double)f.dx[r * classes + j], ref, e, b);
        return;
      }
    }
  }
  std::printf("%s: loss error %.3g of the bound, gradient %.3g of the bound\n", w.c_str(),
              std::fabs(f.loss - want) / bound, worst);
}

// ---- edge values ---------------------------------------------------------------------------

void edges(tlrt_device dev) {
  const float nan = NAN, inf = INFINITY;
  // Row 0 valid with a NaN: loss NaN. Separately: NaN in an ignored row and in a faulted row:
  // the loss stays finite.
  {
    std::vector<float> x = {1, nan, 0, 1, 2, 3};
    const Fwd f = run(dev, x, {0, 1}, false, 2, 3, kNone);
    TH_CHECK_MSG(std::isnan(f.loss), "%s NaN in a valid row: %.9g", dn(dev), (double)f.loss);
  }
  for (int64_t l0 : {int64_t{-100}, int64_t{-1}}) {
    std::vector<float> x = {1, nan, inf, 1, 2, 3};
    const Fwd f = run(dev, x, {l0, 2}, false, 2, 3, -100);
    TH_CHECK_MSG(std::isfinite(f.loss), "%s NaN in an ignored/faulted row (%lld): %.9g", dn(dev),
                 (long long)l0, (double)f.loss);
    TH_CHECK_MSG(f.dx.size() == 6 && std::isnan(f.dx[0]) && std::isfinite(f.dx[3]),
                 "%s NaN row gradient: NaN (as PyTorch), others finite", dn(dev));
  }
  // -inf entries in a valid row: their gradient is exactly +0 or -0 (softmax 0).
  {
    std::vector<float> x = {-inf, 0, 0};
    const Fwd f = run(dev, x, {1}, false, 1, 3, kNone);
    TH_CHECK_MSG(std::fabs(f.loss - std::log(2.0)) <= 4e-7 && f.dx[0] == 0.0f,
                 "%s -inf entry: loss %.9g dx0 %s", dn(dev), (double)f.loss,
                 th::hex(f.dx[0]).c_str());
    // +inf in a valid row: NaN loss.
    const Fwd h = run(dev, {inf, 0, 0}, {1}, false, 1, 3, kNone);
    TH_CHECK(std::isnan(h.loss));
  }
  // classes == 1: loss -0 (p = +0, -(0 / n)), gradient +0.
  {
    const Fwd f = run(dev, {3.5f, -2.0f}, {0, 0}, true, 2, 1, kNone);
    TH_CHECK_MSG(f.loss == 0.0f, "%s classes 1: %s", dn(dev), th::hex(f.loss).c_str());
    for (float d : f.dx) TH_CHECK_MSG(d == 0.0f, "%s classes 1 dx %s", dn(dev), th::hex(d).c_str());
  }
  // rows == 0: NaN loss, empty lse and gradient.
  {
    const Fwd f = run(dev, {}, {}, false, 0, 7, kNone);
    TH_CHECK_MSG(std::isnan(f.loss) && f.lse.empty() && f.dx.empty(), "%s rows 0", dn(dev));
  }
  // classes == 0: every counted label a fault; lse -inf.
  {
    th::index_faults(dev, true);
    const Fwd f = run(dev, {}, {0, -100, 3}, false, 3, 0, -100);
    TH_CHECK(th::index_faults(dev, true) == 2);
    TH_CHECK_MSG(f.loss == 0.0f && f.lse.size() == 6 && f.lse[0] == -INFINITY &&
                     f.lse[1] == -INFINITY,
                 "%s classes 0: loss %s", dn(dev), th::hex(f.loss).c_str());
  }
}

// ---- finite differences -------------------------------------------------------------------

void finite_differences(tlrt_device dev, uint64_t salt) {
  const uint64_t rows = 6, classes = 7;
  th::Rng rng(salt);
  std::vector<float> x = rng.vec(rows * classes, -2.0f, 2.0f);
  const std::vector<int64_t> lab = {3, -100, 0, 6, 9, 2};  // one ignored, one fault
  const Fwd f = run(dev, x, lab, false, rows, classes, -100);
  if (!f.ok) return;
  auto loss64 = [&](const std::vector<float> &v) {
    double s = 0;
    uint64_t n = 0;
    for (uint64_t r = 0; r < rows; ++r) {
      if (lab[r] == -100) continue;
      ++n;
      if (lab[r] < 0 || (uint64_t)lab[r] >= classes) continue;
      double mx = -INFINITY, se = 0;
      for (uint64_t j = 0; j < classes; ++j) mx = std::max(mx, (double)v[r * classes + j]);
      for (uint64_t j = 0; j < classes; ++j) se += std::exp(v[r * classes + j] - mx);
      s += v[r * classes + (uint64_t)lab[r]] - mx - std::log(se);
    }
    return -s / (double)n;
  };
  for (uint64_t i = 0; i < rows * classes; ++i) {
    std::vector<float> a = x, b = x;
    a[i] += 1e-3f;
    b[i] -= 1e-3f;
    const double fd = (loss64(a) - loss64(b)) / ((double)a[i] - (double)b[i]);
    TH_CHECK_MSG(std::fabs(fd - f.dx[i]) <= 1e-5, "%s fd dx[%llu]: %.9g, finite difference %.9g",
                 dn(dev), (unsigned long long)i, (double)f.dx[i], fd);
  }
}

// ---- the tape node -------------------------------------------------------------------------

void tape(tlrt_device dev, uint64_t salt) {
  const uint64_t rows = 33, classes = 10;
  th::Rng rng(salt);
  const std::vector<float> x = rng.vec(rows * classes, -3.0f, 3.0f);
  std::vector<int64_t> lab(rows);
  for (auto &l : lab) l = rng.gen() % 4 == 0 ? -100 : (int64_t)(rng.gen() % classes);
  const Fwd f = run(dev, x, lab, true, rows, classes, -100);
  tlrt_tape *t = nullptr;
  TH_OK(tlrt_tape_new(dev, &t));
  if (t == nullptr) return;
  Buf X(th::upload(x, dev));
  const uint64_t dims[2] = {rows, classes};
  uint64_t id = 0, out = 0, out2 = 0;
  TH_OK(tlrt_tape_leaf(t, X.get(), dims, 2, true, &id));
  {
    Buf L = th::index_buffer(dev, lab, true);
    TH_OK(tlrt_tape_cross_entropy_ignore(t, id, L.get(), -100, &out));
  }  // the tape keeps its own reference to the labels
  TH_CHECK_MSG((out & 0xFFFFFFFFu) == (id & 0xFFFFFFFFu) + 1, "one node");
  TH_OK(tlrt_tape_backward(t, out));
  Buf v, g;
  TH_OK(tlrt_tape_value(t, out, v.out()));
  TH_OK(tlrt_tape_grad(t, id, g.out()));
  TH_CHECK_MSG(same(th::download(v.get())[0], f.loss), "%s tape value", dn(dev));
  const std::vector<float> gd = th::download(g.get());
  bool eq = gd.size() == f.dx.size();
  for (size_t i = 0; eq && i < gd.size(); ++i) eq = same(gd[i], f.dx[i]);
  TH_CHECK_MSG(eq, "%s tape gradient == tlrt_cross_entropy_bwd", dn(dev));
  // NO_IGNORE == cross_entropy_ibuf.
  TH_OK(tlrt_tape_reset(t));
  TH_OK(tlrt_tape_leaf(t, X.get(), dims, 2, true, &id));
  Buf L = th::index_buffer(dev, lab, false);
  TH_OK(tlrt_tape_cross_entropy_ignore(t, id, L.get(), kNone, &out));
  TH_OK(tlrt_tape_cross_entropy_ibuf(t, id, L.get(), &out2));
  Buf v1, v2;
  TH_OK(tlrt_tape_value(t, out, v1.out()));
  TH_OK(tlrt_tape_value(t, out2, v2.out()));
  TH_CHECK(same(th::download(v1.get())[0], th::download(v2.get())[0]));
  th::index_faults(dev, true);
  tlrt_tape_free(t);
}

// ---- CPU / CUDA parity -----------------------------------------------------------------------

void parity(uint64_t rows, uint64_t classes, int ignore, bool bits, uint64_t salt) {
  th::Rng rng(salt);
  std::vector<float> x = bits ? rng.bits(rows * classes) : rng.vec(rows * classes, -20.0f, 20.0f);
  std::vector<int64_t> lab(rows);
  for (auto &l : lab) {
    const uint64_t k = rng.gen() % 10;
    l = k == 0 ? -100 : k == 1 ? -1 : (int64_t)(rng.gen() % classes);
  }
  th::index_faults(TLRT_DEVICE_CPU, true);
  th::index_faults(TLRT_DEVICE_CUDA(0), true);
  const Fwd a = run(TLRT_DEVICE_CPU, x, lab, (salt & 1) != 0, rows, classes, ignore, 1.5f);
  const Fwd b = run(TLRT_DEVICE_CUDA(0), x, lab, (salt & 1) != 0, rows, classes, ignore, 1.5f);
  const uint64_t fa = th::index_faults(TLRT_DEVICE_CPU, true);
  const uint64_t fb = th::index_faults(TLRT_DEVICE_CUDA(0), true);
  const std::string w = "parity (" + std::to_string(rows) + ", " + std::to_string(classes) +
                        ") ignore " + std::to_string(ignore) + (bits ? " bits" : "");
  TH_CHECK_MSG(fa == fb, "%s: faults cpu %llu cuda %llu", w.c_str(), (unsigned long long)fa,
               (unsigned long long)fb);
  if (!a.ok || !b.ok) return;
  TH_CHECK_MSG(same(a.loss, b.loss), "%s: loss cpu %s cuda %s", w.c_str(), th::hex(a.loss).c_str(),
               th::hex(b.loss).c_str());
  uint64_t bad = 0;
  for (size_t i = 0; i < a.lse.size(); ++i)
    if (!same(a.lse[i], b.lse[i]) && bad++ < 3)
      TH_CHECK_MSG(false, "%s: lse[%zu] cpu %s cuda %s", w.c_str(), i, th::hex(a.lse[i]).c_str(),
                   th::hex(b.lse[i]).c_str());
  for (size_t i = 0; i < a.dx.size(); ++i)
    if (!same(a.dx[i], b.dx[i]) && bad++ < 6)
      TH_CHECK_MSG(false, "%s: dx[%zu] cpu %s cuda %s", w.c_str(), i, th::hex(a.dx[i]).c_str(),
                   th::hex(b.dx[i]).c_str());
}

}  // namespace

int main() {
  const bool vg = th::under_valgrind();
  uint64_t salt = 1;
  for (tlrt_device dev : devices()) {
    known_answers(dev);
    edges(dev);
    finite_differences(dev, ++salt);
    tape(dev, ++salt);
    for (int ignore : {kNone, -100, 0}) {
      for (uint64_t c : {1u, 2u, 5u, 33u, 300u, 4096u, 4097u, 8193u, 16385u, 50257u}) {
        const uint64_t rows = c >= 8192 ? 5 : 37;
        if (vg && c > 5000) continue;
        definitions(dev, rows, c, ignore, ++salt);
      }
    }
    if (!vg) definitions(dev, 3, (1u << 17) + 3, -100, ++salt);
    for (uint64_t c : {7u, 1000u, 50257u})
      for (float spread : {1.0f, 16.0f}) accuracy(dev, c > 5000 ? 9 : 50, c, spread, ++salt);
    if (!vg) accuracy(dev, 3, (1u << 17) + 3, 8.0f, ++salt);
  }
  if (th::cuda_ready()) {
    for (uint64_t c : {1u, 3u, 32u, 100u, 256u, 1000u, 4096u, 4097u, 8192u, 8193u, 16384u, 16385u,
                       32768u, 32769u, 50257u, 65536u, 65537u, (1u << 17) + 3, (1u << 20) + 5})
      for (bool bits : {false, true})
        parity(c > 100000 ? 3 : c > 8192 ? 40 : 300, c, bits ? kNone : -100, bits, ++salt);
    parity(5000, 10, -100, false, ++salt);
  }
  return th::finish("test_cross_entropy");
}
