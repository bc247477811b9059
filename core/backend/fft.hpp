// Backend interface: real FFT and the fused spectral convolution (abi/tlrt_fft.h). Defined by
// stub/fft.cpp (float64 FFT of our own) and cuda/fft.cu (cuFFT). Numeric class "library": the
// backends do not agree bit for bit. Core has validated every argument, allocated the outputs and
// handled the empty cases: batch, n >= 1 and grid, width, modes >= 1 here, modes <= grid/2 + 1;
// on CUDA n, grid and width fit in an int. Inputs and outputs are on device `dev` and do not
// alias. Scratch is the backend's own (CUDA: the stream-ordered pool); nothing synchronises.
#pragma once

#include <cstdint>

#define TLRT_FFT_BACKEND_API                                                                    \
  /* out (batch, n/2 + 1, 2) = rfft of each row of x (batch, n), unnormalised. */               \
  void rfft(int dev, const float *x, uint64_t batch, uint64_t n, float *out);                   \
  /* out (batch, n) = irfft of each row of spec (batch, n/2 + 1, 2), scaled by 1/n; imaginary   \
     parts of bins 0 and n/2 (n even) ignored. spec is not modified. */                         \
  void irfft(int dev, const float *spec, uint64_t batch, uint64_t n, float *out);               \
  /* y (grid, width) = irfft(rfft(x) * W truncated to modes), abi/tlrt_fft.h. */                \
  void spectral_conv_fwd(int dev, const float *x, const float *w_re, const float *w_im,         \
                         uint64_t grid, uint64_t width, uint64_t modes, float *y);              \
  /* dx (grid, width) = irfft(P), P[k, c] = sum_o rfft(dy)[k, o] conj(W[k, c, o]), k < modes. */ \
  void spectral_conv_bwd_x(int dev, const float *w_re, const float *w_im, const float *dy,      \
                           uint64_t grid, uint64_t width, uint64_t modes, float *dx);           \
  /* dw = (c_k / grid) conj(X[k, c]) D[k, o]: its real part into dw_re, its imaginary part      \
     into dw_im; either pointer may be NULL (that part is then not computed), not both. */      \
  void spectral_conv_bwd_w(int dev, const float *x, const float *dy, uint64_t grid,             \
                           uint64_t width, uint64_t modes, float *dw_re, float *dw_im);

namespace tlrt {
namespace stub {
TLRT_FFT_BACKEND_API
}
namespace cuda {
TLRT_FFT_BACKEND_API
}
}  // namespace tlrt
