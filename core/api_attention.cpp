// Attention entry points (abi/tlrt_attention.h): validate, allocate the outputs, handle the empty
// cases, resolve the call's precision once (call_precision: Exact with the determinism switch on,
// else Tf32 with allow_tf32 on, else SplitTf32) and dispatch with it. Both families reach the
// backends as one attn::Geometry: the (bh, n, d) entry points as bh sequences of one head with
// contiguous views, the geometry entry points with their views. The backends see batch, heads_q
// >= 1, d <= 256, lengths and batch * heads_q below 2^31, and gradient views that overlap neither
// each other nor any input.
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <initializer_list>
#include <string>
#include <utility>
#include <vector>

#include "abi/tlrt_attention.h"
#include "core/backend/attention.hpp"
#include "core/backend/memory.hpp"
#include "core/buffer.hpp"
#include "core/conv_geometry.hpp"
#include "core/error.hpp"
#include "core/settings.hpp"
#include "core/shape_check.hpp"

using namespace tlrt;

namespace {

using ull = unsigned long long;
constexpr uint64_t kMaxDim = 0x7FFFFFFFull;  // kernel grid limit for n and bh

// Everything the (bh, n, d) entry points share: the inputs q, k, v, the optional mask, and the
// problem as the backends take it (bh sequences of one head, contiguous views).
struct Common {
  const Buffer *Q, *K, *V, *M;
  attn::Geometry p;
};

attn::View contiguous_view(uint64_t n, uint64_t d) { return attn::View{n * d, d, d}; }

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
  c.p.batch = bh;
  c.p.hq = c.p.hkv = 1;
  c.p.nq = c.p.nk = n;
  c.p.d = d;
  c.p.q = c.p.k = c.p.v = contiguous_view(n, d);
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
      const attn::View cv = contiguous_view(n, d);
      const attn::Grads gr{which == Which::Q ? G->data : nullptr,
                           which == Which::K ? G->data : nullptr,
                           which == Which::V ? G->data : nullptr, cv, cv, cv};
      TLRT_DISPATCH(dev, attention_bwd, dev.ordinal, c.p, c.Q->data, c.K->data, c.V->data, O->data,
                    DO.data, L->data, prec, gr);
    }
    *grad = G.release();
  });
}


// ---- the geometry entry points ----------------------------------------------------------------

// The first version's layout of tlrt_attention_geometry: 19 uint64_t fields.
constexpr uint64_t kAttnGeometryV1 = offsetof(tlrt_attention_geometry, v_stride_head) + 8;
static_assert(kAttnGeometryV1 == 152 && sizeof(tlrt_attention_geometry) == kAttnGeometryV1,
              "tlrt_attention_geometry version 1 is 19 uint64_t fields (abi/tlrt_attention.h)");

// One strided view: rows (b, t, h) of d contiguous elements at off + b sb + t st + h sh.
struct ViewSpec {
  uint64_t off, sb, st, sh;
  uint64_t B, T, H, d;  // extents
  bool empty() const { return B == 0 || T == 0 || H == 0 || d == 0; }
};

ViewSpec view_of(const tlrt_attention_geometry &g, int which, uint64_t T, uint64_t H) {
  const uint64_t *f = &g.q_offset + 4 * which;  // q_*, k_*, v_*: four consecutive fields each
  return ViewSpec{f[0], f[1], f[2], f[3], g.batch, T, H, g.d};
}

// The last element a non-empty view reaches, exactly; false beyond 64 bits.
bool view_last(const ViewSpec &v, uint64_t *last) {
  uint64_t acc = v.off, t = 0;
  const uint64_t ext[3] = {v.B - 1, v.T - 1, v.H - 1}, str[3] = {v.sb, v.st, v.sh};
  for (int i = 0; i < 3; ++i)
    if (__builtin_mul_overflow(ext[i], str[i], &t) || __builtin_add_overflow(acc, t, &acc))
      return false;
  return !__builtin_add_overflow(acc, v.d - 1, last);
}

