// The CUDA cross-entropy kernels of cuda/kernels/cross_entropy.cuh (the very source nvcc
// compiles) run on the CPU under tests/emu/cuda_emu.hpp and compared bit for bit with the CPU
// backend (tlrt_cross_entropy_fwd / _bwd on CPU buffers): the row-in-registers forward (ce_split)
// in the (Q, NCL) schedules (one block; on the GPU the cluster forms run the same body, and rows
// up to 8192 columns take ce_group_fwd of cuda/softmax.cu, checked by parity_cross_entropy), the tree sum of the picked values (the CPU's tlrt_reduce_sum, the function
// reduce_axis runs on both backends), the one-block count / loss / row-gradient kernel
// (ce_finish, fault count included) and the backward (ce_bwd_flat below 256 columns; ce_bwd, one
// block per row: float4 body,
// scalar head and tail, and the misaligned fallback when the rows do not share their alignment).
// Shapes: every chunk count of each schedule, full and partial rows, 50257, rows beyond the grid
// (blocks loop); labels valid, ignored and faulted; inputs uniform, wide and edge values.
// Skipped (77) under valgrind, ASan and TSan (unannotated stack switches).
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "../emu/emu_check.hpp"
#include "index_buffers.hpp"
#define TLRT_CUDA_EMULATION 1
#include "cuda/kernels/cross_entropy.cuh"

namespace {

using emu_check::same;
namespace ck = tlrt::cuda::ce_kernels;

struct EmuLaunch {
  emu::Policy policy;
  uint64_t cap = uint64_t{1} << 31;
  unsigned grid_for(uint64_t items, uint64_t per_block) const {
    const uint64_t b = (items + per_block - 1) / per_block;
    return (unsigned)(b == 0 ? 1 : b < cap ? b : cap);
  }
  template <class K, class... A>
  void operator()(const char *, K kernel, unsigned grid, A... args) const {
    emu::launch(policy, dim3(grid), dim3(ck::kThreads), 0, [=] { kernel(args...); });
  }
  template <class K, class... A>
  void sized(const char *, K kernel, unsigned grid, unsigned threads, A... args) const {
    emu::launch(policy, dim3(grid), dim3(threads), 0, [=] { kernel(args...); });
  }
};

const emu::Policy kPolicies[] = {
    {emu::Order::Ascending, emu::Copy::Late, 1},
    {emu::Order::Descending, emu::Copy::Early, 2},
    {emu::Order::Random, emu::Copy::Late, 3},
};

template <class T>
void run_typed(const EmuLaunch &launch, const std::string &w, const std::vector<float> &x,
               const std::vector<int64_t> &lab64, uint64_t rows, uint64_t cols, int ignore,
               const std::vector<float> &want_loss, const std::vector<float> &want_lse,
               const std::vector<float> &want_dx, float g) {
  const std::vector<T> lab(lab64.begin(), lab64.end());
  const int64_t ig = ignore == TLRT_CROSS_ENTROPY_NO_IGNORE ? tlrt::row::kNoIgnore : ignore;
  std::vector<float> picked(rows, 7.0f), stats(2 * rows, 7.0f);
  if (cols <= 4096)
    ck::split_plan<T, 1, 1>(launch, x.data(), lab.data(), rows, cols, ig, picked.data(),
                            stats.data());
  else if (cols <= 8192)
    ck::split_plan<T, 1, 2>(launch, x.data(), lab.data(), rows, cols, ig, picked.data(),
                            stats.data());
  else if (cols <= 16384)
    ck::split_plan<T, 2, 2>(launch, x.data(), lab.data(), rows, cols, ig, picked.data(),
                            stats.data());
  else if (cols <= 32768)
    ck::split_plan<T, 4, 2>(launch, x.data(), lab.data(), rows, cols, ig, picked.data(),
                            stats.data());
  else
    ck::split_plan<T, 8, 2>(launch, x.data(), lab.data(), rows, cols, ig, picked.data(),
                            stats.data());
  same(w + " lse", want_lse, stats);
  // The tree sum of the picked values: the CPU backend's reduce_axis (the CUDA one is the same
  // tree, checked by the reduce suites).
  th::Buf P(th::upload(picked)), S;
  TH_OK(tlrt_reduce_sum(P.get(), S.out()));
  const std::vector<float> sum = th::download(S.get());
  unsigned long long faults = 0;
  std::vector<float> loss(1, 7.0f);
  ck::finish_plan<T, false>(launch, lab.data(), rows, cols, ig, sum.data(), &faults, loss.data());
  same(w + " loss", want_loss, loss);
  uint64_t nf = 0;
  for (int64_t l : lab64)
    nf += !(ig != tlrt::row::kNoIgnore && l == ig) && !(l >= 0 && (uint64_t)l < cols);
  TH_CHECK_MSG(faults == nf, "%s: faults %llu, expected %llu", w.c_str(), faults,
               (unsigned long long)nf);
  std::vector<float> c(1, 7.0f);
  const std::vector<float> gv(1, g);
  ck::finish_plan<T, true>(launch, lab.data(), rows, cols, ig, gv.data(), nullptr, c.data());
  // The backward: aligned rows (x and dx from 16-byte aligned vectors), and misaligned (dx
  // shifted by one float).
  std::vector<float> dx(rows * cols + 1, 7.0f);
  ck::bwd_plan<T>(launch, x.data(), lab.data(), stats.data(), c.data(), rows, cols, ig,
                  dx.data());
  same(w + " dx", want_dx, std::vector<float>(dx.begin(), dx.begin() + rows * cols));
  std::fill(dx.begin(), dx.end(), 7.0f);
  ck::bwd_plan<T>(launch, x.data(), lab.data(), stats.data(), c.data(), rows, cols, ig,
                  dx.data() + 1);
  same(w + " dx (misaligned)", want_dx, std::vector<float>(dx.begin() + 1, dx.end()));
}

void run_case(uint64_t rows, uint64_t cols, th::Dist dist, int ignore, uint64_t salt, int pi,
              uint64_t cap) {
  const std::vector<float> x = th::make(dist, rows * cols, salt);
  th::Rng rng(salt);
  std::vector<int64_t> lab(rows);
  for (auto &l : lab) {
    const uint64_t k = rng.gen() % 8;
    l = k == 0 ? -100 : k == 1 ? -1 : k == 2 ? (int64_t)cols : (int64_t)(rng.gen() % cols);
  }
  const float g = 1.25f;
  char tag[160];
  std::snprintf(tag, sizeof tag, "(%llu, %llu) %s ignore %d policy %d", (unsigned long long)rows,
                (unsigned long long)cols, th::dist_name(dist), ignore, pi);
  th::Buf X(th::upload(x)), L = th::index_buffer(TLRT_DEVICE_CPU, lab, false),
          G(th::upload({g})), loss, lse, dx;
  th::index_faults(TLRT_DEVICE_CPU, true);
  TH_OK(tlrt_cross_entropy_fwd(X.get(), L.get(), rows, cols, ignore, loss.out(), lse.out()));
  TH_OK(tlrt_cross_entropy_bwd(X.get(), L.get(), lse.get(), G.get(), rows, cols, ignore,
                               dx.out()));
  th::index_faults(TLRT_DEVICE_CPU, true);
  const std::vector<float> wl = th::download(loss.get()), ws = th::download(lse.get()),
                           wd = th::download(dx.get());
  EmuLaunch launch{kPolicies[pi], cap};
  run_typed<int64_t>(launch, std::string(tag) + " int64", x, lab, rows, cols, ignore, wl, ws, wd,
                     g);
  run_typed<int32_t>(launch, std::string(tag) + " int32", x, lab, rows, cols, ignore, wl, ws, wd,
                     g);
}

}  // namespace

