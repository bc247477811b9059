// The fast CUDA attention backward (cuda/attention_mma_bwd_kernels.cuh: warp-level mma.sync TF32
// products on register fragments, three products per product by default, one on the TF32 path),
// the very source nvcc compiles, run on the CPU under tests/emu/cuda_emu.hpp against the float64
// reference gradients of tests/attention_ref.hpp with abi/tlrt_attention.h's bounds for the fast
// path (and the looser TF32 bound for the one-product variant). The kernels get the float64
// forward's out and lse rounded to float32 (the exact forward's lse has the same definition).
// Covered: the fragment layouts and the C -> A key / query permutation of every product, tiling
// (64-key / 64-row blocks, 64-wide streamed tiles, d padded to 32 / 64 / 128), masks per problem
// and broadcast (0 / -0 block, NaN allowed), causal with tile and chunk skipping, rows with every
// key blocked (zero gradients) under both fills, boundary tiles, misaligned tensors (4-byte
// copies), problems looped over by the blocks, the one- and two-stage pipelines (two shared
// memory limits), several thread schedules, each gradient alone equal bit for bit to the fused
// call's, and nothing written outside the outputs. The emulated mma is slow (one emulated
// shuffle per operand element): the grid runs the one-product kernels and the single gradients
// on a subset of the cases. The emulated tensor cores round once per
// element and k-step from a float64 sum; the parity suite checks the GPU's own accumulation.
// Skipped (77) under valgrind, ASan and TSan, as test_attention_emu.
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "../attention_ref.hpp"
#include "../emu/emu_check.hpp"
#define TLRT_CUDA_EMULATION 1
#include "cuda/attention_mma_bwd_kernels.cuh"

