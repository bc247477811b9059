// Unit tests, matrix products (abi/tlrt_blas.h) on the CPU backend: known answers with every
// transpose combination, batches, the degenerate shapes (0 and 1 dimensions, n == 0 zeros),
// seeded random products against an independent float64 reference with the header's bound
// 2 n u sum_k |A(i, k)| |B(k, j)| over shapes that reach every path of stub/blas.cpp (small
// unpacked, few rows, few columns, packed with partial tiles, several k slices and column panels),
// NaN / infinity propagation (0 * inf = NaN: nothing skipped), signed zeros, the host DGEMM, and
// the TF32 switch with its environment variable.
// The environment cases and the instruction-set variants run as child processes of this test
// (this executable again, with TLRT_BLAS_CHILD set): TORCHLEAN_RT_ALLOW_TF32 is read once per
// process, and TORCHLEAN_RT_GEMM_ISA (stub/blas.cpp, testing aid) caps the CPU kernel at
// "generic" or "x86-64-v3" so that every kernel this machine can run is checked.
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "harness.hpp"

extern char **environ;

namespace {

using u64 = uint64_t;
constexpr double kU32 = 0x1p-24;
constexpr double kU64 = 0x1p-53;

// Logical A (m, n) of batch q from its storage (trans: stored (n, m)).
inline float at_a(const std::vector<float> &a, u64 q, u64 m, u64 n, u64 i, u64 k, bool t) {
  return t ? a[q * m * n + k * m + i] : a[q * m * n + i * n + k];
}
inline float at_b(const std::vector<float> &b, u64 q, u64 n, u64 p, u64 k, u64 j, bool t) {
  return t ? b[q * n * p + j * n + k] : b[q * n * p + k * p + j];
}

// Stores a logical (rows, cols) row-major matrix batch transposed: (batch, cols, rows).
std::vector<float> transpose(const std::vector<float> &x, u64 batch, u64 rows, u64 cols) {
  std::vector<float> y(x.size());
  for (u64 q = 0; q < batch; ++q)
    for (u64 i = 0; i < rows; ++i)
      for (u64 j = 0; j < cols; ++j)
        y[q * rows * cols + j * rows + i] = x[q * rows * cols + i * cols + j];
  return y;
}

struct Result {
  tlrt_status status = TLRT_OK;
  std::vector<float> c;
  u64 size = 0;
};

Result bmm(const std::vector<float> &a, const std::vector<float> &b, u64 batch, u64 m, u64 n,
           u64 p, bool ta, bool tb, bool use_matmul = false) {
  Result r;
  th::Buf A(th::upload(a)), B(th::upload(b)), C;
  r.status = use_matmul ? tlrt_matmul(A.get(), B.get(), m, n, p, ta, tb, C.out())
                        : tlrt_bmm(A.get(), B.get(), batch, m, n, p, ta, tb, C.out());
  if (r.status != TLRT_OK) return r;
  TH_OK(tlrt_buffer_size(C.get(), &r.size));
  r.c = th::download(C.get());
  return r;
}

// ---- known answers -----------------------------------------------------------------------------

void test_known() {
  // A = [[1, 2, 3], [4, 5, 6]] (2 x 3), B = [[7, 8], [9, 10], [11, 12]] (3 x 2).
  const std::vector<float> A = {1, 2, 3, 4, 5, 6}, B = {7, 8, 9, 10, 11, 12};
  const std::vector<float> C = {58, 64, 139, 154};
  for (int f = 0; f < 4; ++f) {
    const bool ta = f & 1, tb = f & 2;
    const std::vector<float> a = ta ? transpose(A, 1, 2, 3) : A;
    const std::vector<float> b = tb ? transpose(B, 1, 3, 2) : B;
    for (int mm = 0; mm < 2; ++mm) {
      Result r = bmm(a, b, 1, 2, 3, 2, ta, tb, mm == 1);
      TH_CHECK_MSG(r.status == TLRT_OK && r.c == C, "known 2x3x2 ta=%d tb=%d matmul=%d", ta, tb,
                   mm);
    }
  }
  // Stored transposes spelled out: trans_a with a = [[1, 4], [2, 5], [3, 6]] is A above.
  {
    Result r = bmm({1, 4, 2, 5, 3, 6}, B, 1, 2, 3, 2, true, false);
    TH_CHECK(r.status == TLRT_OK && r.c == C);
    Result s = bmm(A, {7, 9, 11, 8, 10, 12}, 1, 2, 3, 2, false, true);
    TH_CHECK(s.status == TLRT_OK && s.c == C);
  }
  // Batch of 3: each matrix its own product (identity, scaled, permutation).
  {
    const std::vector<float> a = {1, 0, 0, 1, 2, 0, 0, 2, 0, 1, 1, 0};
    const std::vector<float> b = {1, 2, 3, 4, 1, 2, 3, 4, 1, 2, 3, 4};
    Result r = bmm(a, b, 3, 2, 2, 2, false, false);
    TH_CHECK(r.status == TLRT_OK &&
             r.c == std::vector<float>({1, 2, 3, 4, 2, 4, 6, 8, 3, 4, 1, 2}));
  }
  // Matrix-vector and vector-matrix shapes; outer product (n = 1); dot product (m = p = 1).
  {
    Result mv = bmm({1, 2, 3, 4, 5, 6}, {1, 1, 1}, 1, 2, 3, 1, false, false);
    TH_CHECK(mv.c == std::vector<float>({6, 15}));
    Result vm = bmm({1, 1}, {1, 2, 3, 4, 5, 6}, 1, 1, 2, 3, false, false);
    TH_CHECK(vm.c == std::vector<float>({5, 7, 9}));
    Result outer = bmm({1, 2}, {3, 4, 5}, 1, 2, 1, 3, false, false);
    TH_CHECK(outer.c == std::vector<float>({3, 4, 5, 6, 8, 10}));
    Result dot = bmm({1, 2, 3}, {4, 5, 6}, 1, 1, 3, 1, true, true);
    TH_CHECK(dot.c == std::vector<float>({32}));
  }
}

// ---- degenerate shapes -------------------------------------------------------------------------

void test_degenerate() {
  // batch, m or p == 0: empty output (inputs must still have the stated sizes).
  struct Z {
    u64 batch, m, n, p;
  } zs[] = {{0, 3, 4, 5}, {2, 0, 4, 5}, {2, 3, 4, 0}, {0, 0, 0, 0}, {1, 0, 7, 0}};
  for (const Z &z : zs) {
    Result r = bmm(std::vector<float>(z.batch * z.m * z.n, 1.0f),
                   std::vector<float>(z.batch * z.n * z.p, 1.0f), z.batch, z.m, z.n, z.p, false,
                   true);
    TH_CHECK_MSG(r.status == TLRT_OK && r.size == 0, "empty %llu %llu %llu %llu: %s",
                 (unsigned long long)z.batch, (unsigned long long)z.m, (unsigned long long)z.n,
                 (unsigned long long)z.p, tlrt_last_error());
  }
  // n == 0: batch * m * p zeros, +0 (not -0).
  for (int f = 0; f < 4; ++f) {
    Result r = bmm({}, {}, 2, 3, 0, 5, f & 1, f & 2);
    TH_CHECK(r.status == TLRT_OK && r.size == 30);
    bool all_pos_zero = r.c.size() == 30;
    for (float v : r.c) all_pos_zero = all_pos_zero && th::bits_of(v) == 0;
    TH_CHECK_MSG(all_pos_zero, "n == 0 must give +0 everywhere (flags %d)", f);
  }
  Result mz = bmm({}, {}, 1, 4, 0, 1, false, false, true);
  TH_CHECK(mz.status == TLRT_OK && mz.c == std::vector<float>(4, 0.0f));
  // 1 x 1 x 1.
  Result one = bmm({3}, {-2}, 1, 1, 1, 1, false, false);
  TH_CHECK(one.status == TLRT_OK && one.c == std::vector<float>({-6}));
  // batch of 1 x 1 x 1: elementwise products.
  Result many = bmm({1, 2, 3, 4}, {5, 6, 7, 8}, 4, 1, 1, 1, true, true);
  TH_CHECK(many.c == std::vector<float>({5, 12, 21, 32}));
}

// ---- random products against float64 ------------------------------------------------------------

double g_worst_ratio = 0.0;        // max |C - exact| / (n u S) seen, S = sum |a||b|
double g_worst_ratio_large = 0.0;  // the same over n >= 256

// Checks c against the float64 reference with the bound 2 n u S (+ the smallest subnormal, for
// products that underflow). Returns the number of violations.
u64 check_product(const std::string &what, const std::vector<float> &a,
                  const std::vector<float> &b, const std::vector<float> &c, u64 batch, u64 m,
                  u64 n, u64 p, bool ta, bool tb) {
  u64 bad = 0;
  for (u64 q = 0; q < batch; ++q)
    for (u64 i = 0; i < m; ++i)
      for (u64 j = 0; j < p; ++j) {
        double exact = 0, s = 0;
        for (u64 k = 0; k < n; ++k) {
          const double x = at_a(a, q, m, n, i, k, ta), y = at_b(b, q, n, p, k, j, tb);
          exact += x * y;
          s += std::fabs(x * y);
        }
        const double got = c[q * m * p + i * p + j];
        const double err = std::fabs(got - exact);
        const double bound = 2.0 * (double)n * kU32 * s + 0x1p-149;
        if (s > 0) {
          const double ratio = err / ((double)n * kU32 * s);
          g_worst_ratio = std::max(g_worst_ratio, ratio);
          if (n >= 256) g_worst_ratio_large = std::max(g_worst_ratio_large, ratio);
        }
        if (!(err <= bound)) {
          if (bad == 0)
            TH_CHECK_MSG(false,
                         "%s: C[%llu][%llu][%llu] = %.9g, float64 %.9g, |err| %.3g > bound %.3g",
                         what.c_str(), (unsigned long long)q, (unsigned long long)i,
                         (unsigned long long)j, got, exact, err, bound);
          ++bad;
        }
      }
  ++th::checks();
  return bad;
}

struct Shape {
  u64 batch, m, n, p;
};

void random_case(const Shape &s, bool ta, bool tb, th::Dist dist, u64 salt) {
  const std::vector<float> a = th::make(dist, s.batch * s.m * s.n, salt);
  const std::vector<float> b = th::make(dist, s.batch * s.n * s.p, salt + 1);
  Result r = bmm(a, b, s.batch, s.m, s.n, s.p, ta, tb, s.batch == 1 && (salt & 1));
  char what[160];
  std::snprintf(what, sizeof what, "bmm %llu x (%llu, %llu, %llu) ta=%d tb=%d %s",
                (unsigned long long)s.batch, (unsigned long long)s.m, (unsigned long long)s.n,
                (unsigned long long)s.p, ta, tb, th::dist_name(dist));
  TH_CHECK_MSG(r.status == TLRT_OK, "%s failed: %s", what, tlrt_last_error());
  if (r.status != TLRT_OK) return;
  TH_CHECK_MSG(r.size == s.batch * s.m * s.p, "%s: %llu outputs", what,
               (unsigned long long)r.size);
  check_product(what, a, b, r.c, s.batch, s.m, s.n, s.p, ta, tb);
}

std::vector<Shape> random_shapes() {
  std::vector<Shape> v = {
      // small products (unpacked, <= 32^3 multiply-adds)
      {1, 2, 3, 4}, {5, 7, 5, 3}, {3, 8, 8, 8}, {2, 16, 16, 16}, {1, 32, 32, 32}, {4, 1, 17, 9},
      {1, 31, 1, 33}, {2, 9, 33, 17},
      // few rows (m <= 4), wide B: register chunks, L1 blocks of 1024 columns, tails
      {1, 1, 300, 2100}, {2, 3, 40, 1030}, {1, 4, 513, 77}, {1, 2, 1000, 9},
      // few columns (p <= 8, m > 4): the transposed problem
      {1, 300, 200, 1}, {2, 129, 70, 5}, {1, 1000, 33, 8}, {1, 77, 600, 3},
      // packed: partial tiles, several k slices (n > 256), several row blocks (m > 128)
      {1, 33, 65, 47}, {1, 130, 257, 35}, {2, 67, 300, 129}, {1, 200, 520, 100},
      {3, 64, 64, 64}, {1, 9, 700, 40},
      // several column panels (p > 4096)
      {1, 5, 7, 4133},
  };
  if (!th::under_valgrind()) {
    v.push_back({1, 256, 256, 256});
    v.push_back({1, 300, 1100, 290});
    v.push_back({8, 48, 96, 80});
  }
  return v;
}

void test_random(u64 salt_base) {
  u64 salt = salt_base;
  for (const Shape &s : random_shapes())
    for (int f = 0; f < 4; ++f) random_case(s, f & 1, f & 2, th::Dist::Uniform, ++salt);
  // Other distributions on a few shapes: positive (no cancellation) and wide exponents.
  for (const Shape &s : {Shape{1, 37, 300, 41}, Shape{2, 3, 90, 1100}, Shape{1, 500, 64, 2}})
    for (th::Dist d : {th::Dist::Positive, th::Dist::Wide})
      for (int f = 0; f < 4; ++f) random_case(s, f & 1, f & 2, d, ++salt);
}

// ---- special values ----------------------------------------------------------------------------

// NaN in A row i0 makes C row i0 NaN; inf in B (k0, j0) meets A's zeros: NaN where A(i, k0) == 0,
// +-inf elsewhere in column j0; everything else finite. On every path (small, few rows, few
// columns, packed) and every transpose combination.
void test_special() {
  const Shape shapes[] = {{1, 6, 7, 5}, {1, 3, 40, 2000}, {1, 200, 30, 3}, {1, 70, 300, 90}};
  u64 salt = 900;
  for (const Shape &s : shapes)
    for (int f = 0; f < 4; ++f) {
      const bool ta = f & 1, tb = f & 2;
      const u64 m = s.m, n = s.n, p = s.p;
      // Logical A: entries in [1, 2), a NaN at (i0, k0n), zeros in column k0 at rows zr.
      std::vector<float> A = th::make(th::Dist::Positive, m * n, ++salt);
      std::vector<float> B = th::make(th::Dist::Positive, n * p, ++salt);
      for (float &x : A) x += 1.0f;
      for (float &x : B) x += 1.0f;
      const u64 i0 = m / 2, k0n = n - 1, k0 = 0, j0 = p - 1;
      A[i0 * n + k0n] = NAN;
      std::vector<bool> zero_row(m, false);
      for (u64 i = 0; i < m; i += 3) {
        A[i * n + k0] = (i % 2) ? -0.0f : 0.0f;
        zero_row[i] = true;
      }
      B[k0 * p + j0] = INFINITY;
      const std::vector<float> a = ta ? transpose(A, 1, m, n) : A;
      const std::vector<float> b = tb ? transpose(B, 1, n, p) : B;
      Result r = bmm(a, b, 1, m, n, p, ta, tb);
      TH_CHECK(r.status == TLRT_OK);
      if (r.status != TLRT_OK) continue;
      u64 bad = 0;
      for (u64 i = 0; i < m; ++i)
        for (u64 j = 0; j < p; ++j) {
          const float v = r.c[i * p + j];
          bool ok;
          if (i == i0 || (j == j0 && zero_row[i]))
            ok = std::isnan(v);
          else if (j == j0)
            ok = v == INFINITY;
          else
            ok = std::isfinite(v);
          if (!ok && bad++ == 0)
            TH_CHECK_MSG(false, "special (%llu, %llu, %llu) ta=%d tb=%d: C[%llu][%llu] = %s",
                         (unsigned long long)m, (unsigned long long)n, (unsigned long long)p, ta,
                         tb, (unsigned long long)i, (unsigned long long)j, th::hex(v).c_str());
        }
      ++th::checks();
    }
  // Signed zeros: every product -0 gives -0 on the CPU (the accumulator starts at -0), +0 when
  // any product is +0; a zero row times finite values gives zeros.
  for (const Shape &s : {Shape{1, 2, 3, 2}, Shape{1, 2, 300, 1500}, Shape{1, 40, 300, 2},
                         Shape{1, 40, 600, 40}}) {
    std::vector<float> a(s.m * s.n, -0.0f), b(s.n * s.p, 1.0f);
    Result r = bmm(a, b, 1, s.m, s.n, s.p, false, false);
    bool all_neg = r.status == TLRT_OK && !r.c.empty();
    for (float v : r.c) all_neg = all_neg && th::bits_of(v) == 0x80000000u;
    TH_CHECK_MSG(all_neg, "-0 * 1 summed must be -0 on the CPU (m=%llu n=%llu p=%llu)",
                 (unsigned long long)s.m, (unsigned long long)s.n, (unsigned long long)s.p);
    b[0] = -1.0f;  // one product is +0 now: (-0) * (-1)
    Result r2 = bmm(a, b, 1, s.m, s.n, s.p, false, false);
    TH_CHECK(r2.status == TLRT_OK && th::bits_of(r2.c[0]) == 0);
  }
  // Subnormal products are kept (no flush to zero): 2^-75 * 2^-75 = 2^-150 rounds to 0 but
  // 2^-70 * 2^-70 = 2^-140 is a subnormal.
  {
    Result r = bmm({0x1p-70f, 0x1p-70f}, {0x1p-70f, 0x1p-70f}, 1, 1, 2, 1, false, false);
    TH_CHECK(r.status == TLRT_OK && r.c[0] == 0x1p-139f);
  }
  // Overflow of an intermediate gives inf.
  {
    Result r = bmm({3e38f, 3e38f}, {2.0f, 2.0f}, 1, 1, 2, 1, false, false);
    TH_CHECK(r.status == TLRT_OK && r.c[0] == INFINITY);
  }
}

// ---- TF32 switch -------------------------------------------------------------------------------

bool env_rule(const char *v) {
  if (v == nullptr || *v == '\0') return false;
  std::string low(v);
  for (char &ch : low) ch = (char)std::tolower((unsigned char)ch);
  return !(low == "0" || low == "false" || low == "off" || low == "no");
}

void test_tf32_switch() {
  const bool initial = tlrt_get_allow_tf32();
  TH_CHECK(initial == env_rule(std::getenv("TORCHLEAN_RT_ALLOW_TF32")));
  TH_CHECK(tlrt_set_allow_tf32(true) == initial);
  TH_CHECK(tlrt_get_allow_tf32());
  TH_CHECK(tlrt_set_allow_tf32(false) == true);
  TH_CHECK(!tlrt_get_allow_tf32());
  // The CPU ignores it: bit-identical results either way.
  const std::vector<float> a = th::make(th::Dist::Uniform, 64 * 96, 77),
                           b = th::make(th::Dist::Uniform, 96 * 80, 78);
  Result off = bmm(a, b, 1, 64, 96, 80, false, true);
  tlrt_set_allow_tf32(true);
  Result on = bmm(a, b, 1, 64, 96, 80, false, true);
  tlrt_set_allow_tf32(initial);
  TH_CHECK(off.status == TLRT_OK && on.status == TLRT_OK &&
           std::equal(off.c.begin(), off.c.end(), on.c.begin(), th::same_bits));
}

// ---- DGEMM -------------------------------------------------------------------------------------

void test_dgemm() {
  {
    const double a[] = {1, 2, 3, 4, 5, 6}, b[] = {7, 8, 9, 10, 11, 12};
    double c[4] = {-1, -1, -1, -1};
    TH_OK(tlrt_dgemm(a, b, 2, 3, 2, c));
    TH_CHECK(c[0] == 58 && c[1] == 64 && c[2] == 139 && c[3] == 154);
  }
  {  // n == 0: zeros (+0); m or p == 0: nothing written; NULL for empty arrays.
    double c[6];
    for (double &x : c) x = -7;
    TH_OK(tlrt_dgemm(nullptr, nullptr, 2, 0, 3, c));
    bool zeros = true;
    for (double x : c) zeros = zeros && x == 0.0 && !std::signbit(x);
    TH_CHECK(zeros);
    const double a[3] = {1, 2, 3};
    double sentinel = 5;
    TH_OK(tlrt_dgemm(a, nullptr, 1, 3, 0, &sentinel));
    TH_OK(tlrt_dgemm(nullptr, a, 0, 3, 1, nullptr));
    TH_CHECK(sentinel == 5);
  }
  {  // overlap
    std::vector<double> buf(16, 1.0);
    TH_STATUS(tlrt_dgemm(buf.data(), buf.data() + 4, 2, 2, 2, buf.data() + 2),
              TLRT_ERR_INVALID_ARGUMENT);
    TH_STATUS(tlrt_dgemm(buf.data(), buf.data() + 4, 2, 2, 2, buf.data() + 6),
              TLRT_ERR_INVALID_ARGUMENT);
    TH_OK(tlrt_dgemm(buf.data(), buf.data() + 4, 2, 2, 2, buf.data() + 8));
  }
  // Random, against a long double reference, bound 2 n u64 S; every path.
  const Shape shapes[] = {{1, 3, 5, 7},   {1, 1, 700, 1100}, {1, 3, 50, 600}, {1, 400, 300, 1},
                          {1, 90, 40, 6}, {1, 37, 290, 41},  {1, 130, 520, 70}, {1, 5, 3, 2050}};
  th::Rng rng(4242);
  double worst = 0;
  for (const Shape &s : shapes) {
    std::vector<double> a(s.m * s.n), b(s.n * s.p), c(s.m * s.p, NAN);
    for (double &x : a) x = std::uniform_real_distribution<double>(-1, 1)(rng.gen);
    for (double &x : b) x = std::uniform_real_distribution<double>(-1, 1)(rng.gen);
    TH_OK(tlrt_dgemm(a.data(), b.data(), s.m, s.n, s.p, c.data()));
    u64 bad = 0;
    for (u64 i = 0; i < s.m; ++i)
      for (u64 j = 0; j < s.p; ++j) {
        long double exact = 0, sum = 0;
        for (u64 k = 0; k < s.n; ++k) {
          const long double t = (long double)a[i * s.n + k] * b[k * s.p + j];
          exact += t;
          sum += std::fabs(t);
        }
        const double err = (double)std::fabs((long double)c[i * s.p + j] - exact);
        worst = std::max(worst, err / ((double)s.n * kU64 * (double)sum));
        if (!(err <= 2.0 * (double)s.n * kU64 * (double)sum) && bad++ == 0)
          TH_CHECK_MSG(false, "dgemm (%llu, %llu, %llu): c[%llu][%llu] err %.3g",
                       (unsigned long long)s.m, (unsigned long long)s.n, (unsigned long long)s.p,
                       (unsigned long long)i, (unsigned long long)j, err);
      }
    ++th::checks();
  }
  std::printf("dgemm: largest |c - exact| / (n u64 sum|a||b|) = %.3g\n", worst);
  {  // NaN / inf: 0 * inf is NaN.
    const double a[] = {0, 1, NAN, 1}, b[] = {INFINITY, 1, 1, 1};
    double c[4];
    TH_OK(tlrt_dgemm(a, b, 2, 2, 2, c));
    TH_CHECK(std::isnan(c[0]) && c[1] == 1 && std::isnan(c[2]) && std::isnan(c[3]));
  }
}

// ---- threads -----------------------------------------------------------------------------------

// Two threads multiplying at once get the single-threaded results bit for bit.
void test_threads() {
  const std::vector<float> a = th::make(th::Dist::Uniform, 2 * 70 * 90, 31),
                           b = th::make(th::Dist::Uniform, 2 * 90 * 60, 32);
  Result ref = bmm(a, b, 2, 70, 90, 60, true, false);
  std::vector<int> ok(2, 0);
  std::vector<std::thread> ts;
  for (int t = 0; t < 2; ++t)
    ts.emplace_back([&, t] {
      int good = 1;
      for (int r = 0; r < 5; ++r) {
        tlrt_buffer *A = nullptr, *B = nullptr, *C = nullptr;
        if (tlrt_buffer_from_f32(TLRT_DEVICE_CPU, a.data(), a.size(), &A) != TLRT_OK ||
            tlrt_buffer_from_f32(TLRT_DEVICE_CPU, b.data(), b.size(), &B) != TLRT_OK ||
            tlrt_bmm(A, B, 2, 70, 90, 60, true, false, &C) != TLRT_OK) {
          good = 0;
        } else {
          std::vector<float> c(ref.c.size());
          good &= tlrt_buffer_to_f32(C, c.data(), c.size()) == TLRT_OK &&
                  std::equal(c.begin(), c.end(), ref.c.begin(), th::same_bits);
        }
        tlrt_buffer_free(A);
        tlrt_buffer_free(B);
        tlrt_buffer_free(C);
      }
      ok[t] = good;
    });
  for (auto &t : ts) t.join();
  TH_CHECK(ok[0] == 1 && ok[1] == 1);
}

// ---- child processes ---------------------------------------------------------------------------

// Runs this executable with TLRT_BLAS_CHILD=mode and the given variable set (value NULL: unset);
// returns its exit status (-1 if it could not run).
int run_child(const char *mode, const char *var, const char *value, const char *expect) {
  std::vector<std::string> env;
  for (char **e = environ; *e; ++e) {
    const std::string s(*e);
    if (s.rfind(std::string(var) + "=", 0) == 0 || s.rfind("TLRT_BLAS_CHILD=", 0) == 0 ||
        s.rfind("TLRT_BLAS_EXPECT=", 0) == 0)
      continue;
    env.push_back(s);
  }
  env.push_back(std::string("TLRT_BLAS_CHILD=") + mode);
  if (value) env.push_back(std::string(var) + "=" + value);
  if (expect) env.push_back(std::string("TLRT_BLAS_EXPECT=") + expect);
  std::vector<char *> envp;
  for (auto &s : env) envp.push_back(&s[0]);
  envp.push_back(nullptr);
  char self[4096];
  const ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
  if (len <= 0) return -1;
  self[len] = '\0';
  char *argv[] = {self, nullptr};
  pid_t pid;
  if (posix_spawn(&pid, self, nullptr, nullptr, argv, envp.data()) != 0) return -1;
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

void test_children() {
  // TORCHLEAN_RT_ALLOW_TF32: the reading rule of TORCHLEAN_RT_DETERMINISTIC.
  const struct {
    const char *value, *expect;
  } cases[] = {{"1", "1"},  {"true", "1"}, {"YES", "1"},   {"on", "1"},  {"anything", "1"},
               {"0", "0"},  {"off", "0"},  {"False", "0"}, {"no", "0"},  {"", "0"},
               {nullptr, "0"}};
  for (const auto &c : cases) {
    const int rc = run_child("tf32", "TORCHLEAN_RT_ALLOW_TF32", c.value, c.expect);
    TH_CHECK_MSG(rc == 0, "TORCHLEAN_RT_ALLOW_TF32=%s: child exited %d (expected initial %s)",
                 c.value ? c.value : "(unset)", rc, c.expect);
  }
  // Every CPU kernel this machine can run: the random products again with the ISA capped.
  for (const char *isa : {"generic", "x86-64-v3"}) {
    const int rc = run_child("isa", "TORCHLEAN_RT_GEMM_ISA", isa, nullptr);
    TH_CHECK_MSG(rc == 0, "TORCHLEAN_RT_GEMM_ISA=%s: child exited %d", isa, rc);
  }
}

int child_main(const std::string &mode) {
  if (mode == "tf32") {
    const char *e = std::getenv("TLRT_BLAS_EXPECT");
    const bool want = e && std::strcmp(e, "1") == 0;
    return tlrt_get_allow_tf32() == want ? 0 : 1;
  }
  if (mode == "isa") {
    test_known();
    test_degenerate();
    test_random(5000);
    test_special();
    test_dgemm();
    return th::finish("test_blas (child, TORCHLEAN_RT_GEMM_ISA capped)");
  }
  return 2;
}

}  // namespace

int main() {
  if (const char *mode = std::getenv("TLRT_BLAS_CHILD")) return child_main(mode);
  test_known();
  test_degenerate();
  test_random(1000);
  std::printf("bmm: largest |C - exact| / (n u sum|a||b|) = %.3g (n >= 256: %.3g)\n",
              g_worst_ratio, g_worst_ratio_large);
  test_special();
  test_tf32_switch();
  test_dgemm();
  test_threads();
  test_children();
  return th::finish("test_blas");
}
