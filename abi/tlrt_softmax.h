/* libtorchlean_rt: softmax, log-softmax and the hard-masked row softmax, with backward kernels.
 *
 * Every function here works on the rows of a row-major (rows, cols) matrix: the last axis of a
 * tensor, its leading axes folded into rows (attention scores of shape (B, H, N, N) are
 * (B * H * N, N)). Inputs are buffers of exactly rows * cols elements; each output is a fresh
 * buffer of rows * cols elements on the device of the inputs. rows == 0 or cols == 0 gives an
 * empty output (nothing is launched).
 *
 * Errors, for every function here: TLRT_ERR_NULL_ARGUMENT (an input buffer or out is NULL);
 * TLRT_ERR_RELEASED (an input's storage was released); TLRT_ERR_DEVICE_MISMATCH (inputs on
 * different devices); TLRT_ERR_SHAPE (the first input's element count is not rows * cols, the
 * product taken exactly, so that a product beyond 2^64 or beyond TLRT_MAX_ELEMENTS never matches;
 * or a second input's count differs from the first's; the message names the inputs and rows and
 * cols); TLRT_ERR_OUT_OF_MEMORY; TLRT_ERR_CUDA; TLRT_ERR_DEVICE_LOST. On failure *out is NULL and
 * nothing leaks.
 *
 * DEFINITIONS. For one row x[0..cols), with S(v) = THE TREE sum of abi/tlrt_reduce.h over
 * v[0], ..., v[cols-1] (the same fixed tree for every row length, chunk levels included), exp and
 * log the shared float32 functions of tlrt_exp / tlrt_log, and every other operation a single IEEE
 * binary32 operation evaluated in the order written (no contraction; the one fused multiply-add is
 * written fma):
 *   m    = max_j x[j]          the IEEE 754-2019 maximum of tlrt_max (NaN if any x[j] is NaN)
 *   e[j] = exp(x[j] - m)
 *   s    = S(e)                s >= 1 when m is finite: the maximum contributes exp(0) = 1
 *   tlrt_softmax:      y[j] = e[j] / s
 *   tlrt_log_softmax:  y[j] = (x[j] - m) - log(s)
 * The maximum is exact, so the order it is taken in does not matter; only the sums follow the tree.
 *
 * NUMERIC CLASS: shared math + ordered reduction (DESIGN section 4). The CPU and CUDA backends
 * perform the operations above, in the same order, with the same tree: results are bitwise
 * identical across backends and runs (the parity suite compares them bit for bit; NaN payloads
 * are unspecified). tlrt_set_deterministic changes nothing here: the one fixed tree is both the
 * deterministic and the fast path (no atomics anywhere).
 *
 * ACCURACY against a float64 evaluation of the same formulas on the same float32 inputs
 * (tests/unit/test_softmax.cpp asserts the bounds on every finite output of rows of 1 .. 2^20 + 3
 * elements with uniform, wide-exponent, bit-pattern and edge inputs; "measured" quotes the largest
 * error / bound it found). u = 2^-24, L = levels of the tree (1 for cols <= 4096, 2 up to 2^24).
 * The dominant term is the rounding of x[j] - m, worth |x[j] - m| * u relative in e[j], as in any
 * float32 softmax:
 *   softmax (and masked): |y - y64| <= u * y64 * (|x[j] - m| + 23 L + ln(cols) + 5),
 *                         measured <= 0.69 of it;
 *   log-softmax:          |y - y64| <= u * (2 |x[j] - m| + 3 ln(s) + ln(cols) + 23 L + 3),
 *                         measured <= 0.85 of it.
 * Typical figures (values uniform in [-1, 1], cols = 1000): softmax relative error <= 3.8 u,
 * log-softmax absolute error <= 14 u (y ~ -6.9: about 3.5 ulp); values in [-16, 16]: 19.4 u
 * relative and 49 u absolute.
 *
 * SPECIAL VALUES (as PyTorch): a NaN anywhere in a row makes the whole row NaN; +inf anywhere in a
 * row makes it NaN (inf - inf); a row that is entirely -inf is NaN (-inf - -inf); -inf entries of
 * a row with a finite maximum give exactly +0 (softmax) and -inf (log-softmax). Entries more than
 * about 104 below the maximum give +0 (gradual underflow through the subnormals from about 87
 * below). cols == 1 gives 1 (softmax) and +0 (log-softmax) for every finite x. Every zero forward
 * output is +0. Very large finite spreads (x[j] - m below -FLT_MAX) give +0 / -inf. */
#ifndef TLRT_SOFTMAX_H
#define TLRT_SOFTMAX_H

#include "tlrt_buffer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Softmax of each row of the row-major (rows, cols) x: y[j] = e[j] / s (DEFINITIONS above).
 * out has rows * cols elements, every row in [0, 1]. */
TLRT_API tlrt_status tlrt_softmax(const tlrt_buffer *x, uint64_t rows, uint64_t cols,
                                  tlrt_buffer **out);

