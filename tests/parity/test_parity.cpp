// Suite 'parity': every op of abi/tlrt_elementwise.h and abi/tlrt_rng.h, and the buffer ops of
// abi/tlrt_buffer.h, run on TLRT_DEVICE_CPU and TLRT_DEVICE_CUDA(0) with the same seeded inputs;
// the results must agree BIT FOR BIT (th::same_bits: any NaN equals any NaN, since NaN payloads
// are unspecified). Both numeric classes used here are bitwise on both backends by design:
// "exact" ops are single IEEE operations, "shared math" ops run one float32 implementation
// (core/numerics/shared_math.hpp) compiled for both (DESIGN section 4).
//
// Inputs: seeded uniform vectors in a narrow and a wide range, random bit patterns (every float
// class: NaN, inf, subnormal), a mixed vector sprinkled with edge values and subnormals, and the
// edge vector itself (all pairs of edge values for binary ops). Sizes 0, 1, 3, 4, 5, 1023, 4097,
// 2^20 and 2^20 + 3 (the CUDA kernels process 4 floats per thread: the odd sizes exercise the
// scalar tail). TLRT_PARITY_MAX_N=<n> caps the sizes (for slow runs such as compute-sanitizer).
//
// Also: upload/download round trips of every kind (payload bits preserved), zeros/full/copy,
// CPU <-> CUDA transfers, release_storage on a CUDA buffer, allocator telemetry on the CUDA
// device, tlrt_allocator_trim, and the device errors (DEVICE_MISMATCH, NO_DEVICE).
//
// Exits 77 (skipped) unless a CUDA device is usable. Prints one line per failing op and a summary.
#include <algorithm>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "harness.hpp"

