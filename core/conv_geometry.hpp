// Window geometry shared by the pooling (core/api_pool.cpp) and convolution (core/api_conv.cpp)
// families: validation of rank, per-axis kernel / stride / padding / dilation and the output size
// rule, all overflow-checked, filling one small POD struct that core passes BY VALUE to the
// backends (CUDA: as a kernel parameter; no device copy of the dims, no synchronisation).
//
// Layout: a tensor (batch, channels, spatial[0], ..., spatial[rank - 1]), row-major; the last
// spatial axis is contiguous. Per axis d, with ek = dilation * (kernel - 1) + 1 (the effective
// kernel extent) and window o covering input cells o * stride - pad + dilation * j, j < kernel:
//   out[d] = floor((in[d] + 2 pad[d] - ek[d]) / stride[d]) + 1   if in[d] + 2 pad[d] >= ek[d],
//   out[d] = 0                                                      otherwise
// (never upstream's saturated "phantom" 1-wide output). Pools additionally require
// 2 * pad <= kernel (PyTorch's rule; upstream silently produced an empty output instead) and give
// out = 0 for in = 0 (no window made only of padding); together these guarantee that every window
// of a pool holds at least one real input cell.
//
// The geometry reaches core either as argument lists (the 2-D and N-D entry points) or as a
// public geometry struct (tlrt_conv_geometry, tlrt_pool_geometry: the *_geom entry points and the
// output-dims queries). Both feed the same validation below; check_geometry_struct only adds the
// struct's own header rules (NULL, struct_size), and GeometryNames makes messages name the
// caller's spelling ("argument kernel_w", "argument kernel[1]", "argument geometry->kernel[1]").
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

#include "abi/tlrt_buffer.h"
#include "core/buffer.hpp"
#include "core/error.hpp"

