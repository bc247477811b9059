// Counter-based RNG on the CPU: known values from an independent SplitMix64 written here from the
// formula in abi/tlrt_rng.h (core/numerics/rng.hpp is deliberately not included), the [0, 1)
// range, moments within 5 sigma, the prefix property (element i does not depend on n), the
// Bernoulli mask as (uniform < keep_prob), and Box-Muller normals against a float64 reference.
#include <algorithm>
#include <vector>

#include "harness.hpp"

namespace {

// ---- reference, from the header text ----------------------------------------------------------
//   x = key + i (mod 2^64);  z = x + 0x9E3779B97F4A7C15;
//   z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9;  z = (z ^ (z >> 27)) * 0x94D049BB133111EB;
//   sm(x) = z ^ (z >> 31);   r(x) = low 32 bits of sm(x).
uint64_t ref_sm(uint64_t x) {
  uint64_t z = x + 0x9E3779B97F4A7C15ull;
  z ^= z >> 30;
  z *= 0xBF58476D1CE4E5B9ull;
  z ^= z >> 27;
  z *= 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
uint32_t ref_r(uint64_t x) { return (uint32_t)(ref_sm(x) & 0xFFFFFFFFull); }

// uniform: (r(key + i) >> 8) * 2^-24, computed in double (exact) and narrowed (exact).
float ref_uniform(uint64_t key, uint64_t i) {
  return (float)std::ldexp((double)(ref_r(key + i) >> 8), -24);
}

// normal, float64 Box-Muller over the same counters.
double ref_normal(uint64_t key, uint64_t i, double mean, double sd) {
  const double u1 = std::ldexp((double)(ref_r(key + 2 * i) >> 8) + 1.0, -24);
  const double u2 = std::ldexp((double)(ref_r(key + 2 * i + 1) >> 8), -24);
  const double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * 3.14159265358979323846 * u2);
  return mean + sd * z;
}

std::vector<float> uniform(uint64_t n, uint64_t key) {
  tlrt_buffer *b = nullptr;
  TH_OK(tlrt_rand_uniform(TLRT_DEVICE_CPU, n, key, &b));
  std::vector<float> v = th::download(b);
  tlrt_buffer_free(b);
  return v;
}
std::vector<float> normal(uint64_t n, double mean, double sd, uint64_t key) {
  tlrt_buffer *b = nullptr;
  TH_OK(tlrt_rand_normal(TLRT_DEVICE_CPU, n, mean, sd, key, &b));
  std::vector<float> v = th::download(b);
  tlrt_buffer_free(b);
  return v;
}
std::vector<float> bernoulli(uint64_t n, double p, uint64_t key) {
  tlrt_buffer *b = nullptr;
  TH_OK(tlrt_bernoulli_mask(TLRT_DEVICE_CPU, n, p, key, &b));
  std::vector<float> v = th::download(b);
  tlrt_buffer_free(b);
  return v;
}

bool same_bits_vec(const std::vector<float> &a, const std::vector<float> &b, size_t n) {
  if (a.size() < n || b.size() < n) return false;
  return n == 0 || std::memcmp(a.data(), b.data(), 4 * n) == 0;
}

// ---- uniform -----------------------------------------------------------------------------------

void check_reference_itself() {
  // SplitMix64 from state 0 is a published sequence whose first output is 0xE220A8397B1DCDAF;
  // with the header's x = key + i, element 0 of key 0 is that output.
  TH_CHECK(ref_sm(0) == 0xE220A8397B1DCDAFull);
  TH_CHECK(ref_r(0) == 0x7B1DCDAFu);
  TH_CHECK(ref_uniform(0, 0) == (float)0x7B1DCD / 16777216.0f);
}

void check_uniform_known_values() {
  // Keys 0 and 42, keys where key + i wraps around 2^64, and a large odd key.
  for (uint64_t key : {uint64_t{0}, uint64_t{42}, UINT64_MAX - 3, uint64_t{0x8000000000000000ull},
                       uint64_t{0x123456789ABCDEF1ull}}) {
    const size_t n = 1000;
    const std::vector<float> v = uniform(n, key);
    TH_CHECK(v.size() == n);
    int bad = 0;
    for (size_t i = 0; i < v.size(); ++i)
      if (th::bits_of(v[i]) != th::bits_of(ref_uniform(key, i))) {
        if (bad++ < 5)
          TH_CHECK_MSG(false, "uniform(key %llu)[%zu] = %.9g, reference %.9g",
                       (unsigned long long)key, i, v[i], ref_uniform(key, i));
      }
    TH_CHECK_MSG(bad == 0, "uniform(key %llu): %d of %zu values differ from the reference",
                 (unsigned long long)key, bad, n);
  }
  // The first values printed for the record (key 0 and key 42).
  const std::vector<float> k0 = uniform(3, 0), k42 = uniform(3, 42);
  std::printf("uniform key 0: %.9g %.9g %.9g; key 42: %.9g %.9g %.9g\n", k0[0], k0[1], k0[2],
              k42[0], k42[1], k42[2]);
}

void check_uniform_distribution() {
  const size_t n = size_t{1} << 20;
  const std::vector<float> v = uniform(n, 0x5EEDull);
  TH_CHECK(v.size() == n);
  double sum = 0.0, sum2 = 0.0;
  float lo = 1.0f, hi = 0.0f;
  bool grid = true;
  for (float x : v) {
    sum += x;
    sum2 += (double)x * x;
    lo = std::min(lo, x);
    hi = std::max(hi, x);
    const double scaled = std::ldexp((double)x, 24);  // every value is k * 2^-24, k < 2^24
    grid &= scaled == std::floor(scaled);
  }
  TH_CHECK_MSG(lo >= 0.0f && hi < 1.0f, "uniform range [%.9g, %.9g] not inside [0, 1)", lo, hi);
  TH_CHECK(grid);
  const double mean = sum / n, var = sum2 / n - mean * mean;
  // Mean: sigma = sqrt(1/12 / n). Variance: sigma = sqrt((mu4 - sigma^4) / n), mu4 = 1/80.
  const double s_mean = std::sqrt(1.0 / 12.0 / n);
  const double s_var = std::sqrt((1.0 / 80.0 - 1.0 / 144.0) / n);
  TH_CHECK_MSG(std::fabs(mean - 0.5) <= 5 * s_mean, "uniform mean %.6f", mean);
  TH_CHECK_MSG(std::fabs(var - 1.0 / 12.0) <= 5 * s_var, "uniform variance %.6f", var);

  // Prefix property: element i depends only on (key, i), not on n.
  const std::vector<float> a = uniform(10, 42), b = uniform(1000, 42);
  TH_CHECK(same_bits_vec(a, b, 10));
  const std::vector<float> c = uniform(1, 42);
  TH_CHECK(same_bits_vec(c, b, 1));
  // Offsetting the key shifts the stream: uniform(key + d)[i] == uniform(key)[i + d].
  const std::vector<float> d = uniform(990, 52);
  TH_CHECK(d.size() == 990 && std::memcmp(d.data(), b.data() + 10, 4 * 990) == 0);
  // Empty.
  TH_CHECK(uniform(0, 1).empty());
}

// ---- bernoulli ---------------------------------------------------------------------------------

void check_bernoulli() {
  const size_t n = size_t{1} << 20;
  const uint64_t key = 0xB0B0ull;
  const std::vector<float> u = uniform(n, key);
  for (double p : {0.0, -0.5, -(double)INFINITY}) {
    const std::vector<float> m = bernoulli(n, p, key);
    TH_CHECK_MSG(m.size() == n && std::all_of(m.begin(), m.end(), [](float x) {
                   return th::bits_of(x) == th::bits_of(0.0f);
                 }),
                 "bernoulli(keep_prob = %g) is not all +0", p);
  }
  for (double p : {1.0, 1.5, (double)INFINITY, 1.0 - std::ldexp(1.0, -26) /* rounds to 1.0f */}) {
    const std::vector<float> m = bernoulli(n, p, key);
    TH_CHECK_MSG(m.size() == n && std::all_of(m.begin(), m.end(), [](float x) { return x == 1.0f; }),
                 "bernoulli(keep_prob = %.17g) is not all 1", p);
  }
  for (double p : {0.3, 0.5, 0.999, 1e-3}) {
    const std::vector<float> m = bernoulli(n, p, key);
    TH_CHECK(m.size() == n);
    const float pf = (float)p;
    size_t ones = 0, bad = 0;
    for (size_t i = 0; i < m.size() && i < u.size(); ++i) {
      const float want = u[i] < pf ? 1.0f : 0.0f;
      bad += th::bits_of(m[i]) != th::bits_of(want);
      ones += m[i] == 1.0f;
    }
    TH_CHECK_MSG(bad == 0, "bernoulli(%g): %zu elements differ from (uniform < keep_prob)", p, bad);
    const double frac = (double)ones / n, sigma = std::sqrt(p * (1 - p) / n);
    TH_CHECK_MSG(std::fabs(frac - p) <= 5 * sigma, "bernoulli(%g): kept fraction %.6f", p, frac);
  }
  // The comparison is strict: keep_prob equal to u[i] drops element i, the next float up keeps it.
  for (size_t i : {size_t{0}, size_t{1}, size_t{12345}, n - 1}) {
    const std::vector<float> at = bernoulli(n, (double)u[i], key);
    const std::vector<float> above = bernoulli(n, (double)std::nextafter(u[i], 2.0f), key);
    TH_CHECK_MSG(at.size() == n && at[i] == 0.0f, "bernoulli(keep_prob = u[%zu] = %a)[%zu] = %g",
                 i, u[i], i, at.empty() ? -1.0f : at[i]);
    TH_CHECK_MSG(above.size() == n && above[i] == 1.0f, "bernoulli(keep_prob > u[%zu])[%zu] = %g",
                 i, i, above.empty() ? -1.0f : above[i]);
  }
  // Prefix property and empty.
  const std::vector<float> a = bernoulli(17, 0.3, 9), b = bernoulli(1017, 0.3, 9);
  TH_CHECK(same_bits_vec(a, b, 17));
  TH_CHECK(bernoulli(0, 0.3, 9).empty());
}

// ---- normal ------------------------------------------------------------------------------------

void check_normal() {
  // Moments over 2^18 samples, within 5 sigma: sd of the mean s/sqrt(n), of the std s/sqrt(2n).
  const size_t n = size_t{1} << 18;
  for (auto ms : {std::make_pair(0.0, 1.0), std::make_pair(2.5, 0.75), std::make_pair(-1.0, 3.0)}) {
    const std::vector<float> v = normal(n, ms.first, ms.second, 0xC0FFEEull);
    TH_CHECK(v.size() == n);
    double sum = 0.0, sum2 = 0.0;
    bool finite = true, bounded = true;
    for (float x : v) {
      finite &= std::isfinite(x);
      // |z| <= 5.8 (header), so |x - mean| <= 5.8 std (plus rounding).
      bounded &= std::fabs((double)x - ms.first) <= 5.8 * ms.second * (1 + 1e-6) + 1e-6;
      sum += x;
      sum2 += (double)x * x;
    }
    const double mean = sum / n, sd = std::sqrt(sum2 / n - mean * mean);
    TH_CHECK(finite);
    TH_CHECK(bounded);
    TH_CHECK_MSG(std::fabs(mean - ms.first) <= 5 * ms.second / std::sqrt((double)n),
                 "normal(%g, %g): mean %.6f", ms.first, ms.second, mean);
    TH_CHECK_MSG(std::fabs(sd - ms.second) <= 5 * ms.second / std::sqrt(2.0 * n),
                 "normal(%g, %g): std %.6f", ms.first, ms.second, sd);
  }
  // std = 0: fma(0, z, mean) is exactly mean (rounded once to float32).
  for (double mean : {2.0, -0.1, 0.0, 1e30}) {
    const std::vector<float> v = normal(1000, mean, 0.0, 77);
    TH_CHECK(v.size() == 1000);
    bool ok = true;
    for (float x : v) ok &= th::bits_of(x) == th::bits_of((float)mean);
    TH_CHECK_MSG(ok, "normal(mean = %g, std = 0) is not exactly (float)mean", mean);
  }
  // Prefix property: the first n of n + 7 (odd and even n).
  for (size_t k : {size_t{1}, size_t{10}, size_t{333}}) {
    const std::vector<float> a = normal(k, 0.0, 1.0, 1234), b = normal(k + 7, 0.0, 1.0, 1234);
    TH_CHECK(same_bits_vec(a, b, k));
  }
  // Against the float64 Box-Muller reference, within 1e-5 absolute (the float32 evaluation of
  // sqrt(-2 log u1) cos(2 pi u2) with |z| <= 5.8 is accurate to a few 1e-7).
  for (uint64_t key : {uint64_t{0}, uint64_t{42}, UINT64_MAX - 5}) {
    for (auto ms : {std::make_pair(0.0, 1.0), std::make_pair(1.5, 0.75)}) {
      const size_t k = 1000;
      const std::vector<float> v = normal(k, ms.first, ms.second, key);
      TH_CHECK(v.size() == k);
      double worst = 0.0;
      size_t at = 0;
      for (size_t i = 0; i < v.size(); ++i) {
        const double e = std::fabs((double)v[i] - ref_normal(key, i, ms.first, ms.second));
        if (!(e <= worst)) worst = e, at = i;
      }
      TH_CHECK_MSG(worst <= 1e-5, "normal(key %llu, %g, %g)[%zu] off the reference by %.3g",
                   (unsigned long long)key, ms.first, ms.second, at, worst);
      if (key == 0 && ms.first == 0.0)
        std::printf("normal key 0: %.9g %.9g %.9g (reference %.9g %.9g %.9g), max error %.3g\n",
                    v[0], v[1], v[2], ref_normal(0, 0, 0, 1), ref_normal(0, 1, 0, 1),
                    ref_normal(0, 2, 0, 1), worst);
    }
  }
  TH_CHECK(normal(0, 0.0, 1.0, 3).empty());
}

}  // namespace

int main() {
  const tlrt_allocator_stats start = th::stats();
  check_reference_itself();
  check_uniform_known_values();
  check_uniform_distribution();
  check_bernoulli();
  check_normal();
  const tlrt_allocator_stats end = th::stats();
  TH_CHECK(end.live_bytes == start.live_bytes && end.live_handles == start.live_handles);
  return th::finish("test_rng");
}
