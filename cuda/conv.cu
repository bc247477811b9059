// CUDA backend, convolution (core/backend/conv.hpp). The history of these kernels, with what was
// tried and measured: docs/kernels/conv.md. Each pass takes the first that applies of:
//   depthwise (groups == in_c == out_c, prod(k) <= kDwTaps) within ig_ok: the dw_* direct kernels,
//     whatever policy.allow_tf32 says (float32 FMA chains; TF32 is a permission, not a request);
//   1 x ... x 1 kernel with stride 1 and no padding, or policy.allow_tf32: im2col + cuBLAS;
//   ig_ok and ig_worth: implicit GEMM (igemm_kernel forward and input gradient, the latter at most
//     kMaxPhases stride phases; wgrad_kernel for the kernel gradient, which splits its reduction);
//   otherwise im2col + cuBLAS, images in chunks whose columns fit kScratchBudget.
// ig_ok: rank <= 3, prod(k) <= 512, coordinates, strides and dilations < 2^30, one image's input
// and output < 2^31 elements, grids in range. FLOPs: 2 batch out_c (in_c / groups) prod(k) out_sp
// per GEMM pass (forward, input gradient, kernel gradient each).
//
// igemm_kernel: per group C (M, N) = A (M, K) B (K, N) with B gathered into shared memory, never a
//   column matrix in global memory. Forward: M = out_c / groups, N = batch out_sp, K = in_c /
//   groups prod(k) (channel, tap), B = x at q stride - pad + j dil (+0 in padding). Input
//   gradient per stride phase rho (positions rho + stride t): M = in_c / groups, K = out_c /
//   groups times the phase's lattice taps, B = dy at t + (rho + pad - j dil) / stride, a dense
//   gather (up to kPhasesPerLaunch phases per launch). Tile BM x 128 (BM: the smallest of 16, 32,
//   64, 128 covering M), 256 threads as 16 x 16 of BM / 16 x 8 outputs, double-buffered stages of
//   kBK; taps from a shared int4 table, no division in the loop. Reads x (dy) and w from L2 once
//   per M tile; writes y once.
// wgrad_kernel: per group dw (M = out_c / groups, N = in_c / groups prod(k)) = dy (M, r) times
//   gathered x (r, N), r = (image, position), cut into slices fixed by the shape (kTargetBlocks,
//   >= 128 positions, partials <= kWgradScratch) that sum_images_kernel adds in slice order. Same
//   tile and stage loop; one reduction row per thread serves both operands.
// dw_fwd_kernel / dw_bwd_input_kernel: one thread per output (input) element, the taps row-major
//   (dw_next_tap), one fmaf chain. dw_wgrad_kernel: block (slice, channel), one accumulator per
//   tap, a shared-memory tree per tap, channel_sum_final adds the slices in order. Each reads x and
//   dy once, plus L1 reuse of the windows.
// im2col_kernel: one thread per column-matrix element, 4 in_c prod(k) out_sp bytes written per
//   image, x read about prod(k) / prod(stride) times (L1 / L2). col2im_kernel: one thread per dx
//   element sums its window offsets in increasing j, reading the columns once. bias_kernel: 8
//   bytes per element (fill: 4). channel_sum_kernel: per channel, splits of batch * spatial values
//   summed by a tree, then channel_sum_final in split order. sum_images_kernel: 4 (cnt + 2) bytes
//   per weight.
// Every sum has a fixed order that depends on the shape only (no atomics): the same bits on every
// run and GPU model (cuBLAS: on one GPU model). Scratch comes from the stream-ordered pool; the
// geometry travels by value in kernel parameters; nothing synchronises.
// Last measured: bench/results/2026-11-27-h100-s16-conv.md
#include <cublas_v2.h>

#include <algorithm>
#include <climits>
#include <type_traits>

#include "core/backend/conv.hpp"
#include "core/backend/memory.hpp"
#include "cuda/common/cublas.cuh"
#include "cuda/common/launch.cuh"

