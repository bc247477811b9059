// Convolution entry points (abi/tlrt_conv.h): validate the geometry (core/conv_geometry.hpp for the
// per-axis rules, groups and the transposed output size here), check every buffer size exactly,
// allocate the outputs, handle the empty cases, dispatch. Backends get the CONVOLUTION view of
// core/backend/conv.hpp: a transposed convolution is the adjoint of the convolution whose input is
// the transposed output, so its forward is conv_bwd_input and its input gradient conv_fwd.
// The 2-D, N-D and *_geom (tlrt_conv_geometry) entry points share one implementation: each
// builds a Call, and the *_geom ones let resolve() check and unpack their struct where the
// argument lists' geometry is checked. The output-dims queries run the same plan without buffers.
#include <climits>
#include <cstddef>
#include <cstdint>
#include <string>

#include "abi/tlrt_conv.h"
#include "core/backend/conv.hpp"
#include "core/backend/memory.hpp"
#include "core/buffer.hpp"
#include "core/conv_geometry.hpp"
#include "core/error.hpp"
#include "core/settings.hpp"

using namespace tlrt;

namespace {

using ull = unsigned long long;

// Index arithmetic on the backends is signed 64-bit: coordinates lie in [-pad, in + pad).
constexpr uint64_t kCoordLimit = uint64_t{1} << 62;

// The names of a call's geometry in messages: the per-axis ones and the channel scalars.
struct ConvNames {
  GeometryNames geo;
  const char *in_c, *out_c, *groups;
};

const ConvNames kNamesNd = {
    {false, "in_spatial", "kernel_size", "stride", "padding", "dilation"},
    "in_channels", "out_channels", "groups"};
const ConvNames kNames2d = {{true, "in", "kernel", "stride", "pad", "dilation"},
                            "in_channels", "out_channels", "groups"};
const ConvNames kNamesStruct = {{false, "geometry->in_spatial", "geometry->kernel_size",
                                 "geometry->stride", "geometry->padding", "geometry->dilation",
                                 "geometry->rank", "geometry->batch", "geometry->channels"},
                                "geometry->in_channels", "geometry->out_channels",
                                "geometry->groups"};

// The first version's layout of tlrt_conv_geometry ends with dilation[]; later versions append.
constexpr uint64_t kConvGeometryV1 =
    offsetof(tlrt_conv_geometry, dilation) + sizeof(tlrt_conv_geometry::dilation);
static_assert(kConvGeometryV1 == 368 && sizeof(tlrt_conv_geometry) == kConvGeometryV1,
              "tlrt_conv_geometry version 1 is 46 uint64_t fields (abi/tlrt_conv.h)");
static_assert(TLRT_CONV_MAX_RANK == kConvMaxRank && kConvMaxRank == kMaxConvRank,
              "one rank limit for convolutions");

// One call's arguments. A *_geom call carries its struct (st) and nothing else until resolve().
struct Call {
  const char *fn;
  bool transposed;
  const ConvNames *names;
  uint64_t batch, in_c, out_c, groups;
  const uint64_t *in, *kernel, *stride, *pad, *dil;
  uint64_t rank;
  const tlrt_conv_geometry *st = nullptr;
  tlrt_conv_geometry copy{};
};

// For a *_geom call: the struct's header rules (NULL, struct_size), then its fields as the
// argument list (pointing into a checked copy).
void resolve(Call &c) {
  if (c.names != &kNamesStruct) return;
  check_geometry_struct(c.st, "tlrt_conv_geometry", kConvGeometryV1, &c.copy);
  const tlrt_conv_geometry &g = c.copy;
  c.batch = g.batch;
  c.in_c = g.in_channels;
  c.out_c = g.out_channels;
  c.groups = g.groups;
  c.rank = g.rank;
  c.in = g.in_spatial;
  c.kernel = g.kernel_size;
  c.stride = g.stride;
  c.pad = g.padding;
  c.dil = g.dilation;
}

// The validated problem: the user-facing counts and the backend's convolution view.
struct Plan {
  ConvShape view;          // convolution view (for a transposed call: the adjoint convolution)
  uint64_t x_elems;        // the caller's input: batch * in_c * prod(in)
  uint64_t y_elems;        // the caller's output: batch * out_c * prod(out)
  uint64_t w_elems;        // the kernel
  uint64_t out[kConvMaxRank];  // the caller's output extents
  uint64_t out_sp;
  bool y_overflow;             // y_elems beyond 64 bits (checked after the input sizes)
};

std::string count_text(uint64_t n, bool overflow) {
  return overflow ? std::string("beyond 64 bits") : std::to_string(n);
}

std::string extents_text(const uint64_t *v, uint32_t rank) {
  std::string s = "(";
  for (uint32_t d = 0; d < rank; ++d) s += (d ? " x " : "") + std::to_string(v[d]);
  return s + ")";
}

// Validates the geometry of `c` and builds the plan. Buffer sizes are checked by the callers.
Plan plan_for(const Call &c, Dev dev) {
  const ConvNames &n = *c.names;
  // Per-axis rules (rank, zero kernel / stride / dilation, conv output extents, overflow).
  const ConvGeometry g =
      conv_geometry(n.geo, c.batch, c.in_c, c.rank, c.in, c.kernel, c.stride, c.pad, c.dil,
                    /*pool=*/false);
  if (c.groups == 0)
    fail(TLRT_ERR_INVALID_ARGUMENT, "argument %s = 0: there must be at least one group",
         n.groups);
  if (c.in_c % c.groups != 0)
    fail(TLRT_ERR_INVALID_ARGUMENT, "argument %s = %llu is not divisible by argument %s = %llu",
         n.in_c, (ull)c.in_c, n.groups, (ull)c.groups);
  if (c.out_c % c.groups != 0)
    fail(TLRT_ERR_INVALID_ARGUMENT, "argument %s = %llu is not divisible by argument %s = %llu",
         n.out_c, (ull)c.out_c, n.groups, (ull)c.groups);
  const uint32_t rank = g.rank;  // validated: 1 .. kConvMaxRank
  Plan p{};
  ConvShape &v = p.view;
  v.rank = rank;
  v.batch = c.batch;
  v.groups = c.groups;
  for (uint32_t d = 0; d < rank; ++d) {
    v.kernel[d] = g.kernel[d];
    v.stride[d] = g.stride[d];
    v.pad[d] = g.pad[d];
    v.dilation[d] = g.dilation[d];
    if (!c.transposed) {
      p.out[d] = g.out[d];
    } else {
      // out = (in - 1) s - 2 p + ek when in >= 1 and positive, else 0; exact in 128 bits.
      using u128 = unsigned __int128;
      const u128 ek = (u128)g.dilation[d] * (g.kernel[d] - 1) + 1;
      const u128 span = g.in[d] == 0 ? 0 : (u128)(g.in[d] - 1) * g.stride[d] + ek;
      const u128 twop = 2 * (u128)g.pad[d];
      const u128 o = span > twop ? span - twop : 0;
      if (o > UINT64_MAX)
        fail(TLRT_ERR_OVERFLOW,
             "the transposed output extent of axis %u is beyond 64 bits (argument %s)", d,
             n.geo.two_d ? (d == 0 ? "in_h" : "in_w") : n.geo.in);
      p.out[d] = (uint64_t)o;
    }
  }
  bool ov = false;
  const uint64_t ksz = geo_detail::zero_aware_product(g.kernel, rank, 1, &ov);
  // Caller-facing counts.
  p.x_elems = g.in_elems;
  if (g.in_overflow) p.x_elems = UINT64_MAX;  // never matches a buffer (checked by the callers)
  uint64_t yf[kConvMaxRank + 1];
  yf[0] = c.out_c;
  for (uint32_t d = 0; d < rank; ++d) yf[d + 1] = p.out[d];
  p.y_elems = geo_detail::zero_aware_product(yf, rank + 1, c.batch, &ov);
  p.y_overflow = ov;
  p.out_sp = geo_detail::zero_aware_product(p.out, rank, 1, &ov);
  // Kernel: (out_c, in_c / groups, k...) or, transposed, (in_c, out_c / groups, k...).
  const uint64_t lead = c.transposed ? c.in_c : c.out_c;
  const uint64_t per = (c.transposed ? c.out_c : c.in_c) / c.groups;
  uint64_t wf[kConvMaxRank + 1];
  wf[0] = per;
  for (uint32_t d = 0; d < rank; ++d) wf[d + 1] = g.kernel[d];
  bool w_ov = false;
  p.w_elems = geo_detail::zero_aware_product(wf, rank + 1, lead, &w_ov);
  // Exact (zero-aware) count: a zero channel factor makes the kernel empty even when the kernel
  // extents alone multiply beyond 64 bits (found by fuzz_conv_geometry); ksz then never reaches a
  // backend (no input or no output: nothing to compute).
  if (w_ov) p.w_elems = UINT64_MAX;  // never matches a buffer
  // The convolution view.
  v.in_c = c.transposed ? c.out_c : c.in_c;
  v.out_c = c.transposed ? c.in_c : c.out_c;
  for (uint32_t d = 0; d < rank; ++d) {
    v.in[d] = c.transposed ? p.out[d] : g.in[d];
    v.out[d] = c.transposed ? g.in[d] : p.out[d];
  }
  v.in_sp = c.transposed ? p.out_sp : g.in_spatial;
  v.out_sp = c.transposed ? g.in_spatial : p.out_sp;
  v.ksz = ksz;
  // Limits that only matter when a backend runs (non-empty output and input).
  const bool work = p.y_elems != 0 && !p.y_overflow && p.x_elems != 0 && !g.in_overflow;
  if (work) {
    for (uint32_t d = 0; d < rank; ++d) {
      const unsigned __int128 padded = (unsigned __int128)v.in[d] + 2 * (unsigned __int128)v.pad[d];
      if (padded >= kCoordLimit)
        fail(TLRT_ERR_INVALID_ARGUMENT,
             "axis %u: %s extent %llu plus twice argument %s = %llu reaches 2^62, beyond the "
             "64-bit index arithmetic of the backends",
             d, c.transposed ? "the output" : "the input", (ull)v.in[d],
             n.geo.two_d ? (d == 0 ? "pad_h" : "pad_w") : n.geo.pad, (ull)v.pad[d]);
    }
    if (dev.cuda) {
      const uint64_t kg = (v.in_c / c.groups) * ksz;  // <= the kernel's element count: exact
      const struct {
        uint64_t v;
        const char *what;
      } dims[] = {{kg, "(convolution) in_channels / groups * prod(kernel extents)"},
                  {v.out_c / c.groups, "(convolution) out_channels / groups"},
                  {v.out_sp, "the number of (convolution) output positions"}};
      for (const auto &x : dims)
        if (x.v > (uint64_t)INT_MAX)
          fail(TLRT_ERR_INVALID_ARGUMENT,
               "%s = %llu exceeds INT_MAX (2147483647), the largest matrix dimension cuBLAS "
               "accepts (CUDA buffers; argument kernel, argument %s)",
               x.what, (ull)x.v, n.groups);
    }
  }
  return p;
}

// B must have `want` elements (UINT64_MAX: a count beyond 64 bits, never matched). what() names
// the expected count for the message; it is only built on failure (no strings on the fast path).
template <class What>
void check_count(const Buffer &B, const char *name, uint64_t want, What &&what) {
  if (B.size != want || want == UINT64_MAX)
    fail(TLRT_ERR_SHAPE, "argument %s has %llu elements, but %s = %s", name, (ull)B.size,
         what().c_str(), count_text(want, want == UINT64_MAX).c_str());
}

std::string input_text(const Call &c) {
  const ConvNames &n = *c.names;
  return std::string("argument ") + n.geo.batch + " (" + std::to_string(c.batch) +
         ") * argument " + n.in_c + " (" + std::to_string(c.in_c) + ") * " +
         (n.geo.two_d ? std::string("in_h * in_w ") : "prod(" + std::string(n.geo.in) + ") ") +
         extents_text(c.in, (uint32_t)c.rank);
}

std::string kernel_text(const Call &c) {
  return c.transposed ? "in_channels (" + std::to_string(c.in_c) + ") * out_channels / groups (" +
                            std::to_string(c.out_c / c.groups) + ") * kernel extents " +
                            extents_text(c.kernel, (uint32_t)c.rank)
                      : "out_channels (" + std::to_string(c.out_c) + ") * in_channels / groups (" +
                            std::to_string(c.in_c / c.groups) + ") * kernel extents " +
                            extents_text(c.kernel, (uint32_t)c.rank);
}

void check_inputs(const Call &c, const Plan &p, const Buffer &K, const Buffer &X) {
  check_count(X, "input", p.x_elems, [&] { return input_text(c); });
  check_count(K, "kernel", p.w_elems, [&] { return kernel_text(c); });
  check_creatable(p.y_overflow, p.y_elems, "the output");
}

tlrt_status forward(Call &c, const tlrt_buffer *kernel, const tlrt_buffer *bias,
                    const tlrt_buffer *input, tlrt_buffer **out) {
  if (out) *out = nullptr;
  return guarded(c.fn, [&] {
    clear_out(out, "out");
    const Buffer &K = ::tlrt::input(kernel, "kernel");
    const Buffer &X = ::tlrt::input(input, "input");
    same_device(X, "input", K, "kernel");
    const Buffer *B = nullptr;
    if (bias != nullptr) {
      B = &::tlrt::input(bias, "bias");
      same_device(X, "input", *B, "bias");
    }
    resolve(c);
    const Plan p = plan_for(c, X.dev);
    check_inputs(c, p, K, X);
    if (B)
      check_count(*B, "bias", c.out_c,
                  [&] { return std::string("argument ") + c.names->out_c; });
    Owned Y = new_buffer(X.dev, p.y_elems);
    if (p.y_elems != 0) {
      const uint64_t sp = p.out_sp;
      if (X.size == 0) {  // in_channels = 0 or an empty input with padding: sums of nothing
        if (B)
          TLRT_DISPATCH(X.dev, channel_fill, X.dev.ordinal, B->data, c.batch, c.out_c, sp,
                        Y->data);
        else
          TLRT_DISPATCH(X.dev, fill, X.dev.ordinal, Y->data, 0.0f, p.y_elems);
      } else if (!c.transposed) {
        TLRT_DISPATCH(X.dev, conv_fwd, X.dev.ordinal, p.view, X.data, K.data,
                      B ? B->data : nullptr, matmul_policy(), Y->data);
      } else {
        TLRT_DISPATCH(X.dev, conv_bwd_input, X.dev.ordinal, p.view, X.data, K.data,
                      B ? B->data : nullptr, matmul_policy(), Y->data);
      }
    }
    *out = Y.release();
  });
}

tlrt_status backward(Call &c, const tlrt_buffer *kernel, const tlrt_buffer *input,
                     const tlrt_buffer *grad_out, tlrt_buffer **d_kernel, tlrt_buffer **d_bias,
                     tlrt_buffer **d_input) {
  if (d_kernel) *d_kernel = nullptr;
  if (d_bias) *d_bias = nullptr;
  if (d_input) *d_input = nullptr;
  return guarded(c.fn, [&] {
    if (!d_kernel && !d_bias && !d_input)
      fail(TLRT_ERR_NULL_ARGUMENT,
           "argument d_kernel, argument d_bias and argument d_input are all NULL: at least one "
           "gradient must be requested");
    const Buffer &K = ::tlrt::input(kernel, "kernel");
    const Buffer &X = ::tlrt::input(input, "input");
    const Buffer &DY = ::tlrt::input(grad_out, "grad_out");
    same_device(X, "input", K, "kernel");
    same_device(X, "input", DY, "grad_out");
    resolve(c);
    const Plan p = plan_for(c, X.dev);
    check_inputs(c, p, K, X);
    check_count(DY, "grad_out", p.y_elems, [&] {
      return std::string("argument ") + c.names->geo.batch + " (" + std::to_string(c.batch) +
             ") * argument " + c.names->out_c + " (" + std::to_string(c.out_c) +
             ") * the output extents " + extents_text(p.out, (uint32_t)c.rank);
    });
    const Dev dev = X.dev;
    const int o = dev.ordinal;
    // Backends run only when both the output and the input are non-empty (then the kernel is).
    const bool work = p.y_elems != 0 && X.size != 0;
    const MatmulPolicy policy = matmul_policy();  // once: every gradient under the same policy
    Owned DK, DB, DX;
    if (d_kernel) {
      DK = new_buffer(dev, K.size);
      if (K.size != 0) {
        if (!work)
          TLRT_DISPATCH(dev, fill, o, DK->data, 0.0f, K.size);
        else if (!c.transposed)
          TLRT_DISPATCH(dev, conv_bwd_kernel, o, p.view, X.data, DY.data, policy, DK->data);
        else  // the adjoint convolution's input is grad_out, its output gradient is input
          TLRT_DISPATCH(dev, conv_bwd_kernel, o, p.view, DY.data, X.data, policy, DK->data);
      }
    }
    if (d_bias) {
      DB = new_buffer(dev, c.out_c);
      if (c.out_c != 0) {
        if (p.y_elems == 0)
          TLRT_DISPATCH(dev, fill, o, DB->data, 0.0f, c.out_c);
        else
          TLRT_DISPATCH(dev, channel_sum, o, DY.data, c.batch, c.out_c, p.out_sp, DB->data);
      }
    }
    if (d_input) {
      DX = new_buffer(dev, X.size);
      if (X.size != 0) {
        if (!work)
          TLRT_DISPATCH(dev, fill, o, DX->data, 0.0f, X.size);
        else if (!c.transposed)
          TLRT_DISPATCH(dev, conv_bwd_input, o, p.view, DY.data, K.data, nullptr, policy,
                        DX->data);
        else
          TLRT_DISPATCH(dev, conv_fwd, o, p.view, DY.data, K.data, nullptr, policy, DX->data);
      }
    }
    if (d_kernel) *d_kernel = DK.release();
    if (d_bias) *d_bias = DB.release();
    if (d_input) *d_input = DX.release();
  });
}

Call nd_call(const char *fn, bool transposed, uint64_t batch, uint64_t in_c, uint64_t out_c,
             const uint64_t *in, uint32_t rank, const uint64_t *k, const uint64_t *s,
             const uint64_t *p, const uint64_t *d, uint64_t groups) {
  return Call{fn, transposed, &kNamesNd, batch, in_c, out_c, groups, in, k, s, p, d, rank};
}

Call struct_call(const char *fn, bool transposed, const tlrt_conv_geometry *geometry) {
  Call c{fn, transposed, &kNamesStruct, 0, 0, 0, 0, nullptr, nullptr, nullptr, nullptr, nullptr, 0};
  c.st = geometry;
  return c;
}

// The checks of the forward that need no buffer (resolve, plan_for, the output's
// creatability), then the output shape (batch, out_channels, out...).
tlrt_status output_dims(const char *fn, bool transposed, const tlrt_conv_geometry *geometry,
                        uint64_t *dims, uint32_t capacity, uint32_t *rank, uint64_t *elements) {
  if (rank) *rank = 0;
  if (elements) *elements = 0;
  if (dims)
    for (uint32_t i = 0; i < capacity; ++i) dims[i] = 0;
  return guarded(fn, [&] {
    if (dims == nullptr) fail(TLRT_ERR_NULL_ARGUMENT, "argument dims is NULL");
    clear_out_value(rank, "rank");
    clear_out_value(elements, "elements");
    Call c = struct_call(fn, transposed, geometry);
    resolve(c);
    const Plan p = plan_for(c, Dev{false, 0});  // no device: the CUDA-only limits do not apply
    check_creatable(p.y_overflow, p.y_elems, "the output");
    const uint32_t r = p.view.rank, n = r + 2;
    if (capacity < n)
      fail(TLRT_ERR_SHAPE,
           "argument capacity = %u is less than the %u output dimensions (batch, out_channels "
           "and argument geometry->rank = %u spatial extents; TLRT_CONV_MAX_DIMS always "
           "suffices)",
           capacity, n, r);
    dims[0] = c.batch;
    dims[1] = c.out_c;
    for (uint32_t d = 0; d < r; ++d) dims[d + 2] = p.out[d];
    *rank = n;
    *elements = p.y_elems;
  });
}

// The 2-D entry points keep their scalars in arrays owned by the caller's frame.
struct Dims2 {
  uint64_t in[2], k[2], s[2], p[2], d[2];
};

Call call_2d(const char *fn, bool transposed, const Dims2 &a, uint64_t batch, uint64_t in_c,
             uint64_t out_c, uint64_t groups) {
  return Call{fn, transposed, &kNames2d, batch, in_c, out_c, groups, a.in, a.k, a.s, a.p, a.d, 2};
}

// Calls are built in the entry point's frame and handed to forward / backward as lvalues.
tlrt_status forward(Call &&c, const tlrt_buffer *kernel, const tlrt_buffer *bias,
                    const tlrt_buffer *input, tlrt_buffer **out) {
  return forward(c, kernel, bias, input, out);
}

tlrt_status backward(Call &&c, const tlrt_buffer *kernel, const tlrt_buffer *input,
                     const tlrt_buffer *grad_out, tlrt_buffer **d_kernel, tlrt_buffer **d_bias,
                     tlrt_buffer **d_input) {
  return backward(c, kernel, input, grad_out, d_kernel, d_bias, d_input);
}

}  // namespace

