// Bad input for the convolution family (abi/tlrt_conv.h): all eight entry points. NULL for every
// pointer argument (buffers, geometry arrays, out-parameters; all three backward out-parameters
// NULL), released buffers, every size that must match (input, kernel, bias, grad_out; counts beyond
// 64 bits included), invalid geometry (rank 0 and 9, stride 0, kernel extent 0, dilation 0,
// groups 0, channels not divisible by groups, padding reaching 2^62), an output beyond
// TLRT_MAX_ELEMENTS and an output extent beyond 64 bits, mixed devices (with a GPU only). Each
// failing call: the exact status, every out-parameter cleared to NULL (pre-filled with a
// sentinel), a last-error message naming the function and the offending arguments. Good calls
// succeed, with NULL backward out-parameters skipped. Nothing leaks.
// The four *_geom entry points (the geometry as a tlrt_conv_geometry) get every geometry and size
// case of the N-D ones with the same expected status (their messages name "geometry->stride[0]"
// and so on), plus the struct's own rules (NULL geometry; struct_size too small, too large, or
// larger with a nonzero byte past the known layout; a 64-bit rank that would truncate to a valid
// one; entries past rank ignored). tlrt_conv_output_dims and tlrt_convtranspose_output_dims: the
// same geometry errors as the forward, NULL out-parameters, capacity, cleared outputs on failure.
#include <cstring>
#include <vector>

#include "bad_input.hpp"

