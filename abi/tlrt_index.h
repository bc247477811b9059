/* libtorchlean_rt: indexing: gather and scatter-add with host index lists or index buffers.
 *
 * Gathers read elements or rows of a buffer at positions given by a host index list; scatter-adds
 * return a copy of a buffer with values added at such positions (the adjoint of the gathers:
 * tlrt_scatter_add of a zero vector is the gradient of tlrt_gather_vec, tlrt_scatter_add_rows the
 * gradient of tlrt_gather_rows, an embedding's backward). Matrices are row-major (rows, cols)
 * buffers. Every output is a fresh buffer on the device of the inputs.
 *
 * INDEX LISTS. idx[0..k) is a host array of uint64_t, read during the call only: the caller may
 * reuse or free it as soon as the call returns (the call keeps what it needs and does not wait
 * for the device). idx may be NULL only when k == 0. With bound = n (vectors) or rows
 * (matrices), each entry idx[j] is one of:
 *  - in range, idx[j] < bound: it addresses element / row idx[j];
 *  - out of range, bound <= idx[j] < TLRT_MAX_ELEMENTS (2^60): totalised, as upstream does: a
 *    gather reads +0.0f for it (a row of +0.0f for tlrt_gather_rows) and a scatter skips it. This
 *    is a value, not an error (bound == 0 makes every entry out of range);
 *  - not an index, idx[j] >= TLRT_MAX_ELEMENTS: no element of any buffer has such an index (it is
 *    typically a negative number converted to uint64_t, such as (uint64_t)-1). The call fails
 *    with TLRT_ERR_INDEX naming idx; the message gives the first such position j and its value.
 * Every entry is checked before any work is done, also when the output is empty (k == 0 aside).
 * tlrt_scatter_add_row applies the same three cases to its row index i (out of range: a plain
 * copy of mat; i >= 2^60: TLRT_ERR_INDEX naming i). The five functions follow this one rule
 * (upstream's scatter_add_row ended the process on an out-of-range row while its siblings
 * skipped such rows).
 *
 * SCATTER-ADD ORDER. Numeric class of the scatter-adds: ordered reduction (DESIGN section 4).
 * For a target element t (for the row variants: element (t, c), column by column), let
 * v_1, ..., v_L be the values scattered to it, in increasing order of their position j in idx
 * (duplicates accumulate; for the row variants v_i is element c of row j of vals). Then
 *     out[t] = x[t] + S_t,   S_t = THE TREE of abi/tlrt_reduce.h applied to (v_1, ..., v_L),
 * computed in float32; x[t] + S_t is one IEEE addition (round to nearest, not fused). So:
 *  - a target with no in-range entry (L = 0) is x[t] copied bit for bit: nothing is added to it,
 *    so a -0 stays -0 (and a NaN payload is kept);
 *  - L = 1 gives x[t] + v_1, the IEEE sum (S_t = v_1; NaN payloads aside);
 *  - L >= 2 first sums the contributions with the tree, then adds the sum to x[t]. For L <= 32
 *    the tree is the pairwise halving over P = the power of two >= L values, e.g. L = 3 gives
 *    x + ((v_1 + v_3) + v_2), L = 4 gives x + ((v_1 + v_3) + (v_2 + v_4)); longer sequences use
 *    the 256 lanes and 4096-element chunks of the tree.
 * Why the tree rather than the sequential fold ((x + v_1) + v_2) + ... of a scalar loop (and of
 * PyTorch's CPU index_add_): it is the one sum of this library (a scatter-add of a zero buffer
 * equals the tree sum tlrt_reduce_sum returns for the same values); its error grows with the
 * depth of the tree, not with L (|S_t - exact| <= 23 D u / (1 - 23 D u) * sum |v_i|, u = 2^-24,
 * D = 1 for L <= 4096, 2 for L <= 2^24; plus half an ulp for the final addition), where a fold's
 * bound grows like L u; and a device evaluates a hot target's sum in parallel. The cost: for
 * L >= 2 the result differs in the last bits from the fold's, and x[t] is added after the
 * contributions, not before. The order is fixed in both modes of tlrt_set_deterministic, which
 * therefore changes nothing here; it is also the fast path (no atomics on either backend).
 * Results are bitwise identical across runs and between the CPU and CUDA backends (the parity
 * suite checks this; NaN payloads are unspecified). NaN in a contribution makes its target NaN;
 * +inf and -inf at one target give NaN; an overflowing sum gives +-inf.
 * Gathers are exact: out-of-range entries read +0.0f, everything else is copied bit for bit.
 *
 * Cost: entries are grouped by target stably before the device work. The CPU backend sorts on
 * the host (a counting or radix sort, O(k + bound) for bound <= 2k + 65536, O(k) radix passes
 * otherwise), its host arrays (about 8 to 24 bytes per entry) from the CPU block pool, reused
 * from call to call (tlrt_allocator_trim on the CPU device frees them; see
 * tlrt_allocator_stats's pooled_bytes). The CUDA backend uploads the list as it is (8 bytes per
 * entry) through its pinned staging and sorts on the device (below).
 *
 * Errors, for every function here, checked in this order: TLRT_ERR_NULL_ARGUMENT (a buffer, or
 * out, or idx with k > 0); TLRT_ERR_RELEASED (an input's storage was released);
 * TLRT_ERR_DEVICE_MISMATCH (inputs on different devices); TLRT_ERR_OVERFLOW if k >
 * TLRT_MAX_ELEMENTS (no index list is that long); TLRT_ERR_SHAPE (a stated size does not describe
 * a buffer; products are computed exactly, so a product beyond 64 bits never matches);
 * TLRT_ERR_OVERFLOW if the output would have more than TLRT_MAX_ELEMENTS elements; TLRT_ERR_INDEX
 * (an entry >= 2^60, above); then TLRT_ERR_OUT_OF_MEMORY; TLRT_ERR_CUDA; TLRT_ERR_DEVICE_LOST.
 * On failure every out-parameter is NULL and nothing was allocated. */
