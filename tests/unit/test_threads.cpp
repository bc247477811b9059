// Threads: 8 threads call entry points at once, on shared read-only buffers and on their own, on
// the CPU and (where a GPU is usable) on CUDA(0). Checked:
//   - every result is bit for bit the one computed single-threaded beforehand;
//   - retain/free of shared handles from all threads keeps the reference count right;
//   - tlrt_last_error() is per thread: each thread's failures name its own argument;
//   - one extra thread flips the determinism switch all the time, which changes no result here
//     (every reduction follows the one fixed tree in both modes);
//   - afterwards live bytes and handles are back where they started.
// The harness's check counters are not thread-safe: worker threads count failures in an atomic.
// Run under ThreadSanitizer by the CI's TSan step. TLRT_THREADS_ITERS overrides the iterations.
#include <atomic>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "harness.hpp"

namespace {

using th::Buf;
constexpr int kThreads = 8;

struct Op {
  const char *name;
  std::function<tlrt_status(const tlrt_buffer *, const tlrt_buffer *, tlrt_buffer **)> call;
};

std::vector<Op> ops() {
  return {
      {"add", [](const tlrt_buffer *a, const tlrt_buffer *b, tlrt_buffer **o) { return tlrt_add(a, b, o); }},
      {"mul", [](const tlrt_buffer *a, const tlrt_buffer *b, tlrt_buffer **o) { return tlrt_mul(a, b, o); }},
      {"exp", [](const tlrt_buffer *a, const tlrt_buffer *, tlrt_buffer **o) { return tlrt_exp(a, o); }},
      {"tanh", [](const tlrt_buffer *a, const tlrt_buffer *, tlrt_buffer **o) { return tlrt_tanh(a, o); }},
      {"gelu_bwd", [](const tlrt_buffer *a, const tlrt_buffer *b, tlrt_buffer **o) { return tlrt_gelu_bwd(a, b, o); }},
      {"sum", [](const tlrt_buffer *a, const tlrt_buffer *, tlrt_buffer **o) { return tlrt_reduce_sum(a, o); }},
      {"sum_axis0", [](const tlrt_buffer *a, const tlrt_buffer *, tlrt_buffer **o) { return tlrt_reduce_sum_axis0(a, 64, 128, o); }},
      {"max_axis1", [](const tlrt_buffer *a, const tlrt_buffer *, tlrt_buffer **o) { return tlrt_reduce_max_axis1(a, 64, 128, o); }},
      {"copy", [](const tlrt_buffer *a, const tlrt_buffer *, tlrt_buffer **o) { return tlrt_buffer_copy(a, o); }},
  };
}

int iterations() {
  if (const char *e = std::getenv("TLRT_THREADS_ITERS")) return std::atoi(e);
  return th::under_valgrind() ? 40 : 2000;
}

void run_device(tlrt_device dev) {
  const uint64_t n = 64 * 128;
  th::Rng rng(th::seed() ^ 0x7EAD);
  Buf a(th::upload(rng.vec(n, -2.0f, 2.0f), dev));
  Buf b(th::upload(rng.vec(n, -2.0f, 2.0f), dev));
  const std::vector<Op> list = ops();
  std::vector<std::vector<float>> want;
  for (const Op &op : list) {
    Buf y;
    TH_OK(op.call(a.get(), b.get(), y.out()));
    want.push_back(th::download(y.get()));
  }
  const tlrt_allocator_stats start = th::stats(dev);
  const int iters = iterations();
  std::atomic<int> bad{0}, done{0};
  std::atomic<bool> stop{false};
  std::vector<std::thread> pool;
  for (int t = 0; t < kThreads; ++t) {
    pool.emplace_back([&, t] {
      th::Rng r(th::seed() + 1000 + t);
      for (int it = 0; it < iters; ++it) {
        const size_t k = (size_t)(t + it) % list.size();
        // Shared inputs, retained and released by every thread.
        if (tlrt_buffer_retain(a.get()) != TLRT_OK) ++bad;
        tlrt_buffer *y = nullptr;
        if (list[k].call(a.get(), b.get(), &y) != TLRT_OK) {
          ++bad;
        } else {
          const std::vector<float> got = th::download(y);
          if (got.size() != want[k].size() ||
              !std::equal(got.begin(), got.end(), want[k].begin(), th::same_bits))
            ++bad;
        }
        tlrt_buffer_free(y);
        tlrt_buffer_free(a.get());
        // Own buffers, their lifetime, and this thread's own error message.
        if (it % 8 == 0) {
          const std::vector<float> mine = r.vec(1 + r.gen() % 100, -1.0f, 1.0f);
          tlrt_buffer *p = th::upload(mine, dev);
          tlrt_buffer *q = nullptr;
          if (tlrt_scale(p, 2.0, &q) != TLRT_OK) ++bad;
          const std::vector<float> twice = th::download(q);
          for (size_t i = 0; i < mine.size(); ++i)
            if (!th::same_bits(twice[i], mine[i] * 2.0f)) ++bad;
          bool freed = false;
          if (tlrt_buffer_release_storage(p, &freed) != TLRT_OK || !freed) ++bad;
          tlrt_buffer *z = nullptr;
          if (tlrt_add(q, p, &z) != TLRT_ERR_RELEASED || z != nullptr) ++bad;
          const std::string msg = tlrt_last_error();
          if (msg.find("argument b") == std::string::npos) ++bad;
          tlrt_buffer_free(p);
          tlrt_buffer_free(q);
        }
      }
      ++done;
    });
  }
  // The determinism switch flips while the others compute: nothing may change.
  std::thread flipper([&] {
    while (!stop.load()) tlrt_set_deterministic(!tlrt_get_deterministic());
  });
  for (auto &th : pool) th.join();
  stop = true;
  flipper.join();
  TH_CHECK_MSG(bad.load() == 0, "%d wrong results or statuses across %d threads x %d iterations "
               "(device 0x%x)", bad.load(), kThreads, iters, dev);
  TH_CHECK(done.load() == kThreads);
  const tlrt_allocator_stats end = th::stats(dev);
  TH_CHECK_MSG(end.live_bytes == start.live_bytes && end.live_handles == start.live_handles,
               "live bytes %llu -> %llu, handles %llu -> %llu", (unsigned long long)start.live_bytes,
               (unsigned long long)end.live_bytes, (unsigned long long)start.live_handles,
               (unsigned long long)end.live_handles);
  std::printf("test_threads: device 0x%x: %d threads x %d iterations, results bitwise as "
              "single-threaded\n", dev, kThreads, iters);
}

// The long loop of issue 6: allocate, compute, free 100k times; live bytes and handles return to
// their starting values and trim empties the pool.
void long_loop(tlrt_device dev, int iters) {
  const tlrt_allocator_stats start = th::stats(dev);
  th::Rng rng(5);
  Buf x(th::upload(rng.vec(256, -1.0f, 1.0f), dev));
  for (int i = 0; i < iters; ++i) {
    tlrt_buffer *y = nullptr, *z = nullptr;
    TH_OK(tlrt_exp(x.get(), &y));
    TH_OK(tlrt_reduce_sum(y, &z));
    tlrt_buffer_free(y);
    tlrt_buffer_free(z);
  }
  x = Buf();
  const tlrt_allocator_stats end = th::stats(dev);
  TH_CHECK(end.live_bytes == start.live_bytes);
  TH_CHECK(end.live_handles == start.live_handles);
  TH_OK(tlrt_allocator_trim(dev));
  TH_CHECK(th::stats(dev).pooled_bytes == 0);
  std::printf("test_threads: device 0x%x: %d allocate/compute/free iterations, live bytes back to "
              "%llu, pool trimmed\n", dev, iters, (unsigned long long)end.live_bytes);
}

}  // namespace

int main() {
  run_device(TLRT_DEVICE_CPU);
  long_loop(TLRT_DEVICE_CPU, th::under_valgrind() ? 2000 : 100000);
  if (th::cuda_ready()) {
    run_device(TLRT_DEVICE_CUDA(0));
    long_loop(TLRT_DEVICE_CUDA(0), 100000);
  }
  return th::finish("test_threads");
}
