// Bad input for tlrt_cross_entropy_fwd / tlrt_cross_entropy_bwd (abi/tlrt_softmax.h) and
// tlrt_tape_cross_entropy_ignore (abi/tlrt_tape.h): NULL for each pointer argument, released and
// stale handles, labels of the wrong dtype, float inputs given as int buffers, sizes that do not
// match (logits not rows * classes with products beyond 2^64, labels not rows, lse not 2 * rows,
// grad_loss not 1), mixed devices (with a GPU only). For each failing call: the exact status,
// every out-parameter cleared to NULL, a last-error message naming the function and the
// offending argument. Good shapes (rows == 0 and classes == 0 included) succeed. Nothing leaks.
#include "bad_input.hpp"

namespace {

const char *kF = "tlrt_cross_entropy_fwd";
const char *kB = "tlrt_cross_entropy_bwd";
const int kIg = -100;

tlrt_buffer *i64_buf(std::vector<int64_t> v) {
  tlrt_buffer *b = nullptr;
  if (v.empty())
    TH_OK(tlrt_buffer_zeros_of(TLRT_DEVICE_CPU, TLRT_DTYPE_I64, 0, &b));
  else
    TH_OK(tlrt_buffer_from_i64(TLRT_DEVICE_CPU, v.data(), v.size(), &b));
  return b;
}

void check_fwd(const Fixture &f, tlrt_buffer *lab2, tlrt_buffer *lab2_32, tlrt_buffer *lab3) {
  tlrt_buffer *loss = kSentinel, *lse = kSentinel;
  auto cleared = [&] {
    CLEARED(loss);
    CLEARED(lse);
    loss = kSentinel;
    lse = kSentinel;
  };
  BAD(tlrt_cross_entropy_fwd(nullptr, lab2, 2, 2, kIg, &loss, &lse), TLRT_ERR_NULL_ARGUMENT, kF,
      "logits");
  cleared();
  BAD(tlrt_cross_entropy_fwd(f.a, nullptr, 2, 2, kIg, &loss, &lse), TLRT_ERR_NULL_ARGUMENT, kF,
      "labels");
  cleared();
  BAD(tlrt_cross_entropy_fwd(f.a, lab2, 2, 2, kIg, nullptr, &lse), TLRT_ERR_NULL_ARGUMENT, kF,
      "loss");
  CLEARED(lse);
  lse = kSentinel;
  BAD(tlrt_cross_entropy_fwd(f.a, lab2, 2, 2, kIg, &loss, nullptr), TLRT_ERR_NULL_ARGUMENT, kF,
      "lse");
  CLEARED(loss);
  loss = kSentinel;
  BAD(tlrt_cross_entropy_fwd(f.released, lab2, 2, 2, kIg, &loss, &lse), TLRT_ERR_RELEASED, kF,
      "logits");
  cleared();
  // labels of float32 values; logits given as an int buffer.
  BAD(tlrt_cross_entropy_fwd(f.a, f.b, 2, 2, kIg, &loss, &lse), TLRT_ERR_DTYPE, kF, "labels");
  cleared();
  BAD(tlrt_cross_entropy_fwd(lab2, lab2, 2, 1, kIg, &loss, &lse), TLRT_ERR_DTYPE, kF, "logits");
  cleared();
  // logits not rows * classes (products beyond 64 bits included); labels not rows.
  struct S {
    uint64_t rows, classes;
  };
  for (const S &s : {S{2, 3}, S{4, 2}, S{uint64_t{1} << 32, uint64_t{1} << 32},
                     S{UINT64_MAX, UINT64_MAX}, S{0, 4}}) {
    BAD(tlrt_cross_entropy_fwd(f.a, lab2, s.rows, s.classes, kIg, &loss, &lse), TLRT_ERR_SHAPE,
        kF, "logits", "rows", "classes");
    cleared();
  }
  BAD(tlrt_cross_entropy_fwd(f.a, lab3, 2, 2, kIg, &loss, &lse), TLRT_ERR_SHAPE, kF, "labels",
      "rows");
  cleared();
  BAD(tlrt_cross_entropy_fwd(f.a, lab2, 1, 4, kIg, &loss, &lse), TLRT_ERR_SHAPE, kF, "labels",
      "rows");
  cleared();
  // Good: int32 and int64 labels, 4 x 1, rows == 0, classes == 0.
  for (tlrt_buffer *l : {lab2, lab2_32}) {
    loss = lse = nullptr;
    TH_OK(tlrt_cross_entropy_fwd(f.a, l, 2, 2, kIg, &loss, &lse));
    expect_result(kF, loss, 1);
    expect_result(kF, lse, 4);
  }
  tlrt_buffer *l0 = i64_buf({}), *l3 = i64_buf({0, -100, 5});
  loss = lse = nullptr;
  TH_OK(tlrt_cross_entropy_fwd(f.empty, l0, 0, 7, TLRT_CROSS_ENTROPY_NO_IGNORE, &loss, &lse));
  expect_result(kF, loss, 1);
  expect_result(kF, lse, 0);
  loss = lse = nullptr;
  uint64_t nf = 0;
  TH_OK(tlrt_index_faults(TLRT_DEVICE_CPU, true, &nf));
  TH_OK(tlrt_cross_entropy_fwd(f.empty, l3, 3, 0, kIg, &loss, &lse));
  TH_OK(tlrt_index_faults(TLRT_DEVICE_CPU, true, &nf));
  TH_CHECK_MSG(nf == 2, "classes 0: %llu faults, expected 2", (unsigned long long)nf);
  expect_result(kF, loss, 1);
  expect_result(kF, lse, 6);
  tlrt_buffer_free(l0);
  tlrt_buffer_free(l3);
}

void check_bwd(const Fixture &f, tlrt_buffer *lab2) {
  tlrt_buffer *loss = nullptr, *lse = nullptr, *one = th::upload({1.0f}),
              *two = th::upload({1.0f, 2.0f});
  TH_OK(tlrt_cross_entropy_fwd(f.a, lab2, 2, 2, kIg, &loss, &lse));
  tlrt_buffer *out = kSentinel;
  BAD(tlrt_cross_entropy_bwd(nullptr, lab2, lse, one, 2, 2, kIg, &out), TLRT_ERR_NULL_ARGUMENT,
      kB, "logits");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_cross_entropy_bwd(f.a, nullptr, lse, one, 2, 2, kIg, &out), TLRT_ERR_NULL_ARGUMENT,
      kB, "labels");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_cross_entropy_bwd(f.a, lab2, nullptr, one, 2, 2, kIg, &out), TLRT_ERR_NULL_ARGUMENT,
      kB, "lse");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_cross_entropy_bwd(f.a, lab2, lse, nullptr, 2, 2, kIg, &out), TLRT_ERR_NULL_ARGUMENT,
      kB, "grad_loss");
  CLEARED(out);
  BAD(tlrt_cross_entropy_bwd(f.a, lab2, lse, one, 2, 2, kIg, nullptr), TLRT_ERR_NULL_ARGUMENT,
      kB, "dlogits");
  out = kSentinel;
  BAD(tlrt_cross_entropy_bwd(f.a, lab2, f.released, one, 2, 2, kIg, &out), TLRT_ERR_RELEASED, kB,
      "lse");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_cross_entropy_bwd(f.a, lab2, lse, lab2, 2, 2, kIg, &out), TLRT_ERR_DTYPE, kB,
      "grad_loss");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_cross_entropy_bwd(f.a, f.b, lse, one, 2, 2, kIg, &out), TLRT_ERR_DTYPE, kB, "labels");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_cross_entropy_bwd(f.a, lab2, f.short3, one, 2, 2, kIg, &out), TLRT_ERR_SHAPE, kB,
      "lse");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_cross_entropy_bwd(f.a, lab2, lse, two, 2, 2, kIg, &out), TLRT_ERR_SHAPE, kB,
      "grad_loss");
  CLEARED(out);
  out = kSentinel;
  BAD(tlrt_cross_entropy_bwd(f.a, lab2, lse, one, 2, 3, kIg, &out), TLRT_ERR_SHAPE, kB, "logits",
      "rows", "classes");
  CLEARED(out);
  out = nullptr;
  TH_OK(tlrt_cross_entropy_bwd(f.a, lab2, lse, one, 2, 2, kIg, &out));
  expect_result(kB, out, 4);
  for (tlrt_buffer *b : {loss, lse, one, two}) tlrt_buffer_free(b);
}

