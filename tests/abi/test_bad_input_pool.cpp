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
// The *_geom entry points (the geometry as a tlrt_pool_geometry) run through the same table with
// the same expected statuses (their messages name "geometry->kernel[1]" and so on), plus the
// struct's own rules: NULL geometry, struct_size too small, too large or with nonzero bytes past
// the known layout, a 64-bit rank that would truncate to a valid one, entries past rank ignored.
// tlrt_pool_output_dims: every geometry error of the forward with the same status, NULL
// out-parameters, capacity too small, and cleared outputs on failure.
#include <cmath>
#include <cstring>
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
  // The struct form (the *_geom entry points): rank64 overrides rank when nonzero.
  bool null_geom = false;
  uint64_t struct_size = sizeof(tlrt_pool_geometry), rank64 = 0;
};

struct Fn {
  const char *name;
  bool nd, has_x, has_dy, has_beta;
  std::function<tlrt_status(const Args &, tlrt_buffer **)> call;
  bool geom = false;  // takes a tlrt_pool_geometry
};

// The geometry of `a` as the struct the *_geom entry points take (the first 8 axes).
tlrt_pool_geometry pool_geom(const Args &a) {
  tlrt_pool_geometry g;
  std::memset(&g, 0, sizeof g);
  g.struct_size = a.struct_size;
  g.rank = a.rank64 ? a.rank64 : a.rank;
  g.batch = a.N;
  g.channels = a.C;
  for (int d = 0; d < 8; ++d) {
    g.in_spatial[d] = a.in[d];
    g.kernel[d] = a.k[d];
    g.stride[d] = a.s[d];
    g.padding[d] = a.p[d];
  }
  return g;
}
#define GEOM(a) (a.null_geom ? nullptr : &geom_)

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
      {"tlrt_maxpool_fwd_geom", true, true, false, false,
       [](const Args &a, tlrt_buffer **o) {
         const tlrt_pool_geometry geom_ = pool_geom(a);
         return tlrt_maxpool_fwd_geom(a.x, GEOM(a), o);
       }, true},
      {"tlrt_maxpool_bwd_geom", true, true, true, false,
       [](const Args &a, tlrt_buffer **o) {
         const tlrt_pool_geometry geom_ = pool_geom(a);
         return tlrt_maxpool_bwd_geom(a.x, a.dy, GEOM(a), o);
       }, true},
      {"tlrt_avgpool_fwd_geom", true, true, false, false,
       [](const Args &a, tlrt_buffer **o) {
         const tlrt_pool_geometry geom_ = pool_geom(a);
         return tlrt_avgpool_fwd_geom(a.x, GEOM(a), false, o);
       }, true},
      {"tlrt_avgpool_bwd_geom", true, false, true, false,
       [](const Args &a, tlrt_buffer **o) {
         const tlrt_pool_geometry geom_ = pool_geom(a);
         return tlrt_avgpool_bwd_geom(a.dy, GEOM(a), true, o);
       }, true},
      {"tlrt_smooth_maxpool_fwd_geom", true, true, false, true,
       [](const Args &a, tlrt_buffer **o) {
         const tlrt_pool_geometry geom_ = pool_geom(a);
         return tlrt_smooth_maxpool_fwd_geom(a.x, GEOM(a), a.beta, o);
       }, true},
      {"tlrt_smooth_maxpool_bwd_geom", true, true, true, true,
       [](const Args &a, tlrt_buffer **o) {
         const tlrt_pool_geometry geom_ = pool_geom(a);
         return tlrt_smooth_maxpool_bwd_geom(a.x, a.dy, GEOM(a), a.beta, o);
       }, true},
  };
}

// Argument names as the entry point spells them: "kernel_w" (2-D) or "kernel" (N-D: the message
// says "argument kernel[1]").
std::string axis(const Fn &f, const char *base2d, const char *basend, int d) {
  if (f.geom) return std::string("geometry->") + basend;
  if (f.nd) return basend;
  return std::string(base2d) + (d == 0 ? "_h" : "_w");
}

