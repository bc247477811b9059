// The default fast CUDA attention forward (cuda/kernels/attention_mma.cuh: FlashAttention-2 on
// mma.sync m16n8k8 TF32 register fragments, 3xTF32 and the one-product TF32 variant; the very
// source nvcc compiles) run on the CPU under tests/emu/cuda_emu.hpp (whose m16n8k8 gathers the
// fragments through emulated shuffles, so a wrong fragment index shows up as a wrong product),
// against the float64 reference of tests/attention_ref.hpp with the bounds of
// abi/tlrt_attention.h: the kernel's indexing (fragment-ordered K / V planes, the permuted P V
// contraction), tiling (64-row blocks, 64- or 32-key tiles, d padded to 32 / 64 / 128), masks
// (per problem, broadcast, causal, fully blocked rows, both fills), causal skipping, boundary
// tiles, fully excluded rows (exactly 0 / -inf), misaligned tensors, problems looped over by the
// blocks, and the barriers of the double-buffered plane copies (several thread schedules; shared
// memory starts as NaN). The emulated tensor cores round once per element and instruction from a
// float64 sum; the GPU's accumulation differs, which the parity suite's float64 comparison covers
// on the device.
// Also checks that the plan declines d = 0, d > 128 and a device with too little shared memory
// (asking for no planes then), that two runs (two schedules) give the same bits, and that the
// forms give the same bits (FQ, the library's form at 32 < d <= 128 with split, against the base
// form, MmaForm::base), and that strided views read and written in place (fused projections,
// grouped heads, token-major out) give the packed problem's bits. The softmax's
// exponentials are ex2.approx on the GPU (attn::exp_ex2), modelled on the host as exp2 with
// ex2.approx.ftz's flush to zero: the bounds cover both. The planes
// of split_kv_kernel are NaN-filled beforehand (a plane entry the pre-pass misses shows up as
// NaN). ~2 minutes of CPU: the emulated mma exchanges every operand through emulated shuffles.
// Skipped (77) under valgrind, ASan and TSan.
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "../attention_ref.hpp"
#include "../emu/emu_check.hpp"
#define TLRT_CUDA_EMULATION 1
#include "cuda/kernels/attention_mma.cuh"

