// Parity of the fused optimizer steps (abi/tlrt_optim.h; numeric class exact): the same seeded
// parameters, states and gradients on the CPU and CUDA backends, several consecutive in-place steps
// (step 1, where SGD's buffer is created, then later steps, and a step far out where the bias
// corrections are 1), then param and every state buffer compared BIT FOR BIT, and the CUDA run
// repeated with the determinism switch flipped (nothing may change). Sizes cross the float4 /
// tail boundaries of the CUDA kernel (n % 4 = 0..3) and its chunking; inputs include random bit
// patterns (NaN, inf, subnormals) and the edge vector. tlrt_adam_step_multi: tables of tensors
// (sizes across the multi kernel's 16384-element chunks, empty and one-element tensors, 400 small
// tensors), per-tensor weight decays, CPU against CUDA bit for bit, and on CUDA the multi call
// against tlrt_adam_step tensor by tensor bit for bit. Skipped (77) without a CUDA device.
#include <algorithm>
#include <string>
#include <vector>

#include "parity.hpp"

namespace {

using th::Buf;
using th::Dist;

struct SgdCfg {
  double lr, momentum, dampening, weight_decay;
  bool nesterov;
};
struct AdamCfg {
  double lr, beta1, beta2, eps, weight_decay;
  bool decoupled;
};

const SgdCfg kSgd[] = {{0.1, 0.0, 0.0, 0.0, false},  {0.01, 0.9, 0.0, 0.0, false},
                       {0.05, 0.9, 0.1, 1e-2, false}, {0.05, 0.9, 0.0, 1e-2, true},
                       {0.3, 0.0, 0.0, 5e-4, false}};
const AdamCfg kAdam[] = {{1e-3, 0.9, 0.999, 1e-8, 0.0, false},
                         {1e-2, 0.9, 0.999, 1e-8, 1e-2, false},
                         {1e-3, 0.9, 0.999, 1e-8, 1e-2, true},
                         {0.1, 0.0, 0.0, 0.0, 0.0, false},
                         {1.0, 0.8, 0.99, 1e-1, 1e-4, true}};
const uint64_t kSteps[] = {1, 2, 3, 4097};

tlrt_buffer *up(const std::vector<float> &v, tlrt_device dev) {
  tlrt_buffer *b = nullptr;
  if (tlrt_buffer_from_f32(dev, v.data(), v.size(), &b) != TLRT_OK) return nullptr;
  return b;
}

void run_sgd(const SgdCfg &c, Dist d, uint64_t n, uint64_t salt) {
  const std::vector<float> p0 = th::make(d, n, salt), b0 = th::make(d, n, salt + 1);
  std::vector<std::vector<float>> grads;
  for (size_t k = 0; k < 4; ++k) grads.push_back(th::make(d, n, salt + 2 + k));
  char what[200];
  std::snprintf(what, sizeof what, "sgd(lr %g, mom %g, damp %g, wd %g%s) %s n=%llu", c.lr,
                c.momentum, c.dampening, c.weight_decay, c.nesterov ? ", nesterov" : "",
                th::dist_name(d), (unsigned long long)n);
  parity::run_multi(what, [&](tlrt_device dev, std::vector<Buf> &outs) {
    Buf p(up(p0, dev)), b(up(b0, dev));
    if (!p.get() || !b.get()) return TLRT_ERR_OUT_OF_MEMORY;
    for (size_t k = 0; k < 4; ++k) {
      Buf g(up(grads[k], dev));
      if (!g.get()) return TLRT_ERR_OUT_OF_MEMORY;
      const tlrt_status s = tlrt_sgd_step(p.get(), g.get(), c.momentum != 0 ? b.get() : nullptr,
                                          kSteps[k], c.lr, c.momentum, c.dampening,
                                          c.weight_decay, c.nesterov);
      if (s != TLRT_OK) return s;
    }
    outs.push_back(std::move(p));
    outs.push_back(std::move(b));
    return TLRT_OK;
  });
}

void run_adam(const AdamCfg &c, Dist d, uint64_t n, uint64_t salt) {
  const std::vector<float> p0 = th::make(d, n, salt), m0 = th::make(d, n, salt + 1),
                           v0 = th::make(Dist::Positive, n, salt + 2);
  std::vector<std::vector<float>> grads;
  for (size_t k = 0; k < 4; ++k) grads.push_back(th::make(d, n, salt + 3 + k));
  char what[200];
  std::snprintf(what, sizeof what, "%s(lr %g, b1 %g, b2 %g, eps %g, wd %g) %s n=%llu",
                c.decoupled ? "adamw" : "adam", c.lr, c.beta1, c.beta2, c.eps, c.weight_decay,
                th::dist_name(d), (unsigned long long)n);
  parity::run_multi(what, [&](tlrt_device dev, std::vector<Buf> &outs) {
    Buf p(up(p0, dev)), m(up(m0, dev)), v(up(v0, dev));
    if (!p.get() || !m.get() || !v.get()) return TLRT_ERR_OUT_OF_MEMORY;
    for (size_t k = 0; k < 4; ++k) {
      Buf g(up(grads[k], dev));
      if (!g.get()) return TLRT_ERR_OUT_OF_MEMORY;
      const tlrt_status s = tlrt_adam_step(p.get(), g.get(), m.get(), v.get(), kSteps[k], c.lr,
                                           c.beta1, c.beta2, c.eps, c.weight_decay, c.decoupled);
      if (s != TLRT_OK) return s;
    }
    outs.push_back(std::move(p));
    outs.push_back(std::move(m));
    outs.push_back(std::move(v));
    return TLRT_OK;
  });
}

// tlrt_adam_step_multi over a table of tensors (sizes crossing the tails, the kernel's 16384-element
// chunks, empty and one-element tensors; per-tensor weight decays, 0 included), four steps on each
// device, every p, m, v compared bit for bit between CPU and CUDA; on CUDA the same steps taken
// tensor by tensor with tlrt_adam_step must give the same bits as the multi call.
void run_adam_multi(const AdamCfg &c, Dist d, const std::vector<uint64_t> &sizes, uint64_t salt) {
  struct T {
    std::vector<float> p, m, v;
    std::vector<std::vector<float>> g;
    double wd;
  };
  std::vector<T> ts;
  for (size_t t = 0; t < sizes.size(); ++t) {
    const uint64_t n = sizes[t];
    T x{th::make(d, n, salt + 10 * t), th::make(d, n, salt + 10 * t + 1),
        th::make(Dist::Positive, n, salt + 10 * t + 2), {}, t % 3 == 0 ? 0.0 : 0.01 * (double)t};
    for (size_t k = 0; k < 4; ++k) x.g.push_back(th::make(d, n, salt + 10 * t + 3 + k));
    ts.push_back(std::move(x));
  }
  uint64_t total = 0;
  for (uint64_t n : sizes) total += n;
  char what[200];
  std::snprintf(what, sizeof what,
                "%s multi(lr %g, b1 %g, b2 %g, eps %g) %s %zu tensors, %llu elements",
                c.decoupled ? "adamw" : "adam", c.lr, c.beta1, c.beta2, c.eps, th::dist_name(d),
                sizes.size(), (unsigned long long)total);
  // single: tensor by tensor with tlrt_adam_step instead of one tlrt_adam_step_multi call.
  auto steps = [&](tlrt_device dev, std::vector<Buf> &outs, bool single) {
    std::vector<Buf> P, M, V;
    for (const T &x : ts) {
      P.emplace_back(up(x.p, dev));
      M.emplace_back(up(x.m, dev));
      V.emplace_back(up(x.v, dev));
      if (!P.back().get() || !M.back().get() || !V.back().get()) return TLRT_ERR_OUT_OF_MEMORY;
    }
    std::vector<double> wds;
    for (const T &x : ts) wds.push_back(x.wd);
    for (size_t k = 0; k < 4; ++k) {
      std::vector<Buf> G;
      std::vector<tlrt_buffer *> pp, mp, vp;
      std::vector<const tlrt_buffer *> gp;
      for (size_t t = 0; t < ts.size(); ++t) {
        G.emplace_back(up(ts[t].g[k], dev));
        if (!G.back().get()) return TLRT_ERR_OUT_OF_MEMORY;
        pp.push_back(P[t].get());
        mp.push_back(M[t].get());
        vp.push_back(V[t].get());
        gp.push_back(G[t].get());
      }
      tlrt_status s = TLRT_OK;
      if (single) {
        for (size_t t = 0; t < ts.size() && s == TLRT_OK; ++t)
          s = tlrt_adam_step(pp[t], gp[t], mp[t], vp[t], kSteps[k], c.lr, c.beta1, c.beta2, c.eps,
                             wds[t], c.decoupled);
      } else {
        s = tlrt_adam_step_multi(ts.size(), pp.data(), gp.data(), mp.data(), vp.data(), wds.data(),
                                 kSteps[k], c.lr, c.beta1, c.beta2, c.eps, c.decoupled);
      }
      if (s != TLRT_OK) return s;
    }
    for (size_t t = 0; t < ts.size(); ++t) {
      outs.push_back(std::move(P[t]));
      outs.push_back(std::move(M[t]));
      outs.push_back(std::move(V[t]));
    }
    return TLRT_OK;
  };
  parity::run_multi(what, [&](tlrt_device dev, std::vector<Buf> &outs) {
    return steps(dev, outs, false);
  });
  // On CUDA: multi against single.
  std::vector<Buf> multi, single;
  const tlrt_status sm = steps(parity::kGpu, multi, false);
  const tlrt_status ss = steps(parity::kGpu, single, true);
  TH_CHECK_MSG(sm == TLRT_OK && ss == TLRT_OK, "%s (cuda multi / single) failed: %s", what,
               tlrt_last_error());
  if (sm != TLRT_OK || ss != TLRT_OK || multi.size() != single.size()) return;
  for (size_t k = 0; k < multi.size(); ++k)
    parity::compare(std::string(what) + " cuda single vs multi [output " + std::to_string(k) +
                        "]",
                    th::download(single[k].get()), th::download(multi[k].get()));
}

}  // namespace

