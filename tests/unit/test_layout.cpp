// Known answers and independent references for every op of abi/tlrt_layout.h on the CPU backend.
//
// Numeric class "exact" means every output element is a bit-for-bit copy of one input element, so
// every comparison here is on RAW BIT PATTERNS (NaN payloads and signalling NaNs included; not
// th::same_bits, which lets any NaN match any NaN). The references are written from the header's
// words with naive index arithmetic (one division chain per element, no normalisation, no
// tiling), independent of the library's planning:
//  - known answers for every entry point on small hand-written shapes;
//  - edge values (+-0, +-inf, quiet and signalling NaNs with payloads, subnormals, FLT_MAX) moved
//    through every op;
//  - concat/slice (1-D and along axis 0) over empty, size-1 and random shapes and every cut;
//  - transpose2d over shapes around the CPU's 32 x 32 blocks and the library's tiling threshold
//    (thin, square, 1 x n, n x 1, primes, (1000, 1000), (3, 70001));
//  - tlrt_permute on ranks 0..8 with random dims (0, 1 and 2..7 included) and random
//    permutations, against ref_permute; swap_adjacent_at_depth, transpose2d and the permute3d
//    variants against it as well (every depth; the shapes that become a batched transpose, a
//    plain transpose, a row-block copy or a thin gather after the library's normalisation);
//  - broadcast_vec_to_rows / _cols for rows, cols in {0, 1, 2, 3, 4, 5, 31, 32, 33, 1000} and
//    tlrt_broadcast_to on hand-picked and random (in_dims, out_dims, axis_map) triples (inserted
//    axes, size-1 axes, permuted mapped axes, scalars, empty outputs) against ref_broadcast;
//  - the adjoint relation: tlrt_reduce_from_broadcast(tlrt_broadcast_to(x)) = r * x for integer
//    x and repeat count r (exact in float32);
//  - a few validation errors (the exhaustive ones are tests/abi/test_bad_input_layout.cpp);
//  - nothing leaks (allocator telemetry back to its start).
// Under valgrind (TLRT_UNDER_VALGRIND) the largest shapes are skipped.
#include <algorithm>
#include <cstring>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include "harness.hpp"

namespace {

using th::bits_of;
using th::Buf;
using th::Dist;
using th::hex;
using th::make;

using Dims = std::vector<uint64_t>;
using Map = std::vector<uint32_t>;

bool big_ok() { return !th::under_valgrind(); }

uint64_t prod(const Dims &d) {
  uint64_t p = 1;
  for (uint64_t v : d) p *= v;
  return p;
}

std::string str(const Dims &d) {
  std::string s = "(";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? "," : "") + std::to_string(d[i]);
  return s + ")";
}
std::string str(const Map &d) {
  std::string s = "[";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? "," : "") + std::to_string(d[i]);
  return s + "]";
}

float from_bits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Input values: random bit patterns (every class, signalling NaNs included) or the edge values
// plus NaNs with payloads, so that any re-encoding of a value shows.
std::vector<float> values(uint64_t n, uint64_t salt) {
  if (salt % 3 == 0) {
    std::vector<float> e = th::edge_values();
    e.push_back(from_bits(0x7f800001u));  // signalling NaN, payload 1
    e.push_back(from_bits(0xffa5a5a5u));  // negative signalling NaN with a payload
    e.push_back(from_bits(0x7fc12345u));  // quiet NaN with a payload
    e.push_back(from_bits(0x00000001u));  // smallest subnormal
    e.push_back(from_bits(0x807fffffu));  // largest negative subnormal
    std::vector<float> v(n);
    th::Rng rng(salt);
    for (uint64_t i = 0; i < n; ++i) v[i] = (i % 5 == 0) ? e[rng.gen() % e.size()] : (float)i;
    return v;
  }
  return make(Dist::Bits, n, salt);
}

// Raw bit equality of two vectors; reports the first difference.
void expect_bits(const std::vector<float> &got, const std::vector<float> &want,
                 const std::string &what) {
  ++th::checks();
  if (got.size() != want.size()) {
    th::report(__FILE__, __LINE__,
               what + ": " + std::to_string(got.size()) + " elements, expected " +
                   std::to_string(want.size()));
    return;
  }
  for (size_t i = 0; i < got.size(); ++i)
    if (bits_of(got[i]) != bits_of(want[i])) {
      th::report(__FILE__, __LINE__,
                 what + ": element " + std::to_string(i) + " is " + hex(got[i]) + ", expected " +
                     hex(want[i]));
      return;
    }
}

using Call = std::function<tlrt_status(const tlrt_buffer *, tlrt_buffer **)>;

