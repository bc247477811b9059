// libFuzzer target for the geometry guards of convolution, pooling and attention, forward AND
// backward, N-D and 2-D (abi/tlrt_conv.h, abi/tlrt_pool.h, abi/tlrt_attention.h). It complements
// fuzz_conv_geometry.cpp (forward N-D conv / pool with pool values) with the entry points that one
// does not reach: tlrt_conv_bwd, tlrt_convtranspose_bwd, tlrt_maxpool_bwd, tlrt_avgpool_bwd,
// tlrt_smooth_maxpool_fwd/_bwd, the 2-D variants (tlrt_conv2d_*, tlrt_convtranspose2d_*,
// tlrt_{max,avg,smooth_max}pool2d_*), plus tlrt_conv_fwd / tlrt_convtranspose_fwd /
// tlrt_maxpool_fwd / tlrt_avgpool_fwd again (same oracle, so both targets must agree), and
// tlrt_flash_attention_fwd. One input decodes into one call: rank 0..9, dimensions, kernel
// sizes, strides, paddings, dilations, groups, bh / n / d drawn from small values, 0, powers of
// two up to 2^63, values around 2^32, 2^60 and 2^64 - 1 (and 2^31 - 1 for attention); scalars
// (beta, scale, mask_fill) from ordinary, NaN, infinite and float32-overflowing / -underflowing
// values; real CPU buffers of at most 4096 elements whose sizes may or may not match.
// The oracle re-derives the headers' rules in 128-bit arithmetic:
//   - valid: status OK, every requested output of exactly the predicted size;
//   - invalid: a status the header documents for geometry / arguments (TLRT_ERR_INVALID_ARGUMENT,
//     TLRT_ERR_SHAPE, TLRT_ERR_OVERFLOW; TLRT_ERR_NULL_ARGUMENT where all backward outputs are
//     NULL) and every out-parameter NULL;
//   - where a header leaves the choice to the implementation (the convolution's 2^62 index limit,
//     padded pool extents beyond 2^64), either outcome, but a success must have the predicted size.
// Valid calls whose outputs or multiply-add work exceed ~65536 elements / 2^20 are not run (time).
// Built as a fuzzer with -Dfuzz=true (clang) and as the replay driver
// fuzz_replay_conv_pool_geometry (meson suite 'fuzz').
// Geometry as data: every convolution and pooling call (N-D or 2-D) is repeated through its
// struct form (tlrt_conv_bwd_geom, tlrt_convtranspose_bwd_geom, the *_fwd_geom ones, and every
// tlrt_*pool_*_geom), which must return the same status and bitwise the same outputs, and the
// output-dims queries must succeed whenever the call does, with the size of its forward output.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <vector>

#include "torchlean_rt.h"

