/* libtorchlean_rt: reductions.
 *
 * Whole-buffer sum and mean, sum and max over either axis of a row-major (rows, cols) matrix, sum
 * over any axis of an N-D buffer, and the adjoint of broadcasting. Every output is a fresh buffer
 * on the device of the input.
 *
 * Errors, for every function here: TLRT_ERR_NULL_ARGUMENT (a buffer, shape array or out pointer
 * is NULL); TLRT_ERR_RELEASED (the input's storage was released); TLRT_ERR_SHAPE (the stated shape
 * does not describe the input: its element count differs from the product of the dimensions, the
 * product computed exactly, so a product beyond 64 bits never matches); TLRT_ERR_OVERFLOW (the
 * output would have more than TLRT_MAX_ELEMENTS elements); TLRT_ERR_OUT_OF_MEMORY; TLRT_ERR_CUDA;
 * TLRT_ERR_DEVICE_LOST; plus the codes stated per function. On failure every out-parameter is NULL.
 *
 * Numeric class: ordered reduction (DESIGN section 4). Every sum here is the same fixed tree over
 * a sequence, evaluated in float32 with IEEE round-to-nearest additions (no fused operations):
 *
 *   THE TREE. To reduce a sequence v[0], ..., v[m-1] (m >= 1) with an operation op (addition for
 *   sums, the maximum below for max):
 *   1. Split v into chunks of C = 4096 consecutive elements, chunk k being v[4096 k ...], the last
 *      chunk possibly shorter.
 *   2. Within a chunk w[0..len), each of 256 lanes t = 0..255 owns w[t], w[t + 256], ...,
 *      w[t + 15 * 256] (those that exist) and folds them in that order into an accumulator that
 *      starts at the identity e of op: a_t = op(...op(op(e, w[t]), w[t + 256])..., w[t + 3840]).
 *      For sums e = -0.0f, the exact identity of IEEE addition (x + -0 = x for every x, +0
 *      included), so this is the same as starting from the lane's first element, and a lane with no
 *      element holds e. For max, e = -inf.
 *   3. The 256 lane values are combined by pairwise halving: for h = 128, 64, 32, 16, 8, 4, 2, 1
 *      in turn, a_t = op(a_t, a_{t+h}) for every t < h; the chunk's value is a_0.
 *   4. If there was more than one chunk, the chunk values, in chunk order, form a new sequence that
 *      is reduced by the same rule (steps 1-4) until one value remains.
 *   Whatever the shape of the call, each output reduces the input elements that contribute to it
 *   in increasing order of their flat (row-major) index. The tree does not depend on the device,
 *   the run, the thread count or the determinism switch: results are bitwise identical across runs
 *   and between the CPU and CUDA backends (the parity suite checks this), in both modes of
 *   tlrt_set_deterministic, which therefore changes nothing here; the fixed tree is also the fast
 *   path (no backend accumulates with atomics).
 *   Accuracy: a value that passes through L levels of the tree (L = 1 for m <= 4096, 2 for
 *   m <= 2^24, 3 for m <= 2^36, ...) takes part in at most 23 L rounded additions (15 in its lane,
 *   8 halvings), so |computed - exact| <= 23 L u / (1 - 23 L u) * sum |v_i| with u = 2^-24 (while
 *   no intermediate overflows). Example: 1e8 followed by 4095 ones (m = 4096) gives exactly
 *   100004080 (lane 0 absorbs 15 ones into 1e8, the other 4080 ones survive in the lanes);
 *   float32 left-to-right summation gives 1e8, the exact sum is 100004095.
 *
 * Special values: a NaN anywhere in a reduced sequence gives NaN (sum and max; NaN payloads are
 * unspecified); +inf and -inf in one sum give NaN; an overflowing partial sum gives +-inf. Signed
 * zeros follow IEEE addition: a sum whose terms are all -0 is -0; the sum of an EMPTY sequence is
 * defined as +0 (not -0). Max is the IEEE 754-2019 maximum of tlrt_max: NaN-propagating, and
 * -0 < +0. */
#ifndef TLRT_REDUCE_H
#define TLRT_REDUCE_H

#include "tlrt_buffer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Sum of all elements of x with THE TREE above: out has 1 element. An empty x gives +0. */
TLRT_API tlrt_status tlrt_reduce_sum(const tlrt_buffer *x, tlrt_buffer **out);

