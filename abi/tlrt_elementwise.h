/* libtorchlean_rt: elementwise ops.
 *
 * Every op here maps equal-sized buffers to a fresh buffer of the same size on the same device:
 * out[i] = f(x[i]) (unary), f(a[i], b[i]) (binary), or for backward kernels dx[i] = g[i] * f'(x[i])
 * with the argument order (x, g) of the forward input and the upstream gradient. Empty inputs give
 * empty outputs. Host scalars (double) follow the host-scalar rule of torchlean_rt.h: rounded once
 * to float32; NaN, +-inf, or a finite value that rounds to +-inf in float32 (|v| >= 2^128 - 2^103)
 * is TLRT_ERR_INVALID_ARGUMENT, except where an op below names an exception (tlrt_clamp's
 * infinite bounds).
 *
 * Errors, for every function here: TLRT_ERR_NULL_ARGUMENT (any buffer or out pointer);
 * TLRT_ERR_RELEASED (an input's storage was released); TLRT_ERR_SHAPE (inputs of different sizes;
 * the message names both); TLRT_ERR_DEVICE_MISMATCH (inputs on different devices);
 * TLRT_ERR_OUT_OF_MEMORY; TLRT_ERR_CUDA; TLRT_ERR_DEVICE_LOST; plus, for the ops with a host
 * scalar, TLRT_ERR_INVALID_ARGUMENT (the scalar outside the rule or its op's domain, stated below).
 * On failure every out-parameter is NULL.
 *
 * Numeric classes (DESIGN section 4; the parity suite checks them bit for bit on both backends):
 *  - exact: the IEEE binary32 result of the stated operations, identical on CPU and CUDA
 *    (no contraction: where a fused multiply-add is meant, it is written as fma and is one rounding
 *    on both backends);
 *  - shared math: computed by one float32 implementation (core/numerics/shared_math.hpp) compiled
 *    for both backends, so CPU and CUDA agree bit for bit (checked on all 2^32 inputs on an H200);
 *    the accuracy against a float64 reference, measured over all 2^32 inputs, is stated per op in
 *    ulp (of the float32 result; subnormal results count in units of 2^-149). The backward
 *    kernels multiply g by the stated derivative, adding one rounding.
 * NaN propagates through every op (max, min, clamp, relu included); NaN payloads are unspecified.
 * Signed zeros follow IEEE 754-2019 where stated (max/min treat -0 < +0). */
#ifndef TLRT_ELEMENTWISE_H
#define TLRT_ELEMENTWISE_H

#include "tlrt_buffer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- exact binary ops: a[i] op b[i] ------------------------------------------------------ */
TLRT_API tlrt_status tlrt_add(const tlrt_buffer *a, const tlrt_buffer *b, tlrt_buffer **out);
TLRT_API tlrt_status tlrt_sub(const tlrt_buffer *a, const tlrt_buffer *b, tlrt_buffer **out);
TLRT_API tlrt_status tlrt_mul(const tlrt_buffer *a, const tlrt_buffer *b, tlrt_buffer **out);
TLRT_API tlrt_status tlrt_div(const tlrt_buffer *a, const tlrt_buffer *b, tlrt_buffer **out);

/* IEEE 754-2019 maximum / minimum: NaN if either is NaN (unlike C fmaxf), -0 < +0.
 * Numeric class: exact. */
TLRT_API tlrt_status tlrt_max(const tlrt_buffer *a, const tlrt_buffer *b, tlrt_buffer **out);
TLRT_API tlrt_status tlrt_min(const tlrt_buffer *a, const tlrt_buffer *b, tlrt_buffer **out);

/* Gradients of max / min: the winner receives g, the loser 0; on a tie (a == b, +0 == -0
 * included) each receives 0.5 * g; a NaN operand wins (both NaN: a wins). Outputs da and db.
 * Numeric class: exact. */
TLRT_API tlrt_status tlrt_max_bwd(const tlrt_buffer *a, const tlrt_buffer *b,
                                  const tlrt_buffer *g, tlrt_buffer **da, tlrt_buffer **db);
TLRT_API tlrt_status tlrt_min_bwd(const tlrt_buffer *a, const tlrt_buffer *b,
                                  const tlrt_buffer *g, tlrt_buffer **da, tlrt_buffer **db);

/* ---- exact unary ops ------------------------------------------------------------------------ */
/* |x| (clears the sign bit). */
TLRT_API tlrt_status tlrt_abs(const tlrt_buffer *x, tlrt_buffer **out);
/* -x (flips the sign bit). */
TLRT_API tlrt_status tlrt_neg(const tlrt_buffer *x, tlrt_buffer **out);
/* Correctly rounded square root; sqrt(-0) = -0, sqrt(x < 0) = NaN. */
TLRT_API tlrt_status tlrt_sqrt(const tlrt_buffer *x, tlrt_buffer **out);
/* 1 / x (correctly rounded; inv(+-0) = +-inf). */
TLRT_API tlrt_status tlrt_inv(const tlrt_buffer *x, tlrt_buffer **out);
/* x if x > 0, NaN if x is NaN, else +0. */
TLRT_API tlrt_status tlrt_relu(const tlrt_buffer *x, tlrt_buffer **out);
/* x * (float)c. Errors: TLRT_ERR_INVALID_ARGUMENT if c is NaN or +-inf, or rounds to +-inf in
 * float32 (the host-scalar rule). */