namespace {

const tlrt_device kCpu = TLRT_DEVICE_CPU;
#ifndef TLRT_PARITY_SELFTEST
const tlrt_device kGpu = TLRT_DEVICE_CUDA(0);
#else
// Compile-time switch to check this test's own logic on a machine without a GPU: the "CUDA" side
// is the CPU as well, and the checks that need two distinct devices are skipped.
const tlrt_device kGpu = TLRT_DEVICE_CPU;
#endif

// Owning handle (frees on scope exit; CUDA frees are stream-ordered, so this never blocks).
using th::Buf;

Buf up(const std::vector<float> &v, tlrt_device dev) { return Buf(th::upload(v, dev)); }

// ---- summary --------------------------------------------------------------------------------

struct Summary {
  uint64_t runs = 0;         // op invocations compared (one per op, input set and size)
  uint64_t elements = 0;     // output elements compared
  uint64_t mismatches = 0;   // output elements that differ
  uint64_t failed_runs = 0;  // runs with a mismatch or an error
} g_sum;

std::string hex_of(float f) {
  char b[48];
  std::snprintf(b, sizeof b, "%.9g (0x%08x)", (double)f, th::bits_of(f));
  return b;
}

// Compare two downloaded outputs; print one line for the run if anything differs.
void compare(const std::string &what, const std::vector<std::vector<float>> &inputs,
             const std::vector<float> &cpu, const std::vector<float> &gpu, const char *out_name) {
  ++g_sum.runs;
  uint64_t bad = 0;
  size_t first = 0;
  const size_t n = std::min(cpu.size(), gpu.size());
  for (size_t i = 0; i < n; ++i) {
    if (!th::same_bits(cpu[i], gpu[i])) {
      if (bad == 0) first = i;
      ++bad;
    }
  }
  g_sum.elements += n;
  g_sum.mismatches += bad;
  const bool size_ok = cpu.size() == gpu.size();
  TH_CHECK_MSG(bad == 0 && size_ok, "%s%s: sizes cpu %zu cuda %zu, %llu mismatches", what.c_str(),
               out_name, cpu.size(), gpu.size(), (unsigned long long)bad);
  if (bad != 0 || !size_ok) {
    ++g_sum.failed_runs;
    std::string in;
    for (size_t k = 0; k < inputs.size(); ++k)
      in += (k ? ", " : "") + (first < inputs[k].size() ? hex_of(inputs[k][first]) : "-");
    std::printf("MISMATCH %s%s: n=%zu, %llu of %zu elements differ; first i=%zu in=(%s) cpu=%s "
                "cuda=%s\n",
                what.c_str(), out_name, cpu.size(), (unsigned long long)bad, n, first, in.c_str(),
                first < cpu.size() ? hex_of(cpu[first]).c_str() : "-",
                first < gpu.size() ? hex_of(gpu[first]).c_str() : "-");
  }
}

// ---- the ops --------------------------------------------------------------------------------

using Fn = std::function<tlrt_status(tlrt_buffer *const *in, tlrt_buffer **out)>;
struct Op {
  std::string name;
  int nin;   // inputs (buffers)
  int nout;  // outputs
  Fn fn;
};

std::string fmt_d(double v) {
  char b[40];
  std::snprintf(b, sizeof b, "%.9g", v);
  return b;
}

std::vector<Op> all_ops() {
  std::vector<Op> ops;
#define UN(f) ops.push_back({#f, 1, 1, [](tlrt_buffer *const *i, tlrt_buffer **o) { return tlrt_##f(i[0], o); }})
#define BIN(f) ops.push_back({#f, 2, 1, [](tlrt_buffer *const *i, tlrt_buffer **o) { return tlrt_##f(i[0], i[1], o); }})
#define TERN(f) ops.push_back({#f, 3, 2, [](tlrt_buffer *const *i, tlrt_buffer **o) { return tlrt_##f(i[0], i[1], i[2], &o[0], &o[1]); }})
  // exact unary
  UN(abs); UN(neg); UN(sqrt); UN(inv); UN(relu);
  for (double c : {0.5, -3.75, 0.1, 1e30, -0.0, (double)std::numeric_limits<float>::max()})
    ops.push_back({"scale(c=" + fmt_d(c) + ")", 1, 1,
                   [c](tlrt_buffer *const *i, tlrt_buffer **o) { return tlrt_scale(i[0], c, o); }});
  const double inf = std::numeric_limits<double>::infinity();
  const std::pair<double, double> bounds[] = {{-1.0, 1.0}, {-inf, 0.5}, {0.0, inf},
                                              {2.0, -2.0}, {-0.0, 0.0}, {-1e-40, 3.3}};
  for (auto b : bounds) {
    const double lo = b.first, hi = b.second;
    ops.push_back({"clamp(lo=" + fmt_d(lo) + ",hi=" + fmt_d(hi) + ")", 1, 1,
                   [lo, hi](tlrt_buffer *const *i, tlrt_buffer **o) { return tlrt_clamp(i[0], lo, hi, o); }});
  }
  // shared-math unary
  UN(exp); UN(log); UN(sigmoid); UN(tanh); UN(softplus); UN(gelu); UN(silu);
  for (double eps : {0.0, 1e-6, 0.5})
    ops.push_back({"safe_log(eps=" + fmt_d(eps) + ")", 1, 1,
                   [eps](tlrt_buffer *const *i, tlrt_buffer **o) { return tlrt_safe_log(i[0], eps, o); }});
  // exact binary
  BIN(add); BIN(sub); BIN(mul); BIN(div); BIN(max); BIN(min);
  for (double c : {0.75, -2.5, 1e-3, 3e38, 0.0})
    ops.push_back({"axpy(c=" + fmt_d(c) + ")", 2, 1,
                   [c](tlrt_buffer *const *i, tlrt_buffer **o) { return tlrt_axpy(i[0], i[1], c, o); }});
  // backward kernels (x, g)
  BIN(abs_bwd); BIN(sqrt_bwd); BIN(inv_bwd); BIN(log_bwd); BIN(relu_bwd);
  for (auto b : bounds) {
    const double lo = b.first, hi = b.second;
    ops.push_back({"clamp_bwd(lo=" + fmt_d(lo) + ",hi=" + fmt_d(hi) + ")", 2, 1,
                   [lo, hi](tlrt_buffer *const *i, tlrt_buffer **o) { return tlrt_clamp_bwd(i[0], i[1], lo, hi, o); }});
  }
  BIN(exp_bwd); BIN(sigmoid_bwd); BIN(tanh_bwd); BIN(softplus_bwd); BIN(gelu_bwd); BIN(silu_bwd);
  for (double eps : {0.0, 1e-6, 0.5})
    ops.push_back({"safe_log_bwd(eps=" + fmt_d(eps) + ")", 2, 1,
                   [eps](tlrt_buffer *const *i, tlrt_buffer **o) { return tlrt_safe_log_bwd(i[0], i[1], eps, o); }});
  TERN(max_bwd); TERN(min_bwd);
#undef UN
#undef BIN
#undef TERN
  return ops;
}

// Every elementwise entry point of abi/tlrt_elementwise.h must be in all_ops() (kept in sync by
// hand with the header; the abi suite checks the header against the exports).
const char *const kElementwiseNames[] = {
    "add", "sub", "mul", "div", "max", "min", "max_bwd", "min_bwd", "abs", "neg", "sqrt", "inv",
    "relu", "scale", "axpy", "clamp", "abs_bwd", "sqrt_bwd", "inv_bwd", "log_bwd", "relu_bwd",
    "clamp_bwd", "exp", "log", "sigmoid", "tanh", "softplus", "gelu", "safe_log", "exp_bwd",
    "sigmoid_bwd", "tanh_bwd", "softplus_bwd", "gelu_bwd", "safe_log_bwd", "silu", "silu_bwd"};

// Run op on both devices with the same inputs and compare every output bit for bit.
void run_op(const Op &op, const std::vector<std::vector<float>> &inputs, const std::string &label) {
  const std::string what = op.name + " [" + label + ", n=" + std::to_string(inputs[0].size()) + "]";
  Buf in_c[3], in_g[3];
  for (int k = 0; k < op.nin; ++k) {
    in_c[k] = up(inputs[k], kCpu);
    in_g[k] = up(inputs[k], kGpu);
    if (!in_c[k].get() || !in_g[k].get()) return;
  }
  tlrt_buffer *pc[3] = {in_c[0].get(), in_c[1].get(), in_c[2].get()};
  tlrt_buffer *pg[3] = {in_g[0].get(), in_g[1].get(), in_g[2].get()};
  tlrt_buffer *oc[2] = {nullptr, nullptr}, *og[2] = {nullptr, nullptr};
  const tlrt_status sc = op.fn(pc, oc);
  const tlrt_status sg = op.fn(pg, og);
  Buf hold[4] = {Buf(oc[0]), Buf(oc[1]), Buf(og[0]), Buf(og[1])};
  TH_CHECK_MSG(sc == TLRT_OK && sg == TLRT_OK, "%s: cpu %s, cuda %s (last error: %s)", what.c_str(),
               tlrt_status_string(sc), tlrt_status_string(sg), tlrt_last_error());
  if (sc != TLRT_OK || sg != TLRT_OK) {
    ++g_sum.failed_runs;
    std::printf("ERROR %s: cpu %s, cuda %s\n", what.c_str(), tlrt_status_string(sc),
                tlrt_status_string(sg));
    return;
  }
  for (int k = 0; k < op.nout; ++k) {
    tlrt_device d = 12345;
    TH_OK(tlrt_buffer_device(og[k], &d));
    TH_CHECK_MSG(d == kGpu, "%s: output %d is on device 0x%x, expected CUDA(0)", what.c_str(), k, d);
    const char *oname = op.nout == 1 ? "" : (k == 0 ? " da" : " db");
    compare(what, inputs, th::download(oc[k]), th::download(og[k]), oname);
  }
}

// ---- inputs ---------------------------------------------------------------------------------

std::vector<float> subnormals() {
  return {1e-45f, -1e-45f, 2.8e-45f, 1e-40f, -1e-40f, 5.877472e-39f, -3e-39f,
          1.1754942e-38f, -1.1754942e-38f, 7.3e-42f};
}

// Edge values plus extra subnormals and a few classic trouble spots.
std::vector<float> edges() {
  std::vector<float> e = th::edge_values();
  for (float s : subnormals()) e.push_back(s);
  for (float v : {0.7518f, -0.7518f, 9.0f, -9.0f, 1e30f, -1e30f, 0.25f, 4.0f, 0.999999f,
                  1.0000001f, -88.72284f, 89.41599f, -1.2784645f, 16.67713f, -108.6603f,
                  19.556345f, -110.0f})
    e.push_back(v);
  return e;
}

enum class Kind { Narrow, Wide, Bits, Mixed };
const char *kind_name(Kind k) {
  switch (k) {
    case Kind::Narrow: return "uniform(-4,4)";
    case Kind::Wide: return "uniform(-110,110)";
    case Kind::Bits: return "random bits";
    default: return "mixed";
  }
}

std::vector<float> make(th::Rng &rng, Kind kind, size_t n) {
  switch (kind) {
    case Kind::Narrow: return rng.vec(n, -4.0f, 4.0f);
    case Kind::Wide: return rng.vec(n, -110.0f, 110.0f);
    case Kind::Bits: return rng.bits(n);
    default: break;
  }
  // Mixed: 40% narrow, 20% wide, 20% random bits, 10% edge values, 10% subnormals.
  static const std::vector<float> e = edges(), sub = subnormals();
  std::vector<float> v(n);
  for (auto &x : v) {
    const uint32_t r = (uint32_t)(rng.gen() % 10);
    if (r < 4) x = rng.uniform(-4.0f, 4.0f);
    else if (r < 6) x = rng.uniform(-110.0f, 110.0f);
    else if (r < 8) {
      const uint32_t u = (uint32_t)rng.gen();
      std::memcpy(&x, &u, 4);
    }
    else if (r < 9) x = e[rng.gen() % e.size()];
    else x = sub[rng.gen() % sub.size()];
  }
  return v;
}

const size_t kSmallSizes[] = {0, 1, 3, 4, 5, 1023, 4097};
const size_t kLargeSizesAll[] = {size_t(1) << 20, (size_t(1) << 20) + 3};

// TLRT_PARITY_MAX_N caps the sizes (e.g. 4097 for slow compute-sanitizer passes); default: none.
size_t max_n() {
  static const size_t m = [] {
    const char *e = std::getenv("TLRT_PARITY_MAX_N");
    return e && *e ? (size_t)std::strtoull(e, nullptr, 0) : SIZE_MAX;
  }();
  return m;
}

std::vector<size_t> large_sizes() {
  std::vector<size_t> v;
  for (size_t n : kLargeSizesAll)
    if (n <= max_n()) v.push_back(n);
  return v;
}

std::vector<size_t> all_sizes() {
  std::vector<size_t> v;
  for (size_t n : kSmallSizes)
    if (n <= max_n()) v.push_back(n);
  for (size_t n : large_sizes()) v.push_back(n);
  return v;
}

void elementwise_parity() {
  const std::vector<Op> ops = all_ops();
  // Coverage of the header's entry points.
  for (const char *name : kElementwiseNames) {
    bool found = false;
    for (const Op &op : ops)
      found = found || op.name == name || op.name.rfind(std::string(name) + "(", 0) == 0;
    TH_CHECK_MSG(found, "op %s is not exercised by the parity suite", name);
  }

  th::Rng rng(1);
  for (const Op &op : ops) {
    // Random inputs: every kind at the small sizes, the mixed kind at the large ones.
    for (Kind kind : {Kind::Narrow, Kind::Wide, Kind::Bits, Kind::Mixed}) {
      for (size_t n : kSmallSizes) {
        if (n > max_n()) continue;
        std::vector<std::vector<float>> in;
        for (int k = 0; k < op.nin; ++k) in.push_back(make(rng, kind, n));
        run_op(op, in, kind_name(kind));
      }
    }
    for (size_t n : large_sizes()) {
      std::vector<std::vector<float>> in;
      for (int k = 0; k < op.nin; ++k) in.push_back(make(rng, Kind::Mixed, n));
      run_op(op, in, kind_name(Kind::Mixed));
    }
    // Edge values: the vector itself (unary), all ordered pairs (binary; for max_bwd/min_bwd
    // with g cycling through the edge values too).
    const std::vector<float> e = edges();
    if (op.nin == 1) {
      run_op(op, {e}, "edge values");
    } else {
      std::vector<std::vector<float>> in(op.nin);
      for (size_t i = 0; i < e.size(); ++i)
        for (size_t j = 0; j < e.size(); ++j) {
          in[0].push_back(e[i]);
          in[1].push_back(e[j]);
          if (op.nin == 3) in[2].push_back(e[(i * 7 + j) % e.size()]);
        }
      run_op(op, in, "edge pairs");
      if (op.nin == 3) {  // and with a finite random gradient
        in[2] = rng.vec(in[0].size());
        run_op(op, in, "edge pairs, random g");
      }
    }
  }
}

// ---- RNG --------------------------------------------------------------------------------------

uint64_t splitmix64(uint64_t x) {
  uint64_t z = x + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// The uniform value the header specifies at (key, i): (r >> 8) * 2^-24 with r the low 32 bits.
float spec_uniform(uint64_t key, uint64_t i) {
  const uint32_t r = (uint32_t)splitmix64(key + i);
  return std::ldexp((float)(r >> 8), -24);
}

// The normal the header specifies at (key, i), in float64 on the same draws (pair form: output 2j
// the cos, 2j + 1 the sin, of the pair from counters key + 2j and key + 2j + 1).
double spec_normal_z(uint64_t key, uint64_t i) {
  const uint64_t c = key + (i & ~uint64_t{1});
  const double u1 = std::ldexp((double)(((uint32_t)splitmix64(c) >> 8) + 1u), -24);
  const double u2 = std::ldexp((double)((uint32_t)splitmix64(c + 1) >> 8), -24);
  const double radius = std::sqrt(-2.0 * std::log(u1)), theta = 2.0 * 3.14159265358979323846 * u2;
  return radius * ((i & 1) ? std::sin(theta) : std::cos(theta));
}

void rng_parity() {
  const uint64_t keys[] = {0, 42, 0x9E3779B97F4A7C15ull, UINT64_MAX - 1000, UINT64_MAX - 1,
                           UINT64_MAX};
  std::vector<size_t> sizes = all_sizes();
  // The normal kernel makes two pairs (4 outputs) per thread: every n % 4 in its tail, and odd n.
  for (size_t n : {size_t{2}, size_t{6}, size_t{7}, size_t{4098}})
    if (n <= max_n()) sizes.push_back(n);
  for (uint64_t key : keys) {
    char kb[40];
    std::snprintf(kb, sizeof kb, "key=0x%016llx", (unsigned long long)key);
    for (size_t n : sizes) {
      // The large sizes run for three keys (the first and the two that wrap around 2^64).
      if (n > 4097 && !(key == 0 || key == UINT64_MAX - 1000 || key == UINT64_MAX)) continue;
      const std::string where = std::string(kb) + ", n=" + std::to_string(n);
      Buf c, g;
      // uniform: CPU == CUDA == the formula in the header (the key wraps mod 2^64).
      TH_OK(tlrt_rand_uniform(kCpu, n, key, c.out()));
      TH_OK(tlrt_rand_uniform(kGpu, n, key, g.out()));
      const std::vector<float> uc = th::download(c.get()), ug = th::download(g.get());
      compare("rand_uniform [" + where + "]", {}, uc, ug, "");
      uint64_t off_spec = 0;
      for (size_t i = 0; i < uc.size(); ++i)
        off_spec += th::bits_of(uc[i]) != th::bits_of(spec_uniform(key, i)) || !(uc[i] < 1.0f);
      TH_CHECK_MSG(uc.size() == n && off_spec == 0, "rand_uniform [%s]: %llu values differ from "
                   "the header's formula", where.c_str(), (unsigned long long)off_spec);
      // normal
      const std::pair<double, double> ms[] = {{0.0, 1.0}, {-2.5, 0.3}, {1000.0, 0.0}, {0.1, 7.0}};
      for (auto p : ms) {
        TH_OK(tlrt_rand_normal(kCpu, n, p.first, p.second, key, c.out()));
        TH_OK(tlrt_rand_normal(kGpu, n, p.first, p.second, key, g.out()));
        const std::vector<float> nc = th::download(c.get()), ng = th::download(g.get());
        compare("rand_normal(mean=" + fmt_d(p.first) + ",std=" + fmt_d(p.second) + ") [" + where +
                    "]", {}, nc, ng, "");
        if (p.first == 0.0 && p.second == 1.0) {
          // The header's |z| <= 5.7682, and its 1.5e-6 (+ half an ulp from the fma) to the float64
          // value of the pair formula on the same draws (the CUDA values: CPU == CUDA above).
          uint64_t bad = 0, off = 0;
          for (size_t i = 0; i < ng.size(); ++i) {
            const float z = ng[i];
            bad += !(std::fabs(z) <= 5.7682f);
            off += !(std::fabs((double)z - spec_normal_z(key, i)) <= 1.5e-6 + 2.4e-7);
          }
          TH_CHECK_MSG(bad == 0, "rand_normal [%s]: %llu values with |z| > 5.7682 or NaN",
                       where.c_str(), (unsigned long long)bad);
          TH_CHECK_MSG(ng.size() == n && off == 0, "rand_normal [%s]: %llu values off the "
                       "header's pair formula", where.c_str(), (unsigned long long)off);
        }
      }
      // bernoulli: CPU == CUDA == (u < (float)p) for the uniform of the same key.
      for (double kp : {0.0, 0.3, 0.5, 1.0, 1.5, -0.25}) {
        TH_OK(tlrt_bernoulli_mask(kCpu, n, kp, key, c.out()));
        TH_OK(tlrt_bernoulli_mask(kGpu, n, kp, key, g.out()));
        const std::vector<float> bc = th::download(c.get()), bg = th::download(g.get());
        compare("bernoulli_mask(keep_prob=" + fmt_d(kp) + ") [" + where + "]", {}, bc, bg, "");
        uint64_t off = 0;
        for (size_t i = 0; i < bc.size() && i < uc.size(); ++i)
          off += th::bits_of(bc[i]) != th::bits_of(uc[i] < (float)kp ? 1.0f : 0.0f);
        TH_CHECK_MSG(bc.size() == n && off == 0, "bernoulli_mask(%g) [%s]: %llu values differ from "
                     "u < keep_prob", kp, where.c_str(), (unsigned long long)off);
      }
    }
  }
}

// ---- buffer ops ----------------------------------------------------------------------------

bool same_u32(const std::vector<float> &a, const std::vector<float> &b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), 4 * a.size()) == 0);
}

