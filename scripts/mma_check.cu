// Device check of cuda/common/mma_tf32.cuh's fragment layouts and split products on a real GPU (the
// emulator of tests/emu/cuda_emu.hpp assumes the layouts the header documents; this runs the
// same products on the tensor cores): D = A B and E = D B2 (D's C fragment reused as the A
// operand) for random 16 x 8 x 8 tiles, against float64, bounds 2^-20 (split) and 2^-10 (TF32)
// of sum |a b|. Build and run: nvcc -std=c++17 -arch=sm_90 -I. scripts/mma_check.cu -o /tmp/mma
// && /tmp/mma (scripts/gpu-check.sh step `mma`). Exit 0 when every element is within its bound.
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "cuda/common/mma_tf32.cuh"
#include "tests/mma_tiles.cuh"

static double worst_ratio(const std::vector<float> &got, const std::vector<float> &X,
                          const std::vector<float> &Y, double bound) {
  double w = 0;
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < 8; ++c) {
      double s = 0, m = 0;
      for (int k = 0; k < 8; ++k) {
        s += (double)X[r * 8 + k] * Y[k * 8 + c];
        m += std::fabs((double)X[r * 8 + k] * Y[k * 8 + c]);
      }
      w = std::fmax(w, std::fabs(got[r * 8 + c] - s) / (bound * m + 1e-37));
    }
  return w;
}

template <bool SPLIT>
static double run(std::mt19937 &gen) {
  std::uniform_real_distribution<float> u(-2, 2);
  std::vector<float> A(128), B(64), B2(64), D(128), E(128);
  for (auto &v : A) v = u(gen);
  for (auto &v : B) v = u(gen);
  for (auto &v : B2) v = u(gen);
  float *dA, *dB, *dB2, *dD, *dE;
  cudaMalloc(&dA, 512);
  cudaMalloc(&dB, 256);
  cudaMalloc(&dB2, 256);
  cudaMalloc(&dD, 512);
  cudaMalloc(&dE, 512);
  cudaMemcpy(dA, A.data(), 512, cudaMemcpyHostToDevice);
  cudaMemcpy(dB, B.data(), 256, cudaMemcpyHostToDevice);
  cudaMemcpy(dB2, B2.data(), 256, cudaMemcpyHostToDevice);
  mma_tiles::tiles<SPLIT><<<1, 32>>>(dA, dB, dB2, dD, dE);
  cudaMemcpy(D.data(), dD, 512, cudaMemcpyDeviceToHost);
  cudaMemcpy(E.data(), dE, 512, cudaMemcpyDeviceToHost);
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) {
    std::printf("CUDA error: %s\n", cudaGetErrorString(err));
    return 1e30;
  }
  cudaFree(dA), cudaFree(dB), cudaFree(dB2), cudaFree(dD), cudaFree(dE);
  const double bound = SPLIT ? 0x1p-20 : 0x1p-10;
  return std::fmax(worst_ratio(D, A, B, bound), worst_ratio(E, D, B2, bound));
}

int main() {
  std::mt19937 gen(2026);
  double ws = 0, wt = 0;
  for (int i = 0; i < 50; ++i) {
    ws = std::fmax(ws, run<true>(gen));
    wt = std::fmax(wt, run<false>(gen));
  }
  const bool ok = ws <= 1 && wt <= 1 && wt > 1.0 / 64;
  std::printf("mma_check: worst error / bound: split %.3g, tf32 %.3g: %s\n", ws, wt,
              ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}