#ifndef TLRT_INDEX_H
#define TLRT_INDEX_H

#include "tlrt_buffer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Gather of k elements of a vector: out[j] = v[idx[j]] for j < k, +0.0f where idx[j] >= n.
 * n must equal the size of v (it states the bound of the index list). out has k elements.
 * k == 0 gives an empty buffer; n == 0 with k > 0 gives k zeros. Numeric class: exact.
 * Errors: TLRT_ERR_SHAPE if n != size of v; TLRT_ERR_INDEX (naming idx). */
TLRT_API tlrt_status tlrt_gather_vec(const tlrt_buffer *v, uint64_t n, const uint64_t *idx,
                                     uint64_t k, tlrt_buffer **out);

/* Scatter-add into a vector: out is a copy of x (n elements) with vals[j] added at idx[j] for
 * every j < k with idx[j] < n, duplicates accumulating in the order stated above
 * (out[t] = x[t] + tree sum of the vals[j] with idx[j] == t, in increasing j); entries with
 * idx[j] >= n are skipped. vals has k elements. k == 0 (or no in-range entry) gives a bit-exact
 * copy of x; n == 0 gives an empty buffer. Numeric class: ordered reduction.
 * Errors: TLRT_ERR_SHAPE if n != size of x or k != size of vals; TLRT_ERR_INDEX (naming idx). */
TLRT_API tlrt_status tlrt_scatter_add(const tlrt_buffer *x, const tlrt_buffer *vals, uint64_t n,
                                      const uint64_t *idx, uint64_t k, tlrt_buffer **out);

/* Gather of k rows of a (rows, cols) matrix: out is (k, cols) with out[j, :] = mat[idx[j], :],
 * a row of +0.0f where idx[j] >= rows. k == 0 or cols == 0 gives an empty buffer (the indices
 * are still checked); rows == 0 with k > 0 gives zeros. Numeric class: exact.
 * Errors: TLRT_ERR_SHAPE if rows * cols != size of mat; TLRT_ERR_OVERFLOW if k * cols >
 * TLRT_MAX_ELEMENTS (naming k and cols); TLRT_ERR_INDEX (naming idx). */
TLRT_API tlrt_status tlrt_gather_rows(const tlrt_buffer *mat, uint64_t rows, uint64_t cols,
                                      const uint64_t *idx, uint64_t k, tlrt_buffer **out);

