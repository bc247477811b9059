// Layer-norm and RMS-norm entry points (abi/tlrt_layer_norm.h): validate, allocate the outputs,
// handle the empty cases, dispatch. The backends only see rows, cols >= 1. The determinism switch
// is not consulted: the one fixed tree is both the deterministic and the fast path.
#include <cmath>
#include <limits>
#include <string>

#include "abi/tlrt_layer_norm.h"
#include "core/backend/layer_norm.hpp"
#include "core/backend/memory.hpp"
#include "core/buffer.hpp"
#include "core/error.hpp"
#include "core/shape_check.hpp"

using namespace tlrt;

namespace {

using ull = unsigned long long;

// B (named `name`) must have exactly `count` elements, the value of argument `count_name`.
void check_vector(const Buffer &B, const char *name, uint64_t count, const char *count_name) {
  if (B.size != count)
    fail(TLRT_ERR_SHAPE, "argument %s has %llu elements, but argument %s = %llu", name, (ull)B.size,
         count_name, (ull)count);
}

// eps: the host-scalar rule, then eps >= 0 (-0 included).
float check_eps(double eps) {
  const float e = host_scalar(eps, "eps");
  if (!(eps >= 0.0)) fail(TLRT_ERR_INVALID_ARGUMENT, "argument eps = %g must be >= 0", eps);
  return e;
}

}  // namespace

