// Bad input for tlrt_sgd_step, tlrt_adam_step and tlrt_adam_step_multi (abi/tlrt_optim.h): NULL
// for each buffer (and each array and entry of the multi step; stale and integer handles there),
// released buffers, sizes that differ from param, the same handle passed twice (each pair; for
// the multi step across tensors and arrays),
// scalars outside their domains (NaN, infinities, negatives, values that round to infinity in
// float32, betas outside [0, 1), a step size that overflows float32), step == 0, the Nesterov and
// momentum-buffer rules, mixed devices (with a GPU only). For each failing call: the exact status,
// a last-error message naming the function and the offending arguments, and NOTHING modified (the
// buffers are compared bit for bit with their contents before the call). Good calls succeed.
// Nothing leaks.
#include <cmath>

// The optimizer steps have no output buffer and use their own fixtures: bad_input.hpp's output and
// fixture helpers stay unused here.
#pragma GCC diagnostic ignored "-Wunused-function"
#include "bad_input.hpp"

namespace {

using th::Buf;

const char *kSgd = "tlrt_sgd_step";
const char *kAdam = "tlrt_adam_step";

// Four distinct 4-element buffers (param, grad and two states) plus misfits.
struct Bufs {
  tlrt_buffer *p = nullptr, *g = nullptr, *s1 = nullptr, *s2 = nullptr;
  tlrt_buffer *short3 = nullptr, *empty = nullptr, *released = nullptr;
};

Bufs make_bufs() {
  Bufs b;
  b.p = th::upload({1.0f, -2.0f, 3.0f, -4.0f});
  b.g = th::upload({0.5f, 0.25f, -0.125f, 2.0f});
  b.s1 = th::upload({0.1f, 0.2f, 0.3f, 0.4f});
  b.s2 = th::upload({0.01f, 0.02f, 0.03f, 0.04f});
  b.short3 = th::upload({1.0f, 2.0f, 3.0f});
  b.empty = th::upload({});
  b.released = th::upload({1.0f, 2.0f, 3.0f, 4.0f});
  bool freed = false;
  TH_OK(tlrt_buffer_release_storage(b.released, &freed));
  return b;
}

void free_bufs(Bufs &b) {
  for (tlrt_buffer *x : {b.p, b.g, b.s1, b.s2, b.short3, b.empty, b.released}) tlrt_buffer_free(x);
  b = Bufs{};
}

// Contents of the four main buffers, to prove a failing call modified nothing.
struct Snapshot {
  std::vector<float> v[4];
};
Snapshot snap(const Bufs &b) {
  return {{th::download(b.p), th::download(b.g), th::download(b.s1), th::download(b.s2)}};
}
void expect_unchanged(int line, const Bufs &b, const Snapshot &before) {
  const Snapshot now = snap(b);
  for (int k = 0; k < 4; ++k) {
    ++th::checks();
    bool same = now.v[k].size() == before.v[k].size();
    for (size_t i = 0; same && i < now.v[k].size(); ++i)
      same = th::same_bits(now.v[k][i], before.v[k][i]);
    if (!same) th::report(__FILE__, line, "a failing optimizer step modified buffer " +
                                              std::to_string(k));
  }
}

// A good SGD call with momentum (param p, grad g, buffer s1) and scalars overridden by tests.
struct Sgd {
  tlrt_buffer *p, *buf;
  const tlrt_buffer *g;
  uint64_t step = 2;
  double lr = 0.1, momentum = 0.9, dampening = 0.0, weight_decay = 0.0;
  bool nesterov = false;
  tlrt_status operator()() const {
    return tlrt_sgd_step(p, g, buf, step, lr, momentum, dampening, weight_decay, nesterov);
  }
};

struct Adam {
  tlrt_buffer *p, *m, *v;
  const tlrt_buffer *g;
  uint64_t step = 3;
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.0;
  bool decoupled = false;
  tlrt_status operator()() const {
    return tlrt_adam_step(p, g, m, v, step, lr, beta1, beta2, eps, weight_decay, decoupled);
  }
};

#define BAD_SGD(call_obj, want, ...)                                                  \
  do {                                                                                \
    const Snapshot before_ = snap(b);                                                 \
    expect_fail(__LINE__, #call_obj, (call_obj)(), (want), kSgd, {__VA_ARGS__});      \
    expect_unchanged(__LINE__, b, before_);                                           \
  } while (0)
#define BAD_ADAM(call_obj, want, ...)                                                 \
  do {                                                                                \
    const Snapshot before_ = snap(b);                                                 \
    expect_fail(__LINE__, #call_obj, (call_obj)(), (want), kAdam, {__VA_ARGS__});     \
    expect_unchanged(__LINE__, b, before_);                                           \
  } while (0)

const double kNaN = NAN, kInf = INFINITY;

void check_sgd(const Bufs &b) {
  const Sgd good{b.p, b.s1, b.g};
  // NULL and released buffers.
  {
    Sgd c = good;
    c.p = nullptr;
    BAD_SGD(c, TLRT_ERR_NULL_ARGUMENT, "param");
    c = good;
    c.g = nullptr;
    BAD_SGD(c, TLRT_ERR_NULL_ARGUMENT, "grad");
    c = good;
    c.buf = nullptr;
    BAD_SGD(c, TLRT_ERR_NULL_ARGUMENT, "momentum_buf", "momentum");
    c = good;
    c.p = b.released;
    BAD_SGD(c, TLRT_ERR_RELEASED, "param");
    c = good;
    c.g = b.released;
    BAD_SGD(c, TLRT_ERR_RELEASED, "grad");
    c = good;
    c.buf = b.released;
    BAD_SGD(c, TLRT_ERR_RELEASED, "momentum_buf");
  }
  // Sizes: grad and momentum_buf against param (and param against grad).
  for (tlrt_buffer *bad : {b.short3, b.empty}) {
    Sgd c = good;
    c.g = bad;
    BAD_SGD(c, TLRT_ERR_SHAPE, "grad", "param");
    c = good;
    c.buf = bad;
    BAD_SGD(c, TLRT_ERR_SHAPE, "momentum_buf", "param");
    c = good;
    c.p = bad;
    BAD_SGD(c, TLRT_ERR_SHAPE, "grad", "param");
  }
  // The same handle twice.
  {
    Sgd c = good;
    c.g = b.p;
    BAD_SGD(c, TLRT_ERR_INVALID_ARGUMENT, "param", "grad");
    c = good;
    c.buf = b.p;
    BAD_SGD(c, TLRT_ERR_INVALID_ARGUMENT, "param", "momentum_buf");
    c = good;
    c.g = b.s1;
    BAD_SGD(c, TLRT_ERR_INVALID_ARGUMENT, "grad", "momentum_buf");
    Sgd plain = good;
    plain.momentum = 0.0;
    plain.buf = nullptr;
    plain.g = b.p;
    BAD_SGD(plain, TLRT_ERR_INVALID_ARGUMENT, "param", "grad");
  }
  // step == 0.
  {
    Sgd c = good;
    c.step = 0;
    BAD_SGD(c, TLRT_ERR_INVALID_ARGUMENT, "step");
  }
  // Scalars.
  for (double x : {kNaN, kInf, -kInf, -0.1, 1e39}) {
    Sgd c = good;
    c.lr = x;
    BAD_SGD(c, TLRT_ERR_INVALID_ARGUMENT, "lr");
    c = good;
    c.momentum = x;
    BAD_SGD(c, TLRT_ERR_INVALID_ARGUMENT, "momentum");
    c = good;
    c.weight_decay = x;
    BAD_SGD(c, TLRT_ERR_INVALID_ARGUMENT, "weight_decay");
  }
  for (double x : {kNaN, kInf, -kInf, 1e39, -1e39}) {
    Sgd c = good;
    c.dampening = x;
    BAD_SGD(c, TLRT_ERR_INVALID_ARGUMENT, "dampening");
  }
  // Nesterov needs momentum > 0 and dampening == 0; momentum_buf only with momentum.
  {
    Sgd c = good;
    c.nesterov = true;
    c.dampening = 0.1;
    BAD_SGD(c, TLRT_ERR_INVALID_ARGUMENT, "nesterov", "dampening");
    c = good;
    c.nesterov = true;
    c.momentum = 0.0;
    c.buf = nullptr;
    BAD_SGD(c, TLRT_ERR_INVALID_ARGUMENT, "nesterov", "momentum");
    c = good;
    c.momentum = 0.0;
    BAD_SGD(c, TLRT_ERR_INVALID_ARGUMENT, "momentum_buf", "momentum");
  }
  // Good calls.
  {
    Sgd c = good;
    TH_OK(c());
    c.step = 1;
    c.nesterov = true;
    c.weight_decay = 1e-4;
    TH_OK(c());
    c = good;
    c.momentum = 0.0;
    c.buf = nullptr;
    c.lr = 0.0;
    c.dampening = -0.0;
    TH_OK(c());
    c = good;
    c.p = b.empty;
    c.g = b.short3;  // sizes are checked before emptiness
    TH_STATUS(c(), TLRT_ERR_SHAPE);
  }
}

void check_adam(const Bufs &b) {
  const Adam good{b.p, b.s1, b.s2, b.g};
  {
    Adam c = good;
    c.p = nullptr;
    BAD_ADAM(c, TLRT_ERR_NULL_ARGUMENT, "param");
    c = good;
    c.g = nullptr;
    BAD_ADAM(c, TLRT_ERR_NULL_ARGUMENT, "grad");
    c = good;
    c.m = nullptr;
    BAD_ADAM(c, TLRT_ERR_NULL_ARGUMENT, "m");
    c = good;
    c.v = nullptr;
    BAD_ADAM(c, TLRT_ERR_NULL_ARGUMENT, "v");
    c = good;
    c.p = b.released;
    BAD_ADAM(c, TLRT_ERR_RELEASED, "param");
    c = good;
    c.g = b.released;
    BAD_ADAM(c, TLRT_ERR_RELEASED, "grad");
    c = good;
    c.m = b.released;
    BAD_ADAM(c, TLRT_ERR_RELEASED, "m");
    c = good;
    c.v = b.released;
    BAD_ADAM(c, TLRT_ERR_RELEASED, "v");
  }
  for (tlrt_buffer *bad : {b.short3, b.empty}) {
    Adam c = good;
    c.g = bad;
    BAD_ADAM(c, TLRT_ERR_SHAPE, "grad", "param");
    c = good;
    c.m = bad;
    BAD_ADAM(c, TLRT_ERR_SHAPE, "m", "param");
    c = good;
    c.v = bad;
    BAD_ADAM(c, TLRT_ERR_SHAPE, "v", "param");
    c = good;
    c.p = bad;
    BAD_ADAM(c, TLRT_ERR_SHAPE, "grad", "param");
  }
  // Every pair of the same handle.
  {
    Adam c = good;
    c.g = b.p;
    BAD_ADAM(c, TLRT_ERR_INVALID_ARGUMENT, "param", "grad");
    c = good;
    c.m = b.p;
    BAD_ADAM(c, TLRT_ERR_INVALID_ARGUMENT, "param", "m");
    c = good;
    c.v = b.p;
    BAD_ADAM(c, TLRT_ERR_INVALID_ARGUMENT, "param", "v");
    c = good;
    c.m = b.g;
    BAD_ADAM(c, TLRT_ERR_INVALID_ARGUMENT, "grad", "m");
    c = good;
    c.v = b.g;
    BAD_ADAM(c, TLRT_ERR_INVALID_ARGUMENT, "grad", "v");
    c = good;
    c.v = b.s1;
    BAD_ADAM(c, TLRT_ERR_INVALID_ARGUMENT, "m", "v");
  }
  {
    Adam c = good;
    c.step = 0;
    BAD_ADAM(c, TLRT_ERR_INVALID_ARGUMENT, "step");
  }
  for (double x : {kNaN, kInf, -kInf, -1e-3, 1e39}) {
    Adam c = good;
    c.lr = x;
    BAD_ADAM(c, TLRT_ERR_INVALID_ARGUMENT, "lr");
    c = good;
    c.eps = x;
    BAD_ADAM(c, TLRT_ERR_INVALID_ARGUMENT, "eps");
    c = good;
    c.weight_decay = x;
    BAD_ADAM(c, TLRT_ERR_INVALID_ARGUMENT, "weight_decay");
  }
  for (double x : {kNaN, kInf, -kInf, -0.1, 1.0, 1.5}) {
    Adam c = good;
    c.beta1 = x;
    BAD_ADAM(c, TLRT_ERR_INVALID_ARGUMENT, "beta1");
    c = good;
    c.beta2 = x;
    BAD_ADAM(c, TLRT_ERR_INVALID_ARGUMENT, "beta2");
  }
  // Derived scalars beyond float32: lr / (1 - beta1^step) and lr * weight_decay (AdamW).
  {
    Adam c = good;
    c.lr = 3e38;
    c.step = 1;
    BAD_ADAM(c, TLRT_ERR_INVALID_ARGUMENT, "lr", "beta1", "step");
    c = good;
    c.lr = 1e30;
    c.weight_decay = 1e30;
    c.decoupled = true;
    BAD_ADAM(c, TLRT_ERR_INVALID_ARGUMENT, "lr", "weight_decay");
  }
  // Good calls: defaults, AdamW, beta = 0, eps = 0, lr = 0, empty buffers, step 2^64 - 1.
  {
    Adam c = good;
    TH_OK(c());
    c.decoupled = true;
    c.weight_decay = 1e-2;
    TH_OK(c());
    c = good;
    c.beta1 = 0.0;
    c.beta2 = 0.0;
    c.eps = 0.0;
    c.lr = 0.0;
    c.step = UINT64_MAX;
    TH_OK(c());
  }
}

// tlrt_adam_step_multi: two tensors (4 and 3 elements), eight distinct buffers, plus misfits.
const char *kMulti = "tlrt_adam_step_multi";

struct MultiBufs {
  tlrt_buffer *p[2] = {}, *g[2] = {}, *m[2] = {}, *v[2] = {};
  tlrt_buffer *short2 = nullptr, *empty = nullptr, *released = nullptr, *ints = nullptr;
  tlrt_buffer *stale = nullptr;  // a freed handle's token (never dereferenced by the library)
};

MultiBufs make_multi() {
  MultiBufs b;
  b.p[0] = th::upload({1.0f, -2.0f, 3.0f, -4.0f});
  b.g[0] = th::upload({0.5f, 0.25f, -0.125f, 2.0f});
  b.m[0] = th::upload({0.1f, 0.2f, 0.3f, 0.4f});
  b.v[0] = th::upload({0.01f, 0.02f, 0.03f, 0.04f});
  b.p[1] = th::upload({5.0f, -6.0f, 7.0f});
  b.g[1] = th::upload({-1.0f, 0.75f, 4.0f});
  b.m[1] = th::upload({0.5f, 0.6f, 0.7f});
  b.v[1] = th::upload({0.05f, 0.06f, 0.07f});
  b.short2 = th::upload({1.0f, 2.0f});
  b.empty = th::upload({});
  b.released = th::upload({1.0f, 2.0f, 3.0f});
  bool freed = false;
  TH_OK(tlrt_buffer_release_storage(b.released, &freed));
  const int32_t iv[3] = {1, 2, 3};
  TH_OK(tlrt_buffer_from_i32(TLRT_DEVICE_CPU, iv, 3, &b.ints));
  b.stale = th::upload({1.0f, 2.0f, 3.0f});
  tlrt_buffer_free(b.stale);
  return b;
}

void free_multi(MultiBufs &b) {
  for (int t = 0; t < 2; ++t)
    for (tlrt_buffer *x : {b.p[t], b.g[t], b.m[t], b.v[t]}) tlrt_buffer_free(x);
  for (tlrt_buffer *x : {b.short2, b.empty, b.released, b.ints}) tlrt_buffer_free(x);
  b = MultiBufs{};
}

std::vector<std::vector<float>> snap_multi(const MultiBufs &b) {
  std::vector<std::vector<float>> all;
  for (int t = 0; t < 2; ++t)
    for (const tlrt_buffer *x : {b.p[t], b.g[t], b.m[t], b.v[t]}) all.push_back(th::download(x));
  return all;
}

void expect_multi_unchanged(int line, const MultiBufs &b,
                            const std::vector<std::vector<float>> &before) {
  const std::vector<std::vector<float>> now = snap_multi(b);
  for (size_t k = 0; k < now.size(); ++k) {
    ++th::checks();
    bool same = now[k].size() == before[k].size();
    for (size_t i = 0; same && i < now[k].size(); ++i)
      same = th::same_bits(now[k][i], before[k][i]);
    if (!same)
      th::report(__FILE__, line, "a failing tlrt_adam_step_multi modified buffer " +
                                     std::to_string(k));
  }
}

// A good two-tensor call; tests override arrays, entries and scalars.
struct Multi {
  uint64_t count = 2;
  tlrt_buffer *p[2], *m[2], *v[2];
  const tlrt_buffer *g[2];
  double wd[2] = {0.0, 1e-2};
  bool null_p = false, null_g = false, null_m = false, null_v = false, null_wd = false;
  uint64_t step = 3;
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  bool decoupled = true;
  explicit Multi(const MultiBufs &b) {
    for (int t = 0; t < 2; ++t) {
      p[t] = b.p[t];
      g[t] = b.g[t];
      m[t] = b.m[t];
      v[t] = b.v[t];
    }
  }
  tlrt_status operator()() const {
    return tlrt_adam_step_multi(count, null_p ? nullptr : p, null_g ? nullptr : g,
                                null_m ? nullptr : m, null_v ? nullptr : v,
                                null_wd ? nullptr : wd, step, lr, beta1, beta2, eps, decoupled);
  }
};

#define BAD_MULTI(call_obj, want, ...)                                                \
  do {                                                                                \
    const std::vector<std::vector<float>> before_ = snap_multi(b);                    \
    expect_fail(__LINE__, #call_obj, (call_obj)(), (want), kMulti, {__VA_ARGS__});    \
    expect_multi_unchanged(__LINE__, b, before_);                                     \
  } while (0)

void check_adam_multi(const MultiBufs &b) {
  const Multi good(b);
  // NULL arrays (count > 0) and NULL entries.
  {
    Multi c = good;
    c.null_p = true;
    BAD_MULTI(c, TLRT_ERR_NULL_ARGUMENT, "params", "count");
    c = good;
    c.null_g = true;
    BAD_MULTI(c, TLRT_ERR_NULL_ARGUMENT, "grads", "count");
    c = good;
    c.null_m = true;
    BAD_MULTI(c, TLRT_ERR_NULL_ARGUMENT, "m", "count");
    c = good;
    c.null_v = true;
    BAD_MULTI(c, TLRT_ERR_NULL_ARGUMENT, "v", "count");
    c = good;
    c.null_wd = true;
    BAD_MULTI(c, TLRT_ERR_NULL_ARGUMENT, "weight_decays", "count");
    c = good;
    c.p[1] = nullptr;
    BAD_MULTI(c, TLRT_ERR_NULL_ARGUMENT, "params[1]");
    c = good;
    c.g[0] = nullptr;
    BAD_MULTI(c, TLRT_ERR_NULL_ARGUMENT, "grads[0]");
    c = good;
    c.m[1] = nullptr;
    BAD_MULTI(c, TLRT_ERR_NULL_ARGUMENT, "m[1]");
    c = good;
    c.v[0] = nullptr;
    BAD_MULTI(c, TLRT_ERR_NULL_ARGUMENT, "v[0]");
  }
  // Stale, released and integer handles, in each array.
  {
    Multi c = good;
    c.p[1] = b.stale;
    BAD_MULTI(c, TLRT_ERR_STALE_HANDLE, "params[1]");
    c = good;
    c.g[1] = b.stale;
    BAD_MULTI(c, TLRT_ERR_STALE_HANDLE, "grads[1]");
    c = good;
    c.m[1] = b.released;
    BAD_MULTI(c, TLRT_ERR_RELEASED, "m[1]");
    c = good;
    c.v[1] = b.released;
    BAD_MULTI(c, TLRT_ERR_RELEASED, "v[1]");
    c = good;
    c.p[1] = b.released;
    BAD_MULTI(c, TLRT_ERR_RELEASED, "params[1]");
    c = good;
    c.g[1] = b.ints;
    BAD_MULTI(c, TLRT_ERR_DTYPE, "grads[1]");
    c = good;
    c.v[1] = b.ints;
    BAD_MULTI(c, TLRT_ERR_DTYPE, "v[1]");
  }
  // Sizes: each state and the gradient against its own param (3 elements for tensor 1).
  for (tlrt_buffer *bad : {b.short2, b.empty}) {
    Multi c = good;
    c.g[1] = bad;
    BAD_MULTI(c, TLRT_ERR_SHAPE, "grads[1]", "params[1]");
    c = good;
    c.m[1] = bad;
    BAD_MULTI(c, TLRT_ERR_SHAPE, "m[1]", "params[1]");
    c = good;
    c.v[0] = bad;
    BAD_MULTI(c, TLRT_ERR_SHAPE, "v[0]", "params[0]");
    c = good;
    c.p[0] = bad;
    BAD_MULTI(c, TLRT_ERR_SHAPE, "grads[0]", "params[0]");
  }
  // A handle twice anywhere across the four arrays (checked before the sizes).
  {
    Multi c = good;
    c.m[1] = b.p[1];
    BAD_MULTI(c, TLRT_ERR_INVALID_ARGUMENT, "params[1]", "m[1]");
    c = good;
    c.g[0] = b.p[0];
    BAD_MULTI(c, TLRT_ERR_INVALID_ARGUMENT, "params[0]", "grads[0]");
    c = good;
    c.v[0] = b.m[0];
    BAD_MULTI(c, TLRT_ERR_INVALID_ARGUMENT, "m[0]", "v[0]");
    c = good;
    c.p[1] = b.p[0];  // the same param twice
    BAD_MULTI(c, TLRT_ERR_INVALID_ARGUMENT, "params[0]", "params[1]");
    c = good;
    c.g[1] = b.g[0];
    BAD_MULTI(c, TLRT_ERR_INVALID_ARGUMENT, "grads[0]", "grads[1]");
    c = good;
    c.m[0] = b.v[1];  // another tensor's state, as this tensor's
    BAD_MULTI(c, TLRT_ERR_INVALID_ARGUMENT, "m[0]", "v[1]");
    c = good;
    c.p[1] = b.g[0];  // another tensor's gradient, as a parameter
    BAD_MULTI(c, TLRT_ERR_INVALID_ARGUMENT, "grads[0]", "params[1]");
  }
  // Scalars, as tlrt_adam_step; the weight decays one by one.
  {
    Multi c = good;
    c.step = 0;
    BAD_MULTI(c, TLRT_ERR_INVALID_ARGUMENT, "step");
  }
  for (double x : {kNaN, kInf, -kInf, -1e-3, 1e39}) {
    Multi c = good;
    c.lr = x;
    BAD_MULTI(c, TLRT_ERR_INVALID_ARGUMENT, "lr");
    c = good;
    c.eps = x;
    BAD_MULTI(c, TLRT_ERR_INVALID_ARGUMENT, "eps");
    c = good;
    c.wd[1] = x;
    BAD_MULTI(c, TLRT_ERR_INVALID_ARGUMENT, "weight_decays[1]");
    c = good;
    c.wd[0] = x;
    c.decoupled = false;
    BAD_MULTI(c, TLRT_ERR_INVALID_ARGUMENT, "weight_decays[0]");
  }
  for (double x : {kNaN, kInf, -kInf, -0.1, 1.0, 1.5}) {
    Multi c = good;
    c.beta1 = x;
    BAD_MULTI(c, TLRT_ERR_INVALID_ARGUMENT, "beta1");
    c = good;
    c.beta2 = x;
    BAD_MULTI(c, TLRT_ERR_INVALID_ARGUMENT, "beta2");
  }
  {
    Multi c = good;
    c.lr = 3e38;
    c.step = 1;
    BAD_MULTI(c, TLRT_ERR_INVALID_ARGUMENT, "lr", "beta1", "step");
    c = good;
    c.lr = 1e30;
    c.wd[1] = 1e30;
    BAD_MULTI(c, TLRT_ERR_INVALID_ARGUMENT, "lr", "weight_decays[1]");
  }
  // count == 0: the scalars are still checked; the arrays may be NULL.
  {
    Multi c = good;
    c.count = 0;
    c.step = 0;
    c.null_p = c.null_g = c.null_m = c.null_v = c.null_wd = true;
    BAD_MULTI(c, TLRT_ERR_INVALID_ARGUMENT, "step");
    c.step = 1;
    TH_OK(c());
    c = good;
    c.count = 0;
    c.p[0] = nullptr;  // entries past count are not read
    TH_OK(c());
  }
  // Good calls: AdamW and Adam, count 1, an empty tensor, lr 0 with betas and eps 0, AdamW with
  // lr * weight_decay == 0 (decay -0), step 2^64 - 1.
  {
    Multi c = good;
    TH_OK(c());
    c.decoupled = false;
    TH_OK(c());
    c = good;
    c.count = 1;
    c.p[1] = nullptr;
    TH_OK(c());
    c = good;
    c.p[1] = b.empty;
    c.g[1] = b.short2;  // sizes are checked before emptiness
    TH_STATUS(c(), TLRT_ERR_SHAPE);
    c = good;
    c.beta1 = 0.0;
    c.beta2 = 0.0;
    c.eps = 0.0;
    c.lr = 0.0;
    c.wd[0] = 1e30;
    c.step = UINT64_MAX;
    TH_OK(c());
  }
  {
    Buf e1(th::upload({})), e2(th::upload({})), e3(th::upload({})), e4(th::upload({}));
    tlrt_buffer *P[2] = {b.p[0], e1.get()}, *M[2] = {b.m[0], e3.get()}, *V[2] = {b.v[0], e4.get()};
    const tlrt_buffer *G[2] = {b.g[0], e2.get()};
    const double wd[2] = {0.0, 0.5};
    TH_OK(tlrt_adam_step_multi(2, P, G, M, V, wd, 4, 1e-3, 0.9, 0.999, 1e-8, true));
  }
  if (th::cuda_ready()) {
    tlrt_buffer *c1 = nullptr;
    TH_OK(tlrt_buffer_to_device(b.v[1], TLRT_DEVICE_CUDA(0), &c1));
    if (c1) {
      Multi c = good;
      c.v[1] = c1;
      BAD_MULTI(c, TLRT_ERR_DEVICE_MISMATCH, "v[1]", "params[0]");
      Multi all = good;  // every buffer on the GPU but params[1]
      std::vector<Buf> gpu;
      for (int t = 0; t < 2; ++t)
        for (tlrt_buffer *x : {b.p[t], b.g[t], b.m[t], b.v[t]}) {
          gpu.emplace_back();
          TH_OK(tlrt_buffer_to_device(x, TLRT_DEVICE_CUDA(0), gpu.back().out()));
        }
      all.p[0] = gpu[0].get();
      all.g[0] = gpu[1].get();
      all.m[0] = gpu[2].get();
      all.v[0] = gpu[3].get();
      all.g[1] = gpu[5].get();
      all.m[1] = gpu[6].get();
      all.v[1] = gpu[7].get();
      BAD_MULTI(all, TLRT_ERR_DEVICE_MISMATCH, "params[1]", "params[0]");
      all.p[1] = gpu[4].get();
      TH_OK(all());
    }
    tlrt_buffer_free(c1);
  } else {
    std::printf("no usable CUDA device: tlrt_adam_step_multi mixed-device checks skipped\n");
  }
}

void check_mixed_devices(const Bufs &b) {
  if (!th::cuda_ready()) {
    std::printf("no usable CUDA device: mixed-device checks skipped\n");
    return;
  }
  tlrt_buffer *c4 = nullptr;
  TH_OK(tlrt_buffer_to_device(b.s2, TLRT_DEVICE_CUDA(0), &c4));
  if (c4) {
    Sgd s{b.p, b.s1, c4};
    BAD_SGD(s, TLRT_ERR_DEVICE_MISMATCH, "param", "grad");
    s = Sgd{b.p, c4, b.g};
    BAD_SGD(s, TLRT_ERR_DEVICE_MISMATCH, "param", "momentum_buf");
    Adam a{b.p, b.s1, c4, b.g};
    BAD_ADAM(a, TLRT_ERR_DEVICE_MISMATCH, "param", "v");
    a = Adam{b.p, c4, b.s2, b.g};
    BAD_ADAM(a, TLRT_ERR_DEVICE_MISMATCH, "param", "m");
    a = Adam{b.p, b.s1, b.s2, c4};
    BAD_ADAM(a, TLRT_ERR_DEVICE_MISMATCH, "param", "grad");
  }
  tlrt_buffer_free(c4);
}

}  // namespace

int main() {
  const tlrt_allocator_stats start = th::stats();
  {
    Bufs b = make_bufs();
    check_sgd(b);
    check_adam(b);
    check_mixed_devices(b);
    free_bufs(b);
    MultiBufs mb = make_multi();
    check_adam_multi(mb);
    free_multi(mb);
  }
  expect_no_leaks(start);
  return th::finish("test_bad_input_optim");
}
