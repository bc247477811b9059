// CUDA backend, real FFT and spectral convolution: cuFFT for the transforms, three small kernels
// of our own; everything on the library stream, no synchronisation, all scratch (spectra, cuFFT
// work areas) from the stream-ordered pool, returned in stream order.
// PLANS: cufftMakePlanMany64 (no batch limit) without auto-allocation: the work area is taken
// from the pool per execution. Plans are cached per (device, R2C / C2R, n, batch, layout) in one
// LRU list of at most 16 idle plans under a mutex; a call checks a plan out (or creates one), runs
// it and checks it back in, so two threads never share a plan. A plan past the cap is destroyed
// at check-in (outside the lock: cufftDestroy may synchronise); a plan whose execution failed is
// destroyed. Layouts: "rows", abi/tlrt_fft.h's packed rows; "cols", the columns of a row-major
// (grid, width) array (stride and batch = width), the spectral convolution's, so no transpose.
// rfft: one R2C into the output (the packed layout is cufftComplex): 4n read, 4(n + 2) written
//   per row plus cuFFT's passes. irfft: prep_spectrum copies the spectrum (C2R overwrites its
//   input), scaled by 1/n, imaginary parts of bins 0 and n/2 zeroed: 16 bytes per bin; then C2R.
//   The 1/n scales the spectrum (one rounding more than torch's post-scale, one pass fewer).
// Spectral convolution: per call two transforms of grid x width (bwd_w: two R2C) and scratch of
// 2 (grid/2 + 1) width complex values; X = R2C_cols(x):
// mix_fwd: Z[k, o] = (1/grid) sum_c X[k, c] W[k, c, o], k < modes; rows k >= modes zeroed by a
//   memset; y = C2R_cols(Z). Block (32 o, 8 c-slices) per (k, 32 o): weight loads coalesced over
//   o, X[k, c] a broadcast, the 8 slices summed in fixed order in shared memory. Reads the
//   8 modes width^2 bytes of weights once; 8 modes width^2 flops.
// mix_bwd_x: P[k, c] = (1/grid) sum_o D[k, o] conj(W[k, c, o]), D = R2C_cols(dy) with edge-bin
//   imaginary parts zeroed; one warp per (k, c), lanes over o (coalesced), a shuffle tree; rows
//   k >= modes zeroed; dx = C2R_cols(P). Same bytes and flops as mix_fwd.
// grad_w<RE, IM>: dW[k, c, o] = (c_k / grid) conj(X[k, c]) D[k, o], one thread per (k, c, o),
//   consecutive o (coalesced writes, 4 bytes per weight and part); only the requested parts.
// Errors as cuBLAS's in cuda/blas.cu: CUFFT_ALLOC_FAILED -> TLRT_ERR_OUT_OF_MEMORY; a failed
// execution with a CUDA error pending -> that error; any other -> TLRT_ERR_LIBRARY.
// Last measured: bench/results/2026-11-22-h100-fft.md
#include <cufft.h>

#include <list>
#include <mutex>

#include "core/backend/fft.hpp"
#include "core/backend/memory.hpp"
#include "cuda/common/launch.cuh"

