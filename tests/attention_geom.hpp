// Shared by the tests of the geometry entry points (tlrt_attention_fwd / _bwd,
// abi/tlrt_attention.h): problem shapes with grouped heads and separate lengths, the memory
// layouts the tests place q, k, v (and the gradients) in, the scatter of logical (B, T, H, d)
// arrays into such a layout and the gather back, and a float64 reference of the DEFINITIONS in
// logical layouts, with the absolute companions A(x) of the header's error bound.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "harness.hpp"

namespace attgeo {

// The problem: batch, heads, lengths, d; mask: empty (none), len_q * len_k (broadcast) or
// batch * hq * len_q * len_k; fill -inf: exclusion.
struct Shape {
  uint64_t batch, hq, hkv, nq, nk, d;
  uint64_t group() const { return hq / hkv; }
  uint64_t q_elems() const { return batch * nq * hq * d; }  // also out, dout
  uint64_t kv_elems() const { return batch * nk * hkv * d; }
  uint64_t lse_elems() const { return batch * hq * nq; }
};

// Where the tests put q, k and v (and, with the same layout, dq, dk and dv):
//   TokenMajor  three buffers (B, T, H, d) row-major;
//   Fused       one buffer (B, T, (hq + 2 hkv) d), q heads then k heads then v heads per token
//               (needs nq == nk);
//   HeadMajor   three buffers (B, H, T, d) row-major (the (bh, n, d) layout of the flash entry
//               points when hq == hkv);
//   Padded      three buffers, token-major with gaps: rows of a token 2 apart past d, tokens 5
//               floats apart past the heads, batches 3 floats apart, offsets 1 / 7 / 2 (not 16-byte
//               aligned: the element-wise paths).
enum class Layout { TokenMajor, Fused, HeadMajor, Padded };

inline const char *layout_name(Layout l) {
  switch (l) {
    case Layout::TokenMajor: return "token-major";
    case Layout::Fused: return "fused";
    case Layout::HeadMajor: return "head-major";
    default: return "padded";
  }
}

// One view: which buffer (0, 1, 2), offset and strides.
struct View {
  int buf;
  uint64_t off, sb, st, sh;
};

struct Placement {
  View v[3];         // q, k, v
  uint64_t size[3];  // elements of buffers 0, 1, 2 (0: unused)
};

inline Placement place(const Shape &s, Layout l) {
  Placement p{};
  const uint64_t d = s.d;
  switch (l) {
    case Layout::TokenMajor:
      p.v[0] = {0, 0, s.nq * s.hq * d, s.hq * d, d};
      p.v[1] = {1, 0, s.nk * s.hkv * d, s.hkv * d, d};
      p.v[2] = {2, 0, s.nk * s.hkv * d, s.hkv * d, d};
      p.size[0] = s.q_elems();
      p.size[1] = p.size[2] = s.kv_elems();
      break;
    case Layout::Fused: {
      const uint64_t w = (s.hq + 2 * s.hkv) * d;
      p.v[0] = {0, 0, s.nq * w, w, d};
      p.v[1] = {0, s.hq * d, s.nq * w, w, d};
      p.v[2] = {0, (s.hq + s.hkv) * d, s.nq * w, w, d};
      p.size[0] = s.batch * s.nq * w;
      break;
    }
    case Layout::HeadMajor:
      p.v[0] = {0, 0, s.hq * s.nq * d, d, s.nq * d};
      p.v[1] = {1, 0, s.hkv * s.nk * d, d, s.nk * d};
      p.v[2] = {2, 0, s.hkv * s.nk * d, d, s.nk * d};
      p.size[0] = s.q_elems();
      p.size[1] = p.size[2] = s.kv_elems();
      break;
    case Layout::Padded: {
      const uint64_t offs[3] = {1, 7, 2};
      for (int i = 0; i < 3; ++i) {
        const uint64_t H = i == 0 ? s.hq : s.hkv, T = i == 0 ? s.nq : s.nk;
        const uint64_t sh = d + 2, st = H * sh + 5, sb = T * st + 3;
        p.v[i] = {i, offs[i], sb, st, sh};
        p.size[i] = offs[i] + s.batch * sb;
      }
      break;
    }
  }
  return p;
}

// The tlrt_attention_geometry of a shape and placement.
inline tlrt_attention_geometry geometry(const Shape &s, const Placement &p) {
  tlrt_attention_geometry g{};
  g.struct_size = sizeof g;
  g.batch = s.batch;
  g.heads_q = s.hq;
  g.heads_kv = s.hkv;
  g.len_q = s.nq;
  g.len_k = s.nk;
  g.d = s.d;
  uint64_t *f = &g.q_offset;
  for (int i = 0; i < 3; ++i) {
    f[4 * i] = p.v[i].off;
    f[4 * i + 1] = p.v[i].sb;
    f[4 * i + 2] = p.v[i].st;
    f[4 * i + 3] = p.v[i].sh;
  }
  return g;
}

// Logical (B, T, H, d) row-major values into a view of buf; and back.
inline void scatter(const std::vector<float> &x, uint64_t B, uint64_t T, uint64_t H, uint64_t d,
                    const View &v, std::vector<float> &buf) {
  for (uint64_t b = 0; b < B; ++b)
    for (uint64_t t = 0; t < T; ++t)
      for (uint64_t h = 0; h < H; ++h)
        for (uint64_t e = 0; e < d; ++e)
          buf[v.off + b * v.sb + t * v.st + h * v.sh + e] = x[((b * T + t) * H + h) * d + e];
}
inline std::vector<float> gather(const std::vector<float> &buf, uint64_t B, uint64_t T,
                                 uint64_t H, uint64_t d, const View &v) {
  std::vector<float> x(B * T * H * d);
  for (uint64_t b = 0; b < B; ++b)
    for (uint64_t t = 0; t < T; ++t)
      for (uint64_t h = 0; h < H; ++h)
        for (uint64_t e = 0; e < d; ++e)
          x[((b * T + t) * H + h) * d + e] = buf[v.off + b * v.sb + t * v.st + h * v.sh + e];
  return x;
}

// The host buffers of a placement holding logical q (B, nq, hq, d), k and v (B, nk, hkv, d);
// elements outside the views hold `pad`.
inline std::vector<std::vector<float>> host_buffers(const Shape &s, const Placement &p,
                                                    const std::vector<float> &q,
                                                    const std::vector<float> &k,
                                                    const std::vector<float> &v, float pad) {
  std::vector<std::vector<float>> bufs(3);
  for (int i = 0; i < 3; ++i) bufs[i].assign(p.size[i], pad);
  scatter(q, s.batch, s.nq, s.hq, s.d, p.v[0], bufs[p.v[0].buf]);
  scatter(k, s.batch, s.nk, s.hkv, s.d, p.v[1], bufs[p.v[1].buf]);
  scatter(v, s.batch, s.nk, s.hkv, s.d, p.v[2], bufs[p.v[2].buf]);
  return bufs;
}

// ---- float64 reference ---------------------------------------------------------------------

struct Case {
  Shape s;
  std::vector<float> mask;  // empty, nq * nk or batch * hq * nq * nk
  float scale, fill;
  bool causal;
};

inline bool blocked(const Case &c, uint64_t prob, uint64_t i, uint64_t j) {
  const Shape &s = c.s;
  if (c.causal && (int64_t)j > (int64_t)i + (int64_t)s.nk - (int64_t)s.nq) return true;
  if (c.mask.empty()) return false;
  const uint64_t stride = c.mask.size() == s.nq * s.nk ? 0 : s.nq * s.nk;
  return c.mask[prob * stride + i * s.nk + j] == 0.0f;
}

// Values and A(x) in logical layouts: out, dq (B, nq, hq, d); lse (B, hq, nq); dk, dv
// (B, nk, hkv, d); S: the header's S, the largest over the problem.
struct Ref {
  std::vector<double> out, lse, dq, dk, dv;
  std::vector<double> aout, alse, adq, adk, adv;
  double S = 0;
};

inline Ref reference(const Case &c, const std::vector<float> &q, const std::vector<float> &k,
                     const std::vector<float> &v, const std::vector<float> &dout) {
  const Shape &s = c.s;
  const uint64_t d = s.d, G = s.group();
  Ref r;
  r.out.assign(s.q_elems(), 0);
  r.aout = r.out;
  r.lse.assign(s.lse_elems(), 0);
  r.alse = r.lse;
  const bool bwd = !dout.empty();
  if (bwd) {
    r.dq = r.adq = r.out;
    r.dk.assign(s.kv_elems(), 0);
    r.adk = r.dv = r.adv = r.dk;
  }
  const double sc = c.scale, fill = c.fill;
  const bool excl = std::isinf(c.fill);
  std::vector<double> sv(s.nk), P(s.nk), dP(s.nk), adP(s.nk);
  std::vector<char> ex(s.nk);
  auto Q = [&](uint64_t b, uint64_t i, uint64_t h, uint64_t t) {
    return (double)q[((b * s.nq + i) * s.hq + h) * d + t];
  };
  auto KV = [&](const std::vector<float> &x, uint64_t b, uint64_t j, uint64_t g, uint64_t t) {
    return (double)x[((b * s.nk + j) * s.hkv + g) * d + t];
  };
  for (uint64_t b = 0; b < s.batch; ++b)
    for (uint64_t h = 0; h < s.hq; ++h) {
      const uint64_t g = h / G, prob = b * s.hq + h;
      for (uint64_t i = 0; i < s.nq; ++i) {
        const uint64_t oi = ((b * s.nq + i) * s.hq + h) * d, li = prob * s.nq + i;
        double smax = -INFINITY, Smag = 0;
        bool any_blocked = false;
        for (uint64_t j = 0; j < s.nk; ++j) {
          double dot = 0, adot = 0;
          for (uint64_t t = 0; t < d; ++t) {
            dot += Q(b, i, h, t) * KV(k, b, j, g, t);
            adot += std::fabs(Q(b, i, h, t) * KV(k, b, j, g, t));
          }
          Smag = std::max(Smag, std::fabs(sc) * adot);
          const bool bl = blocked(c, prob, i, j);
          any_blocked |= bl;
          ex[j] = bl && excl;
          sv[j] = dot * sc + (bl && !excl ? fill : 0.0);
          if (!ex[j]) smax = std::max(smax, sv[j]);
        }
        r.S = std::max(r.S, Smag + (any_blocked && !excl ? std::fabs(fill) : 0.0));
        double l = 0;
        for (uint64_t j = 0; j < s.nk; ++j) l += ex[j] ? 0.0 : std::exp(sv[j] - smax);
        const bool none = smax == -INFINITY;
        for (uint64_t j = 0; j < s.nk; ++j)
          P[j] = (ex[j] || none) ? 0.0 : std::exp(sv[j] - smax) / l;
        r.lse[li] = none ? -INFINITY : smax + std::log(l);
        r.alse[li] = 1 + (none ? 0 : std::fabs(r.lse[li]));
        for (uint64_t t = 0; t < d; ++t) {
          double a = 0, aa = 0;
          for (uint64_t j = 0; j < s.nk; ++j) {
            a += P[j] * KV(v, b, j, g, t);
            aa += P[j] * std::fabs(KV(v, b, j, g, t));
          }
          r.out[oi + t] = a;
          r.aout[oi + t] = aa;
        }
        if (!bwd) continue;
        double D = 0, aD = 0;
        for (uint64_t t = 0; t < d; ++t) {
          D += (double)dout[oi + t] * r.out[oi + t];
          aD += std::fabs((double)dout[oi + t] * r.out[oi + t]);
        }
        for (uint64_t j = 0; j < s.nk; ++j) {
          double a = 0, aa = 0;
          for (uint64_t t = 0; t < d; ++t) {
            a += (double)dout[oi + t] * KV(v, b, j, g, t);
            aa += std::fabs((double)dout[oi + t] * KV(v, b, j, g, t));
          }
          dP[j] = a;
          adP[j] = aa + aD;
        }
        for (uint64_t j = 0; j < s.nk; ++j) {
          const double dS = P[j] * (dP[j] - D), adS = P[j] * adP[j];
          const uint64_t kj = ((b * s.nk + j) * s.hkv + g) * d;
          for (uint64_t t = 0; t < d; ++t) {
            r.dq[oi + t] += sc * dS * KV(k, b, j, g, t);
            r.adq[oi + t] += std::fabs(sc) * adS * std::fabs(KV(k, b, j, g, t));
            r.dk[kj + t] += sc * dS * Q(b, i, h, t);
            r.adk[kj + t] += std::fabs(sc) * adS * std::fabs(Q(b, i, h, t));
            r.dv[kj + t] += P[j] * dout[oi + t];
            r.adv[kj + t] += P[j] * std::fabs((double)dout[oi + t]);
          }
        }
      }
    }
  return r;
}

// A random 0 / -0 / NaN / 1 / 2.5 selector mask (about 30% blocking) of `count` elements.
inline std::vector<float> random_mask(uint64_t count, uint64_t salt) {
  std::vector<float> m = th::make(th::Dist::Positive, count, salt);
  for (auto &x : m) x = x < 0.3f ? (x < 0.15f ? 0.0f : -0.0f) : (x < 0.33f ? NAN : (x < 0.4f ? 2.5f : 1.0f));
  return m;
}

inline std::string shape_str(const Shape &s) {
  char b[160];
  std::snprintf(b, sizeof b, "(B %llu, hq %llu, hkv %llu, nq %llu, nk %llu, d %llu)",
                (unsigned long long)s.batch, (unsigned long long)s.hq, (unsigned long long)s.hkv,
                (unsigned long long)s.nq, (unsigned long long)s.nk, (unsigned long long)s.d);
  return b;
}

}  // namespace attgeo
