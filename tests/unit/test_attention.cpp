// Known answers for abi/tlrt_attention.h on the CPU: forward (out, lse) and the four backward
// entry points against the float64 reference of tests/attention_ref.hpp under the header's error
// bound, for many (bh, n, d) (n = 1, odd n, n across tile edges, d = 1 .. 256), masks (none,
// random per problem, broadcast, causal, causal + mask, fully blocked rows) and both fill
// conventions; exact checks (fully excluded rows give 0 / -inf / zero gradients, the seeds'
// single-gradient entry points equal the fused backward bit for bit, a finite fill on a fully
// blocked row equals the unmasked result); special values; empty shapes; and an n = 16384 problem
// whose peak device bytes stay far below n^2.
// The geometry entry points (tlrt_attention_fwd / _bwd): against the float64 reference of
// tests/attention_geom.hpp under the header's bound (n = max(len_k, group * len_q)) on grouped
// heads (heads_q = 4 over heads_kv = 1, 2, 4), len_q != len_k (decode steps, more queries than
// keys), d = 1 .. 256, masks and both fills, with q, k, v and the gradients in four layouts
// (token-major, one fused buffer, head-major, padded); exact checks: every layout gives the same
// bits, only the views' elements are written, each gradient alone equals the fused backward, the
// flash entry points equal these on their geometry, a decode step equals the last row of the full
// causal problem, grouped heads equal repeated key / value heads (forward and dq), rows without
// keys give 0 / -inf, and the empty cases.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "../attention_geom.hpp"
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


// ---- the geometry entry points ------------------------------------------------------------------

// Outputs in logical layouts: out, dq (B, nq, hq, d); lse (B, hq, nq); dk, dv (B, nk, hkv, d).
struct GGot {
  std::vector<float> out, lse, dq, dk, dv;
};

bool same_vec(const std::vector<float> &a, const std::vector<float> &b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), th::same_bits);
}

// tlrt_attention_fwd / _bwd with q, k, v and the gradients placed in layout l (the gradients
// into buffers holding 9.0, of which only the views may change); each gradient alone must equal
// the fused backward's.
GGot run_geometry(const attgeo::Case &c, attgeo::Layout l, const std::vector<float> &q,
                  const std::vector<float> &k, const std::vector<float> &v,
                  const std::vector<float> &dout) {
  const attgeo::Shape &s = c.s;
  const attgeo::Placement P = attgeo::place(s, l);
  const tlrt_attention_geometry g = attgeo::geometry(s, P);
  const auto hb = attgeo::host_buffers(s, P, q, k, v, 3.0f);
  th::Buf B[3], M, DO(th::upload(dout)), O, L;
  for (int i = 0; i < 3; ++i) B[i] = th::Buf(th::upload(hb[i]));
  if (!c.mask.empty()) M = th::Buf(th::upload(c.mask));
  const tlrt_buffer *bq = B[P.v[0].buf].get(), *bk = B[P.v[1].buf].get(),
                    *bv = B[P.v[2].buf].get();
  GGot r;
  TH_OK(tlrt_attention_fwd(bq, bk, bv, M.get(), &g, c.scale, c.causal, c.fill, O.out(), L.out()));
  if (!O.get()) return r;
  r.out = th::download(O.get());
  r.lse = th::download(L.get());
  auto backward = [&](int which, std::vector<std::vector<float>> &bufs) {
    th::Buf G[3];
    for (int i = 0; i < 3; ++i) G[i] = th::Buf(th::upload(std::vector<float>(P.size[i], 9.0f)));
    tlrt_buffer *d[3];
    for (int i = 0; i < 3; ++i)
      d[i] = (which < 0 || which == i) ? G[P.v[i].buf].get() : nullptr;
    TH_OK(tlrt_attention_bwd(bq, bk, bv, M.get(), DO.get(), O.get(), L.get(), &g, c.scale,
                             c.causal, c.fill, d[0], d[1], d[2], &g));
    bufs.resize(3);
    for (int i = 0; i < 3; ++i) bufs[i] = th::download(G[i].get());
  };
  std::vector<std::vector<float>> all;
  backward(-1, all);
  const uint64_t T[3] = {s.nq, s.nk, s.nk}, H[3] = {s.hq, s.hkv, s.hkv};
  std::vector<float> *dst[3] = {&r.dq, &r.dk, &r.dv};
  for (int i = 0; i < 3; ++i) *dst[i] = attgeo::gather(all[P.v[i].buf], s.batch, T[i], H[i], s.d, P.v[i]);
  // Only the views were written: the buffers equal 9.0 with the gathered values scattered in.
  std::vector<std::vector<float>> expect(3);
  for (int i = 0; i < 3; ++i) expect[i].assign(P.size[i], 9.0f);
  for (int i = 0; i < 3; ++i)
    attgeo::scatter(*dst[i], s.batch, T[i], H[i], s.d, P.v[i], expect[P.v[i].buf]);
  for (int i = 0; i < 3; ++i)
    TH_CHECK_MSG(same_vec(expect[i], all[i]), "%s %s: gradient buffer %d written outside its views",
                 attgeo::shape_str(s).c_str(), attgeo::layout_name(l), i);
  for (int w = 0; w < 3; ++w) {
    std::vector<std::vector<float>> one;
    backward(w, one);
    TH_CHECK_MSG(same_vec(attgeo::gather(one[P.v[w].buf], s.batch, T[w], H[w], s.d, P.v[w]),
                          *dst[w]),
                 "%s %s: d%c alone differs from the fused backward", attgeo::shape_str(s).c_str(),
                 attgeo::layout_name(l), "qkv"[w]);
  }
  return r;
}

