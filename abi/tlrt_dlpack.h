/* libtorchlean_rt: zero-copy exchange with other tensor libraries through DLPack.
 *
 * DLPack (https://dmlc.github.io/dlpack/latest/) is the C struct every array library exchanges
 * tensors with (PyTorch, JAX, CuPy, NumPy, CUDA.jl, cudarc users, ...). Both directions share the
 * storage; nothing is copied:
 *  - export: tlrt_buffer_to_dlpack_versioned / tlrt_buffer_to_dlpack give a consumer a managed
 *    tensor over the buffer's payload; the tensor holds one reference to the buffer, which its
 *    deleter drops;
 *  - import: tlrt_buffer_from_dlpack_versioned / tlrt_buffer_from_dlpack wrap a producer's tensor
 *    in a new buffer; the buffer owns the managed tensor and calls its deleter when the buffer is
 *    freed or its storage released.
 * Both the versioned struct of DLPack 1.x (DLManagedTensorVersioned) and the legacy struct
 * (DLManagedTensor, DLPack 0.x) are supported. The managed tensors are passed as void * so that
 * this header works with or without the host's own dlpack.h; the struct definitions below follow
 * the DLPack 1.0 specification and are used only when no dlpack.h has been included before
 * (they define DLPACK_DLPACK_H_, so a dlpack.h included later is skipped).
 *
 * Types and devices: float32 (kDLFloat, 32 bits), int32 and int64 (kDLInt), one lane; kDLCPU and
 * kDLCUDAHost (pinned host memory) are the CPU device, kDLCUDA with device_id k is
 * TLRT_DEVICE_CUDA(k). A buffer exports as a tensor of the caller's shape (dims, whose product
 * must be the size; NULL for one dimension of `size` elements) with explicit compact row-major
 * strides.
 *
 * Ordering: the library's CUDA work is asynchronous. Before a consumer on another stream reads an
 * exported CUDA tensor it must be ordered after the library's queued work (tlrt_stream.h:
 * tlrt_stream_wait_for_library, or tlrt_synchronize); before the library reads an imported
 * tensor, the producer's work must be ordered before the library's stream (the producer's
 * __dlpack__(stream=...) in Python, or tlrt_stream_wait_event). Buffers are immutable (but for
 * the optimizer steps, which write their parameters in place): a consumer must not write through
 * an exported tensor while the library may read the buffer; the exported versioned tensor is not
 * marked read-only because the optimizer may legitimately share parameters with the host. */
#ifndef TLRT_DLPACK_H
#define TLRT_DLPACK_H

#include "tlrt_buffer.h"

#ifndef DLPACK_DLPACK_H_
#define DLPACK_DLPACK_H_
#define DLPACK_MAJOR_VERSION 1
#define DLPACK_MINOR_VERSION 0
#define DLPACK_FLAG_BITMASK_READ_ONLY (1UL << 0UL)
#define DLPACK_FLAG_BITMASK_IS_COPIED (1UL << 1UL)

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  uint32_t major;
  uint32_t minor;
} DLPackVersion;

typedef enum {
  kDLCPU = 1,
  kDLCUDA = 2,
  kDLCUDAHost = 3,
  kDLOpenCL = 4,
  kDLVulkan = 7,
  kDLMetal = 8,
  kDLVPI = 9,
  kDLROCM = 10,
  kDLROCMHost = 11,
  kDLExtDev = 12,
  kDLCUDAManaged = 13,
  kDLOneAPI = 14,
  kDLWebGPU = 15,
  kDLHexagon = 16,
  kDLMAIA = 17
} DLDeviceType;

typedef struct {
  DLDeviceType device_type;
  int32_t device_id;
} DLDevice;

typedef enum {
  kDLInt = 0U,
  kDLUInt = 1U,
  kDLFloat = 2U,
  kDLOpaqueHandle = 3U,
  kDLBfloat = 4U,
  kDLComplex = 5U,
  kDLBool = 6U
} DLDataTypeCode;

typedef struct {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
} DLDataType;

typedef struct {
  void *data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t *shape;
  int64_t *strides;
  uint64_t byte_offset;
} DLTensor;

