// Known answers, special values, an independent bit-exact reference and the measured accuracy of
// the selective scan (abi/tlrt_scan.h) on the CPU backend: tlrt_selective_scan_diag_fwd / _bwd and
// tlrt_selective_scan_diag_var_fwd / _bwd.
//
// (1) Hand-computed answers (every value exact in float32).
// (2) Bit-exact reference: the header's DEFINITIONS re-implemented independently, one channel at
//     a time with scalar float operations (this file is built with -ffp-contract=off), and THE
//     TREE literally (every chunk materialises its 256 lanes) for diag_bwd's sums over time.
//     Compared BIT FOR BIT (any NaN equals any NaN) for T across the chunk (64) and tree (256,
//     4096) boundaries, D across the CPU's 1024-column tile, and every input distribution of
//     th::Dist (bit patterns and edge values included).
// (3) Accuracy against a float64 sequential evaluation of the recurrence on the same float32
//     inputs: the header's bounds, |out - h| <= g_n(t) H_t, the adjoint's and the gradients'
//     (plus an absolute 2^-149 per rounding for subnormal intermediates); the largest ratio
//     error / bound is printed. A in [-1, 1], in [0.9, 1] (long memory) and in [1, 1.02].
// (4) Edge cases: T = 0 (+0 gradients, not garbage), D = 0, T = 1, NaN and inf propagation
//     channel by channel and from the step where they enter, A = 0 resets, the determinism switch,
//     no leaks.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "harness.hpp"

