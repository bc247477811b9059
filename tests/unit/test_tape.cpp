// Known answers of the autograd tape (abi/tlrt_tape.h) on the CPU: node ids, shapes, values equal
// to the ops' own results bit for bit, hand-computed gradients, accumulation over two backwards,
// reset, zeros for leaves without a gradient, the max ties rule, rank-0 and empty cases, the
// release of workspace and intermediate gradients (allocator telemetry), the all-or-nothing
// backward, and a 1000-step training loop of a small MLP (SGD through tlrt_axpy) whose live bytes
// and handles stay flat after warm-up while its loss falls.
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "harness.hpp"

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
  TH_CHECK(a == 0 && b == 1);
  uint64_t s = 0, tr = 0, r = 0;
  TH_OK(tlrt_tape_mul(t, a, b, &s));
  TH_CHECK(s == 2);
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
  // Reset: everything goes, ids restart at 0.
  TH_OK(tlrt_tape_reset(t));
  uint64_t count = 9;
  TH_OK(tlrt_tape_node_count(t, &count));
  TH_CHECK(count == 0);
  const uint64_t z = leaf(t, {1, 1}, {2}, true);
  TH_CHECK(z == 0);
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

// The training loop: a (16 -> 12 -> 4) MLP with relu and cross entropy, SGD through tlrt_axpy
// (new parameter buffers each step, the old ones freed).
void test_training_loop_flat() {
  const int steps = th::under_valgrind() ? 150 : 1000, warm = 10;
  th::Rng rng(11);
  const uint64_t B = 8, I = 16, H = 12, O = 4;
  std::vector<float> xs = rng.vec(B * I, -1, 1);
  uint64_t labels[B];
  for (uint64_t i = 0; i < B; ++i) labels[i] = i % O;
  Buf X(th::upload(xs));
  Buf W1(th::upload(rng.vec(H * I, -0.3f, 0.3f))), b1(th::upload(rng.vec(H, -0.1f, 0.1f)));
  Buf W2(th::upload(rng.vec(O * H, -0.3f, 0.3f))), b2(th::upload(rng.vec(O, -0.1f, 0.1f)));
  Buf *params[4] = {&W1, &b1, &W2, &b2};
  const std::vector<std::vector<uint64_t>> pdims = {{H, I}, {H}, {O, H}, {O}};
  Tape T;
  tlrt_tape *t = T.t;
  tlrt_allocator_stats warm_stats{};
  float first_loss = 0, last_loss = 0;
  for (int step = 0; step < steps; ++step) {
    uint64_t x, p[4], h, a, z, loss;
    const uint64_t xd[2] = {B, I};
    TH_OK(tlrt_tape_leaf(t, X.get(), xd, 2, false, &x));
    for (int i = 0; i < 4; ++i)
      TH_OK(tlrt_tape_leaf(t, params[i]->get(), pdims[i].data(), (uint32_t)pdims[i].size(), true,
                           &p[i]));
    TH_OK(tlrt_tape_linear(t, x, p[0], p[1], &h));
    TH_OK(tlrt_tape_relu(t, h, &a));
    TH_OK(tlrt_tape_linear(t, a, p[2], p[3], &z));
    TH_OK(tlrt_tape_cross_entropy(t, z, labels, &loss));
    TH_OK(tlrt_tape_backward(t, loss));
    const std::vector<float> lv = value(t, loss);
    if (step == 0) first_loss = lv[0];
    last_loss = lv[0];
    for (int i = 0; i < 4; ++i) {
      Buf g, np;
      TH_OK(tlrt_tape_grad(t, p[i], g.out()));
      TH_OK(tlrt_axpy(params[i]->get(), g.get(), -0.1, np.out()));
      *params[i] = std::move(np);
    }
    TH_OK(tlrt_tape_reset(t));
    if (step == warm) warm_stats = th::stats();
  }
  const tlrt_allocator_stats end = th::stats();
  TH_CHECK_MSG(end.live_bytes == warm_stats.live_bytes && end.live_handles == warm_stats.live_handles,
               "live bytes %llu after warm-up, %llu after %d steps; handles %llu -> %llu",
               (unsigned long long)warm_stats.live_bytes, (unsigned long long)end.live_bytes, steps,
               (unsigned long long)warm_stats.live_handles, (unsigned long long)end.live_handles);
  TH_CHECK_MSG(last_loss < 0.5f * first_loss, "loss %g -> %g over %d steps", first_loss, last_loss,
               steps);
  std::printf("training loop: %d steps, loss %.4f -> %.4f, live bytes %llu flat\n", steps,
              first_loss, last_loss, (unsigned long long)end.live_bytes);
}

}  // namespace

int main() {
  test_ids_shapes_values();
  test_known_gradients();
  test_composites_known();
  test_max_ties_and_special();
  test_memory_and_failure();
  test_intermediate_release();
  test_training_loop_flat();
  return th::finish("test_tape");
}
