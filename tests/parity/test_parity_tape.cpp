// Parity of the autograd tape (abi/tlrt_tape.h): the same graphs recorded on a CPU tape and on a
// CUDA tape from the same seeded leaves; values and leaf gradients compared by numeric class.
//  (1) Graphs of exact, shared-math and ordered-reduction ops only (every elementwise op, the
//      reductions, layout, indexing, softmax, log-softmax, layer norm, batchnorm): values and
//      gradients bit for bit, and unchanged on CUDA with the determinism switch flipped
//      (parity::run_multi).
//  (2) A graph through matmul / bmm / linear (class library: different summation orders on the
//      two backends): values and gradients within |cpu - cuda| <= 1e-5 (1 + max|cpu|) per output,
//      the largest difference printed (the products here have n <= 7 terms of size <= 1).
//      Pooling joins (1); fused attention is bit for bit with the determinism switch on and
//      joins (2) as well (with the switch off its CUDA backward is the fast tensor-core one, float32
//      grade); convolution and multi-head attention (products) join (2). The attention nodes
//      reading views (attention_qkv, attention: grouped heads, len_q != len_k) likewise.
//      Every graph of (1) and (2) runs twice: as recorded, and with every node but the output
//      released and the freeing backward (tlrt_tape_release, TLRT_TAPE_BACKWARD_FREE).
//  (3) 200-step training loops on the CUDA tape (an MLP; a conv net with pooling and multi-head
//      attention): live bytes on CUDA(0) flat after warm-up.
// Exits 77 (skipped) unless a CUDA device is usable.
#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "parity.hpp"