namespace {

using u128 = unsigned __int128;

constexpr u128 kMaxElements = (u128)1 << 60;  // TLRT_MAX_ELEMENTS
constexpr u128 kLimit62 = (u128)1 << 62;
constexpr u128 kMax64 = ((u128)1 << 64) - 1;
constexpr uint64_t kMaxBuffer = 4096;
constexpr u128 kMaxRun = 65536;
constexpr u128 kMaxWork = (u128)1 << 20;  // multiply-adds of a call we still run

struct Input {
  const uint8_t *p;
  size_t n;
  uint8_t byte() {
    if (n == 0) return 0;
    --n;
    return *p++;
  }
  // A size: mostly small, sometimes huge.
  uint64_t dim() {
    const uint8_t sel = byte();
    const uint8_t v = byte();
    switch (sel % 8) {
      case 0: case 1: case 2: case 3: return v % 5;
      case 4: return uint64_t{1} << (v % 64);
      case 5: return UINT64_MAX - v % 3;
      case 6: return (uint64_t{1} << 60) - 1 + v % 3;
      default: return (uint64_t{1} << 32) - 1 + v % 3;
    }
  }
  // A size that is small more often (kernel extents, strides, dilations, groups).
  uint64_t small_or_dim() { return byte() % 4 ? 1 + byte() % 3 : dim(); }
  // A scalar argument: one entry of a table of ordinary and special doubles.
  double scalar(std::initializer_list<double> table) {
    return table.begin()[byte() % table.size()];
  }
};

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Rounded to float32, is the value finite / finite and nonzero?
bool f32_finite(double x) { return std::isfinite((float)x); }
bool f32_finite_nonzero(double x) { return f32_finite(x) && (float)x != 0.0f; }

[[noreturn]] void violated(const char *what, tlrt_status s) {
  std::fprintf(stderr, "contract violated: %s (status %s, last error: %s)\n", what,
               tlrt_status_string(s), tlrt_last_error());
  std::abort();
}

u128 product(const std::vector<u128> &v) {  // saturates above 2^64 (enough for comparisons)
  u128 p = 1;
  for (u128 x : v) {
    if (x == 0) return 0;
  }
  for (u128 x : v) {
    p = p > kMax64 ? p : p * x;
  }
  return p;
}
u128 sat_mul(u128 a, u128 b) { return product({a, b}); }

uint64_t size_of(const tlrt_buffer *b) {
  uint64_t n = 0;
  if (tlrt_buffer_size(b, &n) != TLRT_OK) violated("tlrt_buffer_size", TLRT_ERR_INTERNAL);
  return n;
}

// A real CPU buffer of small integers: its size is the claimed count when that is small (most of
// the time), else a random small size.
tlrt_buffer *make(Input &in, u128 claimed, std::vector<float> &vals) {
  uint64_t n = claimed <= kMaxBuffer && in.byte() % 8 ? (uint64_t)claimed : in.byte() % 40;
  vals.resize(n);
  for (uint64_t i = 0; i < n; ++i) vals[i] = (float)((int)(in.byte() % 11) - 5);
  tlrt_buffer *b = nullptr;
  if (tlrt_buffer_from_f32(TLRT_DEVICE_CPU, vals.data(), n, &b) != TLRT_OK) std::abort();
  return b;
}

void free_all(std::initializer_list<tlrt_buffer *> bs) {
  for (tlrt_buffer *b : bs) tlrt_buffer_free(b);
}

// The struct form's results against the argument list's: the same status; for a success the same
// sizes and bits of every requested output. Frees the struct form's outputs.
void same_results(const char *fn, tlrt_status s1, std::initializer_list<tlrt_buffer **> outs1,
                  tlrt_status s2, std::initializer_list<tlrt_buffer **> outs2) {
  if (s1 != s2) violated(fn, s2);
  auto a = outs1.begin();
  for (tlrt_buffer **b : outs2) {
    tlrt_buffer **o1 = *a++;
    if (b == nullptr) continue;
    if (s2 != TLRT_OK) {
      if (*b != nullptr) violated(fn, s2);
      continue;
    }
    const uint64_t n = size_of(*o1);
    if (size_of(*b) != n) violated(fn, TLRT_ERR_SHAPE);
    std::vector<float> x(n), y(n);
    if (n && (tlrt_buffer_to_f32(*o1, x.data(), n) != TLRT_OK ||
              tlrt_buffer_to_f32(*b, y.data(), n) != TLRT_OK))
      violated(fn, TLRT_ERR_INTERNAL);
    if (n && std::memcmp(x.data(), y.data(), 4 * n) != 0) violated(fn, TLRT_ERR_INTERNAL);
    tlrt_buffer_free(*b);
  }
}

// The output-dims query succeeds whenever a call with the geometry did, with `want` elements
// (the forward output's count); it rejects a value exactly when the call does (`s`; a call that
// also checks beta, smooth max pool, may reject more).
void query_agrees(const char *fn, tlrt_status q, uint32_t rank, uint64_t n, uint32_t want_rank,
                  tlrt_status s, u128 want, bool beta_checked) {
  if (s == TLRT_OK && (q != TLRT_OK || n != want || rank != want_rank)) violated(fn, q);
  if (q == TLRT_ERR_INVALID_ARGUMENT && s != TLRT_ERR_INVALID_ARGUMENT) violated(fn, q);
  if (!beta_checked && s == TLRT_ERR_INVALID_ARGUMENT && q != TLRT_ERR_INVALID_ARGUMENT)
    violated(fn, q);
  if (q != TLRT_OK && (rank != 0 || n != 0)) violated(fn, q);
}

enum class Verdict { kValid, kInvalid, kEither };

// One out-parameter (nullptr when not requested) and its predicted size.
struct Out {
  tlrt_buffer **slot;
  u128 want;
};

// Checks the status and every output of one call, then frees the outputs.
void check(const char *fn, Verdict v, tlrt_status s, std::initializer_list<Out> outs,
           bool null_ok = false) {
  if (s == TLRT_OK) {
    if (v == Verdict::kInvalid) violated(fn, s);
    for (const Out &o : outs) {
      if (o.slot == nullptr) continue;
      if (*o.slot == nullptr) violated(fn, s);
      if (size_of(*o.slot) != o.want) violated(fn, TLRT_ERR_SHAPE);
    }
  } else {
    for (const Out &o : outs) {
      if (o.slot != nullptr && *o.slot != nullptr) violated(fn, s);
    }
    if (v == Verdict::kValid) violated(fn, s);
    if (s != TLRT_ERR_INVALID_ARGUMENT && s != TLRT_ERR_SHAPE && s != TLRT_ERR_OVERFLOW &&
        !(null_ok && s == TLRT_ERR_NULL_ARGUMENT))
      violated(fn, s);
  }
  for (const Out &o : outs) {
    if (o.slot != nullptr && *o.slot != nullptr) tlrt_buffer_free(*o.slot);
  }
}

struct Geo {
  uint32_t rank = 0;
  uint64_t in[10], k[10], s[10], p[10], d[10];
};

void draw(Input &in, Geo &g, bool dilation) {
  g.rank = in.byte() % 10;
  for (uint32_t i = 0; i < 10; ++i) g.in[i] = g.k[i] = g.s[i] = g.p[i] = g.d[i] = 1;
  for (uint32_t i = 0; i < g.rank; ++i) {
    g.in[i] = in.byte() % 3 ? 1 + in.byte() % 6 : in.dim();
    g.k[i] = in.small_or_dim();
    g.s[i] = in.small_or_dim();
    g.p[i] = in.byte() % 3 ? in.byte() % 3 : in.dim();
    g.d[i] = dilation ? in.small_or_dim() : 1;
    if (in.byte() % 16 == 0) g.k[i] = 0;
    if (in.byte() % 16 == 0) g.s[i] = 0;
    if (dilation && in.byte() % 16 == 0) g.d[i] = 0;
  }
}

bool rank_ok(const Geo &g) { return g.rank >= 1 && g.rank <= 8; }

// ---- pooling ---------------------------------------------------------------------------------

enum PoolOp { kMaxFwd, kMaxBwd, kAvgFwd, kAvgBwd, kSmoothFwd, kSmoothBwd, kPoolOps };
const char *const kPoolNames[kPoolOps][2] = {
    {"tlrt_maxpool_fwd", "tlrt_maxpool2d_fwd"},
    {"tlrt_maxpool_bwd", "tlrt_maxpool2d_bwd"},
    {"tlrt_avgpool_fwd", "tlrt_avgpool2d_fwd"},
    {"tlrt_avgpool_bwd", "tlrt_avgpool2d_bwd"},
    {"tlrt_smooth_maxpool_fwd", "tlrt_smooth_maxpool2d_fwd"},
    {"tlrt_smooth_maxpool_bwd", "tlrt_smooth_maxpool2d_bwd"}};

void fuzz_pool(Input &in) {
  const PoolOp op = (PoolOp)(in.byte() % kPoolOps);
  const bool include_pad = in.byte() % 2;
  const bool smooth = op == kSmoothFwd || op == kSmoothBwd;
  // beta: ordinary, negative, NaN, +-inf, 0, beyond float32 (-> inf), below float32 (-> 0), and
  // a float32 subnormal (nonzero, so valid).
  const double beta =
      in.scalar({1.0, -2.0, 0.5, kNaN, kInf, -kInf, 0.0, 1e39, -1e39, 1e-50, 1e-45});
  const uint64_t batch = in.byte() % 4 ? in.byte() % 3 : in.dim();
  const uint64_t channels = in.byte() % 4 ? 1 + in.byte() % 3 : in.dim();
  Geo g;
  draw(in, g, false);
  const bool two_d = g.rank == 2 && in.byte() % 2;
  Verdict v = Verdict::kValid;
  std::vector<u128> in_dims{batch, channels}, out_dims{batch, channels};
  bool geometry_ok = rank_ok(g);
  for (uint32_t a = 0; geometry_ok && a < g.rank; ++a) {
    if (g.k[a] == 0 || g.s[a] == 0 || (u128)2 * g.p[a] > g.k[a]) geometry_ok = false;
  }
  if (geometry_ok) {
    for (uint32_t a = 0; a < g.rank; ++a) {
      in_dims.push_back(g.in[a]);
      const u128 padded = (u128)g.in[a] + 2 * (u128)g.p[a];
      const u128 o = (g.in[a] >= 1 && padded >= g.k[a]) ? (padded - g.k[a]) / g.s[a] + 1 : 0;
      if (padded > kMax64) v = Verdict::kEither;  // "an extent beyond 2^64": implementation's call
      out_dims.push_back(o);
    }
  }
  const u128 x_count = geometry_ok ? product(in_dims) : in.byte() % 16;
  const u128 y_count = geometry_ok ? product(out_dims) : in.byte() % 16;
  const bool needs_x = op != kAvgBwd;
  const bool needs_dy = op == kMaxBwd || op == kAvgBwd || op == kSmoothBwd;
  std::vector<float> xv, dyv;
  tlrt_buffer *x = needs_x ? make(in, x_count, xv) : nullptr;
  tlrt_buffer *dy = needs_dy ? make(in, y_count, dyv) : nullptr;
  const u128 want = needs_dy ? x_count : y_count;  // dx has x's shape
  if (!geometry_ok || (needs_x && x_count != xv.size()) || (needs_dy && y_count != dyv.size()) ||
      (smooth && !f32_finite_nonzero(beta))) {
    v = Verdict::kInvalid;
  } else if (y_count > kMaxElements || want > kMaxElements) {
    v = Verdict::kInvalid;
  }
  if (v != Verdict::kInvalid && (want > kMaxRun || y_count > kMaxRun)) {
    free_all({x, dy});
    return;
  }
  tlrt_buffer *out = (tlrt_buffer *)1;
  tlrt_status s = TLRT_ERR_INTERNAL;
  const uint64_t *e = g.in, *k = g.k, *st = g.s, *p = g.p;
  const uint64_t b = batch, c = channels;
  if (!two_d) {
    switch (op) {
      case kMaxFwd: s = tlrt_maxpool_fwd(x, b, c, e, g.rank, k, st, p, &out); break;
      case kMaxBwd: s = tlrt_maxpool_bwd(x, dy, b, c, e, g.rank, k, st, p, &out); break;
      case kAvgFwd: s = tlrt_avgpool_fwd(x, b, c, e, g.rank, k, st, p, include_pad, &out); break;
      case kAvgBwd: s = tlrt_avgpool_bwd(dy, b, c, e, g.rank, k, st, p, include_pad, &out); break;
      case kSmoothFwd: s = tlrt_smooth_maxpool_fwd(x, b, c, e, g.rank, k, st, p, beta, &out); break;
      default: s = tlrt_smooth_maxpool_bwd(x, dy, b, c, e, g.rank, k, st, p, beta, &out); break;
    }
  } else {
    switch (op) {
      case kMaxFwd:
        s = tlrt_maxpool2d_fwd(x, b, c, e[0], e[1], k[0], k[1], st[0], st[1], p[0], p[1], &out);
        break;
      case kMaxBwd:
        s = tlrt_maxpool2d_bwd(x, dy, b, c, e[0], e[1], k[0], k[1], st[0], st[1], p[0], p[1],
                               &out);
        break;
      case kAvgFwd:
        s = tlrt_avgpool2d_fwd(x, b, c, e[0], e[1], k[0], k[1], st[0], st[1], p[0], p[1],
                               include_pad, &out);
        break;
      case kAvgBwd:
        s = tlrt_avgpool2d_bwd(dy, b, c, e[0], e[1], k[0], k[1], st[0], st[1], p[0], p[1],
                               include_pad, &out);
        break;
      case kSmoothFwd:
        s = tlrt_smooth_maxpool2d_fwd(x, b, c, e[0], e[1], k[0], k[1], st[0], st[1], p[0], p[1],
                                      beta, &out);
        break;
      default:
        s = tlrt_smooth_maxpool2d_bwd(x, dy, b, c, e[0], e[1], k[0], k[1], st[0], st[1], p[0],
                                      p[1], beta, &out);
        break;
    }
  }
  {  // The struct form (for 2-D calls too) and the query.
    tlrt_pool_geometry pg;
    std::memset(&pg, 0, sizeof pg);
    pg.struct_size = sizeof pg;
    pg.rank = g.rank;
    pg.batch = batch;
    pg.channels = channels;
    for (uint32_t a = 0; a < g.rank && a < 8; ++a) {
      pg.in_spatial[a] = g.in[a];
      pg.kernel[a] = g.k[a];
      pg.stride[a] = g.s[a];
      pg.padding[a] = g.p[a];
    }
    tlrt_buffer *out2 = (tlrt_buffer *)1;
    tlrt_status s2 = TLRT_ERR_INTERNAL;
    switch (op) {
      case kMaxFwd: s2 = tlrt_maxpool_fwd_geom(x, &pg, &out2); break;
      case kMaxBwd: s2 = tlrt_maxpool_bwd_geom(x, dy, &pg, &out2); break;
      case kAvgFwd: s2 = tlrt_avgpool_fwd_geom(x, &pg, include_pad, &out2); break;
      case kAvgBwd: s2 = tlrt_avgpool_bwd_geom(dy, &pg, include_pad, &out2); break;
      case kSmoothFwd: s2 = tlrt_smooth_maxpool_fwd_geom(x, &pg, beta, &out2); break;
      default: s2 = tlrt_smooth_maxpool_bwd_geom(x, dy, &pg, beta, &out2); break;
    }
    same_results("pool *_geom", s, {&out}, s2, {&out2});
    uint64_t dims[TLRT_POOL_MAX_DIMS];
    uint32_t rank = 7;
    uint64_t n = 7;
    const tlrt_status q = tlrt_pool_output_dims(&pg, dims, TLRT_POOL_MAX_DIMS, &rank, &n);
    query_agrees("tlrt_pool_output_dims", q, rank, n, g.rank + 2, s, y_count, smooth);
  }
  check(kPoolNames[op][two_d], v, s, {{&out, want}});
  free_all({x, dy});
}

// ---- convolution -----------------------------------------------------------------------------

tlrt_conv_geometry conv_struct(const Geo &g, uint64_t batch, uint64_t in_ch, uint64_t out_ch,
                               uint64_t groups) {
  tlrt_conv_geometry cg;
  std::memset(&cg, 0, sizeof cg);
  cg.struct_size = sizeof cg;
  cg.rank = g.rank;
  cg.batch = batch;
  cg.in_channels = in_ch;
  cg.out_channels = out_ch;
  cg.groups = groups;
  for (uint32_t a = 0; a < g.rank && a < 8; ++a) {
    cg.in_spatial[a] = g.in[a];
    cg.kernel_size[a] = g.k[a];
    cg.stride[a] = g.s[a];
    cg.padding[a] = g.p[a];
    cg.dilation[a] = g.d[a];
  }
  return cg;
}

// The output-dims query of a convolution call's geometry against the call's status s.
void conv_query(const tlrt_conv_geometry &cg, bool transposed, tlrt_status s, u128 y_count,
                uint32_t rank_in) {
  uint64_t dims[TLRT_CONV_MAX_DIMS];
  uint32_t rank = 7;
  uint64_t n = 7;
  const tlrt_status q =
      transposed ? tlrt_convtranspose_output_dims(&cg, dims, TLRT_CONV_MAX_DIMS, &rank, &n)
                 : tlrt_conv_output_dims(&cg, dims, TLRT_CONV_MAX_DIMS, &rank, &n);
  query_agrees(transposed ? "tlrt_convtranspose_output_dims" : "tlrt_conv_output_dims", q, rank,
               n, rank_in + 2, s, y_count, false);
}

void fuzz_conv(Input &in) {
  const bool transposed = in.byte() % 2;
  const bool backward = in.byte() % 2;
  const bool with_bias = !backward && in.byte() % 2;
  const uint8_t want_grads = backward ? in.byte() % 8 : 0;  // bit 0 d_kernel, 1 d_bias, 2 d_input
  const uint64_t batch = in.byte() % 4 ? in.byte() % 3 : in.dim();
  const uint64_t in_ch = in.byte() % 4 ? 1 + in.byte() % 4 : in.dim();
  const uint64_t out_ch = in.byte() % 4 ? 1 + in.byte() % 4 : in.dim();
  const uint64_t groups = in.byte() % 4 ? 1 + in.byte() % 2 : in.small_or_dim();
  Geo g;
  draw(in, g, true);
  const bool two_d = g.rank == 2 && in.byte() % 2;
  Verdict v = Verdict::kValid;
  bool geometry_ok = rank_ok(g) && groups >= 1 && in_ch % groups == 0 && out_ch % groups == 0;
  for (uint32_t a = 0; geometry_ok && a < g.rank; ++a) {
    if (g.k[a] == 0 || g.s[a] == 0 || g.d[a] == 0) geometry_ok = false;
  }
  std::vector<u128> in_dims{batch, in_ch}, out_dims{batch, out_ch}, k_dims, k_spatial;
  if (transposed) {
    k_dims = {in_ch, groups ? out_ch / groups : 0};
  } else {
    k_dims = {out_ch, groups ? in_ch / groups : 0};
  }
  bool near_limit = false, extent_overflow = false;
  if (geometry_ok) {
    for (uint32_t a = 0; a < g.rank; ++a) {
      in_dims.push_back(g.in[a]);
      k_dims.push_back(g.k[a]);
      k_spatial.push_back(g.k[a]);
      const u128 ek = (u128)g.d[a] * ((u128)g.k[a] - 1) + 1;
      const u128 two_p = 2 * (u128)g.p[a];
      u128 o;
      if (!transposed) {
        const u128 padded = (u128)g.in[a] + two_p;
        o = padded >= ek ? (padded - ek) / g.s[a] + 1 : 0;
        if (padded >= kLimit62 || ek >= kLimit62) near_limit = true;
      } else {
        const u128 full = g.in[a] >= 1 ? ((u128)g.in[a] - 1) * g.s[a] + ek : 0;
        o = (g.in[a] >= 1 && full > two_p) ? full - two_p : 0;
        if (o + two_p >= kLimit62 || full >= kLimit62) near_limit = true;
      }
      if (o > kMax64) extent_overflow = true;
      out_dims.push_back(o);
    }
  }
  std::vector<float> xv, kv, bv, gv;
  const u128 x_count = geometry_ok ? product(in_dims) : in.byte() % 16;
  const u128 k_count = geometry_ok ? product(k_dims) : in.byte() % 16;
  const u128 y_count = geometry_ok ? product(out_dims) : in.byte() % 16;
  tlrt_buffer *x = make(in, x_count, xv);
  tlrt_buffer *kern = make(in, k_count, kv);
  tlrt_buffer *bias = with_bias ? make(in, out_ch, bv) : nullptr;
  tlrt_buffer *gout = backward ? make(in, y_count, gv) : nullptr;
  if (!geometry_ok || x_count != xv.size() || k_count != kv.size() ||
      (with_bias && (u128)out_ch != bv.size()) || (backward && y_count != gv.size())) {
    v = Verdict::kInvalid;
  } else if (extent_overflow || y_count > kMaxElements) {
    v = Verdict::kInvalid;
  } else if (near_limit) {
    v = Verdict::kEither;  // the 2^62 index limit, documented for non-empty outputs
  }
  if (backward && want_grads == 0) v = Verdict::kInvalid;  // at least one gradient requested
  // Work: every output position of the convolution meets in_ch / groups * prod(k) kernel cells;
  // the transposed one the same with input and output swapped.
  const u128 positions = geometry_ok ? product(transposed ? in_dims : out_dims) : 0;
  const u128 per_group = groups ? (transposed ? out_ch : in_ch) / groups : 0;
  const u128 work = sat_mul(positions, sat_mul(per_group, product(k_spatial)));
  // d_bias has out_channels elements even when everything else is empty.
  const bool big_bias = backward && (want_grads & 2) && out_ch > kMaxRun;
  if (v != Verdict::kInvalid && (y_count > kMaxRun || work > kMaxWork || big_bias)) {
    free_all({x, kern, bias, gout});
    return;
  }
  const uint64_t *e = g.in, *k = g.k, *st = g.s, *p = g.p, *dl = g.d;
  const uint64_t b = batch;
  if (!backward) {
    tlrt_buffer *out = (tlrt_buffer *)1;
    tlrt_status s;
    const char *fn;
    if (!two_d && !transposed) {
      fn = "tlrt_conv_fwd";
      s = tlrt_conv_fwd(kern, bias, x, b, in_ch, out_ch, e, g.rank, k, st, p, dl, groups, &out);
    } else if (!two_d) {
      fn = "tlrt_convtranspose_fwd";
      s = tlrt_convtranspose_fwd(kern, bias, x, b, in_ch, out_ch, e, g.rank, k, st, p, dl, groups,
                                 &out);
    } else if (!transposed) {
      fn = "tlrt_conv2d_fwd";
      s = tlrt_conv2d_fwd(kern, bias, x, b, in_ch, e[0], e[1], out_ch, k[0], k[1], st[0], st[1],
                          p[0], p[1], dl[0], dl[1], groups, &out);
    } else {
      fn = "tlrt_convtranspose2d_fwd";
      s = tlrt_convtranspose2d_fwd(kern, bias, x, b, in_ch, e[0], e[1], out_ch, k[0], k[1], st[0],
                                   st[1], p[0], p[1], dl[0], dl[1], groups, &out);
    }
    {  // The struct form and the query.
      const tlrt_conv_geometry cg = conv_struct(g, batch, in_ch, out_ch, groups);
      tlrt_buffer *out2 = (tlrt_buffer *)1;
      const tlrt_status s2 = transposed ? tlrt_convtranspose_fwd_geom(kern, bias, x, &cg, &out2)
                                        : tlrt_conv_fwd_geom(kern, bias, x, &cg, &out2);
      same_results("conv *_fwd_geom", s, {&out}, s2, {&out2});
      conv_query(cg, transposed, s, y_count, g.rank);
    }
    check(fn, v, s, {{&out, y_count}});
  } else {
    tlrt_buffer *dk = (tlrt_buffer *)1, *db = (tlrt_buffer *)1, *dx = (tlrt_buffer *)1;
    tlrt_buffer **pk = want_grads & 1 ? &dk : nullptr;
    tlrt_buffer **pb = want_grads & 2 ? &db : nullptr;
    tlrt_buffer **px = want_grads & 4 ? &dx : nullptr;
    tlrt_status s;
    const char *fn;
    if (!two_d && !transposed) {
      fn = "tlrt_conv_bwd";
      s = tlrt_conv_bwd(kern, x, gout, b, in_ch, out_ch, e, g.rank, k, st, p, dl, groups, pk, pb,
                        px);
    } else if (!two_d) {
      fn = "tlrt_convtranspose_bwd";
      s = tlrt_convtranspose_bwd(kern, x, gout, b, in_ch, out_ch, e, g.rank, k, st, p, dl, groups,
                                 pk, pb, px);
    } else if (!transposed) {
      fn = "tlrt_conv2d_bwd";
      s = tlrt_conv2d_bwd(kern, x, gout, b, in_ch, e[0], e[1], out_ch, k[0], k[1], st[0], st[1],
                          p[0], p[1], dl[0], dl[1], groups, pk, pb, px);
    } else {
      fn = "tlrt_convtranspose2d_bwd";
      s = tlrt_convtranspose2d_bwd(kern, x, gout, b, in_ch, e[0], e[1], out_ch, k[0], k[1], st[0],
                                   st[1], p[0], p[1], dl[0], dl[1], groups, pk, pb, px);
    }
    {  // The struct form and the query.
      const tlrt_conv_geometry cg = conv_struct(g, batch, in_ch, out_ch, groups);
      tlrt_buffer *dk2 = (tlrt_buffer *)1, *db2 = (tlrt_buffer *)1, *dx2 = (tlrt_buffer *)1;
      tlrt_buffer **pk2 = pk ? &dk2 : nullptr, **pb2 = pb ? &db2 : nullptr,
                  **px2 = px ? &dx2 : nullptr;
      const tlrt_status s2 =
          transposed ? tlrt_convtranspose_bwd_geom(kern, x, gout, &cg, pk2, pb2, px2)
                     : tlrt_conv_bwd_geom(kern, x, gout, &cg, pk2, pb2, px2);
      same_results("conv *_bwd_geom", s, {pk, pb, px}, s2, {pk2, pb2, px2});
      // The query is the forward's; a backward needing gradients may fail where it would not
      // (NULL_ARGUMENT for no gradient requested).
      if (want_grads != 0) conv_query(cg, transposed, s, y_count, g.rank);
    }
    check(fn, v, s, {{pk, k_count}, {pb, out_ch}, {px, x_count}}, want_grads == 0);
  }
  free_all({x, kern, bias, gout});
}

// ---- attention -------------------------------------------------------------------------------

void fuzz_attention(Input &in) {
  // bh and n: also the 2^31 - 1 grid limit and one past it.
  auto attn_dim = [&in](uint64_t small) -> uint64_t {
    const uint8_t sel = in.byte() % 6;
    return sel < 4 ? in.byte() % small : sel == 4 ? 0x7fffffffu + in.byte() % 2 : in.dim();
  };
  const uint64_t bh = attn_dim(4);
  const uint64_t n = attn_dim(6);
  const uint64_t d =
      in.byte() % 4 ? in.byte() % 9 : (in.byte() % 2 ? 250 + in.byte() % 10 : in.dim());
  const bool causal = in.byte() % 2;
  const uint8_t mask_kind = in.byte() % 3;  // none, per problem, broadcast
  const double scale = in.scalar({0.5, 1.0, -0.25, 0.0, kNaN, kInf, -kInf, 1e39, 1e-50});
  const double fill = in.scalar({-1000.0, -kInf, 0.0, kInf, kNaN, 1e39, -1e39, 7.0});
  const u128 qkv = product({bh, n, d});
  const u128 rows = product({bh, n});
  const u128 mask_count = mask_kind == 1 ? product({bh, n, n}) : product({n, n});
  std::vector<float> qv, kv, vv, mv;
  tlrt_buffer *q = make(in, qkv, qv);
  // k and v: q's size most of the time, sometimes another small size.
  tlrt_buffer *k = make(in, qv.size(), kv);
  tlrt_buffer *v = make(in, qv.size(), vv);
  tlrt_buffer *mask = mask_kind ? make(in, mask_count, mv) : nullptr;
  const bool mask_ok =
      !mask || (u128)mv.size() == product({bh, n, n}) || (u128)mv.size() == product({n, n});
  const bool args_ok = d <= 256 && n <= 0x7fffffffu && bh <= 0x7fffffffu && f32_finite(scale) &&
                       (fill == -kInf || f32_finite(fill));
  Verdict verdict = Verdict::kValid;
  if (!args_ok || qkv != qv.size() || kv.size() != qv.size() || vv.size() != qv.size() || !mask_ok)
    verdict = Verdict::kInvalid;
  // d == 0 with q, k, v empty still asks for an lse of bh * n elements, which can pass
  // TLRT_MAX_ELEMENTS (bh, n < 2^31 give up to 2^62). The header names no status for that; the
  // library answers TLRT_ERR_OVERFLOW (the buffer-wide rule), which the oracle accepts.
  if (verdict != Verdict::kInvalid && rows > kMaxElements) verdict = Verdict::kInvalid;
  // Work: n * n * d per problem; big valid calls are not run.
  const u128 work = sat_mul(rows, sat_mul(n, d + 1));
  if (verdict != Verdict::kInvalid && (rows > kMaxRun || work > kMaxWork)) {
    free_all({q, k, v, mask});
    return;
  }
  tlrt_buffer *out = (tlrt_buffer *)1, *lse = (tlrt_buffer *)1;
  const tlrt_status s =
      tlrt_flash_attention_fwd(q, k, v, mask, bh, n, d, scale, causal, fill, &out, &lse);
  check("tlrt_flash_attention_fwd", verdict, s, {{&out, qkv}, {&lse, rows}});
  free_all({q, k, v, mask});
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  Input in{data, size};
  switch (in.byte() % 3) {
    case 0: fuzz_pool(in); break;
    case 1: fuzz_conv(in); break;
    default: fuzz_attention(in); break;
  }
  return 0;
}

#ifdef TLRT_FUZZ_REPLAY
#include "replay_main.hpp"
#endif
