/* libtorchlean_rt: real FFT and the fused spectral convolution (one FNO1d block).
 *
 * Real FFTs over row-major batches with a PACKED half spectrum, and the seeds' fused real-FFT
 * spectral convolution with its backward kernels. Every output is a fresh buffer on the device of
 * the inputs.
 *
 * CONVENTIONS (those of the seeds and of torch.fft.rfft / irfft with norm="backward"):
 *   forward  X[k] = sum_{t<n} x[t] e^{-2 pi i k t / n},   k = 0 .. n/2   (unnormalised)
 *   inverse  x[t] = (1/n) (Re X[0] + 2 sum_{0<k<n/2} Re(X[k] e^{+2 pi i k t / n})
 *                          + [n even] Re X[n/2] (-1)^t)
 *            i.e. the inverse DFT of the Hermitian extension of X, scaled by 1/n. The imaginary
 *            parts of bin 0 and (n even) bin n/2 are IGNORED (a real signal has none there).
 * The packed layout of one row of spectrum is n/2 + 1 bins (n/2 rounded down) of two floats,
 * [re, im], interleaved: row-major (batch, n/2 + 1, 2), exactly the cufftComplex layout.
 *
 * NUMERIC CLASS: library (DESIGN section 4). The backends do not agree bit for bit; each is
 * compared with a float64 DFT evaluated on the same float32 inputs.
 *   CPU backend: the project's own FFT (O(n log n) for every n), computed entirely in float64 and
 *   rounded once to float32, so every output component is its float64 value rounded to nearest:
 *   per component |err| <= 2^-24 |v| + 2^-40 E, E = sum of |input| of the row (the second term
 *   bounds the float64 error with a wide margin; tested).
 *   CUDA backend: cuFFT in float32. Error bound tested by the parity suite, normwise per row:
 *     ||v - v64||_2 <= 2^-24 (2 log2(n) + 8) ||v64||_2      (v the whole output row)
 *   cuFFT limits (CUDA only, whenever there is work to do): n <= INT_MAX (2147483647), else
 *   TLRT_ERR_INVALID_ARGUMENT; the batch is not limited.
 *   Both backends cache their plans (at most 16 each, least recently used evicted) and are
 *   thread-safe; on CUDA a call's work area comes from the stream-ordered pool (accounted like
 *   every other allocation).
 *
 * SPECIAL VALUES: a transform is a sum over the whole row, so a NaN or an infinity in a row makes
 * (generally every) bin of that row non-finite; which component becomes NaN and whether an
 * infinity becomes NaN (inf - inf) is unspecified and may differ between backends. On the CPU
 * every bin of such a row has at least one non-finite component (tested). Rows are independent: a
 * NaN in one row never reaches another. Results beyond the float32 range overflow to +-inf.
 * On the CPU the imaginary parts of bin 0 and (n even) bin n/2 of tlrt_rfft1d_packed are exactly
 * +0; on CUDA they are zero up to rounding.
 *
 * ERRORS (all functions): TLRT_ERR_NULL_ARGUMENT (an input or an out-parameter is NULL);
 * TLRT_ERR_RELEASED (an input's storage was released); TLRT_ERR_DEVICE_MISMATCH (inputs on
 * different devices); TLRT_ERR_SHAPE (an input's element count does not match the sizes, the
 * products computed exactly, so a product beyond 64 bits never matches; the message names the
 * argument); TLRT_ERR_INVALID_ARGUMENT (n == 0, grid == 0, modes > grid/2 + 1, or a cuFFT limit
 * above); TLRT_ERR_OUT_OF_MEMORY; TLRT_ERR_LIBRARY (cuFFT reported an error; the message names the
 * cufftResult); TLRT_ERR_CUDA; TLRT_ERR_DEVICE_LOST. On failure every out-parameter is NULL. */
#ifndef TLRT_FFT_H
#define TLRT_FFT_H

#include "tlrt_buffer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Forward real FFT of each row: x is row-major (batch, n); out is (batch, n/2 + 1, 2), packed
 * [re, im] per bin, unnormalised, sign e^{-2 pi i k t / n} (CONVENTIONS above). torch.fft.rfft.
 * Edge cases: batch == 0 gives an empty buffer (x must be empty); n == 1 gives [x, 0] per row;
 * n == 2 gives [x0 + x1, 0, x0 - x1, 0]. n == 0 is TLRT_ERR_INVALID_ARGUMENT (a transform of no
 * points; upstream panicked), whatever the batch. Numeric class: library (above).
 * Errors: as above; TLRT_ERR_SHAPE if x does not have batch * n elements. */
