// Counter-based RNG on the CPU: known values from an independent SplitMix64 written here from the
// formula in abi/tlrt_rng.h (core/numerics/rng.hpp is deliberately not included), the [0, 1)
// range, moments within 5 sigma, the prefix property (element i does not depend on n), the
// Bernoulli mask as (uniform < keep_prob), and the pair form of Box-Muller normals against a
// float64 reference (plus known values computed independently in Python float64).
#include <algorithm>
#include <cfloat>
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

// normal, float64 pair-form Box-Muller over the same counters: outputs 2j (cos) and 2j + 1 (sin)
// from counters key + 2j (u1) and key + 2j + 1 (u2).
double ref_z(uint64_t key, uint64_t i) {
  const uint64_t c = key + (i & ~uint64_t{1});
  const double u1 = std::ldexp((double)(ref_r(c) >> 8) + 1.0, -24);
  const double u2 = std::ldexp((double)(ref_r(c + 1) >> 8), -24);
  const double radius = std::sqrt(-2.0 * std::log(u1)), theta = 2.0 * 3.14159265358979323846 * u2;
  return radius * ((i & 1) ? std::sin(theta) : std::cos(theta));
}
double ref_normal(uint64_t key, uint64_t i, double mean, double sd) { return mean + sd * ref_z(key, i); }

