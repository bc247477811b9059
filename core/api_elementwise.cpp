// Elementwise entry points: validate, allocate the output, dispatch to the backend.
#include "abi/tlrt_elementwise.h"
#include "core/backend/elementwise.hpp"
#include "core/buffer.hpp"
#include "core/error.hpp"

using namespace tlrt;

namespace {

ew::Params params(float p0 = 0.0f, float p1 = 0.0f) { return ew::Params{p0, p1}; }

tlrt_status unary_op(const char *fn, ew::Unary op, const tlrt_buffer *x, ew::Params p,
                     tlrt_buffer **out) {
  return guarded(fn, [&] {
    clear_out(out, "out");
    const Buffer &X = input(x, "x");
    Owned y = new_buffer(X.dev, X.size);
    if (X.size != 0) TLRT_DISPATCH(X.dev, unary, X.dev.ordinal, op, X.data, y->data, X.size, p);
    *out = y.release();
  });
}

tlrt_status binary_op(const char *fn, ew::Binary op, const char *an, const tlrt_buffer *a,
                      const char *bn, const tlrt_buffer *b, ew::Params p, tlrt_buffer **out) {
  return guarded(fn, [&] {
    clear_out(out, "out");
    const Buffer &A = input(a, an);
    const Buffer &B = input(b, bn);
    same_device(A, an, B, bn);
    same_size(A, an, B, bn);
    Owned y = new_buffer(A.dev, A.size);
    if (A.size != 0)
      TLRT_DISPATCH(A.dev, binary, A.dev.ordinal, op, A.data, B.data, y->data, A.size, p);
    *out = y.release();
  });
}

tlrt_status minmax_bwd_op(const char *fn, bool is_max, const tlrt_buffer *a, const tlrt_buffer *b,
                          const tlrt_buffer *g, tlrt_buffer **da, tlrt_buffer **db) {
  if (da) *da = nullptr;
  if (db) *db = nullptr;
  return guarded(fn, [&] {
    clear_out(da, "da");
    clear_out(db, "db");
    const Buffer &A = input(a, "a");
    const Buffer &B = input(b, "b");
    const Buffer &G = input(g, "g");
    same_device(A, "a", B, "b");
    same_device(A, "a", G, "g");
    same_size(A, "a", B, "b");
    same_size(A, "a", G, "g");
    Owned ra = new_buffer(A.dev, A.size);
    Owned rb = new_buffer(A.dev, A.size);
    if (A.size != 0)
      TLRT_DISPATCH(A.dev, minmax_bwd, A.dev.ordinal, is_max, A.data, B.data, G.data, ra->data,
                    rb->data, A.size);
    *da = ra.release();
    *db = rb.release();
  });
}

// eps: the host-scalar rule, then eps >= 0 (-0 included), and a positive eps must stay positive
// in float32 (else the "finite for every finite x" of eps > 0 would not hold).
float check_eps(double eps) {
  const float e = host_scalar(eps, "eps");
  if (!(eps >= 0.0)) fail(TLRT_ERR_INVALID_ARGUMENT, "argument eps = %g must be >= 0", eps);
  if (eps > 0.0 && e == 0.0f)
    fail(TLRT_ERR_INVALID_ARGUMENT,
         "argument eps = %g rounds to 0 in float32; use 0 or at least 2^-149 (about 1.4e-45)", eps);
  return e;
}

// Scalar-domain checks run inside the guard of the op they belong to.
template <class Check>
tlrt_status with_check(const char *fn, Check check, tlrt_buffer **out) {
  if (out) *out = nullptr;
  return guarded(fn, check);
}

}  // namespace

