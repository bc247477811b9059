// The one-launch two-level whole-tensor reduction of the CUDA backend (fused2_kernel_vec4 in
// cuda/kernels/reduce.cuh, the very source nvcc compiles) run on the CPU under
// tests/emu/cuda_emu.hpp and compared bit for bit with the CPU backend: tlrt_reduce_sum,
// tlrt_reduce_mean and tlrt_reduce_max_axis1 (one row) on CPU buffers. The kernel takes one
// sequence of 2^24 < m <= 2^29 elements (m % 4 == 0), so the cases are large: 2^24 + 4 (two
// groups of chunks, the second of one chunk), a partial last chunk, and more than four groups
// (the last block's batches of four). Grids are capped in some cases so that warps loop over
// several chunks. Skipped (77) under valgrind, ASan and TSan (unannotated stack switches).
#include <cstdlib>
#include <string>
#include <vector>

#include "../emu/emu_check.hpp"
#define TLRT_CUDA_EMULATION 1
#include "cuda/kernels/reduce.cuh"

namespace {

using emu_check::same;
namespace rk = tlrt::cuda::red_kernels;
namespace red = tlrt::red;

// The blocks in raster, reverse and shuffled order: a different block takes the last ticket.
const emu::Policy kPolicies[] = {
    {emu::Order::Ascending, emu::Copy::Late, 1, emu::Order::Ascending},
    {emu::Order::Descending, emu::Copy::Early, 2, emu::Order::Descending},
    {emu::Order::Random, emu::Copy::Late, 3, emu::Order::Random},
};

template <red::Op OP>
float emulate(const std::vector<float> &x, float div, int pi, uint64_t grid_cap) {
  const uint64_t m = x.size(), nc = red::chunks_of(m);
  TH_CHECK_MSG(m % 4 == 0 && nc > red::kChunk && nc <= (uint64_t)red::kChunk * red::kSmall,
               "case outside the kernel's range (m = %llu)", (unsigned long long)m);
  std::vector<float> part(nc, 7.0f);
  unsigned counter = 0;
  float y = 7.0f;
  uint64_t grid = (nc + rk::kWarps - 1) / rk::kWarps;
  if (grid > grid_cap) grid = grid_cap;
  const float *xp = x.data();
  float *pp = part.data(), *yp = &y;
  unsigned *cp = &counter;
  emu::launch(kPolicies[pi], dim3((unsigned)grid), dim3(rk::kThreads), 0,
              [=] { rk::fused2_kernel_vec4<OP>(xp, m, nc, div, pp, cp, yp); });
  TH_CHECK_MSG(counter == 0, "the last block resets the counter (m = %llu)",
               (unsigned long long)m);
  return y;
}

void run(uint64_t m, th::Dist d, uint64_t salt, int pi, uint64_t grid_cap) {
  const std::vector<float> x = th::make(d, m, salt);
  char tag[128];
  std::snprintf(tag, sizeof tag, "m = %llu %s policy %d grid cap %llu", (unsigned long long)m,
                th::dist_name(d), pi, (unsigned long long)grid_cap);
  const std::string w = tag;
  th::Buf X(th::upload(x)), S, M, MX;
  TH_OK(tlrt_reduce_sum(X.get(), S.out()));
  TH_OK(tlrt_reduce_mean(X.get(), M.out()));
  TH_OK(tlrt_reduce_max_axis1(X.get(), 1, m, MX.out()));
  same(w + " sum", th::download(S.get()), {emulate<red::Op::Sum>(x, 1.0f, pi, grid_cap)});
  same(w + " mean", th::download(M.get()),
       {emulate<red::Op::Sum>(x, static_cast<float>(m), pi, grid_cap)});
  same(w + " max", th::download(MX.get()), {emulate<red::Op::Max>(x, 1.0f, pi, grid_cap)});
}

}  // namespace

int main() {
#ifdef TLRT_EMU_SANITIZED
  std::printf("test_reduce_emu: skipped under ASan / TSan (unannotated stack switches)\n");
  return 77;
#endif
  if (th::under_valgrind()) {
    std::printf("test_reduce_emu: skipped under valgrind\n");
    return 77;
  }
  const uint64_t big = uint64_t{1} << 31, c = red::kChunk, m24 = c * c;
  run(m24 + 4, th::Dist::Uniform, 11, 0, big);                 // nc = 4097: groups of 4096 and 1
  run(m24 + 3 * c + 100, th::Dist::Wide, 21, 1, big);          // a partial last chunk
  run(m24 + 2 * c + 8, th::Dist::Edge, 31, 2, 37);             // warps loop over chunks
  run(m24 + 4, th::Dist::Bits, 41, 1, big);                    // NaN, inf, subnormals
  run(4 * m24 + 4 * c + 12, th::Dist::Positive, 51, 2, big);   // ng = 5: two batches of groups
  std::printf("test_reduce_emu: %d runs with differences\n", emu_check::mismatch_runs());
  return th::finish("test_reduce_emu");
}
