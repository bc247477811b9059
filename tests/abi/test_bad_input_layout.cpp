// Bad input for every entry point of abi/tlrt_layout.h: NULL for each pointer argument, released
// inputs, sizes that do not match the stated shape (products beyond 64 bits included: they wrap to
// small values in 64-bit arithmetic and must never pass), out-of-range slices (start + len beyond
// the end, sums that wrap), ranks, depths, axis maps and permutations outside their domains,
// outputs beyond TLRT_MAX_ELEMENTS or 2^64, and (with a usable GPU) inputs on different devices.
// Each failure must return the documented status, clear the out-parameter and name the function
// and the offending arguments in tlrt_last_error(); good calls around each boundary must succeed
// with the right output size; nothing leaks.
#include "bad_input.hpp"

namespace {

const uint64_t k32 = uint64_t{1} << 32;
const uint64_t k62 = uint64_t{1} << 62;
const uint64_t k63 = uint64_t{1} << 63;

// A successful call: status OK and an output of n elements (freed).
#define GOOD(call, fn, n)                                                              \
  do {                                                                                 \
    tlrt_buffer *good_out_ = nullptr;                                                  \
    const tlrt_status good_s_ = (call);                                                \
    TH_CHECK_MSG(good_s_ == TLRT_OK, "%s: %s failed: %s", fn, #call, tlrt_last_error()); \
    if (good_s_ == TLRT_OK) expect_result(fn, good_out_, (n));                         \
    else if (good_out_ != nullptr) tlrt_buffer_free(good_out_);                        \
  } while (0)

// For the GOOD macro: the out-parameter it provides.
#define OUT (&good_out_)

void check_concat1d(const Fixture &f) {
  const char *fn = "tlrt_concat1d";
  tlrt_buffer *out = kSentinel;
  BAD(tlrt_concat1d(nullptr, f.b, 4, 4, &out), TLRT_ERR_NULL_ARGUMENT, fn, "a");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_concat1d(f.a, nullptr, 4, 4, &out), TLRT_ERR_NULL_ARGUMENT, fn, "b");
  CLEARED(out);
  BAD(tlrt_concat1d(f.a, f.b, 4, 4, nullptr), TLRT_ERR_NULL_ARGUMENT, fn, "out");
  out = kSentinel;
  BAD(tlrt_concat1d(f.released, f.b, 4, 4, &out), TLRT_ERR_RELEASED, fn, "a");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_concat1d(f.a, f.released, 4, 4, &out), TLRT_ERR_RELEASED, fn, "b");
  CLEARED(out);
  for (uint64_t n : {uint64_t{0}, uint64_t{3}, uint64_t{5}, k32 + 4, UINT64_MAX}) {
    out = kSentinel;
    BAD(tlrt_concat1d(f.a, f.b, n, 4, &out), TLRT_ERR_SHAPE, fn, "a", "n");
    CLEARED(out);
    out = kSentinel;
    BAD(tlrt_concat1d(f.a, f.b, 4, n, &out), TLRT_ERR_SHAPE, fn, "b", "m");
    CLEARED(out);
  }
  out = kSentinel;
  BAD(tlrt_concat1d(f.empty, f.short3, 1, 3, &out), TLRT_ERR_SHAPE, fn, "a", "n");
  CLEARED(out);
  GOOD(tlrt_concat1d(f.a, f.b, 4, 4, OUT), fn, 8);
  GOOD(tlrt_concat1d(f.empty, f.short3, 0, 3, OUT), fn, 3);
  GOOD(tlrt_concat1d(f.short3, f.empty, 3, 0, OUT), fn, 3);
  GOOD(tlrt_concat1d(f.empty, f.empty, 0, 0, OUT), fn, 0);
  GOOD(tlrt_concat1d(f.a, f.a, 4, 4, OUT), fn, 8);  // the same buffer twice
}

