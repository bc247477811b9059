// CPU backend: memory, transfers, fill.
//
// Payloads are 64-byte aligned host blocks (one cache line, the widest AVX-512 load). Freed blocks
// are kept in a size-class pool and reused, the CPU twin of the CUDA stream-ordered pool: without
// it every large output is a fresh mmap whose first touch page-faults, which measured 2 GB/s for a
// 64 MiB copy on the 2-core build machine instead of the ~18 GB/s the memory can do. Size classes
// are those of core/size_class_pool.hpp.
// The pool keeps at most TORCHLEAN_RT_CPU_POOL_MAX_BYTES bytes (default 1 GiB; 0 disables it);
// tlrt_allocator_trim empties it. Transfers are memcpy; nothing is asynchronous, so there is no
// stream: the stream functions throw TLRT_ERR_UNSUPPORTED, and wait_for_library has nothing to do.
#include <cstdlib>
#include <cstring>

#include "core/backend/memory.hpp"
#include "core/error.hpp"
#include "core/size_class_pool.hpp"

namespace tlrt {
namespace stub {

namespace {

constexpr uint64_t kAlign = 64;

// Leaky singleton: buffers may be freed from static destructors of the host program after this
// translation unit's statics are gone, so the pool is never destroyed (its blocks stay reachable).
SizeClassPool &pool() {
  static SizeClassPool *p =
      new SizeClassPool(cpu_pool_max_bytes());
  return *p;
}

void trim_pool() { pool().trim([](void *p) { std::free(p); }); }

}  // namespace

uint32_t device_count() noexcept { return 1; }

void *alloc(int, uint64_t bytes) {
  const uint64_t cls = size_class(bytes);
  if (cls == 0 || cls > (uint64_t)SIZE_MAX)
    fail(TLRT_ERR_OUT_OF_MEMORY, "out of host memory allocating %llu bytes",
         (unsigned long long)bytes);
  if (void *p = pool().take(cls)) return p;
  void *p = std::aligned_alloc(kAlign, (size_t)cls);
  if (p == nullptr) {  // give the pool back to the system and try once more
    trim_pool();
    p = std::aligned_alloc(kAlign, (size_t)cls);
  }
  if (p == nullptr)
    fail(TLRT_ERR_OUT_OF_MEMORY, "out of host memory allocating %llu bytes",
         (unsigned long long)bytes);
  return p;
}

void dealloc(int, void *p, uint64_t bytes) noexcept {
  if (!pool().give(p, size_class(bytes))) std::free(p);
}

void upload(int, void *dst, const void *src, uint64_t bytes) { std::memcpy(dst, src, bytes); }

void upload_async(int, void *dst, const void *src, uint64_t bytes) { std::memcpy(dst, src, bytes); }

void upload_async_fill(int, void *dst, uint64_t bytes,
                       void (*fill)(void *ctx, void *host, uint64_t off, uint64_t len), void *ctx) {
  if (bytes != 0) fill(ctx, dst, 0, bytes);
}

void download(int, void *dst, const void *src, uint64_t bytes) { std::memcpy(dst, src, bytes); }

void copy(int, void *dst, const void *src, uint64_t bytes) { std::memcpy(dst, src, bytes); }

void copy_peer(int, void *dst, int, const void *src, uint64_t bytes) {
  std::memcpy(dst, src, bytes);
}

void fill(int, float *dst, float value, uint64_t n) {
  for (uint64_t i = 0; i < n; ++i) dst[i] = value;
}

void synchronize(int) {}

void trim(int) { trim_pool(); }

void memory_info(int, uint64_t *pooled, uint64_t *free_bytes, uint64_t *total_bytes) {
  *pooled = pool().pooled_bytes();
  *free_bytes = 0;
  *total_bytes = 0;
}

// The CPU has no stream. Core rejects the CPU before these (abi/tlrt_stream.h); they throw what the
// entry points document, should a caller ever reach them.
namespace {
[[noreturn]] void no_stream() {
  fail(TLRT_ERR_UNSUPPORTED, "the CPU has no stream (CPU work is complete when each call returns)");
}
}  // namespace

void *stream_get(int) { no_stream(); }

void stream_set(int, void *) { no_stream(); }

void stream_record_event(int, void *) { no_stream(); }

void stream_wait_event(int, void *) { no_stream(); }

// Nothing to wait for: every CPU call has finished its work when it returns.
void wait_for_library(int, void *) {}

}  // namespace stub
}  // namespace tlrt