attgeo::Case make_gcase(const attgeo::Shape &s, MaskKind mk, float fill, uint64_t salt) {
  attgeo::Case c{s, {}, (float)(1.0 / std::sqrt((double)std::max<uint64_t>(s.d, 1))), fill, false};
  const uint64_t one = s.nq * s.nk;
  switch (mk) {
    case MaskKind::None: break;
    case MaskKind::Random: c.mask = attgeo::random_mask(s.batch * s.hq * one, salt); break;
    case MaskKind::Broadcast: c.mask = attgeo::random_mask(one, salt); break;
    case MaskKind::Causal: c.causal = true; break;
    case MaskKind::CausalRandom:
      c.causal = true;
      c.mask = attgeo::random_mask(one, salt);
      break;
    case MaskKind::FullRows:
      c.mask.assign(s.batch * s.hq * one, 1.0f);
      for (uint64_t p = 0; p < s.batch * s.hq; ++p)
        for (uint64_t i = 0; i < s.nq; i += 2)
          for (uint64_t j = 0; j < s.nk; ++j) c.mask[p * one + i * s.nk + j] = 0.0f;
      break;
  }
  return c;
}

void check_gcase(const attgeo::Case &c, uint64_t salt) {
  const attgeo::Shape &s = c.s;
  const std::vector<float> q = th::make(th::Dist::Uniform, s.q_elems(), salt * 4 + 1),
                           k = th::make(th::Dist::Uniform, s.kv_elems(), salt * 4 + 2),
                           v = th::make(th::Dist::Uniform, s.kv_elems(), salt * 4 + 3),
                           dout = th::make(th::Dist::Uniform, s.q_elems(), salt * 4 + 4);
  const attgeo::Ref r = attgeo::reference(c, q, k, v, dout);
  const double n = (double)std::max(s.nk, s.group() * s.nq), d = (double)s.d;
  const double f = kU * (2.0 * n + 4.0 * d + 8.0 * d * r.S + 64);
  const double fl = kU * (4.0 * d * r.S + 2.0 * n + 8);
  GGot first;
  bool have = false;
  for (attgeo::Layout l : {attgeo::Layout::TokenMajor, attgeo::Layout::Fused,
                           attgeo::Layout::HeadMajor, attgeo::Layout::Padded}) {
    if (l == attgeo::Layout::Fused && s.nq != s.nk) continue;
    const GGot g = run_geometry(c, l, q, k, v, dout);
    const std::string w = attgeo::shape_str(s) + " " + attgeo::layout_name(l);
    if (!have) {
      attref::Case rc{s.batch * s.hq, s.nq, s.d, {}, c.scale, c.fill, c.causal};  // for messages
      compare(("out " + w).c_str(), rc, g.out, r.out, r.aout, f);
      compare(("lse " + w).c_str(), rc, g.lse, r.lse, r.alse, fl);
      compare(("dq " + w).c_str(), rc, g.dq, r.dq, r.adq, f);
      compare(("dk " + w).c_str(), rc, g.dk, r.dk, r.adk, f);
      compare(("dv " + w).c_str(), rc, g.dv, r.dv, r.adv, f);
      first = g;
      have = true;
    } else {  // every layout: the same operations, the same bits
      TH_CHECK_MSG(same_vec(g.out, first.out) && same_vec(g.lse, first.lse) &&
                       same_vec(g.dq, first.dq) && same_vec(g.dk, first.dk) &&
                       same_vec(g.dv, first.dv),
                   "%s: differs from the token-major layout", w.c_str());
    }
  }
}

