// Entry points, layout: concatenation, slices, broadcasts, transposes and permutations: validate,
// allocate the output, dispatch.
//
// Concatenations and slices are one or two same-device copies at offsets (the memory backend's
// copy; on CUDA asynchronous device-to-device copies on the library stream). Every other op is
// described as a strided gather over its row-major output: output axis j has extent od[j] and
// reads the input with element stride st[j] (0 along a repeated axis). normalise() drops size-1
// axes and merges adjacent axes where st[j] == st[j + 1] * od[j + 1] (input-adjacent axes kept in
// order, or two repeated axes), so that, for example, a (2, 3, 4) -> (3, 4, 2) permutation becomes
// a (2, 12) -> (12, 2) transpose and a (5, 1, 7) -> (5, 6, 7) broadcast stays a 3-axis gather with
// contiguous rows. The plan then goes to:
//   - the memory backend's copy when it is the identity (rank 1, stride 1) or a single element;
//   - tiled_transpose when the innermost output axis reads the input with a stride other than 0
//     and 1 (a batched transposition: the batch is every other axis), on the CPU always, on CUDA
//     when the tiles are worth it (see worth_tiling); also when the innermost axis is a run of
//     exactly 2 or 4 contiguous floats above such a transposition (elements of w floats);
//   - strided_copy otherwise (contiguous row blocks, broadcasts, thin transposes on CUDA).
// The broadcast validation is shared with tlrt_reduce_from_broadcast (core/broadcast_plan.hpp).
#include <cstring>
#include <string>

#include "abi/tlrt_layout.h"
#include "core/backend/layout.hpp"
#include "core/backend/memory.hpp"
#include "core/broadcast_plan.hpp"
#include "core/buffer.hpp"
#include "core/error.hpp"
#include "core/shape_check.hpp"

using namespace tlrt;

