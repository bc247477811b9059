// A CPU emulator for CUDA kernels written in the plain subset used by cuda/kernels/*.cuh: it lets
// the CPU build run the very kernel source of a CUDA family and compare it bit for bit with the
// stub, so index arithmetic, boundary tiles, barriers and asynchronous copies are checked on
// machines without a GPU. It is not a performance model.
//
// Each block runs as blockDim.x fibers on the calling thread (on x86-64 a register-only stack
// switch, below; elsewhere ucontext, whose every switch is a sigprocmask system call). A fiber runs until it
// reaches __syncthreads() (released when every thread of the block has arrived), a warp shuffle
// (released when the 32 lanes of its warp have arrived), or its end; between those points its
// code runs atomically. The order in which runnable fibers are resumed is a policy (ascending,
// descending, or seeded random, fresh each round), and so is the completion of cp.async copies:
// Early (at issue) or Late (at the issuing thread's cp_async_wait). A kernel that is correct for
// every schedule CUDA allows gives the same bits under every policy; a missing barrier or wait,
// or a read of shared memory that no thread wrote (dynamic shared memory starts as a NaN pattern
// in every block), shows up as a difference from the reference. A barrier that some thread
// never reaches is reported as a deadlock (std::runtime_error).
//
// Include this header, then define TLRT_CUDA_EMULATION before including the kernel header (the
// kernel header takes its cp.async and shared-memory primitives from here instead of PTX, and
// checks the alignment of its float4 accesses with emu::check_aligned).
#pragma once

#include <ucontext.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <exception>
#include <functional>
#include <random>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
// Static shared memory: one object per kernel instantiation, shared by the fibers of the block that
// runs (blocks run one after another). Unlike the dynamic kind it is not refilled with NaN.
#define __shared__ static

struct dim3 {
  unsigned x, y, z;
  dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};
struct uint3 {
  unsigned x, y, z;
};
struct alignas(16) float4 {
  float x, y, z, w;
};
inline float4 make_float4(float x, float y, float z, float w) { return float4{x, y, z, w}; }

inline uint3 threadIdx, blockIdx;
inline dim3 blockDim, gridDim;

inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
inline float __fdiv_rn(float a, float b) { return a / b; }

