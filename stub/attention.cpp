// CPU backend, fused attention: the ORDER OF OPERATIONS of abi/tlrt_attention.h in every mode, the
// same IEEE operations as the exact CUDA kernels (cuda/kernels/attention.cuh) in the same order, so
// the two agree bit for bit.
//
// Problems (b, h) read their q, k, v rows through the views of the Geometry (k and v of head
// h / (hq / hkv)); out and dout are token-major.
// Forward: per problem, per block of 64 query rows, per row, per key tile of 64: the scores as
// fma chains over t (vectorised across the tile's 64 keys through a transposed copy of the K
// tile), the lane maxima / lane sums of the CUDA thread layout (lane x owns keys x, x + 8, ...,
// x + 56, combined in the butterfly of __shfl_xor 1, 2, 4, as seen by lane 0), the online-softmax
// update, and acc = fma(p, v[j, :], acc) over the tile's keys in order (vectorised across t).
// Keys past nk are computed like CUDA's zero padding: p = 0, v = 0.
// Backward: the same P and dS values; dv[j], dk[j] accumulate over the group's query heads
// ascending and within each over i ascending (one chain), dq[i] over j ascending, exactly as the
// CUDA kernels do, with the header's tile skipping (causal with exclusion: query tile t and key
// tile u meet when 64 u <= 64 t + 63 + nk - nq), which does not depend on the CUDA kernels' block
// sizes, and one fma(0, 0, acc) for every partial tile the CUDA kernels pad (it turns a -0
// accumulator into +0, as the padded steps on the GPU do; any other value is unchanged).
// Loops are built like stub/elementwise.cpp (-ffp-contract=off, clones for x86-64-v3/v4).
#include "core/backend/attention.hpp"

#include <algorithm>
#include <vector>

#include "stub/cpu_clones.hpp"