// Error bound of the float32 evaluation (abi/tlrt_rng.h), mean and std exact in float32:
//   R = sqrt(-2 log u1): log_f within 0.9 ulp (relative 0.9 * 2^-23), halved by the sqrt, plus the
//   sqrt's rounding: relative 1.9 * 2^-24 ~ 1.13e-7, times R <= 5.7682: 6.6e-7;
//   cos / sin within 9e-8 absolute (shared_math.hpp), times R: 5.2e-7;
//   the product R * c rounded: 0.5 ulp of |z| < 8: 2.4e-7.
// So |z - z64| <= 1.42e-6 (the header's 1.5e-6), and the fma adds half an ulp of the result.
double normal_tolerance(double sd, float got) {
  const float a = std::fabs(got);
  const double half_ulp = a < FLT_MIN ? std::ldexp(1.0, -150) : std::ldexp(1.0, std::ilogb(a) - 24);
  return 1.5e-6 * sd + half_ulp;
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
  for (double p : {0.0, -0.5, -1e30}) {
    const std::vector<float> m = bernoulli(n, p, key);
    TH_CHECK_MSG(m.size() == n && std::all_of(m.begin(), m.end(), [](float x) {
                   return th::bits_of(x) == th::bits_of(0.0f);
                 }),
                 "bernoulli(keep_prob = %g) is not all +0", p);
  }
  for (double p : {1.0, 1.5, 1e30, 1.0 - std::ldexp(1.0, -26) /* rounds to 1.0f */}) {
    const std::vector<float> m = bernoulli(n, p, key);
    TH_CHECK_MSG(m.size() == n && std::all_of(m.begin(), m.end(), [](float x) { return x == 1.0f; }),
                 "bernoulli(keep_prob = %.17g) is not all 1", p);
  }
  // An infinite keep_prob, or one that rounds to +-inf in float32, breaks the host-scalar rule.
  for (double p : {(double)INFINITY, -(double)INFINITY, 1e39, -1e39}) {
    tlrt_buffer *b = nullptr;
    TH_STATUS(tlrt_bernoulli_mask(TLRT_DEVICE_CPU, 8, p, key, &b), TLRT_ERR_INVALID_ARGUMENT);
    TH_CHECK(b == nullptr);
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
      // |z| <= 5.7682 (header), so |x - mean| <= 5.7682 std (plus rounding).
      bounded &= std::fabs((double)x - ms.first) <= 5.7682 * ms.second * (1 + 1e-6) + 1e-6;
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
  // Against the float64 pair-form Box-Muller reference on the same draws, within
  // normal_tolerance (1.5e-6 std + half an ulp of the result; the derivation is above it).
  for (uint64_t key : {uint64_t{0}, uint64_t{42}, UINT64_MAX - 5, uint64_t{0x123456789ABCDEF1ull}}) {
    for (auto ms : {std::make_pair(0.0, 1.0), std::make_pair(1.5, 0.75), std::make_pair(-3.0, 4.0)}) {
      const size_t k = size_t{1} << 16;
      const std::vector<float> v = normal(k, ms.first, ms.second, key);
      TH_CHECK(v.size() == k);
      double worst = 0.0, worst_ratio = 0.0;
      size_t at = 0, bad = 0;
      for (size_t i = 0; i < v.size(); ++i) {
        const double e = std::fabs((double)v[i] - ref_normal(key, i, ms.first, ms.second));
        const double tol = normal_tolerance(ms.second, v[i]);
        bad += !(e <= tol);
        if (!(e <= worst)) worst = e, at = i;
        worst_ratio = std::max(worst_ratio, e / tol);
      }
      TH_CHECK_MSG(bad == 0, "normal(key %llu, %g, %g): %zu values off the reference by more than "
                   "the bound; worst [%zu] by %.3g", (unsigned long long)key, ms.first, ms.second,
                   bad, at, worst);
      if (ms.first == 0.0)
        std::printf("normal key %llu: max error %.3g at %zu (%.2f of the bound)\n",
                    (unsigned long long)key, worst, at, worst_ratio);
    }
  }
  // Known values, computed independently in Python float64 (integer SplitMix64, math.log, cos,
  // sin) from the header's formula; keys 0, 42 and UINT64_MAX - 4 (whose counters wrap at i = 5),
  // n = 7 (odd: the last value is the cos of pair 3).
  struct Known {
    uint64_t key;
    double z[7];
  };
  const Known known[] = {
      {0, {-1.1805371556185846, -0.2653790035178545, 1.288442127223523, -1.650477454404404,
           -0.31994827681279947, -0.3809685240716413, -0.5096859813728291}},
      {42, {1.5996985474319738, -0.890094166778976, -1.8137136473972701, -0.5869070527550133,
            -1.0840291541476725, 1.5007179410163705, 0.25407365072541255}},
      {UINT64_MAX - 4, {0.6729447281377172, 1.2302554911683654, 0.12245601114755801,
                        0.8193905889189536, -2.098978567132939, 0.2527981923861997,
                        0.8539586096287973}},
  };
  for (const Known &kn : known) {
    const std::vector<float> v = normal(7, 0.0, 1.0, kn.key);
    TH_CHECK(v.size() == 7);
    for (size_t i = 0; i < v.size(); ++i) {
      TH_CHECK_MSG(std::fabs((double)v[i] - kn.z[i]) <= normal_tolerance(1.0, v[i]),
                   "normal(key %llu)[%zu] = %.9g, known value %.17g", (unsigned long long)kn.key, i,
                   v[i], kn.z[i]);
      // The C++ reference agrees with the Python values (both float64; a few ulp of double).
      TH_CHECK_MSG(std::fabs(ref_z(kn.key, i) - kn.z[i]) <= 1e-14,
                   "ref_z(key %llu, %zu) = %.17g, Python %.17g", (unsigned long long)kn.key, i,
                   ref_z(kn.key, i), kn.z[i]);
    }
  }
  {
    const std::vector<float> v = normal(3, 0.0, 1.0, 0);
    std::printf("normal key 0: %.9g %.9g %.9g (float64 %.9g %.9g %.9g)\n", v[0], v[1], v[2],
                known[0].z[0], known[0].z[1], known[0].z[2]);
  }
  // Pairs: out[2j]^2 + out[2j + 1]^2 = R^2 = -2 log u1 of counter key + 2j (within the bound),
  // and the odd n's last output is the cos of its pair, equal to the even output of a longer run.
  {
    const uint64_t key = 0xFACEull;
    const std::vector<float> v = normal(1001, 0.0, 1.0, key);
    TH_CHECK(v.size() == 1001);
    size_t bad = 0;
    for (size_t j = 0; j + 1 < v.size(); j += 2) {
      const double u1 = std::ldexp((double)(ref_r(key + j) >> 8) + 1.0, -24);
      const double r = std::sqrt(-2.0 * std::log(u1));
      const double rr = std::hypot((double)v[j], (double)v[j + 1]);
      bad += !(std::fabs(rr - r) <= 3e-6);
    }
    TH_CHECK_MSG(bad == 0, "normal pairs: %zu pairs whose radius is not sqrt(-2 log u1)", bad);
    const std::vector<float> w = normal(1002, 0.0, 1.0, key);
    TH_CHECK(same_bits_vec(v, w, 1001));
  }
  // Boundary sizes: every n gives the prefix of a long stream, bit for bit (pairs never depend
  // on n), and |z| <= 5.7682 (the header's bound).
  {
    const std::vector<float> longv = normal(4099, 0.0, 1.0, 99);
    for (size_t k : {size_t{1}, size_t{2}, size_t{3}, size_t{4}, size_t{5}, size_t{7}, size_t{8},
                     size_t{9}, size_t{31}, size_t{64}, size_t{65}, size_t{97}, size_t{1024},
                     size_t{1025}, size_t{4099}}) {
      const std::vector<float> v = normal(k, 0.0, 1.0, 99);
      TH_CHECK_MSG(same_bits_vec(v, longv, k), "normal(n = %zu) is not a prefix of n = 4099", k);
    }
    // Keys an even d apart: the same pairs, shifted by d (an odd d re-pairs the draws).
    const std::vector<float> shifted = normal(4099 - 10, 0.0, 1.0, 109);
    TH_CHECK(shifted.size() == 4089 && std::memcmp(shifted.data(), longv.data() + 10, 4 * 4089) == 0);
  }
  {
    // The extremes of u1: the first counters x with r(x) >> 8 = 0 (u1 = 2^-24, the largest
    // radius sqrt(48 ln 2) = 5.76811) and with r(x) >> 8 = 2^24 - 1 (u1 = 1, radius 0), found by
    // search (~2^24 hashes each); key = x puts them in pair 0.
    uint64_t x_min = 0, x_one = 0;
    while ((ref_r(x_min) >> 8) != 0) ++x_min;
    while ((ref_r(x_one) >> 8) != 0xFFFFFFu) ++x_one;
    const std::vector<float> big = normal(2, 0.0, 1.0, x_min), one = normal(2, 0.0, 1.0, x_one);
    TH_CHECK(big.size() == 2 && one.size() == 2);
    const double rbig = std::hypot((double)big[0], (double)big[1]);
    TH_CHECK_MSG(std::fabs(big[0]) <= 5.7682f && std::fabs(big[1]) <= 5.7682f &&
                     std::fabs(rbig - std::sqrt(48.0 * std::log(2.0))) <= 3e-6,
                 "normal at u1 = 2^-24 (key %llu): %.9g %.9g", (unsigned long long)x_min, big[0],
                 big[1]);
    TH_CHECK_MSG(one[0] == 0.0f && one[1] == 0.0f, "normal at u1 = 1 (key %llu): %.9g %.9g",
                 (unsigned long long)x_one, one[0], one[1]);
    std::printf("normal extremes: key %llu (u1 = 2^-24): %.9g %.9g; key %llu (u1 = 1): %g %g\n",
                (unsigned long long)x_min, big[0], big[1], (unsigned long long)x_one, one[0], one[1]);
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
