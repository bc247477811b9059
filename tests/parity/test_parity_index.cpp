// Suite 'parity': every entry point of abi/tlrt_index.h on TLRT_DEVICE_CPU and TLRT_DEVICE_CUDA(0)
// with the same seeded inputs and index lists; the results must agree BIT FOR BIT (th::same_bits:
// any NaN equals any NaN). Gathers are exact copies; the scatter-adds are an ordered reduction
// whose order the header fixes (x[t] + the tree over the values scattered to t, in increasing
// position), and the unit test checks the CPU against an independent implementation of it, so
// CPU == CUDA here means CUDA == the documented order. Every CUDA result is also recomputed with
// the determinism switch flipped and must not change.
//
// Index lists: uniform over [0, span) with span slightly above the bound (out-of-range entries
// at every few positions), entries near 2^60 - 1, skewed lists (target floor(rows u^4): hot rows
// with thousands of entries, so segments longer than 4096 and 8192 entries take the CUDA
// backend's multi-chunk path), and lists built from explicit segment lengths 1..9000 (the
// CUDA rows_kernel for L <= 8, chunk_kernel for 8 < L <= 4096, chunk values + reduce_axis beyond).
// Shapes: vectors of 1 .. 2^26 elements; matrices with cols 1, 2, 3, 4, 7, 33, 64, 1024, 1030
// (float and float4 paths), the embedding case (50000, 1024) with k = 65536, (65536, 1024) and
// (1024, 65536); both scatter modes of the CUDA backend (dense: rows < targets * cols, every row
// written by one pass; sparse: a copy, then the targets). Values: wide exponents (any change of
// order changes bits), random bit patterns (NaN, inf, subnormals), edge values.
// TLRT_PARITY_MAX_N=<n> skips cases with any input above n elements (compute-sanitizer runs).
//
// Exits 77 (skipped) unless a CUDA device is usable. Prints one line per failing run and a summary.
// Built with -DTLRT_PARITY_SELFTEST both sides run on the CPU (checks this test's own logic).
#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "parity.hpp"

namespace {

using namespace parity;
using th::Buf;
using th::Dist;
using th::dist_name;
using th::make;

const uint64_t kTop = (uint64_t{1} << 60) - 1;  // the largest out-of-range index

const uint64_t *ptr(const std::vector<uint64_t> &v) { return v.empty() ? nullptr : v.data(); }

// ---- index lists ---------------------------------------------------------------------------------

// Uniform over [0, span), every 7th entry (when oor) replaced by an out-of-range one.
std::vector<uint64_t> uniform_list(uint64_t k, uint64_t bound, uint64_t span, bool oor,
                                   uint64_t salt) {
  th::Rng rng(salt);
  std::vector<uint64_t> idx(k);
  for (uint64_t j = 0; j < k; ++j) {
    idx[j] = span == 0 ? 0 : rng.gen() % span;
    if (oor && j % 7 == 3) idx[j] = j % 2 ? kTop : bound + rng.gen() % 1000;
  }
  return idx;
}

// Skewed: floor(bound * u^4), so the first rows receive many entries.
std::vector<uint64_t> skewed_list(uint64_t k, uint64_t bound, uint64_t salt) {
  th::Rng rng(salt);
  std::vector<uint64_t> idx(k);
  for (auto &v : idx) {
    const double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng.gen);
    v = std::min<uint64_t>(bound - 1, (uint64_t)(bound * u * u * u * u));
  }
  return idx;
}

// Targets with the given segment lengths at random rows of [0, bound), shuffled positions, plus
// a few out-of-range entries.
std::vector<uint64_t> segment_list(const std::vector<uint64_t> &lens, uint64_t bound,
                                   uint64_t salt) {
  th::Rng rng(salt);
  std::vector<uint64_t> rows(bound);
  std::iota(rows.begin(), rows.end(), 0);
  std::shuffle(rows.begin(), rows.end(), rng.gen);
  std::vector<uint64_t> idx;
  for (size_t s = 0; s < lens.size() && s < bound; ++s)
    for (uint64_t e = 0; e < lens[s]; ++e) idx.push_back(rows[s]);
  for (uint64_t e = 0; e < idx.size() / 64 + 2; ++e) idx.push_back(e % 2 ? kTop : bound);
  std::shuffle(idx.begin(), idx.end(), rng.gen);
  return idx;
}

// ---- runners -------------------------------------------------------------------------------------