namespace {

using tlrt::attn::Problem;
namespace mb = tlrt::cuda::attn_kernels::mma_bwd;

constexpr double kU = 0x1p-24, kT32 = 0x1p-11;

struct EmuLaunch {
  emu::Policy policy;
  size_t limit;
  unsigned grid_y;
  size_t smem_limit() const { return limit; }
  unsigned max_grid_y() const { return grid_y; }
  template <class K, class... A>
  void operator()(const char *name, K kernel, dim3 grid, unsigned threads, size_t smem,
                  A... args) const {
    TH_CHECK_MSG(smem <= limit, "%s: %zu bytes of shared memory, the device has %zu", name, smem,
                 limit);
    emu::launch(policy, grid, dim3(threads), smem, [=] { kernel(args...); });
  }
};

const emu::Policy kPolicies[] = {
    {emu::Order::Ascending, emu::Copy::Late, 1},
    {emu::Order::Descending, emu::Copy::Early, 2},
    {emu::Order::Random, emu::Copy::Late, 3},
};

double g_worst[2] = {0, 0};  // worst error / bound: split, tf32

void compare(const std::string &what, const std::vector<float> &got,
             const std::vector<double> &ref, const std::vector<double> &abs, double factor,
             int cls) {
  int bad = 0;
  for (size_t e = 0; e < got.size(); ++e) {
    const double err = std::fabs((double)got[e] - ref[e]), bound = factor * abs[e];
    if (bound > 0) g_worst[cls] = std::max(g_worst[cls], err / bound);
    if (!(err <= bound) && bad++ < 3)
      TH_CHECK_MSG(false, "%s[%zu] = %s, reference %.17g, error %.3g > bound %.3g", what.c_str(),
                   e, th::hex(got[e]).c_str(), ref[e], err, bound);
  }
}

// What a case runs besides the split (default) kernels' fused backward: the one-product (TF32)
// kernels, each gradient alone. The emulated mma is slow (a shuffle per operand element), so the
// grid spends these on a subset.
constexpr int kTf32 = 1, kAlone = 2;

// mk: 0 none, 1 per problem, 2 broadcast, 3 causal, 4 causal + broadcast, 5 rows fully blocked.
// big: the 232448-byte shared memory of sm_90 (two stages), else a smaller device's (one stage
// where the two-stage plan does not fit).
void run_case(uint64_t bh, uint64_t n, uint64_t d, int mk, float fill, uint64_t salt, int pol,
              bool big, int also, bool odd = false) {
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
  std::vector<float> out32(N), lse(bh * n);
  for (uint64_t e = 0; e < N; ++e) out32[e] = (float)r.out[e];
  for (uint64_t e = 0; e < bh * n; ++e) lse[e] = (float)r.lse[e];
  std::vector<float> dq_ = dev(q), dk_ = dev(k), dv_ = dev(v), dout_ = dev(dout),
                     out_ = dev(out32), D(bh * n);
  // Not big: sm_86's 99 KiB for d <= 64, sm_80's 163 KiB above (d = 128 on 99 KiB is declined).
  const size_t limit = big ? 232448u : d <= 64 ? 101376u : 166912u;
  const EmuLaunch launch{kPolicies[pol], limit, odd ? 2u : 65535u};
  for (int split = 1; split >= ((also & kTf32) ? 0 : 1); --split) {
    const double f = kU * (4.0 * n + 8.0 * d + 16.0 * (d + 2) * S + 128) +
                     (split ? 0.0 : kT32 * (8.0 * S + 8));
    char tag[160];
    std::snprintf(tag, sizeof tag, "(%llu, %llu, %llu) mask %d fill %g %s policy %d%s%s ",
                  (unsigned long long)bh, (unsigned long long)n, (unsigned long long)d, mk,
                  (double)fill, split ? "split" : "tf32", pol, big ? "" : " small-smem",
                  odd ? " odd" : "");
    std::vector<float> g[3] = {dev(std::vector<float>(N, 7.0f)), dev(std::vector<float>(N, 7.0f)),
                               dev(std::vector<float>(N, 7.0f))};
    const bool ran = mb::bwd_mma_plan(launch, p, split != 0, dq_.data() + sh, dk_.data() + sh,
                                      dv_.data() + sh, out_.data() + sh, dout_.data() + sh,
                                      lse.data(), D.data(), g[0].data() + sh, g[1].data() + sh,
                                      g[2].data() + sh);
    TH_CHECK_MSG(ran, "%sbwd_mma_plan declined", tag);
    if (!ran) return;
    const std::vector<double> *want[3] = {&r.dq, &r.dk, &r.dv}, *aw[3] = {&r.adq, &r.adk, &r.adv};
    for (int x = 0; x < 3; ++x) {
      const std::vector<float> got(g[x].begin() + sh, g[x].begin() + sh + N);
      compare(std::string(tag) + "d" + "qkv"[x], got, *want[x], *aw[x], f, split ? 0 : 1);
      // Rows whose every key is excluded: exactly zero gradients for the row (dq).
      if (x == 0)
        for (uint64_t e = 0; e < bh * n; ++e)
          if (std::isinf(r.lse[e]))
            for (uint64_t t = 0; t < d; ++t)
              TH_CHECK_MSG(got[e * d + t] == 0.0f, "%sdq of excluded row %llu not zero", tag,
                           (unsigned long long)e);
      TH_CHECK_MSG(g[x][N + sh] == 5.0f && (sh == 0 || g[x][0] == 5.0f),
                   "%sd%c written outside its range", tag, "qkv"[x]);
      if (!(also & kAlone)) continue;
      std::vector<float> alone = dev(std::vector<float>(N, 7.0f));
      float *outs[3] = {nullptr, nullptr, nullptr};
      outs[x] = alone.data() + sh;
      mb::bwd_mma_plan(launch, p, split != 0, dq_.data() + sh, dk_.data() + sh, dv_.data() + sh,
                       out_.data() + sh, dout_.data() + sh, lse.data(), D.data(), outs[0],
                       outs[1], outs[2]);
      bool same = true;
      for (uint64_t e = 0; e < N; ++e) same = same && th::same_bits(alone[e + sh], got[e]);
      TH_CHECK_MSG(same, "%sd%c alone differs from the fused backward's", tag, "qkv"[x]);
      TH_CHECK_MSG(alone[N + sh] == 5.0f && (sh == 0 || alone[0] == 5.0f),
                   "%sd%c alone written outside its range", tag, "qkv"[x]);
    }
  }
}

}  // namespace

