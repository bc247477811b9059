// 16-byte loads and stores of float4 (the caller guarantees the alignment; the CPU emulator,
// tests/emu/cuda_emu.hpp, checks it), shared by the kernels that move rows four floats at a time.
#pragma once

namespace tlrt {
namespace cuda {
namespace vec4 {

__device__ __forceinline__ float4 ld4(const float *p) {
#ifdef TLRT_CUDA_EMULATION
  emu::check_aligned(p, 16);
#endif
  return *reinterpret_cast<const float4 *>(p);
}

__device__ __forceinline__ void st4(float *p, const float4 &v) {
#ifdef TLRT_CUDA_EMULATION
  emu::check_aligned(p, 16);
#endif
  *reinterpret_cast<float4 *>(p) = v;
}

}  // namespace vec4
}  // namespace cuda
}  // namespace tlrt