bool fits(std::initializer_list<uint64_t> sizes) {
  for (uint64_t s : sizes)
    if (s > max_n()) return false;
  return true;
}

void gather_vec(const std::string &w, const std::vector<float> &v,
                const std::vector<uint64_t> &idx) {
  run_multi(w + " gather_vec", [&](tlrt_device dev, std::vector<Buf> &outs) {
    Buf bv(th::upload(v, dev));
    outs.emplace_back();
    return tlrt_gather_vec(bv.get(), v.size(), ptr(idx), idx.size(), outs.back().out());
  });
}

void scatter_add(const std::string &w, const std::vector<float> &x,
                 const std::vector<float> &vals, const std::vector<uint64_t> &idx) {
  run_multi(w + " scatter_add", [&](tlrt_device dev, std::vector<Buf> &outs) {
    Buf bx(th::upload(x, dev)), bv(th::upload(vals, dev));
    outs.emplace_back();
    return tlrt_scatter_add(bx.get(), bv.get(), x.size(), ptr(idx), idx.size(),
                            outs.back().out());
  });
}

void gather_rows(const std::string &w, const std::vector<float> &m, uint64_t rows, uint64_t cols,
                 const std::vector<uint64_t> &idx) {
  run_multi(w + " gather_rows", [&](tlrt_device dev, std::vector<Buf> &outs) {
    Buf bm(th::upload(m, dev));
    outs.emplace_back();
    return tlrt_gather_rows(bm.get(), rows, cols, ptr(idx), idx.size(), outs.back().out());
  });
}

void scatter_add_rows(const std::string &w, const std::vector<float> &m,
                      const std::vector<float> &vals, uint64_t rows, uint64_t cols,
                      const std::vector<uint64_t> &idx) {
  run_multi(w + " scatter_add_rows", [&](tlrt_device dev, std::vector<Buf> &outs) {
    Buf bm(th::upload(m, dev)), bv(th::upload(vals, dev));
    outs.emplace_back();
    return tlrt_scatter_add_rows(bm.get(), bv.get(), rows, cols, ptr(idx), idx.size(),
                                 outs.back().out());
  });
}

void scatter_add_row(const std::string &w, const std::vector<float> &m,
                     const std::vector<float> &row, uint64_t rows, uint64_t cols, uint64_t i) {
  run_multi(w + " scatter_add_row i=" + std::to_string(i),
            [&](tlrt_device dev, std::vector<Buf> &outs) {
              Buf bm(th::upload(m, dev)), br(th::upload(row, dev));
              outs.emplace_back();
              return tlrt_scatter_add_row(bm.get(), br.get(), rows, cols, i, outs.back().out());
            });
}

std::string shape(uint64_t rows, uint64_t cols, uint64_t k) {
  return "(" + std::to_string(rows) + ", " + std::to_string(cols) + ") k=" + std::to_string(k);
}

// ---- vectors -------------------------------------------------------------------------------------

void vector_parity() {
  struct C {
    uint64_t n, k;
  };
  const C cases[] = {{0, 0},      {0, 5},       {1, 0},        {1, 1},       {1, 100},
                     {2, 3},      {33, 1000},   {4097, 4097},  {100000, 5},  {100000, 300000},
                     {1000003, 65536}, {uint64_t{1} << 22, uint64_t{1} << 22},
                     {uint64_t{1} << 26, uint64_t{1} << 24}};
  uint64_t salt = 1;
  for (const C &c : cases) {
    if (!fits({c.n, c.k})) continue;
    const bool big = c.n > (uint64_t{1} << 22);
    for (Dist d : {Dist::Wide, Dist::Bits, Dist::Edge}) {
      if (big && d != Dist::Wide) continue;
      const std::vector<float> x = make(d, c.n, ++salt);
      const std::vector<float> vals = make(d, c.k, ++salt);
      const std::string w = "n=" + std::to_string(c.n) + " k=" + std::to_string(c.k) + " " +
                            dist_name(d);
      const std::vector<uint64_t> u = uniform_list(c.k, c.n, c.n + c.n / 8 + 1, true, ++salt);
      gather_vec(w + " uniform", x, u);
      scatter_add(w + " uniform", x, vals, u);
      if (c.n > 0 && c.k > 0) {
        const std::vector<uint64_t> s = skewed_list(c.k, c.n, ++salt);
        gather_vec(w + " skewed", x, s);
        scatter_add(w + " skewed", x, vals, s);
      }
    }
  }
  // Explicit segment lengths: every tier of the CUDA backend, scalar.
  const std::vector<uint64_t> lens = {1,   2,   3,    4,    5,    7,    8,    9,    16,   17,
                                      31,  32,  33,   64,   65,   255,  256,  257,  1000, 4095,
                                      4096, 4097, 5000, 8192, 8193, 9000};
  for (Dist d : {Dist::Wide, Dist::Bits}) {
    const uint64_t n = 100;
    const std::vector<uint64_t> idx = segment_list(lens, n, ++salt);
    if (!fits({idx.size()})) continue;
    const std::vector<float> x = make(d, n, ++salt);
    const std::vector<float> vals = make(d, idx.size(), ++salt);
    scatter_add(std::string("segments ") + dist_name(d), x, vals, idx);
  }
}

