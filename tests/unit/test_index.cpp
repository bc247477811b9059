// Known answers, the index rule and the scatter-add order for every entry point of
// abi/tlrt_index.h on the CPU backend.
//
// The scatter-add order of the header (out[t] = x[t] + THE TREE over the values scattered to t,
// in increasing position j) is re-implemented here independently and literally: ref_tree
// materialises every chunk's 256 lanes (lane-major, identity -0 first), halves them, and reduces
// chunk values level by level; ref_scatter groups the entries by target with a std::map and
// builds each target's sequence column by column. Results are compared with it BIT FOR BIT
// (NaN payloads aside; gathers, which are copies, bit for bit including NaN payloads):
//  - known answers for all five functions, including the order (L = 3: x + ((v1 + v3) + v2),
//    which differs from the fold: 1, 2^24, 1 sums to 2^24 + 2, the fold gives 2^24);
//  - the index rule for all five: an entry >= 2^60 (2^60, UINT64_MAX, (uint64_t)-5) fails with
//    TLRT_ERR_INDEX naming idx (or i) and giving the position and the value, also late in a long
//    list and when the output is empty; 2^60 - 1 is accepted as out of range (zeros / skipped /
//    a plain copy for scatter_add_row);
//  - segment lengths 1..5000 (1, 2^k, 2^k + 1, 2^k - 1, primes, 4095..4097, 4999, 5000: short,
//    halving, chunk and multi-chunk trees), interleaved at random positions with out-of-range
//    entries, for cols 1, 3, 4, 33 and 1030 (the column tiles of the CPU backend), wide-exponent
//    values (any change of order changes bits), and random bit patterns (NaN, inf, subnormals);
//  - random lists with many duplicates (dense counting-sort plans) and lists over 2^20 targets
//    (radix-sort plans: std::sort below 2048 entries, above it an 11-bit MSD pass and in-bucket
//    passes of <= 8-bit digits, one or two of them, insertion sort for buckets of <= 32);
//  - -0 preservation (an untouched -0 stays -0, a NaN payload of x is kept bit for bit), NaN and
//    +-inf in vals, k == 0 with idx == NULL, cols == 0, n == 0 / rows == 0, size 1 everything;
//  - consistency: a scatter-add of one target from +0 equals tlrt_reduce_sum of the same values;
//    tlrt_scatter_add_row == tlrt_scatter_add_rows with k == 1; the determinism switch changes
//    nothing; the index list may be changed after the call; nothing leaks.
// Index buffers (the _ibuf variants, int32 and int64, and tlrt_index_flat_rows): known answers;
// results BIT FOR BIT equal to the host-list functions for the same entries (random shapes,
// k = 0 and 1, rows = 1, cols 1, 3, 4, 1024, hot targets of 33 to 5000 entries), an entry that is
// not an index (negative; int64 >= 2^60) read as +0.0f / skipped like an out-of-range one, and
// tlrt_index_faults counting exactly those entries (also where the output is empty; reset = false
// does not reset); NULL x / mat equal to an explicit +0 base bit for bit (+0 + -0 = +0).
// Under valgrind (TLRT_UNDER_VALGRIND) the largest cases are skipped.
#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <map>
#include <numeric>
#include <string>
#include <vector>

#include "harness.hpp"
#include "index_buffers.hpp"

