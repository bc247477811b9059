/* libtorchlean_rt: pooling (max, average, smooth max) over 1 to 8 spatial axes, forward and
 * backward, with a leading batch axis.
 *
 * LAYOUT. x is row-major (batch, channels, in[0], ..., in[rank-1]): the last spatial axis is
 * contiguous; batch and channels are folded into independent planes (windows never cross them).
 * The output y is (batch, channels, out[0], ..., out[rank-1]). batch = 1 is upstream's single
 * image. The 2-D entry points are the rank-2 case of the N-D ones (one implementation; in = (in_h,
 * in_w), kernel = (kernel_h, kernel_w), ...). Every output is a fresh buffer on the device of the
 * inputs.
 *
 * GEOMETRY, per spatial axis d (rank 1 .. 8): kernel k >= 1, stride s >= 1, symmetric padding p
 * with 2 p <= k (p cells before and after the axis, as PyTorch requires; upstream silently returned
 * an empty output for p > k / 2, now TLRT_ERR_INVALID_ARGUMENT). Output extent:
 *   out[d] = floor((in[d] + 2 p - k) / s) + 1   if in[d] >= 1 and in[d] + 2 p >= k,
 *   out[d] = 0                                   otherwise (documented, not an error: a window
 *                                                larger than the padded input gives an empty y;
 *                                                upstream's phantom 1-wide output is gone).
 * Window o (a multi-index of y) covers the input cells i with o[d] s - p <= i[d] < o[d] s - p + k.
 * Its REAL cells are those inside the input; padding cells are never read. With 2 p <= k and
 * in >= 1 every window holds at least one real cell, so no output is made of padding only (no
 * -FLT_MAX output, upstream bug 14). Windows are walked over their real cells in row-major order
 * (the last axis fastest): "first" below means first in that order.
 *
 * DEFINITIONS (every operation one IEEE binary32 operation in round-to-nearest-even, evaluated in
 * the order written, no contraction; exp and log are the shared float32 functions of tlrt_exp /
 * tlrt_log). For one window with real cells v_1 .. v_n in row-major order:
 *   max pool:     y = the first v_j that is NaN if any is NaN (NaN propagates, as PyTorch; upstream
 *                 ignored NaN), else the first maximum (ties: the first wins). Padding acts as
 *                 -inf that never wins a tie. -0 and +0 tie: the first is returned.
 *   average pool: S = (((-0 + v_1) + v_2) + ... + v_n), y = S / D, D = prod(k) rounded to float32
 *                 (count_include_pad = true, PyTorch's default and upstream's only mode: padding
 *                 counts as zeros) or D = n (false: the mean of the real cells).
 *   smooth max:   b = beta rounded to float32 (the host-scalar rule of torchlean_rt.h, and
 *                 nonzero). pivot = the max pool value of the
 *                 window for b > 0, the min-pool value (first minimum, first NaN) for b < 0;
 *                 S = ((+0 + e_1) + ... + e_n), e_j = exp(b * (v_j - pivot));
 *                 y = pivot + log(S) / b, except y = pivot when pivot is +-inf.
 *                 (log-sum-exp with upstream's pivot rule; S >= 1 as the pivot contributes
 *                 exp(0) = 1, so nothing overflows. b -> +inf gives max pool, b -> -inf min pool.)
 *                 DESIGN NOTE: padding cells are EXCLUDED from the sum, like max pool's padding
 *                 (upstream counted them as value 0, bug 15, which made a padded window's result
 *                 depend on the sign of its values); so smooth max pool tends to max pool.
 * Backward, with dy of y's shape: dx is the sum, over the windows containing the cell (in row-major
 * order of the windows, from +0), of one term per window:
 *   max pool:     dy[w] if the cell is window w's selected cell (the first maximum, or the first
 *                 NaN: the gradient goes to the cell the forward returned), else nothing;
 *   average pool: dy[w] / D_w (rounded once per window), for every real cell of w;
 *   smooth max:   dy[w] * (e / S_w), e = exp(b * (x_cell - pivot_w)) (the softmax weight of the
 *                 cell in its window, recomputed exactly as the forward computes it).
 * Cells in no window (stride > kernel) get +0.
 *
 * NUMERIC CLASS. max pool forward: exact (a selection; bitwise the input value). Average pool and
 * every backward: ordered reduction (the fixed orders above). Smooth max: shared math + ordered
 * reduction. Both backends perform exactly these operations in exactly these orders, so results
 * are bitwise identical across backends and runs (NaN payloads are unspecified). No atomics
 * anywhere: the deterministic and the fast mode are the same path, and tlrt_set_deterministic
 * changes nothing.
 *
 * ACCURACY against a float64 evaluation of the same definitions on the same float32 inputs
 * (asserted by tests/unit/test_pool.cpp and tests/grad/test_grad_pool.cpp on random geometries
 * of rank 1 .. 8; the largest measured error / bound in parentheses). u = 2^-24, n = real cells
 * of the window, K = prod(kernel), m = windows containing the cell, t_w = that window's
 * backward term:
 *   max pool and its backward: the forward is exact; dx: |dx - dx64| <= u (m - 1) sum_w |dy_w|
 *                 (0.97: m = 2 cells round once);
 *   average pool: |y - y64| <= u (|y64| + (n - 1) sum_j |v_j| / D) (1 + 2 n u)         (0.80);
 *   average backward: |dx - dx64| <= u (|dx64| + m sum_w |t_w|) (1 + 2 (m + 1) u)      (0.58);
 *   smooth max:   |y - y64| <= 4 u |y64| + (K + 4) u max(1, ln K) / |b|                (0.25);
 *   smooth backward: |dx - dx64| <= u sum_w |t_w| (4 |b| max|x| + K + 12)             (0.49).
 * (The last two hold for inputs with |b (v - pivot)| small enough that float64 exp does not
 * underflow differently; the rounding of b (v - pivot) dominates for large |b| |v|.)
 *
 * EDGE CASES (all entry points): batch = 0, channels = 0 or any in[d] = 0 gives an empty y (x must
 * be empty too) and an empty dx; an output extent of 0 gives an empty y and a dx of +0. Sizes are
 * checked exactly: x must have batch * channels * prod(in) elements and dy batch * channels *
 * prod(out), products taken without wrap-around (a count beyond 2^64 never matches).
 *
 * ERRORS (every entry point): TLRT_ERR_NULL_ARGUMENT (a buffer argument, an array argument, or the
 * out-parameter is NULL); TLRT_ERR_RELEASED; TLRT_ERR_DEVICE_MISMATCH (x and dy on different
 * devices); TLRT_ERR_INVALID_ARGUMENT (rank 0 or > 8; a kernel extent 0; a stride 0; 2 pad >
 * kernel; smooth max: beta NaN, infinite, zero, or rounding to +-inf or to +-0 in float32);
 * TLRT_ERR_SHAPE (x or dy not of the size the geometry gives); TLRT_ERR_OVERFLOW (the output, or
 * avgpool_bwd's dx, would have more than TLRT_MAX_ELEMENTS elements or an extent beyond 2^64);
 * TLRT_ERR_OUT_OF_MEMORY; TLRT_ERR_CUDA; TLRT_ERR_DEVICE_LOST. On failure the out-parameter is
 * NULL and nothing leaks. The message names the function and the offending argument ("argument
 * kernel_w = 0", "argument stride[2] = 0", "argument pad_h = 2 must be at most half of argument
 * kernel_h = 3").
 *
 * COST. Every call reads its inputs and writes its output about once, with no synchronisation on
 * CUDA. The CUDA max and smooth max backward may take device scratch of at most 8 bytes per output
 * cell from the library's stream-ordered pool (TLRT_ERR_OUT_OF_MEMORY if it cannot). How each
 * backend computes is documented in docs/kernels/pool.md, not here. */