/* Mean of all elements of x: out has 1 element, S / (float)n with S the tree sum above and n the
 * element count rounded to the nearest float32 (exact for n <= 2^24), one IEEE division, the same
 * on both backends. An empty x gives NaN (0 / 0, upstream's convention). */
TLRT_API tlrt_status tlrt_reduce_mean(const tlrt_buffer *x, tlrt_buffer **out);

/* Column sums of a row-major (rows, cols) matrix: out[j] = sum_i x[i, j] (the tree over
 * i = 0..rows-1). out has cols elements. rows == 0 yields +0 for every column; cols == 0 yields
 * an empty buffer. Errors: TLRT_ERR_SHAPE if rows * cols != size of x. */
TLRT_API tlrt_status tlrt_reduce_sum_axis0(const tlrt_buffer *x, uint64_t rows, uint64_t cols,
                                           tlrt_buffer **out);

/* Row sums of a row-major (rows, cols) matrix: out[i] = sum_j x[i, j]. out has rows elements.
 * cols == 0 yields +0 for every row; rows == 0 yields an empty buffer.
 * Errors: TLRT_ERR_SHAPE if rows * cols != size of x. */
TLRT_API tlrt_status tlrt_reduce_sum_axis1(const tlrt_buffer *x, uint64_t rows, uint64_t cols,
                                           tlrt_buffer **out);

/* Column-wise maximum of a row-major (rows, cols) matrix: out[j] = max_i x[i, j], out has cols
 * elements. A column containing NaN yields NaN. rows == 0 yields -inf for every column (the
 * identity of max; upstream wrote 0 here); cols == 0 yields an empty buffer. Numeric class: exact
 * (max is exact, so the tree's order only matters for which NaN and which zero: -0 < +0).
 * Errors: TLRT_ERR_SHAPE if rows * cols != size of x. */
TLRT_API tlrt_status tlrt_reduce_max_axis0(const tlrt_buffer *x, uint64_t rows, uint64_t cols,
                                           tlrt_buffer **out);

/* Row-wise maximum of a row-major (rows, cols) matrix: out[i] = max_j x[i, j], out has rows
 * elements. A row containing NaN yields NaN. cols == 0 yields -inf for every row (upstream: 0);
 * rows == 0 yields an empty buffer. Numeric class: exact.
 * Errors: TLRT_ERR_SHAPE if rows * cols != size of x. */
TLRT_API tlrt_status tlrt_reduce_max_axis1(const tlrt_buffer *x, uint64_t rows, uint64_t cols,
                                           tlrt_buffer **out);

/* Sum over one axis of a row-major N-D buffer with dimensions dims[0..rank) (outermost first):
 * out has the shape of dims without dims[axis], row-major, and
 * out[a_0, .., a_{axis-1}, a_{axis+1}, ..] = sum_j x[a_0, .., a_{axis-1}, j, a_{axis+1}, ..]
 * (the tree over j = 0..dims[axis]-1). dims[axis] == 0 yields +0 everywhere.
 * Errors: TLRT_ERR_NULL_ARGUMENT (dims); TLRT_ERR_INVALID_ARGUMENT if rank is 0 or greater than 8
 * (a rank-0 buffer has no axis to reduce); TLRT_ERR_INDEX if axis >= rank; TLRT_ERR_SHAPE if the
 * product of dims != size of x. */
TLRT_API tlrt_status tlrt_reduce_sum_axis(const tlrt_buffer *x, const uint64_t *dims,
                                          uint32_t rank, uint32_t axis, tlrt_buffer **out);

