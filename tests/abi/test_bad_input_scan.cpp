// Bad input for the selective scan (abi/tlrt_scan.h): tlrt_selective_scan_diag_fwd / _bwd and
// tlrt_selective_scan_diag_var_fwd / _bwd. NULL for each pointer argument, released buffers, every
// size that must match (X against seq_len * state, products beyond 2^64 and beyond
// TLRT_MAX_ELEMENTS included; A, B, h0 against state, or A, B against X for diag_var; out and dY
// against X), mixed devices (with a GPU only). For each failing call: the exact status, every
// out-parameter cleared to NULL (pre-filled with a sentinel), and a last-error message naming the
// function and the offending arguments. Good calls (empty shapes included) succeed with the right
// output sizes. Nothing leaks.
#include "bad_input.hpp"

namespace {

const uint64_t k32 = uint64_t{1} << 32;

using Fwd = tlrt_status (*)(const tlrt_buffer *, const tlrt_buffer *, const tlrt_buffer *,
                            const tlrt_buffer *, uint64_t, uint64_t, tlrt_buffer **);
using Bwd = tlrt_status (*)(const tlrt_buffer *, const tlrt_buffer *, const tlrt_buffer *,
                            const tlrt_buffer *, const tlrt_buffer *, const tlrt_buffer *, uint64_t,
                            uint64_t, tlrt_buffer **, tlrt_buffer **, tlrt_buffer **,
                            tlrt_buffer **);

struct Variant {
  const char *fwd_name, *bwd_name;
  Fwd fwd;
  Bwd bwd;
  bool var;
};

// T = 2, D = 2: X, out, dY have 4 elements; A, B have 2 (diag) or 4 (var); h0 has 2.
struct Bufs {
  tlrt_buffer *x4 = nullptr, *o4 = nullptr, *v2 = nullptr, *w2 = nullptr, *v3 = nullptr;
  tlrt_buffer *released2 = nullptr;
};

Bufs make_bufs() {
  Bufs b;
  b.x4 = th::upload({1.0f, 2.0f, 3.0f, 4.0f});
  b.o4 = th::upload({0.5f, -1.0f, 2.0f, 0.25f});
  b.v2 = th::upload({0.5f, 0.75f});
  b.w2 = th::upload({1.0f, -2.0f});
  b.v3 = th::upload({1.0f, 2.0f, 3.0f});
  b.released2 = th::upload({1.0f, 2.0f});
  bool freed = false;
  TH_OK(tlrt_buffer_release_storage(b.released2, &freed));
  return b;
}

void free_bufs(Bufs &b) {
  for (tlrt_buffer *p : {b.x4, b.o4, b.v2, b.w2, b.v3, b.released2}) tlrt_buffer_free(p);
  b = Bufs{};
}

#define CLEARED4(a, b, c, d) \
  do {                       \
    CLEARED(a);              \
    CLEARED(b);              \
    CLEARED(c);              \
    CLEARED(d);              \
  } while (0)

void check_fwd(const Fixture &f, const Bufs &b, const Variant &v) {
  const char *fn = v.fwd_name;
  const tlrt_buffer *coef = v.var ? b.x4 : b.v2;  // A and B
  const tlrt_buffer *in[4] = {coef, coef, f.a, b.w2};
  const char *names[4] = {"A", "B", "X", "h0"};
  tlrt_buffer *out = kSentinel;
  for (int k = 0; k < 4; ++k)
    for (bool released : {false, true}) {
      const tlrt_buffer *a[4] = {in[0], in[1], in[2], in[3]};
      a[k] = released ? (v.var || k == 2 ? f.released : b.released2) : nullptr;
      if (released && k == 3) a[k] = b.released2;
      out = kSentinel;
      BAD(v.fwd(a[0], a[1], a[2], a[3], 2, 2, &out),
          released ? TLRT_ERR_RELEASED : TLRT_ERR_NULL_ARGUMENT, fn, names[k]);
      CLEARED(out);
    }
  BAD(v.fwd(coef, coef, f.a, b.w2, 2, 2, nullptr), TLRT_ERR_NULL_ARGUMENT, fn, "out");
  // X against seq_len * state (diag: A, B, h0 of the matching state where the product is small).
  struct Shape {
    const tlrt_buffer *x;
    uint64_t T, D;
  };
  for (const Shape &s : {Shape{f.a, 1, 2}, Shape{f.a, 3, 2}, Shape{f.short3, 2, 2},
                         Shape{f.a, k32 + 2, 2}, Shape{f.empty, k32 * 2, k32 / 2 + 1},
                         Shape{f.a, UINT64_MAX, 2}, Shape{f.a, kTooMany, 2}, Shape{f.empty, 1, 2}}) {
    out = kSentinel;
    BAD(v.fwd(coef, coef, s.x, b.w2, s.T, s.D, &out), TLRT_ERR_SHAPE, fn, "X", "seq_len", "state");
    CLEARED(out);
  }
  // A, B against state (diag) or X (var); h0 against state.
  for (const tlrt_buffer *bad : {b.v3, f.empty, v.var ? b.v2 : f.a}) {
    out = kSentinel;
    BAD(v.fwd(bad, coef, f.a, b.w2, 2, 2, &out), TLRT_ERR_SHAPE, fn, "A",
        v.var ? "X" : "state");
    CLEARED(out);
    out = kSentinel;
    BAD(v.fwd(coef, bad, f.a, b.w2, 2, 2, &out), TLRT_ERR_SHAPE, fn, "B",
        v.var ? "X" : "state");
    CLEARED(out);
  }
  for (const tlrt_buffer *bad : {b.v3, f.empty, f.a}) {
    out = kSentinel;
    BAD(v.fwd(coef, coef, f.a, bad, 2, 2, &out), TLRT_ERR_SHAPE, fn, "h0", "state");
    CLEARED(out);
  }
  // Good calls.
  out = nullptr;
  TH_OK(v.fwd(coef, coef, f.a, b.w2, 2, 2, &out));
  expect_result(fn, out, 4);
  out = nullptr;
  TH_OK(v.fwd(v.var ? f.a : f.g, v.var ? f.b : f.g, f.a, f.g, 1, 4, &out));
  expect_result(fn, out, 4);
  out = nullptr;  // T = 0
  TH_OK(v.fwd(v.var ? f.empty : b.v2, v.var ? f.empty : b.v2, f.empty, b.w2, 0, 2, &out));
  expect_result(fn, out, 0);
  out = nullptr;  // D = 0 with a huge T (X empty either way)
  TH_OK(v.fwd(f.empty, f.empty, f.empty, f.empty, UINT64_MAX, 0, &out));
  expect_result(fn, out, 0);
}

void check_bwd(const Fixture &f, const Bufs &b, const Variant &v) {
  const char *fn = v.bwd_name;
  const tlrt_buffer *coef = v.var ? b.x4 : b.v2;
  const tlrt_buffer *in[6] = {coef, coef, f.a, b.w2, b.o4, f.b};
  const char *names[6] = {"A", "B", "X", "h0", "out", "dY"};
  tlrt_buffer *dA = kSentinel, *dB = kSentinel, *dX = kSentinel, *dH = kSentinel;
  auto reset = [&] { dA = dB = dX = dH = kSentinel; };
  for (int k = 0; k < 6; ++k)
    for (bool released : {false, true}) {
      const tlrt_buffer *a[6] = {in[0], in[1], in[2], in[3], in[4], in[5]};
      const bool vec = k == 3 || (!v.var && k < 2);
      a[k] = released ? (vec ? b.released2 : f.released) : nullptr;
      reset();
      BAD(v.bwd(a[0], a[1], a[2], a[3], a[4], a[5], 2, 2, &dA, &dB, &dX, &dH),
          released ? TLRT_ERR_RELEASED : TLRT_ERR_NULL_ARGUMENT, fn, names[k]);
      CLEARED4(dA, dB, dX, dH);
    }
  reset();
  BAD(v.bwd(coef, coef, f.a, b.w2, b.o4, f.b, 2, 2, nullptr, &dB, &dX, &dH),
      TLRT_ERR_NULL_ARGUMENT, fn, "dA");
  CLEARED(dB);
  CLEARED(dX);
  CLEARED(dH);
  reset();
  BAD(v.bwd(coef, coef, f.a, b.w2, b.o4, f.b, 2, 2, &dA, nullptr, &dX, &dH),
      TLRT_ERR_NULL_ARGUMENT, fn, "dB");
  CLEARED(dA);
  CLEARED(dX);
  CLEARED(dH);
  reset();
  BAD(v.bwd(coef, coef, f.a, b.w2, b.o4, f.b, 2, 2, &dA, &dB, nullptr, &dH),
      TLRT_ERR_NULL_ARGUMENT, fn, "dX");
  CLEARED(dA);
  CLEARED(dB);
  CLEARED(dH);
  reset();
  BAD(v.bwd(coef, coef, f.a, b.w2, b.o4, f.b, 2, 2, &dA, &dB, &dX, nullptr),
      TLRT_ERR_NULL_ARGUMENT, fn, "dH0");
  CLEARED(dA);
  CLEARED(dB);
  CLEARED(dX);
  // X against seq_len * state.
  struct Shape {
    const tlrt_buffer *x;
    uint64_t T, D;
  };
  for (const Shape &s : {Shape{f.a, 1, 2}, Shape{f.a, 4, 2}, Shape{f.a, k32 + 2, 2},
                         Shape{f.empty, k32, k32}, Shape{f.a, UINT64_MAX, UINT64_MAX},
                         Shape{f.a, kTooMany, 2}, Shape{f.empty, 2, 2}}) {
    reset();
    BAD(v.bwd(coef, coef, s.x, b.w2, b.o4, f.b, s.T, s.D, &dA, &dB, &dX, &dH), TLRT_ERR_SHAPE, fn,
        "X", "seq_len", "state");
    CLEARED4(dA, dB, dX, dH);
  }
  // out, dY against X; A, B, h0 as in the forward.
  for (const tlrt_buffer *bad : {f.short3, f.empty, b.v2}) {
    reset();
    BAD(v.bwd(coef, coef, f.a, b.w2, bad, f.b, 2, 2, &dA, &dB, &dX, &dH), TLRT_ERR_SHAPE, fn, "out",
        "X");
    CLEARED4(dA, dB, dX, dH);
    reset();
    BAD(v.bwd(coef, coef, f.a, b.w2, b.o4, bad, 2, 2, &dA, &dB, &dX, &dH), TLRT_ERR_SHAPE, fn, "dY",
        "X");
    CLEARED4(dA, dB, dX, dH);
  }
  for (const tlrt_buffer *bad : {b.v3, f.empty}) {
    reset();
    BAD(v.bwd(bad, coef, f.a, b.w2, b.o4, f.b, 2, 2, &dA, &dB, &dX, &dH), TLRT_ERR_SHAPE, fn, "A");
    CLEARED4(dA, dB, dX, dH);
    reset();
    BAD(v.bwd(coef, bad, f.a, b.w2, b.o4, f.b, 2, 2, &dA, &dB, &dX, &dH), TLRT_ERR_SHAPE, fn, "B");
    CLEARED4(dA, dB, dX, dH);
    reset();
    BAD(v.bwd(coef, coef, f.a, bad, b.o4, f.b, 2, 2, &dA, &dB, &dX, &dH), TLRT_ERR_SHAPE, fn, "h0",
        "state");
    CLEARED4(dA, dB, dX, dH);
  }
  // Good calls: T = 2, T = 0 (dA, dB: diag 2 zeros, var empty; dH0 2 zeros), D = 0.
  dA = dB = dX = dH = nullptr;
  TH_OK(v.bwd(coef, coef, f.a, b.w2, b.o4, f.b, 2, 2, &dA, &dB, &dX, &dH));
  expect_result(fn, dA, v.var ? 4 : 2);
  expect_result(fn, dB, v.var ? 4 : 2);
  expect_result(fn, dX, 4);
  expect_result(fn, dH, 2);
  dA = dB = dX = dH = nullptr;
  const tlrt_buffer *c0 = v.var ? f.empty : b.v2;
  TH_OK(v.bwd(c0, c0, f.empty, b.w2, f.empty, f.empty, 0, 2, &dA, &dB, &dX, &dH));
  expect_result(fn, dA, v.var ? 0 : 2);
  expect_result(fn, dB, v.var ? 0 : 2);
  expect_result(fn, dX, 0);
  expect_result(fn, dH, 2);
  dA = dB = dX = dH = nullptr;
  TH_OK(v.bwd(f.empty, f.empty, f.empty, f.empty, f.empty, f.empty, 7, 0, &dA, &dB, &dX, &dH));
  expect_result(fn, dA, 0);
  expect_result(fn, dB, 0);
  expect_result(fn, dX, 0);
  expect_result(fn, dH, 0);
}

void check_mixed_devices(const Fixture &f, const Bufs &b, const Variant &v) {
  if (!th::cuda_ready()) {
    std::printf("no usable CUDA device: mixed-device checks skipped\n");
    return;
  }
  const tlrt_buffer *coef = v.var ? b.x4 : b.v2;
  tlrt_buffer *gcoef = nullptr, *g4 = nullptr, *g2 = nullptr;
  TH_OK(tlrt_buffer_to_device(coef, TLRT_DEVICE_CUDA(0), &gcoef));
  TH_OK(tlrt_buffer_to_device(f.a, TLRT_DEVICE_CUDA(0), &g4));
  TH_OK(tlrt_buffer_to_device(b.w2, TLRT_DEVICE_CUDA(0), &g2));
  if (gcoef && g4 && g2) {
    const tlrt_buffer *in[6] = {coef, coef, f.a, b.w2, b.o4, f.b};
    const tlrt_buffer *gpu[6] = {gcoef, gcoef, g4, g2, g4, g4};
    const char *names[6] = {"A", "B", "X", "h0", "out", "dY"};
    for (int k = 1; k < 6; ++k) {
      const tlrt_buffer *a[6] = {in[0], in[1], in[2], in[3], in[4], in[5]};
      a[k] = gpu[k];
      if (k < 4) {
        tlrt_buffer *out = kSentinel;
        BAD(v.fwd(a[0], a[1], a[2], a[3], 2, 2, &out), TLRT_ERR_DEVICE_MISMATCH, v.fwd_name, "A",
            names[k]);
        CLEARED(out);
      }
      tlrt_buffer *dA = kSentinel, *dB = kSentinel, *dX = kSentinel, *dH = kSentinel;
      BAD(v.bwd(a[0], a[1], a[2], a[3], a[4], a[5], 2, 2, &dA, &dB, &dX, &dH),
          TLRT_ERR_DEVICE_MISMATCH, v.bwd_name, "A", names[k]);
      CLEARED4(dA, dB, dX, dH);
    }
  }
  for (tlrt_buffer *p : {gcoef, g4, g2}) tlrt_buffer_free(p);
}

}  // namespace

int main() {
  const tlrt_allocator_stats start = th::stats();
  {
    Fixture f = make_fixture();
    Bufs b = make_bufs();
    const Variant variants[2] = {
        {"tlrt_selective_scan_diag_fwd", "tlrt_selective_scan_diag_bwd",
         tlrt_selective_scan_diag_fwd, tlrt_selective_scan_diag_bwd, false},
        {"tlrt_selective_scan_diag_var_fwd", "tlrt_selective_scan_diag_var_bwd",
         tlrt_selective_scan_diag_var_fwd, tlrt_selective_scan_diag_var_bwd, true}};
    for (const Variant &v : variants) {
      check_fwd(f, b, v);
      check_bwd(f, b, v);
      check_mixed_devices(f, b, v);
    }
    free_bufs(b);
    free_fixture(f);
  }
  expect_no_leaks(start);
  return th::finish("test_bad_input_scan");
}
