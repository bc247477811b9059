// Suite 'parity': the convolution family (abi/tlrt_conv.h) on TLRT_DEVICE_CPU and
// TLRT_DEVICE_CUDA(0) with the same seeded inputs. Numeric class "library": compared by error
// bounds, not bits.
//   - small cases: each backend's forward and three gradients against the float64 reference of
//     tests/conv_ref.hpp within the header's bound 2 (T + 1) u S;
//   - every case: CPU against CUDA on every element, |cpu - cuda| <= 4 (T + 1) u S' + 2^-140, with
//     S' the library's own CPU result on |kernel|, |bias|, |input|, |grad_out| (all terms
//     non-negative, so S' is S within its own bound) and T the largest term count of the output
//     (forward in_c / groups * prod(k) + 1, d_input out_c / groups * prod(k), d_kernel and d_bias
//     batch * prod(out));
//   - special values (Dist::Edge): NaN and infinity positions identical on both backends;
//   - every CUDA dispatch branch (cuda/conv.cu): implicit GEMM with tiles of 16, 32, 64 and 128
//     rows (several row tiles, odd sizes, groups, dilation, stride 2 phases, 1-D, 2-D, 3-D, up to
//     the 16 phases of one launch and beyond), its non-finite-weight recomputation (Dist::Edge),
//     the sliced kernel gradient, the direct depthwise kernels (1-D, 2-D, 3-D, strided, dilated),
//     and im2col + cuBLAS (rank > 3, 1x1, few blocks with a long reduction, TF32); the small
//     random cases take the implicit GEMM for rank <= 3;
//   - chunking: a (12, 64, 96, 96) 3x3 problem whose column matrices exceed the 256 MiB scratch
//     budget, with TF32 on (only then does it take im2col), so the CUDA backend runs several
//     chunks (the kernel gradient accumulating across them);
//   - TF32 (tlrt_set_allow_tf32): within (2^-9 + ...) S with it on; off again reproduces the off
//     result bit for bit;
//   - bench shapes: conv2d (32, 64, 56, 56) 3x3 pad 1, (1, 64, 56, 56), 3-D (4, 32, 32^3) 3x3x3,
//     transposed (32, 64, 28, 28) 4x4 stride 2 pad 1, and depthwise / grouped / dilated ones.
// Worst ratios are printed. TLRT_PARITY_MAX_N=<n> skips cases with an input above n elements.
// Exits 77 (skipped) unless a CUDA device is usable.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "conv_ref.hpp"
#include "parity.hpp"

