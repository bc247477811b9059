// The process settings: the one place that reads the environment. Each variable is read once, the
// first time its setting is asked for; the switches can be changed later through the ABI
// (tlrt_set_deterministic, tlrt_set_allow_tf32). Backends do not include this file: core
// resolves what a call may do (core/backend/policy.hpp) and passes it down.
//
//   TORCHLEAN_RT_DETERMINISTIC         the determinism switch's initial value (abi/tlrt_runtime.h)
//   TORCHLEAN_RT_ALLOW_TF32            the TF32 switch's initial value (abi/tlrt_blas.h)
//   TORCHLEAN_RT_GEMM_ISA              caps the CPU GEMM kernels at "generic" or "x86-64-v3"
//   TORCHLEAN_RT_CPU_POOL_MAX_BYTES    bytes the CPU buffer pool keeps (default 1 GiB; 0: none)
//   TORCHLEAN_RT_CUDA_CACHE_MAX_BYTES  bytes each CUDA device's buffer cache keeps (default 4 GiB)
//   TORCHLEAN_RT_NUM_THREADS           the CPU backend's default thread count (tlrt_set_num_threads)
//
// A switch is off when unset, empty, "0", "false", "off" or "no" (any case), on otherwise. A
// byte count that is not a plain decimal number is ignored (the default applies).
#pragma once

#include <cstdint>

#include "core/backend/policy.hpp"

namespace tlrt {

bool deterministic() noexcept;
bool set_deterministic(bool on) noexcept;  // returns the previous value
bool allow_tf32() noexcept;
bool set_allow_tf32(bool on) noexcept;  // returns the previous value

// The policy of a fused op's products from the two switches: Exact with the determinism switch
// on, else Tf32 with allow_tf32 on, else SplitTf32.
Precision call_precision() noexcept;

// The policy of a matrix product (blas, convolution).
MatmulPolicy matmul_policy() noexcept;

// Threads of the CPU backend's pool (core/parallel.cpp), 1 .. kMaxThreads: the value set by
// set_num_threads, else the default (TORCHLEAN_RT_NUM_THREADS when a positive decimal number,
// else the hardware concurrency). set_num_threads(0) restores the default; it returns the
// previous value.
constexpr uint32_t kMaxThreads = 1024;
uint32_t num_threads() noexcept;
uint32_t set_num_threads(uint32_t n) noexcept;

}  // namespace tlrt
