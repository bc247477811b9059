// Buffer handles: creation, reference counting, release, validation, and the buffer entry points.
#include "core/buffer.hpp"

#include <cstring>
#include <vector>

#include "core/backend/memory.hpp"
#include "core/error.hpp"

namespace tlrt {

namespace {

using Table = HandleTable<Buffer>;

// Allocated once and never destroyed: a host may free buffers from static destructors.
Table &table() {
  static Table *t = new Table;
  return *t;
}

uint64_t token_of(const tlrt_buffer *b) { return reinterpret_cast<uintptr_t>(b); }

}  // namespace

Owned &Owned::operator=(Owned &&o) noexcept {
  if (this != &o) {
    tlrt_buffer_free(token_);
    token_ = o.token_;
    object_ = o.object_;
    o.token_ = nullptr;
    o.object_ = nullptr;
  }
  return *this;
}

Owned::~Owned() { tlrt_buffer_free(token_); }

void check_elements(uint64_t n, const char *arg) {
  if (n > TLRT_MAX_ELEMENTS)
    fail(TLRT_ERR_OVERFLOW, "argument %s = %llu exceeds TLRT_MAX_ELEMENTS (2^60)", arg,
         (unsigned long long)n);
}

const char *dtype_name(tlrt_dtype t) {
  switch (t) {
    case TLRT_DTYPE_F32: return "float32";
    case TLRT_DTYPE_I32: return "int32";
    case TLRT_DTYPE_I64: return "int64";
  }
  return "an unknown type";
}

namespace {

// A live slot for a payload that already exists; 0 (and nothing taken) when out of memory.
Owned make_handle(Dev dev, uint64_t n, tlrt_dtype dtype, float *data,
                  void (*release)(void *), void *owner) {
  injected_allocation_failure("a buffer handle");
  Table::Slot *slot = nullptr;
  const uint64_t token = table().create(&slot);
  if (token == 0) fail(TLRT_ERR_OUT_OF_MEMORY, "out of host memory allocating a buffer handle");
  Buffer &b = slot->object;
  b.refs.store(1, std::memory_order_relaxed);
  b.dev = dev;
  b.size = n;
  b.dtype = dtype;
  b.data = data;
  b.borrowed_release = release;
  b.borrowed_owner = owner;
  b.released.store(false, std::memory_order_relaxed);
  count_handle(+1);
  return Owned(reinterpret_cast<tlrt_buffer *>(static_cast<uintptr_t>(token)), &b);
}

}  // namespace

Owned new_buffer(Dev dev, uint64_t n, tlrt_dtype dtype) {
  check_elements(n, "n");
  const uint64_t bytes = n * dtype_size(dtype);
  float *data = payload_alloc(dev, bytes);  // throws before the handle exists
  try {
    return make_handle(dev, n, dtype, data, nullptr, nullptr);
  } catch (...) {
    payload_free(dev, data, bytes);
    throw;
  }
}

Owned borrowed_buffer(Dev dev, uint64_t n, tlrt_dtype dtype, void *data,
                      void (*release)(void *owner), void *owner) {
  check_elements(n, "n");
  return make_handle(dev, n, dtype, static_cast<float *>(data), release, owner);
}

Buffer &handle(const tlrt_buffer *b, const char *name) {
  if (b == nullptr) fail(TLRT_ERR_NULL_ARGUMENT, "argument %s is NULL", name);
  Table::Slot *slot = table().find(token_of(b));
  if (slot == nullptr)
    fail(TLRT_ERR_STALE_HANDLE, "argument %s is not a live tlrt_buffer (freed, or never one)",
         name);
  return slot->object;
}

const Buffer &input_any(const tlrt_buffer *b, const char *name) {
  const Buffer &r = handle(b, name);
  if (r.released.load(std::memory_order_acquire))
    fail(TLRT_ERR_RELEASED, "argument %s: its storage was released by tlrt_buffer_release_storage",
         name);
  return r;
}

const Buffer &input(const tlrt_buffer *b, const char *name) {
  const Buffer &r = input_any(b, name);
  if (r.dtype != TLRT_DTYPE_F32)
    fail(TLRT_ERR_DTYPE, "argument %s holds %s values, float32 values are expected", name,
         dtype_name(r.dtype));
  return r;
}

const Buffer &index_input(const tlrt_buffer *b, const char *name) {
  const Buffer &r = input_any(b, name);
  if (r.dtype != TLRT_DTYPE_I32 && r.dtype != TLRT_DTYPE_I64)
    fail(TLRT_ERR_DTYPE, "argument %s holds %s values, int32 or int64 indices are expected", name,
         dtype_name(r.dtype));
  return r;
}

void same_device(const Buffer &a, const char *an, const Buffer &b, const char *bn) {
  if (a.dev.cuda != b.dev.cuda || a.dev.ordinal != b.dev.ordinal) {
    char x[32], y[32];
    fail(TLRT_ERR_DEVICE_MISMATCH, "argument %s is on %s, argument %s on %s", bn,
         device_name(b.dev.handle(), y), an, device_name(a.dev.handle(), x));
  }
}

void same_size(const Buffer &a, const char *an, const Buffer &b, const char *bn) {
  if (a.size != b.size)
    fail(TLRT_ERR_SHAPE, "argument %s has %llu elements, argument %s has %llu", bn,
         (unsigned long long)b.size, an, (unsigned long long)a.size);
}

namespace {

// Host staging for conversions: float32 values in a std::vector.
Owned upload_converted(Dev dev, const std::vector<float> &host) {
  Owned out = new_buffer(dev, host.size());
  if (!host.empty()) TLRT_DISPATCH(dev, upload, dev.ordinal, out->data, host.data(), host.size() * 4);
  return out;
}

constexpr bool kLittleEndian = __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__;

void check_host_ptr(const void *p, uint64_t n, const char *name) {
  if (p == nullptr && n != 0) fail(TLRT_ERR_NULL_ARGUMENT, "argument %s is NULL", name);
}

void download_f32(const Buffer &b, float *dst) {
  if (b.size != 0) TLRT_DISPATCH(b.dev, download, b.dev.ordinal, dst, b.data, b.size * 4);
}

// tlrt_buffer_zeros / tlrt_buffer_zeros_of: n zeros of a type.
tlrt_status zeros(const char *fn, tlrt_device device, tlrt_dtype dtype, uint64_t n,
                  tlrt_buffer **out) {
  return guarded(fn, [&] {
    clear_out(out, "out");
    Dev dev = resolve_device(device, "device");
    if (dtype != TLRT_DTYPE_F32 && dtype != TLRT_DTYPE_I32 && dtype != TLRT_DTYPE_I64)
      fail(TLRT_ERR_INVALID_ARGUMENT, "argument dtype = %d is not a tlrt_dtype", (int)dtype);
    Owned b = new_buffer(dev, n, dtype);
    // All-zero bits are +0.0f and integer 0 alike: fill bytes / 4 floats with +0.0f.
    if (n != 0) TLRT_DISPATCH(dev, fill, dev.ordinal, b->data, 0.0f, b->bytes() / 4);
    *out = b.release();
  });
}

}  // namespace
}  // namespace tlrt

