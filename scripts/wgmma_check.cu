// Device check and throughput probe of cuda/common/wgmma_tf32.cuh (sm_90a): layouts of the K-major
// shared-memory operands and of register A against exact integer products, the split-TF32
// ("3xTF32") product's error against float64, and the raw product rate (TFLOP/s) of
// back-to-back m64nNk8 TF32 products with operands in shared memory and A in registers, against
// mma.sync m16n8k8. Build and run:
//   nvcc -std=c++17 -gencode arch=compute_90a,code=sm_90a -I. scripts/wgmma_check.cu
//     -o /tmp/wgmma && /tmp/wgmma (scripts/gpu-check.sh step `mma` on 9.0 devices)
// Exit 0 when every check passes.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "cuda/common/mma_tf32.cuh"
#include "cuda/common/wgmma_tf32.cuh"

namespace wg = tlrt::cuda::wgmma;
namespace mma = tlrt::cuda::mma;

#define CK(x)                                                                          \
  do {                                                                                 \
    cudaError_t e_ = (x);                                                              \
    if (e_ != cudaSuccess) {                                                           \
      std::printf("CUDA error %s at %s:%d\n", cudaGetErrorString(e_), __FILE__, __LINE__); \
      std::exit(2);                                                                    \
    }                                                                                  \
  } while (0)

// D (64 x N) = A (64 x K) Bt^T (Bt: N x K), both row-major in global memory, one warpgroup.
// REG: A from registers; SPLIT: 3 products on big / small parts. lbo / sbo as given.
template <int N, bool REG, bool SPLIT>
__global__ void tile_product(const float *A, const float *Bt, int K, float *D, uint32_t lbo,
                             uint32_t sbo) {
  extern __shared__ __align__(128) float sm[];
  float *sa = sm, *sa2 = sm + 64 * K, *sb = sm + 128 * K, *sb2 = sm + 128 * K + N * K;
  for (int i = threadIdx.x; i < 64 * K; i += 128) {
    const int r = i / K, k = i % K;
    const float v = A[i];
    const float big = __uint_as_float(mma::tf32(v));
    sa[wg::kmajor_off(r, k, 64)] = big;
    sa2[wg::kmajor_off(r, k, 64)] = __uint_as_float(mma::tf32(v - big));
  }
  for (int i = threadIdx.x; i < N * K; i += 128) {
    const int r = i / K, k = i % K;
    const float v = Bt[i];
    const float big = __uint_as_float(mma::tf32(v));
    sb[wg::kmajor_off(r, k, N)] = big;
    sb2[wg::kmajor_off(r, k, N)] = __uint_as_float(mma::tf32(v - big));
  }
  wg::fence_proxy_async();
  __syncthreads();
  float d[N / 2];
  for (int i = 0; i < N / 2; ++i) d[i] = 0.f;
  const int w = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  wg::fence();
  for (int j = 0; j < K / 8; ++j) {
    const uint64_t db = wg::desc(sb + j * N * 8, lbo, sbo), db2 = wg::desc(sb2 + j * N * 8, lbo, sbo);
    if (REG) {
      uint32_t a[4], a2[4];
      const int rr[4] = {16 * w + g, 16 * w + g + 8, 16 * w + g, 16 * w + g + 8};
      const int kk[4] = {8 * j + t, 8 * j + t, 8 * j + t + 4, 8 * j + t + 4};
      for (int q = 0; q < 4; ++q) {
        a[q] = __float_as_uint(sa[wg::kmajor_off(rr[q], kk[q], 64)]);
        a2[q] = __float_as_uint(sa2[wg::kmajor_off(rr[q], kk[q], 64)]);
      }
      wg::rs(d, a, db, 1);
      if (SPLIT) {
        wg::rs(d, a, db2, 1);
        wg::rs(d, a2, db, 1);
      }
    } else {
      const uint64_t da = wg::desc(sa + j * 64 * 8, lbo, sbo), da2 = wg::desc(sa2 + j * 64 * 8, lbo, sbo);
      wg::ss(d, da, db, 1);
      if (SPLIT) {
        wg::ss(d, da, db2, 1);
        wg::ss(d, da2, db, 1);
      }
    }
  }
  wg::commit();
  wg::wait<0>();
  wg::reg_fence(d);
  for (int i = 0; i < N / 8; ++i) {
    D[(16 * w + g) * N + 8 * i + 2 * t] = d[4 * i];
    D[(16 * w + g) * N + 8 * i + 2 * t + 1] = d[4 * i + 1];
    D[(16 * w + g + 8) * N + 8 * i + 2 * t] = d[4 * i + 2];
    D[(16 * w + g + 8) * N + 8 * i + 2 * t + 1] = d[4 * i + 3];
  }
}