TLRT_API tlrt_status tlrt_rfft1d_packed(const tlrt_buffer *x, uint64_t batch, uint64_t n,
                                        tlrt_buffer **out);

/* Inverse real FFT of each row, normalised by 1/n: spec is (batch, n/2 + 1, 2) packed; out is
 * (batch, n) row-major. The imaginary parts of bin 0 and, for even n, bin n/2 are ignored (so
 * irfft(rfft(x)) = x up to rounding for every n, and a spectrum that is not the spectrum of a real
 * signal is read as its Hermitian part). torch.fft.irfft(spec, n). The length n cannot be deduced
 * from the spectrum (n = 2m and n = 2m + 1 both have m + 1 bins): it is an argument.
 * Edge cases: batch == 0 gives an empty buffer (spec must be empty); n == 1 gives Re spec[0];
 * n == 0 is TLRT_ERR_INVALID_ARGUMENT. Numeric class: library (above).
 * Errors: as above; TLRT_ERR_SHAPE if spec does not have batch * (n/2 + 1) * 2 elements. */
TLRT_API tlrt_status tlrt_irfft1d_packed(const tlrt_buffer *spec, uint64_t batch, uint64_t n,
                                         tlrt_buffer **out);

/* SPECTRAL CONVOLUTION (one FNO1d block, the seeds' spectralConv1dRfft).
 * x is a real signal of `grid` points and `width` channels, row-major (grid, width): channel c of
 * point t is x[t * width + c]. The weights are complex, W = w_re + i w_im, each row-major
 * (modes, width, width) indexed [k][c][o]: w_re[(k * width + c) * width + o]. With N = grid:
 *   X[k, c] = sum_t x[t, c] e^{-2 pi i k t / N}                 (rfft along the grid, per channel)
 *   Z[k, o] = sum_c X[k, c] W[k, c, o]   for k < modes;   Z[k, o] = 0 for modes <= k <= N/2
 *   y[t, o] = irfft(Z[., o])[t]                                  (normalised by 1/N, as above)
 * so y is (grid, width), the imaginary parts of Z at bin 0 and (N even) bin N/2 being ignored.
 *
 * BACKWARD (derivation). With dy = dL/dy and D[k, o] = rfft(dy[., o])[k] (its imaginary parts
 * at bin 0 and at bin N/2 for even N set to 0), c_k = 1 for k = 0 and for k = N/2 when N is even,
 * c_k = 2 otherwise: y[t, o] = (1/N) sum_k c_k Re(Z[k, o] e^{2 pi i k t / N}), so
 *   G[k, o] = dL/dRe Z + i dL/dIm Z = (c_k / N) D[k, o]                  (the seeds' dZ)
 * Z = X W with Re Z = Xr Wr - Xi Wi, Im Z = Xr Wi + Xi Wr gives
 *   dL/dw_re[k, c, o] = Re(conj(X[k, c]) G[k, o]) = (c_k / N) (Xr Dr + Xi Di)
 *   dL/dw_im[k, c, o] = Im(conj(X[k, c]) G[k, o]) = (c_k / N) (Xr Di - Xi Dr)
 *   H[k, c] = dL/dRe X + i dL/dIm X = sum_o G[k, o] conj(W[k, c, o])
 * and, X being linear in x with dRe X / dx[t] = cos, dIm X / dx[t] = -sin,
 *   dL/dx[t, c] = sum_{k < modes} Re(H[k, c] e^{2 pi i k t / N})
 *               = irfft(P[., c])[t],  P[k, c] = sum_o D[k, o] conj(W[k, c, o]) (k < modes, else 0)
 * (the c_k of G cancels the c_k of the normalised inverse). All three are checked against central
 * finite differences of a float64 forward (tests/grad/test_grad_fft.cpp).
 *
 * Shapes and edge cases, for all five functions: x and dy have grid * width elements, w_re and
 * w_im modes * width * width (products taken exactly). grid == 0 is TLRT_ERR_INVALID_ARGUMENT
 * (no transform of zero points; upstream panicked); modes > grid/2 + 1 (more modes than bins) is
 * TLRT_ERR_INVALID_ARGUMENT (upstream panicked). width == 0 (no channels: every buffer empty)
 * gives empty outputs. modes == 0 (no mode kept, empty weights) gives y = 0 and dx = 0 (+0,
 * grid * width each) and empty weight gradients. The seeds' argument order is kept: x, w_re, w_im,
 * [dy,] grid, width, modes, then the out-parameters; the backward functions validate every input
 * even where the value does not enter the result (dx does not depend on x; the weight gradients do
 * not depend on the weights), so a call site can pass the forward's arguments unchanged.
 *
 * Numeric class: library. CPU: everything in float64 (transforms, mixing sums) and rounded once:
 * per element |err| <= 2^-24 |v| + 2^-40 E with E the sum of the magnitudes of the terms (tested
 * against a long-double direct evaluation).
 * CUDA: cuFFT float32 transforms, the mixing sums in float32; parity-tested normwise against
 * float64: ||v - v64||_2 <= 2^-24 (4 log2(grid) + 4 width + 16) ||v64||_2 per output buffer.
 * cuFFT limits on CUDA: grid and width <= INT_MAX (TLRT_ERR_INVALID_ARGUMENT).
 * Special values: a NaN or infinity in x, dy or a retained weight generally makes the whole
 * output non-finite (every transform mixes the whole grid).
 * The CPU and CUDA costs: two FFTs of grid x width (one forward, one inverse) and a
 * modes x width x width complex mixing per call; the weight gradients need two forward FFTs. */

