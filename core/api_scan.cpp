// Selective-scan entry points (abi/tlrt_scan.h): validate, allocate the outputs, handle the empty
// cases, dispatch. The backends only see T >= 1 and D >= 1. The determinism switch is not
// consulted: the one documented order (and tree) is both the deterministic and the fast path.
#include <string>

#include "abi/tlrt_scan.h"
#include "core/backend/memory.hpp"
#include "core/backend/scan.hpp"
#include "core/buffer.hpp"
#include "core/error.hpp"

using namespace tlrt;

namespace {

using ull = unsigned long long;

// X (named `name`) must have exactly seq_len * state elements; a product beyond 64 bits never
// matches.
void check_seq(const Buffer &X, const char *name, uint64_t T, uint64_t D) {
  uint64_t n = 0;
  const bool fits = T == 0 || D == 0 || !__builtin_mul_overflow(T, D, &n);
  if (!fits || n != X.size)
    fail(TLRT_ERR_SHAPE,
         "argument %s has %llu elements, but argument seq_len * argument state = %llu * %llu = %s",
         name, (ull)X.size, (ull)T, (ull)D, fits ? std::to_string(n).c_str() : "beyond 64 bits");
}

void check_state(const Buffer &V, const char *name, uint64_t D) {
  if (V.size != D)
    fail(TLRT_ERR_SHAPE, "argument %s has %llu elements, but argument state = %llu", name,
         (ull)V.size, (ull)D);
}

// The inputs shared by the four entry points, validated in argument order. var: A and B are
// (T, D) like X, otherwise D values.
struct Inputs {
  const Buffer *A, *B, *X, *h0;
};

Inputs check_inputs(const tlrt_buffer *a, const tlrt_buffer *b, const tlrt_buffer *x,
                    const tlrt_buffer *h, uint64_t T, uint64_t D, bool var) {
  const Buffer &A = input(a, "A");
  const Buffer &B = input(b, "B");
  const Buffer &X = input(x, "X");
  const Buffer &H = input(h, "h0");
  same_device(A, "A", B, "B");
  same_device(A, "A", X, "X");
  same_device(A, "A", H, "h0");
  check_seq(X, "X", T, D);
  if (var) {
    same_size(A, "A", X, "X");
    same_size(B, "B", X, "X");
  } else {
    check_state(A, "A", D);
    check_state(B, "B", D);
  }
  check_state(H, "h0", D);
  return {&A, &B, &X, &H};
}

tlrt_status forward(const char *fn, const tlrt_buffer *A, const tlrt_buffer *B,
                    const tlrt_buffer *X, const tlrt_buffer *h0, uint64_t T, uint64_t D,
                    tlrt_buffer **out, bool var) {
  if (out) *out = nullptr;
  return guarded(fn, [&] {
    clear_out(out, "out");
    const Inputs in = check_inputs(A, B, X, h0, T, D, var);
    const Dev dev = in.X->dev;
    Owned O = new_buffer(dev, in.X->size);
    if (T != 0 && D != 0) {
      if (var)
        TLRT_DISPATCH(dev, scan_var_fwd, dev.ordinal, in.A->data, in.B->data, in.X->data,
                      in.h0->data, T, D, O->data);
      else
        TLRT_DISPATCH(dev, scan_diag_fwd, dev.ordinal, in.A->data, in.B->data, in.X->data,
                      in.h0->data, T, D, O->data);
    }
    *out = O.release();
  });
}

tlrt_status backward(const char *fn, const tlrt_buffer *A, const tlrt_buffer *B,
                     const tlrt_buffer *X, const tlrt_buffer *h0, const tlrt_buffer *out,
                     const tlrt_buffer *dY, uint64_t T, uint64_t D, tlrt_buffer **dA,
                     tlrt_buffer **dB, tlrt_buffer **dX, tlrt_buffer **dH0, bool var) {
  if (dA) *dA = nullptr;
  if (dB) *dB = nullptr;
  if (dX) *dX = nullptr;
  if (dH0) *dH0 = nullptr;
  return guarded(fn, [&] {
    clear_out(dA, "dA");
    clear_out(dB, "dB");
    clear_out(dX, "dX");
    clear_out(dH0, "dH0");
    const Inputs in = check_inputs(A, B, X, h0, T, D, var);
    const Buffer &O = input(out, "out");
    const Buffer &G = input(dY, "dY");
    same_device(*in.A, "A", O, "out");
    same_device(*in.A, "A", G, "dY");
    same_size(O, "out", *in.X, "X");
    same_size(G, "dY", *in.X, "X");
    const Dev dev = in.X->dev;
    Owned GA = new_buffer(dev, in.A->size);
    Owned GB = new_buffer(dev, in.B->size);
    Owned GX = new_buffer(dev, in.X->size);
    Owned GH = new_buffer(dev, D);
    if (T == 0 && D != 0) {  // sums over no steps (diag_var's dA and dB are empty then)
      if (!var) {
        TLRT_DISPATCH(dev, fill, dev.ordinal, GA->data, 0.0f, D);
        TLRT_DISPATCH(dev, fill, dev.ordinal, GB->data, 0.0f, D);
      }
      TLRT_DISPATCH(dev, fill, dev.ordinal, GH->data, 0.0f, D);
    } else if (T != 0 && D != 0) {
      if (var)
        TLRT_DISPATCH(dev, scan_var_bwd, dev.ordinal, in.A->data, in.B->data, in.X->data,
                      in.h0->data, O.data, G.data, T, D, GA->data, GB->data, GX->data, GH->data);
      else
        TLRT_DISPATCH(dev, scan_diag_bwd, dev.ordinal, in.A->data, in.B->data, in.X->data,
                      in.h0->data, O.data, G.data, T, D, GA->data, GB->data, GX->data, GH->data);
    }
    *dA = GA.release();
    *dB = GB.release();
    *dX = GX.release();
    *dH0 = GH.release();
  });
}

}  // namespace

