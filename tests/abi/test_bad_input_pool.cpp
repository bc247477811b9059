// Bad input for the pooling family (abi/tlrt_pool.h), all twelve entry points (max, average and
// smooth max; forward and backward; 2-D and N-D names): NULL for every pointer argument (buffers,
// the N-D geometry arrays, the out-parameter), released buffers, the geometry's domain (rank 0 and
// 9, a zero kernel extent, a zero stride, 2 pad > kernel on either axis, an output extent beyond
// 64 bits), sizes (x against batch * channels * prod(in), products beyond 2^64 included; dy against
// the output size), beta outside its domain (NaN, +-inf, 0, rounding to +-inf or to 0 in float32),
// avgpool_bwd's dx beyond TLRT_MAX_ELEMENTS or 2^64, and mixed devices (with a GPU only). For each
// failing call: the exact status, the out-parameter cleared to NULL (pre-filled with a sentinel),
// and a last-error message naming the function and the offending arguments. Good calls (the empty
// cases included) succeed with the right output sizes. Nothing leaks.
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "bad_input.hpp"

namespace {

struct Args {
  const tlrt_buffer *x = nullptr, *dy = nullptr;
  uint64_t N = 1, C = 1;
  uint64_t in[9] = {3, 4, 1, 1, 1, 1, 1, 1, 1}, k[9] = {2, 2, 1, 1, 1, 1, 1, 1, 1},
           s[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1}, p[9] = {0, 0, 0, 0, 0, 0, 0, 0, 0};
  uint32_t rank = 2;
  bool null_in = false, null_k = false, null_s = false, null_p = false;
  double beta = 1.0;
};

struct Fn {
  const char *name;
  bool nd, has_x, has_dy, has_beta;
  std::function<tlrt_status(const Args &, tlrt_buffer **)> call;
};

#define ND_GEO(a)                                                                         \
  a.N, a.C, a.null_in ? nullptr : a.in, a.rank, a.null_k ? nullptr : a.k,                 \
      a.null_s ? nullptr : a.s, a.null_p ? nullptr : a.p
#define GEO2(a) a.N, a.C, a.in[0], a.in[1], a.k[0], a.k[1], a.s[0], a.s[1], a.p[0], a.p[1]

std::vector<Fn> functions() {
  return {
      {"tlrt_maxpool2d_fwd", false, true, false, false,
       [](const Args &a, tlrt_buffer **o) { return tlrt_maxpool2d_fwd(a.x, GEO2(a), o); }},
      {"tlrt_maxpool2d_bwd", false, true, true, false,
       [](const Args &a, tlrt_buffer **o) { return tlrt_maxpool2d_bwd(a.x, a.dy, GEO2(a), o); }},
      {"tlrt_maxpool_fwd", true, true, false, false,
       [](const Args &a, tlrt_buffer **o) { return tlrt_maxpool_fwd(a.x, ND_GEO(a), o); }},
      {"tlrt_maxpool_bwd", true, true, true, false,
       [](const Args &a, tlrt_buffer **o) { return tlrt_maxpool_bwd(a.x, a.dy, ND_GEO(a), o); }},
      {"tlrt_avgpool2d_fwd", false, true, false, false,
       [](const Args &a, tlrt_buffer **o) { return tlrt_avgpool2d_fwd(a.x, GEO2(a), true, o); }},
      {"tlrt_avgpool2d_bwd", false, false, true, false,
       [](const Args &a, tlrt_buffer **o) { return tlrt_avgpool2d_bwd(a.dy, GEO2(a), false, o); }},
      {"tlrt_avgpool_fwd", true, true, false, false,
       [](const Args &a, tlrt_buffer **o) { return tlrt_avgpool_fwd(a.x, ND_GEO(a), false, o); }},
      {"tlrt_avgpool_bwd", true, false, true, false,
       [](const Args &a, tlrt_buffer **o) { return tlrt_avgpool_bwd(a.dy, ND_GEO(a), true, o); }},
      {"tlrt_smooth_maxpool2d_fwd", false, true, false, true,
       [](const Args &a, tlrt_buffer **o) {
         return tlrt_smooth_maxpool2d_fwd(a.x, GEO2(a), a.beta, o);
       }},
      {"tlrt_smooth_maxpool2d_bwd", false, true, true, true,
       [](const Args &a, tlrt_buffer **o) {
         return tlrt_smooth_maxpool2d_bwd(a.x, a.dy, GEO2(a), a.beta, o);
       }},
      {"tlrt_smooth_maxpool_fwd", true, true, false, true,
       [](const Args &a, tlrt_buffer **o) {
         return tlrt_smooth_maxpool_fwd(a.x, ND_GEO(a), a.beta, o);
       }},
      {"tlrt_smooth_maxpool_bwd", true, true, true, true,
       [](const Args &a, tlrt_buffer **o) {
         return tlrt_smooth_maxpool_bwd(a.x, a.dy, ND_GEO(a), a.beta, o);
       }},
  };
}

// Argument names as the entry point spells them: "kernel_w" (2-D) or "kernel" (N-D: the message
// says "argument kernel[1]").
std::string axis(const Fn &f, const char *base2d, const char *basend, int d) {
  if (f.nd) return basend;
  return std::string(base2d) + (d == 0 ? "_h" : "_w");
}

struct Bufs {
  tlrt_buffer *x12 = nullptr;  // (1, 1, 3, 4)
  tlrt_buffer *dy6 = nullptr;  // its k2 s1 p0 output (1, 1, 2, 3)
  tlrt_buffer *v5 = nullptr;   // a wrong size
  tlrt_buffer *one = nullptr;
  tlrt_buffer *rel = nullptr;  // released
};

void expect_fail_fn(int line, const Fn &f, const Args &a, tlrt_status want,
                    std::initializer_list<const char *> names) {
  tlrt_buffer *out = kSentinel;
  const tlrt_status s = f.call(a, &out);
  expect_fail(line, f.name, s, want, f.name, names);
  CLEARED(out);
}
#define FAILS(f, a, want, ...) expect_fail_fn(__LINE__, f, a, want, {__VA_ARGS__})

void check_one(const Fn &f, const Bufs &b, const Fixture &fx) {
  Args good;
  good.x = b.x12;
  good.dy = b.dy6;
  // Good call first: the fixture is consistent.
  {
    tlrt_buffer *out = nullptr;
    TH_CHECK_MSG(f.call(good, &out) == TLRT_OK, "%s good call failed: %s", f.name,
                 tlrt_last_error());
    expect_result(f.name, out, f.has_dy ? 12 : 6);
  }
  // NULL out-parameter.
  {
    const tlrt_status s = f.call(good, nullptr);
    expect_fail(__LINE__, f.name, s, TLRT_ERR_NULL_ARGUMENT, f.name, {f.has_dy ? "dx" : "out"});
  }
  // NULL and released buffers.
  if (f.has_x) {
    Args a = good;
    a.x = nullptr;
    FAILS(f, a, TLRT_ERR_NULL_ARGUMENT, "x");
    a.x = fx.released;
    FAILS(f, a, TLRT_ERR_RELEASED, "x");
  }
  if (f.has_dy) {
    Args a = good;
    a.dy = nullptr;
    FAILS(f, a, TLRT_ERR_NULL_ARGUMENT, "dy");
    a.dy = b.rel;
    FAILS(f, a, TLRT_ERR_RELEASED, "dy");
  }
  // NULL geometry arrays and the rank (N-D only).
  if (f.nd) {
    for (int which = 0; which < 4; ++which) {
      Args a = good;
      (which == 0 ? a.null_in : which == 1 ? a.null_k : which == 2 ? a.null_s : a.null_p) = true;
      FAILS(f, a, TLRT_ERR_NULL_ARGUMENT,
            which == 0 ? "in_spatial" : which == 1 ? "kernel" : which == 2 ? "stride" : "padding");
    }
    for (uint32_t r : {0u, 9u, 100u}) {
      Args a = good;
      a.rank = r;
      FAILS(f, a, TLRT_ERR_INVALID_ARGUMENT, "rank");
    }
  }
  // Zero kernel extent, zero stride, 2 pad > kernel, on each axis.
  for (int d = 0; d < 2; ++d) {
    Args a = good;
    a.k[d] = 0;
    FAILS(f, a, TLRT_ERR_INVALID_ARGUMENT, axis(f, "kernel", "kernel", d).c_str());
    a = good;
    a.s[d] = 0;
    FAILS(f, a, TLRT_ERR_INVALID_ARGUMENT, axis(f, "stride", "stride", d).c_str());
    a = good;
    a.p[d] = 2;  // kernel 2: at most 1
    FAILS(f, a, TLRT_ERR_INVALID_ARGUMENT, axis(f, "pad", "padding", d).c_str(),
          axis(f, "kernel", "kernel", d).c_str());
    a = good;
    a.k[d] = 3;
    a.p[d] = 2;
    FAILS(f, a, TLRT_ERR_INVALID_ARGUMENT, axis(f, "pad", "padding", d).c_str());
    a = good;
    a.k[d] = UINT64_MAX;
    a.p[d] = UINT64_MAX / 2 + 1;  // just above half
    FAILS(f, a, TLRT_ERR_INVALID_ARGUMENT, axis(f, "pad", "padding", d).c_str());
  }
  // An output extent beyond 64 bits: in = 2^64 - 1, kernel 2^63, pad 2^62, stride 1.
  {
    Args a = good;
    a.in[1] = UINT64_MAX;
    a.k[1] = uint64_t{1} << 63;
    a.p[1] = uint64_t{1} << 62;
    FAILS(f, a, TLRT_ERR_OVERFLOW, axis(f, "in", "in_spatial", 1).c_str(),
          axis(f, "pad", "padding", 1).c_str(), axis(f, "stride", "stride", 1).c_str());
  }
  // x against batch * channels * prod(in).
  if (f.has_x) {
    struct Shape {
      const tlrt_buffer *x;
      uint64_t N, C, h, w;
    };
    const uint64_t k32 = uint64_t{1} << 32;
    for (const Shape &sh : {Shape{b.v5, 1, 1, 3, 4}, Shape{b.x12, 2, 1, 3, 4},
                            Shape{b.x12, 1, 1, 4, 4}, Shape{b.x12, 1, 3, 2, 3},
                            Shape{fx.empty, k32, k32, 2, 2}, Shape{b.x12, 1, 1, k32 + 3, 4},
                            Shape{fx.empty, 1, 1, UINT64_MAX, UINT64_MAX},
                            Shape{b.x12, kTooMany, 1, 3, 4}}) {
      Args a = good;
      a.x = sh.x;
      a.N = sh.N;
      a.C = sh.C;
      a.in[0] = sh.h;
      a.in[1] = sh.w;
      a.k[0] = a.k[1] = 1;  // every extent valid; dy checked after x
      FAILS(f, a, TLRT_ERR_SHAPE, "x", "batch", "channels",
            axis(f, "in", "in_spatial", 0).c_str(), axis(f, "in", "in_spatial", 1).c_str());
    }
  }
  // dy against batch * channels * prod(out).
  if (f.has_dy) {
    for (const tlrt_buffer *bad : {b.v5, b.x12, fx.empty, b.one}) {
      Args a = good;
      a.dy = bad;
      FAILS(f, a, TLRT_ERR_SHAPE, "dy", "batch", "channels");
    }
    Args a = good;
    a.s[1] = 2;  // output (2, 2): dy6 no longer matches
    FAILS(f, a, TLRT_ERR_SHAPE, "dy");
  }
  // beta.
  if (f.has_beta)
    for (double beta : {(double)NAN, (double)INFINITY, -(double)INFINITY, 0.0, -0.0, 1e300,
                        -1e39, 1e-50, -1e-46}) {
      Args a = good;
      a.beta = beta;
      FAILS(f, a, TLRT_ERR_INVALID_ARGUMENT, "beta");
    }
  // avgpool_bwd's dx beyond TLRT_MAX_ELEMENTS (2^62 elements) and beyond 2^64 (no x to match).
  if (!f.has_x) {
    Args a = good;
    a.dy = b.one;
    a.in[0] = a.in[1] = a.s[0] = a.s[1] = uint64_t{1} << 31;
    a.k[0] = a.k[1] = 1;
    FAILS(f, a, TLRT_ERR_OVERFLOW, "dx");
    a.in[0] = a.in[1] = a.s[0] = a.s[1] = uint64_t{1} << 40;
    FAILS(f, a, TLRT_ERR_OVERFLOW, "dx");
  }
  // Good calls: a window larger than the padded input (empty output, +0 dx), empty inputs,
  // 2 pad == kernel, rank 1 and 8 (N-D), beta extremes that stay finite and nonzero.
  {
    Args a = good;
    a.k[0] = 6;  // 3 + 2 * 1 < 6: out_h = 0
    a.p[0] = 1;
    a.dy = fx.empty;
    tlrt_buffer *out = nullptr;
    TH_CHECK_MSG(f.call(a, &out) == TLRT_OK, "%s (empty output) failed: %s", f.name,
                 tlrt_last_error());
    expect_result(f.name, out, f.has_dy ? 12 : 0);
    a = good;
    a.x = fx.empty;
    a.dy = fx.empty;
    a.N = 0;
    out = nullptr;
    TH_CHECK_MSG(f.call(a, &out) == TLRT_OK, "%s (batch 0) failed: %s", f.name,
                 tlrt_last_error());
    expect_result(f.name, out, 0);
    a = good;
    a.k[0] = a.k[1] = 2;
    a.p[0] = a.p[1] = 1;  // output (4, 5)
    tlrt_buffer *dy20 = th::upload(std::vector<float>(20, 1.0f));
    a.dy = dy20;
    out = nullptr;
    TH_CHECK_MSG(f.call(a, &out) == TLRT_OK, "%s (2 pad == kernel) failed: %s", f.name,
                 tlrt_last_error());
    expect_result(f.name, out, f.has_dy ? 12 : 20);
    tlrt_buffer_free(dy20);
    if (f.has_beta)
      for (double beta : {3.4e38, -3.4e38, 1e-40, -1e-45}) {
        a = good;
        a.beta = beta;
        out = nullptr;
        TH_CHECK_MSG(f.call(a, &out) == TLRT_OK, "%s (beta %g) failed: %s", f.name, beta,
                     tlrt_last_error());
        expect_result(f.name, out, f.has_dy ? 12 : 6);
      }
    if (f.nd)
      for (uint32_t r : {1u, 8u}) {
        a = good;
        a.rank = r;
        a.in[0] = 12;
        a.k[0] = 2;  // (12) -> 11 outputs; rank 8: (12, 1, ..., 1) with kernel (2, 1, ..., 1)
        a.k[1] = 1;
        a.in[1] = 1;
        tlrt_buffer *dy11 = th::upload(std::vector<float>(11, 1.0f));
        a.dy = dy11;
        out = nullptr;
        TH_CHECK_MSG(f.call(a, &out) == TLRT_OK, "%s (rank %u) failed: %s", f.name, r,
                     tlrt_last_error());
        expect_result(f.name, out, f.has_dy ? 12 : 11);
        tlrt_buffer_free(dy11);
      }
  }
}

void check_mixed_devices(const Bufs &b) {
  if (!th::cuda_ready()) {
    std::printf("no usable CUDA device: mixed-device checks skipped\n");
    return;
  }
  tlrt_buffer *cx = nullptr, *cdy = nullptr;
  TH_OK(tlrt_buffer_to_device(b.x12, TLRT_DEVICE_CUDA(0), &cx));
  TH_OK(tlrt_buffer_to_device(b.dy6, TLRT_DEVICE_CUDA(0), &cdy));
  for (const Fn &f : functions()) {
    if (!(f.has_x && f.has_dy) || !cx || !cdy) continue;
    Args a;
    a.x = cx;
    a.dy = b.dy6;
    FAILS(f, a, TLRT_ERR_DEVICE_MISMATCH, "x", "dy");
    a.x = b.x12;
    a.dy = cdy;
    FAILS(f, a, TLRT_ERR_DEVICE_MISMATCH, "x", "dy");
  }
  tlrt_buffer_free(cx);
  tlrt_buffer_free(cdy);
}

}  // namespace

int main() {
  const tlrt_allocator_stats start = th::stats();
  {
    Fixture fx = make_fixture();
    Bufs b;
    th::Rng rng(3);
    b.x12 = th::upload(rng.vec(12));
    b.dy6 = th::upload(rng.vec(6));
    b.v5 = th::upload(rng.vec(5));
    b.one = th::upload({1.0f});
    b.rel = th::upload(rng.vec(6));
    bool freed = false;
    TH_OK(tlrt_buffer_release_storage(b.rel, &freed));
    for (const Fn &f : functions()) check_one(f, b, fx);
    check_mixed_devices(b);
    for (tlrt_buffer *p : {b.x12, b.dy6, b.v5, b.one, b.rel}) tlrt_buffer_free(p);
    free_fixture(fx);
  }
  expect_no_leaks(start);
  return th::finish("test_bad_input_pool");
}