using namespace tlrt;

extern "C" {

TLRT_API tlrt_status tlrt_buffer_from_f32(tlrt_device device, const float *data, uint64_t n,
                                          tlrt_buffer **out) {
  return guarded(__func__, [&] {
    clear_out(out, "out");
    Dev dev = resolve_device(device, "device");
    check_elements(n, "n");
    check_host_ptr(data, n, "data");
    Owned b = new_buffer(dev, n);
    if (n != 0) TLRT_DISPATCH(dev, upload, dev.ordinal, b->data, data, n * 4);
    *out = b.release();
  });
}

TLRT_API tlrt_status tlrt_buffer_from_f64(tlrt_device device, const double *data, uint64_t n,
                                          tlrt_buffer **out) {
  return guarded(__func__, [&] {
    clear_out(out, "out");
    Dev dev = resolve_device(device, "device");
    check_elements(n, "n");
    check_host_ptr(data, n, "data");
    if (!dev.cuda) {
      Owned b = new_buffer(dev, n);
      for (uint64_t i = 0; i < n; ++i) b->data[i] = static_cast<float>(data[i]);
      *out = b.release();
      return;
    }
    std::vector<float> host(n);
    for (uint64_t i = 0; i < n; ++i) host[i] = static_cast<float>(data[i]);
    *out = upload_converted(dev, host).release();
  });
}

TLRT_API tlrt_status tlrt_buffer_from_bytes(tlrt_device device, const uint8_t *bytes,
                                            uint64_t nbytes, tlrt_buffer **out) {
  return guarded(__func__, [&] {
    clear_out(out, "out");
    Dev dev = resolve_device(device, "device");
    check_host_ptr(bytes, nbytes, "bytes");
    if (nbytes % 4 != 0)
      fail(TLRT_ERR_SHAPE, "argument nbytes = %llu is not a multiple of 4",
           (unsigned long long)nbytes);
    const uint64_t n = nbytes / 4;
    check_elements(n, "nbytes / 4");
    if (kLittleEndian) {
      Owned b = new_buffer(dev, n);
      if (n != 0) TLRT_DISPATCH(dev, upload, dev.ordinal, b->data, bytes, nbytes);
      *out = b.release();
      return;
    }
    std::vector<float> host(n);
    for (uint64_t i = 0; i < n; ++i) {
      uint32_t u = (uint32_t)bytes[4 * i] | (uint32_t)bytes[4 * i + 1] << 8 |
                   (uint32_t)bytes[4 * i + 2] << 16 | (uint32_t)bytes[4 * i + 3] << 24;
      std::memcpy(&host[i], &u, 4);
    }
    *out = upload_converted(dev, host).release();
  });
}

TLRT_API tlrt_status tlrt_buffer_zeros(tlrt_device device, uint64_t n, tlrt_buffer **out) {
  return zeros(__func__, device, TLRT_DTYPE_F32, n, out);
}

TLRT_API tlrt_status tlrt_buffer_full(tlrt_device device, uint64_t n, double value,
                                      tlrt_buffer **out) {
  return guarded(__func__, [&] {
    clear_out(out, "out");
    Dev dev = resolve_device(device, "device");
    Owned b = new_buffer(dev, n);
    if (n != 0) TLRT_DISPATCH(dev, fill, dev.ordinal, b->data, to_f32(value), n);
    *out = b.release();
  });
}

TLRT_API tlrt_status tlrt_buffer_to_f32(const tlrt_buffer *buffer, float *dst, uint64_t n) {
  return guarded(__func__, [&] {
    const Buffer &b = input(buffer, "buffer");
    check_host_ptr(dst, n, "dst");
    if (n != b.size)
      fail(TLRT_ERR_SHAPE, "argument n = %llu, but the buffer has %llu elements",
           (unsigned long long)n, (unsigned long long)b.size);
    download_f32(b, dst);
  });
}

TLRT_API tlrt_status tlrt_buffer_to_f64(const tlrt_buffer *buffer, double *dst, uint64_t n) {
  return guarded(__func__, [&] {
    const Buffer &b = input(buffer, "buffer");
    check_host_ptr(dst, n, "dst");
    if (n != b.size)
      fail(TLRT_ERR_SHAPE, "argument n = %llu, but the buffer has %llu elements",
           (unsigned long long)n, (unsigned long long)b.size);
    if (!b.dev.cuda) {
      for (uint64_t i = 0; i < n; ++i) dst[i] = b.data[i];
      return;
    }
    std::vector<float> host(n);
    download_f32(b, host.data());
    for (uint64_t i = 0; i < n; ++i) dst[i] = host[i];
  });
}

TLRT_API tlrt_status tlrt_buffer_to_bytes(const tlrt_buffer *buffer, uint8_t *dst,
                                          uint64_t nbytes) {
  return guarded(__func__, [&] {
    const Buffer &b = input(buffer, "buffer");
    check_host_ptr(dst, nbytes, "dst");
    if (nbytes / 4 != b.size || nbytes % 4 != 0)
      fail(TLRT_ERR_SHAPE, "argument nbytes = %llu, but the buffer holds %llu elements (%llu bytes)",
           (unsigned long long)nbytes, (unsigned long long)b.size,
           (unsigned long long)(b.size * 4));
    if (kLittleEndian) {
      if (b.size != 0) TLRT_DISPATCH(b.dev, download, b.dev.ordinal, dst, b.data, nbytes);
      return;
    }
    std::vector<float> host(b.size);
    download_f32(b, host.data());
    for (uint64_t i = 0; i < b.size; ++i) {
      uint32_t u;
      std::memcpy(&u, &host[i], 4);
      for (int k = 0; k < 4; ++k) dst[4 * i + k] = (uint8_t)(u >> (8 * k));
    }
  });
}

TLRT_API tlrt_status tlrt_buffer_size(const tlrt_buffer *buffer, uint64_t *size) {
  return guarded(__func__, [&] {
    clear_out_value(size, "size");
    *size = input_any(buffer, "buffer").size;
  });
}

TLRT_API tlrt_status tlrt_buffer_device(const tlrt_buffer *buffer, tlrt_device *device) {
  return guarded(__func__, [&] {
    clear_out_value(device, "device");
    *device = handle(buffer, "buffer").dev.handle();
  });
}

TLRT_API tlrt_status tlrt_buffer_to_device(const tlrt_buffer *buffer, tlrt_device device,
                                           tlrt_buffer **out) {
  return guarded(__func__, [&] {
    clear_out(out, "out");
    const Buffer &src = input_any(buffer, "buffer");
    Dev dev = resolve_device(device, "device");
    Owned b = new_buffer(dev, src.size, src.dtype);
    const uint64_t bytes = src.bytes();
    if (bytes != 0) {
      if (dev.cuda == src.dev.cuda && dev.ordinal == src.dev.ordinal) {
        TLRT_DISPATCH(dev, copy, dev.ordinal, b->data, src.data, bytes);
      } else if (dev.cuda && src.dev.cuda) {
        TLRT_DISPATCH(dev, copy_peer, dev.ordinal, b->data, src.dev.ordinal, src.data, bytes);
      } else if (dev.cuda) {
        TLRT_DISPATCH(dev, upload, dev.ordinal, b->data, src.data, bytes);
      } else {
        TLRT_DISPATCH(src.dev, download, src.dev.ordinal, b->data, src.data, bytes);
      }
    }
    *out = b.release();
  });
}

TLRT_API tlrt_status tlrt_buffer_copy(const tlrt_buffer *buffer, tlrt_buffer **out) {
  return guarded(__func__, [&] {
    clear_out(out, "out");
    const Buffer &src = input_any(buffer, "buffer");
    Owned b = new_buffer(src.dev, src.size, src.dtype);
    if (src.size != 0) TLRT_DISPATCH(src.dev, copy, src.dev.ordinal, b->data, src.data, src.bytes());
    *out = b.release();
  });
}

}  // extern "C"