int main() {
  if (!parity::start("test_parity_optim")) return 77;
  const uint64_t sizes[] = {0, 1, 2, 3, 4, 5, 7, 8, 255, 1024, 2049, 4099, 65536 + 3,
                            (uint64_t{1} << 22) + 1};
  uint64_t salt = 1;
  for (Dist d : {Dist::Uniform, Dist::Wide, Dist::Bits, Dist::Edge})
    for (uint64_t n : sizes) {
      if (n > parity::max_n()) continue;
      for (const SgdCfg &c : kSgd) run_sgd(c, d, n, salt += 10);
      for (const AdamCfg &c : kAdam) run_adam(c, d, n, salt += 10);
    }
  const std::vector<std::vector<uint64_t>> tables = {
      {1},
      {5, 0, 3, 16384, 2, 16385, 7},
      {65536 + 3, 1, 16383, 4099, 0, 255, 8},
      {(uint64_t{1} << 20) + 1, 768, 768, 3072, 2304, 50257 * 3},
  };
  for (Dist d : {Dist::Uniform, Dist::Wide, Dist::Bits, Dist::Edge})
    for (const auto &sizes : tables) {
      uint64_t largest = 0;
      for (uint64_t n : sizes) largest = std::max(largest, n);
      if (largest > parity::max_n()) continue;
      for (const AdamCfg &c : kAdam) run_adam_multi(c, d, sizes, salt += 100);
    }
  // Many tensors: a model's worth of small and medium ones, the table above 4 KiB.
  {
    std::vector<uint64_t> many;
    th::Rng rng(99);
    for (int t = 0; t < 400; ++t) many.push_back(rng.gen() % (t % 10 == 0 ? 40000 : 300));
    run_adam_multi(kAdam[2], Dist::Uniform, many, salt += 100);
  }
  parity::print_summary("test_parity_optim");
  return th::finish("test_parity_optim");
}
