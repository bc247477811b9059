// CUDA backend, layout: the strided gather and the tiled transposition of core/backend/layout.hpp
// (concatenations and slices are device-to-device copies issued by core). Data moves by float
// loads and stores, which never alter a bit pattern: bitwise the CPU backend's.
// Both kernels take their plan by value as a kernel parameter (dims, strides, division magic
// numbers: <= ~300 bytes), so a call is one launch, no upload, no synchronisation. Index arithmetic
// is 32-bit when the output count and every input offset fit below 2^32, 64-bit otherwise; loops
// run on 64-bit counters over grids capped at kMaxGrid. Divisions by runtime extents use FastDiv
// (Granlund & Montgomery 1994, fig. 4.1: multiply-high, subtract, add, two shifts; exact for every
// n of the type), never a hardware integer division.
// gather_kernel (lay::Gather: broadcasts, row-block copies, thin transposes): one thread per group
// of 4 consecutive outputs (one float4 store), kIlp = 4 groups per thread 1024 groups apart with
// all loads issued before any store (64 bytes in flight per thread; 512 contiguous bytes per warp
// store); a group's input position is decoded once (rank - 1 FastDivs). Modes, chosen on the host:
//   VEC (innermost stride 1, innermost extent and other strides multiples of 4): the plan in
//     float4 units, one aligned float4 load per group. 4n bytes written, 4n read (4 size(x) from
//     DRAM for a broadcast).
//   SPLAT (innermost stride 0, innermost extent a multiple of 4): one scalar load per group,
//     replicated. 4n written, 4 size(x) read.
//   SCALAR (the rest): four scalar loads; the next three advance the innermost index (a fresh
//     decode only when a row ends); a partial last group stores element by element. ~4n + 4
//     size(x) bytes of DRAM traffic (small strides stay within a few lines per warp).
// transpose_kernel (lay::Transpose: transposes and permutations that move the contiguous axis,
// with a side of >= 64 elements; swaps above a trailing block of w = 2 or 4 floats as float2 /
// float4 elements): one 256-thread block per 16 KB tile of TP x TQ elements of one batch (tiles
// in row-major order, then batches; blocks loop past kMaxGrid tiles), 64 bytes per thread. 64 x 64
// floats when both sides have >= 64 elements, else the thin side gets the smallest power of two
// >= it (at least 2) and the other side the rest, so tiles still move whole rows (tile_p). Thread
// t loads the tile's linear positions t + 256 r in x's order (each warp load 32 consecutive floats
// of a row, or whole short rows), all before the shared-memory stores; tile rows of TP + 1
// elements (odd) keep the column reads conflict-free for TQ >= 32; stores walk y's row-major order
// (128 contiguous bytes per warp). Interior tiles skip the bounds checks. Bytes: 8 per element,
// each byte of DRAM touched once.
// Last measured: bench/results/2026-11-27-h100-s9-layout.md
#include <cstdint>

#include "core/backend/layout.hpp"
#include "cuda/common/launch.cuh"

