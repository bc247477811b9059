// The tape's memory contract (abi/tlrt_tape.h, MEMORY) on the CPU, with the allocator's live and
// peak bytes as the measure:
//   - what each rule keeps, exactly: per recording call, after the host released the inputs and
//     the output, the bytes still live are those of the values the rule reads plus its workspace
//     (mul / div / matmul keep only what the inputs that require a gradient need); a freeing
//     backward from the released output then leaves only the leaf gradients, a reset nothing;
//   - a small MLP and a GPT-like chain (embedding, layer norm, multi-head attention, dropout,
//     GELU MLP, residuals, cross-entropy) give bit for bit the same loss and gradients whether the
//     host keeps every node and uses tlrt_tape_backward, releases each node after its last use,
//     or also frees the graph while differentiating;
//   - the peak bytes of one step of that chain: kept > released > released + freeing backward;
//   - use after release and a second backward over a freed graph fail with TLRT_ERR_RELEASED and
//     change nothing; a released leaf keeps its gradient; inner nodes of composites are released;
//     a freeing backward that fails half-way (fault injection) leaves the leaf gradients as they
//     were.
// Seeded (TLRT_TEST_SEED); the peak test runs first, while the process's peak is still its own.
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

uint64_t live() { return th::stats().live_bytes; }

uint64_t numel(const std::vector<uint64_t> &d) {
  uint64_t n = 1;
  for (uint64_t x : d) n *= x;
  return n;
}

// A leaf whose buffer only the tape references (the host's handle is freed at once).
uint64_t leaf(tlrt_tape *t, const std::vector<float> &v, const std::vector<uint64_t> &dims,
              bool rg) {
  Buf b(th::upload(v));
  uint64_t id = UINT64_MAX;
  TH_OK(tlrt_tape_leaf(t, b.get(), dims.data(), (uint32_t)dims.size(), rg, &id));
  return id;
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

Buf ints(const std::vector<int32_t> &v) {
  Buf b;
  TH_OK(tlrt_buffer_from_i32(kCpu, v.data(), v.size(), b.out()));
  return b;
}

// ---- what each rule keeps ---------------------------------------------------------------------

struct In {
  std::vector<uint64_t> dims;
  bool rg;
};

// One recording call on fresh leaves: `rec` records it and returns the output id; `kept` is the
// bytes its rule must hold once the host has released the leaves and the output (x the leaves'
// byte sizes, out the output's).
struct ReadCase {
  const char *name;
  std::vector<In> in;
  std::function<uint64_t(tlrt_tape *, const std::vector<uint64_t> &)> rec;
  std::function<uint64_t(const std::vector<uint64_t> &x, uint64_t out)> kept;
};

#define REC(call)                                                   \
  [&](tlrt_tape *t, const std::vector<uint64_t> &x) -> uint64_t {   \
    uint64_t o = UINT64_MAX;                                        \
    (void)x;                                                        \
    TH_OK(call);                                                    \
    return o;                                                       \
  }
#define KEPT(expr) [](const std::vector<uint64_t> &x, uint64_t out) -> uint64_t { \
    (void)x;                                                                     \
    (void)out;                                                                   \
    return (expr);                                                               \
  }

