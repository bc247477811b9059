// The per-thread bodies of the fast CUDA pooling kernels (cuda/pool.cu) and the host-side choice
// of path and launch shape, written __host__ __device__ so that tests/unit/test_pool_kernels.cpp
// runs exactly this code on the CPU over the whole launch grid, block by block and phase by phase,
// and compares it bit for bit with the CPU backend. The arithmetic is core/numerics/pool_ops.hpp's;
// the orders are abi/tlrt_pool.h's: windows walked over their real cells row-major, backward sums
// over the windows of a cell in output order from +0. History: docs/kernels/pool.md.
//
// Fast paths: rank 2 or 3, 32-bit indices (pool::fits32), and the last two axes' kernel (KH, KW),
// the last axis' stride SW and padding PW one of the compiled configurations (Cfg, chosen by
// with_cfg); the other axes' strides, paddings and kernels stay run-time values. Index divisions
// are multiply-shifts (FastDiv) precomputed on the host, none in the loops over window cells.
// Each body reads x and dy and writes y or dx about once (4 bytes per cell each; the halos of
// neighbouring threads from L1 / L2), a few operations per window cell:
//   fwd_thread      4 outputs of a row from the columns their windows span, rows first for max;
//   scatter_thread  disjoint windows: 4 / SW windows' statistic, then their whole dx slab;
//   stream_run      overlapping rank-2 windows of one stride dividing 4: 4 columns of a run of
//                   rows, window rows in order, statistics and accumulators in registers;
//   sep_core        max k3 s1 p1 on the stream decomposition: row-first argmax, one scatter per
//                   window into a shared-memory ring (sep_body from global memory, band_run
//                   from a band of the plane staged by band_stage);
//   tile_window / tile_cells  the other overlapping rank-2 windows: per block, window statistics
//                   in shared memory, then one gather per 4 cells.
// Last measured: bench/results/2026-11-27-h100-s16-pool.md
#pragma once

#include <cstdint>
#include <cstdlib>
#include <initializer_list>
#include <type_traits>
#include <utility>

#include "core/conv_geometry.hpp"
#include "core/numerics/pool_ops.hpp"

#if !defined(__CUDA_ARCH__)
#include <cmath>
#include <cstdio>
#include <cstring>
#endif

// Full unrolling of the loops over compile-time extents (register arrays) on the GPU.
#if defined(__CUDA_ARCH__)
#define TLRT_UNROLL _Pragma("unroll")
#else
#define TLRT_UNROLL
#endif