namespace tlrt {
namespace cuda {

namespace {

using ull = unsigned long long;
using ll = long long;

constexpr uint64_t kScratchBudget = uint64_t{256} << 20;
constexpr unsigned kThreads = 256;

// Kernel-parameter geometry. out[d], k[d], out_sp and ksz fit in int (core: out_sp and
// in_c / groups * ksz <= INT_MAX on CUDA); input extents and coordinates are 64-bit signed
// (core: in + 2 pad < 2^62).
struct Geo {
  int rank;
  int out[kConvMaxRank];
  int k[kConvMaxRank];
  ll in[kConvMaxRank], stride[kConvMaxRank], pad[kConvMaxRank], dil[kConvMaxRank];
  ll in_sp;
  int out_sp, ksz;
  ll in_c;
};

Geo geo_of(const ConvShape &s) {
  Geo g{};
  g.rank = (int)s.rank;
  for (uint32_t d = 0; d < s.rank; ++d) {
    g.out[d] = (int)s.out[d];
    g.k[d] = (int)s.kernel[d];
    g.in[d] = (ll)s.in[d];
    g.stride[d] = (ll)s.stride[d];
    g.pad[d] = (ll)s.pad[d];
    g.dil[d] = (ll)s.dilation[d];
  }
  g.in_sp = (ll)s.in_sp;
  g.out_sp = (int)s.out_sp;
  g.ksz = (int)s.ksz;
  g.in_c = (ll)s.in_c;
  return g;
}

// ---- kernels ------------------------------------------------------------------------------------

// cols[row][q] for rows = images * in_c * ksz of the chunk: row = (image * in_c + c) * ksz + j.
template <int R>
__global__ void im2col_kernel(Geo g, const float *__restrict__ x, float *__restrict__ cols,
                              ull rows) {
  const int rank = R ? R : g.rank;
  for (ull row = blockIdx.y; row < rows; row += gridDim.y) {
    const ull img_c = row / (ull)g.ksz;
    int jf = (int)(row - img_c * (ull)g.ksz);
    int j[kConvMaxRank];
#pragma unroll
    for (int d = kConvMaxRank - 1; d >= 0; --d) {
      if (d >= rank) continue;
      j[d] = jf % g.k[d];
      jf /= g.k[d];
    }
    const float *__restrict__ xc = x + img_c * (ull)g.in_sp;
    float *__restrict__ dst = cols + row * (ull)g.out_sp;
    for (int q = blockIdx.x * blockDim.x + threadIdx.x; q < g.out_sp;
         q += blockDim.x * gridDim.x) {
      int qq = q;
      ll off = 0, mul = 1;
      bool ok = true;
#pragma unroll
      for (int d = kConvMaxRank - 1; d >= 0; --d) {
        if (d >= rank) continue;
        const int qd = qq % g.out[d];
        qq /= g.out[d];
        const ll i = (ll)qd * g.stride[d] - g.pad[d] + (ll)j[d] * g.dil[d];
        ok = ok && i >= 0 && i < g.in[d];
        if (ok) off += i * mul;  // mul < in_sp: no overflow while every coordinate is valid
        mul *= g.in[d];
      }
      dst[q] = ok ? __ldg(xc + off) : 0.0f;
    }
  }
}

// dx[(image * in_c + c) * in_sp + pos] = (bias ? bias[c] : 0) + the sum, over window offsets j in
// increasing order, of dcols[(image * in_c + c) * ksz + j][q(pos, j)] where q is on the lattice.
template <int R>
__global__ void col2im_kernel(Geo g, const float *__restrict__ dcols,
                              const float *__restrict__ bias, float *__restrict__ dx, ull rows) {
  const int rank = R ? R : g.rank;
  const bool small = g.in_sp <= 0x7FFFFFFFll;
  for (ull row = blockIdx.y; row < rows; row += gridDim.y) {
    const float *__restrict__ src = dcols + row * (ull)g.ksz * (ull)g.out_sp;
    const float b = bias ? bias[row % (ull)g.in_c] : 0.0f;
    for (ull pos = (ull)blockIdx.x * blockDim.x + threadIdx.x; pos < (ull)g.in_sp;
         pos += (ull)blockDim.x * gridDim.x) {
      ll i[kConvMaxRank];
      if (small) {
        unsigned p = (unsigned)pos;
#pragma unroll
        for (int d = kConvMaxRank - 1; d >= 0; --d) {
          if (d >= rank) continue;
          i[d] = (ll)(p % (unsigned)g.in[d]);
          p /= (unsigned)g.in[d];
        }
      } else {
        ull p = pos;
#pragma unroll
        for (int d = kConvMaxRank - 1; d >= 0; --d) {
          if (d >= rank) continue;
          i[d] = (ll)(p % (ull)g.in[d]);
          p /= (ull)g.in[d];
        }
      }
      float acc = 0.0f;
      int j[kConvMaxRank];
#pragma unroll
      for (int d = 0; d < kConvMaxRank; ++d) j[d] = 0;
      for (int jf = 0; jf < g.ksz; ++jf) {
        int q = 0;
        bool ok = true;
#pragma unroll
        for (int d = 0; d < kConvMaxRank; ++d) {
          if (d >= rank) continue;
          const ll t = i[d] + g.pad[d] - (ll)j[d] * g.dil[d];
          ll qd = t;
          if (g.stride[d] != 1) {
            qd = t / g.stride[d];
            ok = ok && qd * g.stride[d] == t;
          }
          ok = ok && t >= 0 && qd < (ll)g.out[d];
          q = ok ? q * g.out[d] + (int)qd : 0;  // < out_sp while valid
        }
        if (ok) acc += src[(ull)jf * (ull)g.out_sp + (ull)q];
#pragma unroll
        for (int d = kConvMaxRank - 1; d >= 0; --d) {  // odometer, row-major
          if (d >= rank) continue;
          if (++j[d] < g.k[d]) break;
          j[d] = 0;
        }
      }
      dx[row * (ull)g.in_sp + pos] = bias ? acc + b : acc;
    }
  }
}

// t[(n * channels + c) * spatial + l] += bias[c] (add) or = bias[c] (fill), rows = n * channels.
template <bool ADD>
__global__ void bias_kernel(float *__restrict__ t, const float *__restrict__ bias, ull rows,
                            ull channels, ull spatial) {
  for (ull row = blockIdx.y; row < rows; row += gridDim.y) {
    const float b = bias[row % channels];
    float *r = t + row * spatial;
    for (ull l = (ull)blockIdx.x * blockDim.x + threadIdx.x; l < spatial;
         l += (ull)blockDim.x * gridDim.x)
      r[l] = ADD ? r[l] + b : b;
  }
}

// Thread 0 calls store(sum) with the sum of the block's kThreads values v, by a fixed tree
// (sh[i] += sh[i + h], h = kThreads / 2 .. 1); sh may be reused on return (the last barrier).
template <class Store>
__device__ __forceinline__ void block_sum(float *sh, float v, Store &&store) {
  sh[threadIdx.x] = v;
  __syncthreads();
  for (unsigned h = kThreads / 2; h > 0; h /= 2) {
    if (threadIdx.x < h) sh[threadIdx.x] += sh[threadIdx.x + h];
    __syncthreads();
  }
  if (threadIdx.x == 0) store(sh[0]);
  __syncthreads();
}

// Block (xsplit, c): partial[c * split + xsplit] = sum over e in its range of the channel's
// batch * spatial values (e = n * spatial + l), thread-strided then a shared-memory tree.
__global__ void channel_sum_kernel(const float *__restrict__ t, ull batch, ull channels,
                                   ull spatial, ull per_block, unsigned split,
                                   float *__restrict__ partial) {
  __shared__ float sh[kThreads];
  const ull total = batch * spatial;
  for (ull c = blockIdx.y; c < channels; c += gridDim.y) {
    const ull e0 = (ull)blockIdx.x * per_block;
    const ull e1 = e0 + per_block < total ? e0 + per_block : total;
    float acc = 0.0f;
    ull e = e0 + threadIdx.x;
    ull n = e / spatial, l = e - n * spatial;
    for (; e < e1; e += kThreads) {
      acc += t[(n * channels + c) * spatial + l];
      l += kThreads;
      while (l >= spatial) {
        l -= spatial;
        ++n;
      }
    }
    block_sum(sh, acc, [&](float sum) { partial[c * split + blockIdx.x] = sum; });
  }
}

__global__ void channel_sum_final(const float *__restrict__ partial, ull channels,
                                  unsigned split, float *__restrict__ out) {
  for (ull c = (ull)blockIdx.x * blockDim.x + threadIdx.x; c < channels;
       c += (ull)blockDim.x * gridDim.x) {
    float acc = partial[c * split];
    for (unsigned k = 1; k < split; ++k) acc += partial[c * split + k];
    out[c] = acc;
  }
}

// dw[i] = (accumulate ? dw[i] + part[0][i] : part[0][i]) + part[1][i] + ... + part[cnt - 1][i].
__global__ void sum_images_kernel(const float *__restrict__ part, ull cnt, ull size,
                                  bool accumulate, float *__restrict__ dw) {
  for (ull i = (ull)blockIdx.x * blockDim.x + threadIdx.x; i < size;
       i += (ull)blockDim.x * gridDim.x) {
    float acc = accumulate ? dw[i] + part[i] : part[i];
    for (ull k = 1; k < cnt; ++k) acc += part[k * size + i];
    dw[i] = acc;
  }
}

// ---- implicit GEMM (forward, input gradient, kernel gradient) -----------------------------------
//
// All index arithmetic below is 32-bit within one image (ig_ok() routes larger problems to
// im2col); image offsets are 64-bit.

constexpr int kBK = 8;          // reduction depth of one shared-memory stage
constexpr int kBN = 128;        // tile columns
constexpr int kMaxTaps = 512;   // window offsets in the shared-memory table (more: im2col)
constexpr int kMaxPhases = 64;  // stride phases of the input gradient (more: col2im)
constexpr ll kCoordMax = ll{1} << 30;
constexpr int kDwTaps = 27;     // depthwise kernels up to 3 x 3 x 3 run the direct kernels

// The window offsets ("taps") a gather visits, in increasing row-major order of j: per axis the
// offsets j = j0 + i * step (i < n), each moving the source coordinate by o = (oa + j * ob) / od
// (exact division). Forward: every j, o = j * dil. Input gradient, stride phase rho: the j on the
// lattice, o = (rho + pad - j * dil) / stride.
template <int R>
struct Taps {
  int n[R], j0[R], step[R], oa[R], ob[R], od[R];
  int kstr[R];  // row-major strides of the kernel window: the tap's index in w is sum j * kstr
};

// A gather GEMM (forward and input gradient) of up to kPhasesPerLaunch phases (the input
// gradient's stride phases; the forward is one phase): for phase ph, group g (blockIdx.z), dst
// channel m < M and column n = (image, col) < N of the phase (col over col_ext),
//   dst[image, g M + m, p(col)] = bias[g M + m] + sum over kc < Kc, taps jj < nj (that order) of
//       w[g w_group + m wm + kc wc + wj(jj)] * src[image, g Kc + kc, col * cs + cb + o(jj)]
// where a source coordinate outside src_ext reads as +0 (padding), and p(col) = col * ds + db.
// blockIdx.x runs over the phases' column tiles one phase after another (from tile0).
constexpr int kPhasesPerLaunch = 16;

template <int R>
struct IgPhase {
  Taps<R> taps;
  int col_ext[R], db[R], nj, col_sp;
  ll N;
  unsigned tile0;
};

template <int R>
struct IgArgs {
  IgPhase<R> ph[kPhasesPerLaunch];
  int nph, M, Kc;
  int cs[R], cb[R];
  int src_ext[R], src_str[R], src_sp;
  ll src_img;
  int ds[R], dst_str[R], dst_sp;
  ll dst_img;
  ll w_group;
  int wm, wc;
  bool skip_pad;  // products with padding are not formed (input gradient): see igemm_kernel
};
static_assert(sizeof(IgArgs<3>) + 4 * sizeof(void *) <= 4096, "the 4 KiB kernel-parameter limit");

// Shared-memory tap table: per tap, t = (linear source offset mod 2^32, o[0], o[1], o[2]) in one
// int4 (one shared load per gathered element) and the tap's index in the kernel window.
template <int R>
struct TapTable {
  int4 t[kMaxTaps];
  int wj[kMaxTaps];
};

__device__ __forceinline__ int tap_o(const int4 &t, int d) {
  return d == 0 ? t.y : d == 1 ? t.z : t.w;
}

template <int R>
__device__ void build_taps(const Taps<R> &t, int nj, const int *src_str, TapTable<R> &tab) {
  for (int jj = threadIdx.x; jj < nj; jj += blockDim.x) {
    int rest = jj, wj = 0, o[3] = {0, 0, 0};
    unsigned lin = 0;
#pragma unroll
    for (int d = R - 1; d >= 0; --d) {
      const int i = rest % t.n[d];
      rest /= t.n[d];
      const int j = t.j0[d] + i * t.step[d];
      o[d] = (t.oa[d] + j * t.ob[d]) / t.od[d];
      lin += (unsigned)o[d] * (unsigned)src_str[d];
      wj += j * t.kstr[d];
    }
    tab.t[jj] = make_int4((int)lin, o[0], o[1], o[2]);
    tab.wj[jj] = wj;
  }
}

// Thread tile: 16 x 16 threads (ty, tx), each TM = BM / 16 rows by 8 columns (two float4 column
// groups 64 apart; rows likewise for TM = 8), so shared-memory reads are float4 and conflict-free.
// A warp is 4 x 8 threads: per reduction step it reads 8 x 2 distinct float4 of B and 4 of A (3
// shared-memory wavefronts), not the 16 x 2 of a 2 x 16 warp (5 wavefronts; with BM = 32 those
// would take longer than the warp's 16 FMAs per step).
__device__ __forceinline__ int ty_of(int tid) { return (tid >> 6) * 4 + ((tid & 31) >> 3); }
__device__ __forceinline__ int tx_of(int tid) { return ((tid >> 5) & 1) * 8 + (tid & 7); }
template <int TM>
__device__ __forceinline__ int row_of(int ty, int i) {
  if (TM == 8) return i < 4 ? ty * 4 + i : 64 + ty * 4 + i - 4;
  return ty * TM + i;
}
__device__ __forceinline__ int col_of(int tx, int j) {
  return j < 4 ? tx * 4 + j : 60 + tx * 4 + j;
}

// Shared-memory stage: As[kk][m] (BM rows, padded by 4 so the transposed stores do not conflict),
// Bs[kk][n].
template <int BM>
struct Stage {
  float a[kBK][BM + 4];
  float b[kBK][kBN + 4];
};

// acc[i][j] += sum over kk (increasing) of As[kk][row i] * Bs[kk][col j]: one fmaf each.
template <int BM>
__device__ __forceinline__ void stage_fma(const Stage<BM> &s, float (&acc)[BM / 16][8], int ty,
                                          int tx) {
  constexpr int TM = BM / 16;
#pragma unroll
  for (int kk = 0; kk < kBK; ++kk) {
    float a[TM], b[8];
    const float4 b0 = *reinterpret_cast<const float4 *>(&s.b[kk][tx * 4]);
    const float4 b1 = *reinterpret_cast<const float4 *>(&s.b[kk][64 + tx * 4]);
    b[0] = b0.x, b[1] = b0.y, b[2] = b0.z, b[3] = b0.w;
    b[4] = b1.x, b[5] = b1.y, b[6] = b1.z, b[7] = b1.w;
    if constexpr (TM >= 4) {
#pragma unroll
      for (int h = 0; h < TM / 4; ++h) {
        const float4 v = *reinterpret_cast<const float4 *>(&s.a[kk][h * 64 + ty * 4]);
        a[4 * h] = v.x, a[4 * h + 1] = v.y, a[4 * h + 2] = v.z, a[4 * h + 3] = v.w;
      }
    } else {
#pragma unroll
      for (int i = 0; i < TM; ++i) a[i] = s.a[kk][ty * TM + i];
    }
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
      for (int j = 0; j < 8; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
  }
}

// The stage loop shared by both GEMM kernels: Loader::fetch() reads the next stage from global
// memory into registers (and advances), Loader::stash(stage) writes them to shared memory. Double
// buffered: the loads of stage t + 1 are in flight while stage t is multiplied; one barrier per
// stage. The reduction order is fixed (stage by stage, kk increasing): deterministic.
template <int BM, class Loader>
__device__ __forceinline__ void stage_loop(Loader &ld, ll stages, Stage<BM> (&st)[2],
                                           float (&acc)[BM / 16][8], int ty, int tx) {
  if (stages == 0) return;
  ld.fetch();
  ld.stash(st[0]);
  __syncthreads();
  for (ll t = 0; t < stages; ++t) {
    const int cur = (int)(t & 1);
    const bool more = t + 1 < stages;
    if (more) ld.fetch();
    stage_fma<BM>(st[cur], acc, ty, tx);
    if (more) ld.stash(st[cur ^ 1]);
    __syncthreads();
  }
}

// (kc, jj) <- (kc, jj) + by in the order k = kc * nj + jj (nj >= 1).
__device__ __forceinline__ void k_advance(int &kc, int &jj, int by, int nj) {
  jj += by;
  if (jj >= nj) {
    const int c = jj / nj;
    kc += c;
    jj -= c * nj;
  }
}

// Loader of the gather GEMM. A (weights, BM x kBK): thread row kk = tid % 8 and rows m = tid / 8
// + 32 i. B (gathered source, kBK x kBN): thread column tid % 128 (decoded once per tile: the
// warp reads 32 consecutive columns, coalesced for stride 1) and rows 4 (tid / 128) + 0..3.
template <int R, int BM>
struct GatherLoader {
  static constexpr int kAE = (BM * kBK + 255) / 256;
  const IgArgs<R> &a;
  const TapTable<R> &tab;
  const float *__restrict__ wg;  // the group's weights
  const float *colp;             // the column's image and group in src (NULL: no column)
  int base[R];
  unsigned base_lin;
  int nj;            // taps of the phase
  int ma, kca, jja;  // A: first row, reduction state of row kk
  int kcb, jjb;      // B: reduction state of the first of four rows
  bool bad;          // a non-finite weight was read
  float ra[kAE], rb[4];

  __device__ void fetch() {
#pragma unroll
    for (int i = 0; i < kAE; ++i) {
      const int m = ma + 32 * i;
      float v = 0.0f;
      if ((BM * kBK >= 256 || threadIdx.x + 256 * i < BM * kBK) && m < a.M && kca < a.Kc)
        v = __ldg(wg + (ll)m * a.wm + (ll)kca * a.wc + tab.wj[jja]);
      bad |= !isfinite(v);
      ra[i] = v;
    }
    k_advance(kca, jja, kBK, nj);
    int kc = kcb, jj = jjb;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int4 t = tab.t[jj];
      bool ok = colp != nullptr && kc < a.Kc;
#pragma unroll
      for (int d = 0; d < R; ++d)
        ok = ok && (unsigned)(base[d] + tap_o(t, d)) < (unsigned)a.src_ext[d];
      rb[i] = ok ? __ldg(colp + (ll)kc * a.src_sp + (base_lin + (unsigned)t.x)) : 0.0f;
      if (++jj == nj) jj = 0, ++kc;
    }
    k_advance(kcb, jjb, kBK, nj);
  }
  __device__ void stash(Stage<BM> &s) const {
    const int kk = threadIdx.x % kBK;
#pragma unroll
    for (int i = 0; i < kAE; ++i)
      if (BM * kBK >= 256 || threadIdx.x + 256 * i < BM * kBK)
        s.a[kk][threadIdx.x / kBK + 32 * i] = ra[i];
    const int n = threadIdx.x % kBN, k0 = 4 * (threadIdx.x / kBN);
#pragma unroll
    for (int i = 0; i < 4; ++i) s.b[k0 + i][n] = rb[i];
  }
};

// col (linear, < col_sp) -> per-axis coordinates over ext (row-major).
template <int R>
__device__ __forceinline__ void decode(int lin, const int *ext, int (&c)[R]) {
#pragma unroll
  for (int d = R - 1; d > 0; --d) {
    c[d] = lin % ext[d];
    lin /= ext[d];
  }
  c[0] = lin;
}

// One output of the gather GEMM summed directly, skipping padding (the rare path of
// igemm_kernel).
template <int R>
__device__ __forceinline__ float direct_sum(const IgArgs<R> &a, const TapTable<R> &tab, int nj,
                                         const float *__restrict__ wm,
                                         const float *__restrict__ sp, const int (&col)[R]) {
  float v = 0.0f;
  for (int kc = 0; kc < a.Kc; ++kc)
    for (int jj = 0; jj < nj; ++jj) {
      bool ok = true;
      unsigned off = 0;
#pragma unroll
      for (int d = 0; d < R; ++d) {
        const int c = col[d] * a.cs[d] + a.cb[d] + tap_o(tab.t[jj], d);
        ok = ok && (unsigned)c < (unsigned)a.src_ext[d];
        off += (unsigned)c * (unsigned)a.src_str[d];
      }
      if (ok) v = fmaf(wm[(ll)kc * a.wc + tab.wj[jj]], sp[(ll)kc * a.src_sp + off], v);
    }
  return v;
}

// Block: group blockIdx.z, dst channels [blockIdx.y BM, +BM), columns [blockIdx.x kBN, +kBN).
// When skip_pad is set (input gradient: the adjoint forms no products with padding) and the block
// read a non-finite weight, the tile is recomputed without the padding products (a direct loop in
// the same order; only then can inf * 0 = NaN differ from skipping the term); for finite weights
// fmaf(w, +0, acc) == acc, so both give the same value.
template <int R, int BM>
__global__ void __launch_bounds__(256, BM == 128 ? 1 : 2)
    igemm_kernel(IgArgs<R> a, const float *__restrict__ src, const float *__restrict__ w,
                 const float *__restrict__ bias, float *__restrict__ dst) {
  constexpr int TM = BM / 16;
  __shared__ TapTable<R> tab;
  __shared__ __align__(16) Stage<BM> st[2];
  const int tid = threadIdx.x, ty = ty_of(tid), tx = tx_of(tid);
  const int g = blockIdx.z, m0 = blockIdx.y * BM;
  int ph = 0;
  while (ph + 1 < a.nph && blockIdx.x >= a.ph[ph + 1].tile0) ++ph;
  const int nj = a.ph[ph].nj, col_sp = a.ph[ph].col_sp;
  const ll N = a.ph[ph].N, n0 = (ll)(blockIdx.x - a.ph[ph].tile0) * kBN;
  int col_ext[R], db[R];
#pragma unroll
  for (int d = 0; d < R; ++d) col_ext[d] = a.ph[ph].col_ext[d], db[d] = a.ph[ph].db[d];
  build_taps<R>(a.ph[ph].taps, nj, a.src_str, tab);
  __syncthreads();

  const float *__restrict__ src_g = src + (ll)g * a.Kc * a.src_sp;
  GatherLoader<R, BM> ld{
      a, tab, w + g * a.w_group, nullptr, {}, 0u, nj, m0 + tid / kBK, 0, 0, 0, 0, false, {}, {}};
  const ll n = n0 + tid % kBN;
  if (n < N) {
    const ll img = n / col_sp;
    int col[R];
    decode<R>((int)(n - img * col_sp), col_ext, col);
    ld.colp = src_g + img * a.src_img;
#pragma unroll
    for (int d = 0; d < R; ++d) {
      ld.base[d] = col[d] * a.cs[d] + a.cb[d];
      ld.base_lin += (unsigned)ld.base[d] * (unsigned)a.src_str[d];
    }
  }
  const ll stages = nj == 0 ? 0 : ((ll)a.Kc * nj + kBK - 1) / kBK;
  if (stages) {
    const int ka = tid % kBK, kb = 4 * (tid / kBN);
    ld.kca = ka / nj, ld.jja = ka % nj;
    ld.kcb = kb / nj, ld.jjb = kb % nj;
  }
  float acc[TM][8] = {};
  stage_loop<BM>(ld, stages, st, acc, ty, tx);
  const bool redo = a.skip_pad && __syncthreads_or(ld.bad);

#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const ll nc = n0 + col_of(tx, j);
    if (nc >= N) continue;
    const ll img = nc / col_sp;
    int col[R];
    decode<R>((int)(nc - img * col_sp), col_ext, col);
    int p = 0;
#pragma unroll
    for (int d = 0; d < R; ++d) p += (col[d] * a.ds[d] + db[d]) * a.dst_str[d];
    float *__restrict__ out = dst + img * a.dst_img + p;
    const float *__restrict__ sp = src_g + img * a.src_img;
#pragma unroll
    for (int i = 0; i < TM; ++i) {
      const int m = m0 + row_of<TM>(ty, i);
      if (m >= a.M) continue;
      const float v =
          redo ? direct_sum<R>(a, tab, nj, w + g * a.w_group + (ll)m * a.wm, sp, col) : acc[i][j];
      const int ch = g * a.M + m;
      out[(ll)ch * a.dst_sp] = bias ? v + bias[ch] : v;
    }
  }
}

// Kernel gradient (the forward's geometry): for group g (blockIdx.z), out channel m < M and
// weight column n = (c, tap) < Nk,
//   part[slice][(g M + m) Nk + n] = sum over r = (image, q) in the slice's range [r0, r1), r
//       increasing, of dy[image, g M + m, q] * x[image, g icg + c, q * stride - pad + o(tap)]
// (padding reads +0 and takes part, as in im2col). blockIdx.x = slice * ntiles + column tile.
template <int R>
struct KgArgs {
  Taps<R> taps;
  int nj, M, Nk, icg, ntiles;
  ll total, per_slice;  // batch * out_sp; reduction length of a slice
  int out_ext[R], out_sp, stride[R], pad[R];
  int in_ext[R], in_str[R], in_sp;
  ll x_img, dy_img, w_size;
};

// Loader of the kernel gradient: one reduction row r per thread (row kk = tid % 8; odometer
// advanced by 8 per stage) shared by A (dy, rows m = tid / 8 + 32 i) and B (gathered x, columns
// tid / 8 + 32 i, decoded once per block): a warp reads 8 consecutive positions of 4 columns.
template <int R, int BM>
struct WgradLoader {
  static constexpr int kAE = (BM * kBK + 255) / 256;
  const KgArgs<R> &a;
  const float *__restrict__ dyg;  // dy at the group's first channel, image 0
  const float *__restrict__ xg;   // x at the group's first channel, image 0
  ll r, r1;
  ll img;
  int q[R], qf;
  int ma;
  int coff[4], o[4][R];
  unsigned lin[4];
  bool cok[4];
  float ra[kAE], rb[4];

