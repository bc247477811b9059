// The CUDA selective-scan backward kernels of cuda/kernels/scan.cuh (the very source nvcc compiles)
// run on the CPU under tests/emu/cuda_emu.hpp and compared BIT FOR BIT with the CPU backend's
// tlrt_selective_scan_diag_bwd: bwd_aggregate (the chunk aggregates), then the carry chain over
// chunks on the host with BwdChain's operations (cuda/scan.cu runs it as carry_scan), then
// bwd_fold (the adjoint, dX = B g, dH0 and THE TREE's lane folds of h_{t-1} g and X g in one
// pass, its warps in step through shared-memory stages), then the lane and chunk levels of THE
// TREE with tlrt_reduce_sum_axis0 on the CPU (what reduce_axis does on the device). So the fused
// kernel's index arithmetic (scan chunk <-> tree lane and element), its partial chunks, its
// barriers and double-buffered stages, the idle warps of short sequences, grid.y loops and
// channels past D are checked without a GPU.
// Every case runs under one of several schedules (fibers resumed in ascending, descending and
// random order; TLRT_EMU_FULL=1 runs all of them on every case). Outputs and partials start as a
// pattern, shared memory as NaN, so an unwritten or early-read value changes the bits.
// Shapes: T = 1, 2, the scan chunk (64) +- 1, the quarters of a tree row (128, 192, 256) +- 1,
// primes, the tree chunk (4096) +- 1, several tree chunks (up to 16384 x 64); D = 1, 31, 32, 33,
// 70 (partial warps and several channel groups). Inputs: uniform, A in [0.9, 1], wide, bit
// patterns, edge values.
// Skipped (77) under valgrind, ASan and TSan, which do not follow the emulator's stack switches.
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "../emu/emu_check.hpp"
#define TLRT_CUDA_EMULATION 1
#include "cuda/kernels/scan.cuh"
#include "core/numerics/row_ops.hpp"

