// CPU backend, matrix products: a cache-blocked GEMM in the BLIS style, float32 for bmm and the
// same code instantiated for float64 for tlrt_dgemm. Single-threaded. No system BLAS: this kernel
// measured at or above single-threaded OpenBLAS on the build machine (below), so the CPU backend
// has one implementation and tlrt_build_info says "cpu blas: builtin".
//
// Every operand is addressed through (row, column) strides, so a transposed operand is only other
// strides. Three paths, chosen per call (the same for every matrix of a batch):
//
// Packed (the general case): for C (m, p) = A (m, n) B (n, p),
//   for each NC-wide column panel of B and C         (NC = 2048 floats, 1024 doubles: 4 MiB of B)
//     for each KC-deep slice of the sum               (KC = 512)
//       pack B[slice, panel] into NR-wide micro-panels, k-major
//       for each MC-high row block of A              (MC = 128)
//         pack A[rows, slice] into MR-high micro-panels, k-major
//         for each micro-panel of B, for each micro-panel of A: the micro-kernel
//   Packing pads partial micro-panels with zeros, so the micro-kernel always runs a full MR x NR
//   tile; only the valid part is stored. The micro-kernel keeps the MR x NR tile of C in
//   registers: per k it loads NR consecutive packed B values and broadcasts MR packed A values,
//   MR * NR fused multiply-adds written as explicit __builtin_fmaf / __builtin_fma (the build uses
//   -ffp-contract=off, so nothing else fuses) in plain fixed-trip loops that GCC and clang
//   vectorise and keep in registers. Blocking measured on the build machine (best of several
//   runs): KC = 512 / MC = 128 gave 100, 102, 106 GFLOP/s at 2048^3, 1024^3, 512^3, where
//   KC = 256 gave 87, 92, 104 (the 2048 drop: B's panel no longer in L2).
// Unpacked, few rows (m <= 4) or small products (m n p <= 32^3, where packing costs more than it
//   saves): four rows of A at a time, B read in place. If B's rows are contiguous (not trans_b):
//   register tiles of 4 x 64 columns (AVX-512) and narrower tails; with few rows and a large B,
//   blocks of 4 KiB of columns with the accumulators in an L1-resident array, so that B streams in
//   long contiguous runs. If B's columns are contiguous (trans_b): dot products with 2 vectors of
//   lanes per row, the lanes added by pairwise halving, the n % lanes tail in order.
// Unpacked, few columns (p <= 8, m > 4): the same paths on the transposed problem
//   C^T = B^T A^T (C stored with strides (1, p)): a matrix-vector product streams A once.
//
// Each C element is a float32 (float64) sum of its n products with no product skipped:
//   packed: acc = -0; acc = fma(A(i, k), B(k, j), acc) for k increasing within a slice of 512;
//           C = acc after the first slice, C + acc after each later one;
//   unpacked: the same with one slice (rows), or lanes as above (dots).
// So 0 * inf and 0 * NaN give NaN as in IEEE arithmetic, and a C element whose products are all
// -0 is -0 (every accumulator starts at -0, the identity of addition). Error: within
// gamma(n + ceil(n / 512) + 6) * sum_k |A(i, k)| |B(k, j)|, gamma(r) = r u / (1 - r u), u = 2^-24
// (float) or 2^-53 (double), while nothing overflows; the tests check 2 n u.
//
// Kernels per instruction set, picked from the CPU's features (checked once) under the cap core
// passes in the policy (TORCHLEAN_RT_GEMM_ISA, for testing; it never selects what the CPU lacks):
//   AVX-512 (F, BW, DQ, VL): float tile 4 x 32 (8 zmm accumulators), double 4 x 16;
//   AVX2 + FMA: float 4 x 16 (8 ymm accumulators), double 4 x 8;
//   generic (baseline x86-64 and other architectures): float 4 x 8, double 4 x 4, fused
//   multiply-adds only where the target has them in hardware (__FP_FAST_FMA[F]); otherwise a
//   multiply then an add (two roundings; the error bound above still holds).
// The tile shapes leave room in the register file: 6 x 16 on AVX2 spills under GCC 12 (41 GFLOP/s
// against 94 for 4 x 16); 12 x 32 and 14 x 32 on AVX-512 measured 78 and 51 against ~100 for
// 4 x 32 and 6 x 32.
//
// Measured on the build machine (AMD EPYC Zen 4, 2 vCPUs shared with other builds, one thread,
// GCC 12, -O3, best of several runs): float 256^3 ~106 GFLOP/s, 1024^3 ~100, 2048^3 ~99; AVX2
// kernel 96 and 94; generic (SSE2, no FMA) ~33. Single-core peak measured with an FMA loop: ~117 GFLOP/s
// (32 flops per cycle at ~3.65 GHz), so the packed path runs at 80-90% of peak. numpy's bundled
// OpenBLAS with OPENBLAS_NUM_THREADS=1 measured 103 and 72 GFLOP/s at 256^3 and 1024^3 on the same
// machine. Matrix-vector (4096 x 4096 times a vector): 3.4-4.7 ms, 14-19 GB/s of A (the memory
// bandwidth is ~18 GB/s); 64 x 128^3 batched: ~72 GFLOP/s; 1000 x 8^3: 0.14 ms.
#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "core/backend/blas.hpp"
#include "core/backend/reduce.hpp"
#include "core/backend/memory.hpp"