namespace {

const char *kFwd = "tlrt_conv_fwd";
const char *kBwd = "tlrt_conv_bwd";
const char *kFwd2 = "tlrt_conv2d_fwd";
const char *kBwd2 = "tlrt_conv2d_bwd";
const char *kTFwd = "tlrt_convtranspose_fwd";
const char *kTBwd = "tlrt_convtranspose_bwd";
const char *kTFwd2 = "tlrt_convtranspose2d_fwd";
const char *kTBwd2 = "tlrt_convtranspose2d_bwd";

// Geometry of the good call: batch 1, in_c 2, out_c 2, 1-D in 4, k 2 -> out 3.
// input 8, kernel 2 * 2 * 2 = 8 (groups 1), bias 2, grad_out 6; transposed: out 5, grad_out 10.
struct Bufs {
  tlrt_buffer *x8 = nullptr, *w8 = nullptr, *b2 = nullptr, *dy6 = nullptr, *dy10 = nullptr;
  tlrt_buffer *v3 = nullptr, *released = nullptr;
};

Bufs make_bufs() {
  th::Rng rng(5);
  Bufs b;
  b.x8 = th::upload(rng.vec(8));
  b.w8 = th::upload(rng.vec(8));
  b.b2 = th::upload(rng.vec(2));
  b.dy6 = th::upload(rng.vec(6));
  b.dy10 = th::upload(rng.vec(10));
  b.v3 = th::upload(rng.vec(3));
  b.released = th::upload(rng.vec(8));
  bool freed = false;
  TH_OK(tlrt_buffer_release_storage(b.released, &freed));
  return b;
}

void free_bufs(Bufs &b) {
  for (tlrt_buffer *p : {b.x8, b.w8, b.b2, b.dy6, b.dy10, b.v3, b.released}) tlrt_buffer_free(p);
  b = Bufs{};
}

const uint64_t kIn[1] = {4}, kK[1] = {2}, kS[1] = {1}, kP[1] = {0}, kD[1] = {1};

struct Args {
  uint64_t batch = 1, in_c = 2, out_c = 2, groups = 1;
  const uint64_t *in = kIn, *k = kK, *s = kS, *p = kP, *d = kD;
  uint32_t rank = 1;
};

tlrt_status fwd(bool tr, const tlrt_buffer *w, const tlrt_buffer *b, const tlrt_buffer *x,
                const Args &a, tlrt_buffer **out) {
  return tr ? tlrt_convtranspose_fwd(w, b, x, a.batch, a.in_c, a.out_c, a.in, a.rank, a.k, a.s,
                                     a.p, a.d, a.groups, out)
            : tlrt_conv_fwd(w, b, x, a.batch, a.in_c, a.out_c, a.in, a.rank, a.k, a.s, a.p, a.d,
                            a.groups, out);
}

tlrt_status bwd(bool tr, const tlrt_buffer *w, const tlrt_buffer *x, const tlrt_buffer *dy,
                const Args &a, tlrt_buffer **dw, tlrt_buffer **db, tlrt_buffer **dx) {
  return tr ? tlrt_convtranspose_bwd(w, x, dy, a.batch, a.in_c, a.out_c, a.in, a.rank, a.k, a.s,
                                     a.p, a.d, a.groups, dw, db, dx)
            : tlrt_conv_bwd(w, x, dy, a.batch, a.in_c, a.out_c, a.in, a.rank, a.k, a.s, a.p, a.d,
                            a.groups, dw, db, dx);
}

// The geometry of `a` as the struct the *_geom entry points take (arrays NULL in `a` are not
// expressible in the struct: dilation NULL becomes 1, the others are not used here).
tlrt_conv_geometry conv_geom(const Args &a) {
  tlrt_conv_geometry g;
  std::memset(&g, 0, sizeof g);
  g.struct_size = sizeof g;
  g.rank = a.rank;
  g.batch = a.batch;
  g.in_channels = a.in_c;
  g.out_channels = a.out_c;
  g.groups = a.groups;
  for (uint32_t i = 0; i < a.rank && i < TLRT_CONV_MAX_RANK; ++i) {
    g.in_spatial[i] = a.in[i];
    g.kernel_size[i] = a.k[i];
    g.stride[i] = a.s[i];
    g.padding[i] = a.p[i];
    g.dilation[i] = a.d ? a.d[i] : 1;
  }
  return g;
}

tlrt_status fwd_geom(bool tr, const tlrt_buffer *w, const tlrt_buffer *b, const tlrt_buffer *x,
                     const tlrt_conv_geometry *g, tlrt_buffer **out) {
  return tr ? tlrt_convtranspose_fwd_geom(w, b, x, g, out) : tlrt_conv_fwd_geom(w, b, x, g, out);
}

tlrt_status bwd_geom(bool tr, const tlrt_buffer *w, const tlrt_buffer *x, const tlrt_buffer *dy,
                     const tlrt_conv_geometry *g, tlrt_buffer **dw, tlrt_buffer **db,
                     tlrt_buffer **dx) {
  return tr ? tlrt_convtranspose_bwd_geom(w, x, dy, g, dw, db, dx)
            : tlrt_conv_bwd_geom(w, x, dy, g, dw, db, dx);
}

#define FWD_BAD(tr, w, b, x, a, want, ...)                                        \
  do {                                                                          \
    tlrt_buffer *y = kSentinel;                                                 \
    BAD(fwd(tr, w, b, x, a, &y), want, (tr) ? kTFwd : kFwd, __VA_ARGS__);       \
    CLEARED(y);                                                                 \
  } while (0)

#define BWD_BAD(tr, w, x, dy, a, want, ...)                                          \
  do {                                                                             \
    tlrt_buffer *dw = kSentinel, *db = kSentinel, *dx = kSentinel;                 \
    BAD(bwd(tr, w, x, dy, a, &dw, &db, &dx), want, (tr) ? kTBwd : kBwd, __VA_ARGS__); \
    CLEARED(dw);                                                                   \
    CLEARED(db);                                                                   \
    CLEARED(dx);                                                                   \
  } while (0)

const char *kFwdG = "tlrt_conv_fwd_geom";
const char *kBwdG = "tlrt_conv_bwd_geom";
const char *kTFwdG = "tlrt_convtranspose_fwd_geom";
const char *kTBwdG = "tlrt_convtranspose_bwd_geom";
const char *kDims = "tlrt_conv_output_dims";
const char *kTDims = "tlrt_convtranspose_output_dims";

#define FWDG_BAD(tr, w, b, x, g, want, ...)                                       \
  do {                                                                          \
    tlrt_buffer *y = kSentinel;                                                 \
    BAD(fwd_geom(tr, w, b, x, g, &y), want, (tr) ? kTFwdG : kFwdG, __VA_ARGS__); \
    CLEARED(y);                                                                 \
  } while (0)

#define BWDG_BAD(tr, w, x, dy, g, want, ...)                                            \
  do {                                                                                \
    tlrt_buffer *dw = kSentinel, *db = kSentinel, *dx = kSentinel;                    \
    BAD(bwd_geom(tr, w, x, dy, g, &dw, &db, &dx), want, (tr) ? kTBwdG : kBwdG, __VA_ARGS__); \
    CLEARED(dw);                                                                      \
    CLEARED(db);                                                                      \
    CLEARED(dx);                                                                      \
  } while (0)

// The output-dims query of `g` must fail with `want` and clear every output.
void dims_bad(int line, bool tr, const tlrt_conv_geometry *g, uint64_t *dims, uint32_t cap,
              uint32_t *rank, uint64_t *elements, tlrt_status want,
              std::initializer_list<const char *> names) {
  if (dims)
    for (uint32_t i = 0; i < cap; ++i) dims[i] = 77;
  if (rank) *rank = 99;
  if (elements) *elements = 99;
  const tlrt_status st = tr ? tlrt_convtranspose_output_dims(g, dims, cap, rank, elements)
                            : tlrt_conv_output_dims(g, dims, cap, rank, elements);
  expect_fail(line, tr ? kTDims : kDims, st, want, tr ? kTDims : kDims, names);
  TH_CHECK_MSG(!rank || *rank == 0, "line %d: rank not cleared", line);
  TH_CHECK_MSG(!elements || *elements == 0, "line %d: elements not cleared", line);
  for (uint32_t i = 0; dims && i < cap; ++i)
    TH_CHECK_MSG(dims[i] == 0, "line %d: dims[%u] not cleared", line, i);
}
#define DIMS_BAD(tr, g, want, ...)                                                        \
  do {                                                                                  \
    uint64_t dims_[TLRT_CONV_MAX_DIMS];                                                 \
    uint32_t rank_ = 0;                                                                 \
    uint64_t n_ = 0;                                                                    \
    dims_bad(__LINE__, tr, g, dims_, TLRT_CONV_MAX_DIMS, &rank_, &n_, want, {__VA_ARGS__}); \
  } while (0)

// One geometry error through every form: the argument list (its N-D name `name`), and the struct
// ("geometry->" + name) for the forward, the backward and the output-dims query; all must fail
// with `want`. name NULL: a message that names no argument (the output's size).
void geometry_bad(int line, bool tr, const tlrt_buffer *w, const tlrt_buffer *b,
                  const tlrt_buffer *x, const tlrt_buffer *dy, const Args &a, tlrt_status want,
                  const char *name) {
  const std::string gname = name ? std::string("geometry->") + name : std::string();
  const char *n2 = name ? gname.c_str() : nullptr;
  auto check = [&](const char *what, tlrt_status got, const char *fn, const char *nm) {
    if (nm)
      expect_fail(line, what, got, want, fn, {nm});
    else
      expect_fail(line, what, got, want, fn, {});
  };
  tlrt_buffer *y = kSentinel;
  check("argument list", fwd(tr, w, b, x, a, &y), tr ? kTFwd : kFwd, name);
  CLEARED(y);
  const tlrt_conv_geometry g = conv_geom(a);
  y = kSentinel;
  check("struct", fwd_geom(tr, w, b, x, &g, &y), tr ? kTFwdG : kFwdG, n2);
  CLEARED(y);
  if (dy) {
    tlrt_buffer *dw = kSentinel, *db = kSentinel, *dx = kSentinel;
    check("struct backward", bwd_geom(tr, w, x, dy, &g, &dw, &db, &dx), tr ? kTBwdG : kBwdG, n2);
    CLEARED(dw);
    CLEARED(db);
    CLEARED(dx);
  }
  uint64_t dims[TLRT_CONV_MAX_DIMS];
  uint32_t rank = 0;
  uint64_t n = 0;
  if (n2)
    dims_bad(line, tr, &g, dims, TLRT_CONV_MAX_DIMS, &rank, &n, want, {n2});
  else
    dims_bad(line, tr, &g, dims, TLRT_CONV_MAX_DIMS, &rank, &n, want, {});
}

void check_nd(const Fixture &f, const Bufs &b, bool tr) {
  const Args a;
  tlrt_buffer *dy = tr ? b.dy10 : b.dy6;
  // NULL buffers and out-parameters.
  FWD_BAD(tr, nullptr, b.b2, b.x8, a, TLRT_ERR_NULL_ARGUMENT, "kernel");
  FWD_BAD(tr, b.w8, b.b2, nullptr, a, TLRT_ERR_NULL_ARGUMENT, "input");
  BAD(fwd(tr, b.w8, b.b2, b.x8, a, nullptr), TLRT_ERR_NULL_ARGUMENT, tr ? kTFwd : kFwd, "out");
  BWD_BAD(tr, nullptr, b.x8, dy, a, TLRT_ERR_NULL_ARGUMENT, "kernel");
  BWD_BAD(tr, b.w8, nullptr, dy, a, TLRT_ERR_NULL_ARGUMENT, "input");
  BWD_BAD(tr, b.w8, b.x8, nullptr, a, TLRT_ERR_NULL_ARGUMENT, "grad_out");
  BAD(bwd(tr, b.w8, b.x8, dy, a, nullptr, nullptr, nullptr), TLRT_ERR_NULL_ARGUMENT,
      tr ? kTBwd : kBwd, "d_kernel", "d_bias", "d_input");
  // NULL geometry arrays (dilation NULL is allowed: all 1).
  {
    Args n = a;
    n.in = nullptr;
    FWD_BAD(tr, b.w8, b.b2, b.x8, n, TLRT_ERR_NULL_ARGUMENT, "in_spatial");
    BWD_BAD(tr, b.w8, b.x8, dy, n, TLRT_ERR_NULL_ARGUMENT, "in_spatial");
    n = a;
    n.k = nullptr;
    FWD_BAD(tr, b.w8, b.b2, b.x8, n, TLRT_ERR_NULL_ARGUMENT, "kernel_size");
    n = a;
    n.s = nullptr;
    FWD_BAD(tr, b.w8, b.b2, b.x8, n, TLRT_ERR_NULL_ARGUMENT, "stride");
    n = a;
    n.p = nullptr;
    FWD_BAD(tr, b.w8, b.b2, b.x8, n, TLRT_ERR_NULL_ARGUMENT, "padding");
    n = a;
    n.d = nullptr;
    tlrt_buffer *y = nullptr;
    TH_OK(fwd(tr, b.w8, b.b2, b.x8, n, &y));
    expect_result(tr ? kTFwd : kFwd, y, tr ? 10 : 6);
  }
  // Released buffers.
  FWD_BAD(tr, b.released, b.b2, b.x8, a, TLRT_ERR_RELEASED, "kernel");
  FWD_BAD(tr, b.w8, b.released, b.x8, a, TLRT_ERR_RELEASED, "bias");
  FWD_BAD(tr, b.w8, b.b2, b.released, a, TLRT_ERR_RELEASED, "input");
  BWD_BAD(tr, b.released, b.x8, dy, a, TLRT_ERR_RELEASED, "kernel");
  BWD_BAD(tr, b.w8, b.released, dy, a, TLRT_ERR_RELEASED, "input");
  BWD_BAD(tr, b.w8, b.x8, b.released, a, TLRT_ERR_RELEASED, "grad_out");
  // Sizes.
  FWD_BAD(tr, b.v3, b.b2, b.x8, a, TLRT_ERR_SHAPE, "kernel");
  FWD_BAD(tr, b.w8, b.v3, b.x8, a, TLRT_ERR_SHAPE, "bias");
  FWD_BAD(tr, b.w8, b.b2, b.v3, a, TLRT_ERR_SHAPE, "input");
  BWD_BAD(tr, b.v3, b.x8, dy, a, TLRT_ERR_SHAPE, "kernel");
  BWD_BAD(tr, b.w8, b.v3, dy, a, TLRT_ERR_SHAPE, "input");
  BWD_BAD(tr, b.w8, b.x8, b.v3, a, TLRT_ERR_SHAPE, "grad_out");
  {
    Args big = a;  // input count beyond 64 bits never matches
    const uint64_t huge[1] = {uint64_t{1} << 40};
    big.batch = uint64_t{1} << 30;
    big.in = huge;
    FWD_BAD(tr, b.w8, b.b2, b.x8, big, TLRT_ERR_SHAPE, "input");
    Args kb = a;  // kernel count beyond 64 bits
    const uint64_t hk[1] = {uint64_t{1} << 62};
    kb.k = hk;
    kb.out_c = uint64_t{1} << 4;
    FWD_BAD(tr, b.w8, b.b2, b.x8, kb, TLRT_ERR_SHAPE, "kernel");
  }
  // Geometry.
  {
    Args g = a;
    g.rank = 0;
    FWD_BAD(tr, b.w8, b.b2, b.x8, g, TLRT_ERR_INVALID_ARGUMENT, "rank");
    BWD_BAD(tr, b.w8, b.x8, dy, g, TLRT_ERR_INVALID_ARGUMENT, "rank");
    g.rank = 9;
    FWD_BAD(tr, b.w8, b.b2, b.x8, g, TLRT_ERR_INVALID_ARGUMENT, "rank");
    const uint64_t zero[1] = {0};
    g = a;
    g.s = zero;
    FWD_BAD(tr, b.w8, b.b2, b.x8, g, TLRT_ERR_INVALID_ARGUMENT, "stride[0]");
    BWD_BAD(tr, b.w8, b.x8, dy, g, TLRT_ERR_INVALID_ARGUMENT, "stride[0]");
    g = a;
    g.k = zero;
    FWD_BAD(tr, b.w8, b.b2, b.x8, g, TLRT_ERR_INVALID_ARGUMENT, "kernel_size[0]");
    g = a;
    g.d = zero;
    FWD_BAD(tr, b.w8, b.b2, b.x8, g, TLRT_ERR_INVALID_ARGUMENT, "dilation[0]");
    g = a;
    g.groups = 0;
    FWD_BAD(tr, b.w8, b.b2, b.x8, g, TLRT_ERR_INVALID_ARGUMENT, "groups");
    BWD_BAD(tr, b.w8, b.x8, dy, g, TLRT_ERR_INVALID_ARGUMENT, "groups");
    g = a;
    g.in_c = 3;
    g.groups = 2;
    FWD_BAD(tr, b.w8, b.b2, b.x8, g, TLRT_ERR_INVALID_ARGUMENT, "in_channels", "groups");
    g = a;
    g.out_c = 3;
    g.groups = 2;
    FWD_BAD(tr, b.w8, b.b2, b.x8, g, TLRT_ERR_INVALID_ARGUMENT, "out_channels", "groups");
    // Padding reaching 2^62 with a non-empty output (stride as large, so the output stays small).
    const uint64_t hp[1] = {uint64_t{1} << 61}, hs[1] = {uint64_t{1} << 62};
    g = a;
    g.p = hp;
    g.s = hs;
    if (!tr) FWD_BAD(tr, b.w8, b.b2, b.x8, g, TLRT_ERR_INVALID_ARGUMENT, "padding");
  }
  // Output beyond TLRT_MAX_ELEMENTS: in_c 0 (empty input and kernel), huge out_c with padding.
  {
    Args g = a;
    g.in_c = 0;
    g.out_c = uint64_t{1} << 62;
    const uint64_t pad1[1] = {1}, in0[1] = {0}, k1[1] = {1};
    g.p = pad1;
    g.in = in0;
    g.k = k1;
    if (!tr) FWD_BAD(tr, f.empty, nullptr, f.empty, g, TLRT_ERR_OVERFLOW);
    // An output extent beyond 64 bits (transposed): (in - 1) s + ek with in = 2^40, s = 2^40.
    if (tr) {
      Args t = a;
      const uint64_t hin[1] = {uint64_t{1} << 40}, hs[1] = {uint64_t{1} << 40};
      t.in = hin;
      t.s = hs;
      FWD_BAD(tr, b.w8, b.b2, b.x8, t, TLRT_ERR_OVERFLOW, "in_spatial");
    }
  }
  // Good calls: NULL backward out-parameters skip gradients; bias NULL allowed.
  {
    tlrt_buffer *dw = nullptr, *db = nullptr, *dx = nullptr, *y = nullptr;
    TH_OK(fwd(tr, b.w8, nullptr, b.x8, a, &y));
    expect_result(tr ? kTFwd : kFwd, y, tr ? 10 : 6);
    TH_OK(bwd(tr, b.w8, b.x8, dy, a, &dw, nullptr, nullptr));
    expect_result(tr ? kTBwd : kBwd, dw, 8);
    TH_OK(bwd(tr, b.w8, b.x8, dy, a, nullptr, &db, nullptr));
    expect_result(tr ? kTBwd : kBwd, db, 2);
    TH_OK(bwd(tr, b.w8, b.x8, dy, a, nullptr, nullptr, &dx));
    expect_result(tr ? kTBwd : kBwd, dx, 8);
  }
}

bool same_values(tlrt_buffer *p, tlrt_buffer *q) {
  const std::vector<float> a = th::download(p), b = th::download(q);
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), 4 * a.size()) == 0);
}

