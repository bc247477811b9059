// Bad input for the entry points of abi/tlrt_index.h: every pointer argument NULL (idx only when
// k > 0: with k == 0 a NULL list is valid), released buffers, sizes that do not match (products
// beyond 64 bits included), k beyond TLRT_MAX_ELEMENTS, outputs beyond TLRT_MAX_ELEMENTS, entries
// that cannot be indices (>= 2^60), mixed devices where a CUDA device is usable, and the order of
// precedence the header states between these codes. The index-buffer variants (_ibuf) also get
// stale handles, integer data and float32 index buffers (TLRT_ERR_DTYPE), NULL x / mat (valid:
// zeros), outputs beyond TLRT_MAX_ELEMENTS without x / mat, and entries that are not an index
// (negative, >= 2^60), which must succeed (never TLRT_ERR_INDEX); tlrt_index_flat_rows gets
// the same handle checks and rows * cols beyond 2^60; tlrt_index_faults gets NULL, malformed and
// absent devices. Each failing call must return the exact status, leave its
// out-parameter NULL, and name the function and the argument(s) in tlrt_last_error(); nothing
// may leak.
#include "bad_input.hpp"

namespace {

using th::Buf;

const uint64_t k60 = uint64_t{1} << 60;
const uint64_t k32 = uint64_t{1} << 32;

// A list of 3 valid entries and lists with an entry that is not an index.
const uint64_t kList[3] = {0, 3, 9};  // 9 is out of range for every fixture: valid
const uint64_t kBad60[3] = {0, k60, 1};
const uint64_t kBadMax[3] = {UINT64_MAX, 0, 1};

void check_gather_vec(const Fixture &f) {
  const char *fn = "tlrt_gather_vec";
  tlrt_buffer *out = kSentinel;
  BAD(tlrt_gather_vec(nullptr, 4, kList, 3, &out), TLRT_ERR_NULL_ARGUMENT, fn, "v");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_gather_vec(f.a, 4, nullptr, 3, &out), TLRT_ERR_NULL_ARGUMENT, fn, "idx");
  CLEARED(out);
  BAD(tlrt_gather_vec(f.a, 4, kList, 3, nullptr), TLRT_ERR_NULL_ARGUMENT, fn, "out");
  out = kSentinel;
  BAD(tlrt_gather_vec(f.released, 4, kList, 3, &out), TLRT_ERR_RELEASED, fn, "v");
  CLEARED(out);
  for (uint64_t n : {uint64_t{3}, uint64_t{5}, uint64_t{0}, k32 + 4, UINT64_MAX}) {
    out = kSentinel;
    BAD(tlrt_gather_vec(f.a, n, kList, 3, &out), TLRT_ERR_SHAPE, fn, "v", "n");
    CLEARED(out);
  }
  out = kSentinel;
  BAD(tlrt_gather_vec(f.a, 4, kList, kTooMany, &out), TLRT_ERR_OVERFLOW, fn, "k");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_gather_vec(f.a, 4, kList, UINT64_MAX, &out), TLRT_ERR_OVERFLOW, fn, "k");
  CLEARED(out);
  for (const uint64_t *bad : {kBad60, kBadMax}) {
    out = kSentinel;
    BAD(tlrt_gather_vec(f.a, 4, bad, 3, &out), TLRT_ERR_INDEX, fn, "idx");
    CLEARED(out);
    out = kSentinel;  // also for an empty v
    BAD(tlrt_gather_vec(f.empty, 0, bad, 3, &out), TLRT_ERR_INDEX, fn, "idx");
    CLEARED(out);
  }
  // Precedence: NULL before released, released before shape, overflow of k before shape, shape
  // before index.
  out = kSentinel;
  BAD(tlrt_gather_vec(f.released, 4, nullptr, 3, &out), TLRT_ERR_NULL_ARGUMENT, fn, "idx");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_gather_vec(f.released, 7, kList, 3, &out), TLRT_ERR_RELEASED, fn, "v");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_gather_vec(f.a, 7, kList, kTooMany, &out), TLRT_ERR_OVERFLOW, fn, "k");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_gather_vec(f.a, 7, kBad60, 3, &out), TLRT_ERR_SHAPE, fn, "v", "n");
  CLEARED(out);
  // Valid: k == 0 with idx NULL; out-of-range entries; 2^60 - 1.
  const uint64_t top[2] = {k60 - 1, 2};
  for (auto c : {std::make_pair(f.a, uint64_t{4}), std::make_pair(f.empty, uint64_t{0})}) {
    out = nullptr;
    TH_OK(tlrt_gather_vec(c.first, c.second, nullptr, 0, &out));
    expect_result(fn, out, 0);
    out = nullptr;
    TH_OK(tlrt_gather_vec(c.first, c.second, kList, 3, &out));
    expect_result(fn, out, 3);
    out = nullptr;
    TH_OK(tlrt_gather_vec(c.first, c.second, top, 2, &out));
    expect_result(fn, out, 2);
  }
}

void check_scatter_add(const Fixture &f) {
  const char *fn = "tlrt_scatter_add";
  tlrt_buffer *out = kSentinel;
  BAD(tlrt_scatter_add(nullptr, f.short3, 4, kList, 3, &out), TLRT_ERR_NULL_ARGUMENT, fn, "x");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_scatter_add(f.a, nullptr, 4, kList, 3, &out), TLRT_ERR_NULL_ARGUMENT, fn, "vals");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_scatter_add(f.a, f.short3, 4, nullptr, 3, &out), TLRT_ERR_NULL_ARGUMENT, fn, "idx");
  CLEARED(out);
  BAD(tlrt_scatter_add(f.a, f.short3, 4, kList, 3, nullptr), TLRT_ERR_NULL_ARGUMENT, fn, "out");
  out = kSentinel;
  BAD(tlrt_scatter_add(f.released, f.short3, 4, kList, 3, &out), TLRT_ERR_RELEASED, fn, "x");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_scatter_add(f.a, f.released, 4, kList, 4, &out), TLRT_ERR_RELEASED, fn, "vals");
  CLEARED(out);
  for (uint64_t n : {uint64_t{3}, uint64_t{5}, uint64_t{0}, k32 + 4, UINT64_MAX}) {
    out = kSentinel;
    BAD(tlrt_scatter_add(f.a, f.short3, n, kList, 3, &out), TLRT_ERR_SHAPE, fn, "x", "n");
    CLEARED(out);
  }
  for (uint64_t k : {uint64_t{2}, uint64_t{4}, uint64_t{0}}) {
    out = kSentinel;
    BAD(tlrt_scatter_add(f.a, f.short3, 4, kList, k, &out), TLRT_ERR_SHAPE, fn, "vals", "k");
    CLEARED(out);
  }
  out = kSentinel;
  BAD(tlrt_scatter_add(f.a, f.short3, 4, kList, kTooMany, &out), TLRT_ERR_OVERFLOW, fn, "k");
  CLEARED(out);
  for (const uint64_t *bad : {kBad60, kBadMax}) {
    out = kSentinel;
    BAD(tlrt_scatter_add(f.a, f.short3, 4, bad, 3, &out), TLRT_ERR_INDEX, fn, "idx");
    CLEARED(out);
    out = kSentinel;
    BAD(tlrt_scatter_add(f.empty, f.short3, 0, bad, 3, &out), TLRT_ERR_INDEX, fn, "idx");
    CLEARED(out);
  }
  // Precedence.
  out = kSentinel;
  BAD(tlrt_scatter_add(f.released, nullptr, 4, kList, 3, &out), TLRT_ERR_NULL_ARGUMENT, fn,
      "vals");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_scatter_add(f.a, f.a, 4, kBad60, 3, &out), TLRT_ERR_SHAPE, fn, "vals", "k");
  CLEARED(out);
  // Valid.
  out = nullptr;
  TH_OK(tlrt_scatter_add(f.a, f.empty, 4, nullptr, 0, &out));
  expect_result(fn, out, 4);
  out = nullptr;
  TH_OK(tlrt_scatter_add(f.a, f.short3, 4, kList, 3, &out));
  expect_result(fn, out, 4);
  out = nullptr;
  TH_OK(tlrt_scatter_add(f.empty, f.short3, 0, kList, 3, &out));
  expect_result(fn, out, 0);
}

