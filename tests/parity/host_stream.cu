// The host's CUDA streams and events (abi/tlrt_stream.h) on a GPU. The test holds streams back with
// a gate, a kernel of its own that spins until the host opens it (a flag in mapped pinned memory),
// so that "queued behind" can be seen while the gate is closed: cudaStreamQuery and cudaEventQuery
// say what has not run yet, and results say what ran in which order. Every ordering below is
// made by streams and events alone; the host never waits while a gate is closed (an alarm turns a
// hang, the symptom of a hidden host synchronisation, into a failure).
//   own       the library's own stream: non-blocking, returned by tlrt_stream_get, NULL and the own
//             handle both select it, setting it again is a no-op.
//   chain     with a host stream set behind a closed gate, a chain of ops (elementwise, a cuBLAS
//             product, a cuFFT transform, a gather whose index list goes through the pinned
//             staging, a reduction, a fresh allocation) all waits on that stream: the stream and an
//             event recorded after the chain are pending, the library's own stream is idle; a
//             second host thread whose cuBLAS handle was bound to the own stream joins in (its
//             handle rebinds); after the gate opens, tlrt_synchronize leaves the stream idle and
//             the results equal the CPU backend's (the FFT within 1e-5 relative, the rest exact).
//   reuse     memory freed on one stream and reused on the next: b = a * a queued on h1 behind the
//             gate, a freed, the stream switched to h2, a buffer of a's size filled with 7 (a's
//             block from the cache): h2 must wait for h1, else the fill overwrites a before the
//             product reads it (b would be 49, not 9).
//   events    host -> library: the library's own stream waits for a host event
//             (tlrt_stream_wait_event) recorded behind a gate on a host stream; library -> host:
//             a host stream waits for the library (tlrt_stream_wait_for_library) while the gate
//             holds the library's own stream; a host kernel queued after the wait must not have
//             written its mark until the gate opens.
//   legacy    TLRT_CUDA_STREAM_LEGACY as the current stream (PyTorch's default stream).
//   errors    the per-thread default stream is refused; with two GPUs, a stream and an event of the
//             other device are refused.
// Exits 77 without a usable GPU.
#include <cuda_runtime.h>
#include <unistd.h>

#include <cmath>
#include <condition_variable>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "torchlean_rt.h"

