// The CUDA RMS-norm kernels (cuda/kernels/rms_norm.cuh, the very source nvcc compiles) run on the
// CPU under tests/emu/cuda_emu.hpp and compared bit for bit with the CPU backend
// (tlrt_rms_norm_fwd / tlrt_rms_norm_bwd on CPU buffers), with and without gamma:
//  - the forward and dx plans (segments up to 32 columns, the row-in-registers groups up to 8192)
//    at every dispatch edge, rows around a block's rows and with grids capped at a few blocks (the
//    kernels then loop);
//  - the long-row passes (cols > 8192) as cuda/layer_norm.cu composes them: row::dev::chunk_reduce
//    with the file's functors, the tree's level over the chunk partials (here on the host, as
//    reduce_axis does it on the GPU), inv_kernel, chunk_map;
//  - the column partials of dgamma (col_partials), finished on the host by the tree over the
//    kColSets lane sets of each chunk and over the chunks (reduce_axis on the GPU), rows around the
//    lane sets, the tree's lanes and chunks, grids capped in both dimensions.
// Every case runs under one of several schedules (rotated; TLRT_EMU_FULL=1 runs all). Skipped (77)
// under valgrind, ASan and TSan (unannotated stack switches).
#include <cmath>
#include <string>
#include <vector>

#include "../emu/emu_check.hpp"
#define TLRT_CUDA_EMULATION 1
#include "cuda/kernels/rms_norm.cuh"

