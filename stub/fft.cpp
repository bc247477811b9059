// CPU backend, real FFT and spectral convolution: the project's own FFT, in float64 throughout,
// each output rounded once to float32 (abi/tlrt_fft.h states the resulting bound).
//
// Complex FFT of m points (forward sign e^{-2 pi i / m}; the inverse is conj(F(conj(z)))):
//   * m = p_1 p_2 ... p_r with every p in {4, 2, 3} or an odd prime <= 31: a Stockham
//     (self-sorting, out-of-place, ping-pong) decimation-in-time FFT. With L the product of the
//     radices done so far and R = m / (L p), stage (p, L) maps A (L, p R) to A' (L p, R):
//       A'[k + L q][r] = sum_{u<p} w_p^{u q} (w_{L p}^{u k} A[k][r + R u])
//     (A[k][r] holds the L-point DFT of x[r + (m / L) j], j < L). Radices 2, 3, 4 have explicit
//     butterflies, the others a direct p-point DFT from a table of p roots. The inner loop runs
//     over r with unit stride (R long in the first stages).
//   * otherwise (a prime factor above 31): Bluestein's chirp-z transform, with the chirp
//     c_j = e^{-pi i j^2 / m} (j^2 reduced mod 2m in integers, so the angle is exact):
//     X_k = c_k sum_t (x_t c_t) conj(c_{k-t}), a linear convolution done as a cyclic one of
//     M points, M the smallest 2^a 3^b 5^c >= 2m - 1, with the mixed-radix plan above, the
//     filter's transform (divided by M) precomputed. Two FFTs of M ~ 2m points per transform.
// Real FFT of n points: n even, the complex FFT of the n/2 points z_j = x_{2j} + i x_{2j+1} and a
// post-processing pass X_k = E_k + e^{-2 pi i k / n} O_k with E_k = (Z_k + conj Z_{h-k}) / 2,
// O_k = (Z_k - conj Z_{h-k}) / 2i (h = n/2); the inverse runs the same steps backwards. n odd: the
// n-point complex FFT of the real signal (inverse: of the Hermitian extension).
// Twiddles are float64 cos / sin of exactly reduced angles. Plans are cached per n (at most 16,
// least recently used evicted, under a mutex; a plan is immutable and shared, so threads may run
// one plan at once). Single-threaded per call. Cost per row: ~5 n log2 n float64 flops (even n:
// half of that plus the O(n) pass); Bluestein two FFTs of ~2n points (docs/kernels/fft.md).
//
// Spectral convolution: the transforms of abi/tlrt_fft.h along the grid, one channel at a time
// (gathered from the strided column), the mixing sums over width in float64, only the kept modes
// stored (modes x width complex values).
#include <cmath>
#include <cstring>
#include <list>
#include <memory>
#include <mutex>
#include <vector>

#include "core/backend/fft.hpp"

