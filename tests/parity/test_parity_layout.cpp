// Suite 'parity': every entry point of abi/tlrt_layout.h on TLRT_DEVICE_CPU and
// TLRT_DEVICE_CUDA(0) with the same seeded inputs. Numeric class "exact" (pure data movement)
// promises identical bits, so besides parity::run_multi's CPU == CUDA comparison (th::same_bits),
// each backend's output is compared with a host reference on RAW BIT PATTERNS: NaN payloads and
// signalling NaNs included (the inputs are random bit patterns, which contain plenty of both).
// The reference is an odometer walk over the output written from the header's words
// (independent of the library's normalisation, tiling and vector modes).
//
// Shapes: concat/slice over sizes 0, 1, 2, 3, 5, 31..33, 1000, 65537 and 2^25 + 2^25; row
// concatenations and slices of (65536, 1024); broadcast_vec_to_rows/_cols over every pair of
// {1, 2, 3, 4, 5, 31, 32, 33, 255, 256, 257} and (65536, 1024), (1024, 65536), (65537, 1023),
// (1023, 65537), (1, 2^26), (2^26, 1); broadcast_to over the reduction parity's triples plus
// large ones (vector -> rows/cols, (256, 1, 1024) -> (256, 256, 1024), a permuting broadcast
// that becomes a tiled transpose with a repeated batch axis); transpose2d over pairs of
// {1, 2, 3, 5, 31, 32, 33, 63, 64, 65, 127, 128, 129, 1000} and (65536, 1024), (1024, 65536),
// (8191, 8193), (3, 5000011), (5000011, 3), (2^26, 1); the permute3d variants and
// swap_adjacent_at_depth over small, prime, thin and 2^26-element shapes (each of the library's
// paths: tiled transposes with and without batch axes, float4 row blocks, scalar row blocks,
// thin gathers); tlrt_permute over random ranks 0..8 and large rank-4 and rank-8 cases. (The
// CUDA kernels' 64-bit index variants run only above 2^32 elements and are not reached here.)
// Every CUDA result is also recomputed with the determinism switch flipped (run_multi) and must
// not change. TLRT_PARITY_MAX_N=<n> skips cases whose input or output exceeds n elements.
//
// Exits 77 (skipped) unless a CUDA device is usable. Prints one line per failing run and a
// summary. Built with -DTLRT_PARITY_SELFTEST both sides run on the CPU.
#include <algorithm>
#include <cstdlib>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include "parity.hpp"