namespace tlrt {
namespace stub {

namespace {

using u64 = uint64_t;

#define TLRT_GEMM_INLINE __attribute__((always_inline)) inline

// Logical (rows, cols) matrix: element (i, j) at p[i * rs + j * cs].
template <class T>
struct View {
  const T *p;
  u64 rs, cs;
};

TLRT_GEMM_INLINE float fused(float a, float b, float c) { return __builtin_fmaf(a, b, c); }
TLRT_GEMM_INLINE double fused(double a, double b, double c) { return __builtin_fma(a, b, c); }

// Slice depth and panel widths. NC * KC elements of packed B are about 4 MiB.
constexpr u64 kKC = 512;
constexpr u64 kMC = 128;
template <class T>
constexpr u64 nc_of() {
  return (u64{4} << 20) / (kKC * sizeof(T));
}

// Scratch for the packed panels, from the CPU memory pool (reused across calls, no page faults
// per call); returned on every path.
struct Scratch {
  void *p = nullptr;
  u64 bytes = 0;
  explicit Scratch(u64 b) : p(b != 0 ? alloc(0, b) : nullptr), bytes(b) {}
  ~Scratch() {
    if (p != nullptr) dealloc(0, p, bytes);
  }
  Scratch(const Scratch &) = delete;
  Scratch &operator=(const Scratch &) = delete;
};

// C tile (mr x nr valid of MR x NR) = / += packed A micro-panel (kc x MR) * packed B (kc x NR).
template <class T, int MR, int NR, bool FMA>
TLRT_GEMM_INLINE void micro(u64 kc, const T *__restrict ap, const T *__restrict bp,
                            T *__restrict c, u64 ldc, int mr, int nr, bool first) {
  T acc[MR][NR];
  for (int i = 0; i < MR; ++i)
    for (int j = 0; j < NR; ++j) acc[i][j] = T(-0.0);
  for (u64 k = 0; k < kc; ++k) {
    const T *__restrict b = bp + k * NR;
    const T *__restrict a = ap + k * MR;
#pragma GCC unroll 16
    for (int i = 0; i < MR; ++i) {
      const T ai = a[i];
#pragma GCC unroll 64
      for (int j = 0; j < NR; ++j)
        acc[i][j] = FMA ? fused(ai, b[j], acc[i][j]) : acc[i][j] + ai * b[j];
    }
  }
  if (mr == MR && nr == NR) {
    if (first) {
      for (int i = 0; i < MR; ++i)
        for (int j = 0; j < NR; ++j) c[i * ldc + j] = acc[i][j];
    } else {
      for (int i = 0; i < MR; ++i)
        for (int j = 0; j < NR; ++j) c[i * ldc + j] += acc[i][j];
    }
  } else {
    for (int i = 0; i < mr; ++i)
      for (int j = 0; j < nr; ++j) c[i * ldc + j] = first ? acc[i][j] : c[i * ldc + j] + acc[i][j];
  }
}

// Rows [i0, i0 + mc) x columns [k0, k0 + kc) of A into MR-high micro-panels: panel q holds
// ap[q * MR * kc + k * MR + r] = A(i0 + q * MR + r, k0 + k), zero past row i0 + mc.
template <class T, int MR>
TLRT_GEMM_INLINE void pack_a(View<T> A, u64 i0, u64 mc, u64 k0, u64 kc, T *__restrict ap) {
  for (u64 ip = 0; ip < mc; ip += MR) {
    const u64 rows = std::min<u64>(MR, mc - ip);
    T *__restrict dst = ap + ip * kc;
    const T *src = A.p + (i0 + ip) * A.rs + k0 * A.cs;
    if (rows == (u64)MR && A.rs == 1) {  // transposed A: the MR values of one k are adjacent
      for (u64 k = 0; k < kc; ++k)
        for (int r = 0; r < MR; ++r) dst[k * MR + r] = src[k * A.cs + r];
    } else {
      for (u64 r = 0; r < (u64)MR; ++r) {  // row by row: contiguous reads when A.cs == 1
        if (r < rows) {
          const T *row = src + r * A.rs;
          for (u64 k = 0; k < kc; ++k) dst[k * MR + r] = row[k * A.cs];
        } else {
          for (u64 k = 0; k < kc; ++k) dst[k * MR + r] = T(0);
        }
      }
    }
  }
}

// Rows [k0, k0 + kc) x columns [j0, j0 + nc) of B into NR-wide micro-panels: panel q holds
// bp[q * NR * kc + k * NR + c] = B(k0 + k, j0 + q * NR + c), zero past column j0 + nc.
template <class T, int NR>
TLRT_GEMM_INLINE void pack_b(View<T> B, u64 k0, u64 kc, u64 j0, u64 nc, T *__restrict bp) {
  for (u64 jp = 0; jp < nc; jp += NR) {
    const u64 cols = std::min<u64>(NR, nc - jp);
    T *__restrict dst = bp + jp * kc;
    const T *src = B.p + k0 * B.rs + (j0 + jp) * B.cs;
    if (cols == (u64)NR && B.cs == 1) {  // plain B: NR adjacent values per k
      for (u64 k = 0; k < kc; ++k)
        for (int c = 0; c < NR; ++c) dst[k * NR + c] = src[k * B.rs + c];
    } else {
      for (u64 c = 0; c < (u64)NR; ++c) {  // column by column: contiguous reads when B.rs == 1
        if (c < cols) {
          const T *col = src + c * B.cs;
          for (u64 k = 0; k < kc; ++k) dst[k * NR + c] = col[k * B.rs];
        } else {
          for (u64 k = 0; k < kc; ++k) dst[k * NR + c] = T(0);
        }
      }
    }
  }
}

constexpr u64 round_up(u64 x, u64 r) { return (x + r - 1) / r * r; }

// ---- unpacked paths: few rows, or small products ------------------------------------------------

// C rows [i0, i0 + mr) x columns [j0, j0 + JW) over the whole sum, B read in place: B(k, j) =
// b[k * B.rs + j] (B.cs == 1). Four rows of A at a time (rows past mr repeat the last row; their
// results are dropped). C(i, j) at c[i * crs + j * ccs].
template <class T, int JW, bool FMA>
TLRT_GEMM_INLINE void rows_chunk(View<T> A, const T *__restrict b, u64 brs, u64 n, u64 i0,
                                 int mr, u64 j0, T *__restrict c, u64 crs, u64 ccs) {
  T acc[4][JW];
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < JW; ++j) acc[i][j] = T(-0.0);
  const T *arow[4];
  for (int i = 0; i < 4; ++i) arow[i] = A.p + (i0 + (u64)std::min(i, mr - 1)) * A.rs;
  for (u64 k = 0; k < n; ++k) {
    const T *__restrict bk = b + k * brs + j0;
#pragma GCC unroll 4
    for (int i = 0; i < 4; ++i) {
      const T ai = arow[i][k * A.cs];
#pragma GCC unroll 64
      for (int j = 0; j < JW; ++j)
        acc[i][j] = FMA ? fused(ai, bk[j], acc[i][j]) : acc[i][j] + ai * bk[j];
    }
  }
  for (int i = 0; i < mr; ++i)
    for (int j = 0; j < JW; ++j) c[(i0 + i) * crs + (j0 + j) * ccs] = acc[i][j];
}

// The same for JB = 4 KiB of columns with the accumulators in an L1-resident array instead of
// registers: each k reads 4 KiB of one row of B, so a B too large for the caches streams in long
// contiguous runs (register-wide chunks would stride across all of B's rows once per chunk).
template <class T, int R, bool FMA>
TLRT_GEMM_INLINE void rows_block(View<T> A, const T *__restrict b, u64 brs, u64 n, u64 i0, u64 j0,
                                 T *__restrict c, u64 crs, u64 ccs) {
  constexpr int JB = 4096 / sizeof(T);
  alignas(64) T acc[R][JB];
  for (int i = 0; i < R; ++i)
    for (int j = 0; j < JB; ++j) acc[i][j] = T(-0.0);
  for (u64 k = 0; k < n; ++k) {
    const T *__restrict bk = b + k * brs + j0;
    T ai[R];
    for (int i = 0; i < R; ++i) ai[i] = A.p[(i0 + i) * A.rs + k * A.cs];
    for (int j = 0; j < JB; ++j) {
      const T bj = bk[j];  // one load of B for the R rows
#pragma GCC unroll 4
      for (int i = 0; i < R; ++i)
        acc[i][j] = FMA ? fused(ai[i], bj, acc[i][j]) : acc[i][j] + ai[i] * bj;
    }
  }
  for (int i = 0; i < R; ++i)
    for (int j = 0; j < JB; ++j) c[(i0 + i) * crs + (j0 + j) * ccs] = acc[i][j];
}

template <class T, bool FMA>
TLRT_GEMM_INLINE void rows_block_any(View<T> A, const T *b, u64 brs, u64 n, u64 i0, int mr,
                                     u64 j0, T *c, u64 crs, u64 ccs) {
  switch (mr) {
    case 1: return rows_block<T, 1, FMA>(A, b, brs, n, i0, j0, c, crs, ccs);
    case 2: return rows_block<T, 2, FMA>(A, b, brs, n, i0, j0, c, crs, ccs);
    case 3: return rows_block<T, 3, FMA>(A, b, brs, n, i0, j0, c, crs, ccs);
    default: return rows_block<T, 4, FMA>(A, b, brs, n, i0, j0, c, crs, ccs);
  }
}

// C = A B with B's rows contiguous (B.cs == 1), no packing: W is the vector width in elements.
// wide: use rows_block for whole 4 KiB runs of columns (few rows, B large).
template <class T, int W, bool FMA>
TLRT_GEMM_INLINE void rows_path(View<T> A, View<T> B, u64 m, u64 n, u64 p, T *c, u64 crs,
                                u64 ccs, bool wide) {
  constexpr u64 JB = 4096 / sizeof(T);
  for (u64 i0 = 0; i0 < m; i0 += 4) {
    const int mr = (int)std::min<u64>(4, m - i0);
    u64 j0 = 0;
    if (wide)
      for (; j0 + JB <= p; j0 += JB)
        rows_block_any<T, FMA>(A, B.p, B.rs, n, i0, mr, j0, c, crs, ccs);
    for (; j0 + 4 * W <= p; j0 += 4 * W)
      rows_chunk<T, 4 * W, FMA>(A, B.p, B.rs, n, i0, mr, j0, c, crs, ccs);
    for (; j0 + W <= p; j0 += W) rows_chunk<T, W, FMA>(A, B.p, B.rs, n, i0, mr, j0, c, crs, ccs);
    if (W >= 4)
      for (; j0 + W / 2 <= p; j0 += W / 2)
        rows_chunk<T, (W >= 4 ? W / 2 : 1), FMA>(A, B.p, B.rs, n, i0, mr, j0, c, crs, ccs);
    if (W >= 8)
      for (; j0 + W / 4 <= p; j0 += W / 4)
        rows_chunk<T, (W >= 8 ? W / 4 : 1), FMA>(A, B.p, B.rs, n, i0, mr, j0, c, crs, ccs);
    for (; j0 < p; ++j0) rows_chunk<T, 1, FMA>(A, B.p, B.rs, n, i0, mr, j0, c, crs, ccs);
  }
}

// C = A B with B's columns contiguous (B.rs == 1) and A's rows contiguous (A.cs == 1, else
// rows are copied to `arows`, 4 * n elements): dot products, L = 2 W lanes per row, the lanes
// added by pairwise halving, then the tail of the sum (n % L terms) in order.
template <class T, int W, bool FMA>
TLRT_GEMM_INLINE void dots_path(View<T> A, View<T> B, u64 m, u64 n, u64 p, T *c, u64 crs,
                                u64 ccs, T *__restrict arows) {
  constexpr int L = 2 * W;
  const u64 nl = n / L * L;
  for (u64 i0 = 0; i0 < m; i0 += 4) {
    const int mr = (int)std::min<u64>(4, m - i0);
    const T *row[4];
    for (int i = 0; i < 4; ++i) {
      const u64 src = i0 + (u64)std::min(i, mr - 1);
      if (A.cs == 1) {
        row[i] = A.p + src * A.rs;
      } else {
        T *dst = arows + (u64)i * n;
        for (u64 k = 0; k < n; ++k) dst[k] = A.p[src * A.rs + k * A.cs];
        row[i] = dst;
      }
    }
    for (u64 j = 0; j < p; ++j) {
      const T *__restrict col = B.p + j * B.cs;
      T acc[4][L];
      for (int i = 0; i < 4; ++i)
        for (int l = 0; l < L; ++l) acc[i][l] = T(-0.0);
      for (u64 k = 0; k < nl; k += L) {
#pragma GCC unroll 4
        for (int i = 0; i < 4; ++i) {
          const T *__restrict ar = row[i] + k;
#pragma GCC unroll 64
          for (int l = 0; l < L; ++l)
            acc[i][l] = FMA ? fused(ar[l], col[k + l], acc[i][l]) : acc[i][l] + ar[l] * col[k + l];
        }
      }
      for (int i = 0; i < mr; ++i) {
        for (int h = L / 2; h >= 1; h /= 2)
          for (int l = 0; l < h; ++l) acc[i][l] += acc[i][l + h];
        T s = acc[i][0];
        for (u64 k = nl; k < n; ++k)
          s = FMA ? fused(row[i][k], col[k], s) : s + row[i][k] * col[k];
        c[(i0 + i) * crs + j * ccs] = s;
      }
    }
  }
}

// Products this small (or with this few rows, after the swap below) skip packing.
constexpr u64 kSmallFlops = u64{32} * 32 * 32;
constexpr u64 kFewRows = 4;
constexpr u64 kSwapCols = 8;

// The whole batched product; instantiated inside each ISA's function so that everything here is
// compiled for that instruction set. MR x NR: the packed micro-kernel's tile; W: vector width.
//   m <= 4 or a small product: unpacked, C = A B (rows_path if B's rows are contiguous, else
//     dots_path);
//   p <= 8 (and m > 4, not small): unpacked on the transposed problem C^T = B^T A^T (C stored
//     with strides (1, p)), which has p rows;
//   otherwise the packed, blocked path.
template <class T, int MR, int NR, int W, bool FMA>
TLRT_GEMM_INLINE void gemm_batched(const T *a, const T *b, u64 batch, u64 m, u64 n, u64 p,
                                   bool trans_a, bool trans_b, T *c) {
  constexpr u64 NC = nc_of<T>();
  static_assert(NC % NR == 0 && kMC % MR == 0, "panel sizes must be multiples of the tile");
  // m n p in floating point: the exact product could exceed 64 bits (not for operands that fit in
  // memory, but core only guarantees that each operand's and the output's counts fit).
  const bool small = (double)m * (double)n * (double)p <= (double)kSmallFlops;
  const bool swap = !small && m > kFewRows && p <= kSwapCols;
  if (small || m <= kFewRows || swap) {
    // The problem as solved: rows mm, columns pp, A' (mm, n), B' (n, pp), C' with strides
    // (crs, ccs). Contiguity from the strides (a dimension of 1 makes both layouts contiguous).
    const u64 mm = swap ? p : m, pp = swap ? m : p;
    const u64 crs = swap ? 1 : p, ccs = swap ? p : 1;
    auto views = [&](u64 q, View<T> *A2, View<T> *B2) {
      const View<T> A{a + q * m * n, trans_a ? 1 : n, trans_a ? m : 1};
      const View<T> B{b + q * n * p, trans_b ? 1 : p, trans_b ? n : 1};
      *A2 = swap ? View<T>{B.p, B.cs, B.rs} : A;
      *B2 = swap ? View<T>{A.p, A.cs, A.rs} : B;
    };
    View<T> A2, B2;
    views(0, &A2, &B2);
    const bool rows = B2.cs == 1;
    // dots_path copies rows of A' that are not contiguous: 4 rows of n elements.
    Scratch scratch(!rows && A2.cs != 1 ? 4 * n * sizeof(T) : 0);
    for (u64 q = 0; q < batch; ++q) {
      views(q, &A2, &B2);
      T *cq = c + q * m * p;
      if (rows)
        rows_path<T, W, FMA>(A2, B2, mm, n, pp, cq, crs, ccs, !small && mm <= kFewRows);
      else
        dots_path<T, W, FMA>(A2, B2, mm, n, pp, cq, crs, ccs, static_cast<T *>(scratch.p));
    }
    return;
  }
  const u64 kc_max = std::min(kKC, n);
  const u64 mc_max = round_up(std::min(kMC, m), MR);
  const u64 nc_max = round_up(std::min(NC, p), NR);
  const u64 a_elems = mc_max * kc_max, b_elems = nc_max * kc_max;
  // Both panels in one block; the B panel starts on a 64-byte boundary.
  const u64 a_bytes = round_up(a_elems * sizeof(T), 64);
  Scratch scratch(a_bytes + b_elems * sizeof(T));
  T *ap = static_cast<T *>(scratch.p);
  T *bp = reinterpret_cast<T *>(static_cast<char *>(scratch.p) + a_bytes);
  for (u64 q = 0; q < batch; ++q) {
    const View<T> A{a + q * m * n, trans_a ? 1 : n, trans_a ? m : 1};
    const View<T> B{b + q * n * p, trans_b ? 1 : p, trans_b ? n : 1};
    T *cq = c + q * m * p;
    for (u64 jc = 0; jc < p; jc += NC) {
      const u64 nc = std::min(NC, p - jc);
      for (u64 pc = 0; pc < n; pc += kKC) {
        const u64 kc = std::min(kKC, n - pc);
        pack_b<T, NR>(B, pc, kc, jc, nc, bp);
        for (u64 ic = 0; ic < m; ic += kMC) {
          const u64 mc = std::min(kMC, m - ic);
          pack_a<T, MR>(A, ic, mc, pc, kc, ap);
          for (u64 jr = 0; jr < nc; jr += NR)
            for (u64 ir = 0; ir < mc; ir += MR)
              micro<T, MR, NR, FMA>(kc, ap + ir * kc, bp + jr * kc, cq + (ic + ir) * p + jc + jr,
                                    p, (int)std::min<u64>(MR, mc - ir),
                                    (int)std::min<u64>(NR, nc - jr), pc == 0);
        }
      }
    }
  }
}

#define TLRT_GEMM_ARGS(T)                                                                  \
  const T *a, const T *b, u64 batch, u64 m, u64 n, u64 p, bool trans_a, bool trans_b, T *c
#define TLRT_GEMM_PASS a, b, batch, m, n, p, trans_a, trans_b, c

#ifdef __FP_FAST_FMAF
constexpr bool kFastFmaf = true;
#else
constexpr bool kFastFmaf = false;
#endif
#ifdef __FP_FAST_FMA
constexpr bool kFastFma = true;
#else
constexpr bool kFastFma = false;
#endif

void sgemm_generic(TLRT_GEMM_ARGS(float)) {
  gemm_batched<float, 4, 8, 4, kFastFmaf>(TLRT_GEMM_PASS);
}
void dgemm_generic(TLRT_GEMM_ARGS(double)) {
  gemm_batched<double, 4, 4, 2, kFastFma>(TLRT_GEMM_PASS);
}

#if defined(__x86_64__) && defined(__GNUC__)
#define TLRT_GEMM_X86 1
// The AVX2 + FMA and AVX-512 feature sets of x86-64-v3 and -v4 that the kernels use (named as
// features rather than "arch=x86-64-v3" so that detect_isa can test each with
// __builtin_cpu_supports on both GCC and clang).
#define TLRT_GEMM_V3 __attribute__((target("avx2,fma")))
#define TLRT_GEMM_V4 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx2,fma")))
TLRT_GEMM_V3 void sgemm_v3(TLRT_GEMM_ARGS(float)) {
  gemm_batched<float, 4, 16, 8, true>(TLRT_GEMM_PASS);
}
TLRT_GEMM_V3 void dgemm_v3(TLRT_GEMM_ARGS(double)) {
  gemm_batched<double, 4, 8, 4, true>(TLRT_GEMM_PASS);
}
TLRT_GEMM_V4 void sgemm_v4(TLRT_GEMM_ARGS(float)) {
  gemm_batched<float, 4, 32, 16, true>(TLRT_GEMM_PASS);
}
TLRT_GEMM_V4 void dgemm_v4(TLRT_GEMM_ARGS(double)) {
  gemm_batched<double, 4, 16, 8, true>(TLRT_GEMM_PASS);
}
#else
#define TLRT_GEMM_X86 0
#endif

using Isa = CpuIsa;

// The best instruction set this processor runs the kernels of (checked once).
Isa detect_isa() {
  Isa best = Isa::Generic;
#if TLRT_GEMM_X86
  __builtin_cpu_init();
  // Exactly the features the kernels are compiled for (TLRT_GEMM_V3 / TLRT_GEMM_V4).
  const bool v3 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  const bool v4 = v3 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                  __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
  best = v4 ? Isa::V4 : v3 ? Isa::V3 : Isa::Generic;
#endif
  return best;
}

// The kernels to run: the processor's best, at most `cap`.
Isa isa(CpuIsa cap) {
  static const Isa best = detect_isa();
  return std::min(cap, best);
}

}  // namespace

void bmm(int, const float *a, const float *b, uint64_t batch, uint64_t m, uint64_t n, uint64_t p,
         bool trans_a, bool trans_b, const MatmulPolicy &policy, float *c) {
  switch (isa(policy.cpu_isa_cap)) {
#if TLRT_GEMM_X86
    case Isa::V4: return sgemm_v4(TLRT_GEMM_PASS);
    case Isa::V3: return sgemm_v3(TLRT_GEMM_PASS);
#endif
    default: return sgemm_generic(TLRT_GEMM_PASS);
  }
}

void linear(int dev, const float *x, const float *w, const float *b, uint64_t rows, uint64_t in,
            uint64_t out, const MatmulPolicy &policy, float *pre) {
  if (in != 0) bmm(dev, x, w, 1, rows, in, out, false, true, policy, pre);
  for (uint64_t i = 0; i < rows; ++i) {
    float *r = pre + i * out;
    if (in == 0)
      for (uint64_t j = 0; j < out; ++j) r[j] = b ? b[j] : 0.0f;
    else if (b)
      for (uint64_t j = 0; j < out; ++j) r[j] += b[j];
  }
}

void linear_wgrad(int dev, const float *dp, const float *x, uint64_t rows, uint64_t in,
                  uint64_t out, const MatmulPolicy &policy, float *dw, float *db) {
  if (dw) bmm(dev, dp, x, 1, out, rows, in, true, false, policy, dw);
  if (db) reduce_axis(dev, red::Op::Sum, dp, 1, rows, out, 1.0f, db);
}

void dgemm_host(const double *a, const double *b, uint64_t m, uint64_t n, uint64_t p,
                CpuIsa cpu_isa_cap, double *c) {
  const u64 batch = 1;
  const bool trans_a = false, trans_b = false;
  switch (isa(cpu_isa_cap)) {
#if TLRT_GEMM_X86
    case Isa::V4: return dgemm_v4(TLRT_GEMM_PASS);
    case Isa::V3: return dgemm_v3(TLRT_GEMM_PASS);
#endif
    default: return dgemm_generic(TLRT_GEMM_PASS);
  }
}

}  // namespace stub
}  // namespace tlrt
