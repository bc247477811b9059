/* libtorchlean_rt: selective scan (the diagonal linear recurrence of state-space models), forward
 * and backward, with per-channel coefficients (diag) or token-dependent ones (diag_var).
 *
 * LAYOUT. seq_len = T time steps, state = D channels. X, out and dY are row-major (T, D): element
 * (t, j) at t * D + j. diag: A, B and h0 have D elements. diag_var: A and B are (T, D) like X, h0
 * has D elements. Below A_t[j] means A[j] (diag) or A[t * D + j] (diag_var), likewise B_t.
 * Every output is a fresh buffer on the device of the inputs.
 *
 * WHAT IS COMPUTED. The recurrence, per channel j, for t = 0 .. T-1:
 *   h_t = A_t * h_{t-1} + B_t * X_t,   h_{-1} = h0,   out[t] = h_t.
 * Its adjoint for an upstream gradient dY of out (the loss's derivative with respect to out):
 *   g_{T-1} = dY_{T-1},   g_t = dY_t + A_{t+1} * g_{t+1},
 *   dX_t = B_t * g_t,   dB_t = X_t * g_t,   dA_t = h_{t-1} * g_t (h_{-1} = h0, h_t = out[t]),
 *   dH0 = A_0 * g_0;
 * diag sums dA_t and dB_t over t (THE TREE of abi/tlrt_reduce.h over t = 0 .. T-1 in order, per
 * channel), diag_var returns them per step.
 *
 * DEFINITIONS (the order of operations both backends follow; L = TLRT_SCAN_CHUNK = 64). Time is cut
 * into chunks c = 0 .. C-1, C = ceil(T / L), chunk c holding t = cL .. e_c, e_c = min(cL + L, T) - 1.
 * Every operation below is one IEEE binary32 operation in round-to-nearest-even, evaluated as
 * written (no contraction, no fused multiply-add).
 * Forward, in chunk c with carry-in k_c (k_0 = h0):
 *   l_t = B_t * X_t                   (t = cL),    l_t = A_t * l_{t-1} + B_t * X_t   (t > cL)
 *   P_t = A_t                         (t = cL),    P_t = P_{t-1} * A_t               (t > cL)
 *   h_t = l_t + P_t * k_c,            k_{c+1} = h_{e_c}.
 * (l is the chunk's state from a zero start, P the running product of A inside the chunk; the
 * carries k_c are a sequential scan over chunks.)
 * Backward, in chunk c from the end, with carry-in q_c = A_{e_c + 1} * g_{e_c + 1} for c < C-1:
 *   m_t = dY_t                        (t = e_c),   m_t = A_{t+1} * m_{t+1} + dY_t    (t < e_c)
 *   Q_t = 1                           (t = e_c),   Q_t = A_{t+1} * Q_{t+1}           (t < e_c)
 *   g_t = m_t + Q_t * q_c  (c < C-1), g_t = m_t  (c = C-1, the last chunk has no carry),
 *   q_{c-1} = A_{cL} * g_{cL}.
 * The gradient formulas above are then single products of the computed g (and out, h0, X, B).
 *
 * NUMERIC CLASS: ordered. The CPU and CUDA backends perform exactly these operations in this order
 * (and THE TREE for the sums of diag_bwd): results are bitwise identical across backends and runs
 * (the parity suite compares bits; NaN payloads are unspecified). tlrt_set_deterministic changes
 * nothing here. The results are NOT bitwise those of a plain sequential loop (the chunked order
 * rounds differently); they are within the bounds below of the exact recurrence.
 *
 * ACCURACY against the exact recurrence on the same float32 inputs (tests/unit/test_scan.cpp
 * asserts these against a float64 sequential evaluation; u = 2^-24, g_n = n u / (1 - n u)):
 *   |out[t] - h_t| <= g_{n(t)} H_t,   n(t) = 2L + 1 + (L + 1) floor(t / L)   (~1.02 t + 129),
 *   H_t = sum_{s <= t} |A_{s+1} ... A_t| |B_s X_s| + |A_0 ... A_t| |h0|  (a sum of magnitudes).
 *   The adjoint: |g_t - g_t exact| <= g_{m(t)} G_t, m(t) = 2L + 1 + (L + 1)(C - 1 - floor(t / L)),
 *   G_t = sum_{s >= t} |A_{t+1} ... A_s| |dY_s|; each gradient adds one rounding (dX, dH0, and
 *   diag_var's dA, dB) or THE TREE's 24 roundings per level over T (diag's dA, dB, with levels =
 *   1 for T <= 4096, 2 up to 2^24): |dB - dB exact| <= g_{M + 1 + 24 levels} sum_t |X_t| G_t with
 *   M the largest m(t); likewise dA with |h_{t-1}| (out as given) in place of |X_t|.
 *   These hold while no intermediate result overflows or falls below 2^-126; a subnormal
 *   intermediate adds an absolute error of at most 2^-150 times the magnitudes that later multiply
 *   it. When |A| > 1 the recurrence itself is ill-conditioned: H_t grows like |A|^t and the bound,
 *   relative to H_t, stays small while relative to |h_t| it need not (cancellation), as for any
 *   evaluation order.
 *
 * SPECIAL VALUES. NaN propagates along the recurrence: a NaN in X_s, B_s or A_s (or h0) makes out
 * NaN from step s on in that channel (every later chunk's carry is NaN); +-inf likewise gives
 * +-inf or NaN from then on. Because of the chunked order, an overflow or an infinity can produce
 * NaN where a sequential loop would keep +-inf or a finite value: P_t * k_c with P_t = +-inf and
 * k_c = 0 (e.g. |A| >= 10 over a chunk with h0 = 0) is NaN. A_t = 0 resets the state (h_t =
 * B_t X_t exactly as a sequential loop gives, up to the sign of zero).
 *
 * EMPTY. T = 0: the forwards return an empty out; the backwards return dA, dB (diag: D elements;
 * diag_var: empty), dH0 all +0 (a sum over no steps) and an empty dX. D = 0: every output empty.
 * Upstream returned uninitialised device memory for dA, dB, dH0 when T = 0 (its bug 1).
 *
 * COST: O(T D) operations and memory traffic (each (T, D) input read once or twice, each output
 * written once); temporary device memory of at most about twice the size of X, from the device's
 * pool; no host synchronisation. */
