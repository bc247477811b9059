// CPU backend, convolution (core/backend/conv.hpp): im2col + the blocked SGEMM of stub/blas.cpp
// (tlrt::stub::bmm, called directly with the call's policy: no validation, no output handle),
// single-threaded.
//
// im2col: one image's column matrix cols (in_c * ksz, out_sp), row c * ksz + j (j the row-major
// window offset), column q (the row-major output position): cols[c * ksz + j][q] = x[c][i(q, j)]
// with i[d] = q[d] s[d] - p[d] + j[d] dil[d], or 0 where i is padding. Per axis a table maps
// (j[d], q[d]) to the input coordinate or -1, so the inner loop over the last axis is a table
// lookup. Per group g the forward is one GEMM: y[n, g] (ocg, out_sp) = w[g] (ocg, kg) *
// cols[g] (kg, out_sp), kg = in_c / groups * ksz.
// The input gradient: dcols[g] = w[g]^T * dy[n, g] (a GEMM with the kernel stored transposed),
// then col2im, here a scatter-add in (c, j, q) order: each dx element receives its terms in
// increasing j (at most one q per j), the order the CUDA gather uses too; single-threaded, so no
// race. The kernel gradient: per image dw_n[g] = dy[n, g] * cols[g]^T, dw = dw_0 + dw_1 + ... in
// increasing n. The bias gradient: a float64 sum per channel over (n, q) in order, rounded once.
// A 1 x ... x 1 kernel with stride 1 and no padding uses the image itself as its column matrix.
// Scratch (from the CPU pool): one image's column matrix, plus out_c * kg for the kernel gradient.
#include <algorithm>
#include <cstring>
#include <vector>

#include "core/backend/blas.hpp"
#include "core/backend/conv.hpp"
#include "core/backend/memory.hpp"

