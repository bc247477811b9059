// Parity of the attention entry points (abi/tlrt_attention.h): CPU and CUDA on the same seeded
// inputs, compared bit for bit (the header's claim: both backends perform the same IEEE
// operations in the same order). Shapes cover every CUDA template (d = 32, 64, 128, 256 exact and
// the generic padded path: d = 1, 5, 33, 100, 200), n = 1, odd n, n across the 32/64/128-row
// block edges; masks none / per-problem / broadcast / causal / causal + mask / fully blocked rows,
// both fill conventions; special values (NaN, inf, subnormals) around skipped tiles; the fused
// backward on the CPU forward's out and lse, and the seeds' three single-gradient entry points;
// one n = 16384 problem whose device peak must stay far below n^2.
#include <cmath>
#include <string>
#include <vector>

#include "parity.hpp"

namespace {

using namespace parity;
using th::Buf;

void one(uint64_t bh, uint64_t n, uint64_t d, int mk, double fill, uint64_t salt,
         th::Dist dist = th::Dist::Uniform) {
  const uint64_t N = bh * n * d;
  if (N > max_n()) return;
  const std::vector<float> q = th::make(dist, N, salt + 1), k = th::make(dist, N, salt + 2),
                           v = th::make(dist, N, salt + 3),
                           dout = th::make(th::Dist::Uniform, N, salt + 4);
  std::vector<float> mask;
  const bool causal = mk == 3 || mk == 4;
  if (mk == 1 || mk == 2 || mk == 4 || mk == 5) {
    mask = th::make(th::Dist::Positive, (mk == 2 || mk == 4) ? n * n : bh * n * n, salt + 5);
    for (auto &x : mask) x = x < 0.3f ? 0.0f : 1.0f;
    if (mk == 5)
      for (uint64_t j = 0; j < n; ++j) mask[(n / 2) * n + j] = 0.0f;
  }
  const double scale = 1.0 / std::sqrt((double)d);
  const std::string w = "(" + std::to_string(bh) + ", " + std::to_string(n) + ", " +
                        std::to_string(d) + ") mask " + std::to_string(mk) + " fill " +
                        std::to_string(fill) + " " + th::dist_name(dist) + " ";
  auto up = [&](const std::vector<float> &x, tlrt_device dev) {
    return Buf(x.empty() ? nullptr : th::upload(x, dev));
  };
  run_multi(w + "fwd", [&](tlrt_device dev, std::vector<Buf> &o) {
    Buf Q = up(q, dev), K = up(k, dev), V = up(v, dev), M = up(mask, dev);
    o.resize(2);
    return tlrt_flash_attention_fwd(Q.get(), K.get(), V.get(), M.get(), bh, n, d, scale, causal,
                                    fill, o[0].out(), o[1].out());
  });
  std::vector<float> out, lse;
  {
    Buf Q = up(q, kCpu), K = up(k, kCpu), V = up(v, kCpu), M = up(mask, kCpu), O, L;
    TH_OK(tlrt_flash_attention_fwd(Q.get(), K.get(), V.get(), M.get(), bh, n, d, scale, causal,
                                   fill, O.out(), L.out()));
    out = th::download(O.get());
    lse = th::download(L.get());
  }
  run_multi(w + "bwd", [&](tlrt_device dev, std::vector<Buf> &o) {
    Buf Q = up(q, dev), K = up(k, dev), V = up(v, dev), M = up(mask, dev), DO = up(dout, dev),
        O = up(out, dev), L = up(lse, dev);
    o.resize(3);
    return tlrt_flash_attention_bwd(Q.get(), K.get(), V.get(), M.get(), DO.get(), O.get(), L.get(),
                                    bh, n, d, scale, causal, fill, o[0].out(), o[1].out(),
                                    o[2].out());
  });
  using Single = tlrt_status (*)(const tlrt_buffer *, const tlrt_buffer *, const tlrt_buffer *,
                                 const tlrt_buffer *, const tlrt_buffer *, uint64_t, uint64_t,
                                 uint64_t, double, bool, double, tlrt_buffer **);
  const Single fns[3] = {tlrt_flash_attention_bwd_q, tlrt_flash_attention_bwd_k,
                         tlrt_flash_attention_bwd_v};
  for (int s = 0; s < 3; ++s)
    run_multi(w + "bwd_" + "qkv"[s], [&](tlrt_device dev, std::vector<Buf> &o) {
      Buf Q = up(q, dev), K = up(k, dev), V = up(v, dev), M = up(mask, dev), DO = up(dout, dev);
      o.resize(1);
      return fns[s](Q.get(), K.get(), V.get(), M.get(), DO.get(), bh, n, d, scale, causal, fill,
                    o[0].out());
    });
}

void long_problem() {
  const uint64_t n = 16384, d = 64;
  if (n * d > max_n()) return;
  const std::vector<float> x = th::make(th::Dist::Uniform, n * d, 77);
  Buf Q(th::upload(x, kGpu)), O, L, dq, dk, dv;
  const tlrt_allocator_stats before = th::stats(kGpu);
  TH_OK(tlrt_flash_attention_fwd(Q.get(), Q.get(), Q.get(), nullptr, 1, n, d, 0.125, true,
                                 -INFINITY, O.out(), L.out()));
  TH_OK(tlrt_flash_attention_bwd(Q.get(), Q.get(), Q.get(), nullptr, Q.get(), O.get(), L.get(), 1,
                                 n, d, 0.125, true, -INFINITY, dq.out(), dk.out(), dv.out()));
  TH_OK(tlrt_synchronize(kGpu));
  const tlrt_allocator_stats after = th::stats(kGpu);
  const uint64_t grew = after.peak_bytes - before.live_bytes;
  std::printf("n = 16384: device peak grew by %llu bytes (n^2 floats would be %llu)\n",
              (unsigned long long)grew, (unsigned long long)(n * n * 4));
  TH_CHECK(grew <= 8 * n * d * 4);
}

}  // namespace

int main() {
  if (!start("parity_attention")) return 77;
  struct Dims {
    uint64_t bh, n, d;
  };
  uint64_t salt = 1;
  for (Dims s : {Dims{1, 1, 1}, Dims{2, 1, 64}, Dims{1, 3, 5}, Dims{3, 17, 32}, Dims{2, 64, 64},
                 Dims{1, 65, 64}, Dims{2, 100, 33}, Dims{1, 129, 128}, Dims{1, 70, 100},
                 Dims{1, 67, 256}, Dims{1, 50, 200}, Dims{2, 300, 64}, Dims{1, 200, 128}})
    for (int mk = 0; mk < 6; ++mk)
      for (double fill : {-(double)INFINITY, -1000.0}) one(s.bh, s.n, s.d, mk, fill, salt += 10);
  one(4, 1024, 64, 3, -(double)INFINITY, 999);
  one(2, 1000, 128, 1, -1000.0, 1999);
  // Special values (NaN, inf, -0, subnormals) where tiles are skipped or padded: a skipped tile
  // must add nothing, a visited all-excluded one p = 0 times its values (the 128-row forward
  // blocks of 64 < d <= 128 leave the last diagonal tile out for their first 64 rows).
  for (th::Dist dist : {th::Dist::Edge, th::Dist::Bits})
    for (Dims s : {Dims{1, 200, 128}, Dims{2, 130, 64}, Dims{1, 100, 33}, Dims{1, 70, 256}})
      for (int mk : {0, 3, 4}) one(s.bh, s.n, s.d, mk, -(double)INFINITY, salt += 10, dist);
  long_problem();
  print_summary("parity_attention");
  return th::finish("test_parity_attention");
}