/* The adjoint of broadcasting (reduce a broadcast gradient back to the input's shape).
 * The broadcast it undoes maps an input of shape in_dims[0..in_rank) to an output of shape
 * out_dims[0..out_rank) through axis_map[0..out_rank): axis_map[j] = 0 marks output axis j as
 * inserted (every input element is repeated along it), and axis_map[j] = k + 1 says that output
 * axis j reads input axis k (where in_dims[k] == 1 and out_dims[j] > 1, the input is repeated
 * along it). So output element b comes from the input element a with a_k = b_j if
 * axis_map[j] = k + 1 and in_dims[k] == out_dims[j], and a_k = 0 for every input axis of size 1.
 * Mapped input axes may appear in any order (a permutation is allowed).
 * dout has prod(out_dims) elements; out has prod(in_dims) elements, row-major in in_dims, and
 * out[a] = the tree sum of the dout elements that come from input element a, in increasing
 * order of their flat index in dout. An empty dout yields +0 everywhere. Rank 0 means a scalar
 * (one element); in_dims, out_dims and axis_map may be NULL when their length is 0.
 * Validation (every violation is an error, unlike upstream): both ranks <= 8
 * (TLRT_ERR_INVALID_ARGUMENT, naming in_rank or out_rank); every axis_map[j] <= in_rank
 * (TLRT_ERR_INDEX, naming axis_map); no input axis mapped twice (TLRT_ERR_INVALID_ARGUMENT,
 * naming axis_map); a mapped input axis has size 1 or the size of its output axis, and an
 * unmapped input axis has size 1 (TLRT_ERR_SHAPE, naming in_dims); prod(out_dims) == size of
 * dout (TLRT_ERR_SHAPE, naming dout and out_dims); prod(in_dims) <= TLRT_MAX_ELEMENTS
 * (TLRT_ERR_OVERFLOW, naming in_dims). */
TLRT_API tlrt_status tlrt_reduce_from_broadcast(const tlrt_buffer *dout, const uint64_t *in_dims,
                                                uint32_t in_rank, const uint64_t *out_dims,
                                                uint32_t out_rank, const uint32_t *axis_map,
                                                tlrt_buffer **out);

/* ---- argmax and top-k over rows (greedy and top-k sampling) ------------------------------------
 * The order of both: the total order of float32 values in which every NaN is larger than every
 * other value (NaNs equal to each other), -0 and +0 are equal, and otherwise IEEE's order; equal
 * values go to the LOWER index. This is torch.argmax and torch.topk(sorted=True) on the CPU
 * (NaN is the maximum, the first NaN wins). Numeric class: exact (values are copied, never
 * computed), bitwise identical on both backends (NaN payloads are those of the input).
 * Index outputs are index buffers (abi/tlrt_index.h) of index_dtype TLRT_DTYPE_I32 or
 * TLRT_DTYPE_I64 on the device of x, holding column indices in [0, cols): they feed
 * tlrt_gather_rows_ibuf / tlrt_tape_gather_rows_ibuf (an embedding of the picked tokens) and,
 * through tlrt_index_flat_rows, tlrt_gather_vec_ibuf (the picked logits) directly.
 * Errors (besides those above): TLRT_ERR_SHAPE if rows * cols != size of x; TLRT_ERR_DTYPE if
 * index_dtype is neither TLRT_DTYPE_I32 nor TLRT_DTYPE_I64 (naming index_dtype);
 * TLRT_ERR_OVERFLOW if index_dtype is TLRT_DTYPE_I32 and cols > 2^31 - 1 (an index would not
 * fit). */

/* For each row i of the row-major (rows, cols) float32 matrix x, the column of its maximum in the
 * order above: indices has rows elements. rows == 0 yields an empty buffer.
 * Errors: TLRT_ERR_SHAPE also if cols == 0 and rows > 0 (an empty row has no maximum; torch:
 * "Expected reduction dim to have non-zero size"). */
TLRT_API tlrt_status tlrt_argmax_rows(const tlrt_buffer *x, uint64_t rows, uint64_t cols,
                                      tlrt_dtype index_dtype, tlrt_buffer **indices);

/* The k largest elements of each row of the row-major (rows, cols) float32 matrix x, in the
 * order above (descending, NaN first, equal values by increasing column): values is the float32
 * (rows, k) matrix of those elements (the input's bits, -0 kept), indices the (rows, k) index
 * buffer of their columns. 0 <= k <= cols; k == 0 or rows == 0 yields empty buffers.
 * Errors: TLRT_ERR_INVALID_ARGUMENT if k > cols (naming k). Strategy (CUDA): per-row radix
 * selection in one block for k <= 1024, a segmented radix sort (CUB) beyond; CPU: a partial sort.
 * Scratch (CUDA, k > 1024): about 16 bytes per element of x, from the stream-ordered pool. */
TLRT_API tlrt_status tlrt_topk_rows(const tlrt_buffer *x, uint64_t rows, uint64_t cols,
                                    uint64_t k, tlrt_dtype index_dtype, tlrt_buffer **values,
                                    tlrt_buffer **indices);

#ifdef __cplusplus
}
#endif

#endif /* TLRT_REDUCE_H */
