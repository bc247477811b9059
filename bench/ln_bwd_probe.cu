// Probe (not built by meson): times the fused layer-norm backward kernels alone (no reduce_axis
// tail) on the GPU: the register kernel fused_group_bwd, the ring kernel with 2 stages (the
// default) and 3; checks that the register kernel and the
// default ring kernel agree bit for bit (dx and the partials), and times P = 4.
// Run from the repository root:
//   nvcc -std=c++17 -fmad=false -O3 -gencode arch=compute_90,code=sm_90 -I. \
//       bench/ln_bwd_probe.cu -o /tmp/ln_bwd_probe && /tmp/ln_bwd_probe
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include "cuda/layer_norm_kernels.cuh"

namespace lk = tlrt::cuda::ln_kernels;
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("CUDA %s at %d: %s\n", #x, __LINE__, cudaGetErrorString(e)); exit(1);} } while (0)

struct L {
  uint64_t max_grid() const { return 0x7FFFFFFFull; }
  unsigned sms() const {
    int n = 0;
    CK(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, 0));
    return (unsigned)n;
  }
  size_t max_smem() const {
    int most = 0;
    CK(cudaDeviceGetAttribute(&most, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0));
    return (size_t)most;
  }
  // The opt-in maximum less the kernel's static shared memory (the whole maximum is invalid).
  template <class K>
  void allow(K kernel) const {
    cudaFuncAttributes fa{};
    CK(cudaFuncGetAttributes(&fa, kernel));
    CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)max_smem() - (int)fa.sharedSizeBytes));
    CK(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, (int)cudaSharedmemCarveoutMaxShared));
  }
  template <class K, class... A>
  void operator()(const char *, K kernel, unsigned grid, A... args) const {
    kernel<<<grid, 256>>>(args...);
    CK(cudaGetLastError());
  }
  template <class K, class... A>
  void grid2(const char *, K kernel, dim3 grid, A... args) const {
    kernel<<<grid, 256>>>(args...);
    CK(cudaGetLastError());
  }
  template <class K, class... A>  // an ordinary launch (no programmatic dependency here)
  void grid2_dependent(const char *name, K kernel, dim3 grid, A... args) const {
    grid2(name, kernel, grid, args...);
  }
  template <class K, class... A>
  void dyn(const char *, K kernel, unsigned grid, size_t smem, A... args) const {
    allow(kernel);
    kernel<<<grid, 256, smem>>>(args...);
    CK(cudaGetLastError());
  }
};

template <class F>
float timeit(F f, int iters = 20) {
  cudaEvent_t a, b;
  cudaEventCreate(&a); cudaEventCreate(&b);
  for (int i = 0; i < 3; ++i) f();
  cudaEventRecord(a);
  for (int i = 0; i < iters; ++i) f();
  cudaEventRecord(b);
  CK(cudaEventSynchronize(b));
  float ms; cudaEventElapsedTime(&ms, a, b);
  return ms / iters;
}

template <unsigned NT, unsigned R, unsigned P>
void pipe_variant(const lk::BwdArgs &a, float *pg, float *pb, double bytes, double cbw) {
  const uint64_t nblk = tlrt::red::chunks_of(a.rows) * lk::fused_lane_sets(a.cols);
  L l;
  const unsigned grid = (unsigned)nblk;
  float ms = timeit([&] { l.dyn("", lk::fused_pipe_bwd<NT, R, P>, grid, lk::pipe_smem_bytes<NT, R, P>(), a.dy, a.x, a.mean, a.inv_std, a.gamma, a.rows, a.cols, a.n, nblk, a.dx, pg, pb); });
  printf("  pipe<%u, %u> P=%u block per item  %.4f ms  %.3f of copy BW  (grid %u)\n", NT, R, P, ms, bytes / ms / 1e6 / cbw, grid);
}

