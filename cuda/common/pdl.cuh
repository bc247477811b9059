// Programmatic dependent launch, device side (sm_90+; no-ops elsewhere and under tests/emu), for
// launch_dependent (cuda/common/launch.cuh): pdl_trigger() lets the next kernel begin; pdl_wait()
// returns once the previous kernel has completed and its writes are visible.
#pragma once

#include "core/numerics/hd.hpp"

namespace tlrt {
namespace cuda {

TLRT_HD void pdl_trigger() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

TLRT_HD void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

}  // namespace cuda
}  // namespace tlrt
