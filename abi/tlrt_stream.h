/* libtorchlean_rt: the CUDA stream the library queues its work on, and CUDA events, so that the
 * library's work interleaves with a host's own CUDA work (PyTorch, CuPy, cudarc, CUDA.jl, plain
 * CUDA) in an order the device keeps, without the host waiting and without a device-wide
 * synchronisation.
 *
 * The current stream. Every CUDA device has one current stream: the library's own non-blocking
 * stream, created on first use, until the host sets one of its own with tlrt_stream_set. All of
 * the library's work on the device is queued on the current stream in call order: kernels,
 * copies, allocations and frees of the stream-ordered memory pool, the staging copies of host
 * index lists, cuBLAS and cuFFT calls. tlrt_synchronize and the downloads (tlrt_buffer_to_f32 and
 * the other tlrt_buffer_to_*) wait for the current stream.
 *
 * Handles. The CUDA types are passed as void *: a cudaStream_t or cudaEvent_t of the CUDA runtime
 * (the same handles as the driver API's CUstream / CUevent), as torch.cuda.Stream.cuda_stream,
 * torch.cuda.Event.cuda_event, cupy's .ptr, cudarc's raw handles or CUDA.jl's .handle give them.
 * TLRT_CUDA_STREAM_LEGACY (the value of cudaStreamLegacy) names the device's legacy default stream:
 * PyTorch's and CuPy's default stream, whose handle they report as 0 (a binding passes
 * TLRT_CUDA_STREAM_LEGACY for it); TLRT_CUDA_STREAM_PER_THREAD (cudaStreamPerThread) names the
 * calling host thread's default stream. NULL is never a host stream here: tlrt_stream_set takes it
 * to mean the library's own stream, the other functions reject it (it would mean the legacy or the
 * per-thread stream depending on how the host was compiled; DLPack disallows 0 for the same
 * reason).
 *
 * Threading. The current stream is process-wide per device, not per host thread. tlrt_stream_set
 * must not overlap any other call of this library that queues work on the same device (an op, an
 * upload or download, tlrt_synchronize, tlrt_allocator_trim, the other functions of this header):
 * the host orders them (one thread does the switching, or a lock), because a call that overlaps
 * the switch may queue part of its work on each stream, unordered. Freeing buffers
 * (tlrt_buffer_free, tlrt_buffer_release_storage) is safe at any time, from any thread, garbage
 * collectors' finalizers included. Every call that returned before tlrt_stream_set was called is
 * ordered before all work queued after the switch; every call made after it returns uses the new
 * stream. Apart from tlrt_stream_set, the functions of this header may run concurrently with
 * anything.
 *
 * The legacy default stream and lazy loading. With CUDA's lazy module loading (the default since
 * CUDA 12.2, CUDA_MODULE_LOADING=LAZY), the first launch of one of the library's kernels in the
 * process loads its module, and loading waits for work pending on the legacy default stream: on
 * that stream the first use of an op may block the host until earlier work there completes (the
 * order on the device is kept either way). A host that needs no host waits on that stream runs
 * its ops once beforehand, or sets CUDA_MODULE_LOADING=EAGER.
 *
 * The CPU device has no stream: CPU work is complete when each call returns. Every function here
 * returns TLRT_ERR_UNSUPPORTED for TLRT_DEVICE_CPU. CUDA devices in a build without CUDA give
 * TLRT_ERR_BACKEND_UNAVAILABLE, as everywhere.
 *
 * Precedence of errors, in each function: a NULL pointer argument that must not be NULL
 * (TLRT_ERR_NULL_ARGUMENT), then the device (TLRT_ERR_INVALID_ARGUMENT, TLRT_ERR_BACKEND_UNAVAILABLE,
 * TLRT_ERR_NO_DEVICE, TLRT_ERR_UNSUPPORTED for the CPU), then the other arguments; then whatever
 * the CUDA runtime reports (TLRT_ERR_CUDA with the CUDA error's name, TLRT_ERR_DEVICE_LOST for a
 * sticky error). A handle that is not a live stream or event of the kind the function says is
 * undefined behaviour, as in CUDA: the runtime reports most such handles (TLRT_ERR_CUDA), not all.
 * Stream capture (CUDA graphs) of a stream set here is not supported: downloads synchronise and the
 * index-list staging queries events, which capture forbids.
 */
#ifndef TLRT_STREAM_H
#define TLRT_STREAM_H

#include "tlrt_runtime.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Special stream handles, as (void *)(uintptr_t)TLRT_CUDA_STREAM_...: the values of the CUDA
 * runtime's cudaStreamLegacy and cudaStreamPerThread. */
#define TLRT_CUDA_STREAM_LEGACY 1u
#define TLRT_CUDA_STREAM_PER_THREAD 2u

