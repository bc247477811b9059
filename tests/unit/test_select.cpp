// argmax / top-k over rows (abi/tlrt_reduce.h) and tlrt_clip_grad_norm (abi/tlrt_optim.h) on the
// CPU backend (tests/parity/test_parity_select.cpp compares CUDA with it bit for bit):
//  - known answers: NaN is the maximum and the first NaN wins, ties to the lower index, -0 == +0
//    (the first of them wins), +-inf, size-1 rows and columns, empty rows / k == 0, int32 and
//    int64 index outputs; top-k values keep the input's bits (-0 stays -0);
//  - seeded random matrices (uniform, few distinct values: many ties, random bits: NaN, inf,
//    subnormals, edge values) against a full stable sort of each row for k in 1, 2, 10, cols;
//  - argmax feeds tlrt_gather_rows_ibuf directly (an embedding of the picked tokens);
//  - clip: torch.nn.utils.clip_grad_norm_'s known answers (norm 5 of (3, 4), scaled by
//    1 / (5 + 1e-6)), no scaling below max_norm, NaN and inf norms, empty buffers, count == 0,
//    the norm against a long double sum (within 1 ulp of the correctly rounded float32 norm),
//    every element scaled by exactly the header's coefficient, and the result independent of how
//    the same elements are split into buffers when splits fall on chunk boundaries;
//  - bad input with exact codes; nothing leaks.
#include <cmath>
#include <cstring>
#include <vector>

#include "harness.hpp"
#include "select_ref.hpp"