extern "C" {

TLRT_API tlrt_status tlrt_layer_norm_fwd(const tlrt_buffer *x, const tlrt_buffer *gamma,
                                         const tlrt_buffer *beta, uint64_t rows, uint64_t cols,
                                         double eps, tlrt_buffer **y, tlrt_buffer **mean,
                                         tlrt_buffer **inv_std) {
  if (y) *y = nullptr;
  if (mean) *mean = nullptr;
  if (inv_std) *inv_std = nullptr;
  return guarded(__func__, [&] {
    clear_out(y, "y");
    clear_out(mean, "mean");
    clear_out(inv_std, "inv_std");
    const Buffer &X = input(x, "x");
    const Buffer &G = input(gamma, "gamma");
    const Buffer &B = input(beta, "beta");
    same_device(X, "x", G, "gamma");
    same_device(X, "x", B, "beta");
    check_matrix(X, "x", rows, cols);
    check_vector(G, "gamma", cols, "cols");
    check_vector(B, "beta", cols, "cols");
    const float e = check_eps(eps);
    if (rows > TLRT_MAX_ELEMENTS)  // only possible with cols == 0
      fail(TLRT_ERR_OVERFLOW,
           "argument rows = %llu: mean and inv_std would have more than TLRT_MAX_ELEMENTS (2^60) "
           "elements",
           (ull)rows);
    Owned Y = new_buffer(X.dev, X.size);
    Owned M = new_buffer(X.dev, rows);
    Owned S = new_buffer(X.dev, rows);
    if (rows != 0 && cols == 0) {  // the mean of nothing: 0 / 0
      const float nan = std::numeric_limits<float>::quiet_NaN();
      TLRT_DISPATCH(X.dev, fill, X.dev.ordinal, M->data, nan, rows);
      TLRT_DISPATCH(X.dev, fill, X.dev.ordinal, S->data, nan, rows);
    } else if (rows != 0) {
      TLRT_DISPATCH(X.dev, layer_norm_fwd, X.dev.ordinal, X.data, G.data, B.data, rows, cols, e,
                    Y->data, M->data, S->data);
    }
    *y = Y.release();
    *mean = M.release();
    *inv_std = S.release();
  });
}

TLRT_API tlrt_status tlrt_layer_norm_bwd(const tlrt_buffer *dy, const tlrt_buffer *x,
                                         const tlrt_buffer *mean, const tlrt_buffer *inv_std,
                                         const tlrt_buffer *gamma, uint64_t rows, uint64_t cols,
                                         tlrt_buffer **dx, tlrt_buffer **dgamma,
                                         tlrt_buffer **dbeta) {
  if (dx) *dx = nullptr;
  if (dgamma) *dgamma = nullptr;
  if (dbeta) *dbeta = nullptr;
  return guarded(__func__, [&] {
    clear_out(dx, "dx");
    clear_out(dgamma, "dgamma");
    clear_out(dbeta, "dbeta");
    const Buffer &DY = input(dy, "dy");
    const Buffer &X = input(x, "x");
    const Buffer &M = input(mean, "mean");
    const Buffer &S = input(inv_std, "inv_std");
    const Buffer &G = input(gamma, "gamma");
    same_device(DY, "dy", X, "x");
    same_device(DY, "dy", M, "mean");
    same_device(DY, "dy", S, "inv_std");
    same_device(DY, "dy", G, "gamma");
    check_matrix(DY, "dy", rows, cols);
    same_size(DY, "dy", X, "x");
    check_vector(M, "mean", rows, "rows");
    check_vector(S, "inv_std", rows, "rows");
    check_vector(G, "gamma", cols, "cols");
    Owned DX = new_buffer(DY.dev, DY.size);
    Owned DG = new_buffer(DY.dev, cols);
    Owned DB = new_buffer(DY.dev, cols);
    if (rows == 0 && cols != 0) {  // sums over no rows
      TLRT_DISPATCH(DY.dev, fill, DY.dev.ordinal, DG->data, 0.0f, cols);
      TLRT_DISPATCH(DY.dev, fill, DY.dev.ordinal, DB->data, 0.0f, cols);
    } else if (rows != 0 && cols != 0) {
      TLRT_DISPATCH(DY.dev, layer_norm_bwd, DY.dev.ordinal, DY.data, X.data, M.data, S.data, G.data,
                    rows, cols, DX->data, DG->data, DB->data);
    }
    *dx = DX.release();
    *dgamma = DG.release();
    *dbeta = DB.release();
  });
}

// ---- RMS norm ------------------------------------------------------------------------------

TLRT_API tlrt_status tlrt_rms_norm_fwd(const tlrt_buffer *x, const tlrt_buffer *gamma,
                                       uint64_t rows, uint64_t cols, double eps, tlrt_buffer **y,
                                       tlrt_buffer **inv_rms) {
  if (y) *y = nullptr;
  if (inv_rms) *inv_rms = nullptr;
  return guarded(__func__, [&] {
    clear_out(y, "y");
    clear_out(inv_rms, "inv_rms");
    const Buffer &X = input(x, "x");
    const Buffer *G = gamma ? &input(gamma, "gamma") : nullptr;  // NULL: no scale
    if (G) same_device(X, "x", *G, "gamma");
    check_matrix(X, "x", rows, cols);
    if (G) check_vector(*G, "gamma", cols, "cols");
    const float e = check_eps(eps);
    if (rows > TLRT_MAX_ELEMENTS)  // only possible with cols == 0
      fail(TLRT_ERR_OVERFLOW,
           "argument rows = %llu: inv_rms would have more than TLRT_MAX_ELEMENTS (2^60) elements",
           (ull)rows);
    Owned Y = new_buffer(X.dev, X.size);
    Owned S = new_buffer(X.dev, rows);
    if (rows != 0 && cols == 0) {  // the mean square of nothing: 0 / 0
      TLRT_DISPATCH(X.dev, fill, X.dev.ordinal, S->data, std::numeric_limits<float>::quiet_NaN(),
                    rows);
    } else if (rows != 0) {
      TLRT_DISPATCH(X.dev, rms_norm_fwd, X.dev.ordinal, X.data, G ? G->data : nullptr, rows, cols,
                    e, Y->data, S->data);
    }
    *y = Y.release();
    *inv_rms = S.release();
  });
}

TLRT_API tlrt_status tlrt_rms_norm_bwd(const tlrt_buffer *dy, const tlrt_buffer *x,
                                       const tlrt_buffer *gamma, const tlrt_buffer *inv_rms,
                                       uint64_t rows, uint64_t cols, tlrt_buffer **dx,
                                       tlrt_buffer **dgamma) {
  if (dx) *dx = nullptr;
  if (dgamma) *dgamma = nullptr;
  return guarded(__func__, [&] {
    clear_out(dx, "dx");
    // dgamma is required with a gamma; without one it may be NULL (no column sums).
    if (gamma || dgamma) clear_out(dgamma, "dgamma");
    const Buffer &DY = input(dy, "dy");
    const Buffer &X = input(x, "x");
    const Buffer *G = gamma ? &input(gamma, "gamma") : nullptr;
    const Buffer &S = input(inv_rms, "inv_rms");
    same_device(DY, "dy", X, "x");
    if (G) same_device(DY, "dy", *G, "gamma");
    same_device(DY, "dy", S, "inv_rms");
    check_matrix(DY, "dy", rows, cols);
    same_size(DY, "dy", X, "x");
    if (G) check_vector(*G, "gamma", cols, "cols");
    check_vector(S, "inv_rms", rows, "rows");
    Owned DX = new_buffer(DY.dev, DY.size);
    Owned DG;
    if (dgamma) DG = new_buffer(DY.dev, cols);
    if (rows == 0 && cols != 0 && dgamma) {  // sums over no rows
      TLRT_DISPATCH(DY.dev, fill, DY.dev.ordinal, DG->data, 0.0f, cols);
    } else if (rows != 0 && cols != 0) {
      TLRT_DISPATCH(DY.dev, rms_norm_bwd, DY.dev.ordinal, DY.data, X.data, G ? G->data : nullptr,
                    S.data, rows, cols, DX->data, dgamma ? DG->data : nullptr);
    }
    *dx = DX.release();
    if (dgamma) *dgamma = DG.release();
  });
}

}  // extern "C"