void test_reads_exact() {
  th::Rng rng(41);
  const std::vector<uint64_t> s34 = {3, 4}, s4 = {4}, s23 = {2, 3}, s43 = {4, 3}, a124 = {1, 2, 4};
  // Index buffers: the test holds them across all cases, so the tape's references to them add
  // no bytes.
  Buf rows = ints({2, 0, 1, 2}), labels = ints({1, 3, 0});
  const uint64_t idx[3] = {0, 2, 2};
  const uint32_t perm[2] = {1, 0};
  const uint64_t d12[2] = {1, 12};
  const std::vector<ReadCase> cases = {
      {"add", {{s34, true}, {s34, true}}, REC(tlrt_tape_add(t, x[0], x[1], &o)), KEPT(0)},
      {"sub", {{s34, true}, {s34, false}}, REC(tlrt_tape_sub(t, x[0], x[1], &o)), KEPT(0)},
      {"axpy", {{s34, true}, {s34, true}}, REC(tlrt_tape_axpy(t, x[0], x[1], 0.5, &o)), KEPT(0)},
      {"mul (both)", {{s34, true}, {s34, true}}, REC(tlrt_tape_mul(t, x[0], x[1], &o)),
       KEPT(x[0] + x[1])},
      {"mul (a only)", {{s34, true}, {s34, false}}, REC(tlrt_tape_mul(t, x[0], x[1], &o)),
       KEPT(x[1])},
      {"mul (b only)", {{s34, false}, {s34, true}}, REC(tlrt_tape_mul(t, x[0], x[1], &o)),
       KEPT(x[0])},
      {"mul (neither)", {{s34, false}, {s34, false}}, REC(tlrt_tape_mul(t, x[0], x[1], &o)),
       KEPT(0)},
      {"div (a only)", {{s34, true}, {s34, false}}, REC(tlrt_tape_div(t, x[0], x[1], &o)),
       KEPT(x[1])},
      {"div (both)", {{s34, true}, {s34, true}}, REC(tlrt_tape_div(t, x[0], x[1], &o)),
       KEPT(x[1] + out)},
      {"max", {{s34, true}, {s34, false}}, REC(tlrt_tape_max(t, x[0], x[1], &o)),
       KEPT(x[0] + x[1])},
      {"neg", {{s34, true}}, REC(tlrt_tape_neg(t, x[0], &o)), KEPT(0)},
      {"scale", {{s34, true}}, REC(tlrt_tape_scale(t, x[0], 3.0, &o)), KEPT(0)},
      {"relu", {{s34, true}}, REC(tlrt_tape_relu(t, x[0], &o)), KEPT(x[0])},
      {"exp", {{s34, true}}, REC(tlrt_tape_exp(t, x[0], &o)), KEPT(x[0])},
      {"tanh", {{s34, true}}, REC(tlrt_tape_tanh(t, x[0], &o)), KEPT(x[0])},
      {"clamp", {{s34, true}}, REC(tlrt_tape_clamp(t, x[0], -0.5, 0.5, &o)), KEPT(x[0])},
      {"dropout", {{s34, true}}, REC(tlrt_tape_dropout(t, x[0], 0.5, 77, &o)), KEPT(0)},
      {"dropout p=0", {{s34, true}}, REC(tlrt_tape_dropout(t, x[0], 0.0, 77, &o)), KEPT(0)},
      {"reduce_sum", {{s34, true}}, REC(tlrt_tape_reduce_sum(t, x[0], &o)), KEPT(0)},
      {"reduce_mean", {{s34, true}}, REC(tlrt_tape_reduce_mean(t, x[0], &o)), KEPT(0)},
      {"reduce_sum_axis1", {{s34, true}}, REC(tlrt_tape_reduce_sum_axis1(t, x[0], &o)), KEPT(0)},
      {"reduce_max_axis0", {{s34, true}}, REC(tlrt_tape_reduce_max_axis0(t, x[0], &o)),
       KEPT(x[0] + out)},
      {"reshape", {{s34, true}}, REC(tlrt_tape_reshape(t, x[0], d12, 2, &o)), KEPT(0)},
      {"transpose2d", {{s34, true}}, REC(tlrt_tape_transpose2d(t, x[0], &o)), KEPT(0)},
      {"permute", {{s34, true}}, REC(tlrt_tape_permute(t, x[0], perm, &o)), KEPT(0)},
      {"broadcast_vec_to_rows", {{s4, true}},
       REC(tlrt_tape_broadcast_vec_to_rows(t, x[0], 3, &o)), KEPT(0)},
      {"concat_axis0", {{s34, true}, {s34, true}}, REC(tlrt_tape_concat_axis0(t, x[0], x[1], &o)),
       KEPT(0)},
      {"slice_axis0", {{s34, true}}, REC(tlrt_tape_slice_axis0(t, x[0], 1, 2, &o)), KEPT(0)},
      {"gather_rows", {{s34, true}}, REC(tlrt_tape_gather_rows(t, x[0], idx, 3, &o)), KEPT(0)},
      {"gather_rows_ibuf", {{s34, true}},
       REC(tlrt_tape_gather_rows_ibuf(t, x[0], rows.get(), &o)), KEPT(0)},
      {"softmax", {{s34, true}}, REC(tlrt_tape_softmax(t, x[0], &o)), KEPT(out)},
      {"log_softmax", {{s34, true}}, REC(tlrt_tape_log_softmax(t, x[0], &o)), KEPT(out)},
      // x and gamma, and the statistics mean and inv_std (3 rows each); not beta.
      {"layer_norm", {{s34, true}, {s4, true}, {s4, true}},
       REC(tlrt_tape_layer_norm(t, x[0], x[1], x[2], 1e-5, &o)), KEPT(x[0] + x[1] + 2 * 3 * 4)},
      {"rms_norm", {{s34, true}, {s4, true}}, REC(tlrt_tape_rms_norm(t, x[0], x[1], 1e-5, &o)),
       KEPT(x[0] + x[1] + 3 * 4)},
      {"matmul (both)", {{s23, true}, {{3, 4}, true}},
       REC(tlrt_tape_matmul(t, x[0], x[1], false, false, &o)), KEPT(x[0] + x[1])},
      {"matmul (a only)", {{s23, true}, {{3, 4}, false}},
       REC(tlrt_tape_matmul(t, x[0], x[1], false, false, &o)), KEPT(x[1])},
      {"matmul (b only)", {{s23, false}, {{3, 4}, true}},
       REC(tlrt_tape_matmul(t, x[0], x[1], false, false, &o)), KEPT(x[0])},
      {"linear", {{s23, false}, {s43, true}, {s4, true}},
       REC(tlrt_tape_linear(t, x[0], x[1], x[2], &o)), KEPT(x[0] + x[1])},
      {"linear_gelu", {{s23, true}, {s43, true}, {s4, true}},
       REC(tlrt_tape_linear_gelu(t, x[0], x[1], x[2], &o)), KEPT(x[0] + x[1] + out)},
      // q, k, v, the output, and lse (bh * n floats).
      {"flash_attention", {{a124, true}, {a124, true}, {a124, true}},
       REC(tlrt_tape_flash_attention(t, x[0], x[1], x[2], nullptr, 0.5, true, -INFINITY, &o)),
       KEPT(x[0] + x[1] + x[2] + out + 2 * 4)},
      {"maxpool2d", {{{1, 1, 4, 4}, true}}, REC(tlrt_tape_maxpool2d(t, x[0], 2, 2, 2, 2, 0, 0, &o)),
       KEPT(x[0])},
      {"avgpool2d", {{{1, 1, 4, 4}, true}},
       REC(tlrt_tape_avgpool2d(t, x[0], 2, 2, 2, 2, 0, 0, true, &o)), KEPT(0)},
      {"conv2d", {{{1, 2, 4, 4}, true}, {{3, 2, 3, 3}, true}, {{3}, true}},
       REC(tlrt_tape_conv2d(t, x[0], x[1], x[2], 1, 1, 1, 1, 1, 1, 1, &o)), KEPT(x[0] + x[1])},
      // The logits and two floats per row (the labels are counted apart).
      {"cross_entropy_ignore", {{s34, true}},
       REC(tlrt_tape_cross_entropy_ignore(t, x[0], labels.get(), 0, &o)),
       KEPT(x[0] + 2 * 3 * 4)},
      // Composites: mse's square reads its input d = pred - target (a buffer of pred's size);
      // cross_entropy's log_softmax reads its output (the logits' size).
      {"mse_loss", {{s34, true}, {s34, false}}, REC(tlrt_tape_mse_loss(t, x[0], x[1], &o)),
       KEPT(x[0])},
      {"cross_entropy", {{s34, true}}, REC(tlrt_tape_cross_entropy(t, x[0], idx, &o)),
       KEPT(x[0])},
      {"selective_scan_diag", {{s4, true}, {s4, true}, {{3, 4}, true}, {s4, true}},
       REC(tlrt_tape_selective_scan_diag(t, x[0], x[1], x[2], x[3], &o)),
       KEPT(x[0] + x[1] + x[2] + x[3] + out)},
  };
  for (const ReadCase &c : cases) {
    const uint64_t base = live();
    Tape T;
    tlrt_tape *t = T.t;
    std::vector<uint64_t> ids, bytes;
    for (const In &i : c.in) {
      ids.push_back(leaf(t, rng.vec(numel(i.dims), -2, 2), i.dims, i.rg));
      bytes.push_back(numel(i.dims) * 4);
    }
    const uint64_t out = c.rec(t, ids);
    if (out == UINT64_MAX) continue;
    uint64_t dims[8], outn = 0;
    uint32_t rank = 0;
    TH_OK(tlrt_tape_shape(t, out, dims, &rank, nullptr));
    outn = numel(std::vector<uint64_t>(dims, dims + rank));
    for (uint64_t id : ids) TH_OK(tlrt_tape_release(t, id));
    TH_OK(tlrt_tape_release(t, out));
    const uint64_t kept = live() - base, want = c.kept(bytes, outn * 4);
    TH_CHECK_MSG(kept == want, "%s: after releasing inputs and output the tape holds %llu bytes, "
                 "its rule reads %llu", c.name, (unsigned long long)kept,
                 (unsigned long long)want);
    // A freeing backward from the released output leaves only the leaf gradients.
    {
      Buf seed(th::upload(std::vector<float>(outn, 1.0f)));
      TH_OK(tlrt_tape_backward_ex(t, out, seed.get(), TLRT_TAPE_BACKWARD_FREE));
    }
    // The leaf gradients' bytes, each buffer counted once (add gives both leaves the seed's).
    uint64_t grads = 0;
    std::vector<Buf> held;
    for (size_t i = 0; i < c.in.size(); ++i) {
      if (!c.in[i].rg) continue;
      Buf g;
      TH_OK(tlrt_tape_grad(t, ids[i], g.out()));
      bool seen = false;
      for (const Buf &h : held) seen = seen || h.get() == g.get();
      if (!seen) grads += bytes[i];
      held.push_back(std::move(g));
    }
    TH_CHECK_MSG(live() - base == grads, "%s: after the freeing backward %llu bytes are live, the "
                 "leaf gradients are %llu", c.name, (unsigned long long)(live() - base),
                 (unsigned long long)grads);
    held.clear();
    TH_OK(tlrt_tape_reset(t));
    TH_CHECK_MSG(live() == base, "%s: %llu bytes left after reset", c.name,
                 (unsigned long long)(live() - base));
  }
}