  __device__ void fetch() {
    const bool row = r < r1;
    int base[R];
    unsigned base_lin = 0;
#pragma unroll
    for (int d = 0; d < R; ++d) {
      base[d] = q[d] * a.stride[d] - a.pad[d];
      base_lin += (unsigned)base[d] * (unsigned)a.in_str[d];
    }
#pragma unroll
    for (int i = 0; i < kAE; ++i) {
      const int m = ma + 32 * i;
      const bool ok = row && (BM * kBK >= 256 || threadIdx.x + 256 * i < BM * kBK) && m < a.M;
      ra[i] = ok ? __ldg(dyg + img * a.dy_img + (ll)m * a.out_sp + qf) : 0.0f;
    }
    const float *__restrict__ xi = xg + img * a.x_img;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      bool ok = row && cok[i];
#pragma unroll
      for (int d = 0; d < R; ++d) ok = ok && (unsigned)(base[d] + o[i][d]) < (unsigned)a.in_ext[d];
      rb[i] = ok ? __ldg(xi + coff[i] + (base_lin + lin[i])) : 0.0f;
    }
    // Advance r by kBK: odometer over (image, q[0], ..., q[R - 1]).
    r += kBK;
    qf += kBK;
    if (qf >= a.out_sp) qf -= (qf / a.out_sp) * a.out_sp;
    q[R - 1] += kBK;
#pragma unroll
    for (int d = R - 1; d > 0; --d)
      if (q[d] >= a.out_ext[d]) {
        const int c = q[d] / a.out_ext[d];
        q[d] -= c * a.out_ext[d];
        q[d - 1] += c;
      }
    if (q[0] >= a.out_ext[0]) {
      const int c = q[0] / a.out_ext[0];
      q[0] -= c * a.out_ext[0];
      img += c;
    }
  }
  __device__ void stash(Stage<BM> &s) const {
    const int kk = threadIdx.x % kBK, c = threadIdx.x / kBK;
#pragma unroll
    for (int i = 0; i < kAE; ++i)
      if (BM * kBK >= 256 || threadIdx.x + 256 * i < BM * kBK) s.a[kk][c + 32 * i] = ra[i];
#pragma unroll
    for (int i = 0; i < 4; ++i) s.b[kk][c + 32 * i] = rb[i];
  }
};

template <int R, int BM>
__global__ void __launch_bounds__(256, BM == 128 ? 1 : 2)
    wgrad_kernel(KgArgs<R> a, const float *__restrict__ x, const float *__restrict__ dy,
                 float *__restrict__ part) {
  constexpr int TM = BM / 16;
  __shared__ TapTable<R> tab;
  __shared__ __align__(16) Stage<BM> st[2];
  const int tid = threadIdx.x, ty = ty_of(tid), tx = tx_of(tid);
  const int g = blockIdx.z, m0 = blockIdx.y * BM;
  const int slice = blockIdx.x / a.ntiles, n0 = (blockIdx.x - slice * a.ntiles) * kBN;
  build_taps<R>(a.taps, a.nj, a.in_str, tab);
  __syncthreads();

  const ll r0 = (ll)slice * a.per_slice;
  const ll r1 = r0 + a.per_slice < a.total ? r0 + a.per_slice : a.total;
  WgradLoader<R, BM> ld{a, dy + (ll)g * a.M * a.out_sp, x + (ll)g * a.icg * a.in_sp, 0, r1, 0,
                        {}, 0, m0 + tid / kBK, {}, {}, {}, {}, {}, {}};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int n = n0 + tid / kBK + 32 * i;
    ld.cok[i] = n < a.Nk;
    const int c = ld.cok[i] ? n / a.nj : 0, jj = ld.cok[i] ? n - c * a.nj : 0;
    ld.coff[i] = c * a.in_sp;
    const int4 t = tab.t[jj];
    ld.lin[i] = (unsigned)t.x;
#pragma unroll
    for (int d = 0; d < R; ++d) ld.o[i][d] = tap_o(t, d);
  }
  const ll rs = r0 + tid % kBK;
  const ll stages = r1 > r0 ? (r1 - r0 + kBK - 1) / kBK : 0;
  if (rs < r1) {  // else the row reads nothing: r >= r1 throughout
    ld.r = rs;
    ld.img = rs / a.out_sp;
    ld.qf = (int)(rs - ld.img * a.out_sp);
    decode<R>(ld.qf, a.out_ext, ld.q);
  } else {
    ld.r = r1;
  }
  float acc[TM][8] = {};
  stage_loop<BM>(ld, stages, st, acc, ty, tx);