namespace tlrt {
namespace cuda {

namespace {

using u64 = uint64_t;
constexpr size_t kPlanCacheCap = 16;

const char *cufft_name(cufftResult r) {
  switch (r) {
    case CUFFT_SUCCESS: return "CUFFT_SUCCESS";
    case CUFFT_INVALID_PLAN: return "CUFFT_INVALID_PLAN";
    case CUFFT_ALLOC_FAILED: return "CUFFT_ALLOC_FAILED";
    case CUFFT_INVALID_TYPE: return "CUFFT_INVALID_TYPE";
    case CUFFT_INVALID_VALUE: return "CUFFT_INVALID_VALUE";
    case CUFFT_INTERNAL_ERROR: return "CUFFT_INTERNAL_ERROR";
    case CUFFT_EXEC_FAILED: return "CUFFT_EXEC_FAILED";
    case CUFFT_SETUP_FAILED: return "CUFFT_SETUP_FAILED";
    case CUFFT_INVALID_SIZE: return "CUFFT_INVALID_SIZE";
    case CUFFT_UNALIGNED_DATA: return "CUFFT_UNALIGNED_DATA";
    case CUFFT_INVALID_DEVICE: return "CUFFT_INVALID_DEVICE";
    case CUFFT_NO_WORKSPACE: return "CUFFT_NO_WORKSPACE";
    case CUFFT_NOT_IMPLEMENTED: return "CUFFT_NOT_IMPLEMENTED";
    case CUFFT_NOT_SUPPORTED: return "CUFFT_NOT_SUPPORTED";
    default: return "unknown cufftResult";
  }
}

void check_cufft(cufftResult r, const char *what) {
  if (r == CUFFT_SUCCESS) return;
  if (r == CUFFT_ALLOC_FAILED)
    fail(TLRT_ERR_OUT_OF_MEMORY, "%s: %s (%d)", what, cufft_name(r), (int)r);
  if (r == CUFFT_EXEC_FAILED || r == CUFFT_INTERNAL_ERROR || r == CUFFT_SETUP_FAILED) {
    const cudaError_t e = cudaPeekAtLastError();
    if (e != cudaSuccess) check(e, what);
  }
  fail(TLRT_ERR_LIBRARY, "%s: %s (%d)", what, cufft_name(r), (int)r);
}

// ---- the plan cache -------------------------------------------------------------------------

struct Key {
  int dev;
  cufftType type;  // CUFFT_R2C or CUFFT_C2R
  long long n, batch;
  bool cols;  // column layout of a (n, batch) row-major array (PLANS)
  bool operator==(const Key &o) const {
    return dev == o.dev && type == o.type && n == o.n && batch == o.batch && cols == o.cols;
  }
};

struct Plan {
  Key key;
  cufftHandle h;
  size_t work;  // bytes of work area
};

void destroy(const Plan &p) noexcept {
  (void)cudaSetDevice(p.key.dev);
  (void)cufftDestroy(p.h);
}

Plan create(const Key &k, cudaStream_t s) {
  Plan p{k, 0, 0};
  check_cufft(cufftCreate(&p.h), "cufftCreate");
  try {
    check_cufft(cufftSetAutoAllocation(p.h, 0), "cufftSetAutoAllocation");
    long long n = k.n;
    const long long bins = k.n / 2 + 1;
    const bool r2c = k.type == CUFFT_R2C;
    if (!k.cols) {  // basic layout: rows of n reals / bins complex values
      check_cufft(cufftMakePlanMany64(p.h, 1, &n, nullptr, 1, 0, nullptr, 1, 0, k.type, k.batch,
                                      &p.work),
                  "cufftMakePlanMany64");
    } else {
      long long real_embed[1] = {n}, cplx_embed[1] = {bins};
      const long long W = k.batch;
      check_cufft(cufftMakePlanMany64(p.h, 1, &n, r2c ? real_embed : cplx_embed, W, 1,
                                      r2c ? cplx_embed : real_embed, W, 1, k.type, k.batch,
                                      &p.work),
                  "cufftMakePlanMany64");
    }
    check_cufft(cufftSetStream(p.h, s), "cufftSetStream");
  } catch (...) {
    (void)cufftDestroy(p.h);
    throw;
  }
  return p;
}

class PlanCache {
 public:
  // An idle plan for k, removed from the list, or a new one.
  Plan take(const Key &k, cudaStream_t s) {
    {
      std::lock_guard<std::mutex> g(mu_);
      for (auto it = idle_.begin(); it != idle_.end(); ++it)
        if (it->key == k) {
          const Plan p = *it;
          idle_.erase(it);
          return p;
        }
    }
    return create(k, s);
  }
  // Back to the front of the list; the least recently used beyond the cap is destroyed.
  void give(const Plan &p) noexcept {
    Plan evicted{};
    bool evict = false;
    try {
      std::lock_guard<std::mutex> g(mu_);
      idle_.push_front(p);
      if (idle_.size() > kPlanCacheCap) {
        evicted = idle_.back();
        idle_.pop_back();
        evict = true;
      }
    } catch (...) {  // no memory for the list node: drop the plan
      destroy(p);
      return;
    }
    if (evict) destroy(evicted);
  }

