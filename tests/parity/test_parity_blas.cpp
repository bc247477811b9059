// Suite 'parity': the matrix products of abi/tlrt_blas.h on TLRT_DEVICE_CPU and
// TLRT_DEVICE_CUDA(0) with the same seeded inputs. Numeric class "library": the backends sum in
// different orders, so they are compared by RELATIVE ERROR, not bits:
//   - each backend against a float64 reference, |C - exact| <= 2 n u S with
//     S(i, j) = sum_k |A(i, k)| |B(k, j)| and u = 2^-24 (CUDA with TF32 allowed:
//     (2^-9 + 2 n u) S); every element for products up to 2^27 multiply-adds, 4096 sampled
//     elements of larger ones;
//   - CPU against CUDA on every element: |C_cpu - C_cuda| <= 4 n u S' (1 + 2 n u) + 2^-149, S'
//     being |A| |B| computed on CUDA in float32 (all terms positive: within n u of S);
//   - special values: the NaN and the infinity positions of both backends must be identical (and
//     the ones abi/tlrt_blas.h documents: 0 * inf = NaN, nothing skipped);
//   - n == 0 gives +0 on both; empty outputs are empty on both;
//   - the TF32 switch: off and on again gives the off result bit for bit (the handle's math mode is
//     restored), and with TF32 on the error stays within its bound;
//   - the cuBLAS handle per thread: four threads at once reproduce the one-thread result.
// Shapes: square (1..4096, powers of two and odd), tall, skinny (matrix-vector both ways), batched
// (64 x 512^3 and many tiny ones), every transpose combination, 1 and 0 dimensions, and the
// 4096^3 product. TLRT_PARITY_MAX_N=<n> skips cases with an operand above n elements. The largest
// relative errors seen are printed (abi/tlrt_blas.h quotes them).
//
// Exits 77 (skipped) unless a CUDA device is usable. Built with -DTLRT_PARITY_SELFTEST both sides
// run on the CPU (checks this test's own logic).
#include <algorithm>
#include <climits>
#include <cstdarg>
#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include "parity.hpp"

