// libFuzzer target for the shape, rank, axis, index and count guards of the entry points that take
// dimensions or index lists (reductions, broadcast_to, permute, slices, concatenation,
// gather/scatter through host lists and index buffers) and of the float32 byte transfers: the
// input decodes into one call with
// arbitrary ranks, dimensions (small values, 0, powers of two up to 2^63, values around 2^32,
// 2^60 and 2^64 - 1, so products overflow in every way), axes and axis maps, over a real CPU
// buffer whose size may or may not match.
// An independent oracle (128-bit products, its own validation) says whether the call is valid:
//   - valid: the call must succeed, the output must have the predicted size and the predicted
//     values (inputs are small integers, so every sum is exact whatever the order);
//   - invalid: the call must fail with one of the statuses the header documents, with the
//     out-parameter NULL.
// Sanitizers (ASan/UBSan in the fuzz build, valgrind over the replay test) catch out-of-bounds
// access. Built as a fuzzer with -Dfuzz=true (clang) and as the replay driver
// fuzz_replay_shape_guards (meson suite 'fuzz').
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <cstring>
#include <initializer_list>
#include <utility>
#include <vector>

#include "torchlean_rt.h"

namespace {

using u128 = unsigned __int128;

struct Input {
  const uint8_t *p;
  size_t n;
  uint8_t byte() {
    if (n == 0) return 0;
    --n;
    return *p++;
  }
  // A dimension: mostly small, sometimes huge.
  uint64_t dim() {
    const uint8_t sel = byte();
    const uint8_t v = byte();
    switch (sel % 8) {
      case 0: case 1: case 2: case 3: return v % 6;
      case 4: return uint64_t{1} << (v % 64);
      case 5: return UINT64_MAX - v % 3;
      case 6: return (uint64_t{1} << 60) - 1 + v % 3;
      default: return (uint64_t{1} << 32) - 1 + v % 3;
    }
  }
};

[[noreturn]] void violated(const char *what, tlrt_status s) {
  std::fprintf(stderr, "contract violated: %s (status %s, last error: %s)\n", what,
               tlrt_status_string(s), tlrt_last_error());
  std::abort();
}

// Product in 128 bits, saturated at 2^127 (enough to compare with any 64-bit size).
u128 product(const uint64_t *d, uint32_t n) {
  u128 p = 1;
  for (uint32_t i = 0; i < n; ++i) {
    if (d[i] == 0) return 0;
    if (p > ((u128)1 << 64)) continue;  // stays above every 64-bit count
    p *= d[i];
  }
  return p;
}

constexpr uint64_t kMaxElements = uint64_t{1} << 60;
constexpr uint64_t kMaxBuffer = 4096;  // the fuzzer's real buffers stay small
constexpr uint64_t kMaxRun = 65536;    // valid calls with larger outputs are not run (time)

void expect_failure(const char *fn, tlrt_status s, tlrt_buffer *out,
                    std::initializer_list<tlrt_status> allowed) {
  if (out != nullptr) violated(fn, s);
  for (tlrt_status a : allowed)
    if (s == a) return;
  violated(fn, s);
}

std::vector<float> values(const tlrt_buffer *b) {
  uint64_t n = 0;
  if (tlrt_buffer_size(b, &n) != TLRT_OK) violated("tlrt_buffer_size", TLRT_ERR_INTERNAL);
  std::vector<float> v(n);
  if (n && tlrt_buffer_to_f32(b, v.data(), n) != TLRT_OK)
    violated("tlrt_buffer_to_f32", TLRT_ERR_INTERNAL);
  return v;
}

void expect_values(const char *fn, tlrt_status s, tlrt_buffer *out, const std::vector<float> &want) {
  if (s != TLRT_OK || out == nullptr) violated(fn, s);
  const std::vector<float> got = values(out);
  if (got.size() != want.size()) violated(fn, TLRT_ERR_SHAPE);
  for (size_t i = 0; i < got.size(); ++i)
    if (got[i] != want[i]) violated(fn, TLRT_ERR_INTERNAL);
  tlrt_buffer_free(out);
}

// Row-major strides of dims.
std::vector<uint64_t> strides(const uint64_t *d, uint32_t r) {
  std::vector<uint64_t> s(r, 1);
  for (uint32_t i = r; i-- > 1;) s[i - 1] = s[i] * d[i];
  return s;
}

void fuzz_sum_axis(Input &in, const tlrt_buffer *x, const std::vector<float> &xv) {
  uint64_t dims[10];
  const uint32_t rank = in.byte() % 10;
  for (uint32_t i = 0; i < rank; ++i) dims[i] = in.dim();
  const uint32_t axis = in.byte() % 10;
  bool valid = rank >= 1 && rank <= 8 && axis < rank && product(dims, rank) == xv.size();
  if (valid) {  // the output count (dims without the axis) may be huge when dims[axis] == 0
    uint64_t rest[10];
    uint32_t r = 0;
    for (uint32_t i = 0; i < rank; ++i)
      if (i != axis) rest[r++] = dims[i];
    const u128 nout = product(rest, r);
    if (nout > kMaxElements) valid = false;               // TLRT_ERR_OVERFLOW
    else if (nout > kMaxRun) return;          // valid, too large to run here
  }
  tlrt_buffer *out = (tlrt_buffer *)1;
  const tlrt_status s = tlrt_reduce_sum_axis(x, dims, rank, axis, &out);
  if (!valid) {
    expect_failure("tlrt_reduce_sum_axis", s, out,
                   {TLRT_ERR_INVALID_ARGUMENT, TLRT_ERR_INDEX, TLRT_ERR_SHAPE, TLRT_ERR_OVERFLOW});
    return;
  }
  uint64_t outer = 1, inner = 1;
  for (uint32_t i = 0; i < axis; ++i) outer *= dims[i];
  for (uint32_t i = axis + 1; i < rank; ++i) inner *= dims[i];
  const uint64_t m = dims[axis];
  std::vector<float> want(outer * inner, 0.0f);
  if (xv.empty()) outer = 0;  // nothing to add (the other factors may be huge)
  for (uint64_t o = 0; o < outer; ++o)
    for (uint64_t j = 0; j < m; ++j)
      for (uint64_t i = 0; i < inner; ++i) want[o * inner + i] += xv[(o * m + j) * inner + i];
  expect_values("tlrt_reduce_sum_axis", s, out, want);
}

void fuzz_matrix(Input &in, const tlrt_buffer *x, const std::vector<float> &xv) {
  const uint64_t rows = in.dim(), cols = in.dim();
  const int which = in.byte() % 4;
  const bool axis0 = which % 2 == 0, sum = which < 2;
  const uint64_t d[2] = {rows, cols};
  const bool shape_ok = product(d, 2) == xv.size();
  const uint64_t nout = axis0 ? cols : rows;
  if (shape_ok && nout > kMaxRun && nout <= kMaxElements) return;  // valid, too large
  tlrt_buffer *out = (tlrt_buffer *)1;
  tlrt_status s;
  switch (which) {
    case 0: s = tlrt_reduce_sum_axis0(x, rows, cols, &out); break;
    case 1: s = tlrt_reduce_sum_axis1(x, rows, cols, &out); break;
    case 2: s = tlrt_reduce_max_axis0(x, rows, cols, &out); break;
    default: s = tlrt_reduce_max_axis1(x, rows, cols, &out); break;
  }
  if (!shape_ok || nout > kMaxElements) {  // e.g. (0, 2^62): no elements but too many outputs
    expect_failure("tlrt_reduce_*_axis0/1", s, out, {TLRT_ERR_SHAPE, TLRT_ERR_OVERFLOW});
    return;
  }
  std::vector<float> want(nout, sum ? 0.0f : -INFINITY);
  for (uint64_t i = 0; i < rows && !xv.empty(); ++i)  // rows or cols may be huge when empty
    for (uint64_t j = 0; j < cols; ++j) {
      float &w = want[axis0 ? j : i];
      const float v = xv[i * cols + j];
      w = sum ? w + v : (v > w ? v : w);
    }
  expect_values("tlrt_reduce_*_axis0/1", s, out, want);
}

// The broadcast axis map (shared by tlrt_reduce_from_broadcast and, when present, the layout
// family's tlrt_broadcast_to).
struct Map {
  uint64_t in_dims[10], out_dims[10];
  uint32_t map[10];
  uint32_t in_rank, out_rank;
  bool valid(uint64_t nx_in, uint64_t nx_out) const {
    if (in_rank > 8 || out_rank > 8) return false;
    bool used[10] = {};
    for (uint32_t j = 0; j < out_rank; ++j) {
      if (map[j] > in_rank) return false;
      if (map[j] == 0) continue;
      const uint32_t k = map[j] - 1;
      if (used[k]) return false;
      used[k] = true;
      if (in_dims[k] != 1 && in_dims[k] != out_dims[j]) return false;
    }
    for (uint32_t k = 0; k < in_rank; ++k)
      if (!used[k] && in_dims[k] != 1) return false;
    const u128 pi = product(in_dims, in_rank), po = product(out_dims, out_rank);
    if (pi > kMaxElements || po > kMaxElements) return false;
    return pi == nx_in && po == nx_out;
  }
};

Map decode_map(Input &in, bool plausible) {
  Map m{};
  m.out_rank = in.byte() % 10;
  m.in_rank = in.byte() % 10;
  for (uint32_t j = 0; j < m.out_rank; ++j) m.out_dims[j] = in.dim();
  if (plausible && m.in_rank <= m.out_rank) {
    // Mostly well-formed maps: input axis k read by output axis j_k, in order.
    uint32_t j = 0;
    for (uint32_t k = 0; k < m.in_rank; ++k) {
      while (j < m.out_rank && in.byte() % 3 == 0) m.map[j++] = 0;
      if (j < m.out_rank) {
        m.map[j] = k + 1;
        m.in_dims[k] = in.byte() % 2 ? 1 : m.out_dims[j];
        ++j;
      } else {
        m.in_dims[k] = in.dim();
      }
    }
    for (; j < m.out_rank; ++j) m.map[j] = 0;
  } else {
    for (uint32_t k = 0; k < m.in_rank; ++k) m.in_dims[k] = in.dim();
    for (uint32_t j = 0; j < m.out_rank; ++j) m.map[j] = in.byte() % 10;
  }
  return m;
}

// For output element b (flat), the flat index of the input element it reads.
uint64_t source_of(const Map &m, uint64_t b) {
  const std::vector<uint64_t> so = strides(m.out_dims, m.out_rank);
  const std::vector<uint64_t> si = strides(m.in_dims, m.in_rank);
  uint64_t a = 0;
  for (uint32_t j = 0; j < m.out_rank; ++j) {
    const uint64_t bj = (b / so[j]) % m.out_dims[j];
    if (m.map[j] != 0 && m.in_dims[m.map[j] - 1] != 1) a += bj * si[m.map[j] - 1];
  }
  return a;
}

void fuzz_from_broadcast(Input &in, const tlrt_buffer *x, const std::vector<float> &xv) {
  const Map m = decode_map(in, in.byte() % 4 != 0);
  const u128 pi = product(m.in_dims, m.in_rank);
  const bool valid = pi <= kMaxElements && m.valid((uint64_t)pi, xv.size());
  if (valid && pi > kMaxBuffer) return;  // valid, output too large to run here
  tlrt_buffer *out = (tlrt_buffer *)1;
  const tlrt_status s = tlrt_reduce_from_broadcast(x, m.in_dims, m.in_rank, m.out_dims,
                                                   m.out_rank, m.map, &out);
  if (!valid) {
    expect_failure("tlrt_reduce_from_broadcast", s, out,
                   {TLRT_ERR_INVALID_ARGUMENT, TLRT_ERR_INDEX, TLRT_ERR_SHAPE, TLRT_ERR_OVERFLOW});
    return;
  }
  std::vector<float> want((size_t)pi, 0.0f);
  for (uint64_t b = 0; b < xv.size(); ++b) want[source_of(m, b)] += xv[b];
  expect_values("tlrt_reduce_from_broadcast", s, out, want);
}


// tlrt_broadcast_to: the forward of the same axis map.
void fuzz_broadcast_to(Input &in, const tlrt_buffer *x, const std::vector<float> &xv) {
  const Map m = decode_map(in, in.byte() % 4 != 0);
  const u128 po = product(m.out_dims, m.out_rank);
  const bool valid = po <= kMaxElements && m.valid(xv.size(), (uint64_t)po);
  if (valid && po > kMaxRun) return;  // valid, output too large to run here
  tlrt_buffer *out = (tlrt_buffer *)1;
  const tlrt_status s =
      tlrt_broadcast_to(x, m.in_dims, m.in_rank, m.out_dims, m.out_rank, m.map, &out);
  if (!valid) {
    expect_failure("tlrt_broadcast_to", s, out,
                   {TLRT_ERR_INVALID_ARGUMENT, TLRT_ERR_INDEX, TLRT_ERR_SHAPE, TLRT_ERR_OVERFLOW});
    return;
  }
  std::vector<float> want((size_t)po);
  for (uint64_t b = 0; b < want.size(); ++b) want[b] = xv[source_of(m, b)];
  expect_values("tlrt_broadcast_to", s, out, want);
}

// tlrt_permute: arbitrary ranks, dims and permutation entries.
void fuzz_permute(Input &in, const tlrt_buffer *x, const std::vector<float> &xv) {
  uint64_t dims[10];
  uint32_t perm[10];
  const uint32_t rank = in.byte() % 10;
  for (uint32_t i = 0; i < rank; ++i) dims[i] = in.dim();
  const bool shuffle = in.byte() % 4 != 0;  // mostly real permutations
  for (uint32_t i = 0; i < rank; ++i) perm[i] = shuffle ? i : in.byte() % 10;
  for (uint32_t i = rank; shuffle && i > 1; --i) std::swap(perm[i - 1], perm[in.byte() % i]);
  bool valid = rank <= 8 && product(dims, rank) == xv.size();
  bool seen[10] = {};
  for (uint32_t i = 0; i < rank && valid; ++i) {
    if (perm[i] >= rank || seen[perm[i]]) valid = false;
    else seen[perm[i]] = true;
  }
  tlrt_buffer *out = (tlrt_buffer *)1;
  const tlrt_status s = tlrt_permute(x, dims, rank, perm, &out);
  if (!valid) {
    expect_failure("tlrt_permute", s, out,
                   {TLRT_ERR_INVALID_ARGUMENT, TLRT_ERR_INDEX, TLRT_ERR_SHAPE, TLRT_ERR_OVERFLOW});
    return;
  }
  uint64_t odims[10];
  for (uint32_t i = 0; i < rank; ++i) odims[i] = dims[perm[i]];
  const std::vector<uint64_t> si = strides(dims, rank), so = strides(odims, rank);
  std::vector<float> want(xv.size());
  for (uint64_t b = 0; b < want.size(); ++b) {
    uint64_t a = 0;
    for (uint32_t i = 0; i < rank; ++i) a += (b / so[i]) % odims[i] * si[perm[i]];
    want[b] = xv[a];
  }
  expect_values("tlrt_permute", s, out, want);
}

// An index list: mostly small (in and out of range), sometimes around 2^60 and 2^64.
std::vector<uint64_t> decode_indices(Input &in, uint64_t k) {
  std::vector<uint64_t> idx(k);
  for (auto &v : idx) {
    const uint8_t sel = in.byte();
    switch (sel % 16) {
      case 0: v = kMaxElements - 1 + in.byte() % 3; break;  // 2^60 - 1 (out of range), 2^60, +1
      case 1: v = UINT64_MAX - in.byte() % 2; break;         // -1, -2 cast
      default: v = (uint64_t)in.byte() << (sel % 3 == 0 ? 4 : 0);
    }
  }
  return idx;
}

// tlrt_gather_vec / tlrt_scatter_add with a stated n and a host list that may hold non-indices,
// or their _ibuf variants with the same entries in an int64 (or, where they fit, int32) buffer:
// there a non-index reads 0 / is skipped and is counted by tlrt_index_faults, never an error;
// the scatter's x may then be NULL (zeros).
void fuzz_gather_scatter(Input &in, const tlrt_buffer *x, const std::vector<float> &xv) {
  const uint8_t form = in.byte() % 4;  // 0, 1: host list; 2: int64 buffer; 3: int32 buffer
  const bool ibuf = form >= 2;
  const bool scatter = in.byte() % 2;
  const bool null_x = ibuf && scatter && in.byte() % 4 == 0;
  const uint64_t n = null_x ? in.byte() % 64 : in.byte() % 8 == 0 ? in.dim() : xv.size();
  const uint64_t k = in.byte() % 40;
  const std::vector<uint64_t> idx = decode_indices(in, k);
  bool indices_ok = true;
  uint64_t faults = 0;
  std::vector<int64_t> i64(k);
  std::vector<int32_t> i32(k);
  for (uint64_t j = 0; j < k; ++j) {
    const uint64_t v = idx[j];
    indices_ok = indices_ok && v < kMaxElements;
    i64[j] = (int64_t)v;
    // (int32: entries >= 2^31 become INT32_MAX, out of range as they were; non-indices -1, -2)
    i32[j] = v < kMaxElements ? (int32_t)std::min<uint64_t>(v, INT32_MAX) : -1 - (int32_t)(v & 1);
    faults += v >= kMaxElements;
  }
  const bool sized = null_x || n == xv.size();
  const bool valid = sized && (ibuf || indices_ok);
  tlrt_buffer *out = (tlrt_buffer *)1;
  tlrt_status s;
  std::vector<float> vals(k);
  for (uint64_t j = 0; j < k; ++j) vals[j] = (float)(int)(j % 7) - 3.0f;
  tlrt_buffer *vb = nullptr, *ib = nullptr;
  if (scatter && tlrt_buffer_from_f32(TLRT_DEVICE_CPU, vals.data(), k, &vb) != TLRT_OK)
    std::abort();
  if (form == 2 && tlrt_buffer_from_i64(TLRT_DEVICE_CPU, i64.data(), k, &ib) != TLRT_OK)
    std::abort();
  if (form == 3 && tlrt_buffer_from_i32(TLRT_DEVICE_CPU, i32.data(), k, &ib) != TLRT_OK)
    std::abort();
  uint64_t before = 0, after = 0;
  if (tlrt_index_faults(TLRT_DEVICE_CPU, false, &before) != TLRT_OK) std::abort();
  if (scatter)
    s = ibuf ? tlrt_scatter_add_ibuf(null_x ? nullptr : x, vb, n, ib, &out)
             : tlrt_scatter_add(x, vb, n, idx.data(), k, &out);
  else
    s = ibuf ? tlrt_gather_vec_ibuf(x, n, ib, &out) : tlrt_gather_vec(x, n, idx.data(), k, &out);
  if (tlrt_index_faults(TLRT_DEVICE_CPU, false, &after) != TLRT_OK) std::abort();
  tlrt_buffer_free(vb);
  tlrt_buffer_free(ib);
  const char *fn = scatter ? (ibuf ? "tlrt_scatter_add_ibuf" : "tlrt_scatter_add")
                           : (ibuf ? "tlrt_gather_vec_ibuf" : "tlrt_gather_vec");
  if (!valid) {
    expect_failure(fn, s, out, {TLRT_ERR_SHAPE, TLRT_ERR_INDEX, TLRT_ERR_OVERFLOW});
    if (after != before) violated(fn, s);  // a failed call counts nothing
    return;
  }
  if (ibuf && s == TLRT_OK && after - before != faults) violated(fn, s);
  const uint64_t m = null_x ? n : xv.size();
  std::vector<float> want;
  if (scatter) {
    want = null_x ? std::vector<float>(m, 0.0f) : xv;
    // Small integers: any order of the additions gives these exact sums.
    std::vector<float> add(m, 0.0f);
    std::vector<bool> hit(m, false);
    for (uint64_t j = 0; j < k; ++j)
      if (idx[j] < m) add[idx[j]] += vals[j], hit[idx[j]] = true;
    for (size_t t = 0; t < want.size(); ++t)
      if (hit[t]) want[t] += add[t];
  } else {
    for (uint64_t v : idx) want.push_back(v < xv.size() ? xv[v] : 0.0f);
  }
  expect_values(fn, s, out, want);
}

// tlrt_slice1d / tlrt_slice_axis0 with bounds anywhere in 64 bits.
void fuzz_slice(Input &in, const tlrt_buffer *x, const std::vector<float> &xv) {
  const bool axis0 = in.byte() % 2;
  const uint64_t inner = axis0 ? in.dim() : 1;
  const uint64_t rows = in.byte() % 4 == 0 ? in.dim() : (inner ? xv.size() / inner : in.dim());
  const uint64_t start = in.byte() % 2 ? in.dim() : in.byte() % 8;
  const uint64_t len = in.byte() % 2 ? in.dim() : in.byte() % 8;
  const uint64_t d[2] = {rows, inner};
  const bool valid = product(d, 2) == xv.size() && start <= rows && len <= rows - start;
  if (valid && (u128)len * inner > kMaxRun) return;
  tlrt_buffer *out = (tlrt_buffer *)1;
  const tlrt_status s = axis0 ? tlrt_slice_axis0(x, rows, inner, start, len, &out)
                              : tlrt_slice1d(x, rows, start, len, &out);
  if (!valid) {
    expect_failure("tlrt_slice", s, out, {TLRT_ERR_SHAPE, TLRT_ERR_INDEX, TLRT_ERR_OVERFLOW});
    return;
  }
  const std::vector<float> want(xv.begin() + start * inner, xv.begin() + (start + len) * inner);
  expect_values("tlrt_slice", s, out, want);
}

// tlrt_concat1d / tlrt_concat_axis0 of x and a second real buffer y, with claimed counts anywhere
// in 64 bits (sums and products that overflow included).
void fuzz_concat(Input &in, const tlrt_buffer *x, const std::vector<float> &xv) {
  const uint64_t ny = in.byte() % 40;
  std::vector<float> yv(ny);
  for (uint64_t i = 0; i < ny; ++i) yv[i] = (float)((int)in.byte() % 9 - 4);
  tlrt_buffer *y = nullptr;
  if (tlrt_buffer_from_f32(TLRT_DEVICE_CPU, yv.data(), ny, &y) != TLRT_OK) std::abort();
  const bool axis0 = in.byte() % 2;
  const uint64_t inner = axis0 ? (in.byte() % 4 == 0 ? in.dim() : 1 + in.byte() % 4) : 1;
  // Claimed row counts: mostly the true ones (when inner divides), sometimes arbitrary.
  auto rows_of = [&](uint64_t size) {
    return (in.byte() % 4 == 0 || inner == 0) ? in.dim() : size / inner;
  };
  const uint64_t ra = rows_of(xv.size()), rb = rows_of(ny);
  const uint64_t da[2] = {ra, inner}, db[2] = {rb, inner};
  const u128 rows = (u128)ra + rb;
  const bool valid = product(da, 2) == xv.size() && product(db, 2) == ny &&
                     rows <= (u128)UINT64_MAX && (inner == 0 || rows * inner <= kMaxElements);
  tlrt_buffer *out = (tlrt_buffer *)1;
  const tlrt_status s = axis0 ? tlrt_concat_axis0(x, y, ra, rb, inner, &out)
                              : tlrt_concat1d(x, y, ra, rb, &out);
  if (!valid) {
    expect_failure("tlrt_concat", s, out, {TLRT_ERR_SHAPE, TLRT_ERR_OVERFLOW});
  } else {
    std::vector<float> want(xv);
    want.insert(want.end(), yv.begin(), yv.end());
    expect_values("tlrt_concat", s, out, want);
  }
  tlrt_buffer_free(y);
}

// The float32 byte transfers: uploads of any byte count (a multiple of 4 or not) and downloads
// with claimed counts anywhere in 64 bits, into a destination of the true size.
void fuzz_bytes(Input &in, const tlrt_buffer *x, const std::vector<float> &xv) {
  const uint64_t nb = in.byte() % 4 == 0 ? in.dim() : in.byte() % 64;
  if (in.byte() % 2) {  // upload: only byte counts that fit the source are passed with real data
    std::vector<uint8_t> src(nb <= 256 ? nb : 0);
    for (auto &b : src) b = in.byte();
    tlrt_buffer *out = (tlrt_buffer *)1;
    const tlrt_status s = tlrt_buffer_from_bytes(TLRT_DEVICE_CPU, src.data(), src.size(), &out);
    if (src.size() % 4 != 0) {
      expect_failure("tlrt_buffer_from_bytes", s, out, {TLRT_ERR_SHAPE});
      return;
    }
    if (s != TLRT_OK || out == nullptr) violated("tlrt_buffer_from_bytes", s);
    std::vector<uint8_t> back(src.size());
    if (tlrt_buffer_to_bytes(out, back.data(), back.size()) != TLRT_OK || back != src)
      violated("tlrt_buffer_to_bytes round trip", TLRT_ERR_INTERNAL);
    tlrt_buffer_free(out);
    return;
  }
  // download with a claimed count: must fail unless it equals 4 * size, never write past dst
  std::vector<uint8_t> dst(xv.size() * 4 + 1, 0xA5);
  const tlrt_status s = tlrt_buffer_to_bytes(x, dst.data(), nb);
  if (nb != xv.size() * 4) {
    if (s != TLRT_ERR_SHAPE) violated("tlrt_buffer_to_bytes (wrong count)", s);
    return;
  }
  if (s != TLRT_OK || (nb != 0 && std::memcmp(dst.data(), xv.data(), nb) != 0) || dst[nb] != 0xA5)
    violated("tlrt_buffer_to_bytes", s);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  Input in{data, size};
  // A real buffer of small integers (sums of up to 4096 of them are exact in float32).
  const uint64_t hi = in.byte();
  const uint64_t n = (hi << 8 | in.byte()) % (kMaxBuffer + 1);
  std::vector<float> xv(n);
  for (uint64_t i = 0; i < n; ++i) xv[i] = (float)((int)(i * 7 + in.byte()) % 17 - 8);
  tlrt_buffer *x = nullptr;
  if (tlrt_buffer_from_f32(TLRT_DEVICE_CPU, xv.data(), n, &x) != TLRT_OK) std::abort();
  switch (in.byte() % 9) {
    case 0: fuzz_sum_axis(in, x, xv); break;
    case 1: fuzz_matrix(in, x, xv); break;
    case 2: fuzz_from_broadcast(in, x, xv); break;
    case 3: fuzz_broadcast_to(in, x, xv); break;
    case 4: fuzz_permute(in, x, xv); break;
    case 5: fuzz_gather_scatter(in, x, xv); break;
    case 6: fuzz_slice(in, x, xv); break;
    case 7: fuzz_concat(in, x, xv); break;
    default: fuzz_bytes(in, x, xv); break;
  }
  tlrt_buffer_free(x);
  return 0;
}

#ifdef TLRT_FUZZ_REPLAY
#include "replay_main.hpp"
#endif