void check_geometry_grid() {
  const attgeo::Shape shapes[] = {
      {1, 4, 1, 1, 70, 64},  {2, 4, 2, 1, 130, 32}, {1, 4, 2, 70, 70, 64}, {1, 2, 1, 65, 200, 80},
      {1, 4, 1, 130, 67, 128}, {2, 2, 2, 33, 33, 1}, {1, 4, 4, 17, 5, 33},  {1, 2, 1, 40, 40, 256},
      {2, 4, 2, 9, 9, 3},    {1, 3, 1, 100, 3, 8},  {1, 1, 1, 3, 129, 16}};
  const MaskKind kinds[] = {MaskKind::None,   MaskKind::Random,       MaskKind::Broadcast,
                            MaskKind::Causal, MaskKind::CausalRandom, MaskKind::FullRows};
  uint64_t salt = 5000;
  const double before = g_worst;
  g_worst = 0;
  for (const attgeo::Shape &s : shapes)
    for (MaskKind mk : kinds)
      for (float fill : {-INFINITY, -1000.0f}) {
        if (th::under_valgrind() && s.nq * s.nk * s.d * s.hq > 400000) continue;
        check_gcase(make_gcase(s, mk, fill, salt), salt);
        ++salt;
      }
  std::printf("geometry entry points: worst error / bound over the grid: %.3g\n", g_worst);
  g_worst = std::max(before, g_worst);
}

