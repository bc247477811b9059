// The Hopper attention backward (cuda/sm90a/attention.cu, built for sm_90a: TLRT_HAVE_WGMMA), for
// compute capability 9.0 only. Scratch: 14 bh n' d' floats of operand images (n' = n rounded up to
// 64, d' = 64 or 128) and for mask_fill = -inf n'^2 / 16 exclusion words per distinct mask.
#pragma once

#include <cstdint>

#include "core/backend/attention.hpp"

namespace tlrt {
namespace cuda {
namespace attn_wgmma {

// Where the rows of each operand lie (attn::packed_rows for the packed problem; dq, dk, dv are
// written without summing: one key / value head per query head).
struct Rows {
  attn::RowMap q, dout, k, v, dq, dk, dv;
};

bool bwd_applies(const attn::Problem &p);            // 32 < d <= 128; any n, mask, causal, fill
uint64_t bwd_planes_floats(const attn::Problem &p);  // the scratch above, in floats

void bwd(int dev, const attn::Problem &p, const Rows &rows, const float *q, const float *k,
         const float *v, const float *dout, const float *lse,
         const float *D /* rowsum(dout out) per problem row, for dq, dk */,
         float *planes /* bwd_planes_floats(p) */, float *dq, float *dk,
         float *dv);  // on dev's library stream; dq, dk, dv nullptr: not wanted

}  // namespace attn_wgmma
}  // namespace cuda
}  // namespace tlrt