void check_gather_rows(const Fixture &f) {
  const char *fn = "tlrt_gather_rows";
  tlrt_buffer *out = kSentinel;
  BAD(tlrt_gather_rows(nullptr, 2, 2, kList, 3, &out), TLRT_ERR_NULL_ARGUMENT, fn, "mat");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_gather_rows(f.a, 2, 2, nullptr, 3, &out), TLRT_ERR_NULL_ARGUMENT, fn, "idx");
  CLEARED(out);
  BAD(tlrt_gather_rows(f.a, 2, 2, kList, 3, nullptr), TLRT_ERR_NULL_ARGUMENT, fn, "out");
  out = kSentinel;
  BAD(tlrt_gather_rows(f.released, 2, 2, kList, 3, &out), TLRT_ERR_RELEASED, fn, "mat");
  CLEARED(out);
  struct Shape {
    const tlrt_buffer *m;
    uint64_t rows, cols;
  };
  for (const Shape &s : {Shape{f.a, 3, 1}, Shape{f.a, 2, 3}, Shape{f.a, 0, 4}, Shape{f.a, 4, 0},
                         Shape{f.a, k32, k32}, Shape{f.a, UINT64_MAX, 2},
                         Shape{f.empty, k32, k32}, Shape{f.empty, 1, 1}}) {
    out = kSentinel;
    BAD(tlrt_gather_rows(s.m, s.rows, s.cols, kList, 3, &out), TLRT_ERR_SHAPE, fn, "mat", "rows",
        "cols");
    CLEARED(out);
  }
  out = kSentinel;
  BAD(tlrt_gather_rows(f.a, 2, 2, kList, kTooMany, &out), TLRT_ERR_OVERFLOW, fn, "k");
  CLEARED(out);
  // The output (k, cols) beyond TLRT_MAX_ELEMENTS, and beyond 64 bits (the list is not read).
  out = kSentinel;
  BAD(tlrt_gather_rows(f.empty, 0, uint64_t{1} << 40, kList, uint64_t{1} << 21, &out),
      TLRT_ERR_OVERFLOW, fn, "k", "cols");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_gather_rows(f.empty, 0, uint64_t{1} << 40, kList, uint64_t{1} << 30, &out),
      TLRT_ERR_OVERFLOW, fn, "k", "cols");
  CLEARED(out);
  for (const uint64_t *bad : {kBad60, kBadMax}) {
    out = kSentinel;
    BAD(tlrt_gather_rows(f.a, 2, 2, bad, 3, &out), TLRT_ERR_INDEX, fn, "idx");
    CLEARED(out);
    out = kSentinel;  // an empty output (cols == 0) still checks every entry
    BAD(tlrt_gather_rows(f.empty, 7, 0, bad, 3, &out), TLRT_ERR_INDEX, fn, "idx");
    CLEARED(out);
  }
  // Precedence: the output size before the entries.
  out = kSentinel;
  BAD(tlrt_gather_rows(f.empty, 0, uint64_t{1} << 40, kBad60, uint64_t{1} << 21, &out),
      TLRT_ERR_OVERFLOW, fn, "k", "cols");
  CLEARED(out);
  // Valid.
  for (const Shape &s : {Shape{f.a, 2, 2}, Shape{f.a, 4, 1}, Shape{f.a, 1, 4}, Shape{f.empty, 0, 3},
                         Shape{f.empty, 3, 0}, Shape{f.empty, k32, 0}}) {
    out = nullptr;
    TH_CHECK_MSG(tlrt_gather_rows(s.m, s.rows, s.cols, kList, 3, &out) == TLRT_OK,
                 "%s(%llu, %llu) failed: %s", fn, (unsigned long long)s.rows,
                 (unsigned long long)s.cols, tlrt_last_error());
    expect_result(fn, out, 3 * s.cols);
    out = nullptr;
    TH_OK(tlrt_gather_rows(s.m, s.rows, s.cols, nullptr, 0, &out));
    expect_result(fn, out, 0);
  }
}

void check_scatter_add_row(const Fixture &f) {
  const char *fn = "tlrt_scatter_add_row";
  tlrt_buffer *out = kSentinel;
  BAD(tlrt_scatter_add_row(nullptr, f.a, 1, 4, 0, &out), TLRT_ERR_NULL_ARGUMENT, fn, "mat");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_scatter_add_row(f.a, nullptr, 1, 4, 0, &out), TLRT_ERR_NULL_ARGUMENT, fn, "row");
  CLEARED(out);
  BAD(tlrt_scatter_add_row(f.a, f.b, 1, 4, 0, nullptr), TLRT_ERR_NULL_ARGUMENT, fn, "out");
  out = kSentinel;
  BAD(tlrt_scatter_add_row(f.released, f.b, 1, 4, 0, &out), TLRT_ERR_RELEASED, fn, "mat");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_scatter_add_row(f.a, f.released, 1, 4, 0, &out), TLRT_ERR_RELEASED, fn, "row");
  CLEARED(out);
  struct Shape {
    uint64_t rows, cols;
  };
  for (const Shape &s : {Shape{3, 1}, Shape{2, 3}, Shape{0, 4}, Shape{k32, k32}, Shape{5, 1}}) {
    out = kSentinel;
    BAD(tlrt_scatter_add_row(f.a, f.b, s.rows, s.cols, 0, &out), TLRT_ERR_SHAPE, fn, "mat",
        "rows", "cols");
    CLEARED(out);
  }
  out = kSentinel;
  BAD(tlrt_scatter_add_row(f.a, f.short3, 1, 4, 0, &out), TLRT_ERR_SHAPE, fn, "row", "cols");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_scatter_add_row(f.a, f.b, 2, 2, 0, &out), TLRT_ERR_SHAPE, fn, "row", "cols");
  CLEARED(out);
  for (uint64_t i : {k60, UINT64_MAX, (uint64_t)-1, k60 + 7}) {
    out = kSentinel;
    BAD(tlrt_scatter_add_row(f.a, f.b, 1, 4, i, &out), TLRT_ERR_INDEX, fn, "i");
    CLEARED(out);
    out = kSentinel;
    BAD(tlrt_scatter_add_row(f.empty, f.empty, 5, 0, i, &out), TLRT_ERR_INDEX, fn, "i");
    CLEARED(out);
  }
  // Precedence: shape before index.
  out = kSentinel;
  BAD(tlrt_scatter_add_row(f.a, f.short3, 1, 4, UINT64_MAX, &out), TLRT_ERR_SHAPE, fn, "row",
      "cols");
  CLEARED(out);
  // Valid: in range, out of range (a copy), 2^60 - 1, empty.
  for (uint64_t i : {uint64_t{0}, uint64_t{1}, uint64_t{2}, k60 - 1}) {
    tlrt_buffer *row2 = nullptr;
    const float two[2] = {1.0f, 2.0f};
    TH_OK(tlrt_buffer_from_f32(TLRT_DEVICE_CPU, two, 2, &row2));
    out = nullptr;
    TH_OK(tlrt_scatter_add_row(f.a, row2, 2, 2, i, &out));
    expect_result(fn, out, 4);
    tlrt_buffer_free(row2);
  }
  out = nullptr;
  TH_OK(tlrt_scatter_add_row(f.empty, f.empty, 3, 0, 1, &out));
  expect_result(fn, out, 0);
  out = nullptr;
  TH_OK(tlrt_scatter_add_row(f.empty, f.a, 0, 4, 0, &out));
  expect_result(fn, out, 0);
}

