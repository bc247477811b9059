// Bad input for tlrt_layer_norm_fwd and tlrt_layer_norm_bwd (abi/tlrt_layer_norm.h): NULL for each
// pointer argument, released buffers, every size that must match (x or dy against rows * cols,
// products beyond 2^64 and beyond TLRT_MAX_ELEMENTS included; gamma / beta against cols; mean /
// inv_std against rows; x against dy), eps outside its domain, an empty input whose statistics
// would exceed TLRT_MAX_ELEMENTS, mixed devices (with a GPU only). For each failing call: the exact
// status, all three out-parameters cleared to NULL (pre-filled with a sentinel), and a last-error
// message naming the function and the offending arguments. Good calls (empty shapes included)
// succeed with the right output sizes. Nothing leaks.
#include <cmath>

#include "bad_input.hpp"

namespace {

const char *kFwd = "tlrt_layer_norm_fwd";
const char *kBwd = "tlrt_layer_norm_bwd";
const uint64_t k32 = uint64_t{1} << 32;

struct Bufs {
  tlrt_buffer *x4 = nullptr;  // (2, 2)
  tlrt_buffer *v2 = nullptr;  // gamma / beta / mean / inv_std of length 2
  tlrt_buffer *w2 = nullptr;
  tlrt_buffer *v3 = nullptr;  // a wrong length
  tlrt_buffer *released2 = nullptr;
};

Bufs make_bufs() {
  Bufs b;
  b.x4 = th::upload({1.0f, 2.0f, 3.0f, 4.0f});
  b.v2 = th::upload({1.0f, 0.5f});
  b.w2 = th::upload({0.25f, 2.0f});
  b.v3 = th::upload({1.0f, 2.0f, 3.0f});
  b.released2 = th::upload({1.0f, 2.0f});
  bool freed = false;
  TH_OK(tlrt_buffer_release_storage(b.released2, &freed));
  return b;
}

void free_bufs(Bufs &b) {
  for (tlrt_buffer *p : {b.x4, b.v2, b.w2, b.v3, b.released2}) tlrt_buffer_free(p);
  b = Bufs{};
}

#define CLEARED3(a, b, c) \
  do {                    \
    CLEARED(a);           \
    CLEARED(b);           \
    CLEARED(c);           \
  } while (0)

void check_fwd(const Fixture &f, const Bufs &b) {
  tlrt_buffer *y = kSentinel, *m = kSentinel, *s = kSentinel;
  auto reset = [&] { y = m = s = kSentinel; };
  BAD(tlrt_layer_norm_fwd(nullptr, b.v2, b.w2, 2, 2, 1e-5, &y, &m, &s), TLRT_ERR_NULL_ARGUMENT,
      kFwd, "x");
  CLEARED3(y, m, s);
  reset();
  BAD(tlrt_layer_norm_fwd(b.x4, nullptr, b.w2, 2, 2, 1e-5, &y, &m, &s), TLRT_ERR_NULL_ARGUMENT,
      kFwd, "gamma");
  CLEARED3(y, m, s);
  reset();
  BAD(tlrt_layer_norm_fwd(b.x4, b.v2, nullptr, 2, 2, 1e-5, &y, &m, &s), TLRT_ERR_NULL_ARGUMENT,
      kFwd, "beta");
  CLEARED3(y, m, s);
  reset();
  BAD(tlrt_layer_norm_fwd(b.x4, b.v2, b.w2, 2, 2, 1e-5, nullptr, &m, &s), TLRT_ERR_NULL_ARGUMENT,
      kFwd, "y");
  CLEARED(m);
  CLEARED(s);
  reset();
  BAD(tlrt_layer_norm_fwd(b.x4, b.v2, b.w2, 2, 2, 1e-5, &y, nullptr, &s), TLRT_ERR_NULL_ARGUMENT,
      kFwd, "mean");
  CLEARED(y);
  CLEARED(s);
  reset();
  BAD(tlrt_layer_norm_fwd(b.x4, b.v2, b.w2, 2, 2, 1e-5, &y, &m, nullptr), TLRT_ERR_NULL_ARGUMENT,
      kFwd, "inv_std");
  CLEARED(y);
  CLEARED(m);
  reset();
  BAD(tlrt_layer_norm_fwd(f.released, b.v2, b.w2, 2, 2, 1e-5, &y, &m, &s), TLRT_ERR_RELEASED, kFwd,
      "x");
  CLEARED3(y, m, s);
  reset();
  BAD(tlrt_layer_norm_fwd(b.x4, b.released2, b.w2, 2, 2, 1e-5, &y, &m, &s), TLRT_ERR_RELEASED, kFwd,
      "gamma");
  CLEARED3(y, m, s);
  reset();
  BAD(tlrt_layer_norm_fwd(b.x4, b.v2, b.released2, 2, 2, 1e-5, &y, &m, &s), TLRT_ERR_RELEASED, kFwd,
      "beta");
  CLEARED3(y, m, s);
  // x against rows * cols (gamma / beta of the matching cols where possible).
  struct Shape {
    const tlrt_buffer *x, *gb;
    uint64_t rows, cols;
  };
  for (const Shape &sh :
       {Shape{b.x4, b.v2, 1, 2}, Shape{b.x4, b.v2, 3, 2}, Shape{b.x4, f.a, 2, 4},
        Shape{b.x4, b.v2, k32 + 2, 2}, Shape{f.empty, b.v2, k32 * 2, k32 / 2 + 1},
        Shape{f.empty, f.a, uint64_t{1} << 62, 4}, Shape{b.x4, b.v2, UINT64_MAX, 2},
        Shape{b.x4, b.v2, kTooMany, 2}, Shape{f.empty, b.v2, 1, 2}}) {
    reset();
    BAD(tlrt_layer_norm_fwd(sh.x, sh.gb, sh.gb, sh.rows, sh.cols, 1e-5, &y, &m, &s), TLRT_ERR_SHAPE,
        kFwd, "x", "rows", "cols");
    CLEARED3(y, m, s);
  }
  // gamma, beta against cols.
  for (const tlrt_buffer *bad : {b.v3, f.empty, f.a}) {
    reset();
    BAD(tlrt_layer_norm_fwd(b.x4, bad, b.w2, 2, 2, 1e-5, &y, &m, &s), TLRT_ERR_SHAPE, kFwd, "gamma",
        "cols");
    CLEARED3(y, m, s);
    reset();
    BAD(tlrt_layer_norm_fwd(b.x4, b.v2, bad, 2, 2, 1e-5, &y, &m, &s), TLRT_ERR_SHAPE, kFwd, "beta",
        "cols");
    CLEARED3(y, m, s);
  }
  // eps: NaN, negative, infinite, or rounding to +inf in float32.
  for (double eps : {(double)NAN, -1e-5, -(double)INFINITY, (double)INFINITY, 1e300, 3.5e38}) {
    reset();
    BAD(tlrt_layer_norm_fwd(b.x4, b.v2, b.w2, 2, 2, eps, &y, &m, &s), TLRT_ERR_INVALID_ARGUMENT,
        kFwd, "eps");
    CLEARED3(y, m, s);
  }
  // cols == 0 with more rows than TLRT_MAX_ELEMENTS: the statistics cannot exist.
  reset();
  BAD(tlrt_layer_norm_fwd(f.empty, f.empty, f.empty, kTooMany, 0, 1e-5, &y, &m, &s),
      TLRT_ERR_OVERFLOW, kFwd, "rows");
  CLEARED3(y, m, s);
  // Good calls: sizes of y, mean, inv_std.
  struct Good {
    const tlrt_buffer *x, *gb;
    uint64_t rows, cols;
    double eps;
  };
  for (const Good &g :
       {Good{b.x4, b.v2, 2, 2, 1e-5}, Good{b.x4, f.a, 1, 4, 0.0}, Good{b.x4, b.v2, 2, 2, -0.0},
        Good{b.x4, b.v2, 2, 2, 3.4e38}, Good{f.empty, b.v2, 0, 2, 1e-6},
        Good{f.empty, f.empty, 3, 0, 1e-5}, Good{f.empty, f.empty, 0, 0, 1e-5}}) {
    y = m = s = nullptr;
    TH_CHECK_MSG(tlrt_layer_norm_fwd(g.x, g.gb, g.gb, g.rows, g.cols, g.eps, &y, &m, &s) == TLRT_OK,
                 "%s(%llu, %llu, eps %g) failed: %s", kFwd, (unsigned long long)g.rows,
                 (unsigned long long)g.cols, g.eps, tlrt_last_error());
    expect_result(kFwd, y, g.rows * g.cols);
    expect_result(kFwd, m, g.rows);
    expect_result(kFwd, s, g.rows);
  }
}

void check_bwd(const Fixture &f, const Bufs &b) {
  tlrt_buffer *dx = kSentinel, *dg = kSentinel, *db = kSentinel;
  auto reset = [&] { dx = dg = db = kSentinel; };
  // dy, x, mean, inv_std, gamma in order; each NULL / released in turn.
  const tlrt_buffer *in[5] = {b.x4, f.a, b.v2, b.w2, b.v2};
  const char *names[5] = {"dy", "x", "mean", "inv_std", "gamma"};
  for (int k = 0; k < 5; ++k) {
    for (bool released : {false, true}) {
      const tlrt_buffer *a[5] = {in[0], in[1], in[2], in[3], in[4]};
      a[k] = released ? (k < 2 ? f.released : b.released2) : nullptr;
      reset();
      BAD(tlrt_layer_norm_bwd(a[0], a[1], a[2], a[3], a[4], 2, 2, &dx, &dg, &db),
          released ? TLRT_ERR_RELEASED : TLRT_ERR_NULL_ARGUMENT, kBwd, names[k]);
      CLEARED3(dx, dg, db);
    }
  }
  reset();
  BAD(tlrt_layer_norm_bwd(b.x4, f.a, b.v2, b.w2, b.v2, 2, 2, nullptr, &dg, &db),
      TLRT_ERR_NULL_ARGUMENT, kBwd, "dx");
  CLEARED(dg);
  CLEARED(db);
  reset();
  BAD(tlrt_layer_norm_bwd(b.x4, f.a, b.v2, b.w2, b.v2, 2, 2, &dx, nullptr, &db),
      TLRT_ERR_NULL_ARGUMENT, kBwd, "dgamma");
  CLEARED(dx);
  CLEARED(db);
  reset();
  BAD(tlrt_layer_norm_bwd(b.x4, f.a, b.v2, b.w2, b.v2, 2, 2, &dx, &dg, nullptr),
      TLRT_ERR_NULL_ARGUMENT, kBwd, "dbeta");
  CLEARED(dx);
  CLEARED(dg);
  // dy against rows * cols (x the same buffer; mean, inv_std, gamma mismatching too, but dy is
  // checked first), products beyond 64 bits and beyond TLRT_MAX_ELEMENTS.
  struct Shape {
    const tlrt_buffer *dy;
    uint64_t rows, cols;
  };
  for (const Shape &sh :
       {Shape{b.x4, 1, 2}, Shape{b.x4, 4, 2}, Shape{b.x4, k32 + 2, 2}, Shape{f.empty, k32, k32},
        Shape{b.x4, UINT64_MAX, UINT64_MAX}, Shape{b.x4, kTooMany, 2}, Shape{f.empty, 2, 2}}) {
    reset();
    BAD(tlrt_layer_norm_bwd(sh.dy, sh.dy, b.v2, b.w2, b.v2, sh.rows, sh.cols, &dx, &dg, &db),
        TLRT_ERR_SHAPE, kBwd, "dy", "rows", "cols");
    CLEARED3(dx, dg, db);
  }
  // x against dy; mean and inv_std against rows; gamma against cols.
  reset();
  BAD(tlrt_layer_norm_bwd(b.x4, f.short3, b.v2, b.w2, b.v2, 2, 2, &dx, &dg, &db), TLRT_ERR_SHAPE,
      kBwd, "x", "dy");
  CLEARED3(dx, dg, db);
  for (const tlrt_buffer *bad : {b.v3, f.empty, f.a}) {
    reset();
    BAD(tlrt_layer_norm_bwd(b.x4, f.a, bad, b.w2, b.v2, 2, 2, &dx, &dg, &db), TLRT_ERR_SHAPE, kBwd,
        "mean", "rows");
    CLEARED3(dx, dg, db);
    reset();
    BAD(tlrt_layer_norm_bwd(b.x4, f.a, b.v2, bad, b.v2, 2, 2, &dx, &dg, &db), TLRT_ERR_SHAPE, kBwd,
        "inv_std", "rows");
    CLEARED3(dx, dg, db);
    reset();
    BAD(tlrt_layer_norm_bwd(b.x4, f.a, b.v2, b.w2, bad, 2, 2, &dx, &dg, &db), TLRT_ERR_SHAPE, kBwd,
        "gamma", "cols");
    CLEARED3(dx, dg, db);
  }
  // Good calls.
  dx = dg = db = nullptr;
  TH_OK(tlrt_layer_norm_bwd(b.x4, f.a, b.v2, b.w2, b.v2, 2, 2, &dx, &dg, &db));
  expect_result(kBwd, dx, 4);
  expect_result(kBwd, dg, 2);
  expect_result(kBwd, db, 2);
  dx = dg = db = nullptr;
  TH_OK(tlrt_layer_norm_bwd(f.empty, f.empty, f.empty, f.empty, b.v2, 0, 2, &dx, &dg, &db));
  expect_result(kBwd, dx, 0);
  expect_result(kBwd, dg, 2);
  expect_result(kBwd, db, 2);
  dx = dg = db = nullptr;
  TH_OK(tlrt_layer_norm_bwd(f.empty, f.empty, b.v2, b.w2, f.empty, 2, 0, &dx, &dg, &db));
  expect_result(kBwd, dx, 0);
  expect_result(kBwd, dg, 0);
  expect_result(kBwd, db, 0);
}

void check_mixed_devices(const Fixture &f, const Bufs &b) {
  if (!th::cuda_ready()) {
    std::printf("no usable CUDA device: mixed-device checks skipped\n");
    return;
  }
  tlrt_buffer *c4 = nullptr, *c2 = nullptr;
  TH_OK(tlrt_buffer_to_device(b.x4, TLRT_DEVICE_CUDA(0), &c4));
  TH_OK(tlrt_buffer_to_device(b.v2, TLRT_DEVICE_CUDA(0), &c2));
  if (c4 && c2) {
    tlrt_buffer *y = kSentinel, *m = kSentinel, *s = kSentinel;
    BAD(tlrt_layer_norm_fwd(c4, b.v2, b.w2, 2, 2, 1e-5, &y, &m, &s), TLRT_ERR_DEVICE_MISMATCH, kFwd,
        "x", "gamma");
    CLEARED3(y, m, s);
    y = m = s = kSentinel;
    BAD(tlrt_layer_norm_fwd(b.x4, b.v2, c2, 2, 2, 1e-5, &y, &m, &s), TLRT_ERR_DEVICE_MISMATCH, kFwd,
        "x", "beta");
    CLEARED3(y, m, s);
    const tlrt_buffer *in[5] = {b.x4, f.a, b.v2, b.w2, b.v2};
    const char *names[5] = {"dy", "x", "mean", "inv_std", "gamma"};
    for (int k = 1; k < 5; ++k) {
      const tlrt_buffer *a[5] = {in[0], in[1], in[2], in[3], in[4]};
      a[k] = k == 1 ? c4 : c2;
      tlrt_buffer *dx = kSentinel, *dg = kSentinel, *db = kSentinel;
      BAD(tlrt_layer_norm_bwd(a[0], a[1], a[2], a[3], a[4], 2, 2, &dx, &dg, &db),
          TLRT_ERR_DEVICE_MISMATCH, kBwd, "dy", names[k]);
      CLEARED3(dx, dg, db);
    }
  }
  tlrt_buffer_free(c4);
  tlrt_buffer_free(c2);
}

}  // namespace

int main() {
  const tlrt_allocator_stats start = th::stats();
  {
    Fixture f = make_fixture();
    Bufs b = make_bufs();
    check_fwd(f, b);
    check_bwd(f, b);
    check_mixed_devices(f, b);
    free_bufs(b);
    free_fixture(f);
  }
  expect_no_leaks(start);
  return th::finish("test_bad_input_layer_norm");
}
