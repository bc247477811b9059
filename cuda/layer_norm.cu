// CUDA backend, fused layer normalisation, forward and backward: the definitions of
// abi/tlrt_layer_norm.h with the formulas of core/numerics/row_ops.hpp and THE TREE of
// core/numerics/reduce_tree.hpp, bit for bit the CPU's. Built with -fmad=false; divisions, square
// roots and reciprocals are the correctly rounded __fdiv_rn / __fsqrt_rn / __frcp_rn; no atomics
// on data (the wide finish's tickets count on counters); everything on the library stream. All
// grid sizes are capped at 2^31 - 1 blocks (kernels loop).
//
// FORWARD (bytes: x read, y written = 8 per element, plus 8 per row for mean and inv_std; gamma and
// beta are re-read per row from L1/L2):
// seg_fwd (cols <= 32; cuda/kernels/layer_norm.cuh): a segment of W = pow2_at_least(cols) lanes
// per row (lane j = element j; warps read runs of rows, coalesced), sums by red::small<W> across
// the segment (shuffles, the same additions in the same order). Before (2026-11-22): one thread per
// row (strided reads), 0.51 of copy bandwidth at 8 columns. PREDICTION: ~0.8. Measured (H100,
// 2026-11-24, bench/results/2026-11-24-h100-softmax-fused.md): 0.397 -> 0.252 ms at (8388608, 8),
// 0.80 of copy bandwidth (0.02x PyTorch's 12.213 ms): the prediction held.
// group_fwd (32 < cols <= 8192): one group of NT threads per row (NT = 32 up to 1024 columns, then
// 64, 128, 256 as cols doubles), the row in registers (<= 32 values per thread; lane layout and
// reductions of row::dev, as in cuda/softmax.cu): S(x) -> mean, S((x - mean)^2) -> var -> inv_std,
// then y written from registers; one barrier per reduction when NT > 32. Predicted: ~90% of copy
// bandwidth on (65536, 1024) and (16384, 4096) (a handful of instructions per element).
// Measured (H100, 2026-11-24): 0.96 / 0.97 (0.87x / 0.68x PyTorch).
// split_fwd (8192 < cols <= 65536; session 7; cuda/kernels/layer_norm.cuh, cuda/common/split_row.cuh, as
// cuda/softmax.cu's long rows): the row in REGISTERS, x read once: up to 16384 columns one
// 512-thread block per row (Q = 2 groups of 256 threads, NCL = 2 chunks each, 32 values per
// thread, 2 rows per SM); above, a thread-block cluster of Q = 4 blocks of 256 threads
// (distributed shared memory for the chunk values; NCL = 2 up to 32768, NCL = 4 up to 65536).
// Two tree sums per row (S(x), S((x - mean)^2)): two block + two group-wide barriers. Bytes: 8
// per element (+ gamma and beta from L1 / L2). Clusters only on compute capability >= 9
// (split_row::split_has_clusters): without them rows over 16384 columns take the chunk passes.
// It replaces block_row_fwd (one 256-thread block per row walking the row three times, the second
// and third reads from L2; up to 16384 columns): 0.68 of copy bandwidth at (4096, 16384), 0.39 at
// (1024, 65536), where the chunk passes (0.46) stayed. PREDICTION: ~0.85 of copy bandwidth at
// (4096, 16384), ~0.75 at (1024, 65536). Measured (H100, 2026-11-24): (4096, 16384) 0.260 ->
// 0.190 ms (0.94 of copy bandwidth; a 256-thread block of 4 chunks 0.187, a 1024-thread block
// 0.203, a cluster of 4 x 256 of 1 chunk 0.278: the 512-thread block kept); (1024, 65536) 0.389 ->
// 0.238 ms (0.75, 0.78x PyTorch; a cluster of 8 x 256 of 2 chunks 0.237, kept 4 x 256 of 4).
// (2048, 32768) was not measured.
// Longer rows: chunk-parallel passes (row::dev::chunk_reduce, one block per (row, 4096-chunk))
// with reduce_axis finishing the tree, then chunk_map writes y (16 bytes per element).
//
// BACKWARD (cols <= 4096), fused_group_bwd (now fused_pipe_bwd, below) / fused_seg_bwd
// (cuda/kernels/layer_norm.cuh): dx and
// the first levels of the column tree of dgamma / dbeta in ONE pass over dy and x. A block owns G
// lanes of one 4096-row chunk of the column tree (lanes t0 + S g, S = 256 / G; G = 256 / NT groups
// of NT threads; for cols <= 32 all 256 lanes, W of them per segment of W = pow2(cols) lanes, lane
// j of a segment holding column j: warps read runs of rows) and walks each lane's 16 rows in the
// tree's order: per row, d = dy * gamma and xhat in registers, S(d) and S(d * xhat) by the tree
// (one barrier), dx written; the same loads feed per-column lane accumulators (dy * xhat, dy) kept
// in registers. After its rows the block halves its G lanes per column in shared memory (the tree's
// steps h = 128 .. S) and writes one partial row per sequence: (nc, S, cols) partials, 2 * rows *
// cols / (16 G) floats. reduce_axis finishes the halving over S and the chunk level. Bytes: dy and
// x read once, dx written (12 per element) + 2 * 4 / (16 G) written and read back (G = 4 at 1024
// columns: 0.25 per element; G = 1 at 4096: 1). Registers (sm_90, -Xptxas -v): 108-128 for the
// group kernels (2 blocks of 256 threads per SM, 8 rows in flight per SM, 32 loads per thread
// issued before the first use), 61 at <= 256 columns; segment kernel: see below; no spills. Before
// (2026-11-22): dx kernel (12 bytes) + a separate lane_fold pass re-reading dy and x (8 bytes) +
// rows / 16 lane partials = ~20.5 bytes per element: 0.46 of copy bandwidth at every shape.
// PREDICTION: 12.25-13 bytes per element in one pass, ~0.85-0.9 of copy bandwidth on (65536, 1024)
// and (16384, 4096) (0.584 -> ~0.30 ms at 1024 columns, ~0.5x PyTorch's time), ~0.7-0.8 at 64
// columns (one row per warp at a time, 2 of 8 slots used) and ~0.8 at 8 columns (segments:
// coalesced, U = 4 rows' loads in flight per thread). Measured (H100, 2026-11-24,
// bench/results/2026-11-24-h100-softmax-fused.md): 0.71 of copy bandwidth at (65536, 1024) (0.61x
// PyTorch; was 0.46), 0.52 at (16384, 4096) (0.82x; one block of G = 1 lanes per 4096-row chunk
// leaves too few blocks), 0.54 at 64 columns, 0.76 at 8: short of the 0.85 prediction; the
// partials and reduce_axis tail and 2 blocks per SM (108-128 registers) are the suspects.
// WHY 0.71 (2026-11-24 analysis, loads in flight per SM; HBM needs ~40-64 KB in flight per SM):
// fused_group_bwd holds a row in registers (108-128 registers: 2 blocks of 256 threads per SM, 8
// rows per SM at 1024 columns) and issues a row's loads only when the previous row is done: per row
// a group waits one full memory latency, then folds, reduces (a block-wide barrier for NT > 32,
// which lock-steps the block's groups) and writes dx with no load outstanding. So the 64 KB of
// loads per SM (8 rows x 8 KB of dy and x) are in flight only at the start of each row; averaged
// over a row it is well under the 40 KB HBM needs. At 4096 columns it is 2 rows (G = 1) per SM,
// the same 64 KB peak, plus the partials (G = 1: 2 * 4 / 16 bytes written and read back per
// element, ~8% of the 12) and 4 launches of reduce_axis: 0.52. The tail is not the main suspect
// at 1024 columns: the partials are 2% of the bytes (8 MB written, 8 MB read) and the 4 reduce_axis
// launches ~10 us of 379.
// NOW (fused_pipe_bwd, 32 < cols <= 4096): the same lanes, sums and partials (the same bits), but
// dy and x travel through a cp.async ring in shared memory, rows r + 1 .. r + P - 1 in flight while
// row r is reduced; the loads never wait for a barrier. 257..4096 columns: P = 3, 96 KiB ring, 2
// blocks per SM: 2 rows per group ahead = 128 KB in flight per SM at every width (16 rows of 8 KB
// at 1024 columns, 4 rows of 32 KB at 4096), continuously. <= 256 columns: P = 4-6 (5 rows of
// 512 B per group at 64 columns, 3 blocks of 8 groups: ~60 KB per SM). Other GPUs: sm_80 fits
// one 100 KB block per SM (64 KB in flight), sm_89 none (99 KB per block): the register kernel.
// PREDICTION: (65536, 1024) 0.379 -> ~0.31 ms, ~0.85 of copy bandwidth (kernel ~0.9, plus 2%
// partials and the reduce_axis launches); (32768, 2048) the same; (16384, 4096) 0.515 -> ~0.34 ms,
// ~0.8 (the G = 1 partials stay: ~8% of the bytes); 64 columns 0.54 -> ~0.7 (instruction-bound
// per 64-element row: shuffles and the ring bookkeeping per 512 bytes). Measured (H100,
// 2026-11-24, bench/results/2026-11-24-h100-softmax-pipe.md): (65536, 1024) 0.379 -> 0.343 ms,
// 0.71 -> 0.78 (0.55x PyTorch), (16384, 4096) 0.52 -> 0.74, 64 columns 0.54 -> 0.44: short of
// the prediction at 1024 columns and worse at 64 columns (next: the ring depth per width; the 64-
// column case may want the register kernel back).
// SESSION 7 (branch ln7), WHY 0.78 WITH 128 KB IN FLIGHT: the loads in flight are ample in the
// steady state, so the losses are at the edges of the work. (65536, 1024) is 1024 items (lane
// sets) of 64 rows x 8 KB for 264 resident blocks: every block ran ONE item of 16 steps and
// exited: its ring starts empty (the first step waits a whole loaded-memory latency, ~2-4 us
// with 30+ MB in flight device-wide, against ~45 us per item), ends in a drain (the last P - 1
// steps with nothing new issued, then the halving with no load outstanding), and the next block
// starts only after the exit. ~4 such edges per SM, ~5-8% of the time; plus the reduce_axis tail
// (4 launches, 16 MB at 1024 columns, 64 MB at 4096: 8% of the bytes there). CHANGES: (1) ONE
// RING ACROSS ITEMS on a persistent grid (kPipeBlocks blocks per SM; the kernel comment in
// cuda/kernels/layer_norm.cuh): the next item's first rows are in flight during the current
// item's last rows and halving (which uses the one idle stage), so the ring is filled once per
// block, not once per item; same bits (emulator test: both grids). (2) The dgamma / dbeta
// partials are one allocation, their level over S one reduce_axis launch (3 launches, not 4).
// (3) 33..128 columns back on the register kernel (0.54 against the ring's 0.44 at 64
// columns: instruction-bound per 64-element row). (4) 2049..4096 columns (one group per block,
// G = 1): a block takes lane sets t0 and t0 + 128 of a chunk in turn and adds their lane values
// in registers (the tree's step h = 128), so the partials are (nc, 128, cols): 32 MB instead of
// 64 MB written and read back at (16384, 4096), 4% of the bytes. Registers (sm_90, -Xptxas -v,
// no spills): fused_pipe_bwd 126 at 4096 columns merged (86 unmerged), 80 / 80 / 90 at 2048 /
// 1024 / 512, 72 for the short rings. PREDICTION: (65536, 1024) 0.343 -> ~0.32 ms (~0.84 of copy
// bandwidth, ~0.5x PyTorch), (16384, 4096) 0.362 -> ~0.33 (~0.81), 64 columns 0.611 -> ~0.50 ms
// (0.54, the register kernel's), 512 and 2048 columns as 1024. Measured (H100, 2026-11-24,
// whole op, bench/softmax.py): (65536, 1024) 0.347 ms persistent, 0.342 one block per item
// (0.78 of copy bandwidth); (16384, 4096) 0.355 / 0.352 (0.76); (1048576, 64) 0.611 -> 0.497
// (the register kernel: a win); (8192, 8192) 0.60. Kernel alone (bench/ln_bwd_probe.cu; copy
// 0.1799 ms): the persistent grid slower at every width; two ring stages (64 KiB, 3 blocks per
// SM) faster than three: 0.3140 ms at (65536, 1024) (0.859), 0.3271 at (16384, 4096) (0.825);
// the register kernel faster up to 256 columns (0.2898 against 0.3029 at (262144, 256)).
// SO (session 7, second step; ln_kernels::BwdPlan has the figures): no persistent grid (removed),
// P = 2 stages at 257..4096 columns, the register kernel at 33..256, lane sets not merged (the
// merge was timed only on the persistent grid). PREDICTION: the kernel as the probe's P = 2
// (0.314 ms at 1024 columns, 0.327 at 4096), the whole op ~0.332 / ~0.345 with the reduce_axis
// tail as it was. Measured (H100, 2026-11-24, whole op): (65536, 1024) 0.342 -> 0.333 ms (0.78 ->
// 0.81 of copy bandwidth, 0.53x torch), (16384, 4096) 0.352 -> 0.350 (0.77), (1048576, 64) 0.611
// -> 0.497 (0.44 -> 0.55): the 0.85 target is not met; the kernel alone is at 0.86 (probe), the
// rest is the partials' tail. fused_group_bwd serves the short rows, the plan's pipelined = false
// and the probe (bench/ln_bwd_probe.cu).
// SESSIONS 8-9, THE TAIL (the ~14 us after the ring kernel at (65536, 1024): the one-launch
// fused_bwd_finish, 64 blocks of 4 dependent load batches, after a launch gap): a TICKETED TAIL in
// the ring kernel (each item, once its partial rows were written, fenced and took a ticket per
// level of 2^b lanes; the last arrival combined the level from L2 in place, the last level wrote
// dgamma / dbeta; the same bits), commit c8a79b8, was PREDICTED at 0.328 -> ~0.319 ms (65536,
// 1024) and 0.349 -> ~0.338 (16384, 4096). MEASURED (H100, 2026-11-27, bench/softmax.py, the same
// build; parity held with 2, 4 and 8 lanes per level): 0.339 / 0.344 ms (8 / 4 lanes per level)
// against 0.328, and 0.415 / 0.414 against 0.350: slower, so removed in session 9 (suspects: the
// fence and the two block barriers of every ticket stall the block's cp.async ring between
// items, and the last item's chain of dependent L2 levels outlasts the finish kernel). The 0.85
// target stays missed (0.82 / 0.77).
// SESSION 10, THE TAIL AGAIN, as its own launch: the wide finish (ln_kernels::
// fused_bwd_finish_wide): one dependent round of loads over 1024 blocks instead of 4 rounds over
// 64, the chunk level by the last ticket of each column tile (no ticket inside the ring kernel).
// MEASURED (H100, 2026-11-27): (65536, 1024) 0.327 -> 0.324 ms (0.83 of copy bandwidth),
// (16384, 4096) 0.350 -> 0.345 (0.78); H200 0.274 -> 0.269 / 0.291 -> 0.285: the default. And
// fused_group_bwd's SA form (lane accumulators in shared memory, 64 registers) at 257..512
// columns: (131072, 512) 0.317 -> 0.306 (0.84 -> 0.88). The 0.85 target at (65536, 1024) (<=
// 0.314 ms) is still missed by 3%: the ring kernel alone takes ~0.314.
// SESSION 15, THE RING KERNEL'S INSTRUCTIONS (no GPU time in that session: read from the SASS,
// emulated bit for bit; measured in session 16, below). What the figures say: the H200 (copy 4250
// GB/s) runs the whole op at (65536, 1024) in 0.269 ms, 0.70 of its copy bandwidth, only 1.2x the
// H100's 0.324 where the copy is 1.4x faster: the SM side holds it. And the SASS of
// fused_pipe_bwd<64, 4, 2> (1024 columns) has 1363 instructions per row step, 16 elements of dy and
// x per thread: ~85 per element for 12 bytes, ~1.35M warp instructions per SM for the op, an IPC of
// ~2.4 over the H100's ~0.314 ms: issue-bound. ~600 of the 1363 were produce()'s 32 cp.async
// copies: for every copy pair ptxas rebuilt the row index (item_row0, the lane set), the 64-bit
// element offset and the shared-memory window (S2UR SR_CgaCtaId, ULEA) inside the per-element `e <
// cols` branch (BSSY / BSYNC each), rematerialising rather than holding them at the 80-register
// cap. Now:
// (1) one base pointer per row and array (element i of thread T is off(0, i) + T, the offsets
// compile-time constants), (2) the copies without a branch (past the row's end a cp.async of 0
// bytes, whose slot is never read), (3) FULL (cols == the layout's width: 512, 1024, 2048, 4096
// columns) drops the per-element bounds tests everywhere. Row step, static SASS (sm_90, ptxas -v:
// no spill, registers 77-80 for 2 stages, as before): FULL 1363 -> 737 instructions (FADD 154,
// FMUL 144, LDS 103, LDG 34 (gamma, L1), LDGSTS 32, STG 16, ~150 integer / other: ~46 per
// element); other widths 1363 -> 978. The same bits (tests/unit/test_layer_norm_emu.cpp).
// PREDICTED (H100, bench/softmax.py, whole op): issue time halves, so the kernel meets the memory
// side: (65536, 1024) 0.324 -> ~0.295 ms (0.83 -> ~0.89 of copy bandwidth), (16384, 4096) 0.345
// -> ~0.30 (0.78 -> ~0.88); H200 0.269 -> ~0.225, 0.285 -> ~0.235.
// MEASURED (session 16, H100, 2026-11-27, bench/softmax.py, whole op, ms, three libraries that
// differ only in cuda/kernels/layer_norm.cuh, each run twice in one process order): (65536, 1024)
// / (16384, 4096) / (32768, 2048) / (131072, 512): session 10's kernel 0.323 / 0.344 / 0.331 /
// 0.306; (1)-(3) 0.320 / 0.345 / 0.328 / 0.306; (1)-(3) plus d and xhat computed once and
// written over their ring slots (commit 6173b74) 0.322 / 0.350 / 0.333 / 0.306. So halving the
// instructions moved the time by 1% at most: the prediction was wrong, the kernel is not
// issue-bound. ncu ((1)-(4), (65536, 1024)): 310 us, DRAM 77% of peak and exactly the nominal
// bytes, SMs active 95% of the elapsed cycles, 5.6 of 16 warps per scheduler (80 registers, 3
// blocks of 8 warps), 19.4 cycles between a warp's instructions of which 7.5 waiting on the MIO
// queue (shared-memory and cp.async instructions), issue 29% busy. The write-back (4) added
// shared-memory traffic to that queue and was reverted; (1)-(3) stay. What remains is latency
// with too few warps and the 5% of idle SM time at the end of 1024 equal items on 396 slots
// (2.6 waves), not the instruction count. What would be next: d and xhat are still computed 3
// and 2 times per element from shared memory (FMUL 9, FADD 9, LDS 6.4 per element; the
// 80-register cap of 3 blocks per SM). Also session 16: the wide finish as a programmatic
// dependent launch (cuda/common/pdl.cuh: placed while the ring kernel's last blocks run, waiting for
// it; the 1.5 us launch gap and the finish's ramp hidden): PREDICTED ~2-3 us; MEASURED (H100,
// same build with and without, two rounds) (65536, 1024) 0.320 / 0.319 -> 0.318 / 0.319 ms,
// (16384, 4096) 0.345 / 0.345 -> 0.344 / 0.344: ~1 us, kept (nothing to lose).
// SESSION 17, FEWER MIO INSTRUCTIONS: the MIO queue (shared-memory and cp.async instructions)
// was the one wait ncu showed, and 32 of a row step's ~140 MIO instructions per warp were 4-byte
// cp.async copies. The FULL rows' copies are now 16 bytes wide and shared by the warp (the same
// slots: the kernel comment in cuda/kernels/layer_norm.cuh): 8 copies a step instead of 32, the
// LDS count unchanged, one __syncwarp each side of the refill. PREDICTED (H100): ~18% fewer MIO
// instructions, 1-2% faster ((65536, 1024) 0.318 -> ~0.312 ms). MEASURED (H100, 2026-11-27,
// bench/softmax.py, whole op, the same tree with the old kernel header as a second library, three
// rounds): (65536, 1024) 0.318 -> 0.300 ms (0.84 -> 0.89 of copy bandwidth, 0.48x torch),
// (16384, 4096) 0.344 -> 0.316 (0.78 -> 0.85), (32768, 2048) 0.328 -> 0.303 (0.81 -> 0.89),
// (131072, 512) 0.304 (the SA register kernel, unchanged): three times the predicted gain, so
// the queue was the bound, not the latency or the idle SM time suspected above. At 4096 columns
// what is left is the partials (S = 256 lane sets: 34 MB written and read back by the finish, 8%
// of the bytes). Tried after it, the same day: L2 eviction hints (the 16-byte copies of dy and x
// with an evict_first policy, dx by st.global.cs) so that the partials stay in the L2 for the
// finish: slower at every width (0.311 / 0.336 / 0.323 ms against 0.301 / 0.318 / 0.304, three
// rounds), not kept.
// Long rows (cols > 4096): dx by block_row_dx up to 8192 columns (one block per row: S(d) and S(d * xhat) in one
// pass, then dx from L2; 98 registers), or for rows over 2^20 by one chunk_reduce pass with both
// sums, reduce_axis, then chunk_map; dgamma / dbeta by lane_fold: one thread per (chunk k of 4096
// rows, lane t, column j) folds rows 4096 k + t + 256 r (r = 0..15) of dy * xhat and of dy in order
// (dy and x read once more: 8 bytes per element), reduce_axis the rest. Before (2026-11-22):
// 0.33-0.38 of copy bandwidth (28 bytes per element); PREDICTION with block_row_dx: 20 bytes per
// element, ~0.5 (the column pass stays separate: fusing it needs a block to own lanes of rows,
// not whole rows). Measured (H100, 2026-11-24): 0.37 at (4096, 16384), 0.28 at (1024, 65536),
// no better than the chunk passes (0.38 / 0.33): longer rows than 8192 keep them.
#include <mutex>
#include <set>
#include <utility>