// Bitwise relations between the entry points and between related problems.
void check_geometry_relations() {
  const double scale = 0.3;
  // The flash entry points are the geometry's (B, 1 head, n, n, contiguous) problem; and
  // heads_q = heads_kv = H token-major equals the flash entry on the heads permuted to (B H, n, d).
  for (bool causal : {false, true}) {
    const attgeo::Shape s{2, 3, 3, 70, 70, 20};
    const std::vector<float> q = th::make(th::Dist::Uniform, s.q_elems(), 71),
                             k = th::make(th::Dist::Uniform, s.kv_elems(), 72),
                             v = th::make(th::Dist::Uniform, s.kv_elems(), 73),
                             dout = th::make(th::Dist::Uniform, s.q_elems(), 74);
    attgeo::Case c{s, {}, (float)scale, -INFINITY, causal};
    const GGot g = run_geometry(c, attgeo::Layout::TokenMajor, q, k, v, dout);
    // Head-major (B H, n, d) copies for the flash entry points.
    auto hm = [&](const std::vector<float> &x) {
      std::vector<float> y(x.size());
      attgeo::scatter(x, s.batch, s.nq, s.hq, s.d, attgeo::View{0, 0, s.hq * s.nq * s.d, s.d, s.nq * s.d}, y);
      return y;
    };
    th::Buf Q(th::upload(hm(q))), K(th::upload(hm(k))), V(th::upload(hm(v))),
        DO(th::upload(hm(dout))), O, L, dq, dk, dv;
    const uint64_t bh = s.batch * s.hq;
    TH_OK(tlrt_flash_attention_fwd(Q.get(), K.get(), V.get(), nullptr, bh, s.nq, s.d, scale,
                                   causal, -INFINITY, O.out(), L.out()));
    TH_OK(tlrt_flash_attention_bwd(Q.get(), K.get(), V.get(), nullptr, DO.get(), O.get(), L.get(),
                                   bh, s.nq, s.d, scale, causal, -INFINITY, dq.out(), dk.out(),
                                   dv.out()));
    TH_CHECK_MSG(same_vec(th::download(O.get()), hm(g.out)) &&
                     same_vec(th::download(L.get()), g.lse) &&
                     same_vec(th::download(dq.get()), hm(g.dq)) &&
                     same_vec(th::download(dk.get()), hm(g.dk)) &&
                     same_vec(th::download(dv.get()), hm(g.dv)),
                 "geometry (heads %llu) != flash entry points on the permuted heads (causal %d)",
                 (unsigned long long)s.hq, (int)causal);
  }
  // A decode step (len_q = 1, causal, bottom-right) is the last row of the full causal problem;
  // and causal changes nothing for it.
  {
    const uint64_t T = 150, d = 16;
    const attgeo::Shape full{1, 4, 2, T, T, d}, step{1, 4, 2, 1, T, d};
    const std::vector<float> q = th::make(th::Dist::Uniform, full.q_elems(), 81),
                             k = th::make(th::Dist::Uniform, full.kv_elems(), 82),
                             v = th::make(th::Dist::Uniform, full.kv_elems(), 83),
                             dout = th::make(th::Dist::Uniform, full.q_elems(), 84);
    const GGot a = run_geometry(attgeo::Case{full, {}, 0.25f, -INFINITY, true},
                                attgeo::Layout::TokenMajor, q, k, v, dout);
    const std::vector<float> qs(q.end() - 4 * d, q.end()), ds(dout.end() - 4 * d, dout.end());
    const GGot b = run_geometry(attgeo::Case{step, {}, 0.25f, -INFINITY, true},
                                attgeo::Layout::TokenMajor, qs, k, v, ds);
    const GGot b2 = run_geometry(attgeo::Case{step, {}, 0.25f, -INFINITY, false},
                                 attgeo::Layout::Padded, qs, k, v, ds);
    bool last = b.out.size() == 4 * d && b.lse.size() == 4;
    for (uint64_t e = 0; last && e < 4 * d; ++e)
      last = th::same_bits(b.out[e], a.out[(T - 1) * 4 * d + e]);
    for (uint64_t h = 0; last && h < 4; ++h) last = th::same_bits(b.lse[h], a.lse[h * T + T - 1]);
    TH_CHECK_MSG(last, "a decode step differs from the last row of the full causal problem");
    TH_CHECK_MSG(same_vec(b.out, b2.out) && same_vec(b.lse, b2.lse) && same_vec(b.dk, b2.dk),
                 "a decode step: causal changes the result");
  }
  // Grouped heads equal the key / value heads repeated for each query head: out, lse and dq bit
  // for bit (the same operations per problem); dk, dv the repeated problem's summed over each
  // group, within the header's bound.
  {
    const attgeo::Shape gq{2, 4, 2, 37, 90, 24}, rep{2, 4, 4, 37, 90, 24};
    const std::vector<float> q = th::make(th::Dist::Uniform, gq.q_elems(), 91),
                             k = th::make(th::Dist::Uniform, gq.kv_elems(), 92),
                             v = th::make(th::Dist::Uniform, gq.kv_elems(), 93),
                             dout = th::make(th::Dist::Uniform, gq.q_elems(), 94);
    auto repeat = [&](const std::vector<float> &x) {
      std::vector<float> y(rep.kv_elems());
      for (uint64_t b = 0; b < 2; ++b)
        for (uint64_t j = 0; j < 90; ++j)
          for (uint64_t h = 0; h < 4; ++h)
            for (uint64_t t = 0; t < 24; ++t)
              y[((b * 90 + j) * 4 + h) * 24 + t] = x[((b * 90 + j) * 2 + h / 2) * 24 + t];
      return y;
    };
    for (bool causal : {false, true}) {
      const GGot a = run_geometry(attgeo::Case{gq, {}, 0.2f, -INFINITY, causal},
                                  attgeo::Layout::TokenMajor, q, k, v, dout);
      const GGot b = run_geometry(attgeo::Case{rep, {}, 0.2f, -INFINITY, causal},
                                  attgeo::Layout::TokenMajor, q, repeat(k), repeat(v), dout);
      TH_CHECK_MSG(same_vec(a.out, b.out) && same_vec(a.lse, b.lse) && same_vec(a.dq, b.dq),
                   "grouped heads differ from repeated key / value heads (causal %d)", (int)causal);
      for (size_t e = 0; e < a.dk.size() && b.dk.size() == 2 * a.dk.size(); ++e) {
        const size_t row = e / 24, t = e % 24;  // (b, j, g)
        const size_t r0 = (row / 2 * 4 + (row % 2) * 2) * 24 + t;
        const double sk = (double)b.dk[r0] + b.dk[r0 + 24], sv = (double)b.dv[r0] + b.dv[r0 + 24];
        const double ak = std::fabs(b.dk[r0]) + std::fabs(b.dk[r0 + 24]) + 1e-30,
                     av = std::fabs(b.dv[r0]) + std::fabs(b.dv[r0 + 24]) + 1e-30;
        if (std::fabs(a.dk[e] - sk) > 1e-4 * ak + 1e-6 || std::fabs(a.dv[e] - sv) > 1e-4 * av + 1e-6) {
          TH_CHECK_MSG(false, "grouped dk / dv [%zu] = %g / %g, repeated heads summed %g / %g", e,
                       a.dk[e], a.dv[e], sk, sv);
          break;
        }
      }
    }
  }
}