typedef struct DLManagedTensor {
  DLTensor dl_tensor;
  void *manager_ctx;
  void (*deleter)(struct DLManagedTensor *self);
} DLManagedTensor;

typedef struct DLManagedTensorVersioned {
  DLPackVersion version;
  void *manager_ctx;
  void (*deleter)(struct DLManagedTensorVersioned *self);
  uint64_t flags;
  DLTensor dl_tensor;
} DLManagedTensorVersioned;

#ifdef __cplusplus
}
#endif
#endif /* DLPACK_DLPACK_H_ */

#ifdef __cplusplus
extern "C" {
#endif

/* Largest number of dimensions of an exported or imported tensor. */
#define TLRT_DLPACK_MAX_NDIM 32u

/* Export: *out = a new DLManagedTensorVersioned * (DLPack version 1.0, flags 0) / DLManagedTensor *
 * whose dl_tensor shares the buffer's payload, with shape dims[0..ndim) (dims NULL and ndim 1:
 * one dimension of the buffer's size; ndim 0: a scalar, for a buffer of one element) and compact
 * row-major strides. The tensor holds a reference to the buffer: the consumer calls its deleter
 * exactly once (any thread), which drops that reference. An empty buffer exports a NULL data
 * pointer. Numeric class: exact (no copy).
 * Errors: TLRT_ERR_NULL_ARGUMENT (buffer, out, dims with ndim > 1); TLRT_ERR_STALE_HANDLE;
 * TLRT_ERR_RELEASED; TLRT_ERR_INVALID_ARGUMENT (ndim > TLRT_DLPACK_MAX_NDIM, a dim above
 * INT64_MAX); TLRT_ERR_SHAPE (product of dims != size); TLRT_ERR_OUT_OF_MEMORY. */
TLRT_API tlrt_status tlrt_buffer_to_dlpack_versioned(const tlrt_buffer *buffer,
                                                     const uint64_t *dims, uint32_t ndim,
                                                     void **out);
TLRT_API tlrt_status tlrt_buffer_to_dlpack(const tlrt_buffer *buffer, const uint64_t *dims,
                                           uint32_t ndim, void **out);

/* Import: *out = a new buffer (of the tensor's element count, flattened in row-major order) over
 * the payload of `managed`, a DLManagedTensorVersioned * (major version 1) / DLManagedTensor *.
 * On success the buffer owns `managed` and calls its deleter once, when the buffer is freed or its
 * storage released; for a CUDA tensor, after waiting for the work the library has queued on the
 * device (which may still read it), so that the producer may reuse the memory at once: freeing an
 * imported CUDA buffer blocks the host that long (the one exception to tlrt_buffer_free's "never
 * blocks"). On failure the caller keeps ownership (the deleter is not called) and nothing
 * else is allocated. Accepted: dtype float32, int32 or int64 with one lane; a device this process
 * can use (CPU, CUDA host memory, CUDA ordinal k); a compact row-major layout (strides NULL, or
 * equal to the row-major strides wherever a dimension has more than one element); data +
 * byte_offset aligned to 16 bytes (the library's vector loads). Numeric class: exact (no copy).
 * Errors: TLRT_ERR_NULL_ARGUMENT (managed, out; a NULL data pointer or shape with elements);
 * TLRT_ERR_UNSUPPORTED (another major version, data type, device type, strided layout,
 * misaligned data, a read-only tensor (DLPACK_FLAG_BITMASK_READ_ONLY: the optimizer steps write
 * in place)); TLRT_ERR_INVALID_ARGUMENT (a negative dim, ndim < 0 or > TLRT_DLPACK_MAX_NDIM);
 * TLRT_ERR_OVERFLOW (more than TLRT_MAX_ELEMENTS elements); TLRT_ERR_BACKEND_UNAVAILABLE,
 * TLRT_ERR_NO_DEVICE (a CUDA tensor in a build without CUDA / with no such device);
 * TLRT_ERR_OUT_OF_MEMORY. */
TLRT_API tlrt_status tlrt_buffer_from_dlpack_versioned(void *managed, tlrt_buffer **out);
TLRT_API tlrt_status tlrt_buffer_from_dlpack(void *managed, tlrt_buffer **out);

#ifdef __cplusplus
}
#endif

#endif /* TLRT_DLPACK_H */
