// Attention entry points (abi/tlrt_attention.h): validate, allocate the outputs, handle the empty
// cases, resolve the call's precision once (call_precision: Exact with the determinism switch on,
// else Tf32 with allow_tf32 on, else SplitTf32) and dispatch with it. The backends see bh, n >= 1,
// d <= 256, n and bh below 2^31.
#include <string>

#include "abi/tlrt_attention.h"
#include "core/backend/attention.hpp"
#include "core/backend/memory.hpp"
#include "core/buffer.hpp"
#include "core/error.hpp"
#include "core/settings.hpp"
#include "core/shape_check.hpp"

using namespace tlrt;

namespace {

using ull = unsigned long long;
constexpr uint64_t kMaxDim = 0x7FFFFFFFull;  // kernel grid limit for n and bh

// Everything the entry points share: the inputs q, k, v, the optional mask, and the scalars.
struct Common {
  const Buffer *Q, *K, *V, *M;
  attn::Problem p;
};

Common validate(const tlrt_buffer *q, const tlrt_buffer *k, const tlrt_buffer *v,
                const tlrt_buffer *mask, uint64_t bh, uint64_t n, uint64_t d, double scale,
                bool causal, double mask_fill) {
  Common c{};
  c.Q = &input(q, "q");
  c.K = &input(k, "k");
  c.V = &input(v, "v");
  c.M = mask ? &input(mask, "mask") : nullptr;
  same_device(*c.Q, "q", *c.K, "k");
  same_device(*c.Q, "q", *c.V, "v");
  if (c.M) same_device(*c.Q, "q", *c.M, "mask");
  uint64_t qn = 0;
  const bool fits = product3(bh, n, d, &qn);
  if (!fits || qn != c.Q->size)
    fail(TLRT_ERR_SHAPE,
         "argument q has %llu elements, but argument bh * argument n * argument d = %llu * %llu * "
         "%llu = %s",
         (ull)c.Q->size, (ull)bh, (ull)n, (ull)d,
         fits ? std::to_string(qn).c_str() : "beyond 64 bits");
  same_size(*c.Q, "q", *c.K, "k");
  same_size(*c.Q, "q", *c.V, "v");
  if (c.M) {
    uint64_t full = 0, one = 0;
    const bool ffit = product3(bh, n, n, &full), ofit = product3(1, n, n, &one);
    const bool is_full = ffit && c.M->size == full, is_one = ofit && c.M->size == one;
    if (!is_full && !is_one)
      fail(TLRT_ERR_SHAPE,
           "argument mask has %llu elements, but it must have argument bh * argument n * "
           "argument n = %s or argument n * argument n = %s elements",
           (ull)c.M->size, ffit ? std::to_string(full).c_str() : "beyond 64 bits",
           ofit ? std::to_string(one).c_str() : "beyond 64 bits");
    c.p.mask_stride = is_full && bh > 1 ? n * n : 0;
  }
  if (d > attn::kMaxD)
    fail(TLRT_ERR_INVALID_ARGUMENT, "argument d = %llu exceeds the supported head dimension 256",
         (ull)d);
  if (n > kMaxDim || bh > kMaxDim)
    fail(TLRT_ERR_INVALID_ARGUMENT,
         "argument n = %llu and argument bh = %llu must both be at most 2^31 - 1", (ull)n, (ull)bh);
  // The host-scalar rule; mask_fill = -inf (exact exclusion) is the one admitted infinity.
  c.p.scale = host_scalar(scale, "scale");
  c.p.fill = host_scalar(mask_fill, "mask_fill", HostInf::Negative);
  c.p.bh = bh;
  c.p.n = n;
  c.p.d = d;
  c.p.mask = c.M ? c.M->data : nullptr;
  c.p.causal = causal;
  return c;
}

// The seeds' single-gradient entry points: forward into scratch, then the one gradient.
enum class Which { Q, K, V };

tlrt_status single_bwd(const char *fn, Which which, const tlrt_buffer *q, const tlrt_buffer *k,
                       const tlrt_buffer *v, const tlrt_buffer *mask, const tlrt_buffer *dout,
                       uint64_t bh, uint64_t n, uint64_t d, double scale, bool causal,
                       double mask_fill, tlrt_buffer **grad, const char *grad_name) {
  if (grad) *grad = nullptr;
  return guarded(fn, [&] {
    clear_out(grad, grad_name);
    const Buffer &DO = input(dout, "dout");
    const Common c = validate(q, k, v, mask, bh, n, d, scale, causal, mask_fill);
    same_device(*c.Q, "q", DO, "dout");
    same_size(*c.Q, "q", DO, "dout");
    const Dev dev = c.Q->dev;
    Owned G = new_buffer(dev, c.Q->size);
    if (c.Q->size != 0) {
      const Precision prec = call_precision();  // one mode for the forward and the backward
      Owned O = new_buffer(dev, c.Q->size);
      Owned L = new_buffer(dev, bh * n);
      TLRT_DISPATCH(dev, attention_fwd, dev.ordinal, c.p, c.Q->data, c.K->data, c.V->data, prec,
                    O->data, L->data);
      TLRT_DISPATCH(dev, attention_bwd, dev.ordinal, c.p, c.Q->data, c.K->data, c.V->data, O->data,
                    DO.data, L->data, prec, which == Which::Q ? G->data : nullptr,
                    which == Which::K ? G->data : nullptr, which == Which::V ? G->data : nullptr);
    }
    *grad = G.release();
  });
}

}  // namespace

