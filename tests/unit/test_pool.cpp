// Known answers, an independent reference and the measured accuracy of the pooling family
// (abi/tlrt_pool.h) on the CPU backend: max, average (both padding modes) and smooth max pooling,
// forward and backward, 2-D and N-D entry points.
//
// (1) Hand-computed answers (every value exact in float32): 4x4 k2 s2, 3x3 k3 s2 p1, 1-D windows,
//     count_include_pad on and off, smooth max of equal values (log 2).
// (2) Independent reference: the header's DEFINITIONS re-implemented here with a different loop
//     structure (every window cell j = 0 .. k-1 per axis, skipping the ones outside the input;
//     backward as per-input sums over windows), compared BIT FOR BIT for max and average pooling,
//     forward and backward (their float32 operations are fully specified), over random
//     geometries of rank 1 .. 8, batch and channels > 1, and every input distribution of th::Dist
//     (bit patterns and edge values included). The 2-D names are checked equal to the N-D names.
// (3) Accuracy against float64: average pool and its backward against the header's bounds; smooth
//     max forward and backward against a float64 log-sum-exp; the largest error / bound is printed.
// (4) Geometry and special values: output sizes (the phantom 1-wide output of c2be276 is gone:
//     in + 2 pad < kernel gives an empty output and a +0 dx), stride 0 / kernel 0 / 2 pad > kernel
//     rejected, empty batch / channels / spatial extents, NaN propagation and the gradient to the
//     first NaN, ties to the first maximum, -inf windows, smooth max with +-inf and large |beta|
//     (tends to max / min pool), the determinism switch, no leaks.
// (5) Geometry as data: the *_geom entry points (tlrt_pool_geometry) equal the N-D ones bit for
//     bit, every operation forward and backward, over random geometries of rank 1 .. 8 with
//     padding and strides; tlrt_pool_output_dims gives exactly the sizes the ops produce and the
//     header's formula; the struct's layout (288 bytes, every field where the header puts it).
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

#include "harness.hpp"

