// The warp-level TF32 primitives of cuda/common/mma_tf32.cuh (fragment layouts, the big / small split,
// the one- and three-product forms, a C fragment reused as an A operand through the permuted
// contraction index) run on the CPU emulator of tests/emu/cuda_emu.hpp against float64 products.
// Seeded random tiles (the seed is printed on failure); bounds: one TF32 product 2^-10 of
// sum |a b| per element (two roundings to 10 bits, 2^-11 each), three products 2^-20. Skipped
// (77) under valgrind, ASan and TSan, as the other emulation tests.
#include <cmath>
#include <cstdio>
#include <vector>

#include "../emu/emu_check.hpp"
#define TLRT_CUDA_EMULATION 1
#include "cuda/common/mma_tf32.cuh"
#include "../mma_tiles.cuh"

namespace {

// got against X Y (rows x 8 times 8 x 8) in float64, each element within bound * sum |x y|.
void check(const char *what, const std::vector<float> &got, const std::vector<double> &X,
           const std::vector<double> &Y, double bound, double &worst) {
  for (int r = 0; r < 16; ++r)
    for (int c = 0; c < 8; ++c) {
      double s = 0, m = 0;
      for (int k = 0; k < 8; ++k) {
        s += X[r * 8 + k] * Y[k * 8 + c];
        m += std::fabs(X[r * 8 + k] * Y[k * 8 + c]);
      }
      const double err = std::fabs(got[r * 8 + c] - s), lim = bound * m + 1e-37;
      worst = std::max(worst, err / lim);
      TH_CHECK_MSG(err <= lim, "%s [%d][%d]: %.9g, expected %.9g (error %.3g, bound %.3g)", what,
                   r, c, got[r * 8 + c], s, err, lim);
    }
}

template <bool SPLIT>
void run_case(th::Rng &rng, double &worst) {
  std::vector<float> A(128), B(64), B2(64), D(128), E(128);
  for (auto &v : A) v = rng.uniform(-2.0f, 2.0f);
  for (auto &v : B) v = rng.uniform(-2.0f, 2.0f);
  for (auto &v : B2) v = rng.uniform(-2.0f, 2.0f);
  A[5] = 0.0f;        // an exact zero and a value with a long mantissa
  B[9] = 1.0f / 3.0f;
  emu::launch(emu::Policy{}, dim3(1), dim3(32), 0,
              [&] { mma_tiles::tiles<SPLIT>(A.data(), B.data(), B2.data(), D.data(), E.data()); });
  const double bound = SPLIT ? 0x1p-20 : 0x1p-10;
  std::vector<double> Ad(A.begin(), A.end()), Bd(B.begin(), B.end()), B2d(B2.begin(), B2.end());
  check(SPLIT ? "split D = A B" : "tf32 D = A B", D, Ad, Bd, bound, worst);
  // E against D (as computed) times B2: checks the permuted C -> A reuse, not D's own error.
  std::vector<double> Dd(D.begin(), D.end());
  check(SPLIT ? "split E = D B2" : "tf32 E = D B2", E, Dd, B2d, bound, worst);
}

}  // namespace

int main() {
#ifdef TLRT_EMU_SANITIZED
  std::printf("test_mma_emu: skipped under ASan / TSan (unannotated stack switches)\n");
  return 77;
#endif
  if (th::under_valgrind()) {
    std::printf("test_mma_emu: skipped under valgrind (the emulator's fiber stacks)\n");
    return 77;
  }
  th::Rng rng(th::seed());
  double worst[2] = {0, 0};
  for (int i = 0; i < 20; ++i) {
    run_case<true>(rng, worst[0]);
    run_case<false>(rng, worst[1]);
  }
  // The one-product form must show errors the split bound (2^-20) would reject, here above
  // 2^-16 = 1/64 of its own bound: else this test could not tell the two forms apart.
  TH_CHECK_MSG(worst[1] > 1.0 / 64, "one product's worst error / bound %.3g: no worse than split",
               worst[1]);
  std::printf("mma_emu: worst error / bound: split %.3g, tf32 %.3g\n", worst[0], worst[1]);
  return th::finish("mma_emu");
}
