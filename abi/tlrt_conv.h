/* libtorchlean_rt: convolution and transposed convolution, rank 1 .. 8, forward and backward.
 *
 * Every function takes a batch: a batch of images is one call (upstream had no batch axis; its
 * single image is batch = 1). Every output is a fresh buffer on the device of the inputs.
 *
 * LAYOUT (row-major, channels first, the last spatial axis contiguous):
 *   input     (batch, in_channels, in_spatial[0], ..., in_spatial[rank - 1])
 *   output    (batch, out_channels, out_spatial[0], ..., out_spatial[rank - 1])
 *   conv kernel            (out_channels, in_channels / groups, kernel_size[0], ...)
 *   transposed-conv kernel (in_channels, out_channels / groups, kernel_size[0], ...)
 *   bias      (out_channels), optional: NULL means no bias (zero).
 * These are PyTorch's layouts (torch.nn.functional.conv{1,2,3}d and conv_transpose{1,2,3}d), so a
 * PyTorch weight can be passed as is. The 2-D functions are the N-D ones with rank = 2 and the
 * spatial arguments named h (axis 0) and w (axis 1).
 *
 * GEOMETRY, per spatial axis d, with k = kernel_size[d], s = stride[d], p = padding[d] (the same
 * number of zero cells before and after the axis), dil = dilation[d] and ek = dil * (k - 1) + 1
 * (the extent of a dilated window):
 *   convolution:  out[d] = floor((in[d] + 2 p - ek) / s) + 1   if in[d] + 2 p >= ek,
 *                 out[d] = 0                                   otherwise
 *                 (a window larger than the padded input gives an EMPTY output, never upstream's
 *                 phantom 1-wide output);
 *   transposed:   out[d] = (in[d] - 1) s - 2 p + ek            if in[d] >= 1 and this is >= 1,
 *                 out[d] = 0                                   otherwise (in[d] = 0, or 2 p >= the
 *                 unpadded extent (in[d] - 1) s + ek: an empty output)
 *                 (the add happens before the subtraction: upstream saturated
 *                 (in - 1) s - 2 p first and so got the size wrong). There is no output_padding:
 *                 a transposed convolution produces exactly the input size of the convolution it
 *                 is the adjoint of when (in + 2 p - ek) is a multiple of s.
 * The arithmetic is exact (128-bit); an extent beyond 64 bits is TLRT_ERR_OVERFLOW.
 * Groups: in_channels and out_channels are split into `groups` equal consecutive blocks; output
 * channel block g sees only input channel block g. groups = 1 is the dense convolution;
 * groups = in_channels (out_channels a multiple of it) is the depthwise convolution.
 *
 * DEFINITIONS. Convolution (cross-correlation, as PyTorch), for every image n, output channel o in
 * group g = o / (out_channels / groups), output position q (per axis q[d] < out[d]):
 *   out[n, o, q] = bias[o] + sum over c < in_channels / groups and window offsets j (j[d] < k[d])
 *                  of kernel[o, c, j] * input[n, g * in_channels / groups + c, i(q, j)]
 * with i[d] = q[d] s[d] - p[d] + j[d] dil[d]; where i is outside the input the value is padding,
 * +0 (see SPECIAL VALUES). The transposed convolution is the adjoint (the input gradient) of the
 * convolution whose input is the transposed output: for image n, output channel o, position i:
 *   out[n, o, i] = bias[o] + sum over input channels c of o's group, offsets j and positions q with
 *                  q[d] s[d] - p[d] + j[d] dil[d] = i[d] of kernel[c, o mod (out_channels /
 *                  groups), j] * input[n, c, q].
 * The backward functions return the gradients of a scalar loss with respect to the forward's
 * kernel, bias and input, given grad_out = dLoss/dout (the forward output's shape):
 *   d_kernel (the kernel's shape): the sum over the batch and positions of grad_out times input;
 *   d_bias (out_channels): d_bias[o] = sum over n and positions of grad_out[n, o, ...];
 *   d_input (the input's shape): the forward's adjoint applied to grad_out.
 * Backward out-parameters may be NULL to skip that gradient (d_input of a first layer, d_bias of a
 * layer without bias); at least one must be non-NULL. Requested gradients are computed
 * independently: skipping one changes neither the values nor the cost of the others.
 *
 * RESOURCES. Scratch comes from the library's pools: on the CPU about one image's column matrix
 * (in_channels * prod(k) * prod(out) floats), on CUDA about 256 MiB per call at most unless one
 * image's column matrix alone is larger (stream-ordered). No device synchronisation and no host
 * copy per call. Products may round their inputs to TF32 only when tlrt_get_allow_tf32()
 * (abi/tlrt_blas.h) is on, as for tlrt_bmm. How each backend computes is documented in
 * docs/kernels/conv.md, not here.
 *
 * NUMERIC CLASS: library (DESIGN section 4). The backends sum in different orders, so CPU and CUDA
 * results are NOT bitwise identical; each is within a stated bound of the exact result. For an
 * output element that is a sum of T products (forward: T = in_channels / groups * prod(k) plus the
 * bias; d_input: at most out_channels / groups * prod(k); d_kernel and d_bias: batch * prod(out))
 * and S = the sum of the absolute values of those products, u = 2^-24:
 *   |result - exact| <= 2 (T + 1) u S        (float32 math; (2^-9 + 2 (T + 1) u) S with TF32)
 * while nothing overflows or underflows into subnormals. The unit tests check this bound against a
 * float64 reference on the CPU; the parity test checks it on both backends. Each backend is
 * deterministic: the same call on the same device gives the same bits (each backend sums in a
 * fixed order that depends on the shape only, without atomics; results may differ between GPU
 * models), whatever tlrt_set_deterministic says.
 *
 * SPECIAL VALUES: NaN and infinities propagate through the products as in IEEE arithmetic: a NaN
 * in the input poisons every output whose window covers it (and, in the backward, the d_kernel
 * entries it multiplies), a NaN in the kernel poisons every output of its channel. Padding cells
 * are zeros that TAKE PART in the products (as in PyTorch): an infinite or NaN kernel weight over
 * a padding cell makes that output NaN (inf * 0), and in the backward an infinite or NaN grad_out
 * entry makes the d_kernel entries it meets through padding NaN; the input gradient of a padding
 * cell is simply not formed. The same holds for the transposed convolution's input gradient and
 * kernel gradient (the convolution of grad_out); its forward forms no products with padding. The
 * sign of a zero result is unspecified. Output positions whose window lies entirely in padding
 * (possible when p >= ek) hold the bias (or +0) for finite weights.
 *
 * EMPTY CASES. batch = 0 or an out[d] = 0: an empty output; the backward's d_kernel and d_bias are
 * +0 and d_input is +0 (its shape). in_channels = 0 (then out_channels may be anything divisible
 * by groups, and the kernel is empty): the output is the bias broadcast (or +0). out_channels = 0:
 * an empty output. A forward input with an in[d] = 0 and padding enough for windows: outputs hold
 * the bias.
 *
 * ERRORS (all functions): TLRT_ERR_NULL_ARGUMENT (kernel, input, grad_out, out, or a geometry array
 * NULL; all three backward out-parameters NULL); TLRT_ERR_RELEASED; TLRT_ERR_DEVICE_MISMATCH (the
 * buffers on different devices); TLRT_ERR_INVALID_ARGUMENT (rank 0 or > 8; a kernel extent,
 * stride or dilation of 0; groups = 0; in_channels or out_channels not divisible by groups; a
 * non-empty output with in[d] + 2 p >= 2^62 for the convolution, or with the transposed out[d] +
 * 2 p >= 2^62 (index arithmetic is 64-bit signed on both backends); on CUDA
 * only, a GEMM dimension beyond INT_MAX, the cuBLAS limit: in_channels / groups * prod(k),
 * out_channels / groups or the number of output positions prod(out) of the convolution (for the
 * transposed convolution: prod(in))); TLRT_ERR_SHAPE (input, kernel, bias or grad_out with a
 * different element count than the geometry says, products taken exactly: a count beyond 64 bits
 * never matches; the message names the argument); TLRT_ERR_OVERFLOW (an output extent beyond 64
 * bits, or an output beyond TLRT_MAX_ELEMENTS); TLRT_ERR_OUT_OF_MEMORY (outputs or scratch);
 * TLRT_ERR_LIBRARY (cuBLAS); TLRT_ERR_CUDA; TLRT_ERR_DEVICE_LOST. On failure every out-parameter
 * is NULL and nothing leaks. */