  float *__restrict__ out = part + (ll)slice * a.w_size + (ll)g * a.M * a.Nk;
#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int m = m0 + row_of<TM>(ty, i);
    if (m >= a.M) continue;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const int n = n0 + col_of(tx, j);
      if (n < a.Nk) out[(ll)m * a.Nk + n] = acc[i][j];
    }
  }
}

// ---- depthwise (groups == in_c == out_c): direct kernels ----------------------------------------

template <int R>
struct DwArgs {
  int out_ext[R], in_ext[R], in_str[R], k[R], stride[R], pad[R], dil[R];
  int ksz, out_sp, in_sp, C;
};

// The tap after j (per-axis offsets) in the row-major order of a depthwise window: an odometer.
template <int R>
__device__ __forceinline__ void dw_next_tap(const DwArgs<R> &a, int (&j)[R]) {
#pragma unroll
  for (int d = R - 1; d >= 0; --d) {
    if (++j[d] < a.k[d]) break;
    j[d] = 0;
  }
}

// y[n, c, q] = bias[c] + sum over taps j (row-major) of w[c, j] * x[n, c, q * s - p + j dil]
// (padding +0 takes part). One thread per output.
template <int R>
__global__ void dw_fwd_kernel(DwArgs<R> a, const float *__restrict__ x,
                              const float *__restrict__ w, const float *__restrict__ bias,
                              float *__restrict__ y, ll total) {
  for (ll e = (ll)blockIdx.x * blockDim.x + threadIdx.x; e < total;
       e += (ll)blockDim.x * gridDim.x) {
    const ll nc = e / a.out_sp;
    const int c = (int)(nc % a.C);
    int q[R];
    decode<R>((int)(e - nc * a.out_sp), a.out_ext, q);
    const float *__restrict__ xc = x + nc * a.in_sp;
    const float *__restrict__ wc = w + (ll)c * a.ksz;
    int j[R] = {};
    float acc = 0.0f;
    for (int t = 0; t < a.ksz; ++t) {
      bool ok = true;
      unsigned off = 0;
#pragma unroll
      for (int d = 0; d < R; ++d) {
        const int i = q[d] * a.stride[d] - a.pad[d] + j[d] * a.dil[d];
        ok = ok && (unsigned)i < (unsigned)a.in_ext[d];
        off += (unsigned)i * (unsigned)a.in_str[d];
      }
      acc = fmaf(__ldg(wc + t), ok ? __ldg(xc + off) : 0.0f, acc);
      dw_next_tap<R>(a, j);
    }
    y[e] = bias ? acc + bias[c] : acc;
  }
}