/* From now on, queue all of the library's work on `device` on cuda_stream (a cudaStream_t of that
 * device, or TLRT_CUDA_STREAM_LEGACY). NULL, or the library's own stream as tlrt_stream_get
 * returned it, goes back to the library's own stream; so tlrt_stream_set(d, s) with s from an
 * earlier tlrt_stream_get(d, &s) restores what was current then. Setting the current stream again
 * does nothing.
 * Ordering: the new stream waits, on the device, for everything the library queued before the
 * switch (an event recorded on the previous stream, which the new stream waits on; the host does
 * not wait). So buffers computed before the switch are valid inputs after it, and memory the
 * library freed on the previous stream is reused on the new one only after its last use there.
 * Work the host queued on cuda_stream before the call runs before the library's work queued after
 * it (same stream); the previous stream is not made to wait for anything.
 * Lifetime: the stream must stay alive while it is current. Switch back (NULL) before destroying
 * it; destroying it while it is current is undefined behaviour: later calls on the device may fail
 * with TLRT_ERR_CUDA, queue work on whatever stream reuses the handle, or crash (work already
 * queued completes, as CUDA finishes a destroyed stream's work). A blocking stream (one created
 * without cudaStreamNonBlocking, or the legacy stream) also synchronises with the legacy default
 * stream, as CUDA defines; the library's own stream does not.
 * Threading: see the top of this header (no other call on the device may overlap this one).
 * On failure the current stream is unchanged.
 * Errors: TLRT_ERR_INVALID_ARGUMENT (malformed device; cuda_stream belongs to another device, where
 * the CUDA runtime and driver can tell, 12.8 and later); TLRT_ERR_UNSUPPORTED (the CPU;
 * cuda_stream is TLRT_CUDA_STREAM_PER_THREAD, a different stream on every host thread, which would
 * leave the library's work on the device unordered between threads: pass a stream handle);
 * TLRT_ERR_BACKEND_UNAVAILABLE; TLRT_ERR_NO_DEVICE; TLRT_ERR_CUDA (the runtime rejected the
 * handle); TLRT_ERR_DEVICE_LOST. */
TLRT_API tlrt_status tlrt_stream_set(tlrt_device device, void *cuda_stream);

/* *cuda_stream = the current stream of `device`: the host's as it was set (TLRT_CUDA_STREAM_LEGACY
 * stays that value), or the library's own stream (never NULL; created on first use, alive for the
 * process; the host may queue work on it and wait on it, and must not destroy it).
 * Errors: TLRT_ERR_NULL_ARGUMENT (cuda_stream); TLRT_ERR_INVALID_ARGUMENT (malformed device);
 * TLRT_ERR_UNSUPPORTED (the CPU); TLRT_ERR_BACKEND_UNAVAILABLE; TLRT_ERR_NO_DEVICE; TLRT_ERR_CUDA
 * (creating the library's stream failed); TLRT_ERR_DEVICE_LOST. On failure *cuda_stream = NULL. */
TLRT_API tlrt_status tlrt_stream_get(tlrt_device device, void **cuda_stream);

/* Records cuda_event (a cudaEvent_t created on `device`) on the current stream of `device`
 * (cudaEventRecord): the event completes once all work the library has queued on the device so far
 * has completed. A host stream can then wait for that work on the device (cudaStreamWaitEvent;
 * torch.cuda.Stream.wait_event), or the host can wait (cudaEventSynchronize) or poll
 * (cudaEventQuery). Work the library queues later is not covered. The host does not wait.
 * Errors: TLRT_ERR_NULL_ARGUMENT (cuda_event); TLRT_ERR_INVALID_ARGUMENT (malformed device);
 * TLRT_ERR_UNSUPPORTED (the CPU); TLRT_ERR_BACKEND_UNAVAILABLE; TLRT_ERR_NO_DEVICE; TLRT_ERR_CUDA
 * (the runtime rejected the event, for example one created on another device);
 * TLRT_ERR_DEVICE_LOST. */
TLRT_API tlrt_status tlrt_stream_record_event(tlrt_device device, void *cuda_event);

/* Makes the library's work on `device` queued after this call wait, on the device, for the most
 * recent record of cuda_event (cudaStreamWaitEvent on the current stream; the event may belong to
 * any device, and one never recorded counts as complete). The host does not wait. For example, a
 * host that wrote data on its stream records an event there and passes it here before the library
 * reads that data. After tlrt_stream_set the wait stays in force: the new stream waits for the
 * previous one.
 * Errors: TLRT_ERR_NULL_ARGUMENT (cuda_event); TLRT_ERR_INVALID_ARGUMENT (malformed device);
 * TLRT_ERR_UNSUPPORTED (the CPU); TLRT_ERR_BACKEND_UNAVAILABLE; TLRT_ERR_NO_DEVICE; TLRT_ERR_CUDA
 * (the runtime rejected the event); TLRT_ERR_DEVICE_LOST. */
TLRT_API tlrt_status tlrt_stream_wait_event(tlrt_device device, void *cuda_event);

/* Makes cuda_stream (a host stream of any device, TLRT_CUDA_STREAM_LEGACY or
 * TLRT_CUDA_STREAM_PER_THREAD, both of `device`) wait, on the device, for all work the library has
 * queued on `device` so far, through an event of the library's recorded on the current stream:
 * what a host does before it reads the library's results on its own stream (DLPack's `stream`
 * argument asks for exactly this). Work the library queues later is not waited for. Nothing is
 * queued when cuda_stream is the current stream (its order already holds). The host does not wait.
 * Errors: TLRT_ERR_NULL_ARGUMENT (cuda_stream: pass TLRT_CUDA_STREAM_LEGACY for the legacy
 * default stream); TLRT_ERR_INVALID_ARGUMENT (malformed device); TLRT_ERR_UNSUPPORTED (the CPU);
 * TLRT_ERR_BACKEND_UNAVAILABLE; TLRT_ERR_NO_DEVICE; TLRT_ERR_CUDA (the runtime rejected the
 * stream); TLRT_ERR_DEVICE_LOST. */
TLRT_API tlrt_status tlrt_stream_wait_for_library(tlrt_device device, void *cuda_stream);

#ifdef __cplusplus
}
#endif

#endif /* TLRT_STREAM_H */