namespace {

int failures = 0;
int checks = 0;

void expect(bool ok, const char *what) {
  ++checks;
  if (!ok) {
    ++failures;
    std::printf("FAIL %s (last error: %s)\n", what, tlrt_last_error());
  }
}

void ok(tlrt_status s, const char *what) {
  ++checks;
  if (s != TLRT_OK) {
    ++failures;
    std::printf("FAIL %s: %s (%s)\n", what, tlrt_status_string(s), tlrt_last_error());
  }
}

void cuda_ok(cudaError_t e, const char *what) {
  if (e != cudaSuccess) {
    std::printf("FAIL %s: %s\n", what, cudaGetErrorString(e));
    std::_Exit(1);
  }
}

const tlrt_device kDev = TLRT_DEVICE_CUDA(0);

__global__ void gate_kernel(const volatile int *open) {
  while (*open == 0) {
#if __CUDA_ARCH__ >= 700
    __nanosleep(1000);
#endif
  }
}

__global__ void mark_kernel(volatile int *mark) { *mark = 1; }

// A flag in mapped pinned memory the host writes and kernels read.
struct HostFlag {
  int *host = nullptr;
  int *dev = nullptr;
  HostFlag() {
    cuda_ok(cudaHostAlloc(&host, sizeof(int), cudaHostAllocMapped), "cudaHostAlloc");
    cuda_ok(cudaHostGetDevicePointer(reinterpret_cast<void **>(&dev), host, 0),
            "cudaHostGetDevicePointer");
    set(0);
  }
  void set(int v) { __atomic_store_n(host, v, __ATOMIC_SEQ_CST); }
  int get() const { return __atomic_load_n(host, __ATOMIC_SEQ_CST); }
};

HostFlag *g_gate = nullptr;  // opened by the alarm handler too, so that a hang can end

// Queues a closed gate on s.
void close_gate(cudaStream_t s) {
  g_gate->set(0);
  gate_kernel<<<1, 1, 0, s>>>(g_gate->dev);
  cuda_ok(cudaGetLastError(), "gate launch");
}

void open_gate() { g_gate->set(1); }

// Long enough for anything unordered to have run.
void settle() { usleep(50 * 1000); }

bool pending(cudaStream_t s) { return cudaStreamQuery(s) == cudaErrorNotReady; }
bool idle(cudaStream_t s) { return cudaStreamQuery(s) == cudaSuccess; }
bool pending(cudaEvent_t e) { return cudaEventQuery(e) == cudaErrorNotReady; }
bool done(cudaEvent_t e) { return cudaEventQuery(e) == cudaSuccess; }

tlrt_buffer *upload(const std::vector<float> &v, tlrt_device d) {
  tlrt_buffer *b = nullptr;
  ok(tlrt_buffer_from_f32(d, v.data(), v.size(), &b), "upload");
  return b;
}

std::vector<float> download(const tlrt_buffer *b) {
  uint64_t n = 0;
  ok(tlrt_buffer_size(b, &n), "size");
  std::vector<float> v(n);
  ok(tlrt_buffer_to_f32(b, v.data(), n), "download");
  return v;
}

void *own_stream() {
  void *s = nullptr;
  ok(tlrt_stream_get(kDev, &s), "tlrt_stream_get");
  return s;
}

cudaStream_t as_stream(void *s) { return static_cast<cudaStream_t>(s); }

// A host thread that runs jobs on request and stays alive meanwhile: its cuBLAS handle lives as
// long as the thread, and a thread's exit destroys its handles, which synchronises the device (so
// it must not end while a gate is closed).
class Worker {
 public:
  Worker() : thread_([this] { loop(); }) {}
  ~Worker() {
    {
      std::lock_guard<std::mutex> l(m_);
      quit_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void run(std::function<void()> job) {
    std::unique_lock<std::mutex> l(m_);
    job_ = std::move(job);
    has_job_ = true;
    done_ = false;
    cv_.notify_all();
    cv_.wait(l, [&] { return done_; });
  }

 private:
  void loop() {
    std::unique_lock<std::mutex> l(m_);
    for (;;) {
      cv_.wait(l, [&] { return has_job_ || quit_; });
      if (!has_job_) return;
      std::function<void()> job = std::move(job_);
      has_job_ = false;
      l.unlock();
      job();
      l.lock();
      done_ = true;
      cv_.notify_all();
    }
  }
  std::mutex m_;
  std::condition_variable cv_;
  std::function<void()> job_;
  bool has_job_ = false, done_ = false, quit_ = false;
  std::thread thread_;  // last: starts once the members above exist
};

// ---- own ----------------------------------------------------------------------------------------

void test_own() {
  void *own = own_stream();
  expect(own != nullptr && own != reinterpret_cast<void *>(uintptr_t{TLRT_CUDA_STREAM_LEGACY}),
         "own: the library's stream is a stream handle");
  unsigned flags = 0;
  cuda_ok(cudaStreamGetFlags(as_stream(own), &flags), "cudaStreamGetFlags");
  expect(flags == cudaStreamNonBlocking, "own: non-blocking");
  ok(tlrt_stream_set(kDev, nullptr), "own: set NULL");
  ok(tlrt_stream_set(kDev, own), "own: set the own handle");
  expect(own_stream() == own, "own: still current");
}

// ---- chain --------------------------------------------------------------------------------------

struct Chain {
  tlrt_buffer *sum = nullptr, *prod = nullptr, *spec = nullptr, *picked = nullptr,
              *total = nullptr, *fresh = nullptr;
};

constexpr uint64_t kN = 64;  // kN x kN matrices
const uint64_t kIdx[] = {5, 4095, 0, 77, 4096 * 2, 1234, 63, 64};

// sum = a + b; prod = sum (kN x kN) times w; spec = rfft of prod's rows; picked = prod[idx];
// total = reduce_sum(picked); fresh = full(kN, 0.5). Small integers: the product is exact.
Chain run_chain(const tlrt_buffer *a, const tlrt_buffer *b, const tlrt_buffer *w, tlrt_device d) {
  (void)d;
  Chain c;
  ok(tlrt_add(a, b, &c.sum), "chain add");
  ok(tlrt_matmul(c.sum, w, kN, kN, kN, false, false, &c.prod), "chain matmul");
  ok(tlrt_rfft1d_packed(c.prod, kN, kN, &c.spec), "chain rfft");
  ok(tlrt_gather_vec(c.prod, kN * kN, kIdx, sizeof kIdx / sizeof kIdx[0], &c.picked),
     "chain gather");
  ok(tlrt_reduce_sum(c.picked, &c.total), "chain reduce_sum");
  ok(tlrt_buffer_full(d, kN, 0.5, &c.fresh), "chain full");
  return c;
}

void free_chain(Chain &c) {
  for (tlrt_buffer *b : {c.sum, c.prod, c.spec, c.picked, c.total, c.fresh}) tlrt_buffer_free(b);
  c = Chain{};
}

bool same(const std::vector<float> &x, const std::vector<float> &y) {
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * 4) == 0;
}

bool close_rel(const std::vector<float> &x, const std::vector<float> &y, double tol) {
  if (x.size() != y.size()) return false;
  double scale = 0;
  for (float v : y) scale = std::fmax(scale, std::fabs((double)v));
  for (size_t i = 0; i < x.size(); ++i)
    if (std::fabs((double)x[i] - (double)y[i]) > tol * (scale > 0 ? scale : 1)) return false;
  return true;
}

void test_chain() {
  std::vector<float> va(kN * kN), vb(kN * kN), vw(kN * kN);
  for (uint64_t i = 0; i < kN * kN; ++i) {
    va[i] = (float)(i % 7) - 3.0f;
    vb[i] = (float)(i % 5);
    vw[i] = (float)((i * 3) % 11) - 5.0f;
  }
  tlrt_buffer *ca = upload(va, TLRT_DEVICE_CPU), *cb = upload(vb, TLRT_DEVICE_CPU),
              *cw = upload(vw, TLRT_DEVICE_CPU);
  tlrt_buffer *ga = upload(va, kDev), *gb = upload(vb, kDev), *gw = upload(vw, kDev);
  Chain ref = run_chain(ca, cb, cw, TLRT_DEVICE_CPU);
  // Warm up on the library's own stream, here and on a second thread: cuBLAS handles (one per
  // thread, bound to the own stream), the cuFFT plan and staging blocks exist before the gate.
  Chain warm = run_chain(ga, gb, gw, kDev);
  free_chain(warm);
  Worker worker;
  tlrt_buffer *thread_prod = nullptr;
  auto thread_matmul = [&] {
    tlrt_buffer *p = nullptr;
    ok(tlrt_matmul(ga, gw, kN, kN, kN, false, false, &p), "thread matmul");
    if (thread_prod) tlrt_buffer_free(thread_prod);
    thread_prod = p;
  };
  worker.run(thread_matmul);
  ok(tlrt_synchronize(kDev), "warm-up synchronize");

  cudaStream_t own = as_stream(own_stream());
  cudaStream_t h = nullptr;
  cuda_ok(cudaStreamCreateWithFlags(&h, cudaStreamNonBlocking), "cudaStreamCreate");
  cudaEvent_t after = nullptr;
  cuda_ok(cudaEventCreateWithFlags(&after, cudaEventDisableTiming), "cudaEventCreate");

  close_gate(h);
  ok(tlrt_stream_set(kDev, h), "chain: set the host stream");  // queued behind the gate
  expect(own_stream() == h, "chain: tlrt_stream_get returns the host stream");
  Chain got = run_chain(ga, gb, gw, kDev);
  worker.run(thread_matmul);  // rebinds that thread's cuBLAS handle to h
  ok(tlrt_stream_record_event(kDev, after), "chain: record the host's event");
  settle();
  expect(pending(h), "chain: the host stream holds the library's work");
  expect(pending(after), "chain: the event recorded after the chain is pending");
  expect(idle(own), "chain: nothing went to the library's own stream");
  open_gate();
  ok(tlrt_synchronize(kDev), "chain: tlrt_synchronize");
  expect(idle(h) && done(after), "chain: tlrt_synchronize waited for the host stream");
  ok(tlrt_stream_set(kDev, nullptr), "chain: back to the library's stream");
  expect(own_stream() == own, "chain: the own stream is current again");

  expect(same(download(got.sum), download(ref.sum)), "chain: add = CPU");
  expect(same(download(got.prod), download(ref.prod)), "chain: matmul (cuBLAS) = CPU");
  tlrt_buffer *ref_aw = nullptr;
  ok(tlrt_matmul(ca, cw, kN, kN, kN, false, false, &ref_aw), "CPU a w");
  expect(same(download(thread_prod), download(ref_aw)), "chain: the second thread's matmul");
  tlrt_buffer_free(ref_aw);
  expect(close_rel(download(got.spec), download(ref.spec), 1e-5), "chain: rfft (cuFFT) ~ CPU");
  expect(same(download(got.picked), download(ref.picked)), "chain: gather (staged indices)");
  expect(same(download(got.total), download(ref.total)), "chain: reduce_sum = CPU");
  expect(same(download(got.fresh), std::vector<float>(kN, 0.5f)), "chain: full");

  free_chain(got);
  free_chain(ref);
  tlrt_buffer_free(thread_prod);
  for (tlrt_buffer *b : {ca, cb, cw, ga, gb, gw}) tlrt_buffer_free(b);
  cuda_ok(cudaEventDestroy(after), "cudaEventDestroy");
  cuda_ok(cudaStreamDestroy(h), "cudaStreamDestroy");
}

// ---- reuse --------------------------------------------------------------------------------------

uint64_t pooled() {
  tlrt_allocator_stats s;
  std::memset(&s, 0, sizeof s);
  s.struct_size = sizeof s;
  ok(tlrt_allocator_stats_get(kDev, &s), "stats");
  return s.pooled_bytes;
}

void test_reuse() {
  const uint64_t n = uint64_t{1} << 20;
  cudaStream_t h1 = nullptr, h2 = nullptr;
  cuda_ok(cudaStreamCreateWithFlags(&h1, cudaStreamNonBlocking), "cudaStreamCreate");
  cuda_ok(cudaStreamCreateWithFlags(&h2, cudaStreamNonBlocking), "cudaStreamCreate");
  cudaEvent_t after = nullptr;
  cuda_ok(cudaEventCreateWithFlags(&after, cudaEventDisableTiming), "cudaEventCreate");
  tlrt_buffer *a = nullptr, *b = nullptr, *c = nullptr;
  ok(tlrt_buffer_full(kDev, n, 3.0, &a), "reuse: a");
  ok(tlrt_synchronize(kDev), "reuse: synchronize");

  close_gate(h1);
  ok(tlrt_stream_set(kDev, h1), "reuse: set h1");
  ok(tlrt_mul(a, a, &b), "reuse: b = a * a on h1, behind the gate");
  const uint64_t before = pooled();
  tlrt_buffer_free(a);  // a's block goes to the cache
  const uint64_t freed = pooled();
  ok(tlrt_stream_set(kDev, h2), "reuse: set h2");
  ok(tlrt_buffer_full(kDev, n, 7.0, &c), "reuse: c = 7 on h2, a's block");
  const uint64_t after_fill = pooled();
  expect(freed >= before + 4 * n && after_fill + 4 * n <= freed,
         "reuse: the fill took the freed block from the cache (precondition)");
  ok(tlrt_stream_record_event(kDev, after), "reuse: record after the fill");
  settle();
  expect(pending(h2) && pending(after), "reuse: h2 waits for h1's work before the switch");
  open_gate();
  ok(tlrt_synchronize(kDev), "reuse: synchronize");
  ok(tlrt_stream_set(kDev, nullptr), "reuse: back to the library's stream");
  const std::vector<float> vb = download(b), vc = download(c);
  bool all9 = vb.size() == n, all7 = vc.size() == n;
  for (uint64_t i = 0; i < n && all9; ++i) all9 = vb[i] == 9.0f;
  for (uint64_t i = 0; i < n && all7; ++i) all7 = vc[i] == 7.0f;
  expect(all9, "reuse: the product read a before the fill overwrote its block (9, not 49)");
  expect(all7, "reuse: the fill");
  tlrt_buffer_free(b);
  tlrt_buffer_free(c);
  cuda_ok(cudaEventDestroy(after), "cudaEventDestroy");
  cuda_ok(cudaStreamDestroy(h1), "cudaStreamDestroy");
  cuda_ok(cudaStreamDestroy(h2), "cudaStreamDestroy");
}

// ---- events -------------------------------------------------------------------------------------

void test_events() {
  cudaStream_t own = as_stream(own_stream());
  cudaStream_t p = nullptr;
  cuda_ok(cudaStreamCreateWithFlags(&p, cudaStreamNonBlocking), "cudaStreamCreate");
  cudaEvent_t e = nullptr, after = nullptr;
  cuda_ok(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate");
  cuda_ok(cudaEventCreateWithFlags(&after, cudaEventDisableTiming), "cudaEventCreate");
  tlrt_buffer *x = nullptr, *y = nullptr, *z = nullptr;
  ok(tlrt_buffer_full(kDev, 4096, 2.0, &x), "events: x");
  ok(tlrt_synchronize(kDev), "events: synchronize");

  // Host -> library: the library's own stream waits for the host's event.
  close_gate(p);
  cuda_ok(cudaEventRecord(e, p), "cudaEventRecord");
  ok(tlrt_stream_wait_event(kDev, e), "events: tlrt_stream_wait_event");
  ok(tlrt_add(x, x, &y), "events: y = x + x after the host's event");
  ok(tlrt_stream_record_event(kDev, after), "events: record after y");
  settle();
  expect(pending(own) && pending(after), "events: the library waits for the host's event");
  open_gate();
  ok(tlrt_synchronize(kDev), "events: synchronize");
  expect(done(after), "events: the library's work ran after the event");

  // Library -> host: a host stream waits for the library's work (held by a gate on the own stream).
  HostFlag mark;
  close_gate(own);  // the host may queue its own work on the library's stream
  ok(tlrt_add(y, x, &z), "events: z = y + x behind the gate");
  ok(tlrt_stream_wait_for_library(kDev, p), "events: tlrt_stream_wait_for_library");
  mark_kernel<<<1, 1, 0, p>>>(mark.dev);
  cuda_ok(cudaGetLastError(), "mark launch");
  settle();
  expect(mark.get() == 0 && pending(p), "events: the host stream waits for the library");
  open_gate();
  cuda_ok(cudaStreamSynchronize(p), "cudaStreamSynchronize");
  expect(mark.get() == 1, "events: then the host kernel ran");
  expect(idle(own), "events: the library's work finished before the host kernel");
  // The current stream itself: nothing to queue.
  ok(tlrt_stream_wait_for_library(kDev, own), "events: wait_for_library on the current stream");

  const std::vector<float> vz = download(z);
  expect(vz.size() == 4096 && vz[0] == 6.0f && vz[4095] == 6.0f, "events: values");
  for (tlrt_buffer *b : {x, y, z}) tlrt_buffer_free(b);
  cuda_ok(cudaEventDestroy(e), "cudaEventDestroy");
  cuda_ok(cudaEventDestroy(after), "cudaEventDestroy");
  cuda_ok(cudaStreamDestroy(p), "cudaStreamDestroy");
}

// ---- legacy -------------------------------------------------------------------------------------

void test_legacy() {
  void *legacy = reinterpret_cast<void *>(uintptr_t{TLRT_CUDA_STREAM_LEGACY});
  cudaStream_t own = as_stream(own_stream());
  cudaEvent_t after = nullptr;
  cuda_ok(cudaEventCreateWithFlags(&after, cudaEventDisableTiming), "cudaEventCreate");
  tlrt_buffer *x = nullptr, *y = nullptr;
  ok(tlrt_buffer_full(kDev, 4096, 1.5, &x), "legacy: x");
  close_gate(cudaStreamLegacy);
  ok(tlrt_stream_set(kDev, legacy), "legacy: set");
  expect(own_stream() == legacy, "legacy: tlrt_stream_get returns TLRT_CUDA_STREAM_LEGACY");
  ok(tlrt_mul(x, x, &y), "legacy: y = x * x");
  ok(tlrt_stream_record_event(kDev, after), "legacy: record");
  settle();
  expect(pending(after), "legacy: queued behind the gate on the legacy stream");
  expect(idle(own), "legacy: the library's own (non-blocking) stream is idle");
  open_gate();
  ok(tlrt_synchronize(kDev), "legacy: synchronize");
  ok(tlrt_stream_set(kDev, nullptr), "legacy: back");
  const std::vector<float> vy = download(y);
  expect(vy.size() == 4096 && vy[0] == 2.25f && vy[4095] == 2.25f, "legacy: values");
  tlrt_buffer_free(x);
  tlrt_buffer_free(y);
  cuda_ok(cudaEventDestroy(after), "cudaEventDestroy");
}

// ---- errors -------------------------------------------------------------------------------------

void test_errors() {
  void *own = own_stream();
  void *per_thread = reinterpret_cast<void *>(uintptr_t{TLRT_CUDA_STREAM_PER_THREAD});
  expect(tlrt_stream_set(kDev, per_thread) == TLRT_ERR_UNSUPPORTED,
         "errors: the per-thread stream is refused");
  expect(own_stream() == own, "errors: a refused switch changes nothing");
  uint32_t count = 0;
  ok(tlrt_device_count(TLRT_DEVICE_KIND_CUDA, &count), "device count");
  if (count < 2) {
    std::printf("host_stream: one GPU; the cross-device refusals are not exercised\n");
    return;
  }
  cudaStream_t other = nullptr;
  cudaEvent_t other_event = nullptr;
  cuda_ok(cudaSetDevice(1), "cudaSetDevice(1)");
  cuda_ok(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking), "cudaStreamCreate (dev 1)");
  cuda_ok(cudaEventCreateWithFlags(&other_event, cudaEventDisableTiming), "cudaEventCreate");
  cuda_ok(cudaSetDevice(0), "cudaSetDevice(0)");
#if CUDART_VERSION >= 12080
  const tlrt_status s = tlrt_stream_set(kDev, other);
  expect(s == TLRT_ERR_INVALID_ARGUMENT, "errors: a stream of device 1 is refused for device 0");
#endif
  expect(own_stream() == own, "errors: still the own stream");
  expect(tlrt_stream_record_event(kDev, other_event) == TLRT_ERR_CUDA,
         "errors: an event of device 1 is refused for device 0");
  // Waiting across devices is allowed (cudaStreamWaitEvent takes another device's event).
  ok(tlrt_stream_wait_event(kDev, other_event), "errors: wait for device 1's event");
  ok(tlrt_stream_wait_for_library(kDev, other), "errors: device 1's stream waits for device 0");
  ok(tlrt_synchronize(kDev), "errors: synchronize");
  cuda_ok(cudaSetDevice(1), "cudaSetDevice(1)");
  cuda_ok(cudaStreamSynchronize(other), "cudaStreamSynchronize (dev 1)");
  cuda_ok(cudaEventDestroy(other_event), "cudaEventDestroy");
  cuda_ok(cudaStreamDestroy(other), "cudaStreamDestroy");
  cuda_ok(cudaSetDevice(0), "cudaSetDevice(0)");
}

}  // namespace

int main() {
  if (tlrt_runtime_status() != TLRT_RUNTIME_CUDA_READY) {
    std::printf("host_stream: skipped (no usable CUDA device)\n");
    return 77;
  }
  cuda_ok(cudaSetDevice(0), "cudaSetDevice");
  g_gate = new HostFlag;
  std::signal(SIGALRM, [](int) {
    if (g_gate) g_gate->set(1);
    std::printf("FAIL host_stream: hung for 120 s (a hidden host synchronisation?)\n");
    std::_Exit(1);
  });
  alarm(120);
  test_own();
  test_chain();
  test_reuse();
  test_events();
  test_legacy();
  test_errors();
  ok(tlrt_synchronize(kDev), "final synchronize");
  std::printf("host_stream: %d checks, %d failures\n", checks, failures);
  return failures == 0 ? 0 : 1;
}