// The *_geom entry points and the output-dims queries (see the top of the file).
void check_geom(const Fixture &f, const Bufs &b, bool tr) {
  const Args a;
  const tlrt_conv_geometry g = conv_geom(a);
  tlrt_buffer *dy = tr ? b.dy10 : b.dy6;
  const uint64_t ny = tr ? 10 : 6;
  const char *fg = tr ? kTFwdG : kFwdG, *bg = tr ? kTBwdG : kBwdG, *qd = tr ? kTDims : kDims;
  // Good calls: the argument lists' values bit for bit, NULL bias and gradients skipped; the
  // query gives the output's shape and count.
  for (const tlrt_buffer *bias : {(const tlrt_buffer *)b.b2, (const tlrt_buffer *)nullptr}) {
    tlrt_buffer *y1 = nullptr, *y2 = nullptr;
    TH_OK(fwd(tr, b.w8, bias, b.x8, a, &y1));
    TH_OK(fwd_geom(tr, b.w8, bias, b.x8, &g, &y2));
    TH_CHECK_MSG(y1 && y2 && same_values(y1, y2), "%s differs from the argument list", fg);
    expect_result(fg, y2, ny);
    tlrt_buffer_free(y1);
  }
  {
    tlrt_buffer *dw = nullptr, *db = nullptr, *dx = nullptr;
    TH_OK(bwd_geom(tr, b.w8, b.x8, dy, &g, &dw, nullptr, nullptr));
    expect_result(bg, dw, 8);
    TH_OK(bwd_geom(tr, b.w8, b.x8, dy, &g, nullptr, &db, nullptr));
    expect_result(bg, db, 2);
    TH_OK(bwd_geom(tr, b.w8, b.x8, dy, &g, nullptr, nullptr, &dx));
    expect_result(bg, dx, 8);
    uint64_t dims[TLRT_CONV_MAX_DIMS + 1];
    for (uint64_t &d : dims) d = 77;
    uint32_t rank = 0;
    uint64_t n = 0;
    const uint32_t cap = TLRT_CONV_MAX_DIMS;
    const tlrt_status st = tr ? tlrt_convtranspose_output_dims(&g, dims, cap, &rank, &n)
                              : tlrt_conv_output_dims(&g, dims, cap, &rank, &n);
    TH_CHECK_MSG(st == TLRT_OK, "%s: %s", qd, tlrt_last_error());
    TH_CHECK(rank == 3 && n == ny && dims[0] == 1 && dims[1] == 2 && dims[2] == (tr ? 5u : 3u));
    for (uint32_t i = 3; i < TLRT_CONV_MAX_DIMS; ++i) TH_CHECK(dims[i] == 0);
    TH_CHECK(dims[TLRT_CONV_MAX_DIMS] == 77);  // past capacity: untouched
    // A capacity of exactly rank + 2 suffices; one less is TLRT_ERR_SHAPE.
    TH_OK(tr ? tlrt_convtranspose_output_dims(&g, dims, 3, &rank, &n)
             : tlrt_conv_output_dims(&g, dims, 3, &rank, &n));
    TH_CHECK(rank == 3 && n == ny);
    dims_bad(__LINE__, tr, &g, dims, 2, &rank, &n, TLRT_ERR_SHAPE,
             {"capacity", "geometry->rank"});
    dims_bad(__LINE__, tr, &g, nullptr, 3, &rank, &n, TLRT_ERR_NULL_ARGUMENT, {"dims"});
    dims_bad(__LINE__, tr, &g, dims, 3, nullptr, &n, TLRT_ERR_NULL_ARGUMENT, {"rank"});
    dims_bad(__LINE__, tr, &g, dims, 3, &rank, nullptr, TLRT_ERR_NULL_ARGUMENT, {"elements"});
  }
  // NULL geometry; NULL buffers and out-parameters come first (the buffers are checked before
  // the geometry, as in the argument-list forms).
  FWDG_BAD(tr, b.w8, b.b2, b.x8, nullptr, TLRT_ERR_NULL_ARGUMENT, "geometry");
  BWDG_BAD(tr, b.w8, b.x8, dy, nullptr, TLRT_ERR_NULL_ARGUMENT, "geometry");
  DIMS_BAD(tr, nullptr, TLRT_ERR_NULL_ARGUMENT, "geometry");
  FWDG_BAD(tr, nullptr, b.b2, b.x8, nullptr, TLRT_ERR_NULL_ARGUMENT, "kernel");
  FWDG_BAD(tr, b.w8, b.b2, nullptr, &g, TLRT_ERR_NULL_ARGUMENT, "input");
  BAD(fwd_geom(tr, b.w8, b.b2, b.x8, &g, nullptr), TLRT_ERR_NULL_ARGUMENT, fg, "out");
  BWDG_BAD(tr, nullptr, b.x8, dy, &g, TLRT_ERR_NULL_ARGUMENT, "kernel");
  BWDG_BAD(tr, b.w8, nullptr, dy, &g, TLRT_ERR_NULL_ARGUMENT, "input");
  BWDG_BAD(tr, b.w8, b.x8, nullptr, nullptr, TLRT_ERR_NULL_ARGUMENT, "grad_out");
  BAD(bwd_geom(tr, b.w8, b.x8, dy, &g, nullptr, nullptr, nullptr), TLRT_ERR_NULL_ARGUMENT, bg,
      "d_kernel", "d_bias", "d_input");
  // Released buffers.
  FWDG_BAD(tr, b.released, b.b2, b.x8, &g, TLRT_ERR_RELEASED, "kernel");
  FWDG_BAD(tr, b.w8, b.released, b.x8, &g, TLRT_ERR_RELEASED, "bias");
  FWDG_BAD(tr, b.w8, b.b2, b.released, &g, TLRT_ERR_RELEASED, "input");
  BWDG_BAD(tr, b.w8, b.x8, b.released, &g, TLRT_ERR_RELEASED, "grad_out");
  // struct_size below the first version.
  for (uint64_t size : {uint64_t{0}, uint64_t{8}, uint64_t{sizeof g - 8}, uint64_t{sizeof g - 1}}) {
    tlrt_conv_geometry s = g;
    s.struct_size = size;
    FWDG_BAD(tr, b.w8, b.b2, b.x8, &s, TLRT_ERR_INVALID_ARGUMENT, "geometry->struct_size");
    BWDG_BAD(tr, b.w8, b.x8, dy, &s, TLRT_ERR_INVALID_ARGUMENT, "geometry->struct_size");
    DIMS_BAD(tr, &s, TLRT_ERR_INVALID_ARGUMENT, "geometry->struct_size");
  }
  // A larger struct_size (a newer header): a zero tail is accepted, a nonzero byte in it is not,
  // and nothing above 4096 is. 8192 bytes of memory hold the struct.
  {
    std::vector<uint64_t> mem(1024, 0);
    std::memcpy(mem.data(), &g, sizeof g);
    auto *p = reinterpret_cast<tlrt_conv_geometry *>(mem.data());
    auto *bytes = reinterpret_cast<unsigned char *>(mem.data());
    tlrt_buffer *y = nullptr;
    p->struct_size = 4096;
    TH_OK(fwd_geom(tr, b.w8, b.b2, b.x8, p, &y));
    expect_result(fg, y, ny);
    bytes[sizeof g] = 1;
    p->struct_size = sizeof g + 1;
    FWDG_BAD(tr, b.w8, b.b2, b.x8, p, TLRT_ERR_INVALID_ARGUMENT, "geometry->struct_size");
    DIMS_BAD(tr, p, TLRT_ERR_INVALID_ARGUMENT, "geometry->struct_size");
    p->struct_size = sizeof g;  // the byte is past struct_size: never read
    y = nullptr;
    TH_OK(fwd_geom(tr, b.w8, b.b2, b.x8, p, &y));
    expect_result(fg, y, ny);
    bytes[sizeof g] = 0;
    for (uint64_t size : {uint64_t{4097}, uint64_t{8192}, UINT64_MAX}) {
      p->struct_size = size;
      FWDG_BAD(tr, b.w8, b.b2, b.x8, p, TLRT_ERR_INVALID_ARGUMENT, "geometry->struct_size");
      BWDG_BAD(tr, b.w8, b.x8, dy, p, TLRT_ERR_INVALID_ARGUMENT, "geometry->struct_size");
    }
  }
  // rank: 0 and 9 as in the argument lists; 2^32 + 1 would be 1 if truncated.
  {
    Args r = a;
    r.rank = 0;
    geometry_bad(__LINE__, tr, b.w8, b.b2, b.x8, dy, r, TLRT_ERR_INVALID_ARGUMENT, "rank");
    r.rank = 9;
    const uint64_t nine[9] = {4, 1, 1, 1, 1, 1, 1, 1, 1};
    r.in = r.k = r.s = r.d = nine;
    r.p = nine;
    geometry_bad(__LINE__, tr, b.w8, b.b2, b.x8, dy, r, TLRT_ERR_INVALID_ARGUMENT, "rank");
    tlrt_conv_geometry s = g;
    s.rank = (uint64_t{1} << 32) + 1;
    FWDG_BAD(tr, b.w8, b.b2, b.x8, &s, TLRT_ERR_INVALID_ARGUMENT, "geometry->rank");
    DIMS_BAD(tr, &s, TLRT_ERR_INVALID_ARGUMENT, "geometry->rank");
  }
  // Every invalid field, in every form.
  {
    const uint64_t zero[1] = {0};
    Args e = a;
    e.s = zero;
    geometry_bad(__LINE__, tr, b.w8, b.b2, b.x8, dy, e, TLRT_ERR_INVALID_ARGUMENT, "stride[0]");
    e = a;
    e.k = zero;
    geometry_bad(__LINE__, tr, b.w8, b.b2, b.x8, dy, e, TLRT_ERR_INVALID_ARGUMENT,
                 "kernel_size[0]");
    e = a;
    e.d = zero;
    geometry_bad(__LINE__, tr, b.w8, b.b2, b.x8, dy, e, TLRT_ERR_INVALID_ARGUMENT,
                 "dilation[0]");
    e = a;
    e.groups = 0;
    geometry_bad(__LINE__, tr, b.w8, b.b2, b.x8, dy, e, TLRT_ERR_INVALID_ARGUMENT, "groups");
    e = a;
    e.in_c = 3;
    e.groups = 2;
    geometry_bad(__LINE__, tr, b.w8, b.b2, b.x8, dy, e, TLRT_ERR_INVALID_ARGUMENT,
                 "in_channels");
    e = a;
    e.out_c = 3;
    e.groups = 2;
    geometry_bad(__LINE__, tr, b.w8, b.b2, b.x8, dy, e, TLRT_ERR_INVALID_ARGUMENT,
                 "out_channels");
    // Padding reaching 2^62 with a non-empty output.
    const uint64_t hp[1] = {uint64_t{1} << 61}, hs[1] = {uint64_t{1} << 62};
    e = a;
    e.p = hp;
    e.s = hs;
    if (!tr)
      geometry_bad(__LINE__, tr, b.w8, b.b2, b.x8, dy, e, TLRT_ERR_INVALID_ARGUMENT, "padding");
    // An output extent beyond 64 bits (transposed).
    const uint64_t hin[1] = {uint64_t{1} << 40};
    e = a;
    e.in = hin;
    e.s = hin;
    if (tr)
      geometry_bad(__LINE__, tr, b.w8, b.b2, b.x8, nullptr, e, TLRT_ERR_OVERFLOW, "in_spatial");
    // An output beyond TLRT_MAX_ELEMENTS: in_c 0 (empty input and kernel), huge out_c.
    const uint64_t pad1[1] = {1}, in0[1] = {0}, k1[1] = {1};
    e = a;
    e.in_c = 0;
    e.out_c = uint64_t{1} << 62;
    e.p = pad1;
    e.in = in0;
    e.k = k1;
    if (!tr)
      geometry_bad(__LINE__, tr, f.empty, nullptr, f.empty, nullptr, e, TLRT_ERR_OVERFLOW,
                   nullptr);
  }
  // Sizes (the buffers: the struct forms only; the query has none).
  {
    FWDG_BAD(tr, b.v3, b.b2, b.x8, &g, TLRT_ERR_SHAPE, "kernel");
    FWDG_BAD(tr, b.w8, b.v3, b.x8, &g, TLRT_ERR_SHAPE, "bias", "geometry->out_channels");
    FWDG_BAD(tr, b.w8, b.b2, b.v3, &g, TLRT_ERR_SHAPE, "input", "geometry->batch",
             "geometry->in_channels");
    BWDG_BAD(tr, b.w8, b.x8, b.v3, &g, TLRT_ERR_SHAPE, "grad_out", "geometry->batch",
             "geometry->out_channels");
    BWDG_BAD(tr, b.w8, b.v3, dy, &g, TLRT_ERR_SHAPE, "input");
  }
  // Entries past rank are never read: zeros there (invalid extents) change nothing.
  {
    tlrt_conv_geometry s = g;
    for (uint32_t i = 1; i < TLRT_CONV_MAX_RANK; ++i)
      s.kernel_size[i] = s.stride[i] = s.dilation[i] = 0;
    tlrt_buffer *y = nullptr;
    TH_OK(fwd_geom(tr, b.w8, b.b2, b.x8, &s, &y));
    expect_result(fg, y, ny);
  }
}