void check_scatter_add_rows(const Fixture &f) {
  const char *fn = "tlrt_scatter_add_rows";
  const uint64_t one[1] = {1};
  tlrt_buffer *out = kSentinel;
  BAD(tlrt_scatter_add_rows(nullptr, f.b, 2, 2, kList, 2, &out), TLRT_ERR_NULL_ARGUMENT, fn,
      "mat");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_scatter_add_rows(f.a, nullptr, 2, 2, kList, 2, &out), TLRT_ERR_NULL_ARGUMENT, fn,
      "vals");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_scatter_add_rows(f.a, f.b, 2, 2, nullptr, 2, &out), TLRT_ERR_NULL_ARGUMENT, fn, "idx");
  CLEARED(out);
  BAD(tlrt_scatter_add_rows(f.a, f.b, 2, 2, kList, 2, nullptr), TLRT_ERR_NULL_ARGUMENT, fn,
      "out");
  out = kSentinel;
  BAD(tlrt_scatter_add_rows(f.released, f.b, 2, 2, kList, 2, &out), TLRT_ERR_RELEASED, fn, "mat");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_scatter_add_rows(f.a, f.released, 2, 2, kList, 2, &out), TLRT_ERR_RELEASED, fn,
      "vals");
  CLEARED(out);
  struct Shape {
    const tlrt_buffer *m;
    uint64_t rows, cols;
  };
  for (const Shape &s : {Shape{f.a, 3, 1}, Shape{f.a, 2, 3}, Shape{f.a, 0, 4}, Shape{f.a, k32, k32},
                         Shape{f.empty, k32, k32}, Shape{f.empty, 1, 1}}) {
    out = kSentinel;
    BAD(tlrt_scatter_add_rows(s.m, f.b, s.rows, s.cols, kList, 2, &out), TLRT_ERR_SHAPE, fn,
        "mat", "rows", "cols");
    CLEARED(out);
  }
  // vals must be (k, cols): wrong k, wrong cols, and k * cols beyond 64 bits (2^32 * 2^32 wraps
  // to 0 and must not pass as the size of an empty vals; the list is not read).
  for (uint64_t k : {uint64_t{1}, uint64_t{3}, uint64_t{0}}) {
    out = kSentinel;
    BAD(tlrt_scatter_add_rows(f.a, f.b, 2, 2, kList, k, &out), TLRT_ERR_SHAPE, fn, "vals", "k",
        "cols");
    CLEARED(out);
  }
  out = kSentinel;
  BAD(tlrt_scatter_add_rows(f.empty, f.empty, 0, k32, kList, k32, &out), TLRT_ERR_SHAPE, fn,
      "vals", "k", "cols");
  CLEARED(out);
  // k beyond TLRT_MAX_ELEMENTS: an error even where cols == 0 would make the sizes match.
  out = kSentinel;
  BAD(tlrt_scatter_add_rows(f.empty, f.empty, 5, 0, kList, kTooMany, &out), TLRT_ERR_OVERFLOW,
      fn, "k");
  CLEARED(out);
  for (const uint64_t *bad : {kBad60, kBadMax}) {
    out = kSentinel;
    BAD(tlrt_scatter_add_rows(f.a, f.empty, 4, 0, bad, 3, &out), TLRT_ERR_SHAPE, fn, "mat",
        "rows", "cols");
    CLEARED(out);
    out = kSentinel;
    BAD(tlrt_scatter_add_rows(f.a, f.short3, 4, 1, bad, 3, &out), TLRT_ERR_INDEX, fn, "idx");
    CLEARED(out);
    out = kSentinel;
    BAD(tlrt_scatter_add_rows(f.empty, f.empty, 5, 0, bad, 3, &out), TLRT_ERR_INDEX, fn, "idx");
    CLEARED(out);
  }
  // Valid.
  out = nullptr;
  TH_OK(tlrt_scatter_add_rows(f.a, f.b, 2, 2, kList, 2, &out));
  expect_result(fn, out, 4);
  out = nullptr;
  TH_OK(tlrt_scatter_add_rows(f.a, f.empty, 2, 2, nullptr, 0, &out));
  expect_result(fn, out, 4);
  out = nullptr;
  TH_OK(tlrt_scatter_add_rows(f.a, f.a, 1, 4, one, 1, &out));  // row 1 of 1: out of range
  expect_result(fn, out, 4);
  out = nullptr;
  TH_OK(tlrt_scatter_add_rows(f.empty, f.empty, k32, 0, kList, 3, &out));
  expect_result(fn, out, 0);
}

// ---- index buffers ------------------------------------------------------------------------------
// The _ibuf variants take the list as an int32 / int64 buffer: errors in the order NULL, stale
// handle, released, dtype (idx not int32 / int64, naming idx; a data argument not float32),
// device, shape, overflow; x / mat of the scatters may be NULL (zeros); TLRT_ERR_INDEX never
// occurs (negative entries and int64 entries >= 2^60 are counted by tlrt_index_faults instead).

tlrt_buffer *ibuf64(const std::vector<int64_t> &v, tlrt_device dev = TLRT_DEVICE_CPU) {
  tlrt_buffer *b = nullptr;
  if (v.empty())
    TH_OK(tlrt_buffer_zeros_of(dev, TLRT_DTYPE_I64, 0, &b));
  else
    TH_OK(tlrt_buffer_from_i64(dev, v.data(), v.size(), &b));
  return b;
}

tlrt_buffer *ibuf32(const std::vector<int32_t> &v, tlrt_device dev = TLRT_DEVICE_CPU) {
  tlrt_buffer *b = nullptr;
  if (v.empty())
    TH_OK(tlrt_buffer_zeros_of(dev, TLRT_DTYPE_I32, 0, &b));
  else
    TH_OK(tlrt_buffer_from_i32(dev, v.data(), v.size(), &b));
  return b;
}

// Index buffers and misused handles shared by the _ibuf checks, all on the CPU.
struct IFixture {
  tlrt_buffer *i64_3 = nullptr;     // int64 {0, 3, 9}: 9 is out of range for every fixture
  tlrt_buffer *i32_3 = nullptr;     // int32 {0, 3, 9}
  tlrt_buffer *i64_2 = nullptr;     // int64 {0, 1}
  tlrt_buffer *i64_0 = nullptr;     // int64, 0 elements
  tlrt_buffer *i32_0 = nullptr;     // int32, 0 elements
  tlrt_buffer *bad64 = nullptr;     // int64 {-1, 2^60, INT64_MIN}: no entry is an index
  tlrt_buffer *bad32 = nullptr;     // int32 {-1, INT32_MIN, 2}: two are not an index
  tlrt_buffer *rel64 = nullptr;     // int64, 3 elements, storage released
  tlrt_buffer *data64 = nullptr;    // int64, 4 elements: an integer buffer as a data argument
  tlrt_buffer *data32 = nullptr;    // int32, 3 elements: likewise
  const tlrt_buffer *stale_i = nullptr;  // a freed int64 buffer of 3 elements
  const tlrt_buffer *stale_f = nullptr;  // a freed float32 buffer of 4 elements
};

IFixture make_ifixture() {
  IFixture g;
  g.i64_3 = ibuf64({0, 3, 9});
  g.i32_3 = ibuf32({0, 3, 9});
  g.i64_2 = ibuf64({0, 1});
  g.i64_0 = ibuf64({});
  g.i32_0 = ibuf32({});
  g.bad64 = ibuf64({-1, int64_t{1} << 60, INT64_MIN});
  g.bad32 = ibuf32({-1, INT32_MIN, 2});
  g.rel64 = ibuf64({0, 1, 2});
  bool freed = false;
  TH_OK(tlrt_buffer_release_storage(g.rel64, &freed));
  TH_CHECK(freed);
  g.data64 = ibuf64({1, 2, 3, 4});
  g.data32 = ibuf32({1, 2, 3});
  tlrt_buffer *s = ibuf64({0, 1, 2});
  tlrt_buffer_free(s);
  g.stale_i = s;
  tlrt_buffer *sf = th::upload({1, 2, 3, 4});
  tlrt_buffer_free(sf);
  g.stale_f = sf;
  return g;
}

void free_ifixture(IFixture &g) {
  for (tlrt_buffer *b : {g.i64_3, g.i32_3, g.i64_2, g.i64_0, g.i32_0, g.bad64, g.bad32, g.rel64,
                         g.data64, g.data32})
    tlrt_buffer_free(b);
  g = IFixture{};
}

