// The buffer handle behind the opaque tlrt_buffer, and the helpers entry points use to validate
// inputs and create outputs.
#pragma once

#include <atomic>
#include <cstdint>

#include "abi/tlrt_buffer.h"
#include "core/device.hpp"
#include "core/handle_table.hpp"

namespace tlrt {

// Bytes of one element of a type.
inline uint64_t dtype_size(tlrt_dtype t) { return t == TLRT_DTYPE_I64 ? 8 : 4; }
// "float32", "int32", "int64".
const char *dtype_name(tlrt_dtype t);

// The object behind a tlrt_buffer handle. Hosts hold a token of the buffer table
// (core/handle_table.hpp), never the object's address; `input` and `handle` turn a token into the
// object and report stale ones.
struct Buffer {
  std::atomic<uint64_t> refs{0};
  Dev dev{false, 0};
  uint64_t size = 0;       // elements
  tlrt_dtype dtype = TLRT_DTYPE_F32;
  // The payload (int32_t / int64_t values for those types); NULL when size == 0 or released.
  float *data = nullptr;
  std::atomic<bool> released{false};
  // A payload borrowed from a producer (tlrt_buffer_from_dlpack): released by calling
  // borrowed_release(borrowed_owner) instead of returning it to the allocator. NULL otherwise.
  void (*borrowed_release)(void *owner) = nullptr;
  void *borrowed_owner = nullptr;

  uint64_t bytes() const { return size * dtype_size(dtype); }
};

}  // namespace tlrt

namespace tlrt {

// Payload allocation with telemetry (core/allocator.cpp). bytes may be 0 (returns NULL).
float *payload_alloc(Dev dev, uint64_t bytes);
// Throws TLRT_ERR_OUT_OF_MEMORY when the countdown of tlrt_debug_fail_nth_allocation reaches this
// allocation (`what` names it in the message); otherwise does nothing.
void injected_allocation_failure(const char *what);
void payload_free(Dev dev, float *p, uint64_t bytes) noexcept;
void count_handle(int delta) noexcept;

// Owning reference to a new buffer under construction; frees it unless released to the caller.
class Owned {
 public:
  Owned() = default;
  Owned(tlrt_buffer *token, Buffer *object) : token_(token), object_(object) {}
  Owned(Owned &&o) noexcept : token_(o.token_), object_(o.object_) {
    o.token_ = nullptr;
    o.object_ = nullptr;
  }
  Owned &operator=(Owned &&o) noexcept;
  Owned(const Owned &) = delete;
  Owned &operator=(const Owned &) = delete;
  ~Owned();
  tlrt_buffer *token() const { return token_; }
  Buffer &operator*() const { return *object_; }
  Buffer *operator->() const { return object_; }
  tlrt_buffer *release() {
    tlrt_buffer *b = token_;
    token_ = nullptr;
    object_ = nullptr;
    return b;
  }

 private:
  tlrt_buffer *token_ = nullptr;
  Buffer *object_ = nullptr;
};

// New buffer of n uninitialised elements of a type on dev (checks n <= TLRT_MAX_ELEMENTS).
Owned new_buffer(Dev dev, uint64_t n, tlrt_dtype dtype = TLRT_DTYPE_F32);
// New buffer on dev whose payload is borrowed: release(owner) is called once when the buffer is
// freed or its storage released. On failure (out of memory) release is NOT called.
Owned borrowed_buffer(Dev dev, uint64_t n, tlrt_dtype dtype, void *data,
                      void (*release)(void *owner), void *owner);

// Validates an input handle: non-NULL (TLRT_ERR_NULL_ARGUMENT), a live buffer
// (TLRT_ERR_STALE_HANDLE), storage not released (TLRT_ERR_RELEASED), of float32 values
// (TLRT_ERR_DTYPE): what every float op takes.
const Buffer &input(const tlrt_buffer *b, const char *name);
// As input, for any element type (copies, transfers, queries).
const Buffer &input_any(const tlrt_buffer *b, const char *name);
// As input, for an index buffer: int32 or int64 (TLRT_ERR_DTYPE otherwise).
const Buffer &index_input(const tlrt_buffer *b, const char *name);

// Validates a handle that may be released (for calls that accept released buffers).
Buffer &handle(const tlrt_buffer *b, const char *name);

// Inputs of one op must share a device and (where stated) a size.
void same_device(const Buffer &a, const char *an, const Buffer &b, const char *bn);
void same_size(const Buffer &a, const char *an, const Buffer &b, const char *bn);

// Element-count guard for new buffers.
void check_elements(uint64_t n, const char *arg);

}  // namespace tlrt
