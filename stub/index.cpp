// CPU backend, indexing: gather and scatter-add with host index lists.
//
// gather_rows: one memcpy per output row (or a zero fill for an out-of-range entry), reading the
// caller's list in place; cols == 1 is a plain loop over it.
// scatter_add_rows: y = a copy of x, then each segment of the plan (core/backend/index.hpp)
// rewrites its target row: y[t, c] = x[t, c] + S_c with S_c the tree of
// core/numerics/reduce_tree.hpp over the segment's vals rows, column by column, in segment order:
//  - segments of L <= 32 entries: the tree is red::small (lane j = identity + v_j for j < L, the
//    identity for L <= j < W = the power of two >= L, then halving h = W/2, ..., 1); here the
//    lanes are materialised as W rows of a column tile and halved row by row (vectorised across
//    columns), the same operations per column as red::small, which the cols == 1 path calls;
//  - longer segments: the tree through the reduce backend, per column tile of <= 1024 columns:
//    each chunk of 4096 entries has its rows gathered contiguous and reduced down the columns by
//    stub::reduce_axis (the chunk values), and several chunks' values are reduced by it again
//    (step 4 of the tree). Scratch: at most 4096 x 1024 floats (16 MiB) plus the chunk values.
// Columns are independent, so tiling them changes nothing in any column's sum.
#include <algorithm>
#include <cstring>
#include <vector>

#include "core/backend/index.hpp"
#include "core/backend/reduce.hpp"
#include "stub/cpu_clones.hpp"