namespace {

using emu_check::full;
using emu_check::same;

namespace rk = tlrt::cuda::rms_kernels;
namespace red = tlrt::red;
namespace row = tlrt::row;

struct EmuLaunch {
  emu::Policy policy;
  uint64_t grid_cap;
  uint64_t max_grid() const { return grid_cap; }
  unsigned grid_for(uint64_t items, uint64_t per_block) const {
    const uint64_t b = (items + per_block - 1) / per_block;
    return (unsigned)(b == 0 ? 1 : b < grid_cap ? b : grid_cap);
  }
  template <class K, class... A>
  void operator()(const char *, K kernel, unsigned grid, A... args) const {
    emu::launch(policy, dim3(grid), dim3(rk::kThreads), 0, [=] { kernel(args...); });
  }
  template <class K, class... A>
  void grid2(const char *, K kernel, dim3 grid, A... args) const {
    // The grid capped in both dimensions like the x dimension (the kernel loops).
    const dim3 g((unsigned)std::min<uint64_t>(grid.x, grid_cap),
                 (unsigned)std::min<uint64_t>(grid.y, grid_cap), 1);
    emu::launch(policy, g, dim3(rk::kThreads), 0, [=] { kernel(args...); });
  }
};

const emu::Policy kPolicies[] = {
    {emu::Order::Ascending, emu::Copy::Late, 1, emu::Order::Ascending},
    {emu::Order::Descending, emu::Copy::Early, 2, emu::Order::Descending},
    {emu::Order::Random, emu::Copy::Late, 3, emu::Order::Random},
};
constexpr int kNumPolicies = sizeof kPolicies / sizeof kPolicies[0];

// THE TREE over a sequence v[0..m) with stride, m <= 256 (one chunk, one element per lane).
float tree_small(const float *v, uint64_t m, uint64_t stride) {
  float a[256];
  const float id = red::Ops<red::Op::Sum>::identity();
  for (unsigned t = 0; t < 256; ++t) a[t] = t < m ? id + v[t * stride] : id;
  for (unsigned h = 128; h >= 1; h >>= 1)
    for (unsigned t = 0; t < h; ++t) a[t] = a[t] + a[t + h];
  return a[0];
}

// The long-row forward and dx (cuda/layer_norm.cu's rms_long_fwd / rms_long_dx) with the chunk
// level of the tree on the host (nc <= 256 chunk partials per row).
template <bool G>
void long_passes(const EmuLaunch &launch, const std::vector<float> &x,
                 const std::vector<float> &gamma, const std::vector<float> &dy, uint64_t rows,
                 uint64_t cols, float eps, std::vector<float> &y, std::vector<float> &inv_rms,
                 std::vector<float> &dx) {
  const uint64_t nc = red::chunks_of(cols);
  const float n = static_cast<float>(cols);
  const unsigned grid = launch.grid_for(rows * nc, 1);
  const float *g = G ? gamma.data() : nullptr;
  std::vector<float> part(rows * nc, 7.0f), ms(rows), b(rows);
  auto finish_rows = [&](std::vector<float> &out) {
    for (uint64_t i = 0; i < rows; ++i) out[i] = red::finish(tree_small(part.data() + i * nc, nc, 1), n);
  };
  launch("chunk_reduce (x * x)", tlrt::row::dev::chunk_reduce<red::Op::Sum, 1, rk::SqF>, grid,
         rk::SqF{x.data(), cols}, rows, cols, nc, part.data(), (float *)nullptr);
  finish_rows(ms);
  launch("inv_kernel", rk::inv_kernel, launch.grid_for(rows, rk::kThreads), (const float *)ms.data(),
         rows, eps, inv_rms.data());
  launch("chunk_map (y)", tlrt::row::dev::chunk_map<rk::OutF<G>>, grid,
         rk::OutF<G>{x.data(), g, inv_rms.data(), cols}, rows, cols, nc, y.data());
  launch("chunk_reduce (d * xhat)", tlrt::row::dev::chunk_reduce<red::Op::Sum, 1, rk::TermF<G>>,
         grid, rk::TermF<G>{dy.data(), x.data(), g, inv_rms.data(), cols}, rows, cols, nc,
         part.data(), (float *)nullptr);
  finish_rows(b);
  launch("chunk_map (dx)", tlrt::row::dev::chunk_map<rk::DxF<G>>, grid,
         rk::DxF<G>{dy.data(), x.data(), g, inv_rms.data(), b.data(), cols}, rows, cols, nc,
         dx.data());
}

void run_case(uint64_t rows, uint64_t cols, th::Dist dist, uint64_t salt, int pi,
              uint64_t grid_cap, bool with_gamma) {
  const uint64_t n = rows * cols;
  const std::vector<float> x = th::make(dist, n, salt + 1), dy = th::make(dist, n, salt + 2);
  std::vector<float> gamma = th::make(th::Dist::Uniform, cols, salt + 3);
  for (float &v : gamma) v *= 2.0f;
  const float eps = (salt % 2) ? 1e-5f : 0.0f;
  char tag[192];
  std::snprintf(tag, sizeof tag, "(%llu, %llu) %s %s policy %d grid cap %llu",
                (unsigned long long)rows, (unsigned long long)cols, th::dist_name(dist),
                with_gamma ? "gamma" : "no gamma", pi, (unsigned long long)grid_cap);
  const std::string w = tag;
  th::Buf X(th::upload(x)), DY(th::upload(dy)), G(th::upload(gamma)), Y, S, DX, DG;
  const tlrt_buffer *gp = with_gamma ? G.get() : nullptr;
  TH_OK(tlrt_rms_norm_fwd(X.get(), gp, rows, cols, eps, Y.out(), S.out()));
  TH_OK(tlrt_rms_norm_bwd(DY.get(), X.get(), gp, S.get(), rows, cols, DX.out(), DG.out()));
  const std::vector<float> want_y = th::download(Y.get()), want_is = th::download(S.get()),
                           want_dx = th::download(DX.get()), want_dg = th::download(DG.get());
  const EmuLaunch launch{kPolicies[pi], grid_cap};
  const float nf = static_cast<float>(cols);
  const float *g = with_gamma ? gamma.data() : nullptr;
  std::vector<float> y(n, 7.0f), is(rows, 7.0f), dx(n, 7.0f);
  if (cols <= rk::kGroupMaxCols) {
    rk::fwd_plan(launch, x.data(), g, rows, cols, nf, eps, y.data(), is.data());
    // dx from the CPU's inv_rms (the kernels take any statistic).
    rk::dx_plan(launch, dy.data(), x.data(), g, want_is.data(), rows, cols, nf, dx.data());
  } else if (with_gamma) {
    long_passes<true>(launch, x, gamma, dy, rows, cols, eps, y, is, dx);
  } else {
    long_passes<false>(launch, x, gamma, dy, rows, cols, eps, y, is, dx);
  }
  same(w + " y", want_y, y);
  same(w + " inv_rms", want_is, is);
  same(w + " dx", want_dx, dx);
  // dgamma: the partials, then the lane-set level and the chunk level on the host.
  const uint64_t nc = red::chunks_of(rows);
  TH_CHECK_MSG(nc <= 256, "%s: test shapes keep nc <= 256", w.c_str());
  std::vector<float> part(nc * rk::kColSets * cols, 7.0f);
  rk::col_partials_plan(launch, dy.data(), x.data(), want_is.data(), rows, cols, part.data());
  std::vector<float> dg(cols), cv(nc);
  for (uint64_t j = 0; j < cols; ++j) {
    for (uint64_t k = 0; k < nc; ++k)
      cv[k] = tree_small(part.data() + k * rk::kColSets * cols + j, rk::kColSets, cols);
    dg[j] = nc == 1 ? cv[0] : tree_small(cv.data(), nc, 1);
  }
  same(w + " dgamma", want_dg, dg);
}

}  // namespace

