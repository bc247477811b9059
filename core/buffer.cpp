// Buffer handles: creation, reference counting, release, validation, and the buffer entry points.
#include "core/buffer.hpp"

#include <cstring>
#include <vector>

#include "core/backend/memory.hpp"
#include "core/error.hpp"

namespace tlrt {

Owned &Owned::operator=(Owned &&o) noexcept {
  if (this != &o) {
    tlrt_buffer_free(b_);
    b_ = o.b_;
    o.b_ = nullptr;
  }
  return *this;
}

Owned::~Owned() { tlrt_buffer_free(b_); }

void check_elements(uint64_t n, const char *arg) {
  if (n > TLRT_MAX_ELEMENTS)
    fail(TLRT_ERR_OVERFLOW, "argument %s = %llu exceeds TLRT_MAX_ELEMENTS (2^60)", arg,
         (unsigned long long)n);
}

Owned new_buffer(Dev dev, uint64_t n) {
  check_elements(n, "n");
  float *data = payload_alloc(dev, n);  // throws before the handle exists
  tlrt_buffer *b = nullptr;
  try {
    injected_allocation_failure("a buffer handle");
    b = new (std::nothrow) tlrt_buffer;
  } catch (...) {
    payload_free(dev, data, n);
    throw;
  }
  if (b == nullptr) {
    payload_free(dev, data, n);
    fail(TLRT_ERR_OUT_OF_MEMORY, "out of host memory allocating a buffer handle");
  }
  b->magic = kTlrtBufferMagic;
  b->refs.store(1, std::memory_order_relaxed);
  b->dev = dev;
  b->size = n;
  b->data = data;
  b->released.store(false, std::memory_order_relaxed);
  count_handle(+1);
  return Owned(b);
}

const tlrt_buffer &handle(const tlrt_buffer *b, const char *name) {
  if (b == nullptr) fail(TLRT_ERR_NULL_ARGUMENT, "argument %s is NULL", name);
  if (b->magic != kTlrtBufferMagic)
    fail(TLRT_ERR_INVALID_ARGUMENT, "argument %s is not a live tlrt_buffer (freed?)", name);
  return *b;
}

const tlrt_buffer &input(const tlrt_buffer *b, const char *name) {
  const tlrt_buffer &r = handle(b, name);
  if (r.released.load(std::memory_order_acquire))
    fail(TLRT_ERR_RELEASED, "argument %s: its storage was released by tlrt_buffer_release_storage",
         name);
  return r;
}

void same_device(const tlrt_buffer &a, const char *an, const tlrt_buffer &b, const char *bn) {
  if (a.dev.cuda != b.dev.cuda || a.dev.ordinal != b.dev.ordinal) {
    char x[32], y[32];
    fail(TLRT_ERR_DEVICE_MISMATCH, "argument %s is on %s, argument %s on %s", bn,
         device_name(b.dev.handle(), y), an, device_name(a.dev.handle(), x));
  }
}

void same_size(const tlrt_buffer &a, const char *an, const tlrt_buffer &b, const char *bn) {
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

void download_f32(const tlrt_buffer &b, float *dst) {
  if (b.size != 0) TLRT_DISPATCH(b.dev, download, b.dev.ordinal, dst, b.data, b.size * 4);
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
  return tlrt::guarded(__func__, [&] {
    clear_out(out, "out");
    Dev dev = resolve_device(device, "device");
    Owned b = new_buffer(dev, n);
    if (n != 0) TLRT_DISPATCH(dev, fill, dev.ordinal, b->data, 0.0f, n);
    *out = b.release();
  });
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
    const tlrt_buffer &b = input(buffer, "buffer");
    check_host_ptr(dst, n, "dst");
    if (n != b.size)
      fail(TLRT_ERR_SHAPE, "argument n = %llu, but the buffer has %llu elements",
           (unsigned long long)n, (unsigned long long)b.size);
    download_f32(b, dst);
  });
}

TLRT_API tlrt_status tlrt_buffer_to_f64(const tlrt_buffer *buffer, double *dst, uint64_t n) {
  return guarded(__func__, [&] {
    const tlrt_buffer &b = input(buffer, "buffer");
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
    const tlrt_buffer &b = input(buffer, "buffer");
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
    *size = input(buffer, "buffer").size;
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
    const tlrt_buffer &src = input(buffer, "buffer");
    Dev dev = resolve_device(device, "device");
    Owned b = new_buffer(dev, src.size);
    const uint64_t bytes = src.size * 4;
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
    const tlrt_buffer &src = input(buffer, "buffer");
    Owned b = new_buffer(src.dev, src.size);
    if (src.size != 0) TLRT_DISPATCH(src.dev, copy, src.dev.ordinal, b->data, src.data, src.size * 4);
    *out = b.release();
  });
}

TLRT_API tlrt_status tlrt_buffer_retain(tlrt_buffer *buffer) {
  return guarded(__func__, [&] {
    handle(buffer, "buffer");
    buffer->refs.fetch_add(1, std::memory_order_relaxed);
  });
}

static void release_payload(tlrt_buffer *b, bool *freed) noexcept {
  if (b->released.exchange(true, std::memory_order_acq_rel)) {
    if (freed) *freed = false;
    return;
  }
  payload_free(b->dev, b->data, b->size);
  b->data = nullptr;
  if (freed) *freed = true;
}

TLRT_API void tlrt_buffer_free(tlrt_buffer *buffer) {
  if (buffer == nullptr || buffer->magic != kTlrtBufferMagic) return;
  if (buffer->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  release_payload(buffer, nullptr);
  buffer->magic = 0;
  delete buffer;
  count_handle(-1);
}

TLRT_API tlrt_status tlrt_buffer_release_storage(tlrt_buffer *buffer, bool *freed) {
  if (freed) *freed = false;
  return guarded(__func__, [&] {
    handle(buffer, "buffer");
    release_payload(buffer, freed);
  });
}

TLRT_API tlrt_status tlrt_buffer_is_released(const tlrt_buffer *buffer, bool *released) {
  return guarded(__func__, [&] {
    clear_out_value(released, "released");
    *released = handle(buffer, "buffer").released.load(std::memory_order_acquire);
  });
}

}  // extern "C"