namespace {

using th::Buf;
using th::Dist;

const double kU = std::ldexp(1.0, -24);

struct Geo {
  uint64_t N = 1, C = 1;
  std::vector<uint64_t> in, k, s, p;
  uint32_t rank() const { return (uint32_t)in.size(); }
  std::vector<uint64_t> out() const {
    std::vector<uint64_t> o(in.size());
    for (size_t d = 0; d < in.size(); ++d)
      o[d] = (in[d] >= 1 && in[d] + 2 * p[d] >= k[d]) ? (in[d] + 2 * p[d] - k[d]) / s[d] + 1 : 0;
    return o;
  }
  static uint64_t prod(const std::vector<uint64_t> &v) {
    uint64_t r = 1;
    for (uint64_t x : v) r *= x;
    return r;
  }
  uint64_t in_sp() const { return prod(in); }
  uint64_t out_sp() const { return prod(out()); }
  std::string str() const {
    std::string t = "N" + std::to_string(N) + " C" + std::to_string(C) + " in";
    for (auto v : in) t += " " + std::to_string(v);
    t += " k";
    for (auto v : k) t += " " + std::to_string(v);
    t += " s";
    for (auto v : s) t += " " + std::to_string(v);
    t += " p";
    for (auto v : p) t += " " + std::to_string(v);
    return t;
  }
};

// ---- library calls ------------------------------------------------------------------------------

enum class Op { Max, Avg, AvgNoPad, Smooth };

tlrt_status fwd(Op op, const Geo &g, const tlrt_buffer *x, double beta, tlrt_buffer **out) {
  switch (op) {
    case Op::Max:
      return tlrt_maxpool_fwd(x, g.N, g.C, g.in.data(), g.rank(), g.k.data(), g.s.data(),
                              g.p.data(), out);
    case Op::Avg:
    case Op::AvgNoPad:
      return tlrt_avgpool_fwd(x, g.N, g.C, g.in.data(), g.rank(), g.k.data(), g.s.data(),
                              g.p.data(), op == Op::Avg, out);
    case Op::Smooth:
      return tlrt_smooth_maxpool_fwd(x, g.N, g.C, g.in.data(), g.rank(), g.k.data(), g.s.data(),
                                     g.p.data(), beta, out);
  }
  return TLRT_ERR_INTERNAL;
}

tlrt_status bwd(Op op, const Geo &g, const tlrt_buffer *x, const tlrt_buffer *dy, double beta,
                tlrt_buffer **dx) {
  switch (op) {
    case Op::Max:
      return tlrt_maxpool_bwd(x, dy, g.N, g.C, g.in.data(), g.rank(), g.k.data(), g.s.data(),
                              g.p.data(), dx);
    case Op::Avg:
    case Op::AvgNoPad:
      return tlrt_avgpool_bwd(dy, g.N, g.C, g.in.data(), g.rank(), g.k.data(), g.s.data(),
                              g.p.data(), op == Op::Avg, dx);
    case Op::Smooth:
      return tlrt_smooth_maxpool_bwd(x, dy, g.N, g.C, g.in.data(), g.rank(), g.k.data(),
                                     g.s.data(), g.p.data(), beta, dx);
  }
  return TLRT_ERR_INTERNAL;
}

std::vector<float> run_fwd(Op op, const Geo &g, const std::vector<float> &x, double beta = 1.0) {
  Buf bx(th::upload(x)), y;
  TH_OK(fwd(op, g, bx.get(), beta, y.out()));
  return y.get() ? th::download(y.get()) : std::vector<float>{};
}

std::vector<float> run_bwd(Op op, const Geo &g, const std::vector<float> &x,
                           const std::vector<float> &dy, double beta = 1.0) {
  Buf bx(th::upload(x)), bdy(th::upload(dy)), dx;
  TH_OK(bwd(op, g, bx.get(), bdy.get(), beta, dx.out()));
  return dx.get() ? th::download(dx.get()) : std::vector<float>{};
}

// ---- the independent reference ------------------------------------------------------------------

// The real cells of window `o` (flat output spatial index) as flat input spatial offsets, in
// row-major window order: every window index j = 0 .. k-1 per axis, out-of-range ones skipped.
std::vector<uint64_t> window_cells(const Geo &g, uint64_t o) {
  const uint32_t R = g.rank();
  const std::vector<uint64_t> out = g.out();
  std::vector<uint64_t> oc(R);
  for (int d = (int)R - 1; d >= 0; --d) {
    oc[d] = o % out[d];
    o /= out[d];
  }
  std::vector<uint64_t> cells, j(R, 0);
  for (;;) {
    bool inside = true;
    uint64_t off = 0;
    for (uint32_t d = 0; d < R; ++d) {
      const int64_t c = (int64_t)(oc[d] * g.s[d] + j[d]) - (int64_t)g.p[d];
      inside = inside && c >= 0 && c < (int64_t)g.in[d];
      off = off * g.in[d] + (uint64_t)std::max<int64_t>(c, 0);
    }
    if (inside) cells.push_back(off);
    int d = (int)R - 1;
    while (d >= 0 && ++j[d] == g.k[d]) j[d--] = 0;
    if (d < 0) break;
  }
  return cells;
}

float ref_divisor(const Geo &g, size_t n, bool include_pad) {
  return include_pad ? (float)Geo::prod(g.k) : (float)n;
}

struct Ref {
  std::vector<float> y;       // forward
  std::vector<uint64_t> arg;  // max: the selected cell per output
  std::vector<float> dx;      // backward
};

Ref ref_max(const Geo &g, const std::vector<float> &x, const std::vector<float> &dy) {
  const uint64_t is = g.in_sp(), os = g.out_sp(), P = g.N * g.C;
  Ref r;
  r.y.resize(P * os);
  r.arg.resize(P * os);
  r.dx.assign(P * is, 0.0f);
  for (uint64_t c = 0; c < P; ++c)
    for (uint64_t o = 0; o < os; ++o) {
      const std::vector<uint64_t> cells = window_cells(g, o);
      uint64_t best = cells[0];
      bool nan_seen = std::isnan(x[c * is + best]);
      for (uint64_t cell : cells) {
        const float v = x[c * is + cell];
        if (nan_seen) break;
        if (std::isnan(v)) {
          best = cell;
          nan_seen = true;
        } else if (v > x[c * is + best]) {
          best = cell;
        }
      }
      r.y[c * os + o] = x[c * is + best];
      r.arg[c * os + o] = best;
    }
  // Backward as per-input sums over the windows (output order), from +0.
  if (!dy.empty())
    for (uint64_t c = 0; c < P; ++c)
      for (uint64_t i = 0; i < is; ++i) {
        float acc = 0.0f;
        for (uint64_t o = 0; o < os; ++o)
          if (r.arg[c * os + o] == i) acc += dy[c * os + o];
        r.dx[c * is + i] = acc;
      }
  return r;
}

Ref ref_avg(const Geo &g, const std::vector<float> &x, const std::vector<float> &dy,
            bool include_pad) {
  const uint64_t is = g.in_sp(), os = g.out_sp(), P = g.N * g.C;
  Ref r;
  r.y.resize(P * os);
  r.dx.assign(P * is, 0.0f);
  std::vector<std::vector<uint64_t>> cells(os);
  for (uint64_t o = 0; o < os; ++o) cells[o] = window_cells(g, o);
  for (uint64_t c = 0; c < P; ++c)
    for (uint64_t o = 0; o < os; ++o) {
      float s = -0.0f;
      for (uint64_t cell : cells[o]) s += x[c * is + cell];
      r.y[c * os + o] = s / ref_divisor(g, cells[o].size(), include_pad);
    }
  if (!dy.empty())
    for (uint64_t c = 0; c < P; ++c)
      for (uint64_t i = 0; i < is; ++i) {
        float acc = 0.0f;
        for (uint64_t o = 0; o < os; ++o)
          if (std::find(cells[o].begin(), cells[o].end(), i) != cells[o].end())
            acc += dy[c * os + o] / ref_divisor(g, cells[o].size(), include_pad);
        r.dx[c * is + i] = acc;
      }
  return r;
}

// Float64 smooth max and its gradient (the log-sum-exp with the max / min as the pivot).
void ref_smooth64(const Geo &g, const std::vector<float> &x, const std::vector<float> &dy,
                  double beta, std::vector<double> &y, std::vector<double> &dx,
                  std::vector<double> &dx_mag) {
  const uint64_t is = g.in_sp(), os = g.out_sp(), P = g.N * g.C;
  const double b = (float)beta;
  y.assign(P * os, 0);
  dx.assign(P * is, 0);
  dx_mag.assign(P * is, 0);
  for (uint64_t c = 0; c < P; ++c)
    for (uint64_t o = 0; o < os; ++o) {
      const std::vector<uint64_t> cells = window_cells(g, o);
      double pv = x[c * is + cells[0]];
      for (uint64_t cell : cells)
        pv = b > 0 ? std::max(pv, (double)x[c * is + cell])
                   : std::min(pv, (double)x[c * is + cell]);
      double S = 0;
      for (uint64_t cell : cells) S += std::exp(b * (x[c * is + cell] - pv));
      y[c * os + o] = pv + std::log(S) / b;
      for (uint64_t cell : cells) {
        const double w = std::exp(b * (x[c * is + cell] - pv)) / S;
        dx[c * is + cell] += dy[c * os + o] * w;
        dx_mag[c * is + cell] += std::fabs(dy[c * os + o] * w);
      }
    }
}

// ---- (1) known answers --------------------------------------------------------------------------

void known_answers() {
  // 4x4, k2 s2: the maxima and means of the four 2x2 blocks.
  const std::vector<float> x16 = {1, 5,  2, 0,   3, -1, 8, 8,   -4, -2, 0, 1,   -3, -6, 1, 7};
  Buf bx(th::upload(x16)), y, dx;
  TH_OK(tlrt_maxpool2d_fwd(bx.get(), 1, 1, 4, 4, 2, 2, 2, 2, 0, 0, y.out()));
  TH_CHECK(th::download(y.get()) == (std::vector<float>{5, 8, -2, 7}));
  TH_OK(tlrt_avgpool2d_fwd(bx.get(), 1, 1, 4, 4, 2, 2, 2, 2, 0, 0, true, y.out()));
  TH_CHECK(th::download(y.get()) == (std::vector<float>{2, 4.5f, -3.75f, 2.25f}));
  // Max backward: the gradient goes to the FIRST maximum (8 at (1, 2), not (1, 3)).
  Buf bdy(th::upload({10, 20, 30, 40}));
  TH_OK(tlrt_maxpool2d_bwd(bx.get(), bdy.get(), 1, 1, 4, 4, 2, 2, 2, 2, 0, 0, dx.out()));
  TH_CHECK(th::download(dx.get()) ==
           (std::vector<float>{0, 10, 0, 0, 0, 0, 20, 0, 0, 30, 0, 0, 0, 0, 0, 40}));
  TH_OK(tlrt_avgpool2d_bwd(bdy.get(), 1, 1, 4, 4, 2, 2, 2, 2, 0, 0, true, dx.out()));
  TH_CHECK(th::download(dx.get()) ==
           (std::vector<float>{2.5f, 2.5f, 5, 5, 2.5f, 2.5f, 5, 5, 7.5f, 7.5f, 10, 10, 7.5f, 7.5f,
                               10, 10}));
  // 3x3, k3 s2 p1: out 2x2; windows are the 2x2 corners of x (the rest is padding).
  const std::vector<float> x9 = {1, 2, 3, 4, 5, 6, 7, 8, 9};
  Buf b9(th::upload(x9));
  TH_OK(tlrt_maxpool2d_fwd(b9.get(), 1, 1, 3, 3, 3, 3, 2, 2, 1, 1, y.out()));
  TH_CHECK(th::download(y.get()) == (std::vector<float>{5, 6, 8, 9}));
  TH_OK(tlrt_avgpool2d_fwd(b9.get(), 1, 1, 3, 3, 3, 3, 2, 2, 1, 1, true, y.out()));
  TH_CHECK(th::download(y.get()) ==
           (std::vector<float>{12.0f / 9, 16.0f / 9, 24.0f / 9, 28.0f / 9}));
  TH_OK(tlrt_avgpool2d_fwd(b9.get(), 1, 1, 3, 3, 3, 3, 2, 2, 1, 1, false, y.out()));
  TH_CHECK(th::download(y.get()) == (std::vector<float>{3, 4, 6, 7}));
  // Backward of the padded average: the centre (in all four windows) gets (1+2+3+4) / 9.
  Buf b4(th::upload({1, 2, 3, 4}));
  TH_OK(tlrt_avgpool2d_bwd(b4.get(), 1, 1, 3, 3, 3, 3, 2, 2, 1, 1, true, dx.out()));
  {
    const std::vector<float> d = th::download(dx.get());
    const float n9 = 9.0f;
    const std::vector<float> want = {1 / n9, 1 / n9 + 2 / n9, 2 / n9,
                                     1 / n9 + 3 / n9, ((1 / n9 + 2 / n9) + 3 / n9) + 4 / n9,
                                     2 / n9 + 4 / n9, 3 / n9, 3 / n9 + 4 / n9, 4 / n9};
    TH_CHECK(d == want);
  }
  // 1-D, two channels, batch 2: planes are independent.
  Buf b1(th::upload({1, 3, 2, 0, -1, -5, 4, 4}));
  const uint64_t in1[] = {2}, k1[] = {2}, s1[] = {1}, p1[] = {1};
  TH_OK(tlrt_maxpool_fwd(b1.get(), 2, 2, in1, 1, k1, s1, p1, y.out()));
  // out = (2 + 2 - 2) / 1 + 1 = 3 per plane: [x0], [x0 x1], [x1].
  TH_CHECK(th::download(y.get()) == (std::vector<float>{1, 3, 3, 2, 2, 0, -1, -1, -5, 4, 4, 4}));
  // Smooth max of equal values: v + log(n) / b; of (0, 0) with beta 1: log 2 (the shared log).
  Buf bz(th::upload({0, 0}));
  const uint64_t in2[] = {2}, k2[] = {2}, s2[] = {2}, p0[] = {0};
  TH_OK(tlrt_smooth_maxpool_fwd(bz.get(), 1, 1, in2, 1, k2, s2, p0, 1.0, y.out()));
  {
    Buf two(th::upload({2})), l;
    TH_OK(tlrt_log(two.get(), l.out()));
    TH_CHECK(th::download(y.get()) == th::download(l.get()));
    TH_CHECK(std::fabs(th::download(y.get())[0] - 0.69314718f) <= 1e-7f);
  }
  Buf b1g(th::upload({1}));
  TH_OK(tlrt_smooth_maxpool_bwd(bz.get(), b1g.get(), 1, 1, in2, 1, k2, s2, p0, 1.0, dx.out()));
  TH_CHECK(th::download(dx.get()) == (std::vector<float>{0.5f, 0.5f}));
}

// ---- (2) reference comparison -------------------------------------------------------------------

Geo random_geo(th::Rng &rng, uint32_t R, uint64_t max_cells) {
  Geo g;
  g.N = 1 + rng.gen() % 2;
  g.C = 1 + rng.gen() % 3;
  for (;;) {
    g.in.clear();
    g.k.clear();
    g.s.clear();
    g.p.clear();
    for (uint32_t d = 0; d < R; ++d) {
      const uint64_t in = 1 + rng.gen() % (R <= 2 ? 13 : R <= 4 ? 5 : 3);
      const uint64_t k = 1 + rng.gen() % (R <= 2 ? 5 : 3);
      g.in.push_back(in);
      g.k.push_back(k);
      g.s.push_back(1 + rng.gen() % 3);
      g.p.push_back(rng.gen() % (k / 2 + 1));
    }
    if (g.in_sp() * g.N * g.C <= max_cells) return g;
  }
}

void same_bits(const std::string &what, const std::vector<float> &got,
               const std::vector<float> &want) {
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < std::min(got.size(), want.size()); ++i)
    if (!th::same_bits(got[i], want[i]) && bad++ == 0) first = i;
  TH_CHECK_MSG(bad == 0 && got.size() == want.size(),
               "%s: %zu of %zu differ (sizes %zu / %zu); first i=%zu got %s want %s", what.c_str(),
               bad, want.size(), got.size(), want.size(), first,
               first < got.size() ? th::hex(got[first]).c_str() : "-",
               first < want.size() ? th::hex(want[first]).c_str() : "-");
}

