// The CUDA kernel of tlrt_adam_step_multi (cuda/kernels/optim.cuh: adam_multi_kernel, through
// adam4, which tlrt_adam_step's kernel uses too), the very source nvcc compiles, run on the CPU
// under tests/emu/cuda_emu.hpp with three schedules and compared BIT FOR BIT with the CPU backend's
// tlrt_adam_step called tensor by tensor (the definition of the multi step):
//  - tables of tensors whose sizes cross the float4 tail (n % 4 = 0..3), the 16384-element chunk
//    boundary (16383, 16384, 16385, several chunks), one-element tensors, and many small tensors;
//  - grids capped so that blocks loop over chunks (1, 2, 3 blocks) and a grid with a block per
//    chunk;
//  - Adam (L2) and AdamW (decoupled), per-tensor weight decays including 0, steps 1, 2 and 4097,
//    inputs uniform, wide, random bits (NaN, inf, subnormals) and the edge vector.
// Skipped (77) under valgrind, ASan and TSan (unannotated stack switches).
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "../emu/emu_check.hpp"
#define TLRT_CUDA_EMULATION 1
#include "cuda/kernels/optim.cuh"

namespace {

namespace ak = tlrt::cuda::adam_kernels;
using emu_check::kPolicies3;

struct Cfg {
  double lr, beta1, beta2, eps;
  bool decoupled;
};

// The header's scalars (abi/tlrt_optim.h, DEFINITIONS), computed here from the arguments.
tlrt::opt::AdamParams params_of(const Cfg &c, uint64_t step) {
  tlrt::opt::AdamParams a{};
  a.b1 = (float)c.beta1;
  a.b2 = (float)c.beta2;
  a.omb1 = (float)(1.0 - c.beta1);
  a.omb2 = (float)(1.0 - c.beta2);
  a.eps = (float)c.eps;
  a.neg_step_size = -(float)(c.lr / (1.0 - std::pow(c.beta1, (double)step)));
  a.bc2_sqrt = (float)std::sqrt(1.0 - std::pow(c.beta2, (double)step));
  return a;
}

struct Tensor {
  std::vector<float> p, g, m, v;
  double wd;
};

void run(const std::vector<uint64_t> &sizes, const Cfg &c, th::Dist d, uint64_t step,
         uint64_t salt, int pi, unsigned grid_cap) {
  std::vector<Tensor> ts;
  for (size_t t = 0; t < sizes.size(); ++t) {
    const uint64_t n = sizes[t];
    Tensor x;
    x.p = th::make(d, n, ++salt);
    x.g = th::make(d, n, ++salt);
    x.m = th::make(d, n, ++salt);
    x.v = th::make(d == th::Dist::Uniform ? th::Dist::Positive : d, n, ++salt);
    x.wd = t % 3 == 0 ? 0.0 : 0.05 * (double)(t % 7);
    ts.push_back(std::move(x));
  }
  char tag[200];
  std::snprintf(tag, sizeof tag, "%s(lr %g, b1 %g, b2 %g, eps %g) step %llu, %zu tensors %s, "
                "policy %d, grid cap %u", c.decoupled ? "adamw" : "adam", c.lr, c.beta1, c.beta2,
                c.eps, (unsigned long long)step, sizes.size(), th::dist_name(d), pi, grid_cap);
  // The CPU backend, tensor by tensor.
  std::vector<std::vector<th::Buf>> cpu;
  for (const Tensor &x : ts) {
    std::vector<th::Buf> b;
    for (const std::vector<float> *h : {&x.p, &x.g, &x.m, &x.v}) b.emplace_back(th::upload(*h));
    TH_OK(tlrt_adam_step(b[0].get(), b[1].get(), b[2].get(), b[3].get(), step, c.lr, c.beta1,
                         c.beta2, c.eps, x.wd, c.decoupled));
    cpu.push_back(std::move(b));
  }
  // The kernel, over the same table the CUDA backend builds (empty tensors left out).
  std::vector<Tensor> e = ts;
  std::vector<ak::Entry> tab;
  uint64_t nchunks = 0;
  for (Tensor &x : e) {
    if (x.p.empty()) continue;
    const float l2 = c.decoupled ? 0.0f : (float)x.wd;
    const float decay = c.decoupled ? (float)(-(c.lr * x.wd)) : 0.0f;
    tab.push_back(ak::Entry{x.p.data(), x.g.data(), x.m.data(), x.v.data(), x.p.size(), nchunks,
                            l2, decay});
    nchunks += (x.p.size() + ak::kChunk - 1) / ak::kChunk;
  }
  if (!tab.empty()) {
    const ak::Entry *tp = tab.data();
    const uint64_t count = tab.size();
    const tlrt::opt::AdamParams a = params_of(c, step);
    const unsigned grid = nchunks < grid_cap ? (unsigned)nchunks : grid_cap;
    emu::launch(kPolicies3[pi], dim3(grid), dim3(ak::kThreads), 0,
                [=] { ak::adam_multi_kernel(tp, count, nchunks, a); });
  }
  for (size_t t = 0; t < ts.size(); ++t) {
    const std::string w = std::string(tag) + " tensor " + std::to_string(t) + " (n = " +
                          std::to_string(sizes[t]) + ")";
    emu_check::same(w + " param", th::download(cpu[t][0].get()), e[t].p);
    emu_check::same(w + " m", th::download(cpu[t][2].get()), e[t].m);
    emu_check::same(w + " v", th::download(cpu[t][3].get()), e[t].v);
    TH_CHECK_MSG(ts[t].g.empty() ||
                     std::memcmp(e[t].g.data(), ts[t].g.data(), 4 * ts[t].g.size()) == 0,
                 "%s: the gradient was written", w.c_str());
  }
}

}  // namespace

int main() {
#ifdef TLRT_EMU_SANITIZED
  std::printf("test_optim_emu: skipped under ASan / TSan (unannotated stack switches)\n");
  return 77;
#endif
  if (th::under_valgrind()) {
    std::printf("test_optim_emu: skipped under valgrind\n");
    return 77;
  }
  const std::vector<std::vector<uint64_t>> sets = {
      {1},
      {4},
      {3, 0, 5, 2, 7},
      {16384},
      {16383, 16385, 1, 6},
      {40000, 0, 2, 33000},
      {8, 12, 16, 1, 2, 3, 4, 5, 6, 7, 9, 10, 11, 13, 14, 15, 17, 31, 33, 64, 65, 100, 255, 257},
  };
  const Cfg cfgs[] = {{1e-3, 0.9, 0.999, 1e-8, false},
                      {1e-3, 0.9, 0.95, 1e-8, true},
                      {0.1, 0.0, 0.0, 0.0, false},
                      {1.0, 0.8, 0.99, 1e-1, true}};
  const uint64_t steps[] = {1, 2, 4097};
  uint64_t salt = 7;
  int pi = 0, k = 0;
  for (const auto &sz : sets)
    for (th::Dist d : {th::Dist::Uniform, th::Dist::Wide, th::Dist::Bits, th::Dist::Edge})
      for (const Cfg &c : cfgs) {
        const uint64_t step = steps[k % 3];
        const unsigned cap = k % 4 == 0 ? 1u : k % 4 == 1 ? 2u : k % 4 == 2 ? 3u : 1u << 20;
        ++k;
        run(sz, c, d, step, salt += 100, pi++ % 3, cap);
      }
  std::printf("test_optim_emu: %d runs with differences\n", emu_check::mismatch_runs());
  return th::finish("test_optim_emu");
}