namespace {

using emu_check::full;
using emu_check::same;

namespace sk = tlrt::cuda::scan_kernels;
namespace scan = tlrt::scan;
using th::Buf;
using th::Dist;

const emu::Policy kPolicies[] = {
    {emu::Order::Ascending, emu::Copy::Late, 1},
    {emu::Order::Descending, emu::Copy::Late, 2},
    {emu::Order::Random, emu::Copy::Late, 3},
    {emu::Order::Random, emu::Copy::Early, 4},
};
constexpr int kNumPolicies = sizeof kPolicies / sizeof kPolicies[0];
constexpr float kPattern = 7.0f;

// Column sums of a row-major (rows, cols) array by THE TREE (the CPU backend's reduce_axis).
std::vector<float> axis0(const std::vector<float> &x, uint64_t rows, uint64_t cols) {
  Buf in(th::upload(x)), o;
  TH_OK(tlrt_reduce_sum_axis0(in.get(), rows, cols, o.out()));
  return o.get() ? th::download(o.get()) : std::vector<float>();
}

enum class Kind { Uniform, LongMemory, Wide, Bits, Edge };

void run_case(uint64_t T, uint64_t D, Kind kind, uint64_t salt, int pi, unsigned ycap) {
  const Dist d = kind == Kind::Wide   ? Dist::Wide
                 : kind == Kind::Bits ? Dist::Bits
                 : kind == Kind::Edge ? Dist::Edge
                                      : Dist::Uniform;
  const uint64_t n = T * D;
  std::vector<float> A = th::make(d, D, salt);
  if (kind == Kind::LongMemory) {
    th::Rng rng(salt);
    A = rng.vec(D, 0.9f, 1.0f);
  }
  const std::vector<float> B = th::make(d, D, salt + 1), X = th::make(d, n, salt + 2),
                           h0 = th::make(d, D, salt + 3), dY = th::make(d, n, salt + 4);
  char tag[128];
  std::snprintf(tag, sizeof tag, "(T %llu, D %llu) kind %d policy %d ycap %u",
                (unsigned long long)T, (unsigned long long)D, (int)kind, pi, ycap);
  const std::string w = tag;

  // CPU backend through the public API: out, then the four gradients.
  Buf a(th::upload(A)), b(th::upload(B)), x(th::upload(X)), h(th::upload(h0)), g(th::upload(dY));
  Buf o, gA, gB, gX, gH;
  TH_OK(tlrt_selective_scan_diag_fwd(a.get(), b.get(), x.get(), h.get(), T, D, o.out()));
  const std::vector<float> out = th::download(o.get());
  TH_OK(tlrt_selective_scan_diag_bwd(a.get(), b.get(), x.get(), h.get(), o.get(), g.get(), T, D,
                                     gA.out(), gB.out(), gX.out(), gH.out()));
  const std::vector<float> wA = th::download(gA.get()), wB = th::download(gB.get()),
                           wX = th::download(gX.get()), wH = th::download(gH.get());

  // The device path, emulated.
  const emu::Policy pol = kPolicies[pi];
  const uint64_t C = scan::chunks(T);
  std::vector<float> carry(C > 1 ? (C - 1) * D : 0, NAN);
  if (C > 1) {
    std::vector<float> agg_m((C - 1) * D, NAN), agg_q((C - 1) * D, NAN);
    const uint64_t wd = (D + 31) / 32 * 32;
    const unsigned threads = (unsigned)(wd < 256 ? wd : 256);
    const dim3 grid((unsigned)((D + threads - 1) / threads),
                    (unsigned)(C - 1 < ycap ? C - 1 : ycap));
    emu::launch(pol, grid, dim3(threads), 0, [&] {
      sk::bwd_aggregate<false>(A.data(), dY.data(), T, D, C, agg_m.data(), agg_q.data());
    });
    // BwdChain::step, channel by channel.
    for (uint64_t j = 0; j < D; ++j) {
      float q = 0.0f;
      for (uint64_t s = 0; s + 1 < C; ++s) {
        const uint64_t c = C - 1 - s;
        const float gc = s == 0 ? agg_m[(c - 1) * D + j]
                                : scan::apply(agg_m[(c - 1) * D + j], agg_q[(c - 1) * D + j], q);
        q = scan::mul(A[j], gc);
        carry[(C - 2 - s) * D + j] = q;
      }
    }
  }
  const uint64_t nc = tlrt::red::chunks_of(T);
  const unsigned lanes = tlrt::row::col_lanes(T);
  const uint64_t np = nc * lanes * D, nkw = nc * sk::kQuarters;
  std::vector<float> dX(n, kPattern), dH0(D, kPattern), pa(np, kPattern), pb(np, kPattern);
  const unsigned warps = sk::fold_warps(T);
  const dim3 grid((unsigned)((D + 31) / 32), (unsigned)(nkw < ycap ? nkw : ycap));
  emu::launch(pol, grid, dim3(32 * warps), sk::fold_smem_bytes(warps), [&] {
    sk::bwd_fold(A.data(), B.data(), X.data(), h0.data(), out.data(), dY.data(),
                 C > 1 ? carry.data() : nullptr, T, D, C, lanes, nkw, dX.data(), dH0.data(),
                 pa.data(), pb.data());
  });
  same(w + " dX", wX, dX);
  same(w + " dH0", wH, dH0);
  // THE TREE's lane level per tree chunk, then the chunk level.
  std::vector<float> ca, cb;
  for (uint64_t k = 0; k < nc; ++k) {
    const auto sa = axis0(std::vector<float>(pa.begin() + k * lanes * D,
                                             pa.begin() + (k + 1) * lanes * D),
                          lanes, D);
    const auto sb = axis0(std::vector<float>(pb.begin() + k * lanes * D,
                                             pb.begin() + (k + 1) * lanes * D),
                          lanes, D);
    ca.insert(ca.end(), sa.begin(), sa.end());
    cb.insert(cb.end(), sb.begin(), sb.end());
  }
  same(w + " dA", wA, nc == 1 ? ca : axis0(ca, nc, D));
  same(w + " dB", wB, nc == 1 ? cb : axis0(cb, nc, D));
}

// diag forward: fwd_chained (one pass, blocks chained through flags) against the CPU backend.
void run_fwd(uint64_t T, uint64_t D, Kind kind, uint64_t salt, int pi) {
  const Dist d = kind == Kind::Wide   ? Dist::Wide
                 : kind == Kind::Bits ? Dist::Bits
                 : kind == Kind::Edge ? Dist::Edge
                                      : Dist::Uniform;
  const uint64_t n = T * D;
  std::vector<float> A = th::make(d, D, salt);
  if (kind == Kind::LongMemory) {
    th::Rng rng(salt);
    A = rng.vec(D, 0.9f, 1.0f);
  }
  const std::vector<float> B = th::make(d, D, salt + 1), X = th::make(d, n, salt + 2),
                           h0 = th::make(d, D, salt + 3);
  char tag[128];
  std::snprintf(tag, sizeof tag, "fwd_chained (T %llu, D %llu) kind %d policy %d",
                (unsigned long long)T, (unsigned long long)D, (int)kind, pi);
  Buf a(th::upload(A)), b(th::upload(B)), x(th::upload(X)), h(th::upload(h0)), o;
  TH_OK(tlrt_selective_scan_diag_fwd(a.get(), b.get(), x.get(), h.get(), T, D, o.out()));
  const std::vector<float> want = th::download(o.get());
  const uint64_t C = scan::chunks(T), G = (D + 31) / 32;
  const uint64_t S = (C + sk::kSegWarps - 1) / sk::kSegWarps;
  unsigned ticket = 0;
  std::vector<unsigned long long> words((S - 1) * D + 1, 0ull);
  std::vector<float> out(n, kPattern);
  emu::launch(kPolicies[pi], dim3((unsigned)(G * S)), dim3(32 * sk::kSegWarps),
              sk::chained_smem_bytes(), [&] {
                sk::fwd_chained(A.data(), B.data(), X.data(), h0.data(), T, D, C, G, &ticket,
                                words.data(), out.data());
              });
  same(std::string(tag) + " out", want, out);
}

}  // namespace

