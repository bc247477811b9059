// A size-class free list of payload blocks, shared by the CPU backend (host blocks) and the CUDA
// backend (device blocks from the stream-ordered pool). Freed blocks are kept per size class and
// handed out again; a cap bounds what is kept. Thread-safe. The owner supplies how blocks are
// really freed (std::free, cudaFreeAsync) when the pool trims.
//
// Size classes: 64-byte multiples up to 4 KiB, then four classes per power of two, so a block is
// at most 25% larger than asked for.
#pragma once

#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace tlrt {

// The class a request of `bytes` is served from; 0 if bytes cannot be rounded up (overflow).
inline uint64_t size_class(uint64_t bytes) {
  if (bytes <= 4096) return (bytes + 63) & ~uint64_t{63};
  const int top = 63 - __builtin_clzll(bytes);     // 2^top <= bytes < 2^(top+1)
  const uint64_t step = uint64_t{1} << (top - 2);  // four classes per power of two
  if (bytes > UINT64_MAX - (step - 1)) return 0;
  return (bytes + step - 1) & ~(step - 1);
}

class SizeClassPool {
 public:
  explicit SizeClassPool(uint64_t cap_bytes) : cap_(cap_bytes) {}

  // A pooled block of class `cls`, or nullptr.
  void *take(uint64_t cls) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = blocks_.find(cls);
    if (it == blocks_.end() || it->second.empty()) return nullptr;
    void *p = it->second.back();
    it->second.pop_back();
    pooled_ -= cls;
    return p;
  }

  // Keeps p for reuse; false if it would exceed the cap (the caller frees p itself).
  bool give(void *p, uint64_t cls) {
    std::lock_guard<std::mutex> lock(mu_);
    if (cls == 0 || pooled_ + cls > cap_) return false;
    try {
      blocks_[cls].push_back(p);
    } catch (...) {
      return false;
    }
    pooled_ += cls;
    return true;
  }

  // Hands every pooled block to release(p) and empties the pool.
  template <class Release>
  void trim(Release release) {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto &kv : blocks_)
      for (void *p : kv.second) release(p);
    blocks_.clear();
    pooled_ = 0;
  }

  uint64_t pooled_bytes() {
    std::lock_guard<std::mutex> lock(mu_);
    return pooled_;
  }

 private:
  std::mutex mu_;
  std::unordered_map<uint64_t, std::vector<void *>> blocks_;
  uint64_t pooled_ = 0;
  const uint64_t cap_;
};

// The pools' caps in bytes, read once from the environment by core/settings.cpp:
// TORCHLEAN_RT_CPU_POOL_MAX_BYTES (default 1 GiB) and TORCHLEAN_RT_CUDA_CACHE_MAX_BYTES (4 GiB).
uint64_t cpu_pool_max_bytes();
uint64_t cuda_cache_max_bytes();

}  // namespace tlrt