void buffer_parity() {
  th::Rng rng(2);
  for (size_t n : all_sizes()) {
    const std::string at = " [n=" + std::to_string(n) + "]";
    // Random bit patterns (NaN payloads included) survive upload and download exactly.
    const std::vector<float> v = rng.bits(n);
    Buf c = up(v, kCpu), g = up(v, kGpu);
    if (!c.get() || !g.get()) return;
    const std::vector<float> dc = th::download(c.get()), dg = th::download(g.get());
    TH_CHECK_MSG(same_u32(dc, v) && same_u32(dg, v), "from_f32/to_f32 round trip%s: payload bits "
                 "changed (cpu %d, cuda %d)", at.c_str(), same_u32(dc, v), same_u32(dg, v));
    compare("from_f32/to_f32" + at, {v}, dc, dg, "");

    // to_f64 widens exactly, the same way on both.
    std::vector<double> wc(n), wg(n);
    TH_OK(tlrt_buffer_to_f64(c.get(), wc.data(), n));
    TH_OK(tlrt_buffer_to_f64(g.get(), wg.data(), n));
    uint64_t bad64 = 0;
    for (size_t i = 0; i < n; ++i) {
      const bool nan_both = std::isnan(wc[i]) && std::isnan(wg[i]) && std::isnan(v[i]);
      bad64 += !(nan_both || (wc[i] == (double)v[i] && std::memcmp(&wc[i], &wg[i], 8) == 0));
    }
    TH_CHECK_MSG(bad64 == 0, "to_f64%s: %llu values differ", at.c_str(), (unsigned long long)bad64);

    // to_bytes: little-endian binary32, identical on both and equal to the source.
    std::vector<uint8_t> bc(4 * n), bg(4 * n);
    TH_OK(tlrt_buffer_to_bytes(c.get(), bc.data(), 4 * n));
    TH_OK(tlrt_buffer_to_bytes(g.get(), bg.data(), 4 * n));
    bool bytes_ok = bc == bg;
    for (size_t i = 0; i < n && bytes_ok; ++i) {
      const uint32_t u = th::bits_of(v[i]);
      for (int k = 0; k < 4; ++k) bytes_ok = bytes_ok && bc[4 * i + k] == (uint8_t)(u >> (8 * k));
    }
    TH_CHECK_MSG(bytes_ok, "to_bytes%s: bytes differ", at.c_str());

    // from_bytes from a misaligned pointer.
    std::vector<uint8_t> raw(4 * n + 1);
    if (n) std::memcpy(raw.data() + 1, bc.data(), 4 * n);
    Buf fb;
    TH_OK(tlrt_buffer_from_bytes(kGpu, raw.data() + 1, 4 * n, fb.out()));
    TH_CHECK_MSG(fb.get() && same_u32(th::download(fb.get()), v), "from_bytes (cuda, misaligned)%s",
                 at.c_str());

    // from_f64: doubles of every kind, rounded to nearest-even the same way on both.
    std::vector<double> d(n);
    for (size_t i = 0; i < n; ++i) {
      switch (rng.gen() % 6) {
        case 0: d[i] = (double)rng.uniform(-4.0f, 4.0f) + std::ldexp((double)(rng.gen() % 3), -25); break;  // near float ties
        case 1: d[i] = std::ldexp((double)(int64_t)(rng.gen() >> 11) - (double)(1ll << 52), (int)(rng.gen() % 400) - 200); break;
        case 2: {
          uint64_t u = rng.gen();
          std::memcpy(&d[i], &u, 8);  // random bits: NaN, inf, huge, tiny
          break;
        }
        case 3: d[i] = std::ldexp(1.0 + (double)(rng.gen() % 1000) / 1000.0, -140 - (int)(rng.gen() % 15)); break;  // subnormal floats
        case 4: d[i] = (rng.gen() & 1 ? -1.0 : 1.0) * (3.4028235677973366e38 + (double)(rng.gen() % 4) * 1e31); break;
        default: d[i] = (double)th::edge_values()[rng.gen() % th::edge_values().size()]; break;
      }
    }
    Buf fc, fg;
    TH_OK(tlrt_buffer_from_f64(kCpu, d.data(), n, fc.out()));
    TH_OK(tlrt_buffer_from_f64(kGpu, d.data(), n, fg.out()));
    std::vector<float> expect(n);
    for (size_t i = 0; i < n; ++i) expect[i] = (float)d[i];
    const std::vector<float> rc = th::download(fc.get()), rg = th::download(fg.get());
    compare("from_f64" + at, {}, rc, rg, "");
    compare("from_f64 vs (float)d" + at, {}, expect, rg, "");

    // zeros and full.
    Buf z;
    TH_OK(tlrt_buffer_zeros(kGpu, n, z.out()));
    const std::vector<float> zv = th::download(z.get());
    TH_CHECK_MSG(zv.size() == n && std::all_of(zv.begin(), zv.end(), [](float x) {
                   return th::bits_of(x) == 0u;
                 }), "zeros (cuda)%s: not all +0", at.c_str());
    for (double val : {1.5, -0.0, 1e300, -1e300, std::nan(""), 1e-40, 0.1, 3.4028235677973366e38,
                       16777217.0, -7.0}) {
      Buf fl_c, fl_g;
      TH_OK(tlrt_buffer_full(kCpu, n, val, fl_c.out()));
      TH_OK(tlrt_buffer_full(kGpu, n, val, fl_g.out()));
      const std::vector<float> e(n, (float)val);
      compare("full(" + fmt_d(val) + ")" + at, {}, th::download(fl_c.get()), th::download(fl_g.get()), "");
      compare("full(" + fmt_d(val) + ") vs (float)value" + at, {}, e, th::download(fl_g.get()), "");
    }

    // copy on the device, and every direction of to_device.
    Buf cp, g2c, c2g, g2g;
    TH_OK(tlrt_buffer_copy(g.get(), cp.out()));
    TH_OK(tlrt_buffer_to_device(g.get(), kCpu, g2c.out()));
    TH_OK(tlrt_buffer_to_device(c.get(), kGpu, c2g.out()));
    TH_OK(tlrt_buffer_to_device(g.get(), kGpu, g2g.out()));
    const std::pair<const char *, Buf *> outs[] = {
        {"copy (cuda)", &cp}, {"to_device cuda->cpu", &g2c}, {"to_device cpu->cuda", &c2g},
        {"to_device cuda->cuda", &g2g}};
    const tlrt_device want[] = {kGpu, kCpu, kGpu, kGpu};
    for (int k = 0; k < 4; ++k) {
      tlrt_device dv = 999;
      TH_OK(tlrt_buffer_device(outs[k].second->get(), &dv));
      TH_CHECK_MSG(dv == want[k] && outs[k].second->get() != g.get(), "%s%s: wrong device 0x%x",
                   outs[k].first, at.c_str(), dv);
      TH_CHECK_MSG(same_u32(th::download(outs[k].second->get()), v), "%s%s: bits changed",
                   outs[k].first, at.c_str());
    }
    // A round trip cpu -> cuda -> cpu preserves every bit.
    Buf back;
    TH_OK(tlrt_buffer_to_device(c2g.get(), kCpu, back.out()));
    TH_CHECK_MSG(same_u32(th::download(back.get()), v), "round trip cpu->cuda->cpu%s", at.c_str());
  }
}

