// Entry points, indexing: gather and scatter-add with host index lists: validate, build the host
// arrays the backends take (core/backend/index.hpp), allocate the output, dispatch. Empty cases
// never reach a backend. Every entry of a list is checked (>= 2^60 is TLRT_ERR_INDEX) before
// the output is allocated:
//  - gathers: one vectorised pass (check_entries); the backends then read the list in place
//    (CUDA converts it to device keys while copying it into its pinned staging);
//  - scatter-adds: a stable sort of the in-range positions by target, on the host, shared by both
//    backends: a counting sort over the targets when bound <= 2k + 65536 (two passes over idx and
//    two branch-free passes over the counts), otherwise a radix sort of (target, position)
//    records, one MSD pass over the top 11 bits then each bucket by the low bits (std::sort below
//    2048 entries); then the segments (seg, tgt, pos) in one host array, all host arrays from the
//    CPU backend's block pool (HostArray). Measured on the 2-core build machine (AMD EPYC,
//    shared): k = 65536 entries over 50000 rows, about 165 us per call for the plan.
// tlrt_gather_vec and tlrt_scatter_add are the cols == 1 cases of the row functions, and
// tlrt_scatter_add_row is tlrt_scatter_add_rows with the one-entry list {i}: one code path each,
// so the five functions share one rule for what cannot be an index and what is out of range.
// The determinism switch is not consulted: the one order is deterministic and the fast path.
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "abi/tlrt_index.h"
#include "core/backend/index.hpp"
#include "core/backend/memory.hpp"
#include "core/buffer.hpp"
#include "core/error.hpp"
#include "core/shape_check.hpp"

using namespace tlrt;