#ifndef TLRT_POOL_H
#define TLRT_POOL_H

#include "tlrt_buffer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- max pool ------------------------------------------------------------------------------- */

/* 2-D max pool forward: x is (batch, channels, in_h, in_w); out is (batch, channels, out_h, out_w)
 * (GEOMETRY and DEFINITIONS above). Numeric class: exact. */
TLRT_API tlrt_status tlrt_maxpool2d_fwd(const tlrt_buffer *x, uint64_t batch, uint64_t channels,
                                        uint64_t in_h, uint64_t in_w, uint64_t kernel_h,
                                        uint64_t kernel_w, uint64_t stride_h, uint64_t stride_w,
                                        uint64_t pad_h, uint64_t pad_w, tlrt_buffer **out);

/* 2-D max pool backward: dx (x's shape) from the forward input x and the gradient dy of the
 * output. The selected cell of each window is recomputed from x with the forward's rule. Numeric
 * class: ordered reduction. */
TLRT_API tlrt_status tlrt_maxpool2d_bwd(const tlrt_buffer *x, const tlrt_buffer *dy,
                                        uint64_t batch, uint64_t channels, uint64_t in_h,
                                        uint64_t in_w, uint64_t kernel_h, uint64_t kernel_w,
                                        uint64_t stride_h, uint64_t stride_w, uint64_t pad_h,
                                        uint64_t pad_w, tlrt_buffer **dx);