extern "C" {

TLRT_API tlrt_status tlrt_selective_scan_diag_fwd(const tlrt_buffer *A, const tlrt_buffer *B,
                                                  const tlrt_buffer *X, const tlrt_buffer *h0,
                                                  uint64_t seq_len, uint64_t state,
                                                  tlrt_buffer **out) {
  return forward(__func__, A, B, X, h0, seq_len, state, out, false);
}

TLRT_API tlrt_status tlrt_selective_scan_diag_bwd(const tlrt_buffer *A, const tlrt_buffer *B,
                                                  const tlrt_buffer *X, const tlrt_buffer *h0,
                                                  const tlrt_buffer *out, const tlrt_buffer *dY,
                                                  uint64_t seq_len, uint64_t state,
                                                  tlrt_buffer **dA, tlrt_buffer **dB,
                                                  tlrt_buffer **dX, tlrt_buffer **dH0) {
  return backward(__func__, A, B, X, h0, out, dY, seq_len, state, dA, dB, dX, dH0, false);
}

TLRT_API tlrt_status tlrt_selective_scan_diag_var_fwd(const tlrt_buffer *A, const tlrt_buffer *B,
                                                      const tlrt_buffer *X, const tlrt_buffer *h0,
                                                      uint64_t seq_len, uint64_t state,
                                                      tlrt_buffer **out) {
  return forward(__func__, A, B, X, h0, seq_len, state, out, true);
}

TLRT_API tlrt_status tlrt_selective_scan_diag_var_bwd(const tlrt_buffer *A, const tlrt_buffer *B,
                                                      const tlrt_buffer *X, const tlrt_buffer *h0,
                                                      const tlrt_buffer *out,
                                                      const tlrt_buffer *dY, uint64_t seq_len,
                                                      uint64_t state, tlrt_buffer **dA,
                                                      tlrt_buffer **dB, tlrt_buffer **dX,
                                                      tlrt_buffer **dH0) {
  return backward(__func__, A, B, X, h0, out, dY, seq_len, state, dA, dB, dX, dH0, true);
}

}  // extern "C"
