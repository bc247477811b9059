// Finite differences of the fused cross-entropy (abi/tlrt_softmax.h): the gradient of
// tlrt_cross_entropy_bwd (grad_loss g) against central differences, in float64, of the loss
// f(x) = g * mean over counted rows of -log_softmax(x)[r, label[r]] (faulted rows contributing 0,
// ignored rows left out of the mean) at every logit, on the CPU and CUDA(0) where usable. Shapes
// (rows, classes): (6, 7), (5, 1), (4, 300), (3, 5000) (the coordinates of 3 rows sampled there);
// labels valid, ignored (ignore_index -100 and 0), faulted (-1, classes). The step is the
// difference of the actual float32 perturbed values; tolerance 1e-5 absolute + 1e-3 relative
// (the float64 quotient's truncation error at h = 1e-3 on logits of magnitude <= 2).
#include <cmath>
#include <string>
#include <vector>

#include "harness.hpp"
#include "index_buffers.hpp"

namespace {

using th::Buf;

std::vector<tlrt_device> devices() {
  std::vector<tlrt_device> d = {TLRT_DEVICE_CPU};
  if (th::cuda_ready()) d.push_back(TLRT_DEVICE_CUDA(0));
  return d;
}

void check(tlrt_device dev, uint64_t rows, uint64_t classes, const std::vector<int64_t> &lab,
           int ignore, float g, uint64_t salt) {
  th::Rng rng(salt);
  const std::vector<float> x = rng.vec(rows * classes, -2.0f, 2.0f);
  const std::string w = std::string(dev == TLRT_DEVICE_CPU ? "cpu" : "cuda") + " (" +
                        std::to_string(rows) + ", " + std::to_string(classes) + ") ignore " +
                        std::to_string(ignore);
  Buf X(th::upload(x, dev)), L = th::index_buffer(dev, lab, false), G(th::upload({g}, dev));
  Buf loss, lse, dx;
  TH_OK(tlrt_cross_entropy_fwd(X.get(), L.get(), rows, classes, ignore, loss.out(), lse.out()));
  TH_OK(tlrt_cross_entropy_bwd(X.get(), L.get(), lse.get(), G.get(), rows, classes, ignore,
                               dx.out()));
  th::index_faults(dev, true);
  const std::vector<float> d = th::download(dx.get());
  if (d.size() != rows * classes) return;
  auto ignored = [&](int64_t l) { return ignore != TLRT_CROSS_ENTROPY_NO_IGNORE && l == ignore; };
  auto f64 = [&](const std::vector<float> &v) {
    double s = 0;
    uint64_t n = 0;
    for (uint64_t r = 0; r < rows; ++r) {
      if (ignored(lab[r])) continue;
      ++n;
      if (lab[r] < 0 || (uint64_t)lab[r] >= classes) continue;
      double mx = -INFINITY, se = 0;
      for (uint64_t j = 0; j < classes; ++j) mx = std::max(mx, (double)v[r * classes + j]);
      for (uint64_t j = 0; j < classes; ++j) se += std::exp(v[r * classes + j] - mx);
      s += v[r * classes + (uint64_t)lab[r]] - mx - std::log(se);
    }
    return -(double)g * s / (double)n;
  };
  const uint64_t stride = classes > 1000 ? 97 : 1;
  for (uint64_t i = 0; i < rows * classes; i += stride) {
    std::vector<float> a = x, b = x;
    a[i] += 1e-3f;
    b[i] -= 1e-3f;
    const double fd = (f64(a) - f64(b)) / ((double)a[i] - (double)b[i]);
    TH_CHECK_MSG(std::fabs(fd - d[i]) <= 1e-5 + 1e-3 * std::fabs(fd),
                 "%s: dx[%llu] = %.9g, finite difference %.9g", w.c_str(), (unsigned long long)i,
                 (double)d[i], fd);
  }
}

}  // namespace

int main() {
  uint64_t salt = 1;
  for (tlrt_device dev : devices()) {
    check(dev, 6, 7, {3, -100, 0, 6, 9, -1}, -100, 1.0f, ++salt);
    check(dev, 6, 7, {3, -100, 0, 6, 9, -1}, 0, 2.5f, ++salt);
    check(dev, 6, 7, {3, 1, 0, 6, 2, 5}, TLRT_CROSS_ENTROPY_NO_IGNORE, -0.5f, ++salt);
    check(dev, 5, 1, {0, 0, -100, 0, 1}, -100, 1.0f, ++salt);
    check(dev, 4, 300, {299, -100, 7, 0}, -100, 1.0f, ++salt);
    check(dev, 3, 5000, {4999, 17, -100}, -100, 1.0f, ++salt);
  }
  return th::finish("test_grad_cross_entropy");
}
