/* libtorchlean_rt: fused layer normalisation and RMS normalisation, forward and backward.
 *
 * Layer norm over the last axis: x is a row-major (rows, cols) matrix (leading axes folded into
 * rows), each row is normalised by its own mean and biased variance, then scaled and shifted by the
 * per-column gamma and beta (cols elements each). Every output is a fresh buffer on the device of
 * the inputs.
 *
 * DESIGN NOTE. Upstream's fused forward returned y, xhat and inv_std, an extra rows * cols write.
 * This forward returns y, mean and inv_std (rows elements each), like PyTorch's native_layer_norm,
 * and the backward recomputes xhat = (x - mean) * inv_std bit for bit as the forward computed it.
 * So the forward moves 8 bytes per element (x read, y written) instead of 12, and the backward
 * reads x instead of xhat (the same bytes).
 *
 * DEFINITIONS. For one row x[0..cols), n = cols rounded to float32 (exact for cols <= 2^24),
 * S(v) = THE TREE sum of abi/tlrt_reduce.h over v[0], ..., v[cols-1], and every other operation a
 * single IEEE binary32 operation evaluated in the order written (division, square root and
 * reciprocal correctly rounded; no contraction; the one fused multiply-add is written fma):
 *   mean    = S(x) / n
 *   var     = S(q) / n,  q[j] = (x[j] - mean) * (x[j] - mean)
 *             (biased; two passes, so no cancellation of E[x^2] - mean^2)
 *   inv_std = 1 / sqrt(var + eps)
 *   xhat[j] = (x[j] - mean) * inv_std
 *   y[j]    = fma(xhat[j], gamma[j], beta[j])                       (one rounding)
 * Backward, with dy the upstream gradient, per row:
 *   d[j]  = dy[j] * gamma[j]
 *   a     = S(d) / n,   b = S(p) / n,  p[j] = d[j] * xhat[j]
 *   dx[j] = (d[j] - (a + xhat[j] * b)) * inv_std
 * which is PyTorch's dx = inv_std * (d - mean_j(d) - xhat * mean_j(d * xhat)) (the brief form
 * (d - (S(d) + xhat S(p)) / cols) * inv_std, with the division distributed over the two sums);
 * and over the rows, for each column j (THE TREE over i = 0..rows-1, in row order):
 *   dgamma[j] = S_i(dy[i, j] * xhat[i, j]),   dbeta[j] = S_i(dy[i, j]).
 * Here xhat is recomputed from x, mean and inv_std with the forward's formula, so with the
 * forward's own outputs it is bit for bit the forward's xhat.
 *
 * NUMERIC CLASS: ordered reduction (every sum is the fixed tree; no transcendental function). The
 * CPU and CUDA backends perform the operations above in the same order with the same tree: results
 * are bitwise identical across backends and runs (the parity suite compares them bit for bit; NaN
 * payloads are unspecified). tlrt_set_deterministic changes nothing here: the one fixed tree is
 * both the deterministic and the fast path (no atomics anywhere, the column sums included).
 *
 * ACCURACY against a float64 evaluation of the definitions on the same float32 inputs
 * (tests/unit/test_layer_norm.cpp asserts these bounds on rows of 1 .. 70000 elements, x uniform
 * and rows offset from zero by up to 10^3 times their spread, gamma and beta in [-2, 2]; the
 * largest measured error / bound is quoted in parentheses). u = 2^-24, L = levels of the tree
 * over cols (1 for cols <= 4096), L_r over rows, A = mean_j |x[j]| (the mean's error is a
 * fraction of A, not of the spread):
 *   mean:    |mean - mean64| <= 2u (23 L + 1) A                                  (measured 0.06);
 *   inv_std: relative error <= 2 (u (12 L + 5) + r), r = ((23 L + 2) u A)^2 / (2 (var + eps))
 *            (the mean's error enters var at second order)                       (measured 0.09);
 *   y:       |y - y64| <= 2u (|y| + |gamma| ((12 L + 8 + r / u) |xhat| + (23 L + 2) A inv_std))
 *                                                                                (measured 0.46);
 *   dx (from the same float32 mean and inv_std): |dx - dx64| <= 2u (|dx| + inv_std (2 |d| +
 *            3 |xhat b| + |a| + (24 L + 1) (mean_j |d| + |xhat| mean_j |d xhat|)))
 *                                                                                (measured 0.11);
 *   dgamma:  <= 2u (23 L_r + 3) sum_i |dy xhat|;  dbeta: <= 2u 23 L_r sum_i |dy|  (measured 0.06,
 *            0.03).
 * Typical figure (x uniform in [-1, 1], cols = 1024): |y - y64| <= 9.8 u (|xhat gamma| + |beta|).
 * Rows whose spread is tiny against their mean (|mean| / std ~ 1e4 and beyond) lose digits in
 * x[j] - mean like any float32 layer norm.
 *
 * SPECIAL VALUES: a NaN or an infinity in a row of x makes the row's inv_std and y NaN (inf - inf
 * in the deviations) and its mean NaN (or +-inf for infinities of one sign without NaN); a NaN in
 * gamma[j] or beta[j] makes column j of y NaN. eps = 0 with a constant row (var = 0) gives inv_std
 * = +inf and y = NaN (0 * inf), as PyTorch. Squared deviations beyond the float32 range (|x - mean|
 * > ~1.8e19) give var = +inf and inv_std = +0.
 * Deterministic mode: nothing changes (see above). */