#ifndef TLRT_SCAN_H
#define TLRT_SCAN_H

#include "tlrt_buffer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Time steps per chunk in the DEFINITIONS above (part of the numeric contract: changing it changes
 * result bits). */
#define TLRT_SCAN_CHUNK 64

/* Selective scan forward with per-channel coefficients: out[t, j] = h_t[j] of the recurrence
 * h_t = A[j] * h_{t-1} + B[j] * X[t, j], h_{-1} = h0[j] (DEFINITIONS above).
 * Shapes: A, B, h0: state elements; X: seq_len * state (row-major (T, D)); out: seq_len * state.
 * Empty: seq_len == 0 or state == 0 gives an empty out. Numeric class: ordered.
 * Errors: TLRT_ERR_NULL_ARGUMENT (A, B, X, h0, out); TLRT_ERR_RELEASED; TLRT_ERR_DEVICE_MISMATCH
 * (inputs on different devices); TLRT_ERR_SHAPE (X not seq_len * state elements, the product taken
 * exactly, or A, B, h0 not state elements); TLRT_ERR_OUT_OF_MEMORY; TLRT_ERR_CUDA;
 * TLRT_ERR_DEVICE_LOST. On failure *out is NULL. */
TLRT_API tlrt_status tlrt_selective_scan_diag_fwd(const tlrt_buffer *A, const tlrt_buffer *B,
                                                  const tlrt_buffer *X, const tlrt_buffer *h0,
                                                  uint64_t seq_len, uint64_t state,
                                                  tlrt_buffer **out);