namespace {

using th::Buf;

struct Leaf {
  std::vector<uint64_t> dims;
  std::vector<float> data;
};
using Build = std::function<uint64_t(tlrt_tape *, const std::vector<uint64_t> &)>;

// Records the graph on a tape on dev, backward from its output with seed w, and moves the output
// value and every leaf gradient into outs. freeing: every node but the output released before a
// backward that frees the graph (tlrt_tape_release, TLRT_TAPE_BACKWARD_FREE).
tlrt_status run_graph(tlrt_device dev, const std::vector<Leaf> &leaves, const Build &build,
                      std::vector<Buf> &outs, bool freeing = false) {
  tlrt_tape *t = nullptr;
  tlrt_status s = tlrt_tape_new(dev, &t);
  if (s != TLRT_OK) return s;
  std::vector<uint64_t> ids;
  for (const Leaf &l : leaves) {
    Buf b(th::upload(l.data, dev));
    uint64_t id = 0;
    s = tlrt_tape_leaf(t, b.get(), l.dims.data(), (uint32_t)l.dims.size(), true, &id);
    if (s != TLRT_OK) break;
    ids.push_back(id);
  }
  uint64_t out = UINT64_MAX;
  if (s == TLRT_OK) out = build(t, ids);
  if (out == UINT64_MAX && s == TLRT_OK) s = TLRT_ERR_INTERNAL;
  if (s == TLRT_OK) {
    uint64_t dims[8];
    uint32_t rank = 0;
    tlrt_tape_shape(t, out, dims, &rank, nullptr);
    uint64_t n = 1;
    for (uint32_t i = 0; i < rank; ++i) n *= dims[i];
    Buf w(th::upload(th::Rng(0xABC).vec(n, -1, 1), dev));
    if (freeing) {
      for (uint64_t i = 0; i < (out & 0xFFFFFFFFull); ++i) {
        const tlrt_status r = tlrt_tape_release(t, (out & ~0xFFFFFFFFull) | i);
        if (r != TLRT_OK && r != TLRT_ERR_RELEASED) s = r;  // inner nodes are released already
      }
      if (s == TLRT_OK) s = tlrt_tape_backward_ex(t, out, w.get(), TLRT_TAPE_BACKWARD_FREE);
    } else {
      s = tlrt_tape_backward_seed(t, out, w.get());
    }
  }
  if (s == TLRT_OK) {
    outs.emplace_back();
    s = tlrt_tape_value(t, out, outs.back().out());
  }
  for (size_t i = 0; s == TLRT_OK && i < ids.size(); ++i) {
    outs.emplace_back();
    s = tlrt_tape_grad(t, ids[i], outs.back().out());
  }
  tlrt_tape_free(t);
  return s;
}

std::vector<float> uni(uint64_t n, uint64_t salt, float lo = -1, float hi = 1) {
  return th::Rng(salt).vec(n, lo, hi);
}

#define G(body)                                                       \
  [&](tlrt_tape *t, const std::vector<uint64_t> &x) -> uint64_t {     \
    uint64_t a = 0, b = 0, c = 0, d = 0, e = 0, o = 0;                \
    (void)a; (void)b; (void)c; (void)d; (void)e;                      \
    if (!(body)) return UINT64_MAX;                                   \
    return o;                                                         \
  }
// The same for the training loops: the input leaf x and the parameter leaves id.
#define GL(body)                                                                \
  [&](tlrt_tape *t, uint64_t x, const std::vector<uint64_t> &id) -> uint64_t {  \
    uint64_t a = 0, b = 0, c = 0, d = 0, e = 0, o = 0;                          \
    (void)a; (void)b; (void)c; (void)d; (void)e; (void)id;                      \
    if (!(body)) return UINT64_MAX;                                             \
    return o;                                                                   \
  }
#define OK(call) ((call) == TLRT_OK)

// Each graph also runs with every node released and the freeing backward (the same calls, so
// the same bits on each device; compared across devices as the kept graph).
void bitwise(const char *name, std::vector<Leaf> leaves, const Build &build, bool flip = true) {
  for (const bool freeing : {false, true})
    parity::run_multi(
        std::string("tape ") + name + (freeing ? " (released, freeing backward)" : ""),
        [&](tlrt_device dev, std::vector<Buf> &outs) {
          return run_graph(dev, leaves, build, outs, freeing);
        },
        flip);
}

void library_once(const char *name, const std::vector<Leaf> &leaves, const Build &build,
                  bool freeing) {
  std::vector<Buf> c, g;
  TH_OK(run_graph(parity::kCpu, leaves, build, c, freeing));
  TH_OK(run_graph(parity::kGpu, leaves, build, g, freeing));
  if (c.size() != g.size()) {
    TH_CHECK(c.size() == g.size());
    return;
  }
  double worst = 0;
  for (size_t k = 0; k < c.size(); ++k) {
    const std::vector<float> a = th::download(c[k].get()), b = th::download(g[k].get());
    TH_CHECK(a.size() == b.size());
    double m = 0;
    for (float v : a) m = std::max(m, (double)std::fabs(v));
    for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
      const double d = std::fabs((double)a[i] - b[i]);
      worst = std::max(worst, d / (1 + m));
      TH_CHECK_MSG(d <= 1e-5 * (1 + m), "tape %s output %zu [%zu]: cpu %s cuda %s", name, k, i,
                   th::hex(a[i]).c_str(), th::hex(b[i]).c_str());
    }
  }
  std::printf("tape %s (library%s): largest |cpu - cuda| / (1 + max|g|) = %.3g\n", name,
              freeing ? ", released, freeing backward" : "", worst);
}

void library(const char *name, std::vector<Leaf> leaves, const Build &build) {
  for (const bool freeing : {false, true}) library_once(name, leaves, build, freeing);
}

