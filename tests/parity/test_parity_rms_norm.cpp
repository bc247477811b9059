// Suite 'parity': tlrt_rms_norm_fwd and tlrt_rms_norm_bwd (abi/tlrt_layer_norm.h, "RMS norm") on
// TLRT_DEVICE_CPU and TLRT_DEVICE_CUDA(0) with the same seeded inputs; every output (y, inv_rms;
// dx, dgamma) must agree BIT FOR BIT (th::same_bits: any NaN equals any NaN). The header's numeric
// class "ordered reduction" promises exactly that: both backends perform the same float32
// operations in the same order with the one documented tree, for the row statistic and for the
// column sums over rows (the unit test checks the CPU against an independent implementation, the
// emulation test the CUDA kernels' source on the CPU). Every CUDA result is also recomputed with
// the determinism switch flipped and must not change.
//
// Shapes: cols across every CUDA strategy and its boundaries (segments up to 32 columns, a group
// per row up to 8192, chunk passes beyond), rows across the column tree's lane sets, lanes and
// chunks (1, 3, 7, 9, 100, 255, 256, 257, 4095, 4096, 4097, 8193, 20000), and large (65536, 1024),
// (16384, 4096), (1024, 65536), (2^26, 1), (1, 2^26). gamma given and NULL (then the backward both
// with a dgamma and without). Inputs: x uniform, wide exponents, random bit patterns, edge values,
// rows offset far from zero; gamma uniform (bit patterns for the bits case); eps 0, 1e-5, 1e-6.
// The backward runs on the forward's own inv_rms and on arbitrary ones.
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
  if (d == Dist::Positive)  // rows offset from zero
    for (uint64_t k = 0; k < n; ++k) x[k] += (float)((k / cols) % 7) * 150.0f;
  return x;
}

// gamma_mode: 0 gamma, 1 NULL (backward with dgamma), 2 NULL (backward without dgamma).
void one_shape(uint64_t R, uint64_t C, Dist d, double eps, uint64_t salt, int gamma_mode) {
  const uint64_t n = R * C;
  const std::vector<float> x = make_x(d, n, C, salt);
  const std::vector<float> gamma =
      th::make(d == Dist::Bits ? Dist::Bits : Dist::Uniform, C, salt + 1);
  const bool has_g = gamma_mode == 0;
  const std::string w = "(" + std::to_string(R) + ", " + std::to_string(C) + ") " +
                        th::dist_name(d) + " eps " + std::to_string(eps) +
                        (has_g ? " gamma " : gamma_mode == 1 ? " no gamma " : " no gamma/dgamma ");
  run_multi(w + "rms_norm_fwd", [&](tlrt_device dev, std::vector<Buf> &o) {
    Buf bx(th::upload(x, dev)), bg(has_g ? th::upload(gamma, dev) : nullptr);
    o.resize(2);
    return tlrt_rms_norm_fwd(bx.get(), bg.get(), R, C, eps, o[0].out(), o[1].out());
  });
  // The CPU forward's statistic feeds the backward on both devices.
  std::vector<float> is;
  {
    Buf bx(th::upload(x)), bg(has_g ? th::upload(gamma) : nullptr), y, s;
    TH_OK(tlrt_rms_norm_fwd(bx.get(), bg.get(), R, C, eps, y.out(), s.out()));
    is = th::download(s.get());
  }
  const std::vector<float> dy = th::make(d == Dist::Bits ? Dist::Bits : Dist::Uniform, n, salt + 3);
  const auto bwd = [&](const std::vector<float> &s) {
    return [&, s](tlrt_device dev, std::vector<Buf> &o) {
      Buf bdy(th::upload(dy, dev)), bx(th::upload(x, dev)),
          bg(has_g ? th::upload(gamma, dev) : nullptr), bs(th::upload(s, dev));
      o.resize(gamma_mode == 2 ? 1 : 2);
      return tlrt_rms_norm_bwd(bdy.get(), bx.get(), bg.get(), bs.get(), R, C, o[0].out(),
                               gamma_mode == 2 ? nullptr : o[1].out());
    };
  };
  run_multi(w + "rms_norm_bwd", bwd(is));
  if (n <= (uint64_t{1} << 20))
    run_multi(w + "rms_norm_bwd (arbitrary statistics)",
              bwd(th::make(d == Dist::Bits ? d : Dist::Positive, R, salt + 5)));
}

void all_shapes() {
  const uint64_t cols[] = {1,   2,   3,    7,    16,   31,   32,   33,   100,  255,  256,  257,
                           512, 513, 1000, 1024, 1025, 2048, 2049, 4096, 4097, 8192, 8193, 12289};
  const uint64_t rows[] = {1, 3, 9, 100, 257};
  uint64_t salt = 1;
  for (uint64_t c : cols)
    for (uint64_t r : rows) {
      if (r * c > max_n() || r * c > (uint64_t{1} << 21)) continue;
      for (Dist d : {Dist::Uniform, Dist::Wide, Dist::Bits, Dist::Edge, Dist::Positive}) {
        ++salt;
        one_shape(r, c, d, (salt % 3 == 0) ? 0.0 : (salt % 3 == 1) ? 1e-5 : 1e-6, salt,
                  (int)(salt % 3));
      }
    }
  // The column tree's lane sets, lanes and chunks; more rows than the grids take at once.
  struct Shape {
    uint64_t rows, cols;
  };
  for (Shape s : {Shape{7, 40}, Shape{255, 40}, Shape{256, 40}, Shape{4095, 9}, Shape{4096, 33},
                  Shape{4097, 5}, Shape{8193, 70}, Shape{20000, 3}, Shape{20000, 300},
                  Shape{5000, 1025}, Shape{70000, 1}, Shape{3000, 5000}, Shape{129, 8},
                  Shape{4097, 2}, Shape{513, 16}, Shape{1025, 1}, Shape{131, 27},
                  // chunk passes: one and several chunk partials per row, partial last chunks
                  Shape{600, 8193}, Shape{3, 20481}, Shape{2, 1u << 20}, Shape{2, (1u << 20) + 1},
                  Shape{1, (1u << 20) - 1}}) {
    if (s.rows * s.cols > max_n()) continue;
    for (Dist d : {Dist::Uniform, Dist::Edge, Dist::Positive})
      for (int gm = 0; gm < 3; ++gm) one_shape(s.rows, s.cols, d, 1e-5, ++salt, gm);
  }
  for (Shape s : {Shape{65536, 1024}, Shape{16384, 4096}, Shape{1024, 65536}, Shape{4096, 16384},
                  Shape{uint64_t{1} << 26, 1}, Shape{1, uint64_t{1} << 26}}) {
    if (s.rows * s.cols > max_n()) continue;
    one_shape(s.rows, s.cols, Dist::Uniform, 1e-5, ++salt, 0);
  }
}

}  // namespace

int main() {
  if (!start("parity_rms_norm")) return 77;
  all_shapes();
  print_summary("parity_rms_norm");
  return th::finish("test_parity_rms_norm");
}