// ---- matrices ------------------------------------------------------------------------------------

void matrix_parity() {
  struct C {
    uint64_t rows, cols, k;
    int kind;  // 0 uniform (with out-of-range), 1 skewed, 2 uniform in range
  };
  std::vector<C> cases;
  for (uint64_t cols : {1, 2, 3, 4, 7, 33, 64, 1030})
    for (uint64_t rows : {1, 5, 300})
      for (uint64_t k : {1, 17, 2000}) cases.push_back({rows, cols, k, (int)(k % 3)});
  for (const C &c : {C{0, 4, 10, 0}, C{10, 0, 10, 0}, C{100, 1024, 0, 0}, C{5000, 64, 65536, 1},
                     C{200000, 4, 100, 0}, C{200000, 33, 300, 0}, C{50000, 1024, 65536, 2},
                     C{50000, 1024, 65536, 1}, C{65536, 1024, 65536, 2},
                     C{1024, 65536, 1024, 2}, C{1024, 65536, 1024, 1}})
    cases.push_back(c);
  uint64_t salt = 1000;
  for (const C &c : cases) {
    const uint64_t nm = c.rows * c.cols, nv = c.k * c.cols;
    if (!fits({nm, nv, c.k})) continue;
    const bool big = std::max(nm, nv) > (uint64_t{1} << 22);
    for (Dist d : {Dist::Wide, Dist::Bits, Dist::Edge}) {
      if (big && d != Dist::Wide) continue;
      const std::vector<float> m = make(d, nm, ++salt);
      const std::vector<float> vals = make(d, nv, ++salt);
      std::vector<uint64_t> idx;
      if (c.kind == 1 && c.rows > 0)
        idx = skewed_list(c.k, c.rows, ++salt);
      else
        idx = uniform_list(c.k, c.rows, c.kind == 2 ? c.rows : c.rows + c.rows / 8 + 1,
                           c.kind == 0, ++salt);
      const std::string w = shape(c.rows, c.cols, c.k) + " kind " + std::to_string(c.kind) +
                            " " + dist_name(d);
      gather_rows(w, m, c.rows, c.cols, idx);
      scatter_add_rows(w, m, vals, c.rows, c.cols, idx);
      // One row: in range (first, last, middle) and out of range.
      if (c.k == 1 || big) {
        const std::vector<float> row = make(d, c.cols, ++salt);
        for (uint64_t i : {uint64_t{0}, c.rows / 2, c.rows == 0 ? 0 : c.rows - 1, c.rows, kTop})
          scatter_add_row(w, m, row, c.rows, c.cols, i);
      }
    }
  }
  // Explicit segment lengths, float and float4 rows, dense and sparse modes.
  const std::vector<uint64_t> lens = {1, 2, 3, 4, 5, 8, 9, 33, 255, 256, 257, 4096, 4097, 8193};
  for (uint64_t cols : {1, 3, 4, 33, 128}) {
    for (uint64_t rows : {uint64_t{20}, uint64_t{100000}}) {  // dense, then sparse
      const std::vector<uint64_t> idx = segment_list(lens, rows, ++salt);
      if (!fits({rows * cols, idx.size() * cols})) continue;
      for (Dist d : {Dist::Wide, Dist::Bits}) {
        const std::string w = "segments " + shape(rows, cols, idx.size()) + " " + dist_name(d);
        const std::vector<float> m = make(d, rows * cols, ++salt);
        const std::vector<float> vals = make(d, idx.size() * cols, ++salt);
        scatter_add_rows(w, m, vals, rows, cols, idx);
      }
    }
  }
}

}  // namespace

int main() {
  if (!parity::start("parity_index")) return 77;
  vector_parity();
  matrix_parity();
  parity::print_summary("parity_index");
  return th::finish("test_parity_index");
}