#include "core/backend/layer_norm.hpp"
#include "core/backend/memory.hpp"
#include "core/backend/reduce.hpp"
#include "cuda/common/launch.cuh"
#include "cuda/kernels/layer_norm.cuh"

namespace tlrt {
namespace cuda {

namespace {

// Where the one-block-per-row kernels beat the chunk passes (H100, 2026-11-24): the forward at
// 16384 columns 0.68 of copy bandwidth against 0.47, at 65536 0.39 against 0.46 (one 8-warp block
// per SM); dx at 16384 0.37 against 0.38, at 65536 0.28 against 0.33. So dx up to 8192 (more
// blocks per SM there; the whole backward 0.45 at (8192, 8192)), longer rows the chunk passes.
// (The forward holds such rows in registers now: split_fwd.)
constexpr uint64_t kBlockRowBwdMaxCols = 8192;
static_assert(kBlockRowBwdMaxCols <= ln_kernels::kBlockRowMaxCols, "block_row limit");

using row::dev::chunk_map;
using row::dev::chunk_reduce;
using row::dev::Exchange;
using row::dev::kThreads;
using row::dev::Layout;
using row::dev::row_sums;

struct CudaLaunch {
  int dev;
  cudaStream_t st;
  uint64_t max_grid() const { return kMaxGrid; }
  unsigned sms() const { return (unsigned)sm_count(dev); }
  unsigned grid_for(uint64_t items, uint64_t per_block) const { return blocks(items, per_block); }
  template <class K, class... A>
  void operator()(const char *name, K kernel, unsigned grid, A... args) const {
    kernel<<<grid, kThreads, 0, st>>>(args...);
    check_launch(name);
  }
  template <class K, class... A>
  void sized(const char *name, K kernel, unsigned grid, unsigned threads, A... args) const {
    kernel<<<grid, threads, 0, st>>>(args...);
    check_launch(name);
  }
  template <class K, class... A>
  void grid2(const char *name, K kernel, dim3 grid, A... args) const {
    kernel<<<grid, kThreads, 0, st>>>(args...);
    check_launch(name);
  }
  // grid2 as a programmatic dependent launch (cuda/common/pdl.cuh; the kernel calls pdl_wait first).
  template <class K, class... A>
  void grid2_dependent(const char *name, K kernel, dim3 grid, A... args) const {
    launch_dependent(dev, name, kernel, grid, kThreads, 0, st, args...);
  }
  size_t max_smem() const { return smem_optin(dev); }  // cached per device
  // With smem bytes of dynamic shared memory (the kernel's limit raised and shared memory preferred
  // in the carveout first, once per kernel and device, so that 2-3 blocks fit per SM).
  template <class K, class... A>
  void dyn(const char *name, K kernel, unsigned grid, size_t smem, A... args) const {
    allow_smem(dev, reinterpret_cast<const void *>(kernel), name);
    kernel<<<grid, kThreads, smem, st>>>(args...);
    check_launch(name);
  }
  // Raises the kernel's dynamic shared memory limit to the device's opt-in maximum per block
  // (and prefers shared memory over L1 in the carveout), once per (kernel, device).
  static void allow_smem(int dev, const void *kernel, const char *name) {
    static std::mutex mu;
    static std::set<std::pair<const void *, int>> done;
    std::lock_guard<std::mutex> lock(mu);
    if (!done.insert({kernel, dev}).second) return;
    // The limit counts dynamic memory only: the opt-in maximum less the kernel's static shared
    // memory (asking for the whole opt-in maximum is cudaErrorInvalidValue then).
    const int most = (int)smem_optin(dev);
    cudaFuncAttributes fa{};
    check(cudaFuncGetAttributes(&fa, kernel), name);
    check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               most - (int)fa.sharedSizeBytes),
          name);
    check(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                               (int)cudaSharedmemCarveoutMaxShared),
          name);
  }
};

