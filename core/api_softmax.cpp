// Softmax entry points (abi/tlrt_softmax.h): validate, allocate the output, dispatch.
// The empty cases (rows == 0 or cols == 0) end here with an empty output; the backends only see
// rows, cols >= 1. The determinism switch is not consulted: the one fixed tree is both the
// deterministic and the fast path.
#include <string>

#include "abi/tlrt_softmax.h"
#include "core/backend/memory.hpp"
#include "core/backend/softmax.hpp"
#include "core/buffer.hpp"
#include "core/error.hpp"
#include "core/shape_check.hpp"

using namespace tlrt;

namespace {

using ull = unsigned long long;

// One input x and an optional second input b (mask of the masked softmax, nullptr otherwise).
tlrt_status forward(const char *fn, row::Kind kind, const tlrt_buffer *x, const tlrt_buffer *mask,
                    uint64_t rows, uint64_t cols, tlrt_buffer **out) {
  if (out) *out = nullptr;
  return guarded(fn, [&] {
    clear_out(out, "out");
    const Buffer &X = input(x, "x");
    const Buffer *M = nullptr;
    if (kind == row::Kind::Masked) {
      M = &input(mask, "mask");
      same_device(X, "x", *M, "mask");
    }
    check_matrix(X, "x", rows, cols);
    if (M != nullptr) same_size(X, "x", *M, "mask");
    Owned y = new_buffer(X.dev, X.size);
    if (X.size != 0)
      TLRT_DISPATCH(X.dev, softmax_fwd, X.dev.ordinal, kind, X.data, M ? M->data : nullptr, rows,
                    cols, y->data);
    *out = y.release();
  });
}

tlrt_status backward(const char *fn, bool log, const tlrt_buffer *y, const tlrt_buffer *g,
                     uint64_t rows, uint64_t cols, tlrt_buffer **out) {
  if (out) *out = nullptr;
  return guarded(fn, [&] {
    clear_out(out, "out");
    const Buffer &Y = input(y, "y");
    const Buffer &G = input(g, "g");
    same_device(Y, "y", G, "g");
    check_matrix(Y, "y", rows, cols);
    same_size(Y, "y", G, "g");
    Owned dx = new_buffer(Y.dev, Y.size);
    if (Y.size != 0)
      TLRT_DISPATCH(Y.dev, softmax_bwd, Y.dev.ordinal, log, Y.data, G.data, rows, cols, dx->data);
    *out = dx.release();
  });
}

void need(const void *p, const char *name) {
  if (p == nullptr) fail(TLRT_ERR_NULL_ARGUMENT, "argument %s is NULL", name);
}

// The backends' ignore value: INT64_MIN for "none" (no int ignore_index maps to it).
int64_t backend_ignore(int ignore_index) {
  return ignore_index == TLRT_CROSS_ENTROPY_NO_IGNORE ? row::kNoIgnore : (int64_t)ignore_index;
}

// Labels must hold rows entries.
void check_labels(const Buffer &L, uint64_t rows) {
  if (L.size != rows)
    fail(TLRT_ERR_SHAPE, "argument labels has %llu elements, argument rows = %llu",
         (ull)L.size, (ull)rows);
}

}  // namespace

