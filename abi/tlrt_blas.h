/* libtorchlean_rt: matrix products.
 *
 * Batched and plain products of row-major float32 matrices, each operand optionally used
 * transposed, and a float64 product of host arrays. The buffer functions return a fresh buffer
 * on the device of their inputs.
 *
 * Layout. Every matrix is row-major: element (i, j) of an (r, c) matrix is at i * c + j. A batch
 * is a row-major (batch, r, c) array: matrix q starts at q * r * c. The product is stated on
 * LOGICAL operands A (m, n) and B (n, p); a transpose flag says that the operand is STORED
 * transposed: trans_a means A is stored as (n, m), so A(i, k) = a[k * m + i]; trans_b means B is
 * stored as (p, n), so B(k, j) = b[j * n + k]. The element count of an operand is the same either
 * way. (This is PyTorch's a.mT @ b for trans_a; upstream's bmm_with_transpose flags.)
 *
 * Numeric class: library (DESIGN section 4). The backends use different summation orders, so
 * results are NOT bitwise identical between CPU and CUDA (nor between the CPU kernels of different
 * instruction sets); each is within a stated bound of the exact product and tested against a
 * float64 reference, with S(i, j) = sum_k |A(i, k)| |B(k, j)| and u = 2^-24:
 *   |C(i, j) - exact(i, j)| <= 2 n u S(i, j)
 * in float32 math (the default on both backends), while no intermediate overflows or underflows
 * into subnormals; (2^-9 + 2 n u) S(i, j) on CUDA when TF32 is allowed (below). Measured, as the
 * largest |C - exact| / (n u S) over the unit and parity test shapes (inputs uniform in [-1, 1),
 * in [0, 1) and of wide exponents): CPU up to 1.0 for n <= 3 (one or two roundings of a single
 * product) and 0.07 for n >= 256 (rounding errors of a long sum mostly cancel); CUDA: printed by
 * the parity test, within the bound on the H100 runs of 2026-11-22.
 *   CPU backend: the project's own cache-blocked kernel (no system BLAS is linked, so
 *   tlrt_build_info reports "cpu blas: builtin"): float32 fused multiply-adds in increasing k
 *   within slices of 512, the slice sums added in order (or, for a stored-transposed b with few
 *   rows, dot products over vector lanes); single-threaded; no dimension limit.
 *   CUDA backend: cuBLAS (cublasSgemmStridedBatched; cublasSgemm when batch == 1) on the library
 *   stream. cuBLAS is column-major, so the row-major product C = A B is computed as the
 *   column-major product C^T = B^T A^T: a row-major (r, c) array IS the column-major (c, r)
 *   matrix of its transpose. cuBLAS is called with (transa, transb) = (trans_b ? T : N,
 *   trans_a ? T : N), (m', n', k) = (p, m, n), first operand b with leading dimension
 *   (trans_b ? n : p), second operand a with leading dimension (trans_a ? m : n), ldc = p,
 *   strides n * p, m * n, m * p, alpha = 1, beta = 0. cuBLAS takes int dimensions: on CUDA, m, n
 *   and p must each be <= INT_MAX (2147483647) whenever there is work to do (a non-empty output
 *   and n >= 1), or the call fails with TLRT_ERR_INVALID_ARGUMENT; the batch has no such limit
 *   (batches beyond INT_MAX are split into several cuBLAS calls). The CPU has no such limit.
 *   One cuBLAS handle per (host thread, device), created on first use, bound to the library
 *   stream, destroyed when the thread exits (see cuda/blas.cu).
 *
 * Special values: on the CPU, NaN and infinities propagate as in IEEE arithmetic: every product
 * A(i, k) B(k, j) takes part, so a NaN in row i of A or in column j of B makes C(i, j) NaN, and an
 * infinity there meets the zeros of the other operand: 0 * inf is NaN (no zero is skipped, as
 * some BLAS implementations do). On CUDA the parity test checks that the NaN and infinity
 * positions of both backends are identical (passed on an H100, 2026-11-22). The sign of a zero result is
 * unspecified (the CPU gives -0 when every product is -0, +0 when any is +0; cuBLAS may differ).
 * Subnormal inputs and results are kept on the CPU (no flush to zero).
 *
 * Errors, for the buffer functions: TLRT_ERR_NULL_ARGUMENT (a, b or out is NULL);
 * TLRT_ERR_RELEASED (the storage of a or b was released); TLRT_ERR_DEVICE_MISMATCH (a and b on
 * different devices); TLRT_ERR_SHAPE (a does not have batch * m * n elements, or b does not have
 * batch * n * p, the products computed exactly, so a product beyond 64 bits never matches; the
 * message names the argument); TLRT_ERR_OVERFLOW (the output would have more than
 * TLRT_MAX_ELEMENTS elements); TLRT_ERR_INVALID_ARGUMENT (the cuBLAS int limit above);
 * TLRT_ERR_OUT_OF_MEMORY; TLRT_ERR_LIBRARY (cuBLAS reported an error; the message has its status
 * name, e.g. CUBLAS_STATUS_NOT_SUPPORTED); TLRT_ERR_CUDA; TLRT_ERR_DEVICE_LOST. On failure every
 * out-parameter is NULL. */
