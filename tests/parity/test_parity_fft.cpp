// Suite 'parity': the real FFT and spectral convolution of abi/tlrt_fft.h on TLRT_DEVICE_CPU and
// TLRT_DEVICE_CUDA(0) with the same seeded inputs. Numeric class "library": compared by RELATIVE
// ERROR, not bits. The reference is the CPU result: the CPU computes in float64 and rounds once
// (tests/unit/test_fft.cpp checks it against a long-double DFT, per component within 2^-24 |v|),
// so it is the float64 value to within u = 2^-24. Normwise per row (transforms) or per output
// buffer (spectral convolution), with u added for the reference's own rounding:
//   rfft / irfft:           ||gpu - cpu||_2 <= u (2 log2(n) + 9) ||cpu||_2
//   spectral conv (all):    ||gpu - cpu||_2 <= u (4 log2(grid) + 4 width + 17) ||cpu||_2
// Also: the imaginary parts of bins 0 and n/2 of rfft (CPU: +0) at most u (2 log2 n + 9) ||row||;
// NaN / inf rows: non-finite on CUDA in at least one component of every bin, the other rows within
// the bound (rows independent); the fused bwd_w bit for bit equal to bwd_wre and bwd_wim on CUDA;
// the plan cache: more than 16 shapes twice over and four threads at once give the one-thread
// CUDA bits (cuFFT is deterministic for one plan configuration).
// Shapes: n = 1, 2, odd, prime (cuFFT's Bluestein), powers of two, 4096 x 4096; batches 1..4096;
// spectral (grid, width, modes) from (1, 1, 1) to (4096, 64, 32) and (1024, 128, 16), the bench
// shapes. The largest error ratios are printed (abi/tlrt_fft.h quotes them).
//
// Exits 77 (skipped) unless a CUDA device is usable. Built with -DTLRT_PARITY_SELFTEST both sides
// run on the CPU.
#include <algorithm>
#include <cmath>
#include <string>
#include <thread>
#include <vector>

#include "parity.hpp"