// ---- forward ------------------------------------------------------------------------------------

// At most 80 registers (3 blocks of 256 threads per SM, as the softmax kernels reach unforced):
// unbounded, the compiler hoists every gamma / beta load of the output loop (~100 registers).
template <unsigned NT, unsigned NC, unsigned R>
__global__ void __launch_bounds__(kThreads, 3)
    group_fwd(const float *__restrict x, const float *__restrict gamma,
              const float *__restrict beta, uint64_t rows, uint64_t cols, float n, float eps,
              float *__restrict y, float *__restrict mean, float *__restrict inv_std) {
  using L = Layout<NT, NC, R>;
  __shared__ float sh[2][kThreads * NC];
  Exchange<kThreads * NC> ex{sh, 0};
  const unsigned T = threadIdx.x % NT;
  const uint64_t g0 = threadIdx.x / NT;
  for (uint64_t first = (uint64_t)blockIdx.x * L::kGroups; first < rows;
       first += (uint64_t)gridDim.x * L::kGroups) {
    const uint64_t rw = first + g0;
    const bool active = rw < rows;
    const uint64_t base = active ? rw * cols : 0;
    float v[L::V];
#pragma unroll
    for (unsigned i = 0; i < L::V; ++i) {
      const unsigned e = L::off(T, i);
      v[i] = (active && e < cols) ? x[base + e] : 0.0f;
    }
    float s[1];
    row_sums<NT, NC, R, 1>([&](unsigned, unsigned i) { return v[i]; }, cols, active, ex, s);
    const float mu = row::per_col(s[0], n);
    row_sums<NT, NC, R, 1>([&](unsigned, unsigned i) { return row::sq_dev(v[i], mu); }, cols,
                           active, ex, s);
    const float is = row::inv_std_of(row::per_col(s[0], n), eps);
    if (active) {
#pragma unroll
      for (unsigned i = 0; i < L::V; ++i) {
        const unsigned e = L::off(T, i);
        if (e < cols) y[base + e] = row::ln_out(row::xhat_of(v[i], mu, is), gamma[e], beta[e]);
      }
      if (T == 0) {
        mean[rw] = mu;
        inv_std[rw] = is;
      }
    }
  }
}

