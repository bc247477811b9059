// Suite 'parity': tlrt_layer_norm_fwd and tlrt_layer_norm_bwd (abi/tlrt_layer_norm.h) on
// TLRT_DEVICE_CPU and TLRT_DEVICE_CUDA(0) with the same seeded inputs; every output (y, mean,
// inv_std; dx, dgamma, dbeta) must agree BIT FOR BIT (th::same_bits: any NaN equals any NaN). The
// header's numeric class "ordered reduction" promises exactly that: both backends perform the same
// float32 operations in the same order with the one documented tree, for the row statistics and for
// the column sums over rows (the unit test checks the CPU against an independent implementation).
// Every CUDA result is also recomputed with the determinism switch flipped and must not change.
//
// Shapes: cols across every CUDA strategy and its boundaries (thread per row up to 32, group per
// row up to 8192 forward / 4096 backward, long rows beyond), rows across the column tree's lane and
// chunk boundaries (1, 3, 100, 255, 256, 257, 4095, 4096, 4097, 8193, 20000), and the large
// (65536, 1024), (16384, 4096), (1024, 65536), (2^26, 1), (1, 2^26). Inputs: x uniform, wide
// exponents, random bit patterns, edge values, rows offset far from zero; gamma, beta uniform (bit
// patterns for the bits case); eps 0, 1e-5 and 1e-6. The backward runs on the forward's own
// statistics and on arbitrary ones.
// TLRT_PARITY_MAX_N=<n> caps the input sizes. Exits 77 (skipped) unless a CUDA device is usable;
// built with -DTLRT_PARITY_SELFTEST both sides run on the CPU.
#include <cmath>
#include <string>
#include <vector>

#include "parity.hpp"