extern "C" {

TLRT_API tlrt_status tlrt_cross_entropy_fwd(const tlrt_buffer *logits, const tlrt_buffer *labels,
                                            uint64_t rows, uint64_t classes,
                                            int ignore_index, tlrt_buffer **loss,
                                            tlrt_buffer **lse) {
  if (loss) *loss = nullptr;
  if (lse) *lse = nullptr;
  return guarded(__func__, [&] {
    clear_out(loss, "loss");
    clear_out(lse, "lse");
    need(logits, "logits");
    need(labels, "labels");
    const Buffer &X = input(logits, "logits");
    const Buffer &L = index_input(labels, "labels");
    same_device(X, "logits", L, "labels");
    check_matrix(X, "logits", rows, classes, "rows", "classes");
    check_labels(L, rows);
    Owned st = new_buffer(X.dev, 2 * rows);
    Owned ls = new_buffer(X.dev, 1);
    if (rows == 0)
      TLRT_DISPATCH(X.dev, fill, X.dev.ordinal, ls->data, row::div_rn(0.0f, 0.0f), 1);
    else
      TLRT_DISPATCH(X.dev, cross_entropy_fwd, X.dev.ordinal, X.data, L.data,
                    L.dtype == TLRT_DTYPE_I64, rows, classes, backend_ignore(ignore_index), ls->data,
                    st->data);
    *loss = ls.release();
    *lse = st.release();
  });
}

TLRT_API tlrt_status tlrt_cross_entropy_bwd(const tlrt_buffer *logits, const tlrt_buffer *labels,
                                            const tlrt_buffer *lse, const tlrt_buffer *grad_loss,
                                            uint64_t rows, uint64_t classes,
                                            int ignore_index, tlrt_buffer **dlogits) {
  if (dlogits) *dlogits = nullptr;
  return guarded(__func__, [&] {
    clear_out(dlogits, "dlogits");
    need(logits, "logits");
    need(labels, "labels");
    need(lse, "lse");
    need(grad_loss, "grad_loss");
    const Buffer &X = input(logits, "logits");
    const Buffer &L = index_input(labels, "labels");
    const Buffer &S = input(lse, "lse");
    const Buffer &G = input(grad_loss, "grad_loss");
    same_device(X, "logits", L, "labels");
    same_device(X, "logits", S, "lse");
    same_device(X, "logits", G, "grad_loss");
    check_matrix(X, "logits", rows, classes, "rows", "classes");
    check_labels(L, rows);
    if (S.size != 2 * rows)
      fail(TLRT_ERR_SHAPE, "argument lse has %llu elements, expected 2 * rows = %llu (m and "
           "log s per row, as tlrt_cross_entropy_fwd returns it)", (ull)S.size, (ull)(2 * rows));
    if (G.size != 1)
      fail(TLRT_ERR_SHAPE, "argument grad_loss has %llu elements, expected 1", (ull)G.size);
    Owned dx = new_buffer(X.dev, X.size);
    if (X.size != 0)
      TLRT_DISPATCH(X.dev, cross_entropy_bwd, X.dev.ordinal, X.data, L.data,
                    L.dtype == TLRT_DTYPE_I64, S.data, G.data, rows, classes,
                    backend_ignore(ignore_index), dx->data);
    *dlogits = dx.release();
  });
}


TLRT_API tlrt_status tlrt_softmax(const tlrt_buffer *x, uint64_t rows, uint64_t cols,
                                  tlrt_buffer **out) {
  return forward(__func__, row::Kind::Softmax, x, nullptr, rows, cols, out);
}

TLRT_API tlrt_status tlrt_log_softmax(const tlrt_buffer *x, uint64_t rows, uint64_t cols,
                                      tlrt_buffer **out) {
  return forward(__func__, row::Kind::LogSoftmax, x, nullptr, rows, cols, out);
}

TLRT_API tlrt_status tlrt_hard_masked_softmax_by_row(const tlrt_buffer *x, const tlrt_buffer *mask,
                                                     uint64_t rows, uint64_t cols,
                                                     tlrt_buffer **out) {
  return forward(__func__, row::Kind::Masked, x, mask, rows, cols, out);
}

TLRT_API tlrt_status tlrt_softmax_bwd(const tlrt_buffer *y, const tlrt_buffer *g, uint64_t rows,
                                      uint64_t cols, tlrt_buffer **out) {
  return backward(__func__, false, y, g, rows, cols, out);
}

TLRT_API tlrt_status tlrt_log_softmax_bwd(const tlrt_buffer *y, const tlrt_buffer *g, uint64_t rows,
                                          uint64_t cols, tlrt_buffer **out) {
  return backward(__func__, true, y, g, rows, cols, out);
}

}  // extern "C"