namespace tlrt {
namespace pool {
namespace fast {

constexpr int kV = 4;               // cells per thread along the last axis
constexpr unsigned kThreads = 256;  // threads per block, every fast kernel
constexpr uint32_t kStreamRows = 8;  // stream and sep kernels: rows per thread, at most

enum class Kind { Max, Avg, Smooth };

// Emulation-only check (host): an index that the GPU would read out of bounds stops the test.
TLRT_HD void emu_check(bool ok, const char *what) {
#if !defined(__CUDA_ARCH__)
  if (!ok) {
    std::fprintf(stderr, "pool_kernels: %s\n", what);
    std::abort();
  }
#else
  (void)ok;
  (void)what;
#endif
}

// n / d for n < 2^31 as one 32 x 32 -> 64-bit multiply and a shift (Granlund-Montgomery with
// l = ceil(log2 d), m = floor(2^(31 + l) / d) + 1 < 2^32: then 2^(31 + l) <= m d <= 2^(31 + l) +
// 2^l, which makes the quotient exact for every n < 2^31).
struct FastDiv {
  uint32_t m, sh;
};
inline FastDiv make_fastdiv(uint32_t d) {
  uint32_t l = 0;
  while ((uint64_t{1} << l) < d) ++l;
  return {(uint32_t)((uint64_t{1} << (31 + l)) / d + 1), 31 + l};
}
TLRT_HD uint32_t fdiv(FastDiv f, uint32_t n) { return (uint32_t)(((uint64_t)n * f.m) >> f.sh); }

// Correctly rounded x / d (d = RN-exact small integer, r = RN(1/d), both from the host) in five
// instructions where __fdiv_rn takes ~19: q0 = RN(x r), e = RN(x - q0 d) (the remainder, exact
// where nothing underflows), q = RN(q0 + e r). e = 0 (x = +-0, or q0 already exact) keeps q0 and
// the sign of a zero quotient; e NaN (x = +-inf or NaN: q0 is then the right inf / NaN) keeps q0.
// Equal to x / d for ALL 2^32 floats x only for the divisors of div_by_verified (checked
// exhaustively: test_pool_kernels with TLRT_POOL_DIV_EXHAUSTIVE=1); others keep div_rn.
TLRT_HD float div_by(float x, float d, float r) {
#if defined(__CUDA_ARCH__)
  const float q0 = __fmul_rn(x, r);
  const float e = __fmaf_rn(-q0, d, x);
  return fabsf(e) > 0.0f ? __fmaf_rn(e, r, q0) : q0;
#else
  const float q0 = x * r;
  const float e = std::fma(-q0, d, x);
  return std::fabs(e) > 0.0f ? std::fma(e, r, q0) : q0;
#endif
}
// Divisors for which div_by is exhaustively verified: the powers of two (x r is exact: x / d
// itself) and 9 (the k3 x 3 windows of the stream kernel). A list, not a rule: 6, for one, differs
// from '/' on some subnormal x.
inline bool div_by_verified(uint64_t d) {
  if (d >= 1 && d <= (uint64_t{1} << 24) && (d & (d - 1)) == 0) return true;
  for (uint64_t v : {9u}) if (d == v) return true;
  return false;
}

TLRT_HD constexpr int floor_div(int a, int b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }
TLRT_HD constexpr int ceil_div(int a, int b) { return -floor_div(-a, b); }

// Compile-time part of a fast-path geometry: kernel of the last two axes, stride and padding of
// the last one.
template <int KH_, int KW_, int SW_, int PW_>
struct Cfg {
  static constexpr int KH = KH_, KW = KW_, SW = SW_, PW = PW_;
  static constexpr int L = (kV - 1) * SW + KW;  // input columns spanned by kV windows
  // Windows per scatter thread: one float4 of dx per window row when SW divides 4, so that a
  // warp's store covers whole 32-byte sectors.
  static constexpr int VS = 4 % SW == 0 ? 4 / SW : kV;
  // Windows (relative to column / SW) containing column + i, i < kV, for column a multiple of 4
  // (SW divides 4): [rlo(i), rhi(i)].
  TLRT_HD static constexpr int rlo(int i) { return ceil_div(i + PW - KW + 1, SW); }
  TLRT_HD static constexpr int rhi(int i) { return floor_div(i + PW, SW); }
};

// Calls f(Cfg<...>{}) when g has a fast path (rank 2 or 3, 32-bit indices, a compiled
// configuration); returns whether it did. The list is the benchmark's shapes (bench/pool.py).
template <class F>
bool with_cfg(const ConvGeometry &g, F &&f) {
  if (g.rank < 2 || g.rank > 3 || !fits32(g)) return false;
  const uint32_t r = g.rank;
  const uint64_t kh = g.kernel[r - 2], kw = g.kernel[r - 1], sw = g.stride[r - 1],
                 pw = g.pad[r - 1];
  if (kh == 2 && kw == 2 && sw == 2 && pw == 0) return f(Cfg<2, 2, 2, 0>{}), true;
  if (kh == 3 && kw == 3 && sw == 2 && pw == 1) return f(Cfg<3, 3, 2, 1>{}), true;
  if (kh == 3 && kw == 3 && sw == 1 && pw == 1) return f(Cfg<3, 3, 1, 1>{}), true;
  return false;
}

// True when no two windows share a cell (stride >= kernel on every axis): the scatter backward.
inline bool disjoint(const ConvGeometry &g) {
  for (uint32_t d = 0; d < g.rank; ++d)
    if (g.stride[d] < g.kernel[d]) return false;
  return true;
}

// Run-time launch data of the fast kernels (by value as a kernel parameter).
struct Plan {
  uint32_t groups;      // v-groups per output row: ceil(out_w / v), v = kV (forward) or C::VS
                        // (scatter)
  uint32_t total;       // fwd / scatter threads: output rows * groups
  FastDiv by_groups;    // / groups
  FastDiv by_out[2];    // / out[d], d = 0 .. rank - 2 (output row -> plane and coordinates)
  FastDiv by_stride;    // / stride[0] (tile kernel: windows containing a row)
  bool vec_in, vec_out;  // rows of x / dx, resp. y / dy, 16-byte aligned: float4 accesses
  // Tile kernel (rank 2): tx threads per tile row (4 tx columns), tr rows; tiles_x * tiles_y
  // tiles per plane; the tile's windows: wr output rows x wc output columns.
  uint32_t tx, tr, tiles_x, tiles_y, wr, wc;
  FastDiv by_tx, by_tiles_x, by_tiles_y, by_wc;
  // Stream kernel (rank 2, stride 1 on both axes): threads = nc * runs * cols; a thread owns kV
  // columns of one run of rh consecutive rows.
  uint32_t cols, runs, rh, stotal;
  FastDiv by_cols, by_runs;
  // Average with count_include_pad: every window divides by D = prod(kernel); div_fast when
  // div_by is exact for D (div_by_verified), with rcp = RN(1 / D).
  bool div_fast;
  float rcp;
  int ahead;  // stream and sep kernels: window rows prefetched ahead (kStreamAhead)
};

inline bool aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

// in_ptrs: the buffers with x's shape (x, dx); out_ptrs: those with y's shape (y, dy); NULL entries
// are ignored.
// rows: the stream kernel's rows per run at most (StreamOpt::rows).
template <class C>
Plan make_plan(const Dims<uint32_t> &m, std::initializer_list<const void *> in_ptrs,
               std::initializer_list<const void *> out_ptrs, uint32_t v = kV,
               uint32_t rows = kStreamRows) {
  const int R = m.rank;
  const uint32_t W = m.out[R - 1], IW = m.in[R - 1];
  Plan p{};
  p.groups = (W + v - 1) / v;
  p.total = m.nc * (m.out_sp / W) * p.groups;
  p.by_groups = make_fastdiv(p.groups);
  for (int d = 0; d < R - 1; ++d) p.by_out[d] = make_fastdiv(m.out[d]);
  p.by_stride = make_fastdiv(m.s[0]);
  p.vec_in = IW % 4 == 0;
  for (const void *q : in_ptrs) p.vec_in = p.vec_in && (q == nullptr || aligned16(q));
  p.vec_out = W % 4 == 0;
  for (const void *q : out_ptrs) p.vec_out = p.vec_out && (q == nullptr || aligned16(q));
  if (R == 2) {
    const uint32_t cols = (IW + kV - 1) / kV;  // 4-cell groups per input row
    p.tx = cols < 64 ? cols : 64;
    p.tr = kThreads / p.tx;
    p.tiles_x = (cols + p.tx - 1) / p.tx;
    p.tiles_y = (m.in[0] + p.tr - 1) / p.tr;
    // Windows containing rows h0 .. h0 + tr - 1: at most floor((tr + KH - 2) / SH) + 1 (the first
    // is ceil((h0 + PH - KH + 1) / SH), the last floor((h0 + tr - 1 + PH) / SH)); columns alike.
    p.wr = (p.tr + C::KH - 2) / m.s[0] + 1;
    p.wc = (kV * p.tx + C::KW - 2) / C::SW + 1;
    p.by_tx = make_fastdiv(p.tx);
    p.by_tiles_x = make_fastdiv(p.tiles_x);
    p.by_tiles_y = make_fastdiv(p.tiles_y);
    p.by_wc = make_fastdiv(p.wc);
    // Runs of at most kStreamRows rows, as even as possible (56 rows: 7 runs of 8).
    p.cols = cols;
    p.runs = (m.in[0] + rows - 1) / rows;
    p.rh = (m.in[0] + p.runs - 1) / p.runs;
    p.runs = (m.in[0] + p.rh - 1) / p.rh;
    p.stotal = m.nc * p.runs * p.cols;
    p.by_cols = make_fastdiv(p.cols);
    p.by_runs = make_fastdiv(p.runs);
  }
  p.div_fast = div_by_verified(m.window);
  p.rcp = 1.0f / (float)m.window;
  return p;
}

// ---- loads and stores ---------------------------------------------------------------------------

struct F4 {
  float v[4];
};
TLRT_HD F4 ld4(const float *p) {
#if defined(__CUDA_ARCH__)
  const float4 q = *reinterpret_cast<const float4 *>(p);
  return {{q.x, q.y, q.z, q.w}};
#else
  emu_check(aligned16(p), "unaligned float4 load");
  F4 r;
  std::memcpy(r.v, p, sizeof r.v);
  return r;
#endif
}
struct F2 {
  float v[2];
};
TLRT_HD F2 ld2(const float *p) {
#if defined(__CUDA_ARCH__)
  const float2 q = *reinterpret_cast<const float2 *>(p);
  return {{q.x, q.y}};
#else
  emu_check(((uintptr_t)p & 7u) == 0, "unaligned float2 load");
  F2 r;
  std::memcpy(r.v, p, sizeof r.v);
  return r;
#endif
}
TLRT_HD void st4(float *p, const F4 &r) {
#if defined(__CUDA_ARCH__)
  *reinterpret_cast<float4 *>(p) = make_float4(r.v[0], r.v[1], r.v[2], r.v[3]);
#else
  emu_check(aligned16(p), "unaligned float4 store");
  std::memcpy(p, r.v, sizeof r.v);
#endif
}

// Prefetch of the line holding plane[off] (off < n) into L2 and L1: no register, no result, so
// it cannot change a value; on the host (emulation) it only checks that off is inside the plane.
// Both levels: an L2 hit still saves most of a DRAM round trip if the L1 hint is dropped.
TLRT_HD void prefetch(const float *plane, uint32_t off, uint32_t n) {
  emu_check(off < n, "prefetch outside the plane");
#if defined(__CUDA_ARCH__)
  asm volatile("prefetch.global.L2 [%0];" ::"l"(plane + off));
  asm volatile("prefetch.global.L1 [%0];" ::"l"(plane + off));
#else
  (void)plane;
#endif
}

// Loads columns col0 .. col0 + L - 1 of one input row into c (L = C::L for kV windows); columns
// outside [0, IW) read as `fill`. vec: IW % 4 == 0 and the row 16-byte aligned; col0 + PW is then
// a multiple of 4 (the callers' first column is a multiple of 4 / SW windows' stride), so whole
// float4 chunks are in or out.
template <class C, int L>
TLRT_HD void load_row(const float *row, int col0, uint32_t IW, bool vec, float fill,
                      float (&c)[L]) {
  if (vec) {
    constexpr int qlo = floor_div(-C::PW, 4), qhi = floor_div(L - 1 - C::PW, 4);
    const int a = col0 + C::PW;
    TLRT_UNROLL
    for (int q = qlo; q <= qhi; ++q) {
      const int cs = a + 4 * q;
      F4 v = {{fill, fill, fill, fill}};
      if ((unsigned)cs < IW) v = ld4(row + cs);
      TLRT_UNROLL
      for (int e = 0; e < 4; ++e) {
        const int j = 4 * q + e + C::PW;
        if (j >= 0 && j < L) c[j] = v.v[e];
      }
    }
  } else {
    TLRT_UNROLL
    for (int j = 0; j < L; ++j) {
      const int col = col0 + j;
      c[j] = (unsigned)col < IW ? row[col] : fill;
    }
  }
}

// ---- windows of one output row ------------------------------------------------------------------

// A window along one axis: its start (may be negative: padding) and its real cells [lo, hi).
struct Span {
  int ws, lo, hi;
};
TLRT_HD Span span_of(const Dims<uint32_t> &m, int d, uint32_t o) {
  const int ws = (int)(o * m.s[d]) - (int)m.p[d];
  const int we = ws + (int)m.k[d];
  return {ws, ws > 0 ? ws : 0, we < (int)m.in[d] ? we : (int)m.in[d]};
}

// One output row of the per-output kernels: thread t owns outputs ow0 .. ow0 + nv - 1 of output
// row r (flat over plane and the leading output coordinates), whose windows span sp[] on the
// leading axes and start at column col0.
template <int R>
struct Row {
  uint32_t r, plane, ow0;
  int nv, col0;
  uint32_t o[R - 1];  // output coordinates on the leading axes
  Span sp[R - 1];
};
template <class C, int R, int V = kV>
TLRT_HD Row<R> row_of(const Dims<uint32_t> &m, const Plan &f, uint32_t t) {
  Row<R> w;
  w.r = fdiv(f.by_groups, t);
  w.ow0 = (t - w.r * f.groups) * V;
  uint32_t q = w.r;
  TLRT_UNROLL
  for (int d = R - 2; d >= 0; --d) {
    const uint32_t qq = fdiv(f.by_out[d], q);
    w.o[d] = q - qq * m.out[d];
    w.sp[d] = span_of(m, d, w.o[d]);
    q = qq;
  }
  w.plane = q;
  const uint32_t W = m.out[R - 1];
  w.nv = W - w.ow0 < (uint32_t)V ? (int)(W - w.ow0) : V;
  w.col0 = (int)(w.ow0 * C::SW) - C::PW;
  return w;
}

// Calls f(row offset in the plane, a) for every real row of the windows of w, row-major: the depth
// axis (rank 3, run time) outside, the KH rows of axis rank - 2 inside (a = row within the window).
template <class C, int R, class F>
TLRT_HD void for_rows(const Dims<uint32_t> &m, const Span *sp, F &&f) {
  const uint32_t IH = m.in[R - 2], IW = m.in[R - 1];
  int dlo = 0, dhi = 1;
  if constexpr (R == 3) {
    dlo = sp[0].lo;
    dhi = sp[0].hi;
  }
  for (int dd = dlo; dd < dhi; ++dd) {
    const uint32_t base = R == 3 ? (uint32_t)dd * m.istr[0] : 0u;
    TLRT_UNROLL
    for (int a = 0; a < C::KH; ++a) {
      const int h = sp[R - 2].ws + a;
      if ((unsigned)h < IH) f(base + (uint32_t)h * IW, a);
    }
  }
}

// Calls f(c) for every row of the windows of w in for_rows' order, c the row's C::L columns from
// w.col0 (outside the input: fill). Unlike for_rows, the KH rows of a depth slice are all loaded
// before the first is used and a row outside the input is a row of `fill` (no load, no branch),
// so the KH rows are in flight together (a per-row branch serialises them). fill must be the
// identity of f's operation (max: -inf; sum: -0), so the extra rows change nothing.
template <class C, int R, class F>
TLRT_HD void for_loaded_rows(const Dims<uint32_t> &m, const float *xp, const Row<R> &w, bool vec,
                             float fill, F &&f) {
  const uint32_t IH = m.in[R - 2], IW = m.in[R - 1];
  int dlo = 0, dhi = 1;
  if constexpr (R == 3) {
    dlo = w.sp[0].lo;
    dhi = w.sp[0].hi;
  }
  for (int dd = dlo; dd < dhi; ++dd) {
    const uint32_t base = R == 3 ? (uint32_t)dd * m.istr[0] : 0u;
    float c[C::KH][C::L];
    TLRT_UNROLL
    for (int a = 0; a < C::KH; ++a) {
      const int h = w.sp[R - 2].ws + a;
      const bool in = (unsigned)h < IH;  // else width 0: every column reads as fill
      load_row<C>(xp + base + (in ? (uint32_t)h * IW : 0u), w.col0, in ? IW : 0u, vec, fill,
                  c[a]);
    }
    TLRT_UNROLL
    for (int a = 0; a < C::KH; ++a) f(c[a]);
  }
}

// Real cells of window v along the last axis (its columns col0 + v SW + j, j < KW, inside).
template <class C>
TLRT_HD uint32_t real_cols(int col0, int v, uint32_t IW) {
  uint32_t n = 0;
  TLRT_UNROLL
  for (int j = 0; j < C::KW; ++j) n += (unsigned)(col0 + v * C::SW + j) < IW ? 1u : 0u;
  return n;
}

// Real rows of the windows of a row (product over the leading axes).
template <class C, int R>
TLRT_HD uint32_t real_rows(const Span *sp) {
  uint32_t n = 1;
  TLRT_UNROLL
  for (int d = 0; d < R - 1; ++d) n *= (uint32_t)(sp[d].hi - sp[d].lo);
  return n;
}

// Plane offset of the first NaN of the window starting at column wcol (rows row-major, then
// columns), or kNone (offsets are below 2^31) when it has none. The max rule selects it
// (pool::max_takes); rare, so a plain second walk.
constexpr uint32_t kNone = 0xffffffffu;
template <class C, int R>
TLRT_HD uint32_t first_nan_at(const Dims<uint32_t> &m, const float *xp, const Span *sp, int wcol) {
  const uint32_t IW = m.in[R - 1];
  uint32_t at = kNone;
  bool found = false;
  for_rows<C, R>(m, sp, [&](uint32_t off, int) {
    for (int j = 0; j < C::KW; ++j) {
      const int col = wcol + j;
      if (!found && (unsigned)col < IW && xp[off + col] != xp[off + col]) {
        at = off + (uint32_t)col;
        found = true;
      }
    }
  });
  return at;
}

// Pivot of the smooth max (first max for beta > 0, first min for beta < 0, first NaN if any) of
// the V windows of a row: min / max with fill +-inf, then the first NaN where one was seen (the
// same value pool::smooth_window's walk with max_takes / min_takes selects).
template <class C, int R, int V>
TLRT_HD void smooth_pivots(const Dims<uint32_t> &m, const Plan &f, const float *xp,
                           const Row<R> &w, float beta, float (&pv)[V]) {
  const float inf = num::u2f(0x7f800000u);
  const bool up = beta > 0.0f;
  bool nan[V];
  TLRT_UNROLL
  for (int v = 0; v < V; ++v) {
    pv[v] = up ? -inf : inf;
    nan[v] = false;
  }
  for_rows<C, R>(m, w.sp, [&](uint32_t off, int) {
    float c[(V - 1) * C::SW + C::KW];
    load_row<C>(xp + off, w.col0, m.in[R - 1], f.vec_in, up ? -inf : inf, c);
    TLRT_UNROLL
    for (int v = 0; v < V; ++v)
      TLRT_UNROLL
      for (int j = 0; j < C::KW; ++j) {
        const float x = c[v * C::SW + j];
        nan[v] = nan[v] || x != x;
        pv[v] = (up ? x > pv[v] : x < pv[v]) ? x : pv[v];
      }
  });
  TLRT_UNROLL
  for (int v = 0; v < V; ++v)
    if (v < w.nv && nan[v]) pv[v] = xp[first_nan_at<C, R>(m, xp, w.sp, w.col0 + v * C::SW)];
}

// The smooth-max sums S = (+0 + e_1) + ... over the real cells, row-major, e = exp(b (x - pv)).
template <class C, int R, int V>
TLRT_HD void smooth_sums(const Dims<uint32_t> &m, const Plan &f, const float *xp, const Row<R> &w,
                         float beta, const float (&pv)[V], float (&s)[V]) {
  const uint32_t IW = m.in[R - 1];
  TLRT_UNROLL
  for (int v = 0; v < V; ++v) s[v] = 0.0f;
  for_rows<C, R>(m, w.sp, [&](uint32_t off, int) {
    float c[(V - 1) * C::SW + C::KW];
    load_row<C>(xp + off, w.col0, IW, f.vec_in, 0.0f, c);
    TLRT_UNROLL
    for (int v = 0; v < V; ++v)
      TLRT_UNROLL
      for (int j = 0; j < C::KW; ++j)
        if ((unsigned)(w.col0 + v * C::SW + j) < IW)
          s[v] += smooth_term(c[v * C::SW + j], pv[v], beta);
  });
}

// ---- forward ------------------------------------------------------------------------------------

// IEEE maxNum (the larger; the other operand when one is NaN; either zero when both are zeros):
// one FMNMX on the GPU. Only used where its result's bits are checked or fixed afterwards.
TLRT_HD float max_num(float a, float b) {
#if defined(__CUDA_ARCH__)
  return fmaxf(a, b);
#else
  return std::fmax(a, b);
#endif
}

// Thread t < f.total: outputs ow0 .. ow0 + nv - 1 of output row r.
template <Kind K, class C, int R>
TLRT_HD void fwd_thread(const Dims<uint32_t> &m, const Plan &f, const float *x, float *y,
                        uint32_t t, bool include_pad, float beta) {
  const Row<R> w = row_of<C, R>(m, f, t);
  const uint32_t IW = m.in[R - 1];
  const float *xp = x + (uint64_t)w.plane * m.in_sp;
  const float inf = num::u2f(0x7f800000u);
  float out[kV];
  if constexpr (K == Kind::Max) {
    // First maximum, rows first: per window row the first maximum of its KW cells, then the
    // first largest of those (a strict '>' select keeps the earlier of equal values, -0 / +0
    // included, and is associative, so windows share partial selects). Padding reads as -inf
    // (never selected over a real cell). A window holding a NaN takes its first NaN (one flag
    // per thread, a rare second walk): pool::max_takes' selection. The first pass takes maxNum
    // (one FMNMX), exact but for the sign of a zero result (maxNum may return either zero): a
    // thread with a zero result runs the exact select pass again, its rows in L1.
    bool nan_any = false;
    auto sel = [](float a, float b) { return b > a ? b : a; };  // first of a, b if not smaller
    auto mx = [](float a, float b) { return max_num(a, b); };
    auto pass = [&](auto op) {
    nan_any = false;
    TLRT_UNROLL
    for (int v = 0; v < kV; ++v) out[v] = -inf;
    for_loaded_rows<C, R>(m, xp, w, f.vec_in, -inf, [&](const float(&c)[C::L]) {
      TLRT_UNROLL
      for (int j = 0; j < C::L; ++j) nan_any = nan_any || c[j] != c[j];
      float hm[kV];
      if constexpr (C::SW == 1 && C::KW == 3 && kV == 4) {
        const float p12 = op(c[1], c[2]), p34 = op(c[3], c[4]);
        hm[0] = op(c[0], p12);
        hm[1] = op(p12, c[3]);
        hm[2] = op(c[2], p34);
        hm[3] = op(p34, c[5]);
      } else {
        TLRT_UNROLL
        for (int v = 0; v < kV; ++v) {
          hm[v] = c[v * C::SW];
          TLRT_UNROLL
          for (int j = 1; j < C::KW; ++j) hm[v] = op(hm[v], c[v * C::SW + j]);
        }
      }
      TLRT_UNROLL
      for (int v = 0; v < kV; ++v) out[v] = op(out[v], hm[v]);
    });
    };
    pass(mx);
    bool zero = false;
    TLRT_UNROLL
    for (int v = 0; v < kV; ++v) zero = zero || out[v] == 0.0f;
    if (zero) pass(sel);
    if (nan_any) {
      TLRT_UNROLL
      for (int v = 0; v < kV; ++v) {
        const uint32_t at =
            v < w.nv ? first_nan_at<C, R>(m, xp, w.sp, w.col0 + v * C::SW) : kNone;
        if (at != kNone) out[v] = xp[at];
      }
    }
  } else if constexpr (K == Kind::Avg) {
    // Padding reads as -0, the identity of the sum from -0 (s + -0 == s for every s).
    TLRT_UNROLL
    for (int v = 0; v < kV; ++v) out[v] = -0.0f;
    for_loaded_rows<C, R>(m, xp, w, f.vec_in, -0.0f, [&](const float(&c)[C::L]) {
      TLRT_UNROLL
      for (int v = 0; v < kV; ++v)
        TLRT_UNROLL
        for (int j = 0; j < C::KW; ++j) out[v] += c[v * C::SW + j];
    });
    const uint32_t rows = real_rows<C, R>(w.sp);
    TLRT_UNROLL
    for (int v = 0; v < kV; ++v)
      out[v] = div_rn(out[v], include_pad ? (float)m.window
                                          : (float)(rows * real_cols<C>(w.col0, v, IW)));
  } else {
    float pv[kV], s[kV];
    smooth_pivots<C, R>(m, f, xp, w, beta, pv);
    smooth_sums<C, R>(m, f, xp, w, beta, pv, s);
    TLRT_UNROLL
    for (int v = 0; v < kV; ++v) out[v] = smooth_out(pv[v], s[v], beta);
  }
  float *yr = y + (uint64_t)w.r * m.out[R - 1] + w.ow0;
  if (f.vec_out && w.nv == kV) {
    st4(yr, F4{{out[0], out[1], out[2], out[3]}});
  } else {
    TLRT_UNROLL
    for (int v = 0; v < kV; ++v)
      if (v < w.nv) yr[v] = out[v];
  }
}

// ---- backward, disjoint windows: scatter of whole slabs -----------------------------------------

// Thread t < f.total (a plan made with v = C::VS): the V = C::VS windows ow0 .. ow0 + V - 1 of
// output row r. dx cells of these windows get +0 + term (the CPU's dx = +0 followed by its one
// addition), every other cell of the slab +0. A slab row is V SW = 4 columns from a multiple of
// 4: one float4 store per thread and row, so a warp's store covers whole 128-byte lines.
template <Kind K, class C, int R>
TLRT_HD void scatter_thread(const Dims<uint32_t> &m, const Plan &f, const float *x,
                            const float *dy, bool include_pad, float beta, float *dx, uint32_t t) {
  static_assert(C::SW >= C::KW, "scatter: windows must not overlap");
  constexpr int V = C::VS;
  const Row<R> w = row_of<C, R, V>(m, f, t);
  const uint32_t W = m.out[R - 1], IW = m.in[R - 1];
  const float *xp = x ? x + (uint64_t)w.plane * m.in_sp : nullptr;
  float *dp = dx + (uint64_t)w.plane * m.in_sp;
  const float *gr = dy + (uint64_t)w.r * W + w.ow0;
  float g[V];
  if (V == 2 && f.vec_out && w.nv == V) {  // ow0 even, W % 4 == 0: 8-byte aligned
    const F2 q = ld2(gr);
    TLRT_UNROLL
    for (int v = 0; v < V; ++v) g[v] = q.v[v % 2];
  } else {
    TLRT_UNROLL
    for (int v = 0; v < V; ++v) g[v] = v < w.nv ? gr[v] : 0.0f;
  }
  const float inf = num::u2f(0x7f800000u);
  float a0[V], a1[V];  // max: -; average: dy / divisor; smooth: pivot, sum
  uint32_t at[V];      // max: plane offset of the selected cell
  if constexpr (K == Kind::Max) {
    // First real cell: the selection when every cell is -inf.
    uint32_t first = 0;
    {
      int dlo = 0;
      if constexpr (R == 3) dlo = w.sp[0].lo;
      first = (R == 3 ? (uint32_t)dlo * m.istr[0] : 0u) + (uint32_t)w.sp[R - 2].lo * IW;
    }
    bool nan[V];
    TLRT_UNROLL
    for (int v = 0; v < V; ++v) {
      const int c0 = w.col0 + v * C::SW;
      a0[v] = -inf;
      at[v] = first + (uint32_t)(c0 > 0 ? c0 : 0);
      nan[v] = false;
    }
    for_rows<C, R>(m, w.sp, [&](uint32_t off, int) {
      float c[(V - 1) * C::SW + C::KW];
      load_row<C>(xp + off, w.col0, IW, f.vec_in, -inf, c);
      TLRT_UNROLL
      for (int v = 0; v < V; ++v)
        TLRT_UNROLL
        for (int j = 0; j < C::KW; ++j) {
          const float x = c[v * C::SW + j];
          nan[v] = nan[v] || x != x;
          if (x > a0[v]) {
            a0[v] = x;
            at[v] = off + (uint32_t)(w.col0 + v * C::SW + j);
          }
        }
    });
    TLRT_UNROLL
    for (int v = 0; v < V; ++v)
      if (v < w.nv && nan[v]) at[v] = first_nan_at<C, R>(m, xp, w.sp, w.col0 + v * C::SW);
  } else if constexpr (K == Kind::Avg) {
    const uint32_t rows = real_rows<C, R>(w.sp);
    TLRT_UNROLL
    for (int v = 0; v < V; ++v)
      a0[v] = div_rn(g[v], include_pad ? (float)m.window
                                       : (float)(rows * real_cols<C>(w.col0, v, IW)));
  } else {
    smooth_pivots<C, R>(m, f, xp, w, beta, a0);
    smooth_sums<C, R>(m, f, xp, w, beta, a0, a1);
  }
  // The term of window v for a cell of it (plane offset off).
  auto term = [&](int v, uint32_t off) -> float {
    if constexpr (K == Kind::Max)
      return off == at[v] ? 0.0f + g[v] : 0.0f;
    else if constexpr (K == Kind::Avg)
      return 0.0f + a0[v];
    else
      return 0.0f + smooth_grad(g[v], xp[off], a0[v], a1[v], beta);
  };
  // Slabs of the leading axes: from the window start (clipped at 0) to the next window's start,
  // or to the end of the axis for the last window; rows outside the window get zeros.
  int slo[2], shi[2];
  TLRT_UNROLL
  for (int d = 0; d < R - 1; ++d) {
    slo[d] = w.sp[d].lo;
    shi[d] = w.o[d] == m.out[d] - 1 ? (int)m.in[d] : w.sp[d].ws + (int)m.s[d];
  }
  const bool last_group = w.ow0 + (uint32_t)w.nv == W;
  // Whole float4s: no padding, a full group, and (for the last group of the row) no tail of
  // cells in no window after it (IW = W SW: every group of the row, 112 / 2 and 64 / 2 included).
  constexpr int NQ = V * C::SW / 4;  // float4 stores per row: 1 when SW divides 4
  const bool vec_row = C::PW == 0 && (V * C::SW) % 4 == 0 && f.vec_in && w.nv == V &&
                       (!last_group || (uint32_t)w.col0 + (uint32_t)(V * C::SW) == IW);
  auto write_row = [&](uint32_t off, bool in_win) {
    if (vec_row) {  // the V SW columns from col0 (a multiple of 4): NQ float4 stores
      TLRT_UNROLL
      for (int q = 0; q < NQ; ++q) {
        F4 o;
        TLRT_UNROLL
        for (int e = 0; e < 4; ++e) {
          const int j = 4 * q + e, v = j / C::SW, jj = j % C::SW;
          o.v[e] = in_win && jj < C::KW ? term(v, off + (uint32_t)(w.col0 + j)) : 0.0f;
        }
        st4(dp + off + (uint32_t)w.col0 + 4u * q, o);
      }
      return;
    }
    TLRT_UNROLL
    for (int v = 0; v < V; ++v) {
      if (v < w.nv) {
        const int ws = w.col0 + v * C::SW;
        const int lo = ws > 0 ? ws : 0;
        const int hi = v == w.nv - 1 && last_group ? (int)IW : ws + C::SW;
        for (int col = lo; col < hi; ++col)
          dp[off + (uint32_t)col] =
              in_win && col - ws < C::KW ? term(v, off + (uint32_t)col) : 0.0f;
      }
    }
  };
  const uint32_t IH = m.in[R - 2];
  const int hws = w.sp[R - 2].ws;
  int dlo = 0, dhi = 1, dws = 0;
  if constexpr (R == 3) {
    dlo = slo[0];
    dhi = shi[0];
    dws = w.sp[0].ws;
  }
  for (int dd = dlo; dd < dhi; ++dd) {
    const bool din = R == 2 || (uint32_t)(dd - dws) < m.k[0];
    const uint32_t base = R == 3 ? (uint32_t)dd * m.istr[0] : 0u;
    for (int h = slo[R - 2]; h < shi[R - 2]; ++h) {
      emu_check((uint32_t)h < IH, "scatter row outside the input");
      write_row(base + (uint32_t)h * IW, din && (uint32_t)(h - hws) < (uint32_t)C::KH);
    }
  }
}

// ---- backward, overlapping windows (rank 2): shared-memory tile ---------------------------------

// Shared memory of a tile: n = wr * wc windows; max: dy[n] then the selected cell's position in
// its window (a KW + j) as bytes[n]; average: (dy / divisor)[n]; smooth: dy[n], pivot[n], sum[n].
template <Kind K>
inline uint32_t tile_smem_bytes(const Plan &p) {
  const uint32_t n = p.wr * p.wc;
  return K == Kind::Max ? n * 5u : K == Kind::Avg ? n * 4u : n * 12u;
}

struct Tile {
  uint32_t plane;
  int h0, w0;    // first input cell
  int oh0, ow0;  // first window (output coordinates) of the shared-memory grid
};

template <class C>
TLRT_HD Tile tile_of(const Dims<uint32_t> &m, const Plan &f, uint32_t b) {
  const uint32_t q = fdiv(f.by_tiles_x, b), bx = b - q * f.tiles_x;
  const uint32_t plane = fdiv(f.by_tiles_y, q), by = q - plane * f.tiles_y;
  Tile T;
  T.plane = plane;
  T.h0 = (int)(by * f.tr);
  T.w0 = (int)(bx * f.tx * kV);
  const int hp = T.h0 + (int)m.p[0];
  T.oh0 = hp >= C::KH ? (int)fdiv(f.by_stride, (uint32_t)(hp - C::KH)) + 1 : 0;
  T.ow0 = T.w0 + C::PW >= C::KW ? (T.w0 + C::PW - C::KW) / C::SW + 1 : 0;
  return T;
}

// Phase 1: window idx < wr * wc of the tile's grid (windows outside the output are skipped; phase
// 2 never reads them).
template <Kind K, class C>
TLRT_HD void tile_window(const Dims<uint32_t> &m, const Plan &f, const Tile &T, const float *x,
                         const float *dy, bool include_pad, float beta, float *sm, uint32_t idx) {
  const uint32_t n = f.wr * f.wc;
  const uint32_t wr = fdiv(f.by_wc, idx), wc = idx - wr * f.wc;
  const uint32_t oh = (uint32_t)T.oh0 + wr, ow = (uint32_t)T.ow0 + wc;
  const uint32_t IH = m.in[0], IW = m.in[1], W = m.out[1];
  if (oh >= m.out[0] || ow >= W) return;
  const float g = dy[(uint64_t)T.plane * m.out_sp + oh * W + ow];
  const float *xp = x ? x + (uint64_t)T.plane * m.in_sp : nullptr;
  const int hs = (int)(oh * m.s[0]) - (int)m.p[0], ws = (int)(ow * C::SW) - C::PW;
  const float inf = num::u2f(0x7f800000u);
  if constexpr (K == Kind::Max) {
    float best = -inf;
    int code = (hs < 0 ? -hs : 0) * C::KW + (ws < 0 ? -ws : 0);  // first real cell
    bool nan = false;
    TLRT_UNROLL
    for (int a = 0; a < C::KH; ++a) {
      const int h = hs + a;
      if ((unsigned)h >= IH) continue;
      TLRT_UNROLL
      for (int j = 0; j < C::KW; ++j) {
        const int col = ws + j;
        const float v = (unsigned)col < IW ? xp[h * (int)IW + col] : -inf;
        nan = nan || v != v;
        if (v > best) {
          best = v;
          code = a * C::KW + j;
        }
      }
    }
    if (nan) {
      bool found = false;
      for (int a = 0; a < C::KH; ++a)
        for (int j = 0; j < C::KW; ++j) {
          const int h = hs + a, col = ws + j;
          if (!found && (unsigned)h < IH && (unsigned)col < IW &&
              xp[h * (int)IW + col] != xp[h * (int)IW + col]) {
            code = a * C::KW + j;
            found = true;
          }
        }
    }
    sm[idx] = g;
    reinterpret_cast<uint8_t *>(sm + n)[idx] = (uint8_t)code;
  } else if constexpr (K == Kind::Avg) {
    float d = (float)m.window;
    if (!include_pad) {
      const int h1 = hs + C::KH < (int)IH ? hs + C::KH : (int)IH;
      const int c1 = ws + C::KW < (int)IW ? ws + C::KW : (int)IW;
      d = (float)((uint32_t)(h1 - (hs > 0 ? hs : 0)) * (uint32_t)(c1 - (ws > 0 ? ws : 0)));
    }
    sm[idx] = div_rn(g, d);
  } else {
    // pool::smooth_window on this window (2-D, compile-time kernel).
    const bool up = beta > 0.0f;
    float pv = up ? -inf : inf;
    bool nan = false;
    int nan_at = -1;
    TLRT_UNROLL
    for (int a = 0; a < C::KH; ++a) {
      const int h = hs + a;
      if ((unsigned)h >= IH) continue;
      TLRT_UNROLL
      for (int j = 0; j < C::KW; ++j) {
        const int col = ws + j;
        if ((unsigned)col >= IW) continue;
        const float v = xp[h * (int)IW + col];
        if (v != v && !nan) nan_at = h * (int)IW + col;
        nan = nan || v != v;
        pv = (up ? v > pv : v < pv) ? v : pv;
      }
    }
    if (nan) pv = xp[nan_at];
    float s = 0.0f;
    TLRT_UNROLL
    for (int a = 0; a < C::KH; ++a) {
      const int h = hs + a;
      if ((unsigned)h >= IH) continue;
      TLRT_UNROLL
      for (int j = 0; j < C::KW; ++j) {
        const int col = ws + j;
        if ((unsigned)col < IW) s += smooth_term(xp[h * (int)IW + col], pv, beta);
      }
    }
    sm[idx] = g;
    sm[n + idx] = pv;
    sm[2 * n + idx] = s;
  }
}

// Phase 2: thread tid's 4 cells (row T.h0 + tid / tx, columns T.w0 + 4 (tid % tx) ..): the sum,
// over the windows containing each cell in output order, of the window's term, from +0.
template <Kind K, class C>
TLRT_HD void tile_cells(const Dims<uint32_t> &m, const Plan &f, const Tile &T, const float *x,
                        float beta, const float *sm, uint32_t tid, float *dx) {
  constexpr int RLO = C::rlo(0), RHI = C::rhi(kV - 1), NW = RHI - RLO + 1;
  static_assert(4 % C::SW == 0, "tile: the stride must divide 4");
  const uint32_t ty = fdiv(f.by_tx, tid), tx = tid - ty * f.tx;
  const uint32_t IH = m.in[0], IW = m.in[1], W = m.out[1];
  const int h = T.h0 + (int)ty, w = T.w0 + (int)tx * kV;
  if (ty >= f.tr || (uint32_t)h >= IH || (uint32_t)w >= IW) return;
  const uint32_t n = f.wr * f.wc;
  const uint64_t pbase = (uint64_t)T.plane * m.in_sp + (uint64_t)h * IW + (uint32_t)w;
  float xv[kV] = {0.0f, 0.0f, 0.0f, 0.0f};
  if constexpr (K == Kind::Smooth) {
    if (f.vec_in) {
      const F4 q = ld4(x + pbase);
      TLRT_UNROLL
      for (int i = 0; i < kV; ++i) xv[i] = q.v[i];
    } else {
      TLRT_UNROLL
      for (int i = 0; i < kV; ++i)
        if ((uint32_t)w + i < IW) xv[i] = x[pbase + i];
    }
  }
  const int hp = h + (int)m.p[0];
  const int ohlo = hp >= C::KH ? (int)fdiv(f.by_stride, (uint32_t)(hp - C::KH)) + 1 : 0;
  int ohhi = (int)fdiv(f.by_stride, (uint32_t)hp);
  ohhi = ohhi < (int)m.out[0] - 1 ? ohhi : (int)m.out[0] - 1;
  const int wq = w / C::SW;
  float acc[kV] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (int oh = ohlo; oh <= ohhi; ++oh) {
    const int a = h - ((int)(oh * m.s[0]) - (int)m.p[0]);  // row of the cell in the window
    const int rowbase = (oh - T.oh0) * (int)f.wc - T.ow0;
    float g[NW], s1[NW], s2[NW];
    int code[NW];
    bool ok[NW];
    TLRT_UNROLL
    for (int q = 0; q < NW; ++q) {
      const int ow = wq + RLO + q;
      ok[q] = (unsigned)ow < W;
      const int i = rowbase + ow;
      if (ok[q]) emu_check(oh >= T.oh0 && (uint32_t)(oh - T.oh0) < f.wr &&
                               (uint32_t)(ow - T.ow0) < f.wc, "tile window outside the grid");
      if constexpr (K == Kind::Max) {
        g[q] = ok[q] ? sm[i] : 0.0f;
        code[q] = ok[q] ? (int)reinterpret_cast<const uint8_t *>(sm + n)[i] : -1;
      } else if constexpr (K == Kind::Avg) {
        g[q] = ok[q] ? sm[i] : -0.0f;  // -0: the identity of the sums below
      } else {
        g[q] = ok[q] ? sm[i] : 0.0f;
        s1[q] = ok[q] ? sm[n + i] : 0.0f;
        s2[q] = ok[q] ? sm[2 * n + i] : 1.0f;
      }
    }
    TLRT_UNROLL
    for (int i = 0; i < kV; ++i)
      TLRT_UNROLL
      for (int rel = C::rlo(i); rel <= C::rhi(i); ++rel) {
        const int q = rel - RLO;
        if constexpr (K == Kind::Max) {
          if (code[q] == a * C::KW + (i - rel * C::SW + C::PW)) acc[i] += g[q];
        } else if constexpr (K == Kind::Avg) {
          acc[i] += g[q];
        } else {
          if (ok[q]) acc[i] += smooth_grad(g[q], xv[i], s1[q], s2[q], beta);
        }
      }
    (void)s1;
    (void)s2;
    (void)code;
  }
  if (f.vec_in) {
    st4(dx + pbase, F4{{acc[0], acc[1], acc[2], acc[3]}});
  } else {
    TLRT_UNROLL
    for (int i = 0; i < kV; ++i)
      if ((uint32_t)w + i < IW) dx[pbase + i] = acc[i];
  }
}

// ---- backward, overlapping windows (rank 2), equal strides: row streaming ---------------------

// True when the stream kernel takes g: kind max or average, rank 2, overlapping windows with the
// same stride S on both axes, S dividing 4 (C fixes the last axis: k3 s1 p1 and the stem's k3 s2
// p1). Smooth max keeps the tile kernel.
template <class C>
inline bool stream_ok(const ConvGeometry &g, Kind k) {
  return C::SW < C::KW && 4 % C::SW == 0 && g.rank == 2 && g.stride[0] == (uint64_t)C::SW &&
         g.kernel[0] == (uint64_t)C::KH && C::SW <= C::KH && k != Kind::Smooth;
}

// Window rows the stream and sep kernels prefetch ahead (Plan::ahead, set by bwd_path): one is
// enough, further rows only add lines that L1 evicts before use. A plan value, so that the
// emulation test runs other distances.
constexpr int kStreamAhead = 1;

// Thread t < f.stotal: kV cells (columns w .. w + 3) of each row of one run [hA, hB) of a plane.
// It walks the output rows oh whose windows touch the run, in increasing order, and for each one
// (a) computes the statistic of the NW windows (oh, w / S + RLO + q) that contain its columns:
//     average dy / divisor; max the selected cell, from per-input-row first maxima (value,
//     column) computed once per input row and kept for the KH window rows in registers (the
//     first maximum of a window is the first maximum of its first row holding the window's
//     maximum: rows first, then columns, is row-major order);
// (b) adds each window's term to the accumulators of the KH input rows it covers, windows in
//     increasing ow: so every cell sums its windows in output order (oh, then ow), from +0;
// (c) writes the S input rows hs .. hs + S - 1 (hs = oh S - PH), whose windows are all done: one
//     float4 per thread and row.
// FD (average only): the divisions are div_by's (count_include_pad and a verified divisor), a
// template parameter so that the loop has no branch per division.
template <Kind K, class C, bool FD>
TLRT_HD void stream_run(const Dims<uint32_t> &m, const Plan &f, const float *x, const float *dy,
                        bool include_pad, float *dx, uint32_t t) {
  constexpr int KH = C::KH, KW = C::KW, S = C::SW;
  static_assert(S < KW && S <= KH && 4 % S == 0, "stream: overlapping windows, S divides 4");
  constexpr int RLO = C::rlo(0);                     // first window column relative to w / S
  constexpr int NW = C::rhi(kV - 1) - RLO + 1;       // windows per output row on the kV columns
  constexpr int HL = C::PW - RLO * S;                // input columns left of w
  constexpr int HR = (RLO + NW - 1) * S - C::PW + KW - kV;  // input columns right of w + 3
  constexpr int NC = kV + HL + HR;                   // window q: columns q S .. q S + KW - 1
  static_assert(KW <= 16 && NW <= 8 && NC <= 32 && HL >= 0 && HR >= 0, "stream: packing");
  const uint32_t q1 = fdiv(f.by_cols, t), gx = t - q1 * f.cols;
  const uint32_t plane = fdiv(f.by_runs, q1), run = q1 - plane * f.runs;
  const uint32_t IH = m.in[0], IW = m.in[1], OH = m.out[0], OW = m.out[1];
  const int PH = (int)m.p[0];
  const int w = (int)gx * kV, wo = (int)gx * (kV / S) + RLO;  // first column, first window
  const int hA = (int)(run * f.rh);
  const int hB = hA + (int)f.rh < (int)IH ? hA + (int)f.rh : (int)IH;
  const float *xp = x ? x + (uint64_t)plane * m.in_sp : nullptr;
  const float *gp = dy + (uint64_t)plane * m.out_sp;
  float *dp = dx + (uint64_t)plane * m.in_sp;
  const float inf = num::u2f(0x7f800000u);
  // Window rows containing a row of the run: first and last.
  const int ohA = hA + PH - KH + 1 > 0 ? ceil_div(hA + PH - KH + 1, S) : 0;
  const int ohB = floor_div(hB - 1 + PH, S) < (int)OH - 1 ? floor_div(hB - 1 + PH, S) : (int)OH - 1;

  // Per input row (slot a = row oh S - PH + a of the current window row): first maximum (value,
  // and its position a KW + j in the window: 4 bits per window in hj, so a shift of the rows by
  // S slots is one subtraction, S KW from every nibble) of each window's cells in that row, and
  // whether the row has a NaN among its NC columns (the NaN's place is found again from x in
  // the rare window holding one). Absent rows: -inf, no NaN.
  float hv[KH][NW];
  uint32_t hj[KH], nanr[KH];
  constexpr uint32_t kRep = [] {  // 1 in each of the NW nibbles
    uint32_t r = 0;
    for (int q = 0; q < NW; ++q) r |= 1u << (4 * q);
    return r;
  }();
  static_assert(KH * KW <= 16, "stream: positions in 4 bits");
  // Window q's first real column (its selection when all its cells are -inf).
  int j0[NW];
  TLRT_UNROLL
  for (int q = 0; q < NW; ++q) {
    const int ws = w - HL + q * S;
    j0[q] = ws < 0 ? -ws : 0;
  }
  auto row_stats = [&](int h, int slot, float (&v)[NW], uint32_t &jp, uint32_t &nr) {
    float c[NC];
    bool nan = false;
    TLRT_UNROLL
    for (int e = 0; e < NC; ++e) c[e] = -inf;
    if ((unsigned)h < IH) {
      const float *row = xp + (uint32_t)h * IW;
      if (f.vec_in) {  // IW % 4 == 0: the float4 at w is inside, the right halo a float2 or out
        const F4 b = ld4(row + w);
        TLRT_UNROLL
        for (int e = 0; e < 4; ++e) c[HL + e] = b.v[e];
        TLRT_UNROLL
        for (int e = 0; e < HL; ++e)
          if (w - HL + e >= 0) c[e] = row[w - HL + e];
        if (HR == 2) {
          if ((uint32_t)w + 4 < IW) {
            const F2 a = ld2(row + w + 4);
            c[(HL + 4) % NC] = a.v[0];
            c[(HL + 5) % NC] = a.v[1];
          }
        } else {
          TLRT_UNROLL
          for (int e = 0; e < HR; ++e)
            if ((uint32_t)(w + 4 + e) < IW) c[HL + 4 + e] = row[w + 4 + e];
        }
      } else {
        TLRT_UNROLL
        for (int e = 0; e < NC; ++e) {
          const int col = w - HL + e;
          if ((unsigned)col < IW) c[e] = row[col];
        }
      }
      TLRT_UNROLL
      for (int e = 0; e < NC; ++e) nan = nan || c[e] != c[e];
    }
    nr = nan ? 1u : 0u;
    jp = (uint32_t)(slot * KW) * kRep;
    // From the window's first column (a padding column reads -inf): j can then name a padding
    // or non-first cell only in a row whose cells are all -inf or that holds a NaN, and neither
    // decides a window's cell (the cross-row select takes the window's first real cell when all
    // its rows are -inf, and a window with a NaN is found again from x).
    TLRT_UNROLL
    for (int q = 0; q < NW; ++q) {
      v[q] = c[q * S];
      int j = 0;
      TLRT_UNROLL
      for (int k = 1; k < KW; ++k)
        if (c[q * S + k] > v[q]) {
          v[q] = c[q * S + k];
          j = k;
        }
      jp += (uint32_t)j << (4 * q);  // no carry: slot KW + j < 16
    }
  };
  // Prefetch of what window row ohp adds: its dy row at the thread's windows and (max) its S new
  // input rows, at the thread's float4 (the halo columns are the neighbouring threads' lines),
  // so that more than the current window row's loads are in flight.
  const uint32_t cw = (uint32_t)(wo - RLO) < OW ? (uint32_t)(wo - RLO) : OW - 1;
  auto ahead = [&](int ohp) {
    if (ohp > ohB) return;
    prefetch(gp, (uint32_t)ohp * OW + cw, m.out_sp);
    if constexpr (K == Kind::Max) {
      TLRT_UNROLL
      for (int a = KH - S; a < KH; ++a) {
        const int h = ohp * S - PH + a;
        if ((unsigned)h < IH) prefetch(xp, (uint32_t)h * IW + (uint32_t)w, m.in_sp);
      }
    }
  };
  const int AHEAD = f.ahead;
  TLRT_UNROLL
  for (int d = 0; d < AHEAD; ++d) ahead(ohA + d);
  if constexpr (K == Kind::Max) {
    TLRT_UNROLL
    for (int a = 0; a < KH - S; ++a)
      row_stats(ohA * S - PH + a, a + S, hv[a + S], hj[a + S], nanr[a + S]);
  }
  float acc[KH][kV];
  TLRT_UNROLL
  for (int a = 0; a < KH; ++a)
    TLRT_UNROLL
    for (int i = 0; i < kV; ++i) acc[a][i] = 0.0f;
  const bool vec_row = f.vec_in && (uint32_t)w + kV <= IW;
  auto write_row = [&](int h, const float (&r)[kV]) {
    if (h < hA || h >= hB) return;
    float *o = dp + (uint32_t)h * IW + (uint32_t)w;
    if (vec_row) {
      st4(o, F4{{r[0], r[1], r[2], r[3]}});
    } else {
      TLRT_UNROLL
      for (int i = 0; i < kV; ++i)
        if ((uint32_t)w + i < IW) o[i] = r[i];
    }
  };
  for (int oh = ohA; oh <= ohB; ++oh) {
    if (AHEAD > 0) ahead(oh + AHEAD);
    const int hs = oh * S - PH;  // first input row of the window row
    // dy of the windows (oh, wo + q); absent windows get a term that adds nothing.
    float g[NW];
    bool ok[NW];
    const float *gr = gp + (uint32_t)oh * OW;
    TLRT_UNROLL
    for (int q = 0; q < NW; ++q) ok[q] = (unsigned)(wo + q) < OW;
    if (S == 1 && RLO == -1 && NW == 6 && f.vec_out && (uint32_t)w + 4 <= OW) {
      const F4 b = ld4(gr + w);  // windows w .. w + 3; w - 1 and w + 4 alone
      g[0] = ok[0] ? gr[w - 1] : 0.0f;
      TLRT_UNROLL
      for (int e = 0; e < 4; ++e) g[(1 + e) % NW] = b.v[e];
      g[5 % NW] = ok[5 % NW] ? gr[w + 4] : 0.0f;
    } else {
      TLRT_UNROLL
      for (int q = 0; q < NW; ++q) g[q] = ok[q] ? gr[wo + q] : 0.0f;
    }
    float term[NW];  // average: dy / divisor, -0 for an absent window
    int code[NW];    // max: position a KW + j of the selected cell, -1 for an absent window
    if constexpr (K == Kind::Max) {
      TLRT_UNROLL
      for (int a = 0; a < KH - S; ++a) {
        TLRT_UNROLL
        for (int q = 0; q < NW; ++q) hv[a][q] = hv[a + S][q];
        hj[a] = hj[a + S] - (uint32_t)(S * KW) * kRep;  // slot a + S -> a: S KW per nibble
        nanr[a] = nanr[a + S];
      }
      TLRT_UNROLL
      for (int a = KH - S; a < KH; ++a) row_stats(hs + a, a, hv[a], hj[a], nanr[a]);
      const int a0 = hs < 0 ? -hs : 0;  // first real row of the window
      uint32_t nan_any = 0;
      TLRT_UNROLL
      for (int a = 0; a < KH; ++a) nan_any |= nanr[a];
      TLRT_UNROLL
      for (int q = 0; q < NW; ++q) {
        // The first row holding the window's maximum (a strict '>' select over the rows takes
        // the first row whose maximum equals the largest, -0 == +0 included): the largest by
        // maxNum (no NaN here: a window with one is found again below), then the first row
        // equal to it, its packed positions selected whole and unpacked once. All -inf: the
        // window's first real cell.
        float best = hv[0][q];
        TLRT_UNROLL
        for (int a = 1; a < KH; ++a) best = max_num(best, hv[a][q]);
        uint32_t word = hj[KH - 1];
        TLRT_UNROLL
        for (int a = KH - 2; a >= 0; --a) word = hv[a][q] == best ? hj[a] : word;
        int cd = best == -inf ? a0 * KW + j0[q] : (int)((word >> (4 * q)) & 15u);
        if (nan_any) {  // rare: the first NaN of the window, row-major, read again from x
          bool found = false;
          for (int a = 0; a < KH; ++a) {
            const int h = hs + a;
            for (int k = 0; k < KW; ++k) {
              const int col = w - HL + q * S + k;
              if (!found && (unsigned)h < IH && (unsigned)col < IW) {
                const float v = xp[(uint32_t)h * IW + (uint32_t)col];
                if (v != v) {
                  cd = a * KW + k;
                  found = true;
                }
              }
            }
          }
        }
        code[q] = ok[q] ? cd : -1;
      }
    } else {
      constexpr bool fast_div = FD;
      uint32_t rows = (uint32_t)KH;
      if (!include_pad) {
        const int r0 = hs > 0 ? hs : 0, r1 = hs + KH < (int)IH ? hs + KH : (int)IH;
        rows = (uint32_t)(r1 - r0);
      }
      TLRT_UNROLL
      for (int q = 0; q < NW; ++q) {
        float d = (float)m.window;
        if (!include_pad) {
          const int ws = w - HL + q * S;
          const int c0 = ws > 0 ? ws : 0, c1 = ws + KW < (int)IW ? ws + KW : (int)IW;
          d = (float)(rows * (uint32_t)(c1 - c0));
        }
        // Divided unconditionally (an absent window's g is 0), then selected: no branch around
        // the division. With padding counted, D is the launch's constant prod(kernel): div_by
        // (the same bits) when verified.
        const float t = fast_div ? div_by(g[q], d, f.rcp) : div_rn(g[q], d);
        term[q] = ok[q] ? t : -0.0f;
      }
    }
    // Terms into the KH rows hs .. hs + KH - 1, windows in increasing column.
    TLRT_UNROLL
    for (int a = 0; a < KH; ++a)
      TLRT_UNROLL
      for (int i = 0; i < kV; ++i)
        TLRT_UNROLL
        for (int q = 0; q < NW; ++q) {
          const int j = i + HL - q * S;  // column of cell w + i in window q
          if (j < 0 || j >= KW) continue;
          // Max: only the selected cell adds. The same sums as adding +0 for the others: acc
          // starts at +0 and is never -0 (a rounded-to-nearest sum is -0 only when both terms
          // are), and +0 changes no other acc.
          if constexpr (K == Kind::Max) {
            if (code[q] == a * KW + j) acc[a][i] += g[q];
          } else
            acc[a][i] += term[q];
        }
    (void)term;
    (void)code;
    TLRT_UNROLL
    for (int a = 0; a < S; ++a) write_row(hs + a, acc[a]);
    TLRT_UNROLL
    for (int a = 0; a < KH; ++a)
      TLRT_UNROLL
      for (int i = 0; i < kV; ++i) acc[a][i] = a + S < KH ? acc[(a + S) % KH][i] : 0.0f;
  }
  // Rows below the last window row (the plane's last rows): their windows are all done; rows
  // in no window at all (after the last window when S > 1 and PH < KH - S) get +0.
  TLRT_UNROLL
  for (int a = 0; a < KH - S; ++a) write_row(ohB * S - PH + S + a, acc[a]);
  const float zero[kV] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (int h = ohB * S - PH + KH; h < hB; ++h) write_row(h, zero);
}

template <Kind K, class C>
TLRT_HD void stream_thread(const Dims<uint32_t> &m, const Plan &f, const float *x,
                           const float *dy, bool include_pad, float *dx, uint32_t t) {
  if constexpr (K == Kind::Avg) {
    if (include_pad && f.div_fast) return stream_run<K, C, true>(m, f, x, dy, include_pad, dx, t);
  }
  stream_run<K, C, false>(m, f, x, dy, include_pad, dx, t);
}

// ---- backward, max k3 s1 p1: separable argmax (sep_kernel) ------------------------------------

// True for the configuration the separable max backward (sep_core) is written for: the last axis
// k3 s1 p1 (the stream path's other conditions, stride 1 and kernel 3 on the rows, hold). Max
// pooling on the stream path with it always runs sep_core (the launchers decide it at compile
// time from the kind and sep_cfg); stream_run's max form runs the other stride (k3 s2 p1).
template <class C>
TLRT_HD constexpr bool sep_cfg() {
  return C::KH == 3 && C::KW == 3 && C::SW == 1 && C::PW == 1;
}

// The dx accumulators of one sep_core thread: a ring of 4 rows x 8 column slots (the thread's
// columns w - 2 .. w + 5; only slots 2 .. 5, its own cells, are ever read back), element
// (slot s) at ring[s * kSepStride]: in shared memory on the GPU (ring = the block's array +
// threadIdx.x, so that a warp's 32 accesses at any mix of slots hit 32 different banks), a
// host array in the emulation.
constexpr uint32_t kSepStride = kThreads;
constexpr uint32_t kSepSlots = 32;  // floats per thread: 32 KB per block of 256

// Max k3 s1 p1 with PH = 0 or 1 on the stream decomposition (4 columns w .. w + 3 of a run
// [hA, hB) of one plane); VEC: x, dy, dx rows float4-aligned. The same sums as pool::max_takes'
// selection and the CPU's dx[arg] += dy, in output order from +0:
// - ROWS FIRST, PER INPUT ROW ONCE: each new input row's 8 columns w - 2 .. w + 5 (slots c0 ..
//   c7; window u = ow - w + 1 covers slots u .. u + 2) give the first maximum of each of the 6
//   windows' 3 cells from the shared pairs (c1, c2), (c3, c4), (c5, c6).
// - first max fm(e, l) = l if !(e >= l) else e (e the EARLIER cell): a strict '>' select for
//   ordered values (ties keep the earlier, -0 == +0), associative, so pairs are shared. Left and
//   top padding (which precede every real cell of their windows) read as a NaN SENTINEL, which
//   loses every fm as the earlier operand: a window whose real cells are all -inf takes its
//   first real cell with no test; right and bottom padding read -inf (lose as the later one).
//   Real NaNs are not ordered by fm: a row holding one sends the 3 window rows containing it to
//   an exact rescan (pool::max_takes from the window's first real cell, read again from x).
// - codes are ABSOLUTE ring offsets: ((row - first row) mod 4) * 8 + column slot, times the
//   slot stride; the window-row loop is unrolled by 4 so that every row slot is a constant. The
//   cross-row choice is fm(fm(H(r0), H(r1)), H(r2)); the term is a SCATTER, ring[code] += dy,
//   windows in increasing ow, window rows in increasing oh: each cell sums its windows in output
//   order from +0 (an absent window adds dy = 0, a target outside the thread's 4 columns lands in
//   a slot never read).
// One sep thread's work: its plane's x and dy (only the rows the run reads are dereferenced, so
// xp, gp may point at a staged copy of those rows, offset back), dx at row 0 of the plane, its
// columns w .. w + 3, its dx rows [hA, hB) and the prefetch distance (0: none).
struct SepRun {
  const float *xp, *gp;  // x row x0 and dy row g0 of the plane
  float *dp;             // dx row 0 of the plane
  int x0, g0, w, hA, hB, ahead;
};

// STRIDE: the ring's slot stride (the block's threads: element s at ring[s * STRIDE]).
template <class C, bool VEC, uint32_t STRIDE = kSepStride>
TLRT_HD void sep_core(const Dims<uint32_t> &m, const SepRun &run, float *ring) {
  static_assert(sep_cfg<C>(), "sep_core: k3 s1 p1 on the last axis");
  constexpr int ST = (int)STRIDE * 4;  // codes are BYTE offsets into the ring
  const uint32_t IH = m.in[0], IW = m.in[1], OH = m.out[0], OW = m.out[1];
  const int PH = (int)m.p[0];
  const int w = run.w, hA = run.hA, hB = run.hB;
  const float *xp = run.xp, *gp = run.gp;
  float *dp = run.dp;
  const float inf = num::u2f(0x7f800000u), sent = num::u2f(0x7fc00000u);
  const int ohA = hA + PH - 2 > 0 ? hA + PH - 2 : 0;
  const int ohB = hB - 1 + PH < (int)OH - 1 ? hB - 1 + PH : (int)OH - 1;
  // The plane's last window row with PH = 1 reads the -inf row IH: a separate last step
  // (tail), so that the loop's rows are all inside.
  const bool tail = PH == 1 && ohB == (int)OH - 1;
  const int ohM = tail ? ohB - 1 : ohB;  // the loop's last window row
  const int base = ohA - PH;             // input row of ring row 0
  int nan_until = ohA - 1;               // window rows <= nan_until hold a real NaN: rescan
  const bool left = w > 0, right = (uint32_t)w + 4 < IW;

  // Ring rows 0 .. 3 of the thread's own cells start at +0 (the other slots are never read).
  TLRT_UNROLL
  for (int s = 0; s < 4; ++s)
    TLRT_UNROLL
    for (int i = 0; i < kV; ++i) ring[(s * 8 + 2 + i) * STRIDE] = 0.0f;

  // The row-first maxima H (value, code) of the 6 windows on the input row at xr (columns from
  // w; xr = nullptr: a padding row, top (h < 0: sentinel) or bottom (-inf)), ring row R.
  auto row_h = [&](auto in_c, const float *xr, int h, int R, float (&hv)[6], int (&hc)[6]) {
    float c[8];
    if (decltype(in_c)::value || xr != nullptr) {
      bool nan;
      if (VEC) {  // IW % 4 == 0: the float4 at w inside, halos whole float2s or outside
        const F4 b = ld4(xr);
        TLRT_UNROLL
        for (int e = 0; e < 4; ++e) c[2 + e] = b.v[e];
        F2 l = {{sent, sent}}, r = {{-inf, -inf}};
        if (left) l = ld2(xr - 2);
        if (right) r = ld2(xr + 4);
        c[0] = l.v[0];
        c[1] = l.v[1];
        c[6] = r.v[0];
        c[7] = r.v[1];
        nan = !(c[2] == c[2]) | !(c[3] == c[3]) | !(c[4] == c[4]) | !(c[5] == c[5]) |
              !(c[6] == c[6]) | !(c[7] == c[7]) | (left & (!(c[0] == c[0]) | !(c[1] == c[1])));
      } else {
        nan = false;
        TLRT_UNROLL
        for (int e = 0; e < 8; ++e) {
          const int col = w - 2 + e;
          c[e] = col < 0 ? sent : (uint32_t)col < IW ? xr[e - 2] : -inf;
          nan = nan | (col >= 0 && c[e] != c[e]);
        }
      }
      nan_until = nan ? h + PH : nan_until;  // the last window row containing row h
    } else {
      TLRT_UNROLL
      for (int e = 0; e < 8; ++e) c[e] = h < 0 ? sent : -inf;
    }
    auto fm = [](float ev, int ec, float lv, int lc, float &v, int &cd) {
      const bool p = !(ev >= lv);
      v = p ? lv : ev;
      cd = p ? lc : ec;
    };
    const int R8 = R * 8;
    float p12, p34, p56;
    int k12, k34, k56;
    fm(c[1], (R8 + 1) * ST, c[2], (R8 + 2) * ST, p12, k12);
    fm(c[3], (R8 + 3) * ST, c[4], (R8 + 4) * ST, p34, k34);
    fm(c[5], (R8 + 5) * ST, c[6], (R8 + 6) * ST, p56, k56);
    fm(c[0], (R8 + 0) * ST, p12, k12, hv[0], hc[0]);
    fm(p12, k12, c[3], (R8 + 3) * ST, hv[1], hc[1]);
    fm(c[2], (R8 + 2) * ST, p34, k34, hv[2], hc[2]);
    fm(p34, k34, c[5], (R8 + 5) * ST, hv[3], hc[3]);
    fm(c[4], (R8 + 4) * ST, p56, k56, hv[4], hc[4]);
    fm(p56, k56, c[7], (R8 + 7) * ST, hv[5], hc[5]);
  };
  // Row pointers at column w: xr the next input row to load (oh - PH + 2 at window row oh), gr
  // the dy row oh, dr the dx row oh - PH (the row finished by window row oh).
  const int h0 = base + 2;
  const float *xr = xp + (int64_t)(h0 - run.x0) * (int)IW + w;
  const float *gr = gp + (int64_t)(ohA - run.g0) * (int)OW + w;
  float *dr = dp + (int64_t)(ohA - PH) * (int)IW + w;
  const int AHEAD = run.ahead;
  // Prefetch (no register, no result) of what window row oh + AHEAD reads: its dy row and its
  // new x row (rows clamped into the run / plane in the loop: 2 min + 2 addresses, no branch;
  // conditional prefetches with their row tests took ~30 instructions per window row).
  const uint32_t cw = (uint32_t)w < OW ? (uint32_t)w : OW - 1;  // the dy column prefetched
  auto pf = [&](const float *p, const float *plane_lo, uint32_t n) {
    emu_check(p >= plane_lo && p < plane_lo + n, "sep prefetch outside the plane");
    prefetch(p, 0u, 1u);
    (void)plane_lo;
    (void)n;
  };
  for (int d = 0; d < AHEAD; ++d) {
    if (ohA + d <= ohB) pf(gr + (int64_t)d * (int)OW, gp, m.out_sp);
    if (h0 + d < (int)IH) pf(xr + (int64_t)d * (int)IW, xp, m.in_sp);
  }
  float h0v[6], h1v[6];
  int h0c[6], h1c[6];
  {
    const int ha = base, hb = base + 1;
    const float *ra = (unsigned)ha < IH ? xp + (int64_t)(ha - run.x0) * (int)IW + w : nullptr;
    const float *rb = (unsigned)hb < IH ? xp + (int64_t)(hb - run.x0) * (int)IW + w : nullptr;
    row_h(std::false_type{}, ra, ha, 0, h0v, h0c);
    row_h(std::false_type{}, rb, hb, 1, h1v, h1c);
  }
  auto write_row = [&](float *o, int h, int R) {
    if (h < hA || h >= hB) return;
    float r[kV];
    TLRT_UNROLL
    for (int i = 0; i < kV; ++i) r[i] = ring[(R * 8 + 2 + i) * STRIDE];
    if (VEC) {
      st4(o, F4{{r[0], r[1], r[2], r[3]}});
    } else {
      TLRT_UNROLL
      for (int i = 0; i < kV; ++i)
        if ((uint32_t)w + i < IW) o[i] = r[i];
    }
  };
  // Window row oh at ring position K (oh - ohA mod 4): rows oh - PH + a in ring rows K + a.
  // BOTTOM: the tail step (row oh - PH + 2 = IH, -inf).
  auto step = [&](auto kc, auto bc, int oh) {
    constexpr int K = decltype(kc)::value;
    constexpr bool BOTTOM = decltype(bc)::value;
    if (AHEAD > 0) {
      // Rows clamped to the run's last window row / the plane's last row (a repeated prefetch
      // at the end costs nothing; no branch, no pointer held across the loop).
      const int og = oh + AHEAD < ohB ? oh + AHEAD : ohB;
      const int hx = oh - PH + 2 + AHEAD < (int)IH - 1 ? oh - PH + 2 + AHEAD : (int)IH - 1;
      pf(gp + ((uint32_t)og * OW + cw), gp, m.out_sp);
      pf(xp + ((uint32_t)hx * IW + (uint32_t)w), xp, m.in_sp);
    }
    float nv[6];
    int nc[6];
    row_h(std::integral_constant<bool, !BOTTOM>{}, BOTTOM ? nullptr : xr, oh - PH + 2,
          (K + 2) & 3, nv, nc);
    xr += IW;
    // dy of the windows ow = w - 1 .. w + 4 (absent ones 0: their term adds nothing).
    float g[6];
    if (VEC) {
      const F4 b = ld4(gr);
      TLRT_UNROLL
      for (int e = 0; e < 4; ++e) g[1 + e] = b.v[e];
      g[0] = left ? gr[-1] : 0.0f;
      g[5] = (uint32_t)w + 4 < OW ? gr[4] : 0.0f;
    } else {
      TLRT_UNROLL
      for (int u = 0; u < 6; ++u)
        g[u] = (unsigned)(w + u - 1) < OW ? gr[u - 1] : 0.0f;
    }
    gr += OW;
    int code[6];
    TLRT_UNROLL
    for (int u = 0; u < 6; ++u) {
      const bool p1 = !(h0v[u] >= h1v[u]);
      const float v = p1 ? h1v[u] : h0v[u];
      const int c = p1 ? h1c[u] : h0c[u];
      code[u] = BOTTOM || v >= nv[u] ? c : nc[u];
    }
    if (oh <= nan_until) {  // rare: a real NaN in one of the rows: pool::max_takes, from x
      const int hs = oh - PH;
#if defined(__CUDA_ARCH__)
#pragma unroll 1
#endif
      for (int u = 0; u < 6; ++u) {
        const int ow = w + u - 1;
        if ((unsigned)ow >= OW) continue;
        bool have = false;
        float best = 0.0f;
        int cd = 0;
#if defined(__CUDA_ARCH__)
#pragma unroll 1
#endif
        for (int a = 0; a < 3; ++a) {
          const int h = hs + a;
          if ((unsigned)h >= IH) continue;
          for (int j = 0; j < 3; ++j) {
            const int col = ow - 1 + j;
            if ((unsigned)col >= IW) continue;
            const float v = xp[(int64_t)(h - run.x0) * (int)IW + col];
            if (!have || max_takes(v, best)) {
              best = v;
              cd = (((K + a) & 3) * 8 + u + j) * ST;
              have = true;
            }
          }
        }
        // (A static select, not code[u] = cd: a dynamic index would put code[] in local memory.)
        TLRT_UNROLL
        for (int v = 0; v < 6; ++v) code[v] = v == u ? cd : code[v];
      }
    }
    // The scatter, windows in increasing ow.
    float *at[6];
    TLRT_UNROLL
    for (int u = 0; u < 6; ++u) {
      emu_check((unsigned)code[u] < kSepSlots * STRIDE * 4, "sep ring offset");
      at[u] = reinterpret_cast<float *>(reinterpret_cast<char *>(ring) + code[u]);
    }
    TLRT_UNROLL
    for (int u = 0; u < 6; ++u) *at[u] = *at[u] + g[u];
    write_row(dr, oh - PH, K);
    dr += IW;
    TLRT_UNROLL
    for (int i = 0; i < kV; ++i) ring[(K * 8 + 2 + i) * STRIDE] = 0.0f;
    TLRT_UNROLL
    for (int u = 0; u < 6; ++u) {
      h0v[u] = h1v[u];
      h0c[u] = h1c[u];
      h1v[u] = nv[u];
      h1c[u] = nc[u];
    }
  };
  // After the loop's last window row (ring position K): the tail step, then the rows below the
  // last window row (finished with it), all at the plane's bottom only.
  auto finish = [&](auto kc) {
    constexpr int K = decltype(kc)::value;  // ring position of the next window row
    int oh = ohM + 1;
    if (tail) {
      step(std::integral_constant<int, K>{}, std::true_type{}, oh);
      write_row(dr, oh - PH + 1, (K + 1) & 3);
    } else {
      write_row(dr, oh - PH, K);
      write_row(dr + IW, oh - PH + 1, (K + 1) & 3);
    }
  };
  if (ohM < ohA) {
    finish(std::integral_constant<int, 0>{});
    return;
  }
  for (int oh = ohA;;) {
    step(std::integral_constant<int, 0>{}, std::false_type{}, oh);
    if (++oh > ohM) return finish(std::integral_constant<int, 1>{});
    step(std::integral_constant<int, 1>{}, std::false_type{}, oh);
    if (++oh > ohM) return finish(std::integral_constant<int, 2>{});
    step(std::integral_constant<int, 2>{}, std::false_type{}, oh);
    if (++oh > ohM) return finish(std::integral_constant<int, 3>{});
    step(std::integral_constant<int, 3>{}, std::false_type{}, oh);
    if (++oh > ohM) return finish(std::integral_constant<int, 0>{});
  }
}

// Thread t < f.stotal of sep_kernel: 4 columns of a run of f.rh rows of one plane (the stream
// kernel's decomposition), read from x and dy in global memory; ring: this thread's accumulators
// (element s at ring[s * kSepStride]).
template <class C, bool VEC>
TLRT_HD void sep_body(const Dims<uint32_t> &m, const Plan &f, const float *x, const float *dy,
                      float *dx, uint32_t t, float *ring) {
  const uint32_t q1 = fdiv(f.by_cols, t), gx = t - q1 * f.cols;
  const uint32_t plane = fdiv(f.by_runs, q1), run = q1 - plane * f.runs;
  const int IH = (int)m.in[0];
  const int hA = (int)(run * f.rh);
  const SepRun r{x + (uint64_t)plane * m.in_sp, dy + (uint64_t)plane * m.out_sp,
                 dx + (uint64_t)plane * m.in_sp, 0, 0, (int)gx * kV, hA,
                 hA + (int)f.rh < IH ? hA + (int)f.rh : IH, f.ahead};
  sep_core<C, VEC>(m, r, ring);
}

// ---- backward, max k3 s1 p1 from bands staged in shared memory (band_kernel) -----------------

// band_kernel: one block of kBandThreads threads per band of at most bh dx rows of one plane.
// Phase 1 (band_stage) copies every x and dy row the band's windows read into shared memory, all
// in flight at once (cp.async, 16 bytes where rows are float4-aligned, else 4); phase 2
// (band_run, after the barrier): thread t < runs * cols runs sep_core on 4 columns of a run of rh
// rows from the staged rows (no prefetch), its ring after them, writing dx as sep_kernel does.
// The rows shared by two runs are read twice from shared memory, not from L2.
constexpr uint32_t kBandThreads = 128;
// Floats of staged x and dy rows per block at most (25 KB: a whole 56 x 56 plane of both; with
// the 16 KB of rings, 5 blocks of 41 KB per SM).
constexpr uint32_t kBandStage = 6400;

struct BandPlan {
  uint32_t bh;       // dx rows per band (the last band of a plane may have fewer)
  uint32_t bands;    // bands per plane
  uint32_t rh;       // dx rows per run inside a band
  uint32_t cols;     // 4-column groups per row (threads per run)
  uint32_t gstage;   // offset (floats) of the staged dy rows: x's rows rounded up to 16 bytes
  uint32_t floats;   // dynamic shared memory (floats): staged rows, then the ring
  uint32_t blocks;   // nc * bands
  FastDiv by_bands;  // / bands
};

// The band plan of g (rank 2, sep_cfg), or false where the band kernel does not apply: a row of
// more than 4 kBandThreads columns, or fewer than 4 rows per band in kBandStage floats. A band of
// bh dx rows reads at most bh + 4 x rows (b0 - 2 .. b1 + 1) and bh + 2 dy rows (b0 - 1 .. b1 with
// PH = 1), fewer at the plane's edges: a whole plane, IH and OH.
inline bool band_plan(const Dims<uint32_t> &m, BandPlan &b) {
  const uint64_t IH = m.in[0], IW = m.in[1], OH = m.out[0], OW = m.out[1];
  b = BandPlan{};
  b.cols = (uint32_t)((IW + kV - 1) / kV);
  if (m.rank != 2 || b.cols == 0 || b.cols > kBandThreads || IH == 0) return false;
  auto x_rows = [&](uint64_t bh) { return bh + 4 < IH ? bh + 4 : IH; };
  auto g_rows = [&](uint64_t bh) { return bh + 2 < OH ? bh + 2 : OH; };
  auto staged = [&](uint64_t bh) { return (x_rows(bh) * IW + 3) / 4 * 4 + g_rows(bh) * OW; };
  uint64_t bh = IH;  // one band per plane where it fits, else the largest bh that does
  if (staged(IH) > kBandStage) {
    const int64_t cap =
        ((int64_t)kBandStage - 4 - 4 * (int64_t)IW - 2 * (int64_t)OW) / (int64_t)(IW + OW);
    if (cap < 4) return false;
    bh = (uint64_t)cap;
  }
  const uint64_t bands = (IH + bh - 1) / bh;  // then as even as possible
  b.bh = (uint32_t)((IH + bands - 1) / bands);
  b.bands = (uint32_t)bands;
  const uint32_t maxruns = kBandThreads / b.cols;
  b.rh = (b.bh + maxruns - 1) / maxruns;
  b.gstage = (uint32_t)((x_rows(b.bh) * IW + 3) / 4 * 4);
  b.floats = (uint32_t)((staged(b.bh) + 3) / 4 * 4) + kSepSlots * kBandThreads;
  const uint64_t blocks = (uint64_t)m.nc * bands;
  if (blocks > 0x7FFFFFFFull) return false;
  b.blocks = (uint32_t)blocks;
  b.by_bands = make_fastdiv(b.bands);
  return true;
}

// Whether band_kernel takes g (true: b is its plan), else sep_kernel: where band_plan applies and
// the band's runs busy at least half of the block's threads (cols x runs >= kBandThreads / 2;
// with fewer, small planes run slower than on sep_kernel: the sweep in docs/kernels/pool.md).
inline bool band_takes(const Dims<uint32_t> &m, BandPlan &b) {
  if (!band_plan(m, b)) return false;
  const uint32_t runs = (b.bh + b.rh - 1) / b.rh;
  return (uint64_t)b.cols * runs >= kBandThreads / 2;
}

// Rows of band `bi` (of any plane): dx rows [b0, b1); its windows' rows [ohA, ohB] (dy); their
// input rows [xlo, xhi) (x, inside the plane).
struct BandRows {
  int b0, b1, ohA, ohB, xlo, xhi;
};
TLRT_HD BandRows band_rows(const Dims<uint32_t> &m, const BandPlan &b, uint32_t bi) {
  const int IH = (int)m.in[0], OH = (int)m.out[0], PH = (int)m.p[0];
  BandRows r;
  r.b0 = (int)(bi * b.bh);
  r.b1 = r.b0 + (int)b.bh < IH ? r.b0 + (int)b.bh : IH;
  r.ohA = r.b0 + PH - 2 > 0 ? r.b0 + PH - 2 : 0;
  r.ohB = r.b1 - 1 + PH < OH - 1 ? r.b1 - 1 + PH : OH - 1;
  r.xlo = r.ohA - PH > 0 ? r.ohA - PH : 0;
  r.xhi = r.ohB - PH + 3 < IH ? r.ohB - PH + 3 : IH;
  if (r.ohB < r.ohA) {  // no window row (PH = 0 and IH < 3): only the two rows sep_core reads
    r.xhi = r.xlo + 2 < IH ? r.xlo + 2 : IH;
  }
  return r;
}

// Phase 1 of block (plane, bi), thread tid: its share of the copies of the band's x rows to
// sm[0 ..] and dy rows to sm[b.gstage ..]; cp16(dst, src) copies 16 bytes (VEC: rows of x and dy
// 16-byte aligned), cp4(dst, src) 4.
template <bool VEC, class Cp16, class Cp4>
TLRT_HD void band_stage(const Dims<uint32_t> &m, const BandPlan &b, uint32_t plane, uint32_t bi,
                        const float *x, const float *dy, float *sm, uint32_t tid, Cp16 &&cp16,
                        Cp4 &&cp4) {
  const BandRows r = band_rows(m, b, bi);
  const uint32_t IW = m.in[1], OW = m.out[1];
  const float *xs = x + (uint64_t)plane * m.in_sp + (uint64_t)r.xlo * IW;
  const float *gs = dy + (uint64_t)plane * m.out_sp + (uint64_t)r.ohA * OW;
  const uint32_t nx = (uint32_t)(r.xhi - r.xlo) * IW;
  const uint32_t ng = r.ohB >= r.ohA ? (uint32_t)(r.ohB - r.ohA + 1) * OW : 0u;
  emu_check(nx <= b.gstage && b.gstage + ng + kSepSlots * kBandThreads <= b.floats,
            "band staging outside its shared memory");
  float *gsm = sm + b.gstage;
  if (VEC) {
    for (uint32_t i = 4 * tid; i < nx; i += 4 * kBandThreads) cp16(sm + i, xs + i);
    for (uint32_t i = 4 * tid; i < ng; i += 4 * kBandThreads) cp16(gsm + i, gs + i);
  } else {
    for (uint32_t i = tid; i < nx; i += kBandThreads) cp4(sm + i, xs + i);
    for (uint32_t i = tid; i < ng; i += kBandThreads) cp4(gsm + i, gs + i);
  }
}

// Phase 2 of block (plane, bi), thread tid (after every thread's copies landed): sep_core on the
// staged rows; ring: the block's array of kSepSlots * kBandThreads floats, after the staged rows.
template <class C, bool VEC>
TLRT_HD void band_run(const Dims<uint32_t> &m, const BandPlan &b, uint32_t plane, uint32_t bi,
                      float *sm, float *dx, uint32_t tid) {
  const uint32_t run = tid / b.cols, gx = tid - run * b.cols;
  const BandRows r = band_rows(m, b, bi);
  const int hA = r.b0 + (int)(run * b.rh);
  if (hA >= r.b1) return;  // a run past the band (the band's last runs, or a short band)
  const int hB = hA + (int)b.rh < r.b1 ? hA + (int)b.rh : r.b1;
  float *ring = sm + (b.floats - kSepSlots * kBandThreads) + tid;
  const SepRun sr{sm, sm + b.gstage, dx + (uint64_t)plane * m.in_sp, r.xlo, r.ohA,
                  (int)gx * kV, hA, hB, 0};
  sep_core<C, VEC, kBandThreads>(m, sr, ring);
}

// ---- path choice and launch shapes (shared by cuda/pool.cu and the emulation test) -------------

// Forward: calls launch(C{}, integral_constant<int, R>{}, blocks, m, plan); false when g has no
// fast path.
template <class Launch>
bool fwd_path(const ConvGeometry &g, const float *x, const float *y, Launch &&launch) {
  return with_cfg(g, [&](auto c) {
    using C = decltype(c);
    const Dims<uint32_t> m = make_dims<uint32_t>(g);
    const Plan p = make_plan<C>(m, {x}, {y});
    const uint32_t blocks = (p.total + kThreads - 1) / kThreads;
    if (g.rank == 2)
      launch(c, std::integral_constant<int, 2>{}, blocks, m, p);
    else
      launch(c, std::integral_constant<int, 3>{}, blocks, m, p);
  });
}

// Choices of the stream path (stream_run and sep_body) that the emulation test varies
// (tests/unit/test_pool_kernels.cpp: other run heights and prefetch distances must give the same
// bits); the library passes none. rows: rows per run at most; ahead < 0: kStreamAhead.
struct StreamOpt {
  uint32_t rows = kStreamRows;
  int ahead = -1;
};

// Backward of kind k: scatter(C{}, integral_constant<int, R>{}, blocks, m, plan) for disjoint
// windows, stream(C{}, blocks, m, plan) for overlapping rank-2 windows of equal strides (max and
// average: stream_ok; for max k3 s1 p1 (sep_cfg) the launcher runs sep_kernel or band_kernel),
// tile(C{}, blocks, m, plan) for the other overlapping rank-2 windows; false when g has no fast
// path.
template <class Scatter, class TileLaunch, class StreamLaunch>
bool bwd_path(const ConvGeometry &g, Kind k, const float *x, const float *dy, const float *dx,
              Scatter &&scatter, TileLaunch &&tile, StreamLaunch &&stream,
              const StreamOpt &o = StreamOpt{}) {
  if (!disjoint(g) && g.rank != 2) return false;
  return with_cfg(g, [&](auto c) {
    using C = decltype(c);
    const Dims<uint32_t> m = make_dims<uint32_t>(g);
    const Plan p = make_plan<C>(m, {x, dx}, {dy}, kV, o.rows);
    if constexpr (C::SW >= C::KW) {
      if (disjoint(g)) {
        const Plan ps = make_plan<C>(m, {x, dx}, {dy}, C::VS);
        const uint32_t blocks = (ps.total + kThreads - 1) / kThreads;
        if (g.rank == 2)
          scatter(c, std::integral_constant<int, 2>{}, blocks, m, ps);
        else
          scatter(c, std::integral_constant<int, 3>{}, blocks, m, ps);
        return;
      }
    }
    if constexpr (C::SW < C::KW && 4 % C::SW == 0 && C::SW <= C::KH) {
      if (stream_ok<C>(g, k)) {
        Plan ps = p;
        ps.ahead = o.ahead >= 0 ? o.ahead : kStreamAhead;
        stream(c, (ps.stotal + kThreads - 1) / kThreads, m, ps);
        return;
      }
    }
    tile(c, m.nc * p.tiles_y * p.tiles_x, m, p);
  });
}

}  // namespace fast
}  // namespace pool
}  // namespace tlrt
