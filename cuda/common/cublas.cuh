// Shared by the CUDA translation units that call cuBLAS (defined in cuda/blas.cu): one handle per
// (host thread, device), bound to the device's current stream, with its own workspace from the
// stream-ordered pool, in CUBLAS_DEFAULT_MATH or (allow_tf32) CUBLAS_TF32_TENSOR_OP_MATH; and the
// status mapping of abi/tlrt_blas.h (ALLOC_FAILED -> TLRT_ERR_OUT_OF_MEMORY, a pending CUDA error
// -> that error, anything else -> TLRT_ERR_LIBRARY with the status name).
#pragma once

#include <cublas_v2.h>

namespace tlrt {
namespace cuda {

cublasHandle_t cublas_handle(int dev, bool allow_tf32);
void cublas_check(cublasStatus_t s, const char *what);

}  // namespace cuda
}  // namespace tlrt