/* Scatter-add of one row: out is a copy of the (rows, cols) matrix mat with row (cols elements)
 * added to row i: out[i, c] = mat[i, c] + row[c] (one IEEE addition each; the L = 1 case of the
 * order above), every other row copied bit for bit. i >= rows gives a plain copy of mat (the rule
 * of the index lists; upstream ended the process here). rows * cols == 0 gives an empty buffer.
 * Numeric class: exact (one addition per element).
 * Errors: TLRT_ERR_SHAPE if rows * cols != size of mat or cols != size of row; TLRT_ERR_INDEX if
 * i >= TLRT_MAX_ELEMENTS (naming i). */
TLRT_API tlrt_status tlrt_scatter_add_row(const tlrt_buffer *mat, const tlrt_buffer *row,
                                          uint64_t rows, uint64_t cols, uint64_t i,
                                          tlrt_buffer **out);

/* Scatter-add of k rows: out is a copy of the (rows, cols) matrix mat with row j of the (k, cols)
 * matrix vals added to row idx[j], for every j < k with idx[j] < rows; duplicates accumulate
 * column by column in the order stated above (out[t, c] = mat[t, c] + tree sum of the vals[j, c]
 * with idx[j] == t, in increasing j); entries with idx[j] >= rows are skipped. The embedding
 * backward: tlrt_scatter_add_rows(zeros, dout, vocab, dim, tokens, k) accumulates the gradient
 * of tlrt_gather_rows(table, vocab, dim, tokens, k). k == 0 gives a bit-exact copy of mat;
 * rows * cols == 0 gives an empty buffer. Numeric class: ordered reduction.
 * Errors: TLRT_ERR_SHAPE if rows * cols != size of mat or k * cols != size of vals;
 * TLRT_ERR_INDEX (naming idx). */
TLRT_API tlrt_status tlrt_scatter_add_rows(const tlrt_buffer *mat, const tlrt_buffer *vals,
                                           uint64_t rows, uint64_t cols, const uint64_t *idx,
                                           uint64_t k, tlrt_buffer **out);

/* ---- index buffers ----------------------------------------------------------------------------
 * The _ibuf variants take the list as a buffer of int32 or int64 elements (abi/tlrt_buffer.h:
 * tlrt_buffer_from_i64, tlrt_buffer_from_dlpack, ...) on the device of the data: token ids and
 * labels that already live on the GPU never cross to the host, and the host never waits for the
 * device. k is the index buffer's element count. An entry idx[j] is one of:
 *  - in range, 0 <= idx[j] < bound: as above;
 *  - out of range, bound <= idx[j] < 2^60: totalised as above (a gather reads +0.0f, a scatter
 *    skips it); a value, not an error;
 *  - not an index: negative, or >= 2^60 (int64). The library cannot fail the call for it without
 *    waiting for the device, so it is treated as out of range (read as +0.0f, skipped by a
 *    scatter: nothing is ever read or written out of bounds) and COUNTED: every such entry adds
 *    one to a counter of the device, which tlrt_index_faults reads. A host that wants the
 *    strictness of the host lists checks the counter after a step (or in debug builds after every
 *    call); a count of 0 means every entry of every index buffer since the last reset was an index.
 * The scatter-adds keep the order and the numbers stated above, bitwise: a scatter through an
 * index buffer gives the same bits as through the host list of the same values, on both
 * backends, in both modes of tlrt_set_deterministic. On CUDA the entries are grouped by target on
 * the device (a stable radix sort, CUB's), with stream-ordered scratch of about 16 to 32 bytes per
 * entry; the host list variants above use the same device path after one upload of their list.
 *
 * Errors, in this order: TLRT_ERR_NULL_ARGUMENT (a buffer or out; not mat / x of the scatters,
 * which may be NULL); TLRT_ERR_STALE_HANDLE; TLRT_ERR_RELEASED; TLRT_ERR_DTYPE (idx not int32 or
 * int64, naming idx; a data argument not float32); TLRT_ERR_DEVICE_MISMATCH (idx or vals on
 * another device than the data); TLRT_ERR_SHAPE (as the host variants, with k = the size of
 * idx); TLRT_ERR_OVERFLOW (output too large); then TLRT_ERR_OUT_OF_MEMORY; TLRT_ERR_CUDA;
 * TLRT_ERR_DEVICE_LOST. TLRT_ERR_INDEX never occurs. On failure *out is NULL. */

