// Suite 'unit': the real FFT and the spectral convolution of abi/tlrt_fft.h on the CPU backend.
//   - known spectra: delta at 0 and at 1, constant, cosine; n = 1 and 2 exactly;
//   - seeded random rows against a long-double DFT (twiddle angles reduced exactly, k t mod n),
//     per component |X - ref| <= 2^-24 |ref| + 2^-40 sum|x| (the header's bound, with margin for
//     the reference), for n = 1..64 and powers of two, odd, prime (Bluestein) and composite n up
//     to 4099, batches 1..100; the largest normwise relative error is printed (quoted in the header);
//   - irfft against the long-double inverse (random spectra whose DC / Nyquist imaginary parts
//     must be ignored), and round trips irfft(rfft(x)) = x;
//   - special values: a NaN / inf row is non-finite in every bin, the other rows are untouched;
//   - the plan cache: more than 16 lengths, then the first again (same bits); 4 threads at once;
//   - spectral convolution: against a long-double direct evaluation; identity weights give x back;
//     modes == 0, width == 0, grid == 1, modes == grid/2 + 1 (Nyquist imaginary part ignored);
//     bwd_w equals bwd_wre and bwd_wim bit for bit.
#include <algorithm>
#include <cmath>
#include <thread>
#include <vector>

#include "harness.hpp"

