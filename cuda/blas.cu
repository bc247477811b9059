// CUDA backend, matrix products: cuBLAS, no kernel of our own.
//
// bmm: cublasSgemmStridedBatched (cublasSgemm when batch == 1, the call torch.matmul makes, so the
// two pick the same kernels) with the row-major mapping of abi/tlrt_blas.h: the row-major product
// C = A B is the column-major product C^T = B^T A^T, so cuBLAS gets (b, a) with
// (m', n', k) = (p, m, n), ldb = trans_b ? n : p, lda = trans_a ? m : n, ldc = p, strides n p,
// m n, m p, alpha = 1, beta = 0 (C is not read). Batches beyond INT_MAX are split into several
// calls (core has checked that m, n, p fit in an int). The cost is cuBLAS's: 2 batch m n p flops,
// at least 4 (batch (m n + n p + m p)) bytes; a 512^3 or larger product is compute-bound (about
// 50 TFLOP/s float32 on an H100/H200 without TF32).
// Last measured: bench/results/2026-11-22-h100-blas.md (products),
// bench/results/2026-11-29-h200-linear.md (linear layers).
//
// linear / linear_wgrad (tlrt_linear_fwd / _bwd): cuBLASLt, so that the bias rides in the
// product's epilogue. Forward: pre (rows, out) is the column-major (out, rows) D = op(A) B with
// A = w as stored (column-major (in, out), lda = in, transposed), B = x (column-major (in, rows),
// ldb = in), (m, n, k) = (out, rows, in), epilogue BIAS (b[j] added to row j of D, a length-m
// vector): one pass over x and w, one write of pre, no separate bias kernel (rows * out * 8 bytes
// saved). Weight gradient: dw (out, in) is the column-major (in, out) D = A op(B) with A = x
// (column-major (in, rows), lda = in), B = dp transposed (stored column-major (out, rows),
// ldb = out), (m, n, k) = (in, out, rows), epilogue BGRADB: cuBLASLt sums op(B) over k into db (a
// length-n vector) while it streams dp for the product, so db costs no second read of dp
// (rows * out * 4 bytes) and no launch. Where cuBLASLt offers no algorithm for a shape (the
// heuristic returns none), the same results come from bmm plus a bias kernel (forward) or
// reduce_axis's tree (db). Descriptors are built per call (a few microseconds of host time, as
// PyTorch does); the cuBLASLt handle is per (thread, device) like the cuBLAS one and shares its
// workspace (the two are used in stream order).
//
// Handles: one cuBLAS handle per (host thread, device), created on the thread's first product on
// that device, bound to the device's current stream (cublasSetStream), with a workspace of its own
// from the stream-ordered pool (cublasSetWorkspace; 32 MiB on compute capability 9.x, 4 MiB
// otherwise, cuBLAS's recommended sizes and PyTorch's, so that the same kernels are eligible), so
// no call allocates. When the current stream has changed since the handle's last call
// (tlrt_stream_set), the handle is bound to the new one and its workspace set again (cublasSetStream
// resets it); the workspace's uses on the previous stream come before the switch, which the new
// stream waits for (cuda/memory.cu). The math mode is set only when the TF32 switch changed since this handle's
// last call: CUBLAS_DEFAULT_MATH (float32) or CUBLAS_TF32_TENSOR_OP_MATH. The handles live in a
// thread_local object whose destructor, at thread exit, destroys them (cublasDestroy waits for
// the device's work) and returns the workspaces to the pool; for the main thread that runs in
// exit() before static destructors and atexit handlers, hence before the CUDA runtime's own
// teardown. Errors there are ignored (a thread exit has nobody to report to). A thread that ends
// without running its thread_local destructors (killed, or a process ended by _exit) leaves its
// handles to the driver's teardown of the process.
//
// Status mapping: CUBLAS_STATUS_ALLOC_FAILED -> TLRT_ERR_OUT_OF_MEMORY; a failed execution with a
// CUDA error pending -> that CUDA error (TLRT_ERR_DEVICE_LOST for sticky errors, else
// TLRT_ERR_CUDA); any other status -> TLRT_ERR_LIBRARY; the message has the status name
// (cublasGetStatusName) and its description.
#include <cublasLt.h>
#include <cublas_v2.h>

#include <algorithm>
#include <climits>

