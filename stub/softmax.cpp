// CPU backend, softmax, log-softmax and the hard-masked row softmax, with backward kernels: the
// definitions of abi/tlrt_softmax.h, evaluated literally with the formulas of
// core/numerics/row_ops.hpp.
//
// Rows are processed in blocks of about 16K elements (one row at a time for longer rows), pass by
// pass while the block is in cache: the row maximum (16 independent accumulators, so the loop
// vectorises; the maximum is order-free; the masked softmax first writes its scores, blocked
// entries as -inf, into the output), the exponentials written into the output, the row sums by
// the reduction backend's reduce_axis over the block (THE TREE, the function that
// tlrt_reduce_sum_axis1 runs), then the outputs in place. Every loop is a plain loop over the
// shared per-element functions, built like stub/elementwise.cpp (-O3, -fno-trapping-math, clones
// for x86-64-v3/v4, -ffp-contract=off): every clone performs the same IEEE operations in the same
// order. The blocks of rows of the softmax family are the CPU thread pool's pieces
// (core/backend/parallel.hpp): each is computed as on one thread.
#include "core/backend/softmax.hpp"

#include <algorithm>
#include <vector>

#include "core/backend/index.hpp"
#include "core/backend/parallel.hpp"
#include "core/backend/reduce.hpp"
#include "stub/cpu_clones.hpp"

