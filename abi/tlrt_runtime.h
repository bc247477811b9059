/* libtorchlean_rt: status codes, errors, versions, devices, determinism, allocator telemetry.
 *
 * Conventions shared by every header of this library (see torchlean_rt.h for the overview):
 *  - every fallible function returns tlrt_status (TLRT_OK == 0) and writes its results through
 *    trailing out-parameters; on failure every out-parameter is set to NULL / 0 and nothing leaks;
 *  - tlrt_last_error() then holds a message naming the function, the argument and the condition;
 *  - no function aborts, exits or lets a C++ exception escape.
 */
#ifndef TLRT_RUNTIME_H
#define TLRT_RUNTIME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#if defined(TLRT_BUILDING_LIBRARY)
#define TLRT_API __attribute__((visibility("default")))
#else
#define TLRT_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ABI version: major changes break binary compatibility (and bump the SONAME); minor versions only
 * append symbols, enum values and struct fields. tlrt_abi_version() returns the value the library
 * was built with; a binding compares TLRT_ABI_VERSION_MAJOR with (tlrt_abi_version() >> 16). */
#define TLRT_ABI_VERSION_MAJOR 1
#define TLRT_ABI_VERSION_MINOR 5
#define TLRT_ABI_VERSION ((TLRT_ABI_VERSION_MAJOR << 16) | TLRT_ABI_VERSION_MINOR)

/* Status codes. Append-only; grouped in bands:
 *   1..99    the caller's arguments,   100..199 resources,
 *   200..299 devices and backends,     900..999 internal errors (a bug in this library). */
typedef enum tlrt_status {
  TLRT_OK = 0,
  TLRT_ERR_NULL_ARGUMENT = 1,    /* a required pointer argument is NULL */
  TLRT_ERR_INVALID_ARGUMENT = 2, /* a value outside its documented domain (NaN bound, bad flag) */
  TLRT_ERR_SHAPE = 3,            /* sizes that do not agree (a has 10 elements, b has 12) */
  TLRT_ERR_OVERFLOW = 4,         /* an element count or byte size not representable */
  TLRT_ERR_INDEX = 5,            /* an index or axis that cannot be one */
  TLRT_ERR_RELEASED = 6,         /* the buffer's storage was released by tlrt_buffer_release_storage;
                                    a tape node released by tlrt_tape_release, or a tape rule freed
                                    by a freeing backward (abi/tlrt_tape.h) */
  TLRT_ERR_DEVICE_MISMATCH = 7,  /* buffers of one call live on different devices */
  TLRT_ERR_STALE_HANDLE = 8,     /* a buffer or tape handle that was freed (or never was one), or
                                    a tape node id of another tape or from before a reset */
  TLRT_ERR_DTYPE = 9,            /* a buffer of an element type the argument does not take (an
                                    int64 buffer where float32 values are expected) */
  TLRT_ERR_FORMAT = 10,          /* a file that is not what it claims to be (a safetensors file that
                                    is truncated or has a malformed header); the message says what
                                    is wrong and where */
  TLRT_ERR_OUT_OF_MEMORY = 100,  /* host or device allocation failed; retrying after frees may work */
  TLRT_ERR_IO = 101,             /* the operating system refused a file operation (no such file, no
                                    permission, disk full, ...); the message names the path and
                                    the reason */
  TLRT_ERR_BACKEND_UNAVAILABLE = 200, /* CUDA requested from a build compiled without CUDA */
  TLRT_ERR_NO_DEVICE = 201,      /* CUDA compiled in, but no such device on this machine */
  TLRT_ERR_CUDA = 202,           /* the CUDA runtime reported an error; the message has its name */
  TLRT_ERR_DEVICE_LOST = 203,    /* a sticky CUDA error: the device is unusable in this process */
  TLRT_ERR_LIBRARY = 204,        /* cuBLAS / cuFFT reported an error */
  TLRT_ERR_UNSUPPORTED = 205,    /* valid request this build or device cannot serve */
  TLRT_ERR_INTERNAL = 900        /* a broken invariant inside the library: please report it */
} tlrt_status;

/* Static name of a status code ("TLRT_ERR_SHAPE"); "TLRT_UNKNOWN_STATUS" for other values.
 * Never NULL; the string lives for the whole process. */
TLRT_API const char *tlrt_status_string(tlrt_status status);