extern "C" {

TLRT_API tlrt_status tlrt_flash_attention_fwd(const tlrt_buffer *q, const tlrt_buffer *k,
                                              const tlrt_buffer *v, const tlrt_buffer *mask,
                                              uint64_t bh, uint64_t n, uint64_t d, double scale,
                                              bool causal, double mask_fill, tlrt_buffer **out,
                                              tlrt_buffer **lse) {
  if (out) *out = nullptr;
  if (lse) *lse = nullptr;
  return guarded(__func__, [&] {
    clear_out(out, "out");
    clear_out(lse, "lse");
    const Common c = validate(q, k, v, mask, bh, n, d, scale, causal, mask_fill);
    const Dev dev = c.Q->dev;
    Owned O = new_buffer(dev, c.Q->size);
    Owned L = new_buffer(dev, bh * n);
    if (bh != 0 && n != 0)
      TLRT_DISPATCH(dev, attention_fwd, dev.ordinal, c.p, c.Q->data, c.K->data, c.V->data,
                    call_precision(), O->data, L->data);
    *out = O.release();
    *lse = L.release();
  });
}

TLRT_API tlrt_status tlrt_flash_attention_bwd(
    const tlrt_buffer *q, const tlrt_buffer *k, const tlrt_buffer *v, const tlrt_buffer *mask,
    const tlrt_buffer *dout, const tlrt_buffer *out, const tlrt_buffer *lse, uint64_t bh,
    uint64_t n, uint64_t d, double scale, bool causal, double mask_fill, tlrt_buffer **dq,
    tlrt_buffer **dk, tlrt_buffer **dv) {
  if (dq) *dq = nullptr;
  if (dk) *dk = nullptr;
  if (dv) *dv = nullptr;
  return guarded(__func__, [&] {
    clear_out(dq, "dq");
    clear_out(dk, "dk");
    clear_out(dv, "dv");
    const Buffer &DO = input(dout, "dout");
    const Buffer &O = input(out, "out");
    const Buffer &L = input(lse, "lse");
    const Common c = validate(q, k, v, mask, bh, n, d, scale, causal, mask_fill);
    same_device(*c.Q, "q", DO, "dout");
    same_device(*c.Q, "q", O, "out");
    same_device(*c.Q, "q", L, "lse");
    same_size(*c.Q, "q", DO, "dout");
    same_size(*c.Q, "q", O, "out");
    if (L.size != bh * n)  // bh * n fits: both are below 2^31
      fail(TLRT_ERR_SHAPE,
           "argument lse has %llu elements, but argument bh * argument n = %llu * %llu = %llu",
           (ull)L.size, (ull)bh, (ull)n, (ull)(bh * n));
    const Dev dev = c.Q->dev;
    Owned DQ = new_buffer(dev, c.Q->size);
    Owned DK = new_buffer(dev, c.Q->size);
    Owned DV = new_buffer(dev, c.Q->size);
    if (c.Q->size != 0)
      TLRT_DISPATCH(dev, attention_bwd, dev.ordinal, c.p, c.Q->data, c.K->data, c.V->data, O.data,
                    DO.data, L.data, call_precision(), DQ->data, DK->data, DV->data);
    *dq = DQ.release();
    *dk = DK.release();
    *dv = DV.release();
  });
}

TLRT_API tlrt_status tlrt_flash_attention_bwd_q(const tlrt_buffer *q, const tlrt_buffer *k,
                                                const tlrt_buffer *v, const tlrt_buffer *mask,
                                                const tlrt_buffer *dout, uint64_t bh, uint64_t n,
                                                uint64_t d, double scale, bool causal,
                                                double mask_fill, tlrt_buffer **dq) {
  return single_bwd(__func__, Which::Q, q, k, v, mask, dout, bh, n, d, scale, causal, mask_fill,
                    dq, "dq");
}

TLRT_API tlrt_status tlrt_flash_attention_bwd_k(const tlrt_buffer *q, const tlrt_buffer *k,
                                                const tlrt_buffer *v, const tlrt_buffer *mask,
                                                const tlrt_buffer *dout, uint64_t bh, uint64_t n,
                                                uint64_t d, double scale, bool causal,
                                                double mask_fill, tlrt_buffer **dk) {
  return single_bwd(__func__, Which::K, q, k, v, mask, dout, bh, n, d, scale, causal, mask_fill,
                    dk, "dk");
}

TLRT_API tlrt_status tlrt_flash_attention_bwd_v(const tlrt_buffer *q, const tlrt_buffer *k,
                                                const tlrt_buffer *v, const tlrt_buffer *mask,
                                                const tlrt_buffer *dout, uint64_t bh, uint64_t n,
                                                uint64_t d, double scale, bool causal,
                                                double mask_fill, tlrt_buffer **dv) {
  return single_bwd(__func__, Which::V, q, k, v, mask, dout, bh, n, d, scale, causal, mask_fill,
                    dv, "dv");
}

}  // extern "C"