namespace {

using namespace parity;
using th::Buf;
using th::Dist;

std::vector<float> make_x(Dist d, uint64_t n, uint64_t cols, uint64_t salt) {
  std::vector<float> x = th::make(d == Dist::Positive ? Dist::Uniform : d, n, salt);
  if (d == Dist::Positive)  // rows offset from zero by up to 1e3 times their spread
    for (uint64_t k = 0; k < n; ++k) x[k] += (float)((k / cols) % 7) * 150.0f;
  return x;
}

void one_shape(uint64_t R, uint64_t C, Dist d, double eps, uint64_t salt) {
  const uint64_t n = R * C;
  const std::vector<float> x = make_x(d, n, C, salt);
  std::vector<float> gamma = th::make(d == Dist::Bits ? Dist::Bits : Dist::Uniform, C, salt + 1);
  std::vector<float> beta = th::make(Dist::Uniform, C, salt + 2);
  const std::string w = "(" + std::to_string(R) + ", " + std::to_string(C) + ") " +
                        th::dist_name(d) + " eps " + std::to_string(eps) + " ";
  run_multi(w + "layer_norm_fwd", [&](tlrt_device dev, std::vector<Buf> &o) {
    Buf bx(th::upload(x, dev)), bg(th::upload(gamma, dev)), bb(th::upload(beta, dev));
    o.resize(3);
    return tlrt_layer_norm_fwd(bx.get(), bg.get(), bb.get(), R, C, eps, o[0].out(), o[1].out(),
                               o[2].out());
  });
  // The CPU forward's statistics feed the backward on both devices.
  std::vector<float> mean, is;
  {
    Buf bx(th::upload(x)), bg(th::upload(gamma)), bb(th::upload(beta)), y, m, s;
    TH_OK(tlrt_layer_norm_fwd(bx.get(), bg.get(), bb.get(), R, C, eps, y.out(), m.out(), s.out()));
    mean = th::download(m.get());
    is = th::download(s.get());
  }
  const std::vector<float> dy = th::make(d == Dist::Bits ? Dist::Bits : Dist::Uniform, n, salt + 3);
  const auto bwd = [&](const std::vector<float> &m, const std::vector<float> &s) {
    return [&, m, s](tlrt_device dev, std::vector<Buf> &o) {
      Buf bdy(th::upload(dy, dev)), bx(th::upload(x, dev)), bm(th::upload(m, dev)),
          bs(th::upload(s, dev)), bg(th::upload(gamma, dev));
      o.resize(3);
      return tlrt_layer_norm_bwd(bdy.get(), bx.get(), bm.get(), bs.get(), bg.get(), R, C,
                                 o[0].out(), o[1].out(), o[2].out());
    };
  };
  run_multi(w + "layer_norm_bwd", bwd(mean, is));
  if (n <= (uint64_t{1} << 20))
    run_multi(w + "layer_norm_bwd (arbitrary statistics)",
              bwd(th::make(d, R, salt + 4), th::make(Dist::Positive, R, salt + 5)));
}

void all_shapes() {
  const uint64_t cols[] = {1,   2,   3,    7,    16,   31,   32,   33,   100,  255,  256,  257,
                           512, 513, 1000, 1024, 1025, 2048, 2049, 4096, 4097, 8192, 8193, 12289};
  const uint64_t rows[] = {1, 3, 100, 257};
  uint64_t salt = 1;
  for (uint64_t c : cols)
    for (uint64_t r : rows) {
      if (r * c > max_n() || r * c > (uint64_t{1} << 21)) continue;
      for (Dist d : {Dist::Uniform, Dist::Wide, Dist::Bits, Dist::Edge, Dist::Positive}) {
        ++salt;
        one_shape(r, c, d, (salt % 3 == 0) ? 0.0 : (salt % 3 == 1) ? 1e-5 : 1e-6, salt);
      }
    }
  // The column tree's lane and chunk boundaries.
  struct Shape {
    uint64_t rows, cols;
  };
  for (Shape s : {Shape{255, 40}, Shape{256, 40}, Shape{4095, 9}, Shape{4096, 33}, Shape{4097, 5},
                  Shape{8193, 70}, Shape{20000, 3}, Shape{20000, 300}, Shape{5000, 1025},
                  Shape{70000, 1}, Shape{3000, 5000},
                  // the fused backward's blocks own G lanes of a chunk (16 G rows: 128, 64, 32,
                  // 16 rows for 8, 4, 2, 1 groups; a whole chunk at cols <= 32): rows around them
                  Shape{4096 + 127, 32}, Shape{8192 + 129, 33}, Shape{4096 + 63, 1024},
                  Shape{4096 + 65, 513}, Shape{4096 + 33, 2048}, Shape{4096 + 17, 2049},
                  Shape{4096 + 15, 4096}, Shape{12289, 8}, Shape{4351, 64},
                  // one block per row (forward > 8192 columns, dx > 4096) up to 2^20 columns,
                  // chunk passes beyond; more rows than the grid
                  Shape{600, 8193}, Shape{700, 4097}, Shape{3, 20481}, Shape{2, 1u << 20},
                  Shape{2, (1u << 20) + 1}, Shape{1, (1u << 20) - 1},
                  // the short-row forward's segments: a block step takes 4 * 256 / W rows
                  Shape{129, 8}, Shape{4097, 2}, Shape{513, 16}, Shape{1025, 1}, Shape{131, 27}}) {
    if (s.rows * s.cols > max_n()) continue;
    for (Dist d : {Dist::Uniform, Dist::Edge, Dist::Positive})
      one_shape(s.rows, s.cols, d, 1e-5, ++salt);
  }
  // The row-in-registers forward (split_fwd, 8192 < cols <= 65536; a cluster above 16384): each
  // chunk count, full and partial rows, primes.
  for (Shape s : {Shape{3, 16384}, Shape{2, 16385}, Shape{3, 32768}, Shape{2, 32769},
                  Shape{2, 40961}, Shape{2, 65521}, Shape{3, 65535}, Shape{2, 65537},
                  Shape{700, 16384}, Shape{300, 65536}, Shape{9, 10007}}) {
    if (s.rows * s.cols > max_n()) continue;
    for (Dist d : {Dist::Uniform, Dist::Wide, Dist::Bits, Dist::Edge})
      one_shape(s.rows, s.cols, d, 1e-5, ++salt);
  }
  // Backward: the fused kernel where its nc * S blocks fill the device (rows of many chunks), the
  // split form (group_dx + lane_fold) below that; both across the crossing of 132 SMs.
  for (Shape s : {Shape{36864 + 7, 100}, Shape{36864 + 4095, 500}, Shape{20480 + 9, 1000},
                  Shape{8192, 384}, Shape{4096, 384}, Shape{8192, 768}, Shape{16384, 768}}) {
    if (s.rows * s.cols > max_n()) continue;
    one_shape(s.rows, s.cols, Dist::Uniform, 1e-5, ++salt);
  }
  for (Shape s : {Shape{65536, 1024}, Shape{16384, 4096}, Shape{1024, 65536}, Shape{4096, 16384},
                  Shape{uint64_t{1} << 26, 1}, Shape{1, uint64_t{1} << 26}}) {
    if (s.rows * s.cols > max_n()) continue;
    one_shape(s.rows, s.cols, Dist::Uniform, 1e-5, ++salt);
  }
}

}  // namespace

int main() {
  if (!start("parity_layer_norm")) return 77;
  all_shapes();
  print_summary("parity_layer_norm");
  return th::finish("test_parity_layer_norm");
}
