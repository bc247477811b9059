// Backend interface: indexing: gather and scatter-add through index lists. Defined by
// stub/index.cpp and cuda/index.cu.
//
// Core (core/api_index.cpp) has validated every argument and handled every empty case, and hands
// the backends an idx::List: the caller's host list of uint64_t (every entry < 2^60, checked by
// core) or an index buffer of int32 / int64 on the device of the data, read in place. An entry
// names a row (< bound), is out of range (a gather reads a zero row, a scatter skips it), or, in
// an index buffer only, is not an index (negative, or >= 2^60 for int64): out of range as well,
// and counted in the device's fault counter (index_faults). decode() below is the one rule.
// Scatter-adds group the in-range entries by target stably (a sort by target; positions increase
// within a target), as segments: segment s adds the vals rows pos[seg[s]], ..., pos[seg[s+1] - 1]
// to row tgt[s]. The CPU builds that plan on the host (stub/index.cpp), CUDA on the device (a
// CUB radix sort, cuda/index.cu); both then evaluate the same sums: out[t, c] = x[t, c] + S,
// S = the tree of core/numerics/reduce_tree.hpp over the segment's values of column c, in segment
// order, so they agree bit for bit (abi/tlrt_index.h states the contract).
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

// The element type of an index list.
enum class Type : uint8_t {
  U64,  // the caller's host list; every entry < 2^60 (checked by core): never a fault
  I32,  // an index buffer of int32_t on the device of the data
  I64,  // an index buffer of int64_t on the device of the data
};

// k >= 1 entries at p (host memory for U64, the data's device memory otherwise), read during the
// call only.
struct List {
  const void *p;
  Type type;
  uint64_t k;
};

// The row an entry names: v itself when it is < bound, else bound (out of range, bound <= 2^60).
// *fault is set when v is not an index (a negative value, or >= 2^60).
template <class T>
TLRT_HD uint64_t decode(T v, uint64_t bound, bool *fault) {
  bool bad = false;
  if constexpr (T(-1) < T(0)) bad = v < T(0);
  if constexpr (sizeof(T) == 8) bad = bad || (uint64_t)v >= (uint64_t{1} << 60);
  *fault = bad;
  return !bad && (uint64_t)v < bound ? (uint64_t)v : bound;
}

}  // namespace idx
}  // namespace tlrt

#define TLRT_INDEX_BACKEND_API                                                                \
  /* y (list.k, cols) = the rows of the (rows, cols) matrix x that the list names, zero rows  \
     (+0.0f) for entries out of range or not an index (counted). rows, cols, list.k >= 1. */  \
  void gather_rows(int dev, const float *x, uint64_t rows, uint64_t cols,                     \
                   const idx::List &list, float *y);                                          \
  /* y (rows, cols) = x (NULL: zeros) with, for every target t named by the list and column   \
     c, y[t, c] = x[t, c] + (the tree over the entries j naming t, in increasing j, of        \
     vals[j, c]); every other row copied bit for bit (+0.0f rows for NULL x). vals is         \
     (list.k, cols). Entries not an index are counted. rows, cols, list.k >= 1; y aliases     \
     neither x nor vals. */                                                                   \
  void scatter_add_rows(int dev, const float *x, const float *vals, uint64_t rows,            \
                        uint64_t cols, const idx::List &list, float *y);                      \
  /* flat[i] = i * classes + labels[i] for the list.k labels in [0, classes), else            \
     list.k * classes (out of range of the (list.k, classes) matrix), and such a label is     \
     counted as a fault (cross-entropy's labels: a wrong label must not pass unnoticed).      \
     list.type is I32 or I64; flat is an int64 buffer of list.k elements on dev. */           \
  void flat_labels(int dev, const idx::List &labels, uint64_t classes, int64_t *flat);        \
  /* Adds the list's entries that are not an index to the fault count (for calls whose     \
     output is empty: nothing else reads the list). list.k >= 1. */                         \
  void count_faults(int dev, const idx::List &list);                                        \
  /* The device's fault count (waiting for its queued work first), set to 0 if reset. */      \
  uint64_t index_faults(int dev, bool reset);

namespace tlrt {
namespace stub {
TLRT_INDEX_BACKEND_API
// Adds n to the CPU device's fault count (kernels of other families that read labels: the
// cross-entropy of abi/tlrt_softmax.h).
void add_index_faults(uint64_t n);
}
namespace cuda {
TLRT_INDEX_BACKEND_API
// The device address of dev's fault counter (an unsigned long long that kernels of other
// families add their faults to with atomicAdd; dev current).
unsigned long long *index_fault_counter(int dev);
}
}  // namespace tlrt