namespace tlrt {
namespace stub {

namespace {

using u64 = uint64_t;
using i64 = int64_t;

struct Scratch {
  float *p = nullptr;
  u64 bytes = 0;
  explicit Scratch(u64 floats)
      : p(floats ? static_cast<float *>(alloc(0, floats * sizeof(float))) : nullptr),
        bytes(floats * sizeof(float)) {}
  ~Scratch() {
    if (p) dealloc(0, p, bytes);
  }
  Scratch(const Scratch &) = delete;
  Scratch &operator=(const Scratch &) = delete;
};

bool direct(const ConvShape &s) {
  for (uint32_t d = 0; d < s.rank; ++d)
    if (s.kernel[d] != 1 || s.stride[d] != 1 || s.pad[d] != 0) return false;
  return true;
}

// Per axis: tab[d][j * out[d] + q] = input coordinate of window offset j at output q, or -1.
struct Tables {
  std::vector<i64> t[kConvMaxRank];
  Tables(const ConvShape &s, bool build) {
    for (uint32_t d = 0; build && d < s.rank; ++d) {
      t[d].resize(s.kernel[d] * s.out[d]);
      for (u64 j = 0; j < s.kernel[d]; ++j)
        for (u64 q = 0; q < s.out[d]; ++q) {
          const i64 i = (i64)(q * s.stride[d]) - (i64)s.pad[d] + (i64)(j * s.dilation[d]);
          t[d][j * s.out[d] + q] = (i >= 0 && i < (i64)s.in[d]) ? i : -1;
        }
    }
  }
};

// Visits every (c, j, outer output position) of one image: f(c, jrow, qrow, xoff) gets the row
// index c * ksz + j, the offset of the output row (q over the last axis starting at 0), the input
// offset of the row's outer coordinates (or -1 when one of them is padding) and the table of the
// last axis for this j.
template <class F>
void for_rows(const ConvShape &s, const Tables &tb, F &&f) {
  const uint32_t r = s.rank, last = r - 1;
  u64 in_stride[kConvMaxRank];
  in_stride[last] = 1;
  for (uint32_t d = last; d-- > 0;) in_stride[d] = in_stride[d + 1] * s.in[d + 1];
  u64 outer = 1;
  for (uint32_t d = 0; d < last; ++d) outer *= s.out[d];
  for (u64 c = 0; c < s.in_c; ++c) {
    u64 j[kConvMaxRank] = {0};
    for (u64 jf = 0; jf < s.ksz; ++jf) {
      const i64 *lt = tb.t[last].data() + j[last] * s.out[last];
      u64 q[kConvMaxRank] = {0};
      for (u64 qo = 0; qo < outer; ++qo) {
        i64 off = 0;
        for (uint32_t d = 0; d < last && off >= 0; ++d) {
          const i64 i = tb.t[d][j[d] * s.out[d] + q[d]];
          off = i < 0 ? -1 : off + i * (i64)in_stride[d];
        }
        f(c * s.ksz + jf, qo * s.out[last], off, lt);
        for (uint32_t d = last; d-- > 0;) {  // odometer over the outer output axes
          if (++q[d] < s.out[d]) break;
          q[d] = 0;
        }
      }
      for (uint32_t d = r; d-- > 0;) {  // odometer over the window
        if (++j[d] < s.kernel[d]) break;
        j[d] = 0;
      }
    }
  }
}

// cols (in_c * ksz, out_sp) of image x (in_c, in_sp).
void im2col(const ConvShape &s, const Tables &tb, const float *x, float *cols) {
  const u64 ol = s.out[s.rank - 1];
  for_rows(s, tb, [&](u64 row, u64 qoff, i64 xoff, const i64 *lt) {
    float *dst = cols + row * s.out_sp + qoff;
    if (xoff < 0) {
      std::fill(dst, dst + ol, 0.0f);
      return;
    }
    const float *src = x + (row / s.ksz) * s.in_sp + xoff;
    for (u64 q = 0; q < ol; ++q) dst[q] = lt[q] < 0 ? 0.0f : src[lt[q]];
  });
}

// dx (in_c, in_sp) = col2im(dcols): each dx element gets its terms in increasing j.
void col2im(const ConvShape &s, const Tables &tb, const float *dcols, float *dx) {
  std::fill(dx, dx + s.in_c * s.in_sp, 0.0f);
  const u64 ol = s.out[s.rank - 1];
  for_rows(s, tb, [&](u64 row, u64 qoff, i64 xoff, const i64 *lt) {
    if (xoff < 0) return;
    const float *src = dcols + row * s.out_sp + qoff;
    float *dst = dx + (row / s.ksz) * s.in_sp + xoff;
    for (u64 q = 0; q < ol; ++q)
      if (lt[q] >= 0) dst[lt[q]] += src[q];
  });
}

void add_channel(float *t, const float *bias, u64 channels, u64 spatial) {
  for (u64 c = 0; c < channels; ++c) {
    const float b = bias[c];
    float *row = t + c * spatial;
    for (u64 l = 0; l < spatial; ++l) row[l] += b;
  }
}

}  // namespace

void conv_fwd(int, const ConvShape &s, const float *x, const float *w, const float *bias,
              const MatmulPolicy &policy, float *y) {
  const u64 icg = s.in_c / s.groups, ocg = s.out_c / s.groups, kg = icg * s.ksz;
  const bool dir = direct(s);
  Scratch cols(dir ? 0 : s.in_c * s.ksz * s.out_sp);
  const Tables tb(s, !dir);
  for (u64 n = 0; n < s.batch; ++n) {
    const float *xn = x + n * s.in_c * s.in_sp;
    const float *cn = xn;
    if (!dir) {
      im2col(s, tb, xn, cols.p);
      cn = cols.p;
    }
    float *yn = y + n * s.out_c * s.out_sp;
    for (u64 g = 0; g < s.groups; ++g)
      bmm(0, w + g * ocg * kg, cn + g * kg * s.out_sp, 1, ocg, kg, s.out_sp, false, false, policy,
          yn + g * ocg * s.out_sp);
    if (bias) add_channel(yn, bias, s.out_c, s.out_sp);
  }
}

void conv_bwd_input(int, const ConvShape &s, const float *dy, const float *w,
                    const float *bias_in, const MatmulPolicy &policy, float *dx) {
  const u64 icg = s.in_c / s.groups, ocg = s.out_c / s.groups, kg = icg * s.ksz;
  const bool dir = direct(s);
  Scratch dcols(dir ? 0 : s.in_c * s.ksz * s.out_sp);
  const Tables tb(s, !dir);
  for (u64 n = 0; n < s.batch; ++n) {
    float *dxn = dx + n * s.in_c * s.in_sp;
    float *target = dir ? dxn : dcols.p;  // direct: in_sp == out_sp, dcols is dx itself
    const float *dyn = dy + n * s.out_c * s.out_sp;
    for (u64 g = 0; g < s.groups; ++g)
      bmm(0, w + g * ocg * kg, dyn + g * ocg * s.out_sp, 1, kg, ocg, s.out_sp, true, false,
          policy, target + g * kg * s.out_sp);
    if (!dir) col2im(s, tb, dcols.p, dxn);
    if (bias_in) add_channel(dxn, bias_in, s.in_c, s.in_sp);
  }
}

void conv_bwd_kernel(int, const ConvShape &s, const float *x, const float *dy,
                     const MatmulPolicy &policy, float *dw) {
  const u64 icg = s.in_c / s.groups, ocg = s.out_c / s.groups, kg = icg * s.ksz;
  const bool dir = direct(s);
  Scratch cols(dir ? 0 : s.in_c * s.ksz * s.out_sp);
  Scratch part(s.batch > 1 ? s.out_c * kg : 0);
  const Tables tb(s, !dir);
  for (u64 n = 0; n < s.batch; ++n) {
    const float *xn = x + n * s.in_c * s.in_sp;
    const float *cn = xn;
    if (!dir) {
      im2col(s, tb, xn, cols.p);
      cn = cols.p;
    }
    float *target = n == 0 ? dw : part.p;
    const float *dyn = dy + n * s.out_c * s.out_sp;
    for (u64 g = 0; g < s.groups; ++g)
      bmm(0, dyn + g * ocg * s.out_sp, cn + g * kg * s.out_sp, 1, ocg, s.out_sp, kg, false, true,
          policy, target + g * ocg * kg);
    if (n != 0)
      for (u64 i = 0; i < s.out_c * kg; ++i) dw[i] += part.p[i];
  }
}

void channel_sum(int, const float *t, uint64_t batch, uint64_t channels, uint64_t spatial,
                 float *out) {
  for (u64 c = 0; c < channels; ++c) {
    double acc = 0.0;
    for (u64 n = 0; n < batch; ++n) {
      const float *row = t + (n * channels + c) * spatial;
      for (u64 l = 0; l < spatial; ++l) acc += (double)row[l];
    }
    out[c] = (float)acc;
  }
}

void channel_fill(int, const float *bias, uint64_t batch, uint64_t channels, uint64_t spatial,
                  float *out) {
  for (u64 n = 0; n < batch; ++n)
    for (u64 c = 0; c < channels; ++c) {
      float *row = out + (n * channels + c) * spatial;
      std::fill(row, row + spatial, bias[c]);
    }
}

}  // namespace stub
}  // namespace tlrt
