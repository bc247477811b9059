/* libtorchlean_rt: buffers.
 *
 * A tlrt_buffer is an opaque, reference-counted handle to a contiguous array of values of one
 * element type on one device: float32 (what every op computes on), or int32 / int64 (indices).
 * Every op's float32 argument rejects an integer buffer with TLRT_ERR_DTYPE naming the argument;
 * the buffer calls below (size, device, copy, transfer, retain, free, release, DLPack) take any
 * type. Every op returns a fresh buffer; buffers are never modified in place (except by the
 * optimizer steps, which say so). Handles are thread-safe to share for reading; the reference
 * count is atomic. Sizes are element counts (uint64_t); at most TLRT_MAX_ELEMENTS elements.
 *
 * Lifetime: a new handle holds one reference. tlrt_buffer_retain adds one, tlrt_buffer_free drops
 * one and frees the handle and payload at zero. tlrt_buffer_release_storage frees the payload now
 * while the handle lives on: any later use of the buffer, other than retain/free/release_storage/
 * tlrt_buffer_is_released, fails with TLRT_ERR_RELEASED. Releasing storage while another thread
 * uses the same buffer is a data race (the caller orders them).
 *
 * Misuse is detected: a handle is a token, not an address, and the library never reads through a
 * handle it did not find live. A handle whose buffer has been freed (the last reference dropped),
 * and any value that never was a handle, fails every call with TLRT_ERR_STALE_HANDLE, even after
 * the library has created new buffers (a new buffer never reuses an old handle's value, unless one
 * internal slot is reused 2^31 times). tlrt_buffer_free of such a handle does nothing;
 * tlrt_buffer_free_checked reports it. Using a handle on one thread while another thread drops its
 * last reference remains a data race. */
#ifndef TLRT_BUFFER_H
#define TLRT_BUFFER_H

#include "tlrt_runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tlrt_buffer tlrt_buffer;

/* Element types. Append-only. */
typedef enum tlrt_dtype {
  TLRT_DTYPE_F32 = 0, /* IEEE binary32 */
  TLRT_DTYPE_I32 = 1, /* two's complement 32-bit integer */
  TLRT_DTYPE_I64 = 2  /* two's complement 64-bit integer */
} tlrt_dtype;

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

/* Integer buffers: upload n int32 / int64 values to a new buffer of that type; download exactly
 * n values (n must equal the size) of a buffer of that type. Numeric class: exact.
 * Errors: as tlrt_buffer_from_f32 / tlrt_buffer_to_f32, plus TLRT_ERR_DTYPE (download from a
 * buffer of another type). tlrt_buffer_to_f32 / _f64 / _bytes of an integer buffer fail with
 * TLRT_ERR_DTYPE. */
TLRT_API tlrt_status tlrt_buffer_from_i32(tlrt_device device, const int32_t *data, uint64_t n,
                                          tlrt_buffer **out);
TLRT_API tlrt_status tlrt_buffer_from_i64(tlrt_device device, const int64_t *data, uint64_t n,
                                          tlrt_buffer **out);
TLRT_API tlrt_status tlrt_buffer_to_i32(const tlrt_buffer *buffer, int32_t *dst, uint64_t n);
TLRT_API tlrt_status tlrt_buffer_to_i64(const tlrt_buffer *buffer, int64_t *dst, uint64_t n);

/* New buffer of n zeros of a type (+0.0f, or 0).
 * Errors: as tlrt_buffer_zeros, plus TLRT_ERR_INVALID_ARGUMENT (unknown dtype). */
TLRT_API tlrt_status tlrt_buffer_zeros_of(tlrt_device device, tlrt_dtype dtype, uint64_t n,
                                          tlrt_buffer **out);

/* *dtype = the element type of a buffer (also of a released one).
 * Errors: TLRT_ERR_NULL_ARGUMENT; TLRT_ERR_STALE_HANDLE. */
TLRT_API tlrt_status tlrt_buffer_dtype(const tlrt_buffer *buffer, tlrt_dtype *dtype);

/* Element count / device of a buffer.
 * Errors: TLRT_ERR_NULL_ARGUMENT; TLRT_ERR_RELEASED (size; the device of a released buffer is
 * still reported). */
TLRT_API tlrt_status tlrt_buffer_size(const tlrt_buffer *buffer, uint64_t *size);
TLRT_API tlrt_status tlrt_buffer_device(const tlrt_buffer *buffer, tlrt_device *device);

/* New buffer with the same values and type on `device` (a copy even when the device is the same).
 * CPU<->CUDA and CUDA<->CUDA (across ordinals) are supported. Numeric class: exact.
 * Errors: TLRT_ERR_NULL_ARGUMENT; TLRT_ERR_RELEASED; the device errors of tlrt_buffer_from_f32. */
TLRT_API tlrt_status tlrt_buffer_to_device(const tlrt_buffer *buffer, tlrt_device device,
                                           tlrt_buffer **out);

/* New buffer with the same values on the same device. Errors: as tlrt_buffer_to_device. */
TLRT_API tlrt_status tlrt_buffer_copy(const tlrt_buffer *buffer, tlrt_buffer **out);

/* Add one reference. Errors: TLRT_ERR_NULL_ARGUMENT; TLRT_ERR_STALE_HANDLE. (Retaining a released
 * buffer is allowed.) */
TLRT_API tlrt_status tlrt_buffer_retain(tlrt_buffer *buffer);

/* Drop one reference; at zero the payload and the handle are freed. NULL is a no-op. Never fails,
 * never blocks on the device (CUDA frees are stream-ordered; the one exception: a buffer imported
 * from a CUDA DLPack tensor waits for the library's queued work before handing the memory back to
 * its producer, tlrt_dlpack.h), callable from any thread (such as a garbage collector's
 * finalizer). */
TLRT_API void tlrt_buffer_free(tlrt_buffer *buffer);

/* tlrt_buffer_free that reports misuse: TLRT_OK when a reference was dropped or buffer is NULL;
 * TLRT_ERR_STALE_HANDLE (and nothing done) when buffer is not a live handle: freed already (a
 * double free), or never a handle. */
TLRT_API tlrt_status tlrt_buffer_free_checked(tlrt_buffer *buffer);

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