// A non-empty view must end inside its buffer (TLRT_ERR_SHAPE).
void check_view(const Buffer &X, const char *arg, const char *gname, char which,
                const ViewSpec &v) {
  if (v.empty()) return;
  uint64_t last = 0;
  const bool fits = view_last(v, &last);
  if (!fits || last >= X.size)
    fail(TLRT_ERR_SHAPE,
         "argument %s has %llu elements, but the view of argument %s (%c_offset %llu, strides "
         "batch %llu, token %llu, head %llu; extents %llu, %llu, %llu, d %llu) reaches element "
         "%s",
         arg, (ull)X.size, gname, which, (ull)v.off, (ull)v.sb, (ull)v.st, (ull)v.sh, (ull)v.B,
         (ull)v.T, (ull)v.H, (ull)v.d, fits ? std::to_string(last).c_str() : "beyond 64 bits");
}

// The header's one-to-one rule: the dimensions of extent > 1, by ascending stride, each with a
// stride at least the span of those before it (d contiguous first). For an in-bounds view no
// span overflows (each is at most its last element + 1).
bool one_to_one(const ViewSpec &v) {
  struct Dim {
    uint64_t n, s;
  };
  Dim dims[3] = {{v.T, v.st}, {v.H, v.sh}, {v.B, v.sb}};
  std::stable_sort(dims, dims + 3, [](const Dim &a, const Dim &b) { return a.s < b.s; });
  uint64_t span = v.d;
  for (const Dim &dm : dims) {
    if (dm.n <= 1) continue;
    if (dm.s < span) return false;
    span += dm.s * (dm.n - 1);
  }
  return true;
}

// The header's disjointness rule for two in-bounds non-empty views of one buffer: element ranges
// apart, or the column rule (a common token stride s, batch strides multiples of s or one
// sequence, token widths within s, and the widths' residues modulo s apart).
bool disjoint(const ViewSpec &a, const ViewSpec &b) {
  uint64_t la = 0, lb = 0;
  view_last(a, &la);
  view_last(b, &lb);
  if (la < b.off || lb < a.off) return true;
  const uint64_t s = a.st;
  if (s == 0 || b.st != s) return false;
  if ((a.B > 1 && a.sb % s != 0) || (b.B > 1 && b.sb % s != 0)) return false;
  // Token widths: (H - 1) sh + d, each at most s (the products fit: the views are in bounds).
  const uint64_t wa = (a.H - 1) * a.sh + a.d, wb = (b.H - 1) * b.sh + b.d;
  if (wa > s || wb > s) return false;
  const uint64_t ra = a.off % s, rb = b.off % s;
  const uint64_t ab = (rb + s - ra) % s, ba = (ra + s - rb) % s;  // b after a, a after b
  return ab >= wa && ba >= wb;
}

// Byte ranges of two buffers' storage meet.
bool storage_meets(const Buffer &a, const Buffer &b) {
  if (a.data == nullptr || b.data == nullptr || a.size == 0 || b.size == 0) return false;
  const uintptr_t a0 = (uintptr_t)a.data, a1 = a0 + a.bytes(), b0 = (uintptr_t)b.data,
                  b1 = b0 + b.bytes();
  return a0 < b1 && b0 < a1;
}

// What the geometry entry points share: the inputs, the copied geometry, the backends' problem.
struct General {
  const Buffer *Q, *K, *V, *M;
  tlrt_attention_geometry g;
  attn::Geometry p;
  uint64_t out_elems, lse_elems;
};