void check_slice1d(const Fixture &f) {
  const char *fn = "tlrt_slice1d";
  tlrt_buffer *out = kSentinel;
  BAD(tlrt_slice1d(nullptr, 4, 0, 1, &out), TLRT_ERR_NULL_ARGUMENT, fn, "x");
  CLEARED(out);
  BAD(tlrt_slice1d(f.a, 4, 0, 1, nullptr), TLRT_ERR_NULL_ARGUMENT, fn, "out");
  out = kSentinel;
  BAD(tlrt_slice1d(f.released, 4, 0, 1, &out), TLRT_ERR_RELEASED, fn, "x");
  CLEARED(out);
  for (uint64_t n : {uint64_t{0}, uint64_t{3}, uint64_t{5}, k32 + 4, UINT64_MAX}) {
    out = kSentinel;
    BAD(tlrt_slice1d(f.a, n, 0, 0, &out), TLRT_ERR_SHAPE, fn, "x", "n");
    CLEARED(out);
  }
  struct Cut {
    uint64_t start, len;
  };
  for (Cut c : {Cut{5, 0}, Cut{4, 1}, Cut{1, 4}, Cut{0, 5}, Cut{UINT64_MAX, 1}, Cut{1, UINT64_MAX},
                Cut{UINT64_MAX, UINT64_MAX}, Cut{2, UINT64_MAX - 1}, Cut{k63, k63}}) {
    out = kSentinel;
    BAD(tlrt_slice1d(f.a, 4, c.start, c.len, &out), TLRT_ERR_INDEX, fn, "start", "len");
    CLEARED(out);
  }
  out = kSentinel;
  BAD(tlrt_slice1d(f.empty, 0, 0, 1, &out), TLRT_ERR_INDEX, fn, "start", "len");
  CLEARED(out);
  GOOD(tlrt_slice1d(f.a, 4, 0, 4, OUT), fn, 4);
  GOOD(tlrt_slice1d(f.a, 4, 1, 3, OUT), fn, 3);
  GOOD(tlrt_slice1d(f.a, 4, 4, 0, OUT), fn, 0);
  GOOD(tlrt_slice1d(f.a, 4, 2, 0, OUT), fn, 0);
  GOOD(tlrt_slice1d(f.empty, 0, 0, 0, OUT), fn, 0);
}

void check_concat_axis0(const Fixture &f) {
  const char *fn = "tlrt_concat_axis0";
  tlrt_buffer *out = kSentinel;
  BAD(tlrt_concat_axis0(nullptr, f.b, 2, 2, 2, &out), TLRT_ERR_NULL_ARGUMENT, fn, "a");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_concat_axis0(f.a, nullptr, 2, 2, 2, &out), TLRT_ERR_NULL_ARGUMENT, fn, "b");
  CLEARED(out);
  BAD(tlrt_concat_axis0(f.a, f.b, 2, 2, 2, nullptr), TLRT_ERR_NULL_ARGUMENT, fn, "out");
  out = kSentinel;
  BAD(tlrt_concat_axis0(f.released, f.b, 2, 2, 2, &out), TLRT_ERR_RELEASED, fn, "a");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_concat_axis0(f.a, f.released, 2, 2, 2, &out), TLRT_ERR_RELEASED, fn, "b");
  CLEARED(out);
  // rows * inner != size (beyond 64 bits included: 2^32 * 2^32 wraps to 0).
  struct Shape {
    uint64_t rows, inner;
  };
  for (Shape s : {Shape{3, 1}, Shape{2, 3}, Shape{0, 4}, Shape{4, 0}, Shape{k32 + 2, 2},
                  Shape{k32, k32}, Shape{UINT64_MAX, UINT64_MAX}}) {
    out = kSentinel;
    BAD(tlrt_concat_axis0(f.a, f.b, s.rows, 4 / (s.inner ? s.inner : 1), s.inner, &out),
        TLRT_ERR_SHAPE, fn, "a", "rows_a", "inner");
    CLEARED(out);
  }
  for (Shape s : {Shape{3, 2}, Shape{1, 2}, Shape{k32 + 2, 2}}) {
    out = kSentinel;
    BAD(tlrt_concat_axis0(f.a, f.b, 2, s.rows, s.inner, &out), TLRT_ERR_SHAPE, fn, "b", "rows_b",
        "inner");
    CLEARED(out);
  }
  out = kSentinel;
  BAD(tlrt_concat_axis0(f.empty, f.empty, k32, k32, k32, &out), TLRT_ERR_SHAPE, fn, "a",
      "rows_a", "inner");
  CLEARED(out);
  // rows_a + rows_b beyond 64 bits (possible only with inner == 0).
  out = kSentinel;
  BAD(tlrt_concat_axis0(f.empty, f.empty, k63, k63, 0, &out), TLRT_ERR_OVERFLOW, fn, "rows_a",
      "rows_b");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_concat_axis0(f.empty, f.empty, UINT64_MAX, 1, 0, &out), TLRT_ERR_OVERFLOW, fn,
      "rows_a", "rows_b");
  CLEARED(out);
  GOOD(tlrt_concat_axis0(f.a, f.b, 2, 2, 2, OUT), fn, 8);
  GOOD(tlrt_concat_axis0(f.a, f.b, 1, 1, 4, OUT), fn, 8);
  GOOD(tlrt_concat_axis0(f.a, f.empty, 4, 0, 1, OUT), fn, 4);
  GOOD(tlrt_concat_axis0(f.empty, f.short3, 0, 1, 3, OUT), fn, 3);
  GOOD(tlrt_concat_axis0(f.empty, f.empty, k62, k62, 0, OUT), fn, 0);
}