namespace {

using ull = unsigned long long;

// Whether a transposition of p x q (p: the extent of the axis contiguous in x, q: the extent of the
// output's innermost axis) goes to tiled_transpose. The CPU's blocked transpose is right for any
// extents (a gather would re-read x once per output row when p is small). CUDA's 4096-element
// tiles (64 x 64, or thinner down to 2 x 2048 / 2048 x 2) need one side of at least 64 elements;
// when both are shorter, each (p, q) slab of x is at most 16 KiB and strided_copy's gather, whose
// reads then stay within a few cache lines per warp, is the better kernel (for example
// (batch, 2, 40) -> (batch, 40, 2)).
bool worth_tiling(bool cuda, uint64_t p, uint64_t q) { return !cuda || p >= 64 || q >= 64; }

// The output's axes: extents (row-major) and the input stride each reads.
struct Axes {
  uint32_t rank = 0;
  uint64_t od[lay::kMaxRank] = {};
  uint64_t st[lay::kMaxRank] = {};
  void push(uint64_t d, uint64_t s) {
    od[rank] = d;
    st[rank] = s;
    ++rank;
  }
};

// Row-major strides of dims[0..rank): s[k] = prod(dims[k+1..rank)). The caller has checked that
// the product fits (it equals an element count).
void row_major(const uint64_t *dims, uint32_t rank, uint64_t *s) {
  uint64_t acc = 1;
  for (uint32_t k = rank; k-- > 0;) {
    s[k] = acc;
    acc *= dims[k];
  }
}

// The normalised gather of a non-empty output of n elements.
lay::Gather normalise(const Axes &a, uint64_t n) {
  lay::Gather g{};
  g.n = n;
  for (uint32_t j = 0; j < a.rank; ++j) {
    if (a.od[j] == 1) continue;
    if (g.rank > 0 && g.stride[g.rank - 1] == a.st[j] * a.od[j]) {
      g.dims[g.rank - 1] *= a.od[j];
      g.stride[g.rank - 1] = a.st[j];
    } else {
      g.dims[g.rank] = a.od[j];
      g.stride[g.rank] = a.st[j];
      ++g.rank;
    }
  }
  if (g.rank == 0) {  // a single element
    g.rank = 1;
    g.dims[0] = 1;
    g.stride[0] = 1;
  }
  return g;
}

// A Transpose plan for g, or false when g is not a transposition worth tiling on this backend.
bool as_transpose(const lay::Gather &g, bool cuda, lay::Transpose *t) {
  const uint32_t r = g.rank;
  if (r < 2) return false;
  const uint64_t s_last = g.stride[r - 1];
  if (s_last == 0 || s_last == 1) return false;
  uint32_t kp = r;  // the output axis reading the input's contiguous axis
  for (uint32_t k = 0; k + 1 < r; ++k)
    if (g.stride[k] == 1) kp = k;
  if (kp == r) return false;
  if (!worth_tiling(cuda, g.dims[kp], g.dims[r - 1])) return false;
  uint64_t ys[lay::kMaxRank];
  row_major(g.dims, r, ys);
  *t = lay::Transpose{};
  t->w = 1;
  t->p = g.dims[kp];
  t->q = g.dims[r - 1];
  t->x_q = s_last;
  t->y_p = ys[kp];
  t->batch = 1;
  t->n = g.n;
  for (uint32_t k = 0; k + 1 < r; ++k) {
    if (k == kp) continue;
    t->bdim[t->nb] = g.dims[k];
    t->bx[t->nb] = g.stride[k];
    t->by[t->nb] = ys[k];
    ++t->nb;
    t->batch *= g.dims[k];
  }
  return true;
}

// A Transpose plan of w-float elements (w = 2 or 4) for g, or false: g's innermost axis must be a
// contiguous run of exactly w floats (stride 1, extent w), every other stride a multiple of w, and
// the rest, in units of w floats, a transposition worth tiling. Such a gather (a swap of axes
// above a trailing block of 2, e.g. interleaved complex pairs) went to strided_copy's scalar mode
// on CUDA: 0.45 of copy bandwidth at (32, 1024, 1024, 2) swapped at depth 1, 1.21x PyTorch's time
// (H100, 2026-11-24).
bool as_wide_transpose(const lay::Gather &g, bool cuda, lay::Transpose *t) {
  const uint32_t r = g.rank;
  if (r < 3 || g.stride[r - 1] != 1) return false;
  const uint64_t w = g.dims[r - 1];
  if (w != 2 && w != 4) return false;
  lay::Gather e{};
  e.rank = r - 1;
  e.n = g.n / w;
  for (uint32_t k = 0; k + 1 < r; ++k) {
    if (g.stride[k] % w != 0) return false;
    e.dims[k] = g.dims[k];
    e.stride[k] = g.stride[k] / w;
  }
  if (!as_transpose(e, cuda, t)) return false;
  t->w = (uint32_t)w;
  return true;
}

// Y (n elements, row-major over a.od) = the gather of X described by a.
void run(const Buffer &X, const Axes &a, Buffer &Y) {
  const uint64_t n = Y.size;
  if (n == 0) return;
  const lay::Gather g = normalise(a, n);
  const Dev dev = X.dev;
  if (g.rank == 1 && (g.stride[0] == 1 || g.dims[0] == 1)) {
    // The identity, or one element (always x[0] then: every offset is 0).
    TLRT_DISPATCH(dev, copy, dev.ordinal, Y.data, X.data, n * sizeof(float));
    return;
  }
  lay::Transpose t;
  if (as_transpose(g, dev.cuda, &t) || as_wide_transpose(g, dev.cuda, &t)) {
    TLRT_DISPATCH(dev, tiled_transpose, dev.ordinal, X.data, t, Y.data);
    return;
  }
  TLRT_DISPATCH(dev, strided_copy, dev.ordinal, X.data, g, Y.data);
}

// An output of rows * cols elements (for the broadcasts): TLRT_ERR_OVERFLOW beyond
// TLRT_MAX_ELEMENTS or 64 bits.
uint64_t output_matrix(uint64_t rows, uint64_t cols) {
  uint64_t n = 0;
  const bool fits = rows == 0 || cols == 0 || !__builtin_mul_overflow(rows, cols, &n);
  if (!fits)
    fail(TLRT_ERR_OVERFLOW,
         "the output would have argument rows * argument cols = %llu * %llu elements, beyond 64 "
         "bits (more than TLRT_MAX_ELEMENTS, 2^60)",
         (ull)rows, (ull)cols);
  if (n > TLRT_MAX_ELEMENTS)
    fail(TLRT_ERR_OVERFLOW,
         "the output would have argument rows * argument cols = %llu * %llu = %llu elements, more "
         "than TLRT_MAX_ELEMENTS (2^60)",
         (ull)rows, (ull)cols, (ull)n);
  return n;
}

// The permutation of X (dims[0..rank), validated) by perm (validated), into a fresh buffer.
Owned permuted(const Buffer &X, const uint64_t *dims, uint32_t rank, const uint32_t *perm) {
  Owned y = new_buffer(X.dev, X.size);
  if (X.size == 0) return y;
  uint64_t xs[lay::kMaxRank];
  row_major(dims, rank, xs);  // every dim >= 1, the product is X.size
  Axes a;
  for (uint32_t i = 0; i < rank; ++i) a.push(dims[perm[i]], xs[perm[i]]);
  run(X, a, *y);
  return y;
}

// The 3-D permutations: x is (a, b, c); perm as in tlrt_permute.
tlrt_status permute3d(const char *fn, const tlrt_buffer *x, uint64_t a, uint64_t b, uint64_t c,
                      const uint32_t (&perm)[3], tlrt_buffer **out) {
  if (out) *out = nullptr;
  return guarded(fn, [&] {
    clear_out(out, "out");
    const Buffer &X = input(x, "x");
    const uint64_t dims[3] = {a, b, c};
    uint64_t n = 0;
    const bool fits = exact_product(dims, 3, &n);
    if (!fits || n != X.size)
      fail(TLRT_ERR_SHAPE,
           "argument x has %llu elements, but argument a * argument b * argument c = "
           "%llu * %llu * %llu = %s",
           (ull)X.size, (ull)a, (ull)b, (ull)c, count_str(n, fits).c_str());
    *out = permuted(X, dims, 3, perm).release();
  });
}

// The shape check of the N-D entry points: prod(dims) == size of X.
void check_dims(const Buffer &X, const uint64_t *dims, uint32_t rank) {
  uint64_t n = 0;
  const bool fits = exact_product(dims, rank, &n);
  if (!fits || n != X.size)
    fail(TLRT_ERR_SHAPE, "argument x has %llu elements, but the product of argument dims is %s",
         (ull)X.size, count_str(n, fits).c_str());
}

}  // namespace