// ---- three ways to run one step: bitwise the same, ever less memory --------------------------

enum class Mode { Keep, Release, ReleaseFree };
const char *mode_name(Mode m) {
  return m == Mode::Keep ? "keep" : m == Mode::Release ? "release" : "release + free";
}

struct Step {
  std::vector<float> loss;
  std::vector<std::vector<float>> grads;
  uint64_t peak = 0;  // the process's peak after the step, minus the live bytes before it
};

// Records through `rel` (which releases a node in the release modes and does nothing in Keep).
struct Recorder {
  tlrt_tape *t;
  Mode mode;
  void rel(uint64_t id) {
    if (mode != Mode::Keep) TH_OK(tlrt_tape_release(t, id));
  }
  void backward(uint64_t loss) {
    if (mode == Mode::ReleaseFree)
      TH_OK(tlrt_tape_backward_ex(t, loss, nullptr, TLRT_TAPE_BACKWARD_FREE));
    else
      TH_OK(tlrt_tape_backward(t, loss));
  }
};

struct Params {
  std::vector<std::vector<uint64_t>> dims;
  std::vector<Buf> bufs;
  void add(th::Rng &rng, std::vector<uint64_t> d, float r) {
    bufs.emplace_back(th::upload(rng.vec(numel(d), -r, r)));
    dims.push_back(std::move(d));
  }
  void add_const(std::vector<uint64_t> d, float v) {
    bufs.emplace_back(th::upload(std::vector<float>(numel(d), v)));
    dims.push_back(std::move(d));
  }
};

