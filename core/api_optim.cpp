// Optimizer-step entry points (abi/tlrt_optim.h): validate, compute the float32 scalars on the host
// (the bias corrections in double, once per call), dispatch. These update their buffers in place:
// nothing is allocated, no out-parameter exists. The backends only see n >= 1 and distinct
// buffers on one device. The determinism switch is not consulted (exact class: no reduction).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <new>
#include <utility>
#include <vector>

#include "abi/tlrt_optim.h"
#include "core/backend/memory.hpp"
#include "core/backend/optim.hpp"
#include "core/buffer.hpp"
#include "core/error.hpp"

using namespace tlrt;

namespace {

using ull = unsigned long long;

// A host scalar under the host-scalar rule that (when nonneg) must also be >= 0 (-0 is
// accepted). Returns the float32 value.
float scalar(double v, const char *name, bool nonneg) {
  const float f = host_scalar(v, name);
  if (nonneg && !(v >= 0.0))
    fail(TLRT_ERR_INVALID_ARGUMENT, "argument %s = %g must be >= 0", name, v);
  return f;
}

// A float32 scalar derived from several arguments (named in `what`) must be finite.
float derived(double v, const char *what) {
  const float f = to_f32(v);
  if (!std::isfinite(f))
    fail(TLRT_ERR_INVALID_ARGUMENT, "%s = %g is not finite in float32", what, v);
  return f;
}

void check_step(uint64_t step) {
  if (step == 0) fail(TLRT_ERR_INVALID_ARGUMENT, "argument step = 0 must be >= 1 (1-based)");
}

void check_beta(double b, const char *name) {
  host_scalar(b, name);
  if (!(b >= 0.0 && b < 1.0))
    fail(TLRT_ERR_INVALID_ARGUMENT, "argument %s = %g must be in [0, 1)", name, b);
}

// In-place updates need distinct handles (no buffer is both read as one argument and written as
// another).
void distinct(const tlrt_buffer *a, const char *an, const tlrt_buffer *b, const char *bn) {
  if (a == b)
    fail(TLRT_ERR_INVALID_ARGUMENT,
         "argument %s and argument %s are the same buffer (an in-place step needs distinct "
         "buffers)",
         an, bn);
}

// Adam's scalars common to every tensor (abi/tlrt_optim.h, DEFINITIONS), validated: step, lr,
// the betas, eps and the step size; l2 and decay are left 0 (weight_decay_of).
opt::AdamParams adam_scalars(uint64_t step, double lr, double beta1, double beta2, double eps) {
  check_step(step);
  scalar(lr, "lr", true);
  check_beta(beta1, "beta1");
  check_beta(beta2, "beta2");
  opt::AdamParams a{};
  a.b1 = to_f32(beta1);
  a.b2 = to_f32(beta2);
  a.omb1 = to_f32(1.0 - beta1);
  a.omb2 = to_f32(1.0 - beta2);
  a.eps = scalar(eps, "eps", true);
  // PyTorch's bias corrections, in double (step beyond 2^53 rounds; beta^step is 0 there).
  const double s = static_cast<double>(step);
  const double bc1 = 1.0 - std::pow(beta1, s);
  const double bc2 = 1.0 - std::pow(beta2, s);
  a.neg_step_size = -derived(lr / bc1, "argument lr / (1 - argument beta1^argument step)");
  a.bc2_sqrt = to_f32(std::sqrt(bc2));  // in [2^-26.5, 1]: always a normal float32
  a.l2 = 0.0f;
  a.decay = 0.0f;
  return a;
}

// One weight decay (the argument `name`), validated: Adam's L2 factor or AdamW's decay.
struct WeightDecay {
  float l2, decay;
};
WeightDecay weight_decay_of(double weight_decay, const char *name, double lr, bool decoupled) {
  const float wd = scalar(weight_decay, name, true);
  if (!decoupled) return {wd, 0.0f};
  char what[96];
  std::snprintf(what, sizeof what, "argument lr * argument %s", name);
  return {0.0f, derived(-(lr * weight_decay), what)};
}

}  // namespace

