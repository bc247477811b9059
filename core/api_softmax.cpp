// Softmax entry points (abi/tlrt_softmax.h): validate, allocate the output, dispatch.
// The empty cases (rows == 0 or cols == 0) end here with an empty output; the backends only see
// rows, cols >= 1. The determinism switch is not consulted: the one fixed tree is both the
// deterministic and the fast path.
#include <string>

#include "abi/tlrt_softmax.h"
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

}  // namespace

extern "C" {

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