namespace {

using namespace parity;
using th::Buf;
using u64 = uint64_t;
const double kU = std::ldexp(1.0, -24);

double g_worst_fft = 0, g_worst_spec = 0;  // error / bound

// Normwise comparison of rows of `len` values; returns false (and reports) on failure.
void compare_rows(const std::string &what, const std::vector<float> &cpu,
                  const std::vector<float> &gpu, u64 len, double factor, double &worst) {
  Summary &sum = summary();
  ++sum.runs;
  sum.elements += cpu.size();
  if (cpu.size() != gpu.size() || len == 0 || cpu.size() % len != 0) {
    ++sum.failed_runs;
    TH_CHECK_MSG(false, "%s: sizes cpu %zu cuda %zu (row %llu)", what.c_str(), cpu.size(),
                 gpu.size(), (unsigned long long)len);
    return;
  }
  u64 bad_rows = 0, first = 0;
  double first_ratio = 0;
  for (u64 r = 0; r * len < cpu.size(); ++r) {
    double num = 0, den = 0;
    for (u64 i = r * len; i < (r + 1) * len; ++i) {
      const double e = (double)gpu[i] - (double)cpu[i];
      num += e * e;
      den += (double)cpu[i] * cpu[i];
    }
    const double bound = factor * kU * std::sqrt(den);
    const double ratio = bound > 0 ? std::sqrt(num) / bound : (num > 0 ? INFINITY : 0.0);
    worst = std::max(worst, ratio);
    if (!(ratio <= 1.0)) {
      if (bad_rows == 0) {
        first = r;
        first_ratio = ratio;
      }
      ++bad_rows;
    }
  }
  sum.mismatches += bad_rows;
  if (bad_rows) {
    ++sum.failed_runs;
    TH_CHECK_MSG(false, "%s: %llu rows beyond the bound; first row %llu at %.3g x the bound",
                 what.c_str(), (unsigned long long)bad_rows, (unsigned long long)first,
                 first_ratio);
    std::printf("MISMATCH %s: row %llu error %.3g x bound\n", what.c_str(),
                (unsigned long long)first, first_ratio);
  }
}

std::vector<float> run1(tlrt_device dev, bool inverse, const std::vector<float> &in, u64 batch,
                        u64 n) {
  Buf b(th::upload(in, dev)), out;
  const tlrt_status s = inverse ? tlrt_irfft1d_packed(b.get(), batch, n, out.out())
                                : tlrt_rfft1d_packed(b.get(), batch, n, out.out());
  TH_CHECK_MSG(s == TLRT_OK, "%s n=%llu on %s: %s", inverse ? "irfft" : "rfft",
               (unsigned long long)n, dev == kCpu ? "cpu" : "cuda", tlrt_last_error());
  return out.get() ? th::download(out.get()) : std::vector<float>{};
}

void transforms(u64 batch, u64 n, th::Dist dist) {
  if (batch * (n + 2) > max_n()) return;
  char name[96];
  std::snprintf(name, sizeof name, "rfft %llu x %llu %s", (unsigned long long)batch,
                (unsigned long long)n, th::dist_name(dist));
  const double factor = 2 * std::log2((double)n) + 9;
  const u64 bins = n / 2 + 1;
  const std::vector<float> x = th::make(dist, batch * n, batch * 7919 + n);
  const std::vector<float> c = run1(kCpu, false, x, batch, n), g = run1(kGpu, false, x, batch, n);
  compare_rows(name, c, g, bins * 2, factor, g_worst_fft);
  // Imaginary parts of the edge bins: zero up to rounding.
  for (u64 b = 0; b < batch && g.size() == batch * bins * 2; ++b) {
    double nrm = 0;
    for (u64 i = 0; i < bins * 2; ++i) nrm += (double)c[b * bins * 2 + i] * c[b * bins * 2 + i];
    const double tol = factor * kU * std::sqrt(nrm);
    TH_CHECK_MSG(std::fabs(g[b * bins * 2 + 1]) <= tol, "%s: bin 0 imaginary part %g", name,
                 g[b * bins * 2 + 1]);
    if (n % 2 == 0)
      TH_CHECK_MSG(std::fabs(g[(b * bins + bins - 1) * 2 + 1]) <= tol,
                   "%s: Nyquist imaginary part %g", name, g[(b * bins + bins - 1) * 2 + 1]);
  }
  std::snprintf(name, sizeof name, "irfft %llu x %llu %s", (unsigned long long)batch,
                (unsigned long long)n, th::dist_name(dist));
  const std::vector<float> s = th::make(dist, batch * bins * 2, batch * 104729 + n);
  compare_rows(name, run1(kCpu, true, s, batch, n), run1(kGpu, true, s, batch, n), n, factor,
               g_worst_fft);
}

void special_rows() {
  const u64 n = 48, bins = n / 2 + 1;
  for (float bad : {NAN, INFINITY, -INFINITY}) {
    std::vector<float> x = th::make(th::Dist::Uniform, 3 * n, 31);
    x[n + 7] = bad;
    const std::vector<float> g = run1(kGpu, false, x, 3, n), c = run1(kCpu, false, x, 3, n);
    if (g.size() != 3 * bins * 2) continue;
    for (u64 k = 0; k < bins; ++k)
      TH_CHECK_MSG(!std::isfinite(g[(bins + k) * 2]) || !std::isfinite(g[(bins + k) * 2 + 1]),
                   "cuda rfft with %g: bin %llu finite", bad, (unsigned long long)k);
    std::vector<float> c0(c.begin(), c.begin() + bins * 2), g0(g.begin(), g.begin() + bins * 2);
    compare_rows("rfft row beside a special row", c0, g0, bins * 2, 2 * std::log2(n) + 9,
                 g_worst_fft);
  }
}

struct SpecCase {
  u64 grid, width, modes;
};

void spectral(const SpecCase &sc) {
  const u64 nsig = sc.grid * sc.width, nw = sc.modes * sc.width * sc.width;
  if (nsig > max_n() || nw > max_n()) return;
  char name[128];
  std::snprintf(name, sizeof name, "spectral (grid %llu, width %llu, modes %llu)",
                (unsigned long long)sc.grid, (unsigned long long)sc.width,
                (unsigned long long)sc.modes);
  const u64 salt = sc.grid * 1009 + sc.width * 31 + sc.modes;
  const std::vector<float> x = th::make(th::Dist::Uniform, nsig, salt),
                           wr = th::make(th::Dist::Uniform, nw, salt + 1),
                           wi = th::make(th::Dist::Uniform, nw, salt + 2),
                           dy = th::make(th::Dist::Uniform, nsig, salt + 3);
  const double factor = 4 * std::log2((double)sc.grid + 1) + 4 * (double)sc.width + 17;
  std::vector<std::vector<float>> res[2];
  for (int side = 0; side < 2; ++side) {
    const tlrt_device d = side == 0 ? kCpu : kGpu;
    Buf X(th::upload(x, d)), WR(th::upload(wr, d)), WI(th::upload(wi, d)), DY(th::upload(dy, d)),
        y, dx, gr, gi, fr, fi;
    TH_OK(tlrt_spectral_conv1d_rfft_fwd(X.get(), WR.get(), WI.get(), sc.grid, sc.width, sc.modes,
                                        y.out()));
    TH_OK(tlrt_spectral_conv1d_rfft_bwd_x(X.get(), WR.get(), WI.get(), DY.get(), sc.grid,
                                          sc.width, sc.modes, dx.out()));
    TH_OK(tlrt_spectral_conv1d_rfft_bwd_wre(X.get(), WR.get(), WI.get(), DY.get(), sc.grid,
                                            sc.width, sc.modes, gr.out()));
    TH_OK(tlrt_spectral_conv1d_rfft_bwd_wim(X.get(), WR.get(), WI.get(), DY.get(), sc.grid,
                                            sc.width, sc.modes, gi.out()));
    TH_OK(tlrt_spectral_conv1d_rfft_bwd_w(X.get(), WR.get(), WI.get(), DY.get(), sc.grid,
                                          sc.width, sc.modes, fr.out(), fi.out()));
    if (!y.get() || !dx.get() || !gr.get() || !gi.get() || !fr.get() || !fi.get()) return;
    res[side] = {th::download(y.get()), th::download(dx.get()), th::download(gr.get()),
                 th::download(gi.get())};
    TH_CHECK_MSG(th::download(fr.get()) == res[side][2] && th::download(fi.get()) == res[side][3],
                 "%s: bwd_w differs from bwd_wre / bwd_wim on %s", name, side ? "cuda" : "cpu");
  }
  const char *outs[4] = {"y", "dx", "dw_re", "dw_im"};
  for (int k = 0; k < 4; ++k) {
    const u64 len = res[0][k].size();
    if (len == 0) continue;
    compare_rows(std::string(name) + " " + outs[k], res[0][k], res[1][k], len, factor,
                 g_worst_spec);
  }
}

void plan_cache() {
  // More than 16 shapes, twice: the second pass re-creates evicted plans; same bits.
  std::vector<std::vector<float>> first;
  for (int pass = 0; pass < 2; ++pass)
    for (u64 n = 20; n < 40; ++n) {
      const std::vector<float> x = th::make(th::Dist::Uniform, 5 * n, n);
      const std::vector<float> g = run1(kGpu, false, x, 5, n);
      if (pass == 0)
        first.push_back(g);
      else
        TH_CHECK_MSG(g == first[n - 20], "cuda rfft n=%llu changed after plan eviction",
                     (unsigned long long)n);
    }
  // Four threads at once, two of them on the same shape.
  const u64 ns[4] = {4096, 4096, 1031, 1000};
  std::vector<std::vector<float>> in(4), want(4), got(4);
  for (int i = 0; i < 4; ++i) {
    in[i] = th::make(th::Dist::Uniform, 64 * ns[i], 300 + i);
    want[i] = run1(kGpu, false, in[i], 64, ns[i]);
  }
  std::vector<std::thread> ts;
  for (int i = 0; i < 4; ++i)
    ts.emplace_back([&, i] {
      for (int r = 0; r < 20; ++r) {
        tlrt_buffer *b = nullptr, *o = nullptr;
        tlrt_buffer_from_f32(kGpu, in[i].data(), in[i].size(), &b);
        tlrt_rfft1d_packed(b, 64, ns[i], &o);
        std::vector<float> v(64 * (ns[i] / 2 + 1) * 2);
        if (o) tlrt_buffer_to_f32(o, v.data(), v.size());
        if (r == 0 || v != want[i]) got[i] = v;
        tlrt_buffer_free(b);
        tlrt_buffer_free(o);
      }
    });
  for (auto &t : ts) t.join();
  for (int i = 0; i < 4; ++i) TH_CHECK_MSG(got[i] == want[i], "cuda thread %d: bits differ", i);
}

}  // namespace

