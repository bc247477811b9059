// Handles that cannot be misused: the objects behind the ABI's opaque pointers (tlrt_buffer,
// tlrt_tape) live in slots of a table whose memory is never returned, and the pointer a host holds
// is not an address but a token, (generation << 32) | (slot + 1). A slot's generation is odd while
// an object lives in it and is bumped at every creation and destruction, so a token of a destroyed
// object -- freed once, freed twice, or its slot since reused by a new object -- no longer matches
// and is reported as stale without reading freed memory. A value that never was a token (a slot
// past the table, zero in the low half) is reported the same way. Detection fails only when one
// slot has been reused 2^31 times between the token's creation and its use.
//
// Slots come in chunks of growing size (chunk k holds 64 << k slots), allocated once under a mutex
// and published with release order; lookups take no lock. Freed slots are reused most recently
// freed first. A table is never destroyed (its owner allocates it once and keeps it), so a handle
// freed by a static destructor or an atexit handler still finds it.
//
// Creation and destruction are thread-safe. Looking up a token while another thread destroys its
// object is the caller's data race (as using a pointer while freeing it).
// Cost: a mutex at creation and at destruction, one acquire load and compare per lookup.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <new>
#include <vector>

namespace tlrt {

template <class T>
class HandleTable {
 public:
  // A slot's object (default-constructed once; the owner resets its fields on each use).
  struct Slot {
    std::atomic<uint32_t> generation{0};
    T object{};
  };

  // Takes a free slot and marks it live; returns its token (never 0). *slot receives the slot.
  // Returns 0 when the table is full or out of host memory.
  uint64_t create(Slot **slot) noexcept {
    uint32_t index;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!free_.empty()) {
        index = free_.back();
        free_.pop_back();
      } else {
        if (next_ == kMaxSlots) return 0;
        const unsigned chunk = chunk_of(next_);
        if (chunks_[chunk].load(std::memory_order_relaxed) == nullptr) {
          Slot *c = new (std::nothrow) Slot[kFirstChunk << chunk];
          if (c == nullptr) return 0;
          chunks_[chunk].store(c, std::memory_order_release);
        }
        try {
          free_.reserve(next_ + 1);  // so that destroy never allocates
        } catch (...) {
          return 0;
        }
        index = next_++;
      }
    }
    Slot &s = at(index);
    const uint32_t g = s.generation.load(std::memory_order_relaxed) + 1;  // even -> odd: live
    s.generation.store(g, std::memory_order_release);
    *slot = &s;
    return (uint64_t)g << 32 | (uint64_t)(index + 1);
  }

  // The live slot of a token, or nullptr for a stale or foreign token.
  Slot *find(uint64_t token) const noexcept {
    const uint32_t low = (uint32_t)token;
    if (low == 0) return nullptr;
    const uint32_t index = low - 1;
    const unsigned chunk = chunk_of(index);
    if (chunk >= kChunks) return nullptr;
    Slot *c = chunks_[chunk].load(std::memory_order_acquire);
    if (c == nullptr) return nullptr;
    Slot &s = c[index + kFirstChunk - (kFirstChunk << chunk)];
    const uint32_t g = s.generation.load(std::memory_order_acquire);
    if ((g & 1u) == 0 || g != (uint32_t)(token >> 32)) return nullptr;
    return &s;
  }

  // Marks the token's slot free (its generation becomes even) and queues it for reuse. The caller
  // has found the slot live and owns its destruction.
  void destroy(uint64_t token) noexcept {
    const uint32_t index = (uint32_t)token - 1;
    Slot &s = at(index);
    s.generation.fetch_add(1, std::memory_order_acq_rel);
    std::lock_guard<std::mutex> lock(mutex_);
    free_.push_back(index);  // capacity reserved at creation
  }

 private:
  static constexpr uint32_t kFirstChunk = 64;
  static constexpr unsigned kChunks = 26;  // 64 * (2^26 - 1) slots, short of 2^32
  static constexpr uint32_t kMaxSlots = kFirstChunk * ((1u << kChunks) - 1);

  // Chunk k holds slots [64 (2^k - 1), 64 (2^(k+1) - 1)).
  static unsigned chunk_of(uint32_t index) noexcept {
    const uint64_t v = (uint64_t)index / kFirstChunk + 1;
    return 63u - (unsigned)__builtin_clzll(v);
  }
  Slot &at(uint32_t index) const noexcept {
    const unsigned chunk = chunk_of(index);
    return chunks_[chunk].load(std::memory_order_acquire)[index + kFirstChunk -
                                                           (kFirstChunk << chunk)];
  }

  std::atomic<Slot *> chunks_[kChunks] = {};
  std::mutex mutex_;
  std::vector<uint32_t> free_;
  uint32_t next_ = 0;
};

}  // namespace tlrt
