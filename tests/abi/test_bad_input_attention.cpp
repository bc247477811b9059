// Bad input for the attention entry points (abi/tlrt_attention.h): NULL for every pointer argument
// (the mask excepted: NULL means none), released buffers, every size that must match (q against
// bh * n * d with products beyond 2^64; k, v, dout, out against q; the mask against bh * n * n or
// n * n; lse against bh * n), d > 256, n or bh beyond 2^31 - 1, scale and mask_fill outside their
// domains, mixed devices (with a GPU only). For each failing call: the exact status, every
// out-parameter cleared to NULL (pre-filled with a sentinel), a last-error message naming the
// function and the offending arguments. Good calls succeed with the right sizes. Nothing leaks.
// The geometry entry points (tlrt_attention_fwd / _bwd): the same for their buffers, the
// geometry struct (NULL, struct_size, heads, limits, out beyond TLRT_MAX_ELEMENTS, views past the
// end of their buffers, exactly and beyond 64 bits), the mask, the scalars; for the backward also
// grad_geometry, the destinations (released, integer, another device, past the end) and the
// overlap rules (a view writing an element twice, two views meeting in one buffer, a destination
// sharing storage with an input or, as another handle, with another destination), each failing
// call leaving the destinations untouched.
#include <cmath>
#include <cstring>

#include "bad_input.hpp"

