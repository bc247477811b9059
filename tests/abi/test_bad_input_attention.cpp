// Bad input for the attention entry points (abi/tlrt_attention.h): NULL for every pointer argument
// (the mask excepted: NULL means none), released buffers, every size that must match (q against
// bh * n * d with products beyond 2^64; k, v, dout, out against q; the mask against bh * n * n or
// n * n; lse against bh * n), d > 256, n or bh beyond 2^31 - 1, scale and mask_fill outside their
// domains, mixed devices (with a GPU only). For each failing call: the exact status, every
// out-parameter cleared to NULL (pre-filled with a sentinel), a last-error message naming the
// function and the offending arguments. Good calls succeed with the right sizes. Nothing leaks.
#include <cmath>

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
    free_fixture(f);
  }
  expect_no_leaks(start);
  return th::finish("test_bad_input_attention");
}