#ifndef TLRT_CONV_H
#define TLRT_CONV_H

#include "tlrt_buffer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* N-D convolution forward (DEFINITIONS above). rank in 1 .. 8; in_spatial, kernel_size, stride,
 * padding: rank values each; dilation: rank values, or NULL for all 1. kernel has out_channels *
 * (in_channels / groups) * prod(kernel_size) elements; bias is NULL or has out_channels; input has
 * batch * in_channels * prod(in_spatial). out: (batch, out_channels, out_spatial...) with the
 * convolution's out[d] above. Upstream: torchlean_cuda_buffer_conv_fwd (no batch, dilation or
 * groups). */
TLRT_API tlrt_status tlrt_conv_fwd(const tlrt_buffer *kernel, const tlrt_buffer *bias,
                                   const tlrt_buffer *input, uint64_t batch, uint64_t in_channels,
                                   uint64_t out_channels, const uint64_t *in_spatial,
                                   uint32_t rank, const uint64_t *kernel_size,
                                   const uint64_t *stride, const uint64_t *padding,
                                   const uint64_t *dilation, uint64_t groups, tlrt_buffer **out);

/* N-D convolution backward: d_kernel (kernel's shape), d_bias (out_channels) and d_input (input's
 * shape) of tlrt_conv_fwd with the same geometry, from its kernel and input and grad_out (the
 * forward output's shape, batch * out_channels * prod(out)). Each out-parameter may be NULL to
 * skip that gradient; at least one must be non-NULL. The bias itself is not needed. */
