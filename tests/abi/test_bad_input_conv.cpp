// Bad input for the convolution family (abi/tlrt_conv.h): all eight entry points. NULL for every
// pointer argument (buffers, geometry arrays, out-parameters; all three backward out-parameters
// NULL), released buffers, every size that must match (input, kernel, bias, grad_out; counts beyond
// 64 bits included), invalid geometry (rank 0 and 9, stride 0, kernel extent 0, dilation 0,
// groups 0, channels not divisible by groups, padding reaching 2^62), an output beyond
// TLRT_MAX_ELEMENTS and an output extent beyond 64 bits, mixed devices (with a GPU only). Each
// failing call: the exact status, every out-parameter cleared to NULL (pre-filled with a
// sentinel), a last-error message naming the function and the offending arguments. Good calls
// succeed, with NULL backward out-parameters skipped. Nothing leaks.
#include "bad_input.hpp"

namespace {

const char *kFwd = "tlrt_conv_fwd";
const char *kBwd = "tlrt_conv_bwd";
const char *kFwd2 = "tlrt_conv2d_fwd";
const char *kBwd2 = "tlrt_conv2d_bwd";
const char *kTFwd = "tlrt_convtranspose_fwd";
const char *kTBwd = "tlrt_convtranspose_bwd";
const char *kTFwd2 = "tlrt_convtranspose2d_fwd";
const char *kTBwd2 = "tlrt_convtranspose2d_bwd";

// Geometry of the good call: batch 1, in_c 2, out_c 2, 1-D in 4, k 2 -> out 3.
// input 8, kernel 2 * 2 * 2 = 8 (groups 1), bias 2, grad_out 6; transposed: out 5, grad_out 10.
struct Bufs {
  tlrt_buffer *x8 = nullptr, *w8 = nullptr, *b2 = nullptr, *dy6 = nullptr, *dy10 = nullptr;
  tlrt_buffer *v3 = nullptr, *released = nullptr;
};

Bufs make_bufs() {
  th::Rng rng(5);
  Bufs b;
  b.x8 = th::upload(rng.vec(8));
  b.w8 = th::upload(rng.vec(8));
  b.b2 = th::upload(rng.vec(2));
  b.dy6 = th::upload(rng.vec(6));
  b.dy10 = th::upload(rng.vec(10));
  b.v3 = th::upload(rng.vec(3));
  b.released = th::upload(rng.vec(8));
  bool freed = false;
  TH_OK(tlrt_buffer_release_storage(b.released, &freed));
  return b;
}

void free_bufs(Bufs &b) {
  for (tlrt_buffer *p : {b.x8, b.w8, b.b2, b.dy6, b.dy10, b.v3, b.released}) tlrt_buffer_free(p);
  b = Bufs{};
}

const uint64_t kIn[1] = {4}, kK[1] = {2}, kS[1] = {1}, kP[1] = {0}, kD[1] = {1};

struct Args {
  uint64_t batch = 1, in_c = 2, out_c = 2, groups = 1;
  const uint64_t *in = kIn, *k = kK, *s = kS, *p = kP, *d = kD;
  uint32_t rank = 1;
};

tlrt_status fwd(bool tr, const tlrt_buffer *w, const tlrt_buffer *b, const tlrt_buffer *x,
                const Args &a, tlrt_buffer **out) {
  return tr ? tlrt_convtranspose_fwd(w, b, x, a.batch, a.in_c, a.out_c, a.in, a.rank, a.k, a.s,
                                     a.p, a.d, a.groups, out)
            : tlrt_conv_fwd(w, b, x, a.batch, a.in_c, a.out_c, a.in, a.rank, a.k, a.s, a.p, a.d,
                            a.groups, out);
}

tlrt_status bwd(bool tr, const tlrt_buffer *w, const tlrt_buffer *x, const tlrt_buffer *dy,
                const Args &a, tlrt_buffer **dw, tlrt_buffer **db, tlrt_buffer **dx) {
  return tr ? tlrt_convtranspose_bwd(w, x, dy, a.batch, a.in_c, a.out_c, a.in, a.rank, a.k, a.s,
                                     a.p, a.d, a.groups, dw, db, dx)
            : tlrt_conv_bwd(w, x, dy, a.batch, a.in_c, a.out_c, a.in, a.rank, a.k, a.s, a.p, a.d,
                            a.groups, dw, db, dx);
}

#define FWD_BAD(tr, w, b, x, a, want, ...)                                        \
  do {                                                                          \
    tlrt_buffer *y = kSentinel;                                                 \
    BAD(fwd(tr, w, b, x, a, &y), want, (tr) ? kTFwd : kFwd, __VA_ARGS__);       \
    CLEARED(y);                                                                 \
  } while (0)

#define BWD_BAD(tr, w, x, dy, a, want, ...)                                          \
  do {                                                                             \
    tlrt_buffer *dw = kSentinel, *db = kSentinel, *dx = kSentinel;                 \
    BAD(bwd(tr, w, x, dy, a, &dw, &db, &dx), want, (tr) ? kTBwd : kBwd, __VA_ARGS__); \
    CLEARED(dw);                                                                   \
    CLEARED(db);                                                                   \
    CLEARED(dx);                                                                   \
  } while (0)

void check_nd(const Fixture &f, const Bufs &b, bool tr) {
  const Args a;
  tlrt_buffer *dy = tr ? b.dy10 : b.dy6;
  // NULL buffers and out-parameters.
  FWD_BAD(tr, nullptr, b.b2, b.x8, a, TLRT_ERR_NULL_ARGUMENT, "kernel");
  FWD_BAD(tr, b.w8, b.b2, nullptr, a, TLRT_ERR_NULL_ARGUMENT, "input");
  BAD(fwd(tr, b.w8, b.b2, b.x8, a, nullptr), TLRT_ERR_NULL_ARGUMENT, tr ? kTFwd : kFwd, "out");
  BWD_BAD(tr, nullptr, b.x8, dy, a, TLRT_ERR_NULL_ARGUMENT, "kernel");
  BWD_BAD(tr, b.w8, nullptr, dy, a, TLRT_ERR_NULL_ARGUMENT, "input");
  BWD_BAD(tr, b.w8, b.x8, nullptr, a, TLRT_ERR_NULL_ARGUMENT, "grad_out");
  BAD(bwd(tr, b.w8, b.x8, dy, a, nullptr, nullptr, nullptr), TLRT_ERR_NULL_ARGUMENT,
      tr ? kTBwd : kBwd, "d_kernel", "d_bias", "d_input");
  // NULL geometry arrays (dilation NULL is allowed: all 1).
  {
    Args n = a;
    n.in = nullptr;
    FWD_BAD(tr, b.w8, b.b2, b.x8, n, TLRT_ERR_NULL_ARGUMENT, "in_spatial");
    BWD_BAD(tr, b.w8, b.x8, dy, n, TLRT_ERR_NULL_ARGUMENT, "in_spatial");
    n = a;
    n.k = nullptr;
    FWD_BAD(tr, b.w8, b.b2, b.x8, n, TLRT_ERR_NULL_ARGUMENT, "kernel_size");
    n = a;
    n.s = nullptr;
    FWD_BAD(tr, b.w8, b.b2, b.x8, n, TLRT_ERR_NULL_ARGUMENT, "stride");
    n = a;
    n.p = nullptr;
    FWD_BAD(tr, b.w8, b.b2, b.x8, n, TLRT_ERR_NULL_ARGUMENT, "padding");
    n = a;
    n.d = nullptr;
    tlrt_buffer *y = nullptr;
    TH_OK(fwd(tr, b.w8, b.b2, b.x8, n, &y));
    expect_result(tr ? kTFwd : kFwd, y, tr ? 10 : 6);
  }
  // Released buffers.
  FWD_BAD(tr, b.released, b.b2, b.x8, a, TLRT_ERR_RELEASED, "kernel");
  FWD_BAD(tr, b.w8, b.released, b.x8, a, TLRT_ERR_RELEASED, "bias");
  FWD_BAD(tr, b.w8, b.b2, b.released, a, TLRT_ERR_RELEASED, "input");
  BWD_BAD(tr, b.released, b.x8, dy, a, TLRT_ERR_RELEASED, "kernel");
  BWD_BAD(tr, b.w8, b.released, dy, a, TLRT_ERR_RELEASED, "input");
  BWD_BAD(tr, b.w8, b.x8, b.released, a, TLRT_ERR_RELEASED, "grad_out");
  // Sizes.
  FWD_BAD(tr, b.v3, b.b2, b.x8, a, TLRT_ERR_SHAPE, "kernel");
  FWD_BAD(tr, b.w8, b.v3, b.x8, a, TLRT_ERR_SHAPE, "bias");
  FWD_BAD(tr, b.w8, b.b2, b.v3, a, TLRT_ERR_SHAPE, "input");
  BWD_BAD(tr, b.v3, b.x8, dy, a, TLRT_ERR_SHAPE, "kernel");
  BWD_BAD(tr, b.w8, b.v3, dy, a, TLRT_ERR_SHAPE, "input");
  BWD_BAD(tr, b.w8, b.x8, b.v3, a, TLRT_ERR_SHAPE, "grad_out");
  {
    Args big = a;  // input count beyond 64 bits never matches
    const uint64_t huge[1] = {uint64_t{1} << 40};
    big.batch = uint64_t{1} << 30;
    big.in = huge;
    FWD_BAD(tr, b.w8, b.b2, b.x8, big, TLRT_ERR_SHAPE, "input");
    Args kb = a;  // kernel count beyond 64 bits
    const uint64_t hk[1] = {uint64_t{1} << 62};
    kb.k = hk;
    kb.out_c = uint64_t{1} << 4;
    FWD_BAD(tr, b.w8, b.b2, b.x8, kb, TLRT_ERR_SHAPE, "kernel");
  }
  // Geometry.
  {
    Args g = a;
    g.rank = 0;
    FWD_BAD(tr, b.w8, b.b2, b.x8, g, TLRT_ERR_INVALID_ARGUMENT, "rank");
    BWD_BAD(tr, b.w8, b.x8, dy, g, TLRT_ERR_INVALID_ARGUMENT, "rank");
    g.rank = 9;
    FWD_BAD(tr, b.w8, b.b2, b.x8, g, TLRT_ERR_INVALID_ARGUMENT, "rank");
    const uint64_t zero[1] = {0};
    g = a;
    g.s = zero;
    FWD_BAD(tr, b.w8, b.b2, b.x8, g, TLRT_ERR_INVALID_ARGUMENT, "stride[0]");
    BWD_BAD(tr, b.w8, b.x8, dy, g, TLRT_ERR_INVALID_ARGUMENT, "stride[0]");
    g = a;
    g.k = zero;
    FWD_BAD(tr, b.w8, b.b2, b.x8, g, TLRT_ERR_INVALID_ARGUMENT, "kernel_size[0]");
    g = a;
    g.d = zero;
    FWD_BAD(tr, b.w8, b.b2, b.x8, g, TLRT_ERR_INVALID_ARGUMENT, "dilation[0]");
    g = a;
    g.groups = 0;
    FWD_BAD(tr, b.w8, b.b2, b.x8, g, TLRT_ERR_INVALID_ARGUMENT, "groups");
    BWD_BAD(tr, b.w8, b.x8, dy, g, TLRT_ERR_INVALID_ARGUMENT, "groups");
    g = a;
    g.in_c = 3;
    g.groups = 2;
    FWD_BAD(tr, b.w8, b.b2, b.x8, g, TLRT_ERR_INVALID_ARGUMENT, "in_channels", "groups");
    g = a;
    g.out_c = 3;
    g.groups = 2;
    FWD_BAD(tr, b.w8, b.b2, b.x8, g, TLRT_ERR_INVALID_ARGUMENT, "out_channels", "groups");
    // Padding reaching 2^62 with a non-empty output (stride as large, so the output stays small).
    const uint64_t hp[1] = {uint64_t{1} << 61}, hs[1] = {uint64_t{1} << 62};
    g = a;
    g.p = hp;
    g.s = hs;
    if (!tr) FWD_BAD(tr, b.w8, b.b2, b.x8, g, TLRT_ERR_INVALID_ARGUMENT, "padding");
  }
  // Output beyond TLRT_MAX_ELEMENTS: in_c 0 (empty input and kernel), huge out_c with padding.
  {
    Args g = a;
    g.in_c = 0;
    g.out_c = uint64_t{1} << 62;
    const uint64_t pad1[1] = {1}, in0[1] = {0}, k1[1] = {1};
    g.p = pad1;
    g.in = in0;
    g.k = k1;
    if (!tr) FWD_BAD(tr, f.empty, nullptr, f.empty, g, TLRT_ERR_OVERFLOW);
    // An output extent beyond 64 bits (transposed): (in - 1) s + ek with in = 2^40, s = 2^40.
    if (tr) {
      Args t = a;
      const uint64_t hin[1] = {uint64_t{1} << 40}, hs[1] = {uint64_t{1} << 40};
      t.in = hin;
      t.s = hs;
      FWD_BAD(tr, b.w8, b.b2, b.x8, t, TLRT_ERR_OVERFLOW, "in_spatial");
    }
  }
  // Good calls: NULL backward out-parameters skip gradients; bias NULL allowed.
  {
    tlrt_buffer *dw = nullptr, *db = nullptr, *dx = nullptr, *y = nullptr;
    TH_OK(fwd(tr, b.w8, nullptr, b.x8, a, &y));
    expect_result(tr ? kTFwd : kFwd, y, tr ? 10 : 6);
    TH_OK(bwd(tr, b.w8, b.x8, dy, a, &dw, nullptr, nullptr));
    expect_result(tr ? kTBwd : kBwd, dw, 8);
    TH_OK(bwd(tr, b.w8, b.x8, dy, a, nullptr, &db, nullptr));
    expect_result(tr ? kTBwd : kBwd, db, 2);
    TH_OK(bwd(tr, b.w8, b.x8, dy, a, nullptr, nullptr, &dx));
    expect_result(tr ? kTBwd : kBwd, dx, 8);
  }
}

// The 2-D entry points: in 2 x 2, k 1 x 1, in_c = out_c = 2 -> input 8, kernel 4, out 8.
void check_2d(const Bufs &b) {
  tlrt_buffer *y = kSentinel;
  BAD(tlrt_conv2d_fwd(nullptr, nullptr, b.x8, 1, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 1, 1, 1, &y),
      TLRT_ERR_NULL_ARGUMENT, kFwd2, "kernel");
  CLEARED(y);
  y = kSentinel;
  BAD(tlrt_conv2d_fwd(b.w8, nullptr, b.x8, 1, 2, 2, 2, 2, 1, 1, 0, 1, 0, 0, 1, 1, 1, &y),
      TLRT_ERR_INVALID_ARGUMENT, kFwd2, "stride_h");
  CLEARED(y);
  y = kSentinel;
  BAD(tlrt_conv2d_fwd(b.w8, nullptr, b.x8, 1, 2, 2, 2, 2, 1, 0, 1, 1, 0, 0, 1, 1, 1, &y),
      TLRT_ERR_INVALID_ARGUMENT, kFwd2, "kernel_w");
  CLEARED(y);
  y = kSentinel;
  BAD(tlrt_conv2d_fwd(b.w8, nullptr, b.x8, 1, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 1, 1, 1, &y),
      TLRT_ERR_SHAPE, kFwd2, "kernel");
  CLEARED(y);
  y = kSentinel;
  BAD(tlrt_convtranspose2d_fwd(b.w8, nullptr, b.x8, 1, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 1, 0, 1,
                               &y),
      TLRT_ERR_INVALID_ARGUMENT, kTFwd2, "dilation_w");
  CLEARED(y);
  y = kSentinel;
  BAD(tlrt_convtranspose2d_fwd(b.w8, nullptr, nullptr, 1, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 1, 1, 1,
                               &y),
      TLRT_ERR_NULL_ARGUMENT, kTFwd2, "input");
  CLEARED(y);
  tlrt_buffer *dw = kSentinel, *db = kSentinel, *dx = kSentinel;
  BAD(tlrt_conv2d_bwd(b.w8, b.x8, b.v3, 1, 2, 2, 2, 2, 2, 1, 1, 1, 0, 0, 1, 1, 1, &dw, &db, &dx),
      TLRT_ERR_SHAPE, kBwd2, "grad_out");
  CLEARED(dw);
  CLEARED(db);
  CLEARED(dx);
  dw = db = dx = kSentinel;
  BAD(tlrt_convtranspose2d_bwd(b.w8, b.released, b.x8, 1, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 1, 1, 1,
                               &dw, &db, &dx),
      TLRT_ERR_RELEASED, kTBwd2, "input");
  CLEARED(dw);
  CLEARED(db);
  CLEARED(dx);
  dw = db = dx = kSentinel;
  BAD(tlrt_convtranspose2d_bwd(b.w8, b.x8, b.x8, 1, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 1, 1, 3, &dw,
                               &db, &dx),
      TLRT_ERR_INVALID_ARGUMENT, kTBwd2, "in_channels", "groups");
  CLEARED(dw);
  CLEARED(db);
  CLEARED(dx);
}

void check_mixed_devices(const Bufs &b) {
  if (!th::cuda_ready()) {
    std::printf("no usable CUDA device: mixed-device checks skipped\n");
    return;
  }
  tlrt_buffer *cx = nullptr, *cb = nullptr, *cdy = nullptr;
  TH_OK(tlrt_buffer_to_device(b.x8, TLRT_DEVICE_CUDA(0), &cx));
  TH_OK(tlrt_buffer_to_device(b.b2, TLRT_DEVICE_CUDA(0), &cb));
  TH_OK(tlrt_buffer_to_device(b.dy6, TLRT_DEVICE_CUDA(0), &cdy));
  if (cx && cb && cdy) {
    const Args a;
    FWD_BAD(false, b.w8, b.b2, cx, a, TLRT_ERR_DEVICE_MISMATCH, "input", "kernel");
    FWD_BAD(false, b.w8, cb, b.x8, a, TLRT_ERR_DEVICE_MISMATCH, "input", "bias");
    BWD_BAD(false, b.w8, b.x8, cdy, a, TLRT_ERR_DEVICE_MISMATCH, "input", "grad_out");
    BWD_BAD(true, b.w8, cx, b.dy10, a, TLRT_ERR_DEVICE_MISMATCH, "input", "kernel");
  }
  tlrt_buffer_free(cx);
  tlrt_buffer_free(cb);
  tlrt_buffer_free(cdy);
}

}  // namespace

int main() {
  const tlrt_allocator_stats start = th::stats();
  {
    Fixture f = make_fixture();
    Bufs b = make_bufs();
    check_nd(f, b, false);
    check_nd(f, b, true);
    check_2d(b);
    check_mixed_devices(b);
    free_bufs(b);
    free_fixture(f);
  }
  expect_no_leaks(start);
  return th::finish("test_bad_input_conv");
}
