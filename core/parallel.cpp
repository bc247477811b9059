// The CPU thread pool (core/backend/parallel.hpp): the calling thread and num_threads() - 1
// workers, started the first time a run asks for them and restarted when the setting changes.
// One run at a time: a run that finds the pool held by another host thread's run computes its
// pieces alone (the same results, since pieces never depend on who runs them). Pieces are handed
// out by an atomic counter; the caller waits on a condition variable for the workers it woke.
// After fork() the child's pool has no threads: it starts its own (the parent's are abandoned).
#include "core/backend/parallel.hpp"

#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "core/settings.hpp"

namespace tlrt {
namespace cpu_pool {

namespace {

thread_local bool t_in_piece = false;  // nested runs (a piece calling a kernel) run inline

class Pool {
 public:
  void run(uint64_t pieces, void (*fn)(void *, uint64_t), void *ctx) {
    const unsigned threads = num_threads();
    if (threads <= 1 || pieces <= 1 || t_in_piece || !run_mu_.try_lock()) {
      inline_run(pieces, fn, ctx);
      return;
    }
    std::lock_guard<std::mutex> hold(run_mu_, std::adopt_lock);
    const unsigned helpers = (unsigned)(pieces - 1 < threads - 1 ? pieces - 1 : threads - 1);
    ensure_workers(threads - 1);
    {
      std::lock_guard<std::mutex> lk(mu_);
      fn_ = fn;
      ctx_ = ctx;
      pieces_ = pieces;
      next_.store(0, std::memory_order_relaxed);
      wanted_ = helpers;
      joined_ = 0;
      done_ = 0;
      closed_ = false;
      ++generation_;
    }
    cv_work_.notify_all();
    t_in_piece = true;
    for (uint64_t p; (p = next_.fetch_add(1, std::memory_order_relaxed)) < pieces;) fn(ctx, p);
    t_in_piece = false;
    std::unique_lock<std::mutex> lk(mu_);
    // Wait for the workers that joined; the run is closed to the others until the next run's
    // set-up (a worker waking late must not take this run's fn and ctx into the next one).
    closed_ = true;
    cv_done_.wait(lk, [&] { return done_ == joined_; });
  }

 private:
  static void inline_run(uint64_t pieces, void (*fn)(void *, uint64_t), void *ctx) {
    const bool outer = t_in_piece;
    t_in_piece = true;
    for (uint64_t p = 0; p < pieces; ++p) fn(ctx, p);
    t_in_piece = outer;
  }

  void ensure_workers(unsigned n) {  // under run_mu_
    const pid_t pid = getpid();
    if (pid != pid_) {  // a forked child: the parent's threads do not exist here
      new std::vector<std::thread>(std::move(workers_));  // abandoned, never joined
      workers_.clear();
      pid_ = pid;
    }
    if (workers_.size() == n) return;
    stop_workers();
    for (unsigned i = 0; i < n; ++i) workers_.emplace_back([this] { work(); });
  }

  void stop_workers() {  // under run_mu_
    {
      std::lock_guard<std::mutex> lk(mu_);
      stop_ = true;
    }
    cv_work_.notify_all();
    for (std::thread &t : workers_) t.join();
    workers_.clear();
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = false;
  }

  void work() {
    t_in_piece = true;
    uint64_t seen;
    {
      std::lock_guard<std::mutex> lk(mu_);
      seen = generation_;
    }
    for (;;) {
      std::unique_lock<std::mutex> lk(mu_);
      cv_work_.wait(lk, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
      if (closed_ || joined_ >= wanted_) continue;  // not needed for this run
      ++joined_;
      void (*fn)(void *, uint64_t) = fn_;
      void *ctx = ctx_;
      const uint64_t pieces = pieces_;
      lk.unlock();
      for (uint64_t p; (p = next_.fetch_add(1, std::memory_order_relaxed)) < pieces;) fn(ctx, p);
      lk.lock();
      ++done_;
      if (done_ == joined_) cv_done_.notify_one();
    }
  }

  std::mutex run_mu_;  // held by the one run in progress
  std::mutex mu_;      // the fields below
  std::condition_variable cv_work_, cv_done_;
  std::vector<std::thread> workers_;
  pid_t pid_ = getpid();
  uint64_t generation_ = 0;
  bool stop_ = false, closed_ = false;
  void (*fn_)(void *, uint64_t) = nullptr;
  void *ctx_ = nullptr;
  uint64_t pieces_ = 0;
  std::atomic<uint64_t> next_{0};
  unsigned wanted_ = 0, joined_ = 0, done_ = 0;

 public:
  ~Pool() {  // process exit: the workers are idle (no run can be in progress)
    if (getpid() == pid_) stop_workers();
  }
};

Pool &pool() {
  static Pool p;
  return p;
}

}  // namespace

void run(uint64_t pieces, void (*fn)(void *ctx, uint64_t piece), void *ctx) noexcept {
  pool().run(pieces, fn, ctx);
}

}  // namespace cpu_pool
}  // namespace tlrt