void check_gather_vec_ibuf(const Fixture &f, const IFixture &g) {
  const char *fn = "tlrt_gather_vec_ibuf";
  tlrt_buffer *out = kSentinel;
  BAD(tlrt_gather_vec_ibuf(nullptr, 4, g.i64_3, &out), TLRT_ERR_NULL_ARGUMENT, fn, "v");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_gather_vec_ibuf(f.a, 4, nullptr, &out), TLRT_ERR_NULL_ARGUMENT, fn, "idx");
  CLEARED(out);
  BAD(tlrt_gather_vec_ibuf(f.a, 4, g.i64_3, nullptr), TLRT_ERR_NULL_ARGUMENT, fn, "out");
  out = kSentinel;
  BAD(tlrt_gather_vec_ibuf(g.stale_f, 4, g.i64_3, &out), TLRT_ERR_STALE_HANDLE, fn, "v");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_gather_vec_ibuf(f.a, 4, g.stale_i, &out), TLRT_ERR_STALE_HANDLE, fn, "idx");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_gather_vec_ibuf(f.released, 4, g.i64_3, &out), TLRT_ERR_RELEASED, fn, "v");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_gather_vec_ibuf(f.a, 4, g.rel64, &out), TLRT_ERR_RELEASED, fn, "idx");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_gather_vec_ibuf(f.a, 4, f.short3, &out), TLRT_ERR_DTYPE, fn, "idx");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_gather_vec_ibuf(g.data64, 4, g.i64_3, &out), TLRT_ERR_DTYPE, fn, "v");
  CLEARED(out);
  for (uint64_t n : {uint64_t{3}, uint64_t{5}, uint64_t{0}, k32 + 4, kTooMany, UINT64_MAX}) {
    for (const tlrt_buffer *idx : {g.i64_3, g.i32_3, g.i64_0}) {
      out = kSentinel;
      BAD(tlrt_gather_vec_ibuf(f.a, n, idx, &out), TLRT_ERR_SHAPE, fn, "v", "n");
      CLEARED(out);
    }
  }
  // Precedence: NULL before stale, stale before released, released before dtype, dtype before
  // shape.
  out = kSentinel;
  BAD(tlrt_gather_vec_ibuf(g.stale_f, 4, nullptr, &out), TLRT_ERR_NULL_ARGUMENT, fn, "idx");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_gather_vec_ibuf(f.released, 4, g.stale_i, &out), TLRT_ERR_STALE_HANDLE, fn, "idx");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_gather_vec_ibuf(f.released, 4, f.short3, &out), TLRT_ERR_RELEASED, fn, "v");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_gather_vec_ibuf(f.a, 4, g.rel64, &out), TLRT_ERR_RELEASED, fn, "idx");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_gather_vec_ibuf(f.a, 7, f.short3, &out), TLRT_ERR_DTYPE, fn, "idx");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_gather_vec_ibuf(g.data64, 7, g.i64_3, &out), TLRT_ERR_DTYPE, fn, "v");
  CLEARED(out);
  // Valid: empty lists, out-of-range entries, and entries that are not an index (no
  // TLRT_ERR_INDEX: they read +0.0f and are counted), on an empty v too.
  for (auto c : {std::make_pair(f.a, uint64_t{4}), std::make_pair(f.empty, uint64_t{0})}) {
    for (const tlrt_buffer *idx : {g.i64_0, g.i32_0}) {
      out = nullptr;
      TH_OK(tlrt_gather_vec_ibuf(c.first, c.second, idx, &out));
      expect_result(fn, out, 0);
    }
    for (const tlrt_buffer *idx : {g.i64_3, g.i32_3, g.bad64, g.bad32}) {
      out = nullptr;
      TH_OK(tlrt_gather_vec_ibuf(c.first, c.second, idx, &out));
      expect_result(fn, out, 3);
    }
  }
}

void check_scatter_add_ibuf(const Fixture &f, const IFixture &g) {
  const char *fn = "tlrt_scatter_add_ibuf";
  tlrt_buffer *out = kSentinel;
  BAD(tlrt_scatter_add_ibuf(f.a, nullptr, 4, g.i64_3, &out), TLRT_ERR_NULL_ARGUMENT, fn, "vals");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_scatter_add_ibuf(f.a, f.short3, 4, nullptr, &out), TLRT_ERR_NULL_ARGUMENT, fn, "idx");
  CLEARED(out);
  BAD(tlrt_scatter_add_ibuf(f.a, f.short3, 4, g.i64_3, nullptr), TLRT_ERR_NULL_ARGUMENT, fn,
      "out");
  BAD(tlrt_scatter_add_ibuf(nullptr, f.short3, 4, g.i64_3, nullptr), TLRT_ERR_NULL_ARGUMENT, fn,
      "out");
  out = kSentinel;
  BAD(tlrt_scatter_add_ibuf(nullptr, nullptr, 4, g.i64_3, &out), TLRT_ERR_NULL_ARGUMENT, fn,
      "vals");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_scatter_add_ibuf(g.stale_f, f.short3, 4, g.i64_3, &out), TLRT_ERR_STALE_HANDLE, fn,
      "x");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_scatter_add_ibuf(f.a, g.stale_f, 4, g.i64_3, &out), TLRT_ERR_STALE_HANDLE, fn, "vals");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_scatter_add_ibuf(f.a, f.short3, 4, g.stale_i, &out), TLRT_ERR_STALE_HANDLE, fn, "idx");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_scatter_add_ibuf(f.released, f.short3, 4, g.i64_3, &out), TLRT_ERR_RELEASED, fn, "x");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_scatter_add_ibuf(f.a, f.released, 4, g.i64_3, &out), TLRT_ERR_RELEASED, fn, "vals");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_scatter_add_ibuf(f.a, f.short3, 4, g.rel64, &out), TLRT_ERR_RELEASED, fn, "idx");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_scatter_add_ibuf(nullptr, f.short3, 4, g.rel64, &out), TLRT_ERR_RELEASED, fn, "idx");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_scatter_add_ibuf(f.a, f.short3, 4, f.b, &out), TLRT_ERR_DTYPE, fn, "idx");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_scatter_add_ibuf(g.data64, f.short3, 4, g.i64_3, &out), TLRT_ERR_DTYPE, fn, "x");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_scatter_add_ibuf(f.a, g.data32, 4, g.i64_3, &out), TLRT_ERR_DTYPE, fn, "vals");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_scatter_add_ibuf(nullptr, g.data32, 4, g.i32_3, &out), TLRT_ERR_DTYPE, fn, "vals");
  CLEARED(out);
  // Shape: n against x; the size of vals against k = the size of idx, with or without x.
  for (uint64_t n : {uint64_t{3}, uint64_t{5}, uint64_t{0}, k32 + 4, kTooMany, UINT64_MAX}) {
    out = kSentinel;
    BAD(tlrt_scatter_add_ibuf(f.a, f.short3, n, g.i64_3, &out), TLRT_ERR_SHAPE, fn, "x", "n");
    CLEARED(out);
  }
  for (const tlrt_buffer *x : {(const tlrt_buffer *)f.a, (const tlrt_buffer *)nullptr}) {
    for (const tlrt_buffer *idx : {g.i64_2, g.i32_0, g.i64_0}) {
      out = kSentinel;
      BAD(tlrt_scatter_add_ibuf(x, f.short3, 4, idx, &out), TLRT_ERR_SHAPE, fn, "vals");
      CLEARED(out);
    }
    out = kSentinel;
    BAD(tlrt_scatter_add_ibuf(x, f.empty, 4, g.i32_3, &out), TLRT_ERR_SHAPE, fn, "vals");
    CLEARED(out);
  }
  // Overflow: without x, an output of n > TLRT_MAX_ELEMENTS elements.
  for (uint64_t n : {kTooMany, UINT64_MAX}) {
    out = kSentinel;
    BAD(tlrt_scatter_add_ibuf(nullptr, f.empty, n, g.i64_0, &out), TLRT_ERR_OVERFLOW, fn, "n");
    CLEARED(out);
    out = kSentinel;
    BAD(tlrt_scatter_add_ibuf(nullptr, f.short3, n, g.i32_3, &out), TLRT_ERR_OVERFLOW, fn, "n");
    CLEARED(out);
  }
  // Precedence.
  out = kSentinel;
  BAD(tlrt_scatter_add_ibuf(g.stale_f, nullptr, 4, g.i64_3, &out), TLRT_ERR_NULL_ARGUMENT, fn,
      "vals");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_scatter_add_ibuf(f.released, f.short3, 4, g.stale_i, &out), TLRT_ERR_STALE_HANDLE, fn,
      "idx");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_scatter_add_ibuf(f.a, g.data32, 4, g.rel64, &out), TLRT_ERR_RELEASED, fn, "idx");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_scatter_add_ibuf(f.a, f.b, 9, f.short3, &out), TLRT_ERR_DTYPE, fn, "idx");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_scatter_add_ibuf(nullptr, f.b, kTooMany, g.i64_3, &out), TLRT_ERR_SHAPE, fn, "vals");
  CLEARED(out);
  // Valid: with and without x, empty lists, n == 0, entries that are not an index.
  for (const tlrt_buffer *idx : {g.i64_3, g.i32_3, g.bad64, g.bad32}) {
    out = nullptr;
    TH_OK(tlrt_scatter_add_ibuf(f.a, f.short3, 4, idx, &out));
    expect_result(fn, out, 4);
    out = nullptr;
    TH_OK(tlrt_scatter_add_ibuf(nullptr, f.short3, 4, idx, &out));
    expect_result(fn, out, 4);
    out = nullptr;
    TH_OK(tlrt_scatter_add_ibuf(nullptr, f.short3, 0, idx, &out));
    expect_result(fn, out, 0);
    out = nullptr;
    TH_OK(tlrt_scatter_add_ibuf(f.empty, f.short3, 0, idx, &out));
    expect_result(fn, out, 0);
  }
  for (const tlrt_buffer *idx : {g.i64_0, g.i32_0}) {
    out = nullptr;
    TH_OK(tlrt_scatter_add_ibuf(f.a, f.empty, 4, idx, &out));
    expect_result(fn, out, 4);
    out = nullptr;
    TH_OK(tlrt_scatter_add_ibuf(nullptr, f.empty, 5, idx, &out));
    expect_result(fn, out, 5);
  }
}

