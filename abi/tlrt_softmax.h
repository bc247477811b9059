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

/* ---- cross-entropy over the rows of a logits matrix ------------------------------------------
 * PyTorch's F.cross_entropy(logits, labels, ignore_index=ignore_index, reduction='mean') for
 * row-major (rows, classes) logits, fused: the forward reads the logits once (CUDA: up to 65536
 * classes, the row held in registers; longer rows twice, and the CPU reads each block of rows
 * twice from cache) and keeps no (rows, classes) array; the backward reads the logits once and
 * writes the gradient once. labels is an index buffer (int32 or int64,
 * rows elements, on the device of the logits: abi/tlrt_index.h), read on the device only: no call
 * here waits for the device, and the loss's denominator is counted on the device.
 *
 * LABELS. For row r with label l = labels[r] (compared as int64 values):
 *  - IGNORED when l == ignore_index (tested first; ignore_index may be any int, also one in
 *    [0, classes), which then ignores that class, as PyTorch; an int64 label beyond the int
 *    range is never ignored). TLRT_CROSS_ENTROPY_NO_IGNORE
 *    (INT_MIN, the one int value no label is compared with) ignores nothing: every row is
 *    counted, and a label of that value is a fault like any other negative label;
 *  - COUNTED otherwise. A counted label in [0, classes) is VALID; any other counted label is a
 *    FAULT, the convention of tlrt_index_flat_rows / tlrt_tape_cross_entropy_ibuf: the row
 *    contributes 0 to the sum, IS counted in the denominator, has a zero gradient row (below),
 *    and adds one to the device's counter that tlrt_index_faults reads (counted by the forward
 *    only; the backward counts nothing).
 *
 * DEFINITIONS (the operations of the composite tlrt_tape_cross_entropy_ibuf recorded before the
 * fused node, bit for bit; m, s, log as in the DEFINITIONS above, u = 2^-24):
 *   m[r], s[r]    the row maximum and THE TREE sum of exp(x[r, j] - m[r]) of tlrt_log_softmax
 *   ls[r]         = log(s[r])
 *   p[r]          = (x[r, l] - m[r]) - ls[r] for a valid row (tlrt_log_softmax's value at the
 *                   label), +0 for ignored and faulted rows
 *   n             = the number of counted rows (an integer, exact), N = (float)n (rounded)
 *   loss          = -(P / N), P = THE TREE sum of p[0], ..., p[rows-1] (one IEEE division, as
 *                   tlrt_reduce_mean; N == 1 gives P itself)
 * The forward's `lse` is the per-row log-sum-exp kept UNROUNDED as its two parts: a fresh buffer
 * of 2 * rows floats, lse[2 r] = m[r], lse[2 r + 1] = ls[r] (log-sum-exp = m + ls); the backward
 * needs both parts to reproduce tlrt_log_softmax's values bitwise, and one float per row cannot
 * hold them. All rows ignored (n = 0) gives loss = NaN (0 / 0, as PyTorch); rows == 0 as well.
 *
 * Backward, with g = grad_loss[0] and k = (float)(1 / (double)n) (0 when n == 0):
 *   c      = ((-g) * k) + 0        the gradient each counted row's pick receives (+0 for -0)
 *   y[j]   = (x[r, j] - m[r]) - ls[r]                 (tlrt_log_softmax's value)
 *   valid rows:             dx[r, j] = fma(-exp(y[j]), c, j == l ? c : +0)
 *   ignored, faulted rows:  dx[r, j] = fma(-exp(y[j]), +0, +0) = +0 for every finite y[j]
 * i.e. g * (softmax - onehot) / n, each entry rounded once (exp(y) aside). As in PyTorch (whose
 * ignored rows go through log_softmax's backward too), an ignored or faulted row whose logits hold
 * a NaN or +inf gets NaN there, not 0.
 *
 * NUMERIC CLASS: shared math + ordered reduction: bitwise identical on CPU and CUDA, in both modes
 * of tlrt_set_deterministic (no floating-point atomics anywhere; the fault counter is an integer),
 * and bitwise identical to log_softmax + gather + mean + neg (tests/grad/test_grad_index.cpp).
 * ACCURACY (tests/unit/test_cross_entropy.cpp against float64 on the same float32 inputs, L the
 * tree levels of a row, L' those of the rows): each p[r] carries tlrt_log_softmax's error bound
 * above; |loss - loss64| <= (23 L' + 1) u * (sum |p[r]|) / n + max_r err(p[r]) + u |loss64|.
 * The gradient entries, ref = g (softmax - onehot) / n in float64: |dx - ref| <= u * |g / n| *
 * (2 |x - m| + 3 ln(s) + ln(classes) + 23 L + 6) * softmax + 2 u |ref| (the error of y through
 * exp, the rounding of 1 / n to float and the fma's); measured <= 0.62 of it (rows of 7 to
 * 2^17 + 3 classes, logits uniform in [-1, 1] and [-16, 16]), the loss <= 0.05 of its bound.
 *
 * SPECIAL VALUES: a NaN or +inf logit makes its row's p NaN when the row is valid (so the loss
 * NaN); an ignored or faulted row's logits never reach the loss (its p is +0 whatever they are).
 * classes == 1: p = +0 for a valid row (log-softmax of one finite value), so the loss is -0 / N
 * = -0 when every row is valid. rows == 0: loss NaN, lse empty. classes == 0 (rows > 0): every
 * counted label is a fault, lse[r] = (-inf, -inf).
 *
 * Errors (checked in this order): TLRT_ERR_NULL_ARGUMENT (an input, or loss / lse / dlogits);
 * TLRT_ERR_STALE_HANDLE; TLRT_ERR_RELEASED; TLRT_ERR_DTYPE (labels not int32 / int64, naming
 * labels; logits, lse or grad_loss not float32); TLRT_ERR_DEVICE_MISMATCH (an input on another
 * device than logits); TLRT_ERR_SHAPE (logits not rows * classes elements, exactly; labels not
 * rows elements; lse not 2 * rows; grad_loss not 1 element); then TLRT_ERR_OUT_OF_MEMORY;
 * TLRT_ERR_CUDA; TLRT_ERR_DEVICE_LOST. On failure every out-parameter is NULL and nothing
 * leaks. */

/* The ignore_index that ignores nothing (every label is counted; INT_MIN). PyTorch's default
 * ignore_index is -100: pass -100 for PyTorch's default behaviour. */
#define TLRT_CROSS_ENTROPY_NO_IGNORE (-2147483647 - 1)

/* Forward: *loss a fresh 1-element buffer (the mean above), *lse a fresh buffer of 2 * rows floats
 * (m, log s per row) for the backward. */
TLRT_API tlrt_status tlrt_cross_entropy_fwd(const tlrt_buffer *logits, const tlrt_buffer *labels,
                                            uint64_t rows, uint64_t classes,
                                            int ignore_index, tlrt_buffer **loss,
                                            tlrt_buffer **lse);

/* Backward: *dlogits a fresh buffer of rows * classes floats (the formulas above), from the
 * forward's logits, labels, ignore_index and lse, and the loss's gradient grad_loss (1 element,
 * on the device: nothing is read on the host). rows * classes == 0 gives an empty buffer. */
TLRT_API tlrt_status tlrt_cross_entropy_bwd(const tlrt_buffer *logits, const tlrt_buffer *labels,
                                            const tlrt_buffer *lse, const tlrt_buffer *grad_loss,
                                            uint64_t rows, uint64_t classes,
                                            int ignore_index, tlrt_buffer **dlogits);

#ifdef __cplusplus
}
#endif

#endif /* TLRT_SOFTMAX_H */