// Worst |D - ref| / (bound * sum |a b| + tiny) (bound 0: exact comparison, worst |D - ref|).
template <int N, bool REG, bool SPLIT>
double check(std::mt19937 &gen, bool integers, uint32_t lbo, uint32_t sbo, double bound) {
  const int K = 32;
  std::vector<float> A(64 * K), Bt(N * K), D(64 * N);
  std::uniform_int_distribution<int> ui(-4, 4);
  std::uniform_real_distribution<float> uf(-2, 2);
  for (auto &v : A) v = integers ? (float)ui(gen) : uf(gen);
  for (auto &v : Bt) v = integers ? (float)ui(gen) : uf(gen);
  float *dA, *dB, *dD;
  CK(cudaMalloc(&dA, A.size() * 4));
  CK(cudaMalloc(&dB, Bt.size() * 4));
  CK(cudaMalloc(&dD, D.size() * 4));
  CK(cudaMemcpy(dA, A.data(), A.size() * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dB, Bt.data(), Bt.size() * 4, cudaMemcpyHostToDevice));
  CK(cudaMemset(dD, 0xff, D.size() * 4));  // NaN poison
  const int smem = (128 + 2 * N) * K * 4;
  CK(cudaFuncSetAttribute(tile_product<N, REG, SPLIT>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  tile_product<N, REG, SPLIT><<<1, 128, smem>>>(dA, dB, K, dD, lbo, sbo);
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  CK(cudaMemcpy(D.data(), dD, D.size() * 4, cudaMemcpyDeviceToHost));
  cudaFree(dA), cudaFree(dB), cudaFree(dD);
  double worst = 0;
  for (int m = 0; m < 64; ++m)
    for (int n = 0; n < N; ++n) {
      double s = 0, a = 0;
      for (int k = 0; k < K; ++k) {
        s += (double)A[m * K + k] * Bt[n * K + k];
        a += std::fabs((double)A[m * K + k] * Bt[n * K + k]);
      }
      const double e = std::fabs(D[m * N + n] - s);
      const double r = bound > 0 ? e / (bound * a + 1e-30) : e;
      worst = std::isnan(D[m * N + n]) ? 1e30 : std::fmax(worst, r);
    }
  return worst;
}

// Throughput: each warpgroup repeats ITER times 8 products (K = 64) of its 64 x 64 A and N x 64
// B in shared memory into two alternating accumulators (commit per 8, wait for the older group).
template <int N, bool REG>
__global__ void rate(int iters, float *sink) {
  extern __shared__ __align__(128) float sm[];
  const int wgi = threadIdx.x / 128;
  float *sa = sm + wgi * (64 + N) * 64, *sb = sa + 64 * 64;
  for (int i = threadIdx.x % 128; i < (64 + N) * 64; i += 128) sa[i] = (float)((i * 7) % 5 - 2);
  wg::fence_proxy_async();
  __syncthreads();
  float d0[N / 2], d1[N / 2];
  for (int i = 0; i < N / 2; ++i) d0[i] = d1[i] = 0.f;
  uint32_t a[4] = {0x3f800000u, 0x3f800000u, 0x3f800000u, 0x3f800000u};
  wg::fence();
  for (int it = 0; it < iters; it += 2) {
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      if (REG)
        wg::rs(d0, a, wg::desc(sb + j * N * 8, 128, 256), 1);
      else
        wg::ss(d0, wg::desc(sa + j * 64 * 8, 128, 256), wg::desc(sb + j * N * 8, 128, 256), 1);
    }
    wg::commit();
    wg::wait<1>();
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      if (REG)
        wg::rs(d1, a, wg::desc(sb + j * N * 8, 128, 256), 1);
      else
        wg::ss(d1, wg::desc(sa + j * 64 * 8, 128, 256), wg::desc(sb + j * N * 8, 128, 256), 1);
    }
    wg::commit();
    wg::wait<1>();
  }
  wg::wait<0>();
  wg::reg_fence(d0);
  wg::reg_fence(d1);
  float s = 0;
  for (int i = 0; i < N / 2; ++i) s += d0[i] + d1[i];
  if (s == 12345.f) sink[threadIdx.x] = s;
}