namespace {

using th::Buf;
using th::Dist;
using th::hex;
using th::make;

const float kInf = INFINITY;
const float kNaN = NAN;
const uint64_t k60 = uint64_t{1} << 60;

// ---- the reference ---------------------------------------------------------------------------

// THE TREE of abi/tlrt_reduce.h for sums, m >= 1, steps 1-4 literally.
float ref_tree(std::vector<float> v) {
  do {
    std::vector<float> next;
    for (size_t c0 = 0; c0 < v.size(); c0 += 4096) {
      float lane[256];
      for (size_t t = 0; t < 256; ++t) {
        float a = -0.0f;
        for (size_t r = 0; r < 16; ++r) {
          const size_t i = c0 + t + 256 * r;
          if (i < v.size() && i < c0 + 4096) a = a + v[i];
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

// The header's scatter-add: x (rows, cols), vals (k, cols), entries >= rows skipped.
std::vector<float> ref_scatter(const std::vector<float> &x, const std::vector<float> &vals,
                               uint64_t rows, uint64_t cols, const std::vector<uint64_t> &idx) {
  std::map<uint64_t, std::vector<uint64_t>> by_target;
  for (uint64_t j = 0; j < idx.size(); ++j)
    if (idx[j] < rows) by_target[idx[j]].push_back(j);
  std::vector<float> out = x;
  for (const auto &kv : by_target)
    for (uint64_t c = 0; c < cols; ++c) {
      std::vector<float> seq;
      for (uint64_t j : kv.second) seq.push_back(vals[j * cols + c]);
      out[kv.first * cols + c] = x[kv.first * cols + c] + ref_tree(seq);
    }
  return out;
}

std::vector<float> ref_gather(const std::vector<float> &x, uint64_t rows, uint64_t cols,
                              const std::vector<uint64_t> &idx) {
  std::vector<float> out(idx.size() * cols, 0.0f);
  for (uint64_t j = 0; j < idx.size(); ++j)
    if (idx[j] < rows)
      for (uint64_t c = 0; c < cols; ++c) out[j * cols + c] = x[idx[j] * cols + c];
  return out;
}

// ---- comparisons -----------------------------------------------------------------------------

void expect_same(const std::vector<float> &got, const std::vector<float> &want,
                 const std::string &what, bool exact_bits = false) {
  ++th::checks();
  if (got.size() != want.size()) {
    th::report(__FILE__, __LINE__,
               what + ": " + std::to_string(got.size()) + " elements, expected " +
                   std::to_string(want.size()));
    return;
  }
  for (size_t i = 0; i < got.size(); ++i) {
    const bool ok = exact_bits ? th::bits_of(got[i]) == th::bits_of(want[i])
                               : th::same_bits(got[i], want[i]);
    if (!ok) {
      th::report(__FILE__, __LINE__,
                 what + ": element " + std::to_string(i) + " is " + hex(got[i]) + ", expected " +
                     hex(want[i]));
      return;
    }
  }
}

// ---- calling the library ----------------------------------------------------------------------

// Each returns the output (empty vector and a failed check on error).
std::vector<float> finish_call(tlrt_status s, Buf &y, const std::string &what) {
  TH_CHECK_MSG(s == TLRT_OK, "%s failed: %s", what.c_str(), tlrt_last_error());
  if (s != TLRT_OK) return {};
  return th::download(y.get());
}

std::vector<float> gather_vec(const std::vector<float> &v, const std::vector<uint64_t> &idx,
                              const std::string &what) {
  Buf bv(th::upload(v)), y;
  return finish_call(tlrt_gather_vec(bv.get(), v.size(), idx.empty() ? nullptr : idx.data(),
                                     idx.size(), y.out()),
                     y, what);
}

std::vector<float> scatter_add(const std::vector<float> &x, const std::vector<float> &vals,
                               const std::vector<uint64_t> &idx, const std::string &what) {
  Buf bx(th::upload(x)), bv(th::upload(vals)), y;
  return finish_call(tlrt_scatter_add(bx.get(), bv.get(), x.size(),
                                      idx.empty() ? nullptr : idx.data(), idx.size(), y.out()),
                     y, what);
}

std::vector<float> gather_rows(const std::vector<float> &m, uint64_t rows, uint64_t cols,
                               const std::vector<uint64_t> &idx, const std::string &what) {
  Buf bm(th::upload(m)), y;
  return finish_call(tlrt_gather_rows(bm.get(), rows, cols, idx.empty() ? nullptr : idx.data(),
                                      idx.size(), y.out()),
                     y, what);
}

std::vector<float> scatter_add_row(const std::vector<float> &m, const std::vector<float> &row,
                                   uint64_t rows, uint64_t cols, uint64_t i,
                                   const std::string &what) {
  Buf bm(th::upload(m)), br(th::upload(row)), y;
  return finish_call(tlrt_scatter_add_row(bm.get(), br.get(), rows, cols, i, y.out()), y, what);
}

std::vector<float> scatter_add_rows(const std::vector<float> &m, const std::vector<float> &vals,
                                    uint64_t rows, uint64_t cols, const std::vector<uint64_t> &idx,
                                    const std::string &what) {
  Buf bm(th::upload(m)), bv(th::upload(vals)), y;
  return finish_call(tlrt_scatter_add_rows(bm.get(), bv.get(), rows, cols,
                                           idx.empty() ? nullptr : idx.data(), idx.size(),
                                           y.out()),
                     y, what);
}

float f_of_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// ---- known answers --------------------------------------------------------------------------

void check_known_answers() {
  const float nz = -0.0f;
  // gather_vec: out-of-range entries read +0.0f (bits 0).
  expect_same(gather_vec({10, 20, 30}, {2, 0, 5, 1, 2, 3}, "gather_vec"), {30, 10, 0, 20, 30, 0},
              "gather_vec known answer", true);
  expect_same(gather_vec({nz, kNaN}, {0, 1, 2}, "gather_vec"), {nz, kNaN, 0.0f},
              "gather_vec -0 / NaN / oor", true);
  // scatter_add: duplicates accumulate, out-of-range skipped.
  expect_same(scatter_add({1, 2, 3, 4}, {10, 20, 30, 40, 50}, {1, 3, 1, 7, 0}, "scatter_add"),
              {51, 42, 3, 24}, "scatter_add known answer");
  // The order: L = 3 gives x + ((v1 + v3) + v2).
  const float two24 = 16777216.0f;
  expect_same(scatter_add({0.0f}, {1.0f, two24, 1.0f}, {0, 0, 0}, "scatter_add order"),
              {16777218.0f}, "scatter_add: 1, 2^24, 1 sums with the tree to 2^24 + 2");
  {
    float fold = 0.0f;
    for (float v : {1.0f, two24, 1.0f}) fold += v;
    TH_CHECK(fold == two24);  // the sequential fold would lose both ones
  }
  // x is added after the contributions: 2^24 + (1 + 1) vs (2^24 + 1) + 1.
  expect_same(scatter_add({two24}, {1.0f, 1.0f}, {0, 0}, "scatter_add x last"), {16777218.0f},
              "scatter_add: x = 2^24 plus two ones");
  // L = 4: x + ((v1 + v3) + (v2 + v4)).
  expect_same(scatter_add({0.0f}, {two24, 1.0f, -two24, 1.0f}, {0, 0, 0, 0}, "L=4"), {2.0f},
              "scatter_add L = 4 pairs (v1 + v3) and (v2 + v4)");
  // gather_rows: rows of +0 for out-of-range entries.
  expect_same(gather_rows({1, 2, 3, 4, 5, 6}, 3, 2, {2, 9, 0, 2}, "gather_rows"),
              {5, 6, 0, 0, 1, 2, 5, 6}, "gather_rows known answer", true);
  // scatter_add_row: row i added, i out of range -> plain copy.
  expect_same(scatter_add_row({1, 2, 3, 4, 5, 6}, {10, 20, 30}, 2, 3, 1, "scatter_add_row"),
              {1, 2, 3, 14, 25, 36}, "scatter_add_row known answer");
  expect_same(scatter_add_row({1, 2, 3, nz, 5, kNaN}, {10, 20, 30}, 2, 3, 2, "scatter_add_row"),
              {1, 2, 3, nz, 5, kNaN}, "scatter_add_row i = rows: copy", true);
  // scatter_add_rows: duplicates accumulate per column.
  expect_same(scatter_add_rows({1, 2, 3, 4}, {10, 20, 30, 40, 50, 60}, 2, 2, {1, 5, 1},
                               "scatter_add_rows"),
              {1, 2, 3 + (10 + 50), 4 + (20 + 60)}, "scatter_add_rows known answer");
}

// ---- the index rule ---------------------------------------------------------------------------

// A failing call: TLRT_ERR_INDEX, out cleared, the message names the function, the argument with
// its position, and the value.
void expect_index_error(tlrt_status s, tlrt_buffer *out, const char *fn, const std::string &arg,
                        uint64_t value) {
  const std::string msg = tlrt_last_error();
  TH_CHECK_MSG(s == TLRT_ERR_INDEX, "%s: status %s, expected TLRT_ERR_INDEX (%s)", fn,
               tlrt_status_string(s), msg.c_str());
  TH_CHECK_MSG(out == nullptr, "%s: out not cleared", fn);
  if (out != nullptr) tlrt_buffer_free(out);
  TH_CHECK_MSG(msg.find(fn) != std::string::npos, "%s: message \"%s\" lacks the function", fn,
               msg.c_str());
  TH_CHECK_MSG(msg.find("argument " + arg) != std::string::npos,
               "%s: message \"%s\" lacks \"argument %s\"", fn, msg.c_str(), arg.c_str());
  TH_CHECK_MSG(msg.find(std::to_string(value)) != std::string::npos,
               "%s: message \"%s\" lacks the value %llu", fn, msg.c_str(),
               (unsigned long long)value);
}

void check_index_rule() {
  Buf v4(th::upload({1, 2, 3, 4})), v3(th::upload({5, 6, 7})), m6(th::upload({1, 2, 3, 4, 5, 6}));
  Buf vals2(th::upload({1, 2})), row3(th::upload({7, 8, 9})), empty(th::upload({}));
  Buf vals9(th::upload(std::vector<float>(9, 1.0f)));
  for (uint64_t bad : {k60, k60 + 1, UINT64_MAX, (uint64_t)-5, uint64_t{1} << 63}) {
    // Position 1 of the list is bad.
    const uint64_t idx[3] = {0, bad, 1};
    const std::string a1 = "idx[1]";
    tlrt_buffer *out = nullptr;
    expect_index_error(tlrt_gather_vec(v4.get(), 4, idx, 3, &out), out, "tlrt_gather_vec", a1, bad);
    out = nullptr;
    expect_index_error(tlrt_scatter_add(v4.get(), v3.get(), 4, idx, 3, &out), out,
                       "tlrt_scatter_add", a1, bad);
    out = nullptr;
    expect_index_error(tlrt_gather_rows(m6.get(), 2, 3, idx, 3, &out), out, "tlrt_gather_rows",
                       a1, bad);
    out = nullptr;
    expect_index_error(tlrt_scatter_add_rows(m6.get(), vals9.get(), 2, 3, idx, 3, &out), out,
                       "tlrt_scatter_add_rows", a1, bad);
    out = nullptr;
    expect_index_error(tlrt_scatter_add_row(m6.get(), row3.get(), 2, 3, bad, &out), out,
                       "tlrt_scatter_add_row", "i", bad);
    // Also when the output is empty (cols == 0): every entry is checked.
    out = nullptr;
    expect_index_error(tlrt_gather_rows(empty.get(), 2, 0, idx, 3, &out), out, "tlrt_gather_rows",
                       a1, bad);
    out = nullptr;
    expect_index_error(tlrt_scatter_add_rows(empty.get(), empty.get(), 2, 0, idx, 3, &out), out,
                       "tlrt_scatter_add_rows", a1, bad);
    out = nullptr;
    expect_index_error(tlrt_scatter_add(empty.get(), v3.get(), 0, idx, 3, &out), out,
                       "tlrt_scatter_add", a1, bad);
    out = nullptr;
    expect_index_error(tlrt_scatter_add_row(empty.get(), empty.get(), 2, 0, bad, &out), out,
                       "tlrt_scatter_add_row", "i", bad);
  }
  // Late in a long list: the first bad position is named.
  {
    std::vector<uint64_t> idx(10000);
    for (uint64_t j = 0; j < idx.size(); ++j) idx[j] = j % 5;
    idx[7777] = UINT64_MAX;
    idx[9000] = k60;
    tlrt_buffer *out = nullptr;
    expect_index_error(tlrt_gather_vec(v4.get(), 4, idx.data(), idx.size(), &out), out,
                       "tlrt_gather_vec", "idx[7777]", UINT64_MAX);
  }
  // 2^60 - 1 is an index (out of range): zeros / skipped / plain copy.
  const uint64_t top = k60 - 1;
  const uint64_t idx[3] = {top, 2, top};
  expect_same(gather_vec({1, 2, 3, 4}, {top, 2, top}, "gather_vec 2^60-1"), {0, 3, 0},
              "gather_vec 2^60 - 1 reads 0", true);
  expect_same(scatter_add({1, 2, 3, 4}, {5, 6, 7}, {top, 2, top}, "scatter_add 2^60-1"),
              {1, 2, 9, 4}, "scatter_add skips 2^60 - 1");
  expect_same(gather_rows({1, 2, 3, 4, 5, 6}, 2, 3, {top, 1, top}, "gather_rows 2^60-1"),
              {0, 0, 0, 4, 5, 6, 0, 0, 0}, "gather_rows 2^60 - 1 reads a zero row", true);
  expect_same(scatter_add_rows({1, 2, 3, 4, 5, 6}, {1, 1, 1, 2, 2, 2, 3, 3, 3}, 2, 3,
                               {top, 1, top}, "scatter_add_rows 2^60-1"),
              {1, 2, 3, 6, 7, 8}, "scatter_add_rows skips 2^60 - 1");
  expect_same(scatter_add_row({1, 2, 3, 4, 5, 6}, {7, 8, 9}, 2, 3, top, "scatter_add_row 2^60-1"),
              {1, 2, 3, 4, 5, 6}, "scatter_add_row i = 2^60 - 1 is a plain copy", true);
  (void)idx;
  // The list is read during the call only: changing it afterwards changes nothing.
  std::vector<uint64_t> list = {3, 1, 3};
  Buf bx(th::upload({1, 2, 3, 4})), bv(th::upload({10, 20, 30})), y;
  TH_OK(tlrt_scatter_add(bx.get(), bv.get(), 4, list.data(), 3, y.out()));
  list.assign(3, 0);
  expect_same(th::download(y.get()), {1, 22, 3, 4 + (10 + 30)}, "list reused after the call");
}

// ---- edge cases -----------------------------------------------------------------------------

void check_edges() {
  const float nz = -0.0f;
  const float payload = f_of_bits(0x7FC01234u);
  // -0 preserved where nothing is scattered; -0 + -0 = -0; -0 + +0 = +0.
  expect_same(scatter_add({nz, nz, nz, nz}, {nz, 0.0f}, {0, 1}, "-0"), {nz, 0.0f, nz, nz},
              "scatter_add -0", true);
  expect_same(scatter_add_rows({nz, nz, nz, nz, nz, nz}, {nz, 0.0f}, 3, 2, {1}, "-0 rows"),
              {nz, nz, nz, 0.0f, nz, nz}, "scatter_add_rows -0", true);
  expect_same(scatter_add_row({nz, nz, nz, nz}, {nz, 0.0f}, 2, 2, 0, "-0 row"), {nz, 0.0f, nz, nz},
              "scatter_add_row -0", true);
  // Several -0 contributions sum to -0 (tree identity -0), added to -0: -0.
  expect_same(scatter_add({nz}, std::vector<float>(100, nz), std::vector<uint64_t>(100, 0), "-0s"),
              {nz}, "scatter_add 100 times -0", true);
  // An untouched NaN keeps its payload; NaN in vals poisons its target only; +inf and -inf: NaN.
  {
    const std::vector<float> r =
        scatter_add({payload, 2, 3, 4}, {kNaN, 5, kInf, -kInf}, {1, 2, 3, 3}, "NaN");
    if (r.size() == 4) {
      TH_CHECK(th::bits_of(r[0]) == 0x7FC01234u);
      TH_CHECK(std::isnan(r[1]));
      TH_CHECK(r[2] == 8.0f);
      TH_CHECK(std::isnan(r[3]));
    }
    const std::vector<float> g = gather_vec({payload}, {0}, "gather NaN payload");
    TH_CHECK(g.size() == 1 && th::bits_of(g[0]) == 0x7FC01234u);
  }
  // Overflow to inf.
  expect_same(scatter_add({3e38f}, {3e38f, 3e38f}, {0, 0}, "overflow"), {kInf},
              "scatter_add overflows to inf");
  // k == 0 (idx NULL): gathers give empty buffers, scatters bit-exact copies.
  expect_same(gather_vec({1, 2}, {}, "gather_vec k=0"), {}, "gather_vec k = 0");
  expect_same(gather_rows({1, 2}, 1, 2, {}, "gather_rows k=0"), {}, "gather_rows k = 0");
  expect_same(scatter_add({payload, nz}, {}, {}, "scatter_add k=0"), {payload, nz},
              "scatter_add k = 0", true);
  expect_same(scatter_add_rows({payload, nz}, {}, 1, 2, {}, "scatter_add_rows k=0"), {payload, nz},
              "scatter_add_rows k = 0", true);
  // cols == 0 and empty matrices.
  expect_same(gather_rows({}, 5, 0, {1, 7}, "gather_rows cols=0"), {}, "gather_rows cols = 0");
  expect_same(scatter_add_rows({}, {}, 5, 0, {1, 7, 1}, "scatter_add_rows cols=0"), {},
              "scatter_add_rows cols = 0");
  expect_same(scatter_add_row({}, {}, 5, 0, 3, "scatter_add_row cols=0"), {},
              "scatter_add_row cols = 0");
  expect_same(scatter_add_row({}, {1, 2}, 0, 2, 0, "scatter_add_row rows=0"), {},
              "scatter_add_row rows = 0");
  // n == 0 / rows == 0: every entry is out of range.
  expect_same(gather_vec({}, {0, 3}, "gather_vec n=0"), {0, 0}, "gather_vec n = 0", true);
  expect_same(scatter_add({}, {1, 2}, {0, 3}, "scatter_add n=0"), {}, "scatter_add n = 0");
  expect_same(gather_rows({}, 0, 3, {0}, "gather_rows rows=0"), {0, 0, 0}, "gather_rows rows = 0",
              true);
  expect_same(scatter_add_rows({}, {1, 2, 3}, 0, 3, {0}, "scatter_add_rows rows=0"), {},
              "scatter_add_rows rows = 0");
  // Size 1 everything.
  expect_same(gather_vec({7}, {0}, "size 1"), {7}, "gather_vec size 1", true);
  expect_same(scatter_add({7}, {1}, {0}, "size 1"), {8}, "scatter_add size 1");
  expect_same(gather_rows({7}, 1, 1, {0}, "size 1"), {7}, "gather_rows size 1", true);
  expect_same(scatter_add_row({7}, {1}, 1, 1, 0, "size 1"), {8}, "scatter_add_row size 1");
  expect_same(scatter_add_rows({7}, {1}, 1, 1, {0}, "size 1"), {8}, "scatter_add_rows size 1");
  // Subnormals add exactly.
  const float sub = 1e-45f;
  expect_same(scatter_add({sub}, {sub, sub}, {0, 0}, "subnormal"), {3 * sub}, "subnormals");
}

// ---- randomized against the reference ----------------------------------------------------------

std::vector<uint64_t> segment_lengths() {
  std::vector<uint64_t> L = {1,   2,   3,    4,    5,    6,    7,    8,    9,    11,   13,
                             15,  16,  17,   31,   32,   33,   63,   64,   65,   97,   127,
                             128, 129, 251,  255,  256,  257,  509,  511,  512,  513,  1021,
                             1023, 1024, 1025, 2039, 2047, 2048, 2049, 4093, 4095, 4096, 4097,
                             4999, 5000};
  if (th::under_valgrind()) L.erase(std::remove_if(L.begin(), L.end(), [](uint64_t l) {
                              return l > 1100 && l != 4097;
                            }), L.end());
  return L;
}

// Targets with the given segment lengths at random rows of a (rows, cols) matrix, entries at
// random positions of the list, plus out-of-range entries (rows .. 2^60 - 1) sprinkled in.
struct Case {
  uint64_t rows, cols;
  std::vector<uint64_t> idx;
  std::vector<float> x, vals;
};

Case make_case(const std::vector<uint64_t> &lengths, uint64_t cols, Dist d, uint64_t salt) {
  th::Rng rng(salt);
  Case c;
  c.cols = cols;
  c.rows = lengths.size() * 2 + 3;
  std::vector<uint64_t> rows_perm(c.rows);
  std::iota(rows_perm.begin(), rows_perm.end(), 0);
  std::shuffle(rows_perm.begin(), rows_perm.end(), rng.gen);
  for (size_t s = 0; s < lengths.size(); ++s)
    for (uint64_t e = 0; e < lengths[s]; ++e) c.idx.push_back(rows_perm[s]);
  const uint64_t oor = c.idx.size() / 50 + 3;
  for (uint64_t e = 0; e < oor; ++e) {
    const uint64_t kinds[4] = {c.rows, c.rows + 1 + rng.gen() % 1000, k60 - 1,
                               c.rows + rng.gen() % (k60 - c.rows)};
    c.idx.push_back(kinds[e % 4]);
  }
  std::shuffle(c.idx.begin(), c.idx.end(), rng.gen);
  c.x = make(d, c.rows * cols, salt + 1);
  c.vals = make(d, c.idx.size() * cols, salt + 2);
  return c;
}

void check_segments() {
  const std::vector<uint64_t> L = segment_lengths();
  uint64_t salt = 1000;
  for (uint64_t cols : {1, 3, 4, 33, 1030}) {
    for (Dist d : {Dist::Wide, Dist::Bits, Dist::Edge}) {
      if (cols == 1030 && d != Dist::Wide) continue;
      std::vector<uint64_t> lens = L;
      if (cols == 1030) lens = {1, 2, 3, 5, 33, 257, 4097};
      if (cols == 1030 && th::under_valgrind()) lens = {1, 3, 33};
      const Case c = make_case(lens, cols, d, ++salt);
      char w[96];
      std::snprintf(w, sizeof w, "segments cols=%llu %s", (unsigned long long)cols,
                    th::dist_name(d));
      const std::vector<float> want = ref_scatter(c.x, c.vals, c.rows, cols, c.idx);
      expect_same(scatter_add_rows(c.x, c.vals, c.rows, cols, c.idx, w), want,
                  std::string(w) + " scatter_add_rows");
      if (cols == 1)
        expect_same(scatter_add(c.x, c.vals, c.idx, w), want, std::string(w) + " scatter_add");
      // The adjoint gathers on the same list.
      expect_same(gather_rows(c.x, c.rows, cols, c.idx, w), ref_gather(c.x, c.rows, cols, c.idx),
                  std::string(w) + " gather_rows", true);
      if (cols == 1)
        expect_same(gather_vec(c.x, c.idx, w), ref_gather(c.x, c.rows, 1, c.idx),
                    std::string(w) + " gather_vec", true);
    }
  }
}

// Random lists: many duplicates over few rows (counting-sort plans), few entries over many rows
// (radix-sort plans, both the std::sort and the LSD branches).
void check_random_lists() {
  struct R {
    uint64_t rows, cols, k, span;  // entries uniform in [0, span)
  };
  std::vector<R> cases = {{1, 1, 1, 1},          {1, 5, 100, 2},      {10, 1, 20000, 12},
                          {1000, 1, 20000, 1100}, {1000, 7, 3000, 1000}, {300, 64, 5000, 310},
                          {50, 1030, 300, 55},   {1u << 20, 1, 100, 1u << 20},
                          {1u << 20, 1, 5000, 1u << 20}, {200000, 2, 3000, 200000},
                          {200000, 2, 3000, 1000}, {(1u << 20) + 7, 1, 30000, 1u << 21},
                          // 24-bit targets: the MSD pass and two in-bucket passes
                          {(1u << 23) + 5, 1, 70000, (1u << 23) + 1000}};
  uint64_t salt = 5000;
  for (const R &r : cases) {
    if (th::under_valgrind() && r.rows * r.cols > (1u << 18)) continue;
    th::Rng rng(++salt);
    std::vector<uint64_t> idx(r.k);
    for (auto &v : idx) v = rng.gen() % r.span;
    for (Dist d : {Dist::Wide, Dist::Bits}) {
      const std::vector<float> x = make(d, r.rows * r.cols, salt * 3);
      const std::vector<float> vals = make(d, r.k * r.cols, salt * 3 + 1);
      char w[128];
      std::snprintf(w, sizeof w, "random (rows %llu, cols %llu, k %llu, span %llu) %s",
                    (unsigned long long)r.rows, (unsigned long long)r.cols,
                    (unsigned long long)r.k, (unsigned long long)r.span, th::dist_name(d));
      const std::vector<float> want = ref_scatter(x, vals, r.rows, r.cols, idx);
      expect_same(scatter_add_rows(x, vals, r.rows, r.cols, idx, w), want,
                  std::string(w) + " scatter_add_rows");
      if (r.cols == 1)
        expect_same(scatter_add(x, vals, idx, w), want, std::string(w) + " scatter_add");
      expect_same(gather_rows(x, r.rows, r.cols, idx, w), ref_gather(x, r.rows, r.cols, idx),
                  std::string(w) + " gather_rows", true);
      // scatter_add_row == scatter_add_rows with k == 1 == the reference.
      const uint64_t i = idx[0];
      const std::vector<float> row(vals.begin(), vals.begin() + r.cols);
      const std::vector<float> one = scatter_add_row(x, row, r.rows, r.cols, i, w);
      expect_same(one, ref_scatter(x, row, r.rows, r.cols, {i}), std::string(w) + " row");
      expect_same(one, scatter_add_rows(x, row, r.rows, r.cols, {i}, w),
                  std::string(w) + " row == rows k=1");
    }
  }
}

// A scatter-add of one target from +0 is the tree sum tlrt_reduce_sum computes.
void check_one_sum() {
  for (uint64_t n : {1, 2, 3, 31, 33, 4096, 4097, 10000, 70000}) {
    if (th::under_valgrind() && n > 10000) continue;
    const std::vector<float> v = make(Dist::Wide, n, n + 17);
    Buf bv(th::upload(v)), s;
    TH_OK(tlrt_reduce_sum(bv.get(), s.out()));
    const std::vector<float> sum = th::download(s.get());
    const std::vector<float> got =
        scatter_add({0.0f, 5.0f}, v, std::vector<uint64_t>(n, 0), "one target");
    TH_CHECK_MSG(got.size() == 2 && sum.size() == 1 && th::same_bits(got[0], sum[0]) &&
                     got[1] == 5.0f,
                 "n=%llu: scatter-add of one target %s, reduce_sum %s", (unsigned long long)n,
                 got.empty() ? "-" : hex(got[0]).c_str(), sum.empty() ? "-" : hex(sum[0]).c_str());
    expect_same(got, {ref_tree(v), 5.0f}, "one target vs ref_tree n=" + std::to_string(n));
  }
}

// The determinism switch changes nothing.
void check_switch() {
  const Case c = make_case({1, 3, 40, 300}, 5, Dist::Wide, 77);
  const bool initial = tlrt_get_deterministic();
  tlrt_set_deterministic(false);
  const std::vector<float> a = scatter_add_rows(c.x, c.vals, c.rows, 5, c.idx, "switch off");
  tlrt_set_deterministic(true);
  const std::vector<float> b = scatter_add_rows(c.x, c.vals, c.rows, 5, c.idx, "switch on");
  tlrt_set_deterministic(initial);
  expect_same(a, b, "scatter_add_rows with the determinism switch on and off", true);
}

// ---- index buffers -------------------------------------------------------------------------------
// The _ibuf variants against the host-list functions (whose order the checks above pin down):
// for int32 and int64 index buffers on the CPU, every result is BIT FOR BIT the host-list result
// for the same values, entries that are not an index (negative; int64 >= 2^60) taken as out of
// range, and tlrt_index_faults counts exactly those entries.

Buf ibuf(const std::vector<int64_t> &v, bool i32) {
  return th::index_buffer(TLRT_DEVICE_CPU, v, i32);
}
using th::count_bad;
using th::host_list_of;
using th::not_an_index;

// The CPU fault counter; reset sets it back to 0 after reading.
uint64_t faults(bool reset) { return th::index_faults(TLRT_DEVICE_CPU, reset); }

void expect_faults(uint64_t want, const std::string &what) {
  const uint64_t got = faults(true);
  TH_CHECK_MSG(got == want, "%s: tlrt_index_faults counted %llu, expected %llu", what.c_str(),
               (unsigned long long)got, (unsigned long long)want);
}

std::vector<float> gather_vec_ibuf(const std::vector<float> &v, const std::vector<int64_t> &idx,
                                   bool i32, const std::string &what) {
  Buf bv(th::upload(v)), bi(ibuf(idx, i32)), y;
  return finish_call(tlrt_gather_vec_ibuf(bv.get(), v.size(), bi.get(), y.out()), y, what);
}

// x == NULL: no base (n zeros).
std::vector<float> scatter_add_ibuf(const std::vector<float> *x, uint64_t n,
                                    const std::vector<float> &vals,
                                    const std::vector<int64_t> &idx, bool i32,
                                    const std::string &what) {
  Buf bx(x ? th::upload(*x) : nullptr), bv(th::upload(vals)), bi(ibuf(idx, i32)), y;
  return finish_call(tlrt_scatter_add_ibuf(bx.get(), bv.get(), n, bi.get(), y.out()), y, what);
}

std::vector<float> gather_rows_ibuf(const std::vector<float> &m, uint64_t rows, uint64_t cols,
                                    const std::vector<int64_t> &idx, bool i32,
                                    const std::string &what) {
  Buf bm(th::upload(m)), bi(ibuf(idx, i32)), y;
  return finish_call(tlrt_gather_rows_ibuf(bm.get(), rows, cols, bi.get(), y.out()), y, what);
}

std::vector<float> scatter_add_rows_ibuf(const std::vector<float> *m, uint64_t rows,
                                         uint64_t cols, const std::vector<float> &vals,
                                         const std::vector<int64_t> &idx, bool i32,
                                         const std::string &what) {
  Buf bm(m ? th::upload(*m) : nullptr), bv(th::upload(vals)), bi(ibuf(idx, i32)), y;
  return finish_call(tlrt_scatter_add_rows_ibuf(bm.get(), bv.get(), rows, cols, bi.get(), y.out()),
                     y, what);
}

std::vector<int64_t> flat_rows(const std::vector<int64_t> &col_idx, bool i32, uint64_t cols,
                               const std::string &what) {
  Buf bi(ibuf(col_idx, i32)), y;
  const tlrt_status s = tlrt_index_flat_rows(bi.get(), cols, y.out());
  TH_CHECK_MSG(s == TLRT_OK, "%s failed: %s", what.c_str(), tlrt_last_error());
  if (s != TLRT_OK) return {};
  tlrt_dtype t = TLRT_DTYPE_F32;
  TH_OK(tlrt_buffer_dtype(y.get(), &t));
  TH_CHECK_MSG(t == TLRT_DTYPE_I64, "%s: output of dtype %d, expected int64", what.c_str(), (int)t);
  uint64_t n = 0;
  TH_OK(tlrt_buffer_size(y.get(), &n));
  std::vector<int64_t> out(n);
  TH_OK(tlrt_buffer_to_i64(y.get(), out.data(), n));
  return out;
}

void check_ibuf_known_answers() {
  const float nz = -0.0f;
  const float payload = f_of_bits(0x7FC01234u);
  const int64_t big = int64_t{1} << 60;
  faults(true);
  for (bool i32 : {false, true}) {
    const std::string ty = i32 ? " int32" : " int64";
    // gather_vec: out of range and not an index read +0.0f (bits 0); not an index is counted.
    std::vector<int64_t> l = {2, 0, 5, -1, 1, 2, INT32_MIN, INT32_MAX};
    if (!i32) l.insert(l.end(), {big, INT64_MAX, INT64_MIN, big - 1, big + 3});
    std::vector<float> want = {30, 10, 0, 0, 20, 30, 0, 0};
    if (!i32) want.insert(want.end(), {0, 0, 0, 0, 0});
    expect_same(gather_vec_ibuf({10, 20, 30}, l, i32, "gather_vec_ibuf" + ty), want,
                "gather_vec_ibuf known answer" + ty, true);
    expect_faults(i32 ? 2 : 6, "gather_vec_ibuf known answer" + ty);
    expect_same(gather_vec_ibuf({nz, payload}, {0, 1, -5, 2}, i32, "gather_vec_ibuf bits" + ty),
                {nz, payload, 0.0f, 0.0f}, "gather_vec_ibuf -0 / NaN payload / +0" + ty, true);
    expect_faults(1, "gather_vec_ibuf bits" + ty);
    // scatter_add: duplicates accumulate, out of range and not an index skipped.
    const std::vector<float> x = {1, 2, 3, 4};
    const std::vector<int64_t> sl = {1, 3, 1, -1, 0, i32 ? INT32_MIN : big};
    const std::vector<float> sv = {10, 20, 30, 40, 50, 60};
    expect_same(scatter_add_ibuf(&x, 4, sv, sl, i32, "scatter_add_ibuf" + ty), {51, 42, 3, 24},
                "scatter_add_ibuf known answer" + ty, true);
    expect_faults(2, "scatter_add_ibuf known answer" + ty);
    expect_same(scatter_add_ibuf(nullptr, 4, sv, sl, i32, "scatter_add_ibuf NULL" + ty),
                {50, 40, 0, 20}, "scatter_add_ibuf NULL x known answer" + ty, true);
    expect_faults(2, "scatter_add_ibuf NULL x known answer" + ty);
    // The order: L = 3 gives x + ((v1 + v3) + v2), x added last.
    const float two24 = 16777216.0f;
    expect_same(scatter_add_ibuf(nullptr, 1, {1.0f, two24, 1.0f}, {0, 0, 0}, i32, "order" + ty),
                {16777218.0f}, "scatter_add_ibuf: 1, 2^24, 1 sums with the tree" + ty, true);
    const std::vector<float> x24 = {two24};
    expect_same(scatter_add_ibuf(&x24, 1, {1.0f, -1.0f, 1.0f}, {0, -3, 0}, i32, "x last" + ty),
                {16777218.0f}, "scatter_add_ibuf: x = 2^24 plus (1 + 1)" + ty, true);
    expect_faults(1, "scatter_add_ibuf x last" + ty);
    // NULL x is +0.0f: +0 + -0 = +0, also for a tree of -0s; an explicit -0 base stays -0.
    expect_same(scatter_add_ibuf(nullptr, 3, {nz, nz, nz}, {1, 2, 2}, i32, "NULL -0" + ty),
                {0.0f, 0.0f, 0.0f}, "scatter_add_ibuf NULL x plus -0" + ty, true);
    const std::vector<float> xnz = {nz, nz, nz};
    expect_same(scatter_add_ibuf(&xnz, 3, {nz, nz, nz}, {1, 2, 2}, i32, "-0 base" + ty),
                {nz, nz, nz}, "scatter_add_ibuf -0 base plus -0" + ty, true);
    // An untouched NaN keeps its payload; NaN in vals poisons its target; +inf and -inf: NaN.
    {
      const std::vector<float> xp = {payload, 2, 3, 4};
      const std::vector<float> r = scatter_add_ibuf(&xp, 4, {kNaN, 5, kInf, -kInf, 9},
                                                    {1, 2, 3, 3, -1}, i32, "NaN" + ty);
      TH_CHECK(r.size() == 4 && th::bits_of(r[0]) == 0x7FC01234u && std::isnan(r[1]) &&
               r[2] == 8.0f && std::isnan(r[3]));
      expect_faults(1, "scatter_add_ibuf NaN" + ty);
    }
    // gather_rows / scatter_add_rows.
    expect_same(gather_rows_ibuf({1, 2, 3, 4, 5, 6}, 3, 2, {2, 9, -1, 0, 2}, i32,
                                 "gather_rows_ibuf" + ty),
                {5, 6, 0, 0, 0, 0, 1, 2, 5, 6}, "gather_rows_ibuf known answer" + ty, true);
    expect_faults(1, "gather_rows_ibuf known answer" + ty);
    const std::vector<float> m4 = {1, 2, 3, 4};
    expect_same(scatter_add_rows_ibuf(&m4, 2, 2, {10, 20, 30, 40, 50, 60, 70, 80}, {1, 5, -2, 1},
                                      i32, "scatter_add_rows_ibuf" + ty),
                {1, 2, 3 + (10 + 70), 4 + (20 + 80)}, "scatter_add_rows_ibuf known answer" + ty,
                true);
    expect_faults(1, "scatter_add_rows_ibuf known answer" + ty);
    expect_same(scatter_add_rows_ibuf(nullptr, 2, 2, {10, 20, 30, 40, 50, 60, 70, 80},
                                      {1, 5, -2, 1}, i32, "scatter_add_rows_ibuf NULL" + ty),
                {0, 0, 10 + 70, 20 + 80}, "scatter_add_rows_ibuf NULL mat known answer" + ty,
                true);
    expect_faults(1, "scatter_add_rows_ibuf NULL mat known answer" + ty);
    // Empty outputs and bound 0: entries that are not an index are still counted.
    expect_same(gather_vec_ibuf({}, {0, -1, 3}, i32, "gather_vec_ibuf n=0" + ty), {0, 0, 0},
                "gather_vec_ibuf n = 0" + ty, true);
    expect_faults(1, "gather_vec_ibuf n = 0" + ty);
    expect_same(scatter_add_ibuf(nullptr, 0, {1, 2}, {-1, 0}, i32, "scatter_add_ibuf n=0" + ty),
                {}, "scatter_add_ibuf n = 0" + ty);
    expect_faults(1, "scatter_add_ibuf n = 0" + ty);
    expect_same(gather_rows_ibuf({}, 5, 0, {1, -7, -1}, i32, "gather_rows_ibuf cols=0" + ty), {},
                "gather_rows_ibuf cols = 0" + ty);
    expect_faults(2, "gather_rows_ibuf cols = 0" + ty);
    expect_same(gather_rows_ibuf({}, 0, 2, {-1, 0}, i32, "gather_rows_ibuf rows=0" + ty),
                {0, 0, 0, 0}, "gather_rows_ibuf rows = 0" + ty, true);
    expect_faults(1, "gather_rows_ibuf rows = 0" + ty);
    expect_same(scatter_add_rows_ibuf(nullptr, 0, 2, {1, 2, 3, 4}, {-1, 0}, i32,
                                      "scatter_add_rows_ibuf rows=0" + ty),
                {}, "scatter_add_rows_ibuf rows = 0" + ty);
    expect_faults(1, "scatter_add_rows_ibuf rows = 0" + ty);
    const std::vector<float> e;
    expect_same(scatter_add_rows_ibuf(&e, 4, 0, {}, {-1, 0, 2}, i32,
                                      "scatter_add_rows_ibuf cols=0" + ty),
                {}, "scatter_add_rows_ibuf cols = 0" + ty);
    expect_faults(1, "scatter_add_rows_ibuf cols = 0" + ty);
    // k == 0: gathers give empty buffers, scatters bit-exact copies (zeros without a base).
    const std::vector<float> xk = {payload, nz};
    expect_same(gather_vec_ibuf({1, 2}, {}, i32, "gather_vec_ibuf k=0" + ty), {},
                "gather_vec_ibuf k = 0" + ty);
    expect_same(scatter_add_ibuf(&xk, 2, {}, {}, i32, "scatter_add_ibuf k=0" + ty), {payload, nz},
                "scatter_add_ibuf k = 0" + ty, true);
    expect_same(scatter_add_ibuf(nullptr, 2, {}, {}, i32, "scatter_add_ibuf k=0 NULL" + ty),
                {0.0f, 0.0f}, "scatter_add_ibuf k = 0 NULL x" + ty, true);
    expect_same(scatter_add_rows_ibuf(&xk, 1, 2, {}, {}, i32, "scatter_add_rows_ibuf k=0" + ty),
                {payload, nz}, "scatter_add_rows_ibuf k = 0" + ty, true);
    expect_same(scatter_add_rows_ibuf(nullptr, 1, 2, {}, {}, i32,
                                      "scatter_add_rows_ibuf k=0 NULL" + ty),
                {0.0f, 0.0f}, "scatter_add_rows_ibuf k = 0 NULL mat" + ty, true);
    expect_same(gather_rows_ibuf({1, 2}, 1, 2, {}, i32, "gather_rows_ibuf k=0" + ty), {},
                "gather_rows_ibuf k = 0" + ty);
    expect_faults(0, "k = 0" + ty);
    // tlrt_index_flat_rows: i * cols + col_idx[i] in range, rows * cols otherwise (counted when
    // outside [0, cols), out of range as well as not an index).
    {
      std::vector<int64_t> c = {2, -1, 0, 4, 3, INT32_MIN, INT32_MAX};
      if (!i32) c.insert(c.end(), {big, INT64_MAX, INT64_MIN, 1});
      const int64_t r = (int64_t)c.size(), oor = r * 4;
      std::vector<int64_t> want_f = {2, oor, 8, oor, 19, oor, oor};
      if (!i32) want_f.insert(want_f.end(), {oor, oor, oor, 41});
      const std::vector<int64_t> got = flat_rows(c, i32, 4, "flat_rows" + ty);
      TH_CHECK_MSG(got == want_f, "tlrt_index_flat_rows known answer%s differs", ty.c_str());
      expect_faults(i32 ? 4 : 7, "tlrt_index_flat_rows known answer" + ty);
      // cols == 0: every entry is outside [0, 0) and gives rows * 0 = 0.
      const std::vector<int64_t> z = flat_rows({0, 1, -1}, i32, 0, "flat_rows cols=0" + ty);
      TH_CHECK_MSG(z == std::vector<int64_t>({0, 0, 0}), "tlrt_index_flat_rows cols = 0%s",
                   ty.c_str());
      expect_faults(3, "tlrt_index_flat_rows cols = 0" + ty);
      TH_CHECK(flat_rows({}, i32, 5, "flat_rows k=0" + ty).empty());
      expect_faults(0, "tlrt_index_flat_rows k = 0" + ty);
      // Through the flat indices, gather_vec_ibuf picks one element per row (out-of-range rows
      // read +0 and are not counted a second time).
      Buf bc(ibuf({1, 5, 0}, i32)), fl, mat(th::upload({1, 2, 3, 4, 5, 6})), y;
      TH_OK(tlrt_index_flat_rows(bc.get(), 2, fl.out()));
      TH_OK(tlrt_gather_vec_ibuf(mat.get(), 6, fl.get(), y.out()));
      expect_same(th::download(y.get()), {2, 0, 5}, "gather through flat_rows" + ty, true);
      expect_faults(1, "gather through flat_rows" + ty);
    }
  }
  // reset == false reads without resetting; faults accumulate over calls.
  {
    Buf v(th::upload({1, 2, 3})), b1(ibuf({-1, 0, -2}, false)), b2(ibuf({-1, 7, 1}, true)), y;
    TH_CHECK(faults(true) == 0);
    TH_OK(tlrt_gather_vec_ibuf(v.get(), 3, b1.get(), y.out()));
    TH_CHECK(faults(false) == 2);
    TH_CHECK(faults(false) == 2);
    TH_OK(tlrt_scatter_add_ibuf(nullptr, v.get(), 3, b2.get(), y.out()));
    TH_CHECK(faults(false) == 3);
    TH_CHECK(faults(true) == 3);
    TH_CHECK(faults(false) == 0);
  }
}

// Random lists for one shape: a hot target with `hot` entries, the rest uniform over the rows,
// with out-of-range entries and entries that are not an index mixed in, shuffled.
std::vector<int64_t> random_ilist(uint64_t rows, uint64_t k, uint64_t hot, bool i32,
                                  uint64_t salt) {
  th::Rng rng(salt);
  std::vector<int64_t> v;
  const int64_t t0 = rows ? (int64_t)(rng.gen() % rows) : 0;
  for (uint64_t j = 0; j < hot && j < k; ++j) v.push_back(t0);
  while (v.size() < k) {
    const uint64_t r = rng.gen() % 20;
    int64_t e;
    if (r < 13 && rows > 0)
      e = (int64_t)(rng.gen() % rows);
    else if (r < 15)  // out of range
      e = i32 ? (int64_t)rows + (int64_t)(rng.gen() % ((uint64_t)INT32_MAX - rows + 1))
              : (int64_t)(rows + rng.gen() % (k60 - rows));
    else if (r == 15)
      e = i32 ? INT32_MAX : (int64_t)(k60 - 1);
    else if (r == 16)  // not an index: negative
      e = -1;
    else if (r == 17)
      e = i32 ? INT32_MIN : INT64_MIN;
    else if (r == 18)
      e = -(int64_t)(rng.gen() % (i32 ? (uint64_t)INT32_MAX : (uint64_t)INT64_MAX)) - 1;
    else  // not an index: int64 >= 2^60
      e = i32 ? -7 : (int64_t)(k60 + rng.gen() % ((uint64_t)INT64_MAX - k60 + 1));
    v.push_back(e);
  }
  std::shuffle(v.begin(), v.end(), rng.gen);
  return v;
}

void check_ibuf_random() {
  struct R {
    uint64_t rows, cols, k, hot;
  };
  std::vector<R> cases = {{1, 1, 0, 0},      {1, 1, 1, 0},       {1, 1, 1, 1},
                          {5, 3, 1, 0},      {1, 3, 50, 40},     {1, 1, 5000, 4500},
                          {1, 4, 200, 33},   {7, 1, 100, 0},     {100, 1, 1000, 33},
                          {100, 3, 6000, 4097}, {64, 4, 300, 33}, {9, 1024, 120, 40},
                          {1000, 1, 20000, 5000}, {50, 4, 10000, 4200}, {3, 1024, 50, 0},
                          {200000, 2, 3000, 0},   {(1u << 20) + 7, 1, 30000, 100}};
  // Random shapes and lengths.
  {
    th::Rng rng(8999);
    for (int i = 0; i < 8; ++i) {
      const uint64_t cols = std::vector<uint64_t>{1, 3, 4, 1024}[rng.gen() % 4];
      const uint64_t rows = 1 + rng.gen() % (cols == 1024 ? 64 : 2000);
      const uint64_t k = rng.gen() % (cols == 1024 ? 300 : 3000);
      cases.push_back({rows, cols, k, k ? rng.gen() % (k + 1) % 100 : 0});
    }
  }
  uint64_t salt = 9000;
  for (const R &r : cases) {
    if (th::under_valgrind() && (r.rows * r.cols > (1u << 18) || r.k > 6000)) continue;
    for (bool i32 : {false, true}) {
      const std::vector<int64_t> li = random_ilist(r.rows, r.k, r.hot, i32, ++salt);
      const std::vector<uint64_t> lh = host_list_of(li);
      const uint64_t bad = count_bad(li);
      for (Dist d : {Dist::Wide, Dist::Bits, Dist::Edge}) {
        if (d != Dist::Wide && r.rows * r.cols > (1u << 16)) continue;
        const std::vector<float> x = make(d, r.rows * r.cols, salt * 7 + 1);
        const std::vector<float> vals = make(d, r.k * r.cols, salt * 7 + 2);
        char w[160];
        std::snprintf(w, sizeof w, "ibuf (rows %llu, cols %llu, k %llu, hot %llu) %s %s",
                      (unsigned long long)r.rows, (unsigned long long)r.cols,
                      (unsigned long long)r.k, (unsigned long long)r.hot, i32 ? "int32" : "int64",
                      th::dist_name(d));
        const std::string ws = w;
        const std::vector<float> zeros(r.rows * r.cols, 0.0f);
        faults(true);
        if (r.cols == 1) {
          expect_same(gather_vec_ibuf(x, li, i32, ws), gather_vec(x, lh, ws),
                      ws + " gather_vec_ibuf == gather_vec", true);
          expect_faults(bad, ws + " gather_vec_ibuf");
          const std::vector<float> host = scatter_add(x, vals, lh, ws);
          expect_same(scatter_add_ibuf(&x, r.rows, vals, li, i32, ws), host,
                      ws + " scatter_add_ibuf == scatter_add");
          expect_faults(bad, ws + " scatter_add_ibuf");
          expect_same(scatter_add_ibuf(nullptr, r.rows, vals, li, i32, ws),
                      scatter_add(zeros, vals, lh, ws),
                      ws + " scatter_add_ibuf(NULL) == scatter_add(zeros)");
          expect_faults(bad, ws + " scatter_add_ibuf NULL x");
        }
        expect_same(gather_rows_ibuf(x, r.rows, r.cols, li, i32, ws),
                    gather_rows(x, r.rows, r.cols, lh, ws), ws + " gather_rows_ibuf == gather_rows",
                    true);
        expect_faults(bad, ws + " gather_rows_ibuf");
        expect_same(scatter_add_rows_ibuf(&x, r.rows, r.cols, vals, li, i32, ws),
                    scatter_add_rows(x, vals, r.rows, r.cols, lh, ws),
                    ws + " scatter_add_rows_ibuf == scatter_add_rows");
        expect_faults(bad, ws + " scatter_add_rows_ibuf");
        const std::vector<float> z_ibuf =
            scatter_add_rows_ibuf(nullptr, r.rows, r.cols, vals, li, i32, ws);
        expect_same(z_ibuf, scatter_add_rows(zeros, vals, r.rows, r.cols, lh, ws),
                    ws + " scatter_add_rows_ibuf(NULL) == scatter_add_rows(zeros)");
        expect_faults(bad, ws + " scatter_add_rows_ibuf NULL mat");
        // And the independent reference of the order.
        expect_same(z_ibuf, ref_scatter(zeros, vals, r.rows, r.cols, lh),
                    ws + " scatter_add_rows_ibuf(NULL) == reference");
      }
    }
  }
}

// -0.0f contributions through a NULL base: bit for bit the explicit +0 base (+0 + -0 = +0), for
// short and long segments.
void check_ibuf_null_base_zero() {
  const float nz = -0.0f;
  for (bool i32 : {false, true}) {
    for (uint64_t L : {1, 2, 3, 33, 4097}) {
      std::vector<int64_t> idx(L, 1);
      idx.push_back(-1);
      const std::vector<float> vals(idx.size(), nz);
      const std::vector<float> zeros(3, 0.0f);
      const std::string w = "NULL base, " + std::to_string(L) + " times -0" +
                            (i32 ? " int32" : " int64");
      const std::vector<float> got = scatter_add_ibuf(nullptr, 3, vals, idx, i32, w);
      expect_same(got, scatter_add(zeros, vals, host_list_of(idx), w), w, true);
      expect_same(got, {0.0f, 0.0f, 0.0f}, w + " is +0", true);
      const std::vector<float> vals2(idx.size() * 2, nz);
      const std::vector<float> gotr = scatter_add_rows_ibuf(nullptr, 3, 2, vals2, idx, i32, w);
      expect_same(gotr, std::vector<float>(6, 0.0f), w + " rows is +0", true);
    }
  }
  faults(true);
}

// The determinism switch changes nothing.
void check_ibuf_switch() {
  const std::vector<int64_t> li = random_ilist(300, 5000, 4200, false, 4242);
  const std::vector<float> vals = make(Dist::Wide, li.size() * 3, 4243);
  const bool initial = tlrt_get_deterministic();
  tlrt_set_deterministic(false);
  const std::vector<float> a = scatter_add_rows_ibuf(nullptr, 300, 3, vals, li, false, "off");
  tlrt_set_deterministic(true);
  const std::vector<float> b = scatter_add_rows_ibuf(nullptr, 300, 3, vals, li, false, "on");
  tlrt_set_deterministic(initial);
  expect_same(a, b, "scatter_add_rows_ibuf with the determinism switch on and off", true);
  faults(true);
}

}  // namespace

int main() {
  const tlrt_allocator_stats start = th::stats();
  check_known_answers();
  check_index_rule();
  check_edges();
  check_segments();
  check_random_lists();
  check_one_sum();
  check_switch();
  check_ibuf_known_answers();
  check_ibuf_random();
  check_ibuf_null_base_zero();
  check_ibuf_switch();
  const tlrt_allocator_stats end = th::stats();
  TH_CHECK_MSG(end.live_bytes == start.live_bytes, "live_bytes %llu at start, %llu at end",
               (unsigned long long)start.live_bytes, (unsigned long long)end.live_bytes);
  TH_CHECK_MSG(end.live_handles == start.live_handles, "live_handles %llu at start, %llu at end",
               (unsigned long long)start.live_handles, (unsigned long long)end.live_handles);
  return th::finish("test_index");
}