// Rows without keys and the empty cases.
void check_geometry_edges() {
  // len_q > len_k, causal: the first len_q - len_k rows see no key: out 0, lse -inf, dq 0.
  {
    const attgeo::Shape s{1, 2, 1, 100, 30, 8};
    const std::vector<float> q = th::make(th::Dist::Uniform, s.q_elems(), 101),
                             k = th::make(th::Dist::Uniform, s.kv_elems(), 102),
                             v = th::make(th::Dist::Uniform, s.kv_elems(), 103),
                             dout = th::make(th::Dist::Uniform, s.q_elems(), 104);
    const GGot g = run_geometry(attgeo::Case{s, {}, 0.5f, -INFINITY, true},
                                attgeo::Layout::TokenMajor, q, k, v, dout);
    bool ok = g.out.size() == s.q_elems() && g.lse.size() == s.lse_elems();
    for (uint64_t h = 0; ok && h < 2; ++h)
      for (uint64_t i = 0; ok && i < 100; ++i) {
        const bool none = i < 70;
        ok = (g.lse[h * 100 + i] == -INFINITY) == none;
        for (uint64_t t = 0; ok && none && t < 8; ++t)
          ok = g.out[(i * 2 + h) * 8 + t] == 0.0f && g.dq[(i * 2 + h) * 8 + t] == 0.0f;
      }
    TH_CHECK_MSG(ok, "len_q > len_k causal: rows without keys are not 0 / -inf / 0");
  }
  // No keys at all: out 0, lse -inf, dq = 0 * scale; no queries: dk = 0 * scale, dv = 0; d = 0:
  // lse = log of the keys each row sees (causal bottom-right: min(len_k, i + 1 + len_k - len_q)).
  {
    const attgeo::Shape s{2, 2, 1, 5, 0, 4};
    const std::vector<float> q = th::make(th::Dist::Uniform, s.q_elems(), 111), dout = q;
    const GGot g = run_geometry(attgeo::Case{s, {}, -0.5f, -1000.0f, false},
                                attgeo::Layout::TokenMajor, q, {}, {}, dout);
    bool ok = g.lse.size() == s.lse_elems() && g.dq.size() == s.q_elems();
    for (float x : g.lse) ok = ok && x == -INFINITY;
    for (float x : g.out) ok = ok && th::same_bits(x, 0.0f);
    for (float x : g.dq) ok = ok && th::same_bits(x, -0.0f);  // 0 * scale, scale < 0
    TH_CHECK_MSG(ok, "len_k = 0: not out 0, lse -inf, dq 0 * scale");
  }
  {
    const attgeo::Shape s{2, 2, 1, 0, 6, 4};
    const std::vector<float> k = th::make(th::Dist::Uniform, s.kv_elems(), 121);
    const GGot g = run_geometry(attgeo::Case{s, {}, -0.5f, -INFINITY, true},
                                attgeo::Layout::Padded, {}, k, k, {});
    bool ok = g.out.empty() && g.lse.empty() && g.dk.size() == s.kv_elems();
    for (float x : g.dk) ok = ok && th::same_bits(x, -0.0f);
    for (float x : g.dv) ok = ok && th::same_bits(x, 0.0f);
    TH_CHECK_MSG(ok, "len_q = 0: not dk 0 * scale, dv 0");
  }
  {
    const attgeo::Shape s{1, 2, 2, 4, 7, 0};
    const GGot g = run_geometry(attgeo::Case{s, {}, 1.0f, -INFINITY, true},
                                attgeo::Layout::TokenMajor, {}, {}, {}, {});
    bool ok = g.out.empty() && g.lse.size() == 8;
    for (uint64_t e = 0; ok && e < 8; ++e)
      ok = std::fabs(g.lse[e] - std::log((double)std::min<uint64_t>(7, e % 4 + 1 + 3))) < 1e-6;
    TH_CHECK_MSG(ok, "d = 0: lse is not the log of the keys each row sees");
  }
  // NaN in one query row poisons that row (of its head) only.
  {
    const attgeo::Shape s{1, 4, 2, 6, 9, 4};
    std::vector<float> q = th::make(th::Dist::Uniform, s.q_elems(), 131);
    const std::vector<float> k = th::make(th::Dist::Uniform, s.kv_elems(), 132),
                             v = th::make(th::Dist::Uniform, s.kv_elems(), 133);
    q[(3 * 4 + 1) * 4 + 2] = NAN;  // row 3 of head 1
    const GGot g = run_geometry(attgeo::Case{s, {}, 0.5f, -INFINITY, false},
                                attgeo::Layout::Padded, q, k, v,
                                std::vector<float>(s.q_elems(), 1.0f));
    bool ok = g.out.size() == s.q_elems();
    for (uint64_t i = 0; ok && i < 6; ++i)
      for (uint64_t h = 0; ok && h < 4; ++h)
        ok = std::isnan(g.out[(i * 4 + h) * 4]) == (i == 3 && h == 1);
    TH_CHECK_MSG(ok, "a NaN in row 3 of head 1 must poison exactly that row");
  }
}
}  // namespace

int main() {
  check_known();
  check_special();
  check_empty();
  check_grid();
  check_long();
  check_geometry_grid();
  check_geometry_relations();
  check_geometry_edges();
  return th::finish("test_attention");
}