// The 2-D entry points: in 2 x 2, k 1 x 1, in_c = out_c = 2 -> input 8, kernel 4, out 8.
void check_2d(const Bufs &b) {
  tlrt_buffer *y = kSentinel;
  BAD(tlrt_conv2d_fwd(nullptr, nullptr, b.x8, 1, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 1, 1, 1, &y),
      TLRT_ERR_NULL_ARGUMENT, kFwd2, "kernel");
  CLEARED(y);
  y = kSentinel;
  BAD(tlrt_conv2d_fwd(b.w8, nullptr, b.x8, 1, 2, 2, 2, 2, 1, 1, 0, 1, 0, 0, 1, 1, 1, &y),
      TLRT_ERR_INVALID_ARGUMENT, kFwd2, "stride_h");
  CLEARED(y);
  y = kSentinel;
  BAD(tlrt_conv2d_fwd(b.w8, nullptr, b.x8, 1, 2, 2, 2, 2, 1, 0, 1, 1, 0, 0, 1, 1, 1, &y),
      TLRT_ERR_INVALID_ARGUMENT, kFwd2, "kernel_w");
  CLEARED(y);
  y = kSentinel;
  BAD(tlrt_conv2d_fwd(b.w8, nullptr, b.x8, 1, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 1, 1, 1, &y),
      TLRT_ERR_SHAPE, kFwd2, "kernel");
  CLEARED(y);
  y = kSentinel;
  BAD(tlrt_convtranspose2d_fwd(b.w8, nullptr, b.x8, 1, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 1, 0, 1,
                               &y),
      TLRT_ERR_INVALID_ARGUMENT, kTFwd2, "dilation_w");
  CLEARED(y);
  y = kSentinel;
  BAD(tlrt_convtranspose2d_fwd(b.w8, nullptr, nullptr, 1, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 1, 1, 1,
                               &y),
      TLRT_ERR_NULL_ARGUMENT, kTFwd2, "input");
  CLEARED(y);
  tlrt_buffer *dw = kSentinel, *db = kSentinel, *dx = kSentinel;
  BAD(tlrt_conv2d_bwd(b.w8, b.x8, b.v3, 1, 2, 2, 2, 2, 2, 1, 1, 1, 0, 0, 1, 1, 1, &dw, &db, &dx),
      TLRT_ERR_SHAPE, kBwd2, "grad_out");
  CLEARED(dw);
  CLEARED(db);
  CLEARED(dx);
  dw = db = dx = kSentinel;
  BAD(tlrt_convtranspose2d_bwd(b.w8, b.released, b.x8, 1, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 1, 1, 1,
                               &dw, &db, &dx),
      TLRT_ERR_RELEASED, kTBwd2, "input");
  CLEARED(dw);
  CLEARED(db);
  CLEARED(dx);
  dw = db = dx = kSentinel;
  BAD(tlrt_convtranspose2d_bwd(b.w8, b.x8, b.x8, 1, 2, 2, 2, 2, 1, 1, 1, 1, 0, 0, 1, 1, 3, &dw,
                               &db, &dx),
      TLRT_ERR_INVALID_ARGUMENT, kTBwd2, "in_channels", "groups");
  CLEARED(dw);
  CLEARED(db);
  CLEARED(dx);
}

