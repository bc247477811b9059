// CUDA backend, indexing: gather and scatter-add with host index lists, bit for bit the CPU's.
// History: docs/kernels/index.md.
//
// Core hands over the caller's list for gathers (converted to 32- or 64-bit keys while it is
// copied into the pinned staging: upload_async_fill), or a scatter plan (the in-range entries
// sorted stably by target, as segments; core/backend/index.hpp). Each call uploads them on the
// library stream (the host never waits) into stream-ordered scratch, queues its kernels, and
// returns the scratch right after the last launch that reads it. No atomics. Rows move as float4
// when cols % 4 == 0 and the buffers are 16-byte aligned, as float otherwise; 64-bit offsets,
// grids capped at 2^31 - 1 blocks. Additions (-fmad=false) are single IEEE operations in the order
// of THE TREE of core/numerics/reduce_tree.hpp, as on the CPU.
//
// Bytes: a gather of k rows of cols floats reads and writes 4 k cols (out-of-range keys read
// nothing); a scatter-add of k rows into (rows, cols) reads 4 rows cols (x) + 4 k cols (vals) and
// writes 4 rows cols; index bytes (4 or 8 per gather entry, about 12 per scatter entry, over PCIe)
// on top. Work: one addition per scattered element.
//  - gather_kernel: TX = min(64, power of two >= cols / V) threads per output row (V = 4 floats
//    per float4, else 1), 256 / TX rows per block; each thread loads up to 4 vectors of its row
//    before storing them (64 bytes in flight per thread at 1024 columns). cols == 1 is TX = 1.
//  - scatter-add, segments of L <= 8 entries (the common case of embedding gradients): rows_kernel,
//    TX threads per output row. Dense mode (rows < nseg * cols): a row -> segment map (memset +
//    map_kernel) lets one pass over all rows write each row once: x copied, or x + red::small's
//    halving over the segment's vals rows (W = pow2_at_least(L) values in registers, vectorised
//    across the columns). Sparse mode (few targets in a large matrix): y = x by one copy, then one
//    TX-group per segment. At most 85 registers (3 blocks of 256 per SM).
//  - segments of L > 8 entries: chunk_kernel, one block per (chunk of 4096 entries, tile of 32
//    columns), the lanes as in cuda/reduce.cu's cols_kernel (warp v lane x: column x, lanes
//    v + 8 g); a one-chunk segment writes x + S, longer ones write chunk values that
//    reduce_axis reduces and add_row_kernel adds to x (a few launches per such hot target). With
//    cols < 32 lanes idle.
// The host is the bottleneck of scalar gathers and of scatter-adds (key conversion, the plan's
// sort): bench/index.py's host column.
// Last measured: bench/results/2026-11-27-h100-s9-index.md
#include <algorithm>
#include <cstring>
#include <vector>

#include "core/backend/index.hpp"
#include "core/backend/memory.hpp"
#include "core/backend/reduce.hpp"
#include "cuda/common/launch.cuh"

