// Reduction entry points: validate, allocate the output, handle the empty cases, dispatch.
// Every sum is the tree of core/numerics/reduce_tree.hpp (abi/tlrt_reduce.h states it); the
// determinism switch is not consulted because the one tree is both deterministic and the fast
// path. tlrt_reduce_from_broadcast is planned here: its common patterns map onto the (outer, m,
// inner) reduction of the axis sums, the rest onto the backends' general strided gather; its
// validation is shared with the forward tlrt_broadcast_to (core/broadcast_plan.hpp).
#include <cmath>
#include <cstring>
#include <limits>
#include <string>

#include "abi/tlrt_reduce.h"
#include "core/backend/memory.hpp"
#include "core/backend/reduce.hpp"
#include "core/broadcast_plan.hpp"
#include "core/buffer.hpp"
#include "core/error.hpp"

using namespace tlrt;

namespace {

using ull = unsigned long long;

// out = the reduction of the (outer, m, inner) view of X, outer * inner outputs.
void run(const Buffer &X, red::Op op, uint64_t outer, uint64_t m, uint64_t inner, float div,
         Buffer &Y) {
  const uint64_t nout = Y.size;
  if (nout == 0) return;
  if (m == 0) {
    const float empty = op == red::Op::Sum ? 0.0f : -std::numeric_limits<float>::infinity();
    TLRT_DISPATCH(X.dev, fill, X.dev.ordinal, Y.data, empty, nout);
    return;
  }
  TLRT_DISPATCH(X.dev, reduce_axis, X.dev.ordinal, op, X.data, outer, m, inner, div, Y.data);
}

tlrt_status whole(const char *fn, bool mean, const tlrt_buffer *x, tlrt_buffer **out) {
  if (out) *out = nullptr;
  return guarded(fn, [&] {
    clear_out(out, "out");
    const Buffer &X = input(x, "x");
    Owned y = new_buffer(X.dev, 1);
    if (mean && X.size == 0) {
      TLRT_DISPATCH(X.dev, fill, X.dev.ordinal, y->data,
                    std::numeric_limits<float>::quiet_NaN(), 1);
    } else {
      // The mean divides by n rounded once to float32 (round to nearest even).
      run(X, red::Op::Sum, 1, X.size, 1, mean ? (float)X.size : 1.0f, *y);
    }
    *out = y.release();
  });
}

// axis 0: out[j] over rows (cols outputs); axis 1: out[i] over cols (rows outputs).
tlrt_status matrix(const char *fn, red::Op op, int axis, const tlrt_buffer *x, uint64_t rows,
                   uint64_t cols, tlrt_buffer **out) {
  if (out) *out = nullptr;
  return guarded(fn, [&] {
    clear_out(out, "out");
    const Buffer &X = input(x, "x");
    uint64_t n = 0;
    const bool fits = rows == 0 || cols == 0 || !__builtin_mul_overflow(rows, cols, &n);
    if (!fits || n != X.size)
      fail(TLRT_ERR_SHAPE,
           "argument x has %llu elements, but argument rows * argument cols = %llu * %llu = %s",
           (ull)X.size, (ull)rows, (ull)cols, count_str(n, fits).c_str());
    const uint64_t nout = axis == 0 ? cols : rows;
    check_output_count(nout, true, axis == 0 ? "cols" : "rows");
    Owned y = new_buffer(X.dev, nout);
    if (axis == 0)
      run(X, op, 1, rows, cols, 1.0f, *y);
    else
      run(X, op, rows, cols, 1, 1.0f, *y);
    *out = y.release();
  });
}

// ---- reduce_from_broadcast planning ------------------------------------------------------------

// dout is non-empty and the result has v.nin >= 1 elements.
void plan_broadcast(const Buffer &D, const uint64_t *in_dims, uint32_t in_rank,
                    const uint64_t *out_dims, uint32_t out_rank, const uint32_t *axis_map,
                    const BroadcastShape &v, Buffer &Y) {
  uint64_t stride[red::kMaxRank];
  uint64_t s = 1;
  for (uint32_t j = out_rank; j-- > 0;) {
    stride[j] = s;
    s *= out_dims[j];  // every dim >= 1 here and the product is D.size: no overflow
  }
  red::Strided p{};
  // Kept axes in input order (the result's layout); each has an output axis of the same size.
  bool in_order = true;
  int last_j = -1;
  for (uint32_t k = 0; k < in_rank; ++k) {
    if (in_dims[k] == 1) continue;
    const int j = v.mapped[k];
    p.kdim[p.kr] = in_dims[k];
    p.kstride[p.kr] = stride[j];
    ++p.kr;
    if (j < last_j) in_order = false;
    last_j = j;
  }
  // Reduced axes in output order (so a sequence runs in increasing flat index of dout), and the
  // pattern of runs of kept (K) and reduced (R) output axes, size-1 axes ignored.
  char runs[2 * red::kMaxRank + 1];
  int nruns = 0;
  uint64_t run_size[2 * red::kMaxRank + 1];
  for (uint32_t j = 0; j < out_rank; ++j) {
    if (out_dims[j] == 1) continue;
    const uint32_t a = axis_map[j];
    const bool kept = a != 0 && in_dims[a - 1] == out_dims[j];
    if (!kept) {
      p.rdim[p.rr] = out_dims[j];
      p.rstride[p.rr] = stride[j];
      ++p.rr;
    }
    const char c = kept ? 'K' : 'R';
    if (nruns > 0 && runs[nruns - 1] == c) {
      run_size[nruns - 1] *= out_dims[j];
    } else {
      runs[nruns] = c;
      run_size[nruns] = out_dims[j];
      ++nruns;
    }
  }
  p.nq = v.nin;
  p.m = D.size / v.nin;
  const Dev dev = D.dev;
  runs[nruns] = '\0';
  if (in_order) {
    auto is = [&](const char *want) { return std::strcmp(runs, want) == 0; };
    if (is("") || is("K")) {  // every sequence has one element: the tree returns it unchanged
      TLRT_DISPATCH(dev, copy, dev.ordinal, Y.data, D.data, D.size * 4);
      return;
    }
    if (is("R")) {
      run(D, red::Op::Sum, 1, p.m, 1, 1.0f, Y);
      return;
    }
    if (is("KR")) {
      run(D, red::Op::Sum, run_size[0], p.m, 1, 1.0f, Y);
      return;
    }
    if (is("RK")) {
      run(D, red::Op::Sum, 1, p.m, run_size[1], 1.0f, Y);
      return;
    }
    if (is("KRK")) {
      run(D, red::Op::Sum, run_size[0], p.m, run_size[2], 1.0f, Y);
      return;
    }
  }
  TLRT_DISPATCH(dev, reduce_strided, dev.ordinal, D.data, p, Y.data);
}

// The value of a tlrt_dtype argument as its bits: a C caller may pass any int in an enumeration
// parameter, and reading a value outside the enumerators' range as the C++ enumeration type is
// undefined, so the argument is copied as bytes and checked as an integer.
uint32_t dtype_bits(const tlrt_dtype &d) {
  static_assert(sizeof(tlrt_dtype) == sizeof(uint32_t), "tlrt_dtype is an int-sized enumeration");
  uint32_t v;
  std::memcpy(&v, &d, sizeof v);
  return v;
}

// The shared checks of argmax / top-k: x is (rows, cols), index_dtype an index type whose values
// hold every column.
const Buffer &select_input(const tlrt_buffer *x, uint64_t rows, uint64_t cols,
                           uint32_t index_dtype) {
  const Buffer &X = input(x, "x");
  uint64_t n = 0;
  const bool fits = rows == 0 || cols == 0 || !__builtin_mul_overflow(rows, cols, &n);
  if (!fits || n != X.size)
    fail(TLRT_ERR_SHAPE,
         "argument x has %llu elements, but argument rows * argument cols = %llu * %llu = %s",
         (ull)X.size, (ull)rows, (ull)cols, count_str(n, fits).c_str());
  if (index_dtype != TLRT_DTYPE_I32 && index_dtype != TLRT_DTYPE_I64)
    fail(TLRT_ERR_DTYPE, "argument index_dtype = %d is not TLRT_DTYPE_I32 or TLRT_DTYPE_I64",
         (int)index_dtype);
  if (index_dtype == (uint32_t)TLRT_DTYPE_I32 && cols > 0x7FFFFFFFull)
    fail(TLRT_ERR_OVERFLOW,
         "argument cols = %llu: a column index does not fit argument index_dtype = int32",
         (ull)cols);
  return X;
}

}  // namespace

