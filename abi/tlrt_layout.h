/* libtorchlean_rt: layout: concatenation, slices, broadcasts, transposes and permutations.
 *
 * Every function here moves data without computing: each output element is a copy of one input
 * element. Buffers are flat float32 arrays; a function's shape arguments say how the flat array is
 * read, row-major (the last axis varies fastest): a (rows, cols) matrix x has element [i, j] at
 * flat index i * cols + j, an N-D buffer with dims[0..rank) has element [a_0, ..., a_{rank-1}] at
 * ((a_0 * dims[1] + a_1) * dims[2] + ...) + a_{rank-1}. Every output is a fresh row-major buffer
 * on the device of the input(s); empty shapes give empty buffers (no error).
 *
 * Numeric class, for every function here: exact. Every output element is a bit-for-bit copy of
 * one input element: NaN payloads (quiet and signalling bit patterns alike), -0, infinities and
 * subnormals are preserved, and the CPU and CUDA backends give identical bits (the parity suite
 * compares raw bit patterns). The determinism switch changes nothing here.
 *
 * Errors, for every function here: TLRT_ERR_NULL_ARGUMENT (a buffer, array or out pointer is
 * NULL; arrays may be NULL only where their length is 0, as stated); TLRT_ERR_RELEASED (an
 * input's storage was released); TLRT_ERR_SHAPE (the stated shape does not describe the input: its
 * element count differs from the product of the stated dimensions, the product computed exactly,
 * so a product beyond 64 bits never matches; the message names the buffer and the shape
 * arguments); TLRT_ERR_OVERFLOW (the output would have more than TLRT_MAX_ELEMENTS elements, or a
 * count of it is not representable in 64 bits); TLRT_ERR_OUT_OF_MEMORY; TLRT_ERR_CUDA;
 * TLRT_ERR_DEVICE_LOST; plus the codes stated per function. Shape errors are reported before
 * overflow errors. On failure every out-parameter is NULL and nothing is allocated. */
#ifndef TLRT_LAYOUT_H
#define TLRT_LAYOUT_H

#include "tlrt_buffer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- concatenation and slices ----------------------------------------------------------------- */

/* Concatenation of two vectors: out is a followed by b, n + m elements, out[i] = a[i] for i < n and
 * out[n + j] = b[j] for j < m. Either or both may be empty.
 * Errors: TLRT_ERR_SHAPE if n != size of a (naming a and n) or m != size of b (naming b and m);
 * TLRT_ERR_DEVICE_MISMATCH if a and b are on different devices; TLRT_ERR_OVERFLOW if
 * n + m > TLRT_MAX_ELEMENTS (naming n and m; with buffers of at most TLRT_MAX_ELEMENTS elements
 * this needs two inputs of more than 2^59 elements each). */
TLRT_API tlrt_status tlrt_concat1d(const tlrt_buffer *a, const tlrt_buffer *b, uint64_t n,
                                   uint64_t m, tlrt_buffer **out);

/* A contiguous slice of a vector: out = x[start .. start + len), len elements, out[i] =
 * x[start + i]. len == 0 gives an empty buffer (start may then be anything up to n, n included).
 * Errors: TLRT_ERR_SHAPE if n != size of x (naming x and n); TLRT_ERR_INDEX unless
 * start + len <= n, evaluated without overflow (start <= n and len <= n - start; naming start and
 * len). */
TLRT_API tlrt_status tlrt_slice1d(const tlrt_buffer *x, uint64_t n, uint64_t start, uint64_t len,
                                  tlrt_buffer **out);

/* Concatenation along the leading axis: a is a row-major (rows_a, inner) matrix, b is
 * (rows_b, inner); out is (rows_a + rows_b, inner): the rows of a followed by the rows of b (the
 * flat arrays concatenated). Any of rows_a, rows_b, inner may be 0.
 * Errors: TLRT_ERR_SHAPE if rows_a * inner != size of a (naming a, rows_a and inner) or
 * rows_b * inner != size of b (naming b, rows_b and inner); TLRT_ERR_DEVICE_MISMATCH;
 * TLRT_ERR_OVERFLOW if rows_a + rows_b is beyond 64 bits (possible when inner == 0; naming rows_a
 * and rows_b) or the output has more than TLRT_MAX_ELEMENTS elements. */
