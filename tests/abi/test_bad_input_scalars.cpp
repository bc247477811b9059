// The host-scalar rule (abi/torchlean_rt.h, DESIGN section 4) at every exported entry point that
// takes a double parameter, tlrt_tape_* recording calls included: NaN (both signs), +inf and -inf,
// and finite values that round to +-inf in float32 (2^128 - 2^103 exactly, 1e39, DBL_MAX, both
// signs) are TLRT_ERR_INVALID_ARGUMENT, with a message naming the function, the argument and its
// value, every out-parameter cleared, nothing modified (optimizer steps) and the tape unchanged
// (recording calls). The documented exceptions accept their infinities (clamp bounds +-inf,
// attention's mask_fill -inf) but not a finite value that rounds to one; tlrt_buffer_full's value
// is data and accepts anything. The largest finite values that round to +-FLT_MAX, and values
// that round to zero, are accepted wherever the op's own domain allows them. Nothing leaks.
#include <cctype>
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

// These checks use their own fixtures: bad_input.hpp's fixture helpers stay unused here.
#pragma GCC diagnostic ignored "-Wunused-function"
#include "bad_input.hpp"

namespace {

using th::Buf;

const double kNaN = NAN, kInf = INFINITY;
// The smallest double that rounds to +inf in float32 (2^128 - 2^103, the midpoint between
// FLT_MAX and 2^128; the tie goes to the even 2^128), and the largest that rounds to FLT_MAX.
const double kOverflow = 0x1.ffffffp127;
const double kLargest = 0x1.fffffefffffffp127;

// Which infinities an argument accepts as themselves (its header's exception).
enum class Inf { None, Negative, Both };

// One double argument of one entry point. call(v, outs) makes the call with v in that argument
// and every other argument valid; outs[0 .. n_out) are its out-parameters.
struct Arg {
  const char *fn;
  const char *arg;
  Inf inf;
  int n_out;
  std::vector<double> accepted;  // finite values inside the op's domain, edges included
  std::function<tlrt_status(double, tlrt_buffer **)> call;
  std::function<std::vector<float>()> state;  // in-place ops: the buffers a refusal must keep
};

std::string fmt(double v) {
  char b[40];
  std::snprintf(b, sizeof b, "%.17g", v);
  return b;
}

std::string lower(std::string s) {
  for (char &c : s) c = (char)std::tolower((unsigned char)c);
  return s;
}

// True when the message shows the refused value: "nan" for a NaN, "inf" for an infinity or a
// value that rounds to one (in any case, with or without a sign).
bool shows(const std::string &msg, const char *part) {
  return lower(msg).find(part) != std::string::npos;
}

// The values the rule refuses for an argument, and what the message must show of each.
struct Refused {
  double v;
  const char *shows;
};
std::vector<Refused> refused(Inf inf) {
  std::vector<Refused> r = {{kNaN, "nan"},       {-kNaN, "nan"},       {kOverflow, "inf"},
                            {-kOverflow, "inf"}, {1e39, "inf"},        {-1e39, "inf"},
                            {DBL_MAX, "inf"},    {-DBL_MAX, "inf"}};
  if (inf != Inf::Both) r.push_back({kInf, "inf"});
  if (inf == Inf::None) r.push_back({-kInf, "inf"});
  return r;
}

void check_arg(const Arg &a) {
  for (const Refused &r : refused(a.inf)) {
    tlrt_buffer *outs[3] = {kSentinel, kSentinel, kSentinel};
    const std::string what = std::string(a.fn) + "(" + a.arg + " = " + fmt(r.v) + ")";
    const std::vector<float> before = a.state ? a.state() : std::vector<float>{};
    expect_fail(__LINE__, what.c_str(), a.call(r.v, outs), TLRT_ERR_INVALID_ARGUMENT, a.fn,
                {a.arg});
    const std::string msg = tlrt_last_error();
    TH_CHECK_MSG(shows(msg, r.shows), "%s: last error \"%s\" does not show the value",
                 what.c_str(), msg.c_str());
    for (int i = 0; i < a.n_out; ++i) CLEARED(outs[i]);
    if (a.state) {
      const std::vector<float> after = a.state();
      bool same = after.size() == before.size();
      for (size_t i = 0; same && i < after.size(); ++i) same = th::same_bits(after[i], before[i]);
      TH_CHECK_MSG(same, "%s modified its buffers", what.c_str());
    }
  }
  std::vector<double> ok = a.accepted;
  if (a.inf != Inf::None) ok.push_back(-kInf);
  if (a.inf == Inf::Both) ok.push_back(kInf);
  for (double v : ok) {
    tlrt_buffer *outs[3] = {nullptr, nullptr, nullptr};
    const tlrt_status s = a.call(v, outs);
    TH_CHECK_MSG(s == TLRT_OK, "%s(%s = %.17g) returned %s: %s", a.fn, a.arg, v,
                 tlrt_status_string(s), tlrt_last_error());
    for (int i = 0; i < a.n_out; ++i) {
      TH_CHECK_MSG(s != TLRT_OK || outs[i] != nullptr, "%s(%s = %.17g): output %d is NULL", a.fn,
                   a.arg, v, i);
      tlrt_buffer_free(outs[i]);
    }
  }
}

// ---- fixtures ---------------------------------------------------------------------------------

struct Bufs {
  Buf x4, y4, g4, z4;  // 4 elements: q / k / v / dout (bh = 1, n = 2, d = 2), x and dy
  Buf v2, w2;          // 2 elements: gamma, beta (layer norm of 2 x 2)
  Buf out, lse;        // an attention forward's outputs for the backward
  Buf dy1;             // the 1 x 1 output gradient of a 2 x 2 pool with a 2 x 2 window
  Buf p, g, s1, s2;    // optimizer param, grad and states
};

Bufs make_bufs() {
  Bufs b;
  b.x4 = Buf(th::upload({0.5f, -1.0f, 2.0f, 0.25f}));
  b.y4 = Buf(th::upload({1.5f, 0.75f, -0.5f, 1.0f}));
  b.g4 = Buf(th::upload({0.125f, -0.25f, 1.0f, 2.0f}));
  b.z4 = Buf(th::upload({-1.0f, 0.5f, 0.25f, -2.0f}));
  b.v2 = Buf(th::upload({1.0f, 2.0f}));
  b.w2 = Buf(th::upload({0.0f, -1.0f}));
  b.dy1 = Buf(th::upload({1.0f}));
  b.p = Buf(th::upload({1.0f, -2.0f, 3.0f, -4.0f}));
  b.g = Buf(th::upload({0.5f, 0.25f, -0.125f, 2.0f}));
  b.s1 = Buf(th::upload({0.1f, 0.2f, 0.3f, 0.4f}));
  b.s2 = Buf(th::upload({0.01f, 0.02f, 0.03f, 0.04f}));
  TH_OK(tlrt_flash_attention_fwd(b.x4.get(), b.y4.get(), b.g4.get(), nullptr, 1, 2, 2, 0.5, true,
                                 -kInf, b.out.out(), b.lse.out()));
  return b;
}

// The optimizer's four buffers, concatenated: a refused step must leave them as they were.
std::function<std::vector<float>()> optim_state(const Bufs &b) {
  const tlrt_buffer *p = b.p.get(), *g = b.g.get(), *s1 = b.s1.get(), *s2 = b.s2.get();
  return [=] {
    std::vector<float> all;
    for (const tlrt_buffer *x : {p, g, s1, s2}) {
      const std::vector<float> v = th::download(x);
      all.insert(all.end(), v.begin(), v.end());
    }
    return all;
  };
}

// ---- the table --------------------------------------------------------------------------------

std::vector<Arg> entry_points(const Bufs &b) {
  const tlrt_buffer *x = b.x4.get(), *y = b.y4.get(), *g = b.g4.get(), *z = b.z4.get();
  const tlrt_buffer *gm = b.v2.get(), *bt = b.w2.get(), *o = b.out.get(), *l = b.lse.get();
  const tlrt_buffer *dy1 = b.dy1.get();
  tlrt_buffer *p = b.p.get(), *gr = b.g.get(), *s1 = b.s1.get(), *s2 = b.s2.get();
  const std::vector<double> any = {0.0, -0.0, 1.0, -2.5, 1e-50, -1e-50, kLargest, -kLargest,
                                   (double)FLT_MAX};
  const std::vector<double> nonneg = {0.0, -0.0, 1e-3, 1e-50, kLargest, (double)FLT_MAX};
  const uint64_t sp[2] = {2, 2}, ker[2] = {2, 2}, st[2] = {1, 1}, pad[2] = {0, 0};
  std::vector<Arg> v;
  // Elementwise (abi/tlrt_elementwise.h).
  v.push_back({"tlrt_scale", "c", Inf::None, 1, any,
               [=](double c, tlrt_buffer **out) { return tlrt_scale(x, c, out); }, nullptr});
  v.push_back({"tlrt_axpy", "c", Inf::None, 1, any,
               [=](double c, tlrt_buffer **out) { return tlrt_axpy(x, y, c, out); }, nullptr});
  v.push_back({"tlrt_clamp", "lo", Inf::Both, 1, any,
               [=](double lo, tlrt_buffer **out) { return tlrt_clamp(x, lo, 1.0, out); }, nullptr});
  v.push_back({"tlrt_clamp", "hi", Inf::Both, 1, any,
               [=](double hi, tlrt_buffer **out) { return tlrt_clamp(x, -1.0, hi, out); }, nullptr});
  v.push_back({"tlrt_clamp_bwd", "lo", Inf::Both, 1, any,
               [=](double lo, tlrt_buffer **out) { return tlrt_clamp_bwd(x, g, lo, 1.0, out); },
               nullptr});
  v.push_back({"tlrt_clamp_bwd", "hi", Inf::Both, 1, any,
               [=](double hi, tlrt_buffer **out) { return tlrt_clamp_bwd(x, g, -1.0, hi, out); },
               nullptr});
  const std::vector<double> eps_ok = {0.0, -0.0, 1e-6, 0x1p-149, kLargest, (double)FLT_MAX};
  v.push_back({"tlrt_safe_log", "eps", Inf::None, 1, eps_ok,
               [=](double e, tlrt_buffer **out) { return tlrt_safe_log(x, e, out); }, nullptr});
  v.push_back({"tlrt_safe_log_bwd", "eps", Inf::None, 1, eps_ok,
               [=](double e, tlrt_buffer **out) { return tlrt_safe_log_bwd(x, g, e, out); },
               nullptr});
  // RNG (abi/tlrt_rng.h).
  v.push_back({"tlrt_rand_normal", "mean", Inf::None, 1, any,
               [](double m, tlrt_buffer **out) {
                 return tlrt_rand_normal(TLRT_DEVICE_CPU, 5, m, 1.0, 3, out);
               },
               nullptr});
  v.push_back({"tlrt_rand_normal", "std", Inf::None, 1,
               {0.0, -0.0, 1.0, 1e-50, -1e-50 /* rounds to -0 */, kLargest},
               [](double s, tlrt_buffer **out) {
                 return tlrt_rand_normal(TLRT_DEVICE_CPU, 5, 0.0, s, 3, out);
               },
               nullptr});
  v.push_back({"tlrt_bernoulli_mask", "keep_prob", Inf::None, 1,
               {0.0, 0.5, 1.0, -1.0, 2.0, 1e-50, kLargest, -kLargest},
               [](double k, tlrt_buffer **out) {
                 return tlrt_bernoulli_mask(TLRT_DEVICE_CPU, 5, k, 3, out);
               },
               nullptr});
  // Layer norm (abi/tlrt_layer_norm.h).
  v.push_back({"tlrt_layer_norm_fwd", "eps", Inf::None, 3, {0.0, -0.0, 1e-5, 1e-50, kLargest},
               [=](double e, tlrt_buffer **out) {
                 return tlrt_layer_norm_fwd(x, gm, bt, 2, 2, e, &out[0], &out[1], &out[2]);
               },
               nullptr});
  v.push_back({"tlrt_rms_norm_fwd", "eps", Inf::None, 2, {0.0, -0.0, 1e-5, 1e-50, kLargest},
               [=](double e, tlrt_buffer **out) {
                 return tlrt_rms_norm_fwd(x, gm, 2, 2, e, &out[0], &out[1]);
               },
               nullptr});
  // Attention (abi/tlrt_attention.h): scale under the rule; mask_fill may also be -inf.
  using Attn = std::function<tlrt_status(double, double, tlrt_buffer **)>;
  const std::vector<std::pair<const char *, std::pair<int, Attn>>> attn = {
      {"tlrt_flash_attention_fwd",
       {2, [=](double s, double f, tlrt_buffer **out) {
          return tlrt_flash_attention_fwd(x, y, g, nullptr, 1, 2, 2, s, true, f, &out[0], &out[1]);
        }}},
      {"tlrt_flash_attention_bwd",
       {3, [=](double s, double f, tlrt_buffer **out) {
          return tlrt_flash_attention_bwd(x, y, g, nullptr, z, o, l, 1, 2, 2, s, true, f, &out[0],
                                          &out[1], &out[2]);
        }}},
      {"tlrt_flash_attention_bwd_q",
       {1, [=](double s, double f, tlrt_buffer **out) {
          return tlrt_flash_attention_bwd_q(x, y, g, nullptr, z, 1, 2, 2, s, true, f, out);
        }}},
      {"tlrt_flash_attention_bwd_k",
       {1, [=](double s, double f, tlrt_buffer **out) {
          return tlrt_flash_attention_bwd_k(x, y, g, nullptr, z, 1, 2, 2, s, true, f, out);
        }}},
      {"tlrt_flash_attention_bwd_v",
       {1, [=](double s, double f, tlrt_buffer **out) {
          return tlrt_flash_attention_bwd_v(x, y, g, nullptr, z, 1, 2, 2, s, true, f, out);
        }}},
  };
  for (const auto &e : attn) {
    const Attn call = e.second.second;
    v.push_back({e.first, "scale", Inf::None, e.second.first, any,
                 [call](double s, tlrt_buffer **out) { return call(s, -1000.0, out); }, nullptr});
    v.push_back({e.first, "mask_fill", Inf::Negative, e.second.first, any,
                 [call](double f, tlrt_buffer **out) { return call(0.5, f, out); }, nullptr});
  }
  // Smooth max pooling (abi/tlrt_pool.h): beta must also be nonzero, so no zeros here.
  const std::vector<double> beta_ok = {1.0, -2.5, 1e-30, kLargest, -kLargest};
  v.push_back({"tlrt_smooth_maxpool2d_fwd", "beta", Inf::None, 1, beta_ok,
               [=](double be, tlrt_buffer **out) {
                 return tlrt_smooth_maxpool2d_fwd(x, 1, 1, 2, 2, 2, 2, 1, 1, 0, 0, be, out);
               },
               nullptr});
  v.push_back({"tlrt_smooth_maxpool2d_bwd", "beta", Inf::None, 1, beta_ok,
               [=](double be, tlrt_buffer **out) {
                 return tlrt_smooth_maxpool2d_bwd(x, dy1, 1, 1, 2, 2, 2, 2, 1, 1, 0, 0, be, out);
               },
               nullptr});
  v.push_back({"tlrt_smooth_maxpool_fwd", "beta", Inf::None, 1, beta_ok,
               [=](double be, tlrt_buffer **out) {
                 return tlrt_smooth_maxpool_fwd(x, 1, 1, sp, 2, ker, st, pad, be, out);
               },
               nullptr});
  v.push_back({"tlrt_smooth_maxpool_bwd", "beta", Inf::None, 1, beta_ok,
               [=](double be, tlrt_buffer **out) {
                 return tlrt_smooth_maxpool_bwd(x, dy1, 1, 1, sp, 2, ker, st, pad, be, out);
               },
               nullptr});
  // Optimizer steps (abi/tlrt_optim.h): in place, so a refusal must leave every buffer as it was.
  const std::function<std::vector<float>()> same = optim_state(b);
  v.push_back({"tlrt_sgd_step", "lr", Inf::None, 0, nonneg,
               [=](double lr, tlrt_buffer **) {
                 return tlrt_sgd_step(p, gr, nullptr, 1, lr, 0.0, 0.0, 0.0, false);
               },
               same});
  v.push_back({"tlrt_sgd_step", "momentum", Inf::None, 0, {0.9, 1e-3, kLargest, (double)FLT_MAX},
               [=](double mu, tlrt_buffer **) {
                 return tlrt_sgd_step(p, gr, s1, 2, 1e-3, mu, 0.0, 0.0, false);
               },
               same});
  v.push_back({"tlrt_sgd_step", "dampening", Inf::None, 0, any,
               [=](double d, tlrt_buffer **) {
                 return tlrt_sgd_step(p, gr, s1, 2, 1e-3, 0.9, d, 0.0, false);
               },
               same});
  v.push_back({"tlrt_sgd_step", "weight_decay", Inf::None, 0, nonneg,
               [=](double wd, tlrt_buffer **) {
                 return tlrt_sgd_step(p, gr, nullptr, 1, 1e-3, 0.0, 0.0, wd, false);
               },
               same});
  for (bool decoupled : {false, true}) {
    // lr with beta1 = 0 (step_size = lr, so the largest lr stays finite in float32).
    v.push_back({"tlrt_adam_step", "lr", Inf::None, 0, nonneg,
                 [=](double lr, tlrt_buffer **) {
                   return tlrt_adam_step(p, gr, s1, s2, 1, lr, 0.0, 0.999, 1e-8, 0.0, decoupled);
                 },
                 same});
    for (int k = 0; k < 2; ++k)
      v.push_back({"tlrt_adam_step", k ? "beta2" : "beta1", Inf::None, 0,
                   {0.0, 0.5, 0.999, 1e-50},
                   [=](double be, tlrt_buffer **) {
                     return tlrt_adam_step(p, gr, s1, s2, 3, 1e-3, k ? 0.9 : be, k ? be : 0.999,
                                           1e-8, 0.0, decoupled);
                   },
                   same});
    v.push_back({"tlrt_adam_step", "eps", Inf::None, 0, nonneg,
                 [=](double e, tlrt_buffer **) {
                   return tlrt_adam_step(p, gr, s1, s2, 1, 1e-3, 0.9, 0.999, e, 0.0, decoupled);
                 },
                 same});
    v.push_back({"tlrt_adam_step", "weight_decay", Inf::None, 0, nonneg,
                 [=](double wd, tlrt_buffer **) {
                   return tlrt_adam_step(p, gr, s1, s2, 1, 1e-3, 0.9, 0.999, 1e-8, wd, decoupled);
                 },
                 same});
  }
  // The multi-tensor Adam step over the same four buffers (one tensor), the weight decay in its
  // array.
  for (bool decoupled : {false, true}) {
    auto multi = [=](uint64_t step, double lr, double b1, double b2, double eps, double wd) {
      tlrt_buffer *const P[1] = {p}, *const M[1] = {s1}, *const V[1] = {s2};
      const tlrt_buffer *const G[1] = {gr};
      const double wds[1] = {wd};
      return tlrt_adam_step_multi(1, P, G, M, V, wds, step, lr, b1, b2, eps, decoupled);
    };
    v.push_back({"tlrt_adam_step_multi", "lr", Inf::None, 0, nonneg,
                 [=](double lr, tlrt_buffer **) { return multi(1, lr, 0.0, 0.999, 1e-8, 0.0); },
                 same});
    v.push_back({"tlrt_adam_step_multi", "beta1", Inf::None, 0, {0.0, 0.5, 0.999, 1e-50},
                 [=](double be, tlrt_buffer **) { return multi(3, 1e-3, be, 0.999, 1e-8, 0.0); },
                 same});
    v.push_back({"tlrt_adam_step_multi", "beta2", Inf::None, 0, {0.0, 0.5, 0.999, 1e-50},
                 [=](double be, tlrt_buffer **) { return multi(3, 1e-3, 0.9, be, 1e-8, 0.0); },
                 same});
    v.push_back({"tlrt_adam_step_multi", "eps", Inf::None, 0, nonneg,
                 [=](double e, tlrt_buffer **) { return multi(1, 1e-3, 0.9, 0.999, e, 0.0); },
                 same});
    v.push_back({"tlrt_adam_step_multi", "weight_decays[0]", Inf::None, 0, nonneg,
                 [=](double wd, tlrt_buffer **) { return multi(1, 1e-3, 0.9, 0.999, 1e-8, wd); },
                 same});
  }
  // Gradient clipping (in place): its own buffer, so that accepted calls scale nothing else.
  tlrt_buffer *cg = b.z4.get();
  v.push_back({"tlrt_clip_grad_norm", "max_norm", Inf::None, 1, nonneg,
               [=](double mn, tlrt_buffer **out) {
                 tlrt_buffer *const grads[1] = {cg};
                 return tlrt_clip_grad_norm(1, grads, mn, out);
               },
               [=] { return th::download(cg); }});
  return v;
}

// ---- tape recording calls (abi/tlrt_tape.h): the ops' rule at record time --------------------

struct TapeArg {
  const char *fn;
  const char *arg;
  Inf inf;
  std::vector<double> accepted;
  std::function<tlrt_status(tlrt_tape *, double, uint64_t *)> call;
};

uint64_t leaf(tlrt_tape *t, const std::vector<float> &v, std::vector<uint64_t> dims) {
  Buf b(th::upload(v));
  uint64_t id = UINT64_MAX;
  TH_OK(tlrt_tape_leaf(t, b.get(), dims.data(), (uint32_t)dims.size(), true, &id));
  return id;
}

uint64_t node_count(const tlrt_tape *t) {
  uint64_t n = UINT64_MAX;
  TH_OK(tlrt_tape_node_count(t, &n));
  return n;
}

void check_tape() {
  tlrt_tape *t = nullptr;
  TH_OK(tlrt_tape_new(TLRT_DEVICE_CPU, &t));
  if (t == nullptr) return;
  const uint64_t a = leaf(t, {0.5f, -1.0f, 2.0f, 0.25f}, {2, 2});
  const uint64_t b = leaf(t, {1.5f, 0.75f, -0.5f, 1.0f}, {2, 2});
  const uint64_t q = leaf(t, {0.5f, -1.0f, 2.0f, 0.25f}, {1, 2, 2});
  const uint64_t gm = leaf(t, {1.0f, 2.0f}, {2});
  const uint64_t bt = leaf(t, {0.0f, -1.0f}, {2});
  const std::vector<double> any = {0.0, -1.0, 1e-50, kLargest, -kLargest};
  const std::vector<double> eps_ok = {0.0, 1e-5, kLargest};
  const std::vector<TapeArg> args = {
      {"tlrt_tape_axpy", "c", Inf::None, any,
       [=](tlrt_tape *tp, double c, uint64_t *o) { return tlrt_tape_axpy(tp, a, b, c, o); }},
      {"tlrt_tape_scale", "c", Inf::None, any,
       [=](tlrt_tape *tp, double c, uint64_t *o) { return tlrt_tape_scale(tp, a, c, o); }},
      {"tlrt_tape_clamp", "lo", Inf::Both, any,
       [=](tlrt_tape *tp, double lo, uint64_t *o) { return tlrt_tape_clamp(tp, a, lo, 1.0, o); }},
      {"tlrt_tape_clamp", "hi", Inf::Both, any,
       [=](tlrt_tape *tp, double hi, uint64_t *o) { return tlrt_tape_clamp(tp, a, -1.0, hi, o); }},
      {"tlrt_tape_safe_log", "eps", Inf::None, eps_ok,
       [=](tlrt_tape *tp, double e, uint64_t *o) { return tlrt_tape_safe_log(tp, a, e, o); }},
      {"tlrt_tape_layer_norm", "eps", Inf::None, eps_ok,
       [=](tlrt_tape *tp, double e, uint64_t *o) {
         return tlrt_tape_layer_norm(tp, a, gm, bt, e, o);
       }},
      {"tlrt_tape_rms_norm", "eps", Inf::None, eps_ok,
       [=](tlrt_tape *tp, double e, uint64_t *o) {
         return tlrt_tape_rms_norm(tp, a, gm, e, o);
       }},
      {"tlrt_tape_dropout", "p", Inf::None, {0.0, -0.0, 1e-50, 0.5, 0.999},
       [=](tlrt_tape *tp, double pr, uint64_t *o) { return tlrt_tape_dropout(tp, a, pr, 7, o); }},
      {"tlrt_tape_batchnorm", "eps", Inf::None, eps_ok,
       [=](tlrt_tape *tp, double e, uint64_t *o) {
         return tlrt_tape_batchnorm(tp, a, gm, bt, e, o);
       }},
      {"tlrt_tape_flash_attention", "scale", Inf::None, any,
       [=](tlrt_tape *tp, double s, uint64_t *o) {
         return tlrt_tape_flash_attention(tp, q, q, q, nullptr, s, true, -kInf, o);
       }},
      {"tlrt_tape_flash_attention", "mask_fill", Inf::Negative, any,
       [=](tlrt_tape *tp, double f, uint64_t *o) {
         return tlrt_tape_flash_attention(tp, q, q, q, nullptr, 0.5, true, f, o);
       }},
  };
  for (const TapeArg &ta : args) {
    for (const Refused &r : refused(ta.inf)) {
      const uint64_t before = node_count(t);
      uint64_t out = 77;
      const std::string what = std::string(ta.fn) + "(" + ta.arg + " = " + fmt(r.v) + ")";
      expect_fail(__LINE__, what.c_str(), ta.call(t, r.v, &out), TLRT_ERR_INVALID_ARGUMENT,
                  ta.fn, {ta.arg});
      const std::string msg = tlrt_last_error();
      TH_CHECK_MSG(shows(msg, r.shows), "%s: last error \"%s\" does not show the value",
                   what.c_str(), msg.c_str());
      TH_CHECK_MSG(out == 0, "%s: out = %llu, not cleared", what.c_str(), (unsigned long long)out);
      TH_CHECK_MSG(node_count(t) == before, "%s: the tape grew from %llu nodes", what.c_str(),
                   (unsigned long long)before);
    }
    std::vector<double> ok = ta.accepted;
    if (ta.inf != Inf::None) ok.push_back(-kInf);
    if (ta.inf == Inf::Both) ok.push_back(kInf);
    for (double v : ok) {
      uint64_t out = 0;
      const tlrt_status s = ta.call(t, v, &out);
      TH_CHECK_MSG(s == TLRT_OK, "%s(%s = %.17g) returned %s: %s", ta.fn, ta.arg, v,
                   tlrt_status_string(s), tlrt_last_error());
    }
  }
  // The exceptions carry into the backward rules: a clamp recorded with infinite bounds and an
  // attention with mask_fill = -inf differentiate.
  uint64_t c = 0, s = 0, att = 0, sa = 0, sum = 0;
  TH_OK(tlrt_tape_reset(t));
  const uint64_t x = leaf(t, {0.5f, -1.0f, 2.0f, 0.25f}, {1, 2, 2});
  TH_OK(tlrt_tape_clamp(t, x, -kInf, kInf, &c));
  TH_OK(tlrt_tape_flash_attention(t, c, x, x, nullptr, 0.5, true, -kInf, &att));
  TH_OK(tlrt_tape_reduce_sum(t, att, &s));
  TH_OK(tlrt_tape_scale(t, s, kLargest, &sa));
  TH_OK(tlrt_tape_reduce_sum(t, sa, &sum));
  TH_OK(tlrt_tape_backward(t, sum));
  Buf gx;
  TH_OK(tlrt_tape_grad(t, x, gx.out()));
  TH_CHECK(th::download(gx.get()).size() == 4);
  tlrt_tape_free(t);
}

// ---- the data exception: tlrt_buffer_full's value may be anything -------------------------------

void check_buffer_full() {
  struct Case {
    double v;
    float want;  // NaN: any NaN
  };
  const float finf = INFINITY;
  for (const Case &c : {Case{kNaN, NAN}, Case{-kNaN, NAN}, Case{kInf, finf}, Case{-kInf, -finf},
                        Case{kOverflow, finf}, Case{-1e300, -finf}, Case{DBL_MAX, finf},
                        Case{kLargest, FLT_MAX}, Case{1e-50, 0.0f}}) {
    Buf b;
    const tlrt_status s = tlrt_buffer_full(TLRT_DEVICE_CPU, 3, c.v, b.out());
    TH_CHECK_MSG(s == TLRT_OK, "tlrt_buffer_full(%.17g) returned %s: %s", c.v,
                 tlrt_status_string(s), tlrt_last_error());
    if (s != TLRT_OK) continue;
    const std::vector<float> got = th::download(b.get());
    bool ok = got.size() == 3;
    for (float f : got) ok = ok && (std::isnan(c.want) ? std::isnan(f) : th::same_bits(f, c.want));
    TH_CHECK_MSG(ok, "tlrt_buffer_full(%.17g) does not hold (float)%.17g", c.v, c.v);
  }
}

}  // namespace

int main() {
  const tlrt_allocator_stats start = th::stats();
  {
    Bufs b = make_bufs();
    for (const Arg &a : entry_points(b)) check_arg(a);
  }
  check_tape();
  check_buffer_full();
  expect_no_leaks(start);
  return th::finish("test_bad_input_scalars");
}