void check_slice_axis0(const Fixture &f) {
  const char *fn = "tlrt_slice_axis0";
  tlrt_buffer *out = kSentinel;
  BAD(tlrt_slice_axis0(nullptr, 2, 2, 0, 1, &out), TLRT_ERR_NULL_ARGUMENT, fn, "x");
  CLEARED(out);
  BAD(tlrt_slice_axis0(f.a, 2, 2, 0, 1, nullptr), TLRT_ERR_NULL_ARGUMENT, fn, "out");
  out = kSentinel;
  BAD(tlrt_slice_axis0(f.released, 2, 2, 0, 1, &out), TLRT_ERR_RELEASED, fn, "x");
  CLEARED(out);
  struct Shape {
    const tlrt_buffer *x;
    uint64_t rows, inner;
  };
  for (Shape s : {Shape{f.a, 3, 1}, Shape{f.a, 2, 3}, Shape{f.a, 0, 4}, Shape{f.a, 4, 0},
                  Shape{f.a, k32, k32}, Shape{f.a, UINT64_MAX, UINT64_MAX},
                  Shape{f.empty, k32, k32}, Shape{f.empty, 1, 1}}) {
    out = kSentinel;
    BAD(tlrt_slice_axis0(s.x, s.rows, s.inner, 0, 0, &out), TLRT_ERR_SHAPE, fn, "x", "rows",
        "inner");
    CLEARED(out);
  }
  struct Cut {
    uint64_t start, len;
  };
  for (Cut c : {Cut{3, 0}, Cut{2, 1}, Cut{1, 2}, Cut{0, 3}, Cut{UINT64_MAX, 1}, Cut{1, UINT64_MAX},
                Cut{2, UINT64_MAX - 1}, Cut{k63, k63}}) {
    out = kSentinel;
    BAD(tlrt_slice_axis0(f.a, 2, 2, c.start, c.len, &out), TLRT_ERR_INDEX, fn, "start", "len");
    CLEARED(out);
  }
  // Empty rows: the row count still bounds the slice.
  out = kSentinel;
  BAD(tlrt_slice_axis0(f.empty, 5, 0, 3, 3, &out), TLRT_ERR_INDEX, fn, "start", "len");
  CLEARED(out);
  GOOD(tlrt_slice_axis0(f.a, 2, 2, 0, 2, OUT), fn, 4);
  GOOD(tlrt_slice_axis0(f.a, 2, 2, 1, 1, OUT), fn, 2);
  GOOD(tlrt_slice_axis0(f.a, 2, 2, 2, 0, OUT), fn, 0);
  GOOD(tlrt_slice_axis0(f.a, 4, 1, 1, 3, OUT), fn, 3);
  GOOD(tlrt_slice_axis0(f.empty, 0, 5, 0, 0, OUT), fn, 0);
  GOOD(tlrt_slice_axis0(f.empty, UINT64_MAX, 0, 1, UINT64_MAX - 1, OUT), fn, 0);
}

using VecFn = tlrt_status (*)(const tlrt_buffer *, uint64_t, uint64_t, tlrt_buffer **);

// rows_side: the vector's length is rows (vec_to_cols) rather than cols (vec_to_rows).
void check_vec_broadcast(const char *fn, VecFn call, bool rows_side, const Fixture &f) {
  const char *len_arg = rows_side ? "rows" : "cols";
  // (rows, cols) with the vector's side = n.
  auto shape = [&](uint64_t n, uint64_t other, uint64_t *r, uint64_t *c) {
    *r = rows_side ? n : other;
    *c = rows_side ? other : n;
  };
  uint64_t r = 0, c = 0;
  tlrt_buffer *out = kSentinel;
  shape(4, 3, &r, &c);
  BAD(call(nullptr, r, c, &out), TLRT_ERR_NULL_ARGUMENT, fn, "v");
  CLEARED(out);
  BAD(call(f.a, r, c, nullptr), TLRT_ERR_NULL_ARGUMENT, fn, "out");
  out = kSentinel;
  BAD(call(f.released, r, c, &out), TLRT_ERR_RELEASED, fn, "v");
  CLEARED(out);
  // The vector's length differs from its side.
  for (uint64_t n : {uint64_t{0}, uint64_t{3}, uint64_t{5}, k32 + 4, UINT64_MAX}) {
    shape(n, 2, &r, &c);
    out = kSentinel;
    BAD(call(f.a, r, c, &out), TLRT_ERR_SHAPE, fn, "v", len_arg);
    CLEARED(out);
  }
  shape(1, 0, &r, &c);
  out = kSentinel;
  BAD(call(f.empty, r, c, &out), TLRT_ERR_SHAPE, fn, "v", len_arg);
  CLEARED(out);
  // Outputs beyond TLRT_MAX_ELEMENTS and beyond 64 bits.
  for (uint64_t other : {kTooMany, uint64_t{1} << 59, k62, UINT64_MAX}) {
    shape(4, other, &r, &c);
    out = kSentinel;
    BAD(call(f.a, r, c, &out), TLRT_ERR_OVERFLOW, fn, "rows", "cols");
    CLEARED(out);
  }
  shape(0, kTooMany, &r, &c);
  GOOD(call(f.empty, r, c, OUT), fn, 0);  // 0 * anything: empty, no error
  shape(0, UINT64_MAX, &r, &c);
  GOOD(call(f.empty, r, c, OUT), fn, 0);
  shape(4, 3, &r, &c);
  GOOD(call(f.a, r, c, OUT), fn, 12);
  shape(4, 0, &r, &c);
  GOOD(call(f.a, r, c, OUT), fn, 0);
  shape(3, 1, &r, &c);
  GOOD(call(f.short3, r, c, OUT), fn, 3);
}