TLRT_API tlrt_status tlrt_concat_axis0(const tlrt_buffer *a, const tlrt_buffer *b, uint64_t rows_a,
                                       uint64_t rows_b, uint64_t inner, tlrt_buffer **out);

/* Rows start .. start + len of a row-major (rows, inner) matrix x: out is (len, inner),
 * out[i, j] = x[start + i, j]. len == 0 or inner == 0 gives an empty buffer.
 * Errors: TLRT_ERR_SHAPE if rows * inner != size of x (naming x, rows and inner); TLRT_ERR_INDEX
 * unless start + len <= rows, evaluated without overflow (naming start and len). */
TLRT_API tlrt_status tlrt_slice_axis0(const tlrt_buffer *x, uint64_t rows, uint64_t inner,
                                      uint64_t start, uint64_t len, tlrt_buffer **out);

/* ---- broadcasts ------------------------------------------------------------------------------ */

/* A vector repeated as every row: out is a row-major (rows, cols) matrix with out[i, j] = v[j].
 * rows == 0 or cols == 0 gives an empty buffer.
 * Errors: TLRT_ERR_SHAPE if size of v != cols (naming v and cols); TLRT_ERR_OVERFLOW if
 * rows * cols is beyond 64 bits or above TLRT_MAX_ELEMENTS (naming rows and cols). */
TLRT_API tlrt_status tlrt_broadcast_vec_to_rows(const tlrt_buffer *v, uint64_t rows, uint64_t cols,
                                                tlrt_buffer **out);

/* A vector repeated as every column: out is a row-major (rows, cols) matrix with out[i, j] = v[i].
 * rows == 0 or cols == 0 gives an empty buffer.
 * Errors: TLRT_ERR_SHAPE if size of v != rows (naming v and rows); TLRT_ERR_OVERFLOW if
 * rows * cols is beyond 64 bits or above TLRT_MAX_ELEMENTS (naming rows and cols). */
TLRT_API tlrt_status tlrt_broadcast_vec_to_cols(const tlrt_buffer *v, uint64_t rows, uint64_t cols,
                                                tlrt_buffer **out);

/* General broadcast, the forward whose adjoint is tlrt_reduce_from_broadcast (abi/tlrt_reduce.h),
 * with the same axis-map convention and the same validation. x is an array of shape
 * in_dims[0..in_rank); out has shape out_dims[0..out_rank), row-major. axis_map[0..out_rank) says
 * where each output axis comes from: axis_map[j] = 0 marks output axis j as inserted (the input
 * is repeated along it), axis_map[j] = k + 1 says that output axis j reads input axis k (where
 * in_dims[k] == 1 and out_dims[j] > 1 the input is repeated along it). Mapped input axes may
 * appear in any order, so a broadcast may also permute axes. Then
 *   out[b_0, ..., b_{out_rank-1}] = x[a_0, ..., a_{in_rank-1}] with a_k = b_j if axis_map[j] = k + 1
 *   and in_dims[k] == out_dims[j], and a_k = 0 for every input axis of size 1.
 * Rank 0 means a scalar (one element): in_rank == 0 broadcasts x's single element; in_dims,
 * out_dims and axis_map may be NULL when their length is 0. An output with a 0 dimension is empty
 * (then x may be empty too: in_dims[k] = 0 mapped to out_dims[j] = 0).
 * Validation (every violation is an error, unlike upstream, which silently read index 0 of an
 * unmapped axis): both ranks <= 8 (TLRT_ERR_INVALID_ARGUMENT naming in_rank or out_rank);
 * in_dims, out_dims and axis_map non-NULL where their length is not 0 (TLRT_ERR_NULL_ARGUMENT);
 * prod(in_dims) == size of x (TLRT_ERR_SHAPE naming x and in_dims); every axis_map[j] <= in_rank
 * (TLRT_ERR_INDEX naming axis_map); no input axis mapped twice (TLRT_ERR_INVALID_ARGUMENT naming
 * axis_map); a mapped input axis has size 1 or the size of its output axis, and an unmapped input
 * axis has size 1 (TLRT_ERR_SHAPE naming in_dims); prod(out_dims) <= TLRT_MAX_ELEMENTS
 * (TLRT_ERR_OVERFLOW naming out_dims). Checked in that order, after x and out. */
TLRT_API tlrt_status tlrt_broadcast_to(const tlrt_buffer *x, const uint64_t *in_dims,
                                       uint32_t in_rank, const uint64_t *out_dims,
                                       uint32_t out_rank, const uint32_t *axis_map,
                                       tlrt_buffer **out);

