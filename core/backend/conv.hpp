// Backend interface: convolution. Defined by stub/conv.cpp (im2col / col2im and matrix products)
// and cuda/conv.cu (how it chooses its kernels: docs/kernels/conv.md). Numeric class "library"
// (abi/tlrt_conv.h): the backends do not agree bit for bit.
//
// Everything is stated for the CONVOLUTION view: the transposed convolution is its adjoint, so
// core passes the geometry of the convolution whose input is the transposed output (conv in_c =
// transposed out_channels, conv out_c = transposed in_channels, conv in = transposed out, conv out
// = transposed in) and calls conv_bwd_input for its forward, conv_fwd for its input gradient and
// conv_bwd_kernel with the roles of x and dy swapped for its kernel gradient.
//
// Core has validated the geometry and the sizes, allocated the outputs and handled every empty
// case: batch, in_c, out_c, groups, every in[d], out[d], kernel[d], stride[d], dilation[d] >= 1
// here, in_c and out_c are multiples of groups, and every count below fits in 64 bits (and below
// TLRT_MAX_ELEMENTS). On CUDA, kg = in_c / groups * ksz, out_c / groups and out_sp are <= INT_MAX
// (the cuBLAS limit, checked by core). Inputs and outputs do not alias. Scratch is the backend's
// own (CUDA: the stream-ordered pool); nothing synchronises. policy is the call's matrix-product
// policy (core/backend/policy.hpp), resolved once by core: policy.allow_tf32 lets CUDA round the
// products' inputs to TF32, and the CPU's products run under policy.cpu_isa_cap.
#pragma once

#include <cstdint>

#include "core/backend/policy.hpp"

namespace tlrt {

constexpr uint32_t kConvMaxRank = 8;

// Plain data, passed by value (CUDA: as a kernel parameter).
struct ConvShape {
  uint32_t rank;
  uint64_t batch, in_c, out_c, groups;
  uint64_t in[kConvMaxRank], out[kConvMaxRank];
  uint64_t kernel[kConvMaxRank], stride[kConvMaxRank], pad[kConvMaxRank],
      dilation[kConvMaxRank];
  uint64_t in_sp, out_sp, ksz;  // prod(in), prod(out), prod(kernel)
};

}  // namespace tlrt

#define TLRT_CONV_BACKEND_API                                                                  \
  /* y (batch, out_c, out...) = conv(x (batch, in_c, in...), w (out_c, in_c / groups, k...))  \
     + bias[o] (bias NULL: no bias). */                                                       \
  void conv_fwd(int dev, const ::tlrt::ConvShape &s, const float *x, const float *w,          \
                const float *bias, const ::tlrt::MatmulPolicy &policy, float *y);             \
  /* dx (batch, in_c, in...) = the adjoint of conv_fwd (without bias) applied to dy (batch,    \
     out_c, out...), plus bias_in[c] per input channel when bias_in is not NULL (the         \
     transposed convolution's bias). */                                                       \
  void conv_bwd_input(int dev, const ::tlrt::ConvShape &s, const float *dy, const float *w,   \
                      const float *bias_in, const ::tlrt::MatmulPolicy &policy, float *dx);   \
  /* dw (out_c, in_c / groups, k...) = sum over images n = 0, 1, ... (in that order) of the    \
     product of dy[n] (out_c, out...) and the im2col of x[n]. */                               \
  void conv_bwd_kernel(int dev, const ::tlrt::ConvShape &s, const float *x, const float *dy,  \
                       const ::tlrt::MatmulPolicy &policy, float *dw);                        \
  /* out[c] = sum over n < batch and l < spatial of t[(n * channels + c) * spatial + l], in a  \
     fixed order; batch, channels, spatial >= 1. */                                           \
  void channel_sum(int dev, const float *t, uint64_t batch, uint64_t channels,                \
                   uint64_t spatial, float *out);                                             \
  /* out[(n * channels + c) * spatial + l] = bias[c]; batch, channels, spatial >= 1. */        \
  void channel_fill(int dev, const float *bias, uint64_t batch, uint64_t channels,            \
                    uint64_t spatial, float *out);

namespace tlrt {
namespace stub {
TLRT_CONV_BACKEND_API
}
namespace cuda {
TLRT_CONV_BACKEND_API
}
}  // namespace tlrt
