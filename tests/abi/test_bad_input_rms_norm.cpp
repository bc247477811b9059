// Bad input for tlrt_rms_norm_fwd and tlrt_rms_norm_bwd (abi/tlrt_layer_norm.h, "RMS norm"): NULL
// for each required pointer argument (gamma and, without gamma, dgamma are optional), released
// buffers, every size that must match (x or dy against rows * cols, products beyond 2^64 and
// beyond TLRT_MAX_ELEMENTS included; gamma against cols; inv_rms against rows; x against dy), eps
// outside its domain, an empty input whose statistic would exceed TLRT_MAX_ELEMENTS, mixed devices
// (with a GPU only). For each failing call: the exact status, every out-parameter cleared to NULL
// (pre-filled with a sentinel), and a last-error message naming the function and the offending
// arguments. Good calls (no gamma, no dgamma, empty shapes) succeed with the right output sizes.
// Nothing leaks.
#include <cmath>

#include "bad_input.hpp"

namespace {

const char *kFwd = "tlrt_rms_norm_fwd";
const char *kBwd = "tlrt_rms_norm_bwd";
const uint64_t k32 = uint64_t{1} << 32;

struct Bufs {
  tlrt_buffer *x4 = nullptr;  // (2, 2)
  tlrt_buffer *v2 = nullptr;  // gamma / inv_rms of length 2
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

#define CLEARED2(a, b) \
  do {                 \
    CLEARED(a);        \
    CLEARED(b);        \
  } while (0)

void check_fwd(const Fixture &f, const Bufs &b) {
  tlrt_buffer *y = kSentinel, *s = kSentinel;
  auto reset = [&] { y = s = kSentinel; };
  BAD(tlrt_rms_norm_fwd(nullptr, b.v2, 2, 2, 1e-5, &y, &s), TLRT_ERR_NULL_ARGUMENT, kFwd, "x");
  CLEARED2(y, s);
  reset();
  BAD(tlrt_rms_norm_fwd(b.x4, b.v2, 2, 2, 1e-5, nullptr, &s), TLRT_ERR_NULL_ARGUMENT, kFwd, "y");
  CLEARED(s);
  reset();
  BAD(tlrt_rms_norm_fwd(b.x4, b.v2, 2, 2, 1e-5, &y, nullptr), TLRT_ERR_NULL_ARGUMENT, kFwd,
      "inv_rms");
  CLEARED(y);
  reset();
  BAD(tlrt_rms_norm_fwd(f.released, b.v2, 2, 2, 1e-5, &y, &s), TLRT_ERR_RELEASED, kFwd, "x");
  CLEARED2(y, s);
  reset();
  BAD(tlrt_rms_norm_fwd(b.x4, b.released2, 2, 2, 1e-5, &y, &s), TLRT_ERR_RELEASED, kFwd, "gamma");
  CLEARED2(y, s);
  // x against rows * cols (gamma of the matching cols where possible, and no gamma).
  struct Shape {
    const tlrt_buffer *x, *g;
    uint64_t rows, cols;
  };
  for (const Shape &sh :
       {Shape{b.x4, b.v2, 1, 2}, Shape{b.x4, b.v2, 3, 2}, Shape{b.x4, f.a, 2, 4},
        Shape{b.x4, b.v2, k32 + 2, 2}, Shape{f.empty, b.v2, k32 * 2, k32 / 2 + 1},
        Shape{f.empty, f.a, uint64_t{1} << 62, 4}, Shape{b.x4, b.v2, UINT64_MAX, 2},
        Shape{b.x4, b.v2, kTooMany, 2}, Shape{f.empty, b.v2, 1, 2}, Shape{b.x4, nullptr, 1, 2},
        Shape{b.x4, nullptr, UINT64_MAX, UINT64_MAX}}) {
    reset();
    BAD(tlrt_rms_norm_fwd(sh.x, sh.g, sh.rows, sh.cols, 1e-5, &y, &s), TLRT_ERR_SHAPE, kFwd, "x",
        "rows", "cols");
    CLEARED2(y, s);
  }
  // gamma against cols.
  for (const tlrt_buffer *bad : {b.v3, f.empty, f.a}) {
    reset();
    BAD(tlrt_rms_norm_fwd(b.x4, bad, 2, 2, 1e-5, &y, &s), TLRT_ERR_SHAPE, kFwd, "gamma", "cols");
    CLEARED2(y, s);
  }
  // eps: NaN, negative, infinite, or rounding to +inf in float32.
  for (double eps : {(double)NAN, -1e-5, -(double)INFINITY, (double)INFINITY, 1e300, 3.5e38}) {
    for (const tlrt_buffer *g : {(const tlrt_buffer *)b.v2, (const tlrt_buffer *)nullptr}) {
      reset();
      BAD(tlrt_rms_norm_fwd(b.x4, g, 2, 2, eps, &y, &s), TLRT_ERR_INVALID_ARGUMENT, kFwd, "eps");
      CLEARED2(y, s);
    }
  }
  // cols == 0 with more rows than TLRT_MAX_ELEMENTS: inv_rms cannot exist.
  reset();
  BAD(tlrt_rms_norm_fwd(f.empty, f.empty, kTooMany, 0, 1e-5, &y, &s), TLRT_ERR_OVERFLOW, kFwd,
      "rows");
  CLEARED2(y, s);
  reset();
  BAD(tlrt_rms_norm_fwd(f.empty, nullptr, kTooMany, 0, 1e-5, &y, &s), TLRT_ERR_OVERFLOW, kFwd,
      "rows");
  CLEARED2(y, s);
  // Good calls: sizes of y and inv_rms.
  struct Good {
    const tlrt_buffer *x, *g;
    uint64_t rows, cols;
    double eps;
  };
  for (const Good &g :
       {Good{b.x4, b.v2, 2, 2, 1e-5}, Good{b.x4, nullptr, 2, 2, 1e-5}, Good{b.x4, f.a, 1, 4, 0.0},
        Good{b.x4, b.v2, 2, 2, -0.0}, Good{b.x4, b.v2, 2, 2, 3.4e38}, Good{f.empty, b.v2, 0, 2, 1e-6},
        Good{f.empty, f.empty, 3, 0, 1e-5}, Good{f.empty, nullptr, 3, 0, 1e-5},
        Good{f.empty, f.empty, 0, 0, 1e-5}}) {
    y = s = nullptr;
    TH_CHECK_MSG(tlrt_rms_norm_fwd(g.x, g.g, g.rows, g.cols, g.eps, &y, &s) == TLRT_OK,
                 "%s(%llu, %llu, eps %g) failed: %s", kFwd, (unsigned long long)g.rows,
                 (unsigned long long)g.cols, g.eps, tlrt_last_error());
    expect_result(kFwd, y, g.rows * g.cols);
    expect_result(kFwd, s, g.rows);
  }
}

void check_bwd(const Fixture &f, const Bufs &b) {
  tlrt_buffer *dx = kSentinel, *dg = kSentinel;
  auto reset = [&] { dx = dg = kSentinel; };
  // dy, x, gamma, inv_rms in order; each NULL (gamma: optional) / released in turn.
  const tlrt_buffer *in[4] = {b.x4, f.a, b.v2, b.w2};
  const char *names[4] = {"dy", "x", "gamma", "inv_rms"};
  for (int k = 0; k < 4; ++k) {
    for (bool released : {false, true}) {
      if (k == 2 && !released) continue;  // gamma NULL is no scale: checked below
      const tlrt_buffer *a[4] = {in[0], in[1], in[2], in[3]};
      a[k] = released ? (k < 2 ? f.released : b.released2) : nullptr;
      reset();
      BAD(tlrt_rms_norm_bwd(a[0], a[1], a[2], a[3], 2, 2, &dx, &dg),
          released ? TLRT_ERR_RELEASED : TLRT_ERR_NULL_ARGUMENT, kBwd, names[k]);
      CLEARED2(dx, dg);
    }
  }
  reset();
  BAD(tlrt_rms_norm_bwd(b.x4, f.a, b.v2, b.w2, 2, 2, nullptr, &dg), TLRT_ERR_NULL_ARGUMENT, kBwd,
      "dx");
  CLEARED(dg);
  reset();
  BAD(tlrt_rms_norm_bwd(b.x4, f.a, nullptr, b.w2, 2, 2, nullptr, &dg), TLRT_ERR_NULL_ARGUMENT,
      kBwd, "dx");
  CLEARED(dg);
  // dgamma is required with a gamma.
  reset();
  BAD(tlrt_rms_norm_bwd(b.x4, f.a, b.v2, b.w2, 2, 2, &dx, nullptr), TLRT_ERR_NULL_ARGUMENT, kBwd,
      "dgamma");
  CLEARED(dx);
  // dy against rows * cols (x the same buffer; inv_rms, gamma mismatching too, but dy is checked
  // first), products beyond 64 bits and beyond TLRT_MAX_ELEMENTS.
  struct Shape {
    const tlrt_buffer *dy;
    uint64_t rows, cols;
  };
  for (const Shape &sh :
       {Shape{b.x4, 1, 2}, Shape{b.x4, 4, 2}, Shape{b.x4, k32 + 2, 2}, Shape{f.empty, k32, k32},
        Shape{b.x4, UINT64_MAX, UINT64_MAX}, Shape{b.x4, kTooMany, 2}, Shape{f.empty, 2, 2}}) {
    for (const tlrt_buffer *g : {(const tlrt_buffer *)b.v2, (const tlrt_buffer *)nullptr}) {
      reset();
      BAD(tlrt_rms_norm_bwd(sh.dy, sh.dy, g, b.w2, sh.rows, sh.cols, &dx, &dg), TLRT_ERR_SHAPE,
          kBwd, "dy", "rows", "cols");
      CLEARED2(dx, dg);
    }
  }
  // x against dy; inv_rms against rows; gamma against cols.
  reset();
  BAD(tlrt_rms_norm_bwd(b.x4, f.short3, b.v2, b.w2, 2, 2, &dx, &dg), TLRT_ERR_SHAPE, kBwd, "x",
      "dy");
  CLEARED2(dx, dg);
  for (const tlrt_buffer *bad : {b.v3, f.empty, f.a}) {
    reset();
    BAD(tlrt_rms_norm_bwd(b.x4, f.a, b.v2, bad, 2, 2, &dx, &dg), TLRT_ERR_SHAPE, kBwd, "inv_rms",
        "rows");
    CLEARED2(dx, dg);
    reset();
    BAD(tlrt_rms_norm_bwd(b.x4, f.a, nullptr, bad, 2, 2, &dx, nullptr), TLRT_ERR_SHAPE, kBwd,
        "inv_rms", "rows");
    CLEARED(dx);
    reset();
    BAD(tlrt_rms_norm_bwd(b.x4, f.a, bad, b.w2, 2, 2, &dx, &dg), TLRT_ERR_SHAPE, kBwd, "gamma",
        "cols");
    CLEARED2(dx, dg);
  }
  // Good calls: with gamma; without gamma, with and without dgamma; empty shapes.
  dx = dg = nullptr;
  TH_OK(tlrt_rms_norm_bwd(b.x4, f.a, b.v2, b.w2, 2, 2, &dx, &dg));
  expect_result(kBwd, dx, 4);
  expect_result(kBwd, dg, 2);
  dx = dg = nullptr;
  TH_OK(tlrt_rms_norm_bwd(b.x4, f.a, nullptr, b.w2, 2, 2, &dx, &dg));
  expect_result(kBwd, dx, 4);
  expect_result(kBwd, dg, 2);
  dx = nullptr;
  TH_OK(tlrt_rms_norm_bwd(b.x4, f.a, nullptr, b.w2, 2, 2, &dx, nullptr));
  expect_result(kBwd, dx, 4);
  dx = dg = nullptr;
  TH_OK(tlrt_rms_norm_bwd(f.empty, f.empty, b.v2, f.empty, 0, 2, &dx, &dg));
  expect_result(kBwd, dx, 0);
  expect_result(kBwd, dg, 2);
  dx = nullptr;
  TH_OK(tlrt_rms_norm_bwd(f.empty, f.empty, nullptr, f.empty, 0, 2, &dx, nullptr));
  expect_result(kBwd, dx, 0);
  dx = dg = nullptr;
  TH_OK(tlrt_rms_norm_bwd(f.empty, f.empty, f.empty, b.w2, 2, 0, &dx, &dg));
  expect_result(kBwd, dx, 0);
  expect_result(kBwd, dg, 0);
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
    tlrt_buffer *y = kSentinel, *s = kSentinel;
    BAD(tlrt_rms_norm_fwd(c4, b.v2, 2, 2, 1e-5, &y, &s), TLRT_ERR_DEVICE_MISMATCH, kFwd, "x",
        "gamma");
    CLEARED2(y, s);
    const tlrt_buffer *in[4] = {b.x4, f.a, b.v2, b.w2};
    const char *names[4] = {"dy", "x", "gamma", "inv_rms"};
    for (int k = 1; k < 4; ++k) {
      const tlrt_buffer *a[4] = {in[0], in[1], in[2], in[3]};
      a[k] = k == 1 ? c4 : c2;
      tlrt_buffer *dx = kSentinel, *dg = kSentinel;
      BAD(tlrt_rms_norm_bwd(a[0], a[1], a[2], a[3], 2, 2, &dx, &dg), TLRT_ERR_DEVICE_MISMATCH,
          kBwd, "dy", names[k]);
      CLEARED2(dx, dg);
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
  return th::finish("test_bad_input_rms_norm");
}
