// Bad input for every entry point of abi/tlrt_softmax.h: NULL for each pointer argument, released
// buffers, sizes that do not match rows * cols (products beyond 2^64 and beyond TLRT_MAX_ELEMENTS
// included), second inputs of the wrong size, mixed devices (with a GPU only). For each failing
// call: the exact status, *out cleared to NULL (pre-filled with a sentinel), and a last-error
// message that names the function and every offending argument. Good shapes (empty ones included)
// succeed with the right output size. Nothing leaks.
#include "bad_input.hpp"

namespace {

using OneFn = tlrt_status (*)(const tlrt_buffer *, uint64_t, uint64_t, tlrt_buffer **);
using TwoFn = tlrt_status (*)(const tlrt_buffer *, const tlrt_buffer *, uint64_t, uint64_t,
                              tlrt_buffer **);

struct OneOp {
  const char *fn;
  OneFn call;
};
struct TwoOp {
  const char *fn;
  TwoFn call;
  const char *arg0, *arg1;  // the names of the two inputs in the header
};

const OneOp kOne[] = {{"tlrt_softmax", tlrt_softmax}, {"tlrt_log_softmax", tlrt_log_softmax}};
const TwoOp kTwo[] = {
    {"tlrt_softmax_bwd", tlrt_softmax_bwd, "y", "g"},
    {"tlrt_log_softmax_bwd", tlrt_log_softmax_bwd, "y", "g"},
    {"tlrt_hard_masked_softmax_by_row", tlrt_hard_masked_softmax_by_row, "x", "mask"},
};

const uint64_t k32 = uint64_t{1} << 32;

struct Shape {
  const tlrt_buffer *x;
  uint64_t rows, cols;
};

// rows * cols != size of the first input: products beyond 64 bits (2^32 * 2^32 wraps to 0 and must
// not pass as the size of the empty buffer) and beyond TLRT_MAX_ELEMENTS included.
std::vector<Shape> bad_shapes(const Fixture &f) {
  return {Shape{f.a, 3, 1},         Shape{f.a, 1, 3},
          Shape{f.a, 2, 3},         Shape{f.a, 0, 4},
          Shape{f.a, 4, 0},         Shape{f.a, k32 + 4, 1},
          Shape{f.a, k32, k32},     Shape{f.a, UINT64_MAX, UINT64_MAX},
          Shape{f.empty, k32, k32}, Shape{f.empty, 1, 1},
          Shape{f.short3, 3, 3},    Shape{f.a, kTooMany, 1},
          Shape{f.a, 1, kTooMany},  Shape{f.empty, kTooMany, 2}};
}

std::vector<Shape> good_shapes(const Fixture &f) {
  return {Shape{f.a, 2, 2},
          Shape{f.a, 4, 1},
          Shape{f.a, 1, 4},
          Shape{f.empty, 0, 3},
          Shape{f.empty, 3, 0},
          Shape{f.empty, 0, 0},
          Shape{f.empty, kTooMany, 0},
          Shape{f.empty, 0, UINT64_MAX},
          Shape{f.short3, 3, 1}};
}

void check_one(const OneOp &op, const Fixture &f) {
  tlrt_buffer *out = kSentinel;
  BAD(op.call(nullptr, 2, 2, &out), TLRT_ERR_NULL_ARGUMENT, op.fn, "x");
  CLEARED(out);
  BAD(op.call(f.a, 2, 2, nullptr), TLRT_ERR_NULL_ARGUMENT, op.fn, "out");
  out = kSentinel;
  BAD(op.call(f.released, 2, 2, &out), TLRT_ERR_RELEASED, op.fn, "x");
  CLEARED(out);
  for (const Shape &s : bad_shapes(f)) {
    out = kSentinel;
    BAD(op.call(s.x, s.rows, s.cols, &out), TLRT_ERR_SHAPE, op.fn, "x", "rows", "cols");
    CLEARED(out);
  }
  for (const Shape &s : good_shapes(f)) {
    out = nullptr;
    TH_CHECK_MSG(op.call(s.x, s.rows, s.cols, &out) == TLRT_OK, "%s(%llu, %llu) failed: %s", op.fn,
                 (unsigned long long)s.rows, (unsigned long long)s.cols, tlrt_last_error());
    uint64_t n = 0;
    tlrt_buffer_size(s.x, &n);
    expect_result(op.fn, out, n);
  }
}

void check_two(const TwoOp &op, const Fixture &f) {
  tlrt_buffer *out = kSentinel;
  BAD(op.call(nullptr, f.b, 2, 2, &out), TLRT_ERR_NULL_ARGUMENT, op.fn, op.arg0);
  CLEARED(out);
  out = kSentinel;
  BAD(op.call(f.a, nullptr, 2, 2, &out), TLRT_ERR_NULL_ARGUMENT, op.fn, op.arg1);
  CLEARED(out);
  BAD(op.call(f.a, f.b, 2, 2, nullptr), TLRT_ERR_NULL_ARGUMENT, op.fn, "out");
  out = kSentinel;
  BAD(op.call(f.released, f.b, 2, 2, &out), TLRT_ERR_RELEASED, op.fn, op.arg0);
  CLEARED(out);
  out = kSentinel;
  BAD(op.call(f.a, f.released, 2, 2, &out), TLRT_ERR_RELEASED, op.fn, op.arg1);
  CLEARED(out);
  // The first input against rows * cols (the second one of the same size).
  for (const Shape &s : bad_shapes(f)) {
    out = kSentinel;
    BAD(op.call(s.x, s.x, s.rows, s.cols, &out), TLRT_ERR_SHAPE, op.fn, op.arg0, "rows", "cols");
    CLEARED(out);
  }
  // The second input's size against the first's.
  for (auto p : {std::make_pair(f.a, f.short3), std::make_pair(f.a, f.empty),
                 std::make_pair(f.short3, f.a)}) {
    uint64_t n = 0;
    tlrt_buffer_size(p.first, &n);
    out = kSentinel;
    BAD(op.call(p.first, p.second, n, 1, &out), TLRT_ERR_SHAPE, op.fn, op.arg0, op.arg1);
    CLEARED(out);
  }
  for (const Shape &s : good_shapes(f)) {
    out = nullptr;
    TH_CHECK_MSG(op.call(s.x, s.x, s.rows, s.cols, &out) == TLRT_OK, "%s(%llu, %llu) failed: %s",
                 op.fn, (unsigned long long)s.rows, (unsigned long long)s.cols, tlrt_last_error());
    uint64_t n = 0;
    tlrt_buffer_size(s.x, &n);
    expect_result(op.fn, out, n);
  }
  out = nullptr;
  TH_OK(op.call(f.a, f.b, 2, 2, &out));
  expect_result(op.fn, out, 4);
}

void check_mixed_devices(const Fixture &f) {
  if (!th::cuda_ready()) {
    std::printf("no usable CUDA device: mixed-device checks skipped\n");
    return;
  }
  tlrt_buffer *c4 = nullptr;
  TH_OK(tlrt_buffer_to_device(f.a, TLRT_DEVICE_CUDA(0), &c4));
  if (c4 == nullptr) return;
  for (const TwoOp &op : kTwo) {
    tlrt_buffer *out = kSentinel;
    BAD(op.call(f.a, c4, 2, 2, &out), TLRT_ERR_DEVICE_MISMATCH, op.fn, op.arg0, op.arg1);
    CLEARED(out);
    out = kSentinel;
    BAD(op.call(c4, f.b, 2, 2, &out), TLRT_ERR_DEVICE_MISMATCH, op.fn, op.arg0, op.arg1);
    CLEARED(out);
  }
  // All on the GPU is fine.
  for (const OneOp &op : kOne) {
    tlrt_buffer *out = nullptr;
    TH_OK(op.call(c4, 2, 2, &out));
    tlrt_buffer_free(out);
  }
  tlrt_buffer_free(c4);
}

}  // namespace

int main() {
  const tlrt_allocator_stats start = th::stats();
  {
    Fixture f = make_fixture();
    for (const OneOp &op : kOne) check_one(op, f);
    for (const TwoOp &op : kTwo) check_two(op, f);
    check_mixed_devices(f);
    free_fixture(f);
  }
  expect_no_leaks(start);
  return th::finish("test_bad_input_softmax");
}