#ifndef TLRT_BLAS_H
#define TLRT_BLAS_H

#include "tlrt_buffer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Batched product: for every q < batch, out_q (m, p) = A_q (m, n) * B_q (n, p), with A_q the
 * q-th matrix of a and B_q the q-th matrix of b, each stored transposed when its flag is true
 * (see Layout above): a has batch * m * n elements, stored as (batch, m, n), or (batch, n, m) when
 * trans_a; b has batch * n * p elements, stored as (batch, n, p), or (batch, p, n) when trans_b.
 * out is (batch, m, p) row-major: out[q * m * p + i * p + j] = sum_k A_q(i, k) B_q(k, j).
 * Edge cases: batch, m or p == 0 gives an empty buffer (a and b must still have the stated sizes,
 * 0 when a factor is 0); n == 0 (an empty sum) gives batch * m * p zeros (+0), whatever the
 * device. The flags are C bool (an integer argument converts to true when non-zero). Numeric
 * class: library (above). */
TLRT_API tlrt_status tlrt_bmm(const tlrt_buffer *a, const tlrt_buffer *b, uint64_t batch,
                              uint64_t m, uint64_t n, uint64_t p, bool trans_a, bool trans_b,
                              tlrt_buffer **out);

/* Plain product: tlrt_bmm with batch = 1. a has m * n elements ((m, n), or (n, m) stored when
 * trans_a), b has n * p ((n, p), or (p, n) when trans_b); out is (m, p). m or p == 0 gives an
 * empty buffer; n == 0 gives m * p zeros. A matrix-vector product is p = 1 (b a column). */
TLRT_API tlrt_status tlrt_matmul(const tlrt_buffer *a, const tlrt_buffer *b, uint64_t m,
                                 uint64_t n, uint64_t p, bool trans_a, bool trans_b,
                                 tlrt_buffer **out);

/* Activations of a linear layer (tlrt_linear_fwd, tlrt_linear_bwd). */
#define TLRT_ACT_NONE 0u /* the identity: y = pre */
#define TLRT_ACT_GELU 1u /* tlrt_gelu (abi/tlrt_elementwise.h): GELU's tanh approximation */

