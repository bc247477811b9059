// Suite 'parity': every entry point of abi/tlrt_softmax.h on TLRT_DEVICE_CPU and
// TLRT_DEVICE_CUDA(0) with the same seeded inputs; the results must agree BIT FOR BIT
// (th::same_bits: any NaN equals any NaN). The header's numeric class "shared math + ordered
// reduction" promises exactly that: both backends perform the same float32 operations (the shared
// exp / log, IEEE divisions) in the same order with the one documented tree (the unit test checks
// the CPU against an independent implementation, so CPU == CUDA here means CUDA == the
// definitions). Every CUDA result is also recomputed with the determinism switch flipped and must
// not change.
//
// Shapes: every CUDA strategy and its boundaries (cols <= 32 thread per row: 1, 2, 3, 5, 8, 16, 17,
// 31, 32; group per row: 33 .. 8192 across the NT = 32/64/128/256 and one/two-chunk switches;
// long rows: 8193, 12289, 65536), rows that leave groups of a block idle (1, 3, 7, 9, 33), and the
// large (65536, 1024), (16384, 4096), (1024, 65536), (1, 2^26), (2^26, 1). Inputs: uniform in
// [-8, 8], wide exponents, random bit patterns (NaN, inf, subnormals), edge values sprinkled in;
// masks with 25% / 90% blocked entries, NaN mask values, all-blocked rows and rows whose allowed
// scores are all -inf. The backward kernels run on the forward's own output and on arbitrary y.
// TLRT_PARITY_MAX_N=<n> caps the input sizes (compute-sanitizer runs).
//
// Exits 77 (skipped) unless a CUDA device is usable. Built with -DTLRT_PARITY_SELFTEST both sides
// run on the CPU (checks this test's own logic).
#include <cmath>
#include <string>
#include <vector>

#include "parity.hpp"

