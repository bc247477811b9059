// CUDA backend: memory, transfers, fill, synchronisation, the current stream.
// One current stream per device, on which all of the library's work for the device is queued: the
// library's own non-blocking stream, or a host stream set through tlrt_stream_set
// (abi/tlrt_stream.h). Every payload comes from the device's default stream-ordered memory pool
// (cudaMallocAsync / cudaFreeAsync on the current stream), whose release threshold is "keep
// everything", so freed blocks are reused without going back to the driver; tlrt_allocator_trim
// hands them back.
// In front of it, a host-side size-class cache (core/size_class_pool.hpp) keeps freed blocks and
// hands them out again with no CUDA call at all (state(), not stream(): not even cudaGetDevice):
// every kernel, copy and free of this library is ordered on the device's one current stream, so
// work queued after a reuse runs after all work queued before the free, the guarantee
// cudaFreeAsync + cudaMallocAsync give, for ~0.6 us less host time per op. Capped by
// TORCHLEAN_RT_CUDA_CACHE_MAX_BYTES (default 4 GiB, read once; 0 disables it); beyond the cap,
// on trim and on an allocation failure, blocks go back with cudaFreeAsync.
// upload_async: per-call host data (index lists) goes through pinned staging, so that the copy is
// a true asynchronous DMA. A ring per device of at most 8 pinned blocks of 4 MiB, each with an
// event recorded after its copy, reused once the event has completed; larger data goes in 4 MiB
// pieces. With every block busy the host waits for the oldest copy (pinned memory stays bounded
// at 32 MiB per device). Trim frees the blocks.
// Switching the current stream (stream_set) keeps that one order: an event recorded on the previous
// stream, which the new stream waits on (no host wait), puts everything queued before the switch
// (kernels, copies, the last uses of cached blocks, staging copies) before everything queued after
// it. So the block cache stays correct across the switch, the pool's own reuse rules hold on any
// stream, the staging ring's blocks are reused once their event (recorded on whichever stream
// carried the copy) has completed, cuBLAS handles rebind to the current stream on their next call
// (cuda/blas.cu), and cuFFT plans are set to it on every execution (cuda/fft.cu). The current
// stream is an atomic read per call; the switch itself must not overlap other calls on the device
// (the contract of abi/tlrt_stream.h), frees excepted: a free either caches a block whose last use
// was queued before (ordered by the switch event) or hands it to the pool, which orders reuse
// across streams itself.
// fill_kernel: one thread per 4 floats (16-byte stores), a block per 256 threads (grid_all);
// 4n bytes written.
// Last measured: bench/results/2026-11-24-h100-rng-hostcost.md
#include <atomic>
#include <cstring>
#include <mutex>
#include <vector>

#include "core/backend/memory.hpp"
#include "core/size_class_pool.hpp"
#include "cuda/common/launch.cuh"