void check_broadcast_to(const Fixture &f) {
  const char *fn = "tlrt_broadcast_to";
  th::Buf one(th::upload({2.5f}));
  // f.a (4 elements) as (4) broadcast to (3, 4): axis 0 inserted, axis 1 reads input axis 0.
  const uint64_t in4[1] = {4}, out34[2] = {3, 4};
  const uint32_t map01[2] = {0, 1};
  tlrt_buffer *out = kSentinel;
  BAD(tlrt_broadcast_to(nullptr, in4, 1, out34, 2, map01, &out), TLRT_ERR_NULL_ARGUMENT, fn, "x");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_broadcast_to(f.a, nullptr, 1, out34, 2, map01, &out), TLRT_ERR_NULL_ARGUMENT, fn,
      "in_dims");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_broadcast_to(f.a, in4, 1, nullptr, 2, map01, &out), TLRT_ERR_NULL_ARGUMENT, fn,
      "out_dims");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_broadcast_to(f.a, in4, 1, out34, 2, nullptr, &out), TLRT_ERR_NULL_ARGUMENT, fn,
      "axis_map");
  CLEARED(out);
  BAD(tlrt_broadcast_to(f.a, in4, 1, out34, 2, map01, nullptr), TLRT_ERR_NULL_ARGUMENT, fn, "out");
  out = kSentinel;
  BAD(tlrt_broadcast_to(f.released, in4, 1, out34, 2, map01, &out), TLRT_ERR_RELEASED, fn, "x");
  CLEARED(out);
  // Ranks beyond 8.
  const uint64_t ones9[9] = {1, 1, 1, 1, 1, 1, 1, 1, 4};
  const uint32_t map9[9] = {0, 0, 0, 0, 0, 0, 0, 0, 9};
  out = kSentinel;
  BAD(tlrt_broadcast_to(f.a, ones9, 9, out34, 2, map01, &out), TLRT_ERR_INVALID_ARGUMENT, fn,
      "in_rank");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_broadcast_to(f.a, in4, 1, ones9, 9, map9, &out), TLRT_ERR_INVALID_ARGUMENT, fn,
      "out_rank");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_broadcast_to(f.a, in4, 1, out34, UINT32_MAX, map01, &out), TLRT_ERR_INVALID_ARGUMENT,
      fn, "out_rank");
  CLEARED(out);
  // prod(in_dims) != size of x (beyond 64 bits included; rank 0 = one element).
  const uint64_t in3[1] = {3}, in22x[2] = {k32, k32};
  out = kSentinel;
  BAD(tlrt_broadcast_to(f.a, in3, 1, out34, 2, map01, &out), TLRT_ERR_SHAPE, fn, "x", "in_dims");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_broadcast_to(f.a, nullptr, 0, out34, 2, map01, &out), TLRT_ERR_SHAPE, fn, "x",
      "in_dims");
  CLEARED(out);
  const uint64_t out_k[2] = {k32, k32};
  const uint32_t map12[2] = {1, 2};
  out = kSentinel;
  BAD(tlrt_broadcast_to(f.empty, in22x, 2, out_k, 2, map12, &out), TLRT_ERR_SHAPE, fn, "x",
      "in_dims");
  CLEARED(out);
  // An axis_map entry beyond in_rank.
  for (uint32_t a : {2u, 9u, UINT32_MAX}) {
    const uint32_t map[2] = {a, 1};
    out = kSentinel;
    BAD(tlrt_broadcast_to(f.a, in4, 1, out34, 2, map, &out), TLRT_ERR_INDEX, fn, "axis_map");
    CLEARED(out);
  }
  // An input axis mapped twice.
  const uint64_t out44[2] = {4, 4};
  const uint32_t map11[2] = {1, 1};
  out = kSentinel;
  BAD(tlrt_broadcast_to(f.a, in4, 1, out44, 2, map11, &out), TLRT_ERR_INVALID_ARGUMENT, fn,
      "axis_map");
  CLEARED(out);
  // The header's order holds over the whole map: an index beyond in_rank (TLRT_ERR_INDEX) and a
  // duplicate (TLRT_ERR_INVALID_ARGUMENT) are reported before a size mismatch at an earlier entry
  // (in_dims[0] = 4 against out_dims[0] = 3 at axis_map[0]).
  const uint32_t map19[2] = {1, 9};
  out = kSentinel;
  BAD(tlrt_broadcast_to(f.a, in4, 1, out34, 2, map19, &out), TLRT_ERR_INDEX, fn, "axis_map");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_broadcast_to(f.a, in4, 1, out34, 2, map11, &out), TLRT_ERR_INVALID_ARGUMENT, fn,
      "axis_map");
  CLEARED(out);
  // A mapped input axis neither 1 nor the output's size; an unmapped input axis of size != 1.
  const uint64_t out5[1] = {5}, out22[2] = {2, 2};
  const uint32_t map1[1] = {1}, map00[2] = {0, 0};
  out = kSentinel;
  BAD(tlrt_broadcast_to(f.a, in4, 1, out5, 1, map1, &out), TLRT_ERR_SHAPE, fn, "in_dims",
      "out_dims");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_broadcast_to(f.a, in4, 1, out22, 2, map00, &out), TLRT_ERR_SHAPE, fn, "in_dims");
  CLEARED(out);
  // Outputs beyond TLRT_MAX_ELEMENTS and beyond 64 bits.
  const uint64_t in1[1] = {1}, out_many[1] = {kTooMany};
  out = kSentinel;
  BAD(tlrt_broadcast_to(one.get(), in1, 1, out_many, 1, map1, &out), TLRT_ERR_OVERFLOW, fn,
      "out_dims");
  CLEARED(out);
  const uint64_t k40 = uint64_t{1} << 40;
  const uint64_t out_huge[2] = {k40, k40};
  out = kSentinel;
  BAD(tlrt_broadcast_to(one.get(), nullptr, 0, out_huge, 2, map00, &out), TLRT_ERR_OVERFLOW, fn,
      "out_dims");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_broadcast_to(f.a, in4, 1, out_k, 2, map01, &out), TLRT_ERR_SHAPE, fn, "in_dims");
  CLEARED(out);  // (the size check of the mapped axis comes first: 4 != 2^32)
  // Good calls.
  GOOD(tlrt_broadcast_to(f.a, in4, 1, out34, 2, map01, OUT), fn, 12);
  const uint64_t out4[1] = {4};
  const uint32_t map0[1] = {0};
  GOOD(tlrt_broadcast_to(one.get(), nullptr, 0, out4, 1, map0, OUT), fn, 4);
  GOOD(tlrt_broadcast_to(one.get(), nullptr, 0, nullptr, 0, nullptr, OUT), fn, 1);
  GOOD(tlrt_broadcast_to(one.get(), in1, 1, nullptr, 0, nullptr, OUT), fn, 1);  // unmapped 1
  const uint64_t in0[1] = {0}, out0[1] = {0}, out0k[2] = {kTooMany, 0};
  GOOD(tlrt_broadcast_to(f.empty, in0, 1, out0, 1, map1, OUT), fn, 0);
  const uint32_t map01b[2] = {0, 1};
  GOOD(tlrt_broadcast_to(f.empty, in0, 1, out0k, 2, map01b, OUT), fn, 0);
  const uint64_t out_empty_many[2] = {0, kTooMany};
  GOOD(tlrt_broadcast_to(one.get(), in1, 1, out_empty_many, 2, map01b, OUT), fn, 0);
}