void check_tape(const Fixture &f, tlrt_buffer *lab2) {
  const char *fn = "tlrt_tape_cross_entropy_ignore";
  tlrt_tape *t = nullptr;
  TH_OK(tlrt_tape_new(TLRT_DEVICE_CPU, &t));
  const uint64_t dims[2] = {2, 2}, dims1[1] = {4};
  uint64_t x = 0, v = 0, out = 0;
  TH_OK(tlrt_tape_leaf(t, f.a, dims, 2, true, &x));
  TH_OK(tlrt_tape_leaf(t, f.b, dims1, 1, true, &v));
  BAD(tlrt_tape_cross_entropy_ignore(t, x, nullptr, kIg, &out), TLRT_ERR_NULL_ARGUMENT, fn,
      "labels");
  BAD(tlrt_tape_cross_entropy_ignore(t, x, f.b, kIg, &out), TLRT_ERR_DTYPE, fn, "labels");
  BAD(tlrt_tape_cross_entropy_ignore(t, v, lab2, kIg, &out), TLRT_ERR_SHAPE, fn, "logits");
  tlrt_buffer *l3 = i64_buf({0, 1, 0});
  BAD(tlrt_tape_cross_entropy_ignore(t, x, l3, kIg, &out), TLRT_ERR_SHAPE, fn, "labels");
  tlrt_buffer_free(l3);
  TH_OK(tlrt_tape_cross_entropy_ignore(t, x, lab2, kIg, &out));
  TH_OK(tlrt_tape_backward(t, out));
  tlrt_tape_free(t);
}