struct NoRow {};

struct XF {
  const float *x;
  uint64_t cols;
  __device__ NoRow prep(uint64_t) const { return {}; }
  __device__ void operator()(NoRow, uint64_t rw, uint64_t e, float (&out)[1]) const {
    out[0] = x[rw * cols + e];
  }
};

struct SqF {
  const float *x, *mean;
  uint64_t cols;
  __device__ float prep(uint64_t rw) const { return mean[rw]; }
  __device__ void operator()(float mu, uint64_t rw, uint64_t e, float (&out)[1]) const {
    out[0] = row::sq_dev(x[rw * cols + e], mu);
  }
};

struct RowStat {
  float mean, inv_std;
};

struct OutF {
  const float *x, *gamma, *beta, *mean, *inv_std;
  uint64_t cols;
  __device__ RowStat prep(uint64_t rw) const { return RowStat{mean[rw], inv_std[rw]}; }
  __device__ float operator()(const RowStat &p, uint64_t rw, uint64_t e) const {
    return row::ln_out(row::xhat_of(x[rw * cols + e], p.mean, p.inv_std), gamma[e], beta[e]);
  }
};

__global__ void __launch_bounds__(kThreads)
    inv_std_kernel(const float *__restrict var, uint64_t rows, float eps,
                   float *__restrict inv_std) {
  for (uint64_t i = (uint64_t)blockIdx.x * kThreads + threadIdx.x; i < rows;
       i += (uint64_t)gridDim.x * kThreads)
    inv_std[i] = row::inv_std_of(var[i], eps);
}