 private:
  std::mutex mu_;
  std::list<Plan> idle_;
};

// Leaky: plans may be needed by static destructors of the host, after this unit's statics.
PlanCache &cache() {
  static PlanCache *c = new PlanCache;
  return *c;
}

// One execution on a checked-out plan: in -> out (out-of-place).
void execute(int dev, cufftType type, u64 n, u64 batch, bool cols, const void *in, void *out) {
  const cudaStream_t s = stream(dev);  // also makes dev current
  const Key k{dev, type, (long long)n, (long long)batch, cols};
  const Plan p = cache().take(k, s);
  try {
    Scratch work(dev, p.work);
    check_cufft(cufftSetStream(p.h, s), "cufftSetStream");
    if (p.work) check_cufft(cufftSetWorkArea(p.h, work.as<void>()), "cufftSetWorkArea");
    if (type == CUFFT_R2C)
      check_cufft(cufftExecR2C(p.h, const_cast<cufftReal *>(static_cast<const cufftReal *>(in)),
                               static_cast<cufftComplex *>(out)),
                  "cufftExecR2C");
    else
      check_cufft(cufftExecC2R(p.h, const_cast<cufftComplex *>(static_cast<const cufftComplex *>(in)),
                               static_cast<cufftReal *>(out)),
                  "cufftExecC2R");
  } catch (...) {
    destroy(p);
    throw;
  }
  cache().give(p);
}

// ---- kernels --------------------------------------------------------------------------------

constexpr unsigned kThreads = 256;

__device__ __forceinline__ bool edge_bin(u64 k, u64 n) { return k == 0 || (n % 2 == 0 && k == n / 2); }

// out[i] = in[i] * s, imaginary parts of bins 0 and n/2 (n even) zeroed; rows of `bins` bins.
__global__ void prep_spectrum(const float2 *__restrict in, float2 *__restrict out, u64 total,
                              u64 bins, u64 n, float s) {
  for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < total;
       i += (u64)gridDim.x * blockDim.x) {
    const u64 k = i % bins;
    float2 v = in[i];
    v.x = v.x * s;
    v.y = edge_bin(k, n) ? 0.0f : v.y * s;
    out[i] = v;
  }
}

// Z[k, o] = s sum_c X[k, c] W[k, c, o], k < modes. Block (32, 8), grid (ceil(W / 32), <= 65535).
__global__ void __launch_bounds__(256)
    mix_fwd(const float2 *__restrict X, const float *__restrict wr, const float *__restrict wi,
            u64 grid, u64 W, u64 modes, float s, float2 *__restrict Z) {
  __shared__ float2 part[8][32];
  const u64 o = (u64)blockIdx.x * 32 + threadIdx.x;
  for (u64 k = blockIdx.y; k < modes; k += gridDim.y) {
    float re = 0.0f, im = 0.0f;
    if (o < W) {
      const float2 *xk = X + k * W;
      for (u64 c = threadIdx.y; c < W; c += 8) {
        const float2 x = xk[c];
        const u64 i = (k * W + c) * W + o;
        const float a = wr[i], b = wi[i];
        re = fmaf(x.x, a, fmaf(-x.y, b, re));
        im = fmaf(x.x, b, fmaf(x.y, a, im));
      }
    }
    part[threadIdx.y][threadIdx.x] = make_float2(re, im);
    __syncthreads();
    if (threadIdx.y == 0 && o < W) {
      float2 acc = part[0][threadIdx.x];
#pragma unroll
      for (int j = 1; j < 8; ++j) {
        acc.x += part[j][threadIdx.x].x;
        acc.y += part[j][threadIdx.x].y;
      }
      acc.x *= s;
      acc.y = edge_bin(k, grid) ? 0.0f : acc.y * s;
      Z[k * W + o] = acc;
    }
    __syncthreads();
  }
}

// P[k, c] = s sum_o D[k, o] conj(W[k, c, o]) (D's imaginary part zero at edge bins), k < modes.
// One warp per (k, c): block (32, 8) covers 8 values of c; grid (ceil(W / 8), <= 65535).
__global__ void __launch_bounds__(256)
    mix_bwd_x(const float2 *__restrict D, const float *__restrict wr, const float *__restrict wi,
              u64 grid, u64 W, u64 modes, float s, float2 *__restrict P) {
  const u64 c = (u64)blockIdx.x * 8 + threadIdx.y;
  if (c >= W) return;  // whole warps: no barrier below
  for (u64 k = blockIdx.y; k < modes; k += gridDim.y) {
    const bool edge = edge_bin(k, grid);
    float re = 0.0f, im = 0.0f;
    const float2 *dk = D + k * W;
    const u64 row = (k * W + c) * W;
    for (u64 o = threadIdx.x; o < W; o += 32) {
      const float2 d = dk[o];
      const float dy = edge ? 0.0f : d.y;
      const float a = wr[row + o], b = wi[row + o];
      // (d.x + i dy) (a - i b)
      re = fmaf(d.x, a, fmaf(dy, b, re));
      im = fmaf(dy, a, fmaf(-d.x, b, im));
    }
#pragma unroll
    for (int off = 16; off > 0; off /= 2) {
      re += __shfl_down_sync(0xffffffffu, re, off);
      im += __shfl_down_sync(0xffffffffu, im, off);
    }
    if (threadIdx.x == 0) P[k * W + c] = make_float2(re * s, edge ? 0.0f : im * s);
  }
}

// dW[k, c, o] = (c_k / grid) conj(X[k, c]) D[k, o] (imaginary parts zero at edge bins).
template <bool RE, bool IM>
__global__ void grad_w(const float2 *__restrict X, const float2 *__restrict D, u64 grid, u64 W,
                       u64 modes, float *__restrict dwr, float *__restrict dwi) {
  const u64 total = modes * W * W;
  const float inv = 1.0f / (float)grid;
  for (u64 i = (u64)blockIdx.x * blockDim.x + threadIdx.x; i < total;
       i += (u64)gridDim.x * blockDim.x) {
    const u64 o = i % W, kc = i / W, k = kc / W;
    const bool edge = edge_bin(k, grid);
    const float s = edge ? inv : 2.0f * inv;
    const float2 x = X[kc], d = D[k * W + o];
    const float xi = edge ? 0.0f : x.y, di = edge ? 0.0f : d.y;
    // (x.x - i xi) (d.x + i di)
    if (RE) dwr[i] = s * fmaf(x.x, d.x, xi * di);
    if (IM) dwi[i] = s * fmaf(x.x, di, -(xi * d.x));
  }
}

}  // namespace

void rfft(int dev, const float *x, uint64_t batch, uint64_t n, float *out) {
  execute(dev, CUFFT_R2C, n, batch, false, x, out);
}

void irfft(int dev, const float *spec, uint64_t batch, uint64_t n, float *out) {
  const cudaStream_t s = stream(dev);
  const u64 bins = n / 2 + 1, total = batch * bins;
  Scratch tmp(dev, total * sizeof(float2));
  prep_spectrum<<<grid_for(total, kThreads, dev), kThreads, 0, s>>>(
      reinterpret_cast<const float2 *>(spec), tmp.as<float2>(), total, bins, n, 1.0f / (float)n);
  check_launch("prep_spectrum");
  execute(dev, CUFFT_C2R, n, batch, false, tmp.as<float2>(), out);
}

void spectral_conv_fwd(int dev, const float *x, const float *w_re, const float *w_im,
                       uint64_t grid, uint64_t width, uint64_t modes, float *y) {
  const cudaStream_t s = stream(dev);
  const u64 h = grid / 2 + 1;
  Scratch X(dev, h * width * sizeof(float2)), Z(dev, h * width * sizeof(float2));
  execute(dev, CUFFT_R2C, grid, width, true, x, X.as<float2>());
  if (modes < h)
    check(cudaMemsetAsync(Z.as<float2>() + modes * width, 0, (h - modes) * width * sizeof(float2), s),
          "cudaMemsetAsync");
  const dim3 block(32, 8), g(blocks(width, 32), blocks_y(modes));
  mix_fwd<<<g, block, 0, s>>>(X.as<float2>(), w_re, w_im, grid, width, modes, 1.0f / (float)grid,
                              Z.as<float2>());
  check_launch("mix_fwd");
  execute(dev, CUFFT_C2R, grid, width, true, Z.as<float2>(), y);
}

void spectral_conv_bwd_x(int dev, const float *w_re, const float *w_im, const float *dy,
                         uint64_t grid, uint64_t width, uint64_t modes, float *dx) {
  const cudaStream_t s = stream(dev);
  const u64 h = grid / 2 + 1;
  Scratch D(dev, h * width * sizeof(float2)), P(dev, h * width * sizeof(float2));
  execute(dev, CUFFT_R2C, grid, width, true, dy, D.as<float2>());
  if (modes < h)
    check(cudaMemsetAsync(P.as<float2>() + modes * width, 0, (h - modes) * width * sizeof(float2), s),
          "cudaMemsetAsync");
  const dim3 block(32, 8), g(blocks(width, 8), blocks_y(modes));
  mix_bwd_x<<<g, block, 0, s>>>(D.as<float2>(), w_re, w_im, grid, width, modes,
                                1.0f / (float)grid, P.as<float2>());
  check_launch("mix_bwd_x");
  execute(dev, CUFFT_C2R, grid, width, true, P.as<float2>(), dx);
}

void spectral_conv_bwd_w(int dev, const float *x, const float *dy, uint64_t grid, uint64_t width,
                         uint64_t modes, float *dw_re, float *dw_im) {
  const cudaStream_t s = stream(dev);
  const u64 h = grid / 2 + 1;
  Scratch X(dev, h * width * sizeof(float2)), D(dev, h * width * sizeof(float2));
  execute(dev, CUFFT_R2C, grid, width, true, x, X.as<float2>());
  execute(dev, CUFFT_R2C, grid, width, true, dy, D.as<float2>());
  const u64 total = modes * width * width;
  const unsigned g = grid_for(total, kThreads, dev);
  if (dw_re && dw_im)
    grad_w<true, true><<<g, kThreads, 0, s>>>(X.as<float2>(), D.as<float2>(), grid, width, modes,
                                              dw_re, dw_im);
  else if (dw_re)
    grad_w<true, false><<<g, kThreads, 0, s>>>(X.as<float2>(), D.as<float2>(), grid, width, modes,
                                               dw_re, nullptr);
  else
    grad_w<false, true><<<g, kThreads, 0, s>>>(X.as<float2>(), D.as<float2>(), grid, width, modes,
                                               nullptr, dw_im);
  check_launch("grad_w");
}

}  // namespace cuda
}  // namespace tlrt