void check_transpose2d(const Fixture &f) {
  const char *fn = "tlrt_transpose2d";
  tlrt_buffer *out = kSentinel;
  BAD(tlrt_transpose2d(nullptr, 2, 2, &out), TLRT_ERR_NULL_ARGUMENT, fn, "x");
  CLEARED(out);
  BAD(tlrt_transpose2d(f.a, 2, 2, nullptr), TLRT_ERR_NULL_ARGUMENT, fn, "out");
  out = kSentinel;
  BAD(tlrt_transpose2d(f.released, 2, 2, &out), TLRT_ERR_RELEASED, fn, "x");
  CLEARED(out);
  struct Shape {
    const tlrt_buffer *x;
    uint64_t rows, cols;
  };
  for (Shape s : {Shape{f.a, 3, 1}, Shape{f.a, 1, 3}, Shape{f.a, 2, 3}, Shape{f.a, 0, 4},
                  Shape{f.a, 4, 0}, Shape{f.a, k32 + 4, 1}, Shape{f.a, k32, k32},
                  Shape{f.a, UINT64_MAX, UINT64_MAX}, Shape{f.empty, k32, k32},
                  Shape{f.empty, 1, 1}, Shape{f.short3, 3, 3}}) {
    out = kSentinel;
    BAD(tlrt_transpose2d(s.x, s.rows, s.cols, &out), TLRT_ERR_SHAPE, fn, "x", "rows", "cols");
    CLEARED(out);
  }
  GOOD(tlrt_transpose2d(f.a, 2, 2, OUT), fn, 4);
  GOOD(tlrt_transpose2d(f.a, 4, 1, OUT), fn, 4);
  GOOD(tlrt_transpose2d(f.a, 1, 4, OUT), fn, 4);
  GOOD(tlrt_transpose2d(f.empty, 0, 3, OUT), fn, 0);
  GOOD(tlrt_transpose2d(f.empty, 3, 0, OUT), fn, 0);
  GOOD(tlrt_transpose2d(f.empty, UINT64_MAX, 0, OUT), fn, 0);
}

