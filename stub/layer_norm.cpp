// CPU backend, fused layer normalisation and RMS normalisation, forward and backward: the
// definitions of abi/tlrt_layer_norm.h, evaluated literally with the formulas of
// core/numerics/row_ops.hpp.
//
// Row statistics: rows are processed in blocks of about 16K elements (one row at a time for longer
// rows), pass by pass while the block is in cache; every row sum is the reduction backend's
// reduce_axis over the block (THE TREE, with the division by n that tlrt_reduce_mean uses).
// Column sums of the backward (dgamma, dbeta), per tile of up to 1024 columns and per chunk of 4096
// rows: lane t's accumulator row folds rows 4096 k + t + 256 r (r = 0..15) in order (the tree's
// step 2, vectorised across the columns), then reduce_axis reduces the lane rows of the chunk (the
// halving, step 3) and finally the chunk rows (step 4). Loops are built like stub/elementwise.cpp
// (-O3, -fno-trapping-math, clones for x86-64-v3/v4, -ffp-contract=off): every clone performs the
// same IEEE operations in the same order.
// Threads (core/backend/parallel.hpp): the blocks of rows of the row statistics and of dx, and
// the (column tile, chunk of rows) cells of the column sums, are the thread pool's pieces; each is
// computed as on one thread, so the results do not depend on the thread count.
#include "core/backend/layer_norm.hpp"

#include <algorithm>
#include <vector>

#include "core/backend/parallel.hpp"
#include "core/backend/reduce.hpp"
#include "stub/cpu_clones.hpp"