namespace {

using ull = unsigned long long;

constexpr uint64_t kNarrowMax = 0xFFFFFFFFull;  // uint32_t arrays hold values <= this

// Every pointer argument must be non-NULL: checked first, for all of them, so that the order of
// the status codes is the one the header states.
void need(const void *p, const char *name) {
  if (p == nullptr) fail(TLRT_ERR_NULL_ARGUMENT, "argument %s is NULL", name);
}

void check_list_ptr(const uint64_t *idx, uint64_t k) {
  if (idx == nullptr && k != 0)
    fail(TLRT_ERR_NULL_ARGUMENT, "argument idx is NULL but argument k = %llu", (ull)k);
}

void check_list_len(uint64_t k) {
  if (k > TLRT_MAX_ELEMENTS)
    fail(TLRT_ERR_OVERFLOW,
         "argument k = %llu exceeds TLRT_MAX_ELEMENTS (2^60): no index list is that long", (ull)k);
}

[[noreturn]] void not_an_index(const char *name, bool list, uint64_t j, uint64_t v) {
  char where[48] = "";
  if (list) std::snprintf(where, sizeof where, "[%llu]", (ull)j);
  fail(TLRT_ERR_INDEX,
       "argument %s%s = %llu (as a signed 64-bit value: %lld) is not an index: it is >= "
       "TLRT_MAX_ELEMENTS (2^60), so it cannot address an element of any buffer",
       name, where, (ull)v, (long long)v);
}

constexpr uint64_t kBlock = 4096;  // entries per validation block

// The first entry >= 2^60 of idx[j0..e) fails with TLRT_ERR_INDEX (called once a block's OR
// says there is one).
void fail_first_bad(const uint64_t *idx, uint64_t j0, uint64_t e) {
  for (uint64_t j = j0; j < e; ++j)
    if (idx[j] >= TLRT_MAX_ELEMENTS) not_an_index("idx", true, j, idx[j]);
}

// Fails with TLRT_ERR_INDEX at the first entry >= 2^60: one OR per entry over blocks
// (vectorised), the position searched only in a block that has a bad entry. The passes that
// sort the list below fold the same check into their first pass over idx.
void check_entries(const uint64_t *idx, uint64_t k) {
  for (uint64_t j0 = 0; j0 < k; j0 += kBlock) {
    const uint64_t e = std::min(k, j0 + kBlock);
    uint64_t acc = 0;
    for (uint64_t j = j0; j < e; ++j) acc |= idx[j];
    if (acc >= TLRT_MAX_ELEMENTS) fail_first_bad(idx, j0, e);
  }
}

// A host array of n (>= 1 allocated) trivial values, not initialised, from the CPU backend's
// block pool (stub/memory.cpp): a long list's plan arrays are hundreds of MB, and a fresh block
// of that size is an mmap whose first touch page-faults (measured: clear_page and the faults
// were ~35% of a 2^24-entry scatter_add on the build machine); pooled blocks are reused from call
// to call, within the pool's cap (TORCHLEAN_RT_CPU_POOL_MAX_BYTES). Too large: OUT_OF_MEMORY.
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

// ---- gathers -------------------------------------------------------------------------------------

// The (k, cols) gather of X's rows, nout = k * cols elements, after checking every entry. The
// backends read the list itself (core/backend/index.hpp).
tlrt_buffer *gather(const Buffer &X, uint64_t rows, uint64_t cols, const uint64_t *idx,
                    uint64_t k, uint64_t nout) {
  check_entries(idx, k);
  Owned y = new_buffer(X.dev, nout);
  if (nout == 0) return y.release();
  if (rows == 0)  // nothing to read: only out-of-range entries
    TLRT_DISPATCH(X.dev, fill, X.dev.ordinal, y->data, 0.0f, nout);
  else
    TLRT_DISPATCH(X.dev, gather_rows, X.dev.ordinal, X.data, rows, cols, idx::Keys{idx, k},
                  y->data);
  return y.release();
}

// ---- scatter plans -------------------------------------------------------------------------------

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
template <class U>
Built<U> plan_counting(const uint64_t *idx, uint64_t k, uint64_t bound) {
  Built<U> b;
  HostArray<U> start(bound);
  U *st = start.get();
  std::memset(st, 0, (bound == 0 ? 1 : bound) * sizeof(U));
  for (uint64_t j0 = 0; j0 < k; j0 += kBlock) {
    const uint64_t e = std::min(k, j0 + kBlock);
    uint64_t acc = 0;
    for (uint64_t j = j0; j < e; ++j) {
      const uint64_t v = idx[j];
      acc |= v;
      if (v < bound) ++st[v];
    }
    if (acc >= TLRT_MAX_ELEMENTS) fail_first_bad(idx, j0, e);
  }
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
    const uint64_t v = idx[j];
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
// within a target. Measured on the build machine (2 shared cores), scatter_add of 2^24 entries
// into 2^26 rows, whole call on the CPU backend: 2.8 s with 16-bit LSD digits over two arrays ->
// 1.3 s with three 11-bit LSD passes over (target, position) records (the passes' scattered
// stores ~70% of the sort by perf samples); with the pooled arrays and the CPU scatter's
// prefetch 532 ms -> 484-499 ms with this MSD + in-bucket form (the sort 36% -> 30% of the
// samples: one pass over 2048 write streams instead of three).
template <class U>
Built<U> plan_sorting(const uint64_t *idx, uint64_t k, uint64_t bound) {
  HostArray<Rec<U>> a(k);
  Rec<U> *r = a.get();
  uint64_t m = 0;
  for (uint64_t j0 = 0; j0 < k; j0 += kBlock) {
    const uint64_t e = std::min(k, j0 + kBlock);
    uint64_t acc = 0;
    for (uint64_t j = j0; j < e; ++j) {
      const uint64_t v = idx[j];
      acc |= v;
      r[m] = Rec<U>{(U)v, (U)j};  // m <= j < k
      m += v < bound;
    }
    if (acc >= TLRT_MAX_ELEMENTS) fail_first_bad(idx, j0, e);
  }
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

template <class U>
tlrt_buffer *scatter_with(const Buffer &X, const float *vals, uint64_t rows, uint64_t cols,
                          const uint64_t *idx, uint64_t k) {
  const Built<U> b = (rows <= 2 * k + 65536 ? plan_counting<U>(idx, k, rows)
                                                  : plan_sorting<U>(idx, k, rows));
  const Dev dev = X.dev;
  Owned y = new_buffer(dev, X.size);
  if (b.m == 0) {  // nothing in range (k == 0 included): a bit-exact copy
    TLRT_DISPATCH(dev, copy, dev.ordinal, y->data, X.data, X.size * 4);
  } else {
    const idx::Plan plan{sizeof(U) == 8, b.nseg, b.m, b.max_len, b.blob.get()};
    TLRT_DISPATCH(dev, scatter_add_rows, dev.ordinal, X.data, vals, rows, cols, plan, y->data);
  }
  return y.release();
}

// A copy of X (rows, cols) with the rows of vals scattered, after checking every entry.
tlrt_buffer *scatter(const Buffer &X, const float *vals, uint64_t rows, uint64_t cols,
                     const uint64_t *idx, uint64_t k) {
  if (X.size == 0) {
    check_entries(idx, k);
    return new_buffer(X.dev, 0).release();
  }
  if (rows <= kNarrowMax && k <= kNarrowMax)
    return scatter_with<uint32_t>(X, vals, rows, cols, idx, k);
  return scatter_with<uint64_t>(X, vals, rows, cols, idx, k);
}

}  // namespace

extern "C" {

TLRT_API tlrt_status tlrt_gather_vec(const tlrt_buffer *v, uint64_t n, const uint64_t *idx,
                                     uint64_t k, tlrt_buffer **out) {
  if (out) *out = nullptr;
  return guarded(__func__, [&] {
    clear_out(out, "out");
    need(v, "v");
    check_list_ptr(idx, k);
    const Buffer &V = input(v, "v");
    check_list_len(k);
    if (n != V.size)
      fail(TLRT_ERR_SHAPE, "argument v has %llu elements, but argument n = %llu", (ull)V.size,
           (ull)n);
    *out = gather(V, n, 1, idx, k, k);
  });
}

TLRT_API tlrt_status tlrt_scatter_add(const tlrt_buffer *x, const tlrt_buffer *vals, uint64_t n,
                                      const uint64_t *idx, uint64_t k, tlrt_buffer **out) {
  if (out) *out = nullptr;
  return guarded(__func__, [&] {
    clear_out(out, "out");
    need(x, "x");
    need(vals, "vals");
    check_list_ptr(idx, k);
    const Buffer &X = input(x, "x");
    const Buffer &V = input(vals, "vals");
    same_device(X, "x", V, "vals");
    check_list_len(k);
    if (n != X.size)
      fail(TLRT_ERR_SHAPE, "argument x has %llu elements, but argument n = %llu", (ull)X.size,
           (ull)n);
    if (k != V.size)
      fail(TLRT_ERR_SHAPE, "argument vals has %llu elements, but argument k = %llu", (ull)V.size,
           (ull)k);
    *out = scatter(X, V.data, n, 1, idx, k);
  });
}

TLRT_API tlrt_status tlrt_gather_rows(const tlrt_buffer *mat, uint64_t rows, uint64_t cols,
                                      const uint64_t *idx, uint64_t k, tlrt_buffer **out) {
  if (out) *out = nullptr;
  return guarded(__func__, [&] {
    clear_out(out, "out");
    need(mat, "mat");
    check_list_ptr(idx, k);
    const Buffer &M = input(mat, "mat");
    check_list_len(k);
    check_matrix(M, "mat", rows, cols);
    uint64_t nout = 0;
    if (__builtin_mul_overflow(k, cols, &nout) || nout > TLRT_MAX_ELEMENTS)
      fail(TLRT_ERR_OVERFLOW,
           "the output would have argument k * argument cols = %llu * %llu elements, more than "
           "TLRT_MAX_ELEMENTS (2^60)",
           (ull)k, (ull)cols);
    *out = gather(M, rows, cols, idx, k, nout);
  });
}

TLRT_API tlrt_status tlrt_scatter_add_row(const tlrt_buffer *mat, const tlrt_buffer *row,
                                          uint64_t rows, uint64_t cols, uint64_t i,
                                          tlrt_buffer **out) {
  if (out) *out = nullptr;
  return guarded(__func__, [&] {
    clear_out(out, "out");
    need(mat, "mat");
    need(row, "row");
    const Buffer &M = input(mat, "mat");
    const Buffer &R = input(row, "row");
    same_device(M, "mat", R, "row");
    check_matrix(M, "mat", rows, cols);
    if (cols != R.size)
      fail(TLRT_ERR_SHAPE, "argument row has %llu elements, but argument cols = %llu",
           (ull)R.size, (ull)cols);
    if (i >= TLRT_MAX_ELEMENTS) not_an_index("i", false, 0, i);
    *out = scatter(M, R.data, rows, cols, &i, 1);
  });
}

TLRT_API tlrt_status tlrt_scatter_add_rows(const tlrt_buffer *mat, const tlrt_buffer *vals,
                                           uint64_t rows, uint64_t cols, const uint64_t *idx,
                                           uint64_t k, tlrt_buffer **out) {
  if (out) *out = nullptr;
  return guarded(__func__, [&] {
    clear_out(out, "out");
    need(mat, "mat");
    need(vals, "vals");
    check_list_ptr(idx, k);
    const Buffer &M = input(mat, "mat");
    const Buffer &V = input(vals, "vals");
    same_device(M, "mat", V, "vals");
    check_list_len(k);
    check_matrix(M, "mat", rows, cols);
    uint64_t nv = 0;
    const bool fits = !__builtin_mul_overflow(k, cols, &nv);
    if (!fits || nv != V.size)
      fail(TLRT_ERR_SHAPE,
           "argument vals has %llu elements, but argument k * argument cols = %llu * %llu = %s",
           (ull)V.size, (ull)k, (ull)cols, count_str(nv, fits).c_str());
    *out = scatter(M, V.data, rows, cols, idx, k);
  });
}

}  // extern "C"