void long_fwd(int dev, const float *x, const float *gamma, const float *beta, uint64_t rows,
              uint64_t cols, float n, float eps, float *y, float *mean, float *inv_std) {
  cudaStream_t st = stream(dev);
  const uint64_t nc = red::chunks_of(cols);
  const unsigned grid = blocks(rows * nc, 1);
  FloatScratch part(dev, rows * nc), var(dev, rows);
  chunk_reduce<red::Op::Sum, 1>
      <<<grid, kThreads, 0, st>>>(XF{x, cols}, rows, cols, nc, part.get(), nullptr);
  check_launch("layer_norm chunk_reduce (x)");
  reduce_axis(dev, red::Op::Sum, part.get(), rows, nc, 1, n, mean);
  chunk_reduce<red::Op::Sum, 1>
      <<<grid, kThreads, 0, st>>>(SqF{x, mean, cols}, rows, cols, nc, part.get(), nullptr);
  check_launch("layer_norm chunk_reduce (q)");
  reduce_axis(dev, red::Op::Sum, part.get(), rows, nc, 1, n, var.get());
  inv_std_kernel<<<blocks(rows, kThreads), kThreads, 0, st>>>(var.get(), rows, eps, inv_std);
  check_launch("layer_norm inv_std_kernel");
  chunk_map<<<grid, kThreads, 0, st>>>(OutF{x, gamma, beta, mean, inv_std, cols}, rows, cols, nc,
                                       y);
  check_launch("layer_norm chunk_map (y)");
}