struct Worst {
  double avg = 0, avg_bwd = 0, smooth = 0, smooth_bwd = 0;
};

void one_reference(const Geo &g, Dist d, uint64_t salt, Worst &w) {
  const uint64_t nin = g.N * g.C * g.in_sp(), nout = g.N * g.C * g.out_sp();
  const std::vector<float> x = th::make(d, nin, salt);
  const std::vector<float> dy = th::make(d == Dist::Bits ? Dist::Bits : Dist::Uniform, nout,
                                         salt + 1);
  const std::string what = g.str() + " " + th::dist_name(d);
  const Ref rm = ref_max(g, x, dy);
  same_bits(what + " maxpool_fwd", run_fwd(Op::Max, g, x), rm.y);
  same_bits(what + " maxpool_bwd", run_bwd(Op::Max, g, x, dy), rm.dx);
  for (bool pad : {true, false}) {
    const Op op = pad ? Op::Avg : Op::AvgNoPad;
    const Ref ra = ref_avg(g, x, dy, pad);
    const std::vector<float> y = run_fwd(op, g, x), dx = run_bwd(op, g, x, dy);
    same_bits(what + (pad ? " avgpool_fwd" : " avgpool_fwd (no pad)"), y, ra.y);
    same_bits(what + (pad ? " avgpool_bwd" : " avgpool_bwd (no pad)"), dx, ra.dx);
    if (d == Dist::Bits || d == Dist::Edge || y.size() != ra.y.size()) continue;
    // (3) accuracy of the average: |y - y64| <= u (|y64| + (n - 1) sum |v| / D) (1 + 2 n u).
    const uint64_t is = g.in_sp(), os = g.out_sp();
    for (uint64_t c = 0; c < g.N * g.C; ++c)
      for (uint64_t o = 0; o < os; ++o) {
        const std::vector<uint64_t> cells = window_cells(g, o);
        const double D = ref_divisor(g, cells.size(), pad);
        double s = 0, a = 0;
        for (uint64_t cell : cells) {
          s += x[c * is + cell];
          a += std::fabs(x[c * is + cell]);
        }
        const double n = (double)cells.size(), y64 = s / D;
        const double bound = kU * (std::fabs(y64) + (n - 1) * a / D) * (1 + 2 * n * kU) + 1e-45;
        const double e = std::fabs(y[c * os + o] - y64) / bound;
        w.avg = std::max(w.avg, e);
        TH_CHECK_MSG(e <= 1, "%s avg accuracy: y %g y64 %g bound %g", what.c_str(),
                     (double)y[c * os + o], y64, bound);
      }
    // Backward: dx = sum_w dy_w / D_w over m windows; terms rounded once each, summed in order.
    for (uint64_t c = 0; c < g.N * g.C; ++c)
      for (uint64_t i = 0; i < is; ++i) {
        double s = 0, a = 0, m = 0;
        for (uint64_t o = 0; o < os; ++o) {
          const std::vector<uint64_t> cells = window_cells(g, o);
          if (std::find(cells.begin(), cells.end(), i) == cells.end()) continue;
          const double t = dy[c * os + o] / (double)ref_divisor(g, cells.size(), pad);
          s += t;
          a += std::fabs(t);
          m += 1;
        }
        const double bound = kU * (std::fabs(s) + a + std::max(m - 1, 0.0) * a) *
                                 (1 + 2 * (m + 1) * kU) + 1e-45;
        const double e = std::fabs(dx[c * is + i] - s) / bound;
        w.avg_bwd = std::max(w.avg_bwd, e);
        TH_CHECK_MSG(e <= 1, "%s avg_bwd accuracy: dx %g ref %g bound %g", what.c_str(),
                     (double)dx[c * is + i], s, bound);
      }
  }
  // The 2-D names are the rank-2 case of the N-D names.
  if (g.rank() == 2) {
    Buf bx(th::upload(x)), bdy(th::upload(dy)), a2, an;
    TH_OK(tlrt_maxpool2d_fwd(bx.get(), g.N, g.C, g.in[0], g.in[1], g.k[0], g.k[1], g.s[0], g.s[1],
                             g.p[0], g.p[1], a2.out()));
    same_bits(what + " maxpool2d_fwd", th::download(a2.get()), rm.y);
    TH_OK(tlrt_maxpool2d_bwd(bx.get(), bdy.get(), g.N, g.C, g.in[0], g.in[1], g.k[0], g.k[1],
                             g.s[0], g.s[1], g.p[0], g.p[1], a2.out()));
    same_bits(what + " maxpool2d_bwd", th::download(a2.get()), rm.dx);
    TH_OK(tlrt_avgpool2d_fwd(bx.get(), g.N, g.C, g.in[0], g.in[1], g.k[0], g.k[1], g.s[0], g.s[1],
                             g.p[0], g.p[1], false, a2.out()));
    same_bits(what + " avgpool2d_fwd", th::download(a2.get()), run_fwd(Op::AvgNoPad, g, x));
    TH_OK(tlrt_avgpool2d_bwd(bdy.get(), g.N, g.C, g.in[0], g.in[1], g.k[0], g.k[1], g.s[0],
                             g.s[1], g.p[0], g.p[1], true, a2.out()));
    same_bits(what + " avgpool2d_bwd", th::download(a2.get()), run_bwd(Op::Avg, g, x, dy));
    TH_OK(tlrt_smooth_maxpool2d_fwd(bx.get(), g.N, g.C, g.in[0], g.in[1], g.k[0], g.k[1], g.s[0],
                                    g.s[1], g.p[0], g.p[1], -0.75, a2.out()));
    same_bits(what + " smooth_maxpool2d_fwd", th::download(a2.get()),
              run_fwd(Op::Smooth, g, x, -0.75));
    TH_OK(tlrt_smooth_maxpool2d_bwd(bx.get(), bdy.get(), g.N, g.C, g.in[0], g.in[1], g.k[0],
                                    g.k[1], g.s[0], g.s[1], g.p[0], g.p[1], 2.5, a2.out()));
    same_bits(what + " smooth_maxpool2d_bwd", th::download(a2.get()),
              run_bwd(Op::Smooth, g, x, dy, 2.5));
  }
  // Smooth max against float64 (finite inputs only).
  if (d == Dist::Uniform || d == Dist::Wide || d == Dist::Positive) {
    for (double beta : {1.0, -1.0, 7.5, -0.3, 60.0}) {
      if (d == Dist::Wide && std::fabs(beta) > 1) continue;  // exp overflow of the float64 ref
      const std::vector<float> y = run_fwd(Op::Smooth, g, x, beta);
      const std::vector<float> dx = run_bwd(Op::Smooth, g, x, dy, beta);
      std::vector<double> y64, dx64, mag;
      ref_smooth64(g, x, dy, beta, y64, dx64, mag);
      const double b = std::fabs((double)(float)beta);
      for (size_t i = 0; i < y.size() && i < y64.size(); ++i) {
        // Rounding of b (v - pivot) (2u relative, times |S'/S| <= 1), exp (1u), the sum (n u), log
        // (1u of |log S| plus the absolute log error), the division, the final addition.
        const double n = (double)Geo::prod(g.k);
        const double bound = 4 * kU * std::fabs(y64[i]) +
                             (n + 4) * kU * std::max(1.0, std::log(n)) / b + 1e-40;
        const double e = std::fabs(y[i] - y64[i]) / bound;
        w.smooth = std::max(w.smooth, e);
        TH_CHECK_MSG(e <= 1, "%s smooth beta %g: y %g y64 %g bound %g", what.c_str(), beta,
                     (double)y[i], y64[i], bound);
      }
      for (size_t i = 0; i < dx.size() && i < dx64.size(); ++i) {
        // Each weight exp(b (x - pivot)) / S: the argument's rounding (|b (x - pivot)| u), exp,
        // S (n u), the division, the product with dy; then the sum over m windows.
        double amax = 0;
        for (float v : x) amax = std::max(amax, (double)std::fabs(v));
        const double n = (double)Geo::prod(g.k);
        const double bound = kU * mag[i] * (2 * b * 2 * amax + n + 12) + 1e-40;
        const double e = std::fabs(dx[i] - dx64[i]) / bound;
        w.smooth_bwd = std::max(w.smooth_bwd, e);
        TH_CHECK_MSG(e <= 1, "%s smooth_bwd beta %g: dx %g ref %g bound %g", what.c_str(), beta,
                     (double)dx[i], dx64[i], bound);
      }
    }
  }
}

