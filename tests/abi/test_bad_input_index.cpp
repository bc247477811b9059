// Bad input for the entry points of abi/tlrt_index.h: every pointer argument NULL (idx only when
// k > 0: with k == 0 a NULL list is valid), released buffers, sizes that do not match (products
// beyond 64 bits included), k beyond TLRT_MAX_ELEMENTS, outputs beyond TLRT_MAX_ELEMENTS, entries
// that cannot be indices (>= 2^60), mixed devices where a CUDA device is usable, and the order of
// precedence the header states between these codes. Each failing call must return the exact
// status, leave its out-parameter NULL, and name the function and the argument(s) in
// tlrt_last_error(); nothing may leak.
#include "bad_input.hpp"

namespace {

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
    check_mixed(f);
    free_fixture(f);
  }
  expect_no_leaks(start);
  return th::finish("test_bad_input_index");
}
