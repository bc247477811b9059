// CPU backend, indexing: gather and scatter-add through host lists and index buffers.
//
// gather_rows: one memcpy per output row (or a zero fill for an entry out of range or not an
// index), reading the list in place; cols == 1 is a plain loop over it.
// scatter_add_rows: the plan first: the in-range entries grouped by target, stably (a counting
// sort over the targets when bound <= 2k + 65536: two passes over the list and two branch-free
// passes over the counts; otherwise a radix sort of (target, position) records, one MSD pass over
// the top 11 bits then each bucket by the low bits, std::sort below 2048 entries), as segments
// (seg, tgt, pos) in one host array; every host array from the block pool (HostArray). Then
// y = a copy of x (or zeros), and each segment rewrites its target row: y[t, c] = x[t, c] + S_c
// with S_c the tree of core/numerics/reduce_tree.hpp over the segment's vals rows, column by
// column, in segment order:
//  - segments of L <= 32 entries: the tree is red::small (lane j = identity + v_j for j < L, the
//    identity for L <= j < W = the power of two >= L, then halving h = W/2, ..., 1); here the
//    lanes are materialised as W rows of a column tile and halved row by row (vectorised across
//    columns), the same operations per column as red::small, which the cols == 1 path calls;
//  - longer segments: the tree through the reduce backend, per column tile of <= 1024 columns:
//    each chunk of 4096 entries has its rows gathered contiguous and reduced down the columns by
//    stub::reduce_axis (the chunk values), and several chunks' values are reduced by it again
//    (step 4 of the tree). Scratch: at most 4096 x 1024 floats (16 MiB) plus the chunk values.
// Columns are independent, so tiling them changes nothing in any column's sum. Entries that are
// not an index (index buffers only) add to a process-wide counter, the CPU device's.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <utility>
#include <vector>

#include "core/backend/index.hpp"
#include "core/backend/memory.hpp"
#include "core/backend/reduce.hpp"
#include "core/error.hpp"
#include "stub/cpu_clones.hpp"

namespace tlrt {
namespace stub {

namespace {

using ull = unsigned long long;
using Sum = red::Ops<red::Op::Sum>;
constexpr uint64_t kTile = 1024;  // columns per tile
constexpr uint64_t kNarrowMax = 0xFFFFFFFFull;  // uint32_t plan arrays hold values <= this

std::atomic<uint64_t> g_faults{0};

// f(p) with p the list's entries as a typed pointer.
template <class F>
void with_entries(const idx::List &l, F &&f) {
  switch (l.type) {
    case idx::Type::U64: f(static_cast<const uint64_t *>(l.p)); break;
    case idx::Type::I32: f(static_cast<const int32_t *>(l.p)); break;
    case idx::Type::I64: f(static_cast<const int64_t *>(l.p)); break;
  }
}

// The list's entries that are not an index.
template <class T>
uint64_t faults_of(const T *idx, uint64_t k) {
  uint64_t nf = 0;
  for (uint64_t j = 0; j < k; ++j) {
    bool f;
    (void)idx::decode(idx[j], 1, &f);
    nf += f;
  }
  return nf;
}

// A host array of n (>= 1 allocated) trivial values, not initialised, from the CPU backend's
// block pool (stub/memory.cpp): a long list's plan arrays are hundreds of MB, and a fresh block
// of that size is an mmap whose first touch page-faults; pooled blocks are reused from call to
// call, within the pool's cap (TORCHLEAN_RT_CPU_POOL_MAX_BYTES). Too large: OUT_OF_MEMORY.
template <class T>
class HostArray {
 public:
  HostArray() = default;
  explicit HostArray(uint64_t n) {
    if (n == 0) n = 1;
    if (n > UINT64_MAX / sizeof(T))
      fail(TLRT_ERR_OUT_OF_MEMORY, "out of host memory: %llu elements of %zu bytes", (ull)n,
           sizeof(T));
    bytes_ = n * sizeof(T);
    p_ = static_cast<T *>(stub::alloc(0, bytes_));
  }
  HostArray(HostArray &&o) noexcept { swap(o); }
  HostArray &operator=(HostArray &&o) noexcept {
    swap(o);  // o frees what this held
    return *this;
  }
  HostArray(const HostArray &) = delete;
  HostArray &operator=(const HostArray &) = delete;
  ~HostArray() {
    if (p_ != nullptr) stub::dealloc(0, p_, bytes_);
  }
  void swap(HostArray &o) noexcept {
    std::swap(bytes_, o.bytes_);
    std::swap(p_, o.p_);
  }
  T *get() const { return p_; }