/* A linear layer in PyTorch's nn.Linear layout, with its bias and activation fused into the
 * product; in = in_features, out = out_features below. x (rows, in), w (out, in) (one row per
 * output feature), b (out) or NULL for no bias;
 *   pre(i, j) = sum_k x(i, k) w(j, k) + b(j)        (rows, out)
 *   y(i, j)   = act(pre(i, j))                      (rows, out)
 * *y is a fresh buffer. pre is what the backward of a GELU reads: when `pre` is not NULL, *pre
 * receives it as a fresh buffer (with TLRT_ACT_NONE, a second reference to *y's buffer, since the
 * two are equal); pass NULL when only y is wanted.
 * Numerics: the sum is tlrt_matmul(x, w, rows, in, out, false, true)'s, with its class (library)
 * and bound; b(j) is then added once in float32, so |pre - exact| <= 2 in u S(i, j) + u |pre|
 * with S(i, j) = sum_k |x(i, k) w(j, k)| + |b(j)|.
 * The activation is applied to pre with tlrt_gelu's shared math: y is bitwise tlrt_gelu(pre) on
 * both backends. TF32 (tlrt_set_allow_tf32) applies as to tlrt_matmul.
 * Edge cases: rows or out == 0 gives empty buffers; in == 0 (an empty sum) gives pre(i, j) =
 * b(j), or +0 without a bias. NaN and infinities propagate as for tlrt_matmul.
 * Errors: TLRT_ERR_NULL_ARGUMENT (x, w or y is NULL); TLRT_ERR_RELEASED (the storage of x, w or b
 * was released); TLRT_ERR_DEVICE_MISMATCH (x, w, b not all on one device); TLRT_ERR_SHAPE (x does
 * not have rows * in elements, w out * in, b out; products computed exactly; the message names
 * the argument); TLRT_ERR_OVERFLOW (rows * out beyond TLRT_MAX_ELEMENTS); TLRT_ERR_INVALID_ARGUMENT
 * (activation not a TLRT_ACT_* value; on CUDA, rows, in or out beyond INT_MAX with work to do, as
 * tlrt_matmul); TLRT_ERR_OUT_OF_MEMORY; TLRT_ERR_LIBRARY; TLRT_ERR_CUDA; TLRT_ERR_DEVICE_LOST. On
 * failure *y and *pre are NULL. Numeric class: library (the product), shared math (the
 * activation). */
TLRT_API tlrt_status tlrt_linear_fwd(const tlrt_buffer *x, const tlrt_buffer *w,
                                     const tlrt_buffer *b, uint64_t rows, uint64_t in_features,
                                     uint64_t out_features, uint32_t activation, tlrt_buffer **y,
                                     tlrt_buffer **pre);

/* The backward of tlrt_linear_fwd (in, out as there): given dy (rows, out), the gradient of the
 * loss with respect to y, and the forward's x, w and pre,
 *   dpre = dy                            (TLRT_ACT_NONE; pre is not read and may be NULL)
 *   dpre = tlrt_gelu_bwd(pre, dy)        (TLRT_ACT_GELU; bitwise that call's result)
 *   dx (rows, in) = dpre w               (tlrt_matmul(dpre, w, rows, out, in, false, false))
 *   dw (out, in)  = dpre^T x             (tlrt_matmul(dpre, x, out, rows, in, true, false))
 *   db (out)      = the column sums of dpre over its rows
 * Each of dx, dw, db may be NULL: that gradient is not computed (a layer without bias passes
 * db = NULL; a first layer, dx = NULL); each non-NULL one receives a fresh buffer.
 * Numerics: dx and dw have tlrt_matmul's class and bound. db: on the CPU, and on CUDA when dw
 * is NULL, tlrt_reduce_sum_axis0(dpre)'s ordered tree over the rows (bitwise that call's
 * result); on CUDA with dw requested, the sum cuBLASLt forms while it streams dpre for dw (its
 * order, library class). Either way within 2 rows u sum_i |dpre(i, j)| of the exact sum.
 * Edge cases: rows == 0 gives dw and db of zeros (+0); out == 0 gives dx of zeros; in == 0 gives
 * empty dx and dw, and db as above.
 * Errors: TLRT_ERR_NULL_ARGUMENT (dy, x or w NULL; pre NULL with TLRT_ACT_GELU);
 * TLRT_ERR_RELEASED; TLRT_ERR_DEVICE_MISMATCH (dy, x, w, pre not all on one device);
 * TLRT_ERR_SHAPE (dy or pre not rows * out elements, x not rows * in, w not out * in);
 * TLRT_ERR_INVALID_ARGUMENT (activation, the CUDA int limit); TLRT_ERR_OUT_OF_MEMORY;
 * TLRT_ERR_LIBRARY; TLRT_ERR_CUDA; TLRT_ERR_DEVICE_LOST. On failure every out-parameter is NULL.
 * Numeric class: library (the products; db on CUDA with dw), shared math + ordered reduction
 * (dpre; db otherwise). */
