// The TF32 CUDA attention backward (cuda/kernels/attention_tc.cuh, the very source nvcc compiles)
// run on the CPU under tests/emu/cuda_emu.hpp with its WMMA emulation, against the float64
// reference of tests/attention_ref.hpp with the TF32 bound of abi/tlrt_attention.h: the kernels'
// indexing, tiling (128-row blocks, 64- or 32-row inner tiles, d padded to 32 / 64 / 128), masks
// (the library dispatches only unmasked problems here, but the kernels take every kind), causal
// skipping, boundary tiles, fully excluded rows, and their barriers (several thread schedules; the
// emulated store_matrix_sync writes each element from one lane only, so a missing __syncwarp reads
// stale data); each gradient alone gives the fused backward's bits. The forward's out and lse come
// from the exact kernels (cuda/kernels/attention.cuh). The emulated tensor cores round once per
// element and k-step from a float64 sum; the GPU's accumulation differs, which the parity suite's
// float64 comparison covers on the device. Also checks that the plan declines d = 0, d > 128 and
// a device with too little shared memory. Skipped (77) under valgrind, ASan and TSan, as
// test_attention_emu.
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "../attention_ref.hpp"
#include "../emu/emu_check.hpp"
#define TLRT_CUDA_EMULATION 1
#include "cuda/kernels/attention_tc.cuh"  // includes the exact kernels' attention.cuh

namespace {

using tlrt::attn::Problem;
namespace ak = tlrt::cuda::attn_kernels;

constexpr double kU = 0x1p-24, kT32 = 0x1p-11;

using EmuLaunch = emu_check::Launch;
const auto &kPolicies = emu_check::kPolicies3;

double g_worst = 0;  // worst error / bound

void compare(const std::string &what, const std::vector<float> &got,
             const std::vector<double> &ref, const std::vector<double> &abs, double factor) {
  attref::within_bound(what, got, ref, abs, factor, g_worst);
}

// mk: 0 none, 1 per problem, 2 broadcast, 3 causal, 4 causal + broadcast, 5 rows fully blocked.
void run_case(uint64_t bh, uint64_t n, uint64_t d, int mk, float fill, uint64_t salt, int pol,
              bool odd = false) {
  const uint64_t N = bh * n * d;
  const std::vector<float> q = th::make(th::Dist::Uniform, N, salt + 1),
                           k = th::make(th::Dist::Uniform, N, salt + 2),
                           v = th::make(th::Dist::Uniform, N, salt + 3),
                           dout = th::make(th::Dist::Uniform, N, salt + 4);
  attref::Case c{bh, n, d, {}, (float)(1.0 / std::sqrt((double)d)), fill, mk == 3 || mk == 4};
  if (mk == 1 || mk == 2 || mk == 4 || mk == 5) {
    c.mask = th::make(th::Dist::Positive, (mk == 2 || mk == 4) ? n * n : bh * n * n, salt + 5);
    for (auto &x : c.mask) x = x < 0.3f ? (x < 0.15f ? 0.0f : -0.0f) : (x < 0.33f ? NAN : 1.0f);
    if (mk == 5)
      for (uint64_t b = 0; b < bh; ++b)
        for (uint64_t i = 0; i < n; i += 3)
          for (uint64_t j = 0; j < n; ++j)
            c.mask[(c.mask.size() == n * n ? 0 : b * n * n) + i * n + j] = 0.0f;
  }
  const attref::Ref r = attref::reference(c, q, k, v, dout);
  const double S = *std::max_element(r.S.begin(), r.S.end());
  Problem p{};
  p.bh = bh;
  p.n = n;
  p.d = d;
  p.mask = c.mask.empty() ? nullptr : c.mask.data();
  p.mask_stride = (!c.mask.empty() && c.mask.size() == bh * n * n && bh > 1) ? n * n : 0;
  p.scale = c.scale;
  p.fill = fill;
  p.causal = c.causal;
  const size_t sh = odd ? 1 : 0;
  auto dev = [&](const std::vector<float> &x) {
    std::vector<float> y(x.size() + sh + 1, 5.0f);
    std::copy(x.begin(), x.end(), y.begin() + sh);
    return y;
  };
  std::vector<float> dq = dev(q), dk = dev(k), dv = dev(v);
  EmuLaunch launch{kPolicies[pol], 232448, odd ? 2u : 65535u};
  // The forward's out and lse (the exact kernels).
  std::vector<float> o(N + sh + 1, 7.0f), l(bh * n + 1, 7.0f);
  ak::fwd_plan(launch, p, dq.data() + sh, dk.data() + sh, dv.data() + sh, o.data() + sh, l.data());
  const std::vector<float> out(o.begin() + sh, o.begin() + sh + N),
      lse(l.begin(), l.begin() + bh * n);
  // The header's TF32 bound: the split-TF32 one plus 2^-11 (8 S + 8).
  const double f =
      kU * (4.0 * n + 8.0 * d + 16.0 * (d + 2) * S + 128) + kT32 * (8.0 * S + 8);
  char tag[160];
  std::snprintf(tag, sizeof tag, "(%llu, %llu, %llu) mask %d fill %g policy %d%s ",
                (unsigned long long)bh, (unsigned long long)n, (unsigned long long)d, mk,
                (double)fill, pol, odd ? " odd" : "");
  // The backward (D, dkdv_tc_kernel, dq_tc_kernel) on that out and lse; each gradient alone gives
  // the same bits.
  std::vector<float> dout_ = dev(dout), out_ = dev(out), lse_ = lse, D(bh * n);
  std::vector<float> g[3] = {dev(std::vector<float>(N, 7.0f)), dev(std::vector<float>(N, 7.0f)),
                             dev(std::vector<float>(N, 7.0f))};
  const bool ran = ak::bwd_tc_plan(launch, p, dq.data() + sh, dk.data() + sh, dv.data() + sh,
                                   out_.data() + sh, dout_.data() + sh, lse_.data(), D.data(),
                                   g[0].data() + sh, g[1].data() + sh, g[2].data() + sh);
  TH_CHECK_MSG(ran, "bwd_tc_plan declined d = %llu", (unsigned long long)d);
  if (!ran) return;
  const std::vector<double> *want[3] = {&r.dq, &r.dk, &r.dv}, *aw[3] = {&r.adq, &r.adk, &r.adv};
  for (int x = 0; x < 3; ++x) {
    const std::vector<float> got(g[x].begin() + sh, g[x].begin() + sh + N);
    compare(std::string(tag) + "d" + "qkv"[x], got, *want[x], *aw[x], f);
    std::vector<float> alone = dev(std::vector<float>(N, 7.0f));
    float *outs[3] = {nullptr, nullptr, nullptr};
    outs[x] = alone.data() + sh;
    ak::bwd_tc_plan(launch, p, dq.data() + sh, dk.data() + sh, dv.data() + sh, out_.data() + sh,
                    dout_.data() + sh, lse_.data(), D.data(), outs[0], outs[1], outs[2]);
    bool same = true;
    for (uint64_t e = 0; e < N; ++e) same = same && th::same_bits(alone[e + sh], got[e]);
    TH_CHECK_MSG(same, "%sd%c alone differs from the fused backward's", tag, "qkv"[x]);
    TH_CHECK_MSG(g[x][N + sh] == 5.0f && alone[N + sh] == 5.0f && (sh == 0 || alone[0] == 5.0f),
                 "%sd%c written past its end", tag, "qkv"[x]);
  }
}

}  // namespace