namespace {

using tlrt::attn::Problem;
namespace ak = tlrt::cuda::attn_kernels;

constexpr double kU = 0x1p-24, kT32 = 0x1p-11;

using EmuLaunch = emu_check::Launch;
const auto &kPolicies = emu_check::kPolicies3;

double g_worst[2] = {0, 0};  // worst error / bound: split, tf32

// A 16-byte aligned buffer of the pre-split planes, NaN-filled.
struct Planes {
  std::vector<float> buf;
  explicit Planes(uint64_t floats) : buf(floats + 4, NAN) {}
  float *get() {
    const uintptr_t a = reinterpret_cast<uintptr_t>(buf.data());
    return buf.data() + ((16 - a % 16) % 16) / 4;
  }
};  // worst error / bound: split, tf32
int g_cases = 0;
int g_forms = 0;  // runs of the other form compared bit for bit (see run_case)

void compare(const std::string &what, const std::vector<float> &got,
             const std::vector<double> &ref, const std::vector<double> &abs, double factor,
             int cls) {
  attref::within_bound(what, got, ref, abs, factor, g_worst[cls]);
}

// mk: 0 none, 1 per problem, 2 broadcast, 3 causal, 4 causal + broadcast, 5 rows fully blocked.
// splits: 1 = 3xTF32 only, 2 = also the one-product TF32 variant.
void run_case(uint64_t bh, uint64_t n, uint64_t d, int mk, float fill, uint64_t salt, int pol,
              bool odd = false, int splits = 1) {
  ++g_cases;
  const uint64_t N = bh * n * d;
  const std::vector<float> q = th::make(th::Dist::Uniform, N, salt + 1),
                           k = th::make(th::Dist::Uniform, N, salt + 2),
                           v = th::make(th::Dist::Uniform, N, salt + 3);
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
  const attref::Ref r = attref::reference(c, q, k, v, {});
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
  for (int split = 1; split >= 2 - splits; --split) {
    std::vector<float> o(N + sh + 1, 7.0f), l(bh * n + 1, 7.0f);
    EmuLaunch launch{kPolicies[pol], 232448, odd ? 2u : 65535u};
    // K, V pre-split into global planes (NaN where the pre-pass did not write).
    Planes planes(ak::fwd_mma_planes_floats(launch, p, split != 0));
    const bool ran = ak::fwd_mma_plan(launch, p, split != 0, dq.data() + sh, dk.data() + sh,
                                      dv.data() + sh, o.data() + sh, l.data(), planes.get());
    TH_CHECK_MSG(ran, "fwd_mma_plan declined d = %llu", (unsigned long long)d);
    if (!ran) return;
    const std::vector<float> out(o.begin() + sh, o.begin() + sh + N),
        lse(l.begin(), l.begin() + bh * n);
    TH_CHECK_MSG(o[N + sh] == 7.0f && (sh == 0 || o[0] == 7.0f), "out written past its end");
    TH_CHECK_MSG(l[bh * n] == 7.0f, "lse written past its end");
    // The header's bounds: split TF32; the TF32 variant adds 2^-11 (8 S + 8) (lse 2^-11 (4 S + 4)).
    const double f = kU * (4.0 * n + 8.0 * d + 16.0 * (d + 2) * S + 128) +
                     (split ? 0.0 : kT32 * (8.0 * S + 8));
    const double fl =
        kU * (8.0 * (d + 2) * S + 4.0 * n + 16) + (split ? 0.0 : kT32 * (4.0 * S + 4));
    char tag[160];
    std::snprintf(tag, sizeof tag, "(%llu, %llu, %llu) mask %d fill %g %s policy %d%s ",
                  (unsigned long long)bh, (unsigned long long)n, (unsigned long long)d, mk,
                  (double)fill, split ? "split" : "tf32", pol, odd ? " odd" : "");
    compare(std::string(tag) + "out", out, r.out, r.aout, f, split ? 0 : 1);
    compare(std::string(tag) + "lse", lse, r.lse, r.alse, fl, split ? 0 : 1);
    // Fully excluded rows: exactly zero out and lse = -inf (checked above through the inf).
    for (uint64_t e = 0; e < bh * n; ++e)
      if (std::isinf(r.lse[e]))
        for (uint64_t t = 0; t < d; ++t)
          TH_CHECK_MSG(out[e * d + t] == 0.0f, "%sexcluded row %llu not zero", tag,
                       (unsigned long long)e);
    // The forms give the same bits. 32 < d <= 128 with split: the run above is the FQ form (the
    // only form the library runs there: plane entries in register order, the split_hw P split,
    // fixed copy rounds, paired mask loads), against the base form (MmaForm::base; the library's
    // form at d <= 32 and on the TF32 path).
    if (split && d > 32 && d <= 128) {
      std::vector<float> o3(N + sh + 1, 7.0f), l3(bh * n + 1, 7.0f);
      EmuLaunch other{kPolicies[(pol + 1) % 3], 232448, odd ? 2u : 65535u};
      Planes planes3(ak::fwd_mma_planes_floats(other, p, true));
      const float *q3 = dq.data() + sh, *k3 = dk.data() + sh, *v3 = dv.data() + sh;
      TH_CHECK(ak::fwd_mma_plan<ak::MmaForm::base>(other, p, true, q3, k3, v3, o3.data() + sh,
                                                   l3.data(), planes3.get()));
      bool same = true;
      for (size_t e = 0; e < o.size(); ++e) same = same && th::same_bits(o[e], o3[e]);
      for (size_t e = 0; e < l.size(); ++e) same = same && th::same_bits(l[e], l3[e]);
      TH_CHECK_MSG(same, "%sthe FQ form differs from the base form", tag);
      ++g_forms;
    }
    // Run to run: another schedule gives the same bits.
    if (split && n <= 70 && (mk == 0 || mk == 4)) {
      std::vector<float> o2(N + sh + 1, 7.0f), l2(bh * n + 1, 7.0f);
      EmuLaunch other{kPolicies[(pol + 1) % 3], 232448, odd ? 2u : 65535u};
      Planes planes2(ak::fwd_mma_planes_floats(other, p, true));
      ak::fwd_mma_plan(other, p, true, dq.data() + sh, dk.data() + sh, dv.data() + sh,
                       o2.data() + sh, l2.data(), planes2.get());
      bool same = true;
      for (size_t e = 0; e < o.size(); ++e) same = same && th::same_bits(o[e], o2[e]);
      for (size_t e = 0; e < l.size(); ++e) same = same && th::same_bits(l[e], l2[e]);
      TH_CHECK_MSG(same, "%sdiffers under another schedule", tag);
    }
  }
}

// The forward over strided views (attn::RowMap), as cuda/attention.cu runs a geometry: q, k, v
// column blocks of one fused projection (batch, n, hq + 2 hkv, d) with a row pad, k and v heads
// shared by groups of hq / hkv query heads, out token-major (batch, n, hq, d); the same bits as
// the packed problem with each key / value head repeated for its query heads.
void run_views(uint64_t batch, uint64_t hq, uint64_t hkv, uint64_t n, uint64_t d, bool causal,
               bool split, uint64_t salt, int pol) {
  ++g_cases;
  const uint64_t bh = batch * hq, N = bh * n * d, group = hq / hkv;
  const uint64_t pad = 4, token = (hq + 2 * hkv) * d + pad;  // floats between two tokens' rows
  const std::vector<float> fused = th::make(th::Dist::Uniform, batch * n * token, salt);
  // The packed copies: problem b = bi hq + h, row i.
  std::vector<float> q(N), k(N), v(N);
  for (uint64_t bi = 0; bi < batch; ++bi)
    for (uint64_t h = 0; h < hq; ++h)
      for (uint64_t i = 0; i < n; ++i)
        for (uint64_t c = 0; c < d; ++c) {
          const uint64_t row = (bi * n + i) * token, at = ((bi * hq + h) * n + i) * d + c;
          q[at] = fused[row + h * d + c];
          k[at] = fused[row + (hq + h / group) * d + c];
          v[at] = fused[row + (hq + hkv + h / group) * d + c];
        }
  Problem p{};
  p.bh = bh, p.n = n, p.d = d, p.scale = (float)(1.0 / std::sqrt((double)d));
  p.fill = -INFINITY, p.causal = causal;
  EmuLaunch launch{kPolicies[pol], 232448, 65535u};
  std::vector<float> o(N, 7.0f), l(bh * n, 7.0f);
  Planes planes(ak::fwd_mma_planes_floats(launch, p, split));
  TH_CHECK(ak::fwd_mma_plan(launch, p, split, q.data(), k.data(), v.data(), o.data(), l.data(),
                            planes.get()));
  const tlrt::attn::RowMap qm{n * token, token, d, (uint32_t)hq, 1},
      km{n * token, token, d, (uint32_t)hq, (uint32_t)group},
      om{n * hq * d, hq * d, d, (uint32_t)hq, 1};
  std::vector<float> ot(N, 7.0f), lt(bh * n, 7.0f);
  Planes planes2(ak::fwd_mma_planes_floats(launch, p, split));
  TH_CHECK(ak::fwd_mma_plan(launch, p, split, fused.data(), qm, fused.data() + hq * d, km,
                            fused.data() + (hq + hkv) * d, km, ot.data(), om, lt.data(),
                            planes2.get()));
  uint64_t diff = 0;
  for (uint64_t bi = 0; bi < batch; ++bi)
    for (uint64_t h = 0; h < hq; ++h)
      for (uint64_t i = 0; i < n; ++i) {
        const uint64_t b = bi * hq + h;
        diff += std::memcmp(&l[b * n + i], &lt[b * n + i], sizeof(float)) != 0;
        for (uint64_t c = 0; c < d; ++c)
          diff += std::memcmp(&o[(b * n + i) * d + c], &ot[((bi * n + i) * hq + h) * d + c],
                              sizeof(float)) != 0;
      }
  TH_CHECK_MSG(diff == 0, "views (batch %llu, hq %llu, hkv %llu, n %llu, d %llu, causal %d, %s): "
               "%llu values differ from the packed problem's", (unsigned long long)batch,
               (unsigned long long)hq, (unsigned long long)hkv, (unsigned long long)n,
               (unsigned long long)d, (int)causal, split ? "split" : "tf32",
               (unsigned long long)diff);
}

}  // namespace