namespace tlrt {
namespace cuda {

namespace {

bool is_sticky(cudaError_t e) {
  switch (e) {
    case cudaErrorIllegalAddress:
    case cudaErrorLaunchFailure:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorHardwareStackError:
    case cudaErrorAssert:
    case cudaErrorECCUncorrectable:
    case cudaErrorLaunchTimeout:
    case cudaErrorContextIsDestroyed:
      return true;
    default:
      return false;
  }
}

struct DeviceState {
  std::once_flag once;
  cudaStream_t own = nullptr;                    // the library's stream
  std::atomic<cudaStream_t> current{nullptr};    // own, or the host's (stream_set)
  std::mutex event_mutex;                        // serialises switches and uses of `ordering`
  cudaEvent_t ordering = nullptr;                // recorded, then waited on (created on first use)
  int sms = 0;
  int cc_major = 0;
  int cc_minor = 0;
  int smem_optin = 0;  // cudaDevAttrMaxSharedMemoryPerBlockOptin, bytes
  cudaError_t init_error = cudaSuccess;
  SizeClassPool *cache = nullptr;  // leaky: freed blocks may arrive during static destruction
};

DeviceState g_dev[kMaxCudaDevices];

struct StagingBlock {
  void *host = nullptr;  // kStagingBytes of pinned memory
  cudaEvent_t done = nullptr;
  uint64_t last_use = 0;
};

struct StagingRing {
  std::mutex m;
  std::vector<StagingBlock> blocks;
  uint64_t clock = 0;
};

constexpr size_t kStagingBlocks = 8;
constexpr uint64_t kStagingBytes = 4 << 20;

StagingRing g_staging[kMaxCudaDevices];

}  // namespace

void check(cudaError_t e, const char *what) {
  if (e == cudaSuccess) return;
  if (e == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();  // not sticky: clear it so later calls work
    fail(TLRT_ERR_OUT_OF_MEMORY, "%s: out of device memory (%s)", what, cudaGetErrorString(e));
  }
  if (is_sticky(e))
    fail(TLRT_ERR_DEVICE_LOST,
         "%s: %s (%s); the CUDA device is no longer usable in this process", what,
         cudaGetErrorName(e), cudaGetErrorString(e));
  (void)cudaGetLastError();
  fail(TLRT_ERR_CUDA, "%s: %s (%s)", what, cudaGetErrorName(e), cudaGetErrorString(e));
}

void check_launch(const char *kernel) { check(cudaGetLastError(), kernel); }

namespace {

// The device's state, initialised on first use (stream, SM count, compute capability, opt-in
// shared memory per block, pool settings, block cache).
// Makes no CUDA call after the first time: what needs no current device (the block cache, the SM
// count) goes through here, not through stream().
DeviceState &state(int dev) {
  DeviceState &d = g_dev[dev];
  std::call_once(d.once, [&] {
    d.init_error = cudaSetDevice(dev);
    if (d.init_error == cudaSuccess)
      d.init_error = cudaStreamCreateWithFlags(&d.own, cudaStreamNonBlocking);
    d.current.store(d.own, std::memory_order_release);
    if (d.init_error == cudaSuccess)
      d.init_error = cudaDeviceGetAttribute(&d.sms, cudaDevAttrMultiProcessorCount, dev);
    if (d.init_error == cudaSuccess)
      d.init_error = cudaDeviceGetAttribute(&d.cc_major, cudaDevAttrComputeCapabilityMajor, dev);
    if (d.init_error == cudaSuccess)
      d.init_error = cudaDeviceGetAttribute(&d.cc_minor, cudaDevAttrComputeCapabilityMinor, dev);
    if (d.init_error == cudaSuccess)
      d.init_error =
          cudaDeviceGetAttribute(&d.smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
    cudaMemPool_t pool;
    if (d.init_error == cudaSuccess) d.init_error = cudaDeviceGetDefaultMemPool(&pool, dev);
    if (d.init_error == cudaSuccess) {
      uint64_t keep = UINT64_MAX;
      d.init_error = cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep);
    }
    d.cache = new SizeClassPool(cuda_cache_max_bytes());
  });
  check(d.init_error, "initialising the CUDA device");
  return d;
}

}  // namespace

cudaStream_t stream(int dev) {
  DeviceState &d = state(dev);
  // The host program may switch devices behind our back, so ask rather than remember (a
  // per-thread cache would go stale on the caller's own cudaSetDevice, and a launch on another
  // device's stream fails); setting only when needed saves a cudaSetDevice per call. One
  // cudaGetDevice (~0.04 us) per op: alloc / dealloc served by the block cache and sm_count
  // make no CUDA call (they use state()).
  int current = -1;
  if (cudaGetDevice(&current) != cudaSuccess || current != dev)
    check(cudaSetDevice(dev), "cudaSetDevice");
  return d.current.load(std::memory_order_acquire);
}

int sm_count(int dev) { return state(dev).sms; }

int cc_major(int dev) { return state(dev).cc_major; }

int cc_minor(int dev) { return state(dev).cc_minor; }

size_t smem_optin(int dev) { return (size_t)state(dev).smem_optin; }

unsigned *zeroed_counters(ZeroedCounters &c, uint64_t n, const char *what) {
  std::call_once(c.once, [&] {
    c.error = cudaMalloc(&c.p, n * sizeof(unsigned));
    if (c.error == cudaSuccess) c.error = cudaMemset(c.p, 0, n * sizeof(unsigned));
    // The memset runs on the legacy stream, which the library's non-blocking streams do not
    // wait for: finish it here (once per process and device) before any kernel reads a counter.
    if (c.error == cudaSuccess) c.error = cudaStreamSynchronize(cudaStreamLegacy);
  });
  check(c.error, what);
  return c.p;
}

uint32_t device_count() noexcept {
  static const uint32_t count = [] {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
      (void)cudaGetLastError();
      return 0u;
    }
    if (n > kMaxCudaDevices) n = kMaxCudaDevices;
    return (uint32_t)(n < 0 ? 0 : n);
  }();
  return count;
}

namespace {

// Returns every cached block of `dev` to the stream-ordered pool.
void flush_cache(int dev, cudaStream_t s) {
  g_dev[dev].cache->trim([s](void *p) { (void)cudaFreeAsync(p, s); });
}

}  // namespace

void *alloc(int dev, uint64_t bytes) {
  const uint64_t cls = size_class(bytes);
  if (cls == 0) fail(TLRT_ERR_OUT_OF_MEMORY, "out of device memory allocating %llu bytes",
                     (unsigned long long)bytes);
  // A cached block needs no CUDA call, not even for the current device.
  if (void *p = state(dev).cache->take(cls)) return p;
  cudaStream_t s = stream(dev);
  void *p = nullptr;
  cudaError_t e = cudaMallocAsync(&p, cls, s);
  if (e == cudaErrorMemoryAllocation) {  // give cached blocks back to the pool, try once more
    (void)cudaGetLastError();
    flush_cache(dev, s);
    e = cudaMallocAsync(&p, cls, s);
  }
  check(e, "cudaMallocAsync");
  return p;
}

void dealloc(int dev, void *p, uint64_t bytes) noexcept {
  // Never throws: a failure here (a lost device) has nowhere to be reported; the pool is gone
  // with the context anyway.
  try {
    if (!state(dev).cache->give(p, size_class(bytes))) (void)cudaFreeAsync(p, stream(dev));
  } catch (...) {
  }
}

void upload(int dev, void *dst, const void *src, uint64_t bytes) {
  // From pageable memory the copy is staged before the call returns, so src may be reused.
  check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream(dev)), "upload");
}

