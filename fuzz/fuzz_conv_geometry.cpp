// libFuzzer target for the geometry guards of convolution and pooling (abi/tlrt_conv.h,
// abi/tlrt_pool.h): the input decodes into one N-D call (rank 0..9) of tlrt_conv_fwd,
// tlrt_convtranspose_fwd, tlrt_maxpool_fwd or tlrt_avgpool_fwd with batch, channels, groups,
// extents, kernel sizes, strides, paddings and dilations drawn from small values, 0, powers of two
// up to 2^63 and values around 2^32, 2^60 and 2^64 - 1, over real CPU buffers of at most 4096
// elements whose sizes may or may not match the geometry.
// An independent oracle re-derives the headers' rules in 128-bit arithmetic:
//   - valid: the call must succeed with exactly the predicted output size; for the pools, whose
//     values are cheap to recompute (small integers: every sum is exact), the values too;
//   - invalid: the call must fail with a status the header documents for geometry
//     (TLRT_ERR_INVALID_ARGUMENT, TLRT_ERR_SHAPE, TLRT_ERR_OVERFLOW) and leave out NULL;
//   - where a header leaves the choice to the implementation (extents near the 2^62 index limit of
//     the convolution, empty outputs whose padded extents pass 2^64), either outcome is accepted,
//     but a success must still have the predicted size.
// Valid calls whose output would exceed 65536 elements are not run (time). Built as a fuzzer with
// -Dfuzz=true (clang) and as the replay driver fuzz_replay_conv_geometry (meson suite 'fuzz').
// Geometry as data: every call is repeated through the struct form (tlrt_conv_fwd_geom,
// tlrt_convtranspose_fwd_geom, tlrt_maxpool_fwd_geom, tlrt_avgpool_fwd_geom), which must return
// the same status and bitwise the same output, and the output-dims query
// (tlrt_conv_output_dims, tlrt_convtranspose_output_dims, tlrt_pool_output_dims) is checked
// against the same oracle and against the call: it succeeds whenever the call does, with the
// call's size, and it reports TLRT_ERR_INVALID_ARGUMENT exactly when the call does. A trailing
// input byte (past what the call consumed, so the committed corpus keeps its meaning) varies the
// struct: a struct_size too small, larger with a zero or nonzero tail, or a rank with high bits.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <vector>

#include "torchlean_rt.h"

namespace {

using u128 = unsigned __int128;

constexpr u128 kMaxElements = (u128)1 << 60;
constexpr u128 kLimit62 = (u128)1 << 62;
constexpr u128 kMax64 = ((u128)1 << 64) - 1;
constexpr uint64_t kMaxBuffer = 4096;
constexpr u128 kMaxRun = 65536;

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
};

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

enum class Verdict { kValid, kInvalid, kEither };

void check(const char *fn, Verdict v, tlrt_status s, tlrt_buffer *out, u128 want_size) {
  if (s == TLRT_OK) {
    if (v == Verdict::kInvalid || out == nullptr) violated(fn, s);
    if (size_of(out) != want_size) violated(fn, TLRT_ERR_SHAPE);
    return;
  }
  if (out != nullptr) violated(fn, s);
  if (v == Verdict::kValid) violated(fn, s);
  if (s != TLRT_ERR_INVALID_ARGUMENT && s != TLRT_ERR_SHAPE && s != TLRT_ERR_OVERFLOW)
    violated(fn, s);
}

struct Geo {
  uint32_t rank = 0;
  uint64_t in[10], k[10], s[10], p[10], d[10];
};

