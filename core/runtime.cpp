// Runtime entry points: versions, build info, devices, synchronisation, the determinism switch.
#include <atomic>
#include <cctype>
#include <cstdlib>
#include <cstring>

#include "core/backend/memory.hpp"
#include "core/device.hpp"
#include "core/error.hpp"
#include "core/runtime.hpp"

#ifndef TLRT_VERSION_STRING
#define TLRT_VERSION_STRING "unknown"
#endif
#ifndef TLRT_CUDA_INFO
#define TLRT_CUDA_INFO ""
#endif
#ifndef TLRT_BLAS_INFO
#define TLRT_BLAS_INFO "builtin"
#endif

namespace tlrt {

namespace {

// The switch starts from TORCHLEAN_RT_DETERMINISTIC, read once, the first time anyone asks.
std::atomic<int> g_deterministic{-1};  // -1 = not yet initialised

bool env_flag_on(const char *v) {
  if (v == nullptr || *v == '\0') return false;
  char low[8] = {0};
  size_t n = std::strlen(v);
  if (n >= sizeof low) return true;
  for (size_t i = 0; i < n; ++i) low[i] = (char)std::tolower((unsigned char)v[i]);
  return !(std::strcmp(low, "0") == 0 || std::strcmp(low, "false") == 0 ||
           std::strcmp(low, "off") == 0 || std::strcmp(low, "no") == 0);
}

}  // namespace

bool deterministic() noexcept {
  int v = g_deterministic.load(std::memory_order_acquire);
  if (v >= 0) return v != 0;
  int init = env_flag_on(std::getenv("TORCHLEAN_RT_DETERMINISTIC")) ? 1 : 0;
  int expected = -1;
  g_deterministic.compare_exchange_strong(expected, init, std::memory_order_acq_rel);
  return g_deterministic.load(std::memory_order_acquire) != 0;
}

bool set_deterministic(bool on) noexcept {
  bool previous = deterministic();
  g_deterministic.store(on ? 1 : 0, std::memory_order_release);
  return previous;
}

}  // namespace tlrt

using namespace tlrt;

extern "C" {

TLRT_API uint32_t tlrt_abi_version(void) { return TLRT_ABI_VERSION; }

TLRT_API const char *tlrt_build_info(void) {
  return "torchlean_rt " TLRT_VERSION_STRING "; abi " TLRT_STR(TLRT_ABI_VERSION_MAJOR) "." TLRT_STR(
      TLRT_ABI_VERSION_MINOR) "; backends: cpu"
#if TLRT_HAVE_CUDA
                              ", cuda; " TLRT_CUDA_INFO
#endif
                              "; cpu blas: " TLRT_BLAS_INFO;
}

TLRT_API uint32_t tlrt_runtime_status(void) {
#if TLRT_HAVE_CUDA
  return cuda::device_count() > 0 ? TLRT_RUNTIME_CUDA_READY : TLRT_RUNTIME_CUDA_NO_DEVICE;
#else
  return TLRT_RUNTIME_CPU_ONLY;
#endif
}

TLRT_API tlrt_status tlrt_device_count(uint32_t kind, uint32_t *count) {
  return guarded(__func__, [&] {
    clear_out_value(count, "count");
    if (kind == TLRT_DEVICE_KIND_CPU) {
      *count = 1;
    } else if (kind == TLRT_DEVICE_KIND_CUDA) {
#if TLRT_HAVE_CUDA
      *count = cuda::device_count();
#else
      *count = 0;
#endif
    } else {
      fail(TLRT_ERR_INVALID_ARGUMENT, "argument kind = %u is not a device kind", kind);
    }
  });
}

TLRT_API tlrt_status tlrt_synchronize(tlrt_device device) {
  return guarded(__func__, [&] {
    Dev dev = resolve_device(device, "device");
    TLRT_DISPATCH(dev, synchronize, dev.ordinal);
  });
}

TLRT_API bool tlrt_set_deterministic(bool on) { return set_deterministic(on); }

TLRT_API bool tlrt_get_deterministic(void) { return deterministic(); }

}  // extern "C"
