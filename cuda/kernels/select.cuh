// Device kernels of argmax / top-k over rows (abi/tlrt_reduce.h; launched by cuda/reduce.cu) in
// the plain subset that tests/emu/cuda_emu.hpp runs on the CPU (tests/unit/test_select_emu.cpp
// compares them there bit for bit with the CPU backend). The order is core/numerics/
// select_ops.hpp's: a 32-bit key per value (NaN largest, -0 == +0), ties to the lower index. No
// floating-point arithmetic: the results are the CPU's exactly.
//  - argmax_kernel<TPR>: TPR threads per row (32: a warp per row, 8 rows a block; 256: a block
//    per row); each thread scans its columns in increasing order keeping its first maximum, then
//    the (key, index) pairs are combined by sel::before (shuffles, then shared memory).
//  - topk_select_kernel (1 <= k <= kSelectMax): one block of 256 threads per row. Radix selection
//    of the k-th largest key T over four passes of 8-bit digits (shared-memory histograms; warp 0
//    finds the digit with a shuffle scan); then one ordered pass over tiles of 256 columns
//    collects, by block-wide exclusive scans, the G keys > T (all of them) and the first k - G
//    keys == T in column order; then a bitonic sort of the k candidates in shared memory by
//    (key descending, column ascending). Reads a row 5 times (4 histogram passes, 1 collection,
//    which stops once every candidate is found).
#pragma once

#include <cstdint>

#include "core/numerics/select_ops.hpp"