void reference_sweep() {
  th::Rng rng(77);
  Worst w;
  uint64_t salt = 1000;
  for (uint32_t R = 1; R <= 8; ++R) {
    const int count = R <= 3 ? 40 : 8;
    for (int t = 0; t < count; ++t) {
      const Geo g = random_geo(rng, R, R <= 3 ? 400 : 900);
      for (Dist d : {Dist::Uniform, Dist::Wide, Dist::Bits, Dist::Edge, Dist::Positive})
        one_reference(g, d, salt += 7, w);
    }
  }
  // A few larger 2-D shapes (the bench shapes, scaled down).
  for (const Geo &g :
       {Geo{2, 3, {28, 28}, {3, 3}, {2, 2}, {1, 1}}, Geo{1, 4, {17, 17}, {3, 3}, {1, 1}, {1, 1}},
        Geo{1, 2, {16, 15}, {2, 2}, {2, 2}, {0, 0}}, Geo{1, 1, {9, 40}, {4, 1}, {3, 1}, {2, 0}}})
    for (Dist d : {Dist::Uniform, Dist::Edge})
      one_reference(g, d, salt += 7, w);
  std::printf("accuracy (largest error / bound): avgpool %.3f, avgpool_bwd %.3f, smooth_maxpool "
              "%.3f, smooth_maxpool_bwd %.3f\n",
              w.avg, w.avg_bwd, w.smooth, w.smooth_bwd);
}