/* N-D max pool forward: in_spatial, kernel, stride and padding each hold rank values (rank 1 .. 8);
 * x is (batch, channels, in_spatial...). Numeric class: exact. */
TLRT_API tlrt_status tlrt_maxpool_fwd(const tlrt_buffer *x, uint64_t batch, uint64_t channels,
                                      const uint64_t *in_spatial, uint32_t rank,
                                      const uint64_t *kernel, const uint64_t *stride,
                                      const uint64_t *padding, tlrt_buffer **out);

/* N-D max pool backward (see tlrt_maxpool2d_bwd). Numeric class: ordered reduction. */
TLRT_API tlrt_status tlrt_maxpool_bwd(const tlrt_buffer *x, const tlrt_buffer *dy,
                                      uint64_t batch, uint64_t channels,
                                      const uint64_t *in_spatial, uint32_t rank,
                                      const uint64_t *kernel, const uint64_t *stride,
                                      const uint64_t *padding, tlrt_buffer **dx);

/* ---- average pool --------------------------------------------------------------------------- */

/* 2-D average pool forward. count_include_pad: true divides by kernel_h * kernel_w (PyTorch's
 * default, upstream's behaviour), false by the number of real cells of the window.
 * Numeric class: ordered reduction. */
TLRT_API tlrt_status tlrt_avgpool2d_fwd(const tlrt_buffer *x, uint64_t batch, uint64_t channels,
                                        uint64_t in_h, uint64_t in_w, uint64_t kernel_h,
                                        uint64_t kernel_w, uint64_t stride_h, uint64_t stride_w,
                                        uint64_t pad_h, uint64_t pad_w, bool count_include_pad,
                                        tlrt_buffer **out);

/* 2-D average pool backward: dx (batch, channels, in_h, in_w) from dy alone (the operation is
 * linear). Errors as above; TLRT_ERR_OVERFLOW also when dx would exceed TLRT_MAX_ELEMENTS.
 * Numeric class: ordered reduction. */
TLRT_API tlrt_status tlrt_avgpool2d_bwd(const tlrt_buffer *dy, uint64_t batch, uint64_t channels,
                                        uint64_t in_h, uint64_t in_w, uint64_t kernel_h,
                                        uint64_t kernel_w, uint64_t stride_h, uint64_t stride_w,
                                        uint64_t pad_h, uint64_t pad_w, bool count_include_pad,
                                        tlrt_buffer **dx);

