// CUDA backend, reductions: THE TREE of core/numerics/reduce_tree.hpp, bit for bit the CPU's
// (-fmad=false: single IEEE additions; max is ew::max_f). No atomics on data, no host
// synchronisation, no copies: each pass is one launch on the library stream, its scratch from
// the stream-ordered pool returned right after the launch that reads it. History:
// docs/kernels/reduce.md.
//
// Every reduction is a view (outer, m, inner) reduced along m for each of the outer * inner
// outputs: whole sum (1, n, 1), row sums (rows, cols, 1), column sums (1, rows, cols), N-D axis
// sums (leading dims, dims[axis], trailing dims). A pass turns each sequence of m elements into
// ceil(m / 4096) chunk values (the tree's steps 2-3), the next pass reduces those, until one value
// per output remains. Work: one addition (or maximum) per element. Bytes: 4 per element read,
// plus 4 / 4096 per element written and read back for each further level. Kernels:
//  - fused_kernel_vec4 (inner == 1, 16-byte aligned, m % 4 == 0, m > 32: the common case): one
//    warp per (sequence, chunk), float4 loads (512 contiguous bytes a warp load, 8 in flight per
//    thread: chunk_vec4); up to 4096 chunks per sequence and 65536 sequences, the warp that
//    completes a sequence's count of chunks also reduces its chunk values: the whole tree in one
//    launch. Longer sequences take plain passes first.
//  - fused2_kernel_vec4 (cuda/kernels/reduce.cuh; ONE such sequence of 2^24 < m <= 2^29: the
//    whole-tensor sum, mean or max): a ticket per block of 8 chunks; the block with the last
//    ticket reduces the chunk values with all 256 threads and the last <= 32 values by
//    red::small: two levels in one launch.
//  - warp_kernel (inner == 1, unaligned or m % 4 != 0, and the gather of
//    tlrt_reduce_from_broadcast): one warp per (sequence, chunk), lane w the tree's lanes
//    32 g + w (chunk_scalar: warp loads of 128 contiguous bytes, 16 in flight per thread).
//  - cols_kernel (inner > 1, m > 32: column sums, inner axes): one block per (outer index, chunk
//    of 4096 rows, tile of 32 columns); warp v lane x owns column x of the tile and its lanes
//    v + 8 g in 32 registers, so a warp load reads 128 contiguous bytes of one row, 32 in flight
//    per thread; the halving in registers, then across warps (tile_halving). inner % 32 idles
//    lanes: inner in 2..31 reads at a fraction of the bandwidth.
//  - small_kernel (m <= 32, and the last pass over <= 32 partials): one thread per output,
//    red::small over pow2_at_least(m) values in registers.
// Last measured: bench/results/2026-11-27-h100-s16-reduce.md
#include <cub/device/device_segmented_radix_sort.cuh>
#include <mutex>
#include <utility>

#include "core/backend/memory.hpp"
#include "core/backend/reduce.hpp"
#include "cuda/common/launch.cuh"
#include "core/numerics/select_ops.hpp"
#include "cuda/kernels/reduce.cuh"
#include "cuda/kernels/select.cuh"

