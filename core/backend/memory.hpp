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
     the current stream). */                                                                \
  void dealloc(int dev, void *p, uint64_t bytes) noexcept;                                  \
  /* Host -> device; src may be reused when this returns. */                                \
  void upload(int dev, void *dst, const void *src, uint64_t bytes);                         \
  /* Host -> device for small per-call host data (index lists): src is copied to pinned    \
     staging before this returns (src may be reused), the transfer is queued on the        \
     current stream; the host never waits for the device (CUDA: a pinned ring whose       \
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
  void memory_info(int dev, uint64_t *pooled, uint64_t *free_bytes, uint64_t *total_bytes);  \
  /* The device's current stream (abi/tlrt_stream.h): the host's as set, else the library's \
     own (CPU: throws TLRT_ERR_UNSUPPORTED; core never asks). */                           \
  void *stream_get(int dev);                                                                \
  /* Makes s (NULL or the library's own: the library's own) the current stream; the new    \
     stream waits on the device for all work queued on the previous one. Throws            \
     TLRT_ERR_INVALID_ARGUMENT for a stream of another device (only the driver can tell),   \
     TLRT_ERR_CUDA for a handle the runtime rejects (CPU: TLRT_ERR_UNSUPPORTED). */         \
  void stream_set(int dev, void *s);                                                        \
  /* cudaEventRecord(event, current stream) (CPU: TLRT_ERR_UNSUPPORTED). */                 \
  void stream_record_event(int dev, void *event);                                           \
  /* The current stream waits for event's last record (CPU: TLRT_ERR_UNSUPPORTED). */      \
  void stream_wait_event(int dev, void *event);                                             \
  /* Makes host_stream (non-NULL; a stream handle, cudaStreamLegacy or cudaStreamPerThread) \
     wait on the device for all work queued so far on dev, through an internal event; no   \
     host wait; nothing queued when host_stream is the current stream. For the producer    \
     side of DLPack's stream argument. CPU: returns (work is complete when a call returns). */ \
  void wait_for_library(int dev, void *host_stream);

namespace tlrt {
namespace stub {
TLRT_MEMORY_BACKEND_API
}
namespace cuda {
TLRT_MEMORY_BACKEND_API
}
}  // namespace tlrt