void check_gather_rows_ibuf(const Fixture &f, const IFixture &g) {
  const char *fn = "tlrt_gather_rows_ibuf";
  tlrt_buffer *out = kSentinel;
  BAD(tlrt_gather_rows_ibuf(nullptr, 2, 2, g.i64_3, &out), TLRT_ERR_NULL_ARGUMENT, fn, "mat");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_gather_rows_ibuf(f.a, 2, 2, nullptr, &out), TLRT_ERR_NULL_ARGUMENT, fn, "idx");
  CLEARED(out);
  BAD(tlrt_gather_rows_ibuf(f.a, 2, 2, g.i64_3, nullptr), TLRT_ERR_NULL_ARGUMENT, fn, "out");
  out = kSentinel;
  BAD(tlrt_gather_rows_ibuf(g.stale_f, 2, 2, g.i64_3, &out), TLRT_ERR_STALE_HANDLE, fn, "mat");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_gather_rows_ibuf(f.a, 2, 2, g.stale_i, &out), TLRT_ERR_STALE_HANDLE, fn, "idx");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_gather_rows_ibuf(f.released, 2, 2, g.i64_3, &out), TLRT_ERR_RELEASED, fn, "mat");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_gather_rows_ibuf(f.a, 2, 2, g.rel64, &out), TLRT_ERR_RELEASED, fn, "idx");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_gather_rows_ibuf(f.a, 2, 2, f.b, &out), TLRT_ERR_DTYPE, fn, "idx");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_gather_rows_ibuf(g.data64, 2, 2, g.i32_3, &out), TLRT_ERR_DTYPE, fn, "mat");
  CLEARED(out);
  struct Shape {
    const tlrt_buffer *m;
    uint64_t rows, cols;
  };
  for (const Shape &s : {Shape{f.a, 3, 1}, Shape{f.a, 2, 3}, Shape{f.a, 0, 4}, Shape{f.a, 4, 0},
                         Shape{f.a, k32, k32}, Shape{f.a, UINT64_MAX, 2},
                         Shape{f.empty, k32, k32}, Shape{f.empty, 1, 1}}) {
    for (const tlrt_buffer *idx : {g.i64_3, g.i32_0}) {
      out = kSentinel;
      BAD(tlrt_gather_rows_ibuf(s.m, s.rows, s.cols, idx, &out), TLRT_ERR_SHAPE, fn, "mat", "rows",
          "cols");
      CLEARED(out);
    }
  }
  // The output (k, cols) beyond TLRT_MAX_ELEMENTS: 3 * 2^59, and 2 * 2^63 (beyond 64 bits; it
  // wraps to 0 and must not pass as an empty output).
  out = kSentinel;
  BAD(tlrt_gather_rows_ibuf(f.empty, 0, uint64_t{1} << 59, g.i64_3, &out), TLRT_ERR_OVERFLOW, fn,
      "cols");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_gather_rows_ibuf(f.empty, 0, uint64_t{1} << 63, g.i64_2, &out), TLRT_ERR_OVERFLOW, fn,
      "cols");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_gather_rows_ibuf(f.empty, 0, uint64_t{1} << 59, g.bad32, &out), TLRT_ERR_OVERFLOW, fn,
      "cols");
  CLEARED(out);
  // Precedence.
  out = kSentinel;
  BAD(tlrt_gather_rows_ibuf(g.stale_f, 2, 2, nullptr, &out), TLRT_ERR_NULL_ARGUMENT, fn, "idx");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_gather_rows_ibuf(f.released, 2, 2, g.stale_i, &out), TLRT_ERR_STALE_HANDLE, fn, "idx");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_gather_rows_ibuf(f.released, 2, 2, f.b, &out), TLRT_ERR_RELEASED, fn, "mat");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_gather_rows_ibuf(f.a, 3, 3, f.b, &out), TLRT_ERR_DTYPE, fn, "idx");
  CLEARED(out);
  out = kSentinel;  // shape before overflow
  BAD(tlrt_gather_rows_ibuf(f.a, 1, uint64_t{1} << 59, g.i64_3, &out), TLRT_ERR_SHAPE, fn, "mat",
      "rows", "cols");
  CLEARED(out);
  // Valid.
  for (const Shape &s : {Shape{f.a, 2, 2}, Shape{f.a, 4, 1}, Shape{f.a, 1, 4}, Shape{f.empty, 0, 3},
                         Shape{f.empty, 3, 0}, Shape{f.empty, k32, 0}}) {
    for (const tlrt_buffer *idx : {g.i64_3, g.i32_3, g.bad64, g.bad32}) {
      out = nullptr;
      TH_CHECK_MSG(tlrt_gather_rows_ibuf(s.m, s.rows, s.cols, idx, &out) == TLRT_OK,
                   "%s(%llu, %llu) failed: %s", fn, (unsigned long long)s.rows,
                   (unsigned long long)s.cols, tlrt_last_error());
      expect_result(fn, out, 3 * s.cols);
    }
    out = nullptr;
    TH_OK(tlrt_gather_rows_ibuf(s.m, s.rows, s.cols, g.i64_0, &out));
    expect_result(fn, out, 0);
  }
  out = nullptr;  // k == 0 with any cols: an empty output
  TH_OK(tlrt_gather_rows_ibuf(f.empty, 0, uint64_t{1} << 63, g.i32_0, &out));
  expect_result(fn, out, 0);
}

