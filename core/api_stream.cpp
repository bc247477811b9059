// Stream entry points (abi/tlrt_stream.h): the device's current stream and the host's events.
// Core checks the arguments in the header's order (NULL pointers, the device, the CPU, then the
// stream value) and hands CUDA handles to the memory backend untouched; only the driver can check
// a handle further (cuda/memory.cu).
#include <cstdint>

#include "abi/tlrt_stream.h"
#include "core/backend/memory.hpp"
#include "core/device.hpp"
#include "core/error.hpp"

using namespace tlrt;

namespace {

void require(const void *p, const char *name) {
  if (p == nullptr) fail(TLRT_ERR_NULL_ARGUMENT, "argument %s is NULL", name);
}

// A CUDA device of this process; the CPU is TLRT_ERR_UNSUPPORTED.
Dev stream_device(tlrt_device device) {
  const Dev dev = resolve_device(device, "device");
  if (!dev.cuda)
    fail(TLRT_ERR_UNSUPPORTED,
         "argument device is the CPU, which has no stream (CPU work is complete when each call "
         "returns)");
  return dev;
}

}  // namespace

extern "C" {

TLRT_API tlrt_status tlrt_stream_set(tlrt_device device, void *cuda_stream) {
  return guarded(__func__, [&] {
    const Dev dev = stream_device(device);
    if (reinterpret_cast<uintptr_t>(cuda_stream) == TLRT_CUDA_STREAM_PER_THREAD)
      fail(TLRT_ERR_UNSUPPORTED,
           "argument cuda_stream is the per-thread default stream (TLRT_CUDA_STREAM_PER_THREAD), "
           "a different stream on every host thread; pass a stream handle or "
           "TLRT_CUDA_STREAM_LEGACY");
    TLRT_DISPATCH(dev, stream_set, dev.ordinal, cuda_stream);
  });
}

TLRT_API tlrt_status tlrt_stream_get(tlrt_device device, void **cuda_stream) {
  return guarded(__func__, [&] {
    clear_out(cuda_stream, "cuda_stream");
    const Dev dev = stream_device(device);
    *cuda_stream = TLRT_DISPATCH(dev, stream_get, dev.ordinal);
  });
}

TLRT_API tlrt_status tlrt_stream_record_event(tlrt_device device, void *cuda_event) {
  return guarded(__func__, [&] {
    require(cuda_event, "cuda_event");
    const Dev dev = stream_device(device);
    TLRT_DISPATCH(dev, stream_record_event, dev.ordinal, cuda_event);
  });
}

TLRT_API tlrt_status tlrt_stream_wait_event(tlrt_device device, void *cuda_event) {
  return guarded(__func__, [&] {
    require(cuda_event, "cuda_event");
    const Dev dev = stream_device(device);
    TLRT_DISPATCH(dev, stream_wait_event, dev.ordinal, cuda_event);
  });
}

TLRT_API tlrt_status tlrt_stream_wait_for_library(tlrt_device device, void *cuda_stream) {
  return guarded(__func__, [&] {
    require(cuda_stream, "cuda_stream");
    const Dev dev = stream_device(device);
    TLRT_DISPATCH(dev, wait_for_library, dev.ordinal, cuda_stream);
  });
}

}  // extern "C"
