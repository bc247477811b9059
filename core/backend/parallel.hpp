// Backend service: the CPU thread pool (core/parallel.cpp), for the CPU backend's kernels. Its size
// is core's setting (tlrt_set_num_threads, core/settings.hpp); a kernel never asks for it. A kernel
// cuts its work into pieces whose bounds depend only on the problem's size (never on the thread
// count) and computes each piece as the one-thread kernel would, so results are bitwise the same
// for any number of threads.
#pragma once

#include <cstdint>

namespace tlrt {
namespace cpu_pool {

// fn(ctx, p) for p = 0 .. pieces - 1, each exactly once, on the calling thread and the pool's
// workers; returns when all have run (their writes visible to the caller). Runs every piece on
// the calling thread, in order, when the setting is one thread, when there is one piece, when
// called from inside a piece, or while another host thread's run holds the pool. fn must not
// throw.
void run(uint64_t pieces, void (*fn)(void *ctx, uint64_t piece), void *ctx) noexcept;

// f(begin, end) over [0, n) in pieces of `grain` elements (the last one shorter).
template <class F>
void for_pieces(uint64_t n, uint64_t grain, F &&f) noexcept {
  if (n == 0) return;
  const uint64_t pieces = (n + grain - 1) / grain;
  if (pieces == 1) {
    f(uint64_t{0}, n);
    return;
  }
  struct Ctx {
    F *f;
    uint64_t n, grain;
  } c{&f, n, grain};
  run(pieces,
      [](void *vc, uint64_t p) {
        const Ctx &k = *static_cast<const Ctx *>(vc);
        const uint64_t b = p * k.grain, e = b + k.grain < k.n ? b + k.grain : k.n;
        (*k.f)(b, e);
      },
      &c);
}

}  // namespace cpu_pool
}  // namespace tlrt