// A GPT-like step: token embedding E (vocab_in, d) gathered by an index buffer, one pre-LN block
// (multi-head attention, dropout, residual; GELU MLP, dropout, residual), a final layer norm, an
// LM head (vocab, d), cross-entropy of int32 labels. The parameters are the host's buffers.
struct Gpt {
  uint64_t B = 2, T = 32, d = 32, heads = 2, vin = 4096, vocab = 512;
  Params p;
  Buf tokens, labels;
  explicit Gpt(uint64_t salt) {
    th::Rng rng(salt);
    p.add(rng, {vin, d}, 0.1f);  // 0 E
    p.add_const({d}, 1.0f);      // 1 ln1.g
    p.add_const({d}, 0.0f);      // 2 ln1.b
    for (int i = 0; i < 4; ++i) p.add(rng, {d, d}, 0.2f);  // 3..6 wq wk wv wo
    for (int i = 0; i < 4; ++i) p.add(rng, {d}, 0.05f);    // 7..10 bq bk bv bo
    p.add_const({d}, 1.0f);          // 11 ln2.g
    p.add_const({d}, 0.0f);          // 12 ln2.b
    p.add(rng, {4 * d, d}, 0.2f);    // 13 wfc
    p.add(rng, {4 * d}, 0.05f);      // 14 bfc
    p.add(rng, {d, 4 * d}, 0.1f);    // 15 wproj
    p.add(rng, {d}, 0.05f);          // 16 bproj
    p.add_const({d}, 1.0f);          // 17 lnf.g
    p.add_const({d}, 0.0f);          // 18 lnf.b
    p.add(rng, {vocab, d}, 0.2f);    // 19 head
    std::vector<int32_t> tk(B * T), lb(B * T);
    for (uint64_t i = 0; i < B * T; ++i) {
      tk[i] = (int32_t)(rng.gen() % vin);
      lb[i] = (int32_t)(rng.gen() % vocab);
    }
    tokens = ints(tk);
    labels = ints(lb);
  }