namespace {

using namespace parity;
using th::Buf;
using th::Dist;
using u64 = uint64_t;
constexpr double kU = 0x1p-24;
constexpr double kTf32 = 0x1p-9;

struct Worst {
  double cpu = 0, gpu = 0, gpu_tf32 = 0, cross = 0;
} g_worst;
u64 g_skipped = 0;

struct Case {
  u64 batch, m, n, p;
  bool ta, tb;
  Dist dist;
  bool tf32;
};

std::string name(const Case &c) {
  char b[200];
  std::snprintf(b, sizeof b, "bmm %llu x (%llu, %llu, %llu) ta=%d tb=%d %s%s",
                (unsigned long long)c.batch, (unsigned long long)c.m, (unsigned long long)c.n,
                (unsigned long long)c.p, c.ta, c.tb, th::dist_name(c.dist),
                c.tf32 ? " tf32" : "");
  return b;
}

// Logical elements of the stored operands.
inline float at_a(const std::vector<float> &a, const Case &c, u64 q, u64 i, u64 k) {
  const u64 base = q * c.m * c.n;
  return c.ta ? a[base + k * c.m + i] : a[base + i * c.n + k];
}
inline float at_b(const std::vector<float> &b, const Case &c, u64 q, u64 k, u64 j) {
  const u64 base = q * c.n * c.p;
  return c.tb ? b[base + j * c.n + k] : b[base + k * c.p + j];
}

tlrt_status product(tlrt_device dev, const std::vector<float> &a, const std::vector<float> &b,
                    const Case &c, Buf &out) {
  Buf A(th::upload(a, dev)), B(th::upload(b, dev));
  if (c.batch == 1)
    return tlrt_matmul(A.get(), B.get(), c.m, c.n, c.p, c.ta, c.tb, out.out());
  return tlrt_bmm(A.get(), B.get(), c.batch, c.m, c.n, c.p, c.ta, c.tb, out.out());
}

std::vector<float> absv(std::vector<float> v) {
  for (float &x : v) x = std::fabs(x);
  return v;
}

__attribute__((format(printf, 2, 3))) void fail_run(const std::string &what, const char *fmt,
                                                   ...) {
  ++summary().failed_runs;
  char b[256];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(b, sizeof b, fmt, ap);
  va_end(ap);
  TH_CHECK_MSG(false, "%s: %s", what.c_str(), b);
  std::printf("MISMATCH %s: %s\n", what.c_str(), b);
}

void run_case(const Case &c) {
  const u64 na = c.batch * c.m * c.n, nb = c.batch * c.n * c.p, nc = c.batch * c.m * c.p;
  if (na > max_n() || nb > max_n() || nc > max_n()) {
    ++g_skipped;
    return;
  }
  const std::string what = name(c);
  const u64 salt =
      c.batch * 1000003 + c.m * 1009 + c.n * 31 + c.p + (c.ta ? 7 : 0) + (c.tb ? 13 : 0);
  const std::vector<float> a = th::make(c.dist, na, salt), b = th::make(c.dist, nb, salt + 1);
  Buf cy, gy;
  const tlrt_status cs = product(kCpu, a, b, c, cy);
  const bool was = tlrt_set_allow_tf32(c.tf32);
  const tlrt_status gs = product(kGpu, a, b, c, gy);
  tlrt_set_allow_tf32(false);
  // |A| |B| on the GPU in float32 (TF32 off).
  Buf sy;
  const tlrt_status ss = c.n == 0 ? TLRT_OK : product(kGpu, absv(a), absv(b), c, sy);
  tlrt_set_allow_tf32(was);
  TH_CHECK_MSG(cs == TLRT_OK && gs == TLRT_OK && ss == TLRT_OK, "%s failed: %s", what.c_str(),
               tlrt_last_error());
  if (cs != TLRT_OK || gs != TLRT_OK || ss != TLRT_OK) {
    ++summary().failed_runs;
    return;
  }
  tlrt_device d = 0;
  TH_OK(tlrt_buffer_device(gy.get(), &d));
  TH_CHECK_MSG(d == kGpu, "%s: CUDA output on device 0x%x", what.c_str(), d);
  const std::vector<float> C = th::download(cy.get()), G = th::download(gy.get());
  const std::vector<float> S = c.n == 0 ? std::vector<float>(nc, 0.0f) : th::download(sy.get());
  Summary &sum = summary();
  ++sum.runs;
  sum.elements += nc;
  if (C.size() != nc || G.size() != nc || S.size() != nc) {
    fail_run(what, "sizes cpu %zu cuda %zu expected %llu", C.size(), G.size(),
             (unsigned long long)nc);
    return;
  }
  if (c.n == 0) {
    u64 bad = 0;
    for (u64 i = 0; i < nc; ++i) bad += th::bits_of(C[i]) != 0 || th::bits_of(G[i]) != 0;
    sum.mismatches += bad;
    if (bad)
      fail_run(what, "n == 0: %llu of %llu outputs are not +0", (unsigned long long)bad,
               (unsigned long long)nc);
    return;
  }
  const double n = (double)c.n;
  const double gpu_rel = (c.tf32 ? kTf32 : 0.0) + 2.0 * n * kU;
  // CPU vs CUDA, every element.
  {
    u64 bad = 0, first = 0;
    double worst = 0;
    const double f = 4.0 * n * kU * (1.0 + 2.0 * n * kU) + (c.tf32 ? kTf32 : 0.0);
    for (u64 i = 0; i < nc; ++i) {
      const double diff = std::fabs((double)C[i] - (double)G[i]);
      if (S[i] > 0) worst = std::max(worst, diff / (n * kU * S[i]));
      if (!(diff <= f * S[i] + 0x1p-149)) {
        if (bad == 0) first = i;
        ++bad;
      }
    }
    if (!c.tf32) g_worst.cross = std::max(g_worst.cross, worst);
    sum.mismatches += bad;
    if (bad)
      fail_run(what, "%llu outputs differ beyond the bound; first at %llu (cpu %.9g, cuda %.9g)",
               (unsigned long long)bad, (unsigned long long)first, (double)C[first],
               (double)G[first]);
  }
  // Both against float64, all elements or a sample.
  {
    const bool all = (double)c.batch * c.m * c.n * c.p <= (double)(1u << 27);
    const u64 count = all ? nc : 4096;
    th::Rng rng(salt + 2);
    u64 bad_c = 0, bad_g = 0;
    for (u64 t = 0; t < count; ++t) {
      const u64 idx = all ? t : rng.gen() % nc;
      const u64 q = idx / (c.m * c.p), i = idx / c.p % c.m, j = idx % c.p;
      double exact = 0, s = 0;
      for (u64 k = 0; k < c.n; ++k) {
        const double x = (double)at_a(a, c, q, i, k) * (double)at_b(b, c, q, k, j);
        exact += x;
        s += std::fabs(x);
      }
      const double ec = std::fabs(C[idx] - exact), eg = std::fabs(G[idx] - exact);
      if (s > 0) {
        g_worst.cpu = std::max(g_worst.cpu, ec / (n * kU * s));
        double &w = c.tf32 ? g_worst.gpu_tf32 : g_worst.gpu;
        w = std::max(w, eg / (n * kU * s));
      }
      bad_c += !(ec <= 2.0 * n * kU * s + 0x1p-149);
      bad_g += !(eg <= gpu_rel * s + 0x1p-149);
    }
    ++th::checks();
    if (bad_c || bad_g)
      fail_run(what, "float64 reference: %llu cpu and %llu cuda outputs beyond the bound (of %llu)",
               (unsigned long long)bad_c, (unsigned long long)bad_g, (unsigned long long)count);
  }
}

// Empty outputs.
void run_empty() {
  const u64 shapes[][4] = {{0, 3, 4, 5}, {2, 0, 4, 5}, {2, 3, 4, 0}, {1, 0, 0, 0}};
  for (const auto &s : shapes) {
    const std::vector<float> a(s[0] * s[1] * s[2], 1.0f), b(s[0] * s[2] * s[3], 1.0f);
    Buf A(th::upload(a, kGpu)), B(th::upload(b, kGpu)), C;
    TH_OK(tlrt_bmm(A.get(), B.get(), s[0], s[1], s[2], s[3], false, true, C.out()));
    u64 size = 99;
    TH_OK(tlrt_buffer_size(C.get(), &size));
    TH_CHECK(size == 0);
  }
}

// NaN and infinity positions, CPU vs CUDA (see the unit test's test_special).
void run_special() {
  const u64 shapes[][3] = {{6, 7, 5}, {3, 40, 2000}, {200, 30, 3}, {70, 300, 90}, {513, 257, 129}};
  u64 salt = 77;
  for (const auto &s : shapes)
    for (int f = 0; f < 4; ++f) {
      const Case c{1, s[0], s[1], s[2], (f & 1) != 0, (f & 2) != 0, Dist::Positive, false};
      const u64 m = c.m, n = c.n, p = c.p;
      std::vector<float> A = th::make(Dist::Positive, m * n, ++salt);
      std::vector<float> B = th::make(Dist::Positive, n * p, ++salt);
      for (float &x : A) x += 1.0f;
      for (float &x : B) x += 1.0f;
      A[(m / 2) * n + n - 1] = NAN;
      for (u64 i = 0; i < m; i += 3) A[i * n] = (i % 2) ? -0.0f : 0.0f;
      B[p - 1] = INFINITY;
      B[(n / 2) * p] = -INFINITY;
      std::vector<float> a = A, b = B;
      if (c.ta)
        for (u64 i = 0; i < m; ++i)
          for (u64 k = 0; k < n; ++k) a[k * m + i] = A[i * n + k];
      if (c.tb)
        for (u64 k = 0; k < n; ++k)
          for (u64 j = 0; j < p; ++j) b[j * n + k] = B[k * p + j];
      Buf cy, gy;
      const tlrt_status cs = product(kCpu, a, b, c, cy), gs = product(kGpu, a, b, c, gy);
      TH_CHECK(cs == TLRT_OK && gs == TLRT_OK);
      if (cs != TLRT_OK || gs != TLRT_OK) continue;
      const std::vector<float> C = th::download(cy.get()), G = th::download(gy.get());
      ++summary().runs;
      summary().elements += C.size();
      u64 bad = 0, first = 0;
      for (u64 i = 0; i < C.size(); ++i) {
        const bool same = std::isnan(C[i]) == std::isnan(G[i]) &&
                          (std::isinf(C[i]) || std::isinf(G[i]) ? C[i] == G[i] : true);
        if (!same && bad++ == 0) first = i;
      }
      summary().mismatches += bad;
      if (bad)
        fail_run(name(c) + " special values",
                 "%llu NaN/inf positions differ; first at %llu, cpu %g, cuda %g",
                 (unsigned long long)bad, (unsigned long long)first, (double)C[first],
                 (double)G[first]);
    }
}

// TF32 off -> on -> off: the last result equals the first bit for bit.
void run_tf32_restore() {
  const Case c{1, 256, 512, 192, false, false, Dist::Uniform, false};
  const std::vector<float> a = th::make(Dist::Uniform, c.m * c.n, 5),
                           b = th::make(Dist::Uniform, c.n * c.p, 6);
  const bool was = tlrt_set_allow_tf32(false);
  Buf x, y, z;
  TH_OK(product(kGpu, a, b, c, x));
  tlrt_set_allow_tf32(true);
  TH_OK(product(kGpu, a, b, c, y));
  tlrt_set_allow_tf32(false);
  TH_OK(product(kGpu, a, b, c, z));
  tlrt_set_allow_tf32(was);
  const std::vector<float> X = th::download(x.get()), Y = th::download(y.get()),
                           Z = th::download(z.get());
  ++summary().runs;
  TH_CHECK_MSG(X.size() == Z.size() && std::equal(X.begin(), X.end(), Z.begin(), th::same_bits),
               "TF32 off -> on -> off changed the float32 result");
  u64 differ = 0;
  for (size_t i = 0; i < X.size() && i < Y.size(); ++i) differ += !th::same_bits(X[i], Y[i]);
  std::printf("tf32: %llu of %zu outputs change when TF32 is allowed (256 x 512 x 192)\n",
              (unsigned long long)differ, X.size());
}

// Four threads at once (one cuBLAS handle each) reproduce the single-thread result.
void run_threads() {
  const Case c{8, 96, 200, 72, true, false, Dist::Uniform, false};
  const std::vector<float> a = th::make(Dist::Uniform, c.batch * c.m * c.n, 8),
                           b = th::make(Dist::Uniform, c.batch * c.n * c.p, 9);
  Buf ref;
  TH_OK(product(kGpu, a, b, c, ref));
  const std::vector<float> R = th::download(ref.get());
  std::vector<int> same(4, 0);
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; ++t)
    ts.emplace_back([&, t] {
      int ok = 1;
      for (int r = 0; r < 8; ++r) {
        Buf out;
        if (product(kGpu, a, b, c, out) != TLRT_OK) {
          ok = 0;
          continue;
        }
        std::vector<float> O(R.size());
        ok &= tlrt_buffer_to_f32(out.get(), O.data(), O.size()) == TLRT_OK &&
              std::equal(O.begin(), O.end(), R.begin(), th::same_bits);
      }
      same[t] = ok;
    });
  for (auto &t : ts) t.join();
  ++summary().runs;
  TH_CHECK_MSG(same[0] && same[1] && same[2] && same[3],
               "threads: a thread's result differs from the single-thread result");
}

