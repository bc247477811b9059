// CUDA backend, indexing: gather and scatter-add through host lists and index buffers, bit for
// bit the CPU's. History: docs/kernels/index.md.
//
// Lists: a host list is uploaded as it is on the current stream through the pinned staging (the
// host never waits; a conversion on the way, one host thread, cost more than the bytes it saved)
// and read by the kernels like an index buffer; an index buffer (int32 / int64, on this device)
// is read in place, each entry decoded by
// idx::decode, the entries that are not an index counted in g_faults (a __device__ counter, one
// per device; warp-aggregated atomics, on the fault path only). No host synchronisation, no
// atomics on data. Rows move as float4 when cols % 4 == 0 and the buffers are 16-byte aligned,
// as float otherwise; 64-bit offsets, grids capped at 2^31 - 1 blocks. Additions (-fmad=false)
// are single IEEE operations in the order of THE TREE of core/numerics/reduce_tree.hpp.
//
//  - gather_kernel: TX = min(64, power of two >= cols / V) threads per output row (V = 4 floats
//    per float4, else 1), 256 / TX rows per block; each thread loads up to 4 vectors of its row
//    before storing them. Bytes: 4 k cols read and written, plus the list (4 or 8 per entry).
//  - scatter-add: the plan on the device. keys_kernel writes (target or `rows`, position) for
//    every entry; CUB's DeviceRadixSort::SortPairs (LSD, stable, over the bits of `rows` only)
//    sorts them by target, so positions increase within a target: the segments of the CPU's plan,
//    without a host pass. About 16 (32-bit) to 32 (64-bit) bytes per entry per sort pass. With
//    one column the sort carries the values themselves instead of positions (keys_kernel writes
//    keys only), so the kernels below read each segment's values in order, not through a
//    position each.
//    Then, by the number of distinct targets the entries can reach:
//      dense (rows < k cols): a row -> first-entry map (memset + start_kernel) and one pass of
//      rows_kernel over all rows, each written once: x copied (zeros for NULL x), or x + the tree
//      over the segment's vals rows (segments of L <= 8, W = pow2_at_least(L) values in
//      registers, vectorised across the columns);
//      sparse: y = x (or zeros), then rows_kernel over the entries: the first entry of each
//      segment of L <= 8 rewrites its target row;
//      sparse with one column: y in tiles of 4096 rows, one block per tile (tile_kernel): x's
//      tile into shared memory, the heads of the tile's segments (a contiguous range of the
//      sorted entries, from tile_start_kernel) add their trees in place, the tile written out:
//      x read and y written once, coalesced, the values read in order. A tile of more than
//      8 x 4096 entries is written as x and its segments applied by heavy_kernel over the grid.
//    Segments of L > 8 entries are appended (slot by atomic ticket: the order of the list varies,
//    each segment's value does not) to a device list that long_kernel processes: one block per
//    (segment, column tile), THE TREE streamed chunk by chunk with the chunk values folded into a
//    second (and third) level of lanes held in registers: any length up to 2^36 entries.
//    Bytes: 8 rows cols (x read, y written; 4 for NULL x), 4 k cols (vals), the map (8 per row,
//    dense) and the sort; the one-column sparse form adds no scattered access.
// Last measured: bench/results/2026-11-28-h200-index-tiles.md
#include <cooperative_groups.h>

#include <algorithm>
#include <cstring>
#include <cub/device/device_radix_sort.cuh>
#include <type_traits>

#include "core/backend/index.hpp"
#include "core/backend/memory.hpp"
#include "cuda/common/launch.cuh"

