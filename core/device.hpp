// Device resolution and backend dispatch.
#pragma once

#include "abi/tlrt_runtime.h"

namespace tlrt {

// Largest CUDA ordinal + 1 this library tracks telemetry for.
constexpr int kMaxCudaDevices = 16;

// A validated device: the backend to call and the ordinal to pass it.
struct Dev {
  bool cuda;
  int ordinal;
  tlrt_device handle() const {
    return cuda ? TLRT_DEVICE_CUDA(ordinal) : TLRT_DEVICE_CPU;
  }
};

// Validates a device argument: kind and ordinal well formed, backend compiled in, device present.
// Throws TLRT_ERR_INVALID_ARGUMENT, TLRT_ERR_BACKEND_UNAVAILABLE or TLRT_ERR_NO_DEVICE, naming
// the argument.
Dev resolve_device(tlrt_device device, const char *arg);

// Human-readable "cpu" / "cuda:1".
const char *device_name(tlrt_device device, char buf[32]);

}  // namespace tlrt

// Call the same backend function on the backend the device selects. Backends are mirrored one
// for one, so every tlrt::stub::f has a tlrt::cuda::f with the same signature.
#if TLRT_HAVE_CUDA
#define TLRT_DISPATCH(dev, fn, ...) \
  ((dev).cuda ? ::tlrt::cuda::fn(__VA_ARGS__) : ::tlrt::stub::fn(__VA_ARGS__))
#else
#define TLRT_DISPATCH(dev, fn, ...) ::tlrt::stub::fn(__VA_ARGS__)
#endif
