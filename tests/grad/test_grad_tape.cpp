// Suite 'grad': the autograd tape (abi/tlrt_tape.h) against central finite differences THROUGH
// THE TAPE, for every recording call and for composite graphs.
//
// For each case: leaves with seeded random values (kept away from kinks and domain edges where
// the op has them: relu/abs/clamp/max/min/max_axis inputs at least 0.05 apart from the kink or
// from each other, log/sqrt/inv inputs in [0.5, 2)), a graph built from them, and a fixed random
// weight w of the output's size. The loss is L = sum_i w[i] out[i]; its gradient comes from
// tlrt_tape_backward_seed(out, w) (or, for the cases marked scalar, from tlrt_tape_backward on
// the recorded scalar reduce_sum(out * w), so both entry points are covered). Each leaf element v
// is then moved to the float32 values v +- h (h = 2^-7 * max(1, |v|)), the graph is recorded
// again on a reset tape, L is evaluated in float64 from the float32 outputs, and
//     D = (L(v+) - L(v-)) / (v+ - v-)
// is compared with the tape's gradient. Tolerance: 5e-4 (1 + |grad|) for the truncation error
// (h^2 / 6 |L'''|, L''' of order 1 for these inputs), plus 64 u S / h for the float32 rounding of
// the two forward evaluations (u = 2^-24, S = sum_i |w[i] out[i]|, 64 being a generous bound on
// the per-output error in ulps of the composed forwards). A wrong backward rule is off by O(1).
// Runs on the CPU and, when usable, on CUDA(0).
#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "harness.hpp"

