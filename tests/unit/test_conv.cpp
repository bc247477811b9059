// Suite 'unit': the convolution family (abi/tlrt_conv.h) on the CPU.
//  - known answers, small integers (exact): 1-D and 2-D convolution, bias, stride, padding,
//    dilation, groups (depthwise), a window entirely in padding, the transposed convolution as
//    2x upsampling, and upstream's fixed bugs: no phantom 1-wide output when the window is larger
//    than the padded input, the transposed output size computed before saturating, stride 0 and a
//    zero kernel extent rejected;
//  - output extents of both rules against the header's formulas over a grid of geometries;
//  - seeded random problems, rank 1 .. 4, with batch, groups, stride, padding, dilation, the
//    1 x ... x 1 direct path, bias and no bias: forward and every backward output of both the
//    convolution and the transposed convolution against the float64 reference of
//    tests/conv_ref.hpp, within the header's bound 2 (T + 1) u S (worst ratio printed);
//  - backward outputs requested one at a time equal (bitwise) the ones of a call requesting all
//    three; the 2-D entry points equal (bitwise) the N-D ones; repeated calls are bitwise equal;
//  - empty cases (batch 0, empty output, in_channels 0, an empty input with padding), and special
//    values (NaN and inf in the input and kernel: exactly the covered outputs are poisoned;
//    padding cells are zeros that take part in the products, so inf * padding is NaN);
//  - geometry as data: the *_geom entry points (tlrt_conv_geometry) equal (bitwise) the N-D ones,
//    forward and every backward output, over rank 1, 2 and 3 geometries with groups (depthwise
//    included), stride, padding and dilation, and empty outputs; tlrt_conv_output_dims and
//    tlrt_convtranspose_output_dims give exactly the sizes the ops produce and the header's
//    formulas; the struct's layout (368 bytes, every field where the header puts it).
#include <cmath>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "conv_ref.hpp"
#include "harness.hpp"