  Step run(Mode mode) {
    Step st;
    const uint64_t before = live();
    Tape T_;
    Recorder r{T_.t, mode};
    tlrt_tape *t = T_.t;
    std::vector<uint64_t> P(p.bufs.size());
    for (size_t i = 0; i < P.size(); ++i)
      TH_OK(tlrt_tape_leaf(t, p.bufs[i].get(), p.dims[i].data(), (uint32_t)p.dims[i].size(), true,
                           &P[i]));
    const uint64_t rows = B * T, d3[3] = {B, T, d}, d2[2] = {rows, d};
    uint64_t e, x, h, a, m, f, g, y, z, logits, loss;
    TH_OK(tlrt_tape_gather_rows_ibuf(t, P[0], tokens.get(), &e));
    TH_OK(tlrt_tape_reshape(t, e, d3, 3, &x));
    r.rel(e);
    TH_OK(tlrt_tape_layer_norm(t, x, P[1], P[2], 1e-5, &h));
    TH_OK(tlrt_tape_multi_head_attention(t, h, P[3], P[4], P[5], P[6], P[7], P[8], P[9], P[10],
                                         heads, true, &a));
    r.rel(h);
    TH_OK(tlrt_tape_dropout(t, a, 0.1, 1000, &m));
    r.rel(a);
    TH_OK(tlrt_tape_add(t, x, m, &y));
    r.rel(x);
    r.rel(m);
    TH_OK(tlrt_tape_layer_norm(t, y, P[11], P[12], 1e-5, &h));
    TH_OK(tlrt_tape_reshape(t, h, d2, 2, &z));
    r.rel(h);
    TH_OK(tlrt_tape_linear_gelu(t, z, P[13], P[14], &g));
    r.rel(z);
    TH_OK(tlrt_tape_linear(t, g, P[15], P[16], &f));
    r.rel(g);
    TH_OK(tlrt_tape_dropout(t, f, 0.1, 1000 + rows * d * 8, &m));
    r.rel(f);
    TH_OK(tlrt_tape_reshape(t, m, d3, 3, &f));
    r.rel(m);
    TH_OK(tlrt_tape_add(t, y, f, &x));
    r.rel(y);
    r.rel(f);
    TH_OK(tlrt_tape_layer_norm(t, x, P[17], P[18], 1e-5, &h));
    r.rel(x);
    TH_OK(tlrt_tape_reshape(t, h, d2, 2, &z));
    r.rel(h);
    TH_OK(tlrt_tape_linear(t, z, P[19], TLRT_TAPE_NONE, &logits));
    r.rel(z);
    TH_OK(tlrt_tape_cross_entropy_ibuf(t, logits, labels.get(), &loss));
    r.rel(logits);
    r.backward(loss);
    st.loss = value(t, loss);
    for (uint64_t id : P) st.grads.push_back(grad(t, id));
    st.peak = th::stats().peak_bytes - before;
    return st;
  }
};

