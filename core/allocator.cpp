// Payload allocation with telemetry: every payload byte goes through payload_alloc/payload_free,
// which keep per-device atomic counters; the backends own the actual memory (aligned host blocks,
// the CUDA stream-ordered pool).
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "abi/tlrt_testing.h"
#include "core/backend/memory.hpp"
#include "core/buffer.hpp"
#include "core/error.hpp"
#include "core/size_class_pool.hpp"

namespace tlrt {

namespace {

struct Counters {
  std::atomic<uint64_t> live{0}, peak{0}, allocs{0}, frees{0};
};

// Slot 0 is the CPU; slot 1 + k is CUDA ordinal k.
Counters g_counters[1 + kMaxCudaDevices];
std::atomic<uint64_t> g_live_handles{0}, g_peak_handles{0};

Counters &counters(Dev dev) { return g_counters[dev.cuda ? 1 + dev.ordinal : 0]; }

void raise_peak(std::atomic<uint64_t> &peak, uint64_t v) {
  uint64_t p = peak.load(std::memory_order_relaxed);
  while (v > p && !peak.compare_exchange_weak(p, v, std::memory_order_relaxed)) {
  }
}

// tlrt_debug_fail_nth_allocation: allocations until the injected failure (0: none armed).
std::atomic<uint64_t> g_fail_countdown{0};

}  // namespace

void injected_allocation_failure(const char *what) {
  uint64_t c = g_fail_countdown.load(std::memory_order_relaxed);
  while (c != 0 && !g_fail_countdown.compare_exchange_weak(c, c - 1, std::memory_order_relaxed)) {
  }
  if (c == 1)
    fail(TLRT_ERR_OUT_OF_MEMORY, "out of memory allocating %s (injected by "
         "tlrt_debug_fail_nth_allocation)", what);
}

float *payload_alloc(Dev dev, uint64_t bytes) {
  if (bytes == 0) return nullptr;
  injected_allocation_failure("a buffer payload");
  void *p = TLRT_DISPATCH(dev, alloc, dev.ordinal, bytes);
  Counters &c = counters(dev);
  c.allocs.fetch_add(1, std::memory_order_relaxed);
  raise_peak(c.peak, c.live.fetch_add(bytes, std::memory_order_relaxed) + bytes);
  return static_cast<float *>(p);
}

void payload_free(Dev dev, float *p, uint64_t bytes) noexcept {
  if (p == nullptr) return;
  TLRT_DISPATCH(dev, dealloc, dev.ordinal, p, bytes);
  Counters &c = counters(dev);
  c.frees.fetch_add(1, std::memory_order_relaxed);
  c.live.fetch_sub(bytes, std::memory_order_relaxed);
}

void count_handle(int delta) noexcept {
  if (delta > 0)
    raise_peak(g_peak_handles, g_live_handles.fetch_add(1, std::memory_order_relaxed) + 1);
  else
    g_live_handles.fetch_sub(1, std::memory_order_relaxed);
}

}  // namespace tlrt

using namespace tlrt;

extern "C" {

TLRT_API tlrt_status tlrt_allocator_stats_get(tlrt_device device, tlrt_allocator_stats *stats) {
  return guarded(__func__, [&] {
    if (stats == nullptr) fail(TLRT_ERR_NULL_ARGUMENT, "argument stats is NULL");
    const uint64_t size = stats->struct_size;
    if (size < 2 * sizeof(uint64_t))
      fail(TLRT_ERR_INVALID_ARGUMENT,
           "argument stats->struct_size = %llu; set it to sizeof(tlrt_allocator_stats) = %zu",
           (unsigned long long)size, sizeof(tlrt_allocator_stats));
    Dev dev = resolve_device(device, "device");
    tlrt_allocator_stats s;
    std::memset(&s, 0, sizeof s);
    Counters &c = counters(dev);
    s.live_bytes = c.live.load(std::memory_order_relaxed);
    s.peak_bytes = c.peak.load(std::memory_order_relaxed);
    s.alloc_count = c.allocs.load(std::memory_order_relaxed);
    s.free_count = c.frees.load(std::memory_order_relaxed);
    TLRT_DISPATCH(dev, memory_info, dev.ordinal, &s.pooled_bytes, &s.device_free_bytes,
                  &s.device_total_bytes);
    s.live_handles = g_live_handles.load(std::memory_order_relaxed);
    s.peak_handles = g_peak_handles.load(std::memory_order_relaxed);
    const uint64_t n = size < sizeof s ? size : sizeof s;
    s.struct_size = size;
    std::memcpy(stats, &s, n);
  });
}

TLRT_API uint64_t tlrt_debug_fail_nth_allocation(uint64_t n) {
  return g_fail_countdown.exchange(n, std::memory_order_relaxed);
}

TLRT_API tlrt_status tlrt_allocator_trim(tlrt_device device) {
  return guarded(__func__, [&] {
    Dev dev = resolve_device(device, "device");
    TLRT_DISPATCH(dev, trim, dev.ordinal);
  });
}

}  // extern "C"