// Validates q, k, v, mask, the geometry and the scalars (the order of the header) and builds the
// backends' problem.
General validate_general(const tlrt_buffer *q, const tlrt_buffer *k, const tlrt_buffer *v,
                         const tlrt_buffer *mask, const tlrt_attention_geometry *geometry,
                         double scale, bool causal, double mask_fill,
                         std::initializer_list<std::pair<const tlrt_buffer *, const char *>>
                             more = {}) {
  General c{};
  c.Q = &input(q, "q");
  c.K = &input(k, "k");
  c.V = &input(v, "v");
  c.M = mask ? &input(mask, "mask") : nullptr;
  std::vector<const Buffer *> extra;
  for (const auto &e : more) extra.push_back(&input(e.first, e.second));
  same_device(*c.Q, "q", *c.K, "k");
  same_device(*c.Q, "q", *c.V, "v");
  if (c.M) same_device(*c.Q, "q", *c.M, "mask");
  {
    size_t i = 0;
    for (const auto &e : more) same_device(*c.Q, "q", *extra[i++], e.second);
  }
  check_geometry_struct(geometry, "tlrt_attention_geometry", kAttnGeometryV1, &c.g);
  const tlrt_attention_geometry &g = c.g;
  if (g.heads_kv == 0 || g.heads_q == 0 || g.heads_q % g.heads_kv != 0)
    fail(TLRT_ERR_INVALID_ARGUMENT,
         "argument geometry: heads_q = %llu must be a positive multiple of heads_kv = %llu",
         (ull)g.heads_q, (ull)g.heads_kv);
  if (g.d > attn::kMaxD)
    fail(TLRT_ERR_INVALID_ARGUMENT,
         "argument geometry: d = %llu exceeds the supported head dimension 256", (ull)g.d);
  uint64_t bh = 0;
  if (g.len_q > kMaxDim || g.len_k > kMaxDim ||
      __builtin_mul_overflow(g.batch, g.heads_q, &bh) || bh > kMaxDim)
    fail(TLRT_ERR_INVALID_ARGUMENT,
         "argument geometry: len_q = %llu, len_k = %llu and batch * heads_q = %llu * %llu must "
         "each be at most 2^31 - 1",
         (ull)g.len_q, (ull)g.len_k, (ull)g.batch, (ull)g.heads_q);
  uint64_t rows = 0;
  if (!product3(bh, g.len_q, 1, &rows) || !product3(rows, g.d, 1, &c.out_elems) ||
      c.out_elems > TLRT_MAX_ELEMENTS)
    fail(TLRT_ERR_OVERFLOW,
         "argument geometry: out has batch * len_q * heads_q * d = %llu * %llu * %llu * %llu "
         "elements, beyond TLRT_MAX_ELEMENTS (2^60)",
         (ull)g.batch, (ull)g.len_q, (ull)g.heads_q, (ull)g.d);
  c.lse_elems = rows;
  const ViewSpec vq = view_of(g, 0, g.len_q, g.heads_q), vk = view_of(g, 1, g.len_k, g.heads_kv),
                 vv = view_of(g, 2, g.len_k, g.heads_kv);
  check_view(*c.Q, "q", "geometry", 'q', vq);
  check_view(*c.K, "k", "geometry", 'k', vk);
  check_view(*c.V, "v", "geometry", 'v', vv);
  if (c.M) {
    const uint64_t one = g.len_q * g.len_k;  // below 2^62
    uint64_t full = 0;
    const bool ffit = product3(bh, one, 1, &full);
    const bool is_full = ffit && c.M->size == full, is_one = c.M->size == one;
    if (!is_full && !is_one)
      fail(TLRT_ERR_SHAPE,
           "argument mask has %llu elements, but it must have len_q * len_k = %llu or batch * "
           "heads_q * len_q * len_k = %s elements (argument geometry)",
           (ull)c.M->size, (ull)one, ffit ? std::to_string(full).c_str() : "beyond 64 bits");
    c.p.mask_stride = is_full && bh > 1 ? one : 0;
  }
  c.p.scale = host_scalar(scale, "scale");
  c.p.fill = host_scalar(mask_fill, "mask_fill", HostInf::Negative);
  c.p.batch = g.batch;
  c.p.hq = g.heads_q;
  c.p.hkv = g.heads_kv;
  c.p.nq = g.len_q;
  c.p.nk = g.len_k;
  c.p.d = g.d;
  c.p.q = attn::View{g.q_stride_batch, g.q_stride_token, g.q_stride_head};
  c.p.k = attn::View{g.k_stride_batch, g.k_stride_token, g.k_stride_head};
  c.p.v = attn::View{g.v_stride_batch, g.v_stride_token, g.v_stride_head};
  // An empty view is never read: its strides are not passed on.
  if (vq.empty()) c.p.q = attn::View{0, 0, 0};
  if (vk.empty()) c.p.k = attn::View{0, 0, 0};
  if (vv.empty()) c.p.v = attn::View{0, 0, 0};
  c.p.mask = c.M ? c.M->data : nullptr;
  c.p.causal = causal;
  return c;
}