TLRT_API tlrt_status tlrt_linear_bwd(const tlrt_buffer *dy, const tlrt_buffer *x,
                                     const tlrt_buffer *w, const tlrt_buffer *pre, uint64_t rows,
                                     uint64_t in_features, uint64_t out_features,
                                     uint32_t activation, tlrt_buffer **dx, tlrt_buffer **dw,
                                     tlrt_buffer **db);

/* Float64 product of host arrays (the seeds' torchlean_dgemm_cuda): c (m, p) = a (m, n) *
 * b (n, p), all row-major, no transposes; c is the caller's array of m * p doubles, overwritten.
 * Host-only: it runs on the CPU whatever devices exist (the arguments are host arrays; upstream
 * copied them to the GPU and back on every call, three allocations and three copies for one
 * product), with the blocked kernel of the CPU backend in float64 (fused multiply-adds, the same
 * order as above), single-threaded: there is no device argument, so no cuBLAS. Error bound:
 * 2 n u64 * sum_k |a(i, k)| |b(k, j)| with u64 = 2^-53 (measured: up to 0.8 n u64 on the unit
 * test's shapes, the largest for n = 3).
 * Edge cases: m or p == 0 writes nothing; n == 0 writes m * p zeros (+0). a, b and c may be NULL
 * only when the array they describe is empty (m * n, n * p, m * p elements). NaN and infinities
 * propagate as for the float32 CPU product.
 * Errors: TLRT_ERR_NULL_ARGUMENT (a NULL array that is not empty); TLRT_ERR_OVERFLOW (m * n,
 * n * p or m * p beyond TLRT_MAX_ELEMENTS, products computed exactly); TLRT_ERR_INVALID_ARGUMENT
 * (c overlaps a or b); TLRT_ERR_OUT_OF_MEMORY (host scratch for the packed panels). c is not
 * written on failure. */
TLRT_API tlrt_status tlrt_dgemm(const double *a, const double *b, uint64_t m, uint64_t n,
                                uint64_t p, double *c);

/* TF32 opt-in for the float32 products on CUDA (tlrt_bmm, tlrt_matmul). Off by default: cuBLAS
 * runs in CUBLAS_DEFAULT_MATH, float32 multiplies and adds. When on, cuBLAS runs in
 * CUBLAS_TF32_TENSOR_OP_MATH and may round the inputs to TF32 (10 explicit mantissa bits) inside
 * tensor cores, several times faster on Ampere and later GPUs, with the error bound stated above
 * (2^-9 + 2 n u). The CPU backend always computes in float32 and ignores the switch. The initial
 * value comes from the environment variable TORCHLEAN_RT_ALLOW_TF32, read once, with the rule of
 * TORCHLEAN_RT_DETERMINISTIC: unset, "", "0", "false", "off" or "no" (any case) mean off; "1",
 * "true", "on", "yes" or any other value mean on. The flag is process-wide and atomic; a call
 * already queued keeps the mode it was queued with. tlrt_set_allow_tf32 returns the previous
 * value. */
TLRT_API bool tlrt_set_allow_tf32(bool on);
TLRT_API bool tlrt_get_allow_tf32(void);

#ifdef __cplusplus
}
#endif

#endif /* TLRT_BLAS_H */
