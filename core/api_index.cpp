// Entry points, indexing: gather and scatter-add through host index lists and index buffers:
// validate, allocate the output, dispatch (core/backend/index.hpp). Empty outputs never reach a
// gather or scatter kernel (an index buffer's faults are still counted).
//  - host lists: every entry is checked (>= 2^60 is TLRT_ERR_INDEX) before the output is
//    allocated, in one vectorised pass (check_entries); the backends then read the list in place;
//  - index buffers: int32 / int64 buffers on the data's device, read by the backends in place;
//    entries that are not an index are the backends' to count (idx::decode), never an error.
// Grouping the entries of a scatter by target is the backends' work: the CPU sorts on the host
// (stub/index.cpp), CUDA on the device (CUB's radix sort, cuda/index.cu), for host lists as for
// index buffers.
// tlrt_gather_vec and tlrt_scatter_add are the cols == 1 cases of the row functions, and
// tlrt_scatter_add_row is tlrt_scatter_add_rows with the one-entry list {i}: one code path each,
// so the functions share one rule for what cannot be an index and what is out of range.
// The determinism switch is not consulted: the one order is deterministic and the fast path.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "abi/tlrt_index.h"
#include "core/backend/index.hpp"
#include "core/backend/memory.hpp"
#include "core/buffer.hpp"
#include "core/error.hpp"
#include "core/shape_check.hpp"

using namespace tlrt;