// A small MLP (16 -> 24 -> relu -> 5) with host-list cross-entropy.
Step mlp_step(Mode mode) {
  th::Rng rng(43);
  Params p;
  p.add(rng, {24, 16}, 0.3f);
  p.add(rng, {24}, 0.1f);
  p.add(rng, {5, 24}, 0.3f);
  p.add(rng, {5}, 0.1f);
  Buf X(th::upload(rng.vec(8 * 16, -1, 1)));
  std::vector<uint64_t> labels(8);
  for (uint64_t i = 0; i < 8; ++i) labels[i] = rng.gen() % 5;
  Step st;
  Tape T_;
  tlrt_tape *t = T_.t;
  Recorder r{t, mode};
  std::vector<uint64_t> P(4);
  for (size_t i = 0; i < 4; ++i)
    TH_OK(tlrt_tape_leaf(t, p.bufs[i].get(), p.dims[i].data(), (uint32_t)p.dims[i].size(), true,
                         &P[i]));
  const uint64_t xd[2] = {8, 16};
  uint64_t x, h, a, z, loss;
  TH_OK(tlrt_tape_leaf(t, X.get(), xd, 2, false, &x));
  TH_OK(tlrt_tape_linear(t, x, P[0], P[1], &h));
  r.rel(x);
  TH_OK(tlrt_tape_relu(t, h, &a));
  r.rel(h);
  TH_OK(tlrt_tape_linear(t, a, P[2], P[3], &z));
  r.rel(a);
  TH_OK(tlrt_tape_cross_entropy(t, z, labels.data(), &loss));
  r.rel(z);
  r.backward(loss);
  st.loss = value(t, loss);
  for (uint64_t id : P) st.grads.push_back(grad(t, id));
  return st;
}

void expect_same(const char *what, const Step &a, const Step &b, Mode mb) {
  TH_CHECK_MSG(a.loss.size() == 1 && same(a.loss, b.loss), "%s (%s): loss differs", what,
               mode_name(mb));
  TH_CHECK(a.grads.size() == b.grads.size());
  for (size_t i = 0; i < a.grads.size() && i < b.grads.size(); ++i)
    TH_CHECK_MSG(!a.grads[i].empty() && same(a.grads[i], b.grads[i]),
                 "%s (%s): gradient of parameter %zu differs", what, mode_name(mb), i);
}

// Runs first: the process's peak is then this test's own. The modes run in the order of their
// expected peaks, smallest first, so that each one must raise the process's peak above the one
// before: release + free < release < keep.
void test_peak_and_bits() {
  const tlrt_allocator_stats s0 = th::stats();
  TH_CHECK(s0.peak_bytes == s0.live_bytes);
  Gpt gpt(42);
  const Step rf = gpt.run(Mode::ReleaseFree);
  const Step rl = gpt.run(Mode::Release);
  const Step kp = gpt.run(Mode::Keep);
  std::printf("one GPT-like step, peak bytes above the live bytes before it: keep %llu, release "
              "%llu, release + freeing backward %llu\n", (unsigned long long)kp.peak,
              (unsigned long long)rl.peak, (unsigned long long)rf.peak);
  TH_CHECK_MSG(rf.peak < rl.peak && rl.peak < kp.peak,
               "peaks not strictly ordered: release + free %llu, release %llu, keep %llu",
               (unsigned long long)rf.peak, (unsigned long long)rl.peak,
               (unsigned long long)kp.peak);
  // The fused cross-entropy node reads its logits in backward, so releasing them frees nothing;
  // the embedding rows e (B * T, d) are read by no rule (the gather's backward needs only the
  // indices), and keep holds them through the whole step: release saves at least those floats.
  TH_CHECK(kp.peak - rl.peak >= gpt.B * gpt.T * gpt.d * 4);
  expect_same("GPT-like step", kp, rl, Mode::Release);
  expect_same("GPT-like step", kp, rf, Mode::ReleaseFree);

  const Step a = mlp_step(Mode::Keep), b = mlp_step(Mode::Release), c = mlp_step(Mode::ReleaseFree);
  expect_same("MLP", a, b, Mode::Release);
  expect_same("MLP", a, c, Mode::ReleaseFree);
}

// ---- use after release, freed graphs, failures --------------------------------------------------

