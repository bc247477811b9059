// Shared by the parity tests (tests/parity/test_parity*.cpp): the two devices, the bitwise
// comparison with a one-line report per mismatching run, the runners that call an entry point on
// both backends (and on CUDA again with the determinism switch flipped), and the summary.
//
// Comparison: th::same_bits (any NaN equals any NaN: payloads are unspecified; +0 != -0).
// Built with -DTLRT_PARITY_SELFTEST both sides run on the CPU (checks a test's own logic).
// TLRT_PARITY_MAX_N=<n> asks the tests to skip inputs above n elements (compute-sanitizer runs).
#pragma once

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "harness.hpp"

namespace parity {

const tlrt_device kCpu = TLRT_DEVICE_CPU;
#ifndef TLRT_PARITY_SELFTEST
const tlrt_device kGpu = TLRT_DEVICE_CUDA(0);
#else
const tlrt_device kGpu = TLRT_DEVICE_CPU;
#endif

inline size_t max_n() {
  static const size_t m = [] {
    const char *e = std::getenv("TLRT_PARITY_MAX_N");
    return e && *e ? (size_t)std::strtoull(e, nullptr, 0) : SIZE_MAX;
  }();
  return m;
}

struct Summary {
  uint64_t runs = 0, elements = 0, mismatches = 0, failed_runs = 0;
};
inline Summary &summary() {
  static Summary s;
  return s;
}

// Prints the banner; false (the caller exits 77) when no CUDA device is usable.
inline bool start(const char *name) {
#ifdef TLRT_PARITY_SELFTEST
  std::printf("%s: SELFTEST build, both sides on the CPU\n", name);
#else
  if (!th::cuda_ready()) {
    std::printf("%s: skipped (no usable CUDA device; tlrt_runtime_status() = %u)\n", name,
                tlrt_runtime_status());
    return false;
  }
  std::printf("%s: %s\n", name, tlrt_build_info());
#endif
  return true;
}

inline void print_summary(const char *name) {
  const Summary &s = summary();
  std::printf("%s summary: %llu runs compared, %llu output elements, %llu mismatching elements, "
              "%llu failing runs\n",
              name, (unsigned long long)s.runs, (unsigned long long)s.elements,
              (unsigned long long)s.mismatches, (unsigned long long)s.failed_runs);
}

// cpu and gpu must agree bit for bit.
inline void compare(const std::string &what, const std::vector<float> &cpu,
                    const std::vector<float> &gpu) {
  Summary &g = summary();
  ++g.runs;
  uint64_t bad = 0;
  size_t first = 0;
  const size_t n = std::min(cpu.size(), gpu.size());
  for (size_t i = 0; i < n; ++i)
    if (!th::same_bits(cpu[i], gpu[i])) {
      if (bad == 0) first = i;
      ++bad;
    }
  g.elements += n;
  g.mismatches += bad;
  const bool size_ok = cpu.size() == gpu.size();
  TH_CHECK_MSG(bad == 0 && size_ok, "%s: sizes cpu %zu cuda %zu, %llu mismatches", what.c_str(),
               cpu.size(), gpu.size(), (unsigned long long)bad);
  if (bad != 0 || !size_ok) {
    ++g.failed_runs;
    std::printf("MISMATCH %s: %llu of %zu outputs differ; first i=%zu cpu=%s cuda=%s\n",
                what.c_str(), (unsigned long long)bad, n, first,
                first < cpu.size() ? th::hex(cpu[first]).c_str() : "-",
                first < gpu.size() ? th::hex(gpu[first]).c_str() : "-");
  }
}

// An entry point with any number of inputs and outputs: fn(dev, outs) uploads its (captured,
// host-side) inputs to dev, calls the entry point, and moves its outputs into outs (th::Buf owns
// them). Runs fn on the CPU and on the GPU, checks that every output is on the right device,
// compares output k of both bit for bit, and runs the GPU again with the determinism switch
// flipped: nothing may change. flip = false leaves that last run out, for the entry points whose
// CUDA path depends on the switch (attention's forward: the exact kernels with the switch on, the
// 3xTF32 kernel, another numeric class, with it off); the caller then sets the switch to on.
using MultiCall = std::function<tlrt_status(tlrt_device dev, std::vector<th::Buf> &outs)>;

inline void run_multi(const std::string &what, const MultiCall &fn, bool flip = true) {
  std::vector<th::Buf> cy, gy, gy2;
  const tlrt_status cs = fn(kCpu, cy);
  TH_CHECK_MSG(cs == TLRT_OK, "%s (cpu) failed: %s", what.c_str(), tlrt_last_error());
  const tlrt_status gs = fn(kGpu, gy);
  TH_CHECK_MSG(gs == TLRT_OK, "%s (cuda) failed: %s", what.c_str(), tlrt_last_error());
  if (cs != TLRT_OK || gs != TLRT_OK || cy.size() != gy.size()) {
    TH_CHECK_MSG(cy.size() == gy.size(), "%s: %zu outputs on the cpu, %zu on cuda", what.c_str(),
                 cy.size(), gy.size());
    ++summary().failed_runs;
    return;
  }
  std::vector<std::vector<float>> g(gy.size());
  for (size_t k = 0; k < gy.size(); ++k) {
    tlrt_device d = 0;
    TH_OK(tlrt_buffer_device(gy[k].get(), &d));
    TH_CHECK_MSG(d == kGpu, "%s: CUDA output %zu is on device 0x%x", what.c_str(), k, d);
    g[k] = th::download(gy[k].get());
    const std::string w = gy.size() > 1 ? what + " [output " + std::to_string(k) + "]" : what;
    compare(w, th::download(cy[k].get()), g[k]);
  }
  if (!flip) return;
  const bool was = tlrt_set_deterministic(!tlrt_get_deterministic());
  const tlrt_status gs2 = fn(kGpu, gy2);
  tlrt_set_deterministic(was);
  TH_CHECK_MSG(gs2 == TLRT_OK, "%s (cuda, switch flipped) failed: %s", what.c_str(),
               tlrt_last_error());
  if (gs2 != TLRT_OK) return;
  for (size_t k = 0; k < gy2.size() && k < g.size(); ++k) {
    const std::vector<float> g2 = th::download(gy2[k].get());
    ++th::checks();
    if (g2.size() != g[k].size() || !std::equal(g[k].begin(), g[k].end(), g2.begin(), th::same_bits)) {
      th::report(__FILE__, __LINE__, what + ": CUDA result changed with the determinism switch");
      ++summary().failed_runs;
    }
  }
}

// One input buffer already on each device, one output.
using Call = std::function<tlrt_status(const tlrt_buffer *, tlrt_buffer **)>;

inline void run(const std::string &what, const tlrt_buffer *cx, const tlrt_buffer *gx,
                const Call &call) {
  int calls = 0;  // run_multi calls the CPU first, then the GPU (twice)
  run_multi(what, [&](tlrt_device, std::vector<th::Buf> &outs) {
    outs.emplace_back();
    return call(calls++ == 0 ? cx : gx, outs.back().out());
  });
}

}  // namespace parity