namespace {

template <class T>
tlrt_status upload_ints(const char *fn, tlrt_dtype dtype, tlrt_device device, const T *data,
                        uint64_t n, tlrt_buffer **out) {
  return guarded(fn, [&] {
    clear_out(out, "out");
    Dev dev = resolve_device(device, "device");
    check_elements(n, "n");
    check_host_ptr(data, n, "data");
    Owned b = new_buffer(dev, n, dtype);
    if (n != 0) TLRT_DISPATCH(dev, upload, dev.ordinal, b->data, data, n * sizeof(T));
    *out = b.release();
  });
}

template <class T>
tlrt_status download_ints(const char *fn, tlrt_dtype dtype, const tlrt_buffer *buffer, T *dst,
                          uint64_t n) {
  return guarded(fn, [&] {
    const Buffer &b = input_any(buffer, "buffer");
    if (b.dtype != dtype)
      fail(TLRT_ERR_DTYPE, "argument buffer holds %s values, not %s", dtype_name(b.dtype),
           dtype_name(dtype));
    check_host_ptr(dst, n, "dst");
    if (n != b.size)
      fail(TLRT_ERR_SHAPE, "argument n = %llu, but the buffer has %llu elements",
           (unsigned long long)n, (unsigned long long)b.size);
    if (n != 0) TLRT_DISPATCH(b.dev, download, b.dev.ordinal, dst, b.data, n * sizeof(T));
  });
}

}  // namespace