namespace {

using th::Buf;
using u64 = uint64_t;
using ld = long double;
const double kU = std::ldexp(1.0, -24);
const ld kPiL = 3.141592653589793238462643383279502884L;

double g_worst_fwd = 0, g_worst_inv = 0, g_worst_sc = 0;

// cos / sin of 2 pi j / n for j < n, in long double.
struct Roots {
  std::vector<ld> c, s;
  explicit Roots(u64 n) : c(n), s(n) {
    for (u64 j = 0; j < n; ++j) {
      const ld a = 2 * kPiL * (ld)j / (ld)n;
      c[j] = cosl(a);
      s[j] = sinl(a);
    }
  }
};

// Reference rfft of one row: re, im of bins 0..n/2.
void ref_rfft(const float *x, u64 n, const Roots &R, std::vector<ld> &re, std::vector<ld> &im) {
  re.assign(n / 2 + 1, 0);
  im.assign(n / 2 + 1, 0);
  for (u64 k = 0; k <= n / 2; ++k) {
    ld a = 0, b = 0;
    for (u64 t = 0; t < n; ++t) {
      const u64 j = (k * t) % n;
      a += x[t] * R.c[j];
      b -= x[t] * R.s[j];
    }
    re[k] = a;
    im[k] = b;
  }
}

// Reference irfft (1/n, DC / Nyquist imaginary parts ignored).
std::vector<ld> ref_irfft(const float *s, u64 n, const Roots &R) {
  std::vector<ld> x(n, 0);
  for (u64 t = 0; t < n; ++t) {
    ld acc = 0;
    for (u64 k = 0; k <= n / 2; ++k) {
      const u64 j = (k * t) % n;
      const ld ck = (k == 0 || (n % 2 == 0 && k == n / 2)) ? 1 : 2;
      const ld im = (k == 0 || (n % 2 == 0 && k == n / 2)) ? 0 : (ld)s[2 * k + 1];
      acc += ck * ((ld)s[2 * k] * R.c[j] - im * R.s[j]);
    }
    x[t] = acc / (ld)n;
  }
  return x;
}

std::vector<float> rfft(const std::vector<float> &x, u64 batch, u64 n) {
  Buf in(th::upload(x)), out;
  TH_OK(tlrt_rfft1d_packed(in.get(), batch, n, out.out()));
  return out.get() ? th::download(out.get()) : std::vector<float>{};
}

std::vector<float> irfft(const std::vector<float> &s, u64 batch, u64 n) {
  Buf in(th::upload(s)), out;
  TH_OK(tlrt_irfft1d_packed(in.get(), batch, n, out.out()));
  return out.get() ? th::download(out.get()) : std::vector<float>{};
}

void check_forward(u64 batch, u64 n, th::Dist dist, u64 salt) {
  const std::vector<float> x = th::make(dist, batch * n, salt);
  const std::vector<float> X = rfft(x, batch, n);
  const u64 bins = n / 2 + 1;
  TH_CHECK_MSG(X.size() == batch * bins * 2, "rfft n=%llu: %zu outputs", (unsigned long long)n,
               X.size());
  if (X.size() != batch * bins * 2) return;
  const Roots R(n);
  std::vector<ld> re, im;
  u64 bad = 0;
  for (u64 b = 0; b < batch; ++b) {
    ref_rfft(x.data() + b * n, n, R, re, im);
    double E = 0, num = 0, den = 0;
    for (u64 t = 0; t < n; ++t) E += std::fabs(x[b * n + t]);
    for (u64 k = 0; k < bins; ++k) {
      const float *o = X.data() + (b * bins + k) * 2;
      const double er = std::fabs(o[0] - (double)re[k]), ei = std::fabs(o[1] - (double)im[k]);
      num += er * er + ei * ei;
      den += (double)(re[k] * re[k] + im[k] * im[k]);
      const double tol = std::ldexp(E, -40);
      if (er > kU * std::fabs((double)re[k]) + tol || ei > kU * std::fabs((double)im[k]) + tol) {
        if (bad++ == 0)
          TH_CHECK_MSG(false, "rfft n=%llu row %llu bin %llu: (%.9g, %.9g) vs (%.12Lg, %.12Lg)",
                       (unsigned long long)n, (unsigned long long)b, (unsigned long long)k, o[0],
                       o[1], re[k], im[k]);
      }
    }
    if (den > 0) g_worst_fwd = std::max(g_worst_fwd, std::sqrt(num / den));
    // Bin 0 and the Nyquist bin: imaginary part exactly +0.
    TH_CHECK(th::bits_of(X[(b * bins) * 2 + 1]) == 0);
    if (n % 2 == 0) TH_CHECK(th::bits_of(X[(b * bins + n / 2) * 2 + 1]) == 0);
  }
  TH_CHECK_MSG(bad == 0, "rfft n=%llu %s: %llu components out of bound", (unsigned long long)n,
               th::dist_name(dist), (unsigned long long)bad);
}

void check_inverse(u64 batch, u64 n, u64 salt) {
  const u64 bins = n / 2 + 1;
  const std::vector<float> s = th::make(th::Dist::Uniform, batch * bins * 2, salt);
  const std::vector<float> x = irfft(s, batch, n);
  TH_CHECK(x.size() == batch * n);
  if (x.size() != batch * n) return;
  const Roots R(n);
  u64 bad = 0;
  for (u64 b = 0; b < batch; ++b) {
    const std::vector<ld> ref = ref_irfft(s.data() + b * bins * 2, n, R);
    double E = 0, num = 0, den = 0;
    for (u64 k = 0; k < bins * 2; ++k) E += 2 * std::fabs(s[b * bins * 2 + k]);
    E /= (double)n;
    for (u64 t = 0; t < n; ++t) {
      const double e = std::fabs(x[b * n + t] - (double)ref[t]);
      num += e * e;
      den += (double)(ref[t] * ref[t]);
      if (e > kU * std::fabs((double)ref[t]) + std::ldexp(E, -40) && bad++ == 0)
        TH_CHECK_MSG(false, "irfft n=%llu row %llu t=%llu: %.9g vs %.12Lg", (unsigned long long)n,
                     (unsigned long long)b, (unsigned long long)t, x[b * n + t], ref[t]);
    }
    if (den > 0) g_worst_inv = std::max(g_worst_inv, std::sqrt(num / den));
  }
  TH_CHECK_MSG(bad == 0, "irfft n=%llu: %llu values out of bound", (unsigned long long)n,
               (unsigned long long)bad);
  // Round trip.
  const std::vector<float> y = th::make(th::Dist::Uniform, batch * n, salt + 7);
  const std::vector<float> back = irfft(rfft(y, batch, n), batch, n);
  double worst = 0;
  for (u64 i = 0; i < back.size() && i < y.size(); ++i)
    worst = std::max(worst, (double)std::fabs(back[i] - y[i]));
  TH_CHECK_MSG(back.size() == y.size() && worst <= 4 * kU,
               "round trip n=%llu: max error %.3g", (unsigned long long)n, worst);
}

void known_spectra() {
  // n = 1 and n = 2 exactly.
  {
    const std::vector<float> X = rfft({3.5f, -2.0f}, 2, 1);
    TH_CHECK(X == (std::vector<float>{3.5f, 0.0f, -2.0f, 0.0f}));
    const std::vector<float> Y = rfft({1.5f, 0.25f}, 1, 2);
    TH_CHECK(Y == (std::vector<float>{1.75f, 0.0f, 1.25f, 0.0f}));
    TH_CHECK(irfft({3.0f, 9.0f}, 1, 1) == std::vector<float>{3.0f});  // imaginary part ignored
    TH_CHECK(irfft({1.75f, 5.0f, 1.25f, -7.0f}, 1, 2) == (std::vector<float>{1.5f, 0.25f}));
  }
  for (u64 n : {3ull, 4ull, 5ull, 8ull, 12ull, 37ull, 64ull, 97ull, 100ull}) {
    const u64 bins = n / 2 + 1;
    // Delta at 0: every bin 1.
    std::vector<float> d(n, 0.0f);
    d[0] = 1.0f;
    std::vector<float> X = rfft(d, 1, n);
    for (u64 k = 0; k < bins; ++k)
      TH_CHECK_MSG(std::fabs(X[2 * k] - 1.0f) <= 2 * kU && std::fabs(X[2 * k + 1]) <= 2 * kU,
                   "delta n=%llu bin %llu: (%g, %g)", (unsigned long long)n,
                   (unsigned long long)k, X[2 * k], X[2 * k + 1]);
    // Delta at 1: e^{-2 pi i k / n}.
    d[0] = 0.0f;
    d[1 % n] = 1.0f;
    X = rfft(d, 1, n);
    for (u64 k = 0; k < bins; ++k) {
      const double a = 2 * M_PI * (double)k / (double)n;
      TH_CHECK_MSG(std::fabs(X[2 * k] - std::cos(a)) <= 2 * kU &&
                       std::fabs(X[2 * k + 1] + std::sin(a)) <= 2 * kU,
                   "shifted delta n=%llu bin %llu", (unsigned long long)n, (unsigned long long)k);
    }
    // Constant 0.5: bin 0 = n / 2, the rest 0.
    X = rfft(std::vector<float>(n, 0.5f), 1, n);
    TH_CHECK(X[0] == 0.5f * (float)n && X[1] == 0.0f);
    for (u64 k = 1; k < bins; ++k)
      TH_CHECK_MSG(std::fabs(X[2 * k]) <= 4 * kU * n && std::fabs(X[2 * k + 1]) <= 4 * kU * n,
                   "constant n=%llu bin %llu: (%g, %g)", (unsigned long long)n,
                   (unsigned long long)k, X[2 * k], X[2 * k + 1]);
    // Cosine of frequency 1: bin 1 = n / 2 (n >= 3), the rest 0.
    std::vector<float> c(n);
    for (u64 t = 0; t < n; ++t) c[t] = (float)std::cos(2 * M_PI * (double)t / (double)n);
    X = rfft(c, 1, n);
    for (u64 k = 0; k < bins; ++k) {
      const double want = k == 1 ? n / 2.0 : 0.0;
      TH_CHECK_MSG(std::fabs(X[2 * k] - want) <= 4 * kU * n && std::fabs(X[2 * k + 1]) <= 4 * kU * n,
                   "cosine n=%llu bin %llu: (%g, %g)", (unsigned long long)n,
                   (unsigned long long)k, X[2 * k], X[2 * k + 1]);
    }
  }
  // Empty batch.
  TH_CHECK(rfft({}, 0, 5).empty());
  TH_CHECK(irfft({}, 0, 5).empty());
}

void special_values() {
  const u64 n = 24, bins = n / 2 + 1;
  for (float bad : {NAN, INFINITY, -INFINITY}) {
    std::vector<float> x = th::make(th::Dist::Uniform, 3 * n, 99);
    x[n + 5] = bad;  // row 1
    const std::vector<float> X = rfft(x, 3, n);
    const std::vector<float> clean0 = rfft(std::vector<float>(x.begin(), x.begin() + n), 1, n);
    const std::vector<float> clean2 = rfft(std::vector<float>(x.begin() + 2 * n, x.end()), 1, n);
    for (u64 k = 0; k < bins; ++k) {
      TH_CHECK_MSG(!std::isfinite(X[(bins + k) * 2]) || !std::isfinite(X[(bins + k) * 2 + 1]),
                   "rfft with %g: bin %llu finite", bad, (unsigned long long)k);
      TH_CHECK(th::same_bits(X[k * 2], clean0[k * 2]) && th::same_bits(X[k * 2 + 1], clean0[k * 2 + 1]));
      TH_CHECK(th::same_bits(X[(2 * bins + k) * 2], clean2[k * 2]));
    }
    std::vector<float> s = th::make(th::Dist::Uniform, 2 * bins * 2, 98);
    s[2 * 3] = bad;  // row 0, bin 3
    const std::vector<float> y = irfft(s, 2, n);
    for (u64 t = 0; t < n; ++t) {
      TH_CHECK_MSG(!std::isfinite(y[t]), "irfft with %g: t=%llu finite", bad, (unsigned long long)t);
      TH_CHECK(std::isfinite(y[n + t]));
    }
  }
  // A NaN in an ignored imaginary part (bin 0, Nyquist) is ignored.
  std::vector<float> s = th::make(th::Dist::Uniform, bins * 2, 97);
  std::vector<float> s2 = s;
  s2[1] = NAN;
  s2[2 * (bins - 1) + 1] = INFINITY;
  TH_CHECK(irfft(s, 1, n) == irfft(s2, 1, n));
}

void plan_cache() {
  const std::vector<float> x = th::make(th::Dist::Uniform, 3 * 1000, 5);
  const std::vector<float> first = rfft(x, 3, 1000);
  for (u64 n = 2; n < 40; ++n) rfft(th::make(th::Dist::Uniform, n, n), 1, n);  // evicts 1000
  TH_CHECK(rfft(x, 3, 1000) == first);
  // Four threads, different and equal lengths at once.
  const u64 ns[4] = {1000, 1031, 1000, 4096};
  std::vector<std::vector<float>> in(4), want(4), got(4);
  for (int i = 0; i < 4; ++i) {
    in[i] = th::make(th::Dist::Uniform, 4 * ns[i], 50 + i);
    want[i] = rfft(in[i], 4, ns[i]);
  }
  for (u64 n = 100; n < 120; ++n) rfft(th::make(th::Dist::Uniform, n, n), 1, n);
  std::vector<std::thread> ts;
  for (int i = 0; i < 4; ++i)
    ts.emplace_back([&, i] {
      for (int r = 0; r < 5; ++r) {
        tlrt_buffer *b = nullptr, *o = nullptr;
        tlrt_buffer_from_f32(TLRT_DEVICE_CPU, in[i].data(), in[i].size(), &b);
        tlrt_rfft1d_packed(b, 4, ns[i], &o);
        std::vector<float> v(4 * (ns[i] / 2 + 1) * 2);
        if (o) tlrt_buffer_to_f32(o, v.data(), v.size());
        if (r == 0 || v != got[i]) got[i] = v;
        tlrt_buffer_free(b);
        tlrt_buffer_free(o);
      }
    });
  for (auto &t : ts) t.join();
  for (int i = 0; i < 4; ++i) TH_CHECK_MSG(got[i] == want[i], "thread %d differs", i);
}

// ---- spectral convolution -------------------------------------------------------------------

struct Spec {
  u64 grid, width, modes;
  std::vector<float> x, wr, wi;
};

Spec make_spec(u64 grid, u64 width, u64 modes, u64 salt) {
  Spec s{grid, width, modes, th::make(th::Dist::Uniform, grid * width, salt),
         th::make(th::Dist::Uniform, modes * width * width, salt + 1),
         th::make(th::Dist::Uniform, modes * width * width, salt + 2)};
  return s;
}

// Long-double direct evaluation of the header's definition; mag = the magnitude bound per output.
std::vector<ld> ref_spec(const Spec &s, std::vector<ld> &mag) {
  const u64 N = s.grid, W = s.width;
  const Roots R(N);
  std::vector<ld> Xr(s.modes * W), Xi(s.modes * W), Xa(s.modes * W);
  for (u64 k = 0; k < s.modes; ++k)
    for (u64 c = 0; c < W; ++c) {
      ld a = 0, b = 0, m = 0;
      for (u64 t = 0; t < N; ++t) {
        const u64 j = (k * t) % N;
        a += s.x[t * W + c] * R.c[j];
        b -= s.x[t * W + c] * R.s[j];
        m += std::fabs(s.x[t * W + c]);
      }
      Xr[k * W + c] = a;
      Xi[k * W + c] = b;
      Xa[k * W + c] = m;
    }
  std::vector<ld> y(N * W, 0);
  mag.assign(N * W, 0);
  for (u64 o = 0; o < W; ++o)
    for (u64 k = 0; k < s.modes; ++k) {
      ld zr = 0, zi = 0, zm = 0;
      for (u64 c = 0; c < W; ++c) {
        const ld wr = s.wr[(k * W + c) * W + o], wi = s.wi[(k * W + c) * W + o];
        zr += Xr[k * W + c] * wr - Xi[k * W + c] * wi;
        zi += Xr[k * W + c] * wi + Xi[k * W + c] * wr;
        zm += Xa[k * W + c] * (std::fabs(wr) + std::fabs(wi));
      }
      const bool edge = k == 0 || (N % 2 == 0 && k == N / 2);
      const ld ck = edge ? 1 : 2;
      if (edge) zi = 0;
      for (u64 t = 0; t < N; ++t) {
        const u64 j = (k * t) % N;
        y[t * W + o] += ck * (zr * R.c[j] - zi * R.s[j]) / (ld)N;
        mag[t * W + o] += ck * zm / (ld)N;
      }
    }
  return y;
}

std::vector<float> spec_fwd(const Spec &s) {
  Buf x(th::upload(s.x)), wr(th::upload(s.wr)), wi(th::upload(s.wi)), y;
  TH_OK(tlrt_spectral_conv1d_rfft_fwd(x.get(), wr.get(), wi.get(), s.grid, s.width, s.modes,
                                      y.out()));
  return y.get() ? th::download(y.get()) : std::vector<float>{};
}

void check_spectral(u64 grid, u64 width, u64 modes, u64 salt) {
  const Spec s = make_spec(grid, width, modes, salt);
  const std::vector<float> y = spec_fwd(s);
  TH_CHECK(y.size() == grid * width);
  if (y.size() != grid * width) return;
  std::vector<ld> mag;
  const std::vector<ld> ref = ref_spec(s, mag);
  u64 bad = 0;
  double num = 0, den = 0;
  for (u64 i = 0; i < y.size(); ++i) {
    const double e = std::fabs(y[i] - (double)ref[i]);
    num += e * e;
    den += (double)(ref[i] * ref[i]);
    if (e > kU * std::fabs((double)ref[i]) + std::ldexp((double)mag[i], -40) && bad++ == 0)
      TH_CHECK_MSG(false, "spectral (%llu, %llu, %llu) i=%llu: %.9g vs %.12Lg",
                   (unsigned long long)grid, (unsigned long long)width, (unsigned long long)modes,
                   (unsigned long long)i, y[i], ref[i]);
  }
  if (den > 0) g_worst_sc = std::max(g_worst_sc, std::sqrt(num / den));
  TH_CHECK_MSG(bad == 0, "spectral (%llu, %llu, %llu): %llu outputs out of bound",
               (unsigned long long)grid, (unsigned long long)width, (unsigned long long)modes,
               (unsigned long long)bad);
  // bwd_w = (bwd_wre, bwd_wim) bit for bit.
  const std::vector<float> dyv = th::make(th::Dist::Uniform, grid * width, salt + 3);
  Buf x(th::upload(s.x)), wr(th::upload(s.wr)), wi(th::upload(s.wi)), dy(th::upload(dyv)), gr,
      gi, gr2, gi2;
  TH_OK(tlrt_spectral_conv1d_rfft_bwd_w(x.get(), wr.get(), wi.get(), dy.get(), grid, width, modes,
                                        gr.out(), gi.out()));
  TH_OK(tlrt_spectral_conv1d_rfft_bwd_wre(x.get(), wr.get(), wi.get(), dy.get(), grid, width,
                                          modes, gr2.out()));
  TH_OK(tlrt_spectral_conv1d_rfft_bwd_wim(x.get(), wr.get(), wi.get(), dy.get(), grid, width,
                                          modes, gi2.out()));
  if (gr.get() && gr2.get() && gi.get() && gi2.get()) {
    TH_CHECK(th::download(gr.get()) == th::download(gr2.get()));
    TH_CHECK(th::download(gi.get()) == th::download(gi2.get()));
  }
}

void spectral_edges() {
  // Identity weights over every bin: y = x.
  for (u64 grid : {1ull, 2ull, 7ull, 16ull, 45ull}) {
    const u64 W = 3, modes = grid / 2 + 1;
    Spec s = make_spec(grid, W, modes, 11);
    std::fill(s.wr.begin(), s.wr.end(), 0.0f);
    std::fill(s.wi.begin(), s.wi.end(), 0.0f);
    for (u64 k = 0; k < modes; ++k)
      for (u64 c = 0; c < W; ++c) s.wr[(k * W + c) * W + c] = 1.0f;
    const std::vector<float> y = spec_fwd(s);
    double worst = 0;
    for (u64 i = 0; i < y.size(); ++i) worst = std::max(worst, (double)std::fabs(y[i] - s.x[i]));
    TH_CHECK_MSG(y.size() == s.x.size() && worst <= 2 * kU, "identity grid=%llu: %.3g",
                 (unsigned long long)grid, worst);
    // An imaginary weight at bin 0 / Nyquist is ignored there: pure i W at bin 0 gives nothing
    // from bin 0 (X[0] real, Z[0] imaginary, ignored).
    Spec t = make_spec(grid, W, 1, 12);
    std::fill(t.wr.begin(), t.wr.end(), 0.0f);
    const std::vector<float> z = spec_fwd(t);
    for (float v : z) TH_CHECK(v == 0.0f);
  }
  // modes == 0: zeros (+0); width == 0: empty.
  {
    const Spec s = make_spec(8, 3, 0, 13);
    const std::vector<float> y = spec_fwd(s);
    TH_CHECK(y.size() == 24);
    for (float v : y) TH_CHECK(th::bits_of(v) == 0);
    Buf x(th::upload(s.x)), w(th::upload({})), dy(th::upload(s.x)), dx, gr, gi;
    TH_OK(tlrt_spectral_conv1d_rfft_bwd_x(x.get(), w.get(), w.get(), dy.get(), 8, 3, 0, dx.out()));
    const std::vector<float> d = th::download(dx.get());
    TH_CHECK(d.size() == 24);
    for (float v : d) TH_CHECK(th::bits_of(v) == 0);
    TH_OK(tlrt_spectral_conv1d_rfft_bwd_w(x.get(), w.get(), w.get(), dy.get(), 8, 3, 0, gr.out(),
                                          gi.out()));
    TH_CHECK(th::download(gr.get()).empty() && th::download(gi.get()).empty());
    const Spec e = make_spec(8, 0, 5, 14);
    TH_CHECK(spec_fwd(e).empty());
  }
  // NaN in x spreads over the whole output.
  {
    Spec s = make_spec(12, 2, 4, 15);
    s.x[5] = NAN;
    const std::vector<float> y = spec_fwd(s);
    u64 finite = 0;
    for (float v : y) finite += std::isfinite(v);
    TH_CHECK_MSG(finite == 0, "NaN input: %llu finite outputs", (unsigned long long)finite);
  }
}

}  // namespace

