// The CUDA emulator itself (tests/emu/cuda_emu.hpp), which the *_emu tests trust: what it must
// give a correct kernel under every schedule, and what it must catch in a wrong one.
//  - barriers: values written before __syncthreads() are seen by every thread after it, in
//    every block of a multi-block grid, under the three policies (ascending, descending,
//    random);
//  - a read of another thread's shared value WITHOUT a barrier gives a different result under
//    some policy (so a missing barrier shows as a difference);
//  - warp shuffles: a butterfly sum by __shfl_xor_sync equals the warp's total in every lane;
//  - dynamic shared memory starts as a NaN pattern in every block;
//  - a barrier that some threads never reach is reported (std::runtime_error), and the
//    emulator runs the next launch normally;
//  - an exception thrown inside a fiber (emu::check_aligned on a misaligned float4) leaves
//    emu::launch as that exception, and the next launch runs normally.
// Skipped (77) under valgrind, ASan and TSan (unannotated stack switches), as the other *_emu
// tests.
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "../emu/emu_check.hpp"

namespace {

const emu::Policy kOrders[] = {
    {emu::Order::Ascending, emu::Copy::Late, 1},
    {emu::Order::Descending, emu::Copy::Early, 2},
    {emu::Order::Random, emu::Copy::Late, 7},
};

// Each thread publishes t * 3 + block, waits (or not), then reads its right neighbour's value.
std::vector<unsigned> neighbours(const emu::Policy &pol, unsigned blocks, unsigned threads,
                                 bool barrier) {
  std::vector<unsigned> got(blocks * threads, ~0u);
  static unsigned shared[1024];
  emu::launch(pol, dim3(blocks), dim3(threads), 0, [&, barrier] {
    const unsigned t = threadIdx.x, n = blockDim.x;
    shared[t] = t * 3 + blockIdx.x;
    if (barrier) __syncthreads();
    got[blockIdx.x * n + t] = shared[(t + 1) % n];
    if (barrier) __syncthreads();  // nobody rewrites shared[] before all have read (next block)
  });
  return got;
}

void barriers() {
  for (const emu::Policy &pol : kOrders)
    for (unsigned threads : {1u, 32u, 96u, 256u}) {
      const unsigned blocks = 3;
      const std::vector<unsigned> got = neighbours(pol, blocks, threads, true);
      bool ok = true;
      for (unsigned b = 0; b < blocks; ++b)
        for (unsigned t = 0; t < threads; ++t)
          ok = ok && got[b * threads + t] == ((t + 1) % threads) * 3 + b;
      TH_CHECK_MSG(ok, "barrier: policy %d, %u threads: a value written before the barrier was "
                   "not seen after it", (int)pol.order, threads);
    }
  // Without the barrier the threads run to their end one after another: under the ascending
  // policy thread t reads t + 1's slot before t + 1 wrote it (block 0: the slot's start value).
  bool differs = false;
  for (const emu::Policy &pol : kOrders) {
    const std::vector<unsigned> got = neighbours(pol, 2, 64, false);
    for (unsigned b = 0; b < 2; ++b)
      for (unsigned t = 0; t < 64; ++t) differs = differs || got[b * 64 + t] != ((t + 1) % 64) * 3 + b;
  }
  TH_CHECK_MSG(differs, "a missing barrier gave the correct result under every policy");
}

void shuffles() {
  for (const emu::Policy &pol : kOrders) {
    std::vector<float> got(128, NAN);
    emu::launch(pol, dim3(2), dim3(64), 0, [&] {
      float v = (float)(threadIdx.x % 32 + 1);  // the warp's total: 1 + ... + 32 = 528
      for (int m = 16; m >= 1; m /= 2) v += __shfl_xor_sync(0xffffffffu, v, m);
      got[blockIdx.x * 64 + threadIdx.x] = v;
    });
    bool ok = true;
    for (float v : got) ok = ok && v == 528.0f;
    TH_CHECK_MSG(ok, "shuffle butterfly sum: policy %d", (int)pol.order);
  }
}

void dynamic_shared_nan() {
  std::vector<int> nan_seen(3, 0);
  emu::launch(kOrders[0], dim3(3), dim3(32), 256, [&] {
    float *s = tlrt::cuda::async::dynamic_smem();
    bool all_nan = true;
    for (int i = 0; i < 64; ++i) all_nan = all_nan && std::isnan(s[i]);
    __syncthreads();
    if (threadIdx.x == 0) {
      nan_seen[blockIdx.x] = all_nan;
      for (int i = 0; i < 64; ++i) s[i] = 1.0f;  // the next block must not see these
    }
  });
  TH_CHECK_MSG(nan_seen[0] && nan_seen[1] && nan_seen[2],
               "dynamic shared memory did not start as NaN in every block");
}

// The emulator still runs a correct kernel after a failed launch.
void still_usable(const char *after) {
  const std::vector<unsigned> got = neighbours(kOrders[2], 2, 96, true);
  bool ok = true;
  for (unsigned b = 0; b < 2; ++b)
    for (unsigned t = 0; t < 96; ++t) ok = ok && got[b * 96 + t] == ((t + 1) % 96) * 3 + b;
  TH_CHECK_MSG(ok, "the emulator failed a correct launch after %s", after);
}

void deadlock() {
  for (const emu::Policy &pol : kOrders) {
    std::string what;
    try {
      emu::launch(pol, dim3(1), dim3(64), 0, [] {
        if (threadIdx.x < 32) __syncthreads();  // warp 1 returns without it
      });
    } catch (const std::runtime_error &e) {
      what = e.what();
    }
    TH_CHECK_MSG(!what.empty(), "a barrier half the block skips was not reported (policy %d)",
                 (int)pol.order);
    still_usable("a reported barrier error");
  }
}

void exception_in_fiber() {
  alignas(16) float buf[8] = {};
  for (const emu::Policy &pol : kOrders) {
    std::string what;
    int after = 0;
    try {
      emu::launch(pol, dim3(2), dim3(64), 0, [&] {
        __syncthreads();
        if (threadIdx.x == 37) (void)__ldg(reinterpret_cast<const float4 *>(buf + 1));
        __syncthreads();
        ++after;
      });
    } catch (const std::runtime_error &e) {
      what = e.what();
    }
    TH_CHECK_MSG(what.find("misaligned") != std::string::npos,
                 "a misaligned float4 load in a fiber: got \"%s\" (policy %d)", what.c_str(),
                 (int)pol.order);
    TH_CHECK_MSG(after == 0, "%d threads went past the barrier after the exception", after);
    still_usable("an exception in a fiber");
  }
}

}  // namespace

int main() {
#ifdef TLRT_EMU_SANITIZED
  std::printf("test_emu_self: skipped under ASan / TSan (unannotated stack switches)\n");
  return 77;
#endif
  if (th::under_valgrind()) {
    std::printf("test_emu_self: skipped under valgrind\n");
    return 77;
  }
  barriers();
  shuffles();
  dynamic_shared_nan();
  deadlock();
  exception_in_fiber();
  return th::finish("test_emu_self");
}
