// Pooling entry points (abi/tlrt_pool.h): validate (geometry through core/conv_geometry.hpp),
// allocate the output, handle the empty cases, dispatch. The 2-D names pass their scalars as
// rank-2 arrays to the same implementation as the N-D names. The backends only see a geometry with
// at least one batch-channel plane, nonempty input and output extents and a real cell in every
// window. The determinism switch is not consulted: no backend path uses atomics.
#include <cmath>

#include "abi/tlrt_pool.h"
#include "core/backend/memory.hpp"
#include "core/backend/pool.hpp"
#include "core/buffer.hpp"
#include "core/conv_geometry.hpp"
#include "core/error.hpp"

using namespace tlrt;

namespace {

enum class Kind { Max, Avg, Smooth };

const GeometryNames kNames2d = {true, "in", "kernel", "stride", "pad", "dilation"};
const GeometryNames kNamesNd = {false, "in_spatial", "kernel", "stride", "padding", "dilation"};

// The geometry arguments of one call, 2-D scalars already packed into arrays.
struct Geo {
  const GeometryNames &names;
  uint64_t batch, channels;
  uint32_t rank;
  const uint64_t *in, *kernel, *stride, *pad;
};

float check_beta(double beta) {
  if (!std::isfinite(beta) || beta == 0.0)
    fail(TLRT_ERR_INVALID_ARGUMENT, "argument beta = %g must be finite and nonzero", beta);
  const float b = to_f32(beta);
  if (!std::isfinite(b) || b == 0.0f)
    fail(TLRT_ERR_INVALID_ARGUMENT,
         "argument beta = %g rounds to %g in float32 (it must stay finite and nonzero)", beta,
         (double)b);
  return b;
}

ConvGeometry geometry(const Geo &a) {
  return conv_geometry(a.names, a.batch, a.channels, a.rank, a.in, a.kernel, a.stride, a.pad,
                       nullptr, /*pool=*/true);
}

// Forward of any kind: x -> out.
void forward(Kind kind, const tlrt_buffer *x, const Geo &a, bool include_pad, double beta,
             tlrt_buffer **out) {
  clear_out(out, "out");
  const tlrt_buffer &X = input(x, "x");
  const ConvGeometry g = geometry(a);
  check_input_size(g, a.names, X, "x", a.batch, a.channels);
  const float b = kind == Kind::Smooth ? check_beta(beta) : 0.0f;
  check_creatable(g.out_overflow, g.out_elems, "argument out");
  Owned Y = new_buffer(X.dev, g.out_elems);
  if (g.out_elems != 0) {
    switch (kind) {
      case Kind::Max:
        TLRT_DISPATCH(X.dev, maxpool_fwd, X.dev.ordinal, g, X.data, Y->data);
        break;
      case Kind::Avg:
        TLRT_DISPATCH(X.dev, avgpool_fwd, X.dev.ordinal, g, X.data, include_pad, Y->data);
        break;
      case Kind::Smooth:
        TLRT_DISPATCH(X.dev, smooth_maxpool_fwd, X.dev.ordinal, g, X.data, b, Y->data);
        break;
    }
  }
  *out = Y.release();
}

// Backward of max / smooth max: (x, dy) -> dx.
void backward_x(Kind kind, const tlrt_buffer *x, const tlrt_buffer *dy, const Geo &a, double beta,
                tlrt_buffer **dx) {
  clear_out(dx, "dx");
  const tlrt_buffer &X = input(x, "x");
  const tlrt_buffer &DY = input(dy, "dy");
  same_device(X, "x", DY, "dy");
  const ConvGeometry g = geometry(a);
  check_input_size(g, a.names, X, "x", a.batch, a.channels);
  check_output_grad_size(g, DY, "dy", a.batch, a.channels);
  const float b = kind == Kind::Smooth ? check_beta(beta) : 0.0f;
  Owned DX = new_buffer(X.dev, g.in_elems);
  if (g.in_elems != 0 && g.out_elems == 0) {
    TLRT_DISPATCH(X.dev, fill, X.dev.ordinal, DX->data, 0.0f, g.in_elems);
  } else if (g.in_elems != 0) {
    if (kind == Kind::Max)
      TLRT_DISPATCH(X.dev, maxpool_bwd, X.dev.ordinal, g, X.data, DY.data, DX->data);
    else
      TLRT_DISPATCH(X.dev, smooth_maxpool_bwd, X.dev.ordinal, g, X.data, DY.data, b, DX->data);
  }
  *dx = DX.release();
}

// Backward of average pool: dy -> dx.
void backward_avg(const tlrt_buffer *dy, const Geo &a, bool include_pad, tlrt_buffer **dx) {
  clear_out(dx, "dx");
  const tlrt_buffer &DY = input(dy, "dy");
  const ConvGeometry g = geometry(a);
  check_output_grad_size(g, DY, "dy", a.batch, a.channels);
  check_creatable(g.in_overflow, g.in_elems, "argument dx");
  Owned DX = new_buffer(DY.dev, g.in_elems);
  if (g.in_elems != 0 && g.out_elems == 0)
    TLRT_DISPATCH(DY.dev, fill, DY.dev.ordinal, DX->data, 0.0f, g.in_elems);
  else if (g.in_elems != 0)
    TLRT_DISPATCH(DY.dev, avgpool_bwd, DY.dev.ordinal, g, DY.data, include_pad, DX->data);
  *dx = DX.release();
}

}  // namespace

// The 2-D argument list and its packing into a rank-2 Geo.
#define TLRT_POOL2D_PARAMS                                                                   \
  uint64_t batch, uint64_t channels, uint64_t in_h, uint64_t in_w, uint64_t kernel_h,        \
      uint64_t kernel_w, uint64_t stride_h, uint64_t stride_w, uint64_t pad_h, uint64_t pad_w