// Uploads x, runs f on the CPU, downloads the output (empty on failure, which is reported).
std::vector<float> run1(const std::vector<float> &x, const Call &f, const std::string &what) {
  Buf bx(th::upload(x));
  Buf y;
  const tlrt_status s = f(bx.get(), y.out());
  TH_CHECK_MSG(s == TLRT_OK, "%s failed: %s", what.c_str(), tlrt_last_error());
  if (s != TLRT_OK) return {};
  tlrt_device d = 99;
  TH_OK(tlrt_buffer_device(y.get(), &d));
  TH_CHECK(d == TLRT_DEVICE_CPU);
  return th::download(y.get());
}

// ---- references (from the header's words) -----------------------------------------------------

// Row-major multi-index of flat index f over d.
std::vector<uint64_t> unflatten(uint64_t f, const Dims &d) {
  std::vector<uint64_t> b(d.size());
  for (size_t k = d.size(); k-- > 0;) {
    b[k] = f % d[k];
    f /= d[k];
  }
  return b;
}
uint64_t flatten(const std::vector<uint64_t> &a, const Dims &d) {
  uint64_t f = 0;
  for (size_t k = 0; k < d.size(); ++k) f = f * d[k] + a[k];
  return f;
}

// out has dims dims[perm[i]]; out[b] = x[a] with a[perm[i]] = b[i].
std::vector<float> ref_permute(const std::vector<float> &x, const Dims &dims, const Map &perm) {
  Dims od(dims.size());
  for (size_t i = 0; i < dims.size(); ++i) od[i] = dims[perm[i]];
  const uint64_t n = prod(od);
  std::vector<float> y(n);
  for (uint64_t f = 0; f < n; ++f) {
    const std::vector<uint64_t> b = unflatten(f, od);
    std::vector<uint64_t> a(dims.size());
    for (size_t i = 0; i < dims.size(); ++i) a[perm[i]] = b[i];
    y[f] = x[flatten(a, dims)];
  }
  return y;
}

// out[b] = x[a], a_k = b_j if axis_map[j] = k + 1 and in_dims[k] == out_dims[j], a_k = 0 for
// every input axis of size 1.
std::vector<float> ref_broadcast(const std::vector<float> &x, const Dims &in, const Dims &out,
                                 const Map &map) {
  const uint64_t n = prod(out);
  std::vector<float> y(n);
  for (uint64_t f = 0; f < n; ++f) {
    const std::vector<uint64_t> b = unflatten(f, out);
    std::vector<uint64_t> a(in.size(), 0);
    for (size_t j = 0; j < out.size(); ++j)
      if (map[j] != 0 && in[map[j] - 1] == out[j]) a[map[j] - 1] = b[j];
    y[f] = x[flatten(a, in)];
  }
  return y;
}

// ---- the entry points through the references -------------------------------------------------

void check_permute_case(const Dims &dims, const Map &perm, uint64_t salt) {
  const std::vector<float> x = values(prod(dims), salt);
  const std::vector<float> want = ref_permute(x, dims, perm);
  const std::string w = "permute " + str(dims) + " by " + str(perm);
  expect_bits(run1(x,
                   [&](const tlrt_buffer *b, tlrt_buffer **o) {
                     return tlrt_permute(b, dims.empty() ? nullptr : dims.data(),
                                         (uint32_t)dims.size(), perm.empty() ? nullptr : perm.data(),
                                         o);
                   },
                   w),
              want, w);
}

void check_broadcast_case(const Dims &in, const Dims &out, const Map &map, uint64_t salt) {
  const std::vector<float> x = values(prod(in), salt);
  const std::vector<float> want = ref_broadcast(x, in, out, map);
  const std::string w = "broadcast_to " + str(in) + " -> " + str(out) + " map " + str(map);
  expect_bits(run1(x,
                   [&](const tlrt_buffer *b, tlrt_buffer **o) {
                     return tlrt_broadcast_to(b, in.empty() ? nullptr : in.data(),
                                              (uint32_t)in.size(),
                                              out.empty() ? nullptr : out.data(),
                                              (uint32_t)out.size(),
                                              map.empty() ? nullptr : map.data(), o);
                   },
                   w),
              want, w);
}

// ---- known answers ----------------------------------------------------------------------------