#ifndef TLRT_LAYER_NORM_H
#define TLRT_LAYER_NORM_H

#include "tlrt_buffer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Layer norm forward (DEFINITIONS above). x has rows * cols elements; gamma and beta have cols
 * elements. Outputs: y (rows * cols), mean (rows), inv_std (rows). eps is a double rounded once
 * to float32 under the host-scalar rule of torchlean_rt.h, and must be >= 0 (PyTorch's default
 * is 1e-5; upstream's Lean caller passed 1e-6).
 * Empty cases: rows == 0 gives three empty outputs. cols == 0 (x empty, gamma and beta empty) gives
 * an empty y and mean = inv_std = NaN for every row (0 / 0, the convention of tlrt_reduce_mean;
 * upstream panicked here).
 * Errors: TLRT_ERR_NULL_ARGUMENT (x, gamma, beta, y, mean, inv_std); TLRT_ERR_RELEASED;
 * TLRT_ERR_DEVICE_MISMATCH (x, gamma, beta on different devices); TLRT_ERR_SHAPE (x not
 * rows * cols, the product taken exactly; gamma or beta not cols elements);
 * TLRT_ERR_INVALID_ARGUMENT (eps NaN, +-inf, or rounding to +inf in float32 (the host-scalar
 * rule), or negative; -0 is accepted); TLRT_ERR_OVERFLOW (cols == 0 and rows > TLRT_MAX_ELEMENTS: mean and inv_std could not
 * exist); TLRT_ERR_OUT_OF_MEMORY; TLRT_ERR_CUDA; TLRT_ERR_DEVICE_LOST. On failure *y, *mean and
 * *inv_std are NULL. */
TLRT_API tlrt_status tlrt_layer_norm_fwd(const tlrt_buffer *x, const tlrt_buffer *gamma,
                                         const tlrt_buffer *beta, uint64_t rows, uint64_t cols,
                                         double eps, tlrt_buffer **y, tlrt_buffer **mean,
                                         tlrt_buffer **inv_std);

/* Layer norm backward (DEFINITIONS above): dx (rows * cols), dgamma (cols) and dbeta (cols) from
 * the upstream gradient dy (rows * cols), the forward's input x (rows * cols), its mean and inv_std
 * outputs (rows each) and gamma (cols). Any mean and inv_std are accepted (they are not checked to
 * be x's statistics); xhat is recomputed from them.
 * Empty cases: rows == 0 gives an empty dx and dgamma = dbeta = +0 (cols elements); cols == 0 gives
 * three empty outputs.
 * The order of operations is the DEFINITIONS' on every backend and for every shape.
 * Errors: TLRT_ERR_NULL_ARGUMENT (dy, x, mean, inv_std, gamma, dx, dgamma, dbeta);
 * TLRT_ERR_RELEASED; TLRT_ERR_DEVICE_MISMATCH (inputs on different devices); TLRT_ERR_SHAPE (dy not
 * rows * cols, the product taken exactly; x a different size than dy; mean or inv_std not rows
 * elements; gamma not cols elements); TLRT_ERR_OUT_OF_MEMORY; TLRT_ERR_CUDA; TLRT_ERR_DEVICE_LOST.
 * On failure *dx, *dgamma and *dbeta are NULL. */
TLRT_API tlrt_status tlrt_layer_norm_bwd(const tlrt_buffer *dy, const tlrt_buffer *x,
                                         const tlrt_buffer *mean, const tlrt_buffer *inv_std,
                                         const tlrt_buffer *gamma, uint64_t rows, uint64_t cols,
                                         tlrt_buffer **dx, tlrt_buffer **dgamma,
                                         tlrt_buffer **dbeta);

/* ---- RMS norm ------------------------------------------------------------------------------
 * Root-mean-square normalisation over the last axis (Zhang and Sennrich 2019; the norm of LLaMA
 * and Mamba blocks): x is a row-major (rows, cols) matrix (leading axes folded into rows), each
 * row is divided by the root of its mean square (no centring, no shift) and optionally scaled by
 * the per-column gamma (cols elements). Every output is a fresh buffer on the inputs' device.
 *
 * DEFINITIONS. For one row x[0..cols), n = cols rounded to float32, S(v) THE TREE sum of
 * abi/tlrt_reduce.h over v[0], ..., v[cols-1], every other operation one IEEE binary32 operation
 * in the order written (division, square root and reciprocal correctly rounded; no contraction;
 * no fused multiply-add):
 *   ms      = S(q) / n,  q[j] = x[j] * x[j]
 *   inv_rms = 1 / sqrt(ms + eps)
 *   xhat[j] = x[j] * inv_rms
 *   y[j]    = xhat[j] * gamma[j]                 (gamma NULL: y[j] = xhat[j], no scale)
 * Backward, with dy the upstream gradient, per row:
 *   d[j]  = dy[j] * gamma[j]                     (gamma NULL: d[j] = dy[j])
 *   b     = S(p) / n,   p[j] = d[j] * xhat[j]
 *   dx[j] = (d[j] - xhat[j] * b) * inv_rms
 * which is dx = inv_rms * (d - xhat * mean_j(d * xhat)), the exact gradient of y for the given
 * inv_rms; and over the rows, for each column j (THE TREE over i = 0..rows-1, in row order):
 *   dgamma[j] = S_i(dy[i, j] * xhat[i, j]).
 * xhat is recomputed from x and inv_rms with the forward's formula, so with the forward's own
 * inv_rms it is bit for bit the forward's xhat. Like the layer norm above, the forward returns
 * only the per-row statistic (rows floats) besides y: 8 bytes per element moved, and the
 * backward reads x instead of a saved xhat (the same bytes).
 *
 * NUMERIC CLASS: ordered reduction (layer norm's: every sum is the fixed tree; no transcendental
 * function). CPU and CUDA perform the operations above in the same order with the same tree:
 * results are bitwise identical across backends and runs (the parity suite compares them bit for
 * bit; NaN payloads are unspecified); tlrt_set_deterministic changes nothing (no atomics, the
 * column sums included).
 *
 * ACCURACY against a float64 evaluation of the definitions on the same float32 inputs
 * (tests/unit/test_rms_norm.cpp asserts these bounds on rows of 1 .. 70000 elements, x uniform,
 * of wide exponents and offset from zero, gamma in [-2, 2]). u = 2^-24, L = levels of the tree over cols (1 for cols <= 4096), L_r over
 * rows. There is no mean to subtract, so no cancellation and no dependence on an offset:
 *   inv_rms: relative error <= 2u (12 L + 5);
 *   y:       |y - y64| <= 2u (12 L + 8) |y|;
 *   dx (from the same float32 inv_rms): |dx - dx64| <= 2u (|dx| + inv_rms (2 |d| + 3 |xhat b|
 *            + (24 L + 1) |xhat| mean_j |d xhat|));
 *   dgamma:  <= 2u (23 L_r + 3) sum_i |dy xhat|.
 *
 * SPECIAL VALUES: a NaN in a row makes its inv_rms and y NaN; an infinity makes ms = +inf,
 * inv_rms = +0, y = NaN at the infinity (inf * 0) and +-0 elsewhere; squares beyond the float32
 * range (|x| > ~1.8e19) likewise give inv_rms = +0 and y = +-0. A NaN in gamma[j] makes column j
 * of y NaN. eps = 0 with an all-zero row (or one whose squares underflow to 0) gives ms = 0,
 * inv_rms = +inf and y = NaN at the zeros (0 * inf, as PyTorch) and +-inf at nonzero x. */

/* RMS norm forward (DEFINITIONS above). x has rows * cols elements; gamma has cols elements, or is
 * NULL for no scale (y = xhat). Outputs: y (rows * cols) and inv_rms (rows). eps is a double
 * rounded once to float32 under the host-scalar rule of torchlean_rt.h, and must be >= 0
 * (PyTorch's nn.RMSNorm defaults to the float32 machine epsilon; LLaMA uses 1e-5 or 1e-6).
 * Empty cases: rows == 0 gives two empty outputs. cols == 0 (x empty, gamma empty or NULL) gives
 * an empty y and inv_rms = NaN for every row (ms = 0 / 0, as the layer norm's mean).
 * Errors: TLRT_ERR_NULL_ARGUMENT (x, y, inv_rms); TLRT_ERR_RELEASED; TLRT_ERR_DEVICE_MISMATCH (x,
 * gamma on different devices); TLRT_ERR_SHAPE (x not rows * cols, the product taken exactly;
 * gamma not cols elements); TLRT_ERR_INVALID_ARGUMENT (eps NaN, +-inf, or rounding to +inf in
 * float32 (the host-scalar rule), or negative; -0 is accepted); TLRT_ERR_OVERFLOW (cols == 0 and
 * rows > TLRT_MAX_ELEMENTS: inv_rms could not exist); TLRT_ERR_OUT_OF_MEMORY; TLRT_ERR_CUDA;
 * TLRT_ERR_DEVICE_LOST. On failure *y and *inv_rms are NULL. */
TLRT_API tlrt_status tlrt_rms_norm_fwd(const tlrt_buffer *x, const tlrt_buffer *gamma,
                                       uint64_t rows, uint64_t cols, double eps, tlrt_buffer **y,
                                       tlrt_buffer **inv_rms);

/* RMS norm backward (DEFINITIONS above): dx (rows * cols) and dgamma (cols) from the upstream
 * gradient dy (rows * cols), the forward's input x (rows * cols), gamma (cols, or NULL as in the
 * forward) and the forward's inv_rms (rows). Any inv_rms is accepted (it is not checked to be x's
 * statistic); xhat is recomputed from it.
 * dgamma: required when gamma is given. When gamma is NULL, dgamma may be NULL (no column sums are
 * computed); if it is not, *dgamma receives S_i(dy xhat) all the same: the gradient with respect
 * to a unit scale (what a gamma of ones would receive).
 * Empty cases: rows == 0 gives an empty dx and dgamma = +0 (cols elements); cols == 0 gives empty
 * outputs.
 * Errors: TLRT_ERR_NULL_ARGUMENT (dy, x, inv_rms, dx; dgamma when gamma is given);
 * TLRT_ERR_RELEASED; TLRT_ERR_DEVICE_MISMATCH (inputs on different devices); TLRT_ERR_SHAPE (dy not
 * rows * cols, the product taken exactly; x a different size than dy; inv_rms not rows elements;
 * gamma not cols elements); TLRT_ERR_OUT_OF_MEMORY; TLRT_ERR_CUDA; TLRT_ERR_DEVICE_LOST. On failure
 * *dx and *dgamma (when given) are NULL. */
TLRT_API tlrt_status tlrt_rms_norm_bwd(const tlrt_buffer *dy, const tlrt_buffer *x,
                                       const tlrt_buffer *gamma, const tlrt_buffer *inv_rms,
                                       uint64_t rows, uint64_t cols, tlrt_buffer **dx,
                                       tlrt_buffer **dgamma);

#ifdef __cplusplus
}
#endif

#endif /* TLRT_LAYER_NORM_H */