namespace {

using th::Buf;

struct Leaf {
  std::vector<uint64_t> dims;
  std::vector<float> data;
  bool requires_grad = true;
};

using Build = std::function<uint64_t(tlrt_tape *, const std::vector<uint64_t> &)>;

uint64_t numel(const std::vector<uint64_t> &d) {
  uint64_t n = 1;
  for (uint64_t x : d) n *= x;
  return n;
}

// Records the leaves and the graph on a reset tape; returns the output id (UINT64_MAX on failure).
uint64_t record(tlrt_tape *t, const std::vector<Leaf> &leaves, const Build &build,
                std::vector<uint64_t> *ids, tlrt_device dev) {
  if (tlrt_tape_reset(t) != TLRT_OK) return UINT64_MAX;
  ids->clear();
  for (const Leaf &l : leaves) {
    Buf b(th::upload(l.data, dev));
    uint64_t id = 0;
    if (tlrt_tape_leaf(t, b.get(), l.dims.data(), (uint32_t)l.dims.size(), l.requires_grad, &id) !=
        TLRT_OK) {
      th::report(__FILE__, __LINE__, std::string("leaf: ") + tlrt_last_error());
      return UINT64_MAX;
    }
    ids->push_back(id);
  }
  return build(t, *ids);
}

std::vector<float> value_of(tlrt_tape *t, uint64_t id) {
  Buf v;
  if (tlrt_tape_value(t, id, v.out()) != TLRT_OK) return {};
  return th::download(v.get());
}

double weighted(const std::vector<float> &out, const std::vector<float> &w, double *mag) {
  double L = 0, m = 0;
  for (size_t i = 0; i < out.size() && i < w.size(); ++i) {
    L += (double)w[i] * out[i];
    m += std::fabs((double)w[i] * out[i]);
  }
  if (mag) *mag = m;
  return L;
}

int g_cases = 0;

// The finite-difference check of one graph. scalar: use tlrt_tape_backward on reduce_sum(out*w).
void check(const char *name, tlrt_device dev, std::vector<Leaf> leaves, const Build &build,
           bool scalar = false) {
  ++g_cases;
  tlrt_tape *t = nullptr;
  TH_OK(tlrt_tape_new(dev, &t));
  if (!t) return;
  std::vector<uint64_t> ids;
  uint64_t out = record(t, leaves, build, &ids, dev);
  TH_CHECK_MSG(out != UINT64_MAX, "%s: recording failed: %s", name, tlrt_last_error());
  if (out == UINT64_MAX) {
    tlrt_tape_free(t);
    return;
  }
  uint64_t dims[8];
  uint32_t rank = 0;
  TH_OK(tlrt_tape_shape(t, out, dims, &rank, nullptr));
  const uint64_t n = numel(std::vector<uint64_t>(dims, dims + rank));
  th::Rng rng(0x7A9E + g_cases);
  const std::vector<float> w = rng.vec(n, -1.0f, 1.0f);
  if (scalar) {
    Buf wb(th::upload(w, dev));
    uint64_t wl = 0, prod = 0, loss = 0;
    TH_OK(tlrt_tape_leaf(t, wb.get(), dims, rank, false, &wl));
    TH_OK(tlrt_tape_mul(t, out, wl, &prod));
    TH_OK(tlrt_tape_reduce_sum(t, prod, &loss));
    TH_OK(tlrt_tape_backward(t, loss));
  } else {
    Buf wb(th::upload(w, dev));
    TH_OK(tlrt_tape_backward_seed(t, out, wb.get()));
  }
  std::vector<std::vector<float>> grads(leaves.size());
  for (size_t i = 0; i < leaves.size(); ++i) {
    if (!leaves[i].requires_grad) continue;
    Buf g;
    TH_OK(tlrt_tape_grad(t, ids[i], g.out()));
    grads[i] = th::download(g.get());
    TH_CHECK_MSG(grads[i].size() == leaves[i].data.size(), "%s: leaf %zu grad has %zu elements",
                 name, i, grads[i].size());
  }
  // The same gradients, bit for bit, when the host has released every node (the inner nodes of
  // composites already are) and the backward frees the graph as it goes: each rule reads only
  // what its recording call declared (abi/tlrt_tape.h, MEMORY). A second backward over the freed
  // graph fails with TLRT_ERR_RELEASED and changes nothing.
  {
    uint64_t start = record(t, leaves, build, &ids, dev);
    Buf wb(th::upload(w, dev));
    if (start != UINT64_MAX && scalar) {
      uint64_t wl = 0, prod = 0;
      TH_OK(tlrt_tape_leaf(t, wb.get(), dims, rank, false, &wl));
      TH_OK(tlrt_tape_mul(t, start, wl, &prod));
      TH_OK(tlrt_tape_reduce_sum(t, prod, &start));
    }
    bool start_rg = false;
    uint32_t r = 0;
    uint64_t d[8];
    TH_OK(tlrt_tape_shape(t, start, d, &r, &start_rg));
    for (uint64_t i = 0; i <= (start & 0xFFFFFFFFull); ++i) {
      const tlrt_status st = tlrt_tape_release(t, (start & ~0xFFFFFFFFull) | i);
      TH_CHECK(st == TLRT_OK || st == TLRT_ERR_RELEASED);
    }
    const tlrt_buffer *seed = scalar ? nullptr : wb.get();
    TH_OK(tlrt_tape_backward_ex(t, start, seed, TLRT_TAPE_BACKWARD_FREE));
    for (size_t i = 0; i < leaves.size(); ++i) {
      if (!leaves[i].requires_grad) continue;
      Buf g;
      TH_OK(tlrt_tape_grad(t, ids[i], g.out()));
      const std::vector<float> gv = g.get() ? th::download(g.get()) : std::vector<float>{};
      bool same = gv.size() == grads[i].size();
      for (size_t j = 0; same && j < gv.size(); ++j) same = th::same_bits(gv[j], grads[i][j]);
      TH_CHECK_MSG(same, "%s (%s): leaf %zu: the gradient after releasing every node and a "
                   "freeing backward differs from the kept graph's", name,
                   dev == TLRT_DEVICE_CPU ? "cpu" : "cuda", i);
    }
    if (start_rg)
      TH_STATUS(tlrt_tape_backward_ex(t, start, seed, 0), TLRT_ERR_RELEASED);
  }
  const double u = std::ldexp(1.0, -24);
  double worst = 0;
  for (size_t i = 0; i < leaves.size(); ++i) {
    if (!leaves[i].requires_grad || grads[i].size() != leaves[i].data.size()) continue;
    for (size_t j = 0; j < leaves[i].data.size(); ++j) {
      const float v = leaves[i].data[j];
      const float h = std::ldexp(1.0f, -7) * std::max(1.0f, std::fabs(v));
      const float vp = v + h, vm = v - h;
      double Lp = 0, Lm = 0, Sp = 0, Sm = 0;
      for (int side = 0; side < 2; ++side) {
        std::vector<Leaf> pert = leaves;
        pert[i].data[j] = side == 0 ? vp : vm;
        const uint64_t o = record(t, pert, build, &ids, dev);
        const std::vector<float> val = value_of(t, o);
        (side == 0 ? Lp : Lm) = weighted(val, w, side == 0 ? &Sp : &Sm);
      }
      const double D = (Lp - Lm) / ((double)vp - (double)vm);
      const double gr = grads[i][j];
      const double tol = 5e-4 * (1 + std::fabs(gr)) + 64 * u * std::max(Sp, Sm) / h;
      const double err = std::fabs(D - gr);
      worst = std::max(worst, err / tol);
      TH_CHECK_MSG(err <= tol && std::isfinite(gr),
                   "%s (%s): leaf %zu element %zu: tape gradient %.9g, finite difference %.9g "
                   "(tolerance %.3g)", name, dev == TLRT_DEVICE_CPU ? "cpu" : "cuda", i, j, gr, D,
                   tol);
    }
  }
  std::printf("  %-34s %-4s worst error / tolerance %.3f\n", name,
              dev == TLRT_DEVICE_CPU ? "cpu" : "cuda", worst);
  tlrt_tape_free(t);
}

// ---- input generators --------------------------------------------------------------------------

std::vector<float> uni(uint64_t n, uint64_t salt, float lo = -1.0f, float hi = 1.0f) {
  return th::Rng(salt).vec(n, lo, hi);
}
// Values with |x| >= 0.1 (away from the kink at 0 of relu / abs).
std::vector<float> off_zero(uint64_t n, uint64_t salt) {
  std::vector<float> v = uni(n, salt);
  for (float &x : v) x = (x < 0 ? -0.1f : 0.1f) + x;
  return v;
}
// n distinct values, pairwise at least 0.1 apart, in random order (no ties for max / argmax).
std::vector<float> distinct(uint64_t n, uint64_t salt) {
  th::Rng r(salt);
  std::vector<float> v(n);
  for (uint64_t i = 0; i < n; ++i) v[i] = -1.0f + 0.15f * (float)i + r.uniform(0.0f, 0.04f);
  for (uint64_t i = n; i > 1; --i) std::swap(v[i - 1], v[r.gen() % i]);
  return v;
}

Leaf L(std::vector<uint64_t> dims, std::vector<float> data, bool rg = true) {
  Leaf l;
  l.dims = std::move(dims);
  l.data = std::move(data);
  l.requires_grad = rg;
  return l;
}

#define OUT1(call)                       \
  [&](tlrt_tape *t, const std::vector<uint64_t> &x) -> uint64_t { \
    uint64_t o = UINT64_MAX;             \
    if ((call) != TLRT_OK) return UINT64_MAX; \
    return o;                            \
  }

using Unary = tlrt_status (*)(tlrt_tape *, uint64_t, uint64_t *);
using Binary = tlrt_status (*)(tlrt_tape *, uint64_t, uint64_t, uint64_t *);

void run_all(tlrt_device dev) {
  // ---- elementwise ----
  const std::vector<uint64_t> s34 = {3, 4};
  struct B { const char *name; Binary f; };
  for (B b : {B{"add", tlrt_tape_add}, B{"sub", tlrt_tape_sub}, B{"mul", tlrt_tape_mul}}) {
    check(b.name, dev, {L(s34, uni(12, 1)), L(s34, uni(12, 2))},
          OUT1(b.f(t, x[0], x[1], &o)));
  }
  check("div", dev, {L(s34, uni(12, 3)), L(s34, uni(12, 4, 0.5f, 2.0f))},
        OUT1(tlrt_tape_div(t, x[0], x[1], &o)));
  {
    // a and b at least 0.1 apart everywhere (no ties).
    std::vector<float> a = uni(12, 5), b = a;
    th::Rng r(6);
    for (float &v : b) v += (r.gen() & 1 ? 1.0f : -1.0f) * r.uniform(0.1f, 0.8f);
    check("max", dev, {L(s34, a), L(s34, b)}, OUT1(tlrt_tape_max(t, x[0], x[1], &o)));
    check("min", dev, {L(s34, a), L(s34, b)}, OUT1(tlrt_tape_min(t, x[0], x[1], &o)));
  }
  check("axpy", dev, {L(s34, uni(12, 7)), L(s34, uni(12, 8))},
        OUT1(tlrt_tape_axpy(t, x[0], x[1], 0.7, &o)));
  struct U { const char *name; Unary f; int domain; };  // 0 any, 1 off zero, 2 positive
  for (U un : {U{"neg", tlrt_tape_neg, 0}, U{"abs", tlrt_tape_abs, 1},
               U{"sqrt", tlrt_tape_sqrt, 2}, U{"inv", tlrt_tape_inv, 2},
               U{"relu", tlrt_tape_relu, 1}, U{"exp", tlrt_tape_exp, 0},
               U{"log", tlrt_tape_log, 2}, U{"sigmoid", tlrt_tape_sigmoid, 0},
               U{"tanh", tlrt_tape_tanh, 0}, U{"softplus", tlrt_tape_softplus, 0},
               U{"gelu", tlrt_tape_gelu, 0}, U{"silu", tlrt_tape_silu, 0}}) {
    std::vector<float> v = un.domain == 0   ? uni(12, 9, -2.0f, 2.0f)
                           : un.domain == 1 ? off_zero(12, 10)
                                            : uni(12, 11, 0.5f, 2.0f);
    check(un.name, dev, {L(s34, v)}, OUT1(un.f(t, x[0], &o)));
  }
  check("scale", dev, {L(s34, uni(12, 12))}, OUT1(tlrt_tape_scale(t, x[0], -1.5, &o)));
  {
    std::vector<float> v = uni(12, 13, -1.0f, 1.0f);
    for (float &x : v)
      if (std::fabs(std::fabs(x) - 0.5f) < 0.1f) x *= 1.5f;  // away from the bounds +-0.5
    check("clamp", dev, {L(s34, v)}, OUT1(tlrt_tape_clamp(t, x[0], -0.5, 0.5, &o)));
  }
  check("safe_log", dev, {L(s34, uni(12, 14, -2.0f, 2.0f))},
        OUT1(tlrt_tape_safe_log(t, x[0], 1e-3, &o)));

  // ---- reductions ----
  check("reduce_sum", dev, {L(s34, uni(12, 15))}, OUT1(tlrt_tape_reduce_sum(t, x[0], &o)), true);
  check("reduce_mean", dev, {L(s34, uni(12, 16))}, OUT1(tlrt_tape_reduce_mean(t, x[0], &o)));
  check("reduce_sum_axis0", dev, {L(s34, uni(12, 17))},
        OUT1(tlrt_tape_reduce_sum_axis0(t, x[0], &o)));
  check("reduce_sum_axis1", dev, {L(s34, uni(12, 18))},
        OUT1(tlrt_tape_reduce_sum_axis1(t, x[0], &o)));
  for (uint32_t axis = 0; axis < 3; ++axis)
    check(("reduce_sum_axis " + std::to_string(axis)).c_str(), dev,
          {L({2, 3, 4}, uni(24, 19 + axis))},
          OUT1(tlrt_tape_reduce_sum_axis(t, x[0], axis, &o)));
  check("reduce_max_axis0", dev, {L(s34, distinct(12, 22))},
        OUT1(tlrt_tape_reduce_max_axis0(t, x[0], &o)));
  check("reduce_max_axis1", dev, {L(s34, distinct(12, 23))},
        OUT1(tlrt_tape_reduce_max_axis1(t, x[0], &o)));

  // ---- layout ----
  {
    const uint64_t nd[3] = {2, 2, 3};
    check("reshape", dev, {L(s34, uni(12, 24))}, OUT1(tlrt_tape_reshape(t, x[0], nd, 3, &o)));
  }
  check("transpose2d", dev, {L(s34, uni(12, 25))}, OUT1(tlrt_tape_transpose2d(t, x[0], &o)));
  {
    const uint32_t perm[3] = {2, 0, 1};
    check("permute", dev, {L({2, 3, 4}, uni(24, 26))},
          OUT1(tlrt_tape_permute(t, x[0], perm, &o)));
  }
  check("swap_adjacent_at_depth", dev, {L({2, 3, 4}, uni(24, 27))},
        OUT1(tlrt_tape_swap_adjacent_at_depth(t, x[0], 1, &o)));
  {
    const uint64_t od[3] = {2, 3, 4};
    const uint32_t map[3] = {0, 1, 2};  // (3, 1) -> (2, 3, 4)
    check("broadcast_to", dev, {L({3, 1}, uni(3, 28))},
          OUT1(tlrt_tape_broadcast_to(t, x[0], od, 3, map, &o)));
  }
  check("broadcast_vec_to_rows", dev, {L({4}, uni(4, 29))},
        OUT1(tlrt_tape_broadcast_vec_to_rows(t, x[0], 3, &o)));
  check("broadcast_vec_to_cols", dev, {L({3}, uni(3, 30))},
        OUT1(tlrt_tape_broadcast_vec_to_cols(t, x[0], 4, &o)));
  check("concat1d", dev, {L({3}, uni(3, 31)), L({5}, uni(5, 32))},
        OUT1(tlrt_tape_concat1d(t, x[0], x[1], &o)));
  check("concat_axis0", dev, {L({2, 3}, uni(6, 33)), L({1, 3}, uni(3, 34))},
        OUT1(tlrt_tape_concat_axis0(t, x[0], x[1], &o)));
  check("slice1d", dev, {L({7}, uni(7, 35))}, OUT1(tlrt_tape_slice1d(t, x[0], 2, 3, &o)));
  check("slice_axis0", dev, {L({4, 3}, uni(12, 36))},
        OUT1(tlrt_tape_slice_axis0(t, x[0], 1, 2, &o)));

  // ---- indexing (duplicates accumulate, out-of-range entries read 0 and get nothing) ----
  {
    const uint64_t idx[6] = {3, 0, 3, 9, 5, 3};
    check("gather_vec", dev, {L({2, 3}, uni(6, 37))},
          OUT1(tlrt_tape_gather_vec(t, x[0], idx, 6, &o)));
    check("scatter_add", dev, {L({2, 3}, uni(6, 38)), L({6}, uni(6, 39))},
          OUT1(tlrt_tape_scatter_add(t, x[0], x[1], idx, 6, &o)));
    const uint64_t rows[4] = {1, 1, 7, 0};
    check("gather_rows", dev, {L({3, 2}, uni(6, 40))},
          OUT1(tlrt_tape_gather_rows(t, x[0], rows, 4, &o)));
    check("scatter_add_rows", dev, {L({3, 2}, uni(6, 41)), L({4, 2}, uni(8, 42))},
          OUT1(tlrt_tape_scatter_add_rows(t, x[0], x[1], rows, 4, &o)));
  }

  // ---- softmax, layer norm, products ----
  check("softmax", dev, {L({2, 5}, uni(10, 43, -2.0f, 2.0f))},
        OUT1(tlrt_tape_softmax(t, x[0], &o)));
  check("softmax rank 3", dev, {L({2, 2, 3}, uni(12, 44, -2.0f, 2.0f))},
        OUT1(tlrt_tape_softmax(t, x[0], &o)));
  check("log_softmax", dev, {L({3, 4}, uni(12, 45, -2.0f, 2.0f))},
        OUT1(tlrt_tape_log_softmax(t, x[0], &o)));
  check("layer_norm", dev,
        {L({3, 5}, uni(15, 46, -2.0f, 2.0f)), L({5}, uni(5, 47, 0.5f, 1.5f)), L({5}, uni(5, 48))},
        OUT1(tlrt_tape_layer_norm(t, x[0], x[1], x[2], 1e-5, &o)));
  check("rms_norm", dev, {L({3, 5}, uni(15, 90, -2.0f, 2.0f)), L({5}, uni(5, 91, 0.5f, 1.5f))},
        OUT1(tlrt_tape_rms_norm(t, x[0], x[1], 1e-5, &o)));
  check("rms_norm rank 3", dev,
        {L({2, 2, 4}, uni(16, 92, -2.0f, 2.0f)), L({4}, uni(4, 93, -1.5f, 1.5f))},
        OUT1(tlrt_tape_rms_norm(t, x[0], x[1], 1e-6, &o)));
  check("rms_norm no gamma", dev, {L({4, 3}, uni(12, 94, -2.0f, 2.0f))},
        OUT1(tlrt_tape_rms_norm(t, x[0], TLRT_TAPE_NONE, 1e-5, &o)));
  check("rms_norm gamma without gradient", dev,
        {L({3, 5}, uni(15, 95, -2.0f, 2.0f)), L({5}, uni(5, 96, 0.5f, 1.5f), false)},
        OUT1(tlrt_tape_rms_norm(t, x[0], x[1], 1e-5, &o)), true);
  // dropout: the mask is a function of the key, so the perturbed recordings see the same mask.
  check("dropout p=0.3", dev, {L({4, 5}, uni(20, 97))},
        OUT1(tlrt_tape_dropout(t, x[0], 0.3, 12345, &o)));
  check("dropout p=0", dev, {L({3, 4}, uni(12, 98))},
        OUT1(tlrt_tape_dropout(t, x[0], 0.0, 1, &o)), true);
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb) {
      const uint64_t m = 3, n = 4, p = 2;
      std::vector<uint64_t> da = ta ? std::vector<uint64_t>{n, m} : std::vector<uint64_t>{m, n};
      std::vector<uint64_t> db = tb ? std::vector<uint64_t>{p, n} : std::vector<uint64_t>{n, p};
      std::string nm = "matmul ta=" + std::to_string(ta) + " tb=" + std::to_string(tb);
      check(nm.c_str(), dev, {L(da, uni(12, 49 + ta)), L(db, uni(8, 51 + tb))},
            OUT1(tlrt_tape_matmul(t, x[0], x[1], ta != 0, tb != 0, &o)));
      std::vector<uint64_t> ba = {2, da[0], da[1]}, bb = {2, db[0], db[1]};
      nm = "bmm ta=" + std::to_string(ta) + " tb=" + std::to_string(tb);
      check(nm.c_str(), dev, {L(ba, uni(24, 53 + ta)), L(bb, uni(16, 55 + tb))},
            OUT1(tlrt_tape_bmm(t, x[0], x[1], ta != 0, tb != 0, &o)));
    }

