// Asynchronous global -> shared copies (cp.async, sm_80+) and the dynamic shared memory of a
// kernel, for kernels that double-buffer their tiles. tests/emu/cuda_emu.hpp provides the same
// interface on the CPU (the kernel header picks it under TLRT_CUDA_EMULATION).
#pragma once

#include <cuda_runtime.h>

namespace tlrt {
namespace cuda {
namespace async {

// The kernel's dynamic shared memory (16-byte aligned).
__device__ __forceinline__ float *dynamic_smem() {
  extern __shared__ __align__(128) float4 tlrt_dynamic_smem[];  // 128: WMMA needs 32
  return reinterpret_cast<float *>(tlrt_dynamic_smem);
}

// Copies 16 (4) bytes from global src to shared dst, both 16 (4) byte aligned, or writes zeros
// there when !valid (src is then not read but must still be a valid address). The copy lands at
// some point before the issuing thread's wait<> that covers its group.
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

// Closes the group of copies issued since the last commit.
__device__ __forceinline__ void commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

// Waits until at most N of this thread's committed groups are still in flight. Other threads
// see the data only after a __syncthreads() that follows their writers' waits.
template <unsigned N>
__device__ __forceinline__ void wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
}

}  // namespace async
}  // namespace cuda
}  // namespace tlrt