namespace tlrt {
namespace stub {

namespace {

using u64 = uint64_t;

struct cd {
  double re, im;
};
inline cd operator+(cd a, cd b) { return {a.re + b.re, a.im + b.im}; }
inline cd operator-(cd a, cd b) { return {a.re - b.re, a.im - b.im}; }
inline cd operator*(cd a, cd b) { return {a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re}; }
inline cd scale(cd a, double s) { return {a.re * s, a.im * s}; }
inline cd conj(cd a) { return {a.re, -a.im}; }
inline cd mul_mi(cd a) { return {a.im, -a.re}; }  // -i a

constexpr double kPi = 3.14159265358979323846264338327950288;
constexpr int kMaxRadix = 31;  // largest prime handled by a direct butterfly
constexpr size_t kPlanCacheCap = 16;

// e^{-2 pi i j / m} for j < m, the angle reduced to the first octant so that it is accurate to
// ~1 ulp in float64 whatever m.
cd root(u64 j, u64 m) {
  j %= m;
  // Quadrant and octant via 8 j / m in exact integer arithmetic.
  const unsigned __int128 j8 = (unsigned __int128)j * 8;
  const u64 oct = (u64)(j8 / m);        // 0..7
  const u64 rem = (u64)(j8 - (unsigned __int128)oct * m);  // angle = (oct + rem / m) * pi / 4
  double a = (kPi / 4) * ((double)rem / (double)m);
  double c, s;
  if (oct % 2 == 0) {
    c = std::cos(a);
    s = std::sin(a);
  } else {  // (oct + 1) pi / 4 - a'  with a' = pi/4 - a
    a = (kPi / 4) * ((double)(m - rem) / (double)m);
    c = std::sin(a);
    s = std::cos(a);
  }
  // Now (c, s) = (cos, sin) of the angle within the octant pair [oct pi/4 rounded down to pi/2).
  double rc, rs;  // cos, sin of 2 pi j / m
  switch (oct / 2) {
    case 0: rc = c; rs = s; break;
    case 1: rc = -s; rs = c; break;
    case 2: rc = -c; rs = -s; break;
    default: rc = s; rs = -c; break;
  }
  return {rc, -rs};
}

struct Stage {
  int p;
  u64 L, R;             // L * p * R = m
  std::vector<cd> tw;   // tw[k * (p - 1) + u - 1] = w_{L p}^{u k}
  std::vector<cd> dft;  // generic radix: w_p^j, j < p
};

struct CPlan {
  u64 m = 1;
  std::vector<Stage> stages;
  bool bluestein = false;
  u64 M = 0;              // Bluestein convolution length
  std::vector<cd> chirp;  // c_j, j < m
  std::vector<cd> filt;   // F_M(b) / M
  std::unique_ptr<CPlan> sub;
  u64 work = 0;  // complex scratch elements the transform needs
};

void build(CPlan &P, u64 m);
void fft(const CPlan &P, cd *x, cd *work);

// Radices of m, or false if a prime factor above kMaxRadix remains.
bool factor(u64 m, std::vector<int> &r) {
  while (m % 4 == 0) { r.push_back(4); m /= 4; }
  while (m % 2 == 0) { r.push_back(2); m /= 2; }
  for (int p = 3; p <= kMaxRadix; p += 2) {
    while (m % (u64)p == 0) { r.push_back(p); m /= (u64)p; }
  }
  return m == 1;
}

void build(CPlan &P, u64 m) {
  P.m = m;
  std::vector<int> radices;
  if (factor(m, radices)) {
    u64 L = 1;
    for (int p : radices) {
      Stage s;
      s.p = p;
      s.L = L;
      s.R = m / (L * (u64)p);
      s.tw.resize(L * (u64)(p - 1));
      for (u64 k = 0; k < L; ++k)
        for (int u = 1; u < p; ++u) s.tw[k * (u64)(p - 1) + (u64)(u - 1)] = root(k * (u64)u, L * (u64)p);
      if (p != 2 && p != 3 && p != 4) {
        s.dft.resize((size_t)p);
        for (int j = 0; j < p; ++j) s.dft[(size_t)j] = root((u64)j, (u64)p);
      }
      P.stages.push_back(std::move(s));
      L *= (u64)p;
    }
    P.work = m;
    return;
  }
  P.bluestein = true;
  // The smallest 2^a 3^b 5^c >= 2m - 1 (at most ~1.1x above it in practice, where a power of two
  // can be 2x): a convolution length the radix-4/2/3/5 stages handle.
  u64 M = 2 * m - 1;
  for (;; ++M) {
    u64 r = M;
    for (u64 p : {2, 3, 5})
      while (r % p == 0) r /= p;
    if (r == 1) break;
  }
  P.M = M;
  P.chirp.resize(m);
  for (u64 j = 0; j < m; ++j) {
    const u64 r = (u64)(((unsigned __int128)j * j) % (2 * (unsigned __int128)m));  // j^2 mod 2m
    P.chirp[j] = root(r, 2 * m);                                                   // e^{-pi i r / m}
  }
  P.sub.reset(new CPlan);
  build(*P.sub, M);
  P.filt.assign(M, cd{0, 0});
  P.filt[0] = conj(P.chirp[0]);
  for (u64 j = 1; j < m; ++j) P.filt[j] = P.filt[M - j] = conj(P.chirp[j]);
  std::vector<cd> w(P.sub->work);
  fft(*P.sub, P.filt.data(), w.data());
  const double inv = 1.0 / (double)M;
  for (cd &v : P.filt) v = scale(v, inv);
  P.work = M + P.sub->work;
}

// One Stockham stage: src (L, p R) -> dst (L p, R).
void run_stage(const Stage &s, const cd *__restrict src, cd *__restrict dst) {
  const int p = s.p;
  const u64 L = s.L, R = s.R, PR = (u64)p * R;
  for (u64 k = 0; k < L; ++k) {
    const cd *tw = s.tw.data() + k * (u64)(p - 1);
    const cd *in = src + k * PR;
    switch (p) {
      case 2: {
        const cd t1 = tw[0];
        for (u64 r = 0; r < R; ++r) {
          const cd a0 = in[r], a1 = in[r + R] * t1;
          dst[k * R + r] = a0 + a1;
          dst[(k + L) * R + r] = a0 - a1;
        }
        break;
      }
      case 3: {
        const cd t1 = tw[0], t2 = tw[1];
        const double h = 0.86602540378443864676372317075293618;  // sqrt(3) / 2
        for (u64 r = 0; r < R; ++r) {
          const cd a0 = in[r], a1 = in[r + R] * t1, a2 = in[r + 2 * R] * t2;
          const cd sm = a1 + a2, df = a1 - a2;
          const cd b = a0 - scale(sm, 0.5);
          const cd j = {df.im * h, -df.re * h};  // -i (sqrt(3)/2) (a1 - a2)
          dst[k * R + r] = a0 + sm;
          dst[(k + L) * R + r] = b + j;
          dst[(k + 2 * L) * R + r] = b - j;
        }
        break;
      }
      case 4: {
        const cd t1 = tw[0], t2 = tw[1], t3 = tw[2];
        for (u64 r = 0; r < R; ++r) {
          const cd a0 = in[r], a1 = in[r + R] * t1, a2 = in[r + 2 * R] * t2,
                   a3 = in[r + 3 * R] * t3;
          const cd s0 = a0 + a2, s1 = a0 - a2, s2 = a1 + a3, s3 = mul_mi(a1 - a3);
          dst[k * R + r] = s0 + s2;
          dst[(k + L) * R + r] = s1 + s3;
          dst[(k + 2 * L) * R + r] = s0 - s2;
          dst[(k + 3 * L) * R + r] = s1 - s3;
        }
        break;
      }
      default: {
        cd a[kMaxRadix];
        for (u64 r = 0; r < R; ++r) {
          a[0] = in[r];
          for (int u = 1; u < p; ++u) a[u] = in[r + (u64)u * R] * tw[u - 1];
          for (int q = 0; q < p; ++q) {
            cd acc = a[0];
            int e = 0;
            for (int u = 1; u < p; ++u) {
              e += q;
              if (e >= p) e -= p;
              acc = acc + a[u] * s.dft[(size_t)e];
            }
            dst[(k + L * (u64)q) * R + r] = acc;
          }
        }
        break;
      }
    }
  }
}

// Forward complex FFT of P.m points, in place in x; work has P.work elements.
void fft(const CPlan &P, cd *x, cd *work) {
  if (!P.bluestein) {
    cd *src = x, *dst = work;
    for (const Stage &s : P.stages) {
      run_stage(s, src, dst);
      std::swap(src, dst);
    }
    if (src != x) std::memcpy(x, src, P.m * sizeof(cd));
    return;
  }
  const u64 m = P.m, M = P.M;
  cd *a = work, *w = work + M;
  for (u64 j = 0; j < m; ++j) a[j] = x[j] * P.chirp[j];
  for (u64 j = m; j < M; ++j) a[j] = cd{0, 0};
  fft(*P.sub, a, w);
  for (u64 j = 0; j < M; ++j) a[j] = conj(a[j] * P.filt[j]);  // inverse via conj(F(conj))
  fft(*P.sub, a, w);
  for (u64 k = 0; k < m; ++k) x[k] = conj(a[k]) * P.chirp[k];
}

// A real plan: the complex plan of n/2 (n even) or n (n odd) points and, for even n, the
// post-processing twiddles e^{-2 pi i k / n}, k <= n/2.
struct RPlan {
  u64 n = 0;
  CPlan c;
  std::vector<cd> post;
  u64 work = 0;  // complex scratch: the complex signal + the complex plan's work
};

std::shared_ptr<const RPlan> make_plan(u64 n) {
  auto P = std::make_shared<RPlan>();
  P->n = n;
  const u64 m = n % 2 == 0 ? n / 2 : n;
  build(P->c, m);
  if (n % 2 == 0) {
    P->post.resize(n / 2 + 1);
    for (u64 k = 0; k <= n / 2; ++k) P->post[k] = root(k, n);
  }
  P->work = m + P->c.work;
  return P;
}

// The bounded plan cache. Leaky on purpose: plans may be needed by static destructors of the host.
std::shared_ptr<const RPlan> plan(u64 n) {
  static std::mutex *mu = new std::mutex;
  static auto *lru = new std::list<std::shared_ptr<const RPlan>>;
  {
    std::lock_guard<std::mutex> g(*mu);
    for (auto it = lru->begin(); it != lru->end(); ++it)
      if ((*it)->n == n) {
        lru->splice(lru->begin(), *lru, it);
        return lru->front();
      }
  }
  std::shared_ptr<const RPlan> P = make_plan(n);  // outside the lock (may be long)
  std::lock_guard<std::mutex> g(*mu);
  for (auto &q : *lru)
    if (q->n == n) return q;  // another thread built it meanwhile
  lru->push_front(P);
  if (lru->size() > kPlanCacheCap) lru->pop_back();
  return P;
}

// X[0 .. n/2] = rfft(x), x[t] = load(t) in float64. work: P.work elements.
template <class Load>
void rfft_row(const RPlan &P, Load load, cd *X, cd *work) {
  const u64 n = P.n;
  cd *z = work, *w = work + P.c.m;
  if (n % 2 == 0) {
    const u64 h = n / 2;
    for (u64 j = 0; j < h; ++j) z[j] = cd{load(2 * j), load(2 * j + 1)};
    fft(P.c, z, w);
    X[0] = cd{z[0].re + z[0].im, 0.0};
    X[h] = cd{z[0].re - z[0].im, 0.0};
    for (u64 k = 1; k < h; ++k) {
      const cd a = z[k], b = conj(z[h - k]);
      const cd e = scale(a + b, 0.5);
      const cd o = scale(mul_mi(a - b), 0.5);  // (a - b) / 2i
      X[k] = e + P.post[k] * o;
    }
    return;
  }
  for (u64 t = 0; t < n; ++t) z[t] = cd{load(t), 0.0};
  fft(P.c, z, w);
  for (u64 k = 0; k <= n / 2; ++k) X[k] = z[k];
  X[0].im = 0.0;
}

// store(t, v) for the UNNORMALISED inverse v = n irfft(X)[t]; X[0].im and (n even) X[n/2].im are
// ignored. X is not modified.
template <class Store>
void irfft_row(const RPlan &P, const cd *X, Store store, cd *work) {
  const u64 n = P.n;
  cd *z = work, *w = work + P.c.m;
  if (n % 2 == 0) {
    const u64 h = n / 2;
    // z_k = (X_k + conj X_{h-k}) + i (X_k - conj X_{h-k}) e^{2 pi i k / n}, conjugated for the
    // forward transform: x_{2j} = Re F(conj z)_j, x_{2j+1} = -Im F(conj z)_j.
    for (u64 k = 0; k < h; ++k) {
      cd a = X[k], b = conj(X[h - k]);
      if (k == 0) {
        a.im = 0.0;
        b.im = 0.0;
      }
      const cd e = a + b;
      const cd o = (a - b) * conj(P.post[k]);
      z[k] = conj(cd{e.re - o.im, e.im + o.re});  // conj(e + i o)
    }
    fft(P.c, z, w);
    for (u64 j = 0; j < h; ++j) {
      store(2 * j, z[j].re);
      store(2 * j + 1, -z[j].im);
    }
    return;
  }
  // Hermitian extension, conjugated: x_t = Re F(conj Y)_t.
  z[0] = cd{X[0].re, 0.0};
  for (u64 k = 1; k <= n / 2; ++k) {
    z[k] = conj(X[k]);
    z[n - k] = X[k];
  }
  fft(P.c, z, w);
  for (u64 t = 0; t < n; ++t) store(t, z[t].re);
}

// c_k of abi/tlrt_fft.h: 1 for bin 0 and (even grid) bin grid/2, else 2.
inline double ck(u64 k, u64 grid) { return (k == 0 || (grid % 2 == 0 && k == grid / 2)) ? 1.0 : 2.0; }

// F[k * width + c] = rfft(column c of v (grid, width))[k] for k < modes, imaginary parts of bins 0
// and grid/2 exactly 0.
void columns_rfft(const RPlan &P, const float *v, u64 grid, u64 width, u64 modes,
                  std::vector<cd> &F) {
  F.assign(modes * width, cd{0, 0});
  std::vector<cd> X(grid / 2 + 1), work(P.work);
  for (u64 c = 0; c < width; ++c) {
    rfft_row(P, [&](u64 t) { return (double)v[t * width + c]; }, X.data(), work.data());
    for (u64 k = 0; k < modes; ++k) F[k * width + c] = X[k];
  }
}

// Column c of out (grid, width) = irfft(S[., c]) / grid with S[k * width + c] for k < modes and
// 0 beyond.
void columns_irfft(const RPlan &P, const std::vector<cd> &S, u64 grid, u64 width, u64 modes,
                   float *out) {
  std::vector<cd> X(grid / 2 + 1), work(P.work);
  const double inv = 1.0 / (double)grid;
  for (u64 c = 0; c < width; ++c) {
    for (u64 k = 0; k <= grid / 2; ++k) X[k] = k < modes ? S[k * width + c] : cd{0, 0};
    irfft_row(P, X.data(), [&](u64 t, double v) { out[t * width + c] = (float)(v * inv); },
              work.data());
  }
}

}  // namespace

void rfft(int, const float *x, uint64_t batch, uint64_t n, float *out) {
  const std::shared_ptr<const RPlan> P = plan(n);
  const u64 bins = n / 2 + 1;
  std::vector<cd> X(bins), work(P->work);
  for (u64 b = 0; b < batch; ++b) {
    const float *row = x + b * n;
    rfft_row(*P, [row](u64 t) { return (double)row[t]; }, X.data(), work.data());
    float *o = out + b * bins * 2;
    for (u64 k = 0; k < bins; ++k) {
      o[2 * k] = (float)X[k].re;
      o[2 * k + 1] = (float)X[k].im;
    }
  }
}

void irfft(int, const float *spec, uint64_t batch, uint64_t n, float *out) {
  const std::shared_ptr<const RPlan> P = plan(n);
  const u64 bins = n / 2 + 1;
  std::vector<cd> X(bins), work(P->work);
  const double inv = 1.0 / (double)n;
  for (u64 b = 0; b < batch; ++b) {
    const float *s = spec + b * bins * 2;
    for (u64 k = 0; k < bins; ++k) X[k] = cd{(double)s[2 * k], (double)s[2 * k + 1]};
    float *row = out + b * n;
    irfft_row(*P, X.data(), [row, inv](u64 t, double v) { row[t] = (float)(v * inv); },
              work.data());
  }
}

void spectral_conv_fwd(int, const float *x, const float *w_re, const float *w_im, uint64_t grid,
                       uint64_t width, uint64_t modes, float *y) {
  const std::shared_ptr<const RPlan> P = plan(grid);
  std::vector<cd> X, Z(modes * width, cd{0, 0});
  columns_rfft(*P, x, grid, width, modes, X);
  for (u64 k = 0; k < modes; ++k)
    for (u64 c = 0; c < width; ++c) {
      const cd xv = X[k * width + c];
      const float *wr = w_re + (k * width + c) * width, *wi = w_im + (k * width + c) * width;
      cd *z = Z.data() + k * width;
      for (u64 o = 0; o < width; ++o) z[o] = z[o] + xv * cd{(double)wr[o], (double)wi[o]};
    }
  columns_irfft(*P, Z, grid, width, modes, y);
}

void spectral_conv_bwd_x(int, const float *w_re, const float *w_im, const float *dy,
                         uint64_t grid, uint64_t width, uint64_t modes, float *dx) {
  const std::shared_ptr<const RPlan> P = plan(grid);
  std::vector<cd> D, Pk(modes * width, cd{0, 0});
  columns_rfft(*P, dy, grid, width, modes, D);
  for (u64 k = 0; k < modes; ++k)
    for (u64 c = 0; c < width; ++c) {
      const float *wr = w_re + (k * width + c) * width, *wi = w_im + (k * width + c) * width;
      const cd *d = D.data() + k * width;
      cd acc{0, 0};
      for (u64 o = 0; o < width; ++o) acc = acc + d[o] * cd{(double)wr[o], -(double)wi[o]};
      Pk[k * width + c] = acc;
    }
  columns_irfft(*P, Pk, grid, width, modes, dx);
}

void spectral_conv_bwd_w(int, const float *x, const float *dy, uint64_t grid, uint64_t width,
                         uint64_t modes, float *dw_re, float *dw_im) {
  const std::shared_ptr<const RPlan> P = plan(grid);
  std::vector<cd> X, D;
  columns_rfft(*P, x, grid, width, modes, X);
  columns_rfft(*P, dy, grid, width, modes, D);
  for (u64 k = 0; k < modes; ++k) {
    const double s = ck(k, grid) / (double)grid;
    for (u64 c = 0; c < width; ++c) {
      const cd xv = conj(X[k * width + c]);
      const cd *d = D.data() + k * width;
      const u64 base = (k * width + c) * width;
      if (dw_re)
        for (u64 o = 0; o < width; ++o) dw_re[base + o] = (float)(s * (xv.re * d[o].re - xv.im * d[o].im));
      if (dw_im)
        for (u64 o = 0; o < width; ++o) dw_im[base + o] = (float)(s * (xv.re * d[o].im + xv.im * d[o].re));
    }
  }
}

}  // namespace stub
}  // namespace tlrt