void draw(Input &in, Geo &g, bool dilation) {
  g.rank = in.byte() % 10;
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

// ---- the struct forms ------------------------------------------------------------------------

// How the trailing byte varies a geometry struct, and what the library must then answer.
enum class StructVariant { kExact, kTooSmall, kZeroTail, kNonzeroTail, kHighRank };

StructVariant struct_variant(Input &in) {
  const uint8_t b = in.byte();  // 0 once the input is used up: the exact struct
  switch (b % 8) {
    case 1: return StructVariant::kTooSmall;
    case 2: return StructVariant::kZeroTail;
    case 3: return StructVariant::kNonzeroTail;
    case 4: return StructVariant::kHighRank;
    default: return StructVariant::kExact;
  }
}

// 4096 bytes holding a geometry struct T with the variant applied (a struct_size of at most 4096
// always has memory behind it).
template <class T>
struct StructMem {
  uint64_t mem[512] = {};
  T *get() { return reinterpret_cast<T *>(mem); }
  void apply(StructVariant v, uint8_t salt) {
    T *g = get();
    g->struct_size = sizeof(T);
    if (v == StructVariant::kTooSmall) g->struct_size = salt % sizeof(T);
    if (v == StructVariant::kZeroTail) g->struct_size = sizeof(T) + 1 + salt;
    if (v == StructVariant::kNonzeroTail) {
      g->struct_size = sizeof(T) + 1 + salt;
      reinterpret_cast<unsigned char *>(mem)[sizeof(T) + salt] = 0x5a;
    }
    if (v == StructVariant::kHighRank) g->rank |= uint64_t{1} << (32 + salt % 32);
  }
};

// Whether the variant makes every call fail with TLRT_ERR_INVALID_ARGUMENT on the struct (where
// the call gets as far as the geometry).
bool variant_rejects(StructVariant v) {
  return v == StructVariant::kTooSmall || v == StructVariant::kNonzeroTail ||
         v == StructVariant::kHighRank;
}

// Same status, and for a success the same size and bits (then frees out2).
void same_result(const char *fn, tlrt_status s1, tlrt_buffer *out1, tlrt_status s2,
                 tlrt_buffer *out2) {
  if (s1 != s2) violated(fn, s2);
  if (s2 != TLRT_OK) {
    if (out2 != nullptr) violated(fn, s2);
    return;
  }
  const uint64_t n = size_of(out1);
  if (size_of(out2) != n) violated(fn, TLRT_ERR_SHAPE);
  std::vector<float> a(n), b(n);
  if (n && (tlrt_buffer_to_f32(out1, a.data(), n) != TLRT_OK ||
            tlrt_buffer_to_f32(out2, b.data(), n) != TLRT_OK))
    violated(fn, TLRT_ERR_INTERNAL);
  if (n && std::memcmp(a.data(), b.data(), 4 * n) != 0) violated(fn, TLRT_ERR_INTERNAL);
  tlrt_buffer_free(out2);
}

// The output-dims query against the oracle (`valid`: the geometry passes; `either`: the header
// leaves it open; `want_dims` the shape) and against the call's status s / output out.
void check_query(const char *fn, tlrt_status q, bool valid, bool either, bool rejected,
                 const uint64_t *dims, uint32_t rank, uint64_t n,
                 const std::vector<u128> &want_dims, tlrt_status s, tlrt_buffer *out) {
  if (q == TLRT_OK) {
    if (rejected || (!valid && !either)) violated(fn, q);
    if (rank != want_dims.size() || n != product(want_dims)) violated(fn, TLRT_ERR_SHAPE);
    for (uint32_t i = 0; i < rank; ++i)
      if (dims[i] != want_dims[i]) violated(fn, TLRT_ERR_SHAPE);
  } else {
    if (rank != 0 || n != 0) violated(fn, q);
    if (valid && !either && !rejected) violated(fn, q);
    if (q != TLRT_ERR_INVALID_ARGUMENT && q != TLRT_ERR_OVERFLOW) violated(fn, q);
  }
  // Against the call: it succeeds only if the query does, with the query's count; the query
  // rejects a value (TLRT_ERR_INVALID_ARGUMENT) exactly when the call does.
  if (s == TLRT_OK && (q != TLRT_OK || size_of(out) != n)) violated(fn, TLRT_ERR_SHAPE);
  if ((q == TLRT_ERR_INVALID_ARGUMENT) != (s == TLRT_ERR_INVALID_ARGUMENT)) violated(fn, q);
}

// ---- pooling ---------------------------------------------------------------------------------

// The pooled value of one window over x (small integers), per abi/tlrt_pool.h.
float pool_value(bool is_max, bool include_pad, const Geo &g, const std::vector<uint64_t> &out,
                 const float *x, const uint64_t *o) {
  uint64_t idx[8] = {0};
  const uint32_t r = g.rank;
  float best = 0.0f, sum = -0.0f;
  bool any = false;
  uint64_t cells = 0;
  // walk the window offsets in row-major order; keep the real cells
  for (;;) {
    bool real = true;
    uint64_t flat = 0;
    for (uint32_t a = 0; a < r; ++a) {
      const int64_t pos = (int64_t)(o[a] * g.s[a]) - (int64_t)g.p[a] + (int64_t)idx[a];
      if (pos < 0 || (uint64_t)pos >= g.in[a]) real = false;
      flat = flat * g.in[a] + (real ? (uint64_t)pos : 0);
    }
    if (real) {
      const float v = x[flat];
      if (!any || v > best) best = v;
      any = true;
      sum += v;
      ++cells;
    }
    uint32_t a = r;
    while (a > 0) {
      --a;
      if (++idx[a] < g.k[a]) break;
      idx[a] = 0;
      if (a == 0) goto done;
    }
    if (r == 0) break;
  }
done:
  (void)out;
  if (is_max) return best;
  float denom = 1.0f;
  if (include_pad) {
    for (uint32_t a = 0; a < r; ++a) denom *= (float)g.k[a];
  } else {
    denom = (float)cells;
  }
  return sum / denom;
}

void fuzz_pool(Input &in) {
  const bool is_max = in.byte() % 2;
  const bool include_pad = in.byte() % 2;
  const uint64_t batch = in.byte() % 4 ? in.byte() % 3 : in.dim();
  const uint64_t channels = in.byte() % 4 ? 1 + in.byte() % 3 : in.dim();
  Geo g;
  draw(in, g, false);
  Verdict v = Verdict::kValid;
  std::vector<u128> in_dims{batch, channels}, out_dims{batch, channels};
  bool geometry_ok = rank_ok(g);
  for (uint32_t a = 0; geometry_ok && a < g.rank; ++a) {
    if (g.k[a] == 0 || g.s[a] == 0 || (u128)2 * g.p[a] > g.k[a]) geometry_ok = false;
  }
  std::vector<uint64_t> out_ext;
  if (geometry_ok) {
    for (uint32_t a = 0; a < g.rank; ++a) {
      in_dims.push_back(g.in[a]);
      const u128 padded = (u128)g.in[a] + 2 * (u128)g.p[a];
      const u128 o = (g.in[a] >= 1 && padded >= g.k[a]) ? (padded - g.k[a]) / g.s[a] + 1 : 0;
      if (padded > kMax64) v = Verdict::kEither;  // "an extent beyond 2^64": implementation's call
      out_dims.push_back(o);
      out_ext.push_back((uint64_t)o);
    }
  }
  std::vector<float> xv;
  tlrt_buffer *x = make(in, geometry_ok ? product(in_dims) : in.byte() % 16, xv);
  const u128 want = geometry_ok ? product(out_dims) : 0;
  if (!geometry_ok || product(in_dims) != xv.size()) {
    v = Verdict::kInvalid;
  } else if (want > kMaxElements) {
    v = Verdict::kInvalid;
  }
  if (v != Verdict::kInvalid && want > kMaxRun) {
    tlrt_buffer_free(x);
    return;
  }
  tlrt_buffer *out = (tlrt_buffer *)1;
  const tlrt_status s =
      is_max ? tlrt_maxpool_fwd(x, batch, channels, g.in, g.rank, g.k, g.s, g.p, &out)
             : tlrt_avgpool_fwd(x, batch, channels, g.in, g.rank, g.k, g.s, g.p, include_pad, &out);
  const char *fn = is_max ? "tlrt_maxpool_fwd" : "tlrt_avgpool_fwd";
  check(fn, v, s, out, want);
  {  // The struct form and the query.
    const StructVariant sv = struct_variant(in);
    StructMem<tlrt_pool_geometry> m;
    tlrt_pool_geometry *pg = m.get();
    pg->rank = g.rank;
    pg->batch = batch;
    pg->channels = channels;
    for (uint32_t a = 0; a < g.rank && a < 8; ++a) {
      pg->in_spatial[a] = g.in[a];
      pg->kernel[a] = g.k[a];
      pg->stride[a] = g.s[a];
      pg->padding[a] = g.p[a];
    }
    m.apply(sv, in.byte());
    const bool rejected = variant_rejects(sv);
    tlrt_buffer *out2 = (tlrt_buffer *)1;
    const tlrt_status s2 = is_max ? tlrt_maxpool_fwd_geom(x, pg, &out2)
                                  : tlrt_avgpool_fwd_geom(x, pg, include_pad, &out2);
    if (rejected) {
      if (s2 != TLRT_ERR_INVALID_ARGUMENT || out2 != nullptr) violated("pool struct variant", s2);
    } else {
      same_result(is_max ? "tlrt_maxpool_fwd_geom" : "tlrt_avgpool_fwd_geom", s, out, s2, out2);
    }
    uint64_t dims[TLRT_POOL_MAX_DIMS];
    uint32_t rank = 7;
    uint64_t n = 7;
    const tlrt_status q = tlrt_pool_output_dims(pg, dims, TLRT_POOL_MAX_DIMS, &rank, &n);
    std::vector<u128> want_dims = out_dims;
    bool either = false;
    for (uint32_t a = 0; geometry_ok && a < g.rank; ++a)
      either = either || (u128)g.in[a] + 2 * (u128)g.p[a] > kMax64;
    const bool valid = geometry_ok && product(out_dims) <= kMaxElements;
    check_query("tlrt_pool_output_dims", q, valid, either, rejected, dims, rank, n, want_dims,
                rejected ? TLRT_ERR_INVALID_ARGUMENT : s, rejected ? nullptr : out);
  }
  bool small_windows = true;  // the oracle walks every window offset: only for small geometry
  for (uint32_t a = 0; a < g.rank; ++a)
    small_windows = small_windows && g.k[a] <= 64 && g.s[a] <= 64 && g.p[a] <= 64;
  if (s == TLRT_OK && want > 0 && small_windows) {  // the values, window by window
    std::vector<float> got((size_t)want);
    if (tlrt_buffer_to_f32(out, got.data(), got.size()) != TLRT_OK) violated(fn, TLRT_ERR_INTERNAL);
    const u128 plane_in = product(std::vector<u128>(in_dims.begin() + 2, in_dims.end()));
    const u128 plane_out = product(std::vector<u128>(out_dims.begin() + 2, out_dims.end()));
    for (uint64_t e = 0; e < (uint64_t)want; ++e) {
      const uint64_t plane = e / (uint64_t)plane_out;
      uint64_t rest = e % (uint64_t)plane_out, o[8];
      for (uint32_t a = g.rank; a-- > 0;) {
        o[a] = rest % out_ext[a];
        rest /= out_ext[a];
      }
      const float w = pool_value(is_max, include_pad, g, out_ext,
                                 xv.data() + plane * (uint64_t)plane_in, o);
      if (std::memcmp(&w, &got[e], 4) != 0) violated(fn, TLRT_ERR_INTERNAL);
    }
  }
  if (s == TLRT_OK) tlrt_buffer_free(out);
  tlrt_buffer_free(x);
}

// ---- convolution -----------------------------------------------------------------------------

void fuzz_conv(Input &in) {
  const bool transposed = in.byte() % 2;
  const bool with_bias = in.byte() % 2;
  const uint64_t batch = in.byte() % 4 ? in.byte() % 3 : in.dim();
  const uint64_t in_ch = in.byte() % 4 ? 1 + in.byte() % 4 : in.dim();
  const uint64_t out_ch = in.byte() % 4 ? 1 + in.byte() % 4 : in.dim();
  const uint64_t groups = in.byte() % 4 ? 1 + in.byte() % 2 : in.small_or_dim();
  Geo g;
  draw(in, g, true);
  Verdict v = Verdict::kValid;
  bool geometry_ok = rank_ok(g) && groups >= 1 && in_ch % groups == 0 && out_ch % groups == 0;
  for (uint32_t a = 0; geometry_ok && a < g.rank; ++a) {
    if (g.k[a] == 0 || g.s[a] == 0 || g.d[a] == 0) geometry_ok = false;
  }
  std::vector<u128> in_dims{batch, in_ch}, out_dims{batch, out_ch}, k_dims;
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
  std::vector<float> xv, kv, bv;
  tlrt_buffer *x = make(in, geometry_ok ? product(in_dims) : in.byte() % 16, xv);
  tlrt_buffer *kern = make(in, geometry_ok ? product(k_dims) : in.byte() % 16, kv);
  tlrt_buffer *bias = with_bias ? make(in, out_ch, bv) : nullptr;
  const u128 want = geometry_ok ? product(out_dims) : 0;
  if (!geometry_ok || product(in_dims) != xv.size() || product(k_dims) != kv.size() ||
      (with_bias && (u128)out_ch != bv.size())) {
    v = Verdict::kInvalid;
  } else if (extent_overflow || want > kMaxElements) {
    v = Verdict::kInvalid;
  } else if (near_limit) {
    v = Verdict::kEither;  // the 2^62 index limit, documented for non-empty outputs
  }
  if (v != Verdict::kInvalid && want > kMaxRun) {
    tlrt_buffer_free(x);
    tlrt_buffer_free(kern);
    tlrt_buffer_free(bias);
    return;
  }
  tlrt_buffer *out = (tlrt_buffer *)1;
  const tlrt_status s =
      transposed ? tlrt_convtranspose_fwd(kern, bias, x, batch, in_ch, out_ch, g.in, g.rank, g.k,
                                          g.s, g.p, g.d, groups, &out)
                 : tlrt_conv_fwd(kern, bias, x, batch, in_ch, out_ch, g.in, g.rank, g.k, g.s, g.p,
                                 g.d, groups, &out);
  check(transposed ? "tlrt_convtranspose_fwd" : "tlrt_conv_fwd", v, s, out, want);
  {  // The struct form and the query.
    const StructVariant sv = struct_variant(in);
    StructMem<tlrt_conv_geometry> m;
    tlrt_conv_geometry *cg = m.get();
    cg->rank = g.rank;
    cg->batch = batch;
    cg->in_channels = in_ch;
    cg->out_channels = out_ch;
    cg->groups = groups;
    for (uint32_t a = 0; a < g.rank && a < 8; ++a) {
      cg->in_spatial[a] = g.in[a];
      cg->kernel_size[a] = g.k[a];
      cg->stride[a] = g.s[a];
      cg->padding[a] = g.p[a];
      cg->dilation[a] = g.d[a];
    }
    m.apply(sv, in.byte());
    const bool rejected = variant_rejects(sv);
    tlrt_buffer *out2 = (tlrt_buffer *)1;
    const tlrt_status s2 = transposed ? tlrt_convtranspose_fwd_geom(kern, bias, x, cg, &out2)
                                      : tlrt_conv_fwd_geom(kern, bias, x, cg, &out2);
    if (rejected) {
      if (s2 != TLRT_ERR_INVALID_ARGUMENT || out2 != nullptr) violated("conv struct variant", s2);
    } else {
      same_result(transposed ? "tlrt_convtranspose_fwd_geom" : "tlrt_conv_fwd_geom", s, out, s2,
                  out2);
    }
    uint64_t dims[TLRT_CONV_MAX_DIMS];
    uint32_t rank = 7;
    uint64_t n = 7;
    const tlrt_status q =
        transposed ? tlrt_convtranspose_output_dims(cg, dims, TLRT_CONV_MAX_DIMS, &rank, &n)
                   : tlrt_conv_output_dims(cg, dims, TLRT_CONV_MAX_DIMS, &rank, &n);
    const bool valid = geometry_ok && !extent_overflow && product(out_dims) <= kMaxElements;
    check_query(transposed ? "tlrt_convtranspose_output_dims" : "tlrt_conv_output_dims", q, valid,
                near_limit, rejected, dims, rank, n, out_dims,
                rejected ? TLRT_ERR_INVALID_ARGUMENT : s, rejected ? nullptr : out);
  }
  if (s == TLRT_OK) tlrt_buffer_free(out);
  tlrt_buffer_free(x);
  tlrt_buffer_free(kern);
  tlrt_buffer_free(bias);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  Input in{data, size};
  if (in.byte() % 2) {
    fuzz_pool(in);
  } else {
    fuzz_conv(in);
  }
  return 0;
}

#ifdef TLRT_FUZZ_REPLAY
#include "replay_main.hpp"
#endif