namespace tlrt {
namespace stub {

namespace {

constexpr uint64_t kBlockElems = 16384;

uint64_t block_rows(uint64_t cols) { return cols >= kBlockElems ? 1 : kBlockElems / cols; }

// max_j x[j] (NaN if any is NaN), in any order: 16 accumulators.
TLRT_CPU_CLONES float row_max(const float *__restrict x, uint64_t n) {
  float acc[16];
  for (float &a : acc) a = row::neg_inf();
  uint64_t j = 0;
  for (; j + 16 <= n; j += 16)
    for (unsigned k = 0; k < 16; ++k) acc[k] = ew::max_f(acc[k], x[j + k]);
  for (unsigned k = 0; j < n; ++j, ++k) acc[k] = ew::max_f(acc[k], x[j]);
  float m = acc[0];
  for (unsigned k = 1; k < 16; ++k) m = ew::max_f(m, acc[k]);
  return m;
}

// The masked scores (blocked entries as -inf), whose row_max is the maximum over the allowed
// entries. A separate loop: fused into row_max's accumulators the select is not if-converted.
TLRT_CPU_CLONES void score_row(const float *__restrict x, const float *__restrict mask, uint64_t n,
                               float *__restrict out) {
  for (uint64_t j = 0; j < n; ++j) out[j] = row::masked_score(x[j], mask[j]);
}

TLRT_CPU_CLONES void exp_row(const float *__restrict x, float m, uint64_t n, float *__restrict e) {
  for (uint64_t j = 0; j < n; ++j) e[j] = row::shifted_exp(x[j], m);
}

TLRT_CPU_CLONES void exp_row_masked(const float *__restrict x, const float *__restrict mask,
                                    float m, uint64_t n, float *__restrict e) {
  for (uint64_t j = 0; j < n; ++j) e[j] = row::masked_exp(x[j], mask[j], m);
}

TLRT_CPU_CLONES void softmax_row(float *__restrict y, float s, uint64_t n) {
  for (uint64_t j = 0; j < n; ++j) y[j] = row::softmax_out(y[j], s);
}

TLRT_CPU_CLONES void log_softmax_row(const float *__restrict x, float m, float log_s, uint64_t n,
                                     float *__restrict y) {
  for (uint64_t j = 0; j < n; ++j) y[j] = row::log_softmax_out(x[j], m, log_s);
}

TLRT_CPU_CLONES void masked_row(const float *__restrict mask, float s, uint64_t n,
                                float *__restrict y) {
  for (uint64_t j = 0; j < n; ++j) y[j] = row::masked_out(y[j], mask[j], s);
}

TLRT_CPU_CLONES void bwd_terms_row(const float *__restrict y, const float *__restrict g, uint64_t n,
                                   float *__restrict t) {
  for (uint64_t j = 0; j < n; ++j) t[j] = row::softmax_bwd_term(y[j], g[j]);
}

TLRT_CPU_CLONES void softmax_bwd_row(const float *__restrict y, const float *__restrict g,
                                     float dot, uint64_t n, float *__restrict dx) {
  for (uint64_t j = 0; j < n; ++j) dx[j] = row::softmax_bwd_out(y[j], g[j], dot);
}

TLRT_CPU_CLONES void log_softmax_bwd_row(const float *__restrict y, const float *__restrict g,
                                         float sg, uint64_t n, float *__restrict dx) {
  for (uint64_t j = 0; j < n; ++j) dx[j] = row::log_softmax_bwd_out(y[j], g[j], sg);
}

// s[i] = THE TREE sum of row i of the (nr, cols) block v.
void row_sums(const float *v, uint64_t nr, uint64_t cols, float *s) {
  reduce_axis(0, red::Op::Sum, v, nr, cols, 1, 1.0f, s);
}

}  // namespace

void softmax_fwd(int, row::Kind kind, const float *x, const float *mask, uint64_t rows,
                 uint64_t cols, float *y) {
  const uint64_t br = block_rows(cols);
  // Blocks of br rows (br from cols alone) are the thread pool's pieces.
  cpu_pool::for_pieces(rows, br, [&](uint64_t r0, uint64_t r1) {
    std::vector<float> m(br), s(br);
    const uint64_t nr = r1 - r0;
    const float *xb = x + r0 * cols;
    const float *mb = mask ? mask + r0 * cols : nullptr;
    float *yb = y + r0 * cols;
    for (uint64_t i = 0; i < nr; ++i) {
      const uint64_t o = i * cols;
      if (kind == row::Kind::Masked) {
        score_row(xb + o, mb + o, cols, yb + o);  // y as scratch
        m[i] = row_max(yb + o, cols);
        exp_row_masked(xb + o, mb + o, m[i], cols, yb + o);
      } else {
        m[i] = row_max(xb + o, cols);
        exp_row(xb + o, m[i], cols, yb + o);
      }
    }
    row_sums(yb, nr, cols, s.data());
    for (uint64_t i = 0; i < nr; ++i) {
      const uint64_t o = i * cols;
      switch (kind) {
        case row::Kind::Softmax: softmax_row(yb + o, s[i], cols); break;
        case row::Kind::LogSoftmax:
          log_softmax_row(xb + o, m[i], math::log_f(s[i]), cols, yb + o);
          break;
        case row::Kind::Masked:
          if (m[i] == row::neg_inf())  // nothing allowed, or only -inf scores: all +0
            std::fill(yb + o, yb + o + cols, 0.0f);
          else
            masked_row(mb + o, s[i], cols, yb + o);
          break;
      }
    }
  });
}

void softmax_bwd(int, bool log, const float *y, const float *g, uint64_t rows, uint64_t cols,
                 float *dx) {
  const uint64_t br = block_rows(cols);
  cpu_pool::for_pieces(rows, br, [&](uint64_t r0, uint64_t r1) {
    std::vector<float> s(br);
    const uint64_t nr = r1 - r0;
    const float *yb = y + r0 * cols;
    const float *gb = g + r0 * cols;
    float *db = dx + r0 * cols;
    if (log) {
      row_sums(gb, nr, cols, s.data());
      for (uint64_t i = 0; i < nr; ++i)
        log_softmax_bwd_row(yb + i * cols, gb + i * cols, s[i], cols, db + i * cols);
    } else {
      for (uint64_t i = 0; i < nr; ++i)
        bwd_terms_row(yb + i * cols, gb + i * cols, cols, db + i * cols);
      row_sums(db, nr, cols, s.data());
      for (uint64_t i = 0; i < nr; ++i)
        softmax_bwd_row(yb + i * cols, gb + i * cols, s[i], cols, db + i * cols);
    }
  });
}

// ---- cross-entropy --------------------------------------------------------------------------
// Per block of rows: the row maxima, the exponentials into a scratch block, THE TREE row sums
// (reduce_axis), then per row log(s), the stats and the picked log-softmax value; the picked
// values are summed by the tree once all rows are done (reduce_axis over one row of rows values).
// Backward: one loop per row over the shared formula.

namespace {

template <class T>
void ce_fwd_t(const float *x, const T *lab, uint64_t rows, uint64_t cols, int64_t ignore,
              float *loss, float *stats) {
  std::vector<float> picked(rows);
  uint64_t n = 0, nf = 0;
  if (cols == 0) {
    for (uint64_t r = 0; r < rows; ++r) {
      stats[2 * r] = row::neg_inf();
      stats[2 * r + 1] = row::neg_inf();
    }
  } else {
    const uint64_t br = block_rows(cols);
    std::vector<float> m(br), s(br), e(br * cols);
    for (uint64_t r0 = 0; r0 < rows; r0 += br) {
      const uint64_t nr = std::min(br, rows - r0);
      const float *xb = x + r0 * cols;
      for (uint64_t i = 0; i < nr; ++i) {
        m[i] = row_max(xb + i * cols, cols);
        exp_row(xb + i * cols, m[i], cols, e.data() + i * cols);
      }
      row_sums(e.data(), nr, cols, s.data());
      for (uint64_t i = 0; i < nr; ++i) {
        const uint64_t r = r0 + i;
        const float ls = math::log_f(s[i]);
        stats[2 * r] = m[i];
        stats[2 * r + 1] = ls;
        picked[r] = row::ce_label(lab[r], cols, ignore) == row::Label::Valid
                        ? row::log_softmax_out(xb[i * cols + (uint64_t)lab[r]], m[i], ls)
                        : 0.0f;
      }
    }
  }
  for (uint64_t r = 0; r < rows; ++r) {
    const row::Label k = row::ce_label(lab[r], cols, ignore);
    if (cols == 0) picked[r] = 0.0f;
    n += k != row::Label::Ignored;
    nf += k == row::Label::Fault;
  }
  float sum = 0.0f;
  reduce_axis(0, red::Op::Sum, picked.data(), 1, rows, 1, 1.0f, &sum);
  *loss = row::ce_loss(sum, n);
  add_index_faults(nf);
}

TLRT_CPU_CLONES void ce_bwd_row(const float *__restrict x, float m, float ls, float c, uint64_t l,
                                uint64_t n, float *__restrict dx) {
  for (uint64_t j = 0; j < n; ++j) dx[j] = row::ce_bwd_out(x[j], m, ls, c, j == l);
}

template <class T>
void ce_bwd_t(const float *x, const T *lab, const float *stats, float g, uint64_t rows,
              uint64_t cols, int64_t ignore, float *dx) {
  uint64_t n = 0;
  for (uint64_t r = 0; r < rows; ++r)
    n += row::ce_label(lab[r], cols, ignore) != row::Label::Ignored;
  const float c = row::ce_row_grad(g, n);
  for (uint64_t r = 0; r < rows; ++r) {
    const bool valid = row::ce_label(lab[r], cols, ignore) == row::Label::Valid;
    ce_bwd_row(x + r * cols, stats[2 * r], stats[2 * r + 1], valid ? c : 0.0f,
               valid ? (uint64_t)lab[r] : cols, cols, dx + r * cols);
  }
}

}  // namespace

void cross_entropy_fwd(int, const float *x, const void *labels, bool labels64, uint64_t rows,
                       uint64_t cols, int64_t ignore, float *loss, float *stats) {
  if (labels64)
    ce_fwd_t(x, static_cast<const int64_t *>(labels), rows, cols, ignore, loss, stats);
  else
    ce_fwd_t(x, static_cast<const int32_t *>(labels), rows, cols, ignore, loss, stats);
}

void cross_entropy_bwd(int, const float *x, const void *labels, bool labels64,
                       const float *stats, const float *g, uint64_t rows, uint64_t cols,
                       int64_t ignore, float *dx) {
  if (labels64)
    ce_bwd_t(x, static_cast<const int64_t *>(labels), stats, *g, rows, cols, ignore, dx);
  else
    ce_bwd_t(x, static_cast<const int32_t *>(labels), stats, *g, rows, cols, ignore, dx);
}

}  // namespace stub
}  // namespace tlrt