/* tlrt_gather_vec with an index buffer: out (k = size of idx) with out[j] = v[idx[j]], +0.0f for
 * an entry out of range or not an index. n must equal the size of v. Numeric class: exact. */
TLRT_API tlrt_status tlrt_gather_vec_ibuf(const tlrt_buffer *v, uint64_t n,
                                          const tlrt_buffer *idx, tlrt_buffer **out);

/* tlrt_scatter_add with an index buffer. x may be NULL: the vector of n values +0.0f (the
 * gradient of a gather without a zero buffer to allocate, fill and read); otherwise n must equal
 * its size. vals has k = size of idx elements. Numeric class: ordered reduction (order above). */
TLRT_API tlrt_status tlrt_scatter_add_ibuf(const tlrt_buffer *x, const tlrt_buffer *vals,
                                           uint64_t n, const tlrt_buffer *idx,
                                           tlrt_buffer **out);

/* tlrt_gather_rows with an index buffer: out (k, cols), row j = mat[idx[j], :], a row of +0.0f
 * for an entry out of range or not an index (an embedding lookup of token ids on the device).
 * Numeric class: exact. */
TLRT_API tlrt_status tlrt_gather_rows_ibuf(const tlrt_buffer *mat, uint64_t rows, uint64_t cols,
                                           const tlrt_buffer *idx, tlrt_buffer **out);

/* tlrt_scatter_add_rows with an index buffer; mat may be NULL: the (rows, cols) matrix of +0.0f
 * (an embedding's backward in one call: tlrt_scatter_add_rows_ibuf(NULL, dout, vocab, dim,
 * tokens, &dtable)). vals is (k, cols), k = size of idx. Numeric class: ordered reduction. */
TLRT_API tlrt_status tlrt_scatter_add_rows_ibuf(const tlrt_buffer *mat, const tlrt_buffer *vals,
                                                uint64_t rows, uint64_t cols,
                                                const tlrt_buffer *idx, tlrt_buffer **out);

/* The flat indices of one column index per row of a (rows, cols) matrix, rows = the size of
 * col_idx (int32 or int64): out is an int64 buffer of rows elements on the device of col_idx with
 * out[i] = i * cols + col_idx[i] (the element (i, col_idx[i]) of the matrix read flat) where
 * 0 <= col_idx[i] < cols; every other entry (out of range as well as not an index) gives
 * rows * cols, out of range of the matrix, and is COUNTED by tlrt_index_faults: labels of a
 * classification loss, where a wrong label must not pass unnoticed. tlrt_gather_vec_ibuf of the
 * matrix through out picks one element per row (torch.gather along dim 1); tlrt_scatter_add_ibuf
 * with NULL x is its adjoint. Numeric class: exact.
 * Errors: TLRT_ERR_NULL_ARGUMENT (col_idx, out); TLRT_ERR_STALE_HANDLE; TLRT_ERR_RELEASED;
 * TLRT_ERR_DTYPE (col_idx not int32 / int64); TLRT_ERR_OVERFLOW (rows * cols > 2^60). */
TLRT_API tlrt_status tlrt_index_flat_rows(const tlrt_buffer *col_idx, uint64_t cols,
                                          tlrt_buffer **out);

/* The number of index-buffer entries that were not an index (above; and the entries of
 * tlrt_index_flat_rows outside [0, cols), so labels of tlrt_tape_cross_entropy_ibuf outside
 * [0, classes)) met by calls on device since the last reset
 * (or since the start of the process), and, if reset is true, the counter set back to 0. The one
 * call of this family that waits: it waits for the work queued so far on the device's current
 * stream (abi/tlrt_stream.h), so that every earlier call is counted. Per device and process wide
 * (all threads). Errors: TLRT_ERR_NULL_ARGUMENT (count); TLRT_ERR_INVALID_ARGUMENT (an unknown
 * device kind); TLRT_ERR_BACKEND_UNAVAILABLE (a CUDA device in a build without CUDA);
 * TLRT_ERR_NO_DEVICE; TLRT_ERR_CUDA; TLRT_ERR_DEVICE_LOST. On failure *count is 0 and the
 * counter unchanged. */
TLRT_API tlrt_status tlrt_index_faults(tlrt_device device, bool reset, uint64_t *count);

#ifdef __cplusplus
}
#endif

#endif /* TLRT_INDEX_H */
