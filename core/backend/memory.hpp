// Backend interface: device memory, transfers, fill, synchronisation.
// Defined by stub/memory.cpp (namespace tlrt::stub) and cuda/memory.cu (namespace tlrt::cuda).
// Arguments are already validated by core; `dev` is the CUDA ordinal (0 for the CPU). Functions
// throw tlrt::Error for failures the hardware reports (out of memory, CUDA errors).
#pragma once

#include <cstdint>

#define TLRT_MEMORY_BACKEND_API                                                              \
  /* Number of usable devices (never throws; 0 when none). */                               \
  uint32_t device_count() noexcept;                                                         \
  /* Payload allocation of bytes > 0; throws TLRT_ERR_OUT_OF_MEMORY. */                     \
  void *alloc(int dev, uint64_t bytes);                                                     \
  /* Free of a block from alloc(dev, bytes) (never throws, never blocks; CUDA: ordered on  \
     the library stream). */                                                                \
  void dealloc(int dev, void *p, uint64_t bytes) noexcept;                                  \
  /* Host -> device; src may be reused when this returns. */                                \
  void upload(int dev, void *dst, const void *src, uint64_t bytes);                         \
  /* Host -> device for small per-call host data (index lists): src is copied to pinned    \
     staging before this returns (src may be reused), the transfer is queued on the        \
     library stream; the host never waits for the device (CUDA: a pinned ring whose       \
     blocks are reused once their copy has completed). */                                  \
  void upload_async(int dev, void *dst, const void *src, uint64_t bytes);                   \
  /* upload_async of bytes that fill(ctx, host, off, len) writes into host (bytes [off,      \
     off + len) of the data; len > 0, off and len multiples of 8 unless at the end): data   \
     produced straight into the staging, without a host array of its own (CPU: into dst). */ \
  void upload_async_fill(int dev, void *dst, uint64_t bytes,                                \
                         void (*fill)(void *ctx, void *host, uint64_t off, uint64_t len),   \
                         void *ctx);                                                        \
  /* Device -> host; waits for earlier work on the device. */                               \
  void download(int dev, void *dst, const void *src, uint64_t bytes);                       \
  /* Same-device copy. */                                                                   \
  void copy(int dev, void *dst, const void *src, uint64_t bytes);                           \
  /* Copy between two devices of this backend. */                                           \
  void copy_peer(int dst_dev, void *dst, int src_dev, const void *src, uint64_t bytes);     \
  /* dst[i] = value for i < n. */                                                           \
  void fill(int dev, float *dst, float value, uint64_t n);                                  \
  /* Wait for all queued work; report asynchronous errors. */                               \
  void synchronize(int dev);                                                                \
  /* Return pooled memory to the system. */                                                 \
  void trim(int dev);                                                                       \
  /* Pool and device memory figures (0 where not applicable). */                            \
  void memory_info(int dev, uint64_t *pooled, uint64_t *free_bytes, uint64_t *total_bytes);

namespace tlrt {
namespace stub {
TLRT_MEMORY_BACKEND_API
}
namespace cuda {
TLRT_MEMORY_BACKEND_API
}
}  // namespace tlrt