TLRT_API tlrt_status tlrt_conv_bwd(const tlrt_buffer *kernel, const tlrt_buffer *input,
                                   const tlrt_buffer *grad_out, uint64_t batch,
                                   uint64_t in_channels, uint64_t out_channels,
                                   const uint64_t *in_spatial, uint32_t rank,
                                   const uint64_t *kernel_size,
                                   const uint64_t *stride, const uint64_t *padding,
                                   const uint64_t *dilation, uint64_t groups,
                                   tlrt_buffer **d_kernel, tlrt_buffer **d_bias,
                                   tlrt_buffer **d_input);

/* 2-D convolution forward: tlrt_conv_fwd with rank 2, in_spatial = (in_h, in_w), kernel_size =
 * (kernel_h, kernel_w), stride = (stride_h, stride_w), padding = (pad_h, pad_w), dilation =
 * (dilation_h, dilation_w). Upstream's torchlean_cuda_buffer_conv2d_fwd(inC, inH, inW, outC, kH,
 * kW, stride, padding) is batch = 1, stride_h = stride_w = stride, pad_h = pad_w = padding,
 * dilation 1, groups 1. out: (batch, out_channels, out_h, out_w). */
TLRT_API tlrt_status tlrt_conv2d_fwd(const tlrt_buffer *kernel, const tlrt_buffer *bias,
                                     const tlrt_buffer *input, uint64_t batch,
                                     uint64_t in_channels, uint64_t in_h, uint64_t in_w,
                                     uint64_t out_channels, uint64_t kernel_h, uint64_t kernel_w,
                                     uint64_t stride_h, uint64_t stride_w, uint64_t pad_h,
                                     uint64_t pad_w, uint64_t dilation_h, uint64_t dilation_w,
                                     uint64_t groups, tlrt_buffer **out);

/* 2-D convolution backward: tlrt_conv_bwd with the 2-D geometry of tlrt_conv2d_fwd. */
TLRT_API tlrt_status tlrt_conv2d_bwd(const tlrt_buffer *kernel, const tlrt_buffer *input,
                                     const tlrt_buffer *grad_out, uint64_t batch,
                                     uint64_t in_channels, uint64_t in_h, uint64_t in_w,
                                     uint64_t out_channels, uint64_t kernel_h, uint64_t kernel_w,
                                     uint64_t stride_h, uint64_t stride_w, uint64_t pad_h,
                                     uint64_t pad_w, uint64_t dilation_h, uint64_t dilation_w,
                                     uint64_t groups, tlrt_buffer **d_kernel,
                                     tlrt_buffer **d_bias, tlrt_buffer **d_input);

