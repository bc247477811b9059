// CPU backend, selective scan: the DEFINITIONS of abi/tlrt_scan.h evaluated literally with the step
// formulas of core/backend/scan.hpp, vectorised across channels (one row of D channels per step).
//
// Forward: one pass over time. Per chunk of TLRT_SCAN_CHUNK steps the running l (local state) and
// P (product of A) rows are updated and out[t] = l + P * k written at once, k the chunk's carry-in;
// the next carry is out at the chunk's last step (the same operation the CUDA carry phase
// performs). Backward: one pass backwards over time, chunk by chunk: m, Q rows and the adjoint
// g = m + Q * q (the last chunk: g = m), q = A_{cL} * g_{cL} for the chunk before; diag_var writes
// dA, dB, dX per step, diag stores g in dX and then folds the tree's lanes of dA and dB down the
// columns (like stub/layer_norm.cpp's dgamma / dbeta) and rewrites dX = B * g.
// Loops are built like stub/elementwise.cpp (-O3, -fno-trapping-math, clones for x86-64-v3/v4,
// -ffp-contract=off): every clone performs the same IEEE operations in the same order.
#include "core/backend/scan.hpp"

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/backend/reduce.hpp"
#include "core/numerics/row_ops.hpp"
#include "stub/cpu_clones.hpp"