namespace tlrt {

constexpr uint32_t kMaxConvRank = 8;

// Everything a backend needs to walk windows; all extents are >= 1 except in / out (>= 0) and
// nc (>= 0). Backends are only called with nc >= 1, every in[d] >= 1 and every out[d] >= 1.
struct ConvGeometry {
  uint32_t rank;                 // 1 .. kMaxConvRank
  uint64_t nc;                   // batch * channels (folded: windows never cross them)
  uint64_t in[kMaxConvRank];     // input spatial extents
  uint64_t kernel[kMaxConvRank];
  uint64_t stride[kMaxConvRank];
  uint64_t pad[kMaxConvRank];    // symmetric: pad cells before and after the axis
  uint64_t dilation[kMaxConvRank];
  uint64_t out[kMaxConvRank];    // output spatial extents
  uint64_t in_spatial;           // prod(in)
  uint64_t out_spatial;          // prod(out)
  uint64_t window;               // prod(kernel)
  uint64_t in_elems;             // nc * in_spatial (valid when !in_overflow)
  uint64_t out_elems;            // nc * out_spatial (valid when !out_overflow)
  bool in_overflow;              // the input count is beyond 64 bits (never matches a buffer)
  bool out_overflow;             // the output count is beyond 64 bits
};

// How the entry point names its geometry arguments in messages: the 2-D names take scalars
// (in_h, in_w, kernel_h, ..., pad_w: base name + "_h" / "_w"), the N-D names take arrays
// (in_spatial[1], kernel[0], ...), the struct names fields (geometry->kernel[0], geometry->rank).
struct GeometryNames {
  bool two_d;
  const char *in, *kernel, *stride, *pad, *dilation;
  const char *rank = "rank", *batch = "batch", *channels = "channels";
};

// A struct_size above this is not a size any version of a geometry struct will have (an unset
// field), so the library never reads that far.
constexpr uint64_t kMaxGeometryStructSize = 4096;

// The header rules of a public geometry struct at `p` (the argument `arg`, "geometry" unless
// named) of which this library knows `known` bytes, `v1` of them the first version's layout:
// non-NULL (TLRT_ERR_NULL_ARGUMENT), struct_size at least v1 and at most kMaxGeometryStructSize,
// and every byte past `known` up to struct_size zero, i.e. every field of a newer version at its
// default (TLRT_ERR_INVALID_ARGUMENT). Copies the known part into *dst (zero-filled past
// struct_size), so that validation and use see the same values. `type` names the struct in
// messages.
template <class T>
void check_geometry_struct(const T *p, const char *type, uint64_t v1, T *dst,
                           const char *arg = "geometry") {
  using ull = unsigned long long;
  constexpr uint64_t known = sizeof(T);
  if (p == nullptr) fail(TLRT_ERR_NULL_ARGUMENT, "argument %s is NULL", arg);
  uint64_t size = 0;
  std::memcpy(&size, p, sizeof size);
  if (size < v1)
    fail(TLRT_ERR_INVALID_ARGUMENT,
         "argument %s->struct_size = %llu is smaller than the %llu bytes of the first "
         "version of %s: set struct_size = sizeof(%s)",
         arg, (ull)size, (ull)v1, type, type);
  if (size > kMaxGeometryStructSize)
    fail(TLRT_ERR_INVALID_ARGUMENT,
         "argument %s->struct_size = %llu is larger than %llu bytes, which no version of %s "
         "has: set struct_size = sizeof(%s)",
         arg, (ull)size, (ull)kMaxGeometryStructSize, type, type);
  const unsigned char *bytes = reinterpret_cast<const unsigned char *>(p);
  for (uint64_t i = known; i < size; ++i)
    if (bytes[i] != 0)
      fail(TLRT_ERR_INVALID_ARGUMENT,
           "argument %s->struct_size = %llu: byte %llu, past the %llu bytes of %s this "
           "library knows, is nonzero (a field of a newer version that it cannot honour)",
           arg, (ull)size, (ull)i, (ull)known, type);
  std::memset(static_cast<void *>(dst), 0, sizeof(T));
  std::memcpy(static_cast<void *>(dst), p, size < known ? size : known);
}

namespace geo_detail {

using ull = unsigned long long;

inline std::string axis_name(const GeometryNames &n, const char *base, uint32_t d) {
  char b[64];
  if (n.two_d)
    std::snprintf(b, sizeof b, "%s_%c", base, d == 0 ? 'h' : 'w');
  else
    std::snprintf(b, sizeof b, "%s[%u]", base, d);
  return b;
}

// Product of factors where any zero factor makes the whole product 0 (an empty tensor exists
// whatever its other extents); *overflow when the product of nonzero factors exceeds 64 bits.
inline uint64_t zero_aware_product(const uint64_t *f, uint32_t n, uint64_t lead, bool *overflow) {
  *overflow = false;
  if (lead == 0) return 0;
  for (uint32_t i = 0; i < n; ++i)
    if (f[i] == 0) return 0;
  uint64_t p = lead;
  for (uint32_t i = 0; i < n; ++i)
    if (__builtin_mul_overflow(p, f[i], &p)) {
      *overflow = true;
      return 0;
    }
  return p;
}

inline std::string dims_text(const GeometryNames &n, const char *base, const uint64_t *v,
                             uint32_t rank) {
  std::string s;
  if (n.two_d) {
    s = "argument " + axis_name(n, base, 0) + " (" + std::to_string(v[0]) + ") * argument " +
        axis_name(n, base, 1) + " (" + std::to_string(v[1]) + ")";
  } else {
    s = std::string("argument ") + base + " (";
    for (uint32_t d = 0; d < rank; ++d) s += (d ? " x " : "") + std::to_string(v[d]);
    s += ")";
  }
  return s;
}

}  // namespace geo_detail

// Validates and fills the geometry. in, kernel, stride, pad point to rank values (the 2-D entry
// points pass arrays of their scalars); dilation may be NULL (all 1). rank is 64-bit so that a
// struct's rank is checked before any narrowing. pool: enforce 2 pad <= kernel and out = 0 for
// in = 0. Errors (argument named per GeometryNames): TLRT_ERR_INVALID_ARGUMENT (rank 0 or > 8; a
// zero kernel, stride or dilation; pool with 2 pad > kernel); TLRT_ERR_NULL_ARGUMENT (an array
// argument NULL); TLRT_ERR_OVERFLOW (an output extent or the effective kernel extent beyond 64
// bits). Buffer sizes are checked by the callers below.
inline ConvGeometry conv_geometry(const GeometryNames &names, uint64_t batch, uint64_t channels,
                                  uint64_t rank64, const uint64_t *in, const uint64_t *kernel,
                                  const uint64_t *stride, const uint64_t *pad,
                                  const uint64_t *dilation, bool pool) {
  using geo_detail::axis_name;
  using geo_detail::ull;
  if (rank64 == 0 || rank64 > kMaxConvRank)
    fail(TLRT_ERR_INVALID_ARGUMENT, "argument %s = %llu must be in 1 .. %u", names.rank,
         (ull)rank64, kMaxConvRank);
  const uint32_t rank = (uint32_t)rank64;
  const struct {
    const uint64_t *p;
    const char *name;
  } arrays[] = {{in, names.in}, {kernel, names.kernel}, {stride, names.stride}, {pad, names.pad}};
  for (const auto &a : arrays)
    if (a.p == nullptr) fail(TLRT_ERR_NULL_ARGUMENT, "argument %s is NULL", a.name);
  ConvGeometry g{};
  g.rank = rank;
  for (uint32_t d = 0; d < rank; ++d) {
    g.in[d] = in[d];
    g.kernel[d] = kernel[d];
    g.stride[d] = stride[d];
    g.pad[d] = pad[d];
    g.dilation[d] = dilation ? dilation[d] : 1;
    if (g.kernel[d] == 0)
      fail(TLRT_ERR_INVALID_ARGUMENT, "argument %s = 0: a kernel extent must be at least 1",
           axis_name(names, names.kernel, d).c_str());
    if (g.stride[d] == 0)
      fail(TLRT_ERR_INVALID_ARGUMENT, "argument %s = 0: a stride must be at least 1",
           axis_name(names, names.stride, d).c_str());
    if (g.dilation[d] == 0)
      fail(TLRT_ERR_INVALID_ARGUMENT, "argument %s = 0: a dilation must be at least 1",
           axis_name(names, names.dilation, d).c_str());
    if (pool && g.pad[d] > g.kernel[d] / 2)
      fail(TLRT_ERR_INVALID_ARGUMENT,
           "argument %s = %llu must be at most half of argument %s = %llu (2 * pad <= kernel, as "
           "PyTorch: a larger pad would make windows of padding only)",
           axis_name(names, names.pad, d).c_str(), (ull)g.pad[d],
           axis_name(names, names.kernel, d).c_str(), (ull)g.kernel[d]);
    // Exact in 128 bits: in + 2 pad < 2^66, ek < 2^128.
    const unsigned __int128 ek = (unsigned __int128)g.dilation[d] * (g.kernel[d] - 1) + 1;
    const unsigned __int128 padded = (unsigned __int128)g.in[d] + 2 * (unsigned __int128)g.pad[d];
    unsigned __int128 o = 0;
    if (!(pool && g.in[d] == 0) && padded >= ek) o = (padded - ek) / g.stride[d] + 1;
    if (o > UINT64_MAX)
      fail(TLRT_ERR_OVERFLOW, "argument %s = %llu with argument %s = %llu and argument %s = %llu: "
           "the output extent is beyond 64 bits",
           axis_name(names, names.in, d).c_str(), (ull)g.in[d],
           axis_name(names, names.pad, d).c_str(), (ull)g.pad[d],
           axis_name(names, names.stride, d).c_str(), (ull)g.stride[d]);
    g.out[d] = (uint64_t)o;
  }
  bool ov = false;
  g.in_spatial = geo_detail::zero_aware_product(g.in, rank, 1, &ov);
  g.out_spatial = geo_detail::zero_aware_product(g.out, rank, 1, &ov);
  g.window = geo_detail::zero_aware_product(g.kernel, rank, 1, &ov);
  if (ov) g.window = UINT64_MAX;  // only a loop bound: such a window never fits an input
  // Totals, zero-aware over every factor: (0, C, huge...) is an empty tensor, not an overflow.
  uint64_t in_f[kMaxConvRank + 1], out_f[kMaxConvRank + 1];
  in_f[0] = out_f[0] = channels;
  for (uint32_t d = 0; d < rank; ++d) {
    in_f[d + 1] = g.in[d];
    out_f[d + 1] = g.out[d];
  }
  g.in_elems = geo_detail::zero_aware_product(in_f, rank + 1, batch, &g.in_overflow);
  g.out_elems = geo_detail::zero_aware_product(out_f, rank + 1, batch, &g.out_overflow);
  // nc is exact whenever a backend runs (in_elems and out_elems nonzero and representable); the
  // spatial products above are then exact too.
  g.nc = batch * channels;
  return g;
}

// B (named `name`) must hold exactly batch * channels * prod(in) elements (TLRT_ERR_SHAPE; a count
// beyond 64 bits never matches).
inline void check_input_size(const ConvGeometry &g, const GeometryNames &names,
                             const Buffer &B, const char *name, uint64_t batch,
                             uint64_t channels) {
  if (g.in_overflow || g.in_elems != B.size)
    fail(TLRT_ERR_SHAPE,
         "argument %s has %llu elements, but argument %s (%llu) * argument %s (%llu) * %s = %s",
         name, (geo_detail::ull)B.size, names.batch, (geo_detail::ull)batch, names.channels,
         (geo_detail::ull)channels, geo_detail::dims_text(names, names.in, g.in, g.rank).c_str(),
         g.in_overflow ? "beyond 64 bits" : std::to_string(g.in_elems).c_str());
}

// B (named `name`) must hold exactly batch * channels * prod(out) elements, out the output extents
// of the geometry (TLRT_ERR_SHAPE).
inline void check_output_grad_size(const ConvGeometry &g, const GeometryNames &names,
                                   const Buffer &B, const char *name, uint64_t batch,
                                   uint64_t channels) {
  if (g.out_overflow || g.out_elems != B.size) {
    std::string o;
    for (uint32_t d = 0; d < g.rank; ++d) o += (d ? " x " : "") + std::to_string(g.out[d]);
    fail(TLRT_ERR_SHAPE,
         "argument %s has %llu elements, but the output of this geometry has argument %s "
         "(%llu) * argument %s (%llu) * (%s) = %s elements",
         name, (geo_detail::ull)B.size, names.batch, (geo_detail::ull)batch, names.channels,
         (geo_detail::ull)channels, o.c_str(),
         g.out_overflow ? "beyond 64 bits" : std::to_string(g.out_elems).c_str());
  }
}

// A buffer of `count` elements (overflowed: beyond 64 bits) must be creatable: TLRT_ERR_OVERFLOW
// beyond TLRT_MAX_ELEMENTS.
inline void check_creatable(bool overflow, uint64_t count, const char *what) {
  if (overflow || count > TLRT_MAX_ELEMENTS)
    fail(TLRT_ERR_OVERFLOW, "%s would have %s elements, more than TLRT_MAX_ELEMENTS (2^60)", what,
         overflow ? "beyond 2^64" : std::to_string(count).c_str());
}

}  // namespace tlrt
