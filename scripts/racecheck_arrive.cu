// Does compute-sanitizer racecheck order a bar.arrive before the bar.sync it completes? The
// two-warpgroup attention backward (cuda/sm90a/attention.cu) hands P from one warpgroup to the
// other through one shared buffer with a "full" and an "empty" named barrier, each arrived at
// (bar.arrive, no wait) by one side and waited on (bar.sync) by the other: the PTX memory model
// makes bar.arrive a release that synchronizes with the bar.sync completing the barrier. This
// kernel runs that protocol alone (mode 0) and with every arrive replaced by a sync (mode 1, both
// sides wait: the same order, no overlap), checks the values, and is meant to be run under
// `compute-sanitizer --tool racecheck`: hazards in mode 0 and none in mode 1 mean the tool does
// not model the arrive's ordering.
//   nvcc -std=c++17 -arch=sm_90 scripts/racecheck_arrive.cu -o /tmp/ra && /tmp/ra 0 && /tmp/ra 1
#include <cstdio>
#include <cstdlib>

__device__ __forceinline__ void bar_sync(unsigned id) {
  asm volatile("bar.sync %0, 256;\n" ::"r"(id) : "memory");
}
__device__ __forceinline__ void bar_arrive(unsigned id, bool wait) {
  if (wait) bar_sync(id);
  else asm volatile("bar.arrive %0, 256;\n" ::"r"(id) : "memory");
}

__global__ void handover(int rounds, bool sync_both, float *out) {
  __shared__ float buf[128];
  const unsigned tid = threadIdx.x % 128;
  if (threadIdx.x < 128) {  // producer
    for (int r = 0; r < rounds; ++r) {
      bar_sync(2);  // empty
      buf[(tid + 1) % 128] = (float)(r * 1000 + tid);
      bar_arrive(1, sync_both);  // full
    }
  } else {  // consumer
    float acc = 0.0f;
    bar_arrive(2, sync_both);  // the buffer starts empty
    for (int r = 0; r < rounds; ++r) {
      bar_sync(1);
      acc += buf[tid];
      if (r + 1 < rounds) bar_arrive(2, sync_both);
    }
    out[tid] = acc;
  }
}

int main(int argc, char **argv) {
  const bool sync_both = argc > 1 && argv[1][0] == '1';
  const int rounds = 16;
  float *out;
  cudaMalloc(&out, 128 * sizeof(float));
  handover<<<1, 256>>>(rounds, sync_both, out);
  float h[128];
  cudaMemcpy(h, out, sizeof h, cudaMemcpyDeviceToHost);
  int bad = 0;
  for (unsigned t = 0; t < 128; ++t) {
    float want = 0.0f;
    for (int r = 0; r < rounds; ++r) want += (float)(r * 1000 + (t + 127) % 128);
    bad += h[t] != want;
  }
  std::printf("mode %d (%s): %d wrong values, %s\n", (int)sync_both,
              sync_both ? "sync on both sides" : "arrive / sync", bad,
              cudaGetErrorString(cudaGetLastError()));
  return bad != 0;
}
