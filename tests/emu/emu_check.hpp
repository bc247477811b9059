// What the emulation tests (tests/unit/test_*_emu.cpp) share: the sanitizer switch (the fiber
// switching of cuda_emu.hpp is slow under ASan / TSan, so those builds run fewer cases), the
// TLRT_EMU_FULL switch for the long grid, and the bitwise comparison of an emulated kernel's
// output with the CPU backend's, counting the runs that differ.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <vector>

#include "../harness.hpp"
#include "cuda_emu.hpp"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define TLRT_EMU_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define TLRT_EMU_SANITIZED 1
#endif
#endif

namespace emu_check {

// TLRT_EMU_FULL set (and not "0"): every policy on every case.
inline bool full() {
  const char *e = std::getenv("TLRT_EMU_FULL");
  return e && *e && *e != '0';
}

// Runs whose outputs differed from the CPU backend's, for the final summary line.
inline int &mismatch_runs() {
  static int n = 0;
  return n;
}

// want (CPU backend) and got (emulated CUDA kernel) bit for bit; reports the first difference.
inline void same(const std::string &what, const std::vector<float> &want,
                 const std::vector<float> &got) {
  TH_CHECK_MSG(want.size() == got.size(), "%s: %zu elements, expected %zu", what.c_str(),
               got.size(), want.size());
  if (want.size() != got.size()) return;
  size_t bad = 0, first = 0;
  for (size_t e = 0; e < want.size(); ++e)
    if (!th::same_bits(want[e], got[e]) && bad++ == 0) first = e;
  TH_CHECK_MSG(bad == 0, "%s: %zu of %zu elements differ; first [%zu]: cpu %s, emulated cuda %s",
               what.c_str(), bad, want.size(), first, th::hex(want[first]).c_str(),
               th::hex(got[first]).c_str());
  mismatch_runs() += bad != 0;
}

// The launcher the attention plans take (cuda/kernels/attention*.cuh): an emulated device with
// `limit` bytes of shared memory per block and a grid y extent of at most grid_y (a small one
// makes the kernels loop over problems), running each launch under `policy`.
struct Launch {
  emu::Policy policy;
  size_t limit;
  unsigned grid_y;
  size_t smem_limit() const { return limit; }
  unsigned max_grid_y() const { return grid_y; }
  template <class K, class... A>
  void operator()(const char *name, K kernel, dim3 grid, unsigned threads, size_t smem,
                  A... args) const {
    TH_CHECK_MSG(smem <= limit, "%s: %zu bytes of shared memory, the device has %zu", name, smem,
                 limit);
    emu::launch(policy, grid, dim3(threads), smem, [=] { kernel(args...); });
  }
};

// Three schedules: ascending with late copies, descending with early ones, seeded random.
inline const emu::Policy kPolicies3[] = {
    {emu::Order::Ascending, emu::Copy::Late, 1},
    {emu::Order::Descending, emu::Copy::Early, 2},
    {emu::Order::Random, emu::Copy::Late, 3},
};

}  // namespace emu_check
