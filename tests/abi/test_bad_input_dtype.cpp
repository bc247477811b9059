// Element types (abi/tlrt_buffer.h): integer buffers upload, download, copy and transfer exactly;
// every float32 argument of an op rejects them with TLRT_ERR_DTYPE naming the argument; the
// integer entry points reject bad input with their exact codes.
#include <cstdint>
#include <cstring>
#include <vector>

#include "bad_input.hpp"

namespace {

using th::Buf;

void test_integer_buffers() {
  const std::vector<int64_t> v64 = {0, -1, 1, INT64_MIN, INT64_MAX, 1ll << 40, -(1ll << 33)};
  const std::vector<int32_t> v32 = {0, -1, 1, INT32_MIN, INT32_MAX, 12345};
  Buf a, b;
  TH_OK(tlrt_buffer_from_i64(TLRT_DEVICE_CPU, v64.data(), v64.size(), a.out()));
  TH_OK(tlrt_buffer_from_i32(TLRT_DEVICE_CPU, v32.data(), v32.size(), b.out()));
  tlrt_dtype t = TLRT_DTYPE_F32;
  TH_OK(tlrt_buffer_dtype(a.get(), &t));
  TH_CHECK(t == TLRT_DTYPE_I64);
  TH_OK(tlrt_buffer_dtype(b.get(), &t));
  TH_CHECK(t == TLRT_DTYPE_I32);
  uint64_t n = 0;
  TH_OK(tlrt_buffer_size(a.get(), &n));
  TH_CHECK(n == v64.size());
  // Copies and transfers keep the type and every bit.
  Buf c;
  TH_OK(tlrt_buffer_copy(a.get(), c.out()));
  Buf d;
  TH_OK(tlrt_buffer_to_device(c.get(), TLRT_DEVICE_CPU, d.out()));
  std::vector<int64_t> back(v64.size());
  TH_OK(tlrt_buffer_to_i64(d.get(), back.data(), back.size()));
  TH_CHECK(back == v64);
  std::vector<int32_t> back32(v32.size());
  TH_OK(tlrt_buffer_to_i32(b.get(), back32.data(), back32.size()));
  TH_CHECK(back32 == v32);
  // Zeros of every type; the allocator counts 8 bytes per int64 element.
  const tlrt_allocator_stats s0 = th::stats();
  for (tlrt_dtype ty : {TLRT_DTYPE_F32, TLRT_DTYPE_I32, TLRT_DTYPE_I64}) {
    Buf z;
    TH_OK(tlrt_buffer_zeros_of(TLRT_DEVICE_CPU, ty, 5, z.out()));
    TH_OK(tlrt_buffer_dtype(z.get(), &t));
    TH_CHECK(t == ty);
    if (ty == TLRT_DTYPE_I64) {
      TH_CHECK(th::stats().live_bytes == s0.live_bytes + 40);
      int64_t zs[5] = {1, 1, 1, 1, 1};
      TH_OK(tlrt_buffer_to_i64(z.get(), zs, 5));
      for (int64_t x : zs) TH_CHECK(x == 0);
    }
  }
  Buf e;
  TH_OK(tlrt_buffer_zeros_of(TLRT_DEVICE_CPU, TLRT_DTYPE_I32, 0, e.out()));
  TH_OK(tlrt_buffer_to_i32(e.get(), nullptr, 0));
}

void test_float_ops_reject_integers() {
  Fixture f = make_fixture();
  Buf i64;
  const int64_t v[4] = {1, 2, 3, 4};
  TH_OK(tlrt_buffer_from_i64(TLRT_DEVICE_CPU, v, 4, i64.out()));
  tlrt_buffer *out = kSentinel;
  BAD(tlrt_add(f.a, i64.get(), &out), TLRT_ERR_DTYPE, "tlrt_add", "b");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_relu(i64.get(), &out), TLRT_ERR_DTYPE, "tlrt_relu", "x");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_reduce_sum(i64.get(), &out), TLRT_ERR_DTYPE, "tlrt_reduce_sum", "x");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_matmul(i64.get(), f.a, 2, 2, 2, false, false, &out), TLRT_ERR_DTYPE, "tlrt_matmul", "a");
  CLEARED(out);
  float host[4];
  BAD(tlrt_buffer_to_f32(i64.get(), host, 4), TLRT_ERR_DTYPE, "tlrt_buffer_to_f32", "buffer");
  double hd[4];
  BAD(tlrt_buffer_to_f64(i64.get(), hd, 4), TLRT_ERR_DTYPE, "tlrt_buffer_to_f64", "buffer");
  uint8_t bytes[32];
  BAD(tlrt_buffer_to_bytes(i64.get(), bytes, 32), TLRT_ERR_DTYPE, "tlrt_buffer_to_bytes",
      "buffer");
  // The tape takes float32 leaves only.
  tlrt_tape *t = nullptr;
  TH_OK(tlrt_tape_new(TLRT_DEVICE_CPU, &t));
  const uint64_t d4[1] = {4};
  uint64_t id = 7;
  BAD(tlrt_tape_leaf(t, i64.get(), d4, 1, true, &id), TLRT_ERR_DTYPE, "tlrt_tape_leaf", "buffer");
  TH_CHECK(id == 0);
  tlrt_tape_free(t);
  free_fixture(f);
}