extern "C" {

TLRT_API tlrt_status tlrt_buffer_from_i32(tlrt_device device, const int32_t *data, uint64_t n,
                                          tlrt_buffer **out) {
  return upload_ints(__func__, TLRT_DTYPE_I32, device, data, n, out);
}

TLRT_API tlrt_status tlrt_buffer_from_i64(tlrt_device device, const int64_t *data, uint64_t n,
                                          tlrt_buffer **out) {
  return upload_ints(__func__, TLRT_DTYPE_I64, device, data, n, out);
}

TLRT_API tlrt_status tlrt_buffer_to_i32(const tlrt_buffer *buffer, int32_t *dst, uint64_t n) {
  return download_ints(__func__, TLRT_DTYPE_I32, buffer, dst, n);
}

TLRT_API tlrt_status tlrt_buffer_to_i64(const tlrt_buffer *buffer, int64_t *dst, uint64_t n) {
  return download_ints(__func__, TLRT_DTYPE_I64, buffer, dst, n);
}

TLRT_API tlrt_status tlrt_buffer_zeros_of(tlrt_device device, tlrt_dtype dtype, uint64_t n,
                                          tlrt_buffer **out) {
  return zeros(__func__, device, dtype, n, out);
}

TLRT_API tlrt_status tlrt_buffer_dtype(const tlrt_buffer *buffer, tlrt_dtype *dtype) {
  return guarded(__func__, [&] {
    clear_out_value(dtype, "dtype");
    *dtype = handle(buffer, "buffer").dtype;
  });
}

TLRT_API tlrt_status tlrt_buffer_retain(tlrt_buffer *buffer) {
  return guarded(__func__, [&] {
    handle(buffer, "buffer").refs.fetch_add(1, std::memory_order_relaxed);
  });
}

static void release_payload(Buffer *b, bool *freed) noexcept {
  if (b->released.exchange(true, std::memory_order_acq_rel)) {
    if (freed) *freed = false;
    return;
  }
  if (b->borrowed_release != nullptr) {
    // The producer may reuse its memory as soon as its deleter runs, on a stream of its own: the
    // library's queued work on the device (which may still read the payload) must finish first.
    // A failure here (a lost device) leaves nothing to wait for.
    if (b->dev.cuda && b->size != 0) {
      try {
        TLRT_DISPATCH(b->dev, synchronize, b->dev.ordinal);
      } catch (...) {
      }
    }
    b->borrowed_release(b->borrowed_owner);
    b->borrowed_release = nullptr;
    b->borrowed_owner = nullptr;
  } else {
    payload_free(b->dev, b->data, b->bytes());
  }
  b->data = nullptr;
  if (freed) *freed = true;
}

// Drops one reference of a live slot; destroys the buffer at zero.
static void drop(Table::Slot *slot, uint64_t token) noexcept {
  Buffer &b = slot->object;
  if (b.refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  release_payload(&b, nullptr);
  table().destroy(token);
  count_handle(-1);
}

TLRT_API void tlrt_buffer_free(tlrt_buffer *buffer) {
  if (buffer == nullptr) return;
  if (Table::Slot *slot = table().find(token_of(buffer))) drop(slot, token_of(buffer));
}

TLRT_API tlrt_status tlrt_buffer_free_checked(tlrt_buffer *buffer) {
  return guarded(__func__, [&] {
    if (buffer == nullptr) return;
    handle(buffer, "buffer");
    drop(table().find(token_of(buffer)), token_of(buffer));
  });
}

TLRT_API tlrt_status tlrt_buffer_release_storage(tlrt_buffer *buffer, bool *freed) {
  if (freed) *freed = false;
  return guarded(__func__, [&] { release_payload(&handle(buffer, "buffer"), freed); });
}

TLRT_API tlrt_status tlrt_buffer_is_released(const tlrt_buffer *buffer, bool *released) {
  return guarded(__func__, [&] {
    clear_out_value(released, "released");
    *released = handle(buffer, "buffer").released.load(std::memory_order_acquire);
  });
}

}  // extern "C"
