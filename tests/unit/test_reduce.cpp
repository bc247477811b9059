// Known answers and the exact reduction tree for every op of abi/tlrt_reduce.h on the CPU backend.
//
// The tree of the header is re-implemented here independently and literally (ref_tree: every
// chunk materialises all 256 lanes, lane-major loops, a fresh vector per level, max written from
// the header's words) and every result is compared with it BIT FOR BIT (NaN payloads aside):
//  - whole sum / mean / max (through max_axis1 with one row) on sizes 0, 1, 2, 3, 31, 32, 33, 255,
//    256, 257, 4095, 4096, 4097, 2^k and 2^k + 1 up to 2^20, 65537, 1000003 and 2^24 + 3, with
//    uniform, wide-exponent (order-sensitive), random-bit (NaN/inf/subnormal) and edge-sprinkled
//    inputs; the same sums through every other entry point that can express them (axis sums
//    with a unit dimension, reduce_sum_axis of rank 1, reduce_from_broadcast from a scalar);
//  - accuracy against a long double sum: |s - exact| <= g(23 L) * sum |x|, g(k) = k u / (1 - k u),
//    u = 2^-24, L = levels of the tree (the header's bound);
//  - upstream's large-magnitude case: 1e8 followed by 4095 ones sums to exactly 100004080 (1e8
//    last: 100004096), identical over repeated calls and with the determinism switch on and off;
//  - known answers and special values: +-0 (all -0 sums to -0, empty sums to +0), +-inf, NaN in
//    sums and max, max's -0 < +0, empty max = -inf, empty mean = NaN, mean = S / (float)n also
//    for n > 2^24 (n rounded to float32);
//  - sum/max over axis 0 and 1 for (rows, cols) shapes with 0s, 1s, chunk and tile boundaries;
//  - reduce_sum_axis for ranks 1..8 and every axis against a naive gather + ref_tree;
//  - reduce_from_broadcast against an explicit loop (each dout element appended to the sequence
//    of the input element it broadcasts from, in flat order, then ref_tree) for scalar -> any,
//    vector -> rows/cols, inserted axes, size-1 axes, permutations, multi-chunk sequences,
//    empty dout; and the validation errors;
//  - nothing leaks (allocator telemetry back to its start).
// Under valgrind (TLRT_UNDER_VALGRIND) sizes above 2^17 are skipped.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "harness.hpp"