namespace tlrt {
namespace stub {

namespace {

using scan::kChunk;

// Row kernels over the D channels of one step. a and b are rows of the (T, D) coefficients (var)
// or the D-vectors themselves (diag); either way channel j's coefficient is a[j].

// First step of a chunk: l = b * x, P = a, h = l + P * k.
TLRT_CPU_CLONES void fwd_first_row(const float *__restrict a, const float *__restrict b,
                                   const float *__restrict x, const float *__restrict k, uint64_t n,
                                   float *__restrict l, float *__restrict p, float *__restrict h) {
  for (uint64_t j = 0; j < n; ++j) {
    const float lj = scan::fwd_first(b[j], x[j]);
    const float pj = a[j];
    l[j] = lj;
    p[j] = pj;
    h[j] = scan::apply(lj, pj, k[j]);
  }
}

// Later step: l = a * l + b * x, P = P * a, h = l + P * k.
TLRT_CPU_CLONES void fwd_row(const float *__restrict a, const float *__restrict b,
                             const float *__restrict x, const float *__restrict k, uint64_t n,
                             float *__restrict l, float *__restrict p, float *__restrict h) {
  for (uint64_t j = 0; j < n; ++j) {
    const float lj = scan::fwd_step(a[j], l[j], b[j], x[j]);
    const float pj = scan::mul(p[j], a[j]);
    l[j] = lj;
    p[j] = pj;
    h[j] = scan::apply(lj, pj, k[j]);
  }
}

// Backward, the last step of a chunk: m = dy, Q = 1, g = m + Q * q (has_q) or m.
TLRT_CPU_CLONES void bwd_last_row(const float *__restrict dy, const float *__restrict q, bool has_q,
                                  uint64_t n, float *__restrict m, float *__restrict Q,
                                  float *__restrict g) {
  for (uint64_t j = 0; j < n; ++j) {
    const float mj = dy[j];
    m[j] = mj;
    Q[j] = 1.0f;
    g[j] = has_q ? scan::apply(mj, 1.0f, q[j]) : mj;
  }
}

// Backward, an earlier step: m = a_next * m + dy, Q = a_next * Q, g = m + Q * q (has_q) or m.
TLRT_CPU_CLONES void bwd_row(const float *__restrict an, const float *__restrict dy,
                             const float *__restrict q, bool has_q, uint64_t n,
                             float *__restrict m, float *__restrict Q, float *__restrict g) {
  for (uint64_t j = 0; j < n; ++j) {
    const float mj = scan::bwd_step(an[j], m[j], dy[j]);
    const float qj = scan::mul(an[j], Q[j]);
    m[j] = mj;
    Q[j] = qj;
    g[j] = has_q ? scan::apply(mj, qj, q[j]) : mj;
  }
}

// y[j] = a[j] * b[j].
TLRT_CPU_CLONES void mul_row(const float *__restrict a, const float *__restrict b, uint64_t n,
                             float *__restrict y) {
  for (uint64_t j = 0; j < n; ++j) y[j] = scan::mul(a[j], b[j]);
}

// y[j] = b[j] * y[j] (in place).
TLRT_CPU_CLONES void scale_row(const float *__restrict b, uint64_t n, float *__restrict y) {
  for (uint64_t j = 0; j < n; ++j) y[j] = scan::mul(b[j], y[j]);
}

// diag_var's per-step gradients from g: dA = hp * g, dB = x * g, dX = b * g.
TLRT_CPU_CLONES void var_grads_row(const float *__restrict g, const float *__restrict hp,
                                   const float *__restrict x, const float *__restrict b,
                                   uint64_t n, float *__restrict da, float *__restrict db,
                                   float *__restrict dx) {
  for (uint64_t j = 0; j < n; ++j) {
    const float gj = g[j];
    da[j] = scan::mul(hp[j], gj);
    db[j] = scan::mul(x[j], gj);
    dx[j] = scan::mul(b[j], gj);
  }
}

// One row folded into a lane's accumulators: aa += hp * g, ab += x * g.
TLRT_CPU_CLONES void fold_row(const float *__restrict g, const float *__restrict hp,
                              const float *__restrict x, uint64_t w, float *__restrict aa,
                              float *__restrict ab) {
  for (uint64_t j = 0; j < w; ++j) {
    aa[j] = aa[j] + scan::mul(hp[j], g[j]);
    ab[j] = ab[j] + scan::mul(x[j], g[j]);
  }
}

// The forward of both variants; var: A and B are (T, D), else D-vectors.
void forward(const float *A, const float *B, const float *X, const float *h0, uint64_t T,
             uint64_t D, float *out, bool var) {
  std::vector<float> l(D), p(D);
  const float *k = h0;  // carry-in: h0, then out at the previous chunk's last step
  for (uint64_t c0 = 0; c0 < T; c0 += kChunk) {
    const uint64_t e = std::min(c0 + kChunk, T);
    for (uint64_t t = c0; t < e; ++t) {
      const float *a = var ? A + t * D : A, *b = var ? B + t * D : B;
      if (t == c0)
        fwd_first_row(a, b, X + t * D, k, D, l.data(), p.data(), out + t * D);
      else
        fwd_row(a, b, X + t * D, k, D, l.data(), p.data(), out + t * D);
    }
    k = out + (e - 1) * D;
  }
}

// The adjoint pass of both variants: calls row(t, g) for t = T-1 down to 0 with the adjoint row
// g_t, and writes dH0 = A_0 * g_0.
template <class Row>
void adjoint(const float *A, const float *dY, uint64_t T, uint64_t D, bool var, float *dH0,
             Row row) {
  std::vector<float> m(D), Q(D), q(D), g(D);
  const uint64_t C = scan::chunks(T);
  for (uint64_t c = C; c-- > 0;) {
    const uint64_t c0 = c * kChunk, e = scan::chunk_end(c, T);
    const bool has_q = c + 1 < C;
    for (uint64_t t = e + 1; t-- > c0;) {
      if (t == e)
        bwd_last_row(dY + t * D, q.data(), has_q, D, m.data(), Q.data(), g.data());
      else
        bwd_row(var ? A + (t + 1) * D : A, dY + t * D, q.data(), has_q, D, m.data(), Q.data(),
                g.data());
      row(t, g.data());
    }
    // q for the chunk before (for chunk 0 this is dH0 = A_0 * g_0).
    mul_row(var ? A + c0 * D : A, g.data(), D, c == 0 ? dH0 : q.data());
  }
}

}  // namespace

void scan_diag_fwd(int, const float *A, const float *B, const float *X, const float *h0,
                   uint64_t T, uint64_t D, float *out) {
  forward(A, B, X, h0, T, D, out, false);
}

void scan_var_fwd(int, const float *A, const float *B, const float *X, const float *h0, uint64_t T,
                  uint64_t D, float *out) {
  forward(A, B, X, h0, T, D, out, true);
}

void scan_var_bwd(int, const float *A, const float *B, const float *X, const float *h0,
                  const float *out, const float *dY, uint64_t T, uint64_t D, float *dA, float *dB,
                  float *dX, float *dH0) {
  adjoint(A, dY, T, D, true, dH0, [&](uint64_t t, const float *g) {
    const uint64_t o = t * D;
    var_grads_row(g, t == 0 ? h0 : out + o - D, X + o, B + o, D, dA + o, dB + o, dX + o);
  });
}

void scan_diag_bwd(int, const float *A, const float *B, const float *X, const float *h0,
                   const float *out, const float *dY, uint64_t T, uint64_t D, float *dA, float *dB,
                   float *dX, float *dH0) {
  // The adjoint rows, kept in dX.
  adjoint(A, dY, T, D, false, dH0, [&](uint64_t t, const float *g) {
    std::memcpy(dX + t * D, g, D * sizeof(float));
  });
  // dA, dB: THE TREE down each column, per tile of up to kTile columns and per chunk of 4096
  // steps: lane t's accumulator row folds steps 4096 k + t + 256 r (r = 0..15) in order, then
  // reduce_axis halves the lane rows of the chunk and, with several chunks, reduces the chunk rows.
  constexpr uint64_t kTile = 1024;
  const uint64_t nc = red::chunks_of(T);
  const unsigned L = row::col_lanes(T);
  const uint64_t wmax = std::min(D, kTile);
  std::vector<float> pa((uint64_t)L * wmax), pb((uint64_t)L * wmax);
  std::vector<float> ca(nc > 1 ? nc * D : 0), cb(nc > 1 ? nc * D : 0);
  const float id = red::Ops<red::Op::Sum>::identity();
  for (uint64_t c0 = 0; c0 < D; c0 += kTile) {
    const uint64_t w = std::min(kTile, D - c0);
    for (uint64_t k = 0; k < nc; ++k) {
      for (unsigned t = 0; t < L; ++t) {
        float *aa = pa.data() + (uint64_t)t * w;
        float *ab = pb.data() + (uint64_t)t * w;
        std::fill(aa, aa + w, id);
        std::fill(ab, ab + w, id);
        for (unsigned r = 0; r < red::kDepth; ++r) {
          const uint64_t i = k * red::kChunk + t + (uint64_t)r * red::kLanes;
          if (i >= T) break;
          const float *hp = i == 0 ? h0 + c0 : out + (i - 1) * D + c0;
          fold_row(dX + i * D + c0, hp, X + i * D + c0, w, aa, ab);
        }
      }
      float *oa = nc > 1 ? ca.data() + k * D + c0 : dA + c0;
      float *ob = nc > 1 ? cb.data() + k * D + c0 : dB + c0;
      reduce_axis(0, red::Op::Sum, pa.data(), 1, L, w, 1.0f, oa);
      reduce_axis(0, red::Op::Sum, pb.data(), 1, L, w, 1.0f, ob);
    }
  }
  if (nc > 1) {
    reduce_axis(0, red::Op::Sum, ca.data(), 1, nc, D, 1.0f, dA);
    reduce_axis(0, red::Op::Sum, cb.data(), 1, nc, D, 1.0f, dB);
  }
  for (uint64_t t = 0; t < T; ++t) scale_row(B, D, dX + t * D);
}

}  // namespace stub
}  // namespace tlrt
