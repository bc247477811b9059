// The CUDA attention kernels (cuda/kernels/attention.cuh, the very source nvcc compiles) run on
// the CPU under tests/emu/cuda_emu.hpp and compared bit for bit with the CPU backend
// (tlrt_flash_attention_* on CPU buffers), so that the kernels' index arithmetic, boundary tiles,
// causal skipping, barriers and asynchronous copies are checked without a GPU. Every case runs
// under several schedules (fibers resumed in ascending, descending and random order; cp.async
// copies landing at issue or only at the wait): a missing barrier or wait changes the bits.
// The shapes reach every kernel instantiation (d = 0, 1, 5, 32, 33, 64, 100, 128, 200, 256),
// n = 1, odd n and n across the 32/64/128-row block edges and the 64-key tiles; masks none /
// per problem / broadcast / causal / causal + mask / fully blocked rows with both fill
// conventions; the fused backward and its three single-gradient forms; special values.
// Each case also runs as on a device with less shared memory (sm_86/89 for d <= 64, sm_80 for
// d <= 128), where the plans pick the smaller-block variants. TLRT_EMU_FULL=1 runs every schedule
// on every case (the default rotates them). Skipped (77) under valgrind, ASan and TSan, which do
// not follow the emulator's stack switches unannotated (the plain builds run it).
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "../emu/emu_check.hpp"
#define TLRT_CUDA_EMULATION 1
#include "cuda/kernels/attention.cuh"

