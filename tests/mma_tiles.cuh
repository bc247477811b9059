// The tile products that tests/unit/test_mma_emu.cpp (on the CPU emulator) and
// scripts/mma_check.cu (on the GPU) both run: one warp computes D = A B (16 x 8 x 8) from
// fragments read straight out of row-major A and B, then E = D B2 with D's C fragment as the A
// operand (mma::c_as_a / mma::kc_perm). Include after cuda/common/mma_tf32.cuh.
#pragma once

namespace mma_tiles {

namespace mma = tlrt::cuda::mma;

// A C fragment's four values into a row-major 16 x 8 tile.
__device__ inline void store_c(const float (&c)[4], float *X, unsigned g, unsigned t) {
  X[g * 8 + 2 * t] = c[0];
  X[g * 8 + 2 * t + 1] = c[1];
  X[(g + 8) * 8 + 2 * t] = c[2];
  X[(g + 8) * 8 + 2 * t + 1] = c[3];
}

template <bool SPLIT>
__global__ void tiles(const float *A, const float *B, const float *B2, float *D, float *E) {
  const unsigned lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  float af[4] = {A[g * 8 + t], A[(g + 8) * 8 + t], A[g * 8 + t + 4], A[(g + 8) * 8 + t + 4]};
  float bf[2] = {B[t * 8 + g], B[(t + 4) * 8 + g]};
  mma::SplitA a;
  mma::SplitB b;
  mma::split(af, a);
  mma::split(bf, b);
  float d[4] = {0, 0, 0, 0};
  mma::product<SPLIT>(d, a, b);
  store_c(d, D, g, t);
  float ca[4], b2[2] = {B2[mma::kc_perm(t, 0) * 8 + g], B2[mma::kc_perm(t, 1) * 8 + g]};
  mma::c_as_a(d, ca);
  mma::split(ca, a);
  mma::split(b2, b);
  float e[4] = {0, 0, 0, 0};
  mma::product<SPLIT>(e, a, b);
  store_c(e, E, g, t);
}

}  // namespace mma_tiles
