// The process settings (core/settings.hpp): every environment variable the library reads.
#include "core/settings.hpp"

#include <atomic>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "core/size_class_pool.hpp"

namespace tlrt {

namespace {

bool env_flag_on(const char *name) {
  const char *v = std::getenv(name);
  if (v == nullptr || *v == '\0') return false;
  char low[8] = {0};
  const size_t n = std::strlen(v);
  if (n >= sizeof low) return true;
  for (size_t i = 0; i < n; ++i) low[i] = (char)std::tolower((unsigned char)v[i]);
  return !(std::strcmp(low, "0") == 0 || std::strcmp(low, "false") == 0 ||
           std::strcmp(low, "off") == 0 || std::strcmp(low, "no") == 0);
}

// A switch that starts from an environment variable, read the first time anyone asks.
class Switch {
 public:
  explicit constexpr Switch(const char *env) : env_(env) {}
  bool get() noexcept {
    const int v = state_.load(std::memory_order_acquire);
    if (v >= 0) return v != 0;
    int expected = -1;
    state_.compare_exchange_strong(expected, env_flag_on(env_) ? 1 : 0, std::memory_order_acq_rel);
    return state_.load(std::memory_order_acquire) != 0;
  }
  bool set(bool on) noexcept {
    const bool previous = get();
    state_.store(on ? 1 : 0, std::memory_order_release);
    return previous;
  }

 private:
  const char *env_;
  std::atomic<int> state_{-1};  // -1: not yet read
};

Switch g_deterministic("TORCHLEAN_RT_DETERMINISTIC");
Switch g_allow_tf32("TORCHLEAN_RT_ALLOW_TF32");

CpuIsa read_isa_cap() {
  const char *cap = std::getenv("TORCHLEAN_RT_GEMM_ISA");
  if (cap != nullptr && std::strcmp(cap, "generic") == 0) return CpuIsa::Generic;
  if (cap != nullptr && std::strcmp(cap, "x86-64-v3") == 0) return CpuIsa::V3;
  return CpuIsa::V4;
}

}  // namespace

bool deterministic() noexcept { return g_deterministic.get(); }
bool set_deterministic(bool on) noexcept { return g_deterministic.set(on); }
bool allow_tf32() noexcept { return g_allow_tf32.get(); }
bool set_allow_tf32(bool on) noexcept { return g_allow_tf32.set(on); }

Precision call_precision() noexcept {
  if (deterministic()) return Precision::Exact;
  return allow_tf32() ? Precision::Tf32 : Precision::SplitTf32;
}

MatmulPolicy matmul_policy() noexcept {
  static const CpuIsa cap = read_isa_cap();
  MatmulPolicy p;
  p.allow_tf32 = allow_tf32();
  p.cpu_isa_cap = cap;
  return p;
}

namespace {
uint64_t env_bytes(const char *name, uint64_t fallback) {
  const char *v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char *end = nullptr;
  const unsigned long long x = std::strtoull(v, &end, 10);
  return (end != nullptr && *end == '\0') ? (uint64_t)x : fallback;
}
}  // namespace

namespace {
uint32_t default_threads() {
  static const uint32_t v = [] {
    const uint64_t env = env_bytes("TORCHLEAN_RT_NUM_THREADS", 0);
    const uint64_t hw = std::thread::hardware_concurrency();
    const uint64_t n = env != 0 ? env : hw != 0 ? hw : 1;
    return (uint32_t)(n < kMaxThreads ? n : kMaxThreads);
  }();
  return v;
}
std::atomic<uint32_t> g_threads{0};  // 0: the default
}  // namespace

uint32_t num_threads() noexcept {
  const uint32_t n = g_threads.load(std::memory_order_relaxed);
  return n != 0 ? n : default_threads();
}

uint32_t set_num_threads(uint32_t n) noexcept {
  const uint32_t previous = num_threads();
  g_threads.store(n < kMaxThreads ? n : kMaxThreads, std::memory_order_relaxed);
  return previous;
}

uint64_t cpu_pool_max_bytes() {
  static const uint64_t v = env_bytes("TORCHLEAN_RT_CPU_POOL_MAX_BYTES", uint64_t{1} << 30);
  return v;
}

uint64_t cuda_cache_max_bytes() {
  static const uint64_t v = env_bytes("TORCHLEAN_RT_CUDA_CACHE_MAX_BYTES", uint64_t{4} << 30);
  return v;
}

}  // namespace tlrt
