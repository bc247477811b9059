// The CPU thread pool (abi/tlrt_runtime.h, "CPU threads"; core/parallel.cpp):
//   - tlrt_set_num_threads returns the previous count, caps at 1024, 0 restores the default
//     (at least 1), tlrt_get_num_threads reads it;
//   - the parallel kernels give the same bits with 1, 2 and 7 threads (and with 3 when the pool
//     is resized between calls): the elementwise family on sizes around the piece boundaries
//     (2^16 elements), special values included; the softmax family, layer norm and RMS norm
//     (forward and backward, the column sums too) on short, long and single rows;
//   - four host threads calling them at once (one holds the pool, the others run alone) get the
//     one-thread bits too, while a fifth thread keeps changing the thread count;
//   - nothing is leaked (live bytes and handles back to where they started).
// Run under ThreadSanitizer by the CI's TSan step (suite 'unit').
#include <atomic>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "harness.hpp"

namespace {

using th::Buf;

struct Op {
  const char *name;
  std::function<tlrt_status(const tlrt_buffer *, const tlrt_buffer *, tlrt_buffer **)> call;
};

std::vector<Op> ops() {
  return {
      {"add", [](const tlrt_buffer *a, const tlrt_buffer *b, tlrt_buffer **o) { return tlrt_add(a, b, o); }},
      {"div", [](const tlrt_buffer *a, const tlrt_buffer *b, tlrt_buffer **o) { return tlrt_div(a, b, o); }},
      {"exp", [](const tlrt_buffer *a, const tlrt_buffer *, tlrt_buffer **o) { return tlrt_exp(a, o); }},
      {"gelu", [](const tlrt_buffer *a, const tlrt_buffer *, tlrt_buffer **o) { return tlrt_gelu(a, o); }},
      {"gelu_bwd", [](const tlrt_buffer *a, const tlrt_buffer *b, tlrt_buffer **o) { return tlrt_gelu_bwd(a, b, o); }},
  };
}

// Layer norm (or RMS norm) forward and backward of x (rows, cols), dy = g, gamma and beta from g's
// first 2 cols values: every output concatenated into *o.
tlrt_status norms(const tlrt_buffer *x, const tlrt_buffer *g, uint64_t rows, uint64_t cols, bool rms,
                  tlrt_buffer **o) {
  std::vector<float> gv = th::download(g);
  const std::vector<float> gb(gv.begin(), gv.begin() + (long)cols),
      bb(gv.begin() + (long)cols, gv.begin() + 2 * (long)cols);
  Buf gamma(th::upload(gb)), beta(th::upload(bb)), y, m, s, dx, dg, db;
  tlrt_status st = rms ? tlrt_rms_norm_fwd(x, gamma.get(), rows, cols, 1e-5, y.out(), s.out())
                       : tlrt_layer_norm_fwd(x, gamma.get(), beta.get(), rows, cols, 1e-5, y.out(),
                                             m.out(), s.out());
  if (st != TLRT_OK) return st;
  st = rms ? tlrt_rms_norm_bwd(g, x, gamma.get(), s.get(), rows, cols, dx.out(), dg.out())
           : tlrt_layer_norm_bwd(g, x, m.get(), s.get(), gamma.get(), rows, cols, dx.out(),
                                 dg.out(), db.out());
  if (st != TLRT_OK) return st;
  std::vector<float> all;
  for (const Buf *b : {&y, &m, &s, &dx, &dg, &db})
    if (b->get() != nullptr) {
      const std::vector<float> v = th::download(b->get());
      all.insert(all.end(), v.begin(), v.end());
    }
  *o = th::upload(all);
  return TLRT_OK;
}

bool same(const std::vector<float> &a, const std::vector<float> &b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!th::same_bits(a[i], b[i])) return false;
  return true;
}

// Each op's output on (a, b) with `threads` threads.
std::vector<std::vector<float>> run_all(const std::vector<Op> &list, const Buf &a, const Buf &b) {
  std::vector<std::vector<float>> out;
  for (const Op &op : list) {
    tlrt_buffer *o = nullptr;
    TH_OK(op.call(a.get(), b.get(), &o));
    out.push_back(o ? th::download(o) : std::vector<float>{});
    tlrt_buffer_free(o);
  }
  return out;
}

}  // namespace