/* N-D average pool forward (see tlrt_avgpool2d_fwd). Numeric class: ordered reduction. */
TLRT_API tlrt_status tlrt_avgpool_fwd(const tlrt_buffer *x, uint64_t batch, uint64_t channels,
                                      const uint64_t *in_spatial, uint32_t rank,
                                      const uint64_t *kernel, const uint64_t *stride,
                                      const uint64_t *padding, bool count_include_pad,
                                      tlrt_buffer **out);

/* N-D average pool backward (see tlrt_avgpool2d_bwd). Numeric class: ordered reduction. */
TLRT_API tlrt_status tlrt_avgpool_bwd(const tlrt_buffer *dy, uint64_t batch, uint64_t channels,
                                      const uint64_t *in_spatial, uint32_t rank,
                                      const uint64_t *kernel, const uint64_t *stride,
                                      const uint64_t *padding, bool count_include_pad,
                                      tlrt_buffer **dx);

/* ---- smooth max pool (log-sum-exp) ---------------------------------------------------------- */

/* 2-D smooth max pool forward: y = pivot + log(sum_j exp(b (v_j - pivot))) / b per window, b =
 * beta rounded to float32 (DEFINITIONS above). Numeric class: shared math + ordered reduction. */
TLRT_API tlrt_status tlrt_smooth_maxpool2d_fwd(const tlrt_buffer *x, uint64_t batch,
                                               uint64_t channels, uint64_t in_h, uint64_t in_w,
                                               uint64_t kernel_h, uint64_t kernel_w,
                                               uint64_t stride_h, uint64_t stride_w,
                                               uint64_t pad_h, uint64_t pad_w, double beta,
                                               tlrt_buffer **out);

/* 2-D smooth max pool backward: dx (x's shape) from x and dy; each window passes dy times the
 * softmax weight exp(b (x - pivot)) / S of the cell. A window whose pivot is NaN or +-inf passes
 * NaN to its cells (as the gradient of a log-sum-exp at infinity, PyTorch's included).
 * Numeric class: shared math + ordered reduction. */
TLRT_API tlrt_status tlrt_smooth_maxpool2d_bwd(const tlrt_buffer *x, const tlrt_buffer *dy,
                                               uint64_t batch, uint64_t channels, uint64_t in_h,
                                               uint64_t in_w, uint64_t kernel_h,
                                               uint64_t kernel_w, uint64_t stride_h,
                                               uint64_t stride_w, uint64_t pad_h, uint64_t pad_w,
                                               double beta, tlrt_buffer **dx);

/* N-D smooth max pool forward (see tlrt_smooth_maxpool2d_fwd). */
TLRT_API tlrt_status tlrt_smooth_maxpool_fwd(const tlrt_buffer *x, uint64_t batch,
                                             uint64_t channels, const uint64_t *in_spatial,
                                             uint32_t rank, const uint64_t *kernel,
                                             const uint64_t *stride, const uint64_t *padding,
                                             double beta, tlrt_buffer **out);

/* N-D smooth max pool backward (see tlrt_smooth_maxpool2d_bwd). */
TLRT_API tlrt_status tlrt_smooth_maxpool_bwd(const tlrt_buffer *x, const tlrt_buffer *dy,
                                             uint64_t batch, uint64_t channels,
                                             const uint64_t *in_spatial, uint32_t rank,
                                             const uint64_t *kernel, const uint64_t *stride,
                                             const uint64_t *padding, double beta,
                                             tlrt_buffer **dx);