extern "C" {

TLRT_API tlrt_status tlrt_concat1d(const tlrt_buffer *a, const tlrt_buffer *b, uint64_t n,
                                   uint64_t m, tlrt_buffer **out) {
  if (out) *out = nullptr;
  return guarded(__func__, [&] {
    clear_out(out, "out");
    const Buffer &A = input(a, "a");
    const Buffer &B = input(b, "b");
    same_device(A, "a", B, "b");
    if (n != A.size)
      fail(TLRT_ERR_SHAPE, "argument a has %llu elements, but argument n = %llu", (ull)A.size,
           (ull)n);
    if (m != B.size)
      fail(TLRT_ERR_SHAPE, "argument b has %llu elements, but argument m = %llu", (ull)B.size,
           (ull)m);
    uint64_t total = 0;
    if (__builtin_add_overflow(n, m, &total) || total > TLRT_MAX_ELEMENTS)
      fail(TLRT_ERR_OVERFLOW,
           "argument n + argument m = %llu + %llu is more than TLRT_MAX_ELEMENTS (2^60)", (ull)n,
           (ull)m);
    Owned y = new_buffer(A.dev, total);
    const Dev dev = A.dev;
    if (n != 0) TLRT_DISPATCH(dev, copy, dev.ordinal, y->data, A.data, n * sizeof(float));
    if (m != 0) TLRT_DISPATCH(dev, copy, dev.ordinal, y->data + n, B.data, m * sizeof(float));
    *out = y.release();
  });
}

TLRT_API tlrt_status tlrt_slice1d(const tlrt_buffer *x, uint64_t n, uint64_t start, uint64_t len,
                                  tlrt_buffer **out) {
  if (out) *out = nullptr;
  return guarded(__func__, [&] {
    clear_out(out, "out");
    const Buffer &X = input(x, "x");
    if (n != X.size)
      fail(TLRT_ERR_SHAPE, "argument x has %llu elements, but argument n = %llu", (ull)X.size,
           (ull)n);
    if (start > n || len > n - start)
      fail(TLRT_ERR_INDEX,
           "argument start + argument len = %llu + %llu is beyond the %llu elements of argument x",
           (ull)start, (ull)len, (ull)n);
    Owned y = new_buffer(X.dev, len);
    if (len != 0)
      TLRT_DISPATCH(X.dev, copy, X.dev.ordinal, y->data, X.data + start, len * sizeof(float));
    *out = y.release();
  });
}

TLRT_API tlrt_status tlrt_concat_axis0(const tlrt_buffer *a, const tlrt_buffer *b, uint64_t rows_a,
                                       uint64_t rows_b, uint64_t inner, tlrt_buffer **out) {
  if (out) *out = nullptr;
  return guarded(__func__, [&] {
    clear_out(out, "out");
    const Buffer &A = input(a, "a");
    const Buffer &B = input(b, "b");
    same_device(A, "a", B, "b");
    const uint64_t na = check_matrix(A, "a", rows_a, inner, "rows_a", "inner");
    const uint64_t nb = check_matrix(B, "b", rows_b, inner, "rows_b", "inner");
    uint64_t rows = 0;
    if (__builtin_add_overflow(rows_a, rows_b, &rows))
      fail(TLRT_ERR_OVERFLOW,
           "argument rows_a + argument rows_b = %llu + %llu rows is beyond 64 bits", (ull)rows_a,
           (ull)rows_b);
    const uint64_t total = na + nb;  // each <= TLRT_MAX_ELEMENTS: no wrap
    if (total > TLRT_MAX_ELEMENTS)
      fail(TLRT_ERR_OVERFLOW,
           "the output would have (argument rows_a + argument rows_b) * argument inner = %llu "
           "elements, more than TLRT_MAX_ELEMENTS (2^60)",
           (ull)total);
    Owned y = new_buffer(A.dev, total);
    const Dev dev = A.dev;
    if (na != 0) TLRT_DISPATCH(dev, copy, dev.ordinal, y->data, A.data, na * sizeof(float));
    if (nb != 0) TLRT_DISPATCH(dev, copy, dev.ordinal, y->data + na, B.data, nb * sizeof(float));
    *out = y.release();
  });
}

TLRT_API tlrt_status tlrt_slice_axis0(const tlrt_buffer *x, uint64_t rows, uint64_t inner,
                                      uint64_t start, uint64_t len, tlrt_buffer **out) {
  if (out) *out = nullptr;
  return guarded(__func__, [&] {
    clear_out(out, "out");
    const Buffer &X = input(x, "x");
    check_matrix(X, "x", rows, inner, "rows", "inner");
    if (start > rows || len > rows - start)
      fail(TLRT_ERR_INDEX,
           "argument start + argument len = %llu + %llu is beyond the %llu rows of argument x",
           (ull)start, (ull)len, (ull)rows);
    // len <= rows, so len * inner <= rows * inner = size of x (or inner == 0): no overflow.
    const uint64_t n = len * inner;
    Owned y = new_buffer(X.dev, n);
    if (n != 0)
      TLRT_DISPATCH(X.dev, copy, X.dev.ordinal, y->data, X.data + start * inner,
                    n * sizeof(float));
    *out = y.release();
  });
}

TLRT_API tlrt_status tlrt_broadcast_vec_to_rows(const tlrt_buffer *v, uint64_t rows, uint64_t cols,
                                                tlrt_buffer **out) {
  if (out) *out = nullptr;
  return guarded(__func__, [&] {
    clear_out(out, "out");
    const Buffer &V = input(v, "v");
    if (V.size != cols)
      fail(TLRT_ERR_SHAPE, "argument v has %llu elements, but argument cols = %llu", (ull)V.size,
           (ull)cols);
    const uint64_t n = output_matrix(rows, cols);
    Owned y = new_buffer(V.dev, n);
    Axes a;
    a.push(rows, 0);
    a.push(cols, 1);
    run(V, a, *y);
    *out = y.release();
  });
}

TLRT_API tlrt_status tlrt_broadcast_vec_to_cols(const tlrt_buffer *v, uint64_t rows, uint64_t cols,
                                                tlrt_buffer **out) {
  if (out) *out = nullptr;
  return guarded(__func__, [&] {
    clear_out(out, "out");
    const Buffer &V = input(v, "v");
    if (V.size != rows)
      fail(TLRT_ERR_SHAPE, "argument v has %llu elements, but argument rows = %llu", (ull)V.size,
           (ull)rows);
    const uint64_t n = output_matrix(rows, cols);
    Owned y = new_buffer(V.dev, n);
    Axes a;
    a.push(rows, 1);
    a.push(cols, 0);
    run(V, a, *y);
    *out = y.release();
  });
}

TLRT_API tlrt_status tlrt_broadcast_to(const tlrt_buffer *x, const uint64_t *in_dims,
                                       uint32_t in_rank, const uint64_t *out_dims,
                                       uint32_t out_rank, const uint32_t *axis_map,
                                       tlrt_buffer **out) {
  if (out) *out = nullptr;
  return guarded(__func__, [&] {
    clear_out(out, "out");
    const Buffer &X = input(x, "x");
    const BroadcastShape v = validate_broadcast(BroadcastSide::Forward, X, "x", in_dims, in_rank,
                                                out_dims, out_rank, axis_map);
    Owned y = new_buffer(X.dev, v.nout);
    if (v.nout != 0) {
      // Non-empty output: every in_dims[k] >= 1 and prod(in_dims) = size of x fits.
      uint64_t xs[lay::kMaxRank];
      row_major(in_dims, in_rank, xs);
      Axes a;
      for (uint32_t j = 0; j < out_rank; ++j) {
        const uint32_t m = axis_map[j];
        const bool reads = m != 0 && in_dims[m - 1] != 1;
        a.push(out_dims[j], reads ? xs[m - 1] : 0);
      }
      run(X, a, *y);
    }
    *out = y.release();
  });
}

TLRT_API tlrt_status tlrt_transpose2d(const tlrt_buffer *x, uint64_t rows, uint64_t cols,
                                      tlrt_buffer **out) {
  if (out) *out = nullptr;
  return guarded(__func__, [&] {
    clear_out(out, "out");
    const Buffer &X = input(x, "x");
    check_matrix(X, "x", rows, cols, "rows", "cols");
    const uint64_t dims[2] = {rows, cols};
    const uint32_t perm[2] = {1, 0};
    *out = permuted(X, dims, 2, perm).release();
  });
}

TLRT_API tlrt_status tlrt_swap_adjacent_at_depth(const tlrt_buffer *x, const uint64_t *dims,
                                                 uint32_t rank, uint32_t depth,
                                                 tlrt_buffer **out) {
  if (out) *out = nullptr;
  return guarded(__func__, [&] {
    clear_out(out, "out");
    const Buffer &X = input(x, "x");
    if (rank < 2 || rank > lay::kMaxRank)
      fail(TLRT_ERR_INVALID_ARGUMENT, "argument rank = %u must be between 2 and 8", rank);
    if (dims == nullptr) fail(TLRT_ERR_NULL_ARGUMENT, "argument dims is NULL");
    if (depth >= rank - 1)
      fail(TLRT_ERR_INDEX,
           "argument depth = %u: axes depth and depth + 1 must both be axes of a buffer of "
           "argument rank = %u (depth <= %u)",
           depth, rank, rank - 2);
    check_dims(X, dims, rank);
    uint32_t perm[lay::kMaxRank];
    for (uint32_t i = 0; i < rank; ++i) perm[i] = i;
    perm[depth] = depth + 1;
    perm[depth + 1] = depth;
    *out = permuted(X, dims, rank, perm).release();
  });
}

TLRT_API tlrt_status tlrt_permute(const tlrt_buffer *x, const uint64_t *dims, uint32_t rank,
                                  const uint32_t *perm, tlrt_buffer **out) {
  if (out) *out = nullptr;
  return guarded(__func__, [&] {
    clear_out(out, "out");
    const Buffer &X = input(x, "x");
    if (rank > lay::kMaxRank)
      fail(TLRT_ERR_INVALID_ARGUMENT, "argument rank = %u exceeds the maximum rank 8", rank);
    if (rank != 0 && dims == nullptr)
      fail(TLRT_ERR_NULL_ARGUMENT, "argument dims is NULL (rank = %u)", rank);
    if (rank != 0 && perm == nullptr)
      fail(TLRT_ERR_NULL_ARGUMENT, "argument perm is NULL (rank = %u)", rank);
    for (uint32_t i = 0; i < rank; ++i)
      if (perm[i] >= rank)
        fail(TLRT_ERR_INDEX, "argument perm[%u] = %u is not an axis of a buffer of rank %u", i,
             perm[i], rank);
    int seen[lay::kMaxRank];
    for (int &s : seen) s = -1;
    for (uint32_t i = 0; i < rank; ++i) {
      if (seen[perm[i]] >= 0)
        fail(TLRT_ERR_INVALID_ARGUMENT,
             "argument perm is not a permutation: perm[%d] and perm[%u] are both %u",
             seen[perm[i]], i, perm[i]);
      seen[perm[i]] = (int)i;
    }
    check_dims(X, dims, rank);
    *out = permuted(X, dims, rank, perm).release();
  });
}

TLRT_API tlrt_status tlrt_permute3d_bca(const tlrt_buffer *x, uint64_t a, uint64_t b, uint64_t c,
                                        tlrt_buffer **out) {
  static const uint32_t perm[3] = {1, 2, 0};
  return permute3d(__func__, x, a, b, c, perm, out);
}

TLRT_API tlrt_status tlrt_permute3d_cab(const tlrt_buffer *x, uint64_t a, uint64_t b, uint64_t c,
                                        tlrt_buffer **out) {
  static const uint32_t perm[3] = {2, 0, 1};
  return permute3d(__func__, x, a, b, c, perm, out);
}

TLRT_API tlrt_status tlrt_permute3d_acb(const tlrt_buffer *x, uint64_t a, uint64_t b, uint64_t c,
                                        tlrt_buffer **out) {
  static const uint32_t perm[3] = {0, 2, 1};
  return permute3d(__func__, x, a, b, c, perm, out);
}

}  // extern "C"