int main() {
  const bool vg = th::under_valgrind();
  known_spectra();
  special_values();
  plan_cache();
  u64 salt = 1000;
  for (u64 n = 1; n <= 64; ++n)
    for (u64 batch : {1ull, 3ull}) check_forward(batch, n, th::Dist::Uniform, salt++);
  std::vector<u64> big = {74, 100, 127, 128, 210, 243, 256, 509, 625, 729, 961, 1000, 1024, 1031};
  if (!vg) big.insert(big.end(), {2062, 4096, 4099});
  for (u64 n : big) {
    check_forward(2, n, th::Dist::Uniform, salt++);
    check_forward(1, n, th::Dist::Wide, salt++);
  }
  check_forward(100, 16, th::Dist::Uniform, salt++);
  for (u64 n = 1; n <= 40; ++n) check_inverse(2, n, salt++);
  for (u64 n : big) check_inverse(1, n, salt++);
  std::printf("rfft: largest normwise relative error %.3g (%.2f u); irfft: %.3g (%.2f u)\n",
              g_worst_fwd, g_worst_fwd / kU, g_worst_inv, g_worst_inv / kU);
  struct S {
    u64 g, w, m;
  };
  for (const S &c : {S{1, 1, 1}, S{2, 1, 2}, S{2, 3, 1}, S{7, 3, 4}, S{8, 4, 5}, S{16, 5, 3},
                     S{33, 4, 17}, S{64, 8, 16}, S{37, 2, 10}, S{128, 6, 65}})
    check_spectral(c.g, c.w, c.m, salt++);
  if (!vg) check_spectral(512, 16, 32, salt++);
  std::printf("spectral conv: largest normwise relative error %.3g (%.2f u)\n", g_worst_sc,
              g_worst_sc / kU);
  spectral_edges();
  return th::finish("test_fft");
}