extern "C" {

#define TLRT_UNARY_ENTRY(name, OP)                                             \
  TLRT_API tlrt_status tlrt_##name(const tlrt_buffer *x, tlrt_buffer **out) {  \
    return unary_op("tlrt_" #name, ew::Unary::OP, x, params(), out);           \
  }
TLRT_UNARY_ENTRY(abs, Abs)
TLRT_UNARY_ENTRY(neg, Neg)
TLRT_UNARY_ENTRY(sqrt, Sqrt)
TLRT_UNARY_ENTRY(inv, Inv)
TLRT_UNARY_ENTRY(relu, Relu)
TLRT_UNARY_ENTRY(exp, Exp)
TLRT_UNARY_ENTRY(log, Log)
TLRT_UNARY_ENTRY(sigmoid, Sigmoid)
TLRT_UNARY_ENTRY(tanh, Tanh)
TLRT_UNARY_ENTRY(softplus, Softplus)
TLRT_UNARY_ENTRY(gelu, Gelu)
TLRT_UNARY_ENTRY(silu, Silu)
#undef TLRT_UNARY_ENTRY

#define TLRT_BINARY_ENTRY(name, OP, A, B)                                                     \
  TLRT_API tlrt_status tlrt_##name(const tlrt_buffer *A, const tlrt_buffer *B,                \
                                   tlrt_buffer **out) {                                      \
    return binary_op("tlrt_" #name, ew::Binary::OP, #A, A, #B, B, params(), out);             \
  }
TLRT_BINARY_ENTRY(add, Add, a, b)
TLRT_BINARY_ENTRY(sub, Sub, a, b)
TLRT_BINARY_ENTRY(mul, Mul, a, b)
TLRT_BINARY_ENTRY(div, Div, a, b)
TLRT_BINARY_ENTRY(max, Max, a, b)
TLRT_BINARY_ENTRY(min, Min, a, b)
TLRT_BINARY_ENTRY(abs_bwd, AbsBwd, x, g)
TLRT_BINARY_ENTRY(sqrt_bwd, SqrtBwd, x, g)
TLRT_BINARY_ENTRY(inv_bwd, InvBwd, x, g)
TLRT_BINARY_ENTRY(log_bwd, LogBwd, x, g)
TLRT_BINARY_ENTRY(relu_bwd, ReluBwd, x, g)
TLRT_BINARY_ENTRY(exp_bwd, ExpBwd, x, g)
TLRT_BINARY_ENTRY(sigmoid_bwd, SigmoidBwd, x, g)
TLRT_BINARY_ENTRY(tanh_bwd, TanhBwd, x, g)
TLRT_BINARY_ENTRY(softplus_bwd, SoftplusBwd, x, g)
TLRT_BINARY_ENTRY(gelu_bwd, GeluBwd, x, g)
TLRT_BINARY_ENTRY(silu_bwd, SiluBwd, x, g)
#undef TLRT_BINARY_ENTRY

TLRT_API tlrt_status tlrt_scale(const tlrt_buffer *x, double c, tlrt_buffer **out) {
  float cf = 0.0f;
  tlrt_status s = with_check(
      __func__, [&] { clear_out(out, "out"); cf = host_scalar(c, "c"); }, out);
  if (s != TLRT_OK) return s;
  return unary_op(__func__, ew::Unary::Scale, x, params(cf), out);
}

TLRT_API tlrt_status tlrt_axpy(const tlrt_buffer *a, const tlrt_buffer *b, double c,
                               tlrt_buffer **out) {
  float cf = 0.0f;
  tlrt_status s = with_check(
      __func__, [&] { clear_out(out, "out"); cf = host_scalar(c, "c"); }, out);
  if (s != TLRT_OK) return s;
  return binary_op(__func__, ew::Binary::Axpy, "a", a, "b", b, params(cf), out);
}

// Clamp bounds: the host-scalar rule with both infinities admitted (an infinite bound is none).
TLRT_API tlrt_status tlrt_clamp(const tlrt_buffer *x, double lo, double hi, tlrt_buffer **out) {
  float l = 0.0f, h = 0.0f;
  tlrt_status s = with_check(__func__, [&] {
    clear_out(out, "out");
    l = host_scalar(lo, "lo", HostInf::Both);
    h = host_scalar(hi, "hi", HostInf::Both);
  }, out);
  if (s != TLRT_OK) return s;
  return unary_op(__func__, ew::Unary::Clamp, x, params(l, h), out);
}

TLRT_API tlrt_status tlrt_clamp_bwd(const tlrt_buffer *x, const tlrt_buffer *g, double lo,
                                    double hi, tlrt_buffer **out) {
  float l = 0.0f, h = 0.0f;
  tlrt_status s = with_check(__func__, [&] {
    clear_out(out, "out");
    l = host_scalar(lo, "lo", HostInf::Both);
    h = host_scalar(hi, "hi", HostInf::Both);
  }, out);
  if (s != TLRT_OK) return s;
  return binary_op(__func__, ew::Binary::ClampBwd, "x", x, "g", g, params(l, h), out);
}

TLRT_API tlrt_status tlrt_safe_log(const tlrt_buffer *x, double eps, tlrt_buffer **out) {
  float e = 0.0f;
  tlrt_status s = with_check(__func__, [&] { clear_out(out, "out"); e = check_eps(eps); }, out);
  if (s != TLRT_OK) return s;
  return unary_op(__func__, ew::Unary::SafeLog, x, params(e), out);
}

TLRT_API tlrt_status tlrt_safe_log_bwd(const tlrt_buffer *x, const tlrt_buffer *g, double eps,
                                       tlrt_buffer **out) {
  float e = 0.0f;
  tlrt_status s = with_check(__func__, [&] { clear_out(out, "out"); e = check_eps(eps); }, out);
  if (s != TLRT_OK) return s;
  return binary_op(__func__, ew::Binary::SafeLogBwd, "x", x, "g", g, params(e), out);
}

TLRT_API tlrt_status tlrt_max_bwd(const tlrt_buffer *a, const tlrt_buffer *b,
                                  const tlrt_buffer *g, tlrt_buffer **da, tlrt_buffer **db) {
  return minmax_bwd_op(__func__, true, a, b, g, da, db);
}

TLRT_API tlrt_status tlrt_min_bwd(const tlrt_buffer *a, const tlrt_buffer *b,
                                  const tlrt_buffer *g, tlrt_buffer **da, tlrt_buffer **db) {
  return minmax_bwd_op(__func__, false, a, b, g, da, db);
}

}  // extern "C"