extern "C" {

TLRT_API tlrt_status tlrt_argmax_rows(const tlrt_buffer *x, uint64_t rows, uint64_t cols,
                                      tlrt_dtype index_dtype, tlrt_buffer **indices) {
  if (indices) *indices = nullptr;
  return guarded(__func__, [&] {
    clear_out(indices, "indices");
    const uint32_t dt = dtype_bits(index_dtype);
    const Buffer &X = select_input(x, rows, cols, dt);
    if (rows > 0 && cols == 0)
      fail(TLRT_ERR_SHAPE,
           "argument cols = 0: an empty row (of argument rows = %llu) has no maximum", (ull)rows);
    check_output_count(rows, true, "rows");
    Owned y = new_buffer(X.dev, rows, (tlrt_dtype)dt);  // I32 or I64 (checked)
    if (rows > 0)
      TLRT_DISPATCH(X.dev, argmax_rows, X.dev.ordinal, X.data, rows, cols,
                    dt == (uint32_t)TLRT_DTYPE_I64, (void *)y->data);
    *indices = y.release();
  });
}

TLRT_API tlrt_status tlrt_topk_rows(const tlrt_buffer *x, uint64_t rows, uint64_t cols,
                                    uint64_t k, tlrt_dtype index_dtype, tlrt_buffer **values,
                                    tlrt_buffer **indices) {
  if (values) *values = nullptr;
  if (indices) *indices = nullptr;
  return guarded(__func__, [&] {
    clear_out(values, "values");
    clear_out(indices, "indices");
    const uint32_t dt = dtype_bits(index_dtype);
    const Buffer &X = select_input(x, rows, cols, dt);
    if (k > cols)
      fail(TLRT_ERR_INVALID_ARGUMENT, "argument k = %llu is greater than argument cols = %llu",
           (ull)k, (ull)cols);
    const uint64_t n = rows * k;  // <= rows * cols: no overflow
    Owned v = new_buffer(X.dev, n);
    Owned i = new_buffer(X.dev, n, (tlrt_dtype)dt);  // I32 or I64 (checked)
    if (n > 0)
      TLRT_DISPATCH(X.dev, topk_rows, X.dev.ordinal, X.data, rows, cols, k,
                    dt == (uint32_t)TLRT_DTYPE_I64, v->data, (void *)i->data);
    *values = v.release();
    *indices = i.release();
  });
}


TLRT_API tlrt_status tlrt_reduce_sum(const tlrt_buffer *x, tlrt_buffer **out) {
  return whole(__func__, false, x, out);
}

TLRT_API tlrt_status tlrt_reduce_mean(const tlrt_buffer *x, tlrt_buffer **out) {
  return whole(__func__, true, x, out);
}

TLRT_API tlrt_status tlrt_reduce_sum_axis0(const tlrt_buffer *x, uint64_t rows, uint64_t cols,
                                           tlrt_buffer **out) {
  return matrix(__func__, red::Op::Sum, 0, x, rows, cols, out);
}

TLRT_API tlrt_status tlrt_reduce_sum_axis1(const tlrt_buffer *x, uint64_t rows, uint64_t cols,
                                           tlrt_buffer **out) {
  return matrix(__func__, red::Op::Sum, 1, x, rows, cols, out);
}

TLRT_API tlrt_status tlrt_reduce_max_axis0(const tlrt_buffer *x, uint64_t rows, uint64_t cols,
                                           tlrt_buffer **out) {
  return matrix(__func__, red::Op::Max, 0, x, rows, cols, out);
}

TLRT_API tlrt_status tlrt_reduce_max_axis1(const tlrt_buffer *x, uint64_t rows, uint64_t cols,
                                           tlrt_buffer **out) {
  return matrix(__func__, red::Op::Max, 1, x, rows, cols, out);
}

TLRT_API tlrt_status tlrt_reduce_sum_axis(const tlrt_buffer *x, const uint64_t *dims,
                                          uint32_t rank, uint32_t axis, tlrt_buffer **out) {
  if (out) *out = nullptr;
  return guarded(__func__, [&] {
    clear_out(out, "out");
    const Buffer &X = input(x, "x");
    if (rank == 0 || rank > red::kMaxRank)
      fail(TLRT_ERR_INVALID_ARGUMENT, "argument rank = %u must be between 1 and 8", rank);
    if (dims == nullptr) fail(TLRT_ERR_NULL_ARGUMENT, "argument dims is NULL");
    if (axis >= rank)
      fail(TLRT_ERR_INDEX, "argument axis = %u is not an axis of a buffer of argument rank = %u",
           axis, rank);
    uint64_t n = 0;
    const bool fits = exact_product(dims, rank, &n);
    if (!fits || n != X.size)
      fail(TLRT_ERR_SHAPE, "argument x has %llu elements, but the product of argument dims is %s",
           (ull)X.size, count_str(n, fits).c_str());
    uint64_t rest[red::kMaxRank];
    uint32_t r = 0;
    for (uint32_t i = 0; i < rank; ++i)
      if (i != axis) rest[r++] = dims[i];
    uint64_t nout = 0;
    const bool out_fits = exact_product(rest, r, &nout);  // before nout is read
    check_output_count(nout, out_fits, "dims");
    Owned y = new_buffer(X.dev, nout);
    if (nout != 0) {  // then every factor fits: outer * inner == nout
      uint64_t outer = 1, inner = 1;
      for (uint32_t i = 0; i < axis; ++i) outer *= dims[i];
      for (uint32_t i = axis + 1; i < rank; ++i) inner *= dims[i];
      run(X, red::Op::Sum, outer, dims[axis], inner, 1.0f, *y);
    }
    *out = y.release();
  });
}

TLRT_API tlrt_status tlrt_reduce_from_broadcast(const tlrt_buffer *dout, const uint64_t *in_dims,
                                                uint32_t in_rank, const uint64_t *out_dims,
                                                uint32_t out_rank, const uint32_t *axis_map,
                                                tlrt_buffer **out) {
  if (out) *out = nullptr;
  return guarded(__func__, [&] {
    clear_out(out, "out");
    const Buffer &D = input(dout, "dout");
    const BroadcastShape v = validate_broadcast(BroadcastSide::Adjoint, D, "dout", in_dims,
                                                in_rank, out_dims, out_rank, axis_map);
    Owned y = new_buffer(D.dev, v.nin);
    if (v.nin != 0) {
      if (D.size == 0)
        TLRT_DISPATCH(D.dev, fill, D.dev.ordinal, y->data, 0.0f, v.nin);
      else
        plan_broadcast(D, in_dims, in_rank, out_dims, out_rank, axis_map, v, *y);
    }
    *out = y.release();
  });
}

}  // extern "C"
