// The fused CUDA layer-norm backward, the short-row forward (cols <= 32) and the long-row kernels
// (cuda/kernels/layer_norm.cuh, the very source nvcc compiles) run on the CPU under
// tests/emu/cuda_emu.hpp and compared bit for bit with the CPU backend (tlrt_layer_norm_fwd /
// tlrt_layer_norm_bwd on CPU buffers): y, mean, inv_std, dx, and dgamma / dbeta after the kernel's
// partials are reduced by the rest of the column tree (here on the host, as reduce_axis does it on
// the GPU). So the kernels' lane sets, row walks, block-level halving and boundaries are checked
// without a GPU. Shapes reach every instantiation (cols 1..4096 around each dispatch edge) and rows
// around the tree's lane and chunk edges and the blocks' row sets (rows not a multiple of 16 G);
// some cases cap the grid at a few blocks so that blocks loop over several lane sets. Every case
// runs under one of several schedules (rotated; TLRT_EMU_FULL=1 runs all). The wide finish of the
// partials (ticketed, one launch) runs under schedules with different block orders, so that the
// last ticket falls to different blocks, its counters checked back at zero, on the kernels' own
// partials and on synthetic ones (nc 1..256, every S, partial column tiles, special values).
// Skipped (77) under valgrind, ASan and TSan (unannotated stack switches).
#include <cmath>
#include <cstdlib>
#include <initializer_list>
#include <string>
#include <type_traits>
#include <vector>

#include "../emu/emu_check.hpp"
#define TLRT_CUDA_EMULATION 1
#include "cuda/kernels/layer_norm.cuh"