namespace tlrt {
namespace stub {

namespace {

using attn::Geometry;
using attn::kBc;
using attn::kCols;
using attn::kLanes;
using attn::kNegInf;

// The rows of one view of one problem: row i at p + i * stride.
// p + off, where an empty buffer's data pointer may be null (nq, nk or d zero): no arithmetic on
// a null pointer.
template <class T>
T *adv(T *p, uint64_t off) {
  return p ? p + off : p;
}

struct Rows {
  const float *p;
  uint64_t stride;
  const float *row(uint64_t i) const { return adv(p, i * stride); }
};
struct MutRows {
  float *p;
  uint64_t stride;
  float *row(uint64_t i) const { return adv(p, i * stride); }
};

// blocked(i, j) of the header for the problem whose mask (nq, nk) is mb (nullptr: none).
inline bool blocked(const Geometry &g, const float *mb, uint64_t i, uint64_t j) {
  if (g.causal && (int64_t)j > (int64_t)i + g.causal_offset()) return true;
  return mb && mb[i * g.nk + j] == 0.0f;
}

// kT[t * 64 + jj] = k[j0 + jj, t] (0 past n): the K tile transposed, so that the score loop
// vectorises across keys.
void load_kt(Rows k, uint64_t n, uint64_t d, uint64_t j0, float *kT) {
  for (uint64_t t = 0; t < d; ++t)
    for (unsigned jj = 0; jj < kBc; ++jj) kT[t * kBc + jj] = j0 + jj < n ? k.row(j0 + jj)[t] : 0.0f;
}

// dots[jj] = fma chain over t of a[t] * bT[t, jj], for the 64 keys of a tile.
TLRT_CPU_CLONES void dots64(const float *__restrict a, const float *__restrict bT, uint64_t d,
                            float *__restrict dots) {
  for (unsigned jj = 0; jj < kBc; ++jj) dots[jj] = 0.0f;
  for (uint64_t t = 0; t < d; ++t) {
    const float at = a[t];
    const float *row = bT + t * kBc;
    for (unsigned jj = 0; jj < kBc; ++jj) dots[jj] = num::fma(at, row[jj], dots[jj]);
  }
}

// p[jj] = prob(s[jj], ref) for the 64 keys of a tile.
TLRT_CPU_CLONES void probs64(const float *__restrict s, float ref, float *__restrict p) {
  for (unsigned jj = 0; jj < kBc; ++jj) p[jj] = attn::prob(s[jj], ref);
}

// acc[t] = fma(w, x[t], acc[t]).
TLRT_CPU_CLONES void axpy_row(float w, const float *__restrict x, uint64_t d,
                              float *__restrict acc) {
  for (uint64_t t = 0; t < d; ++t) acc[t] = num::fma(w, x[t], acc[t]);
}

// The partial-tile padding step of the CUDA kernels: acc = fma(0, 0, acc).
void pad_step(float *acc, uint64_t d) {
  for (uint64_t t = 0; t < d; ++t) acc[t] = num::fma(0.0f, 0.0f, acc[t]);
}

// Lane maximum / sum of the CUDA layout, as lane 0 sees them after the butterfly.
float tile_max(const float *s) {
  float lane[kLanes];
  for (unsigned x = 0; x < kLanes; ++x) {
    float m = s[x];
    for (unsigned c = 1; c < kCols; ++c) m = attn::amax(m, s[x + kLanes * c]);
    lane[x] = m;
  }
  for (unsigned w = 1; w < kLanes; w *= 2)
    for (unsigned x = 0; x < kLanes; x += 2 * w) lane[x] = attn::amax(lane[x], lane[x + w]);
  return lane[0];
}

float tile_sum(const float *p) {
  float lane[kLanes];
  for (unsigned x = 0; x < kLanes; ++x) {
    float s = p[x];
    for (unsigned c = 1; c < kCols; ++c) s = s + p[x + kLanes * c];
    lane[x] = s;
  }
  for (unsigned w = 1; w < kLanes; w *= 2)
    for (unsigned x = 0; x < kLanes; x += 2 * w) lane[x] = lane[x] + lane[x + w];
  return lane[0];
}

// Scores of row i (mask mb) against the key tile at j0 (transposed in kT): excluded past nk.
void tile_scores(const Geometry &g, const float *mb, uint64_t i, const float *qi, const float *kT,
                 uint64_t j0, float *s) {
  dots64(qi, kT, g.d, s);
  for (unsigned jj = 0; jj < kBc; ++jj) {
    const uint64_t j = j0 + jj;
    s[jj] = j < g.nk ? attn::score(s[jj], blocked(g, mb, i, j), g.scale, g.fill) : kNegInf;
  }
}

bool skips_causally(const Geometry &g) { return g.causal && g.fill == kNegInf; }

// The views of problem (b, h): its query rows, its key / value head's rows, its mask.
struct Prob {
  Rows q, k, v;
  const float *mask;
};
Prob problem(const Geometry &g, const float *q, const float *k, const float *v, uint64_t b,
             uint64_t h) {
  const uint64_t kv = h / g.group();
  return Prob{Rows{adv(q, b * g.q.batch + h * g.q.head), g.q.token},
              Rows{adv(k, b * g.k.batch + kv * g.k.head), g.k.token},
              Rows{adv(v, b * g.v.batch + kv * g.v.head), g.v.token},
              g.mask ? g.mask + (b * g.hq + h) * g.mask_stride : nullptr};
}

}  // namespace

// The CPU backend is exact in every mode: the precision is not consulted.
void attention_fwd(int, const Geometry &g, const float *q, const float *k, const float *v,
                   Precision, float *out, float *lse) {
  const uint64_t nq = g.nq, nk = g.nk, d = g.d;
  const uint64_t R = kBc;  // query rows per block (any block size gives the same values)
  const bool skip = skips_causally(g);
  std::vector<float> kT(d * kBc), s(kBc), pr(kBc), m(R), l(R), acc(R * d);
  for (uint64_t b = 0; b < g.batch; ++b)
    for (uint64_t h = 0; h < g.hq; ++h) {
      const Prob P = problem(g, q, k, v, b, h);
      const MutRows O{adv(out, (b * nq * g.hq + h) * d), g.hq * d};
      float *L = adv(lse, (b * g.hq + h) * nq);
      for (uint64_t i0 = 0; i0 < nq; i0 += R) {
        const uint64_t rows = std::min(R, nq - i0);
        // Key tiles this query tile visits: with skipping, those it meets.
        const uint64_t jend = attn::key_end(skip, i0, nk, g.causal_offset());
        std::fill(m.begin(), m.end(), kNegInf);
        std::fill(l.begin(), l.end(), 0.0f);
        std::fill(acc.begin(), acc.end(), 0.0f);
        for (uint64_t j0 = 0; j0 < jend; j0 += kBc) {
          load_kt(P.k, nk, d, j0, kT.data());
          for (uint64_t r = 0; r < rows; ++r) {
            const uint64_t i = i0 + r;
            float *ar = acc.data() + r * d;
            tile_scores(g, P.mask, i, P.q.row(i), kT.data(), j0, s.data());
            const float mn = attn::amax(m[r], tile_max(s.data()));
            const float alpha = mn == kNegInf ? 1.0f : math::exp_f(m[r] - mn);
            probs64(s.data(), mn, pr.data());
            l[r] = l[r] * alpha + tile_sum(pr.data());
            for (uint64_t t = 0; t < d; ++t) ar[t] = ar[t] * alpha;
            for (unsigned jj = 0; jj < kBc && j0 + jj < nk; ++jj)
              axpy_row(pr[jj], P.v.row(j0 + jj), d, ar);
            if (j0 + kBc > nk) pad_step(ar, d);
            m[r] = mn;
          }
        }
        for (uint64_t r = 0; r < rows; ++r) {
          const uint64_t i = i0 + r;
          float *oi = O.row(i);
          const float *ar = acc.data() + r * d;
          if (l[r] == 0.0f) {  // every key excluded (a NaN score makes l NaN, not 0)
            for (uint64_t t = 0; t < d; ++t) oi[t] = 0.0f;
            L[i] = kNegInf;
          } else {
            for (uint64_t t = 0; t < d; ++t) oi[t] = ar[t] / l[r];
            L[i] = m[r] + math::log_f(l[r]);
          }
        }
      }
    }
}

void attention_bwd(int, const Geometry &g, const float *q, const float *k, const float *v,
                   const float *out, const float *dout, const float *lse, Precision,
                   const attn::Grads &gr) {
  const uint64_t nq = g.nq, nk = g.nk, d = g.d, G = g.group();
  const bool need_ds = gr.dq || gr.dk;
  const bool skip = skips_causally(g);
  const int64_t off = g.causal_offset();
  std::vector<float> kT(d * kBc), vT(d * kBc), s(kBc), pr(kBc), dp(kBc), D(G * nq), dsr(kBc);
  // Per (batch, key / value head): its G query heads together, since dk and dv sum over them.
  // Rows are processed key tile by key tile (nothing of size nq x nk), and dk, dv accumulate
  // head by head, row by row (h, then i ascending, for every j).
  for (uint64_t b = 0; b < g.batch; ++b)
    for (uint64_t kv = 0; kv < g.hkv; ++kv) {
      const uint64_t h0 = kv * G;
      const Prob P0 = problem(g, q, k, v, b, h0);  // k, v rows are the group's
      const MutRows DK{gr.dk ? gr.dk + b * gr.k.batch + kv * gr.k.head : nullptr, gr.k.token};
      const MutRows DV{gr.dv ? gr.dv + b * gr.v.batch + kv * gr.v.head : nullptr, gr.v.token};
      auto dq_rows = [&](uint64_t h) {
        return MutRows{adv(gr.dq, b * gr.q.batch + h * gr.q.head), gr.q.token};
      };
      auto dout_rows = [&](uint64_t h) {
        return Rows{adv(dout, (b * nq * g.hq + h) * d), g.hq * d};
      };
      if (need_ds)
        for (uint64_t hh = 0; hh < G; ++hh) {
          const Rows DO = dout_rows(h0 + hh),
                     O{adv(out, (b * nq * g.hq + h0 + hh) * d), g.hq * d};
          for (uint64_t i = 0; i < nq; ++i) {
            float acc = 0.0f;
            for (uint64_t t = 0; t < d; ++t) acc = num::fma(DO.row(i)[t], O.row(i)[t], acc);
            D[hh * nq + i] = acc;
          }
        }
      if (gr.dq)
        for (uint64_t hh = 0; hh < G; ++hh)
          for (uint64_t i = 0; i < nq; ++i) {
            float *dqi = dq_rows(h0 + hh).row(i);
            std::fill(dqi, dqi + d, 0.0f);
          }
      for (uint64_t j = 0; j < nk; ++j) {
        if (gr.dk) std::fill(DK.row(j), DK.row(j) + d, 0.0f);
        if (gr.dv) std::fill(DV.row(j), DV.row(j) + d, 0.0f);
      }
      // Over key tiles of 64, then over the group's heads, then over query rows ascending.
      for (uint64_t j0 = 0; j0 < nk; j0 += kBc) {
        load_kt(P0.k, nk, d, j0, kT.data());
        if (need_ds) load_kt(P0.v, nk, d, j0, vT.data());
        const uint64_t jn = std::min<uint64_t>(kBc, nk - j0);
        for (uint64_t hh = 0; hh < G; ++hh) {
          const uint64_t h = h0 + hh;
          const Prob P = problem(g, q, k, v, b, h);
          const Rows DO = dout_rows(h);
          const float *L = adv(lse, (b * g.hq + h) * nq);
          for (uint64_t i = 0; i < nq; ++i) {
            // With skipping, row i's query tile and this key tile may not meet: then they skip
            // each other for dk / dv and for dq alike.
            if (skip && !attn::tiles_meet(i - i % kBc, j0, off)) continue;
            tile_scores(g, P.mask, i, P.q.row(i), kT.data(), j0, s.data());
            probs64(s.data(), L[i], pr.data());
            if (need_ds) {
              dots64(DO.row(i), vT.data(), d, dp.data());
              const float Di = D[hh * nq + i];
              for (unsigned jj = 0; jj < kBc; ++jj)
                dsr[jj] = s[jj] == kNegInf ? 0.0f : pr[jj] * (dp[jj] - Di);
            }
            for (uint64_t jj = 0; jj < jn; ++jj) {
              const uint64_t j = j0 + jj;
              if (gr.dv) axpy_row(pr[jj], DO.row(i), d, DV.row(j));
              if (gr.dk) axpy_row(dsr[jj], P.q.row(i), d, DK.row(j));
            }
            if (gr.dq) {
              float *dqi = dq_rows(h).row(i);
              for (uint64_t jj = 0; jj < jn; ++jj) axpy_row(dsr[jj], P.k.row(j0 + jj), d, dqi);
              if (jn < kBc) pad_step(dqi, d);
            }
          }
          // The dk / dv kernel pads each head's last query tile when nq is not a multiple of 64.
          if (nq % kBc != 0)
            for (uint64_t jj = 0; jj < jn; ++jj) {
              if (gr.dv) pad_step(DV.row(j0 + jj), d);
              if (gr.dk) pad_step(DK.row(j0 + jj), d);
            }
        }
      }
      if (gr.dq)
        for (uint64_t hh = 0; hh < G; ++hh)
          for (uint64_t i = 0; i < nq; ++i) {
            float *dqi = dq_rows(h0 + hh).row(i);
            for (uint64_t t = 0; t < d; ++t) dqi[t] = dqi[t] * g.scale;
          }
      if (gr.dk)
        for (uint64_t j = 0; j < nk; ++j) {
          float *dkj = DK.row(j);
          for (uint64_t t = 0; t < d; ++t) dkj[t] = dkj[t] * g.scale;
        }
    }
}

}  // namespace stub
}  // namespace tlrt
