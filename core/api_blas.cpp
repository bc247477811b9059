// Matrix-product entry points: validate, allocate the output, handle the empty and n == 0 cases,
// dispatch (abi/tlrt_blas.h states the contracts). Also the TF32 switch (its state lives in
// core/settings.cpp) and the host DGEMM.
#include <climits>
#include <cstdint>
#include <string>

#include "abi/tlrt_blas.h"
#include "core/backend/blas.hpp"
#include "core/backend/memory.hpp"
#include "core/buffer.hpp"
#include "core/error.hpp"
#include "core/shape_check.hpp"
#include "core/settings.hpp"

using namespace tlrt;

namespace {

using ull = unsigned long long;

// ---- sizes -------------------------------------------------------------------------------------

// Checks that operand `name` has batch * rows * cols elements. `dims` names the factors for the
// message ("m * n", or "batch * m * n" for tlrt_bmm).
void check_operand(const Buffer &X, const char *name, bool batched, uint64_t batch,
                   const char *d1, uint64_t rows, const char *d2, uint64_t cols) {
  uint64_t want = 0;
  const bool fits = product3(batch, rows, cols, &want);
  if (fits && want == X.size) return;
  if (batched)
    fail(TLRT_ERR_SHAPE,
         "argument %s has %llu elements, but batch * %s * %s = %llu * %llu * %llu = %s", name,
         (ull)X.size, d1, d2, (ull)batch, (ull)rows, (ull)cols, count_str(want, fits).c_str());
  fail(TLRT_ERR_SHAPE, "argument %s has %llu elements, but %s * %s = %llu * %llu = %s", name,
       (ull)X.size, d1, d2, (ull)rows, (ull)cols, count_str(want, fits).c_str());
}

tlrt_status product(const char *fn, bool batched, const tlrt_buffer *a, const tlrt_buffer *b,
                    uint64_t batch, uint64_t m, uint64_t n, uint64_t p, bool trans_a,
                    bool trans_b, tlrt_buffer **out) {
  if (out) *out = nullptr;
  return guarded(fn, [&] {
    clear_out(out, "out");
    const Buffer &A = input(a, "a");
    const Buffer &B = input(b, "b");
    same_device(A, "a", B, "b");
    // The stored shape is the logical one transposed; the element count is the same.
    check_operand(A, "a", batched, batch, "m", m, "n", n);
    check_operand(B, "b", batched, batch, "n", n, "p", p);
    uint64_t nc = 0;
    const bool fits = product3(batch, m, p, &nc);
    if (!fits || nc > TLRT_MAX_ELEMENTS) {
      if (batched)
        fail(TLRT_ERR_OVERFLOW,
             "the output would have batch * m * p = %s elements, more than TLRT_MAX_ELEMENTS "
             "(2^60) (argument batch = %llu, argument m = %llu, argument p = %llu)",
             count_str(nc, fits).c_str(), (ull)batch, (ull)m, (ull)p);
      fail(TLRT_ERR_OVERFLOW,
           "the output would have m * p = %s elements, more than TLRT_MAX_ELEMENTS (2^60) "
           "(argument m = %llu, argument p = %llu)", count_str(nc, fits).c_str(), (ull)m, (ull)p);
    }
    const bool work = nc != 0 && n != 0;
    if (work && A.dev.cuda) {
      // cuBLAS takes int dimensions and leading dimensions (each of these is one of m, n, p).
      const struct {
        const char *name;
        uint64_t v;
      } dims[] = {{"m", m}, {"n", n}, {"p", p}};
      for (const auto &d : dims)
        if (d.v > (uint64_t)INT_MAX)
          fail(TLRT_ERR_INVALID_ARGUMENT,
               "argument %s = %llu exceeds INT_MAX (2147483647), the largest matrix dimension "
               "cuBLAS accepts (CUDA buffers)", d.name, (ull)d.v);
    }
    Owned y = new_buffer(A.dev, nc);
    if (nc != 0) {
      if (n == 0)
        TLRT_DISPATCH(A.dev, fill, A.dev.ordinal, y->data, 0.0f, nc);
      else
        TLRT_DISPATCH(A.dev, bmm, A.dev.ordinal, A.data, B.data, batch, m, n, p, trans_a,
                      trans_b, matmul_policy(), y->data);
    }
    *out = y.release();
  });
}

// Element count of a caller's float64 array (rows * cols): OVERFLOW beyond TLRT_MAX_ELEMENTS.
uint64_t host_count(const char *name, const char *d1, uint64_t rows, const char *d2,
                    uint64_t cols) {
  uint64_t r = 0;
  const bool fits = product3(1, rows, cols, &r);
  if (!fits || r > TLRT_MAX_ELEMENTS)
    fail(TLRT_ERR_OVERFLOW,
         "argument %s would have %s * %s = %s elements, more than TLRT_MAX_ELEMENTS (2^60) "
         "(argument %s = %llu, argument %s = %llu)",
         name, d1, d2, count_str(r, fits).c_str(), d1, (ull)rows, d2, (ull)cols);
  return r;
}

bool overlap(const double *x, uint64_t nx, const double *y, uint64_t ny) {
  if (nx == 0 || ny == 0) return false;
  const uintptr_t x0 = (uintptr_t)x, y0 = (uintptr_t)y;
  return x0 < y0 + ny * sizeof(double) && y0 < x0 + nx * sizeof(double);
}

}  // namespace

