// The buffer handle behind the opaque tlrt_buffer, and the helpers entry points use to validate
// inputs and create outputs.
#pragma once

#include <atomic>
#include <cstdint>

#include "abi/tlrt_buffer.h"
#include "core/device.hpp"

// Magic value stamped on live handles; catches most non-buffers and freed handles in debug use
// (a freed handle is undefined behaviour for the caller, this is a best effort).
constexpr uint64_t kTlrtBufferMagic = 0x746c72745f627566ull;  // "tlrt_buf"

struct tlrt_buffer {
  uint64_t magic;
  std::atomic<uint64_t> refs;
  tlrt::Dev dev;
  uint64_t size;   // elements
  float *data;     // NULL when size == 0 or released
  std::atomic<bool> released;
};

namespace tlrt {

// Payload allocation with telemetry (core/allocator.cpp). bytes may be 0 (returns NULL).
float *payload_alloc(Dev dev, uint64_t elements);
// Throws TLRT_ERR_OUT_OF_MEMORY when the countdown of tlrt_debug_fail_nth_allocation reaches this
// allocation (`what` names it in the message); otherwise does nothing.
void injected_allocation_failure(const char *what);
void payload_free(Dev dev, float *p, uint64_t elements) noexcept;
void count_handle(int delta) noexcept;

// Owning pointer to a new handle under construction; frees it unless released to the caller.
class Owned {
 public:
  Owned() = default;
  explicit Owned(tlrt_buffer *b) : b_(b) {}
  Owned(Owned &&o) noexcept : b_(o.b_) { o.b_ = nullptr; }
  Owned &operator=(Owned &&o) noexcept;
  Owned(const Owned &) = delete;
  Owned &operator=(const Owned &) = delete;
  ~Owned();
  tlrt_buffer *get() const { return b_; }
  tlrt_buffer *operator->() const { return b_; }
  tlrt_buffer *release() {
    tlrt_buffer *b = b_;
    b_ = nullptr;
    return b;
  }

 private:
  tlrt_buffer *b_ = nullptr;
};

// New buffer of n uninitialised elements on dev (checks n <= TLRT_MAX_ELEMENTS).
Owned new_buffer(Dev dev, uint64_t n);

// Validates an input handle: non-NULL, a live tlrt_buffer, storage not released.
const tlrt_buffer &input(const tlrt_buffer *b, const char *name);

// Validates a handle that may be released (for calls that accept released buffers).
const tlrt_buffer &handle(const tlrt_buffer *b, const char *name);

// Inputs of one op must share a device and (where stated) a size.
void same_device(const tlrt_buffer &a, const char *an, const tlrt_buffer &b, const char *bn);
void same_size(const tlrt_buffer &a, const char *an, const tlrt_buffer &b, const char *bn);

// Element-count guard for new buffers.
void check_elements(uint64_t n, const char *arg);

}  // namespace tlrt
