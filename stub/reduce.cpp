// CPU backend, reductions: the tree of core/numerics/reduce_tree.hpp, evaluated literally.
//
// Contiguous sequences (whole sums, row sums, inner == 1): a chunk keeps its 256 lane
// accumulators in an array and adds one 256-float row of the chunk at a time (r = 0..15), a loop
// over t that vectorises 8 or 16 lanes wide; then the halving steps, also vectorised. Chunk values
// go to a host vector that is reduced the same way. Rows of <= 32 elements use red::small (the
// function the CUDA backend runs for them).
// Strided sequences (column sums and inner axes, inner > 1), per tile of columns: see
// chunk_cols_narrow (<= 16 columns: 256 x w accumulators) and chunk_cols_wide (up to 1024
// columns: lane rows folded from contiguous 4 KiB row segments, halving done depth first on a
// stack of 9 rows, 36 KiB), both vectorised across columns.
// The general gather of tlrt_reduce_from_broadcast copies each output's sequence into a host
// vector and reduces that. Built like stub/elementwise.cpp (-O3, -fno-trapping-math, clones for
// x86-64-v3/v4, -ffp-contract=off): every clone performs the same operations in the same order.
#include <algorithm>
#include <numeric>
#include <vector>

#include "core/backend/reduce.hpp"
#include "core/numerics/select_ops.hpp"
#include "stub/cpu_clones.hpp"