int main() {
#ifdef TLRT_EMU_SANITIZED
  std::printf("test_cross_entropy_emu: skipped under ASan / TSan (unannotated stack switches)\n");
  return 77;
#endif
  if (th::under_valgrind()) {
    std::printf("test_cross_entropy_emu: skipped under valgrind\n");
    return 77;
  }
  uint64_t salt = 1;
  int rot = 0;
  auto go = [&](uint64_t rows, uint64_t cols, th::Dist d, int ignore, uint64_t cap) {
    salt += 10;
    run_case(rows, cols, d, ignore, salt, rot++ % 3, cap);
  };
  for (uint64_t c : {1, 2, 3, 31, 255, 256, 257, 1000, 4095, 4096})
    go(7, c, th::Dist::Uniform, -100, uint64_t{1} << 31);
  go(40, 10, th::Dist::Uniform, TLRT_CROSS_ENTROPY_NO_IGNORE, 3);  // blocks loop over rows
  go(300, 7, th::Dist::Uniform, -100, 2);
  go(3, 300, th::Dist::Uniform, -100, 2);
  for (uint64_t c : {4097, 8192, 8193, 12289, 16384, 16385, 32768, 32769, 50257, 65536})
    go(3, c, th::Dist::Uniform, -100, 2);
  for (th::Dist d : {th::Dist::Wide, th::Dist::Edge})
    for (uint64_t c : {5, 1000, 50257}) go(4, c, d, 0, uint64_t{1} << 31);
  std::printf("test_cross_entropy_emu: %d runs with differences\n", emu_check::mismatch_runs());
  return th::finish("test_cross_entropy_emu");
}