namespace {

const char *kFwd = "tlrt_flash_attention_fwd";
const char *kBwd = "tlrt_flash_attention_bwd";
const char *kSingle[3] = {"tlrt_flash_attention_bwd_q", "tlrt_flash_attention_bwd_k",
                          "tlrt_flash_attention_bwd_v"};
const uint64_t k31 = uint64_t{1} << 31;

// (bh, n, d) = (1, 2, 2): q, k, v, dout, out have 4 elements; lse 2; mask 4 (n * n).
struct Bufs {
  tlrt_buffer *x4 = nullptr, *y4 = nullptr, *m4 = nullptr, *l2 = nullptr, *m8 = nullptr;
  tlrt_buffer *released2 = nullptr;
};

Bufs make_bufs() {
  Bufs b;
  b.x4 = th::upload({0.5f, -1.0f, 2.0f, 0.25f});
  b.y4 = th::upload({1.0f, 0.0f, -0.5f, 3.0f});
  b.m4 = th::upload({1.0f, 0.0f, 1.0f, 1.0f});
  b.l2 = th::upload({0.1f, 0.2f});
  b.m8 = th::upload({1, 1, 1, 1, 1, 1, 1, 1});
  b.released2 = th::upload({1.0f, 2.0f});
  bool freed = false;
  TH_OK(tlrt_buffer_release_storage(b.released2, &freed));
  return b;
}

void free_bufs(Bufs &b) {
  for (tlrt_buffer *p : {b.x4, b.y4, b.m4, b.l2, b.m8, b.released2}) tlrt_buffer_free(p);
  b = Bufs{};
}

tlrt_status single(int w, const tlrt_buffer *q, const tlrt_buffer *k, const tlrt_buffer *v,
                   const tlrt_buffer *m, const tlrt_buffer *dout, uint64_t bh, uint64_t n,
                   uint64_t d, double scale, double fill, tlrt_buffer **g) {
  switch (w) {
    case 0: return tlrt_flash_attention_bwd_q(q, k, v, m, dout, bh, n, d, scale, false, fill, g);
    case 1: return tlrt_flash_attention_bwd_k(q, k, v, m, dout, bh, n, d, scale, false, fill, g);
    default: return tlrt_flash_attention_bwd_v(q, k, v, m, dout, bh, n, d, scale, false, fill, g);
  }
}

// The validation shared by every entry point, checked through the forward and the singles.
struct Bad {
  const tlrt_buffer *q, *k, *v, *m;
  uint64_t bh, n, d;
  double scale, fill;
  tlrt_status want;
  const char *arg1, *arg2;
};

std::vector<Bad> shared_bad(const Fixture &f, const Bufs &b) {
  const double ninf = -INFINITY;
  return {
      {nullptr, b.x4, b.x4, nullptr, 1, 2, 2, 1.0, ninf, TLRT_ERR_NULL_ARGUMENT, "q", nullptr},
      {b.x4, nullptr, b.x4, nullptr, 1, 2, 2, 1.0, ninf, TLRT_ERR_NULL_ARGUMENT, "k", nullptr},
      {b.x4, b.x4, nullptr, nullptr, 1, 2, 2, 1.0, ninf, TLRT_ERR_NULL_ARGUMENT, "v", nullptr},
      {f.released, b.x4, b.x4, nullptr, 1, 2, 2, 1.0, ninf, TLRT_ERR_RELEASED, "q", nullptr},
      {b.x4, f.released, b.x4, nullptr, 1, 2, 2, 1.0, ninf, TLRT_ERR_RELEASED, "k", nullptr},
      {b.x4, b.x4, f.released, nullptr, 1, 2, 2, 1.0, ninf, TLRT_ERR_RELEASED, "v", nullptr},
      {b.x4, b.x4, b.x4, f.released, 1, 2, 2, 1.0, ninf, TLRT_ERR_RELEASED, "mask", nullptr},
      // q against bh * n * d, exactly and beyond 64 bits.
      {b.x4, b.x4, b.x4, nullptr, 1, 2, 3, 1.0, ninf, TLRT_ERR_SHAPE, "q", "d"},
      {b.x4, b.x4, b.x4, nullptr, 2, 2, 2, 1.0, ninf, TLRT_ERR_SHAPE, "q", "bh"},
      {b.x4, b.x4, b.x4, nullptr, k31 * 2, k31 * 2, 4, 1.0, ninf, TLRT_ERR_SHAPE, "q", "n"},
      {f.empty, f.empty, f.empty, nullptr, UINT64_MAX, UINT64_MAX, 2, 1.0, ninf, TLRT_ERR_SHAPE,
       "q", "bh"},
      {b.x4, f.short3, b.x4, nullptr, 1, 2, 2, 1.0, ninf, TLRT_ERR_SHAPE, "k", "q"},
      {b.x4, b.x4, b.l2, nullptr, 1, 2, 2, 1.0, ninf, TLRT_ERR_SHAPE, "v", "q"},
      // mask neither bh * n * n nor n * n.
      {b.x4, b.x4, b.x4, f.short3, 1, 2, 2, 1.0, ninf, TLRT_ERR_SHAPE, "mask", nullptr},
      {b.x4, b.x4, b.x4, f.empty, 1, 2, 2, 1.0, ninf, TLRT_ERR_SHAPE, "mask", nullptr},
      {f.empty, f.empty, f.empty, b.x4, k31 * 4, k31 * 4, 0, 1.0, ninf, TLRT_ERR_SHAPE, "mask",
       nullptr},
      // limits
      {f.empty, f.empty, f.empty, nullptr, 1, 0, 257, 1.0, ninf, TLRT_ERR_INVALID_ARGUMENT, "d",
       nullptr},
      {f.empty, f.empty, f.empty, nullptr, 1, k31, 0, 1.0, ninf, TLRT_ERR_INVALID_ARGUMENT, "n",
       nullptr},
      {f.empty, f.empty, f.empty, nullptr, k31, 1, 0, 1.0, ninf, TLRT_ERR_INVALID_ARGUMENT, "bh",
       nullptr},
      // scale and mask_fill
      {b.x4, b.x4, b.x4, nullptr, 1, 2, 2, NAN, ninf, TLRT_ERR_INVALID_ARGUMENT, "scale", nullptr},
      {b.x4, b.x4, b.x4, nullptr, 1, 2, 2, INFINITY, ninf, TLRT_ERR_INVALID_ARGUMENT, "scale",
       nullptr},
      {b.x4, b.x4, b.x4, nullptr, 1, 2, 2, -1e300, ninf, TLRT_ERR_INVALID_ARGUMENT, "scale",
       nullptr},
      {b.x4, b.x4, b.x4, nullptr, 1, 2, 2, 1.0, NAN, TLRT_ERR_INVALID_ARGUMENT, "mask_fill",
       nullptr},
      {b.x4, b.x4, b.x4, nullptr, 1, 2, 2, 1.0, INFINITY, TLRT_ERR_INVALID_ARGUMENT, "mask_fill",
       nullptr},
      {b.x4, b.x4, b.x4, nullptr, 1, 2, 2, 1.0, -1e300, TLRT_ERR_INVALID_ARGUMENT, "mask_fill",
       nullptr},
  };
}

void check_shared(const Fixture &f, const Bufs &b) {
  for (const Bad &x : shared_bad(f, b)) {
    tlrt_buffer *o = kSentinel, *l = kSentinel;
    expect_fail(__LINE__, "fwd", tlrt_flash_attention_fwd(x.q, x.k, x.v, x.m, x.bh, x.n, x.d,
                                                          x.scale, false, x.fill, &o, &l),
                x.want, kFwd, {x.arg1});
    if (x.arg2) {  // the message names the second argument too
      ++th::checks();
      TH_CHECK_MSG(has_word(tlrt_last_error(), std::string("argument ") + x.arg2),
                   "fwd: \"%s\" does not name %s", tlrt_last_error(), x.arg2);
    }
    CLEARED(o);
    CLEARED(l);
    for (int w = 0; w < 3; ++w) {
      tlrt_buffer *g = kSentinel;
      expect_fail(__LINE__, kSingle[w],
                  single(w, x.q, x.k, x.v, x.m, b.y4, x.bh, x.n, x.d, x.scale, x.fill, &g), x.want,
                  kSingle[w], {x.arg1});
      CLEARED(g);
    }
    tlrt_buffer *g1 = kSentinel, *g2 = kSentinel, *g3 = kSentinel;
    expect_fail(__LINE__, "bwd",
                tlrt_flash_attention_bwd(x.q, x.k, x.v, x.m, b.y4, b.y4, b.l2, x.bh, x.n, x.d,
                                         x.scale, false, x.fill, &g1, &g2, &g3),
                x.want, kBwd, {x.arg1});
    CLEARED(g1);
    CLEARED(g2);
    CLEARED(g3);
  }
}

void check_outs_and_extra(const Fixture &f, const Bufs &b) {
  tlrt_buffer *o = kSentinel, *l = kSentinel;
  BAD(tlrt_flash_attention_fwd(b.x4, b.x4, b.x4, nullptr, 1, 2, 2, 1.0, false, -INFINITY, nullptr,
                               &l),
      TLRT_ERR_NULL_ARGUMENT, kFwd, "out");
  CLEARED(l);
  BAD(tlrt_flash_attention_fwd(b.x4, b.x4, b.x4, nullptr, 1, 2, 2, 1.0, false, -INFINITY, &o,
                               nullptr),
      TLRT_ERR_NULL_ARGUMENT, kFwd, "lse");
  CLEARED(o);
  const char *gname[3] = {"dq", "dk", "dv"};
  for (int w = 0; w < 3; ++w) {
    BAD(single(w, b.x4, b.x4, b.x4, nullptr, b.y4, 1, 2, 2, 1.0, -INFINITY, nullptr),
        TLRT_ERR_NULL_ARGUMENT, kSingle[w], gname[w]);
    tlrt_buffer *g = kSentinel;
    BAD(single(w, b.x4, b.x4, b.x4, nullptr, nullptr, 1, 2, 2, 1.0, -INFINITY, &g),
        TLRT_ERR_NULL_ARGUMENT, kSingle[w], "dout");
    CLEARED(g);
    g = kSentinel;
    BAD(single(w, b.x4, b.x4, b.x4, nullptr, f.released, 1, 2, 2, 1.0, -INFINITY, &g),
        TLRT_ERR_RELEASED, kSingle[w], "dout");
    CLEARED(g);
    g = kSentinel;
    BAD(single(w, b.x4, b.x4, b.x4, nullptr, f.short3, 1, 2, 2, 1.0, -INFINITY, &g),
        TLRT_ERR_SHAPE, kSingle[w], "dout", "q");
    CLEARED(g);
  }
  // Fused backward: dout, out, lse NULL / released / wrong size; each out-parameter NULL.
  const tlrt_buffer *extra[3] = {b.y4, b.y4, b.l2};
  const char *ename[3] = {"dout", "out", "lse"};
  for (int e = 0; e < 3; ++e)
    for (int kind = 0; kind < 3; ++kind) {
      const tlrt_buffer *a[3] = {extra[0], extra[1], extra[2]};
      a[e] = kind == 0 ? nullptr : kind == 1 ? (e == 2 ? b.released2 : f.released) : f.short3;
      const tlrt_status want = kind == 0   ? TLRT_ERR_NULL_ARGUMENT
                               : kind == 1 ? TLRT_ERR_RELEASED
                                           : TLRT_ERR_SHAPE;
      tlrt_buffer *g1 = kSentinel, *g2 = kSentinel, *g3 = kSentinel;
      BAD(tlrt_flash_attention_bwd(b.x4, b.x4, b.x4, nullptr, a[0], a[1], a[2], 1, 2, 2, 1.0, false,
                                   -INFINITY, &g1, &g2, &g3),
          want, kBwd, ename[e]);
      CLEARED(g1);
      CLEARED(g2);
      CLEARED(g3);
    }
  {
    tlrt_buffer *g1 = kSentinel, *g2 = kSentinel, *g3 = kSentinel;
    BAD(tlrt_flash_attention_bwd(b.x4, b.x4, b.x4, nullptr, b.y4, b.y4, b.l2, 1, 2, 2, 1.0, false,
                                 -INFINITY, nullptr, &g2, &g3),
        TLRT_ERR_NULL_ARGUMENT, kBwd, "dq");
    CLEARED(g2);
    CLEARED(g3);
    g2 = g3 = kSentinel;
    BAD(tlrt_flash_attention_bwd(b.x4, b.x4, b.x4, nullptr, b.y4, b.y4, b.l2, 1, 2, 2, 1.0, false,
                                 -INFINITY, &g1, nullptr, &g3),
        TLRT_ERR_NULL_ARGUMENT, kBwd, "dk");
    CLEARED(g1);
    CLEARED(g3);
    g1 = g3 = kSentinel;
    BAD(tlrt_flash_attention_bwd(b.x4, b.x4, b.x4, nullptr, b.y4, b.y4, b.l2, 1, 2, 2, 1.0, false,
                                 -INFINITY, &g1, &g2, nullptr),
        TLRT_ERR_NULL_ARGUMENT, kBwd, "dv");
    CLEARED(g1);
    CLEARED(g2);
  }
}

void check_good(const Fixture &f, const Bufs &b) {
  // Masks of n * n and bh * n * n elements; empty shapes.
  struct Good {
    const tlrt_buffer *x, *m;
    uint64_t bh, n, d;
  };
  for (const Good &g : {Good{b.x4, nullptr, 1, 2, 2}, Good{b.x4, b.m4, 1, 2, 2},
                        Good{b.x4, b.m4, 2, 2, 1}, Good{b.x4, b.m8, 2, 2, 1},
                        Good{b.x4, f.short3, 1, 1, 4}, Good{f.empty, nullptr, 0, 3, 2},
                        Good{f.empty, nullptr, 3, 0, 2}, Good{f.empty, b.m4, 2, 2, 0}}) {
    tlrt_buffer *o = nullptr, *l = nullptr;
    const tlrt_buffer *mask = g.m == f.short3 ? nullptr : g.m;
    TH_CHECK_MSG(tlrt_flash_attention_fwd(g.x, g.x, g.x, mask, g.bh, g.n, g.d, 0.5, true, -1000.0,
                                          &o, &l) == TLRT_OK,
                 "fwd (%llu, %llu, %llu) failed: %s", (unsigned long long)g.bh,
                 (unsigned long long)g.n, (unsigned long long)g.d, tlrt_last_error());
    expect_result(kFwd, o, g.bh * g.n * g.d);
    expect_result(kFwd, l, g.bh * g.n);
  }
  tlrt_buffer *g1 = nullptr, *g2 = nullptr, *g3 = nullptr;
  TH_OK(tlrt_flash_attention_bwd(b.x4, b.x4, b.x4, b.m4, b.y4, b.y4, b.l2, 1, 2, 2, 1.0, false,
                                 -INFINITY, &g1, &g2, &g3));
  expect_result(kBwd, g1, 4);
  expect_result(kBwd, g2, 4);
  expect_result(kBwd, g3, 4);
  for (int w = 0; w < 3; ++w) {
    tlrt_buffer *g = nullptr;
    TH_OK(single(w, b.x4, b.x4, b.x4, b.m4, b.y4, 1, 2, 2, 1.0, -1000.0, &g));
    expect_result(kSingle[w], g, 4);
  }
}

void check_mixed_devices(const Bufs &b) {
  if (!th::cuda_ready()) {
    std::printf("no usable CUDA device: mixed-device checks skipped\n");
    return;
  }
  tlrt_buffer *c4 = nullptr, *cl = nullptr;
  TH_OK(tlrt_buffer_to_device(b.x4, TLRT_DEVICE_CUDA(0), &c4));
  TH_OK(tlrt_buffer_to_device(b.l2, TLRT_DEVICE_CUDA(0), &cl));
  if (c4 && cl) {
    const char *names[4] = {"k", "v", "mask", "dout"};
    for (int e = 0; e < 4; ++e) {
      const tlrt_buffer *a[4] = {b.x4, b.x4, b.m4, b.y4};
      a[e] = c4;
      tlrt_buffer *o = kSentinel, *l = kSentinel;
      if (e < 3) {
        BAD(tlrt_flash_attention_fwd(b.x4, a[0], a[1], a[2], 1, 2, 2, 1.0, false, -INFINITY, &o,
                                     &l),
            TLRT_ERR_DEVICE_MISMATCH, kFwd, "q", names[e]);
        CLEARED(o);
        CLEARED(l);
      }
      for (int w = 0; w < 3; ++w) {
        tlrt_buffer *g = kSentinel;
        BAD(single(w, b.x4, a[0], a[1], a[2], a[3], 1, 2, 2, 1.0, -INFINITY, &g),
            TLRT_ERR_DEVICE_MISMATCH, kSingle[w], "q", names[e]);
        CLEARED(g);
      }
    }
    tlrt_buffer *g1 = kSentinel, *g2 = kSentinel, *g3 = kSentinel;
    BAD(tlrt_flash_attention_bwd(b.x4, b.x4, b.x4, nullptr, b.y4, b.y4, cl, 1, 2, 2, 1.0, false,
                                 -INFINITY, &g1, &g2, &g3),
        TLRT_ERR_DEVICE_MISMATCH, kBwd, "q", "lse");
    CLEARED(g1);
    CLEARED(g2);
    CLEARED(g3);
  }
  tlrt_buffer_free(c4);
  tlrt_buffer_free(cl);
}


// ---- the geometry entry points ------------------------------------------------------------------

const char *kGFwd = "tlrt_attention_fwd";
const char *kGBwd = "tlrt_attention_bwd";

// (batch 1, heads_q 2, heads_kv 1, len_q 2, len_k 3, d 2), token-major: q, out, dout 8 elements,
// k, v 6, lse 4, the mask 6 (len_q len_k) or 12 (batch heads_q len_q len_k).
tlrt_attention_geometry small_geometry() {
  tlrt_attention_geometry g{};
  g.struct_size = sizeof g;
  g.batch = 1;
  g.heads_q = 2;
  g.heads_kv = 1;
  g.len_q = 2;
  g.len_k = 3;
  g.d = 2;
  g.q_stride_batch = 8, g.q_stride_token = 4, g.q_stride_head = 2;
  g.k_stride_batch = 6, g.k_stride_token = 2, g.k_stride_head = 2;
  g.v_stride_batch = 6, g.v_stride_token = 2, g.v_stride_head = 2;
  return g;
}

struct GBufs {
  tlrt_buffer *q8, *k6, *v6, *m6, *m12, *l4, *do8, *o8, *i8, *rel8;
};

GBufs make_gbufs() {
  th::Rng rng(7);
  GBufs b{};
  b.q8 = th::upload(rng.vec(8));
  b.k6 = th::upload(rng.vec(6));
  b.v6 = th::upload(rng.vec(6));
  b.m6 = th::upload({1, 0, 1, 1, 1, 0});
  b.m12 = th::upload(std::vector<float>(12, 1.0f));
  b.l4 = th::upload(rng.vec(4));
  b.do8 = th::upload(rng.vec(8));
  b.o8 = th::upload(rng.vec(8));
  const int32_t iv[8] = {0};
  TH_OK(tlrt_buffer_from_i32(TLRT_DEVICE_CPU, iv, 8, &b.i8));
  b.rel8 = th::upload(rng.vec(8));
  bool freed = false;
  TH_OK(tlrt_buffer_release_storage(b.rel8, &freed));
  return b;
}

void free_gbufs(GBufs &b) {
  for (tlrt_buffer *p : {b.q8, b.k6, b.v6, b.m6, b.m12, b.l4, b.do8, b.o8, b.i8, b.rel8})
    tlrt_buffer_free(p);
  b = GBufs{};
}

// A failing geometry call that must not have written dst (its contents before the call).
void unchanged(tlrt_buffer *dst, const std::vector<float> &before, const char *what) {
  if (!dst) return;
  const std::vector<float> now = th::download(dst);
  bool same = now.size() == before.size();
  for (size_t e = 0; same && e < now.size(); ++e) same = th::same_bits(now[e], before[e]);
  TH_CHECK_MSG(same, "%s: a failing call wrote its destination", what);
}

// The checks shared by the forward and the backward: buffers, geometry, mask, scalars.
struct GBad {
  const tlrt_buffer *q, *k, *v, *m;
  tlrt_attention_geometry g;
  bool null_geometry;
  double scale, fill;
  tlrt_status want;
  const char *arg1, *arg2;
};

std::vector<GBad> geometry_bad(const Fixture &f, const GBufs &b) {
  const double ninf = -INFINITY;
  const tlrt_attention_geometry g0 = small_geometry();
  auto with = [&](auto change) {
    tlrt_attention_geometry g = g0;
    change(g);
    return g;
  };
  using G = tlrt_attention_geometry;
  const uint64_t k31 = uint64_t{1} << 31;
  return {
      {nullptr, b.k6, b.v6, nullptr, g0, false, 1.0, ninf, TLRT_ERR_NULL_ARGUMENT, "q", nullptr},
      {b.q8, nullptr, b.v6, nullptr, g0, false, 1.0, ninf, TLRT_ERR_NULL_ARGUMENT, "k", nullptr},
      {b.q8, b.k6, nullptr, nullptr, g0, false, 1.0, ninf, TLRT_ERR_NULL_ARGUMENT, "v", nullptr},
      {b.q8, b.k6, b.v6, nullptr, g0, true, 1.0, ninf, TLRT_ERR_NULL_ARGUMENT, "geometry",
       nullptr},
      {b.rel8, b.k6, b.v6, nullptr, g0, false, 1.0, ninf, TLRT_ERR_RELEASED, "q", nullptr},
      {b.q8, f.released, b.v6, nullptr, g0, false, 1.0, ninf, TLRT_ERR_RELEASED, "k", nullptr},
      {b.q8, b.k6, f.released, nullptr, g0, false, 1.0, ninf, TLRT_ERR_RELEASED, "v", nullptr},
      {b.q8, b.k6, b.v6, f.released, g0, false, 1.0, ninf, TLRT_ERR_RELEASED, "mask", nullptr},
      {b.i8, b.k6, b.v6, nullptr, g0, false, 1.0, ninf, TLRT_ERR_DTYPE, "q", nullptr},
      // struct_size: below the first version, above 4096, a nonzero byte past the known fields
      {b.q8, b.k6, b.v6, nullptr, with([](G &g) { g.struct_size = 0; }), false, 1.0, ninf,
       TLRT_ERR_INVALID_ARGUMENT, "geometry->struct_size", nullptr},
      {b.q8, b.k6, b.v6, nullptr, with([](G &g) { g.struct_size = 151; }), false, 1.0, ninf,
       TLRT_ERR_INVALID_ARGUMENT, "geometry->struct_size", nullptr},
      {b.q8, b.k6, b.v6, nullptr, with([](G &g) { g.struct_size = 4104; }), false, 1.0, ninf,
       TLRT_ERR_INVALID_ARGUMENT, "geometry->struct_size", nullptr},
      // heads, d and the limits
      {b.q8, b.k6, b.v6, nullptr, with([](G &g) { g.heads_kv = 0; }), false, 1.0, ninf,
       TLRT_ERR_INVALID_ARGUMENT, "geometry", nullptr},
      {b.q8, b.k6, b.v6, nullptr, with([](G &g) { g.heads_q = 0; }), false, 1.0, ninf,
       TLRT_ERR_INVALID_ARGUMENT, "geometry", nullptr},
      {b.q8, b.k6, b.v6, nullptr, with([](G &g) { g.heads_q = 3, g.heads_kv = 2; }), false, 1.0,
       ninf, TLRT_ERR_INVALID_ARGUMENT, "geometry", nullptr},
      {b.q8, b.k6, b.v6, nullptr, with([](G &g) { g.d = 257; }), false, 1.0, ninf,
       TLRT_ERR_INVALID_ARGUMENT, "geometry", nullptr},
      {b.q8, b.k6, b.v6, nullptr, with([&](G &g) { g.len_q = k31; }), false, 1.0, ninf,
       TLRT_ERR_INVALID_ARGUMENT, "geometry", nullptr},
      {b.q8, b.k6, b.v6, nullptr, with([&](G &g) { g.len_k = k31; }), false, 1.0, ninf,
       TLRT_ERR_INVALID_ARGUMENT, "geometry", nullptr},
      {b.q8, b.k6, b.v6, nullptr, with([&](G &g) { g.batch = k31 / 2; }), false, 1.0, ninf,
       TLRT_ERR_INVALID_ARGUMENT, "geometry", nullptr},
      {b.q8, b.k6, b.v6, nullptr, with([&](G &g) { g.batch = UINT64_MAX; }), false, 1.0, ninf,
       TLRT_ERR_INVALID_ARGUMENT, "geometry", nullptr},
      // out beyond TLRT_MAX_ELEMENTS: 2^20 * 2^30 * 2 * 256 = 2^59 fits, 2^20 * 2^30 * 2^10 *
      // 256 does not (checked before the views)
      {b.q8, b.k6, b.v6, nullptr, with([](G &g) {
         g.batch = 1u << 20, g.len_q = 1u << 30, g.heads_q = 1u << 10, g.heads_kv = 1,
         g.d = 256;
       }),
       false, 1.0, ninf, TLRT_ERR_OVERFLOW, "geometry", nullptr},
      // views past the end of their buffers, exactly and beyond 64 bits
      {b.q8, b.k6, b.v6, nullptr, with([](G &g) { g.q_offset = 1; }), false, 1.0, ninf,
       TLRT_ERR_SHAPE, "q", "geometry"},
      {b.q8, b.k6, b.v6, nullptr, with([](G &g) { g.q_stride_token = 5; }), false, 1.0, ninf,
       TLRT_ERR_SHAPE, "q", "geometry"},
      {b.q8, b.k6, b.v6, nullptr, with([](G &g) { g.k_stride_token = 3; }), false, 1.0, ninf,
       TLRT_ERR_SHAPE, "k", "geometry"},
      {b.q8, b.k6, b.v6, nullptr, with([](G &g) { g.v_offset = UINT64_MAX; }), false, 1.0, ninf,
       TLRT_ERR_SHAPE, "v", "geometry"},
      {b.q8, b.k6, b.v6, nullptr, with([](G &g) { g.q_stride_head = UINT64_MAX / 2 + 1; }), false,
       1.0, ninf, TLRT_ERR_SHAPE, "q", "geometry"},
      {b.q8, b.k6, b.v6, nullptr, with([](G &g) { g.len_k = 4; }), false, 1.0, ninf,
       TLRT_ERR_SHAPE, "k", "geometry"},
      // the mask: neither len_q len_k nor batch heads_q len_q len_k elements
      {b.q8, b.k6, b.v6, b.q8, g0, false, 1.0, ninf, TLRT_ERR_SHAPE, "mask", nullptr},
      {b.q8, b.k6, b.v6, f.empty, g0, false, 1.0, ninf, TLRT_ERR_SHAPE, "mask", nullptr},
      // scale and mask_fill
      {b.q8, b.k6, b.v6, nullptr, g0, false, NAN, ninf, TLRT_ERR_INVALID_ARGUMENT, "scale",
       nullptr},
      {b.q8, b.k6, b.v6, nullptr, g0, false, -1e300, ninf, TLRT_ERR_INVALID_ARGUMENT, "scale",
       nullptr},
      {b.q8, b.k6, b.v6, nullptr, g0, false, 1.0, INFINITY, TLRT_ERR_INVALID_ARGUMENT,
       "mask_fill", nullptr},
      {b.q8, b.k6, b.v6, nullptr, g0, false, 1.0, 1e300, TLRT_ERR_INVALID_ARGUMENT, "mask_fill",
       nullptr},
  };
}

void check_geometry_shared(const Fixture &f, const GBufs &b) {
  // A geometry one byte longer than this header's, with that byte set: a field this library
  // does not know.
  {
    unsigned char raw[sizeof(tlrt_attention_geometry) + 8] = {0};
    tlrt_attention_geometry g0 = small_geometry();
    g0.struct_size = sizeof raw;
    std::memcpy(raw, &g0, sizeof g0);
    raw[sizeof g0 + 3] = 1;
    tlrt_buffer *o = kSentinel, *l = kSentinel;
    BAD(tlrt_attention_fwd(b.q8, b.k6, b.v6, nullptr,
                           reinterpret_cast<const tlrt_attention_geometry *>(raw), 1.0, false,
                           -INFINITY, &o, &l),
        TLRT_ERR_INVALID_ARGUMENT, kGFwd, "geometry->struct_size");
    CLEARED(o);
    CLEARED(l);
    raw[sizeof g0 + 3] = 0;  // zero past the known fields: accepted
    TH_OK(tlrt_attention_fwd(b.q8, b.k6, b.v6, nullptr,
                             reinterpret_cast<const tlrt_attention_geometry *>(raw), 1.0, false,
                             -INFINITY, &o, &l));
    expect_result(kGFwd, o, 8);
    expect_result(kGFwd, l, 4);
  }
  tlrt_buffer *G = th::upload(std::vector<float>(8, 9.0f));
  const std::vector<float> before = th::download(G);
  for (const GBad &x : geometry_bad(f, b)) {
    const tlrt_attention_geometry *gp = x.null_geometry ? nullptr : &x.g;
    tlrt_buffer *o = kSentinel, *l = kSentinel;
    expect_fail(__LINE__, "attention_fwd",
                tlrt_attention_fwd(x.q, x.k, x.v, x.m, gp, x.scale, false, x.fill, &o, &l), x.want,
                kGFwd, {x.arg1});
    if (x.arg2) {
      ++th::checks();
      TH_CHECK_MSG(has_word(tlrt_last_error(), std::string("argument ") + x.arg2),
                   "attention_fwd: \"%s\" does not name %s", tlrt_last_error(), x.arg2);
    }
    CLEARED(o);
    CLEARED(l);
    // The backward: the same codes (its other arguments valid; dq into a buffer of q's layout).
    const tlrt_attention_geometry g0 = small_geometry();
    expect_fail(__LINE__, "attention_bwd",
                tlrt_attention_bwd(x.q, x.k, x.v, x.m, b.do8, b.o8, b.l4, gp, x.scale, false,
                                   x.fill, G, nullptr, nullptr, &g0),
                x.want, kGBwd, {x.arg1});
    unchanged(G, before, "attention_bwd");
  }
  tlrt_buffer_free(G);
}

void check_geometry_bwd(const Fixture &f, const GBufs &b) {
  const tlrt_attention_geometry g0 = small_geometry();
  // Gradient buffers shaped like q (8), k and v (6), holding 9.0: failing calls leave them so.
  tlrt_buffer *DQ = th::upload(std::vector<float>(8, 9.0f)),
              *DK = th::upload(std::vector<float>(6, 9.0f)),
              *DV = th::upload(std::vector<float>(6, 9.0f)),
              *big = th::upload(std::vector<float>(32, 9.0f));
  const std::vector<float> b8(8, 9.0f), b6(6, 9.0f), b32(32, 9.0f);
  auto untouched = [&] {
    unchanged(DQ, b8, "dq");
    unchanged(DK, b6, "dk");
    unchanged(DV, b6, "dv");
    unchanged(big, b32, "big");
  };
  // dout, out, lse: NULL, released, wrong size.
  const tlrt_buffer *extra[3] = {b.do8, b.o8, b.l4};
  const char *ename[3] = {"dout", "out", "lse"};
  for (int e = 0; e < 3; ++e)
    for (int kind = 0; kind < 3; ++kind) {
      const tlrt_buffer *a[3] = {extra[0], extra[1], extra[2]};
      a[e] = kind == 0 ? nullptr : kind == 1 ? b.rel8 : f.short3;
      const tlrt_status want = kind == 0   ? TLRT_ERR_NULL_ARGUMENT
                               : kind == 1 ? TLRT_ERR_RELEASED
                                           : TLRT_ERR_SHAPE;
      BAD(tlrt_attention_bwd(b.q8, b.k6, b.v6, nullptr, a[0], a[1], a[2], &g0, 1.0, false,
                             -INFINITY, DQ, DK, DV, &g0),
          want, kGBwd, ename[e]);
      untouched();
    }
  // grad_geometry: NULL, struct_size, another problem.
  BAD(tlrt_attention_bwd(b.q8, b.k6, b.v6, nullptr, b.do8, b.o8, b.l4, &g0, 1.0, false, -INFINITY,
                         DQ, DK, DV, nullptr),
      TLRT_ERR_NULL_ARGUMENT, kGBwd, "grad_geometry");
  tlrt_attention_geometry gg = g0;
  gg.struct_size = 8;
  BAD(tlrt_attention_bwd(b.q8, b.k6, b.v6, nullptr, b.do8, b.o8, b.l4, &g0, 1.0, false, -INFINITY,
                         DQ, DK, DV, &gg),
      TLRT_ERR_INVALID_ARGUMENT, kGBwd, "grad_geometry->struct_size");
  for (int field = 0; field < 6; ++field) {
    gg = g0;
    uint64_t *dims = &gg.batch;  // batch, heads_q, heads_kv, len_q, len_k, d
    dims[field] += 1;
    if (field == 2) gg.heads_q = 2, gg.heads_kv = 2;
    BAD(tlrt_attention_bwd(b.q8, b.k6, b.v6, nullptr, b.do8, b.o8, b.l4, &g0, 1.0, false,
                           -INFINITY, DQ, DK, DV, &gg),
        TLRT_ERR_SHAPE, kGBwd, "grad_geometry", "geometry");
  }
  untouched();
  // The destinations: released, integer, past the end (exactly, beyond 64 bits).
  tlrt_buffer *dst[3] = {DQ, DK, DV};
  const char *dname[3] = {"dq", "dk", "dv"};
  for (int w = 0; w < 3; ++w) {
    tlrt_buffer *d[3] = {DQ, DK, DV};
    d[w] = b.rel8;
    BAD(tlrt_attention_bwd(b.q8, b.k6, b.v6, nullptr, b.do8, b.o8, b.l4, &g0, 1.0, false,
                           -INFINITY, d[0], d[1], d[2], &g0),
        TLRT_ERR_RELEASED, kGBwd, dname[w]);
    d[w] = b.i8;
    BAD(tlrt_attention_bwd(b.q8, b.k6, b.v6, nullptr, b.do8, b.o8, b.l4, &g0, 1.0, false,
                           -INFINITY, d[0], d[1], d[2], &g0),
        TLRT_ERR_DTYPE, kGBwd, dname[w]);
    d[w] = f.short3;
    BAD(tlrt_attention_bwd(b.q8, b.k6, b.v6, nullptr, b.do8, b.o8, b.l4, &g0, 1.0, false,
                           -INFINITY, d[0], d[1], d[2], &g0),
        TLRT_ERR_SHAPE, kGBwd, dname[w], "grad_geometry");
    gg = g0;
    (&gg.q_offset)[4 * w] = UINT64_MAX - 1;
    BAD(tlrt_attention_bwd(b.q8, b.k6, b.v6, nullptr, b.do8, b.o8, b.l4, &g0, 1.0, false,
                           -INFINITY, DQ, DK, DV, &gg),
        TLRT_ERR_SHAPE, kGBwd, dname[w], "grad_geometry");
    (void)dst;
  }
  untouched();
  // Overlap: a view writing an element twice (token stride 0; heads 1 apart with d = 2).
  gg = g0;
  gg.q_stride_token = 0;
  BAD(tlrt_attention_bwd(b.q8, b.k6, b.v6, nullptr, b.do8, b.o8, b.l4, &g0, 1.0, false, -INFINITY,
                         DQ, DK, DV, &gg),
      TLRT_ERR_INVALID_ARGUMENT, kGBwd, "dq", "grad_geometry");
  gg = g0;
  gg.q_stride_head = 1;
  BAD(tlrt_attention_bwd(b.q8, b.k6, b.v6, nullptr, b.do8, b.o8, b.l4, &g0, 1.0, false, -INFINITY,
                         DQ, DK, DV, &gg),
      TLRT_ERR_INVALID_ARGUMENT, kGBwd, "dq", "grad_geometry");
  gg = g0;
  gg.k_stride_token = 1;  // rows 1 apart, d = 2
  BAD(tlrt_attention_bwd(b.q8, b.k6, b.v6, nullptr, b.do8, b.o8, b.l4, &g0, 1.0, false, -INFINITY,
                         DQ, DK, DV, &gg),
      TLRT_ERR_INVALID_ARGUMENT, kGBwd, "dk", "grad_geometry");
  // Two views of one buffer that meet: dk and dv at the same place, then dv one element into dk.
  gg = g0;
  BAD(tlrt_attention_bwd(b.q8, b.k6, b.v6, nullptr, b.do8, b.o8, b.l4, &g0, 1.0, false, -INFINITY,
                         DQ, DK, DK, &gg),
      TLRT_ERR_INVALID_ARGUMENT, kGBwd, "dk", "dv");
  gg.q_offset = 0, gg.k_offset = 8, gg.v_offset = 13;  // k at 8 .. 13, v from 13
  BAD(tlrt_attention_bwd(b.q8, b.k6, b.v6, nullptr, b.do8, b.o8, b.l4, &g0, 1.0, false, -INFINITY,
                         big, big, big, &gg),
      TLRT_ERR_INVALID_ARGUMENT, kGBwd, "dk", "dv");
  // The column rule: one fused row of q (4) k (2) v (2) per token would be disjoint; k shifted by
  // one column meets q.
  gg = g0;
  gg.q_stride_batch = gg.k_stride_batch = gg.v_stride_batch = 24;
  gg.q_stride_token = gg.k_stride_token = gg.v_stride_token = 8;
  gg.q_offset = 0, gg.k_offset = 3, gg.v_offset = 6;
  BAD(tlrt_attention_bwd(b.q8, b.k6, b.v6, nullptr, b.do8, b.o8, b.l4, &g0, 1.0, false, -INFINITY,
                         big, big, big, &gg),
      TLRT_ERR_INVALID_ARGUMENT, kGBwd, "dq", "dk");
  // Storage shared with an input, and a second handle of one destination's storage.
  BAD(tlrt_attention_bwd(b.q8, b.k6, b.v6, nullptr, b.do8, b.o8, b.l4, &g0, 1.0, false, -INFINITY,
                         b.o8, DK, DV, &g0),
      TLRT_ERR_INVALID_ARGUMENT, kGBwd, "dq", "out");
  BAD(tlrt_attention_bwd(b.q8, b.k6, b.v6, nullptr, b.do8, b.o8, b.l4, &g0, 1.0, false, -INFINITY,
                         DQ, b.k6, DV, &g0),
      TLRT_ERR_INVALID_ARGUMENT, kGBwd, "dk", "k");
  {
    void *m = nullptr;
    tlrt_buffer *alias = nullptr;
    TH_OK(tlrt_buffer_to_dlpack_versioned(DK, nullptr, 1, &m));
    TH_OK(tlrt_buffer_from_dlpack_versioned(m, &alias));
    BAD(tlrt_attention_bwd(b.q8, b.k6, b.v6, nullptr, b.do8, b.o8, b.l4, &g0, 1.0, false,
                           -INFINITY, DQ, DK, alias, &g0),
        TLRT_ERR_INVALID_ARGUMENT, kGBwd, "dk", "dv");
    tlrt_buffer_free(alias);
  }
  untouched();
  // Good calls: the fused layout in one gradient buffer (q 4, k 2, v 2 columns per token, k and
  // v of length 2 = len_q here), and every subset of the gradients.
  {
    tlrt_attention_geometry fg = g0;
    fg.len_k = 2;
    fg.q_stride_batch = fg.k_stride_batch = fg.v_stride_batch = 16;
    fg.q_stride_token = fg.k_stride_token = fg.v_stride_token = 8;
    fg.q_offset = 0, fg.k_offset = 4, fg.v_offset = 6;
    th::Rng rng(3);
    tlrt_buffer *qkv = th::upload(rng.vec(16)), *g16 = th::upload(std::vector<float>(16, 9.0f));
    tlrt_buffer *o = nullptr, *l = nullptr;
    TH_OK(tlrt_attention_fwd(qkv, qkv, qkv, nullptr, &fg, 0.5, true, -INFINITY, &o, &l));
    TH_OK(tlrt_attention_bwd(qkv, qkv, qkv, nullptr, b.do8, o, l, &fg, 0.5, true, -INFINITY, g16,
                             g16, g16, &fg));
    const std::vector<float> g = th::download(g16);
    bool all_written = g.size() == 16;
    for (size_t e = 0; all_written && e < g.size(); ++e) all_written = g[e] != 9.0f;
    TH_CHECK_MSG(all_written, "the fused gradient buffer is not fully written");
    for (int mask = 0; mask < 8; ++mask)
      TH_OK(tlrt_attention_bwd(qkv, qkv, qkv, nullptr, b.do8, o, l, &fg, 0.5, true, -INFINITY,
                               mask & 1 ? g16 : nullptr, mask & 2 ? g16 : nullptr,
                               mask & 4 ? g16 : nullptr, &fg));
    for (tlrt_buffer *p : {qkv, g16, o, l}) tlrt_buffer_free(p);
  }
  TH_OK(tlrt_attention_bwd(b.q8, b.k6, b.v6, b.m6, b.do8, b.o8, b.l4, &g0, 1.0, false, -INFINITY,
                           DQ, DK, DV, &g0));
  TH_OK(tlrt_attention_bwd(b.q8, b.k6, b.v6, b.m12, b.do8, b.o8, b.l4, &g0, 1.0, true, -1000.0,
                           DQ, DK, DV, &g0));
  for (tlrt_buffer *p : {DQ, DK, DV, big}) tlrt_buffer_free(p);
}

void check_geometry_good(const Fixture &f, const GBufs &b) {
  const tlrt_attention_geometry g0 = small_geometry();
  tlrt_buffer *o = kSentinel, *l = kSentinel;
  BAD(tlrt_attention_fwd(b.q8, b.k6, b.v6, nullptr, &g0, 1.0, false, -INFINITY, nullptr, &l),
      TLRT_ERR_NULL_ARGUMENT, kGFwd, "out");
  CLEARED(l);
  BAD(tlrt_attention_fwd(b.q8, b.k6, b.v6, nullptr, &g0, 1.0, false, -INFINITY, &o, nullptr),
      TLRT_ERR_NULL_ARGUMENT, kGFwd, "lse");
  CLEARED(o);
  // Masks of both sizes; empty problems (views of empty problems are not checked).
  for (const tlrt_buffer *m : {(const tlrt_buffer *)nullptr, (const tlrt_buffer *)b.m6,
                               (const tlrt_buffer *)b.m12}) {
    TH_OK(tlrt_attention_fwd(b.q8, b.k6, b.v6, m, &g0, 0.5, true, -1000.0, &o, &l));
    expect_result(kGFwd, o, 8);
    expect_result(kGFwd, l, 4);
  }
  tlrt_attention_geometry g = g0;
  g.len_q = 0, g.q_offset = 1000;
  TH_OK(tlrt_attention_fwd(f.empty, b.k6, b.v6, nullptr, &g, 0.5, true, -INFINITY, &o, &l));
  expect_result(kGFwd, o, 0);
  expect_result(kGFwd, l, 0);
  g = g0;
  g.len_k = 0, g.k_offset = g.v_offset = 1000;
  TH_OK(tlrt_attention_fwd(b.q8, f.empty, f.empty, nullptr, &g, 0.5, false, -1000.0, &o, &l));
  expect_result(kGFwd, o, 8);
  expect_result(kGFwd, l, 4);
  g = g0;
  g.d = 0;
  TH_OK(tlrt_attention_fwd(f.empty, f.empty, f.empty, nullptr, &g, 0.5, true, -INFINITY, &o, &l));
  expect_result(kGFwd, o, 0);
  expect_result(kGFwd, l, 4);
  g = g0;
  g.batch = 0;
  TH_OK(tlrt_attention_fwd(f.empty, f.empty, f.empty, nullptr, &g, 0.5, true, -INFINITY, &o, &l));
  expect_result(kGFwd, o, 0);
  expect_result(kGFwd, l, 0);
}

void check_geometry_devices(const GBufs &b) {
  if (!th::cuda_ready()) return;
  const tlrt_attention_geometry g0 = small_geometry();
  tlrt_buffer *c8 = nullptr;
  TH_OK(tlrt_buffer_to_device(b.q8, TLRT_DEVICE_CUDA(0), &c8));
  tlrt_buffer *o = kSentinel, *l = kSentinel;
  BAD(tlrt_attention_fwd(c8, b.k6, b.v6, nullptr, &g0, 1.0, false, -INFINITY, &o, &l),
      TLRT_ERR_DEVICE_MISMATCH, kGFwd, "q", "k");
  CLEARED(o);
  CLEARED(l);
  tlrt_buffer *DK = th::upload(std::vector<float>(6, 0.0f));
  BAD(tlrt_attention_bwd(b.q8, b.k6, b.v6, nullptr, b.do8, b.o8, b.l4, &g0, 1.0, false, -INFINITY,
                         c8, DK, nullptr, &g0),
      TLRT_ERR_DEVICE_MISMATCH, kGBwd, "q", "dq");
  BAD(tlrt_attention_bwd(b.q8, b.k6, b.v6, nullptr, c8, b.o8, b.l4, &g0, 1.0, false, -INFINITY,
                         nullptr, DK, nullptr, &g0),
      TLRT_ERR_DEVICE_MISMATCH, kGBwd, "q", "dout");
  tlrt_buffer_free(DK);
  tlrt_buffer_free(c8);
}

}  // namespace

int main() {
  const tlrt_allocator_stats start = th::stats();
  {
    Fixture f = make_fixture();
    Bufs b = make_bufs();
    check_shared(f, b);
    check_outs_and_extra(f, b);
    check_good(f, b);
    check_mixed_devices(b);
    free_bufs(b);
    GBufs gb = make_gbufs();
    check_geometry_shared(f, gb);
    check_geometry_bwd(f, gb);
    check_geometry_good(f, gb);
    check_geometry_devices(gb);
    free_gbufs(gb);
    free_fixture(f);
  }
  expect_no_leaks(start);
  return th::finish("test_bad_input_attention");
}