namespace emu {

enum class Order { Ascending, Descending, Random };
enum class Copy { Early, Late };

struct Policy {
  Order order = Order::Ascending;
  Copy copy = Copy::Late;
  uint64_t seed = 1;
  // The order in which the blocks of a grid run (each to its end before the next starts): raster
  // order (x fastest), its reverse, or a seeded shuffle. Kernels that hand out tickets (the last
  // block to arrive finishes the work) see a different last block under each.
  Order blocks = Order::Ascending;
};

namespace detail {

enum class St { Run, Barrier, Shfl, Done };

struct PendingCopy {
  void *dst;
  const void *src;
  unsigned bytes, src_bytes;
  unsigned group;
};

// Ctx: a suspended fiber (or the scheduler). ctx_make prepares one to start in `entry` on its own
// stack; ctx_switch(from, to) suspends the caller into `from` and resumes `to`.
#if defined(__x86_64__) && !defined(TLRT_EMU_UCONTEXT)
// Saves the SysV callee-saved registers, MXCSR and the x87 control word on the running stack,
// stores the stack pointer in *from, loads `to` and restores the same from there. Weak, so that
// every test translation unit may carry its copy.
extern "C" void tlrt_emu_switch(void **from, void *to);
asm(R"(
  .text
  .weak tlrt_emu_switch
  .type tlrt_emu_switch, @function
tlrt_emu_switch:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  subq $8, %rsp
  stmxcsr (%rsp)
  fnstcw 4(%rsp)
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  ldmxcsr (%rsp)
  fldcw 4(%rsp)
  addq $8, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
  .size tlrt_emu_switch, .-tlrt_emu_switch
)");
struct Ctx {
  void *sp = nullptr;
};
inline void ctx_switch(Ctx &from, Ctx &to) { tlrt_emu_switch(&from.sp, to.sp); }
// The new stack as tlrt_emu_switch leaves a suspended one: from the 16-byte aligned top down, a
// null return address (entry never returns), entry's address, six zero registers, then the
// caller's MXCSR and x87 control word. After the final ret, rsp % 16 == 8, as at any call.
inline void ctx_make(Ctx &c, char *stack, size_t size, void (*entry)()) {
  auto top = reinterpret_cast<uintptr_t>(stack + size) & ~uintptr_t(15);
  auto *w = reinterpret_cast<uint64_t *>(top);
  w[-1] = 0;
  w[-2] = reinterpret_cast<uint64_t>(entry);
  for (int i = 3; i <= 8; ++i) w[-i] = 0;
  uint32_t csr;
  uint16_t cw;
  asm volatile("stmxcsr %0" : "=m"(csr));
  asm volatile("fnstcw %0" : "=m"(cw));
  std::memcpy(reinterpret_cast<char *>(w - 9), &csr, 4);
  std::memcpy(reinterpret_cast<char *>(w - 9) + 4, &cw, 2);
  c.sp = w - 9;
}
#else
struct Ctx {
  ucontext_t uc;
};
inline void ctx_switch(Ctx &from, Ctx &to) { swapcontext(&from.uc, &to.uc); }
inline void ctx_make(Ctx &c, char *stack, size_t size, void (*entry)()) {
  getcontext(&c.uc);
  c.uc.uc_stack.ss_sp = stack;
  c.uc.uc_stack.ss_size = size;
  c.uc.uc_link = nullptr;
  makecontext(&c.uc, entry, 0);
}
#endif

struct Fiber {
  Ctx ctx;
  char *stack = nullptr;
  St st = St::Run;
  unsigned parity = 0;     // alternating shuffle slot
  unsigned committed = 0;  // cp.async groups committed so far
  uint64_t mma_calls = 0;  // wmma::mma_sync calls so far (the warp's lanes share the results)
  std::vector<PendingCopy> pending;
};

// One mma_sync result of a warp, kept until its 32 lanes have taken it (the lanes make the same
// calls in the same order; a lane whose operands differ computes its own).
struct MmaMemo {
  std::vector<float> in, out;
  unsigned uses = 0;
};

struct Block {
  std::vector<Fiber> fibers;
  std::vector<std::vector<std::pair<uint64_t, MmaMemo>>> mma_memo;  // per warp
  std::vector<float> slots;  // [warp][parity][lane]
  Ctx sched;
  unsigned cur = 0;
  std::function<void()> body;
  std::exception_ptr error;  // thrown by a fiber (check_aligned, ...): rethrown by run_block
  Policy policy;
};

inline Block &block() {
  static Block b;
  return b;
}

inline std::vector<float4> &smem_store() {
  static std::vector<float4> s;
  return s;
}

constexpr size_t kStack = 512 * 1024;

inline void set_thread(unsigned t) {
  block().cur = t;
  threadIdx = uint3{t % blockDim.x, 0, 0};
}

inline void yield_to_scheduler() {
  Block &b = block();
  ctx_switch(b.fibers[b.cur].ctx, b.sched);
}

// A fiber's first frame. An exception must not unwind past it (there is no caller): it is kept
// for run_block, which abandons the block and rethrows it on the scheduler's stack.
inline void trampoline() {
  Block &b = block();
  try {
    b.body();
  } catch (...) {
    b.error = std::current_exception();
  }
  b.fibers[b.cur].st = St::Done;
  ctx_switch(b.fibers[b.cur].ctx, b.sched);
  std::abort();  // a finished fiber is never resumed
}

inline void perform(const PendingCopy &c) {
  std::memcpy(c.dst, c.src, c.src_bytes);
  std::memset(static_cast<char *>(c.dst) + c.src_bytes, 0, c.bytes - c.src_bytes);
}

inline void run_block(unsigned nthreads) {
  Block &b = block();
  if (b.fibers.size() < nthreads) b.fibers.resize(nthreads);
  b.slots.assign((nthreads + 31) / 32 * 64, 0.0f);
  b.mma_memo.assign((nthreads + 31) / 32, {});
  for (unsigned t = 0; t < nthreads; ++t) {
    Fiber &f = b.fibers[t];
    if (!f.stack) f.stack = new char[kStack];
    f.st = St::Run;
    f.parity = 0;
    f.committed = 0;
    f.mma_calls = 0;
    f.pending.clear();
    ctx_make(f.ctx, f.stack, kStack, trampoline);
  }
  std::mt19937_64 rng(b.policy.seed ^ (uint64_t(blockIdx.x) << 20) ^ (uint64_t(blockIdx.y) << 40));
  std::vector<unsigned> order(nthreads);
  for (unsigned done = 0;;) {
    for (unsigned t = 0; t < nthreads; ++t) order[t] = t;
    if (b.policy.order == Order::Descending) std::reverse(order.begin(), order.end());
    if (b.policy.order == Order::Random) std::shuffle(order.begin(), order.end(), rng);
    bool progress = false;
    for (unsigned t : order) {
      if (b.fibers[t].st != St::Run) continue;
      set_thread(t);
      ctx_switch(b.sched, b.fibers[t].ctx);
      if (b.error) std::rethrow_exception(std::exchange(b.error, nullptr));
      progress = true;
    }
    done = 0;
    unsigned at_barrier = 0;
    for (unsigned t = 0; t < nthreads; ++t) {
      done += b.fibers[t].st == St::Done;
      at_barrier += b.fibers[t].st == St::Barrier;
    }
    if (done == nthreads) break;
    if (at_barrier == nthreads) {
      for (auto &f : b.fibers) f.st = St::Run;
      continue;
    }
    if (done != 0 && at_barrier != 0)
      throw std::runtime_error("emu: __syncthreads() after some threads of the block returned");
    bool released = false;
    for (unsigned w = 0; w * 32 < nthreads; ++w) {
      const unsigned lo = w * 32, hi = std::min(nthreads, lo + 32);
      bool all = true;
      for (unsigned t = lo; t < hi; ++t) all = all && b.fibers[t].st == St::Shfl;
      if (!all) continue;
      for (unsigned t = lo; t < hi; ++t) b.fibers[t].st = St::Run;
      released = true;
    }
    if (!progress && !released) throw std::runtime_error("emu: deadlock (a barrier is never met)");
  }
}

}  // namespace detail

// Runs `body` (a call of the kernel with its arguments) for every block of the grid under the
// policy (blocks in the order policy.blocks), with `smem_bytes` of dynamic shared memory starting
// as a NaN pattern in each block.
inline void launch(const Policy &policy, dim3 grid, dim3 threads, size_t smem_bytes,
                   std::function<void()> body) {
  detail::Block &b = detail::block();
  b.policy = policy;
  b.body = std::move(body);
  gridDim = grid;
  blockDim = threads;
  auto run = [&](unsigned x, unsigned y) {
    blockIdx = uint3{x, y, 0};
    auto &s = detail::smem_store();
    s.assign((smem_bytes + 15) / 16 + 8, float4{NAN, NAN, NAN, NAN});  // + alignment slack
    detail::run_block(threads.x);
  };
  if (policy.blocks == Order::Ascending) {
    for (unsigned y = 0; y < grid.y; ++y)
      for (unsigned x = 0; x < grid.x; ++x) run(x, y);
    return;
  }
  std::vector<uint64_t> order((uint64_t)grid.x * grid.y);
  for (uint64_t i = 0; i < order.size(); ++i) order[i] = i;
  if (policy.blocks == Order::Descending) std::reverse(order.begin(), order.end());
  if (policy.blocks == Order::Random) {
    std::mt19937_64 rng(policy.seed * 0x9E3779B97F4A7C15ull + 1);
    std::shuffle(order.begin(), order.end(), rng);
  }
  for (uint64_t i : order) run((unsigned)(i % grid.x), (unsigned)(i / grid.x));
}

// A misaligned vector access or 16-byte copy faults on the GPU: here it throws.
inline void check_aligned(const void *p, uintptr_t bytes) {
  if (reinterpret_cast<uintptr_t>(p) % bytes != 0)
    throw std::runtime_error("emu: misaligned " + std::to_string(bytes) + "-byte access");
}

}  // namespace emu