namespace {

using ull = unsigned long long;

// Every pointer argument must be non-NULL: checked first, for all of them, so that the order of
// the status codes is the one the header states.
void need(const void *p, const char *name) {
  if (p == nullptr) fail(TLRT_ERR_NULL_ARGUMENT, "argument %s is NULL", name);
}

void check_list_ptr(const uint64_t *idx, uint64_t k) {
  if (idx == nullptr && k != 0)
    fail(TLRT_ERR_NULL_ARGUMENT, "argument idx is NULL but argument k = %llu", (ull)k);
}

void check_list_len(uint64_t k) {
  if (k > TLRT_MAX_ELEMENTS)
    fail(TLRT_ERR_OVERFLOW,
         "argument k = %llu exceeds TLRT_MAX_ELEMENTS (2^60): no index list is that long", (ull)k);
}

[[noreturn]] void not_an_index(const char *name, bool list, uint64_t j, uint64_t v) {
  char where[48] = "";
  if (list) std::snprintf(where, sizeof where, "[%llu]", (ull)j);
  fail(TLRT_ERR_INDEX,
       "argument %s%s = %llu (as a signed 64-bit value: %lld) is not an index: it is >= "
       "TLRT_MAX_ELEMENTS (2^60), so it cannot address an element of any buffer",
       name, where, (ull)v, (long long)v);
}

constexpr uint64_t kBlock = 4096;  // entries per validation block

// The first entry >= 2^60 of idx[j0..e) fails with TLRT_ERR_INDEX (called once a block's OR
// says there is one).
void fail_first_bad(const uint64_t *idx, uint64_t j0, uint64_t e) {
  for (uint64_t j = j0; j < e; ++j)
    if (idx[j] >= TLRT_MAX_ELEMENTS) not_an_index("idx", true, j, idx[j]);
}

// Fails with TLRT_ERR_INDEX at the first entry >= 2^60: one OR per entry over blocks
// (vectorised), the position searched only in a block that has a bad entry. The passes that
// sort the list below fold the same check into their first pass over idx.
void check_entries(const uint64_t *idx, uint64_t k) {
  for (uint64_t j0 = 0; j0 < k; j0 += kBlock) {
    const uint64_t e = std::min(k, j0 + kBlock);
    uint64_t acc = 0;
    for (uint64_t j = j0; j < e; ++j) acc |= idx[j];
    if (acc >= TLRT_MAX_ELEMENTS) fail_first_bad(idx, j0, e);
  }
}

// ---- dispatch -----------------------------------------------------------------------------------

// The (k, cols) gather of X's rows, nout = k * cols elements.
tlrt_buffer *gather(const Buffer &X, uint64_t rows, uint64_t cols, const idx::List &list,
                    uint64_t nout) {
  Owned y = new_buffer(X.dev, nout);
  if (list.k != 0 && (nout == 0 || rows == 0))  // nothing to read: faults are still counted
    TLRT_DISPATCH(X.dev, count_faults, X.dev.ordinal, list);
  if (nout == 0) return y.release();
  if (rows == 0)  // only out-of-range entries
    TLRT_DISPATCH(X.dev, fill, X.dev.ordinal, y->data, 0.0f, nout);
  else
    TLRT_DISPATCH(X.dev, gather_rows, X.dev.ordinal, X.data, rows, cols, list, y->data);
  return y.release();
}

// A copy of X (rows, cols; NULL: zeros) with the rows of vals scattered.
tlrt_buffer *scatter(Dev dev, const Buffer *X, const float *vals, uint64_t rows, uint64_t cols,
                     const idx::List &list) {
  const uint64_t n = rows * cols;  // the caller checked it against a buffer
  Owned y = new_buffer(dev, n);
  if (list.k != 0 && n == 0) TLRT_DISPATCH(dev, count_faults, dev.ordinal, list);
  if (n == 0) return y.release();
  if (list.k == 0) {  // nothing to add: a bit-exact copy, or zeros
    if (X != nullptr)
      TLRT_DISPATCH(dev, copy, dev.ordinal, y->data, X->data, n * 4);
    else
      TLRT_DISPATCH(dev, fill, dev.ordinal, y->data, 0.0f, n);
    return y.release();
  }
  TLRT_DISPATCH(dev, scatter_add_rows, dev.ordinal, X ? X->data : nullptr, vals, rows, cols, list,
                y->data);
  return y.release();
}

idx::List host_list(const uint64_t *idx, uint64_t k) {
  check_entries(idx, k);
  return idx::List{idx, idx::Type::U64, k};
}

idx::List buffer_list(const Buffer &I) {  // I holds int32 or int64 (index_input)
  return idx::List{I.data, I.dtype == TLRT_DTYPE_I32 ? idx::Type::I32 : idx::Type::I64, I.size};
}

// The product k * cols of a gather's output, or TLRT_ERR_OVERFLOW.
uint64_t gather_out_size(uint64_t k, uint64_t cols) {
  uint64_t nout = 0;
  if (__builtin_mul_overflow(k, cols, &nout) || nout > TLRT_MAX_ELEMENTS)
    fail(TLRT_ERR_OVERFLOW,
         "the output would have argument k * argument cols = %llu * %llu elements, more than "
         "TLRT_MAX_ELEMENTS (2^60)",
         (ull)k, (ull)cols);
  return nout;
}

// vals must hold k * cols elements (k rows of the scatter).
void check_vals(const Buffer &V, uint64_t k, uint64_t cols, const char *kname) {
  uint64_t nv = 0;
  const bool fits = !__builtin_mul_overflow(k, cols, &nv);
  if (cols == 1 && nv != V.size)
    fail(TLRT_ERR_SHAPE, "argument vals has %llu elements, but %s = %llu", (ull)V.size, kname,
         (ull)k);
  if (!fits || nv != V.size)
    fail(TLRT_ERR_SHAPE,
         "argument vals has %llu elements, but %s * argument cols = %llu * %llu = %s",
         (ull)V.size, kname, (ull)k, (ull)cols, count_str(nv, fits).c_str());
}

// The handles of an _ibuf call, checked in the header's order across all of them: every handle
// live (TLRT_ERR_STALE_HANDLE), then every storage present (TLRT_ERR_RELEASED), then the element
// types (the data float32, idx int32 / int64). NULL entries of `data` are skipped (the scatters'
// optional base); the caller checked every required pointer for NULL.
struct IbufArgs {
  const Buffer *data[2] = {nullptr, nullptr};
  const Buffer *idx = nullptr;
};
IbufArgs ibuf_args(std::initializer_list<std::pair<const tlrt_buffer *, const char *>> data,
                   const tlrt_buffer *idx, const char *idx_name) {
  for (const auto &d : data)
    if (d.first) (void)handle(d.first, d.second);
  (void)handle(idx, idx_name);
  for (const auto &d : data)
    if (d.first) (void)input_any(d.first, d.second);
  (void)input_any(idx, idx_name);
  IbufArgs r;
  size_t i = 0;
  for (const auto &d : data) {
    if (d.first) r.data[i] = &input(d.first, d.second);
    ++i;
  }
  r.idx = &index_input(idx, idx_name);
  return r;
}

// A scatter through an index buffer after the NULL checks: x (NULL: zeros) of rows * cols
// elements (vec: a vector of n = rows elements, cols == 1), vals of k * cols, k = size of idx.
tlrt_buffer *scatter_ibuf(const tlrt_buffer *x, const char *xname, const tlrt_buffer *vals,
                          uint64_t rows, uint64_t cols, const tlrt_buffer *idx, bool vec) {
  const IbufArgs a = ibuf_args({{x, xname}, {vals, "vals"}}, idx, "idx");
  const Buffer *X = a.data[0];
  const Buffer &V = *a.data[1], &I = *a.idx;
  if (X) same_device(*X, xname, V, "vals");
  if (X)
    same_device(*X, xname, I, "idx");
  else
    same_device(V, "vals", I, "idx");
  if (X != nullptr && vec && X->size != rows)
    fail(TLRT_ERR_SHAPE, "argument %s has %llu elements, but argument n = %llu", xname,
         (ull)X->size, (ull)rows);
  if (X != nullptr && !vec) check_matrix(*X, xname, rows, cols);
  check_vals(V, I.size, cols, "the size of argument idx");
  uint64_t n = 0;
  if (X == nullptr && (__builtin_mul_overflow(rows, cols, &n) || n > TLRT_MAX_ELEMENTS)) {
    if (vec)
      fail(TLRT_ERR_OVERFLOW,
           "argument %s is NULL (zeros) of argument n = %llu elements, more than "
           "TLRT_MAX_ELEMENTS (2^60)",
           xname, (ull)rows);
    fail(TLRT_ERR_OVERFLOW,
         "argument %s is NULL (zeros) of argument rows * argument cols = %llu * %llu elements, "
         "more than TLRT_MAX_ELEMENTS (2^60)",
         xname, (ull)rows, (ull)cols);
  }
  return scatter(V.dev, X, V.data, rows, cols, buffer_list(I));
}

}  // namespace

