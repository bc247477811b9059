// Static device cost of the shared float32 math (core/numerics/shared_math.hpp) and of the
// elementwise / RNG ops built on it, without a GPU: one trivial kernel per function,
// y[i] = f(x[i]) (binary ops: y[i] = f(a[i], g[i])), compiled the way the library compiles its
// kernels (-fmad=false), then counted.
//
// SASS (exact for sm_90: every instruction is 16 bytes, so a kernel's .text section size / 16 is
// its static instruction count; kernel "base" is the load/store/index skeleton to subtract):
//   nvcc -std=c++17 -O3 -fmad=false -arch=sm_90 -I. -cubin -o /tmp/mc.cubin tests/parity/math_cost.cu
//   readelf -SW /tmp/mc.cubin | awk '$2 ~ /^\.text\./ {n=$2; sub(/^\.text\./,"",n);
//       printf "%-28s %5d\n", n, strtonum("0x"$6)/16}'
// PTX (a proxy: instructions = lines ending in ';' that are not declarations; PTX div.rn.f32
// becomes ~10 SASS instructions plus a slow-path call, 64-bit integer ops become two or more):
//   nvcc -std=c++17 -O3 -fmad=false -arch=sm_90 -I. -ptx -o /tmp/mc.ptx tests/parity/math_cost.cu
//   awk '/^\.visible \.entry/ {k=$3; sub(/\(.*/,"",k)} /;$/ && k != "" && !/^\s*\./ &&
//       !/^\s*(ret|\/\/)/ {c[k]++} END {for (k in c) printf "%-28s %5d\n", k, c[k]}' /tmp/mc.ptx
// Static counts include every branch of a function; for the branch-free functions that is also
// the dynamic count per element. The bandwidth roof on an H200 leaves ~60 SASS instructions per
// element for a unary op and ~90 for a backward (binary) op.
#include "core/numerics/elementwise_ops.hpp"
#include "core/numerics/rng.hpp"
#include "core/numerics/shared_math.hpp"

namespace {

__device__ __forceinline__ int tid() { return blockIdx.x * blockDim.x + threadIdx.x; }

}  // namespace

#define TLRT_COST_UNARY(name, expr)                                                           \
  extern "C" __global__ void name(const float *__restrict x, float *__restrict y, int n) {   \
    const int i = tid();                                                                      \
    if (i < n) {                                                                              \
      const float v = x[i];                                                                   \
      y[i] = (expr);                                                                          \
    }                                                                                         \
  }

#define TLRT_COST_BINARY(name, op)                                                            \
  extern "C" __global__ void name(const float *__restrict a, const float *__restrict g,      \
                                  float *__restrict y, int n) {                               \
    const int i = tid();                                                                      \
    if (i < n) y[i] = tlrt::ew::binary<tlrt::ew::Binary::op>(a[i], g[i], tlrt::ew::Params{1e-6f, 0}); \
  }

// Skeleton (index, bounds check, load, store) to subtract from the others.
TLRT_COST_UNARY(base, v)
// The shared math itself.
TLRT_COST_UNARY(exp_f, tlrt::math::exp_f(v))
TLRT_COST_UNARY(log_f, tlrt::math::log_f(v))
TLRT_COST_UNARY(log1p_f, tlrt::math::log1p_f(v))
TLRT_COST_UNARY(tanh_f, tlrt::math::tanh_f(v))
TLRT_COST_UNARY(sigmoid_f, tlrt::math::sigmoid_f(v))
TLRT_COST_UNARY(softplus_f, tlrt::math::softplus_f(v))
TLRT_COST_UNARY(gelu_f, tlrt::math::gelu_f(v))
TLRT_COST_UNARY(gelu_grad_f, tlrt::math::gelu_grad_f(v))
TLRT_COST_UNARY(cos2pi_f, tlrt::math::cos2pi_f(v))
// The elementwise ops as cuda/elementwise.cu instantiates them.
TLRT_COST_UNARY(op_safe_log, (tlrt::ew::unary<tlrt::ew::Unary::SafeLog>(v, tlrt::ew::Params{1e-6f, 0})))
TLRT_COST_BINARY(op_exp_bwd, ExpBwd)
TLRT_COST_BINARY(op_sigmoid_bwd, SigmoidBwd)
TLRT_COST_BINARY(op_tanh_bwd, TanhBwd)
TLRT_COST_BINARY(op_softplus_bwd, SoftplusBwd)
TLRT_COST_BINARY(op_gelu_bwd, GeluBwd)
TLRT_COST_BINARY(op_safe_log_bwd, SafeLogBwd)

// rand_normal's math for one element (the SplitMix64 hashing of cuda/rng.cu excluded): u1 in
// (0, 1], u2 in [0, 1) as the RNG forms them from two 24-bit integers.
extern "C" __global__ void normal_math(const unsigned *__restrict r1, const unsigned *__restrict r2,
                                       float *__restrict y, int n) {
  const int i = tid();
  if (i < n) {
    const float u1 = (float)((r1[i] >> 8) + 1u) * 5.9604644775390625e-8f;
    const float u2 = (float)(r2[i] >> 8) * 5.9604644775390625e-8f;
    y[i] = __fsqrt_rn(-2.0f * tlrt::math::log_f(u1)) * tlrt::math::cos2pi_f(u2);
  }
}
