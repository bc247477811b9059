// Bad input for tlrt_sgd_step and tlrt_adam_step (abi/tlrt_optim.h): NULL for each buffer,
// released buffers, sizes that differ from param, the same handle passed twice (each pair),
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
  }
  expect_no_leaks(start);
  return th::finish("test_bad_input_optim");
}