int main() {
#ifdef TLRT_EMU_SANITIZED
  std::printf("test_scan_emu: skipped under ASan / TSan (unannotated stack switches)\n");
  return 77;
#endif
  if (th::under_valgrind()) {
    std::printf("test_scan_emu: skipped under valgrind\n");
    return 77;
  }
  const bool all = full();
  uint64_t salt = 1;
  int rot = 0;
  auto go = [&](uint64_t T, uint64_t D, Kind k, unsigned ycap) {
    salt += 10;
    if (all)
      for (int pi = 0; pi < kNumPolicies; ++pi) run_case(T, D, k, salt, pi, ycap);
    else
      run_case(T, D, k, salt, rot++ % kNumPolicies, ycap);
  };
  const Kind kinds[] = {Kind::Uniform, Kind::LongMemory, Kind::Wide, Kind::Bits, Kind::Edge};
  // Short and boundary sequences, every kind, two channel counts.
  for (uint64_t T : {1, 2, 3, 61, 63, 64, 65, 67, 127, 128, 129, 131, 191, 192, 193, 255, 256, 257,
                     320, 509, 1000, 1021})
    for (uint64_t D : {1, 33})
      for (Kind k : kinds) go(T, D, k, 65535);
  // Channel groups: partial warps, several groups.
  for (uint64_t D : {31, 32, 70})
    for (uint64_t T : {1, 65, 257, 4096}) go(T, D, Kind::Uniform, 65535);
  // Tree chunks: 4096 +- 1, primes across them, several chunks; grid.y looping (cap 3, 5).
  for (uint64_t T : {4093, 4095, 4096, 4097, 4099, 8191, 8192, 8257, 12289})
    for (Kind k : {Kind::Uniform, Kind::Edge})
      for (unsigned ycap : {65535u, 3u}) go(T, 3, k, ycap);
  go(16411, 2, Kind::LongMemory, 5);
  go(4160, 40, Kind::Bits, 2);
  go(16384, 64, Kind::LongMemory, 65535);
  // The one-pass forward: one chunk, one segment (8 chunks = 512 steps) +- 1, several segments,
  // partial warps and several channel groups.
  for (uint64_t T : {1, 2, 63, 64, 65, 130, 511, 512, 513, 1021, 1024, 1025, 3001})
    for (uint64_t D : {1, 33, 70})
      for (Kind k : kinds) {
        salt += 10;
        if (all)
          for (int pi = 0; pi < kNumPolicies; ++pi) run_fwd(T, D, k, salt, pi);
        else
          run_fwd(T, D, k, salt, rot++ % kNumPolicies);
      }
  std::printf("test_scan_emu: %d runs with differences (%s schedules)\n",
              emu_check::mismatch_runs(), all ? "all" : "rotated");
  return th::finish("test_scan_emu");
}