int main() {
  const tlrt_allocator_stats before = th::stats();
  // The setting.
  const uint32_t initial = tlrt_get_num_threads();
  TH_CHECK(initial >= 1 && initial <= 1024);
  TH_CHECK(tlrt_set_num_threads(3) == initial);
  TH_CHECK(tlrt_get_num_threads() == 3);
  TH_CHECK(tlrt_set_num_threads(5000) == 3);
  TH_CHECK(tlrt_get_num_threads() == 1024);
  TH_CHECK(tlrt_set_num_threads(0) == 1024);
  TH_CHECK(tlrt_get_num_threads() == initial);  // the default again

  const std::vector<Op> list = ops();
  uint64_t salt = 1;
  // Sizes: one piece, a piece and one element, several pieces with a short last one.
  std::vector<uint64_t> sizes = {1000, uint64_t{1} << 16, (uint64_t{1} << 16) + 1,
                                 7 * (uint64_t{1} << 16) + 12345};
  if (th::under_valgrind()) sizes = {1000, (uint64_t{1} << 16) + 1};
  for (uint64_t n : sizes) {
    std::vector<float> x = th::make(th::Dist::Wide, n, salt += 10);
    const std::vector<float> e = th::edge_values();
    for (size_t i = 0; i < e.size() && i < n; ++i) x[n - 1 - i] = e[i];  // the last piece's tail
    const Buf a(th::upload(x)), b(th::upload(th::make(th::Dist::Uniform, n, salt += 10)));
    tlrt_set_num_threads(1);
    const auto want = run_all(list, a, b);
    for (uint32_t t : {2u, 7u, 3u}) {
      tlrt_set_num_threads(t);
      const auto got = run_all(list, a, b);
      for (size_t k = 0; k < list.size(); ++k)
        TH_CHECK_MSG(same(want[k], got[k]), "%s, n = %llu: %u threads differ from one", list[k].name,
                     (unsigned long long)n, t);
    }
  }

  // The softmax family: blocks of rows (about 16K elements each) are the pieces.
  struct Shape {
    uint64_t rows, cols;
  };
  // (8193, 1025): three chunks of rows times two column tiles of the norms' column sums.
  std::vector<Shape> shapes = {Shape{5000, 100}, Shape{300, 5000}, Shape{3, 70000},
                               Shape{40000, 7}, Shape{8193, 1025}};
  if (th::under_valgrind()) shapes = {Shape{300, 200}, Shape{4100, 40}};
  for (Shape sh : shapes) {
    const uint64_t R = sh.rows, C = sh.cols, n = R * C;
    const Buf x(th::upload(th::make(th::Dist::Wide, n, salt += 10))),
        g(th::upload(th::make(th::Dist::Uniform, n, salt += 10)));
    const std::vector<Op> rows_ops = {
        {"softmax", [=](const tlrt_buffer *a, const tlrt_buffer *, tlrt_buffer **o) { return tlrt_softmax(a, R, C, o); }},
        {"log_softmax", [=](const tlrt_buffer *a, const tlrt_buffer *, tlrt_buffer **o) { return tlrt_log_softmax(a, R, C, o); }},
        {"softmax_bwd", [=](const tlrt_buffer *a, const tlrt_buffer *b, tlrt_buffer **o) { return tlrt_softmax_bwd(a, b, R, C, o); }},
        {"log_softmax_bwd", [=](const tlrt_buffer *a, const tlrt_buffer *b, tlrt_buffer **o) { return tlrt_log_softmax_bwd(a, b, R, C, o); }},
        // Layer norm and RMS norm with gamma = the first C values of g, beta = its next C: y,
        // then dx, dgamma and dbeta (dy = g) concatenated; rows over several chunks of 4096 and
        // column tiles of 1024 make several pieces of the column sums.
        {"layer_norm", [=](const tlrt_buffer *a, const tlrt_buffer *b, tlrt_buffer **o) { return norms(a, b, R, C, false, o); }},
        {"rms_norm", [=](const tlrt_buffer *a, const tlrt_buffer *b, tlrt_buffer **o) { return norms(a, b, R, C, true, o); }},
    };
    tlrt_set_num_threads(1);
    const auto want = run_all(rows_ops, x, g);
    for (uint32_t t : {2u, 7u}) {
      tlrt_set_num_threads(t);
      const auto got = run_all(rows_ops, x, g);
      for (size_t k = 0; k < rows_ops.size(); ++k)
        TH_CHECK_MSG(same(want[k], got[k]), "%s (%llu, %llu): %u threads differ from one",
                     rows_ops[k].name, (unsigned long long)R, (unsigned long long)C, t);
    }
  }

  // Several host threads at once, the count changing under them.
  {
    const uint64_t n = (th::under_valgrind() ? 2 : 5) * (uint64_t{1} << 16) + 3;
    const Buf a(th::upload(th::make(th::Dist::Wide, n, salt += 10))),
        b(th::upload(th::make(th::Dist::Uniform, n, salt += 10)));
    tlrt_set_num_threads(1);
    const auto want = run_all(list, a, b);
    tlrt_set_num_threads(4);
    std::atomic<int> bad{0};
    std::atomic<bool> stop{false};
    const int iters = th::under_valgrind() ? 2 : 20;
    std::vector<std::thread> callers;
    for (int c = 0; c < 4; ++c)
      callers.emplace_back([&] {
        for (int it = 0; it < iters; ++it)
          for (size_t k = 0; k < list.size(); ++k) {
            tlrt_buffer *o = nullptr;
            if (list[k].call(a.get(), b.get(), &o) != TLRT_OK || !same(want[k], th::download(o)))
              bad.fetch_add(1);
            tlrt_buffer_free(o);
          }
      });
    std::thread flipper([&] {
      uint32_t t = 1;
      while (!stop.load()) {
        tlrt_set_num_threads(t);
        t = t % 6 + 1;
        std::this_thread::yield();
      }
    });
    for (std::thread &t : callers) t.join();
    stop.store(true);
    flipper.join();
    TH_CHECK_MSG(bad.load() == 0, "%d results from concurrent callers differ", bad.load());
  }
  tlrt_set_num_threads(0);

  const tlrt_allocator_stats after = th::stats();
  TH_CHECK(after.live_bytes == before.live_bytes && after.live_handles == before.live_handles);
  return th::finish("test_cpu_threads");
}