void test_errors() {
  const uint64_t base = live();
  {
    Tape T_;
    tlrt_tape *t = T_.t;
    th::Rng rng(45);
    const uint64_t x = leaf(t, rng.vec(12, -1, 1), {3, 4}, true);
    const uint64_t w = leaf(t, rng.vec(12, -1, 1), {3, 4}, false);
    uint64_t a, b, s, out = 7;
    TH_OK(tlrt_tape_tanh(t, x, &a));
    TH_OK(tlrt_tape_mul(t, a, w, &b));
    TH_OK(tlrt_tape_release(t, a));
    // Use after release: record, read, release again (the message names the node).
    TH_STATUS(tlrt_tape_exp(t, a, &out), TLRT_ERR_RELEASED);
    TH_CHECK(out == 0);
    TH_CHECK(std::strstr(tlrt_last_error(), "argument x") != nullptr &&
             std::strstr(tlrt_last_error(), "released") != nullptr);
    Buf v;
    TH_STATUS(tlrt_tape_value(t, a, v.out()), TLRT_ERR_RELEASED);
    TH_CHECK(v.get() == nullptr);
    TH_STATUS(tlrt_tape_release(t, a), TLRT_ERR_RELEASED);
    uint64_t count = 0;
    TH_OK(tlrt_tape_node_count(t, &count));
    TH_CHECK(count == 4);
    // Shape still answers.
    uint64_t dims[8];
    uint32_t rank = 0;
    TH_OK(tlrt_tape_shape(t, a, dims, &rank, nullptr));
    TH_CHECK(rank == 2 && dims[0] == 3 && dims[1] == 4);

    // A released leaf keeps its gradient; a freeing backward, then a second backward over the
    // freed graph fails before changing anything (either flavour).
    TH_OK(tlrt_tape_reduce_sum(t, b, &s));
    TH_OK(tlrt_tape_release(t, x));
    TH_OK(tlrt_tape_release(t, b));
    TH_OK(tlrt_tape_backward_ex(t, s, nullptr, TLRT_TAPE_BACKWARD_FREE));
    const std::vector<float> g1 = grad(t, x);
    TH_CHECK(g1.size() == 12);
    TH_STATUS(tlrt_tape_backward(t, s), TLRT_ERR_RELEASED);
    TH_CHECK(std::strstr(tlrt_last_error(), "tlrt_tape_backward: ") == tlrt_last_error());
    TH_STATUS(tlrt_tape_backward_ex(t, s, nullptr, TLRT_TAPE_BACKWARD_FREE), TLRT_ERR_RELEASED);
    TH_CHECK(same(grad(t, x), g1));
    // The loss itself was not released: its value stays readable.
    TH_CHECK(value(t, s).size() == 1);
    // Backward over a part the freeing backward did not run still works (and accumulates).
    uint64_t e, s2;
    TH_OK(tlrt_tape_leaf(t, Buf(th::upload(std::vector<float>(12, 0.5f))).get(),
                         std::vector<uint64_t>{3, 4}.data(), 2, true, &e));
    TH_OK(tlrt_tape_exp(t, e, &a));
    TH_OK(tlrt_tape_reduce_sum(t, a, &s2));
    TH_OK(tlrt_tape_backward_ex(t, s2, nullptr, 0));
    TH_OK(tlrt_tape_backward_ex(t, s2, nullptr, TLRT_TAPE_BACKWARD_FREE));
    const std::vector<float> ge = grad(t, e);
    TH_CHECK(ge.size() == 12 && th::same_bits(ge[0], 2 * std::exp(0.5f)));
    // Flags other than TLRT_TAPE_BACKWARD_FREE are refused.
    TH_STATUS(tlrt_tape_backward_ex(t, s2, nullptr, 2u), TLRT_ERR_INVALID_ARGUMENT);

    // Inner nodes of a composite are released: the host can read only the returned node.
    const uint64_t p = leaf(t, rng.vec(6, -1, 1), {2, 3}, true);
    const uint64_t q = leaf(t, rng.vec(6, -1, 1), {2, 3}, false);
    uint64_t mse;
    TH_OK(tlrt_tape_mse_loss(t, p, q, &mse));
    TH_CHECK(value(t, mse).size() == 1);
    TH_STATUS(tlrt_tape_value(t, mse - 1, v.out()), TLRT_ERR_RELEASED);
    TH_STATUS(tlrt_tape_release(t, mse - 2), TLRT_ERR_RELEASED);
    TH_OK(tlrt_tape_backward(t, mse));  // through the released inner nodes
    TH_CHECK(grad(t, p).size() == 6);
  }
  TH_CHECK_MSG(live() == base, "%llu bytes left", (unsigned long long)(live() - base));

  // A freeing backward that fails half-way (every allocation in turn): the leaf gradients stay as
  // they were; the graph may be partly freed, and a new recording after reset works.
  {
    th::Rng rng(47);
    const std::vector<float> xv = rng.vec(64, -1, 1), gv = rng.vec(8, -1, 1), bv = rng.vec(8);
    uint64_t failures = 0;
    for (uint64_t n = 1; n < 200; ++n) {
      Tape T_;
      tlrt_tape *t = T_.t;
      const uint64_t x = leaf(t, xv, {8, 8}, true), g = leaf(t, gv, {8}, true),
                     b = leaf(t, bv, {8}, true);
      uint64_t ln, e, s;
      TH_OK(tlrt_tape_layer_norm(t, x, g, b, 1e-5, &ln));
      TH_OK(tlrt_tape_exp(t, ln, &e));
      TH_OK(tlrt_tape_reduce_sum(t, e, &s));
      TH_OK(tlrt_tape_backward(t, s));
      const std::vector<float> g1 = grad(t, x);
      TH_OK(tlrt_tape_release(t, ln));
      TH_OK(tlrt_tape_release(t, e));
      tlrt_debug_fail_nth_allocation(n);
      const tlrt_status st = tlrt_tape_backward_ex(t, s, nullptr, TLRT_TAPE_BACKWARD_FREE);
      const uint64_t left = tlrt_debug_fail_nth_allocation(0);
      if (st != TLRT_ERR_OUT_OF_MEMORY) {
        TH_CHECK(st == TLRT_OK && left > 0);
        break;
      }
      ++failures;
      TH_CHECK_MSG(same(grad(t, x), g1), "gradient changed by a freeing backward failing at "
                   "allocation %llu", (unsigned long long)n);
      TH_OK(tlrt_tape_reset(t));
    }
    TH_CHECK_MSG(failures >= 5, "only %llu allocation points in the freeing backward",
                 (unsigned long long)failures);
  }
  TH_CHECK_MSG(live() == base, "%llu bytes left", (unsigned long long)(live() - base));
}