namespace {

using cref::Geo;
using th::Buf;
constexpr double kU = 0x1p-24;

struct Out {
  std::vector<float> y, dw, db, dx;
};

Out run(tlrt_device dev, const Geo &g, const std::vector<float> &w, const std::vector<float> &b,
        const std::vector<float> &x, const std::vector<float> &dy) {
  Buf W(th::upload(w, dev)), B(th::upload(b, dev)), X(th::upload(x, dev)),
      DY(th::upload(dy, dev)), Y, DW, DB, DX;
  tlrt_status s1, s2;
  if (g.transposed) {
    s1 = tlrt_convtranspose_fwd(W.get(), B.get(), X.get(), g.batch, g.in_c, g.out_c, g.in.data(),
                                g.rank(), g.k.data(), g.s.data(), g.p.data(), g.d.data(),
                                g.groups, Y.out());
    s2 = tlrt_convtranspose_bwd(W.get(), X.get(), DY.get(), g.batch, g.in_c, g.out_c,
                                g.in.data(), g.rank(), g.k.data(), g.s.data(), g.p.data(),
                                g.d.data(), g.groups, DW.out(), DB.out(), DX.out());
  } else {
    s1 = tlrt_conv_fwd(W.get(), B.get(), X.get(), g.batch, g.in_c, g.out_c, g.in.data(),
                       g.rank(), g.k.data(), g.s.data(), g.p.data(), g.d.data(), g.groups,
                       Y.out());
    s2 = tlrt_conv_bwd(W.get(), X.get(), DY.get(), g.batch, g.in_c, g.out_c, g.in.data(),
                       g.rank(), g.k.data(), g.s.data(), g.p.data(), g.d.data(), g.groups,
                       DW.out(), DB.out(), DX.out());
  }
  TH_CHECK_MSG(s1 == TLRT_OK && s2 == TLRT_OK, "run failed: %s", tlrt_last_error());
  Out o;
  if (s1 != TLRT_OK || s2 != TLRT_OK) return o;
  o.y = th::download(Y.get());
  o.dw = th::download(DW.get());
  o.db = th::download(DB.get());
  o.dx = th::download(DX.get());
  return o;
}

std::vector<float> absv(const std::vector<float> &v) {
  std::vector<float> r(v);
  for (float &x : r) x = std::fabs(x);
  return r;
}

double g_worst_pair = 0, g_worst_ref = 0;

void pair(const std::string &what, const std::vector<float> &c, const std::vector<float> &d,
          const std::vector<float> &S, double T, double extra) {
  TH_CHECK_MSG(c.size() == d.size() && c.size() == S.size(), "%s: sizes %zu %zu %zu",
               what.c_str(), c.size(), d.size(), S.size());
  if (c.size() != d.size() || c.size() != S.size()) return;
  size_t bad = SIZE_MAX;
  double worst = 0;
  for (size_t i = 0; i < c.size(); ++i) {
    const bool nc = std::isnan(c[i]), nd = std::isnan(d[i]);
    if (nc || nd || std::isinf(c[i]) || std::isinf(d[i]) || !std::isfinite(S[i])) {
      if (!(nc == nd && (nc || c[i] == d[i] || !std::isfinite(S[i])))) bad = std::min(bad, i);
      continue;
    }
    const double tol = (4.0 * (T + 1) * kU + 2 * extra) * (double)S[i] + 0x1p-140;
    const double r = std::fabs((double)c[i] - (double)d[i]) / tol;
    worst = std::max(worst, r);
    if (r > 1.0) bad = std::min(bad, i);
  }
  g_worst_pair = std::max(g_worst_pair, worst);
  TH_CHECK_MSG(bad == SIZE_MAX, "%s: element %zu cpu %s cuda %s (S %.6g)", what.c_str(), bad,
               bad < c.size() ? th::hex(c[bad]).c_str() : "-",
               bad < d.size() ? th::hex(d[bad]).c_str() : "-",
               bad < S.size() ? (double)S[bad] : 0.0);
  ++parity::summary().runs;
  parity::summary().elements += c.size();
}

void against_ref(const std::string &what, const std::vector<float> &got, const cref::Ref &r,
                 double extra) {
  size_t bad;
  const double ratio = cref::worst_ratio(got, r, &bad, extra);
  g_worst_ref = std::max(g_worst_ref, ratio);
  TH_CHECK_MSG(bad == SIZE_MAX, "%s: element %zu got %.9g want %.17g", what.c_str(), bad,
               bad < got.size() ? (double)got[bad] : 0.0, bad < r.v.size() ? r.v[bad] : 0.0);
}

void one_case(const std::string &name, const Geo &g, th::Dist dist, uint64_t salt,
              bool reference) {
  if (cref::input_elems(g) > parity::max_n()) return;
  const std::vector<float> w = th::make(dist, cref::kernel_elems(g), salt * 4 + 1);
  const std::vector<float> b = th::make(dist, g.out_c, salt * 4 + 2);
  const std::vector<float> x = th::make(dist, cref::input_elems(g), salt * 4 + 3);
  const std::vector<float> dy = th::make(th::Dist::Uniform, cref::output_elems(g), salt * 4 + 4);
  const Out c = run(parity::kCpu, g, w, b, x, dy);
  const Out d = run(parity::kGpu, g, w, b, x, dy);
  const Out S = run(parity::kCpu, g, absv(w), absv(b), absv(x), absv(dy));
  const uint64_t ksz = cref::prod(g.k), osp = cref::prod(cref::out_extents(g));
  const uint64_t cin = g.transposed ? g.out_c : g.in_c, cout = g.transposed ? g.in_c : g.out_c;
  const double Tconv = (double)(cin / g.groups * ksz + 1), Tadj = (double)(cout / g.groups * ksz);
  const double Tsum = (double)(g.batch * (g.transposed ? cref::prod(g.in) : osp));
  const double extra = tlrt_get_allow_tf32() ? 0x1p-9 : 0.0;
  pair(name + " forward", c.y, d.y, S.y, g.transposed ? Tadj : Tconv, extra);
  pair(name + " d_input", c.dx, d.dx, S.dx, g.transposed ? Tconv : Tadj, extra);
  pair(name + " d_kernel", c.dw, d.dw, S.dw, Tsum, extra);
  pair(name + " d_bias", c.db, d.db, S.db, (double)(g.batch * osp), 0.0);
  if (reference) {
    against_ref(name + " cuda forward", d.y, cref::forward(g, w, b, x), extra);
    against_ref(name + " cuda d_kernel", d.dw, cref::grad_kernel(g, x, dy), extra);
    against_ref(name + " cuda d_bias", d.db, cref::grad_bias(g, dy), 0.0);
    against_ref(name + " cuda d_input", d.dx, cref::grad_input(g, w, dy), extra);
    against_ref(name + " cpu forward", c.y, cref::forward(g, w, b, x), 0.0);
  }
}

Geo make(bool tr, uint64_t batch, uint64_t in_c, uint64_t out_c, uint64_t groups,
         std::vector<uint64_t> in, std::vector<uint64_t> k, std::vector<uint64_t> s,
         std::vector<uint64_t> p, std::vector<uint64_t> d) {
  Geo g;
  g.transposed = tr;
  g.batch = batch;
  g.in_c = in_c;
  g.out_c = out_c;
  g.groups = groups;
  g.in = in;
  g.k = k;
  g.s = s;
  g.p = p;
  g.d = d;
  return g;
}

}  // namespace

