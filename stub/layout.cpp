// CPU backend, layout: the strided gather and the tiled transposition of core/backend/layout.hpp.
//
// strided_copy walks the output plane by plane (a plane = the two innermost axes of the plan): an
// odometer over the outer axes keeps the input offset of the plane (no division), and each row of
// it is a memcpy or a copy loop (innermost stride 1), a fill with one input element (stride 0) or
// a strided loop.
// tiled_transpose visits 64 x 64 blocks (32 x 32 for elements of 2 or 4 floats: lay::Transpose::w),
// each staged through two L1 buffers (transpose_block), so
// that both x and y are read and written in whole 256-byte row segments: large transposes run at
// 1/2 - 1/3 of the copy rate instead of missing once per element. core also sends thin
// transposes here on the CPU (any extents), where a row-by-row gather would re-read x once per
// output row.
// Values are copied as float loads and stores (SSE/AVX moves on x86-64, which never alter a bit
// pattern: signalling NaNs and their payloads pass unchanged; the unit test checks it). Built
// like stub/elementwise.cpp (-O3, ISA clones).
#include <cstring>

#include "core/backend/layout.hpp"
#include "stub/cpu_clones.hpp"

namespace tlrt {
namespace stub {

namespace {

constexpr uint64_t kBlock = 64;  // transpose block edge: 2 x 16 KiB buffers, in L1

// d2 output rows of len elements each (the plan's two innermost axes): row a, element i reads
// x[base + a * s2 + i * s]. Long contiguous rows are memcpys; short ones (a swap of small row
// blocks) are plain loops, so that no call or odometer step is paid per few elements.
TLRT_CPU_CLONES void copy_rows(const float *__restrict x, uint64_t base, uint64_t s2, uint64_t d2,
                               uint64_t s, uint64_t len, float *__restrict y) {
  if (s == 1 && len >= 64) {
    for (uint64_t a = 0; a < d2; ++a)
      std::memcpy(y + a * len, x + base + a * s2, len * sizeof(float));
  } else if (s == 1) {
    for (uint64_t a = 0; a < d2; ++a) {
      const float *__restrict p = x + base + a * s2;
      float *__restrict q = y + a * len;
      for (uint64_t i = 0; i < len; ++i) q[i] = p[i];
    }
  } else if (s == 0) {
    for (uint64_t a = 0; a < d2; ++a) {
      const float v = x[base + a * s2];
      float *__restrict q = y + a * len;
      for (uint64_t i = 0; i < len; ++i) q[i] = v;
    }
  } else {
    for (uint64_t a = 0; a < d2; ++a) {
      const float *__restrict p = x + base + a * s2;
      float *__restrict q = y + a * len;
      for (uint64_t i = 0; i < len; ++i) q[i] = p[i * s];
    }
  }
}

// The three staged loops of a block (x rows into t, t transposed into u, u rows out to y), for
// elements E and blocks of B x B; inlined, so that constant bp, bq give constant-bound loops.
template <class E, uint64_t B>
__attribute__((always_inline)) inline void staged_block(const E *__restrict x, uint64_t x_q,
                                                        uint64_t bp, uint64_t bq,
                                                        E *__restrict y, uint64_t y_p,
                                                        E (&t)[B][B], E (&u)[B][B]) {
  for (uint64_t j = 0; j < bq; ++j)
    for (uint64_t i = 0; i < bp; ++i) t[j][i] = x[j * x_q + i];
  for (uint64_t i = 0; i < bp; ++i)
    for (uint64_t j = 0; j < bq; ++j) u[i][j] = t[j][i];
  for (uint64_t i = 0; i < bp; ++i)
    for (uint64_t j = 0; j < bq; ++j) y[i * y_p + j] = u[i][j];
}

// One block of the transposition: y[i * y_p + j] = x[j * x_q + i] for i < bp, j < bq (the
// pointers are already at the block's corner; bp, bq <= kBlock). The block goes through two
// 16 KiB buffers in L1: x's row segments (256 bytes, whole cache lines) are copied in with vector
// loads, the block is transposed between the buffers, and y's row segments are copied out with
// vector stores. Neither x nor y is walked element by element with a large stride: scalar stores
// down y's columns wait on DRAM for each store's read-for-ownership until the store buffer fills
// (about 4x slower; docs/kernels/layout.md has the figures, and those of 32 x 32 blocks).
TLRT_CPU_CLONES void transpose_block(const float *__restrict x, uint64_t x_q, uint64_t bp,
                                     uint64_t bq, float *__restrict y, uint64_t y_p) {
  alignas(64) float t[kBlock][kBlock];  // t[j][i] = x[j * x_q + i]
  alignas(64) float u[kBlock][kBlock];  // u[i][j] = t[j][i]
  if (bp == kBlock && bq == kBlock)
    staged_block(x, x_q, kBlock, kBlock, y, y_p, t, u);  // vectorised full blocks
  else
    staged_block(x, x_q, bp, bq, y, y_p, t, u);
}

}  // namespace

void strided_copy(int, const float *x, const lay::Gather &plan, float *y) {
  // The two innermost axes (a rank-1 plan is one row) form a plane; an odometer over the outer
  // axes keeps the plane's input offset.
  const uint32_t r = plan.rank;
  const uint64_t len = plan.dims[r - 1], s = plan.stride[r - 1];
  const uint64_t d2 = r >= 2 ? plan.dims[r - 2] : 1, s2 = r >= 2 ? plan.stride[r - 2] : 0;
  const uint32_t outer = r >= 2 ? r - 2 : 0;
  const uint64_t plane = d2 * len, planes = plan.n / plane;
  uint64_t idx[lay::kMaxRank] = {};
  uint64_t base = 0;
  for (uint64_t k0 = 0; k0 < planes; ++k0) {
    copy_rows(x, base, s2, d2, s, len, y + k0 * plane);
    for (uint32_t k = outer; k-- > 0;) {
      base += plan.stride[k];
      if (++idx[k] < plan.dims[k]) break;
      base -= plan.stride[k] * plan.dims[k];
      idx[k] = 0;
    }
  }
}

namespace {

// An element of w floats (plan.w = 2 or 4), moved as a whole (float copies: bit for bit).
template <unsigned W>
struct Elem {
  float v[W];
};

// transpose_block for elements of W floats, through the same two staging buffers (32 x 32
// elements of at most 16 bytes: 2 x 16 KiB).
template <unsigned W>
void transpose_block_w(const Elem<W> *__restrict x, uint64_t x_q, uint64_t bp, uint64_t bq,
                       Elem<W> *__restrict y, uint64_t y_p) {
  Elem<W> t[32][32], u[32][32];
  staged_block(x, x_q, bp, bq, y, y_p, t, u);
}

// The blocked walk over the batch and the (p, q) blocks of one transposition; block(xp, yp, bp,
// bq) moves one block whose corners are xp, yp (element pointers of type E).
template <class E, uint64_t B, class F>
void for_blocks(const E *x, const lay::Transpose &plan, E *y, F block) {
  uint64_t idx[lay::kMaxRank] = {};
  uint64_t xb = 0, yb = 0;
  for (uint64_t b = 0; b < plan.batch; ++b) {
    for (uint64_t j0 = 0; j0 < plan.q; j0 += B) {
      const uint64_t bq = plan.q - j0 < B ? plan.q - j0 : B;
      for (uint64_t i0 = 0; i0 < plan.p; i0 += B) {
        const uint64_t bp = plan.p - i0 < B ? plan.p - i0 : B;
        block(x + xb + j0 * plan.x_q + i0, y + yb + i0 * plan.y_p + j0, bp, bq);
      }
    }
    for (uint32_t k = plan.nb; k-- > 0;) {
      xb += plan.bx[k];
      yb += plan.by[k];
      if (++idx[k] < plan.bdim[k]) break;
      xb -= plan.bx[k] * plan.bdim[k];
      yb -= plan.by[k] * plan.bdim[k];
      idx[k] = 0;
    }
  }
}

template <unsigned W>
void transpose_w(const float *x, const lay::Transpose &plan, float *y) {
  using E = Elem<W>;
  for_blocks<E, 32>(reinterpret_cast<const E *>(x), plan, reinterpret_cast<E *>(y),
                    [&](const E *xp, E *yp, uint64_t bp, uint64_t bq) {
                      transpose_block_w<W>(xp, plan.x_q, bp, bq, yp, plan.y_p);
                    });
}

}  // namespace

void tiled_transpose(int, const float *x, const lay::Transpose &plan, float *y) {
  if (plan.w == 2) return transpose_w<2>(x, plan, y);
  if (plan.w == 4) return transpose_w<4>(x, plan, y);
  for_blocks<float, kBlock>(x, plan, y, [&](const float *xp, float *yp, uint64_t bp, uint64_t bq) {
    transpose_block(xp, plan.x_q, bp, bq, yp, plan.y_p);
  });
}

}  // namespace stub
}  // namespace tlrt