// Releasing a leaf drops the tape's reference to the host's buffer only once no rule reads it.
void test_leaf_reference() {
  const uint64_t base = live();
  Tape T_;
  tlrt_tape *t = T_.t;
  const uint64_t n = 1024;
  uint64_t x, y, a, s;
  TH_OK(tlrt_tape_leaf(t, Buf(th::upload(std::vector<float>(n, 0.25f))).get(), &n, 1, true, &x));
  TH_OK(tlrt_tape_leaf(t, Buf(th::upload(std::vector<float>(n, 0.5f))).get(), &n, 1, true, &y));
  TH_OK(tlrt_tape_add(t, x, y, &a));  // reads neither
  TH_OK(tlrt_tape_tanh(t, a, &a));    // reads its input (the sum)
  TH_OK(tlrt_tape_mul(t, a, x, &s));  // reads a and x
  TH_OK(tlrt_tape_reduce_sum(t, s, &s));
  const uint64_t held = live() - base;
  TH_OK(tlrt_tape_release(t, y));  // no rule reads y: its buffer goes now
  TH_CHECK(live() - base == held - n * 4);
  TH_OK(tlrt_tape_release(t, x));  // mul's rule reads x: it stays
  TH_CHECK(live() - base == held - n * 4);
  TH_OK(tlrt_tape_backward_ex(t, s, nullptr, TLRT_TAPE_BACKWARD_FREE));
  const std::vector<float> gx = grad(t, x), gy = grad(t, y);
  TH_CHECK(gx.size() == n && gy.size() == n);
  TH_OK(tlrt_tape_reset(t));
  TH_CHECK(live() == base);
}

}  // namespace

int main() {
  test_peak_and_bits();
  test_reads_exact();
  test_errors();
  test_leaf_reference();
  return th::finish("test_tape_memory");
}