int main() {
  if (!parity::start("parity_conv")) return 77;
  // Small cases with the float64 reference, every rank and feature.
  th::Rng rng(99);
  auto pick = [&](uint64_t lo, uint64_t hi) { return lo + rng.gen() % (hi - lo + 1); };
  int n = 0;
  for (int it = 0; it < 120; ++it) {
    const uint32_t rank = 1 + (uint32_t)(it % 5);  // 1 .. 5
    Geo g;
    g.transposed = it % 2 == 1;
    g.groups = pick(1, 3);
    g.in_c = g.groups * pick(1, 3);
    g.out_c = g.groups * pick(1, 3);
    g.batch = pick(1, 4);
    for (uint32_t a = 0; a < rank; ++a) {
      g.k.push_back(pick(1, rank > 2 ? 2 : 4));
      g.s.push_back(pick(1, 3));
      g.p.push_back(pick(0, 2));
      g.d.push_back(pick(1, 2));
      g.in.push_back(pick(1, rank > 2 ? 4 : 12));
    }
    if (cref::output_elems(g) == 0) continue;
    const th::Dist dist = it % 7 == 3 ? th::Dist::Edge : it % 7 == 5 ? th::Dist::Wide
                                                                     : th::Dist::Uniform;
    one_case("small " + std::to_string(it), g, dist, (uint64_t)it, true);
    ++n;
  }
  // Larger shapes: CPU against CUDA.
  one_case("conv2d 8x64x28x28 3x3", make(false, 8, 64, 64, 1, {28, 28}, {3, 3}, {1, 1}, {1, 1},
                                         {1, 1}), th::Dist::Uniform, 1001, false);
  one_case("conv2d 1x64x56x56 3x3", make(false, 1, 64, 64, 1, {56, 56}, {3, 3}, {1, 1}, {1, 1},
                                         {1, 1}), th::Dist::Uniform, 1002, false);
  one_case("depthwise 4x32x40x40", make(false, 4, 32, 32, 32, {40, 40}, {3, 3}, {1, 1}, {1, 1},
                                        {1, 1}), th::Dist::Uniform, 1003, false);
  one_case("grouped dilated 2x16x33x31", make(false, 2, 16, 24, 4, {33, 31}, {3, 5}, {2, 1},
                                              {2, 2}, {2, 1}), th::Dist::Uniform, 1004, false);
  one_case("1x1 4x64x20x20", make(false, 4, 64, 32, 1, {20, 20}, {1, 1}, {1, 1}, {0, 0}, {1, 1}),
           th::Dist::Uniform, 1005, false);
  one_case("conv3d 2x8x16^3 3x3x3", make(false, 2, 8, 8, 1, {16, 16, 16}, {3, 3, 3}, {1, 1, 1},
                                         {1, 1, 1}, {1, 1, 1}), th::Dist::Uniform, 1006, false);
  one_case("convtranspose 8x64x14x14 4x4 s2", make(true, 8, 64, 64, 1, {14, 14}, {4, 4}, {2, 2},
                                                   {1, 1}, {1, 1}), th::Dist::Uniform, 1007,
           false);
  one_case("convtranspose 1x1", make(true, 3, 16, 8, 1, {9, 9}, {1, 1}, {1, 1}, {0, 0}, {1, 1}),
           th::Dist::Uniform, 1008, false);
  one_case("conv1d 4x16x1000", make(false, 4, 16, 16, 1, {1000}, {7}, {3}, {3}, {2}),
           th::Dist::Uniform, 1009, false);
  // Chunking: (10, 64, 96, 96) 3x3: 21 MB of columns per image, 212 MB in all, plus partials: the
  // kernel gradient's scratch exceeds 256 MiB at 10 images -> several chunks for bwd_kernel; the
  // (12, ...) case exceeds it for every pass.
  one_case("12x64x96x96", make(false, 12, 64, 64, 1, {96, 96}, {3, 3}, {1, 1}, {1, 1}, {1, 1}),
           th::Dist::Uniform, 1010, false);
  // CUDA dispatch branches. 160 out channels: 2 row tiles of 128 (forward, kernel gradient); the
  // input gradient (24 rows, 144 column tiles) on the implicit GEMM too.
  one_case("igemm 128-row tiles 8x24x48x48", make(false, 8, 24, 160, 1, {48, 48}, {3, 3}, {1, 1},
                                                  {1, 1}, {1, 1}), th::Dist::Uniform, 1012, false);
  // The transposed bench shape at half batch: 4 stride phases in one launch.
  one_case("convtranspose 16x64x28x28 4x4 s2", make(true, 16, 64, 64, 1, {28, 28}, {4, 4}, {2, 2},
                                                    {1, 1}, {1, 1}), th::Dist::Uniform, 1013,
           false);
  // 3-D with 32-row tiles (216 column tiles: the forward takes the implicit GEMM).
  one_case("conv3d 2x32x24^3 3x3x3", make(false, 2, 32, 32, 1, {24, 24, 24}, {3, 3, 3}, {1, 1, 1},
                                          {1, 1, 1}, {1, 1, 1}), th::Dist::Uniform, 1014, false);
  // Stride 2: forward on cuBLAS (32 column tiles, reduction 576), input gradient by phases.
  one_case("stride 2 4x64x64x64", make(false, 4, 64, 64, 1, {64, 64}, {3, 3}, {2, 2}, {1, 1},
                                       {1, 1}), th::Dist::Uniform, 1015, false);
  // Odd sizes, dilation, 33 out channels (64-row tiles, half empty), 3 x 5 window.
  one_case("dilated odd 5x20x37x29", make(false, 5, 20, 33, 1, {37, 29}, {3, 5}, {1, 2}, {2, 1},
                                          {2, 3}), th::Dist::Uniform, 1016, false);
  // 1-D, 140 out channels (2 row tiles), odd length.
  one_case("conv1d 2x130x257", make(false, 2, 130, 140, 1, {257}, {3}, {1}, {1}, {1}),
           th::Dist::Uniform, 1017, false);
  // Depthwise direct kernels: 3-D strided and dilated, 1-D strided and dilated.
  one_case("depthwise 3-D 2x8x9x10x11", make(false, 2, 8, 8, 8, {9, 10, 11}, {3, 3, 3}, {2, 1, 1},
                                             {1, 1, 1}, {1, 2, 1}), th::Dist::Uniform, 1018,
           false);
  one_case("depthwise 1-D 3x12x101", make(false, 3, 12, 12, 12, {101}, {5}, {2}, {3}, {2}),
           th::Dist::Uniform, 1019, false);
  // Channel multiplier 2 (not depthwise: 16-row tiles), stride 2, odd sizes.
  one_case("multiplier 2x16x26x27", make(false, 2, 16, 32, 16, {26, 27}, {3, 3}, {2, 2}, {1, 1},
                                         {1, 1}), th::Dist::Uniform, 1020, false);
  // Non-finite weights and inputs through the phased input gradient and the transposed forward
  // (the implicit GEMM's recomputation without padding products).
  one_case("edge grouped 2x12x9x11 s2", make(false, 2, 12, 18, 3, {9, 11}, {3, 3}, {2, 2}, {1, 1},
                                             {1, 1}), th::Dist::Edge, 1021, false);
  one_case("edge convtranspose 2x8x15x13 s2", make(true, 2, 8, 6, 2, {15, 13}, {3, 4}, {2, 2},
                                                   {1, 2}, {1, 1}), th::Dist::Edge, 1022, false);
  // 20 stride phases (two launches of the input gradient), 3-D with 27 phases, empty-tap phases.
  one_case("20 phases 2x6x41x37", make(false, 2, 6, 8, 1, {41, 37}, {2, 3}, {5, 4}, {1, 0},
                                       {1, 1}), th::Dist::Uniform, 1023, false);
  one_case("27 phases 3-D 2x4x13x12x11", make(false, 2, 4, 5, 1, {13, 12, 11}, {2, 2, 1},
                                              {3, 3, 3}, {0, 1, 0}, {1, 2, 1}),
           th::Dist::Uniform, 1024, false);
  // TF32: on, then off again reproduces the off result bit for bit.
  {
    const Geo g = make(false, 4, 64, 64, 1, {28, 28}, {3, 3}, {1, 1}, {1, 1}, {1, 1});
    const std::vector<float> w = th::make(th::Dist::Uniform, cref::kernel_elems(g), 7);
    const std::vector<float> b = th::make(th::Dist::Uniform, g.out_c, 8);
    const std::vector<float> x = th::make(th::Dist::Uniform, cref::input_elems(g), 9);
    const std::vector<float> dy = th::make(th::Dist::Uniform, cref::output_elems(g), 10);
    const Out off1 = run(parity::kGpu, g, w, b, x, dy);
    const bool prev = tlrt_set_allow_tf32(true);
    one_case("tf32 4x64x28x28", g, th::Dist::Uniform, 1011, false);
    one_case("tf32 chunked 12x64x96x96", make(false, 12, 64, 64, 1, {96, 96}, {3, 3}, {1, 1},
                                              {1, 1}, {1, 1}), th::Dist::Uniform, 1025, false);
    tlrt_set_allow_tf32(false);
    const Out off2 = run(parity::kGpu, g, w, b, x, dy);
    tlrt_set_allow_tf32(prev);
    parity::compare("tf32 off again: forward", off1.y, off2.y);
    parity::compare("tf32 off again: d_kernel", off1.dw, off2.dw);
    parity::compare("tf32 off again: d_input", off1.dx, off2.dx);
  }
  std::printf("parity_conv: %d small cases; worst |cpu - cuda| / bound %.3g; worst error / "
              "header bound against float64 %.3g\n",
              n, g_worst_pair, g_worst_ref);
  parity::print_summary("parity_conv");
  return th::finish("test_parity_conv");
}