/* N-D transposed convolution forward (DEFINITIONS above; PyTorch's conv_transpose with
 * output_padding 0). kernel has in_channels * (out_channels / groups) * prod(kernel_size)
 * elements; bias is NULL or has out_channels; input has batch * in_channels * prod(in_spatial).
 * out: (batch, out_channels, out_spatial...) with the transposed out[d] above. Upstream:
 * torchlean_cuda_buffer_convtranspose_fwd. */
TLRT_API tlrt_status tlrt_convtranspose_fwd(const tlrt_buffer *kernel, const tlrt_buffer *bias,
                                            const tlrt_buffer *input, uint64_t batch,
                                            uint64_t in_channels, uint64_t out_channels,
                                            const uint64_t *in_spatial, uint32_t rank,
                                            const uint64_t *kernel_size, const uint64_t *stride,
                                            const uint64_t *padding, const uint64_t *dilation,
                                            uint64_t groups, tlrt_buffer **out);

/* N-D transposed convolution backward: d_kernel, d_bias (out_channels), d_input of
 * tlrt_convtranspose_fwd, from its kernel, input and grad_out (batch * out_channels * prod(out)).
 * NULL out-parameters skip that gradient; at least one must be non-NULL. d_input is the
 * convolution of grad_out with the kernel (no bias). */
TLRT_API tlrt_status tlrt_convtranspose_bwd(const tlrt_buffer *kernel, const tlrt_buffer *input,
                                            const tlrt_buffer *grad_out, uint64_t batch,
                                            uint64_t in_channels, uint64_t out_channels,
                                            const uint64_t *in_spatial, uint32_t rank,
                                            const uint64_t *kernel_size, const uint64_t *stride,
                                            const uint64_t *padding, const uint64_t *dilation,
                                            uint64_t groups, tlrt_buffer **d_kernel,
                                            tlrt_buffer **d_bias, tlrt_buffer **d_input);

/* 2-D transposed convolution forward: tlrt_convtranspose_fwd with rank 2 and the 2-D argument
 * names of tlrt_conv2d_fwd. out: (batch, out_channels, out_h, out_w). */
TLRT_API tlrt_status tlrt_convtranspose2d_fwd(
    const tlrt_buffer *kernel, const tlrt_buffer *bias, const tlrt_buffer *input, uint64_t batch,
    uint64_t in_channels, uint64_t in_h, uint64_t in_w, uint64_t out_channels, uint64_t kernel_h,
    uint64_t kernel_w, uint64_t stride_h, uint64_t stride_w, uint64_t pad_h, uint64_t pad_w,
    uint64_t dilation_h, uint64_t dilation_w, uint64_t groups, tlrt_buffer **out);

/* 2-D transposed convolution backward: tlrt_convtranspose_bwd with the 2-D geometry. */
TLRT_API tlrt_status tlrt_convtranspose2d_bwd(
    const tlrt_buffer *kernel, const tlrt_buffer *input, const tlrt_buffer *grad_out,
    uint64_t batch, uint64_t in_channels, uint64_t in_h, uint64_t in_w, uint64_t out_channels,
    uint64_t kernel_h, uint64_t kernel_w, uint64_t stride_h, uint64_t stride_w, uint64_t pad_h,
    uint64_t pad_w, uint64_t dilation_h, uint64_t dilation_w, uint64_t groups,
    tlrt_buffer **d_kernel, tlrt_buffer **d_bias, tlrt_buffer **d_input);