namespace {

using th::Buf;

const float kInf = INFINITY;
const float kNaN = NAN;

std::vector<int64_t> argmax(const std::vector<float> &x, uint64_t rows, uint64_t cols,
                            tlrt_dtype t = TLRT_DTYPE_I64) {
  Buf b(th::upload(x)), idx;
  TH_OK(tlrt_argmax_rows(b.get(), rows, cols, t, idx.out()));
  tlrt_dtype got = TLRT_DTYPE_F32;
  TH_OK(tlrt_buffer_dtype(idx.get(), &got));
  TH_CHECK(got == t);
  return th::index_values(idx.get());
}

void topk(const std::vector<float> &x, uint64_t rows, uint64_t cols, uint64_t k,
          std::vector<float> *vals, std::vector<int64_t> *idx, tlrt_dtype t = TLRT_DTYPE_I64) {
  Buf b(th::upload(x)), v, i;
  TH_OK(tlrt_topk_rows(b.get(), rows, cols, k, t, v.out(), i.out()));
  *vals = th::download(v.get());
  *idx = th::index_values(i.get());
}

void check_argmax_known() {
  using V = std::vector<int64_t>;
  TH_CHECK(argmax({1, 3, 2}, 1, 3) == V{1});
  TH_CHECK(argmax({5}, 1, 1) == V{0});
  TH_CHECK(argmax({5, 6, 7}, 3, 1) == (V{0, 0, 0}));
  TH_CHECK(argmax({2, 7, 7, 1}, 1, 4) == V{1});                      // tie: lower index
  TH_CHECK(argmax({-0.0f, 0.0f}, 1, 2) == V{0});                      // -0 == +0
  TH_CHECK(argmax({0.0f, -0.0f}, 1, 2) == V{0});
  TH_CHECK(argmax({1, kNaN, 3, kNaN}, 1, 4) == V{1});                 // first NaN
  TH_CHECK(argmax({kInf, kNaN}, 1, 2) == V{1});
  TH_CHECK(argmax({-kInf, -kInf}, 1, 2) == V{0});
  TH_CHECK(argmax({-kInf, -3e38f, 1e-45f, -1e-45f}, 1, 4) == V{2});   // subnormals
  TH_CHECK(argmax({1, kInf, kInf}, 1, 3) == V{1});
  TH_CHECK(argmax({3, 1, 2, 0, 0, 9}, 2, 3, TLRT_DTYPE_I32) == (V{0, 2}));
  TH_CHECK(argmax({}, 0, 5).empty());
  TH_CHECK(argmax({}, 0, 0).empty());
  // A long row: the maximum at the end, ties across thread strides.
  std::vector<float> x(70001, 1.0f);
  x[70000] = 2.0f;
  TH_CHECK(argmax(x, 1, 70001) == V{70000});
  x[12345] = 2.0f;
  TH_CHECK(argmax(x, 1, 70001) == V{12345});
  x[40000] = kNaN;
  TH_CHECK(argmax(x, 1, 70001) == V{40000});
}

void check_topk_known() {
  std::vector<float> v;
  std::vector<int64_t> i;
  topk({1, 3, 2, 3}, 1, 4, 3, &v, &i);
  TH_CHECK(i == (std::vector<int64_t>{1, 3, 2}));
  TH_CHECK(v == (std::vector<float>{3, 3, 2}));
  topk({kNaN, 1, kNaN, kInf, -kInf}, 1, 5, 5, &v, &i, TLRT_DTYPE_I32);
  TH_CHECK(i == (std::vector<int64_t>{0, 2, 3, 1, 4}));
  TH_CHECK(std::isnan(v[0]) && std::isnan(v[1]) && v[2] == kInf && v[3] == 1 && v[4] == -kInf);
  topk({0.0f, -0.0f, -0.0f, 0.0f}, 1, 4, 4, &v, &i);
  TH_CHECK(i == (std::vector<int64_t>{0, 1, 2, 3}));  // all equal: by index
  TH_CHECK(!std::signbit(v[0]) && std::signbit(v[1]) && std::signbit(v[2]) && !std::signbit(v[3]));
  topk({4, 5, 6}, 1, 3, 0, &v, &i);
  TH_CHECK(v.empty() && i.empty());
  topk({}, 0, 3, 2, &v, &i);
  TH_CHECK(v.empty() && i.empty());
  topk({}, 0, 0, 0, &v, &i);
  TH_CHECK(v.empty() && i.empty());
  topk({7}, 1, 1, 1, &v, &i);
  TH_CHECK(v == std::vector<float>{7} && i == std::vector<int64_t>{0});
  topk({1, 2, 3, 6, 5, 4}, 2, 3, 2, &v, &i);
  TH_CHECK(v == (std::vector<float>{3, 2, 6, 5}) && i == (std::vector<int64_t>{2, 1, 0, 1}));
}

void check_random() {
  const uint64_t shapes[][2] = {{1, 1}, {3, 7}, {5, 33}, {2, 257}, {4, 1000}, {1, 4099},
                                {64, 50}, {2, 20000}};
  uint64_t salt = 7;
  for (th::Dist d : {th::Dist::Uniform, th::Dist::Bits, th::Dist::Edge})
    for (const auto &s : shapes)
      for (int few = 0; few < 2; ++few) {
        const uint64_t rows = s[0], cols = s[1];
        std::vector<float> x = th::make(d, rows * cols, ++salt);
        if (few)  // few distinct values: many ties
          for (float &f : x)
            if (!std::isnan(f)) f = std::floor(std::fmod(std::fabs(f), 4.0f)) * (f < 0 ? -1 : 1);
        TH_CHECK_MSG(argmax(x, rows, cols) == th::ref_topk_idx(x, rows, cols, 1),
                     "argmax %s %llux%llu", th::dist_name(d), (unsigned long long)rows,
                     (unsigned long long)cols);
        for (uint64_t k : {uint64_t{1}, uint64_t{2}, uint64_t{10}, cols}) {
          if (k > cols) continue;
          std::vector<float> v;
          std::vector<int64_t> i;
          topk(x, rows, cols, k, &v, &i, k % 2 ? TLRT_DTYPE_I32 : TLRT_DTYPE_I64);
          const std::vector<int64_t> want = th::ref_topk_idx(x, rows, cols, k);
          TH_CHECK_MSG(i == want, "topk %s %llux%llu k=%llu", th::dist_name(d),
                       (unsigned long long)rows, (unsigned long long)cols, (unsigned long long)k);
          bool same = v.size() == want.size();
          for (size_t j = 0; same && j < v.size(); ++j)
            same = th::same_bits(v[j], x[(j / k) * cols + want[j]]);
          TH_CHECK_MSG(same, "topk values %s k=%llu", th::dist_name(d), (unsigned long long)k);
        }
      }
}

// argmax's output is an index buffer: the picked rows of an embedding table.
void check_feeds_gather() {
  Buf logits(th::upload({0, 5, 1, 9, 2, 3})), idx, table(th::upload({10, 11, 20, 21, 30, 31})),
      rows;
  TH_OK(tlrt_argmax_rows(logits.get(), 2, 3, TLRT_DTYPE_I32, idx.out()));
  TH_OK(tlrt_gather_rows_ibuf(table.get(), 3, 2, idx.get(), rows.out()));
  TH_CHECK(th::download(rows.get()) == (std::vector<float>{20, 21, 10, 11}));
}

void check_select_bad() {
  Buf x(th::upload({1, 2, 3, 4, 5, 6})), y, v;
  TH_STATUS(tlrt_argmax_rows(nullptr, 2, 3, TLRT_DTYPE_I64, y.out()), TLRT_ERR_NULL_ARGUMENT);
  TH_STATUS(tlrt_argmax_rows(x.get(), 2, 3, TLRT_DTYPE_I64, nullptr), TLRT_ERR_NULL_ARGUMENT);
  TH_STATUS(tlrt_argmax_rows(x.get(), 3, 3, TLRT_DTYPE_I64, y.out()), TLRT_ERR_SHAPE);
  TH_STATUS(tlrt_argmax_rows(x.get(), 2, 3, TLRT_DTYPE_F32, y.out()), TLRT_ERR_DTYPE);
  TH_STATUS(tlrt_argmax_rows(x.get(), 2, 3, (tlrt_dtype)77, y.out()), TLRT_ERR_DTYPE);
  Buf e(th::upload({}));
  TH_STATUS(tlrt_argmax_rows(e.get(), 4, 0, TLRT_DTYPE_I64, y.out()), TLRT_ERR_SHAPE);
  TH_CHECK(y.get() == nullptr);
  TH_STATUS(tlrt_topk_rows(x.get(), 2, 3, 4, TLRT_DTYPE_I64, v.out(), y.out()),
            TLRT_ERR_INVALID_ARGUMENT);
  TH_STATUS(tlrt_topk_rows(x.get(), 2, 3, 1, TLRT_DTYPE_I64, nullptr, y.out()),
            TLRT_ERR_NULL_ARGUMENT);
  TH_STATUS(tlrt_topk_rows(x.get(), 2, 3, 1, TLRT_DTYPE_I64, v.out(), nullptr),
            TLRT_ERR_NULL_ARGUMENT);
  TH_STATUS(tlrt_topk_rows(x.get(), 1, 3, 1, TLRT_DTYPE_I64, v.out(), y.out()), TLRT_ERR_SHAPE);
  TH_STATUS(tlrt_topk_rows(x.get(), 2, 3, 1, TLRT_DTYPE_F32, v.out(), y.out()), TLRT_ERR_DTYPE);
  TH_CHECK(y.get() == nullptr && v.get() == nullptr);
  Buf ints;
  const int32_t iv[2] = {1, 2};
  TH_OK(tlrt_buffer_from_i32(TLRT_DEVICE_CPU, iv, 2, ints.out()));
  TH_STATUS(tlrt_argmax_rows(ints.get(), 1, 2, TLRT_DTYPE_I64, y.out()), TLRT_ERR_DTYPE);
}

// ---- clip ---------------------------------------------------------------------------------------

float clip(std::vector<std::vector<float>> &g, double max_norm) {
  std::vector<Buf> bufs;
  std::vector<tlrt_buffer *> ptrs;
  for (const auto &v : g) {
    bufs.emplace_back(th::upload(v));
    ptrs.push_back(bufs.back().get());
  }
  Buf n;
  TH_OK(tlrt_clip_grad_norm(ptrs.size(), ptrs.data(), max_norm, n.out()));
  for (size_t b = 0; b < g.size(); ++b) g[b] = th::download(bufs[b].get());
  const std::vector<float> nv = th::download(n.get());
  TH_CHECK(nv.size() == 1);
  return nv.empty() ? kNaN : nv[0];
}

void check_clip_known() {
  std::vector<std::vector<float>> g = {{3.0f}, {4.0f}};
  TH_CHECK(clip(g, 1.0) == 5.0f);
  const float c = 1.0f / (5.0f + 1e-6f);
  TH_CHECK(th::same_bits(g[0][0], 3.0f * c) && th::same_bits(g[1][0], 4.0f * c));
  g = {{3.0f, 0.0f}, {}, {-4.0f}};
  TH_CHECK(clip(g, 10.0) == 5.0f);  // below max_norm: untouched
  TH_CHECK(g[0] == (std::vector<float>{3.0f, 0.0f}) && g[2] == std::vector<float>{-4.0f});
  g = {{1.0f, kNaN}, {2.0f}};
  TH_CHECK(std::isnan(clip(g, 1.0)));
  TH_CHECK(std::isnan(g[0][0]) && std::isnan(g[1][0]));
  g = {{1.0f, -kInf}, {2.0f, 0.0f}};
  TH_CHECK(clip(g, 1.0) == kInf);  // coef 0: inf * 0 = NaN, finite * 0 = 0
  TH_CHECK(std::isnan(g[0][1]) && g[0][0] == 0.0f && g[1][0] == 0.0f);
  g = {{-0.0f}, {0.0f}};
  TH_CHECK(th::same_bits(clip(g, 0.0), 0.0f));  // coef 0 / 1e-6 = 0: -0 * 0 = -0
  TH_CHECK(th::same_bits(g[0][0], -0.0f) && th::same_bits(g[1][0], 0.0f));
  g = {{}, {}};
  TH_CHECK(th::same_bits(clip(g, 1.0), 0.0f));
  // count == 0: norm +0 on the CPU.
  Buf n;
  TH_OK(tlrt_clip_grad_norm(0, nullptr, 1.0, n.out()));
  TH_CHECK(th::same_bits(th::download(n.get()).at(0), 0.0f));
  // Large values: squares far beyond float32, the norm still finite.
  g = {{3e30f, 4e30f}};
  TH_CHECK(clip(g, 1.0) == 5e30f);
}

void check_clip_random() {
  uint64_t salt = 100;
  const uint64_t sizes[] = {1, 3, 4096, 4097, 100000, 7, 8192, 65536, 250001};
  for (th::Dist d : {th::Dist::Uniform, th::Dist::Wide})
    for (double max_norm : {0.5, 1e6}) {
      std::vector<std::vector<float>> g;
      for (uint64_t n : sizes) g.push_back(th::make(d, n, ++salt));
      const std::vector<std::vector<float>> g0 = g;
      const long double s = th::ref_sumsq(g);
      const float norm = clip(g, max_norm);
      const float ref = (float)std::sqrt((double)s);
      TH_CHECK_MSG(std::fabs(norm - ref) <= std::nextafter(ref, kInf) - ref, "norm %.9g ref %.9g",
                   norm, ref);
      float coef = (float)max_norm / (norm + 1e-6f);
      if (coef > 1.0f) coef = 1.0f;
      bool ok = true;
      for (size_t b = 0; b < g.size(); ++b)
        for (size_t i = 0; i < g[b].size(); ++i)
          ok = ok && th::same_bits(g[b][i], coef == 1.0f ? g0[b][i] : g0[b][i] * coef);
      TH_CHECK_MSG(ok, "clip scale %s max_norm %g", th::dist_name(d), max_norm);
    }
  // Chunk-aligned splits give bitwise the same norm as one buffer.
  std::vector<float> x = th::make(th::Dist::Wide, 4096 * 5 + 17, 999);
  std::vector<std::vector<float>> whole = {x};
  std::vector<std::vector<float>> split = {std::vector<float>(x.begin(), x.begin() + 8192),
                                           std::vector<float>(x.begin() + 8192, x.end())};
  TH_CHECK(th::same_bits(clip(whole, 1e30), clip(split, 1e30)));
}

void check_clip_bad() {
  Buf a(th::upload({1, 2})), b(th::upload({3})), n;
  tlrt_buffer *two[2] = {a.get(), b.get()};
  tlrt_buffer *dup[2] = {a.get(), a.get()};
  tlrt_buffer *hole[2] = {a.get(), nullptr};
  TH_STATUS(tlrt_clip_grad_norm(2, two, 1.0, nullptr), TLRT_ERR_NULL_ARGUMENT);
  TH_STATUS(tlrt_clip_grad_norm(2, nullptr, 1.0, n.out()), TLRT_ERR_NULL_ARGUMENT);
  TH_STATUS(tlrt_clip_grad_norm(2, hole, 1.0, n.out()), TLRT_ERR_NULL_ARGUMENT);
  TH_STATUS(tlrt_clip_grad_norm(2, dup, 1.0, n.out()), TLRT_ERR_INVALID_ARGUMENT);
  TH_STATUS(tlrt_clip_grad_norm(2, two, -1.0, n.out()), TLRT_ERR_INVALID_ARGUMENT);
  TH_STATUS(tlrt_clip_grad_norm(2, two, NAN, n.out()), TLRT_ERR_INVALID_ARGUMENT);
  TH_STATUS(tlrt_clip_grad_norm(2, two, INFINITY, n.out()), TLRT_ERR_INVALID_ARGUMENT);
  TH_STATUS(tlrt_clip_grad_norm(2, two, 1e300, n.out()), TLRT_ERR_INVALID_ARGUMENT);
  Buf ints;
  const int32_t iv[1] = {1};
  TH_OK(tlrt_buffer_from_i32(TLRT_DEVICE_CPU, iv, 1, ints.out()));
  tlrt_buffer *withint[2] = {a.get(), ints.get()};
  TH_STATUS(tlrt_clip_grad_norm(2, withint, 1.0, n.out()), TLRT_ERR_DTYPE);
  TH_CHECK(n.get() == nullptr);
  // Nothing modified by a failing call.
  TH_CHECK(th::download(a.get()) == (std::vector<float>{1, 2}));
}

}  // namespace

int main() {
  const tlrt_allocator_stats start = th::stats();
  check_argmax_known();
  check_topk_known();
  check_random();
  check_feeds_gather();
  check_select_bad();
  check_clip_known();
  check_clip_random();
  check_clip_bad();
  const tlrt_allocator_stats end = th::stats();
  TH_CHECK_MSG(end.live_bytes == start.live_bytes, "live_bytes %llu at start, %llu at end",
               (unsigned long long)start.live_bytes, (unsigned long long)end.live_bytes);
  TH_CHECK_MSG(end.live_handles == start.live_handles, "live_handles %llu at start, %llu at end",
               (unsigned long long)start.live_handles, (unsigned long long)end.live_handles);
  return th::finish("test_select");
}