namespace {

using th::Buf;

const float kInf = INFINITY;
const float kNaN = NAN;

uint64_t size_cap() { return th::under_valgrind() ? (uint64_t{1} << 17) : (uint64_t{1} << 25); }

// ---- the reference tree -----------------------------------------------------------------------

enum class K { Sum, Max };

// IEEE 754-2019 maximum as the header states it: NaN if either is NaN, -0 < +0.
float ref_max(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return kNaN;
  if (a == b) return std::signbit(a) ? b : a;
  return a > b ? a : b;
}

float ref_op(K k, float a, float b) { return k == K::Sum ? a + b : ref_max(a, b); }
float ref_identity(K k) { return k == K::Sum ? -0.0f : -kInf; }

// THE TREE of abi/tlrt_reduce.h, steps 1-4, for m >= 1 (the empty cases are the callers').
float ref_tree(K k, std::vector<float> v) {
  do {
    std::vector<float> next;
    for (size_t c0 = 0; c0 < v.size(); c0 += 4096) {
      float lane[256];
      for (size_t t = 0; t < 256; ++t) {
        float a = ref_identity(k);
        for (size_t r = 0; r < 16; ++r) {
          const size_t i = c0 + t + 256 * r;
          if (i >= v.size()) break;
          a = ref_op(k, a, v[i]);
        }
        lane[t] = a;
      }
      for (size_t h = 128; h >= 1; h /= 2)
        for (size_t t = 0; t < h; ++t) lane[t] = ref_op(k, lane[t], lane[t + h]);
      next.push_back(lane[0]);
    }
    v.swap(next);
  } while (v.size() > 1);
  return v[0];
}

float ref_sum(const std::vector<float> &v) { return v.empty() ? 0.0f : ref_tree(K::Sum, v); }
float ref_maxall(const std::vector<float> &v) { return v.empty() ? -kInf : ref_tree(K::Max, v); }
float ref_mean(const std::vector<float> &v) {
  return v.empty() ? kNaN : ref_sum(v) / (float)(uint64_t)v.size();
}

// Levels of the tree for m elements (1 for m <= 4096).
int levels(uint64_t m) {
  int L = 1;
  while (m > 4096) {
    m = (m + 4095) / 4096;
    ++L;
  }
  return L;
}

// ---- calling the library ------------------------------------------------------------------------

using th::Dist;
using th::dist_name;
using th::hex;
using th::make;

// Runs call(x_handle, &out) on the CPU; returns the downloaded output (empty on failure).
std::vector<float> call(const std::vector<float> &x,
                        const std::function<tlrt_status(const tlrt_buffer *, tlrt_buffer **)> &f,
                        uint64_t want_n, const char *what) {
  Buf bx(th::upload(x));
  Buf y;
  const tlrt_status s = f(bx.get(), y.out());
  TH_CHECK_MSG(s == TLRT_OK, "%s failed: %s", what, tlrt_last_error());
  if (s != TLRT_OK) return {};
  std::vector<float> out = th::download(y.get());
  TH_CHECK_MSG(out.size() == want_n, "%s: %zu outputs, expected %llu", what, out.size(),
               (unsigned long long)want_n);
  return out;
}

float scalar(const std::vector<float> &x,
             tlrt_status (*f)(const tlrt_buffer *, tlrt_buffer **), const char *what) {
  const std::vector<float> r = call(x, f, 1, what);
  return r.empty() ? kNaN : r[0];
}

void expect_same(float got, float want, const std::string &what) {
  TH_CHECK_MSG(th::same_bits(got, want), "%s: got %s, expected %s", what.c_str(), hex(got).c_str(),
               hex(want).c_str());
}

void expect_all_same(const std::vector<float> &got, const std::vector<float> &want,
                     const std::string &what) {
  ++th::checks();
  if (got.size() != want.size()) {
    th::report(__FILE__, __LINE__, what + ": size differs");
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

std::vector<uint64_t> tree_sizes() {
  std::vector<uint64_t> s = {0, 1, 2, 3, 5, 31, 32, 33, 63, 255, 256, 257, 4095, 4096, 4097,
                             8191, 8193, 65537, 131071, 1000003, (uint64_t{1} << 24) + 3};
  for (int k = 1; k <= 20; ++k) {
    s.push_back(uint64_t{1} << k);
    s.push_back((uint64_t{1} << k) + 1);
  }
  std::sort(s.begin(), s.end());
  s.erase(std::unique(s.begin(), s.end()), s.end());
  std::vector<uint64_t> out;
  for (uint64_t n : s)
    if (n <= size_cap()) out.push_back(n);
  return out;
}

// ---- whole-buffer reductions -----------------------------------------------------------------

void check_known_answers() {
  const float nz = -0.0f;
  struct Case {
    std::vector<float> x;
    float sum, max;
  };
  const std::vector<Case> cases = {
      {{}, 0.0f, -kInf},
      {{1.0f}, 1.0f, 1.0f},
      {{1.0f, 2.0f, 3.0f}, 6.0f, 3.0f},
      {{nz}, nz, nz},
      {{nz, nz, nz}, nz, nz},
      {{0.0f}, 0.0f, 0.0f},
      {{nz, 0.0f}, 0.0f, 0.0f},
      {{0.0f, nz}, 0.0f, 0.0f},
      {{1.0f, -1.0f}, 0.0f, 1.0f},
      {{kInf, 1.0f}, kInf, kInf},
      {{-kInf, 1.0f}, -kInf, 1.0f},
      {{-kInf}, -kInf, -kInf},
      {{kInf, -kInf}, kNaN, kInf},
      {{1.0f, kNaN, 2.0f}, kNaN, kNaN},
      {{kNaN, kInf}, kNaN, kNaN},
      {{-5.0f, -3.0f, -7.0f}, -15.0f, -3.0f},
      {{3.4028235e38f, 3.4028235e38f}, kInf, 3.4028235e38f},
      {{1e-45f, 1e-45f, 1e-45f}, 4e-45f, 1e-45f},  // subnormals add exactly: 4e-45f is 3 * 2^-149
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case &c = cases[i];
    const std::string w = "known answer #" + std::to_string(i);
    expect_same(scalar(c.x, tlrt_reduce_sum, "tlrt_reduce_sum"), c.sum, w + " sum");
    const std::vector<float> mx = call(
        c.x, [&](const tlrt_buffer *b, tlrt_buffer **o) {
          return tlrt_reduce_max_axis1(b, 1, c.x.size(), o);
        }, 1, "tlrt_reduce_max_axis1");
    if (!mx.empty()) expect_same(mx[0], c.max, w + " max");
  }
  // The same without relying on the literal.
  expect_same(scalar({1e-45f, 1e-45f, 1e-45f}, tlrt_reduce_sum, "sum"), 3.0f * 1e-45f,
              "three smallest subnormals");
  // Mean: S / (float)n, one IEEE division; empty -> NaN.
  expect_same(scalar({}, tlrt_reduce_mean, "mean"), kNaN, "mean of empty");
  TH_CHECK(std::isnan(scalar({}, tlrt_reduce_mean, "mean")));
  expect_same(scalar({1.0f, 2.0f, 3.0f, 4.0f}, tlrt_reduce_mean, "mean"), 2.5f, "mean 1..4");
  expect_same(scalar({1.0f, 2.0f, 4.0f}, tlrt_reduce_mean, "mean"), 7.0f / 3.0f, "mean 1,2,4");
  expect_same(scalar({nz}, tlrt_reduce_mean, "mean"), nz, "mean of -0");
  expect_same(scalar({kInf, 1.0f}, tlrt_reduce_mean, "mean"), kInf, "mean with inf");
  expect_same(scalar({kNaN}, tlrt_reduce_mean, "mean"), kNaN, "mean of NaN");
  expect_same(scalar({3.4028235e38f, 3.4028235e38f}, tlrt_reduce_mean, "mean"), kInf,
              "mean whose sum overflows");
}

// Upstream's large-magnitude case and its mirror; repeated calls and both determinism modes.
void check_large_magnitude() {
  std::vector<float> v(4096, 1.0f);
  v[0] = 1e8f;
  const bool initial = tlrt_get_deterministic();
  for (bool det : {false, true, false}) {
    tlrt_set_deterministic(det);
    for (int rep = 0; rep < 3; ++rep) {
      const float s = scalar(v, tlrt_reduce_sum, "sum");
      expect_same(s, 100004080.0f, "1e8 followed by 4095 ones");
      expect_same(s, ref_sum(v), "1e8 followed by 4095 ones (reference)");
    }
  }
  tlrt_set_deterministic(initial);
  // Left to right in float32 every one is lost; the exact sum is 100004095.
  float seq = 0.0f;
  for (float x : v) seq += x;
  TH_CHECK(seq == 1e8f);
  std::vector<float> w(4096, 1.0f);
  w[4095] = 1e8f;
  expect_same(scalar(w, tlrt_reduce_sum, "sum"), 100004096.0f, "4095 ones followed by 1e8");
  expect_same(scalar(w, tlrt_reduce_sum, "sum"), ref_sum(w), "4095 ones then 1e8 (reference)");
  // Larger: 1e8 followed by 2^20 - 1 ones (two levels).
  if (size_cap() >= (uint64_t{1} << 20)) {
    std::vector<float> u(uint64_t{1} << 20, 1.0f);
    u[0] = 1e8f;
    const float s1 = scalar(u, tlrt_reduce_sum, "sum");
    expect_same(s1, ref_sum(u), "1e8 followed by 2^20 - 1 ones");
    tlrt_set_deterministic(!initial);
    expect_same(scalar(u, tlrt_reduce_sum, "sum"), s1, "1e8 + 2^20 - 1 ones, switch flipped");
    tlrt_set_deterministic(initial);
  }
}

// Every size and distribution: sum, mean and max against the reference, bit for bit; the sum
// through every entry point that can express it; accuracy against long double.
void check_tree_sizes() {
  const bool initial = tlrt_get_deterministic();
  for (uint64_t n : tree_sizes()) {
    for (Dist d : {Dist::Uniform, Dist::Wide, Dist::Bits, Dist::Edge, Dist::Positive}) {
      if (n > (uint64_t{1} << 21) && d != Dist::Wide) continue;  // keep the run short
      const std::vector<float> x = make(d, n, n * 7 + (uint64_t)d);
      char w[96];
      std::snprintf(w, sizeof w, "n=%llu %s", (unsigned long long)n, dist_name(d));
      const float want = ref_sum(x);
      Buf bx(th::upload(x));
      auto one = [&](const char *fn, tlrt_status s, Buf &y) {
        TH_CHECK_MSG(s == TLRT_OK, "%s %s failed: %s", w, fn, tlrt_last_error());
        const std::vector<float> r = s == TLRT_OK ? th::download(y.get()) : std::vector<float>{};
        return r.size() == 1 ? r[0] : -12345.0f;
      };
      Buf y;
      const float s = one("sum", tlrt_reduce_sum(bx.get(), y.out()), y);
      expect_same(s, want, std::string(w) + " sum");
      // Identical with the determinism switch flipped.
      tlrt_set_deterministic(!initial);
      expect_same(one("sum", tlrt_reduce_sum(bx.get(), y.out()), y), s,
                  std::string(w) + " sum (switch flipped)");
      tlrt_set_deterministic(initial);
      expect_same(one("axis1", tlrt_reduce_sum_axis1(bx.get(), 1, n, y.out()), y), want,
                  std::string(w) + " sum_axis1 (1, n)");
      expect_same(one("axis0", tlrt_reduce_sum_axis0(bx.get(), n, 1, y.out()), y), want,
                  std::string(w) + " sum_axis0 (n, 1)");
      const uint64_t dn[1] = {n};
      expect_same(one("axis", tlrt_reduce_sum_axis(bx.get(), dn, 1, 0, y.out()), y), want,
                  std::string(w) + " sum_axis rank 1");
      const uint64_t d3[3] = {1, n, 1};
      expect_same(one("axis", tlrt_reduce_sum_axis(bx.get(), d3, 3, 1, y.out()), y), want,
                  std::string(w) + " sum_axis (1, n, 1)");
      const uint32_t map0[1] = {0};
      expect_same(one("bcast", tlrt_reduce_from_broadcast(bx.get(), nullptr, 0, dn, 1, map0,
                                                          y.out()), y),
                  want, std::string(w) + " from_broadcast scalar <- (n)");
      expect_same(one("mean", tlrt_reduce_mean(bx.get(), y.out()), y), ref_mean(x),
                  std::string(w) + " mean");
      const float mx = ref_maxall(x);
      expect_same(one("max1", tlrt_reduce_max_axis1(bx.get(), 1, n, y.out()), y), mx,
                  std::string(w) + " max_axis1 (1, n)");
      expect_same(one("max0", tlrt_reduce_max_axis0(bx.get(), n, 1, y.out()), y), mx,
                  std::string(w) + " max_axis0 (n, 1)");
      // Accuracy of finite sums: the header's bound g(23 L) * sum |x|.
      if (d != Dist::Bits && d != Dist::Edge && n > 0) {
        long double exact = 0, abs_sum = 0;
        for (float v : x) {
          exact += v;
          abs_sum += std::fabs((long double)v);
        }
        const double u = std::ldexp(1.0, -24);
        const double k = 23.0 * levels(n);
        const long double bound = (long double)(k * u / (1 - k * u)) * abs_sum;
        const long double err = std::fabs((long double)s - exact);
        TH_CHECK_MSG(err <= bound, "%s: |sum - exact| = %Lg exceeds the bound %Lg", w, err, bound);
      }
    }
  }
  // Mean for n > 2^24: the divisor is n rounded to float32 (2^24 + 1 -> 2^24).
  if (size_cap() >= (uint64_t{1} << 24) + 3) {
    const uint64_t n = (uint64_t{1} << 24) + 1;
    const std::vector<float> x = make(Dist::Positive, n, 99);
    expect_same(scalar(x, tlrt_reduce_mean, "mean"), ref_sum(x) / 16777216.0f,
                "mean of 2^24 + 1 values divides by 2^24");
  }
}

// ---- axis 0 / axis 1 ------------------------------------------------------------------------------

void check_matrices() {
  struct Shape {
    uint64_t rows, cols;
  };
  std::vector<Shape> shapes;
  const uint64_t dims[] = {0, 1, 2, 3, 31, 32, 33, 127, 128, 129, 256, 257};
  for (uint64_t r : dims)
    for (uint64_t c : dims) shapes.push_back({r, c});
  for (Shape s : {Shape{4095, 3}, Shape{4096, 2}, Shape{4097, 5}, Shape{5000, 3}, Shape{3, 5000},
                  Shape{9000, 40}, Shape{40, 9000}, Shape{4097, 130}, Shape{8193, 33},
                  Shape{2, (uint64_t{1} << 17) + 1}, Shape{(uint64_t{1} << 17) + 1, 2},
                  Shape{2000, 40}, Shape{1500, 20}, Shape{3000, 17}, Shape{300, 1030},
                  Shape{4500, 16}, Shape{4500, 17}})
    shapes.push_back(s);
  uint64_t salt = 1000;
  for (const Shape &s : shapes) {
    for (Dist d : {Dist::Wide, Dist::Edge}) {
      const std::vector<float> x = make(d, s.rows * s.cols, ++salt);
      std::vector<float> col_sum(s.cols), col_max(s.cols), row_sum(s.rows), row_max(s.rows);
      for (uint64_t j = 0; j < s.cols; ++j) {
        std::vector<float> seq(s.rows);
        for (uint64_t i = 0; i < s.rows; ++i) seq[i] = x[i * s.cols + j];
        col_sum[j] = ref_sum(seq);
        col_max[j] = ref_maxall(seq);
      }
      for (uint64_t i = 0; i < s.rows; ++i) {
        std::vector<float> seq(x.begin() + i * s.cols, x.begin() + (i + 1) * s.cols);
        row_sum[i] = ref_sum(seq);
        row_max[i] = ref_maxall(seq);
      }
      char w[96];
      std::snprintf(w, sizeof w, "(%llu, %llu) %s", (unsigned long long)s.rows,
                    (unsigned long long)s.cols, dist_name(d));
      const uint64_t R = s.rows, C = s.cols;
      expect_all_same(call(x, [&](const tlrt_buffer *b, tlrt_buffer **o) {
                        return tlrt_reduce_sum_axis0(b, R, C, o);
                      }, C, "sum_axis0"),
                      col_sum, std::string(w) + " sum_axis0");
      expect_all_same(call(x, [&](const tlrt_buffer *b, tlrt_buffer **o) {
                        return tlrt_reduce_sum_axis1(b, R, C, o);
                      }, R, "sum_axis1"),
                      row_sum, std::string(w) + " sum_axis1");
      expect_all_same(call(x, [&](const tlrt_buffer *b, tlrt_buffer **o) {
                        return tlrt_reduce_max_axis0(b, R, C, o);
                      }, C, "max_axis0"),
                      col_max, std::string(w) + " max_axis0");
      expect_all_same(call(x, [&](const tlrt_buffer *b, tlrt_buffer **o) {
                        return tlrt_reduce_max_axis1(b, R, C, o);
                      }, R, "max_axis1"),
                      row_max, std::string(w) + " max_axis1");
    }
  }
  // Empty axes, exactly: +0 sums (not -0) and -inf maxima.
  const std::vector<float> none;
  const std::vector<float> z = call(none, [](const tlrt_buffer *b, tlrt_buffer **o) {
    return tlrt_reduce_sum_axis0(b, 0, 5, o);
  }, 5, "sum_axis0 (0, 5)");
  expect_all_same(z, std::vector<float>(5, 0.0f), "sum_axis0 of (0, 5) is +0");
  for (float v : z) TH_CHECK(!std::signbit(v));
  expect_all_same(call(none, [](const tlrt_buffer *b, tlrt_buffer **o) {
                    return tlrt_reduce_max_axis1(b, 4, 0, o);
                  }, 4, "max_axis1 (4, 0)"),
                  std::vector<float>(4, -kInf), "max_axis1 of (4, 0) is -inf");
  // Max: NaN in one row only; signed zeros; a row of -inf.
  const std::vector<float> m = {-0.0f, 0.0f,  1.0f,  -1.0f, kNaN, 2.0f,  -0.0f, -0.0f,
                                -kInf, -kInf, -0.0f, -3.0f, 5.0f, 5.0f, 0.0f, -0.0f};
  expect_all_same(call(m, [](const tlrt_buffer *b, tlrt_buffer **o) {
                    return tlrt_reduce_max_axis1(b, 8, 2, o);
                  }, 8, "max_axis1 (8, 2)"),
                  {0.0f, 1.0f, kNaN, -0.0f, -kInf, -0.0f, 5.0f, 0.0f}, "max_axis1 known answers");
  expect_all_same(call(m, [](const tlrt_buffer *b, tlrt_buffer **o) {
                    return tlrt_reduce_max_axis0(b, 8, 2, o);
                  }, 2, "max_axis0 (8, 2)"),
                  {kNaN, 5.0f}, "max_axis0: NaN in column 0 only");
  expect_all_same(call({1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f}, [](const tlrt_buffer *b,
                                                                tlrt_buffer **o) {
                    return tlrt_reduce_sum_axis0(b, 2, 3, o);
                  }, 3, "sum_axis0 (2, 3)"),
                  {5.0f, 7.0f, 9.0f}, "sum_axis0 known answer");
  expect_all_same(call({1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 6.0f}, [](const tlrt_buffer *b,
                                                                tlrt_buffer **o) {
                    return tlrt_reduce_sum_axis1(b, 2, 3, o);
                  }, 2, "sum_axis1 (2, 3)"),
                  {6.0f, 15.0f}, "sum_axis1 known answer");
}

// ---- reduce_sum_axis ----------------------------------------------------------------------------

// Naive reference: for each output, gather the sequence along `axis` and run ref_tree.
std::vector<float> ref_sum_axis(const std::vector<float> &x, const std::vector<uint64_t> &d,
                                uint32_t axis) {
  uint64_t outer = 1, inner = 1;
  for (uint32_t i = 0; i < axis; ++i) outer *= d[i];
  for (uint32_t i = axis + 1; i < d.size(); ++i) inner *= d[i];
  const uint64_t m = d[axis];
  std::vector<float> y(outer * inner);
  for (uint64_t o = 0; o < outer; ++o)
    for (uint64_t i = 0; i < inner; ++i) {
      std::vector<float> seq(m);
      for (uint64_t j = 0; j < m; ++j) seq[j] = x[(o * m + j) * inner + i];
      y[o * inner + i] = ref_sum(seq);
    }
  return y;
}

void check_sum_axis() {
  th::Rng rng(77);
  std::vector<std::vector<uint64_t>> shapes = {
      {7}, {0}, {1}, {4097}, {3, 4}, {0, 3}, {3, 0}, {1, 1}, {2, 3, 4}, {3, 5000, 2},
      {2, 4097, 3}, {1, 2, 1, 3}, {5, 1, 40, 1}, {2, 2, 2, 2, 2}, {3, 1, 2, 1, 2, 3},
      {2, 3, 1, 2, 3, 1, 2}, {2, 1, 2, 3, 1, 2, 1, 2}, {1, 1, 1, 1, 1, 1, 1, 9000},
      {2, 4500, 20}, {3, 33, 1100},
      {2, 0, 3, 1, 2, 1, 1, 2}};
  // Random shapes of every rank.
  const uint64_t pick[] = {1, 1, 2, 3, 5, 7, 33};
  for (int rank = 1; rank <= 8; ++rank)
    for (int rep = 0; rep < 3; ++rep) {
      std::vector<uint64_t> d(rank);
      uint64_t n = 1;
      for (auto &v : d) {
        v = pick[rng.gen() % 7];
        if (n * v > 200000) v = 1;
        n *= v;
      }
      shapes.push_back(d);
    }
  uint64_t salt = 5000;
  for (const auto &d : shapes) {
    uint64_t n = 1;
    for (uint64_t v : d) n *= v;
    const std::vector<float> x = make(Dist::Wide, n, ++salt);
    for (uint32_t axis = 0; axis < d.size(); ++axis) {
      std::string w = "sum_axis dims (";
      for (size_t i = 0; i < d.size(); ++i) w += (i ? "," : "") + std::to_string(d[i]);
      w += ") axis " + std::to_string(axis);
      const std::vector<float> want = ref_sum_axis(x, d, axis);
      expect_all_same(call(x, [&](const tlrt_buffer *b, tlrt_buffer **o) {
                        return tlrt_reduce_sum_axis(b, d.data(), (uint32_t)d.size(), axis, o);
                      }, want.size(), w.c_str()),
                      want, w);
    }
  }
  // Errors with exact codes (the bad-input suite covers NULLs and released buffers).
  Buf x(th::upload(make(Dist::Uniform, 6, 1)));
  const uint64_t d23[2] = {2, 3}, d32x[2] = {3, 3};
  Buf y;
  TH_STATUS(tlrt_reduce_sum_axis(x.get(), d23, 0, 0, y.out()), TLRT_ERR_INVALID_ARGUMENT);
  TH_STATUS(tlrt_reduce_sum_axis(x.get(), d23, 9, 0, y.out()), TLRT_ERR_INVALID_ARGUMENT);
  TH_STATUS(tlrt_reduce_sum_axis(x.get(), d23, 2, 2, y.out()), TLRT_ERR_INDEX);
  TH_STATUS(tlrt_reduce_sum_axis(x.get(), d32x, 2, 0, y.out()), TLRT_ERR_SHAPE);
  TH_CHECK(y.get() == nullptr);
}

// ---- reduce_from_broadcast --------------------------------------------------------------------

struct Bcast {
  std::vector<uint64_t> in, out;
  std::vector<uint32_t> map;
};

// Explicit loop: every dout element, in flat order, joins the sequence of its input element.
std::vector<float> ref_from_broadcast(const std::vector<float> &dout, const Bcast &c) {
  uint64_t nin = 1;
  for (uint64_t v : c.in) nin *= v;
  std::vector<std::vector<float>> seqs(nin);
  std::vector<uint64_t> b(c.out.size(), 0);
  for (uint64_t f = 0; f < dout.size(); ++f) {
    uint64_t rem = f;
    for (size_t j = c.out.size(); j-- > 0;) {
      b[j] = rem % c.out[j];
      rem /= c.out[j];
    }
    std::vector<uint64_t> a(c.in.size(), 0);
    for (size_t j = 0; j < c.out.size(); ++j)
      if (c.map[j] != 0 && c.in[c.map[j] - 1] == c.out[j]) a[c.map[j] - 1] = b[j];
    uint64_t idx = 0;
    for (size_t k = 0; k < c.in.size(); ++k) idx = idx * c.in[k] + a[k];
    seqs[idx].push_back(dout[f]);
  }
  std::vector<float> y(nin);
  for (uint64_t i = 0; i < nin; ++i) y[i] = ref_sum(seqs[i]);
  return y;
}

void check_from_broadcast() {
  const std::vector<Bcast> cases = {
      {{}, {7}, {0}},                        // scalar -> vector
      {{}, {3, 4}, {0, 0}},                  // scalar -> matrix
      {{}, {2, 3, 4}, {0, 0, 0}},
      {{1}, {5000}, {1}},                    // size-1 vector -> vector (two chunks)
      {{1, 1}, {3, 4}, {1, 2}},
      {{7}, {5000, 7}, {0, 1}},              // vector -> rows (column sums)
      {{1, 7}, {600, 7}, {1, 2}},
      {{5}, {5, 4100}, {1, 0}},              // vector -> columns (row sums)
      {{5, 1}, {5, 9}, {1, 2}},
      {{4, 1}, {4, 5000}, {1, 2}},
      {{3}, {2, 3, 4}, {0, 1, 0}},           // inserted axes on both sides (general gather)
      {{3}, {2, 3, 4100}, {0, 1, 0}},        // ... with multi-chunk sequences
      {{2, 1, 4}, {2, 5, 4}, {1, 2, 3}},     // (K R K)
      {{2, 4}, {2, 5, 4}, {1, 0, 2}},
      {{2, 4}, {2, 50, 4}, {1, 0, 2}},
      {{3}, {1, 3, 1}, {0, 1, 0}},           // only size-1 axes inserted: a copy
      {{3, 4}, {3, 4}, {1, 2}},              // identity
      {{1, 3, 1, 4}, {3, 4}, {2, 4}},        // unmapped size-1 input axes
      {{2, 3}, {3, 2}, {2, 1}},              // a permutation
      {{2, 3}, {3, 5, 2}, {2, 0, 1}},        // permutation plus an inserted axis
      {{2}, {3000, 2, 3}, {0, 1, 0}},        // general gather, 9000-element sequences
      {{2, 1, 3, 1, 2, 1, 1, 2}, {2, 3, 3, 2, 2, 1, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8}},  // rank 8
      {{1, 3}, {0, 3}, {1, 2}},              // empty dout
      {{3}, {0, 3}, {0, 1}},
      {{2, 2}, {2, 3, 2}, {1, 0, 2}},
  };
  uint64_t salt = 9000;
  for (const Bcast &c : cases) {
    uint64_t n = 1;
    for (uint64_t v : c.out) n *= v;
    uint64_t nin = 1;
    for (uint64_t v : c.in) nin *= v;
    std::string w = "from_broadcast in (";
    for (size_t i = 0; i < c.in.size(); ++i) w += (i ? "," : "") + std::to_string(c.in[i]);
    w += ") out (";
    for (size_t i = 0; i < c.out.size(); ++i) w += (i ? "," : "") + std::to_string(c.out[i]);
    w += ") map (";
    for (size_t i = 0; i < c.map.size(); ++i) w += (i ? "," : "") + std::to_string(c.map[i]);
    w += ")";
    for (Dist d : {Dist::Wide, Dist::Edge}) {
      const std::vector<float> dout = make(d, n, ++salt);
      const std::vector<float> want = ref_from_broadcast(dout, c);
      expect_all_same(call(dout, [&](const tlrt_buffer *b, tlrt_buffer **o) {
                        return tlrt_reduce_from_broadcast(
                            b, c.in.empty() ? nullptr : c.in.data(), (uint32_t)c.in.size(),
                            c.out.data(), (uint32_t)c.out.size(), c.map.data(), o);
                      }, nin, w.c_str()),
                      want, w + " " + dist_name(d));
    }
  }
  // Known answer: (2, 3) -> (2, 3) rows summed... a vector of 3 broadcast to (2, 3) and back.
  expect_all_same(call({1.0f, 2.0f, 3.0f, 10.0f, 20.0f, 30.0f}, [](const tlrt_buffer *b,
                                                                    tlrt_buffer **o) {
                    const uint64_t in[1] = {3}, out[2] = {2, 3};
                    const uint32_t map[2] = {0, 1};
                    return tlrt_reduce_from_broadcast(b, in, 1, out, 2, map, o);
                  }, 3, "from_broadcast known answer"),
                  {11.0f, 22.0f, 33.0f}, "from_broadcast (3) <- (2, 3)");
  // Validation, exact codes.
  Buf x(th::upload(make(Dist::Uniform, 6, 3)));
  Buf y;
  const uint64_t in3[1] = {3}, in23[2] = {2, 3}, in32[2] = {3, 2}, out23[2] = {2, 3};
  const uint32_t map01[2] = {0, 1}, map11[2] = {1, 1}, map03[2] = {0, 3}, map00[2] = {0, 0};
  const uint32_t map12[2] = {1, 2};
  TH_STATUS(tlrt_reduce_from_broadcast(x.get(), in3, 1, out23, 2, map01, y.out()), TLRT_OK);
  TH_STATUS(tlrt_reduce_from_broadcast(x.get(), in23, 2, out23, 2, map11, y.out()),
            TLRT_ERR_INVALID_ARGUMENT);  // input axis 0 mapped twice
  TH_STATUS(tlrt_reduce_from_broadcast(x.get(), in3, 1, out23, 2, map03, y.out()),
            TLRT_ERR_INDEX);  // input axis 2 of a rank-1 input
  TH_STATUS(tlrt_reduce_from_broadcast(x.get(), in3, 1, out23, 2, map00, y.out()),
            TLRT_ERR_SHAPE);  // unmapped input axis of size 3
  TH_STATUS(tlrt_reduce_from_broadcast(x.get(), in32, 2, out23, 2, map12, y.out()),
            TLRT_ERR_SHAPE);  // mapped sizes 3 vs 2
  TH_STATUS(tlrt_reduce_from_broadcast(x.get(), in3, 1, in3, 1, map12, y.out()),
            TLRT_ERR_SHAPE);  // dout has 6 elements, out_dims say 3
  TH_CHECK(y.get() == nullptr);
}

}  // namespace

int main() {
  const tlrt_allocator_stats start = th::stats();
  check_known_answers();
  check_large_magnitude();
  check_tree_sizes();
  check_matrices();
  check_sum_axis();
  check_from_broadcast();
  const tlrt_allocator_stats end = th::stats();
  TH_CHECK_MSG(end.live_bytes == start.live_bytes, "live_bytes %llu at start, %llu at end",
               (unsigned long long)start.live_bytes, (unsigned long long)end.live_bytes);
  TH_CHECK_MSG(end.live_handles == start.live_handles, "live_handles %llu at start, %llu at end",
               (unsigned long long)start.live_handles, (unsigned long long)end.live_handles);
  return th::finish("test_reduce");
}