/* ---- geometry as data (ABI 1.1) --------------------------------------------------------------
 *
 * tlrt_conv_geometry holds the geometry arguments of the N-D entry points above (batch,
 * in_channels, out_channels, rank, in_spatial, kernel_size, stride, padding, dilation, groups) as
 * one value whose fields are set by name: no two same-typed arguments can be swapped unnoticed,
 * and one value describes a layer for its forward, its backward and tlrt_conv_output_dims. The
 * *_geom entry points take it in place of those arguments and are otherwise the N-D functions:
 * the same buffers in the same order, bitwise the same results, the same checks in the same
 * order with the same status codes (the checks of the struct itself come where the geometry's
 * come, after the buffers'); messages name a field as "argument geometry->kernel_size[1]".
 *
 * LAYOUT. Every field is a uint64_t, so there is no padding and the layout is the same in every
 * language: 46 fields, 368 bytes in this version. Each array has TLRT_CONV_MAX_RANK entries, of
 * which entries 0 .. rank - 1 are read and the rest are ignored.
 *   struct_size   the caller sets sizeof(tlrt_conv_geometry) (the size its header declares).
 *                 Below 368 bytes (this first version's layout): TLRT_ERR_INVALID_ARGUMENT. Later
 *                 versions only append fields, each meaning this version's behaviour when zero;
 *                 so a larger struct_size (a newer header) is accepted when every byte past the
 *                 fields this library knows is zero, and is TLRT_ERR_INVALID_ARGUMENT otherwise
 *                 (a request this library cannot honour), as is a struct_size above 4096 (not a
 *                 size any version will have: an unset field). The library reads struct_size
 *                 bytes, never more.
 *   rank          the number of spatial axes, 1 .. TLRT_CONV_MAX_RANK (64-bit: 2^32 + 2 is
 *                 rejected, not truncated to 2).
 *   batch         images per call (the leading axis of input and output).
 *   in_channels   channels of the input; a multiple of groups (may be 0: LAYOUT, EMPTY CASES).
 *   out_channels  channels of the output; a multiple of groups (may be 0).
 *   groups        at least 1 (Groups above).
 *   in_spatial    the input's spatial extents in[d] (for the transposed convolution: its input,
 *                 i.e. the output of the convolution it is the adjoint of).
 *   kernel_size   the kernel's spatial extents k[d], each at least 1.
 *   stride        s[d], each at least 1.
 *   padding       p[d]: zero cells before and after axis d (GEOMETRY above).
 *   dilation      dil[d], each at least 1 (1: a contiguous window). Unlike the dilation array of
 *                 tlrt_conv_fwd there is no NULL shortcut: write 1, since 0 is invalid.
 * A struct filled with zeros is never valid (rank 0), so a forgotten field fails loudly. C hosts
 * write `tlrt_conv_geometry g = {0}; g.struct_size = sizeof g; g.rank = 2; ...`. */

/* The most spatial axes of a geometry (the rank limit of every entry point of this header). */
#define TLRT_CONV_MAX_RANK 8u
/* The most output dimensions, (batch, out_channels, out[0], ..., out[rank - 1]): a capacity of
 * tlrt_conv_output_dims that always suffices. */
#define TLRT_CONV_MAX_DIMS (TLRT_CONV_MAX_RANK + 2u)

typedef struct tlrt_conv_geometry {
  uint64_t struct_size;                     /* sizeof(tlrt_conv_geometry), set by the caller */
  uint64_t rank;                            /* spatial axes, 1 .. TLRT_CONV_MAX_RANK */
  uint64_t batch;                           /* images */
  uint64_t in_channels;                     /* a multiple of groups */
  uint64_t out_channels;                    /* a multiple of groups */
  uint64_t groups;                          /* >= 1 */
  uint64_t in_spatial[TLRT_CONV_MAX_RANK];  /* in[d], d < rank */
  uint64_t kernel_size[TLRT_CONV_MAX_RANK]; /* k[d] >= 1 */
  uint64_t stride[TLRT_CONV_MAX_RANK];      /* s[d] >= 1 */
  uint64_t padding[TLRT_CONV_MAX_RANK];     /* p[d] */
  uint64_t dilation[TLRT_CONV_MAX_RANK];    /* dil[d] >= 1 */
} tlrt_conv_geometry;

/* tlrt_conv_fwd with the geometry as one tlrt_conv_geometry. Errors: those of tlrt_conv_fwd
 * (no geometry array can be NULL) plus TLRT_ERR_NULL_ARGUMENT (geometry NULL) and
 * TLRT_ERR_INVALID_ARGUMENT (struct_size, as above). */