namespace tlrt {
namespace cuda {

namespace {

constexpr unsigned kThreads = 256;
constexpr int kIlp = 4;            // float4 groups per thread per block iteration
constexpr unsigned kTileBytes = 16384;  // bytes of a transpose tile (TP x TQ elements)

// Elements of a transpose tile of E (float, float2 or float4: lay::Transpose::w floats): 4096,
// 2048, 1024, so that every thread moves 64 bytes and the tile's shared memory stays <= 24.6 KB.
template <class E>
__host__ __device__ constexpr unsigned tile_elems() {
  return kTileBytes / sizeof(E);
}
constexpr uint32_t kMaxBatch = lay::kMaxRank - 2;

// ---- division by an invariant integer ----------------------------------------------------------

// q = n / d for every n of type I: t = mulhi(m, n), q = (t + ((n - t) >> s1)) >> s2, with
// l = ceil(log2 d), m = floor(2^N (2^l - d) / d) + 1 (< 2^N), s1 = min(l, 1), s2 = max(l - 1, 0).
template <class I>
struct FastDiv {
  I m;
  uint32_t s1, s2;
};

FastDiv<uint64_t> fast_div64(uint64_t d) {
  uint32_t l = 0;
  while (l < 64 && ((unsigned __int128)1 << l) < d) ++l;
  const unsigned __int128 m = ((((unsigned __int128)1 << l) - d) << 64) / d + 1;
  return FastDiv<uint64_t>{(uint64_t)m, l < 1 ? l : 1u, l > 1 ? l - 1 : 0u};
}

FastDiv<uint32_t> fast_div32(uint32_t d) {
  uint32_t l = 0;
  while (l < 32 && (uint64_t{1} << l) < d) ++l;
  const uint64_t m = (((uint64_t{1} << l) - d) << 32) / d + 1;
  return FastDiv<uint32_t>{(uint32_t)m, l < 1 ? l : 1u, l > 1 ? l - 1 : 0u};
}

template <class I>
FastDiv<I> fast_div(uint64_t d);
template <>
FastDiv<uint64_t> fast_div<uint64_t>(uint64_t d) {
  return fast_div64(d);
}
template <>
FastDiv<uint32_t> fast_div<uint32_t>(uint64_t d) {
  return fast_div32((uint32_t)d);
}

__device__ __forceinline__ uint64_t mulhi(uint64_t a, uint64_t b) { return __umul64hi(a, b); }
__device__ __forceinline__ uint32_t mulhi(uint32_t a, uint32_t b) { return __umulhi(a, b); }

template <class I>
__device__ __forceinline__ I fdiv(const FastDiv<I> &d, I n) {
  const I t = mulhi(d.m, n);
  return (t + ((n - t) >> d.s1)) >> d.s2;
}

// ---- the strided gather -----------------------------------------------------------------------

enum Mode { kVec, kSplat, kScalar };

// The gather in work units (float4 groups for VEC/SPLAT, elements for SCALAR).
template <class I>
struct GatherK {
  uint64_t groups;     // float4 groups to write: n / 4 (VEC, SPLAT) or ceil(n / 4) (SCALAR)
  I n;                 // output elements (SCALAR: the partial last group)
  I inner_dim;         // dim[rank - 1]
  I inner_stride;      // stride[rank - 1]
  uint32_t rank;
  I dim[lay::kMaxRank];
  I stride[lay::kMaxRank];
  FastDiv<I> div[lay::kMaxRank];  // by dim[k], k >= 1
};

// Offset of the unit with row-major index f; inner = its innermost index.
template <class I>
__device__ __forceinline__ I decode(const GatherK<I> &p, I f, I &inner) {
  I off = 0;
  inner = f;
#pragma unroll
  for (int k = lay::kMaxRank - 1; k >= 1; --k) {
    if ((uint32_t)k < p.rank) {
      const I q = fdiv(p.div[k], f);
      const I i = f - q * p.dim[k];
      if ((uint32_t)k == p.rank - 1) inner = i;
      off += i * p.stride[k];
      f = q;
    }
  }
  return off + f * p.stride[0];
}

template <class I, int MODE>
__device__ __forceinline__ float4 load_group(const float *__restrict x, const GatherK<I> &p, I w) {
  I inner;
  if (MODE == kVec) {
    const I off = decode(p, w, inner);
    return reinterpret_cast<const float4 *>(x)[off];
  } else if (MODE == kSplat) {
    const float s = x[decode(p, w, inner)];
    return make_float4(s, s, s, s);
  } else {
    const I e = w * 4;
    I off = decode(p, e, inner);
    float v[4];
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      v[j] = e + (I)j < p.n ? x[off] : 0.0f;
      if (j < 3) {
        if (++inner == p.inner_dim)
          off = decode(p, e + (I)(j + 1), inner);
        else
          off += p.inner_stride;
      }
    }
    return make_float4(v[0], v[1], v[2], v[3]);
  }
}

template <class I, int MODE>
__global__ void __launch_bounds__(kThreads)
    gather_kernel(const float *__restrict x, float *__restrict y, GatherK<I> p) {
  const uint64_t chunk = (uint64_t)kIlp * kThreads;
  for (uint64_t base = (uint64_t)blockIdx.x * chunk + threadIdx.x; base < p.groups;
       base += (uint64_t)gridDim.x * chunk) {
    float4 v[kIlp];
#pragma unroll
    for (int k = 0; k < kIlp; ++k) {
      const uint64_t w = base + (uint64_t)k * kThreads;
      if (w < p.groups) v[k] = load_group<I, MODE>(x, p, (I)w);
    }
#pragma unroll
    for (int k = 0; k < kIlp; ++k) {
      const uint64_t w = base + (uint64_t)k * kThreads;
      if (w >= p.groups) continue;
      if (MODE != kScalar || w * 4 + 3 < (uint64_t)p.n) {
        reinterpret_cast<float4 *>(y)[w] = v[k];
      } else {  // the partial last group
        const uint64_t e = w * 4;
        y[e] = v[k].x;
        if (e + 1 < (uint64_t)p.n) y[e + 1] = v[k].y;
        if (e + 2 < (uint64_t)p.n) y[e + 2] = v[k].z;
      }
    }
  }
}

template <class I>
void launch_gather(int dev, const float *x, const lay::Gather &g, float *y) {
  const uint32_t r = g.rank;
  const uint64_t L = g.dims[r - 1], sL = g.stride[r - 1];
  bool strides4 = true;
  for (uint32_t k = 0; k + 1 < r; ++k) strides4 = strides4 && g.stride[k] % 4 == 0;
  const int mode = (sL == 1 && L % 4 == 0 && strides4) ? kVec
                   : (sL == 0 && L % 4 == 0)           ? kSplat
                                                       : kScalar;
  GatherK<I> p{};
  p.rank = r;
  p.n = (I)g.n;
  for (uint32_t k = 0; k < r; ++k) {
    uint64_t d = g.dims[k], s = g.stride[k];
    if (mode != kScalar && k == r - 1) d /= 4;           // float4 groups along the row
    if (mode == kVec) s = (k == r - 1) ? 1 : s / 4;      // offsets in float4 units
    p.dim[k] = (I)d;
    p.stride[k] = (I)s;
    if (k >= 1) p.div[k] = fast_div<I>(d);
  }
  p.inner_dim = p.dim[r - 1];
  p.inner_stride = p.stride[r - 1];
  p.groups = mode == kScalar ? (g.n + 3) / 4 : g.n / 4;
  const unsigned grid = blocks(p.groups, (uint64_t)kIlp * kThreads);
  cudaStream_t s = stream(dev);
  if (mode == kVec)
    gather_kernel<I, kVec><<<grid, kThreads, 0, s>>>(x, y, p);
  else if (mode == kSplat)
    gather_kernel<I, kSplat><<<grid, kThreads, 0, s>>>(x, y, p);
  else
    gather_kernel<I, kScalar><<<grid, kThreads, 0, s>>>(x, y, p);
  check_launch("layout gather_kernel");
}

// ---- the tiled transposition ------------------------------------------------------------------

template <class I>
struct TransK {
  uint64_t tasks;  // batch * tiles_q * tiles_p
  I p, q, x_q, y_p;
  I tiles_p, tiles_q;
  FastDiv<I> div_tp, div_tq;
  uint32_t nb;
  I bdim[kMaxBatch], bx[kMaxBatch], by[kMaxBatch];
  FastDiv<I> bdiv[kMaxBatch];
};

// Linear position L = t + 256 r (t = threadIdx.x < 256, r < tile / 256) of a tile whose rows have W
// elements (W a power of two, 2..2048): row L / W = row0(t) + drow(r), column L % W = col0(t) +
// dcol(r), with the r parts compile-time constants once the loop over r is unrolled.
template <unsigned W>
struct Walk {
  static __device__ __forceinline__ unsigned row0(unsigned t) { return W <= 256 ? t / W : 0; }
  static __device__ __forceinline__ unsigned col0(unsigned t) { return W <= 256 ? t % W : t; }
  static constexpr __device__ unsigned drow(int r) { return W <= 256 ? r * (256 / W) : r / (W / 256); }
  static constexpr __device__ unsigned dcol(int r) { return W <= 256 ? 0 : (r % (W / 256)) * 256; }
};

// One TP x TQ tile per block iteration (TP along x's contiguous axis, TQ along y's); each thread
// keeps one x and one y offset and adds compile-time multiples of the row strides. Rows of TP + 1
// elements: the store phase's column reads hit 32 banks for TQ >= 32, the load phase's row writes
// conflict at most 2 ways (TP < 32); 8- and 16-byte elements are served per half / quarter warp
// and stay conflict-free the same way.
template <class I, unsigned TP, class E>
__global__ void __launch_bounds__(kThreads)
    transpose_kernel(const E *__restrict x, E *__restrict y, TransK<I> p) {
  constexpr unsigned TQ = tile_elems<E>() / TP;
  constexpr int kPer = tile_elems<E>() / kThreads;  // 16, 8 or 4 elements (64 bytes) per thread
  using WX = Walk<TP>;  // x order: rows j of TP elements
  using WY = Walk<TQ>;  // y order: rows i of TQ elements
  __shared__ E tile[TQ][TP + 1];
  const unsigned t = threadIdx.x;
  const unsigned jx = WX::row0(t), ix = WX::col0(t);  // this thread's first (j, i) in x order
  const unsigned iy = WY::row0(t), jy = WY::col0(t);  // and its first (i, j) in y order
  for (uint64_t task = blockIdx.x; task < p.tasks; task += gridDim.x) {
    // Tile (ip, iq) of batch b: ip fastest.
    const I rest = fdiv(p.div_tp, (I)task);
    const I ip = (I)task - rest * p.tiles_p;
    I b = fdiv(p.div_tq, rest);
    const I iq = rest - b * p.tiles_q;
    I xb = 0, yb = 0;
#pragma unroll
    for (int k = kMaxBatch - 1; k >= 0; --k) {
      if ((uint32_t)k < p.nb) {
        const I qk = fdiv(p.bdiv[k], b);
        const I i = b - qk * p.bdim[k];
        xb += i * p.bx[k];
        yb += i * p.by[k];
        b = qk;
      }
    }
    const I p0 = ip * TP, q0 = iq * TQ;
    // x[q0 + j, p0 + i] at xt + (j - jx) * x_q + (i - ix); y[p0 + i, q0 + j] at yt + ... likewise.
    const E *__restrict xt = x + (xb + (q0 + jx) * p.x_q + p0 + ix);
    E *__restrict yt = y + (yb + (p0 + iy) * p.y_p + q0 + jy);
    E v[kPer];
    if (p0 + TP <= p.p && q0 + TQ <= p.q) {
#pragma unroll
      for (int r = 0; r < kPer; ++r) v[r] = xt[(I)WX::drow(r) * p.x_q + WX::dcol(r)];
#pragma unroll
      for (int r = 0; r < kPer; ++r) tile[jx + WX::drow(r)][ix + WX::dcol(r)] = v[r];
      __syncthreads();
#pragma unroll
      for (int r = 0; r < kPer; ++r)
        yt[(I)WY::drow(r) * p.y_p + WY::dcol(r)] = tile[jy + WY::dcol(r)][iy + WY::drow(r)];
    } else {
      const I np = p.p - p0 < TP ? p.p - p0 : (I)TP;  // valid extents of this tile
      const I nq = p.q - q0 < TQ ? p.q - q0 : (I)TQ;
#pragma unroll
      for (int r = 0; r < kPer; ++r) {
        const unsigned j = jx + WX::drow(r), i = ix + WX::dcol(r);
        v[r] = (j < nq && i < np) ? xt[(I)WX::drow(r) * p.x_q + WX::dcol(r)] : E{};
      }
#pragma unroll
      for (int r = 0; r < kPer; ++r) tile[jx + WX::drow(r)][ix + WX::dcol(r)] = v[r];
      __syncthreads();
#pragma unroll
      for (int r = 0; r < kPer; ++r) {
        const unsigned i = iy + WY::drow(r), j = jy + WY::dcol(r);
        if (i < np && j < nq) yt[(I)WY::drow(r) * p.y_p + WY::dcol(r)] = tile[j][i];
      }
    }
    __syncthreads();  // the tile is rewritten by the next task
  }
}

// TP of the tile (TQ = tile / TP): 64 when both sides have >= 64 elements, else the smallest power
// of two >= the short side (at least 2) for that side and the rest of the tile for the other.
unsigned tile_p(uint64_t p, uint64_t q, unsigned tile) {
  auto pow2 = [](uint64_t v) {
    unsigned t = 2;
    while (t < v && t < 64) t *= 2;
    return t;
  };
  if (p >= 64 && q >= 64) return 64;
  if (p < 64) return pow2(p);
  return tile / pow2(q);
}

template <class I, class E, unsigned TP>
void launch_transpose(int dev, const float *x, const lay::Transpose &t, float *y) {
  constexpr unsigned TQ = tile_elems<E>() / TP;
  TransK<I> p{};
  p.p = (I)t.p;
  p.q = (I)t.q;
  p.x_q = (I)t.x_q;
  p.y_p = (I)t.y_p;
  const uint64_t tp = (t.p + TP - 1) / TP, tq = (t.q + TQ - 1) / TQ;
  p.tiles_p = (I)tp;
  p.tiles_q = (I)tq;
  p.div_tp = fast_div<I>(tp);
  p.div_tq = fast_div<I>(tq);
  p.nb = t.nb;
  for (uint32_t k = 0; k < t.nb; ++k) {
    p.bdim[k] = (I)t.bdim[k];
    p.bx[k] = (I)t.bx[k];
    p.by[k] = (I)t.by[k];
    p.bdiv[k] = fast_div<I>(t.bdim[k]);
  }
  p.tasks = t.batch * tq * tp;  // <= n: every tile holds an element
  transpose_kernel<I, TP, E><<<blocks(p.tasks, 1), kThreads, 0, stream(dev)>>>(
      reinterpret_cast<const E *>(x), reinterpret_cast<E *>(y), p);
  check_launch("layout transpose_kernel");
}

// TP: a power of two from 2 to tile / 2 (tile_p's range); the cases past a narrower element's
// range are never taken and map to its largest TP.
template <class E>
constexpr unsigned clamp_tp(unsigned v) {
  return v < tile_elems<E>() / 2 ? v : tile_elems<E>() / 2;
}

template <class I, class E>
void launch_transpose(int dev, const float *x, const lay::Transpose &t, float *y) {
  constexpr unsigned T = tile_elems<E>();
  switch (tile_p(t.p, t.q, T)) {
    case 2: return launch_transpose<I, E, 2>(dev, x, t, y);
    case 4: return launch_transpose<I, E, 4>(dev, x, t, y);
    case 8: return launch_transpose<I, E, 8>(dev, x, t, y);
    case 16: return launch_transpose<I, E, 16>(dev, x, t, y);
    case 32: return launch_transpose<I, E, 32>(dev, x, t, y);
    case 64: return launch_transpose<I, E, 64>(dev, x, t, y);
    case 128: return launch_transpose<I, E, clamp_tp<E>(128)>(dev, x, t, y);
    case 256: return launch_transpose<I, E, clamp_tp<E>(256)>(dev, x, t, y);
    case 512: return launch_transpose<I, E, clamp_tp<E>(512)>(dev, x, t, y);
    case 1024: return launch_transpose<I, E, clamp_tp<E>(1024)>(dev, x, t, y);
    default: return launch_transpose<I, E, clamp_tp<E>(2048)>(dev, x, t, y);
  }
}

template <class I>
void launch_transpose(int dev, const float *x, const lay::Transpose &t, float *y) {
  if (t.w == 4) return launch_transpose<I, float4>(dev, x, t, y);
  if (t.w == 2) return launch_transpose<I, float2>(dev, x, t, y);
  launch_transpose<I, float>(dev, x, t, y);
}

// 32-bit index arithmetic when every count and offset (and the few units past the end that the
// SCALAR gather may compute but never loads) fits.
constexpr uint64_t kMax32 = 0xFFFFFFFFull - 16;

}  // namespace

void strided_copy(int dev, const float *x, const lay::Gather &plan, float *y) {
  uint64_t max_off = 0;  // the largest input offset: sum of (dims[k] - 1) * stride[k]
  for (uint32_t k = 0; k < plan.rank; ++k) max_off += (plan.dims[k] - 1) * plan.stride[k];
  if (plan.n <= kMax32 && max_off <= kMax32)
    launch_gather<uint32_t>(dev, x, plan, y);
  else
    launch_gather<uint64_t>(dev, x, plan, y);
}

void tiled_transpose(int dev, const float *x, const lay::Transpose &plan, float *y) {
  // Every x and y offset is < n (a permutation of n elements) or, with repeated batch axes, < n
  // on the y side and smaller on the x side.
  if (plan.n <= kMax32)
    launch_transpose<uint32_t>(dev, x, plan, y);
  else
    launch_transpose<uint64_t>(dev, x, plan, y);
}

}  // namespace cuda
}  // namespace tlrt
