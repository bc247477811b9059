// The numeric policy of one call, resolved by core (core/settings.hpp) from the process switches
// (tlrt_set_deterministic, tlrt_set_allow_tf32, TORCHLEAN_RT_GEMM_ISA) and passed to the backend
// as a parameter. Backends never read a switch themselves: what a kernel may do is in its
// arguments.
#pragma once

#include <cstdint>

namespace tlrt {

// How the products of a fused op (attention) may be formed.
enum class Precision : uint8_t {
  Exact,      // the header's order of operations in float32, bit for bit the CPU backend
  SplitTf32,  // float32-grade tensor-core products (three TF32 products each), the header's bound
  Tf32,       // one TF32 product each (allow_tf32 on), the header's TF32 bound
};

// The instruction sets of the CPU GEMM kernels, in increasing order; the CPU backend runs the
// best one the processor has, never above the cap it is given.
enum class CpuIsa : uint8_t { Generic = 0, V3 = 1, V4 = 2 };

// What a matrix product (blas, and the convolutions built on it) may do.
struct MatmulPolicy {
  bool allow_tf32 = false;          // CUDA may round the inputs to TF32 in tensor cores
  CpuIsa cpu_isa_cap = CpuIsa::V4;  // the CPU kernels use at most this instruction set
};

}  // namespace tlrt
