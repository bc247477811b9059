/* libtorchlean_rt: float32 buffers.
 *
 * A tlrt_buffer is an opaque, reference-counted handle to a contiguous array of float32 values on
 * one device. Every op returns a fresh buffer; buffers are never modified in place (except by the
 * optimizer steps, which say so). Handles are thread-safe to share for reading; the reference
 * count is atomic. Sizes are element counts (uint64_t); at most TLRT_MAX_ELEMENTS elements.
 *
 * Lifetime: a new handle holds one reference. tlrt_buffer_retain adds one, tlrt_buffer_free drops
 * one and frees the handle and payload at zero. tlrt_buffer_release_storage frees the payload now
 * while the handle lives on: any later use of the buffer, other than retain/free/release_storage/
 * tlrt_buffer_is_released, fails with TLRT_ERR_RELEASED. Releasing storage while another thread
 * uses the same buffer is a data race (the caller orders them). */
#ifndef TLRT_BUFFER_H
#define TLRT_BUFFER_H

#include "tlrt_runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tlrt_buffer tlrt_buffer;

/* Largest element count of one buffer: 2^60 (so byte sizes never overflow 64 bits). */
#define TLRT_MAX_ELEMENTS (((uint64_t)1) << 60)

/* Upload n float32 values from host memory to a new buffer on `device`. data may be NULL only
 * when n == 0. The values are copied bit for bit (NaN payloads included) before the call returns,
 * so data may be reused at once. Numeric class: exact.
 * Errors: TLRT_ERR_NULL_ARGUMENT (data with n > 0, out); TLRT_ERR_OVERFLOW (n > TLRT_MAX_ELEMENTS);
 * TLRT_ERR_INVALID_ARGUMENT (malformed device); TLRT_ERR_BACKEND_UNAVAILABLE; TLRT_ERR_NO_DEVICE;
 * TLRT_ERR_OUT_OF_MEMORY; TLRT_ERR_CUDA; TLRT_ERR_DEVICE_LOST. */
TLRT_API tlrt_status tlrt_buffer_from_f32(tlrt_device device, const float *data, uint64_t n,
                                          tlrt_buffer **out);

/* Upload n float64 values (Lean's FloatArray, Julia's Float64) rounded to the nearest float32
 * (IEEE round-to-nearest-even; values beyond the float32 range become +-inf, NaN stays NaN).
 * Errors: as tlrt_buffer_from_f32. */
TLRT_API tlrt_status tlrt_buffer_from_f64(tlrt_device device, const double *data, uint64_t n,
                                          tlrt_buffer **out);

/* Upload nbytes bytes holding nbytes/4 float32 values in little-endian IEEE binary32 order (the
 * checkpoint format; any alignment of bytes is fine).
 * Errors: as tlrt_buffer_from_f32, plus TLRT_ERR_SHAPE if nbytes is not a multiple of 4. */
TLRT_API tlrt_status tlrt_buffer_from_bytes(tlrt_device device, const uint8_t *bytes,
                                            uint64_t nbytes, tlrt_buffer **out);

/* New buffer of n zeros (+0.0f) / of n copies of value rounded once to float32 (value beyond
 * the float32 range gives +-inf, NaN gives NaN). Errors: as tlrt_buffer_from_f32. */
TLRT_API tlrt_status tlrt_buffer_zeros(tlrt_device device, uint64_t n, tlrt_buffer **out);
TLRT_API tlrt_status tlrt_buffer_full(tlrt_device device, uint64_t n, double value,
                                      tlrt_buffer **out);

/* Download the buffer into host memory: dst receives exactly n values, and n must equal the
 * buffer's size (pass the size from tlrt_buffer_size). Waits for pending device work on the
 * buffer's device. The f64 variant widens exactly. dst may be NULL only when n == 0.
 * Errors: TLRT_ERR_NULL_ARGUMENT (buffer, dst); TLRT_ERR_SHAPE (n != size); TLRT_ERR_RELEASED;
 * TLRT_ERR_CUDA; TLRT_ERR_DEVICE_LOST. */
TLRT_API tlrt_status tlrt_buffer_to_f32(const tlrt_buffer *buffer, float *dst, uint64_t n);
TLRT_API tlrt_status tlrt_buffer_to_f64(const tlrt_buffer *buffer, double *dst, uint64_t n);

/* Download as little-endian float32 bytes; nbytes must equal 4 * size.
 * Errors: as tlrt_buffer_to_f32 (TLRT_ERR_SHAPE when nbytes != 4 * size). */
TLRT_API tlrt_status tlrt_buffer_to_bytes(const tlrt_buffer *buffer, uint8_t *dst,
                                          uint64_t nbytes);

/* Element count / device of a buffer.
 * Errors: TLRT_ERR_NULL_ARGUMENT; TLRT_ERR_RELEASED (size; the device of a released buffer is
 * still reported). */
TLRT_API tlrt_status tlrt_buffer_size(const tlrt_buffer *buffer, uint64_t *size);
TLRT_API tlrt_status tlrt_buffer_device(const tlrt_buffer *buffer, tlrt_device *device);

/* New buffer with the same values on `device` (a copy even when the device is the same).
 * CPU<->CUDA and CUDA<->CUDA (across ordinals) are supported. Numeric class: exact.
 * Errors: TLRT_ERR_NULL_ARGUMENT; TLRT_ERR_RELEASED; the device errors of tlrt_buffer_from_f32. */
TLRT_API tlrt_status tlrt_buffer_to_device(const tlrt_buffer *buffer, tlrt_device device,
                                           tlrt_buffer **out);

/* New buffer with the same values on the same device. Errors: as tlrt_buffer_to_device. */
TLRT_API tlrt_status tlrt_buffer_copy(const tlrt_buffer *buffer, tlrt_buffer **out);

/* Add one reference. Errors: TLRT_ERR_NULL_ARGUMENT. (Retaining a released buffer is allowed.) */
TLRT_API tlrt_status tlrt_buffer_retain(tlrt_buffer *buffer);

/* Drop one reference; at zero the payload and the handle are freed. NULL is a no-op. Never fails,
 * never blocks on the device (CUDA frees are stream-ordered), callable from any thread (such as a
 * garbage collector's finalizer). */
TLRT_API void tlrt_buffer_free(tlrt_buffer *buffer);

/* Free the payload now (upstream's `release`): afterwards the buffer reports TLRT_ERR_RELEASED on
 * every use. Idempotent: *freed (optional, may be NULL) is set to true if this call freed the
 * payload and false if it was already released. Errors: TLRT_ERR_NULL_ARGUMENT (buffer). */
TLRT_API tlrt_status tlrt_buffer_release_storage(tlrt_buffer *buffer, bool *freed);

/* *released = whether the storage has been released. Errors: TLRT_ERR_NULL_ARGUMENT. */
TLRT_API tlrt_status tlrt_buffer_is_released(const tlrt_buffer *buffer, bool *released);

#ifdef __cplusplus
}
#endif

#endif /* TLRT_BUFFER_H */