namespace tlrt {
namespace cuda {

namespace {

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

// ---- gather ------------------------------------------------------------------------------------

template <class U, class V>
__global__ void __launch_bounds__(kThreads)
    gather_kernel(const V *__restrict x, uint64_t rows, uint64_t cv, const U *__restrict keys,
                  uint64_t k, V *__restrict y, unsigned txb) {
  const unsigned TX = 1u << txb, TY = kThreads >> txb;
  const unsigned tx = threadIdx.x & (TX - 1), ty = threadIdx.x >> txb;
  for (uint64_t j = (uint64_t)blockIdx.x * TY + ty; j < k; j += (uint64_t)gridDim.x * TY) {
    const U r = keys[j];
    const bool in = r < rows;
    const V *src = x + (in ? (uint64_t)r : 0) * cv;
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

template <class U, class V>
void launch_gather(int dev, const float *x, uint64_t rows, uint64_t cols, const U *keys,
                   uint64_t k, float *y) {
  const uint64_t cv = cols / (sizeof(V) / 4);
  const unsigned txb = tx_bits(cv);
  gather_kernel<U, V><<<blocks(k, kThreads >> txb), kThreads, 0, stream(dev)>>>(
      reinterpret_cast<const V *>(x), rows, cv, keys, k, reinterpret_cast<V *>(y), txb);
  check_launch("gather_kernel");
}

// The caller's list and the bound of its keys (the fill of upload_async_fill).
struct KeySource {
  const uint64_t *idx;
  uint64_t rows;
};

template <class U>
void fill_keys(void *ctx, void *host, uint64_t off, uint64_t len) {
  const KeySource &src = *static_cast<const KeySource *>(ctx);
  idx::to_keys<U>(src.idx + off / sizeof(U), len / sizeof(U), src.rows, static_cast<U *>(host));
}

// Keys as uint32_t where rows <= 2^32 - 1 (half the bytes to convert and upload), else uint64_t;
// converted piece by piece into the pinned staging (no host array of the list's size).
template <class U>
void gather_t(int dev, const float *x, uint64_t rows, uint64_t cols, const idx::Keys &keys,
              float *y) {
  Scratch dk(dev, keys.k * sizeof(U));
  KeySource src{keys.idx, rows};
  upload_async_fill(dev, dk.as<U>(), keys.k * sizeof(U), fill_keys<U>, &src);
  if (cols % 4 == 0 && aligned16(x) && aligned16(y))
    launch_gather<U, float4>(dev, x, rows, cols, dk.as<U>(), keys.k, y);
  else
    launch_gather<U, float>(dev, x, rows, cols, dk.as<U>(), keys.k, y);
}

// ---- scatter-add -------------------------------------------------------------------------------

template <class U>
__global__ void __launch_bounds__(kThreads)
    map_kernel(const U *__restrict tgt, uint64_t nseg, U *__restrict map) {
  for (uint64_t s = (uint64_t)blockIdx.x * kThreads + threadIdx.x; s < nseg;
       s += (uint64_t)gridDim.x * kThreads)
    map[tgt[s]] = (U)s;
}

// y[c] = x[c] for this thread's columns of one row.
template <class V>
__device__ __forceinline__ void copy_row(const V *__restrict xr, V *__restrict yr, uint64_t cv,
                                         unsigned tx, unsigned TX) {
  for (uint64_t c0 = tx; c0 < cv; c0 += 4 * (uint64_t)TX) {
    V a[4];
#pragma unroll
    for (unsigned u = 0; u < 4; ++u) {
      const uint64_t c = c0 + (uint64_t)u * TX;
      if (c < cv) a[u] = __ldg(xr + c);
    }
#pragma unroll
    for (unsigned u = 0; u < 4; ++u) {
      const uint64_t c = c0 + (uint64_t)u * TX;
      if (c < cv) yr[c] = a[u];
    }
  }
}

// y[c] = x[c] + red::small<Sum, W> over the L <= W rows p[0..L) of vals, for this thread's
// columns; B columns per step (all their loads issued before the additions).
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
        xv[b] = __ldg(xr + c);
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

// Dense: item i is row i, looked up in map (none: a copy). Sparse: item i is segment i (y holds a
// copy of x already). Segments longer than kShort are skipped (chunk_kernel writes them).
template <class U, class V, bool kDense>
__global__ void __launch_bounds__(kThreads, 3)
    rows_kernel(const V *__restrict x, const V *__restrict vals, uint64_t cv, uint64_t items,
                const U *__restrict map, const U *__restrict seg, const U *__restrict tgt,
                const U *__restrict pos, V *__restrict y, unsigned txb) {
  const unsigned TX = 1u << txb, TY = kThreads >> txb;
  const unsigned tx = threadIdx.x & (TX - 1), ty = threadIdx.x >> txb;
  for (uint64_t i = (uint64_t)blockIdx.x * TY + ty; i < items; i += (uint64_t)gridDim.x * TY) {
    uint64_t r, s;
    if (kDense) {
      r = i;
      const U sm = map[r];
      if (sm == idx::none<U>()) {
        copy_row(x + r * cv, y + r * cv, cv, tx, TX);
        continue;
      }
      s = sm;
    } else {
      s = i;
      r = tgt[s];
    }
    const U b = seg[s];
    const unsigned L = (unsigned)min((uint64_t)(seg[s + 1] - b), (uint64_t)kShort + 1);
    if (L > kShort) continue;
    U p[kShort];
#pragma unroll
    for (unsigned j = 0; j < kShort; ++j) p[j] = j < L ? pos[b + j] : U(0);
    const V *xr = x + r * cv;
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

// One (chunk, 32-column tile) per block iteration; tasks[3 q .. 3 q + 2] = segment, chunk,
// destination (none: y[tgt] = x[tgt] + S; else row of part for the chunk value).
template <class U>
__global__ void __launch_bounds__(kThreads, 4)
    chunk_kernel(const float *__restrict x, const float *__restrict vals, uint64_t cols,
                 const U *__restrict seg, const U *__restrict tgt, const U *__restrict pos,
                 const U *__restrict tasks, uint64_t ntasks, float *__restrict y,
                 float *__restrict part) {
  using O = red::Ops<red::Op::Sum>;
  __shared__ float sh[kThreads / 32][32];
  const unsigned lx = threadIdx.x & 31u;  // column within the tile
  const unsigned v = threadIdx.x >> 5;    // owns the tree's lanes v + 8 g
  const uint64_t tiles = (cols + 31) / 32;
  for (uint64_t task = blockIdx.x; task < ntasks * tiles; task += gridDim.x) {
    const uint64_t q = task / tiles;
    const uint64_t tile = task - q * tiles;
    const uint64_t s = tasks[3 * q], ch = tasks[3 * q + 1];
    const U dest = tasks[3 * q + 2];
    const uint64_t e0 = (uint64_t)seg[s] + ch * red::kChunk;
    const uint64_t rest = (uint64_t)seg[s + 1] - e0;
    const unsigned len = (unsigned)(rest < red::kChunk ? rest : red::kChunk);
    const uint64_t c = tile * 32 + lx;
    const bool valid = c < cols;
    const U *pe = pos + e0;
    float a[32];
#pragma unroll
    for (int g = 0; g < 32; ++g) a[g] = O::identity();
    if (valid) {
      const unsigned nr = (len + red::kLanes - 1) / red::kLanes;
#pragma unroll 1
      for (unsigned r = 0; r < nr; ++r) {
        const unsigned base = r * red::kLanes + v;
#pragma unroll
        for (unsigned g = 0; g < 32; ++g) {
          const unsigned e = base + 8 * g;
          if (e < len) a[g] = O::op(a[g], __ldg(vals + (uint64_t)pe[e] * cols + c));
        }
      }
    }
    // Halving: lane t = v + 8 g; h = 128, 64, 32, 16, 8 pair registers of one thread.
#pragma unroll
    for (int g = 0; g < 16; ++g) a[g] = O::op(a[g], a[g + 16]);
#pragma unroll
    for (int g = 0; g < 8; ++g) a[g] = O::op(a[g], a[g + 8]);
#pragma unroll
    for (int g = 0; g < 4; ++g) a[g] = O::op(a[g], a[g + 4]);
    a[0] = O::op(a[0], a[2]);
    a[1] = O::op(a[1], a[3]);
    a[0] = O::op(a[0], a[1]);
    sh[v][lx] = a[0];
    __syncthreads();
    if (v == 0 && valid) {  // h = 4, 2, 1 over the lanes t = 0..7 of this column
      float t8[8];
#pragma unroll
      for (int t = 0; t < 8; ++t) t8[t] = sh[t][lx];
#pragma unroll
      for (int t = 0; t < 4; ++t) t8[t] = O::op(t8[t], t8[t + 4]);
      t8[0] = O::op(t8[0], t8[2]);
      t8[1] = O::op(t8[1], t8[3]);
      t8[0] = O::op(t8[0], t8[1]);
      if (dest == idx::none<U>()) {
        const uint64_t o = (uint64_t)tgt[s] * cols + c;
        y[o] = x[o] + t8[0];
      } else {
        part[(uint64_t)dest * cols + c] = t8[0];
      }
    }
    __syncthreads();
  }
}

__global__ void __launch_bounds__(kThreads)
    add_row_kernel(const float *__restrict x, const float *__restrict s, uint64_t cols,
                   float *__restrict y) {
  for (uint64_t c = (uint64_t)blockIdx.x * kThreads + threadIdx.x; c < cols;
       c += (uint64_t)gridDim.x * kThreads)
    y[c] = x[c] + s[c];
}

template <class U, class V>
void launch_rows(int dev, bool dense, const float *x, const float *vals, uint64_t rows,
                 uint64_t cols, uint64_t nseg, const U *map, const U *seg, const U *tgt,
                 const U *pos, float *y) {
  const uint64_t cv = cols / (sizeof(V) / 4);
  const unsigned txb = tx_bits(cv);
  const uint64_t items = dense ? rows : nseg;
  const unsigned grid = blocks(items, kThreads >> txb);
  const V *xv = reinterpret_cast<const V *>(x);
  const V *vv = reinterpret_cast<const V *>(vals);
  V *yv = reinterpret_cast<V *>(y);
  if (dense)
    rows_kernel<U, V, true><<<grid, kThreads, 0, stream(dev)>>>(xv, vv, cv, items, map, seg, tgt,
                                                                pos, yv, txb);
  else
    rows_kernel<U, V, false><<<grid, kThreads, 0, stream(dev)>>>(xv, vv, cv, items, map, seg, tgt,
                                                                 pos, yv, txb);
  check_launch("rows_kernel");
}

struct LongSeg {
  uint64_t s, part0, nc;  // segment, its first chunk-value row, its chunk count
};

template <class U>
void scatter_t(int dev, const float *x, const float *vals, uint64_t rows, uint64_t cols,
               const idx::Plan &plan, float *y) {
  cudaStream_t st = stream(dev);
  const idx::PlanView<U> hv = idx::view<U>(plan);
  const uint64_t nblob = 2 * plan.nseg + 1 + plan.m;
  // Segments longer than kShort: chunk tasks (a host pass only when there are any).
  std::vector<U> tasks;
  std::vector<LongSeg> longs;
  uint64_t nparts = 0;
  if (plan.max_len > kShort)
    for (uint64_t s = 0; s < plan.nseg; ++s) {
      const uint64_t L = (uint64_t)hv.seg[s + 1] - hv.seg[s];
      if (L <= kShort) continue;
      const uint64_t nc = red::chunks_of(L);
      if (nc == 1) {
        tasks.insert(tasks.end(), {(U)s, U(0), idx::none<U>()});
        continue;
      }
      longs.push_back(LongSeg{s, nparts, nc});
      for (uint64_t ch = 0; ch < nc; ++ch)
        tasks.insert(tasks.end(), {(U)s, (U)ch, (U)(nparts + ch)});
      nparts += nc;
    }
  Scratch d(dev, (nblob + tasks.size()) * sizeof(U));
  U *seg = d.as<U>(), *tgt = seg + plan.nseg + 1, *pos = tgt + plan.nseg, *dtasks = pos + plan.m;
  upload_async(dev, seg, plan.blob, nblob * sizeof(U));
  if (!tasks.empty()) upload_async(dev, dtasks, tasks.data(), tasks.size() * sizeof(U));

  // Dense when a map of the rows costs less than re-reading the targets' rows: rows < nseg cols.
  const bool dense = (unsigned __int128)rows < (unsigned __int128)plan.nseg * cols;
  const bool vec4 = cols % 4 == 0 && aligned16(x) && aligned16(vals) && aligned16(y);
  {
    Scratch map(dev, dense ? rows * sizeof(U) : 0);
    if (dense) {
      check(cudaMemsetAsync(map.as<U>(), 0xFF, rows * sizeof(U), st), "scatter map (memset)");
      map_kernel<U><<<blocks(plan.nseg, kThreads), kThreads, 0, st>>>(tgt, plan.nseg, map.as<U>());
      check_launch("map_kernel");
    } else {
      copy(dev, y, x, rows * cols * 4);
    }
    if (vec4)
      launch_rows<U, float4>(dev, dense, x, vals, rows, cols, plan.nseg, map.as<U>(), seg, tgt,
                             pos, y);
    else
      launch_rows<U, float>(dev, dense, x, vals, rows, cols, plan.nseg, map.as<U>(), seg, tgt,
                            pos, y);
  }
  if (tasks.empty()) return;
  const uint64_t ntasks = tasks.size() / 3;
  Scratch part(dev, nparts * cols * 4);
  chunk_kernel<U><<<blocks(ntasks * ((cols + 31) / 32), 1), kThreads, 0, st>>>(
      x, vals, cols, seg, tgt, pos, dtasks, ntasks, y, part.as<float>());
  check_launch("chunk_kernel");
  if (longs.empty()) return;
  // Segments of more than one chunk: their chunk values, reduced by the reductions' tree.
  Scratch sums(dev, longs.size() * cols * 4);
  for (size_t l = 0; l < longs.size(); ++l) {
    const LongSeg &g = longs[l];
    float *S = sums.as<float>() + l * cols;
    reduce_axis(dev, red::Op::Sum, part.as<float>() + g.part0 * cols, 1, g.nc, cols, 1.0f, S);
    const uint64_t t = hv.tgt[g.s];
    add_row_kernel<<<blocks(cols, kThreads), kThreads, 0, st>>>(x + t * cols, S, cols,
                                                                y + t * cols);
    check_launch("add_row_kernel");
  }
}

}  // namespace

void gather_rows(int dev, const float *x, uint64_t rows, uint64_t cols, const idx::Keys &keys,
                 float *y) {
  if (rows <= idx::none<uint32_t>())
    gather_t<uint32_t>(dev, x, rows, cols, keys, y);
  else
    gather_t<uint64_t>(dev, x, rows, cols, keys, y);
}

void scatter_add_rows(int dev, const float *x, const float *vals, uint64_t rows, uint64_t cols,
                      const idx::Plan &plan, float *y) {
  if (plan.wide)
    scatter_t<uint64_t>(dev, x, vals, rows, cols, plan, y);
  else
    scatter_t<uint32_t>(dev, x, vals, rows, cols, plan, y);
}

}  // namespace cuda
}  // namespace tlrt
