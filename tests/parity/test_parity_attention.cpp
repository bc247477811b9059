// Parity of the attention entry points (abi/tlrt_attention.h): CPU and CUDA on the same seeded
// inputs, compared bit for bit with the determinism switch ON (the header's claim: both backends
// perform the same IEEE operations in the same order). Shapes cover every CUDA template (d = 32, 64, 128, 256 exact and
// the generic padded path: d = 1, 5, 33, 100, 200), n = 1, odd n, n across the 32/64/128-row
// block edges; masks none / per-problem / broadcast / causal / causal + mask / fully blocked rows,
// both fill conventions; special values (NaN, inf, subnormals) around skipped tiles; the fused
// backward on the CPU forward's out and lse, and the seeds' three single-gradient entry points;
// one n = 16384 problem whose device peak must stay far below n^2. The forward and the backward
// (fused and single-gradient) are compared bit for bit with the determinism switch ON (the exact
// kernels), since with it off the fast mma.sync kernels run.
// The fast path (switch off: the split-TF32 mma.sync forward, float32-grade; the split-TF32
// wgmma backward on 9.0 devices for 32 < d <= 128, else the exact backward)
// and the TF32 path (allow_tf32 on, switch off: the mma.sync forward with one product, the WMMA
// backward without a mask) are checked against
// the float64 reference of tests/attention_ref.hpp with the header's bounds on a grid of shapes
// (n = 1, odd, not a multiple of 16, up to 1024; d = 1 .. 256), masks (none, random, causal, fully
// blocked rows), both fills: out, lse and the three gradients of the fused backward on its out
// and lse, the single-gradient entry points, and run-to-run equality (bit for bit: no atomics).
// The geometry entry points (tlrt_attention_fwd / _bwd): bit for bit with the switch ON on
// grouped heads (heads_q = 4 over heads_kv = 1, 2), len_q != len_k (decode steps of one query,
// more queries than keys, no keys), views in place (token-major, one fused qkv buffer, padded and
// misaligned), causal and not, masks, d = 1, 32, 64, 80, 128 (and 33, 256), the gradient buffers
// compared whole (nothing outside the views written); with the switch OFF (split TF32) and with
// TF32 against float64 with the header's bounds (n = max(len_k, group len_q)), run to run, and,
// where the tensor-core kernels run on a copy of the views (len_q == len_k), bit for bit equal to
// the flash entry points on the copied (bh, n, d) problem (out, lse, dq; dk and dv without groups).
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "attention_geom.hpp"
#include "attention_ref.hpp"
#include "parity.hpp"