void check_known_answers() {
  const std::vector<float> a = {1, 2, 3}, b = {4, 5};
  Buf ba(th::upload(a)), bb(th::upload(b)), y;
  TH_OK(tlrt_concat1d(ba.get(), bb.get(), 3, 2, y.out()));
  expect_bits(th::download(y.get()), {1, 2, 3, 4, 5}, "concat1d known");
  TH_OK(tlrt_concat1d(bb.get(), ba.get(), 2, 3, y.out()));
  expect_bits(th::download(y.get()), {4, 5, 1, 2, 3}, "concat1d known (swapped)");
  TH_OK(tlrt_slice1d(ba.get(), 3, 1, 2, y.out()));
  expect_bits(th::download(y.get()), {2, 3}, "slice1d known");
  TH_OK(tlrt_slice1d(ba.get(), 3, 3, 0, y.out()));
  expect_bits(th::download(y.get()), {}, "slice1d empty at the end");

  // (2, 3) and (1, 3) concatenated along axis 0; row 1 of the first.
  const std::vector<float> m23 = {1, 2, 3, 4, 5, 6}, m13 = {7, 8, 9};
  Buf b23(th::upload(m23)), b13(th::upload(m13));
  TH_OK(tlrt_concat_axis0(b23.get(), b13.get(), 2, 1, 3, y.out()));
  expect_bits(th::download(y.get()), {1, 2, 3, 4, 5, 6, 7, 8, 9}, "concat_axis0 known");
  TH_OK(tlrt_slice_axis0(b23.get(), 2, 3, 1, 1, y.out()));
  expect_bits(th::download(y.get()), {4, 5, 6}, "slice_axis0 known");

  // Broadcasts of (1, 2, 3).
  TH_OK(tlrt_broadcast_vec_to_rows(ba.get(), 2, 3, y.out()));
  expect_bits(th::download(y.get()), {1, 2, 3, 1, 2, 3}, "vec_to_rows known");
  TH_OK(tlrt_broadcast_vec_to_cols(ba.get(), 3, 2, y.out()));
  expect_bits(th::download(y.get()), {1, 1, 2, 2, 3, 3}, "vec_to_cols known");
  {
    // x (3, 1) -> (2, 3, 2): inserted axis 0, axis 1 reads input axis 0, axis 2 repeats input
    // axis 1 (size 1).
    const Dims in = {3, 1}, out = {2, 3, 2};
    const Map map = {0, 1, 2};
    TH_OK(tlrt_broadcast_to(ba.get(), in.data(), 2, out.data(), 3, map.data(), y.out()));
    expect_bits(th::download(y.get()), {1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3}, "broadcast_to known");
    // (2, 3) -> (3, 2) through a permuted axis map: a transpose.
    const Dims in2 = {2, 3}, out2 = {3, 2};
    const Map map2 = {2, 1};
    TH_OK(tlrt_broadcast_to(b23.get(), in2.data(), 2, out2.data(), 2, map2.data(), y.out()));
    expect_bits(th::download(y.get()), {1, 4, 2, 5, 3, 6}, "broadcast_to permuting");
    // A scalar to (2, 2), NULL input arrays at rank 0.
    Buf s(th::upload({7.5f}));
    const Dims o22 = {2, 2};
    const Map m00 = {0, 0};
    TH_OK(tlrt_broadcast_to(s.get(), nullptr, 0, o22.data(), 2, m00.data(), y.out()));
    expect_bits(th::download(y.get()), {7.5f, 7.5f, 7.5f, 7.5f}, "broadcast_to scalar");
    // Rank 0 to rank 0: a copy of the one element.
    TH_OK(tlrt_broadcast_to(s.get(), nullptr, 0, nullptr, 0, nullptr, y.out()));
    expect_bits(th::download(y.get()), {7.5f}, "broadcast_to rank 0");
  }

  // Transposes and permutations of (2, 3) and (2, 3, 2).
  TH_OK(tlrt_transpose2d(b23.get(), 2, 3, y.out()));
  expect_bits(th::download(y.get()), {1, 4, 2, 5, 3, 6}, "transpose2d known");
  const std::vector<float> t = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};  // x[i, j, k] = 6i + 2j + k
  Buf bt(th::upload(t));
  TH_OK(tlrt_permute3d_bca(bt.get(), 2, 3, 2, y.out()));  // out[j, k, i]
  expect_bits(th::download(y.get()), {0, 6, 1, 7, 2, 8, 3, 9, 4, 10, 5, 11}, "permute3d_bca known");
  TH_OK(tlrt_permute3d_cab(bt.get(), 2, 3, 2, y.out()));  // out[k, i, j]
  expect_bits(th::download(y.get()), {0, 2, 4, 6, 8, 10, 1, 3, 5, 7, 9, 11}, "permute3d_cab known");
  TH_OK(tlrt_permute3d_acb(bt.get(), 2, 3, 2, y.out()));  // out[i, k, j]
  expect_bits(th::download(y.get()), {0, 2, 4, 1, 3, 5, 6, 8, 10, 7, 9, 11}, "permute3d_acb known");
  const Dims d232 = {2, 3, 2};
  TH_OK(tlrt_swap_adjacent_at_depth(bt.get(), d232.data(), 3, 0, y.out()));  // out[j, i, k]
  expect_bits(th::download(y.get()), {0, 1, 6, 7, 2, 3, 8, 9, 4, 5, 10, 11}, "swap depth 0 known");
  TH_OK(tlrt_swap_adjacent_at_depth(bt.get(), d232.data(), 3, 1, y.out()));  // out[i, k, j]
  expect_bits(th::download(y.get()), {0, 2, 4, 1, 3, 5, 6, 8, 10, 7, 9, 11}, "swap depth 1 known");
  const Map p201 = {2, 0, 1};
  TH_OK(tlrt_permute(bt.get(), d232.data(), 3, p201.data(), y.out()));  // = cab
  expect_bits(th::download(y.get()), {0, 2, 4, 6, 8, 10, 1, 3, 5, 7, 9, 11}, "permute known");
  // Rank 0: a scalar copy, NULL arrays allowed.
  Buf s(th::upload({-0.0f}));
  TH_OK(tlrt_permute(s.get(), nullptr, 0, nullptr, y.out()));
  expect_bits(th::download(y.get()), {-0.0f}, "permute rank 0");

  // A few errors (the full set is in tests/abi/test_bad_input_layout.cpp).
  TH_STATUS(tlrt_slice1d(ba.get(), 3, 2, 2, y.out()), TLRT_ERR_INDEX);
  TH_CHECK(y.get() == nullptr);
  TH_STATUS(tlrt_slice1d(ba.get(), 3, UINT64_MAX, 2, y.out()), TLRT_ERR_INDEX);
  TH_STATUS(tlrt_slice1d(ba.get(), 3, 1, UINT64_MAX, y.out()), TLRT_ERR_INDEX);
  TH_STATUS(tlrt_slice1d(ba.get(), 3, 4, 0, y.out()), TLRT_ERR_INDEX);
  TH_STATUS(tlrt_concat1d(ba.get(), bb.get(), 3, 3, y.out()), TLRT_ERR_SHAPE);
  TH_STATUS(tlrt_swap_adjacent_at_depth(bt.get(), d232.data(), 3, 2, y.out()), TLRT_ERR_INDEX);
  const Map p001 = {0, 0, 1}, p013 = {0, 1, 3};
  TH_STATUS(tlrt_permute(bt.get(), d232.data(), 3, p001.data(), y.out()),
            TLRT_ERR_INVALID_ARGUMENT);
  TH_STATUS(tlrt_permute(bt.get(), d232.data(), 3, p013.data(), y.out()), TLRT_ERR_INDEX);
  TH_STATUS(tlrt_permute(bt.get(), nullptr, 0, nullptr, y.out()), TLRT_ERR_SHAPE);  // 12 != 1
}

