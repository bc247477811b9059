// Backend interface: layout: concatenation, slices, broadcasts, transposes and permutations.
// Defined by stub/layout.cpp and cuda/layout.cu.
//
// Concatenations and slices need no function here: core does them with the memory backend's copy
// (one or two same-device copies at offsets). Every broadcast, transpose and permutation is a
// strided gather y[f] = x[offset(f)] over a row-major output, which core normalises (size-1 axes
// dropped, adjacent axes merged where the strides allow) into a lay::Gather plan; core hands the
// plans that are (batched) transpositions of large enough tiles to tiled_transpose instead
// (lay::Transpose), everything else to strided_copy. Plans are passed by value to the kernels (no
// per-call upload). Core has validated every argument and allocated y; counts are >= 1; x and y
// are on device `dev`, do not alias, and start on payload boundaries (16-byte aligned at least).
// Data is moved bit for bit (no arithmetic on the values).
#pragma once

#include <cstdint>

namespace tlrt {
namespace lay {

constexpr uint32_t kMaxRank = 8;

// y[f] = x[sum_k b_k * stride[k]] for f < n, where (b_0, ..., b_{rank-1}) is the row-major
// multi-index of f over dims[0..rank). Normalised by core: 1 <= rank <= 8, n = prod(dims) >= 1,
// every dims[k] >= 2 unless rank == 1, no two adjacent axes with stride[k] == stride[k + 1] *
// dims[k + 1] (those are merged), strides < 2^60 (0 = repeated along that axis); every offset is
// < the element count of x.
struct Gather {
  uint32_t rank;
  uint64_t n;
  uint64_t dims[kMaxRank];
  uint64_t stride[kMaxRank];
};

// A batched transposition of ELEMENTS of w consecutive floats (w = 1, 2 or 4): for every batch
// index beta (row-major over bdim[0..nb)), i < p, j < q:
//   y[ybase + i * y_p + j] = x[xbase + j * x_q + i],
//   xbase = sum_k beta_k * bx[k], ybase = sum_k beta_k * by[k],
// with every index, extent, stride and n counted in elements (element e is floats w e .. w e +
// w - 1). p is the extent of the axis contiguous in x, q the extent of the axis contiguous in y.
// Built by core from a normalised Gather whose innermost stride is neither 0 nor 1 (w = 1), or
// whose innermost axis is a contiguous run of exactly w = 2 or 4 floats and whose other strides
// are multiples of w (a swap of axes above a trailing block of 2 or 4, e.g. complex pairs); batch
// = prod(bdim), n = batch * p * q = the output's element count.
struct Transpose {
  uint32_t w;
  uint64_t p, q;
  uint64_t x_q, y_p;
  uint32_t nb;
  uint64_t batch, n;
  uint64_t bdim[kMaxRank - 2], bx[kMaxRank - 2], by[kMaxRank - 2];
};

}  // namespace lay
}  // namespace tlrt

#define TLRT_LAYOUT_BACKEND_API                                                              \
  /* y[f] = x[offset of f] for f < plan.n (see lay::Gather). */                             \
  void strided_copy(int dev, const float *x, const lay::Gather &plan, float *y);            \
  /* The batched transposition of lay::Transpose, tiled. */                                  \
  void tiled_transpose(int dev, const float *x, const lay::Transpose &plan, float *y);

namespace tlrt {
namespace stub {
TLRT_LAYOUT_BACKEND_API
}
namespace cuda {
TLRT_LAYOUT_BACKEND_API
}
}  // namespace tlrt