// A view's first element (the buffer's start when the view is empty: never read).
const float *at(const Buffer &X, uint64_t off, bool empty) {
  return empty || X.data == nullptr ? X.data : X.data + off;
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
    if (c.Q->size != 0) {
      const attn::View cv = contiguous_view(n, d);
      TLRT_DISPATCH(dev, attention_bwd, dev.ordinal, c.p, c.Q->data, c.K->data, c.V->data, O.data,
                    DO.data, L.data, call_precision(),
                    attn::Grads{DQ->data, DK->data, DV->data, cv, cv, cv});
    }
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

TLRT_API tlrt_status tlrt_attention_fwd(const tlrt_buffer *q, const tlrt_buffer *k,
                                        const tlrt_buffer *v, const tlrt_buffer *mask,
                                        const tlrt_attention_geometry *geometry, double scale,
                                        bool causal, double mask_fill, tlrt_buffer **out,
                                        tlrt_buffer **lse) {
  if (out) *out = nullptr;
  if (lse) *lse = nullptr;
  return guarded(__func__, [&] {
    clear_out(out, "out");
    clear_out(lse, "lse");
    const General c = validate_general(q, k, v, mask, geometry, scale, causal, mask_fill);
    const Dev dev = c.Q->dev;
    Owned O = new_buffer(dev, c.out_elems);
    Owned L = new_buffer(dev, c.lse_elems);
    const tlrt_attention_geometry &g = c.g;
    if (c.lse_elems != 0) {  // batch, heads_q, len_q >= 1
      const bool ke = g.len_k == 0 || g.d == 0;
      TLRT_DISPATCH(dev, attention_fwd, dev.ordinal, c.p, at(*c.Q, g.q_offset, g.d == 0),
                    at(*c.K, g.k_offset, ke), at(*c.V, g.v_offset, ke), call_precision(),
                    O->data, L->data);
    }
    *out = O.release();
    *lse = L.release();
  });
}

TLRT_API tlrt_status tlrt_attention_bwd(const tlrt_buffer *q, const tlrt_buffer *k,
                                        const tlrt_buffer *v, const tlrt_buffer *mask,
                                        const tlrt_buffer *dout, const tlrt_buffer *out,
                                        const tlrt_buffer *lse,
                                        const tlrt_attention_geometry *geometry, double scale,
                                        bool causal, double mask_fill, tlrt_buffer *dq,
                                        tlrt_buffer *dk, tlrt_buffer *dv,
                                        const tlrt_attention_geometry *grad_geometry) {
  return guarded(__func__, [&] {
    const General c = validate_general(q, k, v, mask, geometry, scale, causal, mask_fill,
                                       {{dout, "dout"}, {out, "out"}, {lse, "lse"}});
    const Buffer &DO = input(dout, "dout"), &O = input(out, "out"), &L = input(lse, "lse");
    const tlrt_attention_geometry &g = c.g;
    if (DO.size != c.out_elems || O.size != c.out_elems)
      fail(TLRT_ERR_SHAPE,
           "argument dout has %llu elements and argument out %llu, but batch * len_q * heads_q "
           "* d = %llu (argument geometry)",
           (ull)DO.size, (ull)O.size, (ull)c.out_elems);
    if (L.size != c.lse_elems)
      fail(TLRT_ERR_SHAPE,
           "argument lse has %llu elements, but batch * heads_q * len_q = %llu (argument "
           "geometry)",
           (ull)L.size, (ull)c.lse_elems);
    tlrt_attention_geometry gg{};
    check_geometry_struct(grad_geometry, "tlrt_attention_geometry", kAttnGeometryV1, &gg,
                          "grad_geometry");
    if (gg.batch != g.batch || gg.heads_q != g.heads_q || gg.heads_kv != g.heads_kv ||
        gg.len_q != g.len_q || gg.len_k != g.len_k || gg.d != g.d)
      fail(TLRT_ERR_SHAPE,
           "argument grad_geometry describes (batch %llu, heads_q %llu, heads_kv %llu, len_q "
           "%llu, len_k %llu, d %llu), argument geometry (batch %llu, heads_q %llu, heads_kv "
           "%llu, len_q %llu, len_k %llu, d %llu)",
           (ull)gg.batch, (ull)gg.heads_q, (ull)gg.heads_kv, (ull)gg.len_q, (ull)gg.len_k,
           (ull)gg.d, (ull)g.batch, (ull)g.heads_q, (ull)g.heads_kv, (ull)g.len_q,
           (ull)g.len_k, (ull)g.d);
    // The destinations: optional, float32, on q's device, in bounds.
    tlrt_buffer *dst[3] = {dq, dk, dv};
    static const char *const names[3] = {"dq", "dk", "dv"};
    const Buffer *D[3] = {nullptr, nullptr, nullptr};
    for (int w = 0; w < 3; ++w)
      if (dst[w]) {
        D[w] = &input(dst[w], names[w]);
        same_device(*c.Q, "q", *D[w], names[w]);
      }
    const ViewSpec gv[3] = {view_of(gg, 0, g.len_q, g.heads_q),
                            view_of(gg, 1, g.len_k, g.heads_kv),
                            view_of(gg, 2, g.len_k, g.heads_kv)};
    for (int w = 0; w < 3; ++w)
      if (D[w]) check_view(*D[w], names[w], "grad_geometry", "qkv"[w], gv[w]);
    // The overlap rules (only views that write something take part).
    const Buffer *inputs[7] = {c.Q, c.K, c.V, c.M, &DO, &O, &L};
    static const char *const in_names[7] = {"q", "k", "v", "mask", "dout", "out", "lse"};
    for (int w = 0; w < 3; ++w) {
      if (!D[w] || gv[w].empty()) continue;
      if (!one_to_one(gv[w]))
        fail(TLRT_ERR_INVALID_ARGUMENT,
             "argument %s: the view of argument grad_geometry (%c_stride_batch %llu, "
             "%c_stride_token %llu, %c_stride_head %llu, d %llu) may write an element twice",
             names[w], "qkv"[w], (ull)gv[w].sb, "qkv"[w], (ull)gv[w].st, "qkv"[w], (ull)gv[w].sh,
             (ull)gv[w].d);
      for (int i = 0; i < 7; ++i)
        if (inputs[i] && storage_meets(*D[w], *inputs[i]))
          fail(TLRT_ERR_INVALID_ARGUMENT, "argument %s shares storage with argument %s",
               names[w], in_names[i]);
      for (int u = 0; u < w; ++u) {
        if (!D[u] || gv[u].empty()) continue;
        if (dst[u] == dst[w] ? !disjoint(gv[u], gv[w]) : storage_meets(*D[u], *D[w]))
          fail(TLRT_ERR_INVALID_ARGUMENT,
               "argument %s and argument %s may overlap (the views of argument grad_geometry "
               "are not disjoint by the header's rules)",
               names[u], names[w]);
      }
    }
    const bool wq = D[0] && !gv[0].empty(), wk = D[1] && !gv[1].empty(),
               wv = D[2] && !gv[2].empty();
    if (!wq && !wk && !wv) return;
    const bool ke = g.len_k == 0;
    const attn::Grads gr{wq ? D[0]->data + gg.q_offset : nullptr,
                         wk ? D[1]->data + gg.k_offset : nullptr,
                         wv ? D[2]->data + gg.v_offset : nullptr,
                         attn::View{gg.q_stride_batch, gg.q_stride_token, gg.q_stride_head},
                         attn::View{gg.k_stride_batch, gg.k_stride_token, gg.k_stride_head},
                         attn::View{gg.v_stride_batch, gg.v_stride_token, gg.v_stride_head}};
    const Dev dev = c.Q->dev;
    TLRT_DISPATCH(dev, attention_bwd, dev.ordinal, c.p, at(*c.Q, g.q_offset, g.len_q == 0),
                  at(*c.K, g.k_offset, ke), at(*c.V, g.v_offset, ke), O.data, DO.data, L.data,
                  call_precision(), gr);
  });
}

}  // extern "C"