inline void __syncthreads() {
  auto &b = emu::detail::block();
  b.fibers[b.cur].st = emu::detail::St::Barrier;
  emu::detail::yield_to_scheduler();
}

inline float __shfl_xor_sync(unsigned, float v, int lane_mask) {
  auto &b = emu::detail::block();
  auto &f = b.fibers[b.cur];
  const unsigned lane = b.cur % 32, warp = b.cur / 32;
  float *slot = &b.slots[(warp * 2 + f.parity) * 32];
  slot[lane] = v;
  f.st = emu::detail::St::Shfl;
  emu::detail::yield_to_scheduler();
  f.parity ^= 1u;
  return slot[lane ^ (unsigned)lane_mask];
}

// Warp barrier: released when the 32 lanes of the warp have arrived (as a shuffle).
inline void __syncwarp(unsigned mask = 0xffffffffu) { (void)__shfl_xor_sync(mask, 0.0f, 0); }

// Global-memory atomics and fences: a fiber runs atomically between barriers, and blocks run one
// after another, so plain operations are exact here.
inline unsigned atomicAdd(unsigned *p, unsigned v) {
  const unsigned o = *p;
  *p = o + v;
  return o;
}
inline unsigned atomicExch(unsigned *p, unsigned v) {
  const unsigned o = *p;
  *p = v;
  return o;
}
inline void __threadfence() {}
inline float __ldcg(const float *p) { return *p; }
inline float4 __ldg(const float4 *p) {
  emu::check_aligned(p, 16);
  return *p;
}
inline unsigned __float_as_uint(float f) {
  unsigned u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float __uint_as_float(unsigned u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// The exchange of __shfl_xor_sync for the other shuffles the row kernels use: every lane stores
// its value, waits for its warp, then reads the source lane's.
inline float emu_shfl(float v, unsigned src_of_lane_fn(unsigned, unsigned), unsigned arg) {
  auto &b = emu::detail::block();
  auto &f = b.fibers[b.cur];
  const unsigned lane = b.cur % 32, warp = b.cur / 32;
  float *slot = &b.slots[(warp * 2 + f.parity) * 32];
  slot[lane] = v;
  f.st = emu::detail::St::Shfl;
  emu::detail::yield_to_scheduler();
  f.parity ^= 1u;
  const unsigned src = src_of_lane_fn(lane, arg);
  return src < 32 ? slot[src] : v;
}

// Within segments of `width` lanes (a power of two <= 32), as on the GPU: lane + delta, or the
// caller's own value past the end of its segment; the segment's lane src_lane.
inline float __shfl_down_sync(unsigned, float v, unsigned delta, int width = 32) {
  const unsigned arg = delta | ((unsigned)width << 8);
  return emu_shfl(
      v,
      [](unsigned lane, unsigned a) {
        const unsigned d = a & 0xFFu, w = a >> 8;
        return (lane % w) + d < w ? lane + d : lane;
      },
      arg);
}

inline float __shfl_sync(unsigned, float v, int src_lane, int width = 32) {
  const unsigned arg = ((unsigned)src_lane & 0xFFu) | ((unsigned)width << 8);
  return emu_shfl(
      v,
      [](unsigned lane, unsigned a) {
        const unsigned s = a & 0xFFu, w = a >> 8;
        return (lane & ~(w - 1u)) + s % w;
      },
      arg);
}

// Shuffles of other 4- and 8-byte types (unsigned, uint64_t, double: the selection and clipping
// kernels of cuda/kernels/select.cuh and clip.cuh), as one float shuffle per 32-bit word.
template <class T, class F>
inline T emu_shfl_words(T v, F one) {
  static_assert(sizeof(T) % 4 == 0, "emu: shuffle of a type of 4 n bytes");
  uint32_t w[sizeof(T) / 4];
  std::memcpy(w, &v, sizeof(T));
  for (auto &x : w) x = __float_as_uint(one(__uint_as_float(x)));
  std::memcpy(&v, w, sizeof(T));
  return v;
}
template <class T, class = std::enable_if_t<!std::is_same<T, float>::value>>
inline T __shfl_down_sync(unsigned m, T v, unsigned delta, int width = 32) {
  return emu_shfl_words(v, [&](float f) { return __shfl_down_sync(m, f, delta, width); });
}
template <class T, class = std::enable_if_t<!std::is_same<T, float>::value>>
inline T __shfl_sync(unsigned m, T v, int src_lane, int width = 32) {
  return emu_shfl_words(v, [&](float f) { return __shfl_sync(m, f, src_lane, width); });
}
// Lane - delta within segments of `width` lanes, the caller's own value before the segment start.
template <class T>
inline T __shfl_up_sync(unsigned, T v, unsigned delta, int width = 32) {
  const unsigned arg = delta | ((unsigned)width << 8);
  return emu_shfl_words(v, [&](float f) {
    return emu_shfl(
        f,
        [](unsigned lane, unsigned a) {
          const unsigned d = a & 0xFFu, w = a >> 8;
          return (lane % w) >= d ? lane - d : lane;
        },
        arg);
  });
}
inline float __ldg(const float *p) { return *p; }
// IEEE operations with the rounding the names state (the host's default: round to nearest).
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dsqrt_rn(double a) { return std::sqrt(a); }
inline float __double2float_rn(double a) { return (float)a; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fadd_rn(float a, float b) { return a + b; }

namespace tlrt {
namespace cuda {
namespace async {

// The same interface as cuda/common/cp_async.cuh. 128-byte aligned, as the GPU's (WMMA needs 32).
inline float *dynamic_smem() {
  const uintptr_t a = reinterpret_cast<uintptr_t>(emu::detail::smem_store().data());
  return reinterpret_cast<float *>((a + 127) & ~uintptr_t(127));
}

inline void copy(float *dst, const float *src, unsigned bytes, bool valid) {
  emu::check_aligned(dst, bytes);
  emu::check_aligned(src, bytes);
  auto &b = emu::detail::block();
  auto &f = b.fibers[b.cur];
  const emu::detail::PendingCopy c{dst, src, bytes, valid ? bytes : 0u, f.committed};
  if (b.policy.copy == emu::Copy::Early)
    emu::detail::perform(c);
  else
    f.pending.push_back(c);
}
inline void copy16(float *dst, const float *src, bool valid) { copy(dst, src, 16, valid); }
inline void copy4(float *dst, const float *src, bool valid) { copy(dst, src, 4, valid); }

inline void commit() {
  auto &b = emu::detail::block();
  ++b.fibers[b.cur].committed;
}

template <unsigned N>
inline void wait() {
  auto &b = emu::detail::block();
  auto &f = b.fibers[b.cur];
  std::vector<emu::detail::PendingCopy> keep;
  for (const auto &c : f.pending)
    if (c.group + N < f.committed)
      emu::detail::perform(c);
    else
      keep.push_back(c);
  f.pending.swap(keep);
}

}  // namespace async
}  // namespace cuda
}  // namespace tlrt

// A minimal WMMA (nvcuda::wmma, float / tf32 fragments only) for kernels such as
// cuda/kernels/attention_tc.cuh. Every lane's fragment holds the whole tile (x[r * C + c] is
// element (r, c); num_elements = R * C), so element-wise loops over num_elements act on the whole
// tile in each lane alike. load_matrix_sync reads the whole tile when the lane calls it;
// store_matrix_sync writes only the elements e with e % 32 == lane, so a read of a tile before
// the writing lanes are past a __syncwarp shows up as stale data (NaN pattern or an older tile)
// under some schedule. mma_sync takes its a and b operands as the hardware does (the low 13 bits
// of each float ignored: a missing conversion costs accuracy, as on the GPU) and rounds each
// result element once from a float64 sum. Pointers must be 32-byte aligned and ldm a multiple of
// 4, as for CUDA.
namespace nvcuda {
namespace wmma {

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
namespace precision {
struct tf32 {};
}  // namespace precision
enum layout_t { mem_row_major, mem_col_major };

template <class Use, int M, int N, int K>
struct frag_shape;
template <int M, int N, int K>
struct frag_shape<matrix_a, M, N, K> {
  static constexpr int R = M, C = K;
};
template <int M, int N, int K>
struct frag_shape<matrix_b, M, N, K> {
  static constexpr int R = K, C = N;
};
template <int M, int N, int K>
struct frag_shape<accumulator, M, N, K> {
  static constexpr int R = M, C = N;
};

template <class Use, int M, int N, int K, class T, class Layout = void>
struct fragment {
  static constexpr int R = frag_shape<Use, M, N, K>::R, C = frag_shape<Use, M, N, K>::C;
  enum { num_elements = R * C };
  float x[R * C];
};

inline float __float_to_tf32(float x) {
  if (!std::isfinite(x)) return x;
  uint32_t u;
  std::memcpy(&u, &x, 4);
  u = (u + 0x1000u) & ~0x1fffu;  // nearest, ties away from zero (sign-magnitude)
  std::memcpy(&x, &u, 4);
  return x;
}

namespace detail {
inline void check(const void *p, unsigned ldm) {
  emu::check_aligned(p, 32);
  if (ldm % 4 != 0) throw std::runtime_error("emu: wmma ldm not a multiple of 4");
}
// What the tensor cores use of an operand: the top 19 bits.
inline double tf32_operand(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  if (std::isfinite(x)) u &= ~0x1fffu;
  std::memcpy(&x, &u, 4);
  return x;
}
}  // namespace detail

template <class Use, int M, int N, int K, class T, class Layout>
inline void load_matrix_sync(fragment<Use, M, N, K, T, Layout> &f, const float *p, unsigned ldm) {
  detail::check(p, ldm);
  using F = fragment<Use, M, N, K, T, Layout>;
  constexpr bool col = std::is_same<Layout, col_major>::value;
  for (int r = 0; r < F::R; ++r)
    for (int c = 0; c < F::C; ++c) f.x[r * F::C + c] = col ? p[c * ldm + r] : p[r * ldm + c];
}

template <int M, int N, int K>
inline void load_matrix_sync(fragment<accumulator, M, N, K, float> &f, const float *p,
                             unsigned ldm, layout_t layout) {
  detail::check(p, ldm);
  for (int r = 0; r < M; ++r)
    for (int c = 0; c < N; ++c)
      f.x[r * N + c] = layout == mem_col_major ? p[c * ldm + r] : p[r * ldm + c];
}

template <int M, int N, int K>
inline void store_matrix_sync(float *p, const fragment<accumulator, M, N, K, float> &f,
                              unsigned ldm, layout_t layout) {
  detail::check(p, ldm);
  const unsigned lane = threadIdx.x % 32;
  for (int e = (int)lane; e < M * N; e += 32) {
    const int r = e / N, c = e % N;
    (layout == mem_col_major ? p[c * ldm + r] : p[r * ldm + c]) = f.x[e];
  }
}

template <class Use, int M, int N, int K, class T, class Layout>
inline void fill_fragment(fragment<Use, M, N, K, T, Layout> &f, float v) {
  for (auto &e : f.x) e = v;
}

template <int M, int N, int K, class T, class LA, class LB>
inline void mma_sync(fragment<accumulator, M, N, K, float> &d,
                     const fragment<matrix_a, M, N, K, T, LA> &a,
                     const fragment<matrix_b, M, N, K, T, LB> &b,
                     const fragment<accumulator, M, N, K, float> &c) {
  auto &blk = emu::detail::block();
  auto &memo = blk.mma_memo[blk.cur / 32];
  const uint64_t call = blk.fibers[blk.cur].mma_calls++;
  std::vector<float> in(a.x, a.x + M * K);
  in.insert(in.end(), b.x, b.x + K * N);
  in.insert(in.end(), c.x, c.x + M * N);
  for (size_t e = 0; e < memo.size(); ++e)
    if (memo[e].first == call &&
        std::memcmp(memo[e].second.in.data(), in.data(), in.size() * 4) == 0) {
      std::memcpy(d.x, memo[e].second.out.data(), M * N * 4);
      if (++memo[e].second.uses == 32) memo.erase(memo.begin() + e);
      return;
    }
  float res[M * N];
  for (int r = 0; r < M; ++r)
    for (int col = 0; col < N; ++col) {
      double s = c.x[r * N + col];
      for (int t = 0; t < K; ++t)
        s += detail::tf32_operand(a.x[r * K + t]) * detail::tf32_operand(b.x[t * N + col]);
      res[r * N + col] = (float)s;
    }
  std::memcpy(d.x, res, sizeof res);
  memo.push_back({call, emu::detail::MmaMemo{std::move(in), std::vector<float>(res, res + M * N), 1}});
}

}  // namespace wmma
}  // namespace nvcuda
