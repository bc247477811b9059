// Suite 'parity': the pooling family (abi/tlrt_pool.h) on TLRT_DEVICE_CPU and TLRT_DEVICE_CUDA(0)
// with the same seeded inputs: max, average (both padding modes) and smooth max pooling, forward
// and backward, through the N-D and the 2-D names. Every output must agree BIT FOR BIT
// (th::same_bits: any NaN equals any NaN): max pool forward is exact (a selection), the rest is
// "ordered reduction" / "shared math + ordered reduction" with one documented order that both
// backends evaluate with the same code (core/numerics/pool_ops.hpp); the CUDA backward gathers
// per input cell in the order the CPU scatters. Every CUDA result is recomputed with the
// determinism switch flipped and must not change (no atomics on any path).
//
// Geometries: random ranks 1 .. 8 (kernel up to 5, stride up to 3, padding up to kernel / 2,
// overlapping and disjoint windows, outputs of extent 0), the CUDA rank instantiations (1, 2, 3,
// any), the 64-bit index path (a stride of 2^31 on small tensors), the benchmark shapes
// (N, 64, 112, 112) k3 s2 p1 and k2 s2 and (N, 256, 56, 56) k3 s1 p1, a 1-D row of 2^22, and
// the fast kernels' cases (every compiled configuration, float4 and scalar rows, edges; max k3 s1
// p1 on both of its kernels: band_kernel with one and several bands per plane, sep_kernel on the
// planes band_takes declines: small planes and rows of more than 512 columns).
// Inputs: every th::Dist (uniform, wide exponents, bit patterns with NaN / inf / subnormals, edge
// values, positive); dy uniform (bit patterns for the bits case); beta in {1, -1, 7.5, -0.25}.
// TLRT_PARITY_MAX_N=<n> caps the input sizes. Exits 77 (skipped) unless a CUDA device is usable;
// built with -DTLRT_PARITY_SELFTEST both sides run on the CPU.
#include <string>
#include <vector>

#include "parity.hpp"

