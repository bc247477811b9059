// The per-element definition of every elementwise op, shared by the CPU stub and the CUDA
// backend: each backend runs these same functions over its arrays, so the two agree bit for bit
// by construction (same operations, same order, no contraction on either compiler).
#pragma once

#include "core/numerics/hd.hpp"
#include "core/numerics/shared_math.hpp"

namespace tlrt {
namespace ew {

// Scalar parameters of an op (already rounded to float32 by core).
struct Params {
  float p0;
  float p1;
};

// Ops of one input: y = f(x).
#define TLRT_UNARY_OPS(X) \
  X(Abs) X(Neg) X(Sqrt) X(Inv) X(Relu) X(Scale) X(Clamp) X(Exp) X(Log) X(Sigmoid) X(Tanh) \
  X(Softplus) X(Gelu) X(SafeLog) X(Silu)
// Ops of two inputs: y = f(a, b); for backward kernels a = x (forward input), b = g (gradient).
#define TLRT_BINARY_OPS(X) \
  X(Add) X(Sub) X(Mul) X(Div) X(Max) X(Min) X(Axpy) X(AbsBwd) X(SqrtBwd) X(InvBwd) X(LogBwd) \
  X(ReluBwd) X(ClampBwd) X(ExpBwd) X(SigmoidBwd) X(TanhBwd) X(SoftplusBwd) X(GeluBwd) X(SafeLogBwd) \
  X(SiluBwd)

#define TLRT_ENUM_ITEM(name) name,
enum class Unary : uint8_t { TLRT_UNARY_OPS(TLRT_ENUM_ITEM) };
enum class Binary : uint8_t { TLRT_BINARY_OPS(TLRT_ENUM_ITEM) };
#undef TLRT_ENUM_ITEM

// NaN-propagating IEEE 754-2019 maximum/minimum (-0 < +0). Written as selects, not branches, so
// the CPU loops vectorise: on equal operands the bitwise AND (max) / OR (min) of the two
// encodings picks +0 / -0 when the zeros differ in sign and is the value itself otherwise. The NaN
// returned is a + b (whichever operand is NaN propagates); payloads are unspecified.
TLRT_HD float max_f(float a, float b) {
  float m = a > b ? a : b;
  m = a == b ? num::u2f(num::f2u(a) & num::f2u(b)) : m;
  return (num::isnan(a) | num::isnan(b)) ? a + b : m;
}
TLRT_HD float min_f(float a, float b) {
  float m = a < b ? a : b;
  m = a == b ? num::u2f(num::f2u(a) | num::f2u(b)) : m;
  return (num::isnan(a) | num::isnan(b)) ? a + b : m;
}

template <Unary OP>
TLRT_HD float unary(float x, Params p) {
  if constexpr (OP == Unary::Abs) return num::u2f(num::f2u(x) & 0x7FFFFFFFu);
  if constexpr (OP == Unary::Neg) return num::u2f(num::f2u(x) ^ 0x80000000u);
#if defined(__CUDA_ARCH__)
  if constexpr (OP == Unary::Sqrt) return __fsqrt_rn(x);
  if constexpr (OP == Unary::Inv) return __frcp_rn(x);
#else
  if constexpr (OP == Unary::Sqrt) return __builtin_sqrtf(x);
  if constexpr (OP == Unary::Inv) return 1.0f / x;
#endif
  if constexpr (OP == Unary::Relu) return x > 0.0f ? x : (num::isnan(x) ? x : 0.0f);
  if constexpr (OP == Unary::Scale) return x * p.p0;
  if constexpr (OP == Unary::Clamp) return min_f(max_f(x, p.p0), p.p1);
  if constexpr (OP == Unary::Exp) return math::exp_f(x);
  if constexpr (OP == Unary::Log) return math::log_f(x);
  if constexpr (OP == Unary::Sigmoid) return math::sigmoid_f(x);
  if constexpr (OP == Unary::Tanh) return math::tanh_f(x);
  if constexpr (OP == Unary::Softplus) return math::softplus_f(x);
  if constexpr (OP == Unary::Gelu) return math::gelu_f(x);
  if constexpr (OP == Unary::SafeLog) return math::log_f(math::softplus_f(x) + p.p0);
  if constexpr (OP == Unary::Silu) return math::silu_f(x);
  return x;
}

template <Binary OP>
TLRT_HD float binary(float a, float b, Params p) {
  if constexpr (OP == Binary::Add) return a + b;
  if constexpr (OP == Binary::Sub) return a - b;
  if constexpr (OP == Binary::Mul) return a * b;
  if constexpr (OP == Binary::Div) return a / b;
  if constexpr (OP == Binary::Max) return max_f(a, b);
  if constexpr (OP == Binary::Min) return min_f(a, b);
  if constexpr (OP == Binary::Axpy) return num::fma(p.p0, b, a);
  // Backward kernels: a = x, b = g.
  if constexpr (OP == Binary::AbsBwd) {
    if (num::isnan(a)) return a + b;
    return a > 0.0f ? b : (a < 0.0f ? -b : 0.0f);
  }
  if constexpr (OP == Binary::SqrtBwd) {
    if (num::isnan(a)) return a + b;
    return a > 0.0f ? b / (2.0f * unary<Unary::Sqrt>(a, p)) : 0.0f;
  }
  if constexpr (OP == Binary::InvBwd) return -(b / a) / a;
  if constexpr (OP == Binary::LogBwd) return b / a;
  if constexpr (OP == Binary::ReluBwd) {
    if (num::isnan(a)) return a + b;
    return a > 0.0f ? b : 0.0f;
  }
  if constexpr (OP == Binary::ClampBwd) {
    if (num::isnan(a)) return a + b;
    return (a > p.p0 && a < p.p1) ? b : 0.0f;
  }
  if constexpr (OP == Binary::ExpBwd) return b * math::exp_f(a);
  if constexpr (OP == Binary::SigmoidBwd) {
    const float s = math::sigmoid_f(a);
    return b * (s * (1.0f - s));
  }
  if constexpr (OP == Binary::TanhBwd) {
    const float t = math::tanh_f(a);
    return b * (1.0f - t * t);
  }
  if constexpr (OP == Binary::SoftplusBwd) return b * math::sigmoid_f(a);
  if constexpr (OP == Binary::GeluBwd) return b * math::gelu_grad_f(a);
  if constexpr (OP == Binary::SafeLogBwd)
    return b * (math::sigmoid_f(a) / (math::softplus_f(a) + p.p0));
  if constexpr (OP == Binary::SiluBwd) return b * math::silu_grad_f(a);
  return a;
}

// Gradients of max (is_max) or min: winner gets g, loser 0, ties split 0.5/0.5, NaN wins.
TLRT_HD void minmax_bwd(bool is_max, float a, float b, float g, float *da, float *db) {
  const bool an = num::isnan(a), bn = num::isnan(b);
  bool a_wins, b_wins;
  if (an || bn) {
    a_wins = an;
    b_wins = !an;
  } else {
    a_wins = is_max ? a > b : a < b;
    b_wins = is_max ? b > a : b < a;
  }
  if (a_wins) {
    *da = g;
    *db = 0.0f;
  } else if (b_wins) {
    *da = 0.0f;
    *db = g;
  } else {
    const float h = 0.5f * g;
    *da = h;
    *db = h;
  }
}

}  // namespace ew
}  // namespace tlrt
