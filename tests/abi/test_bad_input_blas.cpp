// Bad input, matrix products (abi/tlrt_blas.h): every entry point rejects NULL, released,
// mis-sized and overflowing arguments with the documented status, clears its out-parameter, names
// the function and the argument in tlrt_last_error(), and leaks nothing; tlrt_dgemm leaves c
// untouched on failure. Mixed devices are checked where a CUDA device is usable.
#include <cmath>

#include "bad_input.hpp"

namespace {

using u64 = uint64_t;
const u64 kBig = u64{1} << 32;  // kBig^2 = 2^64: beyond 64 bits

// tlrt_bmm and tlrt_matmul through one signature (matmul: batch must be 1 and is not passed).
struct ProductOp {
  const char *name;
  bool batched;
  tlrt_status call(const tlrt_buffer *a, const tlrt_buffer *b, u64 batch, u64 m, u64 n, u64 p,
                   bool ta, bool tb, tlrt_buffer **out) const {
    return batched ? tlrt_bmm(a, b, batch, m, n, p, ta, tb, out)
                   : tlrt_matmul(a, b, m, n, p, ta, tb, out);
  }
};

void check_product(const ProductOp &op, const Fixture &f) {
  const char *fn = op.name;
  tlrt_buffer *out = kSentinel;
  // f.a and f.b have 4 elements: a (2, 2) x (2, 2) product is valid.
  BAD(op.call(nullptr, f.b, 1, 2, 2, 2, false, false, &out), TLRT_ERR_NULL_ARGUMENT, fn, "a");
  CLEARED(out);
  out = kSentinel;
  BAD(op.call(f.a, nullptr, 1, 2, 2, 2, false, false, &out), TLRT_ERR_NULL_ARGUMENT, fn, "b");
  CLEARED(out);
  BAD(op.call(f.a, f.b, 1, 2, 2, 2, false, false, nullptr), TLRT_ERR_NULL_ARGUMENT, fn, "out");
  out = kSentinel;
  BAD(op.call(f.released, f.b, 1, 2, 2, 2, false, false, &out), TLRT_ERR_RELEASED, fn, "a");
  CLEARED(out);
  out = kSentinel;
  BAD(op.call(f.a, f.released, 1, 2, 2, 2, true, true, &out), TLRT_ERR_RELEASED, fn, "b");
  CLEARED(out);
  // Two faults at once: the header leaves the precedence open.
  out = kSentinel;
  expect_either(__LINE__, "NULL a and released b",
                op.call(nullptr, f.released, 1, 2, 2, 2, false, false, &out),
                TLRT_ERR_NULL_ARGUMENT, TLRT_ERR_RELEASED, fn);
  CLEARED(out);
  // Sizes: a must have batch * m * n elements, b batch * n * p, for every flag combination.
  for (int fl = 0; fl < 4; ++fl) {
    const bool ta = fl & 1, tb = fl & 2;
    out = kSentinel;
    BAD(op.call(f.short3, f.b, 1, 2, 2, 2, ta, tb, &out), TLRT_ERR_SHAPE, fn, "a");
    CLEARED(out);
    out = kSentinel;
    BAD(op.call(f.a, f.short3, 1, 2, 2, 2, ta, tb, &out), TLRT_ERR_SHAPE, fn, "b");
    CLEARED(out);
    out = kSentinel;  // (2, 2) x (1, 4): n disagrees with a
    BAD(op.call(f.a, f.b, 1, 2, 1, 4, ta, tb, &out), TLRT_ERR_SHAPE, fn, "a");
    CLEARED(out);
    out = kSentinel;  // (4, 1) x (2, 2)... a fits as (4, 1), b does not fit (1, 2)
    BAD(op.call(f.a, f.b, 1, 4, 1, 2, ta, tb, &out), TLRT_ERR_SHAPE, fn, "b");
    CLEARED(out);
  }
  // Products beyond 64 bits never match a size.
  out = kSentinel;
  BAD(op.call(f.a, f.b, 1, kBig, kBig, 1, false, false, &out), TLRT_ERR_SHAPE, fn, "a");
  CLEARED(out);
  out = kSentinel;
  BAD(op.call(f.a, f.b, 1, 2, 2, kBig * 2, false, false, &out), TLRT_ERR_SHAPE, fn, "b");
  CLEARED(out);
  // Empty operands (n == 0) whose output is too large: beyond TLRT_MAX_ELEMENTS, beyond 2^64.
  out = kSentinel;
  BAD(op.call(f.empty, f.empty, 1, u64{1} << 31, 0, u64{1} << 30, false, false, &out),
      TLRT_ERR_OVERFLOW, fn, "m", "p");
  CLEARED(out);
  out = kSentinel;
  BAD(op.call(f.empty, f.empty, 1, kBig, 0, kBig, false, false, &out), TLRT_ERR_OVERFLOW, fn,
      "m", "p");
  CLEARED(out);
  out = kSentinel;
  BAD(op.call(f.empty, f.empty, 1, kTooMany, 0, 1, true, false, &out), TLRT_ERR_OVERFLOW, fn,
      "m");
  CLEARED(out);
  if (op.batched) {
    out = kSentinel;
    BAD(op.call(f.a, f.b, 2, 2, 2, 2, false, false, &out), TLRT_ERR_SHAPE, fn, "a");
    CLEARED(out);
    out = kSentinel;
    BAD(op.call(f.a, f.b, 2, 1, 2, 2, false, false, &out), TLRT_ERR_SHAPE, fn, "b");
    CLEARED(out);
    out = kSentinel;
    BAD(op.call(f.a, f.b, kBig, kBig, 1, 1, false, false, &out), TLRT_ERR_SHAPE, fn, "a");
    CLEARED(out);
    out = kSentinel;
    BAD(op.call(f.empty, f.empty, u64{1} << 40, u64{1} << 21, 0, 1, false, false, &out),
        TLRT_ERR_OVERFLOW, fn, "batch", "m", "p");
    CLEARED(out);
    out = kSentinel;
    BAD(op.call(f.empty, f.empty, kBig, kBig, 0, kBig, false, false, &out), TLRT_ERR_OVERFLOW,
        fn, "batch");
    CLEARED(out);
    // batch == 0 with empty operands is a valid empty product.
    tlrt_buffer *ok = nullptr;
    TH_OK(op.call(f.empty, f.empty, 0, 5, 7, 3, false, false, &ok));
    expect_result(fn, ok, 0);
  }
  // Valid calls still work after all that: (2, 2) x (2, 2), and n == 0 zeros.
  tlrt_buffer *ok = nullptr;
  TH_OK(op.call(f.a, f.b, 1, 2, 2, 2, true, false, &ok));
  expect_result(fn, ok, 4);
  ok = nullptr;
  TH_OK(op.call(f.empty, f.empty, 1, 3, 0, 5, false, true, &ok));
  expect_result(fn, ok, 15);
  // Mixed devices.
  if (th::cuda_ready()) {
    th::Buf g(th::upload({1, 2, 3, 4}, TLRT_DEVICE_CUDA(0)));
    out = kSentinel;
    BAD(op.call(f.a, g.get(), 1, 2, 2, 2, false, false, &out), TLRT_ERR_DEVICE_MISMATCH, fn, "a",
        "b");
    CLEARED(out);
    out = kSentinel;
    BAD(op.call(g.get(), f.b, 1, 2, 2, 2, false, false, &out), TLRT_ERR_DEVICE_MISMATCH, fn, "a",
        "b");
    CLEARED(out);
  }
}

// tlrt_linear_fwd / tlrt_linear_bwd. f.a, f.b, f.g have 4 elements: x (2, 2), w (2, 2), dy (2, 2).
void check_linear(const Fixture &f) {
  th::Buf b2(th::upload({0.5f, -0.5f}));
  {
    const char *fn = "tlrt_linear_fwd";
    tlrt_buffer *y = kSentinel, *pre = kSentinel;
    auto fwd = [&](const tlrt_buffer *x, const tlrt_buffer *w, const tlrt_buffer *b, u64 rows,
                   u64 in, u64 out, uint32_t act) {
      y = kSentinel;
      pre = kSentinel;
      return tlrt_linear_fwd(x, w, b, rows, in, out, act, &y, &pre);
    };
    BAD(fwd(nullptr, f.b, b2.get(), 2, 2, 2, 0), TLRT_ERR_NULL_ARGUMENT, fn, "x");
    CLEARED(y);
    CLEARED(pre);
    BAD(fwd(f.a, nullptr, b2.get(), 2, 2, 2, 0), TLRT_ERR_NULL_ARGUMENT, fn, "w");
    CLEARED(y);
    CLEARED(pre);
    pre = kSentinel;
    BAD(tlrt_linear_fwd(f.a, f.b, nullptr, 2, 2, 2, 0, nullptr, &pre), TLRT_ERR_NULL_ARGUMENT, fn,
        "y");
    CLEARED(pre);
    BAD(fwd(f.released, f.b, nullptr, 2, 2, 2, 0), TLRT_ERR_RELEASED, fn, "x");
    CLEARED(y);
    BAD(fwd(f.a, f.released, nullptr, 2, 2, 2, 0), TLRT_ERR_RELEASED, fn, "w");
    CLEARED(y);
    BAD(fwd(f.a, f.b, f.released, 2, 2, 2, 0), TLRT_ERR_RELEASED, fn, "b");
    CLEARED(y);
    BAD(fwd(f.short3, f.b, nullptr, 2, 2, 2, 0), TLRT_ERR_SHAPE, fn, "x");
    CLEARED(y);
    BAD(fwd(f.a, f.short3, nullptr, 2, 2, 2, 0), TLRT_ERR_SHAPE, fn, "w");
    CLEARED(y);
    BAD(fwd(f.a, f.b, f.short3, 2, 2, 2, 0), TLRT_ERR_SHAPE, fn, "b");
    CLEARED(y);
    BAD(fwd(f.a, f.b, nullptr, 4, 1, 1, 0), TLRT_ERR_SHAPE, fn, "w");  // x (4, 1), w not (1, 1)
    CLEARED(y);
    BAD(fwd(f.a, f.b, nullptr, kBig, kBig, 2, 0), TLRT_ERR_SHAPE, fn, "x");
    CLEARED(y);
    BAD(fwd(f.empty, f.empty, nullptr, u64{1} << 40, 0, u64{1} << 40, 0), TLRT_ERR_OVERFLOW, fn,
        "y");
    CLEARED(y);
    BAD(fwd(f.a, f.b, nullptr, 2, 2, 2, 2), TLRT_ERR_INVALID_ARGUMENT, fn, "activation");
    CLEARED(y);
    CLEARED(pre);
    BAD(fwd(f.a, f.b, nullptr, 2, 2, 2, UINT32_MAX), TLRT_ERR_INVALID_ARGUMENT, fn, "activation");
    CLEARED(y);
    if (th::cuda_ready()) {
      th::Buf g(th::upload({1, 2, 3, 4}, TLRT_DEVICE_CUDA(0)));
      BAD(fwd(f.a, g.get(), nullptr, 2, 2, 2, 0), TLRT_ERR_DEVICE_MISMATCH, fn, "x", "w");
      CLEARED(y);
      th::Buf gb(th::upload({1, 2}, TLRT_DEVICE_CUDA(0)));
      BAD(fwd(f.a, f.b, gb.get(), 2, 2, 2, 0), TLRT_ERR_DEVICE_MISMATCH, fn, "x", "b");
      CLEARED(y);
    }
    // Valid calls after the failures: the library is unharmed; pre may be NULL.
    th::Buf ok;
    TH_OK(tlrt_linear_fwd(f.a, f.b, b2.get(), 2, 2, 2, TLRT_ACT_GELU, ok.out(), nullptr));
  }
  {
    const char *fn = "tlrt_linear_bwd";
    tlrt_buffer *dx = kSentinel, *dw = kSentinel, *db = kSentinel;
    auto bwd = [&](const tlrt_buffer *dy, const tlrt_buffer *x, const tlrt_buffer *w,
                   const tlrt_buffer *pre, u64 rows, u64 in, u64 out, uint32_t act) {
      dx = dw = db = kSentinel;
      return tlrt_linear_bwd(dy, x, w, pre, rows, in, out, act, &dx, &dw, &db);
    };
    auto cleared = [&] {
      CLEARED(dx);
      CLEARED(dw);
      CLEARED(db);
    };
    BAD(bwd(nullptr, f.a, f.b, nullptr, 2, 2, 2, 0), TLRT_ERR_NULL_ARGUMENT, fn, "dy");
    cleared();
    BAD(bwd(f.g, nullptr, f.b, nullptr, 2, 2, 2, 0), TLRT_ERR_NULL_ARGUMENT, fn, "x");
    cleared();
    BAD(bwd(f.g, f.a, nullptr, nullptr, 2, 2, 2, 0), TLRT_ERR_NULL_ARGUMENT, fn, "w");
    cleared();
    BAD(bwd(f.g, f.a, f.b, nullptr, 2, 2, 2, TLRT_ACT_GELU), TLRT_ERR_NULL_ARGUMENT, fn, "pre");
    cleared();
    BAD(bwd(f.released, f.a, f.b, nullptr, 2, 2, 2, 0), TLRT_ERR_RELEASED, fn, "dy");
    cleared();
    BAD(bwd(f.g, f.a, f.b, f.released, 2, 2, 2, TLRT_ACT_GELU), TLRT_ERR_RELEASED, fn, "pre");
    cleared();
    BAD(bwd(f.short3, f.a, f.b, nullptr, 2, 2, 2, 0), TLRT_ERR_SHAPE, fn, "dy");
    cleared();
    BAD(bwd(f.g, f.short3, f.b, nullptr, 2, 2, 2, 0), TLRT_ERR_SHAPE, fn, "x");
    cleared();
    BAD(bwd(f.g, f.a, f.short3, nullptr, 2, 2, 2, 0), TLRT_ERR_SHAPE, fn, "w");
    cleared();
    BAD(bwd(f.g, f.a, f.b, f.short3, 2, 2, 2, TLRT_ACT_GELU), TLRT_ERR_SHAPE, fn, "pre");
    cleared();
    BAD(bwd(f.g, f.a, f.b, nullptr, 2, 2, 2, 7), TLRT_ERR_INVALID_ARGUMENT, fn, "activation");
    cleared();
    if (th::cuda_ready()) {
      th::Buf g(th::upload({1, 2, 3, 4}, TLRT_DEVICE_CUDA(0)));
      BAD(bwd(f.g, f.a, g.get(), nullptr, 2, 2, 2, 0), TLRT_ERR_DEVICE_MISMATCH, fn, "dy", "w");
      cleared();
      BAD(bwd(f.g, f.a, f.b, g.get(), 2, 2, 2, TLRT_ACT_GELU), TLRT_ERR_DEVICE_MISMATCH, fn, "dy",
          "pre");
      cleared();
    }
    // Every output optional: none requested is a valid call that computes nothing.
    TH_OK(tlrt_linear_bwd(f.g, f.a, f.b, nullptr, 2, 2, 2, 0, nullptr, nullptr, nullptr));
  }
}

// c untouched on failure.
bool untouched(const double *c, int n) {
  for (int i = 0; i < n; ++i)
    if (c[i] != -3.0) return false;
  return true;
}

void check_dgemm() {
  const char *fn = "tlrt_dgemm";
  const double a[4] = {1, 2, 3, 4}, b[4] = {5, 6, 7, 8};
  double c[8] = {-3, -3, -3, -3, -3, -3, -3, -3};
  BAD(tlrt_dgemm(nullptr, b, 2, 2, 2, c), TLRT_ERR_NULL_ARGUMENT, fn, "a");
  BAD(tlrt_dgemm(a, nullptr, 2, 2, 2, c), TLRT_ERR_NULL_ARGUMENT, fn, "b");
  BAD(tlrt_dgemm(a, b, 2, 2, 2, nullptr), TLRT_ERR_NULL_ARGUMENT, fn, "c");
  TH_CHECK(untouched(c, 8));
  // Overflowing counts: beyond 64 bits and beyond TLRT_MAX_ELEMENTS, for each array.
  BAD(tlrt_dgemm(a, b, kBig, kBig, 1, c), TLRT_ERR_OVERFLOW, fn, "a", "m", "n");
  BAD(tlrt_dgemm(a, b, 1, kBig, kBig, c), TLRT_ERR_OVERFLOW, fn, "b", "n", "p");
  BAD(tlrt_dgemm(a, b, kBig, 0, kBig, c), TLRT_ERR_OVERFLOW, fn, "c", "m", "p");
  BAD(tlrt_dgemm(a, b, kTooMany, 1, 1, c), TLRT_ERR_OVERFLOW, fn, "a", "m");
  BAD(tlrt_dgemm(a, b, 1, 1, kTooMany, c), TLRT_ERR_OVERFLOW, fn, "b", "p");
  BAD(tlrt_dgemm(nullptr, nullptr, u64{1} << 31, 0, u64{1} << 30, c), TLRT_ERR_OVERFLOW, fn, "c");
  TH_CHECK(untouched(c, 8));
  // c overlapping a or b.
  double buf[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  BAD(tlrt_dgemm(buf, buf + 4, 2, 2, 2, buf + 3), TLRT_ERR_INVALID_ARGUMENT, fn, "c", "a");
  BAD(tlrt_dgemm(buf, buf + 4, 2, 2, 2, buf + 7), TLRT_ERR_INVALID_ARGUMENT, fn, "c", "b");
  TH_CHECK(buf[3] == 4 && buf[7] == 8);
  // Valid: NULL for empty arrays; then a real product.
  TH_OK(tlrt_dgemm(nullptr, nullptr, 0, 0, 0, nullptr));
  TH_OK(tlrt_dgemm(nullptr, b, 0, 2, 2, nullptr));
  TH_OK(tlrt_dgemm(a, b, 2, 2, 2, c));
  TH_CHECK(c[0] == 19 && c[1] == 22 && c[2] == 43 && c[3] == 50 && c[4] == -3);
}

void check_tf32() {
  // No failure mode; the switch round-trips.
  const bool was = tlrt_get_allow_tf32();
  TH_CHECK(tlrt_set_allow_tf32(!was) == was);
  TH_CHECK(tlrt_get_allow_tf32() == !was);
  TH_CHECK(tlrt_set_allow_tf32(was) == !was);
}

}  // namespace

int main() {
  const tlrt_allocator_stats start = th::stats();
  Fixture f = make_fixture();
  check_product({"tlrt_bmm", true}, f);
  check_product({"tlrt_matmul", false}, f);
  check_linear(f);
  check_dgemm();
  check_tf32();
  free_fixture(f);
  expect_no_leaks(start);
  return th::finish("test_bad_input_blas");
}