void check_swap_adjacent(const Fixture &f) {
  const char *fn = "tlrt_swap_adjacent_at_depth";
  const uint64_t d22[2] = {2, 2};
  const uint64_t d9[9] = {1, 1, 1, 1, 4, 1, 1, 1, 1};
  tlrt_buffer *out = kSentinel;
  BAD(tlrt_swap_adjacent_at_depth(nullptr, d22, 2, 0, &out), TLRT_ERR_NULL_ARGUMENT, fn, "x");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_swap_adjacent_at_depth(f.a, nullptr, 2, 0, &out), TLRT_ERR_NULL_ARGUMENT, fn, "dims");
  CLEARED(out);
  BAD(tlrt_swap_adjacent_at_depth(f.a, d22, 2, 0, nullptr), TLRT_ERR_NULL_ARGUMENT, fn, "out");
  out = kSentinel;
  BAD(tlrt_swap_adjacent_at_depth(f.released, d22, 2, 0, &out), TLRT_ERR_RELEASED, fn, "x");
  CLEARED(out);
  for (uint32_t rank : {0u, 1u, 9u, 100u, UINT32_MAX}) {
    out = kSentinel;
    BAD(tlrt_swap_adjacent_at_depth(f.a, d9, rank, 0, &out), TLRT_ERR_INVALID_ARGUMENT, fn,
        "rank");
    CLEARED(out);
  }
  for (uint32_t depth : {1u, 2u, 7u, UINT32_MAX}) {
    out = kSentinel;
    BAD(tlrt_swap_adjacent_at_depth(f.a, d22, 2, depth, &out), TLRT_ERR_INDEX, fn, "depth");
    CLEARED(out);
  }
  out = kSentinel;
  BAD(tlrt_swap_adjacent_at_depth(f.a, d9, 8, 7, &out), TLRT_ERR_INDEX, fn, "depth");
  CLEARED(out);
  struct Dims {
    const tlrt_buffer *x;
    std::vector<uint64_t> d;
  };
  const std::vector<Dims> bad = {{f.a, {2, 3}},         {f.a, {4, 2}},   {f.a, {0, 4}},
                                 {f.a, {k32, k32}},     {f.a, {k32 + 4, 1}},
                                 {f.empty, {k32, k32}}, {f.empty, {1, 1}},
                                 {f.a, {2, 2, 1, 1, 1, 1, 1, 2}}, {f.short3, {1, 4}}};
  for (const Dims &s : bad) {
    out = kSentinel;
    BAD(tlrt_swap_adjacent_at_depth(s.x, s.d.data(), (uint32_t)s.d.size(), 0, &out),
        TLRT_ERR_SHAPE, fn, "x", "dims");
    CLEARED(out);
  }
  GOOD(tlrt_swap_adjacent_at_depth(f.a, d22, 2, 0, OUT), fn, 4);
  const uint64_t d122[3] = {1, 2, 2}, d03[2] = {0, 3};
  GOOD(tlrt_swap_adjacent_at_depth(f.a, d122, 3, 1, OUT), fn, 4);
  GOOD(tlrt_swap_adjacent_at_depth(f.empty, d03, 2, 0, OUT), fn, 0);
  GOOD(tlrt_swap_adjacent_at_depth(f.a, d9, 8, 6, OUT), fn, 4);
}