TLRT_API tlrt_status tlrt_conv_fwd_geom(const tlrt_buffer *kernel, const tlrt_buffer *bias,
                                        const tlrt_buffer *input,
                                        const tlrt_conv_geometry *geometry, tlrt_buffer **out);

/* tlrt_conv_bwd with the geometry as one tlrt_conv_geometry (errors as tlrt_conv_fwd_geom). */
TLRT_API tlrt_status tlrt_conv_bwd_geom(const tlrt_buffer *kernel, const tlrt_buffer *input,
                                        const tlrt_buffer *grad_out,
                                        const tlrt_conv_geometry *geometry,
                                        tlrt_buffer **d_kernel, tlrt_buffer **d_bias,
                                        tlrt_buffer **d_input);

/* tlrt_convtranspose_fwd with the geometry as one tlrt_conv_geometry (errors as
 * tlrt_conv_fwd_geom). */
TLRT_API tlrt_status tlrt_convtranspose_fwd_geom(const tlrt_buffer *kernel,
                                                 const tlrt_buffer *bias,
                                                 const tlrt_buffer *input,
                                                 const tlrt_conv_geometry *geometry,
                                                 tlrt_buffer **out);

/* tlrt_convtranspose_bwd with the geometry as one tlrt_conv_geometry (errors as
 * tlrt_conv_fwd_geom). */
TLRT_API tlrt_status tlrt_convtranspose_bwd_geom(const tlrt_buffer *kernel,
                                                 const tlrt_buffer *input,
                                                 const tlrt_buffer *grad_out,
                                                 const tlrt_conv_geometry *geometry,
                                                 tlrt_buffer **d_kernel, tlrt_buffer **d_bias,
                                                 tlrt_buffer **d_input);

/* The output shape of the convolution of `geometry`, without buffers, so that hosts need not
 * re-implement the GEOMETRY formulas: dims[0 .. *rank - 1] = (batch, out_channels, out[0], ...,
 * out[geometry->rank - 1]) with the convolution's out[d], *rank = geometry->rank + 2, and
 * *elements = their product, the element count of tlrt_conv_fwd_geom's output (and of the
 * grad_out tlrt_conv_bwd_geom expects). capacity is the number of entries dims has room for;
 * every one of them is written (those past *rank with 0); TLRT_CONV_MAX_DIMS always suffices.
 * Validation: exactly the checks of tlrt_conv_fwd_geom that need no buffer, in the same order and
 * with the same status codes: TLRT_ERR_NULL_ARGUMENT (geometry, dims, rank or elements NULL);
 * TLRT_ERR_INVALID_ARGUMENT (struct_size; rank 0 or above TLRT_CONV_MAX_RANK; a kernel extent,
 * stride or dilation 0; groups 0; in_channels or out_channels not divisible by groups; a
 * non-empty problem reaching the 2^62 index limit of ERRORS above); TLRT_ERR_OVERFLOW (an output
 * extent beyond 64 bits, or more than TLRT_MAX_ELEMENTS output elements); and TLRT_ERR_SHAPE
 * (capacity below geometry->rank + 2; checked last). Not checked, because they need buffers or a
 * device: the buffer sizes (TLRT_ERR_SHAPE) and the CUDA-only INT_MAX limits. On failure *rank
 * and *elements are 0 and dims[0 .. capacity - 1] are 0. Numeric class: exact (integers). */
TLRT_API tlrt_status tlrt_conv_output_dims(const tlrt_conv_geometry *geometry, uint64_t *dims,
                                           uint32_t capacity, uint32_t *rank,
                                           uint64_t *elements);

/* tlrt_conv_output_dims for the transposed convolution: out[d] is the transposed out[d] of
 * GEOMETRY above, the output of tlrt_convtranspose_fwd_geom (and the grad_out of
 * tlrt_convtranspose_bwd_geom). Validation as tlrt_conv_output_dims, with the transposed
 * convolution's checks (the 2^62 limit applies to its output extents). */
TLRT_API tlrt_status tlrt_convtranspose_output_dims(const tlrt_conv_geometry *geometry,
                                                    uint64_t *dims, uint32_t capacity,
                                                    uint32_t *rank, uint64_t *elements);

#ifdef __cplusplus
}
#endif

#endif /* TLRT_CONV_H */