  // ---- spectral convolution, selective scan ----
  check("spectral_conv1d_rfft", dev,
        {L({8, 2}, uni(16, 83)), L({3, 2, 2}, uni(12, 84)), L({3, 2, 2}, uni(12, 85))},
        OUT1(tlrt_tape_spectral_conv1d_rfft(t, x[0], x[1], x[2], &o)));
  check("selective_scan_diag", dev,
        {L({3}, uni(3, 86, 0.5f, 0.95f)), L({3}, uni(3, 87)), L({5, 3}, uni(15, 88)),
         L({3}, uni(3, 89))},
        OUT1(tlrt_tape_selective_scan_diag(t, x[0], x[1], x[2], x[3], &o)));
  check("selective_scan_diag_var", dev,
        {L({5, 3}, uni(15, 90, 0.5f, 0.95f)), L({5, 3}, uni(15, 91)), L({5, 3}, uni(15, 92)),
         L({3}, uni(3, 93))},
        OUT1(tlrt_tape_selective_scan_diag_var(t, x[0], x[1], x[2], x[3], &o)));

  // ---- convolution, pooling, attention ----
  // conv2d: stride (2, 1), padding (1, 1), dilation (1, 2), 2 groups: x (2, 4, 5, 4), w (6, 2, 3,
  // 2) -> (2, 6, 3, 4).
  check("conv2d", dev, {L({2, 4, 5, 4}, uni(160, 94)), L({6, 2, 3, 2}, uni(72, 95)),
                        L({6}, uni(6, 96))},
        OUT1(tlrt_tape_conv2d(t, x[0], x[1], x[2], 2, 1, 1, 1, 1, 2, 2, &o)));
  check("conv2d, constant x, no bias", dev,
        {L({1, 2, 4, 4}, uni(32, 97), false), L({3, 2, 2, 2}, uni(24, 98))},
        OUT1(tlrt_tape_conv2d(t, x[0], x[1], TLRT_TAPE_NONE, 1, 2, 0, 1, 1, 1, 1, &o)));
  {
    const uint64_t s2[1] = {2}, p1[1] = {1}, d2[1] = {2};
    check("conv 1-D", dev, {L({2, 3, 7}, uni(42, 99)), L({4, 3, 3}, uni(36, 100)),
                            L({4}, uni(4, 101))},
          OUT1(tlrt_tape_conv(t, x[0], x[1], x[2], s2, p1, d2, 1, &o)));
    const uint64_t s111[3] = {1, 2, 1}, p101[3] = {1, 0, 1};
    check("conv 3-D", dev, {L({1, 2, 4, 3, 3}, uni(72, 102)), L({2, 2, 2, 2, 2}, uni(32, 103))},
          OUT1(tlrt_tape_conv(t, x[0], x[1], TLRT_TAPE_NONE, s111, p101, nullptr, 1, &o)));
  }
  check("maxpool2d", dev, {L({1, 2, 5, 5}, distinct(50, 104))},
        OUT1(tlrt_tape_maxpool2d(t, x[0], 3, 2, 2, 1, 1, 1, &o)));
  check("avgpool2d count_include_pad", dev, {L({2, 1, 5, 4}, uni(40, 105))},
        OUT1(tlrt_tape_avgpool2d(t, x[0], 3, 2, 2, 1, 1, 1, true, &o)));
  check("avgpool2d real cells", dev, {L({2, 1, 5, 4}, uni(40, 106))},
        OUT1(tlrt_tape_avgpool2d(t, x[0], 2, 3, 1, 2, 1, 1, false, &o)));
  {
    // Masks: one (n, n) mask for every problem, one (bh, n, n); 0 blocks.
    const uint64_t bh = 2, n = 4, d = 3;
    std::vector<float> m1(n * n), m2(bh * n * n);
    th::Rng r(107);
    for (float &v : m1) v = r.uniform(0, 1) < 0.3f ? 0.0f : 1.0f;
    for (float &v : m2) v = r.uniform(0, 1) < 0.3f ? 0.0f : 1.0f;
    Buf M1(th::upload(m1, dev)), M2(th::upload(m2, dev));
    const std::vector<uint64_t> sq = {bh, n, d};
    check("flash_attention", dev,
          {L(sq, uni(24, 108)), L(sq, uni(24, 109)), L(sq, uni(24, 110))},
          OUT1(tlrt_tape_flash_attention(t, x[0], x[1], x[2], nullptr, 0.6, false, -INFINITY,
                                         &o)));
    check("flash_attention mask, causal", dev,
          {L(sq, uni(24, 111)), L(sq, uni(24, 112)), L(sq, uni(24, 113))},
          OUT1(tlrt_tape_flash_attention(t, x[0], x[1], x[2], M1.get(), 0.6, true, -INFINITY,
                                         &o)));
    check("flash_attention mask, fill -3", dev,
          {L(sq, uni(24, 114)), L(sq, uni(24, 115), false), L(sq, uni(24, 116))},
          OUT1(tlrt_tape_flash_attention(t, x[0], x[1], x[2], M2.get(), 0.6, false, -3.0, &o)));
    // One node as q, k and v.
    check("self attention (node used 3 times)", dev, {L({1, 5, 4}, uni(20, 117))},
          OUT1(tlrt_tape_flash_attention(t, x[0], x[0], x[0], nullptr, 0.5, true, -INFINITY,
                                         &o)));
  }
  {
    // Attention read in place from a fused projection (B, T, (Hq + 2 Hkv) d) and from separate
    // q, k, v of grouped heads with len_q != len_k (causal aligned bottom-right).
    check("attention_qkv, grouped heads 4 / 2, causal", dev, {L({2, 5, 16}, uni(160, 130))},
          OUT1(tlrt_tape_attention_qkv(t, x[0], 4, 2, true, 0.6, &o)));
    check("attention_qkv, multi-query 2 / 1", dev, {L({1, 4, 12}, uni(48, 131))},
          OUT1(tlrt_tape_attention_qkv(t, x[0], 2, 1, false, 0.5, &o)));
    check("attention_qkv, heads 2 / 2, 70 tokens (a 64-key tile edge)", dev,
          {L({1, 70, 12}, uni(840, 132))},
          OUT1(tlrt_tape_attention_qkv(t, x[0], 2, 2, true, 0.5, &o)));
    check("attention, len_q 3 < len_k 6, heads 4 / 1, causal", dev,
          {L({2, 3, 8}, uni(48, 133)), L({2, 6, 2}, uni(24, 134)), L({2, 6, 2}, uni(24, 135))},
          OUT1(tlrt_tape_attention(t, x[0], x[1], x[2], 4, 1, true, 0.7, &o)));
    check("attention, len_q 5 > len_k 3, causal (rows without keys)", dev,
          {L({1, 5, 6}, uni(30, 136)), L({1, 3, 6}, uni(18, 137)), L({1, 3, 6}, uni(18, 138))},
          OUT1(tlrt_tape_attention(t, x[0], x[1], x[2], 2, 2, true, 0.6, &o)));
    check("attention, decode step (len_q 1), v without gradient", dev,
          {L({2, 1, 6}, uni(12, 139)), L({2, 7, 3}, uni(42, 140)), L({2, 7, 3}, uni(42, 141), false)},
          OUT1(tlrt_tape_attention(t, x[0], x[1], x[2], 2, 1, true, 0.6, &o)));
    check("attention, one node as q, k and v", dev, {L({1, 4, 6}, uni(24, 142))},
          OUT1(tlrt_tape_attention(t, x[0], x[0], x[0], 3, 3, false, 0.5, &o)));
  }
  {
    std::vector<Leaf> mha = {L({2, 3, 4}, uni(24, 118))};
    for (uint64_t i = 0; i < 4; ++i) mha.push_back(L({4, 4}, uni(16, 119 + i, -0.7f, 0.7f)));
    for (uint64_t i = 0; i < 4; ++i) mha.push_back(L({4}, uni(4, 123 + i, -0.3f, 0.3f)));
    check("multi_head_attention causal", dev, mha,
          OUT1(tlrt_tape_multi_head_attention(t, x[0], x[1], x[2], x[3], x[4], x[5], x[6], x[7],
                                              x[8], 2, true, &o)));
    mha.resize(5);
    check("multi_head_attention 1 head, no bias", dev, mha,
          OUT1(tlrt_tape_multi_head_attention(t, x[0], x[1], x[2], x[3], x[4], TLRT_TAPE_NONE,
                                              TLRT_TAPE_NONE, TLRT_TAPE_NONE, TLRT_TAPE_NONE, 1,
                                              false, &o)));
  }