// ---- backward: dx -------------------------------------------------------------------------------

// Long rows: S(d) and S(d * xhat) chunk by chunk, in one pass.
struct TermsF {
  const float *dy, *x, *gamma, *mean, *inv_std;
  uint64_t cols;
  __device__ RowStat prep(uint64_t rw) const { return RowStat{mean[rw], inv_std[rw]}; }
  __device__ void operator()(const RowStat &p, uint64_t rw, uint64_t e, float (&out)[2]) const {
    const uint64_t k = rw * cols + e;
    const float d = row::ln_d(dy[k], gamma[e]);
    out[0] = d;
    out[1] = d * row::xhat_of(x[k], p.mean, p.inv_std);
  }
};

struct RowBwd {
  float mean, inv_std, a, b;
};

struct DxF {
  const float *dy, *x, *gamma, *mean, *inv_std, *a, *b;
  uint64_t cols;
  __device__ RowBwd prep(uint64_t rw) const { return RowBwd{mean[rw], inv_std[rw], a[rw], b[rw]}; }
  __device__ float operator()(const RowBwd &p, uint64_t rw, uint64_t e) const {
    const uint64_t k = rw * cols + e;
    return row::ln_bwd_out(row::ln_d(dy[k], gamma[e]), row::xhat_of(x[k], p.mean, p.inv_std), p.a,
                           p.b, p.inv_std);
  }
};

void long_dx(int dev, const float *dy, const float *x, const float *mean, const float *inv_std,
             const float *gamma, uint64_t rows, uint64_t cols, float n, float *dx) {
  cudaStream_t st = stream(dev);
  const uint64_t nc = red::chunks_of(cols);
  const unsigned grid = blocks(rows * nc, 1);
  FloatScratch p0(dev, rows * nc), p1(dev, rows * nc), a(dev, rows), b(dev, rows);
  chunk_reduce<red::Op::Sum, 2><<<grid, kThreads, 0, st>>>(
      TermsF{dy, x, gamma, mean, inv_std, cols}, rows, cols, nc, p0.get(), p1.get());
  check_launch("layer_norm_bwd chunk_reduce");
  reduce_axis(dev, red::Op::Sum, p0.get(), rows, nc, 1, n, a.get());
  reduce_axis(dev, red::Op::Sum, p1.get(), rows, nc, 1, n, b.get());
  chunk_map<<<grid, kThreads, 0, st>>>(DxF{dy, x, gamma, mean, inv_std, a.get(), b.get(), cols},
                                       rows, cols, nc, dx);
  check_launch("layer_norm_bwd chunk_map (dx)");
}

// ---- backward: dgamma, dbeta --------------------------------------------------------------------

__global__ void __launch_bounds__(kThreads)
    lane_fold(const float *__restrict dy, const float *__restrict x, const float *__restrict mean,
              const float *__restrict inv_std, uint64_t rows, uint64_t cols, unsigned lanes,
              uint64_t nc, float *__restrict pg, float *__restrict pb) {
  const uint64_t total = nc * lanes * cols;
  for (uint64_t q = (uint64_t)blockIdx.x * kThreads + threadIdx.x; q < total;
       q += (uint64_t)gridDim.x * kThreads) {
    const uint64_t kt = q / cols;
    const uint64_t j = q - kt * cols;
    const uint64_t k = kt / lanes;
    const uint64_t i0 = k * red::kChunk + (kt - k * lanes);
    float ag = red::Ops<red::Op::Sum>::identity(), ab = ag;
#pragma unroll
    for (unsigned r = 0; r < red::kDepth; ++r) {
      const uint64_t i = i0 + (uint64_t)r * red::kLanes;
      if (i < rows) {
        const float g = dy[i * cols + j];
        ag = ag + g * row::xhat_of(x[i * cols + j], mean[i], inv_std[i]);
        ab = ab + g;
      }
    }
    pg[q] = ag;
    pb[q] = ab;
  }
}