// A 200-step training loop on the CUDA tape: cross entropy of the logits that `logits` records
// from the input leaf and the parameter leaves (uniform in +-0.2, vectors +-0.1), SGD through
// tlrt_axpy. Live bytes on CUDA(0) stay flat after warm-up and the loss falls.
using Logits = std::function<uint64_t(tlrt_tape *, uint64_t, const std::vector<uint64_t> &)>;
void training_loop_flat(const char *name, const std::vector<uint64_t> &xd,
                        const std::vector<std::vector<uint64_t>> &pd, uint64_t classes,
                        double lr, const Logits &logits) {
  const tlrt_device dev = parity::kGpu;
  th::Rng rng(3);
  uint64_t xn = 1;
  for (uint64_t d : xd) xn *= d;
  Buf X(th::upload(rng.vec(xn), dev));
  std::vector<uint64_t> labels(xd[0]);
  for (uint64_t i = 0; i < xd[0]; ++i) labels[i] = i % classes;
  std::vector<Buf> p;
  for (const auto &d : pd) {
    uint64_t n = 1;
    for (uint64_t e : d) n *= e;
    const float r = d.size() > 1 ? 0.2f : 0.1f;
    p.emplace_back(th::upload(rng.vec(n, -r, r), dev));
  }
  tlrt_tape *t = nullptr;
  TH_OK(tlrt_tape_new(dev, &t));
  tlrt_allocator_stats warm{};
  float first = 0, last = 0;
  for (int step = 0; step < 200; ++step) {
    uint64_t x, loss = UINT64_MAX;
    std::vector<uint64_t> id(p.size());
    TH_OK(tlrt_tape_leaf(t, X.get(), xd.data(), (uint32_t)xd.size(), false, &x));
    for (size_t i = 0; i < p.size(); ++i)
      TH_OK(tlrt_tape_leaf(t, p[i].get(), pd[i].data(), (uint32_t)pd[i].size(), true, &id[i]));
    const uint64_t z = logits(t, x, id);
    TH_CHECK_MSG(z != UINT64_MAX, "%s: recording failed: %s", name, tlrt_last_error());
    TH_OK(tlrt_tape_cross_entropy(t, z, labels.data(), &loss));
    TH_OK(tlrt_tape_backward(t, loss));
    if (step == 0 || step == 199) {
      Buf lv;
      TH_OK(tlrt_tape_value(t, loss, lv.out()));
      if (lv.get()) (step == 0 ? first : last) = th::download(lv.get())[0];
    }
    for (size_t i = 0; i < p.size(); ++i) {
      Buf g, np;
      TH_OK(tlrt_tape_grad(t, id[i], g.out()));
      TH_OK(tlrt_axpy(p[i].get(), g.get(), -lr, np.out()));
      p[i] = std::move(np);
    }
    TH_OK(tlrt_tape_reset(t));
    if (step == 10) warm = th::stats(dev);
  }
  const tlrt_allocator_stats end = th::stats(dev);
  TH_CHECK_MSG(end.live_bytes == warm.live_bytes,
               "%s: CUDA live bytes %llu after warm-up, %llu at end", name,
               (unsigned long long)warm.live_bytes, (unsigned long long)end.live_bytes);
  TH_CHECK_MSG(last < first, "%s: CUDA training loss %g -> %g", name, first, last);
  std::printf("tape CUDA training loop (%s): loss %.4f -> %.4f, live bytes %llu flat\n", name,
              first, last, (unsigned long long)end.live_bytes);
  tlrt_tape_free(t);
}

void training_loops_flat() {
  training_loop_flat("mlp", {16, 32}, {{24, 32}, {24}, {5, 24}, {5}}, 5, 0.2,
                     GL(OK(tlrt_tape_linear(t, x, id[0], id[1], &a)) &&
                       OK(tlrt_tape_gelu(t, a, &b)) &&
                       OK(tlrt_tape_linear(t, b, id[2], id[3], &o))));
  training_loop_flat("mlp, fused gelu", {16, 32}, {{24, 32}, {24}, {5, 24}, {5}}, 5, 0.2,
                     GL(OK(tlrt_tape_linear_gelu(t, x, id[0], id[1], &b)) &&
                       OK(tlrt_tape_linear(t, b, id[2], id[3], &o))));
  // conv 3x3 (1 -> 4, padding 1) + relu, 2x2 max pool, causal multi-head self-attention over
  // the 4 channels (9 features each, 3 heads of 3), 3x3 average pool, linear (4 -> 3).
  const uint64_t seq[3] = {6, 4, 9}, img[4] = {6, 4, 3, 3}, flat[2] = {6, 4};
  training_loop_flat("conv net", {6, 1, 6, 6},
                     {{4, 1, 3, 3}, {4}, {9, 9}, {9, 9}, {9, 9}, {9, 9}, {3, 4}, {3}}, 3, 0.2,
                     GL(OK(tlrt_tape_conv2d(t, x, id[0], id[1], 1, 1, 1, 1, 1, 1, 1, &a)) &&
                       OK(tlrt_tape_relu(t, a, &b)) &&
                       OK(tlrt_tape_maxpool2d(t, b, 2, 2, 2, 2, 0, 0, &c)) &&
                       OK(tlrt_tape_reshape(t, c, seq, 3, &d)) &&
                       OK(tlrt_tape_multi_head_attention(
                           t, d, id[2], id[3], id[4], id[5], TLRT_TAPE_NONE, TLRT_TAPE_NONE,
                           TLRT_TAPE_NONE, TLRT_TAPE_NONE, 3, true, &e)) &&
                       OK(tlrt_tape_reshape(t, e, img, 4, &a)) &&
                       OK(tlrt_tape_avgpool2d(t, a, 3, 3, 1, 1, 0, 0, true, &b)) &&
                       OK(tlrt_tape_reshape(t, b, flat, 2, &c)) &&
                       OK(tlrt_tape_linear(t, c, id[6], id[7], &o))));
}

}  // namespace

