// DLPack exchange (abi/tlrt_dlpack.h): export shares the payload and holds a reference until the
// deleter runs; import wraps a producer's tensor without a copy and calls its deleter exactly once
// when the buffer goes (freed or storage released); both structs (versioned and legacy); every
// rejected tensor leaves ownership with the caller (the deleter is not called) and leaks nothing.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "bad_input.hpp"

namespace {

using th::Buf;

// A producer's tensor: 16-byte aligned host memory, a deleter that counts its calls.
int g_deleted = 0;

template <class M>
struct Producer {
  M m{};
  int64_t shape[4] = {2, 3, 1, 1};
  int64_t strides[4] = {3, 1, 1, 1};
  void *mem = nullptr;
};

template <class M>
void producer_deleter(M *self) {
  auto *p = static_cast<Producer<M> *>(self->manager_ctx);
  std::free(p->mem);
  delete p;
  ++g_deleted;
}

template <class M>
Producer<M> *make_producer(DLDataType type, int32_t ndim = 2) {
  auto *p = new Producer<M>();
  p->mem = std::aligned_alloc(64, 256);
  for (int i = 0; i < 6; ++i) {
    if (type.code == kDLFloat) static_cast<float *>(p->mem)[i] = 0.5f * (float)i;
    else if (type.bits == 64) static_cast<int64_t *>(p->mem)[i] = -(int64_t)i * ((int64_t)1 << 35);
    else static_cast<int32_t *>(p->mem)[i] = 7 * i;
  }
  DLTensor &t = p->m.dl_tensor;
  t.data = p->mem;
  t.device.device_type = kDLCPU;
  t.device.device_id = 0;
  t.ndim = ndim;
  t.dtype = type;
  t.shape = p->shape;
  t.strides = p->strides;
  t.byte_offset = 0;
  p->m.manager_ctx = p;
  p->m.deleter = producer_deleter<M>;
  if constexpr (std::is_same<M, DLManagedTensorVersioned>::value) {
    p->m.version.major = 1;
    p->m.version.minor = 0;
    p->m.flags = 0;
  }
  return p;
}

const DLDataType kF32 = {kDLFloat, 32, 1}, kI32 = {kDLInt, 32, 1}, kI64 = {kDLInt, 64, 1};

void test_export() {
  Buf b(th::upload({1, 2, 3, 4, 5, 6}));
  const uint64_t live = th::stats().live_handles;
  void *vm = nullptr;
  const uint64_t dims[2] = {2, 3};
  TH_OK(tlrt_buffer_to_dlpack_versioned(b.get(), dims, 2, &vm));
  auto *m = static_cast<DLManagedTensorVersioned *>(vm);
  TH_CHECK(m->version.major == 1 && m->flags == 0 && m->deleter != nullptr);
  const DLTensor &t = m->dl_tensor;
  TH_CHECK(t.ndim == 2 && t.shape[0] == 2 && t.shape[1] == 3 && t.strides[0] == 3 &&
           t.strides[1] == 1 && t.byte_offset == 0);
  TH_CHECK(t.device.device_type == kDLCPU && t.dtype.code == kDLFloat && t.dtype.bits == 32 &&
           t.dtype.lanes == 1);
  TH_CHECK(static_cast<const float *>(t.data)[5] == 6.0f);
  // The tensor keeps the buffer alive after the host's own reference goes.
  b = Buf();
  TH_CHECK(th::stats().live_handles == live);
  TH_CHECK(static_cast<const float *>(t.data)[0] == 1.0f);
  m->deleter(m);
  TH_CHECK(th::stats().live_handles == live - 1);

  // Legacy struct, default shape (one dimension of the size), and an int64 buffer.
  const int64_t iv[3] = {INT64_MIN, 0, INT64_MAX};
  Buf ib;
  TH_OK(tlrt_buffer_from_i64(TLRT_DEVICE_CPU, iv, 3, ib.out()));
  TH_OK(tlrt_buffer_to_dlpack(ib.get(), nullptr, 1, &vm));
  auto *lm = static_cast<DLManagedTensor *>(vm);
  TH_CHECK(lm->dl_tensor.ndim == 1 && lm->dl_tensor.shape[0] == 3);
  TH_CHECK(lm->dl_tensor.dtype.code == kDLInt && lm->dl_tensor.dtype.bits == 64);
  TH_CHECK(static_cast<const int64_t *>(lm->dl_tensor.data)[0] == INT64_MIN);
  lm->deleter(lm);

  // A scalar (ndim 0) of a one-element buffer; an empty buffer's tensor.
  Buf one(th::upload({9}));
  TH_OK(tlrt_buffer_to_dlpack_versioned(one.get(), nullptr, 0, &vm));
  m = static_cast<DLManagedTensorVersioned *>(vm);
  TH_CHECK(m->dl_tensor.ndim == 0);
  m->deleter(m);
  Buf empty(th::upload({}));
  const uint64_t d03[2] = {0, 3};
  TH_OK(tlrt_buffer_to_dlpack_versioned(empty.get(), d03, 2, &vm));
  m = static_cast<DLManagedTensorVersioned *>(vm);
  TH_CHECK(m->dl_tensor.data == nullptr && m->dl_tensor.shape[0] == 0);
  m->deleter(m);
}

template <class M, class Import, class Export>
void test_import(Import import, Export exprt) {
  // float32, int32, int64: the buffer's payload is the producer's memory; its deleter runs once,
  // when the last reference goes.
  for (DLDataType type : {kF32, kI32, kI64}) {
    g_deleted = 0;
    Producer<M> *p = make_producer<M>(type);
    void *mem = p->mem;
    Buf b;
    TH_OK(import(&p->m, b.out()));
    uint64_t n = 0;
    TH_OK(tlrt_buffer_size(b.get(), &n));
    TH_CHECK(n == 6);
    tlrt_dtype dt = TLRT_DTYPE_F32;
    TH_OK(tlrt_buffer_dtype(b.get(), &dt));
    TH_CHECK(dt == (type.code == kDLFloat ? TLRT_DTYPE_F32
                                          : type.bits == 32 ? TLRT_DTYPE_I32 : TLRT_DTYPE_I64));
    if (type.code == kDLFloat) {
      std::vector<float> v(6);
      TH_OK(tlrt_buffer_to_f32(b.get(), v.data(), 6));
      TH_CHECK(v[5] == 2.5f);
      Buf y;  // an op reads the borrowed payload
      TH_OK(tlrt_scale(b.get(), 2.0, y.out()));
      TH_OK(tlrt_buffer_to_f32(y.get(), v.data(), 6));
      TH_CHECK(v[5] == 5.0f);
    } else if (type.bits == 64) {
      std::vector<int64_t> v(6);
      TH_OK(tlrt_buffer_to_i64(b.get(), v.data(), 6));
      TH_CHECK(v[3] == -3 * ((int64_t)1 << 35));
    }
    // Round trip: exporting the imported buffer gives the producer's pointer back (no copy).
    void *vm = nullptr;
    TH_OK(exprt(b.get(), &vm));
    TH_CHECK(static_cast<M *>(vm)->dl_tensor.data == mem);
    b = Buf();
    TH_CHECK(g_deleted == 0);  // the export still holds the buffer
    static_cast<M *>(vm)->deleter(static_cast<M *>(vm));
    TH_CHECK(g_deleted == 1);  // the last reference went: the producer's deleter ran, once
  }
  // Releasing the storage runs the producer's deleter at once; the free after it does not again.
  g_deleted = 0;
  Producer<M> *p = make_producer<M>(kF32);
  tlrt_buffer *b = nullptr;
  TH_OK(import(&p->m, &b));
  bool freed = false;
  TH_OK(tlrt_buffer_release_storage(b, &freed));
  TH_CHECK(freed && g_deleted == 1);
  tlrt_buffer_free(b);
  TH_CHECK(g_deleted == 1);
}

template <class M, class Import>
void test_import_rejects(const char *fn, Import import) {
  g_deleted = 0;
  tlrt_buffer *out = kSentinel;
  BAD(import(nullptr, &out), TLRT_ERR_NULL_ARGUMENT, fn, "managed");
  CLEARED(out);
  Producer<M> *p = make_producer<M>(kF32);
  BAD(import(&p->m, nullptr), TLRT_ERR_NULL_ARGUMENT, fn, "out");
  const auto reject = [&](tlrt_status want, auto &&mutate, auto &&restore) {
    mutate();
    out = kSentinel;
    BAD(import(&p->m, &out), want, fn, "managed");
    CLEARED(out);
    restore();
  };
  DLTensor &t = p->m.dl_tensor;
  reject(TLRT_ERR_UNSUPPORTED, [&] { t.dtype = DLDataType{kDLFloat, 16, 1}; }, [&] { t.dtype = kF32; });
  reject(TLRT_ERR_UNSUPPORTED, [&] { t.dtype = DLDataType{kDLFloat, 32, 4}; }, [&] { t.dtype = kF32; });
  reject(TLRT_ERR_UNSUPPORTED, [&] { t.dtype = DLDataType{kDLUInt, 32, 1}; }, [&] { t.dtype = kF32; });
  reject(TLRT_ERR_UNSUPPORTED, [&] { t.device.device_type = kDLROCM; },
         [&] { t.device.device_type = kDLCPU; });
  reject(TLRT_ERR_UNSUPPORTED, [&] { p->strides[0] = 1; p->strides[1] = 2; },
         [&] { p->strides[0] = 3; p->strides[1] = 1; });
  reject(TLRT_ERR_UNSUPPORTED, [&] { t.byte_offset = 4; }, [&] { t.byte_offset = 0; });
  reject(TLRT_ERR_INVALID_ARGUMENT, [&] { p->shape[0] = -2; }, [&] { p->shape[0] = 2; });
  reject(TLRT_ERR_INVALID_ARGUMENT, [&] { t.ndim = -1; }, [&] { t.ndim = 2; });
  reject(TLRT_ERR_INVALID_ARGUMENT, [&] { t.ndim = 33; }, [&] { t.ndim = 2; });
  reject(TLRT_ERR_NULL_ARGUMENT, [&] { t.shape = nullptr; }, [&] { t.shape = p->shape; });
  reject(TLRT_ERR_NULL_ARGUMENT, [&] { t.data = nullptr; }, [&] { t.data = p->mem; });
  reject(TLRT_ERR_OVERFLOW, [&] { p->shape[0] = INT64_MAX; }, [&] { p->shape[0] = 2; });
  reject(TLRT_ERR_INVALID_ARGUMENT, [&] { t.device = DLDevice{kDLCUDA, -1}; },
         [&] { t.device = DLDevice{kDLCPU, 0}; });
  if (tlrt_runtime_status() == TLRT_RUNTIME_CPU_ONLY)
    reject(TLRT_ERR_BACKEND_UNAVAILABLE, [&] { t.device = DLDevice{kDLCUDA, 0}; },
           [&] { t.device = DLDevice{kDLCPU, 0}; });
  if constexpr (std::is_same<M, DLManagedTensorVersioned>::value) {
    reject(TLRT_ERR_UNSUPPORTED, [&] { p->m.version.major = 2; }, [&] { p->m.version.major = 1; });
    reject(TLRT_ERR_UNSUPPORTED, [&] { p->m.flags = DLPACK_FLAG_BITMASK_READ_ONLY; },
           [&] { p->m.flags = 0; });
  }
  // Strides of size-1 dimensions do not matter; a NULL strides array is compact.
  p->shape[0] = 1;
  p->shape[1] = 6;
  p->strides[0] = 12345;
  Buf ok;
  TH_OK(import(&p->m, ok.out()));
  TH_CHECK(g_deleted == 0);  // every rejection left the tensor with us
  ok = Buf();
  TH_CHECK(g_deleted == 1);
  p = make_producer<M>(kF32);
  p->m.dl_tensor.strides = nullptr;
  p->m.dl_tensor.byte_offset = 16;  // aligned offsets are fine
  TH_OK(import(&p->m, ok.out()));
  std::vector<float> v(6);
  TH_OK(tlrt_buffer_to_f32(ok.get(), v.data(), 6));
  TH_CHECK(v[0] == 2.0f);  // element 4 of the producer's memory
  ok = Buf();
  TH_CHECK(g_deleted == 2);
}

template <class Export>
void test_export_rejects(const char *fn, Export exprt) {
  Buf b(th::upload({1, 2, 3, 4, 5, 6}));
  void *out = reinterpret_cast<void *>(uintptr_t{1});
  const uint64_t d23[2] = {2, 3}, d24[2] = {2, 4}, dbig[2] = {uint64_t{1} << 63, 2};
  BAD(exprt(nullptr, d23, 2, &out), TLRT_ERR_NULL_ARGUMENT, fn, "buffer");
  TH_CHECK(out == nullptr);
  BAD(exprt(b.get(), d23, 2, nullptr), TLRT_ERR_NULL_ARGUMENT, fn, "out");
  out = reinterpret_cast<void *>(uintptr_t{1});
  BAD(exprt(b.get(), nullptr, 2, &out), TLRT_ERR_NULL_ARGUMENT, fn, "dims");
  TH_CHECK(out == nullptr);
  BAD(exprt(b.get(), d24, 2, &out), TLRT_ERR_SHAPE, fn, "dims");
  BAD(exprt(b.get(), nullptr, 0, &out), TLRT_ERR_SHAPE, fn, "dims");  // a scalar of 6 elements
  BAD(exprt(b.get(), dbig, 2, &out), TLRT_ERR_INVALID_ARGUMENT, fn, "dims");
  BAD(exprt(b.get(), d23, 33, &out), TLRT_ERR_INVALID_ARGUMENT, fn, "ndim");
  Fixture f = make_fixture();
  BAD(exprt(f.released, nullptr, 1, &out), TLRT_ERR_RELEASED, fn, "buffer");
  tlrt_buffer *gone = th::upload({1});
  tlrt_buffer_free(gone);
  BAD(exprt(gone, nullptr, 1, &out), TLRT_ERR_STALE_HANDLE, fn, "buffer");
  free_fixture(f);
}

}  // namespace

int main() {
  const tlrt_allocator_stats start = th::stats();
  test_export();
  test_export_rejects("tlrt_buffer_to_dlpack_versioned", tlrt_buffer_to_dlpack_versioned);
  test_export_rejects("tlrt_buffer_to_dlpack", tlrt_buffer_to_dlpack);
  test_import<DLManagedTensorVersioned>(
      tlrt_buffer_from_dlpack_versioned,
      [](tlrt_buffer *b, void **o) { return tlrt_buffer_to_dlpack_versioned(b, nullptr, 1, o); });
  test_import<DLManagedTensor>(
      tlrt_buffer_from_dlpack,
      [](tlrt_buffer *b, void **o) { return tlrt_buffer_to_dlpack(b, nullptr, 1, o); });
  test_import_rejects<DLManagedTensorVersioned>("tlrt_buffer_from_dlpack_versioned",
                                                tlrt_buffer_from_dlpack_versioned);
  test_import_rejects<DLManagedTensor>("tlrt_buffer_from_dlpack", tlrt_buffer_from_dlpack);
  expect_no_leaks(start);
  return th::finish("test_bad_input_dlpack");
}
