// The table of buffers that the multi-tensor kernels share (tlrt_clip_grad_norm's in
// cuda/kernels/clip.cuh, tlrt_adam_step_multi's in cuda/kernels/optim.cuh): the buffers are cut
// into fixed chunks, an entry per buffer records the index of its first chunk (chunk0, increasing
// along the table), and a block or warp given chunk c finds its buffer by a binary search. Plain
// subset (tests/emu/cuda_emu.hpp); no data moved beyond the table's ~8 log2(count) bytes a search.
#pragma once

#include <cstdint>

namespace tlrt {
namespace cuda {
namespace chunk_table {

// The last entry with chunk0 <= c (count >= 1, chunk0 increasing, tab[0].chunk0 == 0).
template <class Entry>
__device__ __forceinline__ uint64_t find(const Entry *tab, uint64_t count, uint64_t c) {
  uint64_t lo = 0, hi = count - 1;
  while (lo < hi) {
    const uint64_t mid = (lo + hi + 1) / 2;
    if (tab[mid].chunk0 <= c)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

}  // namespace chunk_table
}  // namespace cuda
}  // namespace tlrt