namespace {

using emu_check::full;
using emu_check::same;

namespace lk = tlrt::cuda::ln_kernels;
namespace red = tlrt::red;

struct EmuLaunch {
  emu::Policy policy;
  uint64_t grid_cap;
  unsigned sm = 132;
  size_t smem = 227 * 1024;  // sm_90's opt-in shared memory per block
  uint64_t max_grid() const { return grid_cap; }
  size_t max_smem() const { return smem; }
  unsigned sms() const { return sm; }
  unsigned grid_for(uint64_t items, uint64_t per_block) const {
    const uint64_t b = (items + per_block - 1) / per_block;
    return (unsigned)(b == 0 ? 1 : b < grid_cap ? b : grid_cap);
  }
  template <class K, class... A>
  void operator()(const char *, K kernel, unsigned grid, A... args) const {
    emu::launch(policy, dim3(grid), dim3(lk::kThreads), 0, [=] { kernel(args...); });
  }
  template <class K, class... A>
  void sized(const char *, K kernel, unsigned grid, unsigned threads, A... args) const {
    emu::launch(policy, dim3(grid), dim3(threads), 0, [=] { kernel(args...); });
  }
  template <class K, class... A>
  void grid2(const char *, K kernel, dim3 grid, A... args) const {
    emu::launch(policy, grid, dim3(lk::kThreads), 0, [=] { kernel(args...); });
  }
  template <class K, class... A>  // the emulated launches run one after the other
  void grid2_dependent(const char *name, K kernel, dim3 grid, A... args) const {
    grid2(name, kernel, grid, args...);
  }
  template <class K, class... A>
  void dyn(const char *, K kernel, unsigned grid, size_t smem, A... args) const {
    emu::launch(policy, dim3(grid), dim3(lk::kThreads), smem, [=] { kernel(args...); });
  }
};

// Thread order, copy completion, seed, block order (the wide finish's last ticket falls to a
// different block under each).
const emu::Policy kPolicies[] = {
    {emu::Order::Ascending, emu::Copy::Late, 1, emu::Order::Ascending},
    {emu::Order::Descending, emu::Copy::Early, 2, emu::Order::Descending},
    {emu::Order::Random, emu::Copy::Late, 3, emu::Order::Random},
};
constexpr int kNumPolicies = sizeof kPolicies / sizeof kPolicies[0];

// THE TREE over a sequence v[0..m) with stride, m <= 256 (one chunk, one element per lane): the
// halving over the lanes, empty lanes holding the identity -0.
float tree_small(const float *v, uint64_t m, uint64_t stride) {
  float a[256];
  const float id = red::Ops<red::Op::Sum>::identity();
  for (unsigned t = 0; t < 256; ++t) a[t] = t < m ? id + v[t * stride] : id;
  for (unsigned h = 128; h >= 1; h >>= 1)
    for (unsigned t = 0; t < h; ++t) a[t] = a[t] + a[t + h];
  return a[0];
}

void check_fused(const std::string &w, uint64_t rows, uint64_t cols, uint64_t nc, unsigned ls,
                 const std::vector<float> &want_dx, const std::vector<float> &want_dg,
                 const std::vector<float> &want_db, const std::vector<float> &dx,
                 const std::vector<float> &pg, const std::vector<float> &pb);

// The wide finish (fused_bwd_finish_wide_plan) on the partials pg, pb (nc, S, cols) under each
// policy of pols (counters start at zero and must be zero again after the launch); the chunk
// values' scratch starts as 7.0f (a read of a value no block wrote shows).
void check_wide(const std::string &w, std::initializer_list<int> pols, uint64_t cols, uint64_t nc,
                unsigned S, const std::vector<float> &want_dg, const std::vector<float> &want_db,
                const std::vector<float> &pg, const std::vector<float> &pb) {
  TH_CHECK_MSG(lk::fused_bwd_finish_wide_fits(nc, cols), "%s: test shapes keep nc <= 256",
               w.c_str());
  for (int pi : pols) {
    const EmuLaunch launch{kPolicies[pi], uint64_t{1} << 31};
    std::vector<float> dg(cols, 7.0f), db(cols, 7.0f);
    std::vector<float> cv(lk::fused_bwd_finish_wide_scratch(nc, S, cols) + 1, 7.0f);
    std::vector<unsigned> counters(lk::kWideCounters, 0u);
    lk::fused_bwd_finish_wide_plan(launch, pg.data(), pb.data(), nc, S, cols, cv.data(),
                                   counters.data(), dg.data(), db.data());
    const std::string wf = w + " wide policy " + std::to_string(pi);
    same(wf + " dgamma", want_dg, dg);
    same(wf + " dbeta", want_db, db);
    uint64_t left = 0;
    for (unsigned c : counters) left += c != 0;
    TH_CHECK_MSG(left == 0, "%s: %llu ticket counters not back to 0", wf.c_str(),
                 (unsigned long long)left);
  }
}

// The wide finish against the CPU's dgamma / dbeta, under three policies (the blocks in raster,
// reverse and shuffled order: a different block takes each last ticket).
void check_finish(const std::string &w, int pi, uint64_t cols, uint64_t nc, unsigned ls,
                  const std::vector<float> &want_dg, const std::vector<float> &want_db,
                  const std::vector<float> &pg, const std::vector<float> &pb) {
  if (nc == 1 && ls == 1) return;  // the kernel wrote dgamma / dbeta itself
  check_wide(w + " finish", {pi, (pi + 1) % kNumPolicies, (pi + 2) % kNumPolicies}, cols, nc, ls,
             want_dg, want_db, pg, pb);
}

void run_case(uint64_t rows, uint64_t cols, th::Dist dist, uint64_t salt, int pi,
              uint64_t grid_cap) {
  const uint64_t n = rows * cols;
  const std::vector<float> x = th::make(dist, n, salt + 1), dy = th::make(dist, n, salt + 2),
                           gamma = th::make(th::Dist::Uniform, cols, salt + 3),
                           beta = th::make(th::Dist::Uniform, cols, salt + 4);
  char tag[160];
  std::snprintf(tag, sizeof tag, "(%llu, %llu) %s policy %d grid cap %llu",
                (unsigned long long)rows, (unsigned long long)cols, th::dist_name(dist), pi,
                (unsigned long long)grid_cap);
  const std::string w = tag;
  th::Buf X(th::upload(x)), DY(th::upload(dy)), G(th::upload(gamma)), B(th::upload(beta)), Y, M, S,
      DX, DG, DB;
  TH_OK(tlrt_layer_norm_fwd(X.get(), G.get(), B.get(), rows, cols, 1e-5, Y.out(), M.out(),
                            S.out()));
  TH_OK(tlrt_layer_norm_bwd(DY.get(), X.get(), M.get(), S.get(), G.get(), rows, cols, DX.out(),
                            DG.out(), DB.out()));
  const std::vector<float> mean = th::download(M.get()), is = th::download(S.get()),
                           want_dx = th::download(DX.get()), want_dg = th::download(DG.get()),
                           want_db = th::download(DB.get());

  if (cols <= 32) {  // the short-row forward
    std::vector<float> y(n, 7.0f), m(rows, 7.0f), s(rows, 7.0f);
    lk::seg_fwd_plan(EmuLaunch{kPolicies[pi], grid_cap}, x.data(), gamma.data(), beta.data(), rows,
                     (unsigned)cols, static_cast<float>(cols), 1e-5f, y.data(), m.data(),
                     s.data());
    same(w + " seg_fwd y", th::download(Y.get()), y);
    same(w + " seg_fwd mean", mean, m);
    same(w + " seg_fwd inv_std", is, s);
  }
  if (cols > 32) {  // the split backward's dx (group_dx), which lane_fold's column tree follows
    std::vector<float> dx(n, 7.0f);
    lk::group_dx_plan(EmuLaunch{kPolicies[pi], grid_cap},
                      lk::BwdArgs{dy.data(), x.data(), mean.data(), is.data(), gamma.data(), rows,
                                  cols, static_cast<float>(cols), dx.data()});
    same(w + " group_dx", want_dx, dx);
  }
  const uint64_t nc = red::chunks_of(rows);
  // The fused backward as the library dispatches it, where the ring kernel fits the device's shared
  // memory (513..4096 columns; one block per item, grid capped at grid_cap: blocks then loop, the
  // ring running across their items) and where it does not (the register kernels there). Below
  // 513 columns both are the same kernels.
  struct Sched {
    const char *name;
    size_t smem;
  };
  const Sched scheds[] = {
      {"ring where it fits", 227 * 1024},
      {"no ring (48 KiB per block)", 48 * 1024},
  };
  unsigned finished_ls = 0;  // the finish once per lane-set count
  for (const Sched &sc : scheds) {
    const std::string wk = w + " " + sc.name;
    const EmuLaunch launch{kPolicies[pi], grid_cap, 132, sc.smem};
    lk::BwdArgs a{dy.data(), x.data(), mean.data(), is.data(), gamma.data(), rows, cols,
                  static_cast<float>(cols), nullptr};
    const unsigned ls = lk::fused_lane_sets(cols);
    std::vector<float> dx(n, 7.0f), pg(nc * ls * cols, 7.0f), pb(nc * ls * cols, 7.0f);
    a.dx = dx.data();
    lk::fused_bwd_plan(launch, a, pg.data(), pb.data());
    check_fused(wk, rows, cols, nc, ls, want_dx, want_dg, want_db, dx, pg, pb);
    if (ls != finished_ls) check_finish(wk, pi, cols, nc, ls, want_dg, want_db, pg, pb);
    finished_ls = ls;
    if (cols <= lk::kSaMaxCols) break;
  }
}

void check_fused(const std::string &w, uint64_t rows, uint64_t cols, uint64_t nc, unsigned ls,
                 const std::vector<float> &want_dx, const std::vector<float> &want_dg,
                 const std::vector<float> &want_db, const std::vector<float> &dx,
                 const std::vector<float> &pg, const std::vector<float> &pb) {
  (void)rows;
  same(w + " dx", want_dx, dx);
  // The rest of the column tree: halving over the ls lane values of each chunk, then the tree over
  // the chunk values (nc <= 256 here).
  TH_CHECK_MSG(nc <= 256, "%s: test shapes keep nc <= 256", w.c_str());
  std::vector<float> dg(cols), db(cols), cg(nc), cb(nc);
  for (uint64_t j = 0; j < cols; ++j) {
    for (uint64_t k = 0; k < nc; ++k) {
      cg[k] = tree_small(pg.data() + k * ls * cols + j, ls, cols);
      cb[k] = tree_small(pb.data() + k * ls * cols + j, ls, cols);
    }
    dg[j] = tree_small(cg.data(), nc, 1);
    db[j] = tree_small(cb.data(), nc, 1);
  }
  same(w + " dgamma", want_dg, dg);
  same(w + " dbeta", want_db, db);
}

// The wide finish alone on synthetic partials (nc, S, cols), against the host's tree (the one
// check_fused holds to the CPU's dgamma / dbeta): every S, nc up to its limit (nc <= 256).
void run_finish(uint64_t nc, unsigned S, uint64_t cols, th::Dist dist, uint64_t salt, int pi) {
  char tag[160];
  std::snprintf(tag, sizeof tag, "finish nc %llu S %u cols %llu %s policy %d",
                (unsigned long long)nc, S, (unsigned long long)cols, th::dist_name(dist), pi);
  const std::string w = tag;
  const uint64_t np = nc * S * cols;
  const std::vector<float> pg = th::make(dist, np, salt + 1), pb = th::make(dist, np, salt + 2);
  std::vector<float> want_g(cols), want_b(cols), cg(nc), cb(nc);
  for (uint64_t j = 0; j < cols; ++j) {
    for (uint64_t k = 0; k < nc; ++k) {
      cg[k] = S == 1 ? pg[k * cols + j] : tree_small(pg.data() + k * S * cols + j, S, cols);
      cb[k] = S == 1 ? pb[k * cols + j] : tree_small(pb.data() + k * S * cols + j, S, cols);
    }
    want_g[j] = nc == 1 ? cg[0] : tree_small(cg.data(), nc, 1);
    want_b[j] = nc == 1 ? cb[0] : tree_small(cb.data(), nc, 1);
  }
  // Two policies (a different last ticket under each).
  check_wide(w, {pi, (pi + 1) % kNumPolicies}, cols, nc, S, want_g, want_b, pg, pb);
}

// The long-row kernels: forward for 8192 < cols <= 65536 (the split_fwd schedules
// cuda/layer_norm.cu dispatches), dx for cols > 4096 (one block per row).
void run_long(uint64_t rows, uint64_t cols, th::Dist dist, uint64_t salt, int pi, unsigned sms) {
  const uint64_t n = rows * cols;
  const std::vector<float> x = th::make(dist, n, salt + 1), dy = th::make(dist, n, salt + 2),
                           gamma = th::make(th::Dist::Uniform, cols, salt + 3),
                           beta = th::make(th::Dist::Uniform, cols, salt + 4);
  char tag[160];
  std::snprintf(tag, sizeof tag, "long (%llu, %llu) %s policy %d sms %u", (unsigned long long)rows,
                (unsigned long long)cols, th::dist_name(dist), pi, sms);
  const std::string w = tag;
  th::Buf X(th::upload(x)), DY(th::upload(dy)), G(th::upload(gamma)), B(th::upload(beta)), Y, M, S,
      DX, DG, DB;
  TH_OK(tlrt_layer_norm_fwd(X.get(), G.get(), B.get(), rows, cols, 1e-5, Y.out(), M.out(),
                            S.out()));
  TH_OK(tlrt_layer_norm_bwd(DY.get(), X.get(), M.get(), S.get(), G.get(), rows, cols, DX.out(),
                            DG.out(), DB.out()));
  const std::vector<float> mean = th::download(M.get()), is = th::download(S.get());
  const EmuLaunch launch{kPolicies[pi], uint64_t{1} << 31, sms};
  const float nf = static_cast<float>(cols);
  // The row-in-registers forward (split_fwd) in the schedule cuda/layer_norm.cu dispatches for
  // cols (on the GPU the groups above 16384 columns are a cluster's blocks: the same body).
  auto split = [&](auto q, auto ncl, uint64_t lo) {
    constexpr unsigned Q = decltype(q)::value, NCL = decltype(ncl)::value;
    if (cols <= lo || cols > tlrt::cuda::split_row::SplitPart<Q, NCL, false>::kMaxCols) return;
    std::vector<float> y(n, 7.0f), m(rows, 7.0f), s(rows, 7.0f);
    const EmuLaunch sl{kPolicies[pi], sms <= 2 ? uint64_t{2} : uint64_t{1} << 31, sms};
    lk::split_fwd_plan<Q, NCL>(sl, x.data(), gamma.data(), beta.data(), rows, cols, nf, 1e-5f,
                               y.data(), m.data(), s.data());
    const std::string ws = w + " split Q=" + std::to_string(Q) + " NCL=" + std::to_string(NCL);
    same(ws + " y", th::download(Y.get()), y);
    same(ws + " mean", mean, m);
    same(ws + " inv_std", is, s);
  };
  using std::integral_constant;
  split(integral_constant<unsigned, 2>(), integral_constant<unsigned, 2>(), 8192);   // <= 16384
  split(integral_constant<unsigned, 4>(), integral_constant<unsigned, 2>(), 16384);  // <= 32768
  split(integral_constant<unsigned, 4>(), integral_constant<unsigned, 4>(), 32768);  // <= 65536
  std::vector<float> dx(n, 7.0f);
  lk::block_row_dx_plan(launch, lk::BwdArgs{dy.data(), x.data(), mean.data(), is.data(),
                                            gamma.data(), rows, cols, nf, dx.data()});
  same(w + " dx", th::download(DX.get()), dx);
}

}  // namespace