int main() {
#ifdef TLRT_EMU_SANITIZED
  std::printf("test_rms_norm_emu: skipped under ASan / TSan (unannotated stack switches)\n");
  return 77;
#endif
  if (th::under_valgrind()) {
    std::printf("test_rms_norm_emu: skipped under valgrind\n");
    return 77;
  }
  const bool all = full();
  uint64_t salt = 1;
  int rot = 0;
  auto go = [&](uint64_t rows, uint64_t cols, th::Dist d, uint64_t cap) {
    for (bool gm : {true, false}) {
      salt += 10;
      if (all)
        for (int pi = 0; pi < kNumPolicies; ++pi) run_case(rows, cols, d, salt, pi, cap, gm);
      else
        run_case(rows, cols, d, salt, rot++ % kNumPolicies, cap, gm);
    }
  };
  const uint64_t big = uint64_t{1} << 31;
  // Every instantiation and its edges; rows around a block's rows (4 * 256 / W segments, 256 / NT
  // groups) and the column tree's lane sets.
  for (uint64_t c : {1, 2, 3, 5, 8, 16, 17, 31, 32, 33, 100, 256, 257, 511, 512, 513, 1000, 1024,
                     1025, 2047, 2048, 2049, 4095, 4096, 4097, 6000, 8192})
    for (uint64_t r : {1, 2, 7, 9, 37, 255, 257}) {
      if (r * c > 200000) continue;
      go(r, c, th::Dist::Uniform, big);
    }
  // Several chunks of rows (nc = 2, 3) for the column partials; grids of a few blocks (the kernels
  // loop over rows, column tiles and lane sets).
  for (uint64_t c : {1, 7, 32, 40, 70})
    for (uint64_t r : {4096, 4097, 8192 + 100}) go(r, c, th::Dist::Uniform, big);
  for (uint64_t c : {5, 40, 513, 1500}) go(600, c, th::Dist::Uniform, 3);
  go(4099, 61, th::Dist::Uniform, 2);
  go(5000, 9, th::Dist::Uniform, 1);
  // Long rows: the chunk passes (one and several chunk partials per row, partial last chunks).
  for (uint64_t c : {8193, 12288, 12289, 20000})
    for (uint64_t r : {1, 3}) go(r, c, th::Dist::Uniform, big);
  go(5, 8193, th::Dist::Positive, 2);
  // Special values.
  for (th::Dist d : {th::Dist::Edge, th::Dist::Wide, th::Dist::Bits})
    for (uint64_t c : {3, 32, 70, 1024, 2500, 9000})
      for (uint64_t r : {1, 70}) go(r, c, d, big);
  std::printf("test_rms_norm_emu: %d runs with differences (%s schedules)\n",
              emu_check::mismatch_runs(), all ? "all" : "rotated");
  return th::finish("test_rms_norm_emu");
}