// dx[n, c, p] = bias_in[c] + sum over taps j (row-major) with q = (p + pad - j dil) / s on the
// lattice and inside the output of w[c, j] * dy[n, c, q] (no products with padding). One thread
// per input element.
template <int R>
__global__ void dw_bwd_input_kernel(DwArgs<R> a, const float *__restrict__ dy,
                                    const float *__restrict__ w, const float *__restrict__ bias,
                                    float *__restrict__ dx, ll total) {
  for (ll e = (ll)blockIdx.x * blockDim.x + threadIdx.x; e < total;
       e += (ll)blockDim.x * gridDim.x) {
    const ll nc = e / a.in_sp;
    const int c = (int)(nc % a.C);
    int p[R];
    decode<R>((int)(e - nc * a.in_sp), a.in_ext, p);
    const float *__restrict__ dyc = dy + nc * a.out_sp;
    const float *__restrict__ wc = w + (ll)c * a.ksz;
    int j[R] = {};
    float acc = 0.0f;
    for (int t = 0; t < a.ksz; ++t) {
      bool ok = true;
      unsigned off = 0;
#pragma unroll
      for (int d = 0; d < R; ++d) {
        const int num = p[d] + a.pad[d] - j[d] * a.dil[d];
        const int qd = num / a.stride[d];
        ok = ok && num >= 0 && qd * a.stride[d] == num && qd < a.out_ext[d];
        off = off * (unsigned)a.out_ext[d] + (unsigned)qd;  // < out_sp while valid
      }
      if (ok) acc = fmaf(__ldg(wc + t), __ldg(dyc + off), acc);
      dw_next_tap<R>(a, j);
    }
    dx[e] = bias ? acc + bias[c] : acc;
  }
}

// part[(c * ksz + t) * slices + s] = sum over e in slice s of [0, batch * out_sp) (e = n * out_sp
// + q; thread-strided, e increasing, then a shared-memory tree) of dy[n, c, q] * x[n, c, q * s - p
// + o(t)] (padding +0 takes part) for every tap t < ksz <= kDwTaps (one accumulator each, so a
// position is decoded once). Block (s, c).
template <int R>
__global__ void dw_wgrad_kernel(DwArgs<R> a, Taps<R> taps, const float *__restrict__ x,
                                const float *__restrict__ dy, ll batch, ll per_slice,
                                float *__restrict__ part) {
  __shared__ TapTable<R> tab;
  __shared__ float sh[kThreads];
  build_taps<R>(taps, a.ksz, a.in_str, tab);
  __syncthreads();
  const ll total = batch * a.out_sp;
  const ll e0 = (ll)blockIdx.x * per_slice;
  const ll e1 = e0 + per_slice < total ? e0 + per_slice : total;
  for (int c = blockIdx.y; c < a.C; c += gridDim.y) {
    float acc[kDwTaps] = {};
    for (ll e = e0 + threadIdx.x; e < e1; e += kThreads) {
      const ll n = e / a.out_sp;
      const int qf = (int)(e - n * a.out_sp);
      int q[R];
      decode<R>(qf, a.out_ext, q);
      int base[R];
      unsigned base_lin = 0;
#pragma unroll
      for (int d = 0; d < R; ++d) {
        base[d] = q[d] * a.stride[d] - a.pad[d];
        base_lin += (unsigned)base[d] * (unsigned)a.in_str[d];
      }
      const ll nc = n * a.C + c;
      const float g = __ldg(dy + nc * a.out_sp + qf);
      const float *__restrict__ xc = x + nc * a.in_sp;
#pragma unroll
      for (int t = 0; t < kDwTaps; ++t) {
        if (t >= a.ksz) break;
        const int4 tt = tab.t[t];
        bool ok = true;
#pragma unroll
        for (int d = 0; d < R; ++d)
          ok = ok && (unsigned)(base[d] + tap_o(tt, d)) < (unsigned)a.in_ext[d];
        acc[t] = fmaf(g, ok ? __ldg(xc + (base_lin + (unsigned)tt.x)) : 0.0f, acc[t]);
      }
    }
#pragma unroll
    for (int t = 0; t < kDwTaps; ++t) {
      if (t >= a.ksz) break;
      block_sum(sh, acc[t],
                [&](float sum) { part[((ll)c * a.ksz + t) * gridDim.x + blockIdx.x] = sum; });
    }
  }
}

// ---- host side ----------------------------------------------------------------------------------

bool direct(const ConvShape &s) {
  for (uint32_t d = 0; d < s.rank; ++d)
    if (s.kernel[d] != 1 || s.stride[d] != 1 || s.pad[d] != 0) return false;
  return true;
}

// Images per chunk: per_image floats of scratch each, within the budget, at least 1.
uint64_t chunk_of(uint64_t batch, uint64_t per_image_floats) {
  uint64_t c = per_image_floats == 0 ? batch : kScratchBudget / (per_image_floats * 4);
  c = std::max<uint64_t>(c, 1);
  c = std::min<uint64_t>(c, batch);
  return std::min<uint64_t>(c, (uint64_t)INT_MAX);
}

// The row kernels' grids (im2col, col2im, bias): x over a row's items, y over the rows
// (grid-stride past kMaxGridY).
template <int R>
void launch_im2col(const Geo &g, const float *x, float *cols, uint64_t rows, cudaStream_t st) {
  const dim3 grid(blocks((uint64_t)g.out_sp, kThreads), std::min(blocks(rows, 1), kMaxGridY));
  im2col_kernel<R><<<grid, kThreads, 0, st>>>(g, x, cols, rows);
}

void im2col(const Geo &g, const float *x, float *cols, uint64_t images, cudaStream_t st) {
  const uint64_t rows = images * (uint64_t)g.in_c * (uint64_t)g.ksz;
  switch (g.rank) {
    case 1: launch_im2col<1>(g, x, cols, rows, st); break;
    case 2: launch_im2col<2>(g, x, cols, rows, st); break;
    case 3: launch_im2col<3>(g, x, cols, rows, st); break;
    default: launch_im2col<0>(g, x, cols, rows, st); break;
  }
  check_launch("im2col_kernel");
}

template <int R>
void launch_col2im(const Geo &g, const float *dcols, const float *bias, float *dx, uint64_t rows,
                   cudaStream_t st) {
  const dim3 grid(blocks((uint64_t)g.in_sp, kThreads), std::min(blocks(rows, 1), kMaxGridY));
  col2im_kernel<R><<<grid, kThreads, 0, st>>>(g, dcols, bias, dx, rows);
}

void col2im(const Geo &g, const float *dcols, const float *bias, float *dx, uint64_t images,
            cudaStream_t st) {
  const uint64_t rows = images * (uint64_t)g.in_c;
  switch (g.rank) {
    case 1: launch_col2im<1>(g, dcols, bias, dx, rows, st); break;
    case 2: launch_col2im<2>(g, dcols, bias, dx, rows, st); break;
    case 3: launch_col2im<3>(g, dcols, bias, dx, rows, st); break;
    default: launch_col2im<0>(g, dcols, bias, dx, rows, st); break;
  }
  check_launch("col2im_kernel");
}