// Telemetry, release_storage and trim on the CUDA device. Runs when this test holds no other
// CUDA buffer, so live_bytes must be exactly what it allocates.
void memory_parity() {
  TH_OK(tlrt_synchronize(kGpu));
  const tlrt_allocator_stats s0 = th::stats(kGpu), c0 = th::stats(kCpu);
  TH_CHECK_MSG(s0.live_bytes == 0, "cuda live_bytes = %llu with no live CUDA buffer",
               (unsigned long long)s0.live_bytes);
  TH_CHECK(s0.device_total_bytes > 0 && s0.device_free_bytes <= s0.device_total_bytes);

  const uint64_t n = (1u << 22) + 3;  // 16 MiB + 12 bytes
  th::Rng rng(3);
  const std::vector<float> v = rng.vec(n);
  Buf a = up(v, kGpu);
  if (!a.get()) return;
  tlrt_allocator_stats s1 = th::stats(kGpu);
  TH_CHECK_MSG(s1.live_bytes == s0.live_bytes + 4 * n, "live_bytes after a %llu-element upload: "
               "%llu, expected %llu", (unsigned long long)n, (unsigned long long)s1.live_bytes,
               (unsigned long long)(s0.live_bytes + 4 * n));
  TH_CHECK(s1.alloc_count == s0.alloc_count + 1 && s1.peak_bytes >= s1.live_bytes);
  TH_CHECK(s1.live_handles == s0.live_handles + 1);
  TH_CHECK(th::stats(kCpu).live_bytes == c0.live_bytes);  // CUDA payloads are not counted on the CPU

  Buf b;
  TH_OK(tlrt_sigmoid(a.get(), b.out()));
  TH_CHECK(th::stats(kGpu).live_bytes == s0.live_bytes + 8 * n);

  // release_storage frees the payload now: telemetry drops, the handle reports RELEASED.
  bool freed = false;
  TH_OK(tlrt_buffer_release_storage(a.get(), &freed));
  TH_CHECK(freed);
  TH_OK(tlrt_buffer_release_storage(a.get(), &freed));
  TH_CHECK(!freed);
  bool rel = false;
  TH_OK(tlrt_buffer_is_released(a.get(), &rel));
  TH_CHECK(rel);
  s1 = th::stats(kGpu);
  TH_CHECK(s1.live_bytes == s0.live_bytes + 4 * n && s1.free_count == s0.free_count + 1);
  tlrt_device dv = 0;
  TH_OK(tlrt_buffer_device(a.get(), &dv));
  TH_CHECK(dv == kGpu);
  uint64_t sz = 7;
  TH_STATUS(tlrt_buffer_size(a.get(), &sz), TLRT_ERR_RELEASED);
  TH_CHECK(sz == 0);
  std::vector<float> host(n);
  TH_STATUS(tlrt_buffer_to_f32(a.get(), host.data(), n), TLRT_ERR_RELEASED);
  Buf r;
  TH_STATUS(tlrt_add(a.get(), b.get(), r.out()), TLRT_ERR_RELEASED);
  TH_CHECK(r.get() == nullptr);
  TH_STATUS(tlrt_buffer_to_device(a.get(), kCpu, r.out()), TLRT_ERR_RELEASED);
  TH_CHECK(r.get() == nullptr);
  TH_STATUS(tlrt_buffer_copy(a.get(), r.out()), TLRT_ERR_RELEASED);
  TH_CHECK(r.get() == nullptr);

  // Free everything: live bytes return to the baseline; the pool keeps the blocks for reuse
  // until trim hands them back.
  a = Buf();
  b = Buf();
  TH_OK(tlrt_synchronize(kGpu));
  const tlrt_allocator_stats s2 = th::stats(kGpu);
  TH_CHECK_MSG(s2.live_bytes == s0.live_bytes, "cuda live_bytes %llu after freeing, baseline %llu",
               (unsigned long long)s2.live_bytes, (unsigned long long)s0.live_bytes);
  TH_CHECK(s2.live_handles == s0.live_handles);
  TH_CHECK(s2.alloc_count - s0.alloc_count == s2.free_count - s0.free_count);
  std::printf("cuda pool: %llu bytes pooled after freeing %llu bytes\n",
              (unsigned long long)s2.pooled_bytes, (unsigned long long)(8 * n));
  TH_CHECK_MSG(s2.pooled_bytes >= 4 * n, "pooled_bytes = %llu after freeing 2 x %llu bytes: the "
               "stream-ordered pool should keep freed blocks", (unsigned long long)s2.pooled_bytes,
               (unsigned long long)(4 * n));
  TH_OK(tlrt_allocator_trim(kGpu));
  const tlrt_allocator_stats s3 = th::stats(kGpu);
  TH_CHECK_MSG(s3.pooled_bytes == 0, "pooled_bytes = %llu after tlrt_allocator_trim",
               (unsigned long long)s3.pooled_bytes);
  TH_CHECK(s3.live_bytes == s0.live_bytes);

  // A loop of allocate/compute/free keeps live bytes flat.
  for (int i = 0; i < 200; ++i) {
    Buf x, y;
    TH_OK(tlrt_rand_uniform(kGpu, 4097, (uint64_t)i * 5000, x.out()));
    TH_OK(tlrt_exp(x.get(), y.out()));
  }
  TH_OK(tlrt_synchronize(kGpu));
  TH_CHECK(th::stats(kGpu).live_bytes == s0.live_bytes);
}