/* ---- geometry as data (ABI 1.1) --------------------------------------------------------------
 *
 * tlrt_pool_geometry holds the geometry arguments of the N-D entry points above (batch,
 * channels, rank, in_spatial, kernel, stride, padding) as one value whose fields are set by name:
 * no two same-typed arguments can be swapped unnoticed, and one value serves the forward, the
 * backward and tlrt_pool_output_dims. The *_geom entry points take it in place of those
 * arguments and are otherwise the N-D functions: the same buffers and scalars (count_include_pad,
 * beta) in the same order, bitwise the same results, the same checks in the same order with the
 * same status codes (the checks of the struct itself come where the geometry's come, after the
 * buffers'); messages name a field as "argument geometry->kernel[1]". Operation-specific values
 * (count_include_pad, beta) stay arguments: the geometry is what the output size depends on.
 *
 * LAYOUT. Every field is a uint64_t, so there is no padding and the layout is the same in every
 * language: 36 fields, 288 bytes in this version. Each array has TLRT_POOL_MAX_RANK entries, of
 * which entries 0 .. rank - 1 are read and the rest are ignored.
 *   struct_size   the caller sets sizeof(tlrt_pool_geometry) (the size its header declares).
 *                 Below 288 bytes (this first version's layout): TLRT_ERR_INVALID_ARGUMENT. Later
 *                 versions only append fields, each meaning this version's behaviour when zero;
 *                 so a larger struct_size (a newer header) is accepted when every byte past the
 *                 fields this library knows is zero, and is TLRT_ERR_INVALID_ARGUMENT otherwise
 *                 (a request this library cannot honour), as is a struct_size above 4096 (not a
 *                 size any version will have: an unset field). The library reads struct_size
 *                 bytes, never more.
 *   rank          the number of spatial axes, 1 .. TLRT_POOL_MAX_RANK (64-bit: 2^32 + 2 is
 *                 rejected, not truncated to 2).
 *   batch         the leading axis of x and y.
 *   channels      the second axis of x and y (batch and channels fold into independent planes).
 *   in_spatial    x's spatial extents in[d].
 *   kernel        the window's extents k[d], each at least 1.
 *   stride        s[d], each at least 1 (PyTorch's default stride is the kernel: write it).
 *   padding       p[d], with 2 p[d] <= k[d] (GEOMETRY above).
 * A struct filled with zeros is never valid (rank 0), so a forgotten field fails loudly. C hosts
 * write `tlrt_pool_geometry g = {0}; g.struct_size = sizeof g; g.rank = 2; ...`. */

/* The most spatial axes of a geometry (the rank limit of every entry point of this header). */
#define TLRT_POOL_MAX_RANK 8u
/* The most output dimensions, (batch, channels, out[0], ..., out[rank - 1]): a capacity of
 * tlrt_pool_output_dims that always suffices. */
#define TLRT_POOL_MAX_DIMS (TLRT_POOL_MAX_RANK + 2u)

typedef struct tlrt_pool_geometry {
  uint64_t struct_size;                    /* sizeof(tlrt_pool_geometry), set by the caller */
  uint64_t rank;                           /* spatial axes, 1 .. TLRT_POOL_MAX_RANK */
  uint64_t batch;                          /* leading axis */
  uint64_t channels;                       /* second axis */
  uint64_t in_spatial[TLRT_POOL_MAX_RANK]; /* in[d], d < rank */
  uint64_t kernel[TLRT_POOL_MAX_RANK];     /* k[d] >= 1 */
  uint64_t stride[TLRT_POOL_MAX_RANK];     /* s[d] >= 1 */
  uint64_t padding[TLRT_POOL_MAX_RANK];    /* p[d], 2 p[d] <= k[d] */
} tlrt_pool_geometry;

/* tlrt_maxpool_fwd with the geometry as one tlrt_pool_geometry. Errors: those of
 * tlrt_maxpool_fwd (no geometry array can be NULL) plus TLRT_ERR_NULL_ARGUMENT (geometry NULL)
 * and TLRT_ERR_INVALID_ARGUMENT (struct_size, as above). Numeric class: exact. */
TLRT_API tlrt_status tlrt_maxpool_fwd_geom(const tlrt_buffer *x,
                                           const tlrt_pool_geometry *geometry,
                                           tlrt_buffer **out);

/* tlrt_maxpool_bwd with the geometry as one tlrt_pool_geometry (errors as
 * tlrt_maxpool_fwd_geom). Numeric class: ordered reduction. */