int main() {
  if (!parity::start("parity_tape")) return 77;
  const std::vector<uint64_t> s = {6, 10};
  bitwise("elementwise chain", {{s, uni(60, 1, -2, 2)}, {s, uni(60, 2, 0.5f, 2)}},
          G(OK(tlrt_tape_mul(t, x[0], x[1], &a)) && OK(tlrt_tape_div(t, a, x[1], &b)) &&
            OK(tlrt_tape_gelu(t, b, &c)) && OK(tlrt_tape_tanh(t, c, &d)) &&
            OK(tlrt_tape_sigmoid(t, d, &e)) && OK(tlrt_tape_softplus(t, e, &a)) &&
            OK(tlrt_tape_exp(t, a, &b)) && OK(tlrt_tape_log(t, x[1], &c)) &&
            OK(tlrt_tape_sqrt(t, x[1], &d)) && OK(tlrt_tape_inv(t, d, &e)) &&
            OK(tlrt_tape_axpy(t, b, c, 0.3, &a)) && OK(tlrt_tape_max(t, a, e, &b)) &&
            OK(tlrt_tape_min(t, b, x[0], &c)) && OK(tlrt_tape_relu(t, c, &d)) &&
            OK(tlrt_tape_abs(t, x[0], &e)) && OK(tlrt_tape_clamp(t, e, 0.1, 1.5, &a)) &&
            OK(tlrt_tape_safe_log(t, a, 1e-3, &b)) && OK(tlrt_tape_sub(t, d, b, &c)) &&
            OK(tlrt_tape_scale(t, c, 0.7, &d)) && OK(tlrt_tape_neg(t, d, &o))));
  bitwise("norms and softmax", {{s, uni(60, 3, -3, 3)}, {{10}, uni(10, 4)}, {{10}, uni(10, 5)},
                                {{6}, uni(6, 6)}, {{6}, uni(6, 7)}},
          G(OK(tlrt_tape_layer_norm(t, x[0], x[1], x[2], 1e-5, &a)) &&
            OK(tlrt_tape_softmax(t, a, &b)) && OK(tlrt_tape_log_softmax(t, x[0], &c)) &&
            OK(tlrt_tape_add(t, b, c, &d)) &&
            OK(tlrt_tape_batchnorm(t, d, x[1], x[2], 1e-5, &e)) &&
            OK(tlrt_tape_transpose2d(t, e, &a)) &&  // (10, 6)
            OK(tlrt_tape_layer_norm(t, a, x[3], x[4], 1e-5, &o))));
  // SiLU, RMS norm (with and without gamma) and dropout (its mask from the key: the same bits on
  // both devices, recomputed by the backward).
  bitwise("silu, rms norm, dropout", {{s, uni(60, 8, -4, 4)}, {{10}, uni(10, 9)}, {{6}, uni(6, 10)}},
          G(OK(tlrt_tape_silu(t, x[0], &a)) &&
            OK(tlrt_tape_rms_norm(t, a, x[1], 1e-5, &b)) &&
            OK(tlrt_tape_dropout(t, b, 0.3, 99, &c)) && OK(tlrt_tape_transpose2d(t, c, &d)) &&
            OK(tlrt_tape_rms_norm(t, d, TLRT_TAPE_NONE, 1e-6, &e)) &&  // (10, 6)
            OK(tlrt_tape_silu(t, e, &a)) && OK(tlrt_tape_rms_norm(t, a, x[2], 0.0, &b)) &&
            OK(tlrt_tape_dropout(t, b, 0.0, 5, &c)) &&
            OK(tlrt_tape_dropout(t, c, 0.9, 123456789, &o))));
  {
    const uint64_t idx[7] = {3, 3, 59, 0, 100, 17, 3}, rows[4] = {5, 1, 5, 9};
    const uint64_t labels[6] = {0, 9, 3, 3, 7, 1};
    bitwise("reductions, layout, indexing", {{s, uni(60, 8, -2, 2)}, {{10}, uni(10, 9)}},
            G(OK(tlrt_tape_reduce_max_axis1(t, x[0], &a)) &&           // (6)
              OK(tlrt_tape_reduce_max_axis0(t, x[0], &b)) &&           // (10)
              OK(tlrt_tape_concat1d(t, a, b, &c)) &&                   // (16)
              OK(tlrt_tape_slice1d(t, c, 2, 10, &d)) &&                // (10)
              OK(tlrt_tape_mul(t, d, x[1], &e)) &&                     // (10)
              OK(tlrt_tape_broadcast_vec_to_rows(t, e, 6, &a)) &&      // (6, 10)
              OK(tlrt_tape_add(t, a, x[0], &b)) &&
              OK(tlrt_tape_gather_rows(t, b, rows, 4, &c)) &&          // (4, 10)
              OK(tlrt_tape_concat_axis0(t, b, c, &d)) &&               // (10, 10)
              OK(tlrt_tape_slice_axis0(t, d, 1, 6, &e)) &&             // (6, 10)
              OK(tlrt_tape_reduce_sum_axis0(t, e, &a)) &&              // (10)
              OK(tlrt_tape_broadcast_vec_to_cols(t, a, 3, &b)) &&      // (10, 3)
              OK(tlrt_tape_reduce_sum_axis1(t, b, &c)) &&              // (10)
              OK(tlrt_tape_gather_vec(t, e, idx, 7, &d)) &&            // (7)
              OK(tlrt_tape_reduce_mean(t, d, &a)) &&                   // ()
              OK(tlrt_tape_cross_entropy(t, e, labels, &b)) &&         // ()
              OK(tlrt_tape_add(t, a, b, &d)) && OK(tlrt_tape_reduce_sum(t, c, &a)) &&
              OK(tlrt_tape_mul(t, d, a, &o))));
  }
  {
    const uint64_t d3[3] = {2, 3, 10}, od[3] = {2, 3, 10};
    const uint32_t perm[3] = {2, 0, 1}, map[3] = {0, 1, 2};
    const uint64_t sidx[4] = {59, 0, 59, 1000};
    bitwise("permute, broadcast, scatter", {{s, uni(60, 10)}, {{3, 1}, uni(3, 11)}, {{4}, uni(4, 12)}},
            G(OK(tlrt_tape_reshape(t, x[0], d3, 3, &a)) &&
              OK(tlrt_tape_permute(t, a, perm, &b)) &&                       // (10, 2, 3)
              OK(tlrt_tape_swap_adjacent_at_depth(t, b, 0, &c)) &&           // (2, 10, 3)
              OK(tlrt_tape_reduce_sum_axis(t, c, 1, &d)) &&                  // (2, 3)
              OK(tlrt_tape_broadcast_to(t, x[1], od, 3, map, &e)) &&         // (2, 3, 10)
              OK(tlrt_tape_mul(t, e, a, &b)) &&
              OK(tlrt_tape_scatter_add(t, b, x[2], sidx, 4, &c)) &&          // (2, 3, 10)
              OK(tlrt_tape_reduce_sum_axis(t, c, 2, &e)) &&                  // (2, 3)
              OK(tlrt_tape_add(t, e, d, &o))));
  }
  bitwise("selective scans", {{{4}, uni(4, 19, 0.5f, 0.95f)}, {{4}, uni(4, 20)},
                              {{70, 4}, uni(280, 21)}, {{4}, uni(4, 22)},
                              {{70, 4}, uni(280, 23, 0.5f, 0.99f)}},
          G(OK(tlrt_tape_selective_scan_diag(t, x[0], x[1], x[2], x[3], &a)) &&
            OK(tlrt_tape_selective_scan_diag_var(t, x[4], a, x[2], x[3], &o))));
  library("spectral convolution", {{{16, 3}, uni(48, 24)}, {{4, 3, 3}, uni(36, 25)},
                                   {{4, 3, 3}, uni(36, 26)}},
          G(OK(tlrt_tape_spectral_conv1d_rfft(t, x[0], x[1], x[2], &a)) &&
            OK(tlrt_tape_tanh(t, a, &o))));
  {
    // Pooling and attention: max pool exact, average pool and every backward an ordered
    // reduction, attention the same IEEE operations on both backends with the determinism switch
    // on: bit for bit. With it off the CUDA attention forward is the 3xTF32 kernel (class
    // library): the same graph again, compared as (2).
    const uint64_t seq[3] = {2, 6, 5};
    std::vector<float> m(6 * 6);
    th::Rng r(30);
    for (float &v : m) v = r.uniform(0, 1) < 0.25f ? 0.0f : 1.0f;
    Buf mc(th::upload(m)), mg(th::upload(m, parity::kGpu));
    const std::vector<Leaf> leaves = {{{2, 2, 7, 6}, uni(168, 27, -2, 2)},
                                      {{2, 6, 5}, uni(60, 28)},
                                      {{2, 6, 5}, uni(60, 29)}};
    const Build graph = [&](tlrt_tape *t, const std::vector<uint64_t> &x) -> uint64_t {
      tlrt_device dev = 0;
      uint64_t a, b, c, d, e, f, o;
      if (tlrt_tape_device(t, &dev) != TLRT_OK) return UINT64_MAX;
      const tlrt_buffer *mask = dev == parity::kCpu ? mc.get() : mg.get();
      if (!(OK(tlrt_tape_maxpool2d(t, x[0], 3, 2, 2, 1, 1, 1, &a)) &&     // (2, 2, 4, 7)
            OK(tlrt_tape_avgpool2d(t, a, 2, 2, 1, 2, 1, 0, false, &b)) && // (2, 2, 5, 3)
            OK(tlrt_tape_avgpool2d(t, x[0], 2, 3, 2, 1, 1, 1, true, &c)) &&
            OK(tlrt_tape_reshape(t, b, seq, 3, &d)) &&                    // (2, 6, 5)
            OK(tlrt_tape_flash_attention(t, d, x[1], x[2], mask, 0.45, true, -INFINITY,
                                         &e)) &&
            OK(tlrt_tape_flash_attention(t, e, e, x[1], nullptr, 0.3, false, -1000.0,
                                         &f)) &&
            OK(tlrt_tape_reduce_sum(t, c, &a)) && OK(tlrt_tape_reduce_sum(t, f, &b)) &&
            OK(tlrt_tape_add(t, a, b, &o))))
        return UINT64_MAX;
      return o;
    };
    const bool was_det = tlrt_set_deterministic(true);
    bitwise("pooling and attention", leaves, graph, /*flip=*/false);
    tlrt_set_deterministic(false);
    library("pooling and attention (determinism switch off)", leaves, graph);
    tlrt_set_deterministic(was_det);
  }
  {
    // The view-reading attention nodes: a fused qkv node (grouped heads, causal, 70 tokens across
    // a 64-key tile) feeding a cross-attention node with len_q != len_k; bit for bit with the
    // determinism switch on, (2) with it off.
    const std::vector<Leaf> leaves = {{{2, 70, 16}, uni(2240, 45)},  // heads 4 + 2 * 2, d = 2
                                      {{2, 9, 4}, uni(72, 46)},       // keys: 9 tokens, 2 heads
                                      {{2, 9, 4}, uni(72, 47)}};
    const Build graph = [&](tlrt_tape *t, const std::vector<uint64_t> &x) -> uint64_t {
      uint64_t a, b, o;
      if (!(OK(tlrt_tape_attention_qkv(t, x[0], 4, 2, true, 0.6, &a)) &&   // (2, 70, 8)
            OK(tlrt_tape_attention(t, a, x[1], x[2], 4, 2, true, 0.5, &b)) &&  // (2, 70, 8)
            OK(tlrt_tape_reduce_sum(t, b, &o))))
        return UINT64_MAX;
      return o;
    };
    const bool was_det = tlrt_set_deterministic(true);
    bitwise("attention of views (fused qkv, grouped heads, len_q != len_k)", leaves, graph,
            /*flip=*/false);
    tlrt_set_deterministic(false);
    library("attention of views (determinism switch off)", leaves, graph);
    tlrt_set_deterministic(was_det);
  }
  {
    const uint64_t s1[1] = {2}, p1[1] = {1}, d1[1] = {2}, flat[2] = {3, 16};
    library("convolution", {{{3, 4, 6, 5}, uni(360, 31)}, {{6, 2, 3, 2}, uni(72, 32)},
                            {{6}, uni(6, 33)}, {{3, 6, 9}, uni(162, 34)}, {{2, 6, 3}, uni(36, 35)}},
            G(OK(tlrt_tape_conv2d(t, x[0], x[1], x[2], 2, 1, 1, 1, 1, 2, 2, &a)) &&  // (3,6,3,4)
              OK(tlrt_tape_tanh(t, a, &b)) &&
              OK(tlrt_tape_conv(t, x[3], x[4], TLRT_TAPE_NONE, s1, p1, d1, 1, &c)) &&  // (3,2,4)
              OK(tlrt_tape_maxpool2d(t, b, 2, 2, 1, 1, 0, 0, &d)) &&                  // (3,6,2,3)
              OK(tlrt_tape_reduce_sum(t, d, &e)) && OK(tlrt_tape_reduce_sum(t, c, &a)) &&
              OK(tlrt_tape_mul(t, e, a, &o))));
    library("cnn and multi-head attention",
            {{{3, 1, 4, 4}, uni(48, 36)}, {{4, 1, 3, 3}, uni(36, 37)}, {{4}, uni(4, 38)},
             {{4, 4}, uni(16, 39)}, {{4, 4}, uni(16, 40)}, {{4, 4}, uni(16, 41)},
             {{4, 4}, uni(16, 42)}, {{4}, uni(4, 43)}, {{5, 16}, uni(80, 44)}},
            [&](tlrt_tape *t, const std::vector<uint64_t> &x) -> uint64_t {
              const uint64_t seq[3] = {3, 4, 4};
              const uint64_t labels[3] = {0, 4, 2};
              uint64_t a, b, c, d, e, f, o;
              if (!(OK(tlrt_tape_conv2d(t, x[0], x[1], x[2], 1, 1, 1, 1, 1, 1, 1, &a)) &&
                    OK(tlrt_tape_gelu(t, a, &b)) &&
                    OK(tlrt_tape_avgpool2d(t, b, 2, 2, 2, 2, 0, 0, true, &c)) &&  // (3, 4, 2, 2)
                    OK(tlrt_tape_reshape(t, c, seq, 3, &d)) &&
                    OK(tlrt_tape_multi_head_attention(t, d, x[3], x[4], x[5], x[6], x[7], x[7],
                                                      TLRT_TAPE_NONE, x[7], 2, true, &e)) &&
                    OK(tlrt_tape_reshape(t, e, flat, 2, &f)) &&
                    OK(tlrt_tape_matmul(t, f, x[8], false, true, &a)) &&
                    OK(tlrt_tape_cross_entropy(t, a, labels, &o))))
                return UINT64_MAX;
              return o;
            });
  }
  library("matmul / bmm / linear / mse",
          {{{5, 7}, uni(35, 13)}, {{4, 7}, uni(28, 14)}, {{4}, uni(4, 15)}, {{2, 4, 3}, uni(24, 16)},
           {{2, 3, 5}, uni(30, 17)}, {{5, 4}, uni(20, 18)}},
          G(OK(tlrt_tape_linear(t, x[0], x[1], x[2], &a)) &&             // (5, 4)
            OK(tlrt_tape_tanh(t, a, &b)) && OK(tlrt_tape_matmul(t, b, x[5], true, false, &c)) &&
            OK(tlrt_tape_bmm(t, x[3], x[4], false, false, &d)) &&        // (2, 4, 5)
            OK(tlrt_tape_reduce_sum_axis(t, d, 0, &e)) &&                // (4, 5)
            OK(tlrt_tape_transpose2d(t, e, &a)) &&                       // (5, 4)
            OK(tlrt_tape_mse_loss(t, a, x[5], &b)) && OK(tlrt_tape_reduce_sum(t, c, &d)) &&
            OK(tlrt_tape_add(t, b, d, &o))));
  training_loops_flat();
  parity::print_summary("parity_tape");
  return th::finish("test_parity_tape");
}