namespace tlrt {
namespace cuda {
namespace sel_kernels {

constexpr unsigned kThreads = 256;
constexpr unsigned kSelectMax = 1024;

struct KeyIdx {
  uint32_t key;
  uint64_t idx;
};

__device__ __forceinline__ KeyIdx better(KeyIdx a, KeyIdx b) {
  return sel::before(a.key, a.idx, b.key, b.idx) ? a : b;
}

__device__ __forceinline__ KeyIdx shfl_down_ki(KeyIdx v, unsigned d) {
  KeyIdx o;
  o.key = __shfl_down_sync(0xFFFFFFFFu, v.key, d);
  o.idx = __shfl_down_sync(0xFFFFFFFFu, v.idx, d);
  return o;
}

// The "none yet" pair: below every real pair (real keys are >= 0x007FFFFF, the key of -inf).
constexpr uint64_t kNoIdx = ~uint64_t{0};

template <unsigned TPR, class I>
__global__ void __launch_bounds__(kThreads)
    argmax_kernel(const float *__restrict x, uint64_t rows, uint64_t cols, I *__restrict idx) {
  constexpr unsigned kRowsPerBlock = kThreads / TPR;
  __shared__ KeyIdx sh[kThreads / 32];
  const unsigned t = threadIdx.x % TPR;
  for (uint64_t r0 = (uint64_t)blockIdx.x * kRowsPerBlock; r0 < rows;
       r0 += (uint64_t)gridDim.x * kRowsPerBlock) {  // uniform in the block
    const uint64_t r = r0 + threadIdx.x / TPR;
    const bool valid = r < rows;
    KeyIdx best{0u, kNoIdx};
    if (valid) {
      const float *p = x + r * cols;
      uint64_t j = t;
      for (; j + 3 * TPR < cols; j += 4 * TPR) {
        float v[4];
#pragma unroll
        for (unsigned u = 0; u < 4; ++u) v[u] = __ldg(p + j + u * TPR);
#pragma unroll
        for (unsigned u = 0; u < 4; ++u) {
          const uint32_t kk = sel::order_key(v[u]);
          if (best.idx == kNoIdx || kk > best.key) best = KeyIdx{kk, j + u * TPR};
        }
      }
      for (; j < cols; j += TPR) {
        const uint32_t kk = sel::order_key(__ldg(p + j));
        if (best.idx == kNoIdx || kk > best.key) best = KeyIdx{kk, j};
      }
    }
#pragma unroll
    for (unsigned d = 16; d >= 1; d >>= 1) best = better(best, shfl_down_ki(best, d));
    if (TPR == 32) {
      if (t == 0 && valid) idx[r] = (I)best.idx;
    } else {
      const unsigned w = threadIdx.x / 32;
      if ((threadIdx.x & 31u) == 0) sh[w] = best;
      __syncthreads();
      if (threadIdx.x == 0) {
        KeyIdx b = sh[0];
        for (unsigned u = 1; u < kThreads / 32; ++u) b = better(b, sh[u]);
        idx[r] = (I)b.idx;
      }
      __syncthreads();
    }
  }
}

// Block-wide exclusive sum of v over the 256 threads; *total gets the sum of all. Uses wsum[8]
// and ends with a barrier (wsum may be reused right after).
__device__ __forceinline__ unsigned block_exclusive_sum(unsigned v, unsigned (&wsum)[8],
                                                        unsigned *total) {
  const unsigned lane = threadIdx.x & 31u, w = threadIdx.x / 32;
  unsigned incl = v;
#pragma unroll
  for (unsigned d = 1; d < 32; d <<= 1) {
    const unsigned o = __shfl_up_sync(0xFFFFFFFFu, incl, d);
    if (lane >= d) incl += o;
  }
  if (lane == 31) wsum[w] = incl;
  __syncthreads();
  unsigned before = 0, all = 0;
#pragma unroll
  for (unsigned u = 0; u < 8; ++u) {
    const unsigned s = wsum[u];
    before += u < w ? s : 0u;
    all += s;
  }
  __syncthreads();
  *total = all;
  return before + incl - v;
}

template <class I>
__global__ void __launch_bounds__(kThreads)
    topk_select_kernel(const float *__restrict x, uint64_t rows, uint64_t cols, unsigned k,
                       float *__restrict vals, I *__restrict idx) {
  __shared__ unsigned hist[256];
  __shared__ unsigned wsum[8];
  __shared__ unsigned sh_digit, sh_kk;
  __shared__ uint32_t ckey[kSelectMax];
  __shared__ uint64_t cidx[kSelectMax];
  const unsigned t = threadIdx.x;
  for (uint64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const float *p = x + r * cols;
    // 1. Radix selection: the digits of T from the top; kk = how many keys == T's prefix so far
    //    are still to take.
    uint32_t prefix = 0, mask = 0;
    unsigned kk = k;
    for (int shift = 24; shift >= 0; shift -= 8) {
      hist[t] = 0;
      __syncthreads();
      uint64_t j = t;
      for (; j + 3 * kThreads < cols; j += 4 * kThreads) {  // 4 loads in flight per thread
        float v[4];
#pragma unroll
        for (unsigned u = 0; u < 4; ++u) v[u] = __ldg(p + j + u * kThreads);
#pragma unroll
        for (unsigned u = 0; u < 4; ++u) {
          const uint32_t key = sel::order_key(v[u]);
          if ((key & mask) == prefix) atomicAdd(&hist[(key >> shift) & 255u], 1u);
        }
      }
      for (; j < cols; j += kThreads) {
        const uint32_t key = sel::order_key(__ldg(p + j));
        if ((key & mask) == prefix) atomicAdd(&hist[(key >> shift) & 255u], 1u);
      }
      __syncthreads();
      if (t < 32) {  // lane l: digits 255 - 8 l down to 248 - 8 l (keys descending)
        unsigned c[8], sum = 0;
#pragma unroll
        for (unsigned u = 0; u < 8; ++u) {
          c[u] = hist[255 - 8 * t - u];
          sum += c[u];
        }
        unsigned incl = sum;
#pragma unroll
        for (unsigned d = 1; d < 32; d <<= 1) {
          const unsigned o = __shfl_up_sync(0xFFFFFFFFu, incl, d);
          if (t >= d) incl += o;
        }
        const unsigned excl = incl - sum;
        if (excl < kk && kk <= incl) {  // exactly one lane
          unsigned acc = excl;
          for (unsigned u = 0; u < 8; ++u) {
            if (kk <= acc + c[u]) {
              sh_digit = 255 - 8 * t - u;
              sh_kk = kk - acc;
              break;
            }
            acc += c[u];
          }
        }
      }
      __syncthreads();
      prefix |= sh_digit << shift;
      mask |= 255u << shift;
      kk = sh_kk;
      __syncthreads();  // hist and sh_* are written again
    }
    const uint32_t T = prefix;
    const unsigned E = kk;     // keys == T to take (>= 1)
    const unsigned G = k - E;  // keys > T (all taken)
    // 2. The candidates in column order: the G keys above T at [0, G), the first E keys equal to
    //    T at [G, k).
    unsigned gt_base = 0, eq_base = 0;
    for (uint64_t j0 = 0; j0 < cols; j0 += kThreads) {
      const uint64_t j = j0 + t;
      const uint32_t key = j < cols ? sel::order_key(__ldg(p + j)) : 0u;
      const unsigned gt = (j < cols && key > T) ? 1u : 0u;
      const unsigned eq = (j < cols && key == T) ? 1u : 0u;
      unsigned total;
      const unsigned pos = block_exclusive_sum((gt << 16) | eq, wsum, &total);  // <= 256 each
      if (gt) {
        ckey[gt_base + (pos >> 16)] = key;
        cidx[gt_base + (pos >> 16)] = j;
      }
      if (eq && eq_base + (pos & 0xFFFFu) < E) {
        ckey[G + eq_base + (pos & 0xFFFFu)] = key;
        cidx[G + eq_base + (pos & 0xFFFFu)] = j;
      }
      gt_base += total >> 16;
      eq_base += total & 0xFFFFu;
      if (gt_base >= G && eq_base >= E) break;  // uniform
    }
    // 3. Bitonic sort of the k candidates, padded to a power of two with pairs after all.
    unsigned P = 1;
    while (P < k) P <<= 1;
    for (unsigned i = k + t; i < P; i += kThreads) {
      ckey[i] = 0u;
      cidx[i] = kNoIdx;
    }
    __syncthreads();
    for (unsigned size = 2; size <= P; size <<= 1) {
      for (unsigned stride = size >> 1; stride >= 1; stride >>= 1) {
        for (unsigned i = t; i < P; i += kThreads) {
          const unsigned j = i ^ stride;
          if (j > i) {
            const bool asc = (i & size) == 0;  // this pair's half sorts in output order
            if (sel::before(ckey[j], cidx[j], ckey[i], cidx[i]) == asc) {
              const uint32_t tk = ckey[i];
              ckey[i] = ckey[j];
              ckey[j] = tk;
              const uint64_t ti = cidx[i];
              cidx[i] = cidx[j];
              cidx[j] = ti;
            }
          }
        }
        __syncthreads();
      }
    }
    for (unsigned i = t; i < k; i += kThreads) {
      const uint64_t c = cidx[i];
      vals[r * k + i] = p[c];
      idx[r * k + i] = (I)c;
    }
    __syncthreads();
  }
}

}  // namespace sel_kernels
}  // namespace cuda
}  // namespace tlrt
