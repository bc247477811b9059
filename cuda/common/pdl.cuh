// Programmatic dependent launch, the device side (compute capability 9.0 and later; elsewhere,
// and on the host under tests/emu, no-ops). A kernel launched by cuda/common/runtime.cuh's
// launch_dependent may begin before the kernel before it on the stream has finished: as soon as
// every block of that kernel has called pdl_trigger() (or exited). It must call pdl_wait() before
// it reads anything that kernel writes, and before it exits, so that its own completion still
// implies the earlier kernel's (what follows on the stream, e.g. a stream-ordered free of the
// scratch both read, relies on that).
#pragma once

#include "core/numerics/hd.hpp"

namespace tlrt {
namespace cuda {

// Lets the next kernel on the stream, if launched dependent, begin (its blocks are placed as
// resources free up).
TLRT_HD void pdl_trigger() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Waits until the kernel before this one on the stream has completed and its writes are visible
// (returns at once where this kernel was launched the ordinary way).
TLRT_HD void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

}  // namespace cuda
}  // namespace tlrt
