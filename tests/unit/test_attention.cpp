// Known answers for abi/tlrt_attention.h on the CPU: forward (out, lse) and the four backward
// entry points against the float64 reference of tests/attention_ref.hpp under the header's error
// bound, for many (bh, n, d) (n = 1, odd n, n across tile edges, d = 1 .. 256), masks (none,
// random per problem, broadcast, causal, causal + mask, fully blocked rows) and both fill
// conventions; exact checks (fully excluded rows give 0 / -inf / zero gradients, the seeds'
// single-gradient entry points equal the fused backward bit for bit, a finite fill on a fully
// blocked row equals the unmasked result); special values; empty shapes; and an n = 16384 problem
// whose peak device bytes stay far below n^2.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "../attention_ref.hpp"
#include "../harness.hpp"

namespace {

constexpr double kU = 1.0 / 16777216.0;
double g_worst = 0;  // worst error / bound seen

struct Got {
  std::vector<float> out, lse, dq, dk, dv;
};

tlrt_buffer *mask_buf(const attref::Case &c, th::Buf &hold) {
  if (c.mask.empty()) return nullptr;
  hold = th::Buf(th::upload(c.mask));
  return hold.get();
}

Got run(const attref::Case &c, const std::vector<float> &q, const std::vector<float> &k,
        const std::vector<float> &v, const std::vector<float> &dout) {
  Got g;
  th::Buf Q(th::upload(q)), K(th::upload(k)), V(th::upload(v)), DO(th::upload(dout)), M;
  tlrt_buffer *m = mask_buf(c, M);
  th::Buf O, L, dq, dk, dv;
  TH_OK(tlrt_flash_attention_fwd(Q.get(), K.get(), V.get(), m, c.bh, c.n, c.d, c.scale, c.causal,
                                 c.fill, O.out(), L.out()));
  if (!O.get()) return g;
  g.out = th::download(O.get());
  g.lse = th::download(L.get());
  TH_OK(tlrt_flash_attention_bwd(Q.get(), K.get(), V.get(), m, DO.get(), O.get(), L.get(), c.bh,
                                 c.n, c.d, c.scale, c.causal, c.fill, dq.out(), dk.out(),
                                 dv.out()));
  if (!dq.get()) return g;
  g.dq = th::download(dq.get());
  g.dk = th::download(dk.get());
  g.dv = th::download(dv.get());
  // The seeds' single-gradient entry points: bit for bit the fused backward's outputs.
  th::Buf sq, sk, sv;
  TH_OK(tlrt_flash_attention_bwd_q(Q.get(), K.get(), V.get(), m, DO.get(), c.bh, c.n, c.d, c.scale,
                                   c.causal, c.fill, sq.out()));
  TH_OK(tlrt_flash_attention_bwd_k(Q.get(), K.get(), V.get(), m, DO.get(), c.bh, c.n, c.d, c.scale,
                                   c.causal, c.fill, sk.out()));
  TH_OK(tlrt_flash_attention_bwd_v(Q.get(), K.get(), V.get(), m, DO.get(), c.bh, c.n, c.d, c.scale,
                                   c.causal, c.fill, sv.out()));
  const std::vector<float> *fused[3] = {&g.dq, &g.dk, &g.dv};
  const th::Buf *single[3] = {&sq, &sk, &sv};
  for (int w = 0; w < 3; ++w) {
    if (!single[w]->get()) continue;
    const std::vector<float> s = th::download(single[w]->get());
    bool same = s.size() == fused[w]->size();
    for (size_t e = 0; same && e < s.size(); ++e) same = th::same_bits(s[e], (*fused[w])[e]);
    TH_CHECK_MSG(same, "bwd_%c differs from the fused backward (bh %llu n %llu d %llu)", "qkv"[w],
                 (unsigned long long)c.bh, (unsigned long long)c.n, (unsigned long long)c.d);
  }
  return g;
}

void compare(const char *what, const attref::Case &c, const std::vector<float> &got,
             const std::vector<double> &ref, const std::vector<double> &abs, double factor) {
  TH_CHECK_MSG(got.size() == ref.size(), "%s: %zu elements, expected %zu", what, got.size(),
               ref.size());
  if (got.size() != ref.size()) return;
  int bad = 0;
  for (size_t e = 0; e < got.size(); ++e) {
    if (std::isinf(ref[e])) {
      if (got[e] != ref[e] && bad++ < 3)
        TH_CHECK_MSG(false, "%s[%zu] = %s, expected %g (bh %llu n %llu d %llu)", what, e,
                     th::hex(got[e]).c_str(), ref[e], (unsigned long long)c.bh,
                     (unsigned long long)c.n, (unsigned long long)c.d);
      continue;
    }
    const double err = std::fabs((double)got[e] - ref[e]), bound = factor * abs[e];
    if (bound > 0) g_worst = std::max(g_worst, err / bound);
    if (!(err <= bound) && bad++ < 3)
      TH_CHECK_MSG(false, "%s[%zu] = %s, reference %.17g, error %.3g > bound %.3g (bh %llu n %llu "
                   "d %llu causal %d fill %g mask %zu)", what, e, th::hex(got[e]).c_str(), ref[e],
                   err, bound, (unsigned long long)c.bh, (unsigned long long)c.n,
                   (unsigned long long)c.d, (int)c.causal, (double)c.fill, c.mask.size());
  }
  TH_CHECK(bad == 0);
}

enum class MaskKind { None, Random, Broadcast, Causal, CausalRandom, FullRows };

attref::Case make_case(uint64_t bh, uint64_t n, uint64_t d, MaskKind mk, float fill, uint64_t salt) {
  attref::Case c{bh, n, d, {}, (float)(1.0 / std::sqrt((double)std::max<uint64_t>(d, 1))), fill,
                 false};
  th::Rng rng(salt);
  auto random_mask = [&](uint64_t count) {
    std::vector<float> m(count);
    for (auto &x : m) {
      const float u = rng.uniform(0.0f, 1.0f);
      x = u < 0.3f ? (u < 0.15f ? 0.0f : -0.0f) : (u < 0.35f ? NAN : (u < 0.4f ? 2.5f : 1.0f));
    }
    return m;
  };
  switch (mk) {
    case MaskKind::None: break;
    case MaskKind::Random: c.mask = random_mask(bh * n * n); break;
    case MaskKind::Broadcast: c.mask = random_mask(n * n); break;
    case MaskKind::Causal: c.causal = true; break;
    case MaskKind::CausalRandom:
      c.causal = true;
      c.mask = random_mask(n * n);
      break;
    case MaskKind::FullRows:
      c.mask.assign(bh * n * n, 1.0f);
      for (uint64_t b = 0; b < bh; ++b)
        for (uint64_t i = 0; i < n; i += 2)  // every other row fully blocked
          for (uint64_t j = 0; j < n; ++j) c.mask[b * n * n + i * n + j] = 0.0f;
      break;
  }
  return c;
}

void check_case(const attref::Case &c, uint64_t salt) {
  const uint64_t N = c.bh * c.n * c.d;
  const std::vector<float> q = th::make(th::Dist::Uniform, N, salt * 4 + 1);
  const std::vector<float> k = th::make(th::Dist::Uniform, N, salt * 4 + 2);
  const std::vector<float> v = th::make(th::Dist::Uniform, N, salt * 4 + 3);
  const std::vector<float> dout = th::make(th::Dist::Uniform, N, salt * 4 + 4);
  const Got g = run(c, q, k, v, dout);
  const attref::Ref r = attref::reference(c, q, k, v, dout);
  const double S = r.S.empty() ? 0 : *std::max_element(r.S.begin(), r.S.end());
  const double f = kU * (2.0 * c.n + 4.0 * c.d + 8.0 * c.d * S + 64);
  const double fl = kU * (4.0 * c.d * S + 2.0 * c.n + 8);
  compare("out", c, g.out, r.out, r.aout, f);
  compare("lse", c, g.lse, r.lse, r.alse, fl);
  compare("dq", c, g.dq, r.dq, r.adq, f);
  compare("dk", c, g.dk, r.dk, r.adk, f);
  compare("dv", c, g.dv, r.dv, r.adv, f);
  // Fully excluded rows: exactly zero output and dq row.
  if (std::isinf(c.fill) && !g.out.empty() && !g.dq.empty())
    for (uint64_t e = 0; e < c.bh * c.n; ++e)
      if (std::isinf(r.lse[e])) {
        bool zero = g.lse[e] == -INFINITY;
        for (uint64_t t = 0; t < c.d; ++t)
          zero = zero && g.out[e * c.d + t] == 0.0f && g.dq[e * c.d + t] == 0.0f;
        TH_CHECK_MSG(zero, "fully excluded row %llu: not zero / -inf", (unsigned long long)e);
      }
}

void check_grid() {
  struct Dims {
    uint64_t bh, n, d;
  };
  const Dims dims[] = {{1, 1, 1},   {2, 1, 4},   {1, 3, 1},   {3, 7, 5},    {2, 17, 32},
                       {1, 65, 8},  {2, 64, 64}, {1, 100, 33}, {1, 70, 128}, {1, 67, 256},
                       {1, 130, 16}, {2, 129, 3}};
  const MaskKind kinds[] = {MaskKind::None,   MaskKind::Random,       MaskKind::Broadcast,
                            MaskKind::Causal, MaskKind::CausalRandom, MaskKind::FullRows};
  uint64_t salt = 100;
  for (const Dims &dm : dims)
    for (MaskKind mk : kinds)
      for (float fill : {-INFINITY, -1000.0f}) {
        if (th::under_valgrind() && dm.n * dm.n * dm.d > 200000) continue;
        check_case(make_case(dm.bh, dm.n, dm.d, mk, fill, salt), salt);
        ++salt;
      }
  std::printf("worst error / bound over the grid: %.3g\n", g_worst);
}

// Known values: n = 1 gives out = v, lse = s; two keys with equal scores average v.
void check_known() {
  {
    th::Buf Q(th::upload({2.0f, -1.0f})), K(th::upload({0.5f, 3.0f})), V(th::upload({7.0f, -3.0f}));
    th::Buf O, L;
    TH_OK(tlrt_flash_attention_fwd(Q.get(), K.get(), V.get(), nullptr, 1, 1, 2, 0.5, false,
                                   -INFINITY, O.out(), L.out()));
    const std::vector<float> o = th::download(O.get()), l = th::download(L.get());
    TH_CHECK(o.size() == 2 && o[0] == 7.0f && o[1] == -3.0f);
    TH_CHECK(l.size() == 1 && l[0] == -1.0f);  // (1 - 3) * 0.5
  }
  {
    th::Buf Q(th::upload({1.0f, 1.0f})), K(th::upload({1.0f, 1.0f})), V(th::upload({2.0f, 4.0f}));
    th::Buf O, L;
    TH_OK(tlrt_flash_attention_fwd(Q.get(), K.get(), V.get(), nullptr, 1, 2, 1, 1.0, false,
                                   -INFINITY, O.out(), L.out()));
    const std::vector<float> o = th::download(O.get());
    TH_CHECK(o.size() == 2 && o[0] == 3.0f && o[1] == 3.0f);
  }
  // Finite fill on a fully blocked row equals the unmasked row (a common shift cancels).
  {
    const uint64_t n = 9, d = 3;
    const std::vector<float> q = th::make(th::Dist::Uniform, n * d, 7),
                             k = th::make(th::Dist::Uniform, n * d, 8),
                             v = th::make(th::Dist::Uniform, n * d, 9);
    std::vector<float> mask(n * n, 1.0f);
    for (uint64_t j = 0; j < n; ++j) mask[4 * n + j] = 0.0f;
    th::Buf Q(th::upload(q)), K(th::upload(k)), V(th::upload(v)), M(th::upload(mask)), O1, L1, O2,
        L2;
    TH_OK(tlrt_flash_attention_fwd(Q.get(), K.get(), V.get(), M.get(), 1, n, d, 0.5, false, -1000.0,
                                   O1.out(), L1.out()));
    TH_OK(tlrt_flash_attention_fwd(Q.get(), K.get(), V.get(), nullptr, 1, n, d, 0.5, false,
                                   -1000.0, O2.out(), L2.out()));
    const std::vector<float> a = th::download(O1.get()), b = th::download(O2.get());
    for (uint64_t t = 0; t < d && a.size() == n * d && b.size() == n * d; ++t)
      TH_CHECK_MSG(std::fabs(a[4 * d + t] - b[4 * d + t]) <= 1e-5f * (1 + std::fabs(b[4 * d + t])),
                   "fill row: %g vs %g", a[4 * d + t], b[4 * d + t]);
  }
}

// NaN in q poisons its row only; NaN mask entries count as allowed (equal to a 1 mask).
void check_special() {
  const uint64_t n = 5, d = 4;
  std::vector<float> q = th::make(th::Dist::Uniform, n * d, 21);
  const std::vector<float> k = th::make(th::Dist::Uniform, n * d, 22),
                           v = th::make(th::Dist::Uniform, n * d, 23);
  q[2 * d + 1] = NAN;
  th::Buf Q(th::upload(q)), K(th::upload(k)), V(th::upload(v)), O, L;
  TH_OK(tlrt_flash_attention_fwd(Q.get(), K.get(), V.get(), nullptr, 1, n, d, 0.5, false,
                                 -INFINITY, O.out(), L.out()));
  const std::vector<float> o = th::download(O.get());
  for (uint64_t i = 0; i < n && o.size() == n * d; ++i)
    for (uint64_t t = 0; t < d; ++t)
      TH_CHECK_MSG(std::isnan(o[i * d + t]) == (i == 2), "NaN row: out[%llu, %llu] = %g",
                   (unsigned long long)i, (unsigned long long)t, o[i * d + t]);
  std::vector<float> ones(n * n, 1.0f), nans(n * n, NAN);
  th::Buf M1(th::upload(ones)), M2(th::upload(nans)), O1, L1, O2, L2;
  TH_OK(tlrt_flash_attention_fwd(K.get(), K.get(), V.get(), M1.get(), 1, n, d, 0.5, true,
                                 -INFINITY, O1.out(), L1.out()));
  TH_OK(tlrt_flash_attention_fwd(K.get(), K.get(), V.get(), M2.get(), 1, n, d, 0.5, true,
                                 -INFINITY, O2.out(), L2.out()));
  const std::vector<float> a = th::download(O1.get()), b = th::download(O2.get());
  bool same = a.size() == b.size();
  for (size_t e = 0; same && e < a.size(); ++e) same = th::same_bits(a[e], b[e]);
  TH_CHECK_MSG(same, "a NaN mask must equal an all-ones mask");
}

void check_empty() {
  th::Buf E(th::upload({})), O, L, dq, dk, dv;
  TH_OK(tlrt_flash_attention_fwd(E.get(), E.get(), E.get(), nullptr, 0, 5, 4, 1.0, false, -INFINITY,
                                 O.out(), L.out()));
  TH_CHECK(th::download(O.get()).empty() && th::download(L.get()).empty());
  // d = 0: lse = log(number of non-excluded keys); causal row i has i + 1 of them.
  TH_OK(tlrt_flash_attention_fwd(E.get(), E.get(), E.get(), nullptr, 2, 3, 0, 1.0, true, -INFINITY,
                                 O.out(), L.out()));
  const std::vector<float> l = th::download(L.get());
  TH_CHECK(th::download(O.get()).empty() && l.size() == 6);
  for (size_t e = 0; e < l.size(); ++e)
    TH_CHECK_MSG(std::fabs(l[e] - std::log((double)(e % 3 + 1))) < 1e-6, "d = 0: lse[%zu] = %g", e,
                 l[e]);
  TH_OK(tlrt_flash_attention_bwd(E.get(), E.get(), E.get(), nullptr, E.get(), E.get(), L.get(), 2,
                                 3, 0, 1.0, true, -INFINITY, dq.out(), dk.out(), dv.out()));
  TH_CHECK(th::download(dq.get()).empty() && th::download(dv.get()).empty());
}

// n = 16384: runs with O(n d) memory (peak bytes checked), and sampled rows match the reference.
void check_long() {
  const uint64_t n = th::under_valgrind() ? 1500 : 16384, d = 4, N = n * d;
  const std::vector<float> q = th::make(th::Dist::Uniform, N, 31),
                           k = th::make(th::Dist::Uniform, N, 32),
                           v = th::make(th::Dist::Uniform, N, 33),
                           dout = th::make(th::Dist::Uniform, N, 34);
  th::Buf Q(th::upload(q)), K(th::upload(k)), V(th::upload(v)), DO(th::upload(dout));
  const tlrt_allocator_stats before = th::stats();
  th::Buf O, L, dq, dk, dv;
  TH_OK(tlrt_flash_attention_fwd(Q.get(), K.get(), V.get(), nullptr, 1, n, d, 0.5, true, -INFINITY,
                                 O.out(), L.out()));
  TH_OK(tlrt_flash_attention_bwd(Q.get(), K.get(), V.get(), nullptr, DO.get(), O.get(), L.get(), 1,
                                 n, d, 0.5, true, -INFINITY, dq.out(), dk.out(), dv.out()));
  const tlrt_allocator_stats after = th::stats();
  const uint64_t grew = after.peak_bytes > before.live_bytes ? after.peak_bytes - before.live_bytes : 0;
  TH_CHECK_MSG(grew <= 8 * N * 4, "n = %llu: peak grew by %llu bytes (n^2 floats = %llu)",
               (unsigned long long)n, (unsigned long long)grew, (unsigned long long)(n * n * 4));
  // Sampled rows of out (causal: row i sees keys 0..i) against float64.
  const std::vector<float> o = th::download(O.get());
  for (uint64_t i : {uint64_t{0}, uint64_t{63}, uint64_t{64}, n / 2 + 1, n - 1}) {
    std::vector<double> s(i + 1);
    double mx = -INFINITY;
    for (uint64_t j = 0; j <= i; ++j) {
      double dot = 0;
      for (uint64_t t = 0; t < d; ++t) dot += (double)q[i * d + t] * k[j * d + t];
      s[j] = dot * 0.5;
      mx = std::max(mx, s[j]);
    }
    double l = 0;
    for (uint64_t j = 0; j <= i; ++j) l += std::exp(s[j] - mx);
    for (uint64_t t = 0; t < d; ++t) {
      double a = 0, aa = 0;
      for (uint64_t j = 0; j <= i; ++j) {
        a += std::exp(s[j] - mx) / l * v[j * d + t];
        aa += std::exp(s[j] - mx) / l * std::fabs((double)v[j * d + t]);
      }
      const double bound = kU * (2.0 * n + 4.0 * d + 8.0 * d * 2.0 + 64) * aa;
      TH_CHECK_MSG(std::fabs(o[i * d + t] - a) <= bound, "long: out[%llu, %llu] = %g vs %g",
                   (unsigned long long)i, (unsigned long long)t, o[i * d + t], a);
    }
  }
}

}  // namespace

int main() {
  check_known();
  check_special();
  check_empty();
  check_grid();
  check_long();
  return th::finish("test_attention");
}
