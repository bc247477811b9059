// Known answers of the autograd tape (abi/tlrt_tape.h) on the CPU: node ids, shapes, values equal
// to the ops' own results bit for bit, hand-computed gradients, accumulation over two backwards,
// reset, zeros for leaves without a gradient, the max ties rule, rank-0 and empty cases, the
// release of workspace and intermediate gradients (allocator telemetry), the all-or-nothing
// backward, convolution, pooling and attention (hand-computed answers, the fused ops' own results
// bit for bit, multi-head attention against float64; the view-reading attention nodes against
// their ops bit for bit, fused and separate), and 1000-step training loops of a small MLP
// and a small conv net (SGD through tlrt_axpy) whose live bytes and handles stay flat after
// warm-up while their losses fall.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "harness.hpp"
#include "tlrt_testing.h"

namespace {

using th::Buf;

const tlrt_device kCpu = TLRT_DEVICE_CPU;

struct Tape {
  tlrt_tape *t = nullptr;
  Tape() { TH_OK(tlrt_tape_new(kCpu, &t)); }
  ~Tape() { tlrt_tape_free(t); }
};

uint64_t leaf(tlrt_tape *t, const std::vector<float> &v, std::vector<uint64_t> dims, bool rg) {
  Buf b(th::upload(v));
  uint64_t id = UINT64_MAX;
  TH_OK(tlrt_tape_leaf(t, b.get(), dims.data(), (uint32_t)dims.size(), rg, &id));
  return id;  // the tape holds its own reference: b may go
}

std::vector<float> value(tlrt_tape *t, uint64_t id) {
  Buf v;
  TH_OK(tlrt_tape_value(t, id, v.out()));
  return v.get() ? th::download(v.get()) : std::vector<float>{};
}
std::vector<float> grad(tlrt_tape *t, uint64_t id) {
  Buf g;
  TH_OK(tlrt_tape_grad(t, id, g.out()));
  return g.get() ? th::download(g.get()) : std::vector<float>{};
}

bool same(const std::vector<float> &a, const std::vector<float> &b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!th::same_bits(a[i], b[i])) return false;
  return true;
}