namespace tlrt {
namespace stub {

namespace {

using red::kChunk;
using red::kLanes;

constexpr uint64_t kTile = 1024;  // columns per tile of the strided path (4 KiB row segments)

// One full chunk v[0..4096).
template <red::Op OP>
TLRT_CPU_CLONES float chunk_full(const float *__restrict v) {
  alignas(64) float s[kLanes];
  for (unsigned t = 0; t < kLanes; ++t) s[t] = red::Ops<OP>::identity();
  for (unsigned r = 0; r < red::kDepth; ++r) {
    const float *__restrict row = v + r * kLanes;
    for (unsigned t = 0; t < kLanes; ++t) s[t] = red::Ops<OP>::op(s[t], row[t]);
  }
  for (unsigned h = kLanes / 2; h >= 1; h >>= 1)
    for (unsigned t = 0; t < h; ++t) s[t] = red::Ops<OP>::op(s[t], s[t + h]);
  return s[0];
}

// A partial chunk v[0..len), 0 < len < 4096: the same lanes; lanes that would only hold the
// identity (len < 256) and the halving steps that would only combine identities are skipped.
template <red::Op OP>
TLRT_CPU_CLONES float chunk_part(const float *__restrict v, unsigned len) {
  alignas(64) float s[kLanes];
  unsigned P = kLanes;
  if (len >= kLanes) {
    for (unsigned t = 0; t < kLanes; ++t) s[t] = red::Ops<OP>::identity();
    const unsigned rows = len / kLanes, rem = len % kLanes;
    for (unsigned r = 0; r < rows; ++r) {
      const float *__restrict row = v + r * kLanes;
      for (unsigned t = 0; t < kLanes; ++t) s[t] = red::Ops<OP>::op(s[t], row[t]);
    }
    const float *__restrict last = v + rows * kLanes;
    for (unsigned t = 0; t < rem; ++t) s[t] = red::Ops<OP>::op(s[t], last[t]);
  } else {
    P = red::pow2_at_least(len);
    for (unsigned t = 0; t < P; ++t)
      s[t] = t < len ? red::Ops<OP>::op(red::Ops<OP>::identity(), v[t]) : red::Ops<OP>::identity();
  }
  for (unsigned h = P >> 1; h >= 1; h >>= 1)
    for (unsigned t = 0; t < h; ++t) s[t] = red::Ops<OP>::op(s[t], s[t + h]);
  return s[0];
}

template <red::Op OP>
float chunk_any(const float *v, uint64_t len) {
  if (len == kChunk) return chunk_full<OP>(v);
  return chunk_part<OP>(v, (unsigned)len);
}

// Sequences of m <= 32 elements, one per row of a contiguous (rows, m) array: red::small, the
// function the CUDA small_kernel runs, with W fixed at compile time.
template <red::Op OP, unsigned W>
void small_rows(const float *x, uint64_t rows, unsigned m, float div, float *y) {
  for (uint64_t o = 0; o < rows; ++o) {
    const float *p = x + o * m;
    y[o] = red::finish(red::small<OP, W>([p](unsigned j) { return p[j]; }, m), div);
  }
}

template <red::Op OP>
void small_rows_any(const float *x, uint64_t rows, unsigned m, float div, float *y) {
  red::with_small_width(m, [&](auto w) { small_rows<OP, decltype(w)::value>(x, rows, m, div, y); });
}

// The tree over v[0..m), m >= 1.
template <red::Op OP>
float sequence(const float *v, uint64_t m) {
  if (m <= kChunk) return chunk_any<OP>(v, m);
  const uint64_t nc = red::chunks_of(m);
  std::vector<float> part(nc);
  for (uint64_t k = 0; k < nc; ++k) {
    const uint64_t e0 = k * kChunk;
    part[k] = chunk_any<OP>(v + e0, m - e0 < kChunk ? m - e0 : kChunk);
  }
  return sequence<OP>(part.data(), nc);
}

// One chunk of a strided sequence per column: rows x[e * ld + c] for e < len (<= 4096) and
// c < w; y[c] = the chunk's value of column c.
// Narrow tiles (w <= kNarrow): all lanes x w accumulators in one array (acc: kLanes * w floats,
// L1-resident), each input row added to its lane's accumulators in element order.
// Wide tiles (w <= kTile): lane by lane, each lane's w-wide row folded from its (up to) 16 input
// rows, and the halving done depth first: the value of a[t] after step h is
// op(a[t] after step 2h, a[t + h] after step 2h), so visiting the lanes in bit-reversed order and
// combining equal-level neighbours on a stack evaluates the same tree with at most log2(P) + 1
// rows live (acc: (log2(kLanes) + 1) * w floats).
constexpr uint64_t kNarrow = 16;

template <red::Op OP>
TLRT_CPU_CLONES void chunk_cols_narrow(const float *__restrict x, uint64_t len, uint64_t ld,
                                       uint64_t w, float *__restrict acc, float *__restrict y) {
  const unsigned lanes = len < kLanes ? (unsigned)len : kLanes;
  const unsigned P = red::pow2_at_least(lanes);
  for (uint64_t i = 0; i < (uint64_t)P * w; ++i) acc[i] = red::Ops<OP>::identity();
  for (uint64_t e = 0; e < len; ++e) {
    float *__restrict a = acc + (e % kLanes) * w;
    const float *__restrict row = x + e * ld;
    for (uint64_t c = 0; c < w; ++c) a[c] = red::Ops<OP>::op(a[c], row[c]);
  }
  for (unsigned h = P >> 1; h >= 1; h >>= 1)
    for (unsigned t = 0; t < h; ++t) {
      float *__restrict a = acc + (uint64_t)t * w;
      const float *__restrict b = acc + (uint64_t)(t + h) * w;
      for (uint64_t c = 0; c < w; ++c) a[c] = red::Ops<OP>::op(a[c], b[c]);
    }
  for (uint64_t c = 0; c < w; ++c) y[c] = acc[c];
}

template <red::Op OP>
TLRT_CPU_CLONES void fold_row(float *__restrict a, const float *__restrict b, uint64_t w) {
  for (uint64_t c = 0; c < w; ++c) a[c] = red::Ops<OP>::op(a[c], b[c]);
}

// row[c] = the fold of a full lane: identity, then rows b[0], b[s], ..., b[15 s] in order (all 16
// rows streamed together, one store per column).
template <red::Op OP>
TLRT_CPU_CLONES void fold_lane16(float *__restrict row, const float *__restrict b, uint64_t s,
                                 uint64_t w) {
  for (uint64_t c = 0; c < w; ++c) {
    float a = red::Ops<OP>::op(red::Ops<OP>::identity(), b[c]);
#pragma GCC unroll 16
    for (unsigned r = 1; r < red::kDepth; ++r) a = red::Ops<OP>::op(a, b[r * s + c]);
    row[c] = a;
  }
}

// Four rows b[0], b[s], b[2 s], b[3 s] folded into row (which starts at the identity if first).
template <red::Op OP>
TLRT_CPU_CLONES void fold_lane4(float *__restrict row, const float *__restrict b, uint64_t s,
                                uint64_t w, bool first) {
  if (first) {
    for (uint64_t c = 0; c < w; ++c) {
      float a = red::Ops<OP>::op(red::Ops<OP>::identity(), b[c]);
      a = red::Ops<OP>::op(a, b[s + c]);
      a = red::Ops<OP>::op(a, b[2 * s + c]);
      row[c] = red::Ops<OP>::op(a, b[3 * s + c]);
    }
  } else {
    for (uint64_t c = 0; c < w; ++c) {
      float a = red::Ops<OP>::op(row[c], b[c]);
      a = red::Ops<OP>::op(a, b[s + c]);
      a = red::Ops<OP>::op(a, b[2 * s + c]);
      row[c] = red::Ops<OP>::op(a, b[3 * s + c]);
    }
  }
}

template <red::Op OP>
void chunk_cols_wide(const float *x, uint64_t len, uint64_t ld, uint64_t w, float *acc,
                     float *y) {
  const unsigned lanes = len < kLanes ? (unsigned)len : kLanes;
  const unsigned P = red::pow2_at_least(lanes);
  unsigned bits = 0;
  while ((1u << bits) < P) ++bits;
  unsigned level[10];
  unsigned depth = 0;
  for (unsigned i = 0; i < P; ++i) {
    unsigned t = 0;  // i with its `bits` low bits reversed
    for (unsigned b = 0; b < bits; ++b) t |= ((i >> b) & 1u) << (bits - 1 - b);
    float *row = acc + (uint64_t)depth * w;
    const uint64_t nr = t < len ? (len - t + kLanes - 1) / kLanes : 0;  // rows of lane t
    if (nr == red::kDepth) {
      fold_lane16<OP>(row, x + t * ld, kLanes * ld, w);
    } else {
      uint64_t r = 0;
      if (nr >= 4) {
        fold_lane4<OP>(row, x + t * ld, kLanes * ld, w, true);
        r = 4;
        for (; r + 4 <= nr; r += 4) fold_lane4<OP>(row, x + (t + r * kLanes) * ld, kLanes * ld, w, false);
      } else {
        for (uint64_t c = 0; c < w; ++c) row[c] = red::Ops<OP>::identity();
      }
      for (; r < nr; ++r) fold_row<OP>(row, x + (t + r * kLanes) * ld, w);
    }
    level[depth++] = 0;
    while (depth >= 2 && level[depth - 1] == level[depth - 2]) {
      fold_row<OP>(acc + (uint64_t)(depth - 2) * w, acc + (uint64_t)(depth - 1) * w, w);
      ++level[depth - 2];
      --depth;
    }
  }
  for (uint64_t c = 0; c < w; ++c) y[c] = acc[c];
}

template <red::Op OP>
void chunk_cols(const float *x, uint64_t len, uint64_t ld, uint64_t w, float *acc, float *y) {
  if (w <= kNarrow)
    chunk_cols_narrow<OP>(x, len, ld, w, acc, y);
  else
    chunk_cols_wide<OP>(x, len, ld, w, acc, y);
}

// The tree down each of w <= kTile columns: y[c] = tree over e < m of x[e * ld + c].
template <red::Op OP>
void sequence_cols(const float *x, uint64_t m, uint64_t ld, uint64_t w, float *acc, float *y) {
  if (m <= kChunk) {
    chunk_cols<OP>(x, m, ld, w, acc, y);
    return;
  }
  const uint64_t nc = red::chunks_of(m);
  std::vector<float> part(nc * w);
  for (uint64_t k = 0; k < nc; ++k) {
    const uint64_t e0 = k * kChunk;
    chunk_cols<OP>(x + e0 * ld, m - e0 < kChunk ? m - e0 : kChunk, ld, w, acc, part.data() + k * w);
  }
  sequence_cols<OP>(part.data(), nc, w, w, acc, y);
}

template <red::Op OP>
void reduce_axis_op(const float *x, uint64_t outer, uint64_t m, uint64_t inner, float div,
                    float *y) {
  if (inner == 1) {
    if (m <= red::kSmall) {
      small_rows_any<OP>(x, outer, (unsigned)m, div, y);
      return;
    }
    for (uint64_t o = 0; o < outer; ++o) y[o] = red::finish(sequence<OP>(x + o * m, m), div);
    return;
  }
  // Accumulators: kLanes rows for narrow tiles, a stack of 9 rows for wide ones.
  const uint64_t narrow = kLanes * (inner < kNarrow ? inner : kNarrow);
  const uint64_t wide = 9 * (inner < kTile ? inner : kTile);
  std::vector<float> acc(narrow > wide ? narrow : wide);
  for (uint64_t o = 0; o < outer; ++o) {
    const float *xo = x + o * m * inner;
    float *yo = y + o * inner;
    for (uint64_t c0 = 0; c0 < inner; c0 += kTile) {
      const uint64_t w = inner - c0 < kTile ? inner - c0 : kTile;
      sequence_cols<OP>(xo + c0, m, inner, w, acc.data(), yo + c0);
    }
    if (div != 1.0f)
      for (uint64_t i = 0; i < inner; ++i) yo[i] = red::finish(yo[i], div);
  }
}

}  // namespace

void reduce_axis(int, red::Op op, const float *x, uint64_t outer, uint64_t m, uint64_t inner,
                 float div, float *y) {
  switch (op) {
    case red::Op::Sum:
      reduce_axis_op<red::Op::Sum>(x, outer, m, inner, div, y);
      break;
    case red::Op::Max:
      reduce_axis_op<red::Op::Max>(x, outer, m, inner, div, y);
      break;
  }
}

void reduce_strided(int, const float *x, const red::Strided &p, float *y) {
  std::vector<float> seq(p.m);
  for (uint64_t q = 0; q < p.nq; ++q) {
    const uint64_t base = red::strided_offset(q, p.kr, p.kdim, p.kstride);
    for (uint64_t e = 0; e < p.m; ++e)
      seq[e] = x[base + red::strided_offset(e, p.rr, p.rdim, p.rstride)];
    y[q] = sequence<red::Op::Sum>(seq.data(), p.m);
  }
}

// argmax / top-k: the order of core/numerics/select_ops.hpp (larger key first, then lower index).
namespace {

template <class I>
void argmax_rows_t(const float *x, uint64_t rows, uint64_t cols, I *idx) {
  for (uint64_t r = 0; r < rows; ++r) {
    const float *p = x + r * cols;
    uint32_t best = sel::order_key(p[0]);
    uint64_t bi = 0;
    for (uint64_t j = 1; j < cols && best != 0xFFFFFFFFu; ++j) {
      const uint32_t kj = sel::order_key(p[j]);
      if (kj > best) {
        best = kj;
        bi = j;
      }
    }
    idx[r] = (I)bi;
  }
}

template <class I>
void topk_rows_t(const float *x, uint64_t rows, uint64_t cols, uint64_t k, float *vals, I *idx) {
  std::vector<uint32_t> key(cols);
  std::vector<uint64_t> ord(cols);
  for (uint64_t r = 0; r < rows; ++r) {
    const float *p = x + r * cols;
    for (uint64_t j = 0; j < cols; ++j) key[j] = sel::order_key(p[j]);
    std::iota(ord.begin(), ord.end(), uint64_t{0});
    std::partial_sort(ord.begin(), ord.begin() + k, ord.end(), [&](uint64_t a, uint64_t b) {
      return sel::before(key[a], a, key[b], b);
    });
    for (uint64_t j = 0; j < k; ++j) {
      vals[r * k + j] = p[ord[j]];
      idx[r * k + j] = (I)ord[j];
    }
  }
}

}  // namespace

void argmax_rows(int, const float *x, uint64_t rows, uint64_t cols, bool i64, void *idx) {
  if (i64)
    argmax_rows_t(x, rows, cols, static_cast<int64_t *>(idx));
  else
    argmax_rows_t(x, rows, cols, static_cast<int32_t *>(idx));
}

void topk_rows(int, const float *x, uint64_t rows, uint64_t cols, uint64_t k, bool i64,
               float *vals, void *idx) {
  if (i64)
    topk_rows_t(x, rows, cols, k, vals, static_cast<int64_t *>(idx));
  else
    topk_rows_t(x, rows, cols, k, vals, static_cast<int32_t *>(idx));
}

}  // namespace stub
}  // namespace tlrt