TLRT_API tlrt_status tlrt_maxpool_bwd_geom(const tlrt_buffer *x, const tlrt_buffer *dy,
                                           const tlrt_pool_geometry *geometry,
                                           tlrt_buffer **dx);

/* tlrt_avgpool_fwd with the geometry as one tlrt_pool_geometry (errors as
 * tlrt_maxpool_fwd_geom). Numeric class: ordered reduction. */
TLRT_API tlrt_status tlrt_avgpool_fwd_geom(const tlrt_buffer *x,
                                           const tlrt_pool_geometry *geometry,
                                           bool count_include_pad, tlrt_buffer **out);

/* tlrt_avgpool_bwd with the geometry as one tlrt_pool_geometry (errors as
 * tlrt_maxpool_fwd_geom; TLRT_ERR_OVERFLOW also when dx would exceed TLRT_MAX_ELEMENTS).
 * Numeric class: ordered reduction. */
TLRT_API tlrt_status tlrt_avgpool_bwd_geom(const tlrt_buffer *dy,
                                           const tlrt_pool_geometry *geometry,
                                           bool count_include_pad, tlrt_buffer **dx);

/* tlrt_smooth_maxpool_fwd with the geometry as one tlrt_pool_geometry (errors as
 * tlrt_maxpool_fwd_geom, and beta's). Numeric class: shared math + ordered reduction. */
TLRT_API tlrt_status tlrt_smooth_maxpool_fwd_geom(const tlrt_buffer *x,
                                                  const tlrt_pool_geometry *geometry,
                                                  double beta, tlrt_buffer **out);

/* tlrt_smooth_maxpool_bwd with the geometry as one tlrt_pool_geometry (errors as
 * tlrt_maxpool_fwd_geom, and beta's). Numeric class: shared math + ordered reduction. */
TLRT_API tlrt_status tlrt_smooth_maxpool_bwd_geom(const tlrt_buffer *x, const tlrt_buffer *dy,
                                                  const tlrt_pool_geometry *geometry,
                                                  double beta, tlrt_buffer **dx);

/* The output shape of every pool forward of `geometry` (max, average, smooth max: the same),
 * without buffers, so that hosts need not re-implement the GEOMETRY formula: dims[0 .. *rank - 1]
 * = (batch, channels, out[0], ..., out[geometry->rank - 1]), *rank = geometry->rank + 2, and
 * *elements = their product, the element count of the forward's y (and of the dy the backward
 * expects). capacity is the number of entries dims has room for; every one of them is written
 * (those past *rank with 0); TLRT_POOL_MAX_DIMS always suffices.
 * Validation: exactly the checks of tlrt_maxpool_fwd_geom that need no buffer, in the same order
 * and with the same status codes: TLRT_ERR_NULL_ARGUMENT (geometry, dims, rank or elements NULL);
 * TLRT_ERR_INVALID_ARGUMENT (struct_size; rank 0 or above TLRT_POOL_MAX_RANK; a kernel extent 0;
 * a stride 0; 2 pad > kernel); TLRT_ERR_OVERFLOW (an output extent beyond 64 bits, or more than
 * TLRT_MAX_ELEMENTS output elements); and TLRT_ERR_SHAPE (capacity below geometry->rank + 2;
 * checked last). Not checked, because they need buffers: the sizes of x and dy
 * (TLRT_ERR_SHAPE), and avgpool_bwd's limit on dx (TLRT_ERR_OVERFLOW). On failure *rank and
 * *elements are 0 and dims[0 .. capacity - 1] are 0. Numeric class: exact (integers). */
TLRT_API tlrt_status tlrt_pool_output_dims(const tlrt_pool_geometry *geometry, uint64_t *dims,
                                           uint32_t capacity, uint32_t *rank,
                                           uint64_t *elements);

#ifdef __cplusplus
}
#endif

#endif /* TLRT_POOL_H */
