// CPU backend, fused attention: the ORDER OF OPERATIONS of abi/tlrt_attention.h in every mode, the
// same IEEE operations as the exact CUDA kernels (cuda/kernels/attention.cuh) in the same order, so
// the two agree bit for bit.
//
// Forward: per problem, per block of 64 query rows, per row, per key tile of 64: the scores as
// fma chains over t (vectorised across the tile's 64 keys through a transposed copy of the K
// tile), the lane maxima / lane sums of the CUDA thread layout (lane x owns keys x, x + 8, ...,
// x + 56, combined in the butterfly of __shfl_xor 1, 2, 4, as seen by lane 0), the online-softmax
// update, and acc = fma(p, v[j, :], acc) over the tile's keys in order (vectorised across t).
// Keys past n are computed like CUDA's zero padding: p = 0, v = 0.
// Backward: the same P and dS values; dv[j], dk[j] accumulate over i ascending, dq[i] over j
// ascending, exactly as the CUDA kernels do, with the header's tile skipping (causal with
// exclusion: row i visits the key tiles starting at or before i; key j the query tiles ending at
// or after the start of j's tile), which does not depend on the CUDA kernels' block sizes, and
// one fma(0, 0, acc) for every partial tile the CUDA kernels pad (it turns a -0 accumulator into
// +0, as the padded steps on the GPU do; any other value is unchanged).
// Loops are built like stub/elementwise.cpp (-ffp-contract=off, clones for x86-64-v3/v4).
#include "core/backend/attention.hpp"

#include <algorithm>
#include <vector>

#include "stub/cpu_clones.hpp"