void check_mixed_devices(const Bufs &b) {
  if (!th::cuda_ready()) {
    std::printf("no usable CUDA device: mixed-device checks skipped\n");
    return;
  }
  tlrt_buffer *cx = nullptr, *cb = nullptr, *cdy = nullptr;
  TH_OK(tlrt_buffer_to_device(b.x8, TLRT_DEVICE_CUDA(0), &cx));
  TH_OK(tlrt_buffer_to_device(b.b2, TLRT_DEVICE_CUDA(0), &cb));
  TH_OK(tlrt_buffer_to_device(b.dy6, TLRT_DEVICE_CUDA(0), &cdy));
  if (cx && cb && cdy) {
    const Args a;
    FWD_BAD(false, b.w8, b.b2, cx, a, TLRT_ERR_DEVICE_MISMATCH, "input", "kernel");
    FWD_BAD(false, b.w8, cb, b.x8, a, TLRT_ERR_DEVICE_MISMATCH, "input", "bias");
    BWD_BAD(false, b.w8, b.x8, cdy, a, TLRT_ERR_DEVICE_MISMATCH, "input", "grad_out");
    BWD_BAD(true, b.w8, cx, b.dy10, a, TLRT_ERR_DEVICE_MISMATCH, "input", "kernel");
  }
  tlrt_buffer_free(cx);
  tlrt_buffer_free(cb);
  tlrt_buffer_free(cdy);
}

}  // namespace

int main() {
  const tlrt_allocator_stats start = th::stats();
  {
    Fixture f = make_fixture();
    Bufs b = make_bufs();
    check_nd(f, b, false);
    check_nd(f, b, true);
    check_geom(f, b, false);
    check_geom(f, b, true);
    check_2d(b);
    check_mixed_devices(b);
    free_bufs(b);
    free_fixture(f);
  }
  expect_no_leaks(start);
  return th::finish("test_bad_input_conv");
}