int main() {
#ifdef TLRT_EMU_SANITIZED
  std::printf("test_attention_tc_emu: skipped under ASan / TSan (unannotated stack switches)\n");
  return 77;
#endif
  if (th::under_valgrind()) {
    std::printf("test_attention_tc_emu: skipped under valgrind\n");
    return 77;
  }
  // The plan declines what the kernels do not take (and launches nothing: D stays untouched).
  {
    EmuLaunch big{kPolicies[0], 232448, 65535}, small{kPolicies[0], 101376, 65535};
    Problem p{};
    p.bh = 1, p.n = 8, p.scale = 1, p.fill = -INFINITY;
    float x[8 * 256] = {}, g[3][8 * 256], D[8] = {7, 7, 7, 7, 7, 7, 7, 7};
    p.d = 0;
    TH_CHECK(!ak::bwd_tc_plan(big, p, x, x, x, x, x, x, D, g[0], g[1], g[2]));
    p.d = 129;
    TH_CHECK(!ak::bwd_tc_plan(big, p, x, x, x, x, x, x, D, g[0], g[1], g[2]));
    p.d = 32;  // dk/dv's 125 KB of shared memory: not on a 99 KB device
    TH_CHECK(!ak::bwd_tc_plan(small, p, x, x, x, x, x, x, D, g[0], g[1], g[2]));
    TH_CHECK(D[0] == 7.0f);
  }
  struct Dims {
    uint64_t bh, n, d;
  };
  uint64_t salt = 1;
  int rot = 0;
  for (Dims s : {Dims{1, 1, 1}, Dims{2, 1, 64}, Dims{1, 3, 5}, Dims{3, 17, 32}, Dims{1, 16, 8},
                 Dims{2, 64, 64}, Dims{1, 65, 33}, Dims{1, 129, 64}, Dims{1, 70, 100},
                 Dims{1, 37, 128}})
    for (int mk = 0; mk < 6; ++mk)
      for (float fill : {-INFINITY, -1000.0f})
        run_case(s.bh, s.n, s.d, mk, fill, salt += 10, rot++ % 3);
  // Several tiles past the diagonal (causal skipping per block and per warp), two row blocks.
  run_case(1, 300, 32, 3, -INFINITY, salt += 10, 0);
  run_case(1, 257, 64, 4, -INFINITY, salt += 10, 1);
  run_case(1, 200, 16, 1, -1000.0f, salt += 10, 2);
  // Misaligned tensors (element-wise copies), problems looped over by the blocks.
  for (Dims s : {Dims{3, 70, 64}, Dims{3, 33, 32}, Dims{3, 20, 128}})
    for (int mk : {0, 1, 4}) run_case(s.bh, s.n, s.d, mk, -INFINITY, salt += 10, rot++ % 3, true);
  std::printf("test_attention_tc_emu: worst error / bound: TF32 %.3g\n", g_worst);
  return th::finish("test_attention_tc_emu");
}