int main() {
#ifdef TLRT_EMU_SANITIZED
  std::printf("test_layer_norm_emu: skipped under ASan / TSan (unannotated stack switches)\n");
  return 77;
#endif
  if (th::under_valgrind()) {
    std::printf("test_layer_norm_emu: skipped under valgrind\n");
    return 77;
  }
  const bool all = full();
  uint64_t salt = 1;
  int rot = 0;
  auto go = [&](uint64_t rows, uint64_t cols, th::Dist d, uint64_t cap) {
    salt += 10;
    if (all)
      for (int pi = 0; pi < kNumPolicies; ++pi) run_case(rows, cols, d, salt, pi, cap);
    else
      run_case(rows, cols, d, salt, rot++ % kNumPolicies, cap);
  };
  const uint64_t big = uint64_t{1} << 31;
  // Every instantiation and its edges, rows around the lane sets and the tree's lane count.
  for (uint64_t c : {1, 2, 3, 5, 8, 16, 17, 31, 32, 33, 100, 256, 257, 511, 512, 513, 1000, 1024,
                     1025, 2047, 2048, 2049, 4095, 4096})
    for (uint64_t r : {1, 2, 37, 255, 256, 257, 300}) {
      if (r * c > 300000) continue;
      go(r, c, th::Dist::Uniform, big);
    }
  // Several chunks of rows (nc = 2, 3), and grids of a few blocks looping over lane sets.
  for (uint64_t c : {1, 7, 32, 40, 300, 700})
    for (uint64_t r : {4096, 4097, 8192 + 100, 8192 + 4095}) go(r, c, th::Dist::Uniform, big);
  for (uint64_t c : {5, 40, 513, 1500, 3000}) go(600, c, th::Dist::Uniform, 3);
  // Primes (cols and rows), the pipelined kernel's ring wrapping with rows past a chunk's end.
  for (uint64_t c : {97, 769, 1021, 2053, 4093}) go(c < 1000 ? 4099 : 263, c, th::Dist::Uniform, big);
  go(4099, 61, th::Dist::Uniform, 5);
  // Whole-layout rows (the FULL ring, its warp-shared 16-byte copies) over 3+ row steps per item,
  // so that a stage is refilled after other lanes read it; some grids capped (blocks loop). Every
  // policy: Early copies are what expose a refill issued before the warp's reads are done.
  for (int pi = 0; pi < kNumPolicies; ++pi) {
    run_case(800, 512, th::Dist::Uniform, salt += 10, pi, big);
    run_case(1000, 1024, th::Dist::Uniform, salt += 10, pi, 3);
    run_case(700, 2048, th::Dist::Uniform, salt += 10, pi, big);
    run_case(600, 4096, th::Dist::Uniform, salt += 10, pi, 5);
  }
  // Two chunks at 2049..4096 columns (in chunk 1, lane set 0 has 2 row steps, the others 1).
  go(4096 + 257, 2049, th::Dist::Uniform, big);
  go(5000, 9, th::Dist::Uniform, 1);
  // The wide finish alone: every S, nc up to its limit (nc <= 256; 4 register slots up to 32
  // chunks, 32 above), odd column counts (partial tiles), and the widest rows (128 tiles: every
  // ticket counter).
  {
    int fp = 0;
    for (unsigned S : {1u, 32u, 64u, 128u, 256u})
      for (uint64_t nc : {1, 2, 3, 7, 8, 9, 16, 17, 32, 33, 64, 255, 256})
        for (uint64_t c : {1, 33, 100}) {
          if (c == 100 && nc * S > 4096) continue;  // (time: the big ones at 1 and 33 columns)
          run_finish(nc, S, c, th::Dist::Uniform, salt += 10, fp++ % kNumPolicies);
        }
    for (uint64_t c : {4096, 4095, 3000})
      for (unsigned S : {1u, 256u}) run_finish(3, S, c, th::Dist::Uniform, salt += 10, fp++ % 3);
    run_finish(40, 1, 4096, th::Dist::Uniform, salt += 10, 1);
    run_finish(17, 128, 2047, th::Dist::Uniform, salt += 10, 2);
    for (th::Dist d : {th::Dist::Edge, th::Dist::Wide, th::Dist::Bits}) {
      for (unsigned S : {1u, 32u, 256u}) run_finish(S == 1 ? 200 : 2048 / S, S, 40, d, salt += 10, 0);
      for (unsigned S : {1u, 64u, 256u})  // nc S beyond 2048 too
        for (uint64_t nc : {2, 17, 256}) run_finish(nc, S, 37, d, salt += 10, fp++ % 3);
    }
  }
  // Long rows.
  for (uint64_t c : {4097, 6000, 8192, 8193, 12288, 12289, 16385, 24577})
    for (uint64_t r : {1, 3})
      run_long(r, c, th::Dist::Uniform, salt += 10, rot++ % kNumPolicies, 132);
  run_long(10, 8193, th::Dist::Positive, salt += 10, 0, 1);  // blocks loop over rows
  run_long(2, 65536, th::Dist::Uniform, salt += 10, 1, 132);
  // split_fwd: every chunk count of its schedules, full and partial rows, primes.
  for (uint64_t c : {16384, 32768, 32769, 40961, 65521, 65537})
    run_long(2, c, th::Dist::Uniform, salt += 10, rot++ % kNumPolicies, 132);
  run_long(5, 16384, th::Dist::Uniform, salt += 10, 1, 2);  // split_fwd grid of 2: rows looped
  for (th::Dist d : {th::Dist::Edge, th::Dist::Wide, th::Dist::Bits})
    run_long(3, 65536, d, salt += 10, rot++ % kNumPolicies, 132);
  run_long(1, uint64_t{1} << 20, th::Dist::Uniform, salt += 10, 2, 132);
  for (th::Dist d : {th::Dist::Edge, th::Dist::Wide, th::Dist::Bits})
    run_long(3, 9000, d, salt += 10, rot++ % kNumPolicies, 132);
  // Special values.
  for (th::Dist d : {th::Dist::Edge, th::Dist::Wide, th::Dist::Bits})
    for (uint64_t c : {3, 32, 70, 1024, 2500})
      for (uint64_t r : {1, 70, 257}) go(r, c, d, big);
  std::printf("test_layer_norm_emu: %d runs with differences (%s schedules)\n",
              emu_check::mismatch_runs(), all ? "all" : "rotated");
  return th::finish("test_layer_norm_emu");
}