extern "C" {

TLRT_API tlrt_status tlrt_conv_fwd(const tlrt_buffer *kernel, const tlrt_buffer *bias,
                                   const tlrt_buffer *input, uint64_t batch, uint64_t in_channels,
                                   uint64_t out_channels, const uint64_t *in_spatial,
                                   uint32_t rank, const uint64_t *kernel_size,
                                   const uint64_t *stride, const uint64_t *padding,
                                   const uint64_t *dilation, uint64_t groups, tlrt_buffer **out) {
  return forward(nd_call(__func__, false, batch, in_channels, out_channels, in_spatial, rank,
                         kernel_size, stride, padding, dilation, groups),
                 kernel, bias, input, out);
}

TLRT_API tlrt_status tlrt_conv_bwd(const tlrt_buffer *kernel, const tlrt_buffer *input,
                                   const tlrt_buffer *grad_out, uint64_t batch,
                                   uint64_t in_channels, uint64_t out_channels,
                                   const uint64_t *in_spatial, uint32_t rank,
                                   const uint64_t *kernel_size, const uint64_t *stride,
                                   const uint64_t *padding, const uint64_t *dilation,
                                   uint64_t groups, tlrt_buffer **d_kernel, tlrt_buffer **d_bias,
                                   tlrt_buffer **d_input) {
  return backward(nd_call(__func__, false, batch, in_channels, out_channels, in_spatial, rank,
                          kernel_size, stride, padding, dilation, groups),
                  kernel, input, grad_out, d_kernel, d_bias, d_input);
}

TLRT_API tlrt_status tlrt_conv2d_fwd(const tlrt_buffer *kernel, const tlrt_buffer *bias,
                                     const tlrt_buffer *input, uint64_t batch,
                                     uint64_t in_channels, uint64_t in_h, uint64_t in_w,
                                     uint64_t out_channels, uint64_t kernel_h, uint64_t kernel_w,
                                     uint64_t stride_h, uint64_t stride_w, uint64_t pad_h,
                                     uint64_t pad_w, uint64_t dilation_h, uint64_t dilation_w,
                                     uint64_t groups, tlrt_buffer **out) {
  const Dims2 a{{in_h, in_w}, {kernel_h, kernel_w}, {stride_h, stride_w}, {pad_h, pad_w},
                {dilation_h, dilation_w}};
  return forward(call_2d(__func__, false, a, batch, in_channels, out_channels, groups), kernel,
                 bias, input, out);
}

TLRT_API tlrt_status tlrt_conv2d_bwd(const tlrt_buffer *kernel, const tlrt_buffer *input,
                                     const tlrt_buffer *grad_out, uint64_t batch,
                                     uint64_t in_channels, uint64_t in_h, uint64_t in_w,
                                     uint64_t out_channels, uint64_t kernel_h, uint64_t kernel_w,
                                     uint64_t stride_h, uint64_t stride_w, uint64_t pad_h,
                                     uint64_t pad_w, uint64_t dilation_h, uint64_t dilation_w,
                                     uint64_t groups, tlrt_buffer **d_kernel,
                                     tlrt_buffer **d_bias, tlrt_buffer **d_input) {
  const Dims2 a{{in_h, in_w}, {kernel_h, kernel_w}, {stride_h, stride_w}, {pad_h, pad_w},
                {dilation_h, dilation_w}};
  return backward(call_2d(__func__, false, a, batch, in_channels, out_channels, groups), kernel,
                  input, grad_out, d_kernel, d_bias, d_input);
}

TLRT_API tlrt_status tlrt_convtranspose_fwd(const tlrt_buffer *kernel, const tlrt_buffer *bias,
                                            const tlrt_buffer *input, uint64_t batch,
                                            uint64_t in_channels, uint64_t out_channels,
                                            const uint64_t *in_spatial, uint32_t rank,
                                            const uint64_t *kernel_size, const uint64_t *stride,
                                            const uint64_t *padding, const uint64_t *dilation,
                                            uint64_t groups, tlrt_buffer **out) {
  return forward(nd_call(__func__, true, batch, in_channels, out_channels, in_spatial, rank,
                         kernel_size, stride, padding, dilation, groups),
                 kernel, bias, input, out);
}

TLRT_API tlrt_status tlrt_convtranspose_bwd(const tlrt_buffer *kernel, const tlrt_buffer *input,
                                            const tlrt_buffer *grad_out, uint64_t batch,
                                            uint64_t in_channels, uint64_t out_channels,
                                            const uint64_t *in_spatial, uint32_t rank,
                                            const uint64_t *kernel_size, const uint64_t *stride,
                                            const uint64_t *padding, const uint64_t *dilation,
                                            uint64_t groups, tlrt_buffer **d_kernel,
                                            tlrt_buffer **d_bias, tlrt_buffer **d_input) {
  return backward(nd_call(__func__, true, batch, in_channels, out_channels, in_spatial, rank,
                          kernel_size, stride, padding, dilation, groups),
                  kernel, input, grad_out, d_kernel, d_bias, d_input);
}

TLRT_API tlrt_status tlrt_convtranspose2d_fwd(
    const tlrt_buffer *kernel, const tlrt_buffer *bias, const tlrt_buffer *input, uint64_t batch,
    uint64_t in_channels, uint64_t in_h, uint64_t in_w, uint64_t out_channels, uint64_t kernel_h,
    uint64_t kernel_w, uint64_t stride_h, uint64_t stride_w, uint64_t pad_h, uint64_t pad_w,
    uint64_t dilation_h, uint64_t dilation_w, uint64_t groups, tlrt_buffer **out) {
  const Dims2 a{{in_h, in_w}, {kernel_h, kernel_w}, {stride_h, stride_w}, {pad_h, pad_w},
                {dilation_h, dilation_w}};
  return forward(call_2d(__func__, true, a, batch, in_channels, out_channels, groups), kernel,
                 bias, input, out);
}

TLRT_API tlrt_status tlrt_convtranspose2d_bwd(
    const tlrt_buffer *kernel, const tlrt_buffer *input, const tlrt_buffer *grad_out,
    uint64_t batch, uint64_t in_channels, uint64_t in_h, uint64_t in_w, uint64_t out_channels,
    uint64_t kernel_h, uint64_t kernel_w, uint64_t stride_h, uint64_t stride_w, uint64_t pad_h,
    uint64_t pad_w, uint64_t dilation_h, uint64_t dilation_w, uint64_t groups,
    tlrt_buffer **d_kernel, tlrt_buffer **d_bias, tlrt_buffer **d_input) {
  const Dims2 a{{in_h, in_w}, {kernel_h, kernel_w}, {stride_h, stride_w}, {pad_h, pad_w},
                {dilation_h, dilation_w}};
  return backward(call_2d(__func__, true, a, batch, in_channels, out_channels, groups), kernel,
                  input, grad_out, d_kernel, d_bias, d_input);
}

// ---- geometry as data: the same implementations, the geometry from a tlrt_conv_geometry ------

TLRT_API tlrt_status tlrt_conv_fwd_geom(const tlrt_buffer *kernel, const tlrt_buffer *bias,
                                        const tlrt_buffer *input,
                                        const tlrt_conv_geometry *geometry, tlrt_buffer **out) {
  return forward(struct_call(__func__, false, geometry), kernel, bias, input, out);
}

TLRT_API tlrt_status tlrt_conv_bwd_geom(const tlrt_buffer *kernel, const tlrt_buffer *input,
                                        const tlrt_buffer *grad_out,
                                        const tlrt_conv_geometry *geometry,
                                        tlrt_buffer **d_kernel, tlrt_buffer **d_bias,
                                        tlrt_buffer **d_input) {
  return backward(struct_call(__func__, false, geometry), kernel, input, grad_out, d_kernel,
                  d_bias, d_input);
}

TLRT_API tlrt_status tlrt_convtranspose_fwd_geom(const tlrt_buffer *kernel,
                                                 const tlrt_buffer *bias,
                                                 const tlrt_buffer *input,
                                                 const tlrt_conv_geometry *geometry,
                                                 tlrt_buffer **out) {
  return forward(struct_call(__func__, true, geometry), kernel, bias, input, out);
}

TLRT_API tlrt_status tlrt_convtranspose_bwd_geom(const tlrt_buffer *kernel,
                                                 const tlrt_buffer *input,
                                                 const tlrt_buffer *grad_out,
                                                 const tlrt_conv_geometry *geometry,
                                                 tlrt_buffer **d_kernel, tlrt_buffer **d_bias,
                                                 tlrt_buffer **d_input) {
  return backward(struct_call(__func__, true, geometry), kernel, input, grad_out, d_kernel,
                  d_bias, d_input);
}

TLRT_API tlrt_status tlrt_conv_output_dims(const tlrt_conv_geometry *geometry, uint64_t *dims,
                                           uint32_t capacity, uint32_t *rank,
                                           uint64_t *elements) {
  return output_dims(__func__, false, geometry, dims, capacity, rank, elements);
}

TLRT_API tlrt_status tlrt_convtranspose_output_dims(const tlrt_conv_geometry *geometry,
                                                    uint64_t *dims, uint32_t capacity,
                                                    uint32_t *rank, uint64_t *elements) {
  return output_dims(__func__, true, geometry, dims, capacity, rank, elements);
}

}  // extern "C"