// Every value class survives every op bit for bit.
void check_edge_values() {
  std::vector<float> e = values(40, 3);  // salt % 3 == 0: edge values and NaN payloads
  e.push_back(from_bits(0x7f800001u));
  e.push_back(from_bits(0xffa5a5a5u));
  e.push_back(from_bits(0x7fc12345u));
  e.push_back(from_bits(0x80000000u));
  const uint64_t n = e.size();  // 44 = 4 * 11
  Buf be(th::upload(e)), y;
  TH_OK(tlrt_slice1d(be.get(), n, 0, n, y.out()));
  expect_bits(th::download(y.get()), e, "edge values through slice1d");
  TH_OK(tlrt_concat1d(be.get(), be.get(), n, n, y.out()));
  std::vector<float> ee = e;
  ee.insert(ee.end(), e.begin(), e.end());
  expect_bits(th::download(y.get()), ee, "edge values through concat1d");
  const Dims d = {4, 11};
  TH_OK(tlrt_transpose2d(be.get(), 4, 11, y.out()));
  expect_bits(th::download(y.get()), ref_permute(e, d, {1, 0}), "edge values transposed");
  TH_OK(tlrt_broadcast_vec_to_rows(be.get(), 3, n, y.out()));
  expect_bits(th::download(y.get()), ref_broadcast(e, {n}, {3, n}, {0, 1}),
              "edge values to rows");
  TH_OK(tlrt_broadcast_vec_to_cols(be.get(), n, 5, y.out()));
  expect_bits(th::download(y.get()), ref_broadcast(e, {n}, {n, 5}, {1, 0}),
              "edge values to cols");
  TH_OK(tlrt_broadcast_vec_to_cols(be.get(), n, 8, y.out()));
  expect_bits(th::download(y.get()), ref_broadcast(e, {n}, {n, 8}, {1, 0}),
              "edge values to cols (8)");
  const Dims d3 = {2, 2, 11};
  TH_OK(tlrt_permute3d_cab(be.get(), 2, 2, 11, y.out()));
  expect_bits(th::download(y.get()), ref_permute(e, d3, {2, 0, 1}), "edge values cab");
  // Each edge value alone, broadcast: the one element is copied, never re-encoded.
  for (size_t i = 0; i < e.size(); ++i) {
    Buf s(th::upload({e[i]}));
    TH_OK(tlrt_broadcast_vec_to_rows(s.get(), 9, 1, y.out()));
    expect_bits(th::download(y.get()), std::vector<float>(9, e[i]),
                "edge value " + hex(e[i]) + " repeated");
  }
}

