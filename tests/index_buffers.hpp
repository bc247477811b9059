// Helpers of the index-buffer tests (unit, grad and parity suites): an int32 / int64 buffer of
// given entries, the rule for what is not an index, the host list of the same entries and the
// fault counter.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "harness.hpp"

namespace th {

// An index buffer on dev holding v (int32 when i32: the caller keeps every value in range).
inline Buf index_buffer(tlrt_device dev, const std::vector<int64_t> &v, bool i32) {
  Buf b;
  if (v.empty()) {
    TH_OK(tlrt_buffer_zeros_of(dev, i32 ? TLRT_DTYPE_I32 : TLRT_DTYPE_I64, 0, b.out()));
  } else if (i32) {
    std::vector<int32_t> w(v.begin(), v.end());
    TH_OK(tlrt_buffer_from_i32(dev, w.data(), w.size(), b.out()));
  } else {
    TH_OK(tlrt_buffer_from_i64(dev, v.data(), v.size(), b.out()));
  }
  return b;
}

// abi/tlrt_index.h: negative, or >= 2^60.
inline bool not_an_index(int64_t v) { return v < 0 || (uint64_t)v >= (uint64_t{1} << 60); }

inline uint64_t count_bad(const std::vector<int64_t> &v) {
  return (uint64_t)std::count_if(v.begin(), v.end(), not_an_index);
}

// The host list of the same entries: an entry that is not an index becomes 2^60 - 1, out of
// range for every bound of these tests.
inline std::vector<uint64_t> host_list_of(const std::vector<int64_t> &v) {
  std::vector<uint64_t> h(v.size());
  for (size_t j = 0; j < v.size(); ++j)
    h[j] = not_an_index(v[j]) ? (uint64_t{1} << 60) - 1 : (uint64_t)v[j];
  return h;
}

// dev's fault counter; reset sets it back to 0 after reading.
inline uint64_t index_faults(tlrt_device dev, bool reset) {
  uint64_t c = UINT64_MAX;
  TH_OK(tlrt_index_faults(dev, reset, &c));
  return c;
}

}  // namespace th
