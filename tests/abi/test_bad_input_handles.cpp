// Misused buffer handles (abi/tlrt_buffer.h): use after free, double free, a freed handle whose
// slot a new buffer took, values that never were handles, retain keeping a buffer alive, many
// handles across the table's chunk sizes, and creation / free from several threads. Every misuse
// is TLRT_ERR_STALE_HANDLE and reads no freed memory (the valgrind setup runs this test).
#include <thread>
#include <vector>

#include "bad_input.hpp"

namespace {

using th::Buf;

tlrt_buffer *make(float v, uint64_t n = 4) {
  tlrt_buffer *b = nullptr;
  TH_OK(tlrt_buffer_full(TLRT_DEVICE_CPU, n, v, &b));
  return b;
}

// Every kind of use of a stale handle fails with TLRT_ERR_STALE_HANDLE naming the argument.
void expect_stale(tlrt_buffer *h) {
  uint64_t n = 7;
  BAD(tlrt_buffer_size(h, &n), TLRT_ERR_STALE_HANDLE, "tlrt_buffer_size", "buffer");
  TH_CHECK(n == 0);
  tlrt_device dev = 7;
  BAD(tlrt_buffer_device(h, &dev), TLRT_ERR_STALE_HANDLE, "tlrt_buffer_device", "buffer");
  float host[4];
  BAD(tlrt_buffer_to_f32(h, host, 4), TLRT_ERR_STALE_HANDLE, "tlrt_buffer_to_f32", "buffer");
  BAD(tlrt_buffer_retain(h), TLRT_ERR_STALE_HANDLE, "tlrt_buffer_retain", "buffer");
  bool flag = true;
  BAD(tlrt_buffer_release_storage(h, &flag), TLRT_ERR_STALE_HANDLE, "tlrt_buffer_release_storage",
      "buffer");
  TH_CHECK(!flag);
  flag = true;
  BAD(tlrt_buffer_is_released(h, &flag), TLRT_ERR_STALE_HANDLE, "tlrt_buffer_is_released",
      "buffer");
  tlrt_buffer *out = kSentinel;
  BAD(tlrt_buffer_copy(h, &out), TLRT_ERR_STALE_HANDLE, "tlrt_buffer_copy", "buffer");
  CLEARED(out);
  Buf ok(make(1.0f));
  out = kSentinel;
  BAD(tlrt_add(ok.get(), h, &out), TLRT_ERR_STALE_HANDLE, "tlrt_add", "b");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_relu(h, &out), TLRT_ERR_STALE_HANDLE, "tlrt_relu", "x");
  CLEARED(out);
  BAD(tlrt_buffer_free_checked(h), TLRT_ERR_STALE_HANDLE, "tlrt_buffer_free_checked", "buffer");
  tlrt_buffer_free(h);  // a no-op
}

void test_use_after_free_and_double_free() {
  TH_OK(tlrt_buffer_free_checked(nullptr));
  tlrt_buffer *a = make(1.0f);
  TH_OK(tlrt_buffer_free_checked(a));
  expect_stale(a);

  // The freed handle's slot is taken by a new buffer: the old handle still names nothing, and
  // freeing it again does not free the new buffer.
  tlrt_buffer *b = make(2.0f);
  TH_CHECK(b != a);
  expect_stale(a);
  tlrt_buffer_free(a);
  float v[4] = {0, 0, 0, 0};
  TH_OK(tlrt_buffer_to_f32(b, v, 4));
  TH_CHECK(v[0] == 2.0f && v[3] == 2.0f);

  // Retain: the handle lives until the last reference goes.
  TH_OK(tlrt_buffer_retain(b));
  TH_OK(tlrt_buffer_free_checked(b));
  TH_OK(tlrt_buffer_to_f32(b, v, 4));
  TH_OK(tlrt_buffer_free_checked(b));
  expect_stale(b);

  // A released buffer is still a live handle (TLRT_ERR_RELEASED, not stale) until freed.
  tlrt_buffer *c = make(3.0f);
  TH_OK(tlrt_buffer_release_storage(c, nullptr));
  uint64_t n = 0;
  BAD(tlrt_buffer_size(c, &n), TLRT_ERR_RELEASED, "tlrt_buffer_size", "buffer");
  TH_OK(tlrt_buffer_free_checked(c));
  expect_stale(c);
}

void test_never_handles() {
  int local = 0;
  const uintptr_t junk[] = {1, 0xdeadbeef, reinterpret_cast<uintptr_t>(&local),
                            reinterpret_cast<uintptr_t>(&junk), ~uintptr_t{0},
                            uintptr_t{0xFFFFFFFF} << 32, (uintptr_t{1} << 32) | 1};
  for (uintptr_t j : junk) expect_stale(reinterpret_cast<tlrt_buffer *>(j));
}

void test_many_handles() {
  // 20000 live handles span the first nine chunks of the table; all stale once freed, and the
  // handle count returns to where it was.
  const uint64_t live0 = th::stats().live_handles;
  std::vector<tlrt_buffer *> hs;
  for (int i = 0; i < 20000; ++i) hs.push_back(make((float)i, 1));
  TH_CHECK(th::stats().live_handles == live0 + 20000);
  float v = -1;
  TH_OK(tlrt_buffer_to_f32(hs[12345], &v, 1));
  TH_CHECK(v == 12345.0f);
  for (tlrt_buffer *h : hs) TH_OK(tlrt_buffer_free_checked(h));
  TH_CHECK(th::stats().live_handles == live0);
  uint64_t n = 0;
  for (size_t i = 0; i < hs.size(); i += 997)
    BAD(tlrt_buffer_size(hs[i], &n), TLRT_ERR_STALE_HANDLE, "tlrt_buffer_size", "buffer");
}

void test_threads() {
  // Four threads create, check and free buffers at once; every handle they freed is stale after.
  const uint64_t live0 = th::stats().live_handles;
  std::vector<std::vector<tlrt_buffer *>> freed(4);
  std::vector<int> errors(4, 0);
  std::vector<std::thread> ts;
  for (int k = 0; k < 4; ++k)
    ts.emplace_back([k, &freed, &errors] {
      for (int i = 0; i < 2000; ++i) {
        tlrt_buffer *b = nullptr;
        if (tlrt_buffer_full(TLRT_DEVICE_CPU, 1, k * 10000 + i, &b) != TLRT_OK) ++errors[k];
        float v = -1;
        if (tlrt_buffer_to_f32(b, &v, 1) != TLRT_OK || v != (float)(k * 10000 + i)) ++errors[k];
        if (tlrt_buffer_free_checked(b) != TLRT_OK) ++errors[k];
        if (i % 100 == 0) freed[k].push_back(b);
      }
    });
  for (auto &t : ts) t.join();
  for (int k = 0; k < 4; ++k) TH_CHECK_MSG(errors[k] == 0, "thread %d: %d errors", k, errors[k]);
  TH_CHECK(th::stats().live_handles == live0);
  uint64_t n = 0;
  for (auto &list : freed)
    for (tlrt_buffer *b : list) TH_CHECK(tlrt_buffer_size(b, &n) == TLRT_ERR_STALE_HANDLE);
}

}  // namespace

int main() {
  const tlrt_allocator_stats start = th::stats();
  test_use_after_free_and_double_free();
  test_never_handles();
  test_many_handles();
  test_threads();
  expect_no_leaks(start);
  return th::finish("test_bad_input_handles");
}