TLRT_API tlrt_status tlrt_scale(const tlrt_buffer *x, double c, tlrt_buffer **out);
/* fma((float)c, b[i], a[i]): a + c * b with ONE rounding on both backends.
 * Errors: TLRT_ERR_INVALID_ARGUMENT if c is NaN or +-inf, or rounds to +-inf in float32 (the
 * host-scalar rule). */
TLRT_API tlrt_status tlrt_axpy(const tlrt_buffer *a, const tlrt_buffer *b, double c,
                               tlrt_buffer **out);
/* min(max(x, lo), hi) with the NaN-propagating max/min above: NaN stays NaN, and lo > hi gives
 * hi everywhere (as PyTorch). lo and hi are rounded to float32. Exception to the host-scalar
 * rule: a bound may be -inf or +inf, an infinite bound being no bound on that side (lo = +inf
 * and hi = -inf are accepted too, as values like any other).
 * Errors: TLRT_ERR_INVALID_ARGUMENT if lo or hi is NaN, or is finite but rounds to +-inf in
 * float32 (|v| >= 2^128 - 2^103: pass the infinity itself to mean no bound). */
TLRT_API tlrt_status tlrt_clamp(const tlrt_buffer *x, double lo, double hi, tlrt_buffer **out);

/* ---- exact backward kernels: dx[i] from x[i] and g[i] --------------------------------------- */
/* g for x > 0, -g for x < 0, +0 for x = +-0 whatever g (as relu_bwd), NaN for NaN x. */
TLRT_API tlrt_status tlrt_abs_bwd(const tlrt_buffer *x, const tlrt_buffer *g, tlrt_buffer **out);
/* g / (2 * sqrt(x)) for x > 0; NaN for NaN x; 0 for x <= 0 (the derivative's pole at 0 is
 * reported as 0, upstream's convention). */
TLRT_API tlrt_status tlrt_sqrt_bwd(const tlrt_buffer *x, const tlrt_buffer *g, tlrt_buffer **out);
/* -(g / x) / x. */
TLRT_API tlrt_status tlrt_inv_bwd(const tlrt_buffer *x, const tlrt_buffer *g, tlrt_buffer **out);
/* g / x. */
TLRT_API tlrt_status tlrt_log_bwd(const tlrt_buffer *x, const tlrt_buffer *g, tlrt_buffer **out);
/* g if x > 0; NaN if x is NaN; else 0. */
TLRT_API tlrt_status tlrt_relu_bwd(const tlrt_buffer *x, const tlrt_buffer *g, tlrt_buffer **out);
/* g if lo < x < hi (strictly), NaN if x is NaN, else 0. lo and hi as tlrt_clamp (infinite
 * bounds accepted). Errors: TLRT_ERR_INVALID_ARGUMENT as tlrt_clamp. */
TLRT_API tlrt_status tlrt_clamp_bwd(const tlrt_buffer *x, const tlrt_buffer *g, double lo,
                                    double hi, tlrt_buffer **out);

/* ---- shared-math unary ops (bitwise identical on both backends) ---------------------------- */
/* e^x; overflows to +inf above 88.72284, gradual underflow to +0 below -103.97.
 * Max error 0.90 ulp (0.86 for subnormal results). */
TLRT_API tlrt_status tlrt_exp(const tlrt_buffer *x, tlrt_buffer **out);
/* ln x; log(+-0) = -inf, log(x < 0) = NaN, log(+inf) = +inf. Max error 0.89 ulp. */
TLRT_API tlrt_status tlrt_log(const tlrt_buffer *x, tlrt_buffer **out);
/* Logistic sigmoid 1 / (1 + e^-x); sigmoid(-inf) = 0, sigmoid(+inf) = 1. Max error 0.98 ulp. */
TLRT_API tlrt_status tlrt_sigmoid(const tlrt_buffer *x, tlrt_buffer **out);
/* Hyperbolic tangent; tanh(-0) = -0, exactly +-1 for |x| > 9.1 and at +-inf, never NaN for a
 * non-NaN x (upstream's (e^2x - 1)/(e^2x + 1) overflowed to NaN). Max error 0.78 ulp. */
TLRT_API tlrt_status tlrt_tanh(const tlrt_buffer *x, tlrt_buffer **out);
/* Softplus log(1 + e^x) = max(x, 0) + log1p(e^-|x|); softplus(-inf) = +0, softplus(+inf) = +inf.
 * Max error 1.25 ulp. */
