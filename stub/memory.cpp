// CPU backend: memory, transfers, fill.
//
// Payloads are 64-byte aligned host blocks (one cache line, the widest AVX-512 load). Freed blocks
// are kept in a size-class pool and reused, the CPU twin of the CUDA stream-ordered pool: without
// it every large output is a fresh mmap whose first touch page-faults, which measured 2 GB/s for a
// 64 MiB copy on the 2-core build machine instead of the ~18 GB/s the memory can do. Size classes
// are 64-byte multiples up to 4 KiB, then four classes per power of two (at most 25% slack).
// The pool keeps at most TORCHLEAN_RT_CPU_POOL_MAX_BYTES bytes (default 1 GiB; 0 disables it);
// tlrt_allocator_trim empties it. Transfers are memcpy; nothing is asynchronous.
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "core/backend/memory.hpp"
#include "core/error.hpp"

namespace tlrt {
namespace stub {

namespace {

constexpr uint64_t kAlign = 64;

uint64_t size_class(uint64_t bytes) {
  if (bytes <= 4096) return (bytes + kAlign - 1) & ~(kAlign - 1);
  const int top = 63 - __builtin_clzll(bytes);         // 2^top <= bytes < 2^(top+1)
  const uint64_t step = (uint64_t)1 << (top - 2);      // four classes per power of two
  if (bytes > UINT64_MAX - (step - 1)) return 0;        // cannot be rounded: no allocation
  return (bytes + step - 1) & ~(step - 1);
}

uint64_t pool_cap_from_env() {
  const char *v = std::getenv("TORCHLEAN_RT_CPU_POOL_MAX_BYTES");
  if (v == nullptr || *v == '\0') return (uint64_t)1 << 30;
  char *end = nullptr;
  unsigned long long x = std::strtoull(v, &end, 10);
  return (end != nullptr && *end == '\0') ? (uint64_t)x : ((uint64_t)1 << 30);
}

// Leaky singleton: buffers may be freed from static destructors of the host program after this
// translation unit's statics are gone, so the pool is never destroyed (its blocks stay reachable).
struct Pool {
  std::mutex mu;
  std::unordered_map<uint64_t, std::vector<void *>> free_blocks;
  uint64_t pooled = 0;
  const uint64_t cap = pool_cap_from_env();

  void *take(uint64_t cls) {
    std::lock_guard<std::mutex> lock(mu);
    auto it = free_blocks.find(cls);
    if (it == free_blocks.end() || it->second.empty()) return nullptr;
    void *p = it->second.back();
    it->second.pop_back();
    pooled -= cls;
    return p;
  }
  // Returns false when the block does not fit under the cap (the caller frees it).
  bool give(void *p, uint64_t cls) {
    std::lock_guard<std::mutex> lock(mu);
    if (pooled + cls > cap) return false;
    try {
      free_blocks[cls].push_back(p);
    } catch (...) {
      return false;
    }
    pooled += cls;
    return true;
  }
  void trim() {
    std::lock_guard<std::mutex> lock(mu);
    for (auto &kv : free_blocks)
      for (void *p : kv.second) std::free(p);
    free_blocks.clear();
    pooled = 0;
  }
  uint64_t pooled_bytes() {
    std::lock_guard<std::mutex> lock(mu);
    return pooled;
  }
};

Pool &pool() {
  static Pool *p = new Pool;
  return *p;
}

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
    pool().trim();
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

void download(int, void *dst, const void *src, uint64_t bytes) { std::memcpy(dst, src, bytes); }

void copy(int, void *dst, const void *src, uint64_t bytes) { std::memcpy(dst, src, bytes); }

void copy_peer(int, void *dst, int, const void *src, uint64_t bytes) {
  std::memcpy(dst, src, bytes);
}

void fill(int, float *dst, float value, uint64_t n) {
  for (uint64_t i = 0; i < n; ++i) dst[i] = value;
}

void synchronize(int) {}

void trim(int) { pool().trim(); }

void memory_info(int, uint64_t *pooled, uint64_t *free_bytes, uint64_t *total_bytes) {
  *pooled = pool().pooled_bytes();
  *free_bytes = 0;
  *total_bytes = 0;
}

}  // namespace stub
}  // namespace tlrt