namespace {

using th::Buf;
using cref::Geo;

std::vector<float> run_fwd(const Geo &g, const std::vector<float> &w, const std::vector<float> *b,
                           const std::vector<float> &x, tlrt_status *st = nullptr) {
  Buf W(th::upload(w)), X(th::upload(x)), B;
  if (b) B = Buf(th::upload(*b));
  Buf Y;
  const tlrt_status s =
      g.transposed
          ? tlrt_convtranspose_fwd(W.get(), B.get(), X.get(), g.batch, g.in_c, g.out_c,
                                   g.in.data(), g.rank(), g.k.data(), g.s.data(), g.p.data(),
                                   g.d.data(), g.groups, Y.out())
          : tlrt_conv_fwd(W.get(), B.get(), X.get(), g.batch, g.in_c, g.out_c, g.in.data(),
                          g.rank(), g.k.data(), g.s.data(), g.p.data(), g.d.data(), g.groups,
                          Y.out());
  if (st) {
    *st = s;
    if (s != TLRT_OK) return {};
  } else {
    TH_CHECK_MSG(s == TLRT_OK, "forward failed: %s", tlrt_last_error());
    if (s != TLRT_OK) return {};
  }
  return th::download(Y.get());
}

struct Grads {
  std::vector<float> dw, db, dx;
};

// want: bit 0 d_kernel, bit 1 d_bias, bit 2 d_input.
Grads run_bwd(const Geo &g, const std::vector<float> &w, const std::vector<float> &x,
              const std::vector<float> &dy, int want = 7) {
  Buf W(th::upload(w)), X(th::upload(x)), DY(th::upload(dy));
  Buf DW, DB, DX;
  tlrt_buffer **pw = (want & 1) ? DW.out() : nullptr, **pb = (want & 2) ? DB.out() : nullptr,
              **px = (want & 4) ? DX.out() : nullptr;
  const tlrt_status s =
      g.transposed
          ? tlrt_convtranspose_bwd(W.get(), X.get(), DY.get(), g.batch, g.in_c, g.out_c,
                                   g.in.data(), g.rank(), g.k.data(), g.s.data(), g.p.data(),
                                   g.d.data(), g.groups, pw, pb, px)
          : tlrt_conv_bwd(W.get(), X.get(), DY.get(), g.batch, g.in_c, g.out_c, g.in.data(),
                          g.rank(), g.k.data(), g.s.data(), g.p.data(), g.d.data(), g.groups, pw,
                          pb, px);
  TH_CHECK_MSG(s == TLRT_OK, "backward failed: %s", tlrt_last_error());
  Grads r;
  if (s != TLRT_OK) return r;
  if (want & 1) r.dw = th::download(DW.get());
  if (want & 2) r.db = th::download(DB.get());
  if (want & 4) r.dx = th::download(DX.get());
  return r;
}

Geo geo1(uint64_t in, uint64_t k, uint64_t s, uint64_t p, uint64_t d = 1, bool tr = false) {
  Geo g;
  g.transposed = tr;
  g.in = {in};
  g.k = {k};
  g.s = {s};
  g.p = {p};
  g.d = {d};
  return g;
}

void expect_vec(const char *what, const std::vector<float> &got, const std::vector<float> &want) {
  bool ok = got.size() == want.size();
  for (size_t i = 0; ok && i < got.size(); ++i) ok = th::same_bits(got[i], want[i]);
  std::string g, w;
  for (float v : got) g += std::to_string(v) + " ";
  for (float v : want) w += std::to_string(v) + " ";
  TH_CHECK_MSG(ok, "%s: got [%s], want [%s]", what, g.c_str(), w.c_str());
}

void known_answers() {
  // 1-D: [1 2 3 4] * [1 1] -> [3 5 7]; with bias 0.5 -> [3.5 5.5 7.5].
  {
    Geo g = geo1(4, 2, 1, 0);
    expect_vec("conv1d", run_fwd(g, {1, 1}, nullptr, {1, 2, 3, 4}), {3, 5, 7});
    const std::vector<float> b{0.5f};
    expect_vec("conv1d bias", run_fwd(g, {1, 1}, &b, {1, 2, 3, 4}), {3.5f, 5.5f, 7.5f});
  }
  // 2-D: 3x3 input 1..9, 2x2 ones kernel -> [12 16 24 28]; through the 2-D entry point too.
  {
    Geo g;
    g.in = {3, 3};
    g.k = {2, 2};
    g.s = {1, 1};
    g.p = {0, 0};
    g.d = {1, 1};
    const std::vector<float> x{1, 2, 3, 4, 5, 6, 7, 8, 9}, w{1, 1, 1, 1};
    expect_vec("conv2d", run_fwd(g, w, nullptr, x), {12, 16, 24, 28});
    Buf W(th::upload(w)), X(th::upload(x)), Y;
    TH_OK(tlrt_conv2d_fwd(W.get(), nullptr, X.get(), 1, 1, 3, 3, 1, 2, 2, 1, 1, 0, 0, 1, 1, 1,
                          Y.out()));
    expect_vec("tlrt_conv2d_fwd", th::download(Y.get()), {12, 16, 24, 28});
    // Stride 2 with padding 1 on 3x3, 3x3 ones: windows at -1 and 1 -> [12 16 24 28] again.
    Geo h = g;
    h.k = {3, 3};
    h.s = {2, 2};
    h.p = {1, 1};
    expect_vec("conv2d stride 2 pad 1", run_fwd(h, std::vector<float>(9, 1.0f), nullptr, x),
               {12, 16, 24, 28});
  }
  // Dilation 2: out[q] = x[q] + x[q + 2].
  expect_vec("dilation", run_fwd(geo1(5, 2, 1, 0, 2), {1, 1}, nullptr, {1, 2, 3, 4, 5}),
             {4, 6, 8});
  // Depthwise (groups = channels = 2): y = [2 x0, 3 x1].
  {
    Geo g = geo1(2, 1, 1, 0);
    g.in_c = g.out_c = g.groups = 2;
    expect_vec("depthwise", run_fwd(g, {2, 3}, nullptr, {1, 2, 10, 20}), {2, 4, 30, 60});
    // groups = 2 with 2 outputs per group: channel block g sees only input block g.
    Geo h = geo1(1, 1, 1, 0);
    h.in_c = 2;
    h.out_c = 4;
    h.groups = 2;
    expect_vec("groups", run_fwd(h, {1, 2, 3, 4}, nullptr, {10, 100}), {10, 20, 300, 400});
  }
  // A window entirely in padding holds the bias: in 1, k 1, pad 1 -> [b, w x + b, b].
  {
    const std::vector<float> b{0.25f};
    expect_vec("padding-only windows", run_fwd(geo1(1, 1, 1, 1), {2}, &b, {3}),
               {0.25f, 6.25f, 0.25f});
  }
  // Upstream bug 25: k > in + 2p gives an EMPTY output, not a phantom 1-wide one.
  {
    tlrt_status st;
    const std::vector<float> y = run_fwd(geo1(2, 3, 1, 0), {1, 1, 1}, nullptr, {1, 2}, &st);
    TH_CHECK_MSG(st == TLRT_OK && y.empty(), "k > in + 2p: status %d, %zu outputs", (int)st,
                 y.size());
    const Grads gr = run_bwd(geo1(2, 3, 1, 0), {1, 2, 3}, {1, 2}, {});
    expect_vec("empty-output d_kernel", gr.dw, {0, 0, 0});
    expect_vec("empty-output d_bias", gr.db, {0});
    expect_vec("empty-output d_input", gr.dx, {0, 0});
  }
  // Transposed: 2x upsampling, in [1 2], k 2, s 2 -> [w0 w1 2w0 2w1].
  expect_vec("convtranspose upsample", run_fwd(geo1(2, 2, 2, 0, 1, true), {3, 5}, nullptr, {1, 2}),
             {3, 5, 6, 10});
  // Upstream bug 26 (size order): in 2, k 3, s 2, p 2: (1 * 2 + 3) - 4 = 1 (c2be276: 3).
  // out[0] = x0 w2 + x1 w0 = 1 * 3 + 10 * 1.
  expect_vec("convtranspose size order",
             run_fwd(geo1(2, 3, 2, 2, 1, true), {1, 2, 3}, nullptr, {1, 10}), {13});
  // Transposed with bias and overlap: in [1 2], k 3, s 1 -> [w0, 2w0 + w1, 2w1 + w2, 2w2] + b.
  {
    const std::vector<float> b{1};
    expect_vec("convtranspose overlap",
               run_fwd(geo1(2, 3, 1, 0, 1, true), {1, 2, 3}, &b, {1, 2}), {2, 5, 8, 7});
  }
  // Saturation: in 1, k 1, p 1: (0 + 1) - 2 < 0 -> empty.
  {
    tlrt_status st;
    const std::vector<float> y = run_fwd(geo1(1, 1, 1, 1, 1, true), {1}, nullptr, {1}, &st);
    TH_CHECK_MSG(st == TLRT_OK && y.empty(), "saturated transposed: %d, %zu", (int)st, y.size());
  }
  // Stride 0 and a zero kernel extent are errors (never device UB).
  {
    tlrt_status st;
    run_fwd(geo1(4, 2, 0, 0), {1, 1}, nullptr, {1, 2, 3, 4}, &st);
    TH_CHECK_MSG(st == TLRT_ERR_INVALID_ARGUMENT, "stride 0: %s", tlrt_status_string(st));
    run_fwd(geo1(4, 2, 0, 0, 1, true), {1, 1}, nullptr, {1, 2, 3, 4}, &st);
    TH_CHECK_MSG(st == TLRT_ERR_INVALID_ARGUMENT, "transposed stride 0: %s",
                 tlrt_status_string(st));
    run_fwd(geo1(4, 0, 1, 0), {}, nullptr, {1, 2, 3, 4}, &st);
    TH_CHECK_MSG(st == TLRT_ERR_INVALID_ARGUMENT, "kernel 0: %s", tlrt_status_string(st));
  }
  // Backward known answer: x [1 2 3], w [1 2], dy [1 1] -> dw [3 5], db [2], dx [1 3 2].
  {
    const Grads gr = run_bwd(geo1(3, 2, 1, 0), {1, 2}, {1, 2, 3}, {1, 1});
    expect_vec("bwd d_kernel", gr.dw, {3, 5});
    expect_vec("bwd d_bias", gr.db, {2});
    expect_vec("bwd d_input", gr.dx, {1, 3, 2});
  }
}

void extents() {
  int n = 0;
  for (uint64_t in = 0; in <= 9; ++in)
    for (uint64_t k = 1; k <= 4; ++k)
      for (uint64_t s = 1; s <= 3; ++s)
        for (uint64_t p = 0; p <= 2; ++p)
          for (uint64_t d = 1; d <= 2; ++d)
            for (int tr = 0; tr < 2; ++tr) {
              Geo g = geo1(in, k, s, p, d, tr != 0);
              const uint64_t want = cref::out_extents(g)[0];
              std::vector<float> w(k, 1.0f), x(in, 1.0f);
              tlrt_status st;
              const std::vector<float> y = run_fwd(g, w, nullptr, x, &st);
              TH_CHECK_MSG(st == TLRT_OK && y.size() == want,
                           "extent in %llu k %llu s %llu p %llu d %llu transposed %d: status %s, "
                           "%zu outputs, want %llu",
                           (unsigned long long)in, (unsigned long long)k, (unsigned long long)s,
                           (unsigned long long)p, (unsigned long long)d, tr,
                           tlrt_status_string(st), y.size(), (unsigned long long)want);
              ++n;
            }
  std::printf("extents: %d geometries\n", n);
}

double g_worst = 0.0;

void check_ratio(const std::string &what, const std::vector<float> &got, const cref::Ref &ref) {
  size_t bad;
  const double r = cref::worst_ratio(got, ref, &bad);
  g_worst = std::max(g_worst, r);
  TH_CHECK_MSG(bad == SIZE_MAX, "%s: index %zu got %.9g want %.17g (bound ratio %.3g)",
               what.c_str(), bad, bad < got.size() ? (double)got[bad] : 0.0,
               bad < ref.v.size() ? ref.v[bad] : 0.0, r);
}

// One random problem: forward and backward (all three, then each alone) against the reference.
void random_problem(const Geo &g, uint64_t salt, bool with_bias, th::Dist dist) {
  const std::string what = std::string(g.transposed ? "convtranspose" : "conv") + " rank " +
                           std::to_string(g.rank()) + " salt " + std::to_string(salt) + " " +
                           th::dist_name(dist);
  const std::vector<float> w = th::make(dist, cref::kernel_elems(g), salt * 4 + 1);
  const std::vector<float> x = th::make(dist, cref::input_elems(g), salt * 4 + 2);
  const std::vector<float> b = th::make(dist, g.out_c, salt * 4 + 3);
  const std::vector<float> dy = th::make(th::Dist::Uniform, cref::output_elems(g), salt * 4 + 4);
  const std::vector<float> none;
  const std::vector<float> y = run_fwd(g, w, with_bias ? &b : nullptr, x);
  check_ratio(what + " forward", y, cref::forward(g, w, with_bias ? b : none, x));
  // Bitwise repeatability.
  expect_vec((what + " repeat").c_str(), run_fwd(g, w, with_bias ? &b : nullptr, x), y);
  const Grads all = run_bwd(g, w, x, dy);
  // For the transposed geometry the reference's "kernel gradient" sums dy_conv * x_conv over
  // the same terms: grad_kernel(g, x, dy) enumerates (output = transposed output index) terms.
  check_ratio(what + " d_kernel", all.dw, cref::grad_kernel(g, x, dy));
  check_ratio(what + " d_bias", all.db, cref::grad_bias(g, dy));
  check_ratio(what + " d_input", all.dx, cref::grad_input(g, w, dy));
  expect_vec((what + " d_kernel alone").c_str(), run_bwd(g, w, x, dy, 1).dw, all.dw);
  expect_vec((what + " d_bias alone").c_str(), run_bwd(g, w, x, dy, 2).db, all.db);
  expect_vec((what + " d_input alone").c_str(), run_bwd(g, w, x, dy, 4).dx, all.dx);
}

void random_problems() {
  th::Rng rng(77);
  auto pick = [&](uint64_t lo, uint64_t hi) { return lo + rng.gen() % (hi - lo + 1); };
  int count = 0;
  for (int it = 0; it < 160; ++it) {
    Geo g;
    const uint32_t rank = it < 40 ? 1 : it < 100 ? 2 : it < 140 ? 3 : 4;
    g.transposed = (it % 2) == 1;
    g.groups = pick(1, 3);
    g.in_c = g.groups * pick(1, 3);
    g.out_c = g.groups * pick(1, 3);
    g.batch = pick(1, 3);
    const bool direct = it % 11 == 0;
    for (uint32_t a = 0; a < rank; ++a) {
      const uint64_t small = rank >= 3 ? 5 : 9;
      g.k.push_back(direct ? 1 : pick(1, rank >= 3 ? 3 : 4));
      g.s.push_back(direct ? 1 : pick(1, 3));
      g.p.push_back(direct ? 0 : pick(0, 2));
      g.d.push_back(pick(1, 2));
      g.in.push_back(pick(1, small));
    }
    if (cref::output_elems(g) == 0) continue;
    const th::Dist dist = it % 5 == 4 ? th::Dist::Wide : th::Dist::Uniform;
    random_problem(g, (uint64_t)it, it % 3 != 0, dist);
    ++count;
  }
  // The bench shapes, reduced: 3x3 pad 1 on (2, 8, 12, 12); 4x4 stride 2 pad 1 transposed.
  Geo c;
  c.batch = 2;
  c.in_c = c.out_c = 8;
  c.in = {12, 12};
  c.k = {3, 3};
  c.s = {1, 1};
  c.p = {1, 1};
  c.d = {1, 1};
  random_problem(c, 1001, true, th::Dist::Uniform);
  Geo t = c;
  t.transposed = true;
  t.in = {7, 7};
  t.k = {4, 4};
  t.s = {2, 2};
  random_problem(t, 1002, true, th::Dist::Uniform);
  count += 2;
  std::printf("random: %d problems, worst error / bound = %.3g\n", count, g_worst);
}

void two_d_wrappers() {
  Geo g;
  g.batch = 2;
  g.in_c = 4;
  g.out_c = 6;
  g.groups = 2;
  g.in = {7, 6};
  g.k = {3, 2};
  g.s = {2, 1};
  g.p = {1, 0};
  g.d = {1, 2};
  for (int tr = 0; tr < 2; ++tr) {
    g.transposed = tr != 0;
    const std::vector<float> w = th::make(th::Dist::Uniform, cref::kernel_elems(g), 11);
    const std::vector<float> x = th::make(th::Dist::Uniform, cref::input_elems(g), 12);
    const std::vector<float> b = th::make(th::Dist::Uniform, g.out_c, 13);
    const std::vector<float> dy = th::make(th::Dist::Uniform, cref::output_elems(g), 14);
    Buf W(th::upload(w)), X(th::upload(x)), B(th::upload(b)), DY(th::upload(dy));
    Buf Y, DW, DB, DX;
    if (!g.transposed) {
      TH_OK(tlrt_conv2d_fwd(W.get(), B.get(), X.get(), 2, 4, 7, 6, 6, 3, 2, 2, 1, 1, 0, 1, 2, 2,
                            Y.out()));
      TH_OK(tlrt_conv2d_bwd(W.get(), X.get(), DY.get(), 2, 4, 7, 6, 6, 3, 2, 2, 1, 1, 0, 1, 2, 2,
                            DW.out(), DB.out(), DX.out()));
    } else {
      TH_OK(tlrt_convtranspose2d_fwd(W.get(), B.get(), X.get(), 2, 4, 7, 6, 6, 3, 2, 2, 1, 1, 0,
                                     1, 2, 2, Y.out()));
      TH_OK(tlrt_convtranspose2d_bwd(W.get(), X.get(), DY.get(), 2, 4, 7, 6, 6, 3, 2, 2, 1, 1, 0,
                                     1, 2, 2, DW.out(), DB.out(), DX.out()));
    }
    const char *nm = g.transposed ? "convtranspose2d" : "conv2d";
    expect_vec(nm, th::download(Y.get()), run_fwd(g, w, &b, x));
    const Grads r = run_bwd(g, w, x, dy);
    expect_vec(nm, th::download(DW.get()), r.dw);
    expect_vec(nm, th::download(DB.get()), r.db);
    expect_vec(nm, th::download(DX.get()), r.dx);
  }
}

// ---- geometry as data ------------------------------------------------------------------------

static_assert(sizeof(tlrt_conv_geometry) == 368, "46 uint64_t fields");
static_assert(offsetof(tlrt_conv_geometry, struct_size) == 0 &&
                  offsetof(tlrt_conv_geometry, rank) == 8 &&
                  offsetof(tlrt_conv_geometry, groups) == 40 &&
                  offsetof(tlrt_conv_geometry, in_spatial) == 48 &&
                  offsetof(tlrt_conv_geometry, kernel_size) == 112 &&
                  offsetof(tlrt_conv_geometry, dilation) == 304,
              "the layout of abi/tlrt_conv.h");

tlrt_conv_geometry to_struct(const Geo &g) {
  tlrt_conv_geometry s;
  std::memset(&s, 0, sizeof s);
  s.struct_size = sizeof s;
  s.rank = g.rank();
  s.batch = g.batch;
  s.in_channels = g.in_c;
  s.out_channels = g.out_c;
  s.groups = g.groups;
  for (uint32_t a = 0; a < g.rank(); ++a) {
    s.in_spatial[a] = g.in[a];
    s.kernel_size[a] = g.k[a];
    s.stride[a] = g.s[a];
    s.padding[a] = g.p[a];
    s.dilation[a] = g.d[a];
  }
  return s;
}

// One geometry through both forms: forward (with and without bias) and each backward output
// bitwise equal; the query's shape and count equal the output's size and the header's formulas.
void struct_matches(const Geo &g, uint64_t salt) {
  const std::string what = std::string(g.transposed ? "convtranspose" : "conv") + "_geom rank " +
                           std::to_string(g.rank()) + " salt " + std::to_string(salt);
  const tlrt_conv_geometry s = to_struct(g);
  // The query.
  uint64_t dims[TLRT_CONV_MAX_DIMS];
  uint32_t rank = 0;
  uint64_t n = 0;
  TH_OK(g.transposed ? tlrt_convtranspose_output_dims(&s, dims, TLRT_CONV_MAX_DIMS, &rank, &n)
                     : tlrt_conv_output_dims(&s, dims, TLRT_CONV_MAX_DIMS, &rank, &n));
  const std::vector<uint64_t> ext = cref::out_extents(g);
  bool shape_ok = rank == g.rank() + 2 && dims[0] == g.batch && dims[1] == g.out_c &&
                  n == cref::output_elems(g);
  for (uint32_t a = 0; shape_ok && a < g.rank(); ++a) shape_ok = dims[a + 2] == ext[a];
  TH_CHECK_MSG(shape_ok, "%s: output dims query (rank %u, %llu elements) disagrees with the "
               "header's formulas", what.c_str(), rank, (unsigned long long)n);
  // Forward.
  const std::vector<float> w = th::make(th::Dist::Uniform, cref::kernel_elems(g), salt * 4 + 1);
  const std::vector<float> x = th::make(th::Dist::Uniform, cref::input_elems(g), salt * 4 + 2);
  const std::vector<float> b = th::make(th::Dist::Uniform, g.out_c, salt * 4 + 3);
  const std::vector<float> dy = th::make(th::Dist::Uniform, n, salt * 4 + 4);
  Buf W(th::upload(w)), X(th::upload(x)), B(th::upload(b)), DY(th::upload(dy));
  for (const bool bias : {true, false}) {
    Buf Y;
    TH_OK(g.transposed
              ? tlrt_convtranspose_fwd_geom(W.get(), bias ? B.get() : nullptr, X.get(), &s, Y.out())
              : tlrt_conv_fwd_geom(W.get(), bias ? B.get() : nullptr, X.get(), &s, Y.out()));
    if (!Y.get()) continue;
    uint64_t size = 0;
    TH_OK(tlrt_buffer_size(Y.get(), &size));
    TH_CHECK_MSG(size == n, "%s: output of %llu elements, the query says %llu", what.c_str(),
                 (unsigned long long)size, (unsigned long long)n);
    expect_vec((what + (bias ? " forward" : " forward without bias")).c_str(),
               th::download(Y.get()), run_fwd(g, w, bias ? &b : nullptr, x));
  }
  // Backward: all three outputs, and each alone.
  const Grads want = run_bwd(g, w, x, dy);
  for (int mask : {7, 1, 2, 4}) {
    Buf DW, DB, DX;
    tlrt_buffer **pw = (mask & 1) ? DW.out() : nullptr, **pb = (mask & 2) ? DB.out() : nullptr,
                **px = (mask & 4) ? DX.out() : nullptr;
    TH_OK(g.transposed ? tlrt_convtranspose_bwd_geom(W.get(), X.get(), DY.get(), &s, pw, pb, px)
                       : tlrt_conv_bwd_geom(W.get(), X.get(), DY.get(), &s, pw, pb, px));
    if (mask & 1) expect_vec((what + " d_kernel").c_str(), th::download(DW.get()), want.dw);
    if (mask & 2) expect_vec((what + " d_bias").c_str(), th::download(DB.get()), want.db);
    if (mask & 4) expect_vec((what + " d_input").c_str(), th::download(DX.get()), want.dx);
  }
}

void geometry_structs() {
  std::vector<Geo> geos;
  auto add = [&](uint64_t batch, uint64_t in_c, uint64_t out_c, uint64_t groups,
                 std::vector<uint64_t> in, std::vector<uint64_t> k, std::vector<uint64_t> s,
                 std::vector<uint64_t> p, std::vector<uint64_t> d) {
    Geo g;
    g.batch = batch;
    g.in_c = in_c;
    g.out_c = out_c;
    g.groups = groups;
    g.in = in;
    g.k = k;
    g.s = s;
    g.p = p;
    g.d = d;
    geos.push_back(g);
  };
  add(2, 3, 4, 1, {9}, {3}, {1}, {0}, {1});                            // rank 1, plain
  add(1, 2, 2, 1, {11}, {3}, {2}, {2}, {3});                           // stride, pad, dilation
  add(2, 4, 6, 2, {7, 6}, {3, 2}, {2, 1}, {1, 0}, {1, 2});             // rank 2, groups
  add(1, 3, 6, 3, {8, 8}, {3, 3}, {1, 1}, {1, 1}, {1, 1});             // rank 2, depthwise
  add(1, 2, 3, 1, {5, 4, 6}, {2, 3, 2}, {1, 2, 2}, {1, 1, 0}, {2, 1, 1});  // rank 3
  add(2, 4, 4, 4, {4, 3, 5}, {3, 1, 2}, {2, 1, 1}, {0, 1, 1}, {1, 1, 3});  // rank 3, depthwise
  add(1, 2, 2, 1, {3, 4}, {4, 2}, {1, 1}, {0, 0}, {2, 1});             // empty conv output
  uint64_t salt = 5000;
  for (const Geo &base : geos)
    for (const bool tr : {false, true}) {
      Geo g = base;
      g.transposed = tr;
      struct_matches(g, salt++);
    }
  // A query on a geometry whose output is empty but whose input is huge: dims, no overflow.
  Geo big = geo1(uint64_t{1} << 40, 1, 1, 0);
  big.batch = 0;
  const tlrt_conv_geometry s = to_struct(big);
  uint64_t dims[TLRT_CONV_MAX_DIMS];
  uint32_t rank = 0;
  uint64_t n = 9;
  TH_OK(tlrt_conv_output_dims(&s, dims, TLRT_CONV_MAX_DIMS, &rank, &n));
  TH_CHECK(rank == 3 && n == 0 && dims[0] == 0 && dims[2] == uint64_t{1} << 40);
}

void empty_cases() {
  // batch 0: empty output; backward gives zeros of the kernel's and bias's shape, empty d_input.
  {
    Geo g = geo1(4, 2, 1, 0);
    g.batch = 0;
    tlrt_status st;
    TH_CHECK(run_fwd(g, {1, 2}, nullptr, {}, &st).empty() && st == TLRT_OK);
    const Grads r = run_bwd(g, {1, 2}, {}, {});
    expect_vec("batch 0 d_kernel", r.dw, {0, 0});
    expect_vec("batch 0 d_bias", r.db, {0});
    TH_CHECK(r.dx.empty());
  }
  // in_channels 0: the output is the bias broadcast; d_bias sums dy; the rest is empty.
  {
    Geo g = geo1(3, 2, 1, 0);
    g.in_c = 0;
    g.out_c = 2;
    g.batch = 2;
    const std::vector<float> b{1.5f, -2.0f};
    expect_vec("in_channels 0", run_fwd(g, {}, &b, {}),
               {1.5f, 1.5f, -2, -2, 1.5f, 1.5f, -2, -2});
    expect_vec("in_channels 0, no bias", run_fwd(g, {}, nullptr, {}), std::vector<float>(8, 0));
    const Grads r = run_bwd(g, {}, {}, {1, 2, 3, 4, 5, 6, 7, 8});
    expect_vec("in_channels 0 d_bias", r.db, {14, 22});
    TH_CHECK(r.dw.empty() && r.dx.empty());
  }
  // in_channels 0 with kernel extents whose product alone is beyond 64 bits: the kernel's exact
  // count is 0 (a zero channel factor), so an empty kernel matches and the output is the bias
  // (regression: found by fuzz_conv_geometry, the kernel was rejected as "beyond 64 bits").
  {
    Geo g;
    g.in_c = 0;
    g.out_c = 2;
    g.batch = 2;
    g.in = {1, 1};
    g.k = {uint64_t{1} << 40, uint64_t{1} << 40};
    g.s = {1, 1};
    g.p = {uint64_t{1} << 39, uint64_t{1} << 39};
    g.d = {1, 1};
    const std::vector<float> b{0.5f, -1.0f};
    tlrt_status st = TLRT_ERR_INTERNAL;
    const std::vector<float> y = run_fwd(g, {}, &b, {}, &st);
    TH_CHECK_MSG(st == TLRT_OK, "in_channels 0, huge kernel extents: %s", tlrt_status_string(st));
    expect_vec("in_channels 0, huge kernel extents", y,
               {0.5f, 0.5f, 0.5f, 0.5f, -1, -1, -1, -1, 0.5f, 0.5f, 0.5f, 0.5f, -1, -1, -1, -1});
  }
  // An empty input with padding: in 0, k 1, p 1 -> 2 outputs holding the bias.
  {
    const std::vector<float> b{4};
    expect_vec("empty input with padding", run_fwd(geo1(0, 1, 1, 1), {7}, &b, {}), {4, 4});
    const Grads r = run_bwd(geo1(0, 1, 1, 1), {7}, {}, {1, 2});
    expect_vec("empty input d_kernel", r.dw, {0});
    expect_vec("empty input d_bias", r.db, {3});
    TH_CHECK(r.dx.empty());
  }
  // out_channels 0: empty output.
  {
    Geo g = geo1(3, 1, 1, 0);
    g.out_c = 0;
    tlrt_status st;
    TH_CHECK(run_fwd(g, {}, nullptr, {1, 2, 3}, &st).empty() && st == TLRT_OK);
    const Grads r = run_bwd(g, {}, {1, 2, 3}, {});
    expect_vec("out_channels 0 d_input", r.dx, {0, 0, 0});
  }
}

void special_values() {
  const float nan = NAN, inf = INFINITY;
  // NaN at x[2] poisons exactly the windows covering it (k 2: outputs 1 and 2).
  {
    const std::vector<float> y = run_fwd(geo1(5, 2, 1, 0), {1, 1}, nullptr, {1, 2, nan, 4, 5});
    TH_CHECK(y.size() == 4 && !std::isnan(y[0]) && std::isnan(y[1]) && std::isnan(y[2]) &&
             !std::isnan(y[3]) && y[0] == 3 && y[3] == 9);
  }
  // inf in the input: inf where covered with a positive weight, NaN where +inf meets -inf.
  {
    const std::vector<float> y = run_fwd(geo1(3, 2, 1, 0), {1, -1}, nullptr, {inf, inf, 1});
    TH_CHECK(y.size() == 2 && std::isnan(y[0]) && std::isinf(y[1]) && y[1] > 0);
  }
  // Padding cells are zeros that take part in the products (as in PyTorch): an infinite weight
  // over padding gives NaN (inf * 0): in 1, k 3, p 1, w [inf 1 inf]; finite weights do not.
  {
    const std::vector<float> y = run_fwd(geo1(1, 3, 1, 1), {inf, 1, inf}, nullptr, {2});
    TH_CHECK_MSG(y.size() == 1 && std::isnan(y[0]), "inf weight over padding: %s",
                 y.empty() ? "-" : th::hex(y[0]).c_str());
    expect_vec("finite weights over padding", run_fwd(geo1(1, 3, 1, 1), {5, 1, 7}, nullptr, {2}),
               {2});
  }
  // NaN in the kernel poisons every output of its channel only.
  {
    Geo g = geo1(3, 1, 1, 0);
    g.out_c = 2;
    const std::vector<float> y = run_fwd(g, {nan, 2}, nullptr, {1, 2, 3});
    TH_CHECK(y.size() == 6 && std::isnan(y[0]) && std::isnan(y[2]) && y[3] == 2 && y[5] == 6);
  }
  // Backward with NaN in dy: d_bias NaN for that channel, d_input NaN where reached.
  {
    const Grads r = run_bwd(geo1(3, 2, 1, 0), {1, 2}, {1, 2, 3}, {nan, 1});
    TH_CHECK(r.db.size() == 1 && std::isnan(r.db[0]));
    TH_CHECK(r.dx.size() == 3 && std::isnan(r.dx[0]) && std::isnan(r.dx[1]) && r.dx[2] == 2);
    TH_CHECK(r.dw.size() == 2 && std::isnan(r.dw[0]) && std::isnan(r.dw[1]));
  }
  // Edge-valued random inputs: NaN/inf positions agree with the float64 reference.
  Geo g;
  g.batch = 2;
  g.in_c = 2;
  g.out_c = 2;
  g.in = {6, 5};
  g.k = {2, 3};
  g.s = {1, 2};
  g.p = {1, 1};
  g.d = {1, 1};
  random_problem(g, 501, true, th::Dist::Edge);
}

}  // namespace

int main() {
  known_answers();
  extents();
  random_problems();
  two_d_wrappers();
  empty_cases();
  special_values();
  geometry_structs();
  return th::finish("test_conv");
}
