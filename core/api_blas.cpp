// Matrix-product entry points: validate, allocate the output, handle the empty and n == 0 cases,
// dispatch (abi/tlrt_blas.h states the contracts). Also the linear layer (product, bias and
// activation; its backward), the TF32 switch (its state lives in core/settings.cpp) and the host
// DGEMM.
#include <climits>
#include <cstdint>
#include <string>

#include "abi/tlrt_blas.h"
#include "core/backend/blas.hpp"
#include "core/backend/elementwise.hpp"
#include "core/backend/memory.hpp"
#include "core/backend/reduce.hpp"
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

// ---- linear layers --------------------------------------------------------------------------

void check_activation(uint32_t activation) {
  if (activation != TLRT_ACT_NONE && activation != TLRT_ACT_GELU)
    fail(TLRT_ERR_INVALID_ARGUMENT, "argument activation = %u is not TLRT_ACT_NONE (0) or "
         "TLRT_ACT_GELU (1)", activation);
}

// cuBLAS(Lt) takes int dimensions: rows, in, out must fit when there is work on CUDA.
void check_cuda_dims(const Buffer &X, uint64_t rows, uint64_t in, uint64_t out) {
  if (!X.dev.cuda) return;
  const struct {
    const char *name;
    uint64_t v;
  } dims[] = {{"rows", rows}, {"in_features", in}, {"out_features", out}};
  for (const auto &d : dims)
    if (d.v > (uint64_t)INT_MAX)
      fail(TLRT_ERR_INVALID_ARGUMENT,
           "argument %s = %llu exceeds INT_MAX (2147483647), the largest matrix dimension "
           "cuBLAS accepts (CUDA buffers)", d.name, (ull)d.v);
}

// Element count of an output of rows * cols: TLRT_ERR_OVERFLOW beyond TLRT_MAX_ELEMENTS.
uint64_t output_count(const char *name, const char *d1, uint64_t rows, const char *d2,
                      uint64_t cols) {
  uint64_t n = 0;
  const bool fits = product3(1, rows, cols, &n);
  if (!fits || n > TLRT_MAX_ELEMENTS)
    fail(TLRT_ERR_OVERFLOW, "argument %s would receive %s * %s = %s elements, more than "
         "TLRT_MAX_ELEMENTS (2^60) (argument %s = %llu, argument %s = %llu)", name, d1, d2,
         count_str(n, fits).c_str(), d1, (ull)rows, d2, (ull)cols);
  return n;
}

tlrt_buffer *second_reference(tlrt_buffer *b) {
  const tlrt_status s = tlrt_buffer_retain(b);
  if (s != TLRT_OK) fail(s, "retaining the output buffer");
  return b;
}

}  // namespace