namespace {

using emu_check::full;
using emu_check::same;

using tlrt::attn::Problem;
namespace ak = tlrt::cuda::attn_kernels;

// Shared memory per block of the emulated device: sm_90, sm_80, sm_86/89 (the plans pick
// smaller-block variants below sm_90; d > 64 needs sm_80's, d > 128 sm_90's, as before).
constexpr size_t kSmemLimits[] = {232448, 166912, 101376};

using EmuLaunch = emu_check::Launch;

const emu::Policy kPolicies[] = {
    {emu::Order::Ascending, emu::Copy::Late, 1},
    {emu::Order::Descending, emu::Copy::Early, 2},
    {emu::Order::Random, emu::Copy::Late, 3},
    {emu::Order::Descending, emu::Copy::Late, 4},
    {emu::Order::Random, emu::Copy::Early, 5},
};
constexpr int kNumPolicies = sizeof kPolicies / sizeof kPolicies[0];

struct Case {
  uint64_t bh, n, d;
  int mk;  // 0 none, 1 per problem, 2 broadcast, 3 causal, 4 causal + broadcast, 5 full rows
  double fill;
  th::Dist dist;
  bool odd = false;  // tensors 4 bytes past 16-byte alignment (element-wise copies and stores);
                     // the grid then has 2 blocks along y, so blocks loop over problems
};

void run_case(const Case &c, uint64_t salt, int policy_index, size_t limit) {
  const uint64_t N = c.bh * c.n * c.d;
  const std::vector<float> q = th::make(c.dist, N, salt + 1), k = th::make(c.dist, N, salt + 2),
                           v = th::make(c.dist, N, salt + 3),
                           dout = th::make(th::Dist::Uniform, N, salt + 4);
  std::vector<float> mask;
  const bool causal = c.mk == 3 || c.mk == 4;
  if (c.mk == 1 || c.mk == 2 || c.mk == 4 || c.mk == 5) {
    mask = th::make(th::Dist::Positive, (c.mk == 2 || c.mk == 4) ? c.n * c.n : c.bh * c.n * c.n,
                    salt + 5);
    for (auto &x : mask) x = x < 0.3f ? (x < 0.15f ? 0.0f : -0.0f) : (x < 0.33f ? NAN : 1.0f);
    if (c.mk == 5)
      for (uint64_t j = 0; j < c.n; ++j) mask[(c.n / 2) * c.n + j] = 0.0f;
  }
  const double scale = 1.0 / std::sqrt((double)std::max<uint64_t>(c.d, 1));
  char tag[192];
  std::snprintf(tag, sizeof tag, "(%llu, %llu, %llu) mask %d fill %g %s policy %d smem %zu",
                (unsigned long long)c.bh, (unsigned long long)c.n, (unsigned long long)c.d, c.mk,
                c.fill, th::dist_name(c.dist), policy_index, limit);
  const std::string w = tag;

  // CPU backend through the public API.
  th::Buf Q(th::upload(q)), K(th::upload(k)), V(th::upload(v)), DO(th::upload(dout)), M;
  if (!mask.empty()) M = th::Buf(th::upload(mask));
  th::Buf O, L, dq, dk, dv;
  TH_OK(tlrt_flash_attention_fwd(Q.get(), K.get(), V.get(), M.get(), c.bh, c.n, c.d, scale, causal,
                                 c.fill, O.out(), L.out()));
  const std::vector<float> out = th::download(O.get()), lse = th::download(L.get());
  TH_OK(tlrt_flash_attention_bwd(Q.get(), K.get(), V.get(), M.get(), DO.get(), O.get(), L.get(),
                                 c.bh, c.n, c.d, scale, causal, c.fill, dq.out(), dk.out(),
                                 dv.out()));
  const std::vector<float> gq = th::download(dq.get()), gk = th::download(dk.get()),
                           gv = th::download(dv.get());

  // The CUDA kernels, emulated, on the same values (the problem as core builds it).
  Problem p{};
  p.bh = c.bh;
  p.n = c.n;
  p.d = c.d;
  p.mask = mask.empty() ? nullptr : mask.data();  // (masks are read element by element)
  p.mask_stride = (!mask.empty() && mask.size() == c.bh * c.n * c.n && c.bh > 1) ? c.n * c.n : 0;
  p.scale = (float)scale;
  p.fill = (float)c.fill;
  p.causal = causal;
  EmuLaunch launch{kPolicies[policy_index], limit, c.odd ? 2u : 65535u};
  // Device-side copies, shifted by one float when c.odd.
  const size_t sh = c.odd ? 1 : 0;
  auto dev = [&](const std::vector<float> &x) {
    std::vector<float> y(x.size() + sh + 1, 5.0f);
    std::copy(x.begin(), x.end(), y.begin() + sh);
    return y;
  };
  std::vector<float> dq_ = dev(q), dk_ = dev(k), dv_ = dev(v), ddo = dev(dout), dout_ = dev(out),
                     dlse = dev(lse);
  const float *Qp = dq_.data() + sh, *Kp = dk_.data() + sh, *Vp = dv_.data() + sh,
              *DOp = ddo.data() + sh, *Op = dout_.data() + sh, *Lp = dlse.data() + sh;
  const std::vector<float> sevens(N, 7.0f);
  std::vector<float> o1 = dev(sevens), o2 = dev(sevens), o3 = dev(sevens),
                     o4 = dev(std::vector<float>(c.bh * c.n));
  auto res = [&](const std::vector<float> &o, size_t count) {
    return std::vector<float>(o.begin() + sh, o.begin() + sh + count);
  };
  auto reset = [&](std::vector<float> &o) { std::fill(o.begin(), o.end(), 7.0f); };
  ak::fwd_plan(launch, p, Qp, Kp, Vp, o1.data() + sh, o4.data() + sh);
  same(w + " fwd out", out, res(o1, N));
  same(w + " fwd lse", lse, res(o4, c.bh * c.n));
  std::vector<float> D(c.bh * c.n);
  reset(o1);
  ak::bwd_plan(launch, p, Qp, Kp, Vp, Op, DOp, Lp, D.data(), o1.data() + sh, o2.data() + sh,
               o3.data() + sh);
  same(w + " bwd dq", gq, res(o1, N));
  same(w + " bwd dk", gk, res(o2, N));
  same(w + " bwd dv", gv, res(o3, N));
  // The single-gradient paths (each kernel alone; dv alone skips D and dS).
  reset(o1), reset(o2), reset(o3);
  ak::bwd_plan(launch, p, Qp, Kp, Vp, Op, DOp, Lp, D.data(), nullptr, nullptr, o3.data() + sh);
  same(w + " bwd dv alone", gv, res(o3, N));
  ak::bwd_plan(launch, p, Qp, Kp, Vp, Op, DOp, Lp, D.data(), nullptr, o2.data() + sh, nullptr);
  same(w + " bwd dk alone", gk, res(o2, N));
  ak::bwd_plan(launch, p, Qp, Kp, Vp, Op, DOp, Lp, D.data(), o1.data() + sh, nullptr, nullptr);
  same(w + " bwd dq alone", gq, res(o1, N));
}

}  // namespace

