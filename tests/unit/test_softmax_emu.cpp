// The CUDA softmax kernels of cuda/kernels/softmax.cuh (the very source nvcc compiles) run on the
// CPU under tests/emu/cuda_emu.hpp and compared bit for bit with the CPU backend (tlrt_softmax,
// tlrt_log_softmax, tlrt_hard_masked_softmax_by_row, tlrt_softmax_bwd, tlrt_log_softmax_bwd on
// CPU buffers): the short-row segment kernels (cols <= 32, one W-lane segment per row), the
// one-warp-per-row forward (33 .. 128 columns, several rows per warp), the row-in-registers
// long-row forward (split_fwd, 8192 < cols <= 65536) in the schedules cuda/softmax.cu dispatches
// (Q groups of 256 threads holding NCL chunks each; on the GPU the groups are a block's halves or
// a cluster's blocks) and the one-block-per-row backward (block_row_bwd, every pass in one kernel).
// Shapes: cols around the chunk edges past the dispatch thresholds (4097 backward, 8193 forward),
// odd chunk counts (the kernels fold chunks in pairs), partial last chunks, 2^20 (backward); rows
// beyond the grid so that blocks loop over rows. Inputs: uniform, wide exponents, bit patterns,
// edge values; masks with blocked entries, NaN and fully blocked rows.
// Skipped (77) under valgrind, ASan and TSan (unannotated stack switches).
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "../emu/emu_check.hpp"
#define TLRT_CUDA_EMULATION 1
#include "cuda/kernels/softmax.cuh"

