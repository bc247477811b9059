// CUDA backend, fused attention: the call's precision (from core/api_attention.cpp) picks the
// kernels; where a tensor-core kernel does not take the problem or the device, the exact ones run.
//   Exact: cuda/kernels/attention.cuh, FlashAttention-2 in float32 SIMT, bit for bit the CPU.
//   SplitTf32 (default): forward cuda/kernels/attention_mma.cuh (3xTF32 mma.sync, sm_80+,
//     d <= 128), backward cuda/sm90a/attention.cu (3xTF32 wgmma, compute capability 9.0,
//     32 < d <= 128).
//   Tf32: the mma.sync forward with one product; the unmasked backward on
//     cuda/kernels/attention_tc.cuh (WMMA TF32, sm_80+, d <= 128).
// Strategy, FLOPs and bytes: each kernel file's top comment. Scratch: the stream-ordered pool.
// Last measured: bench/results/2026-11-27-h100-s17-attention.md
#include "cuda/kernels/attention_mma.cuh"
#include "cuda/kernels/attention_tc.cuh"

#include "core/backend/attention.hpp"
#include "cuda/common/launch.cuh"
#include "cuda/common/runtime.cuh"
#if TLRT_HAVE_WGMMA
#include "cuda/sm90a/attention.cuh"
#endif

namespace tlrt {
namespace cuda {

namespace {

// The plans' launcher: the library stream of `dev`; a kernel's dynamic shared memory and carveout
// (all shared, so that two ~105 KB blocks fit per SM) are set once per device.
struct Launch {
  int dev;
  unsigned max_grid_y() const { return kMaxGridY; }
  size_t smem_limit() const { return smem_optin(dev); }  // cached per device
  template <auto K, class... A>
  void operator()(const char *name, attn_kernels::Kernel<K>, dim3 grid, unsigned threads,
                  size_t smem, A... args) const {
    static SmemAllowed size, carveout;
    cudaStream_t st = stream(dev);  // makes dev current: the attributes are per device
    if (smem != 0) {
      size.ensure(dev, K, smem, "attention: cudaFuncSetAttribute");
      carveout.ensure(dev, K, cudaFuncAttributePreferredSharedMemoryCarveout,
                      (int)cudaSharedmemCarveoutMaxShared, "attention: cudaFuncSetAttribute");
    }
    launch(name, K, grid, dim3(threads), smem, st, args...);
  }
};

bool tensor_cores(int dev) { return cc_major(dev) >= 8; }  // mma.sync / WMMA TF32: sm_80+

}  // namespace

void attention_fwd(int dev, const attn::Problem &p, const float *q, const float *k,
                   const float *v, Precision precision, float *out, float *lse) {
  Launch launch{dev};
  if (precision != Precision::Exact && tensor_cores(dev)) {
    const bool split = precision == Precision::SplitTf32;
    FloatScratch planes(dev, attn_kernels::fwd_mma_planes_floats(launch, p, split));
    if (attn_kernels::fwd_mma_plan(launch, p, split, q, k, v, out, lse, planes.get())) return;
  }
  attn_kernels::fwd_plan(launch, p, q, k, v, out, lse);
}

void attention_bwd(int dev, const attn::Problem &p, const float *q, const float *k,
                   const float *v, const float *out, const float *dout, const float *lse,
                   Precision precision, float *dq, float *dk, float *dv) {
  FloatScratch D(dev, (dq || dk) ? p.bh * p.n : 1);  // for dS only: dv alone reads no D
  Launch launch{dev};
#if TLRT_HAVE_WGMMA
  if (precision == Precision::SplitTf32 && cc_major(dev) == 9 && cc_minor(dev) == 0 &&
      attn_wgmma::bwd_applies(p)) {
    if (dq || dk) attn_kernels::d_plan(launch, p, out, dout, D.get());
    FloatScratch planes(dev, attn_wgmma::bwd_planes_floats(p));
    attn_wgmma::bwd(dev, p, q, k, v, dout, lse, (dq || dk) ? D.get() : nullptr, planes.get(), dq,
                    dk, dv);
    return;
  }
#endif
  if (precision == Precision::Tf32 && p.mask == nullptr && tensor_cores(dev) &&
      attn_kernels::bwd_tc_plan(launch, p, q, k, v, out, dout, lse, D.get(), dq, dk, dv))
    return;
  attn_kernels::bwd_plan(launch, p, q, k, v, out, dout, lse, D.get(), dq, dk, dv);
}

}  // namespace cuda
}  // namespace tlrt