void check_permute(const Fixture &f) {
  const char *fn = "tlrt_permute";
  th::Buf one(th::upload({2.5f}));
  const uint64_t d22[2] = {2, 2};
  const uint32_t p10[2] = {1, 0};
  tlrt_buffer *out = kSentinel;
  BAD(tlrt_permute(nullptr, d22, 2, p10, &out), TLRT_ERR_NULL_ARGUMENT, fn, "x");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_permute(f.a, nullptr, 2, p10, &out), TLRT_ERR_NULL_ARGUMENT, fn, "dims");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_permute(f.a, d22, 2, nullptr, &out), TLRT_ERR_NULL_ARGUMENT, fn, "perm");
  CLEARED(out);
  BAD(tlrt_permute(f.a, d22, 2, p10, nullptr), TLRT_ERR_NULL_ARGUMENT, fn, "out");
  out = kSentinel;
  BAD(tlrt_permute(f.released, d22, 2, p10, &out), TLRT_ERR_RELEASED, fn, "x");
  CLEARED(out);
  const uint64_t d9[9] = {1, 1, 1, 1, 4, 1, 1, 1, 1};
  const uint32_t p9[9] = {8, 7, 6, 5, 4, 3, 2, 1, 0};
  for (uint32_t rank : {9u, 100u, UINT32_MAX}) {
    out = kSentinel;
    BAD(tlrt_permute(f.a, d9, rank, p9, &out), TLRT_ERR_INVALID_ARGUMENT, fn, "rank");
    CLEARED(out);
  }
  // Entries out of range (before repeats: {0, 0, 5} is reported as an index error).
  const uint64_t d221[3] = {2, 2, 1};
  for (const std::vector<uint32_t> &p :
       {std::vector<uint32_t>{0, 1, 3}, std::vector<uint32_t>{UINT32_MAX, 0, 1},
        std::vector<uint32_t>{0, 0, 5}, std::vector<uint32_t>{3, 3, 3}}) {
    out = kSentinel;
    BAD(tlrt_permute(f.a, d221, 3, p.data(), &out), TLRT_ERR_INDEX, fn, "perm");
    CLEARED(out);
  }
  for (const std::vector<uint32_t> &p :
       {std::vector<uint32_t>{0, 0, 1}, std::vector<uint32_t>{2, 1, 2},
        std::vector<uint32_t>{1, 1, 1}}) {
    out = kSentinel;
    BAD(tlrt_permute(f.a, d221, 3, p.data(), &out), TLRT_ERR_INVALID_ARGUMENT, fn, "perm");
    CLEARED(out);
  }
  // prod(dims) != size of x (rank 0 = one element; beyond 64 bits included).
  const uint32_t p012[3] = {0, 1, 2};
  const uint64_t d23x[3] = {2, 3, 1}, dk[3] = {k32, k32, 1}, d41[3] = {4, 1, 0};
  for (const uint64_t *d : {d23x, dk, d41}) {
    out = kSentinel;
    BAD(tlrt_permute(f.a, d, 3, p012, &out), TLRT_ERR_SHAPE, fn, "x", "dims");
    CLEARED(out);
  }
  out = kSentinel;
  BAD(tlrt_permute(f.empty, dk, 3, p012, &out), TLRT_ERR_SHAPE, fn, "x", "dims");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_permute(f.a, nullptr, 0, nullptr, &out), TLRT_ERR_SHAPE, fn, "x", "dims");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_permute(f.empty, nullptr, 0, nullptr, &out), TLRT_ERR_SHAPE, fn, "x", "dims");
  CLEARED(out);
  GOOD(tlrt_permute(f.a, d22, 2, p10, OUT), fn, 4);
  GOOD(tlrt_permute(one.get(), nullptr, 0, nullptr, OUT), fn, 1);
  const uint64_t d03[2] = {0, 3};
  GOOD(tlrt_permute(f.empty, d03, 2, p10, OUT), fn, 0);
  const uint64_t d8[8] = {1, 1, 1, 1, 4, 1, 1, 1};
  const uint32_t p8[8] = {7, 6, 5, 4, 3, 2, 1, 0};
  GOOD(tlrt_permute(f.a, d8, 8, p8, OUT), fn, 4);
  const uint64_t d4[1] = {4};
  const uint32_t p0[1] = {0};
  GOOD(tlrt_permute(f.a, d4, 1, p0, OUT), fn, 4);
}