  // ---- composites ----
  check("linear", dev, {L({4, 3}, uni(12, 57)), L({2, 3}, uni(6, 58)), L({2}, uni(2, 59))},
        OUT1(tlrt_tape_linear(t, x[0], x[1], x[2], &o)));
  check("linear without bias", dev, {L({4, 3}, uni(12, 60)), L({2, 3}, uni(6, 61))},
        OUT1(tlrt_tape_linear(t, x[0], x[1], TLRT_TAPE_NONE, &o)));
  check("linear_gelu", dev, {L({4, 3}, uni(12, 57)), L({2, 3}, uni(6, 58)), L({2}, uni(2, 59))},
        OUT1(tlrt_tape_linear_gelu(t, x[0], x[1], x[2], &o)));
  check("linear_gelu without bias", dev, {L({4, 3}, uni(12, 60)), L({2, 3}, uni(6, 61))},
        OUT1(tlrt_tape_linear_gelu(t, x[0], x[1], TLRT_TAPE_NONE, &o)));
  check("linear_gelu, one row, one feature", dev,
        {L({1, 1}, uni(1, 66)), L({1, 1}, uni(1, 67)), L({1}, uni(1, 68))},
        OUT1(tlrt_tape_linear_gelu(t, x[0], x[1], x[2], &o)));
  check("linear, only the weight", dev,
        {L({3, 5}, uni(15, 69), false), L({4, 5}, uni(20, 70)), L({4}, uni(4, 71), false)},
        OUT1(tlrt_tape_linear(t, x[0], x[1], x[2], &o)));
  check("linear_gelu, only the bias", dev,
        {L({3, 5}, uni(15, 72), false), L({4, 5}, uni(20, 73), false), L({4}, uni(4, 74))},
        OUT1(tlrt_tape_linear_gelu(t, x[0], x[1], x[2], &o)));
  check("mse_loss", dev, {L(s34, uni(12, 62)), L(s34, uni(12, 63), false)},
        OUT1(tlrt_tape_mse_loss(t, x[0], x[1], &o)));
  check("mse_loss both", dev, {L(s34, uni(12, 64)), L(s34, uni(12, 65))},
        OUT1(tlrt_tape_mse_loss(t, x[0], x[1], &o)), true);
  {
    const uint64_t labels[4] = {2, 0, 4, 2};
    check("cross_entropy", dev, {L({4, 5}, uni(20, 66, -2.0f, 2.0f))},
          OUT1(tlrt_tape_cross_entropy(t, x[0], labels, &o)));
  }
  check("batchnorm", dev,
        {L({5, 3}, uni(15, 67, -2.0f, 2.0f)), L({3}, uni(3, 68, 0.5f, 1.5f)), L({3}, uni(3, 69))},
        OUT1(tlrt_tape_batchnorm(t, x[0], x[1], x[2], 1e-5, &o)));