 private:
  uint64_t bytes_ = 0;
  T *p_ = nullptr;
};

// Reads the list in place: no key array.
template <class T>
uint64_t gather_t(const float *x, uint64_t rows, uint64_t cols, const T *idx, uint64_t k,
                  float *y) {
  uint64_t nf = 0;
  if (cols == 1) {
    for (uint64_t j = 0; j < k; ++j) {
      bool f;
      const uint64_t r = idx::decode(idx[j], rows, &f);
      nf += f;
      y[j] = r < rows ? x[r] : 0.0f;
    }
    return nf;
  }
  for (uint64_t j = 0; j < k; ++j) {
    float *yr = y + j * cols;
    bool f;
    const uint64_t r = idx::decode(idx[j], rows, &f);
    nf += f;
    if (r < rows)
      std::memcpy(yr, x + r * cols, cols * 4);
    else
      std::memset(yr, 0, cols * 4);  // +0.0f
  }
  return nf;
}

// ---- scatter plans ------------------------------------------------------------------------------

// The plan's arrays in one host array: seg[nseg + 1], tgt[nseg], pos[m].
template <class U>
struct Built {
  HostArray<U> blob;
  uint64_t nseg = 0, m = 0, max_len = 0;
  U *seg() const { return blob.get(); }
  U *tgt() const { return blob.get() + nseg + 1; }
  U *pos() const { return blob.get() + 2 * nseg + 1; }
};

// Counting sort over the targets (bound small against k): counts (with the entries checked),
// then segment starts and the segment arrays in one branch-free pass over the counts (a count of
// zero writes seg/tgt at the slot the next target overwrites: at most one slot past the last
// target, which is pos[0], written later), then the positions in one pass over idx.
template <class U, class T>
Built<U> plan_counting(const T *idx, uint64_t k, uint64_t bound, uint64_t *faults) {
  Built<U> b;
  HostArray<U> start(bound);
  U *st = start.get();
  std::memset(st, 0, (bound == 0 ? 1 : bound) * sizeof(U));
  uint64_t nf = 0;
  for (uint64_t j = 0; j < k; ++j) {
    bool f;
    const uint64_t v = idx::decode(idx[j], bound, &f);
    nf += f;
    if (v < bound) ++st[v];
  }
  *faults += nf;
  for (uint64_t t = 0; t < bound; ++t) {
    b.nseg += st[t] != 0;
    b.m += st[t];
  }
  if (b.m == 0) return b;
  b.blob = HostArray<U>(2 * b.nseg + 1 + b.m);
  U *seg = b.seg(), *tgt = b.tgt(), *pos = b.pos();
  uint64_t s = 0, off = 0, mx = 0;
  for (uint64_t t = 0; t < bound; ++t) {
    const uint64_t c = st[t];
    seg[s] = (U)off;
    tgt[s] = (U)t;
    st[t] = (U)off;
    off += c;
    mx = c > mx ? c : mx;
    s += c != 0;
  }
  seg[b.nseg] = (U)b.m;
  b.max_len = mx;
  for (uint64_t j = 0; j < k; ++j) {
    bool f;
    const uint64_t v = idx::decode(idx[j], bound, &f);
    if (v < bound) pos[st[v]++] = (U)j;
  }
  return b;
}

// A (target, position) pair of the sort, in one array so that each radix pass writes one stream
// per digit value (two arrays wrote two: at 65536 digit values, 16-bit digits, the passes were
// cache and TLB bound).
template <class U>
struct Rec {
  U key, pos;
};

// Sorted records (stable: positions increase within a target) to segments.
template <class U>
Built<U> plan_from_sorted(const Rec<U> *r, uint64_t m) {
  Built<U> b;
  b.m = m;
  if (m == 0) return b;
  for (uint64_t e = 0; e < m; ++e) b.nseg += e == 0 || r[e].key != r[e - 1].key;
  b.blob = HostArray<U>(2 * b.nseg + 1 + m);
  U *seg = b.seg(), *tgt = b.tgt(), *pos = b.pos();
  uint64_t s = 0;
  for (uint64_t e = 0; e < m; ++e) {
    if (e == 0 || r[e].key != r[e - 1].key) {
      if (s > 0) b.max_len = std::max<uint64_t>(b.max_len, e - seg[s - 1]);
      seg[s] = (U)e;
      tgt[s] = r[e].key;
      ++s;
    }
    pos[e] = r[e].pos;
  }
  seg[b.nseg] = (U)m;
  b.max_len = std::max<uint64_t>(b.max_len, m - seg[b.nseg - 1]);
  return b;
}

constexpr unsigned kDigitBits = 11;  // the MSD pass's digit: 2048 counters and write streams
constexpr unsigned kLowBits = 8;     // digits of the passes inside a bucket: 256 counters

// Stable sort of src[0..n) by the low `bits` bits of the key (all higher bits equal), ending in
// src when the number of passes, ceil(bits / kLowBits), is even and in tmp when it is odd (both
// hold n records; a bucket of the MSD pass, small and in cache on average). Insertion sort for
// n <= 32, then copied to where the passes would have left it.
template <class U>
void sort_bucket(Rec<U> *src, Rec<U> *tmp, uint64_t n, unsigned bits) {
  const unsigned passes = (bits + kLowBits - 1) / kLowBits;
  if (passes == 0) return;
  if (n <= 32) {
    for (uint64_t i = 1; i < n; ++i) {
      const Rec<U> x = src[i];
      uint64_t j = i;
      for (; j > 0 && src[j - 1].key > x.key; --j) src[j] = src[j - 1];
      src[j] = x;
    }
    if (passes % 2 == 1) std::memcpy(tmp, src, n * sizeof(Rec<U>));
    return;
  }
  const unsigned db = (bits + passes - 1) / passes;  // <= kLowBits
  const uint64_t digits = uint64_t{1} << db;
  uint64_t c[uint64_t{1} << kLowBits];
  for (unsigned p = 0; p < passes; ++p) {
    std::fill(c, c + digits, 0);
    for (uint64_t e = 0; e < n; ++e) ++c[((uint64_t)src[e].key >> (p * db)) & (digits - 1)];
    uint64_t off = 0;
    for (uint64_t d = 0; d < digits; ++d) {
      const uint64_t cnt = c[d];
      c[d] = off;
      off += cnt;
    }
    for (uint64_t e = 0; e < n; ++e)
      tmp[c[((uint64_t)src[e].key >> (p * db)) & (digits - 1)]++] = src[e];
    std::swap(src, tmp);
  }
}

// Sort of the in-range (target, position) records (bound large against k), collected with the
// entries checked (branch-free: every entry is written, the count advances for in-range ones):
// std::sort for short lists (positions are distinct, so sorting by (target, position) is the
// stable sort by target); otherwise one stable counting pass over the top 11 bits of the target
// (MSD: 2048 buckets), then each bucket sorted by the remaining bits with passes of <= 8-bit
// digits (LSD), in cache for the average bucket. Every step is stable, so positions increase
// within a target. (Forms tried and their times: docs/kernels/index.md, CPU plan.)
template <class U, class T>
Built<U> plan_sorting(const T *idx, uint64_t k, uint64_t bound, uint64_t *faults) {
  HostArray<Rec<U>> a(k);
  Rec<U> *r = a.get();
  uint64_t m = 0, nf = 0;
  for (uint64_t j = 0; j < k; ++j) {
    bool f;
    const uint64_t v = idx::decode(idx[j], bound, &f);
    nf += f;
    r[m] = Rec<U>{(U)v, (U)j};  // m <= j < k
    m += v < bound;
  }
  *faults += nf;
  if (m <= 2048) {
    std::sort(r, r + m, [](const Rec<U> &x, const Rec<U> &y) {
      return x.key < y.key || (x.key == y.key && x.pos < y.pos);
    });
    return plan_from_sorted(r, m);
  }
  const unsigned bits = 64 - (unsigned)__builtin_clzll(bound - 1);  // bound > 65536 here
  const unsigned low = bits > kDigitBits ? bits - kDigitBits : 0;  // bits below the MSD digit
  constexpr uint64_t kDigits = uint64_t{1} << kDigitBits;
  std::vector<uint64_t> start(kDigits + 1, 0);
  for (uint64_t e = 0; e < m; ++e) ++start[((uint64_t)r[e].key >> low) + 1];
  for (uint64_t d = 0; d < kDigits; ++d) start[d + 1] += start[d];
  std::vector<uint64_t> next(start.begin(), start.end() - 1);
  HostArray<Rec<U>> b(m);
  Rec<U> *msd = b.get();
  for (uint64_t e = 0; e < m; ++e) msd[next[(uint64_t)r[e].key >> low]++] = r[e];
  for (uint64_t d = 0; d < kDigits; ++d)
    sort_bucket(msd + start[d], r + start[d], start[d + 1] - start[d], low);
  const unsigned low_passes = (low + kLowBits - 1) / kLowBits;
  return plan_from_sorted(low_passes % 2 == 1 ? r : msd, m);
}

// a[c] = identity + v[c] (a lane holding one element).
TLRT_CPU_CLONES void lane_init(float *__restrict a, const float *__restrict v, uint64_t w) {
  const float id = Sum::identity();
  for (uint64_t c = 0; c < w; ++c) a[c] = Sum::op(id, v[c]);
}

// a[c] = a[c] + b[c] (one halving pair).
TLRT_CPU_CLONES void lane_add(float *__restrict a, const float *__restrict b, uint64_t w) {
  for (uint64_t c = 0; c < w; ++c) a[c] = Sum::op(a[c], b[c]);
}

// y[c] = x[c] + s[c].
TLRT_CPU_CLONES void add_rows(float *__restrict y, const float *__restrict x,
                              const float *__restrict s, uint64_t w) {
  for (uint64_t c = 0; c < w; ++c) y[c] = x[c] + s[c];
}

// Scatter of one column (cols == 1), a short segment: red::small itself.
template <unsigned W, class U>
float small1(const float *vals, const U *p, unsigned L) {
  return red::small<red::Op::Sum, W>([vals, p](unsigned j) { return vals[p[j]]; }, L);
}

template <class U>
float small1_any(const float *vals, const U *p, unsigned L) {
  float s = 0.0f;
  red::with_small_width(L, [&](auto w) { s = small1<decltype(w)::value>(vals, p, L); });
  return s;
}

// s[0..w) = the tree over e < L of vals[p[e] * cols + c0 + c], for one tile of w columns.
// buf: scratch owned by the caller.
template <class U>
void tile_sum(const float *vals, uint64_t cols, uint64_t c0, uint64_t w, const U *p, uint64_t L,
              std::vector<float> &buf, float *s) {
  if (L <= red::kSmall) {
    const unsigned W = red::pow2_at_least(L);
    if (buf.size() < W * w) buf.resize(W * w);
    float *a = buf.data();
    for (unsigned j = 0; j < W; ++j) {
      float *row = a + j * w;
      if (j < L)
        lane_init(row, vals + (uint64_t)p[j] * cols + c0, w);
      else
        std::fill(row, row + w, Sum::identity());
    }
    for (unsigned h = W >> 1; h >= 1; h >>= 1)
      for (unsigned t = 0; t < h; ++t) lane_add(a + t * w, a + (t + h) * w, w);
    std::copy(a, a + w, s);
    return;
  }
  const uint64_t nc = red::chunks_of(L);
  const uint64_t need = red::kChunk * w + nc * w;
  if (buf.size() < need) buf.resize(need);
  float *g = buf.data(), *part = g + red::kChunk * w;
  for (uint64_t ch = 0; ch < nc; ++ch) {
    const uint64_t e0 = ch * red::kChunk;
    const uint64_t len = std::min<uint64_t>(red::kChunk, L - e0);
    for (uint64_t e = 0; e < len; ++e)
      std::memcpy(g + e * w, vals + (uint64_t)p[e0 + e] * cols + c0, w * 4);
    reduce_axis(0, red::Op::Sum, g, 1, len, w, 1.0f, nc == 1 ? s : part + ch * w);
  }
  if (nc > 1) reduce_axis(0, red::Op::Sum, part, 1, nc, w, 1.0f, s);
}

// y = x (NULL: zeros) with the plan's segments added; x[t] + sum stays one addition, with
// x[t] = +0.0f for NULL x (the bits of a scatter into an explicit zero buffer).
template <class U>
void apply_plan(const float *x, const float *vals, uint64_t rows, uint64_t cols,
                const Built<U> &plan, float *y) {
  static const float kZeroRow[kTile] = {};
  if (x != nullptr)
    std::memcpy(y, x, rows * cols * 4);
  else
    std::memset(y, 0, rows * cols * 4);
  const struct {
    const U *seg, *tgt, *pos;
  } v{plan.seg(), plan.tgt(), plan.pos()};
  if (cols == 1) {
    // The vals the next ~kAhead entries read are prefetched: the plan's positions are known in
    // advance, and without it each segment's scattered loads wait on memory one segment at a
    // time.
    constexpr uint64_t kAhead = 64;
    std::vector<float> buf;
    uint64_t pf = 0;  // entries [0, pf) prefetched
    for (uint64_t s = 0; s < plan.nseg; ++s) {
      for (const uint64_t e = std::min<uint64_t>(plan.m, (uint64_t)v.seg[s + 1] + kAhead); pf < e;
           ++pf)
        __builtin_prefetch(vals + v.pos[pf]);
      const uint64_t L = (uint64_t)v.seg[s + 1] - v.seg[s];
      const U *p = v.pos + v.seg[s];
      const U t = v.tgt[s];
      float sum;
      if (L <= red::kSmall)
        sum = small1_any(vals, p, (unsigned)L);
      else
        tile_sum(vals, 1, 0, 1, p, L, buf, &sum);
      y[t] = (x ? x[t] : 0.0f) + sum;
    }
    return;
  }
  std::vector<float> buf, sum(std::min(cols, kTile));
  for (uint64_t s = 0; s < plan.nseg; ++s) {
    const uint64_t L = (uint64_t)v.seg[s + 1] - v.seg[s];
    const U *p = v.pos + v.seg[s];
    const uint64_t t = v.tgt[s];
    for (uint64_t c0 = 0; c0 < cols; c0 += kTile) {
      const uint64_t w = std::min(kTile, cols - c0);
      tile_sum(vals, cols, c0, w, p, L, buf, sum.data());
      add_rows(y + t * cols + c0, x ? x + t * cols + c0 : kZeroRow, sum.data(), w);
    }
  }
}

template <class U, class T>
void scatter_with(const float *x, const float *vals, uint64_t rows, uint64_t cols, const T *idx,
                  uint64_t k, float *y) {
  uint64_t nf = 0;
  const Built<U> b = (rows <= 2 * k + 65536 ? plan_counting<U>(idx, k, rows, &nf)
                                                  : plan_sorting<U>(idx, k, rows, &nf));
  if (nf != 0) g_faults.fetch_add(nf, std::memory_order_relaxed);
  if (b.m == 0) {  // nothing in range: a bit-exact copy, or zeros (the plan holds no array)
    if (x != nullptr)
      std::memcpy(y, x, rows * cols * 4);
    else
      std::memset(y, 0, rows * cols * 4);
    return;
  }
  apply_plan(x, vals, rows, cols, b, y);
}

}  // namespace

void gather_rows(int, const float *x, uint64_t rows, uint64_t cols, const idx::List &list,
                 float *y) {
  with_entries(list, [&](auto p) {
    const uint64_t nf = gather_t(x, rows, cols, p, list.k, y);
    if (nf != 0) g_faults.fetch_add(nf, std::memory_order_relaxed);
  });
}

void scatter_add_rows(int, const float *x, const float *vals, uint64_t rows, uint64_t cols,
                      const idx::List &list, float *y) {
  with_entries(list, [&](auto p) {
    if (rows <= kNarrowMax && list.k <= kNarrowMax)
      scatter_with<uint32_t>(x, vals, rows, cols, p, list.k, y);
    else
      scatter_with<uint64_t>(x, vals, rows, cols, p, list.k, y);
  });
}

void flat_labels(int, const idx::List &labels, uint64_t classes, int64_t *flat) {
  const uint64_t batch = labels.k;
  uint64_t nf = 0;
  with_entries(labels, [&](auto p) {
    for (uint64_t i = 0; i < batch; ++i) {
      bool f;
      const uint64_t c = idx::decode(p[i], classes, &f);
      const bool ok = c < classes;
      nf += !ok;
      flat[i] = (int64_t)(ok ? i * classes + c : batch * classes);
    }
  });
  if (nf != 0) g_faults.fetch_add(nf, std::memory_order_relaxed);
}

void count_faults(int, const idx::List &list) {
  with_entries(list, [&](auto p) {
    const uint64_t nf = faults_of(p, list.k);
    if (nf != 0) g_faults.fetch_add(nf, std::memory_order_relaxed);
  });
}

void add_index_faults(uint64_t n) {
  if (n != 0) g_faults.fetch_add(n, std::memory_order_relaxed);
}

uint64_t index_faults(int, bool reset) {
  return reset ? g_faults.exchange(0) : g_faults.load();
}

}  // namespace stub
}  // namespace tlrt
