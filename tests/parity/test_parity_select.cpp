// Parity of argmax / top-k over rows (abi/tlrt_reduce.h; numeric class exact) and of
// tlrt_clip_grad_norm (abi/tlrt_optim.h; the same double tree on both backends): the same seeded
// inputs on the CPU and CUDA backends, indices and values compared exactly (values bit for bit),
// the norm and the scaled buffers bit for bit. Shapes cover the warp (cols <= 2048) and block
// paths of argmax, the radix selection (k <= 1024) and the segmented sort (k > 1024) of top-k,
// LM shapes ((64, 50257) with k in 1, 10, 50, 1000, 2000), many ties (few distinct values),
// random bits (NaN, inf, subnormals), and -0 / +0 ties. clip: ~150 buffers of a GPT's parameter
// sizes, chunk-boundary sizes, NaN / inf, both the clipping and the non-clipping case. Also the
// top-k of the GPU against the reference sort. Skipped (77) without a CUDA device.
#include <string>
#include <vector>

#include "parity.hpp"
#include "select_ref.hpp"

namespace {

using th::Buf;
using th::Dist;

Buf up(const std::vector<float> &v, tlrt_device dev) { return Buf(th::upload(v, dev)); }

void expect_same_idx(const std::string &what, const std::vector<int64_t> &c,
                     const std::vector<int64_t> &g) {
  ++parity::summary().runs;
  parity::summary().elements += c.size();
  TH_CHECK_MSG(c == g, "%s: index outputs differ", what.c_str());
  if (c != g) ++parity::summary().failed_runs;
}

void run_select(uint64_t rows, uint64_t cols, Dist d, bool few, uint64_t salt) {
  std::vector<float> x = th::make(d, rows * cols, salt);
  if (few)
    for (size_t i = 0; i < x.size(); ++i)
      if (!std::isnan(x[i])) x[i] = (i % 3 == 0) ? -0.0f : std::floor(std::fmod(std::fabs(x[i]), 3.0f));
  const std::string base = std::string(th::dist_name(d)) + (few ? " few " : " ") +
                           std::to_string(rows) + "x" + std::to_string(cols);
  Buf cx = up(x, parity::kCpu), gx = up(x, parity::kGpu);
  for (tlrt_dtype t : {TLRT_DTYPE_I32, TLRT_DTYPE_I64}) {
    Buf ci, gi;
    TH_OK(tlrt_argmax_rows(cx.get(), rows, cols, t, ci.out()));
    TH_OK(tlrt_argmax_rows(gx.get(), rows, cols, t, gi.out()));
    expect_same_idx("argmax " + base, th::index_values(ci.get()), th::index_values(gi.get()));
  }
  for (uint64_t k : {uint64_t{1}, uint64_t{2}, uint64_t{10}, uint64_t{50}, uint64_t{1000},
                     uint64_t{1024}, uint64_t{1025}, uint64_t{2000}, cols}) {
    if (k > cols) continue;
    Buf cv, ci, gv, gi;
    const tlrt_dtype t = k % 2 ? TLRT_DTYPE_I32 : TLRT_DTYPE_I64;
    TH_OK(tlrt_topk_rows(cx.get(), rows, cols, k, t, cv.out(), ci.out()));
    TH_OK(tlrt_topk_rows(gx.get(), rows, cols, k, t, gv.out(), gi.out()));
    const std::string w = "topk k=" + std::to_string(k) + " " + base;
    const std::vector<int64_t> gidx = th::index_values(gi.get());
    expect_same_idx(w, th::index_values(ci.get()), gidx);
    parity::compare(w + " values", th::download(cv.get()), th::download(gv.get()));
    if (rows * cols <= (1u << 20))
      TH_CHECK_MSG(gidx == th::ref_topk_idx(x, rows, cols, k), "%s: not the reference order",
                   w.c_str());
  }
}

void run_clip(const std::vector<uint64_t> &sizes, Dist d, double max_norm, uint64_t salt,
              int poison) {
  std::vector<std::vector<float>> g;
  for (uint64_t n : sizes) g.push_back(th::make(d, n, ++salt));
  if (poison == 1 && !g.empty() && !g.back().empty()) g.back().back() = NAN;
  if (poison == 2 && !g.empty() && !g[0].empty()) g[0][0] = -INFINITY;
  std::vector<float> norms[2];
  std::vector<std::vector<float>> after[2];
  const tlrt_device devs[2] = {parity::kCpu, parity::kGpu};
  for (int s = 0; s < 2; ++s) {
    std::vector<Buf> bufs;
    std::vector<tlrt_buffer *> ptrs;
    for (const auto &v : g) {
      bufs.push_back(up(v, devs[s]));
      ptrs.push_back(bufs.back().get());
    }
    Buf n;
    TH_OK(tlrt_clip_grad_norm(ptrs.size(), ptrs.data(), max_norm, n.out()));
    norms[s] = th::download(n.get());
    for (auto &b : bufs) after[s].push_back(th::download(b.get()));
  }
  const std::string w = "clip " + std::to_string(sizes.size()) + " buffers " + th::dist_name(d) +
                        " max_norm " + std::to_string(max_norm) + " poison " +
                        std::to_string(poison);
  parity::compare(w + " norm", norms[0], norms[1]);
  std::vector<float> fc, fg;
  for (size_t b = 0; b < g.size(); ++b) {
    fc.insert(fc.end(), after[0][b].begin(), after[0][b].end());
    fg.insert(fg.end(), after[1][b].begin(), after[1][b].end());
  }
  parity::compare(w + " buffers", fc, fg);
}

// A GPT-2 small's parameter sizes (148 tensors): embeddings, 12 blocks of 12, final norm.
std::vector<uint64_t> gpt_sizes() {
  std::vector<uint64_t> s = {50257 * 768, 1024 * 768};
  for (int l = 0; l < 12; ++l)
    for (uint64_t n : {768, 768, 768 * 2304, 2304, 768 * 768, 768, 768, 768, 768 * 3072, 3072,
                       3072 * 768, 768})
      s.push_back(n);
  s.push_back(768);
  s.push_back(768);
  return s;
}

}  // namespace

int main() {
  if (!parity::start("test_parity_select")) return 77;
  uint64_t salt = 1;
  const uint64_t shapes[][2] = {{1, 1},    {7, 3},     {3, 31},    {5, 2048},  {2, 2049},
                                {4, 4096}, {3, 12345}, {1, 50257}, {64, 50257}, {1000, 10}};
  for (Dist d : {Dist::Uniform, Dist::Bits, Dist::Edge})
    for (const auto &s : shapes)
      for (int few = 0; few < 2; ++few)
        if (s[0] * s[1] <= parity::max_n()) run_select(s[0], s[1], d, few != 0, salt += 10);
  const std::vector<std::vector<uint64_t>> clip_sets = {
      {1}, {4096}, {4097, 3, 0, 8192}, {100000, 1, 2, 3, 4095}, gpt_sizes()};
  for (const auto &sz : clip_sets)
    for (Dist d : {Dist::Uniform, Dist::Wide})
      for (double mn : {1.0, 1e12})
        for (int poison = 0; poison < 3; ++poison) run_clip(sz, d, mn, salt += 10, poison);
  parity::print_summary("test_parity_select");
  return th::finish("test_parity_select");
}
