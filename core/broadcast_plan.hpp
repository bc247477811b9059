// Shape validation of broadcasting, shared by the forward (tlrt_broadcast_to, core/api_layout.cpp)
// and its adjoint (tlrt_reduce_from_broadcast, core/api_reduce.cpp), so that both accept exactly
// the same (in_dims, out_dims, axis_map) triples with the same status codes and messages. The
// convention (abi/tlrt_reduce.h): axis_map[j] = 0 marks output axis j as inserted, axis_map[j] =
// k + 1 says that output axis j reads input axis k; a mapped input axis has size 1 or the size of
// its output axis, an unmapped one has size 1, no input axis is mapped twice, ranks are <= 8.
// Also the exact-product helpers the two entry-point files use for their other checks.
// Header-only (inline), namespace tlrt.
#pragma once

#include <cstdint>
#include <string>

#include "abi/tlrt_buffer.h"
#include "core/buffer.hpp"
#include "core/error.hpp"
#include "core/shape_check.hpp"

namespace tlrt {

// The largest rank of a broadcast (either side).
constexpr uint32_t kBroadcastMaxRank = 8;

// Exact product of d[0..n): false when it does not fit in 64 bits (a zero anywhere gives 0).
inline bool exact_product(const uint64_t *d, uint32_t n, uint64_t *p) {
  for (uint32_t i = 0; i < n; ++i)
    if (d[i] == 0) {
      *p = 0;
      return true;
    }
  uint64_t r = 1;
  *p = 0;
  for (uint32_t i = 0; i < n; ++i)
    if (__builtin_mul_overflow(r, d[i], &r)) return false;
  *p = r;
  return true;
}

// n outputs (fits: n is exact; otherwise the count exceeds 64 bits) must be allocatable.
inline void check_output_count(uint64_t n, bool fits, const char *arg) {
  if (!fits)
    fail(TLRT_ERR_OVERFLOW,
         "the output would have more than 2^64 elements (from argument %s), more than "
         "TLRT_MAX_ELEMENTS (2^60)", arg);
  if (n > TLRT_MAX_ELEMENTS)
    fail(TLRT_ERR_OVERFLOW,
         "the output would have %llu elements (from argument %s), more than TLRT_MAX_ELEMENTS "
         "(2^60)", (unsigned long long)n, arg);
}

// Which side of the broadcast the data buffer is: the forward's input x (it must have
// prod(in_dims) elements and the result has prod(out_dims)), or the adjoint's gradient dout (it
// must have prod(out_dims) elements and the result has prod(in_dims)).
enum class BroadcastSide { Forward, Adjoint };

struct BroadcastShape {
  uint64_t nin;                     // prod(in_dims)
  uint64_t nout;                    // prod(out_dims)
  int mapped[kBroadcastMaxRank];    // the output axis reading input axis k, or -1
};

// Validates a broadcast; data is the buffer named data_name ("x" or "dout"). Checks, in order:
// ranks <= 8 (TLRT_ERR_INVALID_ARGUMENT naming in_rank / out_rank); NULL arrays of nonzero length
// (TLRT_ERR_NULL_ARGUMENT); the data's element count against the product of its side's dims
// (TLRT_ERR_SHAPE naming data_name and in_dims / out_dims; a product beyond 64 bits never
// matches); every axis_map entry <= in_rank (TLRT_ERR_INDEX); no input axis mapped twice
// (TLRT_ERR_INVALID_ARGUMENT); mapped input axes of size 1 or their output axis's size and
// unmapped input axes of size 1 (TLRT_ERR_SHAPE naming in_dims); the result's element count
// <= TLRT_MAX_ELEMENTS (TLRT_ERR_OVERFLOW naming the result's dims).
inline BroadcastShape validate_broadcast(BroadcastSide side, const Buffer &data,
                                         const char *data_name, const uint64_t *in_dims,
                                         uint32_t in_rank, const uint64_t *out_dims,
                                         uint32_t out_rank, const uint32_t *axis_map) {
  using ull = unsigned long long;
  if (in_rank > kBroadcastMaxRank)
    fail(TLRT_ERR_INVALID_ARGUMENT, "argument in_rank = %u exceeds the maximum rank 8", in_rank);
  if (out_rank > kBroadcastMaxRank)
    fail(TLRT_ERR_INVALID_ARGUMENT, "argument out_rank = %u exceeds the maximum rank 8", out_rank);
  if (in_rank != 0 && in_dims == nullptr)
    fail(TLRT_ERR_NULL_ARGUMENT, "argument in_dims is NULL (in_rank = %u)", in_rank);
  if (out_rank != 0 && out_dims == nullptr)
    fail(TLRT_ERR_NULL_ARGUMENT, "argument out_dims is NULL (out_rank = %u)", out_rank);
  if (out_rank != 0 && axis_map == nullptr)
    fail(TLRT_ERR_NULL_ARGUMENT, "argument axis_map is NULL (out_rank = %u)", out_rank);
  const bool forward = side == BroadcastSide::Forward;
  BroadcastShape v;
  {
    // The data's side: in_dims for the forward, out_dims for the adjoint.
    const uint64_t *dims = forward ? in_dims : out_dims;
    const uint32_t rank = forward ? in_rank : out_rank;
    uint64_t n = 0;
    const bool fits = exact_product(dims, rank, &n);
    if (!fits || n != data.size)
      fail(TLRT_ERR_SHAPE, "argument %s has %llu elements, but the product of argument %s is %s",
           data_name, (ull)data.size, forward ? "in_dims" : "out_dims", count_str(n, fits).c_str());
    (forward ? v.nin : v.nout) = n;
  }
  // Checked in the header's order over the whole map: indices, then duplicates, then sizes.
  for (uint32_t j = 0; j < out_rank; ++j)
    if (axis_map[j] > in_rank)
      fail(TLRT_ERR_INDEX,
           "argument axis_map[%u] = %u names input axis %u, but argument in_rank is %u", j,
           axis_map[j], axis_map[j] - 1, in_rank);
  for (int &m : v.mapped) m = -1;
  for (uint32_t j = 0; j < out_rank; ++j) {
    const uint32_t a = axis_map[j];
    if (a == 0) continue;
    const uint32_t k = a - 1;
    if (v.mapped[k] >= 0)
      fail(TLRT_ERR_INVALID_ARGUMENT,
           "argument axis_map maps input axis %u twice (axis_map[%d] and axis_map[%u] are both %u)",
           k, v.mapped[k], j, a);
    v.mapped[k] = (int)j;
  }
  for (uint32_t j = 0; j < out_rank; ++j) {
    const uint32_t a = axis_map[j];
    if (a == 0) continue;
    const uint32_t k = a - 1;
    if (in_dims[k] != 1 && in_dims[k] != out_dims[j])
      fail(TLRT_ERR_SHAPE,
           "argument in_dims[%u] = %llu must be 1 or equal argument out_dims[%u] = %llu "
           "(axis_map[%u] = %u)",
           k, (ull)in_dims[k], j, (ull)out_dims[j], j, a);
  }
  for (uint32_t k = 0; k < in_rank; ++k)
    if (v.mapped[k] < 0 && in_dims[k] != 1)
      fail(TLRT_ERR_SHAPE,
           "argument in_dims[%u] = %llu: input axis %u is not mapped by argument axis_map, so its "
           "size must be 1",
           k, (ull)in_dims[k], k);
  {
    // The result's side.
    uint64_t n = 0;
    const bool fits =
        forward ? exact_product(out_dims, out_rank, &n) : exact_product(in_dims, in_rank, &n);
    check_output_count(n, fits, forward ? "out_dims" : "in_dims");
    (forward ? v.nout : v.nin) = n;
  }
  return v;
}

}  // namespace tlrt
