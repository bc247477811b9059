// Real-FFT and spectral-convolution entry points (abi/tlrt_fft.h): validate, allocate the outputs,
// handle the empty and degenerate cases, dispatch. The backends only see batch, n >= 1 and
// grid, width, modes >= 1 with modes <= grid/2 + 1; the CUDA backend only sizes that fit cuFFT.
#include <climits>
#include <cstdint>
#include <string>

#include "abi/tlrt_fft.h"
#include "core/backend/fft.hpp"
#include "core/backend/memory.hpp"
#include "core/buffer.hpp"
#include "core/error.hpp"
#include "core/shape_check.hpp"

using namespace tlrt;

namespace {

using ull = unsigned long long;

// cuFFT takes int transform lengths (and the strides of the spectral convolution).
void check_cufft_int(const Buffer &B, const char *name, uint64_t v) {
  if (B.dev.cuda && v > (uint64_t)INT_MAX)
    fail(TLRT_ERR_INVALID_ARGUMENT,
         "argument %s = %llu exceeds INT_MAX (2147483647), the largest length cuFFT accepts (CUDA "
         "buffers)",
         name, (ull)v);
}

void check_n(uint64_t n) {
  if (n == 0)
    fail(TLRT_ERR_INVALID_ARGUMENT, "argument n = 0: a transform needs at least one point");
}

// rfft / irfft: signal (batch, n) and packed spectrum (batch, n/2 + 1, 2).
tlrt_status transform(const char *fn, bool inverse, const tlrt_buffer *in, uint64_t batch,
                      uint64_t n, tlrt_buffer **out) {
  if (out) *out = nullptr;
  return guarded(fn, [&] {
    clear_out(out, "out");
    const char *in_name = inverse ? "spec" : "x";
    const Buffer &X = input(in, in_name);
    check_n(n);
    uint64_t nsig = 0, nspec = 0;
    const bool sig_fits = product3(batch, n, 1, &nsig);
    const bool spec_fits = product3(batch, n / 2 + 1, 2, &nspec);
    if (!inverse && !(sig_fits && X.size == nsig))
      fail(TLRT_ERR_SHAPE, "argument x has %llu elements, but batch * n = %llu * %llu = %s",
           (ull)X.size, (ull)batch, (ull)n, count_str(nsig, sig_fits).c_str());
    if (inverse && !(spec_fits && X.size == nspec))
      fail(TLRT_ERR_SHAPE,
           "argument spec has %llu elements, but batch * (n/2 + 1) * 2 = %llu * %llu * 2 = %s",
           (ull)X.size, (ull)batch, (ull)(n / 2 + 1), count_str(nspec, spec_fits).c_str());
    // The output count: for the forward, (n/2 + 1) * 2 may exceed n by 2.
    const uint64_t nout = inverse ? nsig : nspec;
    const bool out_fits = inverse ? sig_fits : spec_fits;
    if (!out_fits || nout > TLRT_MAX_ELEMENTS)
      fail(TLRT_ERR_OVERFLOW,
           "the output would have %s elements, more than TLRT_MAX_ELEMENTS (2^60) (argument "
           "batch = %llu, argument n = %llu)",
           count_str(nout, out_fits).c_str(), (ull)batch, (ull)n);
    if (batch != 0) check_cufft_int(X, "n", n);
    Owned y = new_buffer(X.dev, nout);
    if (batch != 0) {
      if (inverse)
        TLRT_DISPATCH(X.dev, irfft, X.dev.ordinal, X.data, batch, n, y->data);
      else
        TLRT_DISPATCH(X.dev, rfft, X.dev.ordinal, X.data, batch, n, y->data);
    }
    *out = y.release();
  });
}

// The validated arguments of a spectral-convolution call.
struct Spectral {
  const Buffer *x = nullptr, *wre = nullptr, *wim = nullptr, *dy = nullptr;
  uint64_t signal = 0;   // grid * width
  uint64_t weights = 0;  // modes * width * width
};

Spectral check_spectral(const tlrt_buffer *x, const tlrt_buffer *w_re, const tlrt_buffer *w_im,
                        const tlrt_buffer *dy, bool has_dy, uint64_t grid, uint64_t width,
                        uint64_t modes) {
  Spectral s;
  const Buffer &X = input(x, "x");
  const Buffer &WR = input(w_re, "w_re");
  const Buffer &WI = input(w_im, "w_im");
  same_device(X, "x", WR, "w_re");
  same_device(X, "x", WI, "w_im");
  const Buffer *DY = nullptr;
  if (has_dy) {
    DY = &input(dy, "dy");
    same_device(X, "x", *DY, "dy");
  }
  if (grid == 0)
    fail(TLRT_ERR_INVALID_ARGUMENT, "argument grid = 0: a transform needs at least one point");
  if (modes > grid / 2 + 1)
    fail(TLRT_ERR_INVALID_ARGUMENT,
         "argument modes = %llu exceeds argument grid / 2 + 1 = %llu, the number of frequency "
         "bins of a real signal of %llu points",
         (ull)modes, (ull)(grid / 2 + 1), (ull)grid);
  uint64_t sig = 0, wts = 0;
  const bool sig_fits = product3(grid, width, 1, &sig);
  const bool w_fits = product3(modes, width, width, &wts);
  const auto check_sig = [&](const Buffer &B, const char *name) {
    if (!(sig_fits && B.size == sig))
      fail(TLRT_ERR_SHAPE,
           "argument %s has %llu elements, but argument grid * argument width = %llu * %llu = %s",
           name, (ull)B.size, (ull)grid, (ull)width, count_str(sig, sig_fits).c_str());
  };
  const auto check_w = [&](const Buffer &B, const char *name) {
    if (!(w_fits && B.size == wts))
      fail(TLRT_ERR_SHAPE,
           "argument %s has %llu elements, but argument modes * argument width * argument width "
           "= %llu * %llu * %llu = %s",
           name, (ull)B.size, (ull)modes, (ull)width, (ull)width, count_str(wts, w_fits).c_str());
  };
  check_sig(X, "x");
  check_w(WR, "w_re");
  check_w(WI, "w_im");
  if (has_dy) check_sig(*DY, "dy");
  if (sig != 0 && modes != 0) {
    check_cufft_int(X, "grid", grid);
    check_cufft_int(X, "width", width);
  }
  s.x = &X;
  s.wre = &WR;
  s.wim = &WI;
  s.dy = DY;
  s.signal = sig;
  s.weights = wts;
  return s;
}

enum class WPart { Re, Im };

tlrt_status weight_grad(const char *fn, WPart part, const tlrt_buffer *x,
                        const tlrt_buffer *w_re, const tlrt_buffer *w_im, const tlrt_buffer *dy,
                        uint64_t grid, uint64_t width, uint64_t modes, tlrt_buffer **out) {
  if (out) *out = nullptr;
  return guarded(fn, [&] {
    clear_out(out, part == WPart::Re ? "dw_re" : "dw_im");
    const Spectral s = check_spectral(x, w_re, w_im, dy, true, grid, width, modes);
    const Dev d = s.x->dev;
    Owned g = new_buffer(d, s.weights);
    if (s.weights != 0)
      TLRT_DISPATCH(d, spectral_conv_bwd_w, d.ordinal, s.x->data, s.dy->data, grid, width, modes,
                    part == WPart::Re ? g->data : nullptr, part == WPart::Im ? g->data : nullptr);
    *out = g.release();
  });
}

}  // namespace