/* Backward of tlrt_selective_scan_diag_fwd for the upstream gradient dY of out: dA, dB, dH0
 * (state elements each) and dX (seq_len * state), DEFINITIONS above; dA[j] and dB[j] are THE TREE
 * sums over t of h_{t-1}[j] g_t[j] and X[t, j] g_t[j]. `out` is the forward's output (h_{t-1} is
 * read from it, out[t - 1] for t >= 1 and h0 for t = 0); any values are accepted.
 * Empty: seq_len == 0 gives dA = dB = dH0 = +0 (state elements) and an empty dX; state == 0 gives
 * four empty outputs. Numeric class: ordered.
 * Errors: TLRT_ERR_NULL_ARGUMENT (A, B, X, h0, out, dY, dA, dB, dX, dH0); TLRT_ERR_RELEASED;
 * TLRT_ERR_DEVICE_MISMATCH; TLRT_ERR_SHAPE (X not seq_len * state, the product taken exactly; out
 * or dY not the size of X; A, B, h0 not state elements); TLRT_ERR_OUT_OF_MEMORY; TLRT_ERR_CUDA;
 * TLRT_ERR_DEVICE_LOST. On failure *dA, *dB, *dX and *dH0 are NULL. */
TLRT_API tlrt_status tlrt_selective_scan_diag_bwd(const tlrt_buffer *A, const tlrt_buffer *B,
                                                  const tlrt_buffer *X, const tlrt_buffer *h0,
                                                  const tlrt_buffer *out, const tlrt_buffer *dY,
                                                  uint64_t seq_len, uint64_t state,
                                                  tlrt_buffer **dA, tlrt_buffer **dB,
                                                  tlrt_buffer **dX, tlrt_buffer **dH0);

/* Selective scan forward with token-dependent coefficients: out[t, j] = h_t[j] of
 * h_t = A[t, j] * h_{t-1} + B[t, j] * X[t, j], h_{-1} = h0[j] (DEFINITIONS above).
 * Shapes: A, B, X, out: seq_len * state (row-major (T, D)); h0: state elements.
 * Empty: seq_len == 0 or state == 0 gives an empty out. Numeric class: ordered.
 * Errors: TLRT_ERR_NULL_ARGUMENT (A, B, X, h0, out); TLRT_ERR_RELEASED; TLRT_ERR_DEVICE_MISMATCH;
 * TLRT_ERR_SHAPE (X not seq_len * state elements, the product taken exactly; A or B not the size
 * of X; h0 not state elements); TLRT_ERR_OUT_OF_MEMORY; TLRT_ERR_CUDA; TLRT_ERR_DEVICE_LOST.
 * On failure *out is NULL. */
TLRT_API tlrt_status tlrt_selective_scan_diag_var_fwd(const tlrt_buffer *A, const tlrt_buffer *B,
                                                      const tlrt_buffer *X, const tlrt_buffer *h0,
                                                      uint64_t seq_len, uint64_t state,
                                                      tlrt_buffer **out);

/* Backward of tlrt_selective_scan_diag_var_fwd (new: upstream had none) for the upstream gradient
 * dY of out: dA, dB, dX (seq_len * state each, per step: dA[t, j] = h_{t-1}[j] g_t[j],
 * dB[t, j] = X[t, j] g_t[j], dX[t, j] = B[t, j] g_t[j]) and dH0 (state elements), DEFINITIONS
 * above. `out` is the forward's output, read for h_{t-1}; any values are accepted.
 * Empty: seq_len == 0 gives empty dA, dB, dX and dH0 = +0 (state elements); state == 0 gives four
 * empty outputs. Numeric class: ordered.
 * Errors: TLRT_ERR_NULL_ARGUMENT (A, B, X, h0, out, dY, dA, dB, dX, dH0); TLRT_ERR_RELEASED;
 * TLRT_ERR_DEVICE_MISMATCH; TLRT_ERR_SHAPE (X not seq_len * state, the product taken exactly; A, B,
 * out or dY not the size of X; h0 not state elements); TLRT_ERR_OUT_OF_MEMORY; TLRT_ERR_CUDA;
 * TLRT_ERR_DEVICE_LOST. On failure *dA, *dB, *dX and *dH0 are NULL. */
TLRT_API tlrt_status tlrt_selective_scan_diag_var_bwd(const tlrt_buffer *A, const tlrt_buffer *B,
                                                      const tlrt_buffer *X, const tlrt_buffer *h0,
                                                      const tlrt_buffer *out,
                                                      const tlrt_buffer *dY, uint64_t seq_len,
                                                      uint64_t state, tlrt_buffer **dA,
                                                      tlrt_buffer **dB, tlrt_buffer **dX,
                                                      tlrt_buffer **dH0);

#ifdef __cplusplus
}
#endif

#endif /* TLRT_SCAN_H */
