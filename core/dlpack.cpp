// DLPack exchange (abi/tlrt_dlpack.h): a buffer exported as a managed tensor that holds one
// reference to it, and a producer's managed tensor wrapped as a borrowed buffer that calls the
// producer's deleter when it is freed. One template serves the versioned and the legacy struct.
#include <cstring>
#include <new>
#include <string>
#include <type_traits>

#include "abi/tlrt_dlpack.h"
#include "core/buffer.hpp"
#include "core/error.hpp"

namespace tlrt {
namespace {

using ull = unsigned long long;

// The block behind one exported tensor: the managed struct, the reference it holds, its shape
// and strides.
template <class M>
struct Export {
  M managed;
  tlrt_buffer *ref;
  int64_t shape[TLRT_DLPACK_MAX_NDIM];
  int64_t strides[TLRT_DLPACK_MAX_NDIM];
};

template <class M>
void delete_export(M *self) {
  Export<M> *e = static_cast<Export<M> *>(self->manager_ctx);
  tlrt_buffer_free(e->ref);
  delete e;
}

DLDataType dl_type(tlrt_dtype t) {
  DLDataType d;
  d.code = t == TLRT_DTYPE_F32 ? (uint8_t)kDLFloat : (uint8_t)kDLInt;
  d.bits = (uint8_t)(8 * dtype_size(t));
  d.lanes = 1;
  return d;
}

template <class M>
void to_dlpack(const tlrt_buffer *buffer, const uint64_t *dims, uint32_t ndim, void **out) {
  clear_out(out, "out");
  Buffer &b = const_cast<Buffer &>(input_any(buffer, "buffer"));
  if (ndim > TLRT_DLPACK_MAX_NDIM)
    fail(TLRT_ERR_INVALID_ARGUMENT, "argument ndim = %u exceeds TLRT_DLPACK_MAX_NDIM (%u)", ndim,
         TLRT_DLPACK_MAX_NDIM);
  if (dims == nullptr && ndim > 1) fail(TLRT_ERR_NULL_ARGUMENT, "argument dims is NULL");
  uint64_t shape[TLRT_DLPACK_MAX_NDIM];
  if (dims == nullptr) {
    if (ndim == 1) shape[0] = b.size;
  } else {
    std::memcpy(shape, dims, ndim * sizeof(uint64_t));
  }
  uint64_t count = 1;
  bool fits = true;
  for (uint32_t i = 0; i < ndim; ++i) {
    if (shape[i] > (uint64_t)INT64_MAX)
      fail(TLRT_ERR_INVALID_ARGUMENT, "argument dims[%u] = %llu exceeds INT64_MAX", i,
           (ull)shape[i]);
    if (shape[i] != 0 && count > UINT64_MAX / shape[i]) fits = false;
    count *= shape[i];
  }
  bool zero = false;
  for (uint32_t i = 0; i < ndim; ++i) zero = zero || shape[i] == 0;
  if (zero) count = 0, fits = true;
  if (!fits || count != b.size)
    fail(TLRT_ERR_SHAPE, "argument dims: %s elements, but the buffer has %llu",
         fits ? std::to_string(count).c_str() : "more than 2^64", (ull)b.size);
  injected_allocation_failure("a DLPack tensor");
  Export<M> *e = new (std::nothrow) Export<M>();
  if (e == nullptr) fail(TLRT_ERR_OUT_OF_MEMORY, "out of host memory allocating a DLPack tensor");
  int64_t stride = 1;
  for (uint32_t i = ndim; i-- > 0;) {
    e->shape[i] = (int64_t)shape[i];
    e->strides[i] = stride;
    stride *= shape[i] > 1 ? (int64_t)shape[i] : 1;
  }
  M &m = e->managed;
  DLTensor &t = m.dl_tensor;
  t.data = b.data;
  t.device.device_type = b.dev.cuda ? kDLCUDA : kDLCPU;
  t.device.device_id = b.dev.cuda ? b.dev.ordinal : 0;
  t.ndim = (int32_t)ndim;
  t.dtype = dl_type(b.dtype);
  t.shape = e->shape;
  t.strides = e->strides;
  t.byte_offset = 0;
  m.manager_ctx = e;
  m.deleter = delete_export<M>;
  if constexpr (std::is_same<M, DLManagedTensorVersioned>::value) {
    m.version.major = DLPACK_MAJOR_VERSION;
    m.version.minor = DLPACK_MINOR_VERSION;
    m.flags = 0;
  }
  b.refs.fetch_add(1, std::memory_order_relaxed);
  e->ref = const_cast<tlrt_buffer *>(buffer);
  *out = &m;
}

template <class M>
void call_deleter(void *owner) {
  M *m = static_cast<M *>(owner);
  if (m->deleter != nullptr) m->deleter(m);
}

tlrt_dtype from_dl_type(DLDataType d) {
  if (d.lanes == 1 && d.code == kDLFloat && d.bits == 32) return TLRT_DTYPE_F32;
  if (d.lanes == 1 && d.code == kDLInt && d.bits == 32) return TLRT_DTYPE_I32;
  if (d.lanes == 1 && d.code == kDLInt && d.bits == 64) return TLRT_DTYPE_I64;
  fail(TLRT_ERR_UNSUPPORTED, "argument managed: data type (code %u, %u bits, %u lanes) is not "
       "float32, int32 or int64", (unsigned)d.code, (unsigned)d.bits, (unsigned)d.lanes);
}

Dev from_dl_device(DLDevice d) {
  switch (d.device_type) {
    case kDLCPU:
    case kDLCUDAHost:
      return resolve_device(TLRT_DEVICE_CPU, "managed");
    case kDLCUDA:
      if (d.device_id < 0 || d.device_id > 0xFFFF)
        fail(TLRT_ERR_INVALID_ARGUMENT, "argument managed: CUDA device_id %d is not an ordinal",
             (int)d.device_id);
      return resolve_device(TLRT_DEVICE_CUDA((uint32_t)d.device_id), "managed");
    default:
      fail(TLRT_ERR_UNSUPPORTED, "argument managed: DLPack device type %d is not served (CPU, "
           "CUDA host and CUDA are)", (int)d.device_type);
  }
}

template <class M>
void from_dlpack(void *managed, tlrt_buffer **out) {
  clear_out(out, "out");
  if (managed == nullptr) fail(TLRT_ERR_NULL_ARGUMENT, "argument managed is NULL");
  M *m = static_cast<M *>(managed);
  if constexpr (std::is_same<M, DLManagedTensorVersioned>::value) {
    if (m->version.major != 1)
      fail(TLRT_ERR_UNSUPPORTED, "argument managed: DLPack version %u.%u; this library reads "
           "major version 1", m->version.major, m->version.minor);
    if (m->flags & DLPACK_FLAG_BITMASK_READ_ONLY)
      fail(TLRT_ERR_UNSUPPORTED, "argument managed is read-only (the optimizer steps write "
           "buffers in place); pass a writable tensor or a copy");
  }
  const DLTensor &t = m->dl_tensor;
  if (t.ndim < 0 || (uint32_t)t.ndim > TLRT_DLPACK_MAX_NDIM)
    fail(TLRT_ERR_INVALID_ARGUMENT, "argument managed: ndim = %d is not in [0, %u]", (int)t.ndim,
         TLRT_DLPACK_MAX_NDIM);
  if (t.ndim > 0 && t.shape == nullptr)
    fail(TLRT_ERR_NULL_ARGUMENT, "argument managed: shape is NULL with ndim = %d", (int)t.ndim);
  uint64_t count = 1;
  bool fits = true;
  for (int32_t i = 0; i < t.ndim; ++i) {
    if (t.shape[i] < 0)
      fail(TLRT_ERR_INVALID_ARGUMENT, "argument managed: shape[%d] = %lld is negative", (int)i,
           (long long)t.shape[i]);
    const uint64_t d = (uint64_t)t.shape[i];
    if (d != 0 && count > TLRT_MAX_ELEMENTS / d) fits = false;
    count *= d;
  }
  for (int32_t i = 0; i < t.ndim; ++i)
    if (t.shape[i] == 0) count = 0, fits = true;
  if (!fits || count > TLRT_MAX_ELEMENTS)
    fail(TLRT_ERR_OVERFLOW, "argument managed: more than TLRT_MAX_ELEMENTS (2^60) elements");
  const tlrt_dtype dtype = from_dl_type(t.dtype);
  if (count > 1 && t.strides != nullptr) {
    int64_t want = 1;
    for (int32_t i = t.ndim; i-- > 0;) {
      if (t.shape[i] > 1 && t.strides[i] != want)
        fail(TLRT_ERR_UNSUPPORTED, "argument managed: strides[%d] = %lld, a compact row-major "
             "layout has %lld (copy the tensor to a contiguous one first)", (int)i,
             (long long)t.strides[i], (long long)want);
      want *= t.shape[i];
    }
  }
  char *data = nullptr;
  if (count != 0) {
    if (t.data == nullptr)
      fail(TLRT_ERR_NULL_ARGUMENT, "argument managed: data is NULL with %llu elements", (ull)count);
    data = static_cast<char *>(t.data) + t.byte_offset;
    if (reinterpret_cast<uintptr_t>(data) % 16 != 0)
      fail(TLRT_ERR_UNSUPPORTED, "argument managed: data + byte_offset = %p is not 16-byte "
           "aligned (copy the tensor first)", (void *)data);
  }
  const Dev dev = from_dl_device(t.device);
  *out = borrowed_buffer(dev, count, dtype, data, call_deleter<M>, m).release();
}

}  // namespace
}  // namespace tlrt

using namespace tlrt;

extern "C" {

TLRT_API tlrt_status tlrt_buffer_to_dlpack_versioned(const tlrt_buffer *buffer,
                                                     const uint64_t *dims, uint32_t ndim,
                                                     void **out) {
  return guarded(__func__, [&] { to_dlpack<DLManagedTensorVersioned>(buffer, dims, ndim, out); });
}

TLRT_API tlrt_status tlrt_buffer_to_dlpack(const tlrt_buffer *buffer, const uint64_t *dims,
                                           uint32_t ndim, void **out) {
  return guarded(__func__, [&] { to_dlpack<DLManagedTensor>(buffer, dims, ndim, out); });
}

TLRT_API tlrt_status tlrt_buffer_from_dlpack_versioned(void *managed, tlrt_buffer **out) {
  return guarded(__func__, [&] { from_dlpack<DLManagedTensorVersioned>(managed, out); });
}

TLRT_API tlrt_status tlrt_buffer_from_dlpack(void *managed, tlrt_buffer **out) {
  return guarded(__func__, [&] { from_dlpack<DLManagedTensor>(managed, out); });
}

}  // extern "C"
