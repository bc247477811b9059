// Suite 'parity': tlrt_cross_entropy_fwd and tlrt_cross_entropy_bwd (abi/tlrt_softmax.h) on
// TLRT_DEVICE_CPU and TLRT_DEVICE_CUDA(0) with the same seeded inputs: loss, lse (m, log s) and
// the gradient BIT FOR BIT (th::same_bits: any NaN equals any NaN), and the CUDA results again
// with the determinism switch flipped; the index fault counts of both backends equal. The numeric
// class "shared math + ordered reduction" promises exactly that.
//
// Shapes: every CUDA forward strategy and its edges (the row in registers of a group of 32 .. 256
// threads up to 256, 512, 1024, 2048, 4096 and 8192 columns, of 512 threads up to 16384,
// clusters of 4 blocks up to 32768 and 65536; the chunk passes beyond, 2^17 + 3 and 2^20 + 5), 50257 (the GPT-2
// vocabulary), classes == 1, rows that make blocks loop; labels int32 and int64, with ignored rows
// (ignore_index -100, 0, and none) and faults (-1, classes, INT32_MIN / 2^40); logits uniform,
// wide exponents, random bit patterns (NaN, inf) and edge values. TLRT_PARITY_MAX_N=<n> caps the
// input sizes.
//
// Exits 77 (skipped) unless a CUDA device is usable.
#include <cmath>
#include <string>
#include <vector>

#include "index_buffers.hpp"
#include "parity.hpp"

namespace {

using namespace parity;
using th::Buf;
using th::Dist;

void one_shape(uint64_t R, uint64_t C, Dist d, int ignore, bool i32, uint64_t salt) {
  std::vector<float> x = th::make(d, R * C, salt);
  if (d == Dist::Uniform)
    for (auto &v : x) v *= 8.0f;
  th::Rng rng(salt);
  std::vector<int64_t> lab(R);
  for (auto &l : lab) {
    const uint64_t k = rng.gen() % 12;
    l = k == 0 ? -100 : k == 1 ? -1 : k == 2 ? (int64_t)C : k == 3 ? 0
        : k == 4 ? (i32 ? INT32_MIN : (int64_t)1 << 40) : (int64_t)(rng.gen() % C);
  }
  const std::string w = "cross_entropy (" + std::to_string(R) + ", " + std::to_string(C) + ") " +
                        th::dist_name(d) + " ignore " + std::to_string(ignore) +
                        (i32 ? " int32" : " int64");
  th::index_faults(kCpu, true);
  th::index_faults(kGpu, true);
  run_multi(w, [&](tlrt_device dev, std::vector<Buf> &outs) {
    Buf X(th::upload(x, dev)), L = th::index_buffer(dev, lab, i32), G(th::upload({0.75f}, dev));
    outs.emplace_back();
    outs.emplace_back();
    outs.emplace_back();
    tlrt_status s = tlrt_cross_entropy_fwd(X.get(), L.get(), R, C, ignore, outs[0].out(),
                                           outs[1].out());
    if (s != TLRT_OK) return s;
    return tlrt_cross_entropy_bwd(X.get(), L.get(), outs[1].get(), G.get(), R, C, ignore,
                                  outs[2].out());
  });
  // The forward counted the faults once per run: the CPU once, the GPU twice (the flip).
  const uint64_t fc = th::index_faults(kCpu, true), fg = th::index_faults(kGpu, true);
  TH_CHECK_MSG(2 * fc == fg, "%s: faults cpu %llu, cuda %llu (two runs)", w.c_str(),
               (unsigned long long)fc, (unsigned long long)fg);
}

}  // namespace

int main() {
  if (!start("parity_cross_entropy")) return 77;
  uint64_t salt = 1;
  struct Shape {
    uint64_t rows, cols;
  };
  for (Shape s : {Shape{300, 1}, Shape{300, 2}, Shape{300, 10}, Shape{200, 100}, Shape{100, 1000},
                  Shape{1000, 32}, Shape{1000, 33}, Shape{300, 256}, Shape{300, 257},
                  Shape{100, 512}, Shape{100, 513}, Shape{60, 1024}, Shape{60, 1025},
                  Shape{40, 2048}, Shape{40, 2049},
                  Shape{40, 4096}, Shape{40, 4097}, Shape{30, 8192}, Shape{30, 8193},
                  Shape{20, 16384}, Shape{20, 16385}, Shape{10, 32768}, Shape{10, 32769},
                  Shape{64, 50257}, Shape{8, 65536}, Shape{4, 65537}, Shape{3, 131075},
                  Shape{2, (uint64_t{1} << 20) + 5}, Shape{70000, 3}}) {
    if (s.rows * s.cols > max_n()) continue;
    int k = 0;
    for (Dist d : {Dist::Uniform, Dist::Wide, Dist::Bits, Dist::Edge})
      for (int ignore : {-100, 0, TLRT_CROSS_ENTROPY_NO_IGNORE})
        one_shape(s.rows, s.cols, d, ignore, (k++ & 1) != 0, ++salt);
  }
  if (max_n() >= 8192ull * 50257)
    one_shape(8192, 50257, Dist::Uniform, -100, false, ++salt);
  print_summary("parity_cross_entropy");
  return th::finish("test_parity_cross_entropy");
}
