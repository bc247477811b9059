// Runtime entry points: versions, build info, devices, synchronisation, the determinism switch
// (its state lives in core/settings.cpp).
#include "core/backend/memory.hpp"
#include "core/device.hpp"
#include "core/error.hpp"
#include "core/settings.hpp"

#ifndef TLRT_VERSION_STRING
#define TLRT_VERSION_STRING "unknown"
#endif
#ifndef TLRT_CUDA_INFO
#define TLRT_CUDA_INFO ""
#endif
#define TLRT_STR_(x) #x
#define TLRT_STR(x) TLRT_STR_(x)

#ifndef TLRT_BLAS_INFO
#define TLRT_BLAS_INFO "builtin"
#endif

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
TLRT_API uint32_t tlrt_set_num_threads(uint32_t n) { return set_num_threads(n); }
TLRT_API uint32_t tlrt_get_num_threads(void) { return num_threads(); }

TLRT_API bool tlrt_get_deterministic(void) { return deterministic(); }

}  // extern "C"