namespace {

using th::Buf;
using th::Dist;

const double kU = std::ldexp(1.0, -24);
const uint64_t kL = TLRT_SCAN_CHUNK;

struct Problem {
  uint64_t T, D;
  bool var;
  std::vector<float> A, B, X, h0, dY;
  float a(uint64_t t, uint64_t j) const { return var ? A[t * D + j] : A[j]; }
  float b(uint64_t t, uint64_t j) const { return var ? B[t * D + j] : B[j]; }
};

struct Grads {
  std::vector<float> dA, dB, dX, dH0;
};

// ---- the independent reference of the DEFINITIONS ----------------------------------------------

std::vector<float> ref_fwd(const Problem &p) {
  const uint64_t T = p.T, D = p.D;
  std::vector<float> out(T * D);
  for (uint64_t j = 0; j < D; ++j) {
    float k = p.h0[j];
    for (uint64_t c0 = 0; c0 < T; c0 += kL) {
      const uint64_t e = std::min(c0 + kL, T);
      float l = 0, P = 0;
      for (uint64_t t = c0; t < e; ++t) {
        const float a = p.a(t, j), bx = p.b(t, j) * p.X[t * D + j];
        if (t == c0) {
          l = bx;
          P = a;
        } else {
          const float al = a * l;
          l = al + bx;
          P = P * a;
        }
        const float pk = P * k;
        out[t * D + j] = l + pk;
      }
      k = out[(e - 1) * D + j];
    }
  }
  return out;
}

// THE TREE (abi/tlrt_reduce.h) over v, literally.
float tree_sum(std::vector<float> v) {
  do {
    std::vector<float> next;
    for (size_t c0 = 0; c0 < v.size(); c0 += 4096) {
      float lane[256];
      for (size_t t = 0; t < 256; ++t) {
        float acc = -0.0f;
        for (size_t r = 0; r < 16; ++r) {
          const size_t i = c0 + t + 256 * r;
          if (i < v.size() && i < c0 + 4096) acc = acc + v[i];
        }
        lane[t] = acc;
      }
      for (size_t h = 128; h >= 1; h /= 2)
        for (size_t t = 0; t < h; ++t) lane[t] = lane[t] + lane[t + h];
      next.push_back(lane[0]);
    }
    v = next;
  } while (v.size() > 1);
  return v[0];
}

// The adjoint g (T, D) of the DEFINITIONS and dH0.
std::vector<float> ref_adjoint(const Problem &p, std::vector<float> &dH0) {
  const uint64_t T = p.T, D = p.D, C = (T + kL - 1) / kL;
  std::vector<float> g(T * D);
  dH0.assign(D, 0.0f);
  for (uint64_t j = 0; j < D; ++j) {
    float q = 0;
    for (uint64_t c = C; c-- > 0;) {
      const uint64_t c0 = c * kL, e = std::min(c0 + kL, T) - 1;
      float m = 0, Q = 0;
      for (uint64_t t = e + 1; t-- > c0;) {
        const float dy = p.dY[t * D + j];
        if (t == e) {
          m = dy;
          Q = 1.0f;
        } else {
          const float an = p.a(t + 1, j);
          const float am = an * m;
          m = am + dy;
          Q = an * Q;
        }
        if (c + 1 < C) {
          const float qq = Q * q;
          g[t * D + j] = m + qq;
        } else {
          g[t * D + j] = m;
        }
      }
      q = p.a(c0, j) * g[c0 * D + j];
    }
    dH0[j] = q;
  }
  return g;
}

Grads ref_bwd(const Problem &p, const std::vector<float> &out) {
  const uint64_t T = p.T, D = p.D;
  Grads r;
  const std::vector<float> g = ref_adjoint(p, r.dH0);
  r.dX.resize(T * D);
  auto hp = [&](uint64_t t, uint64_t j) { return t == 0 ? p.h0[j] : out[(t - 1) * D + j]; };
  for (uint64_t t = 0; t < T; ++t)
    for (uint64_t j = 0; j < D; ++j) r.dX[t * D + j] = p.b(t, j) * g[t * D + j];
  if (p.var) {
    r.dA.resize(T * D);
    r.dB.resize(T * D);
    for (uint64_t t = 0; t < T; ++t)
      for (uint64_t j = 0; j < D; ++j) {
        r.dA[t * D + j] = hp(t, j) * g[t * D + j];
        r.dB[t * D + j] = p.X[t * D + j] * g[t * D + j];
      }
  } else {
    r.dA.resize(D);
    r.dB.resize(D);
    std::vector<float> sa(T), sb(T);
    for (uint64_t j = 0; j < D; ++j) {
      for (uint64_t t = 0; t < T; ++t) {
        sa[t] = hp(t, j) * g[t * D + j];
        sb[t] = p.X[t * D + j] * g[t * D + j];
      }
      r.dA[j] = tree_sum(sa);
      r.dB[j] = tree_sum(sb);
    }
  }
  return r;
}

// ---- calling the library -----------------------------------------------------------------------

std::vector<float> lib_fwd(const Problem &p, tlrt_device dev = TLRT_DEVICE_CPU) {
  Buf a(th::upload(p.A, dev)), b(th::upload(p.B, dev)), x(th::upload(p.X, dev)),
      h(th::upload(p.h0, dev)), out;
  if (p.var)
    TH_OK(tlrt_selective_scan_diag_var_fwd(a.get(), b.get(), x.get(), h.get(), p.T, p.D, out.out()));
  else
    TH_OK(tlrt_selective_scan_diag_fwd(a.get(), b.get(), x.get(), h.get(), p.T, p.D, out.out()));
  return out.get() ? th::download(out.get()) : std::vector<float>{};
}

Grads lib_bwd(const Problem &p, const std::vector<float> &outv) {
  Buf a(th::upload(p.A)), b(th::upload(p.B)), x(th::upload(p.X)), h(th::upload(p.h0)),
      o(th::upload(outv)), dy(th::upload(p.dY)), dA, dB, dX, dH0;
  if (p.var)
    TH_OK(tlrt_selective_scan_diag_var_bwd(a.get(), b.get(), x.get(), h.get(), o.get(), dy.get(),
                                           p.T, p.D, dA.out(), dB.out(), dX.out(), dH0.out()));
  else
    TH_OK(tlrt_selective_scan_diag_bwd(a.get(), b.get(), x.get(), h.get(), o.get(), dy.get(), p.T,
                                       p.D, dA.out(), dB.out(), dX.out(), dH0.out()));
  Grads r;
  if (!dA.get()) return r;
  r.dA = th::download(dA.get());
  r.dB = th::download(dB.get());
  r.dX = th::download(dX.get());
  r.dH0 = th::download(dH0.get());
  return r;
}

bool same(const std::vector<float> &a, const std::vector<float> &b, const std::string &what) {
  ++th::checks();
  if (a.size() != b.size()) {
    th::report(__FILE__, __LINE__, what + ": sizes differ");
    return false;
  }
  for (size_t i = 0; i < a.size(); ++i)
    if (!th::same_bits(a[i], b[i])) {
      th::report(__FILE__, __LINE__,
                 what + ": element " + std::to_string(i) + " is " + th::hex(a[i]) + ", expected " +
                     th::hex(b[i]));
      return false;
    }
  return true;
}

void expect_values(const std::vector<float> &got, const std::vector<float> &want,
                   const std::string &what) {
  same(got, want, what);
}

// ---- (1) known answers --------------------------------------------------------------------------

void known_answers() {
  // diag, T = 3, D = 2: channel 0 A = 0.5, B = 1, h0 = 1; channel 1 A = 2, B = -1, h0 = 0.
  Problem p{3, 2, false, {0.5f, 2.0f}, {1.0f, -1.0f}, {1, 2, 3, 4, 5, 6}, {1.0f, 0.0f},
            {1, 1, 1, 1, 1, 1}};
  const std::vector<float> out = lib_fwd(p);
  expect_values(out, {1.5f, -2.0f, 3.75f, -8.0f, 6.875f, -22.0f}, "diag_fwd known answer");
  // g (channel 0) = 1.75, 1.5, 1; (channel 1) = 7, 3, 1.
  const Grads g = lib_bwd(p, out);
  expect_values(g.dX, {1.75f, -7.0f, 1.5f, -3.0f, 1.0f, -1.0f}, "diag_bwd dX");
  expect_values(g.dB, {11.25f, 32.0f}, "diag_bwd dB");  // sum_t X g
  expect_values(g.dA, {7.75f, -14.0f}, "diag_bwd dA");  // h0 g0 + h_0 g1 + h_1 g2
  expect_values(g.dH0, {0.875f, 14.0f}, "diag_bwd dH0");

  // var, T = 2, D = 1: A = (2, 3), B = (1, 0.5), X = (4, 8), h0 = 1:
  // h_0 = 2 + 4 = 6, h_1 = 18 + 4 = 22. dY = (1, 2): g_1 = 2, g_0 = 1 + 3 * 2 = 7.
  Problem v{2, 1, true, {2, 3}, {1, 0.5f}, {4, 8}, {1}, {1, 2}};
  const std::vector<float> vo = lib_fwd(v);
  expect_values(vo, {6, 22}, "var_fwd known answer");
  const Grads vg = lib_bwd(v, vo);
  expect_values(vg.dA, {7, 12}, "var_bwd dA");   // h0 g0, h_0 g1
  expect_values(vg.dB, {28, 16}, "var_bwd dB");  // X g
  expect_values(vg.dX, {7, 1}, "var_bwd dX");    // B g
  expect_values(vg.dH0, {14}, "var_bwd dH0");    // A_0 g_0
}

// ---- (2) bit-exact reference ---------------------------------------------------------------------

Problem random_problem(uint64_t T, uint64_t D, bool var, Dist d, uint64_t salt) {
  Problem p;
  p.T = T;
  p.D = D;
  p.var = var;
  const uint64_t na = var ? T * D : D;
  // A in [-1, 1) (or the distribution itself for bits / edge / wide inputs).
  p.A = th::make(d == Dist::Positive ? Dist::Uniform : d, na, salt);
  p.B = th::make(d, na, salt + 1);
  p.X = th::make(d, T * D, salt + 2);
  p.h0 = th::make(d, D, salt + 3);
  p.dY = th::make(d == Dist::Positive ? Dist::Uniform : d, T * D, salt + 4);
  return p;
}

void bit_exact() {
  const Dist dists[] = {Dist::Uniform, Dist::Positive, Dist::Wide, Dist::Bits, Dist::Edge};
  struct Shape {
    uint64_t T, D;
  };
  const Shape shapes[] = {{1, 1},   {1, 5},    {2, 3},     {63, 4},    {64, 4},   {65, 4},
                          {127, 2}, {128, 17}, {129, 3},   {255, 2},   {256, 3},  {257, 5},
                          {1000, 9}, {4095, 2}, {4096, 3}, {4097, 3}, {9000, 2}, {130, 1030},
                          {3, 2049}};
  uint64_t salt = 100;
  int runs = 0;
  for (const Shape &s : shapes)
    for (Dist d : dists)
      for (bool var : {false, true}) {
        if (s.T * s.D > 40000 && d != Dist::Uniform) continue;
        const Problem p = random_problem(s.T, s.D, var, d, salt += 10);
        const std::string w = std::string(var ? "var" : "diag") + " (" + std::to_string(s.T) +
                              ", " + std::to_string(s.D) + ") " + th::dist_name(d);
        const std::vector<float> out = lib_fwd(p);
        const std::vector<float> rout = ref_fwd(p);
        same(out, rout, w + " fwd");
        const Grads g = lib_bwd(p, rout), r = ref_bwd(p, rout);
        same(g.dA, r.dA, w + " dA");
        same(g.dB, r.dB, w + " dB");
        same(g.dX, r.dX, w + " dX");
        same(g.dH0, r.dH0, w + " dH0");
        ++runs;
      }
  std::printf("bit-exact reference: %d problems, forward and backward identical\n", runs);
}

// ---- (3) accuracy against float64 ---------------------------------------------------------------

double gamma_n(double n) { return n * kU / (1 - n * kU); }

struct Worst {
  double fwd = 0, g = 0, dx = 0, da = 0, db = 0, dh0 = 0;
};

void note(double &worst, double err, double bound, const std::string &what, uint64_t i) {
  ++th::checks();
  const double r = bound > 0 ? err / bound : (err == 0 ? 0 : INFINITY);
  if (!(r <= 1.0)) {
    char buf[256];
    std::snprintf(buf, sizeof buf, "%s [%llu]: error %.3g exceeds the bound %.3g", what.c_str(),
                  (unsigned long long)i, err, bound);
    th::report(__FILE__, __LINE__, buf);
  }
  worst = std::max(worst, r);
}

// A chosen in [alo, ahi), B, X, h0, dY uniform in [-1, 1).
void accuracy_one(uint64_t T, uint64_t D, bool var, float alo, float ahi, uint64_t salt,
                  Worst &w) {
  th::Rng rng(salt);
  Problem p;
  p.T = T;
  p.D = D;
  p.var = var;
  const uint64_t na = var ? T * D : D;
  p.A = rng.vec(na, alo, ahi);
  p.B = rng.vec(na, -1, 1);
  p.X = rng.vec(T * D, -1, 1);
  p.h0 = rng.vec(D, -1, 1);
  p.dY = rng.vec(T * D, -1, 1);
  const std::vector<float> out = lib_fwd(p);
  const Grads g = lib_bwd(p, out);
  if (out.size() != T * D || g.dX.size() != T * D) return;
  const uint64_t C = (T + kL - 1) / kL;
  unsigned levels = 1;
  for (uint64_t m = T; m > 4096; m = (m + 4095) / 4096) ++levels;
  const std::string tag = std::string(var ? "var" : "diag") + " T=" + std::to_string(T) + " A in [" +
                          std::to_string(alo) + ", " + std::to_string(ahi) + ")";
  const double tiny = std::ldexp(1.0, -149);
  for (uint64_t j = 0; j < D; ++j) {
    // Forward: h and its magnitude H in float64.
    double h = p.h0[j], H = std::fabs(p.h0[j]);
    std::vector<double> hs(T);
    for (uint64_t t = 0; t < T; ++t) {
      const double a = p.a(t, j), bx = (double)p.b(t, j) * p.X[t * D + j];
      h = a * h + bx;
      H = std::fabs(a) * H + std::fabs(bx);
      hs[t] = h;
      const double n = 2.0 * kL + 1 + (kL + 1) * (double)(t / kL);
      note(w.fwd, std::fabs(out[t * D + j] - h), gamma_n(n) * H + 3 * (t + 1) * tiny, tag + " out",
           t * D + j);
    }
    // Adjoint in float64 and its magnitude G; then the gradients (h_{t-1} from `out`, as given).
    std::vector<double> gs(T), Gs(T);
    double gn = 0, Gn = 0;
    for (uint64_t t = T; t-- > 0;) {
      const double an = t + 1 < T ? (double)p.a(t + 1, j) : 0.0;
      gn = p.dY[t * D + j] + an * gn;
      Gn = std::fabs(p.dY[t * D + j]) + std::fabs(an) * Gn;
      gs[t] = gn;
      Gs[t] = Gn;
    }
    double sa = 0, sb = 0, ma = 0, mb = 0;
    const double M = 2.0 * kL + 1 + (kL + 1) * (double)(C - 1);
    for (uint64_t t = 0; t < T; ++t) {
      const double hp = t == 0 ? (double)p.h0[j] : (double)out[(t - 1) * D + j];
      const double m = 2.0 * kL + 1 + (kL + 1) * (double)(C - 1 - t / kL);
      const double slack = 3 * (T - t) * tiny;
      note(w.dx, std::fabs(g.dX[t * D + j] - (double)p.b(t, j) * gs[t]),
           gamma_n(m + 1) * std::fabs(p.b(t, j)) * Gs[t] + slack, tag + " dX", t * D + j);
      if (var) {
        note(w.da, std::fabs(g.dA[t * D + j] - hp * gs[t]),
             gamma_n(m + 1) * std::fabs(hp) * Gs[t] + slack, tag + " dA", t * D + j);
        note(w.db, std::fabs(g.dB[t * D + j] - (double)p.X[t * D + j] * gs[t]),
             gamma_n(m + 1) * std::fabs(p.X[t * D + j]) * Gs[t] + slack, tag + " dB", t * D + j);
      }
      sa += hp * gs[t];
      sb += (double)p.X[t * D + j] * gs[t];
      ma += std::fabs(hp) * Gs[t];
      mb += std::fabs(p.X[t * D + j]) * Gs[t];
    }
    if (!var) {
      const double n = M + 1 + 24.0 * levels;
      note(w.da, std::fabs(g.dA[j] - sa), gamma_n(n) * ma + 4 * T * tiny, tag + " dA", j);
      note(w.db, std::fabs(g.dB[j] - sb), gamma_n(n) * mb + 4 * T * tiny, tag + " dB", j);
    }
    note(w.dh0, std::fabs(g.dH0[j] - (double)p.a(0, j) * gs[0]),
         gamma_n(M + 1) * std::fabs(p.a(0, j)) * Gs[0] + 3 * T * tiny, tag + " dH0", j);
  }
}

void accuracy() {
  Worst w;
  uint64_t salt = 7000;
  for (bool var : {false, true}) {
    for (uint64_t T : {1ull, 5ull, 64ull, 65ull, 300ull, 4096ull, 5000ull, 20000ull}) {
      const uint64_t D = T >= 5000 ? 3 : 8;
      accuracy_one(T, D, var, -1.0f, 1.0f, salt++, w);
      accuracy_one(T, D, var, 0.9f, 1.0f, salt++, w);
    }
    for (uint64_t T : {10ull, 100ull, 300ull}) accuracy_one(T, 4, var, 1.0f, 1.02f, salt++, w);
  }
  std::printf("accuracy, largest error / bound: out %.3g, dX %.3g, dA %.3g, dB %.3g, dH0 %.3g\n",
              w.fwd, w.dx, w.da, w.db, w.dh0);
}

// ---- (4) edge cases -----------------------------------------------------------------------------

void empty_shapes() {
  for (bool var : {false, true}) {
    // T = 0, D = 3: empty out; dA, dB (diag: 3 zeros; var: empty), dH0 = +0, dX empty.
    Problem p{0, 3, var, var ? std::vector<float>{} : std::vector<float>{0.5f, 2, 3},
              var ? std::vector<float>{} : std::vector<float>{1, 1, 1}, {}, {1, 2, 3}, {}};
    const std::vector<float> out = lib_fwd(p);
    TH_CHECK(out.empty());
    // Fill the allocator's blocks with garbage first so that uninitialised memory would show.
    {
      std::vector<float> junk(64, NAN);
      Buf b(th::upload(junk));
    }
    const Grads g = lib_bwd(p, out);
    TH_CHECK(g.dX.empty());
    TH_CHECK(g.dH0.size() == 3);
    for (float v : g.dH0) TH_CHECK(th::bits_of(v) == 0u);
    TH_CHECK(g.dA.size() == (var ? 0u : 3u));
    TH_CHECK(g.dB.size() == (var ? 0u : 3u));
    for (float v : g.dA) TH_CHECK(th::bits_of(v) == 0u);
    for (float v : g.dB) TH_CHECK(th::bits_of(v) == 0u);
    // D = 0 with T = 5: everything empty.
    Problem q{5, 0, var, {}, {}, {}, {}, {}};
    TH_CHECK(lib_fwd(q).empty());
    const Grads gq = lib_bwd(q, {});
    TH_CHECK(gq.dA.empty() && gq.dB.empty() && gq.dX.empty() && gq.dH0.empty());
  }
}

void special_values() {
  const float nan = NAN, inf = INFINITY;
  // T = 200 (four chunks), D = 3, A = 0.5. Channel 0: NaN in X at t = 70; channel 1: clean;
  // channel 2: +inf in X at t = 130 with B = 1.
  const uint64_t T = 200, D = 3;
  Problem p;
  p.T = T;
  p.D = D;
  p.var = false;
  p.A = {0.5f, 0.5f, 0.5f};
  p.B = {1, 1, 1};
  p.h0 = {1, 1, 1};
  th::Rng rng(55);
  p.X = rng.vec(T * D, -1, 1);
  p.dY = rng.vec(T * D, -1, 1);
  p.X[70 * D + 0] = nan;
  p.X[130 * D + 2] = inf;
  const std::vector<float> out = lib_fwd(p);
  for (uint64_t t = 0; t < T; ++t) {
    TH_CHECK_MSG(std::isnan(out[t * D]) == (t >= 70), "channel 0, t = %llu: %g",
                 (unsigned long long)t, out[t * D]);
    TH_CHECK(std::isfinite(out[t * D + 1]));
    // inf enters at 130; from then on 0.5 * inf + finite = inf, except that the chunked order
    // multiplies the carry: inf * P stays inf (P > 0).
    TH_CHECK_MSG(t < 130 ? std::isfinite(out[t * D + 2]) : out[t * D + 2] == inf,
                 "channel 2, t = %llu: %g", (unsigned long long)t, out[t * D + 2]);
  }
  // A = 0 at one step of diag_var resets the state: out[t] = B X exactly (up to the sign of 0).
  Problem v = random_problem(150, 2, true, Dist::Uniform, 77);
  v.A[100 * 2 + 1] = 0.0f;
  const std::vector<float> vo = lib_fwd(v);
  const float bx = v.B[100 * 2 + 1] * v.X[100 * 2 + 1];
  TH_CHECK_MSG(vo[100 * 2 + 1] == bx, "reset: %g, expected %g", vo[100 * 2 + 1], bx);
  // The backward of the NaN channel: g is finite (dY, A finite), dX finite; dB[0] sums X g: NaN.
  const Grads g = lib_bwd(p, out);
  TH_CHECK(std::isnan(g.dB[0]) && std::isfinite(g.dB[1]));
  TH_CHECK(std::isnan(g.dA[0]) && std::isfinite(g.dA[1]));  // h_{t-1} is NaN from t = 71
  for (uint64_t t = 0; t < T; ++t) TH_CHECK(std::isfinite(g.dX[t * D]));
  // The determinism switch changes nothing.
  const bool was = tlrt_set_deterministic(!tlrt_get_deterministic());
  const Problem r = random_problem(300, 5, false, Dist::Wide, 91);
  const std::vector<float> o1 = lib_fwd(r);
  tlrt_set_deterministic(was);
  same(o1, lib_fwd(r), "determinism switch");
}

}  // namespace

int main() {
  const tlrt_allocator_stats start = th::stats();
  known_answers();
  bit_exact();
  accuracy();
  empty_shapes();
  special_values();
  const tlrt_allocator_stats end = th::stats();
  TH_CHECK_MSG(end.live_bytes == start.live_bytes, "live bytes %llu -> %llu",
               (unsigned long long)start.live_bytes, (unsigned long long)end.live_bytes);
  return th::finish("test_scan");
}
