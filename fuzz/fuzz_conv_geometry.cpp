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
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
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