void bias_pass(bool add, float *t, const float *bias, uint64_t batch, uint64_t channels,
               uint64_t spatial, cudaStream_t st) {
  const uint64_t rows = batch * channels;
  const dim3 grid(blocks(spatial, kThreads), std::min(blocks(rows, 1), kMaxGridY));
  if (add)
    bias_kernel<true><<<grid, kThreads, 0, st>>>(t, bias, rows, channels, spatial);
  else
    bias_kernel<false><<<grid, kThreads, 0, st>>>(t, bias, rows, channels, spatial);
  check_launch("bias_kernel");
}

// Row-major batched product: for q < count, C_q (m, p) = op(A_q) (m, n) * op(B_q) (n, p) (+ beta
// C_q); lda, ldb, ldc are the stored row lengths, sa, sb, sc the strides between the q. Mapped to
// column-major cuBLAS as C^T = op(B)^T op(A)^T (see abi/tlrt_blas.h).
void gemm_rm(cublasHandle_t h, bool ta, bool tb, int m, int n, int p, const float *a, int lda,
             ll sa, const float *b, int ldb, ll sb, float *c, int ldc, ll sc, int count,
             float beta) {
  const float one = 1.0f;
  const cublasOperation_t opa = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t opb = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
  if (count == 1) {
    cublas_check(cublasSgemm(h, opb, opa, p, m, n, &one, b, ldb, a, lda, &beta, c, ldc),
                 "cublasSgemm");
    return;
  }
  cublas_check(cublasSgemmStridedBatched(h, opb, opa, p, m, n, &one, b, ldb, sb, a, lda, sa,
                                         &beta, c, ldc, sc, count),
               "cublasSgemmStridedBatched");
}

// ---- implicit GEMM and depthwise: host side -----------------------------------------------------

constexpr uint64_t kWgradScratch = uint64_t{64} << 20;  // bytes of kernel-gradient partials
constexpr ll kTargetBlocks = 512;  // slices of a long reduction aim at this many blocks (fixed,
                                   // not device-dependent: the same bits on every GPU model)

// The implicit-GEMM and depthwise kernels index one image in 32 bits and hold the window in a
// shared-memory table: rank <= 3, at most kMaxTaps window offsets, every coordinate, stride and
// dilation below 2^30, one image's input and output below 2^31 elements, and the launch grid in
// range. Everything else takes the im2col path.
bool ig_ok(const ConvShape &s) {
  if (s.rank > 3 || s.ksz > (uint64_t)kMaxTaps || s.groups > kMaxGridY) return false;
  for (uint32_t d = 0; d < s.rank; ++d)
    if (s.in[d] + 2 * s.pad[d] >= (uint64_t)kCoordMax || s.stride[d] >= (uint64_t)kCoordMax ||
        s.dilation[d] >= (uint64_t)kCoordMax)
      return false;
  const uint64_t lim = uint64_t{1} << 31, icg = s.in_c / s.groups, ocg = s.out_c / s.groups;
  return s.in_c * s.in_sp < lim && s.out_c * s.out_sp < lim && ocg * s.ksz < lim &&
         icg * s.ksz < lim - kBN &&  // wgrad_kernel's int column indices, one tile past the end
         s.batch * std::max(s.in_sp, s.out_sp) / kBN < kMaxGrid &&
         (std::max(icg, ocg) + 15) / 16 <= kMaxGridY;
}

// Tile rows: the smallest of 16, 32, 64, 128 covering m (m > 128: tiles of 128).
int bm_for(uint64_t m) { return m <= 16 ? 16 : m <= 32 ? 32 : m <= 64 ? 64 : 128; }

// A gather GEMM of few blocks (less than one per SM of an H100) with a long reduction leaves most
// of the GPU idle for a long time; cuBLAS splits such products, so they keep the im2col path.
bool ig_worth(uint64_t n, uint64_t m, uint64_t groups, uint64_t k) {
  const uint64_t blocks = (n + kBN - 1) / kBN * ((m + bm_for(m) - 1) / bm_for(m)) * groups;
  return blocks >= 128 || k < 256;
}

bool depthwise(const ConvShape &s) {
  return s.groups == s.in_c && s.in_c == s.out_c && s.ksz <= (uint64_t)kDwTaps;
}

template <int R>
void strides_of(const uint64_t *ext, int (&str)[R]) {
  int m = 1;
  for (int d = R - 1; d >= 0; --d) {
    str[d] = m;
    m *= (int)ext[d];
  }
}

// Every window offset: o = j * dil.
template <int R>
Taps<R> fwd_taps(const ConvShape &s) {
  Taps<R> t{};
  for (int d = 0; d < R; ++d) {
    t.n[d] = (int)s.kernel[d];
    t.j0[d] = 0;
    t.step[d] = 1;
    t.oa[d] = 0;
    t.ob[d] = (int)s.dilation[d];
    t.od[d] = 1;
  }
  strides_of<R>(s.kernel, t.kstr);
  return t;
}

template <int R>
IgArgs<R> fwd_args(const ConvShape &s) {
  IgArgs<R> a{};
  const uint64_t icg = s.in_c / s.groups, ocg = s.out_c / s.groups;
  IgPhase<R> &p = a.ph[0];
  a.nph = 1;
  p.taps = fwd_taps<R>(s);
  p.nj = (int)s.ksz;
  p.col_sp = (int)s.out_sp;
  p.N = (ll)(s.batch * s.out_sp);
  p.tile0 = 0;
  a.M = (int)ocg;
  a.Kc = (int)icg;
  for (int d = 0; d < R; ++d) {
    p.col_ext[d] = (int)s.out[d];
    p.db[d] = 0;
    a.cs[d] = (int)s.stride[d];
    a.cb[d] = -(int)s.pad[d];
    a.src_ext[d] = (int)s.in[d];
    a.ds[d] = 1;
  }
  strides_of<R>(s.in, a.src_str);
  a.src_sp = (int)s.in_sp;
  a.src_img = (ll)(s.in_c * s.in_sp);
  strides_of<R>(s.out, a.dst_str);
  a.dst_sp = (int)s.out_sp;
  a.dst_img = (ll)(s.out_c * s.out_sp);
  a.w_group = (ll)(ocg * icg * s.ksz);
  a.wm = (int)(icg * s.ksz);
  a.wc = (int)s.ksz;
  a.skip_pad = false;
  return a;
}

template <int R, int BM>
void launch_igemm(const IgArgs<R> &a, uint64_t groups, const float *src, const float *w,
                  const float *bias, float *dst, cudaStream_t st) {
  const IgPhase<R> &last = a.ph[a.nph - 1];
  const dim3 grid((unsigned)(last.tile0 + (last.N + kBN - 1) / kBN),
                  (unsigned)((a.M + BM - 1) / BM), (unsigned)groups);
  igemm_kernel<R, BM><<<grid, 256, 0, st>>>(a, src, w, bias, dst);
  check_launch("igemm_kernel");
}

template <int R>
void igemm(const IgArgs<R> &a, uint64_t groups, const float *src, const float *w,
           const float *bias, float *dst, cudaStream_t st) {
  switch (bm_for((uint64_t)a.M)) {
    case 16: launch_igemm<R, 16>(a, groups, src, w, bias, dst, st); break;
    case 32: launch_igemm<R, 32>(a, groups, src, w, bias, dst, st); break;
    case 64: launch_igemm<R, 64>(a, groups, src, w, bias, dst, st); break;
    default: launch_igemm<R, 128>(a, groups, src, w, bias, dst, st); break;
  }
}

template <int R>
void ig_fwd(const ConvShape &s, const float *x, const float *w, const float *bias, float *y,
            cudaStream_t st) {
  igemm<R>(fwd_args<R>(s), s.groups, x, w, bias, y, st);
}

uint64_t phase_count(const ConvShape &s) {
  uint64_t n = 1;
  for (uint32_t d = 0; d < s.rank; ++d) n *= std::min(s.stride[d], s.in[d]);
  return n;
}