extern "C" {

TLRT_API tlrt_status tlrt_sgd_step(tlrt_buffer *param, const tlrt_buffer *grad,
                                   tlrt_buffer *momentum_buf, uint64_t step, double lr,
                                   double momentum, double dampening, double weight_decay,
                                   bool nesterov) {
  return guarded(__func__, [&] {
    const Buffer &P = input(param, "param");
    const Buffer &G = input(grad, "grad");
    const float mu = scalar(momentum, "momentum", true);
    const bool has_momentum = mu != 0.0f;
    if (has_momentum && momentum_buf == nullptr)
      fail(TLRT_ERR_NULL_ARGUMENT, "argument momentum_buf is NULL, but argument momentum = %g",
           momentum);
    if (!has_momentum && momentum_buf != nullptr)
      fail(TLRT_ERR_INVALID_ARGUMENT,
           "argument momentum_buf is given, but argument momentum = %g (it would not be updated; "
           "pass NULL)",
           momentum);
    const Buffer *B = has_momentum ? &input(momentum_buf, "momentum_buf") : nullptr;
    distinct(param, "param", grad, "grad");
    if (B) {
      distinct(param, "param", momentum_buf, "momentum_buf");
      distinct(grad, "grad", momentum_buf, "momentum_buf");
    }
    same_device(P, "param", G, "grad");
    if (B) same_device(P, "param", *B, "momentum_buf");
    same_size(P, "param", G, "grad");
    if (B) same_size(P, "param", *B, "momentum_buf");
    check_step(step);
    opt::SgdParams s{};
    s.neg_lr = -scalar(lr, "lr", true);
    s.momentum = mu;
    scalar(dampening, "dampening", false);
    // Finite: |dampening| <= FLT_MAX here, and adding 1 cannot cross float32's overflow threshold
    // (1 is far below double's resolution at that magnitude).
    s.omd = to_f32(1.0 - dampening);
    s.weight_decay = scalar(weight_decay, "weight_decay", true);
    s.first = step == 1;
    s.nesterov = nesterov;
    if (nesterov && (!has_momentum || dampening != 0.0))
      fail(TLRT_ERR_INVALID_ARGUMENT,
           "argument nesterov needs argument momentum > 0 and argument dampening == 0 (got "
           "momentum = %g, dampening = %g)",
           momentum, dampening);
    if (P.size == 0) return;
    TLRT_DISPATCH(P.dev, sgd_step, P.dev.ordinal, P.data, G.data, B ? B->data : nullptr, P.size,
                  s);
  });
}

TLRT_API tlrt_status tlrt_adam_step(tlrt_buffer *param, const tlrt_buffer *grad, tlrt_buffer *m,
                                    tlrt_buffer *v, uint64_t step, double lr, double beta1,
                                    double beta2, double eps, double weight_decay,
                                    bool decoupled) {
  return guarded(__func__, [&] {
    const Buffer &P = input(param, "param");
    const Buffer &G = input(grad, "grad");
    const Buffer &M = input(m, "m");
    const Buffer &V = input(v, "v");
    distinct(param, "param", grad, "grad");
    distinct(param, "param", m, "m");
    distinct(param, "param", v, "v");
    distinct(grad, "grad", m, "m");
    distinct(grad, "grad", v, "v");
    distinct(m, "m", v, "v");
    same_device(P, "param", G, "grad");
    same_device(P, "param", M, "m");
    same_device(P, "param", V, "v");
    same_size(P, "param", G, "grad");
    same_size(P, "param", M, "m");
    same_size(P, "param", V, "v");
    opt::AdamParams a = adam_scalars(step, lr, beta1, beta2, eps);
    const WeightDecay wd = weight_decay_of(weight_decay, "weight_decay", lr, decoupled);
    a.l2 = wd.l2;
    a.decay = wd.decay;
    if (P.size == 0) return;
    TLRT_DISPATCH(P.dev, adam_step, P.dev.ordinal, P.data, G.data, M.data, V.data, P.size, a);
  });
}

TLRT_API tlrt_status tlrt_adam_step_multi(uint64_t count, tlrt_buffer *const *params,
                                          const tlrt_buffer *const *grads, tlrt_buffer *const *m,
                                          tlrt_buffer *const *v, const double *weight_decays,
                                          uint64_t step, double lr, double beta1, double beta2,
                                          double eps, bool decoupled) {
  return guarded(__func__, [&] {
    const tlrt_buffer *const *arrays[4] = {params, grads, m, v};
    static const char *const kNames[4] = {"params", "grads", "m", "v"};
    if (count > 0) {
      for (int k = 0; k < 4; ++k)
        if (arrays[k] == nullptr)
          fail(TLRT_ERR_NULL_ARGUMENT, "argument %s is NULL, but argument count = %llu",
               kNames[k], (ull)count);
      if (weight_decays == nullptr)
        fail(TLRT_ERR_NULL_ARGUMENT, "argument weight_decays is NULL, but argument count = %llu",
             (ull)count);
    }
    // Host tables of 4 * count entries (a count beyond any host memory: out of host memory).
    if (count > SIZE_MAX / 64) throw std::bad_alloc();
    // Every handle: non-NULL, live, float32 (tensor by tensor, params first).
    std::vector<const Buffer *> bufs(4 * count);
    for (uint64_t t = 0; t < count; ++t)
      for (int k = 0; k < 4; ++k) {
        char name[48];
        std::snprintf(name, sizeof name, "%s[%llu]", kNames[k], (ull)t);
        if (arrays[k][t] == nullptr) fail(TLRT_ERR_NULL_ARGUMENT, "argument %s is NULL", name);
        bufs[4 * t + k] = &input(arrays[k][t], name);
      }
    // Each handle once across the four arrays.
    {
      std::vector<std::pair<const tlrt_buffer *, uint64_t>> seen(4 * count);
      for (uint64_t j = 0; j < 4 * count; ++j) seen[j] = {arrays[j % 4][j / 4], j};
      std::sort(seen.begin(), seen.end());
      for (uint64_t j = 1; j < seen.size(); ++j)
        if (seen[j].first == seen[j - 1].first) {
          const uint64_t a = seen[j - 1].second, b = seen[j].second;
          fail(TLRT_ERR_INVALID_ARGUMENT,
               "argument %s[%llu] and argument %s[%llu] are the same buffer (an in-place step "
               "needs distinct buffers)",
               kNames[a % 4], (ull)(a / 4), kNames[b % 4], (ull)(b / 4));
        }
    }
    for (uint64_t j = 1; j < bufs.size(); ++j) {
      const Buffer &B = *bufs[j];
      if (B.dev.cuda != bufs[0]->dev.cuda || B.dev.ordinal != bufs[0]->dev.ordinal)
        fail(TLRT_ERR_DEVICE_MISMATCH,
             "argument %s[%llu] is on another device than argument params[0]", kNames[j % 4],
             (ull)(j / 4));
    }
    for (uint64_t t = 0; t < count; ++t)
      for (int k = 1; k < 4; ++k)
        if (bufs[4 * t + k]->size != bufs[4 * t]->size)
          fail(TLRT_ERR_SHAPE,
               "argument %s[%llu] has %llu elements, argument params[%llu] has %llu", kNames[k],
               (ull)t, (ull)bufs[4 * t + k]->size, (ull)t, (ull)bufs[4 * t]->size);
    const opt::AdamParams a = adam_scalars(step, lr, beta1, beta2, eps);
    std::vector<opt::AdamTensor> tensors;
    tensors.reserve(count);
    for (uint64_t t = 0; t < count; ++t) {
      char name[48];
      std::snprintf(name, sizeof name, "weight_decays[%llu]", (ull)t);
      const WeightDecay wd = weight_decay_of(weight_decays[t], name, lr, decoupled);
      const Buffer *const *b = &bufs[4 * t];
      if (b[0]->size > 0)
        tensors.push_back(opt::AdamTensor{b[0]->data, b[1]->data, b[2]->data, b[3]->data,
                                          b[0]->size, wd.l2, wd.decay});
    }
    if (tensors.empty()) return;
    const Dev dev = bufs[0]->dev;
    TLRT_DISPATCH(dev, adam_step_multi, dev.ordinal, tensors.data(), tensors.size(), a);
  });
}

TLRT_API tlrt_status tlrt_clip_grad_norm(uint64_t count, tlrt_buffer *const *grads,
                                         double max_norm, tlrt_buffer **total_norm) {
  if (total_norm) *total_norm = nullptr;
  return guarded(__func__, [&] {
    clear_out(total_norm, "total_norm");
    if (count > 0 && grads == nullptr)
      fail(TLRT_ERR_NULL_ARGUMENT, "argument grads is NULL, but argument count = %llu",
           (ull)count);
    std::vector<const Buffer *> bufs(count);
    for (uint64_t b = 0; b < count; ++b) {
      if (grads[b] == nullptr)
        fail(TLRT_ERR_NULL_ARGUMENT, "argument grads[%llu] is NULL", (ull)b);
      bufs[b] = &input(grads[b], "grads[]");
    }
    for (uint64_t b = 1; b < count; ++b)
      if (bufs[b]->dev.cuda != bufs[0]->dev.cuda || bufs[b]->dev.ordinal != bufs[0]->dev.ordinal)
        fail(TLRT_ERR_DEVICE_MISMATCH,
             "argument grads[%llu] is on another device than argument grads[0]", (ull)b);
    const float mn = scalar(max_norm, "max_norm", true);
    {
      std::vector<const tlrt_buffer *> sorted(grads, grads + count);
      std::sort(sorted.begin(), sorted.end());
      if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
        fail(TLRT_ERR_INVALID_ARGUMENT,
             "argument grads holds the same buffer twice (it would be counted and scaled twice)");
    }
    const Dev dev = count > 0 ? bufs[0]->dev : Dev{false, 0};
    Owned y = new_buffer(dev, 1);
    std::vector<float *> ptrs;
    std::vector<uint64_t> sizes;
    for (const Buffer *B : bufs)
      if (B->size > 0) {
        ptrs.push_back(B->data);
        sizes.push_back(B->size);
      }
    if (ptrs.empty())
      TLRT_DISPATCH(dev, fill, dev.ordinal, y->data, 0.0f, 1);
    else
      TLRT_DISPATCH(dev, clip_grad_norm, dev.ordinal, ptrs.data(), sizes.data(), ptrs.size(), mn,
                    y->data);
    *total_norm = y.release();
  });
}

}  // extern "C"