void error_parity() {
  const std::vector<Op> ops = all_ops();
  th::Rng rng(4);
  const std::vector<float> v = rng.vec(17);
  Buf c = up(v, kCpu), g = up(v, kGpu);
  if (!c.get() || !g.get()) return;
  // Mixing devices in one call: DEVICE_MISMATCH, in every position, outputs NULL.
  for (const Op &op : ops) {
    if (op.nin < 2) continue;
    for (int pos = 0; pos < op.nin; ++pos) {
      for (int flip = 0; flip < 2; ++flip) {
        tlrt_buffer *in[3];
        for (int k = 0; k < op.nin; ++k) in[k] = ((k == pos) != (flip == 1)) ? c.get() : g.get();
        tlrt_buffer *out[2] = {reinterpret_cast<tlrt_buffer *>(0x1), reinterpret_cast<tlrt_buffer *>(0x1)};
        const tlrt_status s = op.fn(in, out);
        TH_CHECK_MSG(s == TLRT_ERR_DEVICE_MISMATCH && out[0] == nullptr &&
                         (op.nout < 2 || out[1] == nullptr),
                     "%s with input %d on the %s and the rest on the %s: %s (%s)", op.name.c_str(),
                     pos, flip ? "cuda" : "cpu", flip ? "cpu" : "cuda", tlrt_status_string(s),
                     tlrt_last_error());
        if (s == TLRT_OK) {
          tlrt_buffer_free(out[0]);
          if (op.nout == 2) tlrt_buffer_free(out[1]);
        }
      }
    }
  }
  // Size mismatch on the device: SHAPE.
  Buf g5 = up(rng.vec(5), kGpu), r;
  TH_STATUS(tlrt_add(g.get(), g5.get(), r.out()), TLRT_ERR_SHAPE);
  TH_CHECK(r.get() == nullptr);

  // A CUDA ordinal past the last device: NO_DEVICE from every call that takes a device.
  uint32_t count = 0;
  TH_OK(tlrt_device_count(TLRT_DEVICE_KIND_CUDA, &count));
  TH_CHECK(count >= 1);
  const tlrt_device none = TLRT_DEVICE_CUDA(count);
  const double d[2] = {1.0, 2.0};
  const uint8_t bytes[8] = {0};
  TH_STATUS(tlrt_buffer_from_f32(none, v.data(), v.size(), r.out()), TLRT_ERR_NO_DEVICE);
  TH_CHECK(r.get() == nullptr);
  TH_STATUS(tlrt_buffer_from_f64(none, d, 2, r.out()), TLRT_ERR_NO_DEVICE);
  TH_STATUS(tlrt_buffer_from_bytes(none, bytes, 8, r.out()), TLRT_ERR_NO_DEVICE);
  TH_STATUS(tlrt_buffer_zeros(none, 4, r.out()), TLRT_ERR_NO_DEVICE);
  TH_STATUS(tlrt_buffer_full(none, 4, 1.0, r.out()), TLRT_ERR_NO_DEVICE);
  TH_STATUS(tlrt_buffer_to_device(c.get(), none, r.out()), TLRT_ERR_NO_DEVICE);
  TH_STATUS(tlrt_buffer_to_device(g.get(), none, r.out()), TLRT_ERR_NO_DEVICE);
  TH_STATUS(tlrt_rand_uniform(none, 4, 1, r.out()), TLRT_ERR_NO_DEVICE);
  TH_STATUS(tlrt_rand_normal(none, 4, 0.0, 1.0, 1, r.out()), TLRT_ERR_NO_DEVICE);
  TH_STATUS(tlrt_bernoulli_mask(none, 4, 0.5, 1, r.out()), TLRT_ERR_NO_DEVICE);
  TH_CHECK(r.get() == nullptr);
  TH_STATUS(tlrt_synchronize(none), TLRT_ERR_NO_DEVICE);
  TH_STATUS(tlrt_allocator_trim(none), TLRT_ERR_NO_DEVICE);
  tlrt_allocator_stats st;
  std::memset(&st, 0, sizeof st);
  st.struct_size = sizeof st;
  TH_STATUS(tlrt_allocator_stats_get(none, &st), TLRT_ERR_NO_DEVICE);
  TH_CHECK(std::strstr(tlrt_last_error(), "tlrt_allocator_stats_get") != nullptr);
}

}  // namespace

