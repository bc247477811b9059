// References of the unit and parity tests for argmax / top-k over rows (abi/tlrt_reduce.h) and
// tlrt_clip_grad_norm (abi/tlrt_optim.h), written from the headers' words.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <vector>

#include "harness.hpp"

namespace th {

// a comes before b (value order of the header: NaN largest, -0 == +0, then lower index).
inline bool sel_before(float a, uint64_t ia, float b, uint64_t ib) {
  const bool na = std::isnan(a), nb = std::isnan(b);
  if (na || nb) {
    if (na && nb) return ia < ib;
    return na;
  }
  if (a > b) return true;
  if (a < b) return false;
  return ia < ib;  // equal, -0 == +0 included
}

// The full sorted order of each row (a stable sort of the column indices): its first k entries.
inline std::vector<int64_t> ref_topk_idx(const std::vector<float> &x, uint64_t rows,
                                         uint64_t cols, uint64_t k) {
  std::vector<int64_t> out;
  std::vector<uint64_t> ord(cols);
  for (uint64_t r = 0; r < rows; ++r) {
    const float *p = x.data() + r * cols;
    std::iota(ord.begin(), ord.end(), uint64_t{0});
    std::sort(ord.begin(), ord.end(),
              [&](uint64_t a, uint64_t b) { return sel_before(p[a], a, p[b], b); });
    for (uint64_t j = 0; j < k; ++j) out.push_back((int64_t)ord[j]);
  }
  return out;
}

inline std::vector<int64_t> index_values(const tlrt_buffer *b) {
  uint64_t n = 0;
  tlrt_dtype t = TLRT_DTYPE_F32;
  std::vector<int64_t> v;
  if (tlrt_buffer_size(b, &n) != TLRT_OK || tlrt_buffer_dtype(b, &t) != TLRT_OK) return v;
  v.resize(n);
  if (n == 0) return v;
  if (t == TLRT_DTYPE_I64) {
    TH_OK(tlrt_buffer_to_i64(b, v.data(), n));
  } else {
    std::vector<int32_t> w(n);
    TH_OK(tlrt_buffer_to_i32(b, w.data(), n));
    for (uint64_t i = 0; i < n; ++i) v[i] = w[i];
  }
  return v;
}

// clip: S in long double (the reference), the norm and coefficient as the header states them.
inline long double ref_sumsq(const std::vector<std::vector<float>> &g) {
  long double s = 0;
  for (const auto &v : g)
    for (float x : v) s += (long double)x * (long double)x;
  return s;
}

}  // namespace th