namespace {

using namespace parity;
using th::Buf;

using Dims = std::vector<uint64_t>;
using Map = std::vector<uint32_t>;

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

bool fits(uint64_t n) { return n <= max_n(); }

// Random bit patterns (NaN payloads, signalling NaNs, subnormals, infinities, -0).
std::vector<float> values(uint64_t n, uint64_t salt) { return th::make(th::Dist::Bits, n, salt); }

// The output of a gather: y[f] = x[sum_k b_k * st[k]] over the row-major multi-index b of f in
// od (an odometer; no division, no merging of axes).
std::vector<float> ref_gather(const std::vector<float> &x, const Dims &od, const Dims &st) {
  const uint64_t n = prod(od);
  std::vector<float> y(n);
  if (n == 0) return y;
  std::vector<uint64_t> b(od.size(), 0);
  uint64_t off = 0;
  for (uint64_t f = 0; f < n; ++f) {
    y[f] = x[off];
    for (size_t k = od.size(); k-- > 0;) {
      off += st[k];
      if (++b[k] < od[k]) break;
      off -= st[k] * od[k];
      b[k] = 0;
    }
  }
  return y;
}

Dims row_major(const Dims &d) {
  Dims s(d.size());
  uint64_t acc = 1;
  for (size_t k = d.size(); k-- > 0;) {
    s[k] = acc;
    acc *= d[k];
  }
  return s;
}

// out has dims d[perm[i]], out[b] = x[a] with a[perm[i]] = b[i].
std::vector<float> ref_permute(const std::vector<float> &x, const Dims &d, const Map &perm) {
  const Dims xs = row_major(d);
  Dims od, st;
  for (uint32_t p : perm) {
    od.push_back(d[p]);
    st.push_back(xs[p]);
  }
  return ref_gather(x, od, st);
}

std::vector<float> ref_broadcast(const std::vector<float> &x, const Dims &in, const Dims &out,
                                 const Map &map) {
  const Dims xs = row_major(in);
  Dims st;
  for (size_t j = 0; j < out.size(); ++j)
    st.push_back(map[j] != 0 && in[map[j] - 1] == out[j] && out[j] != 1 ? xs[map[j] - 1] : 0);
  return ref_gather(x, out, st);
}

// Raw-bit comparison of one backend's output with the reference.
void expect_bits(const std::string &what, const char *side, const tlrt_buffer *out,
                 const std::vector<float> &want) {
  const std::vector<float> got = th::download(out);
  ++th::checks();
  size_t bad = 0, first = 0;
  const size_t n = std::min(got.size(), want.size());
  for (size_t i = 0; i < n; ++i)
    if (th::bits_of(got[i]) != th::bits_of(want[i])) {
      if (bad == 0) first = i;
      ++bad;
    }
  if (bad != 0 || got.size() != want.size()) {
    std::printf("MISMATCH %s (%s vs reference, raw bits): %zu of %zu differ; first i=%zu got=%s "
                "want=%s\n",
                what.c_str(), side, bad, want.size(), first,
                first < got.size() ? th::hex(got[first]).c_str() : "-",
                first < want.size() ? th::hex(want[first]).c_str() : "-");
    th::report(__FILE__, __LINE__, what + ": differs from the reference");
  }
}

// One input (on both devices), one output: run_multi (CPU vs CUDA, switch flipped) plus the raw
// comparison of the CPU output and of the first CUDA output with want.
using Call1 = std::function<tlrt_status(const tlrt_buffer *, tlrt_buffer **)>;
void check1(const std::string &what, const std::vector<float> &x, const std::vector<float> &want,
            const Call1 &call) {
  const std::string &w = what;
  Buf cx(th::upload(x, kCpu)), gx(th::upload(x, kGpu));
  int calls = 0;  // run_multi: CPU, CUDA, CUDA with the switch flipped
  run_multi(w, [&](tlrt_device, std::vector<th::Buf> &outs) {
    const int c = calls++;
    outs.emplace_back();
    const tlrt_status s = call(c == 0 ? cx.get() : gx.get(), outs.back().out());
    if (s == TLRT_OK && c < 2) expect_bits(w, c == 0 ? "cpu" : "cuda", outs.back().get(), want);
    return s;
  });
}

// Two inputs (concatenations).
using Call2 = std::function<tlrt_status(const tlrt_buffer *, const tlrt_buffer *, tlrt_buffer **)>;
void check2(const std::string &what, const std::vector<float> &a, const std::vector<float> &b,
            const Call2 &call) {
  const std::string &w = what;
  std::vector<float> want = a;
  want.insert(want.end(), b.begin(), b.end());
  Buf ca(th::upload(a, kCpu)), ga(th::upload(a, kGpu)), cb(th::upload(b, kCpu)),
      gb(th::upload(b, kGpu));
  int calls = 0;
  run_multi(w, [&](tlrt_device, std::vector<th::Buf> &outs) {
    const int c = calls++;
    outs.emplace_back();
    const tlrt_status s =
        c == 0 ? call(ca.get(), cb.get(), outs.back().out()) : call(ga.get(), gb.get(), outs.back().out());
    if (s == TLRT_OK && c < 2) expect_bits(w, c == 0 ? "cpu" : "cuda", outs.back().get(), want);
    return s;
  });
}

// ---- the entry points --------------------------------------------------------------------------

uint64_t g_salt = 1;

void concat_slice_parity() {
  const uint64_t sizes[] = {0, 1, 2, 3, 5, 31, 32, 33, 1000, 65537};
  for (uint64_t n : sizes)
    for (uint64_t m : {uint64_t{0}, uint64_t{1}, uint64_t{3}, uint64_t{33}, uint64_t{65537}}) {
      if (!fits(n + m)) continue;
      const uint64_t sa = ++g_salt, sb = ++g_salt;
      check2("concat1d " + std::to_string(n) + " + " + std::to_string(m), values(n, sa),
             values(m, sb),
             [=](const tlrt_buffer *a, const tlrt_buffer *b, tlrt_buffer **o) {
               return tlrt_concat1d(a, b, n, m, o);
             });
    }
  const uint64_t big = uint64_t{1} << 25;
  const uint64_t sa = ++g_salt, sb = ++g_salt;
  if (fits(2 * big))
    check2("concat1d 2^25 + 2^25", values(big, sa), values(big, sb),
           [=](const tlrt_buffer *a, const tlrt_buffer *b, tlrt_buffer **o) {
             return tlrt_concat1d(a, b, big, big, o);
           });
  struct Cut {
    uint64_t n, start, len;
  };
  for (Cut c : {Cut{0, 0, 0}, Cut{1, 0, 1}, Cut{1, 1, 0}, Cut{5, 1, 3}, Cut{1000, 3, 997},
                Cut{1000, 999, 1}, Cut{65537, 1, 65535}, Cut{65537, 4, 32768},
                Cut{uint64_t{1} << 26, 3, (uint64_t{1} << 26) - 7}}) {
    if (!fits(c.n)) continue;
    const std::vector<float> x = values(c.n, ++g_salt);
    check1("slice1d n=" + std::to_string(c.n) + " start=" + std::to_string(c.start) +
               " len=" + std::to_string(c.len),
           x, std::vector<float>(x.begin() + c.start, x.begin() + c.start + c.len),
           [=](const tlrt_buffer *b, tlrt_buffer **o) {
             return tlrt_slice1d(b, c.n, c.start, c.len, o);
           });
  }
  // Along axis 0.
  struct Rows {
    uint64_t ra, rb, inner;
  };
  for (Rows r : {Rows{0, 3, 5}, Rows{3, 0, 5}, Rows{2, 3, 0}, Rows{1, 1, 1}, Rows{7, 9, 33},
                 Rows{1000, 24, 1024}, Rows{32768, 32768, 1024}}) {
    if (!fits((r.ra + r.rb) * r.inner)) continue;
    const uint64_t s1 = ++g_salt, s2 = ++g_salt;
    check2("concat_axis0 (" + std::to_string(r.ra) + " + " + std::to_string(r.rb) + ", " +
               std::to_string(r.inner) + ")",
           values(r.ra * r.inner, s1), values(r.rb * r.inner, s2),
           [=](const tlrt_buffer *a, const tlrt_buffer *b, tlrt_buffer **o) {
             return tlrt_concat_axis0(a, b, r.ra, r.rb, r.inner, o);
           });
  }
  struct RowCut {
    uint64_t rows, inner, start, len;
  };
  for (RowCut c : {RowCut{5, 3, 1, 3}, RowCut{5, 0, 2, 2}, RowCut{1000, 33, 999, 1},
                   RowCut{1000, 33, 0, 1000}, RowCut{65536, 1024, 1, 65534},
                   RowCut{65536, 1024, 32768, 32768}}) {
    if (!fits(c.rows * c.inner)) continue;
    const std::vector<float> x = values(c.rows * c.inner, ++g_salt);
    check1("slice_axis0 (" + std::to_string(c.rows) + ", " + std::to_string(c.inner) + ") rows " +
               std::to_string(c.start) + " + " + std::to_string(c.len),
           x,
           std::vector<float>(x.begin() + c.start * c.inner,
                              x.begin() + (c.start + c.len) * c.inner),
           [=](const tlrt_buffer *b, tlrt_buffer **o) {
             return tlrt_slice_axis0(b, c.rows, c.inner, c.start, c.len, o);
           });
  }
}

void vec_broadcast_parity() {
  struct Shape {
    uint64_t rows, cols;
  };
  std::vector<Shape> shapes;
  const uint64_t dims[] = {1, 2, 3, 4, 5, 31, 32, 33, 255, 256, 257};
  for (uint64_t r : dims)
    for (uint64_t c : dims) shapes.push_back({r, c});
  for (Shape s : {Shape{0, 5}, Shape{5, 0}, Shape{65536, 1024}, Shape{1024, 65536},
                  Shape{65537, 1023}, Shape{1023, 65537}, Shape{1, uint64_t{1} << 26},
                  Shape{uint64_t{1} << 26, 1}})
    shapes.push_back(s);
  for (Shape s : shapes) {
    const uint64_t n = s.rows * s.cols;
    if (!fits(n)) continue;
    const std::string w = "(" + std::to_string(s.rows) + ", " + std::to_string(s.cols) + ")";
    const std::vector<float> vr = values(s.cols, ++g_salt), vc = values(s.rows, ++g_salt);
    check1("vec_to_rows " + w, vr, ref_broadcast(vr, {s.cols}, {s.rows, s.cols}, {0, 1}),
           [=](const tlrt_buffer *b, tlrt_buffer **o) {
             return tlrt_broadcast_vec_to_rows(b, s.rows, s.cols, o);
           });
    check1("vec_to_cols " + w, vc, ref_broadcast(vc, {s.rows}, {s.rows, s.cols}, {1, 0}),
           [=](const tlrt_buffer *b, tlrt_buffer **o) {
             return tlrt_broadcast_vec_to_cols(b, s.rows, s.cols, o);
           });
  }
}

void broadcast_to_parity() {
  struct Bcast {
    Dims in, out;
    Map map;
  };
  const std::vector<Bcast> cases = {
      {{}, {}, {}},
      {{}, {7}, {0}},
      {{}, {3, 4}, {0, 0}},
      {{}, {(uint64_t{1} << 24) + 3}, {0}},
      {{1}, {5000}, {1}},
      {{1, 1}, {3, 4}, {1, 2}},
      {{7}, {5000, 7}, {0, 1}},
      {{1024}, {65536, 1024}, {0, 1}},
      {{65536, 1}, {65536, 1024}, {1, 2}},
      {{1, 65536}, {1024, 65536}, {1, 2}},
      {{5}, {5, 4100}, {1, 0}},
      {{4, 1}, {4, 5000}, {1, 2}},
      {{3}, {2, 3, 4}, {0, 1, 0}},
      {{3}, {2, 3, 4100}, {0, 1, 0}},
      {{3}, {2000, 3, 3000}, {0, 1, 0}},
      {{2, 1, 4}, {2, 5, 4}, {1, 2, 3}},
      {{2, 1, 4}, {2, 70000, 4}, {1, 2, 3}},
      {{2, 1, 3}, {2, 70000, 3}, {1, 2, 3}},
      {{2, 4}, {2, 50, 4}, {1, 0, 2}},
      {{3}, {1, 3, 1}, {0, 1, 0}},
      {{3, 4}, {3, 4}, {1, 2}},
      {{1, 3, 1, 4}, {3, 4}, {2, 4}},
      {{2, 3}, {3, 2}, {2, 1}},
      {{2, 3}, {3, 5, 2}, {2, 0, 1}},
      {{40, 30}, {30, 5000, 40}, {2, 0, 1}},
      {{2}, {3000, 2, 3}, {0, 1, 0}},
      {{2, 1, 3, 1, 2, 1, 1, 2}, {2, 3, 3, 2, 2, 1, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8}},
      {{1, 3}, {0, 3}, {1, 2}},
      {{2, 2}, {2, 3, 2}, {1, 0, 2}},
      {{256, 1, 1024}, {256, 256, 1024}, {1, 2, 3}},
      {{1024, 64}, {64, 1024, 1024}, {2, 0, 1}},
      {{1, 1, 1}, {300, 301, 302}, {1, 2, 3}},
  };
  for (const Bcast &c : cases) {
    const uint64_t n = prod(c.out);
    if (!fits(n)) continue;
    const std::vector<float> x = values(prod(c.in), ++g_salt);
    check1("broadcast_to " + str(c.in) + " -> " + str(c.out) + " map " + str(c.map), x,
           ref_broadcast(x, c.in, c.out, c.map), [&c](const tlrt_buffer *b, tlrt_buffer **o) {
             return tlrt_broadcast_to(b, c.in.empty() ? nullptr : c.in.data(),
                                      (uint32_t)c.in.size(), c.out.empty() ? nullptr : c.out.data(),
                                      (uint32_t)c.out.size(), c.map.empty() ? nullptr : c.map.data(),
                                      o);
           });
  }
}

void transpose_parity() {
  struct Shape {
    uint64_t rows, cols;
  };
  std::vector<Shape> shapes;
  const uint64_t dims[] = {1, 2, 3, 4, 5, 7, 31, 32, 33, 63, 64, 65, 127, 128, 129, 1000};
  for (uint64_t r : dims)
    for (uint64_t c : dims) shapes.push_back({r, c});
  for (Shape s : {Shape{0, 7}, Shape{65536, 1024}, Shape{1024, 65536}, Shape{8191, 8193},
                  Shape{3, 5000011}, Shape{5000011, 3}, Shape{uint64_t{1} << 26, 1}})
    shapes.push_back(s);
  for (Shape s : shapes) {
    const uint64_t n = s.rows * s.cols;
    if (!fits(n)) continue;
    const std::vector<float> x = values(n, ++g_salt);
    check1("transpose2d (" + std::to_string(s.rows) + ", " + std::to_string(s.cols) + ")", x,
           ref_permute(x, {s.rows, s.cols}, {1, 0}), [=](const tlrt_buffer *b, tlrt_buffer **o) {
             return tlrt_transpose2d(b, s.rows, s.cols, o);
           });
  }
}

using P3 = tlrt_status (*)(const tlrt_buffer *, uint64_t, uint64_t, uint64_t, tlrt_buffer **);

void permute3d_swap_parity() {
  struct V {
    const char *name;
    P3 fn;
    Map perm;
  };
  const V variants[] = {{"bca", tlrt_permute3d_bca, {1, 2, 0}},
                        {"cab", tlrt_permute3d_cab, {2, 0, 1}},
                        {"acb", tlrt_permute3d_acb, {0, 2, 1}}};
  const std::vector<Dims> shapes = {
      {2, 3, 4},      {1, 1, 1},     {0, 3, 4},      {33, 40, 2},    {2, 33, 40},
      {40, 2, 33},    {31, 37, 41},  {64, 64, 1},    {1, 64, 64},    {3, 5000, 7},
      {7, 3, 5000},   {5000, 7, 3},  {16, 32, 32},   {4, 100, 200},  {200, 4, 100},
      {64, 1024, 1024}, {1024, 64, 1024}, {1024, 1024, 64}, {2, 4096, 8192}, {8192, 4096, 2},
      {3, 3001, 7001}, {1000, 4096, 4}, {1000, 4, 4096}, {4, 4097, 3}, {2, 3, 4099},
      {4099, 2, 3}};
  for (const Dims &d : shapes) {
    const uint64_t n = prod(d);
    if (!fits(n)) continue;
    const std::vector<float> x = values(n, ++g_salt);
    for (const V &v : variants)
      check1(std::string("permute3d_") + v.name + " " + str(d), x, ref_permute(x, d, v.perm),
             [&](const tlrt_buffer *b, tlrt_buffer **o) { return v.fn(b, d[0], d[1], d[2], o); });
    for (uint32_t depth = 0; depth < 2; ++depth) {
      Map perm = {0, 1, 2};
      std::swap(perm[depth], perm[depth + 1]);
      check1("swap_adjacent_at_depth " + str(d) + " depth " + std::to_string(depth), x,
             ref_permute(x, d, perm), [&](const tlrt_buffer *b, tlrt_buffer **o) {
               return tlrt_swap_adjacent_at_depth(b, d.data(), 3, depth, o);
             });
    }
  }
  // Higher ranks: row blocks of r % 4 == 0 (float4), r % 4 != 0 (scalar), r == 1 (tiled);
  // R = 2 or 4: transpositions of 8- / 16-byte elements (lay::Transpose::w): boundary tiles,
  // thin sides (3 -> 4-wide tiles), batch axes.
  const std::vector<Dims> nd = {{16, 512, 512, 16}, {2, 4096, 4096, 2}, {8, 2048, 4096, 1},
                                {3, 40, 36, 5},     {2, 2, 2, 2, 2, 2, 2, 2}, {5, 6, 7, 8, 9},
                                {3, 100, 70, 2},    {2, 65, 130, 4},   {7, 3, 3000, 2},
                                {1, 5000, 5, 4},    {4, 33, 66, 2},    {2, 1024, 1024, 4}};
  for (const Dims &d : nd) {
    const uint64_t n = prod(d);
    if (!fits(n)) continue;
    const std::vector<float> x = values(n, ++g_salt);
    for (uint32_t depth = 0; depth + 1 < d.size(); ++depth) {
      Map perm(d.size());
      std::iota(perm.begin(), perm.end(), 0u);
      std::swap(perm[depth], perm[depth + 1]);
      check1("swap_adjacent_at_depth " + str(d) + " depth " + std::to_string(depth), x,
             ref_permute(x, d, perm), [&](const tlrt_buffer *b, tlrt_buffer **o) {
               return tlrt_swap_adjacent_at_depth(b, d.data(), (uint32_t)d.size(), depth, o);
             });
    }
  }
}

void permute_parity() {
  std::vector<std::pair<Dims, Map>> cases = {
      {{}, {}},
      {{7}, {0}},
      {{40, 3, 50}, {2, 1, 0}},
      {{3, 40, 5, 50}, {0, 3, 2, 1}},
      {{2, 33, 2, 35, 2}, {4, 3, 2, 1, 0}},
      {{2, 3, 40, 50}, {3, 2, 0, 1}},
      {{2, 2, 2, 2, 2, 2, 2, 64}, {7, 0, 1, 2, 3, 4, 5, 6}},
      {{64, 64, 64, 256}, {3, 1, 2, 0}},
      {{64, 64, 64, 256}, {2, 3, 0, 1}},
      {{8, 8, 8, 8, 8, 8, 8, 16}, {7, 6, 5, 4, 3, 2, 1, 0}},
      {{8, 8, 8, 8, 8, 8, 8, 16}, {1, 0, 3, 2, 5, 4, 7, 6}},
  };
  th::Rng rng(4242);
  const uint64_t pick[] = {1, 2, 3, 4, 5, 7, 33, 64};
  for (uint32_t rank = 1; rank <= 8; ++rank)
    for (int rep = 0; rep < 6; ++rep) {
      Dims d(rank);
      uint64_t n = 1;
      for (auto &v : d) {
        v = pick[rng.gen() % 8];
        if (n * v > 3000000) v = 1;
        n *= v;
      }
      Map perm(rank);
      std::iota(perm.begin(), perm.end(), 0u);
      std::shuffle(perm.begin(), perm.end(), rng.gen);
      cases.push_back({d, perm});
    }
  for (const auto &c : cases) {
    const uint64_t n = prod(c.first);
    if (!fits(n)) continue;
    const std::vector<float> x = values(n, ++g_salt);
    check1("permute " + str(c.first) + " by " + str(c.second), x,
           ref_permute(x, c.first, c.second), [&c](const tlrt_buffer *b, tlrt_buffer **o) {
             return tlrt_permute(b, c.first.empty() ? nullptr : c.first.data(),
                                 (uint32_t)c.first.size(),
                                 c.second.empty() ? nullptr : c.second.data(), o);
           });
  }
}

void all() {
  concat_slice_parity();
  vec_broadcast_parity();
  broadcast_to_parity();
  transpose_parity();
  permute3d_swap_parity();
  permute_parity();
}

}  // namespace

int main() {
  if (!start("parity_layout")) return 77;
  all();
  print_summary("parity_layout");
  return th::finish("test_parity_layout");
}