extern "C" {

TLRT_API tlrt_status tlrt_linear_fwd(const tlrt_buffer *x, const tlrt_buffer *w,
                                     const tlrt_buffer *b, uint64_t rows, uint64_t in_features,
                                     uint64_t out_features, uint32_t activation, tlrt_buffer **y,
                                     tlrt_buffer **pre) {
  const uint64_t in = in_features, out = out_features;
  if (y) *y = nullptr;
  if (pre) *pre = nullptr;
  return guarded(__func__, [&] {
    clear_out(y, "y");
    const Buffer &X = input(x, "x");
    const Buffer &W = input(w, "w");
    same_device(X, "x", W, "w");
    const Buffer *B = nullptr;
    if (b != nullptr) {
      B = &input(b, "b");
      same_device(X, "x", *B, "b");
    }
    check_activation(activation);
    check_matrix(X, "x", rows, in, "rows", "in_features");
    check_matrix(W, "w", out, in, "out_features", "in_features");
    if (B) check_matrix(*B, "b", out, 1, "out_features", "1");
    const uint64_t n = output_count("y", "rows", rows, "out_features", out);
    if (n != 0) check_cuda_dims(X, rows, in, out);
    Owned p = new_buffer(X.dev, n);
    if (n != 0)
      TLRT_DISPATCH(X.dev, linear, X.dev.ordinal, X.data, W.data, B ? B->data : nullptr, rows,
                    in, out, matmul_policy(), p->data);
    if (activation == TLRT_ACT_NONE) {
      if (pre) *pre = second_reference(p.token());
      *y = p.release();
      return;
    }
    Owned a = new_buffer(X.dev, n);
    if (n != 0)
      TLRT_DISPATCH(X.dev, unary, X.dev.ordinal, ew::Unary::Gelu, p->data, a->data, n,
                    ew::Params{0.0f, 0.0f});
    *y = a.release();
    if (pre) *pre = p.release();
  });
}

TLRT_API tlrt_status tlrt_linear_bwd(const tlrt_buffer *dy, const tlrt_buffer *x,
                                     const tlrt_buffer *w, const tlrt_buffer *pre, uint64_t rows,
                                     uint64_t in_features, uint64_t out_features,
                                     uint32_t activation, tlrt_buffer **dx, tlrt_buffer **dw,
                                     tlrt_buffer **db) {
  const uint64_t in = in_features, out = out_features;
  if (dx) *dx = nullptr;
  if (dw) *dw = nullptr;
  if (db) *db = nullptr;
  return guarded(__func__, [&] {
    const Buffer &G = input(dy, "dy");
    const Buffer &X = input(x, "x");
    const Buffer &W = input(w, "w");
    same_device(G, "dy", X, "x");
    same_device(G, "dy", W, "w");
    check_activation(activation);
    const Buffer *P = nullptr;
    if (activation == TLRT_ACT_GELU) {
      if (pre == nullptr)
        fail(TLRT_ERR_NULL_ARGUMENT, "argument pre is NULL with activation TLRT_ACT_GELU");
      P = &input(pre, "pre");
      same_device(G, "dy", *P, "pre");
    }
    const uint64_t n = check_matrix(G, "dy", rows, out, "rows", "out_features");
    // dx has x's shape, dw has w's.
    const uint64_t nx = check_matrix(X, "x", rows, in, "rows", "in_features");
    const uint64_t nw = check_matrix(W, "w", out, in, "out_features", "in_features");
    if (P) check_matrix(*P, "pre", rows, out, "rows", "out_features");
    if (n != 0) check_cuda_dims(G, rows, in, out);
    const Dev dev = G.dev;
    // dpre: dy itself, or g * gelu'(pre) (tlrt_gelu_bwd's op: a = pre, b = g).
    Owned dp;
    const float *dpre = G.data;
    if (P && n != 0 && (dx || dw || db)) {
      dp = new_buffer(dev, n);
      TLRT_DISPATCH(dev, binary, dev.ordinal, ew::Binary::GeluBwd, P->data, G.data, dp->data, n,
                    ew::Params{0.0f, 0.0f});
      dpre = dp->data;
    }
    Owned ox, ow, ob;
    if (dx) {
      ox = new_buffer(dev, nx);
      if (nx != 0) {
        if (out == 0)
          TLRT_DISPATCH(dev, fill, dev.ordinal, ox->data, 0.0f, nx);
        else
          TLRT_DISPATCH(dev, bmm, dev.ordinal, dpre, W.data, 1, rows, out, in, false, false,
                        matmul_policy(), ox->data);
      }
    }
    if (dw) ow = new_buffer(dev, nw);
    if (db) ob = new_buffer(dev, out);
    float *wd = dw && nw != 0 ? ow->data : nullptr, *bd = db && out != 0 ? ob->data : nullptr;
    if (rows == 0) {  // empty sums
      if (wd) TLRT_DISPATCH(dev, fill, dev.ordinal, wd, 0.0f, nw);
      if (bd) TLRT_DISPATCH(dev, fill, dev.ordinal, bd, 0.0f, out);
    } else if (wd || bd) {
      TLRT_DISPATCH(dev, linear_wgrad, dev.ordinal, dpre, X.data, rows, in, out, matmul_policy(),
                    wd, bd);
    }
    if (dx) *dx = ox.release();
    if (dw) *dw = ow.release();
    if (db) *db = ob.release();
  });
}


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