extern "C" {

TLRT_API tlrt_status tlrt_gather_vec(const tlrt_buffer *v, uint64_t n, const uint64_t *idx,
                                     uint64_t k, tlrt_buffer **out) {
  if (out) *out = nullptr;
  return guarded(__func__, [&] {
    clear_out(out, "out");
    need(v, "v");
    check_list_ptr(idx, k);
    const Buffer &V = input(v, "v");
    check_list_len(k);
    if (n != V.size)
      fail(TLRT_ERR_SHAPE, "argument v has %llu elements, but argument n = %llu", (ull)V.size,
           (ull)n);
    *out = gather(V, n, 1, host_list(idx, k), k);
  });
}

TLRT_API tlrt_status tlrt_scatter_add(const tlrt_buffer *x, const tlrt_buffer *vals, uint64_t n,
                                      const uint64_t *idx, uint64_t k, tlrt_buffer **out) {
  if (out) *out = nullptr;
  return guarded(__func__, [&] {
    clear_out(out, "out");
    need(x, "x");
    need(vals, "vals");
    check_list_ptr(idx, k);
    const Buffer &X = input(x, "x");
    const Buffer &V = input(vals, "vals");
    same_device(X, "x", V, "vals");
    check_list_len(k);
    if (n != X.size)
      fail(TLRT_ERR_SHAPE, "argument x has %llu elements, but argument n = %llu", (ull)X.size,
           (ull)n);
    check_vals(V, k, 1, "argument k");
    *out = scatter(X.dev, &X, V.data, n, 1, host_list(idx, k));
  });
}

TLRT_API tlrt_status tlrt_gather_rows(const tlrt_buffer *mat, uint64_t rows, uint64_t cols,
                                      const uint64_t *idx, uint64_t k, tlrt_buffer **out) {
  if (out) *out = nullptr;
  return guarded(__func__, [&] {
    clear_out(out, "out");
    need(mat, "mat");
    check_list_ptr(idx, k);
    const Buffer &M = input(mat, "mat");
    check_list_len(k);
    check_matrix(M, "mat", rows, cols);
    const uint64_t nout = gather_out_size(k, cols);
    *out = gather(M, rows, cols, host_list(idx, k), nout);
  });
}

TLRT_API tlrt_status tlrt_scatter_add_row(const tlrt_buffer *mat, const tlrt_buffer *row,
                                          uint64_t rows, uint64_t cols, uint64_t i,
                                          tlrt_buffer **out) {
  if (out) *out = nullptr;
  return guarded(__func__, [&] {
    clear_out(out, "out");
    need(mat, "mat");
    need(row, "row");
    const Buffer &M = input(mat, "mat");
    const Buffer &R = input(row, "row");
    same_device(M, "mat", R, "row");
    check_matrix(M, "mat", rows, cols);
    if (cols != R.size)
      fail(TLRT_ERR_SHAPE, "argument row has %llu elements, but argument cols = %llu",
           (ull)R.size, (ull)cols);
    if (i >= TLRT_MAX_ELEMENTS) not_an_index("i", false, 0, i);
    *out = scatter(M.dev, &M, R.data, rows, cols, idx::List{&i, idx::Type::U64, 1});
  });
}

TLRT_API tlrt_status tlrt_scatter_add_rows(const tlrt_buffer *mat, const tlrt_buffer *vals,
                                           uint64_t rows, uint64_t cols, const uint64_t *idx,
                                           uint64_t k, tlrt_buffer **out) {
  if (out) *out = nullptr;
  return guarded(__func__, [&] {
    clear_out(out, "out");
    need(mat, "mat");
    need(vals, "vals");
    check_list_ptr(idx, k);
    const Buffer &M = input(mat, "mat");
    const Buffer &V = input(vals, "vals");
    same_device(M, "mat", V, "vals");
    check_list_len(k);
    check_matrix(M, "mat", rows, cols);
    check_vals(V, k, cols, "argument k");
    *out = scatter(M.dev, &M, V.data, rows, cols, host_list(idx, k));
  });
}

// ---- index buffers ------------------------------------------------------------------------------

TLRT_API tlrt_status tlrt_gather_vec_ibuf(const tlrt_buffer *v, uint64_t n,
                                          const tlrt_buffer *idx, tlrt_buffer **out) {
  if (out) *out = nullptr;
  return guarded(__func__, [&] {
    clear_out(out, "out");
    need(v, "v");
    need(idx, "idx");
    const IbufArgs a = ibuf_args({{v, "v"}}, idx, "idx");
    const Buffer &V = *a.data[0], &I = *a.idx;
    same_device(V, "v", I, "idx");
    if (n != V.size)
      fail(TLRT_ERR_SHAPE, "argument v has %llu elements, but argument n = %llu", (ull)V.size,
           (ull)n);
    *out = gather(V, n, 1, buffer_list(I), I.size);
  });
}

TLRT_API tlrt_status tlrt_scatter_add_ibuf(const tlrt_buffer *x, const tlrt_buffer *vals,
                                           uint64_t n, const tlrt_buffer *idx,
                                           tlrt_buffer **out) {
  if (out) *out = nullptr;
  return guarded(__func__, [&] {
    clear_out(out, "out");
    need(vals, "vals");
    need(idx, "idx");
    *out = scatter_ibuf(x, "x", vals, n, 1, idx, true);
  });
}

TLRT_API tlrt_status tlrt_gather_rows_ibuf(const tlrt_buffer *mat, uint64_t rows, uint64_t cols,
                                           const tlrt_buffer *idx, tlrt_buffer **out) {
  if (out) *out = nullptr;
  return guarded(__func__, [&] {
    clear_out(out, "out");
    need(mat, "mat");
    need(idx, "idx");
    const IbufArgs a = ibuf_args({{mat, "mat"}}, idx, "idx");
    const Buffer &M = *a.data[0], &I = *a.idx;
    same_device(M, "mat", I, "idx");
    check_matrix(M, "mat", rows, cols);
    const uint64_t nout = gather_out_size(I.size, cols);
    *out = gather(M, rows, cols, buffer_list(I), nout);
  });
}

TLRT_API tlrt_status tlrt_scatter_add_rows_ibuf(const tlrt_buffer *mat, const tlrt_buffer *vals,
                                                uint64_t rows, uint64_t cols,
                                                const tlrt_buffer *idx, tlrt_buffer **out) {
  if (out) *out = nullptr;
  return guarded(__func__, [&] {
    clear_out(out, "out");
    need(vals, "vals");
    need(idx, "idx");
    *out = scatter_ibuf(mat, "mat", vals, rows, cols, idx, false);
  });
}

TLRT_API tlrt_status tlrt_index_flat_rows(const tlrt_buffer *col_idx, uint64_t cols,
                                          tlrt_buffer **out) {
  if (out) *out = nullptr;
  return guarded(__func__, [&] {
    clear_out(out, "out");
    need(col_idx, "col_idx");
    const Buffer &I = index_input(col_idx, "col_idx");
    uint64_t n = 0;
    if (__builtin_mul_overflow(I.size, cols, &n) || n > TLRT_MAX_ELEMENTS)
      fail(TLRT_ERR_OVERFLOW,
           "the matrix of rows = size of argument col_idx = %llu and argument cols = %llu has "
           "more than TLRT_MAX_ELEMENTS (2^60) elements",
           (ull)I.size, (ull)cols);
    Owned y = new_buffer(I.dev, I.size, TLRT_DTYPE_I64);
    if (I.size != 0)
      TLRT_DISPATCH(I.dev, flat_labels, I.dev.ordinal, buffer_list(I), cols,
                    reinterpret_cast<int64_t *>(y->data));
    *out = y.release();
  });
}

TLRT_API tlrt_status tlrt_index_faults(tlrt_device device, bool reset, uint64_t *count) {
  if (count) *count = 0;
  return guarded(__func__, [&] {
    need(count, "count");
    const Dev dev = resolve_device(device, "device");
    *count = TLRT_DISPATCH(dev, index_faults, dev.ordinal, reset);
  });
}

}  // extern "C"