int main() {
#ifdef TLRT_EMU_SANITIZED
  std::printf(
      "test_attention_mma_bwd_emu: skipped under ASan / TSan (unannotated stack switches)\n");
  return 77;
#endif
  if (th::under_valgrind()) {
    std::printf("test_attention_mma_bwd_emu: skipped under valgrind\n");
    return 77;
  }
  // The plan declines what the kernels do not take (nothing launched: the launcher would fail).
  {
    EmuLaunch tiny{kPolicies[0], 16384, 65535};
    Problem p{};
    p.bh = 1, p.n = 8, p.scale = 1, p.fill = -INFINITY;
    float x[8 * 256] = {}, o[8 * 256], l[8] = {}, Dd[8];
    for (uint64_t d : {0u, 129u, 256u}) {
      p.d = d;
      EmuLaunch any{kPolicies[0], 232448, 65535};
      TH_CHECK(!mb::bwd_mma_plan(any, p, true, x, x, x, x, x, l, Dd, o, o, o));
    }
    p.d = 128;  // 135 KB for one stage: not on a 16 KB device, nor on a 99 KiB one
    TH_CHECK(!mb::bwd_mma_plan(tiny, p, true, x, x, x, x, x, l, Dd, o, o, o));
    EmuLaunch sm86{kPolicies[0], 101376, 65535};
    TH_CHECK(!mb::bwd_mma_plan(sm86, p, true, x, x, x, x, x, l, Dd, o, o, o));
  }
  struct Dims {
    uint64_t bh, n, d;
  };
  uint64_t salt = 1;
  int rot = 0;
  // Every mask kind and fill on small shapes (n = 1, 7, 16, 64; d = 1, 8, 16, 64), the
  // one-product kernels causal, each gradient alone on fully blocked rows; then n = 17 with
  // d = 40 and 128.
  for (Dims s : {Dims{1, 1, 1}, Dims{2, 7, 8}, Dims{1, 16, 16}, Dims{1, 64, 64}})
    for (int mk = 0; mk < 6; ++mk)
      for (float fill : {-INFINITY, -1000.0f}) {
        const int also = (mk == 3 ? kTf32 : 0) | (mk == 5 ? kAlone : 0);
        run_case(s.bh, s.n, s.d, mk, fill, salt += 10, rot % 3, rot % 2 == 0, also);
        ++rot;
      }
  for (int mk = 0; mk < 6; ++mk)
    run_case(2, 17, 40, mk, mk % 2 ? -1000.0f : -INFINITY, salt += 10, mk % 3, mk % 2 == 0, 0);
  run_case(1, 17, 128, 0, -INFINITY, salt += 10, 0, true, kTf32);
  run_case(1, 17, 128, 3, -1000.0f, salt += 10, 1, false, 0);
  run_case(1, 17, 128, 5, -INFINITY, salt += 10, 2, true, kAlone);
  // n = 65, d = 100 (two key / row blocks, padded d), the one-stage plan.
  run_case(1, 65, 100, 0, -INFINITY, salt += 10, 0, false, kTf32);
  run_case(1, 65, 100, 5, -1000.0f, salt += 10, 2, true, 0);
  // n = 130: several tiles, causal skipping of tiles and chunks, boundary tiles.
  run_case(1, 130, 64, 3, -INFINITY, salt += 10, 0, true, kTf32);
  run_case(1, 130, 64, 4, -INFINITY, salt += 10, 1, false, 0);
  run_case(1, 130, 8, 1, -1000.0f, salt += 10, 2, true, 0);
  run_case(1, 130, 64, 5, -INFINITY, salt += 10, 0, true, 0);
  run_case(1, 130, 16, 3, -1000.0f, salt += 10, 1, true, 0);
  // Misaligned tensors (4-byte copies), problems looped over by the blocks (grid y = 2).
  run_case(3, 65, 32, 0, -INFINITY, salt += 10, 2, true, kAlone, true);
  run_case(3, 65, 32, 4, -INFINITY, salt += 10, 0, true, 0, true);
  run_case(3, 17, 32, 1, -INFINITY, salt += 10, 1, true, 0, true);
  run_case(3, 20, 128, 0, -INFINITY, salt += 10, 2, true, 0, true);
  std::printf("test_attention_mma_bwd_emu: worst error / bound: split TF32 %.3g, TF32 %.3g\n",
              g_worst[0], g_worst[1]);
  return th::finish("test_attention_mma_bwd_emu");
}