/* Message describing the most recent failure on the calling thread, for example
 * "tlrt_add: argument b has 12 elements, argument a has 10". "" if no call on this thread has
 * failed yet. Successful calls do not change it. The pointer is the same for every call on one
 * thread and stays valid while the thread lives; its text changes only when a later call on the
 * thread fails (so printf("%d %s", tlrt_add(...), tlrt_last_error()) prints that call's message
 * whichever argument is evaluated first). Messages longer than 1023 bytes are truncated. */
TLRT_API const char *tlrt_last_error(void);

/* TLRT_ABI_VERSION of the loaded library. */
TLRT_API uint32_t tlrt_abi_version(void);

/* Static, human-readable description of the build: library version, backends compiled in, CUDA
 * version and GPU architectures where CUDA is compiled in, BLAS provider. Never NULL. */
TLRT_API const char *tlrt_build_info(void);

/* ---- devices ------------------------------------------------------------------------------ */

/* A device is one uint32_t so that every host FFI can pass it by value:
 * bits 16..23 hold the kind, bits 0..15 the ordinal. TLRT_DEVICE_CPU is the only CPU device. */
typedef uint32_t tlrt_device;
#define TLRT_DEVICE_KIND_CPU 0u
#define TLRT_DEVICE_KIND_CUDA 1u
#define TLRT_DEVICE_CPU ((tlrt_device)0u)
#define TLRT_DEVICE_CUDA(ordinal) ((tlrt_device)((TLRT_DEVICE_KIND_CUDA << 16) | ((uint32_t)(ordinal) & 0xFFFFu)))
#define TLRT_DEVICE_KIND(device) (((uint32_t)(device) >> 16) & 0xFFu)
#define TLRT_DEVICE_ORDINAL(device) ((uint32_t)(device) & 0xFFFFu)

/* What this process can run on (upstream's runtime status, same values):
 * TLRT_RUNTIME_CPU_ONLY (0): built without CUDA; TLRT_RUNTIME_CUDA_READY (1): built with CUDA and
 * at least one device is usable; TLRT_RUNTIME_CUDA_NO_DEVICE (2): built with CUDA but no device
 * (no GPU, no driver, or a driver too old). Never fails. */
#define TLRT_RUNTIME_CPU_ONLY 0u
#define TLRT_RUNTIME_CUDA_READY 1u
#define TLRT_RUNTIME_CUDA_NO_DEVICE 2u
TLRT_API uint32_t tlrt_runtime_status(void);

/* Number of devices of a kind: 1 for TLRT_DEVICE_KIND_CPU; the number of usable CUDA devices for
 * TLRT_DEVICE_KIND_CUDA (0 when CUDA is not compiled in or no device is present: not an error).
 * Errors: TLRT_ERR_NULL_ARGUMENT (count); TLRT_ERR_INVALID_ARGUMENT (unknown kind). */
TLRT_API tlrt_status tlrt_device_count(uint32_t kind, uint32_t *count);

/* Wait until all work this library queued on `device` has finished. CUDA work is asynchronous
 * (one ordered stream per device: the library's own, or the host's set by tlrt_stream_set, in
 * tlrt_stream.h; this waits for that stream, so also for the host's work queued on it before);
 * an error raised by a kernel surfaces here or at the next download. A no-op for the CPU.
 * Errors: TLRT_ERR_INVALID_ARGUMENT (malformed device); TLRT_ERR_BACKEND_UNAVAILABLE;
 * TLRT_ERR_NO_DEVICE; TLRT_ERR_CUDA; TLRT_ERR_DEVICE_LOST. */
TLRT_API tlrt_status tlrt_synchronize(tlrt_device device);

/* ---- determinism ------------------------------------------------------------------------- */

/* Deterministic mode: when on, every reduction follows the fixed reduction tree documented with
 * each op, so results are bitwise identical across runs and between the CPU and CUDA backends.
 * When off, CUDA may use faster order-dependent paths (atomics). Elementwise ops and RNG are
 * deterministic in both modes. The initial value comes from the environment variable
 * TORCHLEAN_RT_DETERMINISTIC, read once: unset, "", "0", "false", "off" or "no" (any case) mean
 * off; "1", "true", "on" or "yes" mean on; any other value means on. The flag is process-wide and
 * atomic. tlrt_set_deterministic returns the previous value. */
