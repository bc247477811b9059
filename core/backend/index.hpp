// Backend interface: indexing: gather and scatter-add with host index lists. Defined by
// stub/index.cpp and cuda/index.cu.
//
// Core (core/api_index.cpp) has validated every argument (every list entry is < 2^60) and
// handled every empty case, and hands the backends:
//  - for gathers, idx::Keys: the caller's own list, read in place (the CPU gathers through it;
//    CUDA converts it piece by piece into pinned staging with to_keys: one key per output row,
//    the source row or idx::none<U>() for an out-of-range entry, which reads zeros);
//  - for scatter-adds, idx::Plan: the in-range entries grouped by target (a stable sort by
//    target), as segments: segment s adds the vals rows pos[seg[s]], ..., pos[seg[s+1] - 1]
//    (increasing positions j) to row tgt[s] (increasing targets).
// Plans are uint32_t arrays when every value fits (the common case: bound and k below 2^32 - 1)
// and uint64_t otherwise (Plan::wide); they live in host memory (the CUDA backend uploads them
// with upload_async into stream-ordered scratch) and are valid during the call only, as is the
// list of Keys.
// Both backends evaluate the same sums: out[t, c] = x[t, c] + S, S = the tree of
// core/numerics/reduce_tree.hpp over the segment's values of column c, in segment order, so they
// agree bit for bit (abi/tlrt_index.h states the contract).
#pragma once

#include <cstdint>

#include "core/numerics/reduce_tree.hpp"

namespace tlrt {
namespace idx {

// The key / array value that stands for "no row" (greater than every in-range value).
template <class U>
TLRT_HD constexpr U none() {
  return ~U(0);
}

// Output row j of a gather reads row idx[j] of the source, or zeros where idx[j] >= rows.
// k >= 1 entries, each < 2^60 (checked by core).
struct Keys {
  const uint64_t *idx;  // the caller's list, host memory
  uint64_t k;           // number of entries (output rows)
};

// out[j] = idx[j] if < bound, else none<U>() (U = uint32_t needs bound <= 2^32 - 1: none is
// then no row), for j < n: the device keys of a gather, written straight into pinned staging so
// that no host array of the list's size is created (a fresh one page-faulted: 2^26 entries took
// ~150 of ~350 ms on the build machine).
template <class U>
inline void to_keys(const uint64_t *idx, uint64_t n, uint64_t bound, U *out) {
  for (uint64_t j = 0; j < n; ++j) out[j] = idx[j] < bound ? (U)idx[j] : none<U>();
}

// A scatter plan: nseg >= 1 segments holding m >= 1 entries in all, contiguous in one host array
// `blob` of the element type: seg[0..nseg] (seg[0] = 0, seg[nseg] = m, strictly increasing), then
// tgt[0..nseg) (strictly increasing targets, each < rows), then pos[0..m) (positions into vals,
// increasing within each segment).
struct Plan {
  bool wide;         // blob holds uint64_t (else uint32_t)
  uint64_t nseg;     // distinct targets
  uint64_t m;        // in-range entries
  uint64_t max_len;  // longest segment
  const void *blob;  // host memory: (2 nseg + 1 + m) elements
};

template <class U>
struct PlanView {
  const U *seg, *tgt, *pos;
};

template <class U>
inline PlanView<U> view(const Plan &p) {
  const U *b = static_cast<const U *>(p.blob);
  return PlanView<U>{b, b + p.nseg + 1, b + 2 * p.nseg + 1};
}

}  // namespace idx
}  // namespace tlrt

#define TLRT_INDEX_BACKEND_API                                                                \
  /* y (keys.k, cols) = the rows of the (rows, cols) matrix x that keys name, zero rows for   \
     out-of-range keys (+0.0f). cols >= 1, keys.k >= 1, rows >= 1. */                         \
  void gather_rows(int dev, const float *x, uint64_t rows, uint64_t cols,                     \
                   const idx::Keys &keys, float *y);                                          \
  /* y (rows, cols) = x with, for every segment s of plan and column c,                       \
     y[tgt[s], c] = x[tgt[s], c] + (tree over the segment of vals[pos[e], c]); every row that \
     is no target is copied bit for bit. vals is (k, cols) with k > every pos value.           \
     rows, cols >= 1. y does not alias x or vals. */                                          \
  void scatter_add_rows(int dev, const float *x, const float *vals, uint64_t rows,            \
                        uint64_t cols, const idx::Plan &plan, float *y);

namespace tlrt {
namespace stub {
TLRT_INDEX_BACKEND_API
}
namespace cuda {
TLRT_INDEX_BACKEND_API
}
}  // namespace tlrt
