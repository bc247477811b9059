// Device code of the long-row softmax kernels (cuda/softmax.cu explains the strategy and its
// costs): one 256-thread block per row, every pass of the row in one kernel (row::dev::block_row_*
// of core/numerics/row_ops.hpp). Kept apart so that the CPU emulator test
// (tests/unit/test_softmax_emu.cpp) runs this very source against the CPU backend bit for bit.
// The operations and their order are those of abi/tlrt_softmax.h's DEFINITIONS: the maximum
// (order-free), e = exp(x - m) summed by THE TREE (chunk values by the block's halving, then the
// tree's next level over the chunk values), then the outputs.
#pragma once

#include <cstdint>

#include "core/numerics/reduce_tree.hpp"
#include "core/numerics/row_ops.hpp"
#include "core/numerics/shared_math.hpp"

namespace tlrt {
namespace cuda {
namespace softmax_kernels {

using row::Kind;
using row::dev::block_row_map;
using row::dev::block_row_max;
using row::dev::block_row_sum;
using row::dev::kThreads;

// Rows longer than this take the one-kernel-per-row path only up to kBlockRowMaxChunks chunks.
constexpr uint64_t kBlockRowMaxCols = row::dev::kBlockRowMaxChunks * red::kChunk;

template <Kind KIND>
__global__ void __launch_bounds__(kThreads)
    block_row_fwd(const float *__restrict x, const float *__restrict mask, uint64_t rows,
                  uint64_t cols, float *__restrict y) {
  TLRT_BLOCK_ROW_SHARED(sm);
  for (uint64_t rw = blockIdx.x; rw < rows; rw += gridDim.x) {
    const float *xr = x + rw * cols;
    const float *mr = KIND == Kind::Masked ? mask + rw * cols : nullptr;
    float *yr = y + rw * cols;
    const float m = block_row_max(
        [&](uint64_t e) {
          if constexpr (KIND == Kind::Masked) return row::masked_score(xr[e], mr[e]);
          return xr[e];
        },
        cols, sm);
    float s[1];
    block_row_sum<1>(
        [&](uint64_t e, float (&v)[1]) {
          if constexpr (KIND == Kind::Masked)
            v[0] = row::masked_exp(xr[e], mr[e], m);
          else
            v[0] = row::shifted_exp(xr[e], m);
        },
        cols, sm, s);
    const float ls = KIND == Kind::LogSoftmax ? math::log_f(s[0]) : 0.0f;
    const bool none = KIND == Kind::Masked && m == row::neg_inf();
    constexpr unsigned NL = KIND == Kind::Masked ? 2 : 1;
    block_row_map<NL>(
        [&](uint64_t e, float (&v)[NL]) {
          v[0] = xr[e];
          if constexpr (KIND == Kind::Masked) v[NL - 1] = mr[e];
        },
        [&](uint64_t e, const float (&v)[NL]) {
          float out;
          if constexpr (KIND == Kind::LogSoftmax)
            out = row::log_softmax_out(v[0], m, ls);
          else if constexpr (KIND == Kind::Masked)
            out = none ? 0.0f
                       : row::masked_out(row::masked_exp(v[0], v[NL - 1], m), v[NL - 1], s[0]);
          else
            out = row::softmax_out(row::shifted_exp(v[0], m), s[0]);
          yr[e] = out;
        },
        cols);
  }
}

// softmax: dot = S(g * y), dx = y * (g - dot); log-softmax: sg = S(g), dx = g - exp(y) * sg.
template <bool LOG>
__global__ void __launch_bounds__(kThreads)
    block_row_bwd(const float *__restrict y, const float *__restrict g, uint64_t rows,
                  uint64_t cols, float *__restrict dx) {
  TLRT_BLOCK_ROW_SHARED(sm);
  for (uint64_t rw = blockIdx.x; rw < rows; rw += gridDim.x) {
    const float *yr = y + rw * cols, *gr = g + rw * cols;
    float *dr = dx + rw * cols;
    float s[1];
    block_row_sum<1>(
        [&](uint64_t e, float (&v)[1]) {
          if constexpr (LOG)
            v[0] = gr[e];
          else
            v[0] = row::softmax_bwd_term(yr[e], gr[e]);
        },
        cols, sm, s);
    block_row_map<2>(
        [&](uint64_t e, float (&v)[2]) {
          v[0] = yr[e];
          v[1] = gr[e];
        },
        [&](uint64_t e, const float (&v)[2]) {
          dr[e] = LOG ? row::log_softmax_bwd_out(v[0], v[1], s[0])
                      : row::softmax_bwd_out(v[0], v[1], s[0]);
        },
        cols);
  }
}

// Launch plans. A launcher: launch(name, kernel, grid, args...) starts kernel with kThreads
// threads per block; launch.sms() is the device's multiprocessor count.
template <Kind KIND, class Launch>
void block_row_fwd_plan(const Launch &launch, const float *x, const float *mask, uint64_t rows,
                        uint64_t cols, float *y) {
  const uint64_t bytes = (KIND == Kind::Masked ? 8 : 4) * cols;
  launch("softmax block_row_fwd", block_row_fwd<KIND>,
         row::dev::block_row_grid(rows, bytes, launch.sms()), x, mask, rows, cols, y);
}

template <bool LOG, class Launch>
void block_row_bwd_plan(const Launch &launch, const float *y, const float *g, uint64_t rows,
                        uint64_t cols, float *dx) {
  launch("softmax block_row_bwd", block_row_bwd<LOG>,
         row::dev::block_row_grid(rows, 8 * cols, launch.sms()), y, g, rows, cols, dx);
}

}  // namespace softmax_kernels
}  // namespace cuda
}  // namespace tlrt