int main() {
  if (!start("test_parity_fft")) return 77;
  for (u64 n = 1; n <= 33; ++n) transforms(3, n, th::Dist::Uniform);
  for (u64 n : {64ull, 97ull, 100ull, 127ull, 128ull, 210ull, 256ull, 509ull, 1000ull, 1024ull,
                1031ull, 4096ull, 4099ull, 8192ull, 65536ull, 65537ull})
    for (u64 batch : {1ull, 7ull}) transforms(batch, n, th::Dist::Uniform);
  transforms(4, 1024, th::Dist::Wide);
  transforms(4096, 16, th::Dist::Uniform);
  transforms(4096, 4096, th::Dist::Uniform);
  special_rows();
  for (const SpecCase &c :
       {SpecCase{1, 1, 1}, SpecCase{2, 3, 2}, SpecCase{7, 3, 4}, SpecCase{16, 4, 9},
        SpecCase{37, 5, 10}, SpecCase{64, 8, 16}, SpecCase{1000, 16, 501},
        SpecCase{4099, 8, 2050}, SpecCase{1024, 128, 16}, SpecCase{4096, 64, 32}})
    spectral(c);
  plan_cache();
  std::printf("largest error / bound: transforms %.3g, spectral %.3g\n", g_worst_fft,
              g_worst_spec);
  print_summary("test_parity_fft");
  return th::finish("test_parity_fft");
}