namespace tlrt {
namespace stub {

namespace {

using attn::kBc;
using attn::kCols;
using attn::kLanes;
using attn::kNegInf;
using attn::Problem;

// blocked(i, j) of the header for problem b.
inline bool blocked(const Problem &p, uint64_t b, uint64_t i, uint64_t j) {
  if (p.causal && j > i) return true;
  return p.mask && p.mask[b * p.mask_stride + i * p.n + j] == 0.0f;
}

// kT[t * 64 + jj] = k[j0 + jj, t] (0 past n): the K tile transposed, so that the score loop
// vectorises across keys.
void load_kt(const float *k, uint64_t n, uint64_t d, uint64_t j0, float *kT) {
  for (uint64_t t = 0; t < d; ++t)
    for (unsigned jj = 0; jj < kBc; ++jj)
      kT[t * kBc + jj] = j0 + jj < n ? k[(j0 + jj) * d + t] : 0.0f;
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

// Scores of row i (problem b) against the key tile at j0 (transposed in kT): excluded past n.
void tile_scores(const Problem &p, uint64_t b, uint64_t i, const float *qi, const float *kT,
                 uint64_t j0, float *s) {
  dots64(qi, kT, p.d, s);
  for (unsigned jj = 0; jj < kBc; ++jj) {
    const uint64_t j = j0 + jj;
    s[jj] = j < p.n ? attn::score(s[jj], blocked(p, b, i, j), p.scale, p.fill) : kNegInf;
  }
}

bool skips_causally(const Problem &p) { return p.causal && p.fill == kNegInf; }

}  // namespace

// The CPU backend is exact in every mode: the precision is not consulted.
void attention_fwd(int, const Problem &p, const float *q, const float *k, const float *v,
                   Precision, float *out, float *lse) {
  const uint64_t n = p.n, d = p.d;
  const uint64_t R = kBc;  // query rows per block (any block size gives the same values)
  std::vector<float> kT(d * kBc), s(kBc), pr(kBc), m(R), l(R), acc(R * d);
  for (uint64_t b = 0; b < p.bh; ++b) {
    const float *qb = q + b * n * d, *kb = k + b * n * d, *vb = v + b * n * d;
    for (uint64_t i0 = 0; i0 < n; i0 += R) {
      const uint64_t rows = std::min(R, n - i0);
      // Key tiles this query block visits: with skipping, those starting at or before its rows.
      const uint64_t jend = skips_causally(p) ? std::min(n, i0 + R) : n;
      std::fill(m.begin(), m.end(), kNegInf);
      std::fill(l.begin(), l.end(), 0.0f);
      std::fill(acc.begin(), acc.end(), 0.0f);
      for (uint64_t j0 = 0; j0 < jend; j0 += kBc) {
        load_kt(kb, n, d, j0, kT.data());
        for (uint64_t r = 0; r < rows; ++r) {
          const uint64_t i = i0 + r;
          float *ar = acc.data() + r * d;
          tile_scores(p, b, i, qb + i * d, kT.data(), j0, s.data());
          const float mn = attn::amax(m[r], tile_max(s.data()));
          const float alpha = mn == kNegInf ? 1.0f : math::exp_f(m[r] - mn);
          probs64(s.data(), mn, pr.data());
          l[r] = l[r] * alpha + tile_sum(pr.data());
          for (uint64_t t = 0; t < d; ++t) ar[t] = ar[t] * alpha;
          for (unsigned jj = 0; jj < kBc && j0 + jj < n; ++jj)
            axpy_row(pr[jj], vb + (j0 + jj) * d, d, ar);
          if (j0 + kBc > n) pad_step(ar, d);
          m[r] = mn;
        }
      }
      for (uint64_t r = 0; r < rows; ++r) {
        const uint64_t i = i0 + r;
        float *oi = out + (b * n + i) * d;
        const float *ar = acc.data() + r * d;
        if (l[r] == 0.0f) {  // every key excluded (a NaN score makes l NaN, not 0)
          for (uint64_t t = 0; t < d; ++t) oi[t] = 0.0f;
          lse[b * n + i] = kNegInf;
        } else {
          for (uint64_t t = 0; t < d; ++t) oi[t] = ar[t] / l[r];
          lse[b * n + i] = m[r] + math::log_f(l[r]);
        }
      }
    }
  }
}

void attention_bwd(int, const Problem &p, const float *q, const float *k, const float *v,
                   const float *out, const float *dout, const float *lse, Precision, float *dq,
                   float *dk, float *dv) {
  const uint64_t n = p.n, d = p.d;
  const bool need_ds = dq || dk;
  const bool skip = skips_causally(p);
  std::vector<float> kT(d * kBc), vT(d * kBc), s(kBc), pr(kBc), dp(kBc), D(n);
  // ds / p of one query row against all keys would be n floats: instead every row is processed
  // key tile by key tile, and dk, dv accumulate row by row (i ascending for every j).
  std::vector<float> dsr(kBc);
  for (uint64_t b = 0; b < p.bh; ++b) {
    const uint64_t o = b * n * d;
    const float *qb = q + o, *kb = k + o, *vb = v + o, *dob = dout + o;
    float *dqb = dq ? dq + o : nullptr, *dkb = dk ? dk + o : nullptr, *dvb = dv ? dv + o : nullptr;
    if (need_ds)
      for (uint64_t i = 0; i < n; ++i) {
        float acc = 0.0f;
        for (uint64_t t = 0; t < d; ++t) acc = num::fma(dob[i * d + t], out[o + i * d + t], acc);
        D[i] = acc;
      }
    if (dqb) std::fill(dqb, dqb + n * d, 0.0f);
    if (dkb) std::fill(dkb, dkb + n * d, 0.0f);
    if (dvb) std::fill(dvb, dvb + n * d, 0.0f);
    // Over key tiles of 64, then over query rows ascending.
    for (uint64_t j0 = 0; j0 < n; j0 += kBc) {
      load_kt(kb, n, d, j0, kT.data());
      if (need_ds) load_kt(vb, n, d, j0, vT.data());
      const uint64_t jn = std::min<uint64_t>(kBc, n - j0);
      for (uint64_t i = 0; i < n; ++i) {
        // With skipping, dk / dv of the keys of tile j0 skip the query tile of i when it ends
        // before j0 (i0 < j0), and dq[i] skips the key tiles starting after i.
        const uint64_t i0 = i - i % kBc;
        const bool dkdv_visits = !skip || i0 >= j0;
        const bool dq_visits = !skip || j0 <= i;
        if (!dkdv_visits && !dq_visits) continue;
        tile_scores(p, b, i, qb + i * d, kT.data(), j0, s.data());
        const float L = lse[b * n + i];
        probs64(s.data(), L, pr.data());
        if (need_ds) {
          dots64(dob + i * d, vT.data(), d, dp.data());
          for (unsigned jj = 0; jj < kBc; ++jj)
            dsr[jj] = s[jj] == kNegInf ? 0.0f : pr[jj] * (dp[jj] - D[i]);
        }
        if (dkdv_visits)
          for (uint64_t jj = 0; jj < jn; ++jj) {
            const uint64_t j = j0 + jj;
            if (dvb) axpy_row(pr[jj], dob + i * d, d, dvb + j * d);
            if (dkb) axpy_row(dsr[jj], qb + i * d, d, dkb + j * d);
          }
        if (dqb && dq_visits) {
          for (uint64_t jj = 0; jj < jn; ++jj)
            axpy_row(dsr[jj], kb + (j0 + jj) * d, d, dqb + i * d);
          if (jn < kBc) pad_step(dqb + i * d, d);
        }
      }
      // The dk / dv kernel pads its last query tile when n is not a multiple of 64.
      if (n % kBc != 0)
        for (uint64_t jj = 0; jj < jn; ++jj) {
          if (dvb) pad_step(dvb + (j0 + jj) * d, d);
          if (dkb) pad_step(dkb + (j0 + jj) * d, d);
        }
    }
    for (uint64_t e = 0; e < n * d; ++e) {
      if (dqb) dqb[e] = dqb[e] * p.scale;
      if (dkb) dkb[e] = dkb[e] * p.scale;
    }
  }
}

}  // namespace stub
}  // namespace tlrt
