// Pooling entry points (abi/tlrt_pool.h): validate (geometry through core/conv_geometry.hpp),
// allocate the output, handle the empty cases, dispatch. The 2-D names pass their scalars as
// rank-2 arrays, and the *_geom names their tlrt_pool_geometry, to the same implementation as the
// N-D names; tlrt_pool_output_dims runs that implementation's geometry checks without buffers.
// The backends only see a geometry with at least one batch-channel plane, nonempty input and
// output extents and a real cell in every window. The determinism switch is not consulted: no
// backend path uses atomics.
#include <cmath>
#include <cstddef>

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
const GeometryNames kNamesStruct = {false,
                                    "geometry->in_spatial",
                                    "geometry->kernel",
                                    "geometry->stride",
                                    "geometry->padding",
                                    "geometry->dilation",
                                    "geometry->rank",
                                    "geometry->batch",
                                    "geometry->channels"};

// The first version's layout of tlrt_pool_geometry ends with padding[]; later versions append.
constexpr uint64_t kPoolGeometryV1 =
    offsetof(tlrt_pool_geometry, padding) + sizeof(tlrt_pool_geometry::padding);
static_assert(kPoolGeometryV1 == 288 && sizeof(tlrt_pool_geometry) == kPoolGeometryV1,
              "tlrt_pool_geometry version 1 is 36 uint64_t fields (abi/tlrt_pool.h)");
static_assert(TLRT_POOL_MAX_RANK == kMaxConvRank, "one rank limit for pools");

// The geometry arguments of one call, 2-D scalars already packed into arrays. A *_geom call
// carries its struct instead (st, with the arrays unset) until resolve() has checked and copied
// it, at the point where the argument lists' geometry is checked.
struct Geo {
  const GeometryNames *names;
  uint64_t batch, channels;
  uint64_t rank;
  const uint64_t *in, *kernel, *stride, *pad;
  const tlrt_pool_geometry *st = nullptr;
  tlrt_pool_geometry copy{};
};

Geo nd_geo(uint64_t batch, uint64_t channels, const uint64_t *in, uint32_t rank,
           const uint64_t *kernel, const uint64_t *stride, const uint64_t *pad) {
  Geo g{&kNamesNd, batch, channels, rank, in, kernel, stride, pad};
  return g;
}

Geo struct_geo(const tlrt_pool_geometry *st) {
  Geo g{&kNamesStruct, 0, 0, 0, nullptr, nullptr, nullptr, nullptr};
  g.st = st;
  return g;
}

// For a struct: its header rules (NULL, struct_size), then its fields as the argument list.
void resolve(Geo &a) {
  if (a.names != &kNamesStruct) return;
  check_geometry_struct(a.st, "tlrt_pool_geometry", kPoolGeometryV1, &a.copy);
  const tlrt_pool_geometry &c = a.copy;
  a.batch = c.batch;
  a.channels = c.channels;
  a.rank = c.rank;
  a.in = c.in_spatial;
  a.kernel = c.kernel;
  a.stride = c.stride;
  a.pad = c.padding;
}

// beta: the host-scalar rule (torchlean_rt.h), and nonzero before and after rounding.
float check_beta(double beta) {
  const float b = host_scalar(beta, "beta");
  if (b == 0.0f)
    fail(TLRT_ERR_INVALID_ARGUMENT,
         "argument beta = %g is 0 or rounds to 0 in float32 (it must be nonzero)", beta);
  return b;
}

// Every geometry check of a pool call that needs no buffer (the struct's header included).
ConvGeometry validate_geometry(Geo &a) {
  resolve(a);
  return conv_geometry(*a.names, a.batch, a.channels, a.rank, a.in, a.kernel, a.stride, a.pad,
                       nullptr, /*pool=*/true);
}