namespace {

// One staging block for up to kStagingBytes of data: an idle one (its last copy complete), a new
// one while the ring has fewer than kStagingBlocks, else the least recently used after waiting for
// its copy. Called with ring.m held.
StagingBlock &staging_block(StagingRing &ring) {
  for (StagingBlock &b : ring.blocks) {
    const cudaError_t q = cudaEventQuery(b.done);
    if (q == cudaErrorNotReady) continue;
    check(q, "upload (staging event)");
    return b;
  }
  if (ring.blocks.size() < kStagingBlocks) {
    StagingBlock b;
    check(cudaEventCreateWithFlags(&b.done, cudaEventDisableTiming), "cudaEventCreate (staging)");
    const cudaError_t e = cudaHostAlloc(&b.host, kStagingBytes, cudaHostAllocDefault);
    if (e != cudaSuccess) {
      (void)cudaEventDestroy(b.done);
      check(e, "cudaHostAlloc (upload staging)");
    }
    ring.blocks.push_back(b);
    return ring.blocks.back();
  }
  StagingBlock *lru = &ring.blocks[0];
  for (StagingBlock &b : ring.blocks)
    if (b.last_use < lru->last_use) lru = &b;
  check(cudaEventSynchronize(lru->done), "upload (waiting for staging)");
  return *lru;
}

}  // namespace