int main() {
#ifdef TLRT_PARITY_SELFTEST
  std::printf("parity: SELFTEST build, both sides on the CPU\n");
  elementwise_parity();
  rng_parity();
  buffer_parity();
  std::printf("parity summary: %llu runs compared, %llu output elements, %llu mismatching "
              "elements, %llu failing runs\n",
              (unsigned long long)g_sum.runs, (unsigned long long)g_sum.elements,
              (unsigned long long)g_sum.mismatches, (unsigned long long)g_sum.failed_runs);
  return th::finish("test_parity (selftest)");
#endif
  if (!th::cuda_ready()) {
    std::printf("parity: skipped (no usable CUDA device; tlrt_runtime_status() = %u)\n",
                tlrt_runtime_status());
    return 77;
  }
  std::printf("parity: %s\n", tlrt_build_info());
  elementwise_parity();
  rng_parity();
  buffer_parity();
  error_parity();
  memory_parity();
  std::printf("parity summary: %llu runs compared, %llu output elements, %llu mismatching "
              "elements, %llu failing runs\n",
              (unsigned long long)g_sum.runs, (unsigned long long)g_sum.elements,
              (unsigned long long)g_sum.mismatches, (unsigned long long)g_sum.failed_runs);
  return th::finish("test_parity");
}