TLRT_API bool tlrt_set_deterministic(bool on);
TLRT_API bool tlrt_get_deterministic(void);

/* ---- CPU threads ---------------------------------------------------------------------------- */

/* The number of threads the CPU backend's kernels run on: the calling thread and n - 1 workers of
 * one process-wide pool. RESULTS DO NOT DEPEND ON IT: a parallel kernel cuts its work into pieces
 * whose bounds depend only on the problem's sizes and computes each piece as on one thread, so
 * every output is bitwise the same for any count (tests/unit/test_cpu_threads.cpp compares 1, 2
 * and 7 threads). n = 0 restores the default: the environment variable TORCHLEAN_RT_NUM_THREADS
 * when it is a positive decimal number (read once), else the processor's hardware concurrency.
 * Counts above 1024 are taken as 1024. The setting is process-wide and atomic; kernels already
 * running keep the count they started with. Kernels called from several host threads at once
 * share the pool: one call runs on it, the others on their calling threads alone (the same
 * results). After fork() the child starts a pool of its own. tlrt_set_num_threads returns the
 * previous count. The CUDA backend is not affected.
 * Parallel so far: the elementwise family (abi/tlrt_elementwise.h: unary and binary ops, above
 * 2^16 elements), the softmax family (abi/tlrt_softmax.h: softmax, log-softmax and the masked
 * softmax with their backward kernels) and layer norm and RMS norm (abi/tlrt_layer_norm.h,
 * forward and backward), above about 16K elements; the other CPU kernels run on the calling
 * thread. */
TLRT_API uint32_t tlrt_set_num_threads(uint32_t n);
TLRT_API uint32_t tlrt_get_num_threads(void);

/* ---- allocator telemetry --------------------------------------------------------------------- */

/* Counters of buffer payloads on one device. Every field is read atomically (the snapshot as a
 * whole is not one atomic instant). The caller sets struct_size = sizeof(tlrt_allocator_stats);
 * later library versions append fields and fill only what struct_size covers. */
typedef struct tlrt_allocator_stats {
  uint64_t struct_size;
  uint64_t live_bytes;         /* payload bytes currently held by buffers on this device */
  uint64_t peak_bytes;         /* maximum of live_bytes since process start */
  uint64_t alloc_count;        /* payload allocations on this device */
  uint64_t free_count;         /* payload frees (buffer freed or storage released) */
  uint64_t pooled_bytes;       /* bytes of freed payloads kept for reuse, not in use (what
                                  tlrt_allocator_trim returns to the system): the CUDA
                                  stream-ordered pool, or the CPU size-class pool (capped by the
                                  environment variable TORCHLEAN_RT_CPU_POOL_MAX_BYTES, default
                                  1 GiB, read once; 0 disables it), which also takes back the
                                  host scratch of index-list sorts (tlrt_index.h) */
  uint64_t device_free_bytes;  /* CUDA: free memory reported by the driver; CPU: 0 */
  uint64_t device_total_bytes; /* CUDA: total device memory; CPU: 0 */
  uint64_t live_handles;       /* tlrt_buffer handles alive in the process (all devices) */
  uint64_t peak_handles;       /* maximum of live_handles */
} tlrt_allocator_stats;

/* Fill *stats for `device`; on failure *stats is left untouched.
 * Errors: TLRT_ERR_NULL_ARGUMENT; TLRT_ERR_INVALID_ARGUMENT (struct_size smaller than the first
 * two fields, or malformed device); TLRT_ERR_BACKEND_UNAVAILABLE; TLRT_ERR_NO_DEVICE. */
TLRT_API tlrt_status tlrt_allocator_stats_get(tlrt_device device, tlrt_allocator_stats *stats);

/* Return memory pooled for reuse on `device` to the system: on CUDA, waits for the library stream
 * and trims the stream-ordered pool to zero unused bytes; on the CPU, frees every pooled block.
 * Afterwards pooled_bytes is 0. Errors: as tlrt_synchronize. */
TLRT_API tlrt_status tlrt_allocator_trim(tlrt_device device);

/* The fault-injection hook tlrt_debug_fail_nth_allocation is declared apart, in
 * tlrt_testing.h, which torchlean_rt.h does not include. */

#ifdef __cplusplus
}
#endif

#endif /* TLRT_RUNTIME_H */