void upload_async_fill(int dev, void *dst, uint64_t bytes,
                       void (*fill)(void *ctx, void *host, uint64_t off, uint64_t len), void *ctx) {
  cudaStream_t s = stream(dev);
  StagingRing &ring = g_staging[dev];
  std::lock_guard<std::mutex> lock(ring.m);
  // Pieces of at most kStagingBytes, each through its own pinned block: pinned memory stays
  // bounded (kStagingBlocks x kStagingBytes) whatever the size of the data.
  for (uint64_t off = 0; off < bytes; off += kStagingBytes) {
    const uint64_t len = bytes - off < kStagingBytes ? bytes - off : kStagingBytes;
    StagingBlock &b = staging_block(ring);
    fill(ctx, b.host, off, len);
    b.last_use = ++ring.clock;
    check(cudaMemcpyAsync(static_cast<char *>(dst) + off, b.host, len, cudaMemcpyHostToDevice, s),
          "upload");
    check(cudaEventRecord(b.done, s), "upload (staging event)");
  }
}

void upload_async(int dev, void *dst, const void *src, uint64_t bytes) {
  auto copy_piece = [](void *ctx, void *host, uint64_t off, uint64_t len) {
    std::memcpy(host, static_cast<const char *>(ctx) + off, len);
  };
  upload_async_fill(dev, dst, bytes, copy_piece, const_cast<void *>(src));
}

void download(int dev, void *dst, const void *src, uint64_t bytes) {
  cudaStream_t s = stream(dev);
  check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, s), "download");
  check(cudaStreamSynchronize(s), "download (synchronising)");
}

void copy(int dev, void *dst, const void *src, uint64_t bytes) {
  check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream(dev)), "copy");
}

void copy_peer(int dst_dev, void *dst, int src_dev, const void *src, uint64_t bytes) {
  // The source's producers run on the source stream: wait for them, then copy on the
  // destination stream (later users of dst are ordered after it there).
  check(cudaStreamSynchronize(stream(src_dev)), "copy between devices (source)");
  check(cudaMemcpyPeerAsync(dst, dst_dev, src, src_dev, bytes, stream(dst_dev)),
        "copy between devices");
}

