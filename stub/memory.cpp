// CPU backend: payloads are 64-byte aligned host blocks (one cache line, the widest AVX-512 load),
// transfers are memcpy, and there is nothing asynchronous to wait for.
#include <cstdlib>
#include <cstring>

#include "core/backend/memory.hpp"
#include "core/error.hpp"

namespace tlrt {
namespace stub {

namespace {
constexpr uint64_t kAlign = 64;
}

uint32_t device_count() noexcept { return 1; }

void *alloc(int, uint64_t bytes) {
  // aligned_alloc needs a size that is a multiple of the alignment.
  const uint64_t rounded = bytes > UINT64_MAX - (kAlign - 1) ? 0 : (bytes + kAlign - 1) & ~(kAlign - 1);
  void *p = rounded == 0 || rounded > (uint64_t)SIZE_MAX ? nullptr : std::aligned_alloc(kAlign, (size_t)rounded);
  if (p == nullptr)
    fail(TLRT_ERR_OUT_OF_MEMORY, "out of host memory allocating %llu bytes",
         (unsigned long long)bytes);
  return p;
}

void dealloc(int, void *p) noexcept { std::free(p); }

void upload(int, void *dst, const void *src, uint64_t bytes) { std::memcpy(dst, src, bytes); }

void download(int, void *dst, const void *src, uint64_t bytes) { std::memcpy(dst, src, bytes); }

void copy(int, void *dst, const void *src, uint64_t bytes) { std::memcpy(dst, src, bytes); }

void copy_peer(int, void *dst, int, const void *src, uint64_t bytes) {
  std::memcpy(dst, src, bytes);
}

void fill(int, float *dst, float value, uint64_t n) {
  for (uint64_t i = 0; i < n; ++i) dst[i] = value;
}

void synchronize(int) {}

void trim(int) {}

void memory_info(int, uint64_t *pooled, uint64_t *free_bytes, uint64_t *total_bytes) {
  *pooled = 0;
  *free_bytes = 0;
  *total_bytes = 0;
}

}  // namespace stub
}  // namespace tlrt