// ---- (4) geometry, special values ---------------------------------------------------------------

void geometry_and_specials() {
  Buf y, dx;
  // Output extent: in + 2 pad < kernel gives 0 (c2be276 produced a phantom 1-wide output).
  {
    Buf x3(th::upload({1, 2, 3}));
    TH_OK(tlrt_maxpool2d_fwd(x3.get(), 1, 1, 1, 3, 4, 2, 1, 1, 1, 0, y.out()));
    uint64_t n = 99;
    TH_OK(tlrt_buffer_size(y.get(), &n));
    TH_CHECK(n == 0);
    Buf g0(th::upload({}));
    TH_OK(tlrt_maxpool2d_bwd(x3.get(), g0.get(), 1, 1, 1, 3, 4, 2, 1, 1, 1, 0, dx.out()));
    const std::vector<float> d = th::download(dx.get());
    TH_CHECK(d.size() == 3 && th::bits_of(d[0]) == 0 && th::bits_of(d[1]) == 0 &&
             th::bits_of(d[2]) == 0);
    TH_OK(tlrt_avgpool2d_bwd(g0.get(), 1, 1, 1, 3, 4, 2, 1, 1, 1, 0, true, dx.out()));
    TH_CHECK(th::download(dx.get()) == (std::vector<float>{0, 0, 0}));
    // Exactly fitting: in + 2 pad == kernel gives 1.
    TH_OK(tlrt_maxpool2d_fwd(x3.get(), 1, 1, 1, 3, 3, 3, 1, 1, 1, 0, y.out()));
    TH_CHECK(th::download(y.get()) == (std::vector<float>{3}));
  }
  // Stride 0, kernel 0, 2 pad > kernel, rank 0 / 9: rejected (upstream panicked or returned 0).
  {
    Buf x4(th::upload({1, 2, 3, 4}));
    TH_STATUS(tlrt_maxpool2d_fwd(x4.get(), 1, 1, 2, 2, 2, 2, 0, 1, 0, 0, y.out()),
              TLRT_ERR_INVALID_ARGUMENT);
    TH_STATUS(tlrt_avgpool2d_fwd(x4.get(), 1, 1, 2, 2, 2, 0, 1, 1, 0, 0, true, y.out()),
              TLRT_ERR_INVALID_ARGUMENT);
    TH_STATUS(tlrt_maxpool2d_fwd(x4.get(), 1, 1, 2, 2, 3, 2, 1, 1, 2, 0, y.out()),
              TLRT_ERR_INVALID_ARGUMENT);
    TH_OK(tlrt_maxpool2d_fwd(x4.get(), 1, 1, 2, 2, 2, 2, 1, 1, 1, 1, y.out()));  // 2 pad == k
    TH_CHECK(th::download(y.get()) == (std::vector<float>{1, 2, 2, 3, 4, 4, 3, 4, 4}));
    const uint64_t a9[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    TH_STATUS(tlrt_maxpool_fwd(x4.get(), 4, 1, a9, 0, a9, a9, a9, y.out()),
              TLRT_ERR_INVALID_ARGUMENT);
    TH_STATUS(tlrt_maxpool_fwd(x4.get(), 4, 1, a9, 9, a9, a9, a9, y.out()),
              TLRT_ERR_INVALID_ARGUMENT);
    const uint64_t z8[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    TH_OK(tlrt_maxpool_fwd(x4.get(), 4, 1, a9, 8, a9, a9, z8, y.out()));  // rank 8, 1x..x1
    TH_CHECK(th::download(y.get()) == (std::vector<float>{1, 2, 3, 4}));
  }
  // Empty batch, channels or spatial extent: empty outputs; backward of an empty input is empty.
  {
    Buf e(th::upload({}));
    TH_OK(tlrt_maxpool2d_fwd(e.get(), 0, 3, 5, 5, 3, 3, 1, 1, 1, 1, y.out()));
    TH_CHECK(th::download(y.get()).empty());
    TH_OK(tlrt_avgpool2d_fwd(e.get(), 2, 0, 5, 5, 3, 3, 1, 1, 1, 1, true, y.out()));
    TH_CHECK(th::download(y.get()).empty());
    TH_OK(tlrt_smooth_maxpool2d_fwd(e.get(), 2, 2, 0, 5, 3, 3, 1, 1, 1, 1, 1.0, y.out()));
    TH_CHECK(th::download(y.get()).empty());
    TH_OK(tlrt_maxpool2d_bwd(e.get(), e.get(), 2, 2, 0, 5, 3, 3, 1, 1, 1, 1, dx.out()));
    TH_CHECK(th::download(dx.get()).empty());
    TH_OK(tlrt_avgpool2d_bwd(e.get(), 0, 2, 4, 4, 2, 2, 1, 1, 1, 1, false, dx.out()));
    TH_CHECK(th::download(dx.get()).empty());
    // An empty batch with enormous extents is an empty tensor, not an overflow.
    TH_OK(tlrt_maxpool2d_fwd(e.get(), 0, 3, uint64_t{1} << 40, uint64_t{1} << 40, 1, 1, 1, 1, 0,
                             0, y.out()));
    TH_CHECK(th::download(y.get()).empty());
  }
  // Size 1: a 1x1 input with a 1x1 window is the identity, backward too (bit patterns).
  {
    const std::vector<float> e = th::edge_values();
    Buf bx(th::upload(e));
    TH_OK(tlrt_maxpool2d_fwd(bx.get(), 1, (uint64_t)e.size(), 1, 1, 1, 1, 1, 1, 0, 0, y.out()));
    same_bits("1x1 max identity", th::download(y.get()), e);
    TH_OK(tlrt_avgpool2d_fwd(bx.get(), (uint64_t)e.size(), 1, 1, 1, 1, 1, 1, 1, 0, 0, true,
                             y.out()));
    same_bits("1x1 avg identity", th::download(y.get()), e);
    TH_OK(tlrt_avgpool2d_bwd(bx.get(), (uint64_t)e.size(), 1, 1, 1, 1, 1, 1, 1, 0, 0, true,
                             dx.out()));
    std::vector<float> want(e.size());
    for (size_t i = 0; i < e.size(); ++i) want[i] = 0.0f + e[i];  // from +0: -0 becomes +0
    same_bits("1x1 avg_bwd identity", th::download(dx.get()), want);
    TH_OK(tlrt_maxpool2d_bwd(bx.get(), bx.get(), (uint64_t)e.size(), 1, 1, 1, 1, 1, 1, 1, 0, 0,
                             dx.out()));
    same_bits("1x1 max_bwd identity", th::download(dx.get()), want);
  }
  // NaN propagates through max pooling and its gradient goes to the FIRST NaN; ties: first max;
  // -0 / +0 tie: the first is returned; an all -inf window returns -inf (not -FLT_MAX).
  {
    const float nan = NAN, inf = INFINITY;
    Buf bx(th::upload({1, nan, 5, nan, 2, 2, -0.0f, 0.0f, -inf, -inf}));
    const uint64_t in[] = {10}, k[] = {2}, s[] = {2}, p[] = {0};
    TH_OK(tlrt_maxpool_fwd(bx.get(), 1, 1, in, 1, k, s, p, y.out()));
    const std::vector<float> v = th::download(y.get());
    TH_CHECK(v.size() == 5 && std::isnan(v[0]) && std::isnan(v[1]) && v[2] == 2 &&
             th::bits_of(v[3]) == th::bits_of(-0.0f) && v[4] == -inf);
    Buf g(th::upload({1, 2, 3, 4, 5}));
    TH_OK(tlrt_maxpool_bwd(bx.get(), g.get(), 1, 1, in, 1, k, s, p, dx.out()));
    TH_CHECK(th::download(dx.get()) == (std::vector<float>{0, 1, 0, 2, 3, 0, 4, 0, 5, 0}));
    // Two NaNs in one overlapping window: the first one takes the gradient of both windows.
    Buf b2(th::upload({nan, 3, nan}));
    const uint64_t in3[] = {3}, k3[] = {3}, s1[] = {1}, p1[] = {1};
    Buf g3(th::upload({1, 10, 100}));
    TH_OK(tlrt_maxpool_bwd(b2.get(), g3.get(), 1, 1, in3, 1, k3, s1, p1, dx.out()));
    TH_CHECK(th::download(dx.get()) == (std::vector<float>{11, 0, 100}));
    // Average and smooth max: NaN in the window gives NaN; +inf in the average gives +inf.
    TH_OK(tlrt_avgpool_fwd(bx.get(), 1, 1, in, 1, k, s, p, true, y.out()));
    const std::vector<float> a = th::download(y.get());
    TH_CHECK(std::isnan(a[0]) && std::isnan(a[1]) && a[2] == 2 && a[4] == -inf);
    TH_OK(tlrt_smooth_maxpool_fwd(bx.get(), 1, 1, in, 1, k, s, p, 3.0, y.out()));
    const std::vector<float> sm = th::download(y.get());
    TH_CHECK(std::isnan(sm[0]) && std::isnan(sm[1]) && sm[4] == -inf);
  }
  // Smooth max with infinities: pivot +-inf returns the pivot; gradients there are NaN.
  {
    const float inf = INFINITY;
    Buf bx(th::upload({inf, 1, -inf, 1, -inf, -inf, inf, inf}));
    const uint64_t in[] = {8}, k[] = {2}, s[] = {2}, p[] = {0};
    TH_OK(tlrt_smooth_maxpool_fwd(bx.get(), 1, 1, in, 1, k, s, p, 2.0, y.out()));
    std::vector<float> v = th::download(y.get());
    TH_CHECK(v.size() == 4 && v[0] == inf && v[1] == 1 && v[2] == -inf && v[3] == inf);
    TH_OK(tlrt_smooth_maxpool_fwd(bx.get(), 1, 1, in, 1, k, s, p, -2.0, y.out()));
    v = th::download(y.get());
    TH_CHECK(v.size() == 4 && v[0] == 1 && v[1] == -inf && v[2] == -inf && v[3] == inf);
    Buf g(th::upload({1, 1, 1, 1}));
    TH_OK(tlrt_smooth_maxpool_bwd(bx.get(), g.get(), 1, 1, in, 1, k, s, p, 2.0, dx.out()));
    const std::vector<float> d = th::download(dx.get());
    TH_CHECK(std::isnan(d[0]) && std::isnan(d[1]) && d[2] == 0 && d[3] == 1);
  }
  // Large |beta|: smooth max tends to max pool (beta > 0) and min pool (beta < 0); the gradient to
  // the selected cell.
  {
    th::Rng rng(5);
    const std::vector<float> x = rng.vec(64, -1, 1);
    const Geo g{1, 1, {8, 8}, {3, 3}, {2, 2}, {1, 1}};
    const std::vector<float> mx = run_fwd(Op::Max, g, x);
    const std::vector<float> sp = run_fwd(Op::Smooth, g, x, 1e30);
    TH_CHECK(sp == mx);
    std::vector<float> neg(x.size());
    for (size_t i = 0; i < x.size(); ++i) neg[i] = -x[i];
    const std::vector<float> mn = run_fwd(Op::Max, g, neg);
    const std::vector<float> sn = run_fwd(Op::Smooth, g, x, -1e30);
    bool ok = mn.size() == sn.size();
    for (size_t i = 0; ok && i < mn.size(); ++i) ok = sn[i] == -mn[i];
    TH_CHECK(ok);
    const std::vector<float> dy = rng.vec(mx.size(), -1, 1);
    TH_CHECK(run_bwd(Op::Smooth, g, x, dy, 1e30) == run_bwd(Op::Max, g, x, dy));
  }
  // Upstream's padding rule for smooth max (zeros) is NOT used: a window of negative values next
  // to the border gives the same result as without the padding cells.
  {
    Buf bx(th::upload({-5, -6}));
    const uint64_t in[] = {2}, k2[] = {2}, s2[] = {2}, p1[] = {1}, k3[] = {3}, p0[] = {0};
    Buf a, b;
    TH_OK(tlrt_smooth_maxpool_fwd(bx.get(), 1, 1, in, 1, k3, s2, p1, 1.0, a.out()));
    TH_OK(tlrt_smooth_maxpool_fwd(bx.get(), 1, 1, in, 1, k2, s2, p0, 1.0, b.out()));
    const std::vector<float> va = th::download(a.get()), vb = th::download(b.get());
    TH_CHECK(va.size() == 1 && vb.size() == 1 && va[0] == vb[0] && va[0] < -4.6f);
  }
  // beta is rounded to float32: 1 + 2^-30 is 1.
  {
    th::Rng rng(9);
    const std::vector<float> x = rng.vec(50, -3, 3);
    const Geo g{1, 2, {5, 5}, {2, 3}, {1, 2}, {1, 1}};
    TH_CHECK(run_fwd(Op::Smooth, g, x, 1.0) == run_fwd(Op::Smooth, g, x, 1.0 + std::ldexp(1, -30)));
  }
  // The determinism switch changes nothing (no atomics on any path).
  {
    th::Rng rng(11);
    const std::vector<float> x = rng.vec(2 * 3 * 9 * 11, -1, 1);
    const Geo g{2, 3, {9, 11}, {3, 3}, {1, 2}, {1, 1}};
    const std::vector<float> dy = rng.vec(2 * 3 * g.out_sp(), -1, 1);
    for (Op op : {Op::Max, Op::Avg, Op::Smooth}) {
      const bool was = tlrt_set_deterministic(!tlrt_get_deterministic());
      const std::vector<float> a = run_bwd(op, g, x, dy, 0.5);
      tlrt_set_deterministic(was);
      TH_CHECK(a == run_bwd(op, g, x, dy, 0.5));
    }
  }
}

// ---- (5) geometry as data ----------------------------------------------------------------------

static_assert(sizeof(tlrt_pool_geometry) == 288, "36 uint64_t fields");
static_assert(offsetof(tlrt_pool_geometry, struct_size) == 0 &&
                  offsetof(tlrt_pool_geometry, rank) == 8 &&
                  offsetof(tlrt_pool_geometry, channels) == 24 &&
                  offsetof(tlrt_pool_geometry, in_spatial) == 32 &&
                  offsetof(tlrt_pool_geometry, kernel) == 96 &&
                  offsetof(tlrt_pool_geometry, padding) == 224,
              "the layout of abi/tlrt_pool.h");

tlrt_pool_geometry to_struct(const Geo &g) {
  tlrt_pool_geometry s;
  std::memset(&s, 0, sizeof s);
  s.struct_size = sizeof s;
  s.rank = g.rank();
  s.batch = g.N;
  s.channels = g.C;
  for (uint32_t d = 0; d < g.rank(); ++d) {
    s.in_spatial[d] = g.in[d];
    s.kernel[d] = g.k[d];
    s.stride[d] = g.s[d];
    s.padding[d] = g.p[d];
  }
  return s;
}

tlrt_status fwd_geom(Op op, const tlrt_pool_geometry &s, const tlrt_buffer *x, double beta,
                     tlrt_buffer **out) {
  switch (op) {
    case Op::Max: return tlrt_maxpool_fwd_geom(x, &s, out);
    case Op::Avg:
    case Op::AvgNoPad: return tlrt_avgpool_fwd_geom(x, &s, op == Op::Avg, out);
    case Op::Smooth: return tlrt_smooth_maxpool_fwd_geom(x, &s, beta, out);
  }
  return TLRT_ERR_INTERNAL;
}

tlrt_status bwd_geom(Op op, const tlrt_pool_geometry &s, const tlrt_buffer *x,
                     const tlrt_buffer *dy, double beta, tlrt_buffer **dx) {
  switch (op) {
    case Op::Max: return tlrt_maxpool_bwd_geom(x, dy, &s, dx);
    case Op::Avg:
    case Op::AvgNoPad: return tlrt_avgpool_bwd_geom(dy, &s, op == Op::Avg, dx);
    case Op::Smooth: return tlrt_smooth_maxpool_bwd_geom(x, dy, &s, beta, dx);
  }
  return TLRT_ERR_INTERNAL;
}

void geometry_structs() {
  th::Rng rng(123);
  std::vector<Geo> geos;
  for (uint32_t R = 1; R <= 8; ++R)
    for (int t = 0; t < (R <= 3 ? 6 : 2); ++t) geos.push_back(random_geo(rng, R, 600));
  geos.push_back(Geo{1, 2, {3, 5}, {6, 2}, {1, 1}, {1, 1}});  // in + 2 pad < kernel: empty output
  geos.push_back(Geo{2, 3, {9, 11}, {3, 3}, {2, 1}, {1, 1}});
  uint64_t salt = 9000;
  for (const Geo &g : geos) {
    const tlrt_pool_geometry s = to_struct(g);
    uint64_t dims[TLRT_POOL_MAX_DIMS];
    uint32_t rank = 0;
    uint64_t n = 0;
    TH_OK(tlrt_pool_output_dims(&s, dims, TLRT_POOL_MAX_DIMS, &rank, &n));
    const std::vector<uint64_t> out = g.out();
    bool ok = rank == g.rank() + 2 && dims[0] == g.N && dims[1] == g.C &&
              n == g.N * g.C * g.out_sp();
    for (uint32_t d = 0; ok && d < g.rank(); ++d) ok = dims[d + 2] == out[d];
    TH_CHECK_MSG(ok, "%s: output dims query disagrees with the header's formula", g.str().c_str());
    const std::vector<float> x = th::make(Dist::Uniform, g.N * g.C * g.in_sp(), salt += 3);
    const std::vector<float> dy = th::make(Dist::Uniform, n, salt += 3);
    Buf bx(th::upload(x)), bdy(th::upload(dy));
    for (Op op : {Op::Max, Op::Avg, Op::AvgNoPad, Op::Smooth}) {
      const std::string what = g.str() + " op " + std::to_string((int)op);
      Buf y1, y2, d1, d2;
      TH_OK(fwd(op, g, bx.get(), 0.75, y1.out()));
      TH_OK(fwd_geom(op, s, bx.get(), 0.75, y2.out()));
      if (!y1.get() || !y2.get()) continue;
      uint64_t size = 0;
      TH_OK(tlrt_buffer_size(y2.get(), &size));
      TH_CHECK_MSG(size == n, "%s: forward has %llu elements, the query says %llu", what.c_str(),
                   (unsigned long long)size, (unsigned long long)n);
      same_bits(what + " forward (struct)", th::download(y2.get()), th::download(y1.get()));
      TH_OK(bwd(op, g, bx.get(), bdy.get(), 0.75, d1.out()));
      TH_OK(bwd_geom(op, s, bx.get(), bdy.get(), 0.75, d2.out()));
      if (d1.get() && d2.get())
        same_bits(what + " backward (struct)", th::download(d2.get()), th::download(d1.get()));
    }
  }
}

}  // namespace

int main() {
  const tlrt_allocator_stats start = th::stats();
  known_answers();
  geometry_and_specials();
  reference_sweep();
  geometry_structs();
  const tlrt_allocator_stats end = th::stats();
  TH_CHECK_MSG(end.live_bytes == start.live_bytes && end.live_handles == start.live_handles,
               "leak: live bytes %llu -> %llu, handles %llu -> %llu",
               (unsigned long long)start.live_bytes, (unsigned long long)end.live_bytes,
               (unsigned long long)start.live_handles, (unsigned long long)end.live_handles);
  return th::finish("test_pool");
}
