// Bad input for tlrt_argmax_rows / tlrt_topk_rows (abi/tlrt_reduce.h) and tlrt_clip_grad_norm
// (abi/tlrt_optim.h): NULL for each pointer argument, released and stale-free inputs, integer
// inputs, shapes that do not describe x (products beyond 2^64 included), index types that are not
// int32 / int64, cols == 0 with rows > 0 (argmax), k > cols (top-k), int32 indices for more than
// 2^31 - 1 columns, the same gradient twice, max_norm outside its domain, mixed devices (with a GPU
// only). For each failing call: the exact status, every out-parameter cleared to NULL (pre-filled
// with a sentinel), a last-error message naming the function and the offending arguments, and
// (clip) no buffer modified. Good calls succeed. Nothing leaks.
#pragma GCC diagnostic ignored "-Wunused-function"
#include "bad_input.hpp"

namespace {

const char *kArgmax = "tlrt_argmax_rows";
const char *kTopk = "tlrt_topk_rows";
const char *kClip = "tlrt_clip_grad_norm";
const uint64_t k32 = uint64_t{1} << 32;

void check_argmax(const Fixture &f) {
  tlrt_buffer *out = kSentinel;
  BAD(tlrt_argmax_rows(nullptr, 2, 2, TLRT_DTYPE_I64, &out), TLRT_ERR_NULL_ARGUMENT, kArgmax, "x");
  CLEARED(out);
  BAD(tlrt_argmax_rows(f.a, 2, 2, TLRT_DTYPE_I64, nullptr), TLRT_ERR_NULL_ARGUMENT, kArgmax,
      "indices");
  out = kSentinel;
  BAD(tlrt_argmax_rows(f.released, 2, 2, TLRT_DTYPE_I64, &out), TLRT_ERR_RELEASED, kArgmax, "x");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_argmax_rows(f.a, 2, 3, TLRT_DTYPE_I64, &out), TLRT_ERR_SHAPE, kArgmax, "x", "rows",
      "cols");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_argmax_rows(f.a, k32, k32, TLRT_DTYPE_I64, &out), TLRT_ERR_SHAPE, kArgmax, "x");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_argmax_rows(f.a, 2, 2, TLRT_DTYPE_F32, &out), TLRT_ERR_DTYPE, kArgmax, "index_dtype");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_argmax_rows(f.a, 2, 2, (tlrt_dtype)-1, &out), TLRT_ERR_DTYPE, kArgmax, "index_dtype");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_argmax_rows(f.empty, 3, 0, TLRT_DTYPE_I32, &out), TLRT_ERR_SHAPE, kArgmax, "cols");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_argmax_rows(f.empty, 0, k32, TLRT_DTYPE_I32, &out), TLRT_ERR_OVERFLOW, kArgmax, "cols");
  CLEARED(out);
  tlrt_buffer *ints = nullptr;
  const int64_t iv[4] = {1, 2, 3, 4};
  TH_OK(tlrt_buffer_from_i64(TLRT_DEVICE_CPU, iv, 4, &ints));
  out = kSentinel;
  BAD(tlrt_argmax_rows(ints, 2, 2, TLRT_DTYPE_I64, &out), TLRT_ERR_DTYPE, kArgmax, "x");
  CLEARED(out);
  tlrt_buffer_free(ints);
  // Good calls.
  TH_OK(tlrt_argmax_rows(f.a, 2, 2, TLRT_DTYPE_I32, &out));
  tlrt_buffer_free(out);
  out = nullptr;
  TH_OK(tlrt_argmax_rows(f.empty, 0, 0, TLRT_DTYPE_I64, &out));
  tlrt_buffer_free(out);
}

void check_topk(const Fixture &f) {
  tlrt_buffer *v = kSentinel, *i = kSentinel;
  BAD(tlrt_topk_rows(nullptr, 2, 2, 1, TLRT_DTYPE_I64, &v, &i), TLRT_ERR_NULL_ARGUMENT, kTopk, "x");
  CLEARED(v);
  CLEARED(i);
  i = kSentinel;
  BAD(tlrt_topk_rows(f.a, 2, 2, 1, TLRT_DTYPE_I64, nullptr, &i), TLRT_ERR_NULL_ARGUMENT, kTopk,
      "values");
  CLEARED(i);
  v = kSentinel;
  BAD(tlrt_topk_rows(f.a, 2, 2, 1, TLRT_DTYPE_I64, &v, nullptr), TLRT_ERR_NULL_ARGUMENT, kTopk,
      "indices");
  CLEARED(v);
  v = kSentinel, i = kSentinel;
  BAD(tlrt_topk_rows(f.released, 2, 2, 1, TLRT_DTYPE_I64, &v, &i), TLRT_ERR_RELEASED, kTopk, "x");
  CLEARED(v);
  CLEARED(i);
  v = kSentinel, i = kSentinel;
  BAD(tlrt_topk_rows(f.a, 4, 2, 1, TLRT_DTYPE_I64, &v, &i), TLRT_ERR_SHAPE, kTopk, "x", "rows",
      "cols");
  CLEARED(v);
  CLEARED(i);
  v = kSentinel, i = kSentinel;
  BAD(tlrt_topk_rows(f.a, 2, 2, 1, TLRT_DTYPE_F32, &v, &i), TLRT_ERR_DTYPE, kTopk, "index_dtype");
  CLEARED(v);
  CLEARED(i);
  v = kSentinel, i = kSentinel;
  BAD(tlrt_topk_rows(f.a, 2, 2, 3, TLRT_DTYPE_I64, &v, &i), TLRT_ERR_INVALID_ARGUMENT, kTopk, "k",
      "cols");
  CLEARED(v);
  CLEARED(i);
  v = kSentinel, i = kSentinel;
  BAD(tlrt_topk_rows(f.empty, 0, k32, 0, TLRT_DTYPE_I32, &v, &i), TLRT_ERR_OVERFLOW, kTopk, "cols");
  CLEARED(v);
  CLEARED(i);
  TH_OK(tlrt_topk_rows(f.a, 2, 2, 2, TLRT_DTYPE_I64, &v, &i));
  tlrt_buffer_free(v);
  tlrt_buffer_free(i);
  TH_OK(tlrt_topk_rows(f.a, 2, 2, 0, TLRT_DTYPE_I32, &v, &i));
  tlrt_buffer_free(v);
  tlrt_buffer_free(i);
}