#define TLRT_POOL2D_GEO                                                                      \
  const uint64_t in_[2] = {in_h, in_w}, k_[2] = {kernel_h, kernel_w},                        \
                 s_[2] = {stride_h, stride_w}, p_[2] = {pad_h, pad_w};                       \
  const Geo geo{kNames2d, batch, channels, 2, in_, k_, s_, p_}
#define TLRT_POOLND_PARAMS                                                                   \
  uint64_t batch, uint64_t channels, const uint64_t *in_spatial, uint32_t rank,              \
      const uint64_t *kernel, const uint64_t *stride, const uint64_t *padding
#define TLRT_POOLND_GEO \
  const Geo geo{kNamesNd, batch, channels, rank, in_spatial, kernel, stride, padding}

extern "C" {

TLRT_API tlrt_status tlrt_maxpool2d_fwd(const tlrt_buffer *x, TLRT_POOL2D_PARAMS,
                                        tlrt_buffer **out) {
  if (out) *out = nullptr;
  return guarded(__func__, [&] {
    TLRT_POOL2D_GEO;
    forward(Kind::Max, x, geo, false, 0.0, out);
  });
}

TLRT_API tlrt_status tlrt_maxpool2d_bwd(const tlrt_buffer *x, const tlrt_buffer *dy,
                                        TLRT_POOL2D_PARAMS, tlrt_buffer **dx) {
  if (dx) *dx = nullptr;
  return guarded(__func__, [&] {
    TLRT_POOL2D_GEO;
    backward_x(Kind::Max, x, dy, geo, 0.0, dx);
  });
}

TLRT_API tlrt_status tlrt_maxpool_fwd(const tlrt_buffer *x, TLRT_POOLND_PARAMS,
                                      tlrt_buffer **out) {
  if (out) *out = nullptr;
  return guarded(__func__, [&] {
    TLRT_POOLND_GEO;
    forward(Kind::Max, x, geo, false, 0.0, out);
  });
}

TLRT_API tlrt_status tlrt_maxpool_bwd(const tlrt_buffer *x, const tlrt_buffer *dy,
                                      TLRT_POOLND_PARAMS, tlrt_buffer **dx) {
  if (dx) *dx = nullptr;
  return guarded(__func__, [&] {
    TLRT_POOLND_GEO;
    backward_x(Kind::Max, x, dy, geo, 0.0, dx);
  });
}

TLRT_API tlrt_status tlrt_avgpool2d_fwd(const tlrt_buffer *x, TLRT_POOL2D_PARAMS,
                                        bool count_include_pad, tlrt_buffer **out) {
  if (out) *out = nullptr;
  return guarded(__func__, [&] {
    TLRT_POOL2D_GEO;
    forward(Kind::Avg, x, geo, count_include_pad, 0.0, out);
  });
}

TLRT_API tlrt_status tlrt_avgpool2d_bwd(const tlrt_buffer *dy, TLRT_POOL2D_PARAMS,
                                        bool count_include_pad, tlrt_buffer **dx) {
  if (dx) *dx = nullptr;
  return guarded(__func__, [&] {
    TLRT_POOL2D_GEO;
    backward_avg(dy, geo, count_include_pad, dx);
  });
}

TLRT_API tlrt_status tlrt_avgpool_fwd(const tlrt_buffer *x, TLRT_POOLND_PARAMS,
                                      bool count_include_pad, tlrt_buffer **out) {
  if (out) *out = nullptr;
  return guarded(__func__, [&] {
    TLRT_POOLND_GEO;
    forward(Kind::Avg, x, geo, count_include_pad, 0.0, out);
  });
}

TLRT_API tlrt_status tlrt_avgpool_bwd(const tlrt_buffer *dy, TLRT_POOLND_PARAMS,
                                      bool count_include_pad, tlrt_buffer **dx) {
  if (dx) *dx = nullptr;
  return guarded(__func__, [&] {
    TLRT_POOLND_GEO;
    backward_avg(dy, geo, count_include_pad, dx);
  });
}

TLRT_API tlrt_status tlrt_smooth_maxpool2d_fwd(const tlrt_buffer *x, TLRT_POOL2D_PARAMS,
                                               double beta, tlrt_buffer **out) {
  if (out) *out = nullptr;
  return guarded(__func__, [&] {
    TLRT_POOL2D_GEO;
    forward(Kind::Smooth, x, geo, false, beta, out);
  });
}

TLRT_API tlrt_status tlrt_smooth_maxpool2d_bwd(const tlrt_buffer *x, const tlrt_buffer *dy,
                                               TLRT_POOL2D_PARAMS, double beta,
                                               tlrt_buffer **dx) {
  if (dx) *dx = nullptr;
  return guarded(__func__, [&] {
    TLRT_POOL2D_GEO;
    backward_x(Kind::Smooth, x, dy, geo, beta, dx);
  });
}

TLRT_API tlrt_status tlrt_smooth_maxpool_fwd(const tlrt_buffer *x, TLRT_POOLND_PARAMS,
                                             double beta, tlrt_buffer **out) {
  if (out) *out = nullptr;
  return guarded(__func__, [&] {
    TLRT_POOLND_GEO;
    forward(Kind::Smooth, x, geo, false, beta, out);
  });
}

TLRT_API tlrt_status tlrt_smooth_maxpool_bwd(const tlrt_buffer *x, const tlrt_buffer *dy,
                                             TLRT_POOLND_PARAMS, double beta, tlrt_buffer **dx) {
  if (dx) *dx = nullptr;
  return guarded(__func__, [&] {
    TLRT_POOLND_GEO;
    backward_x(Kind::Smooth, x, dy, geo, beta, dx);
  });
}

}  // extern "C"