void check_mixed_devices(const Fixture &f, tlrt_buffer *lab2) {
  if (!th::cuda_ready()) {
    std::printf("no usable CUDA device: mixed-device checks skipped\n");
    return;
  }
  tlrt_buffer *c4 = nullptr, *cl = nullptr;
  TH_OK(tlrt_buffer_to_device(f.a, TLRT_DEVICE_CUDA(0), &c4));
  TH_OK(tlrt_buffer_to_device(lab2, TLRT_DEVICE_CUDA(0), &cl));
  tlrt_buffer *loss = kSentinel, *lse = kSentinel;
  BAD(tlrt_cross_entropy_fwd(c4, lab2, 2, 2, kIg, &loss, &lse), TLRT_ERR_DEVICE_MISMATCH, kF,
      "logits", "labels");
  CLEARED(loss);
  CLEARED(lse);
  loss = lse = nullptr;
  TH_OK(tlrt_cross_entropy_fwd(c4, cl, 2, 2, kIg, &loss, &lse));
  tlrt_buffer *one = th::upload({1.0f}), *out = kSentinel;
  BAD(tlrt_cross_entropy_bwd(c4, cl, lse, one, 2, 2, kIg, &out), TLRT_ERR_DEVICE_MISMATCH, kB,
      "logits", "grad_loss");
  CLEARED(out);
  for (tlrt_buffer *b : {c4, cl, loss, lse, one}) tlrt_buffer_free(b);
}

}  // namespace

int main() {
  const tlrt_allocator_stats start = th::stats();
  {
    Fixture f = make_fixture();
    tlrt_buffer *lab2 = i64_buf({1, -100}), *lab3 = i64_buf({0, 1, 1}), *lab2_32 = nullptr;
    const int32_t l32[2] = {0, 1};
    TH_OK(tlrt_buffer_from_i32(TLRT_DEVICE_CPU, l32, 2, &lab2_32));
    check_fwd(f, lab2, lab2_32, lab3);
    check_bwd(f, lab2);
    check_tape(f, lab2);
    check_mixed_devices(f, lab2);
    for (tlrt_buffer *b : {lab2, lab3, lab2_32}) tlrt_buffer_free(b);
    free_fixture(f);
  }
  expect_no_leaks(start);
  return th::finish("test_bad_input_cross_entropy");
}