// A scalar geometry argument as the entry point names it ("batch" or "geometry->batch").
std::string scalar(const Fn &f, const char *name) {
  return f.geom ? std::string("geometry->") + name : name;
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
  // NULL geometry arrays (N-D argument lists only) and the rank.
  if (f.nd && !f.geom) {
    for (int which = 0; which < 4; ++which) {
      Args a = good;
      (which == 0 ? a.null_in : which == 1 ? a.null_k : which == 2 ? a.null_s : a.null_p) = true;
      FAILS(f, a, TLRT_ERR_NULL_ARGUMENT,
            which == 0 ? "in_spatial" : which == 1 ? "kernel" : which == 2 ? "stride" : "padding");
    }
  }
  if (f.nd) {
    for (uint32_t r : {0u, 9u, 100u}) {
      Args a = good;
      a.rank = r;
      FAILS(f, a, TLRT_ERR_INVALID_ARGUMENT, scalar(f, "rank").c_str());
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
      FAILS(f, a, TLRT_ERR_SHAPE, "x", scalar(f, "batch").c_str(), scalar(f, "channels").c_str(),
            axis(f, "in", "in_spatial", 0).c_str(), axis(f, "in", "in_spatial", 1).c_str());
    }
  }
  // dy against batch * channels * prod(out).
  if (f.has_dy) {
    for (const tlrt_buffer *bad : {b.v5, b.x12, fx.empty, b.one}) {
      Args a = good;
      a.dy = bad;
      FAILS(f, a, TLRT_ERR_SHAPE, "dy", scalar(f, "batch").c_str(), scalar(f, "channels").c_str());
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

// The struct's own rules, for every *_geom entry point: NULL geometry; struct_size below the first
// version (0, 8, 287), above 4096, or larger with a nonzero byte past the known layout; a rank of
// 2^32 + 2 (not truncated to 2); a larger struct_size with a zero tail and nonzero entries past
// rank are accepted.
void check_struct_rules(const Fn &f, const Bufs &b) {
  Args good;
  good.x = b.x12;
  good.dy = b.dy6;
  {
    Args a = good;
    a.null_geom = true;
    FAILS(f, a, TLRT_ERR_NULL_ARGUMENT, "geometry");
  }
  for (uint64_t size : {uint64_t{0}, uint64_t{8}, uint64_t{sizeof(tlrt_pool_geometry) - 1}}) {
    Args a = good;
    a.struct_size = size;
    FAILS(f, a, TLRT_ERR_INVALID_ARGUMENT, "geometry->struct_size");
  }
  for (uint64_t r : {(uint64_t{1} << 32) + 2, UINT64_MAX}) {
    Args a = good;
    a.rank64 = r;
    FAILS(f, a, TLRT_ERR_INVALID_ARGUMENT, "geometry->rank");
  }
  // Entries past rank are never read: zeros there (invalid extents) change nothing.
  {
    Args a = good;
    for (int d = 2; d < 9; ++d) a.in[d] = a.k[d] = a.s[d] = 0;
    tlrt_buffer *out = nullptr;
    TH_CHECK_MSG(f.call(a, &out) == TLRT_OK, "%s with zeros past rank failed: %s", f.name,
                 tlrt_last_error());
    expect_result(f.name, out, f.has_dy ? 12 : 6);
  }
}

// A struct_size larger than this library's layout (a newer header): accepted with a zero tail,
// rejected with a nonzero byte in it or above 4096. Memory of 8192 bytes holds the struct.
void check_struct_sizes(const Bufs &b) {
  std::vector<uint64_t> mem(1024, 0);
  Args a;
  a.x = b.x12;
  const tlrt_pool_geometry g = pool_geom(a);
  std::memcpy(mem.data(), &g, sizeof g);
  auto *p = reinterpret_cast<tlrt_pool_geometry *>(mem.data());
  auto *bytes = reinterpret_cast<unsigned char *>(mem.data());
  tlrt_buffer *out = nullptr;
  p->struct_size = 512;
  TH_OK(tlrt_maxpool_fwd_geom(b.x12, p, &out));
  expect_result("tlrt_maxpool_fwd_geom", out, 6);
  bytes[511] = 1;  // the last byte struct_size covers
  out = kSentinel;
  BAD(tlrt_maxpool_fwd_geom(b.x12, p, &out), TLRT_ERR_INVALID_ARGUMENT, "tlrt_maxpool_fwd_geom",
      "geometry->struct_size");
  CLEARED(out);
  p->struct_size = 511;  // the nonzero byte is past struct_size now: never read
  out = nullptr;
  TH_OK(tlrt_maxpool_fwd_geom(b.x12, p, &out));
  expect_result("tlrt_maxpool_fwd_geom", out, 6);
  bytes[511] = 0;
  bytes[sizeof(tlrt_pool_geometry)] = 0x80;  // the first byte past the known layout
  p->struct_size = sizeof(tlrt_pool_geometry) + 8;
  out = kSentinel;
  BAD(tlrt_avgpool_fwd_geom(b.x12, p, true, &out), TLRT_ERR_INVALID_ARGUMENT,
      "tlrt_avgpool_fwd_geom", "geometry->struct_size");
  CLEARED(out);
  bytes[sizeof(tlrt_pool_geometry)] = 0;
  for (uint64_t size : {uint64_t{4096}, uint64_t{4097}, uint64_t{8192}, UINT64_MAX}) {
    p->struct_size = size;
    out = size == 4096 ? nullptr : kSentinel;
    const tlrt_status st = tlrt_smooth_maxpool_fwd_geom(b.x12, p, 1.0, &out);
    if (size == 4096) {
      TH_CHECK_MSG(st == TLRT_OK, "struct_size 4096 with a zero tail: %s", tlrt_last_error());
      expect_result("tlrt_smooth_maxpool_fwd_geom", out, 6);
    } else {
      expect_fail(__LINE__, "struct_size above 4096", st, TLRT_ERR_INVALID_ARGUMENT,
                  "tlrt_smooth_maxpool_fwd_geom", {"geometry->struct_size"});
      CLEARED(out);
    }
  }
}

// tlrt_pool_output_dims: the forward's geometry errors with the same status (compared with
// tlrt_maxpool_fwd_geom on a buffer of the right size where the geometry allows one), NULL
// arguments, capacity, and the cleared outputs of a failure.
void check_output_dims(const Bufs &b) {
  const char *fn = "tlrt_pool_output_dims";
  Args good;
  good.x = b.x12;
  const tlrt_pool_geometry g = pool_geom(good);
  uint64_t dims[TLRT_POOL_MAX_DIMS + 2];
  uint32_t rank = 99;
  uint64_t n = 99;
  // Good: (1, 1, 2, 3), 6 elements; every entry of dims past rank written with 0.
  for (uint64_t &d : dims) d = 77;
  TH_OK(tlrt_pool_output_dims(&g, dims, TLRT_POOL_MAX_DIMS, &rank, &n));
  TH_CHECK(rank == 4 && n == 6 && dims[0] == 1 && dims[1] == 1 && dims[2] == 2 && dims[3] == 3);
  for (uint32_t i = 4; i < TLRT_POOL_MAX_DIMS; ++i) TH_CHECK(dims[i] == 0);
  TH_CHECK(dims[TLRT_POOL_MAX_DIMS] == 77);  // past capacity: untouched
  TH_OK(tlrt_pool_output_dims(&g, dims, 4, &rank, &n));  // exactly rank + 2
  TH_CHECK(rank == 4 && n == 6);
  auto failing = [&](int line, const tlrt_pool_geometry *geo, uint64_t *d, uint32_t cap,
                     uint32_t *r, uint64_t *e, tlrt_status want,
                     std::initializer_list<const char *> names) {
    for (uint64_t &x : dims) x = 77;
    if (r) *r = 99;
    if (e) *e = 99;
    const tlrt_status st = tlrt_pool_output_dims(geo, d, cap, r, e);
    expect_fail(line, fn, st, want, fn, names);
    TH_CHECK_MSG(!r || *r == 0, "line %d: rank not cleared", line);
    TH_CHECK_MSG(!e || *e == 0, "line %d: elements not cleared", line);
    if (d == dims)
      for (uint32_t i = 0; i < cap; ++i)
        TH_CHECK_MSG(dims[i] == 0, "line %d: dims[%u] not cleared", line, i);
  };
  failing(__LINE__, nullptr, dims, 4, &rank, &n, TLRT_ERR_NULL_ARGUMENT, {"geometry"});
  failing(__LINE__, &g, nullptr, 4, &rank, &n, TLRT_ERR_NULL_ARGUMENT, {"dims"});
  failing(__LINE__, &g, dims, 4, nullptr, &n, TLRT_ERR_NULL_ARGUMENT, {"rank"});
  failing(__LINE__, &g, dims, 4, &rank, nullptr, TLRT_ERR_NULL_ARGUMENT, {"elements"});
  failing(__LINE__, &g, dims, 3, &rank, &n, TLRT_ERR_SHAPE, {"capacity", "geometry->rank"});
  failing(__LINE__, &g, dims, 0, &rank, &n, TLRT_ERR_SHAPE, {"capacity"});
  // Geometry errors: the query and the forward agree.
  struct Case {
    const char *what;
    std::function<void(Args &)> edit;
    tlrt_status want;
    const char *name;
  };
  const std::vector<Case> cases = {
      {"struct_size 0", [](Args &a) { a.struct_size = 0; }, TLRT_ERR_INVALID_ARGUMENT,
       "geometry->struct_size"},
      {"struct_size 287", [](Args &a) { a.struct_size = sizeof(tlrt_pool_geometry) - 1; },
       TLRT_ERR_INVALID_ARGUMENT, "geometry->struct_size"},
      {"rank 0", [](Args &a) { a.rank = 0; }, TLRT_ERR_INVALID_ARGUMENT, "geometry->rank"},
      {"rank 9", [](Args &a) { a.rank = 9; }, TLRT_ERR_INVALID_ARGUMENT, "geometry->rank"},
      {"rank 2^32 + 2", [](Args &a) { a.rank64 = (uint64_t{1} << 32) + 2; },
       TLRT_ERR_INVALID_ARGUMENT, "geometry->rank"},
      {"kernel 0", [](Args &a) { a.k[1] = 0; }, TLRT_ERR_INVALID_ARGUMENT, "geometry->kernel"},
      {"stride 0", [](Args &a) { a.s[0] = 0; }, TLRT_ERR_INVALID_ARGUMENT, "geometry->stride"},
      {"2 pad > kernel", [](Args &a) { a.p[1] = 2; }, TLRT_ERR_INVALID_ARGUMENT,
       "geometry->padding"},
      {"extent beyond 64 bits",
       [](Args &a) {
         a.in[1] = UINT64_MAX;
         a.k[1] = uint64_t{1} << 63;
         a.p[1] = uint64_t{1} << 62;
       },
       TLRT_ERR_OVERFLOW, "geometry->in_spatial"},
      {"output beyond TLRT_MAX_ELEMENTS",
       [](Args &a) {
         a.N = uint64_t{1} << 40;
         a.C = uint64_t{1} << 40;
         a.k[0] = a.k[1] = 1;
       },
       TLRT_ERR_OVERFLOW, "out"},
  };
  for (const Case &c : cases) {
    Args a = good;
    c.edit(a);
    const tlrt_pool_geometry bad = pool_geom(a);
    failing(__LINE__, &bad, dims, TLRT_POOL_MAX_DIMS, &rank, &n, c.want, {c.name});
    // The forward reports the same status, except for the output count: no x can match a
    // geometry whose input count is beyond 64 bits, so the forward stops at x (TLRT_ERR_SHAPE).
    tlrt_buffer *out = kSentinel;
    const tlrt_status st = tlrt_maxpool_fwd_geom(b.x12, &bad, &out);
    expect_fail(__LINE__, c.what, st, a.N == 1 ? c.want : TLRT_ERR_SHAPE,
                "tlrt_maxpool_fwd_geom", {a.N == 1 ? c.name : "x"});
    CLEARED(out);
  }
  // Edge sizes: an empty output (in + 2 pad < kernel) and an empty batch with huge extents.
  {
    Args a = good;
    a.k[0] = 6;
    a.p[0] = 1;
    const tlrt_pool_geometry e = pool_geom(a);
    TH_OK(tlrt_pool_output_dims(&e, dims, TLRT_POOL_MAX_DIMS, &rank, &n));
    TH_CHECK(rank == 4 && n == 0 && dims[2] == 0 && dims[3] == 3);
    a = good;
    a.N = 0;
    a.in[0] = a.in[1] = uint64_t{1} << 40;
    const tlrt_pool_geometry z = pool_geom(a);
    TH_OK(tlrt_pool_output_dims(&z, dims, TLRT_POOL_MAX_DIMS, &rank, &n));
    TH_CHECK(rank == 4 && n == 0 && dims[0] == 0 && dims[2] == (uint64_t{1} << 40) - 1);
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
    for (const Fn &f : functions())
      if (f.geom) check_struct_rules(f, b);
    check_struct_sizes(b);
    check_output_dims(b);
    check_mixed_devices(b);
    for (tlrt_buffer *p : {b.x12, b.dy6, b.v5, b.one, b.rel}) tlrt_buffer_free(p);
    free_fixture(fx);
  }
  expect_no_leaks(start);
  return th::finish("test_bad_input_pool");
}