// Input gradient by stride phase rho (rho[d] < min(stride, in); up to kPhasesPerLaunch phases
// per launch): the positions p = rho + stride * t gather dy at q = t + (rho + pad - j dil) /
// stride over the taps j on their lattice, a dense gather (no taps wasted on the lattice test).
template <int R>
void ig_bwd_input(const ConvShape &s, const float *dy, const float *w, const float *bias,
                  float *dx, cudaStream_t st) {
  const uint64_t icg = s.in_c / s.groups, ocg = s.out_c / s.groups;
  IgArgs<R> a{};
  a.M = (int)icg;
  a.Kc = (int)ocg;
  for (int d = 0; d < R; ++d) {
    a.cs[d] = 1;
    a.cb[d] = 0;
    a.src_ext[d] = (int)s.out[d];
    a.ds[d] = (int)s.stride[d];
  }
  strides_of<R>(s.out, a.src_str);
  a.src_sp = (int)s.out_sp;
  a.src_img = (ll)(s.out_c * s.out_sp);
  strides_of<R>(s.in, a.dst_str);
  a.dst_sp = (int)s.in_sp;
  a.dst_img = (ll)(s.in_c * s.in_sp);
  a.w_group = (ll)(ocg * icg * s.ksz);
  a.wm = (int)s.ksz;
  a.wc = (int)(icg * s.ksz);
  a.skip_pad = true;
  int rho[R] = {};
  unsigned tiles = 0;
  for (bool more = true; more;) {
    IgPhase<R> &p = a.ph[a.nph];
    strides_of<R>(s.kernel, p.taps.kstr);
    p.nj = 1;
    p.col_sp = 1;
    for (int d = 0; d < R; ++d) {
      const ll st_d = (ll)s.stride[d], dil = (ll)s.dilation[d], k = (ll)s.kernel[d];
      const ll num = rho[d] + (ll)s.pad[d];
      int cnt = 0, first = 0, second = 0;
      for (ll j = 0; j < k; ++j)
        if ((num - j * dil) % st_d == 0) {
          if (cnt == 0) first = (int)j;
          if (cnt == 1) second = (int)j;
          ++cnt;
        }
      p.taps.n[d] = cnt;
      p.taps.j0[d] = first;
      p.taps.step[d] = cnt > 1 ? second - first : 1;  // the lattice taps are a residue class
      p.taps.oa[d] = (int)num;
      p.taps.ob[d] = -(int)dil;
      p.taps.od[d] = (int)st_d;
      p.nj *= cnt;
      p.col_ext[d] = (int)(((ll)s.in[d] - rho[d] + st_d - 1) / st_d);
      p.db[d] = rho[d];
      p.col_sp *= p.col_ext[d];
    }
    p.N = (ll)s.batch * p.col_sp;
    p.tile0 = tiles;
    tiles += (unsigned)((p.N + kBN - 1) / kBN);
    ++a.nph;
    int d = R - 1;  // next phase, row-major
    for (; d >= 0; --d) {
      if (++rho[d] < (int)std::min(s.stride[d], s.in[d])) break;
      rho[d] = 0;
    }
    more = d >= 0;
    if (a.nph == kPhasesPerLaunch || !more) {
      igemm<R>(a, s.groups, dy, w, bias, dx, st);
      a.nph = 0;
      tiles = 0;
    }
  }
}

template <int R, int BM>
void launch_wgrad(const KgArgs<R> &a, unsigned slices, unsigned mt, uint64_t groups,
                  const float *x, const float *dy, float *part, cudaStream_t st) {
  const dim3 grid((unsigned)a.ntiles * slices, mt, (unsigned)groups);
  wgrad_kernel<R, BM><<<grid, 256, 0, st>>>(a, x, dy, part);
  check_launch("wgrad_kernel");
}

// Kernel gradient: the reduction over batch * out_sp split into `slices` fixed ranges (enough
// blocks for kTargetBlocks, each range >= 128 positions, partials within kWgradScratch), summed
// in slice order by sum_images_kernel; one slice writes dw directly.
template <int R>
void ig_bwd_kernel(int dev, const ConvShape &s, const float *x, const float *dy, float *dw,
                   cudaStream_t st) {
  const uint64_t icg = s.in_c / s.groups, ocg = s.out_c / s.groups, kg = icg * s.ksz;
  KgArgs<R> a{};
  a.taps = fwd_taps<R>(s);
  a.nj = (int)s.ksz;
  a.M = (int)ocg;
  a.Nk = (int)kg;
  a.icg = (int)icg;
  a.ntiles = (int)((kg + kBN - 1) / kBN);
  a.total = (ll)(s.batch * s.out_sp);
  for (int d = 0; d < R; ++d) {
    a.out_ext[d] = (int)s.out[d];
    a.stride[d] = (int)s.stride[d];
    a.pad[d] = (int)s.pad[d];
    a.in_ext[d] = (int)s.in[d];
  }
  a.out_sp = (int)s.out_sp;
  strides_of<R>(s.in, a.in_str);
  a.in_sp = (int)s.in_sp;
  a.x_img = (ll)(s.in_c * s.in_sp);
  a.dy_img = (ll)(s.out_c * s.out_sp);
  a.w_size = (ll)(s.out_c * kg);
  const int bm = bm_for(ocg);
  const ll mt = ((ll)ocg + bm - 1) / bm;
  const ll tiles = (ll)a.ntiles * mt * (ll)s.groups;
  ll slices = (kTargetBlocks + tiles - 1) / tiles;
  slices = std::min<ll>(slices, std::max<ll>(1, a.total / 128));
  slices = std::min<ll>(slices, std::max<ll>(1, (ll)(kWgradScratch / 4) / a.w_size));
  slices = std::min<ll>(slices, (ll)kMaxGrid / a.ntiles);
  a.per_slice = (a.total + slices - 1) / slices;
  slices = (a.total + a.per_slice - 1) / a.per_slice;  // no empty slice
  FloatScratch part(dev, slices > 1 ? (uint64_t)(slices * a.w_size) : 0);
  float *dst = slices > 1 ? part.get() : dw;
  const unsigned sl = (unsigned)slices, m = (unsigned)mt;
  switch (bm) {
    case 16: launch_wgrad<R, 16>(a, sl, m, s.groups, x, dy, dst, st); break;
    case 32: launch_wgrad<R, 32>(a, sl, m, s.groups, x, dy, dst, st); break;
    case 64: launch_wgrad<R, 64>(a, sl, m, s.groups, x, dy, dst, st); break;
    default: launch_wgrad<R, 128>(a, sl, m, s.groups, x, dy, dst, st); break;
  }
  if (slices > 1) {
    sum_images_kernel<<<grid_for((uint64_t)a.w_size, kThreads, dev), kThreads, 0, st>>>(
        part.get(), (ull)slices, (ull)a.w_size, false, dw);
    check_launch("sum_images_kernel");
  }
}

template <int R>
DwArgs<R> dw_args(const ConvShape &s) {
  DwArgs<R> a{};
  for (int d = 0; d < R; ++d) {
    a.out_ext[d] = (int)s.out[d];
    a.in_ext[d] = (int)s.in[d];
    a.k[d] = (int)s.kernel[d];
    a.stride[d] = (int)s.stride[d];
    a.pad[d] = (int)s.pad[d];
    a.dil[d] = (int)s.dilation[d];
  }
  strides_of<R>(s.in, a.in_str);
  a.ksz = (int)s.ksz;
  a.out_sp = (int)s.out_sp;
  a.in_sp = (int)s.in_sp;
  a.C = (int)s.in_c;
  return a;
}

template <int R>
void dw_fwd(const ConvShape &s, const float *x, const float *w, const float *bias, float *y,
            cudaStream_t st) {
  const ll total = (ll)(s.batch * s.out_c * s.out_sp);
  dw_fwd_kernel<R><<<grid_all((uint64_t)total, kThreads), kThreads, 0, st>>>(dw_args<R>(s), x, w,
                                                                             bias, y, total);
  check_launch("dw_fwd_kernel");
}

template <int R>
void dw_bwd_input(const ConvShape &s, const float *dy, const float *w, const float *bias,
                  float *dx, cudaStream_t st) {
  const ll total = (ll)(s.batch * s.in_c * s.in_sp);
  dw_bwd_input_kernel<R><<<grid_all((uint64_t)total, kThreads), kThreads, 0, st>>>(
      dw_args<R>(s), dy, w, bias, dx, total);
  check_launch("dw_bwd_input_kernel");
}

// Depthwise kernel gradient: per channel, slices of the batch * out_sp positions (enough blocks
// for kTargetBlocks, each >= 1024 positions), then channel_sum_final adds the slices in order.
template <int R>
void dw_bwd_kernel(int dev, const ConvShape &s, const float *x, const float *dy, float *dw,
                   cudaStream_t st) {
  const ll total = (ll)(s.batch * s.out_sp), C = (ll)s.in_c;
  ll slices = std::min<ll>((kTargetBlocks + C - 1) / C, std::max<ll>(1, total / 1024));
  slices = std::min<ll>(slices, 65535);
  const ll per_slice = (total + slices - 1) / slices;
  slices = (total + per_slice - 1) / per_slice;
  FloatScratch part(dev, (uint64_t)(C * s.ksz * slices));
  const dim3 grid((unsigned)slices, (unsigned)std::min<ll>(C, kMaxGridY), 1);
  dw_wgrad_kernel<R><<<grid, kThreads, 0, st>>>(dw_args<R>(s), fwd_taps<R>(s), x, dy,
                                                (ll)s.batch, per_slice, part.get());
  check_launch("dw_wgrad_kernel");
  channel_sum_final<<<grid_for(C * s.ksz, kThreads, dev), kThreads, 0, st>>>(
      part.get(), (ull)(C * s.ksz), (unsigned)slices, dw);
  check_launch("channel_sum_final");
}

// Calls f(std::integral_constant<int, rank>) (rank 1, 2 or 3: ig_ok() holds).
template <class F>
void by_rank(uint32_t rank, F &&f) {
  switch (rank) {
    case 1: f(std::integral_constant<int, 1>{}); break;
    case 2: f(std::integral_constant<int, 2>{}); break;
    default: f(std::integral_constant<int, 3>{}); break;
  }
}

}  // namespace