/* Log-softmax of each row: y[j] = (x[j] - m) - log(s) (DEFINITIONS above); out has rows * cols
 * elements. Computed directly from the shifted scores, never as log(softmax) (no log(0) = -inf for
 * entries whose softmax underflows: they keep their finite value x[j] - m - log(s)). */
TLRT_API tlrt_status tlrt_log_softmax(const tlrt_buffer *x, uint64_t rows, uint64_t cols,
                                      tlrt_buffer **out);

/* Gradient of softmax: given the forward OUTPUT y and the upstream gradient g (both rows * cols),
 *   dot = S(g[j] * y[j]) per row (products rounded, then the tree),
 *   dx[j] = y[j] * (g[j] - dot).
 * Any y is accepted (it is not checked to be a softmax output). A NaN in y or g, or an infinite
 * g[j] where y[j] = 0 (0 * inf), makes the row's dot NaN and so the whole row of dx NaN.
 * This is also the backward of tlrt_hard_masked_softmax_by_row (see there).
 * Numeric class: ordered reduction (no transcendental function); bitwise identical on CPU and
 * CUDA. Accuracy (tests/unit/test_softmax.cpp, against float64 on the same float32 y and g):
 * |dx[j] - ref| <= u * y[j] * (3 |g[j] - dot| + (24 L + 1) * sum_i |g[i] y[i]|), measured <= 0.69
 * of it.
 * Errors: TLRT_ERR_SHAPE (y not rows * cols, or g a different size than y). */
TLRT_API tlrt_status tlrt_softmax_bwd(const tlrt_buffer *y, const tlrt_buffer *g, uint64_t rows,
                                      uint64_t cols, tlrt_buffer **out);

/* Gradient of log-softmax: given the forward OUTPUT y and the upstream gradient g,
 *   sg = S(g[j]) per row (the tree),
 *   dx[j] = fma(-exp(y[j]), sg, g[j])   (g[j] - exp(y[j]) * sg rounded once).
 * A NaN in g makes the whole row NaN (through sg); a NaN in y[j] only dx[j]. y[j] = -inf (an entry
 * whose probability is 0) gives dx[j] = g[j] - 0 * sg, i.e. g[j] when sg is finite.
 * Numeric class: shared math + ordered reduction; bitwise identical on CPU and CUDA. Accuracy
 * (same test): |dx[j] - ref| <= u * (2 |ref| + exp(y[j]) * (2 |sg| + 24 L * sum_i |g[i]|)),
 * measured <= 0.5 of it.
 * Errors: TLRT_ERR_SHAPE (y not rows * cols, or g a different size than y). */
TLRT_API tlrt_status tlrt_log_softmax_bwd(const tlrt_buffer *y, const tlrt_buffer *g,
                                          uint64_t rows, uint64_t cols, tlrt_buffer **out);

/* Hard-masked softmax of each row (upstream's B_hard_masked_softmax_by_row, attention with a
 * boolean mask). mask has rows * cols elements (float32); entry j is ALLOWED when mask[j] != 0 (a
 * NaN mask value counts as allowed, as upstream; +0 and -0 block). Per row:
 *   m    = max over ALLOWED j of x[j]      (blocked entries take no part, even NaN ones)
 *   e[j] = exp(x[j] - m) if allowed, +0 if blocked
 *   s    = S(e)                            (the tree over all cols entries, blocked ones as +0)
 *   y[j] = e[j] / s if allowed, exactly +0 if blocked.
 * A row whose entries are all blocked, or whose allowed scores are all -inf (m = -inf), gives +0
 * everywhere: no NaN and no finite sentinel (upstream's -1000 fill is not used). Otherwise the
 * special values of the DEFINITIONS apply to the allowed entries (a NaN or +inf allowed score makes
 * the row's allowed entries NaN; blocked entries stay +0). An unmasked row (all allowed) gives
 * exactly tlrt_softmax's values.
 * Backward: tlrt_softmax_bwd applied to this function's output y and the upstream gradient is the
 * gradient with respect to x: blocked entries have y[j] = +0, so their gradient is
 * y[j] * (g[j] - dot) = 0 (+-0; NaN only if g[j] or the row's dot is not finite), and the allowed
 * entries get the softmax gradient over the allowed set. No gradient flows to the mask.
 * Numeric class: shared math + ordered reduction; bitwise identical on CPU and CUDA; accuracy as
 * tlrt_softmax over the allowed entries.
 * Errors: TLRT_ERR_SHAPE (x not rows * cols, or mask a different size than x). */
TLRT_API tlrt_status tlrt_hard_masked_softmax_by_row(const tlrt_buffer *x, const tlrt_buffer *mask,
                                                     uint64_t rows, uint64_t cols,
                                                     tlrt_buffer **out);

#ifdef __cplusplus
}
#endif

#endif /* TLRT_SOFTMAX_H */