// ---- concatenation and slices ------------------------------------------------------------------

void check_concat_slice() {
  uint64_t salt = 100;
  for (uint64_t n : {0, 1, 2, 3, 4, 5, 17, 1000}) {
    for (uint64_t m : {0, 1, 3, 4, 999}) {
      const std::vector<float> a = values(n, ++salt), b = values(m, ++salt);
      std::vector<float> want = a;
      want.insert(want.end(), b.begin(), b.end());
      Buf ba(th::upload(a)), bb(th::upload(b)), y;
      TH_OK(tlrt_concat1d(ba.get(), bb.get(), n, m, y.out()));
      expect_bits(th::download(y.get()), want,
                  "concat1d n=" + std::to_string(n) + " m=" + std::to_string(m));
      // Along axis 0 with inner = 1 (the same) and with inner 3.
      TH_OK(tlrt_concat_axis0(ba.get(), bb.get(), n, m, 1, y.out()));
      expect_bits(th::download(y.get()), want, "concat_axis0 inner 1");
    }
    // Every slice of a vector of n elements.
    const std::vector<float> x = values(n, ++salt);
    Buf bx(th::upload(x)), y;
    for (uint64_t start = 0; start <= n && start < 40; ++start)
      for (uint64_t len = 0; start + len <= n && len < 40; len += 1 + len / 3) {
        TH_OK(tlrt_slice1d(bx.get(), n, start, len, y.out()));
        expect_bits(th::download(y.get()),
                    std::vector<float>(x.begin() + start, x.begin() + start + len),
                    "slice1d n=" + std::to_string(n) + " start=" + std::to_string(start) +
                        " len=" + std::to_string(len));
      }
  }
  // Matrices: (rows_a, inner) then (rows_b, inner), and row slices.
  for (uint64_t inner : {0, 1, 3, 4, 64}) {
    for (uint64_t ra : {0, 1, 5}) {
      for (uint64_t rb : {0, 2, 7}) {
        const std::vector<float> a = values(ra * inner, ++salt), b = values(rb * inner, ++salt);
        std::vector<float> want = a;
        want.insert(want.end(), b.begin(), b.end());
        Buf ba(th::upload(a)), bb(th::upload(b)), y;
        TH_OK(tlrt_concat_axis0(ba.get(), bb.get(), ra, rb, inner, y.out()));
        const std::string w = "concat_axis0 (" + std::to_string(ra) + "+" + std::to_string(rb) +
                              ", " + std::to_string(inner) + ")";
        expect_bits(th::download(y.get()), want, w);
        // Slices of the concatenation: every (start, len) of its rows.
        const uint64_t rows = ra + rb;
        for (uint64_t start = 0; start <= rows; ++start)
          for (uint64_t len = 0; start + len <= rows; ++len) {
            Buf s;
            TH_OK(tlrt_slice_axis0(y.get(), rows, inner, start, len, s.out()));
            expect_bits(th::download(s.get()),
                        std::vector<float>(want.begin() + start * inner,
                                           want.begin() + (start + len) * inner),
                        w + " slice start " + std::to_string(start) + " len " +
                            std::to_string(len));
          }
      }
    }
  }
  // inner == 0 with huge row counts: empty, no error.
  Buf e(th::upload({})), y;
  TH_OK(tlrt_concat_axis0(e.get(), e.get(), uint64_t{1} << 62, uint64_t{1} << 62, 0, y.out()));
  expect_bits(th::download(y.get()), {}, "concat_axis0 of 2^62 empty rows");
  TH_OK(tlrt_slice_axis0(e.get(), UINT64_MAX, 0, 5, UINT64_MAX - 5, y.out()));
  expect_bits(th::download(y.get()), {}, "slice_axis0 of empty rows");
}

// ---- transposes and permutations ---------------------------------------------------------------

void check_transpose2d() {
  std::vector<Dims> shapes = {{0, 0}, {0, 5}, {5, 0}, {1, 1},  {1, 7},   {7, 1},   {2, 2},
                              {3, 5}, {4, 4}, {31, 33}, {32, 32}, {33, 31}, {32, 100},
                              {100, 32}, {64, 64}, {65, 63}, {31, 1000}, {1000, 31}, {97, 101},
                              {2, 3000}, {3000, 2}, {256, 257}};
  if (big_ok()) {
    shapes.push_back({1000, 1000});
    shapes.push_back({3, 70001});
    shapes.push_back({70001, 3});
    shapes.push_back({1024, 2048});
  }
  uint64_t salt = 2000;
  for (const Dims &d : shapes) {
    const std::vector<float> x = values(d[0] * d[1], ++salt);
    const std::string w = "transpose2d " + str(d);
    expect_bits(run1(x,
                     [&](const tlrt_buffer *b, tlrt_buffer **o) {
                       return tlrt_transpose2d(b, d[0], d[1], o);
                     },
                     w),
                ref_permute(x, d, {1, 0}), w);
  }
}