void column_sums(int dev, const float *dy, const float *x, const float *mean, const float *inv_std,
                 uint64_t rows, uint64_t cols, float *dgamma, float *dbeta) {
  cudaStream_t st = stream(dev);
  const uint64_t nc = red::chunks_of(rows);
  const unsigned lanes = row::col_lanes(rows);
  const uint64_t np = nc * lanes * cols;  // <= rows * cols + 255 * cols
  FloatScratch pg(dev, np), pb(dev, np);
  lane_fold<<<blocks(np, kThreads), kThreads, 0, st>>>(dy, x, mean, inv_std, rows, cols, lanes, nc,
                                                       pg.get(), pb.get());
  check_launch("layer_norm_bwd lane_fold");
  if (nc == 1) {
    reduce_axis(dev, red::Op::Sum, pg.get(), 1, lanes, cols, 1.0f, dgamma);
    reduce_axis(dev, red::Op::Sum, pb.get(), 1, lanes, cols, 1.0f, dbeta);
    return;
  }
  FloatScratch cg(dev, nc * cols), cb(dev, nc * cols);
  reduce_axis(dev, red::Op::Sum, pg.get(), nc, lanes, cols, 1.0f, cg.get());
  reduce_axis(dev, red::Op::Sum, pb.get(), nc, lanes, cols, 1.0f, cb.get());
  reduce_axis(dev, red::Op::Sum, cg.get(), 1, nc, cols, 1.0f, dgamma);
  reduce_axis(dev, red::Op::Sum, cb.get(), 1, nc, cols, 1.0f, dbeta);
}

// ---- dispatch by cols ---------------------------------------------------------------------------

template <unsigned NT, unsigned NC, unsigned R>
void launch_group_fwd(cudaStream_t st, const float *x, const float *gamma, const float *beta,
                      uint64_t rows, uint64_t cols, float n, float eps, float *y, float *mean,
                      float *inv_std) {
  group_fwd<NT, NC, R><<<blocks(rows, kThreads / NT), kThreads, 0, st>>>(x, gamma, beta, rows, cols,
                                                                         n, eps, y, mean, inv_std);
  check_launch("layer_norm group_fwd");
}

// ---- backward, cols <= 4096: dx and the column tree's first levels in one pass ------------------

// The fused backward's schedule is ln_kernels::BwdPlan's defaults, the measured choices (H100,
// 2026-11-24, whole op, bench/softmax.py, ms): two ring stages (64 KiB, 3 blocks per SM) against
// three: (65536, 1024) 0.333 / 0.339, (16384, 4096) 0.350 / 0.359, (32768, 2048) 0.337 / 0.347,
// (131072, 512) 0.324 / 0.321; lane sets merged in pairs at 2049..4096 columns: 0.348 against
// 0.350 at (16384, 4096), within noise, so off; fused_bwd_finish against the three reduce_axis
// launches: 0.333 / 0.332, the same time with two launches fewer (kept). The switches that
// chose them per call are gone. Session 10: the SA register kernel at 257..512 columns
// (BwdPlan::smem_acc; figures at the top of this file).
// The partials (nc, S, cols) of the fused kernels -> dgamma, dbeta: the tree's halving over the S
// values of each chunk (reduce_axis over a sequence of S <= 256 values, one per lane, is exactly
// that; S = 1 is the chunk value itself), then the tree over the nc chunk values. The dgamma and
// dbeta partials are one allocation (pg, then pb), so the level over S is one launch for both
// (outer 2 nc): 3 launches of reduce_axis instead of 4. Where nc <= 256 (rows <= 1M) one launch
// does all of it, the same bits:
// SESSION 10: the wide finish (ln_kernels::fused_bwd_finish_wide, one dependent round of loads
// over 2 nc cols / 32 blocks and the chunk level by the last ticket of each column tile) replaced
// fused_bwd_finish: 3-6 us faster (figures at the kernel); it takes nc <= 256 at every S (rows
// <= 1M); longer columns take the reduce_axis launches below.
// Ticket counters of fused_bwd_finish_wide: kWideCounters per device, zero between launches (the
// last block of each (column tile, array) resets its own), allocated once outside the pool.
ZeroedCounters g_finish_counters[kMaxCudaDevices];

unsigned *finish_counters(int dev) {
  return zeroed_counters(g_finish_counters[dev], ln_kernels::kWideCounters,
                         "cudaMalloc (layer norm finish counters)");
}