void check_scatter_add_rows_ibuf(const Fixture &f, const IFixture &g) {
  const char *fn = "tlrt_scatter_add_rows_ibuf";
  tlrt_buffer *out = kSentinel;
  BAD(tlrt_scatter_add_rows_ibuf(f.a, nullptr, 2, 2, g.i64_2, &out), TLRT_ERR_NULL_ARGUMENT, fn,
      "vals");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_scatter_add_rows_ibuf(nullptr, nullptr, 2, 2, g.i64_2, &out), TLRT_ERR_NULL_ARGUMENT,
      fn, "vals");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_scatter_add_rows_ibuf(f.a, f.b, 2, 2, nullptr, &out), TLRT_ERR_NULL_ARGUMENT, fn,
      "idx");
  CLEARED(out);
  BAD(tlrt_scatter_add_rows_ibuf(f.a, f.b, 2, 2, g.i64_2, nullptr), TLRT_ERR_NULL_ARGUMENT, fn,
      "out");
  BAD(tlrt_scatter_add_rows_ibuf(nullptr, f.b, 2, 2, g.i64_2, nullptr), TLRT_ERR_NULL_ARGUMENT, fn,
      "out");
  out = kSentinel;
  BAD(tlrt_scatter_add_rows_ibuf(g.stale_f, f.b, 2, 2, g.i64_2, &out), TLRT_ERR_STALE_HANDLE, fn,
      "mat");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_scatter_add_rows_ibuf(f.a, g.stale_f, 2, 2, g.i64_2, &out), TLRT_ERR_STALE_HANDLE, fn,
      "vals");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_scatter_add_rows_ibuf(nullptr, f.b, 2, 2, g.stale_i, &out), TLRT_ERR_STALE_HANDLE, fn,
      "idx");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_scatter_add_rows_ibuf(f.released, f.b, 2, 2, g.i64_2, &out), TLRT_ERR_RELEASED, fn,
      "mat");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_scatter_add_rows_ibuf(f.a, f.released, 2, 2, g.i64_2, &out), TLRT_ERR_RELEASED, fn,
      "vals");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_scatter_add_rows_ibuf(f.a, f.short3, 4, 1, g.rel64, &out), TLRT_ERR_RELEASED, fn,
      "idx");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_scatter_add_rows_ibuf(f.a, f.b, 2, 2, f.g, &out), TLRT_ERR_DTYPE, fn, "idx");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_scatter_add_rows_ibuf(g.data64, f.b, 2, 2, g.i64_2, &out), TLRT_ERR_DTYPE, fn, "mat");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_scatter_add_rows_ibuf(f.a, g.data64, 2, 2, g.i64_2, &out), TLRT_ERR_DTYPE, fn, "vals");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_scatter_add_rows_ibuf(nullptr, g.data64, 2, 2, g.i64_2, &out), TLRT_ERR_DTYPE, fn,
      "vals");
  CLEARED(out);
  struct Shape {
    const tlrt_buffer *m;
    uint64_t rows, cols;
  };
  for (const Shape &s : {Shape{f.a, 3, 1}, Shape{f.a, 2, 3}, Shape{f.a, 0, 4}, Shape{f.a, k32, k32},
                         Shape{f.empty, k32, k32}, Shape{f.empty, 1, 1}}) {
    out = kSentinel;
    BAD(tlrt_scatter_add_rows_ibuf(s.m, f.b, s.rows, s.cols, g.i64_2, &out), TLRT_ERR_SHAPE, fn,
        "mat", "rows", "cols");
    CLEARED(out);
  }
  // vals must be (k, cols), k = the size of idx, with or without mat: wrong k, wrong cols, and
  // k * cols beyond 64 bits (2 * 2^63 wraps to 0 and must not pass as the size of an empty vals).
  for (const tlrt_buffer *m : {(const tlrt_buffer *)f.a, (const tlrt_buffer *)nullptr}) {
    for (const tlrt_buffer *idx : {g.i64_3, g.i32_0, g.i64_0}) {
      out = kSentinel;
      BAD(tlrt_scatter_add_rows_ibuf(m, f.b, 2, 2, idx, &out), TLRT_ERR_SHAPE, fn, "vals", "cols");
      CLEARED(out);
    }
    out = kSentinel;
    BAD(tlrt_scatter_add_rows_ibuf(m, f.b, 1, 4, g.i64_2, &out), TLRT_ERR_SHAPE, fn, "vals",
        "cols");
    CLEARED(out);
  }
  out = kSentinel;
  BAD(tlrt_scatter_add_rows_ibuf(f.empty, f.empty, 0, uint64_t{1} << 63, g.i64_2, &out),
      TLRT_ERR_SHAPE, fn, "vals", "cols");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_scatter_add_rows_ibuf(nullptr, f.empty, 0, uint64_t{1} << 63, g.i64_2, &out),
      TLRT_ERR_SHAPE, fn, "vals", "cols");
  CLEARED(out);
  // Without mat: an output of rows * cols > TLRT_MAX_ELEMENTS elements (beyond 64 bits too:
  // 2^32 * 2^32 wraps to 0 and must not pass as an empty output).
  struct Big {
    uint64_t rows, cols;
  };
  for (const Big &b : {Big{kTooMany, 1}, Big{uint64_t{1} << 40, uint64_t{1} << 40}, Big{k32, k32},
                       Big{UINT64_MAX, 1}}) {
    out = kSentinel;
    BAD(tlrt_scatter_add_rows_ibuf(nullptr, f.empty, b.rows, b.cols, g.i64_0, &out),
        TLRT_ERR_OVERFLOW, fn, "rows", "cols");
    CLEARED(out);
  }
  out = kSentinel;  // cols 1: vals (3, 1) matches, the output does not fit
  BAD(tlrt_scatter_add_rows_ibuf(nullptr, f.short3, kTooMany, 1, g.bad64, &out),
      TLRT_ERR_OVERFLOW, fn, "rows", "cols");
  CLEARED(out);
  // Precedence.
  out = kSentinel;
  BAD(tlrt_scatter_add_rows_ibuf(g.stale_f, nullptr, 2, 2, g.i64_2, &out), TLRT_ERR_NULL_ARGUMENT,
      fn, "vals");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_scatter_add_rows_ibuf(f.released, f.b, 2, 2, g.stale_i, &out), TLRT_ERR_STALE_HANDLE,
      fn, "idx");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_scatter_add_rows_ibuf(f.released, g.data64, 2, 2, g.i64_2, &out), TLRT_ERR_RELEASED, fn,
      "mat");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_scatter_add_rows_ibuf(f.a, f.b, 7, 7, f.g, &out), TLRT_ERR_DTYPE, fn, "idx");
  CLEARED(out);
  out = kSentinel;  // shape before overflow
  BAD(tlrt_scatter_add_rows_ibuf(nullptr, f.b, k32, k32, g.i64_0, &out), TLRT_ERR_SHAPE, fn,
      "vals", "cols");
  CLEARED(out);
  // Valid: with and without mat, empty lists, entries that are not an index, empty outputs.
  for (const tlrt_buffer *idx : {g.i64_2}) {
    out = nullptr;
    TH_OK(tlrt_scatter_add_rows_ibuf(f.a, f.b, 2, 2, idx, &out));
    expect_result(fn, out, 4);
    out = nullptr;
    TH_OK(tlrt_scatter_add_rows_ibuf(nullptr, f.b, 2, 2, idx, &out));
    expect_result(fn, out, 4);
    out = nullptr;
    TH_OK(tlrt_scatter_add_rows_ibuf(nullptr, f.b, 7, 2, idx, &out));
    expect_result(fn, out, 14);
  }
  for (const tlrt_buffer *idx : {g.i64_3, g.i32_3, g.bad64, g.bad32}) {
    out = nullptr;
    TH_OK(tlrt_scatter_add_rows_ibuf(f.a, f.short3, 4, 1, idx, &out));
    expect_result(fn, out, 4);
    out = nullptr;
    TH_OK(tlrt_scatter_add_rows_ibuf(nullptr, f.short3, 4, 1, idx, &out));
    expect_result(fn, out, 4);
    out = nullptr;
    TH_OK(tlrt_scatter_add_rows_ibuf(f.empty, f.empty, k32, 0, idx, &out));
    expect_result(fn, out, 0);
    out = nullptr;
    TH_OK(tlrt_scatter_add_rows_ibuf(nullptr, f.empty, k32, 0, idx, &out));
    expect_result(fn, out, 0);
    out = nullptr;
    TH_OK(tlrt_scatter_add_rows_ibuf(nullptr, f.short3, 0, 1, idx, &out));
    expect_result(fn, out, 0);
  }
  for (const tlrt_buffer *idx : {g.i64_0, g.i32_0}) {
    out = nullptr;
    TH_OK(tlrt_scatter_add_rows_ibuf(f.a, f.empty, 2, 2, idx, &out));
    expect_result(fn, out, 4);
    out = nullptr;
    TH_OK(tlrt_scatter_add_rows_ibuf(nullptr, f.empty, 3, 5, idx, &out));
    expect_result(fn, out, 15);
    out = nullptr;  // k == 0 with any cols
    TH_OK(tlrt_scatter_add_rows_ibuf(nullptr, f.empty, 0, uint64_t{1} << 63, idx, &out));
    expect_result(fn, out, 0);
  }
}