using P3 = tlrt_status (*)(const tlrt_buffer *, uint64_t, uint64_t, uint64_t, tlrt_buffer **);

void check_permute3d_and_swap() {
  struct V {
    const char *name;
    P3 fn;
    Map perm;
  };
  const V variants[] = {{"bca", tlrt_permute3d_bca, {1, 2, 0}},
                        {"cab", tlrt_permute3d_cab, {2, 0, 1}},
                        {"acb", tlrt_permute3d_acb, {0, 2, 1}}};
  std::vector<Dims> shapes = {{0, 2, 3}, {2, 0, 3}, {1, 1, 1}, {1, 5, 7},  {5, 1, 7},  {5, 7, 1},
                              {2, 3, 4}, {3, 4, 5}, {4, 4, 4}, {2, 33, 40}, {40, 2, 33},
                              {33, 40, 2}, {3, 64, 64}, {64, 3, 64}, {64, 64, 3}, {7, 31, 37},
                              {2, 100, 8}, {8, 100, 2}, {5, 32, 4}, {6, 35, 33}};
  if (big_ok()) {
    shapes.push_back({16, 128, 96});
    shapes.push_back({3, 300, 500});
    shapes.push_back({500, 3, 300});
  }
  uint64_t salt = 3000;
  for (const Dims &d : shapes) {
    const std::vector<float> x = values(prod(d), ++salt);
    for (const V &v : variants) {
      const std::string w = std::string("permute3d_") + v.name + " " + str(d);
      expect_bits(run1(x,
                       [&](const tlrt_buffer *b, tlrt_buffer **o) {
                         return v.fn(b, d[0], d[1], d[2], o);
                       },
                       w),
                  ref_permute(x, d, v.perm), w);
    }
    for (uint32_t depth = 0; depth < 2; ++depth) {
      Map perm = {0, 1, 2};
      std::swap(perm[depth], perm[depth + 1]);
      const std::string w = "swap_adjacent_at_depth " + str(d) + " depth " + std::to_string(depth);
      expect_bits(run1(x,
                       [&](const tlrt_buffer *b, tlrt_buffer **o) {
                         return tlrt_swap_adjacent_at_depth(b, d.data(), 3, depth, o);
                       },
                       w),
                  ref_permute(x, d, perm), w);
    }
  }
  // swap_adjacent on higher ranks, every depth: (P, p, q, R) with R = 1 (a batched transpose) or
  // R > 1 (row blocks, with R % 4 == 0 and != 0; R = 2 or 4: element transposes).
  th::Rng rng(77);
  const std::vector<Dims> nd = {{2, 3},          {3, 2, 4, 5},     {2, 40, 36, 1},
                                {1, 40, 36, 4},  {2, 2, 2, 2, 2, 2, 2, 2}, {3, 1, 4, 1, 5, 1, 2},
                                {2, 33, 34, 3},  {4, 1, 1, 8},     {5, 6, 7, 8, 1},
                                // trailing blocks of 2 / 4 floats: transpositions of 8- / 16-byte
                                // elements (lay::Transpose::w), with partial blocks and thin sides
                                {2, 40, 36, 2},  {3, 70, 65, 4},   {1, 3, 300, 2},
                                {2, 5, 129, 2, 2}, {1, 64, 64, 2}};
  for (const Dims &d : nd) {
    const std::vector<float> x = values(prod(d), ++salt);
    for (uint32_t depth = 0; depth + 1 < d.size(); ++depth) {
      Map perm(d.size());
      std::iota(perm.begin(), perm.end(), 0u);
      std::swap(perm[depth], perm[depth + 1]);
      const std::string w = "swap_adjacent_at_depth " + str(d) + " depth " + std::to_string(depth);
      expect_bits(run1(x,
                       [&](const tlrt_buffer *b, tlrt_buffer **o) {
                         return tlrt_swap_adjacent_at_depth(b, d.data(), (uint32_t)d.size(), depth,
                                                            o);
                       },
                       w),
                  ref_permute(x, d, perm), w);
    }
  }
}