// Forward of any kind: x -> out.
void forward(Kind kind, const tlrt_buffer *x, Geo &a, bool include_pad, double beta,
             tlrt_buffer **out) {
  clear_out(out, "out");
  const Buffer &X = input(x, "x");
  const ConvGeometry g = validate_geometry(a);
  check_input_size(g, *a.names, X, "x", a.batch, a.channels);
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
void backward_x(Kind kind, const tlrt_buffer *x, const tlrt_buffer *dy, Geo &a, double beta,
                tlrt_buffer **dx) {
  clear_out(dx, "dx");
  const Buffer &X = input(x, "x");
  const Buffer &DY = input(dy, "dy");
  same_device(X, "x", DY, "dy");
  const ConvGeometry g = validate_geometry(a);
  check_input_size(g, *a.names, X, "x", a.batch, a.channels);
  check_output_grad_size(g, *a.names, DY, "dy", a.batch, a.channels);
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
void backward_avg(const tlrt_buffer *dy, Geo &a, bool include_pad, tlrt_buffer **dx) {
  clear_out(dx, "dx");
  const Buffer &DY = input(dy, "dy");
  const ConvGeometry g = validate_geometry(a);
  check_output_grad_size(g, *a.names, DY, "dy", a.batch, a.channels);
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
  Geo geo{&kNames2d, batch, channels, 2, in_, k_, s_, p_}
#define TLRT_POOLND_PARAMS                                                                   \
  uint64_t batch, uint64_t channels, const uint64_t *in_spatial, uint32_t rank,              \
      const uint64_t *kernel, const uint64_t *stride, const uint64_t *padding
#define TLRT_POOLND_GEO Geo geo = nd_geo(batch, channels, in_spatial, rank, kernel, stride, padding)

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

// ---- geometry as data: the same implementations, the geometry from a tlrt_pool_geometry ------

TLRT_API tlrt_status tlrt_maxpool_fwd_geom(const tlrt_buffer *x,
                                           const tlrt_pool_geometry *geometry,
                                           tlrt_buffer **out) {
  if (out) *out = nullptr;
  return guarded(__func__, [&] {
    Geo geo = struct_geo(geometry);
    forward(Kind::Max, x, geo, false, 0.0, out);
  });
}

TLRT_API tlrt_status tlrt_maxpool_bwd_geom(const tlrt_buffer *x, const tlrt_buffer *dy,
                                           const tlrt_pool_geometry *geometry,
                                           tlrt_buffer **dx) {
  if (dx) *dx = nullptr;
  return guarded(__func__, [&] {
    Geo geo = struct_geo(geometry);
    backward_x(Kind::Max, x, dy, geo, 0.0, dx);
  });
}

TLRT_API tlrt_status tlrt_avgpool_fwd_geom(const tlrt_buffer *x,
                                           const tlrt_pool_geometry *geometry,
                                           bool count_include_pad, tlrt_buffer **out) {
  if (out) *out = nullptr;
  return guarded(__func__, [&] {
    Geo geo = struct_geo(geometry);
    forward(Kind::Avg, x, geo, count_include_pad, 0.0, out);
  });
}

TLRT_API tlrt_status tlrt_avgpool_bwd_geom(const tlrt_buffer *dy,
                                           const tlrt_pool_geometry *geometry,
                                           bool count_include_pad, tlrt_buffer **dx) {
  if (dx) *dx = nullptr;
  return guarded(__func__, [&] {
    Geo geo = struct_geo(geometry);
    backward_avg(dy, geo, count_include_pad, dx);
  });
}

TLRT_API tlrt_status tlrt_smooth_maxpool_fwd_geom(const tlrt_buffer *x,
                                                  const tlrt_pool_geometry *geometry,
                                                  double beta, tlrt_buffer **out) {
  if (out) *out = nullptr;
  return guarded(__func__, [&] {
    Geo geo = struct_geo(geometry);
    forward(Kind::Smooth, x, geo, false, beta, out);
  });
}

TLRT_API tlrt_status tlrt_smooth_maxpool_bwd_geom(const tlrt_buffer *x, const tlrt_buffer *dy,
                                                  const tlrt_pool_geometry *geometry,
                                                  double beta, tlrt_buffer **dx) {
  if (dx) *dx = nullptr;
  return guarded(__func__, [&] {
    Geo geo = struct_geo(geometry);
    backward_x(Kind::Smooth, x, dy, geo, beta, dx);
  });
}

// The forward's checks that need no buffer (validate_geometry, then the output's creatability).
TLRT_API tlrt_status tlrt_pool_output_dims(const tlrt_pool_geometry *geometry, uint64_t *dims,
                                           uint32_t capacity, uint32_t *rank,
                                           uint64_t *elements) {
  if (rank) *rank = 0;
  if (elements) *elements = 0;
  if (dims)
    for (uint32_t i = 0; i < capacity; ++i) dims[i] = 0;
  return guarded(__func__, [&] {
    if (dims == nullptr) fail(TLRT_ERR_NULL_ARGUMENT, "argument dims is NULL");
    clear_out_value(rank, "rank");
    clear_out_value(elements, "elements");
    Geo geo = struct_geo(geometry);
    const ConvGeometry g = validate_geometry(geo);
    check_creatable(g.out_overflow, g.out_elems, "argument out");
    const uint32_t n = g.rank + 2;
    if (capacity < n)
      fail(TLRT_ERR_SHAPE,
           "argument capacity = %u is less than the %u output dimensions (batch, channels and "
           "argument geometry->rank = %u spatial extents; TLRT_POOL_MAX_DIMS always suffices)",
           capacity, n, g.rank);
    dims[0] = geo.batch;
    dims[1] = geo.channels;
    for (uint32_t d = 0; d < g.rank; ++d) dims[d + 2] = g.out[d];
    *rank = n;
    *elements = g.out_elems;
  });
}

}  // extern "C"