int main() {
#ifdef TLRT_EMU_SANITIZED
  std::printf("test_attention_emu: skipped under ASan / TSan (unannotated stack switches)\n");
  return 77;
#endif
  if (th::under_valgrind()) {
    std::printf("test_attention_emu: skipped under valgrind\n");
    return 77;
  }
  struct Dims {
    uint64_t bh, n, d;
  };
  const bool all = full();
  uint64_t salt = 1;
  int rot = 0;
  auto go = [&](const Case &c) {
    salt += 10;
    for (size_t limit : kSmemLimits) {
      // The smallest device that still runs d; below sm_90 the plans differ only there.
      const size_t low = c.d <= 64 ? kSmemLimits[2] : c.d <= 128 ? kSmemLimits[1] : kSmemLimits[0];
      if (limit != kSmemLimits[0] && limit != low) continue;
      if (all)
        for (int pi = 0; pi < kNumPolicies; ++pi) run_case(c, salt, pi, limit);
      else
        run_case(c, salt, rot++ % kNumPolicies, limit);
    }
  };
  for (Dims s : {Dims{2, 70, 0}, Dims{1, 1, 1}, Dims{2, 1, 64}, Dims{1, 3, 5}, Dims{3, 17, 32},
                 Dims{2, 64, 64}, Dims{1, 65, 64}, Dims{2, 100, 33}, Dims{1, 129, 128},
                 Dims{1, 70, 100}, Dims{1, 67, 256}, Dims{1, 50, 200}, Dims{1, 200, 64},
                 Dims{1, 130, 32}})
    for (int mk = 0; mk < 6; ++mk)
      for (double fill : {-(double)INFINITY, -1000.0})
        go(Case{s.bh, s.n, s.d, mk, fill, th::Dist::Uniform});
  // Longer rows: several key tiles after the diagonal block, both skipping rules.
  go(Case{1, 300, 64, 3, -(double)INFINITY, th::Dist::Uniform});
  go(Case{2, 257, 128, 4, -(double)INFINITY, th::Dist::Uniform});
  go(Case{1, 160, 256, 3, -(double)INFINITY, th::Dist::Uniform});
  go(Case{1, 193, 64, 1, -1000.0, th::Dist::Uniform});
  // Misaligned tensors (element-wise paths of the exact kernels) and blocks looping over problems.
  for (Dims s : {Dims{3, 70, 64}, Dims{3, 129, 128}, Dims{3, 33, 32}, Dims{3, 40, 256}})
    for (int mk : {0, 1, 4}) {
      Case c{s.bh, s.n, s.d, mk, -(double)INFINITY, th::Dist::Uniform};
      c.odd = true;
      go(c);
    }
  // Special values: NaN / inf / subnormal inputs, and magnitudes where the order matters.
  for (th::Dist dist : {th::Dist::Edge, th::Dist::Wide, th::Dist::Bits})
    for (int mk : {0, 3, 1})
      for (Dims s : {Dims{1, 70, 64}, Dims{1, 33, 5}, Dims{1, 129, 128}})
        go(Case{s.bh, s.n, s.d, mk, -(double)INFINITY, dist});
  std::printf("test_attention_emu: %d runs with differences (%s schedules)\n",
              emu_check::mismatch_runs(), all ? "all" : "rotated");
  return th::finish("test_attention_emu");
}