// mma.sync m16n8k8 rate: each warp 8 independent accumulators, ITER x 8 x 8 products.
__global__ void rate_sync(int iters, float *sink) {
  uint32_t a[4] = {0x3f800000u, 0x3f800000u, 0x3f800000u, 0x3f800000u}, b[2] = {0x3f800000u, 0x3f800000u};
  float d[8][4] = {};
  for (int it = 0; it < iters; ++it)
#pragma unroll
    for (int r = 0; r < 8; ++r)
#pragma unroll
      for (int q = 0; q < 8; ++q) mma::m16n8k8(d[q], a, b);
  float s = 0;
  for (int q = 0; q < 8; ++q) s += d[q][0] + d[q][1] + d[q][2] + d[q][3];
  if (s == 12345.f) sink[threadIdx.x] = s;
}

template <class F>
double time_ms(F launch) {
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  launch();
  CK(cudaDeviceSynchronize());
  CK(cudaEventRecord(e0));
  for (int i = 0; i < 5; ++i) launch();
  CK(cudaEventRecord(e1));
  CK(cudaEventSynchronize(e1));
  CK(cudaGetLastError());
  float ms = 0;
  CK(cudaEventElapsedTime(&ms, e0, e1));
  return ms / 5;
}

template <int N, bool REG>
void run_rate(int sms, int wgs, float *sink) {
  const int iters = 2000, smem = wgs * (64 + N) * 64 * 4;
  CK(cudaFuncSetAttribute(rate<N, REG>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  const double ms = time_ms([&] { rate<N, REG><<<sms, 128 * wgs, smem>>>(iters, sink); });
  const double flop = 2.0 * sms * wgs * iters * 8.0 * 64 * N * 8;
  std::printf("rate wgmma %s m64n%dk8, %d warpgroup(s) per block, %d blocks: %.3f ms, %.1f TFLOP/s\n",
              REG ? "rs" : "ss", N, wgs, sms, ms, flop / ms / 1e9);
}

int main() {
  std::mt19937 gen(2026);
  int fails = 0;
  auto report = [&](const char *what, double w, double lim) {
    const bool ok = w <= lim;
    fails += !ok;
    std::printf("%-48s worst %.3g (limit %.3g): %s\n", what, w, lim, ok ? "ok" : "FAIL");
  };
  // Layout, exact on small integers. The swapped LBO / SBO row tells which reading is right.
  report("ss n64 exact, lbo 128 sbo 256", check<64, false, false>(gen, true, 128, 256, 0), 0);
  std::printf("(info) ss n64 exact, lbo 256 sbo 128: worst %.3g\n", check<64, false, false>(gen, true, 256, 128, 0));
  report("ss n32 exact", check<32, false, false>(gen, true, 128, 256, 0), 0);
  report("ss n128 exact", check<128, false, false>(gen, true, 128, 256, 0), 0);
  report("ss n256 exact", check<256, false, false>(gen, true, 128, 256, 0), 0);
  report("rs n64 exact", check<64, true, false>(gen, true, 128, 256, 0), 0);
  report("rs n128 exact", check<128, true, false>(gen, true, 128, 256, 0), 0);
  // Split products on random floats: within 2^-20 of sum |a b|; one product within 2^-10.
  report("ss n64 split, random", check<64, false, true>(gen, false, 128, 256, 0x1p-20), 1);
  report("rs n64 split, random", check<64, true, true>(gen, false, 128, 256, 0x1p-20), 1);
  report("ss n64 tf32, random", check<64, false, false>(gen, false, 128, 256, 0x1p-10), 1);
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  float *sink;
  CK(cudaMalloc(&sink, 4096));
  run_rate<64, false>(sms, 1, sink);
  run_rate<64, false>(sms, 2, sink);
  run_rate<128, false>(sms, 1, sink);
  run_rate<128, false>(sms, 2, sink);
  run_rate<64, true>(sms, 2, sink);
  run_rate<128, true>(sms, 2, sink);
  {
    const int iters = 2000;
    const double ms = time_ms([&] { rate_sync<<<sms * 2, 256>>>(iters, sink); });
    const double flop = 2.0 * sms * 2 * 8 * iters * 64.0 * 16 * 8 * 8;
    std::printf("rate mma.sync m16n8k8, 8 warps x 2 blocks per SM: %.3f ms, %.1f TFLOP/s\n", ms, flop / ms / 1e9);
  }
  std::printf("%s\n", fails ? "WGMMA CHECK FAILED" : "wgmma check passed");
  return fails ? 1 : 0;
}
