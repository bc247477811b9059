// Finite differences for the attention backward (abi/tlrt_attention.h): for L = sum out * W (W
// seeded), central differences of the CPU forward in every coordinate of q, k and v against dq,
// dk and dv of tlrt_flash_attention_bwd (dout = W) and of the seeds' single-gradient entry points,
// over small problems with no mask, a random mask, causal, and both fill conventions (including a
// fully blocked row with exclusion, whose gradients must be exactly zero).
// The geometry entry points the same way: dq, dk, dv of tlrt_attention_bwd (written through the
// views of a padded, a fused and a token-major layout) against central differences of
// tlrt_attention_fwd, for grouped heads, len_q != len_k (a decode step, more queries than keys),
// causal bottom-right, masks and both fills.
#include <cmath>

#include "../attention_geom.hpp"
#include "../harness.hpp"

namespace {

struct Case {
  uint64_t bh, n, d;
  bool mask, causal, full_row;
  double fill;
};

double loss(const Case &c, const std::vector<float> &q, const std::vector<float> &k,
            const std::vector<float> &v, const std::vector<float> &w, tlrt_buffer *mask) {
  th::Buf Q(th::upload(q)), K(th::upload(k)), V(th::upload(v)), O, L;
  if (tlrt_flash_attention_fwd(Q.get(), K.get(), V.get(), mask, c.bh, c.n, c.d, 0.7, c.causal,
                               c.fill, O.out(), L.out()) != TLRT_OK)
    return NAN;
  const std::vector<float> o = th::download(O.get());
  double s = 0;
  for (size_t e = 0; e < o.size(); ++e) s += (double)o[e] * w[e];
  return s;
}

void check(const Case &c, uint64_t salt) {
  const uint64_t N = c.bh * c.n * c.d;
  std::vector<float> in[3] = {th::make(th::Dist::Uniform, N, salt + 1),
                              th::make(th::Dist::Uniform, N, salt + 2),
                              th::make(th::Dist::Uniform, N, salt + 3)};
  const std::vector<float> w = th::make(th::Dist::Uniform, N, salt + 4);
  th::Buf M;
  if (c.mask) {
    std::vector<float> m = th::make(th::Dist::Positive, c.bh * c.n * c.n, salt + 5);
    for (auto &x : m) x = x < 0.3f ? 0.0f : 1.0f;
    if (c.full_row)
      for (uint64_t j = 0; j < c.n; ++j) m[1 * c.n + j] = 0.0f;  // row 1 of problem 0
    M = th::Buf(th::upload(m));
  }
  th::Buf Q(th::upload(in[0])), K(th::upload(in[1])), V(th::upload(in[2])), W(th::upload(w)), O, L,
      G[3], S[3];
  TH_OK(tlrt_flash_attention_fwd(Q.get(), K.get(), V.get(), M.get(), c.bh, c.n, c.d, 0.7, c.causal,
                                 c.fill, O.out(), L.out()));
  TH_OK(tlrt_flash_attention_bwd(Q.get(), K.get(), V.get(), M.get(), W.get(), O.get(), L.get(),
                                 c.bh, c.n, c.d, 0.7, c.causal, c.fill, G[0].out(), G[1].out(),
                                 G[2].out()));
  TH_OK(tlrt_flash_attention_bwd_q(Q.get(), K.get(), V.get(), M.get(), W.get(), c.bh, c.n, c.d, 0.7,
                                   c.causal, c.fill, S[0].out()));
  TH_OK(tlrt_flash_attention_bwd_k(Q.get(), K.get(), V.get(), M.get(), W.get(), c.bh, c.n, c.d, 0.7,
                                   c.causal, c.fill, S[1].out()));
  TH_OK(tlrt_flash_attention_bwd_v(Q.get(), K.get(), V.get(), M.get(), W.get(), c.bh, c.n, c.d, 0.7,
                                   c.causal, c.fill, S[2].out()));
  const char *names[3] = {"dq", "dk", "dv"};
  for (int a = 0; a < 3; ++a) {
    if (!G[a].get() || !S[a].get()) continue;
    const std::vector<float> g = th::download(G[a].get()), s = th::download(S[a].get());
    double gmax = 0, wsum = 0;
    for (float x : w) wsum += std::fabs(x);
    for (float x : g) gmax = std::max(gmax, (double)std::fabs(x));
    int bad = 0;
    for (uint64_t e = 0; e < N; ++e) {
      const float x0 = in[a][e];
      const float h = 1e-2f;
      in[a][e] = x0 + h;
      const double lp = loss(c, in[0], in[1], in[2], w, M.get());
      in[a][e] = x0 - h;
      const double lm = loss(c, in[0], in[1], in[2], w, M.get());
      in[a][e] = x0;
      const double fd = (lp - lm) / (2.0 * h);
      // A finite fill shifts blocked scores to ~|fill|, where float32 rounds them to |fill| u: the
      // forward's noise, divided by 2 h, enters the difference quotient.
      const double noise = std::isinf(c.fill) ? 0.0 : 4.0 * std::fabs(c.fill) * 0x1p-24 * wsum / h;
      const double tol = 2e-3 * std::fabs(fd) + 1e-3 * (gmax + 1e-3) + noise;
      if (!(std::fabs(fd - g[e]) <= tol) && bad++ < 3)
        TH_CHECK_MSG(false, "%s[%llu] = %g, finite difference %g (bh %llu n %llu d %llu mask %d "
                     "causal %d fill %g)", names[a], (unsigned long long)e, g[e], fd,
                     (unsigned long long)c.bh, (unsigned long long)c.n, (unsigned long long)c.d,
                     (int)c.mask, (int)c.causal, c.fill);
      TH_CHECK(th::same_bits(g[e], s[e]));
    }
    TH_CHECK(bad == 0);
    // A fully excluded row: zero gradient for its query, exactly.
    if (a == 0 && c.full_row && std::isinf(c.fill))
      for (uint64_t t = 0; t < c.d; ++t) TH_CHECK(g[1 * c.d + t] == 0.0f);
  }
}

// ---- the geometry entry points ------------------------------------------------------------------

struct GCase {
  attgeo::Shape s;
  attgeo::Layout layout;
  int mask;  // 0 none, 1 per problem, 2 broadcast
  bool causal;
  double fill;
};

// L = sum out * w from q, k, v in logical layouts.
double gloss(const GCase &c, const std::vector<float> (&in)[3], const std::vector<float> &w,
             const tlrt_buffer *mask) {
  const attgeo::Placement P = attgeo::place(c.s, c.layout);
  const tlrt_attention_geometry g = attgeo::geometry(c.s, P);
  const auto hb = attgeo::host_buffers(c.s, P, in[0], in[1], in[2], 0.0f);
  th::Buf B[3], O, L;
  for (int i = 0; i < 3; ++i) B[i] = th::Buf(th::upload(hb[i]));
  if (tlrt_attention_fwd(B[P.v[0].buf].get(), B[P.v[1].buf].get(), B[P.v[2].buf].get(), mask, &g,
                         0.7, c.causal, c.fill, O.out(), L.out()) != TLRT_OK)
    return NAN;
  const std::vector<float> o = th::download(O.get());
  double s = 0;
  for (size_t e = 0; e < o.size(); ++e) s += (double)o[e] * w[e];
  return s;
}

void gcheck(const GCase &c, uint64_t salt) {
  const attgeo::Shape &s = c.s;
  std::vector<float> in[3] = {th::make(th::Dist::Uniform, s.q_elems(), salt + 1),
                              th::make(th::Dist::Uniform, s.kv_elems(), salt + 2),
                              th::make(th::Dist::Uniform, s.kv_elems(), salt + 3)};
  const std::vector<float> w = th::make(th::Dist::Uniform, s.q_elems(), salt + 4);
  th::Buf M;
  if (c.mask) {
    std::vector<float> m = th::make(th::Dist::Positive,
                                    (c.mask == 1 ? s.batch * s.hq : 1) * s.nq * s.nk, salt + 5);
    for (auto &x : m) x = x < 0.3f ? 0.0f : 1.0f;
    M = th::Buf(th::upload(m));
  }
  const attgeo::Placement P = attgeo::place(s, c.layout);
  const tlrt_attention_geometry g = attgeo::geometry(s, P);
  const auto hb = attgeo::host_buffers(s, P, in[0], in[1], in[2], 0.0f);
  th::Buf B[3], G[3], W(th::upload(w)), O, L;
  for (int i = 0; i < 3; ++i) {
    B[i] = th::Buf(th::upload(hb[i]));
    G[i] = th::Buf(th::upload(std::vector<float>(P.size[i], 0.0f)));
  }
  TH_OK(tlrt_attention_fwd(B[P.v[0].buf].get(), B[P.v[1].buf].get(), B[P.v[2].buf].get(), M.get(),
                           &g, 0.7, c.causal, c.fill, O.out(), L.out()));
  TH_OK(tlrt_attention_bwd(B[P.v[0].buf].get(), B[P.v[1].buf].get(), B[P.v[2].buf].get(), M.get(),
                           W.get(), O.get(), L.get(), &g, 0.7, c.causal, c.fill,
                           G[P.v[0].buf].get(), G[P.v[1].buf].get(), G[P.v[2].buf].get(), &g));
  const uint64_t T[3] = {s.nq, s.nk, s.nk}, H[3] = {s.hq, s.hkv, s.hkv};
  double wsum = 0;
  for (float x : w) wsum += std::fabs(x);
  for (int a = 0; a < 3; ++a) {
    const std::vector<float> gr =
        attgeo::gather(th::download(G[P.v[a].buf].get()), s.batch, T[a], H[a], s.d, P.v[a]);
    double gmax = 0;
    for (float x : gr) gmax = std::max(gmax, (double)std::fabs(x));
    int bad = 0;
    for (size_t e = 0; e < in[a].size(); ++e) {
      const float x0 = in[a][e], h = 1e-2f;
      in[a][e] = x0 + h;
      const double lp = gloss(c, in, w, M.get());
      in[a][e] = x0 - h;
      const double lm = gloss(c, in, w, M.get());
      in[a][e] = x0;
      const double fd = (lp - lm) / (2.0 * h);
      const double noise = std::isinf(c.fill) ? 0.0 : 4.0 * std::fabs(c.fill) * 0x1p-24 * wsum / h;
      const double tol = 2e-3 * std::fabs(fd) + 1e-3 * (gmax + 1e-3) + noise;
      if (!(std::fabs(fd - gr[e]) <= tol) && bad++ < 3)
        TH_CHECK_MSG(false, "geometry %s %s: d%c[%zu] = %g, finite difference %g",
                     attgeo::shape_str(s).c_str(), attgeo::layout_name(c.layout), "qkv"[a], e,
                     gr[e], fd);
    }
    TH_CHECK(bad == 0);
  }
}

}  // namespace