int main() {
  cudaDeviceProp prop; CK(cudaGetDeviceProperties(&prop, 0));
  printf("%s, %d SMs\n", prop.name, prop.multiProcessorCount);
  const size_t big = (size_t)1 << 26;
  float *cs, *cd;
  CK(cudaMalloc(&cs, big * 4)); CK(cudaMalloc(&cd, big * 4));
  CK(cudaMemset(cs, 0, big * 4));
  float cms = timeit([&] { CK(cudaMemcpyAsync(cd, cs, big * 4, cudaMemcpyDeviceToDevice)); });
  const double cbw = 2.0 * big * 4 / cms / 1e6;  // GB/s
  printf("copy: %.4f ms, %.0f GB/s\n", cms, cbw);
  cudaFree(cs); cudaFree(cd);
  const uint64_t shapes[][2] = {{65536, 1024}, {16384, 4096}, {32768, 2048}, {131072, 512}, {262144, 256}, {1048576, 64}, {65536 + 300, 1000}, {5000, 37}};
  for (auto &sh : shapes) {
    const uint64_t rows = sh[0], cols = sh[1], n = rows * cols;
    std::vector<float> h(n), hm(rows), hs(rows), hg(cols);
    srand(1);
    for (auto &v : h) v = (rand() / (float)RAND_MAX) * 2 - 1;
    for (auto &v : hm) v = (rand() / (float)RAND_MAX) * 0.1f;
    for (auto &v : hs) v = 1 + (rand() / (float)RAND_MAX);
    for (auto &v : hg) v = (rand() / (float)RAND_MAX) * 2 - 1;
    float *dy, *x, *m, *s, *g, *dx, *dx2, *pg, *pb, *pg2, *pb2;
    const uint64_t np = tlrt::red::chunks_of(rows) * lk::fused_lane_sets(cols) * cols;
    CK(cudaMalloc(&dy, n * 4)); CK(cudaMalloc(&x, n * 4)); CK(cudaMalloc(&dx, n * 4)); CK(cudaMalloc(&dx2, n * 4));
    CK(cudaMalloc(&m, rows * 4)); CK(cudaMalloc(&s, rows * 4)); CK(cudaMalloc(&g, cols * 4));
    CK(cudaMalloc(&pg, np * 4)); CK(cudaMalloc(&pb, np * 4)); CK(cudaMalloc(&pg2, np * 4)); CK(cudaMalloc(&pb2, np * 4));
    CK(cudaMemcpy(x, h.data(), n * 4, cudaMemcpyHostToDevice));
    for (auto &v : h) v = (rand() / (float)RAND_MAX) * 2 - 1;
    CK(cudaMemcpy(dy, h.data(), n * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(m, hm.data(), rows * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(s, hs.data(), rows * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(g, hg.data(), cols * 4, cudaMemcpyHostToDevice));
    const double bytes = 12.0 * n;
    lk::BwdArgs a{dy, x, m, s, g, rows, cols, (float)cols, dx};
    lk::BwdArgs a2 = a; a2.dx = dx2;
    L l;
    printf("(%llu, %llu): partials %.1f MB each\n", (unsigned long long)rows, (unsigned long long)cols, np * 4 / 1e6);
    const lk::BwdPlan reg{false, 2, false}, p2{true, 2, false}, p3{true, 3, false};
    float t0 = timeit([&] { lk::fused_bwd_plan(l, a, pg, pb, reg); });
    float t1 = timeit([&] { lk::fused_bwd_plan(l, a2, pg2, pb2, p3); });
    float t2 = timeit([&] { lk::fused_bwd_plan(l, a2, pg2, pb2, p2); });
    printf("  register kernel        %.4f ms  %.3f of copy BW\n", t0, bytes / t0 / 1e6 / cbw);
    printf("  ring, P=3              %.4f ms  %.3f of copy BW\n", t1, bytes / t1 / 1e6 / cbw);
    printf("  ring, P=2 (default)    %.4f ms  %.3f of copy BW\n", t2, bytes / t2 / 1e6 / cbw);
    CK(cudaDeviceSynchronize());
    std::vector<uint32_t> A(n), B(n);
    CK(cudaMemcpy(A.data(), dx, n * 4, cudaMemcpyDeviceToHost)); CK(cudaMemcpy(B.data(), dx2, n * 4, cudaMemcpyDeviceToHost));
    bool same = A == B;
    std::vector<uint32_t> C(np), D(np);
    CK(cudaMemcpy(C.data(), pg, np * 4, cudaMemcpyDeviceToHost)); CK(cudaMemcpy(D.data(), pg2, np * 4, cudaMemcpyDeviceToHost));
    same = same && C == D;
    CK(cudaMemcpy(C.data(), pb, np * 4, cudaMemcpyDeviceToHost)); CK(cudaMemcpy(D.data(), pb2, np * 4, cudaMemcpyDeviceToHost));
    same = same && C == D;
    printf("  bitwise same: %s\n", same ? "yes" : "NO");
    {  // the tail: the wide finish on the default plan's partials (dgamma and dbeta)
      const uint64_t nc = tlrt::red::chunks_of(rows);
      const unsigned S = lk::fused_lane_sets(cols);
      if (lk::fused_bwd_finish_wide_fits(nc, cols) && !(nc == 1 && S == 1)) {
        float *dgb, *cv;
        unsigned *ctr;
        CK(cudaMalloc(&dgb, 2 * cols * 4));
        CK(cudaMalloc(&cv, (lk::fused_bwd_finish_wide_scratch(nc, S, cols) + 1) * 4));
        CK(cudaMalloc(&ctr, lk::kWideCounters * 4));
        CK(cudaMemset(ctr, 0, lk::kWideCounters * 4));
        float tf = timeit([&] {
          lk::fused_bwd_finish_wide_plan(l, pg2, pb2, nc, S, cols, cv, ctr, dgb, dgb + cols);
        });
        printf("  finish (nc %llu, S %u)   %.4f ms\n", (unsigned long long)nc, S, tf);
        cudaFree(dgb);
        cudaFree(cv);
        cudaFree(ctr);
      }
    }
    if (cols == 1024) pipe_variant<64, 4, 4>(a2, pg2, pb2, bytes, cbw);
    if (cols == 4096) pipe_variant<256, 16, 4>(a2, pg2, pb2, bytes, cbw);
    cudaFree(dy); cudaFree(x); cudaFree(dx); cudaFree(dx2); cudaFree(m); cudaFree(s); cudaFree(g);
    cudaFree(pg); cudaFree(pb); cudaFree(pg2); cudaFree(pb2);
  }
  return 0;
}