extern "C" {

TLRT_API tlrt_status tlrt_bmm(const tlrt_buffer *a, const tlrt_buffer *b, uint64_t batch,
                              uint64_t m, uint64_t n, uint64_t p, bool trans_a, bool trans_b,
                              tlrt_buffer **out) {
  return product(__func__, true, a, b, batch, m, n, p, trans_a, trans_b, out);
}

TLRT_API tlrt_status tlrt_matmul(const tlrt_buffer *a, const tlrt_buffer *b, uint64_t m,
                                 uint64_t n, uint64_t p, bool trans_a, bool trans_b,
                                 tlrt_buffer **out) {
  return product(__func__, false, a, b, 1, m, n, p, trans_a, trans_b, out);
}

TLRT_API tlrt_status tlrt_dgemm(const double *a, const double *b, uint64_t m, uint64_t n,
                                uint64_t p, double *c) {
  return guarded(__func__, [&] {
    const uint64_t na = host_count("a", "m", m, "n", n);
    const uint64_t nb = host_count("b", "n", n, "p", p);
    const uint64_t nc = host_count("c", "m", m, "p", p);
    if (a == nullptr && na != 0)
      fail(TLRT_ERR_NULL_ARGUMENT, "argument a is NULL, but m * n = %llu", (ull)na);
    if (b == nullptr && nb != 0)
      fail(TLRT_ERR_NULL_ARGUMENT, "argument b is NULL, but n * p = %llu", (ull)nb);
    if (c == nullptr && nc != 0)
      fail(TLRT_ERR_NULL_ARGUMENT, "argument c is NULL, but m * p = %llu", (ull)nc);
    if (nc == 0) return;
    if (overlap(c, nc, a, na))
      fail(TLRT_ERR_INVALID_ARGUMENT, "argument c overlaps argument a");
    if (overlap(c, nc, b, nb))
      fail(TLRT_ERR_INVALID_ARGUMENT, "argument c overlaps argument b");
    if (n == 0) {
      for (uint64_t i = 0; i < nc; ++i) c[i] = 0.0;
      return;
    }
    stub::dgemm_host(a, b, m, n, p, matmul_policy().cpu_isa_cap, c);
  });
}

TLRT_API bool tlrt_set_allow_tf32(bool on) { return set_allow_tf32(on); }

TLRT_API bool tlrt_get_allow_tf32(void) { return allow_tf32(); }

}  // extern "C"