int main() {
#ifdef TLRT_EMU_SANITIZED
  std::printf("test_attention_mma_emu: skipped under ASan / TSan (unannotated stack switches)\n");
  return 77;
#endif
  if (th::under_valgrind()) {
    std::printf("test_attention_mma_emu: skipped under valgrind\n");
    return 77;
  }
  // The plan declines what the kernel does not take.
  {
    Problem p{};
    p.bh = 1, p.n = 8, p.scale = 1, p.fill = -INFINITY;
    float x[8 * 256] = {}, o[8 * 256], l[8];
    EmuLaunch big{kPolicies[0], 232448, 65535};
    Planes pl(ak::fwd_mma_planes_floats(big, p, true) + 1);
    for (unsigned d : {0u, 129u}) {
      p.d = d;
      TH_CHECK(ak::fwd_mma_planes_floats(big, p, true) == 0);
      TH_CHECK(!ak::fwd_mma_plan(big, p, true, x, x, x, o, l, pl.get()));
    }
    p.d = 64;
    TH_CHECK(!ak::fwd_mma_plan(big, p, true, x, x, x, o, l, nullptr));  // no planes: declined
    // Shared memory per block: d = 64 needs 138 KB (70 KB TF32), d = 32 74 KB (38 KB TF32).
    // 48 KB: none but the TF32 variant at d = 32; sm_86 / sm_89's 99 KB: d = 32, and TF32 at 64.
    EmuLaunch small{kPolicies[0], 49152, 65535}, mid{kPolicies[0], 101376, 65535};
    struct Fit {
      EmuLaunch *l;
      unsigned d;
      bool split, fits;
    };
    for (Fit c : {Fit{&small, 64, true, false}, Fit{&small, 32, true, false},
                  Fit{&small, 32, false, true}, Fit{&mid, 64, true, false},
                  Fit{&mid, 32, true, true}, Fit{&mid, 64, false, true},
                  Fit{&mid, 128, true, false}, Fit{&big, 128, true, true}}) {
      p.d = c.d;
      const uint64_t need = ak::fwd_mma_planes_floats(*c.l, p, c.split);
      TH_CHECK_MSG((need != 0) == c.fits, "d = %u split %d: planes %llu", c.d, (int)c.split,
                   (unsigned long long)need);
      Planes pc(need + 1);
      TH_CHECK_MSG(ak::fwd_mma_plan(*c.l, p, c.split, x, x, x, o, l, pc.get()) == c.fits,
                   "d = %u split %d: plan", c.d, (int)c.split);
    }
  }
  struct Dims {
    uint64_t bh, n, d;
  };
  uint64_t salt = 1;
  int rot = 0;
  // n = 1, 7, 16, 17, 64, 65, 130 and d = 1, 8, 16, 40, 64, 100, 128 (DP = 32, 64, 128, padded
  // and exact); every mask kind and both fills on the small shapes.
  for (Dims s : {Dims{1, 1, 1}, Dims{2, 7, 8}, Dims{1, 16, 16}, Dims{2, 17, 40}, Dims{1, 17, 100},
                 Dims{1, 16, 128}})
    for (int mk = 0; mk < 6; ++mk)
      for (float fill : {-INFINITY, -1000.0f})
        run_case(s.bh, s.n, s.d, mk, fill, salt += 10, rot++ % 3, false,
                 std::isinf(fill) ? 2 : 1);
  // Several key tiles and row blocks: tile edges, causal skipping per block and per warp (KT = 32
  // for d = 128), the last partial tile.
  for (int mk : {0, 1, 3, 4, 5}) {
    run_case(1, 64, 64, mk, -INFINITY, salt += 10, rot++ % 3, false, mk == 0 ? 2 : 1);
    run_case(1, 65, 40, mk, -INFINITY, salt += 10, rot++ % 3);
    run_case(1, 130, 32, mk, mk == 1 ? -1000.0f : -INFINITY, salt += 10, rot++ % 3);
  }
  run_case(1, 130, 64, 3, -INFINITY, salt += 10, 0, false, 2);
  run_case(1, 100, 128, 4, -INFINITY, salt += 10, 1);
  run_case(1, 65, 128, 3, -1000.0f, salt += 10, 2);
  run_case(1, 70, 100, 1, -INFINITY, salt += 10, 0, false, 2);
  // The FQ form's paired mask loads at DP = 128 (n even, keys of whole tiles in range; rows
  // past n in the last block; per-problem, broadcast, causal + broadcast and fully blocked rows).
  run_case(2, 96, 128, 1, -INFINITY, salt += 10, 1);
  run_case(1, 130, 100, 2, -1000.0f, salt += 10, 2);
  run_case(1, 66, 128, 4, -INFINITY, salt += 10, 0);
  run_case(1, 64, 120, 5, -INFINITY, salt += 10, 1);
  // Strided views in place: fused q / k / v projections, grouped heads, token-major out; d % 4
  // == 0 (16-byte rows) and not, the packed problem's bits.
  run_views(2, 3, 3, 40, 64, true, true, salt += 10, 0);
  run_views(1, 4, 2, 65, 32, false, true, salt += 10, 1);
  run_views(2, 2, 1, 17, 40, true, false, salt += 10, 2);
  run_views(1, 2, 2, 33, 30, false, true, salt += 10, 0);
  run_views(1, 2, 2, 20, 128, true, true, salt += 10, 1);
  // Misaligned tensors (element-wise copies and stores), problems looped over by the blocks.
  for (Dims s : {Dims{3, 20, 64}, Dims{3, 33, 32}, Dims{3, 9, 128}})
    for (int mk : {0, 1, 4}) run_case(s.bh, s.n, s.d, mk, -INFINITY, salt += 10, rot++ % 3, true);
  // The paired mask loads at DP = 64 (64-key tiles; FQ against the base form).
  run_case(2, 98, 64, 1, -INFINITY, salt += 10, 2);
  run_case(1, 130, 48, 4, -1000.0f, salt += 10, 0);
  std::printf("test_attention_mma_emu: %d cases (%d form runs bit for bit), worst error / "
              "bound: 3xTF32 %.3g, TF32 %.3g\n",
              g_cases, g_forms, g_worst[0], g_worst[1]);
  return th::finish("test_attention_mma_emu");
}
