// The CUDA kernels of argmax / top-k over rows (cuda/kernels/select.cuh) and of
// tlrt_clip_grad_norm (cuda/kernels/clip.cuh), the very source nvcc compiles, run on the CPU under
// tests/emu/cuda_emu.hpp with three schedules and compared exactly with the CPU backend:
//  - argmax_kernel with a warp per row (8 rows a block, the last block partly empty) and a block
//    per row, int32 and int64 indices, grids capped so that blocks loop over rows;
//  - topk_select_kernel for k in 1, 2, 7, 64, 300, 1024 (and k == cols), random, tie-heavy and
//    random-bit inputs (NaN, inf, -0 / +0): the radix digits, the ordered collection of equal
//    keys across tiles and the bitonic sort;
//  - the three clip kernels over tables of buffers with partial chunks, one-element buffers and
//    grids capped so that warps loop over chunks: the norm and every scaled element bit for bit,
//    and the coefficient-1 case writing nothing.
// Skipped (77) under valgrind, ASan and TSan (unannotated stack switches).
#include <cmath>
#include <cstring>
#include <cstdlib>
#include <string>
#include <vector>

#include "../emu/emu_check.hpp"
#define TLRT_CUDA_EMULATION 1
#include "cuda/kernels/clip.cuh"
#include "cuda/kernels/select.cuh"
#include "select_ref.hpp"

namespace {

namespace sk = tlrt::cuda::sel_kernels;
namespace ck = tlrt::cuda::clip_kernels;
using emu_check::kPolicies3;

std::vector<float> tie_heavy(std::vector<float> x) {
  for (size_t i = 0; i < x.size(); ++i)
    if (!std::isnan(x[i])) x[i] = (i % 5 == 0) ? -0.0f : std::floor(std::fmod(std::fabs(x[i]), 3.0f));
  return x;
}

template <class I>
std::vector<int64_t> emu_argmax(const std::vector<float> &x, uint64_t rows, uint64_t cols,
                                bool warp, int pi, unsigned grid_cap) {
  std::vector<I> idx(rows, (I)-7);
  const float *xp = x.data();
  I *ip = idx.data();
  const unsigned per = warp ? sk::kThreads / 32 : 1;
  unsigned grid = (unsigned)((rows + per - 1) / per);
  if (grid > grid_cap) grid = grid_cap;
  if (warp)
    emu::launch(kPolicies3[pi], dim3(grid), dim3(sk::kThreads), 0,
                [=] { sk::argmax_kernel<32, I>(xp, rows, cols, ip); });
  else
    emu::launch(kPolicies3[pi], dim3(grid), dim3(sk::kThreads), 0,
                [=] { sk::argmax_kernel<sk::kThreads, I>(xp, rows, cols, ip); });
  return std::vector<int64_t>(idx.begin(), idx.end());
}

void run_select(uint64_t rows, uint64_t cols, th::Dist d, bool ties, uint64_t salt, int pi) {
  std::vector<float> x = th::make(d, rows * cols, salt);
  if (ties) x = tie_heavy(x);
  char tag[160];
  std::snprintf(tag, sizeof tag, "%llux%llu %s%s policy %d", (unsigned long long)rows,
                (unsigned long long)cols, th::dist_name(d), ties ? " ties" : "", pi);
  th::Buf X(th::upload(x)), A;
  TH_OK(tlrt_argmax_rows(X.get(), rows, cols, TLRT_DTYPE_I64, A.out()));
  const std::vector<int64_t> want = th::index_values(A.get());
  TH_CHECK_MSG(emu_argmax<int64_t>(x, rows, cols, true, pi, 3) == want, "argmax warp %s", tag);
  TH_CHECK_MSG(emu_argmax<int32_t>(x, rows, cols, false, pi, 2) == want, "argmax block %s", tag);
  for (uint64_t k : {uint64_t{1}, uint64_t{2}, uint64_t{7}, uint64_t{64}, uint64_t{300},
                     uint64_t{1024}, cols}) {
    if (k > cols || k > sk::kSelectMax) continue;
    th::Buf V, I;
    TH_OK(tlrt_topk_rows(X.get(), rows, cols, k, TLRT_DTYPE_I64, V.out(), I.out()));
    std::vector<float> vals(rows * k, 7.0f);
    std::vector<int64_t> idx(rows * k, -7);
    const float *xp = x.data();
    float *vp = vals.data();
    int64_t *ip = idx.data();
    const unsigned grid = rows < 3 ? (unsigned)rows : 3;
    emu::launch(kPolicies3[pi], dim3(grid), dim3(sk::kThreads), 0,
                [=] { sk::topk_select_kernel<int64_t>(xp, rows, cols, (unsigned)k, vp, ip); });
    TH_CHECK_MSG(idx == th::index_values(I.get()), "topk k=%llu %s: indices",
                 (unsigned long long)k, tag);
    emu_check::same(std::string("topk values ") + tag, th::download(V.get()), vals);
  }
}

void run_clip(const std::vector<uint64_t> &sizes, th::Dist d, double max_norm, uint64_t salt,
              int pi, unsigned grid_cap) {
  std::vector<std::vector<float>> g;
  for (uint64_t n : sizes) g.push_back(th::make(d, n, ++salt));
  char tag[160];
  std::snprintf(tag, sizeof tag, "clip %zu buffers %s max_norm %g policy %d", sizes.size(),
                th::dist_name(d), max_norm, pi);
  // The CPU backend.
  std::vector<th::Buf> bufs;
  std::vector<tlrt_buffer *> ptrs;
  for (const auto &v : g) {
    bufs.emplace_back(th::upload(v));
    ptrs.push_back(bufs.back().get());
  }
  th::Buf N;
  TH_OK(tlrt_clip_grad_norm(ptrs.size(), ptrs.data(), max_norm, N.out()));
  // The kernels.
  std::vector<std::vector<float>> e = g;
  std::vector<ck::Entry> tab;
  uint64_t nchunks = 0;
  for (auto &v : e) {
    if (v.empty()) continue;
    tab.push_back(ck::Entry{v.data(), v.size(), nchunks});
    nchunks += (v.size() + tlrt::clip::kChunk - 1) / tlrt::clip::kChunk;
  }
  std::vector<double> part(nchunks, 7.0);
  float norm = 7.0f, coef = 7.0f;
  const ck::Entry *tp = tab.data();
  const uint64_t count = tab.size();
  double *pp = part.data();
  float *np_ = &norm, *cp = &coef;
  const float mn = (float)max_norm;
  unsigned grid = (unsigned)((nchunks + 7) / 8);
  if (grid > grid_cap) grid = grid_cap;
  emu::launch(kPolicies3[pi], dim3(grid), dim3(ck::kThreads), 0,
              [=] { ck::clip_sums_kernel(tp, count, nchunks, pp); });
  emu::launch(kPolicies3[pi], dim3(1), dim3(ck::kThreads), 0,
              [=] { ck::clip_finish_kernel(pp, nchunks, mn, np_, cp); });
  unsigned sgrid = nchunks < grid_cap ? (unsigned)nchunks : grid_cap;
  emu::launch(kPolicies3[pi], dim3(sgrid), dim3(ck::kThreads), 0,
              [=] { ck::clip_scale_kernel(tp, count, nchunks, cp); });
  // The chunk values against the header's definition (the double tree), bit for bit: the float32
  // outputs alone would hide most differences of order.
  std::vector<double> want;
  for (const auto &v : g)
    for (uint64_t e0 = 0; e0 < v.size(); e0 += tlrt::clip::kChunk) {
      double lane[256] = {};
      for (uint64_t e = e0; e < v.size() && e < e0 + tlrt::clip::kChunk; ++e)
        lane[(e - e0) % 256] += (double)v[e] * (double)v[e];
      for (unsigned h = 128; h >= 1; h >>= 1)
        for (unsigned t = 0; t < h; ++t) lane[t] += lane[t + h];
      want.push_back(lane[0]);
    }
  bool same_parts = want.size() == part.size();
  for (size_t c = 0; same_parts && c < want.size(); ++c)
    same_parts = std::memcmp(&want[c], &part[c], 8) == 0 || (want[c] != want[c] && part[c] != part[c]);
  TH_CHECK_MSG(same_parts, "%s: chunk values differ from the header's tree", tag);
  emu_check::same(std::string(tag) + " norm", th::download(N.get()), {norm});
  for (size_t b = 0; b < g.size(); ++b)
    emu_check::same(std::string(tag) + " buffer " + std::to_string(b), th::download(bufs[b].get()),
                    e[b]);
}

}  // namespace