namespace tlrt {
namespace cuda {

namespace {

using red_kernels::chunk_scalar;
using red_kernels::chunk_vec4;
using red_kernels::fused2_kernel_vec4;
using red_kernels::kThreads;
using red_kernels::kWarps;
using red_kernels::L2Contig;
using red_kernels::tile_halving;

// Sources of warp_kernel: sequence s, element e.
struct Contig {
  const float *x;
  uint64_t m;
  __device__ __forceinline__ uint64_t base(uint64_t s) const { return s * m; }
  __device__ __forceinline__ float at(uint64_t b, uint64_t e) const { return x[b + e]; }
};

struct Gather {
  const float *x;
  red::Strided p;
  __device__ __forceinline__ uint64_t base(uint64_t s) const {
    return red::strided_offset(s, p.kr, p.kdim, p.kstride);
  }
  __device__ __forceinline__ float at(uint64_t b, uint64_t e) const {
    return x[b + red::strided_offset(e, p.rr, p.rdim, p.rstride)];
  }
};

// One pass over sequences with contiguous elements (inner == 1): one warp per (sequence, chunk).
template <red::Op OP, class Src>
__global__ void __launch_bounds__(kThreads)
    warp_kernel(Src src, uint64_t nseq, uint64_t m, uint64_t nc, float div, float *__restrict y) {
  const uint64_t tasks = nseq * nc;
  for (uint64_t task = (uint64_t)blockIdx.x * kWarps + (threadIdx.x >> 5); task < tasks;
       task += (uint64_t)gridDim.x * kWarps) {
    const uint64_t s = task / nc;
    const uint64_t e0 = (task - s * nc) * red::kChunk;
    const uint64_t len = m - e0 < red::kChunk ? m - e0 : red::kChunk;
    const float v = chunk_scalar<OP>(src, src.base(s), e0, len);
    if ((threadIdx.x & 31u) == 0) y[task] = red::finish(v, nc == 1 ? div : 1.0f);
  }
}

// Contiguous, 16-byte aligned sequences of at most 2^24 elements: a chunk value per warp (float4
// loads) to partials[s * nc + k], counted in counters[s]; the warp that completes the count
// reduces the nc <= 4096 partials (the tree's next level), writes y[s] and resets the counter.
// With counters == NULL one plain pass instead (chunk values to y[task]).
template <red::Op OP>
__global__ void __launch_bounds__(kThreads)
    fused_kernel_vec4(const float *__restrict x, uint64_t nseq, uint64_t m, uint64_t nc, float div,
                      float *partials, unsigned *counters, float *__restrict y) {
  const unsigned w = threadIdx.x & 31u;
  const uint64_t tasks = nseq * nc;
  for (uint64_t task = (uint64_t)blockIdx.x * kWarps + (threadIdx.x >> 5); task < tasks;
       task += (uint64_t)gridDim.x * kWarps) {
    const uint64_t s = task / nc;
    const uint64_t e0 = (task - s * nc) * red::kChunk;
    const uint64_t len = m - e0 < red::kChunk ? m - e0 : red::kChunk;
    const float v = chunk_vec4<OP>(x + s * m + e0, len);
    if (nc == 1 || counters == nullptr) {  // one chunk, or a plain pass writing chunk values
      if (w == 0) y[task] = red::finish(v, nc == 1 ? div : 1.0f);
      continue;
    }
    unsigned last = 0;
    if (w == 0) {
      partials[task] = v;
      __threadfence();  // the value is visible device-wide before the count says so
      last = atomicAdd(counters + s, 1u) == (unsigned)(nc - 1);
    }
    last = __shfl_sync(0xFFFFFFFFu, last, 0);
    if (!last) continue;
    __threadfence();
    const float r = chunk_scalar<OP>(L2Contig{partials}, s * nc, 0, nc);
    if (w == 0) {
      y[s] = red::finish(r, div);
      counters[s] = 0;
    }
  }
}

// Sums: 64 registers, 4 blocks per SM (one wave of (65536, 1024)'s 512 blocks on 132 SMs); max
// needs 96 for its selects (2 blocks per SM; it spills at 64 or 80).
template <red::Op OP>
__global__ void __launch_bounds__(kThreads, OP == red::Op::Sum ? 4 : 2)
    cols_kernel(const float *__restrict x, uint64_t outer, uint64_t m, uint64_t inner, uint64_t nc,
                float div, float *__restrict y) {
  using O = red::Ops<OP>;
  __shared__ float sh[kWarps][32];
  const unsigned lx = threadIdx.x & 31u;  // column within the tile
  const unsigned v = threadIdx.x >> 5;    // owns the tree's lanes v + 8 g
  const uint64_t tiles = (inner + 31) / 32;
  const uint64_t tasks = outer * nc * tiles;
  for (uint64_t task = blockIdx.x; task < tasks; task += gridDim.x) {
    // Consecutive blocks take neighbouring column tiles of the same rows.
    const uint64_t tile = task % tiles;
    const uint64_t rest = task / tiles;
    const uint64_t k = rest % nc;
    const uint64_t o = rest / nc;
    const uint64_t c = tile * 32 + lx;
    const bool valid = c < inner;
    const uint64_t e0 = k * red::kChunk;
    const uint64_t len = m - e0 < red::kChunk ? m - e0 : red::kChunk;
    float a[32];
#pragma unroll
    for (int g = 0; g < 32; ++g) a[g] = O::identity();
    if (valid) {
      const float *col = x + (o * m + e0 + v) * inner + c;  // element e = v + 8 g + 256 r
      const uint64_t step8 = 8 * inner;
      if (len == red::kChunk) {
#pragma unroll 1
        for (unsigned r = 0; r < red::kDepth; ++r) {
          const float *p = col + (uint64_t)r * red::kLanes * inner;
#pragma unroll
          for (unsigned g = 0; g < 32; ++g) a[g] = O::op(a[g], p[g * step8]);
        }
      } else {
        // Rows of 256 present in full need no bounds checks; then the partial last row.
        const unsigned full = (unsigned)(len / red::kLanes);
#pragma unroll 1
        for (unsigned r = 0; r < full; ++r) {
          const float *p = col + (uint64_t)r * red::kLanes * inner;
#pragma unroll
          for (unsigned g = 0; g < 32; ++g) a[g] = O::op(a[g], p[g * step8]);
        }
        const float *p = col + (uint64_t)full * red::kLanes * inner;
#pragma unroll
        for (unsigned g = 0; g < 32; ++g)
          if (full * red::kLanes + v + 8 * g < len) a[g] = O::op(a[g], p[g * step8]);
      }
    }
    tile_halving<OP>(a, sh, valid, [&](float r) {  // lane t = v + 8 g
      y[(o * nc + k) * inner + c] = red::finish(r, nc == 1 ? div : 1.0f);
    });
    __syncthreads();
  }
}

template <red::Op OP, unsigned W>
__global__ void __launch_bounds__(kThreads)
    small_kernel(const float *__restrict x, uint64_t outer, unsigned m, uint64_t inner, float div,
                 float *__restrict y) {
  const uint64_t n = outer * inner;
  for (uint64_t q = (uint64_t)blockIdx.x * kThreads + threadIdx.x; q < n;
       q += (uint64_t)gridDim.x * kThreads) {
    const uint64_t o = q / inner;
    const float *p = x + o * m * inner + (q - o * inner);
    const float r = red::small<OP, W>([=](unsigned j) { return p[(uint64_t)j * inner]; }, m);
    y[q] = red::finish(r, div);
  }
}

template <red::Op OP>
void launch_small(int dev, cudaStream_t s, const float *x, uint64_t outer, uint64_t m,
                  uint64_t inner, float div, float *y) {
  const unsigned grid = grid_for(outer * inner, kThreads, dev);
  red::with_small_width(m, [&](auto w) {
    small_kernel<OP, decltype(w)::value>
        <<<grid, kThreads, 0, s>>>(x, outer, (unsigned)m, inner, div, y);
  });
  check_launch("reduction small_kernel");
}

// Chunk counters of fused_kernel_vec4: kMaxFusedSeq per device, zero between launches (each
// sequence's last warp resets its own), allocated once outside the pool (zeroed_counters). More
// sequences take the pass-by-pass path.
constexpr uint64_t kMaxFusedSeq = 65536;
ZeroedCounters g_counters[kMaxCudaDevices];

unsigned *chunk_counters(int dev) {
  return zeroed_counters(g_counters[dev], kMaxFusedSeq, "cudaMalloc (reduction counters)");
}

// plain: one pass of chunk values; else the whole tree (nc <= kChunk, outer <= kMaxFusedSeq).
template <red::Op OP>
void fused(int dev, cudaStream_t s, const float *x, uint64_t outer, uint64_t m, uint64_t nc,
           float div, float *y, bool plain) {
  if (plain) {
    fused_kernel_vec4<OP><<<blocks(outer * nc, kWarps), kThreads, 0, s>>>(x, outer, m, nc, div,
                                                                           nullptr, nullptr, y);
    check_launch("reduction fused_kernel_vec4 (pass)");
    return;
  }
  FloatScratch part;
  if (nc > 1) part = FloatScratch(dev, outer * nc);
  unsigned *counters = nc > 1 ? chunk_counters(dev) : nullptr;
  fused_kernel_vec4<OP><<<blocks(outer * nc, kWarps), kThreads, 0, s>>>(x, outer, m, nc, div,
                                                                         part.get(), counters, y);
  check_launch("reduction fused_kernel_vec4");
}

// One contiguous sequence of kChunk < nc <= kChunk * kSmall chunks: the whole tree in one launch.
template <red::Op OP>
void fused2(int dev, cudaStream_t s, const float *x, uint64_t m, uint64_t nc, float div,
            float *y) {
  FloatScratch part(dev, nc);
  unsigned *counter = chunk_counters(dev);
  fused2_kernel_vec4<OP><<<blocks(nc, kWarps), kThreads, 0, s>>>(x, m, nc, div, part.get(),
                                                                  counter, y);
  check_launch("reduction fused2_kernel_vec4");
}

// The passes over the (outer, m, inner) view; m >= 1, outer * inner >= 1.
template <red::Op OP>
void passes(int dev, const float *x, uint64_t outer, uint64_t m, uint64_t inner, float div,
            float *y) {
  cudaStream_t s = stream(dev);
  FloatScratch held;  // the partials x points into, after the first pass
  for (;;) {
    if (m <= red::kSmall) {
      launch_small<OP>(dev, s, x, outer, m, inner, div, y);
      return;
    }
    const uint64_t nc = red::chunks_of(m);
    const bool vec4 = inner == 1 && m % 4 == 0 && ((uintptr_t)x & 15u) == 0;
    if (vec4 && outer == 1 && nc > red::kChunk &&
        nc <= (uint64_t)red::kChunk * red::kSmall) {  // two levels in one launch
      fused2<OP>(dev, s, x, m, nc, div, y);
      return;
    }
    if (vec4 && nc <= red::kChunk && (nc == 1 || outer <= kMaxFusedSeq)) {  // all in one launch
      fused<OP>(dev, s, x, outer, m, nc, div, y, false);
      return;
    }
    FloatScratch next;
    float *dst = y;
    if (nc > 1) {
      next = FloatScratch(dev, outer * nc * inner);  // <= outer * m * inner: no overflow
      dst = next.get();
    }
    if (vec4) {
      fused<OP>(dev, s, x, outer, m, nc, div, dst, true);  // one pass of chunk values
    } else if (inner == 1) {
      warp_kernel<OP, Contig><<<blocks(outer * nc, kWarps), kThreads, 0, s>>>(Contig{x, m}, outer,
                                                                                m, nc, div, dst);
      check_launch("reduction warp_kernel");
    } else {
      const uint64_t tasks = outer * nc * ((inner + 31) / 32);
      cols_kernel<OP><<<blocks(tasks, 1), kThreads, 0, s>>>(x, outer, m, inner, nc, div, dst);
      check_launch("reduction cols_kernel");
    }
    if (nc == 1) return;
    held = std::move(next);  // the previous partials go back to the pool, in stream order
    x = held.get();
    m = nc;
  }
}

}  // namespace

void reduce_axis(int dev, red::Op op, const float *x, uint64_t outer, uint64_t m, uint64_t inner,
                 float div, float *y) {
  switch (op) {
    case red::Op::Sum:
      passes<red::Op::Sum>(dev, x, outer, m, inner, div, y);
      break;
    case red::Op::Max:
      passes<red::Op::Max>(dev, x, outer, m, inner, div, y);
      break;
  }
}

void reduce_strided(int dev, const float *x, const red::Strided &p, float *y) {
  cudaStream_t s = stream(dev);
  const uint64_t nc = red::chunks_of(p.m);
  FloatScratch part;
  float *dst = y;
  if (nc > 1) {
    part = FloatScratch(dev, p.nq * nc);
    dst = part.get();
  }
  warp_kernel<red::Op::Sum, Gather><<<blocks(p.nq * nc, kWarps), kThreads, 0, s>>>(
      Gather{x, p}, p.nq, p.m, nc, 1.0f, dst);
  check_launch("reduction warp_kernel (gather)");
  if (nc > 1) passes<red::Op::Sum>(dev, dst, p.nq, nc, 1, 1.0f, y);
}

// ---- argmax / top-k over rows (abi/tlrt_reduce.h) ----------------------------------------------
// argmax: argmax_kernel<32> (a warp per row) for cols <= 2048, argmax_kernel<256> (a block per
// row) beyond. top-k: topk_select_kernel (cuda/kernels/select.cuh: radix selection and a bitonic
// sort, one block per row) for k <= kSelectMax = 1024; beyond, CUB's segmented radix sort of 64-bit
// keys (~key << 32 | column: unique, so stability does not matter) per batch of rows of at most
// 2^28 elements, then a gather of the first k of each row (scratch: 16 bytes per element).
namespace {

using sel_kernels::argmax_kernel;
using sel_kernels::kSelectMax;
using sel_kernels::topk_select_kernel;
constexpr unsigned kSelThreads = sel_kernels::kThreads;

__global__ void topk_keys_kernel(const float *__restrict x, uint64_t n, uint64_t cols,
                                 unsigned long long *__restrict keys) {
  for (uint64_t e = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; e < n;
       e += (uint64_t)gridDim.x * blockDim.x) {
    const uint32_t kk = ~sel::order_key(__ldg(x + e));
    keys[e] = ((unsigned long long)kk << 32) | (unsigned long long)(e % cols);
  }
}

__global__ void topk_offsets_kernel(uint64_t nseg, uint64_t cols, int64_t *__restrict offs) {
  for (uint64_t s = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; s <= nseg;
       s += (uint64_t)gridDim.x * blockDim.x)
    offs[s] = (int64_t)(s * cols);
}

template <class I>
__global__ void topk_gather_kernel(const float *__restrict x, const unsigned long long *sorted,
                                   uint64_t rows, uint64_t cols, uint64_t k,
                                   float *__restrict vals, I *__restrict idx) {
  for (uint64_t e = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; e < rows * k;
       e += (uint64_t)gridDim.x * blockDim.x) {
    const uint64_t r = e / k, j = e % k;
    const uint64_t c = sorted[r * cols + j] & 0xFFFFFFFFull;
    vals[e] = x[r * cols + c];
    idx[e] = (I)c;
  }
}

template <class I>
void argmax_t(int dev, const float *x, uint64_t rows, uint64_t cols, I *idx) {
  cudaStream_t s = stream(dev);
  if (cols <= 2048) {
    argmax_kernel<32, I><<<blocks(rows, kSelThreads / 32), kSelThreads, 0, s>>>(x, rows, cols, idx);
  } else {
    argmax_kernel<kSelThreads, I><<<blocks(rows, 1), kSelThreads, 0, s>>>(x, rows, cols, idx);
  }
  check_launch("argmax_kernel");
}

template <class I>
void topk_t(int dev, const float *x, uint64_t rows, uint64_t cols, uint64_t k, float *vals,
            I *idx) {
  cudaStream_t s = stream(dev);
  if (k <= kSelectMax) {
    topk_select_kernel<I><<<blocks(rows, 1), kSelThreads, 0, s>>>(x, rows, cols, (unsigned)k,
                                                                   vals, idx);
    check_launch("topk_select_kernel");
    return;
  }
  if (cols > 0xFFFFFFFFull)
    fail(TLRT_ERR_UNSUPPORTED, "topk_rows: k = %llu > %u needs cols < 2^32 on CUDA",
         (unsigned long long)k, kSelectMax);
  // Batches of rows of at most 2^28 elements (4 GiB of keys and sorted keys), at least one row.
  const uint64_t cap = uint64_t{1} << 28;
  const uint64_t batch = cols >= cap ? 1 : (cap / cols < rows ? cap / cols : rows);
  Scratch keys(dev, batch * cols * 8), sorted(dev, batch * cols * 8), offs(dev, (batch + 1) * 8);
  for (uint64_t r0 = 0; r0 < rows; r0 += batch) {
    const uint64_t nr = rows - r0 < batch ? rows - r0 : batch;
    const uint64_t n = nr * cols;
    topk_keys_kernel<<<blocks(n, 256), 256, 0, s>>>(x + r0 * cols, n, cols,
                                                     keys.as<unsigned long long>());
    check_launch("topk_keys_kernel");
    topk_offsets_kernel<<<blocks(nr + 1, 256), 256, 0, s>>>(nr, cols, offs.as<int64_t>());
    check_launch("topk_offsets_kernel");
    size_t bytes = 0;
    const int64_t *o = offs.as<int64_t>();
    check(cub::DeviceSegmentedRadixSort::SortKeys(nullptr, bytes,
                                                  keys.as<unsigned long long>(),
                                                  sorted.as<unsigned long long>(), (int64_t)n,
                                                  (int64_t)nr, o, o + 1, 0, 64, s),
          "topk_rows (sort size)");
    Scratch tmp(dev, bytes);
    check(cub::DeviceSegmentedRadixSort::SortKeys(tmp.as<void>(), bytes,
                                                  keys.as<unsigned long long>(),
                                                  sorted.as<unsigned long long>(), (int64_t)n,
                                                  (int64_t)nr, o, o + 1, 0, 64, s),
          "topk_rows (sort)");
    topk_gather_kernel<I><<<blocks(nr * k, 256), 256, 0, s>>>(
        x + r0 * cols, sorted.as<unsigned long long>(), nr, cols, k, vals + r0 * k, idx + r0 * k);
    check_launch("topk_gather_kernel");
  }
}

}  // namespace

void argmax_rows(int dev, const float *x, uint64_t rows, uint64_t cols, bool i64, void *idx) {
  if (i64)
    argmax_t(dev, x, rows, cols, static_cast<int64_t *>(idx));
  else
    argmax_t(dev, x, rows, cols, static_cast<int32_t *>(idx));
}

void topk_rows(int dev, const float *x, uint64_t rows, uint64_t cols, uint64_t k, bool i64,
               float *vals, void *idx) {
  if (i64)
    topk_t(dev, x, rows, cols, k, vals, static_cast<int64_t *>(idx));
  else
    topk_t(dev, x, rows, cols, k, vals, static_cast<int32_t *>(idx));
}

}  // namespace cuda
}  // namespace tlrt