void check_permute_random() {
  th::Rng rng(99);
  const uint64_t pick[] = {0, 1, 1, 2, 3, 4, 5, 7, 2, 3};
  uint64_t salt = 5000;
  for (uint32_t rank = 0; rank <= 8; ++rank)
    for (int rep = 0; rep < (rank == 0 ? 1 : 40); ++rep) {
      Dims d(rank);
      for (auto &v : d) {
        v = pick[rng.gen() % 10];
        if (rep % 8 != 0 && v == 0) v = 2;  // mostly non-empty
      }
      while (prod(d) > 20000)
        for (auto &v : d)
          if (v > 2) --v;
      Map perm(rank);
      std::iota(perm.begin(), perm.end(), 0u);
      std::shuffle(perm.begin(), perm.end(), rng.gen);
      check_permute_case(d, perm, ++salt);
    }
  // Shapes that normalise into a tiled transpose with batch axes before, between and after.
  const std::vector<std::pair<Dims, Map>> tiled = {
      {{40, 3, 50}, {2, 1, 0}},         {{40, 3, 50}, {1, 2, 0}},
      {{3, 40, 5, 50}, {0, 3, 2, 1}},   {{2, 33, 2, 35, 2}, {4, 3, 2, 1, 0}},
      {{64, 1, 64}, {2, 1, 0}},         {{2, 3, 40, 50}, {3, 2, 0, 1}},
      {{40, 2, 2, 50}, {3, 1, 2, 0}},   {{33, 2, 34}, {2, 0, 1}},
      {{2, 2, 2, 2, 2, 2, 2, 64}, {7, 0, 1, 2, 3, 4, 5, 6}},
      {{5, 1, 3, 1, 7}, {4, 3, 2, 1, 0}}};
  for (const auto &c : tiled) check_permute_case(c.first, c.second, ++salt);
  if (big_ok()) {
    check_permute_case({20, 30, 40, 50}, {3, 1, 2, 0}, ++salt);
    check_permute_case({20, 30, 40, 50}, {2, 3, 0, 1}, ++salt);
    check_permute_case({2, 3, 4, 5, 6, 7, 8, 9}, {7, 6, 5, 4, 3, 2, 1, 0}, ++salt);
  }
}

// ---- broadcasts --------------------------------------------------------------------------------

void check_vec_broadcasts() {
  const uint64_t sizes[] = {0, 1, 2, 3, 4, 5, 31, 32, 33, 1000};
  uint64_t salt = 7000;
  for (uint64_t r : sizes)
    for (uint64_t c : sizes) {
      const std::vector<float> vr = values(c, ++salt), vc = values(r, ++salt);
      const std::string w = "(" + std::to_string(r) + ", " + std::to_string(c) + ")";
      expect_bits(run1(vr,
                       [&](const tlrt_buffer *b, tlrt_buffer **o) {
                         return tlrt_broadcast_vec_to_rows(b, r, c, o);
                       },
                       "vec_to_rows " + w),
                  ref_broadcast(vr, {c}, {r, c}, {0, 1}), "vec_to_rows " + w);
      expect_bits(run1(vc,
                       [&](const tlrt_buffer *b, tlrt_buffer **o) {
                         return tlrt_broadcast_vec_to_cols(b, r, c, o);
                       },
                       "vec_to_cols " + w),
                  ref_broadcast(vc, {r}, {r, c}, {1, 0}), "vec_to_cols " + w);
    }
}

