// Suite 'parity': every entry point of abi/tlrt_reduce.h on TLRT_DEVICE_CPU and
// TLRT_DEVICE_CUDA(0) with the same seeded inputs; the results must agree BIT FOR BIT (th::same_bits:
// any NaN equals any NaN, payloads being unspecified). The header's numeric class "ordered
// reduction" promises exactly that: both backends evaluate the one documented tree (the unit test
// checks the CPU against an independent implementation of it, so CPU == CUDA here means CUDA ==
// the tree).
//
// Inputs: seeded uniform values in [-1, 1], wide-exponent values (random signs and exponents
// 2^-30..2^30, where any change of order changes bits), random bit patterns (NaN, inf, subnormals)
// and ordinary values sprinkled with th::edge_values(). Sizes: whole-buffer 0, 1, 2, 3, 5, 31, 32,
// 33, 63, 64, 255, 256, 257, 4095, 4096, 4097, 8191, 8193, 65535, 65537, 131071, 131073, 1000003,
// 2^24, 2^24 + 3, 2^24 + 4, 3 * 2^23 + 12 and 2^26; (rows, cols) for every pair of {0, 1, 2, 3,
// 31, 32, 33, 255, 256, 257} plus chunk/tile boundaries, the large (65536, 1024) and
// (1024, 65536), and (3, 2^24 + 4); reduce_sum_axis on
// ranks 1..8 and every axis; reduce_from_broadcast on the unit test's patterns plus large ones.
// Upstream's 1e8-plus-4095-ones case is checked on the GPU against its exact value 100004080.
// Every CUDA result is also recomputed with the determinism switch flipped and must not change.
// TLRT_PARITY_MAX_N=<n> caps the input sizes (for slow runs such as compute-sanitizer).
//
// Exits 77 (skipped) unless a CUDA device is usable. Prints one line per failing run and a summary.
// Built with -DTLRT_PARITY_SELFTEST both sides run on the CPU (checks this test's own logic).
#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "parity.hpp"