namespace tlrt {
namespace cuda {

namespace {

namespace cg = cooperative_groups;

// Entries of index buffers that were not an index, on this device (idx::decode).
__device__ unsigned long long g_faults;

// Adds the calling threads' faults (bad == true) with one atomic per warp.
__device__ __forceinline__ void add_fault(bool bad) {
  if (bad) {
    cg::coalesced_group g = cg::coalesced_threads();
    if (g.thread_rank() == 0) atomicAdd(&g_faults, (unsigned long long)g.size());
  }
}

// The row an entry names (< rows), or rows: keys of host lists (unsigned) are a row or the
// out-of-range value already; buffer entries (signed) are decoded and counted.
template <class K>
__device__ __forceinline__ uint64_t row_of(K v, uint64_t rows, bool count) {
  if constexpr (std::is_signed<K>::value) {
    bool bad;
    const uint64_t r = idx::decode(v, rows, &bad);
    if (count) add_fault(bad);
    return r;
  } else {
    return (uint64_t)v < rows ? (uint64_t)v : rows;
  }
}

constexpr unsigned kThreads = 256;
constexpr unsigned kShort = 8;  // segments this short are summed by rows_kernel

// log2 of the threads per row: TX = min(64, power of two >= cv).
unsigned tx_bits(uint64_t cv) {
  unsigned b = 0;
  while (b < 6 && (uint64_t{1} << b) < cv) ++b;
  return b;
}

bool aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

// ---- float / float4 lanes ----------------------------------------------------------------------

__device__ __forceinline__ float addv(float a, float b) { return __fadd_rn(a, b); }
__device__ __forceinline__ float4 addv(float4 a, float4 b) {
  return make_float4(__fadd_rn(a.x, b.x), __fadd_rn(a.y, b.y), __fadd_rn(a.z, b.z),
                     __fadd_rn(a.w, b.w));
}
template <class V>
__device__ __forceinline__ V idv();  // the identity of the tree's sums, -0.0f
template <>
__device__ __forceinline__ float idv<float>() {
  return red::Ops<red::Op::Sum>::identity();
}
template <>
__device__ __forceinline__ float4 idv<float4>() {
  const float z = red::Ops<red::Op::Sum>::identity();
  return make_float4(z, z, z, z);
}
template <class V>
__device__ __forceinline__ V zerov();  // +0.0f
template <>
__device__ __forceinline__ float zerov<float>() {
  return 0.0f;
}
template <>
__device__ __forceinline__ float4 zerov<float4>() {
  return make_float4(0.0f, 0.0f, 0.0f, 0.0f);
}

// y[c] = x[c] (NULL x: +0.0f) for this thread's columns of one row.
template <class V>
__device__ __forceinline__ void copy_row(const V *__restrict xr, V *__restrict yr, uint64_t cv,
                                         unsigned tx, unsigned TX) {
  for (uint64_t c0 = tx; c0 < cv; c0 += 4 * (uint64_t)TX) {
    V a[4];
#pragma unroll
    for (unsigned u = 0; u < 4; ++u) {
      const uint64_t c = c0 + (uint64_t)u * TX;
      if (c < cv) a[u] = xr ? __ldg(xr + c) : zerov<V>();
    }
#pragma unroll
    for (unsigned u = 0; u < 4; ++u) {
      const uint64_t c = c0 + (uint64_t)u * TX;
      if (c < cv) yr[c] = a[u];
    }
  }
}

// y[c] = x[c] (NULL x: +0.0f) + red::small<Sum, W> over the L <= W rows p[0..L) of vals, for
// this thread's columns; B columns per step (all their loads issued before the additions).
template <unsigned W, class U, class V>
__device__ __forceinline__ void tree_row(const V *__restrict xr, const V *__restrict vals,
                                         uint64_t cv, const U *p, unsigned L, V *__restrict yr,
                                         unsigned tx, unsigned TX) {
  constexpr unsigned B = W >= 2 ? 1 : 2;
  for (uint64_t c0 = tx; c0 < cv; c0 += (uint64_t)B * TX) {
    V s[B][W], xv[B];
#pragma unroll
    for (unsigned b = 0; b < B; ++b) {
      const uint64_t c = c0 + (uint64_t)b * TX;
      if (c < cv) {
        xv[b] = xr ? __ldg(xr + c) : zerov<V>();
#pragma unroll
        for (unsigned j = 0; j < W; ++j)
          s[b][j] = j < L ? __ldg(vals + (uint64_t)p[j] * cv + c) : idv<V>();
      }
    }
#pragma unroll
    for (unsigned b = 0; b < B; ++b) {
      const uint64_t c = c0 + (uint64_t)b * TX;
      if (c < cv) {
        // Lane j = identity + v_j (as red::small), then halving h = W/2, ..., 1.
#pragma unroll
        for (unsigned j = 0; j < W; ++j)
          if (j < L) s[b][j] = addv(idv<V>(), s[b][j]);
#pragma unroll
        for (unsigned h = W / 2; h >= 1; h /= 2) {
#pragma unroll
          for (unsigned t = 0; t < h; ++t) s[b][t] = addv(s[b][t], s[b][t + h]);
        }
        yr[c] = addv(xv[b], s[b][0]);
      }
    }
  }
}

// ---- gather ------------------------------------------------------------------------------------

template <class K, class V>
__global__ void __launch_bounds__(kThreads)
    gather_kernel(const V *__restrict x, uint64_t rows, uint64_t cv, const K *__restrict keys,
                  uint64_t k, V *__restrict y, unsigned txb) {
  const unsigned TX = 1u << txb, TY = kThreads >> txb;
  const unsigned tx = threadIdx.x & (TX - 1), ty = threadIdx.x >> txb;
  for (uint64_t j = (uint64_t)blockIdx.x * TY + ty; j < k; j += (uint64_t)gridDim.x * TY) {
    const uint64_t r = row_of(keys[j], rows, tx == 0);
    const bool in = r < rows;
    const V *src = x + (in ? r : 0) * cv;
    V *dst = y + j * cv;
    for (uint64_t c0 = tx; c0 < cv; c0 += 4 * (uint64_t)TX) {
      V a[4];
#pragma unroll
      for (unsigned u = 0; u < 4; ++u) {
        const uint64_t c = c0 + (uint64_t)u * TX;
        a[u] = in && c < cv ? __ldg(src + c) : zerov<V>();
      }
#pragma unroll
      for (unsigned u = 0; u < 4; ++u) {
        const uint64_t c = c0 + (uint64_t)u * TX;
        if (c < cv) dst[c] = a[u];
      }
    }
  }
}

template <class K>
void launch_gather(int dev, const float *x, uint64_t rows, uint64_t cols, const K *keys,
                   uint64_t k, float *y) {
  const bool vec4 = cols % 4 == 0 && aligned16(x) && aligned16(y);
  const uint64_t cv = vec4 ? cols / 4 : cols;
  const unsigned txb = tx_bits(cv);
  const unsigned grid = blocks(k, kThreads >> txb);
  if (vec4)
    gather_kernel<K, float4><<<grid, kThreads, 0, stream(dev)>>>(
        reinterpret_cast<const float4 *>(x), rows, cv, keys, k, reinterpret_cast<float4 *>(y),
        txb);
  else
    gather_kernel<K, float><<<grid, kThreads, 0, stream(dev)>>>(x, rows, cv, keys, k, y, txb);
  check_launch("gather_kernel");
}

// The caller's host list in stream-ordered scratch, as it is (8 bytes per entry): one copy
// through the pinned staging; the kernels read the entries in place (an entry >= rows is out of
// range, core checked that none is >= 2^60).
Scratch upload_list(int dev, const idx::List &list) {
  Scratch d(dev, list.k * sizeof(uint64_t));
  upload_async(dev, d.as<uint64_t>(), list.p, list.k * sizeof(uint64_t));
  return d;
}

// ---- scatter-add: the plan ---------------------------------------------------------------------

// key[j] = the target of entry j (rows when out of range or not an index), pos[j] = j (when pos
// is not NULL).
template <class K, class U>
__global__ void __launch_bounds__(kThreads)
    keys_kernel(const K *__restrict idx, uint64_t k, uint64_t rows, U *__restrict key,
                U *__restrict pos) {
  for (uint64_t j = (uint64_t)blockIdx.x * kThreads + threadIdx.x; j < k;
       j += (uint64_t)gridDim.x * kThreads) {
    key[j] = (U)row_of(idx[j], rows, true);
    if (pos) pos[j] = (U)j;
  }
}

// map[t] = the first sorted entry of target t (t < rows; the map holds none elsewhere).
template <class U>
__global__ void __launch_bounds__(kThreads)
    start_kernel(const U *__restrict sk, uint64_t k, uint64_t rows, U *__restrict map) {
  for (uint64_t e = (uint64_t)blockIdx.x * kThreads + threadIdx.x; e < k;
       e += (uint64_t)gridDim.x * kThreads) {
    const U t = sk[e];
    if (t < rows && (e == 0 || sk[e - 1] != t)) map[t] = (U)e;
  }
}

// The sorted plan: keys (targets, `rows` past the in-range ones) and positions, k entries; the
// list of segments longer than kShort (first entries) and its length. sp == NULL when the values
// themselves were sorted with the keys (one column): sorted entry e reads vals[e].
template <class U>
struct DevPlan {
  const U *sk, *sp;
  uint64_t k;
  U *longs;
  unsigned long long *nlong;
  __device__ __forceinline__ U pos(uint64_t e) const { return sp ? sp[e] : (U)e; }
};

// Dense: item i is row i, looked up in map (none: a copy of x, or zeros). Sparse: item i is
// sorted entry i, the first of its segment or nothing (y holds x or zeros already). Segments
// longer than kShort go to the long list (long_kernel writes them).
// The sparse float form (cols % 4 != 0, typically cols == 1: one thread per entry) needs few
// registers and runs a long chain of dependent loads per entry (keys, position, vals, x, all
// scattered): twice the resident blocks keep more of those chains in flight.
template <class U, class V, bool kDense>
__global__ void __launch_bounds__(kThreads, sizeof(V) == 4 && !kDense ? 6 : 3)
    rows_kernel(const V *__restrict x, const V *__restrict vals, uint64_t cv, uint64_t rows,
                uint64_t items, const U *__restrict map, DevPlan<U> pl, V *__restrict y,
                unsigned txb) {
  const unsigned TX = 1u << txb, TY = kThreads >> txb;
  const unsigned tx = threadIdx.x & (TX - 1), ty = threadIdx.x >> txb;
  for (uint64_t i = (uint64_t)blockIdx.x * TY + ty; i < items; i += (uint64_t)gridDim.x * TY) {
    uint64_t r, e0;
    if (kDense) {
      r = i;
      const U sm = map[r];
      if (sm == idx::none<U>()) {
        copy_row(x ? x + r * cv : nullptr, y + r * cv, cv, tx, TX);
        continue;
      }
      e0 = sm;
    } else {
      e0 = i;
      r = pl.sk[e0];
      if (r >= rows || (e0 > 0 && pl.sk[e0 - 1] == r)) continue;
    }
    unsigned L = 1;
    while (L <= kShort && e0 + L < pl.k && pl.sk[e0 + L] == r) ++L;
    if (L > kShort) {
      if (tx == 0) pl.longs[atomicAdd(pl.nlong, 1ull)] = (U)e0;
      continue;
    }
    U p[kShort];
#pragma unroll
    for (unsigned j = 0; j < kShort; ++j) p[j] = j < L ? pl.pos(e0 + j) : U(0);
    const V *xr = x ? x + r * cv : nullptr;
    V *yr = y + r * cv;
    if (L == 1)
      tree_row<1>(xr, vals, cv, p, L, yr, tx, TX);
    else if (L == 2)
      tree_row<2>(xr, vals, cv, p, L, yr, tx, TX);
    else if (L <= 4)
      tree_row<4>(xr, vals, cv, p, L, yr, tx, TX);
    else
      tree_row<8>(xr, vals, cv, p, L, yr, tx, TX);
  }
}

// ---- scatter-add of one column, sparse: the output in tiles ------------------------------------

constexpr unsigned kTile = 4096;          // rows of y per tile (16 KiB of shared memory)
constexpr uint64_t kHeavy = 8 * kTile;    // entries above which a tile's segments go grid-wide

// x (NULL: +0.0f) + red::small<Sum, W> over the L <= W values v[0..L): tree_row's sum of one
// column, the values in order.
template <unsigned W>
__device__ __forceinline__ float seg_sum(float x, const float *__restrict v, unsigned L) {
  float s[W];
#pragma unroll
  for (unsigned j = 0; j < W; ++j) s[j] = j < L ? __ldg(v + j) : idv<float>();
#pragma unroll
  for (unsigned j = 0; j < W; ++j)
    if (j < L) s[j] = addv(idv<float>(), s[j]);
#pragma unroll
  for (unsigned h = W / 2; h >= 1; h /= 2) {
#pragma unroll
    for (unsigned t = 0; t < h; ++t) s[t] = addv(s[t], s[t + h]);
  }
  return addv(x, s[0]);
}

__device__ __forceinline__ float seg_sum_any(float x, const float *__restrict v, unsigned L) {
  if (L == 1) return seg_sum<1>(x, v, L);
  if (L == 2) return seg_sum<2>(x, v, L);
  if (L <= 4) return seg_sum<4>(x, v, L);
  return seg_sum<8>(x, v, L);
}

// The tile of a sorted entry: its target / kTile, or ntiles for `rows` (out of range).
template <class U>
__device__ __forceinline__ uint64_t tile_of(U t, uint64_t rows, uint64_t ntiles) {
  return (uint64_t)t >= rows ? ntiles : (uint64_t)t / kTile;
}

// start[b] = the first sorted entry whose tile is >= b, for b = 0 .. ntiles (the sorted keys'
// tiles increase: each b is written by exactly one e).
template <class U>
__global__ void __launch_bounds__(kThreads)
    tile_start_kernel(const U *__restrict sk, uint64_t k, uint64_t rows, uint64_t ntiles,
                      U *__restrict start) {
  for (uint64_t e = (uint64_t)blockIdx.x * kThreads + threadIdx.x; e <= k;
       e += (uint64_t)gridDim.x * kThreads) {
    const uint64_t hi = e < k ? tile_of(sk[e], rows, ntiles) : ntiles;
    const uint64_t lo = e == 0 ? 0 : tile_of(sk[e - 1], rows, ntiles) + 1;
    for (uint64_t b = lo; b <= hi; ++b) start[b] = (U)e;
  }
}

// The sorted entry e heads its segment: the segment's length (kShort + 1 when longer, then it
// joined the long list) and value.
template <class U>
__device__ __forceinline__ bool head_of(const DevPlan<U> &pl, uint64_t e, U t, unsigned *L) {
  if (e > 0 && pl.sk[e - 1] == t) return false;
  unsigned n = 1;
  while (n <= kShort && e + n < pl.k && pl.sk[e + n] == t) ++n;
  if (n > kShort) pl.longs[atomicAdd(pl.nlong, 1ull)] = (U)e;
  *L = n;
  return true;
}

// One tile per block iteration: x's rows (or zeros) into shared memory, the heads of the
// tile's segments (sorted entries start[b] .. start[b + 1]) add their trees in place, the tile
// goes out; coalesced both ways, each y row written once. A tile of more than kHeavy entries is
// written as x and marked (heavy_kernel spreads its segments over the grid).
template <class U>
__global__ void __launch_bounds__(kThreads)
    tile_kernel(const float *__restrict x, const float *__restrict sv, uint64_t rows,
                uint64_t ntiles, const U *__restrict start, DevPlan<U> pl, float *__restrict y,
                uint8_t *__restrict heavy, unsigned long long *__restrict nheavy) {
  __shared__ float tile[kTile];
  for (uint64_t b = blockIdx.x; b < ntiles; b += gridDim.x) {
    const uint64_t r0 = b * kTile, n = min((uint64_t)kTile, rows - r0);
    for (unsigned i = threadIdx.x; i < n; i += kThreads) tile[i] = x ? __ldg(x + r0 + i) : 0.0f;
    __syncthreads();
    const uint64_t lo = start[b], hi = start[b + 1];
    if (hi - lo <= kHeavy) {
      for (uint64_t e = lo + threadIdx.x; e < hi; e += kThreads) {
        const U t = pl.sk[e];
        unsigned L;
        if (head_of(pl, e, t, &L) && L <= kShort) {
          float &yt = tile[(uint64_t)t - r0];
          yt = seg_sum_any(yt, sv + e, L);
        }
      }
    } else if (threadIdx.x == 0) {
      heavy[b] = 1;
      atomicAdd(nheavy, 1ull);
    }
    __syncthreads();
    for (unsigned i = threadIdx.x; i < n; i += kThreads) y[r0 + i] = tile[i];
    __syncthreads();  // the next tile reuses the shared memory
  }
}

// The segments of heavy tiles, one sorted entry per thread (nothing to do when no tile is).
template <class U>
__global__ void __launch_bounds__(kThreads)
    heavy_kernel(const float *__restrict x, const float *__restrict sv, uint64_t rows,
                 uint64_t ntiles, const uint8_t *__restrict heavy,
                 const unsigned long long *__restrict nheavy, DevPlan<U> pl,
                 float *__restrict y) {
  if (*nheavy == 0) return;
  for (uint64_t e = (uint64_t)blockIdx.x * kThreads + threadIdx.x; e < pl.k;
       e += (uint64_t)gridDim.x * kThreads) {
    const U t = pl.sk[e];
    if ((uint64_t)t >= rows || !heavy[tile_of(t, rows, ntiles)]) continue;
    unsigned L;
    if (head_of(pl, e, t, &L) && L <= kShort)
      y[t] = seg_sum_any(x ? __ldg(x + t) : 0.0f, sv + e, L);
  }
}

// ---- scatter-add: long segments ----------------------------------------------------------------

// Block layout of long_kernel: CW columns per tile (32, or 1 for narrow matrices), NV = 256 / CW
// lane groups; thread (v, lx) owns the tree lanes t = v + NV g (g < CW) of column lx, at every
// level of the tree.
// The halving of the 256 lanes a thread's G registers and its peers hold: h = 128, ..., NV in
// registers (pairs of one thread), h < NV across threads through shared memory (sh: kThreads
// floats). The lane-0 value of column lx, returned to every thread of the column.
template <unsigned CW>
__device__ __forceinline__ float halve_lanes(float (&a)[CW], float *sh) {
  using O = red::Ops<red::Op::Sum>;
  constexpr unsigned NV = kThreads / CW;
  const unsigned lx = threadIdx.x % CW, v = threadIdx.x / CW;
#pragma unroll
  for (unsigned h = CW / 2; h >= 1; h /= 2) {
#pragma unroll
    for (unsigned g = 0; g < h; ++g) a[g] = O::op(a[g], a[g + h]);
  }
  sh[v * CW + lx] = a[0];
  __syncthreads();
  // Lanes t = v < NV of column lx: halving h = NV / 2, ..., 1 in shared memory.
  for (unsigned h = NV / 2; h >= 1; h /= 2) {
    if (v < h) sh[v * CW + lx] = O::op(sh[v * CW + lx], sh[(v + h) * CW + lx]);
    __syncthreads();
  }
  const float r = sh[lx];
  __syncthreads();
  return r;
}

// One (segment, column tile) per block iteration: S = THE TREE over the segment's vals rows, for
// the tile's columns, then y[t, c] = x[t, c] (NULL: +0.0f) + S. Level 1 folds the entries of a
// chunk of 4096 into the lanes; its value goes to the lane ch % 256 of level 2 (register of one
// thread, selected by predicate), whose value after 4096 chunks (or at the end) goes to level 3
// the same way. A level holding one value passes it on unchanged (a sequence of one element
// reduces to itself).
template <class U, unsigned CW>
__global__ void __launch_bounds__(kThreads)
    long_kernel(const float *__restrict x, const float *__restrict vals, uint64_t cols,
                DevPlan<U> pl, float *__restrict y) {
  using O = red::Ops<red::Op::Sum>;
  constexpr unsigned NV = kThreads / CW;
  __shared__ float sh[kThreads];
  __shared__ uint64_t seg_end;
  const unsigned lx = threadIdx.x % CW, v = threadIdx.x / CW;
  const uint64_t nlong = *pl.nlong;
  const uint64_t tiles = (cols + CW - 1) / CW;
  for (uint64_t task = blockIdx.x; task < nlong * tiles; task += gridDim.x) {
    const uint64_t q = task / tiles, tile = task - q * tiles;
    const uint64_t e0 = pl.longs[q];
    const U t = pl.sk[e0];
    if (threadIdx.x == 0) {  // the end of the run of t: the first sorted key > t
      uint64_t lo = e0, hi = pl.k;
      while (lo < hi) {
        const uint64_t mid = lo + (hi - lo) / 2;
        if (pl.sk[mid] == t) lo = mid + 1; else hi = mid;
      }
      seg_end = lo;
    }
    __syncthreads();
    const uint64_t L = seg_end - e0;
    const uint64_t nc = red::chunks_of(L);
    const uint64_t n2 = (nc + red::kChunk - 1) / red::kChunk;  // level-2 chunks
    const uint64_t c = tile * CW + lx;
    const bool valid = c < cols;
    float l2[CW], l3[CW];
#pragma unroll
    for (unsigned g = 0; g < CW; ++g) l2[g] = l3[g] = O::identity();
    float S = 0.0f;
    for (uint64_t ch = 0; ch < nc; ++ch) {
      const uint64_t b0 = e0 + ch * red::kChunk;
      const unsigned len = (unsigned)min((uint64_t)red::kChunk, seg_end - b0);
      float a[CW];
#pragma unroll
      for (unsigned g = 0; g < CW; ++g) a[g] = O::identity();
      if (valid) {
        for (unsigned r0 = 0; r0 < len; r0 += red::kLanes) {
#pragma unroll
          for (unsigned g = 0; g < CW; ++g) {
            const unsigned e = r0 + v + NV * g;
            if (e < len) a[g] = O::op(a[g], __ldg(vals + (uint64_t)pl.pos(b0 + e) * cols + c));
          }
        }
      }
      const float cv = halve_lanes<CW>(a, sh);
      if (nc == 1) {
        S = cv;
        break;
      }
      const unsigned lane2 = (unsigned)(ch % red::kLanes);
#pragma unroll
      for (unsigned g = 0; g < CW; ++g)
        if (v + NV * g == lane2) l2[g] = O::op(l2[g], cv);
      const bool end2 = (ch + 1) % red::kChunk == 0 || ch + 1 == nc;
      if (end2) {
        const float v2 = halve_lanes<CW>(l2, sh);
#pragma unroll
        for (unsigned g = 0; g < CW; ++g) l2[g] = O::identity();
        if (n2 == 1) {
          S = v2;
        } else {
          const unsigned lane3 = (unsigned)((ch / red::kChunk) % red::kLanes);
#pragma unroll
          for (unsigned g = 0; g < CW; ++g)
            if (v + NV * g == lane3) l3[g] = O::op(l3[g], v2);
        }
      }
    }
    if (n2 > 1) S = halve_lanes<CW>(l3, sh);
    if (valid && v == 0) {
      const uint64_t o = (uint64_t)t * cols + c;
      y[o] = (x ? x[o] : 0.0f) + S;
    }
    __syncthreads();
  }
}

// The sort of the keys by target (stable, bits [0, end_bit)) with the positions; returns which
// buffers hold the sorted entries (CUB's double buffers: the selector is known on the host).
template <class U>
void sort_pairs(int dev, U *k0, U *k1, U *p0, U *p1, uint64_t k, int end_bit, const U **sk,
                const U **sp) {
  cudaStream_t st = stream(dev);
  cub::DoubleBuffer<U> keys(k0, k1), pos(p0, p1);
  size_t bytes = 0;
  check(cub::DeviceRadixSort::SortPairs(nullptr, bytes, keys, pos, (int64_t)k, 0, end_bit, st),
        "scatter plan (sort size)");
  Scratch tmp(dev, bytes);
  check(cub::DeviceRadixSort::SortPairs(tmp.as<void>(), bytes, keys, pos, (int64_t)k, 0, end_bit,
                                        st),
        "scatter plan (sort)");
  *sk = keys.Current();
  *sp = pos.Current();
}

// The same sort with the values themselves (one column): keys k0 -> k1, vals -> sv (vals is
// read only: the overload without double buffers keeps its alternates in the scratch).
template <class U>
void sort_values(int dev, const U *k0, U *k1, const float *vals, float *sv, uint64_t k,
                 int end_bit) {
  cudaStream_t st = stream(dev);
  size_t bytes = 0;
  check(cub::DeviceRadixSort::SortPairs(nullptr, bytes, k0, k1, vals, sv, (int64_t)k, 0, end_bit,
                                        st),
        "scatter plan (sort size)");
  Scratch tmp(dev, bytes);
  check(cub::DeviceRadixSort::SortPairs(tmp.as<void>(), bytes, k0, k1, vals, sv, (int64_t)k, 0,
                                        end_bit, st),
        "scatter plan (sort)");
}

template <class U, class V>
void launch_rows(int dev, bool dense, const float *x, const float *vals, uint64_t rows,
                 uint64_t cols, const U *map, const DevPlan<U> &pl, float *y) {
  const uint64_t cv = cols / (sizeof(V) / 4);
  const unsigned txb = tx_bits(cv);
  const uint64_t items = dense ? rows : pl.k;
  const unsigned grid = blocks(items, kThreads >> txb);
  const V *xv = reinterpret_cast<const V *>(x);
  const V *vv = reinterpret_cast<const V *>(vals);
  V *yv = reinterpret_cast<V *>(y);
  if (dense)
    rows_kernel<U, V, true><<<grid, kThreads, 0, stream(dev)>>>(xv, vv, cv, rows, items, map, pl,
                                                                yv, txb);
  else
    rows_kernel<U, V, false><<<grid, kThreads, 0, stream(dev)>>>(xv, vv, cv, rows, items, map,
                                                                 pl, yv, txb);
  check_launch("rows_kernel");
}

template <class U>
void scatter_t(int dev, const float *x, const float *vals, uint64_t rows, uint64_t cols,
               const idx::List &list, float *y) {
  cudaStream_t st = stream(dev);
  const uint64_t k = list.k;
  // The long list's length, then keys and positions twice (the sort's double buffers) and the
  // long list, each array 256-byte aligned.
  const uint64_t nlong_max = k / (kShort + 1) + 1;
  auto al = [](uint64_t b) { return (b + 255) & ~uint64_t{255}; };
  const uint64_t ka = al(k * sizeof(U));
  Scratch d(dev, 256 + 4 * ka + al(nlong_max * sizeof(U)));
  char *base = d.as<char>();
  auto *nlong = reinterpret_cast<unsigned long long *>(base);
  auto at = [&](uint64_t i) { return reinterpret_cast<U *>(base + 256 + i * ka); };
  U *k0 = at(0), *k1 = at(1), *p0 = at(2), *p1 = at(3), *longs = at(4);
  // One column: the values are sorted with the keys (no positions; the rows read them in order).
  const bool by_value = cols == 1;
  U *pos0 = by_value ? nullptr : p0;
  check(cudaMemsetAsync(nlong, 0, 8, st), "scatter plan (memset)");
  if (list.type == idx::Type::U64) {
    Scratch h = upload_list(dev, list);
    keys_kernel<uint64_t, U><<<blocks(k, kThreads), kThreads, 0, st>>>(h.as<uint64_t>(), k, rows,
                                                                         k0, pos0);
  } else if (list.type == idx::Type::I32) {
    keys_kernel<int32_t, U><<<blocks(k, kThreads), kThreads, 0, st>>>(
        static_cast<const int32_t *>(list.p), k, rows, k0, pos0);
  } else {
    keys_kernel<int64_t, U><<<blocks(k, kThreads), kThreads, 0, st>>>(
        static_cast<const int64_t *>(list.p), k, rows, k0, pos0);
  }
  check_launch("keys_kernel");
  int end_bit = 1;
  while (end_bit < (int)(8 * sizeof(U)) && (rows >> end_bit) != 0) ++end_bit;  // rows fits
  DevPlan<U> pl{nullptr, nullptr, k, longs, nlong};
  if (by_value) {
    float *sv = reinterpret_cast<float *>(p0);  // k floats fit an array of k U
    sort_values<U>(dev, k0, k1, vals, sv, k, end_bit);
    pl.sk = k1;
    vals = sv;
  } else {
    sort_pairs<U>(dev, k0, k1, p0, p1, k, end_bit, &pl.sk, &pl.sp);
  }

  // Dense when a map of the rows costs less than re-reading the targets' rows (k bounds the
  // number of targets).
  const bool dense = (unsigned __int128)rows < (unsigned __int128)k * cols;
  if (by_value && !dense) {
    // One column, sparse: y in tiles (no copy of x beforehand, no scattered read of it).
    const uint64_t ntiles = (rows + kTile - 1) / kTile;
    Scratch t(dev, 256 + al((ntiles + 1) * sizeof(U)) + al(ntiles));
    auto *nheavy = t.as<unsigned long long>();
    U *start = reinterpret_cast<U *>(t.as<char>() + 256);
    auto *heavy = reinterpret_cast<uint8_t *>(t.as<char>() + 256 + al((ntiles + 1) * sizeof(U)));
    check(cudaMemsetAsync(nheavy, 0, 8, st), "scatter tiles (memset)");
    check(cudaMemsetAsync(heavy, 0, ntiles, st), "scatter tiles (memset)");
    tile_start_kernel<U><<<blocks(k + 1, kThreads), kThreads, 0, st>>>(pl.sk, k, rows, ntiles,
                                                                      start);
    check_launch("tile_start_kernel");
    tile_kernel<U><<<blocks(ntiles, 1), kThreads, 0, st>>>(x, vals, rows, ntiles, start, pl, y,
                                                           heavy, nheavy);
    check_launch("tile_kernel");
    heavy_kernel<U><<<grid_for(k, kThreads, dev), kThreads, 0, st>>>(x, vals, rows, ntiles,
                                                                     heavy, nheavy, pl, y);
    check_launch("heavy_kernel");
  } else {
    const bool vec4 = cols % 4 == 0 && (x == nullptr || aligned16(x)) && aligned16(vals) &&
                      aligned16(y);
    Scratch map(dev, dense ? rows * sizeof(U) : 0);
    if (dense) {
      check(cudaMemsetAsync(map.as<U>(), 0xFF, rows * sizeof(U), st), "scatter map (memset)");
      start_kernel<U><<<blocks(k, kThreads), kThreads, 0, st>>>(pl.sk, k, rows, map.as<U>());
      check_launch("start_kernel");
    } else if (x != nullptr) {
      copy(dev, y, x, rows * cols * 4);
    } else {
      check(cudaMemsetAsync(y, 0, rows * cols * 4, st), "scatter (zeros)");
    }
    if (vec4)
      launch_rows<U, float4>(dev, dense, x, vals, rows, cols, map.as<U>(), pl, y);
    else
      launch_rows<U, float>(dev, dense, x, vals, rows, cols, map.as<U>(), pl, y);
  }
  if (k <= kShort) return;  // no segment can be long
  // At most nlong_max long segments; the kernel reads their number on the device.
  const uint64_t tasks_max = (nlong_max) * (cols >= 32 ? (cols + 31) / 32 : 1);
  const unsigned grid = (unsigned)std::min<uint64_t>(tasks_max, (uint64_t)sm_count(dev) * 8);
  if (cols >= 32)
    long_kernel<U, 32><<<grid, kThreads, 0, st>>>(x, vals, cols, pl, y);
  else
    long_kernel<U, 1><<<grid, kThreads, 0, st>>>(x, vals, cols, pl, y);
  check_launch("long_kernel");
}

// out[i] = i * classes + c for a label c in [0, classes), else batch * classes (counted).
template <class K>
__global__ void __launch_bounds__(kThreads)
    flat_kernel(const K *__restrict labels, uint64_t batch, uint64_t classes,
                int64_t *__restrict flat) {
  for (uint64_t i = (uint64_t)blockIdx.x * kThreads + threadIdx.x; i < batch;
       i += (uint64_t)gridDim.x * kThreads) {
    bool bad;
    const uint64_t c = idx::decode(labels[i], classes, &bad);
    const bool ok = c < classes;
    add_fault(!ok);
    flat[i] = (int64_t)(ok ? i * classes + c : batch * classes);
  }
}

template <class K>
__global__ void __launch_bounds__(kThreads) count_kernel(const K *__restrict idx, uint64_t k) {
  for (uint64_t j = (uint64_t)blockIdx.x * kThreads + threadIdx.x; j < k;
       j += (uint64_t)gridDim.x * kThreads)
    (void)row_of(idx[j], 1, true);
}

}  // namespace

void gather_rows(int dev, const float *x, uint64_t rows, uint64_t cols, const idx::List &list,
                 float *y) {
  switch (list.type) {
    case idx::Type::U64: {
      Scratch d = upload_list(dev, list);
      launch_gather(dev, x, rows, cols, d.as<uint64_t>(), list.k, y);
      break;
    }
    case idx::Type::I32:
      launch_gather(dev, x, rows, cols, static_cast<const int32_t *>(list.p), list.k, y);
      break;
    case idx::Type::I64:
      launch_gather(dev, x, rows, cols, static_cast<const int64_t *>(list.p), list.k, y);
      break;
  }
}

void scatter_add_rows(int dev, const float *x, const float *vals, uint64_t rows, uint64_t cols,
                      const idx::List &list, float *y) {
  // 32-bit plans where every key (rows included, the out-of-range key) and position fits.
  if (rows < idx::none<uint32_t>() && list.k <= idx::none<uint32_t>())
    scatter_t<uint32_t>(dev, x, vals, rows, cols, list, y);
  else
    scatter_t<uint64_t>(dev, x, vals, rows, cols, list, y);
}

void flat_labels(int dev, const idx::List &labels, uint64_t classes, int64_t *flat) {
  cudaStream_t st = stream(dev);
  const unsigned grid = blocks(labels.k, kThreads);
  if (labels.type == idx::Type::I32)
    flat_kernel<int32_t><<<grid, kThreads, 0, st>>>(static_cast<const int32_t *>(labels.p),
                                                    labels.k, classes, flat);
  else
    flat_kernel<int64_t><<<grid, kThreads, 0, st>>>(static_cast<const int64_t *>(labels.p),
                                                    labels.k, classes, flat);
  check_launch("flat_kernel");
}

void count_faults(int dev, const idx::List &list) {
  cudaStream_t st = stream(dev);
  const unsigned grid = blocks(list.k, kThreads);
  if (list.type == idx::Type::I32)
    count_kernel<int32_t><<<grid, kThreads, 0, st>>>(static_cast<const int32_t *>(list.p), list.k);
  else if (list.type == idx::Type::I64)
    count_kernel<int64_t><<<grid, kThreads, 0, st>>>(static_cast<const int64_t *>(list.p), list.k);
  else
    return;  // host lists hold no faults (core checked them)
  check_launch("count_kernel");
}

unsigned long long *index_fault_counter(int) {
  void *p = nullptr;
  check(cudaGetSymbolAddress(&p, g_faults), "index faults (counter)");
  return static_cast<unsigned long long *>(p);
}

uint64_t index_faults(int dev, bool reset) {
  cudaStream_t st = stream(dev);
  void *p = nullptr;
  check(cudaGetSymbolAddress(&p, g_faults), "index faults (counter)");
  unsigned long long n = 0;
  check(cudaMemcpyAsync(&n, p, sizeof n, cudaMemcpyDeviceToHost, st), "index faults (read)");
  if (reset) check(cudaMemsetAsync(p, 0, sizeof n, st), "index faults (reset)");
  check(cudaStreamSynchronize(st), "index faults (synchronising)");
  return n;
}

}  // namespace cuda
}  // namespace tlrt