namespace tlrt {
namespace stub {

namespace {

constexpr uint64_t kBlockElems = 16384;
constexpr uint64_t kTile = 1024;  // columns per tile of the column sums

uint64_t block_rows(uint64_t cols) { return cols >= kBlockElems ? 1 : kBlockElems / cols; }

// s[i] = THE TREE sum of row i of the (nr, cols) block v, divided by n (red::finish).
void row_sums(const float *v, uint64_t nr, uint64_t cols, float n, float *s) {
  reduce_axis(0, red::Op::Sum, v, nr, cols, 1, n, s);
}

TLRT_CPU_CLONES void sq_dev_row(const float *__restrict x, float mean, uint64_t n,
                                float *__restrict q) {
  for (uint64_t j = 0; j < n; ++j) q[j] = row::sq_dev(x[j], mean);
}

TLRT_CPU_CLONES void out_row(const float *__restrict x, const float *__restrict gamma,
                             const float *__restrict beta, float mean, float inv_std, uint64_t n,
                             float *__restrict y) {
  for (uint64_t j = 0; j < n; ++j)
    y[j] = row::ln_out(row::xhat_of(x[j], mean, inv_std), gamma[j], beta[j]);
}

// d[j] = dy[j] * gamma[j] and p[j] = d[j] * xhat[j].
TLRT_CPU_CLONES void bwd_terms_row(const float *__restrict dy, const float *__restrict x,
                                   const float *__restrict gamma, float mean, float inv_std,
                                   uint64_t n, float *__restrict d, float *__restrict p) {
  for (uint64_t j = 0; j < n; ++j) {
    const float dj = row::ln_d(dy[j], gamma[j]);
    d[j] = dj;
    p[j] = dj * row::xhat_of(x[j], mean, inv_std);
  }
}

// dx[j] from d[j] (held in dx) and x[j].
TLRT_CPU_CLONES void dx_row(const float *__restrict x, float mean, float inv_std, float a, float b,
                            uint64_t n, float *__restrict dx) {
  for (uint64_t j = 0; j < n; ++j)
    dx[j] = row::ln_bwd_out(dx[j], row::xhat_of(x[j], mean, inv_std), a, b, inv_std);
}

// One row folded into a lane's accumulators: ag[j] += dy[j] * xhat[j], ab[j] += dy[j].
TLRT_CPU_CLONES void fold_row(const float *__restrict dy, const float *__restrict x, float mean,
                              float inv_std, uint64_t w, float *__restrict ag,
                              float *__restrict ab) {
  for (uint64_t j = 0; j < w; ++j) {
    const float g = dy[j];
    ag[j] = ag[j] + g * row::xhat_of(x[j], mean, inv_std);
    ab[j] = ab[j] + g;
  }
}

}  // namespace

void layer_norm_fwd(int, const float *x, const float *gamma, const float *beta, uint64_t rows,
                    uint64_t cols, float eps, float *y, float *mean, float *inv_std) {
  const float n = static_cast<float>(cols);
  const uint64_t br = block_rows(cols);
  cpu_pool::for_pieces(rows, br, [&](uint64_t r0, uint64_t r1) {
    std::vector<float> var(br);
    const uint64_t nr = r1 - r0;
    const float *xb = x + r0 * cols;
    float *yb = y + r0 * cols;
    row_sums(xb, nr, cols, n, mean + r0);
    for (uint64_t i = 0; i < nr; ++i) sq_dev_row(xb + i * cols, mean[r0 + i], cols, yb + i * cols);
    row_sums(yb, nr, cols, n, var.data());
    for (uint64_t i = 0; i < nr; ++i) {
      const float s = row::inv_std_of(var[i], eps);
      inv_std[r0 + i] = s;
      out_row(xb + i * cols, gamma, beta, mean[r0 + i], s, cols, yb + i * cols);
    }
  });
}

void layer_norm_bwd(int, const float *dy, const float *x, const float *mean, const float *inv_std,
                    const float *gamma, uint64_t rows, uint64_t cols, float *dx, float *dgamma,
                    float *dbeta) {
  const float n = static_cast<float>(cols);
  // dx, block by block of rows.
  {
    const uint64_t br = block_rows(cols);
    cpu_pool::for_pieces(rows, br, [&](uint64_t r0, uint64_t r1) {
      std::vector<float> p(br * cols), a(br), b(br);
      const uint64_t nr = r1 - r0;
      for (uint64_t i = 0; i < nr; ++i) {
        const uint64_t o = (r0 + i) * cols;
        bwd_terms_row(dy + o, x + o, gamma, mean[r0 + i], inv_std[r0 + i], cols, dx + o,
                      p.data() + i * cols);
      }
      row_sums(dx + r0 * cols, nr, cols, n, a.data());
      row_sums(p.data(), nr, cols, n, b.data());
      for (uint64_t i = 0; i < nr; ++i) {
        const uint64_t o = (r0 + i) * cols;
        dx_row(x + o, mean[r0 + i], inv_std[r0 + i], a[i], b[i], cols, dx + o);
      }
    });
  }
  // dgamma, dbeta: the tree down each column.
  const uint64_t nc = red::chunks_of(rows);
  const unsigned L = row::col_lanes(rows);
  const uint64_t wmax = std::min(cols, kTile), tiles = (cols + kTile - 1) / kTile;
  std::vector<float> cg(nc > 1 ? nc * cols : 0), cb(nc > 1 ? nc * cols : 0);
  const float id = red::Ops<red::Op::Sum>::identity();
  // One piece per (column tile, chunk of rows).
  cpu_pool::for_pieces(tiles * nc, 1, [&](uint64_t q0, uint64_t q1) {
    std::vector<float> pg((uint64_t)L * wmax), pb((uint64_t)L * wmax);
    for (uint64_t q = q0; q < q1; ++q) {
      const uint64_t c0 = (q / nc) * kTile, k = q % nc;
      const uint64_t w = std::min(kTile, cols - c0);
      for (unsigned t = 0; t < L; ++t) {
        float *ag = pg.data() + (uint64_t)t * w;
        float *ab = pb.data() + (uint64_t)t * w;
        std::fill(ag, ag + w, id);
        std::fill(ab, ab + w, id);
        for (unsigned r = 0; r < red::kDepth; ++r) {
          const uint64_t i = k * red::kChunk + t + (uint64_t)r * red::kLanes;
          if (i >= rows) break;
          fold_row(dy + i * cols + c0, x + i * cols + c0, mean[i], inv_std[i], w, ag, ab);
        }
      }
      float *og = nc > 1 ? cg.data() + k * cols + c0 : dgamma + c0;
      float *ob = nc > 1 ? cb.data() + k * cols + c0 : dbeta + c0;
      reduce_axis(0, red::Op::Sum, pg.data(), 1, L, w, 1.0f, og);
      reduce_axis(0, red::Op::Sum, pb.data(), 1, L, w, 1.0f, ob);
    }
  });
  if (nc > 1) {
    reduce_axis(0, red::Op::Sum, cg.data(), 1, nc, cols, 1.0f, dgamma);
    reduce_axis(0, red::Op::Sum, cb.data(), 1, nc, cols, 1.0f, dbeta);
  }
}

// ---- RMS norm -------------------------------------------------------------------------------------
// The same organisation: row sums per block of rows by reduce_axis (q = x * x written into y
// first, then overwritten by y), the column sums of dgamma by the same lane folds.

namespace {

TLRT_CPU_CLONES void sq_row(const float *__restrict x, uint64_t n, float *__restrict q) {
  for (uint64_t j = 0; j < n; ++j) q[j] = row::sq(x[j]);
}

TLRT_CPU_CLONES void rms_out_row(const float *__restrict x, const float *__restrict gamma,
                                 float inv_rms, uint64_t n, float *__restrict y) {
  if (gamma != nullptr) {
    for (uint64_t j = 0; j < n; ++j) y[j] = row::rms_out(row::rms_xhat(x[j], inv_rms), gamma[j]);
  } else {
    for (uint64_t j = 0; j < n; ++j) y[j] = row::rms_xhat(x[j], inv_rms);
  }
}

// d[j] = dy[j] * gamma[j] (dy[j] without gamma) and p[j] = d[j] * xhat[j].
TLRT_CPU_CLONES void rms_terms_row(const float *__restrict dy, const float *__restrict x,
                                   const float *__restrict gamma, float inv_rms, uint64_t n,
                                   float *__restrict d, float *__restrict p) {
  if (gamma != nullptr) {
    for (uint64_t j = 0; j < n; ++j) {
      const float dj = row::ln_d(dy[j], gamma[j]);
      d[j] = dj;
      p[j] = dj * row::rms_xhat(x[j], inv_rms);
    }
  } else {
    for (uint64_t j = 0; j < n; ++j) {
      const float dj = dy[j];
      d[j] = dj;
      p[j] = dj * row::rms_xhat(x[j], inv_rms);
    }
  }
}

// dx[j] from d[j] (held in dx) and x[j].
TLRT_CPU_CLONES void rms_dx_row(const float *__restrict x, float inv_rms, float b, uint64_t n,
                                float *__restrict dx) {
  for (uint64_t j = 0; j < n; ++j)
    dx[j] = row::rms_bwd_out(dx[j], row::rms_xhat(x[j], inv_rms), b, inv_rms);
}

// One row folded into a lane's accumulators: ag[j] += dy[j] * xhat[j].
TLRT_CPU_CLONES void rms_fold_row(const float *__restrict dy, const float *__restrict x,
                                  float inv_rms, uint64_t w, float *__restrict ag) {
  for (uint64_t j = 0; j < w; ++j) ag[j] = ag[j] + dy[j] * row::rms_xhat(x[j], inv_rms);
}

}  // namespace

void rms_norm_fwd(int, const float *x, const float *gamma, uint64_t rows, uint64_t cols,
                  float eps, float *y, float *inv_rms) {
  const float n = static_cast<float>(cols);
  const uint64_t br = block_rows(cols);
  cpu_pool::for_pieces(rows, br, [&](uint64_t r0, uint64_t r1) {
    std::vector<float> ms(br);
    const uint64_t nr = r1 - r0;
    const float *xb = x + r0 * cols;
    float *yb = y + r0 * cols;
    for (uint64_t i = 0; i < nr; ++i) sq_row(xb + i * cols, cols, yb + i * cols);
    row_sums(yb, nr, cols, n, ms.data());
    for (uint64_t i = 0; i < nr; ++i) {
      const float s = row::inv_std_of(ms[i], eps);
      inv_rms[r0 + i] = s;
      rms_out_row(xb + i * cols, gamma, s, cols, yb + i * cols);
    }
  });
}

void rms_norm_bwd(int, const float *dy, const float *x, const float *gamma, const float *inv_rms,
                  uint64_t rows, uint64_t cols, float *dx, float *dgamma) {
  const float n = static_cast<float>(cols);
  {
    const uint64_t br = block_rows(cols);
    cpu_pool::for_pieces(rows, br, [&](uint64_t r0, uint64_t r1) {
      std::vector<float> p(br * cols), b(br);
      const uint64_t nr = r1 - r0;
      for (uint64_t i = 0; i < nr; ++i) {
        const uint64_t o = (r0 + i) * cols;
        rms_terms_row(dy + o, x + o, gamma, inv_rms[r0 + i], cols, dx + o, p.data() + i * cols);
      }
      row_sums(p.data(), nr, cols, n, b.data());
      for (uint64_t i = 0; i < nr; ++i) {
        const uint64_t o = (r0 + i) * cols;
        rms_dx_row(x + o, inv_rms[r0 + i], b[i], cols, dx + o);
      }
    });
  }
  if (dgamma == nullptr) return;
  // dgamma: the tree down each column (as layer_norm_bwd's).
  const uint64_t nc = red::chunks_of(rows);
  const unsigned L = row::col_lanes(rows);
  const uint64_t wmax = std::min(cols, kTile), tiles = (cols + kTile - 1) / kTile;
  std::vector<float> cg(nc > 1 ? nc * cols : 0);
  const float id = red::Ops<red::Op::Sum>::identity();
  cpu_pool::for_pieces(tiles * nc, 1, [&](uint64_t q0, uint64_t q1) {
    std::vector<float> pg((uint64_t)L * wmax);
    for (uint64_t q = q0; q < q1; ++q) {
      const uint64_t c0 = (q / nc) * kTile, k = q % nc;
      const uint64_t w = std::min(kTile, cols - c0);
      for (unsigned t = 0; t < L; ++t) {
        float *ag = pg.data() + (uint64_t)t * w;
        std::fill(ag, ag + w, id);
        for (unsigned r = 0; r < red::kDepth; ++r) {
          const uint64_t i = k * red::kChunk + t + (uint64_t)r * red::kLanes;
          if (i >= rows) break;
          rms_fold_row(dy + i * cols + c0, x + i * cols + c0, inv_rms[i], w, ag);
        }
      }
      reduce_axis(0, red::Op::Sum, pg.data(), 1, L, w, 1.0f,
                  nc > 1 ? cg.data() + k * cols + c0 : dgamma + c0);
    }
  });
  if (nc > 1) reduce_axis(0, red::Op::Sum, cg.data(), 1, nc, cols, 1.0f, dgamma);
}

}  // namespace stub
}  // namespace tlrt