namespace {

using namespace parity;
using th::Buf;
using th::Dist;
using th::dist_name;
using th::hex;
using th::make;

struct Input {
  Buf cpu, gpu;
};
Input upload_both(const std::vector<float> &x) {
  return Input{Buf(th::upload(x, kCpu)), Buf(th::upload(x, kGpu))};
}

std::string shape_str(const std::vector<uint64_t> &d) {
  std::string s = "(";
  for (size_t i = 0; i < d.size(); ++i) s += (i ? "," : "") + std::to_string(d[i]);
  return s + ")";
}

// ---- the entry points --------------------------------------------------------------------------

void whole_parity() {
  const uint64_t sizes[] = {0,     1,     2,      3,      5,      31,      32,       33,
                            63,    64,    255,    256,    257,    4095,    4096,     4097,
                            8191,  8193,  65535,  65537,  131071, 131073,  1000003,
                            uint64_t{1} << 24, (uint64_t{1} << 24) + 3,
                            // float4-aligned lengths past 2^24: the one-launch two-level tree
                            // (a last group of 1 chunk, of 2049 chunks; 4 full groups)
                            (uint64_t{1} << 24) + 4, 3 * (uint64_t{1} << 23) + 12,
                            uint64_t{1} << 26};
  uint64_t salt = 1;
  for (uint64_t n : sizes) {
    if (n > max_n()) continue;
    for (Dist d : {Dist::Uniform, Dist::Wide, Dist::Bits, Dist::Edge}) {
      if (n > (uint64_t{1} << 24) + 3 && d != Dist::Wide) continue;
      const std::vector<float> x = make(d, n, ++salt);
      Input in = upload_both(x);
      const std::string w = "n=" + std::to_string(n) + " " + dist_name(d) + " ";
      run(w + "sum", in.cpu.get(), in.gpu.get(), tlrt_reduce_sum);
      run(w + "mean", in.cpu.get(), in.gpu.get(), tlrt_reduce_mean);
      run(w + "max_axis1(1, n)", in.cpu.get(), in.gpu.get(),
          [n](const tlrt_buffer *b, tlrt_buffer **o) { return tlrt_reduce_max_axis1(b, 1, n, o); });
      run(w + "max_axis0(n, 1)", in.cpu.get(), in.gpu.get(),
          [n](const tlrt_buffer *b, tlrt_buffer **o) { return tlrt_reduce_max_axis0(b, n, 1, o); });
      run(w + "sum_axis0(n, 1)", in.cpu.get(), in.gpu.get(),
          [n](const tlrt_buffer *b, tlrt_buffer **o) { return tlrt_reduce_sum_axis0(b, n, 1, o); });
    }
  }
  // Upstream's large-magnitude case: the exact value of the tree, on the GPU.
  std::vector<float> v(4096, 1.0f);
  v[0] = 1e8f;
  Input in = upload_both(v);
  for (int rep = 0; rep < 3; ++rep) {
    Buf y;
    TH_OK(tlrt_reduce_sum(in.gpu.get(), y.out()));
    const std::vector<float> r = th::download(y.get());
    TH_CHECK_MSG(r.size() == 1 && th::same_bits(r[0], 100004080.0f),
                 "1e8 + 4095 ones on CUDA: %s, expected 100004080", r.empty() ? "-" : hex(r[0]).c_str());
  }
  run("1e8 + 4095 ones sum", in.cpu.get(), in.gpu.get(), tlrt_reduce_sum);
}

void matrix_parity() {
  struct Shape {
    uint64_t rows, cols;
  };
  std::vector<Shape> shapes;
  const uint64_t dims[] = {0, 1, 2, 3, 31, 32, 33, 255, 256, 257};
  for (uint64_t r : dims)
    for (uint64_t c : dims) shapes.push_back({r, c});
  for (Shape s : {Shape{4095, 7}, Shape{4097, 33}, Shape{33, 4097}, Shape{8193, 129},
                  Shape{129, 8193}, Shape{uint64_t{1} << 20, 3}, Shape{3, uint64_t{1} << 20},
                  Shape{100000, 31}, Shape{31, 100000}, Shape{5000, 64}, Shape{64, 5000},
                  Shape{(uint64_t{1} << 24) + 3, 1}, Shape{4096 * 33 + 5, 40},
                  Shape{2000, 40}, Shape{300, 1030}, Shape{4500, 17}, Shape{1500, 20},
                  Shape{65536, 1024}, Shape{1024, 65536},
                  Shape{3, (uint64_t{1} << 24) + 4}})  // rows over 2^24: two-level, 3 sequences
    shapes.push_back(s);
  uint64_t salt = 100;
  for (const Shape &s : shapes) {
    const uint64_t n = s.rows * s.cols;
    if (n > max_n()) continue;
    const bool large = n > (uint64_t{1} << 22);
    for (Dist d : {Dist::Wide, Dist::Edge, Dist::Bits}) {
      if (large && d != Dist::Wide) continue;
      const std::vector<float> x = make(d, n, ++salt);
      Input in = upload_both(x);
      const uint64_t R = s.rows, C = s.cols;
      const std::string w = "(" + std::to_string(R) + ", " + std::to_string(C) + ") " +
                            dist_name(d) + " ";
      run(w + "sum_axis0", in.cpu.get(), in.gpu.get(),
          [=](const tlrt_buffer *b, tlrt_buffer **o) { return tlrt_reduce_sum_axis0(b, R, C, o); });
      run(w + "sum_axis1", in.cpu.get(), in.gpu.get(),
          [=](const tlrt_buffer *b, tlrt_buffer **o) { return tlrt_reduce_sum_axis1(b, R, C, o); });
      run(w + "max_axis0", in.cpu.get(), in.gpu.get(),
          [=](const tlrt_buffer *b, tlrt_buffer **o) { return tlrt_reduce_max_axis0(b, R, C, o); });
      run(w + "max_axis1", in.cpu.get(), in.gpu.get(),
          [=](const tlrt_buffer *b, tlrt_buffer **o) { return tlrt_reduce_max_axis1(b, R, C, o); });
    }
  }
}

void sum_axis_parity() {
  th::Rng rng(4242);
  std::vector<std::vector<uint64_t>> shapes = {
      {7}, {0}, {1}, {4097}, {3, 4}, {0, 3}, {3, 0}, {2, 3, 4}, {3, 5000, 2}, {2, 4097, 3},
      {64, 4097, 33}, {3, 70000, 5}, {7, 1, 9000, 1, 3}, {2, 2, 2, 2, 2, 2, 2, 4097},
      {1, 2, 1, 3}, {5, 1, 40, 1}, {2, 0, 3, 1, 2, 1, 1, 2}, {1000, 40, 33}, {33, 40, 1000},
      {16, 65536, 16}};
  const uint64_t pick[] = {1, 1, 2, 3, 5, 7, 33, 100};
  for (int rank = 1; rank <= 8; ++rank)
    for (int rep = 0; rep < 4; ++rep) {
      std::vector<uint64_t> d(rank);
      uint64_t n = 1;
      for (auto &v : d) {
        v = pick[rng.gen() % 8];
        if (n * v > 2000000) v = 1;
        n *= v;
      }
      shapes.push_back(d);
    }
  uint64_t salt = 300;
  for (const auto &d : shapes) {
    uint64_t n = 1;
    for (uint64_t v : d) n *= v;
    if (n > max_n()) continue;
    const std::vector<float> x = make(Dist::Wide, n, ++salt);
    Input in = upload_both(x);
    for (uint32_t axis = 0; axis < d.size(); ++axis) {
      const std::string w = "sum_axis " + shape_str(d) + " axis " + std::to_string(axis);
      run(w, in.cpu.get(), in.gpu.get(), [&d, axis](const tlrt_buffer *b, tlrt_buffer **o) {
        return tlrt_reduce_sum_axis(b, d.data(), (uint32_t)d.size(), axis, o);
      });
    }
  }
}

void broadcast_parity() {
  struct Bcast {
    std::vector<uint64_t> in, out;
    std::vector<uint32_t> map;
  };
  const std::vector<Bcast> cases = {
      {{}, {7}, {0}},
      {{}, {3, 4}, {0, 0}},
      {{}, {(uint64_t{1} << 24) + 3}, {0}},
      {{1}, {5000}, {1}},
      {{1, 1}, {3, 4}, {1, 2}},
      {{7}, {5000, 7}, {0, 1}},
      {{1024}, {65536, 1024}, {0, 1}},
      {{65536, 1}, {65536, 1024}, {1, 2}},
      {{1, 65536}, {1024, 65536}, {1, 2}},
      {{5}, {5, 4100}, {1, 0}},
      {{4, 1}, {4, 5000}, {1, 2}},
      {{3}, {2, 3, 4}, {0, 1, 0}},
      {{3}, {2, 3, 4100}, {0, 1, 0}},
      {{3}, {2000, 3, 3000}, {0, 1, 0}},
      {{2, 1, 4}, {2, 5, 4}, {1, 2, 3}},
      {{2, 1, 4}, {2, 70000, 4}, {1, 2, 3}},
      {{2, 4}, {2, 50, 4}, {1, 0, 2}},
      {{3}, {1, 3, 1}, {0, 1, 0}},
      {{3, 4}, {3, 4}, {1, 2}},
      {{1, 3, 1, 4}, {3, 4}, {2, 4}},
      {{2, 3}, {3, 2}, {2, 1}},
      {{2, 3}, {3, 5, 2}, {2, 0, 1}},
      {{40, 30}, {30, 5000, 40}, {2, 0, 1}},
      {{2}, {3000, 2, 3}, {0, 1, 0}},
      {{2, 1, 3, 1, 2, 1, 1, 2}, {2, 3, 3, 2, 2, 1, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8}},
      {{1, 3}, {0, 3}, {1, 2}},
      {{2, 2}, {2, 3, 2}, {1, 0, 2}},
  };
  uint64_t salt = 700;
  for (const Bcast &c : cases) {
    uint64_t n = 1;
    for (uint64_t v : c.out) n *= v;
    if (n > max_n()) continue;
    const std::string w = "from_broadcast in " + shape_str(c.in) + " out " + shape_str(c.out);
    for (Dist d : {Dist::Wide, Dist::Edge}) {
      if (n > (uint64_t{1} << 22) && d != Dist::Wide) continue;
      const std::vector<float> x = make(d, n, ++salt);
      Input in = upload_both(x);
      run(w + " " + dist_name(d), in.cpu.get(), in.gpu.get(),
          [&c](const tlrt_buffer *b, tlrt_buffer **o) {
            return tlrt_reduce_from_broadcast(b, c.in.empty() ? nullptr : c.in.data(),
                                              (uint32_t)c.in.size(), c.out.data(),
                                              (uint32_t)c.out.size(), c.map.data(), o);
          });
    }
  }
}

}  // namespace

int main() {
  if (!start("parity_reduce")) return 77;
  whole_parity();
  matrix_parity();
  sum_axis_parity();
  broadcast_parity();
  print_summary("parity_reduce");
  return th::finish("test_parity_reduce");
}