extern "C" {

TLRT_API tlrt_status tlrt_rfft1d_packed(const tlrt_buffer *x, uint64_t batch, uint64_t n,
                                        tlrt_buffer **out) {
  return transform(__func__, false, x, batch, n, out);
}

TLRT_API tlrt_status tlrt_irfft1d_packed(const tlrt_buffer *spec, uint64_t batch, uint64_t n,
                                         tlrt_buffer **out) {
  return transform(__func__, true, spec, batch, n, out);
}

TLRT_API tlrt_status tlrt_spectral_conv1d_rfft_fwd(const tlrt_buffer *x, const tlrt_buffer *w_re,
                                                   const tlrt_buffer *w_im, uint64_t grid,
                                                   uint64_t width, uint64_t modes,
                                                   tlrt_buffer **y) {
  if (y) *y = nullptr;
  return guarded(__func__, [&] {
    clear_out(y, "y");
    const Spectral s = check_spectral(x, w_re, w_im, nullptr, false, grid, width, modes);
    const Dev d = s.x->dev;
    Owned out = new_buffer(d, s.signal);
    if (s.signal != 0) {
      if (modes == 0)
        TLRT_DISPATCH(d, fill, d.ordinal, out->data, 0.0f, s.signal);
      else
        TLRT_DISPATCH(d, spectral_conv_fwd, d.ordinal, s.x->data, s.wre->data, s.wim->data, grid,
                      width, modes, out->data);
    }
    *y = out.release();
  });
}

TLRT_API tlrt_status tlrt_spectral_conv1d_rfft_bwd_x(const tlrt_buffer *x, const tlrt_buffer *w_re,
                                                     const tlrt_buffer *w_im,
                                                     const tlrt_buffer *dy, uint64_t grid,
                                                     uint64_t width, uint64_t modes,
                                                     tlrt_buffer **dx) {
  if (dx) *dx = nullptr;
  return guarded(__func__, [&] {
    clear_out(dx, "dx");
    const Spectral s = check_spectral(x, w_re, w_im, dy, true, grid, width, modes);
    const Dev d = s.x->dev;
    Owned out = new_buffer(d, s.signal);
    if (s.signal != 0) {
      if (modes == 0)
        TLRT_DISPATCH(d, fill, d.ordinal, out->data, 0.0f, s.signal);
      else
        TLRT_DISPATCH(d, spectral_conv_bwd_x, d.ordinal, s.wre->data, s.wim->data, s.dy->data,
                      grid, width, modes, out->data);
    }
    *dx = out.release();
  });
}

TLRT_API tlrt_status tlrt_spectral_conv1d_rfft_bwd_wre(const tlrt_buffer *x,
                                                       const tlrt_buffer *w_re,
                                                       const tlrt_buffer *w_im,
                                                       const tlrt_buffer *dy, uint64_t grid,
                                                       uint64_t width, uint64_t modes,
                                                       tlrt_buffer **dw_re) {
  return weight_grad(__func__, WPart::Re, x, w_re, w_im, dy, grid, width, modes, dw_re);
}

TLRT_API tlrt_status tlrt_spectral_conv1d_rfft_bwd_wim(const tlrt_buffer *x,
                                                       const tlrt_buffer *w_re,
                                                       const tlrt_buffer *w_im,
                                                       const tlrt_buffer *dy, uint64_t grid,
                                                       uint64_t width, uint64_t modes,
                                                       tlrt_buffer **dw_im) {
  return weight_grad(__func__, WPart::Im, x, w_re, w_im, dy, grid, width, modes, dw_im);
}

TLRT_API tlrt_status tlrt_spectral_conv1d_rfft_bwd_w(const tlrt_buffer *x, const tlrt_buffer *w_re,
                                                     const tlrt_buffer *w_im,
                                                     const tlrt_buffer *dy, uint64_t grid,
                                                     uint64_t width, uint64_t modes,
                                                     tlrt_buffer **dw_re, tlrt_buffer **dw_im) {
  if (dw_re) *dw_re = nullptr;
  if (dw_im) *dw_im = nullptr;
  return guarded(__func__, [&] {
    clear_out(dw_re, "dw_re");
    clear_out(dw_im, "dw_im");
    const Spectral s = check_spectral(x, w_re, w_im, dy, true, grid, width, modes);
    const Dev d = s.x->dev;
    Owned gr = new_buffer(d, s.weights);
    Owned gi = new_buffer(d, s.weights);
    if (s.weights != 0)
      TLRT_DISPATCH(d, spectral_conv_bwd_w, d.ordinal, s.x->data, s.dy->data, grid, width, modes,
                    gr->data, gi->data);
    *dw_re = gr.release();
    *dw_im = gi.release();
  });
}

}  // extern "C"