#include "core/backend/blas.hpp"
#include "core/backend/memory.hpp"
#include "core/backend/reduce.hpp"
#include "cuda/common/cublas.cuh"
#include "cuda/common/launch.cuh"

namespace tlrt {
namespace cuda {

namespace {

void check_cublas(cublasStatus_t s, const char *what) {
  if (s == CUBLAS_STATUS_SUCCESS) return;
  if (s == CUBLAS_STATUS_ALLOC_FAILED)
    fail(TLRT_ERR_OUT_OF_MEMORY, "%s: %s (%s)", what, cublasGetStatusName(s),
         cublasGetStatusString(s));
  if (s == CUBLAS_STATUS_EXECUTION_FAILED || s == CUBLAS_STATUS_INTERNAL_ERROR) {
    const cudaError_t e = cudaPeekAtLastError();
    if (e != cudaSuccess) check(e, what);
  }
  fail(TLRT_ERR_LIBRARY, "%s: %s (%s)", what, cublasGetStatusName(s), cublasGetStatusString(s));
}

struct Handle {
  cublasHandle_t h = nullptr;
  cublasLtHandle_t lt = nullptr;  // created on the first linear layer
  cudaStream_t stream = nullptr;  // the stream h is bound to
  cublasMath_t mode = CUBLAS_DEFAULT_MATH;
  void *workspace = nullptr;
  uint64_t workspace_bytes = 0;
};

struct ThreadHandles {
  Handle per_dev[kMaxCudaDevices];
  ~ThreadHandles() {
    for (int d = 0; d < kMaxCudaDevices; ++d) {
      Handle &x = per_dev[d];
      if (x.h == nullptr) continue;
      (void)cudaSetDevice(d);
      (void)cublasDestroy(x.h);  // waits for the device's work, which may use the workspace
      if (x.lt) (void)cublasLtDestroy(x.lt);
      if (x.workspace) dealloc(d, x.workspace, x.workspace_bytes);
      x = Handle{};
    }
  }
};

thread_local ThreadHandles t_handles;

uint64_t workspace_bytes(int dev) {
  return cc_major(dev) >= 9 ? (uint64_t{32} << 20) : (uint64_t{4} << 20);  // cached per device
}

// This thread's handle for dev, bound to the current stream, in the requested math mode.
cublasHandle_t handle(int dev, bool tf32) {
  const cudaStream_t s = stream(dev);  // also makes dev current
  Handle &h = t_handles.per_dev[dev];
  if (h.h == nullptr) {
    Handle fresh;
    check_cublas(cublasCreate(&fresh.h), "cublasCreate");
    try {
      check_cublas(cublasSetStream(fresh.h, s), "cublasSetStream");
      // After cublasSetStream, which resets the workspace to cuBLAS's default.
      fresh.workspace_bytes = workspace_bytes(dev);
      fresh.workspace = alloc(dev, fresh.workspace_bytes);
      check_cublas(cublasSetWorkspace(fresh.h, fresh.workspace, fresh.workspace_bytes),
                   "cublasSetWorkspace");
      check_cublas(cublasSetMathMode(fresh.h, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
    } catch (...) {
      (void)cublasDestroy(fresh.h);
      if (fresh.workspace) dealloc(dev, fresh.workspace, fresh.workspace_bytes);
      throw;
    }
    fresh.mode = CUBLAS_DEFAULT_MATH;
    fresh.stream = s;
    h = fresh;
  } else if (h.stream != s) {
    check_cublas(cublasSetStream(h.h, s), "cublasSetStream");
    check_cublas(cublasSetWorkspace(h.h, h.workspace, h.workspace_bytes), "cublasSetWorkspace");
    h.stream = s;  // only once both hold: a failure is retried on the next call
  }
  const cublasMath_t want = tf32 ? CUBLAS_TF32_TENSOR_OP_MATH : CUBLAS_DEFAULT_MATH;
  if (h.mode != want) {
    check_cublas(cublasSetMathMode(h.h, want), "cublasSetMathMode");
    h.mode = want;
  }
  return h.h;
}

}  // namespace

void bmm(int dev, const float *a, const float *b, uint64_t batch, uint64_t m, uint64_t n,
         uint64_t p, bool trans_a, bool trans_b, const MatmulPolicy &policy, float *c) {
  const cublasHandle_t h = handle(dev, policy.allow_tf32);
  const float one = 1.0f, zero = 0.0f;  // host pointer mode (the handle's default)
  const cublasOperation_t op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int M = (int)p, N = (int)m, K = (int)n;
  const int ldb = trans_b ? (int)n : (int)p;
  const int lda = trans_a ? (int)m : (int)n;
  const int ldc = (int)p;
  if (batch == 1) {
    check_cublas(cublasSgemm(h, op_b, op_a, M, N, K, &one, b, ldb, a, lda, &zero, c, ldc),
                 "cublasSgemm");
    return;
  }
  const long long sa = (long long)(m * n), sb = (long long)(n * p), sc = (long long)(m * p);
  for (uint64_t q0 = 0; q0 < batch; q0 += (uint64_t)INT_MAX) {
    const uint64_t left = batch - q0;
    const int count = left < (uint64_t)INT_MAX ? (int)left : INT_MAX;
    check_cublas(cublasSgemmStridedBatched(h, op_b, op_a, M, N, K, &one, b + q0 * n * p, ldb, sb,
                                           a + q0 * m * n, lda, sa, &zero, c + q0 * m * p, ldc,
                                           sc, count),
                 "cublasSgemmStridedBatched");
  }
}

namespace {

// ---- cuBLASLt ------------------------------------------------------------------------------------

template <class T, cublasStatus_t (*Destroy)(T)>
struct LtObject {
  T p = nullptr;
  LtObject() = default;
  LtObject(const LtObject &) = delete;
  LtObject &operator=(const LtObject &) = delete;
  ~LtObject() {
    if (p) (void)Destroy(p);
  }
};
using OpDesc = LtObject<cublasLtMatmulDesc_t, cublasLtMatmulDescDestroy>;
using Layout = LtObject<cublasLtMatrixLayout_t, cublasLtMatrixLayoutDestroy>;
using Pref = LtObject<cublasLtMatmulPreference_t, cublasLtMatmulPreferenceDestroy>;

template <class V>
void set_desc(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t a, const V &v) {
  check_cublas(cublasLtMatmulDescSetAttribute(d, a, &v, sizeof v),
               "cublasLtMatmulDescSetAttribute");
}

// One column-major float32 product D (m, n) = op(A) op(B) with an epilogue whose vector is `vec`
// (bias in, or bias gradient out), on the library stream. Returns false, having launched
// nothing, when cuBLASLt has no algorithm for it.
bool lt_matmul(int dev, bool tf32, bool trans_a, bool trans_b, int m, int n, int k,
               const float *A, int lda, const float *B, int ldb, float *D, int ldd,
               cublasLtEpilogue_t epilogue, const float *vec) {
  handle(dev, tf32);  // the thread's cuBLAS handle and workspace, bound to the current stream
  Handle &h = t_handles.per_dev[dev];
  if (h.lt == nullptr) check_cublas(cublasLtCreate(&h.lt), "cublasLtCreate");
  OpDesc op;
  check_cublas(cublasLtMatmulDescCreate(&op.p, tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32
                                                    : CUBLAS_COMPUTE_32F, CUDA_R_32F),
               "cublasLtMatmulDescCreate");
  const cublasOperation_t ta = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t tb = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  set_desc(op.p, CUBLASLT_MATMUL_DESC_TRANSA, ta);
  set_desc(op.p, CUBLASLT_MATMUL_DESC_TRANSB, tb);
  set_desc(op.p, CUBLASLT_MATMUL_DESC_EPILOGUE, epilogue);
  set_desc(op.p, CUBLASLT_MATMUL_DESC_BIAS_POINTER, vec);
  Layout la, lb, ld;
  check_cublas(cublasLtMatrixLayoutCreate(&la.p, CUDA_R_32F, trans_a ? k : m, trans_a ? m : k,
                                          lda), "cublasLtMatrixLayoutCreate");
  check_cublas(cublasLtMatrixLayoutCreate(&lb.p, CUDA_R_32F, trans_b ? n : k, trans_b ? k : n,
                                          ldb), "cublasLtMatrixLayoutCreate");
  check_cublas(cublasLtMatrixLayoutCreate(&ld.p, CUDA_R_32F, m, n, ldd),
               "cublasLtMatrixLayoutCreate");
  Pref pref;
  check_cublas(cublasLtMatmulPreferenceCreate(&pref.p), "cublasLtMatmulPreferenceCreate");
  const size_t ws = h.workspace_bytes;
  check_cublas(cublasLtMatmulPreferenceSetAttribute(
                   pref.p, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws),
               "cublasLtMatmulPreferenceSetAttribute");
  cublasLtMatmulHeuristicResult_t best{};
  int found = 0;
  const cublasStatus_t hs = cublasLtMatmulAlgoGetHeuristic(h.lt, op.p, la.p, lb.p, ld.p, ld.p,
                                                           pref.p, 1, &best, &found);
  if (hs == CUBLAS_STATUS_NOT_SUPPORTED || (hs == CUBLAS_STATUS_SUCCESS && found == 0))
    return false;
  check_cublas(hs, "cublasLtMatmulAlgoGetHeuristic");
  const float one = 1.0f, zero = 0.0f;
  check_cublas(cublasLtMatmul(h.lt, op.p, &one, A, la.p, B, lb.p, &zero, D, ld.p, D, ld.p,
                              &best.algo, h.workspace, h.workspace_bytes, h.stream),
               "cublasLtMatmul");
  return true;
}

// pre[r * out + j] = (add ? pre[r * out + j] : 0) + b[j] (b NULL: + 0; only with add false).
// Columns across x (coalesced), rows strided across y: each thread loads its b[j] once and
// reuses it for every row it visits (no per-element division by out).
__global__ void bias_rows_kernel(float *pre, const float *b, uint64_t rows, uint64_t out,
                                 bool add) {
  for (uint64_t j = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; j < out;
       j += (uint64_t)gridDim.x * blockDim.x) {
    const float bj = b ? b[j] : 0.0f;
    for (uint64_t r = blockIdx.y; r < rows; r += gridDim.y) {
      float *p = pre + r * out + j;
      *p = add ? *p + bj : bj;
    }
  }
}

void bias_rows(int dev, float *pre, const float *b, uint64_t rows, uint64_t out, bool add) {
  constexpr unsigned kThreads = 256;
  const uint64_t gx = std::min<uint64_t>((out + kThreads - 1) / kThreads, kMaxGrid);
  const uint64_t want = std::max<uint64_t>(grid_for(rows * out, kThreads, dev) / gx, 1);
  const unsigned gy = (unsigned)std::min<uint64_t>({rows, want, (uint64_t)kMaxGridY});
  launch("bias_rows_kernel", bias_rows_kernel, dim3((unsigned)gx, gy), kThreads, 0, stream(dev),
         pre, b, rows, out, add);
}

}  // namespace

void linear(int dev, const float *x, const float *w, const float *b, uint64_t rows, uint64_t in,
            uint64_t out, const MatmulPolicy &policy, float *pre) {
  if (in == 0) return bias_rows(dev, pre, b, rows, out, false);
  if (b != nullptr &&
      lt_matmul(dev, policy.allow_tf32, true, false, (int)out, (int)rows, (int)in, w, (int)in, x,
                (int)in, pre, (int)out, CUBLASLT_EPILOGUE_BIAS, b))
    return;
  bmm(dev, x, w, 1, rows, in, out, false, true, policy, pre);
  if (b != nullptr) bias_rows(dev, pre, b, rows, out, true);
}

void linear_wgrad(int dev, const float *dp, const float *x, uint64_t rows, uint64_t in,
                  uint64_t out, const MatmulPolicy &policy, float *dw, float *db) {
  if (dw != nullptr && db != nullptr &&
      lt_matmul(dev, policy.allow_tf32, false, true, (int)in, (int)out, (int)rows, x, (int)in,
                dp, (int)out, dw, (int)in, CUBLASLT_EPILOGUE_BGRADB, db))
    return;
  if (dw != nullptr) bmm(dev, dp, x, 1, out, rows, in, true, false, policy, dw);
  if (db != nullptr) reduce_axis(dev, red::Op::Sum, dp, 1, rows, out, 1.0f, db);
}

// Shared with the other cuBLAS users (cuda/common/cublas.cuh): this thread's handle and the status
// mapping above.
cublasHandle_t cublas_handle(int dev, bool allow_tf32) { return handle(dev, allow_tf32); }
void cublas_check(cublasStatus_t s, const char *what) { check_cublas(s, what); }

}  // namespace cuda
}  // namespace tlrt