namespace {

using namespace parity;
using th::Buf;

// run_multi with the determinism switch on and not flipped: the exact kernels, bit for bit the
// CPU's (with the switch off the fast kernels run, checked by fast_path below).
void run_exact(const std::string &what, const MultiCall &fn) {
  const bool was = tlrt_set_deterministic(true);
  std::vector<Buf> cy, gy;
  const tlrt_status cs = fn(kCpu, cy);
  TH_CHECK_MSG(cs == TLRT_OK, "%s (cpu) failed: %s", what.c_str(), tlrt_last_error());
  const tlrt_status gs = fn(kGpu, gy);
  TH_CHECK_MSG(gs == TLRT_OK, "%s (cuda) failed: %s", what.c_str(), tlrt_last_error());
  tlrt_set_deterministic(was);
  if (cs != TLRT_OK || gs != TLRT_OK || cy.size() != gy.size()) {
    TH_CHECK_MSG(cy.size() == gy.size(), "%s: %zu outputs on the cpu, %zu on cuda", what.c_str(),
                 cy.size(), gy.size());
    ++summary().failed_runs;
    return;
  }
  for (size_t k = 0; k < gy.size(); ++k) {
    tlrt_device d = 0;
    TH_OK(tlrt_buffer_device(gy[k].get(), &d));
    TH_CHECK_MSG(d == kGpu, "%s: CUDA output %zu is on device 0x%x", what.c_str(), k, d);
    const std::string w = gy.size() > 1 ? what + " [output " + std::to_string(k) + "]" : what;
    compare(w, th::download(cy[k].get()), th::download(gy[k].get()));
  }
}

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
  run_exact(w + "fwd", [&](tlrt_device dev, std::vector<Buf> &o) {
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
  run_exact(w + "bwd", [&](tlrt_device dev, std::vector<Buf> &o) {
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
    run_exact(w + "bwd_" + "qkv"[s], [&](tlrt_device dev, std::vector<Buf> &o) {
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

// ---- fast path (switch off) and TF32 path (switch off, allow_tf32 on) against float64 -----------

double g_worst = 0, g_worst_fast = 0;  // worst error / bound: TF32 path, fast path
double *g_cls = &g_worst;              // the one the current checks update

void near(const std::string &what, const std::vector<float> &got, const std::vector<double> &ref,
          const std::vector<double> &abs, double factor) {
  TH_CHECK_MSG(got.size() == ref.size(), "%s: %zu elements, expected %zu", what.c_str(),
               got.size(), ref.size());
  if (got.size() != ref.size()) return;
  const int bad = attref::within_bound(what, got, ref, abs, factor, *g_cls);
  summary().runs++;
  summary().elements += got.size();
  if (bad) ++summary().failed_runs;
}

// mk: 0 none, 1 random per problem, 2 random broadcast, 3 causal, 5 fully blocked rows.
// tf32: allow_tf32 on (the TF32 bound), else off (the fast path's split-TF32 bound).
void fast_path(bool tf32, uint64_t bh, uint64_t n, uint64_t d, int mk, double fill,
               uint64_t salt) {
  const uint64_t N = bh * n * d;
  if (N > max_n()) return;
  const std::vector<float> q = th::make(th::Dist::Uniform, N, salt + 1),
                           k = th::make(th::Dist::Uniform, N, salt + 2),
                           v = th::make(th::Dist::Uniform, N, salt + 3),
                           dout = th::make(th::Dist::Uniform, N, salt + 4);
  attref::Case c{bh, n, d, {}, (float)(1.0 / std::sqrt((double)d)), (float)fill, mk == 3};
  if (mk == 1 || mk == 2 || mk == 5) {
    c.mask = th::make(th::Dist::Positive, mk == 2 ? n * n : bh * n * n, salt + 5);
    for (auto &x : c.mask) x = x < 0.3f ? 0.0f : 1.0f;
    if (mk == 5)
      for (uint64_t b = 0; b < (mk == 2 ? 1 : bh); ++b)
        for (uint64_t i = 0; i < n; i += 3)
          for (uint64_t j = 0; j < n; ++j) c.mask[b * n * n + i * n + j] = 0.0f;
  }
  const attref::Ref r = attref::reference(c, q, k, v, dout);
  const double S = *std::max_element(r.S.begin(), r.S.end());
  // The header's fast-path (split TF32) bound; TF32: plus 2^-11 (8 S + 8) (lse: 2^-11 (4 S + 4)).
  const double u = 0x1p-24, t = tf32 ? 0x1p-11 : 0.0;
  g_cls = tf32 ? &g_worst : &g_worst_fast;
  const double f = u * (4.0 * n + 8.0 * d + 16.0 * (d + 2) * S + 128) + t * (8.0 * S + 8);
  const double fl = u * (8.0 * (d + 2) * S + 4.0 * n + 16) + t * (4.0 * S + 4);
  const std::string w = std::string(tf32 ? "tf32 (" : "fast (") + std::to_string(bh) + ", " +
                        std::to_string(n) + ", " + std::to_string(d) + ") mask " +
                        std::to_string(mk) + " fill " + std::to_string(fill) + " ";
  const bool was_tf32 = tlrt_set_allow_tf32(tf32);
  Buf Q(th::upload(q, kGpu)), K(th::upload(k, kGpu)), V(th::upload(v, kGpu)),
      DO(th::upload(dout, kGpu)), M;
  if (!c.mask.empty()) M = Buf(th::upload(c.mask, kGpu));
  std::vector<float> first[5];
  for (int rep = 0; rep < 2; ++rep) {
    Buf O, L, dq, dk, dv;
    TH_OK(tlrt_flash_attention_fwd(Q.get(), K.get(), V.get(), M.get(), bh, n, d, c.scale, c.causal,
                                   fill, O.out(), L.out()));
    TH_OK(tlrt_flash_attention_bwd(Q.get(), K.get(), V.get(), M.get(), DO.get(), O.get(), L.get(),
                                   bh, n, d, c.scale, c.causal, fill, dq.out(), dk.out(),
                                   dv.out()));
    const std::vector<float> got[5] = {th::download(O.get()), th::download(L.get()),
                                       th::download(dq.get()), th::download(dk.get()),
                                       th::download(dv.get())};
    if (rep == 0) {
      near(w + "out", got[0], r.out, r.aout, f);
      near(w + "lse", got[1], r.lse, r.alse, fl);
      near(w + "dq", got[2], r.dq, r.adq, f);
      near(w + "dk", got[3], r.dk, r.adk, f);
      near(w + "dv", got[4], r.dv, r.adv, f);
      for (int o = 0; o < 5; ++o) first[o] = got[o];
    } else {
      for (int o = 0; o < 5; ++o)
        TH_CHECK_MSG(std::equal(first[o].begin(), first[o].end(), got[o].begin(), got[o].end(),
                                th::same_bits),
                     "%soutput %d differs between two runs", w.c_str(), o);
    }
  }
  // The single-gradient entry points: bit for bit the fused backward's (same forward inside).
  using Single = tlrt_status (*)(const tlrt_buffer *, const tlrt_buffer *, const tlrt_buffer *,
                                 const tlrt_buffer *, const tlrt_buffer *, uint64_t, uint64_t,
                                 uint64_t, double, bool, double, tlrt_buffer **);
  const Single fns[3] = {tlrt_flash_attention_bwd_q, tlrt_flash_attention_bwd_k,
                         tlrt_flash_attention_bwd_v};
  for (int s = 0; s < 3; ++s) {
    Buf G;
    TH_OK(fns[s](Q.get(), K.get(), V.get(), M.get(), DO.get(), bh, n, d, c.scale, c.causal, fill,
                 G.out()));
    const std::vector<float> g = th::download(G.get());
    TH_CHECK_MSG(std::equal(first[2 + s].begin(), first[2 + s].end(), g.begin(), g.end(),
                            th::same_bits),
                 "%sbwd_%c differs from the fused backward", w.c_str(), "qkv"[s]);
  }
  tlrt_set_allow_tf32(was_tf32);
}

// ---- the geometry entry points ------------------------------------------------------------------

// Inputs of one geometry case, host side.
struct GIn {
  attgeo::Case c;
  attgeo::Layout layout;
  std::vector<float> q, k, v, dout;  // logical layouts
};

GIn make_gin(const attgeo::Shape &s, attgeo::Layout l, int mk, double fill, uint64_t salt,
             th::Dist dist = th::Dist::Uniform) {
  GIn in{attgeo::Case{s, {}, (float)(1.0 / std::sqrt((double)std::max<uint64_t>(s.d, 1))),
                      (float)fill, mk == 3 || mk == 4},
         l, th::make(dist, s.q_elems(), salt + 1), th::make(dist, s.kv_elems(), salt + 2),
         th::make(dist, s.kv_elems(), salt + 3), th::make(th::Dist::Uniform, s.q_elems(), salt + 4)};
  if (mk == 1) in.c.mask = attgeo::random_mask(s.batch * s.hq * s.nq * s.nk, salt + 5);
  if (mk == 2 || mk == 4) in.c.mask = attgeo::random_mask(s.nq * s.nk, salt + 5);
  return in;
}

// The device buffers of a case: q, k, v placed, the mask, dout, and the geometry.
struct GDev {
  attgeo::Placement P;
  tlrt_attention_geometry g;
  Buf B[3], M, DO;
  const tlrt_buffer *q() const { return B[P.v[0].buf].get(); }
  const tlrt_buffer *k() const { return B[P.v[1].buf].get(); }
  const tlrt_buffer *v() const { return B[P.v[2].buf].get(); }
};

GDev upload_gin(const GIn &in, tlrt_device dev) {
  GDev d;
  d.P = attgeo::place(in.c.s, in.layout);
  d.g = attgeo::geometry(in.c.s, d.P);
  const auto hb = attgeo::host_buffers(in.c.s, d.P, in.q, in.k, in.v, 3.0f);
  for (int i = 0; i < 3; ++i) d.B[i] = Buf(th::upload(hb[i], dev));
  if (!in.c.mask.empty()) d.M = Buf(th::upload(in.c.mask, dev));
  d.DO = Buf(th::upload(in.dout, dev));
  return d;
}

// The backward into three gradient buffers of the placement (9.0 outside the views); outs gets
// them (buffers 0, 1, 2; the fused layout uses buffer 0 only).
tlrt_status geometry_bwd(const GIn &in, const GDev &d, const tlrt_buffer *O, const tlrt_buffer *L,
                         tlrt_device dev, std::vector<Buf> &outs) {
  outs.resize(3);
  for (int i = 0; i < 3; ++i)
    outs[i] = Buf(th::upload(std::vector<float>(d.P.size[i], 9.0f), dev));
  return tlrt_attention_bwd(d.q(), d.k(), d.v(), d.M.get(), d.DO.get(), O, L, &d.g, in.c.scale,
                            in.c.causal, in.c.fill, outs[d.P.v[0].buf].get(),
                            outs[d.P.v[1].buf].get(), outs[d.P.v[2].buf].get(), &d.g);
}

void geometry_exact(const GIn &in, const std::string &w) {
  if (in.c.s.q_elems() + 2 * in.c.s.kv_elems() > max_n()) return;
  run_exact(w + " fwd", [&](tlrt_device dev, std::vector<Buf> &o) {
    const GDev d = upload_gin(in, dev);
    o.resize(2);
    return tlrt_attention_fwd(d.q(), d.k(), d.v(), d.M.get(), &d.g, in.c.scale, in.c.causal,
                              in.c.fill, o[0].out(), o[1].out());
  });
  std::vector<float> out, lse;
  {
    const GDev d = upload_gin(in, kCpu);
    Buf O, L;
    TH_OK(tlrt_attention_fwd(d.q(), d.k(), d.v(), d.M.get(), &d.g, in.c.scale, in.c.causal,
                             in.c.fill, O.out(), L.out()));
    out = th::download(O.get());
    lse = th::download(L.get());
  }
  run_exact(w + " bwd", [&](tlrt_device dev, std::vector<Buf> &o) {
    const GDev d = upload_gin(in, dev);
    const Buf O(th::upload(out, dev)), L(th::upload(lse, dev));
    return geometry_bwd(in, d, O.get(), L.get(), dev, o);
  });
}

// The switch off: against float64 with the mode's bound, run to run; for len_q == len_k also bit
// for bit the flash entry points on the problem copied to (bh, n, d) (what the CUDA backend runs:
// the same kernels on the same values).
void geometry_fast(bool tf32, const GIn &in, const std::string &w0) {
  const attgeo::Shape &s = in.c.s;
  if (s.q_elems() + 2 * s.kv_elems() > max_n()) return;
  const attgeo::Ref r = attgeo::reference(in.c, in.q, in.k, in.v, in.dout);
  const double u = 0x1p-24, t = tf32 ? 0x1p-11 : 0.0, S = r.S;
  const double n = (double)std::max(s.nk, s.group() * s.nq), d = (double)s.d;
  const double f = u * (4.0 * n + 8.0 * d + 16.0 * (d + 2) * S + 128) + t * (8.0 * S + 8);
  const double fl = u * (8.0 * (d + 2) * S + 4.0 * n + 16) + t * (4.0 * S + 4);
  g_cls = tf32 ? &g_worst : &g_worst_fast;
  const std::string w = std::string(tf32 ? "tf32 " : "fast ") + w0 + " ";
  const bool was_tf32 = tlrt_set_allow_tf32(tf32);
  const GDev dv = upload_gin(in, kGpu);
  std::vector<float> first[5];
  for (int rep = 0; rep < 2; ++rep) {
    Buf O, L;
    std::vector<Buf> G;
    TH_OK(tlrt_attention_fwd(dv.q(), dv.k(), dv.v(), dv.M.get(), &dv.g, in.c.scale, in.c.causal,
                             in.c.fill, O.out(), L.out()));
    TH_OK(geometry_bwd(in, dv, O.get(), L.get(), kGpu, G));
    if (!O.get() || G.size() != 3) break;
    std::vector<float> got[5] = {th::download(O.get()), th::download(L.get())};
    const uint64_t T[3] = {s.nq, s.nk, s.nk}, H[3] = {s.hq, s.hkv, s.hkv};
    for (int i = 0; i < 3; ++i)
      got[2 + i] = attgeo::gather(th::download(G[dv.P.v[i].buf].get()), s.batch, T[i], H[i], s.d,
                                  dv.P.v[i]);
    if (rep == 0) {
      near(w + "out", got[0], r.out, r.aout, f);
      near(w + "lse", got[1], r.lse, r.alse, fl);
      near(w + "dq", got[2], r.dq, r.adq, f);
      near(w + "dk", got[3], r.dk, r.adk, f);
      near(w + "dv", got[4], r.dv, r.adv, f);
      for (int o = 0; o < 5; ++o) first[o] = got[o];
    } else {
      for (int o = 0; o < 5; ++o)
        TH_CHECK_MSG(std::equal(first[o].begin(), first[o].end(), got[o].begin(), got[o].end(),
                                th::same_bits),
                     "%soutput %d differs between two runs", w.c_str(), o);
    }
  }
  if (s.nq == s.nk && s.nq > 0 && s.d > 0) {
    // The (bh, n, d) problem the tensor-core kernels run: head-major, key / value heads repeated.
    const uint64_t bh = s.batch * s.hq, n1 = s.nq, G = s.group();
    std::vector<float> q(bh * n1 * s.d), k(q.size()), v(q.size()), dout(q.size());
    for (uint64_t b = 0; b < s.batch; ++b)
      for (uint64_t h = 0; h < s.hq; ++h)
        for (uint64_t i = 0; i < n1; ++i)
          for (uint64_t e = 0; e < s.d; ++e) {
            const uint64_t to = ((b * s.hq + h) * n1 + i) * s.d + e,
                           qi = ((b * n1 + i) * s.hq + h) * s.d + e,
                           ki = ((b * n1 + i) * s.hkv + h / G) * s.d + e;
            q[to] = in.q[qi], dout[to] = in.dout[qi], k[to] = in.k[ki], v[to] = in.v[ki];
          }
    Buf Q(th::upload(q, kGpu)), K(th::upload(k, kGpu)), V(th::upload(v, kGpu)),
        DO(th::upload(dout, kGpu)), O, L, dq, dk, dvv;
    TH_OK(tlrt_flash_attention_fwd(Q.get(), K.get(), V.get(), dv.M.get(), bh, n1, s.d, in.c.scale,
                                   in.c.causal, in.c.fill, O.out(), L.out()));
    TH_OK(tlrt_flash_attention_bwd(Q.get(), K.get(), V.get(), dv.M.get(), DO.get(), O.get(),
                                   L.get(), bh, n1, s.d, in.c.scale, in.c.causal, in.c.fill,
                                   dq.out(), dk.out(), dvv.out()));
    const std::vector<float> fo = th::download(O.get()), fl_ = th::download(L.get()),
                             fq = th::download(dq.get()), fk = th::download(dk.get()),
                             fv = th::download(dvv.get());
    bool same = fl_.size() == first[1].size() &&
                std::equal(fl_.begin(), fl_.end(), first[1].begin(), th::same_bits);
    for (uint64_t b = 0; b < s.batch && same; ++b)
      for (uint64_t i = 0; i < n1 && same; ++i)
        for (uint64_t h = 0; h < s.hq && same; ++h)
          for (uint64_t e = 0; e < s.d && same; ++e) {
            const uint64_t fi = ((b * s.hq + h) * n1 + i) * s.d + e,
                           gi = ((b * n1 + i) * s.hq + h) * s.d + e;
            same = th::same_bits(fo[fi], first[0][gi]) && th::same_bits(fq[fi], first[2][gi]);
            // dk, dv: with groups the exact backward (where no tensor-core one runs) sums the
            // group in one chain, the copied problem head by head: compared for G == 1 only.
            if (G == 1 && same)
              same = th::same_bits(fk[fi], first[3][gi]) && th::same_bits(fv[fi], first[4][gi]);
          }
    TH_CHECK_MSG(same, "%sdiffers from the flash entry points on the copied problem", w.c_str());
  }
  tlrt_set_allow_tf32(was_tf32);
}

void geometry_cases() {
  struct GD {
    uint64_t B, hq, hkv, nq, nk, d;
  };
  const GD shapes[] = {{1, 4, 1, 1, 300, 64},  {2, 4, 2, 1, 77, 128}, {2, 4, 2, 130, 130, 64},
                       {1, 4, 1, 200, 200, 32}, {1, 2, 1, 65, 257, 80}, {1, 4, 2, 300, 70, 128},
                       {2, 4, 4, 33, 33, 1},    {1, 4, 1, 100, 100, 80}, {1, 4, 2, 17, 5, 33},
                       {1, 2, 1, 90, 90, 256},  {1, 2, 1, 5, 0, 32},    {3, 4, 1, 129, 129, 128}};
  uint64_t salt = 50000;
  for (const GD &g : shapes)
    for (attgeo::Layout l : {attgeo::Layout::TokenMajor, attgeo::Layout::Fused,
                             attgeo::Layout::Padded}) {
      if (l == attgeo::Layout::Fused && g.nq != g.nk) continue;
      const attgeo::Shape s{g.B, g.hq, g.hkv, g.nq, g.nk, g.d};
      for (int mk : {0, 1, 2, 3, 4})
        for (double fill : {-(double)INFINITY, -1000.0}) {
          if (fill == -1000.0 && mk != 1 && mk != 3) continue;
          const GIn in = make_gin(s, l, mk, fill, salt += 10);
          const std::string w = "geometry " + attgeo::shape_str(s) + " " +
                                attgeo::layout_name(l) + " mask " + std::to_string(mk) +
                                " fill " + std::to_string(fill);
          geometry_exact(in, w);
          const bool was_det = tlrt_set_deterministic(false);
          for (bool tf32 : {false, true}) geometry_fast(tf32, in, w);
          tlrt_set_deterministic(was_det);
        }
    }
  // Special values around the skipped and padded tiles of grouped heads and decode steps.
  for (th::Dist dist : {th::Dist::Edge, th::Dist::Bits})
    for (const GD &g : {GD{1, 4, 2, 130, 130, 64}, GD{1, 4, 1, 1, 70, 32}, GD{1, 2, 1, 100, 40, 80}})
      for (int mk : {0, 3}) {
        const attgeo::Shape s{g.B, g.hq, g.hkv, g.nq, g.nk, g.d};
        geometry_exact(make_gin(s, attgeo::Layout::TokenMajor, mk, -(double)INFINITY, salt += 10,
                                dist),
                       "geometry special " + attgeo::shape_str(s) + " " + th::dist_name(dist));
      }
}

}  // namespace

int main() {
  if (!start("parity_attention")) return 77;
  // The bitwise CPU == CUDA checks (the default path; run_multi flips the switch too).
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
  // The fast path (switch off) and the TF32 path (switch off, allow_tf32 on).
  const bool was_det = tlrt_set_deterministic(false);
  for (bool tf32 : {false, true}) {
    for (Dims s : {Dims{1, 1, 1}, Dims{2, 1, 64}, Dims{1, 3, 8}, Dims{2, 17, 64}, Dims{1, 33, 100},
                   Dims{1, 70, 128}, Dims{1, 67, 256}, Dims{2, 130, 64}, Dims{1, 129, 1},
                   Dims{1, 200, 128}, Dims{1, 47, 32}, Dims{1, 65, 40}, Dims{3, 16, 16},
                   Dims{2, 7, 8}, Dims{1, 300, 64}, Dims{1, 50, 200}})
      for (int mk : {0, 1, 2, 3, 5})
        for (double fill : {-(double)INFINITY, -1000.0})
          fast_path(tf32, s.bh, s.n, s.d, mk, fill, salt += 10);
    fast_path(tf32, 4, 1024, 64, 3, -(double)INFINITY, 2999);
    fast_path(tf32, 2, 1000, 128, 1, -(double)INFINITY, 3999);
    fast_path(tf32, 2, 513, 64, 0, -(double)INFINITY, 4999);
    fast_path(tf32, 1, 777, 100, 2, -1000.0, 5999);
    fast_path(tf32, 2, 1024, 64, 0, -(double)INFINITY, 7999);
    // Many whole masked tiles on the Hopper backward's exclusion words (mask_fill = -inf): one
    // mask per problem (words per problem) and a broadcast mask, n % 4 == 0 (float4 mask loads),
    // then per problem with the additive fill (the general score path on every tile).
    fast_path(tf32, 3, 1024, 64, 1, -(double)INFINITY, 8999);
    fast_path(tf32, 3, 1024, 48, 2, -(double)INFINITY, 9999);
    fast_path(tf32, 2, 640, 64, 1, -1000.0, 10999);
    // The forward and the Hopper backward at 64 < d <= 128 (32-row steps) over many whole tiles:
    // exclusion words (per problem, broadcast), causal with skipping, the additive fill, n not a
    // multiple of 64.
    fast_path(tf32, 3, 1024, 128, 1, -(double)INFINITY, 11999);
    fast_path(tf32, 2, 768, 96, 2, -(double)INFINITY, 12999);
    fast_path(tf32, 2, 1000, 128, 3, -(double)INFINITY, 13999);
    fast_path(tf32, 2, 700, 72, 1, -1000.0, 14999);
    const bool was_tf32 = tlrt_set_allow_tf32(tf32);
    long_problem();  // the tensor-core kernels allocate nothing of size n^2 either
    tlrt_set_allow_tf32(was_tf32);
  }
  geometry_cases();
  std::printf("parity_attention fast path: worst error / bound %.3g\n", g_worst_fast);
  std::printf("parity_attention TF32 path: worst error / bound %.3g\n", g_worst);
  tlrt_set_deterministic(was_det);
  print_summary("parity_attention");
  return th::finish("test_parity_attention");
}