namespace {

using emu_check::same;

namespace sk = tlrt::cuda::softmax_kernels;
using tlrt::row::Kind;

struct EmuLaunch {
  emu::Policy policy;
  unsigned sm;
  uint64_t cap = uint64_t{1} << 31;
  unsigned sms() const { return sm; }
  unsigned grid_for(uint64_t items, uint64_t per_block) const {
    const uint64_t b = (items + per_block - 1) / per_block;
    return (unsigned)(b == 0 ? 1 : b < cap ? b : cap);
  }
  template <class K, class... A>
  void operator()(const char *, K kernel, unsigned grid, A... args) const {
    emu::launch(policy, dim3(grid), dim3(sk::kThreads), 0, [=] { kernel(args...); });
  }
  template <class K, class... A>
  void sized(const char *, K kernel, unsigned grid, unsigned threads, A... args) const {
    emu::launch(policy, dim3(grid), dim3(threads), 0, [=] { kernel(args...); });
  }
};

// split_fwd with Q groups of NCL chunks, the three kinds. The GPU runs Q = 2, NCL = 2 for cols <=
// 16384 (one block; masked rows as a cluster of 2 blocks on sm_90) and the cluster forms of
// (Q, NCL) = (4, 2), (4, 4) and, masked, (8, 2) above; the cluster kernel is the same body with
// the groups in different blocks (its distributed shared memory reads the same words), so the
// one-block form here checks its index arithmetic and its order of operations.
template <unsigned Q, unsigned NCL>
void split_case(const EmuLaunch &launch, const std::string &w, const std::vector<float> &x,
                const std::vector<float> &mask, uint64_t rows, uint64_t cols, th::Buf &Y,
                th::Buf &L, th::Buf &HM) {
  if (cols > tlrt::cuda::split_row::SplitPart<Q, NCL, false>::kMaxCols) return;
  char tag[48];
  std::snprintf(tag, sizeof tag, " split Q=%u NCL=%u", Q, NCL);
  std::vector<float> out(rows * cols, 7.0f);
  sk::split_fwd_plan<Kind::Softmax, Q, NCL>(launch, x.data(), nullptr, rows, cols, out.data());
  same(w + tag + " softmax", th::download(Y.get()), out);
  std::fill(out.begin(), out.end(), 7.0f);
  sk::split_fwd_plan<Kind::LogSoftmax, Q, NCL>(launch, x.data(), nullptr, rows, cols, out.data());
  same(w + tag + " log_softmax", th::download(L.get()), out);
  std::fill(out.begin(), out.end(), 7.0f);
  sk::split_fwd_plan<Kind::Masked, Q, NCL>(launch, x.data(), mask.data(), rows, cols, out.data());
  same(w + tag + " masked softmax", th::download(HM.get()), out);
}

const emu::Policy kPolicies[] = {
    {emu::Order::Ascending, emu::Copy::Late, 1},
    {emu::Order::Descending, emu::Copy::Early, 2},
    {emu::Order::Random, emu::Copy::Late, 3},
};

// Inputs drawn from a few values whose maxima are signed zeros, -inf or NaNs of either sign (the
// short-row maxima compare integer keys: row::dev::seg_max): small=true in run_case.
std::vector<float> small_set(uint64_t n, uint64_t salt) {
  const float vals[] = {0.0f, -0.0f, -0.0f, -INFINITY, -1.0f, -1e-45f, NAN, -NAN, 0.0f, -0.0f};
  const std::vector<float> r = th::make(th::Dist::Positive, n, salt);
  std::vector<float> v(n);
  for (uint64_t i = 0; i < n; ++i) {
    // Mostly zeros and -inf (rows whose maximum is -0 or +0), now and then a NaN.
    const unsigned k = (unsigned)(r[i] * 1000.0f);
    v[i] = k < 990 ? vals[k % 6] : vals[6 + k % 4];
  }
  return v;
}

void run_case(uint64_t rows, uint64_t cols, th::Dist dist, uint64_t salt, int pi, unsigned sms,
              bool small = false) {
  const uint64_t n = rows * cols;
  const std::vector<float> x = small ? small_set(n, salt + 1) : th::make(dist, n, salt + 1),
                           g = th::make(dist, n, salt + 2);
  std::vector<float> mask = th::make(th::Dist::Positive, n, salt + 3);
  for (auto &v : mask) v = v < 0.3f ? (v < 0.15f ? 0.0f : -0.0f) : (v < 0.33f ? NAN : 1.0f);
  if (rows > 1)
    for (uint64_t j = 0; j < cols; ++j) mask[cols + j] = 0.0f;  // row 1 fully blocked
  char tag[160];
  std::snprintf(tag, sizeof tag, "(%llu, %llu) %s policy %d sms %u", (unsigned long long)rows,
                (unsigned long long)cols, small ? "small-set" : th::dist_name(dist), pi, sms);
  const std::string w = tag;
  th::Buf X(th::upload(x)), G(th::upload(g)), MK(th::upload(mask)), Y, L, HM, DY, DL;
  TH_OK(tlrt_softmax(X.get(), rows, cols, Y.out()));
  TH_OK(tlrt_log_softmax(X.get(), rows, cols, L.out()));
  TH_OK(tlrt_hard_masked_softmax_by_row(X.get(), MK.get(), rows, cols, HM.out()));
  // Backward on arbitrary y (x) as well as on the forward's output.
  TH_OK(tlrt_softmax_bwd(X.get(), G.get(), rows, cols, DY.out()));
  TH_OK(tlrt_log_softmax_bwd(X.get(), G.get(), rows, cols, DL.out()));
  EmuLaunch launch{kPolicies[pi], sms};
  if (cols <= 128 && sms == 1) launch.cap = 2;  // blocks loop over row groups
  std::vector<float> out(n);
  auto reset = [&] { std::fill(out.begin(), out.end(), 7.0f); };
  if (cols <= 32) {
    reset();
    sk::seg_fwd_plan<Kind::Softmax>(launch, x.data(), nullptr, rows, (unsigned)cols, out.data());
    same(w + " softmax", th::download(Y.get()), out);
    reset();
    sk::seg_fwd_plan<Kind::LogSoftmax>(launch, x.data(), nullptr, rows, (unsigned)cols, out.data());
    same(w + " log_softmax", th::download(L.get()), out);
    reset();
    sk::seg_fwd_plan<Kind::Masked>(launch, x.data(), mask.data(), rows, (unsigned)cols,
                                   out.data());
    same(w + " masked softmax", th::download(HM.get()), out);
    reset();
    sk::seg_bwd_plan<false>(launch, x.data(), g.data(), rows, (unsigned)cols, out.data());
    same(w + " softmax_bwd", th::download(DY.get()), out);
    reset();
    sk::seg_bwd_plan<true>(launch, x.data(), g.data(), rows, (unsigned)cols, out.data());
    same(w + " log_softmax_bwd", th::download(DL.get()), out);
    return;
  }
  if (cols > 32 && cols <= 128) {  // warp_fwd (the backward is the group kernel, not here)
    reset();
    sk::warp_fwd_plan<Kind::Softmax>(launch, x.data(), nullptr, rows, cols, out.data());
    same(w + " softmax", th::download(Y.get()), out);
    reset();
    sk::warp_fwd_plan<Kind::LogSoftmax>(launch, x.data(), nullptr, rows, cols, out.data());
    same(w + " log_softmax", th::download(L.get()), out);
    reset();
    sk::warp_fwd_plan<Kind::Masked>(launch, x.data(), mask.data(), rows, cols, out.data());
    same(w + " masked softmax", th::download(HM.get()), out);
    return;
  }
  if (cols > 8192 && cols <= 65536) {  // the split_fwd schedules cuda/softmax.cu dispatches
    if (sms <= 2) launch.cap = 2;          // blocks loop over rows
    if (cols <= 16384) {
      split_case<2, 2>(launch, w, x, mask, rows, cols, Y, L, HM);  // block, or masked: cluster
    } else if (cols <= 32768) {
      split_case<4, 2>(launch, w, x, mask, rows, cols, Y, L, HM);
    } else {
      split_case<4, 4>(launch, w, x, mask, rows, cols, Y, L, HM);  // softmax, log-softmax
      split_case<8, 2>(launch, w, x, mask, rows, cols, Y, L, HM);  // masked
    }
  }
  reset();
  sk::block_row_bwd_plan<false>(launch, x.data(), g.data(), rows, cols, out.data());
  same(w + " softmax_bwd", th::download(DY.get()), out);
  reset();
  sk::block_row_bwd_plan<true>(launch, x.data(), g.data(), rows, cols, out.data());
  same(w + " log_softmax_bwd", th::download(DL.get()), out);
}

}  // namespace