/* y = spectral_conv(x; w_re, w_im), (grid, width) (SPECTRAL CONVOLUTION above). */
TLRT_API tlrt_status tlrt_spectral_conv1d_rfft_fwd(const tlrt_buffer *x, const tlrt_buffer *w_re,
                                                   const tlrt_buffer *w_im, uint64_t grid,
                                                   uint64_t width, uint64_t modes,
                                                   tlrt_buffer **y);

/* dx = dL/dx (grid, width) from dy (grid, width) (BACKWARD above; x is validated, not read). */
TLRT_API tlrt_status tlrt_spectral_conv1d_rfft_bwd_x(const tlrt_buffer *x, const tlrt_buffer *w_re,
                                                     const tlrt_buffer *w_im,
                                                     const tlrt_buffer *dy, uint64_t grid,
                                                     uint64_t width, uint64_t modes,
                                                     tlrt_buffer **dx);

/* dw_re = dL/dw_re (modes, width, width) (BACKWARD above). Computes only the real part
 * (upstream computed both parts and dropped one); w_re and w_im are validated, not read. */
TLRT_API tlrt_status tlrt_spectral_conv1d_rfft_bwd_wre(const tlrt_buffer *x,
                                                       const tlrt_buffer *w_re,
                                                       const tlrt_buffer *w_im,
                                                       const tlrt_buffer *dy, uint64_t grid,
                                                       uint64_t width, uint64_t modes,
                                                       tlrt_buffer **dw_re);

/* dw_im = dL/dw_im (modes, width, width) (BACKWARD above). Computes only the imaginary part. */
TLRT_API tlrt_status tlrt_spectral_conv1d_rfft_bwd_wim(const tlrt_buffer *x,
                                                       const tlrt_buffer *w_re,
                                                       const tlrt_buffer *w_im,
                                                       const tlrt_buffer *dy, uint64_t grid,
                                                       uint64_t width, uint64_t modes,
                                                       tlrt_buffer **dw_im);

/* Both weight gradients from one pass: the transforms of x and dy are computed once and both
 * parts written (what a training step wants; bit for bit the values of the two functions above
 * on the same backend). On failure both out-parameters are NULL. */
TLRT_API tlrt_status tlrt_spectral_conv1d_rfft_bwd_w(const tlrt_buffer *x, const tlrt_buffer *w_re,
                                                     const tlrt_buffer *w_im,
                                                     const tlrt_buffer *dy, uint64_t grid,
                                                     uint64_t width, uint64_t modes,
                                                     tlrt_buffer **dw_re, tlrt_buffer **dw_im);

#ifdef __cplusplus
}
#endif

#endif /* TLRT_FFT_H */