void check_index_flat_rows(const Fixture &f, const IFixture &g) {
  const char *fn = "tlrt_index_flat_rows";
  tlrt_buffer *out = kSentinel;
  BAD(tlrt_index_flat_rows(nullptr, 4, &out), TLRT_ERR_NULL_ARGUMENT, fn, "col_idx");
  CLEARED(out);
  BAD(tlrt_index_flat_rows(g.i64_3, 4, nullptr), TLRT_ERR_NULL_ARGUMENT, fn, "out");
  out = kSentinel;
  BAD(tlrt_index_flat_rows(g.stale_i, 4, &out), TLRT_ERR_STALE_HANDLE, fn, "col_idx");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_index_flat_rows(g.rel64, 4, &out), TLRT_ERR_RELEASED, fn, "col_idx");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_index_flat_rows(f.short3, 4, &out), TLRT_ERR_DTYPE, fn, "col_idx");
  CLEARED(out);
  // rows * cols beyond 2^60: 2 or 3 * (2^59 + 1), 2 * 2^63 (beyond 64 bits: wraps to 0),
  // 3 * UINT64_MAX (2 * 2^59 = 2^60 itself is allowed).
  for (uint64_t cols : {(uint64_t{1} << 59) + 1, uint64_t{1} << 63, UINT64_MAX}) {
    for (const tlrt_buffer *ci : {g.i64_3, g.i64_2, g.bad32}) {
      out = kSentinel;
      BAD(tlrt_index_flat_rows(ci, cols, &out), TLRT_ERR_OVERFLOW, fn, "cols");
      CLEARED(out);
    }
  }
  // Precedence: NULL before stale, stale before released, released and dtype before overflow.
  BAD(tlrt_index_flat_rows(g.stale_i, 4, nullptr), TLRT_ERR_NULL_ARGUMENT, fn, "out");
  out = kSentinel;
  BAD(tlrt_index_flat_rows(g.rel64, uint64_t{1} << 63, &out), TLRT_ERR_RELEASED, fn, "col_idx");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_index_flat_rows(f.short3, uint64_t{1} << 63, &out), TLRT_ERR_DTYPE, fn, "col_idx");
  CLEARED(out);
  // Valid: an int64 output of one entry per row on the CPU; entries that are not an index;
  // cols == 0 (every entry out of range); empty lists with any cols.
  for (const tlrt_buffer *ci : {g.i64_3, g.i32_3, g.bad64, g.bad32}) {
    for (uint64_t cols : {uint64_t{0}, uint64_t{1}, uint64_t{4}, (uint64_t{1} << 60) / 3}) {
      out = nullptr;
      TH_OK(tlrt_index_flat_rows(ci, cols, &out));
      tlrt_dtype t = TLRT_DTYPE_F32;
      if (out != nullptr && out != kSentinel) {
        TH_OK(tlrt_buffer_dtype(out, &t));
        TH_CHECK(t == TLRT_DTYPE_I64);
      }
      expect_result(fn, out, 3);
    }
  }
  out = nullptr;  // rows * cols == 2^60 exactly: not beyond
  TH_OK(tlrt_index_flat_rows(g.i64_2, uint64_t{1} << 59, &out));
  expect_result(fn, out, 2);
  for (const tlrt_buffer *ci : {g.i64_0, g.i32_0}) {
    for (uint64_t cols : {uint64_t{0}, uint64_t{7}, UINT64_MAX}) {
      out = nullptr;
      TH_OK(tlrt_index_flat_rows(ci, cols, &out));
      expect_result(fn, out, 0);
    }
  }
}

// Devices that are not devices (as tests/abi/test_bad_input.cpp's kMalformed), and a CUDA device
// this process cannot use with the status it gives (a CPU-only build: BACKEND_UNAVAILABLE, as
// everywhere; CUDA without that device: NO_DEVICE).
const tlrt_device kMalformedDev[] = {
    (tlrt_device)0x05000000u, (tlrt_device)3u, TLRT_DEVICE_CUDA(0) | (tlrt_device)0x01000000u,
    (tlrt_device)(2u << 16),  (tlrt_device)(0xFFu << 16), (tlrt_device)0xFFFFFFFFu,
};

void check_index_faults() {
  const char *fn = "tlrt_index_faults";
  BAD(tlrt_index_faults(TLRT_DEVICE_CPU, true, nullptr), TLRT_ERR_NULL_ARGUMENT, fn, "count");
  BAD(tlrt_index_faults(TLRT_DEVICE_CPU, false, nullptr), TLRT_ERR_NULL_ARGUMENT, fn, "count");
  for (tlrt_device d : kMalformedDev) {
    for (bool reset : {false, true}) {
      uint64_t count = 77;
      char what[160];
      std::snprintf(what, sizeof what, "%s(device = 0x%08x, reset = %d)", fn, d, (int)reset);
      expect_fail(__LINE__, what, tlrt_index_faults(d, reset, &count), TLRT_ERR_INVALID_ARGUMENT,
                  fn, {"device"});
      TH_CHECK_MSG(count == 0, "%s: count = %llu, expected 0 on failure", what,
                   (unsigned long long)count);
    }
  }
  const uint32_t rs = tlrt_runtime_status();
  std::vector<std::pair<tlrt_device, tlrt_status>> absent;
  if (rs == TLRT_RUNTIME_CPU_ONLY) {
    absent = {{TLRT_DEVICE_CUDA(0), TLRT_ERR_BACKEND_UNAVAILABLE},
              {TLRT_DEVICE_CUDA(5), TLRT_ERR_BACKEND_UNAVAILABLE}};
  } else if (rs == TLRT_RUNTIME_CUDA_NO_DEVICE) {
    absent = {{TLRT_DEVICE_CUDA(0), TLRT_ERR_NO_DEVICE}};
  } else {
    uint32_t n = 0;
    TH_OK(tlrt_device_count(TLRT_DEVICE_KIND_CUDA, &n));
    absent = {{TLRT_DEVICE_CUDA(n), TLRT_ERR_NO_DEVICE}};
  }
  for (const auto &a : absent) {
    uint64_t count = 77;
    char what[160];
    std::snprintf(what, sizeof what, "%s(device = cuda:%u)", fn, TLRT_DEVICE_ORDINAL(a.first));
    expect_fail(__LINE__, what, tlrt_index_faults(a.first, true, &count), a.second, fn,
                {"device"});
    TH_CHECK_MSG(count == 0, "%s: count = %llu, expected 0 on failure", what,
                 (unsigned long long)count);
  }
  // The CPU works; a failing call (above) does not reset the counter: a fault counted before is
  // still there after them.
  uint64_t count = 77;
  TH_OK(tlrt_index_faults(TLRT_DEVICE_CPU, true, &count));
  IFixture g = make_ifixture();
  Buf v(th::upload({1, 2, 3, 4})), y;
  TH_OK(tlrt_gather_vec_ibuf(v.get(), 4, g.bad32, y.out()));  // 2 faults
  BAD(tlrt_index_faults(TLRT_DEVICE_CPU, true, nullptr), TLRT_ERR_NULL_ARGUMENT, fn, "count");
  TH_OK(tlrt_index_faults(TLRT_DEVICE_CPU, false, &count));
  TH_CHECK_MSG(count == 2, "%s: count %llu, expected 2", fn, (unsigned long long)count);
  TH_OK(tlrt_index_faults(TLRT_DEVICE_CPU, true, &count));
  TH_CHECK_MSG(count == 2, "%s: count %llu, expected 2", fn, (unsigned long long)count);
  TH_OK(tlrt_index_faults(TLRT_DEVICE_CPU, false, &count));
  TH_CHECK_MSG(count == 0, "%s: count %llu after a reset, expected 0", fn,
               (unsigned long long)count);
  // A failing _ibuf call counts nothing.
  tlrt_buffer *out = kSentinel;
  BAD(tlrt_gather_vec_ibuf(v.get(), 5, g.bad64, &out), TLRT_ERR_SHAPE, "tlrt_gather_vec_ibuf", "v",
      "n");
  CLEARED(out);
  TH_OK(tlrt_index_faults(TLRT_DEVICE_CPU, true, &count));
  TH_CHECK_MSG(count == 0, "%s: a failing call counted %llu faults", fn, (unsigned long long)count);
  free_ifixture(g);
}

