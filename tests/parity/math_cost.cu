// Static device cost of the shared float32 math (core/numerics/shared_math.hpp) and of the
// elementwise / RNG ops built on it, without a GPU: one trivial kernel per function,
// y[i] = f(x[i]) (binary ops: y[i] = f(a[i], g[i])), compiled the way the library compiles its
// kernels (-fmad=false), then counted.
//
// SASS (exact for sm_90, where every instruction is 16 bytes: a kernel's static instruction
// count is the size of its .text.<kernel> section / 16, less the trailing NOP padding (opcode
// 0x918, the low 12 bits of an instruction) and the final self-branch (0x947)):
//   nvcc -std=c++17 -O3 -fmad=false -arch=sm_90 -I. -cubin -o mc.cubin tests/parity/math_cost.cu
//   python3 - mc.cubin <<'PY'
//   import struct, sys
//   d = open(sys.argv[1], 'rb').read()
//   off, = struct.unpack_from('<Q', d, 0x28); esz, num, stri = struct.unpack_from('<HHH', d, 0x3a)
//   sh = [struct.unpack_from('<IIQQQQ', d, off + i * esz) for i in range(num)]
//   nm = lambda o: d[sh[stri][4] + o:d.index(b'\0', sh[stri][4] + o)].decode()
//   for s in sh:
//       if nm(s[0]).startswith('.text.'):
//           ops = [struct.unpack_from('<Q', d, s[4] + 16 * k)[0] & 0xfff
//                  for k in range(s[5] // 16)]
//           while ops and ops[-1] == 0x918: ops.pop()
//           if ops and ops[-1] == 0x947: ops.pop()
//           print(f'{nm(s[0])[6:]:18} {len(ops):4}')
//   PY
// Subtract kernel "base" (index, bounds check, load, store: 16) from the unary kernels and
// "base_binary" (20) from the op_*_bwd ones. cuobjdump -sass, where installed, shows the same code.
// PTX (a proxy: instructions = lines ending in ';' that are not declarations, moves or negations,
// which fold into operands; PTX div.rn.f32 becomes ~10 SASS instructions plus a slow-path
// subroutine, 64-bit integer ops two or more):
//   nvcc -std=c++17 -O3 -fmad=false -arch=sm_90 -I. -ptx -o mc.ptx tests/parity/math_cost.cu
//   awk '/^\.visible \.entry/ {k=$3; sub(/\(.*/,"",k)} /;$/ && k != "" &&
//       !/^[ \t]*(\.|ret|mov|neg|cvta|\/\/)/ {c[k]++} END {for (k in c) print k, c[k]}' mc.ptx
// Static counts include every branch of a function; for the branch-free shared math that is also
// the dynamic count per element (safe_log_bwd's static count includes the IEEE division's slow
// path). The bandwidth roof on an H200 leaves ~60 SASS instructions per element for a unary op
// and ~90 for a backward (binary) op.
#include "core/numerics/elementwise_ops.hpp"
#include "core/numerics/rng.hpp"
#include "core/numerics/shared_math.hpp"

namespace {

__device__ __forceinline__ int tid() { return blockIdx.x * blockDim.x + threadIdx.x; }
constexpr tlrt::ew::Params kParams{1e-6f, 0.0f};  // eps of safe_log / safe_log_bwd

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
    if (i < n) y[i] = tlrt::ew::binary<tlrt::ew::Binary::op>(a[i], g[i], kParams);             \
  }

// Skeletons (index, bounds check, loads, store) to subtract from the others.
TLRT_COST_UNARY(base, v)
TLRT_COST_BINARY(base_binary, Add)
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
TLRT_COST_UNARY(sin2pi_f, tlrt::math::sin2pi_f(v))
TLRT_COST_UNARY(silu_f, tlrt::math::silu_f(v))
TLRT_COST_UNARY(silu_grad_f, tlrt::math::silu_grad_f(v))
// Both results of sincos2pi_f (one load, two stores: subtract base + 1).
extern "C" __global__ void sincos2pi_f(const float *__restrict x, float *__restrict y, int n) {
  const int i = tid();
  if (i < n) tlrt::math::sincos2pi_f(x[i], y[i], y[n + i]);
}
// The elementwise ops as cuda/elementwise.cu instantiates them.
TLRT_COST_UNARY(op_safe_log, (tlrt::ew::unary<tlrt::ew::Unary::SafeLog>(v, kParams)))
TLRT_COST_BINARY(op_exp_bwd, ExpBwd)
TLRT_COST_BINARY(op_sigmoid_bwd, SigmoidBwd)
TLRT_COST_BINARY(op_tanh_bwd, TanhBwd)
TLRT_COST_BINARY(op_softplus_bwd, SoftplusBwd)
TLRT_COST_BINARY(op_gelu_bwd, GeluBwd)
TLRT_COST_BINARY(op_safe_log_bwd, SafeLogBwd)
TLRT_COST_BINARY(op_silu_bwd, SiluBwd)

// rand_normal's math for one PAIR of outputs (the SplitMix64 hashing of cuda/rng.cu excluded):
// u1 in (0, 1], u2 in [0, 1) as the RNG forms them from two 24-bit integers; per output, half.
extern "C" __global__ void normal_math(const unsigned *__restrict r1, const unsigned *__restrict r2,
                                       float *__restrict y, int n) {
  const int i = tid();
  if (i < n) {
    const float u1 = (float)((r1[i] >> 8) + 1u) * 5.9604644775390625e-8f;
    const float u2 = (float)(r2[i] >> 8) * 5.9604644775390625e-8f;
    const float radius = __fsqrt_rn(-2.0f * tlrt::math::log_f(u1));
    float s, c;
    tlrt::math::sincos2pi_f(u2, s, c);
    y[2 * i] = radius * c;
    y[2 * i + 1] = radius * s;
  }
}

// The whole normal pair as the RNG computes it (tlrt::rng::normal_pair: two hashes included).
extern "C" __global__ void normal_pair(float *__restrict y, int n, unsigned long long key) {
  const int i = tid();
  if (i < n) tlrt::rng::normal_pair(key, i, 0.0f, 1.0f, y[2 * i], y[2 * i + 1]);
}

// One SplitMix64 draw as a uniform (tlrt::rng::uniform).
extern "C" __global__ void uniform_one(float *__restrict y, int n, unsigned long long key) {
  const int i = tid();
  if (i < n) y[i] = tlrt::rng::uniform(key, i);
}
