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
// written by one pass; sparse: a copy, then the targets; one column: tiles, heavy or not).
// Values: wide exponents (any change of order changes bits), random bit patterns (NaN, inf,
// subnormals), edge values.
// TLRT_PARITY_MAX_N=<n> skips cases with any input above n elements (compute-sanitizer runs).
// Index buffers (the _ibuf variants, int32 and int64 on each device, and tlrt_index_flat_rows):
// hot targets of 9, 33, 4096, 4097 and 100000 entries, cols 1, 3, 4, 32, 33 and 1024, NULL
// x / mat, k == 0, entries that are not an index (negative, int64 >= 2^60) with the fault counts
// of tlrt_index_faults on the CPU and the CUDA device, and the CUDA index-buffer scatter against
// the CPU host-list scatter of the same entries.
//
// Exits 77 (skipped) unless a CUDA device is usable. Prints one line per failing run and a summary.
// Built with -DTLRT_PARITY_SELFTEST both sides run on the CPU (checks this test's own logic).
#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "index_buffers.hpp"
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
  // The same segments with their targets in the first 4096 rows of a 100000-vector (the CUDA
  // one-column sparse plan: tiles of 4096 rows): all of them (about 50000 entries: a heavy tile),
  // then those up to 1000 entries (a tile of short and long segments that is not heavy).
  for (bool all : {true, false}) {
    std::vector<uint64_t> some;
    for (uint64_t l : lens)
      if (all || l <= 1000) some.push_back(l);
    const uint64_t n = 100000;
    const std::vector<uint64_t> idx = segment_list(some, 4096, ++salt);
    if (!fits({n, idx.size()})) continue;
    const std::vector<float> x = make(Dist::Wide, n, ++salt);
    const std::vector<float> vals = make(Dist::Wide, idx.size(), ++salt);
    scatter_add(std::string("segments in one tile ") + (all ? "(heavy)" : "(light)"), x, vals,
                idx);
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

// ---- index buffers -------------------------------------------------------------------------------
// The _ibuf variants with int32 and int64 index buffers on each device: CPU == CUDA bit for bit,
// also with the determinism switch flipped; entries that are not an index (negative, int64
// >= 2^60) read +0 / are skipped and are counted by tlrt_index_faults on the device that ran the
// call (checked after each comparison: run_multi runs the CPU once and the GPU twice).

Buf ibuf(tlrt_device dev, const std::vector<int64_t> &v, bool i32) {
  return th::index_buffer(dev, v, i32);
}
using th::count_bad;
using th::host_list_of;
using th::not_an_index;
uint64_t faults(tlrt_device dev) { return th::index_faults(dev, true); }

// Runs body (one run_multi) and checks the fault counters: bad on the CPU, 2 * bad on the GPU
// (3 * bad on the CPU in the SELFTEST build, where both sides are the CPU).
void counted(const std::string &w, uint64_t bad, const std::function<void()> &body) {
  faults(kCpu);
  faults(kGpu);
  body();
  const uint64_t c = faults(kCpu), g = kGpu == kCpu ? 0 : faults(kGpu);
  const uint64_t want_c = kGpu == kCpu ? 3 * bad : bad, want_g = kGpu == kCpu ? 0 : 2 * bad;
  TH_CHECK_MSG(c == want_c && g == want_g,
               "%s: tlrt_index_faults counted %llu on the cpu and %llu on cuda, expected %llu "
               "and %llu",
               w.c_str(), (unsigned long long)c, (unsigned long long)g,
               (unsigned long long)want_c, (unsigned long long)want_g);
}

// Lists: a hot target with `hot` entries, then `k - hot` entries: uniform over [0, bound), out of
// range (bound .. 2^60 - 1 for int64, .. INT32_MAX for int32), and not an index (negative, int64
// >= 2^60) when bad; shuffled.
std::vector<int64_t> ilist(uint64_t k, uint64_t bound, uint64_t hot, bool i32, bool bad,
                           uint64_t salt) {
  th::Rng rng(salt);
  std::vector<int64_t> v;
  v.reserve(k);
  const int64_t t0 = bound ? (int64_t)(rng.gen() % bound) : 0;
  for (uint64_t j = 0; j < hot && j < k; ++j) v.push_back(t0);
  const uint64_t top = i32 ? (uint64_t)INT32_MAX : kTop;
  while (v.size() < k) {
    const uint64_t r = rng.gen() % 16;
    if (r < 10 && bound > 0)
      v.push_back((int64_t)(rng.gen() % bound));
    else if (r < 12 || !bad)
      v.push_back((int64_t)(bound + rng.gen() % (top - bound + 1)));
    else if (r == 12)
      v.push_back(-1);
    else if (r == 13)
      v.push_back(i32 ? INT32_MIN : INT64_MIN);
    else if (r == 14 || i32)
      v.push_back(-(int64_t)(rng.gen() % (uint64_t)INT32_MAX) - 1);
    else
      v.push_back((int64_t)(kTop + 1 + rng.gen() % ((uint64_t)INT64_MAX - kTop)));
  }
  std::shuffle(v.begin(), v.end(), rng.gen);
  return v;
}

void gather_vec_ibuf(const std::string &w, const std::vector<float> &v,
                     const std::vector<int64_t> &idx, bool i32) {
  counted(w + " gather_vec_ibuf", count_bad(idx), [&] {
    run_multi(w + " gather_vec_ibuf", [&](tlrt_device dev, std::vector<Buf> &outs) {
      Buf bv(th::upload(v, dev)), bi(ibuf(dev, idx, i32));
      outs.emplace_back();
      return tlrt_gather_vec_ibuf(bv.get(), v.size(), bi.get(), outs.back().out());
    });
  });
}

// x == NULL: no base (n zeros).
void scatter_add_ibuf(const std::string &w, const std::vector<float> *x, uint64_t n,
                      const std::vector<float> &vals, const std::vector<int64_t> &idx, bool i32) {
  const std::string ww = w + (x ? " scatter_add_ibuf" : " scatter_add_ibuf(NULL)");
  counted(ww, count_bad(idx), [&] {
    run_multi(ww, [&](tlrt_device dev, std::vector<Buf> &outs) {
      Buf bx(x ? th::upload(*x, dev) : nullptr), bv(th::upload(vals, dev)),
          bi(ibuf(dev, idx, i32));
      outs.emplace_back();
      return tlrt_scatter_add_ibuf(bx.get(), bv.get(), n, bi.get(), outs.back().out());
    });
  });
}

void gather_rows_ibuf(const std::string &w, const std::vector<float> &m, uint64_t rows,
                      uint64_t cols, const std::vector<int64_t> &idx, bool i32) {
  counted(w + " gather_rows_ibuf", count_bad(idx), [&] {
    run_multi(w + " gather_rows_ibuf", [&](tlrt_device dev, std::vector<Buf> &outs) {
      Buf bm(th::upload(m, dev)), bi(ibuf(dev, idx, i32));
      outs.emplace_back();
      return tlrt_gather_rows_ibuf(bm.get(), rows, cols, bi.get(), outs.back().out());
    });
  });
}

void scatter_add_rows_ibuf(const std::string &w, const std::vector<float> *m,
                           const std::vector<float> &vals, uint64_t rows, uint64_t cols,
                           const std::vector<int64_t> &idx, bool i32) {
  const std::string ww = w + (m ? " scatter_add_rows_ibuf" : " scatter_add_rows_ibuf(NULL)");
  counted(ww, count_bad(idx), [&] {
    run_multi(ww, [&](tlrt_device dev, std::vector<Buf> &outs) {
      Buf bm(m ? th::upload(*m, dev) : nullptr), bv(th::upload(vals, dev)),
          bi(ibuf(dev, idx, i32));
      outs.emplace_back();
      return tlrt_scatter_add_rows_ibuf(bm.get(), bv.get(), rows, cols, bi.get(),
                                        outs.back().out());
    });
  });
}

// The CUDA index-buffer scatter against the CPU host-list scatter of the same entries (the header
// promises the same bits through either list, on both backends).
void scatter_add_rows_mixed(const std::string &w, const std::vector<float> *m,
                            const std::vector<float> &vals, uint64_t rows, uint64_t cols,
                            const std::vector<int64_t> &idx, bool i32) {
  const std::vector<uint64_t> h = host_list_of(idx);
  const std::vector<float> zeros = m ? std::vector<float>() : std::vector<float>(rows * cols, 0.0f);
  const std::vector<float> &base = m ? *m : zeros;
  int calls = 0;  // run_multi calls the CPU first, then the GPU (twice)
  run_multi(w + " scatter_add_rows (cpu, host list) vs scatter_add_rows_ibuf (cuda)",
            [&](tlrt_device dev, std::vector<Buf> &outs) {
              outs.emplace_back();
              if (calls++ == 0) {
                Buf bm(th::upload(base, dev)), bv(th::upload(vals, dev));
                return tlrt_scatter_add_rows(bm.get(), bv.get(), rows, cols, ptr(h), h.size(),
                                             outs.back().out());
              }
              Buf bm(m ? th::upload(*m, dev) : nullptr), bv(th::upload(vals, dev)),
                  bi(ibuf(dev, idx, i32));
              return tlrt_scatter_add_rows_ibuf(bm.get(), bv.get(), rows, cols, bi.get(),
                                                outs.back().out());
            });
  faults(kCpu);
  faults(kGpu);
}

// tlrt_index_flat_rows on both devices: the same int64 values; faults counted on each.
void flat_rows(const std::string &w, const std::vector<int64_t> &col_idx, uint64_t cols,
               bool i32) {
  uint64_t bad = 0;
  for (int64_t c : col_idx) bad += c < 0 || (uint64_t)c >= cols;
  std::vector<int64_t> got[2];
  uint64_t count[2] = {0, 0};
  const tlrt_device devs[2] = {kCpu, kGpu};
  for (int d = 0; d < 2; ++d) {
    faults(devs[d]);
    Buf bi(ibuf(devs[d], col_idx, i32)), y;
    const tlrt_status s = tlrt_index_flat_rows(bi.get(), cols, y.out());
    TH_CHECK_MSG(s == TLRT_OK, "%s flat_rows (%s) failed: %s", w.c_str(), d ? "cuda" : "cpu",
                 tlrt_last_error());
    if (s != TLRT_OK) return;
    tlrt_device od = 0;
    TH_OK(tlrt_buffer_device(y.get(), &od));
    TH_CHECK_MSG(od == devs[d], "%s flat_rows: output on device 0x%x", w.c_str(), od);
    got[d].resize(col_idx.size());
    TH_OK(tlrt_buffer_to_i64(y.get(), got[d].data(), got[d].size()));
    count[d] = faults(devs[d]);
  }
  ++summary().runs;
  summary().elements += col_idx.size();
  TH_CHECK_MSG(got[0] == got[1], "%s flat_rows: cpu and cuda values differ", w.c_str());
  TH_CHECK_MSG(count[0] == bad && count[1] == bad,
               "%s flat_rows: faults counted %llu on the cpu, %llu on cuda, expected %llu",
               w.c_str(), (unsigned long long)count[0], (unsigned long long)count[1],
               (unsigned long long)bad);
}

void ibuf_parity() {
  uint64_t salt = 50000;
  for (bool i32 : {false, true}) {
    const std::string ty = i32 ? " int32" : " int64";
    // Vectors: k == 0, k == 1, n == 0, hot targets, NULL base.
    struct V {
      uint64_t n, k, hot;
    };
    for (const V &c : {V{0, 0, 0}, V{0, 5, 0}, V{1, 0, 0}, V{1, 1, 0}, V{1, 100, 100},
                       V{2, 3, 0}, V{33, 1000, 9}, V{100, 5000, 33}, V{4097, 4097, 4096},
                       V{100000, 300000, 4097}, V{1000, 100000, 100000},
                       V{1000003, 65536, 33}, V{uint64_t{1} << 22, uint64_t{1} << 22, 100000}}) {
      if (!fits({c.n, c.k})) continue;
      const bool big = c.k > (uint64_t{1} << 20) || c.n > (uint64_t{1} << 20);
      const std::vector<int64_t> idx = ilist(c.k, c.n, c.hot, i32, true, ++salt);
      for (Dist d : {Dist::Wide, Dist::Bits, Dist::Edge}) {
        if (big && d != Dist::Wide) continue;
        const std::vector<float> x = make(d, c.n, ++salt), vals = make(d, c.k, ++salt);
        const std::string w = "ibuf n=" + std::to_string(c.n) + " k=" + std::to_string(c.k) +
                              " hot=" + std::to_string(c.hot) + ty + " " + dist_name(d);
        gather_vec_ibuf(w, x, idx, i32);
        scatter_add_ibuf(w, &x, c.n, vals, idx, i32);
        scatter_add_ibuf(w, nullptr, c.n, vals, idx, i32);
      }
    }
    // Matrices: hot targets of 9, 33, 4096, 4097 and 100000 entries, cols 1, 3, 4, 32, 33 and
    // 1024, with and without the base, dense (few rows) and sparse (many rows) plans.
    for (uint64_t cols : {1, 3, 4, 32, 33, 1024}) {
      for (uint64_t hot : {9, 33, 4096, 4097, 100000}) {
        for (uint64_t rows : {uint64_t{20}, uint64_t{100000}}) {
          const uint64_t k = hot + 500;
          if (!fits({rows * cols, k * cols, k})) continue;
          // Large inputs: hot 33, 4097 and 100000 only, 100000 with the dense plan only.
          const bool big = std::max(rows, k) * cols > (uint64_t{1} << 22);
          if (big && (hot == 9 || hot == 4096 || (rows > 20 && hot > 4097))) continue;
          const std::vector<int64_t> idx = ilist(k, rows, hot, i32, true, ++salt);
          for (Dist d : {Dist::Wide, Dist::Bits}) {
            if (big && d != Dist::Wide) continue;
            const std::vector<float> m = make(d, rows * cols, ++salt);
            const std::vector<float> vals = make(d, k * cols, ++salt);
            const std::string w = "ibuf " + shape(rows, cols, k) + " hot=" + std::to_string(hot) +
                                  ty + " " + dist_name(d);
            gather_rows_ibuf(w, m, rows, cols, idx, i32);
            scatter_add_rows_ibuf(w, &m, vals, rows, cols, idx, i32);
            scatter_add_rows_ibuf(w, nullptr, vals, rows, cols, idx, i32);
            if (d == Dist::Wide) {
              scatter_add_rows_mixed(w, &m, vals, rows, cols, idx, i32);
              scatter_add_rows_mixed(w, nullptr, vals, rows, cols, idx, i32);
            }
          }
        }
      }
    }
    // Empty and degenerate shapes: k == 0, rows == 0, cols == 0, rows == 1; only entries that are
    // not an index.
    struct M {
      uint64_t rows, cols, k;
    };
    for (const M &c : {M{5, 4, 0}, M{0, 4, 7}, M{5, 0, 7}, M{1, 33, 1}, M{1, 1024, 300},
                       M{3, 32, 2000}}) {
      const std::vector<int64_t> idx = ilist(c.k, c.rows, c.k / 2, i32, true, ++salt);
      const std::vector<float> m = make(Dist::Edge, c.rows * c.cols, ++salt);
      const std::vector<float> vals = make(Dist::Edge, c.k * c.cols, ++salt);
      const std::string w = "ibuf " + shape(c.rows, c.cols, c.k) + ty;
      gather_rows_ibuf(w, m, c.rows, c.cols, idx, i32);
      scatter_add_rows_ibuf(w, &m, vals, c.rows, c.cols, idx, i32);
      scatter_add_rows_ibuf(w, nullptr, vals, c.rows, c.cols, idx, i32);
    }
    {
      std::vector<int64_t> idx(3000);
      th::Rng rng(++salt);
      for (auto &v : idx) v = i32 ? -(int64_t)(rng.gen() % 1000) - 1
                                  : (rng.gen() & 1 ? -1 : (int64_t)(kTop + 1 + rng.gen() % 1000));
      const std::vector<float> m = make(Dist::Wide, 40 * 33, ++salt);
      const std::vector<float> vals = make(Dist::Wide, idx.size() * 33, ++salt);
      const std::string w = "ibuf no entry is an index" + ty;
      gather_rows_ibuf(w, m, 40, 33, idx, i32);
      scatter_add_rows_ibuf(w, &m, vals, 40, 33, idx, i32);
      scatter_add_rows_ibuf(w, nullptr, vals, 40, 33, idx, i32);
      const std::vector<float> v33(m.begin(), m.begin() + 33);
      const std::vector<float> vals1(vals.begin(), vals.begin() + idx.size());
      gather_vec_ibuf(w, v33, idx, i32);
      scatter_add_ibuf(w, &v33, 33, vals1, idx, i32);
    }
    // flat_rows: labels of a classification loss, with labels outside [0, classes).
    for (uint64_t cols : {1, 10, 1000, 50257}) {
      for (uint64_t rows : {0, 1, 7, 4096, 100000}) {
        th::Rng rng(++salt);
        std::vector<int64_t> c(rows);
        for (auto &v : c) {
          const uint64_t r = rng.gen() % 10;
          v = r == 0 ? -1 : r == 1 ? (int64_t)cols : (int64_t)(rng.gen() % cols);
        }
        flat_rows("flat_rows rows=" + std::to_string(rows) + " cols=" + std::to_string(cols) + ty,
                  c, cols, i32);
      }
    }
  }
}

}  // namespace

int main() {
  if (!parity::start("parity_index")) return 77;
  vector_parity();
  matrix_parity();
  ibuf_parity();
  parity::print_summary("parity_index");
  return th::finish("test_parity_index");
}