void check_broadcast_to() {
  struct Case {
    Dims in, out;
    Map map;
  };
  const std::vector<Case> cases = {
      {{}, {}, {}},
      {{}, {7}, {0}},
      {{}, {3, 4}, {0, 0}},
      {{1}, {5}, {1}},
      {{1}, {1}, {1}},
      {{1, 1}, {3, 4}, {1, 2}},
      {{5}, {5}, {1}},
      {{7}, {6, 7}, {0, 1}},
      {{7}, {7, 6}, {1, 0}},
      {{8}, {6, 8}, {0, 1}},
      {{8}, {8, 6}, {1, 0}},
      {{8}, {8, 8}, {1, 0}},
      {{3}, {2, 3, 4}, {0, 1, 0}},
      {{3}, {2, 3, 8}, {0, 1, 0}},
      {{2, 1, 4}, {2, 5, 4}, {1, 2, 3}},
      {{2, 1, 3}, {2, 5, 3}, {1, 2, 3}},
      {{2, 4}, {2, 50, 4}, {1, 0, 2}},
      {{3}, {1, 3, 1}, {0, 1, 0}},
      {{3, 4}, {3, 4}, {1, 2}},
      {{1, 3, 1, 4}, {3, 4}, {2, 4}},
      {{2, 3}, {3, 2}, {2, 1}},
      {{2, 3}, {3, 5, 2}, {2, 0, 1}},
      {{40, 36}, {36, 3, 40}, {2, 0, 1}},
      {{40, 36}, {36, 40}, {2, 1}},
      {{2}, {30, 2, 3}, {0, 1, 0}},
      {{2, 1, 3, 1, 2, 1, 1, 2}, {2, 3, 3, 2, 2, 1, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8}},
      {{1, 3}, {0, 3}, {1, 2}},
      {{0, 3}, {0, 3}, {1, 2}},
      {{0}, {5, 0}, {0, 1}},
      {{2, 2}, {2, 3, 2}, {1, 0, 2}},
      {{1}, {2, 2, 2, 2, 2, 2, 2, 2}, {0, 0, 0, 1, 0, 0, 0, 0}},
  };
  uint64_t salt = 8000;
  for (const Case &c : cases) check_broadcast_case(c.in, c.out, c.map, ++salt);
  if (big_ok()) {
    check_broadcast_case({1024}, {600, 1024}, {0, 1}, ++salt);
    check_broadcast_case({600, 1}, {600, 1024}, {1, 2}, ++salt);
    check_broadcast_case({256, 1, 300}, {256, 7, 300}, {1, 2, 3}, ++salt);
    check_broadcast_case({1, 1, 1}, {100, 100, 30}, {1, 2, 3}, ++salt);
  }
  // Random triples: an input of rank <= 6 whose axes are mapped (in random output positions, or
  // left unmapped when of size 1), set to 1 at random, plus inserted axes.
  th::Rng rng(31337);
  for (int rep = 0; rep < 300; ++rep) {
    const uint32_t in_rank = (uint32_t)(rng.gen() % 6);
    Dims in(in_rank);
    for (auto &v : in) v = 1 + rng.gen() % 5;
    std::vector<int> axes;  // input axes that will be mapped
    for (uint32_t k = 0; k < in_rank; ++k) {
      if (in[k] == 1 && rng.gen() % 2 == 0) continue;  // an unmapped size-1 axis
      axes.push_back((int)k);
    }
    const uint32_t inserted = (uint32_t)(rng.gen() % 3);  // out_rank <= 5 + 2
    std::vector<int> slots = axes;
    for (uint32_t i = 0; i < inserted; ++i) slots.push_back(-1);
    if (rng.gen() % 2) std::shuffle(slots.begin(), slots.end(), rng.gen);
    Dims out;
    Map map;
    for (int s : slots) {
      if (s < 0) {
        out.push_back(1 + rng.gen() % 4);
        map.push_back(0);
      } else {
        const uint64_t d = in[s] == 1 ? 1 + rng.gen() % 4 : in[s];
        out.push_back(d);
        map.push_back((uint32_t)s + 1);
      }
    }
    if (rep % 50 == 0 && !out.empty()) {  // an empty output: an inserted or repeated axis of 0
      out[0] = 0;
      if (map[0] != 0) in[map[0] - 1] = 1;
    }
    check_broadcast_case(in, out, map, ++salt);
  }
}

// The adjoint: reduce_from_broadcast(broadcast_to(x)) = r * x, r = prod(out) / prod(in), for
// small integers (exact sums).
void check_adjoint() {
  struct Case {
    Dims in, out;
    Map map;
  };
  const std::vector<Case> cases = {{{3}, {4, 3}, {0, 1}},
                                   {{3, 1}, {3, 5}, {1, 2}},
                                   {{2, 3}, {3, 4, 2}, {2, 0, 1}},
                                   {{}, {6, 7}, {0, 0}},
                                   {{1, 4, 1}, {3, 4, 2, 2}, {1, 2, 0, 3}}};
  for (const Case &c : cases) {
    const uint64_t nin = prod(c.in), r = prod(c.out) / nin;
    std::vector<float> x(nin);
    for (uint64_t i = 0; i < nin; ++i) x[i] = (float)((int)i - 3);
    Buf bx(th::upload(x)), y, z;
    const uint64_t *in = c.in.empty() ? nullptr : c.in.data();
    TH_OK(tlrt_broadcast_to(bx.get(), in, (uint32_t)c.in.size(), c.out.data(),
                            (uint32_t)c.out.size(), c.map.data(), y.out()));
    TH_OK(tlrt_reduce_from_broadcast(y.get(), in, (uint32_t)c.in.size(), c.out.data(),
                                     (uint32_t)c.out.size(), c.map.data(), z.out()));
    std::vector<float> want(nin);
    for (uint64_t i = 0; i < nin; ++i) want[i] = x[i] * (float)r;
    // -0 vs +0 aside (0 * r = +0 and a sum of +0 is +0): exact integers.
    expect_bits(th::download(z.get()), want,
                "reduce_from_broadcast(broadcast_to) " + str(c.in) + " -> " + str(c.out));
  }
}

}  // namespace

int main() {
  const tlrt_allocator_stats start = th::stats();
  check_known_answers();
  check_edge_values();
  check_concat_slice();
  check_transpose2d();
  check_permute3d_and_swap();
  check_permute_random();
  check_vec_broadcasts();
  check_broadcast_to();
  check_adjoint();
  const tlrt_allocator_stats end = th::stats();
  TH_CHECK_MSG(end.live_bytes == start.live_bytes, "live_bytes %llu at start, %llu at end",
               (unsigned long long)start.live_bytes, (unsigned long long)end.live_bytes);
  TH_CHECK_MSG(end.live_handles == start.live_handles, "live_handles %llu at start, %llu at end",
               (unsigned long long)start.live_handles, (unsigned long long)end.live_handles);
  return th::finish("test_layout");
}