namespace {

__global__ void fill_kernel(float *__restrict dst, float value, uint64_t n) {
  const uint64_t stride = (uint64_t)gridDim.x * blockDim.x;
  const uint64_t n4 = n / 4;
  float4 v = make_float4(value, value, value, value);
  float4 *d4 = reinterpret_cast<float4 *>(dst);
  for (uint64_t i = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += stride) d4[i] = v;
  for (uint64_t i = n4 * 4 + (uint64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
    dst[i] = value;
}

}  // namespace

void fill(int dev, float *dst, float value, uint64_t n) {
  cudaStream_t s = stream(dev);
  // Payloads start on pool blocks (256-byte aligned); float4 stores need 16 bytes.
  if (((uintptr_t)dst & 15u) != 0)
    fail(TLRT_ERR_INTERNAL, "fill: device pointer %p is not 16-byte aligned", (void *)dst);
  fill_kernel<<<grid_all((n + 3) / 4, 256), 256, 0, s>>>(dst, value, n);
  check_launch("fill");
}

void synchronize(int dev) { check(cudaStreamSynchronize(stream(dev)), "synchronize"); }

void trim(int dev) {
  cudaStream_t s = stream(dev);
  flush_cache(dev, s);
  check(cudaStreamSynchronize(s), "trim (synchronising)");
  {
    // Every staging copy is complete after the synchronisation: free the pinned blocks.
    StagingRing &ring = g_staging[dev];
    std::lock_guard<std::mutex> lock(ring.m);
    for (StagingBlock &b : ring.blocks) {
      if (b.host) (void)cudaFreeHost(b.host);
      if (b.done) (void)cudaEventDestroy(b.done);
    }
    ring.blocks.clear();
  }
  cudaMemPool_t pool;
  check(cudaDeviceGetDefaultMemPool(&pool, dev), "cudaDeviceGetDefaultMemPool");
  check(cudaMemPoolTrimTo(pool, 0), "cudaMemPoolTrimTo");
}

// ---- the current stream (abi/tlrt_stream.h) ------------------------------------------------------

namespace {

// The device's ordering event, created on first use; dev current, d.event_mutex held.
cudaEvent_t ordering_event(DeviceState &d) {
  if (d.ordering == nullptr)
    check(cudaEventCreateWithFlags(&d.ordering, cudaEventDisableTiming), "cudaEventCreate");
  return d.ordering;
}

// Throws TLRT_ERR_INVALID_ARGUMENT when s belongs to another device than dev (dev current). Only
// runtimes and drivers of CUDA 12.8 and later can tell; elsewhere the stream is taken as given.
void check_stream_device(int dev, cudaStream_t s) {
#if CUDART_VERSION >= 12080
  int owner = -1;
  const cudaError_t e = cudaStreamGetDevice(s, &owner);
  if (e == cudaErrorCallRequiresNewerDriver || e == cudaErrorNotSupported) {
    (void)cudaGetLastError();
    return;
  }
  check(e, "argument cuda_stream (cudaStreamGetDevice)");
  if (owner != dev)
    fail(TLRT_ERR_INVALID_ARGUMENT, "argument cuda_stream belongs to CUDA device %d, not to %d",
         owner, dev);
#else
  (void)dev;
  (void)s;
#endif
}

}  // namespace

void *stream_get(int dev) { return stream(dev); }

void stream_set(int dev, void *host) {
  stream(dev);  // makes dev current (and the device state initialised)
  DeviceState &d = g_dev[dev];
  const cudaStream_t next = host == nullptr ? d.own : static_cast<cudaStream_t>(host);
  std::lock_guard<std::mutex> lock(d.event_mutex);
  const cudaStream_t prev = d.current.load(std::memory_order_acquire);
  if (next == prev) return;
  // The legacy stream is the current device's by definition.
  if (next != d.own && next != cudaStreamLegacy) check_stream_device(dev, next);
  const cudaEvent_t ev = ordering_event(d);
  check(cudaEventRecord(ev, prev), "switching streams (recording on the previous stream)");
  check(cudaStreamWaitEvent(next, ev, 0), "argument cuda_stream (cudaStreamWaitEvent)");
  d.current.store(next, std::memory_order_release);
}

void stream_record_event(int dev, void *event) {
  check(cudaEventRecord(static_cast<cudaEvent_t>(event), stream(dev)),
        "argument cuda_event (cudaEventRecord)");
}

void stream_wait_event(int dev, void *event) {
  check(cudaStreamWaitEvent(stream(dev), static_cast<cudaEvent_t>(event), 0),
        "argument cuda_event (cudaStreamWaitEvent)");
}

void wait_for_library(int dev, void *host_stream) {
  const cudaStream_t s = stream(dev);  // also makes dev current (what the special handles name)
  const cudaStream_t h = static_cast<cudaStream_t>(host_stream);
  if (h == s) return;
  DeviceState &d = g_dev[dev];
  std::lock_guard<std::mutex> lock(d.event_mutex);
  const cudaEvent_t ev = ordering_event(d);
  check(cudaEventRecord(ev, s), "recording the library's work");
  check(cudaStreamWaitEvent(h, ev, 0), "argument cuda_stream (cudaStreamWaitEvent)");
}

void memory_info(int dev, uint64_t *pooled, uint64_t *free_bytes, uint64_t *total_bytes) {
  stream(dev);
  cudaMemPool_t pool;
  check(cudaDeviceGetDefaultMemPool(&pool, dev), "cudaDeviceGetDefaultMemPool");
  uint64_t reserved = 0, used = 0;
  check(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &reserved),
        "cudaMemPoolGetAttribute");
  check(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used),
        "cudaMemPoolGetAttribute");
  // Cached blocks count as used by the driver's pool; both are memory kept for reuse.
  *pooled = g_dev[dev].cache->pooled_bytes() + (reserved > used ? reserved - used : 0);
  size_t f = 0, t = 0;
  check(cudaMemGetInfo(&f, &t), "cudaMemGetInfo");
  *free_bytes = f;
  *total_bytes = t;
}

}  // namespace cuda
}  // namespace tlrt