void fused_bwd(int dev, const ln_kernels::BwdArgs &a, float *dgamma, float *dbeta) {
  const uint64_t nc = red::chunks_of(a.rows);
  const CudaLaunch launch{dev, stream(dev)};
  const ln_kernels::BwdPlan plan;
  const unsigned S = ln_kernels::fused_lane_sets(a.cols);
  // With one chunk and one lane set the kernel's partials are the column sums themselves.
  const bool direct = nc == 1 && S == 1;
  const uint64_t np = nc * S * a.cols;
  const bool wide = !direct && ln_kernels::fused_bwd_finish_wide_fits(nc, a.cols);
  // The wide finish's chunk values share the partials' allocation (after pg, pb).
  const uint64_t ncv = wide ? ln_kernels::fused_bwd_finish_wide_scratch(nc, S, a.cols) : 0;
  unsigned *counters = wide ? finish_counters(dev) : nullptr;
  FloatScratch part;
  if (!direct) part = FloatScratch(dev, 2 * np + ncv);
  float *pg = direct ? dgamma : part.get(), *pb = direct ? dbeta : part.get() + np;
  ln_kernels::fused_bwd_plan(launch, a, pg, pb, plan);
  if (direct) return;
  if (wide) {
    ln_kernels::fused_bwd_finish_wide_plan(launch, pg, pb, nc, S, a.cols, part.get() + 2 * np,
                                           counters, dgamma, dbeta);
    return;
  }
  if (nc == 1) {
    reduce_axis(dev, red::Op::Sum, pg, 1, S, a.cols, 1.0f, dgamma);
    reduce_axis(dev, red::Op::Sum, pb, 1, S, a.cols, 1.0f, dbeta);
    return;
  }
  FloatScratch cgb;
  const float *g = pg, *b = pb;
  if (S > 1) {
    cgb = FloatScratch(dev, 2 * nc * a.cols);
    reduce_axis(dev, red::Op::Sum, pg, 2 * nc, S, a.cols, 1.0f, cgb.get());
    g = cgb.get();
    b = cgb.get() + nc * a.cols;
  }
  reduce_axis(dev, red::Op::Sum, g, 1, nc, a.cols, 1.0f, dgamma);
  reduce_axis(dev, red::Op::Sum, b, 1, nc, a.cols, 1.0f, dbeta);
}

// ---- forward, 8192 < cols <= 65536: the row in registers (cuda/common/split_row.cuh) -----------------
// Clusters of Q blocks of 256 threads, one cluster per row (the kernel loops past the grid's cap;
// split_row::split_launch_cluster). Only on sm_90+ (split_row::split_has_clusters).
template <unsigned Q, unsigned NCL>
void launch_split_cluster(cudaStream_t st, const float *x, const float *gamma,
                          const float *beta, uint64_t rows, uint64_t cols, float n, float eps,
                          float *y, float *mean, float *inv_std) {
  if (cols == split_row::SplitPart<Q, NCL, true>::kMaxCols)
    split_row::split_launch_cluster<Q>("layer_norm split_fwd_cluster",
                                       ln_kernels::split_fwd_cluster<Q, NCL, true>, rows, st,
                                       x, gamma, beta, rows, cols, n, eps, y, mean, inv_std);
  else
    split_row::split_launch_cluster<Q>("layer_norm split_fwd_cluster",
                                       ln_kernels::split_fwd_cluster<Q, NCL, false>, rows, st,
                                       x, gamma, beta, rows, cols, n, eps, y, mean, inv_std);
}

}  // namespace

void layer_norm_fwd(int dev, const float *x, const float *gamma, const float *beta, uint64_t rows,
                    uint64_t cols, float eps, float *y, float *mean, float *inv_std) {
  cudaStream_t st = stream(dev);
  const float n = static_cast<float>(cols);
#define TLRT_LN_ARGS st, x, gamma, beta, rows, cols, n, eps, y, mean, inv_std
  if (cols <= 32) {
    ln_kernels::seg_fwd_plan(CudaLaunch{dev, st}, x, gamma, beta, rows, (unsigned)cols, n, eps, y,
                             mean, inv_std);
  } else if (cols <= 256) {
    launch_group_fwd<32, 1, 1>(TLRT_LN_ARGS);
  } else if (cols <= 512) {
    launch_group_fwd<32, 1, 2>(TLRT_LN_ARGS);
  } else if (cols <= 1024) {
    launch_group_fwd<32, 1, 4>(TLRT_LN_ARGS);
  } else if (cols <= 2048) {
    launch_group_fwd<64, 1, 8>(TLRT_LN_ARGS);
  } else if (cols <= 4096) {
    launch_group_fwd<128, 1, 16>(TLRT_LN_ARGS);
  } else if (cols <= 8192) {
    launch_group_fwd<256, 2, 16>(TLRT_LN_ARGS);
  } else if (cols <= 16384) {
    // The row in registers: one 512-thread block (Q = 2 groups of NCL = 2 chunks) per row.
    ln_kernels::split_fwd_plan<2, 2>(CudaLaunch{dev, st}, x, gamma, beta, rows, cols, n, eps, y,
                                     mean, inv_std);
  } else if (cols <= 32768 && split_row::split_has_clusters(dev)) {
    launch_split_cluster<4, 2>(TLRT_LN_ARGS);  // a cluster of 4 x 256 threads per row
  } else if (cols <= 65536 && split_row::split_has_clusters(dev)) {
    launch_split_cluster<4, 4>(TLRT_LN_ARGS);
  } else {
    // Longer rows, and rows over 16384 columns without clusters (sm < 90): the chunk passes.
    long_fwd(dev, x, gamma, beta, rows, cols, n, eps, y, mean, inv_std);
  }
#undef TLRT_LN_ARGS
}

void layer_norm_bwd(int dev, const float *dy, const float *x, const float *mean,
                    const float *inv_std, const float *gamma, uint64_t rows, uint64_t cols,
                    float *dx, float *dgamma, float *dbeta) {
  const float n = static_cast<float>(cols);
  if (cols <= ln_kernels::kFusedMaxCols) {
    fused_bwd(dev, ln_kernels::BwdArgs{dy, x, mean, inv_std, gamma, rows, cols, n, dx}, dgamma,
              dbeta);
    return;
  }
  if (cols <= kBlockRowBwdMaxCols) {
    const ln_kernels::BwdArgs a{dy, x, mean, inv_std, gamma, rows, cols, n, dx};
    ln_kernels::block_row_dx_plan(CudaLaunch{dev, stream(dev)}, a);
  } else {
    long_dx(dev, dy, x, mean, inv_std, gamma, rows, cols, n, dx);
  }
  column_sums(dev, dy, x, mean, inv_std, rows, cols, dgamma, dbeta);
}

}  // namespace cuda
}  // namespace tlrt