#define EXPECT_VEC(got, ...)                                                         \
  do {                                                                               \
    const std::vector<float> g_ = (got), w_ = __VA_ARGS__;                           \
    std::string s_;                                                                  \
    for (float f : g_) s_ += th::hex(f) + " ";                                       \
    TH_CHECK_MSG(same(g_, w_), "%s = [%s], expected %s", #got, s_.c_str(), #__VA_ARGS__); \
  } while (0)

void test_ids_shapes_values() {
  Tape T;
  tlrt_tape *t = T.t;
  uint64_t count = 99;
  TH_OK(tlrt_tape_node_count(t, &count));
  TH_CHECK(count == 0);
  tlrt_device dev = 99;
  TH_OK(tlrt_tape_device(t, &dev));
  TH_CHECK(dev == kCpu);
  const uint64_t a = leaf(t, {1, 2, 3, 4, 5, 6}, {2, 3}, true);
  const uint64_t b = leaf(t, {6, 5, 4, 3, 2, 1}, {2, 3}, false);
  // Ids hold the node's index in their low 32 bits, the tape and its generation above.
  TH_CHECK((a & 0xFFFFFFFFu) == 0 && (b & 0xFFFFFFFFu) == 1 && a >> 32 == b >> 32 && a >> 32 != 0);
  uint64_t s = 0, tr = 0, r = 0;
  TH_OK(tlrt_tape_mul(t, a, b, &s));
  TH_CHECK(s == a + 2);
  EXPECT_VEC(value(t, s), {6, 10, 12, 12, 10, 6});
  TH_OK(tlrt_tape_transpose2d(t, s, &tr));
  uint64_t dims[8] = {0};
  uint32_t rank = 0;
  bool rg = false;
  TH_OK(tlrt_tape_shape(t, tr, dims, &rank, &rg));
  TH_CHECK(rank == 2 && dims[0] == 3 && dims[1] == 2 && rg);
  TH_OK(tlrt_tape_shape(t, b, dims, &rank, &rg));
  TH_CHECK(rank == 2 && !rg);
  TH_OK(tlrt_tape_reduce_sum(t, tr, &r));
  TH_OK(tlrt_tape_shape(t, r, dims, &rank, nullptr));
  TH_CHECK(rank == 0);
  EXPECT_VEC(value(t, r), {56});
  TH_OK(tlrt_tape_node_count(t, &count));
  TH_CHECK(count == 5);

  // Values are the ops' own results, bit for bit (random inputs through a few ops).
  th::Rng rng(3);
  std::vector<float> xv = rng.vec(20, -3, 3);
  const uint64_t x = leaf(t, xv, {4, 5}, true);
  uint64_t sm = 0, ge = 0;
  TH_OK(tlrt_tape_softmax(t, x, &sm));
  TH_OK(tlrt_tape_gelu(t, sm, &ge));
  Buf xb(th::upload(xv)), ref1, ref2;
  TH_OK(tlrt_softmax(xb.get(), 4, 5, ref1.out()));
  TH_OK(tlrt_gelu(ref1.get(), ref2.out()));
  TH_CHECK(same(value(t, ge), th::download(ref2.get())));
}

void test_known_gradients() {
  Tape T;
  tlrt_tape *t = T.t;
  // L = sum(a * b + a) with a = (1, 2, 3), b = (4, 5, 6): dL/da = b + 1, dL/db = a.
  const uint64_t a = leaf(t, {1, 2, 3}, {3}, true), b = leaf(t, {4, 5, 6}, {3}, true);
  uint64_t p, q, L;
  TH_OK(tlrt_tape_mul(t, a, b, &p));
  TH_OK(tlrt_tape_add(t, p, a, &q));
  TH_OK(tlrt_tape_reduce_sum(t, q, &L));
  EXPECT_VEC(value(t, L), {38});
  TH_OK(tlrt_tape_backward(t, L));
  EXPECT_VEC(grad(t, a), {5, 6, 7});
  EXPECT_VEC(grad(t, b), {1, 2, 3});
  // A second backward accumulates.
  TH_OK(tlrt_tape_backward(t, L));
  EXPECT_VEC(grad(t, a), {10, 12, 14});
  EXPECT_VEC(grad(t, b), {2, 4, 6});
  // Backward from an intermediate node with a seed: d(a*b)/da . seed = b * seed.
  Buf seed(th::upload({1, -1, 0.5f}));
  TH_OK(tlrt_tape_backward_seed(t, p, seed.get()));
  EXPECT_VEC(grad(t, a), {14, 7, 17});
  // Backward from a leaf: its gradient is the seed.
  TH_OK(tlrt_tape_backward_seed(t, b, seed.get()));
  EXPECT_VEC(grad(t, b), {4, 1, 8});  // (2, 4, 6) + a * seed + seed
  // Reset: everything goes, indices restart at 0 under a new generation.
  const uint64_t before_reset = b;
  TH_OK(tlrt_tape_reset(t));
  uint64_t count = 9;
  TH_OK(tlrt_tape_node_count(t, &count));
  TH_CHECK(count == 0);
  const uint64_t z = leaf(t, {1, 1}, {2}, true);
  TH_CHECK((z & 0xFFFFFFFFu) == 0 && z != (before_reset & ~0xFFFFFFFFull));
  EXPECT_VEC(grad(t, z), {0, 0});  // no backward yet: zeros
}

void test_composites_known() {
  Tape T;
  tlrt_tape *t = T.t;
  // linear: x (1, 2) = (1, 2), W (3, 2) rows (1,0), (0,1), (1,1), b = (0.5, 0, -1)
  // y = x W^T + b = (1.5, 2, 2).
  const uint64_t x = leaf(t, {1, 2}, {1, 2}, false);
  const uint64_t W = leaf(t, {1, 0, 0, 1, 1, 1}, {3, 2}, true);
  const uint64_t b = leaf(t, {0.5f, 0, -1}, {3}, true);
  uint64_t y, loss;
  TH_OK(tlrt_tape_linear(t, x, W, b, &y));
  EXPECT_VEC(value(t, y), {1.5f, 2, 2});
  // mse against (1.5, 0, 4): mean((0, 2, -2)^2) = 8/3; dL/dy = 2 (y - t) / 3 = (0, 4/3, -4/3).
  const uint64_t tg = leaf(t, {1.5f, 0, 4}, {1, 3}, false);
  TH_OK(tlrt_tape_mse_loss(t, y, tg, &loss));
  EXPECT_VEC(value(t, loss), {8.0f / 3.0f});
  TH_OK(tlrt_tape_backward(t, loss));
  const std::vector<float> gb = grad(t, b), gW = grad(t, W);
  TH_CHECK(gb.size() == 3 && gb[0] == 0 && std::fabs(gb[1] - 4.0f / 3) < 1e-6f &&
           std::fabs(gb[2] + 4.0f / 3) < 1e-6f);
  // dW[o, i] = dy[o] x[i]
  TH_CHECK(gW.size() == 6 && gW[0] == 0 && gW[1] == 0 && std::fabs(gW[2] - 4.0f / 3) < 1e-6f &&
           std::fabs(gW[3] - 8.0f / 3) < 1e-6f && std::fabs(gW[5] + 8.0f / 3) < 1e-6f);

  // cross entropy of uniform logits over 4 classes is log 4, gradient (p - onehot) / batch.
  TH_OK(tlrt_tape_reset(t));
  const uint64_t lg = leaf(t, std::vector<float>(8, 0.25f), {2, 4}, true);
  const uint64_t labels[2] = {1, 3};
  uint64_t ce;
  TH_OK(tlrt_tape_cross_entropy(t, lg, labels, &ce));
  const std::vector<float> cv = value(t, ce);
  TH_CHECK(cv.size() == 1 && std::fabs(cv[0] - std::log(4.0f)) < 1e-6f);
  TH_OK(tlrt_tape_backward(t, ce));
  const std::vector<float> gl = grad(t, lg);
  for (int i = 0; i < 8; ++i) {
    const float want = (0.25f - ((i == 1 || i == 7) ? 1.0f : 0.0f)) / 2;
    TH_CHECK_MSG(std::fabs(gl[i] - want) < 1e-6f, "ce grad[%d] = %g, expected %g", i, gl[i], want);
  }

  // batchnorm: each channel normalised over the batch; with gamma 2, beta 1 the column (1, 3)
  // becomes 1 + 2 (-1, 1) (eps 0 here) and a constant column gives beta... with eps > 0.
  TH_OK(tlrt_tape_reset(t));
  const uint64_t bx = leaf(t, {1, 5, 3, 5}, {2, 2}, true);
  const uint64_t g2 = leaf(t, {2, 2}, {2}, true), b1 = leaf(t, {1, 1}, {2}, true);
  uint64_t bn;
  TH_OK(tlrt_tape_batchnorm(t, bx, g2, b1, 0.0, &bn));
  const std::vector<float> bv = value(t, bn);
  TH_CHECK(bv.size() == 4 && bv[0] == -1 && bv[2] == 3);
  TH_CHECK(std::isnan(bv[1]) && std::isnan(bv[3]));  // var 0, eps 0: 0 * inf, as PyTorch
}

void test_max_ties_and_special() {
  Tape T;
  tlrt_tape *t = T.t;
  // Row maxima with ties share g equally: rows (1, 3, 3), (2, 0, -1), (+0, -0, -5) ("+0 and -0
  // tie"); seed (6, 6, 6): gradients (0, 3, 3), (6, 0, 0), (3, 3, 0).
  const uint64_t x = leaf(t, {1, 3, 3, 2, 0, -1, 0.0f, -0.0f, -5}, {3, 3}, true);
  uint64_t m;
  TH_OK(tlrt_tape_reduce_max_axis1(t, x, &m));
  Buf seed(th::upload({6, 6, 6}));
  TH_OK(tlrt_tape_backward_seed(t, m, seed.get()));
  EXPECT_VEC(grad(t, x), {0, 3, 3, 6, 0, 0, 3, 3, 0});
  // Column maxima: columns (1, 2, 0), (3, 0, -0), (3, -1, -5), seed (1, 2, 4).
  TH_OK(tlrt_tape_reset(t));
  const uint64_t x2 = leaf(t, {1, 3, 3, 2, 0, -1, 0.0f, -0.0f, -5}, {3, 3}, true);
  TH_OK(tlrt_tape_reduce_max_axis0(t, x2, &m));
  Buf seed2(th::upload({1, 2, 4}));
  TH_OK(tlrt_tape_backward_seed(t, m, seed2.get()));
  EXPECT_VEC(grad(t, x2), {0, 2, 4, 1, 0, 0, 0, 0, 0});

  // Rank-0 softmax: 1 with gradient 0; log-softmax 0.
  TH_OK(tlrt_tape_reset(t));
  const uint64_t s = leaf(t, {2.5f}, {}, true);
  uint64_t y, ly;
  TH_OK(tlrt_tape_softmax(t, s, &y));
  EXPECT_VEC(value(t, y), {1});
  TH_OK(tlrt_tape_backward(t, y));
  EXPECT_VEC(grad(t, s), {0});
  TH_OK(tlrt_tape_log_softmax(t, s, &ly));
  EXPECT_VEC(value(t, ly), {0});

  // Empty: mean of an empty leaf is NaN and its gradient is empty; cross entropy over a batch
  // of 0 is NaN.
  TH_OK(tlrt_tape_reset(t));
  const uint64_t e = leaf(t, {}, {0, 3}, true);
  uint64_t me;
  TH_OK(tlrt_tape_reduce_mean(t, e, &me));
  const std::vector<float> mv = value(t, me);
  TH_CHECK(mv.size() == 1 && std::isnan(mv[0]));
  TH_OK(tlrt_tape_backward(t, me));
  TH_CHECK(grad(t, e).empty());
  uint64_t ce;
  TH_OK(tlrt_tape_cross_entropy(t, e, nullptr, &ce));
  const std::vector<float> cv = value(t, ce);
  TH_CHECK(cv.size() == 1 && std::isnan(cv[0]));

  // NaN propagates into the gradient of relu's input.
  TH_OK(tlrt_tape_reset(t));
  const uint64_t nx = leaf(t, {NAN, 1, -1}, {3}, true);
  uint64_t r, rs;
  TH_OK(tlrt_tape_relu(t, nx, &r));
  TH_OK(tlrt_tape_reduce_sum(t, r, &rs));
  TH_OK(tlrt_tape_backward(t, rs));
  const std::vector<float> ng = grad(t, nx);
  TH_CHECK(ng.size() == 3 && std::isnan(ng[0]) && ng[1] == 1 && ng[2] == 0);

  // A graph that does not require a gradient: backward is accepted and does nothing.
  TH_OK(tlrt_tape_reset(t));
  const uint64_t c = leaf(t, {1, 2}, {2}, false);
  uint64_t cs;
  TH_OK(tlrt_tape_reduce_sum(t, c, &cs));
  bool rg = true;
  uint64_t dims[8];
  uint32_t rank;
  TH_OK(tlrt_tape_shape(t, cs, dims, &rank, &rg));
  TH_CHECK(!rg);
  TH_OK(tlrt_tape_backward(t, cs));
}

std::vector<uint64_t> shape_of(tlrt_tape *t, uint64_t id) {
  uint64_t dims[8] = {0};
  uint32_t rank = 0;
  TH_OK(tlrt_tape_shape(t, id, dims, &rank, nullptr));
  return std::vector<uint64_t>(dims, dims + rank);
}

// Convolution: hand-computed values and gradients; values and gradients of a random geometry
// (stride, padding, dilation, groups, bias) equal to tlrt_conv2d_fwd / tlrt_conv2d_bwd bit for bit
// (the tape makes exactly those calls); the N-D form in 1-D and 3-D; empty outputs.
void test_conv_known() {
  Tape T;
  tlrt_tape *t = T.t;
  // x (1, 1, 3, 3) = 1..9, w (1, 1, 2, 2) = (1, 0; 0, -1), b = 0.5: out[i, j] = x[i, j] -
  // x[i + 1, j + 1] + 0.5 = -3.5. L = sum(out): dw[a, b] = sum of the x cells it meets, db = 4,
  // dx[r, c] = sum of the w entries that touch x[r, c].
  const uint64_t x = leaf(t, {1, 2, 3, 4, 5, 6, 7, 8, 9}, {1, 1, 3, 3}, true);
  const uint64_t w = leaf(t, {1, 0, 0, -1}, {1, 1, 2, 2}, true);
  const uint64_t b = leaf(t, {0.5f}, {1}, true);
  uint64_t y, L;
  TH_OK(tlrt_tape_conv2d(t, x, w, b, 1, 1, 0, 0, 1, 1, 1, &y));
  TH_CHECK((shape_of(t, y) == std::vector<uint64_t>{1, 1, 2, 2}));
  EXPECT_VEC(value(t, y), {-3.5f, -3.5f, -3.5f, -3.5f});
  TH_OK(tlrt_tape_reduce_sum(t, y, &L));
  TH_OK(tlrt_tape_backward(t, L));
  EXPECT_VEC(grad(t, w), {12, 16, 24, 28});
  EXPECT_VEC(grad(t, b), {4});
  EXPECT_VEC(grad(t, x), {1, 1, 0, 1, 0, -1, 0, -1, -1});

  // 1-D through the N-D call: x (1, 1, 5) = 1..5, w = (1, 1, 1), padding 1: moving sums
  // (3, 6, 9, 12, 9); stride 2: (3, 9, 9).
  TH_OK(tlrt_tape_reset(t));
  const uint64_t x1 = leaf(t, {1, 2, 3, 4, 5}, {1, 1, 5}, true);
  const uint64_t w1 = leaf(t, {1, 1, 1}, {1, 1, 3}, true);
  const uint64_t one[1] = {1}, two[1] = {2};
  uint64_t c1, c2;
  TH_OK(tlrt_tape_conv(t, x1, w1, TLRT_TAPE_NONE, one, one, nullptr, 1, &c1));
  EXPECT_VEC(value(t, c1), {3, 6, 9, 12, 9});
  TH_OK(tlrt_tape_conv(t, x1, w1, TLRT_TAPE_NONE, two, one, one, 1, &c2));
  TH_CHECK((shape_of(t, c2) == std::vector<uint64_t>{1, 1, 3}));
  EXPECT_VEC(value(t, c2), {3, 9, 9});

  // Random geometries: the tape's value and gradients are the ops' own, bit for bit.
  th::Rng rng(21);
  struct G2 { uint64_t N, C, H, W, Co, kh, kw, sh, sw, ph, pw, dh, dw, g; bool bias; };
  for (const G2 &g : {G2{2, 4, 7, 6, 6, 3, 2, 2, 1, 1, 0, 1, 2, 2, true},
                      G2{1, 3, 5, 5, 3, 3, 3, 1, 1, 1, 1, 1, 1, 3, false},
                      G2{3, 2, 4, 9, 4, 1, 4, 1, 3, 0, 2, 1, 1, 1, true}}) {
    TH_OK(tlrt_tape_reset(t));
    const std::vector<float> xv = rng.vec(g.N * g.C * g.H * g.W, -1, 1);
    const std::vector<float> wv = rng.vec(g.Co * (g.C / g.g) * g.kh * g.kw, -1, 1);
    const std::vector<float> bv = rng.vec(g.Co, -1, 1);
    const uint64_t xi = leaf(t, xv, {g.N, g.C, g.H, g.W}, true);
    const uint64_t wi = leaf(t, wv, {g.Co, g.C / g.g, g.kh, g.kw}, true);
    const uint64_t bi = g.bias ? leaf(t, bv, {g.Co}, true) : TLRT_TAPE_NONE;
    uint64_t yi;
    TH_OK(tlrt_tape_conv2d(t, xi, wi, bi, g.sh, g.sw, g.ph, g.pw, g.dh, g.dw, g.g, &yi));
    Buf X(th::upload(xv)), W(th::upload(wv)), B(th::upload(bv)), ref, dW, dB, dX;
    TH_OK(tlrt_conv2d_fwd(W.get(), g.bias ? B.get() : nullptr, X.get(), g.N, g.C, g.H, g.W, g.Co,
                          g.kh, g.kw, g.sh, g.sw, g.ph, g.pw, g.dh, g.dw, g.g, ref.out()));
    const std::vector<float> rv = th::download(ref.get());
    TH_CHECK(same(value(t, yi), rv));
    const std::vector<uint64_t> ys = shape_of(t, yi);
    TH_CHECK(ys.size() == 4 && ys[0] == g.N && ys[1] == g.Co &&
             ys[0] * ys[1] * ys[2] * ys[3] == rv.size());
    const std::vector<float> sv = rng.vec(rv.size(), -1, 1);
    Buf S(th::upload(sv));
    TH_OK(tlrt_tape_backward_seed(t, yi, S.get()));
    TH_OK(tlrt_conv2d_bwd(W.get(), X.get(), S.get(), g.N, g.C, g.H, g.W, g.Co, g.kh, g.kw, g.sh,
                          g.sw, g.ph, g.pw, g.dh, g.dw, g.g, dW.out(), dB.out(), dX.out()));
    TH_CHECK(same(grad(t, xi), th::download(dX.get())));
    TH_CHECK(same(grad(t, wi), th::download(dW.get())));
    if (g.bias) TH_CHECK(same(grad(t, bi), th::download(dB.get())));
  }
  // 3-D through the N-D call, against tlrt_conv_fwd.
  {
    TH_OK(tlrt_tape_reset(t));
    const uint64_t in[3] = {4, 3, 5}, k[3] = {2, 3, 2}, st[3] = {1, 2, 1}, pd[3] = {1, 1, 0},
                   dl[3] = {2, 1, 1};
    const std::vector<float> xv = rng.vec(2 * 2 * 60, -1, 1), wv = rng.vec(3 * 2 * 12, -1, 1);
    const uint64_t xi = leaf(t, xv, {2, 2, 4, 3, 5}, false);
    const uint64_t wi = leaf(t, wv, {3, 2, 2, 3, 2}, true);
    uint64_t yi;
    TH_OK(tlrt_tape_conv(t, xi, wi, TLRT_TAPE_NONE, st, pd, dl, 1, &yi));
    Buf X(th::upload(xv)), W(th::upload(wv)), ref;
    TH_OK(tlrt_conv_fwd(W.get(), nullptr, X.get(), 2, 2, 3, in, 3, k, st, pd, dl, 1, ref.out()));
    TH_CHECK(same(value(t, yi), th::download(ref.get())));
    // out extents: (4 + 2 - 3) / 1 + 1 = 4, (3 + 2 - 3) / 2 + 1 = 2, 5 - 2 + 1 = 4
    TH_CHECK((shape_of(t, yi) == std::vector<uint64_t>{2, 3, 4, 2, 4}));
  }
  // A window larger than the padded input: an empty output, zero gradients (x, w, b).
  TH_OK(tlrt_tape_reset(t));
  const uint64_t xe = leaf(t, rng.vec(4, -1, 1), {1, 1, 2, 2}, true);
  const uint64_t we = leaf(t, rng.vec(9, -1, 1), {1, 1, 3, 3}, true);
  const uint64_t be = leaf(t, {2}, {1}, true);
  uint64_t ye;
  TH_OK(tlrt_tape_conv2d(t, xe, we, be, 1, 1, 0, 0, 1, 1, 1, &ye));
  TH_CHECK((shape_of(t, ye) == std::vector<uint64_t>{1, 1, 0, 0}));
  Buf es(th::upload({}));
  TH_OK(tlrt_tape_backward_seed(t, ye, es.get()));
  EXPECT_VEC(grad(t, xe), {0, 0, 0, 0});
  EXPECT_VEC(grad(t, we), std::vector<float>(9, 0.0f));
  EXPECT_VEC(grad(t, be), {0});
  // Batch 0: an empty output of shape (0, C_out, ...).
  const uint64_t x0 = leaf(t, {}, {0, 1, 4, 4}, true);
  uint64_t y0;
  TH_OK(tlrt_tape_conv2d(t, x0, we, be, 1, 1, 1, 1, 1, 1, 1, &y0));
  TH_CHECK((shape_of(t, y0) == std::vector<uint64_t>{0, 1, 4, 4}));
  // A NaN in x poisons the outputs whose window covers it (and only those).
  TH_OK(tlrt_tape_reset(t));
  const uint64_t xn = leaf(t, {NAN, 1, 1, 1, 1, 1, 1, 1, 1}, {1, 1, 3, 3}, true);
  const uint64_t wn = leaf(t, {1, 1, 1, 1}, {1, 1, 2, 2}, true);
  uint64_t yn;
  TH_OK(tlrt_tape_conv2d(t, xn, wn, TLRT_TAPE_NONE, 1, 1, 0, 0, 1, 1, 1, &yn));
  const std::vector<float> nv = value(t, yn);
  TH_CHECK(nv.size() == 4 && std::isnan(nv[0]) && nv[1] == 4 && nv[2] == 4 && nv[3] == 4);
}

// Pooling: hand-computed windows, ties (first wins), NaN selection, average with and without
// padding counted; the gradients route to the selected cells / spread over the windows.
void test_pool_known() {
  Tape T;
  tlrt_tape *t = T.t;
  // x (1, 1, 4, 4), windows 2x2 stride 2: maxima 6, 8, 14, 16 (cells 5, 7, 13, 15).
  std::vector<float> xv(16);
  for (int i = 0; i < 16; ++i) xv[i] = (float)(i + 1);
  const uint64_t x = leaf(t, xv, {1, 1, 4, 4}, true);
  uint64_t m, a, ap;
  TH_OK(tlrt_tape_maxpool2d(t, x, 2, 2, 2, 2, 0, 0, &m));
  TH_CHECK((shape_of(t, m) == std::vector<uint64_t>{1, 1, 2, 2}));
  EXPECT_VEC(value(t, m), {6, 8, 14, 16});
  Buf s4(th::upload({1, 2, 3, 4}));
  TH_OK(tlrt_tape_backward_seed(t, m, s4.get()));
  EXPECT_VEC(grad(t, x), {0, 0, 0, 0, 0, 1, 0, 2, 0, 0, 0, 0, 0, 3, 0, 4});
  // Average 2x2 stride 2: (1+2+5+6)/4 = 3.5, 5.5, 11.5, 13.5; gradient seed / 4 to each cell.
  TH_OK(tlrt_tape_avgpool2d(t, x, 2, 2, 2, 2, 0, 0, true, &a));
  EXPECT_VEC(value(t, a), {3.5f, 5.5f, 11.5f, 13.5f});
  TH_OK(tlrt_tape_reset(t));
  const uint64_t x2 = leaf(t, xv, {1, 1, 4, 4}, true);
  TH_OK(tlrt_tape_avgpool2d(t, x2, 2, 2, 2, 2, 0, 0, true, &a));
  TH_OK(tlrt_tape_backward_seed(t, a, s4.get()));
  EXPECT_VEC(grad(t, x2), {0.25f, 0.25f, 0.5f, 0.5f, 0.25f, 0.25f, 0.5f, 0.5f, 0.75f, 0.75f, 1,
                           1, 0.75f, 0.75f, 1, 1});
  // Padding 1, kernel 2, stride 2 on (1, 1, 2, 2) = (1, 2; 3, 4): every window holds one real
  // cell; count_include_pad divides by 4, otherwise by 1.
  TH_OK(tlrt_tape_reset(t));
  const uint64_t x3 = leaf(t, {1, 2, 3, 4}, {1, 1, 2, 2}, true);
  TH_OK(tlrt_tape_avgpool2d(t, x3, 2, 2, 2, 2, 1, 1, true, &a));
  TH_OK(tlrt_tape_avgpool2d(t, x3, 2, 2, 2, 2, 1, 1, false, &ap));
  EXPECT_VEC(value(t, a), {0.25f, 0.5f, 0.75f, 1});
  EXPECT_VEC(value(t, ap), {1, 2, 3, 4});
  TH_OK(tlrt_tape_maxpool2d(t, x3, 2, 2, 2, 2, 1, 1, &m));
  EXPECT_VEC(value(t, m), {1, 2, 3, 4});
  // Ties: the first maximum takes the gradient (+0 and -0 tie too); a NaN is selected.
  TH_OK(tlrt_tape_reset(t));
  const uint64_t x4 = leaf(t, {5, 5, 1, 5, -0.0f, 0.0f, -1, -2, 3, NAN, 7, 1}, {1, 3, 2, 2}, true);
  TH_OK(tlrt_tape_maxpool2d(t, x4, 2, 2, 1, 1, 0, 0, &m));
  const std::vector<float> mv = value(t, m);
  TH_CHECK(mv.size() == 3 && mv[0] == 5 && th::same_bits(mv[1], -0.0f) && std::isnan(mv[2]));
  Buf s3(th::upload({1, 2, 3}));
  TH_OK(tlrt_tape_backward_seed(t, m, s3.get()));
  EXPECT_VEC(grad(t, x4), {1, 0, 0, 0, 2, 0, 0, 0, 0, 3, 0, 0});
  // A kernel larger than the padded input: empty output; its gradient is +0.
  TH_OK(tlrt_tape_reset(t));
  const uint64_t x5 = leaf(t, {1, 2, 3, 4}, {1, 1, 2, 2}, true);
  TH_OK(tlrt_tape_maxpool2d(t, x5, 3, 3, 1, 1, 0, 0, &m));
  TH_CHECK((shape_of(t, m) == std::vector<uint64_t>{1, 1, 0, 0}));
  Buf es(th::upload({}));
  TH_OK(tlrt_tape_backward_seed(t, m, es.get()));
  EXPECT_VEC(grad(t, x5), {0, 0, 0, 0});
  // Size 1: a 1x1 window is the identity, gradient passes through.
  TH_OK(tlrt_tape_reset(t));
  const uint64_t x6 = leaf(t, {-7}, {1, 1, 1, 1}, true);
  TH_OK(tlrt_tape_avgpool2d(t, x6, 1, 1, 1, 1, 0, 0, true, &a));
  EXPECT_VEC(value(t, a), {-7});
  TH_OK(tlrt_tape_backward(t, a));
  EXPECT_VEC(grad(t, x6), {1});
}

// Attention: one key (out = v, gradients (0, 0, seed)); the tape against the fused ops bit for
// bit with a mask whose host reference is dropped after recording (the tape retains it); a node
// used as q, k and v; multi-head attention against a float64 evaluation; a composite that fails
// after recording 19 nodes leaves the tape as it was.
void test_attention_known() {
  Tape T;
  tlrt_tape *t = T.t;
  th::Rng rng(31);
  {
    const std::vector<float> qv = rng.vec(6, -1, 1), kv = rng.vec(6, -1, 1), vv = rng.vec(6, -1, 1);
    const uint64_t q = leaf(t, qv, {2, 1, 3}, true), k = leaf(t, kv, {2, 1, 3}, true);
    const uint64_t v = leaf(t, vv, {2, 1, 3}, true);
    uint64_t o;
    TH_OK(tlrt_tape_flash_attention(t, q, k, v, nullptr, 0.5, false, -INFINITY, &o));
    EXPECT_VEC(value(t, o), vv);
    const std::vector<float> sv = rng.vec(6, -1, 1);
    Buf S(th::upload(sv));
    TH_OK(tlrt_tape_backward_seed(t, o, S.get()));
    EXPECT_VEC(grad(t, v), sv);
    for (float g : grad(t, q)) TH_CHECK(g == 0);
    for (float g : grad(t, k)) TH_CHECK(g == 0);
  }
  {
    TH_OK(tlrt_tape_reset(t));
    const uint64_t bh = 2, n = 5, d = 4;
    const std::vector<float> qv = rng.vec(bh * n * d, -1, 1), kv = rng.vec(bh * n * d, -1, 1),
                             vv = rng.vec(bh * n * d, -1, 1);
    std::vector<float> mv(n * n);
    for (float &m : mv) m = rng.uniform(0, 1) < 0.3f ? 0.0f : 1.0f;
    const uint64_t q = leaf(t, qv, {bh, n, d}, true), k = leaf(t, kv, {bh, n, d}, true);
    const uint64_t v = leaf(t, vv, {bh, n, d}, false);
    tlrt_buffer *mask = th::upload(mv);
    uint64_t o;
    TH_OK(tlrt_tape_flash_attention(t, q, k, v, mask, 0.4, true, -1000.0, &o));
    tlrt_buffer_free(mask);  // the tape keeps its own reference for the backward
    Buf Q(th::upload(qv)), K(th::upload(kv)), V(th::upload(vv)), M(th::upload(mv)), out, lse;
    TH_OK(tlrt_flash_attention_fwd(Q.get(), K.get(), V.get(), M.get(), bh, n, d, 0.4, true,
                                   -1000.0, out.out(), lse.out()));
    TH_CHECK(same(value(t, o), th::download(out.get())));
    const std::vector<float> sv = rng.vec(bh * n * d, -1, 1);
    Buf S(th::upload(sv)), dq, dk, dv;
    TH_OK(tlrt_tape_backward_seed(t, o, S.get()));
    TH_OK(tlrt_flash_attention_bwd(Q.get(), K.get(), V.get(), M.get(), S.get(), out.get(),
                                   lse.get(), bh, n, d, 0.4, true, -1000.0, dq.out(), dk.out(),
                                   dv.out()));
    TH_CHECK(same(grad(t, q), th::download(dq.get())));
    TH_CHECK(same(grad(t, k), th::download(dk.get())));
    // Self-attention of one node: its gradient is dq + dk + dv (summed in that order).
    TH_OK(tlrt_tape_reset(t));
    const uint64_t x = leaf(t, qv, {bh, n, d}, true);
    TH_OK(tlrt_tape_flash_attention(t, x, x, x, nullptr, 0.4, false, -INFINITY, &o));
    Buf o2, l2, a, b, c, s1, s2;
    TH_OK(tlrt_flash_attention_fwd(Q.get(), Q.get(), Q.get(), nullptr, bh, n, d, 0.4, false,
                                   -INFINITY, o2.out(), l2.out()));
    TH_OK(tlrt_tape_backward_seed(t, o, S.get()));
    TH_OK(tlrt_flash_attention_bwd(Q.get(), Q.get(), Q.get(), nullptr, S.get(), o2.get(), l2.get(),
                                   bh, n, d, 0.4, false, -INFINITY, a.out(), b.out(), c.out()));
    // The tape sums a node's contributions in parent order: (dq + dk) + dv.
    TH_OK(tlrt_add(a.get(), b.get(), s1.out()));
    TH_OK(tlrt_add(s1.get(), c.get(), s2.out()));
    TH_CHECK(same(grad(t, x), th::download(s2.get())));
  }

  // Multi-head attention against float64: batch 2, n 3, d_model 4, 2 heads, biases, both causal
  // settings.
  for (int causal = 0; causal < 2; ++causal) {
    TH_OK(tlrt_tape_reset(t));
    const uint64_t B = 2, n = 3, dm = 4, H = 2, dh = 2;
    const std::vector<float> xv = rng.vec(B * n * dm, -1, 1);
    std::vector<std::vector<float>> W(4), Bs(4);
    uint64_t wid[4], bid[4], x = leaf(t, xv, {B, n, dm}, true);
    for (int i = 0; i < 4; ++i) {
      W[i] = rng.vec(dm * dm, -0.7f, 0.7f);
      Bs[i] = rng.vec(dm, -0.3f, 0.3f);
      wid[i] = leaf(t, W[i], {dm, dm}, true);
      bid[i] = leaf(t, Bs[i], {dm}, true);
    }
    uint64_t before = 0, after = 0, o;
    TH_OK(tlrt_tape_node_count(t, &before));
    TH_OK(tlrt_tape_multi_head_attention(t, x, wid[0], wid[1], wid[2], wid[3], bid[0], bid[1],
                                         bid[2], bid[3], H, causal != 0, &o));
    TH_OK(tlrt_tape_node_count(t, &after));
    TH_CHECK_MSG(after - before == 19, "multi_head_attention recorded %llu nodes",
                 (unsigned long long)(after - before));
    TH_CHECK((shape_of(t, o) == std::vector<uint64_t>{B, n, dm}));
    // Reference: projections, per-head softmax(q k^T / sqrt(dh)) v, output projection.
    auto proj = [&](int i, uint64_t row, uint64_t f) {
      double acc = Bs[i][f];
      for (uint64_t j = 0; j < dm; ++j) acc += (double)xv[row * dm + j] * W[i][f * dm + j];
      return acc;
    };
    std::vector<double> A(B * n * dm);
    for (uint64_t bb = 0; bb < B; ++bb)
      for (uint64_t h = 0; h < H; ++h)
        for (uint64_t i = 0; i < n; ++i) {
          std::vector<double> sc(n, -INFINITY);
          double mx = -INFINITY, sum = 0;
          for (uint64_t j = 0; j < n; ++j) {
            if (causal && j > i) continue;
            double dot = 0;
            for (uint64_t e = 0; e < dh; ++e)
              dot += proj(0, bb * n + i, h * dh + e) * proj(1, bb * n + j, h * dh + e);
            sc[j] = dot / std::sqrt((double)dh);
            mx = std::max(mx, sc[j]);
          }
          for (uint64_t j = 0; j < n; ++j) sum += std::exp(sc[j] - mx);
          for (uint64_t e = 0; e < dh; ++e) {
            double acc = 0;
            for (uint64_t j = 0; j < n; ++j)
              acc += std::exp(sc[j] - mx) / sum * proj(2, bb * n + j, h * dh + e);
            A[(bb * n + i) * dm + h * dh + e] = acc;
          }
        }
    const std::vector<float> got = value(t, o);
    TH_CHECK(got.size() == B * n * dm);
    for (uint64_t r = 0; r < B * n && got.size() == B * n * dm; ++r)
      for (uint64_t f = 0; f < dm; ++f) {
        double want = Bs[3][f];
        for (uint64_t j = 0; j < dm; ++j) want += A[r * dm + j] * W[3][f * dm + j];
        TH_CHECK_MSG(std::fabs(got[r * dm + f] - want) <= 1e-5 * (1 + std::fabs(want)),
                     "mha (causal %d) out[%llu, %llu] = %.8g, float64 %.8g", causal,
                     (unsigned long long)r, (unsigned long long)f, got[r * dm + f], want);
      }
    // Without biases: the same 19 nodes (a linear node takes its bias or none).
    TH_OK(tlrt_tape_node_count(t, &before));
    TH_OK(tlrt_tape_multi_head_attention(t, x, wid[0], wid[1], wid[2], wid[3], TLRT_TAPE_NONE,
                                         TLRT_TAPE_NONE, TLRT_TAPE_NONE, TLRT_TAPE_NONE, 1,
                                         causal != 0, &o));
    TH_OK(tlrt_tape_node_count(t, &after));
    TH_CHECK(after - before == 19);
  }
  // d_head 257 > 256: the attention op refuses it after the projections were recorded; the
  // composite is rolled back.
  TH_OK(tlrt_tape_reset(t));
  const uint64_t dm = 257;
  const uint64_t x = leaf(t, rng.vec(dm, -1, 1), {1, 1, dm}, true);
  const uint64_t w = leaf(t, rng.vec(dm * dm, -0.1f, 0.1f), {dm, dm}, true);
  uint64_t count = 0, o = 5;
  TH_STATUS(tlrt_tape_multi_head_attention(t, x, w, w, w, w, TLRT_TAPE_NONE, TLRT_TAPE_NONE,
                                           TLRT_TAPE_NONE, TLRT_TAPE_NONE, 1, false, &o),
            TLRT_ERR_INVALID_ARGUMENT);
  TH_CHECK(o == 0);
  TH_OK(tlrt_tape_node_count(t, &count));
  TH_CHECK(count == 2);
}

// attention_qkv and attention (grouped heads, views read in place): one node each, values and
// gradients the ops' own (tlrt_attention_fwd / _bwd) bit for bit, the fused node's gradient one
// buffer written by one call; and the fused node equals the separate one on the same values.
void test_attention_views_known() {
  Tape T;
  tlrt_tape *t = T.t;
  th::Rng rng(43);
  const uint64_t B = 2, Tn = 5, hq = 4, hkv = 2, d = 3, W = (hq + 2 * hkv) * d;
  const std::vector<float> xv = rng.vec(B * Tn * W, -1, 1), wv = rng.vec(B * Tn * hq * d, -1, 1);
  for (bool causal : {false, true}) {
    TH_OK(tlrt_tape_reset(t));
    const uint64_t x = leaf(t, xv, {B, Tn, W}, true);
    uint64_t before = 0, after = 0, o = 0;
    TH_OK(tlrt_tape_node_count(t, &before));
    TH_OK(tlrt_tape_attention_qkv(t, x, hq, hkv, causal, 0.5, &o));
    TH_OK(tlrt_tape_node_count(t, &after));
    TH_CHECK(after - before == 1);
    uint64_t dims[TLRT_TAPE_MAX_RANK] = {0};
    uint32_t rank = 0;
    TH_OK(tlrt_tape_shape(t, o, dims, &rank, nullptr));
    TH_CHECK(rank == 3 && dims[0] == B && dims[1] == Tn && dims[2] == hq * d);
    // The op on the fused buffer.
    tlrt_attention_geometry g{};
    g.struct_size = sizeof g;
    g.batch = B, g.heads_q = hq, g.heads_kv = hkv, g.len_q = g.len_k = Tn, g.d = d;
    g.q_stride_batch = g.k_stride_batch = g.v_stride_batch = Tn * W;
    g.q_stride_token = g.k_stride_token = g.v_stride_token = W;
    g.q_stride_head = g.k_stride_head = g.v_stride_head = d;
    g.k_offset = hq * d, g.v_offset = (hq + hkv) * d;
    Buf X(th::upload(xv)), O, L, S(th::upload(wv)), G(th::upload(std::vector<float>(xv.size(), 0.0f)));
    TH_OK(tlrt_attention_fwd(X.get(), X.get(), X.get(), nullptr, &g, 0.5, causal, -INFINITY,
                             O.out(), L.out()));
    TH_OK(tlrt_attention_bwd(X.get(), X.get(), X.get(), nullptr, S.get(), O.get(), L.get(), &g, 0.5,
                             causal, -INFINITY, G.get(), G.get(), G.get(), &g));
    TH_CHECK(same(value(t, o), th::download(O.get())));
    TH_OK(tlrt_tape_backward_seed(t, o, S.get()));
    const std::vector<float> gx = grad(t, x);
    TH_CHECK(same(gx, th::download(G.get())));
    // The same values as separate nodes q (B, T, hq d), k, v (B, T, hkv d): the same bits.
    std::vector<float> qv, kv, vv;
    for (uint64_t r = 0; r < B * Tn; ++r)
      for (uint64_t c = 0; c < W; ++c)
        (c < hq * d ? qv : c < (hq + hkv) * d ? kv : vv).push_back(xv[r * W + c]);
    TH_OK(tlrt_tape_reset(t));
    const uint64_t q = leaf(t, qv, {B, Tn, hq * d}, true), k = leaf(t, kv, {B, Tn, hkv * d}, true),
                   v = leaf(t, vv, {B, Tn, hkv * d}, true);
    uint64_t o2 = 0;
    TH_OK(tlrt_tape_attention(t, q, k, v, hq, hkv, causal, 0.5, &o2));
    TH_CHECK(same(value(t, o2), th::download(O.get())));
    TH_OK(tlrt_tape_backward_seed(t, o2, S.get()));
    std::vector<float> gq, gk, gv;
    for (uint64_t r = 0; r < B * Tn && gx.size() == xv.size(); ++r)
      for (uint64_t c = 0; c < W; ++c)
        (c < hq * d ? gq : c < (hq + hkv) * d ? gk : gv).push_back(gx[r * W + c]);
    TH_CHECK(same(grad(t, q), gq) && same(grad(t, k), gk) && same(grad(t, v), gv));
  }
  // Cross-attention with len_q != len_k and a decode step: the op's values.
  for (uint64_t tq : {uint64_t{1}, uint64_t{3}}) {
    TH_OK(tlrt_tape_reset(t));
    const uint64_t tk = 7;
    const std::vector<float> qv = rng.vec(B * tq * hq * d, -1, 1), kv = rng.vec(B * tk * hkv * d, -1, 1);
    const uint64_t q = leaf(t, qv, {B, tq, hq * d}, true), k = leaf(t, kv, {B, tk, hkv * d}, true);
    uint64_t o = 0;
    TH_OK(tlrt_tape_attention(t, q, k, k, hq, hkv, true, 0.4, &o));
    tlrt_attention_geometry g{};
    g.struct_size = sizeof g;
    g.batch = B, g.heads_q = hq, g.heads_kv = hkv, g.len_q = tq, g.len_k = tk, g.d = d;
    g.q_stride_batch = tq * hq * d, g.q_stride_token = hq * d, g.q_stride_head = d;
    g.k_stride_batch = g.v_stride_batch = tk * hkv * d;
    g.k_stride_token = g.v_stride_token = hkv * d, g.k_stride_head = g.v_stride_head = d;
    Buf Q(th::upload(qv)), K(th::upload(kv)), O, L;
    TH_OK(tlrt_attention_fwd(Q.get(), K.get(), K.get(), nullptr, &g, 0.4, true, -INFINITY, O.out(),
                             L.out()));
    TH_CHECK(same(value(t, o), th::download(O.get())));
  }
}

// SiLU, RMS norm and dropout nodes: values and gradients are the ops' own results bit for bit (the
// backward kernels, the mask recomputed from the key), the documented special cases, shapes.
void test_silu_rms_norm_dropout() {
  Tape T;
  tlrt_tape *t = T.t;
  th::Rng rng(41);
  // silu: value tlrt_silu, gradient tlrt_silu_bwd(x, seed).
  {
    std::vector<float> xv = rng.vec(12, -6, 6);
    xv[0] = 0.0f;
    xv[1] = -INFINITY;
    xv[2] = INFINITY;
    const uint64_t x = leaf(t, xv, {3, 4}, true);
    uint64_t y = 0;
    TH_OK(tlrt_tape_silu(t, x, &y));
    const std::vector<float> sv = rng.vec(12);
    Buf xb(th::upload(xv)), sb(th::upload(sv)), ry, rg;
    TH_OK(tlrt_silu(xb.get(), ry.out()));
    TH_OK(tlrt_silu_bwd(xb.get(), sb.get(), rg.out()));
    TH_CHECK(same(value(t, y), th::download(ry.get())));
    TH_OK(tlrt_tape_backward_seed(t, y, sb.get()));
    TH_CHECK(same(grad(t, x), th::download(rg.get())));
    TH_CHECK(th::bits_of(value(t, y)[1]) == 0x80000000u && value(t, y)[2] == INFINITY);
  }
  // rms norm, with gamma and without: the node's value is tlrt_rms_norm_fwd's y, the gradients
  // tlrt_rms_norm_bwd's from the forward's inv_rms (x of rank 3: rows = 2 * 3).
  for (bool with_gamma : {true, false}) {
    TH_OK(tlrt_tape_reset(t));
    const std::vector<float> xv = rng.vec(24, -2, 2), gv = rng.vec(4, 0.5f, 1.5f),
                             sv = rng.vec(24);
    const uint64_t x = leaf(t, xv, {2, 3, 4}, true);
    const uint64_t g = with_gamma ? leaf(t, gv, {4}, true) : TLRT_TAPE_NONE;
    uint64_t y = 0;
    TH_OK(tlrt_tape_rms_norm(t, x, g, 1e-5, &y));
    uint64_t dims[8], rank = 0;
    uint32_t r32 = 0;
    TH_OK(tlrt_tape_shape(t, y, dims, &r32, nullptr));
    rank = r32;
    TH_CHECK(rank == 3 && dims[0] == 2 && dims[1] == 3 && dims[2] == 4);
    Buf xb(th::upload(xv)), gb(with_gamma ? th::upload(gv) : nullptr), sb(th::upload(sv)), ry,
        ri, rdx, rdg;
    TH_OK(tlrt_rms_norm_fwd(xb.get(), gb.get(), 6, 4, 1e-5, ry.out(), ri.out()));
    TH_OK(tlrt_rms_norm_bwd(sb.get(), xb.get(), gb.get(), ri.get(), 6, 4, rdx.out(),
                            with_gamma ? rdg.out() : nullptr));
    TH_CHECK(same(value(t, y), th::download(ry.get())));
    TH_OK(tlrt_tape_backward_seed(t, y, sb.get()));
    TH_CHECK(same(grad(t, x), th::download(rdx.get())));
    if (with_gamma) TH_CHECK(same(grad(t, g), th::download(rdg.get())));
    // A second backward accumulates (the saved inv_rms is reused).
    TH_OK(tlrt_tape_backward_seed(t, y, sb.get()));
    std::vector<float> twice = th::download(rdx.get());
    for (float &v : twice) v = v + v;
    TH_CHECK(same(grad(t, x), twice));
  }
  // rms norm on one column: y = x / sqrt(x^2 + eps) (the sign for large |x|); gradient 0 there.
  {
    TH_OK(tlrt_tape_reset(t));
    const uint64_t x = leaf(t, {3.0f, -4.0f}, {2, 1}, true);
    uint64_t y = 0;
    TH_OK(tlrt_tape_rms_norm(t, x, TLRT_TAPE_NONE, 0.0, &y));
    const std::vector<float> v = value(t, y);
    TH_CHECK(v.size() == 2 && std::fabs(v[0] - 1.0f) < 1e-6f && std::fabs(v[1] + 1.0f) < 1e-6f);
    Buf sb(th::upload({1.0f, 1.0f}));
    TH_OK(tlrt_tape_backward_seed(t, y, sb.get()));
    for (float gv : grad(t, x)) TH_CHECK_MSG(std::fabs(gv) < 1e-6f, "d sign(x) / dx = %g", gv);
  }
  // dropout: y = x * m, m = bernoulli_mask(1 - p, key) * (1 / (1 - p)) rounded to float32; the
  // gradient g * m with the same m (recomputed), in every backward.
  {
    TH_OK(tlrt_tape_reset(t));
    const uint64_t n = 10000;
    std::vector<float> xv = rng.vec(n, -3, 3);
    xv[5] = INFINITY;
    xv[6] = NAN;
    const uint64_t x = leaf(t, xv, {100, 100}, true);
    const double p = 0.1;
    const uint64_t key = 0xDEADBEEFull;
    uint64_t y = 0, y2 = 0, y3 = 0;
    TH_OK(tlrt_tape_dropout(t, x, p, key, &y));
    Buf mb;
    TH_OK(tlrt_bernoulli_mask(kCpu, n, 1.0 - (double)(float)p, key, mb.out()));
    const std::vector<float> mask = th::download(mb.get());
    const float scale = (float)(1.0 / (1.0 - (double)(float)p));
    std::vector<float> want(n), m(n);
    uint64_t kept = 0;
    for (uint64_t i = 0; i < n; ++i) {
      m[i] = mask[i] != 0.0f ? scale : 0.0f;
      want[i] = xv[i] * m[i];
      kept += mask[i] != 0.0f;
    }
    TH_CHECK(same(value(t, y), want));
    // About 90% kept: within 6 standard deviations (30) of 9000.
    TH_CHECK_MSG(kept > 8820 && kept < 9180, "dropout p = 0.1 kept %llu of 10000",
                 (unsigned long long)kept);
    const std::vector<float> sv = rng.vec(n);
    Buf sb(th::upload(sv));
    TH_OK(tlrt_tape_backward_seed(t, y, sb.get()));
    std::vector<float> gw(n), g2(n);
    for (uint64_t i = 0; i < n; ++i) {
      gw[i] = sv[i] * m[i];
      g2[i] = gw[i] + gw[i];
    }
    TH_CHECK(same(grad(t, x), gw));
    TH_OK(tlrt_tape_backward_seed(t, y, sb.get()));
    TH_CHECK(same(grad(t, x), g2));
    // Another key, another mask; the same key, the same values.
    TH_OK(tlrt_tape_dropout(t, x, p, key + n, &y2));
    TH_OK(tlrt_tape_dropout(t, x, p, key, &y3));
    TH_CHECK(!same(value(t, y2), want) && same(value(t, y3), want));
    // p = 0: the identity (x's value itself), gradient g.
    TH_OK(tlrt_tape_reset(t));
    const uint64_t x0 = leaf(t, xv, {n}, true);
    uint64_t i0 = 0;
    TH_OK(tlrt_tape_dropout(t, x0, 0.0, key, &i0));
    TH_CHECK(same(value(t, i0), xv));
    TH_OK(tlrt_tape_backward_seed(t, i0, sb.get()));
    TH_CHECK(same(grad(t, x0), sv));
    // p close to 1 (0.999): the scale is (float)(1 / (1 - (float)0.999)); rank 0 and empty x.
    TH_OK(tlrt_tape_reset(t));
    const uint64_t xs = leaf(t, {2.0f}, {}, true), xe = leaf(t, {}, {0}, true);
    uint64_t ys = 0, ye = 0;
    TH_OK(tlrt_tape_dropout(t, xs, 0.999, 5, &ys));
    const float sc = (float)(1.0 / (1.0 - (double)(float)0.999));
    const float vs = value(t, ys)[0];
    TH_CHECK_MSG(th::bits_of(vs) == 0u || vs == 2.0f * sc, "dropout(2, 0.999) = %a", vs);
    TH_OK(tlrt_tape_dropout(t, xe, 0.5, 5, &ye));
    TH_CHECK(value(t, ye).empty());
    TH_OK(tlrt_tape_backward(t, ys));
    TH_CHECK(same(grad(t, xs), {th::bits_of(vs) == 0u ? 0.0f : sc}));
  }
}

// Workspace and gradients: after reset (and after freeing the tape) live bytes and handles are
// back where they started; a failed backward leaves the leaf gradients as they were.
void test_memory_and_failure() {
  const tlrt_allocator_stats s0 = th::stats();
  {
    Tape T;
    tlrt_tape *t = T.t;
    th::Rng rng(5);
    const uint64_t x = leaf(t, rng.vec(64), {8, 8}, true);
    const uint64_t g = leaf(t, rng.vec(8), {8}, true), b = leaf(t, rng.vec(8), {8}, true);
    uint64_t ln, e, s;
    TH_OK(tlrt_tape_layer_norm(t, x, g, b, 1e-5, &ln));
    TH_OK(tlrt_tape_exp(t, ln, &e));
    TH_OK(tlrt_tape_reduce_sum(t, e, &s));
    TH_OK(tlrt_tape_backward(t, s));
    const std::vector<float> g1 = grad(t, x);
    // Fault injection at every allocation of a second backward in turn: each failing run returns
    // TLRT_ERR_OUT_OF_MEMORY and leaves the gradients as they were, until a run gets through.
    uint64_t failures = 0;
    for (uint64_t n = 1; n < 200; ++n) {
      tlrt_debug_fail_nth_allocation(n);
      const tlrt_status st = tlrt_tape_backward(t, s);
      const std::string msg = tlrt_last_error();
      const uint64_t left = tlrt_debug_fail_nth_allocation(0);
      if (st != TLRT_ERR_OUT_OF_MEMORY) {
        TH_CHECK(st == TLRT_OK && left > 0);
        break;  // the backward did not meet the failure: it succeeded and accumulated
      }
      ++failures;
      TH_CHECK(msg.find("tlrt_tape_backward: ") == 0);
      TH_CHECK_MSG(same(grad(t, x), g1), "gradient changed by a backward failing at allocation %llu",
                   (unsigned long long)n);
    }
    TH_CHECK_MSG(failures >= 10, "only %llu allocation points in the backward",
                 (unsigned long long)failures);
    TH_OK(tlrt_tape_reset(t));
    const tlrt_allocator_stats s1 = th::stats();
    TH_CHECK_MSG(s1.live_bytes == s0.live_bytes && s1.live_handles == s0.live_handles,
                 "after reset: live bytes %llu -> %llu, handles %llu -> %llu",
                 (unsigned long long)s0.live_bytes, (unsigned long long)s1.live_bytes,
                 (unsigned long long)s0.live_handles, (unsigned long long)s1.live_handles);
    // A failing composite leaves the tape unchanged (rollback): labels out of range.
    const uint64_t lg = leaf(t, rng.vec(6), {2, 3}, true);
    const uint64_t bad[2] = {0, 3};
    uint64_t out = 7, count = 0;
    TH_STATUS(tlrt_tape_cross_entropy(t, lg, bad, &out), TLRT_ERR_INDEX);
    TH_CHECK(out == 0);
    TH_OK(tlrt_tape_node_count(t, &count));
    TH_CHECK(count == 1);
    // ... and so does one failing half-way (fault injection inside batchnorm).
    const uint64_t bx = leaf(t, rng.vec(6), {3, 2}, true);
    const uint64_t bg = leaf(t, rng.vec(2), {2}, true), bb = leaf(t, rng.vec(2), {2}, true);
    bool mid = false;
    for (uint64_t n = 2; n < 12; ++n) {
      tlrt_debug_fail_nth_allocation(n);
      const tlrt_status st = tlrt_tape_batchnorm(t, bx, bg, bb, 1e-5, &out);
      tlrt_debug_fail_nth_allocation(0);
      if (st != TLRT_ERR_OUT_OF_MEMORY) break;
      mid = true;
      TH_OK(tlrt_tape_node_count(t, &count));
      TH_CHECK_MSG(count == 4, "after a failed batchnorm the tape has %llu nodes",
                   (unsigned long long)count);
    }
    TH_CHECK(mid);
  }
  const tlrt_allocator_stats s2 = th::stats();
  TH_CHECK(s2.live_bytes == s0.live_bytes && s2.live_handles == s0.live_handles);
}

// Intermediate gradients are released once propagated: the peak of live bytes during the
// backward of a long chain of n elementwise nodes stays far below n gradients.
void test_intermediate_release() {
  Tape T;
  tlrt_tape *t = T.t;
  const uint64_t n = 1 << 14, depth = 64;
  th::Rng rng(9);
  uint64_t x = leaf(t, rng.vec(n, -1, 1), {n}, true);
  uint64_t cur = x;
  for (uint64_t i = 0; i < depth; ++i) TH_OK(tlrt_tape_tanh(t, cur, &cur));
  uint64_t s;
  TH_OK(tlrt_tape_reduce_sum(t, cur, &s));
  const tlrt_allocator_stats before = th::stats();
  TH_OK(tlrt_tape_backward(t, s));
  const tlrt_allocator_stats after = th::stats();
  // Peak during backward (beyond the recorded values): a few gradients of n floats, not depth.
  TH_CHECK(before.peak_bytes == before.live_bytes);  // this test's values are the largest yet
  const uint64_t extra = after.peak_bytes - before.live_bytes;
  TH_CHECK_MSG(extra <= 4 * n * 4,
               "backward of a %llu-node chain needed %llu extra bytes (%llu per gradient)",
               (unsigned long long)depth, (unsigned long long)extra, (unsigned long long)(n * 4));
  // What stays after backward is exactly the leaf gradient.
  TH_CHECK_MSG(after.live_bytes - before.live_bytes == n * 4, "backward kept %llu bytes",
               (unsigned long long)(after.live_bytes - before.live_bytes));
}

// A model of the training loops: parameter shapes (initialised uniform in +-0.3, vectors in
// +-0.1), the input's shape, and the recording of the logits (batch, classes) from the input leaf
// x and the parameter leaves p.
struct Model {
  const char *name;
  std::vector<uint64_t> xdims;
  std::vector<std::vector<uint64_t>> pdims;
  std::function<uint64_t(tlrt_tape *, uint64_t x, const std::vector<uint64_t> &p)> logits;
};

// The training loop: cross entropy against fixed labels, SGD through tlrt_axpy (new parameter
// buffers each step, the old ones freed). Live bytes and handles stay flat after warm-up; the
// loss falls below half its start.
void training_loop_flat(const Model &m, const uint64_t classes, double lr) {
  const int steps = th::under_valgrind() ? 150 : 1000, warm = 10;
  th::Rng rng(11);
  uint64_t xn = 1;
  for (uint64_t d : m.xdims) xn *= d;
  const uint64_t B = m.xdims[0];
  Buf X(th::upload(rng.vec(xn, -1, 1)));
  std::vector<uint64_t> labels(B);
  for (uint64_t i = 0; i < B; ++i) labels[i] = i % classes;
  std::vector<Buf> params;
  for (const auto &d : m.pdims) {
    uint64_t n = 1;
    for (uint64_t e : d) n *= e;
    const float r = d.size() > 1 ? 0.3f : 0.1f;
    params.emplace_back(th::upload(rng.vec(n, -r, r)));
  }
  Tape T;
  tlrt_tape *t = T.t;
  tlrt_allocator_stats warm_stats{};
  float first_loss = 0, last_loss = 0;
  for (int step = 0; step < steps; ++step) {
    uint64_t x, loss;
    std::vector<uint64_t> p(params.size());
    TH_OK(tlrt_tape_leaf(t, X.get(), m.xdims.data(), (uint32_t)m.xdims.size(), false, &x));
    for (size_t i = 0; i < params.size(); ++i)
      TH_OK(tlrt_tape_leaf(t, params[i].get(), m.pdims[i].data(), (uint32_t)m.pdims[i].size(),
                           true, &p[i]));
    const uint64_t z = m.logits(t, x, p);
    TH_OK(tlrt_tape_cross_entropy(t, z, labels.data(), &loss));
    TH_OK(tlrt_tape_backward(t, loss));
    const std::vector<float> lv = value(t, loss);
    if (step == 0) first_loss = lv.empty() ? 0 : lv[0];
    last_loss = lv.empty() ? 0 : lv[0];
    for (size_t i = 0; i < params.size(); ++i) {
      Buf g, np;
      TH_OK(tlrt_tape_grad(t, p[i], g.out()));
      TH_OK(tlrt_axpy(params[i].get(), g.get(), -lr, np.out()));
      params[i] = std::move(np);
    }
    TH_OK(tlrt_tape_reset(t));
    if (step == warm) warm_stats = th::stats();
  }
  const tlrt_allocator_stats end = th::stats();
  TH_CHECK_MSG(end.live_bytes == warm_stats.live_bytes && end.live_handles == warm_stats.live_handles,
               "%s: live bytes %llu after warm-up, %llu after %d steps; handles %llu -> %llu",
               m.name, (unsigned long long)warm_stats.live_bytes,
               (unsigned long long)end.live_bytes, steps,
               (unsigned long long)warm_stats.live_handles, (unsigned long long)end.live_handles);
  TH_CHECK_MSG(last_loss < 0.5f * first_loss, "%s: loss %g -> %g over %d steps", m.name,
               first_loss, last_loss, steps);
  std::printf("training loop (%s): %d steps, loss %.4f -> %.4f, live bytes %llu flat\n", m.name,
              steps, first_loss, last_loss, (unsigned long long)end.live_bytes);
}

#define REC(call)                        \
  do {                                   \
    const tlrt_status s_ = (call);       \
    TH_OK(s_);                           \
    if (s_ != TLRT_OK) return UINT64_MAX; \
  } while (0)

void test_training_loops_flat() {
  // A (16 -> 12 -> 4) MLP with relu.
  training_loop_flat(
      Model{"mlp", {8, 16}, {{12, 16}, {12}, {4, 12}, {4}},
            [](tlrt_tape *t, uint64_t x, const std::vector<uint64_t> &p) -> uint64_t {
              uint64_t h, a, z;
              REC(tlrt_tape_linear(t, x, p[0], p[1], &h));
              REC(tlrt_tape_relu(t, h, &a));
              REC(tlrt_tape_linear(t, a, p[2], p[3], &z));
              return z;
            }},
      4, 0.1);
  // A small conv net on (6, 1, 6, 6) images: conv 3x3 (1 -> 4, padding 1) + relu, 2x2 max pool,
  // self-attention over the 4 channels (9 features each), 3x3 average pool of the attended
  // maps, linear (4 -> 3).
  training_loop_flat(
      Model{"conv net", {6, 1, 6, 6}, {{4, 1, 3, 3}, {4}, {3, 4}, {3}},
            [](tlrt_tape *t, uint64_t x, const std::vector<uint64_t> &p) -> uint64_t {
              const uint64_t seq[3] = {6, 4, 9}, img[4] = {6, 4, 3, 3}, flat[2] = {6, 4};
              uint64_t c, r, m, s, a, i, v, f, z;
              REC(tlrt_tape_conv2d(t, x, p[0], p[1], 1, 1, 1, 1, 1, 1, 1, &c));
              REC(tlrt_tape_relu(t, c, &r));
              REC(tlrt_tape_maxpool2d(t, r, 2, 2, 2, 2, 0, 0, &m));
              REC(tlrt_tape_reshape(t, m, seq, 3, &s));
              REC(tlrt_tape_flash_attention(t, s, s, s, nullptr, 1.0 / 3, false, -INFINITY, &a));
              REC(tlrt_tape_reshape(t, a, img, 4, &i));
              REC(tlrt_tape_avgpool2d(t, i, 3, 3, 1, 1, 0, 0, true, &v));
              REC(tlrt_tape_reshape(t, v, flat, 2, &f));
              REC(tlrt_tape_linear(t, f, p[2], p[3], &z));
              return z;
            }},
      3, 0.5);
}

}  // namespace

int main() {
  test_ids_shapes_values();
  test_known_gradients();
  test_composites_known();
  test_max_ties_and_special();
  test_conv_known();
  test_pool_known();
  test_attention_known();
  test_attention_views_known();
  test_silu_rms_norm_dropout();
  test_memory_and_failure();
  test_intermediate_release();
  test_training_loops_flat();
  return th::finish("test_tape");
}