namespace tlrt {
namespace stub {

namespace {

using Sum = red::Ops<red::Op::Sum>;
constexpr uint64_t kTile = 1024;  // columns per tile

// Reads the caller's list in place (core checked every entry): no key array.
void gather_t(const float *x, uint64_t rows, uint64_t cols, const uint64_t *idx, uint64_t k,
              float *y) {
  if (cols == 1) {
    for (uint64_t j = 0; j < k; ++j) {
      const uint64_t r = idx[j];
      y[j] = r < rows ? x[r] : 0.0f;
    }
    return;
  }
  for (uint64_t j = 0; j < k; ++j) {
    float *yr = y + j * cols;
    const uint64_t r = idx[j];
    if (r < rows)
      std::memcpy(yr, x + r * cols, cols * 4);
    else
      std::memset(yr, 0, cols * 4);  // +0.0f
  }
}

// a[c] = identity + v[c] (a lane holding one element).
TLRT_CPU_CLONES void lane_init(float *__restrict a, const float *__restrict v, uint64_t w) {
  const float id = Sum::identity();
  for (uint64_t c = 0; c < w; ++c) a[c] = Sum::op(id, v[c]);
}

// a[c] = a[c] + b[c] (one halving pair).
TLRT_CPU_CLONES void lane_add(float *__restrict a, const float *__restrict b, uint64_t w) {
  for (uint64_t c = 0; c < w; ++c) a[c] = Sum::op(a[c], b[c]);
}

// y[c] = x[c] + s[c].
TLRT_CPU_CLONES void add_rows(float *__restrict y, const float *__restrict x,
                              const float *__restrict s, uint64_t w) {
  for (uint64_t c = 0; c < w; ++c) y[c] = x[c] + s[c];
}

// Scatter of one column (cols == 1), a short segment: red::small itself.
template <unsigned W, class U>
float small1(const float *vals, const U *p, unsigned L) {
  return red::small<red::Op::Sum, W>([vals, p](unsigned j) { return vals[p[j]]; }, L);
}

template <class U>
float small1_any(const float *vals, const U *p, unsigned L) {
  float s = 0.0f;
  red::with_small_width(L, [&](auto w) { s = small1<decltype(w)::value>(vals, p, L); });
  return s;
}

// s[0..w) = the tree over e < L of vals[p[e] * cols + c0 + c], for one tile of w columns.
// buf: scratch owned by the caller.
template <class U>
void tile_sum(const float *vals, uint64_t cols, uint64_t c0, uint64_t w, const U *p, uint64_t L,
              std::vector<float> &buf, float *s) {
  if (L <= red::kSmall) {
    const unsigned W = red::pow2_at_least(L);
    if (buf.size() < W * w) buf.resize(W * w);
    float *a = buf.data();
    for (unsigned j = 0; j < W; ++j) {
      float *row = a + j * w;
      if (j < L)
        lane_init(row, vals + (uint64_t)p[j] * cols + c0, w);
      else
        std::fill(row, row + w, Sum::identity());
    }
    for (unsigned h = W >> 1; h >= 1; h >>= 1)
      for (unsigned t = 0; t < h; ++t) lane_add(a + t * w, a + (t + h) * w, w);
    std::copy(a, a + w, s);
    return;
  }
  const uint64_t nc = red::chunks_of(L);
  const uint64_t need = red::kChunk * w + nc * w;
  if (buf.size() < need) buf.resize(need);
  float *g = buf.data(), *part = g + red::kChunk * w;
  for (uint64_t ch = 0; ch < nc; ++ch) {
    const uint64_t e0 = ch * red::kChunk;
    const uint64_t len = std::min<uint64_t>(red::kChunk, L - e0);
    for (uint64_t e = 0; e < len; ++e)
      std::memcpy(g + e * w, vals + (uint64_t)p[e0 + e] * cols + c0, w * 4);
    reduce_axis(0, red::Op::Sum, g, 1, len, w, 1.0f, nc == 1 ? s : part + ch * w);
  }
  if (nc > 1) reduce_axis(0, red::Op::Sum, part, 1, nc, w, 1.0f, s);
}

template <class U>
void scatter_t(const float *x, const float *vals, uint64_t rows, uint64_t cols,
               const idx::Plan &plan, float *y) {
  std::memcpy(y, x, rows * cols * 4);
  const idx::PlanView<U> v = idx::view<U>(plan);
  if (cols == 1) {
    // The vals the next ~kAhead entries read are prefetched: the plan's positions are known in
    // advance, and without it each segment's scattered loads wait on memory one segment at a
    // time.
    constexpr uint64_t kAhead = 64;
    std::vector<float> buf;
    uint64_t pf = 0;  // entries [0, pf) prefetched
    for (uint64_t s = 0; s < plan.nseg; ++s) {
      for (const uint64_t e = std::min<uint64_t>(plan.m, (uint64_t)v.seg[s + 1] + kAhead); pf < e;
           ++pf)
        __builtin_prefetch(vals + v.pos[pf]);
      const uint64_t L = (uint64_t)v.seg[s + 1] - v.seg[s];
      const U *p = v.pos + v.seg[s];
      const U t = v.tgt[s];
      float sum;
      if (L <= red::kSmall)
        sum = small1_any(vals, p, (unsigned)L);
      else
        tile_sum(vals, 1, 0, 1, p, L, buf, &sum);
      y[t] = x[t] + sum;
    }
    return;
  }
  std::vector<float> buf, sum(std::min(cols, kTile));
  for (uint64_t s = 0; s < plan.nseg; ++s) {
    const uint64_t L = (uint64_t)v.seg[s + 1] - v.seg[s];
    const U *p = v.pos + v.seg[s];
    const uint64_t t = v.tgt[s];
    for (uint64_t c0 = 0; c0 < cols; c0 += kTile) {
      const uint64_t w = std::min(kTile, cols - c0);
      tile_sum(vals, cols, c0, w, p, L, buf, sum.data());
      add_rows(y + t * cols + c0, x + t * cols + c0, sum.data(), w);
    }
  }
}

}  // namespace

void gather_rows(int, const float *x, uint64_t rows, uint64_t cols, const idx::Keys &keys,
                 float *y) {
  gather_t(x, rows, cols, keys.idx, keys.k, y);
}

void scatter_add_rows(int, const float *x, const float *vals, uint64_t rows, uint64_t cols,
                      const idx::Plan &plan, float *y) {
  if (plan.wide)
    scatter_t<uint64_t>(x, vals, rows, cols, plan, y);
  else
    scatter_t<uint32_t>(x, vals, rows, cols, plan, y);
}

}  // namespace stub
}  // namespace tlrt
