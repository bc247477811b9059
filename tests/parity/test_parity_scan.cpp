// Suite 'parity': the selective scan (abi/tlrt_scan.h) on TLRT_DEVICE_CPU and TLRT_DEVICE_CUDA(0)
// with the same seeded inputs: tlrt_selective_scan_diag_fwd / _bwd and _diag_var_fwd / _bwd. Every
// output (out; dA, dB, dX, dH0) must agree BIT FOR BIT (th::same_bits: any NaN equals any NaN): the
// header's numeric class "ordered" promises that both backends perform the chunked operations of
// its DEFINITIONS in the same order, and THE TREE for diag's sums over time (the unit test checks
// the CPU against an independent implementation). Every CUDA result is recomputed with the
// determinism switch flipped and must not change.
//
// Shapes: T across the CUDA strategies and boundaries (one chunk up to 64 steps, then three phases;
// the carry scans' 16-chunk batches; the tree's 256 lanes and 4096-step chunks; primes near each;
// more than 65535 chunks, where the kernels loop over grid.y), D across the thread-block widths
// (1, 31, 32, 33, 255, 256, 257, 1030), and the benchmark sizes (4096, 1024), (65536, 1024),
// (16384, 4096). Inputs: uniform, A close to 1 (long memory), wide exponents, random bit
// patterns, edge values. The backward runs on the CPU forward's out on both devices.
// TLRT_PARITY_MAX_N=<n> caps the input sizes. Exits 77 (skipped) unless a CUDA device is usable;
// built with -DTLRT_PARITY_SELFTEST both sides run on the CPU.
#include <string>
#include <vector>

#include "parity.hpp"

namespace {

using namespace parity;
using th::Buf;
using th::Dist;

enum class Kind { Uniform, LongMemory, Wide, Bits, Edge };

const char *kind_name(Kind k) {
  switch (k) {
    case Kind::Uniform: return "uniform";
    case Kind::LongMemory: return "A~[0.9,1]";
    case Kind::Wide: return "wide";
    case Kind::Bits: return "bits";
    case Kind::Edge: return "edge";
  }
  return "?";
}

Dist dist_of(Kind k) {
  switch (k) {
    case Kind::Wide: return Dist::Wide;
    case Kind::Bits: return Dist::Bits;
    case Kind::Edge: return Dist::Edge;
    default: return Dist::Uniform;
  }
}

void one(uint64_t T, uint64_t D, bool var, Kind kind, uint64_t salt) {
  const uint64_t n = T * D, na = var ? n : D;
  if (n > max_n()) return;
  const Dist d = dist_of(kind);
  std::vector<float> A = th::make(d, na, salt);
  if (kind == Kind::LongMemory) {
    th::Rng rng(salt);
    A = rng.vec(na, 0.9f, 1.0f);
  }
  const std::vector<float> B = th::make(d, na, salt + 1), X = th::make(d, n, salt + 2),
                           h0 = th::make(d, D, salt + 3), dY = th::make(d, n, salt + 4);
  const std::string w = std::string(var ? "var" : "diag") + " (" + std::to_string(T) + ", " +
                        std::to_string(D) + ") " + kind_name(kind) + " ";
  run_multi(w + "fwd", [&](tlrt_device dev, std::vector<Buf> &o) {
    Buf a(th::upload(A, dev)), b(th::upload(B, dev)), x(th::upload(X, dev)), h(th::upload(h0, dev));
    o.resize(1);
    return var ? tlrt_selective_scan_diag_var_fwd(a.get(), b.get(), x.get(), h.get(), T, D,
                                                  o[0].out())
               : tlrt_selective_scan_diag_fwd(a.get(), b.get(), x.get(), h.get(), T, D,
                                              o[0].out());
  });
  std::vector<float> out;
  {
    Buf a(th::upload(A)), b(th::upload(B)), x(th::upload(X)), h(th::upload(h0)), o;
    TH_OK(var ? tlrt_selective_scan_diag_var_fwd(a.get(), b.get(), x.get(), h.get(), T, D, o.out())
              : tlrt_selective_scan_diag_fwd(a.get(), b.get(), x.get(), h.get(), T, D, o.out()));
    if (o.get()) out = th::download(o.get());
  }
  if (out.size() != n) return;
  run_multi(w + "bwd", [&](tlrt_device dev, std::vector<Buf> &o) {
    Buf a(th::upload(A, dev)), b(th::upload(B, dev)), x(th::upload(X, dev)), h(th::upload(h0, dev)),
        ob(th::upload(out, dev)), g(th::upload(dY, dev));
    o.resize(4);
    return var ? tlrt_selective_scan_diag_var_bwd(a.get(), b.get(), x.get(), h.get(), ob.get(),
                                                  g.get(), T, D, o[0].out(), o[1].out(),
                                                  o[2].out(), o[3].out())
               : tlrt_selective_scan_diag_bwd(a.get(), b.get(), x.get(), h.get(), ob.get(),
                                              g.get(), T, D, o[0].out(), o[1].out(), o[2].out(),
                                              o[3].out());
  });
}

}  // namespace

int main() {
  if (!start("test_parity_scan")) return 77;
  uint64_t salt = 1;
  const Kind kinds[] = {Kind::Uniform, Kind::LongMemory, Kind::Wide, Kind::Bits, Kind::Edge};
  struct Shape {
    uint64_t T, D;
  };
  // Small and boundary shapes: every input kind.
  const Shape small[] = {{1, 1},    {1, 257},   {2, 3},     {63, 33},   {64, 32},   {65, 31},
                         {127, 5},  {128, 256}, {129, 255}, {255, 7},   {256, 3},   {257, 1},
                         {1000, 9}, {1088, 4},  {1089, 4},  {4095, 2},  {4096, 33}, {4097, 3},
                         {8193, 5}, {70000, 2}, {300, 1030},
                         // Prime T around the chunk (64), the quarters of a tree row of lanes
                         // (64-step groups of diag_bwd's fused fold: 128, 192, 256) and the tree
                         // chunk (4096), with partial and several 32-channel groups.
                         {3, 40},    {61, 17},   {67, 40},   {131, 9},   {191, 33},  {193, 3},
                         {509, 70},  {1021, 1030}, {4093, 5}, {4099, 33}, {8191, 3}, {12289, 65},
                         // diag_fwd's one-pass kernel (D >= 1024): 8-chunk segments chained
                         // through flagged words, a last segment of one step, partial groups.
                         {4097, 1030}, {1543, 1025}};
  for (const Shape &s : small)
    for (Kind k : kinds)
      for (bool var : {false, true}) one(s.T, s.D, var, k, salt += 10);
  // Large shapes (the benchmark's) and more than 65535 chunks: uniform and long memory.
  const Shape large[] = {{4096, 1024}, {65536, 1024}, {16384, 4096}, {65535 * 64 + 100, 2}};
  for (const Shape &s : large)
    for (Kind k : {Kind::Uniform, Kind::LongMemory})
      for (bool var : {false, true}) one(s.T, s.D, var, k, salt += 10);
  print_summary("test_parity_scan");
  return th::finish("test_parity_scan");
}
