// Parity of the fused optimizer steps (abi/tlrt_optim.h; numeric class exact): the same seeded
// parameters, states and gradients on the CPU and CUDA backends, several consecutive in-place steps
// (step 1, where SGD's buffer is created, then later steps, and a step far out where the bias
// corrections are 1), then param and every state buffer compared BIT FOR BIT, and the CUDA run
// repeated with the determinism switch flipped (nothing may change). Sizes cross the float4 /
// tail boundaries of the CUDA kernel (n % 4 = 0..3) and its chunking; inputs include random bit
// patterns (NaN, inf, subnormals) and the edge vector. Skipped (77) without a CUDA device.
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
  parity::print_summary("test_parity_optim");
  return th::finish("test_parity_optim");
}