void check_clip(const Fixture &f) {
  const std::vector<float> a0 = th::download(f.a), b0 = th::download(f.b);
  tlrt_buffer *n = kSentinel;
  tlrt_buffer *two[2] = {f.a, f.b};
  tlrt_buffer *dup[3] = {f.a, f.b, f.a};
  tlrt_buffer *hole[2] = {f.a, nullptr};
  tlrt_buffer *rel[2] = {f.a, f.released};
  BAD(tlrt_clip_grad_norm(2, two, 1.0, nullptr), TLRT_ERR_NULL_ARGUMENT, kClip, "total_norm");
  BAD(tlrt_clip_grad_norm(1, nullptr, 1.0, &n), TLRT_ERR_NULL_ARGUMENT, kClip, "grads");
  CLEARED(n);
  n = kSentinel;
  BAD(tlrt_clip_grad_norm(2, hole, 1.0, &n), TLRT_ERR_NULL_ARGUMENT, kClip, "grads");
  CLEARED(n);
  n = kSentinel;
  BAD(tlrt_clip_grad_norm(2, rel, 1.0, &n), TLRT_ERR_RELEASED, kClip, "grads");
  CLEARED(n);
  n = kSentinel;
  BAD(tlrt_clip_grad_norm(3, dup, 1.0, &n), TLRT_ERR_INVALID_ARGUMENT, kClip, "grads");
  CLEARED(n);
  for (double bad : {-1.0, -1e-30, (double)NAN, (double)INFINITY, 1e39}) {
    n = kSentinel;
    BAD(tlrt_clip_grad_norm(2, two, bad, &n), TLRT_ERR_INVALID_ARGUMENT, kClip, "max_norm");
    CLEARED(n);
  }
  tlrt_buffer *ints = nullptr;
  const int32_t iv[1] = {1};
  TH_OK(tlrt_buffer_from_i32(TLRT_DEVICE_CPU, iv, 1, &ints));
  tlrt_buffer *withint[2] = {f.a, ints};
  n = kSentinel;
  BAD(tlrt_clip_grad_norm(2, withint, 1.0, &n), TLRT_ERR_DTYPE, kClip, "grads");
  CLEARED(n);
  tlrt_buffer_free(ints);
  TH_CHECK(th::download(f.a) == a0 && th::download(f.b) == b0);
  if (th::cuda_ready()) {
    tlrt_buffer *c = nullptr;
    TH_OK(tlrt_buffer_to_device(f.g, TLRT_DEVICE_CUDA(0), &c));
    tlrt_buffer *mixed[2] = {f.a, c};
    n = kSentinel;
    BAD(tlrt_clip_grad_norm(2, mixed, 1.0, &n), TLRT_ERR_DEVICE_MISMATCH, kClip, "grads");
    CLEARED(n);
    tlrt_buffer_free(c);
  }
  // Good calls: -0 max_norm is allowed; count == 0.
  TH_OK(tlrt_clip_grad_norm(2, two, 1e6, &n));
  tlrt_buffer_free(n);
  TH_OK(tlrt_clip_grad_norm(0, nullptr, 1.0, &n));
  tlrt_buffer_free(n);
}

}  // namespace

int main() {
  const tlrt_allocator_stats start = th::stats();
  {
    Fixture f = make_fixture();
    check_argmax(f);
    check_topk(f);
    check_clip(f);
    free_fixture(f);
  }
  const tlrt_allocator_stats end = th::stats();
  TH_CHECK_MSG(end.live_bytes == start.live_bytes, "live_bytes %llu at start, %llu at end",
               (unsigned long long)start.live_bytes, (unsigned long long)end.live_bytes);
  TH_CHECK_MSG(end.live_handles == start.live_handles, "live_handles %llu at start, %llu at end",
               (unsigned long long)start.live_handles, (unsigned long long)end.live_handles);
  return th::finish("test_bad_input_select");
}