namespace {

using namespace parity;
using th::Buf;
using th::Dist;

std::vector<float> make_x(Dist d, uint64_t n, uint64_t salt) {
  std::vector<float> x = th::make(d, n, salt);
  if (d == Dist::Uniform)
    for (auto &v : x) v *= 8.0f;
  return x;
}

// Masks: style 0: 25% blocked; 1: 90% blocked; 2: NaN / -0 / negative values; rows 0 and 1 (when
// present) all blocked and allowed-only-at--inf respectively.
std::vector<float> make_mask(uint64_t rows, uint64_t cols, int style, uint64_t salt,
                             std::vector<float> *x) {
  th::Rng rng(salt);
  std::vector<float> m(rows * cols);
  for (auto &v : m) {
    const uint32_t r = (uint32_t)rng.gen();
    switch (style) {
      case 0: v = (r % 4 == 0) ? 0.0f : 1.0f; break;
      case 1: v = (r % 10 == 0) ? 1.0f : 0.0f; break;
      default: v = (r % 5 == 0) ? NAN : (r % 5 == 1) ? -0.0f : (r % 5 == 2) ? 0.0f : -2.5f; break;
    }
  }
  if (rows >= 3) {
    for (uint64_t j = 0; j < cols; ++j) m[j] = 0.0f;
    for (uint64_t j = 0; j < cols; ++j)
      if (m[cols + j] != 0.0f) (*x)[cols + j] = -INFINITY;
  }
  return m;
}

tlrt_status call1(tlrt_device dev, std::vector<Buf> &outs, const std::vector<float> &x,
                  const std::function<tlrt_status(const tlrt_buffer *, tlrt_buffer **)> &f) {
  Buf b(th::upload(x, dev));
  outs.emplace_back();
  return f(b.get(), outs.back().out());
}

tlrt_status call2(
    tlrt_device dev, std::vector<Buf> &outs, const std::vector<float> &a,
    const std::vector<float> &b,
    const std::function<tlrt_status(const tlrt_buffer *, const tlrt_buffer *, tlrt_buffer **)> &f) {
  Buf ba(th::upload(a, dev)), bb(th::upload(b, dev));
  outs.emplace_back();
  return f(ba.get(), bb.get(), outs.back().out());
}

void one_shape(uint64_t R, uint64_t C, Dist d, uint64_t salt) {
  const uint64_t n = R * C;
  std::vector<float> x = make_x(d, n, salt);
  const std::string w =
      "(" + std::to_string(R) + ", " + std::to_string(C) + ") " + th::dist_name(d) + " ";
  run_multi(w + "softmax", [&](tlrt_device dev, std::vector<Buf> &o) {
    return call1(dev, o, x,
                 [&](const tlrt_buffer *b, tlrt_buffer **y) { return tlrt_softmax(b, R, C, y); });
  });
  run_multi(w + "log_softmax", [&](tlrt_device dev, std::vector<Buf> &o) {
    return call1(dev, o, x, [&](const tlrt_buffer *b, tlrt_buffer **y) {
      return tlrt_log_softmax(b, R, C, y);
    });
  });
  for (int style = 0; style < 3; ++style) {
    if (n > (uint64_t{1} << 22) && style != 0) continue;
    std::vector<float> xm = x;
    const std::vector<float> mask = make_mask(R, C, style, salt * 7 + style, &xm);
    run_multi(w + "masked style " + std::to_string(style),
              [&](tlrt_device dev, std::vector<Buf> &o) {
                return call2(dev, o, xm, mask,
                             [&](const tlrt_buffer *a, const tlrt_buffer *m, tlrt_buffer **y) {
                               return tlrt_hard_masked_softmax_by_row(a, m, R, C, y);
                             });
              });
  }
  // Backward on the forward's own (CPU) output, and on arbitrary y.
  const std::vector<float> g = th::make(d == Dist::Bits ? Dist::Bits : Dist::Uniform, n, salt + 1);
  for (bool log : {false, true}) {
    std::vector<float> y;
    {
      Buf bx(th::upload(x)), by;
      TH_OK(log ? tlrt_log_softmax(bx.get(), R, C, by.out())
                : tlrt_softmax(bx.get(), R, C, by.out()));
      y = th::download(by.get());
    }
    const auto bwd = [log, R, C](const tlrt_buffer *a, const tlrt_buffer *b, tlrt_buffer **o) {
      return log ? tlrt_log_softmax_bwd(a, b, R, C, o) : tlrt_softmax_bwd(a, b, R, C, o);
    };
    const std::string name = log ? "log_softmax_bwd" : "softmax_bwd";
    run_multi(w + name,
              [&](tlrt_device dev, std::vector<Buf> &o) { return call2(dev, o, y, g, bwd); });
    if (n <= (uint64_t{1} << 22)) {
      const std::vector<float> ya = th::make(d, n, salt + 2);
      run_multi(w + name + " (arbitrary y)",
                [&](tlrt_device dev, std::vector<Buf> &o) { return call2(dev, o, ya, g, bwd); });
    }
  }
}

void all_shapes() {
  const uint64_t cols[] = {1,    2,    3,    5,    8,    16,   17,   31,   32,   33,    64,
                           100,  255,  256,  257,  511,  512,  513,  1000, 1023, 1024,  1025,
                           2047, 2048, 2049, 4095, 4096, 4097, 8191, 8192, 8193, 12289, 65536};
  const uint64_t rows[] = {1, 3, 7, 9, 33};
  uint64_t salt = 1;
  for (uint64_t c : cols)
    for (uint64_t r : rows) {
      if (r * c > max_n() || r * c > (uint64_t{1} << 20)) continue;
      for (Dist d : {Dist::Uniform, Dist::Wide, Dist::Bits, Dist::Edge}) one_shape(r, c, d, ++salt);
    }
  // More rows for the thread-per-row and small-group strategies.
  struct Shape {
    uint64_t rows, cols;
  };
  for (Shape s : {Shape{1000, 1}, Shape{1000, 7}, Shape{777, 32}, Shape{517, 33}, Shape{300, 200},
                  Shape{129, 700}, Shape{67, 1500}, Shape{45, 3000}, Shape{21, 6000},
                  // the short-row segments: a block step takes 4 * 256 / W rows
                  Shape{129, 8}, Shape{4097, 2}, Shape{513, 16}, Shape{1025, 1}, Shape{131, 27}}) {
    if (s.rows * s.cols > max_n()) continue;
    for (Dist d : {Dist::Uniform, Dist::Edge}) one_shape(s.rows, s.cols, d, ++salt);
  }
  // The one-block-per-row path: odd chunk counts (chunks are folded in pairs), partial last
  // chunks, more rows than the grid (blocks loop over rows), and its upper edge 2^20 columns (the
  // chunk passes beyond).
  for (Shape s : {Shape{3, 12288}, Shape{5, 20481}, Shape{600, 8193}, Shape{300, 4097},
                  Shape{2, uint64_t{1} << 20}, Shape{2, (uint64_t{1} << 20) + 1},
                  Shape{1, (uint64_t{1} << 20) - 1}}) {
    if (s.rows * s.cols > max_n()) continue;
    for (Dist d : {Dist::Uniform, Dist::Edge}) one_shape(s.rows, s.cols, d, ++salt);
  }
  // The row-in-registers forward (split_fwd, 8192 < cols <= 65536: one block of Q * 256 threads,
  // a cluster above 16384 columns): each chunk count, full and partial rows, primes, the chunk
  // passes just past it; more rows than fit at once.
  for (Shape s : {Shape{3, 16384}, Shape{2, 16385}, Shape{3, 32768}, Shape{2, 32769},
                  Shape{2, 40961}, Shape{2, 65521}, Shape{3, 65535}, Shape{2, 65537},
                  Shape{700, 16384}, Shape{300, 65536}, Shape{9, 10007}}) {
    if (s.rows * s.cols > max_n()) continue;
    for (Dist d : {Dist::Uniform, Dist::Wide, Dist::Bits, Dist::Edge})
      one_shape(s.rows, s.cols, d, ++salt);
  }
  // The large shapes of the brief.
  for (Shape s : {Shape{65536, 1024}, Shape{16384, 4096}, Shape{1024, 65536}, Shape{4096, 16384},
                  Shape{1, uint64_t{1} << 26}, Shape{uint64_t{1} << 26, 1}, Shape{1u << 21, 32}}) {
    if (s.rows * s.cols > max_n()) continue;
    one_shape(s.rows, s.cols, Dist::Uniform, ++salt);
  }
}

}  // namespace

int main() {
  if (!start("parity_softmax")) return 77;
  all_shapes();
  print_summary("parity_softmax");
  return th::finish("test_parity_softmax");
}