int main() {
#ifdef TLRT_EMU_SANITIZED
  std::printf("test_select_emu: skipped under ASan / TSan (unannotated stack switches)\n");
  return 77;
#endif
  if (th::under_valgrind()) {
    std::printf("test_select_emu: skipped under valgrind\n");
    return 77;
  }
  const uint64_t shapes[][2] = {{1, 1}, {3, 5}, {9, 33}, {2, 300}, {4, 1500}, {2, 5000}};
  uint64_t salt = 3;
  int pi = 0;
  for (th::Dist d : {th::Dist::Uniform, th::Dist::Bits, th::Dist::Edge})
    for (const auto &s : shapes)
      for (int ties = 0; ties < 2; ++ties) run_select(s[0], s[1], d, ties != 0, ++salt, pi++ % 3);
  const std::vector<std::vector<uint64_t>> sets = {
      {1}, {4096}, {4097, 3, 0, 1, 8192}, {20000, 5, 4095, 12289}};
  for (const auto &sz : sets)
    for (th::Dist d : {th::Dist::Uniform, th::Dist::Wide, th::Dist::Bits})
      for (double mn : {1.0, 1e30})
        for (unsigned cap : {2u, 1000u}) run_clip(sz, d, mn, salt += 10, pi++ % 3, cap);
  std::printf("test_select_emu: %d runs with differences\n", emu_check::mismatch_runs());
  return th::finish("test_select_emu");
}