// m > INT_MAX on CUDA is TLRT_ERR_INVALID_ARGUMENT (a is (2^31, 1): 8 GiB; skipped when
// TLRT_PARITY_MAX_N is below that or the memory is not there).
void run_int_limit() {
#ifndef TLRT_PARITY_SELFTEST
  const u64 m = (u64)INT_MAX + 1;
  if (m > max_n()) {
    ++g_skipped;
    return;
  }
  Buf A, B, C;
  if (tlrt_buffer_full(kGpu, m, 1.0, A.out()) != TLRT_OK) {
    std::printf("int limit: skipped (%s)\n", tlrt_last_error());
    ++g_skipped;
    return;
  }
  TH_OK(tlrt_buffer_full(kGpu, 1, 2.0, B.out()));
  TH_STATUS(tlrt_matmul(A.get(), B.get(), m, 1, 1, false, false, C.out()),
            TLRT_ERR_INVALID_ARGUMENT);
  TH_CHECK(C.get() == nullptr);
  // The same on the CPU works (no int limit there) when it has the memory: not run here.
#endif
}

}  // namespace

int main() {
  if (!parity::start("parity_blas")) return 77;
  std::vector<Case> cases;
  auto add4 = [&](u64 batch, u64 m, u64 n, u64 p, Dist d) {
    for (int f = 0; f < 4; ++f)
      cases.push_back({batch, m, n, p, (f & 1) != 0, (f & 2) != 0, d, false});
  };
  // Square, powers of two and odd.
  for (u64 s : {1, 2, 3, 7, 16, 31, 32, 33, 64, 127, 128, 129, 255, 256, 257, 511, 512, 1000})
    add4(1, s, s, s, Dist::Uniform);
  // Tall, wide, skinny (matrix-vector both ways, outer products, dots).
  add4(1, 4096, 64, 64, Dist::Uniform);
  add4(1, 64, 64, 4096, Dist::Uniform);
  add4(1, 4096, 4096, 1, Dist::Uniform);
  add4(1, 1, 4096, 4096, Dist::Uniform);
  add4(1, 1000, 1, 1000, Dist::Uniform);
  add4(1, 1, 100000, 1, Dist::Uniform);
  add4(1, 3, 5000, 7, Dist::Uniform);
  add4(1, 300, 20000, 2, Dist::Uniform);
  // Batched.
  add4(16, 33, 65, 17, Dist::Uniform);
  add4(1000, 8, 8, 8, Dist::Uniform);
  add4(100000, 2, 3, 2, Dist::Uniform);
  add4(3, 1, 1, 1, Dist::Uniform);
  add4(64, 512, 512, 512, Dist::Uniform);
  // Other distributions.
  add4(1, 200, 300, 100, Dist::Positive);
  add4(4, 100, 700, 50, Dist::Wide);
  // Degenerate n == 0.
  add4(2, 3, 0, 5, Dist::Uniform);
  add4(1, 1024, 0, 1024, Dist::Uniform);
  // The big one.
  cases.push_back({1, 4096, 4096, 4096, false, false, Dist::Uniform, false});
  cases.push_back({1, 4096, 4096, 4096, true, true, Dist::Uniform, false});
  // TF32 allowed.
  for (const Case &c : {Case{1, 256, 512, 192, false, false, Dist::Uniform, true},
                        Case{8, 128, 1024, 64, true, false, Dist::Uniform, true},
                        Case{1, 2048, 2048, 2048, false, true, Dist::Uniform, true}})
    cases.push_back(c);
  for (const Case &c : cases) run_case(c);
  run_empty();
  run_special();
  run_tf32_restore();
  run_threads();
  run_int_limit();
  std::printf("largest |C - exact| / (n u sum|a||b|): cpu %.3g, cuda %.3g, cuda with tf32 %.3g "
              "(tf32 bound: 2^-9 / (n u) + 2); |cpu - cuda| / (n u S): %.3g; %llu cases skipped "
              "(TLRT_PARITY_MAX_N)\n",
              g_worst.cpu, g_worst.gpu, g_worst.gpu_tf32, g_worst.cross,
              (unsigned long long)g_skipped);
  parity::print_summary("parity_blas");
  return th::finish("parity_blas");
}