void conv_fwd(int dev, const ConvShape &s, const float *x, const float *w, const float *bias,
              const MatmulPolicy &policy, float *y) {
  const cudaStream_t st = stream(dev);
  if (ig_ok(s) && depthwise(s)) {
    by_rank(s.rank, [&](auto r) { dw_fwd<decltype(r)::value>(s, x, w, bias, y, st); });
    return;
  }
  const uint64_t icg = s.in_c / s.groups, ocg = s.out_c / s.groups, kg = icg * s.ksz;
  if (ig_ok(s) && !policy.allow_tf32 && !direct(s) &&
      ig_worth(s.batch * s.out_sp, ocg, s.groups, kg)) {
    by_rank(s.rank, [&](auto r) { ig_fwd<decltype(r)::value>(s, x, w, bias, y, st); });
    return;
  }
  const cublasHandle_t h = cublas_handle(dev, policy.allow_tf32);
  const Geo g = geo_of(s);
  const bool dir = direct(s);
  const uint64_t col_img = dir ? 0 : s.in_c * s.ksz * s.out_sp;  // floats per image
  const uint64_t chunk = chunk_of(s.batch, col_img);
  FloatScratch cols(dev, chunk * col_img);
  const uint64_t x_img = s.in_c * s.in_sp, y_img = s.out_c * s.out_sp;
  for (uint64_t n0 = 0; n0 < s.batch; n0 += chunk) {
    const uint64_t cnt = std::min(chunk, s.batch - n0);
    const float *src = x + n0 * x_img;
    ll src_img = (ll)x_img;
    if (!dir) {
      im2col(g, src, cols.get(), cnt, st);
      src = cols.get();
      src_img = (ll)col_img;
    }
    for (uint64_t gi = 0; gi < s.groups; ++gi)
      gemm_rm(h, false, false, (int)ocg, (int)kg, (int)s.out_sp, w + gi * ocg * kg, (int)kg, 0,
              src + gi * kg * s.out_sp, (int)s.out_sp, src_img,
              y + n0 * y_img + gi * ocg * s.out_sp, (int)s.out_sp, (ll)y_img, (int)cnt, 0.0f);
  }
  if (bias) bias_pass(true, y, bias, s.batch, s.out_c, s.out_sp, st);
}

void conv_bwd_input(int dev, const ConvShape &s, const float *dy, const float *w,
                    const float *bias_in, const MatmulPolicy &policy, float *dx) {
  const cudaStream_t st = stream(dev);
  if (ig_ok(s) && depthwise(s)) {
    by_rank(s.rank, [&](auto r) { dw_bwd_input<decltype(r)::value>(s, dy, w, bias_in, dx, st); });
    return;
  }
  const uint64_t icg = s.in_c / s.groups, ocg = s.out_c / s.groups, kg = icg * s.ksz;
  if (ig_ok(s) && !policy.allow_tf32 && !direct(s) && phase_count(s) <= (uint64_t)kMaxPhases &&
      ig_worth(s.batch * s.in_sp, icg, s.groups, ocg * s.ksz / phase_count(s))) {
    by_rank(s.rank, [&](auto r) { ig_bwd_input<decltype(r)::value>(s, dy, w, bias_in, dx, st); });
    return;
  }
  const cublasHandle_t h = cublas_handle(dev, policy.allow_tf32);
  const Geo g = geo_of(s);
  const bool dir = direct(s);
  const uint64_t col_img = dir ? 0 : s.in_c * s.ksz * s.out_sp;
  const uint64_t chunk = chunk_of(s.batch, col_img);
  FloatScratch dcols(dev, chunk * col_img);
  const uint64_t x_img = s.in_c * s.in_sp, y_img = s.out_c * s.out_sp;
  for (uint64_t n0 = 0; n0 < s.batch; n0 += chunk) {
    const uint64_t cnt = std::min(chunk, s.batch - n0);
    // direct: in_sp == out_sp and the column matrix is dx itself.
    float *dst = dir ? dx + n0 * x_img : dcols.get();
    const ll dst_img = dir ? (ll)x_img : (ll)col_img;
    for (uint64_t gi = 0; gi < s.groups; ++gi)
      gemm_rm(h, true, false, (int)kg, (int)ocg, (int)s.out_sp, w + gi * ocg * kg, (int)kg, 0,
              dy + n0 * y_img + gi * ocg * s.out_sp, (int)s.out_sp, (ll)y_img,
              dst + gi * kg * s.out_sp, (int)s.out_sp, dst_img, (int)cnt, 0.0f);
    if (!dir) col2im(g, dcols.get(), bias_in, dx + n0 * x_img, cnt, st);
  }
  if (dir && bias_in) bias_pass(true, dx, bias_in, s.batch, s.in_c, s.in_sp, st);
}

void conv_bwd_kernel(int dev, const ConvShape &s, const float *x, const float *dy,
                     const MatmulPolicy &policy, float *dw) {
  const cudaStream_t st = stream(dev);
  if (ig_ok(s) && depthwise(s)) {
    by_rank(s.rank, [&](auto r) { dw_bwd_kernel<decltype(r)::value>(dev, s, x, dy, dw, st); });
    return;
  }
  if (ig_ok(s) && !policy.allow_tf32 && !direct(s)) {
    by_rank(s.rank, [&](auto r) { ig_bwd_kernel<decltype(r)::value>(dev, s, x, dy, dw, st); });
    return;
  }
  const cublasHandle_t h = cublas_handle(dev, policy.allow_tf32);
  const Geo g = geo_of(s);
  const uint64_t icg = s.in_c / s.groups, ocg = s.out_c / s.groups, kg = icg * s.ksz;
  const bool dir = direct(s);
  const uint64_t col_img = dir ? 0 : s.in_c * s.ksz * s.out_sp;
  const uint64_t w_size = s.out_c * kg;
  // Partials are needed only for chunks of more than one image.
  const uint64_t chunk = chunk_of(s.batch, col_img + (s.batch > 1 ? w_size : 0));
  FloatScratch cols(dev, chunk * col_img);
  FloatScratch part(dev, chunk > 1 ? chunk * w_size : 0);
  const uint64_t x_img = s.in_c * s.in_sp, y_img = s.out_c * s.out_sp;
  for (uint64_t n0 = 0; n0 < s.batch; n0 += chunk) {
    const uint64_t cnt = std::min(chunk, s.batch - n0);
    const float *src = x + n0 * x_img;
    ll src_img = (ll)x_img;
    if (!dir) {
      im2col(g, src, cols.get(), cnt, st);
      src = cols.get();
      src_img = (ll)col_img;
    }
    const bool into_dw = cnt == 1;  // beta = 0 for the first image, 1 after: in order
    float *dst = into_dw ? dw : part.get();
    const float beta = into_dw && n0 != 0 ? 1.0f : 0.0f;
    for (uint64_t gi = 0; gi < s.groups; ++gi)
      gemm_rm(h, false, true, (int)ocg, (int)s.out_sp, (int)kg,
              dy + n0 * y_img + gi * ocg * s.out_sp, (int)s.out_sp, (ll)y_img,
              src + gi * kg * s.out_sp, (int)s.out_sp, src_img, dst + gi * ocg * kg, (int)kg,
              (ll)w_size, (int)cnt, beta);
    if (!into_dw) {
      sum_images_kernel<<<grid_for(w_size, kThreads, dev), kThreads, 0, st>>>(
          part.get(), cnt, w_size, n0 != 0, dw);
      check_launch("sum_images_kernel");
    }
  }
}

void channel_sum(int dev, const float *t, uint64_t batch, uint64_t channels, uint64_t spatial,
                 float *out) {
  const cudaStream_t st = stream(dev);
  const uint64_t total = batch * spatial;
  // Enough blocks to fill the device (4 per SM over all channels), each at least 4096 values.
  uint64_t split = ((uint64_t)sm_count(dev) * 4 + channels - 1) / channels;
  split = std::min<uint64_t>(split, (total + 4095) / 4096);
  split = std::max<uint64_t>(std::min<uint64_t>(split, 65535), 1);
  const uint64_t per_block = (total + split - 1) / split;
  FloatScratch partial(dev, channels * split);
  const dim3 grid((unsigned)split, (unsigned)std::min<uint64_t>(channels, kMaxGridY), 1);
  channel_sum_kernel<<<grid, kThreads, 0, st>>>(t, batch, channels, spatial, per_block,
                                                (unsigned)split, partial.get());
  check_launch("channel_sum_kernel");
  channel_sum_final<<<grid_for(channels, kThreads, dev), kThreads, 0, st>>>(
      partial.get(), channels, (unsigned)split, out);
  check_launch("channel_sum_final");
}

void channel_fill(int dev, const float *bias, uint64_t batch, uint64_t channels,
                  uint64_t spatial, float *out) {
  bias_pass(false, out, bias, batch, channels, spatial, stream(dev));
}

}  // namespace cuda
}  // namespace tlrt
