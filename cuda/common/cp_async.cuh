// Asynchronous global -> shared copies (cp.async, sm_80+) and a kernel's dynamic shared memory.
// tests/emu/cuda_emu.hpp provides the same interface on the CPU (under TLRT_CUDA_EMULATION).
#pragma once

#include <cuda_runtime.h>

namespace tlrt {
namespace cuda {
namespace async {

__device__ __forceinline__ float *dynamic_smem() {
  extern __shared__ __align__(128) float4 tlrt_dynamic_smem[];  // 128: WMMA needs 32
  return reinterpret_cast<float *>(tlrt_dynamic_smem);
}

// 16 (4) bytes global src -> shared dst, both so aligned, or zeros when !valid (src unread but a
// valid address); the copy lands before the issuing thread's wait<> that covers its group.
__device__ __forceinline__ void copy16(float *dst, const float *src, bool valid) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(src),
               "r"(valid ? 16u : 0u)
               : "memory");
}
__device__ __forceinline__ void copy4(float *dst, const float *src, bool valid) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(s), "l"(src),
               "r"(valid ? 4u : 0u)
               : "memory");
}

__device__ __forceinline__ void commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

// At most N of this thread's groups left in flight; other threads see the data only after a
// __syncthreads() that follows their writers' waits.
template <unsigned N>
__device__ __forceinline__ void wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

}  // namespace async
}  // namespace cuda
}  // namespace tlrt
