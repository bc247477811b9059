#include "core/device.hpp"

#include <cstdio>

#include "core/backend/memory.hpp"
#include "core/error.hpp"

namespace tlrt {

Dev resolve_device(tlrt_device device, const char *arg) {
  const uint32_t kind = TLRT_DEVICE_KIND(device);
  const uint32_t ordinal = TLRT_DEVICE_ORDINAL(device);
  if ((device >> 24) != 0 || kind > TLRT_DEVICE_KIND_CUDA)
    fail(TLRT_ERR_INVALID_ARGUMENT, "argument %s is not a device (0x%08x)", arg, device);
  if (kind == TLRT_DEVICE_KIND_CPU) {
    if (ordinal != 0)
      fail(TLRT_ERR_INVALID_ARGUMENT, "argument %s names CPU ordinal %u; the CPU device is 0", arg,
           ordinal);
    return Dev{false, 0};
  }
#if TLRT_HAVE_CUDA
  const uint32_t count = cuda::device_count();
  if (ordinal >= count)
    fail(TLRT_ERR_NO_DEVICE, "argument %s asks for CUDA device %u, but %u CUDA device%s usable",
         arg, ordinal, count, count == 1 ? " is" : "s are");
  if (ordinal >= (uint32_t)kMaxCudaDevices)
    fail(TLRT_ERR_UNSUPPORTED, "argument %s: CUDA ordinals >= %d are not supported", arg,
         kMaxCudaDevices);
  return Dev{true, (int)ordinal};
#else
  fail(TLRT_ERR_BACKEND_UNAVAILABLE,
       "argument %s asks for CUDA device %u, but this library was built without CUDA "
       "(rebuild with -Dcuda=enabled)",
       arg, ordinal);
#endif
}

const char *device_name(tlrt_device device, char buf[32]) {
  if (TLRT_DEVICE_KIND(device) == TLRT_DEVICE_KIND_CPU)
    std::snprintf(buf, 32, "cpu");
  else
    std::snprintf(buf, 32, "cuda:%u", TLRT_DEVICE_ORDINAL(device));
  return buf;
}

}  // namespace tlrt