TLRT_API tlrt_status tlrt_softplus(const tlrt_buffer *x, tlrt_buffer **out);
/* GELU, tanh approximation: 0.5 x (1 + tanh(z)), z = sqrt(2/pi) (x + 0.044715 x^3), evaluated in
 * the cancellation-free form x * sigmoid(2 z). gelu(+inf) = +inf, gelu(-inf) = -0 (the limits,
 * not the NaN of inf * 0). Max error 1.01 ulp against the float64 value of the formula. */
TLRT_API tlrt_status tlrt_gelu(const tlrt_buffer *x, tlrt_buffer **out);
/* SiLU (swish) x * sigmoid(x) = x / (1 + e^-x), evaluated as ONE quotient rounded once (not x
 * times a rounded sigmoid). silu(+-0) = +-0, silu(+inf) = +inf, silu(-inf) = -0 (the limits, not
 * the NaN of -inf * 0); silu(x) = x for x >= 16.6771297, -0 for x <= -108.660309 (results below
 * 2^-150 in magnitude); gradual underflow in between. Within 0.9 ulp of the float64
 * x / (1 + e^-x) over all 2^32 inputs (tests/unit/test_shared_math.cpp); CPU and CUDA agree bit
 * for bit on all of them (tests/parity/math_exhaustive.cu). */
TLRT_API tlrt_status tlrt_silu(const tlrt_buffer *x, tlrt_buffer **out);
/* "Safe log": log(softplus(x) + (float)eps), finite for every finite x when eps > 0; composed
 * of the float32 softplus (within 1.25 ulp), one rounded addition and the float32 log (within
 * 0.9 ulp).
 * eps is used as (float)eps.
 * Errors: TLRT_ERR_INVALID_ARGUMENT if eps is NaN or +-inf, or rounds to +inf in float32 (the
 * host-scalar rule); if eps is negative (-0 is accepted); or if eps > 0 rounds to +0 in float32
 * (eps <= 2^-150). */
TLRT_API tlrt_status tlrt_safe_log(const tlrt_buffer *x, double eps, tlrt_buffer **out);

/* ---- shared-math backward kernels ------------------------------------------------------- */
/* g * e^x. */
TLRT_API tlrt_status tlrt_exp_bwd(const tlrt_buffer *x, const tlrt_buffer *g, tlrt_buffer **out);
/* g * s * (1 - s), s = sigmoid(x). */
TLRT_API tlrt_status tlrt_sigmoid_bwd(const tlrt_buffer *x, const tlrt_buffer *g,
                                      tlrt_buffer **out);
/* g * (1 - t * t), t = tanh(x). */
TLRT_API tlrt_status tlrt_tanh_bwd(const tlrt_buffer *x, const tlrt_buffer *g, tlrt_buffer **out);
/* g * sigmoid(x). */
TLRT_API tlrt_status tlrt_softplus_bwd(const tlrt_buffer *x, const tlrt_buffer *g,
                                       tlrt_buffer **out);
/* g * gelu'(x), the analytic derivative of the tanh approximation above; at the infinities the
 * limits: gelu'(+inf) = 1, gelu'(-inf) = -0. gelu' is within 1.24 ulp outside [-0.8, -0.7];
 * inside (its zero is at x = -0.75179) within 1.6e-9 absolute, and 9e-10 wherever the error
 * exceeds 1.25 ulp; before the final rounded multiplication by g. */
TLRT_API tlrt_status tlrt_gelu_bwd(const tlrt_buffer *x, const tlrt_buffer *g, tlrt_buffer **out);
/* g * silu'(x), silu'(x) = s + x s (1 - s) = s (1 + x (1 - s)), s = sigmoid(x), evaluated in
 * float pairs and rounded once before the final rounded multiplication by g. silu'(+-0) = 0.5,
 * silu'(+inf) = 1, silu'(-inf) = -0 (the limits); silu'(x) = 1 for x >= 19.556345, -0 for
 * x <= -108.650978. silu' is within 0.90 ulp of the float64 s + x s (1 - s) outside
 * [-1.35, -1.2]; inside (its zero is at x = -1.27846) within 1.1e-9 absolute, and 5e-10
 * wherever the error exceeds 0.9 ulp (over all 2^32 inputs, as silu). */
TLRT_API tlrt_status tlrt_silu_bwd(const tlrt_buffer *x, const tlrt_buffer *g, tlrt_buffer **out);
/* g * sigmoid(x) / (softplus(x) + eps). Errors: as tlrt_safe_log. */
TLRT_API tlrt_status tlrt_safe_log_bwd(const tlrt_buffer *x, const tlrt_buffer *g, double eps,
                                       tlrt_buffer **out);

#ifdef __cplusplus
}
#endif

#endif /* TLRT_ELEMENTWISE_H */
