// Bad input for the real FFT and the spectral convolution (abi/tlrt_fft.h): NULL for each pointer
// argument, released buffers, every size that must match (x / spec against batch and n, products
// beyond 2^64 included; x and dy against grid * width; w_re and w_im against modes * width^2),
// n == 0 and grid == 0, modes > grid/2 + 1, mixed devices (with a GPU only). For each failing
// call: the exact status, every out-parameter cleared to NULL (pre-filled with a sentinel), and a
// last-error message naming the function and the offending arguments. Good calls (empty and
// degenerate shapes included) succeed with the right output sizes. Nothing leaks.
#include "bad_input.hpp"

namespace {

const char *kRfft = "tlrt_rfft1d_packed";
const char *kIrfft = "tlrt_irfft1d_packed";
const uint64_t k32 = uint64_t{1} << 32;

void check_transforms(const Fixture &f) {
  struct T {
    const char *fn;
    tlrt_status (*call)(const tlrt_buffer *, uint64_t, uint64_t, tlrt_buffer **);
    const char *in;
  };
  for (const T &t : {T{kRfft, tlrt_rfft1d_packed, "x"}, T{kIrfft, tlrt_irfft1d_packed, "spec"}}) {
    tlrt_buffer *out = kSentinel;
    BAD(t.call(nullptr, 1, 4, &out), TLRT_ERR_NULL_ARGUMENT, t.fn, t.in);
    CLEARED(out);
    BAD(t.call(f.a, 1, 4, nullptr), TLRT_ERR_NULL_ARGUMENT, t.fn, "out");
    out = kSentinel;
    BAD(t.call(f.released, 1, 4, &out), TLRT_ERR_RELEASED, t.fn, t.in);
    CLEARED(out);
    // n == 0, whatever the batch (also with an empty input).
    out = kSentinel;
    BAD(t.call(f.a, 4, 0, &out), TLRT_ERR_INVALID_ARGUMENT, t.fn, "n");
    CLEARED(out);
    out = kSentinel;
    BAD(t.call(f.empty, 0, 0, &out), TLRT_ERR_INVALID_ARGUMENT, t.fn, "n");
    CLEARED(out);
  }
  // rfft: x (4 elements) against batch * n.
  struct S {
    const tlrt_buffer *x;
    uint64_t batch, n;
  };
  for (const S &s : {S{f.a, 1, 3}, S{f.a, 2, 3}, S{f.a, 1, 5}, S{f.short3, 1, 4},
                     S{f.empty, 1, 1}, S{f.a, k32, k32}, S{f.a, UINT64_MAX, 2},
                     S{f.a, 2, UINT64_MAX}, S{f.empty, k32 * 4, k32 * 4}}) {
    tlrt_buffer *out = kSentinel;
    BAD(tlrt_rfft1d_packed(s.x, s.batch, s.n, &out), TLRT_ERR_SHAPE, kRfft, "x");
    CLEARED(out);
  }
  // irfft: spec against batch * (n/2 + 1) * 2 (4 elements: batch 1 with n 2 or 3; batch 2 with n 1).
  for (const S &s : {S{f.a, 1, 4}, S{f.a, 1, 1}, S{f.a, 2, 2}, S{f.short3, 1, 2},
                     S{f.empty, 1, 1}, S{f.a, 1, UINT64_MAX}, S{f.a, k32, k32},
                     S{f.empty, k32 * 4, k32 * 4}}) {
    tlrt_buffer *out = kSentinel;
    BAD(tlrt_irfft1d_packed(s.x, s.batch, s.n, &out), TLRT_ERR_SHAPE, kIrfft, "spec");
    CLEARED(out);
  }
  // Good calls.
  tlrt_buffer *out = nullptr;
  TH_OK(tlrt_rfft1d_packed(f.a, 1, 4, &out));
  expect_result(kRfft, out, 6);
  TH_OK(tlrt_rfft1d_packed(f.a, 4, 1, &out));
  expect_result(kRfft, out, 8);
  TH_OK(tlrt_rfft1d_packed(f.a, 2, 2, &out));
  expect_result(kRfft, out, 8);
  TH_OK(tlrt_rfft1d_packed(f.empty, 0, 7, &out));
  expect_result(kRfft, out, 0);
  TH_OK(tlrt_rfft1d_packed(f.empty, 0, UINT64_MAX, &out));  // no work: no limit applies
  expect_result(kRfft, out, 0);
  TH_OK(tlrt_irfft1d_packed(f.a, 1, 2, &out));
  expect_result(kIrfft, out, 2);
  TH_OK(tlrt_irfft1d_packed(f.a, 1, 3, &out));
  expect_result(kIrfft, out, 3);
  TH_OK(tlrt_irfft1d_packed(f.a, 2, 1, &out));
  expect_result(kIrfft, out, 2);
  TH_OK(tlrt_irfft1d_packed(f.empty, 0, 9, &out));
  expect_result(kIrfft, out, 0);
}

// The five spectral functions behind one signature; which = 0 fwd, 1 bwd_x, 2 bwd_wre,
// 3 bwd_wim, 4 bwd_w. o2 is used by bwd_w only.
const char *kSpec[5] = {"tlrt_spectral_conv1d_rfft_fwd", "tlrt_spectral_conv1d_rfft_bwd_x",
                        "tlrt_spectral_conv1d_rfft_bwd_wre", "tlrt_spectral_conv1d_rfft_bwd_wim",
                        "tlrt_spectral_conv1d_rfft_bwd_w"};
const char *kOut[5] = {"y", "dx", "dw_re", "dw_im", "dw_re"};

tlrt_status spec(int which, const tlrt_buffer *x, const tlrt_buffer *wr, const tlrt_buffer *wi,
                 const tlrt_buffer *dy, uint64_t grid, uint64_t width, uint64_t modes,
                 tlrt_buffer **o1, tlrt_buffer **o2) {
  switch (which) {
    case 0: return tlrt_spectral_conv1d_rfft_fwd(x, wr, wi, grid, width, modes, o1);
    case 1: return tlrt_spectral_conv1d_rfft_bwd_x(x, wr, wi, dy, grid, width, modes, o1);
    case 2: return tlrt_spectral_conv1d_rfft_bwd_wre(x, wr, wi, dy, grid, width, modes, o1);
    case 3: return tlrt_spectral_conv1d_rfft_bwd_wim(x, wr, wi, dy, grid, width, modes, o1);
    default: return tlrt_spectral_conv1d_rfft_bwd_w(x, wr, wi, dy, grid, width, modes, o1, o2);
  }
}

#define SBAD(which, x, wr, wi, dy, g, w, m, want, ...)                                      \
  do {                                                                                      \
    tlrt_buffer *o1_ = kSentinel, *o2_ = kSentinel;                                         \
    expect_fail(__LINE__, kSpec[which], spec(which, x, wr, wi, dy, g, w, m, &o1_, &o2_), want, \
                kSpec[which], {__VA_ARGS__});                                               \
    CLEARED(o1_);                                                                           \
    if ((which) == 4) CLEARED(o2_);                                                         \
  } while (0)

void check_spectral(const Fixture &f) {
  // grid 4, width 2, modes 1: x, dy of 8 elements; weights of 4 (f.a).
  tlrt_buffer *x8 = th::upload({1, 2, 3, 4, 5, 6, 7, 8});
  tlrt_buffer *d8 = th::upload({-1, 0.5f, 2, 1, 0, 3, -2, 1});
  tlrt_buffer *w12 = th::upload(std::vector<float>(12, 0.5f));  // modes 3, width 2
  tlrt_buffer *rel8 = th::upload(std::vector<float>(8, 1.0f));
  bool freed = false;
  TH_OK(tlrt_buffer_release_storage(rel8, &freed));
  for (int k = 0; k < 5; ++k) {
    const bool has_dy = k != 0;
    SBAD(k, nullptr, f.a, f.b, d8, 4, 2, 1, TLRT_ERR_NULL_ARGUMENT, "x");
    SBAD(k, x8, nullptr, f.b, d8, 4, 2, 1, TLRT_ERR_NULL_ARGUMENT, "w_re");
    SBAD(k, x8, f.a, nullptr, d8, 4, 2, 1, TLRT_ERR_NULL_ARGUMENT, "w_im");
    if (has_dy) SBAD(k, x8, f.a, f.b, nullptr, 4, 2, 1, TLRT_ERR_NULL_ARGUMENT, "dy");
    SBAD(k, rel8, f.a, f.b, d8, 4, 2, 1, TLRT_ERR_RELEASED, "x");
    SBAD(k, x8, f.released, f.b, d8, 4, 2, 1, TLRT_ERR_RELEASED, "w_re");
    SBAD(k, x8, f.a, f.released, d8, 4, 2, 1, TLRT_ERR_RELEASED, "w_im");
    if (has_dy) SBAD(k, x8, f.a, f.b, rel8, 4, 2, 1, TLRT_ERR_RELEASED, "dy");
    // NULL out-parameters.
    {
      tlrt_buffer *o = kSentinel;
      BAD(spec(k, x8, f.a, f.b, d8, 4, 2, 1, nullptr, &o), TLRT_ERR_NULL_ARGUMENT, kSpec[k],
          kOut[k]);
      if (k == 4) CLEARED(o);
      if (k == 4) {
        o = kSentinel;
        BAD(spec(k, x8, f.a, f.b, d8, 4, 2, 1, &o, nullptr), TLRT_ERR_NULL_ARGUMENT, kSpec[k],
            "dw_im");
        CLEARED(o);
      }
    }
    // grid == 0; modes beyond grid/2 + 1.
    SBAD(k, f.empty, f.empty, f.empty, f.empty, 0, 2, 0, TLRT_ERR_INVALID_ARGUMENT, "grid");
    SBAD(k, x8, w12, w12, d8, 4, 2, 4, TLRT_ERR_INVALID_ARGUMENT, "modes", "grid");
    SBAD(k, x8, f.a, f.b, d8, 1, 8, 2, TLRT_ERR_INVALID_ARGUMENT, "modes", "grid");
    // x / dy against grid * width.
    SBAD(k, f.a, f.a, f.b, d8, 4, 2, 1, TLRT_ERR_SHAPE, "x", "grid", "width");
    SBAD(k, x8, f.a, f.b, d8, 2, 2, 1, TLRT_ERR_SHAPE, "x", "grid", "width");
    SBAD(k, x8, f.empty, f.empty, d8, k32 * 2, k32 * 2, 0, TLRT_ERR_SHAPE, "x", "grid", "width");
    if (has_dy) {
      SBAD(k, x8, f.a, f.b, f.a, 4, 2, 1, TLRT_ERR_SHAPE, "dy", "grid", "width");
      SBAD(k, x8, f.a, f.b, f.empty, 4, 2, 1, TLRT_ERR_SHAPE, "dy", "grid", "width");
    }
    // Weights against modes * width * width.
    SBAD(k, x8, w12, f.b, d8, 4, 2, 1, TLRT_ERR_SHAPE, "w_re", "modes", "width");
    SBAD(k, x8, f.a, w12, d8, 4, 2, 1, TLRT_ERR_SHAPE, "w_im", "modes", "width");
    SBAD(k, x8, f.a, f.b, d8, 4, 2, 2, TLRT_ERR_SHAPE, "w_re", "modes", "width");
    SBAD(k, f.empty, f.a, f.b, f.empty, k32 * 2, 0, 1, TLRT_ERR_SHAPE, "w_re", "modes", "width");
    SBAD(k, x8, f.short3, f.short3, d8, 4, 2, 1, TLRT_ERR_SHAPE, "w_re", "modes", "width");
    // Good calls: sizes of the outputs.
    struct G {
      const tlrt_buffer *x, *w, *dy;
      uint64_t grid, width, modes, nout;
    };
    for (const G &g : {G{x8, f.a, d8, 4, 2, 1, 0}, G{x8, w12, d8, 4, 2, 3, 0},
                       G{x8, f.empty, d8, 4, 2, 0, 0}, G{f.empty, f.empty, f.empty, 5, 0, 2, 0},
                       G{f.a, f.empty, f.b, 4, 1, 0, 0}, G{f.a, f.short3, f.b, 4, 1, 3, 0},
                       G{f.a, f.empty, f.b, 1, 4, 0, 0}}) {
      tlrt_buffer *o1 = nullptr, *o2 = nullptr;
      const uint64_t nsig = g.grid * g.width, nw = g.modes * g.width * g.width;
      TH_CHECK_MSG(spec(k, g.x, g.w, g.w, g.dy, g.grid, g.width, g.modes, &o1, &o2) == TLRT_OK,
                   "%s(%llu, %llu, %llu) failed: %s", kSpec[k], (unsigned long long)g.grid,
                   (unsigned long long)g.width, (unsigned long long)g.modes, tlrt_last_error());
      expect_result(kSpec[k], o1, k <= 1 ? nsig : nw);
      if (k == 4) expect_result(kSpec[k], o2, nw);
    }
  }
  // Mixed devices (needs a GPU).
  if (th::cuda_ready()) {
    tlrt_buffer *gx = th::upload({1, 2, 3, 4, 5, 6, 7, 8}, TLRT_DEVICE_CUDA(0));
    for (int k = 0; k < 5; ++k) {
      SBAD(k, gx, f.a, f.b, d8, 4, 2, 1, TLRT_ERR_DEVICE_MISMATCH, "x", "w_re");
      if (k != 0) SBAD(k, x8, f.a, f.b, gx, 4, 2, 1, TLRT_ERR_DEVICE_MISMATCH, "x", "dy");
    }
    tlrt_buffer_free(gx);
  }
  for (tlrt_buffer *b : {x8, d8, w12, rel8}) tlrt_buffer_free(b);
}

}  // namespace

int main() {
  const tlrt_allocator_stats start = th::stats();
  Fixture f = make_fixture();
  check_transforms(f);
  check_spectral(f);
  free_fixture(f);
  expect_no_leaks(start);
  return th::finish("test_bad_input_fft");
}