  // ---- graphs ----
  // Shared subexpression: s = x * y feeds both branches of s + exp(s) * y.
  check("shared subexpression", dev, {L(s34, uni(12, 70)), L(s34, uni(12, 71))},
        [](tlrt_tape *t, const std::vector<uint64_t> &x) -> uint64_t {
          uint64_t s, e, f, o;
          if (tlrt_tape_mul(t, x[0], x[1], &s) || tlrt_tape_exp(t, s, &e) ||
              tlrt_tape_mul(t, e, x[1], &f) || tlrt_tape_add(t, s, f, &o))
            return UINT64_MAX;
          return o;
        });
  // A node used twice in one op, and again later: x * x + x.
  check("node used twice", dev, {L(s34, uni(12, 72))},
        [](tlrt_tape *t, const std::vector<uint64_t> &x) -> uint64_t {
          uint64_t q, o;
          if (tlrt_tape_mul(t, x[0], x[0], &q) || tlrt_tape_add(t, q, x[0], &o)) return UINT64_MAX;
          return o;
        },
        true);
  // Disconnected parameters: z is never used, d only feeds a branch that is not the output; their
  // gradients must be zeros (the finite difference is exactly 0).
  check("disconnected parameters", dev,
        {L(s34, uni(12, 73)), L({2}, uni(2, 74)), L(s34, uni(12, 75))},
        [](tlrt_tape *t, const std::vector<uint64_t> &x) -> uint64_t {
          uint64_t dead, o;
          if (tlrt_tape_tanh(t, x[2], &dead) || tlrt_tape_sigmoid(t, x[0], &o)) return UINT64_MAX;
          return o;
        });
  // x as the input, the kernel and a factor of one graph: x * conv2d(x, x) (padding 1).
  check("conv node used 3 times", dev, {L({1, 1, 3, 3}, uni(9, 127))},
        [](tlrt_tape *t, const std::vector<uint64_t> &x) -> uint64_t {
          uint64_t c, o;
          if (tlrt_tape_conv2d(t, x[0], x[0], TLRT_TAPE_NONE, 1, 1, 1, 1, 1, 1, 1, &c) ||
              tlrt_tape_mul(t, c, x[0], &o))
            return UINT64_MAX;
          return o;
        });
  // A small CNN: conv 3x3 (padding 1) -> tanh -> 2x2 average pool -> reshape -> linear -> cross
  // entropy (smooth everywhere: no kink for the finite differences to straddle).
  {
    const uint64_t labels[2] = {3, 0};
    check("cnn", dev,
          {L({2, 1, 4, 4}, uni(32, 128), false), L({3, 1, 3, 3}, uni(27, 129)),
           L({3}, uni(3, 130)), L({5, 12}, uni(60, 131)), L({5}, uni(5, 132))},
          [&labels](tlrt_tape *t, const std::vector<uint64_t> &x) -> uint64_t {
            const uint64_t flat[2] = {2, 12};
            uint64_t c, a, p, f, z, o;
            if (tlrt_tape_conv2d(t, x[0], x[1], x[2], 1, 1, 1, 1, 1, 1, 1, &c) ||
                tlrt_tape_tanh(t, c, &a) ||
                tlrt_tape_avgpool2d(t, a, 2, 2, 2, 2, 0, 0, true, &p) ||
                tlrt_tape_reshape(t, p, flat, 2, &f) ||
                tlrt_tape_linear(t, f, x[3], x[4], &z) ||
                tlrt_tape_cross_entropy(t, z, labels, &o))
              return UINT64_MAX;
            return o;
          },
          true);
  }
  // A pre-norm gated MLP block as in LLaMA / Mamba: x + W2 (silu(W1 rms_norm(x)) * W3 rms_norm(x)),
  // with dropout on the branch, then a loss.
  {
    check("rms_norm -> swiglu -> dropout -> residual", dev,
          {L({3, 4}, uni(12, 83)), L({4}, uni(4, 84, 0.5f, 1.5f)), L({6, 4}, uni(24, 85)),
           L({6, 4}, uni(24, 86)), L({4, 6}, uni(24, 87))},
          [](tlrt_tape *t, const std::vector<uint64_t> &x) -> uint64_t {
            uint64_t n, a, b, sa, gt, dn, dr, o;
            if (tlrt_tape_rms_norm(t, x[0], x[1], 1e-5, &n) ||
                tlrt_tape_linear(t, n, x[2], TLRT_TAPE_NONE, &a) || tlrt_tape_silu(t, a, &sa) ||
                tlrt_tape_linear(t, n, x[3], TLRT_TAPE_NONE, &b) || tlrt_tape_mul(t, sa, b, &gt) ||
                tlrt_tape_linear(t, gt, x[4], TLRT_TAPE_NONE, &dn) ||
                tlrt_tape_dropout(t, dn, 0.25, 777, &dr) || tlrt_tape_add(t, x[0], dr, &o))
              return UINT64_MAX;
            return o;
          });
  }
  // A small MLP with everything: linear -> gelu -> layer_norm -> linear -> cross entropy.
  {
    const uint64_t labels[3] = {1, 0, 1};
    check("mlp", dev,
          {L({3, 4}, uni(12, 76)), L({5, 4}, uni(20, 77)), L({5}, uni(5, 78)),
           L({5}, uni(5, 79, 0.5f, 1.5f)), L({5}, uni(5, 80)), L({2, 5}, uni(10, 81)),
           L({2}, uni(2, 82))},
          [&labels](tlrt_tape *t, const std::vector<uint64_t> &x) -> uint64_t {
            uint64_t h, a, n, z, o;
            if (tlrt_tape_linear(t, x[0], x[1], x[2], &h) || tlrt_tape_gelu(t, h, &a) ||
                tlrt_tape_layer_norm(t, a, x[3], x[4], 1e-5, &n) ||
                tlrt_tape_linear(t, n, x[5], x[6], &z) || tlrt_tape_cross_entropy(t, z, labels, &o))
              return UINT64_MAX;
            return o;
          },
          true);
  }
}

}  // namespace

int main() {
  run_all(TLRT_DEVICE_CPU);
  if (th::cuda_ready()) run_all(TLRT_DEVICE_CUDA(0));
  else std::printf("no usable CUDA device: CPU only\n");
  std::printf("%d graphs checked\n", g_cases);
  return th::finish("test_grad_tape");
}