int main() {
  const Case cases[] = {
      {1, 1, 1, false, false, false, -INFINITY}, {1, 3, 2, false, false, false, -INFINITY},
      {2, 5, 3, true, false, false, -INFINITY},  {2, 5, 3, true, false, false, -1000.0},
      {1, 6, 4, false, true, false, -INFINITY},  {1, 6, 4, false, true, false, -1000.0},
      {1, 7, 3, true, true, true, -INFINITY},    {1, 7, 3, true, false, true, -1000.0},
      {1, 70, 2, true, true, false, -INFINITY},  // crosses a 64-key tile
  };
  uint64_t salt = 1000;
  for (const Case &c : cases) check(c, salt += 10);
  const GCase gcases[] = {
      {{1, 4, 2, 3, 5, 2}, attgeo::Layout::Padded, 1, true, -INFINITY},
      {{2, 2, 1, 4, 4, 3}, attgeo::Layout::Fused, 0, true, -1000.0},
      {{1, 4, 1, 1, 6, 2}, attgeo::Layout::TokenMajor, 2, true, -INFINITY},
      {{1, 2, 2, 5, 3, 2}, attgeo::Layout::HeadMajor, 0, true, -INFINITY},
      {{1, 2, 1, 3, 70, 2}, attgeo::Layout::TokenMajor, 2, false, -1000.0},
  };
  for (const GCase &c : gcases) gcheck(c, salt += 10);
  return th::finish("test_grad_attention");
}