void test_integer_entry_points() {
  const int32_t v32[2] = {1, 2};
  const int64_t v64[2] = {1, 2};
  tlrt_buffer *out = kSentinel;
  BAD(tlrt_buffer_from_i32(TLRT_DEVICE_CPU, nullptr, 2, &out), TLRT_ERR_NULL_ARGUMENT,
      "tlrt_buffer_from_i32", "data");
  CLEARED(out);
  BAD(tlrt_buffer_from_i32(TLRT_DEVICE_CPU, v32, 2, nullptr), TLRT_ERR_NULL_ARGUMENT,
      "tlrt_buffer_from_i32", "out");
  out = kSentinel;
  BAD(tlrt_buffer_from_i64(TLRT_DEVICE_CPU, v64, kTooMany, &out), TLRT_ERR_OVERFLOW,
      "tlrt_buffer_from_i64", "n");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_buffer_from_i64((tlrt_device)(7u << 16), v64, 2, &out), TLRT_ERR_INVALID_ARGUMENT,
      "tlrt_buffer_from_i64", "device");
  CLEARED(out);
  if (tlrt_runtime_status() == TLRT_RUNTIME_CPU_ONLY) {
    BAD(tlrt_buffer_from_i64(TLRT_DEVICE_CUDA(0), v64, 2, &out), TLRT_ERR_BACKEND_UNAVAILABLE,
        "tlrt_buffer_from_i64", "device");
    BAD(tlrt_buffer_zeros_of(TLRT_DEVICE_CUDA(0), TLRT_DTYPE_I64, 2, &out),
        TLRT_ERR_BACKEND_UNAVAILABLE, "tlrt_buffer_zeros_of", "device");
  }
  BAD(tlrt_buffer_zeros_of(TLRT_DEVICE_CPU, (tlrt_dtype)3, 2, &out), TLRT_ERR_INVALID_ARGUMENT,
      "tlrt_buffer_zeros_of", "dtype");
  CLEARED(out);
  BAD(tlrt_buffer_zeros_of(TLRT_DEVICE_CPU, TLRT_DTYPE_I32, 2, nullptr), TLRT_ERR_NULL_ARGUMENT,
      "tlrt_buffer_zeros_of", "out");
  BAD(tlrt_buffer_zeros_of(TLRT_DEVICE_CPU, TLRT_DTYPE_I64, kTooMany, &out), TLRT_ERR_OVERFLOW,
      "tlrt_buffer_zeros_of", "n");

  Buf a, f;
  TH_OK(tlrt_buffer_from_i32(TLRT_DEVICE_CPU, v32, 2, a.out()));
  TH_OK(tlrt_buffer_full(TLRT_DEVICE_CPU, 2, 1.0, f.out()));
  int32_t d32[2];
  int64_t d64[2];
  BAD(tlrt_buffer_to_i32(nullptr, d32, 2), TLRT_ERR_NULL_ARGUMENT, "tlrt_buffer_to_i32", "buffer");
  BAD(tlrt_buffer_to_i32(a.get(), nullptr, 2), TLRT_ERR_NULL_ARGUMENT, "tlrt_buffer_to_i32", "dst");
  BAD(tlrt_buffer_to_i32(a.get(), d32, 3), TLRT_ERR_SHAPE, "tlrt_buffer_to_i32", "n");
  BAD(tlrt_buffer_to_i64(a.get(), d64, 2), TLRT_ERR_DTYPE, "tlrt_buffer_to_i64", "buffer");
  BAD(tlrt_buffer_to_i32(f.get(), d32, 2), TLRT_ERR_DTYPE, "tlrt_buffer_to_i32", "buffer");
  tlrt_dtype t = TLRT_DTYPE_I64;
  BAD(tlrt_buffer_dtype(nullptr, &t), TLRT_ERR_NULL_ARGUMENT, "tlrt_buffer_dtype", "buffer");
  TH_CHECK(t == TLRT_DTYPE_F32);
  BAD(tlrt_buffer_dtype(a.get(), nullptr), TLRT_ERR_NULL_ARGUMENT, "tlrt_buffer_dtype", "dtype");
  // Released: the type is still reported; downloads fail with RELEASED.
  TH_OK(tlrt_buffer_release_storage(a.get(), nullptr));
  TH_OK(tlrt_buffer_dtype(a.get(), &t));
  TH_CHECK(t == TLRT_DTYPE_I32);
  BAD(tlrt_buffer_to_i32(a.get(), d32, 2), TLRT_ERR_RELEASED, "tlrt_buffer_to_i32", "buffer");
  tlrt_buffer *gone = nullptr;
  TH_OK(tlrt_buffer_from_i64(TLRT_DEVICE_CPU, v64, 2, &gone));
  tlrt_buffer_free(gone);
  BAD(tlrt_buffer_to_i64(gone, d64, 2), TLRT_ERR_STALE_HANDLE, "tlrt_buffer_to_i64", "buffer");
  BAD(tlrt_buffer_dtype(gone, &t), TLRT_ERR_STALE_HANDLE, "tlrt_buffer_dtype", "buffer");
}

}  // namespace

int main() {
  const tlrt_allocator_stats start = th::stats();
  test_integer_buffers();
  test_float_ops_reject_integers();
  test_integer_entry_points();
  expect_no_leaks(start);
  return th::finish("test_bad_input_dtype");
}