int main() {
#ifdef TLRT_EMU_SANITIZED
  std::printf("test_softmax_emu: skipped under ASan / TSan (unannotated stack switches)\n");
  return 77;
#endif
  if (th::under_valgrind()) {
    std::printf("test_softmax_emu: skipped under valgrind\n");
    return 77;
  }
  uint64_t salt = 1;
  int rot = 0;
  auto go = [&](uint64_t rows, uint64_t cols, th::Dist d, unsigned sms) {
    salt += 10;
    run_case(rows, cols, d, salt, rot++ % 3, sms);
  };
  // Short rows: every segment width, rows around the block's row groups (256 / W rows times 4).
  for (uint64_t c : {1, 2, 3, 4, 5, 7, 8, 9, 16, 17, 31, 32})
    for (uint64_t r : {1, 2, 5, 63, 1000, 1025}) go(r, c, th::Dist::Uniform, 132);
  // One warp per row, 4 or 2 rows per warp (33 .. 128 columns).
  for (uint64_t c : {33, 50, 63, 64, 65, 100, 127, 128})
    for (uint64_t r : {1, 3, 31, 33, 70}) go(r, c, th::Dist::Uniform, 132);
  go(300, 64, th::Dist::Uniform, 1);  // 2 blocks looping
  go(300, 100, th::Dist::Uniform, 1);
  for (th::Dist d : {th::Dist::Wide, th::Dist::Bits, th::Dist::Edge})
    for (uint64_t c : {40, 64, 128}) go(9, c, d, 132);
  // Signed-zero, -inf and NaN maxima in every segment width and the one-warp rows.
  for (uint64_t c : {2, 3, 4, 5, 8, 16, 17, 32, 33, 64, 100, 128}) {
    salt += 10;
    run_case(97, c, th::Dist::Uniform, salt, rot++ % 3, 132, true);
  }
  go(3000, 8, th::Dist::Uniform, 1);  // 2 blocks looping
  go(5000, 1, th::Dist::Uniform, 1);
  for (th::Dist d : {th::Dist::Wide, th::Dist::Bits, th::Dist::Edge})
    for (uint64_t c : {1, 3, 8, 13, 32}) go(77, c, d, 132);
  for (uint64_t c : {4097, 5000, 8192, 8193, 12288, 12289, 16384, 16385, 20480, 24577})
    for (uint64_t r : {1, 3}) go(r, c, th::Dist::Uniform, 132);
  go(10, 8193, th::Dist::Uniform, 1);  // grid of 8 blocks: blocks loop over rows
  // split_fwd: every chunk count of the row-in-registers schedules, full and partial, a prime.
  for (uint64_t c : {32768, 32769, 40961, 49152, 65521, 65535, 65537})
    go(2, c, th::Dist::Uniform, 132);
  go(5, 16384, th::Dist::Uniform, 2);  // split_fwd grid of 2: blocks loop over rows
  go(3, 65536, th::Dist::Uniform, 1);
  for (th::Dist d : {th::Dist::Wide, th::Dist::Bits, th::Dist::Edge})
    for (uint64_t c : {10007, 16384, 65536}) go(3, c, d, 132);
  go(2, 65536, th::Dist::Uniform, 132);
  go(1, uint64_t{1} << 20, th::Dist::Uniform, 132);
  for (th::Dist d : {th::Dist::Wide, th::Dist::Bits, th::Dist::Edge})
    for (uint64_t c : {4099, 8200, 13000}) go(3, c, d, 132);
  std::printf("test_softmax_emu: %d runs with differences\n", emu_check::mismatch_runs());
  return th::finish("test_softmax_emu");
}