using P3Fn = tlrt_status (*)(const tlrt_buffer *, uint64_t, uint64_t, uint64_t, tlrt_buffer **);

void check_permute3d(const char *fn, P3Fn call, const Fixture &f) {
  tlrt_buffer *out = kSentinel;
  BAD(call(nullptr, 1, 2, 2, &out), TLRT_ERR_NULL_ARGUMENT, fn, "x");
  CLEARED(out);
  BAD(call(f.a, 1, 2, 2, nullptr), TLRT_ERR_NULL_ARGUMENT, fn, "out");
  out = kSentinel;
  BAD(call(f.released, 1, 2, 2, &out), TLRT_ERR_RELEASED, fn, "x");
  CLEARED(out);
  struct Shape {
    const tlrt_buffer *x;
    uint64_t a, b, c;
  };
  for (Shape s : {Shape{f.a, 1, 1, 3}, Shape{f.a, 2, 2, 2}, Shape{f.a, 0, 2, 2},
                  Shape{f.a, k32, k32, 1}, Shape{f.a, 1, k32 + 4, 1},
                  Shape{f.a, UINT64_MAX, UINT64_MAX, UINT64_MAX}, Shape{f.empty, k32, k32, 1},
                  Shape{f.empty, 1, 1, 1}, Shape{f.short3, 3, 1, 3}}) {
    out = kSentinel;
    BAD(call(s.x, s.a, s.b, s.c, &out), TLRT_ERR_SHAPE, fn, "x", "a", "b", "c");
    CLEARED(out);
  }
  GOOD(call(f.a, 1, 2, 2, OUT), fn, 4);
  GOOD(call(f.a, 4, 1, 1, OUT), fn, 4);
  GOOD(call(f.a, 1, 1, 4, OUT), fn, 4);
  GOOD(call(f.empty, 0, 5, 7, OUT), fn, 0);
  GOOD(call(f.empty, k32, k32, 0, OUT), fn, 0);
}

// Inputs on different devices (needs a usable GPU).
void check_mixed_devices(const Fixture &f) {
  if (!th::cuda_ready()) {
    std::printf("no usable CUDA device: mixed-device checks skipped\n");
    return;
  }
  tlrt_buffer *c4 = nullptr;
  TH_OK(tlrt_buffer_to_device(f.a, TLRT_DEVICE_CUDA(0), &c4));
  if (c4 == nullptr) return;
  tlrt_buffer *out = kSentinel;
  BAD(tlrt_concat1d(f.a, c4, 4, 4, &out), TLRT_ERR_DEVICE_MISMATCH, "tlrt_concat1d", "a", "b");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_concat1d(c4, f.b, 4, 4, &out), TLRT_ERR_DEVICE_MISMATCH, "tlrt_concat1d", "a", "b");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_concat_axis0(f.a, c4, 2, 2, 2, &out), TLRT_ERR_DEVICE_MISMATCH, "tlrt_concat_axis0",
      "a", "b");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_concat_axis0(c4, f.b, 2, 2, 2, &out), TLRT_ERR_DEVICE_MISMATCH, "tlrt_concat_axis0",
      "a", "b");
  CLEARED(out);
  // Single-input ops produce their output on the input's device.
  out = nullptr;
  TH_OK(tlrt_transpose2d(c4, 2, 2, &out));
  tlrt_device d = 0;
  TH_OK(tlrt_buffer_device(out, &d));
  TH_CHECK(d == TLRT_DEVICE_CUDA(0));
  tlrt_buffer_free(out);
  tlrt_buffer_free(c4);
}

}  // namespace

int main() {
  const tlrt_allocator_stats start = th::stats();
  {
    Fixture f = make_fixture();
    check_concat1d(f);
    check_slice1d(f);
    check_concat_axis0(f);
    check_slice_axis0(f);
    check_vec_broadcast("tlrt_broadcast_vec_to_rows", tlrt_broadcast_vec_to_rows, false, f);
    check_vec_broadcast("tlrt_broadcast_vec_to_cols", tlrt_broadcast_vec_to_cols, true, f);
    check_broadcast_to(f);
    check_transpose2d(f);
    check_swap_adjacent(f);
    check_permute(f);
    check_permute3d("tlrt_permute3d_bca", tlrt_permute3d_bca, f);
    check_permute3d("tlrt_permute3d_cab", tlrt_permute3d_cab, f);
    check_permute3d("tlrt_permute3d_acb", tlrt_permute3d_acb, f);
    check_mixed_devices(f);
    free_fixture(f);
  }
  expect_no_leaks(start);
  return th::finish("test_bad_input_layout");
}