void check_mixed(const Fixture &f) {
  if (!th::cuda_ready()) {
    std::printf("no usable CUDA device: mixed-device checks skipped\n");
    return;
  }
  tlrt_buffer *c4 = nullptr;
  TH_OK(tlrt_buffer_to_device(f.a, TLRT_DEVICE_CUDA(0), &c4));
  if (c4 == nullptr) return;
  tlrt_buffer *out = kSentinel;
  const uint64_t l4[4] = {0, 1, 2, 3};
  BAD(tlrt_scatter_add(f.a, c4, 4, l4, 4, &out), TLRT_ERR_DEVICE_MISMATCH, "tlrt_scatter_add", "x",
      "vals");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_scatter_add(c4, f.b, 4, l4, 4, &out), TLRT_ERR_DEVICE_MISMATCH, "tlrt_scatter_add",
      "x", "vals");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_scatter_add_row(f.a, c4, 1, 4, 0, &out), TLRT_ERR_DEVICE_MISMATCH,
      "tlrt_scatter_add_row", "mat", "row");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_scatter_add_rows(c4, f.b, 1, 4, l4, 1, &out), TLRT_ERR_DEVICE_MISMATCH,
      "tlrt_scatter_add_rows", "mat", "vals");
  CLEARED(out);
  // Single-buffer gathers on CUDA work and stay there.
  out = nullptr;
  TH_OK(tlrt_gather_vec(c4, 4, l4, 4, &out));
  tlrt_device d = 0;
  if (out) {
    TH_OK(tlrt_buffer_device(out, &d));
    TH_CHECK(d == TLRT_DEVICE_CUDA(0));
  }
  tlrt_buffer_free(out);
  out = nullptr;
  TH_OK(tlrt_gather_rows(c4, 2, 2, l4, 4, &out));
  expect_result("tlrt_gather_rows", out, 8);

  // Index buffers: idx (or vals) on another device than the data, naming both; the dtype before
  // the device, the device before the shape.
  {
    Buf gi(ibuf64({0, 1, 2, 3}, TLRT_DEVICE_CUDA(0))), ci(ibuf64({0, 1, 2, 3}));
    Buf gi1(ibuf32({1}, TLRT_DEVICE_CUDA(0))), ci1(ibuf32({1}));
    const char *gv = "tlrt_gather_vec_ibuf", *sa = "tlrt_scatter_add_ibuf";
    const char *gr = "tlrt_gather_rows_ibuf", *sr = "tlrt_scatter_add_rows_ibuf";
    out = kSentinel;
    BAD(tlrt_gather_vec_ibuf(f.a, 4, gi.get(), &out), TLRT_ERR_DEVICE_MISMATCH, gv, "v", "idx");
    CLEARED(out);
    out = kSentinel;
    BAD(tlrt_gather_vec_ibuf(c4, 4, ci.get(), &out), TLRT_ERR_DEVICE_MISMATCH, gv, "v", "idx");
    CLEARED(out);
    out = kSentinel;
    BAD(tlrt_gather_vec_ibuf(c4, 7, ci.get(), &out), TLRT_ERR_DEVICE_MISMATCH, gv, "v", "idx");
    CLEARED(out);
    out = kSentinel;
    BAD(tlrt_gather_vec_ibuf(c4, 7, f.b, &out), TLRT_ERR_DTYPE, gv, "idx");
    CLEARED(out);
    out = kSentinel;
    BAD(tlrt_scatter_add_ibuf(f.a, f.b, 4, gi.get(), &out), TLRT_ERR_DEVICE_MISMATCH, sa, "x",
        "idx");
    CLEARED(out);
    out = kSentinel;
    BAD(tlrt_scatter_add_ibuf(nullptr, f.b, 4, gi.get(), &out), TLRT_ERR_DEVICE_MISMATCH, sa,
        "vals", "idx");
    CLEARED(out);
    out = kSentinel;
    BAD(tlrt_scatter_add_ibuf(c4, f.b, 4, gi.get(), &out), TLRT_ERR_DEVICE_MISMATCH, sa, "x",
        "vals");
    CLEARED(out);
    out = kSentinel;
    BAD(tlrt_scatter_add_ibuf(nullptr, c4, 9, ci.get(), &out), TLRT_ERR_DEVICE_MISMATCH, sa,
        "vals", "idx");
    CLEARED(out);
    out = kSentinel;
    BAD(tlrt_scatter_add_ibuf(nullptr, c4, 4, f.b, &out), TLRT_ERR_DTYPE, sa, "idx");
    CLEARED(out);
    out = kSentinel;
    BAD(tlrt_gather_rows_ibuf(f.a, 2, 2, gi.get(), &out), TLRT_ERR_DEVICE_MISMATCH, gr, "mat",
        "idx");
    CLEARED(out);
    out = kSentinel;
    BAD(tlrt_gather_rows_ibuf(c4, 3, 3, ci.get(), &out), TLRT_ERR_DEVICE_MISMATCH, gr, "mat",
        "idx");
    CLEARED(out);
    out = kSentinel;
    BAD(tlrt_scatter_add_rows_ibuf(f.a, f.b, 1, 4, gi1.get(), &out), TLRT_ERR_DEVICE_MISMATCH, sr,
        "mat", "idx");
    CLEARED(out);
    out = kSentinel;
    BAD(tlrt_scatter_add_rows_ibuf(nullptr, f.b, 1, 4, gi1.get(), &out), TLRT_ERR_DEVICE_MISMATCH,
        sr, "vals", "idx");
    CLEARED(out);
    out = kSentinel;
    BAD(tlrt_scatter_add_rows_ibuf(c4, f.b, 1, 4, gi1.get(), &out), TLRT_ERR_DEVICE_MISMATCH, sr,
        "mat", "vals");
    CLEARED(out);
    out = kSentinel;
    BAD(tlrt_scatter_add_rows_ibuf(nullptr, c4, 1, 4, ci1.get(), &out), TLRT_ERR_DEVICE_MISMATCH,
        sr, "vals", "idx");
    CLEARED(out);
    // All on CUDA: the outputs stay there; the CUDA fault counter is read.
    for (bool null_base : {false, true}) {
      out = nullptr;
      TH_OK(tlrt_scatter_add_ibuf(null_base ? nullptr : c4, c4, 4, gi.get(), &out));
      if (out) {
        TH_OK(tlrt_buffer_device(out, &d));
        TH_CHECK(d == TLRT_DEVICE_CUDA(0));
      }
      expect_result(sa, out, 4);
      out = nullptr;
      TH_OK(tlrt_scatter_add_rows_ibuf(null_base ? nullptr : c4, c4, 1, 4, gi1.get(), &out));
      expect_result(sr, out, 4);
    }
    out = nullptr;
    TH_OK(tlrt_gather_vec_ibuf(c4, 4, gi.get(), &out));
    expect_result(gv, out, 4);
    out = nullptr;
    TH_OK(tlrt_gather_rows_ibuf(c4, 2, 2, gi.get(), &out));
    expect_result(gr, out, 8);
    uint64_t count = 77;
    TH_OK(tlrt_index_faults(TLRT_DEVICE_CUDA(0), true, &count));
    TH_OK(tlrt_index_faults(TLRT_DEVICE_CUDA(0), false, &count));
    TH_CHECK(count == 0);
  }
  tlrt_buffer_free(c4);
}

}  // namespace

int main() {
  (void)expect_either;  // shared by bad_input.hpp; no call here leaves the precedence open
  const tlrt_allocator_stats start = th::stats();
  {
    Fixture f = make_fixture();
    check_gather_vec(f);
    check_scatter_add(f);
    check_gather_rows(f);
    check_scatter_add_row(f);
    check_scatter_add_rows(f);
    IFixture g = make_ifixture();
    check_gather_vec_ibuf(f, g);
    check_scatter_add_ibuf(f, g);
    check_gather_rows_ibuf(f, g);
    check_scatter_add_rows_ibuf(f, g);
    check_index_flat_rows(f, g);
    free_ifixture(g);
    check_index_faults();
    check_mixed(f);
    free_fixture(f);
  }
  expect_no_leaks(start);
  return th::finish("test_bad_input_index");
}