namespace {

using namespace parity;
using th::Buf;
using th::Dist;

struct Geo {
  uint64_t N = 1, C = 1;
  std::vector<uint64_t> in, k, s, p;
  uint32_t rank() const { return (uint32_t)in.size(); }
  uint64_t in_elems() const {
    uint64_t n = N * C;
    for (uint64_t v : in) n *= v;
    return n;
  }
  uint64_t out_elems() const {
    uint64_t n = N * C;
    for (size_t d = 0; d < in.size(); ++d)
      n *= in[d] + 2 * p[d] >= k[d] ? (in[d] + 2 * p[d] - k[d]) / s[d] + 1 : 0;
    return n;
  }
  std::string str() const {
    std::string t = "(" + std::to_string(N) + ", " + std::to_string(C);
    for (auto v : in) t += ", " + std::to_string(v);
    t += ") k";
    for (auto v : k) t += " " + std::to_string(v);
    t += " s";
    for (auto v : s) t += " " + std::to_string(v);
    t += " p";
    for (auto v : p) t += " " + std::to_string(v);
    return t;
  }
};

void one(const Geo &g, Dist d, uint64_t salt) {
  const std::vector<float> x = th::make(d, g.in_elems(), salt);
  const std::vector<float> dy =
      th::make(d == Dist::Bits ? Dist::Bits : Dist::Uniform, g.out_elems(), salt + 1);
  const std::string w = g.str() + " " + th::dist_name(d) + " ";
  const uint64_t *in = g.in.data(), *k = g.k.data(), *s = g.s.data(), *p = g.p.data();
  const uint32_t R = g.rank();
  const bool two = R == 2;
  run_multi(w + "maxpool_fwd", [&](tlrt_device dev, std::vector<Buf> &o) {
    Buf bx(th::upload(x, dev));
    o.resize(1);
    return two ? tlrt_maxpool2d_fwd(bx.get(), g.N, g.C, in[0], in[1], k[0], k[1], s[0], s[1],
                                    p[0], p[1], o[0].out())
               : tlrt_maxpool_fwd(bx.get(), g.N, g.C, in, R, k, s, p, o[0].out());
  });
  run_multi(w + "maxpool_bwd", [&](tlrt_device dev, std::vector<Buf> &o) {
    Buf bx(th::upload(x, dev)), bdy(th::upload(dy, dev));
    o.resize(1);
    return tlrt_maxpool_bwd(bx.get(), bdy.get(), g.N, g.C, in, R, k, s, p, o[0].out());
  });
  for (bool pad : {true, false}) {
    const std::string pw = pad ? "" : " (no pad)";
    run_multi(w + "avgpool_fwd" + pw, [&](tlrt_device dev, std::vector<Buf> &o) {
      Buf bx(th::upload(x, dev));
      o.resize(1);
      return tlrt_avgpool_fwd(bx.get(), g.N, g.C, in, R, k, s, p, pad, o[0].out());
    });
    run_multi(w + "avgpool_bwd" + pw, [&](tlrt_device dev, std::vector<Buf> &o) {
      Buf bdy(th::upload(dy, dev));
      o.resize(1);
      return two ? tlrt_avgpool2d_bwd(bdy.get(), g.N, g.C, in[0], in[1], k[0], k[1], s[0], s[1],
                                      p[0], p[1], pad, o[0].out())
                 : tlrt_avgpool_bwd(bdy.get(), g.N, g.C, in, R, k, s, p, pad, o[0].out());
    });
  }
  const double betas[] = {1.0, -1.0, 7.5, -0.25};
  const double beta = betas[salt % 4];
  run_multi(w + "smooth_maxpool_fwd beta " + std::to_string(beta),
            [&](tlrt_device dev, std::vector<Buf> &o) {
              Buf bx(th::upload(x, dev));
              o.resize(1);
              return tlrt_smooth_maxpool_fwd(bx.get(), g.N, g.C, in, R, k, s, p, beta, o[0].out());
            });
  run_multi(w + "smooth_maxpool_bwd beta " + std::to_string(beta),
            [&](tlrt_device dev, std::vector<Buf> &o) {
              Buf bx(th::upload(x, dev)), bdy(th::upload(dy, dev));
              o.resize(1);
              return two ? tlrt_smooth_maxpool2d_bwd(bx.get(), bdy.get(), g.N, g.C, in[0], in[1],
                                                     k[0], k[1], s[0], s[1], p[0], p[1], beta,
                                                     o[0].out())
                         : tlrt_smooth_maxpool_bwd(bx.get(), bdy.get(), g.N, g.C, in, R, k, s, p,
                                                   beta, o[0].out());
            });
}

Geo random_geo(th::Rng &rng, uint32_t R) {
  Geo g;
  g.N = 1 + rng.gen() % 3;
  g.C = 1 + rng.gen() % 4;
  for (uint32_t d = 0; d < R; ++d) {
    const uint64_t k = 1 + rng.gen() % (R <= 3 ? 5 : 3);
    g.in.push_back(1 + rng.gen() % (R <= 2 ? 40 : R <= 3 ? 12 : 4));
    g.k.push_back(k);
    g.s.push_back(1 + rng.gen() % 3);
    g.p.push_back(rng.gen() % (k / 2 + 1));
  }
  return g;
}

void all() {
  th::Rng rng(31);
  uint64_t salt = 1;
  for (uint32_t R = 1; R <= 8; ++R)
    for (int t = 0; t < (R <= 3 ? 12 : 4); ++t) {
      const Geo g = random_geo(rng, R);
      if (g.in_elems() > max_n()) continue;
      for (Dist d : {Dist::Uniform, Dist::Wide, Dist::Bits, Dist::Edge, Dist::Positive})
        one(g, d, salt += 3);
    }
  const uint64_t big = uint64_t{1} << 31;
  for (const Geo &g : {
           Geo{2, 3, {5, 7}, {3, 3}, {2, big}, {1, 1}},        // 64-bit indices (stride 2^31)
           Geo{1, 2, {9}, {3}, {big}, {1}},
           Geo{1, 2, {4, 5, 6}, {2, 3, 3}, {1, big, 2}, {1, 1, 0}},
           Geo{4, 64, {112, 112}, {3, 3}, {2, 2}, {1, 1}},     // the benchmark shapes, N = 4
           Geo{4, 64, {112, 112}, {2, 2}, {2, 2}, {0, 0}},
           Geo{2, 256, {56, 56}, {3, 3}, {1, 1}, {1, 1}},
           Geo{1, 1, {uint64_t{1} << 22}, {4}, {3}, {2}},      // one long row
           Geo{3, 5, {31, 33}, {5, 4}, {3, 2}, {2, 2}},
       }) {
    if (g.in_elems() > max_n()) continue;
    for (Dist d : {Dist::Uniform, Dist::Edge}) one(g, d, salt += 3);
  }
  // The fast kernels (cuda/kernels/pool.cuh; tests/unit/test_pool_kernels.cpp runs the same list
  // through their CPU emulation): every compiled configuration at rank 2 and 3, float4 rows and
  // scalar rows, partial groups, padding, tails and gaps, scatter / tile / several tiles.
  for (const Geo &g : {
           Geo{2, 3, {8, 16}, {2, 2}, {2, 2}, {0, 0}},
           Geo{1, 2, {9, 13}, {2, 2}, {2, 2}, {0, 0}},
           Geo{1, 2, {6, 12}, {2, 2}, {2, 2}, {0, 0}},
           Geo{2, 1, {7, 36}, {2, 2}, {2, 2}, {0, 0}},
           Geo{1, 2, {9, 16}, {2, 2}, {3, 2}, {1, 0}},
           Geo{1, 1, {3, 4}, {2, 2}, {2, 2}, {1, 0}},
           Geo{2, 2, {4, 6, 8}, {2, 2, 2}, {2, 2, 2}, {0, 0, 0}},
           Geo{1, 2, {6, 8, 16}, {2, 2, 2}, {2, 2, 2}, {0, 0, 0}},
           Geo{1, 2, {7, 5, 11}, {2, 2, 2}, {3, 2, 2}, {1, 1, 0}},
           Geo{2, 2, {4, 64}, {2, 2}, {2, 2}, {0, 0}},
           Geo{2, 2, {7, 20}, {2, 2}, {1, 2}, {0, 0}},
           Geo{2, 2, {11, 12}, {3, 3}, {2, 2}, {1, 1}},
           Geo{1, 3, {10, 16}, {3, 3}, {2, 2}, {1, 1}},
           Geo{2, 2, {9, 9}, {3, 3}, {2, 2}, {1, 1}},
           Geo{1, 2, {12, 10}, {3, 3}, {4, 2}, {1, 1}},
           Geo{1, 2, {14, 14}, {3, 3}, {1, 2}, {0, 1}},
           Geo{2, 2, {13, 8}, {3, 3}, {1, 1}, {1, 1}},
           Geo{1, 2, {6, 7}, {3, 3}, {1, 1}, {1, 1}},
           Geo{1, 2, {9, 5}, {3, 3}, {2, 1}, {0, 1}},
           Geo{1, 1, {5, 300}, {3, 3}, {1, 1}, {1, 1}},
           Geo{1, 1, {40, 260}, {3, 3}, {2, 2}, {1, 1}},
           Geo{1, 1, {70, 3}, {3, 3}, {1, 1}, {1, 1}},
           Geo{1, 2, {40, 256}, {3, 3}, {1, 1}, {1, 1}},  // several bands per plane (band_kernel)
           Geo{1, 1, {30, 301}, {3, 3}, {1, 1}, {1, 1}},
           Geo{1, 1, {41, 256}, {3, 3}, {1, 1}, {0, 1}},
           Geo{2, 3, {28, 28}, {3, 3}, {1, 1}, {1, 1}},  // one band per plane
           Geo{1, 1, {9, 600}, {3, 3}, {1, 1}, {1, 1}},  // rows too wide for a band: sep_kernel
           Geo{1, 1, {6, 513}, {3, 3}, {1, 1}, {1, 1}},
           Geo{1, 2, {1, 1}, {3, 3}, {1, 1}, {1, 1}},
           Geo{1, 2, {2, 2}, {2, 2}, {2, 2}, {0, 0}},
           Geo{1, 2, {5, 7, 9}, {3, 3, 3}, {2, 2, 2}, {1, 1, 1}},
           Geo{1, 2, {4, 6, 8}, {2, 3, 3}, {1, 1, 1}, {1, 1, 1}},
           Geo{2, 1, {5, 6, 12}, {2, 2, 2}, {1, 2, 2}, {0, 0, 0}},
           Geo{2, 8, {16, 64, 64}, {2, 2, 2}, {2, 2, 2}, {0, 0, 0}},  // the 3-D benchmark shape
       }) {
    if (g.in_elems() > max_n()) continue;
    for (Dist d : {Dist::Uniform, Dist::Wide, Dist::Bits, Dist::Edge}) one(g, d, salt += 3);
  }
}

}  // namespace

int main() {
  if (!start("parity_pool")) return 77;
  all();
  print_summary("parity_pool");
  return th::finish("test_parity_pool");
}