/* ---- transposes and permutations ------------------------------------------------------------- */

/* Matrix transpose: x is a row-major (rows, cols) matrix, out is (cols, rows) with
 * out[j, i] = x[i, j]. rows == 1 or cols == 1 is a plain copy; an empty matrix gives an empty
 * buffer.
 * Errors: TLRT_ERR_SHAPE if rows * cols != size of x (naming x, rows and cols). */
TLRT_API tlrt_status tlrt_transpose2d(const tlrt_buffer *x, uint64_t rows, uint64_t cols,
                                      tlrt_buffer **out);

/* Swap of two adjacent axes of a row-major N-D buffer with dims[0..rank): axes depth and depth + 1
 * trade places; out has dims[0..depth), dims[depth + 1], dims[depth], dims[depth + 2..rank) and
 * out[.., a_{depth+1}, a_depth, ..] = x[.., a_depth, a_{depth+1}, ..] (the same as tlrt_permute
 * with the permutation that swaps depth and depth + 1).
 * Errors: TLRT_ERR_INVALID_ARGUMENT unless 2 <= rank <= 8 (naming rank); TLRT_ERR_NULL_ARGUMENT
 * (dims); TLRT_ERR_INDEX unless depth + 1 < rank (naming depth; upstream's tape treated an
 * out-of-range depth as the identity while its kernel required it: we reject it);
 * TLRT_ERR_SHAPE if the product of dims != size of x (naming x and dims). Checked in that order,
 * after x and out. */
TLRT_API tlrt_status tlrt_swap_adjacent_at_depth(const tlrt_buffer *x, const uint64_t *dims,
                                                 uint32_t rank, uint32_t depth,
                                                 tlrt_buffer **out);

/* General axis permutation of a row-major N-D buffer with dims[0..rank): out has dims
 * dims[perm[0]], ..., dims[perm[rank-1]] and out[b] = x[a] with a[perm[i]] = b[i] (output axis i
 * is input axis perm[i]; NumPy's transpose(x, perm) and PyTorch's x.permute(perm).contiguous()).
 * rank 0 is a scalar: x must have one element and out is a copy of it (dims and perm may then be
 * NULL). Any axis may have size 0 (empty output) or 1.
 * Errors: TLRT_ERR_INVALID_ARGUMENT if rank > 8 (naming rank); TLRT_ERR_NULL_ARGUMENT (dims or
 * perm, when rank > 0); TLRT_ERR_INDEX if an entry of perm is >= rank (naming perm);
 * TLRT_ERR_INVALID_ARGUMENT if an entry of perm is repeated (naming perm; checked after every entry
 * is known to be in range); TLRT_ERR_SHAPE if the product of dims != size of x (naming x and
 * dims). Checked in that order, after x and out. */
TLRT_API tlrt_status tlrt_permute(const tlrt_buffer *x, const uint64_t *dims, uint32_t rank,
                                  const uint32_t *perm, tlrt_buffer **out);

/* The 3-D permutations of upstream's tape. x is a row-major (a, b, c) array.
 *   bca: out is (b, c, a) with out[j, k, i] = x[i, j, k]   (tlrt_permute with perm (1, 2, 0));
 *   cab: out is (c, a, b) with out[k, i, j] = x[i, j, k]   (perm (2, 0, 1));
 *   acb: out is (a, c, b) with out[i, k, j] = x[i, j, k]   (perm (0, 2, 1): the last two axes
 *        swapped, a batch of a transposes).
 * Errors: TLRT_ERR_SHAPE if a * b * c != size of x (naming x, a, b and c). */
TLRT_API tlrt_status tlrt_permute3d_bca(const tlrt_buffer *x, uint64_t a, uint64_t b, uint64_t c,
                                        tlrt_buffer **out);
TLRT_API tlrt_status tlrt_permute3d_cab(const tlrt_buffer *x, uint64_t a, uint64_t b, uint64_t c,
                                        tlrt_buffer **out);
TLRT_API tlrt_status tlrt_permute3d_acb(const tlrt_buffer *x, uint64_t a, uint64_t b, uint64_t c,
                                        tlrt_buffer **out);

#ifdef __cplusplus
}
#endif

#endif /* TLRT_LAYOUT_H */
